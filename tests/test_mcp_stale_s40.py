"""An MCP ``update`` that sets the body whole is refused when the memory's file changed
since this server last gave the agent its body (session 40, MCP user simulation,
/tmp/s40/mcpsim/repro_lostupdate.py).

The agent's usual read-then-write -- ``get``, then ``update(body=<what it read> + a
line>)`` -- silently erased a line a person had appended in between: the library's
hand-edit guard covers only the window inside one ``update`` call. Now the server keeps,
per id, a digest of the body it last gave the agent whole (a ``get`` from the body's
start) or wrote from the agent's words (:class:`md_cg.mcp_server.ReadBodies`), and
refuses a whole-body ``update`` of a memory whose body is another now, nothing written.
Other fields are applied over the file as it is, as before (the server's own writes of
them -- ``verify``, ``supersede`` -- leave the body alone); an id never read is updated
as before.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from test_mcp_bounds_s32 import _err, _serve
from test_mcp_edges_s32 import _ok

from md_cg import MdCG, Node, Scope, mcp_server
from md_cg.mcp_server import create_server

REPO = Path(__file__).resolve().parent.parent
STALE = (
    "memory {id!r} changed since you read it (an edit by hand or another agent); "
    "nothing was written: get it again and repeat the change"
)
HAND = "- eggs (added by hand in the editor)\n"


def _append(path: str, text: str = HAND) -> None:
    with open(path, "a", encoding="utf-8") as f:  # the person, in an editor
        f.write(text)


def test_the_repro_over_stdio_is_refused_and_the_hand_line_kept(tmp_path: Path) -> None:
    """The simulation's scenario through a real ``mdcg mcp`` process: refused, file untouched."""
    root = tmp_path / "m"
    env = {
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(tmp_path)),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "md_cg.cli", "mcp", "--root", str(root)], env=env
    )

    async def run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            body = "Shopping list\n\n- milk"
            _ok(await session.call_tool("remember", {"id": "groceries", "body": body}))
            got = _ok(await session.call_tool("get", {"id": "groceries"}))
            _append(got["path"])
            before = Path(got["path"]).read_bytes()
            refused = await session.call_tool(
                "update", {"id": "groceries", "body": got["body"] + "\n- bread"}
            )
            assert _err(refused) == STALE.format(id="groceries")
            assert Path(got["path"]).read_bytes() == before  # nothing written
            again = _ok(await session.call_tool("get", {"id": "groceries"}))
            assert again["body"] == "Shopping list\n\n- milk\n- eggs (added by hand in the editor)"
            _ok(await session.call_tool("update", {"id": "groceries", "body": again["body"] + "\n- bread"}))

    anyio.run(run)
    with MdCG(root, read_only=True) as store:
        assert store.get("groceries").body == (
            "Shopping list\n\n- milk\n- eggs (added by hand in the editor)\n- bread"
        )


def test_the_agents_own_updates_after_a_get_go_on(tmp_path: Path) -> None:
    """get, update(body), update(body) with no hand edit: both taken (its own writes refresh
    the stamp); so do updates after a remember, with no get at all."""
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("remember", {"id": "plan", "body": "Plan\n\n- one"}))
        _ok(await client.call_tool("update", {"id": "plan", "body": "Plan\n\n- one\n- two"}))
        got = _ok(await client.call_tool("get", {"id": "plan"}))
        _ok(await client.call_tool("update", {"id": "plan", "body": got["body"] + "\n- three"}))
        _ok(await client.call_tool("update", {"id": "plan", "tags": ["work"]}))
        _ok(await client.call_tool("update", {"id": "plan", "body": got["body"] + "\n- three\n- four"}))
        assert store.get("plan").body == "Plan\n\n- one\n- two\n- three\n- four"
        assert store.get("plan").tags == ["work"]

    _serve(root, work)


def test_a_tags_only_update_after_a_hand_edit_goes_on_and_keeps_it(tmp_path: Path) -> None:
    """Fields other than the body are applied over the file as it is (as before); the edit
    stays unread by the agent, so a whole body built on the old read is still refused."""
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("remember", {"id": "groceries", "body": "Shopping list\n\n- milk"}))
        got = _ok(await client.call_tool("get", {"id": "groceries"}))
        _append(got["path"])
        done = _ok(await client.call_tool("update", {"id": "groceries", "tags": ["home"], "importance": 0.7}))
        assert done["updated"] == ["importance", "tags"]
        node = store.get("groceries")
        assert (node.body, node.tags, node.importance) == (
            "Shopping list\n\n- milk\n- eggs (added by hand in the editor)",
            ["home"],
            0.7,
        )
        refused = await client.call_tool("update", {"id": "groceries", "body": got["body"] + "\n- bread"})
        assert _err(refused) == STALE.format(id="groceries")
        assert store.get("groceries").body == "Shopping list\n\n- milk\n- eggs (added by hand in the editor)"

    _serve(root, work)


def test_an_id_never_read_by_this_server_is_updated_as_before(tmp_path: Path) -> None:
    """No read to compare with (stored by another process, hand-edited): the body is taken."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(Node(id="note", body="old note"))
        _append(str(store.path_of("note")), "hand line\n")

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("update", {"id": "note", "body": "new note"}))
        assert store.get("note").body == "new note"

    _serve(root, work)


def test_a_memory_read_then_moved_out_of_a_scope_says_only_not_found(tmp_path: Path) -> None:
    """Read by agent a's server, then given to agent b by hand: the update's error is the
    unknown id's, as for any memory out of scope -- nothing of the change is told."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="mine", layer="contextual", body="okapi for agent a", agent_scope="a")
        store.add(id="never", layer="contextual", body="okapi for agent b", agent_scope="b")
    server = create_server(root, scope=Scope(agent="a"))

    async def run() -> None:
        async with Client(server) as client:
            got = _ok(await client.call_tool("get", {"id": "mine"}))
            path = Path(got["path"])
            path.write_text(path.read_text().replace('agent_scope: "a"', 'agent_scope: "b"'))
            assert 'agent_scope: "b"' in path.read_text()
            mine = _err(await client.call_tool("update", {"id": "mine", "body": "taken over"}))
            never = _err(await client.call_tool("update", {"id": "never", "body": "taken over"}))
            assert mine == never.replace("'never'", "'mine'")
            assert "changed since" not in mine

    anyio.run(run)
    server.store.close()
    with MdCG(root, read_only=True) as store:
        assert store.get("mine").body == "okapi for agent a"


def test_the_servers_own_writes_of_other_fields_keep_the_read_good(tmp_path: Path) -> None:
    """verify, supersede and a reopen rewrite the file, not the body: a body built on the
    get before them is taken."""
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("remember", {"id": "old", "body": "lives in Paris"}))
        _ok(await client.call_tool("remember", {"id": "new", "body": "lives in Lyon"}))
        got = _ok(await client.call_tool("get", {"id": "old"}))
        _ok(await client.call_tool("verify", {"id": "old", "evidence": "a letter", "verdict": "confirmed"}))
        _ok(await client.call_tool("supersede", {"old": "old", "new": "new"}))
        _ok(await client.call_tool("update", {"id": "old", "reopen": True}))
        _ok(await client.call_tool("update", {"id": "old", "body": got["body"] + " (2019)"}))
        assert store.get("old").body == "lives in Paris (2019)"

    _serve(root, work)


def test_the_read_bodies_are_bounded() -> None:
    """An LRU: the least recently read id is forgotten first (then updated as never read)."""
    reads = mcp_server.ReadBodies(limit=2)
    reads.note("a", "one")
    reads.note("b", "two")
    reads.note("a", "three")  # read again: the most recent
    reads.note("c", "four")
    digest = mcp_server.body_digest
    assert [reads.held(i) for i in "abc"] == [(digest("three"), 5), None, (digest("four"), 4)]
    assert mcp_server.READ_BODIES == 4096


def test_an_alias_write_between_a_get_and_an_update_of_the_body(tmp_path: Path) -> None:
    """``add_observations`` reads the body again under the node's lock (not checked), and
    the agent's body built on its earlier ``get`` lacks the observation: refused."""
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        entity = {"name": "E", "entityType": "person", "observations": ["likes tea"]}
        _ok(await client.call_tool("create_entities", {"entities": [entity]}))
        got = _ok(await client.call_tool("get", {"id": "E"}))
        added = {"observations": [{"entityName": "E", "contents": ["plays chess"]}]}
        _ok(await client.call_tool("add_observations", added))
        refused = await client.call_tool("update", {"id": "E", "body": got["body"] + "\n- runs"})
        assert _err(refused) == STALE.format(id="E")
        assert store.get("E").body == got["body"] + "\n- plays chess"

    _serve(root, work, aliases=("mcp-memory",))


def test_mem0s_update_memory_after_get_memory_is_checked_too(tmp_path: Path) -> None:
    """mem0's ``update_memory`` sets the text whole, built on the agent's ``get_memory``:
    a person's edit in between makes it refused, nothing written (before: it went through
    the aliases' unchecked ``update`` and erased the edit); with no edit it is taken."""
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("remember", {"id": "groceries", "body": "Shopping list\n\n- milk"}))
        got = _ok(await client.call_tool("get_memory", {"memory_id": "groceries"}))
        _append(got["path"])
        before = Path(got["path"]).read_bytes()
        refused = await client.call_tool(
            "update_memory", {"memory_id": "groceries", "text": got["body"] + "\n- bread"}
        )
        assert _err(refused) == STALE.format(id="groceries")
        assert Path(got["path"]).read_bytes() == before
        again = _ok(await client.call_tool("get_memory", {"memory_id": "groceries"}))
        _ok(
            await client.call_tool(
                "update_memory", {"memory_id": "groceries", "text": again["body"] + "\n- bread"}
            )
        )
        assert (
            store.get("groceries").body
            == "Shopping list\n\n- milk\n- eggs (added by hand in the editor)\n- bread"
        )

    _serve(root, work, aliases=("mem0",))
