"""The ``mdcg`` script's entry point: the command-line interface, imported under a Ctrl-C guard.

Importing :mod:`md_cg.cli` took a good part of a second (click, rich, numpy, the
engine; since session 39 the store and numpy load only in the commands that open a
store: typer and rich remain); a Ctrl-C in that time printed a ``KeyboardInterrupt``
traceback (review r3, session 33). Here it ends the command quietly with the shell's
status for an interrupt (130), as the CLI itself does once it runs. Only :mod:`md_cg`'s
lazy package (a few milliseconds) is imported before the guard.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run ``mdcg``: import the CLI, then hand over to :func:`md_cg.cli.main`."""
    try:
        from md_cg.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        raise SystemExit(130) from None
    cli_main()
