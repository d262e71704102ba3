"""Open from the snapshot in a fresh process, warm and after dropping the page cache.

    python bench/bench_open.py STORE [STORE...] [--code NAME=PYTHONPATH ...]
                               [--warm 5] [--cold 3] [--query "river delta"]

For every store and every code version (``--code old=/tmp/old``: the
``md_cg`` found on that ``PYTHONPATH``; default: this checkout), runs of
``MdCG(store)`` in a fresh process (imports excluded), alternating between
the code versions: ``--warm`` runs with the page cache as it is, then
``--cold`` runs each right after ``sync; echo 3 > /proc/sys/vm/drop_caches``
(needs root; skipped otherwise). Each run reports the wall and CPU time of
the open, the bytes the process read from the block device (``read_bytes``
of ``/proc/self/io``; 0 on tmpfs and from the page cache), the first search
after the open and a second one, and the process's RSS after them. A code version must find a snapshot of its
own format version in the store (check ``loaded_from``): give each version
its own copy of the store.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = """
import json, sys, time
def io():
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}
import md_cg
from md_cg import MdCG
before = io()
t, c = time.perf_counter(), time.process_time()
store = MdCG(sys.argv[1], refresh_interval=None, auto_compact=None, read_only=True)
wall, cpu = time.perf_counter() - t, time.process_time() - c
after = io()
t, c = time.perf_counter(), time.process_time()
hits, _ = store.search(sys.argv[2], record=False)
first, first_cpu = time.perf_counter() - t, time.process_time() - c
t = time.perf_counter()
store.search(sys.argv[3], record=False)
second = time.perf_counter() - t
with open("/proc/self/status") as f:
    rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
print(json.dumps({"wall": wall, "cpu": cpu, "read": after["read_bytes"] - before["read_bytes"],
                  "first": first, "first_cpu": first_cpu, "second": second,
                  "loaded_from": store.loaded_from, "nodes": len(store), "hits": len(hits), "rss": rss,
                  "code": md_cg.__file__}))
"""


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def probe(store: str, pythonpath: str, query: str, query2: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, store, query, query2],
        env=env,
        cwd="/",  # not the checkout: ``-c`` puts the working directory first on sys.path
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout)


def summary(runs: list[dict[str, Any]]) -> str:
    """Median and worst of the open (wall, CPU), the bytes read, the searches, the RSS."""
    wall = [float(r["wall"]) for r in runs]
    cpu = [float(r["cpu"]) for r in runs]
    first = [float(r["first"]) * 1000 for r in runs]
    second = [float(r["second"]) * 1000 for r in runs]
    read = max(int(r["read"]) for r in runs) / 2**20
    rss = max(int(r["rss"]) for r in runs) / 2**20
    med = statistics.median
    return (
        f"open wall median {med(wall):.3f} worst {max(wall):.3f}"
        f" (CPU median {med(cpu):.3f} worst {max(cpu):.3f});"
        f" read {read:.1f} MiB; first search median {med(first):.1f} ms worst {max(first):.1f} ms;"
        f" second search median {med(second):.1f} ms; RSS after both {rss:.0f} MiB;"
        f" {runs[0]['loaded_from']}, {runs[0]['nodes']} nodes"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "stores", nargs="+", help="NAME=PATH (or PATH); with several --code, NAME=PATH:PATH2 per code"
    )
    ap.add_argument("--code", action="append", default=[], help="NAME=PYTHONPATH (repeatable)")
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--query", default="river delta sediment")
    ap.add_argument("--query2", default="ancient trade routes")
    args = ap.parse_args()
    codes = [c.split("=", 1) for c in args.code] or [["this", str(Path(__file__).resolve().parents[1])]]
    for spec in args.stores:
        name, _, where = spec.rpartition("=")
        roots = where.split(":")
        if len(roots) == 1:
            roots = roots * len(codes)
        runs: dict[str, list[dict[str, Any]]] = {c[0]: [] for c in codes}
        for kind, count in (("warm", args.warm), ("cold", args.cold)):
            for _ in range(count):
                for (code, path), root in zip(codes, roots, strict=True):
                    dropped = drop_caches() if kind == "cold" else False
                    if kind == "cold" and not dropped:
                        continue
                    r = probe(root, path, args.query, args.query2)
                    r["kind"] = kind
                    runs[code].append(r)
                    print(json.dumps({"store": name or root, "version": code, **r}), flush=True)
        for code, rs in runs.items():
            for kind in ("warm", "cold"):
                sel = [r for r in rs if r["kind"] == kind]
                if not sel:
                    continue
                print(f"## {name or roots[0]} {code} {kind} x{len(sel)}: {summary(sel)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
