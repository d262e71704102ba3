"""Session 29: a layer folder that arrives at the store root after the watch started.

Git tracks no empty folder: a fresh clone lacks the layers that hold no memory yet,
and a pull that empties a layer removes its folder. A long-running handle (the MCP
server) watched only the layer folders there when its watch started, so the memories
a later pull put into a new ``self/`` were never picked up by ``sync_if_changed``
(search found nothing, ``get`` raised NodeNotFoundError) until a full ``sync``. The
watch now watches the store root for its layer folders too.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from md_cg import MdCG, NodeNotFoundError
from md_cg.watch import ChangeWatch

WHO = "---\nid: who\nlayer: self\n---\nThe user is called Lin 林.\n"


def _fresh_clone(root: Path) -> MdCG:
    """A store holding only knowledge/ (as git checks it out), with a started watch."""
    with MdCG(root) as s:
        s.add(id="k1", layer="knowledge", body="A knowledge note")
    for layer in ("anchor", "structural", "contextual", "self", "rejected", "unresolved"):
        if (root / layer).exists():
            shutil.rmtree(root / layer)
    s = MdCG(root)
    assert s.sync_if_changed(min_interval=0) is None  # starts the watch
    assert not (root / "self").exists()
    return s


def _bring_self(root: Path, tmp: Path, how: str) -> None:
    if how == "mkdir":
        (root / "self").mkdir()
        (root / "self" / "who.md").write_text(WHO, encoding="utf-8")
    else:  # a folder prepared elsewhere and moved into place in one step
        prepared = tmp / "prepared" if how == "rename_from_outside" else root / ".prepared"
        prepared.mkdir()
        (prepared / "who.md").write_text(WHO, encoding="utf-8")
        os.rename(prepared, root / "self")


def _assert_who_found(s: MdCG) -> None:
    assert s.ids() == ["k1", "who"]
    assert [h.id for h in s.search("Lin")[0] if not h.filler] == ["who"]
    assert s.get("who").body == "The user is called Lin 林."


@pytest.mark.parametrize("how", ["mkdir", "rename_from_outside", "rename_from_root"])
def test_a_layer_folder_created_after_the_watch_started_is_picked_up(tmp_path: Path, how: str) -> None:
    root = tmp_path / "m"
    s = _fresh_clone(root)
    with pytest.raises(NodeNotFoundError):
        s.get("who")
    _bring_self(root, tmp_path, how)
    report = s.sync_if_changed(min_interval=3600)
    assert report is not None
    assert (report.added, report.changed, report.deleted) == (("who",), (), ())
    _assert_who_found(s)
    assert s.sync_if_changed(min_interval=3600) is None
    # the new folder is watched: a file added to it later is seen too
    (root / "self" / "pref.md").write_text("The user prefers short answers\n", encoding="utf-8")
    report = s.sync_if_changed(min_interval=3600)
    assert report is not None and (report.added, report.deleted) == (("pref",), ())
    assert [h.id for h in s.search("short answers")[0] if not h.filler] == ["pref"]
    s.close()


@pytest.mark.parametrize("between", [True, False])
def test_a_layer_folder_removed_then_created_again_is_picked_up(tmp_path: Path, between: bool) -> None:
    """A pull that empties a layer removes its folder; a later pull creates it again
    (``between``: a pick-up ran while the folder was gone)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="k1", layer="knowledge", body="A knowledge note")
        s.add(id="me", layer="self", body="My name is Claude-helper")
    s = MdCG(root)
    assert s.sync_if_changed(min_interval=0) is None
    os.remove(root / "self" / "me.md")
    os.rmdir(root / "self")
    if between:
        report = s.sync_if_changed(min_interval=3600)
        assert report is not None and (report.added, report.deleted) == ((), ("me",))
        assert s.ids() == ["k1"]
    (root / "self").mkdir()
    (root / "self" / "who.md").write_text(WHO, encoding="utf-8")
    report = s.sync_if_changed(min_interval=3600)
    assert report is not None
    assert (report.added, report.deleted) == (("who",), () if between else ("me",))
    _assert_who_found(s)
    with open(root / "self" / "who.md", "a", encoding="utf-8") as fh:  # an edit in the new folder
        fh.write("Lin lives in Taipei.\n")
    report = s.sync_if_changed(min_interval=3600)
    assert report is not None and (report.added, report.changed) == ((), ("who",))
    assert [h.id for h in s.search("Taipei")[0] if not h.filler] == ["who"]
    s.close()


@pytest.mark.parametrize("how", ["mkdir", "rename_from_outside"])
def test_without_inotify_the_stat_scan_sees_a_new_layer_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.setattr("md_cg.watch._libc", lambda: None)
    root = tmp_path / "m"
    s = _fresh_clone(root)
    watch = s._hand_edits.watch
    assert watch is not None and not watch.native
    _bring_self(root, tmp_path, how)
    assert s.sync_if_changed(min_interval=3600) is None  # throttled: scanned a moment ago
    report = s.sync_if_changed(min_interval=0)
    assert report is not None and (report.added, report.deleted) == (("who",), ())
    _assert_who_found(s)
    s.close()


def test_the_root_watch_reports_only_layer_folders_and_gives_up_when_the_root_goes(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "knowledge").mkdir(parents=True)
    w = ChangeWatch(str(root))
    if not w.native:
        pytest.skip("no inotify here")
    # nothing at the root but a layer folder is news: a poll stays empty (cheap)
    (root / ".gitignore").write_text("x\n", encoding="utf-8")
    (root / "notes").mkdir()
    (root / "notes" / "x.md").write_text("x", encoding="utf-8")
    (root / ".mdcg").mkdir()
    assert w.poll() == set()
    (root / "anchor").mkdir()
    (root / "anchor" / "a.md").write_text("a", encoding="utf-8")
    (root / "anchor" / "sub").mkdir()
    (root / "anchor" / "sub" / "b.md").write_text("b", encoding="utf-8")
    assert w.poll() == {"anchor/", "anchor/a.md", "anchor/sub/b.md"}
    os.rename(root / "anchor", root / "notes" / "anchor")  # moved away: resolved as a folder
    assert w.poll() == {"anchor/"}
    (root / "notes" / "anchor" / "c.md").write_text("c", encoding="utf-8")
    assert w.poll() == set()  # no longer under the root: not watched
    os.rename(root, tmp_path / "elsewhere")  # the root moved away
    assert w.poll() is None
    assert not w.native and w.poll() is None  # every later poll: rescan
    w.close()
    w = ChangeWatch(str(tmp_path / "elsewhere"))
    shutil.rmtree(tmp_path / "elsewhere")  # the root removed
    assert w.poll() is None and not w.native
    w.close()


def test_a_memory_moved_into_or_out_of_archive_by_a_pull_is_picked_up(tmp_path: Path) -> None:
    """archive/ (absent from a fresh clone until something is archived) is watched as the
    layer folders are: an archive pulled in is a move, not a deletion."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="k", layer="knowledge", body="A note about green tea")
        s.add(id="j", layer="knowledge", body="Another note")
    (live,) = [p.relative_to(root).as_posix() for p in root.glob("knowledge/**/k.md")]
    assert not (root / "archive").exists()
    s = MdCG(root)
    assert s.sync_if_changed(min_interval=0) is None
    archived = f"archive/{live}"
    (root / archived).parent.mkdir(parents=True)
    os.rename(root / live, root / archived)
    report = s.sync_if_changed(min_interval=3600)
    assert report is not None and (report.added, report.deleted) == ((), ())
    assert [(m.node_id, m.old_path, m.new_path) for m in report.moved] == [("k", live, archived)]
    with pytest.raises(NodeNotFoundError, match="it is archived: unarchive it to use it"):
        s.get("k")
    os.rename(root / archived, root / live)  # and back (another clone unarchived it)
    report = s.sync_if_changed(min_interval=3600)
    assert report is not None
    assert [(m.node_id, m.old_path, m.new_path) for m in report.moved] == [("k", archived, live)]
    assert [h.id for h in s.search("green tea")[0] if not h.filler] == ["k"]
    assert s.sync().clean
    s.close()


def test_a_store_opened_through_a_symlink_is_watched(tmp_path: Path) -> None:
    # r4 (session 29): the root's watch asked inotify not to follow a symlink, so a store
    # opened through a symlinked path lost its watch entirely; a hand edit was then seen
    # only by the stat scan, at most once per min_interval.
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real", target_is_directory=True)
    with MdCG(link) as s:
        s.add(id="k1", layer="knowledge", body="A knowledge note")
    s = MdCG(link)
    try:
        assert s.sync_if_changed(min_interval=3600) is None  # starts the watch
        (tmp_path / "real" / "knowledge" / "k2.md").write_text(
            "---\nid: k2\nlayer: knowledge\n---\nA second note\n", encoding="utf-8"
        )
        (tmp_path / "real" / "self").mkdir(exist_ok=True)
        (tmp_path / "real" / "self" / "who.md").write_text(WHO, encoding="utf-8")
        report = s.sync_if_changed(min_interval=3600)
        assert report is not None and sorted(report.added) == ["k2", "who"]
        assert s.ids() == ["k1", "k2", "who"]
    finally:
        s.close()
