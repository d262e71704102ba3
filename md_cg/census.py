"""Bucket-key census: how well would each candidate key partition a store? (DESIGN §12)

Pure functions over *records* -- anything with ``tags`` and
``condition_space`` (as attributes, e.g. :class:`~md_cg.node.Node`, or as
mapping keys). A record with a ``layer`` other than the one asked for
(``knowledge`` by default, the only bucketed layer) is skipped.

Schemes compared (each record's bucket key):

==  ===========================================================================
A   the raw ``condition_space`` 4-tuple (observation_position, observation_tool,
    time_window, existence_constraint) -- the seed's v0.1 key
B   ``observation_tool`` alone
C   ``existence_constraint`` alone (``time_window`` alone is covered by the
    per-field figures: it takes a handful of values)
D   :func:`md_cg.layout.route_key_of` -- the ``domain:`` tag, else the
    observation position normalised to its domain; records with neither are
    counted as one ``orphan`` bucket. This is the key the engine uses.

E   D, but a domain bucket holding more than :data:`SPLIT_FACTOR` times the
    mean D bucket size is split by ``time_window`` (derived from the D x
    time_window counts; not the engine's key -- see ``docs/census.md``)
==  ===========================================================================

A missing field is a value of its own (``<missing>``), so records without it
form one bucket, as orphans do under D.

For each scheme: bucket count, largest share, singleton rate, expected scan
share ``Σ vᵢ² / n²`` and the verdict of :func:`md_cg.routing.bucket_health`.
For each ``condition_space`` field: how many records carry it, its distinct
values and the share of the most common one.

The sources: :func:`census_of` reads a store folder (read-only, through the
engine: :func:`records_from_folder`) or a sqlite database in the reference
schema (:func:`records_from_sqlite`); the files, folders and node rows it
cannot use go to an error sink, by path, and are counted by kind
(:class:`Skipped`); a censused layer folder it cannot read is an error.
``mdcg census`` and ``python -m census`` are thin over it.

E is reported because it measured better than D on the sample (lower
expected scan, no singletons); it pays off only for searches whose context
carries a time window, and a record's E bucket depends on the other records,
so the engine keeps D. ``docs/census.md`` has the figures.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import maintenance
from .errors import MdcgError
from .index import Entry
from .layout import ORPHAN, route_key_of
from .node import LAYERS, Node
from .routing import BucketHealth, bucket_health
from .sqlite_source import iter_storable_rows, open_readonly, row_label
from .store import MdCG

#: The four ``condition_space`` fields of the seed, in report order.
CONDITION_FIELDS: tuple[str, ...] = (
    "observation_position",
    "observation_tool",
    "time_window",
    "existence_constraint",
)
#: Bucket key of a record that lacks the field(s) a scheme keys on.
MISSING = "<missing>"
#: The layer censused by default: the only one split into buckets.
DEFAULT_LAYER = "knowledge"
#: Scheme E splits a D bucket by time_window when it holds more than this many
#: times the mean D bucket size.
SPLIT_FACTOR = 2
#: Rows of the Markdown field table at most (the seed fields, then the most frequent
#: other keys); the JSON report lists every key.
FIELD_ROWS = 20
#: Name and label of the derived scheme E.
E_NAME = "E"
E_LABEL = f"D, split by time_window inside buckets > {SPLIT_FACTOR}x the mean"


def _get(record: Any, name: str) -> Any:
    if isinstance(record, Mapping):
        return record.get(name)
    return getattr(record, name, None)


def _space(record: Any) -> Mapping[str, Any]:
    space = _get(record, "condition_space")
    return space if isinstance(space, Mapping) else {}


def _value_key(value: Any) -> str:
    """A hashable, readable key for a field value, one per value *and type*, as scheme A
    keys: other values as canonical JSON (``1``, ``1.0``, ``true``, ``[1, 2]``), a string
    as it is unless it would read as one of those or as :data:`MISSING`, then as a JSON
    string (``"1"``, ``"[1, 2]"``, ``"<missing>"``). Keyed as bare text, the string ``"1"``
    and the number 1 were one bucket, and the string ``<missing>`` joined the records
    without the field."""
    if value is None:
        return MISSING
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if _reads_as_json(value) else value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# What text JSON (as Python reads it: NaN, Infinity) can start with after whitespace.
_JSON_STARTS = frozenset('"[{-0123456789tfnNI')


def _reads_as_json(text: str) -> bool:
    """Whether ``text``, shown bare, could be taken for another key: :data:`MISSING`, or
    text the JSON reader reads (too deeply nested to read counts: it may be the JSON of a
    deep list)."""
    if text == MISSING:
        return True
    if text.lstrip()[:1] not in _JSON_STARTS:
        return False
    try:
        json.loads(text)
    except RecursionError:
        return True
    except ValueError:
        return False
    return True


def key_a(record: Any) -> str:
    """Scheme A: the raw 4-tuple, as canonical JSON (missing fields are ``null``)."""
    space = _space(record)
    return json.dumps([space.get(f) for f in CONDITION_FIELDS], ensure_ascii=False, sort_keys=True)


def key_b(record: Any) -> str:
    """Scheme B: ``observation_tool``."""
    return _value_key(_space(record).get("observation_tool"))


def key_c(record: Any) -> str:
    """Scheme C: ``existence_constraint``."""
    return _value_key(_space(record).get("existence_constraint"))


def key_d(record: Any) -> str:
    """Scheme D: the engine's route key; records without one are the ``orphan`` bucket."""
    tags = _get(record, "tags") or ()
    return route_key_of(tags, _space(record)) or ORPHAN


@dataclass(frozen=True)
class Scheme:
    """A candidate bucket key: short name, what it keys on, the key function."""

    name: str
    label: str
    key: Callable[[Any], str]


#: The schemes :func:`census` compares, in report order.
SCHEMES: tuple[Scheme, ...] = (
    Scheme("A", "raw condition_space 4-tuple", key_a),
    Scheme("B", "observation_tool alone", key_b),
    Scheme("C", "existence_constraint alone", key_c),
    Scheme("D", "domain tag, else normalised observation_position (route_key)", key_d),
)


@dataclass(frozen=True)
class SchemeResult:
    """Figures of one scheme on the censused records."""

    name: str
    label: str
    health: BucketHealth

    @property
    def verdict(self) -> str:
        """``"healthy"`` or ``"degraded: <reasons>"``."""
        if not self.health.degraded:
            return "healthy"
        return "degraded: " + "; ".join(self.health.reasons)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "scheme": self.name,
            "label": self.label,
            **self.health.to_dict(),
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class FieldStats:
    """Spread of one ``condition_space`` field over the censused records."""

    field: str
    present: int
    distinct: int
    top_value: Any
    top_count: int
    top_share: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "field": self.field,
            "present": self.present,
            "distinct": self.distinct,
            "top_value": self.top_value,
            "top_count": self.top_count,
            "top_share": self.top_share,
        }


@dataclass(frozen=True)
class CensusReport:
    """Result of :func:`census`."""

    records: int
    layer: str | None
    schemes: tuple[SchemeResult, ...]
    fields: tuple[FieldStats, ...]

    def scheme(self, name: str) -> SchemeResult:
        """The result of the scheme called ``name`` (``KeyError`` if absent)."""
        for result in self.schemes:
            if result.name == name:
                return result
        raise KeyError(name)

    @property
    def degraded(self) -> tuple[str, ...]:
        """Names of the schemes the health check calls degraded."""
        return tuple(s.name for s in self.schemes if s.health.degraded)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "records": self.records,
            "layer": self.layer,
            "schemes": [s.to_dict() for s in self.schemes],
            "degraded": list(self.degraded),
            "fields": [f.to_dict() for f in self.fields],
        }


class _FieldCounts:
    """The values one ``condition_space`` key took: a count per distinct value, and the
    first value seen of each (the top value is reported as it was, not as its key).

    Grows with the values seen, never with the records that lack the key: a store
    where every record has a key of its own costs one entry per record, not one
    slot per record per key."""

    __slots__ = ("counts", "first")

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.first: dict[str, Any] = {}

    def add(self, value: Any) -> None:
        key = _value_key(value)
        self.counts[key] += 1
        self.first.setdefault(key, value)

    def stats(self, name: str, total: int) -> FieldStats:
        if not self.counts:
            return FieldStats(name, 0, 0, None, 0, 0.0)
        top_key, top_count = min(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        present = sum(self.counts.values())
        return FieldStats(name, present, len(self.counts), self.first[top_key], top_count, top_count / total)


def split_oversized(joint: Mapping[tuple[str, str], int], factor: float = SPLIT_FACTOR) -> dict[str, int]:
    """Scheme E's bucket sizes from ``{(D key, time_window key): count}``.

    A D bucket larger than ``factor`` times the mean D bucket size becomes one
    bucket per time window (``"<D key> @ <window>"``); the others stay whole.
    """
    d_sizes: Counter[str] = Counter()
    for (d_key, _), count in joint.items():
        d_sizes[d_key] += count
    if not d_sizes:
        return {}
    limit = factor * sum(d_sizes.values()) / len(d_sizes)
    out: Counter[str] = Counter()
    for (d_key, window), count in joint.items():
        out[f"{d_key} @ {window}" if d_sizes[d_key] > limit else d_key] += count
    return dict(out)


def census(
    records: Iterable[Any],
    *,
    layer: str | None = DEFAULT_LAYER,
    schemes: Iterable[Scheme] = SCHEMES,
) -> CensusReport:
    """Compare bucket-key ``schemes`` (and E) on ``records`` in one pass.

    ``layer=None`` censuses every record; otherwise records whose ``layer``
    differs are skipped (records without a ``layer`` are always counted).
    Scheme E is appended after the given schemes. Field figures cover the four
    seed fields plus any other ``condition_space`` key seen, in order of first
    appearance. Records are not kept, only counts: a count per distinct value of
    each key (:class:`_FieldCounts`), so time and memory grow with the data, not
    with records x keys.
    """
    chosen = tuple(schemes)
    sizes: list[Counter[str]] = [Counter() for _ in chosen]
    joint: Counter[tuple[str, str]] = Counter()
    values: dict[str, _FieldCounts] = {f: _FieldCounts() for f in CONDITION_FIELDS}
    total = 0
    for record in records:
        record_layer = _get(record, "layer")
        if layer is not None and record_layer is not None and record_layer != layer:
            continue
        total += 1
        for counter, scheme in zip(sizes, chosen, strict=True):
            counter[scheme.key(record)] += 1
        joint[(key_d(record), _value_key(_space(record).get("time_window")))] += 1
        for name, value in _space(record).items():
            seen = values.get(name)
            if seen is None:
                seen = values[name] = _FieldCounts()
            if value is not None:  # a null value counts as the key missing
                seen.add(value)
    return CensusReport(
        records=total,
        layer=layer,
        schemes=(
            *(
                SchemeResult(s.name, s.label, bucket_health(dict(c)))
                for s, c in zip(chosen, sizes, strict=True)
            ),
            SchemeResult(E_NAME, E_LABEL, bucket_health(split_oversized(joint))),
        ),
        fields=tuple(seen.stats(name, total) for name, seen in values.items()),
    )


def _pct(x: float) -> str:
    """A percentage with one decimal, or two significant digits below 0.1%."""
    if 0 < x < 0.001:
        return f"{x * 100:.2g}%"
    return f"{x * 100:.1f}%"


def _cell(value: Any) -> str:
    text = _value_key(value) if value is not None else "—"
    if len(text) > 40:
        text = text[:39] + "…"
    return text.replace("|", "\\|")


def render_markdown(report: CensusReport) -> str:
    """The report as Markdown: the scheme table, then the field table."""
    scope = f"layer `{report.layer}`" if report.layer else "all layers"
    lines = [
        "# Bucket-key census",
        "",
        f"{report.records:,} records ({scope}).",
        "",
        "| scheme | bucket key | buckets | largest share | singleton rate "
        "| expected scan Σvᵢ²/n² | verdict |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for s in report.schemes:
        h = s.health
        verdict = "healthy" if not h.degraded else "**degraded**"
        lines.append(
            f"| {s.name} | {s.label} | {h.buckets:,} | {_pct(h.largest_share)} "
            f"| {_pct(h.singleton_rate)} | {_pct(h.expected_scan)} | {verdict} |"
        )
    reasons = [(s.name, r) for s in report.schemes for r in s.health.reasons]
    if reasons:
        lines += ["", "Degraded because:", ""]
        lines += [f"- {name}: {reason}" for name, reason in reasons]
    lines += [
        "",
        "## condition_space fields",
        "",
        "| field | present | distinct values | top value | top share |",
        "|---|---:|---:|---|---:|",
    ]
    shown = _fields_shown(report.fields)
    for f in shown:
        lines.append(
            f"| {f.field} | {f.present:,} | {f.distinct:,} | {_cell(f.top_value)} | {_pct(f.top_share)} |"
        )
    if len(report.fields) > len(shown):
        lines += ["", f"… and {len(report.fields) - len(shown):,} more keys (`--json` lists every key)."]
    return "\n".join(lines) + "\n"


def _fields_shown(fields: tuple[FieldStats, ...], limit: int = FIELD_ROWS) -> list[FieldStats]:
    """The rows of the field table: the seed fields, then the other keys most frequent
    first (ties in order of first appearance), ``limit`` rows in all. A store where
    every note has keys of its own would otherwise print one row per note."""
    seed = [f for f in fields if f.field in CONDITION_FIELDS]
    others = sorted((f for f in fields if f.field not in CONDITION_FIELDS), key=lambda f: -f.present)
    return (seed + others)[: max(limit, len(seed))]


# -- sources: a store folder or a sqlite database --------------------------------------------

#: Called with (where, reason) for each file, folder or row the census cannot use.
ErrorSink = Callable[[str, str], None]
#: The command line lists this many skipped files or rows by path, then counts the rest.
SHOW_SKIPS = 20


def stderr_sink(where: str, reason: str) -> None:
    """The default :data:`ErrorSink`: one ``skipped WHERE: REASON`` line on stderr."""
    print(f"skipped {where}: {reason}", file=sys.stderr)


@dataclass
class Skipped:
    """What :func:`census_of` left out, by kind (filled in when passed to it).

    ``files``: files and folders under the layer folders the census cannot use
    (unreadable, symlinks, special files, bad names); ``node_rows``: bad rows of
    the ``nodes`` table; ``edge_rows``: bad rows of the ``edges`` table. A bad edge
    row leaves nothing out of the figures (the census reads no edges), so it is
    counted apart and not passed to the error sink.
    """

    files: int = 0
    node_rows: int = 0
    edge_rows: int = 0

    def summary(self) -> str | None:
        """One line for stderr (``None`` when nothing was skipped)."""
        parts = []
        if self.files:
            parts.append(f"{self.files:,} file(s) or folder(s) skipped")
        if self.node_rows:
            parts.append(f"{self.node_rows:,} node row(s) skipped")
        if self.edge_rows:
            parts.append(f"{self.edge_rows:,} bad edge row(s) ignored (the census reads no edges)")
        return "; ".join(parts) or None


class LimitedSink:
    """An :data:`ErrorSink` for a command line: the first ``limit`` skips as
    ``skipped WHERE: REASON`` lines, then only counted -- a source with thousands
    of bad rows would otherwise bury the report in them. :meth:`rest` is the
    line saying how many were not listed."""

    def __init__(self, write: Callable[[str], None], limit: int = SHOW_SKIPS) -> None:
        self.write, self.limit, self.count = write, limit, 0

    def __call__(self, where: str, reason: str) -> None:
        self.count += 1
        if self.count <= self.limit:
            self.write(f"skipped {where}: {reason}")

    def rest(self) -> str | None:
        """``… and N more not listed``, or ``None`` when every skip was listed."""
        if self.count <= self.limit:
            return None
        return f"… and {self.count - self.limit:,} more not listed"


def _unusable(finding_path: str | None) -> bool:
    """Whether an ``unsafe_path`` finding lies in a layer folder (or is one): a file or
    folder that may hold notes the census cannot read. The store's ``.mdcg/`` and
    ``archive/`` hold none it counts."""
    return bool(finding_path) and str(finding_path).split("/", 1)[0] in LAYERS


def records_from_folder(root: str | Path, on_error: ErrorSink = stderr_sink) -> list[Entry]:
    """Index entries of every node of the store at ``root``, sorted by id.

    The store is opened read-only through the engine (nothing is written, not
    even on a store that was never initialised); each entry carries the
    ``tags``, ``condition_space`` and ``layer`` the census keys on, read from
    the files as they are now (files changed, added or removed by hand since
    the store's index last saw them are read again, in this read-only view
    only: no ``sync`` is needed first, and none is made). Every file or folder
    under the layer folders that the engine cannot use goes to ``on_error`` by
    path, sorted, and is left out: a file that does not parse
    (``unreadable_file`` findings of :meth:`~md_cg.store.MdCG.health`) and a
    symlink, special file (a FIFO), bad name or unreadable folder
    (``unsafe_path``) -- md-cg never follows a symlink below the store root, so
    what one points to is not counted, and saying nothing would make a census
    short of those notes look complete. Hidden files and folders, ``.mdcg/``
    included, are not nodes.
    """
    base = Path(root)
    with MdCG(base, read_only=True, create=False) as store:
        engine = store._engine
        with engine.lock:  # the files as they are now, not as last indexed (this view only)
            engine.fresh()
            maintenance.sync_paths(engine, maintenance.stale_paths(engine))
        entries = store.entries(include_expired=True)  # a file, until swept
        health = store.health()
        problems = [(f.path or "", f.detail) for f in health.by_kind("unreadable_file")]
        problems += [(f.path or "", f.detail) for f in health.by_kind("unsafe_path") if _unusable(f.path)]
    for rel, detail in sorted(problems):
        on_error(str(base / rel), detail)
    return entries


def _sqlite_records(path: str | Path, on_node_error: ErrorSink, on_edge_error: ErrorSink) -> Iterator[Node]:
    conn = open_readonly(path)
    try:
        for row in iter_storable_rows(conn):  # the rows a migration stores
            if row.node is not None:
                yield row.node
            else:
                sink = on_node_error if row.table == "nodes" else on_edge_error
                sink(f"{path}: {row_label(row.table, row.rowid, row.node_id)}", row.reason)
    finally:
        conn.close()


def records_from_sqlite(path: str | Path, on_error: ErrorSink = stderr_sink) -> Iterator[Node]:
    """Nodes of the good rows of a sqlite database, as :func:`~md_cg.migrate.migrate` takes
    them (:func:`~md_cg.sqlite_source.iter_storable_rows`: a row with git conflict markers
    is bad); bad rows, of either table, go to ``on_error``."""
    return _sqlite_records(path, on_error, on_error)


def check_layer_folder(root: Path, layer: str) -> None:
    """Raise :class:`~md_cg.errors.MdcgError` when the layer folder ``root/layer`` exists
    but cannot be read: a symlink (never followed below the store root), not a folder,
    or unreadable. Its census would count 0 notes and call every scheme healthy;
    an absent folder is a layer without notes."""
    folder = root / layer
    try:
        st = folder.lstat()
        if stat.S_ISLNK(st.st_mode):
            raise MdcgError(
                f"{folder}: the {layer}/ layer folder is a symlink, and md-cg never follows "
                "symlinks below the store root, so none of its notes can be counted; "
                "move the folder it points to into the store in its place"
            )
        if not stat.S_ISDIR(st.st_mode):
            raise MdcgError(
                f"{folder}: the {layer}/ layer folder is not a folder; "
                "move this file aside (the layer then has no notes)"
            )
        with os.scandir(folder):
            pass
    except FileNotFoundError:
        return
    except OSError as exc:
        raise MdcgError(
            f"{folder}: the {layer}/ layer folder cannot be read ({exc.strerror}); "
            "give this user read access to it"
        ) from exc


def census_of(
    src: str | Path,
    *,
    layer: str | None = DEFAULT_LAYER,
    on_error: ErrorSink = stderr_sink,
    skipped: Skipped | None = None,
) -> CensusReport:
    """Census of a store folder or sqlite file (raises :class:`~md_cg.errors.MdcgError` if
    unreadable, a store's censused layer folder included: :func:`check_layer_folder`).

    What is left out goes to ``on_error`` (files and folders, node rows) and is
    counted by kind in ``skipped``; bad edge rows are only counted (see :class:`Skipped`).
    """
    path = Path(src)
    tally = skipped if skipped is not None else Skipped()

    def count(kind: str) -> ErrorSink:
        def sink(where: str, reason: str) -> None:
            setattr(tally, kind, getattr(tally, kind) + 1)
            if kind != "edge_rows":
                on_error(where, reason)

        return sink

    if path.is_dir():
        for layer_name in LAYERS:
            if layer is None or layer == layer_name:
                check_layer_folder(path, layer_name)
        if not any((path / layer_name).is_dir() for layer_name in LAYERS):
            raise MdcgError(f"{path}: not an md-cg store (no layer folders such as knowledge/)")
        return census(records_from_folder(path, count("files")), layer=layer)
    return census(_sqlite_records(path, count("node_rows"), count("edge_rows")), layer=layer)
