"""What came back: forgotten or renamed memories whose files a merge, a checkout or a copy
brought back (md_cg.audit), as sync, health and keep_returned tell them.

Round three of session 23's review found each of these on the first version."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from md_cg import MdCG, Node, Scope
from md_cg.errors import InvalidArgumentError


def _put_back(path: Path, data: bytes) -> None:
    """What git does when a merge keeps another clone's copy: the file, written now."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _added(store: MdCG, node_id: str, body: str) -> tuple[str, bytes]:
    """Add a memory; return its file's path and bytes (what a merge may bring back later)."""
    store.add(Node(id=node_id, layer="knowledge", body=body))
    rel = store.entry(node_id).path
    return rel, (store.root / rel).read_bytes()


def _kinds(store: MdCG) -> list[tuple[str, str | None]]:
    return [(f.kind, f.node_id) for f in store.health().findings]


@pytest.mark.parametrize(
    "record",
    [
        {"event": "renamed", "id": "m1", "to": "m2", "time": "yesterday"},
        {"event": "renamed", "id": "m1", "to": "m2"},
        {"event": "renamed", "id": ["x"], "to": "m2", "time": 1.0},
        {"event": "renamed", "to": "m2", "time": 1.0},
        {"event": "forget", "id": "m1", "time": 1e300},
        {"event": "renamed", "id": "m1", "to": "m2", "time": 1e300},
        {"event": "forget", "id": "m1", "time": 10**400},
        {"event": "forget", "id": "m1", "time": float("nan")},
        {"event": "back_as", "id": "m1", "as": ["m2"], "time": 1.0},
        {"event": "forget", "id": "m1", "time": 1.0, "created_at": "soon"},
        {"event": "renamed", "id": "m1", "time": 1.0, "created_at": 1.5},
        {"event": "renamed", "id": "m1", "to": ["m2"], "time": 1.0, "created_at": 1.5},
        {"event": "back_as", "id": "m1", "as": "m2", "time": 1.0, "created_at": 1.5, "origin": ["x"]},
        "not a record",
    ],
)
def test_a_bad_audit_line_is_skipped_by_every_reader(tmp_path: Path, record: Any) -> None:
    """One hand-edited line crashed health() and recall_stats() (mdcg health, mdcg stats)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="m1", layer="knowledge", body="alpha fact"))
        s.add(Node(id="m2", layer="knowledge", body="bravo fact"))
        s.search("alpha")
    shard = root / ".mdcg" / "audit" / "9_bad.jsonl"
    shard.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"ts": 1, "seq": 1, "r": record}, allow_nan=True)
    shard.write_text(line.replace("1e+300", "1e300") + "\n")
    with MdCG(root) as s:
        assert _kinds(s) == []
        assert s.sync().returned == ()
        assert s.access_counts() == {"m1": 1}
        assert [r.id for r in s.recall_stats().top_recalled] == ["m1"]
        s.tombstones()


def test_a_rename_onto_a_forgotten_or_renamed_away_id_settles_it(tmp_path: Path) -> None:
    """`rename draft old-note` after `forget old-note` was named as the forgotten memory
    back (and health advised to forget it again: the draft); `rename eps gamma` after
    `rename gamma delta` was named renamed_returned (advice: delete eps's memory)."""
    with MdCG(tmp_path / "m") as s:
        s.add(Node(id="old-note", layer="knowledge", body="old note"))
        s.add(Node(id="draft", layer="knowledge", body="a brand new draft"))
        s.add_many([Node(id=i, layer="knowledge", body=f"{i} text") for i in ("gamma", "eps")])
        time.sleep(0.01)
        s.forget("old-note", "tidy")
        s.rename("draft", "old-note")
        s.rename("gamma", "delta")
        s.rename("eps", "gamma")
        assert s.sync().returned == () and _kinds(s) == []
        with pytest.raises(InvalidArgumentError, match="'old-note' is not a memory forgotten in this clone"):
            s.keep_returned("old-note")


def test_renamed_here_then_forgotten_and_the_old_file_back_is_named(tmp_path: Path) -> None:
    """acct -> acct-hint, forget acct-hint; a merge keeps another clone's edit of acct: it
    came back silently (a clone that never saw the rename writes no renamed_from)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        rel, old = _added(s, "acct", "account hint: blue")
        s.rename("acct", "acct-hint")
        s.forget("acct-hint", "the user asked")
        _put_back(root / rel, old.replace(b"blue", b"green"))
        report = s.sync()
        assert (report.added, report.returned) == (("acct",), (("acct", rel),))
        (finding,) = s.health().findings
        assert (finding.kind, finding.node_id) == ("forgotten_returned", "acct")
        assert finding.detail.startswith("renamed here and forgotten as 'acct-hint' on ")
        s.keep_returned("acct")
        assert s.sync().returned == () and _kinds(s) == []


def test_a_chain_of_renames_is_followed_to_the_id_held_now(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        rel, old = _added(s, "a", "the a note")
        s.rename("a", "b")
        s.rename("b", "c")
        _put_back(root / rel, old)
        s.sync()
        (finding,) = s.health().findings
        assert (finding.kind, finding.node_id) == ("renamed_returned", "a")
        assert finding.detail.startswith("renamed to 'c' in this clone on ")


def test_a_scoped_handle_is_not_told_of_and_cannot_settle_another_scopes_forget(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, scope=Scope(agent="bob")) as bob:
        bob.add(Node(id="bob-plan", layer="knowledge", body="bob's plan"))
        rel = bob.entry("bob-plan").path
        text = (root / rel).read_bytes()
        bob.forget("bob-plan", "mine to forget")
    _put_back(root / rel, text.replace(b'agent_scope: "bob"\n', b""))  # shared by another clone
    with MdCG(root, scope=Scope(agent="alice")) as alice:
        assert alice.sync().returned == () and _kinds(alice) == []
        assert "bob-plan" in alice.ids()  # shared now: alice reads it, but bob's forget is bob's
        with pytest.raises(InvalidArgumentError):
            alice.keep_returned("bob-plan")
    with MdCG(root, scope=Scope(agent="bob")) as bob:
        assert _kinds(bob) == [("forgotten_returned", "bob-plan")]
        assert bob.sync().returned == (("bob-plan", rel),)


def test_batch_mates_of_forgotten_memories_cost_no_file_reads(tmp_path: Path) -> None:
    """A batch shares one created_at: with half of 2,000 forgotten and the rest touched (a
    checkout), every sync and health read each file once per forgotten batch-mate (28 s)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=f"n{i:04d}", layer="contextual", body=f"note {i}") for i in range(2000)])
        s.forget_many([f"n{i:04d}" for i in range(0, 2000, 2)], "half")
    later = time.time() + 5
    for path in root.glob("contextual/**/*.md"):
        os.utime(path, (later, later))
    with MdCG(root) as s:
        reads: list[str] = []
        real = s._engine.read_node  # type: ignore[attr-defined]

        def counting(rel: str) -> Node:
            reads.append(rel)
            return real(rel)

        s._engine.read_node = counting  # type: ignore[attr-defined,method-assign]
        report = s.sync()
        assert report.returned == () and len(reads) <= len(report.changed) + len(report.added)
        assert len(set(reads)) == len(reads)  # each candidate read once
        reads.clear()
        assert _kinds(s) == [] and reads == []  # health reads no file for this


def _renamed_elsewhere(root: Path, tmp: Path, old: str, new: str) -> tuple[str, bytes]:
    """(path, bytes) of ``old`` renamed to ``new`` in a copy of the store: another clone's
    rename, as a merge would bring it."""
    other = tmp / f"clone-{new}"
    shutil.copytree(root, other, ignore=shutil.ignore_patterns(".mdcg"))
    with MdCG(other) as s:
        s.rename(old, new)
        rel = s.entry(new).path
    return rel, (other / rel).read_bytes()


def _a_renamed_elsewhere_to_b(tmp: Path) -> tuple[Path, str, bytes]:
    root = tmp / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="the vault hint"))
    return (root, *_renamed_elsewhere(root, tmp, "a", "b"))


@pytest.mark.parametrize("taken_by", ["sync_if_changed", "rebuild_index", "sync"])
def test_back_under_new_ids_whatever_takes_the_files_in(tmp_path: Path, taken_by: str) -> None:
    """Only sync() looked: a file the MCP server's pick-up or a rebuild took in was never
    named; two clones' renames of one forgotten memory were named once (round four)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="the vault hint"))
    copies = [_renamed_elsewhere(root, tmp_path, "a", new) for new in ("b", "c")]
    with MdCG(root) as s:
        s.forget("a", "leaked")
        for rel, data in copies:
            _put_back(root / rel, data)
        if taken_by == "sync_if_changed":
            s.sync_if_changed(0)
        elif taken_by == "rebuild_index":
            s.rebuild_index()
        assert [i for i, _ in s.sync().returned] == ["b", "c"]
        assert _kinds(s) == [("forgotten_returned", "b"), ("forgotten_returned", "c")]
        s.keep_returned("b")  # the memory is kept: its other copy is a copy of a kept memory
        assert _kinds(s) == [] and s.sync().returned == ()


def test_a_kept_copy_under_a_new_id_leaves_the_old_id_forgotten_for_a_migration(tmp_path: Path) -> None:
    from md_cg.migrate import forgotten_ids, kept_reason

    root, rel, data = _a_renamed_elsewhere_to_b(tmp_path)
    with MdCG(root) as s:
        s.forget("a", "leaked")
        _put_back(root / rel, data)
        s.sync()
        s.keep_returned("b")
        why = kept_reason(s, Node(id="a", layer="knowledge", body="the vault hint"), forgotten_ids(s), False)
        assert why is not None and why.startswith("forgotten in this store")


def test_a_copy_with_old_times_and_a_twice_forgotten_id_are_named_once(tmp_path: Path) -> None:
    root, rel, data = _a_renamed_elsewhere_to_b(tmp_path)
    with MdCG(root) as s:
        s.forget("a", "leaked")
        _put_back(root / rel, data)
        os.utime(root / rel, (1_000_000, 1_000_000))  # cp -p: the times of long ago
        assert s.sync().returned == (("b", rel),)
        s.forget("b", "as advised")
        _put_back(root / rel, data)  # another clone's copy once more
        assert s.sync().returned == (("b", rel),)
        assert _kinds(s) == [("forgotten_returned", "b")]


def test_the_forgotten_memory_back_under_a_reused_id_is_told_by_its_creation_time(tmp_path: Path) -> None:
    """forget a; rename d -> a; rename a -> z; a merge keeps another clone's edit of the
    first a: it was called renamed_returned, with advice to merge it into z (d's memory)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="password hint"))
        time.sleep(0.01)
        s.add(Node(id="d", layer="knowledge", body="lunch draft"))
        rel = s.entry("a").path
        first = (root / rel).read_bytes()
        s.forget("a", "the user asked")
        s.rename("d", "a")
        s.rename("a", "z")
        _put_back(root / rel, first.replace(b"password hint", b"password hint, edited"))
        assert s.sync().returned == (("a", rel),)
        (finding,) = s.health().findings
        assert (finding.kind, finding.node_id) == ("forgotten_returned", "a")
        assert finding.detail.startswith("forgotten in this clone on ")
        s.keep_returned("a")
        assert _kinds(s) == [] and s.get("z").body.strip() == "lunch draft"


def test_a_scoped_handle_reads_no_other_scopes_ids_in_a_tombstone(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="shared-fact", layer="knowledge", body="a shared fact"))
    with MdCG(root, scope=Scope(agent="bob")) as bob:
        bob.add(
            Node(
                id="bob-plan-to-quit",
                layer="knowledge",
                body="bob's plan",
                edges=[{"target": "shared-fact", "type": "similar"}],
            )
        )
        bob.forget("shared-fact", "wrong", force=True)
        assert bob.tombstones()[0]["dangling"] == [["bob-plan-to-quit", "similar"]]
    with MdCG(root, scope=Scope(agent="alice")) as alice:
        (tomb,) = alice.tombstones()
        assert tomb["id"] == "shared-fact" and tomb["dangling"] == []
    with MdCG(root) as s:
        assert s.tombstones()[0]["dangling"] == [["bob-plan-to-quit", "similar"]]


def test_renamed_returned_never_names_a_memory_the_caller_does_not_see(tmp_path: Path) -> None:
    """A shared memory renamed, then narrowed to bob, its old file back: alice's health
    named bob's new id (round five of the review)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        rel, old = _added(s, "a", "shared note alpha")
        s.rename("a", "bob-secret-plan")
        s.update("bob-secret-plan", agent_scope="bob")
        _put_back(root / rel, old.replace(b"alpha", b"alpha, edited"))
        s.sync()
        assert _kinds(s) == [("renamed_returned", "a")]
    with MdCG(root, scope=Scope(agent="alice")) as alice:
        assert all("bob-secret-plan" not in f.detail for f in alice.health().findings)
        assert _kinds(alice) == []


def test_a_kept_copy_stays_kept_when_renamed_and_rebuilt(tmp_path: Path) -> None:
    root, rel, data = _a_renamed_elsewhere_to_b(tmp_path)
    with MdCG(root) as s:
        s.forget("a", "leaked")
        _put_back(root / rel, data)
        assert [i for i, _ in s.sync().returned] == ["b"]
        s.keep_returned("b")
        s.rename("b", "z")
        s.rebuild_index()
        assert s.sync().returned == () and _kinds(s) == []


def test_a_batch_mate_renamed_onto_a_forgotten_id_is_not_the_forgotten_memory(tmp_path: Path) -> None:
    """Batch-mates share a created_at: m2 renamed onto the forgotten m1 was called m1 back,
    with advice to forget it (m2's text); x renamed to y, then w (a batch-mate) onto x and
    forgotten: after a rebuild y was called the forgotten x (round five)."""
    with MdCG(tmp_path / "m") as s:
        s.add_many([Node(id=i, layer="contextual", body=f"{i} memory") for i in ("m1", "m2", "x", "w")])
        s.forget("m1", "gone")
        s.rename("m2", "m1")
        s.rename("x", "y")
        s.rename("w", "x")
        s.forget("x", "drop w's memory")
        s.rebuild_index()
        assert s.sync().returned == () and _kinds(s) == []


@pytest.mark.parametrize("between", ["add again and forget", "rename onto it"])
def test_a_copy_of_the_first_memory_of_a_reused_id_is_named(tmp_path: Path, between: str) -> None:
    root, rel, data = _a_renamed_elsewhere_to_b(tmp_path)
    with MdCG(root) as s:
        s.forget("a", "leaked")
        time.sleep(0.01)
        if between == "add again and forget":
            s.add(Node(id="a", layer="knowledge", body="second memory under a"))
            s.forget("a", "also")
        else:
            s.add(Node(id="other", layer="knowledge", body="another memory"))
            s.rename("other", "a")
        _put_back(root / rel, data)
        assert [i for i, _ in s.sync().returned] == ["b"]
        assert ("forgotten_returned", "b") in _kinds(s)


def test_a_pick_up_after_the_handles_own_write_reads_no_audit_log(tmp_path: Path) -> None:
    """The MCP server picks up hand edits before every call: after any change it read the
    whole audit log (0.004 -> 0.13 s at 50k nodes and 25k tombstones, round five)."""
    with MdCG(tmp_path / "m") as s:
        s.add_many([Node(id=f"n{i}", layer="contextual", body=f"note {i}") for i in range(50)])
        s.forget_many([f"n{i}" for i in range(0, 50, 2)], "half")
        s.sync_if_changed(0)
        log = s.log("audit")
        reads: list[int] = []
        real = log.read

        def counting() -> list[dict[str, Any]]:
            reads.append(1)
            return real()

        log.read = counting  # type: ignore[method-assign]
        s.update("n1", body="edited")
        s.sync_if_changed(0)
        (tmp_path / "m" / s.entry("n3").path).write_text(
            (tmp_path / "m" / s.entry("n3").path).read_text() + "hand\n"
        )
        s.sync_if_changed(0)
        assert reads == []


def _other_clone(root: Path, tmp: Path, name: str) -> Path:
    """A copy of the store's files: another clone, whose changes come back as a merge would."""
    other = tmp / name
    shutil.copytree(root, other, ignore=shutil.ignore_patterns(".mdcg"))
    return other


def test_a_batch_mate_another_clone_renamed_onto_a_forgotten_id_is_not_it(tmp_path: Path) -> None:
    """Batch-mates share a created_at: m2 renamed onto the forgotten m1 in another clone was
    called m1 back ("forget it again": m2's only copy), and renamed on to z as well; a
    batch-mate renamed onto an id renamed here was called renamed_returned (round six)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=i, layer="knowledge", body=f"{i} memory") for i in ("m1", "m2", "a", "m")])
    other = _other_clone(root, tmp_path, "other")
    with MdCG(root) as s:
        s.forget("m1", "leaked")
        s.rename("a", "b")
    with MdCG(other) as o:  # after the forget and the rename reached it
        o.delete("m1")
        o.rename("m2", "m1")
        o.rename("a", "b")
        o.rename("m", "a")
        moved = {i: (o.entry(i).path, (other / o.entry(i).path).read_bytes()) for i in ("m1", "a")}
    with MdCG(root) as s:
        for rel, data in moved.values():
            _put_back(root / rel, data)
        (root / s.entry("m2").path).unlink()
        (root / s.entry("m").path).unlink()
        assert s.sync().returned == () and _kinds(s) == []
    with MdCG(other) as o:
        o.rename("m1", "z")
        rel, data = o.entry("z").path, (other / o.entry("z").path).read_bytes()
    with MdCG(root) as s:
        (root / s.entry("m1").path).unlink()
        _put_back(root / rel, data)
        s.rebuild_index()
        assert s.sync().returned == () and _kinds(s) == []


def test_renamed_here_forgotten_and_renamed_elsewhere_is_named(tmp_path: Path) -> None:
    """a -> b here, b forgotten; another clone renamed a -> c: c came back silently."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="the vault code is 4471"))
    other = _other_clone(root, tmp_path, "other")
    with MdCG(other) as o:
        o.rename("a", "c")
        rel, data = o.entry("c").path, (other / o.entry("c").path).read_bytes()
    with MdCG(root) as s:
        s.rename("a", "b")
        s.forget("b", "the user asked")
        _put_back(root / rel, data)
        assert s.sync().returned == (("c", rel),)
        (finding,) = s.health().findings
        assert finding.detail.startswith("forgotten in this clone as 'b' on ")


def test_a_keep_ends_at_the_next_forget_of_the_id(tmp_path: Path) -> None:
    """Kept once under its own id, forgotten again, and a copy under a new id came back
    silently (round six); the finding cites the latest forget."""
    root, rel, data = _a_renamed_elsewhere_to_b(tmp_path)
    with MdCG(root) as s:
        own = s.entry("a").path
        text = (root / own).read_bytes()
        s.forget("a", "first")
        _put_back(root / own, text)
        s.sync()
        s.keep_returned("a")
        s.forget("a", "second time, for real")
        _put_back(root / rel, data)
        assert s.sync().returned == (("b", rel),)
        (finding,) = s.health().findings
        assert "(second time, for real)" in finding.detail


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.md") if ".mdcg" not in p.parts}


def _merge_from(root: Path, other: Path, base: dict[str, bytes]) -> None:
    """The other clone's changes since ``base``, applied as a merge keeping theirs would."""
    now = _files(other)
    for rel, data in now.items():
        if base.get(rel) != data:
            _put_back(root / rel, data)
    for rel in base:
        if rel not in now and (root / rel).exists():
            (root / rel).unlink()


def _returned_ids(s: MdCG) -> tuple[list[str], list[tuple[str, str | None]]]:
    return [i for i, _ in s.sync().returned], _kinds(s)


@pytest.mark.parametrize("rebuild", [False, True])
def test_round_trips_and_reused_ids_name_exactly_the_forgotten_memory(tmp_path: Path, rebuild: bool) -> None:
    """Round seven: a memory is told by its creation time and the id it was made under
    (audit.memory_key), so renames there and back, batch-mates and reused ids neither
    hide a forgotten memory nor name a live one."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=i, layer="knowledge", body=f"{i} memory text") for i in ("a", "b", "p", "q")])
    other = _other_clone(root, tmp_path, "other")
    base = _files(other)
    with MdCG(other) as o:
        o.rename("a", "x")
        o.rename("x", "a")  # a round trip there, then an edit: its file says ["a", "x"]
        o.update("a", body="a memory text, edited elsewhere")
        o.update("p", body="p memory text, edited elsewhere")
    with MdCG(root) as s:
        s.forget("a", "leaked")
        s.rename("b", "a")
        s.rename("a", "b")  # a mistaken rename of a batch-mate, undone: not the forgotten a
        s.rename("p", "plan")
        s.forget("plan", "obsolete")
        s.rename("q", "plan")  # the id reused by another memory
    _merge_from(root, other, base)
    with MdCG(root) as s:
        if rebuild:
            s.rebuild_index()
        ids, kinds = _returned_ids(s)
        assert ids == ["a", "p"]
        assert kinds == [("forgotten_returned", "a"), ("forgotten_returned", "p")]
        assert s.get("b").body.strip() == "b memory text" and s.get("plan").body.strip() == "q memory text"


def test_a_keep_lasts_until_that_memory_is_forgotten_again(tmp_path: Path) -> None:
    """Kept x; an unrelated memory reusing the forgotten id forgotten: x was named again
    (round seven). Kept x forgotten itself: another clone's copy y is named."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="project plan v1"))
    copies = [_renamed_elsewhere(root, tmp_path, "a", new) for new in ("x", "y")]
    with MdCG(root) as s:
        s.forget("a", "obsolete")
        _put_back(root / copies[0][0], copies[0][1])
        assert _returned_ids(s)[0] == ["x"]
        s.keep_returned("x")
        time.sleep(0.01)
        s.add(Node(id="a", layer="knowledge", body="a scratch note, unrelated"))
        s.forget("a", "scratch done")
        s.rebuild_index()
        assert _returned_ids(s) == ([], [])
        s.forget("x", "now for good")
        _put_back(root / copies[1][0], copies[1][1])
        assert _returned_ids(s) == (["y"], [("forgotten_returned", "y")])


def test_renamed_returned_names_where_the_memory_is_now(tmp_path: Path) -> None:
    """a -> plan -> plan-2024, then another memory renamed onto plan: the advice pointed at
    plan, the other memory (round seven)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="plan for 2024"))
        time.sleep(0.01)
        s.add(Node(id="c", layer="knowledge", body="plan for 2025"))
    other = _other_clone(root, tmp_path, "other")
    base = _files(other)
    with MdCG(other) as o:
        o.update("a", body="plan for 2024, edited elsewhere")
    with MdCG(root) as s:
        s.rename("a", "plan")
        s.rename("plan", "plan-2024")
        s.rename("c", "plan")
    _merge_from(root, other, base)
    with MdCG(root) as s:
        s.sync()
        (finding,) = s.health().findings
        assert (finding.kind, finding.node_id) == ("renamed_returned", "a")
        assert "take what you need into 'plan-2024'" in finding.detail


def test_many_renames_keep_the_first_id(tmp_path: Path) -> None:
    """renamed_from was cut to its last 16 ids, losing the one that tells the memory."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="renamed a lot"))
    other = _other_clone(root, tmp_path, "other")
    with MdCG(other) as o:
        for i in range(1, 71):
            o.rename("a" if i == 1 else f"r{i - 1}", f"r{i}")
        earlier = o.get("r70").extra["renamed_from"]
        rel, data = o.entry("r70").path, (other / o.entry("r70").path).read_bytes()
    assert len(earlier) == 64 and earlier[0] == "a" and earlier[-1] == "r69"
    with MdCG(root) as s:
        s.forget("a", "leaked")
        _put_back(root / rel, data)
        assert _returned_ids(s)[0] == ["r70"]


def test_an_update_of_extra_keeps_the_earlier_ids(tmp_path: Path) -> None:
    """update(extra=...) replaced renamed_from, which tells the memory: a batch-mate renamed
    onto a forgotten id was then named as it (round eight)."""
    with MdCG(tmp_path / "m") as s:
        s.add_many([Node(id=i, layer="knowledge", body=f"{i} text") for i in ("a", "b")])
        s.forget("a", "tidy")
        s.rename("b", "a")
        s.update("a", extra={"foo": 1})
        assert s.get("a").extra == {"foo": 1, "renamed_from": ["b"]}
        assert _returned_ids(s) == ([], [])


def test_a_back_as_record_is_checked_against_the_file_there_now(tmp_path: Path) -> None:
    """A copy named under y, forgotten as advised; a live batch-mate renamed onto y was then
    named from the old record (round eight)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=i, layer="knowledge", body=f"{i} memory text") for i in ("a", "m")])
    rel, data = _renamed_elsewhere(root, tmp_path, "a", "y")
    with MdCG(root) as s:
        s.forget("a", "user asked")
        _put_back(root / rel, data)
        assert _returned_ids(s)[0] == ["y"]
        s.forget("y", "forget it again")
        s.rename("m", "y")
        assert _returned_ids(s) == ([], []) and s.get("y").body.strip() == "m memory text"
