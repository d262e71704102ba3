"""A durable write whose folder fsync fails after every rename and unlink is closed, not
left open for recovery (attack a2 of session 37, D1, high, pre-existing).

A durable ``forget("h1")`` whose last fsync (the folders, after the unlink) failed left its
commit open in its process; another process then added ``h1`` again (acknowledged), and
the next compaction -- every ``forget`` makes one -- recovered the open commit and did its
del again: the new ``h1.md`` was removed (within the recovery's 2 s clock slack it is not
taken for a later write), and no sync told it."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest
from test_add_race_s35 import _ENV

from md_cg import MdCG, fsops, was_logged
from md_cg.errors import was_applied

#: Adds ``h1`` again from another process.
_ADD = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1], auto_compact=None) as m:
    m.add(id="h1", body="NEW h1 added by another process", layer="contextual")
"""


def remove_h1(w: MdCG, op: str) -> None:
    """``op`` of ``h1``: ``forget``, ``delete`` or ``rename`` (to ``h9``)."""
    if op == "forget":
        w.forget("h1", "done with it")
    elif op == "delete":
        w.delete("h1", force=True)
    else:
        w.rename("h1", "h9")


def _files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "contextual").glob("*.md"))


@pytest.mark.parametrize("op", ["forget", "delete", "rename"])
@pytest.mark.parametrize("fail", [OSError(errno.EIO, "EIO (injected)"), KeyboardInterrupt()])
def test_an_add_after_a_write_whose_last_fsync_failed_survives_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, fail: BaseException
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as m:
        m.add(id="h1", body="old h1", layer="contextual")
        m.add(id="other", body="other", layer="contextual")
    real, calls = fsops.fsync_all, []

    def second_fails(work: object) -> None:
        calls.append(work)
        if len(calls) == 2:  # the first: the temp files and the line; the second: the folders
            raise fail
        real(work)  # type: ignore[arg-type]

    w = MdCG(root, durable=True, auto_compact=None)
    monkeypatch.setattr(fsops, "fsync_all", second_fails)
    with pytest.raises(type(fail)) as raised:
        remove_h1(w, op)
    monkeypatch.undo()
    assert was_logged(raised.value) and was_applied(raised.value)  # never "nothing changed"
    assert len(calls) == 2 and w._engine.journal.failed == []
    assert _files(root) == (["h9.md", "other.md"] if op == "rename" else ["other.md"])
    done = subprocess.run([sys.executable, "-c", _ADD, str(root)], env=_ENV, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    w.compact_index()  # before: the recovery removed the new h1.md here
    assert _files(root) == (["h1.md", "h9.md", "other.md"] if op == "rename" else ["h1.md", "other.md"])
    assert w.get("h1").body.strip() == "NEW h1 added by another process"
    w.close()
    with MdCG(root) as fresh:
        report = fresh.sync()
        assert (report.added, report.deleted, report.changed) == ((), (), ())
        assert fresh.get("h1").body.strip() == "NEW h1 added by another process"
        if op == "rename":  # closed by its writer, no recovery writes its audit record: the rename does
            renamed = [r for r in fresh.log("audit").read() if r.get("event") == "renamed"]
            assert [(r["id"], r["to"]) for r in renamed] == [("h1", "h9")]
