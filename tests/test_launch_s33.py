"""Session 33 (review r3): Ctrl-C while the ``mdcg`` script imports the CLI ends quietly.

The script pointed at ``md_cg.cli:main``, so the interpreter imported the whole CLI
(~0.5-1 s) before any of md-cg's code could catch an interrupt: a Ctrl-C then printed a
``KeyboardInterrupt`` traceback. The entry point is now ``md_cg.launch:main``, which
imports the CLI under a guard and exits 130 with no traceback.
"""

from __future__ import annotations

import builtins
import sys
import tomllib
from pathlib import Path

import pytest

from md_cg import launch


def test_an_interrupt_during_the_cli_import_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_import = builtins.__import__

    def interrupted(name: str, *args: object, **kwargs: object) -> object:
        if name == "md_cg.cli":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.delitem(sys.modules, "md_cg.cli", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as ended:
        launch.main()
    assert ended.value.code == 130
    assert ended.value.__context__ is None or ended.value.__suppress_context__
    assert capsys.readouterr() == ("", "\n")


def test_the_script_runs_the_cli_through_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["scripts"]["mdcg"] == "md_cg.launch:main"
    import md_cg.cli

    ran: list[str] = []
    monkeypatch.setattr(md_cg.cli, "main", lambda: ran.append("cli"))
    launch.main()
    assert ran == ["cli"]
