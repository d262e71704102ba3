"""Stress and adversarial runs of the engine: real processes, SIGKILL, crafted files.

    python bench/stress.py [--quick] [--only NAME[,NAME...]] [--work DIR] [--out FILE]

Runs the long versions of the reliability tests (``tests/test_reliability.py``
and its siblings run the short ones through the same functions) and prints one
table:

* ``writers`` -- 8 processes x 500 operations x 10 rounds of adds, overwrites,
  updates and batches on ids of their own, with a compactor running;
* ``same-id race`` -- 8 processes adding and overwriting the same 50 ids for
  10 rounds (:func:`same_id_race`);
* ``sigkill <path>`` -- random SIGKILLs of a process busy on one write path
  (add, add_many, update/move, delete, forget), on maintenance (compact,
  rebuild, sync, access fold) or on a migration (:func:`kill_rounds`);
* ``fault <step>`` -- an ``add_many`` of 200 nodes killed at every step of the
  commit protocol (:func:`batch_fault`);
* ``scan races``, ``maintenance waits``, ``confinement``, ``symlinks``,
  ``forget scrub`` and ``bad input`` (>= 40 kinds through files, the API, the
  ``mdcg`` CLI, MCP and sqlite).

Columns: operations, lost (an acknowledged write not on disk), extra (a
node on disk nobody acknowledged or tried), corrupt (an unreadable file, an
id in two files, part of a batch), outside (bytes or mtimes changed outside
the store root), errors (an unexpected exception or a wrong outcome) and
seconds. Every scenario ends with ``health(deep=True)``; a finding left after
``sync()`` counts as an error. Expect 0 in every count column.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from md_cg import MdCG, Node, nodefile
from md_cg.errors import DuplicateIdError, MdcgError

REPO = Path(__file__).resolve().parent.parent
LAYER_DIRS = ("anchor", "knowledge", "self", "contextual", "structural", "rejected", "unresolved")
#: Finding kinds that are facts about a healthy store, not damage.
BENIGN = frozenset({"dangling_edge", "bucket_degraded", "misplaced_file"})


@dataclass
class Row:
    """One line of the table."""

    scenario: str
    operations: int = 0
    lost: int = 0
    extra: int = 0
    corrupt: int = 0
    outside: int = 0
    errors: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def add(self, other: Row) -> None:
        for name in ("operations", "lost", "extra", "corrupt", "outside", "errors"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.notes += other.notes


# -- processes ------------------------------------------------------------------------


def fork(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Run ``fn(*args, **kwargs)`` in a forked child; its exit status is 0 when it returned."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def wait(pid: int, timeout: float = 300.0) -> int:
    """Wait for a child; its exit code, or minus the signal that ended it."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def kill(pid: int) -> int:
    os.kill(pid, signal.SIGKILL)
    return wait(pid)


def crash_at(store: MdCG, step: str) -> None:
    """Make this process die by SIGKILL when the journal reaches ``step``."""

    def fault(name: str) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)

    store._engine.journal.fault = fault


# -- reading a store folder without the engine ----------------------------------------------


@dataclass
class Disk:
    """Node files found by walking the layer folders (no symlink followed)."""

    files: dict[str, list[tuple[str, Node]]] = field(default_factory=dict)  # id -> [(rel, node)]
    unreadable: list[str] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)

    def body(self, node_id: str) -> str | None:
        copies = self.files.get(node_id)
        return copies[0][1].body if copies else None

    @property
    def ids(self) -> set[str]:
        return set(self.files)

    @property
    def doubled(self) -> list[str]:
        return sorted(i for i, c in self.files.items() if len(c) > 1)


def read_disk(root: Path) -> Disk:
    out = Disk()
    for layer in LAYER_DIRS:
        top = root / layer
        if top.is_symlink() or not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                path = Path(dirpath) / name
                rel = path.relative_to(root).as_posix()
                if name.startswith("."):
                    out.temps.append(rel)
                    continue
                if not name.endswith(".md") or path.is_symlink() or not path.is_file():
                    continue  # (a FIFO would block the reader)
                try:
                    node = nodefile.read_node(path)
                except (MdcgError, OSError, ValueError):
                    out.unreadable.append(rel)
                    continue
                out.files.setdefault(node.id, []).append((rel, node))
    return out


def listing(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry below ``folder``: relative path -> (size, mtime_ns, first bytes)."""
    out: dict[str, tuple[int, int, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            head = p.read_bytes()[:4096] if name in filenames and p.is_file() else b""
            out[p.relative_to(folder).as_posix()] = (st.st_size, st.st_mtime_ns, head)
    return out


def changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def health_errors(store: MdCG, allowed: frozenset[str] = BENIGN) -> list[str]:
    """Findings of ``health(deep=True)`` beyond ``allowed``, as ``kind path`` strings."""
    return [
        f"{f.kind} {f.path or f.node_id}" for f in store.health(deep=True).findings if f.kind not in allowed
    ]


DRIFT = ("content_drift", "text_drift")


def drift(root: Path) -> list[str]:
    """Drift findings of ``health(deep=True)`` (the index disagreeing with the files), read-only."""
    with MdCG(root, auto_compact=None, read_only=True) as s:
        return [f"{f.kind} {f.node_id}" for f in s.health(deep=True).findings if f.kind in DRIFT]


def settle(root: Path, allowed: frozenset[str] = BENIGN) -> tuple[Disk, list[str]]:
    """Open, sync (finishing interrupted commits), deep health; the disk afterwards."""
    with MdCG(root, auto_compact=None) as s:
        s.sync()
        problems = health_errors(s, allowed)
        ids = set(s.ids())
    disk = read_disk(root)
    if ids != disk.ids:
        problems.append(f"index ids differ from the files: {sorted(ids ^ disk.ids)[:5]}")
    return disk, problems


# -- the same-id race ---------------------------------------------------------------------


RACE_LAYERS = ("self", "contextual", "structural", "knowledge")


def race_child(root: str, proc: int, n_ids: int, rounds: int, out: str) -> None:
    """Round 0: plain adds of every id; later rounds: plain adds and overwrites, in
    random layers (overwrites move files). Every write is logged with its outcome."""
    rng = random.Random(proc)
    log: list[list[Any]] = []
    with MdCG(root, auto_compact=None) as s:
        for rnd in range(rounds):
            order = list(range(n_ids))
            rng.shuffle(order)
            for i in order:
                node_id = f"race-{i:03d}"
                mode = "add" if rnd == 0 or rng.random() < 0.3 else "overwrite"
                layer = rng.choice(RACE_LAYERS)
                body = f"p{proc} r{rnd} {node_id} {uuid.uuid4().hex}"
                tags = [f"domain:d{rng.randint(0, 3)}"] if layer == "knowledge" else []
                try:
                    node = s.add(Node(id=node_id, layer=layer, body=body, tags=tags), overwrite=mode != "add")
                    log.append([node_id, mode, "ok", node.updated_at, body])
                except DuplicateIdError:
                    log.append([node_id, mode, "duplicate", None, body])
                except Exception as exc:
                    log.append([node_id, mode, f"error {exc!r}", None, body])
    Path(out).write_text(json.dumps(log))


@dataclass
class RaceResult:
    """Per id: the writes that returned, the last of them, and what the file holds."""

    writes: int
    files_per_id: dict[str, int]
    last_ok_body: dict[str, str]
    disk_body: dict[str, str | None]
    plain_adds_ok: dict[str, int]
    other_outcomes: list[list[Any]]
    repeated_stamps: list[str]
    problems: list[str]
    seconds: float


def same_id_race(root: Path, procs: int = 8, n_ids: int = 50, rounds: int = 10) -> RaceResult:
    started = time.perf_counter()
    MdCG(root).close()
    outs = [root.parent / f"race{p}.json" for p in range(procs)]
    pids = [fork(race_child, str(root), p, n_ids, rounds, str(outs[p])) for p in range(procs)]
    codes = [wait(pid) for pid in pids]
    if any(codes):
        raise RuntimeError(f"race children failed: exit codes {codes}")
    log = [rec for out in outs for rec in json.loads(out.read_text())]
    ok: dict[str, list[tuple[float, str]]] = {}
    plain: dict[str, int] = {f"race-{i:03d}": 0 for i in range(n_ids)}
    others = []
    for node_id, mode, outcome, stamp, body in log:
        if outcome == "ok":
            ok.setdefault(node_id, []).append((stamp, body))
            plain[node_id] += mode == "add"
        elif not (outcome == "duplicate" and mode == "add"):
            others.append([node_id, mode, outcome])
    disk = read_disk(root)
    _, problems = settle(root)
    return RaceResult(
        writes=len(log),
        files_per_id={i: len(disk.files.get(i, [])) for i in plain},
        last_ok_body={i: max(w)[1] for i, w in ok.items()},
        disk_body={i: disk.body(i) for i in plain},
        plain_adds_ok=plain,
        other_outcomes=others,
        repeated_stamps=sorted(i for i, w in ok.items() if len({s for s, _ in w}) != len(w)),
        problems=problems,
        seconds=time.perf_counter() - started,
    )


def race_row(work: Path, procs: int, n_ids: int, rounds: int) -> Row:
    r = same_id_race(work / "race", procs, n_ids, rounds)
    row = Row("same-id race", r.writes, seconds=r.seconds)
    row.lost = sum(r.disk_body[i] != r.last_ok_body.get(i) for i in r.disk_body)
    row.extra = sum(max(0, n - 1) for n in r.files_per_id.values())
    row.corrupt = sum(n != 1 for n in r.plain_adds_ok.values()) + len(r.repeated_stamps)
    row.errors = len(r.other_outcomes) + len(r.problems)
    row.notes += [str(x) for x in (r.other_outcomes + r.problems)[:5]]
    return row


# -- concurrent writers -----------------------------------------------------------------------


def writer_child(root: str, rnd: int, proc: int, ops: int, out: str) -> None:
    """Adds, overwrites, updates and small batches on ids of this process only."""
    rng = random.Random(rnd * 100 + proc)
    expected: dict[str, str] = {}
    mine: list[str] = []
    with MdCG(root, auto_compact=None) as s:
        for op in range(ops):
            pick = rng.random()
            body = f"r{rnd} p{proc} op{op} {rng.random()}"
            if pick < 0.45 or not mine:
                node_id = f"w{rnd}-{proc}-{op}"
                s.add(Node(id=node_id, layer="knowledge", tags=[f"domain:d{op % 9}"], body=body))
                mine.append(node_id)
                expected[node_id] = body
            elif pick < 0.65:
                node_id = rng.choice(mine)
                s.add(Node(id=node_id, layer=rng.choice(RACE_LAYERS), body=body), overwrite=True)
                expected[node_id] = body
            elif pick < 0.9:
                node_id = rng.choice(mine)
                s.update(node_id, body=body)
                expected[node_id] = body
            else:
                batch = [
                    Node(id=f"w{rnd}-{proc}-{op}-{j}", layer="self", body=f"{body} {j}") for j in range(5)
                ]
                s.add_many(batch)
                mine += [n.id for n in batch]
                expected.update({n.id: n.body for n in batch})
    Path(out).write_text(json.dumps(expected))


def compactor_child(root: str, stop: str) -> None:
    with MdCG(root, auto_compact=None) as s:
        while not os.path.exists(stop):
            s.compact_index()
            time.sleep(0.05)


def writers(root: Path, procs: int = 8, ops: int = 500, rounds: int = 10) -> Row:
    """Concurrent writers and overwriters with a compactor; every round checked by id set."""
    started = time.perf_counter()
    row = Row("writers", procs * ops * rounds)
    MdCG(root).close()
    expected: dict[str, str] = {}
    for rnd in range(rounds):
        stop = root.parent / f"stop{rnd}"
        compactor = fork(compactor_child, str(root), str(stop))
        outs = [root.parent / f"w{rnd}_{p}.json" for p in range(procs)]
        pids = [fork(writer_child, str(root), rnd, p, ops, str(outs[p])) for p in range(procs)]
        codes = [wait(pid, 1200) for pid in pids]
        stop.touch()
        codes.append(wait(compactor))
        row.errors += sum(c != 0 for c in codes)
        for out in outs:
            if out.exists():
                expected.update(json.loads(out.read_text()))
        disk = read_disk(root)
        row.lost += sum(disk.body(i) != body for i, body in expected.items())
        row.extra += len(disk.ids - expected.keys())
        row.corrupt += len(disk.unreadable) + len(disk.doubled)
    _, problems = settle(root)
    row.errors += len(problems)
    row.notes += problems[:5]
    row.seconds = time.perf_counter() - started
    return row


# -- SIGKILL ----------------------------------------------------------------------------------

#: The write paths, maintenance calls and the migration a kill round may hit.
KILL_KINDS = (
    "add",
    "add_many",
    "update",
    "delete",
    "forget",
    "compact",
    "rebuild",
    "sync",
    "fold",
    "migrate",
)


class Acks:
    """A child's account of its operations: ``try`` before, ``ok`` after each returned.

    Lines reach the kernel before the operation starts (a SIGKILL loses no
    line written before it), so the parent knows every acknowledged operation
    and the one that was in flight.
    """

    def __init__(self, path: Path) -> None:
        self.fh = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives as long as the child

    def run(self, op: dict[str, Any], call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.fh.write(json.dumps({"try": op}) + "\n")
        result = call(*args, **kwargs)
        self.fh.write(json.dumps({"ok": op}) + "\n")
        return result


def churn_child(root: str, kind: str, seed: int, acks_path: str, batch: int) -> None:
    """Loop one kind of operation (maintenance kinds interleave small writes) until killed."""
    rng = random.Random(seed)
    acks = Acks(Path(acks_path))
    s = MdCG(root, auto_compact=None)
    n = 0
    while True:
        n += 1
        ids = s.ids()
        new_id = f"k{seed}-{n}"
        if kind == "add" or not ids or (kind not in ("update", "delete", "forget", "add_many") and n % 2):
            body = f"add {seed} {n} " + "x" * rng.randint(0, 2000)
            node = Node(id=new_id, layer="knowledge", tags=[f"domain:d{n % 5}"], body=body)
            acks.run({"op": "add", "id": new_id, "body": body}, s.add, node)
        elif kind == "add_many":
            nodes = [
                Node(id=f"{new_id}-{j}", layer="self", body=f"batch {seed} {n} {j}") for j in range(batch)
            ]
            op = {"op": "add_many", "ids": [x.id for x in nodes], "bodies": [x.body for x in nodes]}
            acks.run(op, s.add_many, nodes)
        elif kind == "update" or (kind not in ("delete", "forget") and n % 4 == 2):
            target, body = rng.choice(ids), f"edited {seed} {n}"
            op = {"op": "update", "id": target, "body": body}
            acks.run(op, s.update, target, body=body, layer=rng.choice(RACE_LAYERS))
        elif kind == "delete":
            target = rng.choice(ids)
            acks.run({"op": kind, "id": target}, s.delete, target, force=True)
        elif kind == "forget":
            target = rng.choice(ids)
            acks.run({"op": kind, "id": target}, s.forget, target, "stress", force=True)
        else:
            _maintenance(s, kind, acks)


def _maintenance(s: MdCG, kind: str, acks: Acks) -> None:
    if kind == "compact":
        acks.run({"op": "compact"}, s.compact_index)
    elif kind == "rebuild":
        acks.run({"op": "rebuild"}, s.rebuild_index)
    elif kind == "sync":
        acks.run({"op": "sync"}, s.sync)
    else:
        s.search("add edited batch")  # accesses to fold
        acks.run({"op": "fold"}, s.compact_access)


@dataclass
class Model:
    """What the acknowledged operations say the store holds: id -> body."""

    bodies: dict[str, str] = field(default_factory=dict)
    forgotten: set[str] = field(default_factory=set)

    def apply(self, op: dict[str, Any]) -> None:
        kind = op["op"]
        if kind == "add":
            self.bodies[op["id"]] = op["body"]
        elif kind == "add_many":
            self.bodies.update(zip(op["ids"], op["bodies"], strict=True))
        elif kind == "update":
            self.bodies[op["id"]] = op["body"]
        elif kind in ("delete", "forget"):
            self.bodies.pop(op["id"], None)
            if kind == "forget":
                self.forgotten.add(op["id"])

    def check(self, disk: Disk, in_flight: dict[str, Any] | None, tombstones: set[str]) -> tuple[Row, bool]:
        """Compare with the disk; whether the in-flight operation happened (all or nothing)."""
        row = Row("check")
        after = Model(dict(self.bodies), set(self.forgotten))
        if in_flight is not None:
            after.apply(in_flight)
        now = {i: disk.body(i) for i in self.bodies.keys() | after.bodies.keys() | disk.ids}
        matches_before = all(now[i] == self.bodies.get(i) for i in now)
        matches_after = all(now[i] == after.bodies.get(i) for i in now)
        if not (matches_before or matches_after):
            for i, body in now.items():
                if body != self.bodies.get(i) and body != after.bodies.get(i):
                    if body is None:
                        row.lost += 1
                    elif i not in self.bodies and i not in after.bodies:
                        row.extra += 1
                    else:
                        row.corrupt += 1
                        row.notes.append(f"{i}: {str(body)[:40]!r}")
            if not row.lost + row.extra + row.corrupt:
                row.corrupt += 1  # each id fits one side, but not all the same side: a torn batch
                row.notes.append(f"torn {in_flight and in_flight['op']}")
        row.corrupt += len(disk.unreadable) + len(disk.doubled)
        happened = matches_after and not matches_before
        forgotten = after.forgotten if happened else self.forgotten
        row.lost += len(forgotten - tombstones)
        return row, happened


def read_acks(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The acknowledged operations of one child and the one in flight when it died."""
    done: list[dict[str, Any]] = []
    pending = None
    if not path.exists():
        return done, None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # cannot happen with line buffering, but a torn line proves nothing
        if "try" in rec:
            pending = rec["try"]
        elif "ok" in rec:
            done.append(rec["ok"])
            pending = None
    return done, pending


def tombstone_ids(root: Path) -> set[str]:
    with MdCG(root, auto_compact=None, read_only=True) as s:
        return {t["id"] for t in s.tombstones()}


def kill_rounds(
    work: Path, kills: int, *, batch: int = 200, kinds: tuple[str, ...] = KILL_KINDS, seed: int = 7
) -> dict[str, Row]:
    """``kills`` SIGKILLs spread over ``kinds``; one row per kind."""
    rng = random.Random(seed)
    root = work / "kills"
    MdCG(root).close()
    model = Model()
    rows: dict[str, Row] = {}
    for k in range(kills):
        kind = kinds[k % len(kinds)]
        row = rows.setdefault(kind, Row(f"sigkill {kind}"))
        started = time.perf_counter()
        if kind == "migrate":
            row.add(_kill_migration(work / f"migrate{k}", rng))
        else:
            row.add(_kill_one(root, kind, k, batch, rng, model))
        row.operations += 1
        row.seconds += time.perf_counter() - started
    return rows


def _kill_one(root: Path, kind: str, k: int, batch: int, rng: random.Random, model: Model) -> Row:
    acks = root.parent / f"acks{k}.jsonl"
    outside = _outside_dir(root)
    before = listing(outside)
    pid = fork(churn_child, str(root), kind, k, str(acks), batch)
    time.sleep(
        rng.uniform(0.15, 0.9) if kind in ("add_many", "rebuild", "compact") else rng.uniform(0.05, 0.5)
    )
    kill(pid)
    done, pending = read_acks(acks)
    for op in done:
        model.apply(op)
    # A forget killed between its tombstone and the file's removal leaves both, as
    # documented: health says so (forgotten_returned). An acknowledged forget whose
    # memory came back is counted by the model (``extra``), not by this finding.
    disk, problems = settle(root, BENIGN | {"forgotten_returned"})
    result, happened = model.check(disk, pending, tombstone_ids(root))
    if happened and pending is not None:
        model.apply(pending)
    result.errors += len(problems)
    result.notes += problems[:3]
    result.outside += len(changed(before, listing(outside)))
    return result


def _outside_dir(root: Path) -> Path:
    outside = root.parent / "outside"
    if not outside.exists():
        outside.mkdir()
        (outside / "victim.txt").write_text("do not touch\n")
    return outside


def _kill_migration(dest: Path, rng: random.Random) -> Row:
    from md_cg.migrate import migrate
    from md_cg.sample import bundled_sample_path

    row = Row("migrate")
    src = dest.parent / "sample.sqlite"
    if not src.exists():
        shutil.copyfile(bundled_sample_path(), src)
    pid = fork(migrate, str(src), str(dest), batch=20)
    time.sleep(rng.uniform(0.2, 1.5))
    kill(pid)
    report = migrate(src, dest, batch=20)
    row.lost += len(report.mismatches)
    row.extra += len(report.extras)
    row.errors += 0 if report.ok else 1
    disk = read_disk(dest)
    row.corrupt += len(disk.unreadable) + len(disk.doubled)
    with MdCG(dest, auto_compact=None) as s:
        problems = health_errors(s)
    row.errors += len(problems)
    row.notes += problems[:3]
    return row


# -- a batch killed at every step ---------------------------------------------------------------


#: Steps of the commit protocol a batch of n nodes is killed at (see md_cg.journal).
def batch_steps(n: int) -> list[str]:
    return ["temps", "logged", "rename-1", f"rename-{n // 2}", f"rename-{n - 1}", "renamed", "deleted"]


def _batch_child(root: str, nodes: list[Node], step: str, overwrite: bool) -> None:
    s = MdCG(root, auto_compact=None)
    crash_at(s, step)
    s.add_many(nodes, overwrite=overwrite)


def batch_fault(root: Path, step: str, *, mode: str, n: int = 200) -> dict[str, Any]:
    """Kill an ``add_many`` of ``n`` nodes at ``step``; report what is there before and after sync.

    ``mode``: ``new`` (new ids), ``overwrite`` (same files, new bodies) or
    ``move`` (new bodies in another layer: the batch also removes the old files).
    """
    ids = [f"b{i:03d}" for i in range(n)]
    old = [Node(id=i, layer="knowledge", tags=["domain:old"], body=f"old {i}") for i in ids]
    if mode != "new":
        with MdCG(root, auto_compact=None) as s:
            s.add_many(old)
    layer = "self" if mode == "move" else "knowledge"
    tags = [] if mode == "move" else ["domain:old"]
    new = [Node(id=i, layer=layer, tags=tags, body=f"new {i}") for i in ids]
    code = wait(fork(_batch_child, str(root), new, step, mode != "new"))
    before_sync = read_disk(root)
    with MdCG(root, auto_compact=None) as s:
        report = s.sync()
        problems = health_errors(s)
    after = read_disk(root)
    return {
        "exit": code,
        "bodies_before_sync": {i: before_sync.body(i) for i in ids},
        "landed_before_sync": sum(
            any(n.body.startswith("new") for _, n in before_sync.files.get(i, [])) for i in ids
        ),
        "bodies": {i: after.body(i) for i in ids},
        "doubled": after.doubled,
        "unreadable": after.unreadable,
        "temps": after.temps,
        "recovered": report.recovered,
        "problems": problems,
    }


def fault_rows(work: Path, n: int = 200) -> list[Row]:
    rows = []
    for step in batch_steps(n):
        row = Row(f"fault {step}")
        started = time.perf_counter()
        for mode in ("new", "overwrite", "move"):
            if step == "deleted" and mode != "move":
                continue
            r = batch_fault(work / f"fault-{step}-{mode}", step, mode=mode, n=n)
            row.operations += 1
            values = set(r["bodies"].values())
            whole = values in ({None}, {f"new {i}" for i in r["bodies"]}) if mode == "new" else None
            if mode != "new":
                olds = {f"old {i}" for i in r["bodies"]}
                news = {f"new {i}" for i in r["bodies"]}
                whole = values in (olds, news)
            row.corrupt += (not whole) + len(r["doubled"]) + len(r["unreadable"])
            row.errors += (r["exit"] != -signal.SIGKILL) + len(r["problems"]) + len(r["temps"])
        row.seconds = time.perf_counter() - started
        rows.append(row)
    return rows


# -- scan races ----------------------------------------------------------------------------------


def mover_child(root: str, seed: int, seconds: float) -> None:
    """Move node files and whole folders around, as a ``git checkout`` would."""
    rng = random.Random(seed)
    base = Path(root)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        a, b = rng.sample(["self/a", "self/b", "contextual/c"], 2)
        src = base / a
        with contextlib.suppress(OSError):
            names = os.listdir(src)
            if names and rng.random() < 0.8:
                name = rng.choice(names)
                os.rename(src / name, base / b / name)
            elif rng.random() < 0.5:
                os.rename(src, base / f"{a}-moving")
                os.rename(base / f"{a}-moving", src)


def scan_races(root: Path, rounds: int, movers: int = 2) -> Row:
    """health()/sync()/open-without-snapshot while other processes move files."""
    started = time.perf_counter()
    row = Row("scan races", rounds * 3)
    with MdCG(root, auto_compact=None) as s:
        for folder in ("self/a", "self/b", "contextual/c"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        s.add_many([Node(id=f"m{i}", layer="self", body=f"moving {i}") for i in range(150)])
    for i in range(150):
        os.rename(root / "self" / f"m{i}.md", root / ("self/a" if i % 2 else "self/b") / f"m{i}.md")
    pids = [fork(mover_child, str(root), seed, 600.0) for seed in range(movers)]
    try:
        for _ in range(rounds):
            for call in (_open_fresh, _health, _sync):
                try:
                    call(root)
                except Exception as exc:
                    row.errors += 1
                    if len(row.notes) < 5:
                        row.notes.append(repr(exc)[:120])
    finally:
        for pid in pids:
            kill(pid)
    disk, problems = settle(root)
    row.lost = 150 - len(disk.ids & {f"m{i}" for i in range(150)})
    row.corrupt = len(disk.unreadable) + len(disk.doubled)
    # moved files sit outside the folder their frontmatter implies: that is all health may say
    problems = [p for p in problems if not p.startswith("misplaced_file")]
    row.errors += len(problems)
    row.notes += problems[:3]
    row.seconds = time.perf_counter() - started
    return row


def _open_fresh(root: Path) -> None:
    with MdCG(root, auto_compact=None) as s:
        if s.loaded_from != "files":
            raise AssertionError("a snapshot appeared")
        s.ids()


def _health(root: Path) -> None:
    with MdCG(root, auto_compact=None) as s:
        s.health()


def _sync(root: Path) -> None:
    with MdCG(root, auto_compact=None) as s:
        s.sync()


# -- maintenance under load -----------------------------------------------------------------------


def busy_writer(root: str, proc: int, stop: str, durable: bool = False) -> None:
    with MdCG(root, auto_compact=None, durable=durable) as s:
        n = 0
        while not os.path.exists(stop):
            n += 1
            node_id = f"busy{proc}-{n}"
            s.add(Node(id=node_id, layer="knowledge", tags=[f"domain:d{n % 7}"], body=f"busy {proc} {n}"))
            s.update(node_id, body=f"busy {proc} {n} updated")


class _NoGate:
    """Stands in for the gate lock, to measure maintenance without it (as before issue 9)."""

    def acquire(self, **_: Any) -> None:
        pass

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


def maintenance_waits(
    root: Path,
    writers_: int = 8,
    compactions: int = 5,
    rebuilds: int = 3,
    *,
    gate: bool = True,
    timeout: float = 30.0,
    durable: bool = False,
) -> dict[str, Any]:
    """Lock waits (seconds) of compact_index() and rebuild_index() while writers add and update.

    ``gate=False`` measures the same without the gate (maintenance simply waits
    for ``flock``), failing after ``timeout`` seconds; ``durable=True`` makes
    the writers fsync (each holds the store lock longer).
    """
    started = time.perf_counter()
    with MdCG(root) as s:
        s.add_many([Node(id=f"seed{i}", layer="self", body=f"seed {i}") for i in range(300)])
    stop = root.parent / "stop-busy"
    pids = [fork(busy_writer, str(root), p, str(stop), durable) for p in range(writers_)]
    waits: dict[str, list[float]] = {"compact": [], "rebuild": []}
    calls: dict[str, list[float]] = {"compact": [], "rebuild": []}
    errors: list[str] = []
    try:
        time.sleep(1.0)
        with MdCG(root, auto_compact=None, lock_timeout=timeout) as s:
            lock = s._engine.maint
            if not gate:
                lock.gate = _NoGate()  # type: ignore[assignment]
            for name, call, times in (
                ("compact", s.compact_index, compactions),
                ("rebuild", s.rebuild_index, rebuilds),
            ):
                for _ in range(times):
                    t0 = time.perf_counter()
                    try:
                        call()
                    except Exception as exc:
                        errors.append(repr(exc))
                        continue
                    calls[name].append(time.perf_counter() - t0)
                    waits[name].append(lock.last_wait)
                    time.sleep(0.3)
    finally:
        stop.touch()
        codes = [wait(pid) for pid in pids]
    with MdCG(root, auto_compact=None) as s:
        problems = health_errors(s)
        nodes = len(s)
    return {
        "waits": waits,
        "calls": calls,
        "errors": errors + problems + [f"writer exit {c}" for c in codes if c],
        "nodes": nodes,
        "seconds": time.perf_counter() - started,
    }


def waits_row(work: Path) -> Row:
    r = maintenance_waits(work / "waits", durable=True)
    row = Row("maintenance waits", sum(len(v) for v in r["waits"].values()), seconds=r["seconds"])
    row.errors = len(r["errors"]) + sum(w > 5.0 for v in r["waits"].values() for w in v)
    for name in ("compact", "rebuild"):
        w = r["waits"][name]
        if w:
            row.notes.append(f"{name} lock wait max {max(w):.2f} s, mean {sum(w) / len(w):.2f} s")
    row.notes += r["errors"][:3]
    without = maintenance_waits(
        work / "waits-nogate", compactions=2, rebuilds=1, gate=False, timeout=10.0, durable=True
    )
    waited = [w for v in without["waits"].values() for w in v]
    failed = [e for e in without["errors"] if "LockTimeoutError" in e]
    row.notes.append(
        f"for comparison, without the gate: {len(waited)} of 3 calls got the lock"
        + (f" (max wait {max(waited):.1f} s)" if waited else "")
        + (f", {len(failed)} gave up after 10 s (LockTimeoutError)" if failed else "")
    )
    return row


# -- paths from .mdcg/ and symlinks -------------------------------------------------------------

PLANTED = "---\nid: planted\nlayer: self\n---\nplantedsecret text from outside the store\n"


def outside_folder(root: Path) -> Path:
    """A folder beside the store with a victim file and a node file that must stay unseen."""
    out = root.parent / "outside"
    (out / "sub").mkdir(parents=True, exist_ok=True)
    (out / "victim.txt").write_text("victim\n")
    (out / "planted.md").write_text(PLANTED)
    (out / "sub" / "planted2.md").write_text(PLANTED.replace("planted\n", "planted2\n", 1))
    return out


def unsafe_rels(root: Path) -> list[str]:
    """Paths a crafted snapshot row or log record may name (all must be refused)."""
    out = root.parent / "outside"
    return [
        "../outside/victim.txt",
        "../outside/planted.md",
        str(out / "victim.txt"),
        "knowledge/../../outside/planted.md",
        "self/../../outside/victim.txt",
        "self/sub/../../../outside/planted.md",
        "self/./../../outside/planted.md",
        "self\\..\\..\\outside\\planted.md",
    ]


def plant_snapshot(root: Path, path: str) -> None:
    """Rewrite the snapshot (valid checksum) so that node ``n1``'s path is ``path``."""
    from md_cg import snapshot

    snap = snapshot.load(str(root))
    assert snap is not None, "no snapshot to plant into"
    snap.state.entries["n1"].path = path
    (root / ".mdcg" / "index.snapshot").write_bytes(snapshot.encode(snap.state, snap.offsets))


def plant_log(root: Path, rels: list[str]) -> int:
    """A log shard of crafted records naming ``rels``; returns the number of records."""
    recs: list[dict[str, Any]] = []
    for n, rel in enumerate(rels):
        recs += [
            {"op": "put", "id": "planted", "path": rel},
            {"op": "del", "id": "n1", "path": rel},
            {
                "op": "commit",
                "seq": 1000 + n,
                "put": [["planted", rel, ".planted.md.1.a.tmp"]],
                "del": [["n1", rel]],
            },
            {"op": "commit", "seq": 2000 + n, "put": [["planted", "self/planted.md", rel]], "del": []},
            {"op": "sync", "seq": 3000 + n, "put": [["planted", rel]], "del": [["n1", rel]]},
        ]
    log = root / ".mdcg" / "log"
    log.mkdir(parents=True, exist_ok=True)
    (log / "4194000_0badc0de.jsonl").write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in recs))
    return len(recs)


def base_store(root: Path) -> None:
    with MdCG(root) as s:
        s.add(Node(id="n1", layer="self", body="first node alpha"))
        s.add(Node(id="k1", layer="knowledge", tags=["domain:d"], body="knowledge node beta"))
        s.compact_index()


def exercise(root: Path, *, migrate_src: Path | None = None) -> dict[str, Any]:
    """Every read, write and maintenance call once; what each raised, and what health says."""
    outcomes: dict[str, str] = {}
    seen: dict[str, Any] = {}
    s = MdCG(root, auto_compact=None)
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("health", lambda: sorted({f.kind for f in s.health().findings})),
        ("ids", s.ids),
        ("get", lambda: s.get("k1")),
        ("get planted", lambda: s.get("planted")),
        ("search", lambda: [r.id for r in s.search("plantedsecret alpha")[0]]),
        ("neighbours", lambda: s.neighbours("n1")),
        ("add", lambda: s.add(Node(id="fresh", layer="contextual", body="fresh node"))),
        ("overwrite", lambda: s.add(Node(id="n1", layer="self", body="overwritten alpha"), overwrite=True)),
        ("add planted", lambda: s.add(Node(id="planted", layer="self", body="mine now"), overwrite=True)),
        ("update", lambda: s.update("k1", body="knowledge node beta edited")),
        ("move", lambda: s.move("k1", "structural")),
        ("sync", s.sync),
        ("compact", s.compact_index),
        ("fold", s.compact_access),
        ("rebuild", s.rebuild_index),
        ("forget", lambda: s.forget("n1", "test")),
        ("health after", lambda: sorted({f.kind for f in s.health().findings})),
    ]
    for name, call in calls:
        try:
            seen[name] = call()
            outcomes[name] = "ok"
        except Exception as exc:
            outcomes[name] = f"{type(exc).__name__}: {exc}"
    try:
        s.close()
        outcomes["close"] = "ok"
    except Exception as exc:
        outcomes["close"] = f"{type(exc).__name__}: {exc}"
    if migrate_src is not None:
        from md_cg.migrate import migrate

        try:
            migrate(migrate_src, root, batch=50)
            outcomes["migrate"] = "ok"
        except Exception as exc:
            outcomes["migrate"] = f"{type(exc).__name__}: {exc}"
    return {"outcomes": outcomes, "seen": seen}


def confinement(work: Path) -> Row:
    """Crafted snapshot rows and log records: nothing outside is read, written or searchable."""
    started = time.perf_counter()
    row = Row("confinement (.mdcg paths)")
    for n, rel in enumerate(unsafe_rels(work)):
        for where in ("snapshot", "log"):
            root = work / f"conf{n}{where}" / "m"
            root.parent.mkdir(parents=True)
            base_store(root)
            outside = outside_folder(root)
            before = listing(outside)
            if where == "snapshot":
                plant_snapshot(root, rel)
            else:
                plant_log(root, [rel])
            r = exercise(root)
            row.operations += len(r["outcomes"])
            row.outside += len(changed(before, listing(outside)))
            late = drift(root)
            row.errors += len(late)
            row.notes += late[:3]
            seen = r["seen"]
            bad = [k for k, v in r["outcomes"].items() if v != "ok"]
            if "planted" in seen.get("search", []) or "NodeNotFoundError" not in r["outcomes"]["get planted"]:
                bad.append("planted visible")
            if r["outcomes"]["health"] != "ok":
                bad.append("health failed")
            row.errors += len([b for b in bad if b != "get planted"])
            row.notes += [
                f"{rel} ({where}): {b}: {r['outcomes'].get(b, '')[:80]}" for b in bad if b != "get planted"
            ]
    row.seconds = time.perf_counter() - started
    return row


SYMLINK_CASES = (
    "layer",
    "bucket",
    "sub-folder",
    "node file",
    ".mdcg",
    ".mdcg/log",
    ".mdcg/trash",
    ".mdcg/access",
    ".mdcg/audit",
    ".mdcg/locks",
    ".mdcg/lock",
    ".mdcg/index.snapshot",
    ".mdcg/synonyms.json",
)
#: Calls that must work whatever is symlinked (reads never fail on a refused path).
READS = ("ids", "get", "search", "neighbours", "health", "close")


def plant_symlink(root: Path, case: str) -> Path:
    """Replace one part of a store with a symlink to the outside folder; the outside folder."""
    outside = outside_folder(root)
    if case == "layer":
        shutil.rmtree(root / "contextual")
        os.symlink(outside, root / "contextual")
    elif case == "bucket":
        os.symlink(outside / "sub", root / "knowledge" / "cond_x_00000000")
    elif case == "sub-folder":
        os.symlink(outside / "sub", root / "self" / "notes")
    elif case == "node file":
        (root / "self" / "n1.md").unlink()
        os.symlink(outside / "planted.md", root / "self" / "n1.md")
    else:
        target = root / case
        copy = outside / case.replace("/", "_")
        if target.is_dir():
            shutil.copytree(target, copy)
            shutil.rmtree(target)
        elif target.exists():
            shutil.copyfile(target, copy)
            target.unlink()
        else:
            copy.mkdir()
        os.symlink(copy, target)
    return outside


def symlinks(work: Path) -> Row:
    """Symlinks anywhere below the root: never followed, reported, reads keep working."""
    started = time.perf_counter()
    row = Row("symlinks")
    for n, case in enumerate(SYMLINK_CASES):
        root = work / f"sym{n}" / "m"
        root.parent.mkdir(parents=True)
        base_store(root)
        with MdCG(root) as s:
            s.search("alpha")  # an access shard to fold
        outside = plant_symlink(root, case)
        before = listing(outside)
        r = exercise(root)
        row.operations += len(r["outcomes"])
        row.outside += len(changed(before, listing(outside)))
        late = drift(root)
        row.errors += len(late)
        row.notes += late[:3]
        failed = [k for k in READS if r["outcomes"].get(k) != "ok"]
        failed += [
            k
            for k, v in r["outcomes"].items()
            if v != "ok" and "UnsafePathError" not in v and k not in (*READS, "get planted")
        ]
        if "planted" in r["seen"].get("search", []):
            failed.append("planted searchable")
        kinds = r["seen"].get("health", [])
        if "unsafe_path" not in kinds and "synonyms_file" not in kinds:
            failed.append("not reported")
        row.errors += len(failed)
        row.notes += [f"{case}: {k}: {r['outcomes'].get(k, '')[:90]}" for k in failed]
    row.seconds = time.perf_counter() - started
    return row


# -- forget ---------------------------------------------------------------------------------------

SECRETS = ("Quuxplorble", "zorbified", "hunter2xyz", "xylophonic")


def grep_root(root: Path, words: tuple[str, ...]) -> dict[str, list[str]]:
    """Every file under ``root`` (.mdcg/ included) containing one of ``words`` (any case)."""
    found: dict[str, list[str]] = {}
    needles = [w.lower().encode() for w in words]

    def look(p: Path, data: bytes) -> None:
        data = (data + b"\n" + p.name.encode()).lower()
        hits = [w for w, needle in zip(words, needles, strict=True) if needle in data]
        if hits:
            found[p.relative_to(root).as_posix()] = hits

    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            look(Path(dirpath) / name, b"")
        for name in filenames:
            p = Path(dirpath) / name
            look(p, p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
    return found


def secret_node(node_id: str = "secret") -> Node:
    return Node(
        id=node_id,
        layer="knowledge",
        tags=["domain:xylophonic"],
        body="# Quuxplorble credentials\nThe zorbified password is hunter2xyz.\n",
    )


SECRET_EXTRA = "\nMore about Quuxplorble.\n"
OTHER_BODY = "ordinary memory about tea"


def secret_needles() -> tuple[str, ...]:
    """The secret's raw words, its title, and its unique index terms (stems of 5+ letters)."""
    from md_cg.text import analyze

    node = secret_node()
    mine = set(analyze(node.body + SECRET_EXTRA + " xylophonic"))
    others = set(analyze(OTHER_BODY + " tea"))
    terms = sorted(t for t in mine - others if len(t) >= 5)
    return (*SECRETS, "Quuxplorble credentials", *terms)


def forget_scrub(root: Path) -> dict[str, list[str]]:
    """Write a secret through every path that copies it (log, snapshot, text index,
    access log, a bucket folder), forget it, and grep every byte under the root."""
    with MdCG(root) as s:
        s.add(Node(id="other", layer="knowledge", tags=["domain:tea"], body=OTHER_BODY))
        s.add(secret_node())
        s.search("zorbified password")
        s.compact_index()
        s.update("secret", body=secret_node().body + SECRET_EXTRA)
        s.search("Quuxplorble")
        s.compact_access()
        s.forget("secret", "the user asked")
        return grep_root(root, secret_needles())


def forget_row(work: Path) -> Row:
    started = time.perf_counter()
    row = Row("forget scrub", 1)
    found = forget_scrub(work / "forget")
    row.corrupt = len(found)
    row.notes += [f"{k}: {v}" for k, v in found.items()]
    with MdCG(work / "forget") as s:
        problems = health_errors(s)
        if [t["id"] for t in s.tombstones()] != ["secret"]:
            problems.append("tombstone missing")
    row.errors = len(problems)
    row.notes += problems
    row.seconds = time.perf_counter() - started
    return row


# -- bad input ------------------------------------------------------------------------------------

ALIAS_BOMB = (
    "---\nid: bomb\nlayer: self\ntags: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"f{i}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    + "---\nboom\n"
)
DEEP = "---\nid: deep\nlayer: self\ntags: " + "[" * 100_000 + "]" * 100_000 + "\n---\ndeep\n"


@dataclass
class Bad:
    """One kind of bad input: ``run(root)`` returns a problem, or None when handled well."""

    name: str
    channel: str
    run: Callable[[Path], str | None]


def _file_case(rel: str, data: bytes | str, *kinds: str) -> Callable[[Path], str | None]:
    """Plant a file; open, search, sync and health must work, health must report it."""

    def run(root: Path) -> str | None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return _expect_reported(root, kinds, rel)

    return run


def _expect_reported(root: Path, kinds: tuple[str, ...], rel: str | None) -> str | None:
    started = time.perf_counter()
    with MdCG(root, auto_compact=None) as s:
        s.search("alpha")
        s.get("n1")
        s.sync()
        found = {(f.kind, f.path) for f in s.health(deep=True).findings}
    if time.perf_counter() - started > 10:
        return f"took {time.perf_counter() - started:.1f} s"
    if kinds and not any(
        k == kind and (rel is None or p == rel or (p or "").startswith(rel))
        for k, p in found
        for kind in kinds
    ):
        return f"not reported as {kinds}: {sorted(found)}"
    return None


def _raises(
    call: Callable[[MdCG], Any], exc: type[BaseException], text: str = ""
) -> Callable[[Path], str | None]:
    def run(root: Path) -> str | None:
        with MdCG(root, auto_compact=None) as s:
            try:
                call(s)
            except exc as e:
                return None if text in str(e) else f"message {str(e)[:100]!r} lacks {text!r}"
            except Exception as e:
                return f"{type(e).__name__}: {str(e)[:100]}"
        return "accepted"

    return run


def _plant_with(fn: Callable[[Path], None], *kinds: str) -> Callable[[Path], str | None]:
    def run(root: Path) -> str | None:
        fn(root)
        return _expect_reported(root, kinds, None)

    return run


def _cli(args: list[str], *, stdin: bytes = b"", code: int = 2) -> Callable[[Path], str | None]:
    def run(root: Path) -> str | None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        p = subprocess.run(
            [sys.executable, "-m", "md_cg.cli", *[a.replace("ROOT", str(root)) for a in args]],
            input=stdin,
            capture_output=True,
            env=env,
            timeout=120,
        )
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode != code or "Traceback" in err or (code == 2 and not err.startswith("error:")):
            return f"exit {p.returncode}: {err.strip()[-160:]}"
        return None

    return run


def _mcp(tool: str, args: dict[str, Any], text: str = "") -> Callable[[Path], str | None]:
    def run(root: Path) -> str | None:
        import anyio
        from mcp import Client

        from md_cg.mcp_server import create_server

        async def call() -> Any:
            async with Client(create_server(root)) as client:
                return await client.call_tool(tool, args)

        result = anyio.run(call)
        if not result.is_error:
            return "accepted"
        message = result.content[0].text
        return None if text in message else f"tool error {message[:100]!r} lacks {text!r}"

    return run


def _sqlite(column: str, value: Any, text: str) -> Callable[[Path], str | None]:
    def run(root: Path) -> str | None:
        from md_cg.migrate import migrate
        from md_cg.sqlite_source import SCHEMA_SQL

        src = root.parent / f"src-{column}-{uuid.uuid4().hex[:6]}.sqlite"
        conn = sqlite3.connect(src)
        with conn:
            conn.executescript(SCHEMA_SQL)
            conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('ok1', 'self', 'fine row')")
            row = {"id": "bad1", "layer": "self", "content": "bad row", column: value}
            cols = ", ".join(row)
            conn.execute(
                f"INSERT INTO nodes ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values())
            )
        conn.close()
        report = migrate(src, root, batch=10)
        reasons = " ".join(b.reason for b in report.bad_rows)
        if [b.node_id for b in report.bad_rows] != ["bad1"] or text not in reasons:
            return f"bad rows {report.bad_rows}"
        return None if "ok1" in MdCG(root, auto_compact=None, read_only=True) else "good row lost"

    return run


def _garbage_sqlite(root: Path) -> str | None:
    from md_cg.migrate import migrate

    src = root.parent / "not-a-db.sqlite"
    src.write_bytes(b"this is not a database" * 100)
    try:
        migrate(src, root)
    except MdcgError as exc:
        return None if str(src) in str(exc) else f"message does not name the file: {exc}"
    return "accepted"


def _damage_snapshot(root: Path) -> None:
    snap = root / ".mdcg" / "index.snapshot"
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snap.write_bytes(bytes(data))


def _garbage_log(root: Path) -> None:
    log = root / ".mdcg" / "log"
    log.mkdir(parents=True, exist_ok=True)
    (log / "4194001_feedface.jsonl").write_bytes(
        b'{"op": "commit", "seq": "x"}\nnot json at all\n[1, 2]\n{"op": 5}\n'
    )


def _fifo(root: Path) -> str | None:
    os.mkfifo(root / "self" / "fifo.md")
    return _expect_reported(root, ("unsafe_path",), "self/fifo.md")


def _too_deep(root: Path) -> None:
    deep = root / "self" / "/".join(f"d{i}" for i in range(12))
    deep.mkdir(parents=True)
    (deep / "x.md").write_text("---\nid: x\nlayer: self\n---\nx\n")


def _synonyms_conflict(root: Path) -> str | None:
    (root / ".mdcg" / "synonyms.json").write_text('<<<<<<< HEAD\n{"groups": []}\n=======\n{}\n>>>>>>> b\n')
    with MdCG(root, auto_compact=None) as s:
        hits = [r.id for r in s.search("first alpha")[0]]
        kinds = {f.kind for f in s.health().findings}
    if "n1" not in hits:
        return f"search broken: {hits}"
    return None if "synonyms_file" in kinds else f"not reported: {kinds}"


def _big_file(root: Path) -> str | None:
    from md_cg import index

    with open(root / "self" / "big.md", "wb") as fh:
        fh.write(b"---\nid: big\nlayer: self\n---\n")
        fh.truncate(index.MAX_FILE_BYTES + 10)
    return _expect_reported(root, ("unreadable_file",), "self/big.md")


def _twin_on_disk(root: Path) -> None:
    (root / "self" / "N1.md").write_text("---\nid: N1\nlayer: self\n---\ntwin of n1\n")


def _duplicate_on_disk(root: Path) -> None:
    shutil.copyfile(root / "self" / "n1.md", root / "contextual" / "n1.md")


TEMP_LEFTOVERS = (
    "self/.n1.md.4194002.abcd0.tmp",
    ".mdcg/.index.snapshot.4194002.abcd1.tmp",
    ".mdcg/access/.4194002_ab.creating.tmp",
)


def _temp_case(root: Path) -> str | None:
    """Leftovers of killed writers: reported by health, removed by sync."""
    for rel in TEMP_LEFTOVERS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"half")
    with MdCG(root, auto_compact=None) as s:
        reported = {f.path for f in s.health().findings if f.kind == "temp_file"}
        removed = set(s.sync().temp_removed)
        left = [rel for rel in TEMP_LEFTOVERS if (root / rel).exists()]
    want = set(TEMP_LEFTOVERS)
    if reported != want or removed != want or left:
        return f"reported {sorted(reported)}, removed {sorted(removed)}, left {left}"
    return None


def bad_inputs() -> list[Bad]:
    fm = "---\nid: {id}\nlayer: self\n{extra}---\nbody\n"
    files = [
        Bad("alias bomb", "file", _file_case("self/bomb.md", ALIAS_BOMB, "unreadable_file")),
        Bad("100k-deep nesting", "file", _file_case("self/deep.md", DEEP, "unreadable_file")),
        Bad(
            "invalid YAML",
            "file",
            _file_case("self/y.md", "---\nid: y\nlayer: [self\n---\nb\n", "unreadable_file"),
        ),
        Bad(
            "frontmatter a list",
            "file",
            _file_case("self/l.md", "---\n- a\n- b\n---\nb\n", "unreadable_file"),
        ),
        Bad(
            "unsafe id in file",
            "file",
            _file_case("self/u.md", fm.format(id='"../../x"', extra=""), "unreadable_file"),
        ),
        Bad(
            "unknown layer",
            "file",
            _file_case("self/k.md", "---\nid: k\nlayer: bogus\n---\nb\n", "unreadable_file"),
        ),
        Bad(
            "invalid UTF-8",
            "file",
            _file_case("self/b.md", b"---\nid: b\n---\n\xff\xfe\xfa", "unreadable_file"),
        ),
        Bad(
            "NUL in frontmatter",
            "file",
            _file_case("self/z.md", "---\nid: z\x00\nlayer: self\n---\nb\n", "unreadable_file"),
        ),
        Bad(
            "huge integer",
            "file",
            _file_case(
                "self/i.md", fm.format(id="i", extra="importance: " + "9" * 5000 + "\n"), "unreadable_file"
            ),
        ),
        Bad(
            "bad importance",
            "file",
            _file_case("self/v.md", fm.format(id="v", extra="importance: 7\n"), "unreadable_file"),
        ),
        # An empty file holds no text: malformed (docs/format.md, Hand-written notes).
        Bad("empty file", "file", _file_case("self/e.md", "", "unreadable_file")),
        # NUL bytes and no frontmatter: a binary file, not a note.
        Bad("NUL bytes", "file", _file_case("self/nullbytes.md", b"\x00" * 5000, "unreadable_file")),
        Bad("oversized file", "file", _big_file),
        Bad("FIFO as node", "file", _fifo),
        Bad("folder named .md", "file", _plant_with(lambda r: (r / "self" / "dir.md").mkdir())),
        Bad("bad file name", "file", _file_case("self/a b?.md", fm.format(id="ab", extra=""), "unsafe_path")),
        Bad("folder too deep", "file", _plant_with(_too_deep, "unsafe_path")),
        Bad("duplicate id", "file", _plant_with(_duplicate_on_disk, "duplicate_id")),
        Bad("twin id (case)", "file", _plant_with(_twin_on_disk, "twin_id")),
        Bad("temp leftovers", "file", _temp_case),
        Bad("damaged snapshot", "file", _plant_with(_damage_snapshot, "log_damage")),
        Bad("garbage log lines", "file", _plant_with(_garbage_log, "log_damage")),
        Bad("conflicted synonyms.json", "file", _synonyms_conflict),
    ]
    api = [
        Bad(
            "id with ../",
            "api",
            _raises(lambda s: s.add(Node(id="../x", layer="self", body="b")), MdcgError, "../x"),
        ),
        Bad(
            "absolute id",
            "api",
            _raises(lambda s: s.add(Node(id="/etc/x", layer="self", body="b")), MdcgError, "/etc/x"),
        ),
        Bad(
            "unknown layer",
            "api",
            _raises(lambda s: s.add(Node(id="q", layer="bogus", body="b")), MdcgError, "bogus"),
        ),
        Bad(
            "empty body",
            "api",
            _raises(lambda s: s.add(Node(id="q", layer="self", body="")), MdcgError, "body"),
        ),
        Bad(
            "deep extra",
            "api",
            _raises(
                lambda s: s.add(Node(id="q", layer="self", body="b", extra={"x": _nest(5000)})),
                MdcgError,
                "nests deeper",
            ),
        ),
        Bad(
            "NaN importance",
            "api",
            _raises(
                lambda s: s.add(Node(id="q", layer="self", body="b", importance=float("nan"))),
                MdcgError,
                "importance",
            ),
        ),
        Bad("not a Node", "api", _raises(lambda s: s.add_many([{"id": "q"}]), TypeError, "Node")),
        Bad("id change", "api", _raises(lambda s: s.update("n1", id="n2"), MdcgError, "id")),
        Bad("unknown field", "api", _raises(lambda s: s.update("n1", colour="red"), MdcgError, "colour")),
        Bad("unknown state", "api", _raises(lambda s: s.reflect("alpha", ["GOOD"]), MdcgError, "GOOD")),
        Bad("forget without reason", "api", _raises(lambda s: s.forget("n1", ""), MdcgError, "reason")),
        Bad("twin id (NFD)", "api", _twin_api),
        Bad("get ../", "api", _raises(lambda s: s.get("../etc/passwd"), MdcgError, "../etc/passwd")),
        Bad(
            "bad direction",
            "api",
            _raises(lambda s: s.neighbours("n1", direction="sideways"), MdcgError, "sideways"),
        ),
        Bad("negative k", "api", _raises(lambda s: s.search("alpha", k=-1), MdcgError, "k")),
        Bad(
            "duplicate in batch",
            "api",
            _raises(
                lambda s: s.add_many(
                    [Node(id="d", layer="self", body="1"), Node(id="D", layer="self", body="2")]
                ),
                MdcgError,
                "D",
            ),
        ),
    ]
    cli = [
        Bad(
            "undecodable stdin", "cli", _cli(["add", "--root", "ROOT", "--id", "u"], stdin=b"\xff\xfe\x00bad")
        ),
        Bad("get unsafe id", "cli", _cli(["get", "../x", "--root", "ROOT"])),
        Bad("unknown layer", "cli", _cli(["add", "--root", "ROOT", "--layer", "bogus", "--body", "b"])),
        Bad("missing store", "cli", _cli(["search", "x", "--root", "ROOT/nope/nope"])),
    ]
    mcp = [
        Bad("unknown argument", "mcp", _mcp("remember", {"body": "b", "colour": "red"}, "colour")),
        Bad("unknown state", "mcp", _mcp("reflect", {"query": "alpha", "feedback": ["GOOD"]}, "GOOD")),
        Bad("unsafe id", "mcp", _mcp("get", {"id": "../x"}, "../x")),
    ]
    sql = [
        Bad("invalid JSON cell", "sqlite", _sqlite("tags", "[not json", "tags")),
        Bad("100k-deep cell", "sqlite", _sqlite("tags", "[" * 100_000 + "]" * 100_000, "tags")),
        Bad("unsafe id row", "sqlite", _sqlite_unsafe_id),
        Bad("not a database", "sqlite", _garbage_sqlite),
    ]
    return files + api + cli + mcp + sql


def _nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _twin_api(root: Path) -> str | None:
    from md_cg.errors import IdCollisionError

    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="caf\u00e9", layer="self", body="nfc"))
        try:
            s.add(Node(id="cafe\u0301", layer="contextual", body="nfd"))
        except IdCollisionError as exc:
            return None if "caf" in str(exc) else str(exc)
    return "accepted"


def _sqlite_unsafe_id(root: Path) -> str | None:
    from md_cg.migrate import migrate
    from md_cg.sqlite_source import SCHEMA_SQL

    src = root.parent / "unsafe-id.sqlite"
    conn = sqlite3.connect(src)
    with conn:
        conn.executescript(SCHEMA_SQL)
        conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('../../escape', 'self', 'evil')")
        conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('ok1', 'self', 'fine')")
    conn.close()
    report = migrate(src, root)
    return None if [b.node_id for b in report.bad_rows] == ["../../escape"] else f"bad rows {report.bad_rows}"


def bad_input_row(work: Path, channels: tuple[str, ...] = ("file", "api", "cli", "mcp", "sqlite")) -> Row:
    """Every kind of bad input on a fresh copy of a small store: clean error or finding,
    nothing stored lost, nothing outside touched."""
    started = time.perf_counter()
    row = Row("bad input")
    template = work / "bad-template" / "m"
    template.parent.mkdir(parents=True)
    base_store(template)
    for n, bad in enumerate(b for b in bad_inputs() if b.channel in channels):
        root = work / f"bad{n}" / "m"
        shutil.copytree(template, root, symlinks=True)
        outside = outside_folder(root)
        before = listing(outside)
        row.operations += 1
        try:
            problem = bad.run(root)
        except Exception as exc:
            problem = f"raised {type(exc).__name__}: {str(exc)[:120]}"
        if problem:
            row.errors += 1
            row.notes.append(f"{bad.channel} / {bad.name}: {problem}")
        disk = read_disk(root)
        row.lost += sum(disk.body(i) is None for i in ("n1", "k1"))
        row.outside += len(changed(before, listing(outside)))
        late = drift(root)
        row.errors += len(late)
        row.notes += late[:3]
    row.seconds = time.perf_counter() - started
    return row


# -- the table --------------------------------------------------------------------------------------


def render(rows: list[Row]) -> str:
    head = "| scenario | operations | lost | extra | corrupt | outside root | errors | seconds |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r.scenario} | {r.operations:,} | {r.lost} | {r.extra} | {r.corrupt} | {r.outside} | "
            f"{r.errors} | {r.seconds:.1f} |"
        )
    notes = [f"- {r.scenario}: {n}" for r in rows for n in r.notes]
    return "\n".join(lines + (["", *notes] if notes else []))


def run_all(work: Path, quick: bool, only: set[str] | None) -> list[Row]:
    big = not quick
    plan: list[tuple[str, Callable[[], list[Row]]]] = [
        ("writers", lambda: [writers(work / "writers" / "m", 8, 500 if big else 60, 10 if big else 2)]),
        ("race", lambda: [race_row(work, 8, 50, 10 if big else 3)]),
        ("kills", lambda: list(kill_rounds(work / "kills-work", 60 if big else 12).values())),
        ("faults", lambda: fault_rows(work / "faults", 200)),
        ("scan", lambda: [scan_races(work / "scan" / "m", 300 if big else 40)]),
        ("waits", lambda: [waits_row(work / "waits-work")]),
        ("confinement", lambda: [confinement(work / "confinement")]),
        ("symlinks", lambda: [symlinks(work / "symlinks")]),
        ("forget", lambda: [forget_row(work / "forget-work")]),
        ("bad", lambda: [bad_input_row(work / "bad")]),
    ]
    rows: list[Row] = []
    for name, fn in plan:
        if only and name not in only:
            continue
        (work / name).mkdir(parents=True, exist_ok=True)
        print(f"[stress] {name} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        got = fn()
        print(f"[stress] {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        rows += got
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short versions (as the test suite runs them)")
    ap.add_argument("--only", default="", help="comma-separated: writers,race,kills,faults,scan,waits,...")
    ap.add_argument("--work", type=Path, default=None, help="folder for the stores (default: a temp folder)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    work = args.work or Path(tempfile.mkdtemp(prefix="mdcg-stress-"))
    work.mkdir(parents=True, exist_ok=True)
    only = {x for x in args.only.split(",") if x} or None
    started = time.perf_counter()
    rows = run_all(work, args.quick, only)
    text = render(rows) + f"\n\nTotal {time.perf_counter() - started:.0f} s; work folder {work}."
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r.lost + r.extra + r.corrupt + r.outside + r.errors == 0 for r in rows) else 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())


# -- a read-only copy ---------------------------------------------------------------------------------


def read_only_session(root: Path) -> dict[str, Any]:
    """Reads on a folder this process cannot write: what they returned and warned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = MdCG(root, create=False)
        out: dict[str, Any] = {"loaded_from": s.loaded_from}
        out["search"] = [[r.id for r in s.search(q)[0]] for q in ("alpha", "beta", "alpha beta")]
        out["get"] = s.get("n1").body
        out["ids"] = s.ids()
        out["health"] = sorted(f.kind for f in s.health().findings)
        s.close()
    out["warnings"] = [str(w.message) for w in caught]
    return out


def read_only_copy(template: Path, dest_parent: Path) -> Path:
    """A copy of a store with every file 0444 and folder 0555, reachable by other users."""
    dest_parent.mkdir(parents=True, exist_ok=True)
    os.chmod(dest_parent, 0o755)
    root = dest_parent / "ro"
    shutil.copytree(template, root, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o444)
        for name in dirnames:
            os.chmod(Path(dirpath) / name, 0o555)
    os.chmod(root, 0o555)
    return root


def as_nobody(fn: Callable[[Path], dict[str, Any]], root: Path) -> dict[str, Any]:
    """Run ``fn(root)`` in a forked child with the uid and gid of ``nobody`` (when root),
    so that permission bits bind; its result comes back through a pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            try:
                result: dict[str, Any] = {"ok": fn(root)}
            except Exception as exc:
                result = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
            os.write(write_end, json.dumps(result).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 1 << 16):
        chunks.append(chunk)
    os.close(read_end)
    wait(pid)
    return json.loads(b"".join(chunks) or b'{"error": "child died"}')
