"""Session 29 (review 1, three low findings):

1. A TTL so long that now + TTL is past the year 9999 was accepted (``MdCG(ttl_seconds=1e12)``,
   ``{"ttl_seconds": 1e12}`` in ``.mdcg/retention.json``): a one-off ``add`` then wrote
   ``expires_at: 1001796551401.2651`` (a bare number, no ISO date) and the CLI said
   "temporary, expires None". The TTL is at most 100 years now (``MAX_TTL_SECONDS``).
2. ``mdcg health`` printed one table row per finding (5,123 expired memories: 15,381 lines,
   7 s) and ``mdcg sweep --dry-run`` one line of every id. The table shows 10 of a kind and a
   row counting the rest; the sweep line 20 ids and a count; ``--json`` stays complete.
3. An archive killed between putting the archive copies and removing the old files left
   each id in two files, and ``health()`` gave a ``duplicate_id`` error per id advising
   "remove or rename one copy" (the sync finishes the write; removing a copy by hand is
   not the fix). Those copies are counted in the ``open_commit`` finding now.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from rich.console import Console
from stresslib import stress
from typer.testing import CliRunner

from md_cg import MdCG, Node, journal
from md_cg.cli import app
from md_cg.errors import InvalidArgumentError
from md_cg.mcp_server import create_server
from md_cg.render import health_rows, health_table
from md_cg.reports import Finding, HealthReport
from md_cg.temporal import MAX_TTL_SECONDS, decide_retention

runner = CliRunner()

TOO_LONG = "must be a positive number of seconds, at most 3153600000 (100 years), got "


# -- 1. the TTL's bound ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("ttl", "shown"), [(1e12, "1000000000000.0"), (1e300, "1e+300"), (3153600001, "3153600001")]
)
def test_a_ttl_past_100_years_is_refused(tmp_path: Path, ttl: float, shown: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        MdCG(tmp_path / "m", ttl_seconds=ttl)
    assert str(info.value) == f"ttl_seconds {TOO_LONG}{shown}"
    assert info.value.name == "ttl_seconds"
    with pytest.raises(InvalidArgumentError) as info:
        decide_retention(text="tomorrow call the plumber", temporal=None, now=time.time(), ttl_seconds=ttl)
    assert str(info.value) == f"ttl_seconds must be at most 3153600000 (100 years) seconds, got {shown}"


def test_the_longest_ttl_writes_an_iso_expiry(tmp_path: Path) -> None:
    assert MAX_TTL_SECONDS == 36_500 * 86400
    with MdCG(tmp_path / "m", ttl_seconds=MAX_TTL_SECONDS) as s:
        node = s.add(body="tomorrow call the plumber")
        assert node.retention_tier == "temp"
        assert node.expires_at is not None and abs(node.expires_at - time.time() - MAX_TTL_SECONDS) < 60
        text = s.path_of(node.id).read_text(encoding="utf-8")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("expires_at: ")]
    year = time.gmtime(node.expires_at).tm_year
    assert line.startswith(f'expires_at: "{year}-') and line.endswith('Z"')


def test_a_ttl_past_100_years_in_retention_json_is_refused_by_name(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    (root / ".mdcg" / "retention.json").write_text('{"ttl_seconds": 1e12}', encoding="utf-8")
    where = f"ttl_seconds in {root}/.mdcg/retention.json"
    result = runner.invoke(app, ["--root", str(root), "add", "tomorrow call the plumber"])
    assert result.exit_code == 2
    assert result.output == f"error: {where} {TOO_LONG}1000000000000.0\n"
    assert sorted(p.name for p in root.rglob("*.md")) == []
    with MdCG(root, read_only=True) as s:
        (finding,) = s.health().findings
    assert (finding.kind, finding.path) == ("retention_file", None)
    assert finding.detail == (
        f"{where} {TOO_LONG}1000000000000.0; writes that decide retention fail until it is fixed"
    )


# -- 2. bounded human output -------------------------------------------------------------


def _expired(root: Path, n: int) -> list[str]:
    """A store of ``n`` temporary memories past their expiry (``e000``...)."""
    ids = [f"e{i:03d}" for i in range(n)]
    with MdCG(root, ttl_seconds=0.05) as s:
        s.add_many([Node(id=i, layer="knowledge", body=f"tomorrow call the plumber {i}") for i in ids])
    time.sleep(0.2)
    return ids


def _show(renderable: object, width: int) -> list[str]:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, highlight=False).print(renderable, crop=False)
    return buffer.getvalue().splitlines()


def test_health_table_shows_ten_findings_of_a_kind_and_counts_the_rest(tmp_path: Path) -> None:
    ids = _expired(tmp_path / "m", 25)
    with MdCG(tmp_path / "m", read_only=True) as s:
        report = s.health()
    assert [f.node_id for f in report.findings] == ids  # the report itself is complete
    rows = health_rows(report)
    assert [r[2] for r in rows] == [*ids[:10], ""]
    assert rows[-1] == (
        "warning",
        "expired",
        "",
        "... and 15 more expired finding(s) (`mdcg health --json` lists every one); "
        "`mdcg sweep` removes them",
    )
    lines = _show(health_table(report, width=250), 250)
    assert len(lines) == 1 + 3 + 11 + 1  # verdict, table head, 11 one-line rows, bottom rule
    assert lines[0] == "health: 25 finding(s) · empty store (0 nodes) · no buckets"
    assert sum("expired" in line for line in lines[4:-1]) == 11
    cli = runner.invoke(app, ["--root", str(tmp_path / "m"), "health"])
    assert cli.exit_code == 1
    assert "... and 15 more expired finding(s)" in cli.output
    assert [i for i in ids if i in cli.output] == ids[:10]
    full = runner.invoke(app, ["--root", str(tmp_path / "m"), "health", "--json"])
    assert [f["node_id"] for f in json.loads(full.output)["findings"]] == ids


def test_health_rows_cap_each_kind_on_its_own(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        base = s.health()
    found = [Finding("expired", "x", f"k/e{i}.md", f"e{i}") for i in range(3)]
    found += [Finding("dangling_edge", "y", f"k/d{i}.md", f"d{i}") for i in range(4)]
    report = HealthReport(layers=base.layers, nodes=0, buckets=base.buckets, findings=tuple(found))
    rows = health_rows(report, limit=2)
    assert [(r[1], r[2]) for r in rows] == [
        ("expired", "e0"),
        ("expired", "e1"),
        ("expired", ""),
        ("dangling_edge", "d0"),
        ("dangling_edge", "d1"),
        ("dangling_edge", ""),
    ]
    assert rows[5][3] == "... and 2 more dangling_edge finding(s) (`mdcg health --json` lists every one)"
    assert rows[2][3].startswith("... and 1 more expired finding(s)")


def test_sweep_lines_name_twenty_ids_and_count_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "m"
    ids = _expired(root, 25)
    dry = runner.invoke(app, ["--root", str(root), "sweep", "--dry-run"])
    assert dry.exit_code == 0
    assert dry.output == (
        f"expired (25): {', '.join(ids[:20])}, ... (+5 more; --json lists every one); nothing removed\n"
    )
    full = runner.invoke(app, ["--root", str(root), "sweep", "--dry-run", "--json"])
    assert json.loads(full.output)["expired"] == ids
    done = runner.invoke(app, ["--root", str(root), "sweep"])
    assert done.output == f"removed (25): {', '.join(ids[:20])}, ... (+5 more; --json lists every one)\n"
    again = runner.invoke(app, ["--root", str(root), "sweep", "--dry-run"])
    assert again.output == "expired (0): none; nothing removed\n"


def test_the_mcp_health_reply_was_already_bounded(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _expired(root, 25)
    with MdCG(root) as store:
        server = create_server(root, store=store)

        async def run() -> None:
            async with Client(server) as client:
                result = await client.call_tool("health", {})
                data = json.loads(result.content[0].text)
                assert [f["node_id"] for f in data["findings"]] == [f"e{i:03d}" for i in range(20)]
                assert data["totals"] == {"findings": 25}

        anyio.run(run)


def test_the_mcp_health_reply_lists_errors_first_and_every_kind(tmp_path: Path) -> None:
    # r6: 25 expired memories (warnings) filled the 20 listed findings and a merge conflict
    # (an error) was never shown to the agent.
    root = tmp_path / "m"
    _expired(root, 25)
    clash = "<<<<<<< ours\nthe 14th\n=======\nthe 21st\n>>>>>>> theirs\n"
    (root / "knowledge" / "clash.md").write_text('---\nid: "clash"\nlayer: "knowledge"\n---\n' + clash)
    (root / "knowledge" / "broken.md").write_text("---\nid: [\n---\nbody\n", encoding="utf-8")
    with MdCG(root) as store:
        store.sync()
        server = create_server(root, store=store)

        async def run() -> None:
            async with Client(server) as client:
                result = await client.call_tool("health", {})
                data = json.loads(result.content[0].text)
                listed = [(f["severity"], f["kind"], f.get("node_id") or f["path"]) for f in data["findings"]]
                assert listed[:2] == [
                    ("error", "unreadable_file", "knowledge/broken.md"),
                    ("error", "merge_conflict", "clash"),
                ]
                assert listed[2:] == [("warning", "expired", f"e{i:03d}") for i in range(18)]
                assert data["kinds"] == {"unreadable_file": 1, "merge_conflict": 1, "expired": 25}
                assert data["totals"] == {"findings": 27}
                assert data["note"] == (
                    "20 of 27 findings listed, errors first and every kind in turn (kinds counts them "
                    "all); `mdcg health` lists every one"
                )

        anyio.run(run)


# -- 3. an interrupted archive's two copies ------------------------------------------------


def _archive_and_die(root: str, step: str) -> None:
    s = MdCG(root)
    s._engine.journal.fault = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == step else None
    s.archive(["a0", "a1", "a2"], reason="bulk")


def _killed_archive(tmp_path: Path, step: str) -> tuple[Path, str]:
    root = tmp_path / "m"
    with MdCG(root) as s:
        for i in range(4):
            s.add(id=f"a{i}", body=f"memory {i}")
    assert stress.wait(stress.fork(_archive_and_die, str(root), step)) == -signal.SIGKILL
    with MdCG(root, read_only=True) as s:
        s.health()
        (c,) = s._engine.cursor.pending.values()
    return root, f"log {c.shard}, record {c.seq}"


def _open_commit(where: str, copies: int) -> str:
    return (
        f"a write of 3 node(s) interrupted by a crash ({where}); sync() or the next write of these ids "
        f"finishes it: writes a0, a1, a2; until then {copies} of its id(s) are in two files, where it "
        "puts them and where they were (not duplicates to remove by hand: the sync removes the old file)"
    )


@pytest.mark.parametrize(("step", "copies", "temps"), [("renamed", 3, 0), ("rename-2", 2, 1)])
def test_a_killed_archive_s_two_copies_are_part_of_its_open_commit(
    tmp_path: Path, step: str, copies: int, temps: int
) -> None:
    root, where = _killed_archive(tmp_path, step)
    doubled = [i for i in ("a0", "a1", "a2") if len(list(root.rglob(f"{i}.md"))) == 2]
    assert len(doubled) == copies
    with MdCG(root, read_only=True) as s:
        report = s.health()
    assert [f.kind for f in report.findings] == ["open_commit"] + ["temp_file"] * temps
    assert report.findings[0].detail == _open_commit(where, copies)
    with MdCG(root) as s:  # the advice holds: the sync settles it
        s.sync()
        assert s.health().ok
        assert sorted(str(p.relative_to(root)) for p in root.rglob("*.md")) == [
            "archive/knowledge/orphan/a0.md",
            "archive/knowledge/orphan/a1.md",
            "archive/knowledge/orphan/a2.md",
            "knowledge/orphan/a3.md",
        ]


def test_a_copy_edited_after_the_crash_keeps_its_duplicate_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal, "_CLOCK_SLACK", 0.2)
    root, where = _killed_archive(tmp_path, "renamed")
    time.sleep(0.4)
    old = root / "knowledge/orphan/a0.md"
    old.write_text(old.read_text().replace("memory 0", "memory 0, edited by hand"))
    with MdCG(root, read_only=True) as s:
        report = s.health()
    assert [(f.kind, f.node_id) for f in report.findings] == [("duplicate_id", "a0"), ("open_commit", None)]
    assert report.findings[1].detail == (
        f"a write of 3 node(s) interrupted by a crash ({where}); sync() or the next write of these ids "
        "finishes it: writes a1, a2; leaves a0 as edited after the crash (a hand edit is never replaced); "
        "until then 2 of its id(s) are in two files, where it puts them and where they were (not "
        "duplicates to remove by hand: the sync removes the old file)"
    )
