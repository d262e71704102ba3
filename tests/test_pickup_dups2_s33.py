"""Session 33, second attack on the pick-up of hand edits (``sync_if_changed``).

1. A file edited (or swapped) to hold an id another file still holds: a sync settles the
   id at that other file first (the edited file's old id is told ``deleted``), and its
   next call reads the edited file as one no entry holds -- the id moves to the newer
   file and the other is a duplicate. The pick-up read it only when the watch named it,
   so the id never moved, no duplicate was told, and ``get`` served the other text for
   the handle's lifetime, while a fresh process's first pick-up served the edited one.
   Now a pick-up reads such a file again at its next call, as a sync does; every report
   and view below is a sync's, step by step (a sync re-lists every duplicate at each
   call: the pick-up tells a copy once).
2. After the index was reloaded from another process's snapshot, every hand ``rm`` made
   the pick-up stat-scan the whole store, at every call, for the handle's lifetime (1.0 to
   1.4 s a ``rm`` at 100k). The handle's record of copies is now carried over a reload:
   no scan at all.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import md_cg
from md_cg import MdCG, Node, index
from md_cg.errors import MalformedNodeFileError
from md_cg.reports import Moved, SyncReport

Told = tuple[Any, ...]
BAD = (
    "the YAML frontmatter does not parse: found unexpected end of stream (column 9), "
    "while scanning a quoted scalar from line 2, column 5"
)
NONE: Told = ((), (), (), (), (), ())


def _env() -> dict[str, str]:
    """A child process's environment: it imports the md_cg this test imported."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(md_cg.__file__).parents[1]), *sys.path])}


def _told(report: SyncReport | None) -> Told:
    if report is None:
        return NONE
    return (
        report.added,
        report.changed,
        report.deleted,
        tuple(sorted(report.moved, key=repr)),
        report.malformed,
        report.duplicates,
    )


def _rel(h: MdCG, node_id: str) -> str:
    return h.path_of(node_id, include_archived=True).relative_to(h.root).as_posix()


def _view(h: MdCG) -> dict[str, tuple[str, str]]:
    return {i: (_rel(h, i), _body(h, i)) for i in sorted(h.ids(include_archived=True))}


def _body(h: MdCG, node_id: str) -> str:
    """The memory's body, or the file named when another file of the id is broken (session
    42: an unscoped ``get`` picks no copy then, ``engine.broken_copy``)."""
    try:
        return h.get(node_id, include_archived=True).body
    except MalformedNodeFileError as exc:
        return f"refused: {exc.path}"


def _call(h: MdCG, mode: str) -> Callable[[], SyncReport | None]:
    return (lambda: h.sync_if_changed(min_interval=0)) if mode == "watch" else h.sync


def test_a_file_edited_to_hold_an_existing_id(tmp_path: Path) -> None:
    """/tmp/s33/a1/idexist.py: n1.md edited to hold ``id: "n0"``, three calls."""
    told: dict[str, list[Told]] = {}
    views: dict[str, dict[str, tuple[str, str]]] = {}
    for mode in ("watch", "sync"):
        root = tmp_path / mode
        with MdCG(root) as s:
            for i in range(3):
                s.add(Node(id=f"n{i}", layer="knowledge", body=f"body {i}\n"))
        with MdCG(root) as h:
            _call(h, mode)()
            p1 = h.path_of("n1")
            time.sleep(0.01)
            p1.write_text(re.sub(r"^id: .*$", 'id: "n0"', p1.read_text(), count=1, flags=re.M))
            told[mode] = [_told(_call(h, mode)()) for _ in range(3)]
            views[mode] = _view(h)
            assert [(f.kind, f.path) for f in h.health().findings] == [
                ("duplicate_id", "knowledge/orphan/n0.md")
            ]
        with MdCG(root, read_only=True) as fresh:
            assert _view(fresh) == views[mode]
    moved = ((), (), (), (Moved("n0", "knowledge/orphan/n0.md", "knowledge/orphan/n1.md"),), ())
    dup = (("n0", "knowledge/orphan/n0.md"),)
    deleted = ((), (), ("n1",), (), (), ())
    assert told["sync"] == [deleted, (*moved, dup), ((), (), (), (), (), dup)]
    assert told["watch"] == [deleted, (*moved, dup), NONE]  # a copy is told once
    assert (
        views["watch"]
        == views["sync"]
        == {
            "n0": ("knowledge/orphan/n1.md", "body 1\n"),
            "n2": ("knowledge/orphan/n2.md", "body 2\n"),
        }
    )


def test_a_swapped_copy_then_the_folder_moved(tmp_path: Path) -> None:
    """/tmp/s33/a1/swapdup.py: a recorded copy of ``a`` swapped with ``b``'s file, then the
    folder of ``a``'s indexed file moved: the pick-up moved ``a`` to the moved file and
    told no duplicate; a sync moves it to the newer file, b's old one."""
    told: dict[str, list[Told]] = {}
    views: dict[str, dict[str, tuple[str, str]]] = {}
    for mode in ("watch", "sync"):
        root = tmp_path / mode
        with MdCG(root) as s:
            s.add(Node(id="a", layer="knowledge", tags=["domain:x"], body="alpha\n"))
            s.add(Node(id="b", layer="knowledge", tags=["domain:y"], body="beta\n"))
        with MdCG(root) as h:
            call = _call(h, mode)
            call()
            pa, pb = h.path_of("a"), h.path_of("b")
            (root / "contextual").mkdir(exist_ok=True)
            shutil.copy(pa, root / "contextual/a.md")
            told[mode] = [_told(call())]
            ta, tb = (root / "contextual/a.md").read_text(), pb.read_text()
            (root / "contextual/a.md").write_text(tb)
            pb.write_text(ta)
            told[mode].append(_told(call()))
            os.rename(pa.parent, root / "knowledge/zz")
            told[mode].append(_told(call()))
            views[mode] = _view(h)
    fa, fb = "knowledge/cond_x_2d711642/a.md", "knowledge/cond_y_a1fce436/b.md"
    assert (
        told["watch"]
        == told["sync"]
        == [
            ((), (), (), (), (), (("a", "contextual/a.md"),)),
            ((), (), (), (Moved("b", fb, "contextual/a.md"),), (), ()),
            ((), (), (), (Moved("a", fa, fb),), (), (("a", "knowledge/zz/a.md"),)),  # fb: the newer
        ]
    )
    assert views["watch"] == views["sync"] == {"a": (fb, "alpha\n"), "b": ("contextual/a.md", "beta\n")}


# -- random comparisons (/tmp/s33/a1/fuzz3.py and fuzz3b.py, fixed seeds) -----------------

ALL_OPS = [
    "cp", "cp", "mv", "rm", "body", "id_new", "id_existing", "break", "swap", "rotate",
    "dirmv", "checkout", "touch", "fix", "cp_rm",
]  # fmt: skip
NO_ID_EXISTING = [k for k in ALL_OPS if k != "id_existing"]


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts)


def _edit(p: Path, old: str, new: str) -> None:
    p.write_text(re.sub(old, new, p.read_text(encoding="utf-8"), count=1, flags=re.M), encoding="utf-8")


def _op(rng: random.Random, root: Path, saved: dict[str, Any], kinds: list[str]) -> str:
    """One hand change drawn from ``rng`` (every draw made before any file is touched, so
    both trees get the same change)."""
    fs = _files(root)
    k = rng.choice(kinds) if fs else "checkout"
    a, b, c = (rng.choice(fs) if fs else "" for _ in range(3))
    folder = rng.choice(["knowledge/o1", "knowledge/o2", "contextual", "archive/knowledge/o3", "rejected"])
    n = rng.randint(0, 10**6)
    if k in ("cp", "cp_rm"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        dst = f"{folder}/{Path(a).name}"
        if dst != a and not (root / dst).exists():
            shutil.copy(root / a, root / dst)
            if k == "cp_rm":
                time.sleep(0.002)
                (root / a).unlink()
    elif k == "mv":
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / a).rename(root / f"{folder}/m{n}.md")
    elif k == "rm":
        (root / a).unlink()
    elif k == "body":
        with open(root / a, "a", encoding="utf-8") as f:
            f.write(f"\nedit {n}\n")
    elif k == "id_new":
        _edit(root / a, r"^id: .*$", f'id: "x{n}"')
    elif k == "id_existing":
        m = re.search(r"^id: (.*)$", (root / b).read_text(encoding="utf-8"), flags=re.M)
        if m:
            _edit(root / a, r"^id: .*$", "id: " + m.group(1).replace("\\", "\\\\"))
    elif k == "break":
        saved[a] = (root / a).read_text(encoding="utf-8")
        _edit(root / a, r"^id:", "id: [")
    elif k == "fix":
        cand = sorted(r for r in saved if r != "__orig__" and (root / r).exists())
        if cand:
            r = cand[n % len(cand)]
            (root / r).write_text(saved.pop(r), encoding="utf-8")
    elif k == "swap" and a != b:
        ta, tb = (root / a).read_text(), (root / b).read_text()
        (root / a).write_text(tb)
        (root / b).write_text(ta)
    elif k == "rotate" and len({a, b, c}) == 3:
        ta, tb, tc = (root / a).read_text(), (root / b).read_text(), (root / c).read_text()
        (root / a).write_text(tc)
        (root / b).write_text(ta)
        (root / c).write_text(tb)
    elif k == "dirmv":
        d = os.path.dirname(a)
        if d and not d.startswith("archive") and not (root / f"knowledge/dm{n}").exists():
            os.rename(root / d, root / f"knowledge/dm{n}")
    elif k == "checkout":  # the step-0 files back, some of them (as a checkout of a file set)
        for rel, text in sorted(saved["__orig__"].items()):
            if (sum(map(ord, rel)) + n) % 3 == 0:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text, encoding="utf-8")
    elif k == "touch":
        os.utime(root / a)
    return k


def _trial(base: Path, seed: int, steps: int, kinds: list[str]) -> list[Any]:
    """The differences between a pick-up and a sync over ``steps`` random hand changes:
    reports (a sync's new duplicates and malformed files are the pick-up's), views, and
    each handle's path map against its entries."""
    roots = {m: base / f"t{seed}" / m for m in ("watch", "sync")}
    for r in roots.values():
        with MdCG(r) as s:
            for i in range(8):
                tags = [f"domain:d{i % 3}"]
                s.add(Node(id=f"n{i}", layer="knowledge", tags=tags, body=f"body {i} word{i}\n"))
    hs = {m: MdCG(r) for m, r in roots.items()}
    try:
        hs["watch"].sync_if_changed()
        hs["sync"].sync()
        saved = {m: {"__orig__": {f: (r / f).read_text() for f in _files(r)}} for m, r in roots.items()}
        prev: dict[int, set[Any]] = {4: set(), 5: set()}
        ops = []
        for step in range(steps):
            for m, r in roots.items():
                k = _op(random.Random(seed * 1000 + step), r, saved[m], kinds)
            ops.append(k)
            assert _files(roots["watch"]) == _files(roots["sync"])
            tw, ts = _told(hs["watch"].sync_if_changed(min_interval=0)), _told(hs["sync"].sync())
            bad: list[Any] = []
            if tw[:4] != ts[:4]:
                bad.append(("report", tw[:4], ts[:4]))
            for k in (4, 5):  # malformed, duplicates: the pick-up tells the new ones
                if not set(tw[k]) <= set(ts[k]) or not set(ts[k]) - prev[k] <= set(tw[k]):
                    bad.append((k, tw[k], ts[k]))
                prev[k] = set(ts[k])
            vw, vs = _view(hs["watch"]), _view(hs["sync"])
            if vw != vs:
                diff = {i: (vw.get(i), vs.get(i)) for i in vw.keys() | vs.keys() if vw.get(i) != vs.get(i)}
                bad.append(("view", diff))
            for m, h in hs.items():
                placed = {p: i for i, p, _m, _s in h._engine.state.entries.placed()}
                if dict(h._engine.state.by_path()) != placed:
                    bad.append(("by_path", m))
            if bad:
                return [seed, step, ops, bad]
        return []
    finally:
        for h in hs.values():
            h.close()


@pytest.mark.parametrize(
    ("trials", "steps", "kinds"),
    [(40, 3, ALL_OPS), (25, 12, NO_ID_EXISTING)],
    ids=["40x3-all-ops", "25x12-swaps-rotations"],
)
def test_random_hand_changes_a_pickup_tells_and_sees_what_a_sync_does(
    tmp_path: Path, trials: int, steps: int, kinds: list[str]
) -> None:
    """fuzz3 (4 of these 40 runs diverged) and fuzz3b (7 of these 25)."""
    failing = [f for f in (_trial(tmp_path, 10000 + t, steps, kinds) for t in range(trials)) if f]
    assert failing == []


# -- a reload of the index does not make every pick-up scan the store ------------------

_COMPACTOR = """
import sys
from md_cg import MdCG, Node
with MdCG(sys.argv[1]) as s:
    for i in range(2):  # two snapshots: a handle that followed neither reloads the index
        s.add(Node(id=f"x{i}", layer="knowledge", body=f"other {i}\\n"))
        s.compact_index()
"""


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The roots of every ``index.scan_files`` call (a full stat scan of a store)."""
    calls: list[str] = []
    real = index.scan_files

    def counted(root: str, *a: Any, **k: Any) -> Any:
        calls.append(root)
        return real(root, *a, **k)

    monkeypatch.setattr(index, "scan_files", counted)
    return calls


def test_no_scan_for_an_rm_after_a_reload(tmp_path: Path, scans: list[str]) -> None:
    """/tmp/s33/a1/rescan.py: 0 full scans a ``rm`` before the reload, 1 at every ``rm``
    after it, for the handle's lifetime. Now 0, and a copy recorded before the reload is
    still the id's file when the file the index used goes."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add_many([Node(id=f"n{i}", layer="knowledge", body=f"note {i}\n") for i in range(20)])
    with MdCG(root) as h:
        assert h.sync_if_changed() is None
        first = _rel(h, "n0")
        (root / "knowledge/copies").mkdir()
        shutil.copy(root / first, root / "knowledge/copies/n0.md")
        assert _told(h.sync_if_changed(0)) == ((), (), (), (), (), (("n0", "knowledge/copies/n0.md"),))
        state = h._engine.state
        subprocess.run([sys.executable, "-c", _COMPACTOR, str(root)], env=_env(), check=True)
        h.refresh()
        assert h._engine.state is not state  # reloaded from the other process's snapshot
        scans.clear()
        told = []
        for i in range(1, 6):
            h.path_of(f"n{i}").unlink()
            told.append(_told(h.sync_if_changed(0)))
        (root / first).unlink()
        told.append(_told(h.sync_if_changed(0)))
        assert scans == []
        assert told == [((), (), (f"n{i}",), (), (), ()) for i in range(1, 6)] + [
            ((), (), (), (Moved("n0", first, "knowledge/copies/n0.md"),), (), ())
        ]
        assert h.get("n0").body == "note 0\n"


def test_a_copy_is_not_told_again_after_a_reload(
    tmp_path: Path, scans: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without inotify every call stat-scans; after a reload the scan read the copy and the
    malformed file as ones the record lacked and told them again though nothing changed."""
    monkeypatch.setattr("md_cg.watch._libc", lambda: None)
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="n1", layer="knowledge", body="hello one\n"))
    with MdCG(root) as h:
        assert h.sync_if_changed() is None
        (root / "knowledge/moved").mkdir()
        shutil.copy(h.path_of("n1"), root / "knowledge/moved/n1.md")
        (root / "knowledge/moved/bad.md").write_text('---\nid: "bad\n---\nbody\n')
        assert _told(h.sync_if_changed(0)) == (
            (),
            (),
            (),
            (),
            (("knowledge/moved/bad.md", BAD),),
            (("n1", "knowledge/moved/n1.md"),),
        )
        state = h._engine.state
        subprocess.run([sys.executable, "-c", _COMPACTOR, str(root)], env=_env(), check=True)
        h.refresh()
        assert h._engine.state is not state  # reloaded: the snapshot never saw the copy
        scans.clear()
        assert h.sync_if_changed(0) is None
        assert len(scans) == 1  # the scan every call makes without inotify
        synced = h.sync()
        assert (synced.duplicates, synced.malformed) == (
            (("n1", "knowledge/moved/n1.md"),),
            (("knowledge/moved/bad.md", BAD),),
        )
