"""Claude's memory tool: rename as one commit, edits held to create's body checks,
case and normalisation twins named, ``async with`` (session 26 review).

Skipped when the ``anthropic`` extra is not installed; nothing needs the network.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic.lib.tools import ToolError  # noqa: E402
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818CreateCommand as Create,
)
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818DeleteCommand as Delete,
)
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818InsertCommand as Insert,
)
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818RenameCommand as Rename,
)
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818StrReplaceCommand as StrReplace,
)
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818ViewCommand as View,
)
from conftest import python_env  # noqa: E402

from md_cg import MdCG, Node, Scope  # noqa: E402
from md_cg.errors import StoreClosedError  # noqa: E402
from md_cg.integrations.anthropic_memory import AsyncMdCGMemoryTool, MdCGMemoryTool  # noqa: E402
from md_cg.migrate import migrate  # noqa: E402

TWIN_WHY = (
    "(names that differ only by letter case or Unicode normalisation are one file on macOS and Windows)"
)


@pytest.fixture
def tool(tmp_path: Path):
    with MdCGMemoryTool(tmp_path / "mem") as t:
        yield t


def error(tool: MdCGMemoryTool, command: object) -> str:
    with pytest.raises(ToolError) as info:
        tool.execute(command)  # type: ignore[arg-type]
    return str(info.value)


# -- 1. rename is MdCG.rename: one commit, recorded ------------------------------------------

RENAMER = r"""
import sys
from pathlib import Path
from anthropic.types.beta import BetaMemoryTool20250818RenameCommand as Rename
from md_cg.integrations.anthropic_memory import MdCGMemoryTool
root, rounds = sys.argv[1], int(sys.argv[2])
done = 0
with MdCGMemoryTool(root) as tool:
    Path(root, "..", "renamer-started").touch()
    for _ in range(rounds):
        for a, b in (("x", "y"), ("y", "x")):
            tool.execute(Rename(command="rename", old_path=f"/memories/{a}.md", new_path=f"/memories/{b}.md"))
            done += 1
Path(root, "..", "renamer-done").touch()
print(done)
"""

INSERTER = r"""
import json, sys
from pathlib import Path
from anthropic.lib.tools import ToolError
from anthropic.types.beta import BetaMemoryTool20250818InsertCommand as Insert
from md_cg.integrations.anthropic_memory import MdCGMemoryTool
root = sys.argv[1]
acked, n = [], 0
with MdCGMemoryTool(root) as tool:
    while not Path(root, "..", "renamer-started").exists():
        pass
    while not Path(root, "..", "renamer-done").exists() or len(acked) < 20:
        n += 1
        for name in ("x", "y"):  # the file is under one of the two names at any time
            try:
                tool.execute(Insert(command="insert", path=f"/memories/{name}.md", insert_line=9,
                                    insert_text=f"marker-{n}"))
            except ToolError:  # not there now: nothing written, as the final file shows
                continue
            else:
                acked.append(f"marker-{n}")
                break
print(json.dumps(acked))
"""


def test_an_insert_acknowledged_during_a_rename_in_another_process_is_kept(tmp_path: Path) -> None:
    """Two processes on one file: one renames it x -> y -> x, one inserts lines, trying
    both names. Every insert the tool acknowledged is in the final file, once, and
    nothing else is: the rename used to copy the node, re-point edges and delete the
    old id in separate steps, and an insert acknowledged in between was deleted with
    the old id (thousands lost in 8 s)."""
    root = tmp_path / "mem"
    with MdCGMemoryTool(root) as tool:
        tool.execute(Create(command="create", path="/memories/x.md", file_text="start"))
    rounds = 25  # 50 renames: the copy-and-delete rename lost hundreds of inserts in fewer
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(root), *extra],
            env=python_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for script, extra in ((INSERTER, ()), (RENAMER, (str(rounds),)))
    ]
    outs = [p.communicate(timeout=900) for p in procs]  # a loaded 2-core machine: minutes
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    acked = json.loads(outs[0][0])
    assert int(outs[1][0]) == 2 * rounds
    assert len(acked) >= 20
    with MdCG(root) as store:
        store.refresh()
        assert store.ids() == ["x"]  # an even number of renames
        lines = store.get("x").body.split("\n")
        assert sorted(lines) == sorted(["start", *acked])
        assert store.health().ok


def _source(path: Path) -> Path:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE nodes (id, layer, content)")
        conn.executemany(
            "INSERT INTO nodes (id, layer, content) VALUES (?, ?, ?)",
            [("a1", "knowledge", "hello world"), ("a2", "knowledge", "the sky is blue")],
        )
    conn.close()
    return path


def test_a_rename_with_the_tool_is_not_undone_by_a_second_migrate(tmp_path: Path) -> None:
    """The tool's rename is recorded (``renamed`` in the audit log) as ``MdCG.rename``'s
    is, so running ``migrate`` again keeps the old id out; it used to write it back
    beside the renamed memory (two copies)."""
    src, root = _source(tmp_path / "src.sqlite"), tmp_path / "mem"
    first = migrate(src, root)
    assert first.ok and first.created == 2
    with MdCGMemoryTool(root) as tool:
        tool.store.add(
            Node(id="src", layer="knowledge", body="see a1", edges=[{"target": "a1", "type": "causal"}])
        )
        reply = tool.execute(
            Rename(command="rename", old_path="/memories/knowledge/a1.md", new_path="/memories/self/tea.md")
        )
        assert reply == "Successfully renamed /memories/knowledge/a1.md to /memories/self/tea.md"
        assert [(e.target, e.type) for e in tool.store.get("src").edges] == [("tea", "causal")]
        assert tool.store.tombstones() == []  # a rename is no forget
    again = migrate(src, root)
    assert again.ok and (again.created, again.updated) == (0, 0)
    assert [(i, why.split(" (")[0]) for i, why in again.kept] == [("a1", "renamed to 'tea' in this store")]
    with MdCG(root) as store:
        assert store.ids() == ["a2", "src", "tea"]
        tea = store.get("tea")
        assert (tea.layer, tea.body) == ("self", "hello world")
        assert store.health().ok


def test_rename_refusals_stay_as_documented(tool: MdCGMemoryTool) -> None:
    for name, text in (("a", "fact a"), ("b", "fact b"), ("Project", "upper")):
        tool.execute(Create(command="create", path=f"/memories/{name}.md", file_text=text))
    tool.store.archive("b", reason="old")
    assert error(tool, Rename(command="rename", old_path="/memories/a.md", new_path="/memories/b.md")) == (
        "The destination /memories/b.md already exists"
    )
    assert error(
        tool, Rename(command="rename", old_path="/memories/a.md", new_path="/memories/project.md")
    ) == (
        "The destination /memories/project.md already exists: /memories/project.md collides with the "
        f"existing /memories/contextual/Project.md {TWIN_WHY}"
    )
    assert error(
        tool, Rename(command="rename", old_path="/memories/Project.md", new_path="/memories/project.md")
    ) == (
        "Cannot rename /memories/Project.md to /memories/project.md: 'Project' and 'project' differ only "
        "by case or normalisation: one file on macOS/Windows; to change only that, rename it to another "
        "id first, then to this one"
    )
    assert sorted(tool.store.ids()) == ["Project", "a"]


# -- 2. str_replace and insert: the body checks of create ------------------------------------

CONFLICT = "<<<<<<< HEAD\na\n=======\nb\n>>>>>>> branch"


def test_edits_refuse_conflict_markers_and_nul_as_create_does(tool: MdCGMemoryTool) -> None:
    said_create = error(
        tool, Create(command="create", path="/memories/c.md", file_text="code:\n" + CONFLICT + "\n")
    )
    tool.execute(Create(command="create", path="/memories/ok.md", file_text="fine"))
    path = tool.store.path_of("ok")
    before, mtime = path.read_bytes(), os.stat(path).st_mtime_ns
    said = [
        error(
            tool,
            StrReplace(
                command="str_replace", path="/memories/ok.md", old_str="fine", new_str="fine\n" + CONFLICT
            ),
        ),
        error(tool, Insert(command="insert", path="/memories/ok.md", insert_line=9, insert_text="x\x00y")),
    ]
    markers = (
        "the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) outside a code block, so sync "
        "would take it for an unresolved merge; put such text in a fenced code block (```)"
    )
    assert said_create == f"Cannot create /memories/c.md: node 'c': {markers}"
    assert said == [
        f"No replacement was performed: the edited file is refused: node 'ok': {markers}",
        "No insertion was performed: the edited file is refused: node 'ok': the body holds a NUL "
        "character (at 6); git would take the file for binary and show no diff of it",
    ]
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == (before, mtime)
    assert tool.store.ids() == ["ok"]
    # in a fenced code block the markers are text, as for create
    fenced = "fine\n```\n" + CONFLICT + "\n```"
    reply = tool.execute(
        StrReplace(command="str_replace", path="/memories/ok.md", old_str="fine", new_str=fenced)
    )
    assert reply.startswith("The memory file has been edited.")
    assert tool.store.get("ok").body == fenced
    # the snippet shows the file as written
    lines = path.read_text(encoding="utf-8").split("\n")
    assert reply.split("\n")[1:] == [f"{n:>6}\t{lines[n - 1]}" for n in range(7, 12)]


# -- 3. case and normalisation twins are named --------------------------------------------


def test_a_name_in_its_other_unicode_form_is_the_memory(tool: MdCGMemoryTool) -> None:
    """Session 42 (``views.as_stored``): ``café`` typed decomposed (NFD, as macOS writes
    file names) is the stored ``café`` -- one file on macOS and Windows too -- so create
    says it exists, view reads it and delete removes it (before, each named it a twin)."""
    tool.execute(Create(command="create", path="/memories/café.md", file_text="the stored one"))
    path = f"/memories/{unicodedata.normalize('NFD', 'café')}.md"
    assert error(tool, Create(command="create", path=path, file_text="another")) == (
        f"File {path} already exists (as /memories/contextual/café.md: file names are unique in /memories)"
    )
    shown = tool.execute(View(command="view", path=path))
    assert shown.startswith(f"Here's the content of {path} (stored as /memories/contextual/café.md) with")
    assert tool.execute(Delete(command="delete", path=path)) == f"Successfully deleted {path}"
    assert tool.store.ids() == []


@pytest.mark.parametrize(("stored", "asked"), [("Project", "project")], ids=["case"])
def test_a_twin_name_is_named_by_create_and_by_does_not_exist(
    tool: MdCGMemoryTool, stored: str, asked: str
) -> None:
    tool.execute(Create(command="create", path=f"/memories/{stored}.md", file_text="the stored one"))
    path = f"/memories/{asked}.md"
    clash = f"{path} collides with the existing /memories/contextual/{stored}.md {TWIN_WHY}"
    missing = f"The path {path} does not exist. Please provide a valid path. {clash}."
    assert (
        error(tool, Create(command="create", path=path, file_text="another"))
        == f"Cannot create {path}: {clash}"
    )
    assert error(tool, View(command="view", path=path)) == missing
    assert error(tool, StrReplace(command="str_replace", path=path, old_str="the", new_str="a")) == missing
    assert error(tool, Insert(command="insert", path=path, insert_line=0, insert_text="x")) == missing
    assert error(tool, Delete(command="delete", path=path)) == f"The path {path} does not exist. {clash}."
    assert error(tool, Rename(command="rename", old_path=path, new_path="/memories/z.md")) == (
        f"The path {path} does not exist. {clash}."
    )
    assert tool.store.ids() == [stored] and tool.store.get(stored).body == "the stored one"
    # a plain missing file keeps the documented text
    assert error(tool, View(command="view", path="/memories/ghost.md")) == (
        "The path /memories/ghost.md does not exist. Please provide a valid path."
    )


def test_a_twin_outside_the_handles_scope_is_not_named(tmp_path: Path) -> None:
    """Another agent's memory holds the name's twin: the scoped tool refuses the create
    as rename refuses an id taken outside its scope, and names no file of that agent."""
    root = tmp_path / "mem"
    with MdCG(root, scope=Scope(agent="alice")) as alice:
        alice.add(id="Project", layer="contextual", body="alice's plan")
    with MdCGMemoryTool(MdCG(root, scope=Scope(agent="bob"))) as bob:
        assert error(bob, Create(command="create", path="/memories/project.md", file_text="bob's")) == (
            "Cannot create /memories/project.md: the id 'project' is taken by a memory outside this "
            "handle's scope; choose another name"
        )
        assert error(bob, View(command="view", path="/memories/project.md")) == (
            "The path /memories/project.md does not exist. Please provide a valid path."
        )
        bob.store.close()


# -- 4. async with --------------------------------------------------------------------------


def test_async_tool_supports_async_with(tmp_path: Path) -> None:
    anyio = pytest.importorskip("anyio")

    async def scenario() -> tuple[AsyncMdCGMemoryTool, str]:
        async with AsyncMdCGMemoryTool(tmp_path / "mem") as tool:
            await tool.execute(Create(command="create", path="/memories/a.md", file_text="async fact"))
            return tool, await tool.execute(View(command="view", path="/memories/a.md"))

    tool, view = anyio.run(scenario)
    assert view.endswith("\tasync fact")
    with pytest.raises(StoreClosedError):  # the store it opened is closed
        tool.store.add(Node(id="b", layer="contextual", body="after close"))

    async def on_open_store(store: MdCG) -> None:
        async with AsyncMdCGMemoryTool(store) as tool:
            await tool.execute(Create(command="create", path="/memories/b.md", file_text="kept open"))

    with MdCG(tmp_path / "mem") as store:
        anyio.run(on_open_store, store)
        assert store.get("b").body == "kept open"  # the caller's store stays open
