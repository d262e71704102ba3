"""The MCP server: every tool through a real stdio client, files on disk, bounded replies, tool errors.

The main test spawns ``python -m md_cg.cli mcp --root DIR`` as a subprocess
with the SDK's stdio client (as Claude Desktop or any MCP client would) and
drives every tool, checking both the answers and the store folder. The
in-process tests use the SDK's ``Client(server)``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from conftest import BINARY_SEARCH, build_small_store
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from md_cg import MdCG, Scope
from md_cg.mcp_server import BUDGETS, GET_CHARS, INSTRUCTIONS, MAX_GET_CHARS, create_server
from md_cg.migrate import migrate
from md_cg.render import iso
from md_cg.sample import bundled_sample_path

REPO = Path(__file__).resolve().parent.parent
TOOLS = {
    "remember",
    "update",
    "forget",
    "supersede",
    "search",
    "recall",
    "get",
    "list",
    "neighbours",
    "verify",
    "reflect",
    "organize",
    "recall_stats",
    "on_this_day",
    "inject",
    "sync",
    "health",
}
BSEARCH_REASON = 'CCG complete, no not-applicable condition hit, verification basis "test"'


def _md_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts}


def _frontmatter_line(path: Path, key: str) -> str:
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith(f"{key}: "):
            return line[len(key) + 2 :]
    raise AssertionError(f"{key} not in {path}")


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    text = result.content[0].text
    data = json.loads(text)
    assert result.structured_content == data
    assert text == json.dumps(data, ensure_ascii=False, separators=(",", ":"))  # compact, no indent
    return data


def _err(result: Any) -> str:
    assert result.is_error
    return result.content[0].text


async def _writes(session: ClientSession, root: Path) -> Path:
    """remember, update, duplicate and empty-body errors; returns the new node's path."""
    before = _md_files(root)
    data = _ok(
        await session.call_tool(
            "remember",
            {
                "body": "# Function: merge sort\nMerge sort splits, sorts and merges.\n",
                "tags": ["domain:computing", "sorting"],
                "id": "kp_merge",
                "importance": 0.7,
                "confidence": 0.5,
                "verification_basis": "test",
                "not_applicable": ["memory is scarce"],
                "edges": [{"target": "kp_sorting", "type": "part_of", "confidence": 0.8}],
            },
        )
    )
    assert set(data) == {"id", "layer", "path", "kind", "tier"}  # a fact lacks no mark
    assert (data["id"], data["layer"], data["kind"], data["tier"]) == (
        "kp_merge",
        "knowledge",
        "fact",
        "long",
    )
    half = _ok(
        await session.call_tool(
            "remember",
            {"body": "# Function: quick sort\n# Applies when: an array fits in memory\n", "id": "kp_q"},
        )
    )
    assert (half["kind"], half["ccg_missing"]) == (
        "procedure",
        ["steps", "executes", "verified_by", "not_applicable"],
    )
    _ok(await session.call_tool("forget", {"id": "kp_q", "reason": "test"}))
    path = Path(data["path"])
    assert _md_files(root) - before == {path.relative_to(root).as_posix()}
    assert _frontmatter_line(path, "tags") == '["domain:computing", "sorting"]'
    assert _frontmatter_line(path, "non_applicable_conditions") == '["memory is scarce"]'

    assert _err(await session.call_tool("remember", {"body": "x", "id": "kp_merge"})) == (
        "Error executing tool remember: a memory with id 'kp_merge' already exists "
        f"({path.relative_to(root).as_posix()}); change it with the `update` tool, or call `remember` "
        "with overwrite=true to replace it"
    )
    for body in ("", "  \n "):
        assert _err(await session.call_tool("remember", {"body": body})) == (
            "Error executing tool remember: body is empty: a memory needs some text"
        )
    assert "body is empty" in _err(await session.call_tool("update", {"id": "kp_merge", "body": ""}))
    assert "nothing to change" in _err(await session.call_tool("update", {"id": "kp_merge"}))

    up = _ok(
        await session.call_tool(
            "update",
            {"id": "kp_merge", "body": "# Function: merge sort\nStable, O(n log n).\n", "importance": 0.9},
        )
    )
    assert up["updated"] == ["body", "importance"] and up["path"] == str(path)
    assert path.read_text(encoding="utf-8").endswith("---\n# Function: merge sort\nStable, O(n log n).\n\n")
    assert _frontmatter_line(path, "importance") == "0.9"
    moved = _ok(await session.call_tool("update", {"id": "kp_merge", "layer": "contextual", "tags": ["x"]}))
    assert moved["layer"] == "contextual" and not path.exists()
    assert Path(moved["path"]) == root / "contextual" / "kp_merge.md"
    return Path(moved["path"])


async def _reads(session: ClientSession, root: Path) -> None:
    """search/recall (snippet, reasons once, covered_neg), fill, get (whole body), list, neighbours."""
    args = {"query": "binary search", "k": 3}
    found = _ok(await session.call_tool("search", args))
    again = _ok(await session.call_tool("recall", args))
    assert (again["results"], again["reasons"]) == (found["results"], found["reasons"])
    top = found["results"][0]
    with MdCG(root, read_only=True) as reader:
        stored = reader.get("kp_bsearch")
    assert top == {
        "id": "kp_bsearch",
        "title": "Function: binary search",
        "layer": "knowledge",
        "tier": "T2",
        "state": "ACCEPT",
        "why": 0,
        "score": top["score"],
        "confidence": 0.6,
        "matched": ["binary", "search"],  # the words as the agent wrote them, not the stem "binari"
        "updated": iso(stored.updated_at),  # which fact is current
        "tags": ["domain:computing"],
        "snippet": "Binary search halves the search interval at every step.",
    }
    assert found["reasons"][0] == BSEARCH_REASON and "body" not in top and "basis" not in top
    assert [n["layer"] for n in found["meta"]["covered_neg"]] == ["rejected"]
    assert found["meta"]["covered_neg_total"] == 1
    assert {r["id"] for r in found["results"]} == {"kp_bsearch"}  # filler left out
    filled = _ok(await session.call_tool("search", {**args, "fill": True}))
    assert len(filled["results"]) == 3 and filled["meta"]["filler_omitted"] == 0
    assert [r.get("filler", False) for r in filled["results"]] == [False, True, True]
    assert found["meta"]["filler_omitted"] == 2

    nonsense = _ok(await session.call_tool("search", {"query": "xyzzy plugh"}))
    assert nonsense["results"] == [] and nonsense["counts"] == {}

    routed = _ok(
        await session.call_tool(
            "search",
            {
                "query": "binary search",
                "k": 1,
                "context": {"domain": "computing", "situation": "a linked list"},
            },
        )
    )
    assert (routed["results"][0]["id"], routed["results"][0]["state"]) == ("kp_bsearch", "REJECT")
    assert 'not-applicable condition "linked list"' in routed["reasons"][routed["results"][0]["why"]]

    got = _ok(await session.call_tool("get", {"id": "kp_bsearch"}))
    assert got["body"] == BINARY_SEARCH and got["frontmatter"]["verification_basis"] == "test"

    listed = _ok(await session.call_tool("list", {"layer": "knowledge"}))
    assert listed["total"] == 2 and {i["id"] for i in listed["items"]} == {"kp_bsearch", "kp_sorting"}
    by_tag = _ok(await session.call_tool("list", {"tag": "x"}))
    assert [i["id"] for i in by_tag["items"]] == ["kp_merge"]
    page = _ok(await session.call_tool("list", {"limit": 2, "offset": 1}))
    assert (page["total"], page["offset"], len(page["items"])) == (5, 1, 2)
    assert _ok(await session.call_tool("list", {"since": "2999-01-01"}))["total"] == 0
    assert "since 'soon'" in _err(await session.call_tool("list", {"since": "soon"}))

    inc = _ok(await session.call_tool("neighbours", {"id": "kp_sorting", "direction": "in"}))
    assert {n["id"] for n in inc["neighbours"]} == {"kp_bsearch", "kp_merge"} and inc["total"] == 2


async def _loop_and_maintenance(session: ClientSession, root: Path) -> None:
    ver = _ok(
        await session.call_tool(
            "verify", {"id": "kp_bsearch", "evidence": "all 40 tests pass", "verdict": "confirmed"}
        )
    )
    assert (ver["confidence_before"], ver["confidence_after"]) == (0.6, 0.65)
    assert _frontmatter_line(Path(ver["path"]), "confidence") == "0.65"
    ref = _ok(await session.call_tool("reflect", {"query": "binary search", "k": 2}))
    assert ref["results"] == [{"id": "kp_bsearch", "state": "ACCEPT", "title": "Function: binary search"}]
    assert ref["reflection"]["d"] == 0.0 and ref["reflection"]["t"] == 0

    # a hand edit is seen by the next call without asking for a sync
    hand = root / "contextual" / "ctx_hand.md"
    hand.write_text("# Tea preference\nThe user drinks oolong tea.\n", encoding="utf-8")
    time.sleep(1.1)
    seen = _ok(await session.call_tool("search", {"query": "oolong tea"}))
    assert [r["id"] for r in seen["results"]] == ["ctx_hand"]
    hand.write_text("# Coffee preference\nThe user switched to espresso.\n", encoding="utf-8")
    time.sleep(1.1)
    assert _ok(await session.call_tool("get", {"id": "ctx_hand"}))["body"].startswith("# Coffee preference")
    seen = _ok(await session.call_tool("search", {"query": "espresso"}))
    assert [(r["id"], r["title"]) for r in seen["results"]] == [("ctx_hand", "Coffee preference")]
    # ... and `sync` lists it, once: what the pick-ups took in since the last sync (session 30)
    synced = _ok(await session.call_tool("sync", {}))
    assert (synced["clean"], synced["problems"], synced["totals"]) == (False, False, {"added": 1})
    assert (synced["added"], synced["changed"]) == (["ctx_hand"], [])
    synced = _ok(await session.call_tool("sync", {}))
    assert (synced["clean"], synced["problems"], synced["totals"]) == (True, False, {})

    h = _ok(await session.call_tool("health", {}))
    assert h["ok"] is True and h["nodes"] == 6 and h["findings"] == []

    assert "no node with id 'kp_nope'" in _err(await session.call_tool("get", {"id": "kp_nope"}))
    assert "unknown verdict" in _err(
        await session.call_tool("verify", {"id": "kp_bsearch", "evidence": "x", "verdict": "maybe"})
    )
    assert "unknown layer" in _err(await session.call_tool("search", {"query": "x", "layer": "attic"}))
    assert "protected" in _err(await session.call_tool("forget", {"id": "anc_rule", "reason": "tidy"}))
    assert _err(await session.call_tool("search", {"query": "x", "k": 0}))
    assert _err(await session.call_tool("search", {"query": "x", "judge": False})) == (
        "search does not take judge (it takes: context, fill, k, layer, query, since, tag, until)"
    )
    # s29 r6: a tool without arguments said "(it takes: )"
    assert _err(await session.call_tool("health", {"deep": True})) == (
        "health does not take deep (it takes no arguments)"
    )

    gone = _ok(await session.call_tool("forget", {"id": "kp_merge", "reason": "superseded"}))
    assert gone == {
        "id": "kp_merge",
        "forgotten": True,
        "layer": "contextual",
        "dangling_edges": [],
        "dangling_total": 0,
    }
    assert "no node with id 'kp_merge'" in _err(await session.call_tool("get", {"id": "kp_merge"}))


async def _scenario(root: Path) -> None:
    env = {
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(root.parent)),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "md_cg.cli", "mcp", "--root", str(root)], env=env
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "md-cg" and init.instructions == INSTRUCTIONS
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        assert tools["recall"].description == "Same as `search`."
        await _writes(session, root)
        await _reads(session, root)
        await _loop_and_maintenance(session, root)

    with MdCG(root, read_only=True) as store:
        assert [(t["id"], t["reason"]) for t in store.tombstones()] == [
            ("kp_q", "test"),
            ("kp_merge", "superseded"),
        ]
        assert "kp_merge" not in store and store.get("kp_bsearch").confidence == 0.65
        assert store.health().ok


def test_every_tool_over_stdio_changes_the_files(tmp_path: Path) -> None:
    root = build_small_store(tmp_path / "memory")

    async def bounded() -> None:
        with anyio.fail_after(90):
            await _scenario(root)

    anyio.run(bounded)


def test_in_process_server_creates_a_missing_store_and_reports_errors(tmp_path: Path) -> None:
    root = tmp_path / "new-memory"
    server = create_server(root)
    assert root.is_dir() and (root / "knowledge").is_dir()

    async def run() -> None:
        async with Client(server) as client:
            empty = await client.call_tool("search", {"query": "anything"})
            assert _ok(empty)["results"] == []
            node_id = _ok(await client.call_tool("remember", {"body": "note", "layer": "contextual"}))["id"]
            assert (root / "contextual" / f"{node_id}.md").is_file()
            bad = await client.call_tool("neighbours", {"id": node_id, "direction": "sideways"})
            assert "direction must be one of" in _err(bad)
            assert _err(await client.call_tool("reflect", {"query": "note", "feedback": ["MAYBE"]}))
            assert _ok(await client.call_tool("get", {"id": node_id}))["layer"] == "contextual"

    anyio.run(run)


def test_instructions_describe_the_states_truthfully() -> None:
    text = " ".join(INSTRUCTIONS.split())
    for state in ("ACCEPT", "REJECT", "DEFER", "BLINDSPOT"):
        assert f"- {state}:" in INSTRUCTIONS
    # a fact is never BLINDSPOT (md_cg.judge): the instructions must not present it as a warning
    assert (
        'A plain fact ("the user\'s name is Sam") is not a warning: ACCEPT with a verification basis' in text
    )
    assert "BLINDSPOT: a procedure whose annotation is incomplete" in text
    assert "do not rely on it alone" not in text


def test_every_tool_is_documented_with_its_budget(tmp_path: Path) -> None:
    docs = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    for name in TOOLS - {"recall"}:
        assert f"### `{name}`" in docs, name
    assert "### `search` and `recall`" in docs
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", docs, re.MULTILINE))
    for name, budget in BUDGETS.items():
        per = f" + {budget.per_item:,} × {budget.per}" if budget.per else ""
        assert rows.get(name, "").strip() == f"{budget.base:,}{per}", name
    assert set(BUDGETS) == TOOLS
    server = create_server(tmp_path)

    async def names() -> set[str]:
        return {t.name for t in await server.list_tools()}

    assert anyio.run(names) == TOOLS


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sample") / "store"
    assert migrate(bundled_sample_path(), root).ok
    return root


QUERIES = ("二分查找", "牛顿第二定律", "binary search", "asyncio", "xyzzy plugh", "能量守恒 定律")


def test_replies_stay_within_their_budgets_on_the_sample(sample_store: Path) -> None:
    with MdCG(sample_store) as store:
        server = create_server(sample_store, store=store)
        some = store.list_nodes("knowledge", limit=3)

        async def run() -> None:
            async with Client(server) as client:

                async def size(tool: str, args: dict[str, Any]) -> int:
                    result = await client.call_tool(tool, args)
                    assert not result.is_error, result.content
                    return len(result.content[0].text)

                for query in QUERIES:
                    for k, fill in ((5, False), (5, True), (20, True)):
                        n = await size("search", {"query": query, "k": k, "fill": fill})
                        assert n <= BUDGETS["search"].chars(k), (query, k, n)
                    assert await size("reflect", {"query": query, "k": 10}) <= BUDGETS["reflect"].chars(10)
                for limit in (20, 100):
                    assert await size("list", {"limit": limit}) <= BUDGETS["list"].chars(limit)
                for e in some:
                    fm_bytes = store.path_of(e.id).stat().st_size - len(store.get(e.id).body.encode())
                    assert await size("get", {"id": e.id}) <= BUDGETS["get"].chars(GET_CHARS + fm_bytes)
                    n = await size("neighbours", {"id": e.id, "direction": "both", "depth": 3})
                    assert n <= BUDGETS["neighbours"].chars(50)
                for query in QUERIES:
                    assert await size("inject", {"query": query}) <= BUDGETS["inject"].chars(5)
                assert await size("recall_stats", {}) <= BUDGETS["recall_stats"].chars()
                assert await size("on_this_day", {}) <= BUDGETS["on_this_day"].chars()
                candidates = [
                    {"layer": "knowledge", "title": e.title, "content": f"{e.title} {'x' * 400}"}
                    for e in store.list_nodes("knowledge", limit=60)
                ]
                n = await size("organize", {"mode": "dryRun", "candidates": candidates})
                assert n <= BUDGETS["organize"].chars(len(candidates)), n
                assert await size("health", {}) <= BUDGETS["health"].chars()
                assert await size("sync", {}) <= BUDGETS["sync"].chars()

        anyio.run(run)


def test_the_scope_comes_from_the_server_never_from_a_tool(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="mine", layer="contextual", body="okapi for agent a", agent_scope="a")
        store.add(id="theirs", layer="contextual", body="okapi for agent b", agent_scope="b")
        store.add(id="secret", layer="contextual", body="okapi secret", sensitivity="secret")
    server = create_server(root, scope=Scope(agent="a"))

    async def run() -> None:
        async with Client(server) as client:
            found = _ok(await client.call_tool("search", {"query": "okapi", "fill": True}))
            assert [r["id"] for r in found["results"]] == ["mine"]
            assert {i["id"] for i in _ok(await client.call_tool("list", {}))["items"]} == {"mine"}
            assert "no node with id 'theirs'" in _err(await client.call_tool("get", {"id": "theirs"}))
            made = _ok(
                await client.call_tool("remember", {"body": "okapi note", "id": "new", "layer": "contextual"})
            )
            assert made["id"] == "new"
            assert "agent" in _err(await client.call_tool("search", {"query": "okapi", "agent": "b"}))

    anyio.run(run)
    server.store.close()
    with MdCG(root, read_only=True) as store:
        assert store.get("new").agent_scope == "a"
    with MdCG(root) as store, pytest.raises(TypeError, match="pass scope only when create_server opens"):
        create_server(root, store=store, scope=Scope(agent="a"))


def test_a_scoped_server_is_told_that_a_file_needs_a_person_not_which(tmp_path: Path) -> None:
    """`mdcg mcp` without --agent is scoped (it sees normal, unscoped memories): a memory broken
    by hand must not vanish without a word, and its path is not named (it may be a secret one's)."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="fine", layer="contextual", body="a fine memory")
        store.add(id="broken", layer="contextual", body="will break")
    path = root / "contextual" / "broken.md"
    path.write_text(path.read_text().replace("---\n", "---\ntags: [oops\n", 1))
    server = create_server(root, scope=Scope())

    async def run() -> None:
        async with Client(server) as client:
            synced = _ok(await client.call_tool("sync", {}))
            assert (synced["clean"], synced["problems"], synced["withheld"], synced["malformed"]) == (
                False,
                True,
                1,
                [],
            )
            assert "1 file problem(s)" in synced["note"] and "mdcg health" in synced["note"]
            health = _ok(await client.call_tool("health", {}))
            assert health["ok"] is False
            assert [f.keys() - {"detail"} for f in health["findings"]] == [{"kind", "severity"}]
            assert health["findings"][0]["kind"] == "withheld"  # no path, no node_id: left out
            assert "broken" not in json.dumps(health) and "broken" not in json.dumps(synced)

    anyio.run(run)
    server.store.close()
    with MdCG(root) as store:  # unscoped: named
        assert [f.path for f in store.health().by_kind("unreadable_file")] == ["contextual/broken.md"]


def test_organize_recall_stats_on_this_day_and_inject(tmp_path: Path) -> None:
    root = build_small_store(tmp_path / "memory")
    server = create_server(root)

    async def run() -> None:
        async with Client(server) as client:
            candidates = [
                {"layer": "knowledge", "title": "Sorting", "content": "Sorting puts items in order."},
                {"layer": "contextual", "title": "Coffee order", "content": "Oat-milk flat white."},
            ]
            dry = _ok(await client.call_tool("organize", {"mode": "dryRun", "candidates": candidates}))
            assert [(i["index"], i["verdict"]) for i in dry["items"]] == [(0, "exact"), (1, "new")]
            assert dry["items"][0]["match"]["id"] == "kp_sorting" and dry["status"] == "ok"
            decisions = [{"action": "save", "index": 1}, {"action": "archive", "id": "kp_sorting"}]
            done = _ok(
                await client.call_tool(
                    "organize", {"mode": "apply", "run_id": dry["run_id"], "decisions": decisions}
                )
            )
            assert (done["status"], done["archived_ids"], len(done["saved_ids"])) == ("ok", ["kp_sorting"], 1)
            assert "already applied" in _err(
                await client.call_tool(
                    "organize", {"mode": "apply", "run_id": dry["run_id"], "decisions": decisions}
                )
            )
            assert "kp_sorting" not in {i["id"] for i in _ok(await client.call_tool("list", {}))["items"]}

            items = _ok(await client.call_tool("inject", {"query": "binary search"}))["items"]
            assert [i["id"] for i in items] == ["kp_bsearch"]
            assert _ok(await client.call_tool("inject", {"query": "xyzzy plugh"})) == {"items": []}
            stats = _ok(await client.call_tool("recall_stats", {}))
            assert [(r["id"], r["count"]) for r in stats["top_recalled"]] == [("kp_bsearch", 1)]
            assert stats["injection"]["runs"] == 2
            _ok(await client.call_tool("get", {"id": "kp_bsearch"}))  # an agent's read is a get event
            stats = _ok(await client.call_tool("recall_stats", {}))
            assert [(r["id"], r["count"]) for r in stats["top_recalled"]] == [("kp_bsearch", 2)]
            assert stats["coverage"]["by_mode"] == {"search": 0, "inject": 2, "get": 1}
            shown = _ok(await client.call_tool("on_this_day", {}))["memory"]
            assert set(shown) == {  # all made today: the last resort (no tier, a note)
                "id",
                "date",
                "years_ago",
                "months_ago",
                "show_count",
                "stage",
                "title",
                "snippet",
                "note",
            }
            assert _err(await client.call_tool("sweep", {}))  # the server never sweeps

    anyio.run(run)
    server.store.close()
    with MdCG(root, read_only=True) as store:
        assert "kp_sorting" not in store and (root / "archive").is_dir()
        assert [store.entry(i).title for i in store.ids("contextual")] == ["Coffee order"]


def test_arguments_outside_the_schema_get_one_line_errors(tmp_path: Path) -> None:
    """Not pydantic's four lines and web address: the tool, the argument, the rule, the value."""
    server = create_server(tmp_path / "m")
    cases = [
        (
            "search",
            {"query": "x", "k": 0},
            "search: argument 'k': input should be greater than or equal to 1 (got 0)",
        ),
        (
            "list",
            {"limit": 500},
            "list: argument 'limit': input should be less than or equal to 100 (got 500)",
        ),
        ("search", {"query": 5}, "search: argument 'query': input should be a valid string (got 5)"),
        ("get", {}, "get: argument 'id' is required"),
        (
            "remember",
            {"body": "x", "importance": 7},
            "remember: argument 'importance': input should be less than or equal to 1 (got 7)",
        ),
    ]

    async def run() -> list[str]:
        async with Client(server) as client:
            return [_err(await client.call_tool(tool, args)) for tool, args, _ in cases]

    assert anyio.run(run) == [want for _, _, want in cases]


def _alpha_store(root: Path) -> Path:
    """A store of one node, ``a``, titled "Alpha original"."""
    with MdCG(root, create=True) as s:
        s.add(id="a", layer="self", body="# Alpha original\nbody\n")
    return root


def _hand_edit(root: Path) -> None:
    """Retitle ``a`` in its file, as a person would while no server runs."""
    path = root / "self" / "a.md"
    text = path.read_text(encoding="utf-8").replace("Alpha original", "Alpha edited while no server ran")
    path.write_text(text, encoding="utf-8")


def test_the_server_picks_up_hand_edits_before_the_first_call(tmp_path: Path) -> None:
    """``warm`` (run in a thread by run_server) does the first, full pick-up of files
    edited while no server ran, so that the first tool call does not wait for it."""
    root = _alpha_store(tmp_path / "m")
    with MdCG(root) as store:
        server = create_server(root, store=store)
        _hand_edit(root)
        assert store.entry("a").title == "Alpha original"  # reads follow the log, not the files
        server.warm()
        assert store.entry("a").title == "Alpha edited while no server ran"


def test_a_failed_warm_up_is_logged_and_the_first_call_meets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from md_cg import maintenance

    root = _alpha_store(tmp_path / "m")
    with MdCG(root) as store:
        server = create_server(root, store=store)
        _hand_edit(root)
        real = maintenance.stale_paths

        def failing(*args: object) -> object:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(maintenance, "stale_paths", failing)
        server.warm()
        assert capsys.readouterr().err == (
            "md-cg: picking up hand edits at start failed: [Errno 5] Input/output error\n"
        )

        async def run() -> None:
            async with Client(server) as client:
                failed = _err(await client.call_tool("get", {"id": "a"}))
                assert failed == "Error executing tool get"  # logged with its traceback
                monkeypatch.setattr(maintenance, "stale_paths", real)
                got = _ok(await client.call_tool("get", {"id": "a"}))
                assert got["body"] == "# Alpha edited while no server ran\nbody\n"

        anyio.run(run)


def test_run_server_warms_up_while_it_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from md_cg import mcp_server

    root = _alpha_store(tmp_path / "m")
    _hand_edit(root)
    seen: list[str] = []

    def serve(self: mcp_server.MemoryServer) -> None:  # stands in for the stdio loop
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self._lock:
                title = self.store.entry("a").title
            if title != "Alpha original":
                break
            time.sleep(0.01)
        seen.append(title)

    monkeypatch.setattr(mcp_server.MemoryServer, "run", serve)
    mcp_server.run_server(root)
    assert seen == ["Alpha edited while no server ran"]


def test_remember_does_not_store_an_identical_memory_twice(tmp_path: Path) -> None:
    root = tmp_path / "m"
    server = create_server(root)
    body = "周五发布: release on Friday after the 灰度 rollout\n"

    async def run() -> None:
        async with Client(server) as client:
            first = _ok(await client.call_tool("remember", {"body": body, "layer": "contextual"}))
            files = _md_files(root)
            again = _ok(
                await client.call_tool(
                    "remember", {"body": body + "\n", "layer": "contextual", "tags": ["x"]}
                )
            )
            assert again == {**first, "existing": True}
            assert _md_files(root) == files  # nothing written, tags not changed
            assert "tags" not in _frontmatter_keys(Path(first["path"]))
            elsewhere = _ok(await client.call_tool("remember", {"body": body, "layer": "self"}))
            assert "existing" not in elsewhere and elsewhere["id"] != first["id"]
            forced = _ok(
                await client.call_tool("remember", {"body": body, "layer": "contextual", "duplicate": True})
            )
            assert "existing" not in forced and forced["id"] not in (first["id"], elsewhere["id"])
            named = _ok(
                await client.call_tool("remember", {"body": body, "layer": "contextual", "id": "friday"})
            )
            assert named["id"] == "friday" and "existing" not in named  # a name given is stored as asked
            assert len(_md_files(root)) == len(files) + 3

    try:
        anyio.run(run)
    finally:
        server.store.close()


def _frontmatter_keys(path: Path) -> set[str]:
    head = path.read_text(encoding="utf-8").split("---\n")[1]
    return {line.split(":", 1)[0] for line in head.splitlines() if line and not line.startswith(" ")}


def test_search_filters_by_tag_and_time_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "m"
    server = create_server(root)

    async def run() -> None:
        async with Client(server) as client:
            for i, tags in enumerate([["ops"], ["OPS", "db"], ["db"], []]):
                await client.call_tool("remember", {"body": f"deploy step {i}: 发布前检查", "tags": tags})
            reply = _ok(await client.call_tool("search", {"query": "deploy 发布", "k": 10, "tag": "ops"}))
            assert sorted(r["snippet"] for r in reply["results"]) == [
                "deploy step 0: 发布前检查",
                "deploy step 1: 发布前检查",
            ]
            assert reply["meta"]["filter"] == {"tag": "ops", "matching": 2}
            later = _ok(await client.call_tool("recall", {"query": "deploy", "since": "2999-01-01"}))
            assert later["results"] == [] and later["meta"]["filter"] == {
                "since": "2999-01-01T00:00:00Z",
                "matching": 0,
            }
            bad = _err(await client.call_tool("search", {"query": "deploy", "until": "soon"}))
            assert bad.startswith("Error executing tool search: until 'soon': expected an ISO date or time")
            both = _ok(await client.call_tool("search", {"query": "deploy", "tag": ["db", "Ops"]}))
            assert [r["snippet"] for r in both["results"]] == ["deploy step 1: 发布前检查"]
            assert both["meta"]["filter"]["tag"] == ["db", "Ops"] and both["meta"]["filter"]["matching"] == 1
            listed = _ok(await client.call_tool("list", {"tag": ["db", "ops"]}))
            assert [i["tags"] for i in listed["items"]] == [["OPS", "db"]] and listed["total"] == 1
            plain = _ok(await client.call_tool("search", {"query": "deploy"}))
            assert "filter" not in plain["meta"] and len(plain["results"]) == 4

    try:
        anyio.run(run)
    finally:
        server.store.close()


def test_supersede_leaves_the_old_fact_out_of_search(tmp_path: Path) -> None:
    root = tmp_path / "m"
    server = create_server(root)

    async def run() -> None:
        async with Client(server) as client:
            old = _ok(
                await client.call_tool(
                    "remember", {"body": "The user lives in Berlin (柏林).", "layer": "self"}
                )
            )
            new = _ok(
                await client.call_tool(
                    "remember", {"body": "The user lives in Paris (巴黎).", "layer": "self"}
                )
            )
            before = _ok(await client.call_tool("search", {"query": "where does the user live"}))
            assert {r["id"] for r in before["results"]} == {old["id"], new["id"]}
            reply = _ok(
                await client.call_tool(
                    "supersede", {"old": old["id"], "new": new["id"], "reason": "moved in May"}
                )
            )
            assert reply == {"old": old["id"], "new": new["id"], "reason": "moved in May", "superseded": True}
            after = _ok(await client.call_tool("search", {"query": "where does the user live"}))
            assert [r["id"] for r in after["results"]] == [new["id"]]
            kept = _ok(await client.call_tool("get", {"id": old["id"]}))
            assert kept["frontmatter"]["valid_until"] and "Berlin" in kept["body"]
            bad = _err(await client.call_tool("supersede", {"old": "nope", "new": new["id"]}))
            assert bad == "Error executing tool supersede: no node with id 'nope' in this store"
            server.store.archive([old["id"]])  # a person archived it: the agent is told who can undo that
            gone = _err(await client.call_tool("get", {"id": old["id"]}))
            assert gone == (
                f"Error executing tool get: memory {old['id']!r} is archived: out of every read until a "
                f"person runs `mdcg unarchive {old['id']}`"
            )

    try:
        anyio.run(run)
    finally:
        server.store.close()


def test_the_tool_schemas_are_lean_and_still_take_null(tmp_path: Path) -> None:
    from md_cg.mcp_server import lean_schema

    schema = {
        "title": "searchArguments",
        "properties": {
            "tag": {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}},
                    {"type": "null"},
                ],
                "default": None,
                "title": "Tag",
                "description": "d",
            },
            "since": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Since"},
            "k": {"type": "integer", "default": 5, "title": "K"},
        },
        "required": [],
    }
    assert lean_schema(schema) == {
        "properties": {
            "tag": {
                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                "description": "d",
            },
            "since": {"type": "string"},
            "k": {"type": "integer", "default": 5},
        },
        "required": [],
    }
    server = create_server(tmp_path / "m")

    async def run() -> None:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["search"].input_schema["properties"]["tag"]["anyOf"][0] == {"type": "string"}
            reply = _ok(await client.call_tool("search", {"query": "x", "tag": None, "since": None}))
            assert "filter" not in reply["meta"]

    try:
        anyio.run(run)
    finally:
        server.store.close()


def test_agent_sees_expiry_bounded_errors_archived_ids_and_annotations(tmp_path: Path) -> None:
    """What an agent driving a store found (session 20): remember made memories temporary
    without saying so and could not keep them; a megabyte-long argument came back whole in
    the error; overwrite=true took an archived memory out of archive/; no tool said which
    tools only read."""
    root = tmp_path / "m"

    async def run() -> None:
        with MdCG(root) as store:
            server = create_server(root, store=store)
            async with Client(server) as client:
                one_off = "Reminder: the user has a dentist appointment tomorrow at 9am."
                temp = _ok(await client.call_tool("remember", {"body": one_off}))
                entry = store.entry(temp["id"])
                assert (entry.retention_tier, temp["tier"]) == ("temp", "temp")
                assert temp["expires"] == iso(entry.expires_at) and entry.expires_at > time.time() + 6 * 86400
                kept = _ok(
                    await client.call_tool("remember", {"body": "Reminder: call Bo at 10.", "tier": "long"})
                )
                assert (kept["tier"], "expires" in kept) == ("long", False)
                assert store.entry(kept["id"]).expires_at is None
                up = _ok(
                    await client.call_tool(
                        "update", {"id": temp["id"], "tier": "long", "not_applicable": ["x"]}
                    )
                )
                assert (up["updated"], up["tier"], "expires" in up) == (
                    ["not_applicable", "tier"],
                    "long",
                    False,
                )
                assert (
                    store.get(temp["id"]).retention_tier == "long"
                    and store.entry(temp["id"]).expires_at is None
                )

                huge = _err(await client.call_tool("get", {"id": "q" * 1_000_000}))
                assert huge.startswith("Error executing tool get: unsafe node id 'qqqq") and len(huge) < 400
                assert huge.endswith("1000000 characters long (max 128); ids must be safe file-name stems")
                unknown = _err(await client.call_tool("search", {"query": "x", "z" * 5000: 1}))
                assert (
                    unknown
                    == "search does not take "
                    + "z" * 159
                    + "… (it takes: context, fill, k, layer, query, since, tag, until)"
                )
                stats = _err(await client.call_tool("recall_stats", {"window_days": 100_000}))
                assert stats == (
                    "recall_stats: argument 'window_days': input should be less than or equal to 365 "
                    "(got 100000)"
                )

                _ok(await client.call_tool("remember", {"body": "The user likes green tea.", "id": "tea"}))
                store.archive("tea")
                archived = store.path_of("tea", include_archived=True).read_bytes()
                for args in ({}, {"overwrite": True}):
                    refused = _err(
                        await client.call_tool("remember", {"body": "Black tea.", "id": "tea", **args})
                    )
                    assert refused == (
                        "Error executing tool remember: memory 'tea' is archived: out of every read until "
                        "a person runs `mdcg unarchive tea`"
                    )
                assert store.path_of("tea", include_archived=True).read_bytes() == archived

                tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
                assert {n for n, a in tools.items() if a.read_only_hint} == {
                    "search", "recall", "get", "list", "neighbours", "recall_stats", "on_this_day", "inject",
                    "health",
                }  # fmt: skip
                assert {n for n, a in tools.items() if a.destructive_hint} == {
                    "remember",
                    "update",
                    "forget",
                    "organize",
                }
                assert not any(a.open_world_hint for a in tools.values())
                assert {n for n, a in tools.items() if a.idempotent_hint} == {
                    "search", "recall", "get", "list", "neighbours", "recall_stats", "inject", "health",
                    "update", "supersede", "sync",
                }  # fmt: skip

    anyio.run(run)


def test_remember_over_a_file_holding_another_id_keeps_the_librarys_words(tmp_path: Path) -> None:
    """remember said the id existed and to update it (no such memory) or overwrite it
    (the same refusal) when its file was a hand-written one holding another id."""
    root = tmp_path / "m"

    async def run() -> None:
        with MdCG(root) as store:
            (root / "self").mkdir(exist_ok=True)
            wrong = root / "self" / "hand_wrongid.md"
            wrong.write_text("---\nid: something_else\nlayer: self\n---\nMismatched id.\n", encoding="utf-8")
            store.sync()
            async with Client(create_server(root, store=store)) as client:
                for extra in ({}, {"overwrite": True}):
                    args = {"body": "x", "id": "hand_wrongid", "layer": "self", **extra}
                    assert _err(await client.call_tool("remember", args)) == (
                        "Error executing tool remember: node id 'hand_wrongid': the file "
                        "self/hand_wrongid.md holds memory 'something_else' (edited by hand, or placed "
                        "there); it is not written over -- move that file to its own name, or rename one "
                        "of them"
                    )
                _ok(await client.call_tool("remember", {"body": "y", "id": "plain", "layer": "self"}))
                assert _err(await client.call_tool("remember", {"body": "z", "id": "plain"})) == (
                    "Error executing tool remember: a memory with id 'plain' already exists (self/plain.md); "
                    "change it with the `update` tool, or call `remember` with overwrite=true to replace it"
                )

    anyio.run(run)


def test_forget_refuses_an_archived_memory_as_every_tool_does(tmp_path: Path) -> None:
    """forget deleted an archived memory, which every other tool refuses."""
    root = tmp_path / "m"

    async def run() -> None:
        with MdCG(root) as store:
            store.add(id="tea", layer="self", body="The user likes green tea.")
            store.archive("tea")
            kept = store.path_of("tea", include_archived=True).read_bytes()
            async with Client(create_server(root, store=store)) as client:
                for force in (False, True):
                    args = {"id": "tea", "reason": "gone", "force": force}
                    assert _err(await client.call_tool("forget", args)) == (
                        "Error executing tool forget: memory 'tea' is archived: out of every read until "
                        "a person runs `mdcg unarchive tea`"
                    )
            assert store.path_of("tea", include_archived=True).read_bytes() == kept
            assert store.forget("tea", "a person may").node.id == "tea"  # the library (and CLI) still can

    anyio.run(run)


def test_get_returns_a_long_body_in_bounded_windows(tmp_path: Path) -> None:
    """get of a 3.4 MB body returned all of it (3.48M characters) in one reply; aliases
    that rewrite a body (add_observations) still read it whole."""
    root = tmp_path / "m"
    line = 'A "long" line of the big memory.\n'  # quotes and line breaks: 2 characters each in JSON
    body = "# Big\n" + line * (3_400_000 // len(line))

    async def run() -> None:
        with MdCG(root) as store:
            server = create_server(root, store=store, aliases=["mcp-memory", "mem0"])
            async with Client(server) as client:
                _ok(await client.call_tool("remember", {"body": body, "id": "big"}))
                total = len(store.get("big").body)
                first = await client.call_tool("get", {"id": "big"})
                reply = _ok(first)
                fm_bytes = store.path_of("big").stat().st_size - len(body.encode())
                assert len(first.content[0].text) <= BUDGETS["get"].chars(GET_CHARS + fm_bytes)
                assert (reply["body"], reply["body_chars"], reply["body_offset"]) == (body[:20_000], total, 0)
                assert (reply["truncated"], reply["next_offset"]) == (True, 20_000)
                assert reply["note"] == (
                    f"body truncated: characters 0-20,000 of {total:,}; "
                    "call get with offset=20000 for the rest"
                )
                read, offset = [], 0
                while True:
                    window = _ok(
                        await client.call_tool(
                            "get", {"id": "big", "offset": offset, "max_chars": MAX_GET_CHARS}
                        )
                    )
                    read.append(window["body"])
                    if "next_offset" not in window:
                        break
                    offset = window["next_offset"]
                assert "".join(read) == store.get("big").body and len(read) == -(-total // MAX_GET_CHARS)
                assert "truncated" not in window and window["body_offset"] == offset
                assert _err(await client.call_tool("get", {"id": "big", "offset": total + 1})) == (
                    f"Error executing tool get: offset {total + 1} is past the end of the body "
                    f"({total:,} characters)"
                )
                assert _err(await client.call_tool("get", {"id": "big", "max_chars": MAX_GET_CHARS + 1})) == (
                    "get: argument 'max_chars': input should be less than or equal to 100000 (got 100001)"
                )
                _ok(await client.call_tool("remember", {"body": "Small.", "id": "small"}))
                assert set(_ok(await client.call_tool("get", {"id": "small"}))) == {
                    "id", "layer", "path", "frontmatter", "body",
                }  # fmt: skip
                opened = _ok(await client.call_tool("open_nodes", {"names": ["big"]}))
                assert opened["nodes"][0]["body"] == body[:20_000]
                assert _ok(await client.call_tool("get_memory", {"memory_id": "big"}))["body_chars"] == total
                before = store.get("big").body
                more = {"observations": [{"entityName": "big", "contents": ["One more."]}]}
                _ok(await client.call_tool("add_observations", more))
                assert store.get("big").body == before + "\n- One more."  # nothing cut

    anyio.run(run)


def test_an_edge_to_no_memory_is_named_in_the_reply(tmp_path: Path) -> None:
    """An edge to an id no memory has (a typo) was stored without a word."""

    async def run() -> None:
        with MdCG(tmp_path / "m") as store:
            async with Client(create_server(tmp_path / "m", store=store)) as client:
                edges = [{"target": "appels", "type": "causal"}, {"target": "kp", "type": "similar"}]
                _ok(await client.call_tool("remember", {"body": "the target", "id": "kp"}))
                made = _ok(await client.call_tool("remember", {"body": "typo", "id": "e", "edges": edges}))
                assert made["unknown_targets"] == ["appels"] and made["unknown_targets_total"] == 1
                assert [e.target for e in store.get("e").edges] == ["appels", "kp"]  # stored anyway
                changed = _ok(await client.call_tool("update", {"id": "e", "edges": edges[1:]}))
                assert "unknown_targets" not in changed

    anyio.run(run)


def test_matched_names_synonym_words_not_their_stems(tmp_path: Path) -> None:
    """二分查找 expands to "binary search": matched showed the stem "binari"."""

    async def run() -> None:
        with MdCG(tmp_path / "m") as store:
            store.add(id="b", body="Binary search halves the interval.", verification_basis="test")
            async with Client(create_server(tmp_path / "m", store=store)) as client:
                found = _ok(await client.call_tool("search", {"query": "二分查找"}))
                assert [r["matched"] for r in found["results"]] == [["binary", "search"]]

    anyio.run(run)


def test_update_reopens_a_superseded_memory(tmp_path: Path) -> None:
    async def run() -> None:
        with MdCG(tmp_path / "m") as store:
            async with Client(create_server(tmp_path / "m", store=store)) as client:
                _ok(await client.call_tool("remember", {"body": "The user lives in Berlin.", "id": "old"}))
                _ok(await client.call_tool("remember", {"body": "The user lives in Paris.", "id": "new"}))
                _ok(await client.call_tool("supersede", {"old": "old", "new": "new"}))
                gone = _ok(await client.call_tool("forget", {"id": "new", "reason": "entered by mistake"}))
                assert gone["left_closed"] == ["old"] and gone["note"] == (
                    "it had superseded these; they stay hidden as superseded: "
                    "update(id, reopen=true) makes one current again"
                )
                hidden = _ok(await client.call_tool("search", {"query": "where does the user live"}))
                assert [r["id"] for r in hidden["results"]] == []
                reply = _ok(await client.call_tool("update", {"id": "old", "reopen": True}))
                assert reply["updated"] == ["reopen"] and store.get("old").valid_until is None
                found = _ok(await client.call_tool("search", {"query": "where does the user live"}))
                assert [r["id"] for r in found["results"]] == ["old"]

    anyio.run(run)


def test_a_refused_memory_without_an_id_names_no_made_up_id(tmp_path: Path) -> None:
    async def run() -> None:
        with MdCG(tmp_path / "m") as store:
            async with Client(create_server(tmp_path / "m", store=store)) as client:
                bad = _err(await client.call_tool("remember", {"body": "a fact", "tags": [" "]}))
                assert bad == (
                    "Error executing tool remember: the new memory: field 'tags' holds a blank tag "
                    "(' '); a tag needs some text"
                )
                named = _err(
                    await client.call_tool("remember", {"body": "a fact", "id": "f1", "tags": [" "]})
                )
                assert named.endswith(
                    "node 'f1': field 'tags' holds a blank tag (' '); a tag needs some text"
                )
                assert len(store) == 0

    anyio.run(run)


def test_replies_hold_their_budgets_whatever_the_text_escapes_to(tmp_path: Path, capsys: Any) -> None:
    """Budgets count the reply's characters: control characters (six each as JSON escapes) are
    shown as U+FFFD, quotes and backslashes (two each) count twice when clipping; reflect clips
    the query it echoes; a huge offset is refused by name; an unexpected error leaves its
    traceback on stderr; open_nodes takes at most 20 names; an invisible id is refused."""
    server = create_server(tmp_path / "m")

    async def run() -> None:
        async with Client(server) as client:
            for i in range(20):
                body = f"# \x01 {i} " + "\x01" * 200 + "\n\nzzqword " + "\x01" * 300 + ' "quoted" ' * 30
                tags = ['"' * 60 + str(j) for j in range(10)]
                given = {"body": body, "tags": tags, "id": "i" * 120 + f"_{i}"}
                _ok(await client.call_tool("remember", given))
            for tool, args, n in [
                ("search", {"query": "zzqword", "k": 20}, 20),
                ("list", {"limit": 20}, 20),
                ("inject", {"query": "zzqword", "max_items": 5}, 5),
                ("reflect", {"query": "zzqword " + "q" * 100_000, "k": 5}, 5),
            ]:
                reply = await client.call_tool(tool, args)
                text = reply.content[0].text
                assert len(text) <= BUDGETS[tool].chars(n), (tool, len(text))
                assert "\\u0001" not in text, tool
            listed = _ok(await client.call_tool("list", {"limit": 1}))
            assert "\ufffd" in listed["items"][0]["title"]
            assert "offset" in _err(await client.call_tool("list", {"offset": 2**64}))
            assert "U+200B" in _err(await client.call_tool("remember", {"body": "x", "id": "a\u200bb"}))
            for tool, args in [
                ("search", {"query": "alpha", "tag": "\ud800"}),
                ("reflect", {"query": "a \ud800"}),
            ]:
                assert "lone surrogate" in _err(await client.call_tool(tool, args))

    anyio.run(run)
    server.store.close()


def test_an_unexpected_error_is_logged_with_its_traceback(tmp_path: Path, capsys: Any) -> None:
    server = create_server(tmp_path / "m")

    def broken() -> dict[str, Any]:
        raise RuntimeError("a bug, not the caller's doing")

    server.add_tool(broken, name="broken_tool")

    async def run() -> None:
        async with Client(server) as client:
            _err(await client.call_tool("broken_tool", {}))

    anyio.run(run)
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug, not the caller's doing" in err

    async def expected() -> None:  # the caller's mistakes: a message, no traceback
        async with Client(server) as client:
            assert "no node with id 'nope'" in _err(await client.call_tool("get", {"id": "nope"}))
            assert "since" in _err(await client.call_tool("search", {"query": "x", "since": "x" * 5000}))
            assert "limit" in _err(await client.call_tool("list", {"limit": 0}))

    anyio.run(expected)
    server.store.close()
    assert capsys.readouterr().err == ""


def test_list_marks_a_superseded_memory(tmp_path: Path) -> None:
    server = create_server(tmp_path / "m")

    async def run() -> None:
        async with Client(server) as client:
            _ok(
                await client.call_tool(
                    "remember", {"body": "lives in Paris", "id": "city_old", "tags": ["city"]}
                )
            )
            _ok(
                await client.call_tool(
                    "remember", {"body": "lives in Rome", "id": "city_new", "tags": ["city"]}
                )
            )
            _ok(
                await client.call_tool("supersede", {"old": "city_old", "new": "city_new", "reason": "moved"})
            )
            items = _ok(await client.call_tool("list", {"tag": "city"}))["items"]
            assert {i["id"]: i.get("superseded_by") for i in items} == {
                "city_old": "city_new",
                "city_new": None,
            }

    anyio.run(run)
    server.store.close()


def test_a_memory_without_times_has_no_updated_key() -> None:
    """A hand-written file without created_at/updated_at gave ``"updated": null``, while
    the docs say empty optional fields are left out (reviewer's find)."""
    from md_cg import Node
    from md_cg.index import make_entry
    from md_cg.mcp_server import _dated, _list_item

    bare = make_entry(
        Node(id="dave2", layer="knowledge", body="hand written 手写的笔记"), "knowledge/dave2.md", 0, 1
    )
    assert _dated(bare) == {"tags": []}
    assert _list_item(bare) == {
        "id": "dave2",
        "layer": "knowledge",
        "title": "hand written 手写的笔记",
        "tags": [],
    }
    stamped = make_entry(
        Node(id="x", layer="knowledge", body="b", created_at=1764900000.0), "knowledge/x.md", 0, 1
    )
    assert _dated(stamped) == {"updated": "2025-12-05T02:00:00Z", "tags": []}
