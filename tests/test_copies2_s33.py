"""Forget, delete and rename after f6c688f (every unindexed ``.md`` file read for its id):
the gaps attack b1 of session 33 found.

1. Cost: each delete/forget/rename read every file the index does not hold, again and
   again -- 5,000 malformed files (which no sync can take in) cost a long-lived handle's
   delete 380-425 ms each instead of 22 ms. Now a handle reads such a file once and keeps
   what it held with the file's (inode, mtime_ns, size); later calls only ``lstat`` it,
   and a file that changed (or was replaced) is read again.
2. Race: forget read a copy, then another memory was saved over it (an editor's atomic
   save), and the commit removed the file by name: the new memory was lost (400 of 400
   in b1's toctou.py). Now the commit removes a copy only when its file is still the
   one read; one changed since is left, and not named as removed.
3. A hidden file (``.r_note.md``, which sync and health never read) blocked ``rename``
   and was removed by delete/forget. Now copies are looked for where a sync looks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import md_cg
from md_cg import MdCG, index

#: the code under test: the checkout md_cg was imported from (the worktree, or main)
CODE = str(Path(md_cg.__file__).resolve().parents[1])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": CODE}


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "md_cg.cli", "--root", str(root), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=120, cwd=root.parent)


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the layer folders and archive/ (not .mdcg/), with its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file()
        and len(p.relative_to(root).parts) > 1
        and p.relative_to(root).parts[0] not in (".mdcg", ".git")
    }


def _older_copy(text: str, node_id: str | None = None, body: str | None = None) -> str:
    """``text`` (a node file) older, so the original stands; with another id and body."""
    out = "\n".join(
        'updated_at: "2020-01-01T00:00:00Z"' if line.startswith("updated_at:") else line
        for line in text.split("\n")
    )
    if node_id is not None:
        out = out.replace('id: "r"', f'id: "{node_id}"', 1)
    if body is not None:
        out = out.replace("body of r", body, 1)
    return out


BAD = '---\nid: "b{j}"\n  x: [\n---\nconflict text {j}\n'


def _store_with_unindexed(root: Path, n_bad: int) -> str:
    """Memories r, s1..s3 and ``n_bad`` malformed files (which no sync takes in); the
    folder of r.md."""
    with MdCG(root) as s:
        s.add(id="r", body="body of r", tags=["domain:p"])
        for i in (1, 2, 3):
            s.add(id=f"s{i}", body=f"body of s{i}", tags=["domain:p"])
    bad = root / "knowledge" / "bad"
    bad.mkdir()
    for j in range(n_bad):
        (bad / f"b{j}.md").write_text(BAD.format(j=j), encoding="utf-8")
    (file,) = root.glob("knowledge/*/r.md")
    return file.parent.relative_to(root).as_posix()


def test_a_long_lived_handle_reads_each_unindexed_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    folder = _store_with_unindexed(root, 50)
    reads: list[str] = []
    real = index.read_limited

    def counted(root_str: str, rel: str, *args: Any) -> Any:
        reads.append(rel)
        return real(root_str, rel, *args)

    monkeypatch.setattr(index, "read_limited", counted)
    bad = sorted(f"knowledge/bad/b{j}.md" for j in range(50))
    with MdCG(root) as s:
        assert s.sync().malformed != ()
        reads.clear()
        assert s.delete("s1").copies == ()
        assert sorted(r for r in reads if r.startswith("knowledge/bad/")) == bad  # each read once
        reads.clear()
        assert s.delete("s2").copies == ()
        assert [r for r in reads if r.startswith("knowledge/bad/")] == []  # stat only
        # b7 changed in place (another size); b8 replaced by a copy of r: each read again
        (root / "knowledge/bad/b7.md").write_text(BAD.format(j=7) + "more\n", encoding="utf-8")
        r_text = (root / folder / "r.md").read_text(encoding="utf-8")
        tmp = root / "knowledge/bad/.b8.tmp"
        tmp.write_text(_older_copy(r_text), encoding="utf-8")
        os.replace(tmp, root / "knowledge/bad/b8.md")
        reads.clear()
        assert s.delete("r").copies == ("knowledge/bad/b8.md",)
        assert sorted(r for r in reads if r.startswith("knowledge/bad/")) == [
            "knowledge/bad/b7.md",
            "knowledge/bad/b8.md",
        ]
        reads.clear()
        assert s.forget("s3", "privacy").copies == ()
        assert [r for r in reads if r.startswith("knowledge/bad/")] == []
    assert sorted(p for p in _files(root) if p.startswith("knowledge/")) == [
        *sorted(f"knowledge/bad/b{j}.md" for j in range(50) if j != 8)
    ]


#: a child process that forgets (or deletes) r and, once its copies are found, stops
#: before the commit until the parent has changed them (the journal's fault hook)
PAUSED = """
import json, os, sys, time
from pathlib import Path
from md_cg import MdCG
root, verb, ready, go = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])

def fault(step):
    if step == "temps":
        ready.write_text("found")
        while not go.exists():
            time.sleep(0.01)

with MdCG(root) as s:
    s._engine.journal.fault = fault
    d = s.forget("r", "privacy") if verb == "forget" else s.delete("r")
    print(json.dumps(list(d.copies)))
"""


@pytest.mark.parametrize("verb", ["forget", "delete"])
def test_a_copy_changed_after_it_was_read_is_not_removed(tmp_path: Path, verb: str) -> None:
    """toctou.py: four copies of r under other names; while the forget (or delete) of
    another process stands between finding them and its commit, c1 is replaced by a new
    memory (atomic save), c2 is replaced by a copy of itself (same bytes, new file) and
    c3 is edited in place. Only c0, unchanged, is removed and named; the others keep
    exactly their new bytes."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="r", body="body of r", tags=["domain:p"])
    (file,) = [p.relative_to(root).as_posix() for p in root.glob("knowledge/*/r.md")]
    folder = file.rsplit("/", 1)[0]
    older = _older_copy((root / file).read_text(encoding="utf-8"))
    for i in range(4):
        (root / folder / f"c{i}.md").write_text(older, encoding="utf-8")
    ready, go = tmp_path / "ready", tmp_path / "go"
    child = subprocess.Popen(
        [sys.executable, "-c", PAUSED, str(root), verb, str(ready), str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    deadline = time.monotonic() + 60
    while not ready.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ready.exists(), child.communicate()
    new1 = _older_copy(older, "new1", "a new memory saved over c1")
    changed3 = older.replace("body of r", "body of r, edited in c3")
    for name, text in (("c1.md", new1), ("c2.md", older)):
        tmp = root / folder / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, root / folder / name)
    with open(root / folder / "c3.md", "w", encoding="utf-8") as f:  # in place: same inode
        f.write(changed3)
    go.write_text("go")
    out, err = child.communicate(timeout=120)
    assert (child.returncode, json.loads(out)) == (0, [f"{folder}/c0.md"]), err
    assert _files(root) == {
        f"{folder}/c1.md": new1.encode(),
        f"{folder}/c2.md": older.encode(),
        f"{folder}/c3.md": changed3.encode(),
    }


def _hidden_setup(root: Path) -> tuple[str, str, bytes]:
    assert _cli(root, "init").returncode == 0
    done = _cli(root, "add", "--id", "r", "--tag", "domain:p", "--body", "body of r")
    assert done.returncode == 0, done.stderr
    (file,) = [p.relative_to(root).as_posix() for p in root.glob("knowledge/*/r.md")]
    hidden = f"{file.rsplit('/', 1)[0]}/.r_note.md"
    data = (root / file).read_bytes()
    (root / hidden).write_bytes(data)
    assert _cli(root, "sync").stdout == "in sync: nothing changed\n"  # sync never reads it
    return file, hidden, data


def test_a_hidden_file_does_not_block_rename(tmp_path: Path) -> None:
    """hidden.sh"""
    root = tmp_path / "m"
    file, hidden, data = _hidden_setup(root)
    done = _cli(root, "rename", "r", "r2")
    new = file.replace("/r.md", "/r2.md")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"r -> r2 ({root / file} -> {root / new})\n",
        "",
    )
    assert set(_files(root)) == {new, hidden} and _files(root)[hidden] == data
    assert _cli(root, "sync").stdout == "in sync: nothing changed\n"


@pytest.mark.parametrize("verb", ["delete", "forget"])
def test_delete_and_forget_leave_a_hidden_file(tmp_path: Path, verb: str) -> None:
    root = tmp_path / "m"
    file, hidden, data = _hidden_setup(root)
    done = _cli(root, verb, "r", *(["--reason", "privacy"] if verb == "forget" else []))
    said = (
        f"r: deleted ({root / file})\n" if verb == "delete" else "r: forgotten (knowledge); tombstone kept\n"
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, said, "")
    assert _files(root) == {hidden: data}
    assert _cli(root, "sync").stdout == "in sync: nothing changed\n"
