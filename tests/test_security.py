"""Nothing outside the store root is ever touched; no file takes the store down.

Crafted ``.mdcg/`` content (snapshot rows, log records) and symlinks anywhere
below the root are refused and reported; hostile node files are reported as
unreadable in bounded time; a read-only copy is readable and nothing is
written to it. Outside effects are checked by listing the bytes and mtimes of
a folder beside the store before and after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, python_env, tree_listing
from stresslib import stress

from md_cg import MdCG, Node, snapshot
from md_cg.sample import bundled_sample_path

# -- 2. paths named by .mdcg/ content are confined to the store -------------------------------------

RELS = stress.unsafe_rels(Path("/placeholder/m"))


def _confined(tmp_path: Path, index: int, where: str) -> tuple[Path, dict, dict]:
    root = tmp_path / "m"
    stress.base_store(root)
    outside = stress.outside_folder(root)
    before = stress.listing(outside)
    rel = stress.unsafe_rels(root)[index]
    if where == "snapshot":
        stress.plant_snapshot(root, rel)
    else:
        stress.plant_log(root, [rel])
    src = tmp_path / "sample.sqlite"
    shutil.copyfile(bundled_sample_path(), src)
    return root, before, stress.exercise(root, migrate_src=src)


@pytest.mark.parametrize("where", ["snapshot", "log"])
@pytest.mark.parametrize("index", range(len(RELS)), ids=[r.replace("/", "|") for r in RELS])
def test_crafted_paths_reach_nothing_outside(tmp_path: Path, index: int, where: str) -> None:
    root, before, r = _confined(tmp_path, index, where)
    outside = root.parent / "outside"
    assert stress.changed(before, stress.listing(outside)) == []  # no byte or mtime changed outside
    outcomes = r["outcomes"]
    assert outcomes.pop("get planted") == "NodeNotFoundError: no node with id 'planted' in this store"
    assert outcomes == {name: "ok" for name in outcomes}  # every call worked (nothing raised)
    assert "planted" not in r["seen"]["search"]
    assert "log_damage" in r["seen"]["health"]  # the refused snapshot or records are reported
    with MdCG(root) as s:
        assert "plantedsecret" not in " ".join(n.body for n in s.iter_nodes())
        assert s.get("planted").body == "mine now"  # the store's own node of that id, in the store
        assert s.entry("planted").path == "self/planted.md"


def test_a_refused_snapshot_is_named_by_health(tmp_path: Path) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    stress.outside_folder(root)
    stress.plant_snapshot(root, "../outside/victim.txt")
    with MdCG(root) as s:
        assert s.loaded_from == "files"
        assert s.entry("n1").path == "self/n1.md"
        damage = s.health().by_kind("log_damage")
    assert [(f.path, f.detail.split(";")[0]) for f in damage] == [
        (
            ".mdcg/index.snapshot",
            "the index snapshot is unsafe (a row with path '../outside/victim.txt': "
            "'..' is not a layer folder)",
        )
    ]


def test_crafted_log_records_are_counted_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    stress.outside_folder(root)
    planted = stress.plant_log(root, stress.unsafe_rels(root))
    with MdCG(root) as s:
        assert s.ids() == ["k1", "n1"]
        cursor = s._engine.cursor
        # every record naming an unsafe path is dropped; the commits whose only unsafe
        # part is the temp name are kept (their temp name is checked on recovery)
        assert cursor.bad_records == planted - len(stress.unsafe_rels(root))
        (finding,) = s.health().by_kind("log_damage")
        assert finding.detail.startswith(f"{cursor.bad_records} unreadable line(s) or unusable record(s)")


# -- 3. symlinks are never followed --------------------------------------------------------------------

ACCESS_LOG_SYMLINKS = {".mdcg", ".mdcg/access"}


@pytest.mark.parametrize("case", stress.SYMLINK_CASES)
def test_symlinks_are_never_followed(tmp_path: Path, case: str) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    with MdCG(root) as s:
        s.search("alpha")  # an access shard for the fold to read
    outside = stress.plant_symlink(root, case)
    before = stress.listing(outside)
    r = stress.exercise(root)
    assert stress.changed(before, stress.listing(outside)) == []
    outcomes = r["outcomes"]
    for name in ("ids", "get", "neighbours", "health", "close", "health after"):
        assert outcomes[name] == "ok", (name, outcomes[name])
    assert outcomes["search"] == "ok"  # a symlinked access log only stops access logging
    assert "planted" not in r["seen"]["search"]
    # writes either work (the symlink is not on their way) or are refused, naming the symlink
    for name, outcome in outcomes.items():
        assert outcome == "ok" or outcome.startswith("UnsafePathError: ") or name == "get planted", outcome
    kinds = r["seen"]["health"]  # health ran first, before any write replaced a symlinked file
    assert ("synonyms_file" if case == ".mdcg/synonyms.json" else "unsafe_path") in kinds


@pytest.mark.parametrize("case", sorted(ACCESS_LOG_SYMLINKS))
def test_search_works_with_a_symlinked_access_folder(tmp_path: Path, case: str) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    outside = stress.plant_symlink(root, case)
    before = stress.listing(outside)
    with MdCG(root) as s, pytest.warns(RuntimeWarning, match="accesses are not recorded"):
        assert next(r.id for r in s.search("alpha")[0]) == "n1"
    assert stress.changed(before, stress.listing(outside)) == []


@pytest.mark.parametrize("case", ["layer", "bucket", "sub-folder", "node file"])
def test_sync_reports_symlinks_below_the_layers(tmp_path: Path, case: str) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    stress.plant_symlink(root, case)
    where = {
        "layer": "contextual",
        "bucket": "knowledge/cond_x_00000000",
        "sub-folder": "self/notes",
        "node file": "self/n1.md",
    }[case]
    with MdCG(root) as s:
        report = s.sync()
        assert report.refused == ((where, "a symlink (md-cg never follows symlinks below the store root)"),)
        assert report.problems
        assert "planted" not in s and "planted2" not in s
        if case == "node file":
            assert report.deleted == ("n1",)


def test_a_symlinked_trash_is_reported_and_nothing_is_moved_into_it(tmp_path: Path) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    outside = stress.plant_symlink(root, ".mdcg/trash")
    (root / "contextual" / "n1.md").write_text("---\nid: n1\nlayer: contextual\n---\nsecond copy\n")
    before = stress.listing(outside)
    with MdCG(root) as s:
        report = s.sync()
        s.forget("k1", "bye")
        unsafe = [f.path for f in s.health().by_kind("unsafe_path")]
    assert report.duplicates == (("n1", "contextual/n1.md"),)
    assert unsafe == [".mdcg/trash"]
    assert stress.changed(before, stress.listing(outside)) == []
    assert (root / "contextual" / "n1.md").exists() and (root / "self" / "n1.md").exists()


# -- 4. hostile files: bounded time, reported, everything else works -----------------------------------


def test_hostile_files_are_reported_and_everything_else_works(tmp_path: Path) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    (root / ".mdcg" / "index.snapshot").unlink()  # open from the files
    (root / "self" / "bomb.md").write_text(stress.ALIAS_BOMB)
    (root / "self" / "deep.md").write_text(stress.DEEP)
    started = time.perf_counter()
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == "files"
        assert next(r.id for r in s.search("first alpha")[0]) == "n1"
        report = s.sync()
        health = s.health(deep=True)
        s.compact_index()
    with MdCG(root, auto_compact=None) as s:
        assert s.loaded_from == "snapshot" and s.ids() == ["k1", "n1"]
    assert time.perf_counter() - started < 10.0
    assert [p for p, _ in report.malformed] == ["self/bomb.md", "self/deep.md"]
    unreadable = sorted((f.path, f.detail[:40]) for f in health.by_kind("unreadable_file"))
    assert [p for p, _ in unreadable] == ["self/bomb.md", "self/deep.md"]
    assert {f.kind for f in health.findings} == {"unreadable_file"}


# -- 7. a read-only copy --------------------------------------------------------------------------------


def _template(tmp_path: Path, with_meta: bool) -> Path:
    root = tmp_path / "template" / "m"
    stress.base_store(root)
    with MdCG(root) as s:
        s.search("alpha")
    if not with_meta:
        shutil.rmtree(root / ".mdcg")
    return root


@pytest.mark.parametrize("with_meta", [True, False], ids=["with-mdcg", "fresh-clone"])
def test_reads_on_a_read_only_copy_work_and_write_nothing(tmp_path: Path, with_meta: bool) -> None:
    """As root, permission bits do not bind: the reads run in a child with the uid of nobody."""
    template = _template(tmp_path, with_meta)
    parent = Path(tempfile.mkdtemp(prefix="mdcg-ro-"))
    try:
        root = stress.read_only_copy(template, parent)
        before = tree_listing(root)
        result = stress.as_nobody(stress.read_only_session, root)
        assert tree_listing(root) == before
    finally:
        shutil.rmtree(parent)
    assert "error" not in result, result
    r = result["ok"]
    assert r["loaded_from"] == ("snapshot" if with_meta else "files")
    assert r["search"][0][0] == "n1" and r["search"][1][0] == "k1"
    assert r["get"] == "first node alpha" and r["ids"] == ["k1", "n1"]
    assert r["health"] == ["access_unrecorded"]
    assert len(r["warnings"]) == 1 and "accesses are not recorded" in r["warnings"][0]


RO_MOUNT = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import stress
print(json.dumps(stress.read_only_session(__import__("pathlib").Path(sys.argv[1]))))
"""


def test_reads_on_a_read_only_mount(tmp_path: Path) -> None:
    """A read-only bind mount (EROFS, binding even for root) in a private mount namespace."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root for a private read-only bind mount")
    template = _template(tmp_path, True)
    mount = tmp_path / "ro"
    mount.mkdir()
    before = tree_listing(template)
    script = (
        f"mount --bind {template} {mount} && mount -o remount,bind,ro {mount} && "
        f"{sys.executable} -c '{RO_MOUNT}' {mount} {REPO / 'bench'}"
    )
    p = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=python_env()
    )
    if p.returncode != 0 and "mount" in p.stderr and "Traceback" not in p.stderr:
        pytest.skip(f"mounting is not permitted here: {p.stderr.strip()[:200]}")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert tree_listing(template) == before
    assert r["search"][0][0] == "n1" and r["health"] == ["access_unrecorded"]
    assert len(r["warnings"]) == 1 and "Read-only file system" in r["warnings"][0]


def test_read_only_handle_writes_nothing_even_without_snapshot(tmp_path: Path) -> None:
    root = _template(tmp_path, True)
    (root / ".mdcg" / "index.snapshot").unlink()
    before = tree_listing(root)
    with MdCG(root, read_only=True) as s:
        assert next(r.id for r in s.search("alpha")[0]) == "n1"
        assert s.health().ok
    assert tree_listing(root) == before


def test_snapshot_module_refuses_to_load_a_symlinked_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "m"
    stress.base_store(root)
    outside = stress.outside_folder(root)
    shutil.move(root / ".mdcg" / "index.snapshot", outside / "snap")
    os.symlink(outside / "snap", root / ".mdcg" / "index.snapshot")
    snap, problem = snapshot.load_checked(str(root))
    assert snap is None
    assert problem == (
        "not a regular file, refused (.mdcg/index.snapshot: is a symlink "
        "(md-cg never follows symlinks below the store root))"
    )
    with MdCG(root) as s:
        assert s.loaded_from == "files" and s.ids() == ["k1", "n1"]
        s.add(Node(id="x", layer="self", body="x"))


# -- 4 and 12. bad input of every kind, through every channel ----------------------------------------


@pytest.mark.parametrize("channel", ["file", "api", "cli", "mcp", "sqlite"])
def test_every_kind_of_bad_input_gets_a_clean_error_and_loses_nothing(tmp_path: Path, channel: str) -> None:
    """The stress run's bad-input cases (undecodable stdin, deep nesting, YAML that does not
    parse, unknown states, unknown MCP arguments, hostile sqlite cells ...): each one is a
    clean error or a finding; nothing stored is lost and nothing outside the root changes."""
    if channel == "mcp":
        pytest.importorskip("mcp")
    row = stress.bad_input_row(tmp_path, channels=(channel,))
    assert row.operations == sum(b.channel == channel for b in stress.bad_inputs())
    assert (row.lost, row.outside, row.errors) == (0, 0, 0), row.notes
