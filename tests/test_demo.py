"""``mdcg demo``: the tour's measured facts on the bundled sample, and the command."""

from __future__ import annotations

import io
import json
import re
import tempfile
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app
from md_cg.demo import DemoError, DemoSummary, prepare_dest, run_demo


@pytest.fixture(scope="module")
def tour(tmp_path_factory: pytest.TempPathFactory) -> tuple[DemoSummary, str, Path]:
    dest = tmp_path_factory.mktemp("demo") / "store"
    buffer = io.StringIO()
    summary = run_demo(dest, Console(file=buffer, width=100, color_system=None))
    return summary, buffer.getvalue(), dest


def test_migration_is_verified_with_no_mismatch(tour: tuple[DemoSummary, str, Path]) -> None:
    summary, text, dest = tour
    assert summary.migration_ok is True
    assert (summary.rows, summary.migrated, summary.mismatches, summary.bad_rows) == (226, 226, 0, 0)
    assert summary.layers == {
        "anchor": 3,
        "structural": 4,
        "knowledge": 200,
        "contextual": 5,
        "self": 4,
        "rejected": 5,
        "unresolved": 5,
    }
    assert summary.buckets == 16 and summary.nodes == 226
    assert len(list(dest.rglob("*.md"))) == 226
    assert "1 · Migrate the bundled sample" in text and "│ mismatches" in text


def test_the_ladder_tiers_and_routing(tour: tuple[DemoSummary, str, Path]) -> None:
    summary, _, _ = tour
    s = summary.searches
    negative = summary.layers["rejected"] + summary.layers["unresolved"]
    routed, unrouted, fallback, big = s["routed"], s["unrouted"], s["fallback"], s["big_domain"]
    assert routed.tier == "T0" and routed.routed and len(routed.buckets) == 1
    assert routed.buckets[0].startswith("cond_计算机科学_") and routed.tiers == ("T0",)
    assert routed.scanned == 22 and routed.store_size == 226
    assert unrouted.tier == "T2" and not unrouted.routed and unrouted.buckets == ()
    assert unrouted.scanned == 226 - negative and unrouted.tiers == ("T2",)
    assert fallback.tier == "T3" and fallback.tiers == ("T3",) and len(fallback.hits) == 3
    assert big.big_domain == "physics" and big.routed and big.tier == "T0"
    assert sorted(b.split("_")[1] for b in big.buckets) == ["physics", "物理学"]
    assert big.scanned < unrouted.scanned
    assert summary.tiers == ("T0", "T2", "T3")


def test_the_four_states_appear(tour: tuple[DemoSummary, str, Path]) -> None:
    summary, text, _ = tour
    judged, rejected = summary.searches["judged"], summary.searches["rejected"]
    assert judged.states == ("ACCEPT", "DEFER", "BLINDSPOT")
    assert "REJECT" in rejected.states
    flipped = {h.id for h in rejected.hits if h.state == "REJECT"}
    assert flipped and flipped <= {h.id for h in judged.hits if h.state in ("ACCEPT", "DEFER")}
    assert summary.states == ("ACCEPT", "REJECT", "DEFER", "BLINDSPOT")
    assert '"接近光速的高速运动"' in text and "matched by the context" in text


def test_negative_memory_verify_reflect_health(tour: tuple[DemoSummary, str, Path]) -> None:
    summary, text, dest = tour
    assert summary.covered_neg and any(i.startswith("rej_") for i in summary.covered_neg)
    with MdCG(dest, read_only=True) as store:
        assert {store.entry(i).layer for i in summary.covered_neg} <= {"rejected", "unresolved"}
        node = store.get(summary.verified_id)
    assert summary.confidence_after == pytest.approx(summary.confidence_before + 0.05)
    assert node.confidence == summary.confidence_after
    assert node.verification_history[-1]["verdict"] == "confirmed"
    first, second = summary.reflections
    assert (first["t"], first["d"]) == (0, 0.5)
    assert second["t"] == 1 and second["d"] > first["d"] and second["dd"] == pytest.approx(second["d"] - 0.5)
    # The sample carries two edges to nodes that were never in the source: health reports them,
    # and nothing else.
    assert summary.health_ok is False and summary.health_findings == {"dangling_edge": 2}
    for step in ("2 · Routed search", "5b · Same query", "6 · Negative memory", "10 · health()"):
        assert step in text
    assert summary.seconds > 0  # reported; its speed is no timed test's (it took 8.5 s under a load of 20)


def test_summary_is_json_ready(tour: tuple[DemoSummary, str, Path]) -> None:
    data = json.loads(json.dumps(tour[0].to_dict(), ensure_ascii=False))
    assert data["states"] == ["ACCEPT", "REJECT", "DEFER", "BLINDSPOT"]
    assert data["searches"]["routed"]["tier"] == "T0"


def test_prepare_dest(tmp_path: Path) -> None:
    assert prepare_dest(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(DemoError, match="not empty"):
        prepare_dest(tmp_path / "full")
    assert prepare_dest(tmp_path / "full", force=True) == tmp_path / "full"
    with pytest.raises(DemoError, match="not a folder"):
        prepare_dest(tmp_path / "full" / "x")


def test_mdcg_demo_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    dest = tmp_path / "d"
    result = runner.invoke(app, ["demo", str(dest)])
    assert result.exit_code == 0, result.output
    assert re.search(r"│ mismatches\s+│ 0\s+│", result.stdout) and "10 · health()" in result.stdout
    assert f"store folder: {dest}" in result.stdout
    again = runner.invoke(app, ["demo", str(dest), "--json"])
    assert again.exit_code == 2 and "--force" in again.stderr
    forced = runner.invoke(app, ["demo", str(dest), "--force", "--json"])
    assert forced.exit_code == 0, forced.output
    data = json.loads(forced.stdout)
    assert data["mismatches"] == 0 and data["migration_ok"] is True and data["dest"] == str(dest)
    # no DIR: a new temp folder
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fresh = runner.invoke(app, ["demo", "--json"])
    assert fresh.exit_code == 0, fresh.output
    made = Path(json.loads(fresh.stdout)["dest"])
    assert made.parent == tmp_path and made.name.startswith("mdcg-demo-") and (made / "knowledge").is_dir()
