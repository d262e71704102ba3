"""The edit flow at its edges (review r2 of session 31), run as real processes.

* An edit whose text parses to the node as stored -- the final newline dropped, a
  value unquoted -- said "edited" and moved ``updated_at`` (the memory jumped to the
  top of ``list``); it is ``ID: no change`` and nothing is written, as ``update`` of
  the same value is.
* An editor that removed its copy gave ``error: /tmp/mdcg-...: no such file or
  folder`` (and never its exit status); ^C while the editor ran exited 130 saying
  nothing, the typed text left in a temp file nobody was told of.
* A body on stdin (``add --body -``, ``edit --from``) was read whole before the
  4 MiB limit was checked: ``< /dev/zero`` ended in a MemoryError traceback (exit 1)
  or a machine out of memory. At most the limit and one byte is read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from md_cg import MdCG, Node

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX editors and signals")

BODY = "trailing newline test"
OVER = "over the limit of 4 MiB (more than 4,194,304 bytes); nothing was written"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    with MdCG(root, create=True) as store:
        store.add(Node(id="nl", body=BODY))
        store.add(Node(id="other", body="another memory"))
    return root


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("MDCG_ROOT", "MDCG_EDITOR", "VISUAL", "EDITOR")}
    return {**base, "TMPDIR": str(tmp_path), "COLUMNS": "200", **extra}


def mdcg(
    root: Path, tmp_path: Path, *args: str, stdin: bytes | None = None, **extra: str
) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "--root", str(root), *args],
        input=stdin,
        capture_output=True,
        env=env(tmp_path, **extra),
        timeout=120,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def snapshot(root: Path, node_id: str) -> tuple[bytes, int]:
    with MdCG(root) as store:
        path = store.path_of(node_id)
    return path.read_bytes(), path.stat().st_mtime_ns


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def copies(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob("mdcg-*.md"))


# --- 4. an edit holding the same node is no change -------------------------------------


@pytest.mark.parametrize(
    "editor",
    [
        "truncate -s -1",  # the final newline dropped
        "sed -i 's/^id: \"nl\"/id: nl/'",  # a value unquoted
        "sed -i '/^updated_at: /d'",  # the stamp a write sets anyway
    ],
)
def test_an_edit_parsing_to_the_stored_node_is_no_change(root: Path, tmp_path: Path, editor: str) -> None:
    before = snapshot(root, "nl")
    got = mdcg(root, tmp_path, "get", "nl", "--json")
    time.sleep(0.02)
    assert mdcg(root, tmp_path, "edit", "nl", "--editor", editor) == (0, "nl: no change\n", "")
    assert snapshot(root, "nl") == before  # bytes and mtime
    assert mdcg(root, tmp_path, "get", "nl", "--json") == got
    assert copies(tmp_path) == []


def test_edit_from_a_requoted_text_is_no_change(root: Path, tmp_path: Path) -> None:
    before = snapshot(root, "nl")
    text = before[0].decode().replace('id: "nl"', "id: nl").removesuffix("\n").encode()
    status, out, err = mdcg(root, tmp_path, "edit", "nl", "--from", "-", "--json", stdin=text)
    assert (status, err) == (0, "")
    assert json.loads(out) == {
        "id": "nl",
        "layer": "knowledge",
        "path": str(root / "knowledge" / "orphan" / "nl.md"),
        "changed": False,
    }
    assert mdcg(root, tmp_path, "edit", "nl", "--from", "-", stdin=text) == (0, "nl: no change\n", "")
    assert snapshot(root, "nl") == before


def test_library_edit_text_of_the_same_node_keeps_the_file(root: Path) -> None:
    before = snapshot(root, "nl")
    with MdCG(root) as store:
        stored = store.get("nl")
        node = store.edit_text("nl", lambda text: text.removesuffix("\n"))
    assert node == stored and node.updated_at == stored.updated_at
    assert snapshot(root, "nl") == before


def test_an_edit_changing_the_body_is_still_edited(root: Path, tmp_path: Path) -> None:
    path = root / "knowledge" / "orphan" / "nl.md"
    assert mdcg(root, tmp_path, "edit", "nl", "--editor", "sed -i 's/newline test/newline text/'") == (
        0,
        f"nl: edited ({path})\n",
        "",
    )
    assert path.read_text().endswith("\ntrailing newline text\n")


# --- 5. the editor removing its copy, or ^C --------------------------------------------


@pytest.mark.parametrize(("code", "said"), [(0, ""), (3, " exited with status 3 and")])
def test_an_editor_removing_its_copy_says_so(root: Path, tmp_path: Path, code: int, said: str) -> None:
    seen = tmp_path / "seen"
    editor = script(tmp_path, "del.sh", f'echo "$1" > {seen}; rm -f "$1"; exit {code}\n')
    before = snapshot(root, "nl")
    status, out, err = mdcg(root, tmp_path, "edit", "nl", "--editor", editor)
    copy = seen.read_text().strip()
    assert Path(copy).parent == tmp_path and Path(copy).name.startswith("mdcg-nl-")
    assert (status, out) == (2, "")
    assert err == f"error: the editor {editor!r}{said} removed its copy {copy}; nothing was written\n"
    assert snapshot(root, "nl") == before
    assert copies(tmp_path) == []


def interrupted(root: Path, tmp_path: Path, typed: str) -> tuple[int, str, str, str]:
    """``mdcg edit`` with an editor that saves ``typed`` (if any) and waits; ^C to the
    whole foreground group once it has: the status, stdout, stderr, the copy's path."""
    seen, ready = tmp_path / "seen", tmp_path / "ready"
    save = f'printf "%s" "{typed}" >> "$1"; ' if typed else ""
    editor = script(tmp_path, "slow.sh", f'echo "$1" > {seen}; {save}touch {ready}; sleep 30\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "md_cg.cli", "--root", str(root), "edit", "nl", "--editor", editor],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(tmp_path),
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out.decode(), err.decode(), seen.read_text().strip()


def test_ctrl_c_in_the_editor_names_the_kept_text(root: Path, tmp_path: Path) -> None:
    before = snapshot(root, "nl")
    status, out, err, copy = interrupted(root, tmp_path, "USER TYPED THIS")
    assert (status, out) == (130, "")
    assert err == f"nothing was written; the edited text is kept in {copy}\n"
    assert Path(copy).read_bytes() == before[0] + b"USER TYPED THIS"
    assert copies(tmp_path) == [Path(copy).name]
    assert snapshot(root, "nl") == before


def test_ctrl_c_before_anything_is_saved_removes_the_copy(root: Path, tmp_path: Path) -> None:
    before = snapshot(root, "nl")
    status, out, err, _copy = interrupted(root, tmp_path, "")
    assert (status, out, err) == (130, "", "nothing was written\n")
    assert copies(tmp_path) == []
    assert snapshot(root, "nl") == before


# --- 6. a body over the limit is refused before it is read whole -------------------------


def test_a_body_on_stdin_over_the_limit_is_refused(root: Path, tmp_path: Path) -> None:
    big = b"a" * 5_000_000
    assert mdcg(root, tmp_path, "add", "--id", "zz", "--body", "-", stdin=big) == (
        2,
        "",
        f"error: the body on stdin is {OVER}\n",
    )
    assert mdcg(root, tmp_path, "edit", "nl", "--from", "-", stdin=big) == (
        2,
        "",
        f"error: the text on stdin is {OVER}\n",
    )
    (tmp_path / "big.md").write_bytes(big)
    assert mdcg(root, tmp_path, "edit", "nl", "--from", str(tmp_path / "big.md")) == (
        2,
        "",
        f"error: {tmp_path / 'big.md'}: the text is {OVER}\n",
    )
    with MdCG(root) as store:
        assert sorted(store.ids()) == ["nl", "other"]


def test_the_input_limit_is_the_file_limit() -> None:
    from md_cg import cli, node

    assert cli.INPUT_LIMIT == node.MAX_FILE_BYTES == 4 * 1024 * 1024


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ("add --id zz --body -", "the body on stdin"),
        ("edit nl --from -", "the text on stdin"),
    ],
)
def test_an_endless_body_is_refused_without_reading_it_whole(
    root: Path, tmp_path: Path, args: str, said: str
) -> None:
    """3 GB through a pipe under a 1.5 GB address space: a MemoryError (exit 1) when
    read whole; the limit's error once 4 MiB and a byte are read."""
    cmd = (
        f"ulimit -v 1500000; head -c 3000000000 /dev/zero | "
        f"{sys.executable} -m md_cg.cli --root {root} {args}"
    )
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, env=env(tmp_path), timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr.decode()) == (2, b"", f"error: {said} is {OVER}\n")
    with MdCG(root) as store:
        assert sorted(store.ids()) == ["nl", "other"]
