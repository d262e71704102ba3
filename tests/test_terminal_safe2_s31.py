"""The rest of the terminal-safe display (session 31, after 802a557).

``mdcg today`` wrote a memory's body raw and ``mdcg inject`` its text raw (through
click, which dropped the ``ESC [`` sequences of a piped line and kept the OSC ones:
neither exact nor safe); ``delete``/``forget`` and ``add``'s stderr notes printed an
id raw, and an id of a file written by hand may hold a bidi mark (U+202E). And the
reason in a "was forgotten" error had its own escaper (``audit._printable``), which
also escaped non-breaking and ideographic spaces: one rule now,
``script.terminal_safe``, which also escapes the U+2028/U+2029 line separators of a
line and a lone surrogate (no UTF-8 stream can carry one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import md_cg.cli as cli
from md_cg.audit import departure
from md_cg.cli import app

OSC = "deploy notes\n\x1b]0;PWNED\x07 \x1b[31mred\x1b[0m end"
ESCAPED = "\\x1b]0;PWNED\\x07 \\x1b[31mred\\x1b[0m end"
T = 1796541540.0  # 2026-12-06T07:19:00Z


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})


def run(runner: CliRunner, *args: Any, code: int = 0) -> Any:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


@pytest.fixture
def root(runner: CliRunner, tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    run(runner, "init", "--root", root)
    run(runner, "--root", root, "add", "--id", "esc1", "--body", OSC)
    return root


def test_today_writes_the_body_exact_through_a_pipe_and_escaped_on_a_terminal(
    runner: CliRunner, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    piped = run(runner, "--root", root, "today").stdout_bytes.decode("utf-8")
    head, _, body = piped.partition("\n")
    assert head.startswith("esc1 · today (") and head.endswith(") · shown 0 time(s) before")
    assert body == OSC + "\n"
    monkeypatch.setattr(cli, "_to_terminal", lambda: True)
    shown = run(runner, "--root", root, "today").stdout_bytes.decode("utf-8")
    assert shown == f"{head}\ndeploy notes\n{ESCAPED}\n"
    memory = json.loads(run(runner, "--root", root, "today", "--json").stdout)["memory"]
    assert (memory["id"], memory["title"]) == ("esc1", "deploy notes")


def test_inject_is_exact_through_a_pipe_and_escaped_on_a_terminal(
    runner: CliRunner, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "\x1b]0;PWNED\x07 \x1b[31mred\x1b[0m end"  # the body less its title line
    piped = run(runner, "--root", root, "inject", "deploy notes").stdout_bytes
    assert piped == f"- [esc1] {text}\n".encode()  # click used to drop the `ESC [` sequences
    monkeypatch.setattr(cli, "_to_terminal", lambda: True)
    shown = run(runner, "--root", root, "inject", "deploy notes").stdout_bytes
    assert shown == f"- [esc1] {ESCAPED}\n".encode()
    items = json.loads(run(runner, "--root", root, "inject", "deploy notes", "--json").stdout)["items"]
    assert [(i["id"], i["text"]) for i in items] == [("esc1", text)]


def _bidi_store(runner: CliRunner, tmp_path: Path) -> Path:
    """old1 superseded by new1, src1 linking to new1; then the files rewritten by hand
    with U+202E in each id (``add`` refuses such an id; a pulled file may hold one)."""
    root = tmp_path / "memory"
    run(runner, "init", "--root", root)
    run(runner, "--root", root, "add", "--id", "old1", "--body", "the old way")
    run(runner, "--root", root, "add", "--id", "new1", "--body", "the new way")
    run(runner, "--root", root, "add", "--id", "src1", "--edge", "new1:similar", "--body", "points at it")
    run(runner, "--root", root, "supersede", "old1", "new1")
    for path in sorted(root.rglob("*1.md")):
        text = path.read_text(encoding="utf-8")
        for old in ("old1", "new1", "src1"):
            text = text.replace(f'"{old}"', f'"{old[:3]}\u202e1"')
        path.unlink()
        path.with_name(path.name.replace("1.md", "\u202e1.md")).write_text(text, encoding="utf-8")
    assert run(runner, "--root", root, "sync").stdout == (
        "added (3): new\\u202e1, old\\u202e1, src\\u202e1\ndeleted (3): new1, old1, src1\n"
    )
    return root


def test_forget_and_delete_lines_escape_bidi_ids(runner: CliRunner, tmp_path: Path) -> None:
    root = _bidi_store(runner, tmp_path)
    out = run(runner, "--root", root, "forget", "new\u202e1", "--reason", "r", "--force").stdout_bytes
    assert out.decode("utf-8").splitlines() == [
        "new\\u202e1: forgotten (knowledge); tombstone kept",
        "edges left dangling: src\\u202e1 (similar)",
        "old\\u202e1: still closed (it superseded it); if it is true again: mdcg update old\\u202e1 --reopen",
    ]
    out = run(runner, "--root", root, "delete", "src\u202e1").stdout_bytes
    assert out == f"src\\u202e1: deleted ({root / 'knowledge' / 'orphan'}/src\\u202e1.md)\n".encode()
    got = json.loads(run(runner, "--root", root, "delete", "old\u202e1", "--json").stdout)
    assert got["id"] == "old\u202e1"  # --json: exact


def test_add_notes_on_stderr_escape_bidi_ids(runner: CliRunner, tmp_path: Path) -> None:
    root = _bidi_store(runner, tmp_path)
    result = run(runner, "--root", root, "add", "--body", "points at it")
    assert result.stderr == (
        "src\\u202e1: an identical memory is already in knowledge/; nothing was written "
        "(--duplicate stores another)\n"
    )
    assert "\u202e" not in result.stderr


def test_terminal_safe_escapes_line_separators_in_a_line_and_lone_surrogates() -> None:
    from md_cg.script import terminal_safe

    text = "a\u2028b\u2029c\ud800d\udfffe\u00a0f\u3000g\u200dh"
    assert terminal_safe(text) == "a\\u2028b\\u2029c\\ud800d\\udfffe\u00a0f\u3000g\u200dh"
    assert terminal_safe(text, lines=True) == "a\u2028b\u2029c\\ud800d\\udfffe\u00a0f\u3000g\u200dh"


def test_a_forget_reason_is_shown_by_the_one_rule() -> None:
    """audit._printable escaped every character not ``isprintable()``: the joiner of an
    emoji sequence and a soft hyphen came out as ``\\u200d`` and ``\\xad``; they are
    text. (Its spaces, U+2028 included, are collapsed to one space before.) Controls,
    bidi marks and a lone surrogate (a tampered log's ``"\\ud800"``) are escaped as
    before."""
    reason = "dev \U0001f469\u200d\U0001f4bb co\u00adop \x1b]0;X\x07\u202eevil\u2028next \ud800"
    gone = departure([{"event": "forget", "id": "v1", "reason": reason, "time": T}], "v1", lambda i: False)
    assert gone is not None
    assert gone.describe() == (
        "it was forgotten on 2026-12-06 07:19 UTC, "
        "reason: dev \U0001f469\u200d\U0001f4bb co\u00adop \\x1b]0;X\\x07\\u202eevil next \\ud800"
    )
