"""Review fixes of session 26 (core, second round): superseded copies crowding dedup's pool,
``export | import`` of a millisecond time, reopen races, dates with an offset, ``get``
following a chain, a millisecond ``updated_at`` that could not be corrected, reopen of an
archived successor, a narrower successor in dedup, and the nits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from md_cg import Edge, MdCG, Node, Scope, visibility
from md_cg.cli import app
from md_cg.errors import InvalidArgumentError, InvalidNodeError, MdcgError
from md_cg.mcp_server import create_server
from md_cg.render import parse_when

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
        s.add_many([legacy], stamp=False, checked=False)
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


# -- 3 and 8: reopen reads its successors under their locks; archived ones are unlinked too ----

REPO = Path(__file__).resolve().parents[1]


def _office(root: Path) -> None:
    with MdCG(root) as s:
        s.add(id="a", layer="knowledge", body="The office is in Berlin")
        s.add(id="b", layer="knowledge", body="The office is in Munich")
        s.add(id="c", layer="knowledge", body="The office is in Hamburg")
        s.supersede("a", "b")


def _in_another_process(root: Path, code: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    script = f"from md_cg import MdCG\nwith MdCG({str(root)!r}) as t:\n    {code}\n"
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)


def _after_the_plan(monkeypatch: pytest.MonkeyPatch, root: Path, code: str) -> None:
    """Run ``code`` in another process right after the reopen of 'a' planned its
    successors, before it takes their locks (the reviewer's interleaving)."""
    real = visibility.linked_successors
    fired: list[int] = []

    def planned_then_raced(state: Any, node_id: str, scope: Any) -> list[str]:
        out = real(state, node_id, scope)
        if node_id == "a" and not fired:
            fired.append(1)
            _in_another_process(root, code)
        return out

    monkeypatch.setattr(visibility, "linked_successors", planned_then_raced)


def test_reopen_unlinks_a_successor_committed_between_its_plan_and_its_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review s26 rev6 (t2_race): a supersede by c committed in between survived the
    reopen, which left 'a' with valid_until None yet hidden by c."""
    root = tmp_path / "m"
    _office(root)
    _after_the_plan(monkeypatch, root, "t.supersede('a', 'c')")
    with MdCG(root, refresh_interval=0) as s:
        node, unlinked = s.reopen("a")
        assert node.valid_until is None and unlinked == ["b", "c"]
        assert s.successors("a") == [] and s.get("b").edges == [] and s.get("c").edges == []
        # b and c tie: the most recently changed first (session 43; was by id)
        assert [r.id for r in s.search("office Berlin", record=False)[0]] == ["a", "c", "b"]
        assert s.health().findings == ()


def test_reopen_of_a_memory_whose_successor_is_forgotten_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review s26 rev6 (t2b_race_forget): the update failed with "no node with id 'b'"."""
    root = tmp_path / "m"
    _office(root)
    _after_the_plan(monkeypatch, root, "t.forget('b', 'wrong')")
    with MdCG(root, refresh_interval=0) as s:
        node, unlinked = s.reopen("a")
        assert node.valid_until is None and unlinked == []
        assert s.ids() == ["a", "c"] and s.successors("a") == []


def test_cli_and_mcp_report_what_the_reopen_unlinked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "m"
    _office(root)
    _after_the_plan(monkeypatch, root, "t.supersede('a', 'c')")
    out = cli("--root", root, "update", "a", "--reopen").stdout
    assert out.splitlines()[1] == "a: no longer superseded by b, c (their supersedes edge removed)"
    other = tmp_path / "o"
    _office(other)
    monkeypatch.undo()
    _after_the_plan(monkeypatch, other, "t.forget('b', 'wrong')")
    with MdCG(other) as s:
        reply = tools(other, s)["update"](id="a", reopen=True)
        assert reply["updated"] == ["reopen"] and "successors_unlinked" not in reply
        assert s.ids() == ["a", "c"]


def test_a_reopen_whose_successors_never_settle_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    _office(root)
    calls = iter(range(100))
    monkeypatch.setattr(visibility, "linked_successors", lambda *_a: [f"gone{next(calls)}"])
    with MdCG(root) as s:
        with pytest.raises(MdcgError, match=r"reopen of 'a': the memories superseding it kept changing"):
            s.reopen("a")
        assert s.get("a").valid_until is not None and s.get("b").edges[0].target == "a"


def test_reopen_unlinks_an_archived_successor_so_unarchiving_it_does_not_hide_the_memory(
    tmp_path: Path,
) -> None:
    """Review s26 rev6 (t17): the archived successor kept its edge; unarchived, it hid the
    reopened memory again with no word to the caller."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="old", layer="knowledge", body="The boat is green")
        s.add(id="new", layer="knowledge", body="The boat is yellow")
        s.supersede("old", "new")
        s.archive("new")
        node, unlinked = s.reopen("old")
        assert unlinked == ["new"] and node.valid_until is None
        assert s.get("new", include_archived=True).edges == []
        s.unarchive("new")
        assert s.superseded_by("old") is None
        assert [r.id for r in s.search("boat green", record=False)[0]] == ["old", "new"]
        s.supersede("old", "new")
        s.update("old", valid_until=None)  # update reopens the same way
        assert s.get("new").edges == [] and s.superseded_by("old") is None


# -- 4: a date with an offset or Z is that calendar day in that offset --------------------------


def _utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("2026-06-30", _utc(2026, 6, 30), _utc(2026, 6, 30, 23, 59, 59, 999999)),
        ("2026-06-30Z", _utc(2026, 6, 30), _utc(2026, 6, 30, 23, 59, 59, 999999)),
        ("2026-06-30z", _utc(2026, 6, 30), _utc(2026, 6, 30, 23, 59, 59, 999999)),
        ("20260630Z", _utc(2026, 6, 30), _utc(2026, 6, 30, 23, 59, 59, 999999)),
        ("2026-06-30+08:00", _utc(2026, 6, 29, 16), _utc(2026, 6, 30, 15, 59, 59, 999999)),
        ("2026-06-30+0800", _utc(2026, 6, 29, 16), _utc(2026, 6, 30, 15, 59, 59, 999999)),
        ("2026-06-30+08", _utc(2026, 6, 29, 16), _utc(2026, 6, 30, 15, 59, 59, 999999)),
        ("20260630+08:00", _utc(2026, 6, 29, 16), _utc(2026, 6, 30, 15, 59, 59, 999999)),
        ("2026-06-30-05:30", _utc(2026, 6, 30, 5, 30), _utc(2026, 7, 1, 5, 29, 59, 999999)),
        ("2026-06-30+00:00", _utc(2026, 6, 30), _utc(2026, 6, 30, 23, 59, 59, 999999)),
        # a time of day keeps its instant either way
        ("2026-06-30T12:00+08:00", _utc(2026, 6, 30, 4), _utc(2026, 6, 30, 4)),
        ("2026-06-30T12:00Z", _utc(2026, 6, 30, 12), _utc(2026, 6, 30, 12)),
        ("2026-06-30T12:00", _utc(2026, 6, 30, 12), _utc(2026, 6, 30, 12)),
        # the last day a reply can show ends at its last whole second
        ("9999-12-31-05:00", _utc(9999, 12, 31, 5), _utc(9999, 12, 31, 23, 59, 59)),
    ],
)
def test_parse_when_reads_a_date_with_an_offset_as_that_day_there(
    text: str, start: float, end: float
) -> None:
    """Review s26 rev6 (t16, t7): '2026-06-30+08:00' was read as 08:00Z, '2026-06-30Z' as
    midnight even as an until."""
    assert parse_when(text, name="--since") == start
    assert parse_when(text, name="--until", end_of_day=True) == end


NOT_AN_OFFSET = "the offset {!r} is not one (hours 00-23, minutes 00-59)"
EXPECTED = "expected an ISO date or time (2026-05-01, 2026-05-01T12:00Z) or a duration back from now"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-06-30+24:00", "--until '2026-06-30+24:00': " + NOT_AN_OFFSET.format("+24:00")),
        ("2026-06-30+08:60", "--until '2026-06-30+08:60': " + NOT_AN_OFFSET.format("+08:60")),
        ("0001-01-01+08:00", "--until '0001-01-01+08:00' is out of range: the time must fall in the years 1 "
         "to 9999 (UTC)"),
        ("2026-06-30+8", f"--until '2026-06-30+8': {EXPECTED} (7d, 12h, 30m, 45s, 2w)"),
    ],
)  # fmt: skip
def test_parse_when_refuses_a_bad_offset_naming_the_value(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse_when(text, name="--until", end_of_day=text.startswith("2026"))
    assert str(err.value) == message


def test_list_and_mcp_read_an_offset_date_as_that_day(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        times = {"early": _utc(2026, 6, 29, 15), "noon": _utc(2026, 6, 30, 12), "late": _utc(2026, 6, 30, 17)}
        s.add_many(
            [
                Node(id=i, layer="knowledge", body=f"note {i}", created_at=t, updated_at=t)
                for i, t in times.items()
            ],
            stamp=False,
        )
        day = "2026-06-30+08:00"  # 2026-06-29T16:00Z .. 2026-06-30T15:59:59.999999Z
        listed = tools(root, s)["list"](since=day, until=day)
        assert [i["id"] for i in listed["items"]] == ["noon"]
        assert [i["id"] for i in tools(root, s)["list"](until="2026-06-30Z")["items"]] == [
            "late",
            "noon",
            "early",
        ]
    data = json.loads(cli("--root", root, "list", "--since", day, "--until", day, "--json").stdout)
    assert [i["id"] for i in data["items"]] == ["noon"]
    data = json.loads(cli("--root", root, "list", "--until", "2026-06-29+09:00", "--json").stdout)
    assert [i["id"] for i in data["items"]] == []
    data = json.loads(cli("--root", root, "list", "--until", "2026-06-29-08:00", "--json").stdout)
    assert [i["id"] for i in data["items"]] == ["early"]


# -- 5: get names the current version at the end of a chain ------------------------------------


def test_get_names_the_current_version_at_the_end_of_a_chain(tmp_path: Path) -> None:
    """Review s26 rev6 (t18): a superseded by b superseded by c named b."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        for i, body in (("a", "The cat is Miso"), ("b", "The cat is Tofu"), ("c", "The cat is Natto")):
            s.add(id=i, layer="knowledge", body=body)
        s.add(id="x", layer="knowledge", body="The dog is Rex")
        s.add(id="y", layer="knowledge", body="The dog is Max")
        s.supersede("a", "b")
        s.supersede("b", "c")
        s.update("x", edges=[Edge(target="y", type="supersedes")])  # a cycle, by hand
        s.update("y", edges=[Edge(target="x", type="supersedes")])
        get = tools(root, s)["get"]
        assert [get(id=i).get("superseded_by") for i in ("a", "b", "c")] == ["c", "c", None]
        assert (get(id="x")["superseded_by"], get(id="y")["superseded_by"]) == ("y", "x")
        s.archive("a")
    assert json.loads(cli("--root", root, "get", "a", "--archived", "--json").stdout)["superseded_by"] == "c"
    assert cli("--root", root, "get", "b").stdout.splitlines()[1] == "superseded_by: c"
    assert "superseded_by" not in cli("--root", root, "get", "c").stdout


# -- 6: a millisecond updated_at in a file is corrected by the next write -----------------------


def test_a_write_corrects_an_updated_at_in_milliseconds(tmp_path: Path) -> None:
    """Review s26 rev6 (t21): the stamp was max(now, stored + 1 µs), and 1 µs is below a
    float's resolution at 1.7e12: no write could bring updated_at back."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        legacy = Node(id="legacy", layer="knowledge", body="legacy note", updated_at=1700000000456)
        s.add_many([legacy], stamp=False, checked=False)
        before = time.time()
        first = s.update("legacy", importance=0.5).updated_at
        assert first is not None and before <= first <= time.time()
        second = s.update("legacy", importance=0.6).updated_at
        assert second is not None and second > first  # in range again: the last write wins
        assert "updated_at: 1700000000456" not in (root / s.entry("legacy").path).read_text()
        edited = s.edit_text("legacy", lambda t: t.replace("legacy note", "legacy note, edited"))
        assert edited.updated_at is not None and edited.updated_at > second
    data = json.loads(cli("--root", root, "list", "--until", "0d", "--json").stdout)
    assert [i["id"] for i in data["items"]] == ["legacy"]


# -- 10: nits ----------------------------------------------------------------------------------


def test_the_last_microsecond_of_year_9999_is_a_time_add_takes(tmp_path: Path) -> None:
    """It rounds to the float of 10000-01-01T00:00:00Z and was refused as out of range."""
    with MdCG(tmp_path / "m") as s:
        node = s.add(id="e1", layer="knowledge", body="edge one", created_at="9999-12-31T23:59:59.999999Z")
        assert node.created_at == 253402300800.0 and s.get("e1").created_at == 253402300800.0
        when = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
        assert (
            s.add(id="e2", layer="knowledge", body="edge two", created_at=when).created_at == 253402300800.0
        )
        with pytest.raises(InvalidNodeError, match=r"field 'created_at' is 253402300800\.5 seconds"):
            s.add(id="e3", layer="knowledge", body="edge three", created_at=253402300800.5)


def test_a_search_filter_shows_its_until_to_the_microsecond(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        t = _utc(2026, 6, 30, 12)
        s.add_many(
            [Node(id="n", layer="knowledge", body="lantern note", created_at=t, updated_at=t)], stamp=False
        )
        reply = tools(root, s)["search"](query="lantern", since="2026-06-30", until="2026-06-30")
        assert reply["meta"]["filter"] == {
            "since": "2026-06-30T00:00:00Z",
            "until": "2026-06-30T23:59:59.999999Z",
            "matching": 1,
        }
    out = cli("--root", root, "search", "lantern", "--until", "2026-06-30").stdout
    assert "filter: until 2026-06-30T23:59:59.999999Z (1 memory passes)" in " ".join(out.split())


def test_update_reopen_help_names_the_edge_removal() -> None:
    out = " ".join(cli("update", "--help").stdout.split())
    assert "clear valid_until and remove the supersedes edge to it from each memory that has one" in out
