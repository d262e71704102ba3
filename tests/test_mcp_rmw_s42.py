"""MCP ``update`` checks the body the agent read under the node's lock, and refuses a
body built on part of a text (session 42, MCP user simulation mcpsim, findings 1 and 2).

1. Two agents each looping ``get`` -> ``update(body + one line)`` on one memory lost 2-8
   of 80 acknowledged lines (/tmp/s42/mcpsim/repro_rmw_lost_update.py): the server
   compared the body the agent had read with the file's *before* ``update_report`` took
   the node's lock, so the other agent's update could land between the check and the
   write, which then erased it. Now the check is ``MdCG.update_report(require=...)``
   run on the node as its file holds it under the lock (and again on a retry).
2. ``get`` of a 38,205-character memory returns its first 20,000 characters with
   ``truncated: true``; an update of that text plus a line was accepted and the last
   18,190 characters were gone (/tmp/s42/mcpsim/long_body_update.py). Now the server
   keeps how much of the body, from its start, the agent has had (windows read in turn
   add up) and refuses a whole body built on less, naming the offset to read on from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from test_mcp_bounds_s32 import _err, _serve
from test_mcp_edges_s32 import _ok

from md_cg import MdCG, Node, mcp_server

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}

#: one agent: a server of its own over the store, ROUNDS read-then-append updates, each
#: retried while refused; prints the lines acknowledged
AGENT = """
import sys, json, anyio
from mcp import Client
from md_cg import MdCG
from md_cg.mcp_server import create_server
root, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
acked = []
with MdCG(root) as store:
    server = create_server(root, store=store)
    async def run():
        async with Client(server) as c:
            for i in range(rounds):
                while True:
                    got = json.loads((await c.call_tool("get", {"id": "rmw"})).content[0].text)
                    line = f"- {name}{i}"
                    body = got["body"].rstrip() + "\\n" + line
                    r = await c.call_tool("update", {"id": "rmw", "body": body})
                    if not r.is_error:
                        acked.append(line)
                        break
                    assert "changed since you read it" in r.content[0].text, r.content[0].text
    anyio.run(run)
print(json.dumps(acked))
"""


def test_two_agents_appending_to_one_memory_lose_no_acknowledged_line(tmp_path: Path) -> None:
    """Two processes, each with its own server, 40 read-then-append updates each: every
    acknowledged line is in the memory at the end (before: 2-8 of 80 lost in 2 of 3 runs)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="rmw", body="target")
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    argv = [sys.executable, "-c", AGENT, str(root)]
    procs = [subprocess.Popen([*argv, name, "40"], env=ENV, **pipes) for name in "AB"]
    acked: set[str] = set()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        acked |= set(json.loads(out.strip().splitlines()[-1]))
    assert len(acked) == 80
    with MdCG(root) as s:
        lines = s.get("rmw").body.splitlines()
    assert lines[0] == "target"
    assert set(lines[1:]) == acked and len(lines) == 81  # each line once, none lost


HOLDER = """
import sys, time
from md_cg import MdCG
with MdCG(sys.argv[1]) as s:
    print("ready", flush=True)
    t = time.monotonic()
    s.update("x", body="from the other process")
    print(time.monotonic() - t)
"""


def test_require_runs_under_the_nodes_lock(tmp_path: Path) -> None:
    """While ``require`` runs, another process's update of the node waits; it lands after."""
    root = tmp_path / "m"
    seen: list[str] = []
    other: list[subprocess.Popen[str]] = []

    def require(node: Node) -> None:
        seen.append(node.body)
        if not other:
            pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
            other.append(subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], env=ENV, **pipes))
            assert other[0].stdout is not None and other[0].stdout.readline() == "ready\n"
            time.sleep(1.5)  # its update has begun: it waits for the lock this update holds
            assert other[0].poll() is None

    with MdCG(root) as s:
        s.add(id="x", body="first")
        done = s.update_report("x", body="ours", require=require)
        assert done.node.body == "ours" and done.changed
    out, err = other[0].communicate(timeout=120)
    assert other[0].returncode == 0, err
    assert float(out) >= 1.4  # it waited for our commit
    assert seen == ["first"]
    with MdCG(root) as s:
        assert s.get("x").body == "from the other process"


def test_what_require_raises_refuses_the_update_with_nothing_written(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="x", body="first")
        before = s.path_of("x").read_bytes()

        def require(node: Node) -> None:
            raise ValueError(f"no: {node.body}")

        with pytest.raises(ValueError, match=r"^no: first$"):
            s.update_report("x", body="second", tags=["t"], require=require)
        assert s.path_of("x").read_bytes() == before
        assert s.get("x").body == "first"


def _long_body() -> str:
    return "".join(f"line {i:05d} of a long memory\n" for i in range(1400))  # 37,800 characters


def test_an_update_built_on_a_cut_off_get_is_refused_and_the_text_kept(tmp_path: Path) -> None:
    root = tmp_path / "m"
    body = _long_body()
    total = len(body)

    async def work(client: Any, store: MdCG) -> None:
        store.add(id="long", body=body)
        path = store.path_of("long")
        before = path.read_bytes()
        got = _ok(await client.call_tool("get", {"id": "long", "max_chars": 20000}))
        assert got["truncated"] is True and got["next_offset"] == 20000
        sent = got["body"] + "\nOne more line."
        err = _err(await client.call_tool("update", {"id": "long", "body": sent}))
        assert err == (
            f"memory 'long': you read only the first 20,000 of its {total:,} characters, and a body "
            "given to update replaces the whole text (the rest would be lost); nothing was written: "
            "get it with offset=20000 (and on, while a reply has next_offset), then send the whole body"
        )
        assert path.read_bytes() == before
        # reading on: the windows add up to the whole text, and the update goes through
        rest = _ok(await client.call_tool("get", {"id": "long", "offset": 20000, "max_chars": 20000}))
        assert "truncated" not in rest and got["body"] + rest["body"] == body
        _ok(await client.call_tool("update", {"id": "long", "body": body + "One more line."}))
        assert store.get("long").body == body + "One more line."

    _serve(root, work)


def test_windows_read_out_of_turn_do_not_add_up() -> None:
    reads = mcp_server.ReadBodies()
    body = "a" * 100
    digest = mcp_server.body_digest(body)
    reads.note("x", body, 0, 30)
    reads.note("x", body, 50, 80)  # skipped 30..50: still the first 30 read
    assert reads.held("x") == (digest, 30)
    reads.note("x", body, 30, 60)  # on from where the reading stopped
    assert reads.held("x") == (digest, 60)
    reads.note("x", body, 20, 100)  # overlapping: to the end
    assert reads.held("x") == (digest, 100)
    reads.note("x", "b" * 100, 40, 100)  # a window of another text: nothing of it from its start
    assert reads.held("x") == (mcp_server.body_digest("b" * 100), 0)
    reads.note("x", body)  # the agent's own whole body (remember, update)
    assert reads.held("x") == (digest, 100)
