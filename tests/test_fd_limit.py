"""The number of folders is not capped by the open-file limit.

A store with more bucket folders than the process may hold open files (one per
domain: ``knowledge/cond_dX_<hash>/``) is written, synced, checked, rebuilt and
compacted under a small ``RLIMIT_NOFILE``: the folder walks hold one folder per
level (:func:`md_cg.fsops.scan`), a batch a bounded number
(:class:`md_cg.fsops.FolderCache`). Each run is a subprocess, so the limit
binds only it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import fsops
from md_cg.errors import UnsafePathError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")

#: The soft limit the child runs under, and more domain folders than that.
LIMIT = 128
DOMAINS = 300

_CHILD = textwrap.dedent(
    """
    import json, os, resource, shutil, sys, warnings
    warnings.simplefilter("error", RuntimeWarning)  # a compaction on close that fails only warns
    root, limit, domains = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    from md_cg import MdCG, Node

    def nodes(prefix, domain):
        return [Node(id=f"n{i}", body=f"note {i} about {prefix}{i}", tags=[f"domain:{domain}{i}"])
                for i in range(domains)]

    def folders():
        return sorted(n for n in os.listdir(os.path.join(root, "knowledge")) if n.startswith("cond_"))

    out = {}
    s = MdCG(root, auto_compact=1)
    s.add_many(nodes("alpha", "d"))  # one batch over `domains` new folders
    out["added"] = sorted(s.ids())
    out["folders"] = len(folders())
    s.add_many(nodes("beta", "e"), overwrite=True, durable=True)  # each node moves to a new folder
    out["moved"] = sorted(s.ids())
    out["moved_files"] = sorted(  # domain letter of each folder holding a file
        f.split("_")[1][0] for f in folders() if os.listdir(os.path.join(root, "knowledge", f))
    )
    r = s.sync()
    out["sync"] = [r.added, r.changed, r.deleted, r.refused, r.malformed]
    out["health"] = [f.kind for f in s.health().findings]
    s.rebuild_index()
    out["rebuilt"] = sorted(s.ids())
    s.compact_index()
    out["compacted"] = sorted(s.ids())
    s.update("n7", body="edited")
    s.close()  # compacts (auto_compact=1)
    shutil.rmtree(os.path.join(root, ".mdcg"))  # a cold build from the files
    with MdCG(root) as again:
        out["cold"] = sorted(again.ids())
        out["n7"] = again.get("n7").body
    print(json.dumps(out))
    """
)


def test_many_domain_folders_under_a_small_open_file_limit(tmp_path: Path) -> None:
    root = tmp_path / "m"
    env = {**python_env(), "MDCG_BUILD_WORKERS": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(LIMIT), str(DOMAINS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    ids = sorted(f"n{i}" for i in range(DOMAINS))
    assert out["folders"] == DOMAINS > LIMIT
    assert out["added"] == out["moved"] == out["rebuilt"] == out["compacted"] == out["cold"] == ids
    assert out["sync"] == [[], [], [], [], []]  # the index already matched the files
    # the batch moved every file from its old folder to its new one
    assert out["moved_files"] == ["e"] * DOMAINS
    # the only finding is about the shape asked for (300 buckets of one memory each)
    assert out["health"] == ["bucket_degraded"]
    assert out["n7"] == "edited"


def _tree(root: Path, count: int) -> None:
    for i in range(count):
        sub = root / "top" / f"b{i:03d}" / "deep"
        sub.mkdir(parents=True)
        (sub / f"f{i}.md").write_text("x")
        (root / "top" / f"b{i:03d}" / f"g{i}.md").write_text("y")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_scan_holds_one_folder_per_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a walk reads 200 sibling folders, at most its depth in folders is open."""
    _tree(tmp_path, 200)
    base = _open_fds()
    peak = [0]
    listdir = fsops.Dir.listdir

    def counting(d: fsops.Dir) -> list[str]:
        peak[0] = max(peak[0], _open_fds() - base)
        return listdir(d)

    monkeypatch.setattr(fsops.Dir, "listdir", counting)
    found = fsops.scan(str(tmp_path), "top")
    assert len(found.files) == 400
    assert found.files.keys() == {
        *(f"top/b{i:03d}/deep/f{i}.md" for i in range(200)),
        *(f"top/b{i:03d}/g{i}.md" for i in range(200)),
    }
    assert 1 <= peak[0] <= 3  # top, top/bNNN, top/bNNN/deep
    assert _open_fds() == base  # every folder closed
    assert fsops.find_named(str(tmp_path), "top", {"f7.md", "g9.md"}) == [
        "top/b007/deep/f7.md",
        "top/b009/g9.md",
    ]
    assert _open_fds() == base


def test_folder_cache_is_bounded_and_never_reopens_through_a_symlink(tmp_path: Path) -> None:
    root = tmp_path
    for i in range(10):
        (root / "k" / f"c{i}").mkdir(parents=True)
    with fsops.FolderCache(str(root), size=3) as cache:
        for i in range(10):
            cache.get(f"k/c{i}").write_temp("x.md", b"data")
            assert len(cache._open) <= 3
        assert list(cache.touched) == [f"k/c{i}" for i in range(10)] and cache.spilled
        files = [(f"k/c{i}", name) for i in range(10) for name in os.listdir(root / "k" / f"c{i}")]
        fsops.fsync_all(cache.fsync_file_calls(files))  # spilled: closed, one call per folder
        assert cache._open == {}
        # A folder closed by the cache and swapped for a symlink is refused when it is
        # needed again, never entered.
        os.rename(root / "k" / "c0", root / "k" / "elsewhere")
        os.symlink(root / "k" / "elsewhere", root / "k" / "c0")
        with pytest.raises(UnsafePathError):
            cache.get("k/c0")
        with pytest.raises(UnsafePathError):
            fsops.fsync_all(cache.fsync_calls())
        # A folder removed since needs no fsync (its entries went with it).
        os.unlink(root / "k" / "c0")
        (root / "k" / "c5" / files[5][1]).unlink()
        (root / "k" / "c5").rmdir()
        fsops.fsync_all(cache.fsync_calls())
    assert cache._open == {}
    within = fsops.FolderCache(str(root), size=3)
    d = within.get("k/c1")
    assert within.get("k/c1") is d and not within.spilled  # no walk from the root again
    assert within.fsync_calls() == [d.fsync]
    within.close()


@pytest.mark.parametrize(
    ("error", "match"),
    [
        (UnsafePathError("knowledge/cond_x", "is a symlink"), "is a symlink"),
        # Session 25: a worker caught only Exception; SystemExit (not an Exception)
        # ended it silently and its share of fsyncs was skipped.
        (SystemExit("worker stopped"), "worker stopped"),
    ],
)
def test_fsync_all_raises_what_a_worker_thread_met(monkeypatch, error: BaseException, match: str) -> None:
    """Review round 3 (session 24): a worker caught only OSError; a folder reopened and
    found to be a symlink (UnsafePathError) ended the thread, its share of fsyncs was
    skipped and the durable batch was acknowledged."""
    from md_cg import fsops

    monkeypatch.setattr(fsops, "FSYNC_SLOW_SECONDS", 0.0)  # always concurrent after the probe
    ran: list[int] = []

    def call(i: int) -> None:
        if i == fsops.FSYNC_PROBE + 1:  # on a worker thread (parts are dealt round robin)
            raise error
        ran.append(i)

    calls = [lambda i=i: call(i) for i in range(fsops.FSYNC_PROBE + 40)]
    with pytest.raises(type(error), match=match):
        fsops.fsync_all(calls, threads=4)
    assert fsops.FSYNC_PROBE + 1 not in ran


def test_a_failed_batch_removes_its_other_temps_when_one_folder_became_a_symlink(tmp_path: Path) -> None:
    """Review round 3 (session 24): the cleanup stopped at a folder replaced by a symlink,
    its UnsafePathError hid the batch's own error, and the other temp files stayed."""
    from md_cg import journal

    root = tmp_path / "m"
    for name in ("a", "b", "c"):
        (root / "knowledge" / name).mkdir(parents=True)
        (root / "knowledge" / name / ".x.md.tmp").write_bytes(b"temp")
    outside = tmp_path / "outside"
    (root / "knowledge" / "b").rename(outside)
    (root / "knowledge" / "b").symlink_to(outside)
    puts = [journal.Put(n, f"knowledge/{n}/x.md", b"x") for n in ("a", "b", "c")]
    dirs = fsops.FolderCache(str(root))
    try:
        journal._remove_temps(puts, [".x.md.tmp"] * 3, dirs)  # raises nothing
    finally:
        dirs.close()
    assert sorted(p.name for p in (root / "knowledge").rglob("*.tmp")) == []
    assert (outside / ".x.md.tmp").exists()  # never reached through the symlink
