"""Accent folding: a memory about José in Zürich is found by "jose zurich" (and the other way round)."""

from __future__ import annotations

from pathlib import Path

import orjson

from md_cg import MdCG, snapshot
from md_cg.judge import REJECT, judge
from md_cg.render import snippet
from md_cg.script import fold_accents
from md_cg.text import analyze, query_terms
from md_cg.textindex_phrase import phrase_key


def test_fold_accents_maps_latin_letters_and_leaves_other_scripts() -> None:
    cases = {
        "café": "cafe",
        "Zürich": "Zurich",
        "naïve": "naive",
        "Nguyễn": "Nguyen",
        "łódź": "lodz",
        "ærø": "aero",
        "œuvre": "oeuvre",
        "i\u0307stanbul": "istanbul",  # what casefold makes of İstanbul
        "cafe\u0301": "cafe",  # a combining mark is deleted
        "straße": "straße",  # case folding, not accent folding, makes it ss
        "йогурт": "йогурт",  # Cyrillic й is a letter of its own
        "ελληνικά": "ελληνικά",
        "한국어": "한국어",  # NFD would split Hangul into jamo
        "中文，日本語": "中文，日本語",
        "plain ascii": "plain ascii",
    }
    assert {k: fold_accents(k) for k in cases} == cases


def test_accented_and_plain_spellings_give_the_same_terms() -> None:
    want = ["jose", "garcia", "zurich", "lodz"]
    assert analyze("José García, Zürich, Łódź") == analyze("jose garcia zurich lodz") == want
    assert query_terms("cafe") == analyze("Café") == ["cafe"]
    assert analyze("Кошки бегали") == ["кошк", "бега"]  # the Russian stemmer still gets its letters


def test_search_finds_either_spelling_by_its_terms(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as store:
        jose = store.add(body="José García moved to Zürich in 2024", id="jose").id
        cafe = store.add(body="The cafe on Rue Cler serves naive coffee", id="cafe").id
        store.add(body="周五禁止部署，运维团队决定", id="zh")
        store.add(body="Deploys are frozen on Fridays", id="deploys")
        for query, want in (("jose garcia", jose), ("ZURICH", jose), ("Café", cafe), ("naïve coffee", cafe)):
            hits, _ = store.search(query, k=5, record=False)
            found = [(h.id, h.tier) for h in hits if not h.filler]
            assert found == [(want, "T2")], query  # a term match, not the similarity fallback
            assert hits[0].evidence["terms"], query
        hits, _ = store.search("部署", k=5, record=False)
        assert next(h.id for h in hits if h.tier == "T2") == "zh"


def test_title_phrase_snippet_and_judge_fold_accents_too() -> None:
    assert phrase_key("José  García – Zürich") == "jose garcia zurich"
    body = "Travel notes\nThe train was late\nWe had lunch at the Café Müller\nThen home"
    assert snippet(body, ["cafe"], width=80) == "We had lunch at the Café Müller Then home"
    j = judge(
        ccg_missing=(), non_applicable=("in Zürich",), verification_basis="test", query="rules in zurich"
    )
    assert j.state == REJECT
    assert j.hit_condition == "in Zürich"


def test_a_snapshot_of_version_10_is_rebuilt_so_old_unfolded_terms_never_answer(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(body="Meeting at the Café Müller", id="cafe")
        store.add(body="Lunch at the station", id="station")
        store.compact_index()
    path = root / ".mdcg" / "index.snapshot"
    data = path.read_bytes()
    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = orjson.loads(data[len(snapshot.MAGIC) : nl])
    assert header["version"] == snapshot.VERSION == 12
    header["version"] = 10
    path.write_bytes(snapshot.MAGIC + orjson.dumps(header) + data[nl:])
    before = path.read_bytes()
    with MdCG(root, read_only=True) as store:
        assert store.loaded_from == "files"
        hits, _ = store.search("cafe muller", k=5, record=False)
        assert [(h.id, h.tier) for h in hits if not h.filler] == [("cafe", "T2")]
    assert path.read_bytes() == before  # read-only: the old snapshot is left for a writer to replace


def test_text_without_a_foldable_character_is_returned_as_it_is() -> None:
    from md_cg import script

    # the fast path is only right if every character the table changes is in the ranges it checks
    assert all(script._ACCENT_RANGES.match(chr(cp)) for cp in script._ACCENTS)
    title = "红黑树·推导过程·第10篇 binary search"
    assert fold_accents(title) is title
    assert fold_accents(title + " é") == title + " e"
