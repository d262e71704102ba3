"""A durable write whose folder fsync fails and whose ``done`` line then fails too (a full
disk) is in place, left open -- and a ``forget`` so stopped scrubs all the same; the notes
on a write's error say only what will happen (session 39; last session's attack notes).

Session 38 made a ``forget`` whose folder fsync failed scrub before its error goes up
(tests/test_forget_applied_s38.py); but when the ``done`` line failed next, the error was
noted :data:`md_cg.errors.LOGGED_NOTE` ("the batch was logged before this error: the next
recovery completes it") and not applied: ``forget_many`` let it go up before the scrub, and
the forgotten words stayed in ``.mdcg/index.snapshot`` until some later compaction; a
``rename`` so stopped wrote no ``renamed`` record, and its recovery after a re-add of the
old id recorded ``rename_interrupted``. Every file of such a write is in place: it is now
noted :data:`md_cg.errors.OPEN_NOTE` and applied (:func:`md_cg.was_applied`).

The scrub's compaction recovers the open commit -- safe: the recovery does no del over a
file saved since (:func:`md_cg.journal._later_ids`) -- and the error then says the write is
closed. And LOGGED_NOTE ("... completes it") was false of an id the recovery leaves (a file
saved since): it now says so, and the CLI's and the MCP server's message too.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import mcp_calls
from test_add_race_s35 import _ENV
from test_forget_applied_s38 import (
    EIO,
    GONE,
    IN_PLACE,
    WORD,
    WORDS,
    _fail_folder_fsync,
    _holding,
    _store,
    forget_by,
)
from test_recover_stamps_s38 import _body, _fail_closing, _files, _other, left_open
from test_recover_stamps_s38 import _store as small_store

from md_cg import MdCG, was_applied, was_logged
from md_cg.cli import os_error_message
from md_cg.errors import APPLIED_NOTE
from md_cg.mcp_server import not_writable_message

#: The note of a write in place whose ``done`` line failed (md_cg.errors.OPEN_NOTE), exactly.
OPEN = (
    "every file of the write is in place, but the fsync of their folders failed (it is not known "
    "to be durable) and so did the line closing the write: the next recovery closes it"
)
#: The note of a write stopped before its files were all in place (md_cg.errors.LOGGED_NOTE).
LOGGED = (
    "the batch was logged before this error and may be partly done: the next recovery finishes "
    "it, but not over a file saved or edited since (that memory is kept as it is then)"
)
#: What the CLI and the MCP server add of such a write (md_cg.render.LOGGED_WRITE).
LOGGED_CLI = (
    "the write was logged before this error and may be partly done: the next sync (or write of "
    "these ids) finishes it once the store is writable, but not over a file saved or edited since "
    "(that memory is kept as it is then)"
)
ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def _no_closing(w: MdCG, monkeypatch: pytest.MonkeyPatch, *ops: str) -> list[str]:
    """Every journal line of ``ops`` (``done``; ``recovered``) fails with ENOSPC; returns the
    list of the ops refused."""
    append = w._engine.journal.append
    refused: list[str] = []

    def failing(records: list[dict[str, Any]]) -> Any:
        if records and records[0].get("op") in ops:
            refused.append(records[0]["op"])
            raise type(ENOSPC)(*ENOSPC.args)
        return append(records)

    monkeypatch.setattr(w._engine.journal, "append", failing)
    return refused


@pytest.mark.parametrize(
    ("op", "fail"),
    [(op, fail) for fail in (EIO, KeyboardInterrupt()) for op in GONE],
    ids=[f"{kind}-{op}" for kind in ("EIO", "interrupt") for op in GONE],
)
def test_a_forget_whose_done_line_failed_too_scrubs_and_is_closed_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, fail: BaseException
) -> None:
    _store(root := tmp_path / "m")
    w = MdCG(root, durable=True, auto_compact=None)
    calls = _fail_folder_fsync(monkeypatch, fail)
    refused = _no_closing(w, monkeypatch, "done")
    with pytest.raises(type(fail)) as raised:
        forget_by(w, op)
    monkeypatch.undo()
    gone = GONE[op]
    assert (len(calls), refused) == (1, ["done"])
    left = sorted({"h1", "h2", "other", "x1"} - set(gone))
    assert sorted(p.stem for p in (root / "contextual").glob("*.md")) == left
    assert [t["id"] for t in w.tombstones()] == gone
    # before session 39: [".mdcg/index.snapshot"] -- the error went up before the scrub
    assert {i: _holding(root, WORDS[i]) for i in gone} == {i: [] for i in gone}
    # the scrub's compaction recovered the open commit: closed, and the error says so
    # (before: ["the batch was logged before this error: the next recovery completes it"])
    assert raised.value.__notes__ == [APPLIED_NOTE]
    assert was_applied(raised.value) and was_logged(raised.value)
    assert w._engine.journal.failed == []
    w.close()
    assert {i: _holding(root, WORDS[i]) for i in WORDS} == {
        i: [] if i in gone else [".mdcg/index.snapshot"] for i in WORDS
    }
    with MdCG(root) as fresh:
        assert fresh.health().by_kind("open_commit") == []
        report = fresh.sync()
        assert (report.added, report.deleted, report.changed, report.recovered) == ((), (), (), 0)
        assert sorted(fresh.ids(include_expired=True)) == left
        found = {i: [r.id for r in fresh.search(WORDS[i])[0] if not r.filler] for i in WORDS}
        assert found == {i: [] if i in gone or i == "x1" else [i] for i in WORDS}
        assert [t["id"] for t in fresh.tombstones()] == gone


_ADD_H1 = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1], auto_compact=None) as m:
    m.add(id="h1", body="a new h1, nothing forgotten in it", layer="contextual")
"""


@pytest.mark.parametrize("then", ["compact", "add, compact"])
def test_a_forget_whose_scrub_cannot_close_it_says_open_and_the_next_compaction_scrubs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """The log takes no closing line at all (nor the scrub's ``recovered``): the scrub's
    compaction cannot settle the commit, the snapshot cannot be rewritten yet (a warning
    says so) and the error says the write is open. The failed process's next compaction
    recovers the open commit first, then leaves the forgotten words in no file under
    ``.mdcg/``. With ``add``, another process adds ``h1`` again before (acknowledged; its
    write of ``h1`` finds the commit dead -- the scrub retired the failed process's shard --
    and closes it): that new file is kept."""
    root = tmp_path / "m"
    _store(root)
    w = MdCG(root, durable=True, auto_compact=None)
    _fail_folder_fsync(monkeypatch, EIO)
    refused = _no_closing(w, monkeypatch, "done", "recovered")
    with warnings.catch_warnings(record=True) as told, pytest.raises(OSError) as raised:
        warnings.simplefilter("always")
        w.forget("h1", "done with it")
    monkeypatch.undo()
    assert refused == ["done", "recovered"]
    # before session 39: [LOGGED_NOTE] ("... the next recovery completes it"), and no scrub
    assert raised.value.__notes__ == [OPEN]
    assert [str(m.message) for m in told] == [
        f"md-cg: {root}: forgotten, but the index snapshot still holds the words of 'h1' until a "
        "compaction succeeds (mdcg compact): [Errno 28] No space left on device"
    ]
    assert [c.ids for c in w._engine.journal.failed] == [{"h1"}]
    assert _holding(root, WORD) == [".mdcg/index.snapshot"]  # no snapshot written without settling
    left = ["h2", "other", "x1"]
    if then == "add, compact":
        done = subprocess.run(
            [sys.executable, "-c", _ADD_H1, str(root)], env=_ENV, capture_output=True, text=True
        )
        assert (done.returncode, done.stderr) == (0, "")
        left = ["h1", *left]
    w.compact_index()
    if then == "compact":
        assert w._engine.journal.failed == []  # recovered by itself
    assert _holding(root, WORD) == []
    assert sorted(p.stem for p in (root / "contextual").glob("*.md")) == left
    w.close()
    with MdCG(root) as fresh:
        assert fresh.health().by_kind("open_commit") == []
        report = fresh.sync()
        assert (report.added, report.deleted, report.changed, report.recovered) == ((), (), (), 0)
        assert [r.id for r in fresh.search(WORD)[0] if not r.filler] == []
        assert [t["id"] for t in fresh.tombstones()] == ["h1"]
        if then == "add, compact":
            assert fresh.get("h1").body.strip() == "a new h1, nothing forgotten in it"


def _audit(root: Path) -> list[tuple[str, str, str | None]]:
    """(event, id, to) of every record of ``.mdcg/audit``, in order."""
    out = []
    for shard in sorted((root / ".mdcg" / "audit").glob("*.jsonl")):
        for line in shard.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)["r"]
            out.append((r["event"], r["id"], r.get("to")))
    return out


@pytest.mark.parametrize("recovered_by", ["itself", "another"])
def test_a_rename_left_open_then_its_old_id_added_again_is_recorded_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recovered_by: str
) -> None:
    small_store(root := tmp_path / "m")
    w = MdCG(root, durable=True, auto_compact=None)
    _fail_closing(monkeypatch)
    with pytest.raises(OSError, match="EIO") as raised:
        w.rename("h1", "h9")
    monkeypatch.undo()
    assert raised.value.__notes__ == [OPEN] and was_applied(raised.value)
    assert [c.ids for c in w._engine.journal.failed] == [{"h1", "h9"}]
    assert _audit(root) == [("renamed", "h1", "h9")]  # before: [] -- written by no one yet
    _other(root, "add")
    if recovered_by == "itself":
        w.compact_index()
        w.close()
    else:
        w.close()
        with MdCG(root, auto_compact=None) as c:
            c.compact_index()
    assert _files(root) == ["h1.md", "h9.md", "other.md"]
    # before session 39: [("rename_interrupted", "h1", "h9")] -- the recovery left the new h1.md
    # (another memory) and took it for the old file edited after a crash
    assert _audit(root) == [("renamed", "h1", "h9")]
    with MdCG(root) as fresh:
        assert fresh.health().by_kind("open_commit") == []
        assert fresh.get("h1").body.strip() == "NEW h1 added by another process"
        assert fresh.get("h9").body.strip() == "old h1"


def test_an_update_left_open_is_noted_with_what_its_recovery_will_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update whose rename into place failed: the note says the recovery finishes it,
    but not over a file saved since -- and that is what it does (before: "the next recovery
    completes it", and the recovery left the other process's update, as it should)."""
    root = tmp_path / "m"
    w, error = left_open(root, monkeypatch, lambda w: w.update("h1", body="h1 as the failed update has it"))
    assert error.__notes__ == [LOGGED]
    assert was_logged(error) and not was_applied(error)
    _other(root, "update")
    w.compact_index()
    assert _body(root, "h1") == "h1 as another process updated it"
    w.close()


def test_the_cli_and_mcp_messages_of_a_logged_and_of_an_open_write() -> None:
    denied = OSError(errno.EACCES, "Permission denied", "k1.md")
    denied.add_note(LOGGED)
    assert os_error_message(denied, "forget") == f"k1.md: Permission denied; {LOGGED_CLI}"
    assert not_writable_message(denied) == f"Permission denied: k1.md; {LOGGED_CLI}"
    # a write in place left open: in place, not "may be partly done" (before: a traceback for
    # EIO, and for a full disk "the write was logged before this error and may be partly done")
    for fail, said in ((EIO, "Input/output error"), (ENOSPC, "No space left on device")):
        left = type(fail)(*fail.args)
        left.add_note(OPEN)
        assert os_error_message(left, "update") == IN_PLACE.format(error=said)


def test_an_mcp_forget_left_open_says_in_place_and_scrubs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    _store(root)
    store = MdCG(root, durable=True, auto_compact=None)
    _fail_folder_fsync(monkeypatch, EIO)
    _no_closing(store, monkeypatch, "done")
    [forgot] = mcp_calls(root, [("forget", {"id": "h1", "reason": "done with it"})], store=store)
    monkeypatch.undo()
    # before session 39: "Error executing tool forget: [Errno 5] Input/output error" (logged as a bug)
    assert (forgot.is_error, forgot.content[0].text) == (
        True,
        "Error executing tool forget: " + IN_PLACE.format(error="Input/output error"),
    )
    assert _holding(root, WORD) == []
    assert sorted(p.stem for p in (root / "contextual").glob("*.md")) == ["h2", "other", "x1"]
