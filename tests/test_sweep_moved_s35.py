"""The sweep and expired memories a person moved or removed by hand (review rH, session 35).

Before: an expired temporary memory whose file a person moved to another bucket (no sync
since) was, on a dry run and in ``health()``, "kept: other files hold this id too ...
remove the copy you do not want" -- the only file there was, beside a ``missing_file`` of
the same path --, and the real sweep listed it in ``expired`` and in neither ``removed``
nor ``kept`` (one removed by hand too; at 20k files, with a person moving files while the
sweep ran, 48-65 of 200 ids per run). A second sweep then listed nothing while the moved
file sat on disk, and the next sync told it as ``added``, not ``moved``.

Now every expired id is in exactly one of ``removed`` and ``kept``, with what the sweep
found (its file moved -- where the walk found it -- or gone, changed, no longer expiring),
a dry run says exactly what the sweep does, and ``health()`` says the same. The race
uses real processes: a sweep process and a person process moving files, synchronised by
files at fixed points of the sweep, so each case is exact.
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
from md_cg import MdCG, Node
from md_cg.cli import app

CODE = str(Path(md_cg.__file__).resolve().parent.parent)
MOVED_TO = "knowledge/handmoved"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([CODE, *sys.path])}


def _temp(node_id: str, layer: str = "knowledge", past: float | None = None) -> Node:
    return Node(
        id=node_id,
        layer=layer,
        body=f"# Errand {node_id}\n\nPick up parcel {node_id} today.\n",
        retention_tier="temp",
        expires_at=time.time() - 60 if past is None else past,
    )


def _moved(node_id: str, was: str, now: str) -> str:
    return (
        f"expired at {was}, but its file was moved or removed by hand since the last sync "
        f"(this id is now in {now}): kept; run `mdcg sync`, then sweep again"
    )


def _gone(node_id: str, was: str) -> str:
    return (
        f"expired at {was}, but its file is gone (moved or removed by hand since the last sync): "
        "not removed; run `mdcg sync`"
    )


def _renewed(was: str) -> str:
    return (
        f"expired at {was}, but its file as read no longer expires (edited since the last sync: "
        "a longer tier or a later expiry): kept"
    )


def _moved_meanwhile(was: str) -> str:
    return (
        f"expired at {was} when the sweep read it, but its file was moved or removed by hand before "
        "its removal: kept; run `mdcg sync`, then sweep again"
    )


def _hand_store(root: Path) -> dict[str, bytes]:
    """Expired temps: ``mv`` (self/, moved by hand to knowledge/orphan/), ``rm`` (removed
    by hand), ``edit`` (saved as long by hand), ``cp`` (a copy in contextual/, synced),
    ``a`` and ``b`` untouched; a future temp and a plain memory. Returns the moved file's bytes."""
    with MdCG(root) as s:
        s.add_many(
            [
                _temp("mv", "self"),
                _temp("rm", "structural"),
                _temp("edit"),
                _temp("cp"),
                _temp("a"),
                _temp("b", "self"),
                Node(
                    id="future",
                    layer="knowledge",
                    body="soon",
                    retention_tier="temp",
                    expires_at=time.time() + 9e3,
                ),
                Node(id="plain", layer="knowledge", body="A fact."),
            ],
            stamp=False,
        )
    (root / "contextual").mkdir(exist_ok=True)
    (root / "contextual" / "cp.md").write_bytes((root / "knowledge/orphan/cp.md").read_bytes())
    with MdCG(root) as s:
        assert s.sync().duplicates == (("cp", "contextual/cp.md"),)
    moved = (root / "self/mv.md").read_bytes()
    os.rename(root / "self/mv.md", root / "knowledge/orphan/mv.md")
    os.unlink(root / "structural/rm.md")
    f = root / "knowledge/orphan/edit.md"
    f.write_bytes(f.read_bytes().replace(b'retention_tier: "temp"', b'retention_tier: "long"'))
    return {"mv": moved, "edit": f.read_bytes()}


COPY_WHY = (
    "expired at knowledge/orphan/cp.md, but other files hold this id too (contextual/cp.md); the sweep "
    "removes only a memory's sole file: remove the copy you do not want, then sync"
)
KEPT = (
    ("cp", COPY_WHY),
    ("edit", _renewed("knowledge/orphan/edit.md")),
    ("mv", _moved("mv", "self/mv.md", "knowledge/orphan/mv.md")),
    ("rm", _gone("rm", "structural/rm.md")),
)


def test_each_expired_id_is_removed_or_kept_with_what_the_sweep_found(tmp_path: Path) -> None:
    """Exact sets and reasons: the hand-moved, the hand-removed, the hand-edited and the
    copied memories are kept and say why; the untouched ones are removed; the dry run
    says exactly that. Before: ``mv`` and ``rm`` were in neither list (and the dry run
    said ``mv``'s only file was another copy), ``edit`` in neither list."""
    root = tmp_path / "m"
    held = _hand_store(root)
    with MdCG(root) as s:
        dry = s.sweep(dry_run=True)
        assert (dry.expired, dry.removed, dry.kept) == (("a", "b", "cp", "edit", "mv", "rm"), (), KEPT)
    with MdCG(root) as s:
        report = s.sweep(dry_run=False)
        assert (report.expired, report.removed, report.kept) == (dry.expired, ("a", "b"), dry.kept)
        assert sorted(t["id"] for t in s.tombstones()) == ["a", "b"]
        # the index took in the edited file (long now), and is left as it was for a file
        # gone: a second sweep says the same of the others (before: expired (0))
        again = s.sweep(dry_run=False)
        assert (again.expired, again.removed, again.kept) == (("cp", "mv", "rm"), (), KEPT[:1] + KEPT[2:])
    assert (root / "knowledge/orphan/mv.md").read_bytes() == held["mv"]
    assert (root / "knowledge/orphan/edit.md").read_bytes() == held["edit"]
    with MdCG(root) as s:
        synced = s.sync()
        assert [(m.node_id, m.old_path, m.new_path) for m in synced.moved] == [
            ("mv", "self/mv.md", "knowledge/orphan/mv.md")
        ]
        assert synced.deleted == ("rm",)
        after = s.sweep(dry_run=False)  # as the advice says: sync, then sweep again
        assert (after.expired, after.removed, after.kept) == (("cp", "mv"), ("mv",), (("cp", COPY_WHY),))


def test_health_names_the_moved_file_as_moved_not_as_a_copy(tmp_path: Path) -> None:
    """The ``expired`` findings say what the sweep does, as its report does. Before: the
    hand-moved memory's finding said "other files holding it" beside a ``missing_file``
    of the same path, and the removed and edited ones "a sweep removes it"."""
    root = tmp_path / "m"
    _hand_store(root)
    hidden = "hidden from reads since its expiry (temporary); "
    with MdCG(root) as s:
        found = [(f.node_id, f.kind, f.detail) for f in s.health().findings if f.node_id in (*KEPT_IDS, "a")]
    assert [(i, d) for i, k, d in found if k == "expired"] == [
        ("a", hidden + "a sweep removes it (`mdcg sweep`, sweep())"),
        (
            "cp",
            hidden + "kept by the sweep: remove the copy of its id you do not want, then sync "
            "(other files holding it: contextual/cp.md)",
        ),
        ("edit", hidden + "kept by the sweep: its file no longer expires (edited by hand); run `mdcg sync`"),
        (
            "mv",
            hidden + "kept by the sweep: its file was moved or removed by hand; run `mdcg sync`, then sweep "
            "again (this id is now in: knowledge/orphan/mv.md)",
        ),
        (
            "rm",
            hidden
            + "its file is gone (moved or removed by hand): the sweep removes nothing; run `mdcg sync`",
        ),
    ]
    assert ("mv", "missing_file") in {(i, k) for i, k, _ in found}
    assert ("rm", "missing_file") in {(i, k) for i, k, _ in found}


KEPT_IDS = ("cp", "edit", "mv", "rm")


def test_the_cli_prints_every_kept_id(tmp_path: Path) -> None:
    """The text output names each id the sweep leaves (before: only ``removed (2)``)."""
    root = tmp_path / "m"
    _hand_store(root)
    dry = CliRunner().invoke(app, ["sweep", "--dry-run", "--root", str(root), "--json"])
    assert json.loads(dry.stdout)["kept"] == [{"id": i, "reason": why} for i, why in KEPT]
    res = CliRunner().invoke(app, ["sweep", "--root", str(root)])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == ["removed (2): a, b"] + [f"kept {i}: {why}" for i, why in KEPT]


#: The person: waits for GO_<phase> for each phase, moves that phase's files by hand
#: (a rename to knowledge/handmoved/, as a file manager does), then writes DONE_<phase>.
#: Phase "free": moves every file as it can, PAUSE apart, logging each move that happened.
PERSON = r"""
import json, os, sys, time
from pathlib import Path
root, phases, sync_dir = Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
pause = float(sys.argv[4])
dest = root / "knowledge" / "handmoved"
dest.mkdir(parents=True, exist_ok=True)
where = {p.stem: p for p in root.rglob("*.md") if ".mdcg" not in p.parts}
moved = []
for phase, ids in phases:
    while not (sync_dir / ("GO_" + phase)).exists():
        time.sleep(0.001)
    for i in ids:
        try:
            os.rename(where[i], dest / (i + ".md"))
        except FileNotFoundError:  # the sweep removed it first
            continue
        moved.append(i)
        time.sleep(pause)
    (sync_dir / ("DONE_" + phase)).write_text("")
print(json.dumps(moved))
"""

#: The sweep process: ``MdCG(root).sweep(dry_run=False)``; at each hooked point it creates
#: GO_<phase> and, unless the run is free, waits for DONE_<phase>: "listed" once the
#: expired ids are listed, "walk" before the walk for copies (after the check under the
#: locks), "tombstones" once the tombstones are written (before the removal).
SWEEPER = r"""
import json, os, sys, time
from pathlib import Path
from md_cg import MdCG, forgetting, logs, retention
root, sync_dir, free = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "free"

def at(phase):
    if (sync_dir / ("GO_" + phase)).exists():
        return
    (sync_dir / ("GO_" + phase)).write_text("")
    while not free and not (sync_dir / ("DONE_" + phase)).exists():
        time.sleep(0.001)

expired_ids, other_copies, append = retention.expired_ids, forgetting.other_copies, logs.AppendLog.append
def listed(*a, **k):
    out = expired_ids(*a, **k)
    at("free" if free else "listed")
    return out
def walk(*a, **k):
    if not free:
        at("walk")
    return other_copies(*a, **k)
def tombstones(self, records, *a, **k):
    out = append(self, records, *a, **k)
    if not free and records and records[0].get("event") == "sweep":
        at("tombstones")
    return out
retention.expired_ids, forgetting.other_copies, logs.AppendLog.append = listed, walk, tombstones
with MdCG(root) as s:
    r = s.sweep(dry_run=False)
print(json.dumps({"expired": list(r.expired), "removed": list(r.removed), "kept": [list(k) for k in r.kept]}))
"""


def _race(
    tmp_path: Path, root: Path, phases: list[tuple[str, list[str]]], free: bool
) -> tuple[dict, list[str]]:
    sync_dir = tmp_path / "sync"
    sync_dir.mkdir()
    person = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PERSON,
            str(root),
            json.dumps(phases),
            str(sync_dir),
            "0.0005" if free else "0",
        ],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sweeper = subprocess.run(
        [sys.executable, "-c", SWEEPER, str(root), str(sync_dir), "free" if free else "phased"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    out, err = person.communicate(timeout=60)
    assert person.returncode == 0, err
    assert sweeper.returncode == 0, sweeper.stderr
    return json.loads(sweeper.stdout), json.loads(out)


def _race_store(root: Path, n: int) -> tuple[list[str], dict[str, bytes]]:
    ids = [f"e{i:03d}" for i in range(n)]
    with MdCG(root) as s:
        s.add_many([_temp(i, "self" if k % 2 else "knowledge") for k, i in enumerate(ids)], stamp=False)
    files = {p.stem: p.read_bytes() for p in root.rglob("*.md") if ".mdcg" not in p.parts}
    return ids, files


def _path(i: str) -> str:
    return f"self/{i}.md" if int(i[1:]) % 2 else f"knowledge/orphan/{i}.md"


def _check_moved_kept(
    root: Path, report: dict, moved: list[str], files: dict[str, bytes], unlinked: int = 0
) -> None:
    """Every expired id in exactly one list; nothing the person moved removed; each moved
    file as it was, where the person put it; every other file removed. ``unlinked``: how
    many moved ids may be reported removed (see the free race)."""
    kept = [i for i, _ in report["kept"]]
    assert len(kept) == len(set(kept))
    assert set(kept).isdisjoint(report["removed"])
    assert sorted(set(kept) | set(report["removed"])) == report["expired"]
    assert set(kept) <= set(moved)
    assert len(set(moved) - set(kept)) <= unlinked, sorted(set(moved) - set(kept))
    for i in moved:
        assert (root / MOVED_TO / f"{i}.md").read_bytes() == files[i], i
    left = sorted(p.stem for p in root.rglob("*.md") if ".mdcg" not in p.parts)
    assert left == sorted(moved)


def test_a_person_moving_files_at_each_point_of_the_sweep(tmp_path: Path) -> None:
    """Phased, so exact: 10 files moved once the ids are listed (before the check under the
    locks), 10 after the check and before the walk for copies, 10 after the tombstones and
    before the removal; 30 untouched. Each moved one is kept with what the sweep saw; the
    rest removed. Before: the first 10 were in neither list, the next 10 said another file
    held them ("remove the copy you do not want"), the last 10 "changed (an edit)"."""
    root = tmp_path / "m"
    ids, files = _race_store(root, 60)
    listed, walk, tombs = ids[0:30:3], ids[1:30:3], ids[2:30:3]
    phases = [("listed", listed), ("walk", walk), ("tombstones", tombs)]
    report, moved = _race(tmp_path, root, phases, free=False)
    assert moved == listed + walk + tombs
    assert report["expired"] == ids
    assert report["removed"] == ids[30:]
    why = {i: _moved(i, _path(i), f"{MOVED_TO}/{i}.md") for i in listed + walk}
    why.update({i: _moved_meanwhile(_path(i)) for i in tombs})
    assert report["kept"] == [[i, why[i]] for i in sorted(why)]
    _check_moved_kept(root, report, moved, files)
    with MdCG(root) as s:
        events = [(t["event"], t["id"]) for t in s.tombstones()]
        assert events == [("sweep", i) for i in tombs + ids[30:]] + [("restored", i) for i in tombs]
        synced = s.sync()
        # the 10 moved after the tombstones were named in the removal's journal line: told as added
        assert [(m.node_id, m.old_path, m.new_path) for m in synced.moved] == [
            (i, _path(i), f"{MOVED_TO}/{i}.md") for i in sorted(listed + walk)
        ]
        assert (synced.added, synced.deleted) == (tuple(tombs), ())
        assert s.sweep(dry_run=True).expired == tuple(sorted(moved))  # back in the index, still expired


def test_a_person_moving_files_while_the_sweep_runs_free(tmp_path: Path) -> None:
    """Unsynchronised after the listing: the person moves 100 of 200 expired files as fast
    as it can while the sweep checks, walks and removes. Whatever the interleaving, each
    expired id is in exactly one list, each moved one kept -- with one of the reasons of a
    move -- and no moved file removed. A move landing between the removal's last stamp
    comparison and its unlink (microseconds; 2 runs in 15 had one) made the unlink find
    nothing, which the removal did not tell: that id was reported removed (its tombstone
    written) while its moved file stayed, whole. The removal now tells it (kept, moved)."""
    root = tmp_path / "m"
    ids, files = _race_store(root, 200)
    report, moved = _race(tmp_path, root, [("free", ids[::2])], free=True)
    assert report["expired"] == ids
    _check_moved_kept(root, report, moved, files)
    for i, why in report["kept"]:
        assert why in (
            _moved(i, _path(i), f"{MOVED_TO}/{i}.md"),
            _gone(i, _path(i)),
            _moved_meanwhile(_path(i)),
        ), (i, why)
