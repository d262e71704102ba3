"""Speed of organise (issue 13): dry run and apply on a large store, and the
concurrent-apply figures.

    python bench/bench_organize.py [--nodes 100000] [--work DIR] [--repeat 5] [--procs 4] [--out FILE]

* The store: the sample corpus (:func:`md_cg.benchmark.corpus`), ``created_at``
  spread over the ten years before today, built once under ``--work`` and
  reused by later runs (and by ``bench_recall.py --store``).
* Dry run: 50 candidates per run -- 10 with the title and text of a stored
  node, the title in another case and punctuation (``exact``), 10 stored texts lightly reworded
  (``near`` or ``new``: the guards decide), 30 new facts -- against every node;
  the first run (cold: title keys computed) and the median of the rest.
* Apply: a fresh dry run, then an apply that saves the 30 new candidates and
  archives the 10 exact matches in one ``apply_changes`` commit.
* Concurrency: ``--procs`` processes open the store and apply the same dry
  run at the same moment; exactly one must succeed (and only its nodes land).
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import time
from pathlib import Path
from typing import Any

from md_cg import MdCG, benchmark
from md_cg.errors import OrganizeApplyError
from md_cg.recall import content_of

TEN_YEARS = 3652 * 86_400.0


def build_store(root: Path, n: int, *, now: float | None = None) -> MdCG:
    """A store of ``n`` knowledge nodes dated over the ten years before ``now``;
    reused when ``root`` already holds one of that size."""
    if root.exists():
        store = MdCG(root, refresh_interval=None)
        if len(store) >= n:
            return store
        store.close()
    now = time.time() if now is None else now
    rng = random.Random(11)
    nodes = benchmark.corpus(n)
    for node in nodes:
        node.created_at = now - rng.random() * TEN_YEARS
        node.updated_at = node.created_at
    with MdCG(root) as store:
        for start in range(0, len(nodes), 5000):
            store.add_many(nodes[start : start + 5000], stamp=False)
        store.compact_index()
    return MdCG(root, refresh_interval=None)


def candidates(store: MdCG, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    entries = store.entries("knowledge")
    picked = rng.sample(entries, 20)
    out: list[dict[str, Any]] = []
    for e in picked[:10]:  # the stored text under its title in another case: exact
        content = content_of(store.get(e.id).body) or store.get(e.id).body
        out.append({"layer": "knowledge", "title": f"{e.title.upper()}!", "content": content})
    for e in picked[10:]:
        body = store.get(e.id).body
        words = body.split()
        out.append({"layer": "knowledge", "title": e.title, "content": " ".join(words[1:]) + " indeed"})
        out[-1]["title"] = f"About {e.title}"
    for k in range(30):
        out.append(
            {
                "layer": "knowledge",
                "title": f"Bench fact {seed}-{k}",
                "content": f"The bench run {seed} learned fact {k}: token{rng.randrange(10**9)}.",
            }
        )
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def bench_dry_run(store: MdCG, repeat: int) -> list[tuple[str, str]]:
    walls, cpus, verdicts = [], [], {}
    for k in range(repeat):
        cands = candidates(store, k)
        t0, c0 = time.perf_counter(), time.process_time()
        r = store.organize(candidates=cands)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        verdicts = dict(r.counts)
    rest = f"median of {len(walls) - 1} more" if len(walls) > 1 else "no more runs"
    first = f"{_ms(walls[0])} wall, {_ms(cpus[0])} CPU"
    warm = (
        f"{_ms(statistics.median(walls[1:] or walls))} wall, {_ms(statistics.median(cpus[1:] or cpus))} CPU"
    )
    return [
        ("dry run, 50 candidates, first call (title keys computed)", first),
        (f"dry run, 50 candidates, {rest}", warm),
        ("verdicts of the last run", ", ".join(f"{k} {v}" for k, v in verdicts.items())),
    ]


def bench_apply(store: MdCG, repeat: int) -> list[tuple[str, str]]:
    times, applied = [], 0
    for k in range(repeat):
        dry = store.organize(candidates=candidates(store, 1000 + k))
        decisions: list[dict[str, Any]] = [
            {"action": "save", "index": i.index} for i in dry.items if i.verdict == "new"
        ]
        decisions += [
            {"action": "archive", "id": i.match.id} for i in dry.items if i.verdict == "exact" and i.match
        ]
        t0 = time.perf_counter()
        r = store.organize("apply", run_id=dry.run_id, decisions=decisions)
        times.append(time.perf_counter() - t0)
        applied = r.applied
    return [
        (
            f"apply: save the new + archive the exact matches ({applied} changes), median",
            _ms(statistics.median(times)),
        )
    ]


def _apply_worker(root: str, run_id: str, decisions: list[Any], barrier: Any, out: Any) -> None:
    store = MdCG(root, refresh_interval=None)
    barrier.wait()
    t0 = time.perf_counter()
    try:
        r = store.organize("apply", run_id=run_id, decisions=decisions)
        out.put(("ok", time.perf_counter() - t0, sorted(r.saved_ids)))
    except OrganizeApplyError:
        out.put(("refused", time.perf_counter() - t0, []))
    finally:
        store.close()


def bench_concurrent(store: MdCG, procs: int) -> list[tuple[str, str]]:
    seed = 5000 + int(time.time()) % 100_000  # fresh facts on every run of the benchmark
    dry = store.organize(candidates=candidates(store, seed))
    decisions = [{"action": "save", "index": i.index} for i in dry.items if i.verdict == "new"]
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    workers = [
        ctx.Process(target=_apply_worker, args=(str(store.root), dry.run_id, decisions, barrier, out))
        for _ in range(procs)
    ]
    for w in workers:
        w.start()
    results = [out.get(timeout=600) for _ in workers]
    for w in workers:
        w.join()
    wins = [r for r in results if r[0] == "ok"]
    store.refresh()
    visible = {e.id for e in store.entries()}
    copies = sum(e.title.startswith(f"Bench fact {seed}-") for e in store.entries())
    # Exactly once: the winner's nodes are all there, and each new fact once.
    saved = wins[0][2] if wins else []
    ok = len(wins) == 1 and set(saved) <= visible and copies == 30
    slowest = max(r[1] for r in results)
    return [
        (
            f"{procs} processes apply one run at once",
            f"{len(wins)} success, {procs - len(wins)} refused; the winner's {len(saved)} nodes landed, "
            f"each fact once: {'yes' if ok else 'NO'}; slowest call {_ms(slowest)}",
        )
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdcg_bench_organize"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    store = build_store(args.work / f"s_{args.nodes}", args.nodes)
    built = time.perf_counter() - t0
    rows = [("store", f"{len(store):,} nodes (opened or built in {built:.0f} s)")]
    rows += bench_dry_run(store, args.repeat)
    rows += bench_apply(store, max(1, args.repeat // 2))
    rows += bench_concurrent(store, args.procs)
    store.close()
    lines = ["### Organise", "", f"Machine: {benchmark.machine()}", "", "| measure | result |", "|---|---|"]
    lines += [f"| {m} | {r} |" for m, r in rows]
    text = "\n".join(lines)
    return benchmark.emit(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
