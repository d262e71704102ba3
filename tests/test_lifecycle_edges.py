"""Lifecycle edges a reviewer found by living with a store for simulated weeks.

Each test names what went wrong before: scoped ids of negative memory that
collided across agents, recall figures and resurfacing that counted negative
memory, accesses recorded for ids the caller cannot see, resurfacing a day
off across daylight saving time, a routine sweep that left the store
unhealthy, and a scoped import whose refusal was the wrong error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import MdCG, Scope
from md_cg.errors import ImportSourceError, NodeNotFoundError
from md_cg.transfer import import_nodes


def _pair(root: Path) -> tuple[MdCG, MdCG]:
    return (
        MdCG(root, scope=Scope(agent="alice"), refresh_interval=0),
        MdCG(root, scope=Scope(agent="bob"), refresh_interval=0),
    )


def test_negative_memory_of_the_same_text_gets_an_id_per_scope(tmp_path: Path) -> None:
    """Alice could not record a hypothesis Bob had rejected (DuplicateIdError), and the
    refusal told her Bob held that exact text."""
    alice, bob = _pair(tmp_path / "m")
    theirs = bob.add_rejected("Bob salary is paid weekly", "HR said monthly")
    mine = alice.add_rejected("Bob salary is paid weekly", "alice reason")
    assert mine.id != theirs.id and mine.id.startswith("rej_") and theirs.id.startswith("rej_")
    assert (
        alice.add_unresolved("Is the office open on Sunday?").id
        != bob.add_unresolved("Is the office open on Sunday?").id
    )
    assert alice.ids() == sorted([mine.id, alice.add_unresolved("Is the office open on Sunday?").id])
    with MdCG(tmp_path / "plain") as plain:  # a handle without scope keeps the ids it always had
        assert (
            plain.add_rejected("x is y", "no").id
            == "rej_" + __import__("hashlib").sha256(b"x is y").hexdigest()[:16]
        )
    alice.close()
    bob.close()


def test_recall_figures_and_resurfacing_leave_negative_memory_out(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        for i in range(3):
            s.add(id=f"k{i}", layer="knowledge", body=f"note {i}", created_at="2020-01-01T00:00:00Z")
        rej = s.add_rejected("the moon is cheese", "it is rock")
        unr = s.add_unresolved("why is the sky blue?")
        stats = s.recall_stats()
        assert stats.zombie.active_count == 3
        shown = {s.resurface(today=date(2026, 1, 1), seed=n).id for n in range(40)}  # type: ignore[union-attr]
        assert shown <= {"k0", "k1", "k2"} and rej.id not in shown and unr.id not in shown


def test_record_access_refuses_ids_the_caller_does_not_see(tmp_path: Path) -> None:
    alice, bob = _pair(tmp_path / "m")
    bob.add(id="b1", layer="self", body="Bob note")
    alice.add(id="a1", layer="self", body="Alice note")
    for bad in ("b1", "nonexistent"):
        with pytest.raises(NodeNotFoundError) as err:
            alice.record_access(["a1", bad])
        assert str(err.value) == f"no node with id {bad!r} in this store"
    alice.record_access(["a1"])
    alice.compact_access()
    assert bob.access_counts() == {} and alice.access_counts() == {"a1": 1}
    alice.close()
    bob.close()


def test_resurfacing_uses_the_days_own_daylight_saving_offset(tmp_path: Path) -> None:
    """Written at 00:30 summer time on 15 July (22:30 UTC on the 14th) and read in
    winter: it belonged to the 14th (today's offset), so it came up a day late."""
    code = """
import sys
from datetime import date
from md_cg import MdCG
s = MdCG(sys.argv[1])
s.add(id="summer_note", layer="self", body="Wrote the wedding speech", created_at="2026-07-14T22:30:00Z")
for i in range(5):
    s.add(id=f"x{i}", layer="self", body=f"filler {i}", created_at="2026-03-01T10:00:00Z")
p = s.resurface(today=date(2027, 7, 15))
print(p.id, p.tier, p.date.isoformat())
"""
    env = {**python_env(), "TZ": "CET-1CEST,M3.5.0,M10.5.0/3"}  # Berlin's rule, no tz database needed
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["summer_note", "1", "2026-07-15"]


def test_a_created_at_that_is_no_calendar_day_does_not_stop_resurfacing(tmp_path: Path) -> None:
    """A migrated note with created_at in milliseconds (year 55,000) made `mdcg today` fail."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="ms", layer="self", body="far future", created_at=1700000000000.0)
        s.add(id="ok", layer="self", body="a note", created_at="2025-06-01T12:00:00Z")
        picked = s.resurface(today=date(2026, 6, 1))
        assert picked is not None and picked.id == "ok"


def test_a_routine_sweep_leaves_the_store_healthy(tmp_path: Path) -> None:
    """A temporary note another memory pointed at was swept: its edge dangled and health
    (and `mdcg health`, exit 1) reported the store unhealthy after ordinary expiry."""
    with MdCG(tmp_path / "m", ttl_seconds=1) as s:
        s.add(id="meet", layer="contextual", body="Meeting with Ana", tier="temp")
        s.add(
            id="notes",
            layer="knowledge",
            body="Notes of the meeting",
            edges=[{"target": "meet", "type": "causal"}],
        )
        time.sleep(max(0.0, s.get("meet").expires_at - time.time()) + 0.1)
        assert s.sweep(dry_run=False).removed == ("meet",)
        assert s.health().findings == ()
        s.add(id="gone", layer="knowledge", body="x")
        s.add(id="links", layer="knowledge", body="y", edges=[{"target": "gone", "type": "causal"}])
        s.delete("gone", force=True)  # a delete keeps no tombstone: the dangling edge is named
        assert [(f.kind, f.node_id) for f in s.health().findings] == [("dangling_edge", "links")]


def test_a_scoped_import_names_each_record_of_another_scope(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    records = [
        {"id": "a1", "body": "alice's", "agent_scope": "alice"},
        {"id": "c1", "body": "carol's"},
        {"id": "a2", "body": "alice's too", "agent_scope": "alice"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with MdCG(tmp_path / "m", scope=Scope(agent="carol")) as s:
        with pytest.raises(ImportSourceError) as err:
            import_nodes(s, str(src))
        text = str(err.value)
        assert "2 bad record(s)" in text and "line 1" in text and "line 3" in text
        assert "agent_scope 'alice' is outside this store handle's scope ('carol')" in text
        assert s.ids() == []
        report = import_nodes(s, str(src), skip_bad=True)
        assert report.ids == ["c1"] and s.ids() == ["c1"]
    assert os.path.isdir(tmp_path / "m")
