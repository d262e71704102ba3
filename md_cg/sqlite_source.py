"""Read a sqlite cognitive-graph database, read-only, as :class:`~md_cg.node.Node` objects.

The database has a ``nodes`` table and (optionally) an ``edges`` table; the
reference schema is :data:`SCHEMA_SQL` and ``docs/sqlite-schema.md`` maps
every column to a node field. In short:

* ``content`` holds the body; ``id``, ``layer`` and ``content`` are required
  columns, every other reference column is optional (a database without it
  reads as if the column were NULL everywhere).
* JSON columns (:data:`JSON_COLUMNS`) hold JSON text. A number stored in one
  is taken as that number. In the columns of free values
  (:data:`TEXT_OR_JSON_COLUMNS`: ``temporal``, ``entity_id``, ``spatial``,
  ``semantic_coordinates``) text that is not JSON is that text: ``one_off``
  and ``"one_off"`` both give the string ``one_off`` (text that *is* JSON,
  such as ``42`` or ``null``, is read as JSON). In the other JSON columns
  (objects and lists) text that is not JSON is a bad row naming the column.
* Parsing is bounded: a JSON cell longer than the frontmatter limit
  (:data:`~md_cg.node.MAX_FRONTMATTER_BYTES`) or nested deeper than
  :data:`~md_cg.node.MAX_DEPTH` levels is a bad row, never a crash.
* NULL, JSON ``null`` and an empty JSON array/object all mean *absent*: the
  field is not set (``None``, or ``[]`` for list fields), exactly as an empty
  value is left out of a node file, so sqlite → md → node compares equal.
* Columns that are not in the reference schema are kept: a non-NULL text or
  number goes to :attr:`Node.extra` under the column name (a BLOB there is a
  bad row). The reference ``extra`` column (a JSON object) is merged into
  :attr:`Node.extra` too; a column named as one of its keys makes the row bad
  unless both hold the same value of the same type (one would be lost).
* An integer ``id`` (or edge ``source``/``target``) is read as its decimal
  string.
* The reader does not rely on ``id`` being a primary key: user databases often
  lack the constraint, so duplicates are detected and reported. The first row
  carrying an id owns it; every later row with that id is a bad row naming the
  first rowid.

Rows come out one at a time (:func:`iter_rows`); a bad row yields a
:class:`RowResult` with ``error`` set and the rest continue. Edges are loaded
up front, grouped by source, in ``edges`` rowid order; an edge whose source is
no row of ``nodes`` is reported after the node rows.

Nothing here writes: :func:`open_readonly` opens ``mode=ro`` with
``query_only`` on, so the database file's bytes are unchanged afterwards.

Imports only :mod:`md_cg.node` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import stat
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import nodefile
from .errors import InvalidNodeError, MdcgError
from .merge import CONFLICT_KEY, has_conflict_markers
from .node import (
    EDGE_TYPES,
    FIELD_ORDER,
    LIFECYCLE_FIELDS,
    MAX_DEPTH,
    MAX_FRONTMATTER_BYTES,
    TIME_FIELDS,
    Edge,
    Node,
    check_new_id,
    show,
    validate,
)
from .script import id_fold, short_repr, twin_labels

#: The reference schema (``docs/sqlite-schema.md``). Writers (the sample
#: generator) use it as is; the reader accepts any superset or subset that keeps
#: ``id``, ``layer`` and ``content``.
SCHEMA_SQL = """\
CREATE TABLE nodes (
    id TEXT NOT NULL PRIMARY KEY,
    layer TEXT NOT NULL,
    content TEXT NOT NULL,
    modality TEXT,
    importance REAL,
    confidence REAL,
    condition_space TEXT,
    tags TEXT,
    spatial TEXT,
    temporal TEXT,
    created_at REAL,
    updated_at REAL,
    semantic_coordinates TEXT,
    state_attributes TEXT,
    entity_id TEXT,
    verification_basis TEXT,
    non_applicable_conditions TEXT,
    verification_history TEXT,
    access_count INTEGER,
    last_access REAL,
    extra TEXT
);
CREATE TABLE edges (
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    type TEXT,
    confidence REAL,
    verified INTEGER,
    extra TEXT
);
CREATE INDEX edges_source ON edges (source);
"""

#: Node columns of the reference schema, in table order: the node's fields in
#: frontmatter order with the body as ``content`` (third), edges in their own
#: table, unknown keys as one JSON object in ``extra``.
NODE_COLUMNS: tuple[str, ...] = (
    "id",
    "layer",
    "content",
    *(name for name in FIELD_ORDER[2:] if name != "edges" and name not in LIFECYCLE_FIELDS),
    "extra",
)
#: Edge columns of the reference schema, in table order.
EDGE_COLUMNS: tuple[str, ...] = ("source", "target", "type", "confidence", "verified", "extra")
#: Columns a ``nodes`` table must have.
REQUIRED_COLUMNS: tuple[str, ...] = ("id", "layer", "content")
#: Columns holding JSON text.
JSON_COLUMNS: tuple[str, ...] = (
    "condition_space",
    "tags",
    "spatial",
    "temporal",
    "semantic_coordinates",
    "state_attributes",
    "entity_id",
    "non_applicable_conditions",
    "verification_history",
    "extra",
)
#: JSON columns of free values, where text that is not JSON is read as that
#: text (databases often store ``temporal`` and ``entity_id`` as plain text).
TEXT_OR_JSON_COLUMNS: tuple[str, ...] = ("spatial", "temporal", "semantic_coordinates", "entity_id")
# Node fields that are lists (absent = []), the rest of JSON fields are None when absent.
_LIST_FIELDS = frozenset({"tags", "non_applicable_conditions", "verification_history"})
# A time written as a number in a TEXT cell.
_EPOCH_TEXT = re.compile(r"-?\d+(?:\.\d+)?")
# Plain columns copied to the field of the same name (NULL = absent).
_PLAIN_COLUMNS: tuple[str, ...] = (
    "modality",
    "importance",
    "confidence",
    "created_at",
    "updated_at",
    "verification_basis",
    "access_count",
    "last_access",
)


@dataclass(frozen=True)
class RowResult:
    """One row of the source: a node, or the reason it cannot be one.

    ``table`` is ``"nodes"`` for node rows and ``"edges"`` for an edge whose
    source is not a node. ``rowid`` is the row's sqlite rowid in that table
    (its 1-based position for a ``WITHOUT ROWID`` table). ``node_id`` is the
    raw id value as stored (it may be NULL or unsafe).
    """

    rowid: int
    node_id: Any
    node: Node | None
    error: str | None
    table: str = "nodes"

    @property
    def ok(self) -> bool:
        """True when the row became a valid node."""
        return self.error is None

    @property
    def reason(self) -> str:
        """:attr:`error` without the row's label (:func:`row_label`) it starts with."""
        text = self.error or ""
        return text.removeprefix(row_label(self.table, self.rowid, self.node_id) + ": ")


@dataclass(frozen=True)
class SourceInfo:
    """What :func:`inspect_source` found in a database."""

    path: str
    node_rows: int
    edge_rows: int
    has_edges_table: bool
    node_columns: tuple[str, ...]
    missing_columns: tuple[str, ...]
    unknown_columns: tuple[str, ...]
    dangling_edges: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "node_rows": self.node_rows,
            "edge_rows": self.edge_rows,
            "has_edges_table": self.has_edges_table,
            "node_columns": list(self.node_columns),
            "missing_columns": list(self.missing_columns),
            "unknown_columns": list(self.unknown_columns),
            "dangling_edges": self.dangling_edges,
        }


# -- opening ----------------------------------------------------------------


class BadText(bytes):
    """A TEXT value that is not valid UTF-8 (kept as its bytes so one bad row
    does not abort reading the others)."""

    @property
    def error(self) -> str:
        try:
            self.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not valid UTF-8 at byte {exc.start}"
        return "not valid UTF-8"  # pragma: no cover - a BadText always fails


def _text(value: bytes) -> str | BadText:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return BadText(value)


def open_readonly(path: str | Path) -> sqlite3.Connection:
    """Open ``path`` read-only (``mode=ro`` URI, ``query_only`` on).

    Raises :class:`MdcgError` naming the path when the file is missing, is not
    a sqlite database, or has no ``nodes`` table with the required columns.
    """
    p = Path(path)
    if not p.is_file():
        raise MdcgError(f"{p}: {_not_a_file(p)}")
    uri = p.resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise MdcgError(f"{p}: cannot open as a sqlite database ({exc})") from None
    conn.text_factory = _text
    try:
        conn.execute("PRAGMA query_only = ON")
        columns = _columns(conn, "nodes")
    except sqlite3.DatabaseError as exc:
        conn.close()
        hint = (
            "; another process holds a lock on it (a write in progress): try again when it is done"
            if "locked" in str(exc)
            else ""
        )
        raise MdcgError(f"{p}: not a readable sqlite database ({exc}){hint}") from None
    if not columns:
        conn.close()
        raise MdcgError(f"{p}: the database has no 'nodes' table")
    lowered = {c.lower() for c in columns}
    lacking = [c for c in REQUIRED_COLUMNS if c not in lowered]
    if lacking:
        conn.close()
        raise MdcgError(
            f"{p}: table 'nodes' lacks the required column(s) {', '.join(lacking)} "
            "(see docs/sqlite-schema.md)"
        )
    return conn


def _not_a_file(p: Path) -> str:
    """Why ``p`` (not a regular file) cannot be the database: missing, a folder, or
    something else (a device, a FIFO, a socket). All three said "no such sqlite database
    file", which a folder named ``memory.sqlite`` or ``/dev/null`` plainly is not (review rE)."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return "no such sqlite database file"
    if stat.S_ISDIR(mode):
        return "is a folder, not a sqlite database file: give the database file in it"
    return "is not a regular file (a device, FIFO or socket): give the sqlite database file"


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({_quote(table)})")]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rowid_name(conn: sqlite3.Connection, table: str) -> str | None:
    """The name that reaches ``table``'s real rowid (``rowid``, ``_rowid_`` or ``oid``: a
    column of the table by one of those names hides that alias), or None when it has none
    to order and resume by (WITHOUT ROWID; a view, which answers NULL; all three taken):
    its rows are then numbered from 1."""
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    if kind is not None and kind[0] == "view":
        return None
    taken = {c.lower() for c in _columns(conn, table)}
    for alias in ("_rowid_", "rowid", "oid"):
        if alias in taken:
            continue
        try:
            conn.execute(f"SELECT {alias} FROM {_quote(table)} LIMIT 0")
        except sqlite3.OperationalError:
            return None
        return alias
    return None


def _select(conn: sqlite3.Connection, table: str, columns: Sequence[str]) -> sqlite3.Cursor:
    """Rows of ``table`` as ``(rowid, *columns)`` in rowid (or primary key) order."""
    cols = ", ".join(_quote(c) for c in columns)
    alias = _rowid_name(conn, table)
    if alias is not None:
        return conn.execute(f"SELECT {alias}, {cols} FROM {_quote(table)} ORDER BY {alias}")
    # WITHOUT ROWID tables are ordered by their primary key; number rows from 1.
    return conn.execute(f"SELECT row_number() OVER (), {cols} FROM {_quote(table)}")


# -- counting and inspecting ------------------------------------------------


def count_rows(conn: sqlite3.Connection) -> int:
    """Number of rows in ``nodes`` (the node results :func:`iter_rows` will yield)."""
    return int(conn.execute("SELECT COUNT(*) FROM nodes").fetchone()[0])


def _edge_table_columns(conn: sqlite3.Connection) -> dict[str, str]:
    """Lower-cased reference edge column -> actual column name (empty: no table)."""
    actual = _columns(conn, "edges")
    found = {c.lower(): c for c in actual}
    return {c: found[c] for c in EDGE_COLUMNS if c in found}


def dangling_edges(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """``(source, target)`` of every edge whose target is no ``nodes`` id, in edge order."""
    cols = _edge_table_columns(conn)
    if "source" not in cols or "target" not in cols:
        return []
    id_column = next(c for c in _columns(conn, "nodes") if c.lower() == "id")
    ids = {_id_text(v) for (v,) in conn.execute(f"SELECT {_quote(id_column)} FROM nodes")}
    out = []
    for _, source, target in _select(conn, "edges", [cols["source"], cols["target"]]):
        if _id_text(target) not in ids:
            out.append((_id_text(source), _id_text(target)))
    return out


def inspect_source(conn: sqlite3.Connection, path: str | Path = "") -> SourceInfo:
    """Columns, row counts and dangling edges of an open database."""
    columns = tuple(_columns(conn, "nodes"))
    lowered = {c.lower() for c in columns}
    edge_cols = _edge_table_columns(conn)
    has_edges = bool(_columns(conn, "edges"))
    edge_rows = int(conn.execute("SELECT COUNT(*) FROM edges").fetchone()[0]) if has_edges else 0
    return SourceInfo(
        path=str(path),
        node_rows=count_rows(conn),
        edge_rows=edge_rows,
        has_edges_table=has_edges,
        node_columns=columns,
        missing_columns=tuple(c for c in NODE_COLUMNS if c not in lowered),
        unknown_columns=tuple(c for c in columns if c.lower() not in NODE_COLUMNS),
        dangling_edges=len(dangling_edges(conn)) if edge_cols else 0,
    )


# -- decoding ---------------------------------------------------------------


def _id_text(value: Any) -> Any:
    """Integer ids read as their decimal string; anything else unchanged."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, BadText):
        return None
    return value


def _kind(value: Any) -> str:
    """What a cell holds, in sqlite's words: ``a BLOB``, ``an INTEGER``..."""
    if isinstance(value, bytes):
        return "a BLOB"
    if isinstance(value, bool | int):
        return "an INTEGER"
    return "a REAL" if isinstance(value, float) else f"a {type(value).__name__}"


def show_id(value: Any) -> str:
    """A raw id (or edge end) as a message shows it: the ``repr`` of text or a number,
    shortened as :func:`md_cg.script.short_repr` does (a row's id or an edge's ends can
    be any length: two edge rows with a 1M-character target made a 2 MB report),
    ``a BLOB of 6 bytes`` for a BLOB, ``text that is not valid UTF-8`` for such text."""
    if isinstance(value, BadText):
        return "text that is not valid UTF-8"
    if isinstance(value, bytes):
        return f"a BLOB of {len(value):,} byte{'s' if len(value) != 1 else ''}"
    return short_repr(value)


def row_label(table: str, rowid: int, raw_id: Any) -> str:
    """``nodes rowid 4 (id 'x')``, ``nodes rowid 9 (id: a BLOB of 3 bytes)`` or ``edges rowid 2``:
    how a bad row's error starts (:attr:`RowResult.reason` is what follows)."""
    if table != "nodes":
        return f"{table} rowid {rowid}"
    return f"nodes rowid {rowid} (id{':' if isinstance(raw_id, bytes) else ''} {show_id(raw_id)})"


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict)) and not value)


# A JSON string literal (one way to match each character: no catastrophic backtracking).
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def nests_too_deep(text: str) -> bool:
    """Whether the JSON ``text`` nests lists and objects deeper than MAX_DEPTH.

    Brackets inside strings do not count. Linear, without recursion, so it
    can run before a recursive parser is trusted with the text.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        else:
            depth -= 1
    return False


def _decode_json(column: str, value: Any) -> Any:
    """The value of a JSON column; raise ``ValueError`` with the reason."""
    if value is None:
        return None
    if isinstance(value, bytes):
        raise ValueError(f"column {column!r} holds a BLOB, expected JSON text")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"column {column!r} holds a non-finite number")
        return value
    if len(value) > MAX_FRONTMATTER_BYTES:
        raise ValueError(
            f"column {column!r} holds {len(value):,} characters, more than a node's frontmatter "
            f"can hold ({MAX_FRONTMATTER_BYTES // 1024} KiB)"
        )
    if nests_too_deep(value):
        raise ValueError(f"column {column!r} nests deeper than {MAX_DEPTH} levels of lists and objects")
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        if column in TEXT_OR_JSON_COLUMNS:
            return value  # plain text, as databases often store `temporal` and `entity_id`
        raise ValueError(f"invalid JSON in column {column!r} ({exc.msg} at char {exc.pos})") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise ValueError(f"column {column!r} cannot be read as JSON ({exc})") from None


def _load_edges(conn: sqlite3.Connection) -> dict[Any, list[tuple[int, dict[str, Any]]]]:
    """Edges grouped by source id, each as ``(edge rowid, row by reference column)``.

    An ``edges`` table without ``source`` and ``target`` columns holds no edges.
    """
    cols = _edge_table_columns(conn)
    grouped: dict[Any, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    if "source" not in cols or "target" not in cols:
        return grouped
    names = list(cols)
    for rowid, *values in _select(conn, "edges", [cols[c] for c in names]):
        row = dict(zip(names, values, strict=True))
        grouped[_id_text(row["source"])].append((rowid, row))
    return grouped


def _edge_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The frontmatter form of one edge row (raises ``ValueError`` for a bad ``extra``)."""
    edge: dict[str, Any] = {}
    if row.get("target") is not None:  # a NULL target may come from extra, as other columns
        edge["target"] = _id_text(row["target"])
    if row.get("type") is not None:
        kind = row["type"]
        if isinstance(kind, str) and kind.strip().lower() in EDGE_TYPES:
            kind = kind.strip().lower()  # 'Causal' is causal
        edge["type"] = kind
    if row.get("confidence") is not None:
        edge["confidence"] = row["confidence"]
    if row.get("verified") is not None:
        edge["verified"] = row["verified"]
    extra = _decode_json("edges.extra", row.get("extra"))
    if extra is not None and not isinstance(extra, dict):
        raise ValueError("column 'edges.extra' must hold a JSON object")
    for key, value in (extra or {}).items():
        if key not in edge:
            edge[key] = value  # a NULL column's value may come from extra
        elif not _same_value(key, value, edge[key]):  # one edge cannot keep both: not dropped silently
            raise ValueError(
                f"column 'edges.extra' holds {key!r}: {show(value)}, which differs from column "
                f"{key!r} ({show(edge[key])}); an edge has one {key}"
            )
    edge.setdefault("target", None)  # none anywhere: refused, naming the target
    return edge


def _same_value(key: str, given: Any, column: Any) -> bool:
    """Whether an ``edges.extra`` value is the column's own (``Causal`` is ``causal``;
    ``1`` is not ``true``, except in ``verified``, where sqlite's booleans are 1 and 0)."""
    if isinstance(given, str) and isinstance(column, str) and column in EDGE_TYPES:
        given = given.strip().lower()
    if key == "verified" and isinstance(given, bool) and type(column) is int and column in (0, 1):
        return given == bool(column)
    return bool(given == column) and isinstance(given, bool) == isinstance(column, bool)


def _edge_problem(edge_row: Mapping[str, Any], node_id: str) -> str | None:
    """Why one ``edges`` row cannot be an edge of ``node_id`` (None: it can): the node
    migrates without it, and the edge row is reported on its own."""
    for column, value in edge_row.items():
        if isinstance(value, BadText):
            return f"column {column!r} is {value.error}"
    try:
        edge = Edge.from_value(_edge_from_row(edge_row), node_id=node_id)
        validate(Node(id=node_id, layer="knowledge", body="-", edges=[edge]))
    except (ValueError, InvalidNodeError) as exc:
        text = str(exc)
        return text.removeprefix(f"node {node_id!r}: ")
    if edge.target == node_id:
        # what `add` refuses and `health` reports (self_edge): a migrated one was a finding
        # of every health check after the run, with no word of it in the report (session 38)
        return f"an edge to itself ({edge.type}); edges link two memories"
    return None


def _row_fields(
    row: Mapping[str, Any], lowered: Mapping[str, Any], problems: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The node keyword arguments and the ``extra`` object of one row; problems are appended."""
    kwargs: dict[str, Any] = {}
    for column in _PLAIN_COLUMNS:
        value = lowered.get(column)
        if value is None:
            continue
        if column == "access_count" and isinstance(value, float) and value.is_integer():
            value = int(value)
        if column in TIME_FIELDS and isinstance(value, str) and _EPOCH_TEXT.fullmatch(value.strip()):
            value = float(value)  # '1700000000' stored as TEXT: seconds, as in a REAL column
        kwargs[column] = value
    extra: dict[str, Any] = {}
    for column in JSON_COLUMNS:
        try:
            value = _decode_json(column, lowered.get(column))
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if _is_empty(value):
            continue
        if column == "extra":
            if not isinstance(value, dict):
                problems.append("column 'extra' must hold a JSON object")
                continue
            extra.update(value)
        else:
            kwargs[column] = value
    for column, value in row.items():
        name = str(column)
        if name.lower() in NODE_COLUMNS or value is None:
            continue
        if isinstance(value, bytes):
            problems.append(f"column {name!r} holds a BLOB, which a node cannot carry")
            continue
        if name in extra and not (type(extra[name]) is type(value) and extra[name] == value):
            # the extra object already holds the key: one of the two values would be lost
            problems.append(
                f"column 'extra' holds {name!r}: {show(extra[name])}, which differs from column "
                f"{name!r} ({show(value)}); a node has one extra key {name!r}: keep one of the two"
            )
            continue
        extra[name] = value
    return kwargs, extra


def row_to_node(row: Mapping[str, Any], edges: Sequence[Mapping[str, Any]] = ()) -> Node:
    """Build and validate a node from one ``nodes`` row and its ``edges`` rows.

    ``row`` maps column names (any case) to stored values; ``edges`` are rows of
    the ``edges`` table whose source is this node, in order. Raises
    :class:`InvalidNodeError` naming the column or field on the first problem
    (several JSON problems are reported together).
    """
    lowered = {str(k).lower(): v for k, v in row.items()}
    problems: list[str] = []
    node_id = _id_text(lowered.get("id"))
    if node_id is None:
        raise InvalidNodeError("column 'id' is NULL", field="id")
    if not isinstance(node_id, str):
        raise InvalidNodeError(
            f"column 'id' holds {_kind(node_id)}, expected text", field="id", value=node_id
        )
    check_new_id(node_id)  # it becomes a file: one that every clone can hold
    if lowered.get("layer") is None:
        problems.append("column 'layer' is NULL")
    content = lowered.get("content")
    if isinstance(content, int | float) and not isinstance(content, bool):
        content = str(content)  # a number stored as the text, as an integer id is read
    if content is None:
        problems.append("column 'content' is NULL (use '' for an empty body)")
    elif not isinstance(content, str):
        problems.append(f"column 'content' holds {_kind(content)}, which a node cannot carry")

    kwargs, extra = _row_fields(row, lowered, problems)
    edge_dicts = []
    for edge_row in edges:
        try:
            edge_dicts.append(_edge_from_row(edge_row))
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise InvalidNodeError("; ".join(problems), node_id=node_id)

    for name in LIFECYCLE_FIELDS:  # newer node fields travel in the extra object
        if name in extra:
            kwargs[name] = extra.pop(name)
    for name in _LIST_FIELDS:
        kwargs.setdefault(name, [])
    node = Node(
        id=node_id,
        layer=lowered["layer"],
        body=content,  # type: ignore[arg-type]
        extra=extra,
        edges=[Edge.from_value(e, node_id=node_id) for e in edge_dicts],
        **kwargs,
    )
    node = validate(node)
    for name in TIME_FIELDS:
        value = getattr(node, name)
        if value is not None and not _FIRST_INSTANT <= value < _AFTER_LAST_INSTANT:
            hint = "; milliseconds since the epoch? md-cg reads seconds" if value > 0 else ""
            raise InvalidNodeError(
                f"field {name!r} is {value!r} seconds since the epoch, outside the years 1-9999{hint}",
                field=name,
                value=value,
                node_id=node_id,
            )
    if node.expires_at is not None and node.retention_tier is None:
        node.retention_tier = "temp"  # an expiry is what a temporary memory has: kept as given
    return node


_FIRST_INSTANT = -62135596800.0  # 0001-01-01T00:00:00Z
_AFTER_LAST_INSTANT = 253402300800.0  # 10000-01-01T00:00:00Z (9999-12-31T23:59:59.999999Z is the last)


class _Owners:
    """Which row owns each id: the first row carrying it, good or bad (a later row with
    the id, or with one differing only by case or normalisation, is a duplicate), and why
    an owner was rejected."""

    def __init__(self) -> None:
        self.first: dict[str, int] = {}
        self.folded: dict[str, tuple[str, int]] = {}  # id_fold(id) -> (id, rowid)
        self.rejected: dict[int, str] = {}  # rowid of an owner -> why it is a bad row

    def claim(self, node_id: str, rowid: int) -> None:
        if node_id not in self.first:
            self.first[node_id] = rowid
            self.folded.setdefault(id_fold(node_id), (node_id, rowid))

    def taken(self, node_id: str) -> str | None:
        """Why an earlier row owns ``node_id`` (the same id, or one differing only by
        case or normalisation), or None."""
        if node_id in self.first:
            rowid = self.first[node_id]
            if rowid in self.rejected:
                return (
                    f"duplicate id: nodes rowid {rowid} holds it first, and was rejected "
                    f"({self.rejected[rowid]}); neither row is stored"
                )
            return f"duplicate id, first seen at nodes rowid {rowid}"
        twin = self.folded.get(id_fold(node_id))
        if twin is None:
            return None
        why = self.rejected.get(twin[1])
        rejected = f", which was rejected ({why}); neither row is stored" if why else ""
        label, twin_label = twin_labels(node_id, twin[0])
        # twins in Unicode form look the same: both escaped, the row's too ('Cafe\u0301')
        named = f" {label}" if twin_label != repr(twin[0]) else ""
        return (
            f"the id{named} differs from {twin_label} (nodes rowid {twin[1]}{rejected}) only by letter "
            "case or Unicode normalisation: one file on macOS and Windows"
        )

    def bad(self, rowid: int, node_id: Any, reason: str) -> RowResult:
        """The bad row ``rowid``, noted as rejected if it owns its id."""
        node_id_text = _id_text(node_id)
        if isinstance(node_id_text, str) and self.first.get(node_id_text) == rowid:
            why = reason.removeprefix(f"node {node_id_text!r}: ")
            self.rejected[rowid] = why if len(why) <= 160 else why[:157] + "..."
        return RowResult(rowid, node_id, None, f"{row_label('nodes', rowid, node_id)}: {reason}")


def iter_rows(conn: sqlite3.Connection) -> Iterator[RowResult]:
    """Every ``nodes`` row in rowid order as a :class:`RowResult`, then orphan edges.

    Good rows carry a validated :class:`Node` (with its out-edges); bad rows
    carry ``error``: ``"nodes rowid <n> (id <id>): <reason>"``. After the node
    rows, each edge whose source is no row of ``nodes`` yields a result with
    ``table="edges"``. Node rows are streamed; edges are preloaded.
    """
    return _iter_rows(conn, storable=False)


def _iter_rows(conn: sqlite3.Connection, *, storable: bool) -> Iterator[RowResult]:
    """:func:`iter_rows`; ``storable``: a node that cannot be stored as a file is a bad
    row too (:func:`iter_storable_rows`), and a later row with its id says so."""
    edges_by_source = _load_edges(conn)
    columns = _columns(conn, "nodes")
    owners = _Owners()
    for rowid, *values in _select(conn, "nodes", columns):
        row = dict(zip(columns, values, strict=True))
        raw_id = next((v for k, v in row.items() if k.lower() == "id"), None)
        node_id = _id_text(raw_id)
        undecodable = [k for k, v in row.items() if isinstance(v, BadText)]
        if undecodable:
            if isinstance(node_id, str):
                owners.claim(node_id, rowid)  # the first row carrying an id owns it, bad or not
            column = undecodable[0]
            yield owners.bad(rowid, raw_id, f"column {column!r} is {row[column].error}")
            continue
        if isinstance(node_id, str):
            taken = owners.taken(node_id)
            if taken is not None:
                yield RowResult(rowid, raw_id, None, f"{row_label('nodes', rowid, raw_id)}: {taken}")
                continue
            owners.claim(node_id, rowid)
        edge_rows, bad_edges = [], []
        for edge_rowid, edge_row in edges_by_source.get(node_id, ()) if isinstance(node_id, str) else ():
            problem = _edge_problem(edge_row, node_id)
            if problem is None:
                edge_rows.append(edge_row)
            else:
                bad_edges.append((edge_rowid, edge_row, problem))
        try:
            node = row_to_node(row, edge_rows)
        except InvalidNodeError as exc:
            yield owners.bad(rowid, raw_id, str(exc))
            continue
        unstorable = _unstorable(node) if storable else None
        if unstorable is None:
            yield RowResult(rowid, raw_id, node, None)
        else:
            yield owners.bad(rowid, raw_id, unstorable)
        yield from _bad_edges(node.id, bad_edges)  # the node stands without them
    yield from _orphan_edges(edges_by_source, owners.first)


def _bad_edges(node_id: str, bad_edges: Sequence[tuple[int, Mapping[str, Any], str]]) -> Iterator[RowResult]:
    for edge_rowid, edge_row, problem in bad_edges:
        target = show_id(edge_row.get("target"))
        yield RowResult(
            edge_rowid,
            edge_row.get("source"),
            None,
            f"edges rowid {edge_rowid}: the edge {show_id(node_id)} -> {target} is left out: {problem}",
            table="edges",
        )


def _orphan_edges(
    edges_by_source: Mapping[Any, list[tuple[int, dict[str, Any]]]], ids: Mapping[str, int]
) -> Iterator[RowResult]:
    for source, items in edges_by_source.items():
        if source in ids:
            continue
        for edge_rowid, edge_row in items:
            yield RowResult(
                edge_rowid,
                edge_row.get("source"),
                None,
                f"edges rowid {edge_rowid}: source {show_id(edge_row.get('source'))} "
                f"(target {show_id(edge_row.get('target'))}) is not a node in 'nodes'",
                table="edges",
            )


# -- the inverse --------------------------------------------------------------


def _dump_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def node_to_row(node: Node) -> dict[str, Any]:
    """The ``nodes`` row for a node: every column of :data:`NODE_COLUMNS`, in order.

    Absent fields (``None``, empty lists and dicts) become NULL; JSON fields are
    JSON text; :attr:`Node.extra` goes to the ``extra`` column as one JSON
    object. Edges are not part of the row: see :func:`node_edge_rows`.
    """
    row: dict[str, Any] = {"id": node.id, "layer": node.layer, "content": node.body}
    carried = {name: getattr(node, name) for name in LIFECYCLE_FIELDS if getattr(node, name) is not None}
    for column in NODE_COLUMNS[3:]:
        value = {**node.extra, **carried} if column == "extra" else getattr(node, column)
        if _is_empty(value):
            row[column] = None
        elif column in JSON_COLUMNS:
            row[column] = _dump_json(value)
        else:
            row[column] = value
    return row


def node_edge_rows(node: Node) -> list[dict[str, Any]]:
    """The ``edges`` rows (every column of :data:`EDGE_COLUMNS`) of a node's out-edges."""
    rows = []
    for e in node.edges:
        edge = Edge.from_value(e, node_id=node.id)
        rows.append(
            {
                "source": node.id,
                "target": edge.target,
                "type": edge.type,
                "confidence": edge.confidence,
                "verified": int(edge.verified) if isinstance(edge.verified, bool) else edge.verified,
                "extra": _dump_json(edge.extra) if edge.extra else None,
            }
        )
    return rows


def write_nodes(conn: sqlite3.Connection, nodes: Iterable[Node]) -> tuple[int, int]:
    """Create the reference schema in an empty, writable database and insert ``nodes``.

    Returns ``(nodes written, edges written)``. This is the only function here
    that writes, and only to the connection it is given (one transaction).
    """
    node_sql = (
        f"INSERT INTO nodes ({', '.join(NODE_COLUMNS)}) VALUES ({', '.join('?' for _ in NODE_COLUMNS)})"
    )
    edge_sql = (
        f"INSERT INTO edges ({', '.join(EDGE_COLUMNS)}) VALUES ({', '.join('?' for _ in EDGE_COLUMNS)})"
    )
    conn.executescript(SCHEMA_SQL)
    n_nodes = n_edges = 0
    with conn:
        for node in nodes:
            row = node_to_row(node)
            conn.execute(node_sql, [row[c] for c in NODE_COLUMNS])
            n_nodes += 1
            for edge in node_edge_rows(node):
                conn.execute(edge_sql, [edge[c] for c in EDGE_COLUMNS])
                n_edges += 1
    return n_nodes, n_edges


#: Why a body with conflict markers is a bad row (and an import's bad record): ``sync``
#: and ``health`` would take the memory for an unresolved git merge for ever.
CONFLICT_TEXT = (
    "the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) outside a code block: "
    "md-cg would take it for an unresolved git merge; put such text in a fenced code block"
)

#: Why a row naming ``merge_conflict`` (an ``extra`` key or a column) is a bad row: it is
#: md-cg's own record of a git merge left unresolved, which no source row can hold; stored,
#: the memory counted as an unresolved merge for ever (attack atk10 F10, session 41).
CONFLICT_RECORD_TEXT = (
    f"the row names '{CONFLICT_KEY}', md-cg's record of an unresolved git merge (docs/git.md): "
    "a migrated memory cannot carry one; rename that key or column in the source"
)


def iter_storable_rows(conn: sqlite3.Connection) -> Iterator[RowResult]:
    """:func:`iter_rows`, where a node that cannot be stored as a file is a bad row too:
    the rows a migration stores (and the census counts).

    The reader validates nodes against the node model; a few values pass it
    but cannot be stored in frontmatter (a lone UTF-16 surrogate from a JSON
    escape), and a body with git conflict markers would be taken for an
    unresolved merge (:data:`CONFLICT_TEXT`). Rejecting those here keeps one bad
    row from failing a whole batch commit, and every pass agrees on the rows.
    """
    return _iter_rows(conn, storable=True)


def _unstorable(node: Node) -> str | None:
    """Why ``node`` cannot be stored as a node file, or None."""
    try:
        nodefile.dump_bytes(node)
    except (InvalidNodeError, UnicodeError) as exc:
        return f"cannot be written to a node file: {exc}"
    if CONFLICT_KEY in node.extra:
        return CONFLICT_RECORD_TEXT
    return CONFLICT_TEXT if has_conflict_markers(node.body) else None
