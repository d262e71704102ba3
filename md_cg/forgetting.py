"""Forgetting: removing memories for good, with payload-free tombstones.

``forget`` (and the retention sweep) must leave no copy of what was
forgotten, and must never lose both the memory and the record that it was
forgotten. The sweep forgets only an expired memory whose file is the sole
one holding its id (:func:`sole_copies`): another copy may be a memory to keep. The order is therefore:

1. under the ids' locks, check everything first (the ids exist; ``anchor/``
   nodes are protected unless forced) so that nothing is half-done;
2. append one tombstone per node -- id, layer, reason, time, dangling edges;
   no content -- and fsync it;
3. remove the files, as one journal commit (all or nothing, even across a
   crash: see :mod:`md_cg.journal`);
4. scrub the derived copies of the content: an emptied bucket folder, old
   ``.mdcg/trash`` copies, the candidates organise saved as these memories
   (blanked in place in ``.mdcg/organize/``), this process's log shard (retired so that
   maintenance can remove it) and the snapshot (rewritten by a compaction,
   its text index without the forgotten terms).

A crash between 2 and 3 leaves the node and its tombstone; between 3 and 4,
the tombstone and a snapshot that still mentions the node -- the next
compaction rewrites it. A durable removal whose last fsync (of the folders,
after every unlink) fails or is interrupted has forgotten the memories all the
same (:func:`md_cg.errors.was_applied`) -- also when its ``done`` line fails then
too, leaving the commit open: step 4 runs, then the error goes up.
Log shards of *other* live processes that wrote the node keep its path until
they exit and a compaction removes them.

Imports the engine, maintenance and the modules below them.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from . import audit, fsops, index, journal, maintenance, paths, retention, visibility
from .engine import (
    Dels,
    Engine,
    Reads,
    commit_dels,
    commit_removal,
    copies_known,
    copies_of,
    copies_read,
    read_entry,
    refuse_other_memories,
    settle_left,
)
from .errors import (
    OPEN_NOTE,
    ChangedOnDiskError,
    InvalidNodeError,
    LockTimeoutError,
    MalformedNodeFileError,
    NodeNotFoundError,
    ProtectedNodeError,
    UnsafePathError,
    closed_since,
)
from .index import Entry, IndexState
from .logs import AppendLog
from .node import Node, check_id
from .reports import Deleted, Finding
from .retention import SweepReport
from .visibility import Scope


def check_reason(node_id: str, reason: object) -> str:
    """The stripped reason, or InvalidNodeError when there is none (or it is not UTF-8 text)."""
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidNodeError(
            f"forget({node_id!r}) needs a reason (a non-empty string)",
            field="reason",
            value=reason,
            node_id=node_id,
        )
    if not reason.isascii():
        try:
            reason.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidNodeError(
                f"forget({node_id!r}): the reason holds a lone surrogate and cannot be stored as UTF-8",
                field="reason",
                value=reason,
                node_id=node_id,
            ) from None
    return reason.strip()


def forget_many(
    engine: Engine,
    tombstones: AppendLog,
    node_ids: Sequence[str],
    reason: str,
    *,
    force: bool = False,
    durable: bool | None = None,
    event: str = "forget",
    keep: Callable[[Entry], bool] | None = None,
    scope: Scope | None = None,
    kept: list[tuple[str, str]] | None = None,
    all_copies: bool = False,
) -> list[Deleted]:
    """Forget ``node_ids`` (see the module docstring); return what was removed, in order.

    Refuses before writing anything when an id is unknown or protected.
    ``keep(entry)``, checked under the locks, may skip an id instead (the
    sweep skips a node that is no longer expired). ``kept`` (the sweep's): an
    id some other file also holds is skipped too, and appended to it as
    ``(id, why)`` (:func:`sole_copies`); without it every copy of the memory is removed (another
    memory under its id refused unless ``all_copies``: :func:`~md_cg.engine.refuse_other_memories`).
    Edges into the forgotten nodes from nodes that stay are left dangling and returned with each
    node -- those the caller sees (``scope``): another scope's ids are never named.
    """
    ids = list(dict.fromkeys(check_id(i) for i in node_ids))
    why = check_reason(ids[0] if ids else "", reason)
    if not ids:
        return []
    doomed = set(ids)
    with engine.lock:
        with engine.hold(ids):
            read: dict[str, tuple[Node, journal.Stamp]] = {}  # the sweep's: each file as checked
            left: dict[str, tuple[Entry | None, str]] = {}  # the sweep's: each id its look leaves
            entries = _doomed_entries(engine, ids, doomed, keep, force, read, left)
            if kept is not None:
                entries, told = sole_copies(engine, entries, scope, left)
                doomed.difference_update(i for i, _ in told)
                kept.extend(told)
                entries = _still_as_read(engine, entries, read, doomed, kept)
            if not entries:
                return []
            ids = [e.id for e in entries]
            incoming = _dangling(engine, ids, doomed, scope)
            reads: Reads = {}  # each file as read: removed only while it is that one
            nodes = [read[e.id][0] if e.id in read else read_entry(engine, e, reads) for e in entries]
            # Every copy of a forgotten memory goes: the losing copies of a duplicated id (a cp,
            # a merge) would otherwise bring it back at the next sync. Looked for first: the
            # tombstone and the removal stay close. The sweep just found none, and removes none.
            found = [] if kept is not None else copies_read(engine, entries, scope)
            if found and not all_copies:
                refuse_other_memories(engine, list(zip(entries, nodes, strict=True)), found, "forget")
            dels = [(e.id, e.path) for e in entries] + [(i, rel) for i, rel, _ in found]
            now = time.time()
            closed = visibility.left_closed(engine.state, ids, doomed, now, scope)
            pairs = list(zip(entries, nodes, strict=True))
            tombstones.append(
                [_record(event, e, n, why, now, [list(x) for x in incoming[e.id]]) for e, n in pairs],
                durable=True,
            )
            late: list[BaseException] = []  # an error once the files were all in place
            others = copies_known(engine, ids)  # another scope's copies stay (settle_left)
            if kept is None:
                copies = _removed_or_restored(
                    engine, tombstones, (entries, nodes), (dels, found, reads), durable, late
                )
            else:
                copies = []
                entries, nodes = _remove_as_read(
                    engine, tombstones, (entries, nodes), read, kept, durable, late
                )
            settle_left(engine, others)
        if entries:  # (the sweep's may all have been edited meanwhile: nothing was removed)
            _scrub_then_raise(
                engine, [e.id for e in entries], {rel.rsplit("/", 1)[0] for _, rel in dels}, scope, late
            )
    return [
        Deleted(node, incoming[node.id], closed[node.id], tuple(rel for i, rel in copies if i == node.id))
        for node in nodes
    ]


def _removed_or_restored(
    engine: Engine,
    tombstones: AppendLog,
    doomed: tuple[list[Entry], list[Node]],
    removal: tuple[Dels, list[tuple[str, str, journal.Stamp]], Reads],
    durable: bool | None,
    late: list[BaseException],
) -> list[tuple[str, str]]:
    """A forget's removal (:func:`~md_cg.engine.commit_removal`): the copies removed (a copy
    changed since it was read is left). A memory's file that is not the one read when it is
    set aside -- a person's save landed after the read -- refuses the forget whole: nothing
    is removed, the save stays at its path, the tombstones are taken back by ``restored``
    records (as the sweep's, :func:`_remove_as_read`), and
    :class:`~md_cg.errors.ChangedOnDiskError` goes up -- forget again to forget the memory
    as it is now. Before session 43 a look then an unlink removed that save unread."""
    dels, found, reads = removal
    try:
        return commit_removal(engine, dels, found, durable, late, guard=reads)
    except ChangedOnDiskError:
        why = "changed on disk while it was forgotten: kept, not forgotten"
        now = time.time()
        tombstones.append(
            [_record(audit.RESTORED, e, n, why, now) for e, n in zip(*doomed, strict=True)], durable=True
        )
        raise


def _dangling(
    engine: Engine, ids: Sequence[str], doomed: set[str], scope: Scope | None
) -> dict[str, tuple[tuple[str, str], ...]]:
    """Id -> the edges into it from nodes that stay (not ``doomed``) and that the caller's
    ``scope`` sees: left dangling by its forgetting (another scope's ids are never named)."""
    state = engine.state
    seen = (lambda src: src in state.entries and scope.admits(state.entries[src])) if scope else None
    return {
        i: tuple(e for e in engine.incoming(i) if e[0] not in doomed and (seen is None or seen(e[0])))
        for i in ids
    }


def _scrub_then_raise(
    engine: Engine, node_ids: Sequence[str], folders: set[str], scope: Scope | None, late: list[BaseException]
) -> None:
    """:func:`scrub`, then raise the error of ``late``, if any: the removal's, raised once
    every file was in place (only the fsync of their folders failed or was interrupted:
    :func:`md_cg.errors.was_applied`). The memories are forgotten then, and their words must
    leave the derived files all the same: before session 38 the error went up before the
    scrub, and the snapshot kept the forgotten text until some later compaction. Should the
    scrub fail too, its error is noted on (and chained to) the removal's, which goes up:
    it is the one that says the memories are forgotten.

    So too when the removal's ``done`` line failed after that fsync (a full disk): the
    commit is left open (:data:`~md_cg.errors.OPEN_NOTE`), every file gone all the same.
    Until session 39 that error went up before the scrub, and the words stayed in the
    snapshot. Safe: the scrub's compaction recovers the open commit, and the recovery does
    no del over a file saved since (:func:`md_cg.journal._later_ids`); should it close the
    commit, the error says it is closed (:func:`~md_cg.errors.closed_since`)."""
    # the commit the removal left open, if it did: the last of the journal's failed ones
    failed = engine.journal.failed
    left = failed[-1] if failed and late and OPEN_NOTE in getattr(late[0], "__notes__", ()) else None
    try:
        scrub(engine, node_ids, folders, scope)
    except BaseException as exc:
        if not late:
            raise
        _closed_since(engine, late[0], left)
        late[0].add_note(f"scrubbing the forgotten text from .mdcg/ failed too ({exc!r}): run `mdcg compact`")
        raise late[0] from exc
    if late:
        _closed_since(engine, late[0], left)
        raise late[0]


def _closed_since(engine: Engine, exc: BaseException, left: journal.Commit | None) -> None:
    """Note ``exc`` closed (:func:`~md_cg.errors.closed_since`) when the commit it ``left``
    open is no longer among the journal's failed ones: a recovery closed it."""
    if left is not None and left.key not in {c.key for c in engine.journal.failed}:
        closed_since(exc)


def _record(
    event: str, e: Entry, n: Node, reason: str, now: float, dangling: list[list[str]] | None = None
) -> dict[str, Any]:
    """An audit record of the memory ``e`` (its node ``n``): a tombstone (with its
    ``dangling`` edges), or the ``restored`` record taking one back; beyond its id, what
    tells which memory it is (:func:`md_cg.audit.record_key`): when it was made, its
    earlier ids, its scope."""
    return {
        "event": event,
        "id": e.id,
        **({"kept": e.id} if event == audit.RESTORED else {}),
        "layer": e.layer,
        "reason": reason,
        "time": now,
        **({"dangling": dangling} if dangling is not None else {}),
        # when it was made, not what it said: a clone that renamed it is told by it
        **({"created_at": e.created_at} if e.created_at is not None else {}),
        # and its earlier ids: a batch-mate renamed onto its id has others
        **({audit.RENAMED_FROM: audit.earlier_ids(n)} if audit.earlier_ids(n) else {}),
        **visibility.scope_fields(e),
    }


def sweep_report(
    engine: Engine, audit_log: Callable[[], AppendLog], scope: Scope | None, dry_run: bool
) -> SweepReport:
    """:meth:`md_cg.MdCG.sweep`: the expired nodes the caller sees and, with ``dry_run=False``,
    the removal of those the sweep's look allows (:func:`sweep`); ``kept`` (sorted by id)
    says why of each other one, so that every expired id is in exactly one of ``removed``
    and ``kept``. A dry run looks at the files as the sweep does (:func:`looked`) and says
    the same (``audit_log`` is opened only for a removal: a dry run writes nothing)."""
    with engine.lock:
        engine.fresh()
        expired = tuple(retention.expired_ids(engine, scope, time.time()))
        if dry_run or not expired:
            would, left = looked(
                engine, [engine.state.entries[i] for i in expired], retention.sweepable(scope)
            )
            _, kept = sole_copies(engine, would, scope, left)
            return SweepReport(expired, (), dry_run, kept=tuple(sorted(kept)))
    gone, kept = sweep(engine, audit_log(), expired, scope)
    closed = tuple(sorted({old for d in gone for old in d.left_closed}))
    return SweepReport(expired, tuple(d.node.id for d in gone), False, closed, tuple(sorted(kept)))


def sweep(
    engine: Engine, tombstones: AppendLog, expired: Sequence[str], scope: Scope | None
) -> tuple[list[Deleted], list[tuple[str, str]]]:
    """Remove the expired temporary nodes ``expired`` (reason ``expired``, event
    ``sweep``), each checked again under its lock (:func:`md_cg.retention.sweepable`,
    and :func:`sole_copies`); return what was removed and ``(id, why)`` of each other
    id of ``expired``: kept because other files hold it too, or because its file is not
    the expired memory the index has any more (moved, removed or edited by hand)."""
    keep = retention.sweepable(scope)
    why = retention.SWEEP_REASON
    kept: list[tuple[str, str]] = []
    gone = forget_many(
        engine, tombstones, expired, why, force=True, event="sweep", keep=keep, scope=scope, kept=kept
    )
    return gone, kept


#: What the sweep's look found instead of an expired memory's file (:func:`_look`), with the
#: entry it looked from (None: the id was no longer indexed): id -> (entry, kind).
Left = dict[str, tuple[Entry | None, str]]


def sole_copies(
    engine: Engine, entries: Sequence[Entry], scope: Scope | None, left: Left | None = None
) -> tuple[list[Entry], list[tuple[str, str]]]:
    """The sweep's rule (docs/retention.md: every doubt resolves to long): an expired
    memory goes only when its file is the only one holding its id. Returns the
    ``entries`` no other readable file holds, and ``(id, why)`` for each of the others,
    ``why`` naming the other files in the caller's ``scope`` and counting the rest (a
    copy of another scope keeps the memory too, unnamed) -- and for each id of ``left``,
    ``why`` saying what the look found (:func:`_left_why`). One walk of the folders
    (:func:`_walked`)."""
    left = dict(left or {})
    stay, where = _walked(engine, entries, scope, left)
    told = [(i, _left_why(e, kind, where.get(i))) for i, (e, kind) in left.items()]
    told += [
        (
            e.id,
            f"expired at {e.path}, but other files hold this id too ({where[e.id]}); the sweep removes "
            "only a memory's sole file: remove the copy you do not want, then sync",
        )
        for e in entries
        if e.id in where and e.id not in left
    ]
    return stay, told


def _walked(
    engine: Engine, entries: Sequence[Entry], scope: Scope | None, left: Left
) -> tuple[list[Entry], dict[str, str]]:
    """One walk for the other files holding an id of ``entries``, and of ``left``'s whose
    file is gone or changed (a file holding it elsewhere is where it was moved to):
    the ``entries`` no other file holds, and id -> those files (:func:`other_copies`).
    An entry found elsewhere whose own file is gone by the end of the walk was moved
    meanwhile, not copied: it joins ``left`` (before session 35 it was said to have
    "other files" holding it, with the advice to remove one -- the only one there was)."""
    lost = [e for e, kind in left.values() if e is not None and kind in (retention.GONE, retention.CHANGED)]
    where = other_copies(engine, [*entries, *lost], scope)
    stay = []
    for e in entries:
        if e.id not in where:
            stay.append(e)
        elif _gone(engine.root_str, e.path):
            left[e.id] = (e, retention.GONE)
    return stay, where


def _gone(root: str, rel: str) -> bool:
    """Whether no file is at ``rel`` now (one that cannot be looked at counts as there)."""
    try:
        fsops.lstat(root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except (OSError, UnsafePathError):
        return False
    return False


def _left_why(e: Entry | None, kind: str, where: str | None) -> str:
    """The sweep's ``kept`` reason of an id its look left (:func:`_look`): the file at
    the path the index has is gone (moved -- ``where`` holds the id now -- or removed by
    hand since the last sync), changed to another id or unreadable, or no longer expired."""
    if e is None:
        return (
            "expired when listed, but no longer indexed when the sweep looked (another process "
            "forgot, deleted or renamed it meanwhile): not removed by this sweep"
        )
    at = f"expired at {e.path}, but "
    if kind == retention.RENEWED:
        return (
            at + "its file as read no longer expires (edited since the last sync: a longer tier or a "
            "later expiry): kept"
        )
    if kind == retention.GONE and where is None:
        return (
            at
            + "its file is gone (moved or removed by hand since the last sync): not removed; run `mdcg sync`"
        )
    what = (
        "moved or removed by hand"
        if kind == retention.GONE
        else "changed by hand (it no longer reads as this memory)"
    )
    found = f" (this id is now in {where})" if where else ""
    return at + f"its file was {what} since the last sync{found}: kept; run `mdcg sync`, then sweep again"


def other_copies(engine: Engine, entries: Sequence[Entry], scope: Scope | None) -> dict[str, str]:
    """Id -> the other files holding it, for each id of ``entries`` another readable file
    holds too (:func:`sole_copies`): those in the caller's ``scope`` named, the rest
    counted. One walk of the folders."""
    if not entries:
        return {}
    others: dict[str, list[str]] = {}
    for node_id, rel in copies_of(engine, entries, None):
        others.setdefault(node_id, []).append(rel)
    if not others:
        return {}
    held = [e for e in entries if e.id in others]
    seen = None if scope is None else set(copies_of(engine, held, scope))
    out = {}
    for e in held:
        named = [rel for rel in others[e.id] if seen is None or (e.id, rel) in seen]
        unnamed = len(others[e.id]) - len(named)
        where = ", ".join(named) + (", " if named and unnamed else "")
        out[e.id] = where + (f"{unnamed} file(s) outside this handle's scope" if unnamed else "")
    return out


def expired_findings(engine: Engine, scope: Scope | None, ids: Iterable[str], now: float) -> list[Finding]:
    """``health()``'s ``expired`` findings of ``ids`` (:func:`md_cg.retention.expired_findings`),
    each saying what the sweep does: the files looked at as the sweep looks (:func:`looked`),
    one whose id other files hold too named with them as the sweep's report names them
    (:func:`other_copies`, one walk of the folders when any memory is expired), one whose
    file is gone named as moved (with where the walk found it) or removed, so that the
    findings saying "a sweep removes it" are exactly what a sweep removes."""
    state = engine.state
    expired = [state.entries[i] for i in sorted(ids) if retention.expired_unarchived(state.entries[i], now)]
    would, left = looked(engine, expired, retention.sweepable(scope))
    _, where = _walked(engine, would, scope, left)
    return retention.expired_findings(expired, where, {i: kind for i, (_, kind) in left.items()})


def looked(
    engine: Engine, entries: Sequence[Entry], keep: Callable[[Entry], bool]
) -> tuple[list[Entry], Left]:
    """The sweep's look at ``entries``' files (:func:`_look`, then ``keep`` of the entry the
    bytes make), taking no lock and changing nothing (a dry run, ``health()``): the entries
    it passes, and what it found of each other one -- as the sweep's look under the locks
    finds it (:func:`_doomed_entries`), so that a dry run says what the sweep does."""
    ok: list[Entry] = []
    left: Left = {}
    for e in entries:
        got = _look(engine.root_str, e)
        if isinstance(got, str):
            left[e.id] = (e, got)
        elif keep(index.make_entry(got[0], e.path, got[1].st_mtime_ns, got[1].st_size)):
            ok.append(e)
        else:
            left[e.id] = (e, retention.RENEWED)
    return ok, left


def _doomed_entries(
    engine: Engine,
    ids: list[str],
    doomed: set[str],
    keep: Callable[[Entry], bool] | None,
    force: bool,
    read: dict[str, tuple[Node, journal.Stamp]],
    left: Left | None = None,
) -> list[Entry]:
    """The entries of ``ids`` to forget (under their locks); an id ``keep`` refuses leaves
    ``doomed``. Raises for an unknown id, or an ``anchor/`` one without ``force``. With
    ``keep`` (the sweep), each file is read again and ``read`` gains its node and the
    stamp of the bytes read (:func:`_as_on_disk`); each id left is noted in ``left``
    with what was found (before session 35 such an id was in neither ``removed`` nor
    ``kept``: review rH, a file moved by hand went unreported)."""
    entries = []
    for node_id in ids:
        entry = engine.state.entries.get(node_id)
        if keep is not None:
            # The sweep's look again, at the file as it is now: gone since it was
            # listed (moved or removed by hand), or edited by hand to stay (a longer tier).
            got = _as_on_disk(engine, entry) if entry is not None else retention.UNINDEXED
            if isinstance(got, str) or not keep(got[0]):
                doomed.discard(node_id)
                if left is not None:
                    left[node_id] = (entry, got if isinstance(got, str) else retention.RENEWED)
                continue
            entry, read[node_id] = got[0], got[1:]
        if entry is None:
            raise NodeNotFoundError(node_id)
        if entry.layer == "anchor" and not force:
            raise ProtectedNodeError(
                node_id,
                f"node {node_id!r} is in anchor/ and is protected from forgetting; "
                "pass force=True to forget it anyway",
            )
        entries.append(entry)
    return entries


def _look(root: str, e: Entry) -> tuple[Node, os.stat_result] | str:
    """The file at ``e``'s path read (the sweep's look): its node and the stat of the bytes
    read, or what is there instead: :data:`~md_cg.retention.GONE` (no file: moved or
    removed by hand since the index saw it), :data:`~md_cg.retention.CHANGED` (a file
    that is not a readable node, or holds another id)."""
    try:
        data, st = index.read_limited(root, e.path)
        node = index.decode_node(data, e.path)
    except (FileNotFoundError, NotADirectoryError):
        return retention.GONE
    except (UnsafePathError, MalformedNodeFileError):
        return retention.CHANGED
    return (node, st) if node.id == e.id else retention.CHANGED


def _as_on_disk(engine: Engine, entry: Entry) -> tuple[Entry, Node, journal.Stamp] | str:
    """The file at ``entry``'s path read again (the sweep's check under the id's lock): the
    entry of the bytes read, their node and :func:`~md_cg.journal.stamp` (inode, mtime,
    size, from the descriptor read: it describes exactly these bytes); else what
    :func:`_look` found. The index takes in a file changed since it was indexed (by
    hand: no log record tells); a file gone is left to the sync, which tells the move
    or the deletion (dropped here, the next sync told a moved memory as added, and a
    second sweep did not list it). Reading, not comparing a ``stat`` with the
    entry's: a file put back with its old mtime and size (``cp -a`` of a same-size copy)
    holds other bytes, and the stamp lets the removal spare a file replaced after this
    look (:func:`_remove_as_read`)."""
    root, rel = engine.root_str, entry.path
    got = _look(root, entry)
    if got == retention.GONE:
        return retention.GONE
    same = not isinstance(got, str) and (got[1].st_mtime_ns, got[1].st_size) == (entry.mtime_ns, entry.size)
    if not same:
        index.resolve_ids(root, engine.state, {entry.id: [rel]})
        now = engine.state.entries.get(entry.id)
        if isinstance(got, str) or now is None or now.path != rel:
            return retention.CHANGED
    assert not isinstance(got, str)
    node, st = got
    fresh = index.make_entry(node, rel, st.st_mtime_ns, st.st_size)
    if same and replace(fresh, domain=entry.domain) != entry:
        engine.state.put(fresh, index.index_text(node))  # the same stat, other bytes: the bytes decide
    return fresh, node, journal.stamp(st)


def _still_as_read(
    engine: Engine,
    entries: list[Entry],
    read: dict[str, tuple[Node, journal.Stamp]],
    doomed: set[str],
    kept: list[tuple[str, str]],
) -> list[Entry]:
    """``entries`` whose file still has the stamp it had when read (just before the
    tombstones: the walk for copies since takes a while at 50k files); one changed since
    (a hand edit: no lock stops a person's editor) is settled in the index and kept, one
    gone (moved or removed by hand) left to the sync and kept."""
    out = []
    for e in entries:
        try:
            now = journal.stamp(fsops.lstat(engine.root_str, e.path))
        except (OSError, UnsafePathError):
            now = None
        if now == read[e.id][1]:
            out.append(e)
            continue
        doomed.discard(e.id)
        kept.append((e.id, _changed_why(engine, e)))
    return out


def _remove_as_read(
    engine: Engine,
    tombstones: AppendLog,
    doomed: tuple[list[Entry], list[Node]],
    read: dict[str, tuple[Node, journal.Stamp]],
    kept: list[tuple[str, str]],
    durable: bool | None,
    late: list[BaseException] | None = None,
) -> tuple[list[Entry], list[Node]]:
    """The sweep's removal: a file goes only while it has the stamp it had when read
    (:meth:`md_cg.journal.Journal.commit` compares it just before each unlink). One
    changed since -- an editor's save, which writes a new file over it, between the check
    and the removal: review rB lost 300 of 300 memories made ``long`` during a 50k sweep
    -- is left, its tombstone taken back by a ``restored`` record, the index settled
    with the file as it is, and the id added to ``kept``. Returns what was removed.
    ``late``: as :func:`~md_cg.engine.commit_dels`."""
    entries, nodes = doomed
    stamps = {e.path: read[e.id][1] for e in entries}
    spared = set(commit_dels(engine, [(e.id, e.path) for e in entries], stamps, durable, late))
    if not spared:
        return entries, nodes
    left = [(e, n) for e, n in zip(entries, nodes, strict=True) if e.path in spared]
    now = time.time()
    why = "changed while the sweep removed it: kept"
    tombstones.append([_record(audit.RESTORED, e, n, why, now) for e, n in left], durable=True)
    kept.extend((e.id, _changed_why(engine, e)) for e, _ in left)
    gone = [(e, n) for e, n in zip(entries, nodes, strict=True) if e.path not in spared]
    return [e for e, _ in gone], [n for _, n in gone]


def _changed_why(engine: Engine, e: Entry) -> str:
    """Why the sweep keeps ``e``, whose file changed after it was read: settled in the
    index when it is there (an edit); one gone (moved or removed by hand meanwhile) is
    left to the sync, which tells where it went."""
    if _gone(engine.root_str, e.path):
        return (
            f"expired at {e.path} when the sweep read it, but its file was moved or removed by hand "
            "before its removal: kept; run `mdcg sync`, then sweep again"
        )
    index.resolve_ids(engine.root_str, engine.state, {e.id: [e.path]})
    return (
        f"expired at {e.path} when the sweep read it, but the file changed before its removal "
        "(an edit meanwhile): kept; a later sweep removes it if it is still expired"
    )


def returned(
    state: IndexState,
    records: list[dict[str, Any]],
    seen: Callable[[str], bool] | None,
    read: Callable[[str], Node],
) -> tuple[list[Finding], set[str]]:
    """What the audit ``records`` say came back: a ``forgotten_returned`` finding per
    forgotten memory whose file is back (:func:`md_cg.audit.back_again`), a
    ``renamed_returned`` one per id renamed here whose old file is back beside the
    memory (:func:`md_cg.audit.returns`), when the caller ``seen`` sees the
    memory it now is (its id is never named otherwise); and the ids forgotten."""
    forgotten, _ = audit.departures(records)
    found, moved = audit.returns(state.entries, records, read)
    backs = {b.entry.id: b for b in reversed(found)}  # one finding a file
    out = [_back_finding(backs[i]) for i in sorted(backs)]
    for e, final, record in moved:
        if seen is not None and not seen(final):
            continue
        out.append(
            Finding(
                "renamed_returned",
                f"renamed to {final!r} in this clone on {_when(record)}; this old id's file is back: take "
                f"what you need into {final!r}, then `delete` it (not `forget`: that forgets the memory)",
                e.path,
                e.id,
            )
        )
    return out, set(forgotten)


def _when(record: dict[str, Any]) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record["time"]))


def _back_finding(back: audit.Back) -> Finding:
    """Short enough that the advice survives an agent's reply (MCP clips a detail at 160
    characters); how such a file comes back is in docs/git.md."""
    tomb = back.tombstone
    said = f"{_when(tomb)} ({tomb.get('reason', '')!s:.30})"
    if back.how == "same id":
        what = f"forgotten in this clone on {said}; its file is back"
    elif back.how == "new id":
        what = f"forgotten in this clone as {back.forgotten!r} on {said}; back under this id"
    else:
        what = f"renamed here and forgotten as {back.forgotten!r} on {said}; this old id's file is back"
    return Finding(
        "forgotten_returned",
        f"{what}: forget it again, or keep it (mdcg keep)",
        back.entry.path,
        back.entry.id,
    )


def scrub(engine: Engine, node_ids: Sequence[str], folders: set[str], scope: Scope | None = None) -> None:
    """Remove the derived copies of forgotten nodes' content (step 4)."""
    root = engine.root_str
    for folder in sorted(folders, key=len, reverse=True):
        fsops.remove_empty_dirs(root, folder, stop=1)
    names = {f"{i}{paths.NODE_SUFFIX}" for i in node_ids}
    trash = fsops.scan(root, paths.meta(paths.TRASH_DIR))
    for rel in trash.files:
        if rel.rsplit("/", 1)[-1] in names:
            fsops.remove(root, rel)
    engine.journal.writer.close()  # retire our shard: the compaction removes it
    # The memories are forgotten (files gone, tombstones written) before these steps:
    # raising would say nothing changed, and a retry could only fail. So each warns.
    named = f"{', '.join(map(repr, node_ids[:3]))}{' and more' if len(node_ids) > 3 else ''}"
    from . import organize  # here, not at import: a store that only reads never needs it

    if fsops.exists(root, paths.meta(organize.AUDIT_LOG)):
        audit = AppendLog(root, organize.AUDIT_LOG)
        try:
            forgetter = organize.Caller.of(scope).to_dict()
            organize.blank_forgotten(audit, node_ids, timeout=engine.lock_timeout, caller=forgetter)
        except (LockTimeoutError, UnsafePathError, OSError) as exc:
            note = f"the organise log (.mdcg/organize/) may still hold the text of {named}: {exc}"
            warnings.warn(f"md-cg: {root}: forgotten, but {note}", RuntimeWarning, stacklevel=4)
        finally:
            audit.close()
    try:
        maintenance.compact(engine, timeout=engine.lock_timeout)
    except (LockTimeoutError, UnsafePathError, OSError) as exc:
        note = (
            f"the index snapshot still holds the words of {named} until a compaction succeeds (mdcg compact)"
        )
        warnings.warn(f"md-cg: {root}: forgotten, but {note}: {exc}", RuntimeWarning, stacklevel=4)
