"""The MCP tools' input schemas and ``on_this_day``'s reply (session 37's MCP review,
findings 7 and 8).

Finding 7: ``on_this_day`` brought back a memory made seconds before as "one old memory"
(``{"id":"长文","tier":null,"date":"2026-12-07","years_ago":0,"months_ago":0,"stage":"any",...}``):
``tier: null`` against docs/mcp.md's "empty fields are left out", and nothing said the pick
was the last resort, which the design (seed 003's "full fallback") keeps. Now ``tier`` is
left out, a last-resort pick carries a ``note`` saying what was missing and how old the
memory is, and the tool's description says what the stages mean. The other nulls sent
against the rule (``neighbours``' dangling title, ``health``'s finding path/node_id and
largest bucket, ``search``'s ``meta.big_domain`` and ``meta.filter`` parts) are left out too.

Finding 8: ``layer``, ``verdict``, ``direction``, ``mode`` (and ``verification_basis``, edge
``types``, ``reflect``'s feedback states) were free strings in the input schemas, and
``remember``'s ``layer`` description named five of the seven layers it takes. Now each is a
JSON-schema ``enum``; the library still checks the value, so a wrong one gets today's message.
The limits an agent needs (a body's 4 MiB file, 64 tags of 200 characters, ``get``'s
20,000-character window and how to page it) are in the descriptions.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from conftest import build_small_store
from mcp import Client

from md_cg import EDGE_TYPES, LAYERS, VERIFICATION_BASES, MdCG, mcp_server
from md_cg.mcp_server import _health_reply, create_server
from md_cg.reports import Finding, HealthReport

#: The local day the on_this_day tests bring memories back on (a past day: every memory's
#: time is before the real clock's). Seed 0 draws its tiers in the order 3, 1, 2, 4, 5, 7, 6.
TODAY = date(2025, 3, 14)

LAST_RESORT = (
    "last resort: among the memories not shown in the last 30 days, none is from this time of year "
    "(the same half of the year, or within 3 days of this date) in the 10 years before this one, "
    "from this day of a month in the last 24 months, or from 2 to 6 months ago; so this one was "
    "drawn at random from all memories dated today or earlier: it is dated "
)
BODY = "# Crocus\nThe first crocus opened by the gate.\n"
SHOWN = {"title": "Crocus", "snippet": "The first crocus opened by the gate."}


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = json.loads(result.content[0].text)
    assert result.structured_content == data
    return data


def _err(result: Any) -> str:
    assert result.is_error
    return result.content[0].text


async def _calls(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    server = create_server(root)
    try:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]
    finally:
        server.store.close()


async def _tools(root: Path) -> list[Any]:
    server = create_server(root)
    try:
        async with Client(server) as client:
            return (await client.list_tools()).tools
    finally:
        server.store.close()


# -- finding 7: on_this_day -----------------------------------------------------------


class _Day(date):
    """``date`` whose today() is TODAY (the server's on_this_day asks mcp_server.date)."""

    @classmethod
    def today(cls) -> _Day:
        return cls(TODAY.year, TODAY.month, TODAY.day)


def _noon(day: date) -> str:
    """Local noon of ``day``: the store reads created_at as a day in the local time zone."""
    return datetime(day.year, day.month, day.day, 12).astimezone().isoformat()


def _on_this_day(root: Path, made: date | None, shown_on: date | None = None) -> dict[str, Any]:
    with MdCG(root) as store:
        if made is not None:
            store.add(id="m", layer="knowledge", body=BODY, created_at=_noon(made))
        if shown_on is not None:  # a show recorded that day (the only memory: it is picked)
            assert store.resurface(shown_on, record=True).id == "m"  # type: ignore[union-attr]
    (result,) = anyio.run(_calls, root, [("on_this_day", {})])
    return _ok(result)


def _shown(day: str, years: int, months: int, count: int, stage: str, tier: int | None) -> dict[str, Any]:
    """The reply's memory: ``tier`` left out when None, a last-resort ``note`` after it."""
    out = {"id": "m", "tier": tier, "date": day, "years_ago": years, "months_ago": months}
    return {k: v for k, v in out.items() if v is not None} | {"show_count": count, "stage": stage, **SHOWN}


def _any(day: str, years: int, months: int, count: int, age: str) -> dict[str, Any]:
    return _shown(day, years, months, count, "any", None) | {"note": LAST_RESORT + age}


@pytest.mark.parametrize(
    ("made", "shown_on", "expected"),
    [
        # tier 3 (±3 days, past years) is the first tier drawn on TODAY: stage tier
        (date(2023, 3, 12), None, _shown("2023-03-12", 2, 24, 0, "tier", 3)),
        # tier 1 (the same day a year ago), tried after the empty tier 3: stage fallback
        (date(2024, 3, 14), None, _shown("2024-03-14", 1, 12, 0, "fallback", 1)),
        # shown 40 days ago: out of the 90-day cooldown, in the 30-day one: stage relaxed
        (date(2024, 3, 14), date(2025, 2, 2), _shown("2024-03-14", 1, 12, 1, "relaxed", 1)),
        # the review's case: a memory written today is the last resort's pick (no tier, a note)
        (TODAY, None, _any("2025-03-14", 0, 0, 0, "today")),
        (date(2025, 3, 13), None, _any("2025-03-13", 0, 0, 0, "yesterday")),
        # the other half of last year: in no tier
        (date(2024, 7, 1), None, _any("2024-07-01", 0, 8, 0, "256 days ago")),
        # a tier-1 memory shown 10 days ago: in both cooldowns, drawn by the last resort anyway
        (date(2024, 3, 14), date(2025, 3, 4), _any("2024-03-14", 1, 12, 1, "365 days ago")),
    ],
    ids=["tier", "fallback", "relaxed", "any-today", "any-yesterday", "any-older", "any-cooling-down"],
)
def test_on_this_day_replies_in_each_stage(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    made: date,
    shown_on: date | None,
    expected: dict[str, Any],
) -> None:
    monkeypatch.setattr(mcp_server, "date", _Day)
    assert _on_this_day(tmp_path / "m", made, shown_on) == {"memory": expected}


def test_on_this_day_of_an_empty_store_is_null(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_server, "date", _Day)
    assert _on_this_day(tmp_path / "m", None) == {"memory": None}


def test_on_this_day_says_what_its_stages_mean(tmp_path: Path) -> None:
    tools = {t.name: t for t in anyio.run(_tools, tmp_path / "m")}
    assert tools["on_this_day"].description == (
        "One memory brought back on this day (a reminder), or null when none is dated today or earlier. "
        "stage: tier or fallback = from this time of year in past years, this day of a past month, "
        "or 2-6 months ago; relaxed = the same, shown 30-90 days ago; any = the last resort: "
        "any date, today's too (a note says so)."
    )


def test_the_note_says_what_resurface_does() -> None:
    """The figures the note and the description give are md_cg.resurface's."""
    from md_cg import resurface

    assert (resurface.RELAXED_COOLDOWN_DAYS, resurface.COOLDOWN_DAYS, resurface.MAX_YEARS_BACK) == (
        30,
        90,
        10,
    )
    assert (resurface._TIER_MONTHS_WINDOW, resurface._WEEK_RADIUS) == (24, 3)
    assert resurface.STAGES == ("tier", "fallback", "relaxed", "any")
    assert mcp_server.LAST_RESORT_NOTE == LAST_RESORT + "{age}"
    # the same half of the year: tiers 4, 5 and 6 of a past year are the six months of TODAY's half
    days = resurface.tier_days(TODAY, 1)
    months = {(d.year, d.month) for t in (4, 5, 6) for d in days[t]}
    assert months == {(2024, m) for m in range(1, 7)}
    # 6 to 2 months ago: tier 7, but the days of tier 2 (the 14th of a past month)
    recent = {
        date.fromordinal(o) for o in range(date(2024, 9, 14).toordinal(), date(2025, 1, 15).toordinal())
    }
    assert set(days[7]) == recent - set(days[2])


DANGLING = {"target": "gone", "type": "causal"}
CANDIDATE = {"layer": "knowledge", "title": "T", "content": "new"}


def test_no_reply_sends_null_but_where_docs_mcp_says(tmp_path: Path) -> None:
    """Every null a run of the tools gets: only the documented ones (the answer
    ``{"memory": null}``, recall_stats' rates, organize's ``match``)."""
    root = build_small_store(tmp_path / "m")
    calls = [
        ("remember", {"body": "Deploy needs a green CI run.", "id": "ci", "edges": [DANGLING]}),
        ("search", {"query": "binary search", "tag": "domain:computing", "fill": True}),
        ("search", {"query": "xyzzy", "fill": True}),
        ("neighbours", {"id": "ci"}),
        ("organize", {"mode": "dryRun", "candidates": [CANDIDATE]}),
        ("recall_stats", {}),
        ("on_this_day", {}),
        ("health", {}),
        ("sync", {}),
        ("list", {}),
        ("get", {"id": "kp_bsearch"}),
        ("verify", {"id": "kp_sorting", "evidence": "ran it", "verdict": "confirmed"}),
        ("reflect", {"query": "binary search"}),
        ("inject", {"query": "binary search"}),
    ]  # fmt: skip

    def nulls(value: Any, path: str = "") -> list[str]:
        if value is None:
            return [path]
        if isinstance(value, dict):
            return [p for k, v in value.items() for p in nulls(v, f"{path}.{k}")]
        if isinstance(value, list):
            return [p for i, v in enumerate(value) for p in nulls(v, f"{path}[{i}]")]
        return []

    results = anyio.run(_calls, root, calls)
    found = {name: nulls(_ok(r)) for (name, _), r in zip(calls, results, strict=True)}
    assert {name: paths for name, paths in found.items() if paths} == {
        "organize": [".items[0].match"],
        "recall_stats": [".zombie.zombie_rate", ".injection.slot_fill_rate"],
    }
    neighbours = _ok(results[3])["neighbours"]
    assert neighbours == [
        {"id": "gone", "type": "causal", "direction": "out", "depth": 1, "via": "ci", "exists": False}
    ]
    assert _ok(results[1])["meta"]["filter"] == {"tag": "domain:computing", "matching": 2}
    assert "big_domain" not in _ok(results[2])["meta"]


def test_health_leaves_out_what_a_finding_does_not_name(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        base = s.health()
    found = (
        Finding("withheld", "1 file problem(s) not named to this scope"),
        Finding("expired", "past", "k/e.md", "e"),
    )
    reply = _health_reply(
        HealthReport(layers=base.layers, nodes=1, buckets=base.buckets, findings=found).to_dict()
    )
    assert reply["findings"] == [
        {"kind": "withheld", "detail": "1 file problem(s) not named to this scope", "severity": "warning"},
        {"kind": "expired", "detail": "past", "path": "k/e.md", "node_id": "e", "severity": "warning"},
    ]
    assert reply["buckets"] == {
        "buckets": 0, "nodes": 0, "largest_share": 0.0, "singleton_rate": 0.0, "expected_scan": 0.0,
        "degraded": False, "reasons": (),
    }  # fmt: skip


# -- finding 8: input schemas ----------------------------------------------------------

ENUMS = {
    ("remember", "layer"): list(LAYERS),
    ("update", "layer"): list(LAYERS),
    ("search", "layer"): list(LAYERS),
    ("recall", "layer"): list(LAYERS),
    ("list", "layer"): list(LAYERS),
    ("reflect", "layer"): list(LAYERS),
    ("remember", "verification_basis"): list(VERIFICATION_BASES),
    ("update", "verification_basis"): list(VERIFICATION_BASES),
    ("verify", "verdict"): ["confirmed", "weakened", "falsified"],
    ("neighbours", "direction"): ["out", "in", "both"],
    ("organize", "mode"): ["dryRun", "apply"],
    ("remember", "tier"): ["temp", "long"],
    ("update", "tier"): ["temp", "long"],
}


def test_closed_sets_are_enums_in_the_input_schemas(tmp_path: Path) -> None:
    tools = {t.name: t.input_schema["properties"] for t in anyio.run(_tools, tmp_path / "m")}
    enums = {
        (tool, arg): p["enum"] for tool, props in tools.items() for arg, p in props.items() if "enum" in p
    }
    assert enums == ENUMS
    assert LAYERS == ("anchor", "structural", "knowledge", "contextual", "self", "rejected", "unresolved")
    assert tools["remember"]["layer"] == {
        "default": "knowledge",
        "description": "rejected: a falsified idea, unresolved: an open question.",
        "enum": list(LAYERS),
        "type": "string",
    }
    assert tools["search"]["layer"] == {
        "type": "string",
        "description": "Only this layer.",
        "enum": list(LAYERS),
    }
    assert tools["update"]["layer"] == {
        "type": "string",
        "description": "Move it to this layer.",
        "enum": list(LAYERS),
    }
    assert tools["verify"]["verdict"] == {"enum": ["confirmed", "weakened", "falsified"], "type": "string"}
    assert tools["neighbours"]["direction"] == {
        "default": "out",
        "description": "Its own edges, those pointing at it, or both.",
        "enum": ["out", "in", "both"],
        "type": "string",
    }
    assert tools["neighbours"]["types"] == {
        "items": {"enum": list(EDGE_TYPES), "type": "string"},
        "type": "array",
        "description": "Only these edge types.",
    }
    states = {"enum": ["ACCEPT", "REJECT", "DEFER", "BLINDSPOT"], "type": "string"}
    assert tools["reflect"]["feedback"]["anyOf"] == [
        {"items": states, "type": "array"},
        {"additionalProperties": states, "type": "object"},
    ]


def test_the_copied_closed_sets_and_limits_are_the_librarys() -> None:
    from md_cg import graph, judge, merge, node, organize

    assert mcp_server.VERDICTS == merge.VERDICTS
    assert mcp_server.DIRECTIONS == graph.DIRECTIONS
    assert mcp_server.ORGANIZE_MODES == organize.MODES
    assert mcp_server.STATES == judge.STATES
    assert mcp_server.MAX_FILE_BYTES == node.MAX_FILE_BYTES == 4 * 2**20
    assert (mcp_server.MAX_TAGS, mcp_server.MAX_TAG_CHARS, mcp_server.GET_CHARS) == (64, 200, 20_000)


def test_the_limits_an_agent_needs_are_in_the_schemas(tmp_path: Path) -> None:
    tools = {t.name: t for t in anyio.run(_tools, tmp_path / "m")}
    remember = tools["remember"].input_schema["properties"]
    assert remember["body"] == {
        "description": "The memory as Markdown (not empty; its file at most 4 MiB).",
        "type": "string",
    }
    assert remember["tags"]["description"] == (
        "At most 64 tags of at most 200 characters; 'domain:<name>' files the memory by domain."
    )
    assert remember["not_applicable"]["description"] == (
        "Conditions under which it must not be used (at most 64, of at most 1,000 characters)."
    )
    update = tools["update"].input_schema["properties"]
    assert update["body"]["description"] == "New body (not empty; its file at most 4 MiB)."
    assert update["tags"] == remember["tags"]
    assert tools["get"].description == (
        "Read one memory: its fields and up to max_chars (default 20,000) characters of its body from "
        "offset; when more follows, the reply has truncated: true and next_offset: call again with "
        "offset=next_offset."
    )
    assert tools["get"].input_schema["properties"] == {
        "id": {"description": "A memory id.", "type": "string"},
        "offset": {
            "default": 0,
            "description": "Characters of the body to skip: a reply's next_offset.",
            "minimum": 0,
            "type": "integer",
        },
        "max_chars": {
            "default": 20000,
            "description": "Most characters of the body returned.",
            "maximum": 100000,
            "minimum": 1,
            "type": "integer",
        },
    }


def test_the_body_limit_the_schema_states_is_the_stores(tmp_path: Path) -> None:
    """A body whose file passes 4 MiB is refused, as the description says; the file counts
    UTF-8 bytes, so 1.5 million CJK characters (4.5 MB) are over it."""
    root = tmp_path / "m"
    MdCG(root).close()
    (result,) = anyio.run(_calls, root, [("remember", {"body": "中" * 1_500_000, "id": "big"})])
    assert _err(result) == (
        "Error executing tool remember: node 'big': the file would be 4,500,080 bytes, "
        "over the limit of 4 MiB"
    )


LAYER_ERROR = "unknown layer 'Self'; expected one of: " + ", ".join(LAYERS)


def test_a_wrong_value_gets_the_librarys_message_naming_the_values(tmp_path: Path) -> None:
    """The enums are shown, not checked by the SDK first: the messages are those of before."""
    root = build_small_store(tmp_path / "m")
    calls = [
        ("remember", {"body": "x", "layer": "Self"}),
        ("update", {"id": "kp_sorting", "layer": "Self"}),
        ("search", {"query": "x", "layer": "Self"}),
        ("list", {"layer": "Self"}),
        ("reflect", {"query": "x", "layer": "Self"}),
        ("remember", {"body": "x", "verification_basis": "Test"}),
        ("verify", {"id": "kp_sorting", "evidence": "e", "verdict": "Confirmed"}),
        ("neighbours", {"id": "kp_bsearch", "direction": "OUT"}),
        ("neighbours", {"id": "kp_bsearch", "types": ["Part_Of"]}),
        ("organize", {"mode": "dryrun", "candidates": []}),
        ("remember", {"body": "x", "tier": "Temp"}),
    ]
    got = [_err(r) for r in anyio.run(_calls, root, calls)]
    assert got == [
        f"Error executing tool remember: the new memory: {LAYER_ERROR}",
        f"Error executing tool update: node 'kp_sorting': {LAYER_ERROR}",
        f"Error executing tool search: {LAYER_ERROR}",
        f"Error executing tool list: {LAYER_ERROR}",
        f"Error executing tool reflect: {LAYER_ERROR}",
        "Error executing tool remember: the new memory: field 'verification_basis' must be one of compiler, "
        "test, measurement, formal_proof, data, other (or absent) (got 'Test')",
        "Error executing tool verify: unknown verdict 'Confirmed' for node 'kp_sorting'; expected one of "
        "confirmed, weakened, falsified",
        "Error executing tool neighbours: direction must be one of out, in, both, got 'OUT'",
        "Error executing tool neighbours: unknown edge type(s) Part_Of; expected part_of, causal, "
        "sequential, spatial, hierarchical, similar, supersedes",
        "Error executing tool organize: mode must be one of dryRun, apply, got 'dryrun'",
        "remember: argument 'tier': input should be 'temp' or 'long' (got 'Temp')",  # a Literal: the SDK's
    ]
    with MdCG(root, read_only=True) as store:
        assert store.entry("kp_sorting").layer == "knowledge" and len(store) == 4  # nothing written


def test_the_tool_list_stays_within_a_tenth_more_than_before(tmp_path: Path) -> None:
    """The tool list as the review measured it (``model_dump(exclude_none=True)`` of each tool as
    JSON): 17 tools, 15,574 characters before session 37's enums, limits and stage descriptions,
    16,715 after (+7.3%). It may not pass 15,574 + 10% = 17,131 characters."""
    tools = anyio.run(_tools, tmp_path / "m")
    listing = json.dumps([t.model_dump(exclude_none=True) for t in tools], ensure_ascii=False)
    assert len(tools) == 17
    assert len(listing) <= 17_131
