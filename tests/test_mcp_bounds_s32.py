"""An MCP ``get`` reply is bounded whatever the memory's frontmatter holds, and the MCP writes
refuse what would grow it without limit (outside review of session 32, F2).

``get`` returned every frontmatter field whole: its budget was ``2,000 + 2 x (max_chars +
frontmatter bytes)``, and an agent could grow the frontmatter through the server itself --
``supersede`` kept a 100,000-character reason on the new memory's ``supersedes`` edge (its
reply clipped it to 160), ``remember`` took one 100,000-character tag, or 20,000 tags. ``get``
with ``max_chars: 1`` then answered 100,411 / 100,213 / 169,102 characters, while ``verify``
refuses evidence over 1,000 characters. Now the reply shows the frontmatter in
``FRONTMATTER_CHARS`` (strings to 1,000 characters, lists and objects to 64 items) and counts
what it left out; ``supersede`` refuses a reason over 1,000 characters, ``remember`` and
``update`` more than 64 tags or a tag over 200 -- nothing written -- and a store a hand or
the library filled with more still opens, reads and updates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import orjson
from mcp import Client

from md_cg import Edge, MdCG, Node, mcp_server
from md_cg.mcp_server import BUDGETS, _plain_strings, create_server

#: The most characters a memory's frontmatter takes of a ``get`` reply (docs/mcp.md).
FRONTMATTER_CHARS = 30_000

NOTE = (
    "frontmatter clipped (strings to 1,000 characters, lists and objects to 64 items, 30,000 "
    "characters in all; frontmatter_clipped counts what each field left out): the file at `path` "
    "holds every field whole; a clipped field written back would lose what was left out (`update` "
    "refuses that for edges and not_applicable; tags it takes: give tags only to replace every tag "
    "the file holds)"
)
REASON_ERROR = (
    "reason is {n} characters, over the limit of 1,000: shorten it (keep the full text in a "
    "memory of its own and cite its id)"
)
COUNT_ERROR = (
    "tags: {n} tags, over the limit of 64: keep the labels a search filters on, and put the rest in the body"
)
LONG_ERROR = (
    "tags: a tag of {n} characters ({shown!r}), over the limit of 200: a tag is a label; shorten it, "
    "and put the text in the body"
)


def _memories(root: Path) -> dict[str, bytes]:
    """Every memory file of the store, by path (``.mdcg/`` left aside)."""
    files = sorted(root.rglob("*.md"))
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files if ".mdcg" not in p.parts}


def _ok(result: Any) -> tuple[dict[str, Any], int]:
    assert not result.is_error, result.content
    text = result.content[0].text
    return json.loads(text), len(text)


def _err(result: Any) -> str:
    assert result.is_error, result.content
    text: str = result.content[0].text
    return text.removeprefix("Error executing tool ").split(": ", 1)[1]


def _serve(root: Path, work: Any, **kwargs: Any) -> None:
    with MdCG(root) as store:
        server = create_server(root, store=store, **kwargs)

        async def run() -> None:
            async with Client(server) as client:
                await work(client, store)

        anyio.run(run)


def test_the_review_repro_refused_with_nothing_written(tmp_path: Path) -> None:
    """The review's three writes are refused, each naming the argument and the limit, and
    no file changes; at the limits they are taken, and ``get`` shows them whole."""
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        _ok(
            await client.call_tool(
                "remember", {"id": "f2_new", "body": "# new fact\n\nthe user moved to Paris"}
            )
        )
        _ok(
            await client.call_tool(
                "remember", {"id": "f2_old", "body": "# old fact\n\nthe user lived in Berlin"}
            )
        )
        before = _memories(root)
        got = await client.call_tool("supersede", {"old": "f2_old", "new": "f2_new", "reason": "R" * 100_000})
        assert _err(got) == REASON_ERROR.format(n="100,000")
        got = await client.call_tool("supersede", {"old": "f2_old", "new": "f2_new", "reason": "R" * 1_001})
        assert _err(got) == REASON_ERROR.format(n="1,001")
        got = await client.call_tool("remember", {"id": "f2_tag", "body": "x", "tags": ["T" * 100_000]})
        assert _err(got) == LONG_ERROR.format(n="100,000", shown="T" * 39 + "…")
        got = await client.call_tool(
            "remember", {"id": "f2_tags", "body": "x", "tags": [f"t{i}" for i in range(20_000)]}
        )
        assert _err(got) == COUNT_ERROR.format(n="20,000")
        got = await client.call_tool("update", {"id": "f2_new", "tags": ["a" * 201]})
        assert _err(got) == LONG_ERROR.format(n=201, shown="a" * 39 + "…")
        got = await client.call_tool("update", {"id": "f2_new", "tags": [f"t{i}" for i in range(65)]})
        assert _err(got) == COUNT_ERROR.format(n=65)
        assert _memories(root) == before
        assert store.ids() == ["f2_new", "f2_old"] and store.get("f2_new").edges == []
        assert store.get("f2_old").valid_until is None and store.get("f2_new").tags == []

        # at the limits: taken, and shown whole
        _ok(await client.call_tool("supersede", {"old": "f2_old", "new": "f2_new", "reason": "R" * 1_000}))
        tags = [f"{i:03d}" + "t" * 197 for i in range(64)]
        _ok(await client.call_tool("update", {"id": "f2_new", "tags": tags}))
        reply, size = _ok(await client.call_tool("get", {"id": "f2_new", "max_chars": 1}))
        assert reply["frontmatter"]["edges"] == [
            {"target": "f2_old", "type": "supersedes", "reason": "R" * 1_000}
        ]
        assert reply["frontmatter"]["tags"] == tags
        assert "frontmatter_clipped" not in reply and "frontmatter_fields_left_out" not in reply
        assert reply["note"] == "body truncated: characters 0-1 of 35; call get with offset=1 for the rest"
        assert size <= BUDGETS["get"].chars(1)

    _serve(root, work)


def _filled(store: MdCG) -> None:
    """Memories the library (or a hand) filled past what the MCP writes take."""
    store.add(Node(id="many_tags", body="x", tags=[f"t{i}" for i in range(20_000)]))
    store.add(Node(id="long_tag", body="y" * 50, tags=["T" * 100_000, "short"]))
    store.add(Node(id="old_fact", body="the user lived in Berlin"))
    edges = [Edge(target="old_fact", type="supersedes", extra={"reason": "R" * 100_000})]
    edges += [Edge(target=f"n{i}", type="similar") for i in range(300)]
    store.add(Node(id="long_reason", body="the user moved to Paris", edges=edges))
    extra = {f"key{i:03d}": '"\\\n' * 300 for i in range(100)}  # 900 characters, 1,800 in JSON
    extra["nested"] = [["z" * 50] * 100] * 10
    store.add(Node(id="many_fields", body="b", extra=extra))


def test_get_of_an_oversize_frontmatter_stays_in_its_budget(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        _filled(store)
    files = _memories(root)

    async def work(client: Any, store: MdCG) -> None:
        reply, size = _ok(await client.call_tool("get", {"id": "many_tags", "max_chars": 1}))
        assert size <= BUDGETS["get"].chars(1) == 35_002
        assert reply["frontmatter"]["tags"] == [f"t{i}" for i in range(64)]
        assert reply["frontmatter_clipped"] == {"tags": {"left_out": 19_936}}
        assert reply["note"] == NOTE and reply["body"] == "x"

        reply, size = _ok(await client.call_tool("get", {"id": "long_tag", "max_chars": 1}))
        assert size <= BUDGETS["get"].chars(1)
        assert reply["frontmatter"]["tags"] == ["T" * 999 + "…", "short"]
        assert reply["frontmatter_clipped"] == {"tags": {"cut": 1}}
        assert reply["body"] == "y" and reply["next_offset"] == 1
        assert (
            reply["note"]
            == "body truncated: characters 0-1 of 50; call get with offset=1 for the rest; " + NOTE
        )

        reply, size = _ok(await client.call_tool("get", {"id": "long_reason", "max_chars": 1}))
        assert size <= BUDGETS["get"].chars(1)
        edges = reply["frontmatter"]["edges"]
        assert edges[0] == {"target": "old_fact", "type": "supersedes", "reason": "R" * 999 + "…"}
        assert edges[1:] == [{"target": f"n{i}", "type": "similar"} for i in range(63)]
        assert reply["frontmatter_clipped"] == {"edges": {"left_out": 237, "cut": 1}}

        reply, size = _ok(await client.call_tool("get", {"id": "many_fields", "max_chars": 100_000}))
        assert size <= BUDGETS["get"].chars(100_000)
        shown = reply["frontmatter"]
        sent = len(orjson.dumps(shown).decode())
        assert FRONTMATTER_CHARS - 1_000 < sent <= FRONTMATTER_CHARS  # the room is used, not passed
        fields = len(store.get("many_fields").to_dict()) - 2  # id and layer are the reply's own
        assert (fields, list(shown)[-1], len(shown)) == (103, "key016", 19)
        assert reply["frontmatter_fields_left_out"] == fields - len(shown) == 84
        assert reply["frontmatter_clipped"] == {"key016": {"cut": 1}}  # the field the room ran out in
        assert shown["key000"] == '"\\\n' * 300  # 900 characters, 1,800 as JSON writes them: whole

        # the alias that answers with get's reply is bounded alike; the files hold it all
        reply, size = _ok(await client.call_tool("get_memory", {"memory_id": "many_tags"}))
        assert size <= BUDGETS["get"].chars(20_000)
        assert reply["frontmatter_clipped"] == {"tags": {"left_out": 19_936}}
        assert len(store.get("many_tags").tags) == 20_000
        assert store.get("long_reason").edges[0].extra["reason"] == "R" * 100_000

    _serve(root, work, aliases=("mem0",))
    assert _memories(root) == files  # reading wrote nothing
    with MdCG(root) as store:  # the files still open and read whole
        assert store.unreadable_files() == []
        assert store.ids() == ["long_reason", "long_tag", "many_fields", "many_tags", "old_fact"]
        assert store.get("many_tags").tags == [f"t{i}" for i in range(20_000)]


def test_a_memory_holding_more_tags_than_the_limit_can_still_be_updated(tmp_path: Path) -> None:
    """Tags a memory holds are not new input: an update may keep them or drop some (the
    library's rule for a blank tag a file held); it may not add one past the limit."""
    root = tmp_path / "m"
    held = [f"t{i}" for i in range(100)] + ["L" * 300]
    with MdCG(root) as store:
        store.add(Node(id="hand", body="x", tags=held))

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("update", {"id": "hand", "body": "changed"}))
        _ok(await client.call_tool("update", {"id": "hand", "tags": held[1:]}))
        assert store.get("hand").tags == held[1:]
        before = _memories(root)
        got = await client.call_tool("update", {"id": "hand", "tags": [*held[1:], "new"]})
        assert _err(got) == COUNT_ERROR.format(n=101)
        got = await client.call_tool(
            "update", {"id": "hand", "tags": [*held[1:], "t0"]}
        )  # dropped: new again
        assert _err(got) == COUNT_ERROR.format(n=101)
        got = await client.call_tool("update", {"id": "hand", "tags": ["t1", "M" * 300]})
        assert _err(got) == LONG_ERROR.format(n=300, shown="M" * 39 + "…")
        assert _memories(root) == before
        _ok(await client.call_tool("update", {"id": "hand", "tags": ["t1", "L" * 300]}))
        assert store.get("hand").tags == ["t1", "L" * 300]

    _serve(root, work)


def test_aliases_still_read_every_tag_whole(tmp_path: Path) -> None:
    """The aliases read a memory through the plain ``get`` (``server.tools``), which keeps
    every tag and edge: mem0's label check finds a label past the 64th tag."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(
            Node(
                id="labelled",
                body="the user likes green tea",
                tags=[f"t{i}" for i in range(99)] + ["user:alice"],
            )
        )

    async def work(client: Any, store: MdCG) -> None:
        reply, _ = _ok(
            await client.call_tool("search_memories", {"query": "green tea", "filters": {"user_id": "alice"}})
        )
        assert [r["id"] for r in reply["results"]] == ["labelled"]

    _serve(root, work, aliases=("mem0",))


@pytest.mark.parametrize(
    "frontmatter",
    [
        {"tags": ['"' * 5_000] * 100},
        {f"t{i}": ["\x01\n\\" * 400] * 64 for i in range(100)},
        {"\x01" * 150: ["a" * 2_000] * 64, "b": {"\x02" * 100: "c" * 5_000}},
        {f"k{i}": [[i] * 64] * 64 for i in range(500)},
        {"deep": [[[[[["e" * 900] * 64] * 64] * 64] * 64] * 64]},
    ],
)
def test_the_frontmatter_shown_never_passes_its_room(frontmatter: dict[str, Any]) -> None:
    """Strings JSON writes longer (quotes, backslashes, line breaks), control characters in
    values and keys, many fields, deep nesting: the reply's frontmatter, as sent, stays in
    ``FRONTMATTER_CHARS`` and uses most of it."""
    out = mcp_server.node_reply(
        {"id": "x", "layer": "knowledge", "path": "p", "frontmatter": frontmatter, "body": ""}
    )
    sent = len(orjson.dumps(_plain_strings(out["frontmatter"])).decode())
    assert FRONTMATTER_CHARS - 2_100 < sent <= FRONTMATTER_CHARS
    assert out["note"] == NOTE and out["frontmatter_clipped"]


def test_one_limit_for_evidence_and_a_supersede_reason() -> None:
    """The server may not import md_cg.loop (tests/test_architecture.py): its reason limit,
    and the strings ``get`` shows whole, are verify's evidence limit, held equal here."""
    from md_cg.loop import MAX_EVIDENCE_CHARS

    assert mcp_server.MAX_REASON_CHARS == mcp_server.FIELD_CHARS == MAX_EVIDENCE_CHARS == 1_000
    assert (mcp_server.MAX_TAGS, mcp_server.MAX_TAG_CHARS, mcp_server.FIELD_ITEMS) == (64, 200, 64)
