"""``python -m census SRC``: compare bucket-key schemes on a store folder or sqlite database.

A runnable wrapper for a checkout (``mdcg census`` is the installed command):
argument parsing over :func:`md_cg.census.census_of` (DESIGN §12). ``SRC`` is
a ``.sqlite`` file in the reference schema or an md-cg store folder; files,
folders or rows that cannot be used are reported on stderr (the first
:data:`~md_cg.census.SHOW_SKIPS` by path, then counts by kind) and skipped.

Markdown goes to stdout, or JSON with ``--json``. Exit status: 0 on success,
2 when ``SRC`` cannot be read at all (a store's censused layer folder that is a
symlink or unreadable included).
"""

from __future__ import annotations

import argparse
import json
import sys

from md_cg import MdcgError
from md_cg.census import (
    LimitedSink,
    Skipped,
    census_of,
    records_from_folder,
    records_from_sqlite,
    render_markdown,
)

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
    sink, skipped = LimitedSink(lambda line: print(line, file=sys.stderr)), Skipped()
    try:
        report = census_of(
            args.src, layer=None if args.all_layers else "knowledge", on_error=sink, skipped=skipped
        )
    except MdcgError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(render_markdown(report))
    for line in (sink.rest(), skipped.summary()):
        if line:
            print(line, file=sys.stderr)
    return 0
