"""Review fixes of session 26 (core): a superseded text remembered again, reopen of a memory
whose successor lives, a date-only ``until``, ``get`` naming the successor, paging under
writes with a fixed ``until``, and times in milliseconds refused on every write."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.cli import app
from md_cg.errors import InvalidArgumentError, InvalidNodeError
from md_cg.mcp_server import create_server
from md_cg.render import parse_when
from md_cg.transfer import import_nodes

ALVAREZ = "The user's dentist is Dr. Alvarez at Smile Studio Baixa."
KIM = "The user switched dentists: now Dr. Sara Kim at Dental Lab Chiado."


def tools(root: Path, store: MdCG) -> dict[str, Any]:
    """The plain tool functions of the MCP server."""
    return dict(create_server(root, store=store).tools)


def cli(*args: Any, code: int = 0) -> Any:
    result = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"}).invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def search_ids(store: MdCG, query: str) -> list[str]:
    return [r.id for r in store.search(query, record=False)[0]]


# -- 1: a superseded text remembered again is stored anew ------------------------------------


def test_remember_again_of_a_superseded_text_stores_it_anew_through_mcp(tmp_path: Path) -> None:
    """Review s26 (HIGH): the reply was {"id": <the superseded one>, "existing": true} and
    nothing was written; search kept serving only Dr. Kim."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        t = tools(root, store)
        old = t["remember"](body=ALVAREZ, verification_basis="data")["id"]
        kim = t["remember"](body=KIM, verification_basis="data")["id"]
        t["supersede"](old=old, new=kim, reason="switched")
        again = t["remember"](body=ALVAREZ, verification_basis="data")
        assert "existing" not in again and again["id"] not in (old, kim)
        assert sorted(store.ids()) == sorted([old, kim, again["id"]])
        assert store.get(again["id"]).body == ALVAREZ and store.get(again["id"]).valid_until is None
        assert store.superseded_by(old) == kim and store.superseded_by(again["id"]) is None
        assert sorted(search_ids(store, "Dr. Alvarez Smile Studio Baixa")) == sorted([again["id"], kim])
        # the current copy is now the one a further remember finds
        assert t["remember"](body=ALVAREZ, verification_basis="data")["existing"] is True
        assert t["remember"](body=ALVAREZ)["id"] == again["id"]
        assert store.identical(ALVAREZ) == [again["id"]]


def test_add_unique_and_identical_skip_superseded_and_closed_memories(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        store.add(id="old", body=ALVAREZ)
        store.add(id="kim", body=KIM)
        store.supersede("old", "kim")
        assert store.identical(ALVAREZ) == []
        node, created = store.add_unique(body=ALVAREZ)
        assert created and node.id not in ("old", "kim")
        assert store.identical(ALVAREZ) == [node.id]
        # closed by its own valid_until (its successor forgotten): not current either
        store.add(id="closed", body="The office wifi password is hunter2.", valid_until=1_000_000.0)
        assert store.identical("The office wifi password is hunter2.") == []
        again, created = store.add_unique(body="The office wifi password is hunter2.")
        assert created and again.id != "closed"


def test_organize_dry_run_does_not_match_a_superseded_memory(tmp_path: Path) -> None:
    """Review s26: the candidate was judged "near" the superseded memory."""
    with MdCG(tmp_path / "m") as store:
        store.add(id="old", body=ALVAREZ)
        store.add(id="kim", body=KIM)
        candidate = [{"layer": "knowledge", "title": "dentist", "content": ALVAREZ}]
        before = store.organize("dryRun", candidates=candidate)
        assert [(i.verdict, i.match.id if i.match else None) for i in before.items] == [("near", "old")]
        store.supersede("old", "kim")
        after = store.organize("dryRun", candidates=candidate)
        assert [(i.verdict, i.match) for i in after.items] == [("new", None)]
        run = after.run_id
        receipt = store.organize("apply", run_id=run, decisions=[{"action": "save", "index": 0}])
        assert receipt.counts["saved"] == 1 and receipt.skipped == ()
        (saved,) = receipt.saved_ids
        assert store.get(saved).body == f"# dentist\n\n{ALVAREZ}\n"


# -- 2: reopen makes the memory current while its successor lives ------------------------------


def _berlin_paris(root: Path) -> MdCG:
    s = MdCG(root)
    s.add(id="berlin", body="The user lives in Berlin")
    s.add(id="paris", body="The user lives in Paris")
    s.add(id="rome", body="The user visited Rome, not Berlin")
    s.supersede("berlin", "paris", reason="mistake")
    return s


def test_update_reopen_removes_the_live_successors_edge_in_one_commit(tmp_path: Path) -> None:
    """Review s26 (MEDIUM): update(valid_until=None) said it reopened the memory, but
    the successor's supersedes edge kept it hidden from search."""
    with _berlin_paris(tmp_path / "m") as s:
        s.add(id="lyon", body="The user lives in Lyon")
        s.update("lyon", edges=[{"target": "berlin", "type": "supersedes"}])  # two successors
        assert s.superseded_by("berlin") == "lyon"
        assert search_ids(s, "Berlin") == ["rome", "lyon", "paris"]  # the successors, by their edge
        node = s.update("berlin", valid_until=None)
        assert node.valid_until is None
        # lyon and paris tie: the most recently changed first (session 43; was by id)
        assert search_ids(s, "Berlin") == ["berlin", "rome", "paris", "lyon"]
        assert s.successors("berlin") == [] and s.superseded_by("berlin") is None
        assert s.get("paris").edges == [] and s.get("lyon").edges == []
        paris = (tmp_path / "m" / s.entry("paris").path).read_text()
        assert "edges" not in paris and paris.endswith("---\nThe user lives in Paris\n")
        assert s.get("paris").body == "The user lives in Paris"  # only the edge went
        assert s.health().ok


def test_reopen_through_mcp_and_cli_names_the_unlinked_successor(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _berlin_paris(root) as s:
        reply = tools(root, s)["update"](id="berlin", reopen=True)
        assert search_ids(s, "Berlin") == ["berlin", "rome", "paris"]
        assert reply["updated"] == ["reopen"]
        assert reply["successors_unlinked"] == ["paris"] and reply["successors_unlinked_total"] == 1
        again = tools(root, s)["update"](id="berlin", reopen=True)  # nothing left to unlink
        assert "successors_unlinked" not in again
    other = tmp_path / "c"
    _berlin_paris(other).close()
    out = cli("--root", other, "update", "berlin", "--reopen").stdout
    assert out.splitlines()[1] == "berlin: no longer superseded by paris (their supersedes edge removed)"
    with MdCG(other) as s:
        assert search_ids(s, "Berlin") == ["berlin", "rome", "paris"]
    data = json.loads(cli("--root", other, "update", "berlin", "--reopen", "--json").stdout)
    # nothing left to unlink, nor to clear: a reopen of a current memory writes nothing (s29)
    assert (data["updated"], data["changed"]) == ([], False) and "successors_unlinked" not in data


# -- 3: a date-only until takes in the whole day ------------------------------------------------


def _at(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def _day_store(root: Path) -> MdCG:
    s = MdCG(root)
    times = {
        "before": _at(2026, 6, 29, 23, 59, 59, 999999),
        "midnight": _at(2026, 6, 30),
        "noon": _at(2026, 6, 30, 12),
        "last": _at(2026, 6, 30, 23, 59, 59, 999000),
        "lastmicro": _at(2026, 6, 30, 23, 59, 59, 999999),
        "next": _at(2026, 7, 1),
    }
    nodes = [
        Node(id=i, layer="knowledge", body=f"Lantern note {i}", created_at=t, updated_at=t)
        for i, t in times.items()
    ]
    s.add_many(nodes, stamp=False)
    return s


def test_parse_when_end_of_day() -> None:
    assert parse_when("2026-06-30", name="until", end_of_day=True) == _at(2026, 6, 30, 23, 59, 59, 999999)
    assert parse_when("20260630", name="until", end_of_day=True) == _at(2026, 6, 30, 23, 59, 59, 999999)
    assert parse_when("2026-06-30", name="since") == _at(2026, 6, 30)
    assert parse_when("2026-06-30T00:00Z", name="until", end_of_day=True) == _at(2026, 6, 30)
    assert parse_when("9999-12-31", end_of_day=True) == _at(9999, 12, 31, 23, 59, 59)  # render.LATEST
    assert parse_when("0001-01-01", end_of_day=True) == _at(1, 1, 1, 23, 59, 59, 999999)
    with pytest.raises(InvalidArgumentError, match="until '2026-13-01': expected an ISO date"):
        parse_when("2026-13-01", name="until", end_of_day=True)


def test_a_date_only_until_takes_in_that_whole_day_in_list_and_search(tmp_path: Path) -> None:
    """Review s26 (MEDIUM): since=until=2026-06-30 found nothing changed at noon that day."""
    root = tmp_path / "m"
    day = ["lastmicro", "last", "noon", "midnight"]  # newest first
    with _day_store(root) as s:
        t = tools(root, s)
        listed = t["list"](since="2026-06-30", until="2026-06-30")
        assert [i["id"] for i in listed["items"]] == day and listed["total"] == 4
        assert [i["id"] for i in t["list"](until="2026-06-30")["items"]] == [*day, "before"]
        exact = t["list"](since="2026-06-30", until="2026-06-30T23:59:59Z")["items"]
        assert [i["id"] for i in exact] == ["noon", "midnight"]  # a time is an instant, as given
        found = t["search"](query="Lantern note", since="2026-06-30", until="2026-06-30", k=10)
        assert sorted(r["id"] for r in found["results"]) == sorted(day)
    out = json.loads(
        cli("--root", root, "list", "--since", "2026-06-30", "--until", "2026-06-30", "--json").stdout
    )
    assert [i["id"] for i in out["items"]] == day
    out = json.loads(
        cli("--root", root, "search", "Lantern note", "--no-record", "--until", "2026-06-30", "--json").stdout
    )
    assert sorted(r["id"] for r in out["results"]) == sorted([*day, "before"])


# -- 4: get names the successor -----------------------------------------------------------------


def test_get_of_a_superseded_memory_names_its_successor(tmp_path: Path) -> None:
    """Review s26 (LOW): get returned the stale body with only valid_until."""
    root = tmp_path / "m"
    with _berlin_paris(root) as s:
        t = tools(root, s)
        assert t["get"](id="berlin")["superseded_by"] == "paris"
        assert "superseded_by" not in t["get"](id="paris")
    data = json.loads(cli("--root", root, "get", "berlin", "--json").stdout)
    assert data["superseded_by"] == "paris" and data["body"] == "The user lives in Berlin"
    assert "superseded_by" not in json.loads(cli("--root", root, "get", "paris", "--json").stdout)
    lines = cli("--root", root, "get", "berlin").stdout.splitlines()
    assert lines[:2] == ["berlin · knowledge · knowledge/orphan/berlin.md", "superseded_by: paris"]
    assert lines[-1] == "The user lives in Berlin"


# -- 5: paging with a fixed until ---------------------------------------------------------------


def test_paging_with_a_fixed_until_is_stable_while_memories_are_added(tmp_path: Path) -> None:
    """Review s26 (LOW): page 1, another process adds 5, page 2 repeated 5 ids. With every
    page given the same until (a time taken before the first page), the pages hold the
    set as it was: no id twice, none missed."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        for i in range(30):
            s.add(id=f"n{i:02d}", body=f"Note {i} about the Lantern backlog.")
        everything = [e.id for e in s.list_nodes()]
        t = tools(root, s)
        bound = datetime.now(UTC).isoformat(timespec="microseconds")
        page1 = t["list"](limit=10, offset=0, until=bound)
        with MdCG(root) as other:  # another writer
            for i in range(5):
                other.add(id=f"late-{i}", body=f"Late note {i}.")
        s.refresh()  # what the server does before a read once the log grew
        page2 = t["list"](limit=10, offset=10, until=bound)
        page3 = t["list"](limit=10, offset=20, until=bound)
        pages = [i["id"] for p in (page1, page2, page3) for i in p["items"]]
        assert pages == everything and len(set(pages)) == 30
        assert [p["total"] for p in (page1, page2, page3)] == [30, 30, 30]
        # without the bound the second page repeats ids, and total says the set changed
        moved = t["list"](limit=10, offset=10)
        assert moved["total"] == 35
        assert [i["id"] for i in moved["items"]][:5] == everything[5:10]


# -- 6: times in milliseconds are refused on every write ---------------------------------------

MS = 1700000000123


def test_add_and_update_refuse_a_time_in_milliseconds(tmp_path: Path) -> None:
    """Review s26 (LOW): created_at 1700000000123 was stored as a date in the year ~55,800;
    an expires_at in milliseconds never came."""
    hint = "outside the years 1-9999; milliseconds since the epoch? md-cg reads seconds"
    with MdCG(tmp_path / "m") as s:
        for field in ("created_at", "updated_at", "last_access", "expires_at", "valid_until"):
            with pytest.raises(InvalidNodeError) as err:
                s.add(Node(id="x", layer="knowledge", body="b", **{field: MS}))
            assert (
                str(err.value)
                == f"node 'x': field {field!r} is {float(MS)!r} seconds since the epoch, {hint}"
            )
            assert (err.value.field, err.value.node_id) == (field, "x")
        with pytest.raises(
            InvalidNodeError,
            match=r"field 'created_at' is -1e\+20 seconds since the epoch, "
            r"outside the years 1-9999$",
        ):
            s.add(id="y", body="b", created_at=-1e20)
        s.add(id="ok", body="b")
        with pytest.raises(
            InvalidNodeError, match=r"node 'ok': field 'expires_at' is 1700000000123\.0 seconds"
        ):
            s.update("ok", expires_at=MS)
        # add_many, the bulk path, carries what it is given (as files and golden data do)
        s.add_many([Node(id="z", layer="knowledge", body="b", expires_at=1e12)], checked=False)
        assert s.get("z").expires_at == 1e12
        s.forget("z", "test")
        assert s.ids() == ["ok"] and s.get("ok").expires_at is None
        s.add(id="edge", body="b", created_at=253402300799.0)  # the last second is fine
        assert s.get("edge").created_at == 253402300799.0


def test_import_warns_of_a_time_in_milliseconds_naming_line_and_field(tmp_path: Path) -> None:
    """Refused at first (session 26 core); review rev6: that broke ``export | import`` of a
    store whose file holds such a time. Imported as it is now, with a warning."""
    source = tmp_path / "imp.jsonl"
    source.write_text(
        '{"id":"ts_ms","body":"x","created_at":1700000000123}\n'
        '{"id":"ts_ms2","body":"y","expires_at":1700000000123,"retention_tier":"temp"}\n'
        '{"id":"fine","body":"z","created_at":1700000000}\n'
    )
    with MdCG(tmp_path / "m") as s:
        with pytest.warns(UserWarning) as caught:
            report = import_nodes(s, source)
        assert [str(w.message) for w in caught] == [
            f"{source} line 1: node 'ts_ms': field 'created_at' is 1700000000123.0 seconds since the epoch, "
            "outside the years 1-9999; milliseconds since the epoch? md-cg reads seconds; imported as it is "
            "(update the field to correct it)",
            f"{source} line 2: node 'ts_ms2': field 'expires_at' is 1700000000123.0 seconds since the epoch, "
            "outside the years 1-9999; milliseconds since the epoch? md-cg reads seconds; imported as it is "
            "(update the field to correct it)",
        ]  # fmt: skip
        assert [(b.where, b.node_id, b.reason) for b in report.warned] == [
            ("line 1", "ts_ms", "field 'created_at' is 1700000000123.0 seconds since the epoch, outside the "
             "years 1-9999; milliseconds since the epoch? md-cg reads seconds"),
            ("line 2", "ts_ms2", "field 'expires_at' is 1700000000123.0 seconds since the epoch, outside the "
             "years 1-9999; milliseconds since the epoch? md-cg reads seconds"),
        ]  # fmt: skip
        assert report.bad == [] and sorted(report.ids) == ["fine", "ts_ms", "ts_ms2"]
        assert s.get("ts_ms").created_at == 1700000000123.0 and s.get("fine").created_at == 1700000000.0
        assert s.get("ts_ms2").expires_at == 1700000000123.0


def test_a_file_that_already_holds_such_a_time_is_still_read(tmp_path: Path) -> None:
    """Nothing stored is lost: a file an earlier version wrote with a time in
    milliseconds is still a memory; a write of it says what to fix."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="old", body="b")
        path = root / s.entry("old").path
    path.write_text('---\nid: "old"\nlayer: "knowledge"\ncreated_at: 1700000000123\n---\nb\n')
    with MdCG(root) as s:
        s.sync()
        assert s.get("old").created_at == float(MS) and s.ids() == ["old"]
        s.update("old", body="c")  # the time it held is not new input
        assert s.get("old").created_at == float(MS) and s.get("old").body == "c"
        with pytest.raises(InvalidNodeError, match=r"node 'old': field 'expires_at' is 1700000000123\.0"):
            s.update("old", expires_at=MS)  # a new one is
        s.update("old", created_at=1700000000.123)  # the fix
        assert s.get("old").created_at == 1700000000.123
