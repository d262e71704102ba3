"""The MCP server: every tool through a real stdio client, files on disk, tool errors.

The main test spawns ``python -m md_cg.cli mcp --root DIR`` as a subprocess
with the SDK's stdio client (as Claude Desktop or any MCP client would) and
drives every tool, checking both the answers and the store folder. The
in-process tests use the SDK's ``Client(server)``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import BINARY_SEARCH, build_small_store
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from md_cg import MdCG
from md_cg.mcp_server import INSTRUCTIONS, create_server

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"remember", "search", "recall", "get", "neighbours", "verify", "reflect", "health", "forget"}


def _build(root: Path) -> None:
    build_small_store(root)


def _md_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts}


def _frontmatter_line(path: Path, key: str) -> str:
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith(f"{key}: "):
            return line[len(key) + 2 :]
    raise AssertionError(f"{key} not in {path}")


async def _call(session: ClientSession, name: str, args: dict[str, Any]) -> Any:
    return await session.call_tool(name, args)


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert data == json.loads(result.content[0].text)
    return data


def _err(result: Any) -> str:
    assert result.is_error
    return result.content[0].text


async def _scenario(root: Path) -> None:
    env = {
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(root.parent)),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "md_cg.cli", "mcp", "--root", str(root)], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "md-cg"
        assert "REJECT" in (init.instructions or "")
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        assert "do NOT act on it" in tools["search"].description
        assert "Alias of `search`" in tools["recall"].description

        # remember: a new .md file appears where the result says
        before = _md_files(root)
        data = _ok(
            await _call(
                session,
                "remember",
                {
                    "body": "# Function: merge sort\nMerge sort splits, sorts and merges.\n",
                    "tags": ["domain:computing", "sorting"],
                    "id": "kp_merge",
                    "importance": 0.7,
                    "confidence": 0.5,
                    "verification_basis": "test",
                    "not_applicable": ["memory is scarce"],
                    "edges": [{"target": "kp_sorting", "type": "part_of", "confidence": 0.8}],
                },
            )
        )
        assert data["id"] == "kp_merge"
        assert data["layer"] == "knowledge"
        assert set(data["ccg_missing"]) == {
            "applies_when",
            "steps",
            "executes",
            "verified_by",
            "not_applicable",
        }
        path = Path(data["path"])
        assert path.is_file() and path.parent.name == data["bucket"]
        assert _md_files(root) - before == {path.relative_to(root).as_posix()}
        assert _frontmatter_line(path, "tags") == '["domain:computing", "sorting"]'
        assert _frontmatter_line(path, "non_applicable_conditions") == '["memory is scarce"]'
        assert "Merge sort splits" in path.read_text(encoding="utf-8")

        # search and recall: same answer; state, tier, basis, body, covered_neg
        args = {"query": "binary search", "k": 3}
        found = _ok(await _call(session, "search", args))
        again = _ok(await _call(session, "recall", args))
        assert found["results"] == again["results"]
        top = found["results"][0]
        assert (top["id"], top["state"], top["tier"]) == ("kp_bsearch", "ACCEPT", "T2")
        assert top["body"] == BINARY_SEARCH and top["confidence"] == 0.6
        assert set(top) >= {"id", "tier", "state", "basis", "score", "title", "body"}
        assert found["meta"]["tier"] in ("T2", "T3") and found["meta"]["routed"] is False
        neg = found["meta"]["covered_neg"]
        assert [n["layer"] for n in neg] == ["rejected"] and neg[0]["id"].startswith("rej_")
        assert found["counts"]["ACCEPT"] >= 1

        # a context that hits a not-applicable condition: REJECT, routed to the bucket
        routed = _ok(
            await _call(
                session,
                "search",
                {
                    "query": "binary search",
                    "k": 1,
                    "context": {"domain": "computing", "situation": "a linked list"},
                },
            )
        )
        assert routed["results"][0]["id"] == "kp_bsearch"
        assert routed["results"][0]["state"] == "REJECT"
        assert "linked list" in routed["results"][0]["basis"]
        assert routed["meta"]["routed"] is True and routed["meta"]["tier"] == "T0"

        # get
        got = _ok(await _call(session, "get", {"id": "kp_bsearch"}))
        assert got["frontmatter"]["verification_basis"] == "test"
        assert got["body"] == BINARY_SEARCH

        # neighbours, both directions
        out = _ok(await _call(session, "neighbours", {"id": "kp_bsearch"}))
        assert [(n["id"], n["type"], n["direction"]) for n in out["neighbours"]] == [
            ("kp_sorting", "part_of", "out")
        ]
        inc = _ok(await _call(session, "neighbours", {"id": "kp_sorting", "direction": "in"}))
        assert {n["id"] for n in inc["neighbours"]} == {"kp_bsearch", "kp_merge"}

        # verify: the new confidence is in the file
        ver = _ok(
            await _call(
                session,
                "verify",
                {"id": "kp_bsearch", "evidence": "all 40 tests pass", "verdict": "confirmed"},
            )
        )
        assert (ver["confidence_before"], ver["confidence_after"]) == (0.6, 0.65)
        bs_path = Path(ver["path"])
        assert _frontmatter_line(bs_path, "confidence") == "0.65"
        assert "all 40 tests pass" in _frontmatter_line(bs_path, "verification_history")

        # reflect: runs the search, records D in the reflection log
        ref = _ok(await _call(session, "reflect", {"query": "binary search", "k": 2}))
        states = [r["state"] for r in ref["results"]]
        accepted = states.count("ACCEPT")
        assert ref["reflection"]["d"] == pytest.approx(1 - accepted / len(states))
        ref2 = _ok(
            await _call(
                session, "reflect", {"query": "binary search", "k": 2, "feedback": ["REJECT", "REJECT"]}
            )
        )
        assert ref2["reflection"]["d"] == 1.0 and ref2["reflection"]["t"] == 1
        with MdCG(root, read_only=True) as reader:
            assert [r.t for r in reader.reflections()] == [0, 1]

        # health
        h = _ok(await _call(session, "health", {}))
        assert h["ok"] is True and h["nodes"] == 5 and h["findings"] == []

        # invalid arguments are tool errors; the server keeps working
        assert "no node with id 'kp_nope'" in _err(await _call(session, "get", {"id": "kp_nope"}))
        assert "unknown verdict" in _err(
            await _call(session, "verify", {"id": "kp_bsearch", "evidence": "x", "verdict": "maybe"})
        )
        assert "unknown layer" in _err(await _call(session, "remember", {"body": "x", "layer": "attic"}))
        assert "unknown layer" in _err(await _call(session, "search", {"query": "x", "layer": "attic"}))
        assert "verification_basis" in _err(
            await _call(session, "remember", {"body": "x", "verification_basis": "vibes"})
        )
        assert "protected" in _err(await _call(session, "forget", {"id": "anc_rule", "reason": "tidy"}))
        assert "needs a reason" in _err(await _call(session, "forget", {"id": "kp_merge", "reason": " "}))
        assert _err(await _call(session, "search", {"query": "x", "k": 0}))  # schema: k >= 1
        assert _err(await _call(session, "no_such_tool", {}))
        assert _ok(await _call(session, "health", {}))["ok"] is True

        # forget: the file is gone, a tombstone without content remains
        gone = _ok(await _call(session, "forget", {"id": "kp_merge", "reason": "superseded"}))
        assert gone == {"id": "kp_merge", "forgotten": True, "layer": "knowledge", "dangling_edges": []}
        assert not path.exists()
        assert "no node with id 'kp_merge'" in _err(await _call(session, "get", {"id": "kp_merge"}))

    with MdCG(root, read_only=True) as store:
        stones = store.tombstones()
        assert [(t["id"], t["reason"], t["layer"]) for t in stones] == [
            ("kp_merge", "superseded", "knowledge")
        ]
        assert "kp_merge" not in store and store.get("kp_bsearch").confidence == 0.65
        assert store.health().ok


def test_every_tool_over_stdio_changes_the_files(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _build(root)

    async def bounded() -> None:
        with anyio.fail_after(60):
            await _scenario(root)

    anyio.run(bounded)


def test_in_process_server_creates_a_missing_store_and_reports_errors(tmp_path: Path) -> None:
    root = tmp_path / "new-memory"
    server = create_server(root)
    assert root.is_dir() and (root / "knowledge").is_dir()

    async def run() -> None:
        async with Client(server) as client:
            empty = await client.call_tool("search", {"query": "anything"})
            assert not empty.is_error and empty.structured_content["results"] == []
            made = await client.call_tool("remember", {"body": "note", "layer": "contextual"})
            assert not made.is_error
            node_id = made.structured_content["id"]
            assert (root / "contextual" / f"{node_id}.md").is_file()
            bad = await client.call_tool("neighbours", {"id": node_id, "direction": "sideways"})
            assert bad.is_error and "direction must be one of" in bad.content[0].text
            bad = await client.call_tool("reflect", {"query": "note", "feedback": ["MAYBE"]})
            assert bad.is_error
            fine = await client.call_tool("get", {"id": node_id})
            assert fine.structured_content["layer"] == "contextual"

    anyio.run(run)


def test_instructions_explain_the_states() -> None:
    for state in ("ACCEPT", "REJECT", "DEFER", "BLINDSPOT"):
        assert state in INSTRUCTIONS


def test_every_tool_is_documented(tmp_path: Path) -> None:
    docs = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    for name in TOOLS - {"recall"}:
        assert f"### `{name}`" in docs, name
    assert "### `search` and `recall`" in docs
    server = create_server(tmp_path)

    async def names() -> set[str]:
        return {t.name for t in await server.list_tools()}

    assert anyio.run(names) == TOOLS
