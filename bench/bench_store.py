"""Write throughput and open time of the store, beside its baselines, in one run.

    python bench/bench_store.py [--sizes 1000,10000,100000] [--durable-sample 2000] [--out FILE]

For each size N (seed-shaped nodes from md_cg.sample, scaled to N knowledge
nodes) it measures, in the same process and on the same disk:

* md-cg ``add`` one node at a time (non-durable), ``add(durable=True)`` per
  node (on the first ``--durable-sample`` nodes: at ~1 ms each, 100k would take
  minutes), and ``add_many(durable=True)`` in batches of 1,000 (group commit);
* the raw floor: the very same file bytes written with a unique temp file +
  ``os.replace`` in a plain loop (and with fsync, for the durable rows);
* sqlite inserting the same records (reference schema of docs/sqlite-schema.md):
  one transaction for everything, and one committed transaction per record
  with ``synchronous=FULL`` for the durable rows;
* open: from the snapshot (after ``compact_index``), cold rebuild from the
  files (no snapshot; nodes/s), and, for reference, sqlite connect + reading
  every id.

Prints a Markdown table with ratios; ``--out`` also writes it to a file.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from md_cg import MdCG, layout, nodefile
from md_cg.node import Node
from md_cg.sample import build_nodes
from md_cg.sqlite_source import node_to_row

SCHEMA = """
CREATE TABLE nodes (id TEXT, layer TEXT, content TEXT, modality TEXT, importance REAL,
  confidence REAL, condition_space TEXT, tags TEXT, spatial TEXT, temporal TEXT,
  created_at REAL, semantic_coordinates TEXT, state_attributes TEXT, entity_id TEXT,
  verification_basis TEXT, non_applicable_conditions TEXT, access_count INTEGER,
  last_access REAL);
"""


def corpus(n: int) -> list[Node]:
    nodes = build_nodes(knowledge=n)
    for node in nodes:
        node.edges = []  # edges to ids outside a cut would only add dangling noise
    return nodes


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def raw_floor(root: Path, nodes: list[Node], durable: bool) -> float:
    """Same bytes, temp file + os.replace, no index, no log."""
    payload = [(layout.rel_path(n), nodefile.dumps(n).encode()) for n in nodes]
    made: set[Path] = set()
    t = time.perf_counter()
    for rel, data in payload:
        target = root / rel
        parent = target.parent
        if parent not in made:
            parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        tmp = parent / f".{target.name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        if durable:
            os.fsync(fd)
        os.close(fd)
        os.replace(tmp, target)
        if durable:
            dfd = os.open(parent, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
    return rate(len(payload), time.perf_counter() - t)


def sqlite_insert(path: Path, nodes: list[Node], durable_each: bool) -> float:
    rows = [node_to_row(n) for n in nodes]
    cols = list(rows[0].keys()) if rows else []
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL" if not durable_each else "PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA synchronous=FULL" if durable_each else "PRAGMA synchronous=NORMAL")
    conn.executescript(SCHEMA)
    sql = f"INSERT INTO nodes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    values = [tuple(r[c] for c in cols) for r in rows]
    t = time.perf_counter()
    if durable_each:
        for v in values:
            conn.execute("BEGIN")
            conn.execute(sql, v)
            conn.execute("COMMIT")
    else:
        conn.execute("BEGIN")
        conn.executemany(sql, values)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t
    conn.close()
    return rate(len(values), elapsed)


def sqlite_open(path: Path) -> float:
    t = time.perf_counter()
    conn = sqlite3.connect(path)
    ids = [r[0] for r in conn.execute("SELECT id FROM nodes")]
    conn.close()
    assert ids
    return time.perf_counter() - t


def bench_size(n: int, work: Path, durable_sample: int) -> list[tuple[str, str, str, str]]:
    nodes = corpus(n)
    total = len(nodes)
    rows: list[tuple[str, str, str, str]] = []

    # non-durable, one add per node
    root = work / f"md_{n}"
    with MdCG(root) as s:
        t = time.perf_counter()
        for node in nodes:
            s.add(node.copy(), stamp=False)
        ours = rate(total, time.perf_counter() - t)
    floor = raw_floor(work / f"raw_{n}", nodes, durable=False)
    sq = sqlite_insert(work / f"sq_{n}.db", nodes, durable_each=False)
    rows.append(
        (
            "write, non-durable (nodes/s)",
            f"{ours:,.0f}",
            f"raw floor {floor:,.0f}; sqlite {sq:,.0f}",
            f"{ours / floor:.0%} of floor; {ours / sq:.2f}× sqlite",
        )
    )

    # durable per node, on a sample
    sample = nodes[: min(durable_sample, total)]
    droot = work / f"mdd_{n}"
    with MdCG(droot) as s:
        t = time.perf_counter()
        for node in sample:
            s.add(node.copy(), durable=True, stamp=False)
        ours_d = rate(len(sample), time.perf_counter() - t)
    floor_d = raw_floor(work / f"rawd_{n}", sample, durable=True)
    sq_d = sqlite_insert(work / f"sqd_{n}.db", sample, durable_each=True)
    rows.append(
        (
            f"write, durable per node (nodes/s, first {len(sample):,})",
            f"{ours_d:,.0f}",
            f"raw floor+fsync {floor_d:,.0f}; sqlite commit each {sq_d:,.0f}",
            f"{ours_d / floor_d:.0%} of floor; {ours_d / sq_d:.2f}× sqlite",
        )
    )
    shutil.rmtree(droot)

    # durable batch (group commit)
    broot = work / f"mdb_{n}"
    with MdCG(broot) as s:
        t = time.perf_counter()
        for start in range(0, total, 1000):
            s.add_many([x.copy() for x in nodes[start : start + 1000]], durable=True, stamp=False)
        ours_b = rate(total, time.perf_counter() - t)
    rows.append(
        (
            "write, durable batch of 1,000 (nodes/s)",
            f"{ours_b:,.0f}",
            f"sqlite one txn {sq:,.0f}",
            f"{ours_b / sq:.2f}× sqlite",
        )
    )
    shutil.rmtree(broot)

    # open: cold rebuild from files, then from snapshot
    gc.collect()
    t = time.perf_counter()
    with MdCG(root) as s:
        cold = time.perf_counter() - t
        assert s.loaded_from == "files" and len(s) == total
        s.compact_index()
    gc.collect()
    t = time.perf_counter()
    with MdCG(root) as s:
        warm = time.perf_counter() - t
        assert s.loaded_from == "snapshot" and len(s) == total
    sq_open = sqlite_open(work / f"sq_{n}.db")
    rows.append(
        (
            "open from snapshot (s)",
            f"{warm:.3f}",
            f"sqlite connect+read ids {sq_open:.3f}",
            f"{warm / sq_open:.1f}× sqlite time",
        )
    )
    rows.append(
        ("cold rebuild from files (nodes/s)", f"{rate(total, cold):,.0f}", f"{cold:.2f} s for {total:,}", "")
    )
    for p in (root, work / f"raw_{n}"):
        shutil.rmtree(p)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--durable-sample", type=int, default=2000)
    ap.add_argument("--work", default=None, help="folder for the stores (default: a temp folder)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="mdcg-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; disk under {work}",
        "",
        "| N (knowledge nodes) | measure | md-cg | baselines (same run) | ratio |",
        "|---|---|---|---|---|",
    ]
    for n in sizes:
        for name, ours, base, ratio in bench_size(n, work, args.durable_sample):
            lines.append(f"| {n:,} | {name} | {ours} | {base} | {ratio} |")
            print(lines[-1], flush=True)
    shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines)
    print()
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
