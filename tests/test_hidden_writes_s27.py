"""Writes to archived and expired memories (review of session 27).

An archived memory, or a temporary one whose expiry has passed (not yet swept),
is absent from every default read. A write to one went through: ``update``,
``modify``, ``edit_text``, ``move``, ``rename``, ``supersede`` (an expired old
node) and ``reopen`` changed the file, and the CLI and the MCP server then
reported an error for a change they had saved; a body update through them
revived an expired memory as a long-term one. Now each of these writes is
refused under the node's lock with the error a read gives (NodeNotFoundError,
``hidden`` set), nothing written; an expired memory can be renewed by an
``update`` that gives its tier or a later ``expires_at``, and is then live.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from md_cg import MdCG, Node, Scope
from md_cg.cli import app
from md_cg.errors import NodeNotFoundError
from md_cg.mcp_server import create_server

ARCHIVED = "no node with id 'a1' in this store (it is archived: unarchive it to use it)"
RENEW = "renew it to change it: update it with retention_tier='long' or a later expires_at"
PAST = 1796000000.0  # 2026-11-30T00:53:20Z, long past when these tests run
WHEN = "2026-11-30T00:53:20Z"
EXPIRED = f"no node with id 't1' in this store (it is a temporary memory that expired at {WHEN}; {RENEW})"


def _build(root: Path) -> None:
    """a1 archived, t1 expired (temp, not swept), live and l2 live; live links to a1 and t1."""
    with MdCG(root) as s:
        s.add(id="a1", layer="knowledge", body="The office wifi is on floor 3")
        s.add(id="l2", layer="knowledge", body="The canteen opens at noon")
        s.add_many(
            [
                Node(
                    id="t1",
                    layer="knowledge",
                    body="dentist at 3pm today",
                    retention_tier="temp",
                    expires_at=PAST,
                ),
                Node(id="live", layer="knowledge", body="Parking is behind the building"),
            ],
            stamp=False,
        )
        s.archive(["a1"])
        assert s.ids() == ["l2", "live"]
        assert s.ids(include_archived=True, include_expired=True) == ["a1", "l2", "live", "t1"]


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every memory file (bytes and mtime_ns), by path."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*.md"))
        if ".mdcg" not in p.relative_to(root).parts
    }


Write = Callable[[MdCG, str], Any]

WRITES: dict[str, Write] = {
    "update body": lambda s, i: s.update(i, body="EDITED"),
    "update tags": lambda s, i: s.update(i, tags=["edited"]),
    "update expires_at past": lambda s, i: s.update(i, expires_at=PAST - 10),
    "modify": lambda s, i: s.modify(i, lambda n: setattr(n, "body", "EDITED")),
    "edit_text": lambda s, i: s.edit_text(
        i, lambda t: t.replace("today", "EDITED").replace("floor", "EDITED")
    ),
    "move": lambda s, i: s.move(i, "contextual"),
    "rename": lambda s, i: s.rename(i, "renamed"),
    "reopen": lambda s, i: s.reopen(i),
    "supersede old": lambda s, i: s.supersede(i, "live"),
    "supersede new": lambda s, i: s.supersede("l2", i),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_write_to_an_archived_node_is_refused_and_writes_nothing(tmp_path: Path, write: str) -> None:
    root = tmp_path / "m"
    _build(root)
    before = _files(root)
    time.sleep(0.01)
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError) as refused:
            WRITES[write](s, "a1")
        assert (str(refused.value), refused.value.node_id, refused.value.hidden) == (
            ARCHIVED,
            "a1",
            "archived",
        )
        assert s.ids(include_archived=True, include_expired=True) == ["a1", "l2", "live", "t1"]
    assert _files(root) == before


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_write_to_an_expired_node_is_refused_and_writes_nothing(tmp_path: Path, write: str) -> None:
    root = tmp_path / "m"
    _build(root)
    before = _files(root)
    time.sleep(0.01)
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError) as refused:
            WRITES[write](s, "t1")
        assert (str(refused.value), refused.value.node_id, refused.value.hidden) == (EXPIRED, "t1", "expired")
        assert refused.value.fix == RENEW
        assert "t1" not in s
    assert _files(root) == before


def test_the_refusal_is_decided_under_the_lock_against_an_archive_made_meanwhile(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _build(root)
    with MdCG(root) as s, MdCG(root) as other:
        assert s.get("l2").body == "The canteen opens at noon"  # s's index now holds l2 live
        other.archive(["l2"])
        before = _files(root)
        for write in ("update body", "modify", "edit_text", "rename", "reopen", "supersede old"):
            with pytest.raises(NodeNotFoundError) as refused:
                WRITES[write](s, "l2")
            assert str(refused.value) == ARCHIVED.replace("a1", "l2"), write
        assert _files(root) == before


@pytest.mark.parametrize(
    ("changes", "tier"),
    [
        ({"expires_at": "later"}, "temp"),
        ({"retention_tier": "long"}, "long"),
        ({"retention_tier": "long", "body": "dentist moved to 4pm"}, "long"),
        ({"retention_tier": "temp"}, "temp"),
    ],
)
def test_an_update_renewing_an_expired_node_works_and_it_is_live_again(
    tmp_path: Path, changes: dict[str, Any], tier: str
) -> None:
    root = tmp_path / "m"
    _build(root)
    later = time.time() + 3600
    changes = {k: (later if v == "later" else v) for k, v in changes.items()}
    with MdCG(root) as s:
        out = s.update("t1", **changes)
        got = s.get("t1")
        assert got == out and "t1" in s and "t1" in s.ids()
        assert got.retention_tier == tier
        assert got.body == changes.get("body", "dentist at 3pm today")
        if tier == "long":
            assert got.expires_at is None
        else:
            assert got.expires_at is not None and got.expires_at > time.time()
        if "expires_at" in changes:
            assert got.expires_at == pytest.approx(later, abs=1e-6)
        assert s.sweep(dry_run=True).expired == ()


def test_a_renewal_that_leaves_it_expired_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _build(root)
    before = _files(root)
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError) as refused:
            s.update("t1", retention_tier="temp", expires_at=PAST - 10)
        assert (refused.value.node_id, refused.value.hidden) == ("t1", "expired")
        assert "t1" not in s
    assert _files(root) == before


def test_modify_writes_a_hidden_node_only_when_asked_and_it_stays_hidden(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _build(root)
    with MdCG(root) as s:
        s.modify("a1", lambda n: setattr(n, "importance", 0.25), include_archived=True)
        s.modify("t1", lambda n: setattr(n, "importance", 0.5), include_expired=True)
        assert s.get("a1", include_archived=True).importance == 0.25
        assert s.get("t1", include_expired=True).importance == 0.5
        assert s.ids() == ["l2", "live"]
        with pytest.raises(NodeNotFoundError) as refused:
            s.modify("a1", lambda n: None, include_expired=True)
        assert str(refused.value) == ARCHIVED


def test_a_scoped_handle_is_told_of_an_out_of_scope_node_as_of_an_unknown_id(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="theirs", layer="knowledge", body="another agent's note", agent_scope="b")
        s.add(id="live", layer="knowledge", body="a shared note")
        s.add(id="gone", layer="knowledge", body="another agent's archived note", agent_scope="b")
        s.archive(["gone"])
    before = _files(root)
    with MdCG(root, scope=Scope(agent="a")) as mine:
        for node_id in ("theirs", "gone"):
            for write in sorted(set(WRITES) - {"supersede new"}):
                with pytest.raises(NodeNotFoundError) as refused:
                    WRITES[write](mine, node_id)
                said = (str(refused.value), refused.value.hidden)
                assert said == (f"no node with id {node_id!r} in this store", None), write
    assert _files(root) == before


def _cli(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, [*args, "--root", str(root)])
    return result.exit_code, result.stdout, result.stderr


def test_cli_update_of_a_hidden_node_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _build(root)
    before = _files(root)
    assert _cli(root, "update", "a1", "--body", "EDITED WHILE ARCHIVED") == (
        2,
        "",
        "error: node 'a1' is archived: `mdcg get --archived a1` reads it, "
        "`mdcg unarchive a1` brings it back\n",
    )
    expired = (
        2,
        "",
        f"error: node 't1': it is a temporary memory that expired at {WHEN}; `mdcg update t1 --tier long` "
        "renews it, `mdcg get --expired t1` reads it, `mdcg sweep` removes it\n",
    )
    assert _cli(root, "update", "t1", "--tag", "foo") == expired
    assert _cli(root, "update", "t1", "--body", "dentist moved") == expired
    assert _cli(root, "update", "a1", "--reopen")[0] == 2
    assert _files(root) == before
    code, out, err = _cli(root, "update", "t1", "--tier", "long", "--json")
    assert (code, err) == (0, "")
    assert (json.loads(out)["tier"], json.loads(out)["expires"]) == ("long", None)
    with MdCG(root) as s:
        assert s.get("t1").retention_tier == "long"


def test_mcp_update_of_a_hidden_node_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _build(root)
    before = _files(root)
    replies: list[tuple[bool, str]] = []

    async def run() -> None:
        async with Client(create_server(str(root))) as client:
            for args in (
                {"id": "a1", "tags": ["edited"]},
                {"id": "t1", "body": "dentist moved"},
                {"id": "t1", "tags": ["edited"], "reopen": True},
            ):
                r = await client.call_tool("update", args)
                replies.append((r.is_error, r.content[0].text))
            assert _files(root) == before
            r = await client.call_tool("update", {"id": "t1", "tier": "long", "body": "dentist moved"})
            replies.append((r.is_error, r.content[0].text))

    anyio.run(run)
    expired = (
        True,
        f"Error executing tool update: memory 't1': it is a temporary memory that expired at {WHEN}; "
        "renew it to change it: call `update` with tier='long' (and the change)",
    )
    assert replies[:3] == [
        (
            True,
            "Error executing tool update: memory 'a1' is archived: out of every read until a person runs "
            "`mdcg unarchive a1`",
        ),
        expired,
        expired,
    ]
    ok, text = replies[3]
    assert not ok and json.loads(text)["tier"] == "long"
    with MdCG(root) as s:
        got = s.get("t1")
        assert (got.body, got.retention_tier, got.expires_at) == ("dentist moved", "long", None)
