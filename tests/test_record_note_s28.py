"""Review round 5, session 28: a write that succeeded, then failed to append its record.

With ``.mdcg/audit`` read-only, ``mdcg rename m1 m1new`` renamed the file, then failed to
append its audit record and printed ``error: .<pid>_<hex>.creating.tmp: the store's file
system is read-only; nothing was changed``; ``mdcg archive`` (``.mdcg/archive_log``) and
``mdcg add`` (the retention decision log, ``.mdcg/retention``) said the same. The change
was made: the log's append now notes it (:data:`md_cg.errors.RECORDED_NOTE`,
:func:`md_cg.record_failed`), and the CLI and the MCP server say the change was made and
only its record in that log folder could not be written.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, fsops, record_failed, was_logged
from md_cg.cli import app, os_error_message
from md_cg.errors import recorded_note
from md_cg.logs import AppendLog

RO = "the store's file system is read-only"


def _cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "400"}).invoke(app, ["--root", str(root), *args])
    return result.exit_code, result.stderr


def _refuse_log(monkeypatch: pytest.MonkeyPatch, log: str, code: int = errno.EROFS) -> None:
    """Appends to ``.mdcg/<log>/`` fail as a read-only folder makes them fail: on the shard's temp file."""
    real = fsops.ShardWriter.append

    def append(self: fsops.ShardWriter, records: Iterable[dict[str, Any]], *, durable: bool = False) -> Any:
        if self.rel_dir == f".mdcg/{log}":
            raise OSError(code, os.strerror(code), ".123_00ff.creating.tmp")
        return real(self, records, durable=durable)

    monkeypatch.setattr(fsops.ShardWriter, "append", append)


def _files(root: Path) -> set[str]:
    """The memory files' names outside the archive."""
    return {p.name for p in (root / "knowledge").rglob("*.md")}


def _said(log: str) -> str:
    made = f"the change was made before this error: only its record in .mdcg/{log} could not be written"
    return f"error: {RO}; {made}\n"


def test_a_rename_whose_audit_record_fails_says_the_change_was_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="first memory", id="m1")
        s.add(body="second memory", id="m2")
        old = s.entry("m1").path
    _refuse_log(monkeypatch, "audit")
    code, err = _cli(root, "rename", "m1", "m1new")
    assert (code, err) == (2, _said("audit"))
    assert "nothing was changed" not in err and "creating.tmp" not in err
    monkeypatch.undo()
    assert _files(root) == {"m1new.md", "m2.md"} and not (root / old).exists()
    with MdCG(root) as s:
        assert {n.id for n in s.iter_nodes()} == {"m1new", "m2"}
        assert s.get("m1new").body == "first memory"


def test_an_archive_whose_log_line_fails_says_the_change_was_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="to archive", id="a1")
        s.add(body="to keep", id="k1")
    _refuse_log(monkeypatch, "archive_log")
    code, err = _cli(root, "archive", "a1")
    assert (code, err) == (2, _said("archive_log"))
    monkeypatch.undo()
    assert _files(root) == {"k1.md"}
    assert [p.name for p in (root / "archive").rglob("*.md")] == ["a1.md"]
    with MdCG(root) as s:
        assert {n.id for n in s.iter_nodes()} == {"k1"}


def test_an_add_whose_retention_record_fails_says_the_change_was_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    _refuse_log(monkeypatch, "retention")
    code, err = _cli(root, "add", "the office moved to Lyon", "--id", "n1")
    assert (code, err) == (2, _said("retention"))
    monkeypatch.undo()
    assert _files(root) == {"n1.md"}
    with MdCG(root) as s:
        assert {n.id for n in s.iter_nodes()} == {"n1"}
        assert s.get("n1").body == "the office moved to Lyon"


def test_a_refused_add_many_says_the_same_in_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MdCG(tmp_path / "m") as s:
        _refuse_log(monkeypatch, "retention", errno.EACCES)
        with pytest.raises(PermissionError) as caught:
            s.add(body="one fact", id="x1")
        assert record_failed(caught.value) == ".mdcg/retention"
        assert not was_logged(caught.value)
        monkeypatch.undo()
        assert s.get("x1").body == "one fact"
    got = os_error_message(caught.value, "add")
    assert got == f"Permission denied; {recorded_note('.mdcg/retention')}"


def test_a_record_not_of_a_landed_change_carries_no_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    _refuse_log(monkeypatch, "audit")
    log = AppendLog(str(root), "audit")
    with pytest.raises(OSError) as caught:
        log.append([{"event": "x"}])
    assert record_failed(caught.value) is None
    assert os_error_message(caught.value, "forget") == (
        f".123_00ff.creating.tmp: {RO}; nothing was changed: reading commands work, writing ones need it "
        "mounted writable"
    )
    assert record_failed(OSError(errno.EROFS, "x")) is None


def test_the_mcp_server_says_the_change_was_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    with MdCG(root) as store:
        server = create_server(root, store=store)
        _refuse_log(monkeypatch, "retention")

        async def run() -> str:
            async with Client(server) as client:
                got = await client.call_tool("remember", {"body": "lives in Lyon", "id": "city"})
                assert got.is_error
                return str(got.content[0].text)

        text = anyio.run(run)
        monkeypatch.undo()
        assert text == (
            f"Error executing tool remember: Read-only file system (in the store at {root}); "
            "the change was made before this error: only its record in .mdcg/retention could not be written"
        )
        assert store.get("city").body == "lives in Lyon"
