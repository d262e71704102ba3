"""Commit lines carry each put's size and CRC-32; recovery renames only whole temp files.

A power cut can leave a logged commit whose temp files were never written
back (non-durable writes), or -- since a durable commit fsyncs its temp files
and its line at the same time -- a durable line whose files did not make it.
A power cut cannot be staged in a test; what it leaves behind can: a writer
SIGKILLed after logging its commit (a real process), then one of its temp
files truncated, emptied or removed by the test.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import time
import zlib
from pathlib import Path

import orjson
import pytest
from stresslib import stress

from md_cg import MdCG, Node, fsops, journal, render
from md_cg.migrate import migrate
from md_cg.render import sync_lines
from md_cg.sample import generate

N = 60


def _ids() -> list[str]:
    return [f"b{i:03d}" for i in range(N)]


def _child(root: str, step: str, mode: str) -> None:
    layer = "self" if mode == "move" else "knowledge"
    tags = [] if mode == "move" else ["domain:old"]
    nodes = [Node(id=i, layer=layer, tags=tags, body=f"new {i}") for i in _ids()]
    s = MdCG(root, auto_compact=None)
    stress.crash_at(s, step)
    s.add_many(nodes, overwrite=mode != "new")


def _killed_batch(root: Path, step: str, mode: str) -> list[Path]:
    """Old nodes (unless ``mode`` is new), then a batch killed at ``step``; its temp files."""
    if mode != "new":
        with MdCG(root, auto_compact=None) as s:
            s.add_many([Node(id=i, layer="knowledge", tags=["domain:old"], body=f"old {i}") for i in _ids()])
    assert stress.wait(stress.fork(_child, str(root), step, mode)) == -signal.SIGKILL
    return sorted(root.rglob(".b*.md.*.tmp"))


def _bodies(root: Path) -> dict[str, str | None]:
    disk = stress.read_disk(root)
    assert (disk.doubled, disk.unreadable, disk.temps) == ([], [], [])
    return {i: disk.body(i) for i in _ids()}


def _log_records(root: Path, op: str) -> list[dict]:
    out = []
    for shard in sorted((root / ".mdcg" / "log").glob("*.jsonl")):
        for line in shard.read_bytes().splitlines():
            rec = orjson.loads(line)
            if rec.get("op") == op:
                out.append(rec)
    return out


def _tamper(temp: Path, how: str) -> None:
    if how == "truncated":
        temp.write_bytes(temp.read_bytes()[:40])
    elif how == "empty":
        temp.write_bytes(b"")
    elif how == "same size, other bytes":
        data = temp.read_bytes()
        temp.write_bytes(data[:-2] + b"X\n")
    else:
        temp.unlink()


@pytest.mark.parametrize("how", ["truncated", "empty", "same size, other bytes", "removed"])
@pytest.mark.parametrize("mode", ["new", "overwrite", "move"])
def test_a_torn_temp_file_rolls_the_whole_commit_back(tmp_path: Path, mode: str, how: str) -> None:
    root = tmp_path / "m"
    temps = _killed_batch(root, "logged", mode)
    assert len(temps) == N
    _tamper(temps[17], how)
    with MdCG(root, auto_compact=None) as s:
        report = s.sync()
        assert (report.recovered, report.undone) == (1, 1)
        assert (
            "interrupted writes undone (a file torn by a power cut, or in a copy of the store a file"
            " not as the write logged it): 1" in render.sync_lines(report)
        )
        assert not [line for line in render.sync_lines(report) if "finished" in line]
        assert s.health().by_kind("open_commit") == []
        expected = {i: (None if mode == "new" else f"old {i}") for i in _ids()}
        assert _bodies(root) == expected  # nothing landed, nothing lost, no temp file left
        assert sorted(s.ids()) == ([] if mode == "new" else _ids())
    undone = _log_records(root, "recovered")
    assert len(undone) == 1 and undone[0]["undone"] is True


@pytest.mark.parametrize("mode", ["new", "overwrite", "move"])
def test_whole_temp_files_roll_the_commit_forward(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "m"
    assert len(_killed_batch(root, "logged", mode)) == N
    with MdCG(root, auto_compact=None) as s:
        report = s.sync()
        assert (report.recovered, report.undone) == (1, 0)
        assert "interrupted writes finished: 1" in render.sync_lines(report)
    assert _bodies(root) == {i: f"new {i}" for i in _ids()}
    recovered = _log_records(root, "recovered")
    assert len(recovered) == 1 and "undone" not in recovered[0]


def test_once_a_put_has_landed_the_whole_ones_are_finished(tmp_path: Path) -> None:
    """Killed after 20 renames: the renames had begun, so every whole temp file
    lands; the torn one is removed and its node keeps its old bytes."""
    root = tmp_path / "m"
    temps = _killed_batch(root, "rename-20", "overwrite")
    assert len(temps) == N - 20
    torn = temps[5]
    torn_id = torn.name[1:].split(".")[0]
    _tamper(torn, "truncated")
    with MdCG(root, auto_compact=None) as s:
        assert s.sync().recovered == 1
    expected = {i: f"new {i}" for i in _ids()}
    expected[torn_id] = f"old {torn_id}"
    assert _bodies(root) == expected


def test_the_commit_line_records_size_and_crc_of_every_put(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add_many([Node(id="a", layer="self", body="alpha"), Node(id="b", layer="self", body="beta")])
    (commit,) = _log_records(root, "commit")
    files = [root / rel for _, rel, _ in commit["put"]]
    assert commit["check"] == [[len(f.read_bytes()), zlib.crc32(f.read_bytes())] for f in files]
    parsed = journal.parse_commit("x.jsonl", commit)
    assert parsed is not None and parsed.checks == tuple(tuple(c) for c in commit["check"])


@pytest.mark.parametrize(
    "check",
    [None, "x", [[1, 2]], [[1, 2], [3]], [[1, 2], [-1, 2]], [[1, 2], [1, 1 << 32]], [[1, 2], [True, 2]]],
)
def test_a_missing_or_malformed_check_is_ignored(check: object) -> None:
    rec: dict = {"op": "commit", "seq": 1, "put": [["a", "self/a.md", ".a.md.1.t.tmp"]] * 2, "del": []}
    if check is not None:
        rec["check"] = check
    parsed = journal.parse_commit("x.jsonl", rec)
    assert parsed is not None and parsed.checks is None and len(parsed.puts) == 2


def test_a_line_of_an_earlier_version_rolls_forward_whatever_its_temp_files_hold(tmp_path: Path) -> None:
    root = tmp_path / "m"
    temps = _killed_batch(root, "logged", "overwrite")
    stripped = 0
    for shard in (root / ".mdcg" / "log").glob("*.jsonl"):  # the parent's and the killed child's
        out = []
        for line in shard.read_bytes().splitlines():
            rec = orjson.loads(line)
            stripped += rec.pop("check", None) is not None
            out.append(orjson.dumps(rec))
        shard.write_bytes(b"\n".join(out) + b"\n")
    assert stripped == 2
    _tamper(temps[3], "same size, other bytes")
    with MdCG(root, auto_compact=None) as s:
        assert s.sync().recovered == 1
    bodies = _bodies(root)
    assert sorted(i for i, b in bodies.items() if b == f"new {i}") == sorted(
        set(_ids()) - {temps[3].name[1:].split(".")[0]}
    )


def _failing_fsync(monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    real = os.fsync

    def fsync(fd: int) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(".tmp") and name.endswith(when):
            raise OSError(errno.EIO, "Input/output error", name)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="maps fds to paths through /proc")
def test_a_failed_fsync_undoes_the_commit_before_any_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add_many([Node(id=i, layer="self", body=f"old {i}") for i in _ids()])
        _failing_fsync(monkeypatch, ".tmp")
        with pytest.raises(OSError) as err:
            s.add_many(
                [Node(id=i, layer="self", body=f"new {i}") for i in _ids()], overwrite=True, durable=True
            )
        assert err.value.errno == errno.EIO
        monkeypatch.undo()
        assert _bodies(root) == {i: f"old {i}" for i in _ids()}  # and no temp file left
        assert [n.body for n in map(s.get, _ids()[:2])] == ["old b000", "old b001"]
        assert s.health().by_kind("open_commit") == []
        s.update("b001", body="after", durable=True)  # the store goes on
    undone = [r for r in _log_records(root, "done") if r.get("undone")]
    assert len(undone) == 1
    with MdCG(root, auto_compact=None) as s:
        assert s.get("b001").body == "after" and s.get("b002").body == "old b002"


def test_an_interrupt_during_the_fsyncs_undoes_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="a", layer="self", body="old"))

        def interrupted(calls: object, **kw: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(fsops, "fsync_all", interrupted)
        with pytest.raises(KeyboardInterrupt):
            s.update("a", body="new", durable=True)
        monkeypatch.undo()
        assert s.get("a").body == "old"
        assert list(root.rglob("*.tmp")) == []
        assert s.health().by_kind("open_commit") == []


def _migrate_and_die_at_the_third_batch(src: str, dest: str) -> None:
    seen = []
    real = journal.Journal._step

    def step(self: journal.Journal, name: str) -> None:
        if name == "logged":
            seen.append(name)
            if len(seen) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        real(self, name)

    journal.Journal._step = step  # type: ignore[method-assign]
    migrate(src, dest, batch=40, durable=True)


def test_a_migration_resumed_after_a_torn_batch_migrates_its_rows_again(tmp_path: Path) -> None:
    src, dest = tmp_path / "slice.sqlite", tmp_path / "store"
    generate(src, slice_=True)
    code = stress.wait(stress.fork(_migrate_and_die_at_the_third_batch, str(src), str(dest)))
    assert code == -signal.SIGKILL
    temps = sorted(p for p in dest.rglob(".*.md.*.tmp"))
    assert len(temps) == 40  # the third batch: logged, not renamed
    _tamper(temps[0], "truncated")
    report = migrate(src, dest, batch=40, durable=True)
    assert (report.resumed_from, report.recovered, report.undone) == (80, 1, 1)
    assert report.ok and report.mismatches == [] and report.verified == report.migrated
    text = report.render()
    assert "  undid 1 logged batch(es) of the interrupted run with a torn file" in text
    assert "batch(es) the interrupted run had logged" not in text
    assert list(dest.rglob(".*.tmp")) == []


def test_a_commit_closed_in_a_shard_read_before_its_own_stays_closed() -> None:
    """Process A recovers dead process B's commit; A's shard sorts before B's, so a later
    reader meets A's ``recovered`` line before B's commit line. The commit is closed."""
    commit = {"op": "commit", "seq": 3, "put": [], "del": [["x", "self/x.md"]], "check": []}
    tail = journal.Tail(
        by_shard={
            "100_a.jsonl": [{"op": "recovered", "shard": "200_b.jsonl", "c": 3}],
            "200_b.jsonl": [commit, {"op": "commit", "seq": 4, "put": [], "del": [["y", "self/y.md"]]}],
        },
        offsets={"100_a.jsonl": 60, "200_b.jsonl": 200},
        missing=[],
        bad_lines=0,
        unsafe=set(),
    )
    cursor = journal.Cursor()
    touched = journal.replay(cursor, tail)
    assert list(cursor.pending) == [("200_b.jsonl", 4)]  # only the commit nobody closed
    assert set(touched) == {"x", "y"}


def _forget_and_die_after_logging(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "logged")
    s.forget("x", "privacy")


def test_a_recovered_forget_is_not_done_again_over_a_later_write(tmp_path: Path) -> None:
    """The forget of a killed process, recovered by a process whose log shard sorts first, then an
    acknowledged add of the same id: a later handle does not run the forget again."""
    root = str(tmp_path / "m")
    with MdCG(root) as s:
        s.add_many([Node(id="x", layer="self", body="old x"), Node(id="y", layer="self", body="y")])
    assert stress.wait(stress.fork(_forget_and_die_after_logging, root)) == -signal.SIGKILL
    with MdCG(root) as s:
        assert s.sync().recovered == 1 and "x" not in s
        s.add(Node(id="x", layer="self", body="a new memory x"))
        ours = s._engine.journal.writer.name
    shards = sorted(os.listdir(Path(root, ".mdcg", "log")))
    if shards[0] != ours:  # pids of different lengths: the shard names sort the other way
        pytest.skip(f"this process's shard does not sort first: {shards}")
    with MdCG(root) as s:
        assert [f.kind for f in s.health().findings] == []
        s.sync()
        s.compact_index()
        assert s.get("x").body == "a new memory x"
    assert Path(root, "self", "x.md").read_text().endswith("a new memory x\n")


def _plant_line(root: Path, shard: str, record: dict) -> None:
    (root / ".mdcg" / "log" / shard).write_bytes(orjson.dumps(record) + b"\n")


def test_a_stray_line_of_a_dead_writer_deletes_or_replaces_no_newer_file(tmp_path: Path) -> None:
    """Lines of a dead pid (a .mdcg/ copied from another machine, a forged line) are rolled
    forward only over files not changed since the line was written."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="keep1", layer="self", body="keep me"))
        s.add(Node(id="n3", layer="contextual", body="n3 original"))
    before = {p: p.read_bytes() for p in [root / "self" / "keep1.md", root / "contextual" / "n3.md"]}
    _plant_line(root, "99999_" + "0" * 32 + ".jsonl", {"ts": 1, "seq": 1, "op": "commit", "put": [],
                "del": [["keep1", "self/keep1.md"]], "check": []})  # fmt: skip
    tmp = ".n3.md.99998.abc.tmp"
    _plant_line(root, "99998_" + "0" * 32 + ".jsonl", {"ts": 1, "seq": 1, "op": "commit",
                "put": [["n3", "contextual/n3.md", tmp]], "del": []})  # fmt: skip
    (root / "contextual" / tmp).write_text('---\nid: "n3"\nlayer: "contextual"\n---\nforged\n')
    with MdCG(root) as s:
        assert s.sync().recovered == 2
        assert s.get("keep1").body.strip() == "keep me" and s.get("n3").body.strip() == "n3 original"
    assert {p: p.read_bytes() for p in before} == before
    assert not (root / "contextual" / tmp).exists()


def test_a_symlinked_temp_file_is_never_renamed_into_place(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="n3", layer="contextual", body="n3 original"))
    outside = tmp_path / "outside.md"
    outside.write_text('---\nid: "n3"\nlayer: "contextual"\n---\noutside\n')
    tmp = ".n3.md.99998.abc.tmp"
    os.symlink(outside, root / "contextual" / tmp)
    _plant_line(root, "99998_" + "0" * 32 + ".jsonl", {"ts": time.time() + 60, "seq": 1, "op": "commit",
                "put": [["n3", "contextual/n3.md", tmp]], "del": []})  # fmt: skip
    with MdCG(root) as s:
        s.sync()
        assert s.get("n3").body.strip() == "n3 original"
    assert not (root / "contextual" / "n3.md").is_symlink()
    assert outside.read_text().endswith("outside\n")


def _forget_k_and_die_after_logging(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "logged")
    s.forget("keep1", "privacy")


def _move_a1_and_die_after_logging(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "logged")
    s.update("a1", layer="contextual")


def _edited_later(path: Path, text: str) -> None:
    """A hand edit after the commit line was written (its inode changed past the line's
    time and the slack)."""
    path.write_text(text)


def test_a_dead_commit_replaces_or_deletes_no_file_edited_after_its_line(tmp_path: Path) -> None:
    """Real lines (the writer's integer-nanosecond stamp): a forget killed after logging, then
    the file edited by hand; a move killed after logging, then the old file edited: recovery
    leaves both ids as the files have them (a move is skipped whole: no second copy)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="keep1", layer="self", body="keep me"))
        s.add(Node(id="a1", layer="self", body="a1 v1"))
    assert stress.wait(stress.fork(_forget_k_and_die_after_logging, str(root))) == -signal.SIGKILL
    assert stress.wait(stress.fork(_move_a1_and_die_after_logging, str(root))) == -signal.SIGKILL
    time.sleep(journal._CLOCK_SLACK + 0.2)
    keep = root / "self" / "keep1.md"
    _edited_later(keep, keep.read_text().replace("keep me", "kept by hand"))
    a1 = root / "self" / "a1.md"
    _edited_later(a1, a1.read_text().replace("a1 v1", "a1 edited by hand"))
    with MdCG(root) as s:
        report = s.sync()
        assert report.recovered == 2 and report.duplicates == ()
        assert report.left_as_edited == ("a1", "keep1")  # told, not just counted as recovered
        assert "interrupted writes left as edited since (not finished) (2): a1, keep1" in sync_lines(report)
        assert s.get("keep1").body.strip() == "kept by hand"
        assert (s.get("a1").body.strip(), s.entry("a1").path) == ("a1 edited by hand", "self/a1.md")
    assert not list(root.rglob("*.tmp")) and not (root / "contextual" / "a1.md").exists()


def _add_many_and_die_after_logging(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "logged")
    s.add_many([Node(id=i, layer="self", body=f"{i} v2") for i in ("a", "c", "new")], overwrite=True)


def test_files_with_times_in_the_future_do_not_stop_a_recovery(tmp_path: Path) -> None:
    """Files copied with their times from a clock ahead of this one (cp -p, tar, rsync -t)
    were there before the line: the dead commits roll forward whole."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=i, layer="self", body=f"{i} v1") for i in ("a", "b", "c")])
    ahead = time.time() + 600
    for name in ("a", "b"):
        os.utime(root / "self" / f"{name}.md", (ahead, ahead))
    assert stress.wait(stress.fork(_add_many_and_die_after_logging, str(root))) == -signal.SIGKILL
    assert stress.wait(stress.fork(_forget_b_and_die_after_logging, str(root))) == -signal.SIGKILL
    with MdCG(root) as s:
        report = s.sync()
        assert (report.recovered, report.left_as_edited) == (2, ())
        assert {i: s.get(i).body.strip() for i in s.ids()} == {"a": "a v2", "c": "c v2", "new": "new v2"}
        assert [f.kind for f in s.health().findings] == []
    assert not (root / "self" / "b.md").exists()


def _forget_b_and_die_after_logging(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "logged")
    s.forget("b", "privacy")


def _slow_move_and_die(root: str) -> None:
    s = MdCG(root)

    def step(name: str) -> None:
        if name == "logged":
            time.sleep(journal._CLOCK_SLACK + 0.5)  # renames that start late (a large batch)
        elif name == "rename-1":
            os.kill(os.getpid(), signal.SIGKILL)

    s._engine.journal.fault = step
    s.add_many([Node(id=i, layer="contextual", body=f"{i} moved") for i in ("m1", "m2")], overwrite=True)


def test_a_put_that_landed_late_in_a_killed_batch_still_completes_its_move(tmp_path: Path) -> None:
    """The renames of a large batch can run past the slack: a landed put's file is this
    commit's own, and its move finishes (no copy left at the old path)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=i, layer="self", body=f"{i} here") for i in ("m1", "m2")])
    assert stress.wait(stress.fork(_slow_move_and_die, str(root))) == -signal.SIGKILL
    with MdCG(root) as s:
        report = s.sync()
        assert report.recovered == 1 and report.duplicates == ()
        assert {i: (s.entry(i).path, s.get(i).body.strip()) for i in ("m1", "m2")} == {
            "m1": ("contextual/m1.md", "m1 moved"),
            "m2": ("contextual/m2.md", "m2 moved"),
        }
    assert sorted(p.name for p in (root / "self").glob("*.md")) == []


def _move_m1_and_die_when_renamed(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "renamed")
    s.add(Node(id="m1", layer="contextual", body="m1 moved"), overwrite=True)


def test_a_file_touched_after_the_crash_is_kept_even_by_metadata_alone(tmp_path: Path) -> None:
    """The guard cannot tell a chmod or a hard-link backup from a restore with old times
    (cp -p): both change only the inode. It keeps the file; the move's new copy is the
    indexed one and health lists the old as a duplicate -- nothing is lost."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="m1", layer="self", body="m1 old"))
    assert stress.wait(stress.fork(_move_m1_and_die_when_renamed, str(root))) == -signal.SIGKILL
    time.sleep(journal._CLOCK_SLACK + 0.2)
    old = root / "self" / "m1.md"
    os.chmod(old, 0o600)
    os.link(old, tmp_path / "backup.md")
    with MdCG(root) as s:
        assert s.sync().duplicates == (("m1", "self/m1.md"),)
        assert (s.entry("m1").path, s.get("m1").body.strip()) == ("contextual/m1.md", "m1 moved")
    assert old.read_text().endswith("m1 old\n")


def _update_m1_and_die_after_logging(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "logged")
    s.update("m1", body="v2 api")


def test_a_hand_restore_with_old_times_after_the_crash_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="m1", layer="self", body="v1"))
    backup = tmp_path / "backup.md"
    backup.write_text((root / "self" / "m1.md").read_text().replace("v1", "hand restored v0"))
    hour_ago = time.time() - 3600
    os.utime(backup, (hour_ago, hour_ago))
    assert stress.wait(stress.fork(_update_m1_and_die_after_logging, str(root))) == -signal.SIGKILL
    time.sleep(journal._CLOCK_SLACK + 0.2)
    shutil.copy2(backup, root / "self" / "m1.md")  # cp -p
    with MdCG(root) as s:
        s.sync()
        assert s.get("m1").body.strip() == "hand restored v0"


def test_a_line_stamped_by_a_clock_ahead_deletes_no_file_edited_after_its_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line whose stamp runs an hour ahead (a .mdcg/ copied from a machine with a fast
    clock) was trusted: the file edited by hand after the line arrived was deleted. The stamp
    is now bounded by its shard's change time."""
    monkeypatch.setattr(journal, "_CLOCK_SLACK", 0.2)  # the edit comes 0.3 s after the line
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a1", layer="self", body="a1 v1"))
    _plant_line(root, "99999_" + "0" * 32 + ".jsonl", {"ts": time.time_ns() + 3600 * 10**9, "seq": 1,
                "op": "commit", "put": [], "del": [["a1", "self/a1.md"]], "check": []})  # fmt: skip
    time.sleep(0.3)
    a1 = root / "self" / "a1.md"
    _edited_later(a1, a1.read_text().replace("a1 v1", "a1 edited by hand"))
    with MdCG(root) as s:
        report = s.sync()
        assert (report.recovered, report.left_as_edited) == (1, ("a1",))
        assert s.get("a1").body.strip() == "a1 edited by hand"
    assert a1.read_text().endswith("a1 edited by hand\n")


def test_a_line_stamped_ahead_still_deletes_a_file_unchanged_since(tmp_path: Path) -> None:
    """The bound keeps a line's own work: the same line over a file not edited since rolls
    forward (the file goes)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a1", layer="self", body="a1 v1"))
    _plant_line(root, "99999_" + "0" * 32 + ".jsonl", {"ts": time.time_ns() + 3600 * 10**9, "seq": 1,
                "op": "commit", "put": [], "del": [["a1", "self/a1.md"]], "check": []})  # fmt: skip
    with MdCG(root) as s:
        report = s.sync()
        assert (report.recovered, report.left_as_edited) == (1, ())
        assert s.ids() == []
    assert not (root / "self" / "a1.md").exists()


def test_a_crashed_commit_rolls_forward_after_the_clock_stepped_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review round 2 (session 25): the bound also took "now"; with the clock stepped back
    60 s after a crash (NTP after a reboot), the crashed update's own file looked edited
    after its line, the update was dropped and its temp file removed."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="m1", layer="self", body="v1"))

    def crash() -> None:
        s = MdCG(root)
        s._engine.journal.fault = lambda step: (
            os.kill(os.getpid(), signal.SIGKILL) if step == "logged" else None
        )
        s.update("m1", body="v2")

    assert stress.wait(stress.fork(crash)) == -signal.SIGKILL
    real = time.time_ns
    monkeypatch.setattr(journal.time, "time_ns", lambda: real() - 60 * 10**9)
    with MdCG(root) as s:
        report = s.sync()
        assert (report.recovered, report.left_as_edited) == (1, ())
        assert s.get("m1").body == "v2"
