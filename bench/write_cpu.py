"""CPU time per node of the write path, for comparing two versions of the code.

    python bench/write_cpu.py --mode add_many --size 10000 --gc on --work /dev/shm/wc
    python bench/write_cpu.py --mode add --size 10000 --work /dev/shm/wc

Writes the seed-shaped corpus (:func:`md_cg.benchmark.corpus`, ``stamp=False``,
non-durable) into a fresh store under ``--work`` and prints one JSON line:
CPU microseconds per node (``time.process_time``) and wall microseconds per
node. ``--gc off`` disables the cyclic collector for the whole run (the
engine already pauses it inside a batch). Compare two versions of ``md_cg``
by running this script with ``PYTHONPATH`` pointing at each, alternating.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import time
from pathlib import Path

import md_cg
from md_cg import MdCG
from md_cg.benchmark import corpus


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=("add_many", "add"), default="add_many")
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--gc", choices=("on", "off"), default="on")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=Path("/dev/shm/write_cpu"))
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    nodes = corpus(args.size)
    root = args.work / f"store_{args.mode}_{args.size}"
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    if args.gc == "off":
        gc.disable()
    with MdCG(root, auto_compact=None) as store:
        c0, w0 = time.process_time(), time.perf_counter()
        if args.mode == "add_many":
            for start in range(0, len(nodes), args.batch):
                store.add_many(nodes[start : start + args.batch], stamp=False)
        else:
            for node in nodes:
                store.add(node, stamp=False)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    shutil.rmtree(root, ignore_errors=True)
    out = {
        "label": args.label or md_cg.__file__,
        "mode": args.mode,
        "nodes": len(nodes),
        "gc": args.gc,
        "cpu_us_per_node": round(cpu / len(nodes) * 1e6, 1),
        "wall_us_per_node": round(wall / len(nodes) * 1e6, 1),
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
