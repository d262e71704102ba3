"""Session 28: an id that left the store says where it went.

``get`` of an id that was forgotten, swept or renamed said only "no node with id ..."
(the audit log knew): :meth:`MdCG.departure` tells what became of it, and the CLI
and the MCP server add it to their "no node" errors. A scoped handle is told only of
the memories it could see; an id a memory holds again (re-added, renamed back, or in
another scope) gets no story.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from mcp import Client
from typer.testing import CliRunner

from md_cg import MdCG, Scope
from md_cg.audit import RENAMED, Departure, departure
from md_cg.cli import app
from md_cg.errors import NodeNotFoundError
from md_cg.mcp_server import create_server
from md_cg.store import with_departure

T = 1796541540.0  # 2026-12-06T07:19:00Z
WHEN = "2026-12-06 07:19 UTC"


def _cli(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, [*args, "--root", str(root)])
    return result.exit_code, result.stdout, result.stderr


def _store(root: Path) -> None:
    with MdCG(root, create=True) as s:
        s.add(id="tea", body="Alice likes green tea")
        s.add(id="oslo", body="Carol lives in Oslo")
        s.add(id="keep", body="Bob keeps bees")
        s.rename("tea", "drink")
        s.rename("drink", "cup")
        s.forget("oslo", "moved   away\nfor good")


def test_departure_of_forgotten_renamed_and_held_ids(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s:
        gone = s.departure("oslo")
        assert gone is not None
        assert (gone.id, gone.event, gone.reason, gone.to, gone.current) == (
            "oslo",
            "forget",
            "moved away for good",
            None,
            None,
        )
        assert abs(gone.time - time.time()) < 60
        tea = s.departure("tea")
        assert tea is not None
        assert (tea.event, tea.to, tea.current) == (RENAMED, "drink", "cup")
        drink = s.departure("drink")
        assert drink is not None and (drink.to, drink.current) == ("cup", "cup")
        assert s.departure("keep") is None  # held
        assert s.departure("cup") is None  # held (renamed onto)
        assert s.departure("never") is None  # the log says nothing
        # re-added under the forgotten id: held again, no story
        s.add(id="oslo", body="Dave lives in Oslo now")
        assert s.departure("oslo") is None
        # renamed back: the old id is a memory again
        s.rename("cup", "tea")
        assert s.departure("tea") is None
        assert s.departure("cup") is not None and s.departure("cup").current == "tea"  # type: ignore[union-attr]
        # an archived memory holds its id: its own error says archived
        s.archive(["keep"])
        assert s.departure("keep") is None


def test_sweep_and_describe_texts() -> None:
    records = [
        {"event": "forget", "id": "a", "reason": "x" * 500, "time": T},
        {"event": "sweep", "id": "b", "reason": "expired", "time": T},
        {"event": RENAMED, "id": "c", "to": "d", "time": T},
        {"event": RENAMED, "id": "d", "to": "e", "time": T},
        {"event": "forget", "id": "e", "reason": "", "time": T},
    ]
    a = departure(records, "a", lambda i: False)
    assert a == Departure("a", "forget", T, reason="x" * 200)
    assert departure(records, "b", lambda i: False) == Departure("b", "sweep", T, reason="expired")
    assert departure(records, "b", lambda i: False).describe() == f"it expired and was swept on {WHEN}"  # type: ignore[union-attr]
    c = departure(records, "c", lambda i: False)
    assert c == Departure("c", RENAMED, T, to="d", current=None)
    assert c.describe() == f"it was renamed to 'd' on {WHEN}"  # type: ignore[union-attr]
    assert departure(records, "e", lambda i: False).describe() == f"it was forgotten on {WHEN}"  # type: ignore[union-attr]
    # a rename cycle in a hand-edited log ends
    loop = [
        {"event": RENAMED, "id": "p", "to": "q", "time": T},
        {"event": RENAMED, "id": "q", "to": "p", "time": T},
    ]
    assert departure(loop, "q", lambda i: False) == Departure("q", RENAMED, T, to="p", current=None)


def test_scoped_handle_is_told_only_of_its_own(tmp_path: Path) -> None:
    root = tmp_path / "m"
    mine, other = Scope(agent="a", workspace="w"), Scope(agent="b", workspace="w")
    with MdCG(root, create=True, scope=other) as s:
        s.add(id="secret", body="the other agent's note")
        s.forget("secret", "private reason")
    with MdCG(root, scope=mine) as s:
        assert s.departure("secret") is None
        try:
            s.get("secret")
        except NodeNotFoundError as exc:
            assert str(with_departure(s, exc)) == "no node with id 'secret' in this store"
    with MdCG(root, scope=other) as s:
        assert s.departure("secret") is not None


def test_cli_errors_say_where_the_id_went(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    code, out, err = _cli(root, "get", "oslo")
    assert (code, out) == (2, "")
    assert err.strip().startswith("error: no node with id 'oslo' in this store (it was forgotten on ")
    assert err.strip().endswith(", reason: moved away for good)")
    code, _, err = _cli(root, "update", "tea", "--body", "x")
    assert code == 2
    assert err.strip().startswith("error: no node with id 'tea' in this store (it was renamed to 'drink' on ")
    assert err.strip().endswith("; that memory is 'cup' now)")
    code, _, err = _cli(root, "get", "never")
    assert (code, err.strip()) == (2, "error: no node with id 'never' in this store")


def test_mcp_errors_say_where_the_id_went(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    replies: list[tuple[bool, str]] = []

    async def run() -> None:
        async with Client(create_server(str(root))) as client:
            for args in ({"id": "tea"}, {"id": "never"}):
                r = await client.call_tool("get", args)
                replies.append((r.is_error, r.content[0].text))

    anyio.run(run)
    assert replies[0][0] is True
    assert replies[0][1].startswith(
        "Error executing tool get: no node with id 'tea' in this store (it was renamed to 'drink' on "
    )
    assert replies[0][1].endswith("; that memory is 'cup' now)")
    assert replies[1] == (True, "Error executing tool get: no node with id 'never' in this store")


def test_library_get_is_unchanged_and_reads_no_audit(tmp_path: Path) -> None:
    """The library's own error stays plain (integrations catch it on hot paths)."""
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s:
        try:
            s.get("oslo")
        except NodeNotFoundError as exc:
            assert str(exc) == "no node with id 'oslo' in this store"


def test_describe_escapes_control_characters_and_bounds_ids() -> None:
    """r3: a reason (an agent's text) with a terminal's escape sequence reached stderr raw;
    a tampered log's 2 MB id reached it whole."""
    evil = "\x1b]0;PWNED\x07red\x08\u202eevil\u202c\x00nul"
    gone = departure([{"event": "forget", "id": "v1", "reason": evil, "time": T}], "v1", lambda i: False)
    assert gone is not None
    assert gone.describe() == (
        f"it was forgotten on {WHEN}, reason: \\x1b]0;PWNED\\x07red\\x08\\u202eevil\\u202c\\x00nul"
    )
    huge = departure([{"event": RENAMED, "id": "h", "to": "x" * 2_000_000, "time": T}], "h", lambda i: False)
    assert huge is not None
    text = huge.describe()
    assert text == f"it was renamed to '{'x' * 158}… on {WHEN}"


def test_a_long_rename_chain_is_followed_to_its_end() -> None:
    """r3: a chain of more than 64 renames lost "that memory is X now"."""
    records = [{"event": RENAMED, "id": f"h{i}", "to": f"h{i + 1}", "time": T} for i in range(100)]
    gone = departure(records, "h0", lambda i: i == "h100")
    assert gone == Departure("h0", RENAMED, T, to="h1", current="h100")


def test_departure_decodes_only_the_lines_it_needs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """r3: every unknown id decoded the whole audit log (1.5 s at 100k records): only the
    lines naming the id, and the renames, are read now."""
    from md_cg import paths
    from md_cg.logs import AppendLog

    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s:
        s.log(paths.AUDIT_DIR).append(
            [{"event": "forget", "id": f"n{i}", "reason": "bulk", "time": T} for i in range(2_000)]
        )

        def whole(self: AppendLog) -> list[dict[str, object]]:
            raise AssertionError("the whole log was read")

        monkeypatch.setattr(AppendLog, "read", whole)
        assert s.departure("n1999") == Departure("n1999", "forget", T, reason="bulk")
        assert s.departure("never") is None
        tea = s.departure("tea")
        assert tea is not None and (tea.to, tea.current) == ("drink", "cup")
