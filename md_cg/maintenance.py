"""Maintenance: compaction, rebuild, sync, health and the access fold.

These are the only calls that write the snapshot, remove log shards or
remove leftovers. Compaction and rebuild hold the store lock exclusively
(new writers wait at the gate, so maintenance is never starved); sync holds
it shared and, for interrupted commits, the stripe locks of their ids.

* :func:`compact` -- finish interrupted commits, write a snapshot covering
  the log so far, remove the shards it covers whose writers are gone, and
  remove abandoned temp files under ``.mdcg/`` (a killed compaction's
  snapshot temp among them).
* :func:`rebuild` -- the same, from the ``.md`` files alone.
* :func:`sync` -- reconcile the index with files added, changed, deleted or
  moved outside the engine (stat-based: only new or changed files are
  parsed), finish interrupted commits, remove abandoned temp files. Files
  that do not parse, duplicate ids, twins and refused paths (symlinks...) are
  *reported*, never moved or deleted.
* :func:`health` -- typed findings; read-only: it writes nothing.
* :func:`fold_access` -- fold the access log into the local totals.

Imports the engine and the modules below it.
"""

from __future__ import annotations

import copy
import errno
import functools
import math
import os
import shutil
import stat
import time
import unicodedata
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from . import (
    access,
    audit,
    coldbuild,
    copyfate,
    fsops,
    index,
    journal,
    layout,
    merge,
    paths,
    reports,
    snapshot,
)
from .engine import (
    MOVE_WAIT,
    Engine,
    Noted,
    idle_commits,
    moved_on,
    note_untold,
    plain_winners,
    take_scope,
    unplaced,
    waited_once,
)
from .errors import LockTimeoutError, MalformedNodeFileError, MdcgError, ReadOnlyStoreError, UnsafePathError
from .index import Entry, IndexState, Parsed
from .logs import AppendLog
from .node import LAYERS, WINDOWS_DEVICE_NAMES, Node, odd_space, windows_device_name
from .reports import Finding, HealthReport, MaintenanceReport, Moved, SyncReport
from .routing import bucket_health
from .script import distinct_labels, escaped
from .visibility import Scope, linked_successors, scope_fields, successors
from .watch import ChangeWatch

#: Below this many knowledge nodes the bucket-health verdict is reported but
#: not raised as a finding: with a handful of nodes every scheme looks degraded.
BUCKET_HEALTH_MIN_NODES = 100
#: Folders under ``.mdcg/`` searched for leftover temp files.
META_DEPTH = 3


# -- compaction -------------------------------------------------------------------


#: A handle that wrote compacts on close once the log has this many shards (more
#: in a large store: :func:`shards_due`), whatever ``auto_compact`` says of its records.
SHARDS_DUE = 64
#: How many times a pick-up looks at the files again once the writes through md-cg its
#: look fell inside have closed (:func:`_looked_again`); after that, the last look stands.
#: A writer re-tagging one memory without pause (a move a millisecond) lands inside about
#: one look in three: 3 left about one search in 100 with a pick-up telling a move or a
#: duplicate, 10 none in 2,200 (tests/test_pickup_wait_s35.py's loop, session 35)
RELOOKS = 10


def compaction_due(engine: Engine, auto_compact: int | None) -> bool:
    """Whether closing this handle should compact (see ``MdCG(auto_compact=)``)."""
    if auto_compact is None or engine.read_only or not meta_usable(engine):
        return False
    if snapshot.identity(engine.root_str) is None or engine.snap_ident is None or unplaced(engine):
        # No usable snapshot (a new store, a fresh git clone: .mdcg/ is not
        # committed, or one of another version or damaged, or another place's),
        # or one not stamped for this place: save the next process the rebuild
        # from the files (the look at them) -- also when this one only read,
        # as long as the folder is writable.
        return engine.wrote or (len(engine.state.entries) > 0 and os.access(engine.root, os.W_OK))
    # Also when the log has many shards (one per writing process): short-lived
    # writers (a CLI command each) made every open read one more file, until
    # auto_compact records were reached.
    many = len(engine.cursor.offsets) >= shards_due(engine)
    return engine.wrote and (engine.changes >= auto_compact or many)


def shards_due(engine: Engine) -> int:
    """The number of log shards at which a writer compacts on close: :data:`SHARDS_DUE`,
    or the square root of the number of nodes when larger. A compaction costs in
    proportion to the store and an extra shard a little on every open, so the total
    is least about there: at 100k nodes every 316th writer pays ~1.5 s, not every 64th."""
    return max(SHARDS_DUE, math.isqrt(len(engine.state.entries)))


def meta_usable(engine: Engine) -> bool:
    """False when ``.mdcg/`` is a symlink or not a folder (nothing is written through it)."""
    try:
        fsops.Dir(engine.root_str, paths.META_DIR).close()
    except (FileNotFoundError, NotADirectoryError):
        return not fsops.exists(engine.root_str, paths.META_DIR)
    except UnsafePathError:
        return False
    return True


def compact(engine: Engine, *, timeout: float) -> MaintenanceReport:
    """Fold the log into a new snapshot and remove the shards it covers."""
    engine.ensure_writable()
    started = time.perf_counter()
    with engine.lock, engine.maint.exclusive(timeout):
        shards_before = len(fsops.list_shards(engine.root_str, journal.LOG_REL))
        engine.refresh()
        _settle(engine)
        _refuse_unread(engine)
        return _write_snapshot(engine, started, shards_before)


def _refuse_unread(engine: Engine) -> None:
    """Refuse a compaction while the log names memories whose file this process may not
    read (:attr:`IndexState.unread <md_cg.index.IndexState.unread>`): the snapshot would
    hold nothing of them, and the log records that do would go with the shards it covers
    -- until session 35 the snapshot was written without them, and every process opening
    the store after missed them until its own sync (review rH). A compaction on close
    skips it quietly (a :class:`PermissionError`)."""
    unread = engine.state.unread
    if unread:  # looked at again, as a sync does: readable (or gone) since, no refusal (a5)
        index.resolve_ids(engine.root_str, engine.state, {i: [rel] for i, rel in unread.items()})
    if unread:
        node_id, rel = min(unread.items())
        n = len(unread)
        raise PermissionError(
            errno.EACCES,
            f"cannot compact the store at {engine.root_str}: {n} memor{'y' if n == 1 else 'ies'} the "
            f"index log names {'is' if n == 1 else 'are'} in files this process may not read, e.g. "
            f"{rel} ({node_id}); a snapshot would drop {'it' if n == 1 else 'them'}. Compact as a "
            "user who may read them",
        )


def compact_on_close(engine: Engine) -> None:
    """The compaction a closing handle owes (never waits): busy or not writable, a later
    close or compact does it; any other failure is a warning -- what was asked of the
    handle is done, only the fold into a snapshot is not."""
    try:
        compact(engine, timeout=0.0)
    except (LockTimeoutError, PermissionError):
        pass
    except (UnsafePathError, OSError) as exc:
        note = f"md-cg: {engine.root_str}: the compaction on close failed ({exc}); see `mdcg health`"
        warnings.warn(note, RuntimeWarning, stacklevel=3)


def _settle(engine: Engine) -> None:
    """Under the exclusive lock no writer is active: finish every open commit."""
    cursor = engine.cursor
    if cursor.pending:
        engine.recover(list(cursor.pending.values()))
    if cursor.legacy:
        touched: dict[str, list[str]] = {}
        for pending in cursor.legacy.values():
            for node_id, rels in pending.items():
                touched.setdefault(node_id, []).extend(rels)
        cursor.legacy.clear()
        index.resolve_ids(engine.root_str, engine.state, touched)


def _write_snapshot(engine: Engine, started: float, shards_before: int) -> MaintenanceReport:
    covered = dict(engine.cursor.offsets)
    with plain_winners(engine):  # a scoped handle's pick of a duplicated id is its own
        # one postings segment in the snapshot: every later query reads each term in one piece
        engine.state.flush_text()
        engine.state.text.merge_segments()
        copies = copyfate.items(engine.copies_logged, snapshot.COPIES_MAX)  # fates not told yet: kept
        written = snapshot.write(engine.root_str, engine.state, covered, _gone_notes(engine), copies)
    engine.snap_ident, engine.snap_gen = written.identity, written.generation
    engine.journal.copied = False  # stamped for this place now (every open commit settled)
    # what was found damaged in the old snapshot is not in the new one (rebuilt from the files)
    engine.state.snapshot_damage.clear()
    engine.changes = 0
    removed, kept = _remove_dead_shards(engine, covered)
    # Only .mdcg/ here (a killed compaction's snapshot temp): scanning every
    # layer folder would lengthen the exclusive hold; sync() removes the rest.
    _remove_abandoned_temps(engine, layers=False)
    size = fsops.lstat(engine.root_str, snapshot.REL).st_size
    return MaintenanceReport(
        nodes=len(engine.state.entries),
        shards_before=shards_before,
        shards_removed=tuple(removed),
        shards_kept=tuple(kept),
        snapshot_bytes=size,
        seconds=time.perf_counter() - started,
        problems=tuple(sorted(engine.state.problems.items())),
    )


def _gone_notes(engine: Engine) -> dict[str, Noted]:
    """The notes a snapshot keeps (:data:`md_cg.snapshot.NOTES`): this process's notes of
    ids whose file a person moved or removed after md-cg wrote it, which the snapshot
    holds no entry of -- without them a process opening after the compaction knew nothing
    of the id, added it again beside the moved file, and its sync told nothing (session
    36's attack a2). Not the notes of ids the snapshot holds (changed, moved, added back):
    it keeps their entries, and a note wrongly taking a write still landing for a
    person's change (:func:`md_cg.engine.moved_on`: a writer that never pauses) would be
    told by every process opening after it (tests/test_pickup_wait_s35.py)."""
    held = engine.state.entries
    return {
        node_id: noted
        for node_id, noted in engine.hand_after.items()
        if noted[0] == "gone" and node_id not in held
    }


def _remove_dead_shards(engine: Engine, covered: dict[str, int]) -> tuple[list[str], list[str]]:
    """Delete shards fully covered by the snapshot whose writer is gone.

    Covered: every whole line is. What may follow the last one is a line its
    writer was killed while appending, which was never a record (a torn line
    is ignored: its commit never happened) and no one will ever finish (each
    process appends to its own shard only, and this one's writer is dead).
    """
    removed: list[str] = []
    kept: list[str] = []
    for name in fsops.list_shards(engine.root_str, journal.LOG_REL):
        rel = f"{journal.LOG_REL}/{name}"
        fh = fsops.try_lock_exclusive(engine.root_str, rel)
        if fh is None:
            kept.append(name)  # a live process holds it
            continue
        try:
            if name in covered and _only_torn_after(fh, covered[name]):
                fsops.remove(engine.root_str, rel)
                removed.append(name)
            else:
                kept.append(name)
        finally:
            fh.close()
    for name in removed:
        engine.cursor.offsets.pop(name, None)
    return removed, kept


def _only_torn_after(fh: IO[Any], offset: int) -> bool:
    """Whether the shard open as ``fh`` holds no whole line after byte ``offset``
    (nothing at all, or a torn last line: bytes without a newline)."""
    size = os.fstat(fh.fileno()).st_size
    if size == offset:
        return True
    if size < offset:
        return False
    fh.seek(offset)
    while chunk := fh.read(1 << 20):
        if b"\n" in chunk:
            return False
    return True


def rebuild(
    engine: Engine,
    *,
    timeout: float,
    progress: Callable[[int], Any] | None = None,
    log: AppendLog | None = None,
) -> MaintenanceReport:
    """Rebuild the index from the ``.md`` files alone and write a new snapshot; with the
    audit ``log``, record the forgotten memories it took in under a new id
    (:func:`md_cg.audit.detect`)."""
    engine.ensure_writable()
    started = time.perf_counter()
    with engine.lock, engine.maint.exclusive(timeout):
        shards_before = len(fsops.list_shards(engine.root_str, journal.LOG_REL))
        # Finish interrupted commits first: their files are part of the truth.
        engine.catch_up()
        _settle(engine)
        cursor = journal.fresh_cursor(engine.root_str)
        # The old index goes before the new one is built, so that the peak is one
        # index, not two (this handle's lock keeps its other threads out meanwhile).
        engine.state = IndexState()
        try:
            engine.state = coldbuild.build_from_files(engine.root_str, progress=progress)
        except BaseException:
            _restore(engine)
            raise
        engine.cursor = cursor
        if log is not None:
            audit.detect(log, list(engine.state.entries.values()), audit.renamed_reader(engine.root_str))
        report = _write_snapshot(engine, started, shards_before)
        take_scope(engine)  # a scoped handle's own copy of a duplicated id
        return report


def _restore(engine: Engine) -> None:
    """After a failed rebuild: the index as before it, from the snapshot and the log.

    Nothing was written and no writer ran (the exclusive lock is held), so
    that is the index the rebuild dropped. Should that fail too, the handle
    reloads at its next refresh (its snapshot identity is forgotten).
    """
    try:
        engine.load()
    except BaseException:
        engine.snap_ident, engine.snap_gen = None, None
        raise


# -- temp files ---------------------------------------------------------------------


def temp_files(engine: Engine, scan: index.Scan | None = None, *, layers: bool = True) -> list[str]:
    """Temp files under the layer folders (unless ``layers=False``) and under ``.mdcg/``."""
    found: list[str] = []
    if layers:
        found += scan.temps if scan is not None else index.scan_files(engine.root_str).temps
    meta = fsops.ScanResult()
    fsops.scan(engine.root_str, paths.META_DIR, max_depth=META_DEPTH, result=meta)
    found += [rel for rel in meta.hidden if fsops.is_temp_name(rel.rsplit("/", 1)[-1])]
    return sorted(found)


#: what health says of an entry named like md-cg's temp files that is no regular file
NOT_A_TEMP_FILE = (
    "named like md-cg's temp files but not a file (a folder, link or device): md-cg never "
    "removes it; rename or remove it by hand"
)


def _temp_findings(engine: Engine, scan: index.Scan) -> list[Finding]:
    """A ``temp_file`` finding per temp file left by an interrupted write (sync removes
    them), and per entry only named like one (review r5, session 32: a folder so named
    made every ``sync`` stop with "Is a directory" while health said sync removes it)."""
    out = []
    for rel in temp_files(engine, scan):
        try:
            regular = stat.S_ISREG(fsops.lstat(engine.root_str, rel).st_mode)
        except (FileNotFoundError, NotADirectoryError, UnsafePathError):
            continue
        detail = "leftover of an interrupted write; sync() removes it" if regular else NOT_A_TEMP_FILE
        out.append(Finding("temp_file", detail, rel))
    return out


def _remove_abandoned_temps(
    engine: Engine, scan: index.Scan | None = None, *, layers: bool = True
) -> list[str]:
    """Remove temp files whose writer is dead (or that are stale), unless a logged commit names them.

    The writer is found dead *before* the log is read again: a writer killed
    after logging its commit has its commit in the log by then, and the
    commit's temp files are kept for recovery.
    """
    now = time.time()
    candidates = []
    for rel in temp_files(engine, scan, layers=layers):
        try:
            st = fsops.lstat(engine.root_str, rel)
        except (FileNotFoundError, NotADirectoryError, UnsafePathError):
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # a folder or link named like one: not md-cg's (health names it)
        if fsops.temp_is_abandoned(rel.rsplit("/", 1)[-1], st.st_mtime, now):
            candidates.append(rel)
    if not candidates:
        return []
    engine.catch_up()
    named = {tmp for c in engine.cursor.pending.values() for _, _, tmp in c.puts}
    named |= {tmp for c in engine.cursor.pending.values() for tmp in c.aside or () if tmp is not None}
    return [
        rel
        for rel in candidates
        if rel.rsplit("/", 1)[-1] not in named and fsops.remove(engine.root_str, rel)
    ]


# -- sync ---------------------------------------------------------------------------


def sync(engine: Engine, log: AppendLog | None = None, scope: Scope | None = None) -> SyncReport:
    """Reconcile the index with the files (see the module docstring). With the audit
    ``log``: a file this sync took in that is a forgotten memory under another id
    (:func:`md_cg.audit.under_new_ids`) is recorded there, and every forgotten memory
    whose file is back (:func:`md_cg.audit.back_again`, of the records ``scope`` may
    read) is reported as ``returned`` -- by every sync until it is forgotten again or
    kept, as ``health()`` names it. With a ``scope``, ``deleted`` lists only what the
    scope may be told (:func:`_told_deletions`)."""
    engine.check_open()
    if engine.read_only:  # a sync writes (the index, finished writes): say what reads instead
        raise ReadOnlyStoreError(
            f"store {engine.root} was opened read-only: sync() writes the index; a read-only handle "
            "picks up other processes' changes with refresh() or sync_if_changed() (they write nothing)"
        )
    engine.ensure_writable()
    with engine.lock:
        engine.refresh()
        dead = journal.find_dead(engine.root_str, engine.cursor, engine.journal.failed)
        recovered = 0
        undone, left = engine.journal.undone, len(engine.journal.left)
        marks = len(engine.journal.removed), len(engine.journal.foreign), len(engine.journal.replaced)
        if dead:
            with engine.hold({i for c in dead for i in c.ids}):
                recovered = len(dead)  # hold() rolled them forward (or back)
        undone = engine.journal.undone - undone
        with engine.maint.shared(engine.lock_timeout):
            engine.refresh()
            report = _sync_locked(engine, recovered, undone, scope=scope)
    if len(engine.journal.left) > left:
        report = replace(report, left_as_edited=tuple(sorted(set(engine.journal.left[left:]))))
    report = _recovered_dels(engine, report, marks)
    moved, engine.journal.moved = engine.journal.moved, []
    kept, engine.journal.kept = engine.journal.kept, []
    if log is None:
        return report
    if moved or kept:  # a rename killed after its commit line: its audit record (r5)
        audit.record_recovered_renames(log, moved, audit.renamed_reader(engine.root_str), kept)
    return _returned(engine, report, log, scope)


def _recovered_dels(engine: Engine, report: SyncReport, marks: tuple[int, int, int]) -> SyncReport:
    """``report`` with the files this sync's recovery removed finishing an interrupted
    delete, the old files it removed finishing an interrupted rename, and the dels it did
    not do because the file holds another id (journal's
    :attr:`~md_cg.journal.Journal.removed`, :attr:`~md_cg.journal.Journal.replaced` and
    :attr:`~md_cg.journal.Journal.foreign` since ``marks``)."""
    removed = engine.journal.removed[marks[0] :]
    foreign = engine.journal.foreign[marks[1] :]
    replaced = engine.journal.replaced[marks[2] :]
    if not removed and not foreign and not replaced:
        return report
    return replace(
        report,
        finished_deletes=tuple(sorted(set(removed))),
        foreign_deletes=tuple(sorted(set(foreign))),
        old_files_removed=tuple(sorted(set(replaced))),
    )


def _returned(engine: Engine, report: SyncReport, log: AppendLog, scope: Scope | None) -> SyncReport:
    """``report`` with the forgotten memories whose file is back; what this sync took in
    under a new id recorded first (each candidate file read once)."""
    records = log.read()
    entries = engine.state.entries
    taken = _taken(engine, report)
    read = _read_once(audit.renamed_reader(engine.root_str))  # detect and record_twins share it
    if audit.detect(log, taken, read, records):
        records = log.read()
    record_twins(engine, log, taken, records, read)
    back = audit.back_again(entries, audit.visible_to(scope, records), engine.read_node)
    found = tuple(dict.fromkeys((b.entry.id, b.entry.path) for b in back))
    return replace(report, returned=found) if found else report


def _read_once(read: Callable[[str], Node | None]) -> Callable[[str], Node | None]:
    """``read``, each path read at most once (its node, or the error it raised again)."""
    seen: dict[str, Node | Exception | None] = {}

    def once(rel: str) -> Node | None:
        if rel not in seen:
            try:
                seen[rel] = read(rel)
            except (OSError, MalformedNodeFileError, UnsafePathError) as exc:
                seen[rel] = exc
        got = seen[rel]
        if isinstance(got, Exception):
            raise got
        return got

    return once


def record_twins(
    engine: Engine,
    log: AppendLog,
    taken: list[Entry],
    records: list[dict[str, Any]],
    read: Callable[[str], Node | None] | None = None,
) -> None:
    """Record (:data:`md_cg.audit.TWIN`, once each) every file of ``taken`` -- files a sync
    just took in -- that another clone renamed from an id this clone still holds: its
    ``renamed_from`` lists the id, and the node there has its creation time. Git missed the
    rename (a short note renamed to a long id falls under its similarity threshold) and a
    merge kept both files. Only the taken files are read, their bytes parsed only when they
    mention ``renamed_from``; ``health()`` names the pair from the record, reading none."""
    entries = engine.state.entries
    known = {(r["id"], r.get("to")) for r in records if audit.usable(r) and r.get("event") == audit.TWIN}
    read = read or audit.renamed_reader(engine.root_str)
    found: list[dict[str, Any]] = []
    now = time.time()
    for e in taken:
        try:
            node = read(e.path) if e.created_at is not None else None
        except (OSError, MalformedNodeFileError, UnsafePathError):
            continue
        for old in dict.fromkeys(audit.earlier_ids(node) if node is not None else ()):
            other = entries.get(old)
            if old == e.id or other is None or other.created_at != e.created_at or (old, e.id) in known:
                continue
            found.append(
                {"event": audit.TWIN, "id": old, "to": e.id, "created_at": e.created_at, "time": now}
                | scope_fields(e)
            )
    if found:
        log.append(found, durable=True)


def twin_findings(
    state: IndexState, records: list[dict[str, Any]], named: Collection[str], absent: Collection[str] = ()
) -> list[Finding]:
    """A ``renamed_twin`` finding for each :data:`md_cg.audit.TWIN` record whose two ids
    both hold the memory still (its creation time), but not for an old id in ``named``
    (a ``renamed_returned`` finding, which this clone's own rename record gave, names it)
    nor for a pair with an id in ``absent`` (outside the caller's scope: never named)."""
    out: list[Finding] = []
    for old, new in _record_pairs(state, records, audit.TWIN, named, absent, undated=False):
        detail = (
            f"the same memory as {new.id!r} ({new.path}), whose renamed_from lists this id: another clone "
            f"renamed it and a merge kept both files; take what you need into {new.id!r}, then `delete` "
            "this one (not `forget`: that forgets the memory), or rename one"
        )
        out.append(Finding("renamed_twin", detail, old.path, old.id))
    return sorted(out, key=lambda f: f.node_id or "")


def _record_pairs(
    state: IndexState,
    records: list[dict[str, Any]],
    event: str,
    skip_old: Collection[str],
    absent: Collection[str],
    *,
    undated: bool,
) -> Iterator[tuple[Entry, Entry]]:
    """The (old, new) entries of each ``event`` record of ``records`` (old id ``id``, new
    id ``to``) while both ids hold the memory: both have the record's creation time (with
    ``undated``, none at all counts as one), once a pair; not for an old id in ``skip_old``
    nor a new one in ``absent``."""
    seen: set[tuple[str, str]] = set()
    for r in records:
        if not audit.usable(r) or r.get("event") != event or not isinstance(r.get("to"), str):
            continue
        old, new = state.entries.get(r["id"]), state.entries.get(r["to"])
        if old is None or new is None or (old.id, new.id) in seen or old.id in skip_old or new.id in absent:
            continue
        if not (old.created_at == r.get("created_at") == new.created_at) or (
            old.created_at is None and not undated
        ):
            continue  # one id holds another memory now
        seen.add((old.id, new.id))
        yield old, new


def interrupted_findings(
    state: IndexState, records: list[dict[str, Any]], absent: Collection[str] = ()
) -> list[Finding]:
    """A ``rename_interrupted`` finding for each :data:`md_cg.audit.INTERRUPTED` record (a
    rename killed after its commit line, whose old file was changed after the crash: the
    recovery kept it beside the new one) while both ids hold the memory: both have the
    record's creation time, or, for a memory without one (hand-written: every write of
    md-cg sets it), neither has one (a memory added under the old id since has one); not
    for a pair with an id in ``absent`` (never named)."""
    out: list[Finding] = []
    for old, new in _record_pairs(state, records, audit.INTERRUPTED, absent, absent, undated=True):
        detail = (
            f"the rename of {old.id!r} to {new.id!r} was interrupted by a crash and the old file "
            f"({old.path}) was edited afterwards: both are kept ({new.id!r} at {new.path}); merge them: "
            f"take what you need into {new.id!r}, then `delete` {old.id!r} (not `forget`: that forgets "
            "the memory)"
        )
        out.append(Finding("rename_interrupted", detail, old.path, old.id))
    return sorted(out, key=lambda f: f.node_id or "")


def _taken(engine: Engine, report: SyncReport) -> list[Entry]:
    entries = engine.state.entries
    return [entries[i] for i in dict.fromkeys((*report.added, *report.changed)) if i in entries]


def _sync_locked(engine: Engine, recovered: int, undone: int, *, scope: Scope | None = None) -> SyncReport:
    state = engine.state
    if state.unread:
        # written through md-cg where this process could not read them: the files readable
        # now are taken in as the log wrote them (no hand change to tell), the rest stay
        index.resolve_ids(engine.root_str, state, {i: [rel] for i, rel in state.unread.items()})
    scan = index.scan_files(engine.root_str)
    files = scan.files
    touched: dict[str, list[str]] = {}
    malformed: dict[str, str] = {}
    # What the index holds (without building an entry of an open from a snapshot),
    # against the files: each indexed path takes its file out of ``unknown``.
    unknown = dict(files)
    for node_id, path, mtime_ns, size in state.entries.placed():
        st = unknown.pop(path, None)
        if st is None and scan.unreadable and scan.hidden_by(path):
            continue  # in a folder this process may not read: kept as indexed
        if st is None or st.st_mtime_ns != mtime_ns or st.st_size != size:
            touched.setdefault(node_id, []).append(path)  # gone, or changed
    for rel in unknown:
        _touch_file(engine, rel, touched, malformed)
    for node_id, losers in state.duplicates.items():  # a losing copy removed since: settle the id again
        if any(rel not in files for rel in losers) and node_id in state.entries:
            touched.setdefault(node_id, []).append(state.entries[node_id].path)
    for rel in list(state.problems):
        if rel not in files:
            del state.problems[rel]
    changes = _settle_touched(engine, touched, malformed, log=True, scope=scope)
    state = engine.state  # the same one unless following the log reloaded the index
    unread = {rel: index.PERMISSION_DENIED for rel in state.unread.values()}
    return SyncReport(
        **changes,
        malformed=tuple(sorted({**unread, **state.problems}.items())),
        duplicates=tuple(sorted((i, p) for i, losers in state.duplicates.items() for p in losers)),
        refused=tuple(sorted(scan.refused.items())),
        twins=tuple(tuple(v) for v in state.twins().values()),
        conflicts=conflicts(state),
        recovered=recovered,
        temp_removed=tuple(_remove_abandoned_temps(engine, scan)),
        undone=undone,
        hidden=_cycles(state),
    )


def _cycles(state: IndexState) -> tuple[tuple[str, str], ...]:
    """(id, path) of the memories in a ``supersedes`` cycle (a merge of opposite
    supersedes: ``supersede_cycle``), for :attr:`SyncReport.hidden`. Looks only at the
    ids named in ``supersedes`` edges and the entries of the memories naming them."""
    out: dict[tuple[str, str], None] = {}
    for cycle in _supersede_cycles(state, time.time()):
        out.update({(i, state.entries[i].path): None for i in cycle})
    return tuple(out)


def conflicts(state: IndexState) -> tuple[tuple[str, str], ...]:
    """(id, path) of every node whose file holds an unresolved git merge conflict."""
    return tuple(sorted((e.id, e.path) for e in state.entries.conflicted()))


def _touch_file(engine: Engine, rel: str, touched: dict[str, list[str]], malformed: dict[str, str]) -> None:
    """Parse a file the index does not hold (or holds stale) and note its id."""
    try:
        parsed: Parsed = index.parse_file(engine.root_str, rel)
    except (MalformedNodeFileError, UnsafePathError) as exc:
        malformed[rel] = exc.reason
        return
    except (FileNotFoundError, NotADirectoryError):
        return
    touched.setdefault(parsed.entry.id, []).append(rel)


def _settle_touched(
    engine: Engine,
    touched: dict[str, list[str]],
    malformed: dict[str, str],
    *,
    log: bool,
    scope: Scope | None = None,
    had: Collection[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Resolve ``touched`` against the disk; log the changes (if ``log``) and sort them;
    for a ``scope``, only the deletions it may be told (:func:`_told_deletions`); the
    changes of memories it does not admit are logged as untold, for a sync that may tell
    them (:func:`_leave_untold`). ``had``
    (a pick-up's: the (id, path) of each copy recorded before it): a look that fell inside
    another process's write is made again once that write closed (:func:`_looked_again`).

    Another process's writes through md-cg are not hand edits (:func:`_hand_made`): the
    log is followed first, so a file whose commit line is there (appended before the
    file lands) is in the index as it is on disk -- a scan or watch that saw the file
    before this process read the line took it for one (77 of 200 archives another process
    made during a ``sync``, every one to a pick-up) --, and a file a line appended while
    this ran put there is not reported either. A file a person changed after such a write
    is (:attr:`md_cg.engine.Engine.hand_after`, noted whenever this process follows the
    log: a read's refresh, a pick-up, a sync)."""
    root = engine.root_str
    engine.refresh()
    before: dict[str, Entry | None] = {i: engine.state.entries.get(i) for i in touched}
    copies = {i: set(engine.state.duplicates.get(i, ())) for i in touched}
    changes, records, late = _look(engine, touched, before, malformed)
    if had is not None:
        look = (changes, records, late)
        changes, records, late = _looked_again(engine, touched, before, malformed, had, look)
    state = engine.state
    _log_copies(state, copies, records)
    held = _held_before(before, engine.hand_after)
    broken = _broken_in_place(root, held, engine.hand_after, state.problems)
    changes = _hand_made(engine, changes, late, records, scope)
    changes["deleted"] = [i for i in changes["deleted"] if i not in broken]
    if scope is not None:  # one copy of a duplicated id standing for another, as the scope sees them
        changes = _seen_first(scope, (held, state.entries), copies, changes)
    untold = _leave_untold(engine, scope, held, changes) if scope is not None else {}
    for key, more in copyfate.tell(root, state, engine.copies_logged, scope, changes).items():
        records[key].extend(more)  # its own copy's fate, from the copies a sync line logged
    if records["put"] or records["del"]:
        line = journal.sync_record(root, records, state.entries)
        if untold:
            line[journal.UNTOLD] = [[i, kind, rel] for i, (kind, rel, _was) in untold.items()]
        known = {i: {*copies.get(i, ()), *([] if e is None else [e.path])} for i, e in before.items()}
        copyfate.log(root, state, engine.copies_logged, line, scope, (copyfate.told_ids(changes), known))
        if log:
            shard, nbytes, _ = engine.journal.append([line])
            engine.advance(shard, nbytes)
        _took_in(engine, line)
    return {
        "added": tuple(sorted(changes["added"])),
        "changed": tuple(sorted(changes["changed"])),
        "deleted": tuple(sorted(changes["deleted"])),
        "moved": tuple(sorted(changes["moved"], key=lambda m: m.node_id)),
    }


Look = tuple[dict[str, list[Any]], dict[str, list[Any]], journal.UnreadWrites]


def _look(
    engine: Engine, touched: dict[str, list[str]], before: dict[str, Entry | None], malformed: dict[str, str]
) -> Look:
    """:func:`_settle_touched`'s look at the files: ``touched`` resolved against the disk
    (``before`` gains each id a file holds now, so it is told too), the changes and sync
    records against ``before``, and the commit lines appended since the log was followed.
    An id held before that the look found nowhere while the log past the follow names a
    write of it (another process's re-tag renamed its new file in between the look at the
    new path and the look at the old one) is settled again with the paths named there, as
    a follow of the log settles it (:func:`md_cg.engine.moved_on`): a look that stands --
    the last of :func:`_looked_again`'s -- dropped it untold, and the search after the
    pick-up found nothing (session 42's CI: one search in about 100 of
    tests/test_pickup_wait_s35.py). A person's ``rm`` is not in the log: still dropped."""
    state = engine.state
    index.resolve_ids(engine.root_str, state, touched, before)
    lost = [i for i in touched if i not in state.entries and before.get(i) is not None]
    if lost:
        moved_on(engine, lost, touched, [])
    state.problems.update(malformed)
    changes, records = _classify(state, before, functools.partial(_same_bytes, engine))
    cursor = engine.cursor
    live = [c for c in cursor.pending.values() if c.key not in cursor.dead]
    return changes, records, journal.unread_writes(engine.root_str, cursor.offsets, live)


def _looked_again(
    engine: Engine,
    touched: dict[str, list[str]],
    before: dict[str, Entry | None],
    malformed: dict[str, str],
    had: Collection[tuple[str, str]],
    look: Look,
) -> Look:
    """A pick-up's ``look``, made again while it fell inside another process's write: an
    id it would tell (or drop, or list a copy of not in ``had``) that a live writer's
    commit still open, or a commit line appended since the log was followed, writes
    (:func:`_in_flight`).
    A re-tag moves a file between bucket folders (its commit line, the new file renamed
    in, the old one removed): a look between them took md-cg's move for a person's --
    told the id ``deleted``, ``moved`` or a duplicate, logged it, and dropped it, so the
    next search found nothing (review rD: 1 in 168 searches through the MCP server; 3-12
    in about 300 with a pick-up before each). So: wait until those commits close (at
    most :data:`md_cg.engine.MOVE_WAIT`, never twice for one stalled commit:
    :func:`_closed`, for all the looks together), follow the log, and look again at
    ``touched`` plus the paths those lines name, each such id (and each the follow
    changed: writers move other memories meanwhile) judged against the index as the
    follow left it -- as a pick-up made after the write judges it: a hand change
    made while the write was open is told then, as one made after a write is. Nothing is
    skipped: session 34 left such ids untold (23a466c, reverted), which hid a person's
    ``mv`` made during a write. A commit nobody is at work on (stalled, dead), or one
    still open after the wait, or :data:`RELOOKS` looks: the last look stands."""
    deadline = time.monotonic() + min(engine.lock_timeout, MOVE_WAIT)
    for _ in range(RELOOKS):
        changes, _records, late = look
        ids = {*changes["added"], *changes["changed"], *changes["deleted"]}
        ids.update(m.node_id for m in changes["moved"])
        dups = engine.state.duplicates
        ids.update(i for i in before if any((i, rel) not in had for rel in dups.get(i, ())))
        moving = _in_flight(engine, ids, late) if ids else None
        if moving is None or not _closed(engine, *moving, deadline):
            break
        followed = {i for i in engine.refresh() if i in before}  # other ids' writes too
        for node_id, rels in moving[1].items():
            cands = touched.setdefault(node_id, [])
            cands.extend(r for r in dict.fromkeys(rels) if r not in cands)
            followed.add(node_id)
        before.update({i: engine.state.entries.get(i) for i in followed})
        look = _look(engine, touched, before, malformed)
    return look


def _in_flight(
    engine: Engine, ids: set[str], late: journal.UnreadWrites
) -> tuple[set[tuple[str, int]], dict[str, list[str]]] | None:
    """The keys of the commits that write one of ``ids`` -- a live writer's still open when
    the log was followed, or one whose line was appended since (``late``) -- and, for each
    of ``ids`` they write, the paths they name; None when there is none (the common case:
    nothing more is read)."""
    cursor = engine.cursor
    live = [c for c in cursor.pending.values() if c.key not in cursor.dead and not c.ids.isdisjoint(ids)]
    if not live and late.ids.isdisjoint(ids):
        return None
    rels: dict[str, list[str]] = {}
    for c in live:
        for node_id, named in c.touched().items():
            rels.setdefault(node_id, []).extend(named)
    lines = [
        w for w in journal.logged_writes(journal.read_tail(engine.root_str, cursor.offsets)) if w.id in ids
    ]
    for w in lines:
        rels.setdefault(w.id, []).append(w.rel)
    keys = {c.key for c in live} | {w.key for w in lines}
    return (keys, {i: r for i, r in rels.items() if i in ids}) if keys else None


def _closed(engine: Engine, keys: set[tuple[str, int]], rels: dict[str, list[str]], deadline: float) -> bool:
    """Wait until no commit of ``keys`` is open and worked on; whether one of them closed
    (then a look again sees the files it wrote). A commit whose writer is gone, or whose
    live writer no process is at work on (:func:`md_cg.engine.idle_commits`: stopped
    midway), is not waited for (a writer closing one between the read of the log and that
    check is told by its ``done`` line, read again then: taken for stopped, it left about
    one look in 500 of a loop of re-tags to stand); one still worked on at ``deadline``
    (:data:`md_cg.engine.MOVE_WAIT` after the pick-up's first look) is not waited for again
    by this engine (:func:`md_cg.engine.waited_once`), as a read's wait."""
    while True:
        probe = copy.deepcopy(engine.cursor)  # the log is only looked at: the cursor stays
        journal.replay(probe, journal.read_tail(engine.root_str, probe.offsets))
        journal.mark_dead(probe, journal.find_dead(engine.root_str, probe))
        idle = idle_commits(engine, probe, rels)
        if idle:  # its writer may have closed it since the log was read: its done line says
            journal.replay(probe, journal.read_tail(engine.root_str, probe.offsets))
            journal.mark_dead(probe, idle)
        still = [k for k in keys if k in probe.pending and k not in probe.dead]
        if not still:
            return any(k not in probe.pending for k in keys)
        if time.monotonic() >= deadline:
            waited_once(engine, probe, rels)
            return False
        time.sleep(0.001)  # let the writer finish its move


def _same_bytes(engine: Engine, old: Entry, new: Entry) -> bool:
    """Whether ``new`` differs from ``old`` by its mtime alone and its file holds the bytes
    this process's sync took in as ``old`` (:attr:`md_cg.engine.Engine.took_in`): a
    ``touch``, or a re-save or ``cp`` of the same bytes, is no change. Without it a
    long-lived handle (the MCP server) told every such file it had taken in itself as
    ``changed`` (review r7: 5,000 touched files), though a process following its sync
    line did not."""
    took = engine.took_in.get(new.id)
    if took is None or took != (old.path, old.mtime_ns, old.size, took[3]) or new.size != old.size:
        return False
    if replace(old, mtime_ns=new.mtime_ns) != new:
        return False
    return journal.holds_logged(engine.root_str, new.path, [((new.size, took[3]), None)])


def _took_in(engine: Engine, line: dict[str, Any]) -> None:
    """Note the (path, mtime, size, CRC-32) of each file a sync ``line`` took in, for
    :func:`_same_bytes`; an id it deletes, or logs no CRC of, is forgotten."""
    for (node_id, rel), held, crc in zip(line["put"], line["stat"], line["crc"], strict=True):
        if held is not None and crc is not None:
            engine.took_in[node_id] = (rel, held[0], held[1], crc)
        else:
            engine.took_in.pop(node_id, None)
    for node_id, _rel in line["del"]:
        engine.took_in.pop(node_id, None)


def _leave_untold(
    engine: Engine, scope: Scope, held: Mapping[str, Entry | None], changes: dict[str, list[Any]]
) -> dict[str, Noted]:
    """A scoped sync's changes (``changes``, ``deleted`` left with those it may be told:
    :func:`_told_deletions`) it does not tell -- another scope's memory its look at the
    files found removed, changed, moved or new by hand, or one narrowed by hand out of the
    scope --: each is noted (:attr:`md_cg.engine.Engine.hand_after`: ``"gone"`` with the
    entry held before, ``"changed"``, ``"moved"`` from the path held, ``"added"``), as a
    follow notes a hand change after a write, for the next sync of a scope that admits it
    (or an unscoped one) and for a compaction (:func:`_gone_notes`), and returned: the
    sync line lists them (:data:`md_cg.journal.UNTOLD`), so that every process following
    it takes the change in and notes it too (:func:`md_cg.engine.note_untold`). Until
    session 39 the line logged them as told: every process following it took another
    scope's change in as told to no one; session 39 left them out of the line, and a
    process of the memory's scope knew nothing of them before its own sync looked (a
    rename pulled by git had no departure there). ``held``: the entries before the sync
    (:func:`_held_before`)."""
    entries = engine.state.entries
    told = _told_deletions(scope, held, changes["deleted"], engine.state.problems)
    untold: dict[str, Noted] = {}
    for node_id in changes["deleted"]:
        was = held.get(node_id)
        if node_id not in told and was is not None and not _broken_beside(engine.state, node_id, was):
            untold[node_id] = ("gone", was.path, was)
    for kind in ("added", "changed"):
        for node_id in changes[kind]:
            e = entries.get(node_id)
            if e is not None and not scope.admits(e):
                untold[node_id] = (kind, e.path, held.get(node_id))
    for m in changes["moved"]:
        e = entries.get(m.node_id)
        if e is not None and not scope.admits(e):
            untold[m.node_id] = ("moved", m.old_path, held.get(m.node_id))
    changes["deleted"] = told
    note_untold(engine, untold.items())
    return untold


def _broken_beside(state: IndexState, node_id: str, was: Entry) -> bool:
    """Whether the copy ``was`` of ``node_id`` is a file broken by hand (listed as malformed,
    its memory back once it is fixed) while another copy of the id stands: nothing is gone.
    Session 41: a's sync noted its own broken copy ``gone`` for the other processes while
    b's copy stood, and each of them then held a removal by hand that never happened."""
    return was.path in state.problems and node_id in state.entries


def _admits_now(scope: Scope, now: Entry | None, was: Entry | None) -> bool:
    """Whether ``scope`` is told of a memory, as a scoped sync's report tells it
    (:func:`md_cg.reports.scoped_sync`): by the entry held now, or, for a memory gone,
    the one held before (:func:`_told_deletions`)."""
    e = now if now is not None else was
    return e is not None and scope.admits(e)


def _held_before(before: Mapping[str, Entry | None], noted: Mapping[str, Noted]) -> dict[str, Entry | None]:
    """``before`` (the entries this sync resolves, as the index held them), with, for an
    id it held none of, the entry a follow dropped when it noted the id's file gone after
    another process's write (:attr:`md_cg.engine.Engine.hand_after`), at the path the
    note names (the write's: where the file was last). Without it such a deletion had no
    scope, and a scoped sync told none of them (a shared memory's neither). A scope change
    that write made (an unscoped writer's ``update``) is not known: the file is gone."""
    held = dict(before)
    for node_id, (kind, rel, was) in noted.items():
        if kind == "gone" and was is not None and held.get(node_id) is None:
            held[node_id] = replace(was, path=rel)
    return held


def _told_deletions(
    scope: Scope, before: Mapping[str, Entry | None], deleted: list[str], problems: Collection[str]
) -> list[str]:
    """The ids of ``deleted`` a ``scope`` may be told: those whose node, as the index held
    it before this sync removed it -- or before a follow of another process's write
    dropped it, its file gone (:func:`_held_before`) -- the scope admits. Told after the
    sync, when the node is held by nothing, a scoped handle's report named no deletion at
    all (an unscoped shared memory removed by hand was not told to the MCP server, which
    runs with a scope); another scope's memory is never named. A deletion of a node this
    process never held (another process added it, and its file was gone when this one
    followed the add) is not told: its scope was never known here (an unscoped sync
    tells it). Nor is one whose file a hand edit broke (``problems``: malformed now): the
    scope is counted that file (``withheld``), never pointed at it -- it may hold another
    scope's memory now."""
    out: list[str] = []
    for node_id in deleted:
        was = before.get(node_id)
        if was is not None and scope.admits(was) and was.path not in problems:
            out.append(node_id)
    return out


def _log_copies(state: IndexState, had: Mapping[str, set[str]], records: dict[str, list[Any]]) -> None:
    """Name in the sync line the copies of a duplicated id this sync found (``had``: the
    copies known before it), before the copy that stands here: a process following the
    line learns of them and settles the id with its own ranking -- a scoped one serves its
    scope's copy (:func:`md_cg.engine.take_scope`). Unlogged, another scope's handle
    opened after the sync never knew its own copy was there, and served nothing."""
    found = [(i, rel) for i, was in had.items() for rel in state.duplicates.get(i, ()) if rel not in was]
    if not found:
        return
    standing = {i for i, _rel in records["put"]}
    later = [[i, state.entries[i].path] for i in dict.fromkeys(i for i, _rel in found) if i not in standing]
    records["put"][:0] = [[i, rel] for i, rel in found]  # the standing copy's put last: it stands
    records["put"].extend(later)


def _seen_first(
    scope: Scope,
    entries: tuple[Mapping[str, Entry | None], Mapping[str, Entry]],
    copies: Mapping[str, set[str]],
    changes: dict[str, list[Any]],
) -> dict[str, list[Any]]:
    """``changes`` as a ``scope`` sees them, where one copy of a duplicated id stands for
    another (:func:`md_cg.engine.take_scope`): an id whose entry before the sync
    (``entries[0]``) the scope does not admit and whose entry after it (``entries[1]``) it
    does is ``added`` (its own copy stands now), and one that had other copies
    (``copies``) whose entry before it the scope admits (or none) and whose entry after it
    does not is ``deleted`` (its own copy is gone) -- not ``changed`` or ``moved`` between
    the two copies' files: session 39, a scoped sync told "moved" from another scope's
    path. A change of a memory the scope admits neither before nor after stays as it is,
    for :func:`_leave_untold` to note as such: taken for ``added``, another scope's memory
    edited or moved by hand was noted ``added``, and told so to its own scope (session 40,
    the merge of s40-shadow and s40-scopelook). (One memory narrowed out of the scope by
    hand is still not told.)"""
    before, after = entries

    def admits(entry: Entry | None) -> bool | None:
        return None if entry is None else scope.admits(entry)

    ids = [*changes["changed"], *(m.node_id for m in changes["moved"])]
    seen = {i: (admits(before.get(i)), admits(after.get(i))) for i in ids}
    came = {i for i, (was, now) in seen.items() if was is False and now}
    went = {i for i, (was, now) in seen.items() if copies.get(i) and was is not False and now is False}
    if not came and not went:
        return changes
    told = came | went
    return {
        **changes,
        "added": [*changes["added"], *sorted(came)],
        "deleted": [*changes["deleted"], *sorted(went)],
        "changed": [i for i in changes["changed"] if i not in told],
        "moved": [m for m in changes["moved"] if m.node_id not in told],
    }


def _broken_in_place(
    root: str, held: Mapping[str, Entry | None], noted: Mapping[str, Noted], problems: Collection[str]
) -> set[str]:
    """The ids whose file -- where the index held it (``held``), or where another
    process's write put it (a ``"gone"`` note of ``noted``: the follow dropped the id) --
    is still there, a regular file, but does not parse now (``problems``: a hand edit
    broke it, a merge without md-cg's driver left conflict markers in it). They are not
    deleted: the file is listed as malformed, as ``health()`` lists it
    (``unreadable_file``), and the memory is back at the sync after it is fixed (told
    ``added``: it was out of the index meanwhile). Session 33 told both (``deleted (3):
    m1, m2, m3`` beside the same three files under ``malformed``: review r2, git3.py). A
    symlink put in its place is no file of the memory (refused, never followed): deleted."""
    at = {i: was.path for i, was in held.items() if was is not None and was.path in problems}
    at.update({i: rel for i, (kind, rel, _was) in noted.items() if kind == "gone" and rel in problems})
    return {i for i, rel in at.items() if _regular_file(root, rel)}


def _regular_file(root: str, rel: str) -> bool:
    try:
        return stat.S_ISREG(fsops.lstat(root, rel).st_mode)
    except (OSError, UnsafePathError):
        return False


def _hand_made(
    engine: Engine,
    changes: dict[str, list[Any]],
    late: journal.UnreadWrites,
    records: dict[str, list[Any]] | None,
    scope: Scope | None = None,
) -> dict[str, list[Any]]:
    """``changes`` as hand edits alone. ``late``: the writes of lines appended since the
    log was followed -- an id they write whose file holds what they logged (or that they
    delete) is theirs, not reported. With the files other processes wrote that a person
    changed after (:attr:`md_cg.engine.Engine.hand_after`, taken here): ``changed``, or,
    gone, ``deleted`` -- ``moved`` when this look found the id at another path --,
    ``moved`` when the follow found it at a path other than the write's (moved back by
    hand or by a ``git checkout``, out of ``archive/`` too; not while a write of it is
    still open), or ``added`` when a file holds again an id a write or a sync deleted; a
    file a sync took in whose
    mtime moved (:data:`md_cg.journal.TOUCHED`) is read, and ``changed`` only when it no
    longer holds the bytes the sync line logged (its CRC-32). Each is
    added to the sync's ``records``, so that a process following the log after this one
    knows the change was told (:func:`md_cg.journal.hand_edits_after`) and does not tell
    it again. A ``scope``'s sync takes only the notes it may tell (:func:`_taken_notes`),
    and logs them too: until session 40 it logged none (``records`` None: a line of it
    made every other process drop a change no one was told, r7, when it took every
    note), and a removal a scoped compaction kept a note of was told by every fresh
    process of the memory's scope (attack atk8 of session 39, finding 1)."""
    records = records if records is not None else {"put": [], "del": []}
    root, entries = engine.root_str, engine.state.entries

    def theirs(node_id: str) -> bool:
        e = entries.get(node_id)
        if node_id not in late.ids:
            return False
        return e is None or (e.path in late.puts and journal.holds_logged(root, e.path, late.puts[e.path]))

    gone = {i for i, (kind, _rel, _was) in engine.hand_after.items() if kind == "gone"}
    after = _taken_notes(engine, scope, changes["added"])
    # a write still open moves it (an archive in flight): not a hand move
    still_open = {i for c in engine.cursor.pending.values() for i in c.ids}
    out = {
        "added": [i for i in changes["added"] if not theirs(i) and i not in gone],
        "changed": [i for i in changes["changed"] if not theirs(i)],
        "deleted": [i for i in changes["deleted"] if not theirs(i)],
        "moved": [m for m in changes["moved"] if not theirs(m.node_id)],
    }
    told = {*changes["added"], *changes["changed"], *changes["deleted"]}
    told.update(m.node_id for m in changes["moved"])
    for node_id, (kind, rel, _was) in sorted(after.items()):
        e = entries.get(node_id)
        if kind == "gone" and e is not None and node_id in changes["added"] and not theirs(node_id):
            out["moved"].append(Moved(node_id, rel, e.path))  # renamed or moved by hand after the write
            records["del"].append([node_id, rel])
        elif node_id in told or theirs(node_id):
            continue  # told by this look already, or written over by a write landing meanwhile
        elif kind == "changed" and e is not None and e.path == rel:
            out["changed"].append(node_id)
            records["put"].append([node_id, rel])
        elif kind == "gone" and e is None:
            out["deleted"].append(node_id)
            records["del"].append([node_id, rel])
        elif kind == "added" and e is not None:
            out["added"].append(node_id)  # deleted by a write or a sync, back in a file since
            records["put"].append([node_id, e.path])
        elif kind == "moved" and e is not None and e.path != rel and node_id not in still_open:
            out["moved"].append(Moved(node_id, rel, e.path))  # moved back by hand, or by a checkout
            records["del"].append([node_id, rel])
            records["put"].append([node_id, e.path])
        elif (check := journal.touched_check(kind)) is not None and e is not None and e.path == rel:
            # its mtime moved since a sync took it in: changed only when its bytes did; either
            # way the line logs its stat now, so the next follow does not read it again
            if not journal.holds_logged(root, rel, [(check, None)]):
                out["changed"].append(node_id)
            records["put"].append([node_id, rel])
    return out


def _taken_notes(engine: Engine, scope: Scope | None, added: Collection[str]) -> dict[str, Noted]:
    """The notes of files changed by hand after another process's write
    (:attr:`md_cg.engine.Engine.hand_after`) a sync takes to tell (:func:`_hand_made`),
    taken out of the engine's: every note, without a ``scope``; with one, those of the ids
    it admits -- by the entry the index holds now, or, for a memory gone, the one it held
    before the note (``was``): :func:`_admitted` -- as it is told of them
    (:func:`_told_deletions`, :func:`md_cg.reports.scoped_sync`; the notes of the changes
    its look finds and does not tell join them: :func:`_leave_untold`).
    The other notes stay, for the next sync of a scope that admits them (or an unscoped
    one) and for a compaction to keep (:func:`_gone_notes`): until session 38 a scoped sync
    took every note, and the other scopes' changes were told to no one -- the same
    process's next sync told nothing, its compaction kept no note of them (attack of session
    37, F4). Among those, a note without either entry (its id settled by a sync line, then
    gone) is left to an unscoped sync, which tells it. A note left of an id gone that this
    sync found at another path (``added``: a person moved its file, and the sync took it
    in) is one of a move from the noted path (``"moved"``), for that sync to tell."""
    notes = engine.hand_after
    if scope is None:
        engine.hand_after = {}
        return dict(notes)
    entries = engine.state.entries
    taken = {i: n for i, n in notes.items() if _admitted(scope, n, entries.get(i))}
    for node_id in taken:
        del notes[node_id]
    for node_id in [i for i in added if i in notes and i in entries]:
        kind, rel, was = notes[node_id]
        if kind == "gone":
            notes[node_id] = ("moved", rel, was)
    return taken


def _admitted(scope: Scope, noted: Noted, now: Entry | None) -> bool:
    """Whether ``scope`` admits the memory of a note (:func:`_taken_notes`): by the entry
    held now, or, for a memory gone, the one held before the note (:func:`_admits_now`).
    Until session 39 either did: a memory narrowed by hand out of the scope was taken by
    its sync, which did not tell it (the report names what the scope sees now)."""
    return _admits_now(scope, now, noted[2])


def _notes_to_tell(engine: Engine, scope: Scope | None) -> bool:
    """Whether a sync with ``scope`` has notes of the engine's to take
    (:func:`_taken_notes`): a pick-up with no file changed looks no further when it has
    none -- the notes of other scopes it leaves would make it look at every call."""
    if scope is None or not engine.hand_after:
        return bool(engine.hand_after)
    entries = engine.state.entries
    return any(_admitted(scope, n, entries.get(i)) for i, n in engine.hand_after.items())


def _touch_copies(state: IndexState, rels: Collection[str], touched: dict[str, list[str]]) -> None:
    """Add to a pick-up's ``touched`` (id -> candidate paths) the other copies of its ids.

    A sync reads every file, so each copy of a duplicated id is a candidate and the
    winner is chosen among them again; a pick-up reads only the files the watch named.
    Without the copies, removing the file the index pointed at dropped the id though
    another copy was on disk, and the sync line it logged made every other handle drop
    it too (review r4: ``deleted ('n1',)``, a fresh open found no node, the MCP server's
    ``remember`` wrote a second file beside the survivor) -- a sync told it ``moved``. So:
    a named path (or folder, ending in ``/``) that is a recorded losing copy
    (``state.duplicates``) touches its id, and every touched id gets its recorded copies.
    The record names every copy: the handle's stat scan and watch read every file, and a
    reload of the index keeps it (:meth:`HandEdits.carry`)."""
    where = {rel: node_id for node_id, losers in state.duplicates.items() for rel in losers}
    for rel in rels:
        if rel.endswith("/"):  # a folder moved away: the copies in it
            named = [(p, i) for p, i in where.items() if p.startswith(rel)]
        else:
            named = [(rel, where[rel])] if rel in where else []
        for path, node_id in named:
            touched.setdefault(node_id, []).append(path)
    for node_id, cands in touched.items():
        cands.extend(rel for rel in state.duplicates.get(node_id, ()) if rel not in cands)


def _unheld(root: str, state: IndexState, read: Collection[str]) -> set[str]:
    """The files of ``read`` on disk that no entry holds, nor the record of copies or of
    malformed files: a file edited to hold an id whose own file still stands (the id
    stays there at this settling, :func:`md_cg.index.resolve_ids`). A sync reads such a
    file again at its next call, as one no entry holds, and the id then has two copies;
    a pick-up reads it at its next call too (:attr:`HandEdits.pending`), though the watch
    names it no more (review r4 of session 33: the id never moved to the edited file, no
    duplicate was told, and ``get`` served the other text for the handle's lifetime)."""
    by_path = state.by_path()
    losers = {rel for copies in state.duplicates.values() for rel in copies}
    return {
        rel
        for rel in read
        if rel not in by_path
        and rel not in losers
        and rel not in state.problems
        and os.path.lexists(os.path.join(root, rel))
    }


def _problems_told(
    state: IndexState,
    touched: Mapping[str, list[str]],
    changes: Mapping[str, tuple[Any, ...]],
    malformed: Collection[str],
    had: Collection[tuple[str, str]],
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The ``malformed`` and ``duplicates`` of a pick-up's report, as a sync reports them:
    the files it read (the candidates in ``touched``, and ``malformed``: files no entry
    held that it could not read) still unreadable, and the copies of the ids it settled
    (``touched``'s and those its ``changes`` name) not recorded before it (``had``: (id,
    path) pairs). It told neither (review r4: a ``cp`` making a second copy of an id, a
    typo breaking a frontmatter, were told by a sync and not by the MCP server's pick-up).
    A sync lists every one in the store at every call; a pick-up tells a copy once, when
    it first records it -- a stat scan settles every file no entry holds again, and told
    each copy at every scan (without inotify: every call) though nothing changed."""
    ids = set(touched)
    ids.update(*(changes[k] for k in ("added", "changed", "deleted")))
    ids.update(m.node_id for m in changes["moved"])
    read = {*malformed, *(rel for cands in touched.values() for rel in cands)}
    copies = {(i, rel) for i in ids for rel in state.duplicates.get(i, ())}
    return (
        tuple(sorted((rel, state.problems[rel]) for rel in read if rel in state.problems)),
        tuple(sorted(copies.difference(had))),
    )


def _twins_told(
    state: IndexState, touched: Mapping[str, list[str]], changes: Mapping[str, tuple[Any, ...]]
) -> tuple[tuple[str, ...], ...]:
    """The ``twins`` of a pick-up's report, as a sync reports them (the ids of each id key
    held by more than one indexed id), for the keys of the ids it settled (``touched``'s
    and those its ``changes`` name). It told none (review rC of session 34: a hand-made
    ``alpha-note.md`` beside ``Alpha-Note`` was told ``added`` alone, where a sync of the
    same state told the pair under ``twins`` too, and a scoped handle's pick-up answered
    None where the sync counted it in ``withheld``: the MCP server never heard of it)."""
    if not state.twin_keys:
        return ()
    ids = set(touched)
    ids.update(*(changes[k] for k in ("added", "changed", "deleted")))
    ids.update(m.node_id for m in changes["moved"])
    keys = {paths.id_key(i) for i in ids}
    return tuple(tuple(v) for k, v in state.twins().items() if k in keys)


def stale_paths(engine: Engine, malformed_seen: dict[str, tuple[int, int]] | None = None) -> set[str]:
    """Paths whose files differ from the index by a stat (new, changed, gone): a full stat scan.

    A file recorded as malformed is not read again while it stays as it was: with
    ``malformed_seen`` (a long-lived handle's record of their stats, kept up to date
    here) one whose stat moved since is stale -- fixed by hand, it is taken back. Without
    the record none was ever read again: a handle with no inotify never took back a
    file broken and then fixed (review b2; ``sync()`` told it ``added``)."""
    scan = index.scan_files(engine.root_str)
    files, problems = scan.files, engine.state.problems
    out = index.stale_by_stat(engine.state, scan)
    if malformed_seen is not None:
        now = {rel: (st.st_mtime_ns, st.st_size) for rel, st in files.items() if rel in problems}
        out.update(rel for rel, stat_now in now.items() if malformed_seen.get(rel) != stat_now)
        malformed_seen.clear()
        malformed_seen.update(now)
    return out


def _note_malformed(engine: Engine, read: set[str], seen: dict[str, tuple[int, int]]) -> None:
    """Record the stat of each file recorded malformed now that ``read`` (the paths a
    pick-up was given) names or that has no stat recorded yet (read while settling an
    id), for :func:`stale_paths` to see it change."""
    problems = engine.state.problems
    for rel in [r for r in seen if r not in problems]:
        del seen[rel]
    for rel in problems:
        if rel in read or rel not in seen:
            try:
                st = fsops.lstat(engine.root_str, rel)
            except (OSError, UnsafePathError):
                continue
            seen[rel] = (st.st_mtime_ns, st.st_size)


def sync_paths(
    engine: Engine, rels: set[str], *, scope: Scope | None = None, left: set[str] | None = None
) -> SyncReport:
    """Reconcile only the files at ``rels`` (from a :class:`md_cg.watch.ChangeWatch`).

    A path ending in ``/`` is a folder that moved away: every node indexed
    under it is resolved. On a writable store the changes are logged for
    other processes (under the store lock, shared); a read-only handle
    updates only its own view. ``scope``: the caller's, as for :func:`sync`.
    The recorded copies of the ids settled are candidates (:func:`_touch_copies`). The
    malformed files, duplicates and twins reported are those of the files read and the
    ids settled. ``left``, when given, gains the files read that no entry holds after
    (:func:`_unheld`): the next call reads them again, as a sync does.
    """
    state = engine.state
    by_path = state.by_path()
    touched: dict[str, list[str]] = {}
    malformed: dict[str, str] = {}
    for rel in sorted(rels):
        if rel.endswith("/"):
            for path, node_id in by_path.items():
                if path.startswith(rel):
                    touched.setdefault(node_id, []).append(path)
            continue
        if paths.rel_problem(rel) is not None:
            continue
        state.problems.pop(rel, None)
        known = by_path.get(rel)
        if known is not None:  # read by resolving its id, as a sync reads an indexed path
            touched.setdefault(known, []).append(rel)
        else:
            _touch_file(engine, rel, touched, malformed)
    _touch_copies(state, rels, touched)  # as a sync sees them
    had = {(i, rel) for i, losers in state.duplicates.items() for rel in losers}
    read = {rel for cands in touched.values() for rel in cands}
    read.update(state.entries[i].path for i in touched if i in state.entries)  # resolve_ids reads it
    if engine.read_only:
        changes = _settle_touched(engine, touched, malformed, log=False, scope=scope, had=had)
    else:
        engine.ensure_writable()
        with engine.lock, engine.maint.shared(engine.lock_timeout):
            changes = _settle_touched(engine, touched, malformed, log=True, scope=scope, had=had)
    bad, copies = _problems_told(engine.state, touched, changes, malformed, had)
    if left is not None:
        left.update(_unheld(engine.root_str, engine.state, read))
    return SyncReport(
        **changes, malformed=bad, duplicates=copies, twins=_twins_told(engine.state, touched, changes)
    )


def _classify(
    state: IndexState, before: dict[str, Any], same_bytes: Callable[[Entry, Entry], bool]
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The changes of the ids in ``before`` (their entries before the files were read
    again) and the sync line's records; a file ``same_bytes`` holds as it was taken in is
    logged (its stat moved) and not told."""
    changes: dict[str, list[Any]] = {"added": [], "changed": [], "deleted": [], "moved": []}
    records: dict[str, list[Any]] = {"put": [], "del": []}
    for node_id, old in before.items():
        new = state.entries.get(node_id)
        if old is None and new is not None:
            changes["added"].append(node_id)
        elif old is not None and new is None:
            changes["deleted"].append(node_id)
            records["del"].append([node_id, old.path])
            continue
        elif old is not None and new is not None and old.path != new.path:
            changes["moved"].append(Moved(node_id, old.path, new.path))
            records["del"].append([node_id, old.path])
        elif old != new and not same_bytes(old, new):
            changes["changed"].append(node_id)
        elif old != new:
            pass  # touched only: its new stat is logged
        else:
            continue
        assert new is not None
        records["put"].append([node_id, new.path])
    return changes, records


# -- health ---------------------------------------------------------------------------


def health(
    engine: Engine,
    *,
    deep: bool = False,
    extra: tuple[Finding, ...] = (),
    absent: Collection[str] = frozenset(),
    uncounted: Collection[str] = frozenset(),
    forgotten: Collection[str] = frozenset(),
    records: list[dict[str, Any]] | None = None,
) -> HealthReport:
    """Check the store; return typed findings (read-only: writes nothing).

    ``records``: the audit log's records the caller read (its ``renamed_twin`` lines
    name memories under two ids); None reads the log.

    An edge to an id in ``forgotten`` (a tombstone in this clone: forgotten, or
    swept when it expired) is no ``dangling_edge``: the forget named it, and a
    routine sweep must not leave the store unhealthy.

    ``deep=True`` also parses every file and compares its content (fields,
    route key, title, conditions, indexed text) with the index, like
    diskcache's ``check()``. Findings naming an id in ``absent`` (outside the
    caller's scope) are left out; ids in ``uncounted`` (hidden from default
    reads) are not counted in the layer, node and bucket figures.
    """
    with engine.lock:
        engine.fresh()
        state = engine.state
        scan = index.scan_files(engine.root_str)
        findings: list[Finding] = list(extra)
        findings += _file_findings(engine, scan)
        if records is None:
            records = AppendLog(engine.root_str, paths.AUDIT_DIR).read()
        brief = list(state.entries.brief())
        now_at = _renamed_finder(state, records, absent)
        findings += _entry_findings(state, scan, forgotten, absent, now_at, brief)
        findings = [_two_memories(engine, f) if f.kind == "merge_conflict" else f for f in findings]
        findings += supersession_findings(state, time.time(), absent)
        named = {f.node_id for f in extra if f.kind == "renamed_returned" and f.node_id}
        interrupted = interrupted_findings(state, records, absent)
        named |= {f.node_id for f in interrupted if f.node_id}
        findings += interrupted + twin_findings(state, records, named, absent)
        findings += _stray_findings(engine.root_str) + tracked_findings(engine.root_str)
        meta = _meta_findings(engine)
        if not (meta and meta[0].path == paths.META_DIR):
            findings = _log_findings(engine, findings)
            findings += _access_findings(engine.root_str)
        findings += meta
        findings += _temp_findings(engine, scan)
        if deep:
            findings += deep_findings(engine, scan.files)
        if absent:  # a scoped caller: counted there (reports.scoped_health), never named
            findings = [f for f in findings if f.node_id not in absent or f.kind in reports.WITHHELD_KINDS]
        layers, nodes, sizes = _counts(state, uncounted, brief)
        buckets = bucket_health({b: n for b, n in sizes.items() if n > 0})
        if buckets.degraded and buckets.nodes >= BUCKET_HEALTH_MIN_NODES:
            findings.append(Finding("bucket_degraded", "; ".join(buckets.reasons) + BUCKET_ADVICE))
        return HealthReport(layers=layers, nodes=nodes, buckets=buckets, findings=tuple(findings))


def _counts(
    state: IndexState, uncounted: Collection[str], brief: Iterable[tuple[str, str, str, str | None, bool]]
) -> tuple[dict[str, int], int, dict[str, int]]:
    """The memories of each layer, their number, and each bucket's size, less ``uncounted``
    (building no entry: ``brief`` is :meth:`~md_cg.index.Entries.brief`)."""
    sizes = dict(sorted(state.buckets.items()))
    layers = {layer: 0 for layer in LAYERS}
    nodes = 0
    for node_id, _rel, layer, bucket, _conflict in brief:
        if node_id in uncounted:
            if bucket is not None and sizes.get(bucket, 0) > 0:
                sizes[bucket] -= 1
            continue
        layers[layer] += 1
        nodes += 1
    return layers, nodes, sizes


def _two_memories(engine: Engine, finding: Finding) -> Finding:
    """A ``merge_conflict`` finding whose file's record says two different memories met in
    it (:data:`md_cg.merge.MEMORIES_KEY`: git paired two memories' files, or one id was
    added in two clones) with the driver's words naming both; else ``finding``. Reads the
    file (only conflicted ones are)."""
    try:
        node = engine.read_node(finding.path or "")
    except (MdcgError, OSError):
        return finding
    record = node.extra.get(merge.CONFLICT_KEY)
    if not (isinstance(record, dict) and isinstance(record.get(merge.MEMORIES_KEY), dict)):
        return finding
    try:
        detail = merge.describe_conflict(finding.path or "", record)
    except (KeyError, TypeError):  # a record edited by hand
        return finding
    return replace(finding, detail=detail)


#: What a ``bucket_degraded`` finding advises (advisory: ``HealthReport.ok`` stays True).
BUCKET_ADVICE = (
    ". Advice, nothing is wrong: searches scan more memories than they would if the memories "
    "were spread over domains; tag memories by topic (mdcg update ID --tag domain:work, "
    "add --tag domain:NAME) so a search with a context scans only its domain's bucket"
)


def tracked_findings(root: str) -> list[Finding]:
    """A ``tracked_state`` finding when git tracks files of the store's ``.mdcg/`` that are
    each clone's own state (:func:`md_cg.merge.tracked_warning`'s text, which names them and
    the ``git rm --cached`` that untracks exactly them). Asked of git only when a folder
    at or above ``root`` holds ``.git`` and git is on PATH (local calls, no network)."""
    here = os.path.abspath(root)
    while not os.path.lexists(os.path.join(here, ".git")):
        if os.path.dirname(here) == here:
            return []
        here = os.path.dirname(here)
    if shutil.which("git") is None:
        return []
    warning = merge.tracked_warning(Path(root))
    return [Finding("tracked_state", warning, path=paths.META_DIR)] if warning else []


def supersession_findings(
    state: IndexState, now: float, absent: Collection[str] = frozenset()
) -> list[Finding]:
    """``supersede_cycle`` and ``closed_orphan`` findings, from the index alone (the ids
    named in ``supersedes`` edges: no file is read, no other entry built). Opposite
    supersedes merged out of two clones make a cycle (which ``supersede`` refuses in one
    clone) that hides every memory in it. ``closed_orphan``: a memory closed with
    ``valid_until`` whose only successors are archived or expired -- each still holds its
    ``supersedes`` edge, so the index knows; successors outside the caller's scope
    (``absent``) are never named, and a memory with none other is not reported. A
    successor forgotten or deleted leaves no trace in the index (``forget`` names the
    fact it leaves closed, ``left_closed``; a merge does not: docs/git.md, Limits)."""
    out: list[Finding] = []
    cyclic: set[str] = set()
    for cycle in _supersede_cycles(state, now):
        cyclic.update(cycle)
        names = " -> ".join(repr(i) for i in (*cycle, cycle[0]))
        for node_id in cycle:
            detail = (
                f"supersedes cycle {names} (two clones superseded each other's memory): search "
                f"hides all of them; `mdcg update <id> --reopen` the one that should stay current"
            )
            out.append(Finding("supersede_cycle", detail, state.entries[node_id].path, node_id))
    for node_id in sorted(state.superseded - cyclic):
        e = state.entries.get(node_id)
        if e is None or e.archived or e.valid_until is None or e.valid_until > now:
            continue
        if successors(state, node_id, None, now):
            continue  # a live successor: the current version
        linked = [i for i in linked_successors(state, node_id, None) if i not in absent]
        if not linked:
            continue
        detail = (
            f"closed by a supersede and its successor(s) {', '.join(repr(i) for i in linked)} archived "
            f"or expired: search hides it with no current version; `mdcg update {node_id} --reopen` "
            "if it still holds, else forget it"
        )
        out.append(Finding("closed_orphan", detail, e.path, node_id))
    return out


def _supersede_cycles(state: IndexState, now: float) -> list[tuple[str, ...]]:
    """The cycles of live ``supersedes`` edges (each a strongly connected set of two or
    more ids, smallest id first, then in edge order), found over the superseded ids only."""
    succ = {
        t: [s for s in successors(state, t, None, now) if s in state.superseded] for t in state.superseded
    }
    index_of: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[tuple[str, ...]] = []
    for root in sorted(succ):
        if root in index_of:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index_of[root] = low[root] = len(index_of)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index_of:
                    index_of[nxt] = low[nxt] = len(index_of)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index_of[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index_of[node]:
                members = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    members.append(top)
                    if top == node:
                        break
                if len(members) > 1:
                    out.append(_cycle_order(sorted(members), succ))
    return sorted(out)


def _cycle_order(members: list[str], succ: dict[str, list[str]]) -> tuple[str, ...]:
    """``members`` from the smallest id along successor edges within the set (each once)."""
    inside, order = set(members), [members[0]]
    while True:
        nxt = next((s for s in succ.get(order[-1], ()) if s in inside and s not in order), None)
        if nxt is None:
            return tuple(order) + tuple(sorted(inside - set(order)))
        order.append(nxt)


#: The ``unreadable_file`` finding of a file the log names that this process may not read
#: (:attr:`IndexState.unread <md_cg.index.IndexState.unread>`): not named by id (its scope is
#: not known here)
UNREAD = (
    f"{index.PERMISSION_DENIED}; a memory written since the last compaction: kept as the index "
    "log says, not indexed (neither confirmed nor dropped); run md-cg as a user who may read it"
)


def _named_id(engine: Engine, rel: str) -> str | None:
    """The id the unreadable file at ``rel`` names (:attr:`MalformedNodeFileError.node_id
    <md_cg.errors.MalformedNodeFileError>`: its frontmatter read, a field of it invalid),
    looked at now, for the node of its ``unreadable_file`` finding (left blank before
    session 39 though the detail named it); None when it names none, or reads now."""
    try:
        index.parse_file(engine.root_str, rel)
    except MalformedNodeFileError as exc:
        return exc.node_id
    except (OSError, UnsafePathError):
        pass
    return None


def _file_findings(engine: Engine, scan: index.Scan) -> list[Finding]:
    state = engine.state
    out: list[Finding] = []
    by_path = state.by_path()
    dup_paths = {p for losers in state.duplicates.values() for p in losers}
    for rel, reason in sorted(scan.refused.items()):
        out.append(Finding("unsafe_path", f"{reason}; ignored", path=rel))
    for rel, reason in sorted(state.problems.items()):
        if rel in scan.files:
            out.append(Finding("unreadable_file", reason, rel, _named_id(engine, rel)))
    for rel in sorted(set(state.unread.values())):
        if rel not in scan.files or rel not in state.problems:  # else listed just above
            out.append(Finding("unreadable_file", UNREAD, path=rel))
    for rel in _files_to_look_at(state, scan.files, by_path):
        if rel in state.problems or rel in dup_paths:
            continue
        st = scan.files[rel]
        node_id = by_path.get(rel)
        if node_id is None:
            try:
                parsed = index.parse_file(engine.root_str, rel)
            except (MalformedNodeFileError, UnsafePathError) as exc:
                out.append(Finding("unreadable_file", exc.reason, rel, getattr(exc, "node_id", None)))
                continue
            except (FileNotFoundError, NotADirectoryError):
                continue
            other = state.entries.get(parsed.entry.id)
            if (
                other is not None
                and other.path in scan.files
                and index.winner([parsed, index.Parsed(None, other, None)]).entry is other
            ):
                # Both copies are there and the indexed one stands: sync() keeps it (it may have
                # done so already), so "run sync()" would send a person round in a loop.
                detail = copy_advice(parsed.entry.id, other.path, rel)
                out.append(Finding("duplicate_id", detail, rel, parsed.entry.id))
                continue
            out.append(
                Finding(
                    "untracked_file", "a node file the index does not know; run sync()", rel, parsed.entry.id
                )
            )
            continue
        e = state.entries[node_id]
        if (e.mtime_ns, e.size) != (st.st_mtime_ns, st.st_size):
            out.append(Finding("changed_file", "edited since indexed; run sync()", rel, node_id))
    return out


def _files_to_look_at(
    state: IndexState, files: Mapping[str, os.stat_result], by_path: Mapping[str, str]
) -> list[str]:
    """The paths of ``files`` that may need a finding of :func:`_file_findings`, sorted:
    those no entry holds, and those whose ``lstat`` differs from their entry's -- from the
    snapshot's columns (:meth:`~md_cg.index.Entries.placed`), building no entry and
    sorting only these (before session 43 every file was sorted and its entry built)."""
    out = set(files.keys() - by_path.keys())
    for node_id, rel, mtime_ns, size in state.entries.placed():
        st = files.get(rel)
        if (
            st is not None
            and (st.st_mtime_ns != mtime_ns or st.st_size != size)
            and by_path.get(rel) == node_id
        ):
            out.add(rel)
    return sorted(out)


def misplaced(e: index.Entry) -> bool:
    """True when a node file lies in another layer's folder, or a knowledge node in
    another condition bucket's folder. A person's own sub-folders and file names
    inside the right layer (and bucket) are fine: updates keep them too."""
    return misplaced_at(e.path, e.layer, e.bucket)


def misplaced_at(rel: str, layer: str, bucket: str | None) -> bool:
    """:func:`misplaced` of a file at ``rel`` of that ``layer`` and ``bucket``: its folder
    decides (the file's own name never does)."""
    parts = paths.unarchived_rel(rel).split("/")
    if parts[0] != layer:
        return True
    if layer != paths.BUCKETED_LAYER or len(parts) < 3:
        return False
    folder = parts[1]
    return (folder.startswith(layout.BUCKET_PREFIX) or folder == paths.ORPHAN) and folder != (
        bucket or paths.ORPHAN
    )


def _misplaced_why(e: index.Entry) -> str:
    """Why a :func:`misplaced` file belongs elsewhere, from what it holds (a note without
    frontmatter takes its layer from its folder and has no bucket key: ``orphan``)."""
    where = index.canonical_path(e)
    if paths.unarchived_rel(e.path).split("/")[0] != e.layer:
        return f"its frontmatter's layer ({e.layer}) puts it at {where}"
    if (e.bucket or paths.ORPHAN) == paths.ORPHAN:
        return (
            "it has no bucket key (no domain: tag, no condition space; a note without frontmatter has "
            f"neither), so it belongs at {where}"
        )
    return f"its bucket key (a domain: tag or its condition space) puts it at {where}"


#: Entries looked at outside the layer folders by :func:`_stray_findings` (a store root
#: holds a README and a few settings files, not a tree to walk).
STRAY_SCAN_LIMIT = 2000


def _stray_findings(root: str) -> list[Finding]:
    """A ``stray_file`` finding for each node file outside the layer folders (at the root,
    in ``archive/`` outside its layer folders, or up to two folders down in a folder of
    its own): moved one folder off by hand or
    by a merge, md-cg reads none of them, and the memory was gone from every read without
    a word. A ``.md`` file counts when its frontmatter names an id and a known layer."""
    out: list[Finding] = []
    seen = 0
    stack: list[tuple[str, int]] = [("", 0)]
    while stack:
        rel, depth = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > STRAY_SCAN_LIMIT:
                return out
            name, child = entry.name, f"{rel}/{entry.name}" if rel else entry.name
            if name.startswith(".") or (rel in ("", paths.ARCHIVE_DIR) and name in LAYERS):
                continue  # the layer folders, archived ones too, are read by the index
            if entry.is_dir(follow_symlinks=False):
                if depth < 2:
                    stack.append((child, depth + 1))
            elif name.endswith(paths.NODE_SUFFIX) and entry.is_file(follow_symlinks=False):
                node_id, layer = _frontmatter_names(root, child)
                if node_id is not None and layer is not None:
                    detail = (
                        f"a node file (layer {layer}) outside the layer folders: md-cg does not read it; "
                        f"move it into {layer}/ and run sync()"
                    )
                    out.append(Finding("stray_file", detail, child, node_id))
    return out


def _frontmatter_names(root: str, rel: str) -> tuple[str | None, str | None]:
    """The ``id`` and ``layer`` a file's frontmatter names (from its first 4 KiB), or Nones."""
    try:
        head, _ = fsops.read_file(root, rel, head=4096)
    except (OSError, UnsafePathError):
        return None, None
    lines = head.decode("utf-8", "replace").removeprefix("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return None, None
    found: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, sep, value = line.partition(":")
        if sep and key in ("id", "layer"):
            found[key] = value.strip().strip("'\"")
    layer = found.get("layer")
    return found.get("id") or None, layer if layer in LAYERS else None


def copy_advice(node_id: str, stands: str | None, rel: str) -> str:
    """A ``duplicate_id`` finding's detail for the file ``rel`` of ``node_id`` (``stands``:
    the file shown): how to settle it through md-cg -- before session 41 "remove or rename
    one copy", and ``rename`` refused while the copy was there."""
    held = f"another file holds this id ({stands} stands)" if stands else "duplicate copy"
    return (
        f"{held}; give this file its own id: mdcg rename {node_id} NEW_ID --path {rel} (or remove one copy)"
    )


def renamed_now(
    state: IndexState, renamed: Mapping[str, Mapping[str, Any]], absent: Collection[str], node_id: str
) -> str | None:
    """The id the memory once under ``node_id`` (an id no memory holds) has now, when it was
    renamed and a memory the caller sees (not ``absent``) holds it: one whose ``renamed_from``
    lists ``node_id`` (a rename in any clone: :attr:`md_cg.index.IndexState.earlier`), or the
    end of this clone's chain of renames (``renamed``: :func:`md_cg.audit.departures`' second
    map; a cycle of a hand-edited log ends). None otherwise. A ``dangling_edge`` finding names
    it: a rename pulled from another clone leaves this clone's edges to the old id (the
    git user simulation of session 38)."""
    holders = sorted(i for i in state.earlier.get(node_id, ()) if i in state.entries and i not in absent)
    if holders:
        return holders[0]
    cur, passed = node_id, set()
    while cur in renamed and cur not in passed:
        passed.add(cur)
        to = renamed[cur].get("to")
        if not isinstance(to, str):
            return None
        if to in state.entries:
            return None if to in absent else to
        cur = to
    return None


def _renamed_finder(
    state: IndexState, records: list[dict[str, Any]], absent: Collection[str]
) -> Callable[[str], str | None]:
    """:func:`renamed_now` over the audit log's ``records``, their renames gathered at the
    first call: only a ``dangling_edge`` asks, and most stores have none."""
    renamed: list[Mapping[str, Mapping[str, Any]]] = []

    def now_at(node_id: str) -> str | None:
        if not renamed:
            renamed.append(audit.departures(records)[1])
        return renamed_now(state, renamed[0], absent, node_id)

    return now_at


def _dangling_detail(etype: str, target: str, now_at: Callable[[str], str | None] | None) -> str:
    """What a ``dangling_edge`` finding says: the edge, and the id its target's memory has
    now when it was renamed (:func:`renamed_now`)."""
    now = now_at(target) if now_at is not None else None
    if now is None:
        return f"{etype} edge to {target!r}, which is not in the store"
    return (
        f"{etype} edge to {target!r}, which is not in the store: that memory was renamed to "
        f"{now!r}; point the edge at {now!r} (or remove it) in this file"
    )


def _id_findings(e: Entry) -> list[Finding]:
    """What ``health()`` says of an entry's id that no new id may be (:func:`md_cg.node.check_new_id`)
    but an older file holds: a Windows device name (``reserved_id``), a space character other
    than U+0020 (``odd_space_id``: ``kp\u00a01`` prints as ``kp 1``; new ids refuse one since
    session 41, and before session 42 health said nothing of one). One ``isascii`` for most ids."""
    out: list[Finding] = []
    device = windows_device_name(e.id)
    if device is not None:
        out.append(
            Finding(
                "reserved_id",
                f"Windows reserves the name {device} for a device: a clone there cannot hold this "
                "file; rename the node (mdcg rename)",
                e.path,
                e.id,
            )
        )
    space = None if e.id.isascii() else odd_space(e.id)
    if space is not None:
        plain = "".join(" " if ch.isspace() else ch for ch in e.id)
        out.append(
            Finding(
                "odd_space_id",
                f"the id {escaped(e.id)} holds the space character U+{ord(space):04X} "
                f"({unicodedata.name(space)}), which prints as a space, so it looks like another id "
                f"({escaped(plain)}); rename it with a plain space (U+0020): "
                f"mdcg rename ${escaped(e.id)} {escaped(plain)}",
                e.path,
                e.id,
            )
        )
    return out


def _entry_findings(
    state: IndexState,
    scan: index.Scan,
    forgotten: Collection[str],
    absent: Collection[str] = (),
    now_at: Callable[[str], str | None] | None = None,
    brief: Iterable[tuple[str, str, str, str | None, bool]] | None = None,
) -> list[Finding]:
    """Findings about the indexed nodes; an edge to an id in ``absent`` (outside the
    caller's scope) is dangling as an edge to no node is: its existence is not told.
    ``now_at(id)``: the id a renamed memory has now (:func:`renamed_now`); ``brief``:
    :meth:`~md_cg.index.Entries.brief`, when the caller has it."""
    out: list[Finding] = []
    brief = state.entries.brief() if brief is None else brief
    for node_id in _entries_to_look_at(state, scan.files, forgotten, absent, brief):
        out += _one_entry_findings(state.entries[node_id], state, scan, forgotten, absent, now_at)
    for node_id, losers in sorted(state.duplicates.items()):
        stands = state.entries[node_id].path if node_id in state.entries else None
        for rel in losers:
            detail = copy_advice(node_id, stands, rel)
            out.append(Finding("duplicate_id", detail, rel, node_id))
    for twins in state.twins().values():
        shown = distinct_labels(twins)  # NFC/NFD twins print alike: escaped
        for node_id in twins:
            others = ", ".join(repr(t) if shown[t] == t else shown[t] for t in twins if t != node_id)
            out.append(
                Finding(
                    "twin_id",
                    f"differs from {others} only by case or Unicode normalisation: one file on "
                    "macOS/Windows; rename one",
                    state.entries[node_id].path,
                    node_id,
                )
            )
    return out


def _one_entry_findings(
    e: Entry,
    state: IndexState,
    scan: index.Scan,
    forgotten: Collection[str],
    absent: Collection[str],
    now_at: Callable[[str], str | None] | None,
) -> list[Finding]:
    """The findings of :func:`_entry_findings` about the entry ``e``, in their order."""
    out: list[Finding] = []
    files = scan.files
    if e.path not in files and scan.hidden_by(e.path):
        return out  # in a folder this process may not read (reported as unsafe_path)
    if e.path not in files:
        out.append(Finding("missing_file", "indexed but the file is gone; run sync()", e.path, e.id))
    elif misplaced(e):
        out.append(Finding("misplaced_file", _misplaced_why(e), e.path, e.id))
    if e.conflict:
        out.append(
            Finding(
                "merge_conflict",
                "a git merge left both versions in the file; resolve it (docs/git.md, True conflicts)",
                e.path,
                e.id,
            )
        )
    out.extend(_id_findings(e))
    for target, etype in e.edges:
        if target == e.id:
            out.append(
                Finding(
                    "self_edge",
                    f"{etype} edge to itself; edges link two memories: remove it from the file",
                    e.path,
                    e.id,
                )
            )
        elif (target not in state.entries or target in absent) and target not in forgotten:
            out.append(Finding("dangling_edge", _dangling_detail(etype, target, now_at), e.path, e.id))
    return out


#: The first three letters, upper case, of every Windows device name: an ASCII id that
#: starts otherwise is none (:func:`md_cg.node.windows_device_name`).
_DEVICE_STARTS = frozenset(name[:3] for name in WINDOWS_DEVICE_NAMES)


def _entries_to_look_at(
    state: IndexState,
    files: Collection[str],
    forgotten: Collection[str],
    absent: Collection[str],
    brief: Iterable[tuple[str, str, str, str | None, bool]],
) -> list[str]:
    """The ids :func:`_one_entry_findings` may say something of, sorted -- from the
    snapshot's columns (:meth:`~md_cg.index.Entries.brief`, ``edge_targets``), building no
    entry: a file gone or misplaced (judged once per folder, layer and bucket), a merge
    conflict, an id that may be a device name or hold an odd space (any non-ASCII id), an
    edge to itself or to an id not seen. Before session 43 every entry was built, sorted and
    looked at one by one (0.7 s of a first ``health`` at 45k memories)."""
    entries = state.entries
    found: set[str] = set()
    at: dict[tuple[str, str, str | None], bool] = {}
    starts = _DEVICE_STARTS
    for node_id, rel, layer, bucket, conflict in brief:
        if conflict or rel not in files or not node_id.isascii() or node_id[:3].upper() in starts:
            found.add(node_id)
            continue
        key = (rel.rpartition("/")[0], layer, bucket)
        wrong = at.get(key)
        if wrong is None:
            wrong = at[key] = misplaced_at(rel, layer, bucket)
        if wrong:
            found.add(node_id)
    for node_id, target in entries.edge_targets():
        if target == node_id or ((target not in entries or target in absent) and target not in forgotten):
            found.add(node_id)
    return sorted(found)


def _log_findings(engine: Engine, found: list[Finding]) -> list[Finding]:
    """``found`` and the findings of the index log: damaged or unsafe shards, and an
    ``open_commit`` for each write a crash interrupted. A ``duplicate_id`` in ``found``
    that such a write made -- its id one the write puts or removes, both files at its
    paths, no file of the id edited since (the write finishes it) -- is folded into
    that write's finding: removing a copy by hand is not the fix, the sync is
    (:func:`_own_copies`)."""
    cursor = engine.cursor
    out: list[Finding] = []
    for name, damage in sorted(cursor.damaged.items()):
        out.append(
            Finding(
                "log_damage",
                f"{damage} unreadable line(s) or unusable record(s) in this index log shard (ignored); "
                "rebuild_index() recovers from the files",
                f"{journal.LOG_REL}/{name}",
            )
        )
    for name in sorted(cursor.unsafe):
        rel = name if "/" in name else f"{journal.LOG_REL}/{name}"
        why = "a symlink, special or unreadable file in the index log; ignored"
        out.append(Finding("unsafe_path", why, rel))
    for c in sorted(cursor.pending.values(), key=lambda c: c.key):
        if c.key in cursor.dead:
            pairs = journal.renames(engine.root_str, c, _ids_reader(engine.root_str))
            what = (
                "a rename of " + ", ".join(f"{old!r} to {new!r}" for old, new in pairs)
                if pairs
                else f"a write of {len(c.ids)} node(s)"
            )
            edited = journal.edited_since(engine.root_str, c, engine.journal.copied)
            found, copies = _own_copies(engine.state, c, edited, found)
            out.append(
                Finding(
                    "open_commit",
                    f"{what} interrupted by a crash (log {c.shard}, record {c.seq}); sync() or the "
                    f"next write of these ids finishes it: {_commit_plan(c, engine, edited)}{copies}",
                )
            )
    return found + out


def _own_copies(
    state: index.IndexState, c: journal.Commit, edited: set[str], found: list[Finding]
) -> tuple[list[Finding], str]:
    """``found`` without the ``duplicate_id`` findings the open commit ``c`` made (an
    archive killed between putting the new copies and removing the old ones leaves each
    id in two files), and what the commit's finding says of them ("" when none). An id
    in ``edited`` keeps its finding: the recovery leaves its files as they are."""
    puts = {(i, rel) for i, rel, _ in c.puts}
    dels = set(c.dels)
    kept: list[Finding] = []
    ids: list[str] = []
    for f in found:
        e = state.entries.get(f.node_id or "") if f.kind == "duplicate_id" else None
        if e is not None and e.id not in edited and f.path is not None:
            pairs = ((f.path, e.path), (e.path, f.path))
            if any((e.id, new) in puts and (e.id, old) in dels for new, old in pairs):
                ids.append(e.id)
                continue
        kept.append(f)
    if not ids:
        return found, ""
    n = len(dict.fromkeys(ids))
    return kept, (
        f"; until then {n} of its id(s) are in two files, where it puts them and where they were "
        "(not duplicates to remove by hand: the sync removes the old file)"
    )


def _ids_reader(root: str) -> Callable[[str], tuple[str, list[str]] | None]:
    """The id a node file holds and its earlier ids (None: no ``renamed_from``, or unreadable):
    the ``read`` of :func:`md_cg.journal.renames`."""
    read = audit.renamed_reader(root)

    def ids(rel: str) -> tuple[str, list[str]] | None:
        try:
            node = read(rel)
        except (OSError, MalformedNodeFileError, UnsafePathError):
            return None
        return None if node is None else (node.id, audit.earlier_ids(node))

    return ids


#: Ids an ``open_commit`` finding names of each kind (writes, removals).
PLAN_IDS = 5


def _commit_plan(c: journal.Commit, engine: Engine, edited: set[str]) -> str:
    """What finishing the open commit ``c`` would do, for a person to check first: the ids
    it writes, the files it removes -- the old files of a rename when it writes others --
    and those it keeps as they hold another id (at most :data:`PLAN_IDS` of each): the
    check the roll-forward makes (:func:`md_cg.journal.holds_other`). An id with a file
    changed since the crash (in ``edited``: :func:`md_cg.journal.edited_since`) is left as
    its files are."""

    def named(items: list[str]) -> str:
        more = f", ... (+{len(items) - PLAN_IDS} more)" if len(items) > PLAN_IDS else ""
        return ", ".join(items[:PLAN_IDS]) + more

    saved = journal.saved_asides(engine.root_str, c, engine.journal.copied)
    if saved:  # a save set aside: the recovery puts it back and undoes the commit (session 43)
        return f"undoes it, putting back at its path a save made after the write read it: {named(saved)}"
    put_ids = list(dict.fromkeys(p[0] for p in c.puts))
    moved = set(put_ids)
    parts = []
    if [i for i in put_ids if i not in edited]:
        parts.append(f"writes {named([i for i in put_ids if i not in edited])}")
    gone: list[str] = []
    kept: list[str] = []
    left = [f"{i} ({rel})" for i, rel in dict.fromkeys(c.dels) if i in edited and i not in moved]
    left += [i for i in put_ids if i in edited]
    for i, rel in c.dels:
        if i not in moved and i not in edited:
            other = journal.holds_other(engine.root_str, i, rel, engine.journal.id_of)
            (kept if other else gone).append(f"{i} ({rel})")
    if gone:
        parts.append(f"removes {'the old files of ' if put_ids else ''}{named(gone)}")
    if kept:
        parts.append(f"keeps {named(kept)} (the file holds another memory, or cannot be read)")
    if left:
        parts.append(f"leaves {named(left)} as edited after the crash (a hand edit is never replaced)")
    return "; ".join(parts) if parts else "nothing"


def _access_findings(root: str) -> list[Finding]:
    """A ``log_damage`` finding when the access totals (``counts.json``) cannot be used:
    ``access_counts()``, ``stats`` and ``compact_access()`` raise until it is removed."""
    problem = access.folded_problem(root)
    if problem is None:
        return []
    return [Finding("log_damage", problem, f"{access.ACCESS_REL}/{access.COUNTS}")]


def _meta_findings(engine: Engine) -> list[Finding]:
    """Symlinks and special files in ``.mdcg/`` (never followed), and a refused snapshot."""
    out: list[Finding] = []
    found = fsops.ScanResult()
    fsops.scan(engine.root_str, paths.META_DIR, max_depth=META_DEPTH, result=found)
    if found.symlinks == [paths.META_DIR]:
        return [
            Finding(
                "unsafe_path",
                "the store's .mdcg/ folder is a symlink: never followed, so the index is built "
                "from the files and every write is refused; replace it with a folder",
                paths.META_DIR,
            )
        ]
    already = {name if "/" in name else f"{journal.LOG_REL}/{name}" for name in engine.cursor.unsafe}
    for rel in sorted(set(found.symlinks) - already):
        out.append(Finding("unsafe_path", "a symlink in the store's .mdcg/ folder; never followed", rel))
    for rel in sorted(found.other):
        out.append(Finding("unsafe_path", "not a regular file or folder; ignored", rel))
    if engine.snapshot_problem:
        out.append(
            Finding(
                "log_damage",
                f"the index snapshot is {engine.snapshot_problem}; the index was rebuilt from the "
                "files, and compact_index() writes a new snapshot",
                snapshot.REL,
            )
        )
    for damage in list(engine.state.snapshot_damage):
        out.append(
            Finding(
                "log_damage",
                f"the index snapshot is damaged past its open ({damage}); nothing of the damaged part "
                "was used (what it held is rebuilt from the files), and compact_index() writes a "
                "new snapshot",
                snapshot.REL,
            )
        )
    return out


def deep_findings(engine: Engine, files: dict[str, Any]) -> list[Finding]:
    """Compare every entry with its file's content, and the indexed text with the file's text."""
    state = engine.state
    state.flush_text()
    indexed = state.text.doc_term_counts()
    out: list[Finding] = []
    for extra in sorted(indexed.keys() - state.entries.keys()):
        out.append(Finding("text_drift", "the text index holds a node the index does not", node_id=extra))
    for e in sorted(state.entries.values(), key=lambda x: x.id):
        if e.path not in files:
            continue
        try:
            parsed = index.parse_file(engine.root_str, e.path)
        except (MalformedNodeFileError, UnsafePathError, FileNotFoundError, NotADirectoryError):
            continue
        fresh = parsed.entry
        fresh.mtime_ns, fresh.size = e.mtime_ns, e.size
        if fresh != e:
            fields_ = [f for f in _ENTRY_FIELDS if getattr(fresh, f) != getattr(e, f)]
            out.append(
                Finding(
                    "content_drift", f"index differs from the file in: {', '.join(fields_)}", e.path, e.id
                )
            )
        problem = _text_problem(state, e, indexed.get(e.id), parsed.text or "")
        if problem:
            out.append(
                Finding("text_drift", f"the text index differs from the file: {problem}", e.path, e.id)
            )
    return out


def _text_problem(state: IndexState, e: index.Entry, terms: dict[str, int] | None, text: str) -> str | None:
    if terms is None:
        return "not indexed"
    expected = index.text_terms(text)
    if terms != expected:
        missing = sorted(expected.keys() - terms.keys())[:3]
        extra = sorted(terms.keys() - expected.keys())[:3]
        return f"terms (missing {missing}, extra {extra}, or other counts)"
    prior = e.importance if e.importance is not None else 0.5
    meta = (index.layer_code(e.layer), state.bucket_codes.get(e.bucket, -2) if e.bucket else -1, prior)
    if state.text.doc_meta(e.id) != meta:
        return f"layer/bucket/prior codes {state.text.doc_meta(e.id)} instead of {meta}"
    if state.text.doc_changed(e.id) != e.changed:
        return f"time of last change {state.text.doc_changed(e.id)} instead of {e.changed}"
    return None


_ENTRY_FIELDS = (*(f for f in snapshot.COLUMNS if f not in ("mtime_ns", "size")), "domain")


# -- access -----------------------------------------------------------------------------


def fold_access(engine: Engine, forgotten: Mapping[str, float] | None = None) -> dict[str, int]:
    """Fold the access log into the local totals (``.mdcg/access/counts.json``);
    ``forgotten``: id -> time of its last forget (see :func:`md_cg.access.read_counts`)."""
    engine.ensure_writable()
    with engine.lock, engine.maint.exclusive(engine.lock_timeout):
        engine.catch_up()
        return access.fold(engine.root_str, keep=lambda i: i in engine.state.entries, forgotten=forgotten)


#: The folders at the store root a :class:`HandEdits` watch follows: the layer folders
#: and ``archive/`` (its layer folders hold archived memories; the index reads them too).
WATCHED_TOPS: tuple[str, ...] = (*LAYERS, paths.ARCHIVE_DIR)


class HandEdits:
    """What a long-running process needs to pick up hand edits cheaply (see
    :meth:`md_cg.MdCG.sync_if_changed`): a watch of the layer folders and
    ``archive/`` (also of the store root, for those folders arriving there later)
    and the time of the last full stat scan."""

    def __init__(self) -> None:
        self.watch: ChangeWatch | None = None
        self.last_scan: float | None = None
        #: the index state this handle's record of duplicate copies and malformed files
        #: lives in (whole: its stat scan and watch read every file); :meth:`carry`
        self.recorded: IndexState | None = None
        #: files the last pick-up read that no entry holds (:func:`_unheld`): read again
        self.pending: set[str] = set()
        #: path -> (mtime_ns, size) of each file recorded malformed, as last seen (None
        #: until the first stat scan, which reads none of them again)
        self.malformed_seen: dict[str, tuple[int, int]] | None = None

    def carry(self, engine: Engine) -> None:
        """Keep the record of copies and malformed files in the engine's state now.

        A reload of the index (from another process's snapshot) replaces the state, and
        the snapshot lacks what this handle alone recorded: removing the file the index
        used then dropped the id though its copy was on disk. Session 33 looked for the
        copy by a stat scan of the whole store at every such pick-up for the handle's
        lifetime (1.0-1.4 s a ``rm`` at 100k); the record carried over needs none. A
        file an entry holds now (another process's sync took it in), or gone since, is
        not carried."""
        state = engine.state
        old, self.recorded = self.recorded, state
        if old is None or old is state:
            return
        held = state.by_path()

        def keep(rel: str) -> bool:
            return rel not in held and os.path.lexists(os.path.join(engine.root_str, rel))

        for node_id, losers in old.duplicates.items():
            kept = [rel for rel in losers if rel not in state.problems and keep(rel)]
            if kept and node_id in state.entries:
                state.duplicates[node_id] = sorted({*state.duplicates.get(node_id, ()), *kept})
                state.copy_fields.update((r, old.copy_fields[r]) for r in kept if r in old.copy_fields)
        for rel, why in old.problems.items():
            if keep(rel):
                state.problems.setdefault(rel, why)

    def pick_up(
        self, engine: Engine, min_interval: float, log: AppendLog | None = None, *, scope: Scope | None = None
    ) -> SyncReport | None:
        """Reconcile the files changed since the last call (all of them, by a stat scan,
        at the first call, when the watch lost events or where there is no inotify);
        None when nothing changed. Called under the engine's lock. A writable handle
        records, in the audit ``log``, a forgotten memory it took in under a new id
        (:func:`md_cg.audit.detect`), as :func:`sync` does; ``scope``: the caller's, as
        for :func:`sync`."""
        now = time.monotonic()
        try:
            self.carry(engine)  # before a scan too: a copy recorded is not told again
            if self.watch is None:
                self.watch = ChangeWatch(engine.root_str, WATCHED_TOPS)
                changed: set[str] | None = None
            else:
                changed = self.watch.poll()
            if changed is None:
                if self.last_scan is not None and now - self.last_scan < min_interval:
                    return None
                self.last_scan = now
                changed = stale_paths(engine, self.malformed_seen)
                if self.malformed_seen is None:
                    self.malformed_seen = {}
                    _note_malformed(engine, set(), self.malformed_seen)
            changed |= self.pending
            if not changed and not _notes_to_tell(engine, scope):
                return None
            left: set[str] = set()
            report = sync_paths(engine, changed, scope=scope, left=left)
            if self.malformed_seen is not None:
                _note_malformed(engine, changed, self.malformed_seen)
            self.carry(engine)  # reloaded while it settled
            self.pending = left
            if log is not None and not engine.read_only:
                audit.detect(log, _taken(engine, report), audit.renamed_reader(engine.root_str))
        except BaseException:
            # The changes this call took from the watch (or the scan) are not in the
            # index: drop the watch, so that the next call scans every file again.
            self.close()
            raise
        return None if report.clean else report

    def close(self) -> None:
        """Stop watching; the next :meth:`pick_up` scans every file."""
        if self.watch is not None:
            self.watch.close()
        self.watch, self.last_scan, self.recorded, self.pending = None, None, None, set()
        self.malformed_seen = None
