"""Claude's memory tool (memory_20250818) on an md-cg store, driven with the SDK's own command models.

Skipped when the ``anthropic`` extra is not installed. Nothing here needs the
network or an API key: the tool-runner test answers the SDK's HTTP requests
with a mock transport.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
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
from md_cg.integrations.anthropic_memory import (  # noqa: E402
    AsyncMdCGMemoryTool,
    MdCGMemoryTool,
    human_size,
)

HEAD = "Here're the files and directories up to 2 levels deep in {}, excluding hidden items:"


@pytest.fixture
def tool(tmp_path: Path):
    # unscoped (scope=None): it names broken files; the default scope (mdcg mcp's) does not
    # (tests/test_integration_s28_memtool.py)
    with MdCGMemoryTool(tmp_path / "mem", scope=None) as t:
        yield t


def run(tool: MdCGMemoryTool, command) -> str:
    return tool.execute(command)


def error(tool: MdCGMemoryTool, command) -> str:
    with pytest.raises(ToolError) as info:
        tool.execute(command)
    return str(info.value)


def create(tool: MdCGMemoryTool, path: str, text: str) -> str:
    return run(tool, Create(command="create", path=path, file_text=text))


def file_text(tool: MdCGMemoryTool, node_id: str) -> str:
    return tool.store.path_of(node_id).read_text(encoding="utf-8")


def test_tool_param_and_empty_root(tool: MdCGMemoryTool) -> None:
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert run(tool, View(command="view", path="/memories")) == "\n".join(
        [HEAD.format("/memories"), "0B\t/memories"]
        + [
            f"0B\t/memories/{layer}/"
            for layer in sorted(
                ["anchor", "structural", "knowledge", "contextual", "self", "rejected", "unresolved"]
            )
        ]
    )


def test_human_size() -> None:
    assert [human_size(n) for n in (0, 999, 1024, 1536, 5 * 1024 * 1024)] == [
        "0B",
        "999B",
        "1K",
        "1.5K",
        "5M",
    ]


def test_create_plain_markdown_goes_to_contextual(tool: MdCGMemoryTool) -> None:
    reply = create(tool, "/memories/coffee.md", "# Drinks\nThe user likes coffee.\n")
    assert (
        reply
        == "File created successfully at: /memories/coffee.md (stored as /memories/contextual/coffee.md)"
    )
    node = tool.store.get("coffee")
    assert (node.layer, node.body) == ("contextual", "# Drinks\nThe user likes coffee.")
    assert tool.store.entry("coffee").path == "contextual/coffee.md"
    text = file_text(tool, "coffee")
    assert text.startswith(
        '---\nid: "coffee"\nlayer: "contextual"\nretention_tier: "long"\n'
        'retention_reason: "the caller asked for the long tier"\ncreated_at: "'
    )
    assert text.endswith("---\n# Drinks\nThe user likes coffee.\n")
    results, _ = tool.store.search("coffee", record=False)
    assert results[0].id == "coffee"
    # directly in a layer folder: exactly where asked, no "stored as"
    assert (
        create(tool, "/memories/self/me.md", "I am an agent.")
        == "File created successfully at: /memories/self/me.md"
    )
    assert tool.store.entry("me").path == "self/me.md"


def test_create_full_node_file_into_a_bucket(tool: MdCGMemoryTool) -> None:
    text = '---\ntags: ["domain:cooking"]\nimportance: 0.8\n---\nBraise pork belly for 90 minutes.\n'
    reply = create(tool, "/memories/knowledge/pork.md", text)
    bucket = tool.store.entry("pork").bucket
    assert bucket is not None and bucket.startswith("cond_cooking_")
    assert (
        reply == f"File created successfully at: /memories/knowledge/pork.md (stored as "
        f"/memories/knowledge/{bucket}/pork.md)"
    )
    node = tool.store.get("pork")
    assert (node.tags, node.importance, node.body) == (
        ["domain:cooking"],
        0.8,
        "Braise pork belly for 90 minutes.",
    )
    # the bucket folder is listed now, and a second file can be created in it by its path
    listing = run(tool, View(command="view", path="/memories/knowledge"))
    assert f"/memories/knowledge/{bucket}/\n" in listing + "\n"
    create(
        tool, f"/memories/knowledge/{bucket}/rice.md", '---\ntags: ["domain:cooking"]\n---\nRinse rice twice.'
    )
    assert tool.store.entry("rice").bucket == bucket


def test_create_refusals(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/coffee.md", "likes coffee")
    assert error(tool, Create(command="create", path="/memories/coffee.md", file_text="x")) == (
        "File /memories/coffee.md already exists (as /memories/contextual/coffee.md: "
        "file names are unique in /memories)"
    )
    assert error(tool, Create(command="create", path="/memories/contextual/coffee.md", file_text="x")) == (
        "File /memories/contextual/coffee.md already exists"
    )
    assert error(tool, Create(command="create", path="/memories/empty.md", file_text=" \n")) == (
        "Cannot create /memories/empty.md: file_text is empty (a memory needs content)"
    )
    assert error(tool, Create(command="create", path="/memories/a.md", file_text='---\nid: "b"\n---\nx')) == (
        "Cannot create /memories/a.md: its frontmatter says id 'b' but the file name "
        "says 'a' (the id is the file name)"
    )
    msg = error(
        tool,
        Create(command="create", path="/memories/self/a.md", file_text='---\nlayer: "knowledge"\n---\nx'),
    )
    assert msg == (
        "Cannot create /memories/self/a.md: its frontmatter says layer 'knowledge' but the folder is self/ "
        "(put it in /memories/knowledge/, or drop the layer line)"
    )
    msg = error(
        tool, Create(command="create", path="/memories/bad.md", file_text="---\nimportance: 7\n---\nx")
    )
    assert msg.startswith("Cannot create /memories/bad.md: file_text is not a valid memory file: ")
    assert "importance" in msg
    assert error(tool, Create(command="create", path="/memories/knowledge", file_text="x")) == (
        "Cannot create /memories/knowledge: it is a folder; give a file name such as "
        "/memories/knowledge/notes.md"
    )
    assert error(
        tool, Create(command="create", path="/memories/knowledge/cond_nope_1/x.md", file_text="x")
    ) == ("The folder /memories/knowledge/cond_nope_1 does not exist (write into /memories/knowledge)")
    assert tool.store.ids() == ["coffee"]


def test_non_markdown_names_keep_their_extension_in_the_id(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/notes.txt", "plain notes")
    assert tool.store.entry("notes.txt").path == "contextual/notes.txt.md"
    view = run(tool, View(command="view", path="/memories/notes.txt"))
    assert view.splitlines()[0] == (
        "Here's the content of /memories/notes.txt (stored as "
        "/memories/contextual/notes.txt.md) with line numbers:"
    )
    assert view.splitlines()[-1] == "     9\tplain notes"


def test_view_file_with_line_numbers_and_ranges(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/contextual/todo.md", "one\ntwo\nthree")
    lines = file_text(tool, "todo").split("\n")[:-1]
    full = run(tool, View(command="view", path="/memories/contextual/todo.md"))
    assert full == "Here's the content of /memories/contextual/todo.md with line numbers:\n" + "\n".join(
        f"{n:>6}\t{line}" for n, line in enumerate(lines, 1)
    )
    assert lines[-3:] == ["one", "two", "three"]
    n = len(lines)
    part = run(tool, View(command="view", path="/memories/contextual/todo.md", view_range=[n - 1, -1]))
    assert part.split("\n")[1:] == [f"{n - 1:>6}\ttwo", f"{n:>6}\tthree"]
    part = run(tool, View(command="view", path="/memories/todo.md", view_range=[n, n]))
    assert part.split("\n")[1:] == [f"{n:>6}\tthree"]
    assert error(tool, View(command="view", path="/memories/todo.md", view_range=[n + 1, -1])) == (
        f"Invalid `view_range` [{n + 1}, -1] for /memories/todo.md: it should be within the range of lines "
        f"of the file, [1, {n}], with end >= start or end = -1"
    )
    assert error(tool, View(command="view", path="/memories/nothing.md")) == (
        "The path /memories/nothing.md does not exist. Please provide a valid path."
    )
    # a path naming another layer than the node's does not find it
    assert error(tool, View(command="view", path="/memories/self/todo.md")) == (
        "The path /memories/self/todo.md does not exist. Please provide a valid path."
    )


def test_folder_listing_is_bounded_and_pages(tmp_path: Path) -> None:
    with MdCGMemoryTool(tmp_path / "m", max_listing=3) as tool:
        for i in range(5):
            create(tool, f"/memories/contextual/n{i}.md", f"note {i}")
        sizes = {i: tool.store.entry(f"n{i}").size for i in range(5)}
        listing = run(tool, View(command="view", path="/memories/contextual"))
        assert listing.split("\n") == [
            HEAD.format("/memories/contextual"),
            f"{human_size(sum(sizes.values()))}\t/memories/contextual",
            *[f"{human_size(sizes[i])}\t/memories/contextual/n{i}.md" for i in range(3)],
            "(2 more items not listed: view a sub-folder, or pass view_range [4, 5] to list them)",
        ]
        page = run(tool, View(command="view", path="/memories/contextual", view_range=[4, 5]))
        assert page.split("\n")[2:] == [
            f"{human_size(sizes[i])}\t/memories/contextual/n{i}.md" for i in (3, 4)
        ]


def test_str_replace(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/prefs.md", "# Preferences\nUser likes coffee.\nUser likes cats.")
    reply = run(
        tool, StrReplace(command="str_replace", path="/memories/prefs.md", old_str="coffee", new_str="tea")
    )
    lines = file_text(tool, "prefs").split("\n")[:-1]
    at = lines.index("User likes tea.")
    assert reply == (
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
        + "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(at - 2, min(len(lines), at + 3)))
    )
    assert tool.store.get("prefs").body == "# Preferences\nUser likes tea.\nUser likes cats."
    assert error(
        tool, StrReplace(command="str_replace", path="/memories/prefs.md", old_str="dogs", new_str="x")
    ) == ("No replacement was performed, old_str `dogs` did not appear verbatim in /memories/prefs.md.")
    assert error(
        tool, StrReplace(command="str_replace", path="/memories/prefs.md", old_str="User", new_str="x")
    ) == (
        f"No replacement was performed. Multiple occurrences of old_str `User` in lines: {at + 1}, {at + 2}. "
        "Please ensure it is unique"
    )
    assert error(
        tool, StrReplace(command="str_replace", path="/memories/contextual", old_str="a", new_str="b")
    ) == ("The path /memories/contextual is not a file.")


def test_edits_keep_the_frontmatter_valid_or_change_nothing(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/prefs.md", "User likes tea.")
    before = file_text(tool, "prefs")
    bad = [
        ("---\nid:", "id:", "would remove the opening '---' line"),
        ('id: "prefs"', 'id: "other"', "the id is the file name (use the rename command)"),
        ('layer: "contextual"', 'layer: "attic"', "unknown layer 'attic'"),
        ("User likes tea.", " ", "without content"),
    ]
    for old, new, expected in bad:
        msg = error(
            tool, StrReplace(command="str_replace", path="/memories/prefs.md", old_str=old, new_str=new)
        )
        assert msg.startswith("No replacement was performed: ") and expected in msg, msg
        assert file_text(tool, "prefs") == before
    assert error(
        tool, Insert(command="insert", path="/memories/prefs.md", insert_line=0, insert_text="x")
    ) == (
        "Invalid `insert_line` parameter: 0. Line 0 is above the opening '---' line of the frontmatter "
        "of /memories/prefs.md, which must stay first; insert at line 1 or later."
    )
    # a valid frontmatter edit: a new field, and a layer change that moves the node
    run(
        tool,
        Insert(command="insert", path="/memories/prefs.md", insert_line=3, insert_text="importance: 0.9"),
    )
    assert tool.store.get("prefs").importance == 0.9
    reply = run(
        tool,
        StrReplace(
            command="str_replace",
            path="/memories/contextual/prefs.md",
            old_str='layer: "contextual"',
            new_str='layer: "self"',
        ),
    )
    assert reply.endswith("\nThe layer changed: the memory is now /memories/self/prefs.md")
    assert tool.store.entry("prefs").path == "self/prefs.md"
    assert not (tool.store.root / "contextual" / "prefs.md").exists()


def test_insert(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/log.md", "first")
    n = len(file_text(tool, "log").split("\n")) - 1
    assert run(
        tool, Insert(command="insert", path="/memories/log.md", insert_line=n, insert_text="second\n")
    ) == ("The file /memories/log.md has been edited.")
    assert tool.store.get("log").body == "first\nsecond"
    assert error(
        tool, Insert(command="insert", path="/memories/log.md", insert_line=n + 2, insert_text="x")
    ) == (f"Invalid `insert_line` parameter: {n + 2}. It should be within the range [0, {n + 1}].")
    assert error(
        tool, Insert(command="insert", path="/memories/gone.md", insert_line=0, insert_text="x")
    ) == ("The path /memories/gone.md does not exist. Please provide a valid path.")


def test_hand_written_note_is_edited_through_the_engine(tool: MdCGMemoryTool) -> None:
    note = tool.store.root / "contextual" / "hand.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("---\nid: hand\nlayer: contextual\ntags:\n  - garden\n---\nWater the tomatoes.\n")
    assert tool.store.sync().added == ("hand",)
    view = run(tool, View(command="view", path="/memories/contextual/hand.md"))
    assert view.split("\n")[1:] == [
        "     1\t---",
        "     2\tid: hand",
        "     3\tlayer: contextual",
        "     4\ttags:",
        "     5\t  - garden",
        "     6\t---",
        "     7\tWater the tomatoes.",
    ]
    run(
        tool, StrReplace(command="str_replace", path="/memories/hand.md", old_str="tomatoes", new_str="roses")
    )
    node = tool.store.get("hand")
    assert (node.tags, node.body, node.layer) == (["garden"], "Water the roses.", "contextual")


def test_delete_forgets_with_a_tombstone(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/old.md", "stale fact")
    path = tool.store.path_of("old")
    assert run(tool, Delete(command="delete", path="/memories/contextual/old.md")) == (
        "Successfully deleted /memories/contextual/old.md"
    )
    assert not path.exists() and "old" not in tool.store
    [stone] = tool.store.tombstones()
    assert (stone["id"], stone["layer"], stone["reason"]) == (
        "old",
        "contextual",
        "deleted with Claude's memory tool",
    )
    assert "stale fact" not in json.dumps(stone)
    assert (
        error(tool, Delete(command="delete", path="/memories/old.md"))
        == "The path /memories/old.md does not exist"
    )
    assert (
        error(tool, Delete(command="delete", path="/memories"))
        == "Cannot delete the /memories directory itself"
    )
    assert error(tool, Delete(command="delete", path="/memories/knowledge")) == (
        "Cannot delete the folder /memories/knowledge: md-cg deletes memories one file at a time "
        "(each leaves a tombstone); delete the files in it"
    )
    create(tool, "/memories/anchor/core.md", "never forget")
    msg = error(tool, Delete(command="delete", path="/memories/anchor/core.md"))
    assert msg.startswith("Cannot delete /memories/anchor/core.md: ") and "protected" in msg
    assert "core" in tool.store


def test_rename_moves_and_renames(tool: MdCGMemoryTool) -> None:
    create(tool, "/memories/a.md", "fact a")
    tool.store.add(
        Node(id="src", layer="knowledge", body="points at a", edges=[{"target": "a", "type": "causal"}])
    )
    created = tool.store.get("a").created_at
    assert run(
        tool, Rename(command="rename", old_path="/memories/contextual/a.md", new_path="/memories/self/a.md")
    ) == ("Successfully renamed /memories/contextual/a.md to /memories/self/a.md")
    assert tool.store.entry("a").path == "self/a.md"
    reply = run(
        tool, Rename(command="rename", old_path="/memories/self/a.md", new_path="/memories/knowledge/b.md")
    )
    assert reply == (
        "Successfully renamed /memories/self/a.md to /memories/knowledge/b.md (stored as "
        "/memories/knowledge/orphan/b.md)"
    )
    assert "a" not in tool.store
    b = tool.store.get("b")
    assert (b.layer, b.body, b.created_at) == ("knowledge", "fact a", created)
    assert [(e.target, e.type) for e in tool.store.get("src").edges] == [("b", "causal")]
    assert tool.store.tombstones() == []  # a rename is not a forget
    create(tool, "/memories/c.md", "fact c")
    assert error(tool, Rename(command="rename", old_path="/memories/c.md", new_path="/memories/b.md")) == (
        "The destination /memories/b.md already exists"
    )
    assert error(tool, Rename(command="rename", old_path="/memories/zz.md", new_path="/memories/y.md")) == (
        "The path /memories/zz.md does not exist"
    )
    assert error(tool, Rename(command="rename", old_path="/memories", new_path="/memories/x")) == (
        "Cannot rename the /memories directory itself"
    )
    assert error(
        tool, Rename(command="rename", old_path="/memories/self", new_path="/memories/x")
    ).startswith("Cannot rename the folder /memories/self: ")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/etc/passwd", "Path must start with /memories, got: /etc/passwd"),
        ("memories/x.md", "Path must start with /memories, got: memories/x.md"),
        ("/memoriesx/y.md", "Path must start with /memories, got: /memoriesx/y.md"),
        ("/memories/../secret.md", "Path /memories/../secret.md would escape /memories directory"),
        ("/memories/knowledge/../../x", "Path /memories/knowledge/../../x would escape /memories directory"),
        ("/memories/%2e%2e/x.md", "Path /memories/%2e%2e/x.md would escape /memories directory"),
        ("/memories/a%2fb.md", "Path /memories/a%2fb.md would escape /memories directory"),
        ("/memories/a\\..\\b.md", "Path /memories/a\\..\\b.md would escape /memories directory"),
        (
            "/memories/a\x00.md",
            "The path /memories/a\\x00.md holds a control character (\\x00): "
            "names of memories cannot hold control characters",
        ),
        ("/memories/./x.md", "Path /memories/./x.md would escape /memories directory"),
        (
            "/memories/.mdcg/index.snapshot",
            "The path /memories/.mdcg/index.snapshot is not allowed: names starting with '.' are hidden "
            "(md-cg keeps its index in /memories/.mdcg, which is not a memory)",
        ),
        (
            "/memories/a:b.md",
            "The file name 'a:b.md' in /memories/a:b.md cannot be a memory id: unsafe node id 'a:b': it "
            "contains the character ':'; ids must be safe file-name stems",
        ),
    ],
)
def test_unsafe_paths_are_refused(tool: MdCGMemoryTool, path: str, message: str) -> None:
    assert error(tool, Create(command="create", path=path, file_text="x")) == message
    assert tool.store.ids() == []
    names = {p.name for p in tool.store.root.rglob("*") if p.is_file()}
    assert not any(n.endswith(".md") for n in names)


def test_folders_that_are_not_layers_are_refused(tool: MdCGMemoryTool) -> None:
    assert error(tool, Create(command="create", path="/memories/projects/x.md", file_text="x")) == (
        "Cannot write /memories/projects/x.md: the folders of /memories are md-cg's "
        "layers (anchor, structural, "
        "knowledge, contextual, self, rejected, unresolved); write /memories/<layer>/<name>.md, or "
        "/memories/<name>.md for a contextual memory"
    )


def test_call_with_raw_input_as_the_runner_does(tool: MdCGMemoryTool) -> None:
    assert tool.call({"command": "create", "path": "/memories/x.md", "file_text": "hello"}).startswith(
        "File created successfully at: /memories/x.md"
    )
    assert tool.call({"command": "view", "path": "/memories/x.md"}).endswith("\thello")


def test_sdk_tool_runner_offline(tmp_path: Path) -> None:
    httpx2 = pytest.importorskip("httpx2")
    requests: list[dict] = []

    def answer(request):
        requests.append(json.loads(request.content))
        if len(requests) == 1:
            content = [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "memory",
                    "input": {
                        "command": "create",
                        "path": "/memories/coffee.md",
                        "file_text": "Likes coffee.",
                    },
                }
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Noted."}], "end_turn"
        return httpx2.Response(
            200,
            json={
                "id": f"msg_{len(requests)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5-5",
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    client = anthropic.Anthropic(
        api_key="offline", http_client=httpx2.Client(transport=httpx2.MockTransport(answer))
    )
    with MdCGMemoryTool(tmp_path / "mem") as memory:
        final = client.beta.messages.tool_runner(
            model="claude-sonnet-5-5",
            max_tokens=1024,
            tools=[memory],
            messages=[{"role": "user", "content": "Remember that I like coffee"}],
        ).until_done()
        assert [b.text for b in final.content] == ["Noted."]
        assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
        [result] = requests[1]["messages"][-1]["content"]
        assert result == {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "File created successfully at: /memories/coffee.md (stored as "
            "/memories/contextual/coffee.md)",
        }
        assert memory.store.get("coffee").body == "Likes coffee."


def test_async_tool(tmp_path: Path) -> None:
    anyio = pytest.importorskip("anyio")

    async def scenario() -> tuple[str, str]:
        tool = AsyncMdCGMemoryTool(tmp_path / "mem")
        try:
            created = await tool.execute(
                Create(command="create", path="/memories/a.md", file_text="async fact")
            )
            with pytest.raises(ToolError):
                await tool.execute(View(command="view", path="/nope"))
            return created, await tool.execute(View(command="view", path="/memories/a.md"))
        finally:
            tool.close()

    created, view = anyio.run(scenario)
    assert created == "File created successfully at: /memories/a.md (stored as /memories/contextual/a.md)"
    assert view.endswith("\tasync fact")


AGENT = r"""
import sys
from anthropic.lib.tools import ToolError
from anthropic.types.beta import BetaMemoryTool20250818CreateCommand as Create
from anthropic.types.beta import BetaMemoryTool20250818InsertCommand as Insert
from md_cg.integrations.anthropic_memory import MdCGMemoryTool
root, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
won = 0
with MdCGMemoryTool(root) as tool:
    for i in range(n):
        tool.execute(Insert(command="insert", path="/memories/shared.md", insert_line=6,
                            insert_text=f"{me} line {i}"))
        tool.execute(Create(command="create", path=f"/memories/{me}-{i}.md", file_text=f"{me} note {i}"))
        try:
            tool.execute(Create(command="create", path=f"/memories/race-{i}.md", file_text=f"won by {me}"))
            won += 1
        except ToolError as exc:
            assert str(exc).startswith(f"File /memories/race-{i}.md already exists"), str(exc)
print(won)
"""


def test_two_agents_in_two_processes_share_one_folder(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    with MdCG(root) as store:
        store.add(Node(id="shared", layer="contextual", body="start"))
    n = 15
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", AGENT, str(root), name, str(n)],
            env=python_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alice", "bob")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert sum(int(out) for out, _ in outs) == n  # each race file was created exactly once
    with MdCG(root) as store:
        store.refresh()
        body = store.get("shared").body.split("\n")
        assert sorted(body) == sorted(
            ["start"] + [f"{who} line {i}" for who in ("alice", "bob") for i in range(n)]
        )
        expected = {"shared"} | {f"{who}-{i}" for who in ("alice", "bob") for i in range(n)}
        expected |= {f"race-{i}" for i in range(n)}
        assert set(store.ids()) == expected
        on_disk = {p.stem for p in (root / "contextual").glob("*.md")}
        assert on_disk == expected
        assert {store.get(f"race-{i}").body for i in range(n)} <= {"won by alice", "won by bob"}
        assert store.health().ok


def test_the_wiring_in_the_docs_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/integrations.md's tool-runner lines, with the client answered offline."""
    httpx2 = pytest.importorskip("httpx2")
    doc = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text(encoding="utf-8")
    block = next(b for b in doc.split("```python\n")[1:] if "MdCGMemoryTool" in b).split("```")[0]
    create = {"command": "create", "path": "/memories/coffee.md", "file_text": "Coffee: black."}
    turns = iter([
        ([{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": create}], "tool_use"),
        ([{"type": "text", "text": "Noted."}], "end_turn"),
    ])  # fmt: skip

    def answer(request):
        content, stop = next(turns)
        return httpx2.Response(200, json={
            "id": "msg", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        })  # fmt: skip

    real = anthropic.Anthropic
    monkeypatch.setattr(
        anthropic, "Anthropic",
        lambda: real(api_key="offline", http_client=httpx2.Client(transport=httpx2.MockTransport(answer))),
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/integrations.md", "exec"), {})
    with MdCG(tmp_path / "memory") as store:
        assert store.get("coffee").body == "Coffee: black."


def test_files_last_unless_their_frontmatter_says_otherwise(tmp_path: Path) -> None:
    """md-cg alone makes "Remind me ... tomorrow" a temporary memory that expires; a file
    the agent writes lasts until it deletes it, unless its frontmatter asks for a timer."""
    with MdCG(tmp_path / "mem", ttl_seconds=3600) as store, MdCGMemoryTool(store) as tool:
        create(tool, "/memories/todo.md", "Remind me to renew the passport tomorrow.\n")
        node = store.get("todo")
        assert (node.retention_tier, node.expires_at, node.retention_reason) == (
            "long",
            None,
            "the caller asked for the long tier",
        )
        create(tool, "/memories/soon.md", '---\nretention_tier: "temp"\n---\nThe hotel code is 4711.\n')
        soon = store.get("soon")
        assert (soon.retention_tier, soon.retention_reason) == ("temp", "the caller asked for the temp tier")
        assert soon.expires_at is not None
        # md-cg put this one on a timer by its words; an edit through the tool keeps the file
        store.add(id="plumber", layer="contextual", body="Call the plumber tomorrow about the leak")
        assert store.get("plumber").retention_tier == "temp"
        run(tool, StrReplace(command="str_replace", path="/memories/plumber.md",
                             old_str="Call the plumber tomorrow about the leak",
                             new_str="The plumber's phone number is 555-1234"))  # fmt: skip
        node = store.get("plumber")
        assert (node.body, node.retention_tier, node.expires_at) == (
            "The plumber's phone number is 555-1234",
            "long",
            None,
        )
        # a timer the caller asked for stays
        run(tool, StrReplace(command="str_replace", path="/memories/soon.md", old_str="4711",
                             new_str="4712"))  # fmt: skip
        assert (store.get("soon").retention_tier, store.get("soon").expires_at) == ("temp", soon.expires_at)


def test_store_errors_reach_the_agent_as_tool_errors(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with MdCGMemoryTool(root) as tool:
        create(tool, "/memories/a.md", "note a")
        create(tool, "/memories/b.md", "note b")
        said = error(tool, Rename(command="rename", old_path="/memories/a.md", new_path="/memories/nul.md"))
        assert said.startswith("Cannot rename /memories/a.md to /memories/nul.md: unsafe node id 'nul': ")
        before = file_text(tool, "b")
        past = 'retention_tier: "temp"\nexpires_at: "2020-01-01T00:00:00Z"'
        self_edge = 'layer: "contextual"\nedges: [{"target": "b", "type": "similar"}]'
        said = [
            error(tool, StrReplace(command="str_replace", path="/memories/b.md", old_str=old, new_str=new))
            for old, new in [('retention_tier: "long"', past), ('layer: "contextual"', self_edge)]
        ]
        assert said == [
            "No replacement was performed: expires_at 2020-01-01T00:00:00.000000Z is in the past, so the "
            "memory would vanish at once (delete it instead, or give a later time)",
            "No replacement was performed: the edited file is refused: node 'b': an edge to itself "
            "(similar); edges link two memories",
        ]
        assert file_text(tool, "b") == before
        assert sorted(tool.store.ids()) == ["a", "b"]
        (root / "contextual" / "b.md").unlink()  # by hand, while the tool is open
        said = error(tool, View(command="view", path="/memories/b.md"))
        assert said == "The path /memories/b.md does not exist. Please provide a valid path."
    with MdCGMemoryTool(MdCG(root, scope=Scope(agent="bob"))) as bob:
        said = error(bob, Create(command="create", path="/memories/s1.md",
                                 file_text="---\nagent_scope: alice\n---\nplanted"))  # fmt: skip
        assert said == (
            "Cannot create /memories/s1.md: node 's1': agent_scope 'alice' is outside this store "
            "handle's scope ('bob')"
        )
        said = error(bob, Create(command="create", path="/memories/s2.md",
                                 file_text="---\nsensitivity: secret\n---\ntoo secret"))  # fmt: skip
        assert said == (
            "Cannot create /memories/s2.md: node 's2': sensitivity 'secret' is above this store "
            "handle's max_sensitivity 'normal'"
        )
        bob.store.close()
    with MdCG(root) as store:
        assert sorted(store.ids()) == ["a"]


def test_files_written_outside_the_engine_are_seen(tmp_path: Path) -> None:
    """A file a person or ``git pull`` adds is taken in before a command (as the MCP
    server does); a broken one is named with what is wrong with it."""
    root = tmp_path / "mem"
    with MdCG(root) as store:
        store.add(id="first", layer="contextual", body="first")
    hand = "---\nid: handmade\nlayer: contextual\n---\nIMPORTANT hand-written note\n"
    (root / "contextual" / "handmade.md").write_text(hand, encoding="utf-8")
    (root / "contextual" / "broken.md").write_text("---\nid: broken\ntags: [unclosed\n---\nhand notes\n")
    with MdCGMemoryTool(root, scope=None) as tool:  # unscoped: it names broken files
        view = run(tool, View(command="view", path="/memories/handmade.md"))
        assert view.splitlines()[-1] == "     5\tIMPORTANT hand-written note"
        said = error(tool, Create(command="create", path="/memories/handmade.md", file_text="new"))
        assert said == (
            "File /memories/handmade.md already exists (as /memories/contextual/handmade.md: "
            "file names are unique in /memories)"
        )
        said = error(tool, View(command="view", path="/memories/broken.md"))
        assert said.startswith(
            "The path /memories/broken.md does not exist. Please provide a valid path. The file "
            "/memories/contextual/broken.md is there but md-cg cannot read it as a memory (the YAML "
        )
        said = error(tool, Create(command="create", path="/memories/contextual/broken.md", file_text="x"))
        assert said.startswith("File /memories/contextual/broken.md already exists. The file ")
        assert said.endswith("; a person must repair or remove it.")
    assert (root / "contextual" / "handmade.md").read_text(encoding="utf-8") == hand


def test_an_edit_keeps_the_memory_in_the_handles_scope(tmp_path: Path) -> None:
    """A scoped tool may not move a memory to another agent by an edit (it was written,
    then the tool raised NodeNotFoundError), nor hide a shared one from its readers."""
    root = tmp_path / "mem"
    with MdCG(root) as store:
        store.add(id="shared", layer="contextual", body="the team's wifi password is in the safe")
    with MdCGMemoryTool(MdCG(root, scope=Scope(agent="bob", max_sensitivity="secret"))) as bob:
        create(bob, "/memories/bobnote.md", "bob's note")
        before = file_text(bob, "bobnote")
        mine = StrReplace(command="str_replace", path="/memories/bobnote.md",
                          old_str='agent_scope: "bob"', new_str='agent_scope: "alice"')  # fmt: skip
        assert error(bob, mine) == (
            "No replacement was performed: the edited file is refused: node 'bobnote': agent_scope "
            "'alice' is outside this store handle's scope ('bob')"
        )
        assert file_text(bob, "bobnote") == before
        shared = Insert(command="insert", path="/memories/shared.md", insert_line=1,
                        insert_text='sensitivity: "secret"')  # fmt: skip
        assert error(bob, shared) == (
            "No insertion was performed: the edit would hide /memories/shared.md from agents that "
            "read it now (its agent, workspace or sensitivity); a shared memory stays shared"
        )
        bob.store.close()
    with MdCG(root) as store:
        assert (store.get("bobnote").agent_scope, store.get("shared").sensitivity) == ("bob", None)


def test_an_integer_a_file_cannot_hold_is_refused_not_rounded(tool: MdCGMemoryTool) -> None:
    """A create or an edit bringing ``foo: <40 digits>`` is refused naming the field and
    saying how to keep the digits; a quoted one and one in range are fine; a file written
    outside with one is unusable (the reader refuses it), so an edit of it is refused."""
    big = "1234567890123456789012345678901234567890"
    said = error(
        tool, Create(command="create", path="/memories/x.md", file_text=f"---\nfoo: {big}\n---\nbody")
    )
    assert said == (
        f"Cannot create /memories/x.md: field 'foo' holds the integer {big}, outside the range a node "
        "file stores (-2**63 to 2**64 - 1); write it as a string in quotes to keep every digit"
    )
    said = error(tool, Create(command="create", path="/memories/y.md",
                              file_text=f'---\n"a b": {{"n": [1, -{big}]}}\n---\nbody'))  # fmt: skip
    assert said.startswith(f"Cannot create /memories/y.md: field 'a b' holds the integer -{big}, ")
    assert tool.store.ids() == []
    create(tool, "/memories/z.md", f'---\nfoo: "{big}"\nmax: 18446744073709551615\n---\nbody')
    node = tool.store.get("z")
    assert (node.extra["foo"], node.extra["max"]) == (big, 2**64 - 1)
    before = file_text(tool, "z")
    said = error(tool, StrReplace(command="str_replace", path="/memories/z.md", old_str=f'foo: "{big}"',
                                  new_str=f"foo: {big}"))  # fmt: skip
    assert said == (
        f"No replacement was performed: field 'foo' holds the integer {big}, outside the range a node "
        "file stores (-2**63 to 2**64 - 1); write it as a string in quotes to keep every digit"
    )
    assert file_text(tool, "z") == before
    # Written outside: md-cg's reader refuses the file naming the field (session 25: it
    # had read the number as a float, 1.2345678901234568e+39, losing its digits).
    hand = tool.store.root / "contextual" / "h.md"
    hand.write_text(f'---\nid: "h"\nlayer: "contextual"\nfoo: {big}\n---\nby hand\n', encoding="utf-8")
    said = error(
        tool, StrReplace(command="str_replace", path="/memories/h.md", old_str="by hand", new_str="x")
    )
    assert f"field 'foo' holds the integer {big}, outside the range a node file stores" in said
    assert hand.read_text(encoding="utf-8").endswith("by hand\n")


KEEPER = r"""
import json, sys
from md_cg.integrations.anthropic_memory import MdCGMemoryTool
with MdCGMemoryTool(sys.argv[1]) as tool:
    print(json.dumps(tool.keep_files()))
"""


def test_keep_files_makes_word_timers_long_term_once(tmp_path: Path) -> None:
    """Files the tool wrote before files lasted were timed by md-cg from their words;
    keep_files makes them long-term (an expired one not yet swept too) and keeps a
    timer the frontmatter asked for. Two processes running it at once change each
    memory once between them (the check is repeated under the memory's lock)."""
    root = tmp_path / "mem"
    words = "the one-off marker 'tomorrow' (n1_relative_day) opens the text and no veto marker is in the text"
    past = {"retention_tier": "temp", "expires_at": time.time() - 60, "retention_reason": words}
    with MdCG(root) as md:
        for i in range(20):
            md.add(
                body=f"Remind me tomorrow to call the plumber about leak {i}", id=f"t{i}", layer="contextual"
            )
        assert {md.entry(f"t{i}").retention_tier for i in range(20)} == {"temp"}
        md.add_many(
            [Node(id="gone", layer="contextual", body="just for today", **past)], stamp=False, decide=False
        )
        md.add(body="long since", id="plain", layer="contextual")
    with MdCGMemoryTool(root) as tool:
        create(tool, "/memories/asked.md", "---\nretention_tier: temp\n---\nremind me tomorrow")
    procs = [
        subprocess.Popen([sys.executable, "-c", KEEPER, str(root)], env=python_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    first, second = (json.loads(out) for out, _ in outs)
    assert sorted(first + second) == sorted(["gone", *(f"t{i}" for i in range(20))])
    with MdCGMemoryTool(root) as tool:
        for node_id in ["gone", *(f"t{i}" for i in range(20))]:
            node = tool.store.get(node_id)
            assert (node.retention_tier, node.expires_at, node.retention_reason) == (
                "long",
                None,
                "the caller asked for the long tier",
            )
        assert tool.store.get("asked").retention_tier == "temp"
        assert tool.store.get("plain").retention_tier is None
        assert tool.keep_files() == []
        assert tool.store.health().ok
