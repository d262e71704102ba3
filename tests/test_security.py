"""Nothing outside the store root is ever touched; no file takes the store down.

Crafted ``.mdcg/`` content (snapshot rows, log records) and symlinks anywhere
below the root are refused and reported; hostile node files are reported as
unreadable in bounded time; a read-only copy is readable and nothing is
written to it. Outside effects are checked by listing the bytes and mtimes of
a folder beside the store before and after.
"""

from __future__ import annotations

import ast
import ctypes
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, python_env, tree_listing
from stresslib import stress

from md_cg import MdCG, Node, Scope, snapshot
from md_cg.errors import NodeNotFoundError, ReadOnlyStoreError, UnsafePathError
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


def test_read_only_handle_refuses_reflect_and_organize(tmp_path: Path) -> None:
    """Review (session 24): both wrote their records (.mdcg/reflection, .mdcg/organize) and a lock."""
    root = _template(tmp_path, True)
    before = tree_listing(root)
    with MdCG(root, read_only=True) as s:
        with pytest.raises(ReadOnlyStoreError, match="was opened read-only"):
            s.reflect("cats", [])
        for mode in ("dryRun", "apply"):
            with pytest.raises(ReadOnlyStoreError, match="was opened read-only"):
                s.organize(mode, candidates=[{"body": "a new fact"}] if mode == "dryRun" else None)
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


# -- special files under .mdcg/: a FIFO must not hang anything, a folder must not crash it -----

_SPECIAL_SCRIPT = """
import sys
from md_cg import MdCG
root = sys.argv[1]
with MdCG(root) as s:
    s.add(id="fresh", body="The user likes green tea tomorrow.")
    found = [r.id for r in s.search("green tea", record=False)[0]]
    s.forget("n1", "gone")  # forgetting compacts
    s.compact_index()
    s.rebuild_index()
    kinds = sorted({f.kind for f in s.health().findings})
    print(found, sorted(s.ids()), kinds)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize(
    "name", ["synonyms.json", "retention_markers.json", "log/4242_" + "a" * 32 + ".jsonl"]
)
@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_special_files_under_meta_neither_hang_nor_crash(tmp_path: Path, name: str, kind: str) -> None:
    """A FIFO named like a settings file or a log shard blocked every search or compaction
    for good (Path.read_bytes, an open for a lock); a folder named like a shard crashed
    compaction, and forget raised after forgetting. Now each is skipped and reported."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        for i in range(3):
            s.add(id=f"n{i}", body=f"note {i} about green tea")
        s.compact_index()
    target = root / ".mdcg" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", _SPECIAL_SCRIPT, str(root)],
        capture_output=True, text=True, timeout=60, env=python_env(), check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    found, ids, kinds = out.stdout.strip().split("] [")
    assert "'fresh'" in found and ids == "'fresh', 'n0', 'n2'"
    expected = {"synonyms.json": "synonyms_file", "retention_markers.json": "retention_file"}.get(
        name, "unsafe_path"
    )
    assert expected in kinds
    assert target.is_fifo() if kind == "fifo" else target.is_dir()  # never replaced or removed


def test_settings_files_are_never_read_through_a_symlink(tmp_path: Path) -> None:
    """A symlinked .mdcg/retention_markers.json decided the tier of new memories from a
    file outside the store (and one to /dev/zero read until memory ran out)."""
    root = tmp_path / "m"
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"term": {"n1_relative_day": ["zanzibar"]}}), encoding="utf-8")
    with MdCG(root) as s:
        s.add(id="a", body="plain note")
    for name in ("retention_markers.json", "synonyms.json"):
        (root / ".mdcg" / name).symlink_to(outside)
    with MdCG(root) as s:
        node = s.add(id="z", body="zanzibar: the user flies out")
        assert node.retention_tier is None  # the outside file's marker was not used
        details = {f.kind: f.detail for f in s.health().findings}
    assert (
        "is a symlink" in details["retention_file"] and "retention_markers.json" in details["retention_file"]
    )
    assert "is a symlink" in details["synonyms_file"]


def test_a_conflicted_retention_json_is_named_by_health(tmp_path: Path) -> None:
    """A git conflict in .mdcg/retention.json stops the writes that decide retention (a
    wrong TTL could expire memories early); health() said nothing."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a", body="plain note")
    (root / ".mdcg" / "retention.json").write_text('<<<<<<< HEAD\n{"ttl_seconds": 60}\n', encoding="utf-8")
    with MdCG(root) as s:
        findings = [f for f in s.health().findings if f.kind == "retention_file"]
        assert len(findings) == 1 and findings[0].severity == "error"
        assert findings[0].detail.startswith(
            f"{root}/.mdcg/retention.json: unresolved git merge conflict (conflict marker at line 1)"
        )
        assert findings[0].detail.endswith("writes that decide retention fail until it is fixed")
        assert not s.health().ok


# -- files and folders this process may not read ---------------------------------------------

_UNREADABLE_SCRIPT = """
import sys
from md_cg import MdCG
from md_cg.errors import MalformedNodeFileError, NodeNotFoundError
with MdCG(sys.argv[1], auto_compact=None) as s:
    found = sorted(r.id for r in s.search("apples", record=False)[0])
    try:
        s.get("n1")
        got = "read"
    except (MalformedNodeFileError, NodeNotFoundError) as exc:
        got = str(exc)
    findings = sorted((f.kind, f.path) for f in s.health().findings)
    s.sync()
    print(repr((sorted(s.ids()), found, got, findings)))
"""


def _drop_dac_override() -> None:
    """In a root child before exec: drop the capabilities that bypass permission bits
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from the bounding set, so mode 000 applies."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _as_other_user(script: str, root: Path) -> tuple:
    """Run ``script`` on ``root`` where permission bits apply (root without the
    capabilities that bypass them)."""
    extra: dict[str, Any] = {"preexec_fn": _drop_dac_override} if os.geteuid() == 0 else {}
    out = subprocess.run(
        [sys.executable, "-c", script, str(root)],
        capture_output=True, text=True, timeout=120, env=python_env(), check=False, cwd="/", **extra,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or (os.geteuid() == 0 and not sys.platform.startswith("linux")),
    reason="POSIX permissions (as root: Linux capabilities)",
)
@pytest.mark.parametrize("snapshot", [True, False])
@pytest.mark.parametrize("what", ["file", "folder", "listable folder"])
def test_a_file_or_folder_it_may_not_read_takes_nothing_else_down(what: str, snapshot: bool) -> None:
    """One node file of mode 000 stopped a store without snapshot from opening; a layer
    folder of mode 000 made search, health and sync raise PermissionError. Now the file is
    an unreadable_file and the folder an unsafe_path; every other memory is served, and
    what the index holds below an unreadable folder is kept as it is."""
    base = Path(tempfile.mkdtemp(prefix="mdcg-perm-"))
    try:
        base.chmod(0o755)
        root = base / "m"
        with MdCG(root) as s:
            for i in range(3):
                s.add(id=f"n{i}", body=f"apples {i}", layer="structural" if i == 1 else "knowledge")
            s.compact_index()
        if not snapshot:
            (root / ".mdcg" / "index.snapshot").unlink()
            shutil.rmtree(root / ".mdcg" / "log")
        n1 = root / "structural" / "n1.md"
        (n1 if what == "file" else n1.parent).chmod(0o444 if what == "listable folder" else 0)
        ids, found, got, findings = _as_other_user(_UNREADABLE_SCRIPT, root)
    finally:
        for p in (base / "m" / "structural", base / "m" / "structural" / "n1.md"):
            if p.exists():
                p.chmod(0o755)
        shutil.rmtree(base)
    if snapshot:
        assert got == "structural/n1.md: cannot be read: permission denied"
    elif what != "file":  # never read: nothing is known of it
        assert got == "no node with id 'n1' in this store"
    else:  # the error says which file stands for the id, and why it is unusable
        assert got == (
            "no node with id 'n1' in this store (its file structural/n1.md is unusable: "
            "cannot be read: permission denied; fix it, then sync)"
        )
    if snapshot:  # the index still holds n1: kept, and found by search (which reads no file)
        assert (ids, found) == (["n0", "n1", "n2"], ["n0", "n1", "n2"])
    else:  # never read: not in the index, and reported
        assert (ids, found) == (["n0", "n2"], ["n0", "n2"])
    if what != "file":  # 0444: listed, but no entry can be looked at (the scan broke on it)
        assert ("unsafe_path", "structural") in findings
        assert not any(kind == "missing_file" for kind, _ in findings)
    elif not snapshot:
        assert ("unreadable_file", "structural/n1.md") in findings


def test_an_unknown_id_whose_file_is_broken_says_so(tmp_path: Path) -> None:
    """A node whose frontmatter broke was "no node with id" in get, show, edit and update,
    with nothing to say that its file is there and why it is unusable."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="g", body="Good two.")
        path = s.path_of("g")
    text = path.read_text(encoding="utf-8").replace('layer: "knowledge"', "layer: [broken")
    path.write_text(text, encoding="utf-8")
    with MdCG(root) as s:
        s.sync()
        with pytest.raises(NodeNotFoundError) as err:
            s.get("g")
        assert str(err.value).startswith(
            "no node with id 'g' in this store (its file knowledge/orphan/g.md is unusable: "
        )
        assert str(err.value).endswith("; fix it, then sync)")
    with MdCG(root, scope=Scope(agent="bot")) as scoped:  # a scoped handle learns nothing of it
        with pytest.raises(NodeNotFoundError) as err:
            scoped.get("g")
        assert str(err.value) == "no node with id 'g' in this store"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_as_the_migration_journal_does_not_hang_migrate(tmp_path: Path) -> None:
    from md_cg.migrate import journal_path

    src = tmp_path / "sample.sqlite"
    shutil.copyfile(bundled_sample_path(), src)
    dest = tmp_path / "m"
    MdCG(dest).close()
    fifo = journal_path(src, dest)
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    script = "import sys; from md_cg.migrate import migrate; print(migrate(sys.argv[1], sys.argv[2]).ok)"
    out = subprocess.run(
        [sys.executable, "-c", script, str(src), str(dest)],
        capture_output=True, text=True, timeout=120, env=python_env(), check=False,
    )  # fmt: skip
    assert (out.returncode, out.stdout) == (0, "True\n"), out.stderr


@pytest.mark.parametrize(
    ("name", "kind", "what"),
    [
        ("lock", "folder", "is a folder where md-cg keeps a lock file; remove it"),
        ("gate", "folder", "is a folder where md-cg keeps a lock file; remove it"),
        ("locks", "file", "is a file where md-cg keeps a folder; remove it"),
        ("log", "file", "is a file where md-cg keeps a folder; remove it"),
    ],
)
def test_a_folder_or_file_planted_at_a_meta_name_is_named(
    tmp_path: Path, name: str, kind: str, what: str
) -> None:
    """They raised IsADirectoryError / FileNotFoundError ("a component is not a folder")."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a", body="note a")
    target = root / ".mdcg" / name
    shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    target.mkdir() if kind == "folder" else target.write_text("", encoding="utf-8")
    s = MdCG(root, auto_compact=None)
    try:
        with pytest.raises(UnsafePathError) as err:
            s.add(id="b", body="note b")
        assert str(err.value) == f".mdcg/{name}: {what}"
        assert [r.id for r in s.search("note", record=False)[0]] == ["a"]  # reads go on
    finally:
        s.close()


_DERIVED_SCRIPT = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1], read_only=True) as s:
    found = sorted(r.id for r in s.search("apples", record=False)[0])
    kinds = sorted({(f.kind, f.path) for f in s.health().findings})
    print(repr((s.loaded_from, found, kinds)))
"""


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or (os.geteuid() == 0 and not sys.platform.startswith("linux")),
    reason="POSIX permissions (as root: Linux capabilities)",
)
@pytest.mark.parametrize("what", ["snapshot", "shard"])
def test_a_derived_file_it_may_not_read_is_rebuilt_or_skipped(what: str) -> None:
    """A snapshot or log shard of mode 000 made every call raise PermissionError. The
    snapshot is derived: the index is built from the files instead; a shard is skipped
    and reported (its writes are in the files, which a sync picks up)."""
    base = Path(tempfile.mkdtemp(prefix="mdcg-perm-"))
    try:
        base.chmod(0o755)
        root = base / "m"
        with MdCG(root) as s:
            s.add_many([Node(id=f"n{i}", body=f"apples {i}") for i in range(3)])
            s.compact_index()
            if what == "shard":
                s.add(id="n3", body="apples 3")  # a record in this process's shard, after the snapshot
        subprocess.run(["chmod", "-R", "a+rwX", str(root)], check=True)
        target = (
            root / ".mdcg" / "index.snapshot"
            if what == "snapshot"
            else next((root / ".mdcg" / "log").iterdir())
        )
        target.chmod(0)
        loaded, found, kinds = _as_other_user(_DERIVED_SCRIPT, root)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if what == "snapshot":
        assert (loaded, found) == ("files", ["n0", "n1", "n2"])
    else:
        assert loaded == "snapshot" and found == ["n0", "n1", "n2"]  # n3's record is in the skipped shard
        assert ("untracked_file", "knowledge/orphan/n3.md") in kinds  # named: a sync takes it
        assert ("unsafe_path", f".mdcg/log/{target.name}") in kinds


def test_a_folder_at_the_snapshot_warns_after_the_work_is_done(tmp_path: Path) -> None:
    """The compaction on close and forget's scrub meet a folder planted at the snapshot:
    the add and the forget are done, so they warn instead of raising (a retry could only fail)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="self", body="first"))
    snap = root / ".mdcg" / "index.snapshot"
    if snap.exists():
        snap.unlink()
    snap.mkdir()
    with pytest.warns(RuntimeWarning, match="compaction on close failed"), MdCG(root, auto_compact=1) as s:
        s.add(Node(id="b", layer="self", body="second"))
    words = "still holds the words of 'b'"
    with MdCG(root, auto_compact=None) as s, pytest.warns(RuntimeWarning, match=words):
        gone = s.forget("b", "a reason")
    assert gone.node.id == "b" and not (root / "self" / "b.md").exists()
    with MdCG(root, auto_compact=None) as s:
        assert s.ids() == ["a"] and [t["id"] for t in s.tombstones()] == ["b"]


def _writes_on_a_read_only_copy(root: Path) -> dict[str, Any]:
    """Each write on a copy this process may not write, opened writable: the error's
    type, filename and text."""
    out: dict[str, Any] = {}
    calls = {
        "add": lambda s: s.add(id="new", body="a new memory"),
        "sync": lambda s: s.sync(),
        "organize": lambda s: s.organize("dryRun", candidates=[{"layer": "knowledge", "content": "x"}]),
    }
    for what, call in calls.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = MdCG(root, create=False, auto_compact=None)
            try:
                call(s)
                out[what] = None
            except OSError as exc:
                out[what] = [type(exc).__name__, exc.errno, exc.filename, str(exc)]
            finally:
                s.close()
    return out


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
@pytest.mark.parametrize("used", [False, True], ids=["fresh-meta", "used-meta"])
def test_a_write_on_a_read_only_copy_names_the_file_it_could_not_open(tmp_path: Path, used: bool) -> None:
    """Opened without read_only on a copy of mode a-w, add, sync and an organise dry run
    raised PermissionError naming a bare '44.lock', '00.lock', '.<pid>_<uuid>.creating.tmp'
    (or the bare folder it could not make). Now the path below the root, and the root, are
    named (still a PermissionError). ``used``: the copy's .mdcg/ has the gate and the
    organise log (a store that synced and organised before)."""
    template = _template(tmp_path, True)
    if used:
        with MdCG(template) as s:
            s.sync()
            s.organize("dryRun", candidates=[{"layer": "knowledge", "content": "y"}])
    parent = Path(tempfile.mkdtemp(prefix="mdcg-ro-"))
    try:
        root = stress.read_only_copy(template, parent)
        before = tree_listing(root)
        result = stress.as_nobody(_writes_on_a_read_only_copy, root)
        assert tree_listing(root) == before
    finally:
        shutil.rmtree(parent)
    assert "error" not in result, result
    got = result["ok"]
    denied = f"[Errno 13] Permission denied (in the store at {root})"
    stripe = got["add"][2]
    assert re.fullmatch(r"\.mdcg/locks/\d\d\.lock", stripe), stripe
    assert got["add"] == ["PermissionError", errno.EACCES, stripe, f"{denied}: '{stripe}'"]
    assert got["sync"] == ["PermissionError", errno.EACCES, ".mdcg/gate", f"{denied}: '.mdcg/gate'"]
    shard_tmp = got["organize"][2]
    if used:
        assert re.fullmatch(r"\.mdcg/organize/\.\d+_[0-9a-f]{32}\.creating\.tmp", shard_tmp), shard_tmp
    else:
        assert shard_tmp == ".mdcg/organize"
    assert got["organize"] == ["PermissionError", errno.EACCES, shard_tmp, f"{denied}: '{shard_tmp}'"]
