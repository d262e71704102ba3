"""One mcp-memory alias call is one recall of each entity it names (session 31).

The aliases that rewrite an entity look it up, then read it again under its lock
(:func:`md_cg.integrations.aliases._holding`); both reads went through the ``get``
tool, which records a recall, so every ``add_observations``, ``delete_observations``,
``create_relations`` and ``delete_relations`` counted its entity twice (an agent's
recall statistics and zombie rate were skewed towards the entities it wrote to).
"""

from __future__ import annotations

from pathlib import Path

from md_cg.mcp_server import create_server


def test_each_alias_call_records_one_recall_of_its_entity(tmp_path: Path) -> None:
    server = create_server(str(tmp_path / "s"), aliases=["mcp-memory"])
    tools, store = server.tools, server.store
    try:
        tools["create_entities"](
            entities=[
                {"name": "E", "entityType": "person", "observations": ["a"]},
                {"name": "F", "entityType": "person", "observations": []},
            ]
        )
        seen = [store.access_counts(["E", "F"])]
        tools["add_observations"](observations=[{"entityName": "E", "contents": ["b"]}])
        seen.append(store.access_counts(["E", "F"]))
        tools["delete_observations"](deletions=[{"entityName": "E", "observations": ["b"]}])
        seen.append(store.access_counts(["E", "F"]))
        tools["create_relations"](relations=[{"from": "E", "to": "F", "relationType": "knows"}])
        seen.append(store.access_counts(["E", "F"]))
        tools["delete_relations"](relations=[{"from": "E", "to": "F", "relationType": "knows"}])
        seen.append(store.access_counts(["E", "F"]))
        tools["open_nodes"](names=["E"])
        seen.append(store.access_counts(["E", "F"]))
        assert [s["E"] for s in seen] == [0, 1, 2, 3, 4, 5]
        assert [s["F"] for s in seen] == [0, 0, 0, 0, 0, 0]
        assert store.get("E").body == "# E (person)\n- a"
        assert store.get("E").edges == []
    finally:
        store.close()
