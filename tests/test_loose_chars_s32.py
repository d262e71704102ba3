"""Session 32: a character of a Chinese table word that does not share its meaning is no
evidence of it.

Session 31 left it (review r3): a note holding one unrelated character of a two-character
query word was evidence (half the query's characters, search.CJK_CHAR_SHARE). A character
standing in the query only inside table words whose Chinese synonyms all lack it
(search.loose_chars) now counts for nothing: 生 of 医生 (大夫, 医师) in 学生. Review r4 of
the first version: counting only characters that are synonyms themselves made 12 of 20
everyday words' own notes filler (妈 for 妈妈, 车 for 汽车); a character in a synonym
(老妈, 车子, 医师) counts, and a word the table gives no Chinese synonym leaves its
characters counting.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.search import loose_chars
from md_cg.synonyms import SynonymTable

NOTES = {
    "student": "我是一名学生，住在宿舍。",
    "clinic": "看医的号挂上了。",
    "brain": "大脑需要休息。",
    "car": "我的车停在地下二层B区。",
    "mum": "妈下周来北京住。",
    "cold": "天很冷，出门记得穿厚外套。",
}


@pytest.fixture
def store(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "m")
    s.add_many([Node(id=i, layer="knowledge", body=b, verification_basis="data") for i, b in NOTES.items()])
    return s


def _held(store: MdCG, query: str) -> list[tuple[str, str, bool]]:
    results, _ = store.search(query, record=False)
    return sorted((r.id, r.state, r.filler) for r in results if r.evidence["terms"] or r.evidence["synonyms"])


def test_a_loose_character_alone_is_filler(store: MdCG) -> None:
    with store:
        assert _held(store, "医生") == [
            ("clinic", "ACCEPT", False),  # 医 is in 医师
            ("student", "DEFER", True),  # 生 is in no synonym of 医生
        ]
        assert _held(store, "电脑") == [("brain", "DEFER", True)]
        assert [n.id for n in store.inject("医生", 5)] == ["clinic"]


def test_a_character_in_a_synonym_typed_alone_or_of_a_word_without_chinese_synonyms_counts(
    store: MdCG,
) -> None:
    with store:
        assert _held(store, "汽车") == [("car", "ACCEPT", False)]  # 车 is in 车子
        assert _held(store, "妈妈") == [("mum", "ACCEPT", False)]  # 妈 is in 老妈
        assert _held(store, "天气") == [("cold", "ACCEPT", False)]  # weather: no Chinese synonym
        assert ("student", "ACCEPT", False) in _held(store, "医生 生")  # typed as a word of its own


def test_loose_chars_exactly() -> None:
    table = SynonymTable.default()

    def loose(query: str) -> set[str]:
        return set(loose_chars(query, table.expand_text(query), table))

    assert loose("医生") == {"生"}
    assert loose("电脑") == {"脑"}
    assert loose("汽车") == {"汽"}
    assert loose("手机") == {"手", "机"}  # 智能手机 holds the word itself: it says nothing
    assert loose("医生和学生") == set()  # 生 also in 学生 (no Chinese synonym given): counts
    assert loose("猫咪") == {"咪"}  # 猫 is a synonym of 猫咪
    assert loose("妈妈") == set()
    assert loose("天气") == set()  # only "weather": nothing says which character carries it
    assert loose("熊猫") == set()  # not a table word
    assert loose("ＡＢ医生") == {"生"}  # full-width Latin beside it: normalised first
    assert loose("doctor") == set()
