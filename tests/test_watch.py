"""Hand edits picked up by a long-running process: sync_if_changed and ChangeWatch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.watch import ChangeWatch


def _edit_in_place(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8").replace(old, new)
    with open(path, "r+", encoding="utf-8") as fh:  # as an editor that writes in place
        fh.write(text)
        fh.truncate()


@pytest.fixture
def watched(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "m")
    s.add(id="a", layer="self", body="alpha original")
    s.add(id="k", layer="knowledge", body="knowledge note", tags=["domain:x"])
    assert s.sync_if_changed() is None  # the first call compares by stat and starts watching
    yield s
    s.close()


def test_edits_creations_deletions_and_moved_folders_are_seen(watched: MdCG) -> None:
    root = watched.root
    assert watched.sync_if_changed() is None
    _edit_in_place(root / "self" / "a.md", "alpha original", "alpha edited by hand")
    (root / "contextual" / "hand.md").write_text("# A hand note\nbody\n", encoding="utf-8")
    (root / "knowledge" / "notes" / "sub").mkdir(parents=True)
    (root / "knowledge" / "notes" / "sub" / "deep.md").write_text("deep note\n", encoding="utf-8")
    report = watched.sync_if_changed()
    assert report is not None
    assert (report.added, report.changed, report.deleted) == (("deep", "hand"), ("a",), ())
    results, _ = watched.search("edited", k=1)
    assert (results[0].title, results[0].node.body) == ("alpha edited by hand", "alpha edited by hand")
    os.remove(root / "contextual" / "hand.md")
    os.rename(root / "knowledge" / "notes", root / "knowledge" / "moved")
    report = watched.sync_if_changed()
    assert report is not None and report.deleted == ("hand",)
    assert [(m.node_id, m.new_path) for m in report.moved] == [("deep", "knowledge/moved/sub/deep.md")]
    assert watched.ids() == ["a", "deep", "k"]
    assert watched.health().ok
    # other processes see the reconciliation through the log
    with MdCG(root, read_only=True) as other:
        assert other.ids() == ["a", "deep", "k"]


def test_without_inotify_a_throttled_stat_scan_does_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("md_cg.watch._libc", lambda: None)
    s = MdCG(tmp_path / "m")
    s.add(id="a", layer="self", body="alpha original")
    assert s.sync_if_changed(min_interval=0) is None
    watch = s._hand_edits.watch
    assert watch is not None and not watch.native
    _edit_in_place(s.root / "self" / "a.md", "alpha original", "alpha edited")
    assert s.sync_if_changed(min_interval=3600) is None  # throttled: scanned a moment ago
    report = s.sync_if_changed(min_interval=0)
    assert report is not None and report.changed == ("a",)
    s.close()


def test_a_read_only_handle_updates_its_view_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as w:
        w.add(id="a", layer="self", body="alpha original")
    listing = sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file())
    r = MdCG(root, read_only=True)
    assert r.sync_if_changed() is None
    (root / "self" / "b.md").write_text("a note dropped in\n", encoding="utf-8")
    listing.append((str(root / "self" / "b.md"), (root / "self" / "b.md").stat().st_mtime_ns))
    report = r.sync_if_changed()
    assert report is not None and report.added == ("b",)
    assert r.get("b").body == "a note dropped in"
    r.close()
    assert sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()) == sorted(listing)


def test_the_watch_reports_paths_and_a_lost_queue_means_rescan(tmp_path: Path) -> None:
    for layer in ("self", "knowledge"):
        (tmp_path / layer).mkdir()
    w = ChangeWatch(str(tmp_path))
    if not w.native:
        pytest.skip("no inotify here")
    assert w.poll() == set()
    (tmp_path / "self" / "x.md").write_text("x", encoding="utf-8")
    (tmp_path / "knowledge" / "cond_a").mkdir()
    (tmp_path / "knowledge" / "cond_a" / "y.md").write_text("y", encoding="utf-8")
    assert w.poll() == {"self/x.md", "knowledge/cond_a/y.md"}
    w._lost = True
    assert w.poll() is None
    w.close()


@pytest.mark.parametrize("step", ["stale_paths", "sync_paths"])
def test_a_failed_pick_up_is_not_forgotten_by_the_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """A first call (or a later one) that fails after the watch took the changes must not
    lose them: the next call scans every file again and picks up the edit made before."""
    from md_cg import maintenance

    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a", layer="self", body="alpha original")
    with MdCG(root) as s:
        _edit_in_place(root / "self" / "a.md", "alpha original", "alpha edited while no server ran")
        real = getattr(maintenance, step)

        def failing(*args: object, **kwargs: object) -> object:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(maintenance, step, failing)
        with pytest.raises(OSError, match="Input/output error"):
            s.sync_if_changed(min_interval=3600)
        monkeypatch.setattr(maintenance, step, real)
        report = s.sync_if_changed(min_interval=3600)
        assert report is not None and report.changed == ("a",)
        assert s.get("a").body == "alpha edited while no server ran"
        assert [r.id for r in s.search("edited", record=False)[0]] == ["a"]
