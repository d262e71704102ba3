"""Organise (issue 13 items 1 and 2): a dry run that reports, apply exactly once with receipts."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import node_tree

from md_cg import MdCG, Node, ReadOnlyStoreError, UnknownLayerError
from md_cg import organize as organize_mod
from md_cg.errors import InvalidArgumentError, OrganizeApplyError
from md_cg.visibility import Scope

COFFEE = "# Coffee order\n\nOat-milk flat white, no sugar.\n"
MEETING = "# Design team meeting\n\nThe design team meeting is on Thursday at 3pm\n"
BERLIN = "# Alice\n\nAlice lives in Berlin\n"


def seeded(root: Path) -> MdCG:
    store = MdCG(root)
    store.add(id="kp_coffee", layer="knowledge", body=COFFEE)
    store.add(id="kp_meeting", layer="knowledge", body=MEETING)
    store.add(id="kp_alice", layer="knowledge", body=BERLIN)
    store.add(id="kp_other", layer="knowledge", body=COFFEE, agent_scope="agent-b")
    return store


CANDIDATES: list[Any] = [
    {"layer": "knowledge", "title": "coffee ORDER!", "content": "Something else entirely"},
    {
        "type": "knowledge",
        "title": "Design team meeting",
        "content": "Meeting with the design team is at 3pm on Thursday",
    },
    {"layer": "knowledge", "title": "Design team meeting", "content": "The meeting moved to 5pm"},
    {"layer": "knowledge", "title": "Where Alice lives", "content": "Alice lives in Paris"},
    {"layer": "bogus", "title": "t", "content": "c"},
    {"layer": "knowledge", "title": "Bob", "content": "Bob likes tea", "importance": 7},
    {"layer": "knowledge", "title": "Tea", "content": "Bob prefers green tea", "tags": ["drinks", "drinks"]},
    "not an object",
]


def audit(store: MdCG) -> list[dict[str, Any]]:
    return organize_mod.runs(store)


# -- dry run ------------------------------------------------------------------------------------


def test_dry_run_verdicts_skips_and_counts(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    before = node_tree(store.root)
    r = store.organize("dryRun", candidates=CANDIDATES)
    assert r.mode == "dryRun" and r.status == "degraded" and r.degraded
    assert [(i.index, i.verdict, i.match.id if i.match else None) for i in r.items] == [
        (0, "same_title", "kp_coffee"),  # title key: case and punctuation do not count
        (1, "near", "kp_meeting"),  # a rewording
        (2, "same_title", "kp_meeting"),  # 3pm / 5pm: another fact under the title
        (3, "new", None),  # Berlin / Paris: a different fact, never near
        (6, "new", None),
    ]
    assert [(s.index, s.field, s.reason) for s in r.skipped] == [
        (
            4,
            "layer",
            "candidate 4: unknown layer 'bogus'; expected one of: "
            "anchor, structural, knowledge, contextual, self",
        ),
        (5, "importance", "candidate 5: importance must be a number between 0 and 1, got 7"),
        (7, None, "candidate 7: a candidate must be an object, got str"),
    ]
    assert dict(r.counts) == {
        "total": 5,
        "exact": 0,
        "near": 1,
        "same_title": 2,
        "new": 2,
        "repeat": 0,
        "skipped": 3,
        "truncated": 0,
    }
    assert node_tree(store.root) == before  # a dry run writes no memory
    [rec] = audit(store)
    assert rec["kind"] == "dry_run" and rec["run_id"] == r.run_id and rec["status"] == "degraded"
    assert [e["index"] for e in rec["snapshot"]] == [0, 1, 2, 3, 6]
    assert rec["snapshot"][4] == {
        "index": 6,
        "layer": "knowledge",
        "title": "Tea",
        "content": "Bob prefers green tea",
        "tags": ["drinks"],
    }
    assert rec["items"] == [i.to_dict() for i in r.items]
    assert rec["counts"] == dict(r.counts)


def test_near_needs_the_same_facts(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    r = store.organize(
        candidates=[
            {
                "layer": "knowledge",
                "title": "The design team meeting",
                "content": "design team meeting Thursday 3pm",
            },
            {
                "layer": "knowledge",
                "title": "The design team meeting",
                "content": "design team meeting Friday 3pm",
            },
        ]
    )
    near, changed = r.items
    assert (near.verdict, near.match and near.match.id) == ("near", "kp_meeting")
    assert near.match is not None and near.match.score >= 0.83
    assert (changed.verdict, changed.match) == ("new", None)
    assert r.status == "ok"


def test_matching_stays_inside_the_candidate_scope(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    r = store.organize(
        candidates=[
            {"layer": "knowledge", "title": "Coffee order", "content": "x", "agent_scope": "agent-b"},
            {"layer": "knowledge", "title": "Coffee order", "content": "x", "agent_scope": "agent-c"},
            {"layer": "knowledge", "title": "Coffee order", "content": "x", "sensitivity": "private"},
        ]
    )
    # agent-b's own copy first; agent-c and a private candidate see the shared kp_coffee
    # (no agent, normal sensitivity) already: a second copy would be a duplicate. Never
    # agent-b's copy for agent-c.
    assert [(i.verdict, i.match.id if i.match else None) for i in r.items] == [
        ("same_title", "kp_other"),
        ("same_title", "kp_coffee"),
        ("same_title", "kp_coffee"),
    ]
    with MdCG(tmp_path / "s") as again:
        again.update("kp_coffee", sensitivity="private")
        r = again.organize(
            candidates=[
                {"layer": "knowledge", "title": "Coffee order", "content": "x", "agent_scope": "agent-c"}
            ]
        )
        assert [(i.verdict, i.match) for i in r.items] == [("new", None)]  # more sensitive: not seen by all


def test_at_most_fifty_candidates_rest_truncated(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    cands = [{"layer": "knowledge", "title": f"Fact {n}", "content": f"fact number {n}"} for n in range(57)]
    r = store.organize(candidates=cands)
    assert r.counts["total"] == 50 and r.counts["truncated"] == 7 and r.status == "ok"
    assert [i.index for i in r.items] == list(range(50))


def test_an_empty_run_is_noop_and_not_a_list_is_refused(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    assert store.organize(candidates=[]).status == "noop"
    with pytest.raises(InvalidArgumentError, match="candidates must be a list of objects, got dict"):
        store.organize(candidates={"title": "x"})
    with pytest.raises(InvalidArgumentError, match="mode must be one of dryRun, apply, got 'merge'"):
        store.organize("merge", candidates=[])
    assert [r["status"] for r in audit(store)] == ["noop"]


def test_an_infrastructure_error_is_recorded_failed_and_raised(tmp_path: Path, monkeypatch) -> None:
    store = seeded(tmp_path / "s")

    def broken(node_id: str) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store, "get", broken)
    with pytest.raises(OSError, match="Input/output error"):
        store.organize(candidates=CANDIDATES[:1])
    [rec] = audit(store)
    assert rec["status"] == "failed" and "Input/output error" in rec["error"]
    monkeypatch.undo()
    with pytest.raises(OrganizeApplyError, match=f"dry run '{rec['run_id']}' failed; run a new dry run"):
        store.organize("apply", run_id=rec["run_id"], decisions=[])


# -- apply --------------------------------------------------------------------------------------

SAVE_CANDIDATES: list[Any] = [
    {"layer": "knowledge", "title": "Coffee order", "content": "Oat-milk flat white, no sugar, extra hot."},
    {"layer": "knowledge", "title": "Bob", "content": "Bob likes tea", "tags": ["people"]},
    {"layer": "self", "title": "Editor", "content": "I prefer dark mode", "importance": 0.5},
    {"layer": "nope", "title": "x", "content": "y"},
]


def test_apply_saves_discards_and_archives_once(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES)
    assert [i.verdict for i in dry.items] == ["near", "new", "new"]
    files_before = set(node_tree(store.root))
    r = store.organize(
        "apply",
        run_id=dry.run_id,
        decisions=[
            {"action": "save", "index": 1},
            {"action": "save", "index": 2},
            {"action": "discard", "index": 0},
            {"action": "archive", "id": "kp_coffee"},
        ],
    )
    assert (r.status, r.applied, r.dry_run_id, r.skipped) == ("ok", 3, dry.run_id, ())
    assert dict(r.counts) == {"saved": 2, "archived": 1, "discarded": 1, "skipped": 0}
    assert r.archived_ids == ("kp_coffee",) and r.discarded == (0,)
    bob, editor = (store.get(i) for i in r.saved_ids)
    assert (bob.layer, bob.body, bob.tags) == ("knowledge", "# Bob\n\nBob likes tea\n", ["people"])
    assert (editor.layer, editor.importance) == ("self", 0.5)
    assert "kp_coffee" not in {e.id for e in store.entries()}  # archived: out of default reads
    assert files_before - set(node_tree(store.root)) <= {p for p in files_before if "kp_coffee" in p}
    kinds = [(x["kind"], x.get("status")) for x in audit(store)]
    assert kinds == [("dry_run", "degraded"), ("apply_intent", None), ("apply", "ok")]
    receipt = audit(store)[-1]
    assert receipt["applied"] == 3 and receipt["saved"] == list(r.saved_ids)

    with pytest.raises(OrganizeApplyError, match=f"dry run '{dry.run_id}' was already applied at") as err:
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 1}])
    assert err.value.run_id == dry.run_id
    last = audit(store)[-1]
    assert (last["kind"], last["status"], last["applied"], last["saved"]) == ("apply", "failed", 0, [])
    assert len([e for e in store.entries() if e.title == "Bob"]) == 1
    # An archived node is no longer compared: the same title is new now.
    again = store.organize(candidates=[{"layer": "knowledge", "title": "coffee order", "content": "x"}])
    assert [(i.verdict, i.match) for i in again.items] == [("new", None)]


def test_decisions_the_report_does_not_back_are_skipped(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES)
    r = store.organize(
        "apply",
        run_id=dry.run_id,
        decisions=[
            {"action": "save", "index": 3},  # skipped by the dry run
            {"action": "save", "index": 9},  # never there
            {"action": "archive", "id": "kp_alice"},  # not matched by the report
            {"action": "delete", "id": "kp_coffee"},
            {"action": "save", "index": 1},
            {"action": "discard", "index": 1},  # already decided
            {"action": "save", "index": "1"},
        ],
    )
    assert r.status == "degraded" and r.applied == 1 and len(r.saved_ids) == 1
    assert [(s.index, s.field, s.id, s.reason) for s in r.skipped] == [
        (0, "index", None, "decision 0: candidate 3 was not accepted by this dry run"),
        (1, "index", None, "decision 1: candidate 9 was not accepted by this dry run"),
        (2, "id", "kp_alice", "decision 2: node 'kp_alice' was not flagged as a match by this dry run"),
        (3, "action", None, "decision 3: action must be one of save, discard, archive, got 'delete'"),
        (5, "index", None, "decision 5: candidate 1 was already decided"),
        (6, "index", None, "decision 6: index must be an integer, got '1'"),
    ]
    assert "kp_alice" in {e.id for e in store.entries()}


def test_strict_apply_refuses_every_decision_and_leaves_the_run_open(tmp_path: Path) -> None:
    """An agent's apply with one bad index saved half and used up the run: the corrected
    retry was "already applied". Strict (what the MCP tool asks): nothing, then the retry."""
    store = seeded(tmp_path / "s")
    before = sorted(store.ids())
    dry = store.organize(candidates=SAVE_CANDIDATES)
    bad = [{"action": "save", "index": 1}, {"action": "save", "index": 9}]
    with pytest.raises(OrganizeApplyError) as err:
        store.organize("apply", run_id=dry.run_id, decisions=bad, strict=True)
    assert str(err.value) == (
        "1 decision(s) the dry run does not back: decision 1: candidate 9 was not accepted by this dry "
        "run; nothing was applied, and the run can be applied with corrected decisions"
    )
    assert sorted(store.ids()) == before
    r = store.organize("apply", run_id=dry.run_id, decisions=bad[:1], strict=True)
    assert (r.status, r.applied, len(r.saved_ids)) == ("ok", 1, 1)
    assert sorted(store.ids()) == sorted([*before, *r.saved_ids])


def test_the_seed_checks_in_order(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    with pytest.raises(OrganizeApplyError, match="unknown organize run 'org_nope'"):
        store.organize("apply", run_id="org_nope", decisions=[])
    dry = store.organize(candidates=SAVE_CANDIDATES[1:2])
    receipt = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "discard", "index": 0}])
    assert (receipt.status, receipt.applied) == ("noop", 0)
    with pytest.raises(OrganizeApplyError, match=f"'{receipt.run_id}' is an apply receipt, not a dry run"):
        store.organize("apply", run_id=receipt.run_id, decisions=[])
    with pytest.raises(OrganizeApplyError, match="decisions must be a list, got str"):
        store.organize("apply", run_id=dry.run_id, decisions="save all")
    with pytest.raises(InvalidArgumentError, match="apply replays the dry run's snapshot"):
        store.organize("apply", run_id=dry.run_id, candidates=[])
    failed = [x for x in audit(store) if x["kind"] == "apply" and x["status"] == "failed"]
    assert [(x["dry_run_id"], x["applied"]) for x in failed] == [
        ("org_nope", 0),
        (receipt.run_id, 0),
        (dry.run_id, 0),
    ]


def test_apply_replays_the_snapshot_not_new_input(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    raw = {"layer": "knowledge", "title": "  Snapshot  ", "content": " as normalised ", "tags": ["a", "a"]}
    dry = store.organize(candidates=[raw])
    raw["title"] = "Changed after the dry run"
    r = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    node = store.get(r.saved_ids[0])
    assert (node.body, node.tags) == ("# Snapshot\n\nas normalised\n", ["a"])


def test_a_commit_whose_receipt_was_lost_is_not_applied_twice(tmp_path: Path, monkeypatch) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES[1:2])
    real = store.apply_changes

    def commit_then_die(**kw: Any) -> None:
        real(**kw)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "apply_changes", commit_then_die)
    with pytest.raises(OSError, match="No space left"):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    monkeypatch.undo()
    assert audit(store)[-1]["status"] == "failed"
    with pytest.raises(OrganizeApplyError, match="was already applied"):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    assert len([e for e in store.entries() if e.title == "Bob"]) == 1


def test_a_failed_commit_leaves_nothing_and_the_run_can_be_applied(tmp_path: Path, monkeypatch) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES[1:2])

    def refuse(**kw: Any) -> None:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(store, "apply_changes", refuse)
    with pytest.raises(OSError):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    monkeypatch.undo()
    assert not [e for e in store.entries() if e.title == "Bob"]
    r = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    assert r.status == "ok" and [e.id for e in store.entries() if e.title == "Bob"] == list(r.saved_ids)


def _apply_in_process(root: str, run_id: str, barrier: Any, out: Any) -> None:
    store = MdCG(root)
    barrier.wait()
    try:
        r = store.organize(
            "apply", run_id=run_id, decisions=[{"action": "save", "index": 0}, {"action": "save", "index": 1}]
        )
        out.put(("ok", list(r.saved_ids)))
    except OrganizeApplyError as exc:
        out.put(("refused", str(exc)))
    finally:
        store.close()


def test_two_processes_apply_the_same_run_exactly_once(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES[1:3])
    ctx = multiprocessing.get_context("spawn")
    n = 3
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(target=_apply_in_process, args=(str(store.root), dry.run_id, barrier, out))
        for _ in range(n)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    wins = [ids for kind, ids in results if kind == "ok"]
    refused = [msg for kind, msg in results if kind == "refused"]
    assert len(wins) == 1 and len(refused) == n - 1
    assert all("was already applied" in msg for msg in refused)
    store.refresh()
    landed = {e.id for e in store.entries() if e.title in ("Bob", "Editor")}
    assert landed == set(wins[0])
    receipts = [x for x in audit(store) if x["kind"] == "apply"]
    assert sorted((x["status"], x["applied"]) for x in receipts) == [("failed", 0)] * (n - 1) + [("ok", 2)]


# -- scopes ---------------------------------------------------------------------------------------


def test_a_scoped_caller_matches_and_writes_only_in_its_scope(tmp_path: Path) -> None:
    root = tmp_path / "s"
    seeded(root).close()
    with MdCG(root, scope=Scope(agent="agent-a")) as mine:
        mine.add(id="kp_mine", layer="knowledge", body="# Tea\n\nBob prefers green tea\n")
    a = MdCG(root, scope=Scope(agent="agent-a"))
    r = a.organize(
        candidates=[
            {
                "layer": "knowledge",
                "title": "Coffee order",
                "content": "x",
            },  # agent-b and the shared store have it
            {"layer": "knowledge", "title": "TEA", "content": "y"},
            {"layer": "knowledge", "title": "t", "content": "c", "agent_scope": "agent-b"},
            {"layer": "knowledge", "title": "t", "content": "c", "sensitivity": "secret"},
        ]
    )
    assert [(i.index, i.verdict, i.match.id if i.match else None) for i in r.items] == [
        (0, "same_title", "kp_coffee"),  # the shared copy agent-a sees; never agent-b's kp_other
        (1, "same_title", "kp_mine"),
    ]
    assert [(s.index, s.reason) for s in r.skipped] == [
        (2, "candidate 2: agent_scope 'agent-b' is outside the caller's scope ('agent-a')"),
        (3, "candidate 3: sensitivity 'secret' is above the caller's maximum ('normal')"),
    ]
    b = MdCG(root, scope=Scope(agent="agent-b"))
    with pytest.raises(OrganizeApplyError, match=f"unknown organize run '{r.run_id}'"):
        b.organize("apply", run_id=r.run_id, decisions=[{"action": "save", "index": 0}])
    # An id of another scope cannot be archived: the report never matched it.
    rb = a.organize(
        "apply",
        run_id=r.run_id,
        decisions=[{"action": "save", "index": 0}, {"action": "archive", "id": "kp_other"}],
    )
    assert rb.skipped[0].reason == "decision 1: node 'kp_other' was not flagged as a match by this dry run"
    assert a.get(rb.saved_ids[0]).agent_scope == "agent-a"
    assert rb.saved_ids[0] not in b and "kp_other" in b
    a.close()
    b.close()


def _apply_then_die(root: str, run_id: str) -> None:
    store = MdCG(root)
    real = store.apply_changes

    def commit_then_kill(**kw: Any) -> None:
        real(**kw)
        os.kill(os.getpid(), signal.SIGKILL)  # dies after the commit, before its receipt

    store.apply_changes = commit_then_kill  # type: ignore[method-assign]
    store.organize("apply", run_id=run_id, decisions=[{"action": "save", "index": 0}])


def test_a_process_killed_after_its_commit_leaves_the_run_applied(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES[1:2])
    child = multiprocessing.get_context("spawn").Process(
        target=_apply_then_die, args=(str(store.root), dry.run_id)
    )
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    assert [x["kind"] for x in audit(store)] == ["dry_run", "apply_intent"]  # no receipt: it died first
    store.refresh()
    bob = [e.id for e in store.entries() if e.title == "Bob"]
    assert bob == audit(store)[-1]["saved"]
    with pytest.raises(OrganizeApplyError, match="was already applied"):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    assert [e.id for e in store.entries() if e.title == "Bob"] == bob


def _apply_die_after_logging(root: str, run_id: str) -> None:
    store = MdCG(root)

    def kill(step: str) -> None:
        if step == "logged":  # the commit line is in the log; no file renamed yet
            os.kill(os.getpid(), signal.SIGKILL)

    store._engine.journal.fault = kill
    store.organize("apply", run_id=run_id, decisions=[{"action": "save", "index": 0}])


def test_an_apply_killed_after_logging_its_commit_is_not_applied_twice(tmp_path: Path) -> None:
    """The commit lands at the next recovery: a second apply of the run finishes it first and is
    refused, and the one candidate is one memory."""
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=SAVE_CANDIDATES[1:2])
    child = multiprocessing.get_context("spawn").Process(
        target=_apply_die_after_logging, args=(str(store.root), dry.run_id)
    )
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    with pytest.raises(OrganizeApplyError, match="was already applied"):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    store.sync()
    assert [e.id for e in store.entries() if e.title == "Bob"] == audit(store)[-2]["saved"]


def test_identical_finds_the_same_body_and_nothing_else(tmp_path: Path) -> None:
    """``identical``: the same text (line endings, trailing spaces and blank lines at
    either end aside) in the layer asked, among 300 notes that differ by one number."""
    root = tmp_path / "m"
    body = "Deploy note 117: the release window is Friday 14:00 UTC, 灰度 10% first.\nRollback: tag.\n"
    with MdCG(root, create=True) as s:
        s.add_many(
            [Node(id=f"n{i}", layer="contextual", body=body.replace("117", str(i))) for i in range(300)]
        )
        s.add(id="same_self", layer="self", body=body)
        assert sorted(s.identical(body)) == ["n117", "same_self"]
        assert s.identical(body, "contextual") == ["n117"]
        assert s.identical(body, "self") == ["same_self"]
        crlf = "\n\n" + body.replace("\n", "  \r\n") + "\n\n"
        assert s.identical(crlf, "contextual") == ["n117"]
        assert s.identical(body.replace("Friday", "Monday"), "contextual") == []
        assert s.identical(body + "One more line.\n", "contextual") == []
        assert s.identical("🚀🚀", "contextual") == []  # no term to look up
        s.archive(["n117"])
        assert s.identical(body, "contextual") == []  # archived: not the caller's to see
        with pytest.raises(UnknownLayerError, match="unknown layer 'bogus'"):
            s.identical(body, "bogus")
    with MdCG(root, scope=Scope(agent="agent-b")) as b:
        b.add(id="b_only", layer="self", body="agent b's own note on the release window")
    with MdCG(root, scope=Scope(agent="agent-a")) as a:
        assert a.identical("agent b's own note on the release window", "self") == []
        assert a.identical(body, "self") == ["same_self"]  # unscoped nodes are everyone's


def test_add_unique_stores_a_body_once_and_never_names_a_hidden_memory(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        node, created = s.add_unique(
            layer="self", body="The user's timezone is Europe/Berlin.\n", tags=["tz"]
        )
        assert created and node.tags == ["tz"]
        again, created = s.add_unique(layer="self", body="The user's timezone is Europe/Berlin.\r\n\n")
        assert (again.id, again.tags, created) == (node.id, ["tz"], False)  # read from its file
        other, created = s.add_unique(layer="contextual", body="The user's timezone is Europe/Berlin.")
        assert created and other.id != node.id
        assert sorted(s.ids()) == sorted([node.id, other.id])
    with MdCG(root, scope=Scope(agent="agent-b")) as b:
        mine, created = b.add_unique(layer="self", body="agent b keeps this to itself")
        assert created and mine.agent_scope == "agent-b"
    with MdCG(root, scope=Scope(agent="agent-a")) as a:
        theirs, created = a.add_unique(layer="self", body="agent b keeps this to itself")
        assert created and theirs.id != mine.id and theirs.agent_scope == "agent-a"
    with MdCG(root, read_only=True) as r, pytest.raises(ReadOnlyStoreError):
        r.add_unique(layer="self", body="anything")


def test_a_body_of_stop_words_or_emoji_is_stored_once(tmp_path: Path) -> None:
    """Such a body has no index term: add_unique stored "a" or "it is what it is" again on
    every call (reviewer's find). The entries' titles find it now, never another scope's."""
    with MdCG(tmp_path / "m") as s:
        bodies = ["a", "it is what it is", "I am here", "👍", "to be or not to be"]
        first = [s.add_unique(layer="self", body=b) for b in bodies]
        assert [created for _, created in first] == [True] * 5
        again = [s.add_unique(layer="self", body=b + "\n") for b in bodies]
        assert [(n.id, created) for n, created in again] == [(n.id, False) for n, _ in first]
        assert s.identical("it is what it is") == [first[1][0].id] and s.identical("it is what it") == []
        assert s.add_unique(layer="contextual", body="a")[1] is True  # another layer
        assert len(s) == 6
        for i, w in enumerate(["it", "is", "the", "a", "an", "and", "or", "of", "to", "in", "on", "at"]):
            s.add(Node(id=f"aa{i:02d}", layer="knowledge", body=f"it is\n\n{w} {w}"))  # titled "it is"
        made, created = s.add_unique(layer="knowledge", body="it is")
        assert created and s.add_unique(layer="knowledge", body="it is") == (s.get(made.id), False)
    with MdCG(tmp_path / "m", scope=Scope(agent="c")) as c:
        assert c.add_unique(layer="self", body="a")[1] is False  # the shared one
        theirs, created = c.add_unique(layer="knowledge", body="I am")
        assert created and theirs.agent_scope == "c"
    with MdCG(tmp_path / "m", scope=Scope(agent="b")) as b:
        node, created = b.add_unique(layer="knowledge", body="I am")  # c's is not b's to see
        assert created and node.agent_scope == "b" and node.id != theirs.id


def _add_same(root: str, barrier: Any, out: Any) -> None:
    with MdCG(root) as s:
        barrier.wait()
        node, created = s.add_unique(layer="contextual", body="deploy freeze starts Friday 18:00 UTC")
        out.put((node.id, created))


def test_processes_storing_the_same_body_at_once_store_it_once(tmp_path: Path) -> None:
    """Six processes released together ask add_unique for the same body: one file, one
    id, every process told that id, exactly one of them told it created it."""
    root = tmp_path / "m"
    MdCG(root, create=True).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_add_same, args=(str(root), barrier, out)) for _ in range(6)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    files = sorted(p.stem for p in (root / "contextual").glob("*.md"))
    assert len(files) == 1
    assert {node_id for node_id, _ in results} == set(files)
    assert sorted(created for _, created in results) == [False] * 5 + [True]
    with MdCG(root, read_only=True) as s:
        assert s.ids() == files


def _bytes_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_forget_blanks_the_candidate_organise_saved_as_that_memory(tmp_path: Path) -> None:
    """reliability.md 9: once forget returns, no byte under the root holds the memory's text --
    also not the dry run's copy of the candidate, nor a later run's match title."""
    store = MdCG(tmp_path / "s")
    store.add(id="other", layer="self", body="unrelated")
    cands = [
        {"layer": "knowledge", "title": "Bank PIN", "content": "My PIN is 4711-zebra"},
        {"layer": "knowledge", "title": "Tea order", "content": "Green tea, unsweetened"},
    ]
    dry = store.organize(candidates=cands)
    done = store.organize(
        "apply", run_id=dry.run_id, decisions=[{"action": "save", "index": i} for i in (0, 1)]
    )
    pin, tea = done.saved_ids
    later = store.organize(
        candidates=[{"layer": "knowledge", "title": "Bank PIN", "content": "My PIN is 4711-zebra"}]
    )
    assert later.items[0].match is not None and later.items[0].match.id == pin
    store.forget(pin, "the user asked")
    held = _bytes_under(store.root)
    assert b"4711-zebra" not in held and b"Bank PIN" not in held  # the later run's candidate matched it
    assert b"Green tea, unsweetened" in held
    runs = audit(store)  # every line still reads
    first = next(r for r in runs if r.get("run_id") == dry.run_id)
    assert [c["content"] for c in first["snapshot"]] == ["#" * 20, "Green tea, unsweetened"]
    assert first["snapshot"][0]["title"] == "#" * 8 and first["items"][0]["title"] == "#" * 8
    second = next(r for r in runs if r.get("run_id") == later.run_id)
    assert second["items"][0]["match"]["title"] == "#" * 8 and second["snapshot"][0]["content"] == "#" * 20
    assert store.get(tea).body.endswith("Green tea, unsweetened\n") or "Green tea" in store.get(tea).body
    store.close()


@pytest.mark.parametrize("damage", ["index", "title", "snapshot", "tags"])
def test_a_damaged_dry_run_record_is_refused_by_name(tmp_path: Path, damage: str) -> None:
    store = MdCG(tmp_path / "s")
    dry = store.organize(candidates=[{"layer": "knowledge", "title": "T", "content": "C", "tags": ["a"]}])
    [shard] = (tmp_path / "s" / ".mdcg" / "organize").glob("*.jsonl")
    line = json.loads(shard.read_text().splitlines()[0])
    snapshot = line["r"]["snapshot"]
    if damage == "index":
        snapshot[0]["index"] = "abc"
    elif damage == "title":
        del snapshot[0]["title"]
    elif damage == "snapshot":
        line["r"]["snapshot"] = 5
    else:
        snapshot[0]["tags"] = {"a": 1}
    shard.write_text(json.dumps(line) + "\n")
    with pytest.raises(OrganizeApplyError, match=r"record in \.mdcg/organize/ is damaged"):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    assert store.ids() == []
    store.close()


def _saved(store: MdCG, candidates: list[dict[str, Any]], indexes: list[int]) -> tuple[str, list[str]]:
    dry = store.organize(candidates=candidates)
    done = store.organize(
        "apply", run_id=dry.run_id, decisions=[{"action": "save", "index": i} for i in indexes]
    )
    return dry.run_id, list(done.saved_ids)


def test_blanking_touches_only_the_forgotten_memory_s_own_candidate(tmp_path: Path) -> None:
    """Keys, the other candidates (one whose text is inside the forgotten one's, one whose tag
    is the same word) and later runs' records stay as they were; a pending run still applies."""
    store = MdCG(tmp_path / "s")
    cands = [
        {"layer": "knowledge", "title": "content", "content": "I drink coffee every morning at six"},
        {"layer": "knowledge", "title": "Second", "content": "coffee every morning", "tags": ["content"]},
    ]
    run, (first, second) = _saved(store, cands, [0, 1])
    store.add(id="m1", layer="knowledge", body="# layer\n\nthe layer fact")
    pending = store.organize(
        candidates=[{"layer": "knowledge", "title": "layer", "content": "the layer fact"},
                    {"layer": "knowledge", "title": "Other", "content": "an unrelated fact about owls"}]
    )  # fmt: skip
    store.forget(first, "the user asked")
    store.forget("m1", "the user asked")
    records = {r.get("run_id"): r for r in audit(store)}
    assert [(c["title"], c["content"], c.get("tags")) for c in records[run]["snapshot"]] == [
        ("#" * 7, "#" * 35, None),
        ("Second", "coffee every morning", ["content"]),
    ]
    assert store.get(second).body.endswith("coffee every morning\n")
    later = records[pending.run_id]
    assert [i["match"]["title"] if i.get("match") else None for i in later["items"]] == ["#####", None]
    applied = store.organize("apply", run_id=pending.run_id, decisions=[{"action": "save", "index": 1}])
    assert applied.status == "ok" and "owls" in store.get(applied.saved_ids[0]).body
    store.close()


def test_blanking_finds_the_candidate_of_a_memory_edited_since(tmp_path: Path) -> None:
    store = MdCG(tmp_path / "s")
    _, (pin,) = _saved(
        store, [{"layer": "knowledge", "title": "Bank secrets", "content": "PIN 4921, pasword hunter2"}], [0]
    )
    store.update(pin, body="# Bank secrets\n\nPIN 4921, password hunter2")
    store.forget(pin, "the user asked")
    held = b"".join(p.read_bytes() for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert b"PIN 4921" not in held and b"Bank secrets" not in held  # (bare digits turn up in times)
    store.close()


def test_a_busy_organise_log_leaves_forget_done_and_the_snapshot_scrubbed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        _, (saved,) = _saved(
            store, [{"layer": "knowledge", "title": "Zanzibar", "content": "zanzibar trip"}], [0]
        )
        store.compact_index()
    other = MdCG(root)
    with other.log(organize_mod.AUDIT_LOG).locked(60), MdCG(root, lock_timeout=0.5) as s:
        with pytest.warns(RuntimeWarning, match="organise log"):
            s.forget(saved, "the user asked")
        assert saved not in s
    other.close()
    assert b"zanzibar" not in (root / ".mdcg" / "index.snapshot").read_bytes()


def test_forget_blanks_every_run_s_copy_of_the_candidate_and_apply_skips_it(tmp_path: Path) -> None:
    """The same candidate in an earlier (never applied) run, its tags too; applying that run
    afterwards does not bring the memory back as text or as #s."""
    store = MdCG(tmp_path / "s")
    cand = {
        "layer": "knowledge",
        "title": "Diagnosis ZEBRA",
        "content": "SECRET-ALPHA result",
        "tags": ["health-TAG9"],
    }
    first = store.organize(candidates=[cand])
    _, (saved,) = _saved(store, [cand], [0])
    store.forget(saved, "the user asked")
    held = b"".join(p.read_bytes() for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert b"SECRET-ALPHA" not in held and b"ZEBRA" not in held and b"health-TAG9" not in held
    again = store.organize("apply", run_id=first.run_id, decisions=[{"action": "save", "index": 0}])
    assert again.saved_ids == () and "was forgotten" in again.skipped[0].reason
    assert store.ids() == []
    store.close()


def test_one_agent_s_forget_leaves_another_agent_s_run_of_the_same_text(tmp_path: Path) -> None:
    root = tmp_path / "s"
    a = MdCG(root, scope=Scope(agent="alpha"))
    b = MdCG(root, scope=Scope(agent="beta"))
    text = "the build runs at six"
    run_b = b.organize(candidates=[{"layer": "knowledge", "title": "Beta's note", "content": text}])
    _, (saved,) = _saved(a, [{"layer": "knowledge", "title": "Alpha's note", "content": text}], [0])
    a.forget(saved, "the user asked")
    applied = b.organize("apply", run_id=run_b.run_id, decisions=[{"action": "save", "index": 0}])
    assert applied.status == "ok" and text in b.get(applied.saved_ids[0]).body
    a.close()
    b.close()


def test_the_forgetting_caller_s_own_pending_run_of_the_text_is_blanked(tmp_path: Path) -> None:
    """Alpha saved M (shared); an unscoped handle has its own pending run of the same text and
    forgets M: its run is blanked (and cannot save the text again); alpha's source run too."""
    root = tmp_path / "s"
    text = "the vault code is 7731"
    mine = MdCG(root)
    pending = mine.organize(candidates=[{"layer": "knowledge", "title": "Vault", "content": text}])
    alpha = MdCG(root, scope=Scope(agent="alpha"))
    _, (saved,) = _saved(alpha, [{"layer": "knowledge", "title": "Alpha vault", "content": text}], [0])
    mine.sync()
    mine.forget(saved, "the user asked")
    again = mine.organize("apply", run_id=pending.run_id, decisions=[{"action": "save", "index": 0}])
    assert again.saved_ids == () and "was forgotten" in again.skipped[0].reason
    assert b"code is 7731" not in b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
    mine.close()
    alpha.close()


def test_an_apply_reads_only_the_records_naming_its_run(tmp_path: Path) -> None:
    """Review (session 24): every apply decoded the whole organise log, every run's
    candidates (100 ms after 600 runs, now 16 ms). AppendLog.read_holding decodes only
    the lines holding the run id, in the order read() gives them."""
    from md_cg import organize as org

    store = MdCG(tmp_path / "m")
    ids = []
    for r in range(6):
        rep = store.organize(
            "dryRun",
            candidates=[
                {"layer": "knowledge", "title": f"Otters {r}", "content": f"fact number {r} about otters"}
            ],
        )
        ids.append(rep.run_id)
    store.organize("apply", run_id=ids[2], decisions=[{"action": "save", "index": 0}])
    log = store.log(org.AUDIT_LOG)
    with open(next((tmp_path / "m" / ".mdcg" / "organize").glob("*.jsonl")), "ab") as fh:
        fh.write(b'{"ts": 1, "seq": 1, "r": {"run_id": "' + ids[3].encode())  # torn: never read
    needle = [orjson.dumps(ids[2])]
    got = log.read_holding(needle)
    assert got == [r for r in log.read() if needle[0] in orjson.dumps(r)]
    assert [r["kind"] for r in got] == ["dry_run", "apply_intent", "apply"]
    assert [r["kind"] for r in log.read_holding([orjson.dumps(ids[3])])] == ["dry_run"]
    with pytest.raises(OrganizeApplyError, match="was already applied"):
        store.organize("apply", run_id=ids[2], decisions=[{"action": "save", "index": 0}])
    store.close()


def test_an_apply_skips_a_candidate_add_would_refuse_and_saves_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review round 3 (session 24): apply_changes refusing a control-character tag made
    the whole apply fail with a bare InvalidNodeError, the good candidate unsaved. Since
    session 29 the dry run skips such a candidate; apply still skips one a dry run
    recorded before (here: the dry run's check taken out)."""
    store = MdCG(tmp_path / "m")
    candidates = [
        {"layer": "knowledge", "title": "bell", "content": "the bell rings", "tags": ["bell\x07"]},
        {"layer": "knowledge", "title": "gate", "content": "the gate opens at nine"},
    ]
    checked = store.organize("dryRun", candidates=candidates)
    assert [(s.index, s.reason) for s in checked.skipped] == [
        (
            0,
            "candidate 0: field 'tags' holds a tag with a control character ('bell\\x07'); "
            "a tag is one line of text",
        )
    ]
    monkeypatch.setattr(organize_mod, "_unsaveable", lambda c: None)
    rep = store.organize("dryRun", candidates=candidates)
    monkeypatch.undo()
    res = store.organize(
        "apply", run_id=rep.run_id, decisions=[{"action": "save", "index": 0}, {"action": "save", "index": 1}]
    )
    assert res.status == "degraded" and len(res.saved_ids) == 1
    assert [s.index for s in res.skipped] == [0]
    assert res.skipped[0].reason == (
        "decision 0: candidate 0: field 'tags' holds a tag with a control character ('bell\\x07'); "
        "a tag is one line of text"
    )
    assert [store.get(i).body.endswith("the gate opens at nine\n") for i in res.saved_ids] == [True]
    store.close()


# -- verdicts and apply against a store that changed since the dry run ---------------------------


def test_exact_needs_the_text_not_only_the_title(tmp_path: Path) -> None:
    """`exact` (score 1.0) was given on the title alone; a candidate whose content was a
    memory's whole text (a body without a heading) was `new`. Since review session 25
    (D5) such a candidate is `exact` only under the memory's own title (or as title and
    content together): under another title it would store that title too."""
    store = seeded(tmp_path / "s")
    store.add(id="kp_hike", layer="knowledge", body="The user likes hiking on weekends\n")
    rest = "covers the changelog, the version bump and the tag " * 4
    long = "The release checklist " + rest
    store.add(id="kp_long", layer="knowledge", body=long)  # one line past the title's 120 characters
    r = store.organize(
        candidates=[
            {"layer": "knowledge", "title": "Coffee order", "content": "something else entirely"},
            {"layer": "knowledge", "title": "Hobbies", "content": "The user likes hiking on weekends"},
            {"layer": "knowledge", "title": "coffee order", "content": "Oat-milk flat white, no sugar."},
            {"layer": "knowledge", "title": "Releases", "content": long},
            {
                "layer": "knowledge",
                "title": "The user likes hiking on weekends",
                "content": "The user likes hiking on weekends",
            },
            {"layer": "knowledge", "title": "The release checklist", "content": rest},
        ]
    )
    assert [
        (i.verdict, i.match.id if i.match else None, i.match.score if i.match else None) for i in r.items
    ] == [
        ("same_title", "kp_coffee", 0.0),
        ("near", "kp_hike", 1.0),  # its content is kp_hike's whole body (20 / 23 before session 41)
        ("exact", "kp_coffee", 1.0),
        ("near", "kp_long", 1.0),  # its content is kp_long's whole body (0.9769 before session 41)
        ("exact", "kp_hike", 1.0),
        ("exact", "kp_long", 1.0),
    ]
    assert dict(r.counts) == {
        "total": 6,
        "exact": 3,
        "near": 2,
        "same_title": 1,
        "new": 0,
        "repeat": 0,
        "skipped": 0,
        "truncated": 0,
    }


def test_a_memory_s_body_under_another_title_is_not_exact(tmp_path: Path) -> None:
    """Review session 25 (D5): the candidate would store "# Budget Q3 sign-off\n\nApproved",
    not the memory's "Approved", yet was `exact` (match 'ok', 1.0: discarded unread)."""
    with MdCG(tmp_path / "s") as s:
        s.add(id="ok", body="Approved", layer="knowledge")
        s.add(id="lunch", body="Lunch\n=====\n\n- Meeting at **10am**\n- Room 4", layer="knowledge")
        r = s.organize(
            "dryRun",
            candidates=[
                {"title": "Budget Q3 sign-off", "content": "Approved", "layer": "knowledge"},
                {"title": "Approved", "content": "Approved", "layer": "knowledge"},
                {"title": "Lunch", "content": "Meeting at 10am\nRoom 4", "layer": "knowledge"},
            ],
        )
    assert [
        (i.verdict, i.match.id if i.match else None, i.match.score if i.match else None) for i in r.items
    ] == [
        ("near", "ok", 1.0),  # reviewed, not discarded unread: `new` before session 41
        ("exact", "ok", 1.0),
        ("exact", "lunch", 1.0),
    ]


@pytest.mark.parametrize("strict", [False, True])
def test_an_archive_of_a_match_changed_since_the_dry_run_is_skipped(tmp_path: Path, strict: bool) -> None:
    """The dry run matched shared_coffee; it was then updated to another fact, and apply
    archived it anyway (the only copy of that fact)."""
    root = tmp_path / "s"
    store = seeded(root)
    store.add(id="shared_coffee", layer="knowledge", body="# Coffee\n\nOat-milk latte, two sugars\n")
    dry = store.organize(
        candidates=[{"layer": "knowledge", "title": "Coffee", "content": "Oat-milk latte, two sugars"}]
    )
    assert [(i.verdict, i.match.id if i.match else None) for i in dry.items] == [("exact", "shared_coffee")]
    with MdCG(root) as other:  # another writer, after the dry run
        other.update("shared_coffee", body="# Coffee\n\nthe only copy of the tea fact\n")
    decisions = [{"action": "archive", "id": "shared_coffee"}]
    reason = (
        "decision 0: node 'shared_coffee' changed since the dry run (its text or scope); run a new dry run"
    )
    if strict:
        with pytest.raises(
            OrganizeApplyError, match=re.escape(f"1 decision(s) the dry run does not back: {reason}")
        ):
            store.organize("apply", run_id=dry.run_id, decisions=decisions, strict=True)
    else:
        r = store.organize("apply", run_id=dry.run_id, decisions=decisions)
        assert (r.status, r.applied, r.archived_ids) == ("degraded", 0, ())
        assert [(s.index, s.field, s.id, s.reason) for s in r.skipped] == [(0, "id", "shared_coffee", reason)]
    assert store.get("shared_coffee").body == "# Coffee\n\nthe only copy of the tea fact\n"
    assert "shared_coffee" in {e.id for e in store.entries()}


def test_a_save_of_a_text_stored_since_the_dry_run_is_skipped(tmp_path: Path) -> None:
    """The dry run said `new`; another writer then stored the very text, and apply saved a
    second copy (identical() listed two)."""
    root = tmp_path / "s"
    store = seeded(root)
    dry = store.organize(
        candidates=[
            {"layer": "knowledge", "title": "Tea", "content": "Bob prefers green tea"},
            {"layer": "knowledge", "title": "Bob", "content": "Bob likes tea"},
        ]
    )
    assert [i.verdict for i in dry.items] == ["new", "new"]
    body = organize_mod.node_body("Tea", "Bob prefers green tea")
    with MdCG(root) as other:
        other.add(id="kp_tea", layer="knowledge", body=body)
    r = store.organize(
        "apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}, {"action": "save", "index": 1}]
    )
    assert (r.status, r.applied, len(r.saved_ids)) == ("degraded", 1, 1)
    assert [(s.index, s.field, s.id, s.reason) for s in r.skipped] == [
        (0, "index", "kp_tea", "decision 0: candidate 0's text is stored already, as 'kp_tea'")
    ]
    assert store.identical(body) == ["kp_tea"]
