"""Lifecycle edges a reviewer found by living with a store for simulated weeks.

Each test names what went wrong before: scoped ids of negative memory that
collided across agents, recall figures and resurfacing that counted negative
memory, accesses recorded for ids the caller cannot see, resurfacing a day
off across daylight saving time, a routine sweep that left the store
unhealthy, and a scoped import whose refusal was the wrong error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import MdCG, Node, Scope
from md_cg.errors import ImportSourceError, InvalidArgumentError, NodeNotFoundError
from md_cg.transfer import import_nodes


def _pair(root: Path) -> tuple[MdCG, MdCG]:
    return (
        MdCG(root, scope=Scope(agent="alice"), refresh_interval=0),
        MdCG(root, scope=Scope(agent="bob"), refresh_interval=0),
    )


def test_negative_memory_of_the_same_text_gets_an_id_per_scope(tmp_path: Path) -> None:
    """Alice could not record a hypothesis Bob had rejected (DuplicateIdError), and the
    refusal told her Bob held that exact text."""
    alice, bob = _pair(tmp_path / "m")
    theirs = bob.add_rejected("Bob salary is paid weekly", "HR said monthly")
    mine = alice.add_rejected("Bob salary is paid weekly", "alice reason")
    assert mine.id != theirs.id and mine.id.startswith("rej_") and theirs.id.startswith("rej_")
    assert (
        alice.add_unresolved("Is the office open on Sunday?").id
        != bob.add_unresolved("Is the office open on Sunday?").id
    )
    assert alice.ids() == sorted([mine.id, alice.add_unresolved("Is the office open on Sunday?").id])
    with MdCG(tmp_path / "plain") as plain:  # a handle without scope keeps the ids it always had
        assert (
            plain.add_rejected("x is y", "no").id
            == "rej_" + __import__("hashlib").sha256(b"x is y").hexdigest()[:16]
        )
    alice.close()
    bob.close()


def test_recall_figures_and_resurfacing_leave_negative_memory_out(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        for i in range(3):
            s.add(id=f"k{i}", layer="knowledge", body=f"note {i}", created_at="2020-01-01T00:00:00Z")
        rej = s.add_rejected("the moon is cheese", "it is rock")
        unr = s.add_unresolved("why is the sky blue?")
        stats = s.recall_stats()
        assert stats.zombie.active_count == 3
        shown = {s.resurface(today=date(2026, 1, 1), seed=n).id for n in range(40)}  # type: ignore[union-attr]
        assert shown <= {"k0", "k1", "k2"} and rej.id not in shown and unr.id not in shown


def test_record_access_refuses_ids_the_caller_does_not_see(tmp_path: Path) -> None:
    alice, bob = _pair(tmp_path / "m")
    bob.add(id="b1", layer="self", body="Bob note")
    alice.add(id="a1", layer="self", body="Alice note")
    for bad in ("b1", "nonexistent"):
        with pytest.raises(NodeNotFoundError) as err:
            alice.record_access(["a1", bad])
        assert str(err.value) == f"no node with id {bad!r} in this store"
    alice.record_access(["a1"])
    alice.compact_access()
    assert bob.access_counts() == {} and alice.access_counts() == {"a1": 1}
    alice.close()
    bob.close()


def test_resurfacing_uses_the_days_own_daylight_saving_offset(tmp_path: Path) -> None:
    """Written at 00:30 summer time on 15 July (22:30 UTC on the 14th) and read in
    winter: it belonged to the 14th (today's offset), so it came up a day late."""
    code = """
import sys
from datetime import date
from md_cg import MdCG
s = MdCG(sys.argv[1])
s.add(id="summer_note", layer="self", body="Wrote the wedding speech", created_at="2026-07-14T22:30:00Z")
for i in range(5):
    s.add(id=f"x{i}", layer="self", body=f"filler {i}", created_at="2026-03-01T10:00:00Z")
p = s.resurface(today=date(2027, 7, 15))
print(p.id, p.tier, p.date.isoformat())
"""
    env = {**python_env(), "TZ": "CET-1CEST,M3.5.0,M10.5.0/3"}  # Berlin's rule, no tz database needed
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["summer_note", "1", "2026-07-15"]


def test_a_created_at_that_is_no_calendar_day_does_not_stop_resurfacing(tmp_path: Path) -> None:
    """A migrated note with created_at in milliseconds (year 55,000) made `mdcg today` fail.
    Every write refuses such a time now (session 26); a file an earlier version wrote holds it."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="ms", layer="self", body="far future")
        ms = tmp_path / "m" / s.entry("ms").path
        ms.write_text('---\nid: "ms"\nlayer: "self"\ncreated_at: 1700000000000.0\n---\nfar future\n')
        s.sync()
        assert s.get("ms").created_at == 1700000000000.0
        s.add(id="ok", layer="self", body="a note", created_at="2025-06-01T12:00:00Z")
        picked = s.resurface(today=date(2026, 6, 1))
        assert picked is not None and picked.id == "ok"


def test_a_routine_sweep_leaves_the_store_healthy(tmp_path: Path) -> None:
    """A temporary note another memory pointed at was swept: its edge dangled and health
    (and `mdcg health`, exit 1) reported the store unhealthy after ordinary expiry."""
    with MdCG(tmp_path / "m", ttl_seconds=2) as s:  # (notes is added before meet expires)
        s.add(id="meet", layer="contextual", body="Meeting with Ana", tier="temp")
        s.add(
            id="notes",
            layer="knowledge",
            body="Notes of the meeting",
            edges=[{"target": "meet", "type": "causal"}],
        )
        time.sleep(max(0.0, s.get("meet").expires_at - time.time()) + 0.1)
        assert s.sweep(dry_run=False).removed == ("meet",)
        assert s.health().findings == ()
        s.add(id="gone", layer="knowledge", body="x")
        s.add(id="links", layer="knowledge", body="y", edges=[{"target": "gone", "type": "causal"}])
        s.delete("gone", force=True)  # a delete keeps no tombstone: the dangling edge is named
        assert [(f.kind, f.node_id) for f in s.health().findings] == [("dangling_edge", "links")]


def test_a_scoped_import_names_each_record_of_another_scope(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    records = [
        {"id": "a1", "body": "alice's", "agent_scope": "alice"},
        {"id": "c1", "body": "carol's"},
        {"id": "a2", "body": "alice's too", "agent_scope": "alice"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with MdCG(tmp_path / "m", scope=Scope(agent="carol")) as s:
        with pytest.raises(ImportSourceError) as err:
            import_nodes(s, str(src))
        text = str(err.value)
        assert "2 bad record(s)" in text and "line 1" in text and "line 3" in text
        assert "agent_scope 'alice' is outside this store handle's scope ('carol')" in text
        assert s.ids() == []
        report = import_nodes(s, str(src), skip_bad=True)
        assert report.ids == ["c1"] and s.ids() == ["c1"]
    assert os.path.isdir(tmp_path / "m")


# -- second round: what the first fixes missed ---------------------------------------------


def test_an_agents_edit_of_a_shared_memory_leaves_it_shared(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as trusted:
        trusted.add(id="shared1", layer="knowledge", body="The office opens at 9")
    alice, bob = _pair(tmp_path / "m")
    bob.update("shared1", importance=0.9)
    assert bob.get("shared1").agent_scope is None and bob.get("shared1").importance == 0.9
    assert alice.get("shared1").importance == 0.9  # still everyone's
    alice.close()
    bob.close()


def test_a_public_only_handle_reads_and_writes_only_public_memories(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as t:
        t.add(id="n_norm", layer="self", body="normal note about tea")
        t.add(id="n_norm2", layer="self", body="another normal tea", sensitivity="normal")
        t.add(id="n_priv", layer="self", body="private tea", sensitivity="private")
        t.add(id="n_pub", layer="self", body="public tea", sensitivity="public")
    with MdCG(tmp_path / "m", scope=Scope(max_sensitivity="public")) as p:
        assert p.ids() == ["n_pub"] and len(p) == 1 and "n_norm" not in p
        assert [r.id for r in p.search("tea", record=False)[0]] == ["n_pub"]
        with pytest.raises(NodeNotFoundError):
            p.get("n_norm")
        assert p.add_rejected("Cache is slow", "it is fast").sensitivity == "public"
        assert p.health().nodes == 2


def test_removing_and_superseding_never_names_or_hides_another_scopes_memory(tmp_path: Path) -> None:
    root = tmp_path / "m"
    alice, bob = _pair(root)
    alice.add(id="a_old", layer="self", body="Alice lives in Porto")
    alice.add(id="a1", layer="self", body="Alice likes tea")
    bob.add(id="b_new", layer="self", body="Bob note")
    bob.add(id="b3", layer="self", body="Bob links", edges=[{"target": "a1", "type": "similar"}])
    with MdCG(root) as trusted:
        with pytest.raises(InvalidArgumentError) as err:  # bob's note would hide alice's fact from her
            trusted.supersede("a_old", "b_new")
        assert str(err.value).startswith("node 'b_new' is seen by fewer readers than 'a_old'")
        trusted.add(id="shared2", layer="self", body="The office is in Lisbon")
    with pytest.raises(InvalidArgumentError):
        bob.supersede("shared2", "b_new")
    assert alice.get("shared2").valid_until is None
    gone = alice.forget("a1", "tidy")
    assert gone.incoming == ()  # b3's edge is bob's: not named
    assert alice.tombstones()[-1]["dangling"] == []
    alice.close()
    bob.close()


def test_left_closed_counts_only_live_successors_and_names_only_visible_facts(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(id="o", layer="self", body="old fact")
        s.add(id="n1", layer="self", body="new fact")
        s.add(id="n2", layer="self", body="another new fact", edges=[{"target": "o", "type": "supersedes"}])
        s.supersede("o", "n1")
        s.archive(["n2"])  # an archived successor no longer stands in for the fact
        assert s.delete("n1", force=True).left_closed == ("o",)


def test_the_only_successor_gets_no_expiry_through_expires_at_either(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add(id="p", layer="self", body="The user lives in Porto")
        s.add(id="q", layer="self", body="The user lives in Lisbon")
        s.supersede("p", "q")
        with pytest.raises(InvalidArgumentError, match=r"^node 'q' superseded 'p': as a temporary memory"):
            s.update("q", expires_at=time.time() + 5)
        assert s.get("q").expires_at is None


def test_a_case_twin_of_another_scopes_id_is_refused_without_naming_it(tmp_path: Path) -> None:
    from md_cg import DuplicateIdError

    alice, bob = _pair(tmp_path / "m")
    bob.add(id="Report-Q3", layer="knowledge", body="bob's report")
    with pytest.raises(DuplicateIdError) as err:
        alice.add(id="report-q3", layer="knowledge", body="alice's report")
    assert str(err.value) == (
        "node id 'report-q3' is taken by a memory outside this handle's scope; choose another id"
    )
    alice.close()
    bob.close()


def test_reflections_of_a_more_sensitive_handle_stay_with_it(tmp_path: Path) -> None:
    root = tmp_path / "m"
    secret = MdCG(root, scope=Scope(max_sensitivity="secret"), refresh_interval=0)
    public = MdCG(root, scope=Scope(max_sensitivity="public"), refresh_interval=0)
    secret.reflect("CEO Jane salary", ["ACCEPT"])
    public.reflect("lunch menu", ["DEFER"])
    assert [r.query for r in public.reflections()] == ["lunch menu"]
    assert [r.query for r in secret.reflections()] == ["CEO Jane salary", "lunch menu"]
    assert (secret.last_d().t, public.last_d().t) == (0, 0)  # type: ignore[union-attr]
    secret.close()
    public.close()


def test_a_scoped_import_lists_ids_another_scope_holds_as_bad_records(tmp_path: Path) -> None:
    alice, bob = _pair(tmp_path / "m")
    bob.add(id="bob-plan", layer="knowledge", body="bob's plan")
    bob.add(id="Bob-Case", layer="knowledge", body="bob's case")
    src = tmp_path / "in.jsonl"
    records = [{"id": "bob-plan", "body": "x"}, {"id": "bob-case", "body": "y"}, {"id": "imp1", "body": "z"}]
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    dry = import_nodes(alice, str(src), skip_bad=True, dry_run=True)
    assert dry.ids == ["imp1"] and [b.where for b in dry.bad] == ["line 1", "line 2"]
    done = import_nodes(alice, str(src), skip_bad=True, overwrite=True)
    assert done.ids == ["imp1"] and alice.ids() == ["imp1"]
    assert {b.reason for b in done.bad} == {
        "id 'bob-plan' is taken by a memory outside this handle's scope; choose another id",
        "id 'bob-case' is taken by a memory outside this handle's scope; choose another id",
    }
    alice.close()
    bob.close()


# -- third round -----------------------------------------------------------------------


def test_round_three_overwrite_rename_sync_and_narrowing_keep_scopes_apart(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as t:
        t.add(id="sh1", layer="knowledge", body="The office opens at 9")
        t.add(id="sh2", layer="knowledge", body="Lunch is at noon")
    alice, bob = _pair(root)
    # overwrite of a shared memory keeps it shared (it moved into the writer's scope)
    alice.add(id="sh1", layer="knowledge", body="The office opens at 8", overwrite=True)
    alice.add_many([Node(id="sh2", layer="knowledge", body="Lunch is at one")], overwrite=True)
    assert sorted(bob.ids()) == ["sh1", "sh2"] and bob.get("sh1").body == "The office opens at 8"
    # an agent may not narrow what others read
    with pytest.raises(InvalidArgumentError, match="may not narrow a memory it shares"):
        alice.update("sh1", agent_scope="alice")
    alice.add(id="mine", layer="self", body="my note")
    # rename re-points only the renamer's edges; another scope's file is left byte for byte
    bob.add(id="bobnode3", layer="self", body="bob's")
    alice.add(id="alink", layer="self", body="a link", edges=[{"target": "bobnode3", "type": "similar"}])
    alink = (root / alice.entry("alink").path).read_bytes()
    bob.rename("bobnode3", "bob-project-titan")
    assert (root / alice.entry("alink").path).read_bytes() == alink
    with pytest.raises(InvalidArgumentError) as err:
        alice.rename("mine", "Bob-Project-Titan")
    assert str(err.value) == (  # the id asked for, never bob's spelling or path
        "cannot rename 'mine' to 'Bob-Project-Titan': the id is taken by a memory outside this "
        "handle's scope; choose another id"
    )
    # sync and refresh name no other scope's ids
    bob.add(id="bobsecret", layer="self", body="secret")
    assert "bobsecret" not in alice.refresh()
    rel = bob.entry("bobsecret").path
    (root / rel).with_name("bobhand.md").write_text(
        "---\nid: bobhand\nlayer: self\nagent_scope: bob\n---\nhand\n"
    )
    report = alice.sync()
    assert report.added == () and report.malformed == ()
    assert [f for f in alice.health().findings if f.node_id and f.node_id.startswith("bob")] == []
    alice.close()
    bob.close()


def test_a_public_handles_negative_memory_does_not_collide_with_a_normal_ones(tmp_path: Path) -> None:
    root = tmp_path / "m"
    normal = MdCG(root, scope=Scope(agent="alice"))
    public = MdCG(root, scope=Scope(agent="alice", max_sensitivity="public"))
    a = normal.add_rejected("the moon is cheese", "rock")
    b = public.add_rejected("the moon is cheese", "x")
    assert a.id != b.id and b.sensitivity == "public"
    normal.close()
    public.close()


def test_another_scopes_near_copies_do_not_crowd_out_the_callers_own(tmp_path: Path) -> None:
    """identical/add_unique looked at the whole store's best ten hits before the visibility
    filter: ten of Bob's notes made Alice's own copy invisible and she stored a duplicate."""
    alice, bob = _pair(tmp_path / "m")
    text = "Coffee order for the Zanzibar office: two flat whites"
    alice.add(id="acoffee", layer="knowledge", body=text)
    for i in range(12):
        bob.add(id=f"b{i}", layer="knowledge", body=" ".join([text] * 3) + f" {i}")
    assert alice.identical(text) == ["acoffee"]
    node, created = alice.add_unique(body=text, layer="knowledge")
    assert (node.id, created) == ("acoffee", False)
    alice.close()
    bob.close()


# -- fourth round -------------------------------------------------------------------------


def test_round_four_stale_handles_overwrite_narrowing_and_what_sync_tells(tmp_path: Path) -> None:
    root = tmp_path / "m"
    stale = MdCG(root, scope=Scope(agent="A", workspace="W"), refresh_interval=None)
    stale.ids()
    with MdCG(root) as t:  # another handle (another process, for this one) adds a shared fact
        t.add(id="team-fact", layer="knowledge", body="The build runs at 6")
        t.add(id="shared2", layer="knowledge", body="Deploys on Fridays")
    stale.add(id="team-fact", layer="knowledge", body="The build runs at 7", overwrite=True)
    with pytest.raises(InvalidArgumentError, match="may not narrow a memory it shares"):
        stale.add(id="shared2", layer="knowledge", body="mine now", agent_scope="A", overwrite=True)
    with MdCG(root, scope=Scope(agent="B", workspace="W")) as b:
        assert (
            b.get("team-fact").body == "The build runs at 7" and b.get("shared2").body == "Deploys on Fridays"
        )
        b.add(id="b1", layer="knowledge", body="bob's")
        rel = b.entry("b1").path
    stale.close()
    a = MdCG(root, scope=Scope(agent="A", workspace="W"), refresh_interval=0)
    a.add(id="a3", layer="knowledge", body="alice's a3")
    # B's file holding A's id: the losing copy is B's, so A is not told its path
    (root / rel).with_name("b-acquisition-plan.md").write_text(
        "---\nid: a3\nlayer: knowledge\nagent_scope: B\n---\nsecret\n", encoding="utf-8"
    )
    report = a.sync()
    assert (report.duplicates, report.twins, report.withheld) == ((), (), 1)  # counted, not named
    assert [(f.kind, f.path, f.node_id) for f in a.health().findings] == [("withheld", None, None)]
    (root / rel).with_name("b2.md").write_text("---\nid: b2\nlayer: knowledge\nagent_scope: B\n---\nb2\n")
    assert a.sync_if_changed(0) is None  # only another scope's file changed: nothing to tell
    a.close()


@pytest.mark.parametrize("folded", [False, True])
def test_a_forgotten_memorys_accesses_do_not_count_for_its_id_reused(tmp_path: Path, folded: bool) -> None:
    """Accesses of a forgotten memory counted for a new memory given its id (access
    counts, the fold, recall statistics); now they stop at the forget, folded or not."""
    with MdCG(tmp_path / "m") as s:
        s.add(Node(id="m1", layer="knowledge", body="old memory"))
        s.add(Node(id="m2", layer="knowledge", body="another memory"))
        s.record_access(["m1", "m2"])
        s.record_access(["m1"])
        if folded:
            assert s.compact_access() == {"m1": 2, "m2": 1}
        s.forget("m1", "the user asked")
        time.sleep(0.01)  # the new memory's accesses come after the tombstone's time
        s.add(Node(id="m1", layer="knowledge", body="a new memory under the same id"))
        s.record_access(["m1"])
        assert s.access_counts() == {"m1": 1, "m2": 1}
        assert s.access_counts(["m1", "m2"]) == {"m1": 1, "m2": 1}
        stats = s.recall_stats()
        assert [(r.id, r.count) for r in stats.top_recalled] == [("m1", 1), ("m2", 1)]
        assert stats.coverage.events_in_window == 3  # the events themselves stay
        assert s.compact_access() == ({"m1": 1} if folded else {"m1": 1, "m2": 1})
        counts = json.loads((tmp_path / "m" / ".mdcg" / "access" / "counts.json").read_bytes())
        assert counts["counts"] == {"m1": 1, "m2": 1}
        assert s.access_counts() == {"m1": 1, "m2": 1}
        s.record_access(["m1"])
        assert s.access_counts(["m1"]) == {"m1": 2}


def test_a_renamed_memorys_accesses_do_not_count_for_a_new_memory_under_its_old_id(tmp_path: Path) -> None:
    """The forget rule did not cover renames: m1's three searches counted for a new m1
    (reviewer's find)."""
    with MdCG(tmp_path / "m") as s:
        s.add(Node(id="m1", layer="knowledge", body="alpha bravo charlie fact"))
        for _ in range(3):
            s.search("alpha bravo")
        s.rename("m1", "m2")
        time.sleep(0.01)
        s.add(Node(id="m1", layer="knowledge", body="totally different delta echo"))
        assert s.access_counts() == {} and s.access_counts(["m1", "m2"]) == {"m1": 0, "m2": 0}
        s.record_access(["m1"])
        assert s.compact_access() == {"m1": 1} and s.access_counts() == {"m1": 1}
