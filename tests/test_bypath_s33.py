"""Session 33: a long-lived handle's pick-up of one changed file walks no large store.

``sync_if_changed`` (the MCP server calls it before every tool call; the memory tool and
the LangGraph store before every batch) reconciled the files its watch reported through
``IndexState.by_path()``, which rebuilt the path -> id map of every entry on each call:
after any write, its own included, the next call cost 110 ms at 100k nodes (0.35 ms
now). The map is now built once and kept by ``put`` and ``drop``, as the tag map is.
These tests pin the walk count and that the kept map always equals a fresh one.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.index import Entries


def _fresh(store: MdCG) -> dict[str, str]:
    """The path -> id map built from scratch, as ``by_path`` built it before."""
    return {p: i for i, p, _m, _s in store._engine.state.entries.placed()}


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the walks of every entry (``Entries.placed``) from now on."""
    calls = [0]
    real = Entries.placed

    def counted(self: Entries):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(self)

    monkeypatch.setattr(Entries, "placed", counted)
    return calls


def test_pick_up_after_writes_and_hand_edits_walks_the_entries_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add_many([Node(id=f"n{i}", layer="knowledge", body=f"note {i}") for i in range(300)])
    with MdCG(root) as store:
        assert store.sync_if_changed() is None
        walks = _walks(monkeypatch)
        for i in range(5):
            store.add(id=f"own{i}", layer="knowledge", body=f"own write {i}")
            assert store.sync_if_changed(min_interval=0) is None
        edited = root / store._engine.state.entries["n7"].path
        for i in range(5):
            edited.write_text(edited.read_text(encoding="utf-8") + f"\nhand {i}\n", encoding="utf-8")
            report = store.sync_if_changed(min_interval=0)
            assert report is not None and report.changed == ("n7",)
        assert store.get("n7").body.endswith("hand 4")
        gone = root / store._engine.state.entries["n8"].path
        gone.unlink()
        report = store.sync_if_changed(min_interval=0)
        assert report is not None and report.deleted == ("n8",)
        store.delete("n9", force=True)
        assert store.sync_if_changed(min_interval=0) is None
        # the first call (above) built the map; none of the twelve pick-ups walks again
        # (before: one walk each)
        assert walks[0] == 0
        assert dict(store._engine.state.by_path()) == _fresh(store)


def _churn(store: MdCG, root: Path, rng: random.Random, steps: range) -> None:
    """Random changes of every kind; after each, ``by_path()`` equals a fresh walk."""
    state = store._engine.state
    for step in steps:
        live = sorted(store.ids())
        victim = rng.choice(live)
        kinds = ["add", "update", "rename", "move", "delete", "archive", "hand_move", "hand_rm"]
        kind = rng.choice(kinds) if len(live) > 20 else "add"
        if kind == "add":
            store.add(id=f"a{step}", layer=rng.choice(["knowledge", "contextual"]), body=f"new {step}")
        elif kind == "update":
            store.update(victim, body=f"changed at step {step}")
        elif kind == "rename":
            store.rename(victim, f"r{step}")
        elif kind == "move":
            store.move(victim, rng.choice(["knowledge", "contextual", "structural"]))
        elif kind == "delete":
            store.delete(victim, force=True)
        elif kind == "archive":
            store.archive(victim)
        else:
            path = root / state.entries[victim].path
            if kind == "hand_move":
                (root / "structural").mkdir(exist_ok=True)
                shutil.move(path, root / "structural" / f"moved-{step}.md")
            else:
                path.unlink()
            store.sync()
        assert dict(state.by_path()) == _fresh(store), (step, kind, victim)


def test_the_kept_map_equals_a_fresh_one_through_every_kind_of_change(tmp_path: Path) -> None:
    """Adds, updates, renames, moves between layers, deletes, archives, hand moves and
    hand deletes, in a seeded random order, on a handle that built its index from the
    files and on one opened from a snapshot: after each change ``by_path()`` is exactly
    the map a walk of every entry builds, and at the end it names the files on disk."""
    root = tmp_path / "m"
    rng = random.Random(33)
    with MdCG(root) as store:
        store.add_many([Node(id=f"n{i}", layer="knowledge", body=f"note {i}") for i in range(60)])
        assert dict(store._engine.state.by_path()) == _fresh(store)
        _churn(store, root, rng, range(100))
        store.compact_index()
    with MdCG(root) as store:
        state = store._engine.state
        assert state.entries.lazy  # opened from the snapshot: rows not built yet
        assert dict(state.by_path()) == _fresh(store)
        _churn(store, root, rng, range(100, 160))
        on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts}
        assert set(state.by_path()) == on_disk


def test_the_first_pick_up_builds_no_entry_of_a_snapshot_opened_index(tmp_path: Path) -> None:
    """The first ``sync_if_changed`` compares every file with the index by a stat scan. It
    built every entry of an index opened from a snapshot to read their stats (5.5 s of the
    first call's 9.3 at 100k nodes under a profiler, and +170 MiB); the snapshot's columns
    answer them. The scan still finds a hand edit, a new file and a deletion."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add_many([Node(id=f"n{i}", layer="knowledge", body=f"note {i}") for i in range(50)])
        store.compact_index()
        paths = {i: root / store._engine.state.entries[i].path for i in ("n1", "n2")}
    edited = paths["n1"]
    edited.write_text(edited.read_text(encoding="utf-8") + "\nby hand\n", encoding="utf-8")
    os.utime(edited, ns=(1, 1))  # a stat the index cannot hold
    paths["n2"].unlink()
    (root / "knowledge" / "fresh.md").write_text("# Fresh\n\nwritten by hand\n", encoding="utf-8")
    with MdCG(root) as store:
        entries = store._engine.state.entries
        assert entries.lazy
        report = store.sync_if_changed()
        assert report is not None
        assert (report.added, report.changed, report.deleted) == (("fresh",), ("n1",), ("n2",))
        assert entries.lazy  # before: every row built by the scan
        assert store.get("n1").body.endswith("by hand")
