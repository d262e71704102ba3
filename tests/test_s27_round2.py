"""Session 27, second review round (r3) of the day's lifecycle fixes.

* The sweep kept an expired memory only when another file of the *same name* held its
  id (or a sync of this process had seen the copy): ``cp x.md x-backup.md`` was swept
  with the memory, and a long-lived handle (the MCP server) answered otherwise than a
  fresh one.
* A renewal's "is it live now" check used the time taken before the update waited for
  the node's lock: an update acknowledged after the memory had expired left it hidden.
* ``retention_tier=None`` counted as a renewal and made an expired memory permanent.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import MdCG, Node
from md_cg.errors import NodeNotFoundError

HOLDER = r"""
import sys, time
from pathlib import Path
from md_cg import MdCG
root, node_id, flag, updating = sys.argv[1], sys.argv[2], sys.argv[4], Path(sys.argv[5])
expires_in = float(sys.argv[3])
with MdCG(root) as s:
    when = time.time() + expires_in
    s.update(node_id, expires_at=when)
    with s._engine.hold([node_id]):
        Path(flag).touch()
        deadline = time.monotonic() + 120
        while not updating.exists() and time.monotonic() < deadline:  # the other's update has begun
            time.sleep(0.005)
        time.sleep(max(0.0, when - time.time()) + 0.3)  # held until the expiry is past
"""


def _temp(root: Path, node_id: str, expires_in: float, body: str = "pick up the parcel") -> None:
    with MdCG(root) as s:
        node = Node(
            id=node_id,
            layer="knowledge",
            body=body,
            retention_tier="temp",
            expires_at=time.time() + expires_in,
        )
        s.add_many([node], stamp=False)


@pytest.mark.parametrize("copy_name", ["x-backup.md", "Foo.md"])
def test_a_copy_under_another_name_keeps_the_expired_memory(tmp_path: Path, copy_name: str) -> None:
    root = tmp_path / "m"
    _temp(root, "x", -60)
    _temp(root, "y", -60)
    with MdCG(root) as s:  # a long-lived handle: opened before the copy is made, never synced
        assert s.sweep(dry_run=True).kept == ()
        src = root / "knowledge" / "orphan" / "x.md"
        copy = root / "self" / copy_name
        shutil.copyfile(src, copy)
        before = copy.read_bytes()
        why = (
            f"expired at knowledge/orphan/x.md, but other files hold this id too (self/{copy_name}); "
            "the sweep removes only a memory's sole file: remove the copy you do not want, then sync"
        )
        dry = s.sweep(dry_run=True)
        assert (dry.expired, dry.kept) == (("x", "y"), (("x", why),))
        report = s.sweep(dry_run=False)
        assert (report.removed, report.kept) == (("y",), (("x", why),))
        assert [t["id"] for t in s.tombstones()] == ["y"]
    assert copy.read_bytes() == before
    assert src.is_file()


def test_a_renewal_acknowledged_after_waiting_for_the_lock_leaves_the_memory_live(tmp_path: Path) -> None:
    """Another process sets x to expire 3 s from now and holds x's lock until the update
    below has begun and the expiry is past; an update made at once that keeps the temp tier
    (and so that expiry, still ahead when the update starts) is refused once it gets the
    lock, nothing written. It was acknowledged, the memory already expired and hidden. (The
    expiry was 1 s ahead, the hold 3 s: a loaded machine could take that second between the
    other's update and the check below, or end the hold before the update began.)"""
    root = tmp_path / "m"
    _temp(root, "x", 3600)
    path = root / "knowledge" / "orphan" / "x.md"
    flag, updating = tmp_path / "held", tmp_path / "updating"
    with MdCG(root) as s:  # opened first: the update starts as soon as the lock is held
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(root), "x", "3.0", str(flag), str(updating)], env=python_env()
        )
        try:
            deadline = time.monotonic() + 120
            while not flag.exists():
                assert holder.poll() is None and time.monotonic() < deadline
                time.sleep(0.005)
            before = (path.read_bytes(), path.stat().st_mtime_ns)
            assert s.entry("x").expires_at > time.time()  # live when the update starts
            updating.touch()
            with pytest.raises(NodeNotFoundError) as info:
                s.update("x", retention_tier="temp")
            assert "it is a temporary memory that expired at" in str(info.value)
            assert (path.read_bytes(), path.stat().st_mtime_ns) == before
        finally:
            assert holder.wait(timeout=120) == 0


def test_a_tier_of_none_is_no_renewal(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _temp(root, "g", -60)
    path = root / "knowledge" / "orphan" / "g.md"
    before = path.read_bytes()
    with MdCG(root) as s:
        for tier in (None, ""):
            with pytest.raises(NodeNotFoundError) as info:
                s.update("g", retention_tier=tier)
            assert "renew it to change it" in str(info.value)
        assert path.read_bytes() == before
        renewed = s.update("g", retention_tier="long")
        assert (renewed.retention_tier, renewed.expires_at) == ("long", None)
        assert s.get("g").body == "pick up the parcel"


@pytest.mark.parametrize("overwrite", [False, True])
def test_an_import_never_replaces_an_expired_memory(tmp_path: Path, overwrite: bool) -> None:
    """As documented (and as for an archived one): ``--overwrite`` replaced it and brought
    it back with the record's text before session 27."""
    from md_cg.errors import ImportSourceError
    from md_cg.transfer import import_nodes

    root = tmp_path / "m"
    _temp(root, "e1", -60, body="old text")
    path = root / "knowledge" / "orphan" / "e1.md"
    before = path.read_bytes()
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "e1", "body": "new text"}\n', encoding="utf-8")
    with MdCG(root) as s, pytest.raises(ImportSourceError) as info:
        import_nodes(s, source, overwrite=overwrite)
    assert str(info.value).splitlines()[1] == (
        f"  {source}: record 1: id 'e1' is held by an expired memory (knowledge/orphan/e1.md): renew it "
        "(update with a tier) or sweep it, then import again"
    )
    assert path.read_bytes() == before


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_migration_or_demo_into_a_folder_inside_a_store_makes_nothing(tmp_path: Path) -> None:
    """r4: the migration made its folder and lock file (an untracked ``.mdcg/migrate/*.lock``
    inside the layer folder) before the store refused the nested root."""
    from md_cg.demo import prepare_dest
    from md_cg.errors import NotAStoreError
    from md_cg.migrate import migrate
    from md_cg.sample import bundled_sample_path

    root = tmp_path / "mem"
    with MdCG(root) as s:
        s.add(id="n1", body="note one")
    before = _listing(root)
    inner = root / "knowledge" / "imported"
    with pytest.raises(NotAStoreError) as info:
        migrate(bundled_sample_path(), inner)
    assert str(info.value) == (
        f"{inner}: inside the store {root}; no store is made or opened there (pass root={str(root)!r})"
    )
    with pytest.raises(NotAStoreError):
        prepare_dest(root / "demo2")
    assert _listing(root) == before


def test_a_path_with_a_nul_is_a_clear_error(tmp_path: Path) -> None:
    from md_cg.errors import NotAStoreError

    with pytest.raises(NotAStoreError) as info:
        MdCG(str(tmp_path / "x\x00y"))
    assert "not a usable folder path (embedded null byte)" in str(info.value)


def test_an_import_replaces_a_conflicted_memory_past_its_expiry(tmp_path: Path) -> None:
    """r5: the expired-id refusal left out that a memory in merge conflict never expires
    (health, sweep and get treat it as live): it refused to replace one, advising a sweep
    that would never remove it."""
    from md_cg.transfer import import_nodes

    root = tmp_path / "m"
    with MdCG(root):
        pass
    (root / "knowledge" / "orphan").mkdir(parents=True, exist_ok=True)
    (root / "knowledge" / "orphan" / "cx.md").write_text(
        "---\nid: cx\nlayer: knowledge\nretention_tier: temp\nexpires_at: 2026-01-01T00:00:00Z\n---\n"
        "<<<<<<< ours\nmeet at 9 tomorrow\n=======\nmeet at 10 tomorrow\n>>>>>>> theirs\n",
        encoding="utf-8",
    )
    source = tmp_path / "r.jsonl"
    source.write_text('{"id": "cx", "layer": "knowledge", "body": "meet at 10 tomorrow"}\n', encoding="utf-8")
    with MdCG(root) as s:
        assert [c[0] for c in s.sync().conflicts] == ["cx"]
        report = import_nodes(s, source, overwrite=True)
        assert (report.created, report.updated) == (0, 1)
        assert s.get("cx").body == "meet at 10 tomorrow"
