"""Import and export safety, second round (session 31, reviewer r4): a first import into a
new store reads a source that can be read only once (a pipe on /dev/stdin, a FIFO, a
/dev/fd/N) once; ``export --out /dev/stdout`` and ``/dev/fd/N`` write into the
descriptor (a ``>>`` appends, nothing is replaced) and the summary stays out of the
data; a renamed id whose new id was forgotten since says so; export's stderr lines are
terminal-safe; the same record imported again through a scoped handle is unchanged.
The CLI runs as a real process (``python -m md_cg.cli``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from md_cg import MdCG, import_nodes, paths
from md_cg.visibility import Scope

REPO = Path(__file__).resolve().parents[1]
RECORDS = b'{"id":"a","body":"alpha body"}\n{"id":"b","body":"beta body"}\n'


def env() -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(REPO)}
    out.pop("MDCG_ROOT", None)
    return out


def mdcg(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "timeout": 60, **kw}
    return subprocess.run([sys.executable, "-m", "md_cg.cli", "-q", *args], env=env(), **kw)  # type: ignore[call-overload, no-any-return]


def bodies(root: Path) -> dict[str, str]:
    with MdCG(root, read_only=True) as store:
        return {e.id: store.get(e.id).body for e in store.list_nodes()}


def when(at: float | None) -> str:
    assert at is not None
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


# -- finding 1: a first import from a source that can be read only once -------------------------


def test_first_import_from_a_pipe_on_dev_stdin_imports_every_record(tmp_path: Path) -> None:
    root = tmp_path / "new"
    done = mdcg("import", "--root", str(root), "/dev/stdin", input=RECORDS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("/dev/stdin: 2 record(s): 2 new, 0 changed, 0 unchanged (")
    assert bodies(root) == {"a": "alpha body", "b": "beta body"}


def test_first_import_from_a_fifo_with_one_writer_does_not_wait_for_ever(tmp_path: Path) -> None:
    root, fifo = tmp_path / "new", tmp_path / "src"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as out:  # one writer, as `cat bk.jsonl > src &`
            out.write(RECORDS)

    writer = threading.Thread(target=write)
    writer.start()
    done = mdcg("import", "--root", str(root), str(fifo), timeout=30)
    writer.join(5)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"{fifo}: 2 record(s): 2 new, 0 changed, 0 unchanged (")
    assert bodies(root) == {"a": "alpha body", "b": "beta body"}


def test_first_import_from_a_process_substitution_dev_fd(tmp_path: Path) -> None:
    root = tmp_path / "new"
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "md_cg.cli", "-q", "import", "--root", str(root), f"/dev/fd/{read_end}"],
            pass_fds=(read_end,),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env(),
        )
    finally:
        os.close(read_end)
    with os.fdopen(write_end, "wb") as feed:  # as <(cat bk.jsonl): written, then closed
        feed.write(RECORDS)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.decode().startswith(f"/dev/fd/{read_end}: 2 record(s): 2 new, 0 changed, 0 unchanged (")
    assert bodies(root) == {"a": "alpha body", "b": "beta body"}


def test_first_import_of_a_regular_file_and_a_bad_pipe_still_make_no_store(tmp_path: Path) -> None:
    src = tmp_path / "bk.jsonl"
    src.write_bytes(RECORDS)
    done = mdcg("import", "--root", str(tmp_path / "file"), str(src))
    assert done.returncode == 0, done.stderr
    assert bodies(tmp_path / "file") == {"a": "alpha body", "b": "beta body"}
    bad = mdcg("import", "--root", str(tmp_path / "bad"), "/dev/stdin", input=b'{"id":"a"}\nnot json\n')
    assert bad.returncode == 2
    assert "/dev/stdin: 2 bad record(s); nothing was imported" in bad.stderr.decode()
    assert not (tmp_path / "bad").exists()


# -- finding 2: export --out /dev/stdout, /dev/fd/N ---------------------------------------------


@pytest.fixture
def one(tmp_path: Path) -> tuple[Path, bytes]:
    """A store holding 'a'; (root, its export line)."""
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="a", body="alpha body")
    line = mdcg("export", "--root", str(root)).stdout
    assert line.count(b"\n") == 1
    return root, line


def test_export_out_dev_stdout_appended_to_a_file_keeps_what_it_held(
    tmp_path: Path, one: tuple[Path, bytes]
) -> None:
    root, line = one
    log = tmp_path / "log.txt"
    log.write_bytes(b"precious 1\nprecious 2\n")
    with open(log, "ab") as appended:  # mdcg export --out /dev/stdout >> log.txt
        done = mdcg(
            "export", "--root", str(root), "--out", "/dev/stdout", stdout=appended, stderr=subprocess.PIPE
        )
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == b"precious 1\nprecious 2\n" + line
    assert done.stderr == b"exported 1 memories to /dev/stdout\n"


def test_export_out_dev_fd_n_appended_to_a_file_keeps_what_it_held(
    tmp_path: Path, one: tuple[Path, bytes]
) -> None:
    root, line = one
    log = tmp_path / "log2.txt"
    log.write_bytes(b"keep\n")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)  # 3>>log2.txt
    try:
        done = mdcg("export", "--root", str(root), "--out", f"/dev/fd/{fd}", pass_fds=(fd,))
    finally:
        os.close(fd)
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == b"keep\n" + line
    assert done.stdout == f"exported 1 memories to /dev/fd/{fd}\n".encode()  # stdout is elsewhere


def test_export_out_dev_stdout_into_a_pipe_keeps_the_summary_out_of_the_data(one: tuple[Path, bytes]) -> None:
    root, line = one
    done = mdcg("export", "--root", str(root), "--out", "/dev/stdout")
    assert done.returncode == 0, done.stderr
    assert done.stdout == line
    assert done.stderr == b"exported 1 memories to /dev/stdout\n"


def test_export_out_dev_fd_not_open_is_refused(tmp_path: Path, one: tuple[Path, bytes]) -> None:
    root, _line = one
    done = mdcg("export", "--root", str(root), "--out", "/dev/fd/97")
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "error: /dev/fd/97: file descriptor 97 is not open in this process; give a path, or open it "
        "(a shell's 97>FILE)\n"
    )


# -- finding 5: a renamed id whose new id was forgotten since -----------------------------------


def test_import_of_a_renamed_id_forgotten_since_says_so(tmp_path: Path) -> None:
    root, backup = tmp_path / "s", tmp_path / "bk.jsonl"
    with MdCG(root) as store:
        store.add(id="a", body="secret plan alpha")
    assert mdcg("export", "--root", str(root), "--out", str(backup)).returncode == 0
    with MdCG(root) as store:
        store.rename("a", "b")
        store.forget("b", reason="must\ngo")
        renamed, forgot = store.departure("a"), store.departure("b")
    assert renamed is not None and forgot is not None
    done = mdcg("import", "--root", str(root), str(backup))
    assert done.returncode == 0, done.stderr
    why = (
        f"id 'a' was renamed to 'b' in this store ({when(renamed.time)}); 'b' was forgotten since "
        f"({when(forgot.time)}, reason: must go); not brought back (--overwrite brings it back)"
    )
    assert done.stdout.decode().splitlines()[1] == f"  not brought back: record 1: {why}"
    assert bodies(root) == {}
    # --overwrite brings the memory back under its id in the backup ('b' stays forgotten)
    again = mdcg("import", "--root", str(root), "--overwrite", str(backup))
    assert again.returncode == 0, again.stderr
    assert bodies(root) == {"a": "secret plan alpha"}


def test_import_of_an_id_renamed_twice_names_the_id_it_has_now(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add(id="a", body="alpha body")
        store.rename("a", "b")
        store.rename("b", "c")
        renamed = store.departure("a")
        assert renamed is not None
        report = import_nodes(store, io.BytesIO(b'{"id":"a","body":"alpha body"}\n'))
        assert [r.reason for r in report.departed] == [
            f"id 'a' was renamed to 'b' in this store ({when(renamed.time)}), 'c' now; its old id is not "
            "brought back (--overwrite imports it beside 'c')"
        ]
        store.forget("c", reason="gone")
        gone = store.departure("c")
        assert gone is not None
        report = import_nodes(store, io.BytesIO(b'{"id":"a","body":"alpha body"}\n'))
        assert [r.reason for r in report.departed] == [
            f"id 'a' was renamed to 'b' in this store ({when(renamed.time)}); that memory became 'c' and "
            f"was forgotten since ({when(gone.time)}, reason: gone); not brought back "
            "(--overwrite brings it back)"
        ]
        assert store.ids() == []


def test_migrate_reason_follows_the_rename_chain(tmp_path: Path) -> None:
    from md_cg.migrate import forgotten_ids, kept_reason
    from md_cg.node import Node

    with MdCG(tmp_path / "s") as store:
        store.add(id="a", body="alpha body")
        store.rename("a", "b")
        store.forget("b", reason="must go")
        renamed, forgot = store.departure("a"), store.departure("b")
        assert renamed is not None and forgot is not None
        why = kept_reason(
            store, Node(id="a", layer="knowledge", body="alpha body"), forgotten_ids(store), False
        )
    assert why == (
        f"renamed to 'b' in this store ({when(renamed.time)}); 'b' was forgotten since "
        f"({when(forgot.time)}, reason: must go); not brought back"
    )


# -- finding 6: export's stderr lines are terminal-safe -----------------------------------------


def test_export_names_a_file_with_control_characters_escaped(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="a", body="alpha")
    (root / "knowledge" / "e\x1b]0;PWNED\x07x.md").write_bytes(b'---\nid: "bad"\n---\nx\n')
    done = mdcg("export", "--root", str(root), "--out", str(tmp_path / "out.jsonl"))
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "\x1b" not in err and "\x07" not in err
    assert err == (
        "not exported: knowledge/e\\x1b]0;PWNED\\x07x.md: not a usable node path: component "
        "'e\\x1b]0;PWNED\\x07x': it contains the character '\\x1b'\n"
    )
    maybe = mdcg("export", "--root", str(root), "--tag", "t", "--out", str(tmp_path / "t.jsonl"))
    assert maybe.returncode == 0
    assert maybe.stderr.decode().startswith("may be left out: knowledge/e\\x1b]0;PWNED\\x07x.md: ")


# -- finding 8: the same record through a scoped handle is unchanged ----------------------------


def test_same_record_imported_twice_through_a_scoped_handle_is_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "s"
    MdCG(root, create=True).close()
    record = orjson.dumps({"id": "k", "body": "kay body B"}) + b"\n"
    with MdCG(root, scope=Scope(agent="B")) as handle:
        first = import_nodes(handle, io.BytesIO(record))
        second = import_nodes(handle, io.BytesIO(record))
        assert (first.created, first.unchanged) == (1, 0)
        assert (second.created, second.updated, second.unchanged) == (0, 0, 1)
        assert handle.get("k").agent_scope == "B"
    with MdCG(root) as store:  # an unscoped handle: the memory keeps the scope it was stamped with
        third = import_nodes(store, io.BytesIO(record))
        assert (third.created, third.updated, third.unchanged) == (0, 0, 1)
        assert store.get("k").agent_scope == "B"
        assert [r["event"] for r in store.log(paths.AUDIT_DIR).read() if r.get("id") == "k"] == []
