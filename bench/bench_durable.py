"""Durable batches beside both fsync floors, in alternating rounds.

    python bench/bench_durable.py [--nodes 10000] [--rounds 4] [--work DIR] [--out FILE]

Thin over :func:`md_cg.benchmark.durable_rounds`. Each round writes the same
nodes with ``add_many(durable=True)`` (batches of 1,000, a fresh store), with
the serial fsync floor (each file fsynced after writing it, folders once a
batch) and with the floor that fsyncs 16 files at a time; the order is
reversed every other round. Run it with ``--work`` on the disk you care
about: on tmpfs an fsync is free and the figures measure Python.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from md_cg import benchmark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.nodes < 1 or args.rounds < 1:
        ap.error("--nodes and --rounds must be at least 1")
    rows = benchmark.durable_rounds(
        args.nodes,
        args.rounds,
        work=args.work,
        progress=benchmark.to_stderr,
    )
    title = f"Durable batches, alternating rounds (work dir: {args.work or 'temp'})"
    return benchmark.emit_rows(rows, title, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
