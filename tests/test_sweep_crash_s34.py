"""The sweep killed midway, and files changed or removed while it runs (attack a3, session 34).

1. A file the sweep spared (saved since its read) was removed by the next recovery when
   the sweep died after its unlinks, before its ``done`` line (SIGKILL, or Ctrl-C): the
   commit line did not carry the stamps, and the recovery spared only a file whose
   ctime was more than 2 s past the line (150 of 150 lost at 50k). Now the line records
   each stamp (inode, mtime, size, ctime) and the recovery removes such a file only
   while it still has it; the file kept gets a ``restored`` record (no
   ``forgotten_returned`` that says "forget it again").
2. A save within 2 s of the line, the sweep killed before its unlinks: removed. Now kept.
3. ``cp -a`` over the file after the check (same inode, mtime and size): removed. The
   stamp now holds the ctime.
4. A kill after the commit's ``done`` line, before the ``restored`` record: the saved
   memory kept its sweep tombstone, and ``health()`` said ``forgotten_returned``. The
   record is now written before the ``done`` line (a kill before it: the recovery).
5. A file a person removed (or replaced by a folder, a FIFO) after the check was
   reported kept, "the file changed", with a ``restored`` record; removed between the
   listing and the check, it was in neither list. Now: removed (its tombstone stands),
   or kept with why, respectively.

Real processes: the sweep runs in a subprocess that runs an editor process at one point
and is SIGKILLed (or interrupted) at another.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import md_cg
from md_cg import MdCG, Node

CODE = str(Path(md_cg.__file__).resolve().parent.parent)
TEMP, LONG = b'retention_tier: "temp"', b'retention_tier: "long"'

#: The editor process: applies ACTS (id -> action) to the files.
EDITOR = r"""
import json, os, sys
from pathlib import Path
root, acts = Path(sys.argv[1]), json.loads(sys.argv[2])
T, L = b'retention_tier: "temp"', b'retention_tier: "long"'
for i, act in acts.items():
    p = root / "knowledge" / "orphan" / (i + ".md")
    if act == "save":  # an editor's save: a new file renamed over the old one
        tmp = p.with_name("." + p.name + ".swp")
        tmp.write_bytes(p.read_bytes().replace(T, L))
        os.replace(tmp, p)
    elif act == "inplace":
        d = p.read_bytes()
        with open(p, "r+b") as f:
            f.write(d.replace(T, L))
    elif act == "cpa":  # a same-size long copy with the file's own times, cp -a over it
        st = p.stat()
        c = root.parent / (i + ".bak")
        c.write_bytes(p.read_bytes().replace(T, L))
        os.utime(c, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.system(f"cp -a '{c}' '{p}'") == 0
        assert (os.stat(p).st_ino, os.stat(p).st_mtime_ns, os.stat(p).st_size) == (
            st.st_ino, st.st_mtime_ns, st.st_size)
    elif act == "rm":
        p.unlink()
    elif act == "dir":
        p.unlink(); p.mkdir()
    elif act == "fifo":
        p.unlink(); os.mkfifo(p)
"""

#: The sweep process: sweep(dry_run=False); at EDIT it runs the editor (and waits for it);
#: at KILL it SIGKILLs itself ("int@POINT": raises KeyboardInterrupt there).
SWEEPER = r"""
import json, os, signal, subprocess, sys
from md_cg import MdCG, forgetting, journal, logs, retention
root, edit, acts, kill, editor = sys.argv[1:6]

def at(point):
    if point == edit:
        subprocess.run([sys.executable, "-c", editor, root, acts], check=True)
    if kill == "int@" + point:
        raise KeyboardInterrupt
    if point == kill:
        os.kill(os.getpid(), signal.SIGKILL)

listing = retention.expired_ids
def listed(*a, **k):
    out = listing(*a, **k); at("after-listing"); return out
retention.expired_ids = listed
sole = forgetting.sole_copies
def checked(*a, **k):
    at("after-check"); return sole(*a, **k)
forgetting.sole_copies = checked
append = logs.AppendLog.append
def appended(self, records, *a, **k):
    if records and records[0].get("event") == "restored":
        at("before-restored")
    return append(self, records, *a, **k)
logs.AppendLog.append = appended
step = journal.Journal._step
def stepped(self, name):
    at("step:" + name); return step(self, name)
journal.Journal._step = stepped
try:
    with MdCG(root) as s:
        r = s.sweep(dry_run=False)
except KeyboardInterrupt:
    sys.exit(130)
print(json.dumps({"expired": list(r.expired), "removed": list(r.removed), "kept": [list(k) for k in r.kept]}))
"""

IDS = [f"e{i:03d}" for i in range(12)]


def _store(root: Path) -> None:
    """12 expired temporary memories e000..e011 (created_at set: stamped) and one long."""
    past = time.time() - 60
    nodes = [
        Node(
            id=i,
            layer="knowledge",
            body=f"# Errand {i}\n\nPick up parcel {i}.\n",
            retention_tier="temp",
            expires_at=past,
        )
        for i in IDS
    ]
    nodes.append(Node(id="plain", layer="knowledge", body="# Plain\n\nA fact.\n"))
    with pytest.warns(RuntimeWarning), MdCG(root) as s:
        s.add_many(nodes)


def _sweep(root: Path, edit: str, acts: dict[str, str], kill: str = "none") -> tuple[int, dict | None]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([CODE, *sys.path])}
    p = subprocess.run(
        [sys.executable, "-c", SWEEPER, str(root), edit, json.dumps(acts), kill, EDITOR],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else None)


def _file(root: Path, node_id: str) -> Path:
    return root / "knowledge" / "orphan" / f"{node_id}.md"


def _events(root: Path, node_id: str) -> list[str]:
    with MdCG(root) as s:
        return [r["event"] for r in s.log("audit").read() if r.get("id") == node_id]


def _findings(root: Path) -> list[tuple[str, str | None]]:
    with MdCG(root) as s:
        return sorted((f.kind, f.node_id) for f in s.health().findings if f.kind != "bucket_degraded")


def _why(node_id: str) -> str:
    return (
        f"expired at knowledge/orphan/{node_id}.md when the sweep read it, but the file changed before "
        "its removal (an edit meanwhile): kept; a later sweep removes it if it is still expired"
    )


def _assert_kept_long(root: Path, kept: set[str]) -> None:
    """The ``kept`` files hold the edit; every other expired memory is gone; nothing says
    a kept one is forgotten; a second sweep removes nothing."""
    for i in IDS:
        if i in kept:
            assert LONG in _file(root, i).read_bytes(), i
        else:
            assert not _file(root, i).exists(), i
    assert _findings(root) == []  # no forgotten_returned ("forget it again"), no expired
    with MdCG(root) as s:
        assert {i: s.departure(i) for i in kept} == dict.fromkeys(kept)
        assert sorted(i for i in s.ids() if i.startswith("e")) == sorted(kept)
        again = s.sweep(dry_run=False)
    assert (again.expired, again.removed, again.kept) == ((), (), ())


@pytest.mark.parametrize("kill", ["step:deleted", "int@step:deleted"])
def test_a_kill_after_the_unlinks_keeps_the_files_saved_since_the_read(tmp_path: Path, kill: str) -> None:
    """F1: saved between the commit line and the unlinks (spared by the sweep), then the
    sweep killed (or interrupted) before its done line: the recovery keeps them too."""
    root = tmp_path / "s"
    _store(root)
    rc, _ = _sweep(root, "step:renamed", {"e001": "save", "e002": "inplace"}, kill)
    assert rc == (-signal.SIGKILL if kill == "step:deleted" else 130)
    assert {i for i in IDS if _file(root, i).exists()} == {"e001", "e002"}
    with MdCG(root) as s:
        r = s.sync()  # at once: well within the 2 s the old rule allowed
    assert r.left_as_edited == ("e001", "e002")
    assert r.finished_deletes == ()
    assert _events(root, "e001") == ["sweep", "restored"]
    assert _events(root, "e002") == ["sweep", "restored"]
    _assert_kept_long(root, {"e001", "e002"})


def test_a_save_just_after_the_commit_line_is_kept_by_the_recovery(tmp_path: Path) -> None:
    """F1/F2: the sweep killed right after its commit line, a save 0.1 s later (within the
    old rule's 2 s of slack), then a sync: the saved file is kept, the rest removed."""
    root = tmp_path / "s"
    _store(root)
    rc, _ = _sweep(root, "none", {}, "step:logged")
    assert rc == -signal.SIGKILL
    time.sleep(0.1)
    subprocess.run([sys.executable, "-c", EDITOR, str(root), json.dumps({"e004": "save"})], check=True)
    with MdCG(root) as s:
        r = s.sync()
    assert r.left_as_edited == ("e004",)
    assert sorted(r.finished_deletes) == [(i, f"knowledge/orphan/{i}.md") for i in IDS if i != "e004"]
    assert _events(root, "e004") == ["sweep", "restored"]
    _assert_kept_long(root, {"e004"})


def test_cp_a_over_the_file_after_the_check_is_kept(tmp_path: Path) -> None:
    """F3: same inode, mtime and size, other bytes (``cp -a`` after the check): its ctime
    moved, so the sweep keeps it and the index takes in the bytes."""
    root = tmp_path / "s"
    _store(root)
    rc, report = _sweep(root, "after-check", {"e003": "cpa"})
    assert rc == 0 and report is not None
    assert report["removed"] == sorted(set(IDS) - {"e003"})
    assert report["kept"] == [["e003", _why("e003")]]
    assert _events(root, "e003") == []  # kept before its tombstone
    _assert_kept_long(root, {"e003"})


def test_a_kill_before_the_restored_record_leaves_no_forgotten_memory(tmp_path: Path) -> None:
    """F4: spared files, then a kill before their restored record: the commit is still open
    (the record comes before its done line), and the recovery keeps them and writes it."""
    root = tmp_path / "s"
    _store(root)
    rc, _ = _sweep(root, "step:renamed", {"e001": "save", "e002": "inplace"}, "before-restored")
    assert rc == -signal.SIGKILL
    assert _events(root, "e001") == ["sweep"]
    with MdCG(root) as s:
        r = s.sync()
    assert r.left_as_edited == ("e001", "e002")
    assert _events(root, "e001") == ["sweep", "restored"]
    assert _events(root, "e002") == ["sweep", "restored"]
    _assert_kept_long(root, {"e001", "e002"})


def test_files_removed_by_hand_after_the_check_are_reported_removed(tmp_path: Path) -> None:
    """F5: removed by hand, or replaced by a folder or a FIFO, after the check: no memory is
    kept, so none is reported kept and no restored record is written; the tombstone stands."""
    root = tmp_path / "s"
    _store(root)
    rc, report = _sweep(root, "step:renamed", {"e006": "rm", "e009": "dir", "e011": "fifo"})
    assert rc == 0 and report is not None
    assert (report["removed"], report["kept"]) == (IDS, [])
    for i in ("e006", "e009", "e011"):
        assert _events(root, i) == ["sweep"], i
    assert _file(root, "e009").is_dir() and _file(root, "e011").is_fifo()
    with MdCG(root) as s:
        assert {i: s.departure(i).event for i in ("e006", "e009", "e011")} == dict.fromkeys(
            ("e006", "e009", "e011"), "sweep"
        )


def test_a_file_removed_by_hand_before_the_check_is_named(tmp_path: Path) -> None:
    """F5: removed between the listing and the check: in ``kept`` with why (it was in
    neither list), no tombstone; the rest removed."""
    root = tmp_path / "s"
    _store(root)
    rc, report = _sweep(root, "after-listing", {"e006": "rm"})
    assert rc == 0 and report is not None
    assert report["expired"] == IDS
    assert report["removed"] == [i for i in IDS if i != "e006"]
    assert report["kept"] == [
        [
            "e006",
            "expired at knowledge/orphan/e006.md when listed, but its file was removed, moved or replaced "
            "meanwhile (by hand, another process) before the sweep read it again: the sweep removed "
            "nothing here (no tombstone)",
        ]
    ]
    assert _events(root, "e006") == []
