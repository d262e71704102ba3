"""Session 31: a file a sync took in that is only touched is not told as changed.

Review r6 (after c5a9265, whose sync lines log the mtime and size of each file they
take in): a hand-made file taken in by a sync, then only ``touch``ed or rewritten with
its exact bytes (``cp``, an editor's re-save, a cloud client, ``git checkout``), was
reported ``changed`` by the next sync -- before c5a9265 nothing was. A sync line now
logs the CRC-32 of each file too, and a file whose mtime moved and size did not is read
and told only when its bytes differ. Every sync runs as ``mdcg sync --json`` in a
process of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import orjson
from test_pull_sync_s31 import _ENV, _git, _push  # one set of git helpers for the clones

_BODY = b"# Heron\n\nThe heron waits by the pond at dawn.\n"
_NOTHING = {"added": [], "changed": [], "deleted": [], "moved": []}


def _mdcg(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "md_cg.cli", *args, "--root", str(root)], env=_ENV, capture_output=True
    )


def _sync(root: Path) -> dict[str, list[str]]:
    """``mdcg sync --json`` in a process of its own: the four lists (moved as "id old -> new")."""
    out = _mdcg(root, "sync", "--json")
    assert out.returncode == 0, out.stderr
    d = orjson.loads(out.stdout)
    moved = [f"{m['node_id']} {m['old_path']} -> {m['new_path']}" for m in d["moved"]]
    return {"added": d["added"], "changed": d["changed"], "deleted": d["deleted"], "moved": moved}


def _bump(path: Path) -> None:
    """Move the file's mtime one second on (a ``touch`` the filesystem's clock cannot miss)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _store(tmp: Path) -> tuple[Path, Path]:
    """A store (``mdcg init``, one memory added through md-cg) and a hand-made note h1
    that a sync took in."""
    root = tmp / "mem"
    assert _mdcg(root, "init").returncode == 0
    assert _mdcg(root, "add", "--id", "x1", "alpha beta gamma").returncode == 0
    h1 = root / "knowledge" / "h1.md"
    h1.write_bytes(_BODY)
    assert _sync(root) == {**_NOTHING, "added": ["h1"]}
    return root, h1


def _sync_lines(root: Path) -> list[dict[str, object]]:
    lines = []
    for shard in sorted((root / ".mdcg" / "log").iterdir()):
        lines += [orjson.loads(x) for x in shard.read_bytes().splitlines() if x.strip()]
    return sorted((r for r in lines if r["op"] == "sync"), key=lambda r: r["ts"])  # type: ignore[arg-type,return-value]


def test_touch_is_not_told_and_stays_untold(tmp_path: Path) -> None:
    root, h1 = _store(tmp_path)
    _bump(h1)
    assert _sync(root) == _NOTHING
    assert _sync(root) == _NOTHING
    _bump(h1)
    assert _sync(root) == _NOTHING


def test_same_bytes_rewritten_is_not_told(tmp_path: Path) -> None:
    root, h1 = _store(tmp_path)
    h1.unlink()
    h1.write_bytes(_BODY)  # as cp, or an editor's save without a change
    _bump(h1)
    assert _sync(root) == _NOTHING
    assert _sync(root) == _NOTHING


def test_edit_of_the_same_size_is_told_once(tmp_path: Path) -> None:
    root, h1 = _store(tmp_path)
    edited = _BODY.replace(b"heron", b"herin")
    assert len(edited) == len(_BODY)
    h1.write_bytes(edited)
    _bump(h1)
    assert _sync(root) == {**_NOTHING, "changed": ["h1"]}
    assert _sync(root) == _NOTHING
    assert b"herin" in _mdcg(root, "get", "h1").stdout
    _bump(h1)  # touched after the edit was told: nothing
    assert _sync(root) == _NOTHING
    h1.write_bytes(_BODY)  # back to the first bytes, of the same size: a change again
    _bump(h1)
    assert _sync(root) == {**_NOTHING, "changed": ["h1"]}
    assert _sync(root) == _NOTHING


def test_sync_line_logs_the_crc_and_the_new_stat_of_a_touched_file(tmp_path: Path) -> None:
    """The sync line logs ``[mtime_ns, size]`` and the CRC-32 of each file; a sync that found a touched file's
    bytes unchanged logs its new stat (so the next process does not read it again)."""
    root, h1 = _store(tmp_path)
    first = _sync_lines(root)
    st = h1.stat()
    assert [(r["put"], r["stat"], r["crc"]) for r in first] == [
        ([["h1", "knowledge/h1.md"]], [[st.st_mtime_ns, len(_BODY)]], [zlib.crc32(_BODY)])
    ]
    _bump(h1)
    assert _sync(root) == _NOTHING
    st = h1.stat()
    after = _sync_lines(root)
    assert [(r["put"], r["stat"], r["crc"]) for r in after[1:]] == [
        ([["h1", "knowledge/h1.md"]], [[st.st_mtime_ns, len(_BODY)]], [zlib.crc32(_BODY)])
    ]
    assert _sync(root) == _NOTHING
    assert len(_sync_lines(root)) == 2  # nothing more to log


def test_line_without_crc_keeps_telling_a_touch(tmp_path: Path) -> None:
    """A sync line of c5a9265 (``stat`` without ``crc``) is read as before: a file
    whose mtime moved is told ``changed``, once."""
    root, h1 = _store(tmp_path)
    for shard in (root / ".mdcg" / "log").iterdir():
        lines = shard.read_bytes().splitlines(keepends=True)
        out = []
        for line in lines:
            rec = orjson.loads(line)
            if rec["op"] == "sync":
                rec.pop("crc", None)
                line = orjson.dumps(rec) + b"\n"
            out.append(line)
        shard.write_bytes(b"".join(out))
    _bump(h1)
    assert _sync(root) == {**_NOTHING, "changed": ["h1"]}
    assert _sync(root) == _NOTHING


def test_pulled_files_checked_out_again_or_touched_are_not_told(tmp_path: Path) -> None:
    """Files a pull brought (taken in by b's sync), then restored by ``git checkout`` or
    touched: nothing to tell; one a later pull edits to the same size is ``changed``."""
    _git(tmp_path, "init", "-q", "--bare", "origin.git")
    _git(tmp_path, "clone", "-q", "origin.git", "a")
    a, b = tmp_path / "a", tmp_path / "b"
    assert _mdcg(a / "mem", "init").returncode == 0
    assert _mdcg(a / "mem", "add", "--id", "x1", "alpha beta gamma").returncode == 0
    (a / ".gitignore").write_text("mem/.mdcg/\n")
    _push(a, "init")
    _git(tmp_path, "clone", "-q", "-b", "main", "origin.git", "b")
    assert _mdcg(b / "mem", "init").returncode == 0
    (a / "mem" / "knowledge" / "p1.md").write_bytes(_BODY)
    (a / "mem" / "knowledge" / "p2.md").write_bytes(_BODY.replace(b"heron", b"egret"))
    _push(a, "two")
    _git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert _sync(b / "mem") == {**_NOTHING, "added": ["p1", "p2"]}
    (b / "mem" / "knowledge" / "p1.md").unlink()
    _git(b, "checkout", "--", "mem/knowledge/p1.md")
    _bump(b / "mem" / "knowledge" / "p1.md")
    _bump(b / "mem" / "knowledge" / "p2.md")
    assert _sync(b / "mem") == _NOTHING
    assert _sync(b / "mem") == _NOTHING
    (a / "mem" / "knowledge" / "p2.md").write_bytes(_BODY.replace(b"heron", b"egrat"))
    _push(a, "edit")
    _git(b, "pull", "-q", "--no-rebase", "origin", "main")
    _bump(b / "mem" / "knowledge" / "p2.md")
    assert _sync(b / "mem") == {**_NOTHING, "changed": ["p2"]}
    assert _sync(b / "mem") == _NOTHING
