"""Review s26 (rev5) of the mem0 aliases: a label's reply carries no other label's
memory anywhere (covered negatives, counts), an AND of labels filters before ranking,
a case twin neither truncates a search nor makes listing slow, the same text is one
memory as md-cg compares bodies, and filters that name no label are refused.

Each test runs with the aliases given the store (what ``mdcg mcp --aliases`` does) and
without it (tools only: every memory of a label checked exactly).
Skipped when the ``mcp`` extra is not installed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("mcp")

from mcp.server.mcpserver.exceptions import ToolError

from md_cg import MdCG, Node
from md_cg.integrations.aliases import alias_tools, labelled_id, twinned
from md_cg.mcp_server import create_server

WITH_STORE = pytest.mark.parametrize("with_store", [True, False], ids=["store", "tools-only"])


def _aliases(
    root: Path, store: MdCG, with_store: bool, calls: list[tuple[str, dict[str, Any]]] | None = None
) -> dict[str, Callable[..., dict[str, Any]]]:
    tools: dict[str, Any] = dict(create_server(root, store=store).tools)
    if calls is not None:  # record every md-cg tool call the aliases make

        def spy(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(fn)  # the same parameters: alias_tools checks them
            def call(**kwargs: Any) -> Any:
                calls.append((name, kwargs))
                return fn(**kwargs)

            return call

        tools = {name: spy(name, fn) for name, fn in tools.items()}
    built = alias_tools(tools, store=store if with_store else None)
    return {name: a.fn for name, a in built.available.items()}


@WITH_STORE
def test_a_label_search_names_no_other_users_memory_anywhere(tmp_path: Path, with_store: bool) -> None:
    """The reviewer's al_neg: a search filtered on alice listed bob's rejected memory
    (id and title) in meta.covered_neg, since md-cg's search lists negatives whatever
    the tag filter, and meta.filter.matching counted Alice's memories too. Now only
    alice's negatives are listed, and the count is left out while a twin label exists."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(
            Node(
                id="bob-embezzling",
                layer="rejected",
                body="Bob thinks his boss is embezzling payroll",
                tags=["user:bob"],
            )
        )
        store.add(
            Node(
                id="twin-embezzling",
                layer="rejected",
                body="Capital Alice suspected payroll embezzling by the boss",
                tags=["user:Alice"],
            )
        )
        store.add(
            Node(id="twin-note", body="Capital Alice: boss embezzling payroll again", tags=["user:Alice"])
        )
        store.add(
            Node(
                id="alice-rejected",
                layer="rejected",
                body="alice once thought the boss was embezzling payroll",
                tags=["user:alice"],
            )
        )
        store.add(
            Node(
                id="alice-note",
                body="alice wonders whether the boss is embezzling payroll",
                tags=["user:alice"],
            )
        )
        al = _aliases(root, store, with_store)
        raw = store.search("boss embezzling payroll", tag="user:alice")[1]
        assert set(raw["covered_neg"]) >= {"bob-embezzling", "alice-rejected"}  # md-cg lists bob's
        reply = al["search_memories"](query="boss embezzling payroll", filters={"user_id": "alice"})
        assert [r["id"] for r in reply["results"]] == ["alice-note"]
        assert [n["id"] for n in reply["meta"]["covered_neg"]] == ["alice-rejected"]
        assert reply["meta"]["covered_neg_total"] == 1
        assert "matching" not in reply["meta"]["filter"]
        text = orjson.dumps(reply).decode()
        for other in ("bob-embezzling", "Bob thinks", "twin-embezzling", "twin-note", "Capital Alice"):
            assert other not in text
        bob = al["search_memories"](query="boss embezzling payroll", filters={"user_id": "bob"})
        assert bob["results"] == [] and [n["id"] for n in bob["meta"]["covered_neg"]] == ["bob-embezzling"]
        assert bob["meta"]["filter"].get("matching") == (1 if with_store else None)  # no twin: md-cg's count


def _notes(store: MdCG) -> None:
    store.add_many(
        [
            Node(
                id=f"n{i:04d}",
                body=f"note {i} about green tea",
                tags=["user:alice"] + (["run:r1"] if i % 50 == 0 else []),
            )
            for i in range(1000)
        ],
        stamp=False,
    )


@WITH_STORE
def test_an_and_of_labels_filters_on_every_label(tmp_path: Path, with_store: bool) -> None:
    """The reviewer's al_and: AND[user alice, run r1] with limit 10 found 0 of the run's 20
    memories (md-cg filtered on the user only, the run was checked on 100 hits). Now md-cg
    filters on both; get_memories takes the AND too, and a label given twice is one."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        _notes(store)
        al = _aliases(root, store, with_store)
        run = {f"n{i:04d}" for i in range(0, 1000, 50)}
        both = {"AND": [{"user_id": "alice"}, {"run_id": "r1"}]}
        ten = al["search_memories"](query="green tea", filters=both, limit=10)
        assert len(ten["results"]) == 10 and {r["id"] for r in ten["results"]} <= run
        every = al["search_memories"](query="green tea", filters=both, limit=50)
        assert {r["id"] for r in every["results"]} == run
        listed = al["get_memories"](filters=both, page_size=100)
        assert (listed["total"], {i["id"] for i in listed["items"]}) == (20, run)
        twice = {"AND": [{"run_id": "r1"}, {"run_id": "r1"}]}
        assert al["get_memories"](filters=twice, page_size=100) == al["get_memories"](
            filters={"run_id": "r1"}, page_size=100
        )
        assert {
            r["id"] for r in al["search_memories"](query="green tea", filters=twice, limit=50)["results"]
        } == run


@pytest.mark.parametrize("empty", [{"AND": []}, {"OR": []}])
def test_a_filter_naming_no_label_is_refused(tmp_path: Path, empty: dict[str, Any]) -> None:
    """{"AND": []} returned every user's memories; an empty AND/OR is refused, naming it."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(Node(id="x", body="green tea for bob", tags=["user:bob"]))
        al = _aliases(root, store, True)
        which = next(iter(empty))
        message = (
            f"filters: an empty {which} ({{'{which}': []}}) names no label, and would match every memory; "
            "give at least one of user_id, agent_id, app_id, run_id"
        )
        for name, args in (("search_memories", {"query": "green tea"}), ("get_memories", {})):
            with pytest.raises(ToolError) as info:
                al[name](filters=empty, **args)
            assert str(info.value) == message


def _twins(store: MdCG, n: int) -> None:
    """``n`` memories about weather and tea: one in ten Alice's, the others alice's."""
    store.add_many(
        [
            Node(
                id=f"m{i:05d}",
                body=f"fact number {i} about the weather and tea {i % 97}",
                tags=["user:Alice" if i % 10 == 0 else "user:alice"],
            )
            for i in range(n)
        ],
        stamp=False,
    )


@WITH_STORE
def test_a_case_twin_does_not_truncate_a_search(tmp_path: Path, with_store: bool) -> None:
    """The reviewer's al_trunc: Alice's 22 memories among 220 found 1 of limit 10 (and 4 of
    40). The search is widened (x4, at most 400 hits) until the limit is met or the
    matches run out."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        _twins(store, 220)
        al = _aliases(root, store, with_store)
        alices = {f"m{i:05d}" for i in range(0, 220, 10)}
        ten = al["search_memories"](query="weather tea", filters={"user_id": "Alice"}, limit=10)
        assert len(ten["results"]) == 10 and {r["id"] for r in ten["results"]} <= alices
        forty = al["search_memories"](query="weather tea", filters={"user_id": "Alice"}, limit=40)
        assert {r["id"] for r in forty["results"]} == alices  # all 22: the matches ran out


def test_listing_a_label_without_a_twin_is_md_cgs_own_page(tmp_path: Path) -> None:
    """get_memories paged through every memory of the label (7.9 s for 18k): with the store
    it learns in-process whether a label has a case twin; without one, md-cg's listing is
    exact and one page is one `list` call; with one, only the pages holding the label's
    own memories are read, and the replies are those of the exact check page by page."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        _twins(store, 500)
        store.add(Node(id="solo", body="bob likes tea", tags=["user:bob"]))
        assert (
            twinned(store, ["user:alice"]),
            twinned(store, ["user:bob"]),
            twinned(None, ["user:bob"]),
        ) == (
            True,
            False,
            True,
        )
        calls: list[tuple[str, dict[str, Any]]] = []
        fast = _aliases(root, store, True, calls)
        slow = _aliases(root, store, False)
        bob = fast["get_memories"](filters={"user_id": "bob"})
        assert (bob["total"], [i["id"] for i in bob["items"]]) == (1, ["solo"])
        assert calls == [("list", {"tag": "user:bob", "limit": 10, "offset": 0})]
        for user in ("alice", "Alice"):
            for page in (1, 2, 7, 46):
                calls.clear()
                args = {"filters": {"user_id": user}, "page": page, "page_size": 10}
                got = fast["get_memories"](**args)
                assert got == slow["get_memories"](**args)
                assert len(calls) <= 10 and {name for name, _ in calls} <= {"list"}
        alice = fast["get_memories"](filters={"user_id": "Alice"}, page_size=100)
        assert (alice["total"], {i["id"] for i in alice["items"]}) == (
            50,
            {f"m{i:05d}" for i in range(0, 500, 10)},
        )


@WITH_STORE
def test_the_same_text_is_one_memory_as_md_cg_compares_bodies(tmp_path: Path, with_store: bool) -> None:
    """The reviewer's al_dup: " I like green tea." and "\\tI like green tea." became new
    memories beside "I like green tea." for the same user, while `remember` takes
    leading space as the same text; and an add without labels answered with alice's
    memory, so nothing unlabelled was stored."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        al = _aliases(root, store, with_store)
        first = al["add_memory"](text="I like green tea.", user_id="alice")
        assert first["id"] == labelled_id("I like green tea.", ["user:alice"]) and "existing" not in first
        for text in (
            " I like green tea.",
            "\tI like green tea.",
            "I like green tea.\r\n\n",
            "  I like green tea.  ",
        ):
            again = al["add_memory"](text=text, user_id="alice")
            assert (again["id"], again["existing"]) == (first["id"], True)
        plain = al["add_memory"](text="I like green tea.")
        assert plain["id"] == labelled_id("I like green tea.", []) and "existing" not in plain
        assert store.get(plain["id"]).tags == []
        assert (al["add_memory"](text=" I like green tea.")["id"], len(store.ids())) == (plain["id"], 2)
        quiet = al["add_memory"](text="it is what it is")  # stop words only
        assert (
            al["add_memory"](text="it is what it is\n")["id"],
            al["add_memory"](text="it is what it is")["existing"],
        ) == (
            quiet["id"],
            True,
        )


def test_an_unlabelled_add_finds_the_memory_remember_stored(tmp_path: Path) -> None:
    """An add without labels is md-cg's `remember` of the text: the memory it stored is the
    one found (it carries no label), never one carrying a label."""
    root = tmp_path / "m"
    with MdCG(root) as store:
        tools = dict(create_server(root, store=store).tools)
        al = {n: a.fn for n, a in alias_tools(tools, store=store).available.items()}
        kept = tools["remember"](body="The office closes at six")
        found = al["add_memory"](text="  The office closes at six")
        assert (found["id"], found["existing"]) == (kept["id"], True)
        other = al["add_memory"](text="The office closes at six", user_id="carol")
        assert "existing" not in other
        assert al["add_memory"](text="The office closes at six")["id"] == kept["id"]
