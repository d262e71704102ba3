"""A memory the index log names whose file this process may not read (session 35, review rH).

docs/reliability.md row 20: what the index holds below a folder md-cg may not read is kept
as it is, neither confirmed nor dropped. That held for the memories of the snapshot; one
written since the last compaction (only in the log) was dropped, as gone, by every read
that followed the log: ``list`` and ``search`` left it out without a word, ``health``
counted an empty store, ``get`` said its file was moved or deleted outside md-cg and to
run ``sync``, which told it ``deleted`` (and logged that), and a ``compact`` wrote a
snapshot without it -- every other process then missed it until its own sync.

Permission bits do not bind root: as root, the children run without the capabilities
that bypass them (as ``test_security.py`` does); as another user the bits bind already.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import python_env

import md_cg
from md_cg import MdCG, engine, fsops, index
from md_cg.errors import MalformedNodeFileError

UNREAD = (
    "cannot be read: permission denied; a memory written since the last compaction: kept as the index "
    "log says, not indexed (neither confirmed nor dropped); run md-cg as a user who may read it"
)
WARNING = (
    "warning: {root}: 1 memory written since the last compaction is in files this process may not "
    "read (permission denied), e.g. knowledge/orphan/new1.md (new1): kept as the index log says, "
    "but not listed or searched, and a read of one fails; run md-cg as a user who may read them"
)
REFUSED = "a folder md-cg may not read (permission denied); its memories are not scanned"

posix_only = pytest.mark.skipif(
    not hasattr(os, "geteuid") or (os.geteuid() == 0 and not sys.platform.startswith("linux")),
    reason="POSIX permissions (as root: Linux capabilities)",
)


def _drop_dac_override() -> None:
    """In a root child before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
    bounding set, so that mode 000 binds it."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _env() -> dict[str, str]:
    """The children's environment: the md-cg this test imported first on the path."""
    env = python_env()
    env["PYTHONPATH"] = os.pathsep.join([str(Path(md_cg.__file__).parents[1]), env["PYTHONPATH"]])
    return env


def _child(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``args`` after ``python`` where permission bits bind."""
    extra: dict[str, Any] = {"preexec_fn": _drop_dac_override} if os.geteuid() == 0 else {}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True, text=True, timeout=120, env=_env(), check=False, cwd="/", **extra,
    )  # fmt: skip


def _mdcg(root: Path, *args: str) -> tuple[int, str, str]:
    """``mdcg --root root args...`` where permission bits bind: (status, stdout, stderr)."""
    out = _child(["-c", "from md_cg.launch import main; main()", "--root", str(root), *args])
    return out.returncode, out.stdout, out.stderr


@pytest.fixture
def store() -> Iterator[Path]:
    """``old1`` in the snapshot, ``new1`` written since (only in the log), both in
    ``knowledge/``, which is then of mode 000 (restored before the folder is removed)."""
    base = Path(tempfile.mkdtemp(prefix="mdcg-unread-"))
    base.chmod(0o755)
    root = base / "m"
    with MdCG(root) as s:
        s.add(id="old1", body="old note about nginx")
        s.compact_index()
    with MdCG(root, auto_compact=None) as s:
        s.add(id="new1", body="new note about nginx")
    (root / "knowledge").chmod(0)
    try:
        if os.geteuid() != 0 and os.access(root / "knowledge", os.R_OK):
            pytest.skip("mode 000 does not bind this user")
        yield root
    finally:
        (root / "knowledge").chmod(0o755)
        shutil.rmtree(base)


@posix_only
def test_reads_keep_a_logged_memory_in_a_folder_it_may_not_read(store: Path) -> None:
    """list, search, health and get as a user who may not read ``knowledge/``: ``new1`` was
    left out by all (``health``: ``1 nodes``, no word of it) and ``get new1`` said its file
    was moved or deleted outside md-cg. Now it is named by a warning, a health finding and
    the permission error of a read, as ``old1`` (in the snapshot) is."""
    warning = WARNING.format(root=store) + "\n"
    rc, out, err = _mdcg(store, "list", "--json")
    assert (rc, err) == (0, warning)
    assert [i["id"] for i in json.loads(out)["items"]] == ["old1"]
    rc, out, err = _mdcg(store, "search", "nginx", "--no-record", "--json")
    assert (rc, err) == (0, warning)
    assert [r["id"] for r in json.loads(out)["results"]] == ["old1"]
    rc, out, err = _mdcg(store, "health", "--json")
    assert err == warning
    report = json.loads(out)
    assert report["nodes"] == 1
    assert [(f["kind"], f["path"], f["detail"]) for f in report["findings"]] == [
        ("unsafe_path", "knowledge", f"{REFUSED}; ignored"),
        ("unreadable_file", "knowledge/orphan/new1.md", UNREAD),
    ]
    assert _mdcg(store, "get", "new1") == (
        2,
        "",
        warning + "error: knowledge/orphan/new1.md: cannot be read: permission denied\n",
    )
    assert _mdcg(store, "get", "old1") == (
        2,
        "",
        warning + "error: knowledge/orphan/old1.md: cannot be read: permission denied\n",
    )


@posix_only
def test_sync_and_compact_neither_delete_nor_drop_it(store: Path) -> None:
    """A user who may write ``.mdcg/`` but not read ``knowledge/`` followed the advice: its
    ``sync`` told ``deleted (1): new1`` (and logged that), and its ``compact`` wrote a
    snapshot without ``new1`` -- a process that may read it then missed it until its own
    sync (``added (1): new1``). Now the sync names the file it may not read and deletes
    nothing, and the compaction is refused, writing nothing."""
    warning = WARNING.format(root=store) + "\n"
    snap = store / ".mdcg" / "index.snapshot"
    snap_bytes = snap.read_bytes()
    assert _mdcg(store, "sync") == (
        1,
        "malformed (1): knowledge/orphan/new1.md: cannot be read: permission denied\n"
        f"refused (never followed) (1): knowledge: {REFUSED}\n",
        warning,
    )
    rc, out, err = _mdcg(store, "compact")
    assert (rc, out) == (2, "")
    assert err == warning + (
        f"error: cannot compact the store at {store}: 1 memory the index log names is in files "
        "this process may not read, e.g. knowledge/orphan/new1.md (new1); a snapshot would drop "
        "it. Compact as a user who may read them\n"
    )
    assert snap.read_bytes() == snap_bytes
    (store / "knowledge").chmod(0o755)
    with MdCG(store, auto_compact=None) as s:
        assert sorted(s.ids()) == ["new1", "old1"]
        assert s.get("new1").body == "new note about nginx"
        report = s.sync()
        assert (report.added, report.deleted, report.changed) == ((), (), ())
    # the folder readable again, its reader takes the memory in as it was written: no change told
    rc, out, err = _mdcg(store, "sync")
    assert (rc, out, err) == (0, "in sync: nothing changed\n", "")


_LIBRARY = """
import json, os, sys, warnings
from md_cg import MdCG
from md_cg.errors import MalformedNodeFileError, NodeNotFoundError
root = sys.argv[1]
warnings.simplefilter("ignore")
out = {}
with MdCG(root, auto_compact=None) as s:
    eng = s._engine
    out["unread"] = dict(getattr(eng.state, "unread", {}))
    out["noted"] = sorted(eng.hand_after)
    out["search"] = sorted(r.id for r in s.search("nginx", record=False)[0])
    out["dropped"] = eng.drop_missing(["old1"])
    for name in ("new1", "old1"):
        try:
            s.get(name)
            out[name] = "read"
        except (MalformedNodeFileError, NodeNotFoundError) as exc:
            out[name] = f"{type(exc).__name__}: {exc}"
    try:
        s.update("new1", body="changed")
        out["update"] = "written"
    except (MalformedNodeFileError, NodeNotFoundError) as exc:
        out["update"] = f"{type(exc).__name__}: {exc}"
    print("ready", flush=True)
    input()  # another process deletes new1 meanwhile (no compaction)
    s.refresh()
    out["after_delete"] = dict(getattr(eng.state, "unread", {}))
    print(json.dumps(out))
"""


@posix_only
def test_library_reads_and_a_forget_followed(store: Path) -> None:
    """The library: the id is held in ``unread`` (not noted gone for a sync to tell), a
    search and ``drop_missing`` keep ``old1`` (``os.path.lexists`` says False for a path
    in a folder it may not read), a read or an update of ``new1`` raises the permission
    error naming its file, and a ``delete`` of it by a process that may read it is
    followed: it goes from ``unread``."""
    extra: dict[str, Any] = {"preexec_fn": _drop_dac_override} if os.geteuid() == 0 else {}
    child = subprocess.Popen(
        [sys.executable, "-c", _LIBRARY, str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(), cwd="/", **extra,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        # the child has read its state and waits: delete new1 here, where the bits do not bind
        # (as another user, the folder is made readable for it, then not again)
        if os.geteuid() != 0:
            (store / "knowledge").chmod(0o755)
        with MdCG(store, auto_compact=None) as s:
            s.delete("new1")
        (store / "knowledge").chmod(0)
        out, err = child.communicate("\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    result = json.loads(out)
    denied = "MalformedNodeFileError: knowledge/orphan/{}.md: cannot be read: permission denied"
    assert result == {
        "unread": {"new1": "knowledge/orphan/new1.md"},
        "noted": [],
        "search": ["old1"],
        "dropped": [],
        "new1": denied.format("new1"),
        "old1": denied.format("old1"),
        "update": denied.format("new1"),
        "after_delete": {},
    }


# -- unit level: EACCES simulated ---------------------------------------------------------


def test_resolve_keeps_an_id_whose_file_it_may_not_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:func:`md_cg.index.resolve_ids` of an id the log names at a path whose folder gives
    EACCES: kept in ``unread`` (was dropped, as gone); a look that reads it takes it in."""
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add(id="x1", body="a note")
        rel = s.path_of("x1").relative_to(root).as_posix()
    state = index.IndexState()
    real = fsops.lstat

    def denied(r: str, p: str) -> os.stat_result:
        if p.startswith("knowledge/"):
            raise PermissionError(13, "Permission denied", p)
        return real(r, p)

    monkeypatch.setattr(fsops, "lstat", denied)
    assert index.resolve_ids(str(root), state, {"x1": [rel]}) == []
    assert (dict(state.unread), list(state.entries)) == ({"x1": rel}, [])
    monkeypatch.setattr(fsops, "lstat", real)
    assert index.resolve_ids(str(root), state, {"x1": [rel]}) == ["x1"]
    assert (dict(state.unread), list(state.entries)) == ({}, ["x1"])


def test_file_gone_is_false_for_a_path_it_may_not_look_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:func:`md_cg.engine.file_gone` (``drop_missing``'s look): EACCES is not "gone"
    (``os.path.lexists`` said so, and a search dropped the hit); ENOENT is."""
    (tmp_path / "here.md").write_text("x", encoding="utf-8")
    assert not engine.file_gone(str(tmp_path), "here.md")
    assert engine.file_gone(str(tmp_path), "gone.md")
    real = os.lstat

    def denied(path: Any, *args: Any, **kw: Any) -> os.stat_result:
        if str(path).endswith("locked/n.md"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kw)

    monkeypatch.setattr(os, "lstat", denied)
    assert not engine.file_gone(str(tmp_path), "locked/n.md")
    assert not os.path.lexists(str(tmp_path / "locked/n.md"))  # what the look was before


def test_a_read_of_an_unread_id_raises_the_permission_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:func:`md_cg.engine.dropped_file` of an id in ``unread`` whose file still gives
    EACCES: named, the permission error of its file; not named (a scoped caller), a
    not-found error saying why."""
    real = fsops.lstat

    def denied(r: str, p: str) -> os.stat_result:
        if p.startswith("knowledge/orphan/z1"):
            raise PermissionError(13, "Permission denied", p)
        return real(r, p)

    monkeypatch.setattr(fsops, "lstat", denied)
    with MdCG(tmp_path / "m", auto_compact=None) as s:
        eng = s._engine
        eng.state.unread["z1"] = "knowledge/orphan/z1.md"
        with pytest.raises(MalformedNodeFileError) as err:
            engine.dropped_file(eng, "z1", named=True)
        assert str(err.value) == "knowledge/orphan/z1.md: cannot be read: permission denied"
        lost = engine.dropped_file(eng, "z1", named=False)
        assert lost is not None and str(lost) == (
            "no node with id 'z1' in this store (its file cannot be read by this process "
            "(permission denied); run md-cg as a user who may read it)"
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(PermissionError) as perm:
                s.compact_index()
        assert "e.g. knowledge/orphan/z1.md (z1); a snapshot would drop it" in str(perm.value)
        eng.state.unread.clear()


_STALE = """
import json, os, sys, warnings
from md_cg import MdCG
from md_cg.errors import MalformedNodeFileError, NodeNotFoundError
root = sys.argv[1]
warnings.simplefilter("ignore")
out = {}
with MdCG(root, auto_compact=None) as s:
    out["unread"] = dict(s._engine.state.unread)
    print("ready", flush=True)
    input()  # the folder is readable again and new1.md removed by hand meanwhile
    try:
        s.get("new1")
        out["get"] = "read"
    except (MalformedNodeFileError, NodeNotFoundError) as exc:
        out["get"] = f"{type(exc).__name__}: {exc}"
    out["after_get"] = dict(s._engine.state.unread)
    s.compact_index()
    out["compacted"] = True
    s.add(id="new1", body="added again")
    out["added"] = s.get("new1").body
print(json.dumps(out))
"""


@posix_only
def test_an_unread_id_whose_file_goes_is_unread_no_more(store: Path) -> None:
    """Attack a5: once noted unread, a file removed by hand after its folder became
    readable again stayed "permission denied" for the handle's life -- `get` said so,
    `compact_index` was refused, an `add` of the id refused. It is looked at again."""
    extra: dict[str, Any] = {"preexec_fn": _drop_dac_override} if os.geteuid() == 0 else {}
    child = subprocess.Popen(
        [sys.executable, "-c", _STALE, str(store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(), cwd="/", **extra,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        (store / "knowledge").chmod(0o755)
        (store / "knowledge" / "orphan" / "new1.md").unlink()
        out, err = child.communicate("\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert json.loads(out) == {
        "unread": {"new1": "knowledge/orphan/new1.md"},
        "get": "NodeNotFoundError: no node with id 'new1' in this store",
        "after_get": {},
        "compacted": True,
        "added": "added again",
    }
