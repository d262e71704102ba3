"""Visibility: the one rule that decides whether a caller sees a node.

Every public read of :class:`md_cg.MdCG` goes through :func:`hidden_ids`
or :func:`visible`, so a node is shown or absent the same way everywhere
(get, ids, entries, list, search, covered_neg, neighbours, census, health...).
A hidden node is *absent*: a read by id raises the very error an unknown id
raises, with the same text.

A node is hidden from a caller when

* it has **expired** (``expires_at <= now``), unless ``include_expired``;
* it is **archived** (its file lies under ``archive/``), unless ``include_archived``;
* it is **superseded** (``valid_until <= now``, or another node has a
  ``supersedes`` edge to it -- a live one, not archived or expired, that the
  caller may see: another scope's node never hides one of the caller's) and
  ``include_superseded`` is false -- search's default only; every other read
  shows superseded nodes, marked;
* it is **out of the caller's scope** (:class:`Scope`): a node with an
  ``agent_scope`` is seen only by that agent, one with a ``workspace_scope``
  only in that workspace, and a node more sensitive than the caller's
  ``max_sensitivity`` by nobody. No read option shows an out-of-scope node.

A handle opened without a scope (``MdCG(root)``, the library's trusted
default) sees every scope and sensitivity; expiry, archive and supersession
still apply.

The rule reads only index entries (:class:`md_cg.index.Entry` carries the
fields it needs), never a file, and writes nothing. Only the few entries
that carry a lifecycle field at all (``IndexState.restricted``) are looked
at, and the hidden set is cached until the index changes or the next
expiry falls due.

Imports only :mod:`md_cg.index`, :mod:`md_cg.node` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from .errors import InvalidArgumentError, NodeNotFoundError
from .index import Entry, IndexState
from .node import DEFAULT_SENSITIVITY, MAX_SCOPE_CHARS, SENSITIVITY_LEVELS, Node

_RANK = {name: i for i, name in enumerate(SENSITIVITY_LEVELS)}


def rank(level: object) -> int:
    """The rank of a sensitivity level (absent: the default; an unknown one above all)."""
    return _RANK.get(level if isinstance(level, str) else DEFAULT_SENSITIVITY, len(_RANK))


@dataclass(frozen=True)
class Scope:
    """Who is reading or writing: an agent, a workspace and the most sensitive level it may see.

    ``None`` for ``agent`` (or ``workspace``) means the caller has none: it sees
    only nodes without an ``agent_scope`` (``workspace_scope``). Set by the
    trusted caller (the program that opens the store, the MCP server's
    command line), never taken from a tool argument.
    """

    agent: str | None = None
    workspace: str | None = None
    max_sensitivity: str = DEFAULT_SENSITIVITY

    def __post_init__(self) -> None:
        for name in ("agent", "workspace"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, str) or not value.strip() or len(value) > MAX_SCOPE_CHARS
            ):
                raise InvalidArgumentError(
                    f"scope {name} must be a non-empty string of at most {MAX_SCOPE_CHARS} characters "
                    f"or None, got {value!r}",
                    name=name,
                    value=value,
                )
        if self.max_sensitivity not in _RANK:
            raise InvalidArgumentError(
                f"max_sensitivity must be one of {', '.join(SENSITIVITY_LEVELS)}, "
                f"got {self.max_sensitivity!r}",
                name="max_sensitivity",
                value=self.max_sensitivity,
            )

    def admits(self, entry: Entry) -> bool:
        """True when ``entry`` lies within this scope (agent, workspace, sensitivity)."""
        return self.admits_fields(entry.agent_scope, entry.workspace_scope, entry.sensitivity)

    def admits_fields(self, agent: object, workspace: object, sensitivity: object) -> bool:
        """:meth:`admits` of a node's scope fields as a record keeps them (a tombstone)."""
        if agent is not None and agent != self.agent:
            return False
        if workspace is not None and workspace != self.workspace:
            return False
        return rank(sensitivity) <= _RANK[self.max_sensitivity]


@dataclass(frozen=True)
class Show:
    """Which hidden kinds a read shows anyway (out-of-scope nodes are never shown)."""

    include_expired: bool = False
    include_archived: bool = False
    include_superseded: bool = True


#: The default of every read but search.
DEFAULT = Show()
#: Search's default: superseded nodes are left out too.
SEARCH = Show(include_superseded=False)


def is_expired(entry: Entry, now: float) -> bool:
    """True when ``entry`` has an expiry at or before ``now`` and is not ``long``.

    An expiry counts on a temporary memory and on one with no tier (an expiry with
    no tier asks for the temp tier: :func:`md_cg.retention.imply_tier`); on a long
    one (a hand edit) it is void, so a node is hidden by its expiry exactly when
    the sweep would remove it (:func:`md_cg.retention.expired_ids`). A memory a git
    merge left in conflict never expires until it is settled: its timer is one
    side's, and the other side's text may be lasting (review round 2, session 25)."""
    return (
        entry.expires_at is not None
        and entry.expires_at <= now
        and entry.retention_tier != "long"
        and not entry.conflict
    )


def successors(state: IndexState, node_id: str, scope: Scope | None, now: float) -> list[str]:
    """The ids of the nodes that supersede ``node_id`` and count for this caller, sorted:
    live (not archived, not expired) and within ``scope``. A node out of the caller's
    scope never hides one the caller sees, and a successor that expired or was put
    away no longer stands in for the fact it replaced."""
    if node_id not in state.superseded:
        return []
    out = []
    for source, etype in state.reverse.get(node_id, ()):
        e = state.entries.get(source) if etype == "supersedes" and source != node_id else None
        if e is None or e.archived or is_expired(e, now) or (scope is not None and not scope.admits(e)):
            continue
        out.append(source)
    return sorted(out)


def linked_successors(state: IndexState, node_id: str, scope: Scope | None) -> list[str]:
    """The ids of every node within ``scope`` with a ``supersedes`` edge to ``node_id``,
    archived or expired ones too, sorted: what a reopen unlinks. An archived successor
    does not hide the node now (:func:`successors`), but unarchived it would again."""
    out = set()
    for source, etype in state.reverse.get(node_id, ()):
        e = state.entries.get(source) if etype == "supersedes" and source != node_id else None
        if e is not None and (scope is None or scope.admits(e)):
            out.add(source)
    return sorted(out)


def is_superseded(state: IndexState, entry: Entry, now: float, scope: Scope | None = None) -> bool:
    """True when ``entry`` stopped being valid or a node that counts for the caller
    supersedes it (:func:`successors`)."""
    if entry.valid_until is not None and entry.valid_until <= now:
        return True
    return bool(successors(state, entry.id, scope, now))


def dedup_current(state: IndexState, entry: Entry, scope: Scope | None, now: float) -> bool:
    """Whether ``entry`` is a current memory to deduplicate against (``identical``,
    ``add_unique``, organize): its ``valid_until`` has not passed and no successor the
    caller sees (:func:`successors`) supersedes it for every reader of it. A successor
    :func:`narrower` than the memory (an agent's private correction of a shared fact)
    hides it only from some of its readers; for the others it is still the fact, and
    the same text stored again would be a second copy of it."""
    if entry.valid_until is not None and entry.valid_until <= now:
        return False
    for source in successors(state, entry.id, scope, now):
        newer = state.entries.get(source)
        if newer is not None and not narrower(newer, entry):
            return False
    return True


def superseded_by(state: IndexState, node_id: str, scope: Scope | None = None) -> str | None:
    """The id of the node that supersedes ``node_id`` for the caller (the smallest, if
    several: :func:`successors`), else None."""
    found = successors(state, node_id, scope, time.time())
    return found[0] if found else None


def left_closed(
    state: IndexState,
    node_ids: Iterable[str],
    going: Collection[str],
    now: float,
    scope: Scope | None = None,
) -> dict[str, tuple[str, ...]]:
    """For each of ``node_ids`` (removed together with every id of ``going``): the facts
    it supersedes whose ``valid_until`` has passed and that no live node outside
    ``going`` supersedes -- once it goes they stay closed (hidden as superseded) with
    no current version, until reopened (``update(id, valid_until=None)``). Only facts
    the caller sees (``scope``) are named. Each fact's successors are looked at once,
    however many of the removed nodes supersede it."""
    going = set(going)
    orphaned: dict[str, bool] = {}
    out: dict[str, tuple[str, ...]] = {}
    for node_id in node_ids:
        entry = state.entries.get(node_id)
        found = set()
        for target, etype in entry.edges if entry is not None else ():
            fact = state.entries.get(target) if etype == "supersedes" and target not in going else None
            if fact is None or fact.valid_until is None or fact.valid_until > now:
                continue
            if scope is not None and not scope.admits(fact):
                continue
            if target not in orphaned:
                orphaned[target] = all(s in going for s in successors(state, target, None, now))
            if orphaned[target]:
                found.add(target)
        out[node_id] = tuple(sorted(found))
    return out


def narrower(new: Entry | Node, old: Entry | Node) -> bool:
    """Whether some reader of ``old`` may not read ``new`` (an agent or workspace set
    where ``old`` had none or another, or more sensitive): a successor that would hide
    the fact from them, or an edit that would take a shared memory away from them."""
    if new.agent_scope is not None and new.agent_scope != old.agent_scope:
        return True
    if new.workspace_scope is not None and new.workspace_scope != old.workspace_scope:
        return True
    return rank(new.sensitivity) > rank(old.sensitivity)


def reason(state: IndexState, entry: Entry, scope: Scope | None, show: Show, now: float) -> str | None:
    """Why ``entry`` is hidden (``scope``, ``archived``, ``expired``, ``superseded``), or None."""
    if scope is not None and not scope.admits(entry):
        return "scope"
    if entry.archived and not show.include_archived:
        return "archived"
    if not show.include_expired and is_expired(entry, now):
        return "expired"
    if not show.include_superseded and is_superseded(state, entry, now, scope):
        return "superseded"
    return None


def not_found(state: IndexState, entry: Entry, scope: Scope | None, show: Show) -> NodeNotFoundError:
    """The error of reading ``entry`` when the caller does not see it: an archived or
    expired node says so (and how to get it back); any other, the unknown id's error."""
    now = time.time()
    why = reason(state, entry, scope, show, now)
    if why == "archived":
        return NodeNotFoundError(entry.id, "it is archived: unarchive it to use it", hidden=why)
    if why == "expired" and entry.expires_at is not None:
        return expired_error(entry.id, entry.expires_at)
    return NodeNotFoundError(entry.id)


#: What an expired memory's write error says to do (library, CLI and MCP alike).
RENEW_HINT = "renew it to change it: update it with retention_tier='long' or a later expires_at"


def refuse_write(
    entry: Entry, now: float, *, archived_ok: bool = False, expired_ok: bool = False
) -> NodeNotFoundError | None:
    """The error of a write (update, modify, edit, rename, move, supersede, reopen) to
    ``entry`` when it is hidden from every default read: archived, or expired (not yet
    swept) -- a write would change a memory no read serves, and the caller would be told
    the id is absent right after; None when it may be written. The errors are those of
    :func:`not_found`, the expired one saying how to renew it (``expired_ok``: the write
    is such a renewal; ``archived_ok``: a write the caller asked for anyway). The scope
    is checked apart (an out-of-scope node is an unknown id)."""
    if entry.archived and not archived_ok:
        return NodeNotFoundError(entry.id, "it is archived: unarchive it to use it", hidden="archived")
    if not expired_ok and is_expired(entry, now) and entry.expires_at is not None:
        return expired_error(entry.id, entry.expires_at, RENEW_HINT)
    return None


def expired_error(node_id: str, expires_at: float, fix: str = "") -> NodeNotFoundError:
    """The error of a temporary memory that expired at ``expires_at`` (``fix``: what to do)."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
    return NodeNotFoundError(
        node_id, f"it is a temporary memory that expired at {when}", hidden="expired", fix=fix
    )


def scope_fields(entry: Entry | Node) -> dict[str, str]:
    """The scope fields of a node for an audit record about it (only those set): a
    scoped handle lists only the records of nodes it could see
    (:func:`md_cg.audit.visible_to`)."""
    fields = {
        "agent_scope": entry.agent_scope,
        "workspace_scope": entry.workspace_scope,
        "sensitivity": entry.sensitivity,
    }
    return {k: v for k, v in fields.items() if v is not None}


def reads_normal(scope: Scope | None) -> bool:
    """Whether the caller may read ``normal`` memories (every node without a lifecycle
    field is one): a handle limited to ``public`` may not, and every node is then a
    candidate for hiding, not only the restricted ones."""
    return scope is None or _RANK[scope.max_sensitivity] >= _RANK[DEFAULT_SENSITIVITY]


def out_of_scope(state: IndexState, scope: Scope | None) -> set[str]:
    """The ids of ``state`` outside the caller's scope."""
    if scope is None:
        return set()
    pool = state.restricted if reads_normal(scope) else state.entries.keys()
    return {i for i in pool if not scope.admits(state.entries[i])}


def visible(state: IndexState, entry: Entry, scope: Scope | None, show: Show = DEFAULT) -> bool:
    """True when the caller sees ``entry`` now."""
    if (
        not entry.restricted
        and (show.include_superseded or entry.id not in state.superseded)
        and reads_normal(scope)
    ):
        return True
    return reason(state, entry, scope, show, time.time()) is None


class Filter:
    """The hidden ids of one state for one scope, cached (see the module docstring)."""

    def __init__(self, scope: Scope | None) -> None:
        self.scope = scope
        self._cache: dict[Show, tuple[int, float, frozenset[str]]] = {}

    def hidden(self, state: IndexState, show: Show = DEFAULT) -> frozenset[str]:
        """Ids in ``state`` the caller does not see now."""
        now = time.time()
        cached = self._cache.get(show)
        if cached is not None and cached[0] == state.generation and now < cached[1]:
            return cached[2]
        out: set[str] = set()
        due = math.inf  # the next moment an entry's visibility changes by time alone
        entries = state.entries
        candidates: Iterable[str] = state.restricted
        if not reads_normal(self.scope):
            candidates = state.entries.keys()
        elif not show.include_superseded:
            candidates = state.restricted | state.superseded
        for node_id in candidates:
            e = entries.get(node_id)
            if e is None:
                continue
            if reason(state, e, self.scope, show, now) is not None:
                out.add(node_id)
            for t in (e.expires_at, e.valid_until):
                if t is not None and t > now:
                    due = min(due, t)
        hidden = frozenset(out)
        self._cache[show] = (state.generation, due, hidden)
        return hidden

    def sees(self, state: IndexState, node_id: str, show: Show = DEFAULT) -> bool:
        """True when ``node_id`` is indexed and the caller sees it."""
        e = state.entries.get(node_id)
        return e is not None and visible(state, e, self.scope, show)
