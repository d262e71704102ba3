"""Migration throughput on the full sample, beside its floors, measured in the same run.

    python bench/bench_migrate.py [--repeat N] [--batch N] [--knowledge N] [--out FILE]

Thin over :func:`md_cg.benchmark.migrate_bench` (see its docstring for what is
measured). Prints a Markdown table (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from md_cg.benchmark import migrate_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--batch", type=int, default=500, help="nodes per group commit")
    parser.add_argument("--knowledge", type=int, default=None, help="knowledge nodes (default 3,048)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.batch < 1:
        parser.error("--repeat and --batch must be at least 1")
    table = migrate_bench(repeat=args.repeat, batch=args.batch, knowledge=args.knowledge) + "\n"
    sys.stdout.write(table)
    if args.out is not None:
        args.out.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
