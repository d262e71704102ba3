"""Write throughput and open time, beside the raw floor and sqlite, in one run.

    python bench/bench_store.py [--sizes 1000,10000,100000] [--durable-sample 2000]
                                [--work DIR] [--out FILE]

Thin over :func:`md_cg.benchmark.store_bench` (see its docstring for what is
measured). ``--work`` puts the stores on a chosen disk (default: a temp
folder); run it once on the real disk and once on tmpfs (``--work /dev/shm/x``)
to separate file-system cost from the engine's own. Durable batches are set
beside their own raw floor (fsync of each file, of each folder once a batch).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from md_cg import benchmark


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--durable-sample", type=int, default=2000)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = benchmark.store_bench(
        sizes,
        durable_sample=args.durable_sample,
        work=args.work,
        progress=benchmark.to_stderr,
    )
    return benchmark.emit_rows(rows, f"Store: writes and open (work dir: {args.work or 'temp'})", args.out)


if __name__ == "__main__":
    raise SystemExit(main())
