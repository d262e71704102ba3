"""The day's memory whose file a person broke since the index read it (session 41).

Before: ``mdcg today`` picked from the index, recorded the show, then read the file and
failed with its error (exit 2) -- on every call of the day, since a day shows one memory:
a prompt hook printed the error in every shell all day and never showed a memory. The MCP
``on_this_day`` answered ``{"memory": null}`` all day. Now the broken pick is passed over
(never recorded as shown), the file named on stderr with its line, and the next pick shown
(``md_cg.resurface_readable``)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import mcp_calls, python_env

from md_cg import InvalidArgumentError, MalformedNodeFileError, MdCG, resurface_readable
from md_cg.access import SHOW_LOG

BROKEN_YAML = "---\nid: {id}\nlayer: [broken\n---\nbody\n"
PARSE = (
    "the YAML frontmatter does not parse: did not find expected ',' or ']' (column 1), "
    "while parsing a flow sequence from line 3, column 8"
)


def _store(root: Path, n: int = 3) -> None:
    now = date.today()
    with MdCG(root) as s:
        for k in range(1, n + 1):
            made = datetime(now.year - k, now.month, min(now.day, 28), 12).astimezone()
            s.add(id=f"p{k}", layer="knowledge", body=f"note {k}", created_at=made.isoformat())


def _first_pick(root: Path, skip: tuple[str, ...] = ()) -> str:
    with MdCG(root, read_only=True) as s:
        picked = s.resurface(skip=skip)
    assert picked is not None
    return picked.id


def _break(root: Path, node_id: str) -> str:
    """Break ``node_id``'s file in place (the index is not told); its path in the store."""
    with MdCG(root, read_only=True) as s:
        rel = s.entry(node_id).path
    (root / rel).write_text(BROKEN_YAML.format(id=node_id), encoding="utf-8")
    return rel


def _today(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "--root", str(root), "today", *args],
        capture_output=True,
        text=True,
        env=python_env(),
        check=False,
    )


def _shown(root: Path) -> list[str]:
    with MdCG(root, read_only=True) as s:
        return [r["id"] for r in s.log(SHOW_LOG).read()]


def test_mdcg_today_passes_over_a_broken_pick_all_day(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    first = _first_pick(root)
    rel = _break(root, first)
    other = _first_pick(root, skip=(first,))
    warning = f"warning: passed over {first!r}, whose file cannot be read: {rel}:4: {PARSE}\n"
    js = _today(root, "--json")
    assert js.returncode == 0 and js.stderr == warning
    out = json.loads(js.stdout)
    assert (out["memory"]["id"], out["unreadable_skipped"]) == (other, 1)
    runs = [_today(root) for _ in range(2)]
    # later calls warn again, or leave it out unsaid once a pick-up took the edit in (health names it)
    assert [r.returncode for r in runs] == [0, 0]
    assert {r.stderr for r in runs} <= {"", warning}
    for run in runs:
        assert run.stdout.splitlines()[0].startswith(f"{other} · ")
        assert run.stdout.splitlines()[0].endswith(" · shown 0 time(s) before")
        assert run.stdout.splitlines()[1:] == [f"note {other[1:]}"]
    assert _shown(root) == [other]  # the broken memory was never recorded as shown
    assert (root / rel).read_text(encoding="utf-8") == BROKEN_YAML.format(id=first)  # untouched


def test_mdcg_today_with_every_memory_broken_says_so(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, n=2)
    rels = {i: _break(root, i) for i in ("p1", "p2")}
    run = _today(root)
    assert (run.returncode, run.stdout) == (0, "nothing readable to bring back\n")
    lines = run.stderr.splitlines()
    assert sorted(lines) == sorted(
        f"warning: passed over {i!r}, whose file cannot be read: {rel}:4: {PARSE}" for i, rel in rels.items()
    )
    assert _shown(root) == []
    js = json.loads(_today(root, "--json").stdout)
    assert js in ({"memory": None, "unreadable_skipped": 2}, {"memory": None})


def test_resurface_readable_and_skip(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    first = _first_pick(root)
    _break(root, first)
    with MdCG(root, refresh_interval=None, auto_compact=None) as s:
        dry = resurface_readable(s, record=False)
        assert s.log(SHOW_LOG).read() == []
        pick = resurface_readable(s)
        assert pick.picked is not None and pick.node is not None
        assert (pick.picked.id, pick.node.id) == (dry.picked.id, dry.picked.id)  # type: ignore[union-attr]
        assert pick.picked.id != first
        assert [(i, type(e)) for i, e in pick.unreadable] == [(first, MalformedNodeFileError)]
        assert [r["id"] for r in s.log(SHOW_LOG).read()] == [pick.picked.id]
        for bad, why in (
            ("p1", "skip must be a collection of node ids, got str"),
            ([1], "skip holds 1, not a node id"),
        ):
            with pytest.raises(InvalidArgumentError) as exc:
                s.resurface(skip=bad)  # type: ignore[arg-type]
            assert (str(exc.value), exc.value.name) == (why, "skip")


def test_on_this_day_over_mcp_shows_the_next_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    _store(root)
    first = _first_pick(root)
    other = _first_pick(root, skip=(first,))
    real = MdCG.sync_if_changed

    def then_broken(self: MdCG, *args: Any, **kw: Any) -> Any:  # after the server's pick-up
        report = real(self, *args, **kw)
        _break(root, first)
        return report

    monkeypatch.setattr(MdCG, "sync_if_changed", then_broken)
    (reply,) = mcp_calls(root, [("on_this_day", {})])
    got = json.loads(reply.content[0].text)
    assert (got["memory"]["id"], got["memory"]["snippet"], got["meta"]) == (
        other,
        f"note {other[1:]}",
        {"unreadable_omitted": 1},
    )
    assert _shown(root) == [other]
