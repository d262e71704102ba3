"""The audit log ``.mdcg/audit/``: what left the store, and what came back.

Payload-free records (ids, layer, reason, time; never content) appended by
three writers:

* a **tombstone** per forgotten (``event: "forget"``) or swept (``"sweep"``)
  node -- :mod:`md_cg.forgetting`;
* a :data:`RENAMED` record per rename (``id`` the old id, ``to`` the new
  one) -- :func:`md_cg.editing.rename`;
* a :data:`RESTORED` record per forgotten or renamed id a migration with
  ``overwrite`` wrote again -- :mod:`md_cg.migrate`.

The functions here read those records: which ids are forgotten (health's
``forgotten_returned``, the access counts of an id in use again), which
left the store one way or the other (a migration re-run keeps them out),
and which records a scoped caller may list. The log is per clone (under
``.mdcg/``, git-ignored).

Imports :mod:`md_cg.logs` and :mod:`md_cg.visibility`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .errors import MalformedNodeFileError, UnsafePathError
from .index import Entry
from .logs import AppendLog
from .node import Node
from .visibility import Scope

#: The record a rename leaves: a migration re-run does not bring the old id back.
RENAMED = "renamed"
#: The record of a forgotten (or renamed) id brought back on purpose (a migration with overwrite).
RESTORED = "restored"
#: The frontmatter key a rename adds to the node: its earlier ids, oldest first. It travels
#: with the file (git, a copy), so a clone that never saw the rename can tell the memory.
RENAMED_FROM = "renamed_from"
#: Earlier ids a node keeps in :data:`RENAMED_FROM`.
MAX_RENAMED_FROM = 16


def earlier_ids(node: Node) -> list[str]:
    """The ids ``node`` had before its renames (:data:`RENAMED_FROM`), as far as the file
    tells: a value that is not a list of strings (a hand edit) tells nothing."""
    prior = node.extra.get(RENAMED_FROM)
    return [i for i in prior if isinstance(i, str)] if isinstance(prior, list) else []


def back_again(
    entries: Mapping[str, Entry], forgets: Mapping[str, dict[str, Any]], read: Callable[[str], Node]
) -> list[tuple[Entry, str, dict[str, Any]]]:
    """(entry, forgotten id, its tombstone) of each forgotten memory whose file is back,
    in entry order by id: under its id, created before the forget (a merge that kept
    another clone's edit of it, a checkout of an older commit; a node added again
    later is new), or under another id (:func:`under_new_ids`)."""
    out = []
    for node_id, record in forgets.items():
        e = entries.get(node_id)
        if e is not None and e.created_at is not None and e.created_at < record["time"]:
            out.append((e, node_id, record))
    out += under_new_ids(entries.values(), forgets, read)
    return sorted(out, key=lambda hit: (hit[0].id, hit[1]))


def under_new_ids(
    entries: Iterable[Entry], forgets: Mapping[str, dict[str, Any]], read: Callable[[str], Node]
) -> list[tuple[Entry, str, dict[str, Any]]]:
    """(entry, forgotten id, its tombstone) of each node that is a forgotten memory under
    another id: created at the very instant the forgotten node was (the tombstone's
    ``created_at``), its file written after the forget (a merge brought it), and its
    :data:`RENAMED_FROM` naming the forgotten id (another clone renamed it before the
    forget reached it). Only such candidates are read."""
    by_time: dict[float, list[tuple[str, dict[str, Any]]]] = {}
    for node_id, record in forgets.items():
        made = record.get("created_at")
        if type(made) is float:
            by_time.setdefault(made, []).append((node_id, record))
    out: list[tuple[Entry, str, dict[str, Any]]] = []
    if not by_time:
        return out
    for e in entries:
        for node_id, record in by_time.get(e.created_at, ()) if e.created_at is not None else ():
            if node_id == e.id or e.mtime_ns <= record["time"] * 1e9:
                continue
            try:
                node = read(e.path)
            except (OSError, MalformedNodeFileError, UnsafePathError):
                continue
            if node_id in earlier_ids(node):
                out.append((e, node_id, record))
    return out


def visible_to(scope: Scope | None, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records a caller may read: every one for an unscoped handle; for a scoped
    one, those of nodes within its scope (a record from before scopes were recorded
    counts as a node without scope)."""
    if scope is None:
        return records
    return [
        r
        for r in records
        if scope.admits_fields(r.get("agent_scope"), r.get("workspace_scope"), r.get("sensitivity"))
    ]


def tombstones_only(audit: AppendLog) -> list[dict[str, Any]]:
    """The tombstones (and ``restored`` records) of the audit log: its rename records left out."""
    return [r for r in audit.read() if r.get("event") != RENAMED]


def last_departures(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Id -> the last record of each id that left: forgotten (or swept), or renamed
    (:data:`RENAMED`, ``to`` the new id); one whose id a later :data:`RESTORED`
    record brought back is left out."""
    last: dict[str, dict[str, Any]] = {}
    for record in records:
        if isinstance(record.get("id"), str) and isinstance(record.get("time"), int | float):
            if record.get("event") == RESTORED:
                last.pop(record["id"], None)
            else:
                last[record["id"]] = record
    return last


def last_forgets(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Id -> the last forget (or sweep) tombstone of each id still forgotten: one whose
    id a later ``restored`` record brought back is left out."""
    return last_departures([r for r in records if r.get("event") != RENAMED])


def forget_records(audit: AppendLog) -> dict[str, dict[str, Any]]:
    """Id -> the last forget (or sweep) tombstone of each id forgotten, whether or not a
    memory holds the id again."""
    return last_forgets(tombstones_only(audit))


def departure_times(audit: AppendLog) -> dict[str, float]:
    """Id -> time each id last left this clone's store -- forgotten, swept or renamed away
    -- whether or not a memory holds the id again: the accesses of the id before then
    were of the memory that left (:mod:`md_cg.access`)."""
    return {i: float(r["time"]) for i, r in last_departures(audit.read()).items()}
