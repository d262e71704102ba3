"""Resurfacing: tier boundaries, cooldown and relaxation, the weighting
formula, determinism, node dates and the show history (issue 14 item 4)."""

from __future__ import annotations

import calendar
import math
import random
import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.access import SHOW_LOG
from md_cg.errors import InvalidArgumentError, InvalidNodeError
from md_cg.resurface import (
    TIER_WEIGHTS,
    ResurfaceIndex,
    ShowHistory,
    node_date,
    resurface,
    show_record,
    tier_days,
    tier_of,
)

D = date


# ---------------------------------------------------------------- an independent oracle


def _leap(y: int) -> bool:
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def _shift_months(day: date, months: int) -> date:
    y, m = day.year, day.month
    for _ in range(abs(months)):
        y, m = (y, m - 1) if months < 0 else (y, m + 1)
        if m == 0:
            y, m = y - 1, 12
        if m == 13:
            y, m = y + 1, 1
    return date(y, m, min(day.day, calendar.monthrange(y, m)[1]))


def _in_recent_months(d: date, t: date) -> bool:
    try:
        hi = _shift_months(t, -2)
    except ValueError:  # before year 1
        return False
    try:
        lo = _shift_months(t, -6)
    except ValueError:
        lo = date.min
    return lo <= d <= hi


def _oracle(d: date, t: date, depth: int = 10) -> int | None:
    """The tier of ``d`` seen from ``t``, written straight from the issue text."""
    past = t.year - depth <= d.year <= t.year - 1

    def t1(x: date) -> bool:
        if not t.year - depth <= x.year <= t.year - 1:
            return False
        if (x.month, x.day) == (t.month, t.day):
            return True
        return (t.month, t.day) == (2, 28) and not _leap(t.year) and (x.month, x.day) == (2, 29)

    def t3(x: date) -> bool:
        for y in range(max(1, t.year - depth), t.year):
            if t.month == 2 and t.day == 29 and not _leap(y):
                lo, hi = date(y, 2, 26), date(y, 3, 3)
                hit = lo <= x <= hi
            else:
                anchor = date(y, t.month, t.day)
                hit = 0 < abs((x - anchor).days) <= 3
            if hit and not t1(x):
                return True
        return False

    months_back = (t.year - d.year) * 12 + t.month - d.month
    quarter = (t.month - 1) // 3
    checks = [
        t1(d),
        d.day == t.day and 1 <= months_back <= 24 and months_back % 12 != 0,
        t3(d),
        past and d.month == t.month,
        past and (d.month - 1) // 3 == quarter and d.month != t.month,
        past and (d.month - 1) // 3 == quarter ^ 1,
        _in_recent_months(d, t),
    ]
    return next((i + 1 for i, ok in enumerate(checks) if ok), None)


EDGE_DAYS = [
    D(2026, 2, 12),  # the seed's own example
    D(2028, 2, 29),  # leap day
    D(2027, 2, 28),  # Feb 28 of a non-leap year
    D(2028, 2, 28),  # Feb 28 of a leap year
    D(2027, 3, 1),
    D(2026, 1, 31),
    D(2026, 3, 31),  # quarter end, the 31st
    D(2026, 4, 1),  # quarter start
    D(2026, 6, 30),  # half-year end
    D(2026, 7, 1),  # half-year start
    D(2026, 8, 31),
    D(2026, 10, 31),
    D(2026, 12, 31),  # year end
    D(2026, 1, 1),  # year start
    D(2100, 2, 28),  # 2100 is not a leap year
]


@pytest.mark.parametrize("today", EDGE_DAYS, ids=str)
def test_every_day_gets_the_lowest_tier_the_rules_give(today: date) -> None:
    start = D(today.year - 11, 1, 1)
    for offset in range((today - start).days + 40):
        day = start + timedelta(days=offset)
        assert tier_of(day, today) == _oracle(day, today), f"{day} seen from {today}"


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("today", EDGE_DAYS[:5], ids=str)
def test_depth_limits_the_past_year_tiers(today: date, depth: int) -> None:
    for offset in range(0, 6 * 366):
        day = today - timedelta(days=offset)
        assert tier_of(day, today, max_years_back=depth) == _oracle(day, today, depth=depth), str(day)


def test_tier_days_are_disjoint_and_sorted() -> None:
    for today in EDGE_DAYS:
        days = tier_days(today)
        assert set(days) == set(TIER_WEIGHTS)
        flat = [d for tier in days.values() for d in tier]
        assert len(flat) == len(set(flat))
        for tier, listed in days.items():
            assert listed == sorted(listed)
            assert all(tier_of(d, today) == tier for d in listed)


# ---------------------------------------------------------------- boundaries, by hand


def test_seed_example_february_12() -> None:
    today = D(2026, 2, 12)
    days = tier_days(today)
    assert days[1] == [D(y, 2, 12) for y in range(2016, 2026)]
    months = [(2024, m) for m in range(3, 13)] + [(2025, 1)] + [(2025, m) for m in range(3, 13)] + [(2026, 1)]
    assert days[2] == [D(y, m, 12) for y, m in months]
    assert [d for d in days[3] if d.year == 2025] == [D(2025, 2, d) for d in (9, 10, 11, 13, 14, 15)]
    assert len(days[3]) == 60
    assert len(days[4]) == 28 * 10 + 3 - 10 - 60  # Februaries, three leap, minus tiers 1 and 3
    assert tier_of(D(2025, 1, 12), today) == 2  # 13 months ago: tier 2 before tier 5
    assert tier_of(D(2025, 1, 13), today) == 5
    assert tier_of(D(2025, 6, 30), today) == 6
    assert tier_of(D(2025, 7, 1), today) is None
    assert tier_of(D(2025, 8, 11), today) is None
    assert tier_of(D(2025, 8, 13), today) == 7
    assert tier_of(D(2025, 12, 11), today) == 7
    assert tier_of(D(2025, 12, 13), today) is None
    assert tier_of(D(2026, 2, 12), today) is None  # today itself
    assert tier_of(D(2015, 2, 12), today) is None  # 11 years back
    assert tier_of(D(2024, 2, 12), today, max_years_back=2) == 1
    assert tier_of(D(2023, 2, 12), today, max_years_back=2) is None


def test_leap_day() -> None:
    today = D(2028, 2, 29)
    days = tier_days(today)
    assert days[1] == [D(2020, 2, 29), D(2024, 2, 29)]
    assert [d for d in days[3] if d.year == 2027] == [
        D(2027, 2, 26),
        D(2027, 2, 27),
        D(2027, 2, 28),
        D(2027, 3, 1),
        D(2027, 3, 2),
        D(2027, 3, 3),
    ]
    assert tier_of(D(2027, 2, 25), today) == 4
    assert tier_of(D(2027, 3, 4), today) == 5
    assert tier_of(D(2024, 2, 26), today) == 3
    assert tier_of(D(2024, 3, 3), today) == 3
    assert len(days[2]) == 22  # day 29 exists in every month but February, which tier 2 skips


def test_february_28_of_a_non_leap_year_takes_february_29_too() -> None:
    today = D(2027, 2, 28)
    days = tier_days(today)
    assert days[1] == sorted([D(y, 2, 28) for y in range(2017, 2027)] + [D(2020, 2, 29), D(2024, 2, 29)])
    assert [d for d in days[3] if d.year == 2024] == [
        D(2024, 2, 25),
        D(2024, 2, 26),
        D(2024, 2, 27),
        D(2024, 3, 1),
        D(2024, 3, 2),
    ]
    assert tier_of(D(2024, 3, 3), today) == 5
    assert tier_of(D(2026, 3, 3), today) == 3
    assert tier_of(D(2024, 2, 24), today) == 4


def test_february_28_of_a_leap_year_leaves_february_29_to_tier_3() -> None:
    today = D(2028, 2, 28)
    assert tier_days(today)[1] == [D(y, 2, 28) for y in range(2018, 2028)]
    assert tier_of(D(2024, 2, 29), today) == 3


def test_march_1_reaches_back_over_a_leap_day() -> None:
    today = D(2027, 3, 1)
    assert tier_of(D(2024, 2, 29), today) == 3
    assert tier_of(D(2024, 2, 27), today) == 3
    assert tier_of(D(2024, 2, 26), today) == 5
    assert tier_of(D(2026, 2, 26), today) == 3
    assert tier_of(D(2026, 2, 25), today) == 5


def test_the_31st_and_a_quarter_end() -> None:
    today = D(2026, 3, 31)
    assert tier_days(today)[2] == [
        D(2024, 5, 31),
        D(2024, 7, 31),
        D(2024, 8, 31),
        D(2024, 10, 31),
        D(2024, 12, 31),
        D(2025, 1, 31),
        D(2025, 5, 31),
        D(2025, 7, 31),
        D(2025, 8, 31),
        D(2025, 10, 31),
        D(2025, 12, 31),
        D(2026, 1, 31),
    ]
    # tier 7 runs from Sep 30 (Mar 31 - 6 months, clamped) to Jan 31
    assert tier_of(D(2025, 9, 29), today) is None
    assert tier_of(D(2025, 9, 30), today) == 7
    assert tier_of(D(2026, 1, 30), today) == 7
    assert tier_of(D(2026, 1, 31), today) == 2
    assert tier_of(D(2026, 2, 1), today) is None
    # the week spills into the next quarter and stays tier 3
    assert tier_of(D(2025, 3, 27), today) == 4
    assert tier_of(D(2025, 3, 28), today) == 3
    assert tier_of(D(2025, 4, 3), today) == 3
    assert tier_of(D(2025, 4, 4), today) == 6
    assert tier_of(D(2025, 2, 15), today) == 5
    assert tier_of(D(2025, 7, 1), today) is None


def test_quarter_start() -> None:
    today = D(2026, 4, 1)
    assert tier_of(D(2025, 3, 29), today) == 3
    assert tier_of(D(2025, 3, 28), today) == 6
    assert tier_of(D(2025, 4, 4), today) == 3
    assert tier_of(D(2025, 4, 5), today) == 4
    assert tier_of(D(2025, 5, 1), today) == 2
    assert tier_of(D(2025, 5, 2), today) == 5
    assert tier_of(D(2025, 10, 1), today) == 2
    assert tier_of(D(2025, 10, 2), today) == 7
    assert tier_of(D(2025, 9, 30), today) is None
    assert tier_of(D(2026, 2, 2), today) is None


def test_half_year_edges() -> None:
    end_h1 = D(2026, 6, 30)
    assert tier_of(D(2025, 7, 3), end_h1) == 3
    assert tier_of(D(2025, 7, 4), end_h1) is None
    assert tier_of(D(2025, 1, 1), end_h1) == 6
    assert tier_of(D(2025, 3, 31), end_h1) == 6
    assert tier_of(D(2025, 4, 15), end_h1) == 5
    start_h2 = D(2026, 7, 1)
    assert tier_of(D(2025, 6, 28), start_h2) == 3
    assert tier_of(D(2025, 6, 27), start_h2) is None
    assert tier_of(D(2025, 10, 2), start_h2) == 6
    assert tier_of(D(2024, 12, 31), start_h2) == 6
    assert tier_of(D(2025, 9, 30), start_h2) == 5


def test_year_end_and_year_start() -> None:
    new_year = D(2026, 1, 1)
    assert tier_of(D(2024, 12, 29), new_year) == 3
    assert tier_of(D(2024, 12, 28), new_year) is None
    assert tier_of(D(2025, 1, 4), new_year) == 3
    assert tier_of(D(2025, 1, 5), new_year) == 4
    assert tier_of(D(2025, 7, 2), new_year) == 7
    assert tier_of(D(2025, 10, 31), new_year) == 7
    assert tier_of(D(2025, 11, 2), new_year) is None
    eve = D(2026, 12, 31)
    assert tier_of(D(2026, 1, 3), eve) == 3  # this calendar year, but a year ago this week
    assert tier_of(D(2026, 1, 4), eve) is None
    assert tier_of(D(2026, 6, 29), eve) is None
    assert tier_of(D(2026, 6, 30), eve) == 7
    assert tier_of(D(2026, 10, 30), eve) == 7


@pytest.mark.parametrize(
    ("today", "day", "tier", "years_ago", "months_ago"),
    [
        (D(2026, 1, 1), D(2024, 12, 29), 3, 1, 12),  # anchor year 2025
        (D(2026, 12, 31), D(2026, 1, 1), 3, 1, 11),
        (D(2026, 2, 12), D(2025, 1, 12), 2, 1, 13),
        (D(2026, 2, 12), D(2025, 12, 12), 2, 0, 2),
        (D(2026, 2, 12), D(2025, 10, 1), 7, 0, 4),
        (D(2026, 2, 12), D(2019, 2, 12), 1, 7, 84),
        (D(2026, 2, 12), D(2016, 5, 31), 6, 10, 116),
    ],
)
def test_years_and_months_ago(today: date, day: date, tier: int, years_ago: int, months_ago: int) -> None:
    got = resurface([("n", day)], today=today, seed=0)
    assert got is not None
    assert (got.tier, got.years_ago, got.months_ago, got.date) == (tier, years_ago, months_ago, day)


# ---------------------------------------------------------------- the pick

TODAY = D(2026, 2, 12)
ONE_PER_TIER = [
    ("t1", D(2020, 2, 12)),
    ("t2", D(2025, 6, 12)),
    ("t3", D(2020, 2, 14)),
    ("t4", D(2020, 2, 20)),
    ("t5", D(2020, 1, 20)),
    ("t6", D(2020, 5, 20)),
    ("t7", D(2025, 10, 20)),
]


def _tolerance(p: float, n: int) -> float:
    # 4.5 standard deviations of a binomial proportion: a fair draw strays
    # this far with probability under 1e-5, so a failure means a wrong weight.
    return 4.5 * math.sqrt(p * (1 - p) / n)


def test_tier_frequencies_follow_the_weights() -> None:
    index = ResurfaceIndex(ONE_PER_TIER)
    assert [tier_of(d, TODAY) for _i, d in ONE_PER_TIER] == [1, 2, 3, 4, 5, 6, 7]
    n = 6000
    tiers: Counter[int] = Counter()
    for seed in range(n):
        got = resurface(index, today=TODAY, seed=seed)
        assert got is not None and got.stage == "tier"
        tiers[got.tier] += 1  # type: ignore[index]
    total = sum(TIER_WEIGHTS.values())
    for tier, weight in TIER_WEIGHTS.items():
        p = weight / total
        assert abs(tiers[tier] / n - p) <= _tolerance(p, n), (tier, tiers[tier] / n, p)


def test_pick_inside_a_tier_follows_age_over_one_plus_show_count() -> None:
    candidates = [
        ("y1", D(2025, 2, 12)),  # 1 year, never shown: 1
        ("y2", D(2024, 2, 12)),  # 2 years, shown once: 2 / 2 = 1
        ("y3", D(2023, 2, 12)),  # 3 years, shown three times: 3 / 4
        ("y4", D(2022, 2, 12)),  # 4 years, never shown: 4
    ]
    history = ShowHistory.from_records(
        [
            {"id": "y2", "shown_on": "2025-06-01"},
            {"id": "y3", "shown_on": "2020-01-01"},
            {"id": "y3", "shown_on": "2021-01-01"},
            {"id": "y3", "shown_on": "2022-01-01"},
        ]
    )
    index = ResurfaceIndex(candidates)
    n = 4000
    picks = Counter()
    for seed in range(n):
        got = resurface(index, today=TODAY, seed=seed, history=history)
        assert got is not None and got.tier == 1 and got.stage in ("tier", "fallback")
        picks[got.id] += 1
    weights = {"y1": 1.0, "y2": 1.0, "y3": 0.75, "y4": 4.0}
    total = sum(weights.values())
    for node_id, w in weights.items():
        p = w / total
        assert abs(picks[node_id] / n - p) <= _tolerance(p, n), (node_id, picks[node_id] / n, p)


def test_months_weigh_the_recent_tiers() -> None:
    # tier 7: whole months ago (2 and 5, Aug 13 being a day short of 6) weigh 2 : 5
    index = ResurfaceIndex([("m2", D(2025, 12, 10)), ("m5", D(2025, 8, 13))])
    assert [tier_of(D(2025, 12, 10), TODAY), tier_of(D(2025, 8, 13), TODAY)] == [7, 7]
    n = 3000
    picks: Counter[str] = Counter()
    for s in range(n):
        got = resurface(index, today=TODAY, seed=s)
        assert got is not None
        assert got.months_ago == {"m2": 2, "m5": 5}[got.id]
        picks[got.id] += 1
    assert abs(picks["m5"] / n - 5 / 7) <= _tolerance(5 / 7, n)


def test_determinism_whatever_the_candidate_order() -> None:
    shuffled = list(ONE_PER_TIER) + [(f"x{i}", D(2020, 2, 12)) for i in range(30)]
    first = [resurface(shuffled, today=TODAY, seed=s) for s in range(40)]
    random.Random(5).shuffle(shuffled)
    index = ResurfaceIndex(shuffled)
    assert [resurface(index, today=TODAY, seed=s) for s in range(40)] == first
    assert [resurface(shuffled, today=TODAY, seed=s) for s in range(40)] == first
    assert len({r.id for r in first if r is not None}) > 5


def test_seed_and_day_together_choose() -> None:
    index = ResurfaceIndex(ONE_PER_TIER)
    by_seed = {resurface(index, today=TODAY, seed=s).tier for s in range(60)}  # type: ignore[union-attr]
    assert len(by_seed) >= 5
    # the same seed on different days walks different tiers
    days = [TODAY + timedelta(days=k) for k in range(40)]
    by_day = {resurface([("n", d - timedelta(days=365 * 3))], today=d, seed=1).stage for d in days}  # type: ignore[union-attr]
    assert by_day == {"tier", "fallback"}


def test_cooldown_and_relaxation() -> None:
    t = TODAY
    a = ("a", D(2025, 2, 12))
    b = ("b", D(2024, 2, 12))

    def shown(days_ago: int) -> list[dict[str, str]]:
        return [show_record("a", t - timedelta(days=days_ago))]

    for seed in range(20):
        assert resurface([a, b], today=t, seed=seed, history=shown(89)).id == "b"  # type: ignore[union-attr]
    got = resurface([a], today=t, seed=3, history=shown(89))
    assert got is not None and (got.id, got.tier, got.stage, got.show_count) == ("a", 1, "relaxed", 1)
    got = resurface([a], today=t, seed=3, history=shown(90))
    assert got is not None and got.stage in ("tier", "fallback") and got.show_count == 1
    got = resurface([a], today=t, seed=3, history=shown(30))
    assert got is not None and got.stage == "relaxed"
    got = resurface([a], today=t, seed=3, history=shown(29))
    assert got is not None and (got.id, got.tier, got.stage) == ("a", None, "any")
    got = resurface([a], today=t, seed=3, history=shown(0))
    assert got is not None and got.stage == "any"
    # a show after today does not exist yet: a replayed day ignores it
    got = resurface([a], today=t, seed=3, history=[show_record("a", t + timedelta(days=1))])
    assert got is not None and got.stage in ("tier", "fallback") and got.show_count == 0


def test_custom_cooldowns() -> None:
    a = ("a", D(2025, 2, 12))
    history = [show_record("a", TODAY - timedelta(days=10))]
    got = resurface([a], today=TODAY, seed=0, history=history, cooldown_days=10)
    assert got is not None and got.stage in ("tier", "fallback")
    got = resurface([a], today=TODAY, seed=0, history=history, cooldown_days=11, relaxed_cooldown_days=10)
    assert got is not None and got.stage == "relaxed"


def test_fallback_goes_by_weight() -> None:
    index = ResurfaceIndex([("six", D(2020, 5, 20)), ("seven", D(2025, 10, 20))])
    stages = Counter()
    for seed in range(400):
        got = resurface(index, today=TODAY, seed=seed)
        assert got is not None
        stages[(got.stage, got.tier)] += 1
    # a miss in tiers 1-5 falls to tier 7 (weight 8) before tier 6 (weight 5)
    assert set(stages) == {("tier", 6), ("tier", 7), ("fallback", 7)}
    tied = ResurfaceIndex([("two", D(2025, 6, 12)), ("three", D(2020, 2, 14))])
    outcomes = {(r.stage, r.tier) for r in (resurface(tied, today=TODAY, seed=s) for s in range(300)) if r}
    assert outcomes == {("tier", 2), ("tier", 3), ("fallback", 2)}  # equal weights: lower tier first


def test_last_resort_any_node() -> None:
    got = resurface([("recent", D(2025, 12, 25))], today=TODAY, seed=0)
    assert got is not None and got.to_dict() == {
        "id": "recent",
        "tier": None,
        "date": "2025-12-25",
        "years_ago": 0,
        "months_ago": 1,
        "show_count": 0,
        "stage": "any",
    }
    old = resurface([("old", D(2014, 2, 13))], today=TODAY, seed=0)
    assert old is not None and (old.tier, old.years_ago, old.months_ago) == (None, 11, 143)
    index = ResurfaceIndex([("p", D(2025, 12, 25)), ("q", D(2014, 2, 13)), ("future", D(2026, 3, 1))])
    picks = Counter(resurface(index, today=TODAY, seed=s).id for s in range(2000))  # type: ignore[union-attr]
    assert set(picks) == {"p", "q"}
    assert abs(picks["p"] / 2000 - 0.5) <= _tolerance(0.5, 2000)
    assert resurface([("future", D(2026, 3, 1))], today=TODAY, seed=0) is None
    assert resurface([], today=TODAY, seed=0) is None
    today_only = resurface([("now", TODAY)], today=TODAY, seed=0)
    assert today_only is not None and (today_only.stage, today_only.years_ago) == ("any", 0)


# ---------------------------------------------------------------- records and inputs


def test_show_record_and_history() -> None:
    assert show_record("kp_1", D(2026, 2, 12)) == {"id": "kp_1", "shown_on": "2026-02-12"}
    assert show_record("kp_1", D(2026, 2, 12), tier=3) == {"id": "kp_1", "shown_on": "2026-02-12", "tier": 3}
    history = ShowHistory.from_records(
        [
            {"id": "a", "shown_on": "2026-01-01", "tier": 1},
            {"id": "a", "shown_on": "2025-01-01"},
            {"id": "a", "shown_on": "2026-2-1"},  # not YYYY-MM-DD
            {"id": "a", "shown_on": "20260201"},  # compact ISO is refused too
            {"id": "a", "shown_on": "2026-02-30"},
            {"id": "", "shown_on": "2026-01-01"},
            {"shown_on": "2026-01-01"},
            ["a", "2026-01-01"],
            {"id": "b", "shown_on": 20260101},
        ]
    )
    assert history.malformed == 7
    assert history.shown == {"a": (D(2025, 1, 1).toordinal(), D(2026, 1, 1).toordinal())}
    assert history.as_of("a", D(2025, 6, 1).toordinal()) == (1, D(2025, 1, 1).toordinal())
    assert history.as_of("a", D(2024, 6, 1).toordinal()) == (0, None)
    assert history.as_of("zz", D(2026, 6, 1).toordinal()) == (0, None)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: show_record("", D(2026, 1, 1)), "node_id must be a non-empty string"),
        (lambda: show_record("a", datetime(2026, 1, 1, tzinfo=UTC)), "today must be a datetime.date"),
        (lambda: show_record("a", D(2026, 1, 1), tier=8), "tier must be 1 to 7 or None"),
        (lambda: resurface([], today=D(2026, 1, 1), seed=True), "seed must be an integer"),
        (lambda: resurface([], today=D(2026, 1, 1), seed="1"), "seed must be an integer"),
        (lambda: resurface([], today="2026-01-01", seed=1), "today must be a datetime.date"),
        (lambda: resurface([], today=D(2026, 1, 1), seed=1, max_years_back=0), "max_years_back must be"),
        (lambda: resurface([], today=D(2026, 1, 1), seed=1, cooldown_days=-1), "cooldown_days must be"),
        (lambda: resurface([("a",)], today=D(2026, 1, 1), seed=1), "expected \\(id, date\\) pairs"),
        (lambda: resurface([("a", "2020-01-01")], today=D(2026, 1, 1), seed=1), "node 'a' has date"),
        (lambda: resurface([(3, D(2020, 1, 1))], today=D(2026, 1, 1), seed=1), "non-empty string, got 3"),
        (
            lambda: resurface([("a", D(2020, 1, 1)), ("a", D(2021, 1, 1))], today=D(2026, 1, 1), seed=1),
            "node id 'a' is given twice",
        ),
    ],
)
def test_bad_arguments_are_named(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgumentError, match=message):
        call()


def test_node_date() -> None:
    ts = datetime(2026, 2, 11, 23, 30, tzinfo=UTC).timestamp()
    assert node_date(ts) == D(2026, 2, 11)
    assert node_date(ts, tz=timezone(timedelta(hours=8))) == D(2026, 2, 12)
    assert node_date(ts, "2019-02-12") == D(2019, 2, 12)
    assert node_date(None, D(2019, 2, 12)) == D(2019, 2, 12)
    aware = datetime(2019, 2, 12, 20, 0, tzinfo=UTC)
    assert node_date(None, aware, tz=timezone(timedelta(hours=8))) == D(2019, 2, 13)
    assert node_date(None, datetime(2019, 2, 12, 20, 0)) == D(2019, 2, 12)  # naive: as written
    assert node_date(None) is None
    with pytest.raises(InvalidNodeError, match="node 'kp_1': field 'date' must be a date") as err:
        node_date(ts, "12/02/2019", node_id="kp_1")
    assert (err.value.field, err.value.node_id, err.value.value) == ("date", "kp_1", "12/02/2019")
    with pytest.raises(InvalidNodeError, match="field 'date'"):
        node_date(ts, 20190212, node_id="kp_1")
    with pytest.raises(InvalidNodeError, match="created_at must be seconds"):
        node_date(True, node_id="kp_2")
    with pytest.raises(InvalidNodeError, match="not a representable time"):
        node_date(1e20, node_id="kp_3")


@pytest.mark.parametrize("today", [D(1, 1, 1), D(1, 4, 30), D(2, 1, 2), D(3, 2, 28)], ids=str)
def test_the_first_years_of_the_calendar_just_have_fewer_days(today: date) -> None:
    start = D(1, 1, 1)
    for offset in range((today - start).days + 1):
        day = start + timedelta(days=offset)
        assert tier_of(day, today) == _oracle(day, today), str(day)
    got = resurface([("first", D(1, 1, 1))], today=today, seed=0)
    assert got is not None and got.id == "first"


def test_index_size_and_lookup() -> None:
    index = ResurfaceIndex([("b", D(2020, 1, 1)), ("a", D(2020, 1, 1)), ("c", D(2021, 1, 1))])
    assert len(index) == 3
    assert index.on(D(2020, 1, 1).toordinal()) == ("a", "b")
    assert index.on(D(2019, 1, 1).toordinal()) == ()
    assert len(ResurfaceIndex([])) == 0


def test_docs_examples_run_as_written() -> None:
    doc = Path(__file__).resolve().parent.parent / "docs" / "recall.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, str(doc), "exec"), {})


# ---------------------------------------------------------------- the store surface


def _noon(day: date) -> float:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC).timestamp()


def test_store_resurface_is_deterministic_and_records_only_when_asked(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:  # closed: its files were left to the collector
        dated = {"kp_a": D(2019, 2, 12), "kp_b": D(2023, 2, 12), "kp_c": D(2025, 12, 10)}
        for node_id, day in dated.items():
            store.add(id=node_id, layer="knowledge", body=f"# {node_id}\n\nnote\n", created_at=_noon(day))
        today = D(2026, 2, 12)
        expected = resurface(list(dated.items()), today=today, seed=3)
        pick = store.resurface(today, seed=3)
        assert pick == expected and pick is not None
        assert store.resurface(today, seed=3) == pick
        assert store.log(SHOW_LOG).read() == []  # record=False writes nothing
        shown = store.resurface(today, seed=3, record=True)
        assert shown == pick
        assert store.log(SHOW_LOG).read() == [show_record(pick.id, today, tier=pick.tier)]
        # one day shows one memory: the same one again, and no second record (session 30)
        assert store.resurface(today, seed=3) == pick
        assert store.resurface(today, seed=3, record=True) == pick
        assert store.log(SHOW_LOG).read() == [show_record(pick.id, today, tier=pick.tier)]
        after = store.resurface(today + timedelta(days=1), seed=3)
        assert after is not None and after.id != pick.id  # 90 days of cooldown from the next day
        assert store.resurface(D(2000, 1, 1), seed=3) is None  # nothing dated that early


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*")}


def test_a_read_only_handle_records_no_show(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="kp_a", layer="knowledge", body="# kp_a\n\nnote\n", created_at=_noon(D(2019, 2, 12)))
    before = _tree(root)
    with MdCG(root, read_only=True) as reader:
        pick = reader.resurface(D(2026, 2, 12), record=True)
        assert pick is not None and pick.id == "kp_a"
    assert _tree(root) == before  # no show log, no folder, no mtime changed


def test_a_show_that_cannot_be_recorded_warns_once_and_still_shows(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="kp_a", layer="knowledge", body="# kp_a\n\nnote\n", created_at=_noon(D(2019, 2, 12)))
    (root / ".mdcg" / SHOW_LOG).write_text("a file planted where the show log's folder goes\n")
    planted = "resurface: is a file where md-cg keeps a folder"
    with MdCG(root) as store, pytest.warns(RuntimeWarning, match=planted) as warned:
        assert store.resurface(D(2026, 2, 12), record=True).id == "kp_a"  # type: ignore[union-attr]
        assert store.resurface(D(2026, 2, 12), record=True).id == "kp_a"  # type: ignore[union-attr]
        assert [f.kind for f in store.health().findings] == ["access_unrecorded"]
    assert len(warned) == 1


def test_a_scoped_callers_shows_do_not_cool_down_another_callers(tmp_path: Path) -> None:
    """Review (session 25): bob's shows of a shared memory raised alice's show count and
    cooldown: show records carried no scope. They carry it now, and count as recall
    statistics count access events."""
    from md_cg.visibility import Scope

    root = tmp_path / "s"
    today = D(2026, 2, 12)
    with MdCG(root) as store:  # unscoped: a shared memory
        store.add(
            id="kp_shared", layer="knowledge", body="# Shared\n\nnote\n", created_at=_noon(D(2023, 2, 12))
        )
    with MdCG(root, scope=Scope(agent="bob")) as bob:
        first = bob.resurface(today, seed=1, record=True)
        assert first is not None and (first.id, first.show_count, first.stage) == ("kp_shared", 0, "fallback")
        assert bob.resurface(today, seed=1) == first  # one day, one memory (session 30)
        again = bob.resurface(today + timedelta(days=1), seed=1)
        assert again is not None and (again.show_count, again.stage) == (1, "any")  # bob's cooldown
        assert bob.log(SHOW_LOG).read() == [
            {"id": "kp_shared", "shown_on": "2026-02-12", "tier": 1, "agent": "bob"}
        ]
    with MdCG(root, scope=Scope(agent="alice", workspace="w")) as alice:
        mine = alice.resurface(today, seed=1, record=True)
        assert mine is not None and (mine.show_count, mine.stage) == (0, "fallback")  # bob's show is not hers
        assert alice.log(SHOW_LOG).read()[-1] == {
            "id": "kp_shared", "shown_on": "2026-02-12", "tier": 1, "agent": "alice", "workspace": "w"
        }  # fmt: skip
    with MdCG(root) as store:  # an unscoped caller counts every show, old unscoped records too
        store.log(SHOW_LOG).append([show_record("kp_shared", D(2026, 1, 1))])
        everyone = store.resurface(today + timedelta(days=1), seed=1)
        assert everyone is not None and (everyone.show_count, everyone.stage) == (3, "any")
    with MdCG(root, scope=Scope(agent="bob")) as bob:
        later = bob.resurface(today + timedelta(days=1), seed=1)
        assert later is not None and later.show_count == 1  # the unscoped record is not bob's
