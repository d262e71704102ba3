"""Session 31: a sync after a pull that ran no hook tells what the pull changed.

Review r1: in a clone without hooks, files a sync took in (memories an earlier pull
brought) and a later pull edited, deleted, renamed, archived or moved were taken in
silently by the next open: its catch-up over the log re-read the files the sync line
named, so ``mdcg sync`` said ``in sync: nothing changed`` (eight changes in one pull:
it told only ``added: fresh, n3_renamed, n4, n6; changed: dog`` -- n1's edit and the
deletions of n2, n3, n5 missed, the archived n4 and moved n6 "added"). A sync line now
logs the mtime and size of each file it took in, and following it notes a file that
differs since for the next sync, as for another process's commit line (session 30).
Every sync and pick-up here runs in a process of its own, as the CLI and a fresh MCP
server do.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from conftest import git_env
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app

_REPO = str(Path(__file__).resolve().parent.parent)
_ENV = git_env(Path(_REPO))


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=_ENV, check=True, capture_output=True)


def _push(clone: Path, message: str) -> None:
    _git(clone, "add", "-A")
    _git(clone, "commit", "-qm", message)
    _git(clone, "push", "-q", "origin", "HEAD:main")


def _pull(clone: Path) -> None:
    _git(clone, "pull", "-q", "--no-rebase", "origin", "main")


def _clones(tmp: Path) -> tuple[Path, Path]:
    """Origin and two clones of a memory folder ``mem`` (cat, dog) without hooks; b has
    saved its index (``mdcg init``), as a clone set up for md-cg has."""
    _git(tmp, "init", "-q", "--bare", "origin.git")
    _git(tmp, "clone", "-q", "origin.git", "a")
    a, b = tmp / "a", tmp / "b"
    with MdCG(a / "mem", create=True) as s:
        s.add(id="cat", body="The cat sleeps on the sofa near the window.")
        s.add(id="dog", body="The dog barks at the postman every morning.")
    (a / ".gitignore").write_text("mem/.mdcg/\n")
    _push(a, "init")
    _git(tmp, "clone", "-q", "-b", "main", "origin.git", "b")
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["init", "--root", str(b / "mem")])
    assert result.exit_code == 0, result.output
    assert not [h for h in (b / ".git" / "hooks").glob("post-*") if not h.name.endswith(".sample")]
    return a, b


def _run(code: str, *args: str) -> dict[str, list[str]]:
    """``code`` run in a process of its own; the JSON it prints."""
    out = subprocess.run([sys.executable, "-c", code, *args], env=_ENV, check=True, capture_output=True)
    return orjson.loads(out.stdout)  # type: ignore[no-any-return]


def _sync(root: Path) -> dict[str, list[str]]:
    """``mdcg sync --json`` in a process of its own: the four lists (moved as "id old -> new")."""
    out = subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "sync", "--json", "--root", str(root)],
        env=_ENV,
        capture_output=True,
    )
    assert out.returncode == 0, out.stderr
    d = orjson.loads(out.stdout)
    moved = [f"{m['node_id']} {m['old_path']} -> {m['new_path']}" for m in d["moved"]]
    return {"added": d["added"], "changed": d["changed"], "deleted": d["deleted"], "moved": moved}


_PICK_UP = """
import sys, orjson
from md_cg import MdCG
with MdCG(sys.argv[1]) as s:
    r = s.sync_if_changed()
    moved = [f"{m.node_id} {m.old_path} -> {m.new_path}" for m in r.moved]
    again = s.sync()
    print(orjson.dumps({"added": r.added, "changed": r.changed, "deleted": r.deleted, "moved": moved,
                        "again": [*again.added, *again.changed, *again.deleted]}).decode())
"""

_NOTHING = {"added": [], "changed": [], "deleted": [], "moved": []}


def _take_in_six(a: Path, b: Path) -> None:
    """a adds n1..n6; b pulls them and its sync takes them in (the sync line names them)."""
    with MdCG(a / "mem") as s:
        for i in range(1, 7):
            s.add(id=f"n{i}", body=f"note number {i} with some words")
    _push(a, "six")
    _pull(b)
    assert _sync(b / "mem") == {**_NOTHING, "added": ["n1", "n2", "n3", "n4", "n5", "n6"]}


def _eight_changes(a: Path) -> None:
    with MdCG(a / "mem") as s:
        s.add(id="fresh", body="brand new")
        s.update("n1", body="edited body")
        s.delete("n2")
        s.rename("n3", "n3_renamed")
        s.archive("n4")
        s.forget("n5", "x")
        s.update("n6", layer="self")
        s.update("dog", tags=["onlytag"])
    _push(a, "eight")


_EIGHT = {
    "added": ["fresh", "n3_renamed"],
    "changed": ["dog", "n1"],
    "deleted": ["n2", "n3", "n5"],
    "moved": [
        "n4 knowledge/orphan/n4.md -> archive/knowledge/orphan/n4.md",
        "n6 knowledge/orphan/n6.md -> self/n6.md",
    ],
}


def test_a_sync_after_a_pull_tells_each_of_eight_changes(tmp_path: Path) -> None:
    a, b = _clones(tmp_path)
    _take_in_six(a, b)
    _eight_changes(a)
    _pull(b)
    assert _sync(b / "mem") == _EIGHT  # r1: added fresh, n3_renamed, n4, n6; changed dog
    assert _sync(b / "mem") == _NOTHING  # told once
    with MdCG(b / "mem") as s:
        assert s.get("n1").body.strip() == "edited body"
        assert sorted(s.ids()) == ["cat", "dog", "fresh", "n1", "n3_renamed", "n6"]


def test_the_first_pick_up_of_a_fresh_process_tells_them_too(tmp_path: Path) -> None:
    a, b = _clones(tmp_path)
    _take_in_six(a, b)
    _eight_changes(a)
    _pull(b)
    told = _run(_PICK_UP, str(b / "mem"))
    assert told == {**_EIGHT, "again": []}  # r1 (an MCP server's first call): changed ['dog']


def test_a_memory_a_sync_deleted_and_a_pull_brings_back_is_added(tmp_path: Path) -> None:
    a, b = _clones(tmp_path)
    _take_in_six(a, b)
    with MdCG(a / "mem") as s:
        s.delete("n2")
    _push(a, "delete")
    _pull(b)
    assert _sync(b / "mem") == {**_NOTHING, "deleted": ["n2"]}
    with MdCG(a / "mem") as s:
        s.add(id="n2", body="n2 is back")
    _push(a, "back")
    _pull(b)
    assert _sync(b / "mem") == {**_NOTHING, "added": ["n2"]}  # was: nothing changed
    assert _sync(b / "mem") == _NOTHING


def test_a_hand_edit_after_the_sync_without_git_is_told(tmp_path: Path) -> None:
    a, b = _clones(tmp_path)
    _take_in_six(a, b)
    n1 = b / "mem" / "knowledge" / "orphan" / "n1.md"
    n1.write_text(n1.read_text().replace("note number 1", "note number one"))
    (b / "mem" / "knowledge" / "orphan" / "n2.md").unlink()
    assert _sync(b / "mem") == {**_NOTHING, "changed": ["n1"], "deleted": ["n2"]}


_PICK_UP_NONE = """
import sys, orjson
from md_cg import MdCG
with MdCG(sys.argv[1]) as s:
    print(orjson.dumps({"none": s.sync_if_changed() is None}).decode())
"""

_WRITE = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1]) as s:
    s.update("n1", body="written through md-cg")
    s.delete("n2")
    s.update("n3", layer="self")
print("{}")
"""


def test_writes_through_md_cg_after_the_sync_are_not_told(tmp_path: Path) -> None:
    """Another process's writes of files the sync took in, made after its line: not hand edits."""
    a, b = _clones(tmp_path)
    _take_in_six(a, b)
    _run(_WRITE, str(b / "mem"))
    assert _sync(b / "mem") == _NOTHING
    assert _run(_PICK_UP_NONE, str(b / "mem")) == {"none": True}


def test_a_sync_line_logs_the_stat_of_each_file_it_took_in(tmp_path: Path) -> None:
    a, b = _clones(tmp_path)
    _take_in_six(a, b)
    lines = [
        orjson.loads(line)
        for shard in sorted((b / "mem" / ".mdcg" / "log").iterdir())
        for line in shard.read_bytes().splitlines()
    ]
    (sync,) = [r for r in lines if r.get("op") == "sync"]
    with MdCG(b / "mem") as s:
        expected = [[e.mtime_ns, e.size] for e in (s.entry(f"n{i}") for i in range(1, 7))]
    assert sorted(sync["put"]) == [[f"n{i}", f"knowledge/orphan/n{i}.md"] for i in range(1, 7)]
    by_id = dict(zip((p[0] for p in sync["put"]), sync["stat"], strict=True))
    assert [by_id[f"n{i}"] for i in range(1, 7)] == expected
