"""The sweep and a person's editor (review rB, session 34).

1. ``mdcg sweep`` removed expired temporary memories whose files were saved as
   ``retention_tier: "long"`` while it ran (an editor's save: a new file renamed over
   the old one, the same size): 300 of 300 at 50k files. The re-check under the ids'
   locks passed (the file was still ``temp``), then the walk for copies and the
   tombstones took ~1 s, and the removal unlinked whatever file was at the path by then.
   Now each file is read again under the lock, and removed only while it has the stamp
   (inode, mtime, size) of the bytes read: one saved since is kept, its tombstone taken
   back by a ``restored`` record. A file put back with the old mtime and size (``cp -a``
   of a same-size copy) is told by its bytes, not trusted by its stat.
2. ``health()`` said "a sweep removes it" of an expired memory the sweep keeps because
   another file holds its id; it now says the sweep keeps it.

The races use real processes: a sweep process and an editor process, synchronised by
files at fixed points of the sweep (hooks installed in the sweep process), so each
test is exact: the removed ids, the kept ids and why, the files' bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

import md_cg
from md_cg import MdCG, Node, Scope
from md_cg.cli import app

#: the md_cg this test imported (the code under test), first on the subprocesses' path
CODE = str(Path(md_cg.__file__).resolve().parent.parent)

TEMP, LONG = b'retention_tier: "temp"', b'retention_tier: "long"'

#: The editor: finds its files first, waits for GO, then saves each one as an editor does
#: (a new file renamed over the old, the same size: "temp" -> "long"), PAUSE seconds apart;
#: writes the ids it saved to DONE.
EDITOR = r"""
import json, os, sys, time
from pathlib import Path
root, ids, go, done = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
pause = float(sys.argv[5])
where = {p.stem: p for p in root.rglob("*.md") if p.stem in set(ids)}
while not os.path.exists(go):
    time.sleep(0.001)
saved = []
for i in ids:
    p = where[i]
    data = p.read_bytes()
    new = data.replace(b'retention_tier: "temp"', b'retention_tier: "long"')
    assert len(new) == len(data) and new != data
    tmp = p.with_name("." + p.name + ".swp")
    tmp.write_bytes(new)
    os.replace(tmp, p)
    saved.append(i)
    time.sleep(pause)
Path(done + ".tmp").write_text(json.dumps(saved))
os.replace(done + ".tmp", done)
"""

#: The sweep process: ``MdCG(root).sweep(dry_run=False)``, with a hook that creates GO at
#: one point of the sweep and waits there (or, for "commit", at the removal) for DONE.
SWEEPER = r"""
import json, os, sys, time
from md_cg import MdCG, engine, forgetting, logs, retention
root, go, done, where = sys.argv[1:5]

def wait():
    while not os.path.exists(done):
        time.sleep(0.001)

def signal_then(fn, at_go, then_wait):
    def hooked(*a, **k):
        if at_go and not os.path.exists(go):
            open(go, "w").close()
            if then_wait:
                wait()
        return fn(*a, **k)
    return hooked

if where == "race":  # the editor starts once the store is open; the removal waits for it
    retention.expired_ids = signal_then(retention.expired_ids, True, False)
    commit = engine.Engine.commit
    def waiting_commit(self, *a, **k):
        wait()
        return commit(self, *a, **k)
    engine.Engine.commit = waiting_commit
elif where == "after-check":  # between the check under the locks and the tombstones
    forgetting.sole_copies = signal_then(forgetting.sole_copies, True, True)
elif where == "after-tombstones":  # between the tombstones and the removal
    append = logs.AppendLog.append
    def hooked_append(self, records, *a, **k):
        out = append(self, records, *a, **k)
        if records and records[0].get("event") == "sweep" and not os.path.exists(go):
            open(go, "w").close()
            wait()
        return out
    logs.AppendLog.append = hooked_append
with MdCG(root) as s:
    r = s.sweep(dry_run=False)
print(json.dumps({"expired": list(r.expired), "removed": list(r.removed), "kept": [list(k) for k in r.kept]}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([CODE, *sys.path])}


def _store(root: Path, expired: int) -> list[str]:
    """``expired`` expired temporary memories ``e000``...; and a few that are not: a future
    temp, a long one past an expiry, one without a tier."""
    past, ids = time.time() - 60, [f"e{i:03d}" for i in range(expired)]
    nodes = [
        Node(
            id=i,
            layer="knowledge",
            body=f"# Errand {i}\n\nPick up parcel {i} today.\n",
            retention_tier="temp",
            expires_at=past,
        )
        for i in ids
    ]
    nodes += [
        Node(
            id="future",
            layer="knowledge",
            body="# Later\n\nSoon.\n",
            retention_tier="temp",
            expires_at=time.time() + 86400,
        ),
        Node(
            id="kept_long",
            layer="knowledge",
            body="# Long\n\nStays.\n",
            retention_tier="long",
            expires_at=past,
        ),
        Node(id="plain", layer="knowledge", body="# Plain\n\nA fact.\n"),
    ]
    with MdCG(root) as s:
        s.add_many(nodes, stamp=False)
    return ids


def _race(
    tmp_path: Path, root: Path, edited: list[str], where: str, pause: float = 0.0
) -> tuple[dict, list[str]]:
    go, done = str(tmp_path / "go"), str(tmp_path / "done")
    editor = subprocess.Popen(
        [sys.executable, "-c", EDITOR, str(root), json.dumps(edited), go, done, str(pause)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sweeper = subprocess.run(
        [sys.executable, "-c", SWEEPER, str(root), go, done, where],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    _, err = editor.communicate(timeout=60)
    assert editor.returncode == 0, err
    assert sweeper.returncode == 0, sweeper.stderr
    return json.loads(sweeper.stdout), json.loads(Path(done).read_text())


def _why(node_id: str) -> str:
    return (
        f"expired at knowledge/orphan/{node_id}.md when the sweep read it, but the file changed before "
        "its removal (an edit meanwhile): kept; a later sweep removes it if it is still expired"
    )


def _renewed(node_id: str) -> str:
    """Session 35: an expired id the sweep leaves because its file no longer expires is in ``kept``."""
    return (
        f"expired at knowledge/orphan/{node_id}.md, but its file as read no longer expires (edited since "
        "the last sync: a longer tier or a later expiry): kept"
    )


def _check_after(root: Path, ids: list[str], edited: set[str], report: dict) -> None:
    """Exact sets: no edited memory removed, every other expired one removed; the edited
    files hold the edit; the index, the health and a second sweep agree."""
    assert report["removed"] == sorted(set(ids) - edited)
    orphan = root / "knowledge" / "orphan"
    for i in ids:
        f = orphan / f"{i}.md"
        if i in edited:
            data = f.read_bytes()
            assert LONG in data and TEMP not in data, i
        else:
            assert not f.exists(), i
    assert sorted(p.stem for p in orphan.glob("*.md")) == sorted(edited | {"future", "kept_long", "plain"})
    with MdCG(root) as s:
        assert {i: s.entry(i).retention_tier for i in edited} == dict.fromkeys(edited, "long")
        assert sorted(i for i in s.ids() if i.startswith("e")) == sorted(edited)
        # (one bucket of 150 memories is a bucket_degraded finding: not about the sweep)
        kinds = [(f.kind, f.node_id) for f in s.health().findings if f.kind != "bucket_degraded"]
        assert kinds == [], kinds  # no forgotten_returned, expired, missing or changed file
        again = s.sweep(dry_run=False)
        assert (again.expired, again.removed, again.kept) == ((), (), ())


def test_saves_while_the_sweep_runs_are_never_removed_and_the_rest_is(tmp_path: Path) -> None:
    """The reviewer's race scaled down: 300 expired memories; the editor saves 150 of them
    as long while the sweep lists, checks, walks and writes its tombstones (it starts once
    the store is open; the removal waits for its last save). Before: every save that
    landed after the check was removed (rB: 300 of 300)."""
    root = tmp_path / "m"
    ids = _store(root, 300)
    edited = ids[::2]
    report, saved = _race(tmp_path, root, edited, "race", pause=0.002)
    assert saved == edited
    assert report["expired"] == sorted(set(report["expired"]))
    assert set(report["expired"]) - set(ids) == set()
    # listed before its save: kept and said why -- saved after the sweep read it (changed),
    # or before (no longer expires: in neither list before session 35); saved before the
    # listing: not expired
    assert {i for i, _ in report["kept"]} <= set(edited)
    assert all(why in (_why(i), _renewed(i)) for i, why in report["kept"])
    kept = {i for i, _ in report["kept"]}
    assert kept.isdisjoint(report["removed"]) and kept | set(report["removed"]) == set(report["expired"])
    _check_after(root, ids, set(edited), report)


def test_a_save_between_the_check_and_the_tombstones_is_kept(tmp_path: Path) -> None:
    """Every save lands after the check under the locks (the editor runs while the sweep
    walks for copies): each is kept with its reason, and no tombstone names it."""
    root = tmp_path / "m"
    ids = _store(root, 60)
    edited = ids[1::3]
    report, saved = _race(tmp_path, root, edited, "after-check")
    assert saved == edited
    assert report["expired"] == ids
    assert report["kept"] == [[i, _why(i)] for i in edited]
    with MdCG(root) as s:
        assert sorted(t["id"] for t in s.tombstones()) == sorted(set(ids) - set(edited))
    _check_after(root, ids, set(edited), report)


def test_a_save_between_the_tombstones_and_the_removal_is_kept_and_its_tombstone_taken_back(
    tmp_path: Path,
) -> None:
    """Every save lands after the tombstones were written, before the files go: the
    removal compares each file's stamp with the one read and spares the saved ones; a
    ``restored`` record takes each tombstone back (health names no forgotten memory)."""
    root = tmp_path / "m"
    ids = _store(root, 60)
    edited = ids[::4]
    report, saved = _race(tmp_path, root, edited, "after-tombstones")
    assert saved == edited
    assert report["expired"] == ids
    assert report["kept"] == [[i, _why(i)] for i in edited]
    with MdCG(root) as s:
        records = [(t["event"], t["id"], t.get("reason")) for t in s.tombstones()]
    assert records == [("sweep", i, "expired") for i in ids] + [
        ("restored", i, "changed while the sweep removed it: kept") for i in edited
    ]
    _check_after(root, ids, set(edited), report)


def test_a_same_size_file_put_back_with_the_old_mtime_is_read_not_trusted(tmp_path: Path) -> None:
    """A handle opened before the change (the index: temp), then another process puts a
    long version of the same size back with the old mtime (``cp -a`` of a copy): the
    check reads the file, so the memory is kept and the index takes the file in. Before:
    the stat matched the entry's and the long memory was removed."""
    root = tmp_path / "m"
    ids = _store(root, 3)
    f = root / "knowledge" / "orphan" / "e001.md"
    with MdCG(root) as s:
        assert s.sweep(dry_run=True).expired == tuple(ids)
        code = (
            "import os, sys\n"
            "p = sys.argv[1]; st = os.stat(p)\n"
            "data = open(p, 'rb').read().replace(b'\"temp\"', b'\"long\"')\n"
            "open(p + '.new', 'wb').write(data)\n"
            "os.utime(p + '.new', ns=(st.st_atime_ns, st.st_mtime_ns))\n"
            "os.replace(p + '.new', p)\n"
        )
        before = os.stat(f)
        subprocess.run([sys.executable, "-c", code, str(f)], check=True, env=_env())
        after = os.stat(f)
        assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
        report = s.sweep(dry_run=False)
        assert (report.expired, report.removed, report.kept) == (
            tuple(ids),
            ("e000", "e002"),
            (("e001", _renewed("e001")),),
        )
        assert s.entry("e001").retention_tier == "long"
    assert LONG in f.read_bytes()
    with MdCG(root) as s:
        assert [(f.kind, f.node_id) for f in s.health().findings] == []
        assert s.sweep(dry_run=False).expired == ()


def _copied(root: Path) -> None:
    """``x`` expired with a copy of its file in self/ (synced), ``y`` expired alone."""
    past = time.time() - 60
    with MdCG(root) as s:
        s.add_many(
            [
                Node(
                    id=i,
                    layer="knowledge",
                    body=f"# Errand {i}\n\nPick up the parcel.\n",
                    retention_tier="temp",
                    expires_at=past,
                )
                for i in ("x", "y")
            ],
            stamp=False,
        )
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "x.md").write_bytes((root / "knowledge" / "orphan" / "x.md").read_bytes())
    with MdCG(root) as s:
        assert s.sync().duplicates == (("x", "self/x.md"),)


KEPT_DETAIL = (
    "hidden from reads since its expiry (temporary); kept by the sweep: remove the copy of its id you do "
    "not want, then sync (other files holding it: {where})"
)
SWEPT_DETAIL = "hidden from reads since its expiry (temporary); a sweep removes it (`mdcg sweep`, sweep())"


def test_health_says_the_sweep_keeps_an_expired_memory_another_file_holds(tmp_path: Path) -> None:
    """The ``expired`` findings that say "a sweep removes it" are exactly what the sweep
    removes; the one it keeps (a cp of its file) says so, before and after the sweep."""
    root = tmp_path / "m"
    _copied(root)
    with MdCG(root) as s:
        expired = [(f.node_id, f.detail) for f in s.health().findings if f.kind == "expired"]
        assert expired == [("x", KEPT_DETAIL.format(where="self/x.md")), ("y", SWEPT_DETAIL)]
        report = s.sweep(dry_run=False)
        said_removed = tuple(i for i, d in expired if d == SWEPT_DETAIL)
        assert report.removed == said_removed == ("y",)
        assert [i for i, _ in report.kept] == ["x"]
    with MdCG(root) as s:
        findings = [(f.kind, f.node_id, f.detail) for f in s.health().findings if f.kind == "expired"]
        assert findings == [("expired", "x", KEPT_DETAIL.format(where="self/x.md"))]
    assert len(KEPT_DETAIL.split(" (other files")[0]) <= 160  # MCP clips a detail there: the advice stays


def test_health_of_two_copies_and_the_cli(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _copied(root)
    (root / "contextual").mkdir(exist_ok=True)
    (root / "contextual" / "x.md").write_bytes((root / "self" / "x.md").read_bytes())
    with MdCG(root) as s:
        s.sync()
    res = CliRunner().invoke(app, ["health", "--root", str(root), "--json"])
    found = [
        (f["node_id"], f["detail"]) for f in json.loads(res.stdout)["findings"] if f["kind"] == "expired"
    ]
    two = KEPT_DETAIL.format(where="contextual/x.md, self/x.md")
    assert found == [("x", two), ("y", SWEPT_DETAIL)]


def test_health_of_a_scoped_handle_counts_a_copy_it_may_not_see(tmp_path: Path) -> None:
    """As ``SweepReport.kept``: a copy of another scope keeps the memory, counted, not named."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many(
            [
                Node(
                    id="x",
                    layer="knowledge",
                    body="pick up parcel",
                    retention_tier="temp",
                    expires_at=time.time() - 60,
                    agent_scope="a",
                )
            ],
            stamp=False,
        )
    copy = "---\nid: x\nlayer: self\nretention_tier: long\nagent_scope: b\n---\nKEEP THIS: b's copy of x\n"
    (root / "self").mkdir(exist_ok=True)
    (root / "self" / "x.md").write_text(copy, encoding="utf-8")
    with MdCG(root, scope=Scope(agent="a")) as s:
        expired = [(f.node_id, f.detail) for f in s.health().findings if f.kind == "expired"]
        assert expired == [("x", KEPT_DETAIL.format(where="1 file(s) outside this handle's scope"))]
        report = s.sweep(dry_run=False)
        assert (report.expired, report.removed, [i for i, _ in report.kept]) == (("x",), (), ["x"])
    assert (root / "self" / "x.md").read_text(encoding="utf-8") == copy
