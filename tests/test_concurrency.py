"""Many writer processes, a compactor, and writers killed with SIGKILL.

Everything here runs real processes and checks id sets, never counts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import MdCG, fsops, nodefile
from md_cg.maintenance import BUCKET_HEALTH_MIN_NODES

WRITER = r"""
import sys
from md_cg import MdCG, Node
root, rnd, proc, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with MdCG(root) as s:
    nodes = [
        Node(id=f"r{rnd}_p{proc}_{i:03d}", layer="knowledge",
             tags=[f"domain:d{(proc * 7 + i) % 40}"], body=f"round {rnd} proc {proc} node {i}")
        for i in range(n)
    ]
    if proc % 2 == 0:
        for node in nodes:
            s.add(node)
    else:
        for start in range(0, n, 25):
            s.add_many(nodes[start:start + 25])
"""

COMPACTOR = r"""
import os, sys, time
from md_cg import MdCG
root, stop = sys.argv[1], sys.argv[2]
runs = 0
with MdCG(root) as s:
    open(stop + ".started", "w").close()
    while not os.path.exists(stop):
        s.compact_index()
        runs += 1
        time.sleep(0.01)
    s.compact_index()
print(runs)
"""


def wait_for(flag: Path, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Wait until ``proc`` creates ``flag``; fail at once if it exited first."""
    deadline = time.monotonic() + timeout
    while not flag.exists():
        assert proc.poll() is None, f"the process ended (code {proc.returncode}) before {flag.name}"
        assert time.monotonic() < deadline, f"no {flag.name} after {timeout:.0f} s"
        time.sleep(0.01)


def ids_on_disk(root: Path) -> set[str]:
    found = set()
    for layer_dir in root.iterdir():
        if layer_dir.name.startswith("."):
            continue
        for path in layer_dir.rglob("*.md"):
            if not path.name.startswith("."):
                found.add(nodefile.read_node(path).id)
    return found


def test_eight_writers_five_rounds_with_a_compactor(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    env = python_env()
    written: set[str] = set()
    procs, per_proc = 8, 40  # the long run is bench/stress.py "writers"
    for rnd in range(5):
        stop = tmp_path / f"stop{rnd}"
        compactor = subprocess.Popen(
            [sys.executable, "-c", COMPACTOR, str(root), str(stop)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        wait_for(Path(f"{stop}.started"), compactor)  # a slow host: the writers could end first
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(root), str(rnd), str(p), str(per_proc)], env=env
            )
            for p in range(procs)
        ]
        for w in writers:
            assert w.wait(timeout=300) == 0
        stop.touch()
        out, _ = compactor.communicate(timeout=300)
        assert compactor.returncode == 0
        assert int(out.strip()) >= 1
        written |= {f"r{rnd}_p{p}_{i:03d}" for p in range(procs) for i in range(per_proc)}
        assert ids_on_disk(root) == written
        with MdCG(root) as fresh:
            assert set(fresh.ids()) == written
    with MdCG(root) as fresh:
        health = fresh.health()
        assert health.ok, health.findings[:5]
        assert health.nodes == 8 * 40 * 5


# -- SIGKILL -------------------------------------------------------------------

CHURN = r"""
import random, sys
from md_cg import MdCG, Node
root, seed, moves = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
rng = random.Random(seed)
with MdCG(root) as s:
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        op = rng.random()
        ids = s.ids()
        if op < 0.5 or not ids:
            s.add(Node(id=f"s{seed}_{i}", layer="knowledge", tags=[f"domain:d{i % 7}"],
                       body="x" * rng.randint(1, 3000)))
        elif op < 0.65:
            s.add_many([Node(id=f"s{seed}_{i}_{j}", layer="self", body="batch") for j in range(10)])
        elif op < 0.85:
            target = rng.choice(ids)
            if moves:
                s.update(target, layer=rng.choice(["knowledge", "contextual", "self", "rejected"]))
            else:
                s.update(target, body="edited " + "y" * rng.randint(1, 3000))
        else:
            s.delete(rng.choice(ids), force=True)
"""


def kill_rounds(tmp_path: Path, moves: bool, rounds: int) -> list[str]:
    root = tmp_path / "m"
    MdCG(root).close()
    env = python_env()
    rng = random.Random(1234 + moves)
    kinds_seen: list[str] = []
    for k in range(rounds):
        proc = subprocess.Popen(
            [sys.executable, "-c", CHURN, str(root), str(k), "1" if moves else "0"],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.01, 0.25))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # every .md on disk parses (read_node raises otherwise)
        on_disk = ids_on_disk(root)
        with MdCG(root) as fresh:
            assert set(fresh.ids()) == on_disk
            findings = fresh.health().findings
            kinds_seen += [f.kind for f in findings]
            # A kill leaves temp files and, after the commit was logged, an open
            # commit (and for a move, meanwhile, both copies); sync finishes it.
            allowed = {"temp_file", "open_commit", "duplicate_id"} if moves else {"temp_file", "open_commit"}
            assert {f.kind for f in findings} <= allowed, findings
            if k % 2:
                fresh.sync()
                assert fresh.health().ok
                assert set(fresh.ids()) == ids_on_disk(root)
            if k % 5 == 4:
                fresh.compact_index()
    return kinds_seen


def test_writer_killed_twenty_times_leaves_only_temp_files_and_open_commits(tmp_path: Path) -> None:
    kill_rounds(tmp_path, moves=False, rounds=20)


def test_mover_killed_twenty_times_never_loses_a_node(tmp_path: Path) -> None:
    kill_rounds(tmp_path, moves=True, rounds=20)


@pytest.mark.parametrize("stage", ["after_log", "after_new_file"])
def test_interrupted_move_keeps_the_node_in_one_place_at_least(tmp_path: Path, stage: str) -> None:
    """Simulate a failure inside a move at each step; the node survives and the move finishes."""
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:  # (a compaction on close would finish it at once)
        s.add(nodefile.loads('---\nid: "x"\nlayer: "knowledge"\n---\nbody\n'))
        old_path = s.entry("x").path
        real_replace = os.replace

        class Crash(Exception):
            pass

        def crashing_replace(src, dst, **kw):  # type: ignore[no-untyped-def]
            if stage == "after_new_file":
                real_replace(src, dst, **kw)
            raise Crash

        real_new = fsops.Dir.rename_new

        def crashing_new(self, src, dst):  # type: ignore[no-untyped-def]
            if stage == "after_new_file":  # (a move's new path: renamed in only while empty, session 43)
                real_new(self, src, dst)
            raise Crash

        os.replace = crashing_replace  # type: ignore[assignment]
        fsops.Dir.rename_new = crashing_new  # type: ignore[method-assign]
        try:
            with pytest.raises(Crash):
                s.update("x", layer="contextual")
        finally:
            os.replace = real_replace
            fsops.Dir.rename_new = real_new  # type: ignore[method-assign]
    with MdCG(root) as fresh:
        meanwhile = "contextual/x.md" if stage == "after_new_file" else old_path
        assert fresh.entry("x").path == meanwhile
        assert fresh.get("x").id == "x"
        # The move was logged before it failed: sync finishes it (all or nothing).
        assert fresh.sync().recovered == 1
        assert fresh.health().ok
        assert fresh.entry("x").path == "contextual/x.md"
        assert [p.relative_to(root).as_posix() for p in root.rglob("x.md") if ".mdcg" not in p.parts] == [
            "contextual/x.md"
        ]


# -- renames racing ------------------------------------------------------------------------------

RENAMER = r"""
import json, os, sys, time
from md_cg import MdCG
from md_cg.errors import NodeNotFoundError
root, me, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
won = []
other = {"a": "b", "b": "a"}.get(me, "")


def wait(who, r):  # until `who` has tried x{r}; a starved process must not lose every race
    deadline = time.time() + 120
    while not os.path.exists(f"{go}.{who}.{r}"):
        if time.time() > deadline:
            sys.exit(f"{me}: {who} never tried x{r}")
        time.sleep(0.001)


with MdCG(root, auto_compact=None) as s:
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    for r in range(n):
        if me == "edit":  # edits the linkers the others' renames re-point meanwhile
            s.update(f"l{r}", body=f"edited linker {r}")
            continue
        if r % 10 == 0:  # blocks of ten: neither runs a block ahead, and the
            if r:  # block's leader (a, b, a, ...) tries its first id first
                wait(other, r - 1)
            if "ab"[r // 10 % 2] != me:
                wait(other, r)
        try:
            s.rename(f"x{r}", f"x{r}_by_{me}")
            won.append(r)
        except NodeNotFoundError:
            pass
        open(f"{go}.{me}.{r}", "w").close()
print(json.dumps(won))
"""


def test_processes_racing_to_rename_the_same_ids(tmp_path: Path) -> None:
    """Two processes rename the same 150 ids while a third edits the nodes linking to them:
    each id is renamed exactly once, by the process that says so; every linker keeps its
    edit and points at the new id; nothing else is on disk."""
    from md_cg import Edge

    root, n = tmp_path / "m", 150
    with MdCG(root) as s:
        for r in range(n):
            s.add(id=f"x{r}", layer="contextual", body=f"target {r}")
            s.add(id=f"l{r}", layer="self", body=f"linker {r}", edges=[Edge(f"x{r}", "similar")])
    env = python_env()
    go = tmp_path / "go"
    procs = {
        me: subprocess.Popen(
            [sys.executable, "-c", RENAMER, str(root), me, str(n), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for me in ("a", "b", "edit")
    }
    for p in procs.values():  # all three open, then start together
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    go.touch()
    won = {me: json.loads(p.communicate(timeout=300)[0]) for me, p in procs.items()}
    assert not won["edit"], won
    leaders = {r: "ab"[r // 10 % 2] for r in range(0, n, 10)}  # they did race
    assert all(r in won[me] for r, me in leaders.items()), won
    assert all(p.returncode == 0 for p in procs.values())
    winner = {r: me for me, rs in won.items() for r in rs}
    assert sorted(winner) == list(range(n)) and sum(map(len, won.values())) == n
    expected = {f"x{r}_by_{winner[r]}" for r in range(n)} | {f"l{r}" for r in range(n)}
    assert ids_on_disk(root) == expected
    with MdCG(root) as s:
        assert set(s.ids()) == expected
        for r in range(n):
            linker = s.get(f"l{r}")
            assert linker.body == f"edited linker {r}"
            assert linker.edges == [Edge(f"x{r}_by_{winner[r]}", "similar")]
        assert s.health().ok


_FOLDER_RACE = """
import sys, time, traceback
from md_cg import MdCG
from md_cg.errors import MdcgError
root, role, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
stop = time.time() + seconds
done, foreign = [], []
with MdCG(root) as s:
    n = 0
    while time.time() < stop or n < 60:  # a slow machine still runs enough rounds for the check
        n += 1
        i = f"{role}{n}"
        try:
            if role == "a":  # empties a bucket folder and an archive folder again and again
                s.add(id=i, body="x", tags=["domain:fruit"])
                s.archive([i])
                s.forget(i, "r")
            else:  # writes into the same folders meanwhile
                s.add(id=i, body="y", tags=["domain:fruit"])
                s.archive([i])
                s.unarchive([i])
                if n % 2:
                    s.delete(i)
            done.append(i)
        except MdcgError as exc:
            foreign.append(f"md-cg {type(exc).__name__}: {exc}")
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1].name
            foreign.append(f"{type(exc).__name__}: {exc} @ {where}")
print(repr((done, foreign)))
"""


def test_writers_into_a_folder_another_process_empties_and_removes(tmp_path: Path) -> None:
    """A forget or a move removes a bucket or archive folder once it is empty; a writer that
    had just opened that folder failed with a raw FileNotFoundError (3 of 1,837 adds, 124 of
    6,131 archive rounds in a reviewer's run). The folder is made again now: every round of
    both processes completes, and the store holds exactly the ids the writer kept."""
    import ast

    root = tmp_path / "m"
    MdCG(root).close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _FOLDER_RACE, str(root), role, "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=python_env(),
        )
        for role in ("a", "b")
    ]
    results = {}
    for role, p in zip(("a", "b"), procs, strict=True):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results[role] = ast.literal_eval(out)
    for role, (done, foreign) in results.items():
        assert foreign == [] and len(done) > 50, (role, foreign[:5], len(done))
    kept = {i for i in results["b"][0] if int(i[1:]) % 2 == 0}
    with MdCG(root) as s:
        assert set(s.ids(include_archived=True)) == kept
        # one bucket is degraded by design, reported from BUCKET_HEALTH_MIN_NODES notes on: a
        # slow machine's run keeps fewer (CI, session 26: the finding was missing, nothing else)
        degraded = ["bucket_degraded"] if len(kept) >= BUCKET_HEALTH_MIN_NODES else []
        assert [f.kind for f in s.health(deep=True).findings] == degraded
