"""Review round 4, session 28: what an interrupted commit did, said exactly.

1. ``health``'s plan of an open commit said "removes lower (...)" for a del naming an id
   its file does not hold (a file holding ``Upper``, an NFC id against an NFD stem), which
   the roll-forward then refused: the plan now makes the roll-forward's check
   (:func:`md_cg.journal.holds_other`) and says "keeps".
2. A crashed rename's old file was reported as an interrupted delete ("files removed",
   "removes r0"): the memory was renamed. Sync lists it as ``old_files_removed``.
3. A write interrupted by a read-only (or permission) error after its commit line --
   ``knowledge/`` read-only under a writable store -- printed "nothing was changed",
   though the commit line (and a put) were written: the CLI and the MCP server now say
   it was logged and that the next sync completes it.
"""

from __future__ import annotations

import errno
import os
import signal
import time
import unicodedata
from pathlib import Path

import orjson
import pytest
from stresslib import stress
from typer.testing import CliRunner

from md_cg import MdCG, fsops, journal, was_logged
from md_cg.cli import app, os_error_message
from md_cg.mcp_server import not_writable_message
from md_cg.render import LOGGED_WRITE, sync_lines

DEAD_SHARD = "999998_deadbeefdeadbeefdeadbeefdeadbee0.jsonl"
CAFE_NFD = unicodedata.normalize("NFD", "café")
CAFE_NFC = unicodedata.normalize("NFC", "café")


def _forge(root: Path, commits: list[tuple[list[list[str]], list[list[str]]]]) -> None:
    lines = [
        orjson.dumps({"ts": time.time_ns(), "seq": k + 1, "op": "commit", "put": puts, "del": dels})
        for k, (puts, dels) in enumerate(commits)
    ]
    (root / ".mdcg" / "log" / DEAD_SHARD).write_bytes(b"\n".join(lines) + b"\n")


def _plans(s: MdCG) -> list[str]:
    return [f.detail.split("finishes it: ", 1)[1] for f in s.health().by_kind("open_commit")]


def test_the_plan_keeps_what_the_roll_forward_keeps(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="plain memory to drop", id="m1")
        m1 = s.entry("m1").path
    hand = root / "knowledge" / "hand"
    hand.mkdir(parents=True)
    (hand / "lower.md").write_text('---\nid: "Upper"\nlayer: knowledge\n---\nid Upper in lower.md\n')
    (hand / f"{CAFE_NFD}.md").write_text("---\nlayer: knowledge\n---\nnfd stem\n")
    lower, cafe = "knowledge/hand/lower.md", f"knowledge/hand/{CAFE_NFD}.md"
    with MdCG(root) as s:
        s.sync()
    _forge(root, [([], [["lower", lower]]), ([], [[CAFE_NFC, cafe]]), ([], [["m1", m1]])])
    with MdCG(root) as s:
        assert _plans(s) == [
            f"keeps lower ({lower}) (the file holds another memory, or cannot be read)",
            f"keeps {CAFE_NFC} ({cafe}) (the file holds another memory, or cannot be read)",
            f"removes m1 ({m1})",
        ]
        report = s.sync()
    assert report.foreign_deletes == tuple(sorted([("lower", lower), (CAFE_NFC, cafe)]))
    assert report.finished_deletes == (("m1", m1),)
    assert (hand / "lower.md").is_file() and (hand / f"{CAFE_NFD}.md").is_file()
    assert not (root / m1).exists()


def test_holds_other_is_the_roll_forwards_check(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="one memory", id="m1")
        rel = s.entry("m1").path
        id_of = s._engine.journal.id_of
    assert not journal.holds_other(str(root), "m1", rel, id_of)
    assert journal.holds_other(str(root), "M1", rel, id_of)
    assert not journal.holds_other(str(root), "M1", rel, None)  # no reader: no check
    assert not journal.holds_other(str(root), "m9", "knowledge/orphan/m9.md", id_of)  # nothing there


def _rename_and_die(root: str) -> None:
    s = MdCG(root)
    s._engine.journal.fault = lambda step: os.kill(os.getpid(), signal.SIGKILL) if step == "renamed" else None
    s.rename("r0", "r1")


def test_a_killed_rename_is_a_write_not_a_delete(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="the memory to rename", id="r0")
        old = s.entry("r0").path
    assert stress.wait(stress.fork(_rename_and_die, str(root))) == -signal.SIGKILL
    assert (root / old).is_file()
    with MdCG(root) as s:
        (plan,) = _plans(s)
        new = s.entry("r1").path
        assert plan == f"writes r1; removes the old files of r0 ({old})"
        report = s.sync()
        assert (report.finished_deletes, report.foreign_deletes) == ((), ())
        assert report.old_files_removed == (("r0", old),)
        assert report.to_dict()["old_files_removed"] == [{"id": "r0", "path": old}]
        assert sorted(s.ids()) == ["r1"]
    assert (
        sync_lines(report)[-1]
        == f"interrupted writes finished, old files of renamed memories removed (1): r0 at {old}"
    )
    assert not (root / old).exists() and (root / new).is_file()


def test_outcome_splits_deletes_from_the_old_files_of_a_write(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="one memory", id="a")
        s.add(body="two memory", id="b")
        ra, rb = s.entry("a").path, s.entry("b").path
    c = journal.Commit(shard=DEAD_SHARD, seq=1, puts=(), dels=(("a", ra),))
    out = journal.Outcome()
    assert journal.roll_forward(str(root), c, outcome=out)
    assert (out.removed, out.replaced) == ([("a", ra)], [])
    # A commit that puts: its del of another id is a rename's old file, done only once the
    # put is in place (session 38: the first commit removed a's file, so a's put here is not
    # -- b stays, or the renamed memory would be in no file)
    c = journal.Commit(shard=DEAD_SHARD, seq=2, puts=(("a", ra, ".a.md.1.tmp"),), dels=(("b", rb),))
    out = journal.Outcome()
    assert journal.roll_forward(str(root), c, outcome=out)
    assert (out.removed, out.replaced) == ([], [])
    assert (root / rb).exists()
    (root / ra).write_text('---\nid: "a"\n---\none memory\n')  # the put landed
    out = journal.Outcome()
    assert journal.roll_forward(str(root), c, outcome=out)
    assert (out.removed, out.replaced) == ([], [("b", rb)])


# -- 3. a write refused after its commit line ----------------------------------------------


def _unlink_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's ``knowledge/`` folder read-only: removing a file there fails (EROFS)."""
    real = fsops.Dir.unlink

    def unlink(self: fsops.Dir, name: str) -> bool:
        if name.endswith(".md") and not name.startswith("."):
            raise OSError(errno.EROFS, "Read-only file system", name)
        return real(self, name)

    monkeypatch.setattr(fsops.Dir, "unlink", unlink)
    aside = getattr(fsops.Dir, "set_aside", None)  # a move's old file is renamed aside first (s42)
    if aside is not None:

        def set_aside(self: fsops.Dir, name: str, tmp: str) -> None:
            if name.endswith(".md") and not name.startswith("."):
                raise OSError(errno.EROFS, "Read-only file system", name)
            aside(self, name, tmp)

        monkeypatch.setattr(fsops.Dir, "set_aside", set_aside)


def _cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "400"}).invoke(app, ["--root", str(root), *args])
    return result.exit_code, result.stderr


LOGGED_RO = f"the store's file system is read-only; {LOGGED_WRITE}"


def test_a_forget_refused_after_its_commit_line_says_it_was_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="x one", id="k1")
        rel = s.entry("k1").path
    _unlink_refused(monkeypatch)
    code, err = _cli(root, "forget", "k1", "--reason", "r")
    assert (code, err) == (2, f"error: k1.md: {LOGGED_RO}\n")
    assert "nothing was changed" not in err
    monkeypatch.undo()
    assert (root / rel).is_file()
    with MdCG(root) as s:
        report = s.sync()
        assert report.finished_deletes == (("k1", rel),)
    assert not (root / rel).exists()


def test_a_move_refused_after_its_put_landed_says_it_was_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="x two", id="k3")
        old = s.entry("k3").path
    _unlink_refused(monkeypatch)
    code, err = _cli(root, "update", "k3", "--layer", "self")
    assert (code, err) == (2, f"error: k3.md: {LOGGED_RO}\n")
    monkeypatch.undo()
    assert (root / old).is_file() and (root / "self" / "k3.md").is_file()  # the put landed
    with MdCG(root) as s:
        s.sync()
        assert s.entry("k3").path == "self/k3.md"
    assert not (root / old).exists()


def _logged(exc: OSError) -> OSError:
    exc.add_note(journal.LOGGED_NOTE)
    return exc


def test_the_messages_of_a_logged_write() -> None:
    ro = OSError(errno.EROFS, "Read-only file system", "k1.md")
    assert not was_logged(ro)
    assert "nothing was changed" in (os_error_message(ro, "forget") or "")
    assert was_logged(_logged(ro))
    assert os_error_message(ro, "forget") == f"k1.md: {LOGGED_RO}"
    denied = _logged(OSError(errno.EACCES, "Permission denied", "k1.md"))
    assert os_error_message(denied, "forget") == f"k1.md: Permission denied; {LOGGED_WRITE}"
    assert not_writable_message(ro, "/s") == (
        "Read-only file system (in the store at /s): k1.md; the write was logged before this error "
        "and may be partly done: the next sync (or write of these ids) finishes it once the store "
        "is writable, but not over a file saved or edited since (that memory is kept as it is then)"
    )
    assert not_writable_message(denied) == f"Permission denied: k1.md; {LOGGED_WRITE}"
    plain = not_writable_message(OSError(errno.EROFS, "Read-only file system", "k1.md"))
    assert plain is not None and "cannot write to it" in plain and "logged" not in plain
