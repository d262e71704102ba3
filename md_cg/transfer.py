"""Memories in and out as JSON lines: :func:`export_nodes` and :func:`import_nodes`.

Export
    One JSON object per line and per node, in id order: the node's fields as
    its file's frontmatter holds them (times as ISO 8601 text, absent fields
    left out, custom keys kept) and its ``body`` last. A node with a custom
    key named as a key the record uses itself (``body``, ``archived``,
    ``mdcg:custom``) has all its custom keys, in order, under ``mdcg:custom``.
    Filters as ``list``: a layer, tags, a time window, archived and expired
    nodes on request. Reads the node files and writes none of them.

Import
    Reads JSON lines (one object per line; blank lines are skipped), or one
    JSON document: an array of objects, or an object holding one under
    ``results`` or ``memories`` (what memory services' exports and APIs
    return). Each object is a node: the fields of a node file, with the text
    under ``body`` -- or ``text``, ``content`` or ``memory``, the names other
    memory tools use. A record without a ``layer`` takes the ``layer``
    argument, a record without ``created_at`` the time of the import (or,
    when its id is stored already, the stored node's), and ``tags`` are
    added to every record's. Keys the node model does not know are kept in
    the node's frontmatter, and so are those of a ``mdcg:custom`` object;
    ``"archived": true`` writes the memory straight into ``archive/`` (never live,
    not even for a moment; another value of ``archived`` is a custom key); such a
    record whose id is a live memory of the store is kept, the memory left live (an
    import never archives a live memory, ``overwrite`` or not). The ``tags`` given
    are checked as ``add`` checks tags, before the source is read.

    A record without an ``id`` gets :func:`md_cg.node.content_id` of its
    text: the same text always gives the same id. So an import can be run
    again (after a crash, or on a file that grew) and stores every memory
    once: a record whose node file would hold exactly the bytes it holds now
    is ``unchanged`` and not written.

    Every record is checked before anything is written; a bad record (not
    JSON, not an object, no text -- or an empty one without an id: a record
    with an id keeps its body as it is --, a field of the wrong type, an id given to
    two different records) fails the whole import with an error that names
    the source, the line and the field -- or, with ``skip_bad=True``, is
    reported and left out. A record whose id is in the store with other
    content is refused unless ``overwrite=True`` replaces it; one held by an
    archived or expired node is always refused. A record whose id was forgotten (or
    swept) or renamed away in this store, as its audit log tells, is not written
    unless ``overwrite=True`` (a backup older than a forget does not bring the memory
    back, nor one older than a rename a second copy under the old id): it is listed in
    ``departed``, in the dry run too. Records are written
    ``batch`` at a time, each batch one commit (all or nothing, even across
    a crash); a batch that meets ids another process stored meanwhile is
    planned again (the same content is then ``unchanged``). A record whose
    file in the store cannot be read as a memory (broken by hand, before or
    during the import) is not written over: it is listed in ``kept`` and the
    rest imported, as a migration keeps it. ``dry_run=True`` reports what
    would happen and writes nothing: it sees the files edited by hand as the
    import will (in a read-only view of its own). Times are stored as given
    (``add_many(stamp=False)``), and each node gets its retention decision as
    a migrated node does.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from copy import copy as shallow_copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson

from . import audit, editing, fsops, index, layout, nodefile, paths, retention, visibility
from .engine import foreign_file, taken_outside_scope
from .errors import (
    DuplicateIdError,
    ImportSourceError,
    InvalidArgumentError,
    InvalidNodeError,
    MalformedNodeFileError,
    MdcgError,
    NodeNotFoundError,
    UnsafeIdError,
    UnsafePathError,
)
from .index import Entry
from .merge import has_conflict_markers
from .node import (
    FIELD_ORDER,
    INT_END,
    INT_MIN,
    MAX_ID_CHARS,
    Node,
    build_node,
    check_layer,
    check_new_id,
    content_id,
    instant_problem,
    unusable,
    windows_device_name,
)
from .script import short_repr, twin_labels
from .store import MdCG
from .views import holds_as_written

__all__ = [
    "BODY_KEYS",
    "BadRecord",
    "ExportReport",
    "ImportReport",
    "export_nodes",
    "import_nodes",
    "read_records",
]

#: Where a record's text may be, first found wins (``memory``: mem0's name for it).
BODY_KEYS = ("body", "text", "content", "memory")
#: mem0's labels and the tag each becomes (``user_id: u1`` -> ``user:u1``): a record with
#: its text under ``memory`` (mem0's shape) gets these tags, as the mem0 tool aliases
#: (:mod:`md_cg.integrations.aliases`) store and filter them; the keys are kept too.
LABEL_TAGS = {"user_id": "user", "agent_id": "agent", "app_id": "app", "run_id": "run"}
#: Keys of a JSON document that hold its list of records.
LIST_KEYS = ("results", "memories")
#: Records per commit.
DEFAULT_BATCH = 500
#: Bad records an error message lists (the report holds them all).
SHOWN = 10

ProgressFn = Callable[[int, int], Any]


class BadRecord(NamedTuple):
    """A record that did not become a node: where it is (``line N`` or ``record N``),
    its id when it has one, and why."""

    where: str
    node_id: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """``{where, node_id, reason}`` as ``--json`` lists it. The reason quotes a value
        cut short already; an id longer than any id may be (a bad record's: a record may
        give a megabyte of id) is cut to :data:`md_cg.node.MAX_ID_CHARS` characters and
        ``...`` too, so a listing of every bad record stays as long as its records."""
        node_id = self.node_id
        if node_id is not None and len(node_id) > MAX_ID_CHARS:
            node_id = node_id[:MAX_ID_CHARS] + "..."
        return {"where": self.where, "node_id": node_id, "reason": self.reason}


@dataclass
class ImportReport:
    """What an import (or its dry run) found and did.

    ``records``: the records read; ``created`` / ``updated`` (``moved`` of them
    changed folder) / ``unchanged`` (the file already holds exactly these
    bytes: not written); ``repeated``: records identical to an earlier one of
    the source (stored once); ``bad``: the records left out (``skip_bad``);
    ``archived``: the ids whose record says ``"archived": true`` (an export with
    archived memories), written straight into ``archive/``; ``kept``: the
    records not written because the store's file of their id cannot be read as a
    memory (not written over, as a migration keeps it; the rest is imported), or their
    folder cannot be written through (a symlink), or -- an archived record -- their id
    is a live memory of the store (left live);
    ``warned``: records imported as they are that hold a time outside the years
    1-9999 (:func:`md_cg.node.instant_problem`: most often milliseconds given for
    seconds, as an earlier version or ``add_many`` wrote into a file: an export of
    such a store imports again), each also warned of (``warnings.warn``);
    ``departed``: the records not written because their id was forgotten or renamed
    away in this store (``overwrite`` brings them back).
    """

    source: str
    dry_run: bool = False
    records: int = 0
    created: int = 0
    updated: int = 0
    moved: int = 0
    unchanged: int = 0
    repeated: int = 0
    bad: list[BadRecord] = field(default_factory=list)
    #: records not written because the store's file of their id cannot be read as a
    #: memory (broken by hand, say): it is not written over; fixed, the next run imports them
    kept: list[BadRecord] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    warned: list[BadRecord] = field(default_factory=list)
    #: records not written because their id was forgotten (or swept) or renamed away in
    #: this store, as this clone's audit log tells: an old backup does not bring back what
    #: was forgotten on purpose, nor a second copy of a renamed memory (``overwrite`` does)
    departed: list[BadRecord] = field(default_factory=list)
    #: the ids written (to be written, on a dry run) as temporary memories: they expire
    #: after the store's TTL (7 days) and ``mdcg sweep`` deletes them; ``temporary_why``:
    #: how many for each cause (a one-off marker, the extractor's one_off, the record's own
    #: tier or expiry), so a bulk import does not make memories temporary silently
    temporary: list[str] = field(default_factory=list)
    temporary_why: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "archived": list(self.archived),
            "source": self.source,
            "dry_run": self.dry_run,
            "records": self.records,
            "created": self.created,
            "updated": self.updated,
            "moved": self.moved,
            "unchanged": self.unchanged,
            "repeated": self.repeated,
            "bad": [r.to_dict() for r in self.bad],
            "kept": [r.to_dict() for r in self.kept],
            "warned": [r.to_dict() for r in self.warned],
            "departed": [r.to_dict() for r in self.departed],
            "temporary": list(self.temporary),
            "temporary_why": dict(self.temporary_why),
            "seconds": round(self.seconds, 3),
        }

    def summary(self) -> str:
        """One line: ``memories.jsonl: 120 record(s): 118 new, 0 changed, 2 unchanged (0.41 s)``."""
        parts = [f"{self.created} new", f"{self.updated} changed", f"{self.unchanged} unchanged"]
        if self.moved:
            parts[1] += f" ({self.moved} moved)"
        if self.repeated:
            parts.append(f"{self.repeated} repeated in the source")
        if self.bad:
            parts.append(f"{len(self.bad)} bad left out")
        live = sum(1 for kept in self.kept if _LIVE_HERE in kept.reason)
        if len(self.kept) > live:
            parts.append(f"{len(self.kept) - live} kept (the store's file or folder cannot be used)")
        if live:
            parts.append(f"{live} archived in the source but live here (kept live)")
        if self.departed:
            parts.append(f"{len(self.departed)} forgotten or renamed here (not brought back)")
        if self.warned:
            parts.append(f"{len(self.warned)} with a time outside the years 1-9999 (warned)")
        if self.temporary:
            parts.append(temporary_text(len(self.temporary), self.temporary_why))
        dry = "; dry run: nothing was written" if self.dry_run else ""
        return f"{self.source}: {self.records} record(s): {', '.join(parts)} ({self.seconds:.2f} s{dry})"


@dataclass
class ExportReport:
    """What an export wrote: how many nodes, and where (``-``: the given stream)."""

    count: int
    target: str
    ids: list[str] = field(default_factory=list)
    #: (path or id, reason) of memories left out because their file could not be used:
    #: every file of the layers exported that no index entry holds, and any that failed
    #: to read during the export
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    #: (path, reason) of the files ``unreadable`` would name from the folders when a tag
    #: or time filter is set: what such a file holds cannot be told, so its memory may
    #: match the filter or not -- it may be left out
    maybe_left_out: list[tuple[str, str]] = field(default_factory=list)
    #: ids of the memories exported whose body holds git conflict markers (a merge left
    #: them unresolved): :func:`import_nodes` refuses such a record until it is resolved
    conflicted: list[str] = field(default_factory=list)


# -- reading records ---------------------------------------------------------------------


def _read_source(source: str | os.PathLike[str] | IO[bytes]) -> tuple[str, bytes]:
    """(name, bytes) of ``source``: a path, ``"-"`` (stdin) or a binary stream."""
    if isinstance(source, (str, os.PathLike)) and str(source) != "-":
        path = Path(source)
        try:
            return str(path), path.read_bytes()
        except OSError as exc:
            raise ImportSourceError(f"{path}: cannot read it: {exc.strerror or exc}") from exc
    stream = sys.stdin.buffer if not isinstance(source, io.IOBase) and str(source) == "-" else source
    assert not isinstance(stream, (str, os.PathLike))
    return "<stdin>" if stream is sys.stdin.buffer else str(
        getattr(stream, "name", "<stream>")
    ), stream.read()


def read_records(data: bytes) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` of every record of ``data``: JSON lines, or one JSON document.

    A document is an array of records or an object holding one under
    ``results`` or ``memories``; any other object is one record. ``where`` is
    ``line N`` for JSON lines, ``record N`` (1-based) for a document's array.
    A line that is not JSON gives ``(where, ImportSourceError)``; so does a
    document that is not (one error, where its JSON breaks): data that starts
    with ``[``, or with a line holding only ``{``, is a document, anything
    else JSON lines.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        return
    try:
        whole = _loads(data)
    except orjson.JSONDecodeError as exc:
        head = data.lstrip()
        if head.startswith(b"[") or head.split(b"\n", 1)[0].strip() == b"{":  # an array, a spread object
            bad = _not_utf8(data)
            if bad is not None:
                yield f"line {bad[0]}", ImportSourceError(bad[1])
                return
            yield f"line {exc.lineno}", ImportSourceError(f"not JSON: {exc.msg} (column {exc.colno})")
            return
        yield from _json_lines(data)
        return
    if isinstance(whole, dict):
        listed = [whole[k] for k in LIST_KEYS if isinstance(whole.get(k), list)]
        whole = listed[0] if len(listed) == 1 else [whole]
    if not isinstance(whole, list):
        whole = [whole]
    for i, value in enumerate(whole, 1):
        yield f"record {i}", value


#: A run of digits as long as an integer beyond 64 bits needs (or a long one in a string).
_LONG_DIGITS = re.compile(rb"\d{19}")


def _loads(raw: bytes) -> Any:
    """``raw`` as JSON. orjson reads an integer beyond 64 bits as a float (silently
    another value): where one may be, the standard reader's exact integers are taken,
    so that the node model refuses it, naming the key."""
    value = orjson.loads(raw)
    if _LONG_DIGITS.search(raw):
        value = json.loads(raw)
    return value


def _json_lines(data: bytes) -> Iterator[tuple[str, Any]]:
    for n, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            try:
                yield f"line {n}", _loads(line)
            except orjson.JSONDecodeError as exc:
                bad = _not_utf8(line)
                why = bad[1] if bad is not None else f"not JSON: {exc.msg} (column {exc.colno})"
                yield f"line {n}", ImportSourceError(why)


def _not_utf8(data: bytes) -> tuple[int, str] | None:
    """(line number, why) of the first bytes of ``data`` that are not UTF-8, or None."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        return data.count(b"\n", 0, exc.start) + 1, (
            f"not valid UTF-8 at byte {exc.start - start} of the line ({data[exc.start : exc.start + 1]!r}); "
            "save the file as UTF-8"
        )
    return None


def _refuse_big_integers(record: dict[str, Any]) -> None:
    """Raise naming the field path (``created_at``, ``k.x[1]``, ``mdcg:custom.body``) of
    the first integer in ``record`` that a node file cannot store (beyond 64 bits): the
    node model would make a time or a score of it a float, or name the wrong field."""
    for key, top in record.items():
        stack: list[tuple[str, Any]] = [(str(key), top)]
        while stack:
            path, item = stack.pop()
            if isinstance(item, dict):
                stack += [(f"{path}.{k}", v) for k, v in reversed(item.items())]
            elif isinstance(item, list):
                stack += [(f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item)))]
            elif type(item) is int and not INT_MIN <= item < INT_END:
                raise InvalidNodeError(
                    f"field {path!r} holds the integer {item}, outside the range a node file stores "
                    "(-2**63 to 2**64 - 1)",
                    field=str(key),
                )


#: List fields where one string is a list of one (as the node file reader takes them).
_LISTS_OF_TEXT = ("tags", "non_applicable_conditions")


def _record_node(
    value: Any, layer: str, tags: Sequence[str], now: float, long_digits: bool = True
) -> tuple[Node, bytes]:
    """The node of one record and its file's bytes; raises InvalidNodeError or
    ImportSourceError naming the problem (the record's own name for its text).
    ``long_digits=False``: the source has no run of digits an integer beyond 64 bits
    needs (its integers are not looked for)."""
    if isinstance(value, ImportSourceError):
        raise value
    if not isinstance(value, dict):
        raise ImportSourceError(f"expected a JSON object, got {type(value).__name__}")
    if long_digits:
        _refuse_big_integers(value)
    meta = dict(value)
    if meta.get(ARCHIVED_KEY) is True:
        del meta[ARCHIVED_KEY]  # a state of the store, not a field: see import_nodes
    custom = meta.pop(CUSTOM_KEY, None)
    key = next((k for k in BODY_KEYS if k in meta), None)
    if key is None:
        raise ImportSourceError(f"no text: give it as {', '.join(repr(k) for k in BODY_KEYS)}")
    body = meta.pop(key)
    if custom is not None:
        _add_custom(meta, custom)
    if not isinstance(body, str):
        raise InvalidNodeError(f"field {key!r} must be text (got {type(body).__name__})", field=key)
    if not body.strip() and meta.get("id") is None:
        # its id would be made from no text; a record with an id (an export of a store
        # holding an empty memory, as a migration may) is carried as it is
        raise InvalidNodeError(
            f"field {key!r} is empty and the record has no id: give one or some text", field=key
        )
    if meta.get("layer") is None:
        meta["layer"] = layer
    for name in _LISTS_OF_TEXT:
        if isinstance(meta.get(name), str):
            meta[name] = [meta[name]]
    if key == "memory":  # mem0's record: its labels as the mem0 aliases filter on them
        labels = [
            f"{tag}:{meta[k]}" for k, tag in LABEL_TAGS.items() if isinstance(meta.get(k), str) and meta[k]
        ]
        tags = [*labels, *tags]
    if tags:
        given = meta.get("tags")
        if given is not None and not isinstance(given, list):
            raise InvalidNodeError(f"field 'tags' must be a list (got {type(given).__name__})", field="tags")
        meta["tags"] = list(dict.fromkeys([*(given or []), *tags]))
    if meta.get("id") is None:
        meta["id"] = content_id(body)
    if meta.get("created_at") is None:
        meta["created_at"] = now
    node, problems = build_node(meta, body)
    if node.retention_tier is None and node.expires_at is not None and not node.retention_reason:
        # the write makes it temp (retention.imply_tier): say why, not "the caller asked"
        node.retention_reason = IMPORTED_EXPIRY
    try:
        if problems:
            raise problems[0]
        return node, nodefile.dump_bytes(node)  # too large, or a lone surrogate
    except InvalidNodeError as exc:
        if exc.field != "body" or key == "body":
            raise
        text = str(exc).replace("field 'body'", f"field {key!r}")
        raise InvalidNodeError(text, field=key, node_id=exc.node_id) from exc


#: The ``retention_reason`` of a record imported with an ``expires_at`` and no tier or
#: reason: it is stored temporary until then (a file holding such an expiry is read so).
IMPORTED_EXPIRY = "imported with an expiry and no tier: temporary until its expires_at"
#: The key an exported record of an archived memory carries (``export --archived``):
#: ``true`` there is the store's state; any other value is a custom key of the memory.
ARCHIVED_KEY = "archived"
#: The key of an exported record that holds the memory's custom frontmatter keys, in
#: their order, when one of them is named as a key the record uses itself
#: (:data:`RECORD_KEYS`): ``body`` or ``archived`` from a source's columns, say.
CUSTOM_KEY = "mdcg:custom"
#: Keys an exported record uses for itself, beside the node's fields (``text``,
#: ``content`` and ``memory`` are the text only in a record without ``body``).
RECORD_KEYS = frozenset({"body", ARCHIVED_KEY, CUSTOM_KEY})


def _add_custom(meta: dict[str, Any], custom: Any) -> None:
    """Put the custom keys of a record's :data:`CUSTOM_KEY` object into ``meta``."""
    if not isinstance(custom, dict):
        raise InvalidNodeError(
            f"field {CUSTOM_KEY!r} must be an object of custom keys (got {type(custom).__name__})",
            field=CUSTOM_KEY,
        )
    for name, item in custom.items():
        if name in FIELD_ORDER or name in meta:
            given = "a field of the node" if name in FIELD_ORDER else "given beside it too"
            raise InvalidNodeError(f"field {CUSTOM_KEY!r} holds {name!r}, which is {given}", field=CUSTOM_KEY)
        meta[name] = item


def _parse(
    data: bytes, layer: str, tags: Sequence[str], now: float, report: ImportReport
) -> tuple[list[tuple[str, Node]], frozenset[str]]:
    """The good records' nodes (a repeat of an identical record once), and the ids of
    those that had no ``created_at`` (stamped ``now``); bad records into ``report.bad``."""
    nodes: list[tuple[str, Node]] = []
    stamped: set[str] = set()
    first: dict[str, tuple[str, bytes]] = {}
    long_digits = _LONG_DIGITS.search(data) is not None
    for where, value in read_records(data):
        report.records += 1
        given = value.get("id") if isinstance(value, dict) and isinstance(value.get("id"), str) else None
        try:
            node, text = _record_node(value, layer, tags, now, long_digits)
        except (MdcgError, UnicodeError) as exc:
            report.bad.append(BadRecord(where, given, _reason(exc)))
            continue
        seen = first.get(node.id)
        if seen is None:
            first[node.id] = (where, text)
            nodes.append((where, node))
            _warn_late(report, where, node)
            if isinstance(value, dict) and value.get(ARCHIVED_KEY) is True:
                report.archived.append(node.id)
            if not (isinstance(value, dict) and value.get("created_at") is not None):
                stamped.add(node.id)
        elif seen[1] == text:
            report.repeated += 1
        else:
            report.bad.append(
                BadRecord(where, node.id, f"id {node.id!r} is also on {seen[0]}, with other content")
            )
    return nodes, frozenset(stamped)


def _warn_late(report: ImportReport, where: str, node: Node) -> None:
    """Warn of a record holding a time outside the years 1-9999 (milliseconds for
    seconds, most often), naming its line and field; it is imported as it is, as a
    file holding one is read (an export of a store an earlier version wrote imports
    again), while ``add`` and ``update`` refuse such a time as new input."""
    late = instant_problem(node)
    if late is None:
        return
    report.warned.append(BadRecord(where, node.id, _reason(late)))
    if len(report.warned) <= SHOWN:
        warnings.warn(
            f"{report.source} {where}: node {node.id!r}: {_reason(late)}; imported as it is "
            "(update the field to correct it)",
            stacklevel=4,
        )
    elif len(report.warned) == SHOWN + 1:
        warnings.warn(
            f"{report.source}: more records hold such a time: see the report's 'warned'", stacklevel=4
        )


def _reason(exc: BaseException) -> str:
    """The error's message without the ``node 'x': `` prefix the node model puts on it
    (the record's place is named instead; a generated id would mean nothing)."""
    text = str(exc)
    node_id = getattr(exc, "node_id", None)
    prefix = f"node {node_id!r}: " if node_id is not None else ""
    return text[len(prefix) :] if prefix and text.startswith(prefix) else text


def _bad_error(
    name: str, bad: Sequence[BadRecord], what: str, done: str = "nothing was imported"
) -> ImportSourceError:
    shown = "\n".join(f"  {name}: {b}" for b in bad[:SHOWN])
    more = f"\n  ... and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    return ImportSourceError(f"{name}: {len(bad)} {what}; {done}\n{shown}{more}", bad)


# -- import ---------------------------------------------------------------------------------


def import_nodes(
    store: MdCG,
    source: str | os.PathLike[str] | IO[bytes],
    *,
    layer: str = "knowledge",
    tags: Sequence[str] = (),
    overwrite: bool = False,
    skip_bad: bool = False,
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
    durable: bool | None = None,
    progress: ProgressFn | None = None,
) -> ImportReport:
    """Import the records of ``source`` (a path, ``"-"`` for stdin, or a binary stream)
    into ``store``; see the module docstring. ``progress(done, total)`` is called after
    each batch. Raises :class:`ImportSourceError` naming the source (and each bad record's
    line and field) when nothing can be imported."""
    started = time.perf_counter()
    check_layer(layer)
    added = checked_tags(tags)
    if batch < 1:
        raise ValueError("batch must be at least 1")
    name, data = _read_source(source)
    report = ImportReport(name, dry_run=dry_run)
    nodes, stamped = _parse(data, layer, added, time.time(), report)
    writer = _Writer(store, name, overwrite, stamped, durable, frozenset(report.archived))
    if dry_run:
        # files edited by hand are seen as they are, as the run will (a read-only view: writes nothing)
        with _read_only_view(store) as view:
            nodes = _creatable(view, nodes, report)
            _refuse_bad(report, skip_bad)
            plan = _planned(replace(writer, store=view), nodes, report)
            plan = _dry_refusals(view, plan, writer.archived)
            _note_kept(report, plan)
    else:
        nodes = _creatable(store, nodes, report)
        _refuse_bad(report, skip_bad)  # before anything is written
        # Clean up after an interrupted writer (a killed import): its temp files, index
        # drift; files edited by hand are then seen as they are.
        store.sync()
        plan = writer.write(_planned(writer, nodes, report), batch, progress)
        _note_kept(report, plan)
    note_temporary(report, store, plan, decided=not dry_run)
    for _where, _node, status in plan:
        report.unchanged += status == "unchanged"
        report.created += status == "created"
        report.updated += status in ("updated", "moved")
        report.moved += status == "moved"
    report.seconds = time.perf_counter() - started
    return report


#: A reason :meth:`md_cg.retention.Retention.decide` writes for a term rule: its marker and rule.
_TERM_REASON = re.compile(r"the one-off marker '(.*?)' \((\w+)\)")
#: How many causes of temporary memories an import's summary line names.
_WHY_SHOWN = 3


def note_temporary(report: ImportReport, store: MdCG, plan: Planned, *, decided: bool) -> None:
    """The ids of ``plan`` written as temporary memories, and why, into ``report``
    (``temporary``, ``temporary_why``). ``decided``: the write decided the nodes (it sets
    their tier and reason); else (a dry run) each is decided on a copy as the write would.
    Before session 39 a bulk import made memories temporary silently: 27 of 54k (an
    encyclopedia chunk holding 日本周刊, a conversation turn saying "yesterday")."""
    now = time.time()
    why: dict[str, int] = {}
    for _where, node, status in plan:
        if status not in ("created", "updated", "moved"):
            continue
        if not decided:
            node = shallow_copy(node)
            retention.imply_tier(node)
            store._ret.decide(node, now=now, kept=None, explicit=node.retention_tier is not None)
        if node.retention_tier != "temp":
            continue
        report.temporary.append(node.id)
        cause = _cause(node.retention_reason or "")
        why[cause] = why.get(cause, 0) + 1
    report.temporary_why = dict(sorted(why.items(), key=lambda kv: (-kv[1], kv[0])))


def _cause(reason: str) -> str:
    """A temporary memory's cause, briefly, from its ``retention_reason``."""
    found = _TERM_REASON.match(reason)
    if found:
        return f"one-off marker {found.group(1)!r}"
    if reason.startswith("the extractor marked it one_off"):
        return "temporal one_off"
    return "the record's tier or expiry"


def temporary_text(count: int, why: dict[str, int]) -> str:
    """The summary's part on temporary memories: how many, their causes, how to keep one."""
    shown = ", ".join(f"{cause} {n}" for cause, n in list(why.items())[:_WHY_SHOWN])
    more = f", {len(why) - _WHY_SHOWN} other cause(s)" if len(why) > _WHY_SHOWN else ""
    return (
        f"{count} temporary, expiring after the TTL ({shown}{more}; `mdcg update ID --tier long` keeps one)"
    )


def checked_tags(tags: Any, name: str = "tags") -> tuple[str, ...]:
    """The tags an import adds to every record, refused (InvalidArgumentError naming
    ``name``: ``tags``, or the CLI's ``--tag``) before anything is read or written, by the
    rule and with the words of ``add``'s tags (:func:`md_cg.node.unusable`): they are new
    input, not a source carried as it is. A blank, invisible or control-character tag was
    stored on every record, and a str taken as its letters (``"ops"`` -> o, p, s); a
    non-str tag was blamed on the first record (review rE). A str is refused, as ``add``
    refuses one."""
    given = list(tags) if isinstance(tags, Iterable) and not isinstance(tags, (str, bytes)) else None
    if given is None or not all(isinstance(tag, str) for tag in given):
        raise InvalidArgumentError(
            f"{name} must be a list of strings (got {short_repr(tags)})", name=name, value=tags
        )
    problem = unusable(Node(id="tags", body="tags", tags=given), ("tags",))
    if problem is not None:
        why = _reason(problem).removeprefix("field 'tags' ")
        raise InvalidArgumentError(f"{name} {why}", name=name, value=tags)
    return tuple(given)


def _note_kept(report: ImportReport, plan: Planned) -> None:
    """The records of ``plan`` not written (kept) into ``report.kept``, in source order;
    ``report.ids``: the others."""
    report.kept += [BadRecord(w, n.id, s.removeprefix(_KEPT)) for w, n, s in plan if s.startswith(_KEPT)]
    report.kept.sort(key=lambda kept: int(kept.where.rpartition(" ")[2]))
    report.departed = [BadRecord(w, n.id, s.removeprefix(_GONE)) for w, n, s in plan if s.startswith(_GONE)]
    report.ids = [n.id for _w, n, status in plan if not _left(status)]


@contextmanager
def _read_only_view(store: MdCG) -> Iterator[MdCG]:
    """A read-only handle on ``store`` (itself when it is one; else another, of the same
    scope) that has picked up the files changed by hand since they were indexed."""
    if store.read_only:
        store.sync_if_changed(min_interval=0)  # a read-only handle: its own view only
        yield store
        return
    view = MdCG(store.root, read_only=True, create=False, scope=store.scope, ttl_seconds=store._ttl_seconds)
    try:
        view.sync_if_changed(min_interval=0)
        yield view
    finally:
        view.close()


def _refuse_bad(report: ImportReport, skip_bad: bool) -> None:
    """Put the bad records in source order; raise naming them (unless ``skip_bad``)."""
    report.bad.sort(key=lambda bad: int(bad.where.rpartition(" ")[2]))
    if report.bad and not skip_bad:
        raise _bad_error(report.source, report.bad, "bad record(s)")


def _planned(writer: _Writer, nodes: list[tuple[str, Node]], report: ImportReport) -> Planned:
    """What writing each record does (see :meth:`_Writer.plan`); raises when an id is
    taken. A record whose file in the store cannot be read as a memory (broken by hand)
    is not written over: it goes to ``report.kept`` and the rest is imported."""
    unusable = _unusable_files(writer.store)
    writer.departed.update(departed_ids(writer.store))
    report.kept += [BadRecord(w, n.id, unusable[n.id]) for w, n in nodes if n.id in unusable]
    plan = writer.plan([(w, n) for w, n in nodes if n.id not in unusable])
    taken = _taken(plan)
    if taken:
        raise _bad_error(report.source, taken, _taken_what(writer.store, taken))
    report.ids = [node.id for _w, node, _s in plan]
    return plan


def _foreign_archived(store: MdCG, node: Node, archived: frozenset[str]) -> str | None:
    """For a record marked archived, :func:`md_cg.engine.foreign_file` at the path it is
    written to, under ``archive/``: a hand-placed file there holding another id failed the
    whole import after three re-plans, naming the record's id as taken (attack a3); it is a
    bad record, named before anything is written, as at a live path."""
    if node.id not in archived:
        return None
    return foreign_file(store._engine, node, paths.archived_rel(layout.rel_path(node)), store.scope)


def _creatable(store: MdCG, nodes: list[tuple[str, Node]], report: ImportReport) -> list[tuple[str, Node]]:
    """``nodes`` without those whose id the store could not create (a Windows device
    name such as ``CON``: every clone must be able to hold the file) or that name a
    scope outside the handle's, which go to ``report.bad``; an id already stored is the
    store's own."""
    out: list[tuple[str, Node]] = []
    shelved = frozenset(report.archived)
    store._engine.fresh()  # once: the ids other processes hold now
    first: dict[str, tuple[str, str]] = {}  # id key -> (where, id) of its first record
    for where, node in nodes:
        key = paths.id_key(node.id)
        seen = first.setdefault(key, (where, node.id))
        if seen[1] != node.id:
            label, first_label = twin_labels(node.id, seen[1])
            twin = (
                f"id {label} differs only by letter case or Unicode normalisation from {first_label} "
                f"({seen[0]}): one file on macOS and Windows; rename one of them"
            )
            report.bad.append(BadRecord(where, node.id, twin))
            continue
        try:
            retention.stamp_scope(node.copy(), store.scope)  # what add would refuse, named per record
        except InvalidArgumentError as exc:
            report.bad.append(BadRecord(where, node.id, _reason(exc)))
            continue
        why = _taken_elsewhere(store, node.id)
        if why is None and _held(store, node.id) is None:
            why = foreign_file(store._engine, node, scope=store.scope)
            why = why or _foreign_archived(store, node, shelved)
        if why is None and has_conflict_markers(node.body):
            why = "the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) outside a code block"
        if why is not None:
            report.bad.append(BadRecord(where, node.id, why))
            continue
        # an id the store may not create (a Windows device name, an invisible character):
        # a bad record, unless the store holds it already (from an older file)
        refused = windows_device_name(node.id) is not None or not node.id.isascii()
        if refused and _held(store, node.id) is None:
            try:
                check_new_id(node.id)
            except UnsafeIdError as exc:
                report.bad.append(BadRecord(where, node.id, _reason(exc)))
                continue
        out.append((where, node))
    return out


def _unusable_files(store: MdCG) -> dict[str, str]:
    """Id -> why a record of it is not written: the store has a file named for it that
    cannot be read as a memory (a write would lose its text). A scoped handle is not
    told the file's path or reason (it may be out of its scope)."""
    out: dict[str, str] = {}
    state = store._engine.state
    for rel, reason in sorted(state.problems.items()):
        node_id = paths.stem_of(rel)
        if node_id in state.entries:  # the memory is in another file: written as usual
            continue
        if store.scope is None:
            why = f"its file {rel} is unusable: {reason}"
        else:
            why = "a file of this id cannot be read as a memory (an unscoped health lists it)"
        out.setdefault(node_id, f"{why}; it is not written over -- fix it, then import again")
    return out


Planned = list[tuple[str, Node, str]]
#: The start of a planned node's status when it is not written: the store's file of its
#: id broke during the import (the reason follows)
_KEPT = "kept: "
#: The start of a planned node's status when it is not written: its id was forgotten or
#: renamed away in this store (the reason follows)
_GONE = "departed: "


def _left(status: str) -> bool:
    """Whether a planned status says the record is not written (kept or departed)."""
    return status.startswith((_KEPT, _GONE))


def departed_ids(store: MdCG) -> dict[str, audit.Gone]:
    """:func:`md_cg.audit.departed` of ``store``'s audit log, the ids a scoped handle may
    see (those :meth:`MdCG.departure` names): the rule a migration follows
    (:func:`md_cg.migrate.forgotten_ids`)."""
    return audit.departed(audit.visible_to(store.scope, store.log(paths.AUDIT_DIR).read()))


def departed_text(store: MdCG, node_id: str, gone: dict[str, audit.Gone]) -> str:
    """Why a record of a forgotten or renamed id is not imported (a migration's reason,
    :func:`md_cg.audit.not_brought_back`, and how to import it all the same: beside the
    memory its renames lead to, or brought back when that memory was forgotten since)."""

    def holds(other: str) -> bool:
        return _held(store, other) is not None

    end, left = audit.chain_end(node_id, gone, holds)
    how = "brings it back" if gone[node_id].to is None or left is not None else f"imports it beside {end!r}"
    return f"id {node_id!r} was {audit.not_brought_back(node_id, gone, holds)} (--overwrite {how})"


@dataclass(frozen=True)
class _Writer:
    """One import's writes into ``store``: what each node's write does, and the commits.

    ``stamped``: the ids whose record gave no ``created_at`` (stamped with the import's
    time); ``overwrite``: replace other content under a record's id."""

    store: MdCG
    name: str
    overwrite: bool
    stamped: frozenset[str]
    durable: bool | None
    #: ids whose record says archived: the same record of an archived memory is unchanged
    archived: frozenset[str] = frozenset()
    #: path -> why, of each folder (or file) of the store a write of this import refused
    refused: dict[str, str] = field(default_factory=dict)
    #: id -> how each id forgotten or renamed away in the store left it
    #: (:func:`departed_ids`); ``restored``: those this import logged as brought back
    departed: dict[str, audit.Gone] = field(default_factory=dict)
    restored: set[str] = field(default_factory=set)

    def plan(self, nodes: list[tuple[str, Node]]) -> Planned:
        """Each node with what writing it does (created / updated / moved / unchanged),
        or with why it may not be written (an id taken by other content, without
        ``overwrite``; an id held by an archived or expired node).

        A stamped node that is stored already takes the stored node's ``created_at``:
        the same record imported again is the same memory, not a newer one."""
        plan: Planned = []
        for where, node in nodes:
            held = _held(self.store, node.id)
            if held is None:  # a new id (most of an import): nothing to compare
                if self.overwrite or node.id not in self.departed:
                    plan.append((where, node, "created"))
                else:
                    plan.append((where, node, _GONE + departed_text(self.store, node.id, self.departed)))
                continue
            if node.id in self.stamped and held.created_at is not None:
                node.created_at = held.created_at
            if node.agent_scope is None and node.workspace_scope is None:
                # the write keeps the stored memory's scope (add_many: a shared one stays
                # shared, one a scoped handle stamped keeps it): compared as it will be written
                node.agent_scope, node.workspace_scope = held.agent_scope, held.workspace_scope
                node.sensitivity = node.sensitivity or held.sensitivity
            status = self.store.write_outcome(node)
            if status != "unchanged" and _expired_here(held):  # never revived by an import
                status = (
                    f"id {node.id!r} is held by an expired memory ({held.path}): renew it "
                    "(update with a tier) or sweep it, then import again"
                )
            elif node.id in self.archived and not held.archived:  # never archived by an import
                status = _KEPT + _live_text(node.id, held.path)
            elif status == "created" and held.archived and node.id in self.archived:
                same = holds_as_written(self.store, node, held.path, held)  # as written (a3)
                status = "unchanged" if same else f"id {node.id!r} is archived here with other content"
            elif status == "created":  # archived or expired: out of the reads write_outcome looks at
                status = f"id {node.id!r} is held by an archived or expired memory ({held.path})"
            elif status in ("updated", "moved") and not self.overwrite:
                status = f"id {node.id!r} is in the store with other content ({held.path})"
            plan.append((where, node, status))
        return plan

    def write(self, plan: Planned, batch: int, progress: ProgressFn | None) -> Planned:
        """Commit ``batch`` nodes at a time; return each node with what its write did."""
        done: Planned = []
        for start in range(0, len(plan), batch):
            done += self.commit(plan[start : start + batch], start)
            if progress is not None:
                progress(len(done), len(plan))
        return done

    def _add(self, chunk: Planned) -> None:
        """Write the nodes of ``chunk`` to be written, in one commit. A record whose folder
        the store refuses (a symlink, a file where a folder belongs: never written
        through) is kept (its status says why, in place) and the rest written."""
        while True:
            if self.refused:
                chunk[:] = [self._refused(item) for item in chunk]
            pending = [n for _w, n, status in chunk if status != "unchanged" and not _left(status)]
            if not pending:
                return
            self._log_restored(pending)
            try:
                _add_batch(self.store, pending, self.archived, self.overwrite, self.durable, self.name)
                return
            except UnsafePathError as exc:  # nothing was written
                if exc.path in self.refused or not any(_under(n, exc.path, self.archived) for n in pending):
                    raise
                self.refused[exc.path] = exc.reason

    def _log_restored(self, pending: list[Node]) -> None:
        """A ``restored`` audit record for each forgotten or renamed id of ``pending``
        (``overwrite`` brings it back), before the write: health then does not take it
        for one git brought back (as a migration with overwrite logs it)."""
        back = [n for n in pending if n.id in self.departed and n.id not in self.restored]
        if not back:
            return
        audit.log_restored(
            self.store.log(paths.AUDIT_DIR), back, f"imported again from {self.name} with overwrite"
        )
        self.restored.update(n.id for n in back)

    def _refused(self, item: tuple[str, Node, str]) -> tuple[str, Node, str]:
        """``item``, kept (with why) when its node goes under a path the store refused."""
        where, node, status = item
        if status == "unchanged" or _left(status):
            return item
        for path, why in self.refused.items():
            if _under(node, path, self.archived):
                return where, node, f"{_KEPT}{refused_text(path, why)}"
        return item

    def commit(self, chunk: Planned, before: int) -> Planned:
        """One batch as one commit. Without ``overwrite`` a node is only ever added:
        when another writer stored one of the ids meanwhile, the batch is planned
        again -- the same content is then ``unchanged`` (two imports of one file both
        succeed), other content stops the import with the ids named."""
        chunk = list(chunk)
        for _attempt in range(3):
            try:
                self._add(chunk)
                return chunk
            except DuplicateIdError as exc:
                error = exc
            # another writer's ids, or a file broken by hand since the import began: kept
            self.store.sync()  # as the import began: the index sees the files as they are
            unusable = _unusable_files(self.store)
            chunk = [
                (where, node, _KEPT + unusable[node.id])
                if node.id in unusable and s != "unchanged"
                else (where, node, s)
                for where, node, s in self.plan([(where, node) for where, node, _s in chunk])
            ]
            taken = _taken(chunk)
            if taken:
                raise _bad_error(
                    self.name,
                    taken,
                    "record(s) whose id another writer took during the import",
                    f"this batch was not written, the {before} record(s) before it were",
                )
        raise ImportSourceError(
            f"{self.name}: the batch from {chunk[0][0]} to {chunk[-1][0]} was not written: {error}; "
            f"the {before} record(s) before it were imported; a re-run reads the store's files again "
            "first: it keeps and lists a record whose file cannot be read, and names one whose id is taken"
        )


def _under(node: Node, path: str, archived: frozenset[str]) -> bool:
    """Whether ``node``'s file is ``path`` or below it (under ``archive/`` for the ids
    of ``archived``: :func:`_rel_of`)."""
    rel = _rel_of(node, archived)
    return rel == path or rel.startswith(path + "/")


def _rel_of(node: Node, archived: frozenset[str]) -> str:
    """Where the import writes ``node``: under ``archive/`` when its record says archived."""
    rel = layout.rel_path(node)
    return paths.archived_rel(rel) if node.id in archived else rel


#: What the reason of an archived record kept for its id being live in the store says.
_LIVE_HERE = " is a live memory here"


def _live_text(node_id: str, path: str) -> str:
    """Why an archived record is not written over a live memory of its id: an old export
    does not undo the memory's return (nor archive it unasked), as it does not undo a forget."""
    return (
        f"id {node_id!r}{_LIVE_HERE} ({path}); an import never archives a live memory, "
        f"not even with --overwrite: archive it (mdcg archive {node_id}) if that is meant"
    )


def _add_batch(
    store: MdCG, nodes: list[Node], archived: frozenset[str], overwrite: bool, durable: bool | None, name: str
) -> None:
    """``store.add_many(nodes, stamp=False, decide=True)``, those of ``archived`` (new ids:
    :meth:`_Writer.plan` keeps the others) written straight into ``archive/`` in the same
    commit, so an archived record is never seen live: written live and archived after
    (review rE), a kill in between left it live and searchable, and a symlinked
    ``archive/`` failed the import after every live write. The steps of ``add_many``
    (validation, scope, retention decision, the ids' locks), with the paths of ``archived``
    ones moved under ``archive/`` before the commit; one an unindexed file holds there is
    refused as taken (the batch is planned again)."""
    if not any(n.id in archived for n in nodes):
        store.add_many(nodes, overwrite=overwrite, durable=durable, stamp=False, decide=True, checked=False)
        return
    eng, now = store._engine, time.time()
    live = [n for n in nodes if n.id not in archived]
    shelved = [n for n in nodes if n.id in archived]
    decided = store._prepare(nodes, now, stamp=False, replacing=overwrite, decide=True)
    with eng.lock, store._naming_lost(), eng.hold(n.id for n in nodes):
        staged, dels, out = eng._stage_batch(live, overwrite=overwrite, stamp=False, check=store._check_live)
        put, _dels, _out = eng._stage_batch(shelved, overwrite=False, stamp=False, check=store._check_live)
        for s in put:
            s.rel = paths.archived_rel(s.rel)
            if fsops.exists(eng.root_str, s.rel):
                raise DuplicateIdError(s.node.id, s.rel, f"node id {s.node.id!r} is taken: {s.rel} exists")
        eng.commit([*staged, *put], dels, durable=durable)
    written = {id(n) for n in out} | {id(s.node) for s in put}
    store._ret.record([(n, d) for n, d in decided if id(n) in written], now)
    store._note_archive("archive", [s.node.id for s in put], f"imported as archived from {name}")


def refused_text(path: str, why: str) -> str:
    """Why a record is not written: the store refuses the folder it goes in."""
    return f"{path} {why}: nothing is written through it -- fix it, then import again"


def _dry_refusals(store: MdCG, plan: Planned, archived: frozenset[str]) -> Planned:
    """``plan`` with the records whose folder the store would refuse (a symlink...) kept,
    as the import will keep them: each folder written to is looked at once (``archive/...``
    for the ids of ``archived``)."""
    looked: dict[str, str | None] = {}
    out: Planned = []
    for where, node, status in plan:
        if status in ("created", "updated", "moved"):
            folder = _rel_of(node, archived).rpartition("/")[0]
            if folder not in looked:
                looked[folder] = _folder_refusal(str(store.root), folder)
            if looked[folder] is not None:
                status = f"{_KEPT}{looked[folder]}"
        out.append((where, node, status))
    return out


def _folder_refusal(root: str, folder: str) -> str | None:
    """Why a write would refuse ``folder`` of the store at ``root``, or None (a folder
    not made yet is made by the write): a symlink or a file on the way."""
    exc = fsops.folder_refusal(root, folder)
    return None if exc is None else refused_text(exc.path, exc.reason)


def _taken(plan: Planned) -> list[BadRecord]:
    return [BadRecord(where, node.id, status) for where, node, status in plan if status.startswith("id ")]


def _taken_what(store: MdCG, taken: Sequence[BadRecord]) -> str:
    """What the ``taken`` records are (after their count), with what can be done, by what
    holds their ids: other content is replaced by ``--overwrite`` (only named when some
    record is refused for it: with ``overwrite`` none is), an archived memory never -- the
    hint was given for it, also to an import run with ``--overwrite`` (review r2) --, an
    expired one never (its own line says to renew or sweep it)."""
    held = [_held(store, bad.node_id) for bad in taken if bad.node_id is not None]
    archived = sum(1 for entry in held if entry is not None and entry.archived)
    expired = sum(1 for entry in held if entry is not None and _expired_here(entry))
    other = len(taken) - archived - expired
    hints = []
    if other:
        hints.append(
            "--overwrite replaces other content" + ("" if other == len(taken) else f" for {other} of them")
        )
    if archived:
        hints.append(
            "an archived memory is never replaced, not even with --overwrite: unarchive it first, "
            "or give the record another id"
        )
    return "record(s) whose id is taken" + (f" ({'; '.join(hints)})" if hints else "")


def _taken_elsewhere(store: MdCG, node_id: str) -> str | None:
    """Why a record may not take ``node_id`` though no memory the caller sees holds it:
    a memory out of the caller's scope holds it, or an id differing only by letter case
    or Unicode normalisation is stored (one file on macOS and Windows); None when free
    or the caller's own. Ids are one namespace: ``add`` would refuse these too."""
    # the whole index (caught up by _creatable): the caller's view would miss them
    state = store._engine.state
    if node_id in state.entries:
        if _held(store, node_id) is None:
            return taken_outside_scope(node_id)
        return None
    twin = state.twin_of(node_id)
    if twin is None:
        return None
    if _held(store, twin) is None:
        return taken_outside_scope(node_id)
    label, twin_label = twin_labels(node_id, twin)
    return f"id {label} differs from the stored {twin_label} only by letter case or Unicode normalisation"


def _held(store: MdCG, node_id: str) -> Entry | None:
    """The index entry of the node ``node_id`` in any state, or None -- also when the
    store holds it in another Unicode form only (a read by id finds that one: a record
    of it is told a twin, :func:`_taken_elsewhere`)."""
    try:
        e = store.entry(node_id, include_archived=True, include_expired=True)
    except NodeNotFoundError:
        return None
    return e if e.id == node_id else None


def _expired_here(held: Entry) -> bool:
    """Whether the stored node is an expired temporary memory (hidden from reads; an
    import refuses its id whatever ``overwrite`` says, as it refuses an archived one's)."""
    return not held.archived and visibility.is_expired(held, time.time())  # a conflict never expires


# -- export ---------------------------------------------------------------------------------


def export_nodes(
    store: MdCG,
    target: str | os.PathLike[str] | IO[bytes],
    *,
    layer: str | None = None,
    tag: editing.TagFilter | None = None,
    since: float | None = None,
    until: float | None = None,
    include_archived: bool = False,
    include_expired: bool = False,
) -> ExportReport:
    """Write the nodes the caller sees (filtered as :meth:`MdCG.list_nodes`) to ``target``
    as JSON lines, in id order; see the module docstring.

    ``target``: a path (written to a temporary file first and renamed over it, so a
    failed export leaves no half file; a symlink's target is replaced, the link kept; a
    FIFO or a device is opened and written, never replaced; ``/dev/stdout``, ``/dev/fd/N``
    and the like are written into that descriptor of this process as it was opened, a
    regular file too (a ``>>`` appends; nothing is replaced); a path inside the store's
    folder is refused), ``"-"`` for stdout, or a binary stream.
    A node whose file went away during the export is left out; one whose file cannot
    be used, and every file of the layers exported that no index entry holds (the folders
    are listed here: the store's problems do not outlive the process that found them),
    are listed in ``ExportReport.unreadable``; one whose body holds git conflict markers
    is exported as stored and named in ``ExportReport.conflicted`` (an import refuses it
    until the conflict is resolved)."""
    if layer is not None:
        check_layer(layer)
    if isinstance(target, (str, os.PathLike)) and str(target) != "-":
        _refuse_in_store(store, Path(target).absolute())
    # listed before the index is read: a memory written meanwhile is then in the index
    scan = index.scan_files(str(store.root)) if store.scope is None else None
    entries = store.list_nodes(
        layer,
        tag=tag,
        since=since,
        until=until,
        include_archived=include_archived,
        include_expired=include_expired,
    )
    ids = sorted(e.id for e in entries)
    written: list[str] = []
    # A file the store could not use is not silently missing from a backup: named in the
    # report; with a tag or time filter its memory may not be one the filter selects.
    left_out = _files_left_out(store, scan, layer)
    filtered = tag is not None or since is not None or until is not None
    unreadable, maybe = ([], left_out) if filtered else (left_out, [])
    conflicted: list[str] = []
    lines = _export_lines(store, ids, include_archived, include_expired, unreadable, conflicted)
    chunks = _chunks(lines, written)
    if isinstance(target, (str, os.PathLike)) and str(target) != "-":
        path = Path(target).absolute()
        fd = _fd_of(path)
        if fd is not None:  # /dev/stdout, /dev/fd/N: written into that descriptor as it is
            _write_fd(path, fd, chunks)
        elif _written_through(path):  # a FIFO, a device: opened, never replaced
            with open(path, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
        else:  # a regular file (a symlink's target: the link stays) or a new path
            real = Path(os.path.realpath(path))
            fsops.atomic_write(str(real.parent), real.name, chunks)
        return ExportReport(len(written), str(path), written, unreadable, maybe, conflicted)
    stream = sys.stdout.buffer if not isinstance(target, io.IOBase) else target
    for chunk in chunks:
        stream.write(chunk)
    stream.flush()
    return ExportReport(len(written), "-", written, unreadable, maybe, conflicted)


def _written_through(path: Path) -> bool:
    """Whether an export to ``path`` is written into it as it is, not by a temp file renamed
    over it: a FIFO, a character or block device, a socket, a process substitution's
    ``/dev/fd/N`` (followed through symlinks) -- a rename would put a regular file in
    their place (a reader of the FIFO would wait for ever). A regular file, a folder, a
    missing path: False."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


#: A path naming a file descriptor of this process: /dev/fd/N, /proc/self/fd/N (or
#: /proc/<pid>/fd/N), /dev/stdin, /dev/stdout, /dev/stderr
_FD_PATH = re.compile(r"/(?:dev|proc/(self|\d+))/fd/(\d+)|/dev/std(in|out|err)")


def _fd_of(path: Path) -> int | None:
    """The file descriptor of this process ``path`` names (:data:`_FD_PATH`, or a symlink to
    one), else None. Such a path leads to what the descriptor is open on -- a regular file
    too (``--out /dev/stdout >> log``): replaced by a renamed temp file, that file would
    lose what it held, and a ``>>`` would not append."""
    text = os.path.normpath(str(path))
    for _hop in range(40):  # a symlink loop ends
        match = _FD_PATH.fullmatch(text)
        if match is not None and match[1] in (None, "self", str(os.getpid())):
            return int(match[2]) if match[2] is not None else ("in", "out", "err").index(match[3])
        parent = os.path.realpath(os.path.dirname(text))  # /dev/fd -> /proc/<pid>/fd
        try:
            text = os.path.normpath(os.path.join(parent, os.readlink(text)))
        except OSError:  # not a symlink: its parent's real path, looked at once more
            real = os.path.join(parent, os.path.basename(text))
            if real == text:
                return None
            text = real
    return None


def _write_fd(path: Path, fd: int, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` through a duplicate of ``fd``: where it points and as it was opened
    (at its offset; at the end for ``>>``, O_APPEND), as a shell redirection would."""
    for stream in (sys.stdout, sys.stderr):  # what this process wrote there first comes first
        if stream is not None:
            stream.flush()
    try:
        dup = os.dup(fd)
    except OSError as exc:
        raise InvalidArgumentError(
            f"{path}: file descriptor {fd} is not open in this process; give a path, or open it "
            f"(a shell's {fd}>FILE)",
            name="target",
            value=str(path),
        ) from exc
    with open(dup, "wb") as out:
        for chunk in chunks:
            out.write(chunk)


def _refuse_in_store(store: MdCG, path: Path) -> None:
    """Refuse an export written inside the store's folder (symlinks followed): it would
    replace a memory's file, or be taken in by git and the store's scans."""
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(store.root))
    if real == root or root in real.parents:
        raise InvalidArgumentError(
            f"{path}: is inside the store folder {store.root} (an export there would replace a "
            "memory's file or be taken into the store); write it outside the store",
            name="target",
            value=str(path),
        )


def _files_left_out(store: MdCG, scan: index.Scan | None, layer: str | None) -> list[tuple[str, str]]:
    """(path, reason) of each file under the layer folders (of ``layer``) that no index
    entry holds, found by ``scan`` itself: the store's problems do not outlive the process
    that found them (an earlier ``sync``, ``health`` or ``compact`` leaves none for this
    one). A file that parses but the index does not know (hand-written, not synced yet)
    is named too; the losing copy of a duplicate id is not (its id is exported). A scoped
    handle (``scan`` None) gets none: whose file it is cannot be told."""
    if scan is None:
        return []
    state = store._engine.state
    held = state.by_path()
    losers = {rel for copies in state.duplicates.values() for rel in copies}
    prefixes = (f"{layer}/", f"{paths.ARCHIVE_DIR}/{layer}/") if layer is not None else ("",)
    out: list[tuple[str, str]] = []
    for rel, why in sorted(scan.refused.items()):
        # a refused .md path is a memory file left out, a folder not scanned may hold
        # some; anything else (a symlink to a picture) holds no memory
        if rel.startswith(prefixes) and (rel.endswith(paths.NODE_SUFFIX) or rel in scan.unscanned):
            out.append((rel, why))
    for rel in sorted(scan.files):
        if rel in held or rel in losers or not rel.startswith(prefixes):
            continue
        try:
            parsed = index.parse_file(str(store.root), rel)
        except (MalformedNodeFileError, UnsafePathError) as exc:
            out.append((rel, exc.reason))
            continue
        except (FileNotFoundError, NotADirectoryError):  # gone since the scan
            continue
        if parsed.entry.id not in state.entries:
            out.append((rel, f"a memory file ({parsed.entry.id!r}) the index does not know; run sync"))
    return sorted(out)


def _export_lines(
    store: MdCG,
    ids: Iterable[str],
    include_archived: bool,
    include_expired: bool,
    unreadable: list[tuple[str, str]],
    conflicted: list[str],
) -> Iterator[tuple[str, bytes]]:
    """Each node's id and JSON line; the ids of bodies holding conflict markers into
    ``conflicted`` (exported as stored, named so the caller can say they will not import)."""
    for node_id in ids:
        try:
            node = store.get(node_id, include_archived=include_archived, include_expired=include_expired)
        except NodeNotFoundError as exc:
            if exc.hidden == "lost" and store.scope is None:  # its file moved, deleted or replaced by
                unreadable.append((node_id, str(exc)))  # hand since it was indexed: named (s36 a3)
            continue
        except (MalformedNodeFileError, UnsafePathError) as exc:  # broken since it was indexed
            unreadable.append((node_id, str(exc)))
            continue
        record = node.to_dict(iso_times=True)
        if not RECORD_KEYS.isdisjoint(node.extra):  # a custom key the record would take for its own
            for name in node.extra:
                del record[name]
            record[CUSTOM_KEY] = dict(node.extra)
        record["body"] = node.body
        if has_conflict_markers(node.body):
            conflicted.append(node_id)
        if include_archived and store.entry(node_id, include_archived=True, include_expired=True).archived:
            record[ARCHIVED_KEY] = True  # import puts it back in archive/, not among live memories
        yield node_id, orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def _chunks(lines: Iterable[tuple[str, bytes]], written: list[str], size: int = 1 << 20) -> Iterator[bytes]:
    """The lines joined into buffers of about ``size`` bytes, each id noted in ``written``.

    One buffer, not a list of lines: each bytes object from orjson keeps its 4 KiB
    working buffer, so 100k lines held apart would take ~400 MB."""
    buf = bytearray()
    for node_id, line in lines:
        written.append(node_id)
        buf += line
        if len(buf) >= size:
            yield bytes(buf)
            buf.clear()
    if buf:
        yield bytes(buf)
