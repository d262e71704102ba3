"""Speed of the pure parts of issue 14: recall statistics and resurfacing.

    python bench/bench_recall.py [--events 1000000] [--nodes 100000] [--repeat 3] [--out FILE]

* ``recall_stats`` over a synthetic access log: every event inside the
  30-day window (the worst case: every id is counted), modes 50 % search
  (5 ids), 25 % inject (0-5 ids), 25 % get (1 id), ids drawn uniformly
  (no locality at all) or Zipf-like (s = 1.1, as real recall is skewed).
  Measured on decoded records, and end to end from JSON-lines bytes through
  orjson to show the decoding share the store will add.
* ``resurface`` on nodes dated uniformly over the 10 years before today,
  with 10,000 shows in the history: the index build (once per store state),
  a call on a new day (tier calendar not cached yet) and a repeated call.

Targets (issue 14): recall_stats ≤ 2 s for 1M events and 100k nodes;
resurface ≤ 50 ms p50 on 100k nodes. The store adds reading the log and the
nodes; these figures are the floor under that.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import orjson

from md_cg import MdCG, benchmark, recall, resurface
from md_cg.recall import StatsNode, recall_stats

NOW = datetime(2026, 2, 12, 12, 0, tzinfo=UTC)


def _events(n: int, ids: list[str], zipf: bool, seed: int = 7) -> list[dict[str, object]]:
    rng = random.Random(seed)
    now_ns = int(NOW.timestamp()) * 1_000_000_000
    span = 29 * 86_400 * 1_000_000_000
    cum = None
    if zipf:
        total = 0.0
        cum = []
        for rank in range(1, len(ids) + 1):
            total += rank**-1.1
            cum.append(total)
    out = []
    for _ in range(n):
        r = rng.random()
        mode, k = ("search", 5) if r < 0.5 else ("inject", rng.randint(0, 5)) if r < 0.75 else ("get", 1)
        picked = rng.choices(ids, cum_weights=cum, k=k) if cum else rng.choices(ids, k=k)
        out.append({"ts": now_ns - rng.randrange(span), "mode": mode, "agent": "main", "ids": picked})
    return out


def _time(fn: Callable[[], object], repeat: int) -> str:
    """Median wall time and CPU time of this process: on a shared machine the
    CPU time says what the work costs, the wall time what a user waits."""
    wall, cpu = [], []
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return f"{statistics.median(wall):.2f} s wall, {statistics.median(cpu):.2f} s CPU"


def _decode_only(data: bytes) -> int:
    # Streamed like the stats call, so the figure is the decoding share of it
    # (collecting a million dicts in a list would mostly time the GC).
    n = 0
    for line in data.split(b"\n"):
        n += len(orjson.loads(line))
    return n


def bench_stats(n_events: int, n_nodes: int, repeat: int) -> list[tuple[str, str, str]]:
    rng = random.Random(1)
    now_s = NOW.timestamp()
    nodes = [
        StatsNode(f"kp_{i:06d}", f"title {i}", now_s - rng.random() * 3650 * 86_400, rng.random() > 0.05)
        for i in range(n_nodes)
    ]
    ids = [n.id for n in nodes]
    rows = []
    for label, zipf in (("uniform ids", False), ("Zipf ids", True)):
        events = _events(n_events, ids, zipf)
        exposures = sum(len(e["ids"]) for e in events)  # type: ignore[arg-type]
        shared = _time(lambda ev=events: recall_stats(ev, nodes, now=NOW), repeat)
        lines = b"\n".join(orjson.dumps(e) for e in events)
        # What a JSON reader hands over: every id a fresh string object, so each
        # count hashes it and compares it with the table's key.
        events = [orjson.loads(x) for x in lines.split(b"\n")]
        fresh = _time(lambda ev=events: recall_stats(ev, nodes, now=NOW), repeat)
        del events
        parse = _time(lambda data=lines: _decode_only(data), 1)
        stream = _time(
            lambda data=lines: recall_stats((orjson.loads(x) for x in data.split(b"\n")), nodes, now=NOW),
            repeat,
        )
        what = f"recall_stats, {n_events:,} events ({exposures:,} exposures), {n_nodes:,} nodes, {label}"
        rows.append((what, "decoded records, ids shared with the node table", shared))
        rows.append((what, "decoded records, fresh id strings (as from a JSON reader)", fresh))
        rows.append((what, "streamed from JSON lines (orjson decode included)", stream))
        rows.append((what, "orjson decode alone", parse))
    return rows


def _percentiles(samples: list[float]) -> str:
    samples = sorted(samples)
    p50 = samples[len(samples) // 2] * 1000
    p95 = samples[int(len(samples) * 0.95)] * 1000
    return f"p50 {p50:.2f} ms, p95 {p95:.2f} ms"


def bench_resurface(n_nodes: int, calls: int) -> list[tuple[str, str, str]]:
    rng = random.Random(3)
    today = date(2026, 2, 12)
    first = today - timedelta(days=3652)
    cands = [(f"kp_{i:06d}", first + timedelta(days=rng.randrange(3652))) for i in range(n_nodes)]
    history = resurface.ShowHistory.from_records(
        resurface.show_record(rng.choice(cands)[0], today - timedelta(days=rng.randrange(1, 730)))
        for _ in range(10_000)
    )
    t0 = time.perf_counter()
    index = resurface.ResurfaceIndex(cands)
    build = time.perf_counter() - t0
    days = [today + timedelta(days=k) for k in range(calls)]
    cold: list[float] = []
    warm: list[float] = []
    tiers: Counter[int | None] = Counter()
    stages: Counter[str | None] = Counter()
    for k, day in enumerate(days):
        resurface._calendar.cache_clear()
        t0 = time.perf_counter()
        got = resurface.resurface(index, today=day, seed=k, history=history)
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        resurface.resurface(index, today=day, seed=k + 1, history=history)
        warm.append(time.perf_counter() - t0)
        tiers[got.tier if got else None] += 1
        stages[got.stage if got else None] += 1
    t0 = time.perf_counter()
    resurface.resurface(cands, today=today, seed=0, history=history)
    with_build = time.perf_counter() - t0
    what = f"resurface, {n_nodes:,} nodes over 10 years, 10,000 shows"
    picked = ", ".join(f"tier {k}: {v}" for k, v in sorted(tiers.items(), key=lambda kv: kv[0] or 99))
    how = ", ".join(f"{k}: {v}" for k, v in sorted(stages.items(), key=str))
    return [
        (what, "index build (once per store state)", f"{build * 1000:.0f} ms"),
        (what, f"call on a new day ({calls} days)", _percentiles(cold)),
        (what, "repeated call the same day", _percentiles(warm)),
        (what, "call on a list (index built inside)", f"{with_build * 1000:.0f} ms"),
        (what, "tiers picked in the new-day calls", picked),
        (what, "how they were found", how),
    ]


def bench_budget() -> list[tuple[str, str, str]]:
    queries = ["configure the nginx reverse proxy timeout", "上次我们讨论的部署方案", "ngin", ""] * 2500
    recall.needs_broad_recall("warm the cue cache")
    t0 = time.perf_counter()
    for q in queries:
        recall.adaptive_inject_budget(q, 5)
    per = (time.perf_counter() - t0) / len(queries) * 1e6
    return [("adaptive_inject_budget", "per call (mixed queries)", f"{per:.1f} µs")]


def _write_access_log(store: MdCG, ids: list[str], n_events: int, zipf: bool) -> Path:
    """``n_events`` access events as the store writes them, in one shard."""
    shard = store.root / ".mdcg" / "access" / f"bench_{'zipf' if zipf else 'uniform'}.jsonl"
    shard.parent.mkdir(parents=True, exist_ok=True)
    now_ns = time.time_ns()
    events = _events(n_events, ids, zipf)
    with open(shard, "wb") as fh:
        for seq, e in enumerate(events):
            e["ts"] = now_ns - (NOW_NS - int(e["ts"]))  # type: ignore[call-overload]
            fh.write(orjson.dumps({**e, "seq": seq}) + b"\n")
    return shard


NOW_NS = int(NOW.timestamp()) * 1_000_000_000


def bench_store(
    root: Path, n_nodes: int, n_events: int, repeat: int, calls: int
) -> list[tuple[str, str, str]]:
    """The store surface: recall_stats over the access log, resurface, inject beside search."""
    from bench_organize import build_store

    store = build_store(root, n_nodes)
    n = len(store)
    rows: list[tuple[str, str, str]] = []
    ids = store.ids()
    for zipf in (False, True) if n_events else ():
        shard = _write_access_log(store, ids, n_events, zipf)
        kind = "Zipf" if zipf else "uniform"
        what = f"MdCG.recall_stats, {n_events:,} events in the log, {n:,} nodes, {kind} ids"
        rows.append((what, "log read + decode + statistics", _time(store.recall_stats, repeat)))
        shard.unlink()
    days = [date.today() + timedelta(days=k) for k in range(calls)]
    store.resurface(days[0], seed=0)  # the index of the store's dates, built once per store state
    times = []
    for k, day in enumerate(days):
        t0 = time.perf_counter()
        store.resurface(day, seed=k)
        times.append(time.perf_counter() - t0)
    rows.append((f"MdCG.resurface, {n:,} nodes over 10 years", f"{calls} days", _percentiles(times)))
    queries = [e.title for e in store.entries()[:: max(1, n // 200)]][:200]
    for label, fn in (
        ("search (k=5, record=False)", lambda q: store.search(q, k=5, record=False)),
        ("inject (max_items=5, records)", lambda q: store.inject(q, 5)),
    ):
        for q in queries[:20]:
            fn(q)
        times = []
        for q in queries:
            t0 = time.perf_counter()
            fn(q)
            times.append(time.perf_counter() - t0)
        rows.append(
            (f"MdCG {label}, {n:,} nodes", f"{len(queries)} node titles as queries", _percentiles(times))
        )
    store.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--store", type=Path, default=None, help="also measure the store surface on this store folder"
    )
    ap.add_argument("--pure", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    rows = []
    if args.pure:
        rows += bench_resurface(args.nodes, args.calls) + bench_budget()
        rows += bench_stats(args.events, args.nodes, args.repeat)
    if args.store:
        rows += bench_store(args.store, args.nodes, args.events, args.repeat, args.calls)
    lines = [
        "### Recall statistics, resurfacing and inject",
        "",
        f"Machine: {benchmark.machine()}",
        "",
        "| workload | measure | result |",
        "|---|---|---|",
    ]
    lines += [f"| {w} | {m} | {r} |" for w, m, r in rows]
    text = "\n".join(lines)
    return benchmark.emit(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
