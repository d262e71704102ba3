"""The engine: one store's index, locks and journal, and the primitives on them.

:class:`Engine` owns everything a process knows about a store folder: the
in-memory index (:class:`~md_cg.index.IndexState`), how far it has followed
the journal (:class:`~md_cg.journal.Cursor`), its locks and its own log
shard. It offers the primitives the rest of the package is built on --
fresh reads, locked writes through the journal -- and nothing else: the
public API is :class:`md_cg.MdCG`, maintenance is :mod:`md_cg.maintenance`,
the cognitive loop and the lifecycle modules use the narrow
:class:`md_cg.protocol.StoreEngine` view of it.

Freshness: every read (``ids``, ``entries``, ``len``, ``in``, ``entry``,
``get``, search, neighbours) first calls :meth:`fresh`,
which follows other processes' log records when ``refresh_interval``
seconds have passed since the last look (``0``: always; ``None``: only on
:meth:`refresh`). Writes always catch up first, under their locks.

Concurrency: a write holds the stripe locks of its ids (64 lock files,
chosen by the folded id, so twins share a stripe), then the store lock
shared (:class:`~md_cg.fsops.MaintenanceLock`); it re-reads the log, rolls
forward any dead commit on its ids, checks existence and writes through the
journal. The existence check and the write of one id are therefore atomic
across processes.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import functools
import hashlib
import json
import os
import stat
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from . import coldbuild, copyfate, fsops, index, journal, layout, merge, nodefile, paths, snapshot
from .errors import (
    UNSCOPED_SYNC_FIX,
    ChangedOnDiskError,
    DuplicateIdError,
    IdCollisionError,
    InvalidNodeError,
    MalformedNodeFileError,
    MdcgError,
    NodeNotFoundError,
    NotAStoreError,
    OtherMemoriesError,
    ReadOnlyStoreError,
    StoreClosedError,
    UnsafePathError,
    lost_file_error,
    was_applied,
    withheld_problem,
)
from .index import Entry, IndexState
from .journal import Cursor, Journal, Put
from .node import (
    AFTER_LAST_INSTANT,
    FIRST_INSTANT,
    LAYERS,
    Node,
    check_id,
    check_layer,
    check_new_id,
    quantise_instant,
    validate,
)
from .script import twin_labels
from .visibility import Scope

STRIPES = 64
#: Longest wait (seconds) of a read for a write of a memory another process has in hand
#: (:func:`still_gone`, :func:`read_by_id`, :func:`moved_on`): a move takes milliseconds
MOVE_WAIT = 2.0

#: (id, path) of each file a commit removes
T = TypeVar("T")
Dels = Sequence[tuple[str, str]]
#: path -> the :func:`~md_cg.journal.stamp` of a file to remove as it was read (None: none checked)
Read = Mapping[str, journal.Stamp] | None
#: path -> (stamp, bytes) of the node files a read-modify-write read (:func:`read_entry`)
Reads = dict[str, tuple[journal.Stamp, bytes]]
#: how many times a read-modify-write runs when a file it read changes before its rename
#: (an edit by hand: :func:`retried`)
HAND_EDIT_TRIES = 3
#: id -> (the bytes a read-modify-write's first run read, the node it made of them): what a
#: later run (:func:`retried`) checks its own against (:func:`redone`)
First = dict[str, tuple[bytes, Node]]

GITIGNORE = """\
# md-cg: the .md files are canonical. Everything under .mdcg/ is derived
# (index snapshot, index logs) or local operational state (locks, access and
# reflection logs, tombstones) and is rebuilt or recreated as needed.
.mdcg/*
# ...except per-store configuration, which belongs in the repository.
!.mdcg/synonyms.json
!.mdcg/retention_markers.json
!.mdcg/retention.json
# Temp files of interrupted writes (health reports them, sync removes them).
.*.tmp
"""

#: The first line of the ``.gitignore`` a store gets: it marks a store git cloned (no ``.mdcg/`` yet).
_GITIGNORE_HEAD = GITIGNORE.split("\n", 1)[0].encode("utf-8")


#: Lines of a ``.gitignore`` that already keep a store's ``.mdcg/`` out of git.
_IGNORES_STATE = frozenset(f"{lead}.mdcg{tail}" for lead in ("", "/") for tail in ("", "/", "/*", "/**"))


def ignore_state(root: str) -> bool:
    """Put md-cg's lines (:data:`GITIGNORE`) first in a ``.gitignore`` the folder ``root``
    already had (a store made in a folder of its own, or its clone), keeping every line of
    it, unless one of its lines ignores ``.mdcg/`` already; return whether it was changed.
    Without it ``git add -A`` commits the index, locks and logs (session 43). First, so
    :func:`is_store_folder` knows a fresh clone of it; idempotent."""
    try:
        data, _ = fsops.read_file(root, ".gitignore", max_bytes=1 << 20)
    except (OSError, UnsafePathError):  # none, or not a regular file: left alone
        return False
    text = data.decode("utf-8", "surrogateescape")
    if any(line.strip() in _IGNORES_STATE for line in text.splitlines()):
        return False
    fsops.atomic_write(root, ".gitignore", (GITIGNORE + "\n" + text).encode("utf-8", "surrogateescape"))
    return True


def is_store_folder(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is an md-cg store: it holds ``.mdcg/lock`` (made with the
    layout) or the ``.gitignore`` md-cg writes (a fresh clone has no ``.mdcg/``).

    A check, never a write: it stats one file and reads at most one line; a folder
    or file it cannot read (or a ``.gitignore`` that is not a regular file) says no."""
    try:
        if os.path.isfile(os.path.join(folder, *paths.meta(paths.LOCK).split("/"))):
            return True
        fd = os.open(os.path.join(folder, ".gitignore"), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, len(_GITIGNORE_HEAD)) == _GITIGNORE_HEAD
    except OSError:
        return False
    finally:
        os.close(fd)


def broken_link(root: str | os.PathLike[str]) -> tuple[str, str] | None:
    """``(what, fix)`` when ``root`` is a symlink that leads to no folder, else None:
    ``mkdir`` of it fails with a bare "File exists" (the link is there), so a store there
    could be neither made nor opened. ``what`` names the link's target -- one that does not
    exist (a dangling symlink, through a chain of links too) or a symlink loop; ``fix`` says
    what to do. The CLI's ``--root`` and the library say it in the same words."""
    path = Path(root)
    try:
        if not path.is_symlink() or path.exists():
            return None
        target = os.readlink(path)
    except (OSError, ValueError):  # gone meanwhile, or a NUL in the path: enclosing_store says so
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                f"is a symlink to {target}, which leads back to it (a symlink loop)",
                "re-point a link of the loop",
            )
        end = os.path.realpath(path)
        via = f", which leads to {end}" if os.path.islink(path.parent / target) else ""
        return (
            f"is a symlink to {target}{via}, which does not exist (a dangling symlink)",
            "create that folder",
        )
    return None  # made meanwhile


def enclosing_store(root: str | os.PathLike[str]) -> tuple[Path, bool] | None:
    """The store whose folders ``root`` would nest in, else None: ``(outer, in_meta)``.

    ``in_meta``: ``root`` is ``<outer>/.mdcg`` or below it -- a store's derived and
    local state, which git never carries. Otherwise ``root`` is not a store itself
    and ``outer`` is the nearest store among its parents: opening ``root`` would
    make a store inside ``outer``'s tree (or show an empty one). A store made
    inside another one before this check existed is a store: it opens. The path is
    resolved (symlinks, ``..``) first: what counts is where the files would go.
    Reads only; unreadable parents are not stores.

    A ``root`` that is a symlink to nothing (:func:`broken_link`) raises NotAStoreError
    naming its target, with ``link`` set: no store can be made there (``mkdir`` said
    only "File exists") nor opened."""
    try:
        real = Path(os.path.realpath(root))
    except (ValueError, TypeError) as exc:  # a NUL in the path, not a path at all
        raise NotAStoreError(root, f"not a usable folder path ({exc})") from None
    broken = broken_link(root)
    if broken is not None:
        what, fix = broken
        refused = NotAStoreError(
            Path(root).absolute(), f"{what}; {fix}, or choose an existing store or a new folder"
        )
        refused.link = broken
        raise refused
    nested = not is_store_folder(real)
    if not nested and paths.META_DIR not in real.parts:
        return None  # an ordinary store: no walk up
    for outer in real.parents:
        if is_store_folder(outer):
            if real.parts[len(outer.parts)] == paths.META_DIR:
                return outer, True
            if nested:
                return outer, False
    return None


def check_not_nested(root: str | os.PathLike[str]) -> None:
    """Refuse (NotAStoreError, before anything is made) a ``root`` inside another
    store's folders or ``.mdcg/``, or a symlink that leads to no folder (see
    :func:`enclosing_store`)."""
    found = enclosing_store(root)
    if found is None:
        return
    outer, in_meta = found
    if in_meta:
        where = f"in the {paths.META_DIR}/ folder of the store {outer} (its local state, never in git)"
    else:
        where = f"inside the store {outer}"
    raise NotAStoreError(
        Path(root).absolute(), f"{where}; no store is made or opened there (pass root={str(outer)!r})"
    )


@dataclass
class Staged:
    """A node ready to be written: the node, its path, its bytes and route key."""

    node: Node
    rel: str
    data: bytes
    domain: str | None


def _place(node: Node) -> tuple[str, str | None]:
    """The path of a node's file (not archived) and its route key."""
    domain = layout.route_key(node) if node.layer == paths.BUCKETED_LAYER else None
    bucket = layout.bucket_dir(domain) if node.layer == paths.BUCKETED_LAYER else None
    return paths.node_rel(node.layer, bucket, node.id), domain


def stage(node: Node, *, archived: bool = False) -> Staged:
    """Serialise a validated node and compute its path once (under ``archive/`` if ``archived``)."""
    rel, domain = _place(node)
    if archived:
        rel = paths.archived_rel(rel)
    return Staged(node, rel, nodefile.dump_bytes(node), domain)


def _dumps_at(node: Node, updated_at: float | None) -> bytes:
    """The file bytes of ``node`` as if its ``updated_at`` were ``updated_at`` (the node is unchanged)."""
    kept = node.updated_at
    node.updated_at = updated_at
    try:
        return nodefile.dump_bytes(node)
    finally:
        node.updated_at = kept


def _stage_stamped(node: Node, updated_at: float) -> Staged | None:
    """``stage(node)`` with the write time ``updated_at`` already in the bytes (the
    node itself is not stamped), or None when those bytes are refused -- the
    caller then stages the node as given, so that the error it raises is the one
    staging before the stamp raises."""
    rel, domain = _place(node)
    try:
        data = _dumps_at(node, updated_at)
    except InvalidNodeError:
        return None
    return Staged(node, rel, data, domain)


def _stamp_after(previous: float | None, now: float) -> float:
    """A write time strictly after ``previous`` (the last write of the node wins),
    on the microsecond grid the files store. A ``previous`` outside the years 1-9999
    (milliseconds an earlier version or ``add_many`` wrote for seconds) binds nothing:
    the stamp is ``now``, so a write corrects it (at 1.7e12, 1 µs is below a float's
    resolution: the stamp would stay that time forever)."""
    if previous is None or not FIRST_INSTANT <= previous < AFTER_LAST_INSTANT:
        return quantise_instant(now)
    return quantise_instant(max(now, previous + 1e-6))


#: A file a person changed after md-cg wrote it, noted when this process followed the
#: write, for the next sync to tell (:attr:`Engine.hand_after`): ``(kind, path, was)``,
#: ``kind`` ``"changed"``, ``"gone"``, ``"added"`` or ``"moved"`` (``path``: where a file holds
#: it now, a checkout or a hand move having put it there), ``was`` the entry the index held
#: before the follow dropped it (None: it held none) -- its scope fields say which scopes
#: a sync may tell of a deletion (:func:`md_cg.maintenance.sync`): without them a scoped
#: sync told none of these (the memory's scope was unknown once the entry was dropped).
Noted = snapshot.Noted


class Notes(MutableMapping[str, Noted]):
    """:attr:`Engine.hand_after` (id -> :data:`Noted`), with the noted ids of each
    uniqueness key (:func:`md_cg.paths.id_key`) kept in step on every change, so that a
    new id's twin among them (:func:`dropped_twin`) and the notes a write's ids name
    (:func:`taken_back`) are a lookup: a scan of every note per new id made ``add_many``
    of 10,000 ids after a search dropped 5,000 take 19.1 s instead of 0.67 s (review s32 r7)."""

    def __init__(self, notes: Mapping[str, Noted] | None = None) -> None:
        self._notes: dict[str, Noted] = {}
        self._by_key: dict[str, set[str]] = {}
        self.update(notes or {})

    def __getitem__(self, node_id: str) -> Noted:
        return self._notes[node_id]

    def __setitem__(self, node_id: str, noted: Noted) -> None:
        self._notes[node_id] = noted
        self._by_key.setdefault(paths.id_key(node_id), set()).add(node_id)

    def __delitem__(self, node_id: str) -> None:
        del self._notes[node_id]
        key = paths.id_key(node_id)
        ids = self._by_key[key]
        ids.discard(node_id)
        if not ids:
            del self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._notes)

    def __len__(self) -> int:
        return len(self._notes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._notes

    def get(self, node_id: str, default: Any = None) -> Any:
        # the mapping's own lookup: Mapping.get raised and caught a KeyError for every id
        # not noted (each new id of a write: dropped_file)
        return self._notes.get(node_id, default)

    def keyed(self, keys: Iterable[str]) -> list[str]:
        """The noted ids whose uniqueness key is one of ``keys``, sorted."""
        return sorted(i for k in keys for i in self._by_key.get(k, ()))


#: Why a missing folder is not opened: ``create=False``, or a read-only handle (never creates).
_NO_FOLDER = "no such folder (pass create=True to make one)"
_NO_FOLDER_READ_ONLY = (
    "no such folder (a read-only handle never creates a store: "
    "open it once without read_only=True to create it)"
)


class Engine:
    """The index, locks and journal of the store at ``root`` (see module docstring)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = True,
        durable: bool = False,
        refresh_interval: float | None = 1.0,
        lock_timeout: float = 30.0,
        read_only: bool = False,
    ) -> None:
        self.root = Path(root).absolute()
        self.root_str = str(self.root)
        self.read_only = read_only
        if not self.root.exists():
            if not create or read_only:
                raise NotAStoreError(self.root, _NO_FOLDER_READ_ONLY if read_only else _NO_FOLDER)
            self.root.mkdir(parents=True)
            self._init_folder()
        elif not self.root.is_dir():
            raise NotAStoreError(self.root, "not a folder")
        self.durable, self.refresh_interval, self.lock_timeout = durable, refresh_interval, lock_timeout
        self.wrote = False
        self.hand_after: MutableMapping[str, Noted] = Notes()  # told by the next sync: see _resolved
        #: the scope of the handle that owns this engine (set by it; None: every scope):
        #: :func:`read_entry` refuses a file narrowed out of it by hand since it was indexed
        self.scope: Scope | None = None
        #: id -> (path, mtime_ns, size, CRC-32) of the file this process's last sync naming
        #: the id took in: its next sync tells a file whose mtime alone moved only when its
        #: bytes differ (md_cg.maintenance._settle_touched)
        self.took_in: dict[str, tuple[str, int, int, int]] = {}
        self.copy_reads: dict[str, CopyRead] = {}  # what copies_of read: see there
        self.copies_held: copyfate.Logged = {}  # what copies_logged returns (see there)
        self.copies_pending = copyfate.NOTHING_PENDING  # the snapshot's, not decoded yet
        self.changes = 0
        self.lock = threading.RLock()
        self.maint = fsops.MaintenanceLock(self.root_str, *map(paths.meta, paths.MAINTENANCE_LOCKS))
        self.journal = Journal(self.root_str)
        # a dead commit's del removes a file only when it holds the del's id
        self.journal.id_of = functools.partial(file_id, self)
        #: answers a freshness check from lstat calls alone when the log is certainly unchanged
        self.log_watch = journal.LogWatch(self.root_str)
        self._stripes: dict[int, fsops.FileLock] = {}
        #: keys of open commits a read waited MOVE_WAIT for once: never waited for again
        self.stalled: set[tuple[str, int]] = set()
        self._closed = False
        self._initialised = fsops.exists(self.root_str, paths.meta(paths.LOCK))
        self.loaded_from = "files"
        self.load()

    # -- lifecycle ----------------------------------------------------------------

    def _init_folder(self) -> None:
        for layer in LAYERS:
            fsops.Dir(self.root_str, layer, create=True).close()
        if not fsops.exists(self.root_str, ".gitignore"):
            fsops.atomic_write(self.root_str, ".gitignore", GITIGNORE.encode("utf-8"))
        if not fsops.exists(self.root_str, ".gitattributes"):
            fsops.atomic_write(self.root_str, ".gitattributes", merge.gitattributes_text().encode("utf-8"))
        fsops.touch(self.root_str, paths.meta(paths.LOCK))

    def ensure_writable(self) -> None:
        """Raise on a read-only or closed store; create the layout on the first write."""
        self.check_open()
        if self.read_only:
            raise ReadOnlyStoreError(f"store {self.root} was opened read-only")
        if not self._initialised:
            self._init_folder()
            self._initialised = True

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release this process's shard and locks (the facade compacts first if due)."""
        self.journal.writer.close()
        self.log_watch.close()
        self.maint.close()
        for lock in self._stripes.values():
            lock.close()
        self._closed = True
        state = getattr(self, "state", None)  # (none when closed by a failed open)
        if state is not None:
            snapshot.close(state)  # the snapshot file kept open for what was not read yet

    # -- loading and following the log -----------------------------------------------

    def load(self) -> None:
        """(Re)load the index: the snapshot plus the log after it, else the files."""
        snap, self.snapshot_problem, self.snap_refused = _load_snapshot(self.root_str)
        self.snap_unplaced: tuple[int, int, int] | None = None
        self.snap_ident: tuple[int, int, int] | None = None
        self.snap_gen: int | None = None
        # a copy of another place's store: its recovery goes by (mtime, size), all or nothing
        self.journal.copied = self.snapshot_problem == snapshot.ANOTHER_PLACE
        if snap is not None and self.snapshot_problem in snapshot.UNPLACED:
            if _placed(self, snap):
                return
            snap = None
        if snap is not None:
            state, cursor = _from_snapshot(self, snap)
        else:
            # Read the log before scanning the files: commits closed by then are
            # reflected in the scan; the open ones are resolved after it.
            before = journal.read_tail(self.root_str, {})
            state = coldbuild.build_from_files(self.root_str)
            cursor = Cursor()
            journal.replay(cursor, before)
            self.loaded_from = "files"
        self.state: IndexState = state
        self.cursor: Cursor = cursor
        self.changes = 0
        self.catch_up()
        take_scope(self)
        self._last_refresh = time.monotonic()

    def catch_up(
        self, tail: journal.Tail | None = None, prior: dict[str, Entry | None] | None = None
    ) -> list[str]:
        """Follow the log from the cursor; resolve what it touched; return changed ids.

        ``tail``: the log as just read from the cursor (else it is read here). ``prior``
        gains the entry each touched id had before (None: none), unless it holds the id."""
        if tail is None:
            tail = journal.read_tail(self.root_str, self.cursor.offsets)
        if tail.empty and not self.cursor.pending and not self.cursor.legacy:
            self.cursor.unsafe |= tail.unsafe
            return []
        self.changes += sum(
            len(r.get("put", ())) + len(r.get("del", ())) + (r.get("op") in ("put", "del"))
            for recs in tail.by_shard.values()
            for r in recs
        )
        open_before = dict(self.cursor.pending)
        touched = journal.replay(self.cursor, tail)
        closed = {  # the ids a commit that closed in this follow deleted (not put again)
            i
            for k, c in open_before.items()
            if k not in self.cursor.pending
            for i, _rel in c.dels
            if i not in {p[0] for p in c.puts}
        }
        live = [c for c in self.cursor.pending.values() if c.key not in self.cursor.dead]
        if live:
            for node_id, rels in journal.mark_dead(
                self.cursor, journal.find_dead(self.root_str, self.cursor, self.journal.failed)
            ).items():
                touched.setdefault(node_id, []).extend(rels)
        if prior is not None:
            for node_id in touched:
                prior.setdefault(node_id, self.state.entries.get(node_id))
        return _resolved(self, tail, touched, closed)

    def refresh(self, prior: dict[str, Entry | None] | None = None) -> list[str]:
        """Pick up other processes' changes; return the ids that changed: those whose entry
        differs from what this process held before the call (``prior`` gains that entry,
        None for an id it did not hold).

        When another process has written a new snapshot meanwhile, this process
        goes on following the log if that is exact (:func:`_follow`), else it
        reloads the index.
        """
        prior = {} if prior is None else prior
        with self.lock:
            self.check_open()
            # The snapshot's identity (as snapshot.identity gives it) and the log, in one walk.
            st, tail = self.log_watch.look(self.cursor.offsets, paths.SNAPSHOT)
            ident = None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size)
            # (a snapshot refused at load is not followed: each refresh rebuilt from the files)
            if ident is not None and ident != self.snap_ident and ident != self.snap_refused:
                changed = _follow(self, ident, prior)
            else:
                changed = self.catch_up(tail, prior)
            self._last_refresh = time.monotonic()
            return changed

    @property
    def copies_logged(self) -> copyfate.Logged:
        """Each copy as the last sync line naming its id logged it: :func:`copies_logged`."""
        return copies_logged(self)

    def fresh(self) -> None:
        """The freshness rule of every read: refresh when ``refresh_interval`` has passed."""
        self.check_open()
        if self.refresh_interval is None:
            return
        if time.monotonic() - self._last_refresh >= self.refresh_interval:
            self.refresh()

    def advance(self, shard: str, nbytes: int) -> None:
        """Move our cursor past records we appended ourselves."""
        self.wrote = True
        self.cursor.offsets[shard] = self.cursor.offsets.get(shard, 0) + nbytes

    # -- reading ------------------------------------------------------------------

    def __len__(self) -> int:
        self.fresh()
        return len(self.state.entries)

    def __contains__(self, node_id: object) -> bool:
        self.fresh()
        return isinstance(node_id, str) and node_id in self.state.entries

    def ids(self, layer: str | None = None) -> list[str]:
        """Sorted ids of all nodes, or of one layer."""
        if layer is not None:
            check_layer(layer)
        self.fresh()
        return sorted(e.id for e in index.iter_entries(self.state, layer))

    def entries(self, layer: str | None = None) -> list[Entry]:
        """Index entries of all nodes (or one layer), sorted by id."""
        if layer is not None:
            check_layer(layer)
        self.fresh()
        return sorted(index.iter_entries(self.state, layer), key=lambda e: e.id)

    def entry(self, node_id: str) -> Entry:
        """The index entry of a node (path, layer, bucket, judge inputs...)."""
        self.fresh()
        e = self.state.entries.get(node_id)
        if e is None:
            raise NodeNotFoundError(node_id)
        return e

    def read_node(self, rel: str) -> Node:
        """Parse the node file at ``rel`` (no symlinks, size-limited); a read for the caller
        goes through :func:`scoped_read`."""
        return index.read_node(self.root_str, rel)

    def get(self, node_id: str) -> Node:
        """Read a node from its file. Raises NodeNotFoundError for an unknown id, and
        :func:`~md_cg.errors.lost_file_error` for one whose file is gone from where the index has it."""
        return read_by_id(self, node_id)

    def drop_missing(self, node_ids: Iterable[str]) -> list[str]:
        """Refresh, then re-resolve ids whose files may be gone (in memory only) once no
        write of them by md-cg is in flight (:func:`still_gone`); return those dropped,
        each noted for the next sync (:func:`dropped_by_hand`)."""
        return dropped_by_hand(self, still_gone(self, list(node_ids)))

    # -- locks --------------------------------------------------------------------

    def stripe_of(self, node_id: str) -> int:
        return zlib.crc32(paths.id_key(node_id).encode("utf-8")) % STRIPES

    def _stripe(self, n: int) -> fsops.FileLock:
        lock = self._stripes.get(n)
        if lock is None:
            lock = self._stripes[n] = fsops.FileLock(
                self.root_str, paths.meta(paths.STRIPE_DIR, f"{n:02d}.lock"), what=f"node stripe {n:02d}"
            )
        return lock

    @contextlib.contextmanager
    def hold(self, node_ids: Iterable[str]) -> Iterator[None]:
        """Lock ``node_ids`` for a write: stripes, then the store lock shared.

        Inside, the index has caught up with the log, and every dead commit
        that names one of these ids (by id key) has been rolled forward.
        """
        self.ensure_writable()
        keys = {paths.id_key(i) for i in node_ids}
        stripes = {zlib.crc32(k.encode("utf-8")) % STRIPES for k in keys}
        with self.lock:
            while True:
                held: list[fsops.FileLock] = []
                try:
                    for n in sorted(stripes):
                        lock = self._stripe(n)
                        lock.acquire(timeout=self.lock_timeout)
                        held.append(lock)
                    with self.maint.shared(self.lock_timeout):
                        self.refresh()
                        taken_back(self, keys)  # a file of these ids put back by hand
                        dead = [
                            c
                            for c in journal.find_dead(self.root_str, self.cursor, self.journal.failed)
                            if any(paths.id_key(i) in keys for i in c.ids)
                        ]
                        more = {self.stripe_of(i) for c in dead for i in c.ids}
                        if more <= stripes:
                            if dead:
                                self.recover(dead)
                            with told_dropped(self, keys):
                                yield
                            return
                finally:
                    for lock in reversed(held):  # last taken, first released
                        lock.release()
                stripes |= more

    def recover(self, commits: Sequence[journal.Commit]) -> None:
        """Roll dead commits forward (the caller holds their stripes or the exclusive lock)."""
        self.journal.recover(commits, advance=self.advance)
        keys = {c.key for c in commits}
        self.journal.failed = [c for c in self.journal.failed if c.key not in keys]
        touched: dict[str, list[str]] = {}
        for c in commits:
            self.cursor.pending.pop(c.key, None)
            self.cursor.dead.discard(c.key)
            for node_id, rels in c.touched().items():
                touched.setdefault(node_id, []).extend(rels)
        index.resolve_ids(self.root_str, self.state, touched)

    # -- writing --------------------------------------------------------------------

    def commit(
        self,
        staged: Sequence[Staged],
        dels: Dels,
        *,
        durable: bool | None,
        read: Read = None,
        guard: Reads | None = None,
        renamed: Mapping[str, str] | None = None,
        fresh: Collection[str] | None = None,
    ) -> list[str]:
        """Write ``staged`` and remove ``dels`` through the journal; update the index.
        ``read`` (path -> stamp as read): a del whose file changed since is not done, its
        path returned (:meth:`Journal.commit`); ``guard``: the files a read-modify-write read
        (:func:`retried`); ``renamed``: a del's id -> the staged id its file became (a
        rename's); ``fresh``: the paths that must be empty (:func:`new_paths` when None, ``()``
        for an overwrite). The caller holds the ids' locks (:meth:`hold`).
        """
        if not staged and not dels:
            return []
        self.changes += len(staged) + len(dels)
        by_id = {s.node.id: s for s in staged}
        stamps = None if guard is None else {rel: st for rel, (st, _) in guard.items()}

        def applied(put: Put, st: os.stat_result) -> None:
            s = by_id[put.node_id]
            self.state.put(
                index.make_entry(s.node, s.rel, st.st_mtime_ns, st.st_size, s.domain),
                index.index_text(s.node),
            )

        try:
            spared = self.journal.commit(
                [Put(s.node.id, s.rel, s.data) for s in staged],
                list(dels),
                durable=self.durable if durable is None else durable,
                applied=applied,
                advance=self.advance,
                read=read if stamps is None else {**stamps, **(read or {})},  # a guarded del too
                guard=stamps,
                renamed=renamed,
                fresh=new_paths(self.state, staged, stamps) if fresh is None else fresh,
            )
        except BaseException as exc:
            # Stopped midway: an open commit is rolled forward by the next recovery;
            # meanwhile the files decide what the index shows.
            for c in self.journal.failed:
                self.cursor.pending.setdefault(c.key, c)
            touched: dict[str, list[str]] = {}
            for s in staged:
                touched.setdefault(s.node.id, []).append(s.rel)
            for node_id, rel in dels:
                touched.setdefault(node_id, []).append(rel)
            index.resolve_ids(self.root_str, self.state, touched)
            if isinstance(exc, journal.PathTaken):
                raise path_taken(self, exc) from None
            raise
        for node_id, rel in dels:
            cur = self.state.entries.get(node_id)
            if cur is not None and cur.path == rel:
                self.state.drop(node_id)
        gone = [*by_id, *(i for i, _rel in dels)]
        copyfate.forget(copies_logged(self, lambda: gone), gone)
        return spared

    def check_new(self, node: Node, rel: str, check: Callable[[Entry], None] | None = None) -> str | None:
        """The path of an existing node with this id (or a twin of it), else None.

        ``check(entry)`` may first refuse the node holding the id, or its twin (the
        caller's scope: a twin outside it is refused by the id asked for, never by
        the twin's spelling). A twin -- an id that differs only by case or
        normalisation -- raises :class:`IdCollisionError`; a new id that Windows
        reserves for a device raises :class:`UnsafeIdError`
        (:func:`~md_cg.node.check_new_id`). Call inside :meth:`hold`.
        """
        twin = self.state.twin_of(node.id)
        if twin is not None:
            if check is not None:
                try:
                    check(self.state.entries[twin])
                except DuplicateIdError as exc:
                    text = str(exc).replace(repr(twin), repr(node.id))
                    raise DuplicateIdError(node.id, "", text, archived=exc.archived) from None
            raise IdCollisionError(node.id, twin, self.state.entries[twin].path, twin_labels(node.id, twin))
        existing = self.state.entries.get(node.id)
        if existing is not None:
            if check is not None:
                check(existing)
            return existing.path
        if fsops.exists(self.root_str, rel):
            return rel  # a file nobody indexed yet (copied in, or a folding file system's twin)
        new_id(self, node.id)  # a new file: one that every clone can hold, of no memory moved by hand
        return None

    def add_many(
        self,
        batch: list[Node],
        *,
        overwrite: bool,
        durable: bool | None,
        stamp: bool,
        check: Callable[[Entry], None] | None = None,
    ) -> list[Node]:
        """Store validated nodes as one commit (see :meth:`md_cg.MdCG.add_many`).

        ``check(entry)`` is called, under the ids' locks, for every id that
        already exists -- or whose twin does (case, normalisation) -- and may refuse
        it (the caller's scope: a twin outside it is refused without being named)."""
        with self.hold(n.id for n in batch):
            staged, dels, out = self._stage_batch(batch, overwrite=overwrite, stamp=stamp, check=check)
            self.commit(staged, dels, durable=durable, fresh=() if overwrite else None)  # overwrite: asked
            return out

    def _stage_batch(
        self, batch: list[Node], *, overwrite: bool, stamp: bool, check: Callable[[Entry], None] | None = None
    ) -> tuple[list[Staged], list[tuple[str, str]], list[Node]]:
        """Stage new or replacing nodes (inside :meth:`hold`): puts, dels, the nodes as stored;
        ``check`` as for :meth:`check_new` (nothing is written before every node passed)."""
        now = time.time()
        staged: list[Staged] = []
        dels: list[tuple[str, str]] = []
        out: list[Node] = []
        entries = self.state.entries
        for node in batch:
            # Serialised once, with the write time it will be stamped with (the
            # existence check does not depend on the bytes; the index does not
            # change before the stamp, so neither does the time).
            at = None
            s = None
            if stamp:
                prev = entries.get(node.id)
                at = _stamp_after(prev.updated_at if prev else None, now)
                s = _stage_stamped(node, at)
            fresh = s is not None
            if s is None:
                s = stage(node)
            existing_path = self.check_new(node, s.rel, check)
            if existing_path is not None:
                if not overwrite:
                    raise _taken(self, node.id, existing_path, node.id in entries, check=check)
                stored = _overwritten(self, node.id, existing_path, s.rel, check)
                same = self._unchanged(node, None if fresh else s.data, s.rel, existing_path, stored, stamp)
                if same is not None:
                    out.append(same)
                    continue
                if existing_path != s.rel:
                    dels.append((node.id, existing_path))
            if at is not None:
                node.updated_at = at
                if not fresh:
                    s = stage(node)
            staged.append(s)
            out.append(node)
        return staged, dels, out

    def change_many(
        self,
        batch: Sequence[Node] = (),
        *,
        archive: Sequence[str] = (),
        unarchive: Sequence[str] = (),
        durable: bool | None,
        check: Callable[[Entry], None] | None = None,
        check_add: Callable[[Entry], None] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Add new nodes, archive and unarchive others: one commit, all or nothing.
        ``check_add(entry)`` may refuse an added id that a node (or a twin) holds.

        Archiving moves a node's file byte for byte to ``archive/<its path>``
        (a put of the same bytes and a del of the old path in the same
        commit); unarchiving moves it back. An id already in the wanted state
        is skipped. ``check(entry)`` may refuse an id (the caller's scope)
        before anything is written. Returns the ids archived and unarchived.
        """
        ids = [n.id for n in batch] + list(archive) + list(unarchive)
        with self.hold(ids):
            groups, checks = (archive, unarchive), (check, check_add)
            run = functools.partial(_change_once, self, list(batch), groups, durable, checks)
            return retried(self, lambda _first: run())

    def _moved(self, current: Entry, to: str, reads: Reads | None = None) -> Staged:
        """The node of ``current`` staged at ``to`` with its file's exact bytes (``reads``: the
        file's stamp and bytes are added to it, for a guarded commit: :func:`_change_once`)."""
        if fsops.exists(self.root_str, to):
            raise _taken(self, current.id, to, True, foreign=current.path)
        try:
            data, st = index.read_limited(self.root_str, current.path)
        except (FileNotFoundError, NotADirectoryError):
            raise moved_away(self, current, None) from None
        if reads is not None:
            reads[current.path] = (journal.stamp(st), data)
        node = scoped_read(self, current.id, index.decode_node, data, current.path)  # broken by hand
        if node.id != current.id:  # the file was edited to hold another id meanwhile
            raise moved_away(self, current, node)
        if narrowed(self.scope, current, node):  # by hand, out of the caller's scope
            raise NodeNotFoundError(current.id)
        domain = layout.route_key(node) if node.layer == paths.BUCKETED_LAYER else None
        return Staged(node, to, data, domain)

    def _unchanged(
        self,
        node: Node,
        given: bytes | None,
        rel: str,
        existing_path: str,
        held: tuple[bytes, Node] | None,
        stamp: bool,
    ) -> Node | None:
        """The stored node (``held``: the file at ``existing_path``) when overwriting would
        change nothing but ``updated_at`` (when ``stamp``; unstamped, the caller's ``updated_at``
        is data and a change to it alone is written) or ``\r\n`` line ends (autocrlf:
        :func:`md_cg.nodefile.lf_file`). ``given``: ``node``'s bytes, if already serialised."""
        if existing_path != rel or held is None:
            return None
        data, stored = held
        data = nodefile.lf_file(data)
        if data == (nodefile.dump_bytes(node) if given is None else given):
            return stored
        return stored if stamp and _dumps_at(node, stored.updated_at) == data else None

    def modify(
        self,
        node_id: str,
        change: Callable[[Node], Node | None],
        *,
        durable: bool | None,
        check: Callable[[Entry], None] | None = None,
    ) -> Node:
        """Read-modify-write one node under its locks; stamps ``updated_at``.

        ``check(entry)`` may refuse first (the caller's scope). An archived
        node stays archived.
        """
        return self.modify_many({node_id: change}, durable=durable, check=check)[0]

    def modify_many(
        self,
        changes: dict[str, Callable[[Node], Node | None]],
        *,
        durable: bool | None,
        check: Callable[[Entry], None] | None = None,
    ) -> list[Node]:
        """:meth:`modify` of several nodes under all their locks at once: one commit,
        all or nothing. The changes run in the order given, each after ``check``
        of every id; a change that raises leaves every node as it was."""
        for node_id in changes:
            check_id(node_id)
        with self.hold(list(changes)):
            return retried(self, functools.partial(_modify_once, self, changes, durable, check))

    def _changed(self, current: Entry, change: Callable[[Node], Node | None], node: Node) -> Node:
        """``node`` (``current``'s, read from its file) passed through ``change``, checked
        and stamped."""
        result = change(node)
        if result is not None:
            if not isinstance(result, Node):
                raise TypeError(f"a change must return a Node or None, got {type(result).__name__}")
            node = result
        if node.id != current.id:
            message = f"the id of node {current.id!r} cannot change (got {node.id!r})"
            raise InvalidNodeError(message, field="id", node_id=current.id)
        validate(node)
        node.updated_at = _stamp_after(current.updated_at, time.time())
        return node

    def _held(self, node_id: str, check: Callable[[Entry], None] | None) -> Entry:
        """The entry of a node whose lock this thread holds; ``check(entry)`` may refuse it."""
        current = self.state.entries.get(node_id)
        if current is None:
            raise NodeNotFoundError(node_id)
        if check is not None:
            check(current)
        return current

    def incoming(self, node_id: str) -> tuple[tuple[str, str], ...]:
        """(source id, edge type) of every edge pointing at ``node_id`` from another node."""
        return tuple(sorted((s, t) for s, t in self.state.reverse.get(node_id, ()) if s != node_id))


def remove(
    engine: Engine,
    node_id: str,
    *,
    durable: bool | None,
    check: Callable[[Entry], None] | None = None,
    scope: Scope | None = None,
    all_copies: bool = False,
) -> tuple[Node, list[str]]:
    """Remove a node's file, and every other file that holds its id in ``scope``
    (:func:`copies_of`: else the next sync would bring the memory back), in one commit
    under its locks; ``check(entry)`` may refuse first. A copy holding another memory
    is refused unless ``all_copies`` (:func:`refuse_other_memories`). Returns the node
    and the paths of the copies removed. An id dropped for its file moved, deleted or
    broken by hand raises :func:`~md_cg.errors.lost_file_error`, naming the file when
    ``scope`` is None."""
    check_id(node_id)
    with engine.hold([node_id]):
        lost = dropped_file(engine, node_id, named=True) if scope is None else None
        if lost is not None:
            raise lost
        current = engine._held(node_id, check)
        reads: Reads = {}  # the file as read: removed only while it is that one (commit_dels)
        node = read_entry(engine, current, reads)
        found = copies_read(engine, [current], scope)
        if not all_copies:
            refuse_other_memories(engine, [(current, node)], found, "delete")
        left = copies_known(engine, [node_id])
        dels = [(node_id, current.path), *(c[:2] for c in found)]
        copies = commit_removal(engine, dels, found, durable, guard=reads)
        settle_left(engine, left)
        return node, [rel for _, rel in copies]


#: what does not tell one memory from another: when it was saved last, its layer (its
#: folder: a move whose old file stayed), its reads
NOT_THE_MEMORY = ("updated_at", "layer", "access_count", "last_access")


def memory_digest(node: Node) -> str:
    """What makes ``node`` the memory it is -- its fields and body, without
    :data:`NOT_THE_MEMORY` -- as a digest: two files with the same one are copies of one memory.
    ``Node.to_dict`` holds no body: it is added (until the before-stop review of session 41
    it was not, and two files of one id differing only in their text were "copies": forget
    removed the one not shown)."""
    key = {k: v for k, v in node.to_dict().items() if k not in NOT_THE_MEMORY}
    key["body"] = node.body
    return hashlib.sha256(
        json.dumps(key, sort_keys=True, default=repr).encode("utf-8", "surrogatepass")
    ).hexdigest()


def refuse_other_memories(
    engine: Engine,
    doomed: Sequence[tuple[Entry, Node]],
    found: Sequence[tuple[str, str, journal.Stamp]],
    verb: str,
) -> None:
    """Refuse a ``verb`` (delete, forget) of ``doomed`` (each entry with its node as read)
    whose other files ``found`` (:func:`copies_read`: those in the caller's scope) hold a
    different memory under its id (:func:`memory_digest`: two clones each added one under
    the same id, and git kept both files). Before session 41 they went with it, unshown
    and with no tombstone of their own. Every file of the id in scope is named, and how to
    settle. Compared as :func:`copies_read` read them (:attr:`Engine.copy_reads`): no file is read again."""
    for entry, node in doomed:
        key, other = memory_digest(node), []
        for node_id, rel, st in found:
            read = engine.copy_reads.get(rel)  # what copies_read read of it: no second read
            if node_id == entry.id and (
                read is None or read[0] != st or read[1] is None or read[1][4] != key
            ):
                other.append(rel)
        if other:
            label = repr(entry.id)
            raise OtherMemoriesError(
                f"cannot {verb} {label}: other files hold this id with a different memory "
                f"({', '.join(other)}; {entry.path} is the one shown), and would go with it. To keep "
                f"one, give it its own id: `mdcg rename {label} NEW_ID --path {other[0]}` "
                f"(rename(..., path=)); or {verb} every copy: --all-copies (all_copies=True)",
                node_id=entry.id,
                verb=verb,
                shown=entry.path,
                others=tuple(other),
            )


def new_paths(
    state: IndexState, staged: Sequence[Staged], guard: Mapping[str, journal.Stamp] | None
) -> set[str]:
    """The paths of ``staged`` that no file of the index holds for the put's id, nor the
    guard read -- an ``add``'s, a move's or a rename's new path, checked empty (or refused)
    before: :meth:`Journal.commit` renames a file there only while nothing is there
    (:class:`md_cg.journal.PathTaken`: a person's file made there since the check is kept)."""
    entries, read = state.entries, guard or {}
    out = set()
    for s in staged:
        e = entries.get(s.node.id)
        if (e is None or e.path != s.rel) and s.rel not in read:
            out.add(s.rel)
    return out


def path_taken(engine: Engine, exc: journal.PathTaken) -> MdcgError:
    """The refusal of a commit whose put to a path found empty found a file there when it
    came to rename its own in (:class:`md_cg.journal.PathTaken`: a person's, made since; not
    replaced): the error an ``add`` gets for a file at its path that nobody indexed yet
    (:func:`_taken`), as had it been there at the check."""
    node_id, rel = exc.changed[0]
    try:
        return _taken(engine, node_id, rel, False)
    except MdcgError as refused:  # the file holds another memory, or one out of scope
        return refused


def copies_known(engine: Engine, ids: Iterable[str]) -> dict[str, list[str]]:
    """The losing copies the index knows of ``ids`` (:attr:`IndexState.duplicates
    <md_cg.index.IndexState.duplicates>`), looked at before a removal of them."""
    dups = engine.state.duplicates
    return {i: list(dups[i]) for i in ids if dups.get(i)}


def settle_left(engine: Engine, left: Mapping[str, list[str]]) -> None:
    """After a removal of ids (``left``: :func:`copies_known` before it), the copies a
    scoped removal left -- another scope's files of the id -- stand in the index, as the
    files say (session 39: the index dropped the id, so a compaction wrote a snapshot
    without that scope's memory, and its next sync told it ``added``)."""
    for node_id in left:
        engine.state.duplicates.pop(node_id, None)
    if left:
        index.resolve_ids(engine.root_str, engine.state, {i: list(rels) for i, rels in left.items()})


#: the id and scope fields (agent, workspace, sensitivity) a file holds, and its memory's
#: :func:`memory_digest`; None: no node
Held = tuple[str, str | None, str | None, str | None, str] | None
#: what :func:`copies_read` read of one file: its stamp then, and what it held
CopyRead = tuple[journal.Stamp, Held]


def copies_of(engine: Engine, entries: Sequence[Entry], scope: Scope | None) -> list[tuple[str, str]]:
    """(id, path) of the other files that hold an id of ``entries``, those in the
    caller's scope (:func:`copies_read`)."""
    return [(node_id, rel) for node_id, rel, _ in copies_read(engine, entries, scope)]


def commit_removal(
    engine: Engine,
    dels: Dels,
    found: Sequence[tuple[str, str, journal.Stamp]],
    durable: bool | None,
    late: list[BaseException] | None = None,
    guard: Reads | None = None,
) -> list[tuple[str, str]]:
    """Remove ``dels`` -- among them the copies ``found`` (:func:`copies_read`) -- in one
    commit; return (id, path) of the copies removed. One whose file changed since it was
    read (another memory saved over it, an edit) is left, and not returned: the commit
    removes a copy only when its file has the stamp read (:meth:`Engine.commit`).
    ``late``, ``guard``: as :func:`commit_dels`."""
    spared = commit_dels(engine, dels, {rel: st for _, rel, st in found}, durable, late, guard)
    return [(i, rel) for i, rel, _ in found if rel not in spared]


def commit_dels(
    engine: Engine,
    dels: Dels,
    read: Mapping[str, journal.Stamp],
    durable: bool | None,
    late: list[BaseException] | None = None,
    guard: Reads | None = None,
) -> list[str]:
    """:meth:`Engine.commit` of ``dels`` alone; returns the paths of ``read`` left (changed
    since read). ``guard``: the files of the memories removed, as read (:func:`read_entry`):
    one that is not that file any more when it is set aside -- a person's save landed after
    md-cg read it -- refuses the removal whole, nothing removed, the save at its path:
    :class:`~md_cg.errors.ChangedOnDiskError` (session 43: a look then an unlink removed
    it, unread; a copy's file is left instead, the others removed). With ``late``, an
    error raised once every file was in place -- only the fsync of their folders failed or
    was interrupted (:func:`~md_cg.errors.was_applied`: the commit is closed, or left open
    when its ``done`` line failed too, for a recovery to close) -- is appended to it
    instead of going up, and the paths of ``read`` still there are returned as the ones
    left (the commit removed the others): the caller finishes its work (a ``forget``'s
    scrub), then raises it."""
    try:
        return engine.commit([], dels, durable=durable, read=read, guard=guard)
    except journal.ChangedSinceRead as exc:
        raise ChangedOnDiskError(*exc.changed[0]) from None
    except BaseException as exc:
        if late is None or not was_applied(exc):
            raise
        late.append(exc)
        return [rel for rel in read if fsops.exists(engine.root_str, rel)]


def copies_read(
    engine: Engine, entries: Sequence[Entry], scope: Scope | None
) -> list[tuple[str, str, journal.Stamp]]:
    """(id, path, stamp as read) of the other files that hold an id of ``entries``, those
    in the caller's scope: the losing copies a sync found (in this process), any file of
    its name anywhere in the layer folders or ``archive/``, and any ``.md`` file there the
    index does not hold, whatever its name (``cp x.md x-backup.md``, a rename/rename
    merge: its frontmatter says which id it holds). So a copy another process's sync saw,
    or nobody's yet, is found too: forget, delete and rename must not leave it (the next
    sync would bring the memory, or the old id, back), and the sweep never removes a
    memory another file still holds. Hidden files (``.x.md``) are not looked at, as a
    sync never reads them (:func:`~md_cg.fsops.find_named`).

    Each such file is read once per engine: what it held is kept with its stamp (inode,
    mtime_ns, size: :attr:`Engine.copy_reads`), and a later call only ``lstat``s it --
    5,000 files no sync can take in (malformed, a losing copy) cost a long-lived handle's
    delete their reads once, not each time (docs/cli.md, ``mdcg delete``). One walk of the
    folders for all of ``entries``: ~0.23 s of CPU at 100k files, and ~0.14 s more for
    the first :meth:`~md_cg.index.IndexState.by_path` of a process."""
    names = {f"{e.id}{paths.NODE_SUFFIX}": e for e in entries}
    found: dict[str, list[str]] = {e.id: list(engine.state.duplicates.get(e.id, ())) for e in entries}
    known = engine.state.by_path()  # kept by the state: no walk of the entries
    unknown: list[str] = []
    stats: dict[str, os.stat_result] = {}
    want = stats if engine.copy_reads else None  # the stamps to compare with, if any
    for top in (*LAYERS, paths.ARCHIVE_DIR):
        for rel in fsops.find_named(engine.root_str, top, names, also=lambda r: r not in known, stats=want):
            name = rel.rsplit("/", 1)[-1]
            if name in names:
                found[names[name].id].append(rel)
            else:
                unknown.append(rel)
    reads: dict[str, CopyRead] = {}  # the files looked at now: one gone or indexed since drops out
    out = []
    for e in entries:
        for rel in dict.fromkeys(found[e.id]):
            got = None if rel == e.path else _read_copy(engine, rel, stats.get(rel), reads)
            if got is not None and _holds(got[1], e.id, scope):
                out.append((e.id, rel, got[0]))
    ids, listed = {e.id for e in entries}, {rel for _, rel, _ in out}
    for rel in unknown:
        if rel in listed:  # a duplicate this process's sync found: listed once
            continue
        got = _read_copy(engine, rel, stats.get(rel), reads)
        if got is not None and got[1] is not None and got[1][0] in ids and _holds(got[1], got[1][0], scope):
            out.append((got[1][0], rel, got[0]))
    engine.copy_reads = reads
    return out


def _read_copy(
    engine: Engine, rel: str, st: os.stat_result | None, reads: dict[str, CopyRead]
) -> CopyRead | None:
    """What the file ``rel`` holds, and its stamp: from :attr:`Engine.copy_reads` when its
    ``lstat`` (``st``, when the walk took it) has the stamp read then, else read now (and
    kept in ``reads``). None when it cannot be read (gone, unsafe, over the size limit,
    not ours to read: cheap to find again, not kept). A file never read is not ``lstat``ed
    first: a fresh process pays its reads, no more."""
    kept = engine.copy_reads.get(rel)
    try:
        if kept is not None and kept[0] == journal.stamp(
            st if st is not None else fsops.lstat(engine.root_str, rel)
        ):
            reads[rel] = kept
            return kept
        data, fst = index.read_limited(engine.root_str, rel)
    except (OSError, UnsafePathError, MalformedNodeFileError):
        return None
    held: Held = None
    try:
        node = index.decode_node(data, rel)
        held = (node.id, node.agent_scope, node.workspace_scope, node.sensitivity, memory_digest(node))
    except MalformedNodeFileError:
        pass  # holds no id a sync would take in: not a copy (read again once it changes)
    reads[rel] = (journal.stamp(fst), held)  # the file read: a change after it is seen next time
    return reads[rel]


def _read_or_none(engine: Engine, rel: str) -> Node | None:
    try:
        return engine.read_node(rel)
    except (OSError, MalformedNodeFileError, UnsafePathError):
        return None  # gone, or unreadable: not known to hold an id


def _holds(held: Held, node_id: str, scope: Scope | None) -> bool:
    """Whether a file that holds ``held`` holds ``node_id`` and the caller's scope admits it."""
    return held is not None and held[0] == node_id and (scope is None or scope.admits_fields(*held[1:4]))


def taken_outside_scope(node_id: str) -> str:
    """The words of a refusal of ``node_id`` to a scoped caller: a memory outside its scope
    holds the id (or the file it would have), and is never named (ids are one namespace)."""
    return f"id {node_id!r} is taken by a memory outside this handle's scope; choose another id"


def foreign_file(
    engine: Engine, node: Node, rel: str | None = None, scope: Scope | None = None
) -> str | None:
    """Why ``node`` cannot be written where it belongs (or at ``rel``), or None: the file
    there holds another id (edited by hand, or placed there), which no write replaces.
    A memory the caller's ``scope`` may not be told of (:func:`admits_held`) is not named,
    nor its file: session 36, a scoped import of ``x`` was told "the file contextual/x.md
    holds memory 'hush'" of another scope's ``hush`` filed there by hand."""
    rel = rel if rel is not None else _place(node)[0]
    read = _read_at(engine, rel)
    if read is None or read[1].id == node.id:
        return None
    if not admits_held(engine, scope, fields_of(read[1])):
        return taken_outside_scope(node.id)
    return _held_by_another(rel, read[1].id)


def file_id(engine: Engine, rel: str) -> str | None:
    """The id the node file at ``rel`` holds, as the index reads it (its frontmatter's,
    else its stem); None when it cannot be read as a node (gone, unsafe, malformed)."""
    node = _read_or_none(engine, rel)
    return None if node is None else node.id


def _read_at(engine: Engine, rel: str) -> tuple[bytes, Node] | None:
    """The bytes and node of the file at ``rel``; None when it cannot be read as a node."""
    try:
        data, _ = index.read_limited(engine.root_str, rel)
        return data, index.decode_node(data, rel)
    except (OSError, UnsafePathError, MalformedNodeFileError):
        return None


def _held_by_another(rel: str, held: str) -> str:
    return (
        f"the file {rel} holds memory {held!r} (edited by hand, or placed there); it is not "
        "written over -- move that file to its own name, or rename one of them"
    )


def _taken(
    engine: Engine,
    node_id: str,
    rel: str,
    indexed: bool,
    *,
    foreign: str | None = None,
    check: Callable[[Entry], None] | None = None,
) -> DuplicateIdError | NodeNotFoundError:
    """The refusal of an ``add`` (no overwrite) of ``node_id`` whose path ``rel`` holds a
    file: its memory, or one nobody indexed yet -- unless that file holds another id
    (looked at when not ``indexed``, or with ``foreign``: an archive's target, the node
    standing at ``foreign``), or, for an archive's target, another copy of this id. The
    memory's file gone from ``rel`` by hand: :func:`~md_cg.errors.lost_file_error` (it is not "there").
    ``check`` may refuse the memory an unindexed file holds (:func:`_check_untracked`)."""
    lost = _lost_at(engine, node_id, rel) if indexed and not foreign else None
    if lost is not None:
        return lost
    # _stored_as raises when the file is another memory
    read = _stored_as(engine, node_id, rel) if foreign or not indexed else None
    _check_untracked(engine, node_id, rel, read, check)
    if (foreign or not indexed) and read is None and _holds_text(engine, rel):
        return _unreadable(engine, node_id, rel)
    if foreign and file_id(engine, rel) == node_id:  # a cp, a merge that left two
        return copy_in_the_way(node_id, foreign, rel)
    return DuplicateIdError(node_id, rel, untracked=not indexed)


def _unreadable(engine: Engine, node_id: str, rel: str, *, there: bool = True) -> DuplicateIdError:
    """The refusal of a write onto a file that cannot be read as a memory (``there``: at
    the path the write goes to; else a file named for the id elsewhere, a second file of
    which the write would make): it may hold text nobody can see now (a merge's two
    versions of two scopes), so never replaced. A scoped caller is told neither the file
    nor whose it may be, and that an unscoped health names it: its own health only counts
    such files (session 39, F4: "health lists it" was said to a scope it never told)."""
    return DuplicateIdError(
        node_id,
        "" if engine.scope is not None else rel,
        f"node id {node_id!r}: {unreadable_why(engine, rel, there=there)}",
        unreadable=True,
    )


def unreadable_why(engine: Engine, rel: str, *, there: bool = True) -> str:
    """Why the id of :func:`_unreadable` is not written: the file ``rel`` (named to an
    unscoped caller only) cannot be read as a memory."""
    if engine.scope is not None:
        return (
            "the id is taken by a file that cannot be read as a memory, whose owner this scope is "
            "not told (an unscoped health names it); choose another id, or have a person fix the file"
        )
    if there:
        return (
            f"the file {rel} is there and cannot be read as a memory (health lists it); "
            "it is not written over -- fix or move it first"
        )
    return (
        f"the file {rel} is named for it and cannot be read as a memory (health lists it; it may "
        "be any scope's); no second file of the id is made -- fix or move that file first, then sync"
    )


def check_move(engine: Engine, node_id: str, standing: str, rel: str) -> None:
    """Refuse (before anything is written) a move of ``node_id``'s file from ``standing``
    to ``rel`` onto another memory's file, one that cannot be read, or another copy of it."""
    if standing != rel:
        _overwritten(engine, node_id, standing, rel)


def _overwritten(
    engine: Engine, node_id: str, existing: str, rel: str, check: Callable[[Entry], None] | None = None
) -> tuple[bytes, Node] | None:
    """The stored file an overwrite of ``node_id`` replaces (at ``existing``), checked to
    hold it: one that cannot be read as a memory (health lists it) is refused, and so is
    a move to ``rel`` onto a file of another memory, onto one that cannot be read, or onto
    another copy of this one (a ``cp``, a merge that left two: sync lists it as a duplicate)
    while the file at ``existing`` still holds it -- the move would erase that copy.
    ``check`` may refuse the memory an unindexed file at ``existing`` holds (:func:`_check_untracked`)."""
    moving_onto = existing != rel and fsops.exists(engine.root_str, rel)
    copy = _stored_as(engine, node_id, rel) if moving_onto else None
    if moving_onto and copy is None and fsops.exists(engine.root_str, rel):
        raise _unreadable(engine, node_id, rel)
    stored = _stored_as(engine, node_id, existing)
    _check_untracked(engine, node_id, existing, stored, check)
    held = engine.state.entries.get(node_id)
    if stored is not None and held is not None and narrowed(engine.scope, held, stored[1]):
        raise DuplicateIdError(node_id, "", f"node {taken_outside_scope(node_id)}")  # narrowed by hand
    if stored is None and _holds_text(engine, existing):
        raise _unreadable(engine, node_id, existing)
    lost = _lost_at(engine, node_id, existing) if stored is None and copy is None else None
    if lost is not None:  # a second file of the memory, which is somewhere else (or nowhere)
        raise lost
    if copy is not None and stored is not None:
        raise copy_in_the_way(node_id, existing, rel)
    return stored


def _check_untracked(
    engine: Engine,
    node_id: str,
    rel: str,
    read: tuple[bytes, Node] | None,
    check: Callable[[Entry], None] | None,
) -> None:
    """``check`` (the caller's scope) of the memory ``read`` that an unindexed file at ``rel``
    holds under ``node_id``, as of an indexed one: session 36, a scoped ``add(id="x",
    overwrite=True)`` replaced an unsynced ``contextual/x.md`` of another scope's ``x`` (a
    copy brought back by hand), that memory lost."""
    if check is not None and read is not None and node_id not in engine.state.entries:
        check(index.make_entry(read[1], rel, 0, len(read[0])))


def copy_in_the_way(node_id: str, standing: str, rel: str) -> DuplicateIdError:
    """The refusal of a move of ``node_id`` from ``standing`` (the file the index holds)
    to ``rel``, a file that holds the same id: another copy, which the move would erase."""
    text = (
        f"cannot move {node_id!r} from {standing} to {rel}: {rel} also holds {node_id!r} (a copy, "
        "or a merge that left two; sync lists it under duplicate ids); it is not written over -- "
        f"keep one file (delete the other, or `delete {node_id}` removes all), sync, then try again"
    )
    return DuplicateIdError(node_id, rel, text)


#: a memory's id and scope fields (agent, workspace, sensitivity), as its file holds them
Fields = tuple[str, str | None, str | None, str | None]


def fields_of(node: Node) -> Fields:
    """``node``'s id and scope fields (:data:`Fields`)."""
    return node.id, node.agent_scope, node.workspace_scope, node.sensitivity


class HeldNow(NodeNotFoundError):
    """The :func:`~md_cg.errors.lost_file_error` of ``node_id``, whose file ``path`` holds
    another memory now (``held``: its id and scope fields), named in the message. The
    handle names it to a caller :func:`admits_held` lets be told only: session 36, a
    scoped ``get("x")`` said "it holds memory 'hush' now" of another scope's ``hush``
    moved over ``x.md`` by hand."""

    def __init__(self, node_id: str, path: str, held: Node) -> None:
        lost = lost_file_error(node_id, path, f"it holds memory {held.id!r} now")
        super().__init__(node_id, lost.hint, hidden="lost", fix=lost.fix)
        self.path = path
        self.held = fields_of(held)


class HeldByAnother(DuplicateIdError):
    """A write of ``node_id`` refused because the file at ``path`` holds another memory,
    ``held`` (its id and scope fields as the file says them), named in the message. The
    handle names it to an unscoped caller only (:func:`admits_held`): a person may give a
    memory's file any name, so another scope's memory can sit where this id's file goes."""

    def __init__(self, node_id: str, path: str, message: str, held: Fields) -> None:
        super().__init__(node_id, path, message)
        self.held = held


def admits_held(engine: Engine, scope: Scope | None, held: Fields) -> bool:
    """Whether a caller in ``scope`` may be told of the memory a file holds (``held``: its
    id and scope fields, as :class:`HeldByAnother` keeps them): the file's fields are in
    the scope, and so is the memory the index holds under that id, if any."""
    if scope is None:
        return True
    entry = engine.state.entries.get(held[0])
    return scope.admits_fields(*held[1:]) and (entry is None or scope.admits(entry))


def _holds_text(engine: Engine, rel: str) -> bool:
    """Whether ``rel`` is a regular file md-cg can read but not parse as a memory (broken
    frontmatter, a whole merge conflict): text that a write over it would lose. A file
    that is gone, unsafe (a symlink) or unreadable is not."""
    try:
        data, _ = index.read_limited(engine.root_str, rel)
        index.decode_node(data, rel)
    except MalformedNodeFileError:
        return True
    except (OSError, UnsafePathError):
        return False
    return False


def _stored_as(engine: Engine, node_id: str, rel: str) -> tuple[bytes, Node] | None:
    """The bytes and node of the file at ``rel`` that an overwrite of ``node_id`` would
    replace (None when it cannot be read as a node). A file that holds another id (edited
    by hand, since it was indexed or never indexed) raises DuplicateIdError: it is another
    memory, not written over."""
    read = _read_at(engine, rel)
    if read is not None and read[1].id != node_id:
        current = engine.state.entries.get(node_id)
        if current is not None:
            moved_away(engine, current, read[1])
        text = f"node id {node_id!r}: {_held_by_another(rel, read[1].id)}"
        raise HeldByAnother(node_id, rel, text, fields_of(read[1]))
    return read


def _reload(
    engine: Engine, prior: dict[str, Entry | None], before: dict[str, Entry] | None = None
) -> list[str]:
    """Reload the index; the ids whose entry differs from ``before`` (default: the
    index as it is now), each with its entry there put in ``prior``."""
    before = dict(engine.state.entries) if before is None else before
    engine.load()
    after = engine.state.entries
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    for k in changed:
        prior.setdefault(k, before.get(k))
    return changed


def _follow(engine: Engine, ident: tuple[int, int, int], prior: dict[str, Entry | None]) -> list[str]:
    """Catch up over a snapshot written by another process, without reloading if exact.

    Exact when the snapshot is the very next one after ours (its generation
    is one more) and every shard it covers was read by us as far as it
    covers it -- before the compaction removed it, or now: the compaction
    removed only shards it covers, so our index plus the log then equals
    the snapshot plus the log. Else the index is reloaded, and the changed ids
    are those whose entry differs from the index before this call (until session
    34 the reload compared with the index this follow had caught up, so a memory
    another process added after its ``forget``, which compacts, was never told).
    """
    head = snapshot.read_header(engine.root_str)
    if head is None or head.identity != ident or engine.snap_gen is None:
        return _reload(engine, prior)
    if snapshot.refusal(head.token, head.identity, snapshot.vouchers(engine.root_str)) is not None:
        return _reload(engine, prior)  # not this store's here: the reload refuses it, builds from the files
    if head.generation != engine.snap_gen + 1:
        return _reload(engine, prior)
    tail = journal.read_tail(engine.root_str, engine.cursor.offsets)
    read = engine.cursor.offsets
    if any(max(read.get(n, 0), tail.offsets.get(n, 0)) < end for n, end in head.offsets.items()):
        # a shard vanished before we had read what the snapshot covers of it: the
        # follow still notes what it can of the log (hand changes after its writes)
        before = dict(engine.state.entries)
        engine.catch_up(tail)
        return _reload(engine, prior, before)
    changed = engine.catch_up(tail, prior)
    engine.snap_ident, engine.snap_gen = head.identity, head.generation
    # the index goes on without reloading: read what it still needs of the old
    # snapshot now, so that the replaced file is closed and its space freed
    snapshot.read_rest(engine.state)
    return changed


def _resolved(
    engine: Engine, tail: journal.Tail, touched: dict[str, list[str]], closed: Collection[str] = ()
) -> list[str]:
    """:meth:`Engine.catch_up`'s end: resolve what the followed ``tail`` touched (return the
    changed ids), and note in ``engine.hand_after`` the files other processes wrote that a
    person changed after (:func:`md_cg.journal.hand_edits_after`: id -> ``("changed" |
    "gone", path)``), and the files a sync line took in that changed after -- this
    process's own lines too, when an open follows them (a ``git pull`` without hooks:
    :func:`md_cg.journal.synced_edits_after`) --, which the follow read as they are, for
    the next sync to tell; each with the entry the index held before this follow (or an
    earlier note of the id) -- a file gone drops it, and a scoped sync needs its scope. An
    id the index held whose file is gone and whose writes in the tail were all rolled back
    is noted gone (:func:`md_cg.journal.undone_only_ids`) -- unless a commit that was open
    before this follow and ``closed`` in it deleted the id: a ``delete`` or ``rename`` this
    process followed mid-flight, its line in an earlier tail (attack a3 of session 37: a
    rolled-back ``add`` after it made md-cg's own delete a hand removal, every process
    then refusing the add and a sync telling ``deleted``); an ``update`` that closed so
    removes no file, and a hand removal beside it is noted (attack a4)."""
    synced = set(journal.synced_ids(tail))
    if engine.hand_after:
        # told by another process's sync, or written over by a write through md-cg since
        # (a hand change written over is not told: the line below re-notes one made after)
        for node_id in [*synced, *journal.closed_ids(tail, engine.cursor)]:
            engine.hand_after.pop(node_id, None)
    # An id a sync line of the tail names was settled there: what this process held of it
    # before may be another memory now (the id deleted, then added again in another scope),
    # so a later note keeps no entry of it, and a scoped sync does not tell it (review r7).
    entries = engine.state.entries
    was = {
        i: None if i in synced else entries.get(i) or _noted_entry(engine.hand_after.get(i)) for i in touched
    }
    changed = index.resolve_ids(engine.root_str, engine.state, touched)
    entries, unread = engine.state.entries, engine.state.unread
    if unread:
        _unread_as_logged(engine, tail, touched)
    noted = journal.synced_edits_after(entries, tail, engine.cursor)
    noted.update(journal.hand_edits_after(engine.root_str, entries, tail, engine.cursor))
    for node_id in [i for i, (kind, _rel) in noted.items() if kind == "gone" and i in unread]:
        del noted[node_id]  # its file may not be read: not gone (kept as the log says)
    if noted:
        _not_by_hand(engine, noted, was, tail)
    lost = [i for i in touched if i not in entries and i not in unread and was.get(i) is not None]
    if lost and (undone := journal.undone_only_ids(tail).difference(closed)):  # rolled back: a hand's
        noted.update({i: ("gone", was[i].path) for i in lost if i in undone and i not in noted})  # type: ignore[union-attr]
    if noted or lost:
        for node_id in moved_on(engine, [*noted, *lost], touched, changed):
            noted.pop(node_id, None)  # md-cg is moving it: not a person's change
    engine.hand_after.update({i: (kind, rel, was.get(i)) for i, (kind, rel) in noted.items()})
    note_untold(engine, [(i, (kind, rel, was.get(i))) for i, kind, rel in journal.untold_in(tail)])
    copyfate.follow(copies_logged(engine, functools.partial(copyfate.ids_written, tail)), tail)
    return changed


def copies_logged(engine: Engine, touching: Callable[[], Collection[str]] | None = None) -> copyfate.Logged:
    """:attr:`Engine.copies_logged`: each copy of a duplicated id as the last sync line naming
    the id logged it (:mod:`md_cg.copyfate`). The snapshot's (:data:`md_cg.snapshot.COPIES`)
    are decoded and checked (:func:`md_cg.copyfate.copies_in`) at their first use, not at
    the open (session 43). ``touching``: the ids whose records the caller is about to change
    (None: any, or it reads them) -- when the undecoded ones name none of them, they are left
    undecoded and the records held otherwise (``copies_held``, ids apart from theirs) are
    returned: what is logged is the two together, and decoding them later gives the same
    records, in the same order, as decoding them first."""
    pending = engine.copies_pending
    if pending.raw and (touching is None or not pending.ids.isdisjoint(touching())):
        decoded = copyfate.copies_in({copyfate.COPIES: pending.raw})
        decoded.update(engine.copies_held)  # ids none of the snapshot's (see above)
        engine.copies_held.clear()
        engine.copies_held.update(decoded)
        engine.copies_pending = copyfate.NOTHING_PENDING
    return engine.copies_held


def note_untold(engine: Engine, untold: Iterable[tuple[str, Noted]]) -> None:
    """Note changes a scoped sync took in and told no one (id, :data:`Noted`: the entry
    held before it), for a sync of a scope that admits the memory -- the scoped process's
    own (:func:`md_cg.maintenance._leave_untold`), or those a followed tail's sync lines
    list (:func:`md_cg.journal.untold_in`, with the entry this process held before the
    follow: a memory removed is told to the scope it had, :func:`md_cg.maintenance._taken_notes`).
    Successive ones add up (:func:`noted_after`)."""
    notes, entries = engine.hand_after, engine.state.entries
    for node_id, noted in untold:
        after = noted_after(notes.get(node_id), noted, entries.get(node_id))
        if after is not None:
            notes[node_id] = after
        elif node_id in notes:
            del notes[node_id]


def noted_after(prior: Noted | None, noted: Noted, now: Entry | None) -> Noted | None:
    """The note of an untold change ``noted`` (:func:`md_cg.maintenance._leave_untold`) of
    an id already noted ``prior`` (untold too: the other processes hold the memory as that
    note says): one the others do not hold (``"added"``) is ``"added"`` still, or nothing
    once gone again -- a file made and removed by hand between two syncs of theirs is no
    change to them, and a ``gone`` note of it refused an ``add`` of the id and told a
    deletion of a memory never told --; one they hold at the noted path is ``"gone"`` from
    there, or ``"changed"`` or ``"moved"`` as the file is there or elsewhere now (``now``)."""
    if prior is None:
        return noted
    kind, rel, was = prior
    if kind == "added":
        return None if now is None else ("added", now.path, was)
    if kind not in ("gone", "moved", "changed"):
        return noted
    was = was if was is not None else noted[2]
    if now is None:
        return ("gone", rel, was)
    return ("changed" if now.path == rel else "moved", rel, was)


def _not_by_hand(
    engine: Engine, noted: dict[str, tuple[str, str]], was: Mapping[str, Entry | None], tail: journal.Tail
) -> None:
    """Drop from ``noted`` what another copy of a duplicated id explains (another scope's
    handle writes the copy of its scope: :func:`take_scope`): a write of a copy that does
    not stand here, still there (``moved``), and a removal of one while the copy standing
    here stays where it was (``added``) -- no person moved, or brought back, anything.
    Noted, each scope's next sync told the other's path ("moved" from it) or "added"."""
    copies = engine.state.duplicates
    dels = {(w.id, w.rel) for w in journal.logged_writes(tail) if not w.put}
    for node_id, (kind, rel) in list(noted.items()):
        before = was.get(node_id)
        written_copy = kind == "moved" and rel in copies.get(node_id, ())
        stayed = kind == "added" and before is not None and before.path == rel and (node_id, rel) not in dels
        if written_copy or stayed:
            del noted[node_id]


def _unread_as_logged(engine: Engine, tail: journal.Tail, touched: Mapping[str, list[str]]) -> None:
    """:func:`_resolved`'s step for the ids it left in :attr:`IndexState.unread
    <md_cg.index.IndexState.unread>` (their file may not be read): each goes as the log
    says -- one whose last write in ``tail`` deletes it is dropped from there (a ``forget``
    by a process that may read it) --, and the first time there are any, a warning says so
    (a listing or search leaves them out: nothing of them is known but the id and path)."""
    unread = engine.state.unread
    writes: dict[str, list[journal.LoggedWrite]] = {}
    for w in journal.logged_writes(tail):
        if w.id in unread and w.id in touched:
            writes.setdefault(w.id, []).append(w)
    for node_id, ws in writes.items():
        last = max(enumerate(ws), key=lambda iw: ((iw[1].logged[1] or 0.0), iw[0]))[1].key
        puts = [w.rel for w in ws if w.key == last and w.put]
        # The last commit that names it says where it is: a forget (no put) took it away; a
        # move (a layer, an archive: the new file put, the old one deleted in one commit)
        # put it at its new path -- unread when that path may not be read, else left to
        # the follow (gone from there by hand: told). Until session 36 the last line alone
        # decided: a move's delete of its old path was taken for a forget (attack a5), and
        # a path it was moved out of stayed unread (attack s36 a1).
        if puts and index.denied(engine.root_str, puts[-1]):
            unread[node_id] = puts[-1]
        else:
            del unread[node_id]
    if unread:
        node_id, rel = min(unread.items())
        n = len(unread)
        warn_once(
            engine,
            "unread",
            f"md-cg: {engine.root_str}: {n} memor{'y' if n == 1 else 'ies'} written since the last "
            f"compaction {'is' if n == 1 else 'are'} in files this process may not read (permission "
            f"denied), e.g. {rel} ({node_id}): kept as the index log says, but not listed or "
            "searched, and a read of one fails; run md-cg as a user who may read them",
        )


def moved_on(
    engine: Engine, node_ids: list[str], touched: dict[str, list[str]], changed: list[str]
) -> set[str]:
    """:func:`_resolved`'s check of the ids it dropped or was about to note as changed by
    hand: those a line of the log past the followed tail names -- another process's write
    moved the file while this follow looked for it (a re-tag between buckets renames the new
    file in, then removes the old one; both looks can fall between them). Each is settled
    again with the paths those lines name (``changed`` gains it), and again while later lines
    name one still found nowhere, for at most :data:`MOVE_WAIT` seconds; the next follow reads
    those lines as usual. Until session 34 the follow dropped it, and a search found nothing
    and noted it as gone by hand (review rD); returns them. A commit left open by a dead
    writer, or by a live one no process is at work on (:func:`idle_commits`), is settled
    once with its paths and not waited for."""
    deadline = time.monotonic() + min(engine.lock_timeout, MOVE_WAIT)
    probe = copy.deepcopy(engine.cursor)  # the log is only looked at: the cursor stays
    moved: set[str] = set()
    while node_ids:
        later = journal.replay(probe, journal.read_tail(engine.root_str, probe.offsets))
        journal.mark_dead(probe, journal.find_dead(engine.root_str, probe))  # no wait for a dead writer
        journal.mark_dead(probe, idle_commits(engine, probe, node_ids))  # nor for a stalled commit
        rels = {i: [*later[i], *touched.get(i, ())] for i in node_ids if i in later}
        moved |= rels.keys()
        changed.extend(i for i in index.resolve_ids(engine.root_str, engine.state, rels) if i not in changed)
        node_ids = [i for i in rels if i not in engine.state.entries]
        if not node_ids:
            break
        if time.monotonic() >= deadline:
            waited_once(engine, probe, node_ids)
            break
        time.sleep(0.001)  # let the writer finish its move
    return moved


def _carried_notes(engine: Engine, snap: snapshot.Snapshot) -> None:
    """Take the notes ``snap`` keeps (:data:`md_cg.snapshot.NOTES`: its compacting process
    noted a file a person changed after md-cg wrote it) into :attr:`Engine.hand_after`,
    where this process holds none of the id -- and drop each of this process's notes of an
    id gone by hand that the snapshot bears out neither by an entry nor by a note: the
    compaction followed the whole log, so the write the note followed was undone through
    md-cg (a ``forget`` or ``delete`` whose log line the compaction folded before this
    process read it: the note was stale). The log after the snapshot is followed next, and
    notes again what it shows."""
    notes, held, kept = engine.hand_after, snap.state.entries, snap.notes
    for node_id in [i for i, (kind, _rel, _was) in notes.items() if kind == "gone"]:
        if node_id not in held and node_id not in kept:
            del notes[node_id]
    for node_id, noted in kept.items():
        if node_id not in notes:
            notes[node_id] = noted


def _noted_entry(noted: Noted | None) -> Entry | None:
    """The entry a :data:`Noted` keeps (None when there is no note)."""
    return None if noted is None else noted[2]


@contextlib.contextmanager
def hold_stripes(engine: Engine, node_ids: Iterable[str]) -> Iterator[None]:
    """The stripe locks of ``node_ids`` alone, for :meth:`md_cg.MdCG.holding`: every other
    process's (or handle's) write of them waits, and any write of this handle inside goes
    ahead -- those that take the store lock exclusive too (``forget``, compaction): holding
    it shared here, as :meth:`Engine.hold` does, made them fail (a shared lock cannot be
    upgraded)."""
    engine.ensure_writable()
    held: list[fsops.FileLock] = []
    with engine.lock:
        try:
            for n in sorted({engine.stripe_of(i) for i in node_ids}):
                lock = engine._stripe(n)
                lock.acquire(timeout=engine.lock_timeout)
                held.append(lock)
            yield
        finally:
            for lock in reversed(held):  # last taken, first released
                lock.release()


def read_entry(engine: Engine, entry: Entry, reads: Reads | None = None) -> Node:
    """The node in ``entry``'s file, which must still hold ``entry.id`` (call under the
    id's lock before removing or rewriting the file). A file whose id was changed by
    hand since it was indexed -- or removed -- is settled against the disk (in memory),
    and NodeNotFoundError is raised for the id, as :meth:`Engine.get` raises it.
    ``reads``: the file's stamp and bytes are added to it (a guarded commit's: :meth:`Engine.commit`)."""
    read: Callable[[str], Node] = (
        engine.read_node if reads is None else functools.partial(_read_into, engine, reads)
    )
    try:
        node = scoped_read(engine, entry.id, read, entry.path)
    except (FileNotFoundError, NotADirectoryError):
        raise moved_away(engine, entry, None) from None
    if node.id != entry.id:
        raise moved_away(engine, entry, node)
    if narrowed(engine.scope, entry, node):
        raise NodeNotFoundError(entry.id)
    return node


def _modify_once(
    engine: Engine,
    changes: dict[str, Callable[[Node], Node | None]],
    durable: bool | None,
    check: Callable[[Entry], None] | None,
    first: First,
) -> list[Node]:
    """One run of :meth:`Engine.modify_many` (:func:`retried`); ``first``: the nodes the first
    run read and made (:func:`redone`)."""
    currents = [engine._held(node_id, check) for node_id in changes]
    reads: Reads = {}
    staged: list[Staged] = []
    dels: list[tuple[str, str]] = []
    out: list[Node] = []
    for current, change in zip(currents, changes.values(), strict=True):
        node = redone(engine, current, reads, first, functools.partial(engine._changed, current, change))
        s = stage(node, archived=current.archived)
        if node.layer == current.layer and current.path != index.canonical_path(current):
            # A file a person placed stays where it is while its layer does not change.
            s = Staged(s.node, current.path, s.data, s.domain)
        if current.path != s.rel:  # a move: not onto another memory's file
            _overwritten(engine, current.id, current.path, s.rel)
            dels.append((current.id, current.path))
        staged.append(s)
        out.append(node)
    engine.commit(staged, dels, durable=durable, guard=reads)
    return out


def _change_once(
    engine: Engine,
    batch: list[Node],
    groups: tuple[Sequence[str], Sequence[str]],
    durable: bool | None,
    checks: tuple[Callable[[Entry], None] | None, Callable[[Entry], None] | None],
) -> tuple[list[str], list[str]]:
    """One run of :meth:`Engine.change_many` (:func:`retried`): ``batch`` staged (``checks[1]``
    refusing an added id), each id of ``groups`` (to archive, to unarchive) moved byte for
    byte after ``checks[0]``, in one commit guarded by the moved files' stamps as read: the
    old file is set aside and checked before it is removed (:func:`md_cg.journal._set_asides`),
    so a person's save landing after the read is put back and the move run again over it.
    Before session 43 (atk12 F1) the old file was unlinked by path after a copy of the bytes
    read: a save landing between the read and the unlink was lost (325 of 662 editor saves
    in a 15 s race of archive/unarchive)."""
    check, check_add = checks
    staged, dels, _ = engine._stage_batch(batch, overwrite=False, stamp=True, check=check_add)
    moved: tuple[list[str], list[str]] = ([], [])
    reads: Reads = {}
    for wanted, group, done in ((True, groups[0], moved[0]), (False, groups[1], moved[1])):
        for node_id in group:
            current = engine.state.entries.get(node_id)
            if current is None:
                raise NodeNotFoundError(node_id)
            if check is not None:
                check(current)
            if current.archived == wanted:
                continue
            to = paths.archived_rel(current.path) if wanted else paths.unarchived_rel(current.path)
            staged.append(engine._moved(current, to, reads))
            dels.append((node_id, current.path))
            done.append(node_id)
    engine.commit(staged, dels, durable=durable, guard=reads)
    return moved


def _read_into(engine: Engine, reads: Reads, rel: str) -> Node:
    """The node file at ``rel``, parsed, its stamp and bytes added to ``reads``."""
    data, st = index.read_limited(engine.root_str, rel)
    reads[rel] = (journal.stamp(st), data)
    return index.decode_node(data, rel)


def retried(engine: Engine, run: Callable[[First], T]) -> T:
    """``run(first)`` -- one read-modify-write under the ids' locks, its commit guarded
    (:meth:`Engine.commit`) -- again when a file it read changed before its rename (an edit
    by hand: the commit undid itself), :data:`HAND_EDIT_TRIES` times in all, then
    :class:`~md_cg.errors.ChangedOnDiskError`. The edit is never overwritten: each run reads
    the file as it is then and applies the change to it (:func:`redone`). Before session 39
    an append landing between the read and the rename was lost (attack 7: 47 of 300)."""
    first: First = {}
    for attempt in range(HAND_EDIT_TRIES):
        try:
            return run(first)
        except journal.ChangedSinceRead as exc:
            if attempt == HAND_EDIT_TRIES - 1:
                raise ChangedOnDiskError(*exc.changed[0]) from None
    raise AssertionError("unreachable")


def redone(engine: Engine, current: Entry, reads: Reads, first: First, make: Callable[[Node], Node]) -> Node:
    """``make`` of the node in ``current``'s file, read into ``reads`` (:func:`read_entry`).
    On a later run (:func:`retried`) the file changed since the first run read it: a change
    that sets a field the edit changed too, to the value it set the first time whatever the
    file held (a body given whole), would overwrite the edit -- refused,
    :class:`~md_cg.errors.ChangedOnDiskError`; a change made of the file's content (a
    field set, a text edited, a link re-pointed) is applied again to the edit."""
    node = make(read_entry(engine, current, reads))
    check_redone(first, current.id, current.path, reads[current.path][1], node)
    return node


def check_redone(first: First, node_id: str, rel: str, data: bytes, node: Node) -> None:
    """Keep ``data`` (the file ``rel`` as read) and ``node`` (made of it) in ``first`` on the
    first run; on a later one after an edit, refuse a ``node`` that overwrites the edit
    (:func:`overrides_edit`): :class:`~md_cg.errors.ChangedOnDiskError`."""
    was = first.setdefault(node_id, (data, node))
    if was[0] != data and overrides_edit(index.decode_node(was[0], rel), was[1], data, node, rel):
        raise ChangedOnDiskError(node_id, rel)


def overrides_edit(then: Node, made: Node, data: bytes, node: Node, rel: str) -> bool:
    """Whether ``node`` (made of the file as it is now, ``data``) sets a field that the edit
    since ``then`` (the file as first read) changed, to the value ``made`` (made of
    ``then``) has, other than the edit's: the change set it whatever the file held."""
    now = index.decode_node(data, rel)
    for f in fields(Node):
        if f.name == "updated_at":
            continue
        a, b, c, d = (getattr(n, f.name) for n in (then, made, now, node))
        if c != a and b != a and d == b and d != c:
            return True
    return False


def narrowed(scope: Scope | None, entry: Entry, node: Node) -> bool:
    """Whether ``scope`` admits ``entry`` (the index's) but not ``node`` (its file now): a
    person narrowed the memory in place (``agent_scope``, ``workspace_scope``,
    ``sensitivity``) since it was indexed. A scoped handle's reads and writes of it are
    then refused as of an unknown id until a sync or a pick-up takes the edit in (attack
    a2 of session 37, P1: ``get`` served the file whole, and ``forget``, ``delete`` and
    ``rename`` returned its body)."""
    return (
        scope is not None
        and scope.admits(entry)
        and not scope.admits_fields(node.agent_scope, node.workspace_scope, node.sensitivity)
    )


def moved_away(engine: Engine, entry: Entry, found: Node | None) -> NodeNotFoundError:
    """The index drops ``entry`` (its file holds ``found`` now: :class:`HeldNow`, or is gone: None) unless
    another file holds its id; the error to raise (:func:`~md_cg.errors.lost_file_error`: the caller saw
    the entry). The id the file claims now is left as it is (that file may be a copy: a
    sync sorts it out, with every candidate). A file gone is noted for the next sync
    (:attr:`Engine.hand_after`), which tells it, and until then :func:`dropped_file` names
    it to every lookup of the id."""
    index.resolve_ids(engine.root_str, engine.state, {entry.id: [entry.path]})
    if entry.id in engine.state.entries:  # another file holds it: that one stands now
        return NodeNotFoundError(entry.id)
    if found is None:
        engine.hand_after[entry.id] = ("gone", entry.path, entry)
        return lost_file_error(entry.id, entry.path)
    return HeldNow(entry.id, entry.path, found)


def still_gone(engine: Engine, node_ids: list[str]) -> list[str]:
    """:meth:`Engine.drop_missing`'s first step: of ``node_ids`` (hits whose file was gone),
    those whose file is still gone from where the index has it once no write of them by
    md-cg is in flight. Another process's re-tag moves a file between buckets (the new file
    renamed in, then the old one removed, both after its commit line): a refresh that read
    the log before that line, or settled the id just before the next move, holds a path with
    no file, and a look at that path alone took md-cg's move for a person's -- the hit was
    dropped and noted as removed by hand (review rD: 1 search in 463, 3 in 329 with
    ``refresh_interval=0``, found nothing while another process re-tagged the memory in a
    loop). So: refresh, look at each id's file, then read the log past the refresh
    (:func:`named_in_log`); a record of the id there, or an open commit of it a process is
    at work on, means md-cg moved it meanwhile: refresh and look again. A commit's line is
    written before any of its files changes, so a file found gone with the log quiet for its
    id after the look was not moved by md-cg. An id md-cg keeps moving for
    :data:`MOVE_WAIT` seconds is left as it is (not dropped, not noted), and the open
    commits of it are not waited for again (:func:`waited_once`)."""
    deadline = time.monotonic() + min(engine.lock_timeout, MOVE_WAIT)
    while True:
        engine.refresh()
        entries = engine.state.entries
        gone = [i for i in node_ids if i not in entries or file_gone(engine.root_str, entries[i].path)]
        moving = named_in_log(engine, gone) if gone else set()
        if not moving:
            return gone
        if time.monotonic() >= deadline:
            waited_once(engine, engine.cursor, moving)
            return [i for i in gone if i not in moving]
        node_ids = gone
        time.sleep(0.001)  # let the writer finish its move


def file_gone(root: str, rel: str) -> bool:
    """Whether nothing is at ``root/rel``. A path in a folder this process may not read is
    not gone (:func:`os.path.lexists` says False for it): whether its file is there is
    unknown, and what the index holds of it stands (docs/reliability.md, row 20)."""
    try:
        os.lstat(os.path.join(root, rel))
    except (FileNotFoundError, NotADirectoryError):
        return True
    except PermissionError:
        return False
    except OSError:
        return True
    return False


def named_in_log(engine: Engine, node_ids: Iterable[str]) -> set[str]:
    """The ids of ``node_ids`` that a record of the log past this process's cursor names,
    or that a commit still open by a live writer names while a process is at work on it
    (:func:`md_cg.journal.replay` on a copy of the cursor: the index is left as it is).
    An open commit nobody is at work on (:func:`idle_commits`: its writer was stopped
    midway and lives on) does not name its ids: until session 34 it did for as long as
    that writer lived, and every search, ``get`` and open of another process whose
    memory it named waited ``lock_timeout`` (30 s; attack a1). The log is read again
    after that look, so a commit its writer closed meanwhile is named by its ``done``
    line (written before the writer lets go of its stripes)."""
    want = set(node_ids)
    probe = copy.deepcopy(engine.cursor)
    touched = journal.replay(probe, journal.read_tail(engine.root_str, probe.offsets))
    want = {i for i in want if i in touched}
    idle = idle_commits(engine, probe, want) if want else []
    if idle:
        again = copy.deepcopy(engine.cursor)
        again.dead |= {c.key for c in idle}  # replayed, but not named while still open
        touched = journal.replay(again, journal.read_tail(engine.root_str, again.offsets))
        want = {i for i in want if i in touched}
    return want


def idle_commits(engine: Engine, cursor: Cursor, node_ids: Iterable[str]) -> list[journal.Commit]:
    """The commits ``cursor`` holds open by a live writer (not marked dead) that name one of
    ``node_ids`` and that no process is at work on (:func:`_at_work`)."""
    want = set(node_ids)
    return [
        c
        for c in cursor.pending.values()
        if c.key not in cursor.dead and not c.ids.isdisjoint(want) and not _at_work(engine, c)
    ]


def _at_work(engine: Engine, c: journal.Commit) -> bool:
    """Whether a process may be working on open commit ``c`` now. Its writer holds the
    stripe lock of every id it names from before the commit line until after its ``done``
    line (:meth:`Engine.hold`; a recovery too), so a stripe of them nobody holds -- found
    with a lock try that does not wait, then let go -- means nobody is: the writer was
    stopped midway (Ctrl-C, an I/O error: docs/reliability.md row 10) and lives on, and
    the commit waits for the next recovery; the files decide meanwhile. A stripe this
    engine holds is not looked at (a second descriptor of this process would find it
    busy): no other process is writing those ids then. A commit waited for
    :data:`MOVE_WAIT` once (:func:`waited_once`), or whose stripe cannot be looked at,
    is not worked on as far as a read is concerned."""
    if c.key in engine.stalled:
        return False
    for n in sorted({engine.stripe_of(i) for i in c.ids}):
        own = engine._stripes.get(n)
        if own is not None and own.depth:
            return False
        try:
            if not fsops.owner_alive(engine.root_str, paths.meta(paths.STRIPE_DIR, f"{n:02d}.lock")):
                return False
        except (OSError, UnsafePathError):
            return False
    return True


def waited_once(engine: Engine, cursor: Cursor, node_ids: Iterable[str]) -> None:
    """A read waited :data:`MOVE_WAIT` for ``node_ids``: the open commits of them in
    ``cursor`` are not waited for again by this engine (a writer holding its stripes
    for long -- a ``holding`` block, a large batch -- costs each process one wait)."""
    want = set(node_ids)
    engine.stalled.update(c.key for c in cursor.pending.values() if not c.ids.isdisjoint(want))


def dropped_by_hand(engine: Engine, node_ids: Iterable[str]) -> list[str]:
    """:meth:`Engine.drop_missing`: after a refresh (a search's hit whose file is gone), no
    md-cg write took the file away -- a person did --, so each id dropped is noted for the
    next sync (:attr:`Engine.hand_after`), as :func:`moved_away` notes it: dropped without
    the note, ``add`` of the id wrote a second file next to the moved one (review s32: a
    search, then ``add``, made a ``duplicate_id``). A write of the id through md-cg that
    this process follows after clears the note (:func:`_resolved`)."""
    held = {i: engine.state.entries[i] for i in node_ids if i in engine.state.entries}
    index.resolve_ids(engine.root_str, engine.state, {i: [e.path] for i, e in held.items()})
    dropped = [i for i in held if i not in engine.state.entries]
    for i in dropped:
        engine.hand_after[i] = ("gone", held[i].path, held[i])
    return dropped


def read_by_id(engine: Engine, node_id: str) -> Node:
    """:meth:`Engine.get`: the node of ``node_id`` read from its file, after one refresh
    when the file does not hold it (another process may have just moved it), and again
    while the log past that refresh names a write of the id (:func:`named_in_log`: a process
    re-tagging the memory in a loop had moved it again -- 1 get in about 1,000 said its file
    was moved by hand, session 34), for at most :data:`MOVE_WAIT` seconds. Still not there:
    :func:`~md_cg.errors.lost_file_error` when the index holds the id (its file moved,
    deleted or edited to another id by hand, or dropped for that: :func:`dropped_file`),
    else NodeNotFoundError."""
    check_id(node_id)
    engine.fresh()
    if engine.hand_after:
        with engine.lock:
            taken_back(engine, (paths.id_key(node_id),))  # its file put back by hand
    node, lost = _read_held(engine, node_id, None)
    if node is not None:
        return node
    engine.refresh()
    node, lost = _read_held(engine, node_id, lost)
    deadline = time.monotonic() + min(engine.lock_timeout, MOVE_WAIT)
    while node is None and named_in_log(engine, (node_id,)):
        if time.monotonic() >= deadline:
            waited_once(engine, engine.cursor, (node_id,))
            break
        time.sleep(0.001)  # let the writer finish its move
        engine.refresh()
        node, lost = _read_held(engine, node_id, lost)
    if node is not None:
        return node
    if node_id in engine.state.unread:
        return _read_unread(engine, node_id)
    if node_id in engine.state.entries and lost is not None:
        raise lost
    raise dropped_file(engine, node_id, named=False) or NodeNotFoundError(node_id)


def _read_unread(engine: Engine, node_id: str) -> Node:
    """:func:`read_by_id` of an id the log names whose file this process may not read
    (:attr:`IndexState.unread <md_cg.index.IndexState.unread>`): the file is looked at
    again -- readable now, it is taken in and read -- else the permission error naming it
    is raised, as for a memory of the snapshot there. Until session 35 the error said the
    file was moved or deleted outside md-cg and to run ``sync``, which then told it
    ``deleted`` (review rH)."""
    rel = engine.state.unread[node_id]
    index.resolve_ids(engine.root_str, engine.state, {node_id: [rel]})
    if node_id in engine.state.unread:
        raise MalformedNodeFileError(engine.state.unread[node_id], index.PERMISSION_DENIED)
    node, lost = _read_held(engine, node_id, None)
    if node is None:
        raise lost or dropped_file(engine, node_id, named=False) or NodeNotFoundError(node_id)
    return node


def scoped_read(engine: Engine, node_id: str | None, read: Callable[..., Node], *args: Any) -> Node:
    """``read(*args)``: the node of ``node_id``'s file (``engine.read_node`` of its path, or
    ``index.decode_node`` of its bytes). A file that no longer reads as a memory raises its
    :class:`~md_cg.errors.MalformedNodeFileError` to an unscoped handle (the owner's: what
    is wrong, values quoted); to a scoped one its :func:`~md_cg.errors.withheld_problem` --
    the file, its line and ``node_id``, not the reason, which may quote the file's new
    values (another agent's name in an ``agent_scope`` written as a list): a scoped ``get``,
    ``update``, ``archive``, ``rename``, ``delete`` and ``forget`` quoted it before session
    39. A file this process may not read is told so to either (that reason quotes nothing)."""
    try:
        return read(*args)
    except MalformedNodeFileError as exc:
        if engine.scope is None or exc.reason == index.PERMISSION_DENIED:
            raise
        told = withheld_problem(exc, node_id)
    raise told  # outside the handler: the quoting error is not kept as its context


def _read_held(
    engine: Engine, node_id: str, lost: NodeNotFoundError | None
) -> tuple[Node | None, NodeNotFoundError | None]:
    """One look of :func:`read_by_id`: the node in the file the index holds for ``node_id``,
    else None with the error to raise (``lost``, the earlier look's, when it has no entry)."""
    e = engine.state.entries.get(node_id)
    if e is None:
        return None, lost
    try:
        node = scoped_read(engine, node_id, engine.read_node, e.path)
    except (FileNotFoundError, NotADirectoryError):
        return None, lost_file_error(node_id, e.path)
    except UnsafePathError as exc:  # a symlink or no regular file put there by hand: named
        return None, lost_file_error(node_id, e.path, f"it {exc.reason}")
    if node.id != node_id:
        return None, HeldNow(node_id, e.path, node)
    if narrowed(engine.scope, e, node):
        raise NodeNotFoundError(node_id)  # by hand, out of the caller's scope: as unknown
    return node, lost


@contextlib.contextmanager
def told_dropped(engine: Engine, keys: set[str]) -> Iterator[None]:
    """Inside :meth:`Engine.hold`: a plain "no node" error of a held id (its key in
    ``keys``) that the index dropped because its file was moved, deleted or broken by hand
    (:func:`dropped_file`) becomes that :func:`~md_cg.errors.lost_file_error` -- the file not named: whose
    it was (the caller's scope) cannot be told here. The callers that know the scope name
    it to an unscoped caller (:meth:`md_cg.MdCG.update`, ``archive``, ``rename``, ``delete``).
    Looked at under the id's lock, the index caught up: a look before it may take another
    process's move for a hand's (8 writers of the same ids: 1 write in 3 runs refused)."""
    try:
        yield
    except NodeNotFoundError as exc:
        node_id = exc.node_id
        if exc.hint or exc.hidden or not isinstance(node_id, str):
            raise
        lost = dropped_file(engine, node_id, named=False) if paths.id_key(node_id) in keys else None
        if lost is None:
            raise
        raise lost from None


def dropped_file(engine: Engine, node_id: str, *, named: bool) -> NodeNotFoundError | None:
    """The :func:`~md_cg.errors.lost_file_error` of an id the index dropped when it followed the log
    because a person moved, deleted or broke its file after md-cg wrote it (noted in
    :attr:`Engine.hand_after` until a sync tells it), else None. ``named``: the error
    names the file and why it is unusable (an unscoped caller's; a scoped one may not
    learn of another scope's files). An id the log names whose file this process may not
    read (:attr:`IndexState.unread <md_cg.index.IndexState.unread>`) was not dropped: named,
    its permission error is raised here (as a read of a memory of the snapshot there
    raises it); not named, the error says only that its file may not be read."""
    if node_id in engine.state.entries:
        return None
    unread = engine.state.unread.get(node_id)
    if unread is not None:  # looked at again: readable, or gone, since (attack a5)
        index.resolve_ids(engine.root_str, engine.state, {node_id: [unread]})
        if node_id in engine.state.entries:
            return None
        unread = engine.state.unread.get(node_id)
    if unread is not None:
        if named:
            raise MalformedNodeFileError(unread, index.PERMISSION_DENIED)
        why = "its file cannot be read by this process (permission denied)"
        return NodeNotFoundError(node_id, why, hidden="lost", fix="run md-cg as a user who may read it")
    told = engine.hand_after.get(node_id)
    if told is None or told[0] != "gone":
        return None
    rel = told[1]
    lost = lost_file_error(node_id, rel if named else None, engine.state.problems.get(rel, ""))
    scope, was = engine.scope, told[2]
    if not named and scope is not None and (was is None or not scope.admits(was)):
        # its sync leaves this note to a sync that may tell it (md_cg.maintenance._taken_notes):
        # "sync takes that in, then try again" looped (session 39, F4)
        return NodeNotFoundError(node_id, lost.hint, hidden="lost", fix=UNSCOPED_SYNC_FIX)
    return lost


def new_id(engine: Engine, node_id: str) -> None:
    """Refuse a new file for ``node_id`` (:meth:`Engine.check_new`, under its lock): an id
    every clone can hold (:func:`md_cg.node.check_new_id`), and none the index dropped for
    its file moved, deleted or broken by hand (:func:`dropped_file`, the file not named
    here): the memory is still somewhere, and a second file of it would make a duplicate
    id -- :meth:`md_cg.MdCG.add` names the file to an unscoped caller."""
    check_new_id(node_id)
    lost = dropped_file(engine, node_id, named=False) or dropped_twin(engine, node_id, named=False)
    broken = broken_file_of(engine, node_id)
    # A scoped caller is told of a broken file as such: "sync takes that in, then try
    # again" looped, its sync never taking in another scope's note of the id
    if lost is not None and (broken is None or engine.scope is None):
        noted = engine.hand_after.get(node_id) if node_id not in engine.state.entries else None
        raise _taken_outside(engine, noted[2] if noted is not None and noted[0] == "gone" else None) or lost
    if broken is not None:
        raise _unreadable(engine, node_id, broken, there=False)


def broken_file_of(engine: Engine, node_id: str) -> str | None:
    """A file named for ``node_id`` (or a twin spelling of it) that the index found cannot
    be read as a memory (:attr:`IndexState.problems <md_cg.index.IndexState.problems>`:
    broken by hand, over a size limit, not readable), else None. Whose it is cannot be
    told, so its id is not given to a new memory: session 39 (F1), a scoped ``remember``
    of ``b7`` while another scope's ``b7.md`` had a YAML typo made a second file of the
    id, and once the typo was fixed that scope's ``get`` said "no node with id 'b7'"."""
    problems = engine.state.problems
    if not problems:
        return None
    stems = _problem_stems(engine)
    found = [rel for rel in stems.get(paths.id_key(node_id), ()) if rel in problems]
    return min(found) if found else None


def broken_copy(engine: Engine, node_id: str) -> MalformedNodeFileError | None:
    """For an unscoped single read of ``node_id`` (``get``, ``read_text``): the error naming
    another file of the id that cannot be read as a memory (:func:`broken_files_of`), else
    None. Which copy holds the memory cannot be told while one cannot be read (its
    ``updated_at`` may be the newest, or its scope another), so none is picked: session 42,
    an unscoped process served b's copy of ``d`` while a's was broken by hand, and a's
    copy when b's (the newest) was -- a scoped handle is served no other scope's copy when
    its own is broken (:func:`own_broken_copy` names it)."""
    e = engine.state.entries.get(node_id)
    if e is None:
        return None
    found = broken_files_of(engine, node_id, e.path)
    if not found:
        return None
    rel, line, why, held = found[0]
    hint = (
        f"; {_id_read(held)}, and memory {node_id!r} is also in {e.path}, which reads, but which file "
        f"holds it cannot be told while this one cannot be read -- fix or remove {rel}, then run "
        "`mdcg sync` (MdCG.sync())"
    )
    return MalformedNodeFileError(rel, why + hint, line=line, node_id=node_id)


def own_broken_copy(engine: Engine, scope: Scope, node_id: str) -> MalformedNodeFileError | None:
    """For a scoped single read of ``node_id`` it does not see: the error naming its own copy
    of the id that cannot be read as a memory -- a file of :func:`broken_files_of` whose
    scope fields, as the index (:attr:`IndexState.copy_fields
    <md_cg.index.IndexState.copy_fields>`) or the last sync line naming the id
    (:attr:`Engine.copies_logged`) last read them, the scope admits --, else None. Session
    43: a's copy of ``d`` broken by hand beside b's, a's ``get`` said "no node with id 'd'"
    (an unscoped one names the file). Another scope's file, or one whose scope was never
    read, is not named: a scoped caller learns of no file outside its scope."""
    e = engine.state.entries.get(node_id)
    if e is not None and scope.admits(e):
        return None
    found = broken_files_of(engine, node_id, None if e is None else e.path)
    logged = engine.copies_logged.get(node_id, {}) if found else {}  # (decoded only then)
    for rel, line, why, held in found:
        fields = engine.state.copy_fields.get(rel) or (logged[rel].fields if rel in logged else None)
        if fields is not None and scope.admits_fields(*fields):
            hint = (
                f"; {_id_read(held)}, and it held this scope's memory {node_id!r} when last read -- fix "
                f"or remove {rel}, then run `mdcg sync` (MdCG.sync())"
            )
            return MalformedNodeFileError(rel, why + hint, line=line, node_id=node_id)
    return None


class BrokenFile(NamedTuple):
    """A file of an id that cannot be read as a memory (:func:`broken_files_of`)."""

    rel: str
    line: int | None
    why: str
    #: the id it names, read by :func:`md_cg.nodefile.tolerant_id` (None: it cannot be told)
    held: str | None


def broken_files_of(engine: Engine, node_id: str, standing: str | None) -> list[BrokenFile]:
    """The files of ``node_id`` but ``standing`` (the file the index serves) that cannot be
    read as a memory, by path: a losing copy the index recorded, read now (a fresh process:
    no sync has looked at it since it broke), and a file named for the id a sync found
    broken (as :func:`broken_file_of` finds them) -- each but one whose id can still be read
    and is another (:func:`md_cg.nodefile.tolerant_id`; session 43: a person's broken
    ``notes/x.md`` holding ``id: notes-x``, or another memory's half-written file, refused
    every unscoped ``get`` of ``x``)."""
    problems = engine.state.problems
    found: dict[str, tuple[int | None, str]] = {}
    for rel in engine.state.duplicates.get(node_id, ()):
        problem = _copy_problem(engine, rel)
        if problem is not None:
            found[rel] = problem
    if problems:
        for rel in _problem_stems(engine).get(paths.id_key(node_id), ()):
            if rel in problems and rel not in found:
                found[rel] = (None, problems[rel])
    out: list[BrokenFile] = []
    for rel in sorted(found):
        held = None if rel == standing else _tolerant_id(engine, rel)
        if rel != standing and (held is None or paths.id_key(held) == paths.id_key(node_id)):
            out.append(BrokenFile(rel, *found[rel], held))
    return out


#: A file changed less than this long ago (ns) is read again at every look: a write within
#: the file system's timestamp tick (a few ms) may leave its stamp as it was
_SETTLED_NS = 2_000_000_000


def _copy_problem(engine: Engine, rel: str) -> tuple[int | None, str] | None:
    """Why the copy at ``rel`` cannot be read as a memory (its line, the reason), or None
    (it reads, or is gone or unsafe). Kept by the file's stamp (inode, mtime, ctime, size)
    once it is :data:`_SETTLED_NS` old (session 43: every unscoped ``get`` of a duplicated
    id parsed each other copy again -- 46.9 µs of a 96 µs ``get``)."""
    kept: dict[str, tuple[tuple[int, ...], tuple[int | None, str] | None]]
    kept = engine.__dict__.setdefault("_copy_problems", {})
    try:
        st = os.lstat(os.path.join(engine.root_str, rel))
        stamp: tuple[int, ...] | None = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    except (OSError, ValueError):
        stamp = None
    held = kept.get(rel)
    if held is not None and held[0] == stamp:
        return held[1]
    try:
        index.parse_file(engine.root_str, rel)
        problem = None
    except MalformedNodeFileError as exc:
        problem = (exc.line, exc.reason)
    except (OSError, UnsafePathError):
        return None
    if stamp is not None and time.time_ns() - max(stamp[1], stamp[2]) > _SETTLED_NS:
        if len(kept) >= 10_000:
            kept.clear()
        kept[rel] = (stamp, problem)
    return problem


def _tolerant_id(engine: Engine, rel: str) -> str | None:
    """The id the file at ``rel`` names though it cannot be read as a memory, or None
    (:func:`md_cg.nodefile.tolerant_id`; a file that cannot be read or decoded: None)."""
    try:
        data, _ = index.read_limited(engine.root_str, rel)
        text = nodefile.read_bytes_as_text(data, rel)
    except (OSError, UnsafePathError, MalformedNodeFileError):
        return None
    return nodefile.tolerant_id(text.removeprefix("\ufeff"), paths.stem_of(rel))


def _id_read(held: str | None) -> str:
    """What a refusal naming a broken file says of the id it holds."""
    return "its id cannot be read" if held is None else f"its frontmatter names id {held!r}"


def _problem_stems(engine: Engine) -> dict[str, list[str]]:
    """The paths of :attr:`IndexState.problems <md_cg.index.IndexState.problems>` by the
    id key of their stem, kept while the problems stay the same paths (told by their
    string hashes, which Python keeps: ~15 µs for 1,000 paths, where computing the keys
    again cost every add ~2 ms)."""
    state = engine.state
    key = (id(state.problems), len(state.problems), sum(map(hash, state.problems)))
    kept = engine.__dict__.get("_problem_stems")
    if kept is not None and kept[0] == key:
        return kept[1]
    stems: dict[str, list[str]] = {}
    for rel in state.problems:
        if rel.endswith(paths.NODE_SUFFIX):
            stems.setdefault(paths.id_key(paths.stem_of(rel)), []).append(rel)
    engine.__dict__["_problem_stems"] = (key, stems)
    return stems


def take_scope(engine: Engine) -> None:
    """Rank the copies of every duplicated id (a file copied by hand, a git merge of two
    clones' memories, one made before session 39 beside a file that could not be read)
    as the handle's scope does (:attr:`IndexState.prefer <md_cg.index.IndexState.prefer>`):
    its own copy first (in its scope, with an agent or workspace), then a shared one it
    sees, then the rest -- so that a scoped handle's reads (get, search, list) serve the
    copy of its scope, and another scope's file of the id never hides its own memory.
    An unscoped handle ranks them all alike (:func:`md_cg.index.winner`); ``health``
    names every losing copy to it (``duplicate_id``). Called whenever the index is
    (re)loaded or rebuilt; reads only the files of duplicated ids."""
    scope = engine.scope
    settle_copies(engine, None if scope is None else functools.partial(_own_first, scope))


#: :func:`_own_first` of a copy the handle's scope does not admit (the last)
_ELSEWHERE = 2


def _own_first(scope: Scope, copy: Entry | index.CopyFields) -> int:
    """:attr:`IndexState.prefer <md_cg.index.IndexState.prefer>` of a handle in ``scope``."""
    if not scope.admits_fields(copy.agent_scope, copy.workspace_scope, copy.sensitivity):
        return _ELSEWHERE
    return 0 if copy.agent_scope is not None or copy.workspace_scope is not None else 1


def settle_copies(engine: Engine, prefer: index.Prefer | None) -> None:
    """Rank the copies of duplicated ids by ``prefer`` from now on, and settle again the
    ids whose standing copy that may change (in memory: nothing is logged)."""
    state = engine.state
    was, state.prefer = state.prefer, prefer
    if was is None and prefer is None:
        return  # every scope's ranking already
    entries = state.entries
    if prefer is not None:
        ids = [i for i in state.duplicates if i in entries and _outranked(state, prefer, i)]
    elif was is not None:  # back to every scope's ranking: where ``was`` ranked the copies apart
        ids = [i for i in state.duplicates if i in entries and _ranked_apart(state, was, i)]
    if ids:
        index.resolve_ids(engine.root_str, state, {i: [entries[i].path] for i in ids})


def _ranked_apart(state: index.IndexState, prefer: index.Prefer, node_id: str) -> bool:
    """Whether ``prefer`` may have ranked the copies of ``node_id`` apart (so that its
    standing copy may not be the one every scope ranks first): a copy ranks otherwise than
    the standing one, or is unknown. Copies it ranks alike stand as for every scope (a
    scoped handle's compaction, :func:`plain_winners`, read every duplicated id's files)."""
    fields = state.copy_fields
    losers = state.duplicates[node_id]
    if any(rel not in fields for rel in losers):
        return True
    rank = prefer(state.entries[node_id] if node_id in state.restricted else _PLAIN)
    return any(prefer(fields[rel]) != rank for rel in losers)


#: the scope fields of a memory every caller may see
_PLAIN = index.CopyFields(None, None, None)


def _outranked(state: index.IndexState, prefer: index.Prefer, node_id: str) -> bool:
    """Whether a losing copy of ``node_id`` may rank before its standing one by ``prefer``:
    by the scope fields the index keeps of the copies (:attr:`IndexState.copy_fields
    <md_cg.index.IndexState.copy_fields>`), or unknown. Copies that rank alike keep the
    order every scope gives them, so the standing copy stays (session 40: settling every
    duplicated id read all their files, a scoped open with 1,000 copied ids ~25x slower)."""
    fields = state.copy_fields
    losers = state.duplicates[node_id]
    if any(rel not in fields for rel in losers):
        return True
    best = min(prefer(fields[rel]) for rel in losers)
    if best >= _ELSEWHERE:
        return False  # none of them is the handle's: the standing copy is not looked at
    # an entry no caller is kept from ranks as a copy without scope fields, not loaded (a
    # snapshot's entries are read on first use)
    return best < prefer(state.entries[node_id] if node_id in state.restricted else _PLAIN)


@contextlib.contextmanager
def plain_winners(engine: Engine) -> Iterator[None]:
    """The index with every duplicated id's copy standing as for every scope (a snapshot
    is read by handles of every scope: it never holds one scope's pick), then the
    handle's own ranking again."""
    prefer = engine.state.prefer
    if prefer is None:
        yield
        return
    settle_copies(engine, None)
    try:
        yield
    finally:
        settle_copies(engine, prefer)


def _notes(engine: Engine) -> Notes:
    """``engine.hand_after`` as :class:`Notes` (a sync sets a plain dict): made once."""
    notes = engine.hand_after
    if not isinstance(notes, Notes):
        notes = engine.hand_after = Notes(notes)
    return notes


def dropped_twin(engine: Engine, node_id: str, *, named: bool) -> IdCollisionError | None:
    """The refusal of a new ``node_id`` that differs only by case or Unicode normalisation
    from an id the index dropped for its file moved, deleted or broken by hand (noted in
    :attr:`Engine.hand_after` until a sync tells it), else None: looked up by the id's
    uniqueness key, as a twin the index holds is (:meth:`Engine.check_new`). By the exact
    id alone, ``add('X1')`` after a search dropped ``x1`` wrote a second file of the memory
    (review s32 r5: sync then told twins; without the search it was refused). ``named``:
    the error names the id and its file, as before the drop (an unscoped caller's)."""
    if not engine.hand_after:
        return None  # nothing noted (the usual case): no key to compute
    entries, notes = engine.state.entries, _notes(engine)
    for other in notes.keyed((paths.id_key(node_id),)):
        kind, rel, _was = notes[other]
        if kind == "gone" and other != node_id and other not in entries:
            if not named:
                return IdCollisionError(node_id, None, "")
            return IdCollisionError(node_id, other, rel, twin_labels(node_id, other))
    return None


def taken_back(engine: Engine, keys: Iterable[str] | None = None) -> list[str]:
    """Take back into the index each id noted gone (:attr:`Engine.hand_after`) whose file
    is at its noted path again, holding it (moved back by hand before a sync); return
    those ids. The index holds the file as it is now (its fields and text) with the
    file's size and mtime as the entry held them before the drop, as if the file had never
    left: the next sync compares it with the file as for any file, and tells ``changed``
    when it differs -- unless a write through md-cg wrote it over meanwhile -- and nothing
    when it does not. (Until session 37 the entry held before was put back whole, its
    scope fields too: a file another process had narrowed to a private scope after the
    noting process last held it was served with its old, shared scope -- attack a1 of
    session 37, spread by the compaction that keeps the note to every process opening
    after it.) Left noted, every write
    of the id said its file was moved while it was there, and the sync told a move from the
    path to itself (review s32 r5). A note without that entry (:func:`_resolved`: an id a
    sync line settled) takes the file as it is and becomes ``"changed"``, told by the sync.

    Looked at lazily: ``keys`` (uniqueness keys) -- the notes of the ids a read
    (:func:`read_by_id`) or a write (:meth:`Engine.hold`) names, a twin's too, found by
    key (:meth:`Notes.keyed`) -- or, None, every note, by a sync before it looks
    (:meth:`md_cg.MdCG.sync`). Every refresh looked at every note (a sort and a stat
    each): after a search dropped 5,000, a ``get`` of another id took 40 ms, not 0.1 ms
    (review s32 r7). Until a read, a write or a sync names it, a file put back stays
    out of the index (a search does not find it)."""
    if not engine.hand_after:
        return []
    notes = _notes(engine)
    state, back = engine.state, []
    for node_id in sorted(notes) if keys is None else notes.keyed(keys):
        kind, rel, was = notes[node_id]
        if kind != "gone" or node_id in state.entries or state.twin_of(node_id) is not None:
            continue
        try:
            parsed = index.parse_file(engine.root_str, rel) if fsops.exists(engine.root_str, rel) else None
        except (OSError, MalformedNodeFileError, UnsafePathError):
            continue
        if parsed is None or parsed.entry.id != node_id:
            continue
        if was is None:
            state.put(parsed.entry, parsed.text)
            engine.hand_after[node_id] = ("changed", rel, None)
        else:  # the file's fields (its scope) with the stat held before: a sync compares
            state.put(replace(parsed.entry, mtime_ns=was.mtime_ns, size=was.size), parsed.text)
            del engine.hand_after[node_id]
        back.append(node_id)
    return back


def _lost_at(engine: Engine, node_id: str, rel: str) -> DuplicateIdError | NodeNotFoundError | None:
    """:func:`lost_file` of ``node_id`` when the index holds it at ``rel`` -- to a caller
    whose scope does not admit it, :func:`_taken_outside`."""
    entry = engine.state.entries.get(node_id)
    lost = lost_file(engine, entry) if entry is not None and entry.path == rel else None
    return _taken_outside(engine, entry) or lost if lost is not None else None


def _taken_outside(engine: Engine, entry: Entry | None) -> DuplicateIdError | None:
    """The refusal of a new file for ``entry``'s id to a scoped caller its scope does not
    admit -- a memory of another scope whose file a person removed or moved, which that
    scope has not been told (attack atk8 of session 39: alice's ``add`` of bob's removed
    ``b1`` was told its file "was moved, deleted or changed outside md-cg" and to run a
    sync, which her scoped syncs never settle). The id stays taken, as while the file was
    there, until a sync of a scope that admits it (or an unscoped one) tells the change;
    nothing of the memory's file or fate is said."""
    if engine.scope is None or entry is None or engine.scope.admits(entry):
        return None
    return DuplicateIdError(entry.id, "", f"node {taken_outside_scope(entry.id)}")


def lost_file(engine: Engine, entry: Entry) -> NodeNotFoundError | None:
    """The :func:`~md_cg.errors.lost_file_error` of ``entry`` (one the caller sees) when nothing is at its
    path any more -- moved or deleted by hand since the index last looked --, else None."""
    if fsops.exists(engine.root_str, entry.path):
        return None
    return lost_file_error(entry.id, entry.path)


def is_read_only_error(exc: OSError) -> bool:
    """True for the errors a read-only folder or medium gives on a write."""
    return exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)


def warn_once(engine: Any, key: str, message: str) -> None:
    """Emit ``message`` as a warning once per store handle."""
    seen = engine.__dict__.setdefault("_warned", set())
    if key not in seen:
        seen.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


#: Loads of a snapshot whose token differs before it is refused: an open that
#: read the snapshot just before a compaction replaced it (and its token) loads
#: the new one.
TOKEN_TRIES = 3


def _load_snapshot(root: str) -> tuple[snapshot.Snapshot | None, str | None, tuple[int, int, int] | None]:
    """The snapshot, why it was not used (:func:`md_cg.snapshot.load_checked`) and the
    identity of the file refused when this store did not write it last
    (:data:`md_cg.snapshot.NOT_THIS_STORES`). A snapshot of this store that may be of
    another place (:data:`md_cg.snapshot.UNPLACED`: a copy of ``.mdcg/``) is returned with
    that reason, for :func:`_placed` to look into."""
    refused = None
    for attempt in range(TOKEN_TRIES):
        seen = snapshot.vouchers(root)  # read before the snapshot, and again after it
        snap, problem = snapshot.load_checked(root)
        if snap is None:
            return snap, problem, None
        why = snapshot.refusal(snap.token, snap.identity, snapshot.vouchers(root), seen)
        if why != snapshot.NOT_THIS_STORES:
            return snap, why, None
        refused = snap.identity
        snapshot.close(snap.state)
        if attempt < TOKEN_TRIES - 1:
            time.sleep(0.02 * (attempt + 1))
    return None, snapshot.NOT_THIS_STORES, refused


def _from_snapshot(engine: Engine, snap: snapshot.Snapshot) -> tuple[IndexState, Cursor]:
    """:meth:`Engine.load`'s start from ``snap``: its state and a cursor at its offsets."""
    engine.snap_ident = snap.identity
    engine.snap_gen = snap.generation
    engine.loaded_from = "snapshot"
    _carried_notes(engine, snap)
    # the copies the last sync line naming each id logged, as the compaction held them:
    # those this process followed may be older than the snapshot's (a fate told twice)
    engine.copies_held.clear()
    engine.copies_pending = copyfate.pending(snap.copies)  # decoded at first use (copies_logged)
    return snap.state, Cursor(offsets=dict(snap.offsets))


def _placed(engine: Engine, snap: snapshot.Snapshot) -> bool:
    """An open's look at a snapshot of this store the token file does not stamp for this
    place (:data:`md_cg.snapshot.UNPLACED`: a copy of ``.mdcg/`` -- a ``git clone`` of a
    committed one, a ``cp -r``, a restored backup --, a token file of an earlier version,
    or none). Loaded (the snapshot, then the log after it: :meth:`Engine.load`) when every
    file is then as the index holds it (path, mtime and size: :func:`md_cg.index.stale_by_stat`;
    a copy that kept the mtimes, ``cp -a`` or a backup restored whole), as in the place
    that wrote it: a writable handle's close then compacts (:func:`unplaced`), stamping
    this place's. Else refused (False: the caller builds the index from the files -- a
    clone or a ``cp -r`` writes every file anew; a ``.mdcg/`` restored beside newer
    files), and what the follow of the log noted is dropped. The files are compared with
    the index after the log is followed, not with the snapshot's rows alone: until session
    39 (attack atk7) a ``cp -a`` copy of a store written to since its last compaction was
    built from the files (15 s at 100k instead of 0.75). A stat walk (0.75 s at 100k files
    on tmpfs). No problem is recorded either way: a copy is no damage."""
    engine.snapshot_problem = None
    notes, copies = dict(engine.hand_after), (dict(engine.copies_held), engine.copies_pending)
    engine.state, engine.cursor = _from_snapshot(engine, snap)
    engine.changes = 0
    engine.catch_up()
    engine._last_refresh = time.monotonic()
    if not index.stale_by_stat(engine.state, index.scan_files(engine.root_str)):
        engine.snap_unplaced = snap.identity
        return True
    engine.hand_after.clear()
    engine.hand_after.update(notes)
    engine.copies_held.clear()
    engine.copies_held.update(copies[0])
    engine.copies_pending = copies[1]
    engine.snap_ident = engine.snap_gen = None
    engine.snap_refused = snap.identity
    snapshot.close(snap.state)
    return False


def unplaced(engine: Engine) -> bool:
    """Whether the snapshot in use is one :func:`_placed` took without a stamp for this
    place: the next compaction stamps it (``maintenance.compaction_due``)."""
    return engine.snap_ident is not None and engine.snap_ident == engine.snap_unplaced
