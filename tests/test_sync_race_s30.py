"""Another process's writes through md-cg are never reported as hand edits (session 30,
r2 finding 1): a pick-up (``sync_if_changed``) or ``sync`` that saw the file before this
process read the writer's commit line reported it -- every one of 200 archives to the
pick-ups, 77 of 200 to full syncs -- and the MCP ``sync`` told an agent of hundreds of edits
no person made. The log is now followed before the seen files are settled. Real
processes, checked by id set."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import MdCG, Node

WRITES = {
    "archive": "s.archive([f'k{i:03d}'])",
    "update": "s.update(f'k{i:03d}', body=f'changed body {i} tea')",
    "retag": "s.update(f'k{i:03d}', tags=['domain:ops'])",
    "add": "s.add(id=f'new{i:03d}', layer='knowledge', body=f'new tea {i}', tags=['domain:life'])",
}


@pytest.mark.parametrize("mode", ["pick_up", "sync"])
@pytest.mark.parametrize("op", sorted(WRITES))
def test_library_writes_of_another_process_are_not_hand_edits(tmp_path: Path, op: str, mode: str) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many(
            [
                Node(id=f"k{i:03d}", layer="knowledge", body=f"note {i} tea", tags=["domain:life"])
                for i in range(120)
            ]
        )
    code = (
        "import warnings\nwarnings.simplefilter('ignore')\nfrom md_cg import MdCG\n"
        f"with MdCG({str(root)!r}) as s:\n    for i in range(0, 120, 2):\n        {WRITES[op]}\n"
    )
    reported: dict[str, set[str]] = {"added": set(), "changed": set(), "deleted": set(), "moved": set()}
    with MdCG(root) as store:
        store.sync_if_changed()
        writer = subprocess.Popen([sys.executable, "-c", code], env=python_env())
        rounds = 0
        while writer.poll() is None or rounds < 3:
            rep = store.sync_if_changed(min_interval=0) if mode == "pick_up" else store.sync()
            rounds += writer.poll() is not None
            if rep is not None:
                for key in ("added", "changed", "deleted"):
                    reported[key].update(getattr(rep, key))
                reported["moved"].update(m.node_id for m in rep.moved)
        assert writer.returncode == 0
        assert reported == {"added": set(), "changed": set(), "deleted": set(), "moved": set()}
        written = {f"new{i:03d}" if op == "add" else f"k{i:03d}" for i in range(0, 120, 2)}
        if op == "archive":
            assert written <= set(store.ids(include_archived=True)) - set(store.ids())
        elif op == "add":
            assert written <= set(store.ids())
        assert store.sync().clean


WRITER = """
import sys
import time
from md_cg import MdCG
with MdCG(sys.argv[1]) as s:
    for line in sys.stdin:
        i = line.strip()
        s.update(i, body=f"library write of {i}")
        print("ok", flush=True)
"""


@pytest.mark.parametrize("mode", ["pick_up", "sync"])
def test_a_hand_edit_right_after_another_process_wrote_the_file_is_reported(
    tmp_path: Path, mode: str
) -> None:
    """r4: following the log took in the writer's commit and the file as it is on disk --
    with the hand edit -- so neither a pick-up nor a sync told it (0 of 20). A file that no
    longer holds the bytes its commit line logged was edited after it: ``changed``."""
    root = tmp_path / "m"
    ids = [f"w{i:02d}" for i in range(12)]
    with MdCG(root) as s:
        for i in ids:
            s.add(id=i, layer="contextual", body=f"m {i}")
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    assert writer.stdin is not None and writer.stdout is not None
    told: list[str] = []
    with MdCG(root) as store:
        store.sync()
        store.sync_if_changed(0)
        for i in ids:
            writer.stdin.write(i + "\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "ok\n"
            path = root / "contextual" / f"{i}.md"
            path.write_text(path.read_text(encoding="utf-8") + "\nhand edit\n", encoding="utf-8")
            rep = store.sync_if_changed(0) if mode == "pick_up" else store.sync()
            if rep is not None:
                assert (rep.added, rep.deleted, rep.moved) == ((), (), ())
                told += rep.changed
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0
        assert told == ids
        assert [store.get(i).body for i in ids] == [f"library write of {i}\n\nhand edit" for i in ids]


@pytest.mark.parametrize("mode", ["pick_up", "sync"])
def test_hand_changes_after_another_process_wrote_are_told_after_a_refresh(tmp_path: Path, mode: str) -> None:
    """r5: once anything in this process followed the log (a read's refresh, after 1 s),
    the written-then-edited files were in the index as they are and no sync told them (0
    of 5 over MCP); a file deleted or renamed by hand after the write was not told either.
    The follow itself notes them (``Engine.hand_after``) for the next sync."""
    root = tmp_path / "m"
    ids = [f"n{i}" for i in range(5)]
    with MdCG(root) as s:
        for i in ids:
            s.add(id=i, layer="contextual", body=f"note {i} okapis")
    with MdCG(root) as store:
        store.sync()
        store.sync_if_changed(0)
        code = "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s:\n"
        code += "".join(f"    s.update({i!r}, body='library {i} okapis')\n" for i in ids)
        subprocess.run([sys.executable, "-c", code, str(root)], env=python_env(), check=True)
        folder = root / "contextual"
        (folder / "n0.md").write_text((folder / "n0.md").read_text(encoding="utf-8") + "\nby hand\n")
        (folder / "n1.md").write_text(
            (folder / "n1.md").read_text(encoding="utf-8").replace("okapis", "OKAPIS")
        )
        (folder / "n2.md").unlink()
        (folder / "n3.md").rename(folder / "n3-moved.md")
        store.refresh()  # what any read does once refresh_interval has passed
        rep = store.sync_if_changed(0) if mode == "pick_up" else store.sync()
        assert rep is not None
        assert (rep.added, rep.changed, rep.deleted) == ((), ("n0", "n1"), ("n2",))
        assert [(m.node_id, m.old_path, m.new_path) for m in rep.moved] == [
            ("n3", "contextual/n3.md", "contextual/n3-moved.md")
        ]
        again = store.sync()
        assert (again.added, again.changed, again.deleted, again.moved) == ((), (), (), ())
        assert store.get("n1").body == "library n1 OKAPIS" and store.get("n4").body == "library n4 okapis"


SLOW_DONE = """
import os, sys, time
from md_cg import MdCG, journal
s = MdCG(sys.argv[1])
s.update("n0", body="first write")
append = journal.Journal.append
def slow(self, records):
    if records and records[0].get("op") == "done":
        # between the renames and the done line (a durable batch's fsyncs): the test's
        # fresh sync runs here, then lets the done line go
        open(sys.argv[3] + ".at-done", "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
            time.sleep(0.005)
    return append(self, records)
journal.Journal.append = slow
if sys.argv[2] == "update":
    s.update("n0", body="second write")
else:
    s.forget("n0", "x")
s.close()
"""


@pytest.mark.parametrize("op", ["update", "forget"])
def test_a_write_still_open_is_not_a_hand_change(tmp_path: Path, op: str) -> None:
    """r6: a second write of an id, its files in place and its done line not yet written,
    was compared with the first (closed) write's logged bytes: a fresh process's sync said
    ``changed: n0`` (``deleted: n0`` for a forget) while no person touched anything."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        for i in ("n0", "n1"):
            s.add(id=i, layer="contextual", body=f"note {i}")
    go = tmp_path / "go"
    writer = subprocess.Popen([sys.executable, "-c", SLOW_DONE, str(root), op, str(go)], env=python_env())
    # The writer waits before its done line until the sync below is over (it slept 3 s, and
    # the sync came 2 s after its start: on a loaded machine the write could still be to come)
    deadline = time.monotonic() + 120
    while not Path(f"{go}.at-done").exists():
        assert writer.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    with MdCG(root) as fresh:
        rep = fresh.sync()
        assert (rep.added, rep.changed, rep.deleted, rep.moved) == ((), (), (), ())
    assert writer.poll() is None  # the sync came before the done line
    go.touch()
    assert writer.wait(timeout=60) == 0
    with MdCG(root) as fresh:
        rep = fresh.sync()
        assert (rep.added, rep.changed, rep.deleted, rep.moved) == ((), (), (), ())


def test_a_change_another_sync_told_is_not_told_again_by_a_long_running_handle(tmp_path: Path) -> None:
    """r6: a handle that had followed another process's write noted the hand change after it;
    a ``mdcg sync`` in a third process told it and logged it, and the handle's own ``sync``
    told it again. A sync line naming the id drops what the handle noted."""
    root = tmp_path / "m"
    ids = [f"n{i}" for i in range(3)]
    with MdCG(root) as s:
        for i in ids:
            s.add(id=i, layer="contextual", body=f"note {i}")
    with MdCG(root) as handle:
        handle.sync()
        code = "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s:\n"
        code += "".join(f"    s.update({i!r}, body='library {i}')\n" for i in ids)
        subprocess.run([sys.executable, "-c", code, str(root)], env=python_env(), check=True)
        (root / "contextual" / "n0.md").write_text(
            (root / "contextual" / "n0.md").read_text(encoding="utf-8") + "\nby hand\n"
        )
        (root / "contextual" / "n1.md").unlink()
        handle.refresh()  # follows the writer's lines: notes n0 and n1
        with MdCG(root) as other:
            told = other.sync()
            assert (told.changed, told.deleted) == (("n0",), ("n1",))
        rep = handle.sync()
        assert (rep.added, rep.changed, rep.deleted, rep.moved) == ((), (), (), ())


def test_a_durable_write_that_makes_a_top_level_folder(tmp_path: Path) -> None:
    """r6 (before today too): the first durable archive of a store without ``archive/`` failed
    with ``FileNotFoundError: ... 'archiv'`` (the root-level folder's parent was cut one
    letter short) and wrote nothing; so did a durable add into a layer folder a fresh clone
    lacks."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="a1", layer="contextual", body="x")
    with MdCG(root, durable=True) as s:
        assert s.archive(["a1"]) == ["a1"]
        assert (root / "archive").is_dir() and s.entry("a1", include_archived=True).archived
    (root / "knowledge").rmdir()
    with MdCG(root, durable=True) as s:
        s.add(id="k1", layer="knowledge", body="y")
        assert s.entry("k1").path.startswith("knowledge/")


def test_a_scoped_sync_does_not_silence_a_change_it_did_not_tell(tmp_path: Path) -> None:
    """r7: agent y's sync logged a sync line naming agent x's hand-edited memory without
    telling it (out of y's scope), and every other process then took the line for "told":
    no one was ever told. A scoped handle's sync logs no such line."""
    from md_cg import Scope

    root = tmp_path / "m"
    with MdCG(root, scope=Scope(agent="x")) as s:
        s.add(id="x0", layer="contextual", body="agent x memory")
        s.add(id="x1", layer="contextual", body="other")
    with MdCG(root) as handle:
        handle.sync()
        code = "import sys\nfrom md_cg import MdCG, Scope\n"
        code += (
            "with MdCG(sys.argv[1], scope=Scope(agent='x')) as s:\n    s.update('x0', body='written by x')\n"
        )
        subprocess.run([sys.executable, "-c", code, str(root)], env=python_env(), check=True)
        path = root / "contextual" / "x0.md"
        path.write_text(path.read_text(encoding="utf-8") + "\nHAND EDIT\n", encoding="utf-8")
        handle.refresh()  # notes x0
        with MdCG(root, scope=Scope(agent="y")) as y:
            told = y.sync()
            assert (told.changed, told.withheld) == ((), 0)
        handle.refresh()
        assert handle.sync().changed == ("x0",)
    with MdCG(root) as fresh:  # told, and logged by an unscoped sync: not again
        assert fresh.sync().changed == ()
