"""Another scope's hand change a scoped sync finds: told to its owner's scope once, and
to the scoped handle not at all (session 40).

Session 39 (a56fc3d) left such changes out of the scoped sync's line, for the owner's
own sync to find by its look. Two things broke:

* a memory of agent b renamed in another clone and pulled by git: after agent a's sync,
  a fresh process of b held the old id as before (its file gone) and knew nothing of
  the new one, so ``departure(old)`` was None (tests/test_git_hints_s29.py);
* after a's process compacted (the snapshot keeps a ``gone`` note of b's removed
  memory), every fresh process of b was told ``deleted`` again: a scoped sync logged no
  line for the notes it told (attack atk8 of session 39, finding 1).

Now the scoped sync's line takes the change into every index and lists it as untold
(``journal.UNTOLD``); each process following it notes it for a sync of a scope that
admits the memory, and that sync logs what it tells, once. Every handle here but the
setup is a process of its own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import python_env

from md_cg import MdCG

A, B = {"agent_scope": "a"}, {"agent_scope": "b"}
#: a process of its own (scope argv[2], "-": none) running the steps argv[3] (JSON list)
STEPS = """
import sys, json, dataclasses
from md_cg import MdCG, Scope
from md_cg.errors import NodeNotFoundError
from md_cg.store import with_departure

def report(r):
    return {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}

scope = None if sys.argv[2] == "-" else Scope(agent=sys.argv[2])
out = []
with MdCG(sys.argv[1], scope=scope) as h:
    for step in json.loads(sys.argv[3]):
        op, _, arg = step.partition(":")
        if op == "sync":
            out.append(report(h.sync()))
        elif op == "compact":
            h.compact_index()
            out.append(None)
        elif op == "departure":
            d = h.departure(arg)
            out.append(None if d is None else [d.id, d.event, d.time, d.to, d.current, d.then])
        elif op == "get":
            try:
                out.append(h.get(arg).id)
            except NodeNotFoundError as exc:
                out.append(str(with_departure(h, exc)))
        elif op == "ids":
            out.append(h.ids())
        elif op == "search":
            out.append(sorted(r.id for r in h.search(arg, record=False)[0]))
print(json.dumps(out, default=list))
"""


def _in_process(root: Path, scope: str, *steps: str) -> list[Any]:
    argv = [sys.executable, "-c", STEPS, str(root), scope, json.dumps(steps)]
    done = subprocess.run(argv, capture_output=True, text=True, env=python_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def _told(report: dict[str, Any]) -> dict[str, Any]:
    """The lists of a sync report that tell hand changes (moved as [id, old, new])."""
    return {k: report[k] for k in ("added", "changed", "deleted", "moved") if report[k]}


def _strings(value: Any) -> set[str]:
    """Every string inside ``value`` (a reply decoded from JSON)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


def _store(root: Path) -> None:
    with MdCG(root, create=True) as s:
        s.add(id="a1", layer="contextual", body="memory a1 about okapis", **A)
        s.add(id="b1", layer="contextual", body="memory b1 about okapis", **B)
        s.add(id="secret", layer="contextual", body="agent b's note about okapis", **B)


def _pull_a_rename(root: Path, tmp: Path) -> None:
    """What a ``git pull`` of agent b's rename of ``secret`` to ``hidden_note`` made in
    another clone does to ``root``: the old file gone, the new one (``renamed_from:
    [secret]``) there; and a person removes b1."""
    clone = tmp / "clone"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns(".mdcg"))
    with MdCG(clone) as other:
        other.rename("secret", "hidden_note")
    new = clone / "contextual" / "hidden_note.md"
    assert "renamed_from" in new.read_text()
    shutil.copy2(new, root / "contextual" / "hidden_note.md")
    (root / "contextual" / "secret.md").unlink()
    (root / "contextual" / "b1.md").unlink()


RENAMED = ["secret", "renamed", None, "hidden_note", "hidden_note", None]
B_TOLD = {"added": ["hidden_note"], "deleted": ["b1", "secret"]}
GONE_TOLD = {"deleted": ["b1", "secret"]}


def test_the_owner_scope_is_told_once_and_finds_the_rename(tmp_path: Path) -> None:
    """a's process syncs after the pull; then fresh processes of b, one after another:
    each finds where ``secret`` went, before its sync too; the first sync tells the rename
    and b1's removal, the later ones (and an unscoped one) nothing."""
    root = tmp_path / "m"
    _store(root)
    _pull_a_rename(root, tmp_path)
    (a_sync,) = _in_process(root, "a", "sync")
    assert _told(a_sync) == {}
    first = _in_process(root, "b", "departure:secret", "sync", "departure:secret")
    assert (first[0], _told(first[1]), first[2]) == (RENAMED, B_TOLD, RENAMED)
    for _ in range(3):
        again = _in_process(root, "b", "departure:secret", "sync")
        assert (again[0], _told(again[1])) == (RENAMED, {})
    assert _told(_in_process(root, "-", "sync")[0]) == {}
    assert _in_process(root, "-", "departure:secret") == [RENAMED]


def test_after_a_scoped_compaction_the_owner_is_told_once(tmp_path: Path) -> None:
    """atk8 F1: a's process syncs and compacts (its snapshot keeps the ``gone`` note of
    b1); three fresh processes of b sync one after another: the first is told b1
    ``deleted`` (and ``secret``), the next ones nothing (before: each was told b1).
    ``hidden_note`` is in a's snapshot as a took it in: not told as added (a snapshot
    keeps ``gone`` notes only; docs/reliability.md, Known limits), found by departure."""
    root = tmp_path / "m"
    _store(root)
    _pull_a_rename(root, tmp_path)
    a_sync, _ = _in_process(root, "a", "sync", "compact")
    assert _told(a_sync) == {}
    told = [_told(_in_process(root, "b", "sync")[0]) for _ in range(3)]
    assert told == [GONE_TOLD, {}, {}]
    assert _told(_in_process(root, "-", "sync")[0]) == {}
    assert _in_process(root, "b", "departure:secret") == [RENAMED]


def test_a_compaction_after_the_owners_sync_keeps_it_told(tmp_path: Path) -> None:
    """b's process tells the changes, an unscoped one compacts, fresh b processes after
    it are told nothing."""
    root = tmp_path / "m"
    _store(root)
    _pull_a_rename(root, tmp_path)
    _in_process(root, "a", "sync", "compact")
    assert _told(_in_process(root, "b", "sync")[0]) == GONE_TOLD
    _in_process(root, "-", "compact")
    assert [_told(_in_process(root, "b", "sync")[0]) for _ in range(2)] == [{}, {}]


OTHERS = {"b1", "secret", "hidden_note"}


def test_the_scoped_handle_learns_nothing_of_the_other_scopes_memories(tmp_path: Path) -> None:
    """Every reply a's processes give -- sync reports (before and after b's sync), ids,
    search, departure and the "no node" errors of b's ids -- names none of b's ids."""
    root = tmp_path / "m"
    _store(root)
    _pull_a_rename(root, tmp_path)
    steps = (
        "sync",
        "ids",
        "search:okapis",
        "departure:secret",
        "departure:b1",
        "get:secret",
        "get:hidden_note",
    )
    replies = _in_process(root, "a", *steps, "sync")
    assert replies[1:7] == [
        ["a1"],
        ["a1"],
        None,
        None,
        "no node with id 'secret' in this store",
        "no node with id 'hidden_note' in this store",
    ]
    assert _told(replies[0]) == {} and _told(replies[7]) == {}
    _names_none(replies)
    fresh = _in_process(root, "a", *steps)
    assert fresh[1:] == replies[1:7]
    _names_none(fresh)
    assert _told(_in_process(root, "b", "sync")[0]) == B_TOLD
    after = _in_process(root, "a", *steps)
    assert after[1:] == replies[1:7]
    _names_none(after)


def _names_none(replies: list[Any]) -> None:
    """No string of ``replies`` names one of b's ids (but the errors of a's ``get`` of
    them, which repeat the id asked for: compared whole above)."""
    strings = _strings([r for r in replies if not (isinstance(r, str) and r.startswith("no node with id"))])
    assert {i for i in OTHERS if any(i in text for text in strings)} == set()
