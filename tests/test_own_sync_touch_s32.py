"""Session 32: a long-lived handle does not tell a touch of a file it took in itself.

Session 31 (review r7) left a limit: a handle that took a hand-made file in by its own
``sync()`` (or pick-up) and stayed open -- the MCP server -- compared that file by stat
alone, so its next sync told a ``touch`` or a byte-identical re-save as ``changed`` (5,000
touched files were 5,000 "changed"), while a process following its sync line read the
file's CRC-32 and told nothing. The handle now keeps the CRC-32 its own sync line logged
and reads a file whose mtime alone moved.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from md_cg import MdCG
from md_cg.reports import SyncReport

_BODY = "# Heron\n\nThe heron waits by the pond at dawn.\n"


def _bump(path: Path, seconds: int = 1) -> None:
    """Move the file's mtime on (a ``touch`` the filesystem's clock cannot miss)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def _told(report: SyncReport) -> tuple[tuple[str, ...], ...]:
    return (report.added, report.changed, report.deleted, tuple(m.node_id for m in report.moved))


def _handle_with_hand_files(root: Path, n: int) -> tuple[MdCG, list[Path]]:
    s = MdCG(root)
    s.add(id="x1", layer="knowledge", body="alpha beta gamma")
    files = []
    for i in range(n):
        f = root / "knowledge" / f"h{i}.md"
        f.write_text(_BODY.replace("Heron", f"Heron {i}"), encoding="utf-8")
        files.append(f)
    assert _told(s.sync()) == (tuple(sorted(f"h{i}" for i in range(n))), (), (), ())
    return s, files


def test_touch_and_same_bytes_are_not_told_by_the_handle_that_took_them_in(tmp_path: Path) -> None:
    s, (h0, h1, h2) = _handle_with_hand_files(tmp_path / "m", 3)
    with s:
        _bump(h0)
        h1.write_bytes(h1.read_bytes())  # a re-save of the same bytes
        _bump(h1, 2)
        shutil.copyfile(h2, tmp_path / "h2.bak")
        shutil.copyfile(tmp_path / "h2.bak", h2)  # cp back
        _bump(h2, 3)
        assert _told(s.sync()) == ((), (), (), ())
        assert _told(s.sync()) == ((), (), (), ())  # the new stats are held now
        # a real edit of the same size is told, once; a touch after it is not
        h1.write_text(_BODY.replace("Heron", "Heron 9"), encoding="utf-8")
        assert h1.stat().st_size == len(_BODY.replace("Heron", "Heron 1").encode())
        _bump(h1, 4)
        assert _told(s.sync()) == ((), ("h1",), (), ())
        assert s.get("h1").body.startswith("# Heron 9\n")
        _bump(h1, 5)
        assert _told(s.sync()) == ((), (), (), ())
        _bump(h0, 6)
        h0.write_text(_BODY.replace("Heron", "Egret 0"), encoding="utf-8")  # another size
        assert _told(s.sync()) == ((), ("h0",), (), ())


def test_pick_ups_of_a_long_lived_handle_tell_only_real_edits(tmp_path: Path) -> None:
    s, files = _handle_with_hand_files(tmp_path / "m", 40)
    with s:
        for f in files:
            _bump(f)
        files[7].write_text(_BODY.replace("Heron", "Crane 7"), encoding="utf-8")  # same size
        _bump(files[7], 2)
        report = s.sync_if_changed(min_interval=0)
        assert report is not None and _told(report) == ((), ("h7",), (), ())
        for f in files:
            _bump(f, 3)
        report = s.sync_if_changed(min_interval=0)
        assert report is None or _told(report) == ((), (), (), ())


def test_another_process_following_the_line_tells_nothing_either(tmp_path: Path) -> None:
    """The handle logs the touched file's new stat, so a handle following its lines later
    does not read it as a change either."""
    root = tmp_path / "m"
    s, (h0,) = _handle_with_hand_files(root, 1)
    with s, MdCG(root) as other:
        assert _told(other.sync()) == ((), (), (), ())
        _bump(h0)
        assert _told(s.sync()) == ((), (), (), ())
        assert _told(other.sync()) == ((), (), (), ())
    with MdCG(root) as third:
        assert _told(third.sync()) == ((), (), (), ())


def test_a_read_only_handle_picking_up_does_not_tell_a_touch_it_took_in(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="x1", layer="knowledge", body="alpha beta gamma")
    h0 = root / "knowledge" / "h0.md"
    h0.write_text(_BODY, encoding="utf-8")
    with MdCG(root, read_only=True) as ro:
        first = ro.sync_if_changed(min_interval=0)
        assert first is not None and _told(first) == (("h0",), (), (), ())
        _bump(h0)
        again = ro.sync_if_changed(min_interval=0)
        assert again is None or _told(again) == ((), (), (), ())
        h0.write_text(_BODY.replace("waits", "stands"), encoding="utf-8")
        _bump(h0, 2)
        edited = ro.sync_if_changed(min_interval=0)
        assert edited is not None and _told(edited) == ((), ("h0",), (), ())
