"""Session 33 (review b2): without inotify, a file broken by hand and then fixed is taken back.

A long-lived handle with no inotify (macOS, Windows, a Linux whose watch limit is spent
or whose queue overflowed) picks up hand edits by a stat scan. The scan skipped every
file recorded as malformed, so a memory whose file a typo broke stayed out of ``ids()``
and search for the handle's lifetime once the typo was fixed (``sync()`` told it
``added``; the random comparison of pick-ups and syncs diverged in 14 of 40 runs with a
break step). The handle now keeps the stat of each malformed file and reads one again
when its stat moves.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from md_cg import MdCG, Node


@pytest.fixture(autouse=True)
def _no_inotify(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("md_cg.watch._libc", lambda: None)  # as on a platform without inotify


def _told(report):  # type: ignore[no-untyped-def]
    if report is None:
        return None
    return {
        k: getattr(report, k)
        for k in ("added", "changed", "deleted", "moved", "malformed")
        if getattr(report, k)
    }


def _store(root: Path) -> None:
    with MdCG(root) as s:
        for i in range(3):
            s.add(Node(id=f"n{i}", layer="knowledge", body=f"body {i}\n"))


def test_a_file_broken_then_fixed_is_taken_back_by_the_stat_scan(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as h:
        assert h.sync_if_changed(0) is None
        path = h.path_of("n1")
        rel = path.relative_to(root).as_posix()
        good = path.read_text(encoding="utf-8")
        path.write_text(good.replace("id:", "id: [", 1), encoding="utf-8")
        broken = _told(h.sync_if_changed(0))
        assert broken is not None and [r for r, _why in broken["malformed"]] == [rel]
        assert h.sync_if_changed(0) is None  # unchanged since: not read again, not told again
        time.sleep(0.01)
        path.write_text(good, encoding="utf-8")
        assert _told(h.sync_if_changed(0)) == {"added": ("n1",)}  # before: None at every call
        assert h.sync_if_changed(0) is None
        assert sorted(h.ids()) == ["n0", "n1", "n2"]
        assert next(r.id for r in h.search("body 1", judge=False)[0]) == "n1"


def test_a_broken_file_replaced_at_its_path_by_another_memory_is_read(tmp_path: Path) -> None:
    """The broken file's folder moved away and a checkout put a good file back at the old
    path, which the record still knew as malformed (the fuzzer's seed 112)."""
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as h:
        assert h.sync_if_changed(0) is None
        path = h.path_of("n2")
        good = path.read_text(encoding="utf-8")
        path.write_text(good.replace("id:", "id: [", 1), encoding="utf-8")
        assert _told(h.sync_if_changed(0))["malformed"]  # type: ignore[index]
        path.unlink()
        assert h.sync_if_changed(0) is None
        path.write_text(good, encoding="utf-8")
        assert _told(h.sync_if_changed(0)) == {"added": ("n2",)}
        assert h.get("n2").body == "body 2\n"


def test_a_malformed_file_is_told_once_then_when_fixed(tmp_path: Path) -> None:
    """A malformed file found before the handle opened: its first pick-up reads it (the
    list of malformed files is not kept across processes) and tells it, the next calls
    do not, and its fix is taken in."""
    root = tmp_path / "m"
    _store(root)
    bad = root / "knowledge" / "bad.md"
    bad.write_text('---\nid: "bad\n---\nbody\n', encoding="utf-8")
    with MdCG(root) as s:
        assert [r for r, _why in s.sync().malformed] == ["knowledge/bad.md"]
    with MdCG(root) as h:
        first = _told(h.sync_if_changed(0))
        assert first is not None and [r for r, _why in first["malformed"]] == ["knowledge/bad.md"]
        assert h.sync_if_changed(0) is None
        assert h.sync_if_changed(0) is None
        time.sleep(0.01)
        bad.write_text('---\nid: "bad"\n---\nbody fixed\n', encoding="utf-8")
        assert _told(h.sync_if_changed(0)) == {"added": ("bad",)}
