"""The :class:`MdCG` facade: the public API of one memory store.

``MdCG`` checks arguments and delegates: reads and writes to the
:class:`~md_cg.engine.Engine`, maintenance to :mod:`md_cg.maintenance`, the
cognitive loop to :mod:`md_cg.loop`, search to :mod:`md_cg.search`. The
``.md`` files are canonical; everything under ``.mdcg/`` is derived or local
operational state (docs/architecture.md says what writes when).
"""

from __future__ import annotations

import functools
import os
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from . import (
    access,
    audit,
    editing,
    forgetting,
    fsops,
    index,
    loop,
    maintenance,
    paths,
    reports,
    retention,
    synonyms,
    temporal,
    views,
    visibility,
)
from . import search as search_mod
from .engine import Engine, check_not_nested, ignore_state, take_scope, taken_back
from .engine import remove as remove_node
from .errors import (
    InvalidArgumentError,
    InvalidNodeError,
    NodeHasIncomingEdgesError,
    NodeNotFoundError,
)
from .index import Entry
from .logs import AppendLog
from .node import Node, check_id, check_layer, finite, refuse_naive_times, validate
from .reports import Deleted, Finding, HealthReport, MaintenanceReport, SyncReport
from .retention import SweepReport
from .script import short_repr
from .search import SearchResult
from .synonyms import SynonymTable
from .visibility import Scope


def new_id(prefix: str = "n") -> str:
    """A fresh random node id such as ``n_3f9a2c1b7d0e``."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def _check_options(
    create: object,
    durable: object,
    read_only: object,
    refresh_interval: object,
    lock_timeout: object,
    auto_compact: object,
) -> None:
    """Refuse an option of :class:`MdCG` of the wrong kind when it is given, not at the
    first call that uses it (``refresh_interval="x"`` failed in ``get``)."""
    for name, value in (("create", create), ("durable", durable), ("read_only", read_only)):
        if not isinstance(value, bool):
            raise InvalidArgumentError(
                f"{name} must be True or False, got {short_repr(value)}", name=name, value=value
            )
    for name, value, floor in (
        ("refresh_interval", refresh_interval, 0.0),
        ("lock_timeout", lock_timeout, 0.0),
        ("auto_compact", auto_compact, 1),
    ):
        if value is None and name != "lock_timeout":
            continue
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and finite(value)
            and value >= floor
            and (name != "auto_compact" or isinstance(value, int))
        )
        if not ok:
            kind = "a whole number >= 1" if name == "auto_compact" else "a finite number of seconds >= 0"
            none = "" if name == "lock_timeout" else " or None"
            raise InvalidArgumentError(
                f"{name} must be {kind}{none}, got {short_repr(value)}", name=name, value=value
            )


class MdCG(views.Reads, views.Lifecycle, views.Recall):
    """A memory store rooted at a folder of Markdown files.

    ``MdCG(root)`` opens (and, with ``create=True``, creates) a store.
    Opening never writes; use it as a context manager, or call :meth:`close`.

    Parameters: ``create`` makes a missing folder; ``durable`` fsyncs every
    write (each writing call takes ``durable=`` too); ``refresh_interval``
    is the seconds between looks at other processes' changes on reads (``0``:
    every read, ``None``: only on :meth:`refresh`); ``lock_timeout`` the
    seconds to wait for a lock; ``read_only=True`` guarantees that nothing at
    all is written (writes raise ReadOnlyStoreError, searches record no
    access); ``auto_compact`` makes :meth:`close` write a snapshot when there
    is none yet or when this process wrote and at least that many node
    changes were logged since the snapshot (``None``: never).

    ``scope`` (:class:`~md_cg.visibility.Scope`) is the caller's agent,
    workspace and highest sensitivity: every read treats a node outside it
    as absent, and every write lands in it (``None``: the trusted default,
    which sees every scope). ``ttl_seconds`` is how long a temporary memory
    lives (default: ``.mdcg/retention.json``, else 7 days; see
    docs/retention.md).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = True,
        durable: bool = False,
        refresh_interval: float | None = 1.0,
        lock_timeout: float = 30.0,
        read_only: bool = False,
        auto_compact: int | None = 10_000,
        scope: Scope | None = None,
        ttl_seconds: float | None = None,
    ) -> None:
        if scope is not None and not isinstance(scope, Scope):
            raise TypeError(f"scope must be a md_cg.visibility.Scope or None, got {type(scope).__name__}")
        _check_options(create, durable, read_only, refresh_interval, lock_timeout, auto_compact)
        if ttl_seconds is not None:
            retention.check_ttl(ttl_seconds)
        check_not_nested(root)  # before the engine makes anything
        self._engine = Engine(
            root,
            create=create,
            durable=durable,
            refresh_interval=refresh_interval,
            lock_timeout=lock_timeout,
            read_only=read_only,
        )
        self.auto_compact = auto_compact
        self._synonyms: SynonymTable | None = None
        self._synonyms_problem: str | None = None
        self._access = fsops.ShardWriter(self._engine.root_str, access.ACCESS_REL)
        self._access_broken: str | None = None
        #: access events lost to a full disk (each read then goes on; health() reports them)
        self._access_dropped = 0
        self._logs: dict[str, AppendLog] = {}
        self._hand_edits = maintenance.HandEdits()
        self._remember_lock = fsops.FileLock(
            self._engine.root_str, paths.meta("remember.lock"), what="remember"
        )
        self._scope = self._engine.scope = scope
        take_scope(self._engine)  # a duplicated id: the copy of this scope stands for it
        self._filter = visibility.Filter(scope)
        self._ttl_seconds = ttl_seconds
        self._retention: retention.Retention | None = None
        if not read_only:  # a rename whose commit a recovery here finishes gets its audit record
            self._engine.journal.on_moved = functools.partial(_record_renames, self.log(paths.AUDIT_DIR))

    # -- properties and lifecycle ----------------------------------------------------------

    @property
    def root(self) -> Path:
        return self._engine.root

    @property
    def read_only(self) -> bool:
        return self._engine.read_only

    @property
    def durable(self) -> bool:
        return self._engine.durable

    @property
    def lock_timeout(self) -> float:
        return self._engine.lock_timeout

    @property
    def scope(self) -> Scope | None:
        """The caller's scope this handle reads and writes in (None: every scope)."""
        return self._scope

    @property
    def ttl_seconds(self) -> float:
        """How long a temporary memory lives in this store, in seconds."""
        return self._ret.ttl

    @property
    def _ret(self) -> retention.Retention:
        if self._retention is None:
            self._retention = retention.Retention(
                self._engine.root_str, self._ttl_seconds, self.log(retention.DECISION_LOG)
            )
        return self._retention

    @property
    def loaded_from(self) -> str:
        """``"snapshot"`` or ``"files"``: how the index was loaded at open."""
        return self._engine.loaded_from

    def init_folder(self) -> None:
        """Create the layer folders, ``.mdcg/`` and ``.gitignore`` (one there: md-cg's lines put first)."""
        self._engine.ensure_writable()
        ignore_state(self._engine.root_str)

    def close(self) -> None:
        """Compact if due (see ``auto_compact``), release this process's files and locks."""
        eng = self._engine
        with eng.lock:
            if eng.closed:
                return
            eng.journal.writer.close()  # release our shard so the compaction can fold it
            if maintenance.compaction_due(eng, self.auto_compact):
                maintenance.compact_on_close(eng)
            self._access.close()
            for log in self._logs.values():
                log.close()
            self._hand_edits.close()
            self._remember_lock.close()
            eng.close()

    def __enter__(self) -> MdCG:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> list[str]:
        """Pick up other processes' changes now; return the ids that changed (for a scoped
        handle: those it sees now, and the deleted ones it saw before: :func:`_refreshed`)."""
        return _refreshed(self._engine, self._scope)

    def log(self, name: str) -> AppendLog:
        """The append-only log ``.mdcg/<name>/`` of this store (reflections, tombstones...),
        raw: every scope's records. :meth:`tombstones`, :meth:`reflections` and
        ``organize.runs`` give a scoped handle its own."""
        log = self._logs.get(name)
        if log is None:
            legacy = paths.LEGACY_REFLECTION_FILE if name == paths.REFLECTION_DIR else None
            reflections = name == paths.REFLECTION_DIR  # read on every reflect, never redacted
            log = self._logs[name] = AppendLog(
                self._engine.root_str, name, legacy=legacy, incremental=reflections
            )
        return log

    # -- writing ----------------------------------------------------------------------------

    def add(
        self,
        node: Node | None = None,
        /,
        *,
        overwrite: bool = False,
        durable: bool | None = None,
        stamp: bool = True,
        tier: str | None = None,
        **fields_: Any,
    ) -> Node:
        """Store a new node and return it.

        Pass a :class:`Node`, or its fields as keywords (``id`` defaults to a
        readable slug of the body's first line). An existing id -- or one that
        differs only by case or Unicode normalisation -- raises
        :class:`~md_cg.errors.DuplicateIdError` unless ``overwrite=True``,
        which replaces the node (moving its file if its layer or bucket
        changed) -- but never an archived node (DuplicateIdError: unarchive it
        first). ``stamp`` sets ``created_at`` when absent and ``updated_at`` to
        now. Invalid input raises before anything is written, and so does an
        empty body: a memory needs some text (:meth:`add_many`, the import
        path, carries sources as they are). ``tier`` (``"temp"``/``"long"``)
        overrides the retention decision (docs/retention.md).
        """
        self._engine.check_open()
        node = self._coerce(node, fields_)
        if tier is not None:
            node.retention_tier = temporal.normalize_tier(tier) or None
        editing.require_text(validate(node))
        self._require_usable(node, overwrite=overwrite)  # what the stored node held is kept
        return self._add_batch(
            [node], overwrite, durable, stamp, stamp, validated=True, check=self._check_live
        )[0]

    def add_many(
        self,
        nodes: Iterable[Node],
        *,
        overwrite: bool = False,
        durable: bool | None = None,
        stamp: bool = True,
        progress: Callable[[int], Any] | None = None,
        decide: bool | None = None,
        checked: bool = False,
    ) -> list[Node]:
        """Store many nodes as one commit: all or nothing, even across a crash.

        Every node is validated first (``checked=True``: also as :meth:`add` checks new input,
        naming ``nodes[i]`` and its id); a bad node raises and nothing is stored. With
        ``overwrite=True`` a node whose file would change only in ``updated_at`` (or its line
        ends) is left untouched: re-running an import is idempotent; an archived node is never
        replaced (DuplicateIdError). A crash mid-batch is finished by the next write of its ids
        or :meth:`sync`. Each node gets the caller's scope and its retention decision
        (docs/retention.md); ``stamp=False`` stores times as given, ``decide`` (default: ``stamp``).
        """
        batch = retention.nodes_of(nodes)
        decide = stamp if decide is None else decide
        ok = _check_batch(self, batch, overwrite, checked)
        out = self._add_batch(batch, overwrite, durable, stamp, decide, validated=ok, check=self._check_live)
        if progress is not None:
            progress(len(batch))
        return out

    def _add_batch(
        self,
        batch: list[Node],
        overwrite: bool,
        durable: bool | None,
        stamp: bool,
        decide: bool,
        *,
        validated: bool = False,
        check: Callable[[Entry], None] | None = None,
    ) -> list[Node]:
        """``add_many`` of a list; ``validated``: every node was validated just now (``add``);
        ``check(entry)`` refuses an id taken (default: one outside the caller's scope)."""
        now = time.time()
        # The collector would scan the whole index again and again while a batch
        # allocates its entries; nothing here forms cycles that must go at once.
        with index.no_gc():
            decided = self._prepare(
                batch, now, stamp=stamp, replacing=overwrite, decide=decide, validated=validated
            )
            with self._engine.lock, self._naming_lost(added=(ids := [n.id for n in batch])):
                add = functools.partial(self._engine.add_many, batch, overwrite=overwrite, durable=durable)
                add = functools.partial(add, stamp=stamp, check=check or self._check_taken)
                out = views.past_stale_notes(self._engine, ids, add)
        self._ret.record(_written(decided, out), now)
        return out

    def update(self, node_id: str, /, *, durable: bool | None = None, **changes: Any) -> Node:
        """Change fields of a stored node; return the node as stored.

        Any :class:`Node` field but ``id`` may be given. A change of layer, tags or condition
        space may move the file (crash-safe through the journal); a file placed by hand stays
        where it is while its layer does not change. ``updated_at`` is set to now; changes to
        what the file holds already write nothing (:meth:`update_report` says so). A change of
        ``body``, ``temporal`` or ``retention_tier`` re-decides retention (an expiry kept).

        An archived node raises :class:`~md_cg.errors.NodeNotFoundError` (unarchive
        it first), as does an expired temporary one unless the update renews it --
        gives ``retention_tier`` or an ``expires_at`` still ahead -- and leaves it
        live; checked under the node's lock, nothing is written when refused.
        """
        return self._update(node_id, changes, durable)

    def edit_text(self, node_id: str, change: Callable[[str], str], *, durable: bool | None = None) -> Node:
        """Rewrite a node's file text with ``change`` under its lock (see :func:`md_cg.editing.edit_text`).

        The result must parse as the same node with some body text, or nothing is written
        (nor for the text stored); an expiry already past warns as ``update`` does.
        An archived or expired node raises NodeNotFoundError before ``change`` runs.
        """
        check, refuse = self._edited_check(), self._check_writable
        with self._naming_lost():
            return editing.edit_text(
                self._engine, self._as_stored(node_id), change, durable=durable, check=check, refuse=refuse
            )

    def rename(
        self,
        node_id: str,
        new_id: str,
        *,
        layer: str | None = None,
        durable: bool | None = None,
        path: str | None = None,
    ) -> Node:
        """Give a node a new id (and optionally layer): one commit that also re-points
        the edges of every node linking to it (archived ones too). An archived or
        expired node raises NodeNotFoundError; nothing is written. ``path``: the one file of
        several holding the id (``duplicate_id``) to give the new id (:func:`.editing._rename_copy`)."""
        return _renamed(self, node_id, new_id, layer, durable, path)

    def move(self, node_id: str, layer: str, *, durable: bool | None = None) -> Node:
        """Move a node to another layer (crash-safe); refused as :meth:`update` refuses."""
        check_layer(layer)
        return self.update(node_id, layer=layer, durable=durable)

    def delete(
        self, node_id: str, *, force: bool = False, durable: bool | None = None, all_copies: bool = False
    ) -> Deleted:
        """Remove a node's file and return it (:class:`~md_cg.reports.Deleted`). Other
        nodes' edges to it raise NodeHasIncomingEdgesError listing them, unless
        ``force=True`` (the edges are left dangling and returned in the result). Its copies
        go too; another memory under its id is refused unless ``all_copies=True``."""
        return _deleted(self, node_id, force, durable, all_copies)

    def forget(
        self,
        node_id: str,
        reason: str,
        *,
        force: bool = False,
        durable: bool | None = None,
        all_copies: bool = False,
    ) -> Deleted:
        """Remove a node for good and leave a payload-free tombstone (see :mod:`md_cg.forgetting`).

        The tombstone (id, layer, reason, time; no content) is written first,
        then the file is removed, so a crash leaves the node or the tombstone,
        never neither; then the derived copies of its content are scrubbed
        (the snapshot is rewritten). ``anchor/`` nodes refuse unless
        ``force=True``. Edges pointing at it are left dangling and returned.
        ``all_copies``: as :meth:`delete`'s.
        """
        return _forgotten(self, [node_id], reason, force, durable, all_copies)[0]

    def forget_many(
        self,
        node_ids: Iterable[str],
        reason: str,
        *,
        force: bool = False,
        durable: bool | None = None,
        all_copies: bool = False,
    ) -> list[Deleted]:
        """:meth:`forget` several nodes: one commit, one scrub (all or nothing); a str is one id."""
        return _forgotten(self, retention.ids_of(node_ids, "node_ids"), reason, force, durable, all_copies)

    def tombstones(self) -> list[dict[str, Any]]:
        """Every forget tombstone, oldest first (id, layer, reason, time; no content); a
        scoped handle gets those of the nodes it could see."""
        return audit.visible_to(self._scope, audit.tombstones_only(self.log(paths.AUDIT_DIR)), self._seer())

    def departure(self, node_id: str) -> audit.Departure | None:
        """What became of an id no memory holds now (:func:`departure_of`)."""
        return departure_of(self, node_id)

    # -- lifecycle (archive, unarchive, apply_changes, supersede: md_cg.views.Lifecycle) -----

    def sweep(self, *, dry_run: bool = True) -> SweepReport:
        """Find -- and with ``dry_run=False`` remove -- the expired temporary nodes.

        Only nodes whose ``expires_at`` has passed and whose tier is not
        ``long`` (``temp``, or none: the nodes the reads hide as expired), not
        archived, in the caller's scope; each removal leaves a payload-free
        tombstone (reason ``expired``, see :meth:`tombstones`). ``left_closed``
        names the facts a removed node superseded that stay closed. An expired
        node whose id other files hold too (a copy of another tier, in another
        folder or ``archive/``) is never removed: ``kept`` names it and them.
        """
        return forgetting.sweep_report(self._engine, lambda: self.log(paths.AUDIT_DIR), self._scope, dry_run)

    # -- search ------------------------------------------------------------------------------

    @property
    def synonyms(self) -> SynonymTable:
        """The synonym table: the shipped default plus ``.mdcg/synonyms.json`` when usable.

        A store file that cannot be used (e.g. git conflict markers after a
        merge) is ignored -- the shipped table is used -- and reported by
        :meth:`health`.
        """
        if self._synonyms is None:
            self._synonyms, self._synonyms_problem = SynonymTable.for_store(self._engine.root_str)
        return self._synonyms

    def reload_synonyms(self) -> SynonymTable:
        """Re-read the store's synonym file (after editing it)."""
        self._synonyms = None
        return self.synonyms

    def search(
        self,
        query: str,
        layer: str | None = None,
        k: int = 10,
        context: Any = None,
        judge: bool = True,
        record: bool = True,
        neg_limit: int = search_mod.NEGATIVE_LIMIT,
        include_superseded: bool = False,
        *,
        tag: editing.TagFilter | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[list[SearchResult], dict[str, Any]]:
        """Find nodes for ``query`` with the T0–T3 ladder; return ``(results, meta)``.

        ``layer`` limits the search to one layer (default: every layer but the
        negative ones). ``context`` routes the search to condition buckets
        first (tags with ``domain:``, a ``condition_space``, a domain string,
        and/or ``{"big_domain": ...}``); ``None`` means no routing. Each result
        has ``node`` (read on first access), ``score``, ``tier``, ``state`` and
        ``basis``; ``judge=False`` leaves the last two ``None``. ``meta`` is the
        plan as executed; ``meta["covered_neg"]`` lists at most ``neg_limit``
        negative memories the query matches (``covered_neg_total`` counts them
        all). Every result carries its ``evidence`` of being about the query;
        one with none is ``filler`` (the ladder never answers a non-empty store
        with nothing) and is never ACCEPT. A hit whose file has gone (``git pull``, ``rm``)
        is dropped, the index refreshed, its id refused to ``add`` until a sync; one that
        another process's write is moving (a re-tag between buckets) is found where the
        log says it went, never dropped (:meth:`~md_cg.engine.Engine.drop_missing`). ``record=True``
        appends the ids of the results that are not filler to the access log
        (nothing else); a read-only store records nothing. Expired, archived
        and out-of-scope nodes are never found; superseded ones only with
        ``include_superseded=True`` (each result says ``superseded_by``).
        ``tag``, ``since`` and ``until`` (epoch seconds) filter as :meth:`list_page`
        does: every tier looks only at the nodes that pass (``meta["filter"]``).
        """
        eng = self._engine
        show = visibility.DEFAULT if include_superseded else visibility.SEARCH
        with eng.lock:
            eng.fresh()
            for _ in range(3):
                hidden = self._filter.hidden(eng.state, show)
                only = self._filter_ids(tag, since, until)
                results, meta = search_mod.run(
                    eng.state,
                    self.synonyms,
                    query,
                    layer=layer,
                    k=k,
                    context=context,
                    judge=judge,
                    loader=functools.partial(views.read_hiding, eng, self._scope),
                    neg_limit=neg_limit,
                    hidden=hidden,
                    superseded_by=lambda i: visibility.superseded_by(eng.state, i, self._scope),
                    only=only,
                )
                if only is not None:
                    meta["filter"] = views.filter_meta(only, hidden, tag, since, until)
                gone = [
                    r.id for r in results if not os.path.lexists(os.path.join(eng.root_str, r.entry.path))
                ]
                if not gone:
                    break
                eng.drop_missing(gone)  # refreshes; waits out another process's move of them
        if record and not self.read_only:
            self._record_event("search", [r.id for r in results if not r.filler])
        return results, meta

    def access_counts(self, node_ids: Iterable[str] | None = None) -> dict[str, int]:
        """Accesses per node: the count in the file (migrated), the local fold and the log since.

        With ``node_ids``, exactly those ids (0 for none; a bare string is one id);
        otherwise every node with at least one access.
        """
        eng = self._engine
        eng.fresh()
        folded, tail = access.counts_now(eng.root_str, audit.departure_times(self.log(paths.AUDIT_DIR)))
        entries = eng.state.entries

        def count(i: str) -> int:
            e = entries.get(i)
            return (e.access_count if e else 0) + folded.get(i, 0) + tail.get(i, 0)

        hidden = self._filter.hidden(eng.state)
        if node_ids is not None:
            return {i: 0 if i in hidden else count(i) for i in retention.ids_of(node_ids, "node_ids")}
        candidates = {i for i, e in entries.items() if e.access_count} | set(folded) | set(tail)
        return {i: count(i) for i in sorted(candidates) if i in entries and i not in hidden and count(i)}

    def compact_access(self) -> dict[str, int]:
        """Fold the access log into the local totals; return the accesses folded per node.

        Access counts are per-clone state kept under ``.mdcg/`` (never in the
        tracked ``.md`` files), so clones merge without conflicts.
        """
        return maintenance.fold_access(self._engine, audit.departure_times(self.log(paths.AUDIT_DIR)))

    # -- the cognitive loop (see md_cg.loop) ----------------------------------------------------

    def add_rejected(self, hypothesis: str, reason: str, verification: str = "") -> Node:
        """Record a falsified hypothesis in ``rejected/`` (importance 0; idempotent by content)."""
        return loop.add_rejected(self, hypothesis, reason, verification)

    def add_unresolved(self, question: str, clues: Iterable[str] | str | None = None, goal: str = "") -> Node:
        """Record an open question in ``unresolved/`` (idempotent by question)."""
        return loop.add_unresolved(self, question, clues, goal)

    def verify(self, node_id: str, evidence: str, verdict: str) -> Node:
        """Apply evidence: ``confirmed`` (+0.05), ``weakened`` (-0.10) or ``falsified`` (to ``rejected/``)."""
        self._visible(check_id(node_id := self._as_stored(node_id)))  # an archived or expired node says so
        return loop.verify(self, node_id, evidence, verdict)

    def reflect(
        self, query: str, results: Sequence[Any], feedback: Any = None, *, now: float | None = None
    ) -> loop.Reflection:
        """Record the information gap D = 1 - ACCEPT rate of a search, with dD/dt and d²D/dt²."""
        self._engine.ensure_writable()  # a record: a read-only handle writes nothing
        return loop.reflect(self, query, results, feedback, now=now)

    def last_d(self) -> loop.Reflection | None:
        """The latest reflection record (``.d`` is the information gap), or None."""
        return loop.last_d(self)

    def reflections(self) -> list[loop.Reflection]:
        """The whole reflection record, oldest first."""
        return loop.read_reflections(self)

    def flywheel_step(self, error_report: dict[str, Any]) -> loop.FlywheelStep:
        """Turn the missed conditions of a failure report into ``unresolved/`` questions."""
        return loop.flywheel_step(self, error_report)

    def resolve(self, unresolved_id: str, evidence: str, confirmed: bool) -> loop.Resolution:
        """Settle a flywheel question: confirmed, its condition is added to the node."""
        return loop.resolve(self, unresolved_id, evidence, confirmed)

    # -- maintenance (see md_cg.maintenance) ------------------------------------------------------

    def compact_index(self) -> MaintenanceReport:
        """Fold the log into a new snapshot and remove the shards it covers (scoped: see sync)."""
        report = maintenance.compact(self._engine, timeout=self.lock_timeout)
        return reports.scoped_maintenance(report, self._scope)

    def rebuild_index(self, progress: Callable[[int], Any] | None = None) -> MaintenanceReport:
        """Rebuild the index from the ``.md`` files alone and write a new snapshot."""
        log = self.log(paths.AUDIT_DIR)
        report = maintenance.rebuild(self._engine, timeout=self.lock_timeout, progress=progress, log=log)
        return reports.scoped_maintenance(report, self._scope)

    def sync(self) -> SyncReport:
        """Reconcile the index with files changed outside the engine; finish interrupted writes.

        Malformed files, duplicate ids, twins and symlinks are reported, never
        moved or deleted; ``report.problems`` says whether any was found. A scoped handle
        is told only of the nodes it sees and held (:func:`md_cg.reports.scoped_sync`).
        """
        seen, eng = self._seer(), self._engine
        if eng.hand_after:  # a file noted gone that was put back by hand: no move to tell
            with eng.lock:
                eng.refresh()
                taken_back(eng)
        report = maintenance.sync(eng, self.log(paths.AUDIT_DIR), self._scope)
        report = replace(report, settings=_settings_problems(self._engine.root_str))
        return report if seen is None else reports.scoped_sync(report, seen)

    def sync_if_changed(self, min_interval: float = 1.0) -> SyncReport | None:
        """Pick up files changed by hand since the last call, cheaply; None when nothing changed.

        For long-running processes (the MCP server calls it before every
        tool call). The first call compares the files with the index by a stat
        scan and watches the layer folders, archive/ and root (inotify on Linux:
        new folders too); later calls reconcile the files the watch reports.
        Without inotify (or after its queue overflowed) the stat scan runs again, at most
        once per ``min_interval`` seconds. A read-only handle updates its own
        view and writes nothing.
        """
        eng = self._engine
        seen = self._seer()
        with eng.lock:
            eng.fresh()
            taken_back(eng)  # as sync() does
            report = self._hand_edits.pick_up(eng, min_interval, self.log(paths.AUDIT_DIR), scope=self._scope)
        return report if report is None or seen is None else reports.scoped_pickup(report, seen)

    def health(self, deep: bool = False) -> HealthReport:
        """Check the store; return typed findings (read-only: writes nothing).

        ``deep=True`` also compares every entry and the text index with the
        content of its file.
        """
        self.synonyms  # noqa: B018 - loads the table, noting a problem with the store file
        extra = [Finding("synonyms_file", self._synonyms_problem)] if self._synonyms_problem else []
        extra += [Finding("retention_file", p) for p in retention.settings_problems(self._engine.root_str)]
        extra += self._access_findings()
        eng = self._engine
        with eng.lock:
            eng.fresh()
            state, scope = eng.state, self._scope
            absent = visibility.out_of_scope(state, scope)
            extra += forgetting.expired_findings(eng, scope, state.restricted - absent, time.time())
            records = audit.visible_to(scope, self.log(paths.AUDIT_DIR).read())
            back, gone = forgetting.returned(state, records, self._seer(), eng.read_node)
            extra += [f for f in back if f.node_id not in absent]
            uncounted = self._filter.hidden(state)
            report = maintenance.health(
                eng,
                deep=deep,
                extra=tuple(extra),
                absent=absent,
                uncounted=uncounted,
                forgotten=gone,
                records=records,
            )
        seen = self._seer()
        return report if seen is None else reports.scoped_health(report, seen)


def _check_batch(store: MdCG, batch: list[Node], overwrite: bool, checked: bool) -> bool:
    """``add_many(checked=True)``: each node as :meth:`MdCG.add` checks it, before anything is
    written; the error raised names the node's place in the batch and its id. Returns
    ``checked`` (every node validated)."""
    for i, node in enumerate(batch if checked else ()):
        if not isinstance(node, Node):
            raise TypeError(f"add_many expects Node objects, got {type(node).__name__}")
        try:
            refuse_naive_times(node, node.id if isinstance(node.id, str) else None)
            editing.require_text(validate(node))
            store._require_usable(node, overwrite=overwrite)
        except InvalidNodeError as exc:
            where = f"add_many: nodes[{i}] (id {short_repr(node.id)}), nothing of the batch written"
            exc.args = (f"{where}: {exc}",)
            raise
    return checked


def _written(
    decided: list[tuple[Node, temporal.RetentionDecision]], out: list[Node]
) -> list[tuple[Node, temporal.RetentionDecision]]:
    """The decisions of the nodes an add wrote: one an overwrite left as it was comes back
    as the stored copy, not the node given; no write landed, so no decision is recorded."""
    written = {id(n) for n in out}
    return [(n, d) for n, d in decided if id(n) in written]


def _settings_problems(root: str) -> tuple[tuple[str, str], ...]:
    """(path, problem) of each committed settings file md-cg cannot use, read again
    (a merge may have changed them since the handle opened)."""
    problem = SynonymTable.for_store(root)[1]
    settings = [(paths.meta(synonyms.STORE_FILE), problem)] if problem else []
    return tuple(settings + retention.settings_files(root))


def departure_of(store: MdCG, node_id: str) -> audit.Departure | None:
    """What became of an id no memory holds now, from the store's audit log: forgotten
    or swept (when, the forget's reason) or renamed (to what, and the id the memory
    has now); None when a memory holds the id -- in any scope, archived or expired
    ones too -- or nothing tells. ``.mdcg/`` is per clone: a rename made in another clone
    and pulled by git is told by the ``renamed_from`` of the memory (kept in the index:
    :attr:`md_cg.index.IndexState.earlier`, no file is read), which also names the memory
    when this clone's chain of renames ends at an id nobody holds; a forget made in another
    clone is not told. A scoped handle is told of the memories it could see. The CLI and the
    MCP server add it to "no node" errors (:func:`with_departure`)."""
    eng = store._engine
    eng.fresh()
    if check_id(node_id) in eng.state.entries:
        return None
    # Only the lines naming the id are decoded (a log of 100k tombstones made every unknown
    # id cost 1.5 s, r3), and the renames when it was renamed (to follow it to its id now).
    log, needle = store.log(paths.AUDIT_DIR), orjson.dumps(node_id)
    records = audit.visible_to(store._scope, log.read_holding([needle]))
    if any(r.get("event") == audit.RENAMED and r.get("id") == node_id for r in records):
        renames = b'"' + audit.RENAMED.encode() + b'"'
        records = audit.visible_to(store._scope, log.read_holding([needle, renames]))
    return audit.departure(records, node_id, store.__contains__, _arrival_finder(store), _fate_finder(store))


def _fate_finder(store: MdCG) -> Callable[[str], audit.Departure | None]:
    """``fate`` of :func:`md_cg.audit.departure`: what became of the id a rename's chain
    ends at -- a memory the caller sees only archived or expired, or the id's own forget or
    sweep in the audit log (the records naming it); None for a memory out of the caller's
    scope or an id nothing tells of."""
    eng = store._engine

    def fate(node_id: str) -> audit.Departure | None:
        e = eng.state.entries.get(node_id)
        if e is not None:
            why = visibility.reason(eng.state, e, store._scope, visibility.DEFAULT, time.time())
            return audit.Departure(node_id, why, None) if why in ("archived", "expired") else None
        log = store.log(paths.AUDIT_DIR)
        records = audit.visible_to(store._scope, log.read_holding([orjson.dumps(node_id)]))
        gone = audit.departure(records, node_id, store.__contains__)
        return gone if gone is not None and gone.event != audit.RENAMED else None

    return fate


def _arrival_finder(store: MdCG) -> Callable[[str], tuple[str, str] | None]:
    """``arrived`` of :func:`md_cg.audit.departure`: for an earlier id, (the id it was renamed
    to, the id the memory has now) of a memory the caller sees whose ``renamed_from`` lists
    it (the last changed, when more do), from the index."""
    state = store._engine.state

    def arrived(old_id: str) -> tuple[str, str] | None:
        holders = [h for h in state.earlier.get(old_id, ()) if h in store]
        if not holders:
            return None
        holder = max(holders, key=lambda h: (state.entries[h].changed, h))
        earlier = state.entries[holder].renamed_from
        after = len(earlier) - earlier[::-1].index(old_id)  # after its last time there
        return (earlier[after] if after < len(earlier) else holder), holder

    return arrived


def with_departure(store: MdCG, exc: NodeNotFoundError) -> NodeNotFoundError:
    """``exc`` told what became of its id (:meth:`MdCG.departure`): a new error whose hint
    says it was forgotten, swept or renamed (and to what), when ``exc`` is a plain "no
    node" error (no hint of its own, nothing hidden) and the audit log knows the id;
    else ``exc`` itself. For front ends reporting an id a person or agent asked for."""
    if exc.hidden is not None or exc.hint or not isinstance(exc.node_id, str):
        return exc
    try:
        gone = store.departure(exc.node_id)
    except InvalidArgumentError:  # not an id at all: the error already says what was asked
        return exc
    if gone is None:
        return exc
    return NodeNotFoundError(exc.node_id, gone.describe())


def _record_renames(
    log: AppendLog,
    moved: list[tuple[str, list[tuple[str, str]]]],
    kept: list[tuple[str, list[tuple[str, str]]]],
) -> None:
    """The audit record of each rename a recovery finished (:attr:`md_cg.journal.Journal.on_moved`:
    the dead process wrote the commit, not its record), so ``get OLD`` says where it went --
    or, its old file changed since the crash and kept, that it is under both ids (``health()``).
    A record that cannot be written is a warning: the recovered write itself is done."""
    try:
        audit.record_recovered_renames(log, moved, audit.renamed_reader(log.root), kept)
    except OSError as exc:
        warnings.warn(
            f"md-cg: a rename finished by recovery could not be recorded in .mdcg/audit ({exc}): "
            "errors about its old id will not say where it went",
            RuntimeWarning,
            stacklevel=2,
        )


def _refreshed(eng: Engine, scope: Scope | None) -> list[str]:
    """:meth:`MdCG.refresh`: the ids :meth:`Engine.refresh` tells, for a ``scope`` those of
    the memories it admits now and of the deleted ones it admitted before the call (by the
    entry the index held then, as a sync tells deletions); not one moved out of it."""
    prior: dict[str, Entry | None] = {}
    with eng.lock:
        changed = eng.refresh(prior)
        if scope is None:
            return changed
        entries = eng.state.entries
        told = [(i, entries[i] if i in entries else prior.get(i)) for i in changed]
        return [i for i, e in told if e is not None and scope.admits(e)]


def _forgotten(
    store: MdCG, node_ids: list[str], reason: str, force: bool, durable: bool | None, all_copies: bool
) -> list[Deleted]:
    """:meth:`MdCG.forget_many`; ids as :func:`md_cg.views.as_stored` spells them."""
    node_ids = [store._as_stored(i) for i in node_ids]
    for e in filter(None, map(store._engine.state.entries.get, node_ids)):
        store._check_scope(e)
    with store._naming_lost():  # a file moved or deleted by hand is named, as by every write
        log, scope = store.log(paths.AUDIT_DIR), store._scope
        return forgetting.forget_many(
            store._engine,
            log,
            node_ids,
            reason,
            force=force,
            durable=durable,
            scope=scope,
            all_copies=all_copies,
        )


def _deleted(store: MdCG, node_id: str, force: bool, durable: bool | None, all_copies: bool) -> Deleted:
    """:meth:`MdCG.delete`."""
    eng, node_id = store._engine, store._as_stored(node_id)
    incoming: list[tuple[str, str]] = []
    closed: list[str] = []

    def refuse(entry: Entry) -> None:
        store._check_scope(entry)  # and below: another scope's ids are never named
        scope, entries = store._scope, eng.state.entries
        incoming.extend(e for e in eng.incoming(entry.id) if scope is None or scope.admits(entries[e[0]]))
        if incoming and not force:
            raise NodeHasIncomingEdgesError(entry.id, incoming)
        left = visibility.left_closed(eng.state, [entry.id], [entry.id], time.time(), store._scope)
        closed.extend(left[entry.id])

    with store._naming_lost():  # an id typed in another letter case: told, as by get
        node, copies = remove_node(
            eng, node_id, durable=durable, check=refuse, scope=store._scope, all_copies=all_copies
        )
    return Deleted(node, tuple(incoming), tuple(closed), tuple(copies))


def _renamed(
    store: MdCG, node_id: str, new_id: str, layer: str | None, durable: bool | None, path: str | None = None
) -> Node:
    """:meth:`MdCG.rename`: refused for a new id noted gone by hand, the note is checked as
    for an add (:func:`md_cg.views.past_stale_notes`): a stale one (another process forgot
    the id) is dropped and the rename goes ahead -- before session 36 it raised "no node
    with id" naming the new id (attack a2: 1-2 % of renames racing adds and forgets)."""
    eng, scope, audit, refuse = store._engine, store.scope, store.log(paths.AUDIT_DIR), store._check_writable
    node_id = store._as_stored(node_id)  # the old id typed in another Unicode form: its memory
    go = functools.partial(editing.rename, eng, node_id, new_id, layer=layer, durable=durable, scope=scope)
    with store._naming_lost(added=[new_id]):  # a new id of a file moved or deleted by hand: as by add
        return views.past_stale_notes(eng, [new_id], lambda: go(audit=audit, refuse=refuse, path=path))
