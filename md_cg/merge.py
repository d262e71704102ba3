"""The git merge driver for node files: three-way merges field by field.

Two clones of one memory folder change the same node files in ways that are
not real disagreements: both fold accesses into ``access_count`` and
``last_access``, both verify a node (each appending to its one-line
``verification_history``), both stamp ``updated_at``. A line-based merge
calls each of those a conflict. This driver parses the three versions
(base, ours, theirs) as nodes and merges them by what each field means:

* ``verification_history``: the union of the entries, without duplicates,
  ordered by ``ts`` (histories only grow), less the base entries a new fold
  on either side stands for (two sides' new folds become one), bounded as
  ``verify`` bounds it (:func:`bounded_history`).
* ``access_count``, ``last_access``, ``updated_at``: the larger value (times
  are compared as instants, whatever their spelling in the file).
* ``tags``, ``non_applicable_conditions``: a three-way set merge (additions
  of both sides, removals of both sides).
* ``condition_space``, ``state_attributes`` and ``edges`` (keyed by target
  and type): three-way per key.
* ``confidence``: when both sides verified the node and each side's value is
  its base moved by its own new verifications, the base moved by every new
  verification of either side, in time order (two confirmations count
  twice, one seen on both sides once; fold entries span verdicts the base
  already counted and are left out); otherwise three-way.
* ``retention_tier``, ``expires_at``, ``retention_reason``: one unit, taken
  whole from one version (three-way over the three); both sides changed it
  differently: the longer-lived version (long beats temporary, a later expiry
  an earlier one).
* every other field: three-way (one side changed it: take that; both to the
  same value: take it; both differently: a true conflict).
* the body: a line-based three-way merge (``git merge-file --diff3``).

A true conflict still leaves a file that parses as a node: the field keeps
our value, the frontmatter gains a ``merge_conflict`` key holding base, ours
and theirs of each conflicting field, and a conflicting body carries git's
markers (``<<<<<<< ours`` ... ``>>>>>>> theirs``). :func:`conflict_of` finds
such nodes. Before merging, the driver checks that the sides are versions of the base's
memory as md-cg's renames tell (``renamed_from``): git pairs the files of two memories too
(a similar new file taken for a rename of a forgotten one, another memory renamed onto an
id). Such a side is merged with the other as two added files, and the record
names both memories (:data:`MEMORIES_KEY`), a conflict. When a version does not parse
as a node, the driver falls back to a plain text three-way merge. Run by git as::

    python -m md_cg.merge %O %A %B %P

It writes the result over ``%A`` and exits 0 when clean, 1 on a conflict
(git then reports the file as conflicted), 2 on a usage or tool error.
See docs/git.md. This module imports only :mod:`md_cg.node`,
:mod:`md_cg.nodefile` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import math
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from . import nodefile
from .errors import InvalidNodeError, MalformedNodeFileError, MdcgError, MergeError
from .node import DEFAULT_SENSITIVITY, LAYERS, SENSITIVITY_LEVELS, Node, finite, format_instant
from .paths import ARCHIVE_DIR, META_DIR, SYNONYMS

#: The frontmatter key that marks a node left with a true merge conflict.
CONFLICT_KEY = "merge_conflict"
#: The key of a ``merge_conflict`` record naming two different memories git paired (their
#: id and creation time each, as ``ours``, ``base``, ``theirs``, and ``resolve``: what to do).
MEMORIES_KEY = "different_memories"
#: Where ``rename`` keeps a memory's earlier ids (``md_cg.index.RENAMED_FROM``, a layer above).
RENAMED_FROM = "renamed_from"
#: Name of the merge driver in ``.gitattributes`` and ``git config``.
DRIVER_NAME = "mdcg"
#: Labels of the conflict markers written into a conflicting body.
LABELS = ("ours", "base", "theirs")
#: how many of the most recent ``verification_history`` entries stay whole (with the first)
HISTORY_KEEP = 20
#: the ``verdict`` of the entry that stands for the history entries folded away
FOLDED = "folded"
#: the verdicts of ``verify`` (:mod:`md_cg.loop`); here because a fold counts them
VERDICTS = ("confirmed", "weakened", "falsified")

_ABSENT: Any = object()
_MAX_TIME_FIELDS = ("updated_at", "last_access")
_SET_FIELDS = ("tags", "non_applicable_conditions")
_KEYED_FIELDS = ("condition_space", "state_attributes")
_TIME_FIELDS = ("created_at", "updated_at", "last_access")
# Instants this close are one instant written two ways: an ISO 8601 string
# keeps microseconds (rounded or truncated), a float about 0.25 us at 2026.
_INSTANT_TOLERANCE = 1.5e-6
_GITATTRIBUTES_HEADER = "# md-cg: merge node files field by field (docs/git.md)"
# Git's marker lines, whole lines from the first column; a note about git may quote
# them in a fenced code block (``` or ~~~, indented up to 3 spaces, Markdown's rule).
_OPEN_MARK = re.compile(r"<{7}(?: .*)?")
_SEP_MARK = re.compile(r"={7}")
_CLOSE_MARK = re.compile(r">{7}(?: .*)?")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


class _Conflict(Exception):
    """Both sides changed a value differently (internal signal)."""


@dataclass(frozen=True)
class MergeResult:
    """The outcome of merging one node file.

    ``data`` is the merged file. ``clean`` is false on a true conflict or when
    the text fallback could not produce a valid node. ``conflict`` holds the
    conflicts this merge found, in the shape :func:`conflict_of` returns
    (``None`` when there were none or the text fallback was used).
    ``fallback`` says why the versions were merged as plain text (the parse
    error), else ``None``. ``whole``: both versions were kept whole between
    markers, unmerged (versions of different scopes; ``fallback`` says why).
    When git paired the files of two different memories (:func:`merge_node_files`),
    ``conflict`` also holds :data:`MEMORIES_KEY`.
    """

    data: bytes
    clean: bool
    conflict: dict[str, Any] | None = None
    fallback: str | None = None
    whole: bool = False


# -- values -------------------------------------------------------------------


def _canon(value: Any) -> bytes:
    """A spelling of a JSON value in which equal values are equal bytes (1 != 1.0 != true)."""
    if value is _ABSENT:
        return b"\x00absent"
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        # Hand-written YAML can hold what JSON cannot (integers past 64 bits).
        return repr(value).encode("utf-8", "backslashreplace")


def _instant(value: Any) -> float | None:
    """Seconds since the epoch of a number or an ISO 8601 string; ``None`` if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if finite(value) else None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    return None


def _same(a: Any, b: Any, *, time: bool = False) -> bool:
    if time and a is not _ABSENT and b is not _ABSENT:
        ia, ib = _instant(a), _instant(b)
        if ia is not None and ib is not None:
            return abs(ia - ib) <= _INSTANT_TOLERANCE
    return _canon(a) == _canon(b)


def _three_way(base: Any, ours: Any, theirs: Any, *, time: bool = False) -> Any:
    """One side changed: that side; both alike: that value; else :class:`_Conflict`."""
    if _same(ours, theirs, time=time):
        return ours
    if _same(ours, base, time=time):
        return theirs
    if _same(theirs, base, time=time):
        return ours
    raise _Conflict


# -- field rules ----------------------------------------------------------------


def _latest(base: Any, ours: Any, theirs: Any) -> Any:
    """The later instant of the two sides (a side that dropped the field loses)."""
    present = [v for v in (ours, theirs) if v is not _ABSENT]
    if not present:
        return _ABSENT
    instants = [_instant(v) for v in present]
    known = [i for i in instants if i is not None]
    if len(known) != len(instants):
        return _three_way(base, ours, theirs)
    return present[max(range(len(present)), key=known.__getitem__)]


def _earliest(base: Any, ours: Any, theirs: Any) -> Any:
    """The earlier instant of the two sides: when both set it differently (two clones
    added the id apart, or one corrected it) the memory is at least as old as that."""
    try:
        return _three_way(base, ours, theirs, time=True)
    except _Conflict:
        mine, other = (None if v is _ABSENT else _instant(v) for v in (ours, theirs))
        if mine is None or other is None:
            raise
        return ours if mine <= other else theirs


def _largest_count(base: Any, ours: Any, theirs: Any) -> Any:
    present = [v for v in (ours, theirs) if v is not _ABSENT]
    if not present:
        return _ABSENT
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return _three_way(base, ours, theirs)
    return max(present)


def _as_list(value: Any) -> list[Any]:
    return [] if value is _ABSENT else list(value)


def _merge_set(base: Any, ours: Any, theirs: Any) -> Any:
    """Both sides' additions and both sides' removals; ours' order, then theirs' new items."""
    if _same(ours, theirs) or _same(theirs, base):
        return ours
    if _same(ours, base):
        return theirs
    b, o, t = _as_list(base), _as_list(ours), _as_list(theirs)
    removed = {_canon(x) for x in b} - ({_canon(x) for x in o} & {_canon(x) for x in t})
    out: list[Any] = []
    seen: set[bytes] = set()
    for item in [*o, *t]:
        key = _canon(item)
        if key not in removed and key not in seen:
            seen.add(key)
            out.append(item)
    return out or _ABSENT


def _merge_keyed(
    base: list[tuple[Any, Any]], ours: list[tuple[Any, Any]], theirs: list[tuple[Any, Any]]
) -> list[tuple[Any, Any]]:
    """Three-way merge of ``(key, value)`` items per key; ours' order, then theirs' new keys."""
    b, o, t = dict(base), dict(ours), dict(theirs)
    if len(b) != len(base) or len(o) != len(ours) or len(t) != len(theirs):
        raise _Conflict  # repeated keys: no per-key identity to merge by
    out = []
    for key in [*o, *(k for k in t if k not in o)]:
        value = _three_way(b.get(key, _ABSENT), o.get(key, _ABSENT), t.get(key, _ABSENT))
        if value is not _ABSENT:
            out.append((key, value))
    return out


def _merge_mapping(base: Any, ours: Any, theirs: Any) -> Any:
    if not all(v is _ABSENT or isinstance(v, dict) for v in (base, ours, theirs)):
        return _three_way(base, ours, theirs)
    items = [list(v.items()) if v is not _ABSENT else [] for v in (base, ours, theirs)]
    merged = dict(_merge_keyed(*items))
    return merged or _ABSENT


def _edge_key(edge: Any) -> Any:
    return (edge.get("target"), edge.get("type", "similar")) if isinstance(edge, dict) else _canon(edge)


def _merge_edges(base: Any, ours: Any, theirs: Any) -> Any:
    items = [[(_edge_key(e), e) for e in _as_list(v)] for v in (base, ours, theirs)]
    merged = [edge for _, edge in _merge_keyed(*items)]
    return merged or _ABSENT


class _Entries:
    """A set of history entries where an entry's ``ts`` is compared as an instant.

    Two entries are the same when everything but ``ts`` is equal and the
    ``ts`` values are the same instant (a float and an ISO 8601 string may
    spell one instant, to the microsecond).
    """

    def __init__(self, entries: list[Any] | None = None) -> None:
        self._times: dict[bytes, list[float | None]] = {}
        for entry in entries or []:
            self.add(entry)

    @staticmethod
    def _parts(entry: Any) -> tuple[bytes, float | None]:
        if isinstance(entry, dict) and "ts" in entry:
            instant = _instant(entry["ts"])
            if instant is not None:
                return _canon({k: v for k, v in entry.items() if k != "ts"}), instant
        return _canon(entry), None

    def __contains__(self, entry: Any) -> bool:
        key, instant = self._parts(entry)
        for other in self._times.get(key, []):
            if instant is None or other is None:
                if instant is other:
                    return True
            elif abs(instant - other) <= _INSTANT_TOLERANCE:
                return True
        return False

    def add(self, entry: Any) -> bool:
        """Add ``entry``; false if it was already there."""
        if entry in self:
            return False
        key, instant = self._parts(entry)
        self._times.setdefault(key, []).append(instant)
        return True


def _entry_time(entry: Any) -> float:
    instant = _instant(entry.get("ts")) if isinstance(entry, dict) else None
    return -math.inf if instant is None else instant


# -- verification history ---------------------------------------------------------------
# Here, not in md_cg.loop (which verifies): the driver bounds a merged history the way a
# verify does, and this module sits below the store.


def _fold(entries: Sequence[Any]) -> dict[str, Any]:
    """One history entry standing for ``entries`` (earlier folds among them count theirs):
    how many, their verdicts, when the last was, and the confidence before the first and
    after the last that record one."""
    count = 0
    verdicts: dict[str, int] = {}
    spans: list[tuple[Any, Any]] = []
    ts: Any = None
    for e in entries:
        e = e if isinstance(e, dict) else {}  # a hand-edited file may hold anything
        if e.get("verdict") == FOLDED and isinstance(e.get("folded"), int):
            count += e["folded"]
            earlier = e.get("verdicts")
            for k, v in earlier.items() if isinstance(earlier, dict) else ():
                verdicts[str(k)] = verdicts.get(str(k), 0) + (v if isinstance(v, int) else 0)
        else:
            count += 1
            kind = e.get("verdict")
            kind = kind if isinstance(kind, str) and kind in (*VERDICTS, "condition_added") else "other"
            verdicts[kind] = verdicts.get(kind, 0) + 1
        if "confidence_before" in e and "confidence_after" in e:
            spans.append((e["confidence_before"], e["confidence_after"]))
        ts = e.get("ts", ts)
    out: dict[str, Any] = {"verdict": FOLDED, "folded": count, "verdicts": verdicts}
    if ts is not None:
        out["ts"] = ts  # its place in time: a merge orders the entries by it
    if spans:
        out["confidence_before"], out["confidence_after"] = spans[0][0], spans[-1][1]
    return out


def bounded_history(history: Sequence[Any]) -> list[Any]:
    """``history`` with at most its first entry, one fold and the :data:`HISTORY_KEEP` most
    recent entries: every verdict adds one, and the frontmatter holding them has a size limit."""
    if len(history) <= HISTORY_KEEP + 1:
        return list(history)
    return [history[0], _fold(history[1:-HISTORY_KEEP]), *history[-HISTORY_KEEP:]]


def _is_fold(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("verdict") == FOLDED


def _folded_away(base: list[Any], side: list[Any]) -> tuple[list[Any], list[Any]]:
    """A side's new fold entries and the base entries they stand for (the base entries
    the side no longer holds: a verify drops entries only by folding them)."""
    known, mine = _Entries(base), _Entries(side)
    folds = [e for e in side if _is_fold(e) and e not in known]
    return folds, [e for e in base if e not in mine] if folds else []


def _count(entries: Sequence[Any]) -> int:
    return int(_fold(entries)["folded"]) if entries else 0


def _merge_history(base: Any, ours: Any, theirs: Any) -> Any:
    """The union of the entries, deduplicated, ordered by ``ts`` (entries without one
    first), bounded as a verify bounds it (:func:`bounded_history`). Base entries a fold
    on either side stands for are left out (else the next fold counts them twice); two
    sides' new folds become one that counts what both folded, once."""
    b, o, t = _as_list(base), _as_list(ours), _as_list(theirs)
    folds_o, gone_o = _folded_away(b, o)
    folds_t, gone_t = _folded_away(b, t)
    gone, seen = _Entries([*gone_o, *gone_t]), _Entries()
    entries = [e for e in [*b, *o, *t] if e not in gone and seen.add(e)]
    mine = _Entries(folds_o)
    if folds_o and folds_t and not any(f in mine for f in folds_t):
        both = _Entries(gone_o)
        twice = _fold([e for e in gone_t if e in both])  # counted by the folds of both sides
        folds = _Entries([*folds_o, *folds_t])
        entries = [e for e in entries if e not in folds]
        entries.append(_less(_fold(sorted([*folds_o, *folds_t], key=_entry_time)), twice))
    entries.sort(key=_entry_time)  # stable: equal times keep the order met
    return bounded_history(entries) or _ABSENT


def _less(fold: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """``fold`` without the entries the fold ``part`` counts."""
    verdicts = {k: v - part["verdicts"].get(k, 0) for k, v in fold["verdicts"].items()}
    return {
        **fold,
        "folded": fold["folded"] - part["folded"],
        "verdicts": {k: v for k, v in verdicts.items() if v},
    }


def _replay(start: float, entries: list[Any]) -> float | None:
    """``start`` moved by each entry's recorded change, clamped to 0..1 (``None``: not replayable)."""
    value = start
    for entry in entries:
        before, after = entry.get("confidence_before"), entry.get("confidence_after")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (before, after)):
            return None
        value = min(1.0, max(0.0, round(value + after - before, 10)))
    return value


def _changes(base: list[Any], side: list[Any], start: Any) -> list[Any]:
    """The confidence changes a side made since base, oldest first: its new entries but
    folds, whose spans cover base entries too. When a side folded some of its own new
    entries (it verified past :data:`HISTORY_KEEP` since base), they count as one change
    from ``start`` to where the fold ends."""
    known = _Entries(base)
    new = [e for e in side if isinstance(e, dict) and e not in known]
    changes = [e for e in new if not _is_fold(e)]
    folds, gone = _folded_away(base, side)
    own = _count(folds) - _count(gone)  # how many of its own entries the side folded
    if own < 0:
        raise _Conflict
    if own:
        last = max(folds, key=_entry_time)
        changes.append(
            {
                "ts": last.get("ts"),
                "confidence_before": start,
                "confidence_after": last.get("confidence_after"),
            }
        )
    return sorted(changes, key=_entry_time)


def _verified_confidence(metas: tuple[dict[str, Any], ...]) -> Any:
    """The confidence both sides reached by verifying, or :class:`_Conflict`.

    Each side's confidence must be exactly its base moved by its own new
    verifications; the result is the base moved by all of them, in time order.
    """
    base, ours, theirs = (_as_list(m.get("verification_history", _ABSENT)) for m in metas)
    start = metas[0].get("confidence", _ABSENT)
    if start is _ABSENT:
        firsts = [e for e in (*ours, *theirs) if isinstance(e, dict) and e not in _Entries(base)]
        start = min(firsts, key=_entry_time).get("confidence_before") if firsts else None
    if not isinstance(start, (int, float)) or isinstance(start, bool):
        raise _Conflict
    new_ours, new_theirs = _changes(base, ours, start), _changes(base, theirs, start)
    if not new_ours or not new_theirs:
        raise _Conflict
    for meta, entries in ((metas[1], new_ours), (metas[2], new_theirs)):
        replayed = _replay(start, entries)
        reached = meta.get("confidence")
        if replayed is None or not isinstance(reached, (int, float)) or abs(replayed - reached) > 1e-9:
            raise _Conflict
    seen = _Entries()
    merged = _replay(start, sorted((e for e in [*new_ours, *new_theirs] if seen.add(e)), key=_entry_time))
    if merged is None:
        raise _Conflict
    return merged


_RULES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "verification_history": _merge_history,
    "access_count": _largest_count,
    "edges": _merge_edges,
    "created_at": _earliest,
    **{name: _latest for name in _MAX_TIME_FIELDS},
    **{name: _merge_set for name in _SET_FIELDS},
    **{name: _merge_mapping for name in _KEYED_FIELDS},
}


# -- nodes --------------------------------------------------------------------


def _merge_field(name: str, values: tuple[Any, Any, Any], metas: tuple[dict[str, Any], ...]) -> Any:
    if name == "confidence":
        try:
            return _verified_confidence(metas)
        except _Conflict:
            pass  # not explained by verifications alone: the three-way rule decides
    rule = _RULES.get(name)
    if rule is not None:
        return rule(*values)
    return _three_way(*values, time=name in _TIME_FIELDS)


#: The retention fields, merged as one unit: a tier, its expiry and its reason belong together.
_RETENTION_UNIT = ("retention_tier", "expires_at", "retention_reason")


def _merge_retention(metas: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """The retention fields of the merge, taken whole from one version (three-way over
    the unit); when both sides changed them differently, the longer-lived side's: a
    long (or unassigned) memory outlives a temporary one, a later expiry an earlier
    one (ours on a tie). Field by field, one side's ``long`` and the other's expiry
    made a long memory with an expiry, neither kept nor ever swept."""
    base, ours, theirs = (tuple(m.get(f, _ABSENT) for f in _RETENTION_UNIT) for m in metas)

    def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
        return all(_same(x, y, time=f == "expires_at") for f, x, y in zip(_RETENTION_UNIT, a, b, strict=True))

    if same(ours, theirs) or same(theirs, base):
        kept = ours
    elif same(ours, base):
        kept = theirs
    else:
        kept = theirs if _lifetime(theirs) > _lifetime(ours) else ours
    return {f: v for f, v in zip(_RETENTION_UNIT, kept, strict=True) if v is not _ABSENT}


def _lifetime(unit: tuple[Any, ...]) -> tuple[int, float]:
    """How long a version of the retention unit keeps its memory: (2, inf) long or no
    tier and no expiry; (1, expiry) temporary -- (1, inf) without a readable expiry."""
    tier, expires = unit[0], unit[1]
    if tier == "long" or (tier is _ABSENT and expires is _ABSENT):
        return (2, math.inf)
    when = None if expires is _ABSENT else _instant(expires)
    return (1, math.inf if when is None else when)


def _prior_conflict(base: Any, ours: Any, theirs: Any) -> dict[str, Any]:
    """The ``merge_conflict`` record the sides already carried (both, if they disagree)."""
    try:
        kept = [_three_way(base, ours, theirs)]
    except _Conflict:
        kept = [ours, theirs]
    fields: dict[str, Any] = {}
    body = False
    for record in kept:
        if isinstance(record, dict):
            if isinstance(record.get("fields"), dict):
                fields.update(record["fields"])
            body = body or bool(record.get("body"))
    return {"fields": fields, "body": body}


def merge_nodes(
    base: Node | None, ours: Node, theirs: Node, *, path: str = "<node>"
) -> tuple[Node, dict[str, Any] | None]:
    """Merge three versions of a node; return the merged node and its conflict record.

    ``base`` is ``None`` when both sides added the file. The record is
    ``None`` when this merge found no conflict, else ``{"fields": {name:
    {"ours", "base", "theirs"}}, "body": bool}`` as stored in the node under
    :data:`CONFLICT_KEY` (with conflicts an earlier merge left unresolved).
    Raises :class:`MergeError` if the body merge tool cannot run.
    """
    metas = tuple(n.to_dict() if n is not None else {} for n in (base, ours, theirs))
    prior = _prior_conflict(*(m.pop(CONFLICT_KEY, _ABSENT) for m in metas))
    merged = _merge_retention(metas)
    names = [n for n in dict.fromkeys([*metas[1], *metas[2], *metas[0]]) if n not in _RETENTION_UNIT]
    conflicts: dict[str, Any] = {}
    for name in names:
        values = tuple(m.get(name, _ABSENT) for m in metas)
        try:
            value = _merge_field(name, values, metas)
        except _Conflict:
            value = values[1]
            conflicts[name] = _conflict_values(values)
        if value is not _ABSENT:
            merged[name] = value
    body, body_conflict = _merge_body(None if base is None else base.body, ours.body, theirs.body, path=path)
    record: dict[str, Any] | None = None
    if conflicts or body_conflict or prior["fields"] or prior["body"]:
        record = {
            "fields": dict(sorted({**prior["fields"], **conflicts}.items())),
            "body": body_conflict or prior["body"],
        }
        merged[CONFLICT_KEY] = record
    return Node.from_dict(merged, body), record if (conflicts or body_conflict) else None


def _conflict_values(values: tuple[Any, Any, Any]) -> dict[str, Any]:
    """The three versions of a conflicting field (absent as ``None``)."""
    base, ours, theirs = (None if v is _ABSENT else v for v in values)
    return {"ours": ours, "base": base, "theirs": theirs}


# -- text ---------------------------------------------------------------------


def merge_file_texts(base: bytes, ours: bytes, theirs: bytes, *, path: str = "<file>") -> tuple[bytes, int]:
    """Line-based three-way merge by ``git merge-file --diff3``; return (merged, conflict count).

    Conflicting hunks carry markers labelled ``ours``, ``base`` and ``theirs``.
    Raises :class:`MergeError` naming ``path`` when git is missing or refuses
    (binary content).
    """
    with tempfile.TemporaryDirectory(prefix="mdcg-merge-") as tmp:
        files = []
        for label, data in zip(LABELS, (ours, base, theirs), strict=True):
            (Path(tmp) / label).write_bytes(data)
            files.append(str(Path(tmp) / label))
        cmd = ["git", "merge-file", "-p", "--diff3"]
        for label in LABELS:
            cmd += ["-L", label]
        try:
            done = subprocess.run([*cmd, *files], cwd=tmp, capture_output=True, check=False)
        except FileNotFoundError:
            raise MergeError(path, "git is not installed; it is needed to merge the text") from None
    if not 0 <= done.returncode < 128:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
        for label, name in zip(LABELS, files, strict=True):
            reason = reason.replace(name, f"the {label} version")
        raise MergeError(path, f"git merge-file failed: {reason}")
    return done.stdout, done.returncode


def _merge_body(base: str | None, ours: str, theirs: str, *, path: str) -> tuple[str, bool]:
    if ours == theirs or (base is not None and theirs == base):
        return ours, False
    if base is not None and ours == base:
        return theirs, False
    data, conflicts = merge_file_texts(
        (base or "").encode("utf-8"), ours.encode("utf-8"), theirs.encode("utf-8"), path=path
    )
    return data.decode("utf-8"), conflicts > 0


def _parse(data: bytes, path: str, side: str) -> Node:
    try:
        return nodefile.loads(nodefile.read_bytes_as_text(data, path), path)
    except MalformedNodeFileError as exc:
        raise MalformedNodeFileError(path, f"{side} version: {exc.reason}", line=exc.line) from None


def _text_fallback(base: bytes, ours: bytes, theirs: bytes, path: str, reason: str) -> MergeResult:
    data, conflicts = merge_file_texts(base, ours, theirs, path=path)
    clean = conflicts == 0
    if clean:
        try:
            _parse(data, path, "merged")
        except MalformedNodeFileError:
            clean = False
    return MergeResult(data=data, clean=clean, conflict=None, fallback=reason)


def merge_node_files(base: bytes, ours: bytes, theirs: bytes, *, path: str = "<node>") -> MergeResult:
    """Merge three versions of a node file (an empty ``base``: both sides added it).

    Versions that parse are merged field by field (:func:`merge_nodes`); the
    result is ours or theirs byte for byte when it equals that side. A side that is not
    the base's memory (:func:`_from_base`) is merged with the other without the base,
    as both sides adding the file, and the ``merge_conflict`` record names the two
    memories (:data:`MEMORIES_KEY`): never clean, nothing of either side dropped. If any
    version does not parse, the files are merged as plain text, and the result
    is clean only if no hunk conflicted and the merged file parses.

    Line ends are made alike first: each ``\\r\\n`` of the three versions is read as
    ``\\n`` (a lone ``\\r`` is kept), so a version an editor saved with CRLF merges with
    an LF edit line by line, not as a conflict over every line. The result is written
    with LF (as md-cg writes every node file), also when it is one side's file (a CRLF
    side is then kept byte for byte but for its line ends).
    """
    base, ours, theirs = (_lf(data) for data in (base, ours, theirs))
    if ours == theirs:
        return MergeResult(data=ours, clean=True)
    try:
        nodes = [_parse(data, path, side) for data, side in ((ours, "ours"), (theirs, "theirs"))]
        base_node = _parse(base, path, "base") if base.strip() else None
    except MalformedNodeFileError as exc:
        versions = (base, ours, theirs) if base.strip() else (ours, theirs)
        if len({tuple(_SCOPE_LINES.findall(v)) for v in versions}) > 1:
            # scopes that cannot be read for sure and that differ: never merged into one
            return _whole_versions(ours, theirs, f"{exc}; and the versions' scope lines differ")
        return _text_fallback(base, ours, theirs, path, str(exc))
    apart = None
    if base_node is not None and not all(_from_base(base_node, n) for n in nodes):
        # not versions of the base's memory (git paired two memories' files): an add/add
        apart = _memories(base_node, *nodes, path=path)
        base, base_node = b"", None
    elif base_node is None and _added_apart(*nodes):  # one id added in two clones (session 43)
        apart = _memories(None, *nodes, path=path)
    scoped = _scope_conflict(base_node, nodes[0], nodes[1])
    if scoped is not None:
        return _whole_versions(ours, theirs, f"{path}: {scoped}")
    try:
        merged, conflict = merge_nodes(base_node, nodes[0], nodes[1], path=path)
    except InvalidNodeError as exc:
        # Each value came from a valid version; a combination that breaks a
        # cross-field rule is left to the text merge and to a person.
        return _text_fallback(base, ours, theirs, path, f"{path}: the merged node is invalid: {exc}")
    if apart is not None:  # a conflict even where no field differs: a person keeps them apart
        record = {**merged.extra.get(CONFLICT_KEY, {"fields": {}, "body": False}), MEMORIES_KEY: apart}
        merged.extra[CONFLICT_KEY] = record
        return MergeResult(data=nodefile.dump_bytes(merged), clean=False, conflict=record)
    for data, node in ((ours, nodes[0]), (theirs, nodes[1])):
        if node == merged:
            return MergeResult(data=data, clean=conflict is None, conflict=conflict)
    return MergeResult(data=nodefile.dump_bytes(merged), clean=conflict is None, conflict=conflict)


def _from_base(base: Node, side: Node) -> bool:
    """Whether ``side`` is a version of the memory in ``base``, as md-cg's renames tell:
    under another id, ``renamed_from`` lists the base's id (or the base's lists the side's:
    renamed back); under the base's id, ``renamed_from`` gained no earlier id but the
    base's own (renamed away and back). Else git paired another memory's file: a similar
    new file taken for a rename of the base (``py_staging`` forgotten, ``py_staging_2026``
    added), or another memory renamed onto the base's id (``owner`` renamed away and
    ``owner_new`` renamed to ``owner``).

    ``created_at`` does not tell: md-cg moves it in one memory's versions (``mdcg edit``
    of the date, an add/add merge keeping the earlier one, an import stamping records
    without one), and the check on it (session 35, taken back) called those two memories
    -- every later edit on both sides a conflict. A memory forgotten and added again under
    its id is not told apart from an edit of it (docs/git.md, Limits)."""
    earlier, had = _renamed_from(side), set(_renamed_from(base))
    if side.id != base.id:
        return base.id in earlier or side.id in had
    gained = [i for i in earlier if i not in had]
    return not gained or base.id in gained


def _added_apart(ours: Node, theirs: Node) -> bool:
    """Whether two versions of a file added on both sides (no base) are two memories: each
    has a ``created_at``, they differ, and so do the bodies -- one id given to two memories
    in two clones (``add --id todo``). The same memory imported or added in both clones
    holds the same body (a different ``created_at`` alone is merged, the earlier kept)."""
    made = (ours.created_at, theirs.created_at)
    return None not in made and made[0] != made[1] and ours.body != theirs.body


def _renamed_from(node: Node) -> list[str]:
    value = node.extra.get(RENAMED_FROM)
    return [i for i in value if isinstance(i, str)] if isinstance(value, list) else []


def _memories(base: Node | None, ours: Node, theirs: Node, *, path: str) -> dict[str, Any]:
    """The :data:`MEMORIES_KEY` record: the id and creation time of each version, and what to
    do (``base`` None: both sides added the file, its ``base`` null)."""

    def which(node: Node) -> dict[str, Any]:
        made = None if node.created_at is None else format_instant(node.created_at)
        return {"id": node.id, "created_at": made}

    how = "git paired their files" if base is not None else "one id added in two clones"
    return {
        "ours": which(ours),
        "base": None if base is None else which(base),
        "theirs": which(theirs),
        "resolve": (
            f"two different memories met in this file ({how}): keep each whole "
            f"under its own id (git show :2:{path} is ours, git show :3:{path} theirs) or keep one; "
            "docs/git.md, Two memories in one file"
        ),
    }


def _lf(data: bytes) -> bytes:
    """``data`` with its CRLF line ends as LF."""
    return data.replace(b"\r\n", b"\n")


_SCOPE_FIELDS = ("agent_scope", "workspace_scope", "sensitivity")
#: A frontmatter line of one of them, however it is written (for versions that do not parse).
_SCOPE_LINES = re.compile(
    rb"^[ \t]*[\"']?(?:agent_scope|workspace_scope|sensitivity)[\"']?[ \t]*:.*$", re.MULTILINE
)


def _scope_conflict(base: Node | None, ours: Node, theirs: Node) -> str | None:
    """Why the two versions cannot be merged into one memory: both sides set its scope
    (agent, workspace, sensitivity) and not to the same one (two agents' memories of one
    id: any merged node would show one agent the other's text). None when they agree."""

    def scope(node: Node | None) -> tuple[Any, ...] | None:
        return None if node is None else tuple(getattr(node, f) for f in _SCOPE_FIELDS)

    mine, other, was = scope(ours), scope(theirs), scope(base)
    if mine == other:
        return None
    names = ", ".join(f for f, a, b in zip(_SCOPE_FIELDS, mine or (), other or (), strict=True) if a != b)
    if was not in (mine, other):
        return f"the two versions belong to different scopes ({names}): a person decides which is kept"
    # One side changed the scope. The merged node takes it; text the other side wrote
    # under its own scope must not land in a wider one (a clone shared the memory while
    # another added private text to it).
    merged, kept = (mine, theirs) if other == was else (other, ours)
    assert base is not None and merged is not None
    if _wider(merged, scope(kept)) and _content(kept) != _content(base):
        return (
            f"one version widens the memory's scope ({names}) while the other added text under the "
            "narrower one: a person decides what may be shared"
        )
    return None


def _wider(merged: tuple[Any, ...], side: tuple[Any, ...] | None) -> bool:
    """Whether a node of scope ``merged`` is seen by a caller a node of scope ``side``
    is hidden from (agent, workspace, sensitivity)."""
    assert side is not None
    agent, workspace, level = merged
    side_agent, side_workspace, side_level = side
    if (side_agent is not None and agent != side_agent) or (
        side_workspace is not None and workspace != side_workspace
    ):
        return True
    rank = {name: i for i, name in enumerate(SENSITIVITY_LEVELS)}
    return rank.get(level or DEFAULT_SENSITIVITY, 1) < rank.get(side_level or DEFAULT_SENSITIVITY, 1)


def _content(node: Node) -> dict[str, Any]:
    """What a version says, apart from its scope and its times and counters."""
    d = node.to_dict()
    for name in (*_SCOPE_FIELDS, "updated_at", "last_access", "access_count", CONFLICT_KEY):
        d.pop(name, None)
    d["body"] = node.body
    return d


def _whole_versions(ours: bytes, theirs: bytes, reason: str) -> MergeResult:
    """Both versions whole, between conflict markers: a file no one reads as a memory
    (:func:`md_cg.nodefile.loads` refuses it) until a person keeps one."""
    parts = [b"<<<<<<< ours\n", ours, b"" if ours.endswith(b"\n") else b"\n", b"=======\n"]
    parts += [theirs, b"" if theirs.endswith(b"\n") else b"\n", b">>>>>>> theirs\n"]
    return MergeResult(data=b"".join(parts), clean=False, conflict=None, fallback=reason, whole=True)


# -- conflicts ----------------------------------------------------------------


def conflict_of(node: Node) -> dict[str, Any] | None:
    """The unresolved merge conflict a node carries, or ``None``.

    Returns ``{"fields": {name: {"ours", "base", "theirs"}}, "body": bool}``
    from the node's ``merge_conflict`` key, or ``{"fields": {}, "body": True}``
    for a body holding git conflict markers without that key (a merge made
    without this driver). Resolving a conflict means editing the file and
    deleting the ``merge_conflict`` key and the markers.
    """
    record = node.extra.get(CONFLICT_KEY, _ABSENT)
    if record is not _ABSENT:
        fields = record.get("fields") if isinstance(record, dict) else None
        body = record.get("body") if isinstance(record, dict) else None
        return {
            "fields": dict(fields) if isinstance(fields, dict) else {},
            "body": bool(body) or has_conflict_markers(node.body),
        }
    if has_conflict_markers(node.body):
        return {"fields": {}, "body": True}
    return None


def settle(node: Node, changed: Collection[str]) -> None:
    """Drop from ``node``'s ``merge_conflict`` record what an edit of the fields
    ``changed`` resolved: those fields, and the body when it was given and holds no
    marker lines at all (not even in a code block); the key goes when nothing is left
    unresolved."""
    record = node.extra.get(CONFLICT_KEY, _ABSENT)
    if record is _ABSENT:
        return
    fields = record.get("fields") if isinstance(record, dict) else None
    left = {k: v for k, v in fields.items() if k not in changed} if isinstance(fields, dict) else {}
    body = record.get("body", True) if isinstance(record, dict) else True
    # a conflict inside a code block is one too, and a body that still holds marker lines
    # anywhere settles nothing: text added around a conflict left in a fence is no
    # resolution (a resolution that quotes markers is settled by removing the record)
    if "body" in changed:
        body = bool(body) and _markers(node.body, outside_fences=False)
    if left or body:
        kept = record if isinstance(record, dict) else {}
        node.extra[CONFLICT_KEY] = {**kept, "fields": left, "body": body}
    else:
        del node.extra[CONFLICT_KEY]


def settle_edit(node: Node, old: Node) -> None:
    """:func:`settle` for a memory edited as a whole text (``edit_text``, ``mdcg edit``): the
    fields whose values differ from ``old`` (the memory as stored) and the body count as
    changed, as :meth:`md_cg.MdCG.update` of them would. Before session 41 an edit that took
    the markers out of the body but left the ``merge_conflict`` line (as an editor shows it)
    kept the memory "unresolved": ``sync`` exited 1 and ``health`` said both versions were
    in a file that held one (attack atk10 F9)."""
    if CONFLICT_KEY not in node.extra:
        return
    changed = {
        f.name
        for f in fields(Node)
        if f.name not in _NOT_EDITS and getattr(node, f.name) != getattr(old, f.name)
    }
    if changed:
        settle(node, changed)


#: Fields an edit of the whole text does not settle by changing: the write stamps
#: ``updated_at``; ``extra`` holds the record itself.
_NOT_EDITS = frozenset({"updated_at", "extra", "id"})


def text_problem(node: Node) -> InvalidNodeError | None:
    """The InvalidNodeError (returned, not raised) when ``node``'s body is not text a
    memory can hold, or None: a memory needs some text (not only heading marks), no git
    conflict markers outside a code block (sync would take it for an unresolved merge)
    and no NUL character (git takes a file holding one for binary and shows no diff of
    it). :func:`md_cg.editing.require_text` raises it for ``add``/``update``; organise
    checks a candidate with it. Here because the conflict-marker rule is this module's."""
    if not isinstance(node.body, str) or not node.body.strip():
        return InvalidNodeError(
            f"node {node.id!r}: the body is empty; a memory needs some text",
            field="body",
            value=node.body,
            node_id=node.id,
        )
    if not node.body.replace("#", "").replace("＃", "").strip():
        return InvalidNodeError(
            f"node {node.id!r}: the body holds only heading marks (#); a memory needs some text",
            field="body",
            value=node.body,
            node_id=node.id,
        )
    if has_conflict_markers(node.body):
        return InvalidNodeError(
            f"node {node.id!r}: the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) "
            "outside a code block, so sync would take it for an unresolved merge; put such text "
            "in a fenced code block (```)",
            field="body",
            value=node.body,
            node_id=node.id,
        )
    if "\x00" in node.body:
        return InvalidNodeError(
            f"node {node.id!r}: the body holds a NUL character (at {node.body.index(chr(0))}); git would "
            "take the file for binary and show no diff of it",
            field="body",
            value=node.body,
            node_id=node.id,
        )
    return None


def has_conflict_markers(body: str) -> bool:
    """True when ``body`` holds git conflict markers: a ``<<<<<<<`` line outside fenced
    code blocks, then a ``=======`` line and a ``>>>>>>>`` line (wherever they fall:
    a conflict on a code block's first line opens the fence inside it)."""
    # Every node is checked when it is indexed: almost no body holds a marker at all,
    # and a substring test is far cheaper than a look at its lines.
    return "<<<<<<<" in body and _markers(body, outside_fences=True)


def _markers(body: str, *, outside_fences: bool) -> bool:
    """The marker lines in order; ``outside_fences``: the opening one outside a fenced
    code block (an unclosed fence runs to the end, as in Markdown)."""
    fence: tuple[str, int] | None = None
    stage = 0
    for line in body.split("\n"):  # git's lines: \u2028, \x0c and the like do not end one
        line = line.removesuffix("\r")
        if stage == 0:
            m = _FENCE.fullmatch(line) if outside_fences else None
            if m is not None and fence is None and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = (m.group(1)[0], len(m.group(1)))
            elif m is not None and fence is not None:
                if m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip():
                    fence = None
            elif fence is None and _OPEN_MARK.fullmatch(line):
                stage = 1
        elif stage == 1 and _SEP_MARK.fullmatch(line):
            stage = 2
        elif stage == 2 and _CLOSE_MARK.fullmatch(line):
            return True
    return False


def describe_conflict(path: str, conflict: dict[str, Any]) -> str:
    """One line naming what conflicted in the file at ``path`` (and, when git paired the
    files of two memories, which: their ids and creation times, and what to do)."""
    apart = conflict.get(MEMORIES_KEY)
    if isinstance(apart, dict):
        ours, theirs = apart["ours"], apart["theirs"]
        return (
            f"{path}: two different memories, not two versions of one: ours {ours['id']!r} (created "
            f"{ours['created_at']}), theirs {theirs['id']!r} (created {theirs['created_at']}); both "
            f"are kept, see '{CONFLICT_KEY}' in its frontmatter: {apart['resolve']}"
        )
    parts = [f"field {name!r}" for name in conflict["fields"]]
    if conflict["body"]:
        parts.append("the body (between <<<<<<< and >>>>>>> markers)")
    what = ", ".join(parts) if parts else "an earlier merge"
    return (
        f"{path}: merge conflict in {what}; both versions are kept, see '{CONFLICT_KEY}' in its frontmatter"
    )


# -- installation ----------------------------------------------------------------


def attribute_lines() -> list[str]:
    """The ``.gitattributes`` rules that send node files to the driver (archived ones too).

    No ``text``/``eol`` attribute: git keeps each file's bytes as committed. Such a rule
    added to a store holding CRLF files makes each of them show as modified in every
    clone (a fresh one too) and a pull touching one refuse; the driver reads CRLF
    versions as LF instead (:func:`merge_node_files`)."""
    return [f"{layer}/**/*.md merge={DRIVER_NAME}" for layer in (*LAYERS, ARCHIVE_DIR)]


def gitattributes_text() -> str:
    """The ``.gitattributes`` a new store is created with. Harmless in a clone where the
    driver is not enabled: git then merges those files line by line, as without it."""
    return "\n".join([_GITATTRIBUTES_HEADER, *attribute_lines()]) + "\n"


def driver_command(python: str | None = None) -> str:
    """The driver command line for ``git config merge.mdcg.driver``."""
    exe = shlex.quote(python or sys.executable)
    return f"{exe} -m md_cg.merge %O %A %B %P"


def install_merge_driver(root: Path) -> str:
    """Add the driver's rules to ``root/.gitattributes``; return how to enable the driver.

    Idempotent: lines already present are not repeated and every other line
    is kept. ``git config`` is not carried by clones, so each clone runs the
    returned command once.
    """
    root = Path(root)
    target = root / ".gitattributes"
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in attribute_lines() if line not in present]
    if missing:
        if _GITATTRIBUTES_HEADER not in present:
            missing.insert(0, _GITATTRIBUTES_HEADER)
        if text and not text.endswith("\n"):
            text += "\n"
        target.write_text(text + "\n".join(missing) + "\n", encoding="utf-8")
    where = shlex.quote(str(root))
    return (
        f"{target} sends node files to the md-cg merge driver. Commit it, then enable\n"
        "the driver once in every clone (git config is not cloned):\n"
        f"  git -C {where} config merge.{DRIVER_NAME}.name 'md-cg node files'\n"
        f"  git -C {where} config merge.{DRIVER_NAME}.driver {shlex.quote(driver_command())}\n"
    )


# -- setting up a clone --------------------------------------------------------------

#: The hooks that run after git changed files of the work tree: a pull or merge,
#: a checkout of a branch or files, a rebase or an amend.
HOOKS = ("post-merge", "post-checkout", "post-rewrite")
#: The second line of a hook md-cg wrote (a hook without it is left alone).
HOOK_MARK = "# md-cg: bring the index of each memory store up to date with the files git changed"


#: The settings files a store commits: its ``.gitignore`` (``engine.GITIGNORE``) re-includes
#: them from ``.mdcg/``, so the hooks never call them tracked state.
SETTINGS_FILES = (SYNONYMS, "retention.json", "retention_markers.json")
#: How many tracked state files the hooks' warning names (then "and N more").
TRACKED_SHOWN = 5


def sync_line(rel: str, python: str | None = None) -> str:
    """The hook line that syncs the store at ``rel`` (a path from the top of the work tree)."""
    exe = shlex.quote(python or sys.executable)
    where = shlex.quote(rel)
    # The folder's name is data: quoted as one word in both places, never spliced into
    # a quoted string (a name holding a quote would otherwise run as shell code).
    warning = f"md-cg: sync of the store {rel} failed or found problems; see: mdcg health --root {where}"
    sync = f"{exe} -m md_cg.cli -q sync --root {where} >/dev/null || echo {shlex.quote(warning)} >&2"
    # `if`, not `&&`: the hook must exit 0 (post-checkout's status becomes git checkout's)
    return f"{sync}; {_tracked_check(rel)}"


def _tracked_words(rel: str) -> tuple[list[str], str, str]:
    """The pathspecs of the files of the store's ``.mdcg/`` at ``rel`` that are each clone's
    own state (all but the settings files, :data:`SETTINGS_FILES`), and the warning's first
    and last lines (the hooks' and ``init --git``'s: :func:`tracked_warning`).

    Literal pathspecs: a folder named with ``*`` or ``[`` matches only itself. The
    settings files belong in the repository; advice to untrack all of ``.mdcg/``
    deleted them in every other clone at its next pull."""
    state = f"{rel}/{META_DIR}" if rel != "." else META_DIR
    specs = [f":(literal){state}", *(f":(exclude,literal){state}/{name}" for name in SETTINGS_FILES)]
    quoted = " ".join(shlex.quote(spec) for spec in specs)
    head = (
        f"md-cg: git tracks files of {state}/ that are each clone's own state (index, tombstones, "
        "access counts): a pull replaces them, and untracking them deletes them in the other clones:"
    )
    advice = (
        f"Copy {state}/audit/ aside in every clone, then untrack exactly these (the settings files "
        f"{', '.join(SETTINGS_FILES)} stay tracked), from the top of the work tree: "
        f"git rm -r -q --cached -- {quoted} (docs/git.md)"
    )
    return specs, head, advice


def _tracked_check(rel: str) -> str:
    """Shell that names the files of the store's ``.mdcg/`` git tracks, but for the
    settings files, and says how to untrack exactly those (:func:`_tracked_words`)."""
    specs, head, advice = _tracked_words(rel)
    quoted = " ".join(shlex.quote(spec) for spec in specs)
    n = TRACKED_SHOWN
    more = f'if [ "$mdcg_n" -gt {n} ]; then echo "  and $((mdcg_n - {n})) more"; fi'
    # printf, not echo: sh's echo reads backslashes in a folder's name as escapes
    say = "printf '%s\\n'"
    report = (
        f"{say} {shlex.quote(head)}; {say} \"$mdcg_t\" | sed -n '1,{n}s/^/  /p'; "
        f'mdcg_n=$({say} "$mdcg_t" | wc -l); {more}; {say} {shlex.quote(advice)}'
    )
    return (
        f'mdcg_t=$(git ls-files -- {quoted} 2>/dev/null); if [ -n "$mdcg_t" ]; then {{ {report}; }} >&2; fi'
    )


def tracked_warning(root: Path) -> str | None:
    """What the hooks say after a pull when git tracks files of the ``.mdcg/`` of the store
    at ``root`` that are each clone's own state (a ``git add -f``), the same lines: the
    first :data:`TRACKED_SHOWN` of them and the ``git rm -r -q --cached`` that untracks
    exactly them; None when there is none (or ``root`` is in no work tree)."""
    root = Path(root).resolve()
    try:
        top = work_tree_of(root)
        rel = root.relative_to(top).as_posix() or "."
        specs, head, advice = _tracked_words(rel)
        tracked = _git(top, "ls-files", "--", *specs).splitlines()
    except (MdcgError, ValueError):
        return None
    if not tracked:
        return None
    shown = [f"  {name}" for name in tracked[:TRACKED_SHOWN]]
    if len(tracked) > TRACKED_SHOWN:
        shown.append(f"  and {len(tracked) - TRACKED_SHOWN} more")
    return "\n".join([head, *shown, advice])


def _git(cwd: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise MdcgError("git is not installed (or not on PATH)") from exc
    if done.returncode != 0:
        raise MdcgError(f"git {' '.join(args)} in {cwd}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


def work_tree_of(path: Path) -> Path:
    """The top folder of the git work tree holding ``path`` (or, while ``path`` does not
    exist yet, its nearest existing parent). Raises :class:`MdcgError` when there is
    none or git is missing (``mdcg init --git`` asks before it creates anything)."""
    where = Path(path).resolve()
    while not where.is_dir() and where != where.parent:
        where = where.parent
    try:
        return Path(_git(where, "rev-parse", "--show-toplevel")).resolve()
    except MdcgError as exc:
        raise MdcgError(f"{path} is not inside a git work tree ({exc}); run git init or clone first") from exc


def configure_clone(root: Path) -> list[str]:
    """Set up the git clone that holds the store at ``root``; return what was done, a line each.

    What ``git clone`` does not carry, so each clone needs once: the merge
    driver's two ``git config`` entries (:func:`install_merge_driver` writes the
    ``.gitattributes`` that use them), and hooks (:data:`HOOKS`) that run
    ``mdcg sync`` for this store after git changed its files, so the next
    search sees what a pull brought (without them, the index lags until a
    sync). A hook that exists and is not md-cg's is left as it is; the line to
    add to it is returned. Idempotent. Raises :class:`MdcgError` when ``root``
    is not inside a git work tree or git is missing.
    """
    root = Path(root).resolve()
    top = work_tree_of(root)
    _git(root, "config", f"merge.{DRIVER_NAME}.name", "md-cg node files")
    _git(root, "config", f"merge.{DRIVER_NAME}.driver", driver_command())
    done = [f"git config: merge.{DRIVER_NAME} driver set for {top}"]
    hooks = (root / _git(root, "rev-parse", "--git-path", "hooks")).resolve()
    rel = root.relative_to(top).as_posix() or "."
    line = sync_line(rel)
    for name in HOOKS:
        done.append(_install_hook(hooks / name, rel, line))
    return done


def _install_hook(path: Path, rel: str, line: str) -> str:
    """Write or extend one hook; say what happened."""
    if path.exists():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if HOOK_MARK not in lines:
            return f"{path} exists and is not md-cg's: left as it is; add this line to it:\n  {line}"
        mine = [i for i, x in enumerate(lines) if f"--root {shlex.quote(rel)} " in x]
        if mine and all(lines[i] == line for i in mine):
            return f"{path}: already syncs {rel}"
        if mine:  # an earlier version's line (its warning told to untrack the settings files)
            kept = [line if i == mine[0] else x for i, x in enumerate(lines) if i == mine[0] or i not in mine]
            path.write_text("\n".join(kept) + "\n", encoding="utf-8")
            return f"{path}: its line for {rel} brought up to date"
        path.write_text(text + ("" if text.endswith("\n") else "\n") + line + "\n", encoding="utf-8")
        return f"{path}: now also syncs {rel}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n{HOOK_MARK}\ncd "$(git rev-parse --show-toplevel)" || exit 0\n{line}\n')
    path.chmod(0o755)
    return f"{path}: syncs {rel} after git changes its files"


# -- the driver ---------------------------------------------------------------------


USAGE = "usage: python -m md_cg.merge BASE OURS THEIRS [PATH]   (git: %O %A %B %P)"


def main(argv: Sequence[str]) -> int:
    """Run as git's merge driver: merge into OURS; 0 clean, 1 conflict, 2 error."""
    if len(argv) not in (3, 4):
        print(USAGE, file=sys.stderr)
        return 2
    base_file, ours_file, theirs_file = argv[:3]
    path = argv[3] if len(argv) == 4 else ours_file
    try:
        base, ours, theirs = (Path(p).read_bytes() for p in (base_file, ours_file, theirs_file))
        result = merge_node_files(base, ours, theirs, path=path)
    except (OSError, MergeError) as exc:
        print(f"md-cg merge: {exc}", file=sys.stderr)
        return 2
    Path(ours_file).write_bytes(result.data)
    if result.whole:
        print(f"md-cg merge: kept both versions whole, unmerged: {result.fallback}", file=sys.stderr)
    elif result.fallback is not None:
        print(f"md-cg merge: merged as plain text because {result.fallback}", file=sys.stderr)
    if result.conflict is not None:
        print(f"md-cg merge: {describe_conflict(path, result.conflict)}", file=sys.stderr)
    return 0 if result.clean else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
