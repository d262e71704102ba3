"""Access statistics: an append-only log, counted on read, folded into local state.

Recording an access never touches a node file, the snapshot or the index
logs: it appends one line per node id to this process's own shard in
``.mdcg/access/``. Access counts are volatile, per-clone state: they are
kept out of the tracked ``.md`` files, so two clones of a memory folder
never conflict over them in a git merge.

:func:`read_counts` adds up the lines written after the last fold;
:func:`fold` adds them into ``.mdcg/access/counts.json`` -- the totals and
the shard offsets they reach, replaced in one atomic write, so a fold killed
at any point either happened entirely or not at all -- and removes the
shards it has fully folded whose writers are gone.

Imports only :mod:`md_cg.fsops`, :mod:`md_cg.paths` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import orjson

from . import fsops, paths
from .errors import UnsafePathError

ACCESS_REL = paths.meta(paths.ACCESS_DIR)
COUNTS = "counts.json"


@dataclass
class AccessTail:
    """Counts since the last fold, and the shard offsets they reach."""

    counts: dict[str, int]
    last: dict[str, float]
    offsets: dict[str, int]


@dataclass
class Folded:
    """The totals of every fold so far (``counts.json``)."""

    counts: dict[str, int]
    last: dict[str, float]
    offsets: dict[str, int]


def read_folded(root: str) -> Folded:
    """The folded totals; empty when nothing was folded yet.

    A damaged ``counts.json`` raises ValueError naming it: the totals are
    local state, and silently starting from zero would lose them. A symlink
    on the way is never followed: the folder counts as empty (``health()``
    reports the symlink as an ``unsafe_path``).
    """
    try:
        data, _ = fsops.read_file(root, f"{ACCESS_REL}/{COUNTS}")
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return Folded({}, {}, {})
    try:
        value = orjson.loads(data)
        return Folded(
            {str(k): int(v) for k, v in value["counts"].items()},
            {str(k): float(v) for k, v in value["last"].items()},
            {str(k): int(v) for k, v in value["offsets"].items()},
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        raise ValueError(
            f"{ACCESS_REL}/{COUNTS}: not a valid access fold; delete it to start counting anew"
        ) from None


def read_counts(root: str, offsets: dict[str, int] | None = None) -> AccessTail:
    """Add up every access line written after ``offsets`` (default: the last fold)."""
    if offsets is None:
        offsets = read_folded(root).offsets
    counts: dict[str, int] = {}
    last: dict[str, float] = {}
    ends = dict(offsets)
    try:
        names = fsops.list_shards(root, ACCESS_REL)
    except UnsafePathError:
        names = []
    for name in names:
        try:
            read = fsops.read_shard(root, f"{ACCESS_REL}/{name}", offsets.get(name, 0))
        except (FileNotFoundError, UnsafePathError):
            continue
        ends[name] = read.end
        for rec in read.records:
            node_id = rec.get("id")
            if not isinstance(node_id, str):
                continue
            counts[node_id] = counts.get(node_id, 0) + 1
            ts = rec.get("ts", 0) / 1e9
            if ts > last.get(node_id, 0.0):
                last[node_id] = ts
    return AccessTail(counts, last, ends)


def fold(root: str, keep: Any = None) -> dict[str, int]:
    """Fold the log into ``counts.json``; return the accesses folded per node.

    ``keep(node_id) -> bool`` drops the counts of nodes that no longer exist.
    The caller holds the exclusive store lock (no other fold runs).
    """
    folded = read_folded(root)
    tail = read_counts(root, folded.offsets)
    added = {i: c for i, c in tail.counts.items() if keep is None or keep(i)}
    counts = {i: c for i, c in folded.counts.items() if keep is None or keep(i)}
    last = {i: t for i, t in folded.last.items() if i in counts or i in added}
    for node_id, c in added.items():
        counts[node_id] = counts.get(node_id, 0) + c
        last[node_id] = max(last.get(node_id, 0.0), tail.last.get(node_id, 0.0))
    record = {
        "counts": dict(sorted(counts.items())),
        "last": dict(sorted(last.items())),
        "offsets": tail.offsets,
    }
    fsops.atomic_write(root, f"{ACCESS_REL}/{COUNTS}", orjson.dumps(record), durable=True)
    removed = _remove_folded_shards(root, tail.offsets)
    if removed:
        record["offsets"] = {k: v for k, v in tail.offsets.items() if k not in removed}
        fsops.atomic_write(root, f"{ACCESS_REL}/{COUNTS}", orjson.dumps(record), durable=True)
    return dict(sorted(added.items()))


def _remove_folded_shards(root: str, offsets: dict[str, int]) -> list[str]:
    """Delete shards fully folded whose writer is gone; return their names."""
    removed = []
    for name in fsops.list_shards(root, ACCESS_REL):
        rel = f"{ACCESS_REL}/{name}"
        fh = fsops.try_lock_exclusive(root, rel)
        if fh is None:
            continue
        try:
            if offsets.get(name, -1) == os.fstat(fh.fileno()).st_size:
                fsops.remove(root, rel)
                removed.append(name)
        finally:
            fh.close()
    return removed
