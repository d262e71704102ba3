"""The LangGraph store on md-cg: the interface's own expectations, side by side with InMemoryStore.

The ``langgraph-checkpoint`` package ships no conformance suite for stores,
so the expectations of LangGraph's own store tests (list_namespaces with
prefixes, suffixes, wildcards, depth and pages; namespace validation;
filtered and paged search) are checked here against :class:`MdCGStore`, and
wherever the answer does not depend on ranking, against LangGraph's
``InMemoryStore`` fed the same operations. A small graph runs offline.
Skipped when the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

import asyncio
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph.store.base")

from conftest import python_env
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, ListNamespacesOp, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from md_cg import MdCG, Node, Scope
from md_cg.errors import InvalidArgumentError, InvalidNodeError
from md_cg.integrations.langgraph_store import MdCGStore, ids_seen, node_id_for


@pytest.fixture
def store(tmp_path: Path):
    with MdCGStore(tmp_path / "mem") as s:
        yield s


def both(tmp_path: Path) -> tuple[MdCGStore, InMemoryStore]:
    return MdCGStore(tmp_path / "mem"), InMemoryStore()


NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]

LIST_CASES: list[dict[str, Any]] = [
    {},
    {"prefix": ("a", "b")},
    {"suffix": ("f",)},
    {"prefix": ("a",), "suffix": ("f",)},
    {"prefix": ("a", "b"), "max_depth": 3},
    {"prefix": ("a", "b"), "limit": 2},
    {"prefix": ("a", "b"), "offset": 2},
    {"prefix": ("a", "*", "f")},
    {"suffix": ("*", "f")},
    {"prefix": ("nonexistent",)},
    {"prefix": ("users", "123")},
    {"prefix": ("users", "*")},
    {"prefix": ("*", "users"), "suffix": ("*", "settings")},
    {"max_depth": 2},
    {"max_depth": 1, "limit": 2, "offset": 1},
]


def test_list_namespaces_as_langgraph_expects(tmp_path: Path) -> None:
    ours, ref = both(tmp_path)
    with ours:
        for s in (ours, ref):
            assert s.list_namespaces() == []
            for i, ns in enumerate(NAMESPACES):
                s.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
        for case in LIST_CASES:
            assert ours.list_namespaces(**case) == ref.list_namespaces(**case), case
        assert ours.list_namespaces(prefix=("a", "b"), max_depth=3) == [
            ("a", "b", "c"),
            ("a", "b", "d"),
            ("a", "b", "f"),
        ]
        assert ours.list_namespaces(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]


def test_list_namespaces_pagination(store: MdCGStore) -> None:
    for i in range(20):
        store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"})
    for offset in (0, 5, 15):
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)
        ]


def test_namespace_labels_are_validated(store: MdCGStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("a.b",), "k")])
    store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert store.get(("foo", "langgraph", "foo"), "bar").value == doc
    assert store.search(("foo", "langgraph", "foo"))[0].value == doc
    store.delete(("foo", "langgraph", "foo"), "bar")
    assert store.get(("foo", "langgraph", "foo"), "bar") is None
    # past the public put, as LangGraph's own stores allow
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert store.get(("langgraph", "foo"), "bar").value == doc
    assert store.list_namespaces() == [("langgraph", "foo")]
    assert store.store.ids() == [node_id_for(("langgraph", "foo"), "bar")]


def test_labels_with_slashes_and_percents_stay_apart(store: MdCGStore) -> None:
    store.put(("a/b",), "k", {"text": "one"})
    store.put(("a", "b"), "k", {"text": "two"})
    store.put(("a%2Fb",), "k", {"text": "three"})
    assert sorted(store.list_namespaces()) == [("a", "b"), ("a%2Fb",), ("a/b",)]
    assert [store.get(ns, "k").value["text"] for ns in [("a/b",), ("a", "b"), ("a%2Fb",)]] == [
        "one",
        "two",
        "three",
    ]
    assert [i.value["text"] for i in store.search(("a",))] == ["two"]


def test_files_are_readable_markdown(store: MdCGStore) -> None:
    store.put(
        ("memories", "alice"), "coffee", {"text": "Alice drinks her coffee black.", "kind": "preference"}
    )
    node_id = node_id_for(("memories", "alice"), "coffee")
    assert node_id.startswith("coffee-") and len(node_id) == len("coffee-") + 12
    path = store.store.path_of(node_id)
    assert path.parent.name.startswith("cond_langgraph_memories_alice_")
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[:6] == [
        "---",
        f'id: "{node_id}"',
        'layer: "knowledge"',
        'condition_space: {"observation_position": "langgraph:memories/alice"}',
        'retention_tier: "long"',
        'retention_reason: "the caller asked for the long tier"',
    ]
    assert lines[8:] == [
        'langgraph_key: "coffee"',
        'langgraph_value: {"kind": "preference"}',
        'langgraph_body: "text"',
        "---",
        "Alice drinks her coffee black.",
        "",
    ]
    # a value without a text field: the frontmatter holds it, the body shows it
    store.put(("settings",), "ui", {"theme": "dark", "font": 12, "panes": ["a", "b"]})
    node = store.store.get(node_id_for(("settings",), "ui"))
    assert node.body == 'theme: dark\nfont: 12\npanes: ["a","b"]'
    assert "langgraph_body" not in node.extra
    assert store.get(("settings",), "ui").value == {"theme": "dark", "font": 12, "panes": ["a", "b"]}


@pytest.mark.parametrize(
    "value",
    [
        {"content": "ends with a newline\n", "n": 1},
        {"text": "  spaced  \r\nCRLF line\r\n---\nnot a fence", "nested": {"deep": [1, {"x": None}]}},
        {"memory": "二分查找 needs a sorted array", "tags": ["算法"]},
        {"text": "   ", "data": "the text field is blank, so data is the body"},
        {},
    ],
)
def test_values_round_trip_exactly(store: MdCGStore, value: dict[str, Any]) -> None:
    store.put(("rt",), "k", value)
    assert store.get(("rt",), "k").value == value
    with MdCGStore(store.store.root) as again:  # another handle reads the files
        assert again.get(("rt",), "k").value == value


def test_put_updates_in_place_and_keeps_other_fields(store: MdCGStore) -> None:
    store.put(("n",), "k", {"text": "first"})
    first = store.get(("n",), "k")
    node_id = node_id_for(("n",), "k")
    store.store.update(node_id, importance=0.9, tags=["pinned"])  # a person's edit
    store.put(("n",), "k", {"text": "second", "extra": True})
    second = store.get(("n",), "k")
    assert second.value == {"text": "second", "extra": True}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    node = store.store.get(node_id)
    assert (node.importance, node.tags) == (0.9, ["pinned"])
    assert store.store.ids() == [node_id]


def test_bad_values_and_ttl_are_refused_with_nothing_stored(store: MdCGStore) -> None:
    with pytest.raises(InvalidNodeError) as info:
        store.batch([PutOp(("n",), "good", {"text": "fine"}), PutOp(("n",), "bad", {"x": math.nan})])
    assert "langgraph_value" in str(info.value)
    assert store.store.ids() == []  # one commit: all or nothing
    with pytest.raises(NotImplementedError):
        store.put(("n",), "k", {"text": "x"}, ttl=5)
    with pytest.raises(NotImplementedError, match="TTL is not supported by MdCGStore"):
        store.batch([PutOp(("n",), "k", {"text": "x"}, ttl=5.0)])
    store.put(("n",), "k", {"score": 1})
    with pytest.raises(InvalidArgumentError, match=r"unsupported filter operator '\$in'"):
        store.search(("n",), filter={"score": {"$in": [1]}})


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ({"n": 2**70}, "1180591620717411303424 (got {'n': 1180591620717411303424})"),
        ({"text": "t", "n": [-(2**64)]}, "-18446744073709551616 (got {'n': [-18446744073709551616]})"),
    ],
)
def test_an_integer_a_file_cannot_hold_is_refused_naming_the_item(
    store: MdCGStore, value: dict[str, Any], shown: str
) -> None:
    """A value over 64 bits (with or without a text field) is md-cg's InvalidNodeError
    naming the key and namespace, not a raw TypeError from the JSON writer; nothing of
    the batch is stored."""
    with pytest.raises(InvalidNodeError) as info:
        store.batch([PutOp(("n", "1"), "fine", {"text": "fine"}), PutOp(("n", "1"), "big", value)])
    node_id = node_id_for(("n", "1"), "big")
    integer, got = shown.split(" ", 1)
    assert str(info.value) == (
        f"cannot put the item 'big' of namespace ('n', '1'): node '{node_id}': field 'langgraph_value' "
        f"holds the integer {integer}, outside the range a node file stores (-2**63 to 2**64 - 1) {got}"
    )
    assert (info.value.field, info.value.node_id) == ("langgraph_value", node_id)
    assert store.store.ids() == []
    store.put(("n",), "max", {"n": 2**64 - 1, "m": -(2**63)})
    assert store.get(("n",), "max").value == {"n": 2**64 - 1, "m": -(2**63)}


def test_batch_reads_see_the_store_before_the_batch(tmp_path: Path) -> None:
    ours, ref = both(tmp_path)
    with ours:
        for s in (ours, ref):
            s.put(("b",), "old", {"text": "old"})
        ops = [
            PutOp(("b",), "new", {"text": "v1"}),
            GetOp(("b",), "new"),
            PutOp(("b",), "new", {"text": "v2"}),
            PutOp(("b",), "old", None),
            GetOp(("b",), "old"),
            SearchOp(("b",)),
            ListNamespacesOp(),
        ]
        mine, theirs = ours.batch(ops), ref.batch(ops)
        assert mine[1] is None and theirs[1] is None
        assert mine[4].value == theirs[4].value == {"text": "old"}
        assert [i.key for i in mine[5]] == [i.key for i in theirs[5]] == ["old"]
        assert mine[6] == theirs[6] == [("b",)]
        for s in (ours, ref):
            assert s.get(("b",), "new").value == {"text": "v2"}
            assert s.get(("b",), "old") is None


DOCS = [
    ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
    ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
    ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
    ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
]


def test_search_with_query_and_filters(store: MdCGStore) -> None:
    for key, value in DOCS:
        store.put(("test",), key, value)
    results = store.search(("test",), query="apple", filter={"color": "red"})
    assert [r.key for r in results] == ["doc1", "doc2"]
    assert results[0].score > 0 and results[1].score is None
    assert [r.key for r in store.search(("test",), query="car", filter={"color": "red"})] == ["doc2", "doc1"]
    results = store.search(("test",), query="blue", filter={"score": {"$gt": 3.2}})
    assert next(r.key for r in results) == "doc4" and {r.key for r in results} == {"doc1", "doc3", "doc4"}
    results = store.search(("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in results] == ["doc3"]
    assert {r.key for r in store.search(("test",), filter={"score": {"$lt": 4, "$ne": 3.0}})} == {"doc4"}
    # fill=False: only the items with evidence
    strict = MdCGStore(store.store, fill=False)
    # doc1 and doc3 tie: the most recently changed first (session 43; was by key)
    assert [r.key for r in strict.search(("test",), query="apple")] == ["doc3", "doc1"]
    assert strict.search(("test",), query="xyzzy plugh") == []


def test_filtered_search_matches_the_in_memory_store(tmp_path: Path) -> None:
    ours, ref = both(tmp_path)
    values = [
        {"n": i, "even": i % 2 == 0, "meta": {"group": "ab"[i % 2], "tags": ["x"] * (i % 3)}}
        for i in range(12)
    ]
    filters = [
        None,
        {"even": True},
        {"n": {"$gte": 4, "$lt": 9}},
        {"meta": {"group": "b"}},
        {"meta": {"tags": ["x", "x"]}},
        {"n": {"$ne": 3}, "even": False},
        {"missing": 1},
    ]
    with ours:
        for s in (ours, ref):
            for i, v in enumerate(values):
                s.put(("f", str(i % 3)), f"k{i}", v)
        for f in filters:
            for prefix in [("f",), ("f", "1")]:
                mine = {(r.namespace, r.key) for r in ours.search(prefix, filter=f, limit=100)}
                theirs = {(r.namespace, r.key) for r in ref.search(prefix, filter=f, limit=100)}
                assert mine == theirs, (f, prefix)


def test_search_pages_and_edge_cases(store: MdCGStore) -> None:
    for i in range(5):
        store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = store.search(("test",), query="test", limit=2)
    page2 = store.search(("test",), query="test", limit=2, offset=2)
    everything = store.search(("test",), query="test", limit=10)
    assert len(page1) == len(page2) == 2 and len(everything) == 5
    assert [r.key for r in page1 + page2] == [r.key for r in everything[:4]]
    assert next(r.key for r in store.search(("test",), query="number 3")) == "doc3"
    for query in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(store.search(("test",), query=query)) == 5
    assert store.search(("test",), query="test", limit=0) == []
    assert store.search(("elsewhere",), query="test") == []


def test_search_in_a_namespace_ignores_the_others(store: MdCGStore) -> None:
    for i in range(40):
        store.put(("noise",), f"n{i}", {"text": f"coffee note {i} about espresso"})
    store.put(("me",), "fact", {"text": "I take my coffee with oat milk"})
    results = store.search(("me",), query="coffee")
    assert [(r.namespace, r.key) for r in results] == [(("me",), "fact")]
    assert results[0].score > 0
    assert store.store.access_counts([node_id_for(("me",), "fact")]) == {node_id_for(("me",), "fact"): 1}


def test_async_forms(store: MdCGStore) -> None:
    async def scenario() -> tuple[Any, ...]:
        await store.aput(("a",), "k", {"text": "async value"})
        got = await store.aget(("a",), "k")
        found = await store.asearch(("a",), query="async")
        spaces = await store.alist_namespaces()
        await store.adelete(("a",), "k")
        return got.value, [r.key for r in found], spaces, await store.aget(("a",), "k")

    assert asyncio.run(scenario()) == ({"text": "async value"}, ["k"], [("a",)], None)


class State(TypedDict):
    user: str
    message: str
    recalled: list[str]


def test_a_langgraph_graph_writes_and_reads_memories(tmp_path: Path) -> None:
    graph = pytest.importorskip("langgraph.graph")  # from `langgraph`, not `langgraph-checkpoint`

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        if state["message"].startswith("remember "):
            fact = state["message"][len("remember ") :]
            key = f"fact-{len(store.search(('memories', state['user']), limit=100))}"
            store.put(("memories", state["user"]), key, {"text": fact})
        return {}

    def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
        hits = store.search(("memories", state["user"]), query=state["message"], limit=3)
        return {"recalled": [h.value["text"] for h in hits if h.score is not None]}

    builder = graph.StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(graph.START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", graph.END)
    with MdCGStore(tmp_path / "mem") as store:
        app = builder.compile(store=store)
        for message in ["remember I am allergic to peanuts", "remember my sister lives in Lyon"]:
            app.invoke({"user": "sam", "message": message, "recalled": []})
        app.invoke({"user": "kim", "message": "remember I live in Lyon too", "recalled": []})
        out = app.invoke({"user": "sam", "message": "where does my sister live?", "recalled": []})
        assert out["recalled"] == ["my sister lives in Lyon"]
        assert store.list_namespaces() == [("memories", "kim"), ("memories", "sam")]
    with MdCG(tmp_path / "mem") as md:  # the memories are files md-cg itself reads
        bodies = sorted(n.body for n in md.iter_nodes())
        assert bodies == ["I am allergic to peanuts", "I live in Lyon too", "my sister lives in Lyon"]


def test_the_example_in_the_docs_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text(encoding="utf-8")
    block = next(b for b in doc.split("```python\n")[1:] if "MdCGStore(" in b).split("```")[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/integrations.md", "exec"), {})
    with MdCGStore(tmp_path / "memory") as store:
        got = store.get(("memories", "alice"), "coffee")
        assert got.value == {"kind": "preference", "text": "Alice drinks her coffee black"}
        assert store.list_namespaces(prefix=("memories",)) == [("memories", "alice")]
        [hit] = store.search(("memories", "alice"), query="what does alice drink?", limit=5)
        assert hit.key == "coffee" and hit.score > 0


#: How a long-term item's retention fields read.
LONG = ("long", None, "the caller asked for the long tier")


def timer(node: Node) -> tuple[Any, ...]:
    return (node.retention_tier, node.expires_at, node.retention_reason)


def test_items_are_long_term_whatever_their_words(tmp_path: Path) -> None:
    """md-cg would make "... tomorrow ..." a temporary memory that expires; a LangGraph
    item lasts until it is deleted (a put has no TTL), and a put makes an item stored
    on a timer by an earlier version long-term again."""
    with MdCG(tmp_path / "mem") as md, MdCGStore(md) as store:
        ns = ("memories", "bob")
        store.put(ns, "todo", {"text": "Call the plumber tomorrow about the leak"})
        store.put(ns, "sure", {"text": "Bob is allergic to peanuts", "since": 2020})
        for key in ("todo", "sure"):
            node = md.get(node_id_for(ns, key))
            assert timer(node) == LONG
        todo = node_id_for(ns, "todo")
        md.update(todo, retention_tier="temp")  # as the earlier version stored it
        assert md.get(todo).expires_at is not None
        store.put(ns, "todo", {"text": "The plumber's phone number is 555-1234"})
        node = md.get(todo)
        assert (node.retention_tier, node.expires_at) == ("long", None)
        assert node.body == "The plumber's phone number is 555-1234"
        assert md.sweep(dry_run=True).expired == ()
        assert store.get(ns, "todo").value == {"text": "The plumber's phone number is 555-1234"}


def _old_item(ns: tuple[str, ...], key: str, text: str, **fields: Any) -> Node:
    """An item as the code before long-term items wrote it (md-cg decided its tier)."""
    node = Node(id=node_id_for(ns, key), layer="knowledge", body=text, **fields)
    node.condition_space = {"observation_position": "langgraph:" + "/".join(ns)}
    node.extra = {"langgraph_key": key, "langgraph_body": "text"}
    return node


UPGRADER = """
import sys
from md_cg import MdCG
from md_cg.integrations.langgraph_store import MdCGStore
with MdCG(sys.argv[1], refresh_interval=0) as md:
    MdCGStore(md)
"""


def test_items_an_earlier_version_put_on_a_timer_are_kept_on_open(tmp_path: Path) -> None:
    """The code before long-term items let md-cg time an item by its words; the first
    open of a store by MdCGStore makes those long-term (an expired one not yet swept
    too), once: the log notes it and later opens do not look again. A timer a caller
    asked for, and a memory that is not an item, keep theirs. Two processes opening
    the store at once both succeed."""
    root, ns = tmp_path / "mem", ("u", "1")
    # an earlier version's wording of the decision (still read as the decision's, not a choice)
    words = "the one-off marker 'tomorrow' (n1_relative_day) opens the text and no veto marker is in the text"
    with MdCG(root) as md:
        md.add(_old_item(ns, "k1", "remind me tomorrow: dentist at 3pm today"))
        assert (
            md.entry(node_id_for(ns, "k1")).retention_tier,
            md.get(node_id_for(ns, "k1")).retention_reason,
        ) == (
            "temp",
            "the one-off marker 'tomorrow' (n1_relative_day) begins at word 3 of the text, within the "
            "first 12 a term rule reads (a CJK character counts as one) and no veto marker is in the text",
        )
        past = {"retention_tier": "temp", "expires_at": time.time() - 60, "retention_reason": words}
        asked = {
            "retention_tier": "temp",
            "expires_at": time.time() + 3600,
            "retention_reason": "the caller asked for the temp tier",
        }
        md.add_many(
            [_old_item(ns, "gone", "just for today", **past), _old_item(ns, "asked", "a short one", **asked)],
            stamp=False,
            decide=False,
        )
        other = md.add(body="remind me tomorrow to water the plants", id="plain").id
        assert md.entry(other).retention_tier == "temp"
        assert md.ids() == sorted([node_id_for(ns, "k1"), node_id_for(ns, "asked"), other])
    run_at_once(UPGRADER, [[str(root)], [str(root)]])
    with MdCG(root) as md:
        for key in ("k1", "gone"):
            node = md.get(node_id_for(ns, key))
            assert timer(node) == LONG
        assert md.get(node_id_for(ns, "asked")).retention_tier == "temp"
        assert md.get(other).retention_tier == "temp"
        records = md.log("langgraph").read()
        assert 1 <= len(records) <= 2  # each process that found no record ran it
        assert {r["done"] for r in records} == {"items-long-term"}
        assert sum(r["changed"] for r in records) >= 2
        with MdCGStore(md) as store:
            assert store.get(ns, "gone").value == {"text": "just for today"}
        assert md.log("langgraph").read() == records  # not again
        assert md.health().ok


def test_two_scoped_agents_keep_items_under_the_same_key(tmp_path: Path) -> None:
    """One scoped handle per agent: each agent's item of (namespace, key) is its own
    node (the scope is in the id); an unscoped handle's ids are as before, and a shared
    item, or one written before scoped ids, is found and changed in place."""
    root = tmp_path / "mem"
    MdCG(root).init_folder()
    ns, key = ("memories",), "profile"
    alice_scope, bob_scope = Scope(agent="alice"), Scope(agent="bob")
    with (
        MdCGStore(MdCG(root, scope=alice_scope, refresh_interval=0)) as alice,
        MdCGStore(MdCG(root, scope=bob_scope, refresh_interval=0)) as bob,
        MdCGStore(MdCG(root, refresh_interval=0)) as trusted,
    ):
        alice.put(ns, key, {"text": "Alice's profile: vegetarian"})
        assert bob.get(ns, key) is None
        bob.put(ns, key, {"text": "Bob's profile: eats meat"})
        assert alice.get(ns, key).value == {"text": "Alice's profile: vegetarian"}
        assert bob.get(ns, key).value == {"text": "Bob's profile: eats meat"}
        assert [i.value["text"] for i in bob.search(ns)] == ["Bob's profile: eats meat"]
        alice_id, bob_id = node_id_for(ns, key, alice_scope), node_id_for(ns, key, bob_scope)
        assert trusted.store.get(alice_id).agent_scope == "alice"
        assert trusted.store.get(bob_id).agent_scope == "bob"
        assert len({alice_id, bob_id, node_id_for(ns, key)}) == 3
        assert node_id_for(ns, key, Scope()) == node_id_for(ns, key)  # no agent: shared, plain id
        bob.delete(ns, key)
        assert bob.get(ns, key) is None
        assert alice.get(ns, key).value == {"text": "Alice's profile: vegetarian"}
        assert set(trusted.store.ids()) == {alice_id}
        # a shared item (plain id): every agent sees it; a put changes it in place, still shared
        trusted.put(ns, "rules", {"text": "Quiet hours after 22:00"})
        bob.put(ns, "rules", {"text": "Quiet hours after 23:00"})
        shared = trusted.store.get(node_id_for(ns, "rules"))
        assert (shared.agent_scope, shared.body) == (None, "Quiet hours after 23:00")
        assert alice.get(ns, "rules").value == {"text": "Quiet hours after 23:00"}
        assert set(trusted.store.ids()) == {alice_id, node_id_for(ns, "rules")}
        # bob's item stored under the plain id (before scoped ids) is still his
        old = Node(id=node_id_for(ns, "diet"), layer="knowledge", body="no fish", agent_scope="bob")
        old.condition_space = {"observation_position": "langgraph:memories"}
        old.extra = {"langgraph_key": "diet", "langgraph_body": "text"}
        trusted.store.add(old)
        assert bob.get(ns, "diet").value == {"text": "no fish"}
        bob.put(ns, "diet", {"text": "no fish, no meat"})
        assert trusted.store.get(node_id_for(ns, "diet")).body == "no fish, no meat"
        assert alice.get(ns, "diet") is None
        bob.delete(ns, "diet")
        assert set(trusted.store.ids()) == {alice_id, node_id_for(ns, "rules")}


def test_a_scoped_handle_finds_every_item_its_scope_admits(tmp_path: Path) -> None:
    """An item written by another scope that a handle's scope admits (its workspace's,
    its agent's alone, a shared one) is found by get and changed in place by put, not
    copied; when several are stored, the order of ids_seen decides (own, agent's,
    workspace's, shared), and search shows the same one."""
    root = tmp_path / "mem"
    MdCG(root).init_folder()
    ns = ("team", "notes")
    scopes = {
        "bob_acme": Scope(agent="bob", workspace="acme"),
        "bob": Scope(agent="bob"),
        "acme": Scope(workspace="acme"),
    }
    handles = {name: MdCGStore(MdCG(root, scope=sc, refresh_interval=0)) for name, sc in scopes.items()}
    handles["trusted"] = MdCGStore(MdCG(root, refresh_interval=0))
    bob, team, md = handles["bob_acme"], handles["acme"], handles["trusted"].store
    try:
        team.put(ns, "deploy", {"text": "deploys happen on Tuesdays"})
        assert bob.get(ns, "deploy").value == {"text": "deploys happen on Tuesdays"}
        bob.put(ns, "deploy", {"text": "deploys moved to Thursdays"})
        team_id = node_id_for(ns, "deploy", scopes["acme"])
        assert md.ids() == [team_id]
        node = md.get(team_id)
        assert (node.agent_scope, node.workspace_scope) == (None, "acme")
        assert team.get(ns, "deploy").value == {"text": "deploys moved to Thursdays"}
        bob.delete(ns, "deploy")
        assert (md.ids(), team.get(ns, "deploy")) == ([], None)
        # several stored: most specific first (each handle creates its own when it sees none)
        for name in ("bob_acme", "bob", "acme", "trusted"):
            handles[name].put(ns, "k", {"text": f"written by {name}"})
        expected = ids_seen(ns, "k", scopes["bob_acme"])
        assert expected == [
            node_id_for(ns, "k", scopes["bob_acme"]),
            node_id_for(ns, "k", scopes["bob"]),
            node_id_for(ns, "k", scopes["acme"]),
            node_id_for(ns, "k"),
        ]
        assert md.ids() == sorted(expected)
        for name in ("bob_acme", "bob", "acme", "trusted"):
            assert bob.get(ns, "k").value == {"text": f"written by {name}"}
            assert [i.value for i in bob.search(ns)] == [{"text": f"written by {name}"}]
            bob.delete(ns, "k")
        assert (md.ids(), bob.get(ns, "k"), bob.search(ns)) == ([], None, [])
        assert ids_seen(ns, "k") == [node_id_for(ns, "k")]
        assert ids_seen(ns, "k", scopes["bob"]) == [node_id_for(ns, "k", scopes["bob"]), node_id_for(ns, "k")]
    finally:
        for h in handles.values():
            h.store.close()


def run_at_once(script: str, args: list[list[str]]) -> None:
    """Run ``python -c script`` once per argument list, all at once; each must exit 0."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *a], env=python_env(), stderr=subprocess.PIPE, text=True
        )
        for a in args
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), errs


PUTTER = """
import sys, time
from md_cg import MdCG
from md_cg.integrations.langgraph_store import MdCGStore, ids_seen, node_id_for
root, role, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ns = ("memories", "alice")
with MdCG(root, refresh_interval=0) as md:
    store = MdCGStore(md)
    for i in range(n):
        if role == "putter":
            store.put(ns, "coffee", {"text": f"Alice drinks coffee, version {i}"})
        else:
            tag = f"t{i}"
            md.modify(node_id_for(ns, "coffee"), lambda node: setattr(node, "tags", [*node.tags, tag]))
"""


def test_a_put_keeps_what_another_process_changes_meanwhile(tmp_path: Path) -> None:
    """A put reads, changes and writes the stored item under its lock: tags another
    process adds at the same time (md-cg's modify) all survive."""
    root, n = tmp_path / "mem", 80
    ns = ("memories", "alice")
    with MdCGStore(root) as store:
        store.put(ns, "coffee", {"text": "Alice drinks coffee"})
    run_at_once(PUTTER, [[str(root), role, str(n)] for role in ("putter", "tagger")])
    with MdCG(root) as md:
        node = md.get(node_id_for(ns, "coffee"))
        assert sorted(node.tags) == sorted(f"t{i}" for i in range(n))
        assert node.body == f"Alice drinks coffee, version {n - 1}"
        assert md.health().ok


def test_an_archived_item_is_put_back_by_a_put_and_removed_by_a_delete(tmp_path: Path) -> None:
    with MdCG(tmp_path / "mem") as md, MdCGStore(md) as store:
        ns = ("m",)
        node_id = node_id_for(ns, "k")
        store.put(ns, "k", {"text": "v1"})
        assert md.archive([node_id]) == [node_id]
        assert store.get(ns, "k") is None  # archived: out of every default read
        assert store.search(ns) == []
        store.put(ns, "k", {"text": "v2"})
        assert store.get(ns, "k").value == {"text": "v2"}
        assert md.entry(node_id).archived is False
        assert md.archive([node_id]) == [node_id]
        store.delete(ns, "k")
        assert md.ids(include_archived=True) == []
        store.put(ns, "k", {"text": "v3"})
        assert store.get(ns, "k").value == {"text": "v3"}


def test_the_file_in_the_docs_is_the_file_written(tmp_path: Path) -> None:
    """docs/integrations.md's item file (id included) is what a put writes, times aside."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "integrations.md").read_text(encoding="utf-8")
    shown = next(b for b in doc.split("```markdown\n")[1:] if "langgraph_key" in b).split("```")[0]
    with MdCGStore(tmp_path / "mem") as store:
        ns = ("memories", "alice")
        store.put(ns, "coffee", {"text": "Alice drinks her coffee black", "kind": "preference"})
        written = store.store.path_of(node_id_for(ns, "coffee")).read_text(encoding="utf-8")
    stamp = re.compile(r'^((?:created|updated)_at): ".*"$', re.MULTILINE)
    assert stamp.sub(r"\1: T", written) == stamp.sub(r"\1: T", shown)
    assert 'id: "coffee-38fb5aa7ab28"' in shown


CREATOR = """
import sys
from md_cg import MdCG
from md_cg.integrations.langgraph_store import MdCGStore
root, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with MdCG(root) as md:
    store = MdCGStore(md)
    for i in range(n):
        store.put(("n",), f"k{i}", {"text": f"{who} {i}"})
"""


def test_two_processes_creating_the_same_items_both_succeed(tmp_path: Path) -> None:
    """New items are added without overwrite: the process that finds an item created
    meanwhile by the other looks again and replaces it, with no error."""
    root, n = tmp_path / "mem", 40
    MdCG(root).init_folder()
    run_at_once(CREATOR, [[str(root), who, str(n)] for who in ("a", "b")])
    with MdCGStore(root) as store:
        assert store.store.ids() == sorted(node_id_for(("n",), f"k{i}") for i in range(n))
        for i in range(n):
            assert store.get(("n",), f"k{i}").value["text"] in {f"a {i}", f"b {i}"}
        assert store.store.health().ok
