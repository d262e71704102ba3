"""The MCP ``forget`` refused for a duplicated id tells the AGENT what to do (session 42).

Two files hold ``meeting`` with different memories. The library's refusal names its own
call and the CLI's flags (``rename(..., path=)``, ``--all-copies (all_copies=True)``); the
tool has neither (its schema is at its character budget: no ``all_copies`` field), and
before, the agent got those words as they were. Now it is told that nothing changed, that
no tool removes a memory it was not shown, and which commands the user can run -- whole,
within the error reply's bound.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_rename_shown_s42 import _files, _two_memories

from md_cg import InvalidArgumentError, MdCG, OtherMemoriesError

pytest.importorskip("mcp")


def _mcp_forget(root: Path, node_id: str) -> tuple[bool, str]:
    from mcp import Client

    from md_cg.mcp_server import create_server

    async def run() -> tuple[bool, str]:
        with MdCG(root) as store:
            async with Client(create_server(root, store=store)) as client:
                got = await client.call_tool("forget", {"id": node_id, "reason": "cancelled"})
                return bool(got.is_error), str(got.content[0].text)

    return anyio.run(run)


def test_mcp_forget_refusal_speaks_to_the_agent(tmp_path: Path) -> None:
    root, shown, work = _two_memories(tmp_path)
    before = _files(root)
    error, text = _mcp_forget(root, "meeting")
    assert error
    assert text == (  # whole: within the error reply's bound (mcp_server.ERROR_CHARS)
        "Error executing tool forget: cannot forget 'meeting': other files hold this id with a "
        f"different memory ({work}; {shown} "
        "is the one shown), and would go with it: nothing was changed. No tool here removes a memory "
        "you were not shown: tell the user, who can give that file its own id (`mdcg rename 'meeting' "
        f"NEW_ID --path {work}`; then forget 'meeting' again) or forget every file of the id "
        "(`mdcg forget 'meeting' --all-copies --reason WHY`)"
    )
    assert "all_copies=True" not in text and "rename(..., path=)" not in text
    assert _files(root) == before


def test_the_library_error_carries_the_files(tmp_path: Path) -> None:
    root, shown, work = _two_memories(tmp_path)
    with MdCG(root) as s, pytest.raises(OtherMemoriesError) as err:
        s.forget("meeting", "x")
    e = err.value
    assert isinstance(e, InvalidArgumentError) and (e.name, e.value) == ("all_copies", "meeting")
    assert (e.node_id, e.verb, e.shown, e.others) == ("meeting", "forget", shown, (work,))
    assert str(e) == (
        f"cannot forget 'meeting': other files hold this id with a different memory ({work}; {shown} "
        "is the one shown), and would go with it. To keep one, give it its own id: `mdcg rename "
        f"'meeting' NEW_ID --path {work}` (rename(..., path=)); or forget every copy: --all-copies "
        "(all_copies=True)"
    )
