"""A file a person narrowed in place to another scope is not served to a scoped reader
before a sync takes the edit in (attack a2 of session 37, P1, medium, pre-existing).

``x`` is shared; a person edits ``x.md`` to ``agent_scope: "b"``, ``sensitivity: "secret"``.
Until a sync (or a pick-up) the index still says ``x`` is shared, and a handle scoped to
agent a read the file whole: ``get`` returned agent b's secret (the node itself said
``agent_scope b``), ``read_text`` too. Now the file's own scope fields decide: an unknown
id's error; a search hit whose node is so refused is left out of ``inject`` and of the MCP
server's search reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Scope
from md_cg.access import inject_items
from md_cg.errors import DuplicateIdError, NodeNotFoundError
from md_cg.mcp_server import search_reply

SCOPE = Scope(agent="a", max_sensitivity="normal")


def _narrowed(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    with MdCG(root) as m:
        m.add(id="x", body="# Door\n\nThe door code is public knowledge", layer="contextual")
        m.add(id="y", body="# Gate\n\nThe gate code is public knowledge", layer="contextual")
        m.compact_index()
    f = root / "contextual/x.md"
    text = f.read_text(encoding="utf-8")
    text = text.replace('layer: "contextual"', 'layer: "contextual"\nagent_scope: "b"\nsensitivity: "secret"')
    f.write_text(text.replace("public knowledge", "SECRET 4711 of agent b"), encoding="utf-8")
    return root


def test_a_scoped_read_of_a_file_narrowed_in_place_is_refused(tmp_path: Path) -> None:
    root = _narrowed(tmp_path)
    with MdCG(root, scope=SCOPE) as m:
        for read in (m.get, m.read_text):
            with pytest.raises(NodeNotFoundError) as refused:
                read("x")
            assert (str(refused.value).strip("\"'"), refused.value.hidden) == (
                "no node with id 'x' in this store",
                None,
            )
        assert m.get("y").body.endswith("public knowledge")
    with MdCG(root) as unscoped:
        node = unscoped.get("x")
        assert (node.agent_scope, node.sensitivity) == ("b", "secret")


def test_a_search_hit_so_refused_is_left_out_of_inject_and_the_mcp_reply(tmp_path: Path) -> None:
    root = _narrowed(tmp_path)
    with MdCG(root, scope=SCOPE, refresh_interval=None) as m:
        results, meta = m.search("door gate code", record=False)
        assert sorted(r.id for r in results) == ["x", "y"]  # the index still says x is shared
        with pytest.raises(NodeNotFoundError):
            _ = next(r for r in results if r.id == "x").node
        assert [item.id for item in inject_items(m, "door gate code", 5)] == ["y"]
        reply = search_reply(m, results, meta)
        assert [item["id"] for item in reply["results"]] == ["y"]
        assert "SECRET" not in str(reply)
        assert sum(reply["counts"].values()) == 1


@pytest.mark.parametrize(
    "write", ["forget", "delete", "rename", "move", "update", "supersede", "archive", "apply_changes"]
)
def test_a_scoped_write_of_a_file_narrowed_in_place_is_refused(tmp_path: Path, write: str) -> None:
    """Before: ``forget``, ``delete`` and ``rename`` went ahead and returned agent b's secret
    body; ``move`` and ``update`` said "agent_scope 'b' is outside this store handle's scope
    ('a')" (naming the other agent). Now an unknown id's error, nothing written."""
    root = _narrowed(tmp_path)
    before = (root / "contextual/x.md").read_bytes()
    calls = {
        "forget": lambda m: m.forget("x", "done with it"),
        "delete": lambda m: m.delete("x", force=True),
        "rename": lambda m: m.rename("x", "x2"),
        "move": lambda m: m.move("x", "knowledge"),
        "update": lambda m: m.update("x", tags=["t"]),
        "supersede": lambda m: m.supersede("x", "y"),
        "archive": lambda m: m.archive(["x"]),
        "apply_changes": lambda m: m.apply_changes(archive=["x"]),
    }
    with MdCG(root, scope=SCOPE) as m:
        with pytest.raises(NodeNotFoundError) as refused:
            calls[write](m)
        assert str(refused.value).strip("\"'") == "no node with id 'x' in this store"
    assert (root / "contextual/x.md").read_bytes() == before
    assert sorted(p.name for p in (root / "contextual").iterdir()) == ["x.md", "y.md"]


def test_edit_text_and_an_overwrite_of_a_narrowed_file_are_refused(tmp_path: Path) -> None:
    """Attack a4 of session 37: ``edit_text`` handed agent b's secret text to the caller's
    ``change`` before refusing; ``add(overwrite=True)`` replaced it (agent b's memory lost)."""
    root = _narrowed(tmp_path)
    before = (root / "contextual/x.md").read_bytes()
    seen: list[str] = []
    with MdCG(root, scope=SCOPE) as m:
        with pytest.raises(NodeNotFoundError):
            m.edit_text("x", lambda text: seen.append(text) or text)
        with pytest.raises(DuplicateIdError) as taken:
            m.add(id="x", body="mine now", layer="contextual", overwrite=True)
        assert (
            str(taken.value)
            == "node id 'x' is taken by a memory outside this handle's scope; choose another id"
        )
    assert seen == [] and (root / "contextual/x.md").read_bytes() == before
