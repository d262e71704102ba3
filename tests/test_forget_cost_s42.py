"""The text index's renumbering after a forget (session 42).

Every ``forget`` compacts (its scrub rewrites the snapshot without the forgotten words),
and that compaction renumbers the text index's slots over every posting of the store:
at 50k memories (7.9M postings) ~0.2 s of a forget's ~0.5 s of CPU. It went through an
int64 copy of every posting's slot, another int32 one, and an int64 copy of the live
mask to count each term's postings. Now the slot map is int32 (the postings' own type)
and the counts come from the dead postings alone: the same segment, less memory and time.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

from md_cg.textindex import TextIndex
from md_cg.textindex_postings import Segment


def _reference(seg: Segment, slot_map: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The renumbering as it was before session 42."""
    docs = slot_map.astype(np.int64)[seg.docs]
    live = docs >= 0
    counts = np.add.reduceat(live.astype(np.int64), seg.ptr[:-1])
    used = counts > 0
    ptr = np.zeros(int(np.count_nonzero(used)) + 1, dtype=np.int64)
    np.cumsum(counts[used], out=ptr[1:])
    return seg.terms[used], ptr, docs[live].astype(np.int32), seg.tfs[live]


def _segment(rng: np.random.Generator, n_docs: int, n_terms: int, per_doc: int) -> Segment:
    rows = {(int(t), d) for d in range(n_docs) for t in rng.integers(0, n_terms, per_doc)}
    terms, docs = map(np.array, zip(*sorted(rows), strict=True))
    tfs = rng.integers(1, 5, len(terms))
    return Segment.from_postings(terms.astype(np.int32), docs.astype(np.int32), tfs.astype(np.uint16))


def _slot_map(n: int, dead: set[int]) -> np.ndarray:
    out = np.full(n, -1, dtype=np.int32)
    live = [s for s in range(n) if s not in dead]
    out[live] = np.arange(len(live), dtype=np.int32)
    return out


def test_renumbered_is_the_segment_it_was() -> None:
    rng = np.random.default_rng(42)
    for n_docs, n_terms, dead in ((50, 30, {0}), (200, 500, {7, 8, 199}), (120, 40, set(range(0, 120, 3)))):
        seg = _segment(rng, n_docs, n_terms, 6)
        slot_map = _slot_map(n_docs, dead)
        got = seg.renumbered(slot_map)
        want = _reference(seg, slot_map)
        for a, b in zip((got.terms, got.ptr, got.docs, got.tfs), want, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        got.check(n_docs - len(dead), n_terms)


def test_forgetting_one_document_drops_its_terms_alone() -> None:
    index = TextIndex()
    for doc_id, terms in (("a", ["alpha", "beta", "unique_one"]), ("b", ["beta", "gamma"]), ("c", ["gamma"])):
        index.add(doc_id, terms, layer=0, bucket=-1)
    index.remove("a")
    index.compact()
    assert sorted(index._vocab.terms) == ["beta", "gamma"]
    assert index.doc_term_counts() == {"b": {"beta": 1, "gamma": 1}, "c": {"gamma": 1}}


def test_the_slot_map_is_int32_and_the_renumbering_lean() -> None:
    """Peak memory of renumbering 2M postings with one dead slot: under 14 bytes a posting
    (before: 22, an int64 slot per posting and an int64 copy of the live mask; now 12.5)."""
    index = TextIndex()
    for i in range(3):
        index.add(f"d{i}", ["x", "y"], layer=0, bucket=-1)
    index.remove("d1")
    slot_map = index._docs.compact()
    assert slot_map is not None and slot_map.dtype == np.int32
    n, p = 100_000, 2_000_000
    rng = np.random.default_rng(1)
    docs = np.sort(rng.integers(0, n, p)).astype(np.int32)
    ptr = np.arange(0, p + 1, 20, dtype=np.int64)
    seg = Segment(np.arange(len(ptr) - 1, dtype=np.int32), ptr, docs, np.ones(p, dtype=np.uint16))
    slot_map = _slot_map(n, {n // 2})
    tracemalloc.start()
    try:
        seg.renumbered(slot_map)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 14 * p, peak / p
