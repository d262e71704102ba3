"""The mcp-memory aliases across processes, and add_observations with an unknown entity
(session 30, rev3 findings 1 and 7).

Two ``mdcg mcp --aliases mcp-memory`` servers on one store lost acknowledged writes:
``add_observations``, ``create_relations``, ``delete_observations`` and
``delete_relations`` read the entity and wrote back a whole new body or edge list with
nothing holding the node in between (3 processes x 60 ``add_observations``: 69 of 180
observations missing, 5 of 36 relations). And ``add_observations`` of a known and an
unknown entity answered with an error after storing the known one's observation.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import python_env
from mcp.server.mcpserver.exceptions import ToolError

import md_cg
from md_cg import MdCG, ReadOnlyStoreError
from md_cg.integrations.aliases import alias_tools, observations_of
from md_cg.mcp_server import create_server

#: One server process: its aliases called directly (``server.tools``), once the parent
#: says go; one JSON line per acknowledged call on stdout.
WORKER = r"""
import json, sys, time
from pathlib import Path
from md_cg.mcp_server import create_server

root, wid, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
server = create_server(root, aliases=["mcp-memory"])
tools = server.tools
while not go.exists():
    time.sleep(0.001)
for i in range(n):
    token = f"obs w{wid} #{i}"
    tools["add_observations"](observations=[{"entityName": "E", "contents": [token]}])
    print(json.dumps(["obs", token]), flush=True)
    mine = f"old w{wid} #{i}"  # seeded by the parent: this worker removes its own
    tools["delete_observations"](deletions=[{"entityName": "E", "observations": [mine]}])
    print(json.dumps(["unobs", mine]), flush=True)
    if i % 3 == 2:
        target = f"T{wid}_{i}"
        tools["create_relations"](relations=[{"from": "E", "to": target, "relationType": "knows"}])
        print(json.dumps(["rel", target]), flush=True)
        old = f"O{wid}_{i}"
        tools["delete_relations"](relations=[{"from": "E", "to": old, "relationType": "knew"}])
        print(json.dumps(["unrel", old]), flush=True)
server.store.close()
"""

WORKERS, CALLS = 3, 30


def _env() -> dict[str, str]:
    """The environment of a worker: the md_cg this test imported comes first."""
    here = str(Path(md_cg.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([here, *sys.path])}


def _aliases(store: MdCG) -> dict[str, Any]:
    server = create_server(store.root, store=store, aliases=["mcp-memory"])
    return dict(server.tools)


def _seed(root: Path) -> tuple[set[str], set[str]]:
    """Entity ``E`` with the observations and relations the workers delete (and one that
    stays of each); returns (observations, relation targets) seeded."""
    seeded = {f"old w{w} #{i}" for w in range(WORKERS) for i in range(CALLS)}
    olds = {f"O{w}_{i}" for w in range(WORKERS) for i in range(CALLS) if i % 3 == 2}
    with MdCG(root) as store:
        tools = _aliases(store)
        tools["create_entities"](
            entities=[{"name": "E", "entityType": "thing", "observations": ["seed", *sorted(seeded)]}]
        )
        rels = [{"from": "E", "to": t, "relationType": "knew"} for t in ["Keep", *sorted(olds)]]
        for at in range(0, len(rels), 20):  # at most 20 a call
            reply = tools["create_relations"](relations=rels[at : at + 20])
            assert reply["refused"] == []
    return seeded, olds


def test_alias_writes_from_three_processes_are_all_kept(tmp_path: Path) -> None:
    root, go = tmp_path / "m", tmp_path / "go"
    seeded, olds = _seed(root)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(root), str(w), str(CALLS), str(go)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    time.sleep(1.0)  # the workers import and open the store
    go.touch()
    acked: dict[str, set[str]] = {"obs": set(), "unobs": set(), "rel": set(), "unrel": set()}
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        for line in out.splitlines():
            kind, value = json.loads(line)
            acked[kind].add(value)
    assert len(acked["obs"]) == len(acked["unobs"]) == WORKERS * CALLS
    assert acked["unobs"] == seeded and acked["unrel"] == olds
    assert len(acked["rel"]) == WORKERS * (CALLS // 3)
    with MdCG(root) as store:
        node = store.get("E")
        observations = observations_of(node.body)
        # every acknowledged observation is there, once; every deleted one is gone
        assert sorted(observations) == sorted({"seed"} | acked["obs"])
        assert len(observations) == len(set(observations))
        assert node.body.split("\n")[0] == "# E (thing)"
        knows = sorted(e.target for e in node.edges if e.extra.get("relation") == "knows")
        knew = sorted(e.target for e in node.edges if e.extra.get("relation") == "knew")
        assert knows == sorted(acked["rel"])
        assert knew == ["Keep"]
        assert len(node.edges) == len(acked["rel"]) + 1


def _body(store: MdCG, name: str) -> str:
    return store.get(name).body


def test_add_observations_with_an_unknown_entity_adds_nothing(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        tools = _aliases(store)
        tools["create_entities"](
            entities=[
                {"name": "Carol", "entityType": "person", "observations": ["c1"]},
                {"name": "Dave", "entityType": "person", "observations": []},
            ]
        )
        before = {n: store.get(n).updated_at for n in ("Carol", "Dave")}
        calls = [
            [{"entityName": "Carol", "contents": ["c2"]}, {"entityName": "Nobody", "contents": ["x"]}],
            [
                {"entityName": "Dave", "contents": ["d1"]},
                {"entityName": "Carol", "contents": ["c3"]},
                {"entityName": "Nobody", "contents": ["y"]},
            ],
        ]
        for observations in calls:
            with pytest.raises(ToolError) as caught:
                tools["add_observations"](observations=observations)
            assert str(caught.value) == "Entity with name Nobody not found (no md-cg memory has that id)"
        assert _body(store, "Carol") == "# Carol (person)\n- c1"
        assert _body(store, "Dave") == "# Dave (person)"
        assert {n: store.get(n).updated_at for n in ("Carol", "Dave")} == before
        # all known: all applied
        reply = tools["add_observations"](
            observations=[
                {"entityName": "Carol", "contents": ["c2"]},
                {"entityName": "Dave", "contents": ["d1"]},
            ]
        )
        assert [(r["entityName"], r["addedObservations"]) for r in reply["results"]] == [
            ("Carol", ["c2"]),
            ("Dave", ["d1"]),
        ]
        assert _body(store, "Carol") == "# Carol (person)\n- c1\n- c2"
        assert _body(store, "Dave") == "# Dave (person)\n- d1"


def _forgetting_get(store: MdCG, tools: dict[str, Any], name: str) -> dict[str, Any]:
    """``tools`` whose ``get`` forgets ``name`` right after its first answer: the entity
    goes between the alias's look-up and its write (as another process's
    ``delete_entities`` would)."""
    calls = {"n": 0}
    get = tools["get"]

    @functools.wraps(get)  # the alias checks get's parameters
    def racing_get(**kwargs: Any) -> Any:
        reply = get(**kwargs)
        calls["n"] += 1
        if calls["n"] == 1 and kwargs.get("id") == name:
            store.forget(name, "gone meanwhile")
        return reply

    return {**tools, "get": racing_get}


def _gone(store: MdCG) -> str:
    """The error of the entity ``Gone`` forgotten after its look-up: the one of an unknown
    entity (looked up again under its lock, it is not there)."""
    assert store.departure("Gone") is not None  # it was forgotten meanwhile
    return "Entity with name Gone not found (no md-cg memory has that id)"


def _racing(store: MdCG, alias: str) -> Any:
    """``alias`` on a store holding the entity ``Gone``, which goes after its look-up."""
    tools = _aliases(store)
    tools["create_entities"](entities=[{"name": "Gone", "entityType": "t", "observations": ["g1"]}])
    return (
        alias_tools(_forgetting_get(store, tools, "Gone"), ("mcp-memory",), store=store).available[alias].fn
    )


def test_add_observations_to_an_entity_gone_meanwhile_says_so(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        add = _racing(store, "add_observations")
        with pytest.raises(ToolError) as caught:
            add(observations=[{"entityName": "Gone", "contents": ["x"]}])
        assert str(caught.value) == _gone(store)
        assert store.ids() == []  # nothing written back: the forget stands


def test_relations_of_an_entity_gone_meanwhile(tmp_path: Path) -> None:
    relation = {"from": "Gone", "to": "X", "relationType": "knows"}
    with MdCG(tmp_path / "m") as store:
        assert _racing(store, "create_relations")(relations=[relation]) == {
            "updated": [],
            "skipped": [],
            "refused": [{**relation, "reason": _gone(store)}],
        }
        assert store.ids() == []
    with MdCG(tmp_path / "n") as store:
        assert _racing(store, "delete_relations")(relations=[relation]) == {
            "updated": [],
            "skipped": ["Gone"],
            "refused": [],
        }
        assert store.ids() == []


def test_delete_observations_of_an_entity_gone_meanwhile(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        delete = _racing(store, "delete_observations")
        assert delete(deletions=[{"entityName": "Gone", "observations": ["g1"]}]) == {"updated": []}
        assert store.ids() == []


def test_holding_makes_another_process_wait_and_keeps_its_write(tmp_path: Path) -> None:
    """``MdCG.holding``: another process's read-modify-write under its own hold waits for
    this hold to end, and the holder's own update inside goes ahead (re-entrant within one
    handle): both writes are kept. The other process marks the moment it asks for its hold:
    a fixed 1.5 s for it to start, import and open the store was too short on a loaded
    machine (it then came after the hold and never waited)."""
    root, asking = tmp_path / "m", tmp_path / "asking"
    with MdCG(root) as store:
        store.add(id="e", layer="contextual", body="start")
    code = (
        "import time\nfrom pathlib import Path\nfrom md_cg import MdCG\n"
        f"with MdCG({str(root)!r}) as s:\n"
        f"    Path({str(asking)!r}).touch()\n"
        "    t = time.monotonic()\n"
        "    with s.holding('e'):\n"
        "        s.update('e', body=s.get('e').body + ' other')\n"
        "    print(round(time.monotonic() - t, 2))\n"
    )
    with MdCG(root) as store:
        with store.holding("e"):
            body = store.get("e").body
            other = subprocess.Popen(
                [sys.executable, "-c", code], env=python_env(), stdout=subprocess.PIPE, text=True
            )
            deadline = time.monotonic() + 120
            while not asking.exists():  # the other process has opened the store
                assert other.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(1.0)  # ... and asks for its hold meanwhile: it waits on the lock
            assert other.poll() is None
            store.update("e", body=body + " mine")
        out, _ = other.communicate(timeout=60)
        assert other.returncode == 0 and float(out) >= 0.5
        assert store.get("e").body.rstrip("\n") == "start mine other"
    with MdCG(root, read_only=True) as reader, pytest.raises(ReadOnlyStoreError), reader.holding(["e"]):
        pass


def test_every_write_of_the_handle_goes_ahead_inside_holding(tmp_path: Path) -> None:
    """r5: ``forget``, ``forget_many`` and ``compact_index`` inside ``holding`` raised a bare
    ``RuntimeError: cannot upgrade a shared lock to exclusive`` (holding took the store
    lock shared; they take it exclusive). ``holding`` now takes the ids' locks alone."""
    with MdCG(tmp_path / "m") as store:
        for i in ("a", "b", "c", "d"):
            store.add(id=i, layer="contextual", body=f"note {i}")
        with store.holding(["a", "b", "c", "d"]):
            store.forget("a", reason="r")
            store.forget_many(["b"], reason="r")
            store.compact_index()
            store.archive("c")
            store.update("d", body="changed")
        assert store.ids() == ["d"] and store.get("d").body == "changed"
        assert [t["id"] for t in store.tombstones()] == ["a", "b"]
