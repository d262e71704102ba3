"""The snapshot codec: the index saved to ``.mdcg/index.snapshot``.

::

    MDCG-SNAPSHOT 1\\n
    {header JSON}\\n
    <entries JSON><text index bytes>

The header holds :data:`VERSION`, the log offsets the snapshot covers, the
lengths of the two sections, a CRC-32 of the entries section (the text index
checks itself) and ``columns``: the names of the entry fields, in the order
each row lists them. Rows are read back **by name**, so a snapshot written
with other columns -- an older or newer version, or a field added to
:class:`~md_cg.index.Entry` since -- can never misalign: if the columns are
not exactly the current ones the snapshot is refused and the index is rebuilt
from the files (a snapshot is derived, never trusted blindly). Every row's
path must also pass the path rules (:func:`md_cg.paths.rel_problem`), or the
whole snapshot is refused.

Written only by maintenance under the exclusive store lock; a missing,
truncated, foreign or damaged snapshot means a rebuild *in memory* -- nothing
is written on the read path.

Imports :mod:`md_cg.index` and the bottom modules.
"""

from __future__ import annotations

import re
import time
import zlib
from dataclasses import dataclass, fields
from typing import Any

import orjson

from . import fsops, paths
from .errors import UnsafePathError
from .index import Entry, IndexState, canonical_path, no_gc
from .node import LAYERS
from .text import query_terms
from .textindex import TextIndex

MAGIC = b"MDCG-SNAPSHOT 1\n"
#: The format version. Bump it when the meaning of a section changes.
VERSION = 6
REL = paths.meta(paths.SNAPSHOT)
#: Entry fields in row order (the ``columns`` header); ``path`` is None when
#: it is the canonical path, ``domain`` is not stored (read from the bucket map).
COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Entry))[:-1]
assert tuple(f.name for f in fields(Entry))[-1] == "domain", "Entry.domain must stay its last field"
_PATH = COLUMNS.index("path")


@dataclass
class Snapshot:
    """A decoded snapshot: the index state, the log offsets it covers, its file identity."""

    state: IndexState
    offsets: dict[str, int]
    identity: tuple[int, int, int]
    #: 1 for the first snapshot of a folder, one more for each after it (None: unknown)
    generation: int | None = None


@dataclass(frozen=True)
class Header:
    """What a snapshot's header says: its file identity, the log offsets it covers, its generation."""

    identity: tuple[int, int, int]
    offsets: dict[str, int]
    generation: int | None


def _row(e: Entry) -> list[Any]:
    row = [getattr(e, name) for name in COLUMNS]
    if e.path == canonical_path(e):
        row[_PATH] = None
    return row


def encode(state: IndexState, offsets: dict[str, int], generation: int | None = None) -> bytes:
    """The snapshot bytes for ``state`` covering the log up to ``offsets``."""
    state.flush_text()
    entries_blob = orjson.dumps(
        {
            "entries": [_row(e) for e in state.entries.values()],
            "bucket_domains": state.bucket_domains,
            "bucket_codes": state.bucket_codes,
            "problems": state.problems,
            "duplicates": state.duplicates,
            "negative_terms": {k: sorted(v) for k, v in state.negative_terms.items()},
        }
    )
    text_blob = state.text.to_bytes()
    header = orjson.dumps(
        {
            "version": VERSION,
            "created": time.time(),
            "columns": COLUMNS,
            "offsets": offsets,
            "generation": generation,
            "entries_len": len(entries_blob),
            "text_len": len(text_blob),
            "crc32": zlib.crc32(entries_blob),
        }
    )
    return MAGIC + header + b"\n" + entries_blob + text_blob


def write(root: str, state: IndexState, offsets: dict[str, int]) -> Header:
    """Write the snapshot atomically (the caller holds the exclusive store lock).

    Its generation is one more than that of the snapshot it replaces (1 when
    there is none, or none of this version), read under the same lock.
    """
    before = read_header(root)
    generation = before.generation + 1 if before is not None and before.generation is not None else 1
    st = fsops.atomic_write(root, REL, encode(state, offsets, generation))
    return Header((st.st_ino, st.st_mtime_ns, st.st_size), dict(offsets), generation)


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
        generation = header.get("generation")
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        return None
    gen = generation if isinstance(generation, int) else None
    return Header((st.st_ino, st.st_mtime_ns, st.st_size), offsets, gen)


def load(root: str) -> Snapshot | None:
    """The snapshot, or ``None`` when it is missing, damaged, foreign or unsafe."""
    return load_checked(root)[0]


def load_checked(root: str) -> tuple[Snapshot | None, str | None]:
    """The snapshot and, when one exists but cannot be used, why (else None).

    A snapshot of another format version is refused without a problem: it
    is replaced at the next compaction, as after any upgrade.
    """
    try:
        data, st = fsops.read_file(root, REL)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except (IsADirectoryError, UnsafePathError) as exc:
        return None, f"not a regular file, refused ({exc})"
    try:
        with no_gc():
            snap = decode(data, (st.st_ino, st.st_mtime_ns, st.st_size))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, orjson.JSONDecodeError) as exc:
        return None, f"damaged ({type(exc).__name__}: {exc})"[:300]
    if isinstance(snap, str):
        return None, None if snap == _OTHER_VERSION else snap
    return snap, None


_OTHER_VERSION = "written by another format version"


def decode(data: bytes, ident: tuple[int, int, int] = (0, 0, 0)) -> Snapshot | str:
    """Decode snapshot bytes; a string saying why when they are not a current, intact snapshot."""
    if not data.startswith(MAGIC):
        return "damaged (not a snapshot)"
    nl = data.index(b"\n", len(MAGIC))
    header = orjson.loads(data[len(MAGIC) : nl])
    if header.get("version") != VERSION or tuple(header.get("columns", ())) != COLUMNS:
        return _OTHER_VERSION
    start = nl + 1
    view = memoryview(data)  # no copy of the (large) entries section
    entries_blob = view[start : start + header["entries_len"]]
    text_blob = data[start + header["entries_len"] :]
    if len(entries_blob) != header["entries_len"] or len(text_blob) != header["text_len"]:
        return "damaged (truncated)"
    if zlib.crc32(entries_blob) != header["crc32"]:
        return "damaged (checksum)"
    body = orjson.loads(entries_blob)
    state = IndexState(
        text=TextIndex.from_bytes(text_blob, analyzer=query_terms),
        bucket_codes=dict(body["bucket_codes"]),
        problems=dict(body["problems"]),
        duplicates={k: list(v) for k, v in body["duplicates"].items()},
        negative_terms={k: frozenset(v) for k, v in body.get("negative_terms", {}).items()},
    )
    domains = state.bucket_domains = dict(body["bucket_domains"])
    problem = _load_rows(state, body["entries"], domains)
    if problem is not None:
        return problem
    if len(state.text) != len(state.entries):
        return "damaged (the text index does not match the entries)"
    offsets = {str(k): int(v) for k, v in header["offsets"].items()}
    generation = header.get("generation")
    return Snapshot(state, offsets, ident, generation if isinstance(generation, int) else None)


#: Ids that certainly pass :func:`md_cg.node.check_id` (plain ASCII, no dots,
#: shorter than its limits): most of them, checked by one match.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,99}")
_LAYER_NAMES = frozenset(LAYERS)


def _plainly_safe(node_id: object, layer: object, bucket: object) -> bool:
    """A shortcut of the row path check: True only when it would certainly pass."""
    if type(node_id) is not str or layer not in _LAYER_NAMES or _PLAIN_NAME.fullmatch(node_id) is None:
        return False
    if bucket is None:
        return True
    # Bucket names repeat (a few hundred at most): their full check is cached per name.
    return type(bucket) is str and layer == paths.BUCKETED_LAYER and paths.id_problem(bucket) is None


def _load_rows(state: IndexState, rows: list[list[Any]], domains: dict[str, str]) -> str | None:
    """Fill ``state`` from the rows; why not, when a row is unusable (the snapshot is refused)."""
    entries, buckets, keys, reverse = state.entries, state.buckets, state.keys, state.reverse
    superseded = state.superseded
    width = len(COLUMNS)
    for row in rows:
        if not isinstance(row, list) or len(row) != width:
            return "damaged (a row does not have the header's columns)"
        # Positional: COLUMNS is exactly Entry's fields before `domain` (checked
        # at import), and the header's columns were compared with COLUMNS.
        e = Entry(*row)
        node_id, bucket = e.id, e.bucket
        if not _plainly_safe(node_id, e.layer, bucket) and (
            not isinstance(node_id, str) or paths.rel_problem(paths.node_rel(e.layer, bucket, node_id))
        ):
            return f"unsafe (a row with id {node_id!r}, layer {e.layer!r}, bucket {bucket!r})"[:300]
        if bucket is not None:
            e.domain = domains.get(bucket)
        if e.path is None:
            e.path = canonical_path(e)
        elif paths.rel_problem(e.path) is not None:
            return f"unsafe (a row with path {e.path!r}: {paths.rel_problem(e.path)})"[:300]
        entries[node_id] = e
        key = paths.id_key(node_id)
        holder = keys.setdefault(key, node_id)
        if holder != node_id:
            state.twin_keys.setdefault(key, {holder}).add(node_id)
        if bucket is not None:
            buckets[bucket] = buckets.get(bucket, 0) + 1
        if e.restricted:
            state.restricted.add(node_id)
        for target, etype in e.edges:  # inline IndexState.link: this loop runs per row at load
            reverse.setdefault(target, set()).add((node_id, etype))
            if etype == "supersedes":
                superseded.add(target)
    return None
