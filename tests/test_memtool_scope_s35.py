"""Attack a1 (session 35), findings 3 and 4: the memory tool's paths of files that are
no memory this handle can use.

3. A stray file without ``.md`` (a scratch ``contextual/todo``) beside the memory
   ``todo`` at ``contextual/todo.md`` made ``view /memories/contextual/todo`` say "does
   not exist" (074eb32 took the file at the path itself first, though md-cg reads
   ``.md`` files only); every command now resolves such a path to its ``.md`` file.
4. A scoped tool named a hidden memory: with the secret ``hush`` filed by hand as
   ``contextual/notes.md``, ``rename beta.md -> notes.md`` replied "the file
   contextual/notes.md holds memory 'hush'", and ``create notes.md`` "the id 'notes' is
   taken by a memory outside this handle's scope" (no memory has that id). A file the
   handle sees no memory in is now "already exists", as a broken file there is: the
   replies cannot tell them apart, and nothing is written.

Skipped when the ``anthropic`` extra is not installed; nothing needs the network.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("anthropic")

from anthropic.types.beta import BetaMemoryTool20250818CreateCommand as Create
from anthropic.types.beta import BetaMemoryTool20250818DeleteCommand as Delete
from anthropic.types.beta import BetaMemoryTool20250818InsertCommand as Insert
from anthropic.types.beta import BetaMemoryTool20250818RenameCommand as Rename
from anthropic.types.beta import BetaMemoryTool20250818StrReplaceCommand as StrReplace
from test_integration_s28_memtool import error, view

from md_cg import MdCG, Node
from md_cg.integrations.anthropic_memory import MdCGMemoryTool

C = "/memories/contextual/"
SCRATCH = b"scratch, not a memory\n"


def _tree(root: Path) -> dict[str, bytes]:
    """Every file of the store folder but md-cg's own (``.mdcg``), with its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.relative_to(root).as_posix().startswith(".mdcg")
    }


def _memory_folders(root: Path) -> list[str]:
    """The files in the layer folders (not ``.gitattributes`` and the like)."""
    return sorted(rel for rel in _tree(root) if not rel.startswith("."))


def _forgotten(root: Path) -> list[str]:
    with MdCG(root) as store:
        return [t["id"] for t in store.tombstones() if t.get("event") != "restored"]


def _body(root: Path, rel: str) -> str:
    return (root / rel).read_text().split("---\n", 2)[2]


# -- 3. a stray file without .md -------------------------------------------------------------


def _stray(root: Path, name: str = "todo") -> None:
    """Memory ``todo`` at ``contextual/<name>.md`` (hand-named unless ``name`` is todo),
    memory ``beta``, and a scratch file ``contextual/<name>`` beside them."""
    with MdCG(root, create=True) as store:
        store.add(Node(id="todo", layer="contextual", body="TODO list"))
        store.add(Node(id="beta", layer="contextual", body="BETA"))
    if name != "todo":
        os.rename(root / "contextual" / "todo.md", root / "contextual" / f"{name}.md")
    (root / "contextual" / name).write_bytes(SCRATCH)


@pytest.mark.parametrize("name", ["todo", "list"])
def test_a_path_without_md_is_its_md_file_beside_a_stray_file(tmp_path: Path, name: str) -> None:
    _stray(tmp_path, name)
    path = C + name
    with MdCGMemoryTool(tmp_path) as tool:
        shown = view(tool, path).split("\n")
        assert shown[0] == f"Here's the content of {path} (stored as {path}.md) with line numbers:"
        assert shown[2] == '     2\tid: "todo"' and shown[-1] == "     7\tTODO list"
        replaced = tool.execute(StrReplace(command="str_replace", path=path, old_str="TODO", new_str="To do"))
        assert str(replaced).startswith("The memory file has been edited.")
        inserted = tool.execute(Insert(command="insert", path=path, insert_line=7, insert_text="- milk"))
        assert str(inserted) == f"The file {path} has been edited."
        assert _body(tmp_path, f"contextual/{name}.md") == "To do list\n- milk\n"
        renamed = tool.execute(Rename(command="rename", old_path=path, new_path=C + "chores.md"))
        assert str(renamed) == f"Successfully renamed {path} to {C}chores.md"
        assert (
            str(tool.execute(Delete(command="delete", path=C + "chores")))
            == f"Successfully deleted {C}chores"
        )
    assert _forgotten(tmp_path) == ["chores"]
    assert (tmp_path / "contextual" / name).read_bytes() == SCRATCH  # the scratch file is untouched
    assert _memory_folders(tmp_path) == ["contextual/beta.md", f"contextual/{name}"]


def test_delete_of_a_path_without_md_beside_a_stray_file(tmp_path: Path) -> None:
    _stray(tmp_path)
    with MdCGMemoryTool(tmp_path) as tool:
        assert str(tool.execute(Delete(command="delete", path=C + "todo"))) == f"Successfully deleted {C}todo"
    assert _forgotten(tmp_path) == ["todo"]
    assert _memory_folders(tmp_path) == ["contextual/beta.md", "contextual/todo"]


def test_create_and_rename_onto_a_hand_named_file_beside_a_stray_file(tmp_path: Path) -> None:
    """``contextual/list`` (scratch) and ``contextual/list.md`` (memory todo): the path
    ``/memories/contextual/list`` is todo's file, for create and rename too."""
    _stray(tmp_path, "list")
    before = _tree(tmp_path)
    with MdCGMemoryTool(tmp_path) as tool:
        assert error(tool, Create(command="create", path=C + "list", file_text="new")) == (
            f"File {C}list already exists (as {C}list.md: file names are unique in /memories)"
        )
        renamed = Rename(command="rename", old_path=C + "beta.md", new_path=C + "list")
        assert error(tool, renamed) == f"The destination {C}list already exists"
    assert _tree(tmp_path) == before and _forgotten(tmp_path) == []


# -- 4. a scoped tool never names a hidden memory ----------------------------------------------


def _scoped(root: Path, obstacle: str) -> None:
    """Memory ``beta`` (seen by the default scope), the secret ``hush``, and at
    ``contextual/notes.md``: ``hush`` filed there by hand (``hidden``), a secret memory
    ``notes`` (``hidden-own``), or a file that is no memory (``broken``)."""
    with MdCG(root, create=True) as store:
        store.add(Node(id="beta", layer="contextual", body="BETA"))
        store.add(Node(id="hush", layer="contextual", body="The door code 4711", sensitivity="secret"))
        if obstacle == "hidden-own":
            store.add(Node(id="notes", layer="contextual", body="Secret notes", sensitivity="secret"))
    if obstacle == "hidden":
        os.rename(root / "contextual" / "hush.md", root / "contextual" / "notes.md")
    if obstacle == "broken":
        (root / "contextual" / "notes.md").write_text("---\nid: [\n---\nbody\n")


def _replies(tool: MdCGMemoryTool) -> list[str]:
    out = []
    for path in (C + "notes.md", C + "notes"):
        out.append(error(tool, Create(command="create", path=path, file_text="my notes")))
        out.append(error(tool, Rename(command="rename", old_path=C + "beta.md", new_path=path)))
        out.append(error(tool, StrReplace(command="str_replace", path=path, old_str="door", new_str="x")))
        out.append(error(tool, Delete(command="delete", path=path)))
    return out


@pytest.mark.parametrize("obstacle", ["hidden", "hidden-own", "broken"])
def test_a_scoped_tool_cannot_tell_a_hidden_memory_file_from_a_broken_one(
    tmp_path: Path, obstacle: str
) -> None:
    _scoped(tmp_path, obstacle)
    before = _tree(tmp_path)
    with MdCGMemoryTool(tmp_path) as tool:
        replies = _replies(tool)
    assert replies == [
        f"File {C}notes.md already exists",
        f"The destination {C}notes.md already exists",
        f"The path {C}notes.md does not exist. Please provide a valid path.",
        f"The path {C}notes.md does not exist",
        f"File {C}notes already exists",
        f"The destination {C}notes already exists",
        f"The path {C}notes does not exist. Please provide a valid path.",
        f"The path {C}notes does not exist",
    ]
    assert _tree(tmp_path) == before and _forgotten(tmp_path) == []


def test_a_hidden_memory_file_in_a_bucket_is_not_named(tmp_path: Path) -> None:
    """A knowledge path names no bucket: the file the rename or create would write
    (``knowledge/orphan/notes.md``) is the hidden memory's, and the store's refusal
    named it; the reply is "already exists"."""
    with MdCG(tmp_path, create=True) as store:
        store.add(Node(id="kb", layer="knowledge", body="KB"))
        store.add(Node(id="hush", layer="knowledge", body="The door code 4711", sensitivity="secret"))
        kb, hush = store.entry("kb").path, store.entry("hush").path
    assert (kb, hush) == ("knowledge/orphan/kb.md", "knowledge/orphan/hush.md")
    os.rename(tmp_path / hush, tmp_path / "knowledge" / "orphan" / "notes.md")
    before = _tree(tmp_path)
    with MdCGMemoryTool(tmp_path) as tool:
        renamed = Rename(
            command="rename", old_path="/memories/" + kb, new_path="/memories/knowledge/notes.md"
        )
        assert error(tool, renamed) == "The destination /memories/knowledge/notes.md already exists"
        created = Create(command="create", path="/memories/knowledge/notes.md", file_text="mine")
        assert error(tool, created) == "File /memories/knowledge/notes.md already exists"
    assert _tree(tmp_path) == before and _forgotten(tmp_path) == []


def _hush_as_structural_beta(root: Path) -> None:
    with MdCG(root, create=True) as store:
        store.add(Node(id="beta", layer="contextual", body="BETA"))
        store.add(Node(id="hush", layer="structural", body="The door code 4711", sensitivity="secret"))
    os.rename(root / "structural" / "hush.md", root / "structural" / "beta.md")


def test_a_move_onto_a_hidden_memory_file_is_not_named(tmp_path: Path) -> None:
    """A rename to another layer, and an edit of the ``layer:`` line, onto the file of a
    hidden memory: the store's refusal (which names ``hush``) came back as a raw
    ``DuplicateIdError``."""
    _hush_as_structural_beta(tmp_path)
    before = _tree(tmp_path)
    with MdCGMemoryTool(tmp_path) as tool:
        moved = Rename(command="rename", old_path=C + "beta.md", new_path="/memories/structural/beta.md")
        assert error(tool, moved) == "The destination /memories/structural/beta.md already exists"
        relayered = StrReplace(
            command="str_replace",
            path=C + "beta.md",
            old_str='layer: "contextual"',
            new_str='layer: "structural"',
        )
        assert error(tool, relayered) == (
            "No replacement was performed: the edited file is refused: "
            "/memories/structural/beta.md already exists"
        )
    assert _tree(tmp_path) == before and _forgotten(tmp_path) == []


def test_an_unscoped_tool_still_says_whose_file_it_is(tmp_path: Path) -> None:
    """An unscoped handle sees every memory: the store's words, as a ToolError."""
    _hush_as_structural_beta(tmp_path)
    with MdCGMemoryTool(tmp_path, scope=None) as tool:
        relayered = StrReplace(
            command="str_replace",
            path=C + "beta.md",
            old_str='layer: "contextual"',
            new_str='layer: "structural"',
        )
        assert error(tool, relayered) == (
            "No replacement was performed: the edited file is refused: node id 'beta': the file "
            "structural/beta.md holds memory 'hush' (edited by hand, or placed there); it is not written "
            "over -- move that file to its own name, or rename one of them"
        )


def test_an_id_taken_elsewhere_by_a_hidden_memory_is_still_said(tmp_path: Path) -> None:
    """No file at the path: the id ``notes`` is a hidden memory's (in another layer), as
    before."""
    with MdCG(tmp_path, create=True) as store:
        store.add(Node(id="beta", layer="contextual", body="BETA"))
        store.add(Node(id="notes", layer="structural", body="Secret notes", sensitivity="secret"))
    with MdCGMemoryTool(tmp_path) as tool:
        assert error(tool, Create(command="create", path=C + "notes.md", file_text="mine")) == (
            f"Cannot create {C}notes.md: the id 'notes' is taken by a memory outside this handle's scope; "
            "choose another name"
        )
        renamed = Rename(command="rename", old_path=C + "beta.md", new_path=C + "notes.md")
        assert error(tool, renamed) == (
            f"Cannot rename {C}beta.md to {C}notes.md: cannot rename 'beta' to 'notes': the id is taken by "
            "a memory outside this handle's scope; choose another id"
        )
