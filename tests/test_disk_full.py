"""A full disk (ENOSPC): a failed write changes nothing, a torn log append is taken back,
reads go on, and the store writes again once there is room.

The failures are injected in ``os.write`` (one write half done, then ENOSPC),
so each test knows exactly which append was torn; a real full file system is
exercised by hand in docs/reliability.md (row 18).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import node_tree, python_env

from md_cg import MdCG, fsops, journal

_real_write = os.write


def _torn_write(tear=lambda data: True):
    """An ``os.write`` that writes half of the first data ``tear`` picks, then fails every write."""
    state = {"torn": False}

    def write(fd: int, data) -> int:
        if state["torn"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        if tear(bytes(data)):
            state["torn"] = True
            return _real_write(fd, bytes(data)[: max(1, len(data) // 2)])
        return _real_write(fd, data)

    return write


def test_a_torn_append_is_cut_back_and_the_next_record_reads(tmp_path: Path, monkeypatch) -> None:
    root = str(tmp_path)
    w = fsops.ShardWriter(root, "log")
    w.append([{"k": 1}])
    size = os.path.getsize(tmp_path / "log" / w.name)
    monkeypatch.setattr(fsops.os, "write", _torn_write())
    with pytest.raises(OSError, match="No space left"):
        w.append([{"k": 2}, {"k": 3}])
    monkeypatch.setattr(fsops.os, "write", _real_write)
    assert os.path.getsize(tmp_path / "log" / w.name) == size  # the torn half is gone
    w.append([{"k": 4}])
    read = fsops.read_shard(root, f"log/{w.name}")
    assert [(r["k"], r["seq"]) for r in read.records] == [(1, 1), (4, 2)]
    assert read.bad_lines == 0
    w.close()


def test_an_add_whose_commit_line_is_torn_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "m"
    s = MdCG(root, auto_compact=None)  # no snapshot: the other process reads the log
    s.add(id="before", layer="self", body="stored before the disk filled")
    tree = node_tree(root)
    # the commit line of the next add is torn, then the disk is full
    monkeypatch.setattr(fsops.os, "write", _torn_write(lambda data: b'"op":"commit"' in data))
    with pytest.raises(OSError, match="No space left"):
        s.add(id="lost", layer="self", body="never stored")
    monkeypatch.setattr(fsops.os, "write", _real_write)
    after = node_tree(root)
    assert sorted(after) == sorted(tree)  # no node file, no temp file
    assert after["self/before.md"] == tree["self/before.md"]
    assert s.ids() == ["before"]
    s.add(id="after", layer="self", body="stored once there was room")
    shards = [p for p in (root / journal.LOG_REL).iterdir() if p.suffix == ".jsonl"]
    assert shards and all(p.read_bytes().endswith(b"\n") for p in shards)
    # another process, while this one still holds its shard, reads the log
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from md_cg import MdCG\n"
            "s = MdCG(sys.argv[1], read_only=True)\n"
            "print(s.loaded_from, s.ids(), s.get('after').body, [f.kind for f in s.health().findings])\n",
            str(root),
        ],
        capture_output=True,
        text=True,
        env=python_env(),
        check=True,
    )
    assert out.stdout == "files ['after', 'before'] stored once there was room []\n"
    s.close()


def test_reads_go_on_when_access_events_cannot_be_written(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a1", layer="self", body="binary search on a sorted array")
        s.add(id="a2", layer="self", body="rollback of a deployment")

        def full(fd: int, data) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(fsops.os, "write", full)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                results, _info = s.search("binary search", k=1)
                assert [r.id for r in results] == ["a1"]
        monkeypatch.setattr(fsops.os, "write", _real_write)
        assert [str(w.message) for w in caught] == [
            f"md-cg: {root}: No space left on device; accesses are not recorded while it lasts"
        ]
        assert [(f.kind, f.detail) for f in s.health().findings] == [
            ("access_unrecorded", "3 access event(s) not recorded: the disk was full")
        ]
        # room again: the next search is recorded
        s.search("rollback", k=1)
        assert s.compact_access() == {"a2": 1}


def test_the_cli_says_the_disk_is_full_in_one_line(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from md_cg.cli import app
    from md_cg.sample import bundled_sample_path

    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    root = tmp_path / "m"
    assert runner.invoke(app, ["--root", str(root), "add", "--id", "kept", "kept note"]).exit_code == 0
    tree = node_tree(root)

    def full(fd: int, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fsops.os, "write", full)
    for args, again in (
        (["add", "--id", "lost", "never stored"], "run the command again"),
        (
            ["migrate", str(bundled_sample_path()), str(tmp_path / "mig")],
            "run the same command again to resume from the last committed batch",
        ),
    ):
        out = runner.invoke(app, ["--root", str(root), *args])
        assert (out.exit_code, out.stdout) == (2, ""), out.output
        assert (
            out.stderr
            == f"error: No space left on device; nothing stored was lost: make room, then {again}\n"
        )
    monkeypatch.setattr(fsops.os, "write", _real_write)
    assert sorted(node_tree(root)) == sorted(tree)

    def broken(fd: int, data) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(
        fsops.os, "write", broken
    )  # not the disk being full: a traceback (a bug or a failing disk)
    out = runner.invoke(app, ["--root", str(root), "add", "--id", "io", "x"])
    assert out.exit_code == 1 and isinstance(out.exception, OSError) and out.exception.errno == errno.EIO


def test_an_mcp_remember_on_a_full_disk_is_a_tool_error(tmp_path: Path, monkeypatch) -> None:
    anyio = pytest.importorskip("anyio")
    mcp = pytest.importorskip("mcp")
    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    server = create_server(root)

    def full(fd: int, data) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    async def run() -> list[tuple[bool, str]]:
        async with mcp.Client(server) as client:
            kept = await client.call_tool(
                "remember", {"body": "binary search on sorted arrays", "layer": "self"}
            )
            monkeypatch.setattr(fsops.os, "write", full)
            lost = await client.call_tool("remember", {"body": "never stored", "layer": "self"})
            found = await client.call_tool("search", {"query": "binary search"})
            monkeypatch.setattr(fsops.os, "write", _real_write)
            return [(r.is_error, r.content[0].text) for r in (kept, lost, found)]

    with pytest.warns(RuntimeWarning, match="accesses are not recorded while it lasts"):
        (kept, lost, found) = anyio.run(run)
    assert not kept[0] and not found[0]
    assert lost == (
        True,
        "Error executing tool remember: No space left on device: the store's disk is full; "
        "nothing stored was lost, retry after making room",
    )
    assert '"self' in found[1] and [p.name for p in (root / "self").iterdir()] == [
        json.loads(kept[1])["id"] + ".md"
    ]


def test_the_cli_on_a_read_only_file_system(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from md_cg.cli import app

    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    root = tmp_path / "m"
    assert runner.invoke(app, ["--root", str(root), "add", "--id", "kept", "binary search"]).exit_code == 0

    def read_only(fd: int, data) -> int:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(fsops.os, "write", read_only)
    out = runner.invoke(app, ["--root", str(root), "add", "--id", "lost", "x"])
    assert (out.exit_code, out.stdout) == (2, "")
    assert out.stderr == (
        "error: the store's file system is read-only; nothing was changed: reading commands work, "
        "writing ones need it mounted writable\n"
    )
    out = runner.invoke(app, ["--root", str(root), "search", "binary search", "--json"])
    assert out.exit_code == 0 and [r["id"] for r in json.loads(out.stdout)["results"]] == ["kept"]
    assert (
        out.stderr == f"warning: {root} is not writable (Read-only file system); accesses are not recorded\n"
    )
