"""Organize input review (session 29, round 6): a candidate ``add`` would refuse (a NUL
character, git conflict markers) is skipped by the dry run with add's reason and never
written by apply; an apply of no decisions does not use up the dry run (strict refuses
it), and the "already applied" refusal says what to do next."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_organize import SAVE_CANDIDATES, seeded
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg import organize as organize_mod
from md_cg.cli import app
from md_cg.errors import InvalidNodeError, OrganizeApplyError

NUL = {"layer": "knowledge", "title": "n\x00l", "content": "a\x00b"}
MARKERS = {"layer": "knowledge", "title": "Merge", "content": "<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs"}
FINE = {"layer": "knowledge", "title": "Bike", "content": "The user's bike is a blue Brompton."}
NUL_REASON = (
    "the body holds a NUL character (at 3); git would take the file for binary and show no diff of it"
)
MARKERS_REASON = (
    "the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) outside a code block, so sync "
    "would take it for an unresolved merge; put such text in a fenced code block (```)"
)


def _files_with_nul(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*.md") if b"\x00" in p.read_bytes())


def _add_refusal(store: MdCG, candidate: dict[str, Any]) -> str:
    with pytest.raises(InvalidNodeError) as err:
        store.add(
            id="kp_x",
            layer="knowledge",
            body=organize_mod.node_body(candidate["title"], candidate["content"]),
        )
    return str(err.value).removeprefix("node 'kp_x': ")


def test_the_dry_run_skips_a_candidate_add_refuses_with_adds_reason(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    assert _add_refusal(store, NUL) == NUL_REASON and _add_refusal(store, MARKERS) == MARKERS_REASON
    dry = store.organize(candidates=[NUL, FINE, MARKERS])
    assert (dry.status, [(i.index, i.verdict) for i in dry.items]) == ("degraded", [(1, "new")])
    assert [(s.index, s.field, s.reason) for s in dry.skipped] == [
        (0, "body", f"candidate 0: {NUL_REASON}"),
        (2, "body", f"candidate 2: {MARKERS_REASON}"),
    ]
    with pytest.raises(OrganizeApplyError) as err:
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}], strict=True)
    assert "decision 0: candidate 0 was not accepted by this dry run" in str(err.value)
    r = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 1}], strict=True)
    assert (r.status, r.applied) == ("ok", 1)
    assert _files_with_nul(store.root) == []


def test_apply_never_writes_a_nul_a_dry_run_recorded_before_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = seeded(tmp_path / "s")
    monkeypatch.setattr(organize_mod, "_unsaveable", lambda c: None, raising=False)  # the old dry run
    dry = store.organize(candidates=[NUL, FINE])
    monkeypatch.undo()
    assert [(i.index, i.verdict) for i in dry.items] == [(0, "new"), (1, "new")]
    before = sorted(store.ids())
    r = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    assert (r.status, r.applied, r.saved_ids) == ("degraded", 0, ())
    assert [s.reason for s in r.skipped] == [f"decision 0: candidate 0: {NUL_REASON}"]
    assert sorted(store.ids()) == before and _files_with_nul(store.root) == []


def test_an_apply_of_no_decisions_leaves_the_run_open(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES)
    r = store.organize("apply", run_id=dry.run_id, decisions=[])
    assert (r.status, r.applied, dict(r.counts)) == (
        "noop",
        0,
        {"saved": 0, "archived": 0, "discarded": 0, "skipped": 0},
    )
    with pytest.raises(OrganizeApplyError) as err:
        store.organize("apply", run_id=dry.run_id, decisions=(), strict=True)
    assert (
        str(err.value) == "no decisions: give at least one save, discard or archive; the dry run stays open"
    )
    done = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 1}], strict=True)
    assert (done.status, done.applied, len(done.saved_ids)) == ("ok", 1, 1)
    with pytest.raises(OrganizeApplyError) as err:
        store.organize("apply", run_id=dry.run_id, decisions=[], strict=True)
    assert str(err.value) == (
        f"dry run '{dry.run_id}' was already applied at {done.created_at} by {done.run_id}; a dry run "
        "applies once: run a new dry run (mode dryRun) with the candidates still to decide and apply that"
    )


def test_the_mcp_tool_and_the_cli_refuse_no_decisions_and_keep_the_run(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client
    from test_mcp import _err, _ok

    from md_cg.mcp_server import create_server

    root = tmp_path / "s"
    seeded(root).close()
    server = create_server(root)
    no = "no decisions: give at least one save, discard or archive; the dry run stays open"

    async def run() -> str:
        async with Client(server) as client:
            dry = _ok(await client.call_tool("organize", {"mode": "dryRun", "candidates": [NUL, FINE]}))
            assert [s["reason"] for s in dry["skipped"]] == [f"candidate 0: {NUL_REASON}"]
            call = {"mode": "apply", "run_id": dry["run_id"], "decisions": []}
            assert no in _err(await client.call_tool("organize", call))
            call["decisions"] = [{"action": "save", "index": 1}]
            assert _ok(await client.call_tool("organize", call))["status"] == "ok"
            assert "run a new dry run (mode dryRun)" in _err(await client.call_tool("organize", call))
            return str(dry["run_id"])

    anyio.run(run)
    assert _files_with_nul(root) == []
    runner = CliRunner()
    dry_file, empty = tmp_path / "c.json", tmp_path / "d.json"
    dry_file.write_text(json.dumps([FINE | {"title": "Tent"}]))
    empty.write_text("[]")
    report = json.loads(
        runner.invoke(app, ["organize", "--dry-run", str(dry_file), "--root", str(root), "--json"]).stdout
    )
    out = runner.invoke(
        app, ["organize", "--apply", report["run_id"], "--decisions", str(empty), "--root", str(root)]
    )
    assert out.exit_code != 0 and no in out.output
    empty.write_text(json.dumps([{"action": "save", "index": 0}]))
    out = runner.invoke(
        app, ["organize", "--apply", report["run_id"], "--decisions", str(empty), "--root", str(root)]
    )
    assert out.exit_code == 0 and ": ok; saved 1" in out.output
