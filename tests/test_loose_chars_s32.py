"""Session 32: a character of a Chinese table word that does not share its meaning is no
evidence of it.

Session 31 left it (review r3): 天气 (weather) ACCEPTed a note holding only 今天 (today):
天 is half of the query's characters (search.CJK_CHAR_SHARE). A character that stands in
the query only inside table words whose meaning it does not share (search.loose_chars)
now counts for nothing; one that is a synonym of the word (猫 of 猫咪) or typed on its own
still counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.search import loose_chars
from md_cg.synonyms import SynonymTable

NOTES = {
    "today": "今天我去了超市买菜。",
    "cat": "我家的猫很喜欢睡觉。",
    "chain": "区块链技术的原理。",
    "weather": "北京的天气今天很冷。",
}


@pytest.fixture
def store(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "m")
    s.add_many([Node(id=i, layer="knowledge", body=b, verification_basis="data") for i, b in NOTES.items()])
    return s


def _held(store: MdCG, query: str) -> list[tuple[str, str, bool]]:
    results, _ = store.search(query, record=False)
    return [(r.id, r.state, r.filler) for r in results if r.evidence["terms"] or r.evidence["synonyms"]]


def test_a_loose_character_alone_is_filler(store: MdCG) -> None:
    with store:
        assert _held(store, "天气") == [("weather", "ACCEPT", False), ("today", "DEFER", True)]
        assert _held(store, "链表") == [("chain", "DEFER", True)]
        assert [n.id for n in store.inject("天气", 5)] == ["weather"]


def test_a_character_sharing_the_words_meaning_or_typed_alone_counts(store: MdCG) -> None:
    with store:
        assert _held(store, "猫咪") == [("cat", "ACCEPT", False)]  # 猫 is a synonym of 猫咪
        assert ("today", "ACCEPT", False) in _held(store, "天 气")  # typed as a word of its own


def test_loose_chars_exactly() -> None:
    table = SynonymTable.default()

    def loose(query: str) -> set[str]:
        return set(loose_chars(query, table.expand_text(query), table))

    assert loose("天气") == {"天", "气"}
    assert loose("明天天气") == {"明", "天", "气"}
    assert loose("天和天气") == {"气"}
    assert loose("猫咪") == {"咪"}  # 猫 is a synonym of 猫咪
    assert loose("熊猫") == set()  # not a table word: its characters count as before
    assert loose("ＴＩＡＮ天气") == {"天", "气"}  # full-width Latin beside it: normalised first
    assert loose("weather") == set()
