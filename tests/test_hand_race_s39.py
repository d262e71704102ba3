"""Session 39, attack 7: a hand edit landing between md-cg's read of a node file and the
rename of its new version into place was overwritten (47 of 300 appended lines lost while
another process updated the memory in a loop). A read-modify-write now checks, just before
its rename, that the file still has the stamp it read (inode, mtime_ns, size: the check a
delete does); if not, it is undone and done again over the file as it is now, or refused
(ChangedOnDiskError) when the change would overwrite the edit (a body given whole).

The deterministic tests run md-cg in a child process whose journal hook, at the step after
the commit line is logged -- after the read, before the rename -- runs another process that
appends a line to the file (a person's editor). The last test is a real race, bounded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import md_cg
from md_cg import Edge, MdCG, Node

# absent before session 39 (the run on the code before the fix fails in the tests, not at import)
ChangedOnDiskError: type[Exception] = getattr(md_cg, "ChangedOnDiskError", LookupError)

# The end of a child: its journal hook ``fault`` set, it runs ``op`` and keeps the outcome
# in ``out`` (tests/test_handrace_s40.py's children end the same way).
RUN_OP = textwrap.dedent(
    """
    s._engine.journal.fault = fault
    try:
        exec(op, {"s": s})
        out = {"ok": True}
    except Exception as exc:
        out = {"ok": False, "type": type(exc).__name__, "message": str(exc)}
    s.close()
    """
)

# The child: opens the store, makes the journal hook append HAND<k> to ``target``'s file (by
# another process) at the first ``times`` commits' "logged" step, runs ``op``, prints the
# outcome as JSON.
CHILD = (
    textwrap.dedent(
        """
    import json, subprocess, sys, warnings
    from md_cg import MdCG
    warnings.simplefilter("ignore")
    root, target, times, op = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    s = MdCG(root)
    path = str(s.path_of(target))
    count = [0]
    def fault(step):
        if step == "logged" and count[0] < times:
            line = "HAND%d\\n" % count[0]
            count[0] += 1
            append = "import sys; open(sys.argv[1], 'a').write(sys.argv[2])"
            subprocess.run([sys.executable, "-c", append, path, line], check=True)
    """
    )
    + RUN_OP
    + 'print(json.dumps({**out, "appended": count[0]}))\n'
)


def _store(root: Path, **fields: object) -> str:
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base", **fields))  # type: ignore[arg-type]
        return s.path_of("x").relative_to(root).as_posix()


def _child(root: Path, op: str, *, times: int = 1, target: str = "x") -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), target, str(times), op],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _hand_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("HAND")]


def test_update_of_a_field_is_applied_again_over_an_append(tmp_path: Path) -> None:
    rel = _store(tmp_path)
    out = _child(tmp_path, "s.update('x', importance=0.3)")
    assert out == {"ok": True, "appended": 1}
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.body, node.importance) == ("base\nHAND0", 0.3)
        assert _hand_lines((tmp_path / rel).read_text()) == ["HAND0"]


def test_update_keeps_every_append_of_two_retries(tmp_path: Path) -> None:
    _store(tmp_path)
    out = _child(tmp_path, "s.update('x', tags=['domain:q'])", times=2)
    assert out == {"ok": True, "appended": 2}
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.body, node.tags) == ("base\nHAND0\nHAND1", ["domain:q"])


def refused(rel: str) -> dict[str, object]:
    """A child's outcome when x's write was refused, its file ``rel`` changed since it was read."""
    return {
        "ok": False,
        "type": "ChangedOnDiskError",
        "message": f"node 'x': its file {rel} changed on disk since it was read (an edit by hand or "
        "another program); nothing was written and the edit is kept -- read the node again and "
        "repeat the change",
    }


def test_a_file_that_keeps_changing_is_refused_and_kept(tmp_path: Path) -> None:
    rel = _store(tmp_path, importance=0.5)
    out = _child(tmp_path, "s.update('x', importance=0.9)", times=5)
    assert out == {**refused(rel), "appended": 3}
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.body, node.importance) == ("base\nHAND0\nHAND1\nHAND2", 0.5)


def test_a_body_given_whole_is_refused_not_written_over_the_edit(tmp_path: Path) -> None:
    rel = _store(tmp_path, importance=0.5)
    out = _child(tmp_path, "s.update('x', body='new text', importance=0.9)")
    assert out["type"] == "ChangedOnDiskError"
    assert out["message"] == (
        f"node 'x': its file {rel} changed on disk since it was read (an edit by hand or another "
        "program); nothing was written and the edit is kept -- read the node again and repeat the change"
    )
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.body, node.importance) == ("base\nHAND0", 0.5)
    err = ChangedOnDiskError("x", rel)
    assert (err.node_id, err.path) == ("x", rel)  # type: ignore[attr-defined]


def test_move_to_another_layer_keeps_the_append_and_leaves_no_old_file(tmp_path: Path) -> None:
    rel = _store(tmp_path)
    out = _child(tmp_path, "s.move('x', 'contextual')")
    assert out == {"ok": True, "appended": 1}
    with MdCG(tmp_path) as s:
        node = s.get("x")
        assert (node.layer, node.body) == ("contextual", "base\nHAND0")
        new = s.path_of("x").relative_to(tmp_path).as_posix()
    assert new != rel and not (tmp_path / rel).exists()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")) == [new]


def test_rename_keeps_the_append(tmp_path: Path) -> None:
    _store(tmp_path)
    out = _child(tmp_path, "s.rename('x', 'y')")
    assert out == {"ok": True, "appended": 1}
    with MdCG(tmp_path) as s:
        assert s.get("y").body == "base\nHAND0"
        new = s.path_of("y").relative_to(tmp_path).as_posix()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.md")) == [new]


def test_rename_keeps_an_append_to_a_linking_node(tmp_path: Path) -> None:
    with MdCG(tmp_path) as s:
        s.add(Node(id="x", layer="knowledge", body="base"))
        s.add(Node(id="a", layer="knowledge", body="links", edges=[Edge(target="x", type="similar")]))
    out = _child(tmp_path, "s.rename('x', 'y')", target="a")
    assert out == {"ok": True, "appended": 1}
    with MdCG(tmp_path) as s:
        a = s.get("a")
        assert (a.body, [e.target for e in a.edges]) == ("links\nHAND0", ["y"])


def test_edit_text_made_of_the_text_is_applied_again(tmp_path: Path) -> None:
    _store(tmp_path)
    out = _child(tmp_path, "s.edit_text('x', lambda t: t.replace('base', 'BASE'))")
    assert out == {"ok": True, "appended": 1}
    with MdCG(tmp_path) as s:
        assert s.get("x").body == "BASE\nHAND0"


def test_edit_text_given_whole_is_refused(tmp_path: Path) -> None:
    rel = _store(tmp_path)
    op = "t = s.read_text('x'); s.edit_text('x', lambda _: t.replace('base', 'whole'))"
    out = _child(tmp_path, op)
    assert (out["type"], out["appended"]) == ("ChangedOnDiskError", 1)
    assert f"its file {rel} changed on disk since it was read" in str(out["message"])
    with MdCG(tmp_path) as s:
        assert s.get("x").body == "base\nHAND0"


def test_supersede_and_verify_keep_the_append(tmp_path: Path) -> None:
    with MdCG(tmp_path) as s:
        s.add(Node(id="x", layer="knowledge", body="base"))
        s.add(Node(id="n", layer="knowledge", body="newer"))
    out = _child(tmp_path, "s.supersede('x', 'n')")
    assert out == {"ok": True, "appended": 1}
    out = _child(tmp_path, "s.verify('x', 'seen again', 'confirmed')")
    assert out == {"ok": True, "appended": 1}
    with MdCG(tmp_path) as s:
        assert s.get("x", include_expired=True).body == "base\nHAND0\nHAND0"


# A real race: a process appends HAND<k> (one O_APPEND write each) every 2 ms while this one
# updates x in a loop. Zero loss cannot be asserted: an append whose writer opened the file
# before the rename and writes after it lands in the replaced inode (the window between the
# check and the rename, plus the writer's own open-to-write gap; docs/reliability.md). Before
# the fix about 15 % of the lines were lost (47 of 300); the bound is 5 %.
APPENDER = textwrap.dedent(
    """
    import os, sys, time
    path, n = sys.argv[1], int(sys.argv[2])
    print("go", flush=True)
    for k in range(n):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"HAND%d\\n" % k)
        os.close(fd)
        time.sleep(0.002)
    """
)


@pytest.mark.slow
def test_real_race_loses_at_most_a_bounded_few(tmp_path: Path) -> None:
    lost, updates, refused = race(tmp_path, APPENDER, 300)
    assert len(lost) <= 300 // 20, (lost, updates, refused)


def race(root: Path, person: str, n: int, seconds: float = 120) -> tuple[list[int], int, int]:
    """x stored at ``root``; the code ``person`` run in a process of its own (given x's path
    and ``n``: it prints ``go``, then writes HAND0 ... HAND<n-1> into x's file) while this
    process updates x in a loop, until it exits (at most ``seconds``). Returns the k of the
    lines missing from x's file then, the updates made and those refused
    (tests/test_exchange_s41.py races an editor's saves too)."""
    path = root / _store(root)
    with MdCG(root) as s:
        proc = subprocess.Popen(
            [sys.executable, "-c", person, str(path), str(n)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "go\n"
        updates = refused = 0
        deadline = time.monotonic() + seconds
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                s.update("x", importance=(updates % 97) / 100)
            except ChangedOnDiskError:
                refused += 1
            updates += 1
        assert proc.wait(timeout=60) == 0
    present = {int(line[4:]) for line in _hand_lines(path.read_text())}
    assert present <= set(range(n))
    return sorted(set(range(n)) - present), updates, refused
