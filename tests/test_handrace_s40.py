"""Session 40: the hand-edit guard of session 39 (a read-modify-write checks, just before
its rename, that each file it read still has the stamp read) refused a write whose file a
person had moved away -- or removed -- while the write was open: it undid the commit,
ran again, found no file and raised NodeNotFoundError (CI: test_pickup_wait_s35's mover
died, and the merge was reverted). A file gone from its path is not an edit to keep: the
write goes on as before the guard, and a pick-up after it tells the person's copy under
``duplicates``. A file still there but changed (an editor's save, an append) is still
never overwritten.

A child process runs the write; its journal hook, at the step after the commit line is
logged (after the read, before the rename), runs another process -- the person -- that
moves, removes or rewrites the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_hand_race_s39 import RUN_OP

from md_cg import Edge, MdCG, Node

HAND = "knowledge/by_hand.md"

# Both children's start: the store at argv[1], the op to run argv[2], their own argument argv[3].
OPEN = textwrap.dedent(
    """
    import json, subprocess, sys, warnings
    from md_cg import MdCG
    warnings.simplefilter("ignore")
    root, op, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    s = MdCG(root)
    path = str(s.path_of("x"))
    """
)

CHILD = (
    OPEN
    + textwrap.dedent(
        """
    person = arg
    done = [False]
    def fault(step):
        if step == "logged" and not done[0]:
            done[0] = True
            subprocess.run([sys.executable, "-c", person, root, path], check=True)
    """
    )
    + RUN_OP
    + 'print(json.dumps({**out, "person": done[0]}))\n'
)


MOVE = f"import os, sys; os.rename(sys.argv[2], os.path.join(sys.argv[1], {HAND!r}))"
REMOVE = "import os, sys; os.unlink(sys.argv[2])"
# an editor's save: the file read whole, written to a temp file, renamed over it
SAVE = (
    "import os, sys; p = sys.argv[2]; data = open(p).read(); "
    "open(p + '.swp', 'w').write(data.replace('base', 'edited')); os.rename(p + '.swp', p)"
)


def _store(root: Path) -> str:
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base", importance=0.5))
        return s.path_of("x").relative_to(root).as_posix()


def _child(root: Path, person: str, op: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), op, person], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts)


def test_update_while_a_person_moves_the_file_away_writes_and_the_copy_is_told(tmp_path: Path) -> None:
    rel = _store(tmp_path)
    assert _child(tmp_path, MOVE, "s.update('x', importance=0.3)") == {"ok": True, "person": True}
    assert _files(tmp_path) == sorted([rel, HAND])
    with MdCG(tmp_path) as s:
        report = s.sync()
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())
        assert report.duplicates == (("x", HAND),)
        node = s.get("x")
        assert (node.body, node.importance) == ("base", 0.3)
        assert s.path_of("x").relative_to(tmp_path).as_posix() == rel
    assert "importance: 0.5" in (tmp_path / HAND).read_text()


def test_a_move_to_another_layer_while_a_person_moves_the_file_away(tmp_path: Path) -> None:
    rel = _store(tmp_path)
    assert _child(tmp_path, MOVE, "s.move('x', 'contextual')") == {"ok": True, "person": True}
    with MdCG(tmp_path) as s:
        report = s.sync()
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())
        assert report.duplicates == (("x", HAND),)
        node = s.get("x")
        assert (node.layer, node.body) == ("contextual", "base")
        new = s.path_of("x").relative_to(tmp_path).as_posix()
    assert new != rel and _files(tmp_path) == sorted([new, HAND])


def test_update_while_a_person_removes_the_file_writes_it_as_before_the_guard(tmp_path: Path) -> None:
    rel = _store(tmp_path)
    assert _child(tmp_path, REMOVE, "s.update('x', importance=0.3)") == {"ok": True, "person": True}
    assert _files(tmp_path) == [rel]
    with MdCG(tmp_path) as s:
        report = s.sync()
        assert (report.added, report.changed, report.deleted, report.moved, report.duplicates) == (
            (),
            (),
            (),
            (),
            (),
        )
        node = s.get("x")
        assert (node.body, node.importance) == ("base", 0.3)


def test_an_editors_save_in_the_same_window_is_still_kept(tmp_path: Path) -> None:
    """The narrowing leaves the guard whole for a file still at its path: the save (a new
    file renamed over it) is read again and the update applied to it."""
    rel = _store(tmp_path)
    assert _child(tmp_path, SAVE, "s.update('x', importance=0.3)") == {"ok": True, "person": True}
    assert _files(tmp_path) == [rel]
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.body, node.importance) == ("edited", 0.3)


# The child of the late-append tests: at the step after the commit line is logged, a person
# process opens the file for appending (``open(path, "a")``, as ``echo >>`` does) and waits;
# after the rename (step ``at``: ``rename-1``; ``deleted`` after a move's del) it writes its
# line through that descriptor -- into the file the commit replaced or removed -- and closes it.
# The end of both: the person process (``code``, given ``target``) is started at ``logged``
# and told to write at step ``at``.
LATE_END = textwrap.dedent(
    """
    person = [None]
    def fault(step):
        if step == "logged" and person[0] is None:
            p = subprocess.Popen([sys.executable, "-c", code, target], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            assert p.stdout.readline() == "open\\n"
            person[0] = p
        elif step == at and person[0] is not None and person[0].poll() is None:
            p = person[0]
            p.stdin.write("go\\n"); p.stdin.flush()
            assert p.stdout.readline() == "written\\n"
            p.wait()
    s._engine.journal.fault = fault
    exec(op, {"s": s})
    s.close()
    print(json.dumps({"person": person[0] is not None and person[0].returncode == 0}))
    """
)
LATE = (
    OPEN
    + textwrap.dedent(
        """
        at, target = arg, path
        code = (
            "import sys; f = open(sys.argv[1], 'a'); print('open', flush=True); "
            "sys.stdin.readline(); f.write('HAND-late\\\\n'); f.close(); print('written', flush=True)"
        )
        """
    )
    + LATE_END
)


def _late(root: Path, op: str, at: str = "rename-1") -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", LATE, str(root), op, at], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_line_appended_through_a_descriptor_opened_before_the_rename_is_carried(tmp_path: Path) -> None:
    """Session 39's guard cannot see this write (it lands after the check, in the file the
    rename replaced): it was lost. The commit now holds the file it checked open and, after
    its rename, carries what was appended to it into the new file."""
    rel = _store(tmp_path)
    assert _late(tmp_path, "s.update('x', importance=0.3)") == {"person": True}
    assert _files(tmp_path) == [rel]
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.body, node.importance) == ("base\nHAND-late", 0.3)
    assert (tmp_path / rel).read_text().endswith("\nbase\nHAND-late\n")


def test_a_late_append_to_a_file_a_move_removed_is_carried_to_the_new_file(tmp_path: Path) -> None:
    rel = _store(tmp_path)
    assert _late(tmp_path, "s.move('x', 'contextual')", "deleted") == {"person": True}
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.layer, node.body) == ("contextual", "base\nHAND-late")
        new = s.path_of("x").relative_to(tmp_path).as_posix()
    assert new != rel and _files(tmp_path) == [new]


# Appending the late bytes fails (a full disk): the edit_text is done and acknowledged.
FAILING_CARRY = (
    "import errno, md_cg.fsops as F\n"
    "def full(self, name, data): raise OSError(errno.ENOSPC, 'No space left on device', name)\n"
    "F.Dir.append = full\n"
    "s.edit_text('x', lambda t: t + 'AGENT\\n')\n"
)


def test_a_carry_that_fails_does_not_turn_the_done_write_into_an_error(tmp_path: Path) -> None:
    """Attack atk9 of session 40, F1: the carry runs after the commit's ``done`` line; an
    error there (ENOSPC, EMFILE) reached the caller as a plain OSError -- ``was_applied``
    False -- for a write that had happened, and a caller repeating it applied it twice.
    Now the carry is best effort: the write returns, its change is in the file once, and
    the person's late line stays where it landed (lost from the file, as before the carry)."""
    rel = _store(tmp_path)
    assert _late(tmp_path, FAILING_CARRY) == {"person": True}
    assert _files(tmp_path) == [rel]
    with MdCG(tmp_path) as s:
        assert s.get("x").body == "base\nAGENT"


FD_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from md_cg import Edge, MdCG, Node
    root, n = sys.argv[1], int(sys.argv[2])
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base"))
        links = [Edge(target="x", type="similar")]
        s.add_many([Node(id=f"a{i}", layer="knowledge", body=f"links {i}", edges=links) for i in range(n)])
    fds = {}
    def fault(step):
        if step in ("logged", "renamed"):
            fds[step] = len(os.listdir("/proc/self/fd"))
    with MdCG(root) as s:
        s._engine.journal.fault = fault
        s.rename("x", "y")
        targets = sorted({e.target for i in range(n) for e in s.get(f"a{i}").edges})
    print(json.dumps({"held": fds["renamed"] - fds["logged"], "targets": targets}))
    """
)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_a_rename_rewriting_many_linking_files_holds_a_bounded_few_open(tmp_path: Path) -> None:
    """The guard holds at most journal.HOLD_MAX (16) of the files it checked open; a rename
    rewriting 100 linking files held all 101 (row 24: a process needs about 150 descriptors
    at most -- under a limit of 128 the opens past it fell back to lstat)."""
    done = subprocess.run(
        [sys.executable, "-c", FD_CHILD, str(tmp_path / "s"), "100"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {"held": 16, "targets": ["y"]}


def test_ctrl_c_while_the_guard_checks_undoes_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack atk9 of session 40, F4: a Ctrl-C landing while the guard checks the files
    (after the commit line, before any rename) left the commit open and its temp file
    beside the node; the next process rolled it forward, or, the file edited since, left
    the temp file. Now the commit is closed ``undone`` at once: no temp file, the file as
    it was, nothing for a recovery to do."""
    import md_cg.journal as journal

    rel = _store(tmp_path)
    before = (tmp_path / rel).read_bytes()
    checked = journal._changed_since

    def interrupted(*args: object) -> list[str]:
        checked(*args)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(journal, "_changed_since", interrupted)
    with MdCG(tmp_path) as s:
        with pytest.raises(KeyboardInterrupt):
            s.update("x", importance=0.3)
        assert s._engine.journal.failed == []
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / rel).parent.iterdir()) == ["x.md"]
    assert (tmp_path / rel).read_bytes() == before
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            OPEN + "r = s.sync(); print(json.dumps([r.recovered, s.get('x').importance]))",
            str(tmp_path),
            "-",
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [0, 0.5]


# LATE for several files: the person opens the file of each id of argv[3] (a JSON list) for
# appending at ``logged`` and, after the commit's del (``deleted``), writes ``HAND-late-<id>``
# through each.
LATE_FILES = (
    OPEN
    + textwrap.dedent(
        """
        at, target = "deleted", json.dumps({i: str(s.path_of(i)) for i in json.loads(arg)})
        code = (
            "import json, sys; fs = {i: open(p, 'a') for i, p in json.loads(sys.argv[1]).items()}; "
            "print('open', flush=True); sys.stdin.readline()\\n"
            "for i, f in fs.items(): f.write('HAND-late-%s\\\\n' % i); f.close()\\n"
            "print('written', flush=True)"
        )
        """
    )
    + LATE_END
)


@pytest.mark.parametrize(
    ("op", "layer"),
    [("s.rename('x', 'z')", "knowledge"), ("s.rename('x', 'z', layer='contextual')", "contextual")],
)
def test_a_late_append_to_the_file_a_rename_removed_is_carried_to_the_new_ids_file(
    tmp_path: Path, op: str, layer: str
) -> None:
    """Attack atk9 of session 40, F2: the carry looked for a put of the old file's id -- a
    rename puts the new id's file, not the old one's -- and the person's line, written
    through a descriptor opened on x's file before the rename, was lost (the linking file
    ``a`` rewritten by the same commit was carried). The rename now tells the commit its
    old id's file became the new id's: the line is in z's file once, and a's line in a's."""
    with MdCG(tmp_path) as s:
        s.add(Node(id="x", layer="knowledge", body="base", importance=0.5))
        s.add(Node(id="a", layer="knowledge", body="links", edges=[Edge(target="x", type="similar")]))
        a_rel = s.path_of("a").relative_to(tmp_path).as_posix()
    done = subprocess.run(
        [sys.executable, "-c", LATE_FILES, str(tmp_path), op, json.dumps(["x", "a"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"person": True}
    with MdCG(tmp_path) as s:
        z, a = s.get("z"), s.get("a")
        assert (z.layer, z.body, [e.target for e in a.edges], a.body) == (
            layer,
            "base\nHAND-late-x",
            ["z"],
            "links\nHAND-late-a",
        )
        z_rel = s.path_of("z").relative_to(tmp_path).as_posix()
    assert _files(tmp_path) == sorted([a_rel, z_rel])
    texts = {rel: (tmp_path / rel).read_text() for rel in (a_rel, z_rel)}
    assert [texts[z_rel].count("HAND-late"), texts[a_rel].count("HAND-late")] == [1, 1]
    assert texts[z_rel].count("HAND-late-x") == 1 and texts[a_rel].count("HAND-late-a") == 1
