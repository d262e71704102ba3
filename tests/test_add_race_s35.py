"""An ``add`` of an id other processes create and forget through md-cg, and ``keep_items``
on a read-only handle (session 35, review rF).

Finding 1 (f_create_race.py, race.py): three memory-tool processes creating and deleting
``/memories/hot.md`` in a loop; about 3 creates in 450 failed with a raw
``NodeNotFoundError`` -- "no node with id 'hot' in this store (its file contextual/hot.md
was moved or deleted outside md-cg since the last sync; run `mdcg sync` ...)" -- although
only md-cg had touched the file. A ``forget`` compacts: the snapshot it writes covers its
``del`` line and its log shard is removed. A process that had not read that line yet, but
read the ``put`` before it (another process's create), found the file gone, noted it gone
by hand, and refused every add of the id until a sync. Now the add checks such a note
against the store as md-cg keeps it (the snapshot and the log after it): the id is free,
the note is dropped and the add goes ahead. A file removed by hand still refuses the add.

Finding 2 (f_ro_keep_items.py): ``MdCGStore(MdCG(root, read_only=True)).keep_items()``
created ``.mdcg/langgraph/<pid>_<hex>.jsonl``; now it writes nothing, as the memory
tool's ``keep_files`` writes nothing on a read-only handle."""

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
from md_cg import MdCG
from md_cg.errors import NodeNotFoundError, ReadOnlyStoreError

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}

HOT = "contextual/hot.md"
#: The refusal of an add of ``hot`` whose file a person removed (until a sync).
LOST_HOT = (
    "no node with id 'hot' in this store (its file contextual/hot.md was moved or deleted "
    "outside md-cg since the last sync; run `mdcg sync` (MdCG.sync()) to take that in, "
    "then try again)"
)

#: Holds ``hot`` added (its ``put`` line in its own shard) until a line on its standard input.
_ADDER = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1]) as m:
    m.add(id="hot", body="hot by the adder", layer="contextual", created_at=1700000001)
    print("added", flush=True)
    sys.stdin.readline()
"""

#: Forgets ``hot`` (the forget compacts: its shard, with the ``del`` line, is removed).
_FORGETTER = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1]) as m:
    m.forget("hot", "done with it")
"""


def start_adder(root: Path) -> subprocess.Popen[str]:
    """The :data:`_ADDER` process on ``root`` (its stdout to read "added", stdin to let it go)."""
    return subprocess.Popen(
        [sys.executable, "-c", _ADDER, str(root)],
        env=_ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _md_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts)


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    with MdCG(root) as m:  # closing the new store writes its first snapshot
        m.add(id="seed", body="seed memory", layer="contextual")
    assert (root / ".mdcg/index.snapshot").exists()
    return root


def _run(code: str, root: Path) -> None:
    done = subprocess.run([sys.executable, "-c", code, str(root)], env=_ENV, capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")


def _hot_tombstones(root: Path) -> list[Any]:
    with MdCG(root, read_only=True) as m:
        return [t.get("created_at") for t in m.tombstones() if t["id"] == "hot"]


def test_add_after_another_process_created_then_a_third_forgot(tmp_path: Path) -> None:
    """The exact window: this handle has read neither line; another process adds ``hot``
    and stays open (its shard, with the ``put``, stays), a third forgets it (its shard,
    with the ``del``, is compacted away). The add follows the log: it reads the ``put``,
    finds the file gone, and never reads the ``del``. Before: NodeNotFoundError."""
    root = _store(tmp_path)
    with MdCG(root) as a:
        assert a.ids() == ["seed"]  # read before either write
        adder = start_adder(root)
        try:
            assert adder.stdout is not None and adder.stdout.readline() == "added\n"
            _run(_FORGETTER, root)
            assert _md_files(root) == ["contextual/seed.md"]
            node = a.add(id="hot", body="hot again", layer="contextual", created_at=1700000002)
        finally:
            adder.communicate("go\n", timeout=60)
        assert adder.returncode == 0
        assert (node.id, a.get("hot").body) == ("hot", "hot again")
        assert a.sync().deleted == ()  # nothing was noted as removed by hand
    assert _md_files(root) == ["contextual/hot.md", "contextual/seed.md"]
    assert _hot_tombstones(root) == [1700000001.0]
    with MdCG(root, read_only=True) as m:
        assert (m.ids(), m.get("hot").body) == (["hot", "seed"], "hot again")


@pytest.mark.parametrize("compacted", [False, True])
def test_a_file_removed_by_hand_still_refuses_the_add(tmp_path: Path, compacted: bool) -> None:
    """The same, but a person removes the file (no md-cg line deletes it); ``compacted``:
    a third process compacted before that, so the snapshot holds ``hot``. The store bears
    the note out, so the add is refused, naming the file, as before; after a sync it goes
    ahead."""
    root = _store(tmp_path)
    with MdCG(root, refresh_interval=None) as a:
        assert a.ids() == ["seed"]
        adder = start_adder(root)
        try:
            assert adder.stdout is not None and adder.stdout.readline() == "added\n"
            if compacted:
                _run("import sys\nfrom md_cg import MdCG\nMdCG(sys.argv[1]).compact_index()", root)
            (root / HOT).unlink()
            with pytest.raises(NodeNotFoundError) as err:
                a.add(id="hot", body="hot again", layer="contextual")
        finally:
            adder.communicate("go\n", timeout=60)
        assert (str(err.value), err.value.hidden) == (LOST_HOT, "lost")
        assert _md_files(root) == ["contextual/seed.md"]
        assert a.sync().deleted == ("hot",)
        a.add(id="hot", body="hot again", layer="contextual")
    assert _md_files(root) == ["contextual/hot.md", "contextual/seed.md"]
    assert _hot_tombstones(root) == []


#: Adds and forgets ``hot`` through the library until ``stop`` exists; one JSON line per
#: acknowledged write (``created_at`` unique per add) or unexpected error.
_LIB_RACER = """
import json, os, sys, time
from md_cg import MdCG
from md_cg.errors import DuplicateIdError, NodeNotFoundError
root, wid, go, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def err(what, e):
    print(json.dumps({"op": "err", "what": what, "type": type(e).__name__, "msg": str(e)}), flush=True)
with MdCG(root) as m:
    open(f"{go}-ready-{wid}", "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    i = 0
    while not os.path.exists(stop):
        i += 1
        at = 1700000000 + wid * 100000 + i
        try:
            m.add(id="hot", body=f"hot w{wid} {i}", layer="contextual", created_at=at)
            print(json.dumps({"op": "add", "at": at}), flush=True)
        except DuplicateIdError:
            pass
        except Exception as e:
            err("add", e)
        try:
            m.forget("hot", f"forgotten by w{wid}")
            print(json.dumps({"op": "forget"}), flush=True)
        except NodeNotFoundError as e:
            if str(e) != "no node with id 'hot' in this store":
                err("forget", e)
        except Exception as e:
            err("forget", e)
"""

#: The memory tool's create and delete of /memories/hot.md, as in the review's script.
_TOOL_RACER = """
import json, os, sys, time
from anthropic.types.beta import BetaMemoryTool20250818CreateCommand as C
from anthropic.types.beta import BetaMemoryTool20250818DeleteCommand as D
from md_cg.integrations.anthropic_memory import MdCGMemoryTool
root, wid, go, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
EXPECTED = (
    "File /memories/hot.md already exists",
    "File /memories/hot.md already exists (as /memories/contextual/hot.md: "
    "file names are unique in /memories)",
    "The path /memories/hot.md does not exist",
)
T = MdCGMemoryTool(root, scope=None)
open(f"{go}-ready-{wid}", "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
i = 0
while not os.path.exists(stop):
    i += 1
    create = C(command="create", path="/memories/hot.md", file_text=f"tool w{wid} {i}")
    delete = D(command="delete", path="/memories/hot.md")
    for op, cmd in (("create", lambda: T.create(create)), ("delete", lambda: T.delete(delete))):
        try:
            cmd()
            print(json.dumps({"op": op}), flush=True)
        except Exception as e:
            m = str(e)
            if type(e).__name__ != "ToolError" or m not in EXPECTED:
                print(json.dumps({"op": "err", "what": op, "type": type(e).__name__, "msg": m}), flush=True)
T.close()
"""


def _race(
    tmp_path: Path, racers: list[str], seconds: float, enough: dict[str, int]
) -> tuple[Path, list[dict[str, Any]]]:
    """Run ``racers`` for ``seconds``, then on until the acknowledged ops counted in
    ``enough`` (op -> least count) have run (at most 120 s more): a loaded machine runs
    fewer ops a second, and the test's bounds ask that both sides did run (session 40:
    a CI under load 15 made 17 creates in 4 s, and the bound of 20 failed)."""
    root = _store(tmp_path)
    go, stop = tmp_path / "go", tmp_path / "stop"
    outs = [tmp_path / f"out-{w}.jsonl" for w in range(len(racers))]
    procs = []
    for w, code in enumerate(racers):
        with outs[w].open("w") as out:  # the child holds its own descriptor
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", code, str(root), str(w), str(go), str(stop)],
                    env=_ENV,
                    stdout=out,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
    deadline = time.monotonic() + 60
    while not all(Path(f"{go}-ready-{w}").exists() for w in range(len(racers))):  # every process open
        assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
        time.sleep(0.01)
    go.touch()
    time.sleep(seconds)
    deadline = time.monotonic() + 120

    def counts() -> dict[str, int]:
        # complete lines only: a child may be writing its next one
        ops = [json.loads(line)["op"] for f in outs for line in f.read_text().split("\n")[:-1]]
        return {op: ops.count(op) for op in enough}

    while any(n < enough[op] for op, n in counts().items()) and time.monotonic() < deadline:
        assert all(p.poll() is None for p in procs)
        time.sleep(0.2)
    stop.touch()
    records = []
    for p, f in zip(procs, outs, strict=True):
        _, err = p.communicate(timeout=120)
        assert (p.returncode, err) == (0, "")
        records.extend(json.loads(line) for line in f.read_text().splitlines())
    return root, records


def test_processes_adding_and_forgetting_one_id_never_lose_an_add(tmp_path: Path) -> None:
    """Three processes add and forget ``hot`` through the library for 4 s: no add is
    refused but as taken (before: a NodeNotFoundError "moved or deleted outside md-cg" now
    and then), and every acknowledged add is either the file left or the memory a
    tombstone of an acknowledged forget names (exact sets of the unique ``created_at``)."""
    root, records = _race(tmp_path, [_LIB_RACER] * 3, 4.0, {"add": 21, "forget": 21})
    assert [r for r in records if r["op"] == "err"] == []
    added = sorted(r["at"] for r in records if r["op"] == "add")
    forgets = sum(1 for r in records if r["op"] == "forget")
    assert len(added) > 20 and forgets > 20  # both sides did run
    tombstoned = _hot_tombstones(root)
    assert len(tombstoned) == forgets
    with MdCG(root, read_only=True) as m:
        left = [m.get("hot").created_at] if "hot" in m.ids() else []
        assert m.ids() == sorted(["seed", *(["hot"] * len(left))])
    assert sorted([*tombstoned, *left]) == [float(a) for a in added]
    assert _md_files(root) == sorted(["contextual/seed.md", *([HOT] * len(left))])


def test_memory_tool_processes_creating_and_deleting_one_file(tmp_path: Path) -> None:
    """The review's case: three memory-tool processes create and delete
    ``/memories/hot.md`` for 4 s, a library process adding and forgetting it too. Every
    refusal is the tool's own ToolError ("already exists" / "does not exist"); creates and
    deletes alternate: acknowledged adds less forgets is 1 when the file is left, else 0,
    and the tombstones are exactly the acknowledged forgets."""
    root, records = _race(tmp_path, [_TOOL_RACER] * 3 + [_LIB_RACER], 4.0, {"create": 21})
    assert [r for r in records if r["op"] == "err"] == []
    # A create whose reply looks the memory up after another process forgot it answers as
    # written (session 36; before: a raw "no node" from the tool's ``where_id``).
    adds = sum(1 for r in records if r["op"] in ("add", "create"))
    forgets = sum(1 for r in records if r["op"] in ("forget", "delete"))
    assert sum(1 for r in records if r["op"] == "create") > 20
    assert len(_hot_tombstones(root)) == forgets
    left = [HOT] if (root / HOT).exists() else []
    assert adds - forgets == len(left)
    assert _md_files(root) == sorted(["contextual/seed.md", *left])


# -- keep_items on a read-only handle ------------------------------------------------------


def _tree(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every entry under ``root`` (``.mdcg/`` too): its bytes (None: a folder) and mtime."""
    out: dict[str, tuple[bytes | None, int]] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[p.relative_to(root).as_posix()] = (p.read_bytes() if p.is_file() else None, st.st_mtime_ns)
    return out


def _lg_store(tmp_path: Path, *, timed: bool) -> tuple[Path, str]:
    from md_cg.integrations.langgraph_store import MdCGStore

    root = tmp_path / "lg"
    with MdCG(root) as m:
        MdCGStore(m, upgrade=False).put(("a", "b"), "k", {"text": "call the bank tomorrow"})
        [node_id] = [i for i in m.ids()]
        if timed:  # as an earlier version left it: on a timer md-cg chose from its words
            m.update(node_id, retention_tier="temp", retention_reason="the one-off marker 'tomorrow'")
    assert not (root / ".mdcg/langgraph").exists()
    return root, node_id


def test_keep_items_on_a_read_only_handle_writes_nothing(tmp_path: Path) -> None:
    from md_cg.integrations.langgraph_store import MdCGStore

    root, _ = _lg_store(tmp_path, timed=False)
    before = _tree(root)
    with MdCG(root, read_only=True) as ro:
        assert MdCGStore(ro).keep_items() == []
    assert _tree(root) == before


def test_keep_items_with_an_item_to_change_on_a_read_only_handle(tmp_path: Path) -> None:
    """An item to make long-term: the store's read-only refusal, as for any write (and as
    ``keep_files`` gives), and nothing written."""
    from md_cg.integrations.langgraph_store import MdCGStore

    root, node_id = _lg_store(tmp_path, timed=True)
    before = _tree(root)
    with MdCG(root, read_only=True) as ro:
        with pytest.raises(ReadOnlyStoreError) as err:
            MdCGStore(ro).keep_items()
        assert ro.entry(node_id).retention_tier == "temp"
    assert str(err.value) == f"store {root} was opened read-only"
    assert _tree(root) == before
