"""Organise, session 29 review (rev1, medium): one text saved twice by one apply.

(a) Two candidates of one run with one text: the dry run said ``new`` for both and
apply stored two identical memories in one commit. Now the later one is a ``repeat``
of the earlier, and apply skips a save whose text an earlier save of the same apply
stores. (b) A candidate the dry run called ``exact`` (its title and content are a
memory's whole body) was saved anyway: apply only compared whole bodies. Now apply
uses the dry run's rule. The CLI and the MCP tool (strict) refuse such an apply.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app
from md_cg.errors import OrganizeApplyError

TEA = "The user drinks green tea every morning"
COFFEE = {"layer": "knowledge", "title": "Coffee order", "content": "Oat-milk flat white, no sugar."}
EXACT = {"layer": "knowledge", "title": TEA, "content": TEA}
COFFEE_BODY = "# Coffee order\n\nOat-milk flat white, no sugar.\n"
SAVE_ALL = [{"action": "save", "index": i} for i in range(3)]
REPEAT_REASON = "decision 1: candidate 1's text is saved by decision 0 (candidate 0)"
EXACT_REASON = "decision 2: candidate 2's text is stored already, as 'kp_tea'"


def tea_store(root: Path) -> MdCG:
    store = MdCG(root)
    store.add(id="kp_tea", body=TEA)
    return store


def bodies(store: MdCG) -> dict[str, str]:
    return {n.id: n.body for n in store.iter_nodes()}


def test_the_dry_run_calls_a_candidate_repeating_an_earlier_one_a_repeat(tmp_path: Path) -> None:
    store = tea_store(tmp_path / "s")
    candidates = [
        COFFEE,
        dict(COFFEE),
        EXACT,
        {**COFFEE, "title": "coffee ORDER!"},  # the same title key and content: the same text
        {**COFFEE, "content": "Oat-milk flat white, one sugar."},  # another fact
        {**COFFEE, "sensitivity": "secret"},  # covered by candidate 0 (less sensitive): a repeat
        {"layer": "knowledge", "title": "Tea", "content": "Green", "sensitivity": "secret"},
        {"layer": "knowledge", "title": "Tea", "content": "Green"},  # not covered by the secret one
        {**COFFEE, "content": "- **Oat-milk** flat white,   no sugar."},  # marks that say nothing
        {"layer": "knowledge", "title": "Tea", "content": "Green"},
    ]
    r = store.organize("dryRun", candidates=candidates)
    assert [(i.index, i.verdict, i.match and i.match.id, i.repeats) for i in r.items] == [
        (0, "new", None, None),
        (1, "repeat", None, 0),
        (2, "exact", "kp_tea", None),
        (3, "repeat", None, 0),
        (4, "new", None, None),
        (5, "repeat", None, 0),
        (6, "new", None, None),
        (7, "new", None, None),
        (8, "repeat", None, 0),
        (9, "repeat", None, 7),
    ]
    assert r.items[1].to_dict() == {
        "index": 1,
        "layer": "knowledge",
        "title": "Coffee order",
        "verdict": "repeat",
        "match": None,
        "repeats": 0,
    }
    assert "repeats" not in r.items[0].to_dict()
    assert dict(r.counts) == {
        "total": 10,
        "exact": 1,
        "near": 0,
        "same_title": 0,
        "new": 4,
        "repeat": 5,
        "skipped": 0,
        "truncated": 0,
    }


def test_apply_saves_one_text_once_and_skips_what_the_dry_run_called_exact(tmp_path: Path) -> None:
    """The reviewer's repro: three saves, two identical candidates and an exact one."""
    store = tea_store(tmp_path / "s")
    r = store.organize("dryRun", candidates=[COFFEE, dict(COFFEE), EXACT])
    rec = store.organize("apply", run_id=r.run_id, decisions=SAVE_ALL)
    assert (rec.status, rec.applied, len(rec.saved_ids)) == ("degraded", 1, 1)
    assert [(s.index, s.field, s.id, s.reason) for s in rec.skipped] == [
        (1, "index", None, REPEAT_REASON),
        (2, "index", "kp_tea", EXACT_REASON),
    ]
    assert dict(rec.counts) == {"saved": 1, "archived": 0, "discarded": 0, "skipped": 2}
    assert bodies(store) == {"kp_tea": TEA, rec.saved_ids[0]: COFFEE_BODY}


def test_a_repeat_is_saved_when_the_earlier_candidate_is_not(tmp_path: Path) -> None:
    store = tea_store(tmp_path / "s")
    r = store.organize("dryRun", candidates=[COFFEE, dict(COFFEE)])
    decisions = [{"action": "discard", "index": 0}, {"action": "save", "index": 1}]
    rec = store.organize("apply", run_id=r.run_id, decisions=decisions)
    assert (rec.status, rec.skipped, rec.discarded, len(rec.saved_ids)) == ("ok", (), (0,), 1)
    assert bodies(store) == {"kp_tea": TEA, rec.saved_ids[0]: COFFEE_BODY}


def test_a_save_of_a_text_stored_since_without_a_heading_is_skipped(tmp_path: Path) -> None:
    """Stored since the dry run as `mdcg add` stores it (no heading): the dry run's
    `exact` rule holds (title and content are its whole body); same_body did not."""
    root = tmp_path / "s"
    store = tea_store(root)
    r = store.organize("dryRun", candidates=[COFFEE])
    assert [i.verdict for i in r.items] == ["new"]
    with MdCG(root) as other:
        other.add(id="kp_coffee", body="Coffee order\nOat-milk flat white, no sugar.")
    rec = store.organize("apply", run_id=r.run_id, decisions=[{"action": "save", "index": 0}])
    assert (rec.status, rec.applied, rec.saved_ids) == ("degraded", 0, ())
    assert [(s.index, s.id, s.reason) for s in rec.skipped] == [
        (0, "kp_coffee", "decision 0: candidate 0's text is stored already, as 'kp_coffee'")
    ]
    assert set(bodies(store)) == {"kp_tea", "kp_coffee"}


def test_strict_apply_refuses_both_and_the_run_stays_open(tmp_path: Path) -> None:
    store = tea_store(tmp_path / "s")
    r = store.organize("dryRun", candidates=[COFFEE, dict(COFFEE), EXACT])
    message = f"2 decision(s) the dry run does not back: {REPEAT_REASON}; {EXACT_REASON}; nothing was applied"
    with pytest.raises(OrganizeApplyError, match=re.escape(message)):
        store.organize("apply", run_id=r.run_id, decisions=SAVE_ALL, strict=True)
    assert bodies(store) == {"kp_tea": TEA}
    fixed = [
        {"action": "save", "index": 0},
        {"action": "discard", "index": 1},
        {"action": "discard", "index": 2},
    ]
    rec = store.organize("apply", run_id=r.run_id, decisions=fixed, strict=True)
    assert (rec.status, rec.discarded, len(rec.saved_ids)) == ("ok", (1, 2), 1)
    assert bodies(store) == {"kp_tea": TEA, rec.saved_ids[0]: COFFEE_BODY}


def test_cli_organize_shows_the_repeat_and_refuses_the_duplicate_saves(tmp_path: Path) -> None:
    root = tmp_path / "s"
    tea_store(root).close()
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    cands = tmp_path / "c.json"
    cands.write_text(json.dumps([COFFEE, COFFEE, EXACT]), "utf-8")
    dry = runner.invoke(app, ["organize", "--dry-run", str(cands), "--root", str(root)])
    assert dry.exit_code == 0, dry.output
    lines = dry.stdout.splitlines()
    assert lines[0].endswith(
        "(dryRun): ok; total 3, exact 1, near 0, same_title 0, new 1, repeat 1, skipped 0, truncated 0"
    )
    assert lines[1:4] == [
        "  #0 new: Coffee order",
        "  #1 repeat (of #0): Coffee order",
        f"  #2 exact (matches kp_tea, score 1.0): {TEA}",
    ]
    run_id = lines[0].split()[0]
    decisions = tmp_path / "d.json"
    decisions.write_text(json.dumps(SAVE_ALL), "utf-8")
    refused = runner.invoke(
        app, ["organize", "--apply", run_id, "--decisions", str(decisions), "--root", str(root)]
    )
    assert refused.exit_code == 2 and refused.stdout == ""
    assert f"2 decision(s) the dry run does not back: {REPEAT_REASON}; {EXACT_REASON}" in refused.stderr
    with MdCG(root) as store:
        assert bodies(store) == {"kp_tea": TEA}


def test_mcp_organize_refuses_the_duplicate_saves(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from md_cg.mcp_server import create_server

    root = tmp_path / "s"
    tea_store(root).close()
    server = create_server(root)
    out: dict[str, Any] = {}

    async def run() -> None:
        async with Client(server) as client:
            dry = await client.call_tool(
                "organize", {"mode": "dryRun", "candidates": [COFFEE, COFFEE, EXACT]}
            )
            out["dry"] = json.loads(dry.content[0].text)
            args = {"mode": "apply", "run_id": out["dry"]["run_id"], "decisions": SAVE_ALL}
            refused = await client.call_tool("organize", args)
            out["refused"] = (refused.is_error, refused.content[0].text)

    anyio.run(run)
    server.store.close()
    items = out["dry"]["items"]
    assert [(i["verdict"], i.get("repeats")) for i in items] == [
        ("new", None),
        ("repeat", 0),
        ("exact", None),
    ]
    is_error, text = out["refused"]
    assert is_error and f"{REPEAT_REASON}; {EXACT_REASON}" in text
    with MdCG(root) as store:
        assert bodies(store) == {"kp_tea": TEA}


def test_apply_saves_a_text_again_only_for_readers_the_earlier_save_misses(tmp_path: Path) -> None:
    """A secret save does not hold the text for normal readers; a normal one does."""
    store = tea_store(tmp_path / "s")
    green = {"layer": "knowledge", "title": "Tea", "content": "Green"}
    r = store.organize("dryRun", candidates=[{**green, "sensitivity": "secret"}, green, dict(green)])
    assert [(i.verdict, i.repeats) for i in r.items] == [("new", None), ("new", None), ("repeat", 1)]
    rec = store.organize("apply", run_id=r.run_id, decisions=SAVE_ALL)
    assert [(s.index, s.reason) for s in rec.skipped] == [
        (2, "decision 2: candidate 2's text is saved by decision 1 (candidate 1)")
    ]
    saved = {store.get(i).sensitivity: store.get(i).body for i in rec.saved_ids}
    assert saved == {"secret": "# Tea\n\nGreen\n", None: "# Tea\n\nGreen\n"}
