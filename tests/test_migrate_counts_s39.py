"""Session 39: what session 38's migration simulation (a dirty 49,836-row database) found.

1. The bad rows of the two tables were counted together: ``bad rows (737):`` over a line
   saying ``467 bad, 270 edge row(s) left out``; ``--strict`` said ``737 bad row(s)``.
2. A self-edge row (source == target) migrated without a word, and ``health`` then
   reported ``self_edge``.
3. ``mdcg stats`` right after a migration called every memory a zombie, though the rows
   carried ``access_count`` / ``last_access`` (the files hold them; the statistics read
   only the access log).
4. The batch being written at Ctrl-C was counted ``unchanged`` by the resume, as if the
   store had held those memories before the migration.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import python_env, tree_listing
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.access import stats as access_stats
from md_cg.cli import app
from md_cg.migrate import BadRow, journal_path, migrate, read_journal, verify_migration
from md_cg.node import Edge
from md_cg.recall import StatsNode, recall_stats
from md_cg.sqlite_source import SCHEMA_SQL

DAY = 86_400.0
NOW = time.time()
OLD = NOW - 90 * DAY  # every row was created three months ago: old enough to be judged
REPO = Path(__file__).resolve().parent.parent

# id, layer, content, access_count, last_access
NODE_ROWS = [
    ("recent", "knowledge", "Recalled two days ago", 5, NOW - 2 * DAY),  # 1
    ("stale", "knowledge", "Recalled two months ago", 3, NOW - 60 * DAY),  # 2
    ("never", "knowledge", "Never recalled", None, None),  # 3
    ("episode", "episodic", "an unknown layer", 1, NOW - DAY),  # 4: bad
    ("recent", "knowledge", "a second row with the id", None, None),  # 5: bad (duplicate)
    ("counted", "knowledge", "Counted, no time recorded", 7, 0),  # 6
    ("nulled", "knowledge", None, None, None),  # 7: bad (NULL content)
]
# source, target, type
EDGE_ROWS = [
    ("recent", "stale", "causal"),  # 1: good
    ("recent", "recent", "causal"),  # 2: a self-edge
    ("ghost", "recent", "similar"),  # 3: no such source node
    ("stale", "never", "weird"),  # 4: unknown type
    ("never", "never", None),  # 5: a self-edge of no type (similar)
]

BAD_NODES = [
    BadRow(
        4,
        "episode",
        "node 'episode': unknown layer 'episodic'; expected one of: anchor, structural, knowledge, "
        "contextual, self, rejected, unresolved",
    ),
    BadRow(5, "recent", "duplicate id, first seen at nodes rowid 1"),
    BadRow(7, "nulled", "column 'content' is NULL (use '' for an empty body)"),
]
BAD_EDGES = [
    BadRow(
        2,
        "recent",
        "the edge 'recent' -> 'recent' is left out: an edge to itself (causal); edges link two memories",
        "edges",
    ),
    BadRow(
        4,
        "stale",
        "the edge 'stale' -> 'never' is left out: field 'edges' has an edge type outside part_of, "
        "causal, sequential, spatial, hierarchical, similar, supersedes (got 'weird')",
        "edges",
    ),
    BadRow(
        5,
        "never",
        "the edge 'never' -> 'never' is left out: an edge to itself (similar); edges link two memories",
        "edges",
    ),
    BadRow(3, "ghost", "source 'ghost' (target 'recent') is not a node in 'nodes'", "edges"),
]


def dirty_source(path: Path) -> Path:
    """A small dirty database: 7 node rows (3 bad), 5 edge rows (4 bad, 2 of them self-edges)."""
    conn = sqlite3.connect(path)
    # no NOT NULL on content, no primary key: a dirty database has neither
    schema = SCHEMA_SQL.replace("content TEXT NOT NULL", "content TEXT")
    conn.executescript(schema.replace("NOT NULL PRIMARY KEY", ""))
    with conn:
        conn.executemany(
            "INSERT INTO nodes (id, layer, content, created_at, access_count, last_access) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(i, layer, body, OLD, count, last) for i, layer, body, count, last in NODE_ROWS],
        )
        conn.executemany("INSERT INTO edges (source, target, type) VALUES (?, ?, ?)", EDGE_ROWS)
    conn.close()
    return path


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})


# -- 1. the counts, each table's labelled --------------------------------------------------


def test_bad_node_and_edge_rows_are_counted_apart_everywhere(tmp_path: Path, runner: CliRunner) -> None:
    src, dest = dirty_source(tmp_path / "dirty.sqlite"), tmp_path / "store"
    report = migrate(src, dest)
    assert report.ok
    # the reader's order: a good node's bad edges after it, edges of no node at the end
    assert report.bad_rows == [*BAD_EDGES[:3], *BAD_NODES, BAD_EDGES[3]]
    assert (report.rows, report.migrated, report.bad_node_rows, report.bad_edge_rows) == (7, 4, 3, 4)
    assert report.rows == report.migrated + report.bad_node_rows
    assert report.bad_rows_summary() == "3 bad node row(s) and 4 bad edge row(s) in the source"
    text = report.render()
    assert text.splitlines()[1] == "  node rows 7: 4 good, 3 bad; edge rows: 4 bad (left out)"
    assert text.endswith(
        "bad node rows (3):\n"
        "  nodes rowid 4 (id 'episode'): node 'episode': unknown layer 'episodic'; expected one of: "
        "anchor, structural, knowledge, contextual, self, rejected, unresolved\n"
        "  nodes rowid 5 (id 'recent'): duplicate id, first seen at nodes rowid 1\n"
        "  nodes rowid 7 (id 'nulled'): column 'content' is NULL (use '' for an empty body)\n"
        "bad edge rows (4):\n"
        "  edges rowid 2 (source 'recent'): the edge 'recent' -> 'recent' is left out: an edge to "
        "itself (causal); edges link two memories\n"
        "  edges rowid 3 (source 'ghost'): source 'ghost' (target 'recent') is not a node in 'nodes'\n"
        "  edges rowid 4 (source 'stale'): the edge 'stale' -> 'never' is left out: field 'edges' has an "
        "edge type outside part_of, causal, sequential, spatial, hierarchical, similar, supersedes "
        "(got 'weird')\n"
        "  edges rowid 5 (source 'never'): the edge 'never' -> 'never' is left out: an edge to itself "
        "(similar); edges link two memories\n"
    )
    data = report.to_dict()
    assert (data["rows"], data["migrated"], data["bad_node_rows"], data["bad_edge_rows"]) == (7, 4, 3, 4)
    assert [(r["table"], r["rowid"]) for r in data["bad_rows"]] == [
        ("edges", 2),
        ("edges", 4),
        ("edges", 5),
        ("nodes", 4),
        ("nodes", 5),
        ("nodes", 7),
        ("edges", 3),
    ]
    journal = read_journal(src, dest)
    assert journal is not None and (journal["bad_node_rows"], journal["bad_edge_rows"]) == (3, 4)
    assert "bad_rows" not in journal

    # the command line: the text, --json and --strict say the same
    result = runner.invoke(app, ["migrate", str(src), str(dest), "--strict"])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[1] == "  node rows 7: 4 good, 3 bad; edge rows: 4 bad (left out)"
    assert "bad node rows (3):\n" in result.stdout and "bad edge rows (4):\n" in result.stdout
    assert result.stderr == "--strict: 3 bad node row(s) and 4 bad edge row(s) in the source\n"
    result = runner.invoke(app, ["migrate", str(src), str(dest), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert (data["bad_node_rows"], data["bad_edge_rows"], len(data["bad_rows"])) == (3, 4, 7)
    # the checkout's wrapper, python -m migrate
    done = subprocess.run(
        [sys.executable, "-m", "migrate", str(src), str(dest), "--strict", "--no-progress"],
        env=python_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr == "--strict: 3 bad node row(s) and 4 bad edge row(s) in the source\n"


def test_a_clean_source_says_zero_of_each(tmp_path: Path) -> None:
    report = migrate(_slice(tmp_path, rows=1), tmp_path / "store")
    assert report.render().splitlines()[1] == "  node rows 1: 1 good, 0 bad; edge rows: 0 bad"
    assert "bad node rows" not in report.render() and "bad edge rows" not in report.render()
    assert (report.to_dict()["bad_node_rows"], report.to_dict()["bad_edge_rows"]) == (0, 0)


# -- 2. a self-edge row --------------------------------------------------------------------


def test_a_self_edge_row_is_a_bad_edge_row_and_health_stays_clean(tmp_path: Path) -> None:
    src, dest = dirty_source(tmp_path / "dirty.sqlite"), tmp_path / "store"
    report = migrate(src, dest)
    assert [r for r in report.bad_rows if "itself" in r.reason] == [BAD_EDGES[0], BAD_EDGES[2]]
    assert report.mismatches == [] and report.ok
    assert report.dest_findings == {}  # was {'self_edge': 2}
    with MdCG(dest, read_only=True, create=False) as store:
        assert store.get("recent").edges == [Edge("stale", "causal")]  # its good edge stays
        assert store.get("never").edges == []
        assert store.health().findings == ()
    assert verify_migration(src, dest).mismatches == []


# -- 3. recall statistics of migrated memories ---------------------------------------------


def test_stats_right_after_a_migration_count_the_recalls_the_files_carry(
    tmp_path: Path, runner: CliRunner
) -> None:
    src, dest = dirty_source(tmp_path / "dirty.sqlite"), tmp_path / "store"
    assert migrate(src, dest).ok
    before = tree_listing(dest)
    with MdCG(dest, read_only=True, create=False) as store:
        zombie = store.recall_stats().to_dict()["zombie"]
    # recent (last_access 2 days ago) and counted (7 accesses, time not recorded: they were
    # made before the file was written, minutes ago) are not zombies; stale (last recalled
    # 60 days ago, before the 30-day window) and never are
    assert zombie == {
        "active_count": 4,
        "exempt_count": 0,
        "eligible_count": 4,
        "zombie_count": 2,
        "zombie_rate": 0.5,
        "file_recalled_count": 2,
        "sample": [
            {"id": "never", "title": "Never recalled"},
            {"id": "stale", "title": "Recalled two months ago"},
        ],
    }
    result = runner.invoke(app, ["stats", "--root", str(dest)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "zombies: 2/4 eligible (50.0%); injection: 0 in 0 run(s), slot fill n/a",
        "not zombies: 2 eligible memory(ies) whose files record a recall in the window "
        "(access_count / last_access from before the access log: a migration's)",
    ]
    data = json.loads(runner.invoke(app, ["stats", "--root", str(dest), "--json"]).stdout)
    assert (data["zombie"]["zombie_count"], data["zombie"]["file_recalled_count"]) == (2, 2)
    assert (data["exposed_count"], data["top_recalled"]) == (0, [])  # the log's figures: none yet
    assert tree_listing(dest) == before  # reads write nothing

    # A search exposes 'never' (a logged exposure): neither a zombie nor counted from its file.
    with MdCG(dest, create=False) as store:
        assert [r.id for r in store.search("Never recalled", k=1)[0]] == ["never"]
        zombie = store.recall_stats().zombie
        assert (zombie.zombie_count, zombie.file_recalled_count, zombie.sample) == (
            1,
            2,
            (("stale", "Recalled two months ago"),),
        )
        # Sixty days on, the files' recalls (two days before the migration; the accesses
        # without a time, before the file was written) are out of the window: zombies.
        later = datetime.now(UTC) + timedelta(days=60)
        entries = store._active_entries()
        zombie = access_stats(
            dest, entries, store.scope, window_days=30, exempt_days=7, max_inject_slots=5, now=later
        ).zombie
        assert (zombie.zombie_count, zombie.file_recalled_count) == (4, 0)


def test_recall_stats_takes_a_last_access_in_the_window_only() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    at = now.timestamp()
    nodes = [
        StatsNode("in", "In", at - 90 * DAY, True, at - 29 * DAY),
        StatsNode("edge", "Edge", at - 90 * DAY, True, at - 30 * DAY),  # the window's first instant
        StatsNode("before", "Before", at - 90 * DAY, True, at - 30 * DAY - 1),
        StatsNode("future", "Future", at - 90 * DAY, True, at + DAY),  # no access can be later than now
        StatsNode("none", "None", at - 90 * DAY, True),
        ("tuple", "Tuple", at - 90 * DAY, True, at - DAY),
        ("four", "Four", at - 90 * DAY, True),
        StatsNode("young", "Young", at - DAY, True, at - DAY),  # exempt first
        StatsNode("off", "Off", at - 90 * DAY, False, at - DAY),  # not active
    ]
    zombie = recall_stats([], nodes, now=now).zombie
    assert zombie.to_dict() == {
        "active_count": 8,
        "exempt_count": 1,
        "eligible_count": 7,
        "zombie_count": 4,
        "zombie_rate": 4 / 7,
        "file_recalled_count": 3,
        "sample": [
            {"id": "before", "title": "Before"},
            {"id": "four", "title": "Four"},
            {"id": "future", "title": "Future"},
            {"id": "none", "title": "None"},
        ],
    }
    from md_cg.errors import InvalidArgumentError

    with pytest.raises(
        InvalidArgumentError, match=r"the last_access of 'x' must be seconds or None, got 'y'"
    ):
        recall_stats([], [("x", None, 1.0, True, "y")], now=now)
    with pytest.raises(
        InvalidArgumentError, match=r"expected \(id, title, created_at, active\[, last_access\]\)"
    ):
        recall_stats([], [("x", None, 1.0, True, 2.0, 3)], now=now)


# -- 4. Ctrl-C inside a batch, then the resume ----------------------------------------------

# The CLI in a child process whose second group commit ends in a real SIGINT (Ctrl-C) right
# after its files are in place, before the checkpoint records the batch.
#
# Session 40: the child restores the SIGINT handler a process started from a terminal has.
# A shell's background job without job control (`cmd &` in a script) starts with SIGINT
# ignored; pytest, its xdist workers and this child inherit that, and a Python started so
# keeps it ignored (it installs KeyboardInterrupt's handler only over the default): the
# os.kill below did nothing, the migration ran to its end and exited 0 -- the CI failure
# of session 39 (the tests passed in a terminal; test order and xdist have no part in it).
# `_ctrl_c_in_second_batch` always starts the child with SIGINT ignored, so every run, in
# a terminal too, tests the case the CI met.
_CTRL_C_IN_SECOND_BATCH = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from md_cg.store import MdCG
real = MdCG.add_many
calls = []
def add_many(self, *args, **kwargs):
    out = real(self, *args, **kwargs)
    calls.append(1)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGINT)
    return out
MdCG.add_many = add_many
sys.argv = ["mdcg", *sys.argv[1:]]
from md_cg.launch import main
main()
"""


def _slice(tmp_path: Path, rows: int = 40) -> Path:
    src = tmp_path / "slice.sqlite"
    conn = sqlite3.connect(src)
    conn.executescript(SCHEMA_SQL)
    with conn:
        conn.executemany(
            "INSERT INTO nodes (id, layer, content, created_at) VALUES (?, 'knowledge', ?, ?)",
            [(f"n{i:02d}", f"memory number {i}", OLD + i) for i in range(rows)],
        )
    conn.close()
    return src


# Runs the rest of its arguments with SIGINT ignored (exec keeps an ignored signal ignored).
_SIGINT_IGNORED = ["sh", "-c", 'trap "" INT; exec "$0" "$@"']


def _ctrl_c_in_second_batch(src: Path, dest: Path) -> None:
    done = subprocess.run(
        [
            *_SIGINT_IGNORED,
            sys.executable,
            "-c",
            _CTRL_C_IN_SECOND_BATCH,
            "migrate",
            str(src),
            str(dest),
            "--batch",
            "10",
            "--quiet",
        ],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "interrupted: run the same command again to resume from the last committed batch\n"
    journal = read_journal(src, dest)
    assert journal is not None and (journal["rowid"], journal["complete"]) == (10, False)


def test_the_batch_written_at_ctrl_c_is_counted_skipped_on_resume(tmp_path: Path) -> None:
    src, dest = _slice(tmp_path), tmp_path / "store"
    _ctrl_c_in_second_batch(src, dest)
    with MdCG(dest, read_only=True, create=False) as store:
        assert len(store) == 20  # the second batch is in place, the checkpoint says 10
    report = migrate(src, dest, batch=10)
    assert report.ok and report.resumed_from == 10
    assert (report.skipped, report.created, report.updated, report.unchanged) == (20, 20, 0, 0)
    assert report.verified == 40
    assert "  created 20, updated 0 (0 moved), unchanged 0, skipped (resumed) 20\n" in report.render()


def test_a_resume_still_counts_unchanged_what_the_store_held_before(tmp_path: Path) -> None:
    """The files of an earlier, finished migration (older than the interrupted run) are
    unchanged, in the batch written at Ctrl-C too: only what the interrupted run wrote is
    skipped."""
    src, dest = _slice(tmp_path), tmp_path / "store"
    assert migrate(src, dest, batch=10).created == 40
    hour_ago = time.time() - 3600
    for path in (dest / "knowledge").rglob("*.md"):
        os.utime(path, (hour_ago, hour_ago))
    with MdCG(dest, create=False) as store:
        store.sync()  # the index takes the older mtimes in
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(src, copy)  # another source path: another journal
    assert journal_path(copy, dest) != journal_path(src, dest)
    _ctrl_c_in_second_batch(copy, dest)
    report = migrate(copy, dest, batch=10)
    assert report.ok and report.resumed_from == 10
    assert (report.skipped, report.created, report.updated, report.unchanged) == (10, 0, 0, 30)
