"""Health findings for states two clones' writes merge into cleanly and that hide memories
from search (outside review, session 27): opposite supersedes (a cycle), and a supersede in
one clone against a forget of the successor in the other (closed with no successor)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_git_setup import _commit_push, _shared, _two_clones
from test_merge import git
from typer.testing import CliRunner

from md_cg import MdCG, Node, Scope
from md_cg.cli import app
from md_cg.reports import FINDING_KINDS

CYCLE_HINT = "`mdcg update <id> --reopen` the one that should stay current"


@pytest.fixture(autouse=True)
def _git_available() -> None:
    if shutil.which("git") is None:
        pytest.fail("git is required by these tests")


def _write(root: Path, node_id: str, body: str, **fields: str) -> None:
    """A knowledge node file written by hand (frontmatter values as JSON)."""
    folder = root / "knowledge" / "orphan"
    folder.mkdir(parents=True, exist_ok=True)
    head = [f'id: "{node_id}"', 'layer: "knowledge"', *(f"{k}: {v}" for k, v in fields.items())]
    (folder / f"{node_id}.md").write_text("---\n" + "\n".join(head) + "\n---\n" + body + "\n")


def _edge(target: str) -> str:
    return json.dumps([{"target": target, "type": "supersedes"}])


def _kinds(report: object) -> list[tuple[str, str | None, str | None]]:
    return [(f.kind, f.node_id, f.path) for f in report.findings]  # type: ignore[attr-defined]


def test_the_new_kinds_have_their_severities() -> None:
    assert FINDING_KINDS["supersede_cycle"] == "error"
    assert FINDING_KINDS["closed_orphan"] == "warning"


# -- library level: the states written by hand -------------------------------------------


def test_a_supersedes_cycle_written_by_hand_is_named_with_its_ids(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    closed = '"2026-01-02T00:00:00Z"'
    _write(root, "p1", "Ubuntu.", valid_until=closed, updated_at=closed, edges=_edge("p2"))
    _write(root, "p2", "Debian.", valid_until=closed, updated_at=closed, edges=_edge("p1"))
    _write(root, "p3", "Unrelated.")
    with MdCG(root) as s:
        report = s.health()
        assert not report.ok
        assert _kinds(report) == [
            ("supersede_cycle", "p1", "knowledge/orphan/p1.md"),
            ("supersede_cycle", "p2", "knowledge/orphan/p2.md"),
        ]
        assert [f.severity for f in report.findings] == ["error", "error"]
        assert report.findings[0].detail == (
            "supersedes cycle 'p1' -> 'p2' -> 'p1' (two clones superseded each other's memory): search "
            f"hides all of them; {CYCLE_HINT}"
        )
        assert [h.id for h in s.search("Ubuntu", record=False)[0] if not h.filler] == []
        s.reopen("p1")  # p1 stays current: p2's edge to it goes, p2 stays superseded by p1
        assert s.health().findings == ()
        assert s.superseded_by("p2") == "p1"
        assert [h.id for h in s.search("Ubuntu", record=False)[0] if not h.filler] == ["p1"]


def test_a_three_way_cycle_is_named_in_edge_order(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    closed = '"2026-01-02T00:00:00Z"'
    # c supersedes b, b supersedes a, a supersedes c
    _write(root, "a", "A.", valid_until=closed, updated_at=closed, edges=_edge("c"))
    _write(root, "b", "B.", valid_until=closed, updated_at=closed, edges=_edge("a"))
    _write(root, "c", "C.", valid_until=closed, updated_at=closed, edges=_edge("b"))
    with MdCG(root) as s:
        report = s.health()
        assert [f.node_id for f in report.by_kind("supersede_cycle")] == ["a", "b", "c"]
        assert report.findings[0].detail.startswith("supersedes cycle 'a' -> 'b' -> 'c' -> 'a' ")
        assert len(report.findings) == 3


def test_a_closed_memory_whose_successor_is_gone_or_an_end_date_is_not_reported(tmp_path: Path) -> None:
    """The index keeps no trace of a forgotten or deleted successor: a memory closed by a
    supersede looks like one given an end date (a first version told them apart by a 10 s
    window around ``updated_at``, and named imported end dates and deliberate closes, making
    every sync fail: second review round, session 27). Documented in docs/git.md, Limits."""
    root = tmp_path / "mem"
    _write(
        root,
        "office_old",
        "Main Street 1.",
        valid_until='"2026-01-02T00:00:00.000000Z"',
        updated_at='"2026-01-02T00:00:00.000900Z"',
    )
    with MdCG(root) as s:
        assert s.health().findings == ()
        assert s.sync().hidden == () and not s.sync().problems


def test_an_archived_successor_is_named(tmp_path: Path) -> None:
    with MdCG(tmp_path / "mem") as s:
        s.add(id="old", body="The office is at Main Street 1.")
        s.add(id="new", body="The office is at Harbour Road 7.")
        s.supersede("old", "new")
        assert s.health().findings == ()  # negative: a live successor
        s.archive("new")
        (finding,) = s.health().findings
        assert (finding.kind, finding.node_id) == ("closed_orphan", "old")
        assert finding.detail == (
            "closed by a supersede and its successor(s) 'new' archived or expired: search hides it "
            "with no current version; `mdcg update old --reopen` if it still holds, else forget it"
        )
        # a choice made in this clone: a health warning, never a failing sync
        assert s.sync().hidden == () and not s.sync().problems


def test_a_successor_outside_the_callers_scope_is_never_named(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with MdCG(root) as s:
        s.add(id="a", body="The plan is A.")
        s.add(id="b-secret-plan", body="The plan is B.")
        s.supersede("a", "b-secret-plan")
        s.update("b-secret-plan", agent_scope="x")
        s.archive("b-secret-plan")
        assert [f.node_id for f in s.health().findings] == ["a"]
    with MdCG(root, scope=Scope(agent="y")) as s:
        report = s.health()
        assert list(report.by_kind("closed_orphan")) == []
        assert all("b-secret-plan" not in f.detail for f in report.findings)


def test_nothing_new_for_a_live_successor_an_end_date_or_a_plain_rename(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    # a person's end dates: one long before the last write, one after it (passed since)
    _write(
        root,
        "lease",
        "The lease runs to 2025.",
        valid_until='"2025-12-31T00:00:00Z"',
        updated_at='"2026-01-02T00:00:00Z"',
    )
    _write(
        root,
        "promo",
        "The promo runs to March.",
        valid_until='"2026-03-01T00:00:00Z"',
        updated_at='"2026-01-02T00:00:00Z"',
    )
    with MdCG(root) as s:
        s.add(id="v1", body="Version one.")
        s.add(id="v2", body="Version two.")
        s.supersede("v1", "v2")
        s.add(id="x", body="Hi there.")
        s.rename("x", "greeting_for_the_user")
        report = s.health()
        assert report.findings == ()
        assert report.ok
        assert s.sync().hidden == ()


# -- real two-clone merges ------------------------------------------------------------------


def test_opposite_supersedes_in_two_clones_are_named_after_the_merge(tmp_path: Path) -> None:
    runner = CliRunner(env={"MDCG_ROOT": None})
    a, b = _two_clones(tmp_path, runner)
    with MdCG(a / "mem") as s:
        s.add(id="p1", body="Server alpha runs Ubuntu 22.04.")
    _shared(a, b, "p2", "Server alpha runs Debian 12.")
    with MdCG(b / "mem") as s:
        s.supersede("p2", "p1")
    git(b, "commit", "-qam", "b")
    with MdCG(a / "mem") as s:
        s.supersede("p1", "p2")
    _commit_push(a, "a")
    pulled = git(b, "pull", "-q", "--no-rebase", "origin", "main")  # merges cleanly
    assert "found problems; see: mdcg health" in pulled.stderr  # the hook's sync said so
    with MdCG(b / "mem") as s:
        report = s.health()
        assert not report.ok
        assert _kinds(report) == [
            ("supersede_cycle", "p1", "knowledge/orphan/p1.md"),
            ("supersede_cycle", "p2", "knowledge/orphan/p2.md"),
        ]
        assert "'p1' -> 'p2' -> 'p1'" in report.findings[0].detail
        assert s.sync().hidden == (("p1", "knowledge/orphan/p1.md"), ("p2", "knowledge/orphan/p2.md"))
    done = runner.invoke(app, ["sync", "--root", str(b / "mem")], catch_exceptions=False)
    assert done.exit_code == 1
    assert done.stdout.splitlines() == [
        "hidden from search, no current version (see mdcg health) (2): "
        "p1 at knowledge/orphan/p1.md, p2 at knowledge/orphan/p2.md"
    ]
    health = runner.invoke(app, ["health", "--json", "--root", str(b / "mem")], catch_exceptions=False)
    assert health.exit_code == 1
    assert [f["kind"] for f in json.loads(health.stdout)["findings"]] == ["supersede_cycle"] * 2


# -- a rename git missed: the memory under both ids ---------------------------------------

TWIN_DETAIL = (
    "the same memory as 'greeting_for_the_user' (knowledge/orphan/greeting_for_the_user.md), whose "
    "renamed_from lists this id: another clone renamed it and a merge kept both files; take what you "
    "need into 'greeting_for_the_user', then `delete` this one (not `forget`: that forgets the memory), "
    "or rename one"
)


def test_a_short_note_renamed_to_a_long_id_against_an_edit_is_named_in_the_other(
    tmp_path: Path,
) -> None:
    runner = CliRunner(env={"MDCG_ROOT": None})
    a, b = _two_clones(tmp_path, runner)
    _shared(a, b, "x", "Hi there.")
    with MdCG(a / "mem") as s:
        s.rename("x", "greeting_for_the_user")
    _commit_push(a, "rename")
    with MdCG(b / "mem") as s:
        s.update("x", body="Hi there, friend.")
    git(b, "commit", "-qam", "edit")
    pulled = git(b, "pull", "--no-rebase", "origin", "main", check=False)
    assert "CONFLICT (modify/delete): mem/knowledge/orphan/x.md" in pulled.stdout  # git missed the rename
    git(b, "add", "-A")
    git(b, "commit", "-qm", "keep both")
    with MdCG(b / "mem") as s:
        assert s.sync().added == ("greeting_for_the_user",)
        assert s.ids() == ["greeting_for_the_user", "x"]
        report = s.health()
        assert not report.ok
        assert _kinds(report) == [("renamed_twin", "x", "knowledge/orphan/x.md")]
        assert report.findings[0].severity == "warning"
        assert report.findings[0].detail == TWIN_DETAIL
        s.sync()  # recorded once
        assert _kinds(s.health()) == [("renamed_twin", "x", "knowledge/orphan/x.md")]
        s.delete("x")
        assert s.health().findings == ()
    _commit_push(b, "settled")
    git(a, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(a / "mem") as s:
        s.sync()
        assert s.ids() == ["greeting_for_the_user"]
        assert s.health().findings == ()


def _renamed_copy(root: Path, old: str, new: str, body: str) -> None:
    """The file of ``old`` written again under ``new`` as another clone's rename writes it."""
    text = (root / "knowledge" / "orphan" / f"{old}.md").read_text()
    head = text.split("\n---\n", 1)[0].replace(f'id: "{old}"', f'id: "{new}"')
    (root / "knowledge" / "orphan" / f"{new}.md").write_text(
        f'{head}\nrenamed_from: ["{old}"]\n---\n{body}\n'
    )


def test_a_renamed_copy_taken_in_beside_its_old_id_is_named_once(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with MdCG(root) as s:
        s.add(id="x", body="Hi there.")
        s.add(id="y", body="Other.")
    _renamed_copy(root, "x", "greeting_for_the_user", "Hi there.")
    _renamed_copy(root, "y", "later_other", "Other.")
    (root / "knowledge" / "orphan" / "y.md").unlink()  # a rename git saw: no twin
    with MdCG(root) as s:
        assert s.sync().added == ("greeting_for_the_user", "later_other")
        assert _kinds(s.health()) == [("renamed_twin", "x", "knowledge/orphan/x.md")]
        twins = [r for r in s.log("audit").read() if r.get("event") == "renamed_twin"]
        assert [(r["id"], r["to"]) for r in twins] == [("x", "greeting_for_the_user")]
        s.rename("x", "hello")  # a rename of the old id settles it too
        assert s.health().findings == ()


def test_a_pair_renamed_here_is_named_once_as_renamed_returned(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with MdCG(root) as s:
        s.add(id="x", body="Hi there.")
        old = (root / "knowledge" / "orphan" / "x.md").read_text()
        s.rename("x", "greeting_for_the_user")
    (root / "knowledge" / "orphan" / "x.md").write_text(old)  # a merge kept the old file
    g = root / "knowledge" / "orphan" / "greeting_for_the_user.md"
    g.write_text(g.read_text().replace("Hi there.", "Hi there, friend."))  # and changed the new one
    with MdCG(root) as s:
        assert s.sync().changed == ("greeting_for_the_user",)
        assert [r["event"] for r in s.log("audit").read()] == ["renamed", "renamed_twin"]
        assert _kinds(s.health()) == [("renamed_returned", "x", "knowledge/orphan/x.md")]


def test_a_plain_rename_and_batch_mates_report_nothing(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with MdCG(root) as s:
        s.add_many(
            [Node(id="m1", layer="knowledge", body="One."), Node(id="m2", layer="knowledge", body="Two.")]
        )
        assert s.get("m1").created_at == s.get("m2").created_at  # batch-mates share it
        s.rename("m1", "first")
        s.rename("first", "m2_neighbour")
    (root / "knowledge" / "orphan" / "m2_neighbour.md").touch()
    with MdCG(root) as s:
        s.sync()
        assert [r["event"] for r in s.log("audit").read()] == ["renamed", "renamed"]
        assert s.health().findings == ()
