"""Retention semantics found by the session-25 review: a tier the caller chose with its
own reason, the expiry a replacing write keeps, a successor made temporary by an
overwrite, an expiry on a memory that is not temporary, naive datetimes."""

from __future__ import annotations

import json
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from md_cg import MdCG, Node, temporal
from md_cg.errors import InvalidArgumentError, InvalidNodeError
from md_cg.merge import merge_node_files
from md_cg.node import quantise_instant

TTL = 3600.0
REASON = "the user said: keep this for ever"


def test_a_tier_chosen_with_a_reason_of_its_own_stands_through_an_edit(tmp_path: Path) -> None:
    """The choice was known by the default reason's exact words: a long memory given a
    reason of the caller's own went back on a timer at the first edit of its text."""
    with MdCG(tmp_path / "m", ttl_seconds=TTL) as s:
        s.add(id="k", body="Plumber visit notes", tier="long", retention_reason=REASON)
        edited = s.update("k", body="Plumber visit notes: tomorrow bring the invoice")
        assert (edited.retention_tier, edited.expires_at, edited.retention_reason) == ("long", None, REASON)
        s.add(id="t", body="Notes for the week", tier="temp", retention_reason="only this sprint")
        first = s.get("t").expires_at
        again = s.update("t", body="Notes for the week, the durable kind: the user is left-handed")
        assert (again.retention_tier, again.expires_at, again.retention_reason) == (
            "temp",
            first,
            "only this sprint",
        )
        assert [r["rule"] for r in s.log("retention").read()][-2:] == ["explicit_tier", "explicit_tier"]
        s.add(id="w", body="tomorrow at 9 call the boss")  # decided by its words: decided again
        assert s.update("w", body="The user is left-handed").retention_tier is None


def test_was_asked_knows_every_sentence_the_decider_writes() -> None:
    rows = [json.loads(line) for line in Path("tests/data/temporal_labelled.jsonl").read_text().splitlines()]
    now, rules = 1.8e9, set()
    for row in rows:
        for kind in (row.get("temporal"), None, "durable", "recurring"):
            for protected in (False, True):
                d = temporal.decide_retention(text=row["text"], temporal=kind, now=now, protected=protected)
                rules.add(d.rule)
                assert not temporal.was_asked(d.reason), d.reason
    assert {"temporal_one_off", "default_long", "anchor_layer", "veto_no_anchor"} <= rules
    broken = temporal.Markers(veto={}, term={}, problem="x.json: invalid retention marker file: bad")
    d = temporal.decide_retention(text="tomorrow at 9", temporal="one_off", now=now, markers=broken)
    assert d.rule == "markers_unreadable" and not temporal.was_asked(d.reason)
    assert [temporal.was_asked(r) for r in (temporal.asked_reason("long"), REASON, "", "  ", None, 3)] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]


def test_a_replacing_add_of_new_text_never_inherits_an_expiry(tmp_path: Path) -> None:
    """An overwrite of new content took the old memory's expiry, even one already past:
    the memory was born expired (hidden, then swept). An explicit temp given to an
    expired memory by update stayed expired."""
    with MdCG(tmp_path / "m", ttl_seconds=TTL) as s:
        s.add(id="t", body="Call the plumber tomorrow", expires_at=time.time() + 0.2)
        s.add(id="u", body="Call the dentist tomorrow", expires_at=time.time() + 0.2)
        time.sleep(0.3)
        before = time.time()
        new = s.add(id="t", body="Pick up the parcel tomorrow", overwrite=True)
        temp = s.update("u", retention_tier="temp")
        after = time.time()
        for n in (new, temp):
            assert n.retention_tier == "temp" and before + TTL <= n.expires_at <= after + TTL
        assert s.ids() == ["t", "u"] and s.sweep().expired == ()
        # still ahead: an edit keeps it, a re-import of the same text keeps it, new text does not
        future = quantise_instant(time.time() + 500)
        s.add(id="r", body="Call the plumber tomorrow", expires_at=future)
        assert s.update("r", body="Call the plumber tomorrow at 9").expires_at == future
        same = Node(id="r", body="Call the plumber tomorrow at 9")
        assert s.add_many([same], overwrite=True, stamp=False, decide=True)[0].expires_at == future
        other = s.add(id="r", body="Book the plumber tomorrow", overwrite=True)
        assert other.retention_tier == "temp" and other.expires_at >= before + TTL


def _superseded(s: MdCG) -> None:
    s.add(id="old", body="The office wifi password is alpha")
    s.add(id="new", body="The office wifi password is bravo")
    s.supersede("old", "new")


REFUSED = (
    "node 'new' superseded 'old': as a temporary memory it would expire and leave that fact "
    "hidden for good; reopen the old fact first (valid_until None; mdcg update ID --reopen) or keep this one"
)


def test_a_replacing_add_may_not_make_the_only_successor_temporary(tmp_path: Path) -> None:
    """update refused it; add(overwrite=True) did not: once the successor went, neither
    fact was found again."""
    with MdCG(tmp_path / "m", ttl_seconds=TTL) as s:
        _superseded(s)
        text = s.read_text("new")
        body = "Tomorrow the office wifi password is bravo"
        for write in (
            lambda: s.add(id="new", body=body, overwrite=True, expires_at=time.time() + 1),
            lambda: s.add(id="new", body=body, overwrite=True, tier="temp"),
            lambda: s.add_many([Node(id="new", body=body, retention_tier="temp")], overwrite=True),
            lambda: s.add_many(
                [Node(id="new", body=body, expires_at=time.time() + 1)], overwrite=True, stamp=False
            ),
        ):
            with pytest.raises(InvalidArgumentError) as err:
                write()
            assert str(err.value) == REFUSED
        assert s.read_text("new") == text
        # A one-off by its words (no durable-fact word such as "password"): kept long.
        kept = s.add(id="new", body="Tomorrow the office wifi is bravo", overwrite=True)
        assert (kept.retention_tier, kept.expires_at) == ("long", None)
        assert kept.retention_reason.startswith("anchor/ holds what must not be forgotten")


def test_a_sweep_names_the_facts_it_left_closed(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        _superseded(s)

        def expire(n: Node) -> None:  # as a hand edit could (modify is not checked)
            n.retention_tier, n.expires_at = "temp", time.time() - 5

        s.modify("new", expire)
        assert s.sweep().left_closed == ()  # a dry run removes nothing
        report = s.sweep(dry_run=False)
        assert (report.removed, report.left_closed) == (("new",), ("old",))
        assert report.to_dict() == {
            "expired": ["new"],
            "removed": ["new"],
            "dry_run": False,
            "left_closed": ["old"],
            "kept": [],
        }


def test_an_expiry_asks_for_the_temp_tier_on_every_write_and_long_voids_it(tmp_path: Path) -> None:
    """update(expires_at=...) of a long memory left it long with an expiry: hidden for good,
    never swept, and health said sweep() would remove it; the verbatim path stored an
    expiry with no tier."""
    with MdCG(tmp_path / "m", ttl_seconds=TTL) as s:
        s.add(id="k", body="The user is left-handed", tier="long")
        # 1 s ahead: four writes and reads come before it (0.2 s could pass on a loaded machine)
        when = quantise_instant(time.time() + 1.0)
        timed = s.update("k", expires_at=when)
        assert (timed.retention_tier, timed.expires_at, timed.retention_reason) == (
            "temp",
            when,
            "the caller asked for the temp tier",
        )
        s.add_many([Node(id="v", body="x", expires_at=when)], stamp=False)
        assert (s.get("v").retention_tier, s.get("v").expires_at) == ("temp", when)
        s.add_many([Node(id="hand", body="y", retention_tier="long", expires_at=when)], stamp=False)
        with pytest.raises(InvalidArgumentError, match="an expires_at with retention_tier 'long'"):
            s.update("k", retention_tier="long", expires_at=when)
        time.sleep(max(0.0, when - time.time()) + 0.1)
        assert s.ids() == ["hand"]  # long: the expiry is void, the memory shown
        assert s.sweep().expired == ("k", "v")
        found = [(f.node_id, f.detail) for f in s.health().by_kind("expired")]
        detail = "hidden from reads since its expiry (temporary); a sweep removes it (`mdcg sweep`, sweep())"
        assert found == [("k", detail), ("v", detail)]
        assert s.sweep(dry_run=False).removed == ("k", "v") and s.ids() == ["hand"]


def test_the_merge_driver_merges_the_retention_fields_as_one_unit() -> None:
    def text(**fields: object) -> bytes:
        from md_cg import nodefile

        return nodefile.dumps(Node(id="n1", layer="knowledge", body="x\n", **fields)).encode()

    past = 1.7e9
    long = {"retention_tier": "long", "retention_reason": "the caller asked for the long tier"}
    temp = {
        "retention_tier": "temp",
        "expires_at": past,
        "retention_reason": "the caller asked for the temp tier",
    }
    later = {**temp, "expires_at": past + 60}
    for ours, theirs, want in (
        (long, temp, long),  # field by field: long with a past expiry
        (temp, long, long),
        (temp, later, later),
        (later, temp, later),
    ):
        result = merge_node_files(text(), text(**ours), text(**theirs), path="knowledge/n1.md")
        assert (result.clean, result.conflict, result.data) == (True, None, text(**want))
    one_side = merge_node_files(text(**temp), text(**temp), text(**long), path="knowledge/n1.md")
    assert one_side.data == text(**long)


def test_a_naive_datetime_is_refused_naming_the_field(tmp_path: Path) -> None:
    """A naive datetime was read as UTC: expires_at=datetime.now() + 1 hour west of
    Greenwich was already past, and the memory was written expired."""
    naive = datetime(2030, 1, 2, 3, 4, 5)
    said = (
        "node 'n': field 'expires_at' is a datetime without a time zone (2030-01-02T03:04:05): give it "
        "tzinfo (datetime.now(timezone.utc), or .astimezone() for local time), or seconds since the epoch"
    )
    with MdCG(tmp_path / "m") as s:
        s.add(id="a", body="aware")
        for write in (
            lambda: s.add(id="n", body="x", expires_at=naive),
            lambda: s.add(Node(id="n", body="x", valid_until=naive)),
            lambda: s.add_many([Node(id="n", body="x", created_at=naive)], stamp=False),
            lambda: s.update("n", expires_at=naive),
        ):
            with pytest.raises(InvalidNodeError) as err:
                write()
            assert str(err.value) == said.replace("'expires_at'", repr(err.value.field))
            assert err.value.field in ("expires_at", "valid_until", "created_at")
        with pytest.raises(InvalidNodeError, match="field 'expires_at' is a datetime without a time zone"):
            s.update("a", expires_at=naive)
        aware = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC) + timedelta(hours=8)
        assert s.add(id="n", body="x", expires_at=aware).expires_at == aware.timestamp()
        assert s.ids() == ["a", "n"]


def test_add_warns_of_an_expiry_already_past(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        with pytest.warns(RuntimeWarning) as caught:
            s.add(id="p", body="Check the oven", expires_at=1e9)
        assert [str(w.message) for w in caught] == [
            "md-cg: node 'p': expires_at 2001-09-09T01:46:40.000000Z is already past: the memory is "
            "hidden from every read at once and the next sweep removes it (`mdcg sweep`, sweep())"
        ]
        assert caught[0].filename == __file__
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            s.add_many([Node(id="q", body="imported", retention_tier="temp", expires_at=1e9)], stamp=False)
        assert s.ids(include_expired=True) == ["p", "q"]


def test_a_reason_alone_is_not_a_tier_choice(tmp_path: Path) -> None:
    """Review session 25 (D6): update(retention_reason=...) alone on a memory the decision
    made temporary stored a reason the decision did not write, which was_asked took for
    the caller's choice: a later edit into a lasting fact stayed temporary and was swept."""
    with MdCG(tmp_path / "m", ttl_seconds=TTL) as s:
        s.add(id="w", body="tomorrow at 9 call the boss")
        assert s.get("w").retention_tier == "temp"
        for tier in ("", None, "  "):  # review round 3: an empty tier is "decide again", no choice
            with pytest.raises(InvalidArgumentError, match="a retention_reason says why"):
                s.update("w", retention_reason="x", retention_tier=tier)
        with pytest.raises(InvalidArgumentError) as err:
            s.update("w", retention_reason="just a note")
        assert (err.value.name, str(err.value)) == (
            "retention_reason",
            "node 'w': a retention_reason says why the caller chose the tier; this memory's tier was "
            "decided by its text, and a reason alone would keep that tier through later edits: give "
            "retention_tier with it (the tier you choose)",
        )
        edited = s.update("w", body="The user is vegetarian and never eats meat")
        assert (edited.retention_tier, edited.expires_at, edited.retention_reason) == (None, None, None)
        # with a tier, or an expiry, the reason is the caller's choice; on a chosen tier a new reason is fine
        s.add(id="k", body="tomorrow at 9 call the boss")
        kept = s.update("k", retention_tier="long", retention_reason="the user said keep it")
        assert s.update("k", retention_reason="still wanted").retention_reason == "still wanted"
        assert s.update("k", body="The user is vegetarian").retention_tier == kept.retention_tier == "long"
        s.update("w", retention_reason=None)  # clearing is no choice


def test_update_warns_of_an_expiry_already_past(tmp_path: Path) -> None:
    """add warned of an expiry already past; update(expires_at=<past>) of a long memory made
    it temporary and hidden at once without a word."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="p", body="The user is left-handed", tier="long")
        with pytest.warns(RuntimeWarning) as caught:
            s.update("p", expires_at=1e9)
        assert [str(w.message) for w in caught] == [
            "md-cg: node 'p': expires_at 2001-09-09T01:46:40.000000Z is already past: the memory is "
            "hidden from every read at once and the next sweep removes it (`mdcg sweep`, sweep())"
        ]
        assert caught[0].filename == __file__
        assert s.ids() == [] and s.ids(include_expired=True) == ["p"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            s.update("p", expires_at=time.time() + 3600)
            s.update("p", body="The user is left-handed, writes with the left hand")
        assert s.ids() == ["p"]


def test_a_memory_left_in_merge_conflict_never_expires_until_settled(tmp_path: Path) -> None:
    """Review round 2 (session 25): a body conflict took one side's temp timer; once it ran
    out the memory was hidden and swept, the other side's lasting text with it."""
    from md_cg import nodefile

    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="n2", body="# Tea\n\nThe user likes tea")
        rel = s.entry("n2").path
    node = nodefile.read_node(root / rel)
    ours, theirs = (
        "Today the user wants green tea, buy some at lunch",
        "The user likes tea, and is allergic to milk",
    )
    node.body = f"# Tea\n\n<<<<<<< ours\n{ours}\n=======\n{theirs}\n>>>>>>> theirs\n"
    node.extra["merge_conflict"] = {"fields": {}, "body": True}
    node.retention_tier, node.expires_at = "temp", time.time() - 60
    (root / rel).write_text(nodefile.dumps(node), encoding="utf-8")
    with MdCG(root) as s:
        s.sync()
        assert s.ids() == ["n2"]
        assert s.sweep(dry_run=False).expired == ()
        assert [f.kind for f in s.health().findings if f.node_id == "n2"] == ["merge_conflict"]
        s.update("n2", body="# Tea\n\nThe user likes tea, and is allergic to milk")
        assert (s.get("n2").retention_tier, "n2" in s.ids()) == (None, True)
