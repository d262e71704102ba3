"""The :class:`MdCG` store: one folder of Markdown node files and its index.

The ``.md`` files are canonical. Everything under ``.mdcg/`` is derived or
operational: the index (log shards + snapshot) can be deleted at any time and
is rebuilt from the files.

Concurrency model
-----------------
* Every mutation holds the maintenance lock **shared** (many writers at once)
  and appends an intent record (``put``/``del`` of an id at a path) to this
  process's own log shard *before* it touches a node file.
* Read-modify-write calls (update, delete, move) also hold the id's stripe
  lock (one of :data:`STRIPES` lock files), and re-read the log first, so two
  processes changing one node serialise and see each other's result.
* ``compact_index``/``rebuild_index`` hold the maintenance lock
  **exclusively**: no mutation is half-done while they write the snapshot,
  and they remove only shards no live process holds.
* Reads (open, get, search, health) take no lock and write nothing.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

from . import access, fsops, graph, index, layout, loop, nodefile
from . import search as search_mod
from .errors import (
    DuplicateIdError,
    InvalidNodeError,
    LockTimeoutError,
    MalformedNodeFileError,
    MdcgError,
    NodeNotFoundError,
    NotAStoreError,
    ProtectedNodeError,
    ReadOnlyStoreError,
    StoreClosedError,
)
from .index import Entry, IndexState, Parsed
from .node import LAYERS, Node, check_id, check_layer, validate
from .reports import Finding, HealthReport, MaintenanceReport, Moved, SyncReport
from .routing import bucket_health
from .search import SearchResult
from .synonyms import STORE_FILE as SYNONYM_FILE
from .synonyms import SynonymTable

STRIPES = 64
AUDIT_DIR = "audit"
#: Below this many knowledge nodes the bucket-health verdict is reported but
#: not raised as a finding: with a handful of nodes every scheme looks degraded.
BUCKET_HEALTH_MIN_NODES = 100

GITIGNORE = """\
# md-cg: the .md files are canonical. Everything under .mdcg/ is derived
# (index snapshot, index logs) or local operational state (locks, access and
# reflection logs, trash) and is rebuilt or recreated as needed.
.mdcg/*
# ...except per-store configuration, which belongs in the repository.
!.mdcg/synonyms.json
# Temp files of interrupted writes (health reports them, sync removes them).
.*.tmp
"""

_NODE_FIELDS = {f.name for f in fields(Node)}


class Put(NamedTuple):
    """A node ready to be written: its relative path, bytes and route key."""

    node: Node
    rel: str
    data: bytes
    domain: str | None


@dataclass(frozen=True)
class Deleted:
    """Result of :meth:`MdCG.delete`: the removed node and the edges left dangling."""

    node: Node
    incoming: tuple[tuple[str, str], ...]


class NodeHasIncomingEdgesError(MdcgError):
    """``delete`` refused: other nodes have edges to this one."""

    def __init__(self, node_id: str, incoming: Sequence[tuple[str, str]]) -> None:
        listed = ", ".join(f"{src} ({etype})" for src, etype in incoming)
        super().__init__(
            f"node {node_id!r} has incoming edges from {listed}; "
            "delete with force=True to leave them dangling, or remove the edges first"
        )
        self.node_id = node_id
        self.incoming = tuple(incoming)


def new_id(prefix: str = "n") -> str:
    """A fresh random node id such as ``n_3f9a2c1b7d0e``."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class MdCG:
    """A memory store rooted at a folder of Markdown files.

    ``MdCG(root)`` opens (and, with ``create=True``, creates) a store. Opening
    never writes: a store can be opened from a read-only copy. Use it as a
    context manager, or call :meth:`close`.

    Parameters
    ----------
    root:
        The store folder.
    create:
        Create the folder (with its layer folders and ``.gitignore``) if it
        does not exist. An existing folder is never initialised by opening it;
        the first write does that.
    durable:
        Default for writes: fsync each file and its folder (slow, survives a
        power cut). Every writing call takes ``durable=`` to override it.
    refresh_interval:
        Seconds between automatic looks at other processes' log records on
        read calls (``0``: on every call; ``None``: only on :meth:`refresh`).
    lock_timeout:
        Seconds to wait for a lock before raising
        :class:`~md_cg.errors.LockTimeoutError`.
    read_only:
        Refuse every write (:class:`~md_cg.errors.ReadOnlyStoreError`);
        searches record no access. For stores on read-only media or copies.
    auto_compact:
        On close, compact the index (write a snapshot) if there is none yet
        (also after a session that only read: a fresh clone then opens fast
        the next time), or if this process wrote and at least this many log
        records followed the snapshot -- without waiting: if another process
        holds a lock, it is skipped. ``None`` turns this off.
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
    ) -> None:
        self.root = Path(root).absolute()
        self.read_only = read_only
        if not self.root.exists():
            if not create or read_only:
                raise NotAStoreError(self.root, "no such folder (pass create=True to make one)")
            self.init_folder()
        elif not self.root.is_dir():
            raise NotAStoreError(self.root, "not a folder")
        self.durable = durable
        self.refresh_interval = refresh_interval
        self.lock_timeout = lock_timeout
        self.auto_compact = auto_compact
        self._wrote = False
        self._tail_records = 0
        self._meta = self.root / index.META_DIR
        self._lock = threading.RLock()
        self._maint = fsops.FileLock(self._meta / "lock", what="maintenance")
        self._stripes: dict[int, fsops.FileLock] = {}
        self._shard = fsops.ShardWriter(self._meta / index.LOG_DIR)
        self._access = fsops.ShardWriter(self._meta / access.ACCESS_DIR)
        self._audit = fsops.ShardWriter(self._meta / AUDIT_DIR)
        self._synonyms: SynonymTable | None = None
        self._known_dirs: set[str] = set()
        self._root_str = str(self.root)
        self._closed = False
        self._initialised = (self._meta / "lock").exists()
        self._load()

    # -- lifecycle ------------------------------------------------------------

    def init_folder(self) -> None:
        """Create the layer folders, ``.mdcg/`` and ``.gitignore`` (idempotent)."""
        self.root.mkdir(parents=True, exist_ok=True)
        for layer in LAYERS:
            (self.root / layer).mkdir(exist_ok=True)
        (self.root / index.META_DIR).mkdir(exist_ok=True)
        gi = self.root / ".gitignore"
        if not gi.exists():
            fsops.atomic_write(gi, GITIGNORE.encode("utf-8"))
        (self.root / index.META_DIR / "lock").touch(exist_ok=True)

    def _ensure_init(self) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"store {self.root} was opened read-only")
        if not self._initialised:
            self.init_folder()
            self._initialised = True

    def close(self) -> None:
        """Compact if due (see ``auto_compact``), release this process's files and locks.

        The store can no longer be used afterwards.
        """
        with self._lock:
            if self._closed:
                return
            # Release our shard first, so the compaction can fold and remove it.
            self._shard.close()
            if self._compaction_due():
                try:
                    self._compact(timeout=0.0)
                except LockTimeoutError:
                    pass  # another process is busy; a later close or compact will do it
            self._access.close()
            self._audit.close()
            self._maint.close()
            for lock in self._stripes.values():
                lock.close()
            self._closed = True

    def __enter__(self) -> MdCG:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.root} is closed")

    # -- loading and refreshing --------------------------------------------------

    def _load(self) -> None:
        snap = index.load_snapshot(self.root)
        if snap is not None:
            state, offsets, ident = snap.state, snap.offsets, snap.identity
            self.loaded_from = "snapshot"
        else:
            # Read the log before scanning the files: commits whose "done" is
            # already there are reflected in the scan; the unfinished ones stay
            # pending and are resolved against the disk after it.
            before = index.read_tail(self.root, {})
            state = index.build_from_files(self.root)
            index.prime_pending(state, before)
            offsets = before.offsets
            ident = None
            self.loaded_from = "files"
        self._state: IndexState = state
        self._offsets: dict[str, int] = offsets
        self._tail_records = 0
        self._snap_ident = ident
        self._log_damage = 0
        self._read_tail()
        self._last_refresh = time.monotonic()

    def _compaction_due(self) -> bool:
        if self.auto_compact is None or self.read_only:
            return False
        if index.snapshot_identity(self.root) is None:
            # No snapshot yet (a new store, or a fresh git clone: .mdcg/ is not
            # committed): save the next process the rebuild from the files --
            # also when this one only read, as long as the folder is writable.
            return self._wrote or (len(self._state.entries) > 0 and os.access(self.root, os.W_OK))
        return self._wrote and self._tail_records >= self.auto_compact

    def _read_tail(self) -> list[str]:
        tail = index.read_tail(self.root, self._offsets)
        self._offsets = tail.offsets
        self._log_damage += tail.bad_lines
        self._tail_records += sum(len(r) for r in tail.by_shard.values())
        if not tail.by_shard and not tail.missing_shards and not self._state.pending:
            return []
        return index.replay(self.root, self._state, tail)

    def refresh(self) -> list[str]:
        """Pick up other processes' changes from the log; return the ids that changed.

        If another process wrote a new snapshot meanwhile, the index is reloaded.
        """
        with self._lock:
            self._check_open()
            ident = index.snapshot_identity(self.root)
            if ident is not None and ident != self._snap_ident:
                before = {k: v for k, v in self._state.entries.items()}
                self._load()
                after = self._state.entries
                return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            changed = self._read_tail()
            self._last_refresh = time.monotonic()
            return changed

    def _maybe_refresh(self) -> None:
        if self.refresh_interval is None:
            return
        if time.monotonic() - self._last_refresh >= self.refresh_interval:
            self.refresh()

    # -- locks ------------------------------------------------------------------

    def _stripe(self, node_id: str) -> fsops.FileLock:
        n = zlib.crc32(node_id.encode("utf-8")) % STRIPES
        lock = self._stripes.get(n)
        if lock is None:
            lock = self._stripes[n] = fsops.FileLock(
                self._meta / "locks" / f"{n:02d}.lock", what=f"node stripe {n:02d}"
            )
        return lock

    # -- reading ------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._state.entries)

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, str) and node_id in self._state.entries

    def ids(self, layer: str | None = None) -> list[str]:
        """Sorted ids of all nodes, or of one layer."""
        if layer is not None:
            check_layer(layer)
        return sorted(e.id for e in index.iter_entries(self._state, layer))

    def entry(self, node_id: str) -> Entry:
        """The index entry of a node (path, layer, bucket, judge inputs...)."""
        self._maybe_refresh()
        e = self._state.entries.get(node_id)
        if e is None:
            raise NodeNotFoundError(node_id)
        return e

    def entries(self, layer: str | None = None) -> list[Entry]:
        """Index entries of all nodes (or one layer), sorted by id."""
        if layer is not None:
            check_layer(layer)
        return sorted(index.iter_entries(self._state, layer), key=lambda e: e.id)

    def path_of(self, node_id: str) -> Path:
        """Absolute path of a node's file."""
        return self.root / self.entry(node_id).path

    def get(self, node_id: str) -> Node:
        """Read a node from its file. Raises NodeNotFoundError for an unknown id."""
        self._check_open()
        check_id(node_id)
        self._maybe_refresh()
        for attempt in (0, 1):
            e = self._state.entries.get(node_id)
            if e is not None:
                try:
                    node = nodefile.read_node(self.root / e.path)
                except FileNotFoundError:
                    node = None
                if node is not None and node.id == node_id:
                    return node
            if attempt == 0:
                self.refresh()
        raise NodeNotFoundError(node_id)

    def iter_nodes(self, layer: str | None = None) -> Iterator[Node]:
        """Every node (or every node of a layer), read from its file, in id order."""
        for node_id in self.ids(layer):
            try:
                yield self.get(node_id)
            except NodeNotFoundError:
                continue

    # -- writing ------------------------------------------------------------------

    def _prepare(self, node: Node, *, check: bool = True) -> Put:
        """Validate (unless already done) and serialise a node; compute its path once."""
        if check:
            validate(node)
        domain = layout.route_key(node) if node.layer == layout.BUCKETED_LAYER else None
        bucket = layout.bucket_dir(domain) if node.layer == layout.BUCKETED_LAYER else None
        rel = f"{layout.rel_dir(node.layer, bucket)}/{node.id}.md"
        return Put(node, rel, nodefile.dumps(node).encode("utf-8"), domain)

    def _append_log(self, records: list[dict[str, Any]], *, durable: bool = False) -> None:
        """Append to our own shard and move our own read offset past it."""
        own = self._shard.name
        before = self._offsets.get(own, 0) if own else 0
        written = self._shard.append(records, durable=durable)
        self._wrote = True
        self._tail_records += len(records)
        if own != self._shard.name:
            before = 0  # a new shard (first write, or after fork)
        self._offsets[self._shard.name] = before + written  # type: ignore[index]

    def _commit(
        self,
        puts: Sequence[Put],
        dels: Sequence[tuple[str, str]] = (),
        *,
        durable: bool | None = None,
    ) -> None:
        """Log intents, then write/unlink files, then update the in-memory index."""
        durable = self.durable if durable is None else durable
        self._ensure_init()
        records = [{"op": "put", "id": p.node.id, "path": p.rel} for p in puts]
        records += [{"op": "del", "id": i, "path": rel} for i, rel in dels]
        if not records:
            return
        with self._maint.hold(shared=True, timeout=self.lock_timeout):
            self._append_log(records, durable=durable)
            try:
                self._apply(puts, dels, durable)
            except BaseException:
                # The commit stopped halfway: our offset is past our own
                # intents, so settle their ids from the disk now, or this
                # process (and a snapshot it writes) would keep a stale view.
                touched: dict[str, list[str]] = {}
                for rec in records:
                    touched.setdefault(rec["id"], []).append(rec["path"])
                index.resolve_ids(self.root, self._state, touched)
                raise
            self._append_log([{"op": "done"}])

    def _apply(self, puts: Sequence[Put], dels: Sequence[tuple[str, str]], durable: bool) -> None:
        """Write the temp files, rename them into place, unlink, update the index."""
        temps: list[tuple[str, str, Any]] = []
        root = self._root_str
        # Durable: the group commit writes every temp file first and fsyncs them
        # in a second pass (the kernel can write them back together), so all
        # are on disk before the first rename.
        try:
            for put in puts:
                target = f"{root}/{put.rel}"
                parent = target[: target.rindex("/")]
                if parent not in self._known_dirs:
                    os.makedirs(parent, exist_ok=True)
                    self._known_dirs.add(parent)
                tmp, st = fsops.write_temp(target, put.data, durable=False)
                temps.append((tmp, target, st))
            if durable:
                for tmp, _, _ in temps:
                    fsops.fsync_file(tmp)
        except BaseException:
            for tmp, _, _ in temps:
                fsops.remove_if_exists(tmp)
            raise
        dirs: set[str] = set()
        done = 0
        try:
            for put, (tmp, target, st) in zip(puts, temps, strict=True):
                os.replace(tmp, target)
                done += 1
                dirs.add(target[: target.rindex("/")])
                self._state.put(
                    index.make_entry(put.node, put.rel, st.st_mtime_ns, st.st_size, put.domain),
                    index.index_text(put.node),
                )
        except BaseException:
            for tmp, _, _ in temps[done:]:
                fsops.remove_if_exists(tmp)
            raise
        for node_id, rel in dels:
            path = f"{root}/{rel}"
            fsops.remove_if_exists(path)
            dirs.add(path[: path.rindex("/")])
            cur = self._state.entries.get(node_id)
            if cur is not None and cur.path == rel:
                self._state.drop(node_id)
        if durable:
            for d in dirs:
                fsops.fsync_dir(d)

    def _coerce(self, node: Node | None, fields_: dict[str, Any]) -> Node:
        if node is not None:
            if fields_:
                raise TypeError("pass either a Node or keyword fields, not both")
            if not isinstance(node, Node):
                raise TypeError(f"expected a Node, got {type(node).__name__}")
            return node
        unknown = set(fields_) - _NODE_FIELDS
        if unknown:
            raise InvalidNodeError(
                f"unknown node field(s): {', '.join(sorted(unknown))} (put custom keys in extra={{...}})",
                field=sorted(unknown)[0],
            )
        fields_.setdefault("id", new_id())
        return Node(**fields_)

    def add(
        self,
        node: Node | None = None,
        /,
        *,
        overwrite: bool = False,
        durable: bool | None = None,
        stamp: bool = True,
        **fields_: Any,
    ) -> Node:
        """Store a new node and return it.

        Pass a :class:`Node`, or its fields as keywords (``id`` is generated
        when omitted). ``stamp`` sets ``created_at`` to now when it is absent.
        An existing id raises :class:`~md_cg.errors.DuplicateIdError` unless
        ``overwrite=True``, which replaces the node (moving its file if its
        layer or bucket changed). Invalid input raises before anything is
        written.
        """
        node = self._coerce(node, fields_)
        return self.add_many([node], overwrite=overwrite, durable=durable, stamp=stamp)[0]

    def add_many(
        self,
        nodes: Iterable[Node],
        *,
        overwrite: bool = False,
        durable: bool | None = None,
        stamp: bool = True,
        progress: Callable[[int], Any] | None = None,
    ) -> list[Node]:
        """Store many nodes as one group commit (one log append, one fsync pass).

        Every node is validated before anything is written; a bad node raises
        and nothing of the batch is stored. With ``overwrite=True`` a node
        whose file already holds exactly the same bytes is left untouched
        (mtime included), so re-running an import is idempotent.
        """
        with self._lock:
            self._check_open()
            batch = list(nodes)
            now = time.time()
            seen: set[str] = set()
            prepared: list[Put] = []
            for node in batch:
                if not isinstance(node, Node):
                    raise TypeError(f"add_many expects Node objects, got {type(node).__name__}")
                if stamp and node.created_at is None:
                    node.created_at = now
                validate(node)
                if node.id in seen:
                    raise DuplicateIdError(node.id, "this batch")
                seen.add(node.id)
            self._maybe_refresh()
            puts: list[Put] = []
            dels: list[tuple[str, str]] = []
            for node in batch:
                put = self._prepare(node, check=False)
                rel = put.rel
                existing = self._state.entries.get(node.id)
                if existing is None and os.path.lexists(f"{self._root_str}/{rel}"):
                    existing_path: str | None = rel
                else:
                    existing_path = existing.path if existing is not None else None
                if existing_path is not None:
                    if not overwrite:
                        raise DuplicateIdError(node.id, existing_path)
                    if existing_path == rel and _same_bytes(self.root / rel, put.data):
                        prepared.append(put)
                        continue
                    if existing_path != rel:
                        # A move: stamp the new copy so it wins over a leftover.
                        node.updated_at = max(now, (node.updated_at or 0.0) + 1e-6)
                        put = self._prepare(node, check=False)
                        dels.append((node.id, existing_path))
                puts.append(put)
                prepared.append(put)
            self._commit(puts, dels, durable=durable)
            if progress is not None:
                progress(len(batch))
            return [p.node for p in prepared]

    def update(self, node_id: str, /, *, durable: bool | None = None, **changes: Any) -> Node:
        """Change fields of a stored node; return the node as stored.

        Any :class:`Node` field may be given (``body``, ``tags``, ``layer``,
        ``extra`` ...). Changing ``layer``, tags or the condition space may
        move the file to another folder; the move is crash-safe (the new file
        is written before the old one is removed, and a leftover duplicate is
        resolved by ``updated_at``). ``updated_at`` is set to now.
        """
        unknown = set(changes) - _NODE_FIELDS
        if unknown or "id" in changes:
            bad = sorted(unknown | ({"id"} & set(changes)))
            raise InvalidNodeError(
                f"cannot update field(s) {', '.join(bad)} of node {node_id!r}"
                + (" (the id of a node cannot change)" if "id" in changes else ""),
                field=bad[0],
                node_id=node_id,
            )
        return self.modify(node_id, lambda node: _apply(node, changes), durable=durable)

    @contextlib.contextmanager
    def _locked(self, node_id: str) -> Iterator[Entry]:
        """Hold a node for a read-modify-write; yield its current entry.

        Lock order everywhere: the id's stripe, then the maintenance lock
        (shared). Holding the shared lock across the read keeps compaction from
        rewriting the node between our read and our write; the log is re-read
        first so another process's last change to the node is seen.
        """
        check_id(node_id)
        self._check_open()
        self._ensure_init()
        with (
            self._lock,
            self._stripe(node_id).hold(timeout=self.lock_timeout),
            self._maint.hold(shared=True, timeout=self.lock_timeout),
        ):
            self.refresh()
            current = self._state.entries.get(node_id)
            if current is None:
                raise NodeNotFoundError(node_id)
            yield current

    def modify(
        self,
        node_id: str,
        change: Callable[[Node], Node | None],
        *,
        durable: bool | None = None,
    ) -> Node:
        """Read-modify-write one node under its stripe lock.

        ``change`` receives the current node (freshly read from its file) and
        mutates it or returns a replacement. The result is validated before
        anything is written; ``updated_at`` is set to now.
        """
        with self._locked(node_id) as current:
            node = nodefile.read_node(self.root / current.path)
            result = change(node)
            if result is not None:
                node = result
            if node.id != node_id:
                raise InvalidNodeError(
                    f"the id of node {node_id!r} cannot change (got {node.id!r})",
                    field="id",
                    node_id=node_id,
                )
            node.updated_at = max(time.time(), (node.updated_at or 0.0) + 1e-6)
            put = self._prepare(node)
            dels = [(node_id, current.path)] if current.path != put.rel else []
            self._commit([put], dels, durable=durable)
            return node

    def move(self, node_id: str, layer: str, *, durable: bool | None = None) -> Node:
        """Move a node to another layer (crash-safe; see :meth:`update`)."""
        check_layer(layer)
        return self.update(node_id, layer=layer, durable=durable)

    def delete(self, node_id: str, *, force: bool = False, durable: bool | None = None) -> Deleted:
        """Remove a node's file and return it.

        If other nodes have edges to it, raise
        :class:`NodeHasIncomingEdgesError` listing them, unless ``force=True``
        (then the edges are left dangling and returned in the result).
        """
        with self._locked(node_id) as current:
            incoming = tuple(
                sorted((src, etype) for src, etype in self._state.reverse.get(node_id, ()) if src != node_id)
            )
            if incoming and not force:
                raise NodeHasIncomingEdgesError(node_id, incoming)
            node = nodefile.read_node(self.root / current.path)
            self._commit([], [(node_id, current.path)], durable=durable)
            return Deleted(node, incoming)

    # -- search ------------------------------------------------------------------

    @property
    def synonyms(self) -> SynonymTable:
        """The synonym table: the shipped default plus ``.mdcg/synonyms.json`` if present."""
        if self._synonyms is None:
            self._synonyms = SynonymTable.from_files(self._meta / SYNONYM_FILE)
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
    ) -> tuple[list[SearchResult], dict[str, Any]]:
        """Find nodes for ``query`` with the T0–T3 ladder; return ``(results, meta)``.

        ``layer`` limits the search to one layer (default: every layer but the
        negative ones, ``rejected`` and ``unresolved``). ``context`` (tags with
        ``domain:``, a ``condition_space``, a domain string, and/or
        ``{"big_domain": "auto" | "<domain>"}``) routes the search to condition
        buckets first; ``None`` means no routing. Each result has ``node``
        (read on first access), ``score``, ``tier``, ``state`` and ``basis``;
        ``judge=False`` leaves the last two ``None``. ``meta`` holds the plan
        as executed: deepest tier, buckets, nodes scanned, big domain with its
        score table, ``covered_neg`` (negative memories the query hits) and
        timings. ``record=True`` appends the result ids to the access log (and
        nothing else); a read-only store records nothing.
        """
        with self._lock:
            self._check_open()
            self._maybe_refresh()
            results, meta = search_mod.run(
                self._state,
                self.synonyms,
                query,
                layer=layer,
                k=k,
                context=context,
                judge=judge,
                loader=self.get,
            )
        if record and results and not self.read_only:
            self.record_access([r.id for r in results])
        return results, meta

    def record_access(self, node_ids: Iterable[str]) -> None:
        """Append one access per id to this process's access-log shard (nothing else)."""
        ids = [check_id(i) for i in node_ids]
        if not ids:
            return
        with self._lock:
            self._check_open()
            self._ensure_init()
            self._access.append({"id": i} for i in ids)

    def access_counts(self, node_ids: Iterable[str] | None = None) -> dict[str, int]:
        """Accesses per node: the folded ``access_count`` plus the log since the last fold.

        With ``node_ids``, exactly those ids (0 for none); otherwise every node
        with at least one access.
        """
        self._check_open()
        self._maybe_refresh()
        tail = access.read_counts(self._meta / access.ACCESS_DIR)
        entries = self._state.entries
        if node_ids is not None:
            wanted = list(node_ids)
            return {
                i: (entries[i].access_count if i in entries else 0) + tail.counts.get(i, 0) for i in wanted
            }
        out = {i: e.access_count for i, e in entries.items() if e.access_count}
        for i, c in tail.counts.items():
            if i in entries:
                out[i] = out.get(i, 0) + c
        return dict(sorted(out.items()))

    def compact_access(self) -> dict[str, int]:
        """Fold the access log into ``access_count``/``last_access`` of the nodes, in one batch.

        Runs under the exclusive maintenance lock. Returns the accesses folded
        per node. Crash-safe: see :mod:`md_cg.access`.
        """
        directory = self._meta / access.ACCESS_DIR
        with self._lock:
            self._check_open()
            self._ensure_init()
            with self._maint.hold(shared=False, timeout=self.lock_timeout):
                self._read_tail()
                pending = access.read_journal(directory)
                if pending is not None:
                    self._apply_access_targets(pending["targets"])
                    access.write_checkpoint(directory, pending["offsets"])
                    access.clear_journal(directory)
                tail = access.read_counts(directory)
                targets: dict[str, list[Any]] = {}
                for node_id, count in sorted(tail.counts.items()):
                    e = self._state.entries.get(node_id)
                    if e is None:
                        continue  # accesses of nodes deleted since are dropped
                    last = max(e.last_access or 0.0, tail.last.get(node_id, 0.0))
                    targets[node_id] = [e.access_count + count, last]
                access.write_journal(directory, tail.offsets, targets)
                self._apply_access_targets(targets)
                access.write_checkpoint(directory, tail.offsets)
                access.clear_journal(directory)
                removed = access.remove_folded_shards(directory, tail.offsets)
                if removed:
                    offsets = {k: v for k, v in tail.offsets.items() if k not in removed}
                    access.write_checkpoint(directory, offsets)
                return {i: tail.counts[i] for i in targets}

    def _apply_access_targets(self, targets: dict[str, list[Any]]) -> None:
        """Set absolute access figures (caller holds the exclusive lock: no stripe locks)."""
        puts = []
        for node_id, (count, last) in targets.items():
            e = self._state.entries.get(node_id)
            if e is None:
                continue
            node = nodefile.read_node(self.root / e.path)
            if node.access_count == count and node.last_access == last:
                continue
            node.access_count = int(count)
            node.last_access = float(last)
            puts.append(self._prepare(node))
        self._commit(puts)

    # -- graph and forgetting ------------------------------------------------------

    def neighbours(
        self,
        node_id: str,
        direction: str = "out",
        types: Iterable[str] | None = None,
        depth: int = 1,
    ) -> list[graph.Neighbour]:
        """Nodes linked to ``node_id`` within ``depth`` edges (see :mod:`md_cg.graph`).

        ``direction``: ``"out"`` (edges of the node), ``"in"`` (edges pointing
        at it) or ``"both"``; ``types`` limits the edge types. Cycles are safe;
        dangling targets are reported with ``exists=False``.
        """
        self._check_open()
        self._maybe_refresh()
        with self._lock:
            return graph.neighbours(
                self._state, node_id, direction, None if types is None else list(types), depth
            )

    def forget(
        self, node_id: str, reason: str, *, force: bool = False, durable: bool | None = None
    ) -> Deleted:
        """Remove a node and leave a payload-free tombstone in the audit log.

        The tombstone holds the id, the time, the reason and the layer -- no
        content. ``anchor/`` nodes are protected: they refuse unless
        ``force=True``. Edges pointing at the node are left dangling and
        returned (``Deleted.incoming``); health() lists them.
        """
        check_id(node_id)
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidNodeError(
                f"forget({node_id!r}) needs a reason (a non-empty string)",
                field="reason",
                value=reason,
                node_id=node_id,
            )
        self._check_open()
        self._ensure_init()
        with self._lock:
            self.refresh()
            entry = self._state.entries.get(node_id)
            if entry is None:
                raise NodeNotFoundError(node_id)
            if entry.layer == "anchor" and not force:
                raise ProtectedNodeError(
                    node_id,
                    f"node {node_id!r} is in anchor/ and is protected from forgetting; "
                    "pass force=True to forget it anyway",
                )
            deleted = self.delete(node_id, force=True, durable=durable)
            self._audit.append(
                [
                    {
                        "event": "forget",
                        "id": node_id,
                        "layer": entry.layer,
                        "reason": reason.strip(),
                        "time": time.time(),
                        "dangling": [list(e) for e in deleted.incoming],
                    }
                ],
                durable=True,
            )
            return deleted

    def tombstones(self) -> list[dict[str, Any]]:
        """Every forget tombstone, oldest first (id, layer, reason, time; no content)."""
        directory = self._meta / AUDIT_DIR
        out: list[dict[str, Any]] = []
        for name in fsops.list_shards(directory):
            out.extend(fsops.read_shard(directory / name).records)
        out.sort(key=lambda r: (r.get("ts", 0), r.get("seq", 0)))
        return out

    # -- the cognitive loop (see md_cg.loop) --------------------------------------

    def add_rejected(self, hypothesis: str, reason: str, verification: str = "") -> Node:
        """Record a falsified hypothesis in ``rejected/`` (importance 0; idempotent by content)."""
        return loop.add_rejected(self, hypothesis, reason, verification)

    def add_unresolved(self, question: str, clues: Iterable[str] | str | None = None, goal: str = "") -> Node:
        """Record an open question in ``unresolved/`` (idempotent by question)."""
        return loop.add_unresolved(self, question, clues, goal)

    def verify(self, node_id: str, evidence: str, verdict: str) -> Node:
        """Apply external evidence: ``confirmed`` (+0.05), ``weakened`` (-0.10) or
        ``falsified`` (moved to ``rejected/``); the verdict joins the node's history."""
        return loop.verify(self, node_id, evidence, verdict)

    def reflect(
        self,
        query: str,
        results: Sequence[Any],
        feedback: Any = None,
        *,
        now: float | None = None,
    ) -> loop.Reflection:
        """Record the information gap D = 1 - ACCEPT rate of a search, with dD/dt and d²D/dt²."""
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

    # -- maintenance --------------------------------------------------------------

    def _remove_dead_shards(self, covered: dict[str, int]) -> tuple[list[str], list[str]]:
        """Delete shards fully covered by the snapshot whose writer is gone."""
        log_dir = self._meta / index.LOG_DIR
        removed: list[str] = []
        kept: list[str] = []
        for name in fsops.list_shards(log_dir):
            path = log_dir / name
            fh = fsops.try_lock_exclusive(path)
            if fh is None:
                kept.append(name)  # a live process holds it
                continue
            try:
                size = os.fstat(fh.fileno()).st_size
                if covered.get(name, -1) == size:
                    os.unlink(path)
                    removed.append(name)
                else:
                    kept.append(name)
            finally:
                fh.close()
        for name in removed:
            self._offsets.pop(name, None)
        return removed, kept

    def _write_snapshot(self, started: float, shards_before: int) -> MaintenanceReport:
        covered = dict(self._offsets)
        index.write_snapshot(self.root, self._state, covered)
        self._snap_ident = index.snapshot_identity(self.root)
        self._tail_records = 0
        removed, kept = self._remove_dead_shards(covered)
        size = index.snapshot_path(self.root).stat().st_size
        return MaintenanceReport(
            nodes=len(self._state.entries),
            shards_before=shards_before,
            shards_removed=tuple(removed),
            shards_kept=tuple(kept),
            snapshot_bytes=size,
            seconds=time.perf_counter() - started,
            problems=tuple(sorted(self._state.problems.items())),
        )

    def compact_index(self) -> MaintenanceReport:
        """Fold the log into a new snapshot and remove the shards it covers.

        Runs under the exclusive maintenance lock (waits for in-flight writes).
        Shards that a live process still holds are kept.
        """
        with self._lock:
            self._check_open()
            return self._compact(timeout=self.lock_timeout)

    def _compact(self, *, timeout: float) -> MaintenanceReport:
        self._ensure_init()
        started = time.perf_counter()
        with self._lock, self._maint.hold(shared=False, timeout=timeout):
            shards_before = len(fsops.list_shards(self._meta / index.LOG_DIR))
            ident = index.snapshot_identity(self.root)
            if ident is not None and ident != self._snap_ident:
                self._load()
            else:
                self._read_tail()
            # No writer is active under the exclusive lock: every intent
            # read so far has finished (or its writer died); settle them.
            index.settle_pending(self.root, self._state)
            return self._write_snapshot(started, shards_before)

    def rebuild_index(self, progress: Callable[[int], Any] | None = None) -> MaintenanceReport:
        """Rebuild the index from the ``.md`` files alone and write a new snapshot."""
        with self._lock:
            self._check_open()
            self._ensure_init()
            started = time.perf_counter()
            with self._maint.hold(shared=False, timeout=self.lock_timeout):
                shards_before = len(fsops.list_shards(self._meta / index.LOG_DIR))
                self._offsets = index.shard_ends(self.root)
                self._state = index.build_from_files(self.root, progress=progress)
                return self._write_snapshot(started, shards_before)

    def sync(self) -> SyncReport:
        """Reconcile the index with files added, changed, deleted or moved outside the engine.

        Stat-based: only new or changed files are parsed. Other processes see
        the result too (it is logged). Leftover temp files of dead writers are
        removed; when one id has several files, the losing copies are moved to
        ``.mdcg/trash/``. Malformed files are reported by path, never fatal.
        """
        with self._lock:
            self._check_open()
            self._ensure_init()
            with self._maint.hold(shared=True, timeout=self.lock_timeout):
                self.refresh()
                return self._sync_locked()

    def _sync_locked(self) -> SyncReport:
        state = self._state
        files = index.scan_files(self.root)
        by_path = state.by_path()
        touched: dict[str, list[str]] = {}
        malformed: dict[str, str] = {}
        for node_id, e in state.entries.items():
            if e.path not in files:
                touched.setdefault(node_id, []).append(e.path)
        for rel, st in files.items():
            known = by_path.get(rel)
            if known is not None:
                e = state.entries[known]
                if (e.mtime_ns, e.size) != (st.st_mtime_ns, st.st_size):
                    touched.setdefault(known, []).append(rel)
                continue
            try:
                parsed: Parsed = index.parse_file(self.root, rel)
            except MalformedNodeFileError as exc:
                malformed[rel] = exc.reason
                continue
            except FileNotFoundError:
                continue
            touched.setdefault(parsed.entry.id, []).append(rel)
        for rel in list(state.problems):
            if rel not in files:
                del state.problems[rel]
        before = {i: state.entries.get(i) for i in touched}
        index.resolve_ids(self.root, state, touched)
        state.problems.update(malformed)
        added, changed, deleted, moved = [], [], [], []
        records: list[dict[str, Any]] = []
        for node_id, old in before.items():
            new = state.entries.get(node_id)
            if old is None and new is not None:
                added.append(node_id)
            elif old is not None and new is None:
                deleted.append(node_id)
                records.append({"op": "del", "id": node_id, "path": old.path})
                continue
            elif old is not None and new is not None and old.path != new.path:
                moved.append(Moved(node_id, old.path, new.path))
                records.append({"op": "del", "id": node_id, "path": old.path})
            elif old != new:
                changed.append(node_id)
            else:
                continue
            assert new is not None
            records.append({"op": "put", "id": node_id, "path": new.path})
        dup_removed = self._trash_duplicates()
        temp_removed = self._remove_abandoned_temps()
        if records:
            self._append_log([*records, {"op": "done"}])
        return SyncReport(
            added=tuple(sorted(added)),
            changed=tuple(sorted(changed)),
            deleted=tuple(sorted(deleted)),
            moved=tuple(sorted(moved, key=lambda m: m.node_id)),
            malformed=tuple(sorted(state.problems.items())),
            duplicates_removed=tuple(dup_removed),
            temp_removed=tuple(temp_removed),
        )

    def _trash_duplicates(self) -> list[str]:
        moved: list[str] = []
        if not self._state.duplicates:
            return moved
        trash = self._meta / "trash" / time.strftime("%Y%m%dT%H%M%S")
        for node_id, losers in sorted(self._state.duplicates.items()):
            for rel in losers:
                src = self.root / rel
                if not src.exists():
                    continue
                dest = trash / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dest)
                moved.append(rel)
            del self._state.duplicates[node_id]
        return sorted(moved)

    def _remove_abandoned_temps(self) -> list[str]:
        removed = []
        now = time.time()
        for rel in index.scan_temp_files(self.root):
            path = self.root / rel
            if fsops.temp_is_abandoned(path, path.name, now) and fsops.remove_if_exists(path):
                removed.append(rel)
        return removed

    def health(self) -> HealthReport:
        """Check the store; return typed findings (read-only: writes nothing).

        Looks for: files that do not parse, index/file drift (missing,
        untracked or changed files), duplicate ids, leftover temp files,
        misplaced files, dangling edges, unreadable log lines, and degraded
        condition buckets (DESIGN §3; judged only from
        :data:`BUCKET_HEALTH_MIN_NODES` knowledge nodes up).
        """
        with self._lock:
            self._check_open()
            self._maybe_refresh()
            state = self._state
            files = index.scan_files(self.root)
            findings: list[Finding] = []
            by_path = state.by_path()
            dup_paths = {p for losers in state.duplicates.values() for p in losers}
            for rel, reason in sorted(state.problems.items()):
                if rel in files:
                    findings.append(Finding("unreadable_file", reason, path=rel))
            for rel, st in sorted(files.items()):
                if rel in state.problems or rel in dup_paths:
                    continue
                node_id = by_path.get(rel)
                if node_id is None:
                    try:
                        parsed = index.parse_file(self.root, rel)
                    except MalformedNodeFileError as exc:
                        findings.append(Finding("unreadable_file", exc.reason, path=rel))
                        continue
                    except FileNotFoundError:
                        continue
                    findings.append(
                        Finding(
                            "untracked_file",
                            "a node file the index does not know; run sync()",
                            path=rel,
                            node_id=parsed.entry.id,
                        )
                    )
                    continue
                e = state.entries[node_id]
                if (e.mtime_ns, e.size) != (st.st_mtime_ns, st.st_size):
                    findings.append(Finding("changed_file", "edited since indexed; run sync()", rel, node_id))
            for e in sorted(state.entries.values(), key=lambda x: x.id):
                if e.path not in files:
                    findings.append(
                        Finding("missing_file", "indexed but the file is gone; run sync()", e.path, e.id)
                    )
                elif e.path != index.canonical_path(e):
                    findings.append(
                        Finding(
                            "misplaced_file",
                            f"its frontmatter puts it at {index.canonical_path(e)}",
                            e.path,
                            e.id,
                        )
                    )
                for target, etype in e.edges:
                    if target not in state.entries:
                        findings.append(
                            Finding(
                                "dangling_edge",
                                f"{etype} edge to {target!r}, which is not in the store",
                                e.path,
                                e.id,
                            )
                        )
            for node_id, losers in sorted(state.duplicates.items()):
                for rel in losers:
                    findings.append(
                        Finding(
                            "duplicate_id",
                            f"another file holds this id ({state.entries[node_id].path} "
                            "stands); sync() moves this copy to .mdcg/trash/"
                            if node_id in state.entries
                            else "duplicate copy; sync() resolves it",
                            rel,
                            node_id,
                        )
                    )
            for rel in index.scan_temp_files(self.root):
                findings.append(
                    Finding("temp_file", "leftover of an interrupted write; sync() removes it", rel)
                )
            if self._log_damage:
                findings.append(
                    Finding(
                        "log_damage",
                        f"{self._log_damage} unreadable line(s) in the index logs; "
                        "rebuild_index() recovers from the files",
                    )
                )
            sizes = self.bucket_sizes()
            buckets = bucket_health(sizes)
            if buckets.degraded and buckets.nodes >= BUCKET_HEALTH_MIN_NODES:
                findings.append(Finding("bucket_degraded", "; ".join(buckets.reasons)))
            layers = {layer: 0 for layer in LAYERS}
            for e in state.entries.values():
                layers[e.layer] += 1
            return HealthReport(
                layers=layers, nodes=len(state.entries), buckets=buckets, findings=tuple(findings)
            )

    def bucket_sizes(self) -> dict[str, int]:
        """Knowledge bucket folder -> number of nodes (``orphan`` included)."""
        return dict(sorted(self._state.buckets.items()))


def _apply(node: Node, changes: dict[str, Any]) -> Node:
    for key, value in changes.items():
        setattr(node, key, value)
    return node


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        if path.stat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except FileNotFoundError:
        return False
