"""MCP ``supersede`` replies with the reason its edge holds (session 42, mcpsim low finding).

A repeat of ``supersede`` without a reason replied ``"reason": ""`` while the edge kept
the first reason (换车); one with another reason replied that reason, which was not kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from test_mcp_bounds_s32 import _serve
from test_mcp_edges_s32 import _ok

from md_cg import MdCG


def test_a_repeated_supersede_replies_the_reason_kept(tmp_path: Path) -> None:
    async def work(client: Any, store: MdCG) -> None:
        store.add(id="old-car", body="用户开一辆本田。")
        store.add(id="new-car", body="用户现在开特斯拉。")
        pair = {"old": "old-car", "new": "new-car"}
        first = _ok(await client.call_tool("supersede", {**pair, "reason": "换车"}))
        assert first == {"old": "old-car", "new": "new-car", "reason": "换车", "superseded": True}
        again = _ok(await client.call_tool("supersede", pair))
        assert again == first
        other = _ok(await client.call_tool("supersede", {**pair, "reason": "sold"}))
        assert other == {
            **first,
            "note": "'new-car' already superseded 'old-car': the reason given first is kept",
        }
        edges = [e.to_dict() for e in store.get("new-car").edges]
        assert edges == [{"target": "old-car", "type": "supersedes", "reason": "换车"}]

    _serve(tmp_path / "m", work)
