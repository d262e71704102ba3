"""The merge driver knows the folded ``verification_history`` (session 31).

e5d37bb bounded the history (the first entry, one ``folded`` entry, the 20 most
recent) but the driver did not know folds: two clones that both verified a memory
past 21 entries merged with a conflict on ``confidence`` (the memory DEFERred until
``update`` settled it; before e5d37bb the same merge was clean), and the entries one
clone folded away came back from the other, so the next fold counted them twice.
Now a merge leaves folds out of the confidence replay, drops the base entries a fold
on either side stands for, unites the rest and bounds the result again. Each case
below is a real pull between two git clones with the driver enabled; the merged
history must be exactly the one a single clone making all those verdicts would
hold. Also: ``resolve`` refuses evidence over ``MAX_EVIDENCE_CHARS`` (a single huge
one pushed the memory over the file limit), and the MCP ``verify`` reply says when a
falsified memory was already in rejected/, as the CLI does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

import md_cg
from md_cg import MdCG, configure_clone, nodefile
from md_cg.errors import InvalidNodeError
from md_cg.merge import conflict_of
from md_cg.node import Node

#: the md_cg under test: the driver git starts must import this one
CODE = str(Path(md_cg.__file__).resolve().parent.parent)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "md-cg test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "md-cg test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}
#: confirmed, confirmed, weakened, ...: the confidence stays between 0.3 and 0.7
PATTERN = ("confirmed", "confirmed", "weakened")


@pytest.fixture(autouse=True)
def _git_available() -> None:
    if shutil.which("git") is None:
        pytest.fail("git is required by these tests")


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd), "PYTHONPATH": os.pathsep.join([CODE, *sys.path])}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)} failed: {done.stdout}{done.stderr}"
    return done.stdout


def verdicts(store: MdCG, kinds: list[str], made: list[dict[str, Any]]) -> None:
    """Verify ``x`` once per kind, recording each entry made (a fold hides them later)."""
    for i, kind in enumerate(kinds):
        made.append(store.verify("x", f"check {len(made)} {i}", kind).verification_history[-1])


def clones(tmp_path: Path, base: list[str], made: list[dict[str, Any]]) -> tuple[Path, Path]:
    """Clones ``a`` and ``b`` of a store whose memory ``x`` got the ``base`` verdicts,
    with the driver enabled in both."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    git(a, "init", "-q", "-b", "main")
    with MdCG(a / "mem") as store:
        store.add(Node(id="x", body="The deploy key rotates monthly.", verification_basis="data"))
        verdicts(store, base, made)
    configure_clone(a / "mem")
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "base")
    git(tmp_path, "clone", "-q", "a", "b")
    configure_clone(b / "mem")
    return a, b


def diverge(a: Path, b: Path, ours: list[str], theirs: list[str], made: list[dict[str, Any]]) -> Node:
    """``b`` makes the ``ours`` verdicts, then ``a`` the ``theirs`` (later times); ``b``
    pulls ``a`` (the driver merges ``x``). Returns ``b``'s merged ``x``."""
    for clone, kinds in ((b, ours), (a, theirs)):
        with MdCG(clone / "mem") as store:
            verdicts(store, kinds, made)
        git(clone, "commit", "-q", "-am", "verdicts")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert git(b, "status", "--porcelain") == ""  # merged clean: nothing left to resolve
    files = list((b / "mem").glob("knowledge/**/x.md"))
    assert len(files) == 1
    return nodefile.loads(files[0].read_text(encoding="utf-8"), str(files[0]))


def folded(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The fold entry for consecutive entries of one chain of verdicts."""
    return {
        "verdict": "folded",
        "folded": len(entries),
        "verdicts": dict(Counter(e["verdict"] for e in entries)),
        "ts": entries[-1]["ts"],
        "confidence_before": entries[0]["confidence_before"],
        "confidence_after": entries[-1]["confidence_after"],
    }


def count(history: list[dict[str, Any]]) -> int:
    """How many verdicts a history accounts for."""
    return sum(e["folded"] if e["verdict"] == "folded" else 1 for e in history)


def conflict_free(node: Node) -> bool:
    return conflict_of(node) is None and "merge_conflict" not in node.extra


def kinds(n: int, offset: int = 0) -> list[str]:
    return [PATTERN[(i + offset) % 3] for i in range(n)]


def test_both_clones_fold_a_history_of_21_entries(tmp_path: Path) -> None:
    """Base: 21 entries (the most a history holds unfolded). Ours folds 3 of them, theirs
    2 (the same first 2): one fold of 5, each entry counted once, confidence clean."""
    made: list[dict[str, Any]] = []
    a, b = clones(tmp_path, kinds(21), made)  # 7 x (+0.05 +0.05 -0.10): 0.5
    merged = diverge(a, b, ["confirmed", "confirmed", "weakened"], ["weakened", "weakened"], made)
    assert len(made) == 26
    assert merged.verification_history == [made[0], folded(made[1:6]), *made[6:]]
    assert merged.verification_history[1] == {
        "verdict": "folded",
        "folded": 5,
        "verdicts": {"confirmed": 3, "weakened": 2},
        "ts": made[5]["ts"],
        "confidence_before": 0.55,
        "confidence_after": 0.5,
    }
    assert merged.confidence == 0.3  # 0.5 +0.05 +0.05 -0.10 (ours), -0.10 -0.10 (theirs)
    assert conflict_free(merged)
    # the next verdict folds what the merge kept: 27 verdicts, counted once each
    with MdCG(b / "mem") as store:
        store.sync()
        verdicts(store, ["confirmed"], made)
        after = store.get("x")
    assert after.verification_history == [made[0], folded(made[1:7]), *made[7:]]
    assert count(after.verification_history) == 27
    assert after.confidence == 0.35


def test_the_same_fold_made_in_both_clones_is_one_entry(tmp_path: Path) -> None:
    """Base: 21 entries; each clone verifies once, so each folds the same entry alike."""
    made: list[dict[str, Any]] = []
    a, b = clones(tmp_path, kinds(21), made)
    merged = diverge(a, b, ["weakened"], ["confirmed"], made)
    assert merged.verification_history == [made[0], folded(made[1:3]), *made[3:]]
    assert count(merged.verification_history) == 23
    assert merged.confidence == 0.45  # 0.5 -0.10 +0.05
    assert conflict_free(merged)


def test_both_clones_verify_a_history_folded_before(tmp_path: Path) -> None:
    """Base: 30 verdicts (the first, a fold of 9, 20). Ours confirms twice, theirs
    weakens once; both refold (the base fold within theirs)."""
    made: list[dict[str, Any]] = []
    a, b = clones(tmp_path, kinds(30), made)
    merged = diverge(a, b, ["confirmed", "confirmed"], ["weakened"], made)
    assert merged.verification_history == [made[0], folded(made[1:13]), *made[13:]]
    assert merged.verification_history[1]["folded"] == 12
    assert merged.verification_history[1]["verdicts"] == {"confirmed": 8, "weakened": 4}
    assert count(merged.verification_history) == 33
    assert merged.confidence == 0.5
    assert conflict_free(merged)


def test_one_clone_folds_the_other_adds_a_few(tmp_path: Path) -> None:
    """Base: 15 entries. Ours adds 8 (23: folds 2), theirs 3 (18: no fold)."""
    made: list[dict[str, Any]] = []
    a, b = clones(tmp_path, kinds(15), made)
    merged = diverge(a, b, kinds(8), ["weakened"] * 3, made)
    assert merged.verification_history == [made[0], folded(made[1:6]), *made[6:]]
    assert count(merged.verification_history) == 26
    assert merged.confidence == 0.3  # 0.5 +0.10 (ours) -0.30 (theirs)
    assert conflict_free(merged)


def test_a_clone_that_folded_its_own_new_verdicts(tmp_path: Path) -> None:
    """Ours verifies 25 times since base (its fold holds 5 of its own verdicts): they
    count as one change from the base confidence to where the fold ends."""
    made: list[dict[str, Any]] = []
    a, b = clones(tmp_path, kinds(5), made)  # 0.6
    merged = diverge(a, b, kinds(25, offset=2), ["confirmed", "confirmed"], made)
    assert merged.verification_history == [made[0], folded(made[1:12]), *made[12:]]
    assert count(merged.verification_history) == 32
    assert merged.confidence == 0.6  # 0.6 -0.10 (ours: 8 x net 0, one weakening), +0.10
    assert conflict_free(merged)


def test_histories_that_never_folded_merge_as_before(tmp_path: Path) -> None:
    made: list[dict[str, Any]] = []
    a, b = clones(tmp_path, kinds(5), made)
    merged = diverge(a, b, ["confirmed", "weakened"], ["confirmed"] * 3, made)
    assert merged.verification_history == made
    assert merged.confidence == 0.7  # 0.6 -0.05 (ours) +0.15 (theirs)


# -- resolve's evidence, the MCP verify reply --------------------------------------------


def test_resolve_refuses_evidence_over_the_limit(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        store.add(Node(id="x", body="The deploy key rotates monthly.", verification_basis="data"))
        step = store.flywheel_step({"missed_conditions": ["staging"], "node_id": "x"})
        (question,) = step.unresolved
        with pytest.raises(InvalidNodeError) as caught:
            store.resolve(question, "e" * 1_001, True)
        assert str(caught.value) == (
            f"evidence for node {question!r} is 1,001 characters, over the limit of 1,000: "
            "shorten it (keep the full text in a memory of its own and cite its id)"
        )
        assert store.get("x").non_applicable_conditions == []
        assert store.ids(layer="unresolved") == [question]
        done = store.resolve(question, "e" * 1_000, True)
        assert done.node is not None and done.node.non_applicable_conditions == ["staging"]


def test_the_mcp_verify_reply_says_already_in_rejected(tmp_path: Path) -> None:
    """As the CLI: ``x: falsified, already in rejected/ (...)``; the first falsification
    moved it and says nothing more."""
    pytest.importorskip("mcp")
    import json

    from mcp import Client

    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(Node(id="x", body="The deploy key rotates monthly.", verification_basis="data"))
        server = create_server(root, store=store)
        replies: list[dict[str, Any]] = []

        async def run() -> None:
            async with Client(server) as client:
                for evidence in ("wrong", "wrong again"):
                    res = await client.call_tool(
                        "verify", {"id": "x", "evidence": evidence, "verdict": "falsified"}
                    )
                    assert not res.is_error
                    replies.append(json.loads(res.content[0].text))

        anyio.run(run)
        path = str(store.path_of("x"))
    reply = {"id": "x", "verdict": "falsified", "layer": "rejected", "confidence_after": 0.5, "path": path}
    assert replies == [
        {**reply, "confidence_before": 0.5},
        {**reply, "confidence_before": 0.5, "note": "already in rejected/"},
    ]
