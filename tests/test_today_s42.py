"""`mdcg today` and `on_this_day` tell of a broken pick on every call of the day (session 42).

Before: the first call of the day passed over a pick whose file a person broke (a stderr
warning, `--json` ``unreadable_skipped``, MCP ``meta.unreadable_omitted``) and showed the
next one; every later call of the day showed that one again -- the day's memory -- and
said nothing of the broken file. The show's record now keeps the ids passed over
(``passed_over``); a later call reads their files again and warns of each still broken,
never recording a show of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import mcp_calls
from test_today_broken_s41 import PARSE, _break, _first_pick, _shown, _store, _today

from md_cg import MdCG
from md_cg.access import SHOW_LOG


def _broken_day(root: Path) -> tuple[str, str, str, str]:
    """A store whose first pick's file is broken: (that id, its path, its old text, the next pick)."""
    _store(root)
    first = _first_pick(root)
    with MdCG(root, read_only=True) as s:
        rel = s.entry(first).path
    text = (root / rel).read_text(encoding="utf-8")
    _break(root, first)
    return first, rel, text, _first_pick(root, skip=(first,))


def test_every_call_of_the_day_warns_while_the_file_is_broken(tmp_path: Path) -> None:
    root = tmp_path / "m"
    first, rel, text, other = _broken_day(root)
    warning = f"warning: passed over {first!r}, whose file cannot be read: {rel}:4: {PARSE}\n"
    for _ in range(3):
        run = _today(root, "--json")
        assert (run.returncode, run.stderr) == (0, warning)
        out = json.loads(run.stdout)
        assert (out["memory"]["id"], out["memory"]["show_count"], out["unreadable_skipped"]) == (other, 0, 1)
    plain = _today(root)
    assert (plain.returncode, plain.stderr) == (0, warning)
    assert plain.stdout.splitlines()[0].startswith(f"{other} · ")
    with MdCG(root, read_only=True) as s:
        records = s.log(SHOW_LOG).read()
    assert [(r["id"], r["passed_over"]) for r in records] == [(other, [first])]  # one show, not of it
    with MdCG(root) as s:  # a sync drops the broken file from the index: still named
        s.sync()
    run = _today(root, "--json")
    assert run.stderr == (
        f"warning: passed over {first!r}, whose file cannot be read: no node with id {first!r} in this "
        f"store (its file {rel} is unusable: {PARSE}; fix it, then sync)\n"
    )
    assert json.loads(run.stdout)["unreadable_skipped"] == 1
    (root / rel).write_text(text, encoding="utf-8")  # repaired: the day's memory stays, unwarned
    run = _today(root, "--json")
    assert (run.returncode, run.stderr) == (0, "")
    assert json.loads(run.stdout) == {"memory": {**json.loads(run.stdout)["memory"], "id": other}}
    assert _shown(root) == [other]


def test_on_this_day_counts_the_broken_pick_on_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp")
    real, root = MdCG.sync_if_changed, tmp_path / "m"
    broke: list[str] = []

    def then_broken(self: MdCG, *args: Any, **kw: Any) -> Any:  # after the server's first pick-up
        report = real(self, *args, **kw)
        if not broke:
            broke.append(_break(root, first))
        return report

    _store(root)
    first = _first_pick(root)
    other = _first_pick(root, skip=(first,))
    monkeypatch.setattr(MdCG, "sync_if_changed", then_broken)
    replies = mcp_calls(root, [("on_this_day", {})] * 3)
    got = [json.loads(r.content[0].text) for r in replies]
    assert [(g["memory"]["id"], g["meta"]) for g in got] == [(other, {"unreadable_omitted": 1})] * 3
    assert _shown(root) == [other]
