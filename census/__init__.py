"""``python -m census SRC``: compare bucket-key schemes on a store folder or sqlite database.

A runnable wrapper for a checkout (``mdcg census`` is the installed command):
argument parsing over :func:`md_cg.census.census_of` (DESIGN §12). ``SRC`` is
a ``.sqlite`` file in the reference schema or an md-cg store folder; files
or rows that cannot be read are reported on stderr and skipped.

Markdown goes to stdout, or JSON with ``--json``. Exit status: 0 on success,
2 when ``SRC`` cannot be read at all.
"""

from __future__ import annotations

import argparse
import json
import sys

from md_cg import MdcgError
from md_cg.census import census_of, records_from_folder, records_from_sqlite, render_markdown, stderr_sink

__all__ = ["census_of", "main", "records_from_folder", "records_from_sqlite"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m census``."""
    parser = argparse.ArgumentParser(
        prog="python -m census",
        description="Compare bucket-key schemes (A raw 4-tuple, B tool, C constraint, "
        "D route key, E D split by time window) on a store folder or sqlite database.",
    )
    parser.add_argument("src", help="a .sqlite file or an md-cg store folder")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--all-layers",
        action="store_true",
        help="census every layer, not only knowledge/ (the bucketed layer)",
    )
    args = parser.parse_args(argv)
    skipped = 0

    def sink(where: str, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        stderr_sink(where, reason)

    try:
        report = census_of(args.src, layer=None if args.all_layers else "knowledge", on_error=sink)
    except MdcgError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(render_markdown(report))
    if skipped:
        print(f"{skipped} unreadable file(s) or row(s) skipped", file=sys.stderr)
    return 0
