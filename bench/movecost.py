"""The wall time of an ``update``, a move, an ``archive`` and an ``unarchive``, in microseconds (medians).

    python bench/movecost.py --work /dev/shm/mc --n 300
    PYTHONPATH=/path/to/other/version python bench/movecost.py --work /tmp/mc

One memory, updated ``--n`` times in place (``importance``), then moved ``--n`` times
between two layers (``update(layer=...)``, knowledge and contextual in turn), then archived
and unarchived ``--n`` times in turn: prints one JSON line with the median of each. Compare
versions by running it with ``PYTHONPATH`` pointing at each, alternating (session 42: a
move's old file set aside and checked; session 43: an archive's too).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import md_cg
from md_cg import MdCG, Node


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--work", type=Path, default=Path("/tmp/movecost"))
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    root = args.work / "store"
    shutil.rmtree(root, ignore_errors=True)
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base", importance=0.5))
        took: dict[str, list[float]] = {"update": [], "move": []}
        for k in range(args.n):
            t = time.perf_counter()
            s.update("x", importance=(k % 97) / 100)
            took["update"].append(time.perf_counter() - t)
        for k in range(args.n):
            t = time.perf_counter()
            s.update("x", layer="contextual" if k % 2 == 0 else "knowledge")
            took["move"].append(time.perf_counter() - t)
        took.update(archive=[], unarchive=[])
        for _ in range(args.n):
            for kind, op in (("archive", s.archive), ("unarchive", s.unarchive)):
                t = time.perf_counter()
                op("x")
                took[kind].append(time.perf_counter() - t)
    out = {
        "label": args.label,
        "md_cg": str(Path(md_cg.__file__).parent),
        **{f"{kind}_us": round(statistics.median(v) * 1e6) for kind, v in took.items()},
    }
    print(json.dumps(out))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
