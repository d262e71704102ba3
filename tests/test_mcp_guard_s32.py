"""No MCP write changes edges or conditions a memory holds that ``get`` does not show whole
(review r6 of session 32, /tmp/s32/rev6: a2_handwritten.py, a4_cut_fits.py).

The write-back heuristics of 47790b6 were wrong three ways: (1) an edge whose ``extra``
list of 100 items ``get`` showed as 64, written back with one more edge, was taken and
the file lost 36 items and 36 keys; (2) dropping the edges ``get`` does not show was
refused by a text telling to do just that, and ``update(edges=[])`` too; (3) one long
string in a hand-written edge blocked adding any edge and ``supersede`` with a false
figure ("5,173 characters, over the 29,000"). Now one rule: when a ``get`` does not show
the stored list whole (at any depth), a write that replaces it is refused -- ``edges=[]``
included (the 6 edges ``get`` did not show would go unseen) -- with one message; the
other fields stay writable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import orjson
from test_mcp_edges_s32 import _err, _memories, _ok  # one set of MCP test helpers
from test_mcp_edges_s32 import _serve as _serve_with

from md_cg import Edge, MdCG, Node

HIDDEN = (
    "{name}: the memory holds {held}; a `get` shows {shown}: an update's {name} replace the whole list, "
    "so what a `get` does not show would be lost, and no MCP write changes these {items}; change them in "
    "the file at `path` instead (`mdcg edit {id}`)"
)


def _serve(root: Path, work: Any) -> None:
    _serve_with(root, work, aliases=("mcp-memory",))


def _edges(store: MdCG, node_id: str) -> list[dict[str, Any]]:
    return [Edge.from_value(e).to_dict() for e in store.get(node_id).edges]


def _hand_written(root: Path) -> None:
    with MdCG(root) as s:
        for i in range(80):
            s.add(Node(id=f"t{i}", body=f"target {i}"))
        edges = [{"target": f"t{i}", "type": "similar", "relation": "knows"} for i in range(70)]
        s.add(Node(id="hub", body="hub memory", tags=[f"tag{i}" for i in range(70)], edges=edges))
        nested = [
            {"target": "t1", "type": "causal", "extra": list(range(100))},
            {"target": "t2", "type": "causal", "meta": {f"k{i}": i for i in range(100)}},
        ]
        s.add(Node(id="nest", body="nested edge memory", edges=nested))
        s.add(
            Node(
                id="longr",
                body="long reason",
                edges=[{"target": "t3", "type": "causal", "reason": "r" * 5000}],
            )
        )


def test_a_clipped_list_nested_in_an_edge_is_not_written_back(tmp_path: Path) -> None:
    """r6 finding 1 (HIGH): the 100-item ``extra`` shown as 64, written back with one more
    edge, was taken and the file kept 64 items."""
    root = tmp_path / "m"
    _hand_written(root)
    refused = HIDDEN.format(
        name="edges", held="2 edges", shown="2, with 72 nested items left out", items="edges", id="nest"
    )

    async def work(client: Any, store: MdCG) -> None:
        reply = _ok(await client.call_tool("get", {"id": "nest"}))
        assert reply["frontmatter_clipped"] == {"edges": {"left_out": 72}}
        shown = reply["frontmatter"]["edges"]
        assert len(shown[0]["extra"]) == 64 and len(shown[1]["meta"]) == 64
        before = _memories(root)
        for written in ([*shown, {"target": "t4", "type": "causal"}], shown, _edges(store, "nest")):
            assert _err(await client.call_tool("update", {"id": "nest", "edges": written})) == refused
        relation = {"from": "nest", "to": "t4", "relationType": "knows"}
        got = _ok(await client.call_tool("create_relations", {"relations": [relation]}))
        assert got["updated"] == [] and [r["reason"] for r in got["refused"]] == [refused]
        assert _memories(root) == before
        assert store.get("nest").edges[0].extra["extra"] == list(range(100))
        assert store.get("nest").edges[1].extra["meta"] == {f"k{i}": i for i in range(100)}
        _ok(await client.call_tool("update", {"id": "nest", "body": "nested, changed"}))
        assert [len(e.extra.get("extra", e.extra.get("meta"))) for e in store.get("nest").edges] == [100, 100]

    _serve(root, work)


def test_edges_get_does_not_show_are_not_replaced_and_other_fields_are(tmp_path: Path) -> None:
    """r6 finding 2: 70 edges, 64 shown. Decided: ``update(edges=[])`` is refused like any
    list (the 6 edges ``get`` did not show would go unseen); the message says what to do."""
    root = tmp_path / "m"
    _hand_written(root)
    refused = HIDDEN.format(name="edges", held="70 edges", shown="64", items="edges", id="hub")

    async def work(client: Any, store: MdCG) -> None:
        whole = _edges(store, "hub")
        before = _memories(root)
        for written in ([], whole[:64], whole[1:], whole):
            assert _err(await client.call_tool("update", {"id": "hub", "edges": written})) == refused
        relations = [{"from": "hub", "to": f"t{i}", "relationType": "knows"} for i in range(64, 70)]
        got = _ok(await client.call_tool("delete_relations", {"relations": relations}))
        assert got["updated"] == [] and [r["reason"] for r in got["refused"]] == [refused] * 6
        got = await client.call_tool("supersede", {"old": "t70", "new": "hub", "reason": "x"})
        assert _err(got) == (
            f"new: superseding adds an edge to 'hub', and {refused}; or supersede in a shell "
            "(`mdcg supersede t70 hub`)"
        )
        assert _memories(root) == before and "valid_until" not in store.get("t70").to_dict()
        _ok(await client.call_tool("update", {"id": "hub", "body": "hub memory v2", "layer": "contextual"}))
        _ok(await client.call_tool("update", {"id": "hub", "tags": [f"tag{i}" for i in range(10)]}))
        node = store.get("hub")
        assert (node.body, node.layer, node.tags) == (
            "hub memory v2",
            "contextual",
            [f"tag{i}" for i in range(10)],
        )
        assert _edges(store, "hub") == whole

    _serve(root, work)


def test_one_long_string_names_the_cut_not_a_false_size(tmp_path: Path) -> None:
    """r6 finding 3: a 5,000-character reason was refused as 'the memory's frontmatter
    would take 5,173 characters, over the 29,000'. The figure named a size under the
    limit; the cause is the cut string."""
    root = tmp_path / "m"
    _hand_written(root)
    refused = HIDDEN.format(
        name="edges", held="1 edge", shown="1, with 1 of its strings cut", items="edges", id="longr"
    )

    async def work(client: Any, store: MdCG) -> None:
        whole = _edges(store, "longr")
        before = _memories(root)
        got = await client.call_tool("update", {"id": "longr", "edges": [*whole, {"target": "t4"}]})
        assert _err(got) == refused
        got = _ok(
            await client.call_tool(
                "create_relations", {"relations": [{"from": "longr", "to": "t4", "relationType": "x"}]}
            )
        )
        assert [r["reason"] for r in got["refused"]] == [refused]
        got = await client.call_tool("supersede", {"old": "t5", "new": "longr", "reason": "newer"})
        assert _err(got) == (
            f"new: superseding adds an edge to 'longr', and {refused}; or supersede in a shell "
            "(`mdcg supersede t5 longr`)"
        )
        assert _memories(root) == before and _edges(store, "longr") == whole

    _serve(root, work)


def test_a_write_that_would_make_edges_too_big_names_their_true_size(tmp_path: Path) -> None:
    """The check kept: a write may not create edges ``get`` cannot show whole. Each of 64
    edges with a 1,000-character reason passes the per-item limits; together they pass the
    room, and the message gives the frontmatter's real size."""
    root = tmp_path / "m"
    edges = [{"target": f"t{i}", "type": "similar", "reason": "R" * 1_000} for i in range(64)]

    async def work(client: Any, store: MdCG) -> None:
        _ok(await client.call_tool("remember", {"id": "a", "body": "a memory", "edges": edges[:2]}))
        before = _memories(root)
        got = await client.call_tool("update", {"id": "a", "edges": edges})
        frontmatter = {
            k: v for k, v in store.get("a").to_dict(iso_times=True).items() if k not in ("id", "layer")
        }
        size = len(orjson.dumps({**frontmatter, "edges": edges}).decode())
        assert size > 29_000
        assert _err(got) == (
            f"edges: the memory's frontmatter would take {size:,} characters, over the 29,000 a `get` shows "
            "whole (30,000, less 1,000 kept for the fields the store sets): `get` could not show its edges "
            "whole; give fewer or shorter items (long text belongs in the body)"
        )
        assert _memories(root) == before
        _ok(await client.call_tool("update", {"id": "a", "edges": edges[:20]}))
        reply = _ok(await client.call_tool("get", {"id": "a", "max_chars": 1}))
        assert "frontmatter_clipped" not in reply and reply["frontmatter"]["edges"] == edges[:20]

    _serve(root, work)
