"""Review rF (session 35): Claude's memory tool addresses the file a path names.

A person may give a memory's file any name in its layer (docs/format.md), and a
folder ``view`` lists that real path; every other command read a path as an id
taken from the file name. So a hand-renamed ``contextual/my-notes.md`` (memory
``note0``) was listed, then "does not exist" to ``view`` and ``delete``; and gamma
filed as ``contextual/projects/beta.md`` was shown as beta, and its ``delete``
forgot beta (a tombstone), leaving gamma's file. Now the memory listed at a path is
the one addressed; a file there this handle does not list (another scope's) stands
for no memory, never for the memory its name spells.

Skipped when the ``anthropic`` extra is not installed; nothing needs the network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("anthropic")

from anthropic.types.beta import BetaMemoryTool20250818CreateCommand as Create
from anthropic.types.beta import BetaMemoryTool20250818DeleteCommand as Delete
from anthropic.types.beta import BetaMemoryTool20250818InsertCommand as Insert
from anthropic.types.beta import BetaMemoryTool20250818RenameCommand as Rename
from anthropic.types.beta import BetaMemoryTool20250818StrReplaceCommand as StrReplace
from anthropic.types.beta import BetaMemoryTool20250818ViewCommand as View
from conftest import python_env
from test_integration_s28_memtool import error, view

from md_cg import MdCG, Node
from md_cg.integrations.anthropic_memory import MdCGMemoryTool

MY_NOTES = "/memories/contextual/my-notes.md"
FILED = "/memories/contextual/projects/beta.md"


def _listing(tool: MdCGMemoryTool, path: str) -> list[str]:
    """The paths a folder view lists (sizes dropped)."""
    return [row.split("\t")[1] for row in view(tool, path).split("\n")[1:]]


def _body(path: Path) -> str:
    return path.read_text().split("---\n", 2)[2]


def _forgotten(root: Path) -> list[str]:
    with MdCG(root) as store:
        return [t["id"] for t in store.tombstones() if t.get("event") != "restored"]


def _two_memories(root: Path) -> None:
    with MdCG(root, create=True) as store:
        store.add(Node(id="beta", layer="contextual", body="BETA: the real beta memory"))
        store.add(Node(id="gamma", layer="contextual", body="GAMMA: a person's project note"))


def _file_gamma_as_beta(root: Path) -> None:
    """What a person does: files gamma as ``contextual/projects/beta.md``."""
    (root / "contextual" / "projects").mkdir()
    os.rename(root / "contextual" / "gamma.md", root / "contextual" / "projects" / "beta.md")


# -- (a) a hand-renamed file ------------------------------------------------------------------


def _note0(root: Path) -> None:
    with MdCG(root, create=True) as store:
        store.add(Node(id="note0", layer="contextual", body="Note about tomatoes"))
    os.rename(root / "contextual" / "note0.md", root / "contextual" / "my-notes.md")


def _check_hand_renamed(tool: MdCGMemoryTool, root: Path) -> None:
    shown = view(tool, MY_NOTES).split("\n")
    assert shown[0] == f"Here's the content of {MY_NOTES} with line numbers:"
    assert shown[2] == '     2\tid: "note0"'
    assert shown[-1] == "     7\tNote about tomatoes"
    assert tool.execute(Insert(command="insert", path=MY_NOTES, insert_line=7, insert_text="and basil")) == (
        f"The file {MY_NOTES} has been edited."
    )
    reply = tool.execute(StrReplace(command="str_replace", path=MY_NOTES, old_str="tomatoes", new_str="figs"))
    assert str(reply).endswith("\n     7\tNote about figs\n     8\tand basil")
    assert _body(root / "contextual" / "my-notes.md") == "Note about figs\nand basil\n"
    was = error(tool, Create(command="create", path=MY_NOTES, file_text="other text"))
    assert was == f"File {MY_NOTES} already exists"
    assert tool.execute(Delete(command="delete", path=MY_NOTES)) == f"Successfully deleted {MY_NOTES}"
    assert not (root / "contextual" / "my-notes.md").exists()
    assert "note0" in _forgotten(root)


def test_a_hand_renamed_file_is_found_at_its_listed_path(tmp_path: Path) -> None:
    """The reviewer: ``contextual/my-notes.md`` (memory ``note0``) was listed, then
    ``view`` and ``delete`` said "does not exist" and ``create`` "already exists"."""
    root = tmp_path / "s"
    _note0(root)
    with MdCGMemoryTool(root, scope=None) as tool:
        assert _listing(tool, "/memories/contextual") == ["/memories/contextual", MY_NOTES]
        _check_hand_renamed(tool, root)
    assert sorted(root.rglob("*.md")) == []
    assert _forgotten(root) == ["note0"]


# -- (b) a file named after another memory ----------------------------------------------------


def test_a_file_named_after_another_memory_is_its_own_memory(tmp_path: Path) -> None:
    """The reviewer: gamma filed as ``contextual/projects/beta.md`` was viewed as beta, a
    ``str_replace`` of its text "did not appear verbatim", and its ``delete`` said
    "Successfully deleted" yet forgot beta, leaving gamma's file."""
    root = tmp_path / "s"
    _two_memories(root)
    _file_gamma_as_beta(root)
    with MdCGMemoryTool(root, scope=None) as tool:
        listed = _listing(tool, "/memories/contextual")
        assert listed == [
            "/memories/contextual",
            "/memories/contextual/beta.md",
            "/memories/contextual/projects/",
            FILED,
        ]
        _check_filed_as_beta(tool, root)
    with MdCG(root) as store:
        assert store.ids() == ["beta"]
        assert store.get("beta").body == "BETA: the real beta memory"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*.md")) == ["contextual/beta.md"]
    assert _forgotten(root) == ["gamma"]


def _check_filed_as_beta(tool: MdCGMemoryTool, root: Path) -> None:
    shown = view(tool, FILED).split("\n")
    assert shown[0] == f"Here's the content of {FILED} with line numbers:"
    assert shown[2] == '     2\tid: "gamma"'
    assert shown[-1] == "     7\tGAMMA: a person's project note"
    reply = tool.execute(StrReplace(command="str_replace", path=FILED, old_str="GAMMA", new_str="G"))
    assert str(reply).endswith("\n     7\tG: a person's project note")
    assert _body(root / "contextual" / "projects" / "beta.md") == "G: a person's project note\n"
    assert _body(root / "contextual" / "beta.md") == "BETA: the real beta memory\n"
    was = error(tool, Create(command="create", path=FILED, file_text="other text"))
    assert was == f"File {FILED} already exists"
    assert tool.execute(Delete(command="delete", path=FILED)) == f"Successfully deleted {FILED}"
    assert not (root / "contextual" / "projects" / "beta.md").exists()
    assert _body(root / "contextual" / "beta.md") == "BETA: the real beta memory\n"
    assert "gamma" in _forgotten(root) and "beta" not in _forgotten(root)


def test_rename_moves_the_memory_listed_at_the_path(tmp_path: Path) -> None:
    """``rename`` of the listed path renames gamma (not beta), and a rename onto a file
    another memory holds, whatever its name, is refused."""
    root = tmp_path / "s"
    _two_memories(root)
    _file_gamma_as_beta(root)
    with MdCG(root) as store:
        store.add(Node(id="delta", layer="contextual", body="DELTA"))
    with MdCGMemoryTool(root, scope=None) as tool:
        was = error(tool, Rename(command="rename", old_path="/memories/delta.md", new_path=FILED))
        assert was == f"The destination {FILED} already exists"
        reply = tool.execute(
            Rename(command="rename", old_path=FILED, new_path="/memories/contextual/omega.md")
        )
        assert reply == f"Successfully renamed {FILED} to /memories/contextual/omega.md"
    with MdCG(root) as store:
        assert store.ids() == ["beta", "delta", "omega"]
        assert store.get("omega").body == "GAMMA: a person's project note"
        assert store.get("beta").body == "BETA: the real beta memory"
        assert store.get("delta").body == "DELTA"
        assert store.path_of("beta") == root / "contextual" / "beta.md"
    assert _forgotten(root) == []


# -- a second process renames by hand while the tool is open ----------------------------------

PERSON = """
import os, sys
root = sys.argv[1]
os.rename(f"{root}/contextual/note0.md", f"{root}/contextual/my-notes.md")
os.mkdir(f"{root}/contextual/projects")
os.rename(f"{root}/contextual/gamma.md", f"{root}/contextual/projects/beta.md")
"""


def test_a_rename_by_another_process_is_addressed_by_a_live_tool(tmp_path: Path) -> None:
    """A long-lived tool (its first view already watches the folders) takes in a person's
    renames made by another process (``MdCG.sync_if_changed`` before each command) and
    then acts on the memory each listed path holds."""
    root = tmp_path / "s"
    _two_memories(root)
    with MdCG(root) as store:
        store.add(Node(id="note0", layer="contextual", body="Note about tomatoes"))
    with MdCGMemoryTool(root, scope=None) as tool:
        assert _listing(tool, "/memories/contextual") == [
            "/memories/contextual",
            "/memories/contextual/beta.md",
            "/memories/contextual/gamma.md",
            "/memories/contextual/note0.md",
        ]
        person = subprocess.run(
            [sys.executable, "-c", PERSON, str(root)], env=python_env(), capture_output=True, text=True
        )
        assert person.returncode == 0, person.stderr
        time.sleep(1.1)  # past sync_if_changed's interval, for a platform with no folder watch
        assert _listing(tool, "/memories/contextual") == [
            "/memories/contextual",
            "/memories/contextual/beta.md",
            MY_NOTES,
            "/memories/contextual/projects/",
            FILED,
        ]
        _check_filed_as_beta(tool, root)
        _check_hand_renamed(tool, root)
    assert _forgotten(root) == ["gamma", "note0"]


# -- scope: a hidden memory's file stands for no memory --------------------------------------


def test_a_hidden_memorys_renamed_file_is_neither_listed_nor_addressable(tmp_path: Path) -> None:
    """A scoped tool: a ``secret`` memory a person filed as ``contextual/beta.md`` (beta
    now in ``projects/``) is not listed, and its path is "does not exist" to every
    command -- not beta, whose id the name spells; nothing is written or forgotten."""
    root = tmp_path / "s"
    with MdCG(root, create=True) as store:
        store.add(Node(id="beta", layer="contextual", body="BETA"))
        store.add(Node(id="hush", layer="contextual", body="The door code", sensitivity="secret"))
    (root / "contextual" / "projects").mkdir()
    os.rename(root / "contextual" / "beta.md", root / "contextual" / "projects" / "beta.md")
    os.rename(root / "contextual" / "hush.md", root / "contextual" / "beta.md")
    hidden = "/memories/contextual/beta.md"
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    with MdCGMemoryTool(root) as tool:
        assert _listing(tool, "/memories/contextual") == [
            "/memories/contextual",
            "/memories/contextual/projects/",
            FILED,
        ]
        gone = f"The path {hidden} does not exist. Please provide a valid path."
        assert (
            error(tool, StrReplace(command="str_replace", path=hidden, old_str="BETA", new_str="B")) == gone
        )
        assert error(tool, Insert(command="insert", path=hidden, insert_line=1, insert_text="x")) == gone
        assert error(tool, Delete(command="delete", path=hidden)) == f"The path {hidden} does not exist"
        was = error(tool, Rename(command="rename", old_path=hidden, new_path="/memories/contextual/b2.md"))
        assert was == f"The path {hidden} does not exist"
        assert error(tool, View(command="view", path=hidden)) == gone
        assert view(tool, "/memories/beta.md").split("\n")[0] == (
            f"Here's the content of /memories/beta.md (stored as {FILED}) with line numbers:"
        )
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before
    assert _forgotten(root) == []
