"""Access statistics: an append-only log, counted on read, folded on request.

Recording an access never touches a node file, the snapshot or the index
logs: it appends one line per node id to this process's own shard in
``.mdcg/access/``. :func:`read_counts` adds up the lines written after the
last fold; ``MdCG.compact_access`` folds them into the nodes' ``access_count``
and ``last_access`` frontmatter in one batch, then records which shard
offsets it has folded (``checkpoint.json``).

A fold is crash-safe: the absolute target values are written to
``fold.json`` before any node changes, and a fold interrupted midway is
finished from that journal by the next ``compact_access`` (setting absolute
values twice changes nothing), so no access is counted twice or lost.

Imports only :mod:`md_cg.fsops`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from . import fsops

ACCESS_DIR = "access"
CHECKPOINT = "checkpoint.json"
JOURNAL = "fold.json"


@dataclass
class AccessTail:
    """Counts since the last fold, and the shard offsets they reach."""

    counts: dict[str, int]
    last: dict[str, float]
    offsets: dict[str, int]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ValueError(f"{path}: not valid JSON; delete it only if no fold is pending") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return value


def checkpoint_offsets(directory: Path) -> dict[str, int]:
    data = read_json(directory / CHECKPOINT)
    return {str(k): int(v) for k, v in (data or {}).get("offsets", {}).items()}


def read_counts(directory: Path) -> AccessTail:
    """Add up every access line written after the checkpoint offsets."""
    offsets = checkpoint_offsets(directory)
    counts: dict[str, int] = {}
    last: dict[str, float] = {}
    ends = dict(offsets)
    for name in fsops.list_shards(directory):
        try:
            read = fsops.read_shard(directory / name, offsets.get(name, 0))
        except FileNotFoundError:
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


def write_checkpoint(directory: Path, offsets: dict[str, int]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    fsops.atomic_write(directory / CHECKPOINT, orjson.dumps({"offsets": offsets}), durable=True)


def write_journal(directory: Path, offsets: dict[str, int], targets: dict[str, list[Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    fsops.atomic_write(
        directory / JOURNAL, orjson.dumps({"offsets": offsets, "targets": targets}), durable=True
    )


def read_journal(directory: Path) -> dict[str, Any] | None:
    return read_json(directory / JOURNAL)


def clear_journal(directory: Path) -> None:
    fsops.remove_if_exists(directory / JOURNAL)


def remove_folded_shards(directory: Path, offsets: dict[str, int]) -> list[str]:
    """Delete shards fully folded whose writer is gone; return their names."""
    removed = []
    for name in fsops.list_shards(directory):
        fh = fsops.try_lock_exclusive(directory / name)
        if fh is None:
            continue
        try:
            if offsets.get(name, -1) == os.fstat(fh.fileno()).st_size:
                os.unlink(directory / name)
                removed.append(name)
        finally:
            fh.close()
    return removed
