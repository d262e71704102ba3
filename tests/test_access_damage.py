"""A damaged access fold (``.mdcg/access/counts.json``) is an MdcgError naming the file and
what removing it costs, a ``log_damage`` finding of health, and a one-line CLI error
(session 27 review: a bare ValueError, a Rich traceback, and health said ok)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.cli import app
from md_cg.errors import DataFileError, MdcgError
from md_cg.reports import Finding

DAMAGED = '{"counts":{"a002":"lots"},"last":{},"offsets":{}}'
REASON = (
    "not a valid access fold (the local access totals); remove it: the next fold counts again "
    "from the access log shards still in .mdcg/access/; only the accesses in shards a fold "
    "already removed (fully folded, no event of the last year) are lost"
)


def _damaged_store(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a002", layer="knowledge", body="okapi grazing"))
        s.record_access(["a002"])
        s.record_access(["a002"])
        s.compact_access()
        assert s.access_counts(["a002"]) == {"a002": 2}
    (root / ".mdcg" / "access" / "counts.json").write_text(DAMAGED, encoding="utf-8")
    return root


def test_access_counts_and_compact_access_raise_a_data_file_error(tmp_path: Path) -> None:
    root = _damaged_store(tmp_path)
    path = str(root / ".mdcg" / "access" / "counts.json")
    with MdCG(root) as s:
        for call in (s.access_counts, s.compact_access):
            with pytest.raises(DataFileError) as info:
                call()
            assert isinstance(info.value, MdcgError)
            assert (info.value.path, info.value.reason) == (path, REASON)
            assert str(info.value) == f"{path}: {REASON}"
    assert (root / ".mdcg" / "access" / "counts.json").read_text(encoding="utf-8") == DAMAGED


def test_health_reports_the_damaged_fold(tmp_path: Path) -> None:
    root = _damaged_store(tmp_path)
    with MdCG(root) as s:
        report = s.health()
        assert not report.ok
        assert report.by_kind("log_damage") == [Finding("log_damage", REASON, ".mdcg/access/counts.json")]
    (root / ".mdcg" / "access" / "counts.json").unlink()
    with MdCG(root) as s:  # what the message promises: the shards still there are counted again
        assert s.health().ok
        assert s.access_counts(["a002"]) == {"a002": 2}
        assert s.compact_access() == {"a002": 2}


def test_the_cli_prints_one_error_line(tmp_path: Path) -> None:
    root = _damaged_store(tmp_path)
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["--root", str(root), "compact", "--access"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    path = root / ".mdcg" / "access" / "counts.json"
    assert result.stderr == f"error: {path}: {REASON}\n"
