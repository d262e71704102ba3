"""``mdcg stats`` top titles and ``mdcg supersede``'s line are shown terminal-safe
(session 31: left raw by the two display fixes; a title is a memory's first line,
which an agent or an import may fill with escape sequences)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_terminal_safe2_s31 import _bidi_store, run
from typer.testing import CliRunner


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})


def test_stats_top_titles_are_escaped(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "memory"
    run(runner, "init", "--root", root)
    run(runner, "--root", root, "add", "--id", "t1", "--body", "\x1b]0;PWNED\x07 deploy notes\n\nbody")
    run(runner, "--root", root, "get", "t1")  # a CLI get is no recall: use search
    run(runner, "--root", root, "search", "deploy notes")
    out = run(runner, "--root", root, "stats").stdout_bytes.decode("utf-8")
    assert "\x1b" not in out and "\x07" not in out
    assert out.splitlines()[-1] == "      1  t1  \\x1b]0;PWNED\\x07 deploy notes"


def test_supersede_line_escapes_bidi_ids(runner: CliRunner, tmp_path: Path) -> None:
    root = _bidi_store(runner, tmp_path)
    run(runner, "--root", root, "add", "--id", "plain", "--body", "a third way")
    out = run(runner, "--root", root, "supersede", "src\u202e1", "plain").stdout_bytes
    assert out == b"src\\u202e1: superseded by plain\n"
