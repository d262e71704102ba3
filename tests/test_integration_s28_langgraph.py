"""Review s28 (rev1) of the LangGraph store: a negative ``limit`` or ``offset`` of a
search or a namespace listing is refused naming the argument, and nothing of the batch
it is in is written.

Skipped when the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import ListNamespacesOp, PutOp, SearchOp

from md_cg.errors import InvalidArgumentError
from md_cg.integrations.langgraph_store import MdCGStore

NS = ("memories", "alice")


def _store(root: Path) -> MdCGStore:
    store = MdCGStore(root)
    for i in range(3):
        store.put(NS, f"k{i}", {"text": f"item {i} about coffee"})
    return store


def test_a_negative_limit_or_offset_is_refused_naming_it(tmp_path: Path) -> None:
    """The reviewer's langgraph_probe: search(limit=-1) silently returned [] and
    offset=-5 was taken as 0. Now each is a ValueError (md-cg's InvalidArgumentError)
    naming the argument and the value, in search and list_namespaces alike."""
    store = _store(tmp_path / "s")
    cases = [
        (
            lambda: store.search(NS, limit=-1),
            "search limit must be a whole number of at least 0, got -1",
            "limit",
        ),
        (
            lambda: store.search(NS, offset=-5),
            "search offset must be a whole number of at least 0, got -5",
            "offset",
        ),
        (
            lambda: store.search(NS, query="coffee", limit=2, offset=-1),
            "search offset must be a whole number of at least 0, got -1",
            "offset",
        ),
        (
            lambda: store.list_namespaces(limit=-1),
            "list_namespaces limit must be a whole number of at least 0, got -1",
            "limit",
        ),
        (
            lambda: store.list_namespaces(offset=-2),
            "list_namespaces offset must be a whole number of at least 0, got -2",
            "offset",
        ),
    ]
    for call, message, name in cases:
        with pytest.raises(InvalidArgumentError) as info:
            call()
        assert str(info.value) == message
        assert info.value.name == name
        assert isinstance(info.value, ValueError)
    assert [i.key for i in store.search(NS, limit=0)] == []
    assert len(store.search(NS, limit=2, offset=1)) == 2
    assert len(store.search(NS, limit=10, offset=0)) == 3
    assert store.list_namespaces(limit=0) == []
    assert store.list_namespaces(offset=0) == [NS]


def test_a_batch_with_a_bad_page_writes_nothing(tmp_path: Path) -> None:
    """The check runs before any operation of the batch, so its puts are not stored."""
    store = _store(tmp_path / "s")
    for bad in (SearchOp(NS, limit=-1), ListNamespacesOp(offset=-1)):
        with pytest.raises(InvalidArgumentError):
            store.batch([PutOp(NS, "new", {"text": "not stored"}), bad])
        assert store.get(NS, "new") is None
