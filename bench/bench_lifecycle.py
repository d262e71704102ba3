"""Lifecycle costs: sweep throughput and the price of hiding expired nodes in search.

    python bench/bench_lifecycle.py [--size 100000] [--expired 0.1] [--queries 200] [--work DIR]

Builds two stores of the same seed-shaped corpus (``md_cg.benchmark.corpus``):
``expired``, where every tenth node is a temporary node past its expiry, and
``plain``, the same nodes without any lifecycle field (the store as it was
before retention existed). In one run it measures

* search p50/p95 over the same queries on both (interleaved, so machine noise
  hits both alike); half the queries are about an expired node, and every
  result list of the ``expired`` store is checked to hold no expired node;
* ``sweep(dry_run=True)`` and ``sweep(dry_run=False)`` on the ``expired``
  store, beside a plain ``unlink`` of the very same files in the ``plain``
  store (no tombstones, no journal, no index, no scrub).

Prints a Markdown table with the machine (``nproc``, CPU model).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from md_cg import MdCG, Node
from md_cg.benchmark import corpus


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def build(root: Path, nodes: list[Node]) -> float:
    t = time.perf_counter()
    with MdCG(root, auto_compact=None) as s:
        for start in range(0, len(nodes), 2000):
            s.add_many(nodes[start : start + 2000], stamp=False)
        s.compact_index()
    return time.perf_counter() - t


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--expired", type=float, default=0.1)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="mdcg-lifecycle-"))
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    base = corpus(args.size)
    step = max(1, round(1 / args.expired))
    doomed = {n.id for i, n in enumerate(base) if i % step == 0}
    past = time.time() - 3600
    expired_nodes = [n.copy() for n in base]
    for n in expired_nodes:
        if n.id in doomed:
            n.retention_tier, n.expires_at = "temp", past
    say(f"{len(base):,} nodes, {len(doomed):,} expired; building two stores in {work}")
    t_exp = build(work / "expired", expired_nodes)
    t_plain = build(work / "plain", base)
    say(f"built in {t_exp:.0f}s and {t_plain:.0f}s")

    rng = random.Random(5)
    live = [n for n in base if n.id not in doomed and n.layer not in ("rejected", "unresolved")]
    dead = [n for n in base if n.id in doomed and n.layer not in ("rejected", "unresolved")]
    picks = rng.sample(live, args.queries // 2) + rng.sample(dead, args.queries - args.queries // 2)
    queries = [" ".join(n.body.split()[:3])[:40] for n in picks]

    exp = MdCG(work / "expired", refresh_interval=None, read_only=True)
    plain = MdCG(work / "plain", refresh_interval=None, read_only=True)
    # Warm both with every query first: the judge compiles each node's condition
    # patterns once per process, and whichever store ran a query first would pay it.
    for q in queries:
        exp.search(q, record=False)
        plain.search(q, record=False)
    times: dict[str, list[float]] = {"expired": [], "plain": []}
    tiers: dict[str, list[str]] = {"expired": [], "plain": []}
    leaks = 0
    for i, q in enumerate(queries):
        pair = (("expired", exp), ("plain", plain))
        for name, store in pair if i % 2 else pair[::-1]:
            t = time.perf_counter()
            results, meta = store.search(q, record=False)
            times[name].append((time.perf_counter() - t) * 1000)
            tiers[name].append(meta["tier"])
            if name == "expired":
                leaks += sum(1 for r in results if r.id in doomed)
    half = len(queries) // 2
    visible = len(exp)
    exp.close()
    plain.close()

    with MdCG(work / "expired") as s:
        t = time.perf_counter()
        dry = s.sweep()
        t_dry = time.perf_counter() - t
        t = time.perf_counter()
        done = s.sweep(dry_run=False)
        t_sweep = time.perf_counter() - t
    plain_paths = []
    with MdCG(work / "plain", read_only=True) as p:
        plain_paths = [p.path_of(i) for i in sorted(doomed)]
    t = time.perf_counter()
    for path in plain_paths:
        os.unlink(path)
    t_unlink = time.perf_counter() - t

    n = len(base)
    p50e, p50p = statistics.median(times["expired"]), statistics.median(times["plain"])
    rows = [
        ("search p50 (ms)", f"{p50e:.2f}", f"{p50p:.2f} (nothing expired)", f"{p50e / p50p:.3f}"),
        ("search p95 (ms)", f"{pct(times['expired'], 0.95):.2f}", f"{pct(times['plain'], 0.95):.2f}",
         f"{pct(times['expired'], 0.95) / pct(times['plain'], 0.95):.3f}"),
        ("p50, queries about a live node (ms)", f"{statistics.median(times['expired'][:half]):.2f}",
         f"{statistics.median(times['plain'][:half]):.2f}",
         f"{statistics.median(times['expired'][:half]) / statistics.median(times['plain'][:half]):.3f}"),
        ("p50, queries about an expired node (ms)", f"{statistics.median(times['expired'][half:]):.2f}",
         f"{statistics.median(times['plain'][half:]):.2f}",
         f"{statistics.median(times['expired'][half:]) / statistics.median(times['plain'][half:]):.3f}"),
        ("queries that fell to T3", str(tiers["expired"].count("T3")), str(tiers["plain"].count("T3")), "-"),
        ("expired nodes in results", str(leaks), "-", "-"),
        ("sweep dry run (s)", f"{t_dry:.3f}", "-", "-"),
        ("sweep (s)", f"{t_sweep:.2f}", f"{t_unlink:.2f} (unlink)", f"{t_sweep / t_unlink:.1f}"),
        ("sweep (nodes/s)", f"{len(done.removed) / t_sweep:,.0f}", f"{len(doomed) / t_unlink:,.0f}", "-"),
    ]  # fmt: skip
    print(f"Machine: nproc={os.cpu_count()}, {cpu_model()}, Python {platform.python_version()}")
    print(f"Store: {n:,} nodes, {len(doomed):,} expired ({visible:,} visible), {len(queries)} queries")
    print(f"Swept {len(done.removed):,} of {len(dry.expired):,} listed by the dry run")
    print()
    print("| measure | md-cg | baseline (same run) | ratio |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if leaks == 0 and len(done.removed) == len(doomed) else 1


if __name__ == "__main__":
    raise SystemExit(main())
