"""Review fixes of session 26 (core, second round): superseded copies crowding dedup's pool,
``export | import`` of a millisecond time, reopen races, dates with an offset, ``get``
following a chain, a millisecond ``updated_at`` that could not be corrected, reopen of an
archived successor, a narrower successor in dedup, and the nits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from md_cg import Edge, MdCG, Node, Scope
from md_cg.cli import app
from md_cg.errors import InvalidNodeError
from md_cg.mcp_server import create_server

T = "Our deployment region is eu-west-1 for the billing service"


def tools(root: Path, store: MdCG) -> dict[str, Any]:
    """The plain tool functions of the MCP server."""
    return dict(create_server(root, store=store).tools)


# -- 1: superseded copies of a text do not crowd its current copy out of dedup's pool ---------


def _superseded_then_current(store: MdCG, n: int = 10) -> str:
    """``n`` superseded copies of ``T`` whose ids sort before any content id (they tie on
    score), then ``T`` remembered anew: its id."""
    store.add(id="newer", layer="knowledge", body="The billing service moved to us-east-2")
    for i in range(n):
        store.add(id=f"a{i:02d}", layer="knowledge", body=T)
        store.supersede(f"a{i:02d}", "newer")
    node, created = store.add_unique(layer="knowledge", body=T)
    assert created and node.id.startswith("our-deployment-region")
    return node.id


def test_superseded_copies_do_not_crowd_the_current_one_out_of_identical(tmp_path: Path) -> None:
    """Review s26 rev6 (MEDIUM): identical() read the best ten hits, all superseded, and
    returned []; add_unique and MCP remember then stored T once more each time."""
    root = tmp_path / "m"
    with MdCG(root, refresh_interval=0) as store:
        cur = _superseded_then_current(store)
        assert store.identical(T) == [cur]
        assert store.identical(T, "knowledge") == [cur]
        again, created = store.add_unique(layer="knowledge", body=T)
        assert (again.id, created) == (cur, False)
        reply = tools(root, store)["remember"](body=T, layer="knowledge", verification_basis="data")
        assert (reply["id"], reply["existing"]) == (cur, True)
        expected = {"newer", cur} | {f"a{i:02d}" for i in range(10)}
        assert set(store.ids()) == expected


def test_organize_matches_the_current_copy_past_superseded_ones(tmp_path: Path) -> None:
    """The organize dry run's near pool (twenty hits) and apply's stored-copy check had
    the same hole."""
    with MdCG(tmp_path / "m", refresh_interval=0) as store:
        cur = _superseded_then_current(store, 20)
        candidate = [{"layer": "knowledge", "title": "region", "content": T}]
        result = store.organize("dryRun", candidates=candidate)
        assert [(i.verdict, i.match.id if i.match else None) for i in result.items] == [("near", cur)]


def test_organize_apply_finds_a_copy_stored_since_the_dry_run(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m", refresh_interval=0) as store:
        store.add(id="newer", layer="knowledge", body="The billing service moved to us-east-2")
        body = f"# region\n\n{T}\n"
        for i in range(10):
            store.add(id=f"a{i:02d}", layer="knowledge", body=body)
            store.supersede(f"a{i:02d}", "newer")
        candidate = [{"layer": "knowledge", "title": "region", "content": T}]
        run = store.organize("dryRun", candidates=candidate)
        assert [i.verdict for i in run.items] == ["new"]
        copy = store.add(id="zcopy", layer="knowledge", body=body)  # stored since the dry run
        receipt = store.organize("apply", run_id=run.run_id, decisions=[{"action": "save", "index": 0}])
        assert receipt.saved_ids == () and receipt.counts["saved"] == 0
        assert set(store.ids()) == {"newer", copy.id} | {f"a{i:02d}" for i in range(10)}


# -- 9: a successor narrower than the memory does not make it stale for dedup ------------------


def test_an_agent_private_successor_does_not_close_a_shared_fact_for_dedup(tmp_path: Path) -> None:
    """Review s26 rev6 (t13): agent-b's private note superseding a shared fact made an
    unscoped caller's add store the shared text a second time."""
    root = tmp_path / "m"
    text = "The shared printer is on floor three"
    with MdCG(root) as store:
        shared = store.add(layer="knowledge", body=text).id
    with MdCG(root, scope=Scope(agent="agent-b")) as b:
        private = b.add(
            layer="knowledge",
            body="Agent b: the printer moved",
            edges=[Edge(target=shared, type="supersedes")],
        ).id
    with MdCG(root) as store:
        assert store.superseded_by(shared) == private  # the edge holds; search still hides it
        assert store.identical(text) == [shared]
        node, created = store.add_unique(layer="knowledge", body=text)
        assert (node.id, created) == (shared, False)
        assert set(store.ids()) == {shared, private}
    with MdCG(root, scope=Scope(agent="agent-a")) as a:
        assert a.identical(text) == [shared]


# -- 2: export | import of a memory whose file holds a time in milliseconds --------------------


def cli(*args: Any, code: int = 0) -> Any:
    result = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"}).invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def test_export_then_import_carries_a_time_in_milliseconds_with_a_warning(tmp_path: Path) -> None:
    """Review s26 rev6 (MEDIUM, t9_ms2): the documented round trip aborted with
    "1 bad record(s); nothing was imported"."""
    root, dump, copy = tmp_path / "m", tmp_path / "dump.jsonl", tmp_path / "copy"
    with MdCG(root) as s:
        s.add(id="fine", body="a fine note")
        legacy = Node(
            id="legacy",
            layer="knowledge",
            body="legacy note",
            created_at=1700000000123,
            updated_at=1700000000456,
        )
        s.add_many([legacy], stamp=False)
        legacy_file = (root / s.entry("legacy").path).read_bytes()
    cli("--root", root, "export", "--out", dump)
    result = cli("--root", copy, "import", dump)
    assert result.stderr == (
        f"warning: {dump} line 2: node 'legacy': field 'created_at' is 1700000000123.0 seconds since the "
        "epoch, outside the years 1-9999; milliseconds since the epoch? md-cg reads seconds; imported as it "
        "is (update the field to correct it)\n"
    )
    assert "2 new, 0 changed, 0 unchanged, 1 with a time outside the years 1-9999 (warned)" in result.stdout
    with MdCG(copy) as s:
        assert s.ids() == ["fine", "legacy"]
        assert (copy / s.entry("legacy").path).read_bytes() == legacy_file
        with pytest.raises(InvalidNodeError, match=r"field 'created_at' is 1700000000123\.0 seconds"):
            s.add(id="new", body="b", created_at=1700000000123)  # new input is still refused
        assert s.update("legacy", created_at=1700000000.123).created_at == 1700000000.123
    data = json.loads(cli("--root", tmp_path / "c2", "import", dump, "--json").stdout)
    assert data["warned"] == [
        {
            "where": "line 2",
            "node_id": "legacy",
            "reason": "field 'created_at' is 1700000000123.0 seconds since the epoch, outside the years "
            "1-9999; milliseconds since the epoch? md-cg reads seconds",
        }
    ]
