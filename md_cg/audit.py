"""The audit log ``.mdcg/audit/``: what left the store, and what came back.

Payload-free records (ids, layer, reason, times; never content) appended by
four writers:

* a **tombstone** per forgotten (``event: "forget"``) or swept (``"sweep"``)
  node, with the node's ``created_at`` -- :mod:`md_cg.forgetting`;
* a :data:`RENAMED` record per rename (``id`` the old id, ``to`` the new
  one) -- :func:`md_cg.editing.rename`;
* a :data:`RESTORED` record per forgotten or renamed id brought back on
  purpose: a migration with ``overwrite`` (:mod:`md_cg.migrate`), or
  ``keep_returned``;
* a :data:`BACK_AS` record when a sync takes in a forgotten memory under
  another id (another clone renamed it before the forget reached it:
  :func:`under_new_ids`), so that later syncs and ``health()`` go on naming
  it without reading files.

The functions here read those records: which ids are forgotten or renamed
away (:func:`departures`), which of those memories are back
(:func:`back_again`, :func:`renamed_back`), which records a scoped caller may
list (:func:`visible_to`). A record without a usable ``id`` or ``time`` (a
hand edit) is skipped. The log is per clone (under ``.mdcg/``, git-ignored).

Imports :mod:`md_cg.index`, :mod:`md_cg.logs`, :mod:`md_cg.node` and
:mod:`md_cg.visibility`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import fsops
from .errors import MalformedNodeFileError, UnsafePathError
from .index import MAX_FILE_BYTES, Entry, decode_node
from .logs import AppendLog
from .node import Node
from .visibility import Scope, scope_fields

#: The record a rename leaves: a migration re-run does not bring the old id back.
RENAMED = "renamed"
#: The record of a forgotten (or renamed) id brought back on purpose (a migration with
#: overwrite, ``keep_returned``).
RESTORED = "restored"
#: The record of a forgotten memory a sync took in under another id (``as``).
BACK_AS = "back_as"
#: The frontmatter key a rename adds to the node: its earlier ids, oldest first. It travels
#: with the file (git, a copy), so a clone that never saw the rename can tell the memory.
RENAMED_FROM = "renamed_from"
#: Earlier ids a node keeps in :data:`RENAMED_FROM`.
MAX_RENAMED_FROM = 16
#: Times a record may hold (seconds since the epoch, before the year 5138).
_LATEST = 1e11


@dataclass(frozen=True)
class Back:
    """A forgotten memory whose file is back: ``entry`` holds it now; it was forgotten
    as ``forgotten`` (``tombstone``). ``how``: ``"same id"``, ``"new id"`` (another
    clone renamed it before the forget reached it) or ``"old id"`` (renamed here, then
    forgotten under the new id, and a merge kept another clone's copy of the old one)."""

    entry: Entry
    forgotten: str
    tombstone: dict[str, Any]
    how: str


def usable(record: object) -> bool:
    """A record with a non-empty string ``id`` and a finite ``time`` of this era."""
    if not isinstance(record, dict):
        return False
    node_id, at = record.get("id"), record.get("time")
    if not isinstance(node_id, str) or not node_id or not isinstance(at, int | float) or isinstance(at, bool):
        return False
    return 0 <= at < _LATEST  # NaN compares false; a 400-digit integer is compared, not converted


def earlier_ids(node: Node) -> list[str]:
    """The ids ``node`` had before its renames (:data:`RENAMED_FROM`), as far as the file
    tells: a value that is not a list of strings (a hand edit) tells nothing."""
    prior = node.extra.get(RENAMED_FROM)
    return [i for i in prior if isinstance(i, str)] if isinstance(prior, list) else []


def departures(records: Iterable[object]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(forgotten, renamed): id -> the record of its last departure, a forget (or sweep)
    or a rename away, for each id that has not come back on purpose since (a
    :data:`RESTORED` record of the id itself) nor been taken by a rename onto it (that
    id is a memory again). Records in log order; unusable ones are skipped."""
    forgotten: dict[str, dict[str, Any]] = {}
    renamed: dict[str, dict[str, Any]] = {}
    for record in records:
        if not usable(record):
            continue
        assert isinstance(record, dict)
        node_id, event = record["id"], record.get("event")
        if event == BACK_AS or (event == RESTORED and record.get("kept", node_id) != node_id):
            continue  # a copy under another id seen or kept: the id itself stays forgotten
        forgotten.pop(node_id, None)
        renamed.pop(node_id, None)
        if event == RENAMED:
            to = record.get("to")
            if isinstance(to, str):
                renamed[node_id] = record
                forgotten.pop(to, None)
                renamed.pop(to, None)
        elif event != RESTORED:
            forgotten[node_id] = record
    return forgotten, renamed


def _forgets_of(records: Iterable[object], *, arrivals: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Id -> every forget (or sweep) tombstone of the id not settled since by a
    :data:`RESTORED` record of the id itself -- nor, with ``arrivals``, by a rename
    onto the id of a memory made at the same instant (a batch-mate: the two cannot be
    told apart) -- oldest first. A memory forgotten, the id used again, and the first
    memory's file back is told by its ``created_at``."""
    out: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if not usable(record):
            continue
        assert isinstance(record, dict)
        event = record.get("event")
        if event == RESTORED and record.get("kept", record["id"]) == record["id"]:
            out.pop(record["id"], None)
        elif event == RENAMED and arrivals and isinstance(record.get("to"), str):
            # the memory renamed onto the id: a tombstone of its very creation time can no
            # longer tell a returned file from it (a batch-mate's); the others still can
            made = record.get("created_at")
            left = [
                t for t in out.get(record["to"], ()) if type(made) is float and t.get("created_at") != made
            ]
            out[record["to"]] = left
        elif event not in (RENAMED, RESTORED, BACK_AS):
            out.setdefault(record["id"], []).append(record)
    return out


def _kept_copies(records: Iterable[object]) -> set[tuple[str, float]]:
    """(forgotten id, created_at) of each memory a person kept (``keep_returned``) since
    the id's last forget: its copies stay kept whatever id they are renamed to later; a
    forget of the id after the keep ends it."""
    kept: dict[str, set[float]] = {}
    for r in records:
        if not isinstance(r, dict) or not usable(r):
            continue
        event = r.get("event")
        if event == RESTORED and type(r.get("created_at")) is float:
            kept.setdefault(r["id"], set()).add(r["created_at"])
        elif event not in (RENAMED, RESTORED, BACK_AS):
            kept.pop(r["id"], None)
    return {(node_id, made) for node_id, times in kept.items() for made in times}


def _same_memory(e: Entry, record: dict[str, Any]) -> bool:
    """Whether ``e`` is the memory ``record`` (a tombstone or a rename) was about: the same
    ``created_at`` when the record kept it; else one created before the record."""
    made = record.get("created_at")
    if type(made) is float:
        return e.created_at == made
    return e.created_at is not None and e.created_at < record["time"]


def last_departures(records: Iterable[object]) -> dict[str, dict[str, Any]]:
    """Id -> the record of its last departure, forgotten or renamed (:func:`departures`)."""
    forgotten, renamed = departures(records)
    return {**renamed, **forgotten}


def last_forgets(records: Iterable[object]) -> dict[str, dict[str, Any]]:
    """Id -> the last forget (or sweep) tombstone of each id still forgotten."""
    return departures(records)[0]


def _final(renamed: Mapping[str, dict[str, Any]], old: str) -> str:
    """The id a chain of renames from ``old`` ends at (a -> b -> c: c)."""
    seen, current = {old}, renamed[old]["to"]
    while current in renamed and current not in seen:
        seen.add(current)
        current = renamed[current]["to"]
    return str(current)


def _history(record: dict[str, Any]) -> list[str]:
    """The earlier ids a tombstone or rename record kept of its memory."""
    prior = record.get(RENAMED_FROM)
    return [i for i in prior if isinstance(i, str)] if isinstance(prior, list) else []


def same_lineage(file_ids: list[str], file_id: str, record: dict[str, Any]) -> bool:
    """Whether a file of ``file_id`` whose ``renamed_from`` is ``file_ids`` is the memory
    ``record`` (a tombstone or a rename record, of ``record["id"]``) was about, as far as
    their ids tell: under that id, the same earlier ids (a batch-mate renamed onto it
    has others); under another id, renamed from it after the same earlier ids."""
    lineage = [*_history(record), record["id"]]
    if file_id == record["id"]:
        return file_ids == lineage[:-1]
    return file_ids[: len(lineage)] == lineage


def _lineage_of(read: Callable[[str], Node] | None, e: Entry, record: dict[str, Any]) -> bool:
    if read is None:
        return True
    try:
        return same_lineage(earlier_ids(read(e.path)), e.id, record)
    except (OSError, MalformedNodeFileError, UnsafePathError):
        return False


def back_again(
    entries: Mapping[str, Entry], records: list[dict[str, Any]], read: Callable[[str], Node] | None = None
) -> list[Back]:
    """The forgotten memories whose file is back (:class:`Back`), by id: under their id
    (the very memory a tombstone was about: a merge that kept another clone's edit, a
    checkout of an older commit; a node added again later is another memory); under
    their old id, renamed here and then forgotten under the new one; or under a new id,
    as a sync recorded it (:data:`BACK_AS`). With ``read``, a file under a departed id
    whose creation time matches (a batch-mate's does) is read to check its earlier ids
    (:func:`same_lineage`); nothing else is read: a lazy index builds the entries named."""
    forgotten, renamed = departures(records)
    out: dict[tuple[str, str], Back] = {}
    for node_id, tombs in _forgets_of(records).items():
        e = entries.get(node_id)
        hit = next((t for t in reversed(tombs) if e is not None and _same_memory(e, t)), None)
        if e is None or hit is None or not (node_id in forgotten or type(hit.get("created_at")) is float):
            continue
        if _lineage_of(read, e, hit):
            out[(e.id, node_id)] = Back(e, node_id, hit, "same id")
    for old, record in renamed.items():
        final = _final(renamed, old)
        gone, e = forgotten.get(final), entries.get(old)
        if gone is None or gone["time"] < record["time"] or e is None or not _same_memory(e, record):
            continue
        if _lineage_of(read, e, record):
            out[(e.id, final)] = Back(e, final, gone, "old id")
    history, kept = _forgets_of(records, arrivals=False), _kept_copies(records)
    for (node_id, as_id), record in _seen_as(records).items():
        e = entries.get(as_id)
        tomb = next(
            (
                t
                for t in reversed(history.get(node_id, []))
                if t.get("created_at") == record.get("created_at")
            ),
            None,
        )
        same = e is not None and tomb is not None and e.created_at == record.get("created_at")
        if same and e is not None and tomb is not None and (node_id, e.created_at) not in kept:
            out[(e.id, node_id)] = Back(e, node_id, tomb, "new id")
    return [out[key] for key in sorted(out)]


def _seen_as(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(forgotten id, new id) -> the :data:`BACK_AS` record of each copy not kept since."""
    by_id: dict[str, dict[str, dict[str, Any]]] = {}
    for record in records:
        if not usable(record):
            continue
        if record.get("event") == BACK_AS and isinstance(record.get("as"), str):
            by_id.setdefault(record["id"], {})[record["as"]] = record
        elif record.get("event") == RESTORED and record["id"] in by_id:
            kept = record.get("kept")
            if kept is None or kept == record["id"]:
                del by_id[record["id"]]
            else:
                by_id[record["id"]].pop(kept, None)
    return {(i, as_id): r for i, copies in by_id.items() for as_id, r in copies.items()}


def renamed_back(
    entries: Mapping[str, Entry], records: list[dict[str, Any]], read: Callable[[str], Node] | None = None
) -> list[tuple[Entry, str, dict[str, Any]]]:
    """(entry, the id it lives on as, the rename record) of each id renamed in this clone
    whose old file is back beside the memory (a merge kept another clone's edit of the
    old id): the memory the rename record was about (its creation time and, with
    ``read``, its earlier ids), the chain of renames ending at an id held now."""
    _, renamed = departures(records)
    out = []
    for old, record in sorted(renamed.items()):
        final, e = _final(renamed, old), entries.get(old)
        held = final != old and final in entries and e is not None and _same_memory(e, record)
        if held and e is not None and _lineage_of(read, e, record):
            out.append((e, final, record))
    return out


def under_new_ids(
    entries: Iterable[Entry],
    history: Mapping[str, list[dict[str, Any]]],
    read: Callable[[str], Node | None],
    chains: Mapping[str, str] | None = None,
) -> list[tuple[Entry, str, dict[str, Any]]]:
    """(entry, forgotten id, its tombstone) of each of ``entries`` (files a sync or a
    rebuild just took in) that is a forgotten memory under another id: created at the
    very instant a forgotten node was (a tombstone's ``created_at``), and its
    :data:`RENAMED_FROM` holding that node's ids (:func:`same_lineage`) -- the forgotten
    id itself, or one ``chains`` leads to it (renamed in this clone, then forgotten).
    ``history``: id -> its tombstones. Each candidate file is read once, however many
    forgotten nodes share its creation time (a batch's); ``read`` may answer None for a
    file without :data:`RENAMED_FROM` (:func:`renamed_reader` does, without parsing it)."""
    by_time: dict[float, dict[str, dict[str, Any]]] = {}
    for node_id, tombs in history.items():
        for record in tombs:
            made = record.get("created_at")
            if type(made) is float:
                by_time.setdefault(made, {})[node_id] = record
    links = chains or {}
    out: list[tuple[Entry, str, dict[str, Any]]] = []
    for e in entries:
        bucket = by_time.get(e.created_at) if e.created_at is not None else None
        if bucket is None:
            continue
        try:
            node = read(e.path)
        except (OSError, MalformedNodeFileError, UnsafePathError):
            continue
        earlier = earlier_ids(node) if node is not None else []
        for old in dict.fromkeys(earlier):
            for node_id in dict.fromkeys((old, links.get(old, old))):
                tomb = bucket.get(node_id)
                if tomb is None or node_id == e.id:
                    continue
                lineage = [*_history(tomb), node_id]
                if old in lineage and earlier[: earlier.index(old) + 1] == lineage[: lineage.index(old) + 1]:
                    out.append((e, node_id, tomb))
                    break
    return out


def detect(
    log: AppendLog,
    taken: list[Entry],
    read: Callable[[str], Node | None],
    records: list[dict[str, Any]] | None = None,
) -> bool:
    """Record (:data:`BACK_AS`) the forgotten memories among ``taken`` -- files a sync, a
    pick-up of hand edits or a rebuild just took in -- under a new id
    (:func:`under_new_ids`), once each; True when it recorded any. Not a copy a
    person kept. A few files are read first, and the log only when one of them was
    renamed (a pick-up before each MCP call costs one small read, not the whole log)."""
    if not taken:
        return False
    if len(taken) <= 64 and not any(_renamed_file(e, read) for e in taken):
        return False
    records = log.read() if records is None else records
    history, kept = _forgets_of(records, arrivals=False), _kept_copies(records)
    _, renamed = departures(records)
    chains = {old: _final(renamed, old) for old in renamed}
    known = set(_seen_as(records))
    found = [
        (e, node_id, tomb)
        for e, node_id, tomb in under_new_ids(taken, history, read, chains)
        if (node_id, e.id) not in known and (node_id, e.created_at) not in kept
    ]
    record_back_as(log, found, time.time())
    return bool(found)


def renamed_reader(root: str) -> Callable[[str], Node | None]:
    """A ``read`` for :func:`detect`: None for a file whose bytes never mention
    :data:`RENAMED_FROM` (most files; no parse), else the node."""

    def read(rel: str) -> Node | None:
        data, _ = fsops.read_file(root, rel, max_bytes=MAX_FILE_BYTES)
        return decode_node(data, rel) if RENAMED_FROM.encode() in data else None

    return read


def _renamed_file(e: Entry, read: Callable[[str], Node | None]) -> bool:
    try:
        node = read(e.path)
    except (OSError, MalformedNodeFileError, UnsafePathError):
        return False
    return node is not None and bool(earlier_ids(node))


def record_back_as(audit: AppendLog, found: list[tuple[Entry, str, dict[str, Any]]], now: float) -> None:
    """Append a :data:`BACK_AS` record for each of ``found`` (:func:`under_new_ids`), with
    the scope fields of the memory as it is now (a scoped caller lists its own)."""
    if found:
        records = [
            {
                "event": BACK_AS,
                "id": node_id,
                "as": e.id,
                "created_at": e.created_at,
                "time": now,
                **scope_fields(e),
            }
            for e, node_id, _ in found
        ]
        audit.append(records, durable=True)


def visible_to(
    scope: Scope | None, records: list[dict[str, Any]], seen: Callable[[str], bool] | None = None
) -> list[dict[str, Any]]:
    """The records a caller may read: every one for an unscoped handle; for a scoped
    one, those of nodes within its scope (a record from before scopes were recorded
    counts as a node without scope), their ``dangling`` edges cut to the sources
    ``seen(id)`` (the forgetter saw nodes of scopes this caller may not)."""
    if scope is None:
        return records
    out = []
    for r in records:
        if isinstance(r, dict) and scope.admits_fields(
            r.get("agent_scope"), r.get("workspace_scope"), r.get("sensitivity")
        ):
            if isinstance(r.get("dangling"), list):
                r = {**r, "dangling": [d for d in r["dangling"] if seen is not None and _seen_edge(d, seen)]}
            out.append(r)
    return out


def _seen_edge(edge: object, seen: Callable[[str], bool]) -> bool:
    return isinstance(edge, list) and bool(edge) and isinstance(edge[0], str) and seen(edge[0])


def tombstones_only(audit: AppendLog) -> list[dict[str, Any]]:
    """The tombstones (and ``restored`` records) of the audit log: its rename and
    ``back_as`` records left out."""
    return [r for r in audit.read() if r.get("event") not in (RENAMED, BACK_AS)]


def departure_times(audit: AppendLog) -> dict[str, float]:
    """Id -> the last time the memory under each id changed: it was forgotten, swept or
    renamed away, or another memory was renamed onto the id. The accesses of the id
    before then were of another memory, or of the one that left (:mod:`md_cg.access`)."""
    times: dict[str, float] = {}
    for record in audit.read():
        if not usable(record) or record.get("event") in (RESTORED, BACK_AS):
            continue
        ids = [record["id"]]
        if record.get("event") == RENAMED and isinstance(record.get("to"), str):
            ids.append(record["to"])
        for node_id in ids:
            times[node_id] = max(times.get(node_id, 0.0), float(record["time"]))
    return times
