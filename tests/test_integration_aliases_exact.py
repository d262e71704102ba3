"""The aliases item by item and label by label: relations each on their own, mem0
label filters exact (case included), an empty text refused, a stored text of stop
words found again. Skipped when the ``mcp`` extra is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp.server.mcpserver.exceptions import ToolError

from md_cg import MdCG, import_nodes
from md_cg.integrations.aliases import alias_tools, labelled_id
from md_cg.mcp_server import create_server


def _aliases(root: Path, store: MdCG) -> dict[str, Any]:
    tools = dict(create_server(root, store=store).tools)
    return {name: a.fn for name, a in alias_tools(tools).available.items()}


def _edges(store: MdCG, node_id: str) -> list[tuple[str, str, Any]]:
    return [(e.target, e.type, e.extra.get("relation")) for e in store.get(node_id).edges]


def test_relations_are_created_and_deleted_each_on_its_own(tmp_path: Path) -> None:
    """[B->A, A->A, A->B]: the self edge was refused for the whole call after B->A was
    written, and A->B was dropped; now A->A is listed refused and both others applied.
    An unknown `from` entity is refused too, without stopping the rest."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        al = _aliases(root, store)
        al["create_entities"](
            entities=[{"name": n, "entityType": "t", "observations": []} for n in ("A", "B")]
        )
        reply = al["create_relations"](
            relations=[
                {"from": "B", "to": "A", "relationType": "knows"},
                {"from": "A", "to": "A", "relationType": "self"},
                {"from": "Z", "to": "A", "relationType": "knows"},
                {"from": "A", "to": "B", "relationType": "knows"},
            ]
        )
        assert [u["id"] for u in reply["updated"]] == ["B", "A"]
        assert reply["skipped"] == []
        assert reply["refused"] == [
            {
                "from": "A",
                "to": "A",
                "relationType": "self",
                "reason": "node 'A': an edge to itself (similar); edges link two memories",
            },
            {
                "from": "Z",
                "to": "A",
                "relationType": "knows",
                "reason": "Entity with name Z not found (no md-cg memory has that id)",
            },
        ]
        assert reply["refused"][1]["from"] == "Z"
        assert _edges(store, "B") == [("A", "similar", "knows")]
        assert _edges(store, "A") == [("B", "similar", "knows")]
        gone = al["delete_relations"](
            relations=[
                {"from": "A", "to": "B", "relationType": "knows"},
                {"from": "Z", "to": "A", "relationType": "knows"},
            ]
        )
        assert ([u["id"] for u in gone["updated"]], gone["skipped"], gone["refused"]) == (["A"], ["Z"], [])
        assert (_edges(store, "A"), _edges(store, "B")) == ([], [("A", "similar", "knows")])
        assert sorted(store.ids()) == ["A", "B"]


def test_a_label_filter_is_exact_case_included(tmp_path: Path) -> None:
    """md-cg's tag filter ignores case: `user_id: "alice"` listed and searched Alice's
    salary. Now only alice's memories come back, pages and totals count only hers, and
    a long id (its tag clipped in replies) is told from its case twin too."""
    root = tmp_path / "m"
    long_id = "3f2a9c1e-5b7d-4e8f-a1b2-c3d4e5f6a7b8-Team"
    with MdCG(root) as store:
        al = _aliases(root, store)
        ids = {
            (user, text): al["add_memory"](text=text, user_id=user)["id"]
            for user, text in [
                ("Alice", "My salary is 100k"),
                ("alice", "I like hiking"),
                ("Alice", "My salary rose in May"),
                ("alice", "My salary is private"),
                ("alice", "I ride a bike"),
                (long_id, "The team salary budget"),
                (long_id.lower(), "The team salary review"),
            ]
        }
        mine = {ids[("alice", t)] for t in ("I like hiking", "My salary is private", "I ride a bike")}
        theirs = [ids[("Alice", t)] for t in ("My salary is 100k", "My salary rose in May")]
        seen = store.access_counts(theirs)
        listed = al["get_memories"](filters={"user_id": "alice"})
        assert ({i["id"] for i in listed["items"]}, listed["total"]) == (mine, 3)
        pages = [al["get_memories"](filters={"user_id": "alice"}, page=p, page_size=2) for p in (1, 2, 3)]
        assert [len(p["items"]) for p in pages] == [2, 1, 0]
        assert [p["total"] for p in pages] == [3, 3, 3]
        assert {i["id"] for p in pages for i in p["items"]} == mine
        assert store.access_counts(theirs) == seen  # reading Alice's tags to leave them out is no recall
        found = al["search_memories"](query="salary", filters={"user_id": "alice"})
        assert [r["id"] for r in found["results"]] == [ids[("alice", "My salary is private")]]
        assert found["counts"] == {"DEFER": 1}  # recounted: Alice's left out
        big = al["search_memories"](query="salary", filters={"user_id": "Alice"}, limit=1)
        assert [r["id"] for r in big["results"]] in (
            [ids[("Alice", "My salary is 100k")]],
            [ids[("Alice", "My salary rose in May")]],
        )
        both = al["search_memories"](
            query="salary", filters={"AND": [{"user_id": "Alice"}, {"user_id": "Alice"}]}
        )
        assert {r["id"] for r in both["results"]} == {
            ids[("Alice", "My salary is 100k")],
            ids[("Alice", "My salary rose in May")],
        }
        team = al["search_memories"](query="team salary", filters={"user_id": long_id})
        assert [r["id"] for r in team["results"]] == [ids[(long_id, "The team salary budget")]]
        listed = al["get_memories"](filters={"user_id": long_id.lower()})
        assert [i["id"] for i in listed["items"]] == [ids[(long_id.lower(), "The team salary review")]]


def test_add_memory_refuses_an_empty_text(tmp_path: Path) -> None:
    """A blank text was answered "query is empty: give the words to search for"."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        al = _aliases(root, store)
        for text in ("", "   ", "\n\t"):
            with pytest.raises(ToolError) as info:
                al["add_memory"](text=text, user_id="alice")
            assert str(info.value) == "text: the memory text is empty; give the fact to remember as text"
        with pytest.raises(ToolError, match=r"^text: the memory text is empty"):
            al["add_memory"](text=" ")
        assert store.ids() == []


def test_an_imported_text_of_stop_words_is_found_again(tmp_path: Path) -> None:
    """An imported mem0 memory of stop words only ("it is what it is") has its own id,
    not labelled_id, and search cannot find it: add_memory stored it a second time."""
    source = tmp_path / "mem0.json"
    records = [
        {"id": "0b1c-uuid", "memory": "I like green tea in the morning", "user_id": "alice"},
        {"id": "0b1d-uuid", "memory": "it is what it is", "user_id": "alice"},
        {"id": "0b1e-uuid", "memory": "it is what it was", "user_id": "alice"},
    ]
    source.write_text(json.dumps({"results": records}), encoding="utf-8")
    root = tmp_path / "m"
    with MdCG(root) as store:
        import_nodes(store, source)
        al = _aliases(root, store)
        tea = al["add_memory"](text="I like green tea in the morning", user_id="alice")
        same = al["add_memory"](text="it is what it is\n", user_id="alice")
        assert (tea["id"], tea["existing"], same["id"], same["existing"]) == (
            "0b1c-uuid",
            True,
            "0b1d-uuid",
            True,
        )
        other = al["add_memory"](text="it is what it is", user_id="Alice")  # another user: her own
        assert "existing" not in other and other["id"] == labelled_id("it is what it is", ["user:Alice"])
        assert sorted(store.ids()) == sorted(["0b1c-uuid", "0b1d-uuid", "0b1e-uuid", other["id"]])
        assert al["get_memories"](filters={"user_id": "alice"})["total"] == 3
