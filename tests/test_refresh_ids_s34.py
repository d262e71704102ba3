"""``MdCG.refresh()`` returns exactly the ids another process changed (review C, session 34).

Another process ran ``forget`` (which compacts: a new snapshot, the log shards it
covers removed) and then ``add``: a long-lived handle's refresh returned only the
forgotten id -- a scoped handle's nothing -- although its index then held the new
memory, and no later refresh told it. The handle caught up over the log before it
found it had to reload, and compared the reloaded index with the one it had caught
up. The writers here are real processes; every set is exact.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import md_cg
from md_cg import MdCG, Scope

SCOPE = Scope(agent="a1")
#: id -> agent_scope of the store every test starts from (None: shared)
BASE = {"a1x": "a1", "a2": "a1", "a3": "a1", "a4": "a1", "b1": "b", "b2": "b", "b3": "b", "s1": None}


def _store(root: Path) -> None:
    with MdCG(root, auto_compact=None) as s:
        for node_id, agent in BASE.items():
            s.add(id=node_id, layer="self", body=f"memory {node_id}", agent_scope=agent)
        s.compact_index()  # a snapshot: the handles below follow one written after it


def _other_process(root: Path, *steps: str) -> None:
    """Run ``steps`` (statements on the handle ``u``) in a new process, in order."""
    code = "import sys\nfrom md_cg import MdCG\nu = MdCG(sys.argv[1], auto_compact=None)\n"
    code += "".join(f"{step}\n" for step in steps) + "u.close()\n"
    env = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).parent.parent)}
    subprocess.run([sys.executable, "-c", code, str(root)], check=True, env=env, timeout=120)


def _add(node_id: str, agent: str | None) -> str:
    return f"u.add(id={node_id!r}, layer='self', body='new {node_id}', agent_scope={agent!r})"


FORGET_B1 = "u.forget('b1', 'no longer true', force=True)"
FORGET_A1X = "u.forget('a1x', 'no longer true', force=True)"
COMPACT = "u.compact_index()"
CHANGES = [  # after the compaction: adds, updates and deletes in both scopes and a shared one
    _add("r1", "a1"),
    _add("r2", "a1"),
    _add("r3", "b"),
    "u.update('a2', body='a2 changed')",
    "u.update('b2', body='b2 changed')",
    "u.update('s1', body='s1 changed')",
    "u.delete('a3', force=True)",
    "u.delete('b3', force=True)",
]
CHANGED = {"r1", "r2", "r3", "a2", "b2", "s1", "a3", "b3"}
CHANGED_A1 = {"r1", "r2", "a2", "s1", "a3"}  # a3: deleted, and the scope saw it before

#: name -> (steps of the other process, ids an unscoped refresh tells, ids a1's refresh tells)
CASES = {
    "forget_then_add": ([FORGET_B1, _add("p1", "a1")], {"b1", "p1"}, {"p1"}),
    "forget_own_then_add": ([FORGET_A1X, _add("p1", "a1")], {"a1x", "p1"}, {"a1x", "p1"}),
    "add_then_forget": ([_add("p1", "a1"), FORGET_B1], {"b1", "p1"}, {"p1"}),
    "forget_then_adds_both_scopes": (
        [FORGET_B1, _add("p1", "a1"), _add("p2", "b"), _add("p3", None), FORGET_A1X, _add("p4", "a1")],
        {"b1", "p1", "p2", "p3", "a1x", "p4"},
        {"p1", "p3", "a1x", "p4"},
    ),
    "compact_then_changes": ([COMPACT, *CHANGES], CHANGED, CHANGED_A1),
    "adds_compact_then_changes": (
        [_add("q1", "a1"), _add("q2", "b"), COMPACT, *CHANGES],
        CHANGED | {"q1", "q2"},
        CHANGED_A1 | {"q1"},
    ),
    "changes_then_compact": ([*CHANGES, COMPACT], CHANGED, CHANGED_A1),
    "moved_out_of_scope_after_forget": (  # a1 no longer sees a4: not named to it, as a sync does
        [FORGET_B1, "u.update('a4', agent_scope='b')", _add("p1", "a1")],
        {"b1", "a4", "p1"},
        {"p1"},
    ),
}


def _expected_ids(steps: list[str]) -> set[str]:
    """The ids the store holds after ``steps`` (as the cases above change it)."""
    held = set(BASE)
    for step in steps:
        for word in ("u.add(id='", "u.forget('", "u.delete('"):
            if step.startswith(word):
                node_id = step[len(word) :].split("'")[0]
                (held.add if word == "u.add(id='" else held.discard)(node_id)
    return held


@pytest.mark.parametrize("interval", [0, None])
@pytest.mark.parametrize("scoped", [False, True], ids=["unscoped", "scoped"])
@pytest.mark.parametrize("case", list(CASES))
def test_refresh_tells_every_change_of_another_process(
    tmp_path: Path, case: str, scoped: bool, interval: float | None
) -> None:
    steps, told, told_a1 = CASES[case]
    _store(tmp_path)
    with MdCG(tmp_path, refresh_interval=interval, scope=SCOPE if scoped else None) as s:
        assert sorted(s.ids()) == sorted(i for i, a in BASE.items() if not scoped or a in ("a1", None))
        _other_process(tmp_path, *steps)
        assert sorted(s.refresh()) == sorted(told_a1 if scoped else told)
        assert s.refresh() == []  # told once
        with MdCG(tmp_path) as fresh:
            held = {e.id: e.agent_scope for e in fresh.entries()}
        assert set(held) == _expected_ids(steps)
        assert sorted(s.ids()) == sorted(i for i, a in held.items() if not scoped or a in ("a1", None))


def test_forget_then_add_is_told_to_a_handle_that_reads_in_between(tmp_path: Path) -> None:
    """Two rounds: the first refresh tells the forget and the add, the second the next add."""
    _store(tmp_path)
    with MdCG(tmp_path, refresh_interval=None) as s:
        _other_process(tmp_path, FORGET_B1, _add("p1", "a1"))
        assert sorted(s.refresh()) == ["b1", "p1"]
        assert s.get("p1").body == "new p1" and "b1" not in s
        _other_process(tmp_path, _add("p2", "a1"), FORGET_A1X, _add("p3", "b"))
        assert sorted(s.refresh()) == ["a1x", "p2", "p3"]
        assert s.refresh() == []
        assert sorted(s.ids()) == ["a2", "a3", "a4", "b2", "b3", "p1", "p2", "p3", "s1"]


def test_scoped_refresh_names_a_deletion_of_its_own_memory(tmp_path: Path) -> None:
    """Without any compaction too: a memory of the scope deleted by another process is told
    (the scope saw it before the call); another scope's deletion is not."""
    _store(tmp_path)
    with MdCG(tmp_path, refresh_interval=None, scope=SCOPE) as s:
        _other_process(tmp_path, "u.delete('a3', force=True)", "u.delete('b3', force=True)", _add("p1", "a1"))
        assert sorted(s.refresh()) == ["a3", "p1"]
        assert s.refresh() == []
