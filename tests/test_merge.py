"""The git merge driver for node files: merge rules, conflicts, fallback, install, real git."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import python_env

from md_cg import MdCG, Node, Scope, nodefile
from md_cg.errors import DuplicateIdError, MalformedNodeFileError, MergeError
from md_cg.merge import (
    CONFLICT_KEY,
    MergeResult,
    attribute_lines,
    conflict_of,
    driver_command,
    gitattributes_text,
    install_merge_driver,
    main,
    merge_node_files,
)
from md_cg.node import LAYERS

PATH = "knowledge/n1.md"


def text(**fields: Any) -> bytes:
    """A node file for node ``n1`` in ``knowledge`` with these fields."""
    fields.setdefault("id", "n1")
    fields.setdefault("layer", "knowledge")
    return nodefile.dumps(Node(**fields)).encode("utf-8")


def merge(base: bytes, ours: bytes, theirs: bytes) -> MergeResult:
    return merge_node_files(base, ours, theirs, path=PATH)


def parsed(result: MergeResult) -> Node:
    return nodefile.loads(result.data.decode("utf-8"), PATH)


def entry(
    ts: Any, evidence: str, verdict: str = "confirmed", before: float = 0.5, after: float = 0.55
) -> dict:
    return {
        "ts": ts,
        "verdict": verdict,
        "evidence": evidence,
        "confidence_before": before,
        "confidence_after": after,
    }


# -- field rules ------------------------------------------------------------------------


def test_histories_are_united_deduplicated_and_ordered_by_time() -> None:
    e1, e2, e3 = entry(1.0, "one"), entry(2.0, "two"), entry(3.5, "three")
    # theirs spells e3's instant as ISO 8601; e0 is one instant spelled as a
    # float on one side and as a truncated ISO string (microseconds) on the other.
    e0 = entry(1796083840.1169074, "zero")
    e0_iso = {**e0, "ts": "2026-12-01T00:10:40.116907Z"}
    e3_iso = {**e3, "ts": "1970-01-01T00:00:03.500000+00:00"}
    result = merge(
        text(verification_history=[e1], body="b\n"),
        text(verification_history=[e1, e3, e0], body="b\n"),
        text(verification_history=[e1, e2, e3_iso, e0_iso], body="b\n"),
    )
    assert result.clean and result.conflict is None and result.fallback is None
    assert result.data == text(verification_history=[e1, e2, e3, e0], body="b\n")


def test_counters_and_times_take_the_larger_value() -> None:
    result = merge(
        text(access_count=1, last_access=10.0, updated_at=10.0, created_at=5.0),
        text(access_count=5, last_access=20.0, updated_at=15.0, created_at=5.0),
        text(access_count=3, last_access=30.0, updated_at=12.0, created_at=5.0),
    )
    assert result.clean
    assert result.data == text(access_count=5, last_access=30.0, updated_at=15.0, created_at=5.0)
    # a side without the field (never accessed) does not erase the other's
    result = merge(text(), text(access_count=2, last_access=7.0), text(importance=0.3))
    assert result.data == text(importance=0.3, access_count=2, last_access=7.0)


def test_a_result_equal_to_one_side_keeps_that_side_byte_for_byte() -> None:
    # ours is hand-written YAML; the merge takes nothing from theirs
    ours = b"---\nid: n1\nlayer: knowledge\ntags: [a, b]\naccess_count: 9\n---\nbody\n"
    theirs = text(tags=["a", "b"], access_count=4, body="body\n")
    result = merge(text(tags=["a", "b"], access_count=1, body="body\n"), ours, theirs)
    assert result.clean
    assert result.data == ours


def test_tags_changed_on_both_sides_merge_as_sets() -> None:
    result = merge(text(tags=["a", "b"]), text(tags=["a", "b", "c"]), text(tags=["b", "d"]))
    assert result.data == text(tags=["b", "c", "d"])
    # only one side changed them (a removal): that side wins
    result = merge(text(tags=["a", "b"]), text(tags=["a"]), text(tags=["a", "b"], importance=0.2))
    assert result.data == text(tags=["a"], importance=0.2)


@pytest.mark.parametrize(
    ("base", "ours", "theirs", "expected"),
    [
        (0.5, 0.7, 0.5, 0.7),  # only ours changed
        (0.5, 0.5, 0.9, 0.9),  # only theirs changed
        (0.5, 0.7, 0.7, 0.7),  # both changed alike
        (None, 0.7, 0.7, 0.7),  # both added alike
        (0.5, None, 0.5, None),  # ours removed it
    ],
)
def test_other_fields_follow_the_three_way_rule(
    base: float | None, ours: float | None, theirs: float | None, expected: float | None
) -> None:
    result = merge(
        text(importance=base, body="x\n"),
        text(importance=ours, body="x\n", access_count=2),
        text(importance=theirs, body="x\n", access_count=3),
    )
    assert result.clean and result.conflict is None
    assert result.data == text(importance=expected, body="x\n", access_count=3)


def test_a_scalar_changed_differently_is_a_conflict_that_still_parses() -> None:
    result = merge(
        text(importance=0.5, extra={"owner": "sam"}),
        text(importance=0.7, extra={"owner": "ann"}),
        text(importance=0.9, extra={"owner": "sam"}),
    )
    record = {"fields": {"importance": {"ours": 0.7, "base": 0.5, "theirs": 0.9}}, "body": False}
    assert not result.clean
    assert result.conflict == record
    assert result.data == text(importance=0.7, extra={"owner": "ann", CONFLICT_KEY: record})
    assert conflict_of(parsed(result)) == record


def test_a_field_removed_on_one_side_and_changed_on_the_other_conflicts() -> None:
    result = merge(text(modality="text"), text(), text(modality="image"))
    record = {"fields": {"modality": {"ours": None, "base": "text", "theirs": "image"}}, "body": False}
    assert result.conflict == record
    assert result.data == text(extra={CONFLICT_KEY: record})


def test_both_sides_verifying_count_every_verification() -> None:
    a, b = entry(1.0, "a"), entry(2.0, "b")
    result = merge(
        text(confidence=0.5),
        text(confidence=0.55, verification_history=[a]),
        text(confidence=0.55, verification_history=[b]),
    )
    assert result.clean
    assert result.data == text(confidence=0.6, verification_history=[a, b])
    # a confirmation on one side, a weakening on the other
    w = entry(2.0, "w", verdict="weakened", after=0.4)
    result = merge(
        text(confidence=0.5),
        text(confidence=0.55, verification_history=[a]),
        text(confidence=0.4, verification_history=[w]),
    )
    assert result.data == text(confidence=0.45, verification_history=[a, w])
    # one verification seen on both sides (a cherry-pick) counts once
    result = merge(
        text(confidence=0.5),
        text(confidence=0.55, verification_history=[a], access_count=1),
        text(confidence=0.55, verification_history=[a], access_count=2),
    )
    assert result.data == text(confidence=0.55, verification_history=[a], access_count=2)


def test_a_confidence_not_explained_by_verifications_conflicts() -> None:
    a, b = entry(1.0, "a"), entry(2.0, "b")
    result = merge(
        text(confidence=0.5),
        text(confidence=0.9, verification_history=[a]),  # set by hand besides verifying
        text(confidence=0.55, verification_history=[b]),
    )
    assert result.conflict == {
        "fields": {"confidence": {"ours": 0.9, "base": 0.5, "theirs": 0.55}},
        "body": False,
    }
    assert parsed(result).verification_history == [a, b]


def test_mappings_and_edges_merge_per_key() -> None:
    e = [{"target": "t1", "type": "causal"}, {"target": "t2", "type": "similar"}]
    result = merge(
        text(condition_space={"os": "linux"}, edges=[e[0]]),
        text(condition_space={"os": "linux", "lang": "py"}, edges=[e[0], e[1]]),
        text(condition_space={"os": "mac"}, edges=[]),
    )
    assert result.clean
    assert result.data == text(condition_space={"os": "mac", "lang": "py"}, edges=[e[1]])
    assert list(parsed(result).condition_space or {}) == ["os", "lang"]  # ours' order first
    # the same edge changed differently on both sides
    result = merge(
        text(edges=[{"target": "t1", "type": "causal", "confidence": 0.5}]),
        text(edges=[{"target": "t1", "type": "causal", "confidence": 0.6}]),
        text(edges=[{"target": "t1", "type": "causal", "confidence": 0.7}]),
    )
    assert result.conflict is not None and list(result.conflict["fields"]) == ["edges"]


# -- bodies ---------------------------------------------------------------------------


def test_bodies_changed_in_different_lines_merge_cleanly() -> None:
    result = merge(
        text(body="line1\nline2\nline3\n", access_count=1),
        text(body="line1 A\nline2\nline3\n", access_count=2),
        text(body="line1\nline2\nline3 B\n", access_count=3),
    )
    assert result.clean
    assert result.data == text(body="line1 A\nline2\nline3 B\n", access_count=3)


def test_the_same_body_line_changed_twice_keeps_both_with_markers() -> None:
    result = merge(
        text(body="a\nb\nc\n", updated_at=1.0),
        text(body="a\nB1\nc\n", updated_at=2.0),
        text(body="a\nB2\nc\n", updated_at=3.0),
    )
    record = {"fields": {}, "body": True}
    body = "a\n<<<<<<< ours\nB1\n||||||| base\nb\n=======\nB2\n>>>>>>> theirs\nc\n"
    assert not result.clean and result.conflict == record
    assert result.data == text(body=body, updated_at=3.0, extra={CONFLICT_KEY: record})
    assert conflict_of(parsed(result)) == record


def test_both_sides_adding_the_same_id_merge_against_an_empty_base() -> None:
    result = merge(b"", text(body="A\n", importance=0.1), text(body="B\n", importance=0.1))
    record = {"fields": {}, "body": True}
    body = "<<<<<<< ours\nA\n||||||| base\n=======\nB\n>>>>>>> theirs\n"
    assert result.conflict == record
    assert result.data == text(body=body, importance=0.1, extra={CONFLICT_KEY: record})


def test_created_at_set_apart_on_both_sides_takes_the_earlier() -> None:
    """Two clones adding one id always conflicted on created_at, which ``mdcg update``
    cannot settle (git reviewer's find); the memory is as old as the earlier one."""
    result = merge(b"", text(body="A\n", created_at=20.0), text(body="A\n", created_at=10.0))
    assert (result.clean, result.conflict) == (True, None)
    assert parsed(result).created_at == 10.0
    one = merge(
        text(body="A\n", created_at=5.0), text(body="A\n", created_at=30.0), text(body="B\n", created_at=5.0)
    )
    assert one.clean and (parsed(one).created_at, parsed(one).body) == (30.0, "B\n")  # one side changed it
    dropped = merge(text(body="A\n", created_at=5.0), text(body="A\n", created_at=9.0), text(body="A\n"))
    assert not dropped.clean and set(dropped.conflict["fields"]) == {"created_at"}  # removed against changed


def test_an_unresolved_conflict_is_carried_through_a_later_merge() -> None:
    record = {"fields": {"importance": {"ours": 0.7, "base": 0.5, "theirs": 0.9}}, "body": False}
    base = text(importance=0.7, body="x\n", extra={CONFLICT_KEY: record})
    result = merge(base, text(importance=0.7, body="x\ny\n", extra={CONFLICT_KEY: record}), text(body="x\n"))
    assert result.conflict is None and result.clean  # this merge added no conflict
    assert result.data == text(body="x\ny\n")  # theirs resolved it: the record goes
    result = merge(base, text(importance=0.7, body="x\ny\n", extra={CONFLICT_KEY: record}), base)
    assert conflict_of(parsed(result)) == record


# -- files that do not parse ---------------------------------------------------------------


def test_broken_frontmatter_falls_back_to_a_text_merge() -> None:
    base = b'---\nid: "n1"\nlayer: "knowledge"\n---\nfirst\nsecond\n'
    ours = b'---\nid: "n1"\nlayer: [broken\n---\nfirst\nsecond\n'
    theirs = b'---\nid: "n1"\nlayer: "knowledge"\n---\nfirst\nsecond changed\n'
    result = merge(base, ours, theirs)
    assert result.data == b'---\nid: "n1"\nlayer: [broken\n---\nfirst\nsecond changed\n'
    assert not result.clean  # no hunk conflicted, but the result is not a node
    assert result.conflict is None
    assert result.fallback is not None and "ours version" in result.fallback
    assert PATH in result.fallback


def test_a_side_that_is_not_utf8_falls_back_with_markers() -> None:
    base = b'---\nid: "n1"\nlayer: "knowledge"\n---\nbody\n'
    ours = b'---\nid: "n1"\nlayer: "knowledge"\n---\nours body\n'
    theirs = b'---\nid: "n1"\nlayer: "knowledge"\n---\nbad \xff body\n'
    result = merge(base, ours, theirs)
    assert result.data == (
        b'---\nid: "n1"\nlayer: "knowledge"\n---\n'
        b"<<<<<<< ours\nours body\n||||||| base\nbody\n=======\nbad \xff body\n>>>>>>> theirs\n"
    )
    assert not result.clean
    assert result.fallback == f"{PATH}: theirs version: not valid UTF-8 at byte 40"


def test_a_broken_base_with_a_clean_text_merge_is_clean() -> None:
    base = b'---\nid: "n1"\nlayer: knowledge: x\n---\none\nmid\ntwo\n'
    ours = b'---\nid: "n1"\nlayer: "knowledge"\n---\none!\nmid\ntwo\n'
    theirs = b'---\nid: "n1"\nlayer: "knowledge"\n---\none\nmid\ntwo!\n'
    result = merge(base, ours, theirs)
    assert result.clean and result.fallback is not None and "base version" in result.fallback
    assert result.data == b'---\nid: "n1"\nlayer: "knowledge"\n---\none!\nmid\ntwo!\n'


def test_binary_bodies_raise_merge_error_naming_the_file() -> None:
    with pytest.raises(MergeError) as info:
        merge(text(body="a\x00\n"), text(body="b\x00\n"), text(body="c\x00\n"))
    assert info.value.path == PATH
    assert (
        str(info.value)
        == f"{PATH}: git merge-file failed: error: Cannot merge binary files: the ours version"
    )


# -- conflict_of -------------------------------------------------------------------------


def test_versions_of_different_scopes_are_kept_whole_and_read_by_no_one(tmp_path: Path) -> None:
    """Two agents' memories under one id: the field merge gave a node of one agent's
    scope holding both texts (Bob read Alice's private note, Alice lost hers silently).
    Now both versions stay whole between markers, a file no handle reads as a memory."""
    alice = text(body="Alice private: my salary is 200k.\n", agent_scope="alice", sensitivity="private")
    bob = text(body="Bob prefers tabs.\n", agent_scope="bob")
    result = merge(b"", bob, alice)
    assert (result.clean, result.whole, result.conflict) == (False, True, None)
    assert result.data == b"<<<<<<< ours\n" + bob + b"=======\n" + alice + b">>>>>>> theirs\n"
    why = "the two versions belong to different scopes (agent_scope, sensitivity): a person decides which is "
    why += "kept"
    assert result.fallback == f"{PATH}: {why}"
    with pytest.raises(
        MalformedNodeFileError, match=r"knowledge/n1.md:1: a git merge left two versions of the whole file"
    ):
        nodefile.loads(result.data.decode(), PATH, default_id="n1", default_layer="knowledge")
    # both sides re-scoped one memory differently: the same
    base = text(body="shared note\n")
    assert merge(
        base, text(body="shared note\n", agent_scope="bob"), text(body="edited\n", workspace_scope="w1")
    ).whole
    # one side re-scoped it, the other edited it (or both chose the same scope): merged as before
    one = merge(base, text(body="shared note\n", agent_scope="bob"), text(body="edited\n"))
    assert one.clean and not one.whole
    assert (parsed(one).body, parsed(one).agent_scope) == ("edited\n", "bob")
    same = merge(
        base, text(body="shared note\n", agent_scope="bob"), text(body="edited\n", agent_scope="bob")
    )
    assert same.clean and parsed(same).agent_scope == "bob"
    # in a store: neither agent reads the file; each is told a file needs a person
    root = tmp_path / "m"
    MdCG(root).close()
    (root / PATH).write_bytes(result.data)
    for agent in ("alice", "bob"):
        with MdCG(root, scope=Scope(agent=agent, max_sensitivity="private")) as s:
            assert s.ids() == [] and s.search("salary")[0] == [] and s.search("tabs")[0] == []
            assert [f.kind for f in s.health().findings] == ["withheld"]
    with MdCG(root) as s:
        assert s.ids() == [] and [(f.kind, f.path) for f in s.health().findings] == [
            ("unreadable_file", PATH)
        ]
    # at its own path, nobody writes over it either (Bob's overwrite replaced Alice's version)
    own = "knowledge/orphan/n1.md"
    (root / own).parent.mkdir()
    (root / PATH).rename(root / own)
    for overwrite in (False, True):
        with MdCG(root, scope=Scope(agent="bob")) as s, pytest.raises(DuplicateIdError) as err:
            s.add(Node(id="n1", layer="knowledge", body="x"), overwrite=overwrite)
        # (session 39, F4: "the file ... is there ... (health lists it)", which bob's health
        # does not: it counts the file, withheld)
        assert (str(err.value), err.value.path) == (
            "node id 'n1': the id is taken by a file that cannot be read as a memory, whose owner "
            "this scope is not told (an unscoped health names it); choose another id, or have a "
            "person fix the file",
            "",
        )
    with MdCG(root) as s, pytest.raises(DuplicateIdError) as err:
        s.add(Node(id="n1", layer="knowledge", body="x"))
    assert str(err.value) == (
        f"node id 'n1': the file {own} is there and cannot be read as a memory (health lists it); "
        "it is not written over -- fix or move it first"
    )
    assert (root / own).read_bytes() == result.data


def test_conflict_of_finds_records_and_bare_markers() -> None:
    assert conflict_of(Node(id="n1", body="plain\n")) is None
    assert conflict_of(Node(id="n1", body="a\n=======\nb\n")) is None  # a setext heading, not markers
    marked = "x\n<<<<<<< HEAD\nmine\n=======\nyours\n>>>>>>> other\n"
    assert conflict_of(Node(id="n1", body=marked)) == {"fields": {}, "body": True}
    quoted = "How git marks a conflict:\n\n```text\n<<<<<<< HEAD\nmine\n=======\nyours\n>>>>>>> b\n```\n"
    assert conflict_of(Node(id="n1", body=quoted)) is None
    odd = Node(id="n1", extra={CONFLICT_KEY: True})  # written by hand
    assert conflict_of(odd) == {"fields": {}, "body": False}


# -- install -----------------------------------------------------------------------------


def test_install_writes_gitattributes_idempotently(tmp_path: Path) -> None:
    instructions = install_merge_driver(tmp_path)
    expected = "# md-cg: merge node files field by field (docs/git.md)\n" + "".join(
        f"{line}\n" for line in attribute_lines()
    )
    assert (tmp_path / ".gitattributes").read_text() == expected
    assert f"config merge.mdcg.driver '{sys.executable} -m md_cg.merge %O %A %B %P'" in instructions
    assert driver_command("/x y/python") == "'/x y/python' -m md_cg.merge %O %A %B %P"
    assert install_merge_driver(tmp_path) == instructions
    assert (tmp_path / ".gitattributes").read_text() == expected


def test_install_keeps_user_lines_and_adds_only_missing_rules(tmp_path: Path) -> None:
    (tmp_path / ".gitattributes").write_text("*.png binary\nknowledge/**/*.md merge=mdcg")
    install_merge_driver(tmp_path)
    lines = (tmp_path / ".gitattributes").read_text().splitlines()
    assert lines[:3] == [
        "*.png binary",
        "knowledge/**/*.md merge=mdcg",
        "# md-cg: merge node files field by field (docs/git.md)",
    ]
    assert lines[3:] == [line for line in attribute_lines() if not line.startswith("knowledge/")]


def test_the_rules_select_node_files_only(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    install_merge_driver(tmp_path)
    out = git(tmp_path, "check-attr", "merge", "--", "knowledge/a.md", "self/cond_x/b.md", "notes.md").stdout
    assert out.splitlines() == [
        "knowledge/a.md: merge: mdcg",
        "self/cond_x/b.md: merge: mdcg",
        "notes.md: merge: unspecified",
    ]


# -- the driver process ----------------------------------------------------------------------


def test_main_rejects_wrong_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["only", "two"]) == 2
    assert "usage: python -m md_cg.merge BASE OURS THEIRS [PATH]" in capsys.readouterr().err


def test_the_driver_process_writes_ours_and_reports_conflicts(tmp_path: Path) -> None:
    files = {name: tmp_path / name for name in ("O", "A", "B")}
    files["O"].write_bytes(text(importance=0.5))
    files["A"].write_bytes(text(importance=0.6))
    files["B"].write_bytes(text(importance=0.7))
    args = [str(files[n]) for n in ("O", "A", "B")]
    done = subprocess.run(
        [sys.executable, "-m", "md_cg.merge", *args, PATH], capture_output=True, text=True, check=False
    )
    record = {"fields": {"importance": {"ours": 0.6, "base": 0.5, "theirs": 0.7}}, "body": False}
    assert done.returncode == 1
    assert files["A"].read_bytes() == text(importance=0.6, extra={CONFLICT_KEY: record})
    assert f"{PATH}: merge conflict in field 'importance'" in done.stderr
    files["A"].write_bytes(text(importance=0.5, access_count=3))
    assert main(args) == 0
    assert files["A"].read_bytes() == text(importance=0.7, access_count=3)
    files["A"].write_bytes(text(body="\x00"))
    files["B"].write_bytes(text(body="\x00\x00"))
    assert main(args) == 2
    assert files["A"].read_bytes() == text(body="\x00")  # left as it was


# -- real git ---------------------------------------------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "md-cg test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "md-cg test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # python_env: the merge driver git starts imports the md_cg under test, not an installed one
    env = {**python_env(), **GIT_ENV, "HOME": str(cwd)}
    cmd = ["git", "-c", "user.name=md-cg test", "-c", "user.email=test@example.invalid", *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done


def make_origin(root: Path, n: int) -> Path:
    origin = root / "origin"
    with MdCG(origin) as store:
        for i in range(n):
            store.add(
                id=f"n{i}",
                layer="knowledge",
                body=f"note {i}: asyncio event loop topic {i}\nsecond line {i}\n",
                tags=["domain:computing"],
                confidence=0.5,
            )
        install_merge_driver(origin)
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "origin")
    return origin


def clone(origin: Path, name: str) -> Path:
    git(origin.parent, "clone", "-q", str(origin), name)
    path = origin.parent / name
    git(path, "config", "merge.mdcg.driver", driver_command())
    return path


def node_files(root: Path) -> dict[str, Node]:
    return {p.stem: nodefile.read_node(p) for p in root.glob("knowledge/**/*.md")}


def merge_from(ours: Path, theirs: Path) -> subprocess.CompletedProcess[str]:
    git(ours, "remote", "add", "other", str(theirs))
    git(ours, "fetch", "-q", "other")
    return git(ours, "merge", "--no-edit", "other/main", check=False)


def test_two_clones_merge_without_conflicts_and_sync_sees_the_union(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, 8)
    clones = {name: clone(origin, name) for name in ("a", "b")}
    queries = {"a": ["asyncio", "event loop", "topic", "note"], "b": ["asyncio", "second line"]}
    for name, path in clones.items():
        with MdCG(path) as store:
            for q in queries[name]:
                store.search(q)
            assert store.compact_access()
            store.verify("n1", f"checked in clone {name}", "confirmed")
            store.add(
                id=f"new_{name}", layer="knowledge", body=f"added in {name}\n", tags=["domain:computing"]
            )
            edited = "n2" if name == "a" else "n3"
            store.update(edited, body=f"note {edited[1]}: asyncio event loop topic\nedited in {name}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"work in {name}")
    before = {name: node_files(path) for name, path in clones.items()}
    changed_both = [i for i in before["a"] if i in before["b"] and before["a"][i] != before["b"][i]]
    # n1 verified on both sides, n2 and n3 edited apart (access counts stay out of the files)
    assert sorted(changed_both) == ["n1", "n2", "n3"]

    done = merge_from(clones["a"], clones["b"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CONFLICT" not in done.stdout
    assert git(clones["a"], "diff", "--name-only", "--diff-filter=U").stdout == ""
    assert git(clones["a"], "status", "--porcelain").stdout == ""  # .mdcg/ stays ignored

    merged = node_files(clones["a"])
    everyone = {f"n{i}" for i in range(8)} | {"new_a", "new_b"}
    assert set(merged) == everyone
    new_paths = {p.parent for p in clones["a"].glob("knowledge/**/new_*.md")}
    assert len(new_paths) == 1  # both adds went into the same bucket
    for i in (f"n{k}" for k in range(8)):  # searches and folds never touch the tracked files
        assert (merged[i].access_count, merged[i].last_access) == (None, None)
    history = merged["n1"].verification_history
    assert [h["evidence"] for h in history] == ["checked in clone a", "checked in clone b"]
    assert history == [before["a"]["n1"].verification_history[0], before["b"]["n1"].verification_history[0]]
    assert merged["n1"].confidence == 0.6
    assert merged["n2"].body == "note 2: asyncio event loop topic\nedited in a\n"
    assert merged["n3"].body == "note 3: asyncio event loop topic\nedited in b\n"
    assert all(conflict_of(node) is None for node in merged.values())

    with MdCG(clones["a"]) as store:
        report = store.sync()
        assert report.malformed == ()
        assert set(store.ids()) == everyone
        assert store.get("n1").confidence == 0.6
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(clones["a"]), "fresh")
    with MdCG(fresh) as store:
        assert set(store.ids()) == everyone
        assert store.access_counts(["n0"]) == {"n0": merged["n0"].access_count or 0}


def test_the_same_body_line_edited_in_two_clones_is_a_listed_conflict(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, 2)
    clones = {name: clone(origin, name) for name in ("a", "b")}
    for name, path in clones.items():
        with MdCG(path) as store:
            store.update("n0", body=f"note 0: asyncio event loop topic 0\nrewritten in {name}\n")
        git(path, "commit", "-q", "-a", "-m", f"edit in {name}")
    done = merge_from(clones["a"], clones["b"])
    assert done.returncode == 1
    conflicted = git(clones["a"], "diff", "--name-only", "--diff-filter=U").stdout.split()
    assert [Path(p).name for p in conflicted] == ["n0.md"]
    node = nodefile.read_node(clones["a"] / conflicted[0])  # still parses
    assert conflict_of(node) == {"fields": {}, "body": True}
    assert node.body == (
        "note 0: asyncio event loop topic 0\n<<<<<<< ours\nrewritten in a\n||||||| base\n"
        "second line 0\n=======\nrewritten in b\n>>>>>>> theirs\n"
    )
    rel = Path(conflicted[0]).as_posix()
    with MdCG(clones["a"]) as store:
        report = store.sync()
        assert report.malformed == ()
        assert report.conflicts == (("n0", rel),) and report.problems
        assert set(store.ids()) == {"n0", "n1"}
        assert conflict_of(store.get("n0")) == {"fields": {}, "body": True}
        found = [(f.kind, f.node_id, f.path) for f in store.health().findings if f.kind == "merge_conflict"]
        assert found == [("merge_conflict", "n0", rel)]
        assert not store.health().ok
    cli = subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "sync", "--root", str(clones["a"])],
        capture_output=True,
        text=True,
        env=python_env(),
        check=False,
    )
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert f"merge conflicts (resolve, docs/git.md) (1): n0 at {rel}" in cli.stdout
    # resolved by hand: the next sync is clean and exits 0
    node.body = "note 0: asyncio event loop topic 0\nrewritten in a and b\n"
    del node.extra["merge_conflict"]
    (clones["a"] / rel).write_text(nodefile.dumps(node), encoding="utf-8")
    with MdCG(clones["a"]) as store:
        assert store.sync().conflicts == ()
        assert [f for f in store.health().findings if f.kind == "merge_conflict"] == []


def test_a_node_moved_in_one_clone_and_verified_in_the_other_merges_as_a_rename(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, 2)
    clones = {name: clone(origin, name) for name in ("a", "b")}
    with MdCG(clones["a"]) as store:
        store.verify("n1", "wrong in a", "falsified")  # moves the file to rejected/
    with MdCG(clones["b"]) as store:
        store.verify("n1", "right in b", "confirmed")
    for path in clones.values():
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "verify")
    git(clones["a"], "remote", "add", "other", str(clones["b"]))
    git(clones["a"], "fetch", "-q", "other")
    # a two-line note: git needs a lower similarity to see the move (docs/git.md, Limits)
    done = git(clones["a"], "merge", "-X", "find-renames=20%", "--no-edit", "other/main", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.relative_to(clones["a"]).as_posix() for p in clones["a"].glob("*/**/n1.md")] == [
        "rejected/n1.md"
    ]
    node = nodefile.read_node(clones["a"] / "rejected" / "n1.md")
    assert node.layer == "rejected" and node.importance == 0.0
    assert [(h["verdict"], h["evidence"]) for h in node.verification_history] == [
        ("falsified", "wrong in a"),
        ("confirmed", "right in b"),
    ]
    assert node.confidence == 0.55


@pytest.fixture(autouse=True)
def _git_available() -> None:
    if shutil.which("git") is None:
        pytest.fail("git is required by these tests")


def test_update_of_what_a_merge_left_in_conflict_resolves_it(tmp_path: Path) -> None:
    """`mdcg update --body` of a conflicted memory removed the markers but left the
    merge_conflict record, so health reported the conflict for ever."""
    from md_cg.errors import InvalidNodeError

    root = tmp_path / "m"
    merged = "The user likes\n<<<<<<< ours\nrock\n=======\njazz\n>>>>>>> theirs\n"
    record = {"fields": {"importance": {"ours": 0.2, "base": 0.5, "theirs": 0.9}}, "body": True}
    _conflicted(root, "n0", "The user likes jazz", merged, record)
    with MdCG(root) as store:
        assert [f.kind for f in store.health().findings] == ["merge_conflict"]
        store.update("n0", body="The user likes rock and jazz")
        assert conflict_of(store.get("n0")) == {
            "fields": {"importance": {"ours": 0.2, "base": 0.5, "theirs": 0.9}},
            "body": False,
        }
        assert [f.kind for f in store.health().findings] == ["merge_conflict"]  # importance still open
        store.update("n0", importance=0.9)
        assert "merge_conflict" not in store.get("n0").extra and conflict_of(store.get("n0")) is None
        assert store.health().findings == ()
        with pytest.raises(InvalidNodeError) as err:
            store.add(
                id="n1", layer="knowledge", body="Diff:\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n"
            )
        assert str(err.value) == (
            "node 'n1': the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) outside a code "
            "block, so sync would take it for an unresolved merge; put such text in a fenced code block (```)"
        )
        fenced = "Diff:\n```\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n```\n"
        assert store.add(id="n1", layer="knowledge", body=fenced).body == fenced
        assert store.health().findings == ()


def test_conflict_markers_are_found_across_fences_and_not_inside_one() -> None:
    from md_cg.merge import has_conflict_markers

    # two clones changed the first line of one code block: the fence opens inside the conflict
    across = "Snippet:\n<<<<<<< ours\n```js\nx = 1\n=======\n```py\nx = 2\n>>>>>>> theirs\n```\n"
    assert has_conflict_markers(across)
    assert has_conflict_markers(across.replace("\n", "\r\n"))
    quoted = "How a conflict looks:\n```\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n```\n"
    assert not has_conflict_markers(quoted)
    assert not has_conflict_markers(quoted.replace("```", "~~~~"))
    assert not has_conflict_markers(
        quoted.replace("```\n<", "  ```\n<").replace(">>>>>>> b\n```", ">>>>>>> b\n  ```")
    )
    assert not has_conflict_markers("Unclosed:\n```\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> b\n")
    assert not has_conflict_markers("<<<<<<<< eight\n=======\n>>>>>>> x\n")  # not git's seven


def test_an_update_settles_nothing_it_did_not_resolve(tmp_path: Path) -> None:
    """update(extra=...) dropped the merge_conflict record with the old extra; sending the
    merged body back unchanged settled a conflict that sat inside a code block."""
    root = tmp_path / "m"
    merged = "```\n<<<<<<< ours\nx = 1\n=======\nx = 2\n>>>>>>> theirs\n```\n"
    record = {"fields": {"importance": {"ours": 0.7, "base": 0.5, "theirs": 0.9}}, "body": True}
    _conflicted(root, "c3", "```\nx = 1\n```\n", merged, record)
    with MdCG(root) as store:
        store.update("c3", extra={"source": "note"})
        assert conflict_of(store.get("c3")) == {
            "fields": {"importance": {"ours": 0.7, "base": 0.5, "theirs": 0.9}},
            "body": True,
        }
        assert store.get("c3").extra["source"] == "note"
        store.update("c3", body=merged, importance=0.7)  # the merged text as it was
        assert conflict_of(store.get("c3")) == {"fields": {}, "body": True}
        store.update("c3", body="```\nx = 2\n```\n")
        assert conflict_of(store.get("c3")) is None and store.health().findings == ()


def test_marker_lines_are_git_lines_and_text_still_holding_them_settles_nothing(tmp_path: Path) -> None:
    from md_cg.merge import has_conflict_markers

    # git and CommonMark end lines only at \n (and \r\n): \u2028, \x0c and \x85 do not
    assert has_conflict_markers("page\x0c```\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n")
    assert has_conflict_markers("Note one\u2028```x\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n")
    assert not has_conflict_markers("a\u2028<<<<<<< x\u2028=======\u2028>>>>>>> y\n")
    root = tmp_path / "m"
    merged = "<<<<<<< ours\nfirst\n=======\nsecond\n>>>>>>> theirs\n"
    _conflicted(root, "g1", "first\n", merged, {"fields": {}, "body": True})
    with MdCG(root) as store:
        quoting = "How it looked:\n```\n<<<<<<< ours\nfirst\n=======\nsecond\n>>>>>>> theirs\n```\n"
        # a resolution that quotes the markers cannot be told from a conflict left in a
        # fence with text added around it: the record stays until it is removed by hand
        store.update("g1", body=quoting)
        assert conflict_of(store.get("g1")) == {"fields": {}, "body": True}
        store.update("g1", body=quoting.replace("<<<<<<< ours\n", "").replace(">>>>>>> theirs\n", ""))
        assert conflict_of(store.get("g1")) is None and store.health().findings == ()


def _conflicted(root: Path, node_id: str, first: str, merged: str, record: dict[str, Any]) -> None:
    """A store holding ``node_id`` as a merge without the driver (or with it) left it:
    the body ``merged`` and the ``merge_conflict`` ``record``; then synced."""
    with MdCG(root) as store:
        store.add(id=node_id, layer="knowledge", body=first)
        rel = store.entry(node_id).path
    node = nodefile.read_node(root / rel)
    node.body = merged
    node.extra["merge_conflict"] = record
    (root / rel).write_text(nodefile.dumps(node), encoding="utf-8")
    with MdCG(root) as store:
        store.sync()


def test_a_conflicted_body_is_not_titled_by_a_marker_line(tmp_path: Path) -> None:
    """Search listed such a memory as ``<<<<<<< ours`` (git reviewer's find)."""
    body = "<<<<<<< ours\nThe deadline is the 14th.\n||||||| base\n=======\n"
    body += "The deadline is the 21st.\n>>>>>>> theirs\n"
    root = tmp_path / "m"
    MdCG(root).close()
    (root / PATH).write_bytes(text(body=body))
    with MdCG(root) as s:
        assert s.sync().conflicts == (("n1", PATH),)
        assert s.entry("n1").title == "The deadline is the 14th."
        assert [r.title for r in s.search("deadline")[0]] == ["The deadline is the 14th."]


def test_text_added_under_a_narrower_scope_is_not_merged_into_a_wider_one() -> None:
    """One clone shared a memory (dropped agent_scope) while another added Bob's private text
    to it: the merge was clean and everyone could read it (round three of the review)."""
    base = text(body="line one\n", agent_scope="bob")
    ours = text(body="line one\nbob private: bank PIN hint\n", agent_scope="bob")
    shared = text(body="line one\n")
    result = merge(base, ours, shared)
    assert (result.clean, result.whole) == (False, True)
    assert "widens the memory's scope (agent_scope)" in (result.fallback or "")
    assert merge(base, shared, ours).whole  # either side
    assert merge(base, text(body="line one\n", agent_scope="bob"), shared).clean  # nothing added: shared
    narrowed = merge(text(body="a\n"), text(body="a\n", sensitivity="private"), text(body="a\nb\n"))
    assert narrowed.clean and parsed(narrowed).sensitivity == "private"  # narrower: safe
    public = merge(
        text(body="a\n", sensitivity="private"),
        text(body="a\n", sensitivity="public"),
        text(body="a\nsecret\n", sensitivity="private"),
    )
    assert public.whole


def test_versions_that_do_not_parse_are_kept_whole_when_their_scope_lines_differ() -> None:
    """The scope rule was skipped when a version did not parse: a committed base with a bad
    importance let one side's share publish the other side's private line (round four)."""
    base = b'---\nid: "n1"\nlayer: "knowledge"\nagent_scope: "bob"\nimportance: 99\n---\nbob plan\n'
    ours = b'---\nid: "n1"\nlayer: "knowledge"\nimportance: 0.5\n---\nbob plan\n'
    theirs = base.replace(b"bob plan\n", b"bob plan\nPRIVATE: bob is resigning\n")
    result = merge(base, ours, theirs)
    assert (result.clean, result.whole) == (False, True)
    assert (result.fallback or "").endswith("; and the versions' scope lines differ")
    same = merge(base, base.replace(b"99", b"0.5"), theirs)  # scope lines alike: merged as text
    assert not same.whole


def crlf(data: bytes) -> bytes:
    """``data`` as an editor that writes CRLF line ends saves it."""
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def test_crlf_versions_are_merged_as_lf_and_written_with_lf() -> None:
    """A version saved with CRLF differed from an LF one in every line (its CR): the body
    merge was a conflict over the whole body. The driver reads CRLF as LF."""
    body = "line one\nline two\nline three\nline four\n"
    base = text(body=body)
    ours = crlf(text(body=body.replace("line one", "line one (a)")))
    theirs = text(body=body.replace("line four", "line four (b)"))
    expected = text(body="line one (a)\nline two\nline three\nline four (b)\n")
    for b in (base, crlf(base)):  # the base committed with LF or with CRLF
        result = merge(b, ours, theirs)
        assert (result.clean, result.conflict, result.fallback) == (True, None, None)
        assert result.data == expected
        assert merge(b, theirs, ours).data == expected
    # a result equal to a CRLF side is that side with LF line ends
    assert merge(crlf(base), ours, crlf(base)).data == text(body=body.replace("line one", "line one (a)"))
    # the same text on both sides, one saved with CRLF: no conflict
    assert merge(base, ours, ours.replace(b"\r\n", b"\n")).data == ours.replace(b"\r\n", b"\n")
    # a file that does not parse (the text fallback) merges line by line too
    broken = b"---\nid: [n1\n---\n" + body.encode()
    result = merge(broken, crlf(broken.replace(b"line one", b"line 1")), broken.replace(b"four", b"4"))
    assert result.data == b"---\nid: [n1\n---\nline 1\nline two\nline three\nline 4\n"
    assert result.fallback is not None and b"<<<<<<<" not in result.data


#: The .gitattributes of a store made before session 25 (and again since fix25-e2): merge lines only.
OLDER_GITATTRIBUTES = "# md-cg: merge node files field by field (docs/git.md)\n" + "".join(
    f"{layer}/**/*.md merge=mdcg\n" for layer in (*LAYERS, "archive")
)


def origin_with_crlf_node(tmp_path: Path) -> tuple[Path, str]:
    """An origin whose committed n1 has four body lines and CRLF line ends."""
    origin = make_origin(tmp_path, 2)
    (n1,) = origin.glob("knowledge/**/n1.md")
    data = n1.read_bytes().replace(b"second line 1\n", b"second line 1\nthird line 1\nfourth line 1\n")
    n1.write_bytes(crlf(data))
    git(origin, "commit", "-q", "-am", "n1 saved with CRLF")
    return origin, n1.relative_to(origin).as_posix()


def test_a_crlf_node_merges_with_an_lf_edit_of_another_line(tmp_path: Path) -> None:
    """The reviewer's case, real git: n1 committed with CRLF, A edits its first line
    (its editor keeps CRLF), B its fourth (saved with LF). Before, the merge was a
    conflict over the whole body, and no .gitattributes rule helped: the base was CRLF."""
    origin, rel = origin_with_crlf_node(tmp_path)
    assert (origin / ".gitattributes").read_text() == gitattributes_text() == OLDER_GITATTRIBUTES
    a, b = clone(origin, "a"), clone(origin, "b")
    assert b"\r\n" in (a / rel).read_bytes()
    (a / rel).write_bytes((a / rel).read_bytes().replace(b"note 1:", b"note 1 (a):"))
    (b / rel).write_bytes(
        (b / rel).read_bytes().replace(b"fourth line 1", b"fourth (b)").replace(b"\r\n", b"\n")
    )
    for path in (a, b):
        git(path, "commit", "-q", "-am", "edit n1")
    done = merge_from(a, b)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(a, "status", "--porcelain").stdout == ""
    merged = nodefile.read_node(a / rel)
    assert merged.body == "note 1 (a): asyncio event loop topic 1\nsecond line 1\nthird line 1\nfourth (b)\n"
    assert conflict_of(merged) is None
    assert b"\r" not in git_show(a, rel)  # the merge writes LF


def test_init_on_a_store_with_a_crlf_node_leaves_no_file_modified(tmp_path: Path) -> None:
    """`mdcg init --git` on a store holding a node committed with CRLF: it had added
    `text eol=lf` rules, after which the file showed as modified in the clone and in
    every fresh clone, and a pull that touched it refused. It adds no such rule now."""
    from typer.testing import CliRunner

    from md_cg.cli import app

    origin, rel = origin_with_crlf_node(tmp_path)
    (origin / ".gitattributes").write_text(OLDER_GITATTRIBUTES)
    git(origin, "commit", "-q", "--allow-empty", "-am", "older .gitattributes")
    a = clone(origin, "a")
    runner = CliRunner(env={"MDCG_ROOT": None})
    result = runner.invoke(app, ["init", "--git", "--root", str(a)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (a / ".gitattributes").read_text() == OLDER_GITATTRIBUTES
    assert git(a, "status", "--porcelain").stdout == ""
    git(a, "commit", "-q", "--allow-empty", "-am", "after mdcg init --git")
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(a), "fresh")
    assert git(fresh, "status", "--porcelain").stdout == ""
    assert b"\r\n" in (fresh / rel).read_bytes()  # kept as committed


def git_show(cwd: Path, rel: str) -> bytes:
    """The committed bytes of ``rel`` at HEAD."""
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    return subprocess.run(
        ["git", "show", f"HEAD:{rel}"], cwd=cwd, env=env, capture_output=True, check=True
    ).stdout
