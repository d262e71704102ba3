"""A snapshot the store did not write last is refused (review session 25, D1).

Before, an older snapshot restored from a backup of ``.mdcg/`` (or another
store's, copied in) was trusted: the memories written after it were missing
from every read, and a plain ``add`` of such an id wrote a second file of it.
Every snapshot now carries a random token, written beside it as
``.mdcg/index.token``; a snapshot holding another token is not used, and the
index is built from the files.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from stresslib import stress

from md_cg import MdCG, Node, snapshot
from md_cg.errors import DuplicateIdError


def _store(root: Path, ids: list[str], domain: str) -> None:
    with MdCG(root) as s:
        s.add_many(
            [Node(id=i, layer="knowledge", tags=[f"domain:{domain}"], body=f"memory {i}") for i in ids]
        )


def _files_named(root: Path, node_id: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(f"{node_id}.md"))


def test_an_older_snapshot_restored_from_a_backup_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, [f"a{i}" for i in range(5)], "old")
    backup = (root / ".mdcg" / "index.snapshot").read_bytes()
    with MdCG(root) as s:
        s.add(Node(id="late", layer="knowledge", tags=["domain:new"], body="the late memory about kiwis"))
    with MdCG(root) as s:
        s.compact_index()  # the shard holding `late` is folded in and removed
    (root / ".mdcg" / "index.snapshot").write_bytes(backup)
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == "files"
        assert s.ids() == ["a0", "a1", "a2", "a3", "a4", "late"]
        assert s.search("kiwis")[0][0].id == "late"
        damage = [f for f in s.health().findings if f.kind == "log_damage"]
        assert [(f.path, f.detail.split(";")[0]) for f in damage] == [
            (".mdcg/index.snapshot", f"the index snapshot is {snapshot.NOT_THIS_STORES}")
        ]
        with pytest.raises(DuplicateIdError, match=r"knowledge/cond_new_[0-9a-f]{8}/late\.md"):
            s.add(Node(id="late", layer="knowledge", tags=["domain:other"], body="a second late"))
        s.compact_index()
    (only,) = _files_named(root, "late")
    assert only.startswith("knowledge/cond_new_")
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot"
        assert s.ids() == ["a0", "a1", "a2", "a3", "a4", "late"]


def test_another_stores_snapshot_copied_in_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _store(a, ["a1", "a2"], "alpha")
    _store(b, ["b1", "b2", "b3"], "beta")
    shutil.copy2(b / ".mdcg" / "index.snapshot", a / ".mdcg" / "index.snapshot")
    with MdCG(a, auto_compact=None) as s:
        assert s.loaded_from == "files"
        assert s.ids() == ["a1", "a2"]
        with pytest.raises(DuplicateIdError):
            s.add(Node(id="a1", layer="knowledge", tags=["domain:gamma"], body="again"))
    (only,) = _files_named(a, "a1")
    assert only.startswith("knowledge/cond_alpha_")


def test_a_store_of_an_earlier_version_without_tokens_still_opens_from_its_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, ["n1", "n2"], "d")
    snap = snapshot.load(str(root))
    assert snap is not None and snap.token is not None
    data = snapshot.encode(snap.state, snap.offsets, snap.generation, None)
    (root / ".mdcg" / "index.snapshot").write_bytes(data)
    (root / ".mdcg" / "index.token").unlink()
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == "snapshot"
        assert s.ids() == ["n1", "n2"]
    # a token file with a snapshot that has none: the snapshot predates the token, refused
    (root / ".mdcg" / "index.token").write_text("0" * 32)
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == "files"
        assert s.ids() == ["n1", "n2"]


def test_an_open_between_a_compactions_two_writes_waits_for_the_token(tmp_path: Path) -> None:
    """A compaction writes the snapshot, then its token: an open that reads the new
    snapshot before the new token loads again instead of building from the files."""
    root = tmp_path / "m"
    _store(root, ["n1", "n2"], "d")
    token = (root / ".mdcg" / "index.token").read_text()
    (root / ".mdcg" / "index.token").write_text("f" * 32)  # a token file not naming it yet
    timer = threading.Timer(0.01, lambda: (root / ".mdcg" / "index.token").write_text(token))
    timer.start()
    try:
        with MdCG(root, auto_compact=None) as s:
            assert s.loaded_from == "snapshot"
            assert s.ids() == ["n1", "n2"]
    finally:
        timer.join()


def test_opens_beside_a_compacting_process_load_from_a_snapshot(tmp_path: Path) -> None:
    """Real processes: one compacts 30 times while this one opens 30 times; every open
    sees the whole store, from a snapshot (never a rebuild from the files)."""
    root = tmp_path / "m"
    ids = [f"n{i:03d}" for i in range(200)]
    _store(root, ids, "d")

    def compact_again() -> None:
        for i in range(30):
            with MdCG(root, auto_compact=None) as s:
                s.add(Node(id=f"c{i:02d}", layer="self", body=f"compaction {i}"))
                s.compact_index()

    child = stress.fork(compact_again)
    loaded = []
    for _ in range(30):
        with MdCG(root, auto_compact=None) as s:
            loaded.append(s.loaded_from)
            assert set(ids) <= set(s.ids())
    assert stress.wait(child) == 0
    assert loaded == ["snapshot"] * 30
    with MdCG(root) as s:
        assert set(s.ids()) == set(ids) | {f"c{i:02d}" for i in range(30)}


@pytest.mark.parametrize("killed_at", ["snapshot", "token", "upgrade", "upgrade-token"])
def test_a_compaction_killed_between_its_writes_leaves_a_pair_that_opens(
    tmp_path: Path, killed_at: str
) -> None:
    """Review round 2 (session 25): a compaction killed after writing its snapshot and
    before its token left every later read-only open building the index from the files.
    The token file now names the snapshot in place and the coming one first."""
    import os
    import signal

    from md_cg import fsops

    root = tmp_path / "m"
    _store(root, [f"n{i}" for i in range(20)], "d")
    if killed_at.startswith("upgrade"):  # an earlier version's store: no token anywhere (review round 3)
        snap = snapshot.load(str(root))
        assert snap is not None
        data = snapshot.encode(snap.state, snap.offsets, snap.generation, None)
        (root / ".mdcg" / "index.snapshot").write_bytes(data)
        (root / ".mdcg" / "index.token").unlink()

    def compact_and_die() -> None:
        real = fsops.atomic_write
        seen: list[str] = []

        def write(r: str, rel: str, data: object, **kw: object) -> object:
            seen.append(rel)
            # the snapshot: killed before it lands; the token: killed before the final one
            if (
                (killed_at == "snapshot" and rel == snapshot.REL)
                or (killed_at == "token" and rel == snapshot.TOKEN_REL and seen.count(rel) == 2)
                or (killed_at == "upgrade" and rel == snapshot.REL)
                or (killed_at == "upgrade-token" and rel == snapshot.TOKEN_REL)
            ):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(r, rel, data, **kw)

        fsops.atomic_write = write  # type: ignore[assignment]
        with MdCG(root, auto_compact=None) as s:
            s.add(Node(id="late", layer="self", body="written before the compaction"))
            s.compact_index()

    assert stress.wait(stress.fork(compact_and_die)) == -signal.SIGKILL
    for _ in range(2):
        with MdCG(root, read_only=True) as s:
            assert (s.loaded_from, s._engine.snapshot_problem) == ("snapshot", None)
            assert "late" in s.ids()


def test_a_long_lived_process_does_not_follow_a_restored_snapshot(tmp_path: Path) -> None:
    """Review round 2 (session 25): refresh() followed a snapshot of the next generation
    without its token, so an older snapshot restored alone was taken in by a running
    process (and its next compaction made that permanent)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="self", body="alpha"))
        s.compact_index()
    running = MdCG(root, refresh_interval=None, auto_compact=None)

    def in_child(work: str) -> None:
        def run() -> None:
            with MdCG(root, auto_compact=None) as s:
                if work == "compact":
                    s.compact_index()
                else:
                    s.add(Node(id=work, layer="self", body=f"later {work}"))

        assert stress.wait(stress.fork(run)) == 0

    in_child("x1")
    running.refresh()
    in_child("compact")
    backup = (root / ".mdcg" / "index.snapshot").read_bytes()
    in_child("x2")
    in_child("compact")
    (root / ".mdcg" / "index.snapshot").write_bytes(backup)
    running.refresh()
    assert running.ids() == ["a", "x1", "x2"]
    running.compact_index()
    running.close()
    with MdCG(root, auto_compact=None) as s:
        assert (s.loaded_from, s.ids()) == ("snapshot", ["a", "x1", "x2"])
