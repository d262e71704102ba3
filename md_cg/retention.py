"""Retention on the write path: the decision, its log, the sweep and supersession.

Every write that creates or re-decides a node (``add``, ``add_many`` --
and so migration and the MCP server --, ``apply_changes``, ``update`` of
the body or ``temporal``) passes the node through :meth:`Retention.decide`,
which calls the one decision function :func:`md_cg.temporal.decide_retention`
and sets ``retention_tier``, ``expires_at`` and ``retention_reason``. A tier
the caller gave (``add(..., tier=...)`` or ``node.retention_tier``) wins.

Each decision is appended to the decision log ``.mdcg/retention/`` with its
rule code (who decided), apart from the reason stored on the node (why it is
kept): ``{"id", "rule", "tier", "expires_at", "temporal", "marker", "at"}``.

The default (rule ``default_long``: no kind, no one-off marker) writes no
retention field: the node stays unassigned, which reads as long.

Re-deciding a node that already has an expiry keeps that expiry while it is
still ahead (an edit does not extend a temporary memory's life, and
re-importing the same node leaves its file unchanged); a replacing ``add`` of
other text, or an expiry already past, gets now + TTL (:func:`kept_expiry`).

The TTL is ``MdCG(ttl_seconds=...)``, else ``ttl_seconds`` in the store's
``.mdcg/retention.json`` (``{"ttl_seconds": 86400}``), else 7 days; at most
100 years (:data:`md_cg.temporal.MAX_TTL_SECONDS`, :func:`check_ttl`).

The sweep itself is :meth:`md_cg.MdCG.sweep`: :func:`expired_ids` lists, and
:func:`md_cg.forgetting.forget_many` removes with the :func:`sweepable` check
and only a memory's sole file (:func:`md_cg.forgetting.sole_copies`).

Imports the engine, temporal, visibility and the modules below them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from . import fsops, paths, temporal, visibility
from .engine import Engine, dropped_file
from .errors import InvalidArgumentError, NodeNotFoundError, UnsafePathError
from .index import Entry
from .logs import AppendLog
from .node import DEFAULT_SENSITIVITY, Edge, Node, finite, quantise_instant
from .reports import Finding
from .script import short_repr

#: The decision log, ``.mdcg/retention/``.
DECISION_LOG = "retention"
#: The per-store retention settings, ``.mdcg/retention.json`` (tracked by git).
CONFIG_FILE = "retention.json"
#: The layer whose memories are never made temporary by an automatic decision.
ANCHOR_LAYER = "anchor"
#: The reason tombstones of swept nodes carry.
SWEEP_REASON = "expired"
#: What the sweep's look at an expired memory's file found when it leaves the memory
#: (:func:`md_cg.forgetting.sole_copies`, ``SweepReport.kept``): no file at the path the
#: index has (moved or removed by hand since the last sync), a file that no longer reads
#: as this memory (another id, unreadable), a file that no longer expires (an edit), or no
#: entry any more (another process forgot, deleted or renamed the id meanwhile).
GONE, CHANGED, RENEWED, UNINDEXED = "gone", "changed", "renewed", "unindexed"


@dataclass(frozen=True)
class SweepReport:
    """What :meth:`md_cg.MdCG.sweep` found and did.

    ``expired``: the temporary nodes past their expiry (in the caller's
    scope); ``removed``: those removed (empty on a dry run); ``left_closed``:
    the facts a removed node superseded that now stay closed with no current
    version (as :attr:`md_cg.reports.Deleted.left_closed`; reopen one with
    ``update(id, valid_until=None)``); ``kept``: ``(id, why)`` of each expired
    node the sweep leaves (would leave, on a dry run) because other files hold
    its id too -- a copy of another tier, say --, ``why`` naming them: only a
    memory's sole file is swept; or because its file is not the expired memory
    the index has any more (moved -- ``why`` names where to --, removed or edited
    by hand since the last sync). Every id of ``expired`` is in exactly one of
    ``removed`` and ``kept``.
    """

    expired: tuple[str, ...]
    removed: tuple[str, ...]
    dry_run: bool
    left_closed: tuple[str, ...] = ()
    kept: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "expired": list(self.expired),
            "removed": list(self.removed),
            "dry_run": self.dry_run,
            "left_closed": list(self.left_closed),
            "kept": [{"id": i, "reason": why} for i, why in self.kept],
        }


def check_ttl(value: object, name: str = "ttl_seconds") -> float:
    """``value`` as a positive number of seconds up to :data:`md_cg.temporal.MAX_TTL_SECONDS`
    (100 years: now + TTL must be a date a file can write), or InvalidArgumentError naming ``name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not finite(value)
        or not 0 < value <= temporal.MAX_TTL_SECONDS
    ):
        raise InvalidArgumentError(
            f"{name} must be a positive number of seconds, at most {temporal.MAX_TTL_TEXT}, "
            f"got {short_repr(value)}",
            name=name,
        )
    return float(value)


def store_ttl(root: str) -> float:
    """The TTL from ``<root>/.mdcg/retention.json``, else the default (7 days).

    Never follows a symlink (UnsafePathError); a file that is not JSON or
    holds a bad value raises InvalidArgumentError naming the file.
    """
    rel = paths.meta(CONFIG_FILE)
    try:
        data = fsops.read_small(root, rel, limit=1 << 16)
    except OSError as exc:
        raise InvalidArgumentError(f"{root}/{rel}: {exc.strerror or exc}", name="ttl_seconds") from None
    if data is None:
        return temporal.DEFAULT_TTL_SECONDS
    try:
        config = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        line = fsops.conflict_line(data)
        why = f"not valid JSON ({exc})" if line is None else _CONFLICTED.format(line=line)
        raise InvalidArgumentError(f"{root}/{rel}: {why}", name="ttl_seconds") from None
    if (twice := fsops.duplicate_key_problem(data)) is not None:  # last-wins would pick a TTL
        raise InvalidArgumentError(f"{root}/{rel}: {twice}", name="ttl_seconds")
    if not isinstance(config, dict) or "ttl_seconds" not in config:
        return temporal.DEFAULT_TTL_SECONDS
    return check_ttl(config["ttl_seconds"], f"ttl_seconds in {root}/{rel}")


#: What a settings file that holds git's conflict markers is said to be.
_CONFLICTED = "unresolved git merge conflict (conflict marker at line {line}); resolve it and save"


def settings_problems(root: str) -> list[str]:
    """What is wrong with the store's retention files (``.mdcg/retention.json``, whose
    problem stops every write that decides, and ``.mdcg/retention_markers.json``,
    whose problem makes no automatic decision temporary), for ``health()``."""
    return [problem for _, problem in settings_files(root)]


def settings_files(root: str) -> list[tuple[str, str]]:
    """:func:`settings_problems`, each with the file's path below the root (for ``sync()``)."""
    out = []
    try:
        store_ttl(root)
    except (InvalidArgumentError, UnsafePathError, OSError) as exc:
        out.append((paths.meta(CONFIG_FILE), f"{exc}; writes that decide retention fail until it is fixed"))
    markers = temporal.load_store_markers(root)
    if markers.problem:
        why = f"{markers.problem}; no memory is made temporary automatically until it is fixed"
        out.append((paths.meta(temporal.STORE_FILE), why))
    return out


def imply_tier(node: Node) -> None:
    """A new node given an ``expires_at`` and no tier asks for the temp tier (the expiry
    would otherwise be dropped by the decision: ``add(expires_at=t)`` never expired).
    The write path -- the verbatim ``add_many(stamp=False)`` too -- and the checks of
    what a write should have stored all apply it (the read path reads such a file the
    same way: :func:`md_cg.visibility.is_expired`)."""
    if node.retention_tier is None and node.expires_at is not None:
        node.retention_tier = "temp"


def was_lasting(held: Entry | None, changes: Mapping[str, Any]) -> bool:
    """Whether an ``update`` with ``changes`` edits a memory that was kept (``held``, its
    entry: long, or no tier and no expiry) without asking for a one-off: its new text
    alone then never makes it temporary (:func:`md_cg.temporal.kept_on_edit`). A
    ``temporal`` given in the same update is the caller's word and decides as in ``add``."""
    return (
        held is not None
        and held.retention_tier != "temp"
        and held.expires_at is None
        and "temporal" not in changes
    )


def kept_expiry(held: Entry | None, now: float, same: Callable[[Entry], bool] | None = None) -> float | None:
    """The expiry a write keeps from the memory it replaces (``held``, its entry): the
    stored one while still ahead of ``now`` -- an edit does not extend a temporary
    memory's life -- and, for a replacing ``add`` (``same``: whether the stored file
    holds the same text), only for the same text (a re-import leaves its file as it
    is); else None: new content is new memory, and an expiry already past never
    carries over (the node would be written expired, hidden at once)."""
    if held is None or held.expires_at is None or held.expires_at <= now:
        return None
    return held.expires_at if same is None or same(held) else None


def stamp_scope(node: Node, scope: visibility.Scope | None, *, fill: bool = True) -> None:
    """Put ``node`` in the writer's scope; refuse a node meant for another scope.

    A handle with a scope writes its agent and workspace into new nodes that
    have none (``fill``), and, when it may not read ``normal`` memories, its
    own sensitivity into one that has none; a node naming another agent or
    workspace, or more sensitive than the handle may read, raises
    InvalidArgumentError (it could never be read back through this handle).
    ``fill=False`` (an update of a stored node) only checks: a shared memory
    an agent edits stays shared.
    """
    if scope is None:
        return
    if fill and node.sensitivity is None and not visibility.reads_normal(scope):
        node.sensitivity = scope.max_sensitivity
    for field, mine in (("agent_scope", scope.agent), ("workspace_scope", scope.workspace)):
        have = getattr(node, field)
        if have is None:
            if fill:
                setattr(node, field, mine)
        elif have != mine:
            raise InvalidArgumentError(
                f"node {node.id!r}: {field} {have!r} is outside this store handle's scope ({mine!r})",
                name=field,
                value=have,
            )
    level = node.sensitivity or DEFAULT_SENSITIVITY
    if visibility.rank(level) > visibility.rank(scope.max_sensitivity):
        raise InvalidArgumentError(
            f"node {node.id!r}: sensitivity {level!r} is above this store handle's "
            f"max_sensitivity {scope.max_sensitivity!r}",
            name="sensitivity",
            value=level,
        )


class Retention:
    """One store handle's retention settings, markers and decision log."""

    def __init__(self, root: str, ttl_seconds: float | None, log: AppendLog) -> None:
        self.root = root
        self.ttl = check_ttl(ttl_seconds) if ttl_seconds is not None else store_ttl(root)
        self.log = log
        self._markers: temporal.Markers | None = None

    @property
    def markers(self) -> temporal.Markers:
        """The shipped markers plus the store's own (loaded once per handle)."""
        if self._markers is None:
            self._markers = temporal.load_store_markers(self.root)
        return self._markers

    def decide(
        self,
        node: Node,
        *,
        now: float,
        kept: float | None,
        explicit: bool,
        keep: bool = False,
        lasting: bool = False,
    ) -> temporal.RetentionDecision:
        """Decide ``node``'s tier and set its retention fields (see the module docstring).

        ``explicit``: the caller gave ``node.retention_tier`` (an ``expires_at`` on
        the node is then the caller's too, and is kept). ``kept``: the expiry of the
        memory this write replaces when it should last no longer (an edit, or a
        re-import of the same text: :func:`kept_expiry`); used only while still
        ahead of ``now``, else a temporary node gets ``now`` + the TTL. ``keep``:
        never made temporary unless asked (as in ``anchor/``): the node stands in
        for facts it superseded, which would stay hidden once it went. ``lasting``: an
        edit of a memory that was kept (:func:`temporal.kept_on_edit`): its new text alone
        never makes it temporary.
        """
        d = temporal.decide_retention(
            text=node.body,
            temporal=node.temporal,
            tier=node.retention_tier if explicit else None,
            now=now,
            ttl_seconds=self.ttl,
            markers=self.markers,
            protected=keep or node.layer == ANCHOR_LAYER,
        )
        if lasting and not explicit:
            d = temporal.kept_on_edit(d)
        if d.rule == "default_long":
            # No evidence either way: the node stays unassigned (absent = long), so a
            # plain note is stored as written; the decision log still has the rule.
            node.retention_tier = node.expires_at = node.retention_reason = None
            return d
        node.retention_tier = d.tier
        if d.tier != "temp":
            node.expires_at = None
        elif not (explicit and node.expires_at is not None):
            node.expires_at = kept if kept is not None and kept > now else d.expires_at
            if node.expires_at is not None:
                node.expires_at = quantise_instant(node.expires_at)  # the grid the files store
        if not (explicit and node.retention_reason):
            node.retention_reason = d.reason
        return d

    def record(self, decided: Iterable[tuple[Node, temporal.RetentionDecision]], now: float) -> None:
        """Append one decision-log record per decision (after the write landed)."""
        records = [
            {
                "id": node.id,
                "rule": d.rule,
                "tier": d.tier,
                "expires_at": node.expires_at,
                "temporal": d.temporal,
                "marker": d.marker,
                "at": now,
            }
            for node, d in decided
        ]
        if records:
            self.log.append(records, landed=True)


def expired_ids(engine: Engine, scope: visibility.Scope | None, now: float) -> list[str]:
    """Ids the sweep removes: past their expiry and not long (so hidden from every
    read: :func:`visibility.is_expired`), not archived, in ``scope``."""
    state = engine.state
    out = []
    for node_id in state.restricted:
        e = state.entries.get(node_id)
        if e is not None and _sweepable(e, scope, now):
            out.append(node_id)
    return sorted(out)


def expired_unarchived(e: Entry, now: float) -> bool:
    """Past its expiry and not archived: what the sweep removes (:func:`visibility.is_expired`
    never holds for a long one), unless another file holds its id."""
    return visibility.is_expired(e, now) and not e.archived


def expired_findings(
    entries: Iterable[Entry], copies: Mapping[str, str], left: Mapping[str, str] | None = None
) -> list[Finding]:
    """An ``expired`` health finding for each of ``entries`` (:func:`expired_unarchived`),
    saying what the sweep does with it: removes it, keeps it while other files hold its
    id (``copies``: id -> those files, as :func:`md_cg.forgetting.other_copies` names them),
    or leaves it for what its look at the file found (``left``: id -> :data:`GONE`, ...;
    a file gone that ``copies`` finds elsewhere was moved there). (Before session 34 one it
    keeps said "a sweep removes it": review rB; before session 35 one whose file was moved
    by hand said other files held it, beside a ``missing_file`` of the same path: rH.) The
    advice comes before the files: MCP clips a detail at 160 characters."""
    left = left or {}
    out = []
    for e in entries:
        tier = "temporary" if e.retention_tier == "temp" else "no tier, an expiry: temporary"
        out.append(
            Finding(
                "expired",
                f"hidden from reads since its expiry ({tier}); {_swept(e, copies, left)}",
                e.path,
                e.id,
            )
        )
    return out


def _swept(e: Entry, copies: Mapping[str, str], left: Mapping[str, str]) -> str:
    """What the sweep does with the expired ``e`` (:func:`expired_findings`)."""
    kind, where = left.get(e.id), copies.get(e.id)
    if kind == GONE:
        if where is None:
            return "its file is gone (moved or removed by hand): the sweep removes nothing; run `mdcg sync`"
        return (
            "kept by the sweep: its file was moved or removed by hand; run `mdcg sync`, then sweep again "
            f"(this id is now in: {where})"
        )
    if kind == CHANGED:
        return (
            "kept by the sweep: its file was changed by hand (it no longer reads as this memory); "
            "run `mdcg sync`"
        )
    if kind == RENEWED:
        return "kept by the sweep: its file no longer expires (edited by hand); run `mdcg sync`"
    if where is not None:
        return (
            "kept by the sweep: remove the copy of its id you do not want, then sync "
            f"(other files holding it: {where})"
        )
    return "a sweep removes it (`mdcg sweep`, sweep())"


def _sweepable(e: Entry, scope: visibility.Scope | None, now: float) -> bool:
    # temp, or no tier: never a long one, which no read hides
    return expired_unarchived(e, now) and (scope is None or scope.admits(e))


def sweepable(scope: visibility.Scope | None) -> Callable[[Entry], bool]:
    """The sweep's check, made again under the locks (a node renewed since it was listed is kept)."""
    return lambda e: _sweepable(e, scope, time.time())


def supersede(
    engine: Engine,
    old_id: str,
    new_id: str,
    reason: str,
    check: Any,
    *,
    durable: bool | None = None,
    scope: visibility.Scope | None = None,
) -> None:
    """Mark ``old_id`` superseded by ``new_id`` (see :meth:`md_cg.MdCG.supersede`).

    Refused, with nothing written: an archived or expired node (either side), a
    temporary ``new_id`` (expired or not: once it goes the old fact would stay
    hidden), a ``new_id`` some reader of ``old_id`` may not see (a narrower
    scope or a higher sensitivity: a shared fact closed by one agent's private
    note), and a ``new_id`` that is itself superseded -- by ``old_id`` that
    would be a cycle that hides both, by another node it would hide the old
    fact behind a stale one. Checked under both nodes' locks; one commit writes both."""
    if old_id == new_id:
        raise InvalidArgumentError(f"node {old_id!r} cannot supersede itself", name="new_id", value=new_id)
    for node_id in (old_id, new_id):
        if node_id not in engine.state.entries:
            # one whose file a person moved or deleted (a read dropped it): says so, as every write does
            raise dropped_file(engine, node_id, named=False) or NodeNotFoundError(node_id)
    now = time.time()

    def usable(entry: Entry) -> None:
        check(entry)
        refused = visibility.refuse_write(entry, now)
        if refused is not None:
            raise refused

    def link(node: Node) -> None:
        entry = engine.state.entries[new_id]
        if visibility.narrower(entry, engine.state.entries[old_id]):
            raise InvalidArgumentError(
                f"node {new_id!r} is seen by fewer readers than {old_id!r} (another agent or "
                f"workspace, or more sensitive): superseding would hide {old_id!r} from readers "
                "who cannot see its successor",
                name="new_id",
                value=new_id,
            )
        if entry.retention_tier == "temp" or visibility.is_expired(entry, now):
            # It goes when it expires, and the fact it replaced would stay hidden for good.
            raise InvalidArgumentError(
                f"node {new_id!r} is a temporary memory (it expires): superseding a memory by it would "
                "hide both once it goes; keep it first (update it with tier long)",
                name="new_id",
                value=new_id,
            )
        if visibility.is_superseded(engine.state, engine.state.entries[new_id], now, scope):
            by = visibility.superseded_by(engine.state, new_id, scope)
            raise InvalidArgumentError(
                f"node {new_id!r} is itself superseded"
                + (f" (by {by!r})" if by else " (its valid_until has passed)")
                + ": supersede by the current one",
                name="new_id",
                value=new_id,
            )
        if not any(e.target == old_id and e.type == "supersedes" for e in node.edges):
            extra = {"reason": reason} if reason else {}
            node.edges.append(Edge(target=old_id, type="supersedes", extra=extra))

    def close(node: Node) -> None:
        if node.valid_until is None or node.valid_until > now:
            node.valid_until = now

    engine.modify_many({new_id: link, old_id: close}, durable=durable, check=usable)


def ids_of(ids: str | Iterable[str], name: str = "ids") -> list[str]:
    """A list of ids from one id or a sequence of them (a bare string is one id: never its
    characters); bytes are refused (InvalidArgumentError naming ``name``)."""
    if isinstance(ids, str):
        return [ids]
    if isinstance(ids, bytes | bytearray | memoryview) or not isinstance(ids, Iterable):
        raise InvalidArgumentError(f"{name} must be a node id or ids, got {ids!r}", name=name, value=ids)
    out = list(ids)
    bad = [i for i in out if not isinstance(i, str)]
    if bad:
        raise InvalidArgumentError(f"{name} must be node ids (strings), got {bad[0]!r}", name=name)
    return out


def nodes_of(nodes: Iterable[Any], name: str = "nodes") -> list[Any]:
    """A batch of nodes as a list; a bare string, bytes or one node is refused
    (InvalidArgumentError naming ``name``): ``add_many("text")`` would add each character."""
    if isinstance(nodes, str | bytes | bytearray | memoryview) or not isinstance(nodes, Iterable):
        raise InvalidArgumentError(
            f"{name} must be a list of Node objects, got {type(nodes).__name__}"
            + (" (one node: use add)" if type(nodes).__name__ == "Node" else ""),
            name=name,
            value=nodes,
        )
    return list(nodes)
