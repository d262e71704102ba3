"""Batch migration of a sqlite cognitive-graph database into an md-cg store (DESIGN §11).

:func:`migrate` reads the source read-only (:func:`md_cg.sqlite_source.open_readonly`:
``mode=ro`` plus ``query_only``, so the database file's bytes are unchanged),
turns every row into a :class:`~md_cg.node.Node` with
:func:`md_cg.sqlite_source.iter_rows`, and writes the nodes through the engine,
``MdCG(dest).add_many(batch, overwrite=True, stamp=False)``, one group commit
per ``batch`` nodes. Then it verifies the result: see :func:`verify_migration`.
The row count, the write pass and the check read the source in one read
transaction, so they see the same rows even with another process writing to a
WAL-mode source (the report then says ``source_changed``).

Idempotent
    ``add_many(overwrite=True)`` leaves a file that already holds exactly the
    bytes it would write untouched (mtime included), so a second run over the
    same source changes no ``.md`` file and reports every node ``unchanged``.
    A node whose layer or bucket changed in the source is moved; the engine
    stamps ``updated_at`` on a move, so the migration rewrites the moved node
    once more with the source's own value.

Resumable
    A journal ``<dest>/.mdcg/migrate/<key>.json`` (``key``: a hash of the
    source's absolute path) records the source's identity (size, mtime and
    SHA-256 of the database file, and of its ``-wal`` file if there is one)
    and, after each committed batch, the last source rowid the batch covered.
    A run that finds an unfinished journal for an identical source resumes:
    rows up to that rowid are not written again (they are still read,
    counted and verified); the interrupted writer's leftovers are cleaned by
    :meth:`MdCG.sync` first. A changed source, a finished journal or
    ``resume=False`` start from the first row. A finished run marks the
    journal ``complete``.

Verified, fully
    After writing, a fresh read-only store is opened on ``dest`` and every
    node of every good row is read back from its file (:meth:`MdCG.get`) and
    compared with the node converted from the row, field by field and edge by
    edge (target, type, confidence, verified, extra), with strict types (``1``
    is not ``1.0`` or ``True``). Differences are listed by id with the names
    of the fields (:class:`Mismatch`). Ids in ``dest`` that no good row
    carries are reported as ``extras`` (not mismatches).

Bad rows
    Rows the reader rejects (invalid JSON, unknown layer, duplicate or unsafe
    id, invalid ``verification_basis``, NULL content, edges whose source is no
    node or that link a node to itself, ...) are reported by rowid with the
    reason (:class:`BadRow`), the two tables counted apart
    (``bad_node_rows``, ``bad_edge_rows``); every other row migrates. Bad
    rows do not make a report not-``ok``: they are facts about the source,
    not failures of the migration, and the report lists them all (the
    command line has ``--strict`` to fail on them).

Dry run
    ``dry_run=True`` writes nothing (the destination folder is not even
    created): it reports what would be created, changed (the file's bytes
    would differ, or the node would move) or left unchanged, the bad rows and
    the bucket distribution of the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from . import audit, fsops, layout, maintenance, nodefile, paths, retention
from .engine import check_not_nested, foreign_file
from .errors import (
    IdCollisionError,
    LockTimeoutError,
    MalformedNodeFileError,
    MdcgError,
    NodeNotFoundError,
    UnsafePathError,
)
from .node import LAYERS, Edge, Node
from .script import distinct_labels, twin_labels
from .sqlite_source import RowResult, count_rows, iter_storable_rows, open_readonly, show_id
from .store import MdCG

if TYPE_CHECKING:  # pragma: no cover
    import inspect

#: Folder of the migration journals, under the store's ``.mdcg/``.
JOURNAL_DIR = ".mdcg/migrate"
#: Format version of a journal file.
JOURNAL_VERSION = 1
#: Default number of nodes per group commit.
DEFAULT_BATCH = 500

#: ``progress(done, total)``: called after each batch and at the end of each pass.
ProgressFn = Callable[[int, int], Any]

_MISSING = "<missing>"
_UNREADABLE = "<unreadable>"
_PATH = "<path>"
_EDGE_ATTRS = ("target", "type", "confidence", "verified", "extra")
_ABSENT = object()


class MigrationError(MdcgError):
    """The migration cannot start: unusable destination, or another run holds it."""


class BadRow(NamedTuple):
    """A source row that did not become a node.

    ``table`` is ``"nodes"``, or ``"edges"`` for an edge whose source is no
    node; ``rowid`` is the row's rowid in that table; ``node_id`` the raw id
    (or edge source) as stored; ``reason`` the reader's explanation.
    """

    rowid: int
    node_id: Any
    reason: str
    table: str = "nodes"


class Mismatch(NamedTuple):
    """A node whose file differs from its source row.

    ``fields`` names what differs: node fields (``tags``, ``body``...),
    ``extra.<key>`` for an extra key, ``edges[<i>].<attr>`` for one attribute
    of the i-th edge, ``edges.count`` when the number of edges differs,
    ``<path>`` when the file is not where the node belongs, ``<missing>`` when
    no file holds the id and ``<unreadable>`` when its file broke while the
    verification read it (one that did not parse before is listed as kept).
    ``detail`` shows the first difference (source value, then file value).
    """

    node_id: str
    fields: tuple[str, ...]
    detail: str = ""


@dataclass
class MigrationReport:
    """What a migration, dry run or verification found and did.

    Counts: ``rows`` is the number of ``nodes`` rows; ``migrated`` the good
    ones (they are nodes in ``dest`` now, or would be after a dry run), split
    into ``created`` / ``updated`` (bytes differed; ``moved`` of them changed
    folder) / ``unchanged`` (already byte-identical) / ``skipped`` (written by
    the interrupted run a resume goes on from: covered by its checkpoint, or
    found in place from the batch it was writing when stopped; not written
    again, still verified). ``verified`` nodes were read back and compared.
    ``rows == migrated + bad_node_rows``; ``bad_edge_rows`` are ``edges`` rows
    left out (both tables' bad rows are in ``bad_rows``).

    ``ok`` is true when no node mismatches and the source did not change
    while it was read; bad rows are listed but do not make it false.
    """

    source: str
    dest: str
    mode: str  # "migrate", "dry-run" or "verify"
    rows: int = 0
    migrated: int = 0
    created: int = 0
    updated: int = 0
    moved: int = 0
    unchanged: int = 0
    skipped: int = 0
    verified: int = 0
    bad_rows: list[BadRow] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    #: (id, why) of the memories the store holds that the run left as they are: archived,
    #: changed in the store after the source's version, or forgotten there
    kept: list[tuple[str, str]] = field(default_factory=list)
    changed_ids: list[str] = field(default_factory=list)
    #: the ids of ``changed_ids`` whose file moved to another layer or bucket folder
    moved_ids: list[str] = field(default_factory=list)
    #: (id, folder, why) of the good rows not written because the store refuses the folder
    #: (or file) they belong in: a symlink, a file where a folder belongs... (md-cg never
    #: writes through one); the other rows migrate. Fix the folder and run again.
    refused: list[tuple[str, str, str]] = field(default_factory=list)
    #: rows a resumed run found written by the interrupted run (by its journal) whose id no
    #: file of the store holds now (deleted since), and wrote again (not the ones it kept or
    #: the store refused: they are listed in ``kept`` and ``refused``)
    rewritten: int = 0
    dangling_edges: list[tuple[str, str]] = field(default_factory=list)
    #: layer -> memories, and knowledge bucket -> memories, of the store the run leaves (a
    #: dry run: would leave; a verification: as it is), archived ones left out
    layers: dict[str, int] = field(default_factory=dict)
    buckets: dict[str, int] = field(default_factory=dict)
    dest_findings: dict[str, int] = field(default_factory=dict)
    #: the source rowid a resumed run started after (None: from the first row)
    resumed_from: int | None = None
    restarted: str | None = None
    temp_removed: list[str] = field(default_factory=list)
    #: commits of the interrupted run that were logged and are closed by the resume
    recovered: int = 0
    #: of those, the ones rolled back (a file torn by a power cut): their rows are migrated again
    undone: int = 0
    source_sha256: str = ""
    source_changed: bool = False
    batch: int = DEFAULT_BATCH
    durable: bool = False
    #: replace memories the store changed since and bring forgotten ids back (never archived ones)
    overwrite: bool = False
    write_seconds: float = 0.0
    verify_seconds: float = 0.0
    seconds: float = 0.0
    #: the good rows' ids and out-edges, for ``dangling_edges`` (filled by the first pass)
    _good: set[str] = field(default_factory=set, repr=False)
    _edges: list[tuple[str, str]] = field(default_factory=list, repr=False)
    #: path -> why, of each folder (or file) of the store a write of this run refused
    _refused_paths: dict[str, str] = field(default_factory=dict, repr=False)
    #: ids of the rows a resumed run found written by the interrupted run and not in the store
    _rewriting: set[str] = field(default_factory=set, repr=False)
    #: when the interrupted run a resume goes on from started (ns; None: not a resume): a
    #: file found in place that was written since then is of that run (counted ``skipped``)
    _resumed_since_ns: int | None = field(default=None, repr=False)

    @property
    def dry_run(self) -> bool:
        """True for a dry run (nothing written, nothing verified)."""
        return self.mode == "dry-run"

    @property
    def ok(self) -> bool:
        """No mismatch, the source was the same at the end as at the start, some row was
        good (a source whose every row is bad migrated nothing) and no good row was refused
        by the store (:attr:`refused`)."""
        return not self.mismatches and not self.source_changed and not self.nothing_good and not self.refused

    @property
    def nothing_good(self) -> bool:
        """The source has ``nodes`` rows and not one of them is good."""
        return self.rows > 0 and self.migrated == 0

    @property
    def nodes_per_s(self) -> float:
        """Good rows per second of the whole run (writing and verifying)."""
        return self.migrated / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (every list in full)."""
        return {
            "ok": self.ok,
            "mode": self.mode,
            "source": self.source,
            "dest": self.dest,
            "source_sha256": self.source_sha256,
            "source_changed": self.source_changed,
            "rows": self.rows,
            "migrated": self.migrated,
            "created": self.created,
            "updated": self.updated,
            "moved": self.moved,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "verified": self.verified,
            "bad_node_rows": self.bad_node_rows,
            "bad_edge_rows": self.bad_edge_rows,
            "bad_rows": [{**r._asdict(), "node_id": _json_id(r.node_id)} for r in self.bad_rows],
            "mismatches": [
                {"id": m.node_id, "fields": list(m.fields), "detail": m.detail} for m in self.mismatches
            ],
            "extras": list(self.extras),
            "kept": [{"id": i, "why": why} for i, why in self.kept],
            "changed_ids": list(self.changed_ids),
            "moved_ids": list(self.moved_ids),
            "refused": [{"id": i, "folder": where, "why": why} for i, where, why in self.refused],
            "rewritten": self.rewritten,
            "dangling_edges": [[_json_id(x) for x in e] for e in self.dangling_edges],
            "layers": dict(self.layers),
            "buckets": dict(self.buckets),
            "dest_findings": dict(self.dest_findings),
            "resumed_from": self.resumed_from,
            "restarted": self.restarted,
            "temp_removed": list(self.temp_removed),
            "recovered": self.recovered,
            "undone": self.undone,
            "batch": self.batch,
            "durable": self.durable,
            "overwrite": self.overwrite,
            "write_seconds": round(self.write_seconds, 4),
            "verify_seconds": round(self.verify_seconds, 4),
            "seconds": round(self.seconds, 4),
            "nodes_per_s": round(self.nodes_per_s, 1),
        }

    def render(self, limit: int = 20) -> str:
        """A human summary; each list shows at most ``limit`` items."""
        title = {"migrate": "migration", "dry-run": "dry run", "verify": "verification"}[self.mode]
        verdict = "OK" if self.ok else "FAILED"
        lines = [f"{title} {self.source} -> {self.dest}: {verdict}"]
        lines.append(self._rows_line())
        if self.mode == "dry-run":
            lines.append(
                f"  would create {self.created:,}, change {self.updated:,} "
                f"({self.moved:,} moving), leave unchanged {self.unchanged:,}; nothing written"
            )
        elif self.mode == "migrate":
            lines.append(
                f"  created {self.created:,}, updated {self.updated:,} ({self.moved:,} moved), "
                f"unchanged {self.unchanged:,}, skipped (resumed) {self.skipped:,}"
            )
        lines += self._resume_lines()
        if self.mode != "dry-run":
            lines.append(
                f"  verified {self.verified:,} node(s) field by field: "
                f"{len(self.mismatches):,} mismatch(es), {len(self.extras):,} extra id(s) in dest"
            )
        if self.source_changed:
            lines.append(
                "  the source database changed while it was read: every figure is of the rows "
                "as one read at the start saw them (later writes are not in this run); run again"
            )
        if self.nothing_good:
            lines.append("  no row of the source is good: nothing migrated (see the bad rows)")
        lines += self._store_lines()
        knowledge = sum(self.buckets.values())
        if knowledge:
            largest, size = max(self.buckets.items(), key=lambda kv: (kv[1], kv[0]))
            lines.append(
                f"  knowledge: {knowledge:,} node(s) in {len(self.buckets):,} bucket(s); largest "
                f"{largest} {size:,} ({size / knowledge:.1%}), orphan "
                f"{self.buckets.get(layout.ORPHAN, 0):,}"
            )
        if self.layers:
            after = "a run would leave" if self.mode == "dry-run" else "after the run"
            lines.append(
                f"  layers of the store {after}: " + ", ".join(f"{k} {v:,}" for k, v in self.layers.items())
            )
        if self.dangling_edges:
            lines.append(f"  {len(self.dangling_edges):,} dangling edge(s) kept (target not a migrated node)")
        if self.dest_findings:
            lines.append(
                "  dest health: " + ", ".join(f"{k} {v}" for k, v in sorted(self.dest_findings.items()))
            )
        if self.seconds:
            # a dry run writes nothing: its time is spent reading and checking the rows (the
            # migration simulation of session 38 read "14.27 s writing" of one)
            doing = "checking" if self.mode == "dry-run" else "writing"
            lines.append(
                f"  {self.seconds:.2f} s ({self.write_seconds:.2f} s {doing}, "
                f"{self.verify_seconds:.2f} s verifying), {self.nodes_per_s:,.0f} nodes/s"
            )
        self._list_sections(lines, limit)
        return "\n".join(lines) + "\n"

    def _rows_line(self) -> str:
        """The counts of the source's rows, each table's labelled: ``node rows 11: 2 good, 9
        bad; edge rows: 1 bad (left out)``. The bad edge rows are counted apart from the node
        rows (a migration simulation of session 38 read a list headed ``bad rows (737)``
        under a line saying ``467 bad, 270 edge row(s)``: the 737 was both tables)."""
        edges = self.bad_edge_rows
        return (
            f"  node rows {self.rows:,}: {self.migrated:,} good, {self.bad_node_rows:,} bad; "
            f"edge rows: {edges:,} bad{' (left out)' if edges else ''}"
        )

    def _list_sections(self, lines: list[str], limit: int) -> None:
        """The lists of the text report, each cut at ``limit`` items. Ids that differ only in
        Unicode form (a row's ``cafe\u0301`` kept beside the store's ``caf\u00e9``, listed
        among the extra ids) are printed escaped (:func:`md_cg.script.distinct_labels`),
        as the bad rows' reasons print them: two lines named different ids that looked the
        same (review rE)."""
        label = distinct_labels(
            [
                *(m.node_id for m in self.mismatches),
                *(i for i, _where, _why in self.refused),
                *self.changed_ids,
                *(i for i, _why in self.kept),
                *self.extras,
            ]
        )
        _section(
            lines,
            "mismatches",
            [f"{label[m.node_id]}: {', '.join(m.fields)}  {m.detail}" for m in self.mismatches],
            limit,
        )
        for table in ("nodes", "edges"):
            _section(
                lines,
                f"bad {table[:-1]} rows",
                [
                    f"{r.table} rowid {r.rowid} ({'id' if r.table == 'nodes' else 'source'}"
                    f"{':' if isinstance(r.node_id, bytes) else ''} {show_id(r.node_id)}): {r.reason}"
                    for r in sorted(self.bad_rows_of(table), key=lambda r: r.rowid)
                ],
                limit,
            )
        _section(
            lines,
            "refused by the store",
            [f"{label[i]}: {where}: {why}" for i, where, why in self.refused],
            limit,
        )
        moved, how = set(self.moved_ids), "moving" if self.mode == "dry-run" else "moved"
        changed = [f"{label[i]} ({how})" if i in moved else label[i] for i in self.changed_ids]
        if self.mode == "dry-run":
            _section(lines, "would change", changed, limit)
        else:  # the ids whose earlier text this run replaced: named, not only counted
            _section(lines, "updated (the source's version written over the store's)", changed, limit)
        kept = [f"{label[i]}: {why}" for i, why in self.kept]
        _section(lines, "kept (the store's version stands)", kept, limit)
        _section(lines, "extra ids in dest (not in the source)", [label[i] for i in self.extras], limit)

    def _store_lines(self) -> list[str]:
        """The rows the store refused or kept (none when there are none)."""
        lines: list[str] = []
        if self.refused:
            lines.append(
                f"  {'would refuse' if self.mode == 'dry-run' else 'refused'} {len(self.refused):,} "
                "good row(s): the store's folder for them cannot be used (listed below; nothing is "
                "written through a symlink or over a file): fix it and run again"
            )
        if self.kept:
            lines.append(
                f"  kept {len(self.kept):,} memory(ies) the store changed since: not replaced "
                "(listed below; overwrite replaces them, never an archived one)"
            )
        return lines

    def _resume_lines(self) -> list[str]:
        """What a resume found of the interrupted run (none when it did not resume)."""
        lines = []
        if self.resumed_from is not None:
            lines.append(f"  resumed after source rowid {self.resumed_from}")
        if self.restarted:
            lines.append(f"  started over: {self.restarted}")
        if self.rewritten:
            lines.append(
                f"  wrote again {self.rewritten:,} row(s) the interrupted run had written whose file is gone"
            )
        if self.temp_removed:
            lines.append(f"  removed {len(self.temp_removed)} temp file(s) of the interrupted run")
        if self.recovered > self.undone:
            finished = self.recovered - self.undone
            lines.append(f"  finished {finished} batch(es) the interrupted run had logged")
        if self.undone:
            lines.append(
                f"  undid {self.undone} logged batch(es) of the interrupted run with a torn file"
                " (a power cut before it was written back); their rows are migrated again"
            )
        return lines

    def bad_rows_of(self, table: str) -> list[BadRow]:
        """The bad rows of one table (``"nodes"`` or ``"edges"``)."""
        return [r for r in self.bad_rows if r.table == table]

    @property
    def bad_node_rows(self) -> int:
        """How many ``nodes`` rows are bad (not migrated): ``rows == migrated + bad_node_rows``."""
        return len(self.bad_rows_of("nodes"))

    @property
    def bad_edge_rows(self) -> int:
        """How many ``edges`` rows are bad (left out; their nodes migrate without them)."""
        return len(self.bad_rows_of("edges"))

    def bad_rows_summary(self) -> str:
        """``9 bad node row(s) and 1 bad edge row(s) in the source`` (what ``--strict`` says)."""
        nodes, edges = self.bad_node_rows, self.bad_edge_rows
        return f"{nodes:,} bad node row(s) and {edges:,} bad edge row(s) in the source"


def _json_id(value: Any) -> Any:
    """A raw id as JSON can carry it (a BLOB id becomes its repr)."""
    return value if value is None or isinstance(value, (str, int, float)) else repr(value)


def _section(lines: list[str], title: str, items: list[str], limit: int) -> None:
    if not items:
        return
    lines.append(f"{title} ({len(items):,}):")
    lines.extend(f"  {item}" for item in items[:limit])
    if len(items) > limit:
        lines.append(f"  ... {len(items) - limit:,} more (see --json)")


# -- source identity and the journal ---------------------------------------------------


def _file_identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest.hexdigest()}


def source_identity(src: str | os.PathLike[str]) -> dict[str, Any]:
    """Size, mtime and SHA-256 of the database file (and of its ``-wal`` file, if any)."""
    path = Path(src)
    ident = _file_identity(path)
    wal = path.with_name(path.name + "-wal")
    if wal.is_file():
        ident["wal"] = _file_identity(wal)
    return ident


def journal_path(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Where the journal of migrating ``src`` into ``dest`` lives."""
    key = hashlib.sha256(str(Path(src).resolve()).encode("utf-8")).hexdigest()[:16]
    return Path(dest) / JOURNAL_DIR / f"{key}.json"


def read_journal(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The journal of migrating ``src`` into ``dest``, or ``None`` if absent or unreadable."""
    rel = journal_path(src, dest).relative_to(Path(dest)).as_posix()
    try:
        # never through a symlink, never a FIFO (it would block the migration)
        raw = fsops.read_small(os.fspath(dest), rel, limit=64 << 20)
        data = json.loads(raw) if raw is not None else None
    except (OSError, ValueError, UnsafePathError):
        return None
    if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
        return None
    rowid = data.get("rowid")
    if not (rowid is None or isinstance(rowid, int)) or not isinstance(data.get("identity"), dict):
        return None
    return data


class _Journal:
    def __init__(self, src: Path, dest: Path, identity: dict[str, Any], durable: bool) -> None:
        self.path = journal_path(src, dest)
        self.durable = durable
        self.record: dict[str, Any] = {
            "version": JOURNAL_VERSION,
            "source": str(src.resolve()),
            "identity": identity,
            "rowid": None,  # the last source rowid written (None: none yet)
            "rows_done": 0,
            "complete": False,
            "started_at": time.time(),
            "updated_at": time.time(),
        }

    def save(self, **changes: Any) -> None:
        self.record.update(changes, updated_at=time.time())
        data = json.dumps(self.record, ensure_ascii=False, indent=1).encode("utf-8")
        fsops.atomic_write(
            str(self.path.parents[2]), f"{JOURNAL_DIR}/{self.path.name}", data, durable=self.durable
        )

    def remove_abandoned_temps(self) -> list[str]:
        root = str(self.path.parents[2])
        found = fsops.scan(root, JOURNAL_DIR, max_depth=1)
        removed = []
        for rel in sorted(found.hidden):
            name = rel.rsplit("/", 1)[-1]
            try:
                mtime = fsops.lstat(root, rel).st_mtime
            except (OSError, MdcgError):
                continue
            if fsops.is_temp_name(name) and fsops.temp_is_abandoned(name, mtime) and fsops.remove(root, rel):
                removed.append(rel)
        return removed


# -- comparing nodes ----------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same JSON types (``1``, ``1.0`` and ``True`` all differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Edge):
        return all(_same(getattr(a, n), getattr(b, n)) for n in _EDGE_ATTRS)
    return bool(a == b)


def _show(value: Any) -> str:
    if isinstance(value, Edge):
        value = value.to_dict()
    text = "(absent)" if value is _ABSENT else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def expected_after_retention(store: MdCG, row_node: Node, actual: Node) -> Node:
    """The node a row should have become: the row's fields plus the retention decision
    the migration made (docs/retention.md), made again here; a temporary node's
    ``expires_at`` (an instant of the migration run, kept by later runs) is the one
    the file holds unless the row gave it."""
    expected = row_node.copy()
    retention.imply_tier(expected)  # as the write path does
    explicit = expected.retention_tier is not None
    given = expected.expires_at if explicit else None
    store._ret.decide(expected, now=0.0, kept=None, explicit=explicit)
    if expected.retention_tier == "temp" and given is None:
        expected.expires_at = actual.expires_at
    return expected


def diff_nodes(expected: Node, actual: Node) -> tuple[list[str], str]:
    """Names of the fields where ``actual`` differs from ``expected``, and the first difference.

    Compares every :class:`Node` field with strict types; ``extra`` key by key
    (``extra.<key>``) and ``edges`` edge by edge and attribute by attribute
    (``edges[<i>].<attr>``, plus ``edges.count`` when the counts differ).
    """
    names: list[str] = []
    first: tuple[str, Any, Any] | None = None

    def note(name: str, a: Any, b: Any) -> None:
        nonlocal first
        names.append(name)
        if first is None:
            first = (name, a, b)

    for f in fields(Node):
        a, b = getattr(expected, f.name), getattr(actual, f.name)
        if f.name == "edges":
            for i, (ea, eb) in enumerate(zip(a, b, strict=False)):
                for attr in _EDGE_ATTRS:
                    if not _same(getattr(ea, attr), getattr(eb, attr)):
                        note(f"edges[{i}].{attr}", getattr(ea, attr), getattr(eb, attr))
            if len(a) != len(b):
                note("edges.count", len(a), len(b))
        elif f.name == "extra":
            for key in list(a) + [k for k in b if k not in a]:
                va, vb = a.get(key, _ABSENT), b.get(key, _ABSENT)
                if va is _ABSENT or vb is _ABSENT or not _same(va, vb):
                    note(f"extra.{key}", va, vb)
        elif not _same(a, b):
            note(f.name, a, b)
    detail = ""
    if first is not None:
        name, a, b = first
        detail = f"{name}: source {_show(a)}, file {_show(b)}"
    return names, detail


# -- the passes ----------------------------------------------------------------------------


def _bad_row(row: RowResult) -> BadRow:
    return BadRow(row.rowid, row.node_id, row.reason, row.table)


#: :func:`md_cg.sqlite_source.iter_storable_rows` (the census reads the same rows).
_rows = iter_storable_rows


def _tally(report: MigrationReport, row: RowResult) -> Node | None:
    """Count one source result into the report; the node if the row is good."""
    if row.node is None:
        report.bad_rows.append(_bad_row(row))
        return None
    node = row.node
    report.migrated += 1
    report._good.add(node.id)
    report._edges.extend((node.id, e.target) for e in node.edges)
    return node


def _count_result(report: MigrationReport, placed: Iterable[tuple[str, str | None]]) -> None:
    """The report's ``layers`` and ``buckets`` from the (layer, bucket) of each memory of
    the store the run leaves (a dry run: would leave), archived ones left out: the rows
    kept or refused are not counted where the row would be (they were, as every good
    row: 12 knowledge rows into a store in use said 12 where the store held 9)."""
    layers: Counter[str] = Counter()
    buckets: Counter[str] = Counter()
    for layer, bucket in placed:
        layers[layer] += 1
        if layer == layout.BUCKETED_LAYER:
            buckets[bucket or layout.ORPHAN] += 1
    report.layers = {layer: layers[layer] for layer in LAYERS if layers[layer]}
    report.buckets = dict(sorted(buckets.items()))


def classify(store: MdCG | None, root: Path, node: Node) -> str:
    """What ``add_many(overwrite=True)`` will do with ``node``: created/updated/moved/unchanged
    (:meth:`MdCG.write_outcome`; without a store yet, the file at the node's path decides)."""
    if store is not None:
        return store.write_outcome(node)
    same = fsops.holds(str(root), layout.rel_path(node), nodefile.dump_bytes(node), read_as=nodefile.lf_file)
    return "created" if same is None else "unchanged" if same else "updated"


#: Id -> how each id that left the store left it (:class:`md_cg.audit.Gone`): forgotten or renamed.
Departed = dict[str, audit.Gone]


def forgotten_ids(store: MdCG) -> Departed:
    """Id -> the last departure of each id from the store (:class:`md_cg.audit.Gone`):
    forgotten (or swept; new id None), or renamed (the new id), and not brought back since."""
    return audit.departed(store.log(paths.AUDIT_DIR).read())


def _twin_held(node_id: str, twin: str) -> str:
    """:func:`kept_reason` of a row whose id the store holds in another letter case or
    Unicode form: a second memory, one file on macOS and Windows."""
    label, twin_label = twin_labels(node_id, twin)
    return (
        f"the store holds {twin_label}, which differs from {label} only by letter case or Unicode "
        "normalisation (one file on macOS and Windows); rename one of them"
    )


def kept_reason(store: MdCG, node: Node, forgotten: Departed, overwrite: bool) -> str | None:
    """Why a run leaves the store's memory under ``node.id`` as it is, or None to write it.

    Never replaced: an archived memory (unarchive it first). Unless ``overwrite``: one
    changed in the store after the source's version (its ``updated_at`` is later than
    the row's, and it differs in more than that: a move the run made itself stamps
    ``updated_at`` too), one that differs from the row and has neither an ``updated_at``
    nor the row's ``created_at`` (a note written by hand, a memory stored with
    ``stamp=False``: not known to be older) and an id forgotten or renamed in the store that no memory
    holds now (a renamed one is the memory under its new id: written again under the
    old one, it would be a second copy).
    """
    try:
        entry = store.entry(node.id, include_expired=True, include_archived=True)
    except NodeNotFoundError as exc:
        if exc.hint.startswith("its file "):  # a file of that name the index could not use
            hint = exc.hint.removesuffix("; fix it, then sync")  # as a read says it, or a write
            return f"{hint}; fix it, then run again (it is not written over)"
        twin = store._engine.state.twin_of(node.id)
        if twin is not None:
            return _twin_held(node.id, twin)
        if node.id in forgotten and not overwrite:
            return audit.not_brought_back(node.id, forgotten, store._engine.state.entries.__contains__)
        return foreign_file(store._engine, node)
    if entry.id != node.id:  # found under its other Unicode form (a read by id takes either)
        return _twin_held(node.id, entry.id)
    if entry.archived:
        return f"archived in this store ({entry.path}); unarchive it to let the migration replace it"
    # A copy md-cg has stamped later than the row's time (or than a row without one) is
    # the store's own change. One without a time is this migration's own copy of a row
    # without one when it has the row's created_at (written again: the source's edits
    # reach it); any other (a note written by hand, a memory stored with stamp=False) is
    # not known to be older than the row: kept when it differs, so a run never loses it
    # (such notes were replaced, and one in another layer moved to the row's folder).
    if overwrite:
        return None
    if entry.updated_at is None:
        if node.created_at is not None and entry.created_at == node.created_at:
            return None
    elif node.updated_at is not None and entry.updated_at <= node.updated_at:
        return None
    try:
        actual = store.get(node.id, include_expired=True)
    except MalformedNodeFileError as exc:  # a newer memory whose file broke: not written over
        return f"changed in this store after the source's version, and its file does not parse ({exc})"
    except (NodeNotFoundError, OSError):
        return None  # the file is gone: the source's version is written again
    names, _ = diff_nodes(expected_after_retention(store, node, actual), actual)
    if not [n for n in names if n != "updated_at"]:
        return None
    if entry.updated_at is None:
        return (
            f"{entry.path} has no updated_at and not the row's created_at, so it is not known to be "
            f"older than the source's version ({', '.join(names[:4])} differ); a run with overwrite "
            "(--overwrite) replaces it"
        )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(entry.updated_at))
    return f"changed in this store ({when}) after the source's version ({', '.join(names[:4])})"


def pick_up_hand_edits(store: MdCG) -> None:
    """Bring ``store``'s index up to date with files changed by hand since they were
    indexed (a stat scan, then those files read again), as :meth:`MdCG.sync_if_changed`
    does, without starting a watch. A read-only handle updates only its own view; a
    writable one logs the changes for other processes, as ``sync`` does."""
    engine = store._engine
    with engine.lock:
        engine.fresh()
        changed = maintenance.stale_paths(engine)
        if changed:
            maintenance.sync_paths(engine, changed)


def _file_state(store: MdCG, root: Path, node: Node) -> str | tuple[int, int, int] | None:
    """Before a write: ``"moved"``, or the (inode, mtime, size) of the node's file, or None."""
    rel = layout.rel_path(node)
    if node.id in store and store.entry(node.id).path != rel:
        return "moved"
    try:
        st = (root / rel).stat()
    except (FileNotFoundError, NotADirectoryError):  # a file where a folder belongs: refused
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _status_after(root: Path, node: Node, before: str | tuple[int, int, int] | None) -> str:
    """After ``add_many``: created, moved, unchanged (the very same file) or updated."""
    if before is None or before == "moved":
        return before or "created"
    st = (root / layout.rel_path(node)).stat()
    return "unchanged" if (st.st_ino, st.st_mtime_ns, st.st_size) == before else "updated"


#: Seconds a file's mtime may lag the clock a run read at its start (a coarse file system
#: clock, whole-second mtimes): a file of the interrupted run is never taken for an older one.
_MTIME_SLACK = 2.0


def _of_interrupted_run(report: MigrationReport, before: str | tuple[int, int, int] | None) -> bool:
    """Whether a file a resumed run found already holding its row's bytes was written by the
    interrupted run (its mtime is not before that run started): a row of the batch it was
    writing when stopped (Ctrl-C inside a commit), after its checkpoint. Such rows were
    counted ``unchanged``, as if the store had held them before the migration (session 38)."""
    since = report._resumed_since_ns
    return since is not None and isinstance(before, tuple) and before[1] >= since


def _count(report: MigrationReport, node: Node, status: str) -> None:
    if status == "skipped":
        report.skipped += 1
    elif status == "created":
        report.created += 1
    elif status == "unchanged":
        report.unchanged += 1
    else:
        report.updated += 1
        report.moved += status == "moved"
        report.changed_ids.append(node.id)
        if status == "moved":
            report.moved_ids.append(node.id)


def _check_dest(dest: Path) -> None:
    """Refuse a destination that is a file, a non-empty folder that is no store, or a
    folder inside another store (before anything is made there)."""
    check_not_nested(dest)
    if not dest.exists():
        return
    if not dest.is_dir():
        raise MigrationError(f"{dest}: the destination exists and is not a folder")
    if (dest / ".mdcg").is_dir():
        return
    known = {*LAYERS, ".gitignore"}
    foreign = sorted(n for n in os.listdir(dest) if n not in known and not n.startswith("."))
    if foreign:
        raise MigrationError(
            f"{dest}: the destination folder is not empty and is not an md-cg store "
            f"(it holds {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); "
            "choose a new or empty folder"
        )


def _tick(progress: ProgressFn | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done, total)


def _dry_run(
    conn: sqlite3.Connection, dest: Path, report: MigrationReport, progress: ProgressFn | None
) -> None:
    store = MdCG(dest, read_only=True, create=False) if dest.is_dir() else None
    forgotten = forgotten_ids(store) if store is not None else {}
    looked: set[str] = set()
    placed: dict[str, tuple[str, str | None]] = {}  # id -> (layer, bucket) after a run
    try:
        if store is not None:
            pick_up_hand_edits(store)  # as the run will (a read-only view: writes nothing)
            placed = {e.id: (e.layer, e.bucket) for e in store.entries(include_expired=True)}
        total, done = report.rows, 0
        for row in _rows(conn):
            node = _tally(report, row)
            if row.table != "nodes":
                continue
            done += 1
            if node is None:
                pass
            elif store is not None and (why := kept_reason(store, node, forgotten, report.overwrite)):
                report.kept.append((node.id, why))
            elif not _dry_refused(report, dest, node, looked):
                try:
                    _count(report, node, classify(store, dest, node))
                    placed[node.id] = (node.layer, layout.bucket_of(node))
                except UnsafePathError as exc:  # a symlinked folder: the run would refuse the row
                    _refuse(report, [node], exc)
            if done % report.batch == 0:
                _tick(progress, done, total)
        _tick(progress, done, total)
        _count_result(report, placed.values())
    finally:
        if store is not None:
            store.close()


def _dry_refused(report: MigrationReport, dest: Path, node: Node, looked: set[str]) -> bool:
    """Whether the run would refuse the folder of ``node`` (a symlink or a file on the way:
    listed in ``report.refused`` if so), as an import's dry run says; each folder looked
    at once."""
    if _refused_before(report, node):
        return True
    folder = layout.rel_path(node).rpartition("/")[0]
    if folder in looked:
        return False
    looked.add(folder)
    exc = fsops.folder_refusal(str(dest), folder)
    return exc is not None and _refuse(report, [node], exc)


def _resume_point(
    store: MdCG,
    journal: _Journal,
    src: Path,
    dest: Path,
    report: MigrationReport,
    identity: dict[str, Any],
    resume: bool,
) -> tuple[int | None, bool]:
    """The rowid to resume after (None: from the start; a source's rowids may be 0 or
    negative) and whether a run was interrupted."""
    previous = read_journal(src, dest)
    interrupted = False
    start_after: int | None = None
    if previous is not None and not previous.get("complete"):
        interrupted = True
        if not resume:
            report.restarted = "an interrupted run was found, but resume was turned off"
        elif previous["identity"] != identity:
            report.restarted = "the source changed since the interrupted run (size, mtime or sha256 differ)"
        else:
            start_after = previous["rowid"]
            started = previous.get("started_at")
            if isinstance(started, int | float) and not isinstance(started, bool):
                report._resumed_since_ns = int((started - _MTIME_SLACK) * 1e9)
            journal.record["started_at"] = previous.get("started_at", time.time())
        # Clean up after the interrupted writer: its temp files, index drift.
        synced = store.sync()
        report.recovered = synced.recovered
        report.undone = synced.undone
        report.temp_removed = list(synced.temp_removed) + journal.remove_abandoned_temps()
    return start_after, interrupted


def _writable(
    store: MdCG, pending: list[Node], forgotten: Departed, report: MigrationReport, src: Path
) -> list[Node]:
    """The nodes of a batch to write: the others are kept (:func:`kept_reason`, listed in
    the report). A forgotten id that ``overwrite`` brings back gets a ``restored`` record
    in the audit log first, so health does not take it for one git brought back."""
    writing = []
    for n in pending:
        why = kept_reason(store, n, forgotten, report.overwrite)
        if why is None:
            writing.append(n)
        else:
            report.kept.append((n.id, why))
    back = [n for n in writing if n.id in forgotten]
    if back:
        audit.log_restored(store.log(paths.AUDIT_DIR), back, f"migrated again from {src} with overwrite")
        for n in back:
            del forgotten[n.id]
    return writing


def _flush(store: MdCG, dest: Path, src: Path, pending: list[Node], report: MigrationReport) -> bool:
    """Write the batch ``pending`` (emptied) and count it; True when a file changed.

    Under the ids' locks from the look to the write, the tombstones read again
    there: an agent's forget or update of one of them lands before the look
    (and is kept) or after the write."""
    if report._refused_paths:  # a folder an earlier batch found refused: its rows are not tried
        pending[:] = [n for n in pending if not _refused_before(report, n)]
    engine = store._engine
    with engine.lock, engine.hold([n.id for n in pending]):
        return _write_held(store, dest, src, pending, forgotten_ids(store), report)


def _refused_before(report: MigrationReport, node: Node) -> bool:
    """Whether ``node`` belongs under a path of the store a write refused (listed if so)."""
    rel = layout.rel_path(node)
    for where, why in report._refused_paths.items():
        if rel == where or rel.startswith(where + "/"):
            report.refused.append((node.id, where, why))
            return True
    return False


def _refuse(report: MigrationReport, nodes: list[Node], exc: UnsafePathError) -> bool:
    """Take out of ``nodes`` (in place) those under the path ``exc`` refuses (a folder
    that is a symlink, a file where a folder belongs...), listed in ``report.refused``;
    False when none is (the error is not about these nodes)."""
    report._refused_paths[exc.path] = exc.reason
    left = [n for n in nodes if not _refused_before(report, n)]
    if len(left) == len(nodes):
        del report._refused_paths[exc.path]
        return False
    nodes[:] = left
    return True


def _write_held(
    store: MdCG,
    dest: Path,
    src: Path,
    pending: list[Node],
    forgotten: Departed,
    report: MigrationReport,
) -> bool:
    pending[:] = _writable(store, pending, forgotten, report, src)
    before = [_file_state(store, dest, n) for n in pending]
    moved = [n for n, b in zip(pending, before, strict=True) if b == "moved"]
    batch = [n.copy() if b == "moved" else n for n, b in zip(pending, before, strict=True)]
    try:
        store.add_many(batch, overwrite=True, stamp=False, durable=report.durable, decide=True, checked=False)
    except IdCollisionError:
        # another process (a second migration, an agent) took a twin id meanwhile
        store.refresh()
        return _write_held(store, dest, src, pending, forgotten, report)
    except UnsafePathError as exc:
        # a folder the store refuses (a symlink): nothing was written; its rows are
        # listed, the rest of the batch is written
        if not _refuse(report, pending, exc):
            raise
        return _write_held(store, dest, src, pending, forgotten, report)
    if moved:
        # A move stamps updated_at; put the source's value back.
        store.add_many(moved, overwrite=True, stamp=False, durable=report.durable, decide=True, checked=False)
    wrote = False
    for n, b in zip(pending, before, strict=True):
        status = _status_after(dest, n, b)
        if status == "unchanged" and _of_interrupted_run(report, b):
            status = "skipped"
        _count(report, n, status)
        changed = status not in ("unchanged", "skipped")
        report.rewritten += changed and n.id in report._rewriting  # not kept, not refused
        wrote = wrote or changed
    pending.clear()
    return wrote


def _write(
    conn: sqlite3.Connection,
    src: Path,
    dest: Path,
    report: MigrationReport,
    identity: dict[str, Any],
    *,
    resume: bool,
    progress: ProgressFn | None,
) -> _Journal:
    """The write pass: stream rows, group-commit nodes, checkpoint the journal."""
    store = MdCG(dest, durable=report.durable)
    journal = _Journal(src, dest, identity, report.durable)
    try:
        start_after, interrupted = _resume_point(store, journal, src, dest, report, identity, resume)
        # Files edited by hand since they were indexed (a broken merge, an id edited to
        # another): as they are now, so kept_reason lists them instead of a write refusing.
        pick_up_hand_edits(store)
        report.resumed_from = start_after
        journal.save(rowid=start_after, rows_done=0, complete=False)

        total, done = 2 * report.rows, 0
        pending: list[Node] = []
        last_rowid = start_after
        wrote = False

        def flush() -> None:
            nonlocal wrote
            wrote = _flush(store, dest, src, pending, report) or wrote

        for row in _rows(conn):
            node = _tally(report, row)
            if row.table != "nodes":
                continue
            done += 1
            if start_after is not None and row.rowid <= start_after:
                if node is None:
                    continue
                if node.id in store._engine.state.entries:
                    report.skipped += 1
                    continue
                report._rewriting.add(node.id)  # the journal says written, the file is gone
            last_rowid = row.rowid
            if node is not None:
                pending.append(node)
            if len(pending) >= report.batch:
                flush()
                journal.save(rowid=last_rowid, rows_done=done)
                _tick(progress, done, total)
        if pending:
            flush()
        journal.save(rowid=last_rowid, rows_done=done)
        _tick(progress, done, total)
        if wrote or interrupted:
            # Fold the log into a snapshot: the store (and the check below) opens fast.
            store.compact_index()
    finally:
        store.close()
    return journal


def _verify(
    conn: sqlite3.Connection,
    dest: Path,
    report: MigrationReport,
    *,
    tally: bool,
    progress: ProgressFn | None,
    offset: int,
    total: int,
) -> None:
    """The verification pass: every good row against its file, read by a fresh reader."""
    with MdCG(dest, read_only=True, create=False, refresh_interval=None) as store:
        health = store.health()  # before the pick-up: it names the files changed by hand
        pick_up_hand_edits(store)  # as a run does first (a read-only view: writes nothing)
        report.dest_findings = dict(sorted(Counter(f.kind for f in health.findings).items()))
        unreadable = {f.path: f.detail for f in health.findings if f.kind == "unreadable_file"}
        untracked = {f.node_id: f.path for f in health.findings if f.kind == "untracked_file"}
        good: set[str] = set()
        kept = {i for i, _ in report.kept} | {i for i, _, _ in report.refused}  # not written: listed
        forgotten = forgotten_ids(store)
        done = 0
        for row in _rows(conn):
            node = _tally(report, row) if tally else row.node
            if row.table != "nodes":
                continue
            done += 1
            if done % report.batch == 0:
                _tick(progress, offset + done, total)
            if node is None:
                continue
            good.add(node.id)
            if node.id in kept:
                continue
            rel = layout.rel_path(node)
            # a file the index cannot use (broken by hand) is kept, as the run lists it
            why = kept_reason(store, node, forgotten, report.overwrite)
            if why is not None:
                report.kept.append((node.id, why))
                continue
            try:
                actual = store.get(node.id, include_expired=True)
            except MalformedNodeFileError as exc:
                report.mismatches.append(Mismatch(node.id, (_UNREADABLE,), str(exc)))
                continue
            except (NodeNotFoundError, OSError):
                if rel in unreadable:
                    detail = f"{rel}: {unreadable[rel]}"
                    report.mismatches.append(Mismatch(node.id, (_UNREADABLE,), detail))
                elif node.id in untracked:
                    detail = f"{untracked[node.id]} holds it but the index does not; run sync()"
                    report.mismatches.append(Mismatch(node.id, (_MISSING,), detail))
                elif not _kept_since(store, node, report, forgotten):
                    detail = f"no node file for this id (expected {rel})"
                    report.mismatches.append(Mismatch(node.id, (_MISSING,), detail))
                continue
            report.verified += 1
            names, detail = diff_nodes(expected_after_retention(store, node, actual), actual)
            where = store.entry(node.id, include_expired=True).path
            if where != rel:
                names.append(_PATH)
                detail = detail or f"file at {where}, expected {rel}"
            if names and not _kept_since(store, node, report, forgotten):
                report.mismatches.append(Mismatch(node.id, tuple(names), detail))
        _tick(progress, offset + done, total)
        report.extras = sorted(set(store.ids()) - good)
        _count_result(report, ((e.layer, e.bucket) for e in store.entries(include_expired=True)))


def _kept_since(store: MdCG, node: Node, report: MigrationReport, forgotten: Departed) -> bool:
    """Whether a node that differs from its row was changed by another process since the
    verification's index was read (an agent at work during the migration): the index is
    brought up to date and the node listed as kept if it now is."""
    store.refresh()
    why = kept_reason(store, node, forgotten, report.overwrite)
    if why is not None:
        report.kept.append((node.id, why))
    return why is not None


def _migrate_locked(
    conn: sqlite3.Connection,
    src_path: Path,
    dest_path: Path,
    report: MigrationReport,
    identity: dict[str, Any],
    started: float,
    resume: bool,
    progress: ProgressFn | None,
) -> None:
    """Write then verify, holding the migration lock of this (source, store) pair."""
    _check_dest(dest_path)
    dest_path.mkdir(parents=True, exist_ok=True)
    lock = fsops.FileLock(
        str(dest_path),
        f"{JOURNAL_DIR}/{journal_path(src_path, dest_path).with_suffix('.lock').name}",
        what="migration",
    )
    try:
        lock.acquire(timeout=0)
    except LockTimeoutError:
        raise MigrationError(
            f"{dest_path}: another migration of {src_path} into this store is running"
        ) from None
    try:
        journal = _write(conn, src_path, dest_path, report, identity, resume=resume, progress=progress)
        report.write_seconds = time.perf_counter() - started
        _verify(
            conn, dest_path, report, tally=False, progress=progress, offset=report.rows, total=2 * report.rows
        )
        report.verify_seconds = time.perf_counter() - started - report.write_seconds
        journal.save(
            complete=True,
            ok=not report.mismatches,
            mismatches=len(report.mismatches),
            bad_node_rows=report.bad_node_rows,
            bad_edge_rows=report.bad_edge_rows,
        )
    finally:
        lock.release()


def _run(
    src: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    mode: str,
    *,
    batch: int,
    durable: bool,
    progress: ProgressFn | None,
    resume: bool,
    overwrite: bool = False,
) -> MigrationReport:
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    started = time.perf_counter()
    src_path, dest_path = Path(src), Path(dest)
    open_readonly(src_path).close()  # a missing file or no database: refused first, by name
    # The identity before the connection that reads: closing a file of the source drops
    # every sqlite (POSIX) lock this process holds on it, and a writer closing then took
    # itself for the last connection, checkpointed and deleted the -wal under the read
    # ("database disk image is malformed").
    identity = source_identity(src_path)
    conn = open_readonly(src_path)
    try:
        # One read transaction for the count and every pass: a writer at work on a WAL
        # source made the report say rows 10,275 but migrated 10,278, and the check find
        # 936 'mismatches' that were rows written after the write pass. Taken after the
        # identity, so a write it does not see still shows as source_changed.
        conn.execute("BEGIN")
        report = MigrationReport(
            source=str(src_path),
            dest=str(dest_path),
            mode=mode,
            rows=count_rows(conn),
            source_sha256=identity["sha256"],
            batch=batch,
            durable=durable,
            overwrite=overwrite,
        )
        if mode == "dry-run":
            _check_dest(dest_path)
            _dry_run(conn, dest_path, report, progress)
            report.write_seconds = time.perf_counter() - started
        elif mode == "verify":
            if not dest_path.is_dir():
                raise MigrationError(f"{dest_path}: no such store folder to verify")
            _verify(conn, dest_path, report, tally=True, progress=progress, offset=0, total=report.rows)
            report.verify_seconds = time.perf_counter() - started
        else:
            _migrate_locked(conn, src_path, dest_path, report, identity, started, resume, progress)
    except sqlite3.Error as exc:
        # The reader turns bad values into bad rows; what is left here is the
        # database itself failing mid-read (undecodable text, corruption).
        raise MdcgError(
            f"{src_path}: reading the database failed ({exc}); batches committed before "
            "it are kept and a re-run resumes after them"
            if mode == "migrate"
            else f"{src_path}: reading the database failed ({exc})"
        ) from None
    finally:
        conn.close()
    report.source_changed = source_identity(src_path) != identity
    # edges kept in the files whose target is no migrated node (not in the source, or a bad row)
    # their files keep the store's edges, not the row's (a refused row has no file)
    kept = {i for i, _ in report.kept} | {i for i, _, _ in report.refused}
    report.dangling_edges = [(a, b) for a, b in report._edges if b not in report._good and a not in kept]
    report.seconds = time.perf_counter() - started
    return report


def migrate(
    src: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
    durable: bool = False,
    progress: ProgressFn | None = None,
    resume: bool = True,
    overwrite: bool = False,
) -> MigrationReport:
    """Migrate the sqlite database ``src`` into the store folder ``dest``, then verify it.

    A memory the store holds under a row's id is left as it is, and listed in the
    report's ``kept``, when it is archived, or (unless ``overwrite``) changed in the
    store after the source's version or forgotten there (:func:`kept_reason`): a
    re-run never undoes what the agent did with its memories since.

    ``batch`` nodes go into each group commit; ``durable=True`` fsyncs every
    file, folder and log append (and the journal). ``progress(done, total)``
    is called after each batch and at the end of each pass; ``total`` is twice
    the number of ``nodes`` rows (each row is counted once when written and
    once when verified; a dry run counts each row once). ``resume=False``
    ignores an unfinished journal and starts from the first row.

    Raises :class:`~md_cg.errors.MdcgError` naming the path when the source
    cannot be read as a cognitive-graph database, and
    :class:`MigrationError` when ``dest`` is a file, a non-empty folder that
    is no store, or another migration of the same source into it is running.
    """
    mode = "dry-run" if dry_run else "migrate"
    return _run(
        src, dest, mode, batch=batch, durable=durable, progress=progress, resume=resume, overwrite=overwrite
    )


def verify_migration(
    src: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    progress: ProgressFn | None = None,
) -> MigrationReport:
    """Compare every good row of ``src`` with its node in the store ``dest``; write nothing.

    The same check :func:`migrate` ends with, on its own: the report's
    ``mismatches`` list every node whose file is missing, misplaced or differs
    in any field or edge. Like a run, it first reads again the files changed by
    hand (in its own view) and lists in ``kept`` what a run would keep -- a
    file that does not parse among them -- so it agrees with the run before it.
    ``progress(done, total)`` counts ``nodes`` rows.
    """
    return _run(src, dest, "verify", batch=DEFAULT_BATCH, durable=False, progress=progress, resume=False)


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`migrate`.

    ``md_cg.migrate`` is both the function the package exports and the name of
    this module: importing the module (``from md_cg.migrate import
    verify_migration``) binds the package's attribute ``migrate`` to it, so
    the module itself must do what the function does. ``md_cg.migrate(src,
    dest)`` and ``from md_cg import migrate`` then run a migration whatever was
    imported before, and ``md_cg.migrate.verify_migration`` still reads as a
    module attribute.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> MigrationReport:
        return migrate(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:  # what help() and inspect show
        import inspect

        return inspect.signature(migrate)


sys.modules[__name__].__class__ = _CallableModule
