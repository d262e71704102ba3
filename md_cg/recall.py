"""Recall statistics over access events, and the adaptive inject budget.

Pure logic: nothing here reads a store or a file other than the shipped cue
list. The store feeds :func:`recall_stats` the events of its access log and
the nodes of the caller's scope; the CLI and the MCP server render the
frozen result.

Access event record (one JSON object per line of the access log)::

    {"ts": 1726739200123456789, "mode": "search",
     "agent": "agent-a", "workspace": "ws-1", "ids": ["kp_1", "kp_2"]}

* ``ts``: integer nanoseconds since the Unix epoch (UTC), as the existing
  access log writes them;
* ``mode``: ``search``, ``inject`` or ``get``;
* ``agent``, ``workspace``: the caller's scope, a string or absent/``null``
  for an unscoped caller;
* ``ids``: the node ids one call exposed, each once, in result order (an
  empty list is a call that exposed nothing: an inject run that filled no
  slot still counts as a run).

Unknown keys are ignored, so later versions may add fields. A record that
breaks any of these rules is skipped and counted as ``malformed``.

Imports only :mod:`md_cg.errors` and the standard library.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple

from .errors import DataFileError, InvalidArgumentError
from .script import short_repr

#: The kinds of access an event records.
MODES: tuple[str, ...] = ("search", "inject", "get")
_MODE_SET = frozenset(MODES)

DEFAULT_WINDOW_DAYS = 30
DEFAULT_EXEMPT_DAYS = 7
DEFAULT_INJECT_SLOTS = 5
DEFAULT_TOP_N = 10
#: Events read at most by one :func:`recall_stats` call; past it the result is
#: marked ``truncated`` instead of silently counting less. Two million keeps a
#: call within a few seconds on a laptop core.
DEFAULT_SCAN_CAP = 2_000_000

_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS
_END = object()
_COUNT_BATCH = 1 << 16

CUES_PATH = Path(__file__).parent / "data" / "recall_cues.json"
#: Queries shorter than this (in characters, after trimming) match almost
#: anything, so they are treated as broad.
SHORT_QUERY_CHARS = 5


# --------------------------------------------------------------------------
# access events


@dataclass(frozen=True)
class AccessEvent:
    """One recorded access: who exposed which node ids, how and when."""

    ts_ns: int
    mode: str
    ids: tuple[str, ...]
    agent: str | None = None
    workspace: str | None = None

    @property
    def time(self) -> datetime:
        """``ts_ns`` as an aware UTC datetime (microsecond precision)."""
        return _ns_to_datetime(self.ts_ns)

    def to_dict(self) -> dict[str, Any]:
        """The record as it is written to the access log."""
        rec: dict[str, Any] = {"ts": self.ts_ns, "mode": self.mode}
        if self.agent is not None:
            rec["agent"] = self.agent
        if self.workspace is not None:
            rec["workspace"] = self.workspace
        rec["ids"] = list(self.ids)
        return rec


def event_record(
    mode: str,
    ids: Iterable[str],
    *,
    ts_ns: int,
    agent: str | None = None,
    workspace: str | None = None,
) -> dict[str, Any]:
    """Build the log record of one access; duplicate ids are kept once.

    Raises :class:`InvalidArgumentError` naming the argument that is wrong, so
    a bad event is refused at write time instead of being skipped at read
    time.
    """
    if mode not in _MODE_SET:
        raise InvalidArgumentError(
            f"mode must be one of {', '.join(MODES)}, got {short_repr(mode)}", name="mode", value=mode
        )
    if type(ts_ns) is not int or ts_ns < 0:
        raise InvalidArgumentError(
            f"ts_ns must be a non-negative integer (nanoseconds since the epoch), got {ts_ns!r}",
            name="ts_ns",
            value=ts_ns,
        )
    for name, value in (("agent", agent), ("workspace", workspace)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a string or None, got {short_repr(value)}", name=name)
    if isinstance(ids, str):
        raise InvalidArgumentError("ids must be a list of node ids, not one string", name="ids", value=ids)
    given = list(ids)
    for node_id in given:
        if not isinstance(node_id, str) or not node_id:
            raise InvalidArgumentError(
                f"ids must hold non-empty strings, got {node_id!r}", name="ids", value=node_id
            )
    unique = tuple(dict.fromkeys(given))
    return AccessEvent(ts_ns, mode, unique, agent, workspace).to_dict()


def _event_fields(rec: object) -> tuple[int, str, Sequence[str], object, object] | None:
    """(ts, mode, ids, agent, workspace) of a valid record, else None.

    The one place the record rules live; :func:`parse_event` and the
    statistics loop both go through it.
    """
    if type(rec) is AccessEvent:
        return rec.ts_ns, rec.mode, rec.ids, rec.agent, rec.workspace
    # ``type is dict`` first: the ABC check costs more than the rest of a record.
    if type(rec) is not dict and not isinstance(rec, Mapping):
        return None
    ts = rec.get("ts")
    if type(ts) is not int or ts < 0:
        return None
    mode = rec.get("mode")
    if mode not in _MODE_SET:
        return None
    ids = rec.get("ids")
    if type(ids) is not list:
        return None
    try:
        "".join(ids)  # the cheapest all-strings test there is: a TypeError otherwise
    except TypeError:
        return None
    if "" in ids:
        return None
    agent = rec.get("agent")
    workspace = rec.get("workspace")
    if not (agent is None or type(agent) is str) or not (workspace is None or type(workspace) is str):
        return None
    return ts, mode, ids, agent, workspace


def parse_event(record: object) -> AccessEvent | None:
    """The :class:`AccessEvent` of a decoded log record, or None if malformed.

    Duplicate ids in one record count once (the results of one search are
    one exposure each).
    """
    fields_ = _event_fields(record)
    if fields_ is None:
        return None
    ts, mode, ids, agent, workspace = fields_
    return AccessEvent(ts, mode, tuple(dict.fromkeys(ids)), agent, workspace)  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# statistics


class StatsNode(NamedTuple):
    """What the statistics need of one in-scope node.

    ``active`` is False for archived, forgotten, expired and superseded nodes;
    ``created_at`` is seconds since the epoch (None: unknown, counted as exempt:
    a node whose age is unknown is not judged a zombie; ``MdCG.recall_stats``
    gives a node without one its file's mtime). ``last_access`` (seconds, None:
    none known) is an access recorded outside the access log -- the node file's
    ``last_access``, which a migration carries from its database row: a node it
    puts in the window is not a zombie (:attr:`ZombieStats.file_recalled_count`).
    """

    id: str
    title: str | None
    created_at: float | None
    active: bool
    last_access: float | None = None


@dataclass(frozen=True)
class RecalledNode:
    """One row of the top-recalled list."""

    id: str
    title: str | None
    count: int
    active: bool

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "count": self.count, "active": self.active}


@dataclass(frozen=True)
class ZombieStats:
    """Active nodes never exposed in the window (dead weight).

    ``eligible_count`` = ``active_count`` - ``exempt_count`` (nodes younger
    than the exemption, or of unknown age, are too new to judge); ``zombie_rate`` is
    ``zombie_count / eligible_count``, None when nothing is eligible.
    ``file_recalled_count``: eligible nodes no event of the window exposed whose
    ``last_access`` (:class:`StatsNode`: an access recorded before the access log,
    a migrated row's) is in the window: recalled then, so not zombies.
    ``sample`` lists up to top-N zombies, oldest first, as (id, title).
    """

    active_count: int
    exempt_count: int
    eligible_count: int
    zombie_count: int
    zombie_rate: float | None
    sample: tuple[tuple[str, str | None], ...]
    file_recalled_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "active_count": self.active_count,
            "exempt_count": self.exempt_count,
            "eligible_count": self.eligible_count,
            "zombie_count": self.zombie_count,
            "zombie_rate": self.zombie_rate,
            "file_recalled_count": self.file_recalled_count,
            "sample": [{"id": i, "title": t} for i, t in self.sample],
        }


@dataclass(frozen=True)
class InjectionStats:
    """Inject runs in the window and how full their slots were.

    ``slot_fill_rate`` = ``injected_count / (runs * slots)``, None without runs.
    """

    runs: int
    injected_count: int
    slots: int
    slot_fill_rate: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "injected_count": self.injected_count,
            "slots": self.slots,
            "slot_fill_rate": self.slot_fill_rate,
        }


@dataclass(frozen=True)
class Coverage:
    """How far the figures can be trusted.

    ``earliest_event`` is the oldest valid event read, of any caller: when it
    is later than ``window_start`` (or None), the log does not cover the whole
    window. ``truncated`` is True when ``scan_cap`` stopped the scan.
    """

    window_start: datetime
    earliest_event: datetime | None
    full_window: bool
    scanned: int
    malformed: int
    events_in_window: int
    by_mode: Mapping[str, int]
    truncated: bool
    scan_cap: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_start": self.window_start.isoformat(),
            "earliest_event": self.earliest_event.isoformat() if self.earliest_event else None,
            "full_window": self.full_window,
            "scanned": self.scanned,
            "malformed": self.malformed,
            "events_in_window": self.events_in_window,
            "by_mode": dict(self.by_mode),
            "truncated": self.truncated,
            "scan_cap": self.scan_cap,
        }


@dataclass(frozen=True)
class RecallStats:
    """The result of :func:`recall_stats`; ``options`` are the values used
    (after out-of-range values fell back to their defaults)."""

    now: datetime
    options: Mapping[str, int]
    exposed_count: int
    top_recalled: tuple[RecalledNode, ...]
    zombie: ZombieStats
    injection: InjectionStats
    coverage: Coverage

    def to_dict(self) -> dict[str, Any]:
        return {
            "now": self.now.isoformat(),
            "options": dict(self.options),
            "exposed_count": self.exposed_count,
            "top_recalled": [r.to_dict() for r in self.top_recalled],
            "zombie": self.zombie.to_dict(),
            "injection": self.injection.to_dict(),
            "coverage": self.coverage.to_dict(),
        }


def _int_option(value: object, default: int, lo: int, hi: int | None) -> int:
    """``value`` as an integer in [lo, hi], else ``default``.

    The seed's leniency: a statistics call never fails on an option; a
    non-integer, a boolean or an out-of-range value falls back silently, and
    the result's ``options`` show what was used. Integral floats and strings
    of an integer are taken (MCP clients send either).
    """
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        n = value
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    elif isinstance(value, str):
        try:
            n = int(value.strip())
        except ValueError:
            return default
    else:
        return default
    if n < lo or (hi is not None and n > hi):
        return default
    return n


def _ns_to_datetime(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1000 / 1_000_000, tz=UTC)


def check_now(now: object) -> datetime:
    """``now`` itself when it is a timezone-aware datetime (the instant statistics are
    counted at), else InvalidArgumentError naming it."""
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidArgumentError(
            f"now must be a timezone-aware datetime, got {short_repr(now)}", name="now", value=now
        )
    return now


def _datetime_to_ns(when: datetime) -> int:
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * _NS + delta.microseconds * 1000


@dataclass
class _Tally:
    """Mutable accumulator of one scan (kept apart to keep the loop short)."""

    counts: Counter[str] = field(default_factory=Counter)
    by_mode: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MODES, 0))
    scanned: int = 0
    malformed: int = 0
    in_window: int = 0
    inject_runs: int = 0
    injected: int = 0
    earliest: int | None = None
    truncated: bool = False


def _scan(
    events: Iterable[object],
    known_ids: Iterable[str],
    since_ns: int,
    scan_cap: int,
    caller: tuple[str | None, str | None],
    forgotten_ns: Mapping[str, int] | None = None,
) -> _Tally:
    tally = _Tally()
    # Seeding the counter with the node ids (allocated together, so close in
    # memory) makes the random probes of a large log measurably cheaper.
    counts = tally.counts = Counter(dict.fromkeys(known_ids, 0))
    agent, workspace = caller
    by_mode = tally.by_mode
    fields_of = _event_fields
    buffer: list[str] = []
    earliest = None
    scanned = malformed = in_window = inject_runs = injected = 0
    it = iter(events)
    for rec in islice(it, scan_cap):
        scanned += 1
        f = fields_of(rec)
        if f is None:
            malformed += 1
            continue
        ts, mode, ids, ev_agent, ev_workspace = f
        if earliest is None or ts < earliest:
            earliest = ts
        if ts < since_ns:
            continue
        if (agent is not None and ev_agent != agent) or (workspace is not None and ev_workspace != workspace):
            continue
        in_window += 1
        by_mode[mode] += 1
        # One call exposes an id once, whatever the record says.
        exposed: Collection[str] = set(ids) if len(ids) > 1 else ids
        if mode == "inject":
            inject_runs += 1
            injected += len(exposed)
        if forgotten_ns:  # an access of a forgotten memory is not one of its id's new memory
            exposed = [i for i in exposed if ts > forgotten_ns.get(i, -1)]
        # Counting in batches keeps the per-event cost to one C-level extend.
        buffer.extend(exposed)
        if len(buffer) >= _COUNT_BATCH:
            counts.update(buffer)
            buffer.clear()
    counts.update(buffer)
    # One more record means the cap cut the scan short; it is read, not counted.
    tally.truncated = next(it, _END) is not _END
    tally.scanned, tally.malformed, tally.in_window = scanned, malformed, in_window
    tally.inject_runs, tally.injected, tally.earliest = inject_runs, injected, earliest
    return tally


#: id -> (title, created_at, active, last_access) of the nodes given to :func:`recall_stats`.
_Table = dict[str, tuple[str | None, float | None, bool, float | None]]


def _node_table(nodes: Iterable[Sequence[Any]]) -> _Table:
    table: _Table = {}
    for node in nodes:
        try:
            node_id, title, created_at, active, *rest = node
            if len(rest) > 1:
                raise ValueError
        except (TypeError, ValueError):
            raise InvalidArgumentError(
                f"nodes: expected (id, title, created_at, active[, last_access]), got {node!r}", name="nodes"
            ) from None
        last_access = rest[0] if rest else None
        if last_access is not None and (
            isinstance(last_access, bool) or not isinstance(last_access, int | float)
        ):
            raise InvalidArgumentError(
                f"nodes: the last_access of {node_id!r} must be seconds or None, got {last_access!r}",
                name="nodes",
            )
        if not isinstance(node_id, str) or not node_id:
            raise InvalidArgumentError(
                f"nodes: a node id must be a non-empty string, got {node_id!r}", name="nodes"
            )
        if node_id in table:
            raise InvalidArgumentError(f"nodes: node id {node_id!r} is given twice", name="nodes")
        table[node_id] = (title, created_at, bool(active), last_access)
    return table


def _zombies(
    table: _Table, counts: Mapping[str, int], window: tuple[float, float, float], top_n: int
) -> ZombieStats:
    """The zombie figures; ``window``: (exempt_after, since, now) in seconds. A node no event
    exposed whose ``last_access`` is in the window (since..now) is not a zombie."""
    exempt_after, since, now = window
    active = exempt = recalled = 0
    zombies: list[tuple[float, str]] = []
    for node_id, (_title, created_at, is_active, last_access) in table.items():
        if not is_active:
            continue
        active += 1
        if created_at is None or created_at > exempt_after:  # too new, or of unknown age
            exempt += 1
        elif node_id in counts:
            continue
        elif last_access is not None and since <= last_access <= now:  # recalled before the log
            recalled += 1
        else:
            zombies.append((created_at, node_id))
    eligible = active - exempt
    sample = tuple((i, table[i][0]) for _c, i in heapq.nsmallest(top_n, zombies))
    rate = len(zombies) / eligible if eligible else None
    return ZombieStats(active, exempt, eligible, len(zombies), rate, sample, recalled)


def recall_stats(
    events: Iterable[object],
    nodes: Iterable[Sequence[Any]],
    *,
    now: datetime,
    window_days: object = DEFAULT_WINDOW_DAYS,
    exempt_days: object = DEFAULT_EXEMPT_DAYS,
    max_inject_slots: object = DEFAULT_INJECT_SLOTS,
    top_n: object = DEFAULT_TOP_N,
    scan_cap: object = DEFAULT_SCAN_CAP,
    agent: str | None = None,
    workspace: str | None = None,
    forgotten: Mapping[str, float] | None = None,
) -> RecallStats:
    """Recall statistics of the ``window_days`` before ``now``.

    ``events`` are decoded log records (or :class:`AccessEvent`), in any
    order; ``nodes`` are the caller's in-scope nodes as :class:`StatsNode` or
    4-tuples (id, title, created_at, active), or 5-tuples with ``last_access``.
    Ids that are not among ``nodes`` (deleted, or outside the caller's scope)
    are left out of every per-node figure. With ``agent``/``workspace`` set, only events recorded by that
    caller count; None counts every caller's events. ``forgotten``: id -> time
    (seconds) of its last forget; an event before then is not counted for a node
    added again under that id.

    Options follow the seed's leniency (see :func:`_int_option`):
    ``window_days`` 1–365 (default 30), ``exempt_days`` 0–365 (7),
    ``max_inject_slots`` ≥ 1 (5), ``top_n`` 1–1000 (10), ``scan_cap`` ≥ 1.
    An event counts when ``ts >= now - window_days``; a node is exempt when
    it was created less than ``exempt_days`` before ``now``.
    """
    now = check_now(now)
    opts = {
        "window_days": _int_option(window_days, DEFAULT_WINDOW_DAYS, 1, 365),
        "exempt_days": _int_option(exempt_days, DEFAULT_EXEMPT_DAYS, 0, 365),
        "max_inject_slots": _int_option(max_inject_slots, DEFAULT_INJECT_SLOTS, 1, None),
        "top_n": _int_option(top_n, DEFAULT_TOP_N, 1, 1000),
        "scan_cap": _int_option(scan_cap, DEFAULT_SCAN_CAP, 1, None),
    }
    now_ns = _datetime_to_ns(now)
    since_ns = now_ns - opts["window_days"] * _DAY_NS
    table = _node_table(nodes)
    gone = {i: int(t * _NS) for i, t in (forgotten or {}).items() if i in table}
    tally = _scan(events, table, since_ns, opts["scan_cap"], (agent, workspace), gone)
    counts = {i: c for i, c in tally.counts.items() if c and i in table}
    top = heapq.nsmallest(opts["top_n"], counts.items(), key=lambda kv: (-kv[1], kv[0]))
    exempt_after = (now_ns - opts["exempt_days"] * _DAY_NS) / _NS
    slots = opts["max_inject_slots"]
    earliest = _ns_to_datetime(tally.earliest) if tally.earliest is not None else None
    return RecallStats(
        now=now,
        options=opts,
        exposed_count=len(counts),
        top_recalled=tuple(RecalledNode(i, table[i][0], c, table[i][2]) for i, c in top),
        zombie=_zombies(table, counts, (exempt_after, since_ns / _NS, now_ns / _NS), opts["top_n"]),
        injection=InjectionStats(
            tally.inject_runs,
            tally.injected,
            slots,
            tally.injected / (tally.inject_runs * slots) if tally.inject_runs else None,
        ),
        coverage=Coverage(
            window_start=_ns_to_datetime(since_ns),
            earliest_event=earliest,
            full_window=tally.earliest is not None and tally.earliest <= since_ns,
            scanned=tally.scanned,
            malformed=tally.malformed,
            events_in_window=tally.in_window,
            by_mode=tally.by_mode,
            truncated=tally.truncated,
            scan_cap=opts["scan_cap"],
        ),
    )


# --------------------------------------------------------------------------
# adaptive inject budget


def content_of(body: str) -> str:
    """A node body without its title line (the first non-empty line), trimmed."""
    start = 0
    while start < len(body):
        nl = body.find("\n", start)
        stop = len(body) if nl < 0 else nl
        if body[start:stop].strip():
            return body[stop + 1 :].strip() if nl >= 0 else ""
        start = stop + 1
    return ""


@dataclass(frozen=True)
class InjectItem:
    """One memory ready for a prompt: its id, title, compact text and search score."""

    id: str
    title: str
    text: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "text": self.text, "score": self.score}


class InjectList(list[InjectItem]):
    """What :meth:`md_cg.MdCG.inject` returns: its items, best first (a list), and
    ``unreadable``: the ids of hits left out because their files no longer read as
    memories (broken by a hand edit since the index read them; each also warned of)."""

    def __init__(self, items: Iterable[InjectItem] = (), unreadable: Iterable[str] = ()) -> None:
        super().__init__(items)
        self.unreadable: tuple[str, ...] = tuple(unreadable)


def _fold_query(text: str) -> str:
    return " ".join(text.casefold().split())


def load_recall_cues(path: str | Path | None = None) -> tuple[str, ...]:
    """The recall cues of a cue file (default: the shipped one), folded.

    The file is a JSON object whose values under language keys are lists of
    non-empty strings (keys starting with ``_`` and ``version`` are not cue
    lists). Raises :class:`DataFileError` naming the file and the problem.
    """
    if path is None:
        return _shipped_cues()
    return _read_cues(Path(path))


@lru_cache(maxsize=1)
def _shipped_cues() -> tuple[str, ...]:
    return _read_cues(CUES_PATH)


def _read_cues(path: Path) -> tuple[str, ...]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataFileError(path, "recall cue file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFileError(path, f"not a UTF-8 JSON recall cue file ({exc})") from None
    if not isinstance(data, dict):
        raise DataFileError(path, "a recall cue file must be a JSON object of language -> list of cues")
    cues: dict[str, None] = {}
    for lang, values in data.items():
        if lang.startswith("_") or lang == "version":
            continue
        if not isinstance(values, list):
            raise DataFileError(path, f"cues under {lang!r} must be a list of strings")
        for cue in values:
            if not isinstance(cue, str) or not _fold_query(cue):
                raise DataFileError(path, f"cues under {lang!r}: {cue!r} is not a non-empty string")
            cues[_fold_query(cue)] = None
    if not cues:
        raise DataFileError(path, "the file holds no recall cue")
    return tuple(cues)


def needs_broad_recall(query: str | None, cues: Iterable[str] | None = None) -> bool:
    """Whether ``query`` needs broad recall (the full inject budget).

    True for a missing or empty query (nothing to judge by: keep the cap), a
    query shorter than :data:`SHORT_QUERY_CHARS` characters after trimming
    (it matches almost anything), and a query containing a recall cue
    ("last time", "上次", ...: the user wants what was remembered). Matching
    is by substring after case folding and collapsing whitespace. ``cues``
    defaults to the shipped list (:func:`load_recall_cues`).
    """
    if query is None:
        return True
    if not isinstance(query, str):
        raise InvalidArgumentError(f"query must be a string or None, got {short_repr(query)}", name="query")
    if len(query.strip()) < SHORT_QUERY_CHARS:
        return True
    q = _fold_query(query)
    folded = _shipped_cues() if cues is None else tuple(_fold_query(c) for c in cues)
    return any(cue and cue in q for cue in folded)


def adaptive_inject_budget(query: str | None, max_items: int, cues: Iterable[str] | None = None) -> int:
    """How many items to inject for ``query``: the budget only ever shrinks.

    A cap of 1 or less (0 = inject nothing, negatives included) is returned
    unchanged; a broad query (:func:`needs_broad_recall`) keeps the cap; a
    specific one gets ``ceil(max_items / 2)``, at least 1, because a relevant
    but misleading injection can do more harm than none.
    """
    if isinstance(max_items, bool) or not isinstance(max_items, int):
        raise InvalidArgumentError(
            f"max_items must be an integer, got {short_repr(max_items)}", name="max_items", value=max_items
        )
    if max_items <= 1:
        return max_items
    if needs_broad_recall(query, cues):
        return max_items
    return max(1, -(-max_items // 2))  # (an integer ceiling: a huge max_items is no float)
