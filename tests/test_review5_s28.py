"""Session 28, review rounds r5 and r6 of the day's journal and migration fixes.

* An error raised while a process finished *another* process's logged commit (the roll-
  forward that precedes a write or runs in sync) carried no "logged" note, so the CLI said
  "nothing was changed" although the earlier commit was now partly done.
* ``fsops.folder_refusal`` raised ValueError for a NUL and answered "usable" for ``..``
  (``open_dir`` followed it out of the store).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from md_cg import journal, was_logged, was_recovering
from md_cg.errors import UnsafePathError
from md_cg.fsops import folder_refusal


def test_a_failed_roll_forward_carries_the_logged_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = journal.Journal(str(tmp_path))
    dead = journal.Commit("1_x.jsonl", 1, (("a", "knowledge/orphan/a.md", ".a.md.tmp"),), ())

    def refused(*args: object, **kwargs: object) -> bool:
        raise OSError(errno.EROFS, "Read-only file system", "a.md")

    monkeypatch.setattr(journal, "roll_forward", refused)
    with pytest.raises(OSError) as info:
        j.recover([dead], advance=lambda shard, nbytes: None)
    # r6: not "logged" -- the caller's own write never reached its commit line
    assert was_recovering(info.value) and not was_logged(info.value)
    assert info.value.__notes__ == [journal.RECOVERY_NOTE]


@pytest.mark.parametrize(
    "rel",
    ["knowledge/..", "knowledge/../..", "..", "knowledge/./b", "knowledge//b", "/etc", "knowledge/a\0b"],
)
def test_folder_refusal_refuses_paths_that_are_no_plain_folder(tmp_path: Path, rel: str) -> None:
    (tmp_path / "knowledge").mkdir()
    refusal = folder_refusal(str(tmp_path), rel)
    assert isinstance(refusal, UnsafePathError)
    assert str(refusal).endswith("is not a plain folder path below the store")


def test_folder_refusal_of_ordinary_folders(tmp_path: Path) -> None:
    (tmp_path / "knowledge" / "b").mkdir(parents=True)
    (tmp_path / "knowledge" / "f").write_text("x")
    assert folder_refusal(str(tmp_path), "knowledge/b") is None
    assert folder_refusal(str(tmp_path), "knowledge/new") is None  # made by the write
    refusal = folder_refusal(str(tmp_path), "knowledge/f")
    assert isinstance(refusal, UnsafePathError) and "is a file where md-cg keeps a folder" in str(refusal)


def test_the_cli_says_an_earlier_write_was_being_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    """r6: a user's update that first finished another process's batch, and failed there,
    was told its write was logged and would be completed: it never was."""
    from md_cg.cli import os_error_message

    exc = OSError(errno.EROFS, "Read-only file system", "knowledge/orphan/o2.md")
    exc.add_note(journal.RECOVERY_NOTE)
    assert os_error_message(exc, "update") == (
        "knowledge/orphan/o2.md: the store's file system is read-only; an earlier interrupted write "
        "could not be finished and may be partly done; this command changed nothing: run the sync once "
        "the store is writable (it finishes that write), then this command again"
    )


def test_apply_changes_writes_the_archive_log_when_the_retention_record_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """r6: a failed retention append after apply_changes' commit kept its archive log line
    out too (the archive happened; `.mdcg/archive_log` had no record of it)."""
    from md_cg import MdCG, Node, record_failed
    from md_cg.retention import Retention
    from md_cg.views import ARCHIVE_LOG

    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="a1", body="to archive")

        def refused(self: Retention, *args: object, **kwargs: object) -> None:
            raise OSError(errno.EROFS, "Read-only file system", "retention")

        monkeypatch.setattr(Retention, "record", refused)
        with pytest.raises(OSError) as info:
            s.apply_changes(add=[Node(id="n1", body="new one")], archive=["a1"])
        assert info.value.filename == "retention" and record_failed(info.value) is None
        assert [(r["event"], r["id"]) for r in s.log(ARCHIVE_LOG).read()] == [("archive", "a1")]
        assert (root / "archive").is_dir() and "n1" in s
