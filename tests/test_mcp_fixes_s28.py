"""The MCP server on a store it may not write, ``--read-only``, ``open_nodes``'s bound,
writes to a superseded memory, a NaN importance (review of session 28).

A store the server could not write (a read-only file system, a chmod'd copy served as
another user) made every writing tool answer only ``Error executing tool remember``:
no reason, and nothing on stderr. Now the reply names the file and says why in one
line, nothing is written and the reads keep working; an unexpected OS error (EIO) is
logged with its traceback as docs/mcp.md says. ``mdcg mcp --read-only`` serves the
reading tools alone. The ``open_nodes`` alias read each of 20 names (repeats too) in a
20,000-character window: a 400k-character reply; now repeats are read once and the
reply holds at most ``OPEN_NODES_CHARS``. ``update`` / ``verify`` of a superseded memory
say it stays out of search; ``importance: "NaN"`` is refused as not finite.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from conftest import build_small_store
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from typer.testing import CliRunner

from md_cg import MdCG, fsops
from md_cg.cli import app
from md_cg.integrations.aliases import OPEN_NODES_CHARS
from md_cg.mcp_server import READ_ONLY, create_server

REPO = Path(__file__).resolve().parent.parent
READS = [
    ("search", {"query": "binary search"}),
    ("get", {"id": "kp_sorting"}),
    ("list", {}),
    ("neighbours", {"id": "kp_bsearch"}),
    ("health", {}),
]
WRITES = [
    ("remember", {"body": "a new memory", "id": "new1"}),
    ("update", {"id": "kp_sorting", "body": "changed"}),
    ("forget", {"id": "kp_sorting", "reason": "x"}),
    ("verify", {"id": "kp_sorting", "evidence": "e", "verdict": "confirmed"}),
    ("supersede", {"old": "kp_sorting", "new": "kp_bsearch"}),
    ("reflect", {"query": "binary"}),
    ("organize", {"mode": "dryRun", "candidates": [{"layer": "knowledge", "title": "t", "content": "c"}]}),
    ("sync", {}),
]
NOT_WRITABLE = (
    "; this server may not write to the store (its files or folders are not writable by "
    "the user it runs as): the reading tools (search, get, list...) work"
)
READ_ONLY_FS = (
    "; the store's file system is read-only, so this server cannot write to it: "
    "the reading tools (search, get, list...) work, writing needs it mounted writable"
)


def _tree(root: Path) -> dict[str, bytes]:
    """Every file of the store (``.mdcg/`` included), by path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _memories(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in _tree(root).items() if not k.startswith(".mdcg/")}


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _err(result: Any) -> str:
    assert result.is_error, result.content
    return result.content[0].text


class _Unwritable(types.ModuleType):
    """``os`` as md_cg.fsops sees it on a store it may not write: every open for writing,
    every folder made, file renamed or removed fails with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__("os")
        self.code = code

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def _refuse(self, path: Any) -> OSError:
        return OSError(self.code, os.strerror(self.code), path)

    def open(self, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise self._refuse(path)
        return os.open(path, flags, *args, **kwargs)

    def mkdir(self, path: Any, *args: Any, **kwargs: Any) -> None:
        raise self._refuse(path)

    def rename(self, src: Any, dst: Any, **kwargs: Any) -> None:
        raise self._refuse(src)

    replace = rename

    def unlink(self, path: Any, **kwargs: Any) -> None:
        raise self._refuse(path)


async def _reads_answer_writes_refused(client: Client, root: Path, tail: str, denied: str) -> None:
    """Every write refused with one line naming a file of the store; reads answer, before and after."""
    for name, args in READS:
        _ok(await client.call_tool(name, args))
    for name, args in WRITES:
        text = _err(await client.call_tool(name, args))
        m = re.fullmatch(
            rf"Error executing tool {name}: {re.escape(denied)} \(in the store at {re.escape(str(root))}\): "
            rf"(\S+){re.escape(tail)}",
            text,
        )
        assert m is not None, text
        assert "\n" not in text and len(text) <= 600
    for name, args in READS:
        _ok(await client.call_tool(name, args))


@pytest.mark.parametrize(
    ("code", "tail", "denied"),
    [(errno.EACCES, NOT_WRITABLE, "Permission denied"), (errno.EROFS, READ_ONLY_FS, "Read-only file system")],
)
def test_a_store_the_server_may_not_write_says_why_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, code: int, tail: str, denied: str
) -> None:
    root = build_small_store(tmp_path / "m")
    with MdCG(root) as store:
        server = create_server(root, store=store)
        before = _memories(root)
        monkeypatch.setattr(fsops, "os", _Unwritable(code))

        async def run() -> None:
            async with Client(server) as client:
                await _reads_answer_writes_refused(client, root, tail, denied)

        with pytest.warns(RuntimeWarning, match="accesses are not recorded"):
            anyio.run(run)
        monkeypatch.undo()
        assert _memories(root) == before
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to a chmod'd copy")
def test_a_chmod_copy_is_refused_with_the_reason(tmp_path: Path) -> None:
    src = build_small_store(tmp_path / "m")
    root = tmp_path / "ro"
    shutil.copytree(src, root)
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        before = _tree(root)

        async def run() -> None:
            with MdCG(root) as store:
                async with Client(create_server(root, store=store)) as client:
                    await _reads_answer_writes_refused(client, root, NOT_WRITABLE, "Permission denied")

        with pytest.warns(RuntimeWarning):
            anyio.run(run)
        assert _tree(root) == before
    finally:
        for p in [root, *root.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)


def test_an_unexpected_os_error_is_logged_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    root = build_small_store(tmp_path / "m")
    with MdCG(root) as store:
        server = create_server(root, store=store)

        def failing_disk(*args: Any, **kwargs: Any) -> Any:
            raise OSError(errno.EIO, "Input/output error", "knowledge/x.md")

        monkeypatch.setattr(store, "add", failing_disk)

        async def run() -> None:
            async with Client(server) as client:
                got = _err(await client.call_tool("remember", {"body": "x", "id": "x1"}))
                assert got == "Error executing tool remember"
                _ok(await client.call_tool("get", {"id": "kp_sorting"}))  # still serving

        anyio.run(run)
    err = capsys.readouterr().err
    assert "Traceback" in err and "OSError: [Errno 5] Input/output error: 'knowledge/x.md'" in err


WITHHELD = "this server serves the store read-only (`mdcg mcp --read-only`), so it does not offer"


def test_a_read_only_server_offers_the_reading_tools_alone(tmp_path: Path) -> None:
    root = build_small_store(tmp_path / "m")
    before = _tree(root)
    server = create_server(root, read_only=True, aliases=("mcp-memory",))
    assert server.store.read_only
    offered = sorted(READ_ONLY | {"open_nodes", "read_graph", "search_nodes"})
    assert server.withheld == {
        "remember", "update", "forget", "supersede", "verify", "reflect", "organize", "sync",
        "create_entities", "create_relations", "add_observations", "delete_entities",
        "delete_observations", "delete_relations",
    }  # fmt: skip

    async def run() -> None:
        async with Client(server) as client:
            assert sorted(t.name for t in (await client.list_tools()).tools) == offered
            for name, args in READS:
                _ok(await client.call_tool(name, args))
            _ok(await client.call_tool("open_nodes", {"names": ["kp_sorting"]}))
            for name, args in [*WRITES, ("create_entities", {"entities": []})]:
                assert _err(await client.call_tool(name, args)) == (
                    f"{name}: {WITHHELD} `{name}`; nothing was written. It offers: {', '.join(offered)}"
                )

    anyio.run(run)
    server.store.close()
    assert _tree(root) == before
    with pytest.raises(TypeError, match="pass read_only only when create_server opens the store"):
        create_server(root, store=MdCG(root, read_only=True), read_only=True)


def test_mdcg_mcp_read_only_over_stdio(tmp_path: Path) -> None:
    root = build_small_store(tmp_path / "m")
    before = _tree(root)
    env = {
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PATH": os.environ["PATH"],
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "md_cg.cli", "mcp", "--root", str(root), "--read-only"], env=env
    )

    async def run() -> None:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                assert "This server is read-only" in (init.instructions or "")
                assert {t.name for t in (await session.list_tools()).tools} == READ_ONLY
                found = await session.call_tool("search", {"query": "binary search"})
                assert found.structured_content["results"][0]["id"] == "kp_bsearch"
                refused = await session.call_tool("remember", {"body": "x"})
                assert refused.is_error and refused.content[0].text.startswith(f"remember: {WITHHELD}")

    anyio.run(run)
    assert _tree(root) == before
    missing = tmp_path / "none"
    result = CliRunner().invoke(app, ["mcp", "--root", str(missing), "--read-only"])
    assert result.exit_code == 2 and not missing.exists()
    assert "no such store folder" in result.output


def test_open_nodes_reads_a_name_once_and_bounds_its_reply(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        for i in range(20):  # each body escapes to twice its length in JSON
            store.add(id=f"e{i:02d}", layer="knowledge", body=f"# e{i:02d}\n" + '"' * 30_000)
        server = create_server(root, store=store, aliases=("mcp-memory",))

        async def run() -> None:
            async with Client(server) as client:
                once = await client.call_tool("open_nodes", {"names": ["e05"] * 20})
                data = _ok(once)
                assert [n["id"] for n in data["nodes"]] == ["e05"]
                assert len(data["nodes"][0]["body"]) == 20_000 and "left_out" not in data
                many = await client.call_tool("open_nodes", {"names": [f"e{i:02d}" for i in range(20)]})
                text = many.content[0].text
                data = _ok(many)
                assert len(text) <= OPEN_NODES_CHARS
                shown = [n["id"] for n in data["nodes"]]
                assert shown + data["left_out"] == [f"e{i:02d}" for i in range(20)]
                assert shown and data["left_out"]
                assert {len(n["body"]) for n in data["nodes"]} == {1_000}
                assert data["note"] == (
                    "the reply holds at most 50,000 characters: read the nodes left out with `get` "
                    "(or `open_nodes` with fewer names)"
                )
                mixed = _ok(await client.call_tool("open_nodes", {"names": ["e01", "nope", "e01", "e02"]}))
                assert [n["id"] for n in mixed["nodes"]] == ["e01", "e02"]
                assert {len(n["body"]) for n in mixed["nodes"]} == {6_666}  # 3 distinct names share 20,000

        anyio.run(run)


SUPERSEDED_NOTE = "superseded: search leaves it out; update(id, reopen=true) makes it current"


def test_update_and_verify_of_a_superseded_memory_say_so(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        server = create_server(tmp_path / "m", store=store)

        async def run() -> None:
            async with Client(server) as client:
                _ok(await client.call_tool("remember", {"body": "lives in Paris", "id": "city_old"}))
                _ok(await client.call_tool("remember", {"body": "lives in Lyon", "id": "city_new"}))
                _ok(await client.call_tool("supersede", {"old": "city_old", "new": "city_new"}))
                up = _ok(
                    await client.call_tool("update", {"id": "city_old", "body": "lives in Paris (2019)"})
                )
                assert (up["superseded_by"], up["note"]) == ("city_new", SUPERSEDED_NOTE)
                ver = _ok(
                    await client.call_tool(
                        "verify", {"id": "city_old", "evidence": "old letter", "verdict": "confirmed"}
                    )
                )
                assert (ver["superseded_by"], ver["note"]) == ("city_new", SUPERSEDED_NOTE)
                current = _ok(await client.call_tool("update", {"id": "city_new", "tags": ["city"]}))
                assert "superseded_by" not in current and "note" not in current
                reopened = _ok(await client.call_tool("update", {"id": "city_old", "reopen": True}))
                assert "superseded_by" not in reopened
                again = _ok(
                    await client.call_tool(
                        "verify", {"id": "city_old", "evidence": "e", "verdict": "confirmed"}
                    )
                )
                assert "superseded_by" not in again

        anyio.run(run)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-inf"])
def test_a_non_finite_importance_is_refused_as_such(tmp_path: Path, value: str) -> None:
    with MdCG(tmp_path / "m") as store:
        server = create_server(tmp_path / "m", store=store)

        async def run() -> None:
            async with Client(server) as client:
                for tool, args in (("remember", {"body": "x", "id": "x1"}), ("update", {"id": "x1"})):
                    if tool == "update":
                        _ok(await client.call_tool("remember", {"body": "x", "id": "x1"}))
                    for field in ("importance", "confidence"):
                        got = _err(await client.call_tool(tool, {**args, field: value}))
                        finite = f"input should be a finite number (got {value!r})"
                        assert got == f"{tool}: argument {field!r}: {finite}"

        anyio.run(run)
        assert store.ids() == ["x1"]


def test_every_list_of_a_sync_report_is_capped_in_the_sync_reply() -> None:
    """The sync reply caps each list of the report (tuples included: ``added``, ``changed``,
    ``deleted``, ``moved`` came through ``asdict`` as tuples and were not capped)."""
    from md_cg.mcp_server import REPORT_ITEMS, SYNC_LISTS, _report_lists
    from md_cg.reports import SyncReport

    listed = {k for k, v in SyncReport().to_dict().items() if isinstance(v, list | tuple) and k != "settings"}
    assert listed == set(SYNC_LISTS)
    big = SyncReport(
        added=tuple(f"a{i}" for i in range(500)),
        deleted=tuple(f"d{i}" for i in range(30)),
        finished_deletes=tuple((f"f{i}", f"knowledge/orphan/f{i}.md") for i in range(40)),
    )
    out = _report_lists(big.to_dict(), SYNC_LISTS)
    assert out["added"] == [f"a{i}" for i in range(REPORT_ITEMS)]
    assert out["deleted"] == [f"d{i}" for i in range(REPORT_ITEMS)]
    assert len(out["finished_deletes"]) == REPORT_ITEMS
    assert out["totals"] == {"added": 500, "deleted": 30, "finished_deletes": 40}
