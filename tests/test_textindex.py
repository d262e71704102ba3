"""TextIndex: BM25 scores, ordering, scopes, updates, similarity fallback, snapshots."""

from __future__ import annotations

import json
import math
import random
import struct
import zlib

import pytest

from md_cg import textindex, textindex_docs, textindex_postings
from md_cg.text import Analyzer, analyze, query_terms
from md_cg.textindex import Feedback, TextIndex


def q(*terms: str, w: float = 1.0) -> list[tuple[str, float]]:
    return [(t, w) for t in terms]


@pytest.fixture
def three() -> TextIndex:
    """The hand-computed corpus: N = 3, avgdl = 3 (plain BM25, no coordination)."""
    ix = TextIndex(k1=1.2, b=0.75, coordination=(0.0, 0.0), feedback=Feedback(weight=0.0))
    ix.add("d1", ["a", "b", "a"], layer=0, bucket=0)
    ix.add("d2", ["b", "c"], layer=0, bucket=1)
    ix.add("d3", ["c", "c", "c", "d"], layer=1, bucket=1)
    return ix


# Hand-computed with k1 = 1.2, b = 0.75:
#   idf(a) = ln(1 + (3 - 1 + .5) / (1 + .5)) = ln(8/3);  idf(c) = ln(1 + 1.5 / 2.5) = ln(1.6)
#   d1: tf(a) = 2, dl = 3 -> 2 * 2.2 / (2 + 1.2 * (.25 + .75 * 3/3)) = 4.4 / 3.2
#   d2: tf(c) = 1, dl = 2 -> 1 * 2.2 / (1 + 1.2 * (.25 + .75 * 2/3)) = 2.2 / 1.9
#   d3: tf(c) = 3, dl = 4 -> 3 * 2.2 / (3 + 1.2 * (.25 + .75 * 4/3)) = 6.6 / 4.5
D1 = math.log(8 / 3) * 4.4 / 3.2
D2 = math.log(1.6) * 2.2 / 1.9
D3 = math.log(1.6) * 6.6 / 4.5


def test_bm25_matches_the_hand_computed_scores(three):
    got = three.match(q("a", "c"), three.scope(), k=None)
    assert [d for d, _ in got] == ["d1", "d3", "d2"]
    assert [s for _, s in got] == pytest.approx([D1, D3, D2], rel=1e-12)


def test_weights_multiply_and_repeats_add(three):
    got = dict(three.match([("a", 2.0), ("c", 1.0)], three.scope(), k=None))
    assert got["d1"] == pytest.approx(2 * D1, rel=1e-12)
    assert got["d3"] == pytest.approx(D3, rel=1e-12)
    again = dict(three.match([("a", 1.0), ("a", 1.0), ("c", 1.0)], three.scope(), k=None))
    assert again == pytest.approx(got, rel=1e-12)


def test_unknown_and_non_positive_terms_are_ignored(three):
    assert three.match(q("zzz"), three.scope(), k=10) == []
    assert three.match([("a", 0.0), ("c", -1.0)], three.scope(), k=10) == []
    assert three.match([], three.scope(), k=10) == []
    assert three.match(q("a", "zzz"), three.scope(), k=10) == [("d1", pytest.approx(D1))]


def test_k_cuts_after_ranking(three):
    assert [d for d, _ in three.match(q("a", "c"), three.scope(), k=2)] == ["d1", "d3"]
    assert three.match(q("a", "c"), three.scope(), k=0) == []


def test_every_candidate_is_scored_before_the_cut():
    ix = TextIndex()
    for i in range(500):
        ix.add(f"n{i:03d}", ["common", "filler", "words"], layer=0, bucket=0, prior=1.0)
    ix.add("z-rare", ["common", "rare"], layer=0, bucket=0, prior=0.0)
    assert ix.match(q("rare", "common"), ix.scope(), k=1)[0][0] == "z-rare"


def test_ties_break_by_prior_then_id():
    ix = TextIndex()
    for doc_id, prior in [("b", 0.5), ("c", 0.9), ("a", 0.5), ("e", 0.1), ("d", 0.5)]:
        ix.add(doc_id, ["x", "y"], layer=0, bucket=0, prior=prior)
    full = ix.match(q("x"), ix.scope(), k=None)
    assert [d for d, _ in full] == ["c", "a", "b", "d", "e"]
    assert len({s for _, s in full}) == 1
    assert [d for d, _ in ix.match(q("x"), ix.scope(), k=2)] == ["c", "a"]
    assert [d for d, _ in ix.match(q("x"), ix.scope(), k=3)] == ["c", "a", "b"]


@pytest.mark.parametrize("python_ties", [2048, 4])
def test_large_tie_group_is_cut_by_id(monkeypatch, python_ties):
    monkeypatch.setattr(textindex_docs, "_TIE_PYTHON", python_ties)
    ix = TextIndex()
    ids = [f"id{i:04d}" for i in range(300)]
    for doc_id in random.Random(5).sample(ids, len(ids)):
        ix.add(doc_id, ["t"], layer=0, bucket=0)
    assert [d for d, _ in ix.match(q("t"), ix.scope(), k=5)] == ids[:5]
    assert [d for d, _ in ix.match(q("t"), ix.scope(), k=None)] == ids
    assert [d for d, _ in ix.similar("t", ix.scope(), k=4)] == ids[:4]
    assert [d for d, _ in ix.similar("zzz", ix.scope(), k=3)] == ids[:3]
    # the id order follows later adds and removals (and the compaction they cause)
    ix.add("a-first", ["t"], layer=0, bucket=0)
    assert [d for d, _ in ix.match(q("t"), ix.scope(), k=2)] == ["a-first", ids[0]]
    for doc_id in ids[:200]:
        ix.remove(doc_id)
    monkeypatch.setattr(textindex, "_COMPACT_MIN_DEAD", 10)
    assert [d for d, _ in ix.similar("zzz", ix.scope(), k=3)] == ["a-first", *ids[200:202]]
    ix.add("0-new", [], layer=0, bucket=0)
    assert [d for d, _ in ix.similar("zzz", ix.scope(), k=2)] == ["0-new", "a-first"]


def test_scope_by_layer_and_bucket(three):
    assert [d for d, _ in three.match(q("c"), three.scope(layers=[1]), k=None)] == ["d3"]
    assert [d for d, _ in three.match(q("b"), three.scope(buckets=[1]), k=None)] == ["d2"]
    assert three.match(q("b"), three.scope(layers=[1], buckets=[0]), k=None) == []
    assert three.size(three.scope()) == 3
    assert three.size(three.scope(layers=[0])) == 2
    assert three.size(three.scope(layers=[0], buckets=[1])) == 1
    assert three.size(three.scope(layers=[], buckets=None)) == 0
    assert three.size(three.scope(buckets=[0, 1])) == 3


def test_idf_is_over_all_live_documents_not_the_scope(three):
    scoped = dict(three.match(q("c"), three.scope(buckets=[1], layers=[0]), k=None))
    assert scoped == {"d2": pytest.approx(D2, rel=1e-12)}


def test_scope_created_earlier_sees_later_changes(three):
    scope = three.scope(buckets=[2])
    assert three.size(scope) == 0
    three.add("d4", ["a"], layer=0, bucket=2)
    assert three.size(scope) == 1
    assert [d for d, _ in three.match(q("a"), scope, k=None)] == ["d4"]


def test_exclude(three):
    got = three.match(q("a", "c"), three.scope(), k=None, exclude={"d1", "nope"})
    assert [d for d, _ in got] == ["d3", "d2"]
    got = three.match(q("a", "c"), three.scope(), k=1, exclude=["d1"])
    assert [d for d, _ in got] == ["d3"]


def test_replace_and_remove(three):
    three.add("d1", ["z"], layer=0, bucket=0)
    assert len(three) == 3
    assert three.match(q("a"), three.scope(), k=None) == []
    assert [d for d, _ in three.match(q("z"), three.scope(), k=None)] == ["d1"]
    assert three.remove("d1") is True
    assert three.remove("d1") is False
    assert "d1" not in three and "d2" in three and len(three) == 2
    assert three.match(q("z"), three.scope(), k=None) == []
    assert "d1" not in dict(three.similar("z", three.scope(), k=10))


def test_set_meta_moves_a_document(three):
    three.set_meta("d1", bucket=1, prior=0.9)
    assert [d for d, _ in three.match(q("a"), three.scope(buckets=[1]), k=None)] == ["d1"]
    three.set_meta("d1", layer=5)
    assert three.size(three.scope(layers=[5])) == 1
    with pytest.raises(KeyError):
        three.set_meta("missing", bucket=1)


def test_removed_documents_leave_scores_as_if_never_added():
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(40)]
    docs = {f"doc{i}": [rng.choice(vocab) for _ in range(rng.randint(1, 12))] for i in range(60)}
    gone = set(rng.sample(sorted(docs), 25))
    ix = TextIndex()
    fresh = TextIndex()
    for doc_id, terms in docs.items():
        ix.add(doc_id, terms, layer=0, bucket=0)
        if doc_id not in gone:
            fresh.add(doc_id, terms, layer=0, bucket=0)
    for doc_id in sorted(gone):
        ix.remove(doc_id)
    for query in (["w1", "w2"], ["w3"], ["w5", "w7", "w11"]):
        assert ix.match(q(*query), ix.scope(), k=None) == fresh.match(q(*query), fresh.scope(), k=None)


def _reference(docs: dict[str, list[str]], query: list[str], k1: float, b: float, coordination: float = 0.5):
    """Straightforward BM25 in Python, times the coordination factor: the yardstick for the index.

    The factor is (idf of the query terms the document has / idf of the
    query terms the store has) ** ``coordination`` (non-CJK documents).
    """
    n = len(docs)
    avgdl = sum(map(len, docs.values())) / n
    idf = {}
    for t in set(query):
        df = sum(t in d for d in docs.values())
        if df:
            idf[t] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    out = {}
    for doc_id, terms in docs.items():
        score = matched = 0.0
        for t in idf:
            tf = terms.count(t)
            if tf:
                matched += idf[t]
                score += idf[t] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(terms) / avgdl))
        if score > 0:
            out[doc_id] = score * (matched / sum(idf.values())) ** coordination
    return out


@pytest.mark.parametrize("pending", [5, 64, 1 << 18])
def test_segments_merges_and_compaction_agree_with_a_reference(monkeypatch, pending):
    monkeypatch.setattr(textindex_postings, "PENDING_MAX", pending)
    monkeypatch.setattr(textindex, "_COMPACT_MIN_DEAD", 20)
    rng = random.Random(pending)
    vocab = [f"t{i}" for i in range(120)]
    ix = TextIndex()
    docs: dict[str, list[str]] = {}
    for step in range(900):
        doc_id = f"d{rng.randrange(400)}"
        if step % 7 == 3 and docs:
            victim = rng.choice(sorted(docs))
            assert ix.remove(victim)
            del docs[victim]
            continue
        terms = [rng.choice(vocab) for _ in range(rng.randint(0, 15))]
        ix.add(doc_id, terms, layer=0, bucket=0)
        docs[doc_id] = terms
        if step % 50 == 0:  # queries interleaved with writes
            ix.match(q("t1"), ix.scope(), k=3)
    assert len(ix) == len(docs)
    for query in (["t1"], ["t2", "t3"], ["t4", "t5", "t6", "t7"], ["t0", "t119"]):
        expected = _reference(docs, query, ix.k1, ix.b)
        got = ix.match(q(*query), ix.scope(), k=None)
        assert dict(got) == pytest.approx(expected, rel=1e-9)
        order = sorted(expected, key=lambda d: (-expected[d], d))
        assert [d for d, _ in got] == order


def test_similar_scores_a_typo():
    ix = TextIndex(analyzer=query_terms)
    for i, body in enumerate(["binary search in a sorted array", "linked lists", "heap sort"]):
        ix.add(f"n{i}", analyze(body), layer=0, bucket=0)
    got = ix.similar("binery", ix.scope(), k=5)
    assert [d for d, _ in got] == ["n0", "n1", "n2"]
    assert got[0][1] > 0 and got[1][1] == got[2][1] == 0.0
    # Dice of padded bigrams: "bineri" vs "binari" share 5 of 7 -> 5/7; idf of df 1 in 3 docs
    assert got[0][1] == pytest.approx(5 / 7 * math.log(1 + 2.5 / 1.5), rel=1e-12)


def test_similar_scores_a_cjk_term_no_document_contains():
    ix = TextIndex(analyzer=query_terms)
    ix.add("cat", analyze("我家的小猫很可爱"), layer=0, bucket=0, prior=0.1)
    ix.add("dog", analyze("狗在院子里"), layer=0, bucket=0, prior=0.2)
    ix.add("other", analyze("天气很好"), layer=0, bucket=0, prior=0.9)
    ix.add("both", analyze("猫和狗"), layer=0, bucket=0, prior=0.0)
    assert ix.match(q(*query_terms("猫狗")), ix.scope(), k=10) != []  # unigrams match
    assert ix.match(q("猫狗"), ix.scope(), k=10) == []  # the bigram itself is nowhere
    got = ix.similar("猫狗", ix.scope(), k=10)
    assert [d for d, _ in got] == ["both", "dog", "cat", "other"]
    idf1 = math.log(1 + (4 - 2 + 0.5) / (2 + 0.5))  # a character in 2 of 4 documents
    assert [s for _, s in got] == pytest.approx([2 * idf1, idf1, idf1, 0.0], rel=1e-12)


def test_similar_without_unigrams_uses_bigrams_containing_the_character():
    an = Analyzer(cjk_unigrams=False)
    ix = TextIndex(analyzer=an.query_terms)
    ix.add("cat", an.analyze("小猫"), layer=0, bucket=0)
    ix.add("sky", an.analyze("天空"), layer=0, bucket=0)
    got = ix.similar("猫", ix.scope(), k=10)
    assert [d for d, _ in got] == ["cat", "sky"]
    assert got[0][1] == pytest.approx(0.5 * math.log(1 + 1.5 / 1.5), rel=1e-12)


def test_similar_fills_to_k_and_respects_scope_and_exclude():
    ix = TextIndex(analyzer=query_terms)
    for i in range(6):
        ix.add(f"n{i}", analyze(f"note {i} about trees"), layer=i % 2, bucket=0, prior=i / 10)
    scope = ix.scope(layers=[0])  # n0, n2, n4
    assert [d for d, _ in ix.similar("zebra", scope, k=10)] == ["n4", "n2", "n0"]
    assert [d for d, _ in ix.similar("zebra", scope, k=2)] == ["n4", "n2"]
    assert [d for d, _ in ix.similar("zebra", scope, k=10, exclude={"n4"})] == ["n2", "n0"]
    assert ix.similar("zebra", ix.scope(layers=[7]), k=10) == []
    assert ix.similar("zebra", scope, k=0) == []
    assert len(ix.similar("", ix.scope(), k=4)) == 4


def test_similar_counts_documents_without_terms():
    ix = TextIndex()
    ix.add("empty", [], layer=0, bucket=0)
    assert ix.size(ix.scope()) == 1
    assert ix.similar("anything", ix.scope(), k=3) == [("empty", 0.0)]
    assert ix.match(q("anything"), ix.scope(), k=3) == []


def test_default_analyzer_stems_words():
    ix = TextIndex()
    ix.add("n", analyze("running binaries"), layer=0, bucket=0)
    assert ix.similar("binary", ix.scope(), k=1)[0][1] > 0


def test_empty_index():
    ix = TextIndex()
    assert len(ix) == 0 and "x" not in ix
    assert ix.size(ix.scope()) == 0
    assert ix.match(q("a"), ix.scope(), k=10) == []
    assert ix.similar("a", ix.scope(), k=10) == []
    again = TextIndex.from_bytes(ix.to_bytes())
    assert len(again) == 0 and again.similar("a", again.scope(), k=3) == []


def test_invalid_input():
    ix = TextIndex()
    with pytest.raises(ValueError):
        ix.add("a\x00b", ["x"], layer=0, bucket=0)
    with pytest.raises(ValueError):
        ix.add(None, ["x"], layer=0, bucket=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ix.add("ok", ["bad\x00term"], layer=0, bucket=0)
    assert "ok" not in ix
    with pytest.raises(ValueError):
        TextIndex(k1=-1)
    with pytest.raises(ValueError):
        TextIndex(b=1.5)


def _corpus() -> TextIndex:
    ix = TextIndex(analyzer=query_terms)
    rng = random.Random(11)
    words = [
        "binary",
        "search",
        "tree",
        "sorted",
        "array",
        "heap",
        "graph",
        "node",
        "memory",
        "二分查找",
        "有序数组",
        "图",
        "节点",
    ]
    for i in range(300):
        body = " ".join(rng.choice(words) for _ in range(rng.randint(1, 9)))
        ix.add(f"n{i:03d}", analyze(body), layer=i % 3, bucket=i % 5, prior=rng.random())
    for i in range(0, 300, 4):
        ix.remove(f"n{i:03d}")
    return ix


QUERIES = ["binary tree", "有序数组", "memory graph node", "二分", "binery sarch", "图"]


def test_round_trip_gives_equal_results():
    ix = _corpus()
    before = {
        query: (
            ix.match(q(*query_terms(query)), ix.scope(), k=None),
            ix.match(q(*query_terms(query)), ix.scope(layers=[1], buckets=[2, 3]), k=5),
            ix.similar(query, ix.scope(buckets=[4]), k=7, exclude={"n001"}),
        )
        for query in QUERIES
    }
    blob = ix.to_bytes()
    loaded = TextIndex.from_bytes(blob, analyzer=query_terms)
    assert len(loaded) == len(ix) == 225
    assert (loaded.k1, loaded.b) == (ix.k1, ix.b)
    for query, (full, scoped, sim) in before.items():
        assert loaded.match(q(*query_terms(query)), loaded.scope(), k=None) == full
        scope = loaded.scope(layers=[1], buckets=[2, 3])
        assert loaded.match(q(*query_terms(query)), scope, k=5) == scoped
        assert loaded.similar(query, loaded.scope(buckets=[4]), k=7, exclude={"n001"}) == sim
    assert loaded.to_bytes() == blob
    loaded.add("new", analyze("binary binary"), layer=0, bucket=0)
    assert loaded.match(q("binari"), loaded.scope(), k=1)[0][0] == "new"


def test_corrupt_bytes_raise_value_error():
    blob = _corpus().to_bytes()
    for bad in (b"", b"MDCGTIX1", blob[:-1], blob[: len(blob) // 2], b"X" + blob[1:]):
        with pytest.raises(ValueError):
            TextIndex.from_bytes(bad)
    flipped = bytearray(blob)
    flipped[len(blob) // 2] ^= 0x40
    with pytest.raises(ValueError):
        TextIndex.from_bytes(bytes(flipped))


def _reseal(blob: bytes, edit) -> bytes:
    """Rewrite the JSON header with ``edit`` and a valid checksum."""
    (head_len,) = struct.unpack_from("<I", blob, 8)
    header = json.loads(blob[12 : 12 + head_len])
    edit(header)
    head = json.dumps(header).encode().ljust(head_len)
    assert len(head) == head_len
    body = blob[:12] + head + blob[12 + head_len : -4]
    return body + struct.pack("<I", zlib.crc32(body))


def test_structurally_wrong_images_raise_value_error():
    blob = _corpus().to_bytes()
    assert TextIndex.from_bytes(_reseal(blob, lambda h: None))  # the helper itself is sound

    def fewer_docs(h):
        h["n_docs"] -= 1

    def more_terms(h):
        h["n_terms"] += 5

    def no_segments(h):
        h["n_segments"] = 0

    def bad_dtype(h):
        h["arrays"][0][0] = "|O"

    def swap_dtypes(h):
        h["arrays"][0][0] = "<i8"

    for edit in (fewer_docs, more_terms, no_segments, bad_dtype, swap_dtypes):
        with pytest.raises(ValueError):
            TextIndex.from_bytes(_reseal(blob, edit))


def test_similar_uses_known_words_exactly_and_caps_fuzzy_candidates(monkeypatch):
    ix = TextIndex(analyzer=query_terms)
    ix.add("exact", analyze("binary"), layer=0, bucket=0)
    ix.add("near", analyze("binar"), layer=0, bucket=0)
    ix.add("far", analyze("binomial"), layer=0, bucket=0)
    # a known word stands for itself only
    got = ix.similar("binary", ix.scope(), k=3)
    assert [d for d, _ in got] == ["exact", "far", "near"]
    assert [s for _, s in got][1:] == [0.0, 0.0]
    # an unknown word brings its similar terms; the cap keeps the most similar
    assert [d for d, s in ix.similar("binarx", ix.scope(), k=3) if s > 0] == ["near", "exact"]
    monkeypatch.setattr(textindex, "SIMILAR_CANDIDATES", 1)
    assert [d for d, s in ix.similar("binarx", ix.scope(), k=3) if s > 0] == ["near"]


@pytest.mark.parametrize("sample_from", [None, 16], ids=["default", "sampled-floors"])
def test_pruned_top_k_equals_exhaustive_scoring(
    monkeypatch, top_k_answers: list[bool], sample_from: int | None
) -> None:
    """MaxScore pruning of common terms returns exactly the exhaustive top k (also
    when every k-th best of 16 or more scores is found from a sampled floor)."""
    import random

    from md_cg import textindex as ti_mod

    if sample_from is not None:
        monkeypatch.setattr(textindex_docs, "_SAMPLE_FROM", sample_from)
        monkeypatch.setattr(textindex_docs, "_SAMPLE_STEP", 3)

    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(300)]
    weights = [1.0 / (i + 1) for i in range(300)]  # Zipf: a few terms in most documents
    index = ti_mod.TextIndex()
    for d in range(3000):
        terms = rng.choices(vocab, weights=weights, k=rng.randint(5, 30))
        index.add(f"d{d:04d}", terms, layer=d % 3, bucket=d % 7, prior=rng.random())
    for d in range(0, 3000, 17):
        index.remove(f"d{d:04d}")  # dead slots too
    scopes = [index.scope(), index.scope(layers=[0, 1]), index.scope(buckets=[2, 3, 4])]
    used = top_k_answers
    for _ in range(150):
        query = [(t, rng.choice([1.0, 0.6])) for t in rng.sample(vocab[:60], rng.randint(2, 8))]
        scope = rng.choice(scopes)
        exclude = {f"d{rng.randrange(3000):04d}" for _ in range(rng.randint(0, 5))}
        k = rng.choice([1, 5, 10, 25])
        monkeypatch.setattr(ti_mod, "_PRUNE_MIN_POSTINGS", 0)
        pruned = index.match(query, scope, k=k, exclude=exclude)
        monkeypatch.setattr(ti_mod, "_PRUNE_MIN_POSTINGS", 10**12)
        full = index.match(query, scope, k=k, exclude=exclude)
        assert [i for i, _ in pruned] == [i for i, _ in full]
        assert [s for _, s in pruned] == pytest.approx([s for _, s in full], rel=1e-12)
    assert sum(used) >= 75  # the pruned path answered at least half of the 150 queries


# -- a store in two languages -----------------------------------------------------------

ENGLISH = [
    "the atlas deadline moved to march",
    "atlas review notes and deadline risks",
    "coffee with oat milk every morning",
    "the deadline for the tax return is april",
    "morning standup with the platform team",
    "atlas atlas launch checklist",
]
CHINESE = [
    "红烧肉最后大火收汁",
    "项目截止日期前冻结接口",
    "龙井茶用八十度的水冲泡",
    "全角标点用于中文用户界面",
    "截止日期之前提交报告 deadline",
    "二分查找要求数组有序",
]


def _index(*texts: list[str]) -> TextIndex:
    ix = TextIndex(analyzer=query_terms)
    for group, docs in enumerate(texts):
        for i, text in enumerate(docs):
            ix.add(f"{'ez'[group]}{i}", analyze(text), layer=0, bucket=0)
    return ix


@pytest.mark.parametrize(
    ("query", "english"), [("atlas deadline", True), ("morning coffee", True), ("截止日期", False)]
)
def test_padding_with_another_language_leaves_scores_unchanged(query: str, english: bool) -> None:
    """Each document class is scored with its own statistics (N, df, average length)."""
    single = _index(ENGLISH) if english else _index([], CHINESE)
    mixed = _index(ENGLISH, CHINESE)
    terms = q(*query_terms(query))
    alone = single.match(terms, single.scope(), k=None)
    padded = [(d, s) for d, s in mixed.match(terms, mixed.scope(), k=None) if d in dict(alone)]
    assert mixed._docs.mixed and not single._docs.mixed
    assert alone  # the query does match something
    assert padded == alone  # bit-equal scores, same order


def test_a_term_takes_the_idf_of_the_class_that_holds_it() -> None:
    mixed = _index(ENGLISH, CHINESE)
    # "deadline" is in 3 English documents and 1 Chinese one: its idf is the English one,
    # in the Chinese document too (length compared with the Chinese average)
    scores = dict(mixed.match(q("deadlin"), mixed.scope(), k=None))
    assert set(scores) == {"e0", "e1", "e3", "z4"}
    n_en, df_en = 6, 3
    idf = math.log(1 + (n_en - df_en + 0.5) / (df_en + 0.5))
    k1, b = textindex.DEFAULT_K1, textindex.DEFAULT_B
    z4 = analyze(CHINESE[4])
    avg_zh = sum(len(analyze(t)) for t in CHINESE) / len(CHINESE)
    expected = idf * (k1 + 1) / (1 + k1 * (1 - b + b * len(z4) / avg_zh))
    assert scores["z4"] == pytest.approx(expected, rel=1e-12)
    e0 = analyze(ENGLISH[0])
    avg_en = sum(len(analyze(t)) for t in ENGLISH) / len(ENGLISH)
    expected = idf * (k1 + 1) / (1 + k1 * (1 - b + b * len(e0) / avg_en))
    assert scores["e0"] == pytest.approx(expected, rel=1e-12)


def test_the_class_of_a_document_is_the_script_of_most_of_its_terms() -> None:
    ix = TextIndex()
    ix.add("zh", ["红烧", "烧肉", "红", "烧", "肉", "pork"], layer=0, bucket=0)
    ix.add("en", ["pork", "belly", "红烧"], layer=0, bucket=0)
    ix.add("tie", ["pork", "红烧"], layer=0, bucket=0)
    ix.add("empty", [], layer=0, bucket=0)
    ix.add("gone", ["红烧", "烧肉"], layer=0, bucket=0)
    ix.remove("gone")  # removed before its postings were flushed: never counted
    ix.match(q("pork"), ix.scope(), k=1)  # documents are classified when their postings are flushed
    table = ix._docs
    assert [int(table.cjk[table.slot[d]]) for d in ("zh", "en", "tie", "empty")] == [1, 0, 0, 0]
    assert (table.n_cjk, table.len_cjk) == (1, 6)
    ix.remove("zh")
    assert (table.n_cjk, table.len_cjk, table.mixed) == (0, 0, False)


@pytest.mark.parametrize("dead", [False, True])
def test_pruned_top_k_equals_exhaustive_scoring_in_a_mixed_store(
    monkeypatch, top_k_answers: list[bool], dead: bool
) -> None:
    rng = random.Random(12)
    vocab = [f"w{i}" for i in range(150)] + [chr(0x4E00 + i) + chr(0x4E80 + i) for i in range(150)]
    weights = [1.0 / (i % 150 + 1) for i in range(300)]
    index = TextIndex()
    for d in range(3000):
        half = vocab[150:] if d % 3 == 0 else vocab[:150]
        terms = rng.choices(half, weights=weights[:150], k=rng.randint(5, 30)) + rng.choices(vocab, k=2)
        index.add(f"d{d:04d}", terms, layer=d % 3, bucket=d % 7, prior=rng.random())
    for d in range(0, 3000, 13) if dead else ():
        index.remove(f"d{d:04d}")
    index.match(q("w1"), index.scope(), k=1)
    assert index._docs.mixed and bool(index._docs.dead) is dead
    used = top_k_answers
    for _ in range(100):
        pool = vocab[:40] + vocab[150:190]
        query = [(t, rng.choice([1.0, 0.6, 0.05])) for t in rng.sample(pool, rng.randint(2, 8))]
        scope = rng.choice([index.scope(), index.scope(layers=[0, 2])])
        k = rng.choice([1, 5, 10])
        monkeypatch.setattr(textindex, "_PRUNE_MIN_POSTINGS", 0)
        pruned = index.match(query, scope, k=k)
        monkeypatch.setattr(textindex, "_PRUNE_MIN_POSTINGS", 10**12)
        full = index.match(query, scope, k=k)
        assert [i for i, _ in pruned] == [i for i, _ in full]
        assert [s for _, s in pruned] == pytest.approx([s for _, s in full], rel=1e-12)
    assert sum(used) >= 30


def test_an_image_keeps_the_classes_and_an_old_image_still_loads() -> None:
    from md_cg import textindex_codec as codec

    ix = _index(ENGLISH, CHINESE)
    ix.remove("e5")
    blob = ix.to_bytes()
    loaded = TextIndex.from_bytes(blob, analyzer=query_terms)
    header, arrays = codec.decode(blob)
    old = codec.encode({k: v for k, v in header.items() if k != "arrays"}, arrays[:-2])
    legacy = TextIndex.from_bytes(old, analyzer=query_terms)
    for query in ("atlas deadline", "截止日期", "deadline 截止"):
        expected = ix.match(q(*query_terms(query)), ix.scope(), k=None)
        assert loaded.match(q(*query_terms(query)), loaded.scope(), k=None) == expected
        assert legacy.match(q(*query_terms(query)), legacy.scope(), k=None) == expected
    assert bytes(legacy._vocab.cjk) == bytes(ix._vocab.cjk)
    assert legacy.to_bytes() == blob


# -- add_many: a batch gives the index one add() per document gives ----------------------


def _corpus_texts(n: int) -> list[str]:
    from md_cg.index import index_text
    from md_cg.sample import build_nodes

    return [index_text(node) for node in build_nodes(knowledge=n, seed=11)]


def _one_by_one(ids, texts, layers, buckets, priors) -> TextIndex:
    ix = TextIndex(analyzer=query_terms)
    for doc_id, t, la, bu, pr in zip(ids, texts, layers, buckets, priors, strict=True):
        ix.add(doc_id, analyze(t), layer=la, bucket=bu, prior=pr)
    return ix


def _batched(ids, texts, layers, buckets, priors, size: int) -> TextIndex:
    from md_cg.text import analyze_batch

    ix = TextIndex(analyzer=query_terms)
    for s in range(0, len(ids), size):
        cut = slice(s, s + size)
        meta = list(zip(layers[cut], buckets[cut], priors[cut], strict=True))
        ix.add_many(ids[cut], analyze_batch(texts[cut]), meta)
    return ix


@pytest.mark.parametrize(("pending", "size"), [(1 << 18, 1000), (300, 37), (5, 64), (1, 7)])
def test_add_many_equals_one_add_per_document(monkeypatch, pending, size):
    monkeypatch.setattr(textindex_postings, "PENDING_MAX", pending)
    texts = _corpus_texts(300)
    texts += ["", "猫", "only english words here", "二分查找 binary search", "", "the and of"]
    rng = random.Random(size)
    ids = [f"n{i:04d}" for i in range(len(texts))]
    ids += [ids[3], ids[40]]  # replaced within the batch stream
    texts += ["replacement 替换", "second replacement"]
    layers = [rng.randrange(7) for _ in ids]
    buckets = [rng.randrange(-1, 5) for _ in ids]
    priors = [rng.choice([0.5, 0.9, 0.1]) for _ in ids]
    one = _one_by_one(ids, texts, layers, buckets, priors)
    many = _batched(ids, texts, layers, buckets, priors, size)
    assert len(many._postings.segments) == len(one._postings.segments)
    for query in ("二分查找", "binary search", "替换", "知识点 实际应用", "replacement", "the"):
        terms = [(t, 1.0) for t in query_terms(query)]
        got = many.match(terms, many.scope(), k=None)
        assert got == one.match(terms, one.scope(), k=None)  # ids, order and scores
        assert many.match(terms, many.scope(layers=[1, 2]), k=5) == one.match(
            terms, one.scope(layers=[1, 2]), k=5
        )
        assert many.similar(query, many.scope(), k=5) == one.similar(query, one.scope(), k=5)
    assert many._vocab.terms == one._vocab.terms
    assert many.to_bytes() == one.to_bytes()


def test_add_many_checks_its_arguments():
    from md_cg.text import analyze_batch

    ix = TextIndex()
    with pytest.raises(ValueError, match="one term count"):
        ix.add_many(["a"], analyze_batch(["x", "y"]), [(0, 0, 0.5)])
    with pytest.raises(ValueError, match="without NUL"):
        ix.add_many(["a\x00"], analyze_batch(["x"]), [(0, 0, 0.5)])
    assert len(ix) == 0


def test_add_many_too_many_terms_for_one_key_adds_one_by_one(monkeypatch):
    from md_cg import text as text_mod
    from md_cg.text import analyze_batch

    texts = _corpus_texts(40)
    ids = [f"d{i}" for i in range(len(texts))]
    meta = [(0, 1, 0.5)] * len(ids)
    monkeypatch.setattr(textindex, "KEY_BITS", 62)  # every batch is "too large"
    ix = TextIndex(analyzer=query_terms)
    ix.add_many(ids, analyze_batch(texts), meta)
    ref = _one_by_one(ids, texts, [0] * len(ids), [1] * len(ids), [0.5] * len(ids))
    assert ix.to_bytes() == ref.to_bytes()
    assert text_mod.KEY_BITS == 42


def test_kth_largest_is_exact_with_ties_floors_and_sampled_floors(monkeypatch) -> None:
    import numpy as np

    rng = np.random.default_rng(5)
    arrays = [
        np.array([2.5]),
        rng.random(10),
        np.round(rng.random(8191) * 20) / 4,  # many ties
        np.round(rng.random(8192) * 20) / 4,
        rng.random(50_000),
        np.sort(rng.random(40_000)),  # sorted either way: the sample sees every 16th
        np.sort(rng.random(40_000))[::-1].copy(),
        np.full(9000, 1.25),
    ]
    for values in arrays:
        ordered = np.sort(values)[::-1]
        for k in sorted({1, min(10, len(values)), len(values)}):
            kth = float(ordered[k - 1])
            assert textindex_docs.kth_largest(values, k) == kth
            assert textindex_docs.kth_largest(values, k, kth) == kth  # a floor equal to the answer
            assert textindex_docs.kth_largest(values, k, kth - 1.0) == kth
            if kth < float(ordered[0]):
                above = float(np.min(values[values > kth]))
                assert textindex_docs.kth_largest(values, k, above) == -np.inf  # fewer than k reach it
    # a long array: no partition of all of it (a 100k partition takes ~0.9 ms here, this ~0.08)
    sizes: list[int] = []
    real = np.partition

    def spy(a, kth, *args, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(len(a))
        return real(a, kth, *args, **kwargs)

    monkeypatch.setattr(np, "partition", spy)
    values = rng.random(100_000)
    assert textindex_docs.kth_largest(values, 10) == float(np.sort(values)[-10])
    assert sizes[0] == 6250 and max(sizes[1:]) < 1000  # every 16th, then what reaches its 10th best
