"""No control character of a memory's text reaches the terminal raw (session 31, r2 #1, #7).

A body holding ``ESC ] 0 ; PWNED BEL`` (retitle the terminal) or ``ESC [ 31 m``
(recolour) was accepted by ``add`` and then written raw by ``list`` (5 ESC bytes,
the title cut inside the OSC sequence) and ``search`` (6). Every table and line
composed for people now shows them escaped (``\\x1b``, ``\\u202e``); ``--json`` is
exact JSON; the body of ``get``/``show`` is exact through a pipe and escaped on a
terminal (line ends and tabs kept). And the "did you mean" hint of an NFD id typed
for an NFC one printed two ids that look the same; both are escaped now.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import md_cg.cli as cli
from md_cg.cli import app

OSC = "deploy notes \x1b]0;PWNED\x07 \x1b[31mred\x1b[0m end"
OVERWRITE = "deploy with force push\x1b[25D\x1b[1;32mACCEPT-ME\x1b[0m"
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(now\)")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})


def run(runner: CliRunner, *args: Any, code: int = 0) -> Any:
    """The result of ``mdcg ARGS`` (``stdout_bytes``: its output exact; click's ``stdout``
    makes ``\\r\\n`` a ``\\n``)."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


@pytest.fixture
def root(runner: CliRunner, tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    run(runner, "init", "--root", root)
    run(runner, "--root", root, "add", "--id", "esc1", "--body", OSC)
    run(runner, "--root", root, "add", "--id", "esc2", "--not-applicable", "production", "--body", OVERWRITE)
    return root


def test_terminal_safe_escapes_controls_and_bidi() -> None:
    from md_cg.script import terminal_safe  # here: the other tests run on code without it

    text = "a\x1b]0;X\x07\x7f\x9b\u202eb\tc\nd\r\ne\rf"
    assert terminal_safe(text) == "a\\x1b]0;X\\x07\\x7f\\x9b\\u202eb\\tc\\nd\\r\\ne\\rf"
    assert terminal_safe(text, lines=True) == "a\\x1b]0;X\\x07\\x7f\\x9b\\u202eb\tc\nd\r\ne\\rf"
    plain = "Café 東京 [bold] C:\\Users"
    assert terminal_safe(plain) is plain


def test_list_shows_controls_escaped(runner: CliRunner, root: Path) -> None:
    out = run(runner, "--root", root, "list").stdout
    rows = [STAMP.sub("NOW", line) for line in out.splitlines() if "esc" in line]
    assert rows == [
        "│ NOW │ knowledge │ esc2 │      │ deploy with force push\\x1b[25D\\x1b[1;32mACCEPT-ME\\x1b[0m │",
        "│ NOW │ knowledge │ esc1 │      │ deploy notes \\x1b]0;PWNED\\x07 \\x1b[31mred\\x1b[0m end     │",
    ]
    assert "\x1b" not in out and "\x07" not in out
    items = json.loads(run(runner, "--root", root, "list", "--json").stdout)["items"]
    assert {i["id"]: i["title"] for i in items} == {"esc1": OSC, "esc2": OVERWRITE}  # JSON: exact


def test_search_shows_controls_escaped(runner: CliRunner, root: Path) -> None:
    out = run(runner, "--root", root, "search", "deploy production").stdout
    rows = [line for line in out.splitlines() if "esc" in line]
    assert rows == [  # a tie: the most recently changed first (session 43; was by id)
        "│ 1 │ T2   │ REJECT │  0.18 │ esc2 │ deploy with force push\\x1b[25D\\x1b[1;32mACCEPT-ME\\x1b[0m │",
        "│ 2 │ T2   │ DEFER  │  0.18 │ esc1 │ deploy notes \\x1b]0;PWNED\\x07 \\x1b[31mred\\x1b[0m end     │",
    ]
    assert "\x1b" not in out and "\x07" not in out
    found = json.loads(run(runner, "--root", root, "search", "deploy production", "--json").stdout)
    assert {r["id"]: r["title"] for r in found["results"]} == {"esc1": OSC, "esc2": OVERWRITE}


def test_neighbours_shows_controls_escaped(runner: CliRunner, root: Path) -> None:
    run(runner, "--root", root, "add", "--id", "n1", "--edge", "esc1:similar", "--body", "linked")
    out = run(runner, "--root", root, "neighbours", "n1").stdout
    assert [line for line in out.splitlines() if "esc1" in line] == [
        "│ 1     │ out │ similar │ esc1 │ n1  │ deploy notes \\x1b]0;PWNED\\x07 \\x1b[31mred\\x1b[0m … │"
    ]
    assert "\x1b" not in out


BODY = "title \u202eexe.txt\nline\tz\x1b[31m\r\n\rover"


@pytest.fixture
def node(runner: CliRunner, tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    run(runner, "init", "--root", root)
    run(runner, "--root", root, "add", "--id", "n1", "--not-applicable", "prod\x1b[2J", "--body", BODY)
    return root


def _header_and_body(result: Any) -> tuple[list[str], str]:
    head, _, body = result.stdout_bytes.decode("utf-8").partition("\n\n")
    return [line for line in head.split("\n") if not line.startswith(("created_at", "updated_at"))], body


def test_get_escapes_header_always_and_body_only_on_a_terminal(
    runner: CliRunner, node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head, body = _header_and_body(run(runner, "--root", node, "get", "n1"))
    assert head == ["n1 · knowledge · knowledge/orphan/n1.md", "non_applicable_conditions: prod\\x1b[2J"]
    assert body == BODY + "\n"  # a pipe gets the body exact
    monkeypatch.setattr(cli, "_to_terminal", lambda: True)
    head, body = _header_and_body(run(runner, "--root", node, "get", "n1"))
    assert head == ["n1 · knowledge · knowledge/orphan/n1.md", "non_applicable_conditions: prod\\x1b[2J"]
    assert body == "title \\u202eexe.txt\nline\tz\\x1b[31m\r\n\\rover\n"
    got = json.loads(run(runner, "--root", node, "get", "n1", "--json").stdout)
    assert got["body"] == BODY and got["frontmatter"]["non_applicable_conditions"] == ["prod\x1b[2J"]


def test_show_is_exact_through_a_pipe_and_escaped_on_a_terminal(
    runner: CliRunner, node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = (node / "knowledge" / "orphan" / "n1.md").read_bytes().decode("utf-8")
    assert run(runner, "--root", node, "show", "n1").stdout_bytes.decode("utf-8") == stored
    monkeypatch.setattr(cli, "_to_terminal", lambda: True)
    shown = run(runner, "--root", node, "show", "n1").stdout_bytes.decode("utf-8")
    assert shown == stored.replace(BODY, "title \\u202eexe.txt\nline\tz\\x1b[31m\r\n\\rover")
    assert shown.endswith("---\ntitle \\u202eexe.txt\nline\tz\\x1b[31m\r\n\\rover\n")
    assert json.loads(run(runner, "--root", node, "show", "n1", "--json").stdout)["text"] == stored


def test_sync_and_health_lines_show_controls_escaped(runner: CliRunner, node: Path) -> None:
    (node / "knowledge" / "m1.md").write_text(
        '---\nid: "m1"\nlayer: "knowledge"\nconfidence: "\x1b[31mhigh"\n---\nbody\n', encoding="utf-8"
    )
    (node / "knowledge" / "bad\x1b]0;T\x07.md").write_text("x\n", encoding="utf-8")
    out = run(runner, "--root", node, "sync", code=1).stdout
    assert out.splitlines() == [
        "malformed (1): knowledge/m1.md: the YAML frontmatter does not parse: control characters are "
        "not allowed: U+001B (column 14)",
        "refused (never followed) (1): knowledge/bad\\x1b]0;T\\x07.md: not a usable node path: "
        "component 'bad\\x1b]0;T\\x07': it contains the character '\\x1b'",
    ]
    health = run(runner, "--root", node, "health", code=1).stdout
    assert "\x1b" not in health and "\x07" not in health
    assert "(knowledge/bad\\x1b]0;T\\x07.md)" in health


def test_did_you_mean_escapes_ids_spelt_alike(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "memory"
    run(runner, "init", "--root", root)
    run(runner, "--root", root, "add", "--id", "Caf\u00e9", "--body", "nfc cafe")
    # session 42: an id typed in its other Unicode form is the memory's own (views.as_stored)
    result = run(runner, "--root", root, "get", "Cafe\u0301")
    assert result.stdout.startswith("Caf\u00e9 \u00b7 knowledge \u00b7 knowledge/orphan/Caf\u00e9.md\n")
    assert result.stdout.endswith("\nnfc cafe\n") and result.stderr == ""
    result = run(runner, "--root", root, "get", "CAF\u00c9", code=2)  # case alone: seen apart as typed
    assert result.stderr == (
        "error: no node with id 'CAFÉ' in this store (did you mean 'Café'? "
        "ids differ by letter case or Unicode form)\n"
    )
