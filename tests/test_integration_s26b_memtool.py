"""Review s26 (rev5) of Claude's memory tool: a file a git merge left with conflict
markers can be edited (only markers or a NUL the edit adds are refused), ``create`` of
an id another scope holds says so as ``rename`` does, and ``insert`` speaks for itself.

Skipped when the ``anthropic`` extra is not installed; nothing needs the network.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("anthropic")

from anthropic.lib.tools import ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand as Create,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818InsertCommand as Insert,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818RenameCommand as Rename,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818StrReplaceCommand as StrReplace,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818ViewCommand as View,
)

from md_cg import MdCG, Node, Scope
from md_cg.integrations.anthropic_memory import MdCGMemoryTool

PATH = "/memories/conf.md"
BLOCK1 = "<<<<<<< HEAD\nstep one (ours)\n=======\nstep one (theirs)\n>>>>>>> b\n"
BLOCK2 = "<<<<<<< HEAD\nthree a\n=======\nthree b\n>>>>>>> b\n"


def error(tool: MdCGMemoryTool, command: object) -> str:
    with pytest.raises(ToolError) as info:
        tool.execute(command)  # type: ignore[arg-type]
    return str(info.value)


def _merged(root: Path) -> tuple[MdCG, Path]:
    """A memory whose file a git merge left with two conflict blocks in its body."""
    store = MdCG(root, create=True)
    store.add(Node(id="conf", layer="contextual", body="Deploy steps\nstep one\nstep two"))
    path = root / "contextual" / "conf.md"
    path.write_text(
        path.read_text(encoding="utf-8").replace("step one\nstep two", BLOCK1 + "step two\n" + BLOCK2),
        encoding="utf-8",
    )
    assert store.sync().conflicts == (("conf", "contextual/conf.md"),)
    return store, path


def _body(path: Path) -> str:
    return path.read_text(encoding="utf-8").split("\n---\n", 1)[1].rstrip("\n")


def test_a_merged_file_is_resolved_one_block_at_a_time(tmp_path: Path) -> None:
    """The reviewer's mt_conflict: every edit of a file holding conflict markers was
    refused, even one resolving one of two blocks, blaming the edit. Now edits that add no
    marker line (and no NUL) are taken; one that adds markers is refused, saying the file
    already holds an unresolved merge, and the file is left byte for byte."""
    store, path = _merged(tmp_path / "m")
    tool = MdCGMemoryTool(store)
    tool.execute(
        StrReplace(command="str_replace", path=PATH, old_str="Deploy steps", new_str="Deploy (prod)")
    )
    tool.execute(StrReplace(command="str_replace", path=PATH, old_str=BLOCK1, new_str="step one (ours)\n"))
    assert _body(path) == "Deploy (prod)\nstep one (ours)\nstep two\n" + BLOCK2.rstrip("\n")
    before = path.read_bytes()
    more = "step two\n<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> c\n"
    said = [
        error(tool, StrReplace(command="str_replace", path=PATH, old_str="step two\n", new_str=more)),
        error(tool, Insert(command="insert", path=PATH, insert_line=9, insert_text="a\x00b")),
    ]
    how = (
        "resolve what it holds (keep one side of each conflict block, delete its <<<<<<<, ======= "
        "and >>>>>>> lines) and add none"
    )
    assert said == [
        "No replacement was performed: the edited file is refused: node 'conf': the file already holds an "
        f"unresolved git merge, and the edit adds conflict marker lines; {how}",
        "No insertion was performed: the edited file is refused: node 'conf': the file already holds an "
        f"unresolved git merge, and the edit adds a NUL character; {how}",
    ]
    assert path.read_bytes() == before
    tool.execute(StrReplace(command="str_replace", path=PATH, old_str=BLOCK2, new_str="three a\n"))
    assert _body(path) == "Deploy (prod)\nstep one (ours)\nstep two\nthree a"
    assert [f.kind for f in store.health().findings] == []
    store.close()


def test_markers_in_a_clean_file_are_still_refused(tmp_path: Path) -> None:
    """A file without markers keeps create's rule: an edit bringing a conflict is refused
    with md-cg's message alone."""
    with MdCGMemoryTool(tmp_path / "m") as tool:
        tool.execute(Create(command="create", path="/memories/n.md", file_text="plain note"))
        msg = error(
            tool, StrReplace(command="str_replace", path="/memories/n.md", old_str="plain", new_str=BLOCK1)
        )
        assert msg.endswith("put such text in a fenced code block (```)")
        assert msg.startswith("No replacement was performed: the edited file is refused: ")


def test_create_over_another_scopes_id_says_so_as_rename_does(tmp_path: Path) -> None:
    """The reviewer's mt1: bob holds Secret-Plan; alice's create secret-plan.md said "already
    exists" while view said "does not exist". Now create says what rename says, without
    naming bob's memory."""
    root = tmp_path / "m"
    MdCG(root, create=True).close()
    with MdCGMemoryTool(MdCG(root, scope=Scope(agent="bob"))) as bob:
        bob.execute(Create(command="create", path="/memories/Secret-Plan.md", file_text="bob's plan"))
    with MdCGMemoryTool(MdCG(root, scope=Scope(agent="alice"))) as alice:
        msg = error(alice, Create(command="create", path="/memories/secret-plan.md", file_text="mine"))
        assert msg == (
            "Cannot create /memories/secret-plan.md: the id 'secret-plan' is taken by a memory outside "
            "this handle's scope; choose another name"
        )
        assert "Secret-Plan" not in msg
        assert error(alice, View(command="view", path="/memories/secret-plan.md")) == (
            "The path /memories/secret-plan.md does not exist. Please provide a valid path."
        )
        alice.execute(Create(command="create", path="/memories/note.md", file_text="alice note"))
        renamed = error(
            alice, Rename(command="rename", old_path="/memories/note.md", new_path="/memories/secret-plan.md")
        )
        assert "is taken by a memory outside this handle's scope; choose another id" in renamed
        assert error(alice, Create(command="create", path="/memories/note.md", file_text="again")) == (
            "File /memories/note.md already exists (as /memories/contextual/note.md: file names are "
            "unique in /memories)"
        )


def test_insert_at_line_zero_says_so_in_inserts_words(tmp_path: Path) -> None:
    """Insert at line 0 of a file with frontmatter said "No replacement was performed: the
    edit would remove the opening '---' line"; it now says what is wrong with insert_line."""
    with MdCGMemoryTool(tmp_path / "m") as tool:
        tool.execute(Create(command="create", path="/memories/n.md", file_text="plain note"))
        assert error(
            tool, Insert(command="insert", path="/memories/n.md", insert_line=0, insert_text="x")
        ) == (
            "Invalid `insert_line` parameter: 0. Line 0 is above the opening '---' line of the frontmatter "
            "of /memories/n.md, which must stay first; insert at line 1 or later."
        )
