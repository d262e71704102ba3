"""The snapshot codec: the index saved to ``.mdcg/index.snapshot``.

::

    MDCG-SNAPSHOT 1\\n
    {header JSON}\\n
    <entries JSON><rows image, eager part><text image, eager part>
    <rows lazy region><text lazy region>

The header holds :data:`VERSION`, the log offsets the snapshot covers, the
lengths of the five sections, a CRC-32 of the entries section (the images
check themselves) and ``columns``: the names of the entry fields. A
snapshot written with other columns -- an older or newer version, or a field
added to :class:`~md_cg.index.Entry` since -- is refused and the index is
rebuilt from the files (a snapshot is derived, never trusted blindly).

An open reads only the first three sections (the *eager* part: ~6% of the
file at 100k nodes) and keeps the file open. The two lazy regions -- the
rows' JSON and the text index's postings -- are split images
(:func:`md_cg.textindex_codec.encode_split`): each 64 KiB chunk is read and
checked against its CRC-32 (kept in the eager part) the first time
something in it is used. A damaged chunk is never used: the entries of its
rows are rebuilt from their files (:meth:`_Table.entry`), a damaged postings
chunk makes the text index rebuild itself from the files
(:func:`_text_repair`), and the damage is recorded in
:attr:`~md_cg.index.IndexState.snapshot_damage` for ``health()``. Where no
rebuild is possible (a snapshot decoded from bytes, a damaged row whose file
is gone) :class:`~md_cg.errors.SnapshotDamageError` is raised: never a wrong
or empty answer.

The entries section keeps the fields that place a node (:data:`EAGER`: id,
layer, bucket, path when it is not the canonical one, the file's mtime and
size, archived, conflict) as columns -- what a :func:`~md_cg.maintenance.sync`
compares with the files, so that it builds no entry of an unchanged file --
plus what the index derives from the other fields (restricted ids, edges, and
each row's :attr:`~md_cg.index.Entry.changed` time, which a listing sorts by).
The rest of each row (:data:`LAZY`) is one JSON array in the rows image
(concatenated, with offsets), decoded only when the entry is first used:
opening builds no :class:`~md_cg.index.Entry` (see
:class:`~md_cg.index.Entries`). Every row's id, layer, bucket and path must
pass the path rules (:func:`md_cg.paths.rel_problem`) before anything is
used, or the whole snapshot is refused.

Written only by maintenance under the exclusive store lock; a missing,
truncated, foreign or damaged snapshot means a rebuild *in memory* -- nothing
is written on the read path.

Imports :mod:`md_cg.index` and the bottom modules.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
import weakref
import zlib
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import orjson

from . import fsops, index, paths
from . import textindex_codec as codec
from .errors import MalformedNodeFileError, SnapshotDamageError, UnsafePathError
from .index import CopyFields, Entries, Entry, IndexState, canonical_path, no_gc
from .node import LAYERS
from .text import analyze, query_terms
from .textindex import TextIndex, lazy_regions, read_postings, slot_order, take_changed

MAGIC = b"MDCG-SNAPSHOT 1\n"
#: The format version. Bump it when the meaning of a section changes.
VERSION = 12
REL = paths.meta(paths.SNAPSHOT)
TOKEN_REL = paths.meta(paths.SNAPSHOT_TOKEN)
#: Entry fields in row order (the ``columns`` header); ``path`` is None when
#: it is the canonical path, ``domain`` is not stored (read from the bucket map).
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Entry))[:-1]
assert tuple(f.name for f in fields(Entry))[-1] == "domain", "Entry.domain must stay its last field"
#: Columns kept as columns of the entries section (checked at load, before any use).
EAGER = ("id", "path", "layer", "bucket", "mtime_ns", "size", "archived", "conflict")
#: Columns of a row's JSON array in the rows section, decoded when the entry is first used.
LAZY: tuple[str, ...] = tuple(name for name in COLUMNS if name not in EAGER)
assert (*EAGER[:6], *LAZY, *EAGER[6:]) == COLUMNS, "_Table.entry builds entries positionally"
#: Positions in :data:`LAZY` of the entry's sequence fields (JSON arrays, tuples in an Entry).
_SEQUENCES = tuple(LAZY.index(name) for name in ("tags", "ccg_missing", "conditions", "renamed_from"))
_EDGES = LAZY.index("edges")
_TAGS = LAZY.index("tags")
_TITLE = LAZY.index("title")
#: A layer's code in the entries section's ``layers`` string: one digit per row.
_LAYER_DIGIT = {name: chr(48 + i) for i, name in enumerate(LAYERS)}
_LAYER_DIGITS = re.compile(f"[0-{len(LAYERS) - 1}]*")
assert len(LAYERS) <= 10


@dataclass
class Snapshot:
    """A decoded snapshot: the index state, the log offsets it covers, its file identity."""

    state: IndexState
    offsets: dict[str, int]
    identity: tuple[int, int, int]
    #: 1 for the first snapshot of a folder, one more for each after it (None: unknown)
    generation: int | None = None
    #: the random token written beside it (``.mdcg/index.token``; None: an earlier version's)
    token: str | None = None
    #: the compacting process's notes of files a person changed after md-cg wrote them
    #: (:attr:`md_cg.engine.Engine.hand_after`), for the next sync to tell: see :data:`NOTES`
    notes: dict[str, Noted] = field(default_factory=dict)
    #: the copies of duplicated ids as the last sync line naming each logged them, undecoded
    #: (:attr:`md_cg.engine.Engine.copies_logged`): see :data:`COPIES`
    copies: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class Header:
    """What a snapshot's header says: its file identity, the log offsets it covers, its generation."""

    identity: tuple[int, int, int]
    offsets: dict[str, int]
    generation: int | None
    token: str | None = None


def _row(e: Entry) -> bytes:
    """The lazily decoded part of an entry's row: its :data:`LAZY` fields, as a JSON array."""
    return orjson.dumps([getattr(e, name) for name in LAZY])


#: A note of a file a person changed after md-cg wrote it (:data:`md_cg.engine.Noted`):
#: ``(kind, path, was)``.
Noted = tuple[str, str, Entry | None]
#: The kinds of :data:`Noted` a snapshot keeps (:data:`NOTES`): only ``gone`` (a crafted
#: ``moved`` note made a sync tell a false move: attack a1 of session 37).
NOTE_KINDS = frozenset({"gone"})
#: The ``notes`` of the entries section: ``[id, kind, path, was]`` per note, ``was`` the
#: entry's :data:`COLUMNS` (null: none). A compaction folds the log into the snapshot; a
#: note made by following a write of it (a file removed or moved by hand after md-cg wrote
#: it) is known only to the processes that followed that write, so the snapshot keeps the
#: compacting process's notes: a process opening after it refuses an add of an id whose
#: file a person removed or moved, and its sync tells the change (session 36's attack a2:
#: every ``forget`` compacts, and the id was then added again beside the moved file).
NOTES = "notes"
#: At most this many notes are kept by a compaction (those noted last: :func:`_encode_notes`),
#: and a snapshot holding more is refused: decoding and taking in a note costs ~15 µs (~45 µs
#: with its entry), so a crafted million made every open take 16 s and 780 MB (attack 5 of
#: session 38). Beyond it a process opening after the compaction knows nothing of the ids
#: noted first, as before session 37: its ``add`` of one may write a file beside a copy moved
#: by hand, which the next ``sync`` reports under ``duplicates`` (nothing is lost).
NOTES_MAX = 10_000
#: The dtype of the rows image's columns of the files' mtimes and sizes (:meth:`_Table.attach`):
#: every integer field of a note's entry must fit it too (:data:`_FITS`) -- an mtime of
#: ``2**63 + 5`` (orjson reads integers up to ``2**64 - 1``) was taken back by ``get`` and
#: made every compaction raise ``OverflowError`` (attack 5 of session 38).
_INT_COLUMN = np.int64
_INT_RANGE = np.iinfo(_INT_COLUMN)
#: Per column of :data:`COLUMNS`: whether a decoded JSON value fits the entry field.
_FITS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: type(v) is str,
    "str | None": lambda v: v is None or type(v) is str,
    "int": lambda v: type(v) is int and _INT_RANGE.min <= v <= _INT_RANGE.max,
    "bool": lambda v: type(v) is bool,
    "float | None": lambda v: v is None or type(v) in (int, float),
    "tuple[str, ...]": lambda v: type(v) is list and all(type(x) is str for x in v),
    "tuple[tuple[str, str], ...]": lambda v: (
        type(v) is list and all(type(x) is list and len(x) == 2 and all(type(y) is str for y in x) for x in v)
    ),
}
_COLUMN_FITS = tuple(_FITS[str(f.type)] for f in fields(Entry)[:-1])


def _encode_notes(notes: Mapping[str, Noted]) -> list[list[Any]]:
    """:data:`NOTES` of ``notes``: the last :data:`NOTES_MAX` of them (a process's notes are
    in the order it made them: the oldest are left out), by id."""
    kept = list(notes.items())[-NOTES_MAX:]
    return [
        [node_id, kind, rel, None if was is None else [getattr(was, name) for name in COLUMNS]]
        for node_id, (kind, rel, was) in sorted(kept)
    ]


def _decode_notes(raw: object, domains: Mapping[str, str]) -> dict[str, Noted] | str:
    """The notes of a snapshot's :data:`NOTES` (absent: none), or why they are unusable:
    every id, path and entry passes the rules a row does, or the snapshot is refused."""
    if raw is None:
        return {}
    if type(raw) is not list:
        return "damaged (notes)"
    if len(raw) > NOTES_MAX:
        return f"damaged ({len(raw):,} notes, more than the {NOTES_MAX:,} a compaction keeps)"
    out: dict[str, Noted] = {}
    for item in raw:
        if type(item) is not list or len(item) != 4 or item[1] not in NOTE_KINDS:
            return "damaged (a note)"
        node_id, kind, rel, was = item
        if type(node_id) is not str or paths.id_problem(node_id) is not None or paths.rel_problem(rel):
            return f"unsafe (a note of id {node_id!r} at {rel!r})"[:300]
        entry = None if was is None else _noted_entry(node_id, was, domains)
        if isinstance(entry, str):
            return entry
        if node_id in out:
            return f"damaged (two notes of id {node_id!r})"[:300]
        out[node_id] = (kind, rel, entry)
    return out


def _unheld(
    notes: dict[str, Noted], state: IndexState, table: _Table, rows: dict[str, int]
) -> dict[str, Noted]:
    """``notes`` but those of an id the snapshot holds or a twin of one (by uniqueness key:
    :func:`md_cg.paths.id_key`), and those of a path a held entry has (a twin spelling of
    it too): such a note told a held memory deleted, refused an ``add`` of the id after its
    ``forget`` (its file "moved or deleted outside md-cg"), or an ``add`` of the twin after
    its ``delete`` (attack 5 of session 38). Dropped, not refused: a compaction keeps no
    note of an id it holds (:func:`md_cg.maintenance._gone_notes`), but it does keep a
    twin's -- a twin file removed by hand beside its holder's --, and a refused snapshot
    is rebuilt from the files at every open, every true note lost with it."""
    if not notes:
        return notes
    key = paths.id_key
    moved = {key(rel) for rel in table.paths.values()}
    out: dict[str, Noted] = {}
    for node_id, noted in notes.items():
        rel, stem = key(noted[1]), key(paths.stem_of(noted[1]))
        # a held file at a canonical path is named by its id: the note's stem names it
        holders = state.twin_keys.get(stem) or [state.keys.get(stem)]
        at_rel = any(h is not None and key(table.path_of(rows[h])) == rel for h in holders)
        if key(node_id) not in state.keys and rel not in moved and not at_rel:
            out[node_id] = noted
    return out


def _noted_entry(node_id: str, values: object, domains: Mapping[str, str]) -> Entry | str:
    """The entry a note keeps, from its :data:`COLUMNS` values, or why it is unusable."""
    if type(values) is not list or len(values) != len(COLUMNS):
        return f"damaged (the entry of the note of {node_id!r})"[:300]
    if not all(fits(v) for fits, v in zip(_COLUMN_FITS, values, strict=True)):
        return f"damaged (a field of the entry of the note of {node_id!r})"[:300]
    e = dict(zip(COLUMNS, values, strict=True))
    layer, bucket = e["layer"], e["bucket"]
    bucket_ok = bucket is None or (layer == paths.BUCKETED_LAYER and paths.id_problem(bucket) is None)
    if e["id"] != node_id or layer not in _LAYER_NAMES or not bucket_ok or paths.rel_problem(e["path"]):
        return f"unsafe (the entry of the note of {node_id!r})"[:300]
    for name in ("tags", "ccg_missing", "conditions", "renamed_from"):
        e[name] = tuple(e[name])
    e["edges"] = tuple(tuple(edge) for edge in e["edges"])
    return Entry(**e, domain=None if bucket is None else domains.get(bucket))


class _Columns:
    """The entries section and the rows of a snapshot being written, one entry at a time."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.layers: list[str] = []
        self.buckets: list[int] = []
        self.names: dict[str, int] = {}
        self.archived: list[int] = []
        self.mtimes: list[int] = []
        self.sizes: list[int] = []
        self.changed: list[float] = []
        self.conflicts: list[int] = []
        self.moved: list[list[Any]] = []
        self.restricted: list[int] = []
        self.edges: list[list[Any]] = []
        #: [row, earlier id] of each id a row's ``renamed_from`` lists (IndexState.earlier)
        self.earlier: list[list[Any]] = []
        # One buffer: a bytes object from orjson keeps its (4 KiB) working buffer, so
        # 100k small rows held apart would take ~10x their size.
        self.rows = bytearray()
        self.ends: list[int] = []

    def _bucket(self, bucket: str | None) -> int:
        return -1 if bucket is None else self.names.setdefault(bucket, len(self.names))

    def entry(self, e: Entry) -> None:
        n = len(self.ids)
        self.ids.append(e.id)
        self.layers.append(_LAYER_DIGIT[e.layer])
        self.buckets.append(self._bucket(e.bucket))
        if e.archived:
            self.archived.append(n)
        self.mtimes.append(e.mtime_ns)
        self.sizes.append(e.size)
        self.changed.append(e.changed)
        if e.conflict:
            self.conflicts.append(n)
        if e.path != canonical_path(e):
            self.moved.append([n, e.path])
        if e.restricted:
            self.restricted.append(n)
        if e.edges:
            self.edges += ([n, target, etype] for target, etype in e.edges)
        if e.renamed_from:
            self.earlier += ([n, old_id] for old_id in e.renamed_from)
        self.rows += _row(e)
        self.ends.append(len(self.rows))

    def copy_run(self, ids: list[str], table: _Table, first: int) -> None:
        """Rows ``first, first + 1, ...`` of a loaded snapshot, one per id of ``ids``, copied as
        they are -- in slices, not row by row; the bytes written are those :meth:`copy` writes.

        A run whose bytes are in a damaged chunk is copied row by row (:meth:`copy`).
        """
        stop = first + len(ids)
        ptr = table.ptr
        try:
            raw = table.raw_span(first, stop)
        except SnapshotDamageError:
            for k, node_id in enumerate(ids):
                self.copy(node_id, table, first + k)
            return
        n0 = len(self.ids)
        shift = n0 - first  # a row's number here, less its number there
        self.ids += ids
        self.layers.append(table.layers[first:stop])
        codes = table.buckets[first:stop]
        names = table.bucket_names
        here = {c: self._bucket(None if c < 0 else names[c]) for c in dict.fromkeys(codes)}
        self.buckets += [here[c] for c in codes]
        for into, rows in (
            (self.archived, table.sorted_rows("archived")),
            (self.conflicts, table.sorted_rows("conflicts")),
            (self.restricted, table.sorted_rows("restricted")),
        ):
            into += [row + shift for row in rows[bisect_left(rows, first) : bisect_left(rows, stop)]]
        rows = table.sorted_rows("paths")
        self.moved += [
            [row + shift, table.paths[row]]
            for row in rows[bisect_left(rows, first) : bisect_left(rows, stop)]
        ]
        rows = table.sorted_rows("edges")
        for row in rows[bisect_left(rows, first) : bisect_left(rows, stop)]:
            self.edges += ([row + shift, target, etype] for target, etype in table.edges_of(row))
        rows = table.sorted_rows("earlier")
        for row in rows[bisect_left(rows, first) : bisect_left(rows, stop)]:
            self.earlier += ([row + shift, old_id] for old_id in table.earlier_of(row))
        mtimes, sizes = table.stat_of_all()
        self.mtimes += mtimes[first:stop]
        self.sizes += sizes[first:stop]
        self.changed += table.changed_of_all()[first:stop]
        base = len(self.rows) - ptr[first]
        self.rows += raw
        self.ends += [end + base for end in ptr[first + 1 : stop + 1]]

    def copy(self, node_id: str, table: _Table, row: int) -> None:
        """A row of a loaded snapshot nobody used, copied as it is (its chunk checked first).

        A row in a damaged chunk is written from its entry rebuilt from its file.
        """
        try:
            raw = table.raw(row)
        except SnapshotDamageError:
            self.entry(table.entry(row))
            return
        n = len(self.ids)
        self.ids.append(node_id)
        self.layers.append(table.layers[row])
        self.buckets.append(self._bucket(table.bucket_of(row)))
        if row in table.archived:
            self.archived.append(n)
        self.mtimes.append(table.mtimes[row])
        self.sizes.append(table.sizes[row])
        self.changed.append(table.changed_of_all()[row])
        if row in table.conflicts:
            self.conflicts.append(n)
        path = table.paths.get(row)
        if path is not None:
            self.moved.append([n, path])
        if row in table.restricted_rows():
            self.restricted.append(n)
        self.edges += ([n, target, etype] for target, etype in table.edges_of(row))
        self.earlier += ([n, old_id] for old_id in table.earlier_of(row))
        self.rows += raw
        self.ends.append(len(self.rows))


Parts = list[bytes | memoryview]


def _sections(
    state: IndexState, notes: Mapping[str, Noted], copies: Sequence[Any] = ()
) -> tuple[bytes, tuple[Parts, Parts]]:
    """The entries section (JSON; with ``notes``: :data:`NOTES`, with ``copies``:
    :data:`COPIES`) and the rows image (a split image: eager part, lazy region) of ``state``."""
    out = _Columns()
    entries = state.entries
    table = entries.source if isinstance(entries.source, _Table) else None
    # Rows in the text index's slot order: the open then decodes and hashes the ids once.
    run: list[str] = []  # ids of consecutive rows of the loaded snapshot, copied together
    first = 0
    for node_id, e, row in entries.walk(slot_order(state.text)):
        if e is not None:
            if run:
                out.copy_run(run, table, first)  # type: ignore[arg-type]
                run = []
            out.entry(e)
        elif run and row == first + len(run):
            run.append(node_id)
        else:
            assert table is not None and row is not None
            if run:
                out.copy_run(run, table, first)
            run, first = [node_id], row
    if run:
        out.copy_run(run, table, first)  # type: ignore[arg-type]
    body = {
        # first: the ids of the entries, in row order (their other fields are in the rows section)
        "entries": out.ids,
        "layers": "".join(out.layers),
        "buckets": out.buckets,
        "bucket_names": list(out.names),
        "archived": out.archived,
        "conflicts": out.conflicts,
        "paths": out.moved,
        "restricted": out.restricted,
        "edges": out.edges,
        "earlier": out.earlier,
        "bucket_domains": state.bucket_domains,
        "bucket_codes": state.bucket_codes,
        "problems": state.problems,
        "duplicates": state.duplicates,
        # the losing copies' scope fields (a scoped open ranks them without reading them);
        # an earlier version's reader ignores this key, and without it the copies are read
        COPY_SCOPES: _copy_scopes(state),
        "negative_terms": {k: sorted(v) for k, v in state.negative_terms.items()},
    }
    if notes:
        body[NOTES] = _encode_notes(notes)
    if copies:
        body[COPIES] = list(copies)
    entries_blob = orjson.dumps(body)
    ptr = np.zeros(len(out.ends) + 1, dtype=np.uint64)
    ptr[1:] = out.ends
    stats = [
        np.array(out.mtimes, dtype=_INT_COLUMN),
        np.array(out.sizes, dtype=_INT_COLUMN),
        np.array(out.changed, dtype=np.float64),
    ]
    rows_parts = codec.encode_split(
        {"rows": len(out.ends)}, [ptr, np.frombuffer(out.rows, dtype=np.uint8), *stats], lazy=[1]
    )
    return entries_blob, rows_parts


def encode_parts(
    state: IndexState,
    offsets: dict[str, int],
    generation: int | None = None,
    token: str | None = None,
    notes: Mapping[str, Noted] | None = None,
    copies: Sequence[Any] = (),
) -> list[bytes | memoryview]:
    """The snapshot of ``state`` covering the log up to ``offsets`` (and keeping ``notes``:
    :data:`NOTES`, and ``copies``: :data:`COPIES`), as buffers to write in order.

    The sections are not joined (the text image is mostly views of the index's
    own arrays): writing them one after the other needs no second copy.
    """
    state.flush_text()
    with no_gc():
        entries_blob, (rows_parts, rows_lazy) = _sections(state, notes or {}, copies)
    text_parts, text_lazy = state.text.to_split()
    header = orjson.dumps(
        {
            "version": VERSION,
            "created": time.time(),
            "columns": COLUMNS,
            "offsets": offsets,
            "generation": generation,
            "token": token,
            "entries_len": len(entries_blob),
            "rows_len": sum(map(len, rows_parts)),
            "text_len": sum(map(len, text_parts)),
            "rows_lazy_len": sum(map(len, rows_lazy)),
            "text_lazy_len": sum(map(len, text_lazy)),
            "crc32": zlib.crc32(entries_blob),
        }
    )
    return [MAGIC + header + b"\n", entries_blob, *rows_parts, *text_parts, *rows_lazy, *text_lazy]


def encode(
    state: IndexState,
    offsets: dict[str, int],
    generation: int | None = None,
    token: str | None = None,
    notes: Mapping[str, Noted] | None = None,
    copies: Sequence[Any] = (),
) -> bytes:
    """The snapshot bytes for ``state`` covering the log up to ``offsets`` (keeping ``notes``
    and ``copies``)."""
    return b"".join(encode_parts(state, offsets, generation, token, notes, copies))


def write(
    root: str,
    state: IndexState,
    offsets: dict[str, int],
    notes: Mapping[str, Noted] | None = None,
    copies: Sequence[Any] = (),
) -> Header:
    """Write the snapshot atomically (the caller holds the exclusive store lock), keeping
    ``notes`` (:data:`NOTES`) and ``copies`` (:data:`COPIES`).

    Its generation is one more than that of the snapshot it replaces (1 when
    there is none, or none of this version), read under the same lock.
    """
    before = read_header(root)
    generation = before.generation + 1 if before is not None and before.generation is not None else 1
    token = secrets.token_hex(16)
    # The token file names the snapshot in place and the one coming, then the new
    # one alone: whenever an open reads it -- a crash between the writes too --
    # it names the snapshot on disk (review round 2, session 25).
    # A store without a token file (an earlier version's, or before its first compaction):
    # the snapshot goes first there, and a kill between the two leaves a snapshot no token
    # file stamps, which an open takes only once the files bear it out (engine._placed).
    old = before.token if before is not None else None
    held = vouchers(root)
    if old is not None and (held is None or old in held):
        was = held.get(old) if held is not None else None
        fsops.atomic_write(root, TOKEN_REL, f"{_line(old, was)}\n{_line(token, COMING)}".encode("ascii"))
    st = fsops.atomic_write(root, REL, encode_parts(state, offsets, generation, token, notes, copies))
    # the stamp: the file as it lies now (renamed into place under the lock held)
    fsops.atomic_write(root, TOKEN_REL, _line(token, identity(root)).encode("ascii"))
    return Header((st.st_ino, st.st_mtime_ns, st.st_size), dict(offsets), generation, token)


#: What :func:`load_checked` says of a snapshot whose token is not the store's.
NOT_THIS_STORES = (
    "not the one this store wrote last (its token is not in .mdcg/index.token: an older "
    "snapshot restored alone, another store's copied in, or compactions replaced it three "
    "times while this open read it), refused"
)


#: What :func:`refusal` says of a snapshot whose token file stamps another file with its
#: token: a copy of the store's ``.mdcg/`` (a ``git clone`` of a committed one, a ``cp -r``,
#: a restored backup), whose file identity a copy cannot keep.
ANOTHER_PLACE = "made for another copy of this folder (its file is not the one .mdcg/index.token stamps)"
#: ... and of one whose token file stamps nothing, or that has none (an earlier version's,
#: or a snapshot committed or copied without it: it may be a copy).
UNSTAMPED = "of unknown place (.mdcg/index.token stamps no file, or there is none: an earlier version's)"
#: The refusals an open looks into before it builds from the files (the snapshot is this
#: store's, but maybe of another place: :func:`md_cg.engine._placed`).
UNPLACED = (ANOTHER_PLACE, UNSTAMPED)
#: A token file line's stamp for the snapshot a compaction is about to write (its file
#: does not exist yet when the line is written).
COMING = "-"
#: A token's stamp: the (inode, mtime, size) of the snapshot file it was written for,
#: :data:`COMING`, or None (an earlier version's line: none).
Stamp = tuple[int, int, int] | str | None


def _line(token: str, stamp: Stamp) -> str:
    """A token file line: the token and its stamp (``<inode>:<mtime_ns>:<size>`` or
    :data:`COMING`; nothing for None)."""
    if stamp is None:
        return token
    return f"{token} {stamp if isinstance(stamp, str) else ':'.join(map(str, stamp))}"


def _stamp(word: str) -> Stamp:
    if word == COMING:
        return COMING
    parts = word.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def vouchers(root: str) -> dict[str, Stamp] | None:
    """What :data:`TOKEN_REL` says: each token it names (while a compaction writes: the
    snapshot in place and the coming one), with its stamp -- the identity (inode, mtime,
    size, as :func:`identity` gives it) of the snapshot file the token was written for,
    which a copy of the file cannot keep. None when there is no token file (an earlier
    version's store, a snapshot committed or copied alone, or a kill before its first
    compaction's token file: nothing vouches for any snapshot, :func:`refusal`). An
    unreadable one (a folder, a symlink) names none."""
    try:
        data, _ = fsops.read_file(root, TOKEN_REL, max_bytes=512)
    except FileNotFoundError:
        return None
    except (OSError, UnsafePathError):
        return {}
    out: dict[str, Stamp] = {}
    for line in data.decode("ascii", "replace").splitlines():
        words = line.split()
        if words:
            out[words[0]] = _stamp(words[1]) if len(words) > 1 else None
    return out


def refusal(
    token: str | None,
    ident: tuple[int, int, int],
    now: dict[str, Stamp] | None,
    seen: dict[str, Stamp] | None = None,
) -> str | None:
    """Why a snapshot holding ``token`` whose file has identity ``ident`` is not this
    store's, in this place: None when the token file ``now`` (or ``seen``, read before the
    snapshot was) names the token stamped with ``ident`` (or :data:`COMING`: a compaction
    stopped between its writes); :data:`NOT_THIS_STORES` when neither names the token,
    :data:`ANOTHER_PLACE` when they stamp another file with it, :data:`UNSTAMPED` when they
    stamp none -- and when there is no token file at all (``now`` and ``seen`` None: a
    store of an earlier version, a ``.mdcg/index.snapshot`` committed or copied without its
    token file, a kill between a first compaction's snapshot and its token file). Until
    session 39 no token file vouched for any snapshot: a clone of a repository where only
    the snapshot was committed, then ``.md`` files alone, trusted the stale snapshot and
    missed every memory committed after it (attack atk7 f5)."""
    if now is None and seen is None:
        return UNSTAMPED
    now = now or {}
    stamps = [d[token] for d in (now, seen or {}) if token is not None and token in d]
    if not stamps:
        return NOT_THIS_STORES
    if any(s in (COMING, ident) for s in stamps):
        return None
    return ANOTHER_PLACE if any(s is not None for s in stamps) else UNSTAMPED


def identity(root: str) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of the snapshot file, or None when there is none."""
    try:
        st = fsops.lstat(root, REL)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


#: Bytes read to find the header of a snapshot written by another process.
HEADER_READ = 1 << 20


def read_header(root: str) -> Header | None:
    """The header of the current snapshot (its first bytes only).

    None when there is no snapshot of this version, or its header cannot be read.
    """
    try:
        data, st = fsops.read_file(root, REL, head=HEADER_READ)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, UnsafePathError):
        return None
    nl = data.find(b"\n", len(MAGIC))
    if not data.startswith(MAGIC) or nl < 0:
        return None
    try:
        header = orjson.loads(data[len(MAGIC) : nl])
        if header.get("version") != VERSION or tuple(header.get("columns", ())) != COLUMNS:
            return None
        offsets = {str(k): int(v) for k, v in header["offsets"].items()}
        generation, token = header.get("generation"), header.get("token")
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        return None
    gen = generation if isinstance(generation, int) else None
    return Header(
        (st.st_ino, st.st_mtime_ns, st.st_size), offsets, gen, token if isinstance(token, str) else None
    )


def load(root: str) -> Snapshot | None:
    """The snapshot, or ``None`` when it is missing, damaged, foreign or unsafe."""
    return load_checked(root)[0]


#: Bytes read first at an open: the magic line and the header (else up to :data:`HEADER_READ`).
HEAD_READ = 1 << 16


class _File:
    """A snapshot file kept open for its lazy regions; closed when no region needs it any more."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._close = weakref.finalize(self, os.close, fd)

    def read(self, offset: int, view: memoryview) -> int:
        """Fill ``view`` from ``offset``; the bytes read (fewer at the end of the file)."""
        done = 0
        while done < len(view):
            got = os.preadv(self.fd, [view[done:]], offset + done)
            if got <= 0:
                break
            done += got
        return done


def _pread(fd: int, size: int, offset: int = 0) -> bytes:
    parts = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def load_checked(root: str) -> tuple[Snapshot | None, str | None]:
    """The snapshot and, when one exists but cannot be used, why (else None).

    Reads the eager part only (see the module docstring); the file stays
    open for the lazy regions. A snapshot of another format version is
    refused without a problem: it is replaced at the next compaction, as
    after any upgrade.
    """
    try:
        fd, st = fsops.open_read(root, REL)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except (IsADirectoryError, UnsafePathError) as exc:
        return None, f"not a regular file, refused ({exc})"
    except PermissionError as exc:  # derived: the index is rebuilt from the files instead
        return None, f"cannot be read ({exc.strerror}), refused"
    file = _File(fd)
    try:
        head = _pread(fd, HEAD_READ)
        if head.startswith(MAGIC) and head.find(b"\n", len(MAGIC)) < 0:
            head = _pread(fd, HEADER_READ)
        ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        with no_gc():
            snap = _decode(head, ident, st.st_size, lambda n: _pread(fd, n), file.read, root)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, orjson.JSONDecodeError) as exc:
        return None, f"damaged ({type(exc).__name__}: {exc})"[:300]
    if isinstance(snap, str):
        return None, None if snap == _OTHER_VERSION else snap
    return snap, None


_OTHER_VERSION = "written by another format version"


def decode(data: bytes, ident: tuple[int, int, int] = (0, 0, 0)) -> Snapshot | str:
    """Decode snapshot bytes; a string saying why when they are not a current, intact snapshot.

    The entries section is checked first (checksum, then every row's id,
    layer, bucket and path), then the eager parts of the rows and the text
    sections; the lazy regions are views of ``data``, checked chunk by chunk
    on first use like those of a file (a damaged one raises
    :class:`~md_cg.errors.SnapshotDamageError`: there are no files to rebuild from).
    """
    return _decode(data, ident, len(data), lambda n: data[:n], None, None)


def _decode(
    head: bytes,
    ident: tuple[int, int, int],
    size: int,
    prefix: Callable[[int], bytes],
    read: Callable[[int, memoryview], int] | None,
    root: str | None,
) -> Snapshot | str:
    """The snapshot of a file of ``size`` bytes starting with ``head``.

    ``prefix(n)`` gives its first ``n`` bytes (the eager part); ``read``
    fills a view from an offset of the file (None: ``prefix(size)`` is
    the whole file, and the lazy regions are views of it); ``root``: the
    store, whose files rebuild what a damaged lazy chunk held (None: none).
    """
    if not head.startswith(MAGIC):
        return "damaged (not a snapshot)"
    nl = head.index(b"\n", len(MAGIC))
    header = orjson.loads(head[len(MAGIC) : nl])
    if header.get("version") != VERSION or tuple(header.get("columns", ())) != COLUMNS:
        return _OTHER_VERSION
    lengths = [
        int(header[k]) for k in ("entries_len", "rows_len", "text_len", "rows_lazy_len", "text_lazy_len")
    ]
    if min(lengths) < 0:
        return "damaged (section lengths)"
    start = nl + 1
    entries_end = start + lengths[0]
    rows_end = entries_end + lengths[1]
    eager_end = rows_end + lengths[2]
    data = prefix(size if read is None else min(eager_end, size))
    view = memoryview(data)  # no copy of the (large) sections
    entries_blob = view[start:entries_end]
    if len(entries_blob) != lengths[0]:
        return "damaged (truncated)"
    if zlib.crc32(entries_blob) != header["crc32"]:
        return "damaged (checksum)"
    body = orjson.loads(entries_blob)
    table = _Table(body)
    problem = table.check()
    if problem is not None:
        return problem
    notes = _decode_notes(body.get(NOTES), table.domains)
    if isinstance(notes, str):
        return notes
    if nl + 1 + sum(lengths) != size or len(data) < eager_end:
        return "damaged (truncated)"
    damage: list[str] = []
    lazy_at = [eager_end, eager_end + lengths[3]]

    def region(k: int, section: str) -> Callable[[int, int, np.ndarray], codec.LazyRegion]:
        def make(length: int, chunk: int, crcs: np.ndarray) -> codec.LazyRegion:
            if length != lengths[3 + k]:
                raise ValueError(f"the {section} image does not match the header's lengths")
            at = lazy_at[k]
            if read is None:
                return codec.LazyRegion(
                    section, length, chunk, crcs, buf=view[at : at + length], damage=damage
                )
            return codec.LazyRegion(
                section, length, chunk, crcs, read=lambda off, into: read(at + off, into), damage=damage
            )

        return make

    table.attach_split(view[entries_end:rows_end], region(0, "rows"), root)
    rows = table.row_map()
    if len(rows) != len(table.ids):
        return "damaged (an id on two rows)"
    text = _text_of(view[rows_end:eager_end], region(1, "text"), table, rows)
    state = _state(body, table, text, damage)
    table.fill(state, rows)
    if len(state.text) != len(state.entries):
        return "damaged (the text index does not match the entries)"
    if root is not None:
        state.text.repair = _text_repair(root, state)
    return _snapshot(state, header, ident, _unheld(notes, state, table, rows), _copies(body.get(COPIES)))


def _text_of(
    data: memoryview,
    region: Callable[[int, int, np.ndarray], codec.LazyRegion],
    table: _Table,
    rows: dict[str, int],
) -> TextIndex:
    """The text index of a snapshot's eager text image ``data``, with each document's time of
    last change from the rows (the image holds none: :func:`md_cg.textindex.take_changed`)."""
    text = TextIndex.from_bytes(data, analyzer=query_terms, region=region, known=(table.ids, rows))
    take_changed(text, table.ids, rows, table.changed)
    return text


def _snapshot(
    state: IndexState,
    header: dict[str, Any],
    ident: tuple[int, int, int],
    notes: dict[str, Noted],
    copies: list[Any],
) -> Snapshot:
    """The snapshot of ``state`` with what its header says of it (offsets, generation,
    token), keeping ``notes`` and ``copies``."""
    offsets = {str(k): int(v) for k, v in header["offsets"].items()}
    generation, token = header.get("generation"), header.get("token")
    return Snapshot(
        state,
        offsets,
        ident,
        generation if isinstance(generation, int) else None,
        token if isinstance(token, str) else None,
        notes,
        copies,
    )


#: The entries section's key of the copies of duplicated ids as the last sync line naming
#: each logged them (:mod:`md_cg.copyfate`; session 42): a compaction folds those lines, and
#: without them a copy's fate not yet told to its scope's process was told to no process
#: opened after it. Optional: a snapshot without it (an earlier version's) is read as
#: before -- no copy logged --, and an earlier version's reader ignores it. Each item is
#: checked by :func:`md_cg.copyfate.copies_in`; a value that is no list, or one longer than
#: :data:`COPIES_MAX`, is left out whole (no fate is then told from it: nothing false).
COPIES = "copies"
#: At most this many :data:`COPIES` items are kept by a compaction (10,000 ids of two copies:
#: :func:`md_cg.copyfate.items`), and more are not read: checking one costs ~5-70 µs (a
#: loaded VM), so a crafted million would make every open take a minute.
COPIES_MAX = 20_000


def _copies(raw: object) -> list[Any]:
    """:data:`COPIES` of an entries section, undecoded ([] when absent or unusable)."""
    return raw if type(raw) is list and len(raw) <= COPIES_MAX else []


#: the entries section's key of :attr:`IndexState.copy_fields` (added in session 40,
#: optional: a snapshot without it is read as before, the copies read at a scoped open)
COPY_SCOPES = "copy_scopes"


def _copy_scopes(state: IndexState) -> dict[str, list[str | None]]:
    """The scope fields known of the losing copies in ``state.duplicates``, by path."""
    fields = state.copy_fields
    return {rel: list(fields[rel]) for rels in state.duplicates.values() for rel in rels if rel in fields}


def _copy_fields(raw: object) -> dict[str, CopyFields]:
    """:func:`_copy_scopes` read back; a value of another shape is left out (its copy is
    then read, as without the key)."""
    if not isinstance(raw, dict):
        return {}
    fields = {rel: CopyFields._make(v) for rel, v in raw.items() if type(v) is list and len(v) == 3}
    return {rel: f for rel, f in fields.items() if _FIELD_TYPES.issuperset(map(type, f))}


_FIELD_TYPES = frozenset({str, type(None)})


def _state(body: dict[str, Any], table: _Table, text: TextIndex, damage: list[str]) -> IndexState:
    """The state of a snapshot's entries section and text index (entries not filled in yet)."""
    return IndexState(
        text=text,
        bucket_codes=dict(body["bucket_codes"]),
        problems=dict(body["problems"]),
        duplicates={k: list(v) for k, v in body["duplicates"].items()},
        copy_fields=_copy_fields(body.get(COPY_SCOPES)),
        negative_terms={k: frozenset(v) for k, v in body.get("negative_terms", {}).items()},
        bucket_domains=table.domains,
        snapshot_damage=damage,
    )


def read_rest(state: IndexState) -> None:
    """Read and check every chunk of the snapshot file ``state`` was loaded from not read yet.

    The file is then closed (its space freed if it was replaced). For a
    process that follows a newer snapshot without reloading (it would
    otherwise keep the old file open). A damaged chunk is left to its
    first use (see the module docstring).
    """
    table = state.entries.source
    if isinstance(table, _Table) and table.region is not None:
        with contextlib.suppress(SnapshotDamageError):
            table.region.need_all()
    with contextlib.suppress(SnapshotDamageError):
        read_postings(state.text)


def close(state: IndexState) -> None:
    """Let go of the snapshot file ``state`` still reads from (its store is closed).

    What was not read yet then raises :class:`~md_cg.errors.StoreClosedError`.
    """
    table = state.entries.source
    regions = [table.region] if isinstance(table, _Table) and table.region is not None else []
    for region in [*regions, *lazy_regions(state.text)]:
        region.close()


def _text_repair(root: str, state: IndexState) -> Callable[[TextIndex], TextIndex]:
    """What rebuilds the text index of ``state`` from the files when a chunk of its postings is damaged.

    The new index holds the same documents with the same layer, bucket,
    prior and time of last change, each with the text of its file now (none
    when the file cannot be read: the file's problem is ``health()``'s to report).
    """
    ref = weakref.ref(state)

    def repair(old: TextIndex) -> TextIndex:
        new = TextIndex(
            k1=old.k1, b=old.b, analyzer=old.analyzer, coordination=old.coordination, feedback=old.feedback
        )
        live = ref()
        where = {} if live is None else {node_id: rel for node_id, rel, _, _ in live.entries.placed()}
        with no_gc():
            for doc_id in old.doc_ids():
                layer, bucket, prior = old.doc_meta(doc_id)
                changed = old.doc_changed(doc_id)
                text = ""
                rel = where.get(doc_id)
                if rel is not None:
                    try:
                        text = index.parse_file(root, rel).text or ""
                    except (MalformedNodeFileError, UnsafePathError, OSError):
                        pass
                new.add(doc_id, analyze(text), layer=layer, bucket=bucket, prior=prior, changed=changed)
            new.merge_segments()
        if live is not None:
            live.snapshot_damage.append("text section: the text index was rebuilt from the files")
        return new

    return repair


#: Ids that certainly pass :func:`md_cg.node.check_id` (plain ASCII, no dots,
#: shorter than its limits): most of them, checked by one match.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,99}")
#: The bytes of a plain name (:data:`_PLAIN_NAME`), and the newline that joins them.
_PLAIN_BYTES = np.zeros(256, dtype=bool)
_PLAIN_BYTES[list(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-\n")] = True


def _all_plain(joined: str, n: int) -> bool:
    """True when ``joined`` is ``n`` ids joined by newlines, each one a :data:`_PLAIN_NAME`.

    The same answer as matching every id, in a few vectorised passes over the
    bytes (a regular expression over the 25 MB of a million ids took 0.3 s).
    """
    if n == 0:
        return False
    try:
        raw = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        return False
    if not _PLAIN_BYTES[raw].all():
        return False
    breaks = np.flatnonzero(raw == ord("\n"))
    if len(breaks) != n - 1:  # an id holding a newline would count twice
        return False
    starts = np.concatenate(([0], breaks + 1))
    lengths = np.concatenate((breaks, [len(raw)])) - starts
    if lengths.min() < 1 or lengths.max() > 100:
        return False
    return not bool((raw[starts] == ord("-")).any())


_LAYER_NAMES = frozenset(LAYERS)


def _plainly_safe(node_id: object, layer: object, bucket: object) -> bool:
    """A shortcut of the row path check: True only when it would certainly pass."""
    if type(node_id) is not str or layer not in _LAYER_NAMES or _PLAIN_NAME.fullmatch(node_id) is None:
        return False
    if bucket is None:
        return True
    # Bucket names repeat (a few hundred at most): their full check is cached per name.
    return type(bucket) is str and layer == paths.BUCKETED_LAYER and paths.id_problem(bucket) is None


class _Table:
    """The rows of a snapshot, kept as columns: an :class:`Entry` is built per row on first access.

    ``check`` runs the path rules over every row before anything is used;
    ``fill`` sets up the state's maps (buckets, id keys, restricted ids,
    reverse edges) from the columns without building entries.
    """

    def __init__(self, body: dict[str, Any]) -> None:
        self.ids: list[str] = body["entries"]
        self.layers: str = body["layers"]
        self.buckets: list[int] = body["buckets"]
        self.bucket_names: list[str] = body["bucket_names"]
        self.archived = frozenset(body["archived"])
        #: the files' (mtime_ns, size) when indexed: int64 columns of the rows section
        self.mtimes = np.zeros(0, dtype=_INT_COLUMN)
        self.sizes = np.zeros(0, dtype=_INT_COLUMN)
        self._stats: tuple[list[int], list[int]] | None = None
        self._all_paths: list[str] | None = None
        self._titles: list[str] | None = None
        self._layer_names: list[str] | None = None
        #: each row's Entry.changed (float64 column of the rows section)
        self.changed = np.zeros(0, dtype=np.float64)
        self._changed: list[float] | None = None
        self._layer_codes: np.ndarray | None = None
        self.conflicts = frozenset(body["conflicts"])
        self.paths: dict[int, str] = {int(n): rel for n, rel in body["paths"]}
        self.restricted: list[int] = body["restricted"]
        self.edges: list[list[Any]] = body["edges"]
        self.earlier: list[list[Any]] = body["earlier"]
        self.domains: dict[str, str] = dict(body["bucket_domains"])
        self.ptr: list[int] = []
        self.blob = np.zeros(0, dtype=np.uint8)
        self.region: codec.LazyRegion | None = None
        #: the store whose files rebuild the entries of a damaged chunk (None: none)
        self.root: str | None = None
        self.joined = ""
        self.bucket_counts = np.zeros(0, dtype=np.int64)
        self._restricted_rows: frozenset[int] | None = None
        self._edges_by_row: dict[int, list[tuple[str, str]]] | None = None
        self._earlier_by_row: dict[int, list[str]] | None = None
        self._sorted: dict[str, list[int]] = {}
        #: every id is plain ASCII (:func:`_all_plain`)
        self.plain = False

    def check(self) -> str | None:
        """Why a row is unusable (the snapshot is then refused), else None."""
        ids, n = self.ids, len(self.ids)
        if not isinstance(ids, list) or any(
            not isinstance(column, list | str) or len(column) != n for column in (self.layers, self.buckets)
        ):
            return "damaged (a column does not have one value per row)"
        if not all(isinstance(name, str) and paths.id_problem(name) is None for name in self.bucket_names):
            return f"unsafe (a bucket among {self.bucket_names!r})"[:300]
        codes = np.array(self.buckets) if self.buckets else np.zeros(0, dtype=np.int64)
        high = len(self.bucket_names)
        if codes.dtype.kind != "i" or (codes.size and (codes.min() < -1 or codes.max() >= high)):
            return "damaged (a row's bucket code is out of range)"
        if type(self.layers) is not str or _LAYER_DIGITS.fullmatch(self.layers) is None:
            return "damaged (a row's layer code is out of range)"
        layers = np.frombuffer(self.layers.encode("ascii"), dtype=np.uint8)
        if bool(((codes >= 0) & (layers != ord(_LAYER_DIGIT[paths.BUCKETED_LAYER]))).any()):
            return "unsafe (a row with a bucket outside the knowledge layer)"
        self.bucket_counts = np.bincount(codes + 1, minlength=len(self.bucket_names) + 1)[1:]
        rows = [*self.archived, *self.conflicts, *self.paths, *self.restricted, *(e[0] for e in self.edges)]
        rows += [e[0] for e in self.earlier]
        if not _in_range(rows, 0, n):
            return "damaged (a row number out of range)"
        if not all(type(e[1]) is str for e in self.earlier):
            return "damaged (an earlier id that is not a string)"
        try:
            self.joined = "\n".join(ids)  # also checks that every id is a string
        except TypeError:
            return "damaged (an id that is not a string)"
        self.plain = _all_plain(self.joined, n)
        if not self.plain:
            for row, node_id in enumerate(ids):
                if _PLAIN_NAME.fullmatch(node_id) is None:
                    layer, bucket = self.layer_of(row), self.bucket_of(row)
                    if paths.rel_problem(paths.node_rel(layer, bucket, node_id)) is not None:
                        return f"unsafe (a row with id {node_id!r}, layer {layer!r}, bucket {bucket!r})"[:300]
        for rel in self.paths.values():
            problem = paths.rel_problem(rel)
            if problem is not None:
                return f"unsafe (a row with path {rel!r}: {problem})"[:300]
        return None

    def attach_split(
        self,
        eager: memoryview,
        region: Callable[[int, int, np.ndarray], codec.LazyRegion],
        root: str | None,
    ) -> None:
        """Take the rows image: the offsets, the files' mtimes and sizes, the rows' changed times
        (its eager part) and the concatenated JSON rows (its lazy region, made by
        ``region(length, chunk, crcs)``)."""
        head, arrays, where, crcs = codec.decode_split(eager)
        if len(arrays) != 5 or [w.index for w in where] != [1]:
            raise ValueError("the rows section does not have its arrays")
        ptr, _, mtimes, sizes, changed = arrays
        if ptr is None or mtimes is None or sizes is None or changed is None:
            raise ValueError("the rows section does not have its arrays")
        self.region = region(int(head["lazy_len"]), int(head["chunk"]), crcs)
        self.root = root
        self.attach((head, [ptr, self.region.array(where[0]), mtimes, sizes, changed]))

    def attach(self, rows: tuple[dict[str, Any], list[np.ndarray]]) -> None:
        """Take the rows section (offsets, the concatenated JSON rows, the files' mtimes and sizes,
        the rows' changed times)."""
        head, arrays = rows
        ptr, blob, mtimes, sizes, changed = arrays
        n = len(self.ids)
        if head["rows"] != n or len(ptr) != n + 1 or ptr.dtype != np.uint64:
            raise ValueError("the rows section does not match the entries")
        if len(mtimes) != n or len(sizes) != n or mtimes.dtype != _INT_COLUMN or sizes.dtype != _INT_COLUMN:
            raise ValueError("the mtime and size columns of the rows section do not match the entries")
        if len(changed) != n or changed.dtype != np.float64 or not bool(np.isfinite(changed).all()):
            raise ValueError("the changed-time column of the rows section does not match the entries")
        if len(ptr) > 1 and (int(ptr[-1]) != len(blob) or bool((np.diff(ptr.astype(np.int64)) <= 0).any())):
            raise ValueError("the row offsets of the rows section are not increasing within it")
        self.ptr = ptr.tolist()
        self.blob = blob
        self.mtimes, self.sizes, self.changed = mtimes, sizes, changed

    def raw(self, row: int) -> bytes:
        """The JSON of ``row`` (its chunk checked; SnapshotDamageError when it is damaged)."""
        a, z = self.ptr[row], self.ptr[row + 1]
        if self.region is not None:
            self.region.need_bytes(a, z)
        return self.blob[a:z].tobytes()

    def raw_span(self, first: int, stop: int) -> bytes:
        """The JSON of rows ``first`` to ``stop - 1``, joined (their chunks checked)."""
        a, z = self.ptr[first], self.ptr[stop]
        if self.region is not None:
            self.region.need_bytes(a, z)
        return self.blob[a:z].tobytes()

    def sorted_rows(self, kind: str) -> list[int]:
        """The rows that are archived / in conflict / restricted / have a path of their own /
        have edges (``kind``), ascending (made once)."""
        got = self._sorted.get(kind)
        if got is None:
            rows: Any = {
                "archived": self.archived,
                "conflicts": self.conflicts,
                "restricted": self.restricted,
                "paths": self.paths,
                "edges": {e[0] for e in self.edges},
                "earlier": {e[0] for e in self.earlier},
            }[kind]
            got = self._sorted[kind] = sorted(set(rows))
        return got

    def restricted_rows(self) -> frozenset[int]:
        if self._restricted_rows is None:
            self._restricted_rows = frozenset(self.restricted)
        return self._restricted_rows

    def edges_of(self, row: int) -> list[tuple[str, str]]:
        """The edges of ``row`` as stored ([] for most rows)."""
        if self._edges_by_row is None:
            self._edges_by_row = {}
            for n, target, etype in self.edges:
                self._edges_by_row.setdefault(n, []).append((target, etype))
        return self._edges_by_row.get(row, [])

    def earlier_of(self, row: int) -> list[str]:
        """The earlier ids (``renamed_from``) of ``row`` as stored ([] for most rows)."""
        if self._earlier_by_row is None:
            self._earlier_by_row = {}
            for n, old_id in self.earlier:
                self._earlier_by_row.setdefault(n, []).append(old_id)
        return self._earlier_by_row.get(row, [])

    def layer_of(self, row: int) -> str:
        return LAYERS[ord(self.layers[row]) - 48]

    def bucket_of(self, row: int) -> str | None:
        code = self.buckets[row]
        return None if code < 0 else self.bucket_names[code]

    def path_of(self, row: int) -> str:
        """The path of ``row``'s file (checked at load), without building its entry."""
        path = self.paths.get(row)
        if path is None:
            path = paths.node_rel(self.layer_of(row), self.bucket_of(row), self.ids[row])
            if row in self.archived:
                path = paths.archived_rel(path)
        return path

    def all_paths(self) -> list[str]:
        """:meth:`path_of` of every row, in row order, in one pass (a sync asks for all of them):
        the folder part comes from a table of (layer, bucket) codes, not from a call per row.
        Made once (read it, do not change it)."""
        if self._all_paths is not None:
            return self._all_paths
        n_buckets = len(self.bucket_names)
        folders = [
            paths.node_rel(layer, None if b < 0 else self.bucket_names[b], "")[: -len(paths.NODE_SUFFIX)]
            for layer in LAYERS
            for b in range(-1, n_buckets)
        ]
        layer = np.frombuffer(self.layers.encode("ascii"), dtype=np.uint8).astype(np.int64) - 48
        codes = (layer * (n_buckets + 1) + np.asarray(self.buckets, dtype=np.int64) + 1).tolist()
        suffix = paths.NODE_SUFFIX
        out = [folders[c] + node_id + suffix for c, node_id in zip(codes, self.ids, strict=True)]
        for row in self.archived:
            out[row] = paths.archived_rel(out[row])
        for row, rel in self.paths.items():
            out[row] = rel
        self._all_paths = out  # made once: the table never changes (its strings are by_path's keys)
        return out

    def brief_rows(self) -> list[tuple[str, str, str, str | None, bool]]:
        """``(id, path, layer, bucket, conflict)`` of every row, in row order, in one pass
        (:meth:`md_cg.index.Entries.brief`): no row's JSON is decoded."""
        names = self.bucket_names
        conflicts = self.conflicts
        return [
            (node_id, rel, LAYERS[ord(code) - 48], None if b < 0 else names[b], n in conflicts)
            for n, (node_id, rel, code, b) in enumerate(
                zip(self.ids, self.all_paths(), self.layers, self.buckets, strict=True)
            )
        ]

    def stat_of(self, row: int) -> tuple[int, int]:
        """``(mtime_ns, size)`` of ``row``'s file when it was indexed, without building its entry."""
        mtimes, sizes = self.stat_of_all()
        return mtimes[row], sizes[row]

    def stat_of_all(self) -> tuple[list[int], list[int]]:
        """The ``(mtime_ns, size)`` columns as lists (made once: numpy scalars are slow one by one)."""
        if self._stats is None:
            self._stats = self.mtimes.tolist(), self.sizes.tolist()
        return self._stats

    def layer_codes(self) -> np.ndarray:
        """Each row's layer as its index in :data:`~md_cg.node.LAYERS` (uint8, made once)."""
        if self._layer_codes is None:
            self._layer_codes = np.frombuffer(self.layers.encode("ascii"), dtype=np.uint8) - 48
        return self._layer_codes

    def layer_names(self) -> list[str]:
        """Each row's layer name, in row order (made once)."""
        if self._layer_names is None:
            self._layer_names = [LAYERS[code] for code in self.layer_codes().tolist()]
        return self._layer_names

    def changed_of_all(self) -> list[float]:
        """The rows' :attr:`~md_cg.index.Entry.changed` times as a list (made once)."""
        if self._changed is None:
            self._changed = self.changed.tolist()
        return self._changed

    def titles_of_all(self) -> list[str] | None:
        """Each row's title, in row order, from its JSON without building its entry (made
        once: organize looks for a title among all of them); None when a chunk is damaged
        or a row is not as the header says -- the entries, built, say why or are rebuilt
        from their files."""
        if self._titles is None:
            n, ptr = len(self.ids), self.ptr
            try:
                blob = self.raw_span(0, n) if n else b""
            except SnapshotDamageError:
                return None
            base, out, loads, width = (ptr[0] if n else 0), [], orjson.loads, len(LAZY)
            for row in range(n):
                try:
                    values = loads(blob[ptr[row] - base : ptr[row + 1] - base])
                except orjson.JSONDecodeError:
                    return None
                if type(values) is not list or len(values) != width or type(values[_TITLE]) is not str:
                    return None
                out.append(values[_TITLE])
            self._titles = out
        return self._titles

    def tags_of(self, row: int) -> tuple[str, ...]:
        """The tags of ``row``, decoded from its JSON without building its entry."""
        try:
            values = orjson.loads(self.raw(row))
        except (SnapshotDamageError, orjson.JSONDecodeError):
            return self.entry(row).tags  # the entry's checks and its rebuild from the file
        tags = values[_TAGS] if type(values) is list and len(values) == len(LAZY) else None
        if type(tags) is not list or not all(type(t) is str for t in tags):
            return self.entry(row).tags  # names the row
        return tuple(tags)

    def entry(self, row: int) -> Entry:
        """The entry of ``row`` (its JSON decoded now; rebuilt from its file when its chunk is damaged)."""
        try:
            raw = self.raw(row)
        except SnapshotDamageError as exc:
            return self._from_file(row, exc)
        try:
            values = orjson.loads(raw)
        except orjson.JSONDecodeError:
            values = None
        if type(values) is not list or len(values) != len(LAZY):
            # Only a snapshot crafted with valid checksums gets here (the rows image checks itself).
            raise ValueError(f"snapshot row {row} (id {self.ids[row]!r}) does not have the header's columns")
        try:
            for i in _SEQUENCES:
                values[i] = tuple(values[i])
            values[_EDGES] = tuple([tuple(edge) for edge in values[_EDGES]])
        except TypeError:
            message = f"snapshot row {row} (id {self.ids[row]!r}) holds a sequence field that is not an array"
            raise ValueError(message) from None
        node_id, layer, bucket = self.ids[row], self.layer_of(row), self.bucket_of(row)
        # Positional: Entry's fields are EAGER's first six, LAZY, EAGER's last two, domain
        # (checked at import).
        domain = None if bucket is None else self.domains.get(bucket)
        path, (mtime_ns, size) = self.path_of(row), self.stat_of(row)
        flags = (row in self.archived, row in self.conflicts)
        args = (node_id, path, layer, bucket, mtime_ns, size, *values, *flags, domain)
        return Entry(*args)

    def _from_file(self, row: int, damage: SnapshotDamageError) -> Entry:
        """The entry of ``row`` (whose chunk is damaged) from its file; ``damage`` is raised without one."""
        node_id, rel = self.ids[row], self.path_of(row)
        if self.root is None:
            raise damage
        try:
            entry = index.parse_file(self.root, rel).entry
        except (MalformedNodeFileError, UnsafePathError, OSError) as exc:
            raise SnapshotDamageError(
                damage.section,
                damage.chunk,
                f"{damage.reason}; the file of {node_id!r} cannot be read ({exc})",
            ) from None
        if entry.id != node_id:
            raise SnapshotDamageError(
                damage.section, damage.chunk, f"{damage.reason}; the file of {node_id!r} holds {entry.id!r}"
            )
        return entry

    def row_map(self) -> dict[str, int]:
        """id -> row (fewer items than rows when an id is on two rows)."""
        return dict(zip(self.ids, range(len(self.ids)), strict=True))

    def fill(self, state: IndexState, rows: dict[str, int]) -> None:
        """The state's entries (not materialised) and the maps derived from the columns.

        ``rows``: :meth:`row_map`, which the entries take as their own.
        """
        ids, names = self.ids, self.bucket_names
        state.entries = Entries(ids, self.entry, source=self, rows=rows)
        state.buckets = {names[code]: int(count) for code, count in enumerate(self.bucket_counts) if count}
        if self.plain and self.joined == self.joined.lower():
            state.keys = dict(zip(ids, ids, strict=True))  # plain lower-case ASCII ids are their own keys
        else:
            keys = state.keys
            for node_id in ids:
                key = paths.id_key(node_id)
                holder = keys.setdefault(key, node_id)
                if holder != node_id:
                    state.twin_keys.setdefault(key, {holder}).add(node_id)
        state.restricted = {ids[n] for n in self.restricted}
        reverse, superseded = state.reverse, state.superseded
        for n, target, etype in self.edges:
            reverse.setdefault(target, set()).add((ids[n], etype))
            if etype == "supersedes":
                superseded.add(target)
        earlier = state.earlier
        for n, old_id in self.earlier:
            earlier.setdefault(old_id, set()).add(ids[n])


def _in_range(values: list[Any], low: int, high: int) -> bool:
    """True when every value is an int with ``low <= value < high``."""
    return all(type(v) is int for v in values) and (not values or (low <= min(values) and max(values) < high))
