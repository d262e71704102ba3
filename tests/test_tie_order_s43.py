"""Exact score ties: importance first, then the most recently changed memory, then id (session 43).

Two contradicting facts stored a second apart without ``supersede`` ("The user
lives in Berlin." then "The user lives in Munich.") score the same for "where
does the user live": the text index ordered them by importance, then id, so the
one with the smaller id -- often the older -- came first. The time of the last
change (:attr:`md_cg.index.Entry.changed`) is now a column of the text index's
document table, between importance and id in :meth:`DocTable.ranked`'s order,
so the first ``k`` results are still the first ``k`` of a larger search.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import orjson
import pytest

from md_cg import MdCG, Node, snapshot
from md_cg.text import analyze, analyze_batch, query_terms
from md_cg.textindex import TextIndex, take_changed
from md_cg.textindex_docs import _TIE_PYTHON

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
QUERY = "where does the user live"


def _ids(store: MdCG, query: str = QUERY, k: int = 10) -> list[str]:
    return [r.id for r in store.search(query, k=k)[0]]


def _facts(root: Path) -> None:
    """fact-a (Berlin) at T0, fact-b (Munich) a second later: same terms, same score."""
    with MdCG(root, create=True) as store:
        store.add_many(
            [
                Node(id="fact-a", body="The user lives in Berlin.", created_at=T0, updated_at=T0),
                Node(id="fact-b", body="The user lives in Munich.", created_at=T0 + 1, updated_at=T0 + 1),
            ],
            stamp=False,
        )


# -- the text index -----------------------------------------------------------------------


def _tied_index(n: int, priors: list[float], changed: list[float], batch: bool = False) -> TextIndex:
    """``n`` documents of the same text (one score for any query), ids d0000.. in reverse
    of their order of addition, with the given priors and times of last change."""
    ix = TextIndex(analyzer=query_terms)
    ids = [f"d{n - 1 - i:04d}" for i in range(n)]
    if batch:
        meta = [(0, -1, priors[i], changed[i]) for i in range(n)]
        ix.add_many(ids, analyze_batch(["user lives city"] * n), meta)
    else:
        for i, doc_id in enumerate(ids):
            terms = analyze("user lives city")
            ix.add(doc_id, terms, layer=0, bucket=-1, prior=priors[i], changed=changed[i])
    return ix


def _expected(ix: TextIndex) -> list[str]:
    return sorted(ix.doc_ids(), key=lambda d: (-ix.doc_meta(d)[2], -ix.doc_changed(d), d))


def test_ties_order_by_prior_then_last_change_then_id() -> None:
    ix = TextIndex(analyzer=query_terms)
    terms = analyze("The user lives in the city")
    for doc_id, prior, changed in [
        ("a", 0.5, T0),  # oldest
        ("b", 0.5, T0 + 2),  # newest
        ("c", 0.5, T0 + 1),
        ("d", 0.9, T0),  # more important: first whatever its time
        ("e", 0.5, T0 + 1),  # the same time as c: by id
        ("f", 0.5, 0.0),  # no time
    ]:
        ix.add(doc_id, terms, layer=0, bucket=-1, prior=prior, changed=changed)
    scope = ix.scope()
    want = ["d", "b", "c", "e", "a", "f"]
    assert [d for d, _ in ix.match([("user", 1.0), ("live", 1.0)], scope, k=None)] == want
    assert [d for d, _ in ix.similar("user lives", scope, k=6)] == want
    # set_meta (a write that keeps the text) moves a document's time
    ix.set_meta("a", changed=T0 + 3)
    assert [d for d, _ in ix.match([("user", 1.0)], scope, k=3)] == ["d", "a", "b"]
    assert ix.doc_changed("a") == T0 + 3


@pytest.mark.parametrize("n", [40, _TIE_PYTHON + 300])
@pytest.mark.parametrize("batch", [False, True])
def test_first_k_are_the_first_k_of_a_larger_k(n: int, batch: bool) -> None:
    """For every k, the first k are a prefix of any larger k, with ties spanning each cut:
    runs of equal (score, prior), of equal (score, prior, changed), and one longer than
    _TIE_PYTHON (ordered through the id rank)."""
    priors = [(0.5, 0.9, 0.1)[i % 3] for i in range(n)]
    changed = [T0 + (i * 7) % 5 for i in range(n)]  # 5 distinct times: long runs of equal ones
    ix = _tied_index(n, priors, changed, batch)
    scope = ix.scope()
    query = [("user", 1.0), ("citi", 1.0)]
    full = [d for d, _ in ix.match(query, scope, k=None)]
    assert full == _expected(ix)
    ks = range(1, n + 1) if n < 100 else [1, 2, 7, 100, n // 3, n // 3 + 1, _TIE_PYTHON, n - 1, n]
    for k in ks:
        assert [d for d, _ in ix.match(query, scope, k=k)] == full[:k], k
        assert [d for d, _ in ix.similar("user city", scope, k=k)] == full[:k], k


def test_compaction_and_replacement_keep_the_times() -> None:
    ix = _tied_index(30, [0.5] * 30, [T0 + i for i in range(30)])
    for i in range(0, 30, 2):  # replaced: dead slots, then compacted by the next query
        ix.add(f"d{i:04d}", analyze("user lives city"), layer=0, bucket=-1, prior=0.5, changed=T0 - i)
    ix.compact()
    got = [d for d, _ in ix.match([("user", 1.0)], ix.scope(), k=None)]
    assert got == _expected(ix)
    assert got[:3] == ["d0001", "d0003", "d0005"]  # newest: d0001 was added last (T0 + 28)
    assert ix.doc_changed("d0001") == T0 + 28 and ix.doc_changed("d0004") == T0 - 4


def test_an_image_holds_no_times_a_snapshot_restores_them() -> None:
    """The text image is unchanged (8 arrays, read by earlier versions as before); the times
    come from the snapshot's rows (textindex.take_changed), by id whatever the order."""
    ix = _tied_index(5, [0.5] * 5, [T0 + i for i in range(5)])
    loaded = TextIndex.from_bytes(ix.to_bytes(), analyzer=query_terms)
    assert [loaded.doc_changed(d) for d in ["d0000", "d0004"]] == [0.0, 0.0]
    ids = ["d0004", "d0003", "d0002", "d0001", "d0000"]  # not the slot order
    take_changed(loaded, ids, {d: i for i, d in enumerate(ids)}, np.array([T0 + i for i in range(5)]))
    assert [d for d, _ in loaded.match([("user", 1.0)], loaded.scope(), k=None)] == ids[::-1]
    assert loaded.doc_changed("d0004") == T0


# -- the store ----------------------------------------------------------------------------


def test_the_most_recent_of_two_tied_facts_comes_first(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _facts(root)
    with MdCG(root) as store:
        results = store.search(QUERY, k=5)[0]
        score = results[0].score
        assert [(r.id, r.score) for r in results] == [("fact-b", score), ("fact-a", score)]
        # an update that keeps the text (its confidence) is a change: fact-a is now the newest
        store.update("fact-a", confidence=0.9)
        assert results[0].score == store.search(QUERY, k=5)[0][1].score
        assert _ids(store) == ["fact-a", "fact-b"]
        # importance still comes first
        store.update("fact-b", importance=0.9)
        assert _ids(store) == ["fact-b", "fact-a"]


def test_the_order_survives_snapshot_rebuild_and_sync(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _facts(root)
    with MdCG(root) as store:
        store.compact_index()  # writes the snapshot
    with MdCG(root) as store:
        assert store.loaded_from == "snapshot"
        assert _ids(store) == ["fact-b", "fact-a"]
        assert store._engine.state.text.doc_changed("fact-b") == T0 + 1
        assert store.health(deep=True).ok
    header = snapshot.read_header(str(root))
    assert header is not None  # the format is the one earlier versions read: version 12, same columns
    assert snapshot.VERSION == 12
    with MdCG(root) as store:
        store.rebuild_index()
        assert _ids(store) == ["fact-b", "fact-a"]
    # a hand edit making fact-a the newer one, taken in by sync
    path = next(root.rglob("fact-a.md"))
    text = path.read_text()
    assert 'updated_at: "2026-01-01T00:00:00.000000Z"' in text
    path.write_text(text.replace('updated_at: "2026-01-01T00:00:00', 'updated_at: "2026-01-01T00:00:05'))
    with MdCG(root) as store:
        store.sync()
        assert _ids(store) == ["fact-a", "fact-b"]


def test_deep_health_tells_a_wrong_time(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _facts(root)
    with MdCG(root) as store:
        store.search(QUERY)
        store._engine.state.text.set_meta("fact-a", changed=T0 + 9)
        findings = [(f.kind, f.node_id, f.detail) for f in store.health(deep=True).findings]
        assert findings == [
            (
                "text_drift",
                "fact-a",
                f"the text index differs from the file: time of last change {T0 + 9} instead of {T0}",
            )
        ]


def test_search_first_k_are_a_prefix_of_a_larger_k(tmp_path: Path) -> None:
    """Through MdCG.search: 24 memories of one text, importance in 3 values, times in 4
    (runs of equal times within equal importance), every k a prefix of k=24."""
    root = tmp_path / "m"
    nodes = []
    for i in range(24):
        when = T0 + (i * 5) % 4
        importance = (0.5, 0.8, 0.2)[i % 3]
        nodes.append(
            Node(
                id=f"n{23 - i:02d}",
                body="The user lives in the city.",
                importance=importance,
                created_at=when,
                updated_at=when,
            )
        )
    with MdCG(root, create=True) as store:
        store.add_many(nodes, stamp=False)
        want = [n.id for n in sorted(nodes, key=lambda n: (-(n.importance or 0), -(n.updated_at or 0), n.id))]
        full = _ids(store, k=24)
        assert full == want
        for k in range(1, 24):
            assert _ids(store, k=k) == full[:k], k


_WRITER = textwrap.dedent(
    """
    import sys
    from md_cg import MdCG, Node
    with MdCG(sys.argv[1]) as store:
        if sys.argv[2] == "update":
            store.update("fact-a", confidence=0.9)
        else:
            store.add(Node(id="fact-0", body="The user lives in Hamburg."))
    """
)


def test_another_process_changes_the_order_a_long_lived_handle_sees(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _facts(root)
    with MdCG(root) as store:
        assert _ids(store) == ["fact-b", "fact-a"]
        subprocess.run([sys.executable, "-c", _WRITER, str(root), "update"], check=True, timeout=120)
        store.refresh()  # follows the log
        assert _ids(store) == ["fact-a", "fact-b"]
        # a third fact, the smallest id, stored now by another process: first
        subprocess.run([sys.executable, "-c", _WRITER, str(root), "add"], check=True, timeout=120)
        store.refresh()
        assert _ids(store) == ["fact-0", "fact-a", "fact-b"]


def test_the_snapshot_bytes_do_not_hold_the_column(tmp_path: Path) -> None:
    """The snapshot is the same to the byte with or without the times in the text index: a
    snapshot the code before this wrote is one this code writes (and reads with the times,
    from the rows), and the code before reads this code's snapshots as its own."""
    root = tmp_path / "m"
    _facts(root)
    with MdCG(root) as store:
        state = store._engine.state
        state.flush_text()
        with_times = _unstamped(b"".join(snapshot.encode_parts(state, {"a": 0})))
        assert state.text.doc_changed("fact-b") == T0 + 1
        state.text._docs.changed[:] = 0.0
        assert _unstamped(b"".join(snapshot.encode_parts(state, {"a": 0}))) == with_times


def _unstamped(data: bytes) -> tuple[dict, bytes]:
    """A snapshot's header without the time it was written, and the rest."""
    magic, head, rest = data.split(b"\n", 2)
    header = orjson.loads(head)
    assert magic + b"\n" == snapshot.MAGIC and header.pop("created") > 0
    return header, rest
