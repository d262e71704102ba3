"""``verify`` stays usable however often a memory is verified (review r3 of session 31).

Every verdict appended an entry to ``verification_history``; once the frontmatter would
pass 256 KiB every ``verify`` failed (with ~200-character evidence: verify #822), even
``falsified``, so a memory proven false stayed in knowledge/ and kept being served. MCP
took evidence of any length: two calls with ~85 KB of evidence blocked a memory at once.
Now evidence holds at most ``MAX_EVIDENCE_CHARS`` characters (longer is refused in the
library, the CLI and MCP with one message), and the history keeps its first entry, one
``folded`` entry counting the ones between and the ``HISTORY_KEEP`` most recent.
``falsified`` on a memory already in rejected/ said "moved to rejected/" and replaced
``state_attributes.falsified`` (its ``from_layer`` became "rejected", the layer it came
from was lost); now the first record stands and the CLI says it was already there.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from md_cg import MdCG, loop
from md_cg.cli import app
from md_cg.errors import InvalidNodeError
from md_cg.node import Node

EVIDENCE = (
    "Checked against the ops runbook page and the last three rotation tickets; consistent. " * 2
).strip()


def too_long(n: int) -> str:
    return (
        f"evidence for node 'x' is {n:,} characters, over the limit of 1,000: "
        "shorten it (keep the full text in a memory of its own and cite its id)"
    )


def fresh(root: Path) -> MdCG:
    store = MdCG(root)
    store.add(Node(id="x", body="The deploy key rotates monthly.", verification_basis="data"))
    return store


def cli(root: Path, *args: str) -> Any:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"}).invoke(
        app, ["verify", "x", *args, "--root", str(root)]
    )


def test_the_limits() -> None:
    assert (loop.MAX_EVIDENCE_CHARS, loop.HISTORY_KEEP) == (1_000, 20)


def test_evidence_over_the_limit_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with fresh(root) as store:
        path = store.path_of("x")
        assert path.parent.parent.name == "knowledge"
        before = path.read_bytes()
        with pytest.raises(InvalidNodeError) as info:
            store.verify("x", "a" * 1_001, "confirmed")
        assert (str(info.value), info.value.field, info.value.node_id) == (too_long(1_001), "evidence", "x")
        with pytest.raises(InvalidNodeError, match=r"^evidence for node 'x' is 85,000 characters"):
            store.verify("x", "b" * 85_000, "falsified")
        assert path.read_bytes() == before
        # the limit counts the stripped text: 1,000 characters with spaces around are taken
        node = store.verify("x", "  " + "c" * 1_000 + "\n", "confirmed")
        assert node.verification_history[-1]["evidence"] == "c" * 1_000
    result = cli(root, "--evidence", "d" * 1_001, "--verdict", "confirmed")
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"error: {too_long(1_001)}\n")


def test_mcp_verify_names_the_limit_and_refuses_longer_evidence(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from md_cg.mcp_server import create_server

    with fresh(tmp_path / "m") as store:
        server = create_server(tmp_path / "m", store=store)

        async def run() -> None:
            async with Client(server) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                verify = tools["verify"]
                assert verify.description == (
                    "Record evidence about a memory: confirmed (+0.05 confidence), weakened (-0.10), "
                    "falsified (moves it to rejected/). Evidence: at most 1,000 characters."
                )
                assert verify.input_schema["properties"]["evidence"]["description"] == (
                    "What you observed (required, at most 1,000 characters)."
                )
                for _ in range(2):
                    res = await client.call_tool(
                        "verify", {"id": "x", "evidence": "e" * 85_000, "verdict": "confirmed"}
                    )
                    assert res.is_error
                    assert res.content[0].text == f"Error executing tool verify: {too_long(85_000)}"
                res = await client.call_tool(
                    "verify", {"id": "x", "evidence": "gone", "verdict": "falsified"}
                )
                assert not res.is_error
                assert json.loads(res.content[0].text)["layer"] == "rejected"

        anyio.run(run)
    with MdCG(tmp_path / "m") as store:
        node = store.get("x")
        assert (node.layer, [h["evidence"] for h in node.verification_history]) == ("rejected", ["gone"])


def test_history_keeps_the_first_a_fold_and_the_most_recent(tmp_path: Path) -> None:
    verdicts = ["weakened", "confirmed", "confirmed", "weakened", "confirmed"] * 5  # 25 verdicts
    with fresh(tmp_path / "m") as store:
        for i, verdict in enumerate(verdicts[:21]):
            store.verify("x", f"e{i}", verdict)
        assert [h["evidence"] for h in store.get("x").verification_history] == [f"e{i}" for i in range(21)]
        for i, verdict in enumerate(verdicts[21:], start=21):
            node = store.verify("x", f"e{i}", verdict)
    with MdCG(tmp_path / "m") as store:
        history = store.get("x").verification_history
        assert history[-1]["confidence_after"] == store.get("x").confidence
    assert history == node.verification_history
    assert len(history) == 22
    assert history[0]["evidence"] == "e0"
    assert [h["evidence"] for h in history[2:]] == [f"e{i}" for i in range(5, 25)]
    fold = history[1]
    assert set(fold) == {"verdict", "folded", "verdicts", "ts", "confidence_before", "confidence_after"}
    assert (fold["verdict"], fold["folded"], fold["verdicts"]) == (
        "folded",
        4,
        {"confirmed": 3, "weakened": 1},
    )
    # e1..e4: 0.4 +0.05 +0.05 -0.10 +0.05 -> 0.45; the chain of confidences has no gap
    assert (fold["confidence_before"], fold["confidence_after"]) == (0.4, 0.45)
    assert all(a["confidence_after"] == b["confidence_before"] for a, b in itertools.pairwise(history))
    assert history[2]["ts"] >= fold["ts"] >= history[0]["ts"]


def test_verify_2000_times_then_falsified_still_moves_the_memory(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with fresh(root) as store:
        before = store.path_of("x")
        for i in range(2_000):
            store.verify("x", f"{i}: {EVIDENCE}", "confirmed")
        node = store.verify("x", "the key was found never to rotate", "falsified")
        assert node.layer == "rejected" and store.get("x").layer == "rejected"
        history = store.get("x").verification_history
        assert len(history) == 22  # the first, the fold, the 20 most recent
        assert history[0]["evidence"] == f"0: {EVIDENCE}"
        assert (history[1]["folded"], history[1]["verdicts"]) == (1_980, {"confirmed": 1_980})
        assert [h["evidence"] for h in history[2:-1]] == [f"{i}: {EVIDENCE}" for i in range(1_981, 2_000)]
        assert history[-1]["verdict"] == "falsified" and history[-1]["from_layer"] == "knowledge"
        assert store.get("x").state_attributes["falsified"]["from_layer"] == "knowledge"
        results, meta = store.search("deploy key rotates")
        assert (results, meta["covered_neg"]) == ([], ["x"])  # no longer served, told as negative memory
        after = store.path_of("x")
    assert after.parent.name == "rejected" and after.exists() and not before.exists()


def test_a_long_history_written_before_is_bounded_by_the_next_verdict(tmp_path: Path) -> None:
    with fresh(tmp_path / "m") as store:
        old = [
            {
                "ts": 1.0 + i,
                "verdict": "confirmed",
                "evidence": f"o{i}",
                "confidence_before": 0.5,
                "confidence_after": 0.5,
            }
            for i in range(40)
        ]
        old[1:4] = [{"ts": 2.0, "verdict": "folded", "folded": 7, "verdicts": {"weakened": 7}}]
        store.update("x", verification_history=old)
        history = store.verify("x", "new", "weakened").verification_history
    assert len(history) == 22
    assert [h.get("evidence") for h in (history[0], *history[2:])] == [
        "o0",
        *[f"o{i}" for i in range(21, 40)],
        "new",
    ]
    assert (history[1]["folded"], history[1]["verdicts"]) == (7 + 17, {"weakened": 7, "confirmed": 17})
    assert history[1]["ts"] == 21.0  # the last entry folded: o20


def test_falsifying_a_rejected_memory_keeps_the_layer_it_came_from(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with fresh(root):
        pass
    first = cli(root, "--evidence", "never rotates", "--verdict", "falsified")
    assert (first.exit_code, first.stdout) == (
        0,
        f"x: falsified, moved to rejected/ ({root}/rejected/x.md)\n",
    )
    with MdCG(root) as store:
        record = store.get("x").state_attributes["falsified"]
        assert (record["evidence"], record["from_layer"]) == ("never rotates", "knowledge")
    again = cli(root, "--evidence", "still never rotates", "--verdict", "falsified")
    assert (again.exit_code, again.stdout) == (
        0,
        f"x: falsified, already in rejected/ ({root}/rejected/x.md)\n",
    )
    with MdCG(root) as store:
        node = store.get("x")
        assert node.layer == "rejected"
        assert node.state_attributes["falsified"] == record  # the first record stands
        assert [(h["evidence"], h["from_layer"]) for h in node.verification_history] == [
            ("never rotates", "knowledge"),
            ("still never rotates", "rejected"),
        ]
