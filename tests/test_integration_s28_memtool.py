"""Review s28 (rev1) of Claude's memory tool: a tool opened on a folder works in
``mdcg mcp``'s default scope (D5), a ``view`` of a whole file is bounded and says how to
see the rest (D6), a symlink planted in the store is reported the same way by every
command (D7), and a path with a control character says so, escaped (D11).

Skipped when the ``anthropic`` extra is not installed; nothing needs the network.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

pytest.importorskip("anthropic")

from anthropic.lib.tools import ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand as Create,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818DeleteCommand as Delete,
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

from md_cg import MdCG, Node, Scope, cli
from md_cg.integrations import anthropic_memory
from md_cg.integrations.anthropic_memory import AsyncMdCGMemoryTool, MdCGMemoryTool

SYMLINK = "a symlink: md-cg never follows symlinks below the store root"


def error(tool: MdCGMemoryTool, command: object) -> str:
    with pytest.raises(ToolError) as info:
        tool.execute(command)  # type: ignore[arg-type]
    return str(info.value)


def view(tool: MdCGMemoryTool, path: str, view_range: list[int] | None = None) -> str:
    return str(tool.execute(View(command="view", path=path, view_range=view_range)))


# -- D5: the default scope ------------------------------------------------------------------


def _scoped_store(root: Path) -> None:
    with MdCG(root, create=True) as store:
        store.add(Node(id="plain", layer="contextual", body="The user takes coffee black"))
        store.add(Node(id="hush", layer="contextual", body="The door code", sensitivity="secret"))
        store.add(Node(id="bobs", layer="contextual", body="Bob's own note", agent_scope="bob"))
        store.add(Node(id="elsewhere", layer="contextual", body="Other work", workspace_scope="w2"))


def _seen(tool: MdCGMemoryTool) -> set[str]:
    listing = view(tool, "/memories/contextual")
    return {i for i in ("plain", "hush", "bobs", "elsewhere") if f"/memories/contextual/{i}.md" in listing}


def test_a_tool_on_a_folder_works_in_the_mcp_servers_default_scope(tmp_path: Path) -> None:
    """The reviewer's scope_probe: MdCGMemoryTool(folder) showed a secret memory, another
    agent's and another workspace's, which ``mdcg mcp`` hides by default. Now a folder is
    opened in that scope (no agent, no workspace, sensitivity up to normal)."""
    root = tmp_path / "s"
    _scoped_store(root)
    default = inspect.signature(cli.mcp).parameters
    mcp_default = Scope(
        agent=default["agent"].default,
        workspace=default["workspace"].default,
        max_sensitivity=default["max_sensitivity"].default,
    )
    assert mcp_default == anthropic_memory.DEFAULT_SCOPE
    with MdCGMemoryTool(root) as tool:
        assert tool.store.scope == Scope()
        assert _seen(tool) == {"plain"}
        assert view(tool, "/memories/plain.md").endswith("The user takes coffee black")
        for hidden in ("hush", "bobs", "elsewhere"):
            assert error(tool, View(command="view", path=f"/memories/{hidden}.md")) == (
                f"The path /memories/{hidden}.md does not exist. Please provide a valid path."
            )
        said = error(
            tool,
            Create(command="create", path="/memories/x.md", file_text="---\nsensitivity: secret\n---\nhi"),
        )
        assert said.startswith("Cannot create /memories/x.md: ") and "sensitivity 'secret'" in said


def test_the_scope_can_be_chosen_or_left_out(tmp_path: Path) -> None:
    """``scope=`` picks another scope; ``scope=None`` is the unscoped handle (every memory);
    an open MdCG keeps its own scope, and a scope given with it is refused."""
    root = tmp_path / "s"
    _scoped_store(root)
    with MdCGMemoryTool(root, scope=Scope(agent="bob")) as tool:
        assert _seen(tool) == {"plain", "bobs"}
    with MdCGMemoryTool(root, scope=None) as tool:
        assert tool.store.scope is None
        assert _seen(tool) == {"plain", "hush", "bobs", "elsewhere"}
    with MdCG(root, scope=Scope(workspace="w2", max_sensitivity="secret")) as store:
        assert _seen(MdCGMemoryTool(store)) == {"plain", "hush", "elsewhere"}
        for cls in (MdCGMemoryTool, AsyncMdCGMemoryTool):
            with pytest.raises(TypeError, match="pass scope only when the tool opens the store"):
                cls(store, scope=Scope())
            with pytest.raises(TypeError, match="pass scope only when the tool opens the store"):
                cls(store, scope=None)


def test_a_broken_file_is_named_to_an_unscoped_tool_only(tmp_path: Path) -> None:
    """What the default scope costs: as ``mdcg mcp`` does, a scoped tool cannot tell whose a
    broken file is, so it says "does not exist"; ``scope=None`` names it and what is wrong."""
    root = tmp_path / "s"
    _scoped_store(root)
    (root / "contextual" / "broken.md").write_text("---\nid: broken\ntags: [unclosed\n---\nhand notes\n")
    with MdCGMemoryTool(root) as tool:
        assert error(tool, View(command="view", path="/memories/broken.md")) == (
            "The path /memories/broken.md does not exist. Please provide a valid path."
        )
    with MdCGMemoryTool(root, scope=None) as tool:
        assert error(tool, View(command="view", path="/memories/broken.md")).startswith(
            "The path /memories/broken.md does not exist. Please provide a valid path. The file "
            "/memories/contextual/broken.md is there but md-cg cannot read it as a memory (the YAML "
        )


# -- D6: a bounded view ---------------------------------------------------------------------


def test_a_view_of_a_whole_file_is_bounded_and_says_how_to_see_the_rest(tmp_path: Path) -> None:
    """The reviewer's bigline: a 1.2 MB file created with the tool came back whole in one
    1,200,373-character reply. Now a whole-file view stops after the line that would pass
    20,000 characters (the MCP server's get window) and names the view_range of the rest;
    a first line longer than that is cut, saying so."""
    pytest.importorskip("mcp")
    from md_cg.mcp_server import GET_CHARS

    assert anthropic_memory.MAX_VIEW_CHARS == GET_CHARS == 20_000
    with MdCGMemoryTool(tmp_path / "s") as tool:
        body = "\n".join(f"line {i:05d} " + "x" * 90 for i in range(2000))  # 2000 lines of 101
        tool.execute(Create(command="create", path="/memories/long.md", file_text=body))
        reply = view(tool, "/memories/long.md")
        assert len(reply) <= 20_000 + 300
        lines = reply.split("\n")
        assert (
            lines[0] == "Here's the content of /memories/long.md (stored as /memories/contextual/long.md) "
            "with line numbers:"
        )
        last = lines[-2].split("\t")[0].strip()
        n = int(last)
        assert lines[-1] == (
            f"[lines {n + 1} to 2008 of 2008 are not shown (a view shows at most 20,000 characters): "
            f"pass view_range [{n + 1}, 2008] to see them]"
        )
        rest = view(tool, "/memories/long.md", [n + 1, 2008])  # up to 5 windows: 100,000
        assert rest.split("\n")[1].startswith(f"{n + 1:>6}\t")
        assert 99_000 < len(rest) < 100_300
        m = int(rest.split("\n")[-2].split("\t")[0])
        assert rest.split("\n")[-1] == (
            f"[lines {m + 1} to 2008 of 2008 are not shown (a view shows at most 100,000 characters): "
            f"pass view_range [{m + 1}, 2008] to see them]"
        )
        assert view(tool, "/memories/long.md", [m + 1, 2008]).endswith("line 01999 " + "x" * 90)
        short = view(tool, "/memories/long.md", [1, 5])
        assert short.split("\n")[1:] == [
            "     1\t---",
            '     2\tid: "long"',
            '     3\tlayer: "contextual"',
            '     4\tretention_tier: "long"',
            '     5\tretention_reason: "the caller asked for the long tier"',
        ]

        tool.execute(Create(command="create", path="/memories/big.md", file_text="长行 " * 400_000))
        reply = view(tool, "/memories/big.md")
        assert reply.split("\n")[-2:] == [
            "     8\t---",
            "[line 9 of 9 is not shown (a view shows at most 20,000 characters): "
            "pass view_range [9, 9] to see it]",
        ]
        reply = view(tool, "/memories/big.md", [9, 9])
        *_, line9, note = reply.split("\n")
        assert line9 == "     9\t" + ("长行 " * 400_000)[: 100_000 - 7]
        assert note == (
            "[line 9 is 1,200,000 characters long; only its first 99,993 are shown "
            "(a view shows at most 100,000 characters): pass view_range [9, 9, 99994] to see the rest "
            "of it (a third number is the character of the first line to start at)]"
        )


def test_max_view_is_a_parameter(tmp_path: Path) -> None:
    with MdCGMemoryTool(tmp_path / "s", max_view=100) as tool:
        tool.execute(Create(command="create", path="/memories/a.md", file_text="one\ntwo\nthree\n" * 10))
        reply = view(tool, "/memories/a.md")
        assert reply.split("\n")[-1] == (
            "[lines 5 to 38 of 38 are not shown (a view shows at most 100 characters): "
            "pass view_range [5, 38] to see them]"
        )
    with pytest.raises(ValueError, match="max_view must be a positive number of characters, got 0"):
        MdCGMemoryTool(tmp_path / "t", max_view=0)


# -- D7: a symlink in the store -----------------------------------------------------------


def test_every_command_reports_a_planted_symlink_as_the_docs_say(tmp_path: Path) -> None:
    """The reviewer's anthropic_probe: for a symlink planted in the store, view, str_replace,
    insert, delete and rename said "does not exist" while create said "already exists";
    the docs promise "... is there but md-cg cannot read it as a memory (why)". Now each
    says it (the link is never followed; the files outside stay as they were)."""
    root, outside = tmp_path / "s", tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.md"
    secret.write_text('---\nid: "secret"\nlayer: "knowledge"\n---\nTOP SECRET outside the store\n')
    before = secret.read_bytes()
    with MdCGMemoryTool(root) as tool:
        tool.execute(Create(command="create", path="/memories/knowledge/real.md", file_text="real"))
        (root / "contextual").mkdir(exist_ok=True)
        os.symlink(secret, root / "contextual" / "evil.md")
        os.symlink(secret, root / "knowledge" / "orphan" / "evil2.md")
        os.symlink(outside, root / "knowledge" / "linkdir")
        why = f"is there but md-cg cannot read it as a memory ({SYMLINK}); a person must repair or remove it."
        for path, where in (
            ("/memories/contextual/evil.md", "The file /memories/contextual/evil.md"),
            ("/memories/evil.md", "The file /memories/contextual/evil.md"),
            ("/memories/knowledge/orphan/evil2.md", "The file /memories/knowledge/orphan/evil2.md"),
            ("/memories/knowledge/linkdir/secret.md", "The folder /memories/knowledge/linkdir"),
        ):
            missing = f"The path {path} does not exist. Please provide a valid path. {where} {why}"
            assert error(tool, View(command="view", path=path)) == missing
            assert (
                error(tool, StrReplace(command="str_replace", path=path, old_str="TOP", new_str="X"))
                == missing
            )
            assert error(tool, Insert(command="insert", path=path, insert_line=1, insert_text="X")) == missing
            gone = f"The path {path} does not exist. {where} {why}"
            assert error(tool, Delete(command="delete", path=path)) == gone
            new = "/memories/knowledge/stolen.md"
            assert error(tool, Rename(command="rename", old_path=path, new_path=new)) == gone
        for path, where in (
            ("/memories/contextual/evil.md", "The file /memories/contextual/evil.md"),
            ("/memories/knowledge/evil2.md", "The file /memories/knowledge/orphan/evil2.md"),
        ):
            said = error(tool, Create(command="create", path=path, file_text="planted"))
            assert said == f"File {path} already exists. {where} {why}"
        assert error(tool, View(command="view", path="/memories/knowledge/linkdir")) == (
            "The path /memories/knowledge/linkdir does not exist. Please provide a valid path. "
            f"The file /memories/knowledge/linkdir {why}"
        )
        assert view(tool, "/memories/knowledge/real.md").endswith("real")
    assert secret.read_bytes() == before and sorted(os.listdir(outside)) == ["secret.md"]
    assert os.path.islink(root / "contextual" / "evil.md")


# -- D11: control characters ----------------------------------------------------------------


def test_a_path_with_a_control_character_says_so_escaped(tmp_path: Path) -> None:
    """The reviewer's ``/memories/x\\x01.md`` got "Path /memories/x.md would escape
    /memories directory": the character is invisible and "escape" is the wrong reason."""
    with MdCGMemoryTool(tmp_path / "s") as tool:
        assert error(tool, Create(command="create", path="/memories/x\x01.md", file_text="hi")) == (
            "The path /memories/x\\x01.md holds a control character (\\x01): "
            "names of memories cannot hold control characters"
        )
        assert error(tool, View(command="view", path="/memories/n.md\x00")) == (
            "The path /memories/n.md\\x00 holds a control character (\\x00): "
            "names of memories cannot hold control characters"
        )
        assert error(tool, View(command="view", path="/memories/a%0Ab.md")) == (
            "The path /memories/a%0Ab.md holds an encoded control character (\\x0a): "
            "names of memories cannot hold control characters"
        )
        assert error(tool, View(command="view", path="/memories/../x.md")) == (
            "Path /memories/../x.md would escape /memories directory"
        )
        assert not (tmp_path / "s" / "contextual").exists() or not os.listdir(tmp_path / "s" / "contextual")


def test_the_snippet_after_an_edit_is_bounded_like_a_view(tmp_path: Path) -> None:
    """r3: the snippet a str_replace returns showed the lines around the edit whole, so an
    edit near a 1 MB line answered with 1,000,191 characters."""
    with MdCG(tmp_path / "m", create=True) as s:
        s.add(id="big1", layer="contextual", body="head\n" + "x" * 1_000_000 + "\ntail marker\n")
        tool = MdCGMemoryTool(s)
        out = str(
            tool.execute(
                StrReplace(command="str_replace", path="/memories/big1.md", old_str="head", new_str="HEAD")
            )
        )
        assert len(out) < anthropic_memory.MAX_VIEW_CHARS + 1_000
        assert out.startswith("The memory file has been edited. Here is the snippet showing the change")
        assert "only its first" in out or "not shown" in out  # the cut is said, never silent
        assert s.get("big1").body.startswith("HEAD\n" + "x" * 1_000_000)
