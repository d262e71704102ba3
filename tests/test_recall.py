"""Recall statistics on a hand-computed event log, the event record rules, and
the adaptive inject budget (issue 14 items 2 and 3)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest

from md_cg import MdCG, Node, access, recall
from md_cg.errors import DataFileError, InvalidArgumentError
from md_cg.recall import (
    AccessEvent,
    StatsNode,
    adaptive_inject_budget,
    event_record,
    load_recall_cues,
    needs_broad_recall,
    parse_event,
    recall_stats,
)
from md_cg.visibility import Scope

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NS = 1_000_000_000
NOW_NS = int(NOW.timestamp()) * NS
DAY_S = 86_400.0
DAY_NS = 86_400 * NS
SINCE_NS = NOW_NS - 30 * DAY_NS


def ago(days: float) -> float:
    return NOW.timestamp() - days * DAY_S


NODES = [
    StatsNode("a", "Alpha", ago(100), True),
    StatsNode("b", "Beta", ago(40), True),
    StatsNode("c", "Gamma", ago(3), True),  # exempt, exposed
    StatsNode("d", "Delta", ago(50), True),  # zombie
    StatsNode("e", "Eps", ago(60), False),  # archived, exposed
    StatsNode("f", "Zeta", ago(7), True),  # exactly 7 days old: not exempt -> zombie
    StatsNode("g", "Eta", None, True),  # age unknown: not judged -> exempt (it was a zombie)
    StatsNode("h", "Theta", ago(6.99), True),  # exempt, never exposed
]

EVENTS: list[object] = [
    {"ts": SINCE_NS - 1, "mode": "search", "agent": "main", "ids": ["a", "b"]},  # before the window
    {"ts": SINCE_NS, "mode": "search", "agent": "main", "ids": ["a", "a", "b"]},  # a counts once
    {"ts": NOW_NS - DAY_NS, "mode": "inject", "agent": "main", "ids": ["a", "c"]},
    {"ts": NOW_NS - DAY_NS, "mode": "inject", "agent": "main", "ids": []},  # a run that filled nothing
    {"ts": NOW_NS - 2 * DAY_NS, "mode": "inject", "agent": "main", "ids": ["b", "x"]},  # x: unknown id
    {"ts": NOW_NS, "mode": "get", "agent": "main", "workspace": "w1", "ids": ["e"]},
    {"ts": NOW_NS - 5 * NS, "mode": "search", "agent": "other", "ids": ["a"]},
    # malformed, eight of them
    {"ts": "yesterday", "mode": "search", "ids": ["a"]},
    {"ts": NOW_NS, "mode": "peek", "ids": ["a"]},
    {"ts": NOW_NS, "mode": "get", "ids": "a"},
    {"ts": NOW_NS, "mode": "get", "ids": [1]},
    "not an object",
    {"ts": NOW_NS, "mode": "get", "ids": [""]},
    {"ts": True, "mode": "get", "ids": ["a"]},
    {"ts": NOW_NS, "mode": "get", "agent": 5, "ids": ["a"]},
]


def test_hand_computed_log_exact_figures() -> None:
    stats = recall_stats(EVENTS, NODES, now=NOW)
    assert [(r.id, r.title, r.count, r.active) for r in stats.top_recalled] == [
        ("a", "Alpha", 3, True),
        ("b", "Beta", 2, True),
        ("c", "Gamma", 1, True),
        ("e", "Eps", 1, False),
    ]
    assert stats.exposed_count == 4
    z = stats.zombie
    assert (z.active_count, z.exempt_count, z.eligible_count, z.zombie_count) == (7, 3, 4, 2)
    assert z.zombie_rate == pytest.approx(0.5)
    assert z.sample == (("d", "Delta"), ("f", "Zeta"))  # oldest first
    inj = stats.injection
    assert (inj.runs, inj.injected_count, inj.slots) == (3, 4, 5)
    assert inj.slot_fill_rate == pytest.approx(4 / 15)
    cov = stats.coverage
    assert (cov.scanned, cov.malformed, cov.events_in_window) == (15, 8, 6)
    assert dict(cov.by_mode) == {"search": 2, "inject": 3, "get": 1}
    assert cov.earliest_event == datetime.fromtimestamp((SINCE_NS - 1) // 1000 / 1e6, tz=UTC)
    assert cov.window_start == NOW - timedelta(days=30)
    assert cov.full_window is True
    assert cov.truncated is False
    assert dict(stats.options) == {
        "window_days": 30,
        "exempt_days": 7,
        "max_inject_slots": 5,
        "top_n": 10,
        "scan_cap": recall.DEFAULT_SCAN_CAP,
    }


def test_caller_filter_counts_only_that_callers_events() -> None:
    stats = recall_stats(EVENTS, NODES, now=NOW, agent="main")
    assert [(r.id, r.count) for r in stats.top_recalled] == [("a", 2), ("b", 2), ("c", 1), ("e", 1)]
    assert stats.coverage.events_in_window == 5
    both = recall_stats(EVENTS, NODES, now=NOW, agent="main", workspace="w1")
    assert [(r.id, r.count) for r in both.top_recalled] == [("e", 1)]
    assert both.injection.runs == 0 and both.injection.slot_fill_rate is None
    # coverage reports the log's start whoever wrote the first event
    assert both.coverage.full_window is True


def test_to_dict_is_json_and_exact() -> None:
    data = recall_stats(EVENTS, NODES, now=NOW, top_n=2).to_dict()
    text = json.dumps(data)
    assert json.loads(text) == data
    assert data["top_recalled"] == [
        {"id": "a", "title": "Alpha", "count": 3, "active": True},
        {"id": "b", "title": "Beta", "count": 2, "active": True},
    ]
    assert data["zombie"]["sample"] == [{"id": "d", "title": "Delta"}, {"id": "f", "title": "Zeta"}]
    assert data["coverage"]["window_start"] == "2026-01-30T12:00:00+00:00"
    assert data["now"] == "2026-03-01T12:00:00+00:00"
    assert data["injection"] == {"runs": 3, "injected_count": 4, "slots": 5, "slot_fill_rate": 4 / 15}


def test_window_and_exemption_options_change_the_figures() -> None:
    stats = recall_stats(EVENTS, NODES, now=NOW, window_days=1, exempt_days=0, max_inject_slots=2)
    # the last day holds events 3 and 4 (exactly one day old), 6 and 7
    assert [(r.id, r.count) for r in stats.top_recalled] == [("a", 2), ("c", 1), ("e", 1)]
    z = stats.zombie
    assert (z.active_count, z.exempt_count, z.eligible_count, z.zombie_count) == (7, 1, 6, 4)  # g: no age
    assert z.zombie_rate == pytest.approx(4 / 6)
    assert [i for i, _t in z.sample] == ["d", "b", "f", "h"]
    assert (stats.injection.runs, stats.injection.injected_count) == (2, 2)
    assert stats.injection.slot_fill_rate == pytest.approx(0.5)
    assert stats.coverage.events_in_window == 4


@pytest.mark.parametrize(
    ("name", "value", "used"),
    [
        ("window_days", 0, 30),
        ("window_days", 366, 30),
        ("window_days", 365, 365),
        ("window_days", "14", 14),
        ("window_days", 14.0, 14),
        ("window_days", 14.5, 30),
        ("window_days", True, 30),
        ("window_days", None, 30),
        ("window_days", "two weeks", 30),
        ("window_days", float("nan"), 30),
        ("exempt_days", 0, 0),
        ("exempt_days", -1, 7),
        ("exempt_days", 366, 7),
        ("max_inject_slots", 0, 5),
        ("max_inject_slots", 1, 1),
        ("max_inject_slots", 50, 50),
        ("top_n", 0, 10),
        ("top_n", 1001, 10),
        ("scan_cap", 0, recall.DEFAULT_SCAN_CAP),
    ],
)
def test_out_of_range_options_fall_back_to_defaults(name: str, value: object, used: int) -> None:
    stats = recall_stats([], [], now=NOW, **{name: value})
    assert stats.options[name] == used


def test_scan_cap_marks_truncation_and_counts_only_what_it_read() -> None:
    events = ({"ts": NOW_NS, "mode": "search", "ids": [f"n{i}"]} for i in range(5))
    nodes = [(f"n{i}", None, ago(100), True) for i in range(5)]
    capped = recall_stats(events, nodes, now=NOW, scan_cap=3)
    assert capped.coverage.truncated is True
    assert capped.coverage.scanned == 3
    assert sorted(r.id for r in capped.top_recalled) == ["n0", "n1", "n2"]
    exact = recall_stats(
        [{"ts": NOW_NS, "mode": "search", "ids": [f"n{i}"]} for i in range(5)], nodes, now=NOW, scan_cap=5
    )
    assert exact.coverage.truncated is False
    assert exact.coverage.scanned == 5
    assert exact.zombie.zombie_count == 0


def test_empty_inputs_give_none_rates_not_zero() -> None:
    stats = recall_stats([], [], now=NOW)
    assert stats.zombie.zombie_rate is None
    assert stats.injection.slot_fill_rate is None
    assert stats.coverage.earliest_event is None
    assert stats.coverage.full_window is False
    assert stats.top_recalled == ()


def test_partial_coverage_when_log_starts_inside_the_window() -> None:
    events = [{"ts": NOW_NS - DAY_NS, "mode": "get", "ids": ["a"]}]
    cov = recall_stats(events, NODES, now=NOW).coverage
    assert cov.full_window is False
    assert cov.earliest_event == NOW - timedelta(days=1)


def test_a_log_starting_exactly_at_the_window_start_covers_it() -> None:
    events = [{"ts": SINCE_NS, "mode": "get", "ids": ["a"]}]
    assert recall_stats(events, NODES, now=NOW).coverage.full_window is True
    later = [{"ts": SINCE_NS + 1, "mode": "get", "ids": ["a"]}]
    assert recall_stats(later, NODES, now=NOW).coverage.full_window is False


def test_access_event_objects_are_accepted() -> None:
    events = [AccessEvent(NOW_NS, "inject", ("a", "b")), AccessEvent(NOW_NS, "search", ("a",))]
    stats = recall_stats(events, NODES, now=NOW)
    assert [(r.id, r.count) for r in stats.top_recalled] == [("a", 2), ("b", 1)]
    assert stats.injection.injected_count == 2


def test_top_n_ties_break_by_id() -> None:
    events = [{"ts": NOW_NS, "mode": "search", "ids": ["d", "b", "c"]}]
    stats = recall_stats(events, NODES, now=NOW, top_n=2)
    assert [r.id for r in stats.top_recalled] == ["b", "c"]


def test_bad_now_and_bad_nodes_raise_naming_the_input() -> None:
    with pytest.raises(InvalidArgumentError, match="now must be a timezone-aware datetime"):
        recall_stats([], [], now=datetime(2026, 3, 1))
    with pytest.raises(InvalidArgumentError, match="'a' is given twice"):
        recall_stats([], [("a", None, None, True), ("a", None, None, True)], now=NOW)
    with pytest.raises(InvalidArgumentError, match="non-empty string"):
        recall_stats([], [("", None, None, True)], now=NOW)
    expected = r"expected \(id, title, created_at, active\[, last_access\]\)"
    with pytest.raises(InvalidArgumentError, match=expected):
        recall_stats([], [("a", "title")], now=NOW)


def test_now_in_another_timezone_is_the_same_instant() -> None:
    tz8 = timezone(timedelta(hours=8))
    a = recall_stats(EVENTS, NODES, now=NOW.astimezone(tz8)).to_dict()
    b = recall_stats(EVENTS, NODES, now=NOW).to_dict()
    assert a["top_recalled"] == b["top_recalled"]
    assert a["coverage"]["events_in_window"] == b["coverage"]["events_in_window"]


# ---------------------------------------------------------------- event records


def test_event_record_dedupes_and_round_trips() -> None:
    rec = event_record("search", ["a", "b", "a"], ts_ns=NOW_NS, agent="main")
    assert rec == {"ts": NOW_NS, "mode": "search", "agent": "main", "ids": ["a", "b"]}
    ev = parse_event(json.loads(json.dumps(rec)))
    assert ev == AccessEvent(NOW_NS, "search", ("a", "b"), "main", None)
    assert ev.to_dict() == rec
    assert ev.time == NOW


def test_parse_event_dedupes_a_hand_written_record() -> None:
    ev = parse_event({"ts": 5, "mode": "get", "ids": ["x", "y", "x"], "extra": 1})
    assert ev == AccessEvent(5, "get", ("x", "y"))


@pytest.mark.parametrize("record", EVENTS[7:])
def test_parse_event_rejects_malformed(record: object) -> None:
    assert parse_event(record) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "peek", "ids": ["a"], "ts_ns": 1}, "mode must be one of search, inject, get"),
        ({"mode": "get", "ids": ["a"], "ts_ns": -1}, "ts_ns must be a non-negative integer"),
        ({"mode": "get", "ids": ["a"], "ts_ns": 1.5}, "ts_ns must be a non-negative integer"),
        ({"mode": "get", "ids": "a", "ts_ns": 1}, "ids must be a list of node ids"),
        ({"mode": "get", "ids": ["a", ""], "ts_ns": 1}, "ids must hold non-empty strings"),
        ({"mode": "get", "ids": [["a"]], "ts_ns": 1}, "ids must hold non-empty strings"),
        ({"mode": "get", "ids": ["a"], "ts_ns": 1, "agent": 3}, "agent must be a string or None"),
    ],
)
def test_event_record_refuses_bad_input(kwargs: dict[str, object], message: str) -> None:
    mode = kwargs.pop("mode")
    ids = kwargs.pop("ids")
    with pytest.raises(InvalidArgumentError, match=message):
        event_record(mode, ids, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- adaptive budget

SEED_CUES_ZH = [
    "上次", "之前", "以前", "那天", "那次", "刚才", "刚刚", "后来", "很早",
    "还记得", "记不记得", "我们讨论", "我们聊", "我说过", "你提过", "提到过",
    "最近", "上次说", "之前说",
]  # fmt: skip
SEED_CUES_EN = [
    "last time", "previously", "earlier", "remember", "we discussed",
    "i mentioned", "you said", "that thing", "remind me",
]  # fmt: skip


def test_shipped_cues_hold_every_seed_cue() -> None:
    cues = set(load_recall_cues())
    assert set(SEED_CUES_ZH) <= cues
    assert set(SEED_CUES_EN) <= cues


@pytest.mark.parametrize("cue", SEED_CUES_ZH + SEED_CUES_EN)
def test_each_cue_inside_a_long_query_is_broad(cue: str) -> None:
    assert needs_broad_recall(f"nginx reverse proxy {cue} config timeout") is True


@pytest.mark.parametrize(
    ("query", "broad"),
    [
        (None, True),
        ("", True),
        ("   ", True),
        ("abcd", True),  # 4 characters
        ("  abcd  ", True),  # trimmed to 4
        ("abcde", False),  # 5 characters, no cue
        ("二分查找", True),  # 4 characters
        ("二分查找法", False),
        ("二分查找的时间复杂度是多少", False),
        ("how do I configure the nginx reverse proxy", False),
        ("What did we decide LAST TIME about retries", True),  # case folded
        ("what was  last \t time's decision", True),  # whitespace collapsed
        ("上次我们说的部署方案", True),
        ("還記得那個部署方案嗎", True),  # traditional script
    ],
)
def test_needs_broad_recall(query: str | None, broad: bool) -> None:
    assert needs_broad_recall(query) is broad


def test_needs_broad_recall_refuses_a_non_string() -> None:
    with pytest.raises(InvalidArgumentError, match="query must be a string or None"):
        needs_broad_recall(12345)  # type: ignore[arg-type]


def test_custom_cues_replace_the_shipped_ones() -> None:
    assert needs_broad_recall("deploy checklist for friday", cues=["Checklist"]) is True
    assert needs_broad_recall("what did we say last time", cues=["checklist"]) is False


@pytest.mark.parametrize(
    ("query", "cap", "budget"),
    [
        ("configure nginx reverse proxy", 5, 3),
        ("configure nginx reverse proxy", 4, 2),
        ("configure nginx reverse proxy", 3, 2),
        ("configure nginx reverse proxy", 2, 1),
        ("configure nginx reverse proxy", 10, 5),
        ("what did we decide last time", 5, 5),  # broad keeps the cap
        ("", 5, 5),
        (None, 7, 7),
        ("nginx", 5, 3),  # exactly 5 characters: specific
        ("ngin", 5, 5),  # 4 characters: broad
        ("configure nginx reverse proxy", 1, 1),
        ("configure nginx reverse proxy", 0, 0),  # 0 = inject nothing, never raised to 1
        ("configure nginx reverse proxy", -2, -2),
        ("what did we decide last time", 0, 0),
    ],
)
def test_adaptive_inject_budget(query: str | None, cap: int, budget: int) -> None:
    assert adaptive_inject_budget(query, cap) == budget


def test_budget_only_shrinks_and_never_below_one() -> None:
    for cap in range(-3, 60):
        for query in ("configure nginx reverse proxy", "last time"):
            got = adaptive_inject_budget(query, cap)
            assert got <= cap or cap <= 1
            if cap >= 1:
                assert 1 <= got <= cap
            if cap > 1 and query != "last time":
                assert got == math.ceil(cap / 2)


@pytest.mark.parametrize("cap", [True, 2.0, "5", None])
def test_budget_refuses_a_non_integer_cap(cap: object) -> None:
    with pytest.raises(InvalidArgumentError, match="max_items must be an integer"):
        adaptive_inject_budget("configure nginx", cap)  # type: ignore[arg-type]


def test_cue_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    with pytest.raises(DataFileError, match=r"none\.json: recall cue file not found"):
        load_recall_cues(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"bad\.json: not a UTF-8 JSON recall cue file"):
        load_recall_cues(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"en": ["ok", 3]}), encoding="utf-8")
    with pytest.raises(DataFileError, match=r"cues under 'en': 3 is not a non-empty string"):
        load_recall_cues(wrong)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"version": 1, "en": []}), encoding="utf-8")
    with pytest.raises(DataFileError, match="holds no recall cue"):
        load_recall_cues(empty)
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps({"version": 1, "_comment": "x", "fr": ["La Dernière  Fois"]}), encoding="utf-8"
    )
    assert load_recall_cues(good) == ("la dernière fois",)


# -- the store: access events, recall_stats and inject ------------------------------------------

NGINX = "# Nginx reverse proxy\n\nConfigure nginx as a reverse proxy:\n  proxy_pass to port 8080.\n"


def small_store(root: Path) -> MdCG:
    store = MdCG(root)
    store.add(id="kp_nginx", layer="knowledge", body=NGINX)
    store.add(id="kp_tea", layer="knowledge", body="# Tea\n\nBob likes green tea in the morning.\n")
    store.add(id="kp_cat", layer="knowledge", body="# Cat\n\nThe cat is called Mochi.\n")
    return store


def logged(store: MdCG) -> list[dict[str, object]]:
    return [
        {k: v for k, v in e.items() if k not in ("ts", "seq")} for e in access.read_events(str(store.root))
    ]


def test_one_search_is_one_event_without_filler(tmp_path: Path) -> None:
    store = small_store(tmp_path / "s")
    results, _ = store.search("nginx reverse proxy", k=3)
    exposed = [r.id for r in results if not r.filler]
    assert exposed[0] == "kp_nginx"
    assert logged(store) == [{"mode": "search", "ids": exposed}]
    filler_only, _ = store.search("zebra quantum entanglement", k=3)
    assert filler_only and all(r.filler for r in filler_only)
    store.search("nginx", record=False)
    store.health()
    assert logged(store) == [{"mode": "search", "ids": exposed}]
    assert store.access_counts(["kp_nginx", "kp_cat"]) == {"kp_nginx": 1, "kp_cat": 0}


def test_inject_uses_the_budget_never_filler_and_records_runs(tmp_path: Path) -> None:
    store = small_store(tmp_path / "s")
    items = store.inject("configure the nginx reverse proxy", 5)
    assert 1 <= len(items) <= 3  # a specific query: ceil(5 / 2)
    assert (items[0].id, items[0].title) == ("kp_nginx", "Nginx reverse proxy")
    assert items[0].text == "Configure nginx as a reverse proxy: proxy_pass to port 8080."
    assert store.inject("zebra quantum entanglement", 5) == []  # only filler: nothing injected
    assert store.inject("nginx proxy", 0) == []  # 0 = inject nothing, not even a run
    assert logged(store) == [
        {"mode": "inject", "ids": [i.id for i in items]},
        {"mode": "inject", "ids": []},
    ]
    stats = store.recall_stats(max_inject_slots=5)
    assert (stats.injection.runs, stats.injection.injected_count) == (2, len(items))
    assert stats.injection.slot_fill_rate == len(items) / 10
    assert stats.coverage.by_mode == {"search": 0, "inject": 2, "get": 0}


def test_store_recall_stats_counts_exposures_over_its_nodes(tmp_path: Path) -> None:
    store = small_store(tmp_path / "s")
    old = NOW.timestamp() - 40 * DAY_S
    store.add(id="kp_old", layer="knowledge", body="# Old\n\nAn old note nobody reads.\n", created_at=old)
    store.search("nginx reverse proxy", k=1)
    store.search("green tea", k=1)
    store.search("nginx", k=1)
    stats = store.recall_stats(window_days=400, exempt_days="x")  # type: ignore[arg-type]
    assert stats.options["window_days"] == 30 and stats.options["exempt_days"] == 7
    assert [(r.id, r.count) for r in stats.top_recalled] == [("kp_nginx", 2), ("kp_tea", 1)]
    # Three nodes are new (exempt); kp_old is eligible and never exposed.
    assert (stats.zombie.active_count, stats.zombie.exempt_count, stats.zombie.zombie_count) == (4, 3, 1)
    assert stats.zombie.sample == (("kp_old", "Old"),)


def test_folding_keeps_the_events_statistics_need(tmp_path: Path) -> None:
    store = small_store(tmp_path / "s")
    store.search("nginx reverse proxy", k=1)
    store.close()
    store = MdCG(tmp_path / "s")
    assert store.compact_access() == {"kp_nginx": 1}
    assert logged(store) == [{"mode": "search", "ids": ["kp_nginx"]}]  # still there for recall_stats
    assert store.access_counts(["kp_nginx"]) == {"kp_nginx": 1}  # and not counted twice
    assert store.recall_stats().top_recalled[0].count == 1


def test_events_carry_the_caller_and_stats_respect_scope_and_archive(tmp_path: Path) -> None:
    root = tmp_path / "s"
    small_store(root).close()
    with MdCG(root, scope=Scope(agent="agent-b")) as b:
        b.add(id="kp_b", layer="knowledge", body="# Nginx for b\n\nnginx reverse proxy notes of agent b\n")
        b.search("nginx reverse proxy", k=5)
    a = MdCG(root, scope=Scope(agent="agent-a"))
    results, _ = a.search("nginx reverse proxy", k=5)
    assert "kp_b" not in {r.id for r in results}
    events = {e["agent"]: e for e in logged(a)}  # shards are read per process, not in time order
    assert sorted(events) == ["agent-a", "agent-b"] and {e["mode"] for e in events.values()} == {"search"}
    assert "kp_b" in events["agent-b"]["ids"]  # type: ignore[operator]
    stats = a.recall_stats()
    assert stats.coverage.events_in_window == 1  # agent-a's own event only
    assert "kp_b" not in {r.id for r in stats.top_recalled}
    assert stats.zombie.active_count == 3  # kp_b is outside agent-a's scope
    a.archive(["kp_nginx"])
    after = a.recall_stats()
    assert "kp_nginx" not in {r.id for r in after.top_recalled}
    assert after.zombie.active_count == 2
    assert a.resurface(seed=1) is not None and a.resurface(seed=1).id in {"kp_tea", "kp_cat"}  # type: ignore[union-attr]
    a.close()


def test_inject_leaves_out_what_the_judge_rejects(tmp_path: Path) -> None:
    store = MdCG(tmp_path / "s")
    store.add(
        id="kp_bsearch",
        layer="knowledge",
        body="# Binary search\n\nBinary search halves a sorted array each step.\n",
        non_applicable_conditions=["linked list"],
    )
    results, _ = store.search("binary search over a linked list", record=False)
    assert [(r.id, r.state) for r in results if not r.filler] == [("kp_bsearch", "REJECT")]
    assert store.inject("binary search over a linked list", 5) == []
    assert [i.id for i in store.inject("binary search sorted array", 5)] == ["kp_bsearch"]


def test_inject_keeps_the_conditions_a_cut_would_lose_and_leaves_out_blindspots(tmp_path: Path) -> None:
    """Review (session 24): a long procedure was cut before its "Not applicable when"
    line, and an incomplete procedure (BLINDSPOT: do not act on it) was injected."""
    store = MdCG(tmp_path / "s")
    steps = " -> ".join(
        f"step {i}: check the {w} dashboard" for i, w in enumerate("abcdefghijklmnopqrstuvwxyz")
    )
    body = (
        "# Function: migrate the billing schema\n# Applies when: a billing release needs it\n"
        f"# Steps: {steps}\n# Executes: make migrate-billing\n# Verified by: migration tests\n"
        "# Not applicable when: month-end invoicing run is in progress\nSchema migration for billing."
    )
    store.add(Node(id="proc_billing", body=body, verification_basis="test"))
    store.add(Node(id="proc_tls", body="# Function: rotate billing schema certificates\n# Steps: renew them"))
    assert [(r.id, r.state) for r in store.search("billing schema", record=False)[0]] == [
        ("proc_billing", "ACCEPT"),
        ("proc_tls", "BLINDSPOT"),
    ]
    (item,) = store.inject("migrate the billing schema", 5)
    assert item.id == "proc_billing" and len(item.text) <= 480
    assert item.text.endswith(" … Not applicable when: month-end invoicing run is in progress")
    assert item.text.startswith("# Applies when: a billing release needs it # Steps: step 0")
    # a short memory is whole, its conditions in place
    store.update("proc_billing", body=body.replace(steps, "check the dashboard"))
    (item,) = store.inject("migrate the billing schema", 5)
    assert item.text.count("Not applicable when") == 1 and not item.text.endswith("…")


def test_inject_keeps_to_a_tag(tmp_path: Path) -> None:
    store = small_store(tmp_path / "s")
    body = "# Nginx on ops hosts\n\nnginx reverse proxy on ops\n"
    store.add(id="kp_nginx_ops", layer="knowledge", body=body, tags=["OPS"])
    everything = store.inject("configure the nginx reverse proxy", 5)
    assert {i.id for i in everything} >= {"kp_nginx", "kp_nginx_ops"}
    tagged = store.inject("configure the nginx reverse proxy", 5, tag="ops")
    assert [i.id for i in tagged] == ["kp_nginx_ops"]
    assert store.inject("configure the nginx reverse proxy", 5, tag="nothing-has-it") == []
    assert logged(store)[-2:] == [{"mode": "inject", "ids": ["kp_nginx_ops"]}, {"mode": "inject", "ids": []}]
    store.close()


def test_a_one_line_memory_is_injected_whole(tmp_path: Path) -> None:
    """A body that is only its title line is its own text: its title is cut at 120
    characters, and an empty text would leave the rest out of the prompt."""
    store = small_store(tmp_path / "s")
    short = "The user prefers metric units for every okapi measurement."
    long = "An okapi note on one line: " + "with many words " * 40 + "and its end."
    store.add(id="one_short", layer="self", body=short)
    store.add(id="one_long", layer="self", body=long + "\n")
    items = {i.id: i for i in store.inject("okapi measurement note metric units words end", 5)}
    assert items["one_short"].text == short and items["one_short"].title == short
    assert len(items["one_long"].title) == 120 and items["one_long"].title.endswith("…")
    assert items["one_long"].text == " ".join(long.split())[:479].rstrip() + "…"
    assert len(items["one_long"].text) == 480
    store.close()


@pytest.mark.parametrize("ts", [None, "abc", 1.5, -1, 2**70])
def test_an_access_line_whose_time_is_not_the_writers_is_skipped(tmp_path: Path, ts: object) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="x", layer="self", body="okapi", verification_basis="test")
        assert [r.id for r in s.search("okapi")[0]] == ["x"]  # one access, recorded
    shard = root / ".mdcg" / "access" / ("99999_" + "0" * 32 + ".jsonl")
    shard.write_text(json.dumps({"ts": ts, "seq": 9, "mode": "get", "ids": ["x"]}) + "\n")
    with MdCG(root) as s:
        assert s.access_counts(["x"]) == {"x": 1}  # the planted line is not counted
        assert s.compact_access() == {"x": 1}
        assert s.access_counts(["x"]) == {"x": 1}


@pytest.mark.parametrize(
    ("count", "last"),
    [(10**23, 1.0), (-5, 1.0), ("5", 1.0), (2.9, 1.0), (2, "inf"), (2, "nan"), (2, 1e400), (2, -1)],
)
def test_a_fold_with_a_count_or_time_it_does_not_write_is_named(
    tmp_path: Path, count: object, last: object
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="x", layer="self", body="x")
    (root / ".mdcg" / "access").mkdir(parents=True, exist_ok=True)
    (root / ".mdcg" / "access" / "counts.json").write_text(
        json.dumps({"counts": {"x": count}, "last": {"x": last}, "offsets": {}})
    )
    with MdCG(root) as s, pytest.raises(ValueError, match=r"counts\.json: not a valid access fold"):
        s.compact_access()


def test_access_logs_are_decoded_in_pieces_with_the_same_result(tmp_path: Path, monkeypatch) -> None:
    """Review (session 24): a 70 MB access shard was decoded at once (764 MB to count
    accesses, 1 GB for recall_stats); it is decoded in pieces now, with the same
    counts, events and malformed-line handling."""
    store = MdCG(tmp_path / "s")
    store.add_many([Node(id=f"n{i}", body=f"note {i}") for i in range(5)])
    for j in range(40):
        store.record_access([f"n{j % 5}", f"n{(j + 1) % 5}"], mode="search")
    (shard,) = (tmp_path / "s" / ".mdcg" / "access").glob("*.jsonl")
    with open(shard, "ab") as fh:  # a line that is not JSON, one more event, then a torn line
        fh.write(b"{not json\n")
        fh.write(orjson.dumps({"ts": 1_700_000_000_000_000_000, "mode": "get", "ids": ["n0"]}) + b"\n")
        fh.write(b'{"ts": 1, "mode": "get", "ids": ["n')
    root = str(tmp_path / "s")
    whole = (list(access.read_events(root)), access.read_counts(root), store.access_counts())
    monkeypatch.setattr(access, "DECODE_BYTES", 16)
    pieces = (list(access.read_events(root)), access.read_counts(root), store.access_counts())
    assert pieces == whole
    assert whole[2] == {"n0": 17, "n1": 16, "n2": 16, "n3": 16, "n4": 16}
    assert sum(1 for e in whole[0] if e is None) == 1 and len(whole[0]) == 42
    store.close()


def test_a_shorter_cut_for_the_conditions_keeps_the_ones_it_showed() -> None:
    """Review round 2 (session 24): condition A shown near the end of the first 479
    characters was lost when the text was cut shorter to make room for condition B."""
    a, b = "during a failover drill", "the production cluster is in a change freeze window"
    step, end = "Rotate the keys and restart the pods. ", "Not when: during a failover drill.\n"
    short = "# Key rotation\n" + step * 8 + end
    text = access.compact_text(short, conditions=(a, b))
    assert text == " ".join(short.split("\n", 1)[1].split()) + f" Not applicable when: {b}"  # B: a field
    assert access.compact_text(short, conditions=(a,)).count(a) == 1  # shown in the text: no tail
    body = "# Key rotation\n" + step * 11 + end
    text = access.compact_text(body, conditions=(a, b))
    assert len(text) <= 480 and text.endswith(f" … Not applicable when: {a}; {b}")


def test_a_memory_a_merge_left_in_conflict_is_deferred_and_not_injected(tmp_path: Path) -> None:
    """Review (session 25): a memory holding an unresolved merge conflict was ACCEPT,
    and inject put it, markers and stale base text included, into the prompt."""
    from md_cg import nodefile

    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(Node(id="kp_deadline", layer="self", body="The release deadline is the 14th.",
                       verification_basis="data"))  # fmt: skip
        rel = store.entry("kp_deadline").path
    node = nodefile.read_node(root / rel)
    ours, theirs = "The release deadline is the 14th.", "The release deadline is the 21st."
    node.body = f"<<<<<<< ours\n{ours}\n=======\n{theirs}\n>>>>>>> theirs\n"
    node.extra["merge_conflict"] = {"fields": {}, "body": True}
    (root / rel).write_text(nodefile.dumps(node), encoding="utf-8")
    with MdCG(root) as store:
        store.sync()
        (hit,) = [r for r in store.search("release deadline", record=False)[0] if not r.filler]
        assert (hit.id, hit.state) == ("kp_deadline", "DEFER")
        assert hit.basis == (
            "DEFER: unresolved merge conflict: settle it with update (its text holds both sides of the merge)"
        )
        assert store.inject("release deadline", 5) == []
        store.update("kp_deadline", body="The release deadline is the 21st.")
        (hit,) = [r for r in store.search("release deadline", record=False)[0] if not r.filler]
        assert hit.state == "ACCEPT"
        assert [i.id for i in store.inject("release deadline", 5)] == ["kp_deadline"]


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_inject_refuses_a_blank_query_as_search_does(tmp_path: Path, query: str) -> None:
    """Review (session 25): inject("") returned [] and counted as an injection run,
    while search("") raised."""
    store = small_store(tmp_path / "s")
    with pytest.raises(InvalidArgumentError) as searched:
        store.search(query)
    with pytest.raises(InvalidArgumentError) as injected:
        store.inject(query, 5)
    assert str(injected.value) == str(searched.value) == "query is empty: give the words to search for"
    with pytest.raises(InvalidArgumentError):
        store.inject(query, 0)
    assert logged(store) == []  # no run recorded
    assert store.recall_stats().injection.runs == 0
    store.close()


def test_a_memory_without_created_at_is_as_old_as_its_file(tmp_path: Path) -> None:
    """A hand-written file without created_at was a zombie the moment it appeared
    (zombie 1, rate 1.0 for a memory seconds old); an edit whose text left created_at
    out dropped the stored one, with the same effect."""
    import os
    import time

    root = tmp_path / "m"
    hand = root / "knowledge" / "hand.md"
    with MdCG(root) as store:
        store.add(id="kept", body="An added memory", created_at=time.time() - 3 * 86_400)
        hand.write_text("---\nid: hand\n---\nWritten by hand\n", encoding="utf-8")
        store.sync()
        assert store.get("hand").created_at is None
        z = store.recall_stats().zombie
        assert (z.active_count, z.exempt_count, z.zombie_count, z.zombie_rate) == (2, 2, 0, None)
        month_ago = time.time() - 30 * 86_400
        os.utime(hand, (month_ago, month_ago))
        store.sync()
        z = store.recall_stats().zombie
        assert (z.exempt_count, z.zombie_count, z.zombie_rate, z.sample) == (
            1,
            1,
            1.0,
            (("hand", "Written by hand"),),
        )
        stored = store.get("kept").created_at
        store.edit_text("kept", lambda _text: "---\nid: kept\ntags: [x]\n---\nAn added memory, edited\n")
        assert (store.get("kept").created_at, store.get("kept").tags) == (stored, ["x"])
        assert store.recall_stats().zombie.exempt_count == 1
