"""The MCP ``health`` reply lists one finding of every kind before the rest (session 29's
left-alone list, r7): errors came first in full turns, so 25 merge conflicts filled the 20
listed and a scoped server's ``withheld`` finding -- the one telling the agent a person
must look -- was cut (only ``kinds`` counted it)."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG
from md_cg.mcp_server import REPORT_ITEMS, _health_reply
from md_cg.reports import Finding, HealthReport


def test_every_kind_is_listed_before_the_rest(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        base = s.health()
    found = [Finding("merge_conflict", "both versions", f"k/c{i}.md", f"c{i}") for i in range(25)]
    found += [Finding("expired", "past", f"k/e{i}.md", f"e{i}") for i in range(3)]
    found += [Finding("withheld", "1 file problem(s) not named to this scope", None, None)]
    report = HealthReport(layers=base.layers, nodes=28, buckets=base.buckets, findings=tuple(found))
    reply = _health_reply(report.to_dict())
    listed = [(f["kind"], f.get("node_id")) for f in reply["findings"]]
    assert len(listed) == REPORT_ITEMS == 20
    assert listed[:3] == [("merge_conflict", "c0"), ("expired", "e0"), ("withheld", None)]
    assert listed[3:] == [("merge_conflict", f"c{i}") for i in range(1, 18)]
    assert reply["kinds"] == {"merge_conflict": 25, "expired": 3, "withheld": 1}
    assert reply["note"].startswith("20 of 29 findings listed")


def test_under_the_cap_the_order_is_one_of_each_kind_then_errors_first(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        base = s.health()
    found = [Finding("expired", "past", f"k/e{i}.md", f"e{i}") for i in range(3)]
    found += [Finding("merge_conflict", "both", f"k/c{i}.md", f"c{i}") for i in range(2)]
    report = HealthReport(layers=base.layers, nodes=5, buckets=base.buckets, findings=tuple(found))
    reply = _health_reply(report.to_dict())
    assert [f["node_id"] for f in reply["findings"]] == ["c0", "e0", "c1", "e1", "e2"]
    assert "note" not in reply
