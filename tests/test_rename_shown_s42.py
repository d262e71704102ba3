"""``rename(id, new_id, path=FILE)`` of the file SHOWN as a duplicated id (session 42).

Two files hold ``meeting`` with different memories (two clones each added one, git kept
both). ``get``/``show`` serve one -- the file shown -- and ``forget``/``delete`` are refused
naming the other. Before, a person shown one memory could not give exactly that one its
own id: ``rename(path=<the file shown>)`` was refused ("the file shown as it: rename it
without a path") and ``rename`` without a path was refused too ("it is also held by ...").
Now the shown file takes the new id; the other keeps the id and is the one shown.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_dup_copies_s33 import _cli

from md_cg import MdCG
from md_cg.errors import InvalidArgumentError

WORK = "A: weekly design review on Mondays."
FAMILY = "B: family dinner every first Sunday."


def _files(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text("utf-8")
        for p in sorted(root.glob("*/**/*.md"))
        if not p.relative_to(root).as_posix().startswith(".")
    }


def _two_memories(tmp_path: Path) -> tuple[Path, str, str]:
    """A store whose ``meeting`` is held by two files of different memories: (root, the file
    shown, the other)."""
    root, other = tmp_path / "m", tmp_path / "o"
    with MdCG(root, create=True) as s:
        s.add(id="meeting", body=WORK, tags=["domain:work"])
        work = s.path_of("meeting").relative_to(root).as_posix()
    with MdCG(other, create=True) as s:
        s.add(id="meeting", body=FAMILY, tags=["domain:family"])  # the newer: shown
        rel = s.path_of("meeting").relative_to(other).as_posix()
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(other / rel, root / rel)
    with MdCG(root) as s:
        s.sync()
        assert s.path_of("meeting").relative_to(root).as_posix() == rel
        assert s.get("meeting").body.strip() == FAMILY
    return root, rel, work


def _stamp(seconds: float | None) -> str:
    assert seconds is not None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_the_file_shown_gets_the_new_id(tmp_path: Path) -> None:
    root, shown, work = _two_memories(tmp_path)
    before = _files(root)
    new = shown.replace("meeting.md", "meeting-family.md")
    with MdCG(root) as s:
        with pytest.raises(InvalidArgumentError, match="it is also held by"):
            s.rename("meeting", "meeting-family")  # without a path: still refused
        assert _files(root) == before
        node = s.rename("meeting", "meeting-family", path=shown)
        assert (node.id, node.body.strip()) == ("meeting-family", FAMILY)
        old_stamp = next(line for line in before[shown].splitlines() if line.startswith("updated_at:"))
        assert _files(root) == {
            work: before[work],  # byte for byte
            new: before[shown]
            .replace('id: "meeting"', 'id: "meeting-family"')
            .replace(old_stamp, f'updated_at: "{_stamp(node.updated_at)}"'),
        }
        assert s.path_of("meeting").relative_to(root).as_posix() == work
        assert s.get("meeting").body.strip() == WORK
        assert s.get("meeting-family").body.strip() == FAMILY
        assert sorted(s.ids()) == ["meeting", "meeting-family"]
        assert s.tombstones() == []  # nothing forgotten, no id gone
    # a process of its own: nothing to tell, healthy, each id its memory
    done = _cli(root, "sync")
    assert (done.returncode, done.stdout) == (0, "in sync: nothing changed\n"), done.stderr
    assert _cli(root, "health").stdout.startswith("health: OK")
    got = _cli(root, "get", "meeting")
    assert got.stdout.rstrip("\n").rsplit("\n", 1)[-1] == WORK
    got = _cli(root, "get", "meeting-family")
    assert got.stdout.rstrip("\n").rsplit("\n", 1)[-1] == FAMILY
    # and a forget of meeting is no longer refused: it removes the work memory alone
    done = _cli(root, "forget", "meeting", "--reason", "cancelled")
    assert (done.returncode, done.stdout) == (0, "meeting: forgotten (knowledge); tombstone kept\n")
    assert set(_files(root)) == {new}


def test_cli_rename_of_the_shown_file(tmp_path: Path) -> None:
    root, shown, work = _two_memories(tmp_path)
    before = _files(root)
    new = shown.replace("meeting.md", "meeting-family.md")
    done = _cli(root, "rename", "meeting", "meeting-family", "--path", shown)
    assert (done.returncode, done.stdout) == (
        0,
        f"meeting -> meeting-family ({root / shown} -> {root / new})\n",
    )
    after = _files(root)
    assert set(after) == {work, new} and after[work] == before[work]
    assert after[new].endswith(f"---\n{FAMILY}\n") and 'id: "meeting-family"' in after[new]


def test_the_shown_file_alone_is_still_refused(tmp_path: Path) -> None:
    """With no other file of the id, the shown file is renamed without a path."""
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="solo", body="only one file")
        rel = s.path_of("solo").relative_to(root).as_posix()
        with pytest.raises(InvalidArgumentError) as err:
            s.rename("solo", "solo2", path=rel)
        assert str(err.value) == (
            f"cannot rename 'solo' at {rel}: the file shown as it: rename it without a path "
            "(no other file holds it)"
        )
        assert s.get("solo").body.strip() == "only one file"
