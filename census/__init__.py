"""``python -m census SRC``: compare bucket-key schemes on a store folder or sqlite database.

A thin command over :mod:`md_cg.census` (DESIGN §12). ``SRC`` is either

* a ``.sqlite`` file in the reference schema, read read-only through
  :mod:`md_cg.sqlite_source` (bad rows are reported on stderr and skipped), or
* an md-cg store folder: every ``*.md`` under the layer folders is read with
  :func:`md_cg.nodefile.read_node` (see :func:`records_from_folder`).

Markdown goes to stdout, or JSON with ``--json``. Exit status: 0 on success,
2 when ``SRC`` cannot be read at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from md_cg.census import CensusReport, census, render_markdown
from md_cg.errors import MdcgError
from md_cg.node import LAYERS, Node
from md_cg.nodefile import read_node
from md_cg.sqlite_source import iter_rows, open_readonly

#: Called with (where, reason) for each file or row that cannot be read.
ErrorSink = Callable[[str, str], None]


def _stderr_sink(where: str, reason: str) -> None:
    print(f"skipped {where}: {reason}", file=sys.stderr)


def records_from_folder(root: str | Path, on_error: ErrorSink = _stderr_sink) -> Iterator[Node]:
    """Nodes of every ``*.md`` file under the layer folders of ``root``, sorted by path.

    Hidden files and folders (such as ``.mdcg/``) are skipped; a file that
    cannot be read is reported to ``on_error`` by path and skipped. A stand-in
    until the engine offers a read-only iteration API.
    """
    base = Path(root)
    for layer in LAYERS:
        folder = base / layer
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.md")):
            if any(part.startswith(".") for part in path.relative_to(base).parts):
                continue
            try:
                yield read_node(path)
            except (MdcgError, OSError) as exc:
                on_error(str(path), str(exc))


def records_from_sqlite(path: str | Path, on_error: ErrorSink = _stderr_sink) -> Iterator[Node]:
    """Nodes of the good rows of a sqlite database; bad rows go to ``on_error``."""
    conn = open_readonly(path)
    try:
        for row in iter_rows(conn):
            if row.node is not None:
                yield row.node
            else:
                on_error(f"{path}: {row.table} rowid {row.rowid}", row.error or "")
    finally:
        conn.close()


def census_of(
    src: str | Path, *, layer: str | None = "knowledge", on_error: ErrorSink = _stderr_sink
) -> CensusReport:
    """Census of a store folder or sqlite file (raises :class:`MdcgError` if unreadable)."""
    path = Path(src)
    if path.is_dir():
        if not any((path / layer_name).is_dir() for layer_name in LAYERS):
            raise MdcgError(f"{path}: not an md-cg store (no layer folders such as knowledge/)")
        return census(records_from_folder(path, on_error), layer=layer)
    return census(records_from_sqlite(path, on_error), layer=layer)


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
        _stderr_sink(where, reason)

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
