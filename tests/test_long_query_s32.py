"""Session 32 (outside review of the MCP server): a search's cost grew with the square
of the number of query words the vocabulary lacks -- each candidate term was checked
for a typo against each unknown word (2,000 words: 68 s on a 20,000-memory store, and
the MCP server answered nothing else meanwhile). Only the first ``SIMILAR_WORDS``
distinct unknown words are looked up now (docs/ranking.md)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from rapidfuzz.distance import OSA

from md_cg import MdCG, textindex_similar
from md_cg.text import query_terms
from md_cg.textindex import TextIndex, typo_terms
from md_cg.textindex_similar import SimilarityKeys, typos_allowed, within_a_typo

#: ``md_cg.textindex.SIMILAR_WORDS`` (imported in the test of it, so that the others run
#: on the code before it).
BOUND = 32
CORE = "mnopqrstuvwx"
#: Five vocabulary terms every query word below resembles (Dice 12/16 of padded
#: bigrams) but none is within a typo of (its first four letters all differ).
TERMS = ["yzyz" + CORE, "zyzy" + CORE, "yyzz" + CORE, "zzyy" + CORE, "yzzy" + CORE]


def _unknown_words(n: int) -> list[str]:
    return ["".join(p) + CORE for p in itertools.islice(itertools.product("abcdefgh", repeat=4), n)]


def test_the_typo_check_of_2000_unknown_words_looks_at_the_first_32(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic cost: before, 2,000 similarity look-ups and 5 x 2,000 typo checks."""
    ix = TextIndex(analyzer=query_terms)
    ix.add("d", TERMS, layer=0, bucket=0)
    calls = {"typo": 0, "similar": 0}
    typo, similar = within_a_typo, SimilarityKeys._similar_words

    def counted_typo(word: str, term: str) -> bool:
        calls["typo"] += 1
        return typo(word, term)

    def counted_similar(self: SimilarityKeys, *args: object) -> textindex_similar.Unit:
        calls["similar"] += 1
        return similar(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(textindex_similar, "within_a_typo", counted_typo)
    monkeypatch.setattr(SimilarityKeys, "_similar_words", counted_similar)
    words = _unknown_words(2000)
    assert typo_terms(ix, " ".join(words)) == (True, [])
    assert calls == {"typo": 5 * BOUND, "similar": BOUND}
    from md_cg.textindex import SIMILAR_WORDS

    assert SIMILAR_WORDS == BOUND
    # The units: one per distinct unknown word, the first 32 with all five terms.
    units = ix._similar_units(" ".join(words))
    assert [len(u) for u in units] == [5] * 32 + [0] * 1968


def test_within_a_typo_agrees_with_its_rule() -> None:
    """The faster check (starts only within ``allowed`` letters of the term's length,
    a cut-off for the distance) says what the rule says, on random near pairs."""

    def rule(word: str, term: str) -> bool:
        allowed = typos_allowed(word)
        lengths = range(max(1, len(term) - 2), min(len(word), len(term) + 2) + 1)
        if allowed == 0:
            return False
        whole = OSA.distance(word, term) <= allowed
        return whole or any(OSA.distance(word[:n], term) <= allowed for n in lengths)

    rng = random.Random(32)
    said = []
    for _ in range(20000):
        word = "".join(rng.choice("abc中") for _ in range(rng.randint(0, 10)))
        tail = "".join(rng.choice("abc") for _ in range(rng.randint(0, 3)))
        term = word[: rng.randint(0, len(word))] + tail
        assert within_a_typo(word, term) == rule(word, term), (word, term)
        said.append(rule(word, term))
    assert 0 < sum(said) < len(said)


def _store(root: Path) -> MdCG:
    s = MdCG(root)
    for node_id, body in [
        ("bs", "Binary search halves the interval"),
        ("plato", "Plato's theory of forms"),
        ("heap", "Heap sort builds a max heap"),
    ]:
        s.add(id=node_id, layer="knowledge", body=body, verification_basis="test")
    return s


def _results(s: MdCG, query: str) -> list[tuple[str, str, float, bool, str, dict[str, object]]]:
    found, _ = s.search(query, record=False)
    return [(r.id, r.tier, round(r.score, 4), r.filler, r.state, r.evidence) for r in found]


def _filler(n: int) -> str:
    return " ".join(f"zq{i}wv" for i in range(n))


def test_a_typo_among_many_unknown_words_is_looked_up_while_among_the_first_32(tmp_path: Path) -> None:
    """The typo "binery" is looked up as the first, or the 32nd, unknown word (a share
    of the query too small to be evidence), not as the 33rd (before: score 0.7006 and
    fuzzy 0.022 as the 32nd); a query of only it is an ACCEPT."""
    zero = {"fuzzy": 0.0, "synonyms": [], "terms": []}
    rest = [(i, "T3", 0.0, True, "DEFER", zero) for i in ("heap", "plato")]
    with _store(tmp_path / "m") as s:
        assert _results(s, "binery") == [
            ("bs", "T3", 0.7006, False, "ACCEPT", {"fuzzy": 0.714, "synonyms": [], "terms": []}),
            *rest,
        ]
        assert _results(s, f"{_filler(BOUND - 1)} binery") == [
            ("bs", "T3", 0.7006, True, "DEFER", {"fuzzy": 0.022, "synonyms": [], "terms": []}),
            *rest,
        ]
        # all at 0: the most recently changed first (session 43; was by id)
        at_zero = [(i, "T3", 0.0, True, "DEFER", zero) for i in ("heap", "plato", "bs")]
        assert _results(s, f"{_filler(BOUND)} binery") == at_zero
        assert _results(s, f"binery {_filler(2000)}") == [
            ("bs", "T3", 0.7006, True, "DEFER", {"fuzzy": 0.0, "synonyms": [], "terms": []}),
            *rest,
        ]
