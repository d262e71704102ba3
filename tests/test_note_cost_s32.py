"""The cost of the notes of memories dropped for their files moved or deleted by hand
(:attr:`md_cg.engine.Engine.hand_after`), session 32, review r7 of b433f4c (b4.py): with
5,000 such notes after a search, every refresh looked at every note's file
(``engine.taken_back``: a sort and a stat each) and every new id scanned every note for a
twin (``engine.dropped_twin``): 200 ``get``s of another id took 8.07 s instead of 0.017 s,
``add_many`` of 10,000 new ids 19.1 s instead of 0.67 s, 200 ``add``s 4.28 s instead of
0.05 s -- until a sync. Now the notes are kept by uniqueness key (:class:`md_cg.engine.Notes`)
and a noted file is looked at only when a read or write names its id (or a twin), and at
a sync. Counted, not timed: the stats of the noted files and the keys of the noted ids
computed."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from md_cg import MdCG, fsops, paths
from md_cg.errors import IdCollisionError
from md_cg.node import Node

GONE = 5000
ORPHAN = "knowledge/orphan/"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of g0..g4999 and keep, closed (its snapshot written)."""
    root = tmp_path_factory.mktemp("notecost") / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=f"g{i}", body=f"gone walnut {i}") for i in range(GONE)])
        s.add(Node(id="keep", body="keep me"))
    return root


@pytest.fixture
def dropped(built: Path, tmp_path: Path) -> Iterator[tuple[Path, MdCG]]:
    """A handle of a copy of :func:`built` whose g* files were deleted by hand (g17's
    moved to the folder ``aside/``), a search then dropping all 5,000 ids."""
    root = tmp_path / "m"
    shutil.copytree(built, root)
    s = MdCG(root, refresh_interval=0)
    s.ids()
    (root / "aside").mkdir()
    shutil.move(root / f"{ORPHAN}g17.md", root / "aside/g17.md")
    for i in range(GONE):
        if i != 17:
            (root / f"{ORPHAN}g{i}.md").unlink()
    assert [r.id for r in s.search("walnut", k=GONE + 10)[0]] == ["keep"]  # filler
    assert len(s._engine.hand_after) == GONE
    with s:
        yield root, s


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts ``stat`` (fsops.exists of a g* file) and ``key`` (paths.id_key of a g* id)."""
    counts: Counter[str] = Counter()
    exists, id_key = fsops.exists, paths.id_key

    def counted_exists(root: str, rel: str) -> bool:
        counts["stat"] += rel.startswith(f"{ORPHAN}g")
        return exists(root, rel)

    def counted_key(node_id: str) -> str:
        counts["key"] += node_id.startswith("g")
        return id_key(node_id)

    monkeypatch.setattr(fsops, "exists", counted_exists)
    monkeypatch.setattr(paths, "id_key", counted_key)
    return counts


def _collides(new: str, old: str, path: str) -> str:
    return (
        f"node id {new!r} collides with the existing id {old!r} ({path}): ids that differ only by "
        "letter case or Unicode normalisation are the same file on macOS and Windows; choose "
        "another id or change the existing node"
    )


def test_reads_of_another_id_look_at_no_noted_file(dropped: tuple[Path, MdCG], looks: Counter[str]) -> None:
    _root, s = dropped
    for _ in range(50):
        assert s.get("keep").body == "keep me"
        assert "keep" in s
        assert s.entry("keep").path == f"{ORPHAN}keep.md"
    assert s.ids() == ["keep"]
    assert looks == Counter()  # before: 1,010,000 each (5,000 per refresh)


def test_new_ids_scan_no_note(dropped: tuple[Path, MdCG], looks: Counter[str]) -> None:
    root, s = dropped
    s.add_many([Node(id=f"new{i}", body=f"new {i}") for i in range(200)])
    for i in range(10):
        s.add(Node(id=f"one{i}", body="x"))
    s.add_unique(Node(id="uniq", body="unique"))
    s.apply_changes(add=[Node(id="applied", body="applied")])
    assert looks == Counter()  # before: 1,145,000 keys (5,000 per new id), 85,000 stats
    assert len(s.ids()) == 1 + 200 + 10 + 2
    assert not (root / f"{ORPHAN}g0.md").exists()


def test_a_twin_of_one_of_5000_notes_is_refused_naming_it(dropped: tuple[Path, MdCG]) -> None:
    root, s = dropped
    for write in (
        lambda: s.add(Node(id="G4999", body="caps")),
        lambda: s.add_many([Node(id="fresh", body="ok"), Node(id="G4999", body="caps")]),
        lambda: s.rename("keep", "G4999"),
    ):
        with pytest.raises(IdCollisionError) as err:
            write()
        assert str(err.value) == _collides("G4999", "g4999", f"{ORPHAN}g4999.md")
    assert sorted(p.name for p in (root / ORPHAN).iterdir()) == ["keep.md"]


def test_a_file_put_back_is_looked_at_once_by_its_read(
    dropped: tuple[Path, MdCG], looks: Counter[str]
) -> None:
    root, s = dropped
    shutil.move(root / "aside/g17.md", root / f"{ORPHAN}g17.md")
    assert s.get("g17").body == "gone walnut 17"
    assert looks["stat"] == 1  # before: every note's file (5,000)
    assert s.update("g17", body="updated walnut").body == "updated walnut"
    assert looks["stat"] == 1
    report = s.sync()
    assert (report.moved, report.changed, report.added) == ((), (), ())
    assert report.deleted == tuple(sorted(f"g{i}" for i in range(GONE) if i != 17))
    assert s.ids() == ["g17", "keep"]


def test_an_update_of_a_put_back_file_looks_at_its_note_alone(
    dropped: tuple[Path, MdCG], looks: Counter[str]
) -> None:
    root, s = dropped
    shutil.move(root / "aside/g17.md", root / f"{ORPHAN}g17.md")
    assert s.update("g17", body="updated walnut").body == "updated walnut"
    assert looks["stat"] == 1  # before: every note's file at each refresh
    assert [r.id for r in s.search("updated walnut")[0]][:1] == ["g17"]


@pytest.mark.parametrize("how", ["sync", "sync_if_changed"])
def test_a_sync_takes_back_a_put_back_file_no_read_named(dropped: tuple[Path, MdCG], how: str) -> None:
    root, s = dropped
    shutil.move(root / "aside/g17.md", root / f"{ORPHAN}g17.md")
    report = s.sync() if how == "sync" else s.sync_if_changed(min_interval=0)
    assert report is not None
    assert (report.moved, report.changed, report.added) == ((), (), ())
    assert report.deleted == tuple(sorted(f"g{i}" for i in range(GONE) if i != 17))
    assert s.ids() == ["g17", "keep"]
    assert s.get("g17").body == "gone walnut 17"


def test_notes_a_sync_replaced_are_keyed_again(tmp_path: Path) -> None:
    """A sync sets a plain dict as the notes: the next drop is looked up by key too."""
    root = tmp_path / "m"
    with MdCG(root, refresh_interval=0) as s:
        s.add(Node(id="x1", body="walnut one"))
        s.add(Node(id="x2", body="walnut two"))
        (root / f"{ORPHAN}x1.md").unlink()
        assert [r.id for r in s.search("walnut")[0]] == ["x2"]
        assert s.sync().deleted == ("x1",)
        (root / f"{ORPHAN}x2.md").unlink()
        assert s.search("walnut")[0] == []
        with pytest.raises(IdCollisionError) as err:
            s.add(Node(id="X2", body="caps"))
        assert str(err.value) == _collides("X2", "x2", f"{ORPHAN}x2.md")
        assert s.sync().deleted == ("x2",)
