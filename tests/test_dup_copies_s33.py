"""Forget, delete and rename find every copy of an id, whichever process saw it (review r2
of session 33, finding 1).

A second file holding an id under another name (``cp r.md r_copy.md``, a rename/rename
merge) was found by ``forget``, ``delete`` and ``rename`` only when the same process had
run the sync that reported it (``copies_of`` looked at files named ``<id>.md`` and this
process's own duplicates). So a fresh ``mdcg forget r`` exited 0 and left the copy with
the full text, and the next sync brought the memory back ("added (1): r"); ``delete``
left it too; ``rename r r2`` went through and the old id returned. Now every ``.md`` file
the index does not hold is read for its id (the sweep did so already), so a copy another
process's sync found, or nobody's yet, goes too -- within the caller's scope: a scoped
handle neither removes nor names a copy it does not see. Every sync and every
forget/delete/rename here runs in a process of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import md_cg

#: the code under test: the checkout md_cg was imported from (the worktree, or main)
CODE = str(Path(md_cg.__file__).resolve().parents[1])
BODY = "秘密 secret-text-xyzzy must be forgotten"
SECRET = b"secret-text-xyzzy"
DUPLICATE = "duplicate ids (keep both: mdcg rename ID NEW_ID --path FILE; or remove a copy) (1): r at {copy}"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": CODE}


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "md_cg.cli", "--root", str(root), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=120)


def _py(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


def _copy(root: Path, src: str, name: str, **fields: str) -> str:
    """Copy the node file ``src`` to ``name`` in its folder, older (so the original stands),
    with ``fields`` added to its frontmatter; return the copy's path."""
    text = (root / src).read_text(encoding="utf-8")
    lines = [
        'updated_at: "2020-01-01T00:00:00Z"' if line.startswith("updated_at:") else line
        for line in text.split("\n")
    ]
    extra = "".join(f'{k}: "{v}"\n' for k, v in fields.items())
    rel = f"{src.rsplit('/', 1)[0]}/{name}"
    (root / rel).write_text("\n".join(lines).replace("\nlayer:", f"\n{extra}layer:", 1), encoding="utf-8")
    return rel


def _setup(root: Path) -> tuple[str, str]:
    """Memory ``r`` added by the CLI and copied by hand to ``r_copy.md``; (file, copy)."""
    done = _cli(root, "add", "--id", "r", "--tag", "domain:proj", "--body", BODY)
    assert done.returncode == 0, done.stderr
    (file,) = [p.relative_to(root).as_posix() for p in root.glob("knowledge/*/r.md")]
    return file, _copy(root, file, "r_copy.md")


def _sync_reports(root: Path, copy: str) -> None:
    """A process of its own syncs and reports the copy as a duplicate."""
    done = _cli(root, "sync")
    assert (done.returncode, done.stdout) == (1, DUPLICATE.format(copy=copy) + "\n")


def _node_files(root: Path) -> set[str]:
    """Every file in the layer folders and archive/ (not .mdcg/)."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] not in (".mdcg", ".git")
    }


def _holding(root: Path, *needles: bytes) -> list[str]:
    """Every file under ``root`` (.mdcg/ too; not .git/: git's history is git's) holding
    any of ``needles``."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file()
        and ".git" not in p.relative_to(root).parts
        and any(n in p.read_bytes() for n in needles)
    )


def _gone_for_good(root: Path) -> None:
    """No byte of the body left under the root; the next sync (a new process) brings
    nothing back, and a search finds nothing."""
    assert _holding(root, SECRET, BODY.encode(), "秘密".encode()) == []
    done = _cli(root, "sync")
    assert (done.returncode, done.stdout) == (0, "in sync: nothing changed\n")
    done = _cli(root, "search", "xyzzy", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["results"] == []


@pytest.mark.parametrize("synced", [True, False], ids=["sync-saw-it", "nobody-saw-it"])
def test_cli_forget_in_a_new_process_removes_the_copy(tmp_path: Path, synced: bool) -> None:
    root = tmp_path / "m"
    file, copy = _setup(root)
    if synced:
        _sync_reports(root, copy)
    before = _node_files(root)
    done = _cli(root, "forget", "r", "--reason", "privacy")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"r: forgotten (knowledge); tombstone kept\nits copies removed too: {copy}\n",
        "",
    )
    assert _node_files(root) == before - {file, copy}
    _gone_for_good(root)


@pytest.mark.parametrize("synced", [True, False], ids=["sync-saw-it", "nobody-saw-it"])
def test_cli_delete_in_a_new_process_removes_the_copy(tmp_path: Path, synced: bool) -> None:
    root = tmp_path / "m"
    file, copy = _setup(root)
    if synced:
        _sync_reports(root, copy)
    before = _node_files(root)
    done = _cli(root, "delete", "r")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"r: deleted ({root / file})\nits copies removed too: {copy}\n",
        "",
    )
    assert _node_files(root) == before - {file, copy}
    assert _holding(root / "knowledge", SECRET) == []
    done = _cli(root, "sync")  # the memory does not come back
    assert (done.returncode, done.stdout) == (0, "in sync: nothing changed\n")
    assert _cli(root, "get", "r").returncode != 0


@pytest.mark.parametrize("synced", [True, False], ids=["sync-saw-it", "nobody-saw-it"])
def test_cli_rename_in_a_new_process_is_refused_and_names_the_copy(tmp_path: Path, synced: bool) -> None:
    root = tmp_path / "m"
    _file, copy = _setup(root)
    if synced:
        _sync_reports(root, copy)
    before = {rel: (root / rel).read_bytes() for rel in _node_files(root)}
    done = _cli(root, "rename", "r", "r2")
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"error: cannot rename 'r': it is also held by {copy} (a copy, or a merge that left two); keep "
        "one file (delete the other, or `delete r` removes all), sync, then rename -- or rename that "
        f"file alone: `rename r NEW_ID --path {copy}`\n",
    )
    assert {rel: (root / rel).read_bytes() for rel in _node_files(root)} == before
    done = _cli(root, "sync")  # still the one memory r, its copy still reported; no r2
    assert (done.returncode, done.stdout) == (1, DUPLICATE.format(copy=copy) + "\n")
    assert _cli(root, "get", "r2").returncode != 0


LIB_FORGET = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1]) as s:
    d = s.forget("r", "privacy")
    print(list(d.copies))
"""


def test_library_forget_by_a_handle_that_ran_no_sync(tmp_path: Path) -> None:
    """dup_forget_lib.py: one process's handle syncs, another's forgets."""
    root = tmp_path / "m"
    file, copy = _setup(root)
    before = _node_files(root)
    done = _py(
        "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s: print(s.sync().duplicates)",
        str(root),
    )
    assert done.stdout == f"(('r', '{copy}'),)\n"
    assert _py(LIB_FORGET, str(root)).stdout == f"['{copy}']\n"
    assert _node_files(root) == before - {file, copy}
    _gone_for_good(root)


SCOPED = """
import json, sys
from md_cg import MdCG, Scope
from md_cg.errors import InvalidArgumentError
with MdCG(sys.argv[1], scope=Scope(agent="a")) as s:
    if sys.argv[2] == "forget":
        print(json.dumps(list(s.forget("r", "privacy").copies)))
    elif sys.argv[2] == "delete":
        print(json.dumps(list(s.delete("r").copies)))
    else:
        try:
            s.rename("r", "r2")
        except InvalidArgumentError as exc:
            print(json.dumps(str(exc)))
"""


def _scoped_setup(root: Path) -> tuple[str, str, str]:
    """``r`` of agent a, a copy of it (agent a) and a copy made another agent's (b);
    (file, copy in scope, copy out of scope). A separate process syncs."""
    _py(
        "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s:\n"
        "    s.add(id='r', body=sys.argv[2], tags=['domain:proj'], agent_scope='a')",
        str(root),
        BODY,
    )
    (file,) = [p.relative_to(root).as_posix() for p in root.glob("knowledge/*/r.md")]
    mine = _copy(root, file, "r_mine.md")
    theirs = _copy(root, file, "r_theirs.md")
    (root / theirs).write_text(
        (root / theirs).read_text(encoding="utf-8").replace('agent_scope: "a"', 'agent_scope: "b"'),
        encoding="utf-8",
    )
    assert 'agent_scope: "b"' in (root / theirs).read_text(encoding="utf-8")
    assert _cli(root, "sync").returncode == 1  # both reported as duplicates
    return file, mine, theirs


@pytest.mark.parametrize("verb", ["forget", "delete"])
def test_a_scoped_handle_removes_and_names_only_the_copies_it_sees(tmp_path: Path, verb: str) -> None:
    root = tmp_path / "m"
    file, mine, theirs = _scoped_setup(root)
    before = _node_files(root)
    assert json.loads(_py(SCOPED, str(root), verb).stdout) == [mine]
    assert _node_files(root) == before - {file, mine}
    assert _holding(root / "knowledge", SECRET) == [theirs.removeprefix("knowledge/")]


def test_a_scoped_rename_names_only_the_copy_it_sees(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _file, mine, _theirs = _scoped_setup(root)
    before = {rel: (root / rel).read_bytes() for rel in _node_files(root)}
    assert json.loads(_py(SCOPED, str(root), "rename").stdout) == (
        f"cannot rename 'r': it is also held by {mine} (a copy, or a merge that left two); keep one "
        "file (delete the other, or `delete r` removes all), sync, then rename -- or rename that file "
        f"alone: `rename r NEW_ID --path {mine}`"
    )
    assert {rel: (root / rel).read_bytes() for rel in _node_files(root)} == before


def test_mcp_forget_finds_a_copy_made_after_the_server_opened(tmp_path: Path) -> None:
    """The server's handle opened before the copy existed; another process synced. (The
    server's pick-up before the tool call finds the copy too; the reply counts it once.)"""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from md_cg import MdCG, Scope
    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="r", body=BODY, tags=["domain:proj"])
    (file,) = [p.relative_to(root).as_posix() for p in root.glob("knowledge/*/r.md")]
    with MdCG(root, scope=Scope()) as store:  # as `mdcg mcp` serves: with a scope
        server = create_server(root, store=store)

        async def run() -> Any:
            async with Client(server) as client:
                copy = _copy(root, file, "r_copy.md")
                _sync_reports(root, copy)
                got = await client.call_tool("forget", {"id": "r", "reason": "privacy"})
                return copy, json.loads(got.content[0].text)

        copy, reply = anyio.run(run)
    assert reply["copies_removed"] == 1 and reply["forgotten"] is True
    assert not (root / file).exists() and not (root / copy).exists()
    _gone_for_good(root)


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.quotepath=false", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=120)


RENAME = "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s: s.rename('r', sys.argv[2])"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_forget_after_a_rename_rename_merge(tmp_path: Path) -> None:
    """git6.py: two clones rename r (r_a, r_b), merged with md-cg's driver; the merged
    clone's forget of r_b (a process that ran no sync) leaves no byte of it."""
    origin, a, b = tmp_path / "o", tmp_path / "a", tmp_path / "b"
    with md_cg.MdCG(origin) as s:
        s.add(id="r", body=BODY, tags=["domain:proj"])
    assert _git(origin, "init", "-q").returncode == 0
    _git(origin, "add", "-A")
    assert _git(origin, "commit", "-qm", "base").returncode == 0
    for clone, new in ((a, "r_a"), (b, "r_b")):
        assert _git(tmp_path, "clone", "-q", "o", clone.name).returncode == 0
        assert _cli(clone, "init", "--git").returncode == 0  # the merge driver, the hooks' sync
        _py(RENAME, str(clone), new)
        _git(clone, "add", "-A")
        assert _git(clone, "commit", "-qm", new).returncode == 0
    _git(b, "pull", "-q", "--no-rebase", "../a", "HEAD")  # a rename/rename conflict
    _git(b, "add", "-A")
    assert _git(b, "commit", "-qm", "merge: keep both files").returncode == 0
    files = sorted(p.relative_to(b).as_posix() for p in b.glob("knowledge/*/*.md"))
    assert [f.rsplit("/", 1)[1] for f in files] == ["r_a.md", "r_b.md"]
    done = _cli(b, "sync")
    assert (
        done.stdout.split("\n")[1]
        == "duplicate ids (keep both: mdcg rename ID NEW_ID --path FILE; or remove a copy) (1): "
        f"r_b at {files[0]}"
    )
    done = _cli(b, "forget", "r_b", "--reason", "user asked")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"r_b: forgotten (knowledge); tombstone kept\nits copies removed too: {files[0]}\n",
        "",
    )
    assert [f for f in _node_files(b) if f.endswith(".md") and f.startswith("knowledge/")] == []
    assert _holding(b, SECRET, "秘密".encode()) == []
    done = _cli(b, "sync")
    assert (done.returncode, done.stdout) == (0, "in sync: nothing changed\n")
