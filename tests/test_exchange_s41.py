"""Session 41: the hand-edit guard (session 39) checks each file a read-modify-write read
just before the rename; an editor's save (a temp file written, renamed over the memory's
path) landing between that check and md-cg's rename was replaced by it, and lost (session
40: 57 of 6,012 lines). md-cg now puts a guarded file in place by exchanging it with the
file at the path (``renameat2(RENAME_EXCHANGE)``) and checks the file it displaced is the
one it checked; if not -- a save landed -- it exchanges back and the write is refused as
the guard refuses it (retried over the save, or ``ChangedOnDiskError``).

The deterministic tests run md-cg in a child process whose guard check
(``journal._changed_since``) is followed by another process -- the person -- saving the
file the way an editor does: the save lands after the check, before the rename. The kill
tests stop the child at the step between the exchange and its check (``exchanged-1``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hand_race_s39 import RUN_OP, race, refused
from test_handrace_s40 import OPEN

import md_cg.fsops as fsops
from md_cg import Edge, MdCG, Node

# an editor's save of the file at argv[2]: read whole, HAND<argv[3]> appended, written to a
# temp file, renamed over it
SAVE = (
    "import os, sys; p = sys.argv[2]; data = open(p).read(); "
    "open(p + '.swp', 'w').write(data + 'HAND%s\\n' % sys.argv[3]); os.rename(p + '.swp', p)"
)

# A child's end (tests/test_move_s42.py's too): killed at the journal step ``kill``, else
# ``op`` run and its outcome printed with the count of saves made.
END = (
    textwrap.dedent(
        """
    def fault(step):
        if step == kill:
            os.kill(os.getpid(), signal.SIGKILL)
    """
    )
    + RUN_OP
    + 'print(json.dumps({**out, "saves": saves[0]}))\n'
)

# The child (argv[3]: "target mode k kill"): with mode ``check``, after the guard has
# checked the files of each of the first ``k`` commits, the person saves ``target``'s file
# (SAVE); with mode ``exchange``, just before md-cg's ``k``-th exchange (the step after the
# last look at the file), once. ``kill``: the child is killed at that journal step ("-":
# none). Then ``op`` runs.
CHILD = (
    OPEN
    + f"SAVE = {SAVE!r}\n"
    + textwrap.dedent(
        """
    import os, signal
    import md_cg.fsops as F
    import md_cg.journal as J
    target, mode, k, kill = arg.split()
    k, tpath = int(k), str(s.path_of(target))
    saves, calls = [0], [0]
    def save():
        subprocess.run([sys.executable, "-c", SAVE, root, tpath, str(saves[0])], check=True)
        saves[0] += 1
    checked = J._changed_since
    def after_check(*a):
        out = checked(*a)
        if saves[0] < k:
            save()
        return out
    def before_exchange(self, a, b, exchange=getattr(F.Dir, "exchange", None)):
        calls[0] += 1
        if calls[0] == k:
            save()
        return exchange(self, a, b)
    if mode == "check":
        J._changed_since = after_check
    else:
        F.Dir.exchange = before_exchange
    """
    )
    + END
)


def _store(root: Path) -> str:
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base", importance=0.5))
        return s.path_of("x").relative_to(root).as_posix()


def _child(
    root: Path, op: str, *, target: str = "x", mode: str = "check", k: int = 1, kill: str = "-"
) -> dict[str, object]:
    return spawn(CHILD, root, op, f"{target} {mode} {k} {kill}", kill != "-")


def spawn(child: str, root: Path, op: str, arg: str, kill: bool = False) -> dict[str, object]:
    """Run ``child`` (the store ``root``, ``op``, ``arg``): its outcome, or {"killed": True}
    when it is to die by SIGKILL (tests/test_move_s42.py's children too)."""
    done = subprocess.run(
        [sys.executable, "-c", child, str(root), op, arg], capture_output=True, text=True, timeout=120
    )
    if kill:
        assert done.returncode == -signal.SIGKILL, done.stderr
        return {"killed": True}
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _x(root: Path) -> tuple[str, float, int]:
    """x's body and importance, and how many commits a sync then recovers."""
    with MdCG(root) as s:
        recovered = s.sync().recovered
        node = s.get("x")
        return node.body, node.importance, recovered


def _files(root: Path) -> list[str]:
    """Every file in the layer folders (temp files too)."""
    rels = [p.relative_to(root) for p in root.rglob("*") if p.is_file()]
    return sorted(r.as_posix() for r in rels if len(r.parts) > 1 and r.parts[0] != ".mdcg")


@pytest.fixture(params=["disk", "tmpfs"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A store folder on the test's tmp_path (this machine's /tmp: ext4) and on /dev/shm
    (tmpfs): both do ``RENAME_EXCHANGE``."""
    if request.param == "disk":
        yield tmp_path
        return
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    root = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


#: where the save lands: after the guard's check (before session 41: lost), or just before
#: the exchange, after md-cg's last look at the file (found by the exchange's own check)
MODES = ["check", "exchange"]


@pytest.mark.parametrize("mode", MODES)
def test_an_editors_save_before_the_rename_is_kept_and_the_update_applied_to_it(
    store: Path, mode: str
) -> None:
    tmp_path = store
    rel = _store(tmp_path)
    assert _child(tmp_path, "s.update('x', importance=0.3)", mode=mode) == {"ok": True, "saves": 1}
    assert _files(tmp_path) == [rel]
    assert _x(tmp_path) == ("base\nHAND0", 0.3, 0)


def test_two_saves_after_two_checks_are_both_kept(tmp_path: Path) -> None:
    _store(tmp_path)
    assert _child(tmp_path, "s.update('x', tags=['blue'])", k=2) == {"ok": True, "saves": 2}
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.body, node.tags) == ("base\nHAND0\nHAND1", ["blue"])


@pytest.mark.parametrize("mode", MODES)
def test_a_body_given_whole_is_refused_and_the_save_kept(tmp_path: Path, mode: str) -> None:
    rel = _store(tmp_path)
    out = _child(tmp_path, "s.update('x', body='new text', importance=0.9)", mode=mode)
    assert out == {**refused(rel), "saves": 1}
    assert _files(tmp_path) == [rel]
    assert _x(tmp_path) == ("base\nHAND0", 0.5, 0)


def test_a_save_on_a_linking_file_during_a_rename_undoes_every_exchange(tmp_path: Path) -> None:
    """A rename of x rewrites the linking a's and b's files, each by an exchange: the save
    lands on b's just before the second, after a's was made; a's is undone too (a's file
    as it was, the rename's temp files removed), and the rename runs again over the save."""
    with MdCG(tmp_path) as s:
        s.add(Node(id="x", layer="knowledge", body="base"))
        for i in "ab":
            s.add(Node(id=i, layer="knowledge", body=f"links {i}", edges=[Edge(target="x", type="similar")]))
    assert _child(tmp_path, "s.rename('x', 'y')", target="b", mode="exchange", k=2) == {
        "ok": True,
        "saves": 1,
    }
    with MdCG(tmp_path) as s:
        a, b, y = s.get("a"), s.get("b"), s.get("y")
        assert (a.body, b.body, y.body) == ("links a", "links b\nHAND0", "base")
        assert [e.target for n in (a, b) for e in n.edges] == ["y", "y"]
        want = sorted(s.path_of(i).relative_to(tmp_path).as_posix() for i in "aby")
        assert s.sync().recovered == 0
    assert _files(tmp_path) == want


def test_killed_between_the_exchange_and_its_check_recovery_keeps_the_save(store: Path) -> None:
    """The save landed just before the exchange, which displaced it to the temp name, and
    the writer was killed before looking: the next process's recovery puts the save back
    at the path (the update is not applied: it was never acknowledged)."""
    tmp_path = store
    rel = _store(tmp_path)
    out = _child(tmp_path, "s.update('x', importance=0.3)", mode="exchange", kill="exchanged-1")
    assert out == {"killed": True}
    assert len(_files(tmp_path)) == 2  # the update's file at the path, the save at the temp name
    with MdCG(tmp_path) as s:
        report = s.sync()
        node = s.get("x")
        assert (report.recovered, node.body, node.importance) == (1, "base\nHAND0", 0.5)
    assert _files(tmp_path) == [rel]


def test_killed_between_the_exchange_and_its_check_without_a_save_is_rolled_forward(store: Path) -> None:
    tmp_path = store
    rel = _store(tmp_path)
    assert _child(tmp_path, "s.update('x', importance=0.3)", k=0, kill="exchanged-1") == {"killed": True}
    assert len(_files(tmp_path)) == 2  # the update's file at the path, the old one at the temp name
    with MdCG(tmp_path) as s:
        report = s.sync()
        node = s.get("x")
        assert (report.recovered, node.body, node.importance) == (1, "base", 0.3)
    assert _files(tmp_path) == [rel]


def test_without_renameat2_the_write_falls_back_to_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not Linux, an old glibc, a file system refusing the flag (EINVAL): the write is done
    by a plain rename, as before."""
    rel = _store(tmp_path)
    steps: list[str] = []
    monkeypatch.setattr(fsops, "_renameat2", lambda: None)
    with MdCG(tmp_path) as s:
        s._engine.journal.fault = steps.append
        s.update("x", importance=0.3)
        assert s.get("x").importance == 0.3
    assert [x for x in steps if x.startswith("exch")] == []
    assert _files(tmp_path) == [rel]


def test_renameat2_errors_saying_unsupported_are_a_fallback(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("A")
    (tmp_path / "b").write_text("B")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert fsops.rename2(fd, "a", "b", 1 << 20) is False  # an unknown flag: EINVAL
        assert fsops.rename2(fd, "a", "b", fsops.RENAME_EXCHANGE) is True
        assert ((tmp_path / "a").read_text(), (tmp_path / "b").read_text()) == ("B", "A")
        with pytest.raises(FileExistsError):
            fsops.rename2(fd, "a", "b", fsops.RENAME_NOREPLACE)
        with pytest.raises(FileNotFoundError):
            fsops.rename2(fd, "a", "c", fsops.RENAME_EXCHANGE)
    finally:
        os.close(fd)


# A real race: an editor process saves x (read, HAND<k> appended, temp file, rename) every
# millisecond or so while this process updates x in a loop. Before session 41 about 1 % of
# the saves were lost (session 40: 57 of 6,012; the save replaced between the guard's check
# and the rename). With the exchange a save is never replaced, but an editor that reads the
# file while md-cg's file is briefly at the path (from the exchange to its undoing: longer
# on a loaded machine) builds its next save on md-cg's file: a few lines in ten thousand
# (docs/reliability.md, Known limits). The bound is 1 %; the deterministic tests above are
# the ones that fail on the code before.
EDITOR = textwrap.dedent(
    """
    import os, sys, time
    path, n = sys.argv[1], int(sys.argv[2])
    print("go", flush=True)
    for k in range(n):
        with open(path) as f:
            data = f.read()
        with open(path + ".swp", "w") as f:
            f.write(data + "HAND%d\\n" % k)
        os.rename(path + ".swp", path)
        time.sleep(0.001)
    """
)


@pytest.mark.slow
def test_real_race_of_editor_saves_loses_at_most_a_bounded_few(tmp_path: Path) -> None:
    lost, updates, refused = race(tmp_path, EDITOR, 1500, 240)
    assert len(lost) <= 1500 // 100, (lost, updates, refused)
