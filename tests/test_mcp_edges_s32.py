"""MCP writes refuse edges and conditions a ``get`` could not show whole (review r4 of
session 32, d_mcp).

Commit 97327cd made ``get`` clip a memory's frontmatter (strings to 1,000 characters, lists
and objects to 64 items, 30,000 characters in all) and the writes refuse long tags and
supersede reasons, but edges and conditions went through whole: ``remember`` with an edge
whose ``reason`` held 50,000 characters, ``update`` with an edge ``note`` of 50,000 and an
``extra`` list of 5,000 integers, ``not_applicable`` of 10 x 20,000 characters or of 3,000
items, 2,000 edges -- all stored, and ``get`` then said ``edges: {"left_out": 1936}``. An
agent writing back the list it was shown plus one edge dropped 1,936 edges; writing back a
cut text stored the cut. Now the writes refuse what ``get`` could not show whole (the
limits ``node_reply`` clips with), and no MCP write changes edges or conditions a memory
holds that ``get`` does not show whole (review r6: tests/test_mcp_guard_s32.py); a memory
a hand filled past the limits still takes updates of its other fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import orjson
from test_mcp_bounds_s32 import NOTE, _err, _serve

from md_cg import Edge, MdCG, Node, mcp_server
from md_cg.mcp_server import BUDGETS

LONG = (
    "{where}: a string of {n} characters, over the limit of 1,000 (a `get` could not show it whole): "
    "shorten it (keep the full text in a memory of its own and cite its id)"
)
MANY = (
    "{where}: {kind} of {n} items, over the limit of 64 (a `get` could not show it whole): give it "
    "fewer items (put the rest in the body)"
)
EDGE_COUNT = (
    "edges: {n} items, over the limit of 64 (a `get` shows 64 of a list): keep the links that matter "
    "(a linked memory may link back), or put the rest in the body"
)
CONDITION_COUNT = (
    "not_applicable: {n} items, over the limit of 64 (a `get` shows 64 of a list): merge conditions, or "
    "put the rest in the body"
)
HIDDEN = (
    "{name}: the memory holds {held}; a `get` shows {shown}: an update's {name} replace the whole list, "
    "so what a `get` does not show would be lost, and no MCP write changes these {items}; change them in "
    "the file at `path` instead (`mdcg edit {id}`)"
)
TOO_BIG = (
    "{arg}: the memory's frontmatter would take {n} characters, over the 29,000 a `get` shows whole "
    "(30,000, less 1,000 kept for the fields the store sets): `get` could not show its {field} whole; "
    "give fewer or shorter items (long text belongs in the body)"
)


def _memories(root: Path) -> dict[str, bytes]:
    files = sorted(root.rglob("*.md"))
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files if ".mdcg" not in p.parts}


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    out: dict[str, Any] = json.loads(result.content[0].text)
    return out


def _frontmatter_chars(**fields: Any) -> str:
    """The characters a new memory's frontmatter of ``fields`` takes as JSON (the figure the
    refusal names), with thousands separators."""
    d = Node(id="-", layer="knowledge", **fields).to_dict(iso_times=True)
    return f"{len(orjson.dumps({k: v for k, v in d.items() if k not in ('id', 'layer')}).decode()):,}"


def test_the_review_repro_is_refused_with_nothing_written(tmp_path: Path) -> None:
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("remember", {"id": "tgt", "body": "target memory"}))
        _ok(await client.call_tool("remember", {"id": "a1", "body": "new fact"}))
        before = _memories(root)
        edge = {"target": "tgt", "type": "supersedes", "reason": "r" * 50_000}
        got = await client.call_tool("remember", {"id": "a2", "body": "x", "edges": [edge]})
        assert _err(got) == LONG.format(where="edges[0].reason", n="50,000")
        got = await client.call_tool("update", {"id": "a1", "edges": [edge]})
        assert _err(got) == LONG.format(where="edges[0].reason", n="50,000")
        similar = {"target": "tgt", "type": "similar", "note": "n" * 50_000, "extra": list(range(5_000))}
        got = await client.call_tool("update", {"id": "a1", "edges": [similar]})
        assert _err(got) == LONG.format(where="edges[0].note", n="50,000")
        got = await client.call_tool("update", {"id": "a1", "edges": [{**similar, "note": "n"}]})
        assert _err(got) == MANY.format(where="edges[0].extra", kind="a list", n="5,000")
        nested = {"target": "tgt", "deep": {"k": [{f"f{i}": i for i in range(65)}]}}
        got = await client.call_tool("update", {"id": "a1", "edges": [{"target": "tgt"}, nested]})
        assert _err(got) == MANY.format(where="edges[1].deep.k[0]", kind="an object", n=65)
        wide = {"target": "tgt", **{f"k{i}": i for i in range(63)}}  # 64 keys, with the type 65
        got = await client.call_tool("update", {"id": "a1", "edges": [wide]})
        assert _err(got) == MANY.format(where="edges[0]", kind="an object", n=64 + 1)
        got = await client.call_tool(
            "remember", {"id": "a3", "body": "x", "not_applicable": ["c" * 20_000] * 10}
        )
        assert _err(got) == LONG.format(where="not_applicable[0]", n="20,000")
        got = await client.call_tool(
            "remember", {"id": "a4", "body": "x", "not_applicable": [f"cond {i}" for i in range(3_000)]}
        )
        assert _err(got) == CONDITION_COUNT.format(n="3,000")
        got = await client.call_tool("update", {"id": "a1", "not_applicable": [f"c{i}" for i in range(65)]})
        assert _err(got) == CONDITION_COUNT.format(n=65)
        edges = [{"target": f"t{i}", "type": "similar"} for i in range(2_000)]
        got = await client.call_tool("remember", {"id": "a5", "body": "x", "edges": edges})
        assert _err(got) == EDGE_COUNT.format(n="2,000")
        got = await client.call_tool("update", {"id": "a1", "edges": edges[:65]})
        assert _err(got) == EDGE_COUNT.format(n=65)
        assert _memories(root) == before
        assert store.ids() == ["a1", "tgt"] and store.get("a1").edges == []

    _serve(root, work)


def test_at_the_limits_writes_are_taken_and_read_back_whole(tmp_path: Path) -> None:
    root = tmp_path / "m"
    full = {
        "target": "tgt",
        "type": "supersedes",
        "reason": "R" * 1_000,
        "note": '"\\\n' * 333 + "x",  # 1,000 characters, nearly 2,000 as JSON writes them
        "extra": list(range(64)),
        "obj": {f"k{i}": "v" for i in range(64)},  # an object of 64 keys
    }
    edges = [full] + [{"target": f"t{i}", "type": "similar"} for i in range(63)]
    conditions = ["C" * 1_000] + [f"cond {i}" for i in range(63)]

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("remember", {"id": "tgt", "body": "target memory"}))
        args = {"id": "full", "body": "x", "edges": edges, "not_applicable": conditions}
        _ok(await client.call_tool("remember", args))
        reply = _ok(await client.call_tool("get", {"id": "full", "max_chars": 1}))
        assert "frontmatter_clipped" not in reply and "frontmatter_fields_left_out" not in reply
        assert "note" not in reply
        assert reply["frontmatter"]["edges"] == edges
        assert reply["frontmatter"]["non_applicable_conditions"] == conditions
        # what get showed, written back with one change: taken, and shown whole again
        shown = reply["frontmatter"]["edges"]
        _ok(await client.call_tool("update", {"id": "full", "edges": [*shown[:63], {"target": "z"}]}))
        reply = _ok(await client.call_tool("get", {"id": "full", "max_chars": 1}))
        assert reply["frontmatter"]["edges"] == [*edges[:63], {"target": "z", "type": "similar"}]
        assert "frontmatter_clipped" not in reply
        assert [Edge.from_value(e).to_dict() for e in store.get("full").edges] == reply["frontmatter"][
            "edges"
        ]

    _serve(root, work)


def test_lists_that_would_not_fit_the_frontmatter_shown_are_refused(tmp_path: Path) -> None:
    """64 edges of 64 items each may still pass the 30,000 characters ``get`` shows: refused,
    and so is a tags update that would push the edges a memory holds out of it."""
    root = tmp_path / "m"
    big = [{"target": f"t{i}", "type": "similar", "reason": "R" * 500} for i in range(64)]
    fits = [{"target": f"t{i}", "type": "similar", "reason": "R" * 250} for i in range(64)]
    tags = [f"{i:03d}" + "t" * 197 for i in range(64)]

    async def work(client: Any, store: MdCG) -> None:
        before = _memories(root)
        got = await client.call_tool("remember", {"id": "big", "body": "x", "edges": big})
        n = _frontmatter_chars(edges=big)
        assert _err(got) == TOO_BIG.format(arg="edges", n=n, field="edges")
        assert _memories(root) == before
        _ok(await client.call_tool("remember", {"id": "fits", "body": "x", "edges": fits}))
        before = _memories(root)
        got = await client.call_tool("update", {"id": "fits", "tags": tags})
        assert _err(got).startswith("tags: the memory's frontmatter would take ")
        assert _err(got).endswith(
            "over the 29,000 a `get` shows whole (30,000, less 1,000 kept for the fields the store "
            "sets): `get` could not show its edges whole; give fewer or shorter items (long text belongs "
            "in the body)"
        )
        assert _memories(root) == before
        reply = _ok(await client.call_tool("get", {"id": "fits", "max_chars": 1}))
        assert "frontmatter_clipped" not in reply and reply["frontmatter"]["edges"] == fits
        _ok(await client.call_tool("update", {"id": "fits", "tags": tags[:8]}))
        assert store.get("fits").tags == tags[:8]

    _serve(root, work)


def _hand_filled(store: MdCG) -> None:
    """A memory a hand filled past what the MCP writes take: 2,000 edges (the first with a
    100,000-character reason), 3,000 conditions."""
    edges = [Edge(target="old", type="supersedes", extra={"reason": "R" * 100_000})]
    edges += [Edge(target=f"n{i}", type="similar") for i in range(1_999)]
    conditions = [f"cond {i}" for i in range(3_000)]
    store.add(Node(id="old", body="the user lived in Berlin"))
    store.add(
        Node(id="hand", body="the user moved to Paris", edges=edges, non_applicable_conditions=conditions)
    )
    store.add(Node(id="cut", body="c", edges=[Edge(target="old", extra={"note": "N" * 5_000})]))
    store.add(Node(id="cutc", body="c", non_applicable_conditions=["Q" * 3_000, "short"]))


def test_a_hand_filled_memory_stays_updatable_and_its_clipped_lists_are_not_written(
    tmp_path: Path,
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        _hand_filled(store)

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("update", {"id": "hand", "body": "the user moved to Lyon"}))
        _ok(await client.call_tool("update", {"id": "hand", "tags": ["moves"]}))
        reply = _ok(await client.call_tool("get", {"id": "hand", "max_chars": 100}))
        assert reply["frontmatter_clipped"] == {
            "non_applicable_conditions": {"left_out": 2_936},
            "edges": {"left_out": 1_936, "cut": 1},
        }
        assert reply["note"] == NOTE and reply["frontmatter"]["tags"] == ["moves"]
        shown = reply["frontmatter"]["edges"]
        assert len(shown) == 64 and shown[0]["reason"] == "R" * 999 + "…"

        before = _memories(root)
        edges = HIDDEN.format(
            name="edges", held="2,000 edges", shown="64, with 1 of its strings cut", items="edges", id="hand"
        )
        held = [Edge.from_value(e).to_dict() for e in store.get("hand").edges]
        for written in ([*shown, {"target": "new"}], shown[1:], held, held[1:], [*held, {"target": "x"}], []):
            got = await client.call_tool("update", {"id": "hand", "edges": written})
            assert _err(got) == edges
        conditions = reply["frontmatter"]["non_applicable_conditions"]
        got = await client.call_tool("update", {"id": "hand", "not_applicable": conditions})
        assert _err(got) == HIDDEN.format(
            name="not_applicable", held="3,000 conditions", shown="64", items="conditions", id="hand"
        )
        assert _memories(root) == before

        # a text get showed cut: the memory's list is not shown whole, so it is not written
        reply = _ok(await client.call_tool("get", {"id": "cut"}))
        assert reply["frontmatter_clipped"] == {"edges": {"cut": 1}}
        got = await client.call_tool("update", {"id": "cut", "edges": reply["frontmatter"]["edges"]})
        assert _err(got) == HIDDEN.format(
            name="edges", held="1 edge", shown="1, with 1 of its strings cut", items="edges", id="cut"
        )
        reply = _ok(await client.call_tool("get", {"id": "cutc"}))
        got = await client.call_tool(
            "update", {"id": "cutc", "not_applicable": reply["frontmatter"]["non_applicable_conditions"]}
        )
        assert _err(got) == HIDDEN.format(
            name="not_applicable",
            held="2 conditions",
            shown="2, with 1 of its strings cut",
            items="conditions",
            id="cutc",
        )
        assert _memories(root) == before
        assert store.get("cut").edges[0].extra["note"] == "N" * 5_000

    _serve(root, work)


def test_supersede_and_the_relation_alias_are_held_to_the_same_limits(tmp_path: Path) -> None:
    root = tmp_path / "m"

    async def work(client: Any, store: MdCG) -> None:
        edges = [{"target": f"t{i}", "type": "similar"} for i in range(64)]
        _ok(
            await client.call_tool(
                "remember", {"id": "full", "body": "the user moved to Paris", "edges": edges}
            )
        )
        _ok(await client.call_tool("remember", {"id": "old", "body": "the user lived in Berlin"}))
        before = _memories(root)
        got = await client.call_tool("supersede", {"old": "old", "new": "full", "reason": "moved"})
        assert _err(got) == (
            "new: superseding adds an edge to 'full', and "
            + EDGE_COUNT.format(n=65)
            + "; drop some of its edges first (`update` with edges)"
        )
        got = _ok(
            await client.call_tool(
                "create_relations", {"relations": [{"from": "full", "to": "old", "relationType": "knows"}]}
            )
        )
        assert got["updated"] == []
        assert [r["reason"] for r in got["refused"]] == [EDGE_COUNT.format(n=65)]
        assert _memories(root) == before
        got = _ok(
            await client.call_tool(
                "delete_relations", {"relations": [{"from": "full", "to": "t5", "relationType": "similar"}]}
            )
        )
        assert got["refused"] == [] and len(store.get("full").edges) == 63
        _ok(await client.call_tool("supersede", {"old": "old", "new": "full", "reason": "R" * 1_000}))
        reply = _ok(await client.call_tool("get", {"id": "full", "max_chars": 1}))
        assert reply["frontmatter"]["edges"][-1] == {
            "target": "old",
            "type": "supersedes",
            "reason": "R" * 1_000,
        }
        assert len(reply["frontmatter"]["edges"]) == 64 and "frontmatter_clipped" not in reply

    _serve(root, work, aliases=("mcp-memory",))


def test_one_source_of_truth_for_the_limits() -> None:
    """The write checks use the constants ``get`` clips with, and the note's figures are them."""
    assert mcp_server.FIELD_CHARS == 1_000 and mcp_server.FIELD_ITEMS == 64
    assert (
        mcp_server.MAX_TAGS == mcp_server.FIELD_ITEMS
        and mcp_server.MAX_REASON_CHARS == mcp_server.FIELD_CHARS
    )
    assert mcp_server.CLIPPED_NOTE == NOTE
    assert BUDGETS["get"].chars(1) == 35_002
