"""A memory md-cg itself moves into a folder this process may not read (session 36).

Attack a5 of session 35 (docs/reliability.md row 20): ``m1``, in the snapshot in a folder
this process may read, is moved by another process -- ``move`` to another layer, or
``archive`` -- into a folder this process may not read (one commit: a put at the new path,
a delete of the old). Following the log kept the snapshot's entry at the old path and
noted the memory moved by hand (the delete of the old path, last in the line, was taken
for a ``forget``): ``get`` said its file was moved or deleted outside md-cg and to run
``sync``, the sync told ``deleted: m1`` and logged that, and ``compact`` wrote a snapshot
without it -- every process, one that may read the folder too, then missed it.

Now it is kept as the log says, as a memory written there since the last compaction is
(session 35): held unread at the path the log names, named by a read's permission error,
a health finding and a sync's ``malformed``; no deletion told; the compaction refused.

Permission bits do not bind root: the children run without the capabilities that bypass
them (``test_unreadable_s35.py``'s helpers).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_unreadable_s35 import REFUSED, UNREAD, _drop_dac_override, _env, _mdcg, posix_only

from md_cg import MdCG, fsops, index

#: kind -> (the folder made unreadable, where m1's file lands)
WHERE = {
    "move": ("knowledge", "knowledge/orphan/m1.md"),
    "archive": ("archive", "archive/contextual/m1.md"),
    "rename": ("knowledge", "knowledge/orphan/r1.md"),
}

_FOLLOWER = """
import json, sys, warnings
from md_cg import MdCG, fsops, index
from md_cg.errors import MalformedNodeFileError, NodeNotFoundError
root = sys.argv[1]
warnings.simplefilter("ignore")
out = {}
with MdCG(root, auto_compact=None) as s:
    eng = s._engine
    print("ready", flush=True)
    input()  # another process moves m1 meanwhile, then makes its folder unreadable
    out["changed"] = sorted(s.refresh())
    out["entries"] = sorted(eng.state.entries)
    out["unread"] = dict(eng.state.unread)
    out["noted"] = sorted(eng.hand_after)
    out["ids"] = sorted(s.ids(include_archived=True))
    out["search"] = sorted(r.id for r in s.search("nginx", record=False)[0])
    out["findings"] = [[f.kind, f.path] for f in s.health().findings if f.kind != "unsafe_path"]
    for name in ("m1", "r1"):
        try:
            s.get(name, include_archived=True)
            out[name] = "read"
        except (MalformedNodeFileError, NodeNotFoundError) as exc:
            out[name] = f"{type(exc).__name__}: {exc}"
    report = s.sync()
    out["sync"] = [list(report.added), list(report.deleted), [list(m) for m in report.malformed]]
    try:
        s.compact_index()
        out["compact"] = "written"
    except PermissionError as exc:
        out["compact"] = str(exc)
print(json.dumps(out))
"""


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder the children may enter; every mode restored before it is removed."""
    folder = Path(tempfile.mkdtemp(prefix="mdcg-unread-move-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for sub in ("knowledge", "archive"):
            if (folder / "m" / sub).exists():
                (folder / "m" / sub).chmod(0o755)
        shutil.rmtree(folder)


def _store(root: Path) -> bytes:
    """``m1`` (about nginx) and ``k0`` in ``contextual/``, both in the snapshot; its bytes."""
    with MdCG(root) as s:
        s.add(id="m1", body="m1 about nginx", layer="contextual")
        s.add(id="k0", body="k0 about nginx", layer="contextual")
        s.compact_index()
    return (root / ".mdcg" / "index.snapshot").read_bytes()


def _md_cg_moves(root: Path, kind: str) -> None:
    """Another process (one that may read every folder) moves m1 as ``kind`` says."""
    with MdCG(root, auto_compact=None) as s:
        if kind == "move":
            s.move("m1", "knowledge")
        elif kind == "archive":
            s.archive("m1")
        else:
            s.rename("m1", "r1", layer="knowledge")


def _follow(root: Path, between: Any) -> dict[str, Any]:
    """Open the store in a child where the bits bind, run ``between()`` while it waits,
    then let it follow the log and report (:data:`_FOLLOWER`)."""
    extra: dict[str, Any] = {"preexec_fn": _drop_dac_override} if os.geteuid() == 0 else {}
    child = subprocess.Popen(
        [sys.executable, "-c", _FOLLOWER, str(root)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(), cwd="/", **extra,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        between()
        out, err = child.communicate("\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def _denied(rel: str) -> str:
    return f"MalformedNodeFileError: {rel}: cannot be read: permission denied"


def _refused(root: Path, node_id: str, rel: str) -> str:
    return (
        f"[Errno 13] cannot compact the store at {root}: 1 memory the index log names is in files "
        f"this process may not read, e.g. {rel} ({node_id}); a snapshot would drop it. Compact as "
        "a user who may read them"
    )


@posix_only
@pytest.mark.parametrize("kind", ["move", "archive", "rename"])
def test_a_memory_md_cg_moves_into_a_folder_it_may_not_read_is_kept(base: Path, kind: str) -> None:
    """A process following the log: ``move`` and ``archive`` left ``m1`` at its old path,
    noted moved by hand; ``get`` said moved or deleted outside md-cg, ``sync`` told
    ``deleted: m1`` and the compaction wrote a snapshot without it (the readable process
    after: ``k0`` alone). Now it is held unread at the new path, as a ``rename`` (a new
    id) already was; the snapshot is left as it was, and with the folder readable again
    every memory reads, no change told."""
    root = base / "m"
    snap = _store(root)
    folder, rel = WHERE[kind]
    new_id = "r1" if kind == "rename" else "m1"

    def between() -> None:
        _md_cg_moves(root, kind)
        (root / folder).chmod(0)

    result = _follow(root, between)
    assert result == {
        "changed": ["m1"],
        "entries": ["k0"],
        "unread": {new_id: rel},
        "noted": [],
        "ids": ["k0"],
        "search": ["k0"],
        "findings": [["unreadable_file", rel]],
        "m1": _denied(rel) if new_id == "m1" else "NodeNotFoundError: no node with id 'm1' in this store",
        "r1": _denied(rel) if new_id == "r1" else "NodeNotFoundError: no node with id 'r1' in this store",
        "sync": [[], [], [[rel, "cannot be read: permission denied"]]],
        "compact": _refused(root, new_id, rel),
    }
    assert (root / ".mdcg" / "index.snapshot").read_bytes() == snap
    (root / folder).chmod(0o755)
    with MdCG(root, auto_compact=None) as s:
        assert sorted(s.ids(include_archived=True)) == sorted(["k0", new_id])
        assert s.get(new_id, include_archived=True).body == "m1 about nginx"
        assert s._engine.state.entries[new_id].path == rel
        report = s.sync()
        assert (report.added, report.deleted, report.changed) == ((), (), ())
        s.compact_index()
    with MdCG(root, auto_compact=None) as s:  # the snapshot now holds it where the log put it
        assert (s._engine.loaded_from, s._engine.state.entries[new_id].path) == ("snapshot", rel)


@posix_only
def test_the_cli_opening_after_the_move(base: Path) -> None:
    """``mdcg`` run after the move (the snapshot, then the log): ``sync`` told ``deleted
    (1): m1`` and ``compact`` wrote a snapshot without it; ``get m1`` said its file
    ``contextual/m1.md`` was moved or deleted outside md-cg. Now as for a memory written
    there since the last compaction (test_unreadable_s35.py)."""
    root = base / "m"
    snap = _store(root)
    _md_cg_moves(root, "move")
    (root / "knowledge").chmod(0)
    if os.geteuid() != 0 and os.access(root / "knowledge", os.R_OK):
        pytest.skip("mode 000 does not bind this user")
    warning = (
        f"warning: {root}: 1 memory written since the last compaction is in files this process "
        "may not read (permission denied), e.g. knowledge/orphan/m1.md (m1): kept as the index "
        "log says, but not listed or searched, and a read of one fails; run md-cg as a user who "
        "may read them\n"
    )
    assert _mdcg(root, "get", "m1") == (
        2,
        "",
        warning + "error: knowledge/orphan/m1.md: cannot be read: permission denied\n",
    )
    rc, out, err = _mdcg(root, "health", "--json")
    assert err == warning
    report = json.loads(out)
    assert report["nodes"] == 1
    assert [(f["kind"], f["path"], f["detail"]) for f in report["findings"]] == [
        ("unsafe_path", "knowledge", f"{REFUSED}; ignored"),
        ("unreadable_file", "knowledge/orphan/m1.md", UNREAD),
    ]
    assert _mdcg(root, "sync") == (
        1,
        "malformed (1): knowledge/orphan/m1.md: cannot be read: permission denied\n"
        f"refused (never followed) (1): knowledge: {REFUSED}\n",
        warning,
    )
    rc, out, err = _mdcg(root, "compact")
    assert (rc, out) == (2, "")
    assert err == warning + (
        f"error: cannot compact the store at {root}: 1 memory the index log names is in files "
        "this process may not read, e.g. knowledge/orphan/m1.md (m1); a snapshot would drop it. "
        "Compact as a user who may read them\n"
    )
    assert (root / ".mdcg" / "index.snapshot").read_bytes() == snap
    (root / "knowledge").chmod(0o755)
    assert _mdcg(root, "sync") == (0, "in sync: nothing changed\n", "")
    with MdCG(root, auto_compact=None) as s:
        assert sorted(s.ids()) == ["k0", "m1"]
        assert s.get("m1").layer == "knowledge"


@posix_only
def test_a_file_removed_by_hand_beside_an_unreadable_folder_is_still_told_deleted(base: Path) -> None:
    """No regression: with ``knowledge/`` unreadable (``m1`` moved there by md-cg), ``k0``'s
    file removed by hand from ``contextual/`` (readable) is told ``deleted`` by the sync
    and left out of the snapshot, while ``m1`` is kept."""
    root = base / "m"
    snap = _store(root)

    def between() -> None:
        _md_cg_moves(root, "move")
        (root / "knowledge").chmod(0)
        (root / "contextual" / "k0.md").unlink()

    result = _follow(root, between)
    rel = "knowledge/orphan/m1.md"
    assert result == {
        "changed": ["m1"],
        "entries": ["k0"],  # a follow of the log does not look at k0: the search does
        "unread": {"m1": rel},
        "noted": [],
        "ids": ["k0"],
        "search": [],
        "findings": [["unreadable_file", rel]],
        "m1": _denied(rel),
        "r1": "NodeNotFoundError: no node with id 'r1' in this store",
        "sync": [[], ["k0"], [[rel, "cannot be read: permission denied"]]],
        "compact": _refused(root, "m1", rel),
    }
    assert (root / ".mdcg" / "index.snapshot").read_bytes() == snap
    (root / "knowledge").chmod(0o755)
    with MdCG(root, auto_compact=None) as s:
        assert sorted(s.ids()) == ["m1"]
        report = s.sync()
        assert (report.added, report.deleted) == ((), ())


@posix_only
def test_a_memory_moved_out_again_then_removed_by_hand_is_told_deleted(base: Path) -> None:
    """Attack a1 of session 36: md-cg moves ``m1`` into ``knowledge/`` and back out, then a
    person removes its file; ``knowledge/`` is unreadable. The last commit naming ``m1``
    puts it in ``contextual/`` (readable, its file gone): it is gone by hand, told deleted
    -- not held unread at the path it was moved out of (a put of the move back once
    outweighed its delete of that path: ``get`` said permission denied and compaction
    stayed refused)."""
    root = base / "m"
    _store(root)

    def between() -> None:
        with MdCG(root, auto_compact=None) as s:
            s.move("m1", "knowledge")
            s.move("m1", "contextual")
        (root / "contextual" / "m1.md").unlink()
        (root / "knowledge").chmod(0)

    result = _follow(root, between)
    gone = (
        "NodeNotFoundError: no node with id 'm1' in this store (its file contextual/m1.md was "
        "moved or deleted outside md-cg since the last sync; run `mdcg sync` (MdCG.sync()) to "
        "take that in, then try again)"
    )
    assert result == {
        "changed": ["m1"],
        "entries": ["k0"],
        "unread": {},
        "noted": ["m1"],
        "ids": ["k0"],
        "search": ["k0"],
        "findings": [],
        "m1": gone,
        "r1": "NodeNotFoundError: no node with id 'r1' in this store",
        "sync": [[], ["m1"], []],
        "compact": "written",
    }


@posix_only
def test_after_a_chain_of_moves_the_unread_path_is_the_last_one_written(base: Path) -> None:
    """Attack a1 of session 36: ``m1`` moved to ``knowledge/``, archived, unarchived, with
    ``knowledge/`` and ``archive/`` unreadable: held unread at ``knowledge/orphan/m1.md``,
    where the last commit put it (was: the archive path, the first denied path met)."""
    root = base / "m"
    snap = _store(root)

    def between() -> None:
        with MdCG(root, auto_compact=None) as s:
            s.move("m1", "knowledge")
            s.archive("m1")
            s.unarchive("m1")
        (root / "knowledge").chmod(0)
        (root / "archive").chmod(0)

    result = _follow(root, between)
    rel = "knowledge/orphan/m1.md"
    assert (result["unread"], result["noted"], result["m1"]) == ({"m1": rel}, [], _denied(rel))
    assert (result["findings"], result["sync"]) == (
        [["unreadable_file", rel]],
        [[], [], [[rel, "cannot be read: permission denied"]]],
    )
    assert result["compact"] == _refused(root, "m1", rel)
    assert (root / ".mdcg" / "index.snapshot").read_bytes() == snap


# -- unit level: EACCES simulated ---------------------------------------------------------


def test_resolve_drops_the_entry_of_an_id_moved_where_it_may_not_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:func:`md_cg.index.resolve_ids` of an id with an entry whose file is gone, the log
    naming a path in a folder that gives EACCES: held unread at that path and the entry
    dropped (was: the entry kept, pointing at no file, beside the unread note)."""
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        s.add(id="x1", body="a note", layer="contextual")
        state = s._engine.state
        s.move("x1", "knowledge")
        rel = s.path_of("x1").relative_to(root).as_posix()
    state.put(dataclasses.replace(state.entries["x1"], path="contextual/x1.md", layer="contextual"), None)
    real = fsops.lstat

    def denied(r: str, p: str) -> os.stat_result:
        if p.startswith("knowledge/"):
            raise PermissionError(13, "Permission denied", p)
        return real(r, p)

    monkeypatch.setattr(fsops, "lstat", denied)
    assert index.resolve_ids(str(root), state, {"x1": [rel, "contextual/x1.md"]}) == ["x1"]
    assert (dict(state.unread), list(state.entries)) == ({"x1": rel}, [])
    monkeypatch.setattr(fsops, "lstat", real)
    assert index.resolve_ids(str(root), state, {"x1": [rel]}) == ["x1"]
    assert (dict(state.unread), state.entries["x1"].path) == ({}, rel)
