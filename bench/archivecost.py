"""The wall time of an ``archive`` and of an ``unarchive``, in microseconds (medians).

    python bench/archivecost.py --work /dev/shm/ac --n 300
    PYTHONPATH=/path/to/other/version python bench/archivecost.py --work /tmp/ac

One memory in a bucket, archived and unarchived ``--n`` times in turn: prints one JSON line
with the median of each. Compare versions by running it with ``PYTHONPATH`` pointing at
each, alternating (session 43: the old file set aside and checked, as a move's since
session 42).
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
    ap.add_argument("--work", type=Path, default=Path("/tmp/archivecost"))
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    root = args.work / "store"
    shutil.rmtree(root, ignore_errors=True)
    took: dict[str, list[float]] = {"archive": [], "unarchive": []}
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base", tags=["domain:work"]))
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
