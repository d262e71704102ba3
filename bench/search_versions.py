#!/usr/bin/env python
"""The search probe of ``bench_scale`` with several versions of md-cg on one store, alternating.

Usage::

    python bench/search_versions.py --store /dev/shm/sc/md_1000000 \\
        --cases /dev/shm/sc/cases_1000000.json --english /dev/shm/sc/english_1000000.json \\
        --rounds 3 old=/work/wt/a8d70e3 new=.

Each ``name=path`` is a checkout (``git worktree add /work/wt/<sha> <sha>``);
every round runs ``bench_scale``'s ``_SEARCH`` probe once per version, in a
fresh process, in the order given: it opens the store from its snapshot and
times the 200 queries of each kind (no context, routed hit, routed miss,
English titles) after a warm-up pass. Prints p50 / p95 wall ms per kind, the
open time, what the store was opened from and the RSS, and **the md_cg each
process imported**.

The probe runs as ``python -c`` from a directory outside every checkout:
``-c`` puts the current directory first on ``sys.path``, so a probe started
from a checkout imports that checkout's md_cg whatever ``PYTHONPATH`` says,
and a comparison made so measures one version against itself (docs/benchmarks.md,
session 11). The path printed on each line is the check.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import _SEARCH, pct

KINDS = ("none", "hit", "miss", "english")
_WHERE = "import md_cg, sys\nprint(md_cg.__file__, file=sys.stderr)\n"


def run_probe(path: Path, store: Path, cases: Path, english: Path, cwd: str) -> tuple[str, dict]:
    """One probe with the md_cg of checkout ``path``: (the md_cg file it imported, its JSON)."""
    env = dict(os.environ, PYTHONPATH=str(path))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once per checkout, like an installed copy
    out = subprocess.run(
        [sys.executable, "-c", _WHERE + _SEARCH, str(store), str(cases), str(english)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stderr.strip().splitlines()[-1], json.loads(out.stdout)


def line(round_no: int, name: str, where: str, d: dict) -> str:
    cells = " · ".join(f"{k} {pct(d[k], 0.5):.2f} / {pct(d[k], 0.95):.2f}" for k in KINDS)
    rss = d["rss"] / 2**20
    return f"| {round_no} | {name} | `{where}` | {d['from']} {d['open']:.3f} s | {cells} | {rss:,.0f} MiB |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--cases", type=Path, required=True)
    ap.add_argument("--english", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("versions", nargs="+", help="name=checkout path")
    args = ap.parse_args()
    versions = [(v.split("=", 1)[0], Path(v.split("=", 1)[1]).resolve()) for v in args.versions]
    print(
        "| round | version | md_cg imported | opened from, open | p50 / p95 wall ms: "
        + " · ".join(KINDS)
        + " | RSS |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as neutral:
        for r in range(args.rounds):
            for name, path in versions:
                where, d = run_probe(
                    path, args.store.resolve(), args.cases.resolve(), args.english.resolve(), neutral
                )
                if not where.startswith(str(path) + os.sep):
                    raise SystemExit(f"{name}: the probe imported {where}, not the md_cg of {path}")
                print(line(r, name, where, d), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
