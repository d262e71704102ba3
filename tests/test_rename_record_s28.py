"""Review round 5, session 28: a rename killed after its commit line left no audit record.

``rename`` appends its :data:`md_cg.audit.RENAMED` record after its commit. A kill -9
after the commit line (or after the files moved, or after the old file went) left the
commit for the next sync to finish -- which it did -- but no record: ``get OLD`` said only
"no node with id", and the audit bookkeeping (departures, fates, returns) never learned
of the rename. A sync that finishes such a commit now appends the record the rename
would have written, read from the new file (its ``renamed_from`` ends with the old id).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from stresslib import stress
from typer.testing import CliRunner

from md_cg import MdCG, audit, paths
from md_cg.cli import app


def _rename_and_die(root: str, step: str) -> None:
    s = MdCG(root)
    s._engine.journal.fault = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == step else None
    s.rename("r0", "r1")


def _renames(s: MdCG) -> list[dict[str, Any]]:
    return [r for r in s.log(paths.AUDIT_DIR).read() if r.get("event") == audit.RENAMED]


def _cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, [*args, "--root", str(root)])
    return result.exit_code, result.stderr


@pytest.mark.parametrize("step", ["logged", "renamed", "deleted"])
def test_a_rename_killed_after_its_commit_line_is_recorded_by_sync(tmp_path: Path, step: str) -> None:
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="first", body="the memory to rename", agent_scope="ag", sensitivity="private")
        s.add(id="src", body="links to it", edges=[{"target": "first", "type": "similar"}])
        s.rename("first", "r0")  # a clean rename: its record is the model
        (clean,) = _renames(s)
        old = s.entry("r0").path
    assert stress.wait(stress.fork(_rename_and_die, str(root), step)) == -signal.SIGKILL
    with MdCG(root) as s:
        assert _renames(s) == [clean]  # the killed rename wrote none
        report = s.sync()
        assert report.old_files_removed == (() if step == "deleted" else (("r0", old),))
        assert sorted(s.ids()) == ["r1", "src"]
        node = s.get("r1")
        assert node.extra[audit.RENAMED_FROM] == ["first", "r0"]
        record = {
            "event": "renamed",
            "id": "r0",
            "to": "r1",
            "layer": node.layer,
            "time": node.updated_at,
            "agent_scope": "ag",
            "sensitivity": "private",
            "created_at": node.created_at,
            audit.RENAMED_FROM: ["first"],
        }
        assert set(record) == set(clean) | {audit.RENAMED_FROM}
        assert _renames(s) == [clean, record]
        d = s.departure("r0")
        assert d is not None
        assert (d.event, d.to, d.current, d.time) == ("renamed", "r1", "r1", node.updated_at)
        s.sync()  # nothing left to finish: no second record
        assert _renames(s) == [clean, record]
    code, err = _cli(root, "get", "r0")
    assert code == 2
    assert err.strip().startswith("error: no node with id 'r0' in this store (it was renamed to 'r1' on ")
    with MdCG(root) as s:
        s.sync()
        assert _renames(s) == [clean, record]


def test_a_finished_rename_is_not_recorded_twice(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="r0", body="the memory to rename")
    assert stress.wait(stress.fork(_rename_and_die, str(root), "renamed")) == -signal.SIGKILL
    with MdCG(root) as s:
        node = s._engine.read_node("knowledge/orphan/r1.md")
        log = s.log(paths.AUDIT_DIR)
        log.append([audit.rename_record(node, "r0")], durable=True)  # as if written before the kill
        s.sync()
        assert [(r["id"], r["to"], r["time"]) for r in _renames(s)] == [("r0", "r1", node.updated_at)]


def _forget_and_die(root: str) -> None:
    s = MdCG(root)
    s._engine.journal.fault = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == "logged" else None
    s.forget("b", "gone")


def test_a_finished_forget_records_no_rename(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="a", body="one", extra={"renamed_from": ["b"]}, edges=[{"target": "b", "type": "similar"}])
        s.add(id="b", body="two")
    assert stress.wait(stress.fork(_forget_and_die, str(root))) == -signal.SIGKILL
    with MdCG(root) as s:
        b = s.entry("b").path
        report = s.sync()
        assert report.finished_deletes == (("b", b),)
        assert sorted(s.ids()) == ["a"]
        assert _renames(s) == []
        assert s._engine.journal.moved == []


def _rename_again_and_die(root: str, step: str) -> None:
    s = MdCG(root)
    s._engine.journal.fault = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == step else None
    s.rename("A", "C")


def test_a_node_renamed_from_the_id_long_ago_is_not_taken_for_the_new_one(tmp_path: Path) -> None:
    """r6: B (renamed from A long ago) links to a new A; the rename A -> C re-points B's edge,
    so B is a put of its commit with renamed_from ending in A. Killed after its commit line,
    the sync's recovery recorded A -> B beside A -> C, and `get A` named B."""
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="A", body="the first memory under A")
        s.rename("A", "B")
        s.add(id="A", body="a second memory under A")
        s.update("B", edges=[{"target": "A", "type": "similar"}])
    assert stress.wait(stress.fork(_rename_again_and_die, str(root), "renamed")) == -signal.SIGKILL
    with MdCG(root) as s:
        s.sync()
        pairs = [(r["id"], r["to"]) for r in _renames(s)]
        assert pairs == [("A", "B"), ("A", "C")]
        gone = s.departure("A")
        assert gone is not None and gone.to == "C"


def test_a_write_that_finishes_a_killed_rename_records_it(tmp_path: Path) -> None:
    """r6: only a sync recorded the rename; a write of its ids (which finishes the commit)
    left no record, and a later sync had nothing left to record."""
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="r0", body="the memory to rename")
    assert stress.wait(stress.fork(_rename_and_die, str(root), "logged")) == -signal.SIGKILL
    with MdCG(root) as s:
        s.update("r1", importance=0.3)  # the write of its id finishes the commit
        assert [(r["id"], r["to"]) for r in _renames(s)] == [("r0", "r1")]
    with MdCG(root) as s:
        s.sync()
        assert [(r["id"], r["to"]) for r in _renames(s)] == [("r0", "r1")]  # no duplicate
        gone = s.departure("r0")
        assert gone is not None and gone.to == "r1"
