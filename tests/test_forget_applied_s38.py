"""A durable forget whose last fsync fails after every unlink still scrubs, and the CLI and
the MCP server say a write whose files are all in place is in place (session 38).

Session 37 closed such a commit (``Journal._sync_applied``) and noted the error
:data:`md_cg.errors.APPLIED_NOTE`; but ``forget_many`` let the error go up before its step 4
(the scrub), so the forgotten memory's words stayed in ``.mdcg/index.snapshot`` until some
later compaction. And the CLI said of such an error "nothing stored was lost: make room,
then run the command again" (a full disk), or printed a traceback (``EIO``); the MCP
server "nothing stored was lost, retry after making room"."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Node, errors, forgetting, fsops, was_logged
from md_cg.cli import app, os_error_message
from md_cg.errors import APPLIED_NOTE, was_applied

WORD = "zanzibarquux"  # h1's distinctive word
#: Each memory's distinctive word.
WORDS = {"h1": WORD, "h2": "quillotrope", "x1": "parcelvexum", "other": "brambleworth"}
EIO = OSError(errno.EIO, "Input/output error")

#: What the CLI and the MCP server say of a single write whose folder fsync failed.
IN_PLACE = (
    "the write is in place but its folders could not be synced to disk: {error}; check the disk; "
    "running it again is not needed"
)


def _fail_folder_fsync(monkeypatch: pytest.MonkeyPatch, fail: BaseException) -> list[int]:
    """Make the fsync of a durable commit's folders, after its renames and unlinks, raise
    ``fail`` (a fresh copy each time); returns the list counting those calls."""
    calls: list[int] = []

    def raising() -> None:
        calls.append(1)
        raise type(fail)(*fail.args)

    monkeypatch.setattr(fsops.FolderCache, "fsync_calls", lambda self: [raising])
    return calls


def _holding(root: Path, word: str) -> list[str]:
    """Every file under ``root/.mdcg`` whose bytes hold ``word``."""
    data = word.encode()
    return sorted(
        str(p.relative_to(root))
        for p in (root / ".mdcg").rglob("*")
        if p.is_file() and data in p.read_bytes()
    )


def _store(root: Path) -> None:
    with MdCG(root) as m:
        m.add(id="h1", body=f"the {WORD} code of the old door", layer="contextual")
        m.add(id="h2", body=f"a second {WORDS['h2']} note", layer="contextual")
        m.add(id="other", body=f"other {WORDS['other']} things", layer="contextual")
        m.add_many(
            [
                Node(
                    id="x1",
                    layer="contextual",
                    body=f"pick up the {WORDS['x1']} parcel",
                    retention_tier="temp",
                    expires_at=time.time() - 60,
                )
            ],
            stamp=False,
        )
        m.compact_index()
    for word in WORDS.values():  # before: the words are there
        assert _holding(root, word) == [".mdcg/index.snapshot"]


#: The ids each way of forgetting (:func:`forget_by`) forgets in a store of :func:`_store`.
GONE = {"forget": ["h1"], "forget_many": ["h1", "h2"], "sweep": ["x1"]}


def forget_by(w: MdCG, op: str) -> None:
    """Forget through ``op`` (a key of :data:`GONE`)."""
    if op == "forget":
        w.forget("h1", "done with it")
    elif op == "forget_many":
        w.forget_many(["h1", "h2"], "done with them")
    else:
        w.sweep(dry_run=False)


@pytest.mark.parametrize("op", ["forget", "forget_many", "sweep"])
@pytest.mark.parametrize("fail", [EIO, KeyboardInterrupt()], ids=["EIO", "interrupt"])
def test_a_durable_forget_whose_folder_fsync_failed_scrubs_the_forgotten_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str, fail: BaseException
) -> None:
    root = tmp_path / "m"
    _store(root)
    w = MdCG(root, durable=True, auto_compact=None)
    calls = _fail_folder_fsync(monkeypatch, fail)
    with pytest.raises(type(fail)) as raised:
        forget_by(w, op)
    monkeypatch.undo()
    assert len(calls) == 1
    gone = GONE[op]
    left = sorted({"h1", "h2", "other", "x1"} - set(gone))
    assert sorted(p.stem for p in (root / "contextual").glob("*.md")) == left
    assert [t["id"] for t in w.tombstones()] == gone
    # before session 38: [".mdcg/index.snapshot"] -- the error went up before the scrub
    assert {i: _holding(root, WORDS[i]) for i in gone} == {i: [] for i in gone}
    assert raised.value.__notes__ == [APPLIED_NOTE]  # closed: no "the next recovery completes it"
    assert was_applied(raised.value) and was_logged(raised.value)
    w.close()
    assert {i: _holding(root, WORDS[i]) for i in WORDS} == {
        i: [] if i in gone else [".mdcg/index.snapshot"] for i in WORDS
    }
    with MdCG(root) as fresh:
        report = fresh.sync()
        assert (report.added, report.deleted, report.changed) == ((), (), ())
        assert sorted(fresh.ids(include_expired=True)) == left
        found = {i: [r.id for r in fresh.search(WORDS[i])[0] if not r.filler] for i in WORDS}
        assert found == {i: [] if i in gone or i == "x1" else [i] for i in WORDS}  # x1 expired: hidden
        assert [t["id"] for t in fresh.tombstones()] == gone


def test_a_scrub_that_fails_too_is_noted_on_the_error_that_says_it_was_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    _store(root)
    _fail_folder_fsync(monkeypatch, EIO)
    scrubbed: list[list[str]] = []

    def scrub_fails(engine: Any, node_ids: list[str], *rest: Any) -> None:
        scrubbed.append(list(node_ids))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(forgetting, "scrub", scrub_fails)
    with MdCG(root, durable=True, auto_compact=None) as w, pytest.raises(OSError) as raised:
        w.forget("h1", "done with it")
    assert scrubbed == [["h1"]]
    assert raised.value.errno == errno.EIO and isinstance(raised.value.__cause__, OSError)
    assert raised.value.__notes__ == [
        APPLIED_NOTE,
        "scrubbing the forgotten text from .mdcg/ failed too (OSError(28, 'No space left on device')): "
        "run `mdcg compact`",
    ]


def test_a_commit_left_open_is_noted_open_and_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder fsync fails and the ``done`` line cannot be written either: the commit
    stays open for recovery, and only then says so -- every file in place all the same
    (session 39: was noted LOGGED_NOTE, "the next recovery completes it", not applied)."""
    root = tmp_path / "m"
    _store(root)
    w = MdCG(root, durable=True, auto_compact=None)
    _fail_folder_fsync(monkeypatch, EIO)
    append = w._engine.journal.append

    def no_done(records: list[dict[str, Any]]) -> Any:
        if records and records[0].get("op") == "done":
            raise OSError(errno.EIO, "Input/output error")
        return append(records)

    monkeypatch.setattr(w._engine.journal, "append", no_done)
    with pytest.raises(OSError) as raised:
        w.update("h2", body="a second note, changed")
    monkeypatch.undo()
    assert raised.value.__notes__ == [errors.OPEN_NOTE]
    assert was_logged(raised.value) and was_applied(raised.value)
    assert len(w._engine.journal.failed) == 1
    w.close()


# -- what the CLI says ----------------------------------------------------------------------


def _applied(exc: OSError) -> OSError:
    exc.add_note(APPLIED_NOTE)
    return exc


def test_the_cli_message_of_an_os_error_after_the_files_were_in_place() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    assert os_error_message(full, "add") == (
        "No space left on device; nothing stored was lost: make room, then run the command again"
    )
    assert os_error_message(_applied(OSError(errno.ENOSPC, "No space left on device")), "add") == (
        IN_PLACE.format(error="No space left on device")
    )
    assert os_error_message(OSError(errno.EIO, "Input/output error"), "forget") is None  # the traceback
    assert os_error_message(_applied(OSError(errno.EIO, "Input/output error", "contextual")), "forget") == (
        IN_PLACE.format(error="contextual: Input/output error")
    )
    assert os_error_message(_applied(OSError(errno.EROFS, "Read-only file system")), "update") == (
        IN_PLACE.format(error="Read-only file system")
    )
    assert os_error_message(_applied(OSError(errno.ENOSPC, "No space left on device")), "migrate") == (
        "the batches written so far are in place but the last one's folders could not be synced to disk: "
        "No space left on device; check the disk, then run the same command again to resume from the last "
        "committed batch"
    )


def _records(path: Path) -> Path:
    lines = [
        json.dumps({"id": f"i{n}", "body": f"imported note {n}", "layer": "contextual"}) for n in (1, 2, 3)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("fail", "error", "status"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "No space left on device", 2),
        (OSError(errno.EIO, "Input/output error"), "Input/output error", 2),
        (KeyboardInterrupt(), "interrupted", 130),
    ],
    ids=["ENOSPC", "EIO", "interrupt"],
)
def test_a_durable_import_whose_folder_fsync_failed_says_its_batches_are_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: BaseException, error: str, status: int
) -> None:
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    root, source = tmp_path / "m", _records(tmp_path / "in.jsonl")
    assert runner.invoke(app, ["--root", str(root), "add", "--id", "kept", "kept note"]).exit_code == 0
    calls = _fail_folder_fsync(monkeypatch, fail)
    out = runner.invoke(app, ["--root", str(root), "import", str(source), "--durable", "--batch", "2"])
    monkeypatch.undo()
    assert (out.exit_code, out.stdout, len(calls)) == (status, "", 1), out.output
    # before session 38: "No space left on device; nothing stored was lost: make room, then run the
    # command again" (ENOSPC), a traceback (EIO), nothing (Ctrl-C)
    assert out.stderr == (
        "error: the batches written so far are in place but the last one's folders could not be synced "
        f"to disk: {error}; check the disk, then run the same command again to import the rest (what is "
        "in place is counted unchanged)\n"
    )
    assert sorted(p.stem for p in (root / "contextual").glob("*.md")) == ["i1", "i2"]
    again = runner.invoke(app, ["--root", str(root), "import", str(source), "--durable", "--batch", "2"])
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(f"{source}: 3 record(s): 1 new, 0 changed, 2 unchanged (")
    assert sorted(p.stem for p in (root / "contextual").glob("*.md")) == ["i1", "i2", "i3"]


# -- what the MCP server says ---------------------------------------------------------------


def test_an_mcp_write_whose_folder_fsync_failed_says_it_is_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    anyio = pytest.importorskip("anyio")
    mcp = pytest.importorskip("mcp")
    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    _store(root)
    store = MdCG(root, durable=True, auto_compact=None)
    server = create_server(root, store=store)

    async def run() -> list[tuple[bool, str]]:
        async with mcp.Client(server) as client:
            _fail_folder_fsync(monkeypatch, EIO)
            forgot = await client.call_tool("forget", {"id": "h1", "reason": "done with it"})
            _fail_folder_fsync(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
            remembered = await client.call_tool(
                "remember", {"id": "r1", "body": "a new note", "layer": "contextual"}
            )
            monkeypatch.undo()
            again = await client.call_tool("forget", {"id": "h1", "reason": "done with it"})
            return [(r.is_error, r.content[0].text) for r in (forgot, remembered, again)]

    forgot, remembered, again = anyio.run(run)
    store.close()
    # before session 38: "Error executing tool forget: [Errno 5] Input/output error" (logged as a
    # bug) and "...: the store's disk is full; nothing stored was lost, retry after making room"
    assert forgot == (True, "Error executing tool forget: " + IN_PLACE.format(error="Input/output error"))
    assert remembered == (
        True,
        "Error executing tool remember: " + IN_PLACE.format(error="No space left on device"),
    )
    assert again[0] and "it was forgotten on" in again[1]
    assert sorted(p.stem for p in (root / "contextual").glob("*.md")) == ["h2", "other", "r1", "x1"]
    assert _holding(root, WORD) == []


def test_applied_write_names_what_to_do_for_each_kind_of_command() -> None:
    from md_cg.render import applied_write

    assert applied_write("interrupted") == IN_PLACE.format(error="interrupted")
    assert applied_write("Input/output error", "import").endswith(
        "check the disk, then run the same command again to import the rest (what is in place is "
        "counted unchanged)"
    )
