"""A scoped handle's ``compact_index()`` and ``rebuild_index()`` name no file whose owner
cannot be told (session 43, attack atk12 F5).

Agent b's copy of ``d`` broken by hand: agent a's ``sync()`` and ``health()`` named nothing
of it, but a's ``compact_index().problems`` gave b's path and quoted its YAML error
(/tmp/s43/atk12/scope_compact_leak.py). Now a scoped handle is told how many such files
there are (``MaintenanceReport.withheld``), as its sync tells them; an unscoped one is
still told the paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_copies_fresh_s40 import B_FILE, _two_copies

from md_cg import MdCG, Scope

REASON = "the YAML frontmatter does not parse"


@pytest.mark.parametrize("call", ["compact_index", "rebuild_index"])
def test_scoped_maintenance_withholds_another_scopes_broken_file(tmp_path: Path, call: str) -> None:
    root = _two_copies(tmp_path)
    (root / B_FILE).write_text("---\nid: [broken\n---\nb's private text\n")
    with MdCG(str(root), scope=Scope(agent="a")) as a:
        report = getattr(a, call)()
    assert (report.problems, report.withheld) == ((), 1)
    assert "copied" not in repr(report.to_dict()) and "private" not in repr(report.to_dict())
    with MdCG(str(root)) as everyone:
        report = getattr(everyone, call)()
    assert report.withheld == 0
    assert [(path, why.startswith(REASON)) for path, why in report.problems] == [(B_FILE, True)]
