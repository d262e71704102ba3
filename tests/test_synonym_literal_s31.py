"""A literal match of the query's word ranks above a synonym-only match (review r3, session 31).

In Chinese, a word most memories of its class hold has an idf near zero while
its rare synonym keeps its own: for 笔记 over 41 memories (20 saying 小明的笔记…),
"量子纠缠实验记录" (synonym 记录 only) ranked first and ACCEPT at 1.57, every literal
hit scored 0.03 and was filler (``weak`` 0.019) below it, and ``inject`` returned only
it. The synonyms of a word are now capped below the word (``ranked_terms``), and a
literal hit's filler floor is set by the best literal hit, never by a synonym-only one.
"""

from __future__ import annotations

import math
from pathlib import Path

from md_cg import MdCG, Node

NOTES = [f"z{i:02d}" for i in range(20)]


def _notes_store(root: Path, word: str = "笔记") -> MdCG:
    store = MdCG(root)
    nodes = [
        Node(id=f"z{i:02d}", body=f"小明的{word}{i}：周末去爬山和游泳。", verification_basis="data")
        for i in range(20)
    ]
    nodes += [
        Node(
            id=f"e{i:02d}",
            body=f"Alice note {i}: hiking and swimming on the weekend.",
            verification_basis="data",
        )
        for i in range(20)
    ]
    nodes.append(Node(id="rec", body="量子纠缠实验记录", verification_basis="data"))
    store.add_many(nodes)
    return store


def test_memories_saying_the_word_rank_above_a_synonym_only_memory(tmp_path: Path) -> None:
    with _notes_store(tmp_path / "m") as store:
        results, meta = store.search("笔记", record=False)
        assert [r.id for r in results] == NOTES[:10]  # was: rec first, ACCEPT at 1.574
        assert {(r.state, r.filler, round(r.score, 4)) for r in results} == {("ACCEPT", False, 0.2599)}
        assert all(r.evidence == {"terms": ["笔记", "笔", "记"], "synonyms": []} for r in results)
        assert meta["filler"] == 0  # was 9: every literal hit "weak 0.019"
        # the reply still lists the weights the judge reads (the synonyms at 0.6)
        assert meta["terms"] == [["笔记", 1.0], ["笔", 1.0], ["记", 1.0], ["记录", 0.6], ["note", 0.6]]
        assert [i.id for i in store.inject("笔记", 5)] == NOTES[:5]  # was: ["rec"]


def test_the_synonym_weighs_at_most_its_weight_times_the_words_idf(tmp_path: Path) -> None:
    from md_cg.search import expand, ranked_terms
    from md_cg.synonyms import SYNONYM_WEIGHT, SynonymTable
    from md_cg.textindex import match_idfs

    with _notes_store(tmp_path / "m") as store:
        store._engine.state.flush_text()  # the added nodes' terms, as a search flushes them
        text = store._engine.state.text
        expansion = expand("笔记", SynonymTable.default())
        # the word's own terms but its characters (记 is in 日记 too), and each synonym's terms
        assert expansion.stands_for == [(("笔记",), ("记录",)), (("笔记",), ("note",))]
        ranked = dict(ranked_terms(text, expansion))
        idf = match_idfs(text, ["笔记", "笔", "记", "记录", "note"])
        rarest = idf["笔记"]
        # 记录 (one memory) is the weightier synonym: it sets the scale of both
        assert math.isclose(ranked["记录"] * idf["记录"], SYNONYM_WEIGHT * rarest)
        assert math.isclose(ranked["note"], SYNONYM_WEIGHT * rarest / idf["记录"])
        assert ranked["笔记"] == ranked["笔"] == ranked["记"] == 1.0
        # every one of the 20 CJK memories holds 记, 20 of them 笔记 (idf in the CJK class)
        assert math.isclose(idf["笔记"], math.log1p(1.5 / 20.5))
        assert math.isclose(idf["记录"], math.log1p(20.5 / 1.5))


def test_a_word_no_memory_holds_leaves_its_synonyms_whole(tmp_path: Path) -> None:
    """With no memory saying 笔记 its synonyms are all the query can find: no cap (the
    memories saying 日记 hold its character 记, which is not the word)."""
    from md_cg.search import expand, ranked_terms
    from md_cg.synonyms import SynonymTable

    with _notes_store(tmp_path / "m", word="日记") as store:
        store._engine.state.flush_text()
        expansion = expand("笔记", SynonymTable.default())
        assert dict(ranked_terms(store._engine.state.text, expansion))["记录"] == 0.6
        results, _ = store.search("笔记", record=False)
        assert (results[0].id, results[0].state, results[0].filler) == ("rec", "ACCEPT", False)


def test_chinese_doctor_and_english_words_keep_the_literal_hits_first(tmp_path: Path) -> None:
    """r3 t9c: 医生 (20 of 201 literal) against "大夫的账单已逾期" (synonym only);
    English was right before and stays so."""
    cases = [
        ("医生", "我今天去看了医生{i}，膝盖疼。", "大夫的账单已逾期。"),
        ("doctor", "Visited the doctor {i} about my knee.", "The physician's invoice is overdue."),
        ("car", "Washed the car {i} on Sunday.", "Automobile insurance renews in May."),
    ]
    for n, (query, literal, synonym) in enumerate(cases):
        with MdCG(tmp_path / f"s{n}") as store:
            bodies = [
                literal.format(i=i)
                if i < 20
                else f"Weekend plan {i}: hiking trip {i * 7}, swimming pool {i * 3}."
                for i in range(200)
            ]
            nodes = [Node(id=f"n{i:03d}", body=b, verification_basis="data") for i, b in enumerate(bodies)]
            store.add_many([*nodes, Node(id="syn", body=synonym, verification_basis="data")])
            results, meta = store.search(query, record=False)
            assert [r.id for r in results] == [f"n{i:03d}" for i in range(10)], query
            assert {(r.state, r.filler) for r in results} == {("ACCEPT", False)}, query
            assert meta["filler"] == 0


class _Terms:
    """The index's ``terms_of`` over fixed answers (for :func:`md_cg.search._evidence`)."""

    def __init__(self, held: dict[str, list[str]]) -> None:
        self.held = held

    def terms_of(self, doc_ids: list[str], terms: list[str]) -> dict[str, list[str]]:
        return {d: self.held[d] for d in doc_ids if d in self.held}


def test_a_synonym_only_hit_ranked_first_sets_no_filler_floor_for_literal_hits() -> None:
    from md_cg.search import _evidence

    terms = [("笔记", 1.0), ("笔", 1.0), ("记", 1.0), ("记录", 0.6)]
    held = {"syn": ["记录"], "lit": ["笔记", "笔", "记"], "lit2": ["笔记", "笔", "记"], "syn2": ["记录"]}
    hits = [("syn", (10.0, "T2")), ("lit", (0.2, "T2")), ("lit2", (0.005, "T2")), ("syn2", (0.1, "T2"))]
    # the synonym covers the query's word (session 39: search.Expansion.covers)
    covers = [((), "笔记", ("记录",))]
    out = _evidence(_Terms(held), "笔记", terms, hits, groups=[frozenset({"记录"})], covers=covers)
    assert out["syn"] == ({"terms": [], "synonyms": ["记录"]}, False)
    assert out["lit"] == ({"terms": ["笔记", "笔", "记"], "synonyms": []}, False)  # was: weak 0.02, filler
    # below 5% of the best literal hit: still filler, its share of that hit
    assert out["lit2"] == ({"terms": ["笔记", "笔", "记"], "synonyms": [], "weak": 0.025}, True)
    # a synonym-only hit is still measured against the best hit of all
    assert out["syn2"] == ({"terms": [], "synonyms": ["记录"], "weak": 0.01}, True)
