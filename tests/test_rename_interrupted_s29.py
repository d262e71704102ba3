"""Session 29: a rename killed after its commit line whose old file is then edited by hand.

The recovery (a sync, or the next write of its ids) finishes the new file and keeps the old
one -- a file changed after the commit line is never replaced nor removed -- so the memory
is under both ids. Before, nothing said so after the sync: ``health()`` was clean. Now the
recovery appends a :data:`md_cg.audit.INTERRUPTED` record, and ``health()`` gives a
``rename_interrupted`` finding while both ids hold the memory (read-only: it writes nothing).
Also: ``health()``'s ``open_commit`` finding of such a commit said "a write of 3 node(s)";
it names the rename now, and an old file edited since the crash as left as it is.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from stresslib import stress
from typer.testing import CliRunner

from md_cg import MdCG, audit, journal, paths
from md_cg.cli import app

OLD = "knowledge/orphan/r0.md"
NEW = "knowledge/orphan/r1.md"
DETAIL = (
    "the rename of 'r0' to 'r1' was interrupted by a crash and the old file (knowledge/orphan/r0.md) "
    "was edited afterwards: both are kept ('r1' at knowledge/orphan/r1.md); merge them: take what you "
    "need into 'r1', then `delete` 'r0' (not `forget`: that forgets the memory)"
)


def _rename_and_die(root: str, step: str) -> None:
    s = MdCG(root)
    s._engine.journal.fault = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == step else None
    s.rename("r0", "r1")


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _killed(tmp_path: Path, step: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A store whose rename r0 -> r1 was killed at ``step``; returns the root and where
    its commit line is (``log SHARD, record SEQ``)."""
    monkeypatch.setattr(journal, "_CLOCK_SLACK", 0.2)  # the hand edit comes 0.4 s after the line
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="r0", body="the memory to rename", agent_scope="ag")
        s.add(id="src", body="links to it", edges=[{"target": "r0", "type": "similar"}])
    assert stress.wait(stress.fork(_rename_and_die, str(root), step)) == -signal.SIGKILL
    with MdCG(root, read_only=True) as s:
        s.health()
        (c,) = s._engine.cursor.pending.values()
    time.sleep(0.4)
    return root, f"log {c.shard}, record {c.seq}"


@pytest.mark.parametrize("step", ["logged", "exchanged-1", "rename-1", "renamed"])
def test_health_names_an_open_commit_that_is_a_rename(
    tmp_path: Path, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "a write of 3 node(s) interrupted by a crash"."""
    root, where = _killed(tmp_path, step, monkeypatch)
    before = _tree(root)
    with MdCG(root, read_only=True) as s:
        report = s.health()
        assert [f.detail for f in report.by_kind("open_commit")] == [
            f"a rename of 'r0' to 'r1' interrupted by a crash ({where}); sync() or the next write of "
            f"these ids finishes it: writes r1, src; removes the old files of r0 ({OLD})"
        ]
        # r1's and src's temp files; src's file, which the rename read, is put in place
        # first, by an exchange (session 41): the old src file at its temp name until checked,
        # and removed only once r0's old file is set aside and checked (session 42)
        # src's new file is there before r1's: its edge to r1 dangles until the commit is done
        temps = {"logged": 2, "exchanged-1": 2, "rename-1": 1, "renamed": 1}[step]
        dangling = ["dangling_edge"] if step == "exchanged-1" else []
        assert [f.kind for f in report.findings] == dangling + ["open_commit"] + ["temp_file"] * temps
    assert _tree(root) == before


def _edit_old(root: Path) -> str:
    path = root / OLD
    text = path.read_text().replace("the memory to rename", "the memory to rename, and a hand edit")
    assert "a hand edit" in text
    path.write_text(text)
    return text


def _interrupted(s: MdCG) -> list[dict[str, Any]]:
    return [r for r in s.log(paths.AUDIT_DIR).read() if r.get("event") in (audit.INTERRUPTED, audit.RENAMED)]


@pytest.mark.parametrize("step", ["logged", "renamed"])
def test_a_killed_rename_whose_old_file_was_edited_keeps_both_and_health_says_so(
    tmp_path: Path, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, where = _killed(tmp_path, step, monkeypatch)
    edited = _edit_old(root)
    before = _tree(root)
    with MdCG(root, read_only=True) as s:  # before recovery: the plan says the edit stays
        (finding,) = s.health().by_kind("open_commit")
        assert finding.detail == (
            f"a rename of 'r0' to 'r1' interrupted by a crash ({where}); sync() or the next write of "
            f"these ids finishes it: writes r1, src; leaves r0 ({OLD}) as edited after the crash "
            "(a hand edit is never replaced)"
        )
    assert _tree(root) == before  # a read-only health writes nothing
    with MdCG(root) as s:
        report = s.sync()
        assert report.left_as_edited == ("r0",)
        assert report.old_files_removed == ()
        assert sorted(s.ids()) == ["r0", "r1", "src"]
        assert (root / OLD).read_text() == edited  # nothing the person wrote is lost
        new = s.get("r1")
        assert new.body == "the memory to rename"
        assert new.extra[audit.RENAMED_FROM] == ["r0"]
        assert [(e.target, e.type) for e in s.get("src").edges] == [("r1", "similar")]
        assert s.get("r0").body == "the memory to rename, and a hand edit"
        assert _interrupted(s) == [
            {
                "event": "rename_interrupted",
                "id": "r0",
                "to": "r1",
                "layer": "knowledge",
                "time": new.updated_at,
                "agent_scope": "ag",
                "created_at": new.created_at,
            }
        ]
        assert s.departure("r0") is None
        findings = [(f.kind, f.severity, f.node_id, f.path, f.detail) for f in s.health().findings]
        assert findings == [("rename_interrupted", "warning", "r0", OLD, DETAIL)]
        s.sync()  # nothing more to record
        assert len(_interrupted(s)) == 1
    before = _tree(root)
    with MdCG(root, read_only=True) as s:
        assert [(f.kind, f.detail) for f in s.health().findings] == [("rename_interrupted", DETAIL)]
    assert _tree(root) == before
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["health", "--json", "--root", str(root)])
    assert result.exit_code == 1
    assert orjson.loads(result.stdout)["findings"] == [
        {"kind": "rename_interrupted", "detail": DETAIL, "path": OLD, "node_id": "r0", "severity": "warning"}
    ]
    with MdCG(root) as s:  # merged: the old one deleted, nothing more to say
        s.delete("r0")
        assert s.health().findings == ()
        # r1's renamed_from lists r0 (session 29, fix-git-hints: the index keeps it): its id now
        gone = s.departure("r0")
        assert gone is not None and (gone.event, gone.time, gone.to, gone.current) == (
            "renamed",
            None,
            "r1",
            "r1",
        )


def test_a_write_that_finishes_the_killed_rename_records_it_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only a sync: a write of one of its ids runs the recovery, which records it."""
    root, _ = _killed(tmp_path, "renamed", monkeypatch)
    edited = _edit_old(root)
    with MdCG(root) as s:
        s.update("src", body="links to it, updated")
        assert (root / OLD).read_text() == edited
        assert [(r["event"], r["id"], r["to"]) for r in _interrupted(s)] == [
            ("rename_interrupted", "r0", "r1")
        ]
    with MdCG(root) as s:
        s.sync()
        assert sorted(s.ids()) == ["r0", "r1", "src"]
        assert [(f.kind, f.detail) for f in s.health().findings] == [("rename_interrupted", DETAIL)]
        s.delete("r1", force=True)  # the other way to settle it: keep the old id
        assert s.health().by_kind("rename_interrupted") == []


def test_a_killed_rename_not_edited_is_finished_with_no_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _killed(tmp_path, "renamed", monkeypatch)
    with MdCG(root) as s:
        assert s.sync().old_files_removed == (("r0", OLD),)
        assert sorted(s.ids()) == ["r1", "src"]
        assert [r["event"] for r in _interrupted(s)] == ["renamed"]
        assert s.health().findings == ()


def test_the_finding_goes_when_an_id_holds_another_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _killed(tmp_path, "logged", monkeypatch)
    _edit_old(root)
    with MdCG(root) as s:
        s.sync()
        s.delete("r0")
        s.add(id="r0", body="another memory under the old id")
        assert s.health().findings == ()


def _killed_hand_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hand-written memory r0 (no created_at), its rename to r1 killed after the commit
    line, the old file edited by hand and the recovery run: the finding is up."""
    monkeypatch.setattr(journal, "_CLOCK_SLACK", 0.2)
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        (root / "knowledge" / "orphan").mkdir(parents=True)
        (root / OLD).write_text('---\nid: "r0"\nlayer: "knowledge"\n---\nthe memory to rename\n')
        s.sync()
        assert s.entry("r0").created_at is None
    assert stress.wait(stress.fork(_rename_and_die, str(root), "renamed")) == -signal.SIGKILL
    time.sleep(0.4)
    _edit_old(root)
    with MdCG(root) as s:
        assert s.sync().left_as_edited == ("r0",)
        (record,) = _interrupted(s)
        assert "created_at" not in record
        assert (s.entry("r0").created_at, s.entry("r1").created_at) == (None, None)
        assert [(f.kind, f.node_id, f.detail) for f in s.health().findings] == [
            ("rename_interrupted", "r0", DETAIL)
        ]
    return root


def test_the_finding_of_a_memory_without_created_at_goes_when_the_old_id_holds_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 4 (r4_interrupted_false.py): with no creation time in the record, nothing
    checked the ids; after `delete r0` as advised, a new memory added as r0 brought the
    finding back, advising to delete it. Every write of md-cg sets created_at, so a memory
    without one is not what a later add stored."""
    root = _killed_hand_written(tmp_path, monkeypatch)
    with MdCG(root) as s:
        s.delete("r0")
        assert s.health().findings == ()
        s.add(id="r0", body="an unrelated new memory that reuses the id")
        assert s.health().findings == ()
        assert sorted(s.ids()) == ["r0", "r1"]


def test_the_finding_of_a_memory_without_created_at_stays_while_both_hold_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taking the edit into r1 (an update keeps its created_at unset) leaves the finding
    up until r0 is deleted."""
    root = _killed_hand_written(tmp_path, monkeypatch)
    with MdCG(root) as s:
        s.update("r1", body="the memory to rename, and a hand edit")
        assert s.entry("r1").created_at is None
        assert [(f.kind, f.detail) for f in s.health().findings] == [("rename_interrupted", DETAIL)]
        s.delete("r0")
        assert s.health().findings == ()
