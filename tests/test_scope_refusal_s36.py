"""Session 36: a scoped handle's write onto a hand-named file of a hidden memory.

A person may give a memory's file any name in its layer (docs/format.md: the id is in the
frontmatter). With another scope's ``hush`` filed by hand as ``contextual/x.md`` -- the very
file ``x`` gets in ``contextual`` --, a scoped handle's ``add(id="x")`` (overwrite or not),
``add_many``, ``apply_changes``, ``rename("mine", "x")`` (with or without a layer),
``move``/``update(layer=)`` and ``archive`` onto that file were refused with "the file
contextual/x.md holds memory 'hush' ..." (session 35's attack found it through the memory
tool, fixed there only). A scoped handle is now told the name is taken by a memory outside
its scope, naming neither that memory's id nor its file; an unscoped handle keeps the full
message. Nothing is written either way (file bytes and mtimes, ``.mdcg/`` included).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from md_cg import MdCG, Node, Scope
from md_cg.errors import DuplicateIdError, InvalidArgumentError

A = Scope(agent="a")
TAKEN = "node id 'x' is taken by a memory outside this handle's scope; choose another id"
MOVE = (
    "node id 'x': the file it would move to holds a memory outside this handle's scope; "
    "it is not written over -- rename 'x' first, then move it"
)
RENAME = (
    "cannot rename 'mine' to 'x': the id is taken by a memory outside this handle's scope; choose another id"
)


def _held(rel: str) -> str:
    return (
        f"node id 'x': the file {rel} holds memory 'hush' (edited by hand, or placed there); it is not "
        "written over -- move that file to its own name, or rename one of them"
    )


def _rename_held(rel: str) -> str:
    return (
        f"cannot rename 'mine' to 'x': the file {rel} holds memory 'hush' (its name is not its id); "
        "move that file to its own name, or choose another id"
    )


#: how ``hush`` is hidden from the scope ``A``: another agent's, or too sensitive
HIDDEN = {"agent": {"agent_scope": "b"}, "secret": {"sensitivity": "secret"}}


def _store(root: Path, hidden: dict[str, str], at: str, *, own_x: str | None = None) -> None:
    """``hush`` (hidden from ``A``) filed by hand at ``at``; ``mine`` (and ``x`` in layer
    ``own_x``) of agent ``a``."""
    with MdCG(root, create=True) as s:
        s.add(Node(id="hush", layer="contextual", body="The door code 4711", **hidden))
        s.add(Node(id="mine", layer="structural", body="mine", agent_scope="a"))
        if own_x is not None:
            s.add(Node(id="x", layer=own_x, body="x of a", agent_scope="a"))
        if at.startswith("archive/"):
            s.archive(["hush"])
    [old] = [p for p in root.rglob("hush.md")]
    (root / at).parent.mkdir(parents=True, exist_ok=True)
    os.rename(old, root / at)


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the store, ``.mdcg/`` (index, log, audit) too, but the lock files."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[:2] != (".mdcg", "locks")
    }


def _new() -> Node:
    return Node(id="x", layer="contextual", body="new text")


WRITES: dict[str, tuple[str, str | None, Callable[[MdCG], object]]] = {
    # name: (where hush's file is, the layer of a's own 'x' or None, the write)
    "add": ("contextual/x.md", None, lambda s: s.add(_new())),
    "add_overwrite": ("contextual/x.md", None, lambda s: s.add(_new(), overwrite=True)),
    "add_many": ("contextual/x.md", None, lambda s: s.add_many([_new()])),
    "add_many_overwrite": ("contextual/x.md", None, lambda s: s.add_many([_new()], overwrite=True)),
    "apply_changes": ("contextual/x.md", None, lambda s: s.apply_changes(add=[_new()])),
    "rename": ("structural/x.md", None, lambda s: s.rename("mine", "x")),
    "rename_layer": ("contextual/x.md", None, lambda s: s.rename("mine", "x", layer="contextual")),
    "move": ("contextual/x.md", "structural", lambda s: s.move("x", "contextual")),
    "update_layer": ("contextual/x.md", "structural", lambda s: s.update("x", layer="contextual")),
    "add_overwrite_moving": ("contextual/x.md", "structural", lambda s: s.add(_new(), overwrite=True)),
    "archive": ("archive/contextual/x.md", "contextual", lambda s: s.archive(["x"])),
}


def _expected(name: str, rel: str, scoped: bool) -> tuple[type[Exception], str]:
    if name.startswith("rename"):
        return InvalidArgumentError, RENAME if scoped else _rename_held(rel)
    moving = WRITES[name][1] is not None
    return DuplicateIdError, (MOVE if moving else TAKEN) if scoped else _held(rel)


@pytest.mark.parametrize("hidden", sorted(HIDDEN))
@pytest.mark.parametrize("name", list(WRITES))
def test_a_scoped_write_onto_a_hidden_memorys_file_names_nothing_of_it(
    tmp_path: Path, name: str, hidden: str
) -> None:
    rel, own_x, write = WRITES[name]
    root = tmp_path / "s"
    _store(root, HIDDEN[hidden], rel, own_x=own_x)
    with MdCG(root, scope=A) as s:
        before = _files(root)
        kind, text = _expected(name, rel, scoped=True)
        with pytest.raises(kind) as got:
            write(s)
        assert str(got.value) == text
        assert "hush" not in str(got.value) and "4711" not in str(got.value) and rel not in str(got.value)
        if isinstance(got.value, DuplicateIdError):  # a move's: the file its own memory would go to
            assert (got.value.node_id, got.value.path) == ("x", rel if WRITES[name][1] else "")
        assert _files(root) == before
    assert _files(root) == before


@pytest.mark.parametrize("name", list(WRITES))
def test_an_unscoped_write_onto_it_still_names_the_memory(tmp_path: Path, name: str) -> None:
    rel, own_x, write = WRITES[name]
    root = tmp_path / "s"
    _store(root, HIDDEN["agent"], rel, own_x=own_x)
    with MdCG(root) as s:
        before = _files(root)
        kind, text = _expected(name, rel, scoped=False)
        with pytest.raises(kind) as got:
            write(s)
        assert str(got.value) == text
        if isinstance(got.value, DuplicateIdError):
            assert (got.value.node_id, got.value.path) == ("x", rel)
    assert _files(root) == before


@pytest.mark.parametrize("name", ["add", "rename", "move"])
def test_a_memory_the_scope_sees_is_still_named_to_it(tmp_path: Path, name: str) -> None:
    """A shared ``hush`` filed as ``x.md`` is one the scoped handle sees: it is named, as before."""
    rel, own_x, write = WRITES[name]
    root = tmp_path / "s"
    _store(root, {}, rel, own_x=own_x)
    with MdCG(root, scope=A) as s:
        before = _files(root)
        kind, text = _expected(name, rel, scoped=False)
        with pytest.raises(kind) as got:
            write(s)
        assert str(got.value) == text
    assert _files(root) == before


def test_a_file_that_says_it_is_in_scope_is_not_named_when_the_index_holds_its_id_out_of_it(
    tmp_path: Path,
) -> None:
    """The file at ``x``'s path claims to be agent ``a``'s ``hush``, while the memory the index
    holds as ``hush`` is agent ``b``'s: naming the id would tell of ``b``'s memory."""
    root = tmp_path / "s"
    _store(root, HIDDEN["agent"], "contextual/hush-b.md")
    text = (root / "contextual/hush-b.md").read_text().replace('agent_scope: "b"\n', 'agent_scope: "a"\n')
    (root / "contextual/x.md").write_text(text)
    with MdCG(root) as s:  # the index holds b's file
        assert s.entry("hush").agent_scope == "b"
    with MdCG(root, scope=A) as s:
        before = _files(root)
        with pytest.raises(DuplicateIdError) as got:
            s.add(_new())
        assert str(got.value) == TAKEN
        assert _files(root) == before


MOVED = (
    "node id 'x': the file it would move to holds a memory outside this handle's scope; it is not "
    "written over -- rename 'x' first, then move it"
)
MCP_CASES = {
    "remember": (
        None,
        {"body": "new text", "id": "x", "layer": "contextual"},
        "id 'x' is taken by a memory outside this server's scope; choose another id",
    ),
    "remember_overwrite": (
        "structural",
        {"body": "new", "id": "x", "layer": "contextual", "overwrite": True},
        MOVED,
    ),
    "update": ("structural", {"id": "x", "layer": "contextual"}, MOVED),
}


@pytest.mark.parametrize("case", list(MCP_CASES))
def test_the_scoped_mcp_server_names_nothing_of_it(tmp_path: Path, case: str) -> None:
    """``mdcg serve --agent a`` (the CLI's one scoped entry point): ``remember`` and ``update``."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from md_cg.mcp_server import create_server

    own_x, args, text = MCP_CASES[case]
    root = tmp_path / "s"
    _store(root, HIDDEN["agent"], "contextual/x.md", own_x=own_x)
    server = create_server(root, scope=A)
    said: list[str] = []
    changed: list[str] = []

    async def run() -> None:
        async with Client(server) as client:
            await client.call_tool("list", {})  # the server's sync of the hand rename is logged first
            before = _files(root)
            got = await client.call_tool(case.split("_")[0], args)
            assert got.is_error
            said.append(got.content[0].text)
            after = _files(root)
            changed.extend(k for k in set(before) | set(after) if before.get(k) != after.get(k))

    anyio.run(run)
    server.store.close()
    assert said == [f"Error executing tool {case.split('_')[0]}: {text}"]
    assert changed == []
