"""A copy of a store's ``.mdcg/`` is not trusted as the copy's index (session 38).

A user had ``git add -f``-ed the store's ``.mdcg/`` once and went on committing only the
``.md`` files. A fresh clone opened the committed, stale snapshot (its token file came
along, so the token check passed): ``search WOMBAT`` missed a memory whose committed
file holds the word, ``get n6`` said there was no such node, ``mdcg init --git`` said
"store ready (5 nodes)" beside 6 files and nothing of the tracked ``.mdcg/``, and the
next ``sync`` told every file ``changed`` (the checkout's mtimes). A ``cp -r`` of a store,
or a ``.mdcg/`` restored from a backup, had the same shape.

The token file now stamps the snapshot file it vouches for with that file's identity
(inode, mtime, size), which no copy keeps: a snapshot whose file is not the one stamped
is refused and the index built from the files (in memory: a read-only handle writes
nothing), as in a clone without ``.mdcg/``; the next compaction writes this place's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import python_env, tree_listing
from test_merge import git

from md_cg import MdCG, Node, merge, snapshot
from md_cg import engine as engine_mod

IDS = [f"n{i}" for i in range(1, 6)]


def _ids(store: MdCG, query: str) -> set[str]:
    return {r.id for r in store.search(query, record=False)[0] if not r.filler}


def _changes(report: object) -> tuple[tuple[str, ...], ...]:
    return tuple(getattr(report, k) for k in ("added", "changed", "deleted", "moved"))


NO_CHANGES: tuple[tuple[str, ...], ...] = ((), (), (), ())


def _five(root: Path) -> None:
    with MdCG(root) as s:
        for i, node_id in enumerate(IDS, 1):
            s.add(Node(id=node_id, layer="knowledge", body=f"note number {i} about kafka"))
        s.compact_index()


def _origin(tmp_path: Path) -> Path:
    """A repository whose first commit holds the store and its ``.mdcg/`` (``git add -f``)."""
    repo = tmp_path / "src"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    _five(repo / "mem")
    git(repo, "add", "-A")
    git(repo, "add", "-f", "mem/.mdcg")
    git(repo, "commit", "-q", "-m", "oops: .mdcg committed")
    return repo


def _second_commit(repo: Path) -> None:
    """n1 edited, n6 added, compacted; only the ``.md`` files committed."""
    with MdCG(repo / "mem") as s:
        s.update("n1", body="ZEBRA edited n1")
        s.add(Node(id="n6", layer="knowledge", body="WOMBAT brand new memory"))
        s.compact_index()
    git(repo, "add", "mem/knowledge")
    git(repo, "commit", "-q", "-m", "md files only")


def _clone(repo: Path, name: str) -> Path:
    git(repo.parent, "clone", "-q", str(repo), name)
    return repo.parent / name


def test_a_clone_of_a_stale_committed_mdcg_reads_its_files(tmp_path: Path) -> None:
    repo = _origin(tmp_path)
    first = _clone(repo, "c1")  # the committed snapshot matches the files
    _second_commit(repo)
    second = _clone(repo, "c2")  # it does not: n1 edited, n6 added since
    with MdCG(second / "mem", auto_compact=None) as s:
        assert s.loaded_from == "files"
        assert (_ids(s, "WOMBAT"), _ids(s, "ZEBRA"), _ids(s, "kafka")) == ({"n6"}, {"n1"}, set(IDS[1:]))
        assert s.get("n6").body == "WOMBAT brand new memory"
        assert s.ids() == [*IDS, "n6"]
        assert _changes(s.sync()) == NO_CHANGES  # not every file `changed`
    for clone in (first, second):
        with MdCG(clone / "mem") as s:  # a writable handle's close compacts: this place's snapshot
            assert s.loaded_from == "files"
            assert _changes(s.sync()) == NO_CHANGES
        with MdCG(clone / "mem", auto_compact=None) as s:
            assert s.loaded_from == "snapshot"


def test_a_pull_after_untracking_tells_only_what_changed(tmp_path: Path) -> None:
    """The clone's own snapshot, once made, is followed as usual: a pull that changed one
    memory is told as that one change (before: every file ``changed``, n6 ``added``)."""
    repo = _origin(tmp_path)
    _second_commit(repo)
    clone = _clone(repo, "c")
    with MdCG(clone / "mem"):
        pass  # a writable open: its close writes this place's snapshot
    git(clone, "rm", "-r", "-q", "--cached", "mem/.mdcg")  # as init --git advises
    git(clone, "commit", "-q", "-m", "untrack .mdcg")
    with MdCG(repo / "mem", auto_compact=None) as s:
        s.update("n3", body="note number 3 about kafka, edited upstream")
    git(repo, "add", "mem/knowledge")
    git(repo, "commit", "-q", "-m", "n3 edited")
    git(clone, "pull", "-q", "--no-rebase", "--no-edit")
    with MdCG(clone / "mem", auto_compact=None) as s:
        assert s.loaded_from == "snapshot"
        assert _changes(s.sync()) == ((), ("n3",), (), ())
        assert _ids(s, "upstream") == {"n3"}


def _hook_warning(clone: Path) -> str:
    done = subprocess.run(
        ["sh", str(clone / ".git" / "hooks" / "post-merge"), "0"],
        cwd=clone,
        env=python_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr


def test_init_git_in_such_a_clone_warns_and_syncs(tmp_path: Path) -> None:
    repo = _origin(tmp_path)
    _second_commit(repo)
    clone = _clone(repo, "c")
    cli = [sys.executable, "-m", "md_cg.cli"]
    env = {**python_env(), "MDCG_ROOT": "", "COLUMNS": "200"}
    done = subprocess.run(
        [*cli, "init", "--git", "--root", "mem"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"store ready at {clone.resolve() / 'mem'} (6 nodes)"
    built = "in sync: the index was built from the files at open (6 memories); nothing changed since"
    assert lines[-1] == built
    tracked = git(clone, "ls-files", "--", "mem/.mdcg").stdout.splitlines()
    assert "mem/.mdcg/index.snapshot" in tracked and len(tracked) > merge.TRACKED_SHOWN
    _specs, head, advice = merge._tracked_words("mem")
    shown = [f"  {name}" for name in tracked[: merge.TRACKED_SHOWN]]
    expected = "\n".join([head, *shown, f"  and {len(tracked) - merge.TRACKED_SHOWN} more", advice]) + "\n"
    assert done.stderr == expected
    untrack = "git rm -r -q --cached -- ':(literal)mem/.mdcg' ':(exclude,literal)mem/.mdcg/synonyms.json'"
    assert untrack in advice
    assert _hook_warning(clone) == expected  # the hooks' words, from the same code
    search = subprocess.run(
        [*cli, "search", "WOMBAT", "--root", "mem"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert search.returncode == 0 and "n6" in search.stdout
    with MdCG(clone / "mem", auto_compact=None) as s:
        assert s.loaded_from == "snapshot"  # init saved this place's
    # nothing tracked: no warning, and init --git syncs the store
    plain = _clone(repo, "p")
    git(plain, "rm", "-r", "-q", "--cached", "mem/.mdcg")
    shutil.rmtree(plain / "mem" / ".mdcg")
    done = subprocess.run([*cli, "init", "--root", "mem"], cwd=plain, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    path = plain / "mem" / "knowledge" / "orphan" / "n2.md"
    path.write_text(path.read_text(encoding="utf-8").replace("about kafka", "about QUOKKA"), encoding="utf-8")
    done = subprocess.run(
        [*cli, "init", "--git", "--root", "mem"], cwd=plain, env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "sync: changed (1): n2"


def _cp_r(src: Path, dest: Path) -> None:
    subprocess.run(["cp", "-r", str(src), str(dest)], check=True)  # fresh mtimes, new inodes


def test_a_cp_r_copy_is_built_from_its_files_then_stamped(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _five(a)
    _cp_r(a, b)
    with MdCG(b) as s:
        assert s.loaded_from == "files"
        assert _ids(s, "kafka") == set(IDS)
        assert _changes(s.sync()) == NO_CHANGES  # before: changed (5)
    stamped = snapshot.vouchers(str(b))
    assert stamped is not None and list(stamped.values()) == [snapshot.identity(str(b))]
    with MdCG(b, auto_compact=None) as s:
        assert s.loaded_from == "snapshot"
    with MdCG(a, auto_compact=None) as s:  # the original is still its own
        assert s.loaded_from == "snapshot"
    path = b / "knowledge" / "orphan" / "n3.md"
    path.write_text(path.read_text(encoding="utf-8").replace("about kafka", "about kafka and QUOKKA"))
    with MdCG(b, auto_compact=None) as s:
        assert _changes(s.sync()) == ((), ("n3",), (), ())


def test_a_mdcg_restored_from_a_backup_beside_newer_files_is_refused(tmp_path: Path) -> None:
    a, backup = tmp_path / "a", tmp_path / "backup"
    _five(a)
    shutil.copytree(a / ".mdcg", backup)  # mtimes kept (cp -a): a consistent pair with its token
    with MdCG(a) as s:
        s.update("n1", body="ZEBRA edited n1")
        s.add(Node(id="n6", layer="knowledge", body="WOMBAT brand new memory"))
        s.compact_index()
    shutil.rmtree(a / ".mdcg")
    shutil.copytree(backup, a / ".mdcg")
    with MdCG(a, auto_compact=None) as s:
        assert s.loaded_from == "files"
        assert (_ids(s, "WOMBAT"), _ids(s, "ZEBRA")) == ({"n6"}, {"n1"})
        assert s.health().ok  # a copy is no damage: nothing to report


def test_a_read_only_open_of_a_copy_writes_nothing(tmp_path: Path) -> None:
    repo = _origin(tmp_path)
    _second_commit(repo)
    clone = _clone(repo, "c")
    root = clone / "mem"
    before = tree_listing(root)
    for _ in range(2):
        with MdCG(root, read_only=True) as s:
            assert s.loaded_from == "files"
            assert _ids(s, "WOMBAT") == {"n6"}
            assert s._engine.snapshot_problem is None
    assert tree_listing(root) == before
    assert {k: v for k, v in before.items() if k.startswith(".mdcg")}  # (the listing holds .mdcg/)


def test_a_store_moved_in_its_file_system_keeps_its_snapshot(tmp_path: Path) -> None:
    a = tmp_path / "a"
    _five(a)
    os.rename(a, tmp_path / "moved")  # `mv`: the same files
    with MdCG(tmp_path / "moved", auto_compact=None) as s:
        assert s.loaded_from == "snapshot"


def _calls(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[tuple[object, ...]]:
    """The calls of ``module.name`` from now on (each one's arguments)."""
    calls: list[tuple[object, ...]] = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *args, **kw: calls.append(args) or real(*args, **kw))
    return calls


def test_a_copy_that_kept_the_mtimes_keeps_its_snapshot_then_is_stamped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cp -a``, ``rsync -a``, a backup restored whole: every file as the snapshot indexed
    it (path, mtime, size), so the snapshot is used after one stat walk, as in its place."""
    a, b = tmp_path / "a", tmp_path / "b"
    _five(a)
    shutil.copytree(a, b)  # copy2: mtimes kept
    scans = _calls(monkeypatch, engine_mod.index, "scan_files")
    with MdCG(b, read_only=True) as s:
        assert (s.loaded_from, _ids(s, "kafka"), len(scans)) == ("snapshot", set(IDS), 1)
    with MdCG(b) as s:  # a writable handle's close compacts: stamped for this place
        assert s.loaded_from == "snapshot"
        assert _changes(s.sync()) == NO_CHANGES
    with MdCG(b, auto_compact=None) as s:
        assert (s.loaded_from, len(scans)) == ("snapshot", 3)  # (the sync's scan)
    with MdCG(a, auto_compact=None) as s:  # an ordinary open walks no file
        assert (s.loaded_from, len(scans)) == ("snapshot", 3)
    # one file not as indexed (edited in the copy, same size): built from the files
    c = tmp_path / "c"
    shutil.copytree(a, c)
    path = c / "knowledge" / "orphan" / "n4.md"
    path.write_text(path.read_text(encoding="utf-8").replace("kafka", "QUOKA"), encoding="utf-8")
    with MdCG(c, auto_compact=None) as s:
        assert (s.loaded_from, _ids(s, "QUOKA")) == ("files", {"n4"})


def test_an_earlier_versions_token_file_is_looked_into_then_stamped(tmp_path: Path) -> None:
    a = tmp_path / "a"
    _five(a)
    token_file = a / ".mdcg" / "index.token"
    token = token_file.read_text().split()[0]
    token_file.write_text(token)  # as versions before session 38 wrote it: no stamp
    before = tree_listing(a)
    with MdCG(a, read_only=True) as s:  # the files are as indexed: used
        assert (s.loaded_from, s._engine.snapshot_problem) == ("snapshot", None)
    assert tree_listing(a) == before
    with MdCG(a) as s:  # a writable handle compacts on close: stamped
        assert s.loaded_from == "snapshot"
    assert snapshot.vouchers(str(a)) not in ({token: None}, None)
    token = token_file.read_text().split()[0]
    token_file.write_text(token)
    path = a / "knowledge" / "orphan" / "n2.md"
    path.write_text(path.read_text(encoding="utf-8") + "more\n", encoding="utf-8")
    with MdCG(a, read_only=True) as s:  # a file changed since: built from the files
        assert (s.loaded_from, s._engine.snapshot_problem) == ("files", None)


@pytest.mark.parametrize("how", ["copy", "foreign"])
def test_a_refused_snapshot_is_not_rebuilt_at_every_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Before, a handle whose open refused the snapshot (a foreign one) rebuilt the index
    from the files at each refresh (each second of reads): the refused file's identity
    differed from its (absent) snapshot's, so it 'followed' it, and refused it again."""
    a, b = tmp_path / "a", tmp_path / "b"
    _five(a)
    if how == "copy":
        _cp_r(a, b)
    else:
        with MdCG(b) as s:
            s.add(Node(id="other", layer="self", body="another store"))
        shutil.copy2(a / ".mdcg" / "index.snapshot", b / ".mdcg" / "index.snapshot")
    builds = _calls(monkeypatch, engine_mod.coldbuild, "build_from_files")
    s = MdCG(b, refresh_interval=0.0, auto_compact=None)
    try:
        want = set(IDS) if how == "copy" else {"other"}
        for _ in range(3):
            assert set(s.ids()) == want
        assert len(builds) == 1
        with MdCG(b, auto_compact=None) as w:  # another handle of this place compacts
            w.compact_index()  # (its open built the index from the files too)
        built = len(builds)
        time.sleep(0.01)
        assert set(s.ids()) == want
        assert (s.loaded_from, len(builds)) == ("snapshot", built)
    finally:
        s.close()
