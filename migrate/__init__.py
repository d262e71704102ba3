"""``python -m migrate SRC.sqlite DEST``: migrate a sqlite cognitive graph into an md-cg store.

A runnable wrapper for a checkout (``mdcg migrate`` is the installed command),
thin over :mod:`md_cg.migrate` (DESIGN §11): argument parsing, a
progress bar on stderr, the report on stdout (``--json`` for JSON).

Exit status:

* 0 -- migrated (or dry-run / verified) with no mismatch; bad source rows are
  printed but do not fail the run unless ``--strict`` is given;
* 1 -- at least one node differs from its source row (or the source changed
  while it was read), or ``--strict`` and the source has bad rows;
* 2 -- usage error, or the source or destination cannot be used: one line on
  stderr naming the path;
* 130 -- interrupted (Ctrl-C); run the same command again to resume.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from md_cg import MdcgError
from md_cg.migrate import DEFAULT_BATCH, MigrationReport, migrate, verify_migration

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m migrate``."""
    parser = argparse.ArgumentParser(
        prog="python -m migrate",
        description="Migrate a sqlite cognitive-graph database into an md-cg store folder, "
        "then verify every node field by field. Re-running is idempotent; an interrupted "
        "run resumes from its last committed batch.",
    )
    parser.add_argument("src", metavar="SRC.sqlite", help="the source database (read-only)")
    parser.add_argument("dest", metavar="DEST", help="the store folder (created if missing)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="report what would be created/changed/unchanged; write nothing",
    )
    parser.add_argument(
        "--verify-only",
        action="store_true",
        help="only compare DEST with SRC (no writes)",
    )
    parser.add_argument(
        "--batch",
        type=_positive,
        default=DEFAULT_BATCH,
        metavar="N",
        help=f"nodes per group commit (default {DEFAULT_BATCH})",
    )
    parser.add_argument(
        "--durable", action="store_true", help="fsync every file and folder (slow; power-cut safe)"
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="ignore the journal of an interrupted run and start from the first row",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the source has bad rows")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="also replace memories the store changed since and bring back forgotten ones (never archived)",
    )
    return parser


@contextmanager
def _progress_bar(enabled: bool, label: str) -> Iterator[Callable[[int, int], Any] | None]:
    """A rich progress bar on stderr, started on the first report (so errors print alone)."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if not task:
            bar.start()
            task.append(bar.add_task(label, total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:
            bar.stop()


def exit_code(report: MigrationReport, *, strict: bool = False) -> int:
    """0 when ok (and, with ``strict``, no bad rows); 1 otherwise."""
    if not report.ok or (strict and report.bad_rows):
        return EXIT_MISMATCH
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m migrate``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.dry_run and args.verify_only:
        parser.error("--dry-run and --verify-only exclude each other")
    label = "verifying" if args.verify_only else "dry run" if args.dry_run else "migrating"
    try:
        with _progress_bar(not args.no_progress, label) as progress:
            if args.verify_only:
                report = verify_migration(args.src, args.dest, progress=progress)
            else:
                report = migrate(
                    args.src,
                    args.dest,
                    dry_run=args.dry_run,
                    batch=args.batch,
                    durable=args.durable,
                    progress=progress,
                    resume=not args.no_resume,
                    overwrite=args.overwrite,
                )
    except MdcgError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(
            "interrupted: run the same command again to resume from the last committed batch",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(report.render())
    code = exit_code(report, strict=args.strict)
    if code and report.ok and args.strict:
        print(f"--strict: {report.bad_rows_summary()}", file=sys.stderr)
    return code
