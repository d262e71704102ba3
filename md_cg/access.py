"""Access statistics: an append-only log, counted on read, folded into local state.

Recording an access never touches a node file, the snapshot or the index
logs: it appends one line per node id to this process's own shard in
``.mdcg/access/``. Access counts are volatile, per-clone state: they are
kept out of the tracked ``.md`` files, so two clones of a memory folder
never conflict over them in a git merge.

:func:`read_counts` adds up the lines written after the last fold;
:func:`fold` adds them into ``.mdcg/access/counts.json`` -- the totals and
the shard offsets they reach, replaced in one atomic write, so a fold killed
at any point either happened entirely or not at all -- and removes the
shards it has fully folded whose writers are gone.

Imports only :mod:`md_cg.fsops`, :mod:`md_cg.paths` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import functools
import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import orjson

from . import fsops, paths, recall
from . import resurface as resurface_mod
from .errors import (
    PERMISSION_DENIED,
    DataFileError,
    InvalidArgumentError,
    InvalidNodeError,
    MalformedNodeFileError,
    NodeNotFoundError,
    UnsafePathError,
    check_query,
    left_out_unreadable,
)
from .node import FIRST_INSTANT, LOW_CONFIDENCE, TITLE_MAX

ACCESS_REL = paths.meta(paths.ACCESS_DIR)
COUNTS = "counts.json"
#: A folded shard is kept while it holds an event this recent: recall
#: statistics read the events of up to a year (``window_days`` <= 365).
EVENT_RETAIN_DAYS = 366
#: :func:`read_events` decodes a shard in pieces of about this many bytes.
DECODE_BYTES = 1 << 20


@dataclass
class AccessTail:
    """Counts since the last fold, and the shard offsets they reach."""

    counts: dict[str, int]
    last: dict[str, float]
    offsets: dict[str, int]


@dataclass
class Folded:
    """The totals of every fold so far (``counts.json``)."""

    counts: dict[str, int]
    last: dict[str, float]
    offsets: dict[str, int]


def read_folded(root: str) -> Folded:
    """The folded totals; empty when nothing was folded yet.

    A damaged ``counts.json`` raises :class:`md_cg.errors.DataFileError`
    naming it (:func:`folded_problem`): the totals are local state, and
    silently starting from zero would lose them. A symlink on the way is never
    followed: the folder counts as empty (``health()`` reports the symlink as
    an ``unsafe_path``).
    """
    try:
        data, _ = fsops.read_file(root, f"{ACCESS_REL}/{COUNTS}")
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return Folded({}, {}, {})
    try:
        value = orjson.loads(data)
        counts, last, offsets = value["counts"], value["last"], value["offsets"]
        # as the fold writes them: whole counts and offsets of 64 bits, finite times
        whole = [*counts.values(), *offsets.values()]
        if not all(type(n) is int and 0 <= n < 1 << 63 for n in whole) or not all(
            type(t) in (int, float) and 0 <= t < 1e11 for t in last.values()
        ):
            raise ValueError("a count, offset or time that the fold does not write")
        return Folded(dict(counts), {k: float(t) for k, t in last.items()}, dict(offsets))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, OverflowError):
        raise DataFileError(os.path.join(root, ACCESS_REL, COUNTS), DAMAGED_FOLD) from None


#: What a damaged ``counts.json`` is said to be, and what removing it costs: a fold
#: reads the shards again from their start, and only shards it had removed are gone.
DAMAGED_FOLD = (
    "not a valid access fold (the local access totals); remove it: the next fold counts again "
    "from the access log shards still in .mdcg/access/; only the accesses in shards a fold "
    "already removed (fully folded, no event of the last year) are lost"
)


def folded_problem(root: str) -> str | None:
    """Why ``counts.json`` cannot be used (for ``health()``), or None."""
    try:
        read_folded(root)
    except DataFileError as exc:
        return exc.reason
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def read_counts(
    root: str, offsets: dict[str, int] | None = None, forgotten: Mapping[str, float] | None = None
) -> AccessTail:
    """Add up every access line written after ``offsets`` (default: the last fold).

    ``forgotten``: id -> time it last left the store (forgotten, swept or renamed away:
    :func:`md_cg.audit.departure_times`); an access of the id before
    then was of the forgotten memory, not of one added again under its id.
    """
    gone = forgotten or {}
    if offsets is None:
        offsets = read_folded(root).offsets
    counts: dict[str, int] = {}
    last: dict[str, float] = {}
    ends = dict(offsets)
    try:
        names = fsops.list_shards(root, ACCESS_REL)
    except UnsafePathError:
        names = []
    for name in names:
        start = offsets.get(name, 0)
        try:
            data, _ = fsops.read_file(root, f"{ACCESS_REL}/{name}")
        except (FileNotFoundError, UnsafePathError):
            continue
        cut = data.rfind(b"\n")  # a torn last line is not read
        if cut < start:
            ends[name] = start
            continue
        ends[name] = cut + 1
        for rec in _decoded(data, start, cut):
            if type(rec) is not dict:
                continue
            stamp = rec.get("ts")
            # a line whose time is not the writer's integer nanoseconds is not ours: skipped
            if type(stamp) is not int or not 0 <= stamp < 1 << 63:
                continue
            ts = stamp / 1e9
            for node_id in _record_ids(rec):
                if gone and ts <= gone.get(node_id, -1.0):
                    continue
                counts[node_id] = counts.get(node_id, 0) + 1
                if ts > last.get(node_id, 0.0):
                    last[node_id] = ts
    return AccessTail(counts, last, ends)


def _record_ids(rec: dict[str, Any]) -> list[str]:
    """The node ids one log line counts: an event's ``ids`` (each once), or
    the single ``id`` of a line written before events had a mode."""
    ids = rec.get("ids")
    if isinstance(ids, list):
        return [i for i in dict.fromkeys(ids) if isinstance(i, str) and i]
    node_id = rec.get("id")
    return [node_id] if isinstance(node_id, str) else []


def fold(root: str, keep: Any = None, forgotten: Mapping[str, float] | None = None) -> dict[str, int]:
    """Fold the log into ``counts.json``; return the accesses folded per node.

    ``keep(node_id) -> bool`` drops the counts of nodes that no longer exist;
    ``forgotten`` (as for :func:`read_counts`) those of a forgotten memory
    whose id is in use again. The caller holds the exclusive store lock (no
    other fold runs).
    """
    folded = read_folded(root)
    tail = read_counts(root, folded.offsets, forgotten)
    added = {i: c for i, c in tail.counts.items() if keep is None or keep(i)}
    counts = {i: c for i, c in _since_forgotten(folded, forgotten).items() if keep is None or keep(i)}
    last = {i: t for i, t in folded.last.items() if i in counts or i in added}
    for node_id, c in added.items():
        counts[node_id] = counts.get(node_id, 0) + c
        last[node_id] = max(last.get(node_id, 0.0), tail.last.get(node_id, 0.0))
    record = {
        "counts": dict(sorted(counts.items())),
        "last": dict(sorted(last.items())),
        "offsets": tail.offsets,
    }
    fsops.atomic_write(root, f"{ACCESS_REL}/{COUNTS}", orjson.dumps(record), durable=True)
    removed = _remove_folded_shards(root, tail.offsets)
    if removed:
        record["offsets"] = {k: v for k, v in tail.offsets.items() if k not in removed}
        fsops.atomic_write(root, f"{ACCESS_REL}/{COUNTS}", orjson.dumps(record), durable=True)
    return dict(sorted(added.items()))


def _since_forgotten(folded: Folded, forgotten: Mapping[str, float] | None) -> dict[str, int]:
    """The folded counts without those whose last access came before the id was
    forgotten: every access a fold added up is no later than its ``last``."""
    if not forgotten:
        return folded.counts
    return {
        i: c
        for i, c in folded.counts.items()
        if not (i in forgotten and folded.last.get(i, 0.0) <= forgotten[i])
    }


def counts_now(root: str, forgotten: Mapping[str, float]) -> tuple[dict[str, int], dict[str, int]]:
    """The folded counts and those of the log since, per id, without the accesses of
    a forgotten memory whose id is in use again (:func:`read_counts`)."""
    folded = read_folded(root)
    return _since_forgotten(folded, forgotten), read_counts(root, folded.offsets, forgotten).counts


def _remove_folded_shards(root: str, offsets: dict[str, int]) -> list[str]:
    """Delete shards fully folded whose writer is gone and whose newest event
    is older than :data:`EVENT_RETAIN_DAYS` (recall statistics read the
    events of up to a year); return their names."""
    removed = []
    keep_after = time.time_ns() - EVENT_RETAIN_DAYS * 86_400 * 1_000_000_000
    for name in fsops.list_shards(root, ACCESS_REL):
        rel = f"{ACCESS_REL}/{name}"
        fh = fsops.try_lock_exclusive(root, rel)
        if fh is None:
            continue
        try:
            if (
                offsets.get(name, -1) == os.fstat(fh.fileno()).st_size
                and _newest_event_ts(root, rel) < keep_after
            ):
                fsops.remove(root, rel)
                removed.append(name)
        finally:
            fh.close()
    return removed


def _newest_event_ts(root: str, rel: str) -> int:
    """The newest ``ts`` among a shard's access events (lines with ``ids``);
    0 when it holds none (only counts written before events had a mode)."""
    try:
        data, _ = fsops.read_file(root, rel)
    except (FileNotFoundError, UnsafePathError):
        return 0
    stamps = (r.get("ts", 0) for r in _decoded(data, 0, data.rfind(b"\n")) if type(r) is dict and "ids" in r)
    return max((t for t in stamps if isinstance(t, int)), default=0)


def event_line(mode: str, ids: list[str], agent: str | None, workspace: str | None) -> dict[str, Any]:
    """The log line of one access event (the shard writer stamps ``ts``); see
    :mod:`md_cg.recall` for the record rules. Unscoped callers leave the
    scope keys out."""
    rec: dict[str, Any] = {"mode": mode}
    if agent is not None:
        rec["agent"] = agent
    if workspace is not None:
        rec["workspace"] = workspace
    rec["ids"] = list(dict.fromkeys(ids))
    return rec


def read_events(root: str) -> Iterator[dict[str, Any]]:
    """Every access event of every shard, folded or not (shard by shard).

    Lines written before events had a mode (``{"ts": ..., "id": ...}``: an ``id``, and
    neither ``mode`` nor ``ids``) are not events and are left out; anything else is
    yielded for :func:`md_cg.recall.recall_stats` to check (it counts malformed
    records). An event with an extra ``id`` key is an event (unknown keys are
    ignored): left out as an old line, its memory was a zombie and the line was in
    neither ``scanned`` nor ``malformed``. A shard is decoded with one
    orjson call when it can be, which is several times faster than a call
    per line; a torn last line is never read.
    """
    try:
        names = fsops.list_shards(root, ACCESS_REL)
    except UnsafePathError:
        return
    for name in names:
        try:
            data, _ = fsops.read_file(root, f"{ACCESS_REL}/{name}")
        except (FileNotFoundError, UnsafePathError):
            continue
        for rec in _decoded(data, 0, data.rfind(b"\n")):
            if type(rec) is not dict or "id" not in rec or "mode" in rec or "ids" in rec:
                yield rec


def _decoded(data: bytes, start: int, cut: int) -> Iterator[Any]:
    """The lines of ``data[start:cut]`` decoded, in pieces of about :data:`DECODE_BYTES`
    (one orjson call a piece when it can: several times faster than a call per line;
    a 70 MB shard decoded at once took 700 MB). A line that is not JSON is None."""
    while start < cut:
        stop = data.find(b"\n", min(start + DECODE_BYTES, cut))
        stop = cut if stop < 0 or stop > cut else stop
        body = data[start:stop]
        start = stop + 1
        if not body.strip():
            continue
        try:
            yield from orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
        except orjson.JSONDecodeError:
            yield from _decode_lines(body)


def _decode_lines(body: bytes) -> list[object]:
    out: list[object] = []
    for line in body.split(b"\n"):
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            out.append(None)  # counted as malformed by the statistics
    return out


# -- store-facing: recall statistics, inject, resurfacing ---------------------------------
# The store passes itself (duck-typed: ``root``, ``entries()`` of the caller's
# visible active nodes, ``search``, ``log``) and the caller's scope; the
# logic stays in the pure modules :mod:`md_cg.recall` and :mod:`md_cg.resurface`.

#: The show history of resurfacing: the append-only log ``.mdcg/resurface/``.
SHOW_LOG = "resurface"
#: Characters of a node's text an inject item carries (a prompt budget).
INJECT_TEXT_CHARS = 480
#: At most this many of them go to the not-applicable conditions a cut would lose.
CONDITIONS_CHARS = 200


def stats(
    root: str | os.PathLike[str],
    entries: Iterable[Any],
    scope: Any,
    *,
    window_days: object,
    exempt_days: object,
    max_inject_slots: object,
    now: datetime | None = None,
    forgotten: Mapping[str, float] | None = None,
) -> recall.RecallStats:
    """:func:`md_cg.recall.recall_stats` over the access events of the store at
    ``root`` and ``entries`` (the caller's visible, active nodes); a scoped
    caller counts only its own events."""
    now = recall.check_now(now or datetime.now(UTC))
    at = now.timestamp()
    nodes = [(e.id, e.title, _age_from(e, at), True, _recalled_at(e, at)) for e in entries]
    # A million decoded events are a few million objects, none in a cycle: the
    # collector rescanning them would cost more than the decoding (4x, measured).
    was = gc.isenabled()
    gc.disable()
    try:
        return recall.recall_stats(
            read_events(str(root)),
            nodes,
            now=now,
            window_days=window_days,
            exempt_days=exempt_days,
            max_inject_slots=max_inject_slots,
            agent=getattr(scope, "agent", None),
            workspace=getattr(scope, "workspace", None),
            forgotten=forgotten,
        )
    finally:
        if was:
            gc.enable()


def _recalled_at(entry: Any, now: float) -> float | None:
    """The latest recall of a memory that its file records (``access_count`` / ``last_access``,
    which a migration carries from its database row; md-cg's own accesses go to the access
    log, never to the file), for the zombie count: its ``last_access``; with an
    ``access_count`` and no ``last_access`` that can be one (absent, 0 -- the time was not
    recorded -- or after ``now``), the file's mtime, the latest those accesses can have
    been; None when it records none. Right after a migration every memory was a zombie,
    recalled the day before or not (session 38). A ``last_access`` before 1970 or after
    ``now`` without a positive ``access_count`` records no recall (attack atk8 of session
    39: ``last_access: -5`` or ``2999-01-01`` alone hid a never-recalled memory from the
    zombie count)."""
    last = entry.last_access
    if last is not None and 0 < last <= now:
        return float(last)
    count = entry.access_count
    return entry.mtime_ns / 1e9 if isinstance(count, int) and count > 0 else None


def _age_from(entry: Any, now: float) -> float:
    """When a node was created, for the zombie exemption: its ``created_at``, or its file's
    mtime when it has none (a hand-written file) or one no creation can have: after
    ``now`` (``2999-01-01``, ``1e30`` -- a file holds such a time as it was written)
    counted as created less than ``exempt_days`` ago until that date, so the memory was
    never a zombie."""
    created = entry.created_at
    if created is not None and FIRST_INSTANT <= created <= now:
        return float(created)
    return float(entry.mtime_ns / 1e9)


def compact_text(body: str, limit: int = INJECT_TEXT_CHARS, conditions: Sequence[str] = ()) -> str:
    """A node's text for a prompt: the body without its title line, whitespace
    collapsed, cut at ``limit`` characters (the title travels apart). A body
    that is only its title line (``The user prefers metric units.``) is its
    own text: the title is cut at 120 characters, and the text must not be empty.

    The text never hides the node's not-applicable ``conditions`` (its CCG mark
    and its ``non_applicable_conditions`` field): those it does not show end it
    (``… Not applicable when: a; b`` after a cut, `` Not applicable when: a; b``
    otherwise; at most :data:`CONDITIONS_CHARS` of them), so an agent acting on
    the memory sees when it must not.

    A title line longer than the title (:data:`md_cg.node.TITLE_MAX` characters) is
    kept in the text, whole: session 40's MCP simulation, a chat turn's 150-character
    line was cut in the title and the text held only its date line, the answer in
    neither."""
    content = recall.content_of(body)
    if content and len(body.strip().split("\n", 1)[0].lstrip("#").strip()) > TITLE_MAX:
        content = body
    text = " ".join((content or body).split())
    wanted = [" ".join(c.split()) for c in conditions if c and c.strip()]
    kept, tail = (text, "") if len(text) <= limit else (text[: limit - 1].rstrip(), "…")
    for _ in range(len(wanted) + 1):  # a shorter cut may lose a condition it showed
        missing = [c for c in wanted if c not in kept]
        if not missing:
            break
        tail = " … Not applicable when: " + "; ".join(missing)
        if len(tail) > CONDITIONS_CHARS:
            tail = tail[: CONDITIONS_CHARS - 1].rstrip() + "…"
        if len(text) + len(tail) <= limit:
            kept = text
            tail = tail.replace(" … ", " ", 1)  # nothing was cut: no ellipsis
        else:
            kept = text[: limit - len(tail)].rstrip()
    return kept + tail


def inject_items(store: Any, query: str, max_items: int, tag: Any = None) -> recall.InjectList:
    """The items to inject for ``query``: at most :func:`md_cg.recall.adaptive_inject_budget`
    search results (among the memories with ``tag``, when given), never filler, a hit
    matching only words most memories share (``evidence["common_only"]``) or thinly
    (``thin``: one common word of a longer query; ``tag_typo``: a typo of a tag word), REJECT,
    BLINDSPOT (an incomplete procedure: not to act on until completed), a memory of low
    confidence (:data:`md_cg.node.LOW_CONFIDENCE`) or one holding an unresolved merge
    conflict (its text has both sides and the stale base); recording is the caller's act.
    A query that is not a string or is blank raises :class:`md_cg.errors.InvalidArgumentError`
    (:func:`md_cg.errors.check_query`), as ``search`` does. A hit whose file no longer reads
    as a memory is left out, warned of and named in the list's ``unreadable``
    (:func:`_read_or_none`)."""
    check_query(query)  # a blank query is refused, as search refuses it
    budget = recall.adaptive_inject_budget(query, max_items)
    if budget <= 0:
        return recall.InjectList()
    results, _meta = store.search(query, k=budget, record=False, tag=tag)
    # A REJECT result is one the judge found not applicable to the query (a
    # condition it excludes matched): in a prompt it would mislead.
    kept = [
        r
        for r in results
        if not r.filler
        and not r.evidence.get("common_only")
        and not r.evidence.get("thin")  # one common word of a longer query
        and not r.evidence.get("tag_typo")  # only a typo of a tag word
        and r.state not in ("REJECT", "BLINDSPOT")
        and not _doubted(r.entry.confidence)
        and not r.entry.conflict
    ]
    items: list[recall.InjectItem] = []
    unreadable: list[str] = []
    for r in kept:
        if len(items) == budget:
            break
        node = _read_or_none(r, unreadable)
        if node is not None:
            items.append(
                recall.InjectItem(
                    r.id,
                    r.entry.title,
                    compact_text(node.body, conditions=r.entry.conditions),
                    round(float(r.score), 6),
                )
            )
    return recall.InjectList(items, unreadable)


def readable_hits(results: Sequence[Any], what: str = "search") -> tuple[list[Any], list[str]]:
    """The search ``results`` whose node reads -- each result's file is read (``mdcg search``:
    at most ``k`` of them) --, and the ids of those left out because a hand edit broke their
    file since the index read it, each warned of as ``what`` leaving it out (:func:`_read_or_none`,
    as ``inject`` does; a hit whose file holds another memory now is left out unsaid). Before
    session 39 ``mdcg search`` listed such a hit until a sync, which ``get`` then refused.
    The warnings point at the caller's line."""
    kept: list[Any] = []
    unreadable: list[str] = []
    for r in results:
        try:
            node = _read_or_none(r, unreadable, what, stacklevel=3, denied=True)
        except MalformedNodeFileError:  # one this process may not read: listed, as the index has it
            node = r
        if node is not None:
            kept.append(r)
    return kept, unreadable


def _read_or_none(
    result: Any, unreadable: list[str], what: str = "inject", stacklevel: int = 4, *, denied: bool = False
) -> Any:
    """The node of a search ``result``; None when its file was changed by hand since the
    index read it so that it no longer holds it (another memory's file moved over it: a
    ``lost`` NodeNotFoundError, told by the next sync) -- left out, as a search leaves out
    a hit whose file is gone. Before session 36 one such hit failed the whole inject
    (attack a3). So is one whose file a person narrowed in place to a scope the caller's
    does not admit (:func:`md_cg.views.read_hiding`: an unknown id's error; session 37).
    So is one whose file a hand edit broke (a ``MalformedNodeFileError``: an
    ``agent_scope`` written as a list, YAML that does not parse), its id added to
    ``unreadable`` and warned of (:func:`md_cg.errors.left_out_unreadable`): before
    session 38 it failed the whole inject, quoting the file's new value. Any other error
    (``OSError``, a lock timeout) is raised. ``what`` and ``stacklevel``: the warning's
    (:func:`md_cg.errors.left_out_unreadable`; 4: the line calling ``MdCG.inject``);
    ``denied``: a file this process may not read raises its error (not malformed)."""
    try:
        return result.node
    except NodeNotFoundError:
        return None
    except MalformedNodeFileError as exc:
        if denied and exc.reason == PERMISSION_DENIED:
            raise
        unreadable.append(result.id)
        left_out_unreadable(what, result.id, exc, stacklevel=stacklevel)
        return None


def _doubted(confidence: float | None) -> bool:
    """Evidence went against it: in a prompt it would mislead."""
    return confidence is not None and confidence < LOW_CONFIDENCE


_INDEX_CACHE: dict[str, tuple[object, resurface_mod.ResurfaceIndex]] = {}


def _resurface_index(
    root: str, version: object, entries: Callable[[], Iterable[Any]]
) -> resurface_mod.ResurfaceIndex:
    """The candidates of the visible active nodes by ``created_at`` (the resurfacing
    date the store uses: the day in the local time zone, with the daylight saving time
    of that day), rebuilt only when ``version`` (the store's index state and what the
    caller cannot see) or the time zone setting changed. A node whose ``created_at``
    is no calendar day (after the year 9999) is not a candidate."""
    key = (version, os.environ.get("TZ"), time.tzname)
    cached = _INDEX_CACHE.get(root)
    if cached is not None and cached[0] == key:
        return cached[1]
    days = []
    for e in entries():
        if e.created_at is None:
            continue
        try:
            days.append((e.id, resurface_mod.node_date(e.created_at, tz=None, node_id=e.id)))
        except InvalidNodeError:
            continue
    index = resurface_mod.ResurfaceIndex(days)
    _INDEX_CACHE[root] = (key, index)
    return index


def skip_set(skip: Iterable[str]) -> frozenset[str]:
    """``resurface``'s ``skip`` as a set of ids; a bare string or a non-string id is refused
    (``skip="old0"`` would skip the ids 'o', 'l', 'd' and '0')."""
    if isinstance(skip, str | bytes) or not isinstance(skip, Iterable):
        raise InvalidArgumentError(
            f"skip must be a collection of node ids, got {type(skip).__name__}", name="skip", value=skip
        )
    ids = list(skip)
    for value in ids:
        if not isinstance(value, str):
            raise InvalidArgumentError(f"skip holds {value!r}, not a node id", name="skip", value=value)
    return frozenset(ids)


def resurface_pick(
    store: Any,
    version: object,
    entries: Callable[[], Iterable[Any]],
    today: date | None,
    seed: int | None,
    *,
    record: Callable[[Callable[[], None]], None] | None,
    passed_over: Iterable[str] = (),
) -> resurface_mod.Resurfaced | None:
    """One memory to bring back on ``today`` (default: the local today) among
    ``entries()``, the caller's visible active nodes (``version`` says when
    they change); ``seed`` None is 0, so a day shows one memory.
    ``record(write)``, when given, runs ``write``, which appends the show to
    the history (``.mdcg/resurface/``) -- or does not (a read-only store). A show
    carries the caller's ``agent``/``workspace`` (``store.scope``), and only the
    caller's own shows count for its cooldown and show counts (:func:`_own_show`).
    ``passed_over``: ids the caller passed over for files it could not read (``skip``),
    kept in the show's record as ``passed_over`` (:func:`passed_over_on`)."""
    day = date.today() if today is None else today  # the local day
    log = store.log(SHOW_LOG)
    index = _resurface_index(str(store.root), version, entries)
    scope = getattr(store, "scope", None)
    agent, workspace = getattr(scope, "agent", None), getattr(scope, "workspace", None)
    history = [rec for rec in log.read() if _own_show(rec, agent, workspace)]
    # One day shows one memory: today's own shows do not count for today's pick (they would
    # put the memory just shown in its cooldown, and every call of a prompt hook running
    # `mdcg today` would show -- and use up -- another one), and the memory already shown
    # today is shown again without a second record.
    on = day.isoformat()
    today_shows = [rec.get("id") for rec in history if isinstance(rec, Mapping) and rec.get("shown_on") == on]
    if today_shows:
        history = [rec for rec in history if not (isinstance(rec, Mapping) and rec.get("shown_on") == on)]
    seed = 0 if seed is None else seed
    pick = _shown_again(index, today_shows, day, seed, history)
    if pick is None:
        pick = resurface_mod.resurface(index, today=day, seed=seed, history=history)
    if pick is not None and record is not None and pick.id not in today_shows:
        line = resurface_mod.show_record(pick.id, day, tier=pick.tier)
        if passed_over:
            line["passed_over"] = sorted(passed_over)
        if agent is not None:
            line["agent"] = agent
        if workspace is not None:
            line["workspace"] = workspace
        record(functools.partial(_append_once, log, line, agent, workspace, store.lock_timeout))
    return pick


def passed_over_on(store: Any, day: date, node_id: str) -> list[str]:
    """The ids the caller's shows of ``node_id`` on ``day`` record as passed over (their
    files could not be read when the day's memory was picked: :func:`resurface_pick`'s
    ``passed_over``), in order, each once. A later call of the day shows that memory
    again without picking, so only the record tells it what was passed over."""
    scope = getattr(store, "scope", None)
    agent, workspace = getattr(scope, "agent", None), getattr(scope, "workspace", None)
    on, out = day.isoformat(), {}
    for rec in store.log(SHOW_LOG).read():
        if not isinstance(rec, Mapping) or rec.get("id") != node_id or rec.get("shown_on") != on:
            continue
        ids = rec.get("passed_over")
        if _own_show(rec, agent, workspace) and isinstance(ids, list):
            out.update(dict.fromkeys(i for i in ids if isinstance(i, str) and i))
    return list(out)


def _shown_again(
    index: resurface_mod.ResurfaceIndex, shown: list[Any], day: date, seed: int, history: list[Any]
) -> resurface_mod.Resurfaced | None:
    """The memory of the caller's first show of ``day`` still to be shown (a candidate dated
    on or before ``day``), picked among it alone; None when there is none.

    Picking again among every candidate gave that memory back only while the node dates
    stayed put: they are days in the local time zone, so a call of the same day in another
    time zone (UTC, then Etc/GMT+12, then UTC+05:30) picked, and recorded, a third memory."""
    for node_id in dict.fromkeys(shown):
        node_day = index.day_of(node_id) if isinstance(node_id, str) else None
        if node_day is None:
            continue  # forgotten, archived or hidden since: today shows another
        alone = resurface_mod.ResurfaceIndex([(node_id, node_day)])
        pick = resurface_mod.resurface(alone, today=day, seed=seed, history=history)
        if pick is not None:
            return pick
    return None


def _append_once(
    log: Any, line: dict[str, Any], agent: str | None, workspace: str | None, timeout: float
) -> None:
    """Append the show ``line`` unless the caller's shows of its day already hold its memory:
    under the log's lock, so that prompt hooks running ``mdcg today`` at once record one show
    (six at once recorded two, and ``show_count`` counted both)."""
    with log.locked(timeout=timeout):
        day = {
            rec.get("id")
            for rec in log.read()
            if isinstance(rec, Mapping)
            and _own_show(rec, agent, workspace)
            and rec.get("shown_on") == line["shown_on"]
        }
        if line["id"] not in day:
            log.append([line], durable=True)


def _own_show(rec: object, agent: str | None, workspace: str | None) -> bool:
    """Whether a show record counts for a caller of scope (``agent``, ``workspace``), as
    access events count for recall statistics: a scoped caller counts only the shows
    recorded under its own agent and workspace, an unscoped caller every show. A record
    without a scope (an unscoped caller's, or one written before shows carried it) counts
    only for unscoped callers. Anything else passes, for :class:`md_cg.resurface.ShowHistory`
    to count as malformed."""
    if not isinstance(rec, Mapping):
        return True
    return not (
        (agent is not None and rec.get("agent") != agent)
        or (workspace is not None and rec.get("workspace") != workspace)
    )
