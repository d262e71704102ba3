"""docs/cli.md and docs/migration.md against the commands (review session 29): every
option in its command's section, the examples print what they show, the not-a-store
error, health's expired detail for the command line, the sample's dangling edges."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import REPO
from typer.testing import CliRunner

from md_cg import MdCG, migrate
from md_cg.cli import COMMANDS, app
from md_cg.sample import bundled_sample_path

CLI = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "80"})


def run(runner: CliRunner, *args: Any, input: str | None = None, code: int = 0) -> Any:
    result = runner.invoke(app, [str(a) for a in args], input=input)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def command_section(name: str) -> str:
    start = CLI.index(f"\n### `mdcg {name}`\n")
    end = CLI.find("\n### ", start + 1)
    return CLI[start : end if end != -1 else len(CLI)]


def example(command: str) -> list[str]:
    """The lines a fenced example starting with ``$ command`` shows after the command."""
    start = CLI.index(f"```\n$ {command}\n") + len(f"```\n$ {command}\n")
    return CLI[start : CLI.index("```", start)].rstrip("\n").split("\n")


# -- every option of a command is in its section -------------------------------------------


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_of_a_command_is_in_its_cli_md_section(name: str) -> None:
    """`reflect --limit`, `search`'s synopsis without --limit, `import`'s without --root,
    `list -l`/`-t`, `reflect -c`/`-l` were missing."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    section = command_section(name)
    synopsis = section[section.index("```\n") + 4 : section.index("```", section.index("```\n") + 4)]
    top = CLI[: CLI.index("\n### ")]  # the options every command takes (`--quiet`, `-q`)
    longs: list[str] = []
    shorts: list[str] = []
    for param in command.params:
        if param.param_type_name != "option" or "--help" in param.opts:  # typer's own click
            continue
        for opt in param.opts + param.secondary_opts:
            (longs if opt.startswith("--") else shorts).append(opt)
    in_synopsis = [o for o in longs if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", synopsis)]
    assert in_synopsis == [], f"mdcg {name}: options missing from the synopsis"
    told = [o for o in shorts if f"`{o}`" not in section and f"`{o}`" not in top and f"{o}, " not in section]
    assert told == [], f"mdcg {name}: short options not in its section"


# -- the examples print what they show --------------------------------------------------------


def add_example() -> tuple[list[str], str]:
    """The arguments and the heredoc body of cli.md's `mdcg add --id kp_bsearch` example."""
    lines = example("mdcg add --id kp_bsearch --tag domain:computing --basis test --confidence 0.6 \\")
    start = "mdcg add --id kp_bsearch --tag domain:computing --basis test --confidence 0.6 "
    command = start + lines[0].strip().removesuffix("<<'EOF'")
    body = "\n".join(lines[1 : lines.index("EOF")]) + "\n"
    return shlex.split(command)[2:], body


def test_cli_md_add_then_get_list_and_neighbours_print_what_cli_md_shows(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The add example had no `# Function:` title while later examples showed it; the
    list example showed the wide table, not what 80 columns print."""
    root = tmp_path / "memory"
    run(runner, "init", "--root", root)
    run(
        runner,
        "add",
        "--id",
        "kp_sorting",
        "--tag",
        "domain:computing",
        "--body",
        "-",
        "--root",
        root,
        input="# Sorting\n",
    )
    run(runner, "add", "Reminder: the dentist appointment is tomorrow at 9am.", "--root", root)
    args, body = add_example()
    assert body.startswith("# Function: binary search\n")
    run(runner, "add", *args, "--root", root, input=body)
    got = run(runner, "get", "kp_bsearch", "--root", root).stdout
    shown = example("mdcg get kp_bsearch")
    assert got.split("\n")[0] == shown[0]
    assert "\n" + "\n".join(shown[shown.index("", 1) : -1]) + "\n" in got  # the body's first lines
    listed = run(runner, "list", "--layer", "knowledge", "-n", "1", "--root", root).stdout
    assert listed.rstrip("\n").split("\n") == example("mdcg list --layer knowledge -n 1")
    wide = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "100"})
    listed = run(wide, "list", "--layer", "knowledge", "-n", "1", "--root", root).stdout
    stamp = re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", listed)
    assert stamp is not None
    shown = [
        line.replace("2026-12-01T09:30:00Z", stamp.group())
        for line in example("COLUMNS=100 mdcg list --layer knowledge -n 1")
    ]
    assert listed.rstrip("\n").split("\n") == shown
    neighbours = run(runner, "neighbours", "kp_sorting", "--direction", "in", "--root", root).stdout
    assert neighbours.rstrip("\n").split("\n") == example("mdcg neighbours kp_sorting --direction in")


# -- errors and details the command line prints ----------------------------------------------


def test_not_a_store_error_as_cli_md_quotes_it(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cli.md ended the `--root mem/knowledge` error with "(nothing was created)", which only
    the commands that would create the folder (init, add) say."""
    monkeypatch.chdir(tmp_path)
    run(runner, "init", "--root", "mem")
    outer = str(tmp_path / "mem")
    said = run(runner, "--root", "mem/knowledge", "list", code=2).stderr.strip()
    text = " ".join(CLI.split()).replace("/home/me/mem", outer)
    assert (
        said == f"error: mem/knowledge: is inside the store {outer}, not a store itself; use --root {outer}"
    )
    creating = (
        "(a command that would have made the folder, `init` or `add`, ends with ` (nothing was created)`)"
    )
    assert f"`{said}` {creating}" in text
    for command in (["add", "x"], ["init"]):
        added = run(runner, "--root", "mem/knowledge", *command, code=2).stderr.strip()
        assert added == said + " (nothing was created)"
    meta = run(runner, "--root", "mem/.mdcg", "list", code=2).stderr.strip()
    assert f"`{meta}`" in text


def test_health_tells_the_command_line_how_to_sweep_an_expired_memory(
    runner: CliRunner, tmp_path: Path
) -> None:
    """The detail said "sweep() removes it" on the command line too."""
    root = tmp_path / "m"
    with (
        MdCG(root) as store,
        pytest.warns(RuntimeWarning, match=r"next sweep removes it \(`mdcg sweep`, sweep\(\)\)"),
    ):
        store.add(id="p", body="Check the oven", expires_at=1e9)
    out = run(CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"}), "health", "--root", root, code=1).stdout
    assert "hidden from reads since its expiry (temporary); a sweep removes it (`mdcg sweep`, sweep())" in out


# -- migration.md: the bundled sample's dangling edges ----------------------------------------


def test_migration_md_counts_the_bundled_samples_dangling_edges(tmp_path: Path) -> None:
    report = migrate(bundled_sample_path(), tmp_path / "m")
    assert report.ok and len(report.dangling_edges) == 2
    with MdCG(tmp_path / "m", read_only=True) as store:
        assert [f.kind for f in store.health().findings] == ["dangling_edge"] * 2
    text = " ".join((REPO / "docs" / "migration.md").read_text(encoding="utf-8").split())
    assert (
        "only the source's own dangling edges -- 2 for the bundled sample `md_cg/data/sample.sqlite`" in text
    )
    assert "9 for the full sample" in text and "of the sample: only its own 9" not in text
