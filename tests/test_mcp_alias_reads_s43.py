"""An alias's inner ``get`` / ``update`` is no read of the agent's (session 43, attack
atk12, F2).

The MCP ``update`` of a whole body is checked against the body the agent last had
(``mcp_server.ReadBodies``, session 42). The aliases (``mcp-memory``, ``mem0``) call the
``get``, ``remember`` and ``update`` functions inside, and each noted the memory's body
*now* as had by the agent -- though the alias's reply may not show it: ``open_nodes``
leaving the memory out of its reply to stay in budget, ``create_entities`` skipping an
entity that exists, ``add_observations`` writing lines into it. Agent A read ``x``, agent
B updated it (acknowledged), A called one such alias, and A's update built on its old
read went through, erasing B's line (/tmp/s43/atk12/mcp_readnote.py). Now only the tools
the agent calls itself note what it had."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client

from md_cg import MdCG, Node
from md_cg.mcp_server import create_server

B_LINE = "B's acknowledged line"
LONG = "記憶" * 700


def _json(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def _alias_call(a: Client, alias: str) -> None:
    """Agent A's alias call naming ``x`` (whose reply does not show B's update)."""
    if alias == "open_nodes":  # 19 long memories first: x is left out to keep the budget
        got = _json(await a.call_tool("open_nodes", {"names": [f"f{i}" for i in range(19)] + ["x"]}))
        assert "x" in got["left_out"] and B_LINE not in json.dumps(got, ensure_ascii=False)
    elif alias == "create_entities":
        got = _json(
            await a.call_tool(
                "create_entities", {"entities": [{"name": "x", "entityType": "note", "observations": []}]}
            )
        )
        assert got == {"created": [], "skipped": ["x"], "refused": []}
    elif alias == "add_observations":
        got = _json(
            await a.call_tool(
                "add_observations", {"observations": [{"entityName": "x", "contents": ["A obs"]}]}
            )
        )
        assert B_LINE not in json.dumps(got, ensure_ascii=False)


@pytest.mark.parametrize("alias", ["none", "open_nodes", "create_entities", "add_observations"])
def test_an_update_on_an_old_read_is_refused_after_any_alias_call(tmp_path: Path, alias: str) -> None:
    """A gets x, B gets and updates x, A calls an alias naming x, then A sends x's old body
    plus a line: refused (as without the alias call), B's line kept. Before: accepted after
    each of the three aliases, and B's acknowledged line was gone."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="記" * 900))
        for i in range(19):
            s.add(Node(id=f"f{i}", layer="knowledge", body=f"{LONG} filler {i}"))

    async def run() -> str:
        with MdCG(root) as sa, MdCG(root) as sb:
            async with (
                Client(create_server(root, store=sa, aliases=["mcp-memory"])) as a,
                Client(create_server(root, store=sb)) as b,
            ):
                old = _json(await a.call_tool("get", {"id": "x"}))["body"]
                theirs = _json(await b.call_tool("get", {"id": "x"}))["body"]
                _json(await b.call_tool("update", {"id": "x", "body": f"{theirs}\n{B_LINE}"}))
                if alias != "none":
                    await _alias_call(a, alias)
                refused = await a.call_tool("update", {"id": "x", "body": f"{old}\nA's line"})
                assert refused.is_error
                return refused.content[0].text

    text = anyio.run(run)
    assert text == (
        "Error executing tool update: memory 'x' changed since you read it (an edit by hand or "
        "another agent); nothing was written: get it again and repeat the change"
    )
    with MdCG(root) as s:
        body = s.get("x").body
    assert B_LINE in body and "A's line" not in body
    assert ("A obs" in body) == (alias == "add_observations")


def test_the_agents_own_get_still_lets_its_update_through(tmp_path: Path) -> None:
    """After the alias call, A's own ``get`` is a read: its update built on it goes through
    and keeps B's line."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="first"))

    async def run() -> None:
        with MdCG(root) as sa, MdCG(root) as sb:
            async with (
                Client(create_server(root, store=sa, aliases=["mcp-memory"])) as a,
                Client(create_server(root, store=sb)) as b,
            ):
                _json(await a.call_tool("get", {"id": "x"}))
                _json(await b.call_tool("update", {"id": "x", "body": f"first\n{B_LINE}"}))
                await _alias_call(a, "create_entities")
                now = _json(await a.call_tool("get", {"id": "x"}))["body"]
                _json(await a.call_tool("update", {"id": "x", "body": f"{now}\nA's line"}))

    anyio.run(run)
    with MdCG(root) as s:
        assert s.get("x").body == f"first\n{B_LINE}\nA's line"
