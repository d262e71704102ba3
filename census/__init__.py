"""``python -m census SRC``: compare bucket-key schemes on a store folder or sqlite database.

A thin command over :mod:`md_cg.census` (DESIGN §12). ``SRC`` is either

* a ``.sqlite`` file in the reference schema, read read-only through
  :mod:`md_cg.sqlite_source` (bad rows are reported on stderr and skipped), or
* an md-cg store folder, opened read-only through the engine
  (``MdCG(root, read_only=True, create=False)``): the census reads the index
  entries (tags, condition space, layer) and reports the files the engine
  cannot read (see :func:`records_from_folder`).

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
from md_cg.index import Entry
from md_cg.node import LAYERS, Node
from md_cg.sqlite_source import iter_rows, open_readonly
from md_cg.store import MdCG

#: Called with (where, reason) for each file or row that cannot be read.
ErrorSink = Callable[[str, str], None]


def _stderr_sink(where: str, reason: str) -> None:
    print(f"skipped {where}: {reason}", file=sys.stderr)


def records_from_folder(root: str | Path, on_error: ErrorSink = _stderr_sink) -> list[Entry]:
    """Index entries of every node of the store at ``root``, sorted by id.

    The store is opened read-only through the engine (nothing is written, not
    even on a store that was never initialised); each entry carries the
    ``tags``, ``condition_space`` and ``layer`` the census keys on. Files the
    engine cannot read (``unreadable_file`` findings of
    :meth:`~md_cg.store.MdCG.health`) are reported to ``on_error`` by path and
    left out. Hidden files and folders, ``.mdcg/`` included, are not nodes.
    """
    base = Path(root)
    with MdCG(base, read_only=True, create=False) as store:
        entries = store.entries()
        for finding in store.health().by_kind("unreadable_file"):
            on_error(str(base / (finding.path or "")), finding.detail)
    return entries


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
