"""``mdcg today`` shows one memory all day (session 30, r2 finding 2): every call recorded
its show, the memory just shown went into its 90-day cooldown and the next call showed
another -- p01, then p04, then p07 on one day -- so a prompt hook running it in every
shell used up a memory's cooldown each time, against docs/recall.md ("one day shows one
memory"). The MCP ``on_this_day`` tool shares the rule."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path

import anyio
from mcp import Client
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.access import SHOW_LOG
from md_cg.cli import app
from md_cg.mcp_server import create_server

runner = CliRunner(env={"MDCG_ROOT": None})


def _store(root: Path) -> None:
    now = date.today()
    with MdCG(root) as s:
        for k in range(1, 8):
            made = datetime(now.year - k, now.month, min(now.day, 28), 12).astimezone()
            s.add(id=f"p{k:02d}", layer="knowledge", body=f"note {k}", created_at=made.isoformat())


def test_mdcg_today_shows_the_same_memory_all_day_and_records_it_once(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    outputs = [runner.invoke(app, ["--root", str(root), "today"]) for _ in range(3)]
    assert [r.exit_code for r in outputs] == [0, 0, 0]
    assert outputs[0].output == outputs[1].output == outputs[2].output
    assert " · shown 0 time(s) before" in outputs[0].output.splitlines()[0]
    with MdCG(root, read_only=True) as s:
        shows = s.log(SHOW_LOG).read()
    assert [r["id"] for r in shows] == [outputs[0].output.split(" ", 1)[0]]
    assert shows[0]["shown_on"] == date.today().isoformat()


def test_on_this_day_over_mcp_shows_the_same_memory_all_day(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    server = create_server(root)

    async def run() -> list[str]:
        async with Client(server) as client:
            got = [await client.call_tool("on_this_day", {}) for _ in range(3)]
        return [json.loads(r.content[0].text)["memory"]["id"] for r in got]

    ids = anyio.run(run)
    server.store.close()
    assert len(set(ids)) == 1
    with MdCG(root, read_only=True) as s:
        assert [r["id"] for r in s.log(SHOW_LOG).read()] == ids[:1]


def test_concurrent_shows_of_a_day_record_one(tmp_path: Path) -> None:
    """r4: six prompt hooks running ``mdcg today`` at once recorded the day's memory twice
    (2 runs of 5), and the next ``show_count`` counted both. The append is checked under
    the show log's lock. Six processes each show 40 days at once: one record a day."""
    import subprocess
    import sys

    from conftest import python_env

    root = tmp_path / "m"
    _store(root)
    code = (
        "import sys, time\nfrom datetime import date, timedelta\nfrom md_cg import MdCG\n"
        "start = float(sys.argv[2])\n"
        "with MdCG(sys.argv[1]) as s:\n"
        "    time.sleep(max(0.0, start - time.time()))\n"
        "    for k in range(40):\n"
        "        s.resurface(date(2030, 1, 1) + timedelta(days=k), record=True)\n"
    )
    import time

    start = time.time() + 3
    runs = [
        subprocess.Popen([sys.executable, "-c", code, str(root), str(start)], env=python_env())
        for _ in range(6)
    ]
    assert [p.wait(timeout=120) for p in runs] == [0] * 6
    with MdCG(root, read_only=True) as s:
        shows = s.log(SHOW_LOG).read()
    days = [r["shown_on"] for r in shows]
    assert len(days) == 40 and len(set(days)) == 40
