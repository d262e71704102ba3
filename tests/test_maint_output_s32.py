"""Review rev2 of session 32 (low): the maintenance commands' output and the committed
settings files.

* ``mdcg rebuild`` and ``mdcg compact`` printed one ``unreadable:`` line per unusable
  file, with no cap (300 empty ``.md`` files: 301 lines), and ``mdcg export`` one
  ``not exported:`` line each; health, sync and census cap such lists. Now the first
  20, then a line counting the rest and naming what lists every one; ``--json`` stays
  complete.
* A sweep refused by a read-only bucket folder (no ``CAP_DAC_OVERRIDE``) said
  ``error: e1.md: Permission denied; ...``: now the path relative to the store.
* ``.mdcg/retention.json`` with a key given twice was read last-wins (a 1-second TTL),
  with no finding; so were ``synonyms.json`` and ``retention_markers.json``. Now each
  is refused as their other bad contents are, naming the key.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import md_cg
from md_cg import MdCG
from md_cg.cli import app
from md_cg.errors import InvalidArgumentError
from md_cg.render import LOGGED_WRITE
from md_cg.retention import store_ttl

EMPTY = "the file is empty: a memory needs some text"
TWICE = "appears twice: which value was meant is not knowable; keep one"


def _cli(root: Path, *args: str) -> Any:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "400"}).invoke(app, ["--root", str(root), *args])


def _store_with_bad_files(root: Path, n: int) -> list[str]:
    """A store of one memory and ``n`` empty ``.md`` files; their paths, sorted."""
    with MdCG(root) as s:
        s.add(id="a1", body="Alice lives in Berlin.")
    for i in range(n):
        (root / "knowledge" / "orphan" / f"bad{i:02d}.md").write_bytes(b"")
    return sorted(f"knowledge/orphan/bad{i:02d}.md" for i in range(n))


# -- 3. rebuild / compact / export cap their lists of unusable files ------------------


@pytest.mark.parametrize("command", ["rebuild", "compact"])
def test_rebuild_and_compact_list_twenty_unreadable_files_then_count_the_rest(
    tmp_path: Path, command: str
) -> None:
    root = tmp_path / "m"
    bad = _store_with_bad_files(root, 25)
    if command == "compact":  # compact names the files its index knows to be unusable
        assert _cli(root, "rebuild").exit_code == 0
    result = _cli(root, command)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{'rebuilt' if command == 'rebuild' else 'compacted'}: 1 nodes, ")
    assert lines[1:] == [
        *(f"  unreadable: {path}: {EMPTY}" for path in bad[:20]),
        "  ... and 5 more unreadable (--json lists every one)",
    ]
    data = json.loads(_cli(root, command, "--json").stdout)  # complete
    assert data["problems"] == [[path, EMPTY] for path in bad]


def test_twenty_unreadable_files_are_all_listed_with_no_count_line(tmp_path: Path) -> None:
    root = tmp_path / "m"
    bad = _store_with_bad_files(root, 20)
    lines = _cli(root, "rebuild").stdout.splitlines()
    assert lines[1:] == [f"  unreadable: {path}: {EMPTY}" for path in bad]


def test_export_names_twenty_files_not_exported_then_counts_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "m"
    bad = _store_with_bad_files(root, 25)
    result = _cli(root, "export", "--out", str(tmp_path / "all.jsonl"))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 21
    assert set(lines[:20]) <= {f"not exported: {path}: {EMPTY}" for path in bad}
    assert len(set(lines[:20])) == 20
    assert lines[20] == "... and 5 more not exported (`mdcg health --json` lists every one)"
    assert [json.loads(line)["id"] for line in (tmp_path / "all.jsonl").read_text().splitlines()] == ["a1"]
    health = json.loads(_cli(root, "health", "--json").stdout)  # what the line points to: all 25
    assert sorted(f["path"] for f in health["findings"] if f["kind"] == "unreadable_file") == bad


# -- 4. a sweep refused by a read-only folder names the file relative to the store ---------


def _drop_dac() -> None:
    """In a root child before exec: drop the capabilities that bypass permission bits
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER) from the bounding set."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _expired(node_id: str) -> str:
    return (
        f"---\nid: {node_id}\nlayer: knowledge\nretention_tier: temp\n"
        f"expires_at: 2020-01-01T00:00:00Z\n---\nexpired {node_id}\n"
    )


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or (os.geteuid() == 0 and not sys.platform.startswith("linux")),
    reason="POSIX permissions (as root: Linux capabilities)",
)
def test_a_sweep_refused_by_a_read_only_folder_names_the_file_below_the_store() -> None:
    base = Path(tempfile.mkdtemp(prefix="mdcg-sweep-perm-"))
    ro = base / "m" / "knowledge" / "ro"
    try:
        base.chmod(0o755)
        root = base / "m"
        with MdCG(root) as s:
            s.add(id="keep0", body="Alice lives in Berlin.")
        ro.mkdir()
        (ro / "e1.md").write_text(_expired("e1"), encoding="utf-8")
        with MdCG(root) as s:
            s.sync()
        ro.chmod(0o555)
        extra: dict[str, Any] = {"preexec_fn": _drop_dac} if os.geteuid() == 0 else {}
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(md_cg.__file__).parents[1]), *sys.path])}
        env.pop("MDCG_ROOT", None)
        out = subprocess.run(
            [sys.executable, "-m", "md_cg.cli", "--root", str(root), "sweep"],
            capture_output=True, text=True, timeout=120, env=env, check=False, cwd="/", **extra,
        )  # fmt: skip
        still = (ro / "e1.md").is_file()
        ro.chmod(0o755)
        with MdCG(root) as s:  # the logged delete is completed once the folder is writable
            finished = s.sync().finished_deletes
    finally:
        if ro.exists():
            ro.chmod(0o755)
        shutil.rmtree(base)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == f"error: knowledge/ro/e1.md: Permission denied; {LOGGED_WRITE}\n"
    assert still
    assert finished == (("e1", "knowledge/ro/e1.md"),)


# -- 5. a settings file with a key given twice is refused, naming the key ------------------


def test_retention_json_with_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="keep0", body="Alice lives in Berlin.")
    conf = root / ".mdcg" / "retention.json"
    conf.write_text('{"ttl_seconds": 604800, "ttl_seconds": 1}\n', encoding="utf-8")
    why = f"{root}/.mdcg/retention.json: key 'ttl_seconds' {TWICE}"
    with pytest.raises(InvalidArgumentError) as err:
        store_ttl(str(root))
    assert str(err.value) == why
    with MdCG(root) as s:
        found = [(f.kind, f.severity, f.detail) for f in s.health().findings]
        assert found == [
            ("retention_file", "error", f"{why}; writes that decide retention fail until it is fixed")
        ]
    sync = _cli(root, "sync")
    assert sync.exit_code == 1
    assert sync.stdout == (
        f"settings files md-cg cannot use (fix them) (1): .mdcg/retention.json: {why}; "
        "writes that decide retention fail until it is fixed\n"
    )
    add = _cli(root, "add", "Tomorrow buy milk", "--id", "milk")
    assert (add.exit_code, add.stderr) == (2, f"error: {why}\n")
    conf.write_text('{"ttl_seconds": 604800, "x": {"ttl_seconds": 1}}\n', encoding="utf-8")
    assert store_ttl(str(root)) == 604800.0  # the same key in another object is no repeat


def test_the_other_settings_files_with_a_key_given_twice_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="keep0", body="Alice lives in Berlin.")
    (root / ".mdcg" / "synonyms.json").write_text(
        '{"groups": [["car", "auto"]], "groups": [["x", "y"]]}', encoding="utf-8"
    )
    (root / ".mdcg" / "retention_markers.json").write_text(
        '{"veto": {"remember": ["foo"], "\\u0072emember": ["bar"]}}', encoding="utf-8"
    )
    with MdCG(root) as s:
        found = sorted((f.kind, f.severity, f.detail) for f in s.health().findings)
    assert found == [
        (
            "retention_file",
            "error",
            f"{root}/.mdcg/retention_markers.json: invalid retention marker file: key 'remember' "
            f"{TWICE}; no memory is made temporary automatically until it is fixed",
        ),
        (
            "synonyms_file",
            "warning",
            f"{root}/.mdcg/synonyms.json: invalid synonym file: key 'groups' {TWICE}; "
            "searching with the shipped synonym table instead",
        ),
    ]
