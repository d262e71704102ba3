"""Retention on the write paths, expiry on the read paths, and the sweep."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.errors import InvalidArgumentError, NodeNotFoundError
from md_cg.temporal import DEFAULT_TTL_SECONDS

ONE_OFF = "Set an alarm for 7 tomorrow morning"  # a one-off with a time anchor
DURABLE = "The user lives in Lisbon"


def _decisions(s: MdCG) -> list[dict]:
    return s.log("retention").read()


def test_add_decides_temp_for_an_anchored_one_off_and_logs_the_rule(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m", ttl_seconds=3600) as s:
        before = time.time()
        n = s.add(id="alarm", layer="contextual", body=ONE_OFF, temporal="one_off")
        assert n.retention_tier == "temp"
        assert before + 3600 <= n.expires_at <= time.time() + 3600
        d = s.add(id="home", layer="self", body=DURABLE, temporal="durable")
        assert (d.retention_tier, d.expires_at) == ("long", None)
        u = s.add(id="plain", layer="self", body="binary search halves the range")
        assert (u.retention_tier, u.expires_at, u.retention_reason) == (None, None, None)  # unassigned = long
        assert "retention" not in s.read_text("plain")
        log = _decisions(s)
        assert [(r["id"], r["rule"], r["tier"]) for r in log] == [
            ("alarm", "temporal_one_off", "temp"),
            ("home", "temporal_durable", "long"),
            ("plain", "default_long", "long"),
        ]
        # Who decided (the rule) is kept apart from why the node is kept (its reason).
        assert s.get("alarm").retention_reason != "temporal_one_off"
        assert s.get("alarm").retention_reason


def test_a_veto_keeps_an_agreement_long(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        n = s.add(id="promise", layer="self", body="We agreed to meet tomorrow at 3", temporal="one_off")
        assert n.retention_tier == "long" and n.expires_at is None
        assert _decisions(s)[-1]["rule"].startswith("veto_")


def test_explicit_tier_wins_and_ttl_comes_from_the_store_file(tmp_path: Path) -> None:
    root = tmp_path / "m"
    (root / ".mdcg").mkdir(parents=True)
    (root / ".mdcg" / "retention.json").write_text('{"ttl_seconds": 60}')
    with MdCG(root) as s:
        assert s.ttl_seconds == 60
        before = time.time()
        n = s.add(id="t", layer="self", body=DURABLE, temporal="durable", tier="temp")
        assert n.retention_tier == "temp" and before + 60 <= n.expires_at <= time.time() + 60
        assert _decisions(s)[-1]["rule"] == "explicit_tier"
        k = s.add(Node(id="k", layer="self", body=ONE_OFF, temporal="one_off", retention_tier="long"))
        assert (k.retention_tier, k.expires_at) == ("long", None)
    with MdCG(root, ttl_seconds=5) as s:
        assert s.ttl_seconds == 5
    (root / ".mdcg" / "retention.json").write_text('{"ttl_seconds": -1}')
    with pytest.raises(InvalidArgumentError, match=r"retention\.json"), MdCG(root) as s:
        s.add(id="x", layer="self", body="x")
    with pytest.raises(InvalidArgumentError, match="ttl_seconds"):
        MdCG(root, ttl_seconds=0)
    assert DEFAULT_TTL_SECONDS == 7 * 86400


def test_update_redecides_and_keeps_the_expiry(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        n = s.add(id="a", layer="contextual", body=ONE_OFF, temporal="one_off")
        s.update("a", body=ONE_OFF + " (snooze twice)")
        assert s.get("a").expires_at == n.expires_at  # an edit does not extend its life
        s.update("a", temporal="durable")
        got = s.get("a")
        assert (got.retention_tier, got.expires_at) == ("long", None)
        s.update("a", importance=0.3)  # no re-decision for other fields
        assert [r["rule"] for r in _decisions(s)] == [
            "temporal_one_off",
            "temporal_one_off",
            "temporal_durable",
        ]


def test_verbatim_import_path_does_not_decide(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        s.add_many([Node(id="m1", layer="contextual", body=ONE_OFF, temporal="one_off")], stamp=False)
        assert s.get("m1").retention_tier is None and s.get("m1").expires_at is None
        assert _decisions(s) == []


def _expired(s: MdCG, node_id: str, layer: str = "contextual", body: str = "", **kw: object) -> None:
    with pytest.warns(RuntimeWarning, match="is already past: the memory is hidden"):
        s.add(Node(id=node_id, layer=layer, body=body or f"okapi {node_id}", retention_tier="temp",
                   expires_at=time.time() - 10, **kw))  # fmt: skip


def test_an_expired_node_disappears_from_every_read_without_a_write(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="live", layer="contextual", body="okapi live", edges=[{"target": "old", "type": "causal"}])
        _expired(s, "old", layer="knowledge", tags=["domain:zoo"])
        before = {p: p.stat().st_mtime_ns for p in root.rglob("*.md")}
        with pytest.raises(NodeNotFoundError) as hidden:
            s.get("old")
        assert hidden.value.hidden == "expired"
        assert str(hidden.value).startswith(
            "no node with id 'old' in this store (it is a temporary memory that expired at 20"
        )
        assert str(hidden.value).endswith("Z)")
        assert "old" not in s and len(s) == 1 and s.ids() == ["live"]
        assert [e.id for e in s.list_nodes()] == ["live"]
        assert {r.id for r in s.search("okapi", record=False)[0]} == {"live"}
        assert [(n.id, n.exists) for n in s.neighbours("live")] == [("old", False)]
        assert s.bucket_sizes() == {}
        assert s.get("old", include_expired=True).body == "okapi old"
        assert {e.id for e in s.list_nodes(include_expired=True)} == {"old", "live"}
        report = s.health()
        assert [(f.kind, f.node_id) for f in report.by_kind("expired")] == [("expired", "old")]
        assert report.nodes == 1
        assert {p: p.stat().st_mtime_ns for p in root.rglob("*.md")} == before


def test_a_node_expires_while_the_handle_is_open(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m", ttl_seconds=1.0) as s:  # (0.3 s could pass before ids() on a loaded machine)
        s.add(id="soon", layer="contextual", body=ONE_OFF, temporal="one_off")
        assert s.ids() == ["soon"]
        time.sleep(max(0.0, s.get("soon").expires_at - time.time()) + 0.05)
        assert s.ids() == [] and "soon" not in s


def test_sweep_of_a_mixed_store_removes_exactly_the_expired_temp_nodes(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        expired = {f"x{i}" for i in range(5)}
        for i in sorted(expired):
            _expired(s, i)
        s.add(
            id="future", layer="contextual", body="okapi", retention_tier="temp", expires_at=time.time() + 999
        )
        # Past an expiry but long (a file that says so): the expiry is void, shown, never swept.
        hand = Node(id="hand", layer="self", body="kept", retention_tier="long", expires_at=time.time() - 5)
        s.add_many([hand], stamp=False)
        s.add(id="plain", layer="self", body="no tier given")
        s.add_many([Node(id="imported", layer="self", body="verbatim")], stamp=False)
        _expired(s, "archived_temp")
        s.archive(["archived_temp"])
        _expired(s, "anchor_temp", layer="anchor")
        expired.add("anchor_temp")
        files_before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))
        dry = s.sweep()
        assert dry.dry_run and set(dry.expired) == expired and dry.removed == ()
        assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == files_before
        done = s.sweep(dry_run=False)
        assert set(done.removed) == expired and set(done.expired) == expired
        survivors = {"future", "hand", "plain", "imported", "archived_temp"}
        assert "hand" in s.ids() and s.get("hand").expires_at is not None
        with MdCG(root) as fresh:
            assert set(fresh.ids(include_expired=True, include_archived=True)) == survivors
        stones = [t for t in s.tombstones() if t.get("event") == "sweep"]
        assert {t["id"] for t in stones} == expired
        assert all(t["reason"] == "expired" and "body" not in t for t in stones)
        assert not any("okapi" in str(t) for t in stones)
        assert s.sweep(dry_run=False).removed == ()


def test_sweep_skips_a_node_renewed_since_it_was_listed(tmp_path: Path) -> None:
    from md_cg import retention

    with MdCG(tmp_path / "m") as s:
        _expired(s, "a")
        _expired(s, "b")
        listed = retention.expired_ids(s._engine, None, time.time())
        s.update("a", retention_tier="long")  # renewed meanwhile
        from md_cg import forgetting

        gone = forgetting.forget_many(
            s._engine, s.log("audit"), listed, "expired", force=True,
            keep=retention.sweepable(None),
        )  # fmt: skip
        assert [d.node.id for d in gone] == ["b"]
        assert s.ids() == ["a"]


def test_read_only_handle_can_dry_run_but_not_sweep(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        _expired(s, "x")
    with MdCG(root, read_only=True) as ro:
        assert ro.sweep().expired == ("x",)
        with pytest.raises(Exception, match="read-only"):
            ro.sweep(dry_run=False)
    assert os.path.exists(root / "contextual" / "x.md")


def test_search_returns_the_exact_top_k_of_visible_nodes(tmp_path: Path) -> None:
    # Expired nodes score highest; they must never take a slot, and the k visible
    # results must be exactly those of a store that never held the expired ones.
    live = [
        Node(id=f"live{i:02d}", layer="self", body="okapi " * (1 + i % 4) + f"note {i}") for i in range(30)
    ]
    with MdCG(tmp_path / "ref") as ref:
        ref.add_many([n.copy() for n in live])
        want = [r.id for r in ref.search("okapi", k=7, record=False)[0]]
    with MdCG(tmp_path / "m") as s:
        s.add_many([n.copy() for n in live])
        for i in range(40):
            _expired(s, f"gone{i:02d}", body="okapi okapi okapi okapi okapi okapi")
        got = [r.id for r in s.search("okapi", k=7, record=False)[0]]
        shown = [r.id for r in s.search("okapi", k=7, record=False, include_superseded=True)[0]]
    assert got == want and shown == want and len(want) == 7


def test_anchor_memories_are_never_made_temporary_by_a_guess(tmp_path: Path) -> None:
    """`mdcg add --layer anchor "Tomorrow I start as ..."` was made temporary by the one-off
    marker and swept a week later, though anchor/ is protected from forgetting."""
    with MdCG(tmp_path / "m") as s:
        one_off = "Tomorrow I start as the user's assistant: my core identity."
        kept = s.add(id="core", layer="anchor", body=one_off)
        assert (kept.retention_tier, kept.expires_at) == ("long", None)
        assert kept.retention_reason == (
            "anchor/ holds what must not be forgotten: never made temporary (the one-off marker "
            "'tomorrow' (n1_relative_day) opens the text and no veto marker is in the text)"
        )
        assert s.add(id="plain", body=one_off).retention_tier == "temp"  # the same text elsewhere
        asked = s.add(id="asked", layer="anchor", body=one_off, tier="temp")
        assert asked.retention_tier == "temp" and asked.expires_at is not None
        moved = s.update("plain", layer="anchor", body=one_off + " ")  # re-decided in anchor/
        assert (moved.retention_tier, moved.expires_at) == ("long", None)


def test_an_edit_keeps_a_tier_the_caller_chose_and_anchor_keeps_what_moves_in(tmp_path: Path) -> None:
    """`update --body` put a memory kept with --tier long back on a 7-day timer; a temporary
    memory moved into anchor/ stayed temporary (and sweep would remove it)."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="l1", body="tomorrow at 9 gym, remember", tier="long")
        edited = s.update("l1", body="tomorrow at 9 gym")  # a one-off text, but the caller chose long
        assert (edited.retention_tier, edited.expires_at) == ("long", None)
        assert edited.retention_reason == "the caller asked for the long tier"
        s.add(id="t1", body="tomorrow at 9 call the boss")
        assert s.get("t1").retention_tier == "temp"
        moved = s.update("t1", layer="anchor")
        assert (moved.retention_tier, moved.expires_at) == ("long", None)
        assert moved.retention_reason.startswith("anchor/ holds what must not be forgotten")
        s.add(id="t2", body="tomorrow at 9 call", tier="temp")
        kept_temp = s.update("t2", layer="anchor")  # asked for: stays temp, expiry kept
        assert kept_temp.retention_tier == "temp" and kept_temp.expires_at == s.get("t2").expires_at
        s.add(id="t3", body="tomorrow at 10 call")
        first = s.get("t3").expires_at
        again = s.update("t3", body="tomorrow at 11 call")  # decided by the words, and its expiry kept
        assert (again.retention_tier, again.expires_at) == ("temp", first)


def _forget_t1(root: str) -> None:
    with MdCG(root) as other:
        other.forget("t1", "done with it")


def test_a_sweep_skips_an_expired_node_another_process_removed_since_it_looked(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, ttl_seconds=0.05) as s:
        s.add_many(
            [Node(id=f"t{i}", layer="self", body=f"temp note {i}", retention_tier="temp") for i in range(3)]
        )
    time.sleep(0.2)
    with MdCG(root, refresh_interval=60) as a:
        assert sorted(a.ids(include_expired=True)) == ["t0", "t1", "t2"]
        child = multiprocessing.get_context("fork").Process(target=_forget_t1, args=(str(root),))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        report = a.sweep(dry_run=False)
        assert sorted(report.removed) == ["t0", "t2"]
    with MdCG(root, read_only=True) as r:
        assert r.ids(include_expired=True) == []
        assert sorted(t["id"] for t in r.tombstones()) == ["t0", "t1", "t2"]


def test_a_sweep_keeps_a_file_edited_by_hand_to_stay(tmp_path: Path) -> None:
    """The sweep's look under the lock reads a file changed since it was indexed: a temp note a
    person made long (tier, no expiry) is kept, edit and all (docs/retention.md: long is never swept)."""
    root = tmp_path / "m"
    with MdCG(root, ttl_seconds=0.2) as s:
        s.add(Node(id="t", layer="self", body="temporary note"), tier="temp")
        s.add(Node(id="u", layer="self", body="another temporary note"), tier="temp")
        path = Path(s.path_of("t"))
    time.sleep(0.4)
    lines = [
        line.replace('retention_tier: "temp"', 'retention_tier: "long"')
        for line in path.read_text().splitlines()
        if not line.startswith("expires_at")
    ]
    edited = "\n".join(lines).replace("temporary note", "temporary note, kept by hand") + "\n"
    path.write_text(edited)
    with MdCG(root) as s:
        assert s.sweep(dry_run=False).removed == ("u",)
        assert s.get("t").retention_tier == "long"
    assert path.read_text() == edited


def test_an_expiry_given_to_add_asks_for_the_temp_tier(tmp_path: Path) -> None:
    """Found in session 24 (a helper): add(expires_at=...) without a tier dropped the
    expiry, so the memory never expired; update kept it."""
    from md_cg.node import quantise_instant

    s = MdCG(tmp_path / "m")
    when = time.time() + 1000
    n = s.add(id="x", body="the user likes tea", expires_at=when)
    assert (n.retention_tier, n.expires_at) == ("temp", quantise_instant(when))
    assert n.retention_reason == "the caller asked for the temp tier"
    assert s.get("x").expires_at == quantise_instant(when)
    assert s.add(id="y", body="the user likes coffee").expires_at is None
