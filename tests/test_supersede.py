"""Supersession: the old node stops being valid, the new one links to it, nothing is deleted."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.errors import InvalidArgumentError, NodeNotFoundError


def _pair(root: Path) -> MdCG:
    s = MdCG(root)
    s.add(id="old", layer="self", body="The user lives in Porto")
    s.add(id="new", layer="self", body="The user lives in Lisbon now, moved from Porto")
    s.add(id="other", layer="self", body="The user likes Porto wine")
    return s


def test_supersede_marks_the_old_node_and_links_the_new_one(tmp_path: Path) -> None:
    with _pair(tmp_path / "m") as s:
        before = time.time()
        s.supersede("old", "new", reason="moved house")
        old = s.get("old")  # get still shows it, marked
        assert old.valid_until is not None and before <= old.valid_until <= time.time()
        assert [(e.target, e.type, e.extra) for e in s.get("new").edges] == [
            ("old", "supersedes", {"reason": "moved house"})
        ]
        assert s.superseded_by("old") == "new" and s.superseded_by("new") is None
        assert s.ids() == ["new", "old", "other"]  # nothing is deleted or hidden from listing
        assert {e.id for e in s.list_nodes(include_superseded=False)} == {"new", "other"}
        s.supersede("old", "new")  # idempotent: no second edge
        assert len(s.get("new").edges) == 1


def test_search_hides_superseded_nodes_by_default(tmp_path: Path) -> None:
    with _pair(tmp_path / "m") as s:
        s.supersede("old", "new")
        results, _ = s.search("user lives Porto", record=False)
        assert "old" not in {r.id for r in results}
        assert {r.id: r.superseded_by for r in results} == {"new": None, "other": None}
        shown, _ = s.search("user lives Porto", record=False, include_superseded=True)
        marks = {r.id: r.superseded_by for r in shown}
        assert marks["old"] == "new" and marks["new"] is None
        assert [r.to_dict()["superseded_by"] for r in shown if r.id == "old"] == ["new"]


def test_a_superseded_fact_shown_on_request_is_never_accept(tmp_path: Path) -> None:
    """Review (session 24): include_superseded=True showed the outdated fact as ACCEPT, first."""
    with _pair(tmp_path / "m") as s:
        for node_id in ("old", "new"):
            s.update(node_id, verification_basis="data")
        s.supersede("old", "new")
        shown = {
            r.id: (r.state, r.basis)
            for r in s.search("user lives Porto", record=False, include_superseded=True)[0]
        }
        assert shown["old"] == (
            "DEFER",
            "DEFER: superseded by 'new' (a newer memory replaced it); "
            'the memory itself: fact with no applicability conditions, verification basis "data"',
        )
        assert shown["new"] == (
            "ACCEPT",
            'ACCEPT: fact with no applicability conditions, verification basis "data"',
        )


def test_supersession_survives_reopening_and_rebuild(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _pair(root) as s:
        s.supersede("old", "new")
        s.compact_index()
    with MdCG(root) as s:
        assert s.loaded_from == "snapshot" and s.superseded_by("old") == "new"
        assert "old" not in {r.id for r in s.search("Porto", record=False)[0]}
        s.rebuild_index()
        assert s.superseded_by("old") == "new"
        s.delete("new", force=True)  # the edge is gone with it; valid_until still closes the old node
        assert s.superseded_by("old") is None
        assert "old" not in {r.id for r in s.search("Porto", record=False)[0]}


def test_supersede_refuses_bad_ids(tmp_path: Path) -> None:
    with _pair(tmp_path / "m") as s:
        with pytest.raises(InvalidArgumentError, match="itself"):
            s.supersede("old", "old")
        with pytest.raises(NodeNotFoundError, match="ghost"):
            s.supersede("ghost", "new")
        with pytest.raises(NodeNotFoundError, match="ghost"):
            s.supersede("old", "ghost")
        assert s.get("old").valid_until is None and s.get("new").edges == []


def test_supersede_refuses_a_cycle_and_a_stale_successor(tmp_path: Path) -> None:
    """Superseding by a node that is itself superseded would hide the current fact
    (B by A after A by B hides both): refused, and nothing is written."""
    with _pair(tmp_path / "m") as s:
        s.supersede("old", "new")
        files = {p: p.read_bytes() for p in (tmp_path / "m").rglob("*.md")}
        with pytest.raises(InvalidArgumentError) as err:
            s.supersede("new", "old")
        assert str(err.value) == "node 'old' is itself superseded (by 'new'): supersede by the current one"
        assert err.value.name == "new_id"
        with pytest.raises(InvalidArgumentError, match=r"^node 'old' is itself superseded \(by 'new'\)"):
            s.supersede("other", "old")
        assert {p: p.read_bytes() for p in (tmp_path / "m").rglob("*.md")} == files
        assert s.superseded_by("old") == "new" and s.superseded_by("new") is None
        s.update("other", valid_until=time.time() - 5)  # closed by hand, no successor
        stale = r"^node 'other' is itself superseded \(its valid_until"
        with pytest.raises(InvalidArgumentError, match=stale):
            s.supersede("new", "other")


def test_supersede_refuses_archived_nodes(tmp_path: Path) -> None:
    with _pair(tmp_path / "m") as s:
        s.archive("other")
        for old, new in (("other", "new"), ("old", "other")):
            with pytest.raises(NodeNotFoundError) as err:
                s.supersede(old, new)
            assert str(err.value) == (
                "no node with id 'other' in this store (it is archived: unarchive it to use it)"
            )
        assert s.get("old").valid_until is None and s.get("new").edges == []
        assert s.get("other", include_archived=True).valid_until is None


def _supersede_in_child(root: str, old: str, new: str, start: float, out: dict[str, str]) -> None:
    with MdCG(root) as s:
        while time.time() < start:
            pass
        try:
            s.supersede(old, new)
            out[old] = "done"
        except InvalidArgumentError as exc:
            out[old] = str(exc)


@pytest.mark.parametrize("round_", range(3))
def test_two_processes_superseding_each_other_leave_one_current(tmp_path: Path, round_: int) -> None:
    """A by B and B by A at once, from two processes: one wins, the other is refused;
    exactly one of the two stays current and the winner's edge is the only one."""
    root = tmp_path / "m"
    _pair(root).close()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        out = manager.dict()
        start = time.time() + 1.5
        procs = [
            ctx.Process(target=_supersede_in_child, args=(str(root), a, b, start, out))
            for a, b in (("old", "new"), ("new", "old"))
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0]
        results = dict(out)
    assert sorted(results.values()).count("done") == 1
    winner = next(k for k, v in results.items() if v == "done")  # the node superseded
    current = "new" if winner == "old" else "old"
    refused = f"node {winner!r} is itself superseded (by {current!r}): supersede by the current one"
    assert results[current] == refused
    with MdCG(root) as s:
        assert s.superseded_by(winner) == current and s.superseded_by(current) is None
        assert s.get(current).valid_until is None and s.get(winner).valid_until is not None
        assert [(e.target, e.type) for e in s.get(current).edges] == [(winner, "supersedes")]
        assert s.get(winner).edges == []
        assert s.health().ok


def test_supersede_refuses_a_temporary_successor(tmp_path: Path) -> None:
    """A fact superseded by a one-off memory stayed hidden for good once the one-off expired."""
    with _pair(tmp_path / "m") as s:
        s.add(id="trip", layer="self", body="Tomorrow at 9 the user flies to Paris.")
        assert s.get("trip").retention_tier == "temp"
        with pytest.raises(InvalidArgumentError) as err:
            s.supersede("old", "trip")
        assert str(err.value) == (
            "node 'trip' is a temporary memory (it expires): superseding a memory by it would hide "
            "both once it goes; keep it first (update it with tier long)"
        )
        assert s.get("old").valid_until is None and s.get("trip").edges == []
        s.update("trip", retention_tier="long")
        s.supersede("old", "trip")
        assert s.superseded_by("old") == "trip"


def test_a_fact_whose_successor_was_forgotten_can_be_reopened(tmp_path: Path) -> None:
    """Forgetting the new memory (entered by mistake) left the old fact hidden, and neither
    `mdcg update` nor the MCP `update` tool could clear its valid_until."""
    from typer.testing import CliRunner

    from md_cg.cli import app

    root = tmp_path / "m"
    with _pair(root) as s:
        s.supersede("old", "new")
        s.forget("new", "entered by mistake")
        assert "old" not in {r.id for r in s.search("Porto", record=False)[0]}
    out = CliRunner().invoke(app, ["update", "old", "--reopen", "--root", str(root)])
    assert out.exit_code == 0 and out.stdout.startswith("old: updated reopen (")
    with MdCG(root) as s:
        assert s.get("old").valid_until is None
        assert "old" in {r.id for r in s.search("Porto", record=False)[0]}


def test_forget_and_delete_name_the_facts_they_leave_closed(tmp_path: Path) -> None:
    """Removing the only successor of a fact leaves it hidden as superseded: forget and
    delete say which ones (library, CLI, CLI --json) so that the caller can reopen them;
    a fact that another live memory also supersedes is not named."""
    import json

    from typer.testing import CliRunner

    from md_cg.cli import app

    root = tmp_path / "m"
    with _pair(root) as s:
        s.add(id="newer", layer="self", body="The user lives in Faro")
        s.supersede("old", "new")
        s.supersede("other", "new")
        s.supersede("other", "newer")
        gone = s.forget("new", "entered by mistake")
        assert gone.left_closed == ("old",) and gone.incoming == ()
        s.add(id="again", layer="self", body="The user lives in Braga")
        s.supersede("old", "again")
        deleted = s.delete("again")
        assert deleted.left_closed == ("old",)
        s.add(id="third", layer="self", body="The user lives in Evora")
        s.supersede("old", "third")
        assert s.delete("newer").left_closed == ("other",)
    out = CliRunner().invoke(app, ["forget", "third", "--reason", "wrong", "--root", str(root)])
    assert out.exit_code == 0
    assert out.stdout.splitlines() == [
        "third: forgotten (self); tombstone kept",
        "old: still closed (it superseded it); if it is true again: mdcg update old --reopen",
    ]
    with MdCG(root) as s:
        s.add(id="fourth", layer="self", body="The user lives in Coimbra")
        s.supersede("old", "fourth")
    out = CliRunner().invoke(app, ["delete", "fourth", "--json", "--root", str(root)])
    assert out.exit_code == 0
    assert json.loads(out.stdout) == {
        "id": "fourth",
        "layer": "self",
        "dangling_edges": [],
        "left_closed": ["old"],
        "copies": [],
    }


def test_another_scopes_supersedes_edge_never_hides_a_callers_memory(tmp_path: Path) -> None:
    """Bob (who cannot see Alice's memory) wrote a supersedes edge to its id: Alice's
    search lost it, superseded_by named Bob's id, and no reopen of hers undid it."""
    from md_cg import Scope

    root = tmp_path / "m"
    alice = MdCG(root, scope=Scope(agent="alice"), refresh_interval=0)
    bob = MdCG(root, scope=Scope(agent="bob"), refresh_interval=0)
    alice.add(id="a_pref", layer="self", body="Alice prefers green tea in the morning")
    bob.add(id="b_x", layer="self", body="unrelated", edges=[{"target": "a_pref", "type": "supersedes"}])
    assert [r.id for r in alice.search("green tea morning", record=False)[0]] == ["a_pref"]
    assert alice.superseded_by("a_pref") is None
    shown = alice.search("green tea morning", record=False, include_superseded=True)[0]
    assert [(r.id, r.superseded_by) for r in shown] == [("a_pref", None)]
    with MdCG(root) as trusted:  # the unscoped handle sees every scope, Bob's edge included
        assert trusted.superseded_by("a_pref") == "b_x"
        assert "a_pref" not in {r.id for r in trusted.search("green tea morning", record=False)[0]}
    alice.close()
    bob.close()


def test_a_successor_that_is_archived_or_expired_no_longer_hides_the_fact(tmp_path: Path) -> None:
    """A plain supersedes edge from a memory that was put away or expired kept the old
    fact hidden (until a sweep, for the expired one): now only a live successor counts."""
    root = tmp_path / "m"
    with _pair(root) as s:
        s.add(
            id="q",
            layer="self",
            body="The user lives in Faro",
            edges=[{"target": "old", "type": "supersedes"}],
        )
        assert "old" not in {r.id for r in s.search("Porto", record=False)[0]}
        s.archive(["q"])
        assert s.superseded_by("old") is None
        assert "old" in {r.id for r in s.search("Porto", record=False)[0]}
        soon = time.time() + 1.5
        s.add(
            id="y",
            layer="self",
            body="The user stays in Braga",
            tier="temp",
            expires_at=soon,
            edges=[{"target": "other", "type": "supersedes"}],
        )
        assert s.superseded_by("other") == "y"
        assert "other" not in {r.id for r in s.search("Porto", record=False)[0]}
        time.sleep(max(0.0, s.get("y").expires_at - time.time()) + 0.2)
        assert s.superseded_by("other") is None
        assert "other" in {r.id for r in s.search("Porto", record=False)[0]}


def test_the_only_successor_of_a_closed_fact_is_never_made_temporary(tmp_path: Path) -> None:
    """supersede refuses a temporary successor; update could make it temporary afterwards
    (asked, or by a one-off marker in a new body), and the old fact stayed hidden for good."""
    root = tmp_path / "m"
    with _pair(root) as s:
        s.supersede("old", "new")
        before = (root / s.path_of("new")).read_bytes()
        with pytest.raises(InvalidArgumentError) as err:
            s.update("new", retention_tier="temp")
        assert str(err.value) == (
            "node 'new' superseded 'old': as a temporary memory it would expire and leave that fact "
            "hidden for good; reopen the old fact first (valid_until None; mdcg update ID --reopen) "
            "or keep this one"
        )
        assert (root / s.path_of("new")).read_bytes() == before
        edited = s.update("new", body="Tomorrow the user moves to Lisbon, from Porto")
        assert (edited.retention_tier, edited.expires_at) == ("long", None)
        s.update("old", valid_until=None)
        assert s.update("new", retention_tier="temp").retention_tier == "temp"
