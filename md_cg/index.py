"""The index: what the engine knows about every node without opening its file.

Everything here is **derived** from the ``.md`` files and can be thrown away:

* :class:`Entry` -- per node: path, layer, bucket, tags, judge inputs, edges.
* :class:`IndexState` -- all entries, bucket membership, reverse edges, the
  id keys (case- and normalisation-folded, see :func:`md_cg.paths.id_key`)
  and the :class:`~md_cg.textindex.TextIndex` search uses.
* Reading files: :func:`scan_files` walks the layer folders without
  following symlinks and sorts what it finds into node files and problems;
  :func:`parse_file` reads one file within the size limit;
  :func:`resolve_ids` settles ids named by the journal against the disk.

The snapshot codec is :mod:`md_cg.snapshot`; the log protocol is
:mod:`md_cg.journal`.

Module layering: imports the bottom modules (node, nodefile, fastread, ccg,
layout, paths, fsops, text, textindex, judge) and nothing above.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
from collections import Counter
from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    MutableMapping,
    Sequence,
    ValuesView,
)
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from . import ccg, fastread, fsops, layout, nodefile, paths
from .errors import PERMISSION_DENIED as DENIED
from .errors import MalformedNodeFileError, UnsafePathError
from .judge import node_conditions
from .merge import CONFLICT_KEY, has_conflict_markers
from .node import LAYERS, NEGATIVE_LAYERS, TITLE_MAX, Node
from .node import MAX_FILE_BYTES as NODE_MAX_FILE_BYTES
from .nodefile import read_bytes_as_text
from .script import cut_back, tag_fold
from .text import analyze, analyze_batch, date_words, query_terms
from .textindex import TextIndex

if TYPE_CHECKING:
    import numpy as np

#: The text index stores term frequencies as uint16.
TF_MAX = 0xFFFF
#: Largest node file read (the format's limit); a larger one is reported as
#: malformed without being read.
MAX_FILE_BYTES = NODE_MAX_FILE_BYTES
#: Why a node file this process may not read (permission bits) is unusable: a
#: :class:`~md_cg.errors.MalformedNodeFileError` reason, and :attr:`IndexState.unread`'s
#: (defined in :mod:`md_cg.errors`, which :func:`md_cg.access.readable_hits` may import)
PERMISSION_DENIED = DENIED

#: From this many pending texts, :meth:`IndexState.flush_text` tokenises and
#: indexes them in batches (:func:`md_cg.text.analyze_batch`,
#: :meth:`md_cg.textindex.TextIndex.add_many`): the same index, ~2.5x less CPU.
TEXT_BATCH_MIN = 64
#: A batch holds at most this many texts ...
TEXT_BATCH_DOCS = 1000
#: ... and this many characters (a character gives at most two terms, so a
#: batch stays within the 2^21 terms one sort key of ``add_many`` can number).
TEXT_BATCH_CHARS = 1_000_000
#: When the texts waiting in ``IndexState.pending_text`` pass this many
#: characters, :meth:`IndexState.put` indexes them at once: a process that
#: writes and never searches (a migration, a server that only remembers) keeps
#: at most this much text instead of every body it wrote (10 x 3.5 MB bodies per
#: ``add_many``: 311 MB of RSS after 8 batches). The text is tokenised either
#: way, at the first search or snapshot; a store of ~230-character notes
#: reaches this after ~140k of them, so everyday writes never flush here.
PENDING_TEXT_CHARS = 32_000_000

_LAYER_CODE = {name: i for i, name in enumerate(LAYERS)}
_NEGATIVE_CODES = frozenset(_LAYER_CODE[name] for name in NEGATIVE_LAYERS)


@dataclass(slots=True)
class Entry:
    """What the index keeps about one node (all derived from its file).

    Field order is the snapshot's row order (:data:`md_cg.snapshot.COLUMNS`);
    ``domain`` stays last: it is not stored but derived from the bucket.

    The sequence fields are tuples: an entry the API returns is shared with the
    index, so a caller cannot change the index through it, and tuples of strings
    are not tracked by the garbage collector (lists were four tracked objects per
    node, whose full collections made writes at 1M nodes cost more per node).
    """

    id: str
    path: str
    layer: str
    bucket: str | None
    mtime_ns: int
    size: int
    tags: tuple[str, ...]
    importance: float | None
    confidence: float | None
    created_at: float | None
    updated_at: float | None
    verification_basis: str | None
    ccg_missing: tuple[str, ...]
    conditions: tuple[str, ...]
    title: str
    edges: tuple[tuple[str, str], ...]  # (target, type) pairs
    #: the condition space as compact JSON (parsed on demand: few callers need it,
    #: and one string is far cheaper to load than a dict of lists)
    space_json: str | None = None
    access_count: int = 0
    last_access: float | None = None
    #: lifecycle fields the visibility rule needs (:mod:`md_cg.visibility`), so
    #: no read opens a file to decide whether a node is shown
    sensitivity: str | None = None
    agent_scope: str | None = None
    workspace_scope: str | None = None
    retention_tier: str | None = None
    expires_at: float | None = None
    valid_until: float | None = None
    #: the ids the memory had before its renames (frontmatter ``renamed_from``), so that an
    #: id renamed away -- in another clone too -- is found without reading files
    #: (:attr:`IndexState.earlier`, :func:`md_cg.store.departure_of`)
    renamed_from: tuple[str, ...] = ()
    #: the file lies under ``archive/`` (stored: a snapshot row omits canonical paths)
    archived: bool = False
    #: the file holds a git merge conflict (docs/git.md, "True conflicts")
    conflict: bool = False
    domain: str | None = None

    @property
    def restricted(self) -> bool:
        """True when some caller or some moment may not see this node (see :mod:`md_cg.visibility`)."""
        return (
            self.archived
            or self.expires_at is not None
            or self.valid_until is not None
            or self.agent_scope is not None
            or self.workspace_scope is not None
            or (self.sensitivity is not None and self.sensitivity != "normal")
        )

    @property
    def changed(self) -> float:
        """The time a listing sorts by: the last update, else the creation, else 0."""
        if self.updated_at is not None:
            return self.updated_at
        return self.created_at if self.created_at is not None else 0.0

    @property
    def condition_space(self) -> dict[str, Any] | None:
        """The node's ``condition_space`` (a fresh dict on every access)."""
        return None if self.space_json is None else orjson.loads(self.space_json)


def text_terms(text: str) -> dict[str, int]:
    """The term frequencies the text index holds for ``text`` (capped as it caps them)."""
    return {t: min(c, TF_MAX) for t, c in Counter(analyze(text)).items()}


#: Git's conflict marker lines: never a memory's title (a body a merge left in conflict).
_MARKER_LINES = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")


def title_of(body: str) -> str:
    """First non-empty body line that is not a git conflict marker, without Markdown
    heading marks, shortened."""
    start, end = 0, len(body)
    while start < end:
        nl = body.find("\n", start)
        stop = end if nl < 0 else nl
        text = body[start:stop].strip().lstrip("#").strip()
        if text and not (text[0] in "<|=>" and text.startswith(_MARKER_LINES)):
            return text if len(text) <= TITLE_MAX else text[: cut_back(text, TITLE_MAX - 1)] + "…"
        start = stop + 1
    return ""


def index_text(node: Node) -> str:
    """The text the search index sees: body, tags (``domain:x`` as ``x``) and the
    date of ``created_at`` in words (``8 may 2023``; see :func:`md_cg.text.date_words`)."""
    tags = " ".join(t.split(":", 1)[1] if t.startswith("domain:") else t for t in node.tags)
    text = f"{node.body}\n{tags}" if tags else node.body
    when = date_words(node.created_at)
    return f"{text}\n{when}" if when else text


_UNSET: Any = object()
#: The field order :func:`make_entry` builds an :class:`Entry` in (positionally: keyword
#: construction of 28 fields costs a microsecond more per node); checked at import.
_ENTRY_ORDER = (
    "id",
    "path",
    "layer",
    "bucket",
    "mtime_ns",
    "size",
    "tags",
    "importance",
    "confidence",
    "created_at",
    "updated_at",
    "verification_basis",
    "ccg_missing",
    "conditions",
    "title",
    "edges",
    "space_json",
    "access_count",
    "last_access",
    "sensitivity",
    "agent_scope",
    "workspace_scope",
    "retention_tier",
    "expires_at",
    "valid_until",
    "renamed_from",
    "archived",
    "conflict",
    "domain",
)
if tuple(f.name for f in fields(Entry)) != _ENTRY_ORDER:  # pragma: no cover - a guard for editors
    raise ImportError("index.Entry's fields changed: update index._ENTRY_ORDER and make_entry")
_BUCKETED = layout.BUCKETED_LAYER
_bucket_dir = layout.bucket_dir
_elements, _missing = ccg.elements, ccg.missing


def make_entry(
    node: Node,
    rel: str,
    mtime_ns: int,
    size: int,
    domain: str | None = _UNSET,
) -> Entry:
    """The index entry for a parsed node found at ``rel``.

    ``domain`` (the node's route key) may be passed when already computed
    (the write path knows it).
    """
    body = node.body
    elems = _elements(body, node.state_attributes)
    layer = node.layer
    if layer == _BUCKETED:
        if domain is _UNSET:
            domain = layout.route_key(node)
        bucket = _bucket_dir(domain)
    else:
        if domain is _UNSET:
            domain = None
        bucket = None
    space = node.condition_space
    return Entry(
        node.id,
        rel,
        layer,
        bucket,
        mtime_ns,
        size,
        tuple(node.tags),
        node.importance,
        node.confidence,
        node.created_at,
        node.updated_at,
        node.verification_basis,
        tuple(_missing(elems)),
        tuple(node_conditions(node, elems)),
        title_of(body),
        tuple([(e.target, e.type) for e in node.edges]),
        orjson.dumps(space).decode() if space else None,
        node.access_count or 0,
        node.last_access,
        node.sensitivity,
        node.agent_scope,
        node.workspace_scope,
        node.retention_tier,
        node.expires_at,
        node.valid_until,
        _earlier_ids(node.extra.get(RENAMED_FROM)) if node.extra else (),
        paths.is_archived_rel(rel),
        # merge.conflict_of(node) is not None, without building the conflict
        CONFLICT_KEY in node.extra or has_conflict_markers(body),
        domain,
    )


#: The frontmatter key of a memory's earlier ids (:data:`md_cg.audit.RENAMED_FROM`).
RENAMED_FROM = "renamed_from"


#: The most earlier ids an entry keeps (:data:`md_cg.audit.MAX_RENAMED_FROM`, what a rename
#: writes): a hand-written list of 12,000 made every open rebuild a map of them (r5).
MAX_RENAMED_FROM = 64


def _earlier_ids(value: object) -> tuple[str, ...]:
    """The earlier ids a ``renamed_from`` value lists (a value that is not a list of
    strings -- a hand edit -- lists none): the first and the newest, at most
    :data:`MAX_RENAMED_FROM`, as a rename keeps them."""
    if type(value) is not list or not all(type(v) is str for v in value):
        return ()
    if len(value) > MAX_RENAMED_FROM:
        return (value[0], *value[1 - MAX_RENAMED_FROM :])
    return tuple(value)


def canonical_path(entry: Entry) -> str:
    """Where the node of ``entry`` belongs according to its own frontmatter
    (under ``archive/`` when it is archived)."""
    rel = paths.node_rel(entry.layer, entry.bucket, entry.id)
    return paths.archived_rel(rel) if entry.archived else rel


# -- reading files ------------------------------------------------------------


@dataclass
class Parsed:
    """A node file read from disk, with what the index needs from it.

    ``node`` is None when an unchanged file's existing entry was reused.
    """

    node: Node | None
    entry: Entry
    #: the text to index; None when the file was unchanged (keep what is indexed)
    text: str | None


def decode_node(data: bytes, rel: str) -> Node:
    """Parse the bytes of the node file at ``rel`` (a checked node path).

    A note written by hand needs no frontmatter: its id is the file stem and
    its layer the layer folder it sits in, unless its frontmatter says otherwise.
    Files in the engine's own layout take the fast reader (:mod:`md_cg.fastread`),
    which gives the full reader's result.
    """
    return fastread.loads(
        read_bytes_as_text(data, rel), rel, default_id=paths.stem_of(rel), default_layer=paths.layer_of(rel)
    )


def read_node(root: str, rel: str) -> Node:
    """Read and parse the node file ``root/rel`` (no symlinks, within the size limit)."""
    return decode_node(read_limited(root, rel)[0], rel)


class DirCache:
    """The folder last read from, kept open while a scan reads the files of one folder.

    A scan reads files in path order, so consecutive files share a folder:
    opening it once (rather than walking from the root for every file) saves
    three to four system calls per file. The folder is still reached without
    following symlinks, and every file in it is opened with ``O_NOFOLLOW``.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self._rel: str | None = None
        self._dir: fsops.Dir | None = None

    def read(self, rel: str) -> tuple[bytes, os.stat_result]:
        parent, _, name = rel.rpartition("/")
        if self._dir is None or parent != self._rel:
            self.close()
            self._dir = fsops.Dir(self.root, parent)
            self._rel = parent
        return self._dir.read(name, max_bytes=MAX_FILE_BYTES)

    def close(self) -> None:
        if self._dir is not None:
            self._dir.close()
            self._dir, self._rel = None, None

    def __enter__(self) -> DirCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_limited(root: str, rel: str, dirs: DirCache | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes and stat of the node file ``root/rel`` (no symlink followed); a file over
    :data:`MAX_FILE_BYTES` or one this process may not read is a MalformedNodeFileError
    naming it and why (``fsops.read_file`` with ``max_bytes`` gives such a file's bytes as
    empty: a caller that did not check the size showed a 5 MB memory as empty text)."""
    try:
        if dirs is None:
            data, st = fsops.read_file(root, rel, max_bytes=MAX_FILE_BYTES)
        else:
            data, st = dirs.read(rel)
    except PermissionError:
        # one file the process may not read is reported, not fatal to the whole store
        raise MalformedNodeFileError(rel, PERMISSION_DENIED) from None
    if st.st_size > MAX_FILE_BYTES:
        raise MalformedNodeFileError(
            rel, f"the file is {st.st_size:,} bytes, more than the {MAX_FILE_BYTES:,}-byte limit"
        )
    return data, st


def parse_file(root: str, rel: str, dirs: DirCache | None = None) -> Parsed:
    """Read and parse ``root/rel`` (no symlinks, within :data:`MAX_FILE_BYTES`).

    ``dirs`` keeps the file's folder open for the next file of a scan.
    Raises MalformedNodeFileError, UnsafePathError or OSError (FileNotFoundError
    when the file is gone).
    """
    data, st = read_limited(root, rel, dirs)
    node = decode_node(data, rel)
    entry = make_entry(node, rel, st.st_mtime_ns, st.st_size)
    return Parsed(node, entry, index_text(node))


@dataclass
class Scan:
    """Node files under the layer folders, and what was found there but refused."""

    files: dict[str, os.stat_result] = field(default_factory=dict)
    #: refused entries: relative path -> why (symlinks, special files, bad names, too deep)
    refused: dict[str, str] = field(default_factory=dict)
    #: temp files (``.<name>.<pid>.<token>.tmp``) left by writers
    temps: list[str] = field(default_factory=list)
    #: folders that could not be read (permission denied): what the index holds below
    #: them is kept as it is, neither confirmed nor dropped
    unreadable: tuple[str, ...] = ()
    #: refused folders whose files the scan did not list (too deep, permission denied):
    #: they may hold memory files
    unscanned: tuple[str, ...] = ()

    def hidden_by(self, rel: str) -> bool:
        """Whether ``rel`` lies in a folder the scan could not read."""
        return any(rel.startswith(f"{d}/") for d in self.unreadable)


def scan_files(root: str) -> Scan:
    """Every node file under the layer folders, reached without following symlinks.

    Hidden names (starting with ``.``) are skipped, temp files among them are
    listed; symlinks, special files, ``.md`` names outside the path rules and
    folders deeper than :data:`md_cg.paths.MAX_DEPTH` are refused with a reason.
    A file or folder that vanishes while the scan runs is simply absent.
    """
    found = fsops.ScanResult()
    for layer in LAYERS:
        fsops.scan(root, layer, max_depth=paths.MAX_DEPTH - 1, result=found)
    if _symlinked_archive(root):
        found.symlinks.append(paths.ARCHIVE_DIR)  # once, not once per layer folder below it
    else:
        for layer in LAYERS:
            fsops.scan(root, f"{paths.ARCHIVE_DIR}/{layer}", max_depth=paths.MAX_DEPTH - 1, result=found)
    out = Scan()
    rel_problem = paths.rel_checker()
    for rel, st in found.files.items():
        if not rel.endswith(paths.NODE_SUFFIX):
            continue
        problem = rel_problem(rel)
        if problem is None:
            out.files[rel] = st
        else:
            out.refused[rel] = f"not a usable node path: {problem}"
    for rel in found.symlinks:
        out.refused[rel] = "a symlink (md-cg never follows symlinks below the store root)"
    for rel in found.other:
        out.refused[rel] = "not a regular file or folder"
    for rel in found.too_deep:
        out.refused[rel] = f"a folder deeper than {paths.MAX_DEPTH} levels (not scanned)"
    for rel in found.unreadable:
        out.refused[rel] = "a folder md-cg may not read (permission denied); its memories are not scanned"
    out.unreadable = tuple(sorted(found.unreadable))
    out.unscanned = tuple(sorted({*found.too_deep, *found.unreadable}))
    out.temps = sorted(rel for rel in found.hidden if fsops.is_temp_name(rel.rsplit("/", 1)[-1]))
    return out


def stale_by_stat(state: IndexState, scan: Scan) -> set[str]:
    """Paths whose files differ from ``state`` by a stat (new, changed, gone) in ``scan``.

    The stats come from a snapshot's columns without building an entry (building all of
    them was 5.5 s of a first pick-up's 9.3 at 100k, under a profiler). A file gone from
    a folder the scan may not read is not stale; a file recorded malformed is not new."""
    files, hidden = scan.files, scan.hidden_by
    out: set[str] = set()
    for _id, rel, mtime_ns, size in state.entries.placed():
        st = files.get(rel)
        if st is None:
            if not hidden(rel):
                out.add(rel)
        elif (mtime_ns, size) != (st.st_mtime_ns, st.st_size):
            out.add(rel)
    by_path, problems = state.by_path(), state.problems
    out.update(rel for rel in files if rel not in by_path and rel not in problems)
    return out


def _symlinked_archive(root: str) -> bool:
    """Whether the store's ``archive/`` is a symlink (or other unsafe entry): never followed."""
    try:
        with fsops.Dir(root, paths.ARCHIVE_DIR):
            return False
    except UnsafePathError:
        return True
    except OSError:  # absent, not a folder, not readable: the layer scans say what they find
        return False


class CopyFields(NamedTuple):
    """The scope fields of a losing copy of a duplicated id (:attr:`IndexState.copy_fields`),
    named as :class:`Entry` names them: a scoped handle's ``prefer`` ranks either."""

    agent_scope: str | None
    workspace_scope: str | None
    sensitivity: str | None


#: how a handle ranks the copies of a duplicated id, lowest first (:attr:`IndexState.prefer`)
Prefer = Callable[[Entry | CopyFields], int]


def fields_of(entry: Entry) -> CopyFields:
    """The scope fields of ``entry``."""
    return CopyFields(entry.agent_scope, entry.workspace_scope, entry.sensitivity)


def note_copies(state: IndexState, node_id: str, copies: list[Parsed], best: Parsed) -> None:
    """Record the losing copies of ``node_id`` (all of ``copies`` but ``best``) and their
    scope fields (:attr:`IndexState.copy_fields`)."""
    losers = sorted((p for p in copies if p is not best), key=lambda p: p.entry.path)
    if not losers:
        state.duplicates.pop(node_id, None)
        return
    state.duplicates[node_id] = [p.entry.path for p in losers]
    state.copy_fields.update((p.entry.path, fields_of(p.entry)) for p in losers)


def winner(candidates: list[Parsed], prefer: Prefer | None = None) -> Parsed:
    """The copy that stands when one id has several files (deterministic).

    Latest ``updated_at`` first (every write stamps it), then a copy at its
    canonical location, then the smallest path. ``prefer`` (a scoped handle's
    :attr:`IndexState.prefer`) ranks the copies before all that, lowest first: the copy
    its scope admits stands for it, so that another scope's file of the id never hides
    the handle's own memory (session 39).
    """

    def key(p: Parsed) -> tuple[int, float, int, str]:
        e = p.entry
        updated = e.updated_at if e.updated_at is not None else float("-inf")
        return (0 if prefer is None else prefer(e), -updated, 0 if e.path == canonical_path(e) else 1, e.path)

    return min(candidates, key=key)


# -- the in-memory state ----------------------------------------------------


class Entries(MutableMapping[str, Entry]):
    """The entries by id: a dict, or rows of a snapshot materialised on first access.

    Opening from a snapshot builds no :class:`Entry`: ``make(row)`` builds one
    when an id is first looked up (and keeps it). Until then only ``ids`` (in
    row order) and an id -> row map exist. Anything that walks every entry
    (``values``, ``items``, iteration) first materialises the rest, in row
    order, and the mapping is a plain dict from then on. ``put``/``drop`` of
    the state go through ``__setitem__``/``__delitem__``, which retire a row.
    """

    __slots__ = ("_dropped", "_extra", "_ids", "_live", "_make", "_rows", "source")

    def __init__(
        self,
        ids: list[str] | None = None,
        make: Callable[[int], Entry] | None = None,
        source: Any = None,
        rows: dict[str, int] | None = None,
    ) -> None:
        #: what ``make`` reads rows from (the snapshot module's table), for :meth:`walk`'s callers
        self.source = source
        #: materialised or put entries (a cache of ``_rows`` ids, plus ids not in it)
        self._live: dict[str, Entry] = {}
        #: id -> row, for ids whose entry is still the snapshot's row (``rows``: the map
        #: of ``ids`` the snapshot built; it becomes this mapping's own)
        self._rows: dict[str, int] = {} if rows is None else rows
        self._ids = ids
        self._make = make
        #: number of ``_live`` ids that are not in ``_rows``
        self._extra = 0
        #: rows retired since the open (their id was put again, or deleted)
        self._dropped: list[int] = []

    @property
    def lazy(self) -> bool:
        """True while some snapshot rows are not materialised yet."""
        return self._unmade() > 0

    def _unmade(self) -> int:
        # _live holds every materialised row plus the _extra ids not in _rows
        return len(self._rows) - (len(self._live) - self._extra)

    def raw_row(self, node_id: str) -> int | None:
        """The snapshot row still standing for ``node_id`` (None: put since, or unknown)."""
        return self._rows.get(node_id)

    def __getitem__(self, node_id: str) -> Entry:
        e = self._live.get(node_id)
        if e is not None:
            return e
        row = self._rows.get(node_id)
        if row is None:
            return self._live[node_id]  # (again: settled by another thread meanwhile)
        return self._materialise(node_id, row)

    def get(self, node_id: str, default: Any = None) -> Any:
        e = self._live.get(node_id)
        if e is not None:
            return e
        row = self._rows.get(node_id) if self._rows else None
        if row is None:
            return self._live.get(node_id, default)  # (again: settled by another thread meanwhile)
        return self._materialise(node_id, row)

    def _materialise(self, node_id: str, row: int) -> Entry:
        make = self._make
        if make is None:
            return self._live[node_id]  # settled by another thread meanwhile
        # setdefault: two readers materialising one row at once keep one object
        return self._live.setdefault(node_id, make(row))

    def __contains__(self, node_id: object) -> bool:
        # _rows first: settle() replaces _live before it empties _rows (readers need no lock)
        return node_id in self._rows or node_id in self._live

    def __len__(self) -> int:
        return len(self._rows) + self._extra

    def __setitem__(self, node_id: str, entry: Entry) -> None:
        row = self._rows.pop(node_id, None)
        if row is not None:
            self._dropped.append(row)
        if row is not None or node_id not in self._live:
            self._extra += 1
        self._live[node_id] = entry

    def __delitem__(self, node_id: str) -> None:
        row = self._rows.pop(node_id, None)
        if row is not None:
            self._dropped.append(row)
            self._live.pop(node_id, None)
        else:
            del self._live[node_id]
            self._extra -= 1

    def settle(self) -> dict[str, Entry]:
        """Materialise every entry (row order first); the plain dict they are now in."""
        if self._rows:
            assert self._ids is not None
            out: dict[str, Entry] = {}
            live, rows, make = self._live, self._rows, self._make
            assert make is not None
            with no_gc():  # many entries at once: see no_gc
                for node_id in self._ids:
                    e = live.get(node_id)
                    if e is not None:
                        out[node_id] = e
                    else:
                        row = rows.get(node_id)
                        if row is not None:
                            out[node_id] = make(row)
            for node_id, e in live.items():
                out.setdefault(node_id, e)
            # In this order: a reader without the lock that misses in the new _rows finds
            # the entry in the new _live (see get / __getitem__ / __contains__).
            self._extra = len(out) - len(rows)
            self._live = out
            self._rows = {}
            self._extra = len(out)
            self._ids, self._make, self.source = None, None, None
            self._dropped = []
        return self._live

    def walk(self, order: Sequence[str] | None = None) -> Iterator[tuple[str, Entry | None, int | None]]:
        """``(id, entry, None)`` per entry, or ``(id, None, row)`` for a row not materialised.

        In :meth:`settle`'s order, materialising nothing (a snapshot of a
        state opened from one copies the rows nobody used). ``order``: every
        id of the mapping, once each, in the order to walk them (ignored
        when it is not exactly that).
        """
        if order is not None and len(order) == len(self) and len(set(order)) == len(order):
            live, rows = self._live, self._rows
            if all(i in live or i in rows for i in order):
                for node_id in order:
                    e = live.get(node_id)
                    yield (node_id, e, None) if e is not None else (node_id, None, rows[node_id])
                return
        if not self._rows:
            for node_id, e in self._live.items():
                yield node_id, e, None
            return
        assert self._ids is not None
        live, rows = self._live, self._rows
        done: set[str] = set()
        for node_id in self._ids:
            cached = live.get(node_id)
            if cached is not None:
                done.add(node_id)
                yield node_id, cached, None
            else:
                row = rows.get(node_id)
                if row is not None:
                    yield node_id, None, row
        for node_id, e in live.items():
            if node_id not in done:
                yield node_id, e, None

    def placed(self) -> Iterator[tuple[str, str, int, int]]:
        """``(id, path, mtime_ns, size)`` of every entry, in :meth:`walk`'s order, building none.

        A row not materialised answers from the snapshot's columns (its
        ``source``: ``all_paths``/``stat_of_all``, every row in one pass), so
        reconciling with the files after an open from a snapshot decodes no row.
        """
        if not self._rows:
            for node_id, live in self._live.items():
                yield node_id, live.path, live.mtime_ns, live.size
            return
        source = self.source
        # every row's path and stat at once (~0.2 us a row; a sync at 1M asks for all)
        rels = source.all_paths()
        mtimes, sizes = source.stat_of_all()
        if self._untouched():
            yield from zip(source.ids, rels, mtimes, sizes, strict=True)
            return
        for node_id, e, row in self.walk():
            if e is not None:
                yield node_id, e.path, e.mtime_ns, e.size
            else:
                yield node_id, rels[row], mtimes[row], sizes[row]

    def brief(self) -> Iterator[tuple[str, str, str, str | None, bool]]:
        """``(id, path, layer, bucket, conflict)`` of every entry, in :meth:`walk`'s order,
        building none: a row not materialised answers from the snapshot's columns (``health``
        looks at every entry; building them all was most of its first call, session 43)."""
        if not self._rows:
            for node_id, live in self._live.items():
                yield node_id, live.path, live.layer, live.bucket, live.conflict
            return
        table = self.source.brief_rows()
        if self._untouched():
            yield from table
            return
        for node_id, e, row in self.walk():
            if e is not None:
                yield node_id, e.path, e.layer, e.bucket, e.conflict
            else:
                assert row is not None
                yield table[row]

    def _untouched(self) -> bool:
        """True while every row of the snapshot stands, none built, none put or dropped
        since: :meth:`walk` is then the rows in order, and a column is the answer."""
        return not self._live and self._ids is not None and len(self._rows) == len(self._ids)

    def titled(self) -> tuple[list[str], list[str], list[str]]:
        """The ids, layers and titles of every entry (three lists, in no set order), building
        none when the snapshot's rows can say (:meth:`~md_cg.snapshot._Table.titles_of_all`):
        organize looks for a candidate's title among every entry (building them all was half
        of its first dry run at 45k memories, session 43); otherwise every entry is built, as
        before. Lists, not a tuple per entry: 45k new tuples woke the garbage collector."""
        titles = self.source.titles_of_all() if self._rows else None
        if titles is None:
            values = list(self.values())
            return [e.id for e in values], [e.layer for e in values], [e.title for e in values]
        source = self.source
        ids, layers = source.ids, source.layer_names()
        live, rows = self._live, self._rows
        if len(rows) == len(ids) and not self._extra:
            # every row stands and nothing was put since: an entry built from a row holds the
            # row's title (a damaged chunk's is built from its file, but then there are no titles)
            return ids, layers, titles
        keep = [node_id not in live and rows.get(node_id) == row for row, node_id in enumerate(ids)]
        pick = itertools.compress
        ids, layers, titles = list(pick(ids, keep)), list(pick(layers, keep)), list(pick(titles, keep))
        for node_id, e in live.items():
            ids.append(node_id)
            layers.append(e.layer)
            titles.append(e.title)
        return ids, layers, titles

    def edge_targets(self) -> Iterator[tuple[str, str]]:
        """``(id, target)`` of every edge of every entry, building none: a row not
        materialised answers from the snapshot's edge column, a built entry from its edges."""
        live, rows = self._live, self._rows
        if rows:
            ids = self.source.ids
            for n, target, _etype in self.source.edges:
                node_id = ids[n]
                if rows.get(node_id) == n and node_id not in live:
                    yield node_id, target
        for node_id, e in live.items():
            for target, _etype in e.edges:
                yield node_id, target

    def listed(self) -> Iterator[tuple[str, str, float]]:
        """``(id, layer, changed)`` of every entry (:attr:`Entry.changed`), building none.

        A row not materialised answers from the snapshot's columns, so a
        listing sorts and filters a store opened from a snapshot without
        decoding its rows.
        """
        if not self._rows:
            for node_id, live in self._live.items():
                yield node_id, live.layer, live.changed
            return
        source = self.source
        changed = source.changed_of_all()
        layer_of = source.layer_of
        for node_id, e, row in self.walk():
            if e is not None:
                yield node_id, e.layer, e.changed
            else:
                yield node_id, layer_of(row), changed[row]

    def listed_of(self, node_ids: Iterable[str]) -> Iterator[tuple[str, str, float]]:
        """:meth:`listed` for ``node_ids`` only (each must be an entry), building none."""
        source = self.source
        for node_id in node_ids:
            at = self._built_or_row(node_id)
            if isinstance(at, Entry):
                yield node_id, at.layer, at.changed
            else:
                yield node_id, source.layer_of(at), float(source.changed[at])

    def columns(self) -> Columns | None:
        """The entries as the snapshot's row columns plus what changed since (see
        :class:`Columns`), while some rows are not materialised; else None (a plain
        dict: a listing then walks the entries)."""
        ids, rows = self._ids, self._rows
        if not rows or ids is None:
            return None
        extra = [e for node_id, e in self._live.items() if node_id not in rows]
        source = self.source
        return Columns(ids, source.layer_codes(), source.changed, list(self._dropped), extra, rows.get)

    def _built_or_row(self, node_id: str) -> Entry | int:
        """The built entry of ``node_id``, else its snapshot row (KeyError when unknown)."""
        e = self._live.get(node_id)
        if e is not None:
            return e
        row = self._rows.get(node_id)
        if row is None:
            raise KeyError(node_id)
        return row

    def changed_of(self, node_id: str) -> float:
        """:attr:`Entry.changed` of ``node_id`` (KeyError when unknown), building no entry."""
        at = self._built_or_row(node_id)
        return at.changed if isinstance(at, Entry) else float(self.source.changed[at])

    def tag_pairs(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """``(id, tags)`` of every entry, building none (a row's tags decoded from its JSON)."""
        tags_of = self.source.tags_of if self._rows else None
        for node_id, e, row in self.walk():
            if e is not None:
                yield node_id, e.tags
            else:
                assert tags_of is not None and row is not None
                yield node_id, tags_of(row)

    def conflicted(self) -> Iterator[Entry]:
        """The entries whose file holds a git merge conflict (materialising only those)."""
        if self._rows:
            # The snapshot's conflicted rows still standing, then the entries built or put since.
            ids, rows = self.source.ids, self._rows
            found = [ids[row] for row in sorted(self.source.conflicts) if rows.get(ids[row]) == row]
            found += [node_id for node_id, e in self._live.items() if e.conflict and node_id not in rows]
        else:
            found = [node_id for node_id, e in self._live.items() if e.conflict]
        # Ids first: materialising a row while walking would change what the walk visits.
        for node_id in found:
            yield self[node_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.settle())

    def keys(self) -> KeysView[str]:
        if self._rows and not self._extra:
            return self._rows.keys()  # ids only: nothing to materialise
        return self.settle().keys()

    def values(self) -> ValuesView[Entry]:
        return self.settle().values()

    def items(self) -> ItemsView[str, Entry]:
        return self.settle().items()

    def __repr__(self) -> str:
        return f"Entries({len(self)} entries, {self._unmade()} rows not materialised)"


class Columns(NamedTuple):
    """Every entry, for a listing that filters and sorts with numpy
    (:meth:`Entries.columns`): the snapshot's rows as columns, less the rows
    ``dropped`` since (an id put again or deleted), plus the ``extra`` entries
    put since; ``row_of`` gives an id's row still standing (None: none)."""

    ids: list[str]
    #: each row's layer as its index in LAYERS
    layers: np.ndarray
    #: each row's Entry.changed
    changed: np.ndarray
    dropped: list[int]
    extra: list[Entry]
    row_of: Callable[[str], int | None]


#: every :attr:`IndexState.generation` of this process, so that no two states (nor two
#: versions of one) share a value
_GENERATIONS = itertools.count(1)


@dataclass
class IndexState:
    """All entries plus the structures derived from them."""

    entries: Entries = field(default_factory=Entries)
    #: knowledge bucket folder -> number of nodes, and -> its domain (route key)
    buckets: dict[str, int] = field(default_factory=dict)
    bucket_domains: dict[str, str] = field(default_factory=dict)
    reverse: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    #: id key (case/normalisation folded) -> the id indexed under it
    keys: dict[str, str] = field(default_factory=dict)
    #: id keys held by more than one indexed id (twins pulled in from elsewhere)
    twin_keys: dict[str, set[str]] = field(default_factory=dict)
    text: TextIndex = field(default_factory=lambda: TextIndex(analyzer=query_terms))
    bucket_codes: dict[str, int] = field(default_factory=dict)
    #: files that failed to parse at the last rebuild/sync, by path
    problems: dict[str, str] = field(default_factory=dict)
    #: ids with more than one file: id -> losing paths
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    #: how this process ranks the copies of a duplicated id (:func:`winner`'s ``prefer``):
    #: None (every scope) or a scoped handle's own (:func:`md_cg.engine.take_scope`).
    #: Never written: a snapshot holds the copies every scope ranks alike
    prefer: Prefer | None = field(default=None, repr=False, compare=False)
    #: the scope fields of the losing copies in :attr:`duplicates`, by path, as last read
    #: (a snapshot keeps them: a scoped open ranks the copies by them, reading only the
    #: files of the ids whose standing copy its scope changes, :func:`md_cg.engine.take_scope`).
    #: A path absent here is read.
    copy_fields: dict[str, CopyFields] = field(default_factory=dict, repr=False, compare=False)
    #: ids the index log names (written since the snapshot) whose file this process may not
    #: read -- in a folder it may not read, or of mode 000 -- and that no entry holds: id ->
    #: the path the log names. Neither confirmed nor dropped: kept as the log says, out of
    #: the entries (nothing of the memory is known but its id and path) until a look can
    #: read the file (:func:`resolve_ids`); a read of it raises the permission error
    #: naming the file, and a compaction refuses to write a snapshot without it
    unread: dict[str, str] = field(default_factory=dict)
    #: text waiting to be indexed: id -> (text, layer code, bucket code, prior, time of last change)
    pending_text: dict[str, tuple[str, int, int, float, float]] = field(default_factory=dict)
    #: characters of the texts in ``pending_text`` (kept by put, drop and flush)
    pending_chars: int = 0
    #: the terms of negative-memory nodes (rejected/, unresolved/), for covered_neg
    negative_terms: dict[str, frozenset[str]] = field(default_factory=dict)
    #: ids of entries some caller or moment may not see (:attr:`Entry.restricted`),
    #: so the visibility rule looks at these few instead of every entry
    restricted: set[str] = field(default_factory=set)
    #: ids that some node names in a ``supersedes`` edge
    superseded: set[str] = field(default_factory=set)
    #: earlier id -> the ids of the entries whose ``renamed_from`` lists it
    earlier: dict[str, set[str]] = field(default_factory=dict)
    #: a new value on every put and drop, unique in this process across every state
    #: (visibility caches key on it): a handle that reloads another process's snapshot
    #: gets a new state, which must never match a cache of the one it replaced --
    #: per-state counters both started at 0, so a scoped handle kept the hidden set of
    #: its old state and served another agent's secret memory (session 34, review rA)
    generation: int = field(default_factory=lambda: next(_GENERATIONS))
    #: case-folded tag -> ids carrying it, and the generation it is true of: built by
    #: the first :meth:`tagged`, then kept by put and drop
    _tags: tuple[int, dict[str, set[str]]] | None = field(default=None, repr=False)
    _tag_sets: tuple[int, dict[str, frozenset[str]]] = field(default_factory=lambda: (-1, {}), repr=False)
    #: path -> id of every entry, the generation and the entries it is true of: built by
    #: the first :meth:`by_path`, then kept by put and drop
    _paths: tuple[int, Entries, dict[str, str]] | None = field(default=None, repr=False)
    #: damage found in the parts of the snapshot read after the open (what, where,
    #: what was rebuilt from the files): reported by ``health()``
    snapshot_damage: list[str] = field(default_factory=list)

    def bucket_code(self, bucket: str | None) -> int:
        """The text index's integer code of a bucket folder (-1 for none).

        A bucket's code is dropped when its last node leaves (so a forgotten
        node's domain does not linger in the snapshot); a new bucket gets the
        next code after the highest in use, never a dropped bucket's code
        still held by dead text-index slots.
        """
        if bucket is None:
            return -1
        code = self.bucket_codes.get(bucket)
        if code is None:
            code = self.bucket_codes[bucket] = max(self.bucket_codes.values(), default=-1) + 1
        return code

    def twin_of(self, node_id: str) -> str | None:
        """Another indexed id that collides with ``node_id`` on folding file systems."""
        other = self.keys.get(paths.id_key(node_id))
        return other if other is not None and other != node_id else None

    def tagged(self, tag: str) -> frozenset[str]:
        """The ids whose tags hold ``tag``, letter case, Unicode form, width and space
        characters aside (:func:`md_cg.script.tag_fold`: ``réunion`` typed composed finds a
        tag written decomposed, as macOS writes it; ``ｐｒｏｊｅｃｔ`` finds ``project``, and
        ``kp 1`` a stored ``kp\u00a01``; session 42, before: letter case and Unicode form).

        The first call reads every entry's tags (from the snapshot's rows
        without building entries: ~0.4 s at 100k); later ones are dictionary
        lookups, as put and drop keep the map.
        """
        if self._tags is None or self._tags[0] != self.generation:
            by_tag: dict[str, set[str]] = {}
            for node_id, tags in self.entries.tag_pairs():
                for t in tags:
                    by_tag.setdefault(tag_fold(t), set()).add(node_id)
            self._tags = (self.generation, by_tag)
        # one set object per tag and generation: the text index keeps its slots by identity
        if self._tag_sets[0] != self.generation:
            self._tag_sets = (self.generation, {})
        key = tag_fold(tag)
        found = self._tag_sets[1].get(key)
        if found is None:
            found = self._tag_sets[1][key] = frozenset(self._tags[1].get(key, ()))
        return found

    def _retag(self, old: Entry | None, new: Entry | None, nxt: int) -> None:
        """Keep the tag map of :meth:`tagged` (if built and current) through one change;
        call before the change sets the generation to ``nxt``."""
        if self._tags is None or self._tags[0] != self.generation:
            self._tags = None
            return
        by_tag = self._tags[1]
        if old is not None:
            for t in old.tags:
                ids = by_tag.get(tag_fold(t))
                if ids is not None:
                    ids.discard(old.id)
        if new is not None:
            for t in new.tags:
                by_tag.setdefault(tag_fold(t), set()).add(new.id)
        self._tags = (nxt, by_tag)

    def put(self, entry: Entry, text: str | None) -> None:
        """Insert or replace an entry; ``text=None`` keeps the indexed text.

        New text is not analysed here: it waits in ``pending_text`` until
        :meth:`flush_text` (run by the first search, and before a snapshot is
        written), so a write does not pay for tokenising; when the waiting
        texts pass :data:`PENDING_TEXT_CHARS`, they are indexed here, so that
        a process that only writes keeps a bounded amount of text.
        """
        old = self.entries.get(entry.id)
        nxt = next(_GENERATIONS)
        if self._tags is not None:
            self._retag(old, entry, nxt)
        if self._paths is not None:
            self._repath(old, entry, nxt)
        if old is not None:
            self._unlink(old)
        self.entries[entry.id] = entry
        self.generation = nxt
        if entry.restricted:
            self.restricted.add(entry.id)
        key = paths.id_key(entry.id)
        holder = self.keys.setdefault(key, entry.id)
        if holder != entry.id:
            self.twin_keys.setdefault(key, {holder}).add(entry.id)
        if entry.bucket is not None:
            self.buckets[entry.bucket] = self.buckets.get(entry.bucket, 0) + 1
            if entry.domain is not None:
                self.bucket_domains[entry.bucket] = entry.domain
        self.link(entry)
        prior = entry.importance if entry.importance is not None else 0.5
        # the time of the last change orders ties after the importance (TextIndex.add)
        meta = (_LAYER_CODE[entry.layer], self.bucket_code(entry.bucket), prior, entry.changed)
        if text is not None:
            waiting = self.pending_text.get(entry.id)
            self.pending_text[entry.id] = (text, *meta)
            self.pending_chars += len(text) - (len(waiting[0]) if waiting is not None else 0)
        elif entry.id in self.pending_text:
            self.pending_text[entry.id] = (self.pending_text[entry.id][0], *meta)
        elif entry.id in self.text:
            self.text.set_meta(entry.id, layer=meta[0], bucket=meta[1], prior=meta[2], changed=meta[3])
        else:
            self.pending_text[entry.id] = ("", *meta)
        self.problems.pop(entry.path, None)
        if self.pending_chars > PENDING_TEXT_CHARS:
            self.flush_text()

    def drop(self, node_id: str) -> Entry | None:
        old = self.entries.pop(node_id, None)
        if old is not None:
            nxt = next(_GENERATIONS)
            if self._tags is not None:
                self._retag(old, None, nxt)
            if self._paths is not None:
                self._repath(old, None, nxt)
            self._unlink(old)
            self.generation = nxt
            key = paths.id_key(node_id)
            twins = self.twin_keys.get(key)
            if twins is not None:
                twins.discard(node_id)
                if self.keys.get(key) == node_id:
                    self.keys[key] = min(twins)
                if len(twins) <= 1:
                    del self.twin_keys[key]
            elif self.keys.get(key) == node_id:
                del self.keys[key]
            waiting = self.pending_text.pop(node_id, None)
            if waiting is not None:
                self.pending_chars -= len(waiting[0])
            self.negative_terms.pop(node_id, None)
            self.text.remove(node_id)
        return old

    def flush_text(self) -> int:
        """Tokenise and index every pending text; return how many were indexed."""
        if len(self.pending_text) > 1000:
            with no_gc():
                return self._flush_text()
        return self._flush_text()

    def _flush_text(self) -> int:
        pending, self.pending_text = self.pending_text, {}
        self.pending_chars = 0
        if len(pending) >= TEXT_BATCH_MIN:
            for batch in _text_batches(list(pending.items())):
                self._index_batch(batch)
            return len(pending)
        add = self.text.add
        for node_id, (text, layer, bucket, prior, changed) in pending.items():
            terms = analyze(text)
            add(node_id, terms, layer=layer, bucket=bucket, prior=prior, changed=changed)
            if layer in _NEGATIVE_CODES:
                self.negative_terms[node_id] = frozenset(terms)
            else:
                self.negative_terms.pop(node_id, None)
        return len(pending)

    def _index_batch(self, batch: list[tuple[str, tuple[str, int, int, float, float]]]) -> None:
        """Index a batch of pending texts at once (the same index as one by one)."""
        ids = [node_id for node_id, _ in batch]
        texts = [v[0] for _, v in batch]
        self.text.add_many(ids, analyze_batch(texts), [v[1:] for _, v in batch])
        negative = self.negative_terms
        for node_id, (text, layer, *_) in batch:
            if layer in _NEGATIVE_CODES:
                negative[node_id] = frozenset(analyze(text))
            elif negative:
                negative.pop(node_id, None)

    def _unlink(self, old: Entry) -> None:
        if old.bucket is not None:
            left = self.buckets.get(old.bucket, 0) - 1
            if left > 0:
                self.buckets[old.bucket] = left
            else:
                self.buckets.pop(old.bucket, None)
                self.bucket_domains.pop(old.bucket, None)
                self.bucket_codes.pop(old.bucket, None)
        self.restricted.discard(old.id)
        for target, etype in old.edges:
            sources = self.reverse.get(target)
            if sources is not None:
                sources.discard((old.id, etype))
                if not sources:
                    del self.reverse[target]
            if etype == "supersedes" and not any(t == "supersedes" for _, t in self.reverse.get(target, ())):
                self.superseded.discard(target)
        for old_id in old.renamed_from:
            holders = self.earlier.get(old_id)
            if holders is not None:
                holders.discard(old.id)
                if not holders:
                    del self.earlier[old_id]

    def link(self, entry: Entry) -> None:
        """Record the reverse edges of ``entry`` (and the ids it supersedes), and its earlier ids."""
        for target, etype in entry.edges:
            self.reverse.setdefault(target, set()).add((entry.id, etype))
            if etype == "supersedes":
                self.superseded.add(target)
        for old_id in entry.renamed_from:
            self.earlier.setdefault(old_id, set()).add(entry.id)

    def by_path(self) -> Mapping[str, str]:
        """Path -> id of every entry (builds no entry of an open from a snapshot).

        The first call walks every entry; put and drop keep the map since, so a
        long-lived handle's pick-up of one changed file costs no walk of a large
        store (it did: 110 ms a call at 100k). Read it, do not change it: it is the
        state's own, true until the next put or drop.
        """
        cached = self._paths
        if cached is None or cached[0] != self.generation or cached[1] is not self.entries:
            cached = (self.generation, self.entries, {p: i for i, p, _m, _s in self.entries.placed()})
            self._paths = cached
        return cached[2]

    def _repath(self, old: Entry | None, new: Entry | None, nxt: int) -> None:
        """Keep the map of :meth:`by_path` (if built and current) through one change;
        call before the change sets the generation to ``nxt``."""
        cached = self._paths
        if cached is None or cached[0] != self.generation or cached[1] is not self.entries:
            self._paths = None
            return
        by_path = cached[2]
        if old is not None and by_path.get(old.path) == old.id:
            del by_path[old.path]
        if new is not None:
            by_path[new.path] = new.id
        self._paths = (nxt, self.entries, by_path)

    def twins(self) -> dict[str, list[str]]:
        """Id key -> the indexed ids that share it (only keys with more than one)."""
        return {k: sorted(v) for k, v in sorted(self.twin_keys.items())}


def _text_batches(
    items: list[tuple[str, tuple[str, int, int, float, float]]],
) -> Iterator[list[tuple[str, tuple[str, int, int, float, float]]]]:
    """``items`` in order, cut into batches of :data:`TEXT_BATCH_DOCS` texts and
    :data:`TEXT_BATCH_CHARS` characters (a longer text is a batch of its own)."""
    batch: list[tuple[str, tuple[str, int, int, float, float]]] = []
    chars = 0
    for item in items:
        size = len(item[1][0])
        if batch and (len(batch) >= TEXT_BATCH_DOCS or chars + size > TEXT_BATCH_CHARS):
            yield batch
            batch, chars = [], 0
        batch.append(item)
        chars += size
    if batch:
        yield batch


def layer_code(layer: str) -> int:
    return _LAYER_CODE[layer]


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects.

    Loading an index allocates millions of lists, dicts and strings that are
    all kept; the collector would scan them again and again (at 100k nodes it
    took three quarters of the time). Nothing built here forms a cycle that
    would need collecting.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def build_from_files(root: str, scan: Scan | None = None, progress: Any = None) -> IndexState:
    """A fresh state from the ``.md`` files alone (reads files, writes nothing)."""
    with no_gc():
        return _build_from_files(root, scan, progress)


#: Files read, then parsed, then made entries, a chunk at a time: running each
#: stage over a few dozen files before the next keeps its code and data in
#: the CPU caches (~15% less CPU than one file through every stage at a time).
BUILD_CHUNK = 64


def _build_from_files(root: str, scan: Scan | None, progress: Any) -> IndexState:
    if scan is None:
        scan = scan_files(root)
    builder = Builder(progress)
    rels = sorted(scan.files)
    scan = None  # its stat results are not needed any more (~1 KiB per file)
    with DirCache(root) as dirs:
        for start in range(0, len(rels), BUILD_CHUNK):
            chunk = rels[start : start + BUILD_CHUNK]
            builder.add(len(chunk), *parse_chunk(root, chunk, dirs))
    return builder.finish()


class Builder:
    """A fresh state from parsed files, fed chunk by chunk in path order.

    The first copy of an id is put at once; should another file hold the
    same id, the :func:`winner` of its copies stands at :meth:`finish` and
    the others are listed in ``duplicates``. Only the entry and the text of
    each file are kept (holding every parsed node until the end would double
    the peak memory of a rebuild). ``flush``: tokenise the texts every
    :data:`TEXT_BATCH_DOCS` files (:mod:`md_cg.coldbuild`, whose helper
    processes parse meanwhile) instead of leaving them to the first search.
    """

    def __init__(self, progress: Callable[[int], object] | None = None, *, flush: bool = False) -> None:
        self.state = IndexState()
        self._progress = progress
        self._flush = flush
        self._copies: dict[str, list[Parsed]] = {}

    def add(self, files: int, parsed: list[Parsed], problems: dict[str, str]) -> None:
        """The next chunk: ``files`` paths, what parsed and what did not (path order)."""
        state = self.state
        entries = state.entries
        state.problems.update(problems)
        for p in parsed:
            node_id = p.entry.id
            first = entries.get(node_id)
            if first is None:
                state.put(p.entry, p.text)
                continue
            copies = self._copies.get(node_id)
            if copies is None:
                copies = self._copies[node_id] = [Parsed(None, first, None)]
            copies.append(p)
        if self._flush and len(state.pending_text) >= TEXT_BATCH_DOCS:
            state.flush_text()
        if self._progress is not None:
            self._progress(files)

    def finish(self) -> IndexState:
        """The state, with the winner of each duplicated id in place."""
        state = self.state
        for node_id, copies in self._copies.items():
            best = winner(copies, state.prefer)
            note_copies(state, node_id, copies, best)
            if best is not copies[0]:
                state.put(best.entry, best.text)
        if self._flush:
            state.flush_text()
        return state


def parse_chunk(root: str, rels: list[str], dirs: DirCache) -> tuple[list[Parsed], dict[str, str]]:
    """:func:`parse_file` of each of ``rels`` (without the nodes), one stage at a time.

    Returns what parsed, and each file that is malformed or unsafe with its
    reason (in the order of ``rels``, as one file at a time would find them);
    a file removed meanwhile is in neither.
    """
    problems: dict[str, str] = {}
    read: list[tuple[str, bytes, os.stat_result]] = []
    for rel in rels:
        try:
            data, st = read_limited(root, rel, dirs)
        except (MalformedNodeFileError, UnsafePathError) as exc:
            problems[rel] = _reason(exc)
        except (FileNotFoundError, NotADirectoryError):
            pass  # removed while we scanned
        else:
            read.append((rel, data, st))
    decoded: list[tuple[str, Node, os.stat_result]] = []
    texts: list[tuple[str, str, os.stat_result]] = []
    for rel, data, st in read:
        try:
            texts.append((rel, read_bytes_as_text(data, rel), st))
        except MalformedNodeFileError as exc:
            problems[rel] = _reason(exc)
    defaults = [(paths.stem_of(rel), paths.layer_of(rel)) for rel, _, _ in texts]
    fast = fastread.fast_nodes([text for _, text, _ in texts], defaults)
    for (rel, text, st), node, (stem, layer) in zip(texts, fast, defaults, strict=True):
        if node is None:  # not in the engine's layout, or not valid: the full reader decides
            try:
                node = nodefile.loads(text, rel, default_id=stem, default_layer=layer)
            except (MalformedNodeFileError, UnsafePathError) as exc:
                problems[rel] = _reason(exc)
                continue
        decoded.append((rel, node, st))
    out = []
    for rel, node, st in decoded:
        try:
            out.append(Parsed(None, make_entry(node, rel, st.st_mtime_ns, st.st_size), index_text(node)))
        except (MalformedNodeFileError, UnsafePathError) as exc:
            problems[rel] = _reason(exc)
    if problems:
        problems = {rel: problems[rel] for rel in rels if rel in problems}
    return out, problems


def _reason(exc: MalformedNodeFileError | UnsafePathError) -> str:
    return exc.reason


# -- settling ids against the disk ------------------------------------------------


def resolve_ids(
    root: str,
    state: IndexState,
    touched: dict[str, list[str]],
    before: dict[str, Entry | None] | None = None,
) -> list[str]:
    """Settle each touched id against the disk: the files that exist decide.

    ``touched`` maps an id to every path the log named for it (already
    checked against the path rules). Candidate paths are those plus the id's
    current entry path; the existing ones are parsed and the :func:`winner`
    stands. A candidate file that holds another id now (a person swapped two
    files' bytes, or wrote another id into one) is that id's file when none of
    that id's own candidates holds it any more -- settled again if it was
    settled already; a file edited to claim an id whose file still holds it
    takes nothing over. Settled one at a time, without this, the first of two
    swapped files was dropped (its file held the other id) and the other could
    not take the first's file while its entry still named its own (review r4:
    ``sync`` told ``deleted ('n3',)`` of a memory whose file was on disk).
    That is a sync's work: ``before``, when given (by a sync), gains the entry each id
    it lacks had before this, so the sync tells them. Without it (a follow of the log,
    a write's check) a file holding another id is indexed under that id only when the
    id has no entry or its entry is that file, and no other id is settled: one settled
    here was taken in untold, and the sync after it told nothing (review r7).
    Returns the ids whose entry changed.
    """
    rels_of = {node_id: list(rels) for node_id, rels in touched.items()}
    found: dict[str, list[str]] = {}  # id -> files found holding it among other ids' candidates
    queue = dict.fromkeys(touched)
    changed: dict[str, None] = {}
    while queue:
        node_id = next(iter(queue))
        del queue[node_id]
        if before is not None and node_id not in before:
            before[node_id] = state.entries.get(node_id)
        strays: list[tuple[str, str, Parsed]] = []
        was = state.entries.get(node_id)
        if _resolve_id(root, state, node_id, (rels_of.get(node_id, []), found.get(node_id, [])), strays):
            changed[node_id] = None
        own = rels_of.setdefault(node_id, [])
        if was is not None and was.path not in own:
            # Settled again (a file found holding it later): the file it left is still a
            # candidate, else the copy there was dropped from ``duplicates`` untold.
            own.append(was.path)
        for other, rel, parsed in strays:
            if before is None:
                # Not a sync (a follow of the log, a write's check): only index the file
                # under the id it holds when that id has no entry or its entry is that
                # file; settling the other id here would take a hand move in untold --
                # the sync after it tells nothing (review r7, session 32). The sync
                # settles swaps whole.
                was = state.entries.get(other)
                if was is None or was.path == rel:
                    state.put(parsed.entry, parsed.text)
                continue
            held = found.setdefault(other, [])
            if rel not in held:
                held.append(rel)
                queue[other] = None
    return list(changed)


def _resolve_id(
    root: str,
    state: IndexState,
    node_id: str,
    rels: tuple[list[str], list[str]],
    strays: list[tuple[str, str, Parsed]],
) -> bool:
    """Settle one id (:func:`resolve_ids`); whether its entry changed. ``rels``: its
    own candidate paths, and the files found holding it, read only when none of its
    own does. A candidate holding another id is appended to ``strays`` as (id, path,
    what it holds)."""
    current = state.entries.get(node_id)
    # The losing copies known are candidates too: settled without them, a write of the
    # standing copy forgot them (health no longer named the duplicate), and its removal
    # by a scoped delete (which leaves another scope's copy) dropped the id untold
    losers = state.duplicates.get(node_id, ())
    own = list(dict.fromkeys([*rels[0], *([current.path] if current else []), *losers]))
    parsed: list[Parsed] = []
    denied: list[str] = []  # candidates this process may not read: whether they hold it is unknown
    for candidates in (own, [rel for rel in rels[1] if rel not in own]):
        for rel in candidates:
            p = _stat_and_parse(root, rel, node_id, current, state, (strays, denied))
            if p is not None:
                parsed.append(p)
        if parsed:
            break
    if parsed:
        state.unread.pop(node_id, None)
    elif denied and rels[0]:
        # Its file (where the log or the index has it) may not be read: neither confirmed nor
        # dropped. Until session 35 a memory the log named in a folder this process may not
        # read was dropped, as gone: every read of the store left it out, a sync told it
        # ``deleted`` and logged that, and a compaction wrote a snapshot without it (rH).
        state.unread[node_id] = denied[-1]
        # The entry it had (its file, looked at too, holds it no more: md-cg moved it there,
        # session 36) goes: kept, the follow noted it moved by hand, a sync told it
        # ``deleted`` and a compaction wrote a snapshot without it (attack a5 of session 35).
        state.duplicates.pop(node_id, None)
        return state.drop(node_id) is not None
    if not parsed:
        # nothing holds it and nothing is denied: no longer unread (one EACCES kept a file
        # removed since as "permission denied" for the handle's life, attack a5)
        state.unread.pop(node_id, None)
        state.duplicates.pop(node_id, None)
        return state.drop(node_id) is not None
    best = winner(parsed, state.prefer) if len(parsed) > 1 else parsed[0]
    note_copies(state, node_id, parsed, best)
    if current is None or current != best.entry:
        state.put(best.entry, best.text)
        return True
    return False


def _stat_and_parse(
    root: str,
    rel: str,
    node_id: str,
    current: Entry | None,
    state: IndexState,
    out: tuple[list[tuple[str, str, Parsed]], list[str]],
) -> Parsed | None:
    """One candidate of :func:`_resolve_id`: what ``rel`` holds of ``node_id`` (None:
    nothing). ``out``: the strays (a file holding another id), and the candidates this
    process may not read (permission denied), for which it cannot tell."""
    strays, denied = out
    if paths.rel_problem(rel) is not None:
        return None
    try:
        st = fsops.lstat(root, rel)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return None
    except PermissionError:
        # In a folder this process may not read: whether the file is there is unknown,
        # so what the index holds stands (a new path is not taken on trust).
        if current is not None and current.path == rel:
            return Parsed(None, current, None)
        denied.append(rel)
        return None
    if (
        current is not None
        and current.path == rel
        and current.mtime_ns == st.st_mtime_ns
        and current.size == st.st_size
    ):
        # Unchanged since we indexed it: reuse the entry, keep the indexed text.
        return Parsed(None, current, None)
    try:
        parsed = parse_file(root, rel)
    except (MalformedNodeFileError, UnsafePathError) as exc:
        state.problems[rel] = _reason(exc)
        if exc.reason == PERMISSION_DENIED:  # a file of mode 000: unknown, as its folder's is
            denied.append(rel)
        return None
    except (FileNotFoundError, NotADirectoryError):
        return None
    if parsed.entry.id != node_id:
        # The file now holds another id (edited by hand, or swapped): that id is settled
        # with this file among its candidates (resolve_ids).
        strays.append((parsed.entry.id, rel, parsed))
        return None
    return parsed


def denied(root: str, rel: str) -> bool:
    """Whether this process may not read the file at ``rel`` (permission denied on its
    folder or on the file itself): whether it is there, and what it holds, is unknown."""
    try:
        fsops.lstat(root, rel)
        parse_file(root, rel)
    except PermissionError:
        return True
    except MalformedNodeFileError as exc:
        return exc.reason == PERMISSION_DENIED
    except (OSError, UnsafePathError):
        return False
    return False


def iter_entries(state: IndexState, layer: str | None = None) -> Iterator[Entry]:
    for e in state.entries.values():
        if layer is None or e.layer == layer:
            yield e
