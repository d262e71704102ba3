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

from typing import Any

from .logs import AppendLog
from .visibility import Scope

#: The record a rename leaves: a migration re-run does not bring the old id back.
RENAMED = "renamed"
#: The record of a forgotten (or renamed) id brought back on purpose (a migration with overwrite).
RESTORED = "restored"


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


def forget_times(audit: AppendLog) -> dict[str, float]:
    """Id -> time of the last forget (or sweep) of each id forgotten, whether or not
    a memory holds the id again."""
    return {i: float(r["time"]) for i, r in last_forgets(tombstones_only(audit)).items()}
