"""A pick-up (``sync_if_changed``) tells a case or Unicode twin made by hand as ``sync()``.

Review rC of session 34: ``contextual/alpha-note.md`` dropped beside the stored
``Alpha-Note`` was told ``{'added': ('alpha-note',)}`` by the pick-up, where a sync of the
same state told ``twins: [['Alpha-Note', 'alpha-note']]`` too; a scoped handle's pick-up
answered None where the sync counted it in ``withheld``. So the MCP server, which runs the
pick-up before every tool call, never heard of the twin. And a scoped ``health()`` counted
the pair as two file problems where a scoped ``sync()`` counted one twin.

Each case runs in a child process (with inotify, and without: ``md_cg.watch._libc``
patched to return None, so every pick-up is a stat scan) and compares the pick-up's
report with a fresh ``sync()``'s on a copy of the store in the same state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import md_cg
from md_cg import MdCG, Scope

_CHILD = r"""
import json, os, shutil, sys, warnings
warnings.simplefilter("ignore")
root, watch, scoped, steps = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", json.loads(sys.argv[4])
if not watch:
    import md_cg.watch
    md_cg.watch._libc = lambda: None  # as on a platform without inotify: stat scans
from md_cg import MdCG, Scope
from md_cg.errors import IdCollisionError

scope = Scope(agent="a1") if scoped else None
plain = lambda r: None if r is None else r.to_dict()
with MdCG(root) as u:
    for node_id, agent in steps["stored"]:
        u.add(id=node_id, body=f"stored {node_id}", agent_scope=agent)
s = MdCG(root, scope=scope, refresh_interval=0)
out = {"first": plain(s.sync_if_changed(min_interval=0)), "steps": []}
for step in steps["then"]:
    kind, arg = step
    if kind == "write":  # a file made by hand
        rel, node_id, agent = arg
        with open(os.path.join(root, rel), "w", encoding="utf-8") as fh:
            fh.write(f'---\nid: "{node_id}"\nagent_scope: "{agent}"\n---\nhand {node_id}\n')
    elif kind == "rm":
        os.remove(os.path.join(root, arg))
    elif kind == "add":  # another process's add
        import subprocess
        code = (
            "import sys; from md_cg import MdCG\n"
            "from md_cg.errors import IdCollisionError\n"
            "with MdCG(sys.argv[1]) as o:\n"
            "    try:\n"
            "        o.add(id=sys.argv[2], body='by another process', agent_scope='a3'); print('added')\n"
            "    except IdCollisionError as e:\n"
            "        print(str(e))\n"
        )
        got = subprocess.run(
            [sys.executable, "-c", code, root, arg], capture_output=True, text=True, check=True
        )
        out.setdefault("add", []).append(got.stdout.strip())
    copy = root + f"-copy{len(out['steps'])}"
    shutil.copytree(root, copy)
    # the copy's snapshot stamped as its own (session 38: a copy's is not used when a file
    # differs from it), so that its sync tells what a sync of this store would
    from md_cg import snapshot as _snapshot
    _head, _ident = _snapshot.read_header(copy), _snapshot.identity(copy)
    with open(os.path.join(copy, ".mdcg", "index.token"), "w", encoding="ascii") as fh:
        fh.write(f"{_head.token} {_ident[0]}:{_ident[1]}:{_ident[2]}")
    with MdCG(copy, scope=scope, refresh_interval=0) as c:
        fresh = c.sync()
    picked = s.sync_if_changed(min_interval=0)
    with MdCG(root) as v:
        held = sorted(v.ids())
    out["steps"].append({
        "fresh": fresh.to_dict(), "fresh_clean": fresh.clean and not fresh.conflicts,
        "picked": plain(picked), "again": plain(s.sync_if_changed(min_interval=0)),
        "view": sorted(s.ids()), "held": held,
        "health": sorted((f.kind, f.detail, f.node_id) for f in s.health().findings),
        "sync": s.sync().to_dict(),
    })
s.close()
print(json.dumps(out))
"""

NFC, NFD = "Caf\u00e9", "Cafe\u0301"


def _run(root: Path, *, watch: bool, scoped: bool, stored: list[Any], then: list[Any]) -> dict[str, Any]:
    steps = json.dumps({"stored": stored, "then": then})
    env = dict(os.environ, PYTHONPATH=str(Path(md_cg.__file__).resolve().parents[1]))  # the code under test
    got = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), "1" if watch else "0", "1" if scoped else "0", steps],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def _told(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The fields of a report that say something (the empty ones left out)."""
    if report is None:
        return None
    return {k: v for k, v in report.items() if v not in ((), [], 0, None, False)}


def _same_as_fresh(step: dict[str, Any]) -> None:
    """The pick-up's report is the fresh sync's (None where that one tells nothing)."""
    if step["fresh_clean"]:
        assert step["picked"] is None
    else:
        assert step["picked"] == step["fresh"]


WATCH = pytest.mark.parametrize("watch", [True, False], ids=["inotify", "stat-scan"])
TWIN_FILE = ["write", ["contextual/alpha-note.md", "alpha-note", "a3"]]
TWIN_DETAIL = "differs from {} only by case or Unicode normalisation: one file on macOS/Windows; rename one"


@WATCH
def test_a_hand_made_twin_is_told_twins_by_the_pick_up(tmp_path: Path, watch: bool) -> None:
    out = _run(
        tmp_path / "m",
        watch=watch,
        scoped=False,
        stored=[["Alpha-Note", "a2"], ["mine", "a1"]],
        then=[TWIN_FILE, ["rm", "contextual/alpha-note.md"]],
    )
    assert out["first"] is None
    made, removed = out["steps"]
    _same_as_fresh(made)
    assert _told(made["picked"]) == {"added": ["alpha-note"], "twins": [["Alpha-Note", "alpha-note"]]}
    assert made["again"] is None  # told once, at the pick-up that read it
    assert (
        made["view"] == made["held"] == ["Alpha-Note", "alpha-note", "mine"]
    )  # both held, as sync holds them
    assert _told(made["sync"]) == {"twins": [["Alpha-Note", "alpha-note"]]}
    assert [h for h in made["health"] if h[0] == "twin_id"] == [
        ["twin_id", TWIN_DETAIL.format("'Alpha-Note'"), "alpha-note"],
        ["twin_id", TWIN_DETAIL.format("'alpha-note'"), "Alpha-Note"],
    ]
    # removed by hand: deleted, and no twin told any more
    _same_as_fresh(removed)
    assert _told(removed["picked"]) == {"deleted": ["alpha-note"]}
    assert removed["again"] is None
    assert removed["view"] == removed["held"] == ["Alpha-Note", "mine"]
    assert _told(removed["sync"]) == {}


@WATCH
def test_a_scoped_pick_up_counts_the_twin_as_sync_and_health_do(tmp_path: Path, watch: bool) -> None:
    out = _run(
        tmp_path / "m",
        watch=watch,
        scoped=True,
        stored=[["Alpha-Note", "a2"], ["mine", "a1"]],
        then=[TWIN_FILE, ["rm", "contextual/alpha-note.md"]],
    )
    made, removed = out["steps"]
    _same_as_fresh(made)
    # each twin id counted, as health counts its twin_id findings (docs/api.md, scope)
    assert _told(made["picked"]) == {"withheld": 2}
    assert made["again"] is None
    # agent a3's file is logged untold by a1's pick-up (session 40): a process opening
    # after holds it, and a sync of a3's scope tells it
    assert made["view"] == ["mine"] and made["held"] == ["Alpha-Note", "alpha-note", "mine"]
    assert _told(made["sync"]) == {"withheld": 2}
    assert made["health"] == [
        ["withheld", "2 file problem(s) not named to this scope: run `mdcg health` without a scope", None]
    ]
    _same_as_fresh(removed)
    assert removed["picked"] is None  # another scope's file went: nothing to tell
    assert removed["held"] == ["Alpha-Note", "mine"]
    assert _told(removed["sync"]) == {} and removed["health"] == []


@WATCH
def test_the_original_added_by_hand_after_its_twin(tmp_path: Path, watch: bool) -> None:
    out = _run(
        tmp_path / "m",
        watch=watch,
        scoped=False,
        stored=[["mine", "a1"]],
        then=[TWIN_FILE, ["write", ["contextual/Alpha-Note.md", "Alpha-Note", "a2"]]],
    )
    twin, original = out["steps"]
    _same_as_fresh(twin)
    assert _told(twin["picked"]) == {"added": ["alpha-note"]}
    _same_as_fresh(original)
    assert _told(original["picked"]) == {
        "added": ["Alpha-Note"],
        "twins": [["Alpha-Note", "alpha-note"]],
    }
    assert original["again"] is None
    assert original["view"] == original["held"] == ["Alpha-Note", "alpha-note", "mine"]


@WATCH
def test_an_nfd_twin_of_an_nfc_id(tmp_path: Path, watch: bool) -> None:
    out = _run(
        tmp_path / "m",
        watch=watch,
        scoped=False,
        stored=[[NFC, None]],
        then=[["write", [f"contextual/{NFD}.md", NFD, "a3"]]],
    )
    (made,) = out["steps"]
    _same_as_fresh(made)
    assert _told(made["picked"]) == {"added": [NFD], "twins": [[NFD, NFC]]}
    assert made["view"] == made["held"] == [NFD, NFC]


@WATCH
def test_another_process_add_of_a_twin_is_refused_and_nothing_is_told(tmp_path: Path, watch: bool) -> None:
    out = _run(
        tmp_path / "m",
        watch=watch,
        scoped=False,
        stored=[["Alpha-Note", "a2"], ["mine", "a1"]],
        then=[["add", "alpha-note"]],
    )
    assert out["add"] == [
        "node id 'alpha-note' collides with the existing id 'Alpha-Note' (knowledge/orphan/Alpha-Note.md): "
        "ids that differ only by letter case or Unicode normalisation are the same file on macOS and "
        "Windows; choose another id or change the existing node"
    ]
    (step,) = out["steps"]
    _same_as_fresh(step)
    assert step["picked"] is None and step["fresh_clean"]
    assert step["view"] == step["held"] == ["Alpha-Note", "mine"]


def test_scoped_sync_counts_each_twin_id_in_process(tmp_path: Path) -> None:
    """The count without the pick-up: a scoped ``sync()`` of one twin pair (session 33: 1,
    where the scoped ``health()`` said "2 file problem(s)")."""
    root = tmp_path / "m"
    with MdCG(root) as u:
        u.add(id="Alpha-Note", body="alpha", agent_scope="a2")
    (root / "contextual").mkdir(exist_ok=True)
    (root / "contextual" / "alpha-note.md").write_text('---\nid: "alpha-note"\nagent_scope: "a3"\n---\nx\n')
    with MdCG(root, scope=Scope(agent="a1")) as s:
        assert (s.sync().withheld, s.sync().twins) == (2, ())
        assert [f.detail for f in s.health().findings] == [
            "2 file problem(s) not named to this scope: run `mdcg health` without a scope"
        ]
