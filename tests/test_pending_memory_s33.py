"""Session 33: a process that only writes keeps a bounded amount of text (review r1 #3).

``IndexState.put`` leaves new text in ``pending_text`` until the first search or
snapshot tokenises it, so a writer that never searches (a migration, a server
that only remembers) kept every body it wrote: ``add_many`` of 10 x 3.5 MB
bodies per batch grew RSS 98 -> 311 MB over 8 batches, all of it pending text
(tracemalloc). Past ``PENDING_TEXT_CHARS`` the pending texts are now indexed
in ``put``. These tests pin the bound, the count kept through replace and
drop, that nothing else holds the bodies, and that an early flush finds
exactly what a late one does.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg import index as ix


def _pending(store: MdCG) -> int:
    """Characters of the texts waiting to be indexed, counted from the texts themselves."""
    return sum(len(t[0]) for t in store._engine.state.pending_text.values())


def _batch(b: int, n: int, chars: int) -> list[Node]:
    return [
        Node(id=f"e{b}_{i}", layer="knowledge", tags=["domain:bulk"], body=(f"word{b}x{i} " * chars)[:chars])
        for i in range(n)
    ]


def test_pending_text_stays_under_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ix, "PENDING_TEXT_CHARS", 100_000, raising=False)
    seen = []
    with MdCG(tmp_path / "s", auto_compact=None) as store:
        for b in range(8):
            store.add_many(_batch(b, 10, 30_000), stamp=False)
            seen.append(_pending(store))
            assert seen[-1] <= 100_000, seen
            assert store._engine.state.pending_chars == seen[-1]
        # 8 batches x 10 x ~30k characters (with tags and date) = ~2.4M written; the
        # texts wait in groups of at most 4 (a fourth passes 100k and flushes)
        assert len(store._engine.state.text) + len(store._engine.state.pending_text) == 80
        assert [r.id for r in store.search("word7x3", k=1, record=False)[0]] == ["e7_3"]


def test_the_real_budget_bounds_a_writer_of_big_bodies(tmp_path: Path) -> None:
    """The module constant itself: 12 bodies of 3.5 MB (42M characters) never wait all at once."""
    assert ix.PENDING_TEXT_CHARS == 32_000_000
    with MdCG(tmp_path / "s", auto_compact=None) as store:
        peak = 0
        for b in range(4):
            store.add_many(_batch(b, 3, 3_500_000), stamp=False)
            peak = max(peak, _pending(store))
        assert peak <= ix.PENDING_TEXT_CHARS
        assert store._engine.state.pending_chars == _pending(store)
        assert _pending(store) < 42_000_000


def test_count_follows_replace_drop_and_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ix, "PENDING_TEXT_CHARS", 10**12, raising=False)
    with MdCG(tmp_path / "s", auto_compact=None) as store:
        state = store._engine.state
        store.add(Node(id="a", layer="knowledge", body="x" * 1000), stamp=False)
        store.add(Node(id="b", layer="knowledge", body="y" * 500), stamp=False)
        assert state.pending_chars == _pending(store)
        first = state.pending_chars
        store.update("a", body="x" * 200)  # replaced while waiting: counted once
        assert state.pending_chars == _pending(store) == first - 800
        state.drop("b")  # (what a forget or a hand deletion does to the index)
        assert state.pending_chars == _pending(store) == first - 1300
        assert set(state.pending_text) == {"a"}
        state.flush_text()
        assert (state.pending_chars, state.pending_text) == (0, {})


def test_nothing_else_keeps_the_bodies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Traced memory after writing 12M characters stays near the budget (journal, notes, caches)."""
    monkeypatch.setattr(ix, "PENDING_TEXT_CHARS", 1_000_000, raising=False)
    with MdCG(tmp_path / "s", auto_compact=None) as store:
        store.add_many(_batch(99, 2, 1000), stamp=False)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for b in range(12):
                store.add_many(_batch(b, 10, 100_000), stamp=False)
            grown = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
    assert grown < 4_000_000, grown  # 12.4 MB before the bound, 1.8 MB with it


def _workload(store: MdCG) -> None:
    for b in range(6):
        store.add_many(
            [
                Node(
                    id=f"n{b}_{i}",
                    layer="knowledge" if i % 3 else "contextual",
                    tags=[f"domain:d{i % 4}"],
                    body=f"note {b} {i} about topic{i % 7} and alpha{b} 记忆检索{i % 5} " * (40 + i),
                )
                for i in range(12)
            ],
            stamp=False,
        )
        store.update(f"n{b}_0", body=f"rewritten topic3 beta{b} 图谱")
        if b:  # replaced after an early flush: a dead slot in the text index
            again = Node(id=f"n{b - 1}_5", layer="knowledge", body=f"replaced topic6 gamma{b}")
            store.add(again, overwrite=True)


QUERIES = ["topic3", "alpha2 note", "记忆检索", "beta4 图谱", "topic6 alpha5", "d2", "note 3 7"]


def test_early_flushes_find_what_one_late_flush_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = {}
    for name, budget in (("late", 10**12), ("early", 3_000)):
        monkeypatch.setattr(ix, "PENDING_TEXT_CHARS", budget, raising=False)
        with MdCG(tmp_path / name, auto_compact=None) as store:
            _workload(store)
            if name == "late":
                assert len(store._engine.state.text) == 0  # nothing indexed before the search
            else:
                assert len(store._engine.state.text) > 0
            found[name] = [
                [(r.id, round(r.score, 9)) for r in store.search(q, k=20, record=False)[0]] for q in QUERIES
            ]
    assert found["early"] == found["late"]
    assert all(found["late"])
