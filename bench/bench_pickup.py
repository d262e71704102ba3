"""What a long-lived handle pays per call to stay current, beside sqlite, in one run.

    python bench/bench_pickup.py [--sizes 10000,100000] [--million] [--calls 100]
                                 [--work DIR] [--out FILE]

The MCP server, the memory-tool adapter and the LangGraph store keep one
``MdCG`` open and call ``sync_if_changed`` before every tool call or batch,
so that a note edited by hand, pulled by git or written by another process
is seen at the next call. This measures that call at each size, in a fresh
process per size and watch mode, on a seed-shaped store
(:func:`md_cg.benchmark.corpus`, written through the engine with
``add_many``) and compacted (a snapshot, as a store in use has):

* the first call (a stat scan of every file, then the watch starts);
* a call when nothing changed;
* a call after this handle's own ``update`` of one memory;
* a call after another process's ``update`` of one memory (a child process
  kept open, told by a pipe; the parent times only its own call);
* a call after one file, and after 100 files, were edited by hand
  (a line appended, as a person would);
* each followed by a ``get`` of a random id: what a tool call costs before
  it does its work.

Twice: with the watch md-cg uses on Linux (inotify), and with the stat-scan
fallback it uses elsewhere (inotify taken away in the child process:
``md_cg.watch._libc`` answers None), ``min_interval=0`` so every call scans.

The baseline is what a sqlite-backed memory server pays to notice other
writers and answer a point look-up: ``PRAGMA data_version`` and a ``SELECT``
by id on a connection kept open: idle, after its own ``UPDATE`` and after
another process's (WAL; the same rows). Hand edits have no sqlite
counterpart. Figures are medians and 95th percentiles of ``--calls`` calls
(``--scan-calls`` in the stat-scan mode; a tenth of them, at least 3, for
the 100-file edits), wall time; the growth lines compare the largest size
with the smallest.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import pct, write_sqlite, write_store

from md_cg import MdCG, benchmark

MODES = ("inotify", "stat scan")

#: The child that writes as "another process": one update per line read, "ok" back.
_WRITER = r"""
import sys
from md_cg import MdCG
root, kind = sys.argv[1], sys.argv[2]
if kind == "md":
    store = MdCG(root)
    for line in sys.stdin:
        store.update(line.strip(), body="changed by another process " + line.strip())
        print("ok", flush=True)
else:
    import sqlite3
    conn = sqlite3.connect(root, isolation_level=None)
    for line in sys.stdin:
        conn.execute("UPDATE nodes SET content = ? WHERE id = ?", ("changed " + line.strip(), line.strip()))
        print("ok", flush=True)
"""

#: One size and watch mode, in a fresh process: the figures as JSON on stdout.
_PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import bench_pickup
if sys.argv[4] == "stat scan":
    import md_cg.watch
    md_cg.watch._libc = lambda: None
print(json.dumps(bench_pickup.probe_store(sys.argv[2], json.loads(sys.argv[3]))))
"""


def _ms(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


class _Child:
    """A writer process kept open; :meth:`write` returns once its update is done."""

    def __init__(self, target: str, kind: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, target, kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def write(self, node_id: str) -> None:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(node_id + "\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError(f"the writer process failed on {node_id!r}")

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _append(root: str, paths: list[str]) -> None:
    for rel in paths:
        with open(os.path.join(root, rel), "a", encoding="utf-8") as fh:
            fh.write("Edited by hand during the pick-up benchmark.\n")


def _call(store: MdCG, ids: list[str], rng: random.Random) -> Callable[[], Any]:
    def run() -> None:
        store.sync_if_changed(min_interval=0)
        store.get(rng.choice(ids))

    return run


def probe_store(root: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Every md-cg figure of one size and watch mode (run in a fresh process)."""
    calls, rng = opts["calls"], random.Random(7)  # the stat-scan mode's calls are capped by the caller
    out: dict[str, Any] = {}
    out["open_ms"] = [_ms(lambda: out.setdefault("store", MdCG(root)))]
    store: MdCG = out.pop("store")
    ids = [e.id for e in store.entries("knowledge")]
    paths = {e.id: e.path for e in store.entries("knowledge")}
    out["first call"] = [_ms(lambda: store.sync_if_changed(min_interval=0))]
    out["nothing changed"] = [_ms(_call(store, ids, rng)) for _ in range(calls)]
    own = []
    for i in range(calls):
        store.update(rng.choice(ids), body=f"changed by this handle {i}")
        own.append(_ms(_call(store, ids, rng)))
    out["after own update"] = own
    child, other = _Child(root, "md"), []
    try:
        for _ in range(calls):
            child.write(rng.choice(ids))
            other.append(_ms(_call(store, ids, rng)))
    finally:
        child.close()
    out["after another process's update"] = other
    hand1 = []
    for _ in range(calls):
        _append(root, [paths[rng.choice(ids)]])
        hand1.append(_ms(_call(store, ids, rng)))
    out["after 1 hand edit"] = hand1
    hand100 = []
    for _ in range(max(3, calls // 10)):
        _append(root, [paths[i] for i in rng.sample(ids, 100)])
        hand100.append(_ms(_call(store, ids, rng)))
    out["after 100 hand edits"] = hand100
    store.close()
    return out


def probe_sqlite(db: str, ids: list[str], calls: int) -> dict[str, list[float]]:
    """The baseline: data_version + SELECT by id on a kept connection: idle, after its own
    UPDATE (autocommit) and after another process's."""
    conn = sqlite3.connect(db, isolation_level=None)
    rng = random.Random(7)

    def run() -> None:
        conn.execute("PRAGMA data_version").fetchone()
        conn.execute("SELECT * FROM nodes WHERE id = ?", (rng.choice(ids),)).fetchone()

    out = {"nothing changed": [_ms(run) for _ in range(calls)]}
    own = []
    for i in range(calls):
        conn.execute("UPDATE nodes SET content = ? WHERE id = ?", (f"changed {i}", rng.choice(ids)))
        own.append(_ms(run))
    out["after own update"] = own
    child, other = _Child(db, "sqlite"), []
    try:
        for _ in range(calls):
            child.write(rng.choice(ids))
            other.append(_ms(run))
    finally:
        child.close()
    out["after another process's update"] = other
    conn.close()
    return out


def _fresh_probe(root: Path, opts: dict[str, Any], mode: str) -> dict[str, list[float]]:
    here = str(Path(__file__).resolve().parent)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, here, str(root), json.dumps(opts), mode],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"the probe of {root} ({mode}) failed:\n{done.stderr}")
    return json.loads(done.stdout)


def one_size(
    n: int, work: Path, calls: int, scan_calls: int, scan_max: int, say: Callable[[str], Any]
) -> dict[str, Any]:
    """Write the store and the sqlite table for ``n`` knowledge nodes, then probe both watch modes."""
    say(f"{n:,}: writing the store and sqlite")
    nodes = benchmark.corpus(n)
    root, db = work / f"md_{n}", work / f"sq_{n}.db"
    write_store(root, nodes)
    with MdCG(root) as s:
        s.compact_index()
    write_sqlite(db, nodes)
    ids = [node.id for node in nodes if node.layer == "knowledge"]
    result: dict[str, Any] = {"sqlite": probe_sqlite(str(db), ids, calls)}
    modes = MODES if n <= scan_max else MODES[:1]
    for mode in modes:
        say(f"{n:,}: probing md-cg ({mode})")
        # each mode on its own copy: the first mode's edits must not be the second's baseline
        copy = work / f"md_{n}_{mode.replace(' ', '_')}"
        if mode == modes[-1]:
            root.rename(copy)  # the last mode takes the store itself (a 1M copy is ~5 GB of tmpfs)
        else:
            shutil.copytree(root, copy, symlinks=True)
        count = calls if mode == "inotify" else min(calls, scan_calls)
        result[mode] = _fresh_probe(copy, {"calls": count}, mode)
        shutil.rmtree(copy)
    db.unlink()
    return result


def _fmt(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{pct(values, 0.5):.2f} / {pct(values, 0.95):.2f}"


def _cell(r: dict[str, Any], mode: str, measure: str) -> str:
    return _fmt(r[mode][measure]) if mode in r else "not run (--scan-max)"


def render(results: dict[int, dict[str, Any]]) -> str:
    """The table: per size, measure and mode, md-cg beside sqlite, and the growth to the largest size."""
    sizes = sorted(results)
    lines = [
        "### A long-lived handle's cost per call (`sync_if_changed` + `get`), ms p50 / p95",
        "",
        f"Machine: {benchmark.machine()}",
        "",
        "| N | measure | md-cg, inotify | md-cg, stat scan | sqlite (data_version + SELECT) "
        "| ratio p50 (inotify / sqlite) |",
        "|---|---|---|---|---|---|",
    ]
    measures = [m for m in results[sizes[0]]["inotify"] if m != "open_ms"]
    for n in sizes:
        r = results[n]
        lines.append(
            f"| {n:,} | open (fresh process) | {_fmt(r['inotify']['open_ms'])} | "
            f"{_cell(r, 'stat scan', 'open_ms')} | | |"
        )
        for m in measures:
            base = r["sqlite"].get(m)
            ratio = f"{pct(r['inotify'][m], 0.5) / pct(base, 0.5):.1f}x" if base else ""
            lines.append(
                f"| {n:,} | {m} | {_fmt(r['inotify'][m])} | {_cell(r, 'stat scan', m)} | "
                f"{_fmt(base) if base else 'n/a'} | {ratio} |"
            )
    if len(sizes) > 1:
        lo, hi = results[sizes[0]], results[sizes[-1]]
        lines += ["", f"Growth of the p50 from {sizes[0]:,} to {sizes[-1]:,}:", ""]
        for m in measures:
            parts = [
                f"{mode} {pct(hi[mode][m], 0.5) / pct(lo[mode][m], 0.5):.2f}x"
                for mode in MODES
                if mode in hi and mode in lo
            ]
            lines.append(f"* {m}: " + ", ".join(parts))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--million", action="store_true", help="add a 1,000,000-node size")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--scan-calls", type=int, default=20, help="calls of each kind in the stat-scan mode")
    ap.add_argument(
        "--scan-max", type=int, default=100_000, help="the largest size the stat-scan mode runs at"
    )
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s] + ([1_000_000] if args.million else [])
    work = args.work or Path(
        tempfile.mkdtemp(prefix="mdcg_pickup_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    )
    work.mkdir(parents=True, exist_ok=True)
    results = {
        n: one_size(n, work, args.calls, args.scan_calls, args.scan_max, benchmark.to_stderr) for n in sizes
    }
    if args.json:
        args.json.write_text(json.dumps(results), encoding="utf-8")
    return benchmark.emit(render(results), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
