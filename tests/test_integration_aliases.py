"""MCP tool aliases (the MCP reference memory server's names and mem0's) on md-cg's real tools.

The aliases are built from the md-cg server's own tool functions and
registered on the server; calls go through the MCP SDK's in-process client.
An alias whose md-cg tool is missing is checked to be reported unavailable
with the reason. Skipped when the ``mcp`` extra is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from conftest import python_env
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.server.mcpserver.exceptions import ToolError

from md_cg import MdCG
from md_cg.integrations.aliases import (
    ALIASES,
    FAMILIES,
    alias_table_markdown,
    alias_tools,
    entity_body,
    filter_tags,
    labelled_id,
    observations_of,
    register_aliases,
)
from md_cg.mcp_server import create_server

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "integrations.md"
MD_CG_TOOLS = {
    "remember", "update", "forget", "supersede", "search", "recall", "get", "list", "neighbours", "verify",
    "reflect", "organize", "recall_stats", "on_this_day", "inject", "sync", "health",
}  # fmt: skip


def server_tools(root: Path, store: MdCG) -> dict[str, Any]:
    """The plain tool functions of md-cg's server (what create_server passes to the aliases)."""
    return dict(create_server(root, store=store).tools)


def test_aliases_needing_missing_tools_are_reported_not_registered(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        tools = server_tools(tmp_path / "m", store)
        built = alias_tools({k: v for k, v in tools.items() if k not in ("update", "list")})
        assert built.unavailable["create_relations"] == "md-cg has no `update` tool"
        assert built.unavailable["read_graph"] == "md-cg has no `list` tool"
        assert built.unavailable["delete_all_memories"] == "not supported: md-cg never deletes in bulk"
        assert "delete_entities" in built.available  # the knowledge-graph one; mem0's is not supported
        assert set(built.available) == {
            "create_entities", "delete_entities", "search_nodes", "open_nodes",
            "search_memories", "get_memory", "delete_memory",
        }  # fmt: skip
        # add_memory lists a label's memories to find a text of stop words it stored
        assert built.unavailable["add_memory"] == "md-cg has no `list` tool"
        # a target whose parameters differ is caught at build time, not at call time
        narrow = dict(tools, update=lambda id, text: None)
        assert (
            alias_tools(narrow).unavailable["update_memory"]
            == "md-cg's `update` tool has no parameter `body`"
        )
        with pytest.raises(ValueError, match="unknown alias family 'zep'"):
            alias_tools(tools, ("zep",))


def test_the_table_in_the_docs_is_the_table_in_the_code() -> None:
    for doc in (DOCS, REPO / "docs" / "mcp.md"):
        assert alias_table_markdown() in doc.read_text(encoding="utf-8"), doc
    names = [a.name for a in ALIASES if a.family == "mcp-memory"]
    assert names == [
        "create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
        "delete_relations", "read_graph", "search_nodes", "open_nodes",
    ]  # fmt: skip
    assert {a.name for a in ALIASES if a.family == "mem0"} >= {
        "add_memory", "search_memories", "get_memories", "update_memory", "delete_memory",
    }  # fmt: skip


def test_entity_bodies_and_filters() -> None:
    body = entity_body("John_Smith", "person", ["Speaks fluent\nSpanish", "  ", "Likes tea"])
    assert body == "# John_Smith (person)\n- Speaks fluent Spanish\n- Likes tea"
    assert observations_of(body) == ["Speaks fluent Spanish", "Likes tea"]
    assert filter_tags(None) == []
    assert filter_tags({"user_id": "sam"}) == ["user:sam"]
    assert filter_tags({"AND": [{"user_id": "sam"}, {"run_id": "r1"}]}) == ["user:sam", "run:r1"]
    with pytest.raises(ToolError, match="only equality on user_id, agent_id, app_id, run_id"):
        filter_tags({"created_at": {"gte": "2024-01-01"}})


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content


async def _knowledge_graph(client: Client, root: Path, store: MdCG) -> None:
    made = _ok(await client.call_tool("create_entities", {"entities": [
        {"name": "John_Smith", "entityType": "person", "observations": ["Speaks fluent Spanish"]},
        {"name": "Anthropic", "entityType": "organization", "observations": []},
    ]}))  # fmt: skip
    assert [c["id"] for c in made["created"]] == ["John_Smith", "Anthropic"] and made["skipped"] == []
    assert (root / "knowledge" / "orphan" / "John_Smith.md").is_file()
    again = _ok(await client.call_tool("create_entities", {"entities": [
        {"name": "John_Smith", "entityType": "person", "observations": ["ignored"]}]}))  # fmt: skip
    assert again == {"created": [], "skipped": ["John_Smith"], "refused": []}
    rel = {"from": "John_Smith", "to": "Anthropic", "relationType": "works_at"}
    _ok(await client.call_tool("create_relations", {"relations": [rel, rel]}))
    edges = store.get("John_Smith").edges
    assert [(e.target, e.type, e.extra) for e in edges] == [
        ("Anthropic", "similar", {"relation": "works_at"})
    ]
    more = ["Prefers morning meetings", "Speaks fluent Spanish"]
    added = _ok(await client.call_tool("add_observations", {"observations": [
        {"entityName": "John_Smith", "contents": more}]}))  # fmt: skip
    assert added["results"][0]["addedObservations"] == ["Prefers morning meetings"]
    assert store.get("John_Smith").body == (
        "# John_Smith (person)\n- Speaks fluent Spanish\n- Prefers morning meetings"
    )
    missing = await client.call_tool(
        "add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}
    )
    assert missing.is_error and "Entity with name Nobody not found" in missing.content[0].text
    found = _ok(await client.call_tool("search_nodes", {"query": "morning meetings"}))
    assert found["results"][0]["id"] == "John_Smith"
    opened = _ok(await client.call_tool("open_nodes", {"names": ["Anthropic", "Nobody"]}))
    assert [n["id"] for n in opened["nodes"]] == ["Anthropic"]
    many = await client.call_tool("open_nodes", {"names": ["Anthropic"] * 21})  # a bounded reply
    assert many.is_error and "argument 'names'" in many.content[0].text and "20" in many.content[0].text
    gone = _ok(await client.call_tool("delete_entities", {"entityNames": ["x" * 100_000]}))
    assert gone["missing"] == ["x" * 119 + "…"]
    assert (await client.call_tool("delete_entities", {"entityNames": ["n"] * 21})).is_error
    _ok(await client.call_tool("delete_observations", {"deletions": [
        {"entityName": "John_Smith", "observations": ["Speaks fluent Spanish"]}]}))  # fmt: skip
    assert store.get("John_Smith").body == "# John_Smith (person)\n- Prefers morning meetings"
    _ok(await client.call_tool("delete_relations", {"relations": [rel]}))
    assert store.get("John_Smith").edges == []
    graph = _ok(await client.call_tool("read_graph", {}))
    assert [i["id"] for i in graph["items"]] == ["John_Smith", "Anthropic"]  # newest change first
    gone = _ok(await client.call_tool("delete_entities", {"entityNames": ["Anthropic", "Nobody"]}))
    assert [f["id"] for f in gone["forgotten"]] == ["Anthropic"] and gone["missing"] == ["Nobody"]
    assert "Anthropic" not in store and [t["id"] for t in store.tombstones()] == ["Anthropic"]


async def _mem0(client: Client, store: MdCG) -> None:
    sam = _ok(await client.call_tool("add_memory", {"text": "Sam is vegetarian", "user_id": "sam"}))
    _ok(await client.call_tool("add_memory", {"text": "Kim is vegetarian too", "user_id": "kim"}))
    assert store.get(sam["id"]).tags == ["user:sam"]
    refused = await client.call_tool("add_memory", {"text": "x", "metadata": {"k": 1}})
    assert refused.is_error and "metadata: not supported" in refused.content[0].text
    everyone = _ok(await client.call_tool("search_memories", {"query": "vegetarian"}))
    assert len(everyone["results"]) >= 2
    only_sam = _ok(
        await client.call_tool("search_memories", {"query": "vegetarian", "filters": {"user_id": "sam"}})
    )
    assert [r["id"] for r in only_sam["results"]] == [sam["id"]]
    assert sum(only_sam["counts"].values()) == 1
    bad = await client.call_tool("search_memories", {"query": "x", "filters": {"created_at": "2024"}})
    assert bad.is_error and "only equality on user_id" in bad.content[0].text
    listed = _ok(await client.call_tool("get_memories", {"filters": {"AND": [{"user_id": "kim"}]}}))
    assert [i["title"] for i in listed["items"]] == ["Kim is vegetarian too"]
    got = _ok(await client.call_tool("get_memory", {"memory_id": sam["id"]}))
    assert got["body"] == "Sam is vegetarian"
    _ok(await client.call_tool("update_memory", {"memory_id": sam["id"], "text": "Sam is vegan"}))
    assert store.get(sam["id"]).body == "Sam is vegan"
    forgotten = _ok(await client.call_tool("delete_memory", {"memory_id": sam["id"]}))
    assert forgotten["forgotten"] is True and sam["id"] not in store
    unknown = await client.call_tool("delete_memory", {"memory_id": "no-such-id"})
    assert unknown.is_error and "no-such-id" in unknown.content[0].text


def test_aliases_through_the_mcp_client(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        server = create_server(root, store=store, aliases=FAMILIES)
        available = {a.name for a in ALIASES if a.supported}
        assert set(server.tools) - MD_CG_TOOLS == available

        async def run() -> None:
            async with Client(server) as client:
                listed = {t.name: t for t in (await client.list_tools()).tools}
                assert set(listed) == MD_CG_TOOLS | available
                assert not {"delete_all_memories", "list_entities"} & set(listed)
                schema = listed["create_relations"].input_schema
                assert json.dumps(schema).count('"relationType"') >= 1
                await _knowledge_graph(client, root, store)
                await _mem0(client, store)
                # same replies: an alias answers with the md-cg tool's reply, unchanged
                ours = await client.call_tool("search", {"query": "vegetarian", "k": 3})
                theirs = await client.call_tool("search_nodes", {"query": "vegetarian"})
                assert _ok(theirs)["results"] == _ok(ours)["results"]

        anyio.run(run)


def test_mdcg_mcp_aliases_flag_over_stdio(tmp_path: Path) -> None:
    root = tmp_path / "m"
    env = {
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PATH": os.environ["PATH"],
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "md_cg.cli", "mcp", "--root", str(root), "--aliases", "mem0"],
        env=env,
    )

    async def run() -> None:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                mem0 = {a.name for a in ALIASES if a.family == "mem0" and a.supported}
                assert names == MD_CG_TOOLS | mem0
                made = await session.call_tool("add_memory", {"text": "Sam likes oolong", "user_id": "sam"})
                assert not made.is_error
                node_id = made.structured_content["id"]
        with MdCG(root, read_only=True) as store:
            assert store.get(node_id).body == "Sam likes oolong" and store.get(node_id).tags == ["user:sam"]

    anyio.run(run)


def test_register_leaves_existing_tool_names_alone(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        server = create_server(tmp_path / "m", store=store)
        tools = dict(server.tools)
        tools["search_nodes"] = tools["search"]  # pretend md-cg had a tool of that name
        built = register_aliases(server, tools, ("mcp-memory",))
        assert built.unavailable["search_nodes"] == "md-cg already has a `search_nodes` tool"
        assert "add_memory" not in built.available and "add_memory" not in built.unavailable


def _aliases(root: Path, store: MdCG) -> dict[str, Any]:
    return {name: a.fn for name, a in alias_tools(server_tools(root, store)).available.items()}


def test_add_memory_stores_the_same_text_once_per_user(tmp_path: Path) -> None:
    """Two users with the same fact: each gets a memory with its own label (md-cg's
    ``remember`` alone answered max with sam's memory, so max had none); adding it
    again answers with that user's own memory."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        al = _aliases(root, store)
        sam = al["add_memory"](text="I prefer window seats", user_id="sam")
        max_ = al["add_memory"](text="I prefer window seats", user_id="max")
        assert "existing" not in sam and "existing" not in max_ and sam["id"] != max_["id"]
        assert (store.get(sam["id"]).tags, store.get(max_["id"]).tags) == (["user:sam"], ["user:max"])
        again = al["add_memory"](text="I prefer window seats\n", user_id="max")
        assert (again["id"], again["existing"]) == (max_["id"], True)
        assert al["add_memory"](text="I prefer window seats", user_id="sam")["id"] == sam["id"]
        listed = al["get_memories"](filters={"user_id": "max"})
        assert [i["id"] for i in listed["items"]] == [max_["id"]]
        found = al["search_memories"](query="window seats", filters={"user_id": "max"})
        assert [r["id"] for r in found["results"]] == [max_["id"]]
        assert sorted(store.ids()) == sorted([sam["id"], max_["id"]])


@pytest.mark.parametrize("text", ["the and of", "我的", "\U0001f642\U0001f642\U0001f642", "C++"])
def test_add_memory_stores_a_text_search_cannot_find_once_per_user(tmp_path: Path, text: str) -> None:
    """A text of stop words (or none at all) is found by its id, not by search: adding
    it three times for max after sam stores one memory for each (each add stored
    another copy when search could not find the text)."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        al = _aliases(root, store)
        sam = al["add_memory"](text=text, user_id="sam")
        assert sam["id"] == labelled_id(text, ["user:sam"])
        replies = [al["add_memory"](text=text, user_id="max") for _ in range(3)]
        max_id = labelled_id(text, ["user:max"])
        assert [r["id"] for r in replies] == [max_id] * 3
        assert [r.get("existing") for r in replies] == [None, True, True]
        assert replies[1] == {
            "id": max_id,
            "layer": "knowledge",
            "path": str(store.path_of(max_id)),
            "existing": True,
            "kind": "fact",
        }
        assert sorted(store.ids()) == sorted([sam["id"], max_id])
        assert al["add_memory"](text=text + "\n", user_id="sam") | {"existing": True} == {
            **replies[1],
            "id": sam["id"],
            "path": str(store.path_of(sam["id"])),
        }
        assert len(store.ids()) == 2


ADDER = """
import sys
from md_cg import MdCG
from md_cg.integrations.aliases import alias_tools
from md_cg.mcp_server import create_server
root, n = sys.argv[1], int(sys.argv[2])
with MdCG(root, refresh_interval=0) as store:
    add = alias_tools(dict(create_server(root, store=store).tools)).available["add_memory"].fn
    for i in range(n):
        add(text="the and of" if i % 2 else f"max likes tea {i // 2}", user_id="max")
"""


def test_two_processes_adding_the_same_texts_store_each_once(tmp_path: Path) -> None:
    """Two servers adding the same texts for max at the same moment, after sam: the one
    whose write finds the id taken answers with the other's memory (each stored its own
    copy when both missed it)."""
    root, n = tmp_path / "m", 30
    texts = {"the and of"} | {f"max likes tea {i}" for i in range(n // 2)}
    with MdCG(root) as store:  # sam has them all: each is a copy of max's own
        al = _aliases(root, store)
        sam = sorted(al["add_memory"](text=t, user_id="sam")["id"] for t in texts)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ADDER, str(root), str(n)],
            env=python_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    with MdCG(root) as store:
        assert sorted(store.ids()) == sorted([*sam, *(labelled_id(t, ["user:max"]) for t in texts)])
        assert store.health().ok


def test_search_memories_filters_before_it_ranks(tmp_path: Path) -> None:
    """A user's memory is found even when 150 other memories rank above it (the filter
    used to be applied to the store's top 50-100 hits)."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        al = _aliases(root, store)
        for i in range(150):
            al["add_memory"](text=f"Sam's flight {i} to Paris: window seat near the window seats row {i}",
                             user_id="sam")  # fmt: skip
        mine = al["add_memory"](text="Max likes window seats on long flights", user_id="max", run_id="r1")
        found = al["search_memories"](query="window seats", filters={"user_id": "max"}, limit=5)
        assert [r["id"] for r in found["results"]] == [mine["id"]]
        both = {"AND": [{"user_id": "max"}, {"run_id": "r1"}]}
        found = al["search_memories"](query="window seats", filters=both, limit=5)
        assert [r["id"] for r in found["results"]] == [mine["id"]]
        assert al["search_memories"](query="window seats", filters={"user_id": "kim"})["results"] == []


def test_create_entities_reports_each_entity(tmp_path: Path) -> None:
    """An entity md-cg refuses is listed with the reason; the ones after it are still
    created, and a retry tells created, skipped and refused apart."""
    root = tmp_path / "m"
    entities = [
        {"name": "Alice", "entityType": "person", "observations": ["likes tea"]},
        {"name": "TCP/IP", "entityType": "protocol", "observations": ["layered"]},
        {"name": "Bob", "entityType": "person", "observations": ["likes coffee"]},
    ]
    with MdCG(root) as store:
        al = _aliases(root, store)
        made = al["create_entities"](entities=entities)
        assert [c["id"] for c in made["created"]] == ["Alice", "Bob"] and made["skipped"] == []
        assert made["refused"] == [
            {
                "name": "TCP/IP",
                "reason": "unsafe node id 'TCP/IP': it contains the character '/'; ids must be safe "
                "file-name stems",
            }
        ]
        assert sorted(store.ids()) == ["Alice", "Bob"]
        again = al["create_entities"](entities=entities)
        assert again == {"created": [], "skipped": ["Alice", "Bob"], "refused": made["refused"]}


def test_an_imported_mem0_export_is_found_by_the_mem0_aliases(tmp_path: Path) -> None:
    """`mdcg import` of mem0's records kept `user_id` as a frontmatter key only, and the
    mem0 aliases filter on the tag `user:<id>`: search_memories(filters={"user_id": "u1"})
    found nothing."""
    from md_cg import import_nodes

    source = tmp_path / "mem0.json"
    records = [
        {"id": "3f2a-uuid", "memory": "User likes hiking", "user_id": "u1"},
        {"id": "7b1c-uuid", "memory": "User likes chess", "user_id": "u2", "agent_id": "a1", "run_id": None},
        {"id": "9d4e-uuid", "text": "Not mem0's shape", "user_id": "u1"},  # md-cg's own record: as given
    ]
    source.write_text(json.dumps({"results": records}), encoding="utf-8")
    root = tmp_path / "m"
    with MdCG(root) as store:
        import_nodes(store, source, tags=["from-mem0"])
        hiking, chess, other = (store.get(i) for i in ("3f2a-uuid", "7b1c-uuid", "9d4e-uuid"))
        assert (hiking.tags, hiking.extra) == (["user:u1", "from-mem0"], {"user_id": "u1"})
        assert chess.tags == ["user:u2", "agent:a1", "from-mem0"]
        assert (other.tags, other.extra) == (["from-mem0"], {"user_id": "u1"})
        al = _aliases(root, store)
        found = al["search_memories"](query="hiking", filters={"user_id": "u1"})
        assert [r["id"] for r in found["results"]] == ["3f2a-uuid"]
        listed = al["get_memories"](filters={"agent_id": "a1"})
        assert [i["id"] for i in listed["items"]] == ["7b1c-uuid"]
        again = al["add_memory"](text="User likes hiking", user_id="u1")  # stored once per user
        assert (again["id"], again["existing"]) == ("3f2a-uuid", True)
        import_nodes(store, source, tags=["from-mem0"])  # a second import changes nothing
        assert store.get("3f2a-uuid").tags == ["user:u1", "from-mem0"] and len(store) == 3
