"""Resurfacing ("on this day"): bring one old memory back on purpose.

Pure logic over (node id, date) pairs, a show history and a day; nothing here
reads a store. The algorithm follows the Remembos design (seed 003):

Tiers, tried in a weighted random order, each a set of calendar days relative
to ``today`` (past years = the ``max_years_back`` years before this one):

====  ======  ==============================================================
tier  weight  days
====  ======  ==============================================================
1     35      the same month and day in past years (Feb 29 only in past leap
              years; on Feb 28 of a non-leap year, Feb 29 of past leap years
              too)
2     15      the same day of month in the 24 months before this one, skipping
              months without that day and this calendar month (tier 1)
3     15      ±3 days around the same day in past years, the day itself
              excluded
4     12      the rest of the same month in past years
5     10      the other months of the same quarter in past years
6     5       the other quarter of the same half-year in past years
7     8       from 6 months to 2 months before today (inclusive)
====  ======  ==============================================================

A day belongs to the lowest-numbered tier whose rule it matches, so the tiers
are disjoint (the seed's exclusions — tier 2 skips tier 1's months, tier 4
skips tier 1 and 3 days, tier 5 skips this month, tier 6 this quarter —
generalised to every overlap, e.g. tier 3's days that spill into a
neighbouring month of the quarter stay in tier 3).

Selection: the first tier is drawn by weight; the others follow by weight
(descending, ties by tier number). In each tier, nodes shown in the last 90
days are left out and one node is drawn with weight
``(age / max_age) * 1 / (1 + show_count)``, where age is ``years_ago`` in the
past-year tiers and whole months ago in tiers 2 and 7 (whose ``years_ago``
may be 0, which would make a node unpickable). If every tier is empty, the
tiers are tried again with a 30-day cooldown, then any node dated on or
before today is drawn uniformly.

Determinism: the random stream is seeded from SHA-256 of the seed and the
ISO day, so a given ``today`` and ``seed`` always give the same pick, and the
same seed gives different picks on different days.

Show history record (append-only JSON lines)::

    {"id": "kp_1", "shown_on": "2026-02-12", "tier": 1}

``tier`` is informative and optional; unknown keys are ignored. Records
dated after ``today`` are ignored, so a past day can be replayed.

Imports only :mod:`md_cg.errors` and the standard library.
"""

from __future__ import annotations

import calendar
import hashlib
import random
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from .errors import InvalidArgumentError, InvalidNodeError
from .script import short_repr

#: Tier number -> weight (percent).
TIER_WEIGHTS: Mapping[int, int] = {1: 35, 2: 15, 3: 15, 4: 12, 5: 10, 6: 5, 7: 8}
COOLDOWN_DAYS = 90
RELAXED_COOLDOWN_DAYS = 30
MAX_YEARS_BACK = 10
#: Frontmatter key (an "extra" key) holding a user-chosen date for a node,
#: ISO ``YYYY-MM-DD``; it wins over ``created_at``.
DATE_FIELD = "date"

#: How a pick was found, from the strictest to the loosest.
STAGES: tuple[str, ...] = ("tier", "fallback", "relaxed", "any")

_TIER_MONTHS_WINDOW = 24
_WEEK_RADIUS = 3


class Candidate(NamedTuple):
    """A node that may be resurfaced, with the day it belongs to."""

    id: str
    date: date


@dataclass(frozen=True)
class Resurfaced:
    """The memory brought back.

    ``tier`` is None when the pick came from the last resort (any node);
    ``years_ago`` is 0 in tier 7 and, in tier 2, whole years of the months
    ago; ``months_ago`` is the age in whole months; ``show_count`` counts the
    shows recorded before this one; ``stage`` is one of :data:`STAGES`.
    """

    id: str
    tier: int | None
    date: date
    years_ago: int
    months_ago: int
    show_count: int
    stage: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tier": self.tier,
            "date": self.date.isoformat(),
            "years_ago": self.years_ago,
            "months_ago": self.months_ago,
            "show_count": self.show_count,
            "stage": self.stage,
        }


# --------------------------------------------------------------------------
# dates of nodes, show history


def _strict_iso_date(text: str) -> date | None:
    # date.fromisoformat also takes 20240229 and week dates; the format is
    # YYYY-MM-DD only, so a typo is caught rather than read as another day.
    if len(text) != 10 or text[4] != "-" or text[7] != "-":
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def node_date(
    created_at: float | None,
    user_date: object = None,
    *,
    tz: tzinfo | None = UTC,
    node_id: str | None = None,
) -> date | None:
    """The day a node belongs to, for resurfacing.

    ``user_date`` (the node's :data:`DATE_FIELD` frontmatter value) wins when
    present: a ``YYYY-MM-DD`` string, a :class:`date`, or a datetime (aware
    ones are converted to ``tz``). Otherwise ``created_at`` (seconds since the
    epoch) is read as a day in ``tz`` (None: the system's local time zone with its
    daylight saving time on that day, not today's offset). Returns None when the
    node has neither.
    Raises :class:`InvalidNodeError` naming the field and the node.
    """
    if user_date is not None:
        if isinstance(user_date, datetime):
            return (user_date.astimezone(tz) if user_date.tzinfo else user_date).date()
        if isinstance(user_date, date):
            return user_date
        parsed = _strict_iso_date(user_date) if isinstance(user_date, str) else None
        if parsed is None:
            raise InvalidNodeError(
                f"node {node_id!r}: field {DATE_FIELD!r} must be a date written YYYY-MM-DD, "
                f"got {user_date!r}",
                field=DATE_FIELD,
                value=user_date,
                node_id=node_id,
            )
        return parsed
    if created_at is None:
        return None
    if isinstance(created_at, bool) or not isinstance(created_at, int | float):
        raise InvalidNodeError(
            f"node {node_id!r}: created_at must be seconds since the epoch, got {created_at!r}",
            field="created_at",
            value=created_at,
            node_id=node_id,
        )
    try:
        return datetime.fromtimestamp(created_at, tz).date()
    except (OverflowError, OSError, ValueError):
        raise InvalidNodeError(
            f"node {node_id!r}: created_at {created_at!r} is not a representable time",
            field="created_at",
            value=created_at,
            node_id=node_id,
        ) from None


def show_record(node_id: str, today: date, *, tier: int | None = None) -> dict[str, Any]:
    """The history record of showing ``node_id`` on ``today`` (to append)."""
    if not isinstance(node_id, str) or not node_id:
        raise InvalidArgumentError(f"node_id must be a non-empty string, got {node_id!r}", name="node_id")
    rec: dict[str, Any] = {"id": node_id, "shown_on": _check_today(today).isoformat()}
    if tier is not None:
        if tier not in TIER_WEIGHTS:
            raise InvalidArgumentError(f"tier must be 1 to 7 or None, got {tier!r}", name="tier")
        rec["tier"] = tier
    return rec


@dataclass(frozen=True)
class ShowHistory:
    """Parsed show history: per id, the sorted day ordinals it was shown on.

    ``malformed`` counts records skipped (not an object, no id, a
    ``shown_on`` that is not ``YYYY-MM-DD``).
    """

    shown: Mapping[str, tuple[int, ...]]
    malformed: int = 0

    @classmethod
    def from_records(cls, records: Iterable[object]) -> ShowHistory:
        """Read decoded JSON-lines records; bad records are counted, not fatal."""
        days: dict[str, list[int]] = {}
        malformed = 0
        for rec in records:
            node_id = rec.get("id") if isinstance(rec, Mapping) else None
            shown_on = rec.get("shown_on") if isinstance(rec, Mapping) else None
            day = _strict_iso_date(shown_on) if isinstance(shown_on, str) else None
            if not isinstance(node_id, str) or not node_id or day is None:
                malformed += 1
                continue
            days.setdefault(node_id, []).append(day.toordinal())
        return cls({k: tuple(sorted(v)) for k, v in days.items()}, malformed)

    def as_of(self, node_id: str, day: int) -> tuple[int, int | None]:
        """(shows on or before ordinal ``day``, the last such day or None)."""
        seq = self.shown.get(node_id)
        if not seq:
            return 0, None
        n = bisect_right(seq, day)
        return n, (seq[n - 1] if n else None)


# --------------------------------------------------------------------------
# the tier calendar


def _add_months(day: date, months: int) -> date | None:
    """``day`` moved by whole months, the day clamped to the month's length
    (None before year 1: the calendar of the first years is just shorter)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    if year < 1:
        return None
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _months_between(earlier: date, later: date) -> int:
    months = (later.year - earlier.year) * 12 + later.month - earlier.month
    return months - 1 if earlier.day > later.day else months


def _years_between(earlier: date, later: date) -> int:
    years = later.year - earlier.year
    return years - 1 if (earlier.month, earlier.day) > (later.month, later.day) else years


def _valid(year: int, month: int, day: int) -> bool:
    return 1 <= year <= 9999 and day <= calendar.monthrange(year, month)[1]


def _tier1(today: date, years: Sequence[int]) -> list[tuple[int, int]]:
    out = []
    feb28_nonleap = (today.month, today.day) == (2, 28) and not calendar.isleap(today.year)
    for y in years:
        if _valid(y, today.month, today.day):
            out.append((date(y, today.month, today.day).toordinal(), y))
        if feb28_nonleap and calendar.isleap(y):
            out.append((date(y, 2, 29).toordinal(), y))
    return out


def _tier2(today: date) -> list[tuple[int, int]]:
    out = []
    for k in range(1, _TIER_MONTHS_WINDOW + 1):
        if k % 12 == 0:
            continue  # this calendar month: tier 1's day
        first = _add_months(today.replace(day=1), -k)
        if first is not None and _valid(first.year, first.month, today.day):
            out.append((first.replace(day=today.day).toordinal(), k))
    return out


def _tier3(today: date, years: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for y in years:
        if _valid(y, today.month, today.day):
            centre = date(y, today.month, today.day).toordinal()
            before, after = centre - 1, centre + 1
        else:  # Feb 29 in a non-leap year sits between Feb 28 and Mar 1
            before = date(y, 2, 28).toordinal()
            after = before + 1
        out.extend((before - k, y) for k in range(_WEEK_RADIUS) if before - k >= 1)
        out.extend((after + k, y) for k in range(_WEEK_RADIUS))
    return out


def _month_days(years: Sequence[int], months: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for y in years:
        for m in months:
            start = date(y, m, 1).toordinal()
            out.extend((start + i, y) for i in range(calendar.monthrange(y, m)[1]))
    return out


def _tier_rules(today: date, years: Sequence[int]) -> list[list[tuple[int, int]]]:
    """Each tier's days as (ordinal, key): key is the anchor year for the
    past-year tiers and months ago for tier 2; tier 7's key is filled later."""
    quarter = (today.month - 1) // 3
    quarter_months = [3 * quarter + i + 1 for i in range(3)]
    half_other = 3 * (quarter ^ 1)
    lo = _add_months(today, -6) or date.min
    hi = _add_months(today, -2)
    recent = [] if hi is None else [(o, 0) for o in range(lo.toordinal(), hi.toordinal() + 1)]
    return [
        _tier1(today, years),
        _tier2(today),
        _tier3(today, years),
        _month_days(years, [today.month]),
        _month_days(years, [m for m in quarter_months if m != today.month]),
        _month_days(years, [half_other + i + 1 for i in range(3)]),
        recent,
    ]


@lru_cache(maxsize=64)
def _calendar(today: date, max_years_back: int) -> tuple[Mapping[int, tuple[int, int]], ...]:
    """Per tier, its days: ordinal -> (years_ago, months_ago), oldest first.

    Disjoint by construction: a day keeps the lowest tier that claims it.
    Cached per (day, depth), so repeated calls on one day cost nothing.
    """
    years = [y for y in range(today.year - 1, today.year - max_years_back - 1, -1) if y >= 1]
    taken: set[int] = set()
    tiers: list[Mapping[int, tuple[int, int]]] = []
    for tier, days in enumerate(_tier_rules(today, years), start=1):
        rows: dict[int, tuple[int, int]] = {}
        for ordinal, anchor_year in sorted(days):
            if ordinal in taken:
                continue
            taken.add(ordinal)
            months = _months_between(date.fromordinal(ordinal), today)
            if tier == 2:
                years_ago = months // 12
            elif tier == 7:
                years_ago = 0
            else:
                years_ago = today.year - anchor_year
            rows[ordinal] = (years_ago, months)
        tiers.append(MappingProxyType(rows))
    return tuple(tiers)


def _check_depth(max_years_back: object) -> int:
    if isinstance(max_years_back, bool) or not isinstance(max_years_back, int) or max_years_back < 1:
        raise InvalidArgumentError(
            f"max_years_back must be a positive integer, got {max_years_back!r}",
            name="max_years_back",
            value=max_years_back,
        )
    return max_years_back


def tier_days(today: date, max_years_back: int = MAX_YEARS_BACK) -> dict[int, list[date]]:
    """Every day each tier covers as seen from ``today``: tier -> sorted days."""
    cal = _calendar(_check_today(today), _check_depth(max_years_back))
    return {tier: [date.fromordinal(o) for o in rows] for tier, rows in enumerate(cal, start=1)}


@lru_cache(maxsize=64)
def _tier_lookup(today: date, max_years_back: int) -> Mapping[int, int]:
    cal = _calendar(today, max_years_back)
    return MappingProxyType({o: tier for tier, rows in enumerate(cal, start=1) for o in rows})


def tier_of(day: date, today: date, max_years_back: int = MAX_YEARS_BACK) -> int | None:
    """The tier ``day`` falls in as seen from ``today`` (None: no tier)."""
    lookup = _tier_lookup(_check_today(today), _check_depth(max_years_back))
    return lookup.get(day.toordinal())


def _check_today(today: object) -> date:
    if isinstance(today, datetime) or not isinstance(today, date):
        raise InvalidArgumentError(f"today must be a datetime.date, got {today!r}", name="today", value=today)
    return today


# --------------------------------------------------------------------------
# candidates and the pick


def _check_candidate(cand: object) -> tuple[str, int]:
    node_id: object
    day: object
    try:
        node_id, day = cand  # type: ignore[misc]
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"candidates: expected (id, date) pairs, got {cand!r}", name="candidates"
        ) from None
    if not isinstance(node_id, str) or not node_id:
        raise InvalidArgumentError(
            f"candidates: a node id must be a non-empty string, got {node_id!r}", name="candidates"
        )
    if not isinstance(day, date):
        raise InvalidArgumentError(
            f"candidates: node {node_id!r} has date {day!r}, expected a datetime.date", name="candidates"
        )
    return node_id, day.toordinal()


class ResurfaceIndex:
    """Candidates bucketed by day: build once per store state, reuse per call.

    A call then looks up the few thousand days its tiers cover instead of
    scanning every node.
    """

    __slots__ = ("_by_day", "_cumulative", "_day_of", "_days")

    def __init__(self, candidates: Iterable[Sequence[Any]]) -> None:
        by_day: dict[int, list[str]] = {}
        seen: dict[str, int] = {}
        for cand in candidates:
            node_id, ordinal = _check_candidate(cand)
            if node_id in seen:
                raise InvalidArgumentError(
                    f"candidates: node id {node_id!r} is given twice", name="candidates"
                )
            seen[node_id] = ordinal
            by_day.setdefault(ordinal, []).append(node_id)
        self._day_of = seen
        # Sorted buckets make a pick independent of the order nodes came in.
        self._by_day = {o: tuple(sorted(ids)) for o, ids in by_day.items()}
        self._days = sorted(self._by_day)
        total = 0
        self._cumulative = []
        for o in self._days:
            total += len(self._by_day[o])
            self._cumulative.append(total)

    def __len__(self) -> int:
        return self._cumulative[-1] if self._cumulative else 0

    def day_of(self, node_id: str) -> date | None:
        """The day of candidate ``node_id``, or None when it is no candidate."""
        ordinal = self._day_of.get(node_id)
        return None if ordinal is None else date.fromordinal(ordinal)

    def on(self, ordinal: int) -> tuple[str, ...]:
        """The ids dated on day ``ordinal``, sorted."""
        return self._by_day.get(ordinal, ())

    def days_among(self, ordinals: Iterable[int]) -> list[int]:
        """The day ordinals among ``ordinals`` that hold nodes, sorted."""
        return sorted(self._by_day.keys() & ordinals)

    def nth_up_to(self, ordinal: int, rng: random.Random) -> tuple[str, int] | None:
        """A uniformly drawn (id, day ordinal) among nodes dated on or before ``ordinal``."""
        last = bisect_right(self._days, ordinal)
        if last == 0:
            return None
        r = rng.randrange(self._cumulative[last - 1])
        i = bisect_right(self._cumulative, r)
        before = self._cumulative[i - 1] if i else 0
        return self._by_day[self._days[i]][r - before], self._days[i]


def _rng(seed: int, today: date) -> random.Random:
    digest = hashlib.sha256(f"md-cg resurface|{seed}|{today.isoformat()}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def _tier_order(rng: random.Random) -> list[int]:
    first = rng.choices(list(TIER_WEIGHTS), weights=list(TIER_WEIGHTS.values()))[0]
    rest = sorted((t for t in TIER_WEIGHTS if t != first), key=lambda t: (-TIER_WEIGHTS[t], t))
    return [first, *rest]


_YEAR_TIERS = frozenset({1, 3, 4, 5, 6})


def _pick_in_tier(
    index: ResurfaceIndex,
    shows: ShowHistory,
    rows: Mapping[int, tuple[int, int]],
    tier: int,
    today: int,
    cooldown: int,
    rng: random.Random,
) -> tuple[str, int, int, int, int] | None:
    """(id, ordinal, years_ago, months_ago, show_count) drawn from one tier."""
    pool: list[tuple[str, int, int, int, int]] = []
    ages: list[int] = []
    by_years = tier in _YEAR_TIERS
    for ordinal in index.days_among(rows.keys()):
        years_ago, months_ago = rows[ordinal]
        for node_id in index.on(ordinal):
            count, last = shows.as_of(node_id, today)
            if last is not None and today - last < cooldown:
                continue
            pool.append((node_id, ordinal, years_ago, months_ago, count))
            ages.append(years_ago if by_years else months_ago)
    if not pool:
        return None
    max_age = max(ages)
    # score = (age / max_age) * 1 / (1 + show_count); ages are >= 1 by construction.
    weights = [age / max_age / (1 + entry[4]) for age, entry in zip(ages, pool, strict=True)]
    return rng.choices(pool, weights=weights)[0]


def _check_days(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(
            f"{name} must be a non-negative integer, got {short_repr(value)}", name=name
        )
    return value


def resurface(
    candidates: ResurfaceIndex | Iterable[Sequence[Any]],
    *,
    today: date,
    seed: int,
    history: ShowHistory | Iterable[object] = (),
    max_years_back: int = MAX_YEARS_BACK,
    cooldown_days: int = COOLDOWN_DAYS,
    relaxed_cooldown_days: int = RELAXED_COOLDOWN_DAYS,
) -> Resurfaced | None:
    """Pick the memory to bring back on ``today`` (None: no node dated on or before it).

    ``candidates`` are the in-scope, active nodes as (id, date) pairs (see
    :func:`node_date`) or a prebuilt :class:`ResurfaceIndex`; ``history`` is
    a :class:`ShowHistory` or the decoded records of the show log. Nothing is
    recorded: showing is the caller's act (append :func:`show_record`).
    """
    today = _check_today(today)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidArgumentError(f"seed must be an integer, got {seed!r}", name="seed", value=seed)
    calendar_ = _calendar(today, _check_depth(max_years_back))
    cooldowns = (
        _check_days(cooldown_days, "cooldown_days"),
        _check_days(relaxed_cooldown_days, "relaxed_cooldown_days"),
    )
    index = candidates if isinstance(candidates, ResurfaceIndex) else ResurfaceIndex(candidates)
    shows = history if isinstance(history, ShowHistory) else ShowHistory.from_records(history)
    rng = _rng(seed, today)
    order = _tier_order(rng)
    t = today.toordinal()
    for relaxed, cooldown in enumerate(cooldowns):
        for tier in order:
            hit = _pick_in_tier(index, shows, calendar_[tier - 1], tier, t, cooldown, rng)
            if hit is not None:
                stage = "relaxed" if relaxed else ("tier" if tier == order[0] else "fallback")
                node_id, ordinal, years_ago, months_ago, count = hit
                day = date.fromordinal(ordinal)
                return Resurfaced(node_id, tier, day, years_ago, months_ago, count, stage)
    drawn = index.nth_up_to(t, rng)
    if drawn is None:
        return None
    node_id, ordinal = drawn
    day = date.fromordinal(ordinal)
    count, _last = shows.as_of(node_id, t)
    return Resurfaced(
        node_id, None, day, _years_between(day, today), _months_between(day, today), count, "any"
    )
