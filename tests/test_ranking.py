"""The ranking techniques kept by issue 17 (docs/ranking.md): each test fails if one is switched off."""

from __future__ import annotations

import math

import pytest

from md_cg.textindex import DEFAULT_COORDINATION, TextIndex


def q(*terms: str) -> list[tuple[str, float]]:
    return [(t, 1.0) for t in terms]


def _index(docs: dict[str, list[str]], **kw: object) -> TextIndex:
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
