"""The ranking techniques kept by issue 17 (docs/ranking.md): each test fails if one is switched off."""

from __future__ import annotations

import math

import pytest

from md_cg.script import is_cjk
from md_cg.text import analyze, date_words, query_terms
from md_cg.textindex import DEFAULT_COORDINATION, DEFAULT_FEEDBACK, Feedback, TextIndex, _feedback_terms
from md_cg.textindex_phrase import PHRASE_BONUS, PHRASE_POOL, contains_phrase, phrase_key, title_rerank

OFF = Feedback(weight=0.0)


def q(*terms: str) -> list[tuple[str, float]]:
    return [(t, 1.0) for t in terms]


def _index(docs: dict[str, list[str]], **kw: object) -> TextIndex:
    kw.setdefault("feedback", OFF)
    ix = TextIndex(k1=1.2, b=0.75, **kw)  # type: ignore[arg-type]
    for doc_id, terms in docs.items():
        ix.add(doc_id, terms, layer=0, bucket=0)
    return ix


# N = 4, avgdl = 3. idf(a) = ln(1 + 3.5/1.5) = ln(10/3); idf(b) = ln(1 + 1.5/3.5) = ln(10/7).
DOCS = {"both": ["a", "b", "x"], "rep": ["b", "b", "b"], "one": ["b", "y", "z"], "zz": ["z", "y", "x"]}
IDF_A, IDF_B = math.log(10 / 3), math.log(10 / 7)


def _bm25(tf: int, dl: int, idf: float) -> float:
    return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / 3))


def test_defaults_are_the_cross_validated_exponents() -> None:
    assert DEFAULT_COORDINATION == (0.5, 1.0)
    assert TextIndex().coordination == (0.5, 1.0)


def test_coordination_scales_bm25_by_the_matched_share_of_idf() -> None:
    ix = _index(DOCS)  # non-CJK documents: exponent 0.5
    got = dict(ix.match(q("a", "b"), ix.scope(), k=None))
    share_b = IDF_B / (IDF_A + IDF_B)
    assert got["both"] == pytest.approx(_bm25(1, 3, IDF_A) + _bm25(1, 3, IDF_B), rel=1e-12)
    assert got["rep"] == pytest.approx(_bm25(3, 3, IDF_B) * math.sqrt(share_b), rel=1e-12)
    assert got["one"] == pytest.approx(_bm25(1, 3, IDF_B) * math.sqrt(share_b), rel=1e-12)
    plain = dict(_index(DOCS, coordination=(0.0, 0.0)).match(q("a", "b"), ix.scope(), k=None))
    assert plain["rep"] == pytest.approx(_bm25(3, 3, IDF_B), rel=1e-12)


def test_cjk_documents_use_their_own_exponent() -> None:
    cjk = {
        "both": ["甲乙", "丙丁", "戊"],
        "rep": ["丙丁", "丙丁", "丙丁"],
        "one": ["丙丁", "己", "庚"],
        "zz": ["庚", "己", "戊"],
    }
    ix = _index(cjk)
    got = dict(ix.match(q("甲乙", "丙丁"), ix.scope(), k=None))
    share = IDF_B / (IDF_A + IDF_B)
    assert got["rep"] == pytest.approx(_bm25(3, 3, IDF_B) * share, rel=1e-12)  # exponent 1


def test_a_query_that_is_not_cjk_uses_the_non_cjk_exponent_for_every_document() -> None:
    """Review (session 24): an English question put a Chinese note holding its rare name
    ("Cobalt API 的限流...") below English notes holding one common word of it, the CJK
    documents' exponent 1 cutting the Chinese note's score by its matched share."""
    docs = {
        "zh": ["cobalt", "限流", "每个", "分钟", "请求", "返回"],
        "en": ["cobalt", "owner", "team"],
        "road": ["limit", "speed", "road"],
        "zh2": ["甲乙", "丙丁", "戊"],
    }
    on, off = _index(docs), _index(docs, coordination=(0.0, 0.0))
    query = q("cobalt", "limit")
    factor = {
        d: s / dict(off.match(query, off.scope(), k=None))[d] for d, s in on.match(query, on.scope(), k=None)
    }
    assert factor["zh"] == pytest.approx(factor["en"], rel=1e-12)
    assert 0.5 < factor["en"] < 0.95  # the square root of the matched share, not the share itself
    # a CJK query keeps each class's own exponent: 1 for the Chinese documents
    cjk_query = q("甲乙", "戊", "请求")
    got_on = dict(on.match(cjk_query, on.scope(), k=None))
    got_off = dict(off.match(cjk_query, off.scope(), k=None))
    share_zh = got_on["zh"] / got_off["zh"]
    share_zh2 = got_on["zh2"] / got_off["zh2"]
    assert share_zh < share_zh2 < 1.0 and share_zh == pytest.approx(1 - share_zh2, rel=1e-9)


def test_a_document_with_more_of_the_query_beats_one_that_repeats_a_term() -> None:
    # "rep" repeats the rarer query word; "both" has each query word once.
    docs = {
        "both": ["atlas", "deadline", "note", "team"],
        "rep": ["atlas"] * 3,
        **{f"f{i}": ["deadline", "other", f"w{i}"] for i in range(3)},
        **{f"h{i}": ["misc", f"u{i}"] for i in range(6)},
    }
    on = _index(docs)
    off = _index(docs, coordination=(0.0, 0.0))
    assert [d for d, _ in off.match(q("atlas", "deadline"), off.scope(), k=2)] == ["rep", "both"]
    assert [d for d, _ in on.match(q("atlas", "deadline"), on.scope(), k=2)] == ["both", "rep"]


@pytest.mark.parametrize("bad", [(-0.1, 1.0), (1.0, math.nan), (1.0,), (5.0, 1.0)])
def test_bad_coordination_is_refused(bad: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="coordination needs two exponents"):
        TextIndex(coordination=bad)  # type: ignore[arg-type]


# -- date words ----------------------------------------------------------------------------

JUNE_8_2023 = 1686225600.0  # 2023-06-08 12:00 UTC


def test_date_words_are_day_month_year_in_utc() -> None:
    assert date_words(JUNE_8_2023) == "8 june 2023"
    assert date_words(JUNE_8_2023 - 12 * 3600 - 1) == "7 june 2023"  # UTC, not local time
    assert date_words(0.0) == "1 january 1970"
    assert analyze(date_words(JUNE_8_2023)) == ["8", "june", "2023"]


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, 1e300])
def test_date_words_of_no_date_are_empty(bad: float | None) -> None:
    assert date_words(bad) == ""


def test_a_question_naming_the_month_finds_that_months_memory() -> None:
    march = JUNE_8_2023 - 90 * 86400
    bodies = {
        "a": ("Melanie: camping again, camping", march),
        "b": ("Melanie: a camping trip with all the kids was fun", JUNE_8_2023),
    }
    bodies.update({f"f{i}": (f"Caroline: filler line {i}", march) for i in range(6)})
    with_dates, without = TextIndex(feedback=OFF), TextIndex(feedback=OFF)
    for doc_id, (body, when) in bodies.items():
        with_dates.add(doc_id, analyze(f"{body}\n{date_words(when)}"), layer=0, bucket=0)
        without.add(doc_id, analyze(body), layer=0, bucket=0)
    question = q(*query_terms("When did Melanie go camping in June?"))
    assert [d for d, _ in with_dates.match(question, with_dates.scope(), k=2)] == ["b", "a"]
    assert [d for d, _ in without.match(question, without.scope(), k=2)] == ["a", "b"]


def test_the_engine_indexes_the_date_words_of_created_at(tmp_path) -> None:
    from md_cg import MdCG, Node

    with MdCG(tmp_path / "s") as store:
        store.add_many(
            [
                Node(
                    id="spring",
                    layer="knowledge",
                    body="went camping by the lake",
                    created_at=JUNE_8_2023 - 90 * 86400,
                ),
                Node(id="summer", layer="knowledge", body="went camping by the lake", created_at=JUNE_8_2023),
            ],
            stamp=False,
        )
        results, _ = store.search("camping in june", k=2, judge=False, record=False)
    assert [r.id for r in results] == ["summer", "spring"]


# -- pseudo-relevance feedback -----------------------------------------------------------------

FEEDBACK_DOCS = {
    "q1": "caroline talked about the lgbtq support group meeting",
    "q2": "the support group meeting helped caroline with transition stories",
    "q3": "caroline said the lgbtq group gave her courage",
    # shares no query word, only words of the documents the query finds
    "answer": "transition stories gave courage",
    **{f"f{i}": f"melanie painted a lake sunrise number {i}" for i in range(12)},
    "zh": "支持 小组 会议 transition",
}


def _feedback_index(feedback: Feedback | None) -> TextIndex:
    ix = TextIndex(feedback=feedback)
    for doc_id, body in FEEDBACK_DOCS.items():
        ix.add(doc_id, analyze(body), layer=0, bucket=0)
    return ix


def test_feedback_finds_a_document_through_the_words_of_the_best_ones() -> None:
    question = q(*query_terms("What did Caroline say about the LGBTQ support group meeting?"))
    on, off = _feedback_index(None), _feedback_index(OFF)
    assert "answer" in [d for d, _ in on.match(question, on.scope(), k=5)]
    assert "answer" not in [d for d, _ in off.match(question, off.scope(), k=5)]
    assert [d for d, _ in on.match(question, on.scope(), k=3)] == ["q1", "q2", "q3"]
    # a lookup (organise's near-duplicate pool) asks for none: the same as the index without it
    assert on.match(question, on.scope(), k=5, feedback=False) == off.match(question, off.scope(), k=5)


def test_feedback_terms_are_of_the_query_script_and_weighted_as_rm3() -> None:
    ix = _feedback_index(None)
    ix._prepare()  # flush the pending adds, as match() does
    terms = query_terms("caroline lgbtq support group")
    tids = [ix._vocab[t] for t in terms]
    first = ix._ranked(tids, [1.0] * len(tids), ix.scope(), 3, ())
    expanded = _feedback_terms(ix, first, tids, [1.0] * len(tids))
    assert expanded is not None
    names = {ix._vocab.terms[t]: w for t, w in zip(*expanded, strict=True)}
    assert not any(is_cjk(t[0]) for t in names)  # 支持/小组 of the mixed document never come in
    assert set(terms) <= set(names) and "transit" in names
    # the query keeps 1 - weight of its total weight; the feedback terms share the rest
    assert sum(names.values()) == pytest.approx(len(terms))
    assert sum(names[t] for t in terms) >= 0.6 * len(terms)


def test_cjk_and_short_queries_take_no_feedback() -> None:
    on, off = _feedback_index(None), _feedback_index(OFF)
    for text in ("支持小组会议", "lgbtq group"):  # CJK; fewer than min_terms terms
        question = q(*query_terms(text))
        assert on.match(question, on.scope(), k=5) == off.match(question, off.scope(), k=5)
    assert Feedback(docs=5, terms=30, weight=0.4, min_terms=3, max_df=1.0) == DEFAULT_FEEDBACK


def test_feedback_is_the_same_after_removals_and_a_round_trip() -> None:
    ix = _feedback_index(None)
    for i in range(0, 12, 3):
        ix.remove(f"f{i}")
    ix.add("q2", analyze(FEEDBACK_DOCS["q2"] + " again"), layer=0, bucket=0)  # a dead slot too
    question = q(*query_terms("What did Caroline say about the LGBTQ support group meeting?"))
    before = ix.match(question, ix.scope(), k=6)
    loaded = TextIndex.from_bytes(ix.to_bytes())
    assert loaded.match(question, loaded.scope(), k=6) == before
    assert "answer" in [d for d, _ in before]


@pytest.mark.parametrize(
    "bad", [{"docs": 0}, {"terms": 0}, {"weight": 1.0}, {"weight": -0.1}, {"min_terms": 0}]
)
def test_bad_feedback_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="feedback needs"):
        Feedback(**bad)  # type: ignore[arg-type]


# ------------------------------------------------------------ title phrase


@pytest.mark.parametrize(
    ("title", "query", "expected"),
    [
        ("Function: type 2 diabetes, part 2", "type 2 diabetes, part 2", True),
        ("Function: type 2 diabetes, part 22", "type 2 diabetes, part 2", False),  # 2 is not 22
        ("Function: type 2 diabetes: history, part 2", "type 2 diabetes, part 2", False),
        ("功能名：二分查找·关键数值·第2篇", "二分查找·关键数值·第2篇", True),
        ("功能名：二分查找·关键数值·第22篇", "二分查找·关键数值·第2篇", False),
        ("功能名：红黑树·记忆要点·第14篇", "红黑树·第14篇", False),
        ("ＡＢＣ Trees", "abc trees", True),  # NFKC and case
        ("xabc trees", "abc trees", False),  # inside a word
        ("红黑树abc", "abc", True),  # a CJK neighbour is a boundary
        ("anything", "  ", False),
    ],
)
def test_contains_phrase_on_word_boundaries(title: str, query: str, expected: bool) -> None:
    assert contains_phrase(phrase_key(title), phrase_key(query)) is expected


FAMILY = [("f4", 9.0), ("f5", 8.9), ("f3", 8.8), ("exact", 8.7), ("other", 3.0)]
TITLES = {
    "f4": "type 2 diabetes: history, part 4",
    "f5": "type 2 diabetes, part 5",
    "f3": "type 2 diabetes: comparison, part 3",
    "exact": "Type 2 diabetes, part 2",
    "other": "part 2 of type 2 diabetes",
}


def test_title_rerank_multiplies_the_score_of_a_title_holding_the_query() -> None:
    got = title_rerank("type 2 diabetes, part 2", FAMILY, TITLES.__getitem__, 3)
    assert got == [("exact", 8.7 * PHRASE_BONUS), ("f4", 9.0), ("f5", 8.9)]
    assert PHRASE_BONUS == 2.0 and PHRASE_POOL == 20


def test_title_rerank_without_a_phrase_hit_keeps_the_ranking() -> None:
    hits = FAMILY[:3] + FAMILY[4:]
    assert title_rerank("type 2 diabetes, part 2", hits, TITLES.__getitem__, 3) == hits[:3]
    assert title_rerank("type 2 diabetes, part 2", FAMILY, TITLES.__getitem__, 3, bonus=1.0) == FAMILY[:3]


def test_the_engine_ranks_the_node_titled_with_the_name_first(tmp_path) -> None:
    """A family of nodes holding every word of the name more often than the one titled with it."""
    from md_cg import MdCG, Node

    family = [
        Node(
            id=f"n{i}",
            layer="knowledge",
            body=f"# type 2 diabetes: history, part {i}\n" + "type 2 diabetes notes, part 2. " * 2,
        )
        for i in range(3, 11)
    ]
    others = [
        Node(id=f"o{i}", layer="knowledge", body=f"# pasta recipe {i}\nboil water, add salt")
        for i in range(20)
    ]
    exact = Node(id="exact", layer="knowledge", body="# type 2 diabetes, part 2\ntype 2 diabetes notes.")
    with MdCG(tmp_path / "s") as store:
        store.add_many([*family, *others, exact], stamp=False)
        state = store._engine.state
        state.flush_text()
        terms = [(t, 1.0) for t in query_terms("type 2 diabetes, part 2")]
        plain = [d for d, _ in state.text.match(terms, state.text.scope(), k=PHRASE_POOL)]
        assert plain.index("exact") == 8  # BM25 alone: below the whole family
        results, _ = store.search("type 2 diabetes, part 2", k=3, judge=False, record=False)
    assert results[0].id == "exact"


def test_a_query_of_many_terms_is_ranked_on_its_rarest_ones() -> None:
    """Review (session 24): a pasted Chinese paragraph of 2,000 characters took 5 s at 100k
    nodes (one scoring pass per term); a query of more than MAX_QUERY_TERMS distinct terms
    is ranked on those of the highest weight x idf."""
    from md_cg.textindex import MAX_QUERY_TERMS

    docs = {f"d{i}": [f"w{j}" for j in range(i, i + 40)] + ["common"] * 3 for i in range(200)}
    docs["rare"] = ["w5", "w6", "rare1", "rare2"]
    ix = _index(docs)
    many = [(f"w{j}", 1.0) for j in range(230)] + [("rare1", 1.0), ("rare2", 1.0), ("common", 1.0)]
    assert len(many) > MAX_QUERY_TERMS == 128
    got = ix.match(many, ix.scope(), k=10)
    # the same as asking for the 128 rarest: every term but "common" and w0..w4 occur in
    # 1-40 documents; "common" in 200 and the lowest ids in the fewest documents
    df = {t: sum(t in d for d in docs.values()) for t, _ in many}
    idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    kept = sorted(many, key=lambda tw: (-idf[tw[0]], tw[0]))[:MAX_QUERY_TERMS]
    assert ("common", 1.0) not in kept and ("rare1", 1.0) in kept
    assert got == ix.match([tw for tw in many if tw in kept], ix.scope(), k=10)
    assert got != ix.match(many[:MAX_QUERY_TERMS], ix.scope(), k=10)
    # the choice counts live documents only: the same after deletions and a compaction
    for i in range(0, 200, 3):
        ix.remove(f"d{i}")
    before = ix.match(many, ix.scope(), k=10)
    ix.compact()
    assert ix.match(many, ix.scope(), k=10) == before
    # a query within the limit is ranked on every term, its commonest included
    ix.add("only_common", ["common", "zz"], layer=0, bucket=0)
    assert "only_common" not in dict(ix.match(many, ix.scope(), k=None))
    assert "only_common" in dict(ix.match(many[-MAX_QUERY_TERMS:], ix.scope(), k=None))
