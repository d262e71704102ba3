"""Session 42's MCP user simulation (a 45k mixed Chinese/English store), judged Chinese facts:

1. For 用户住在哪里 (where does the user live), 用户住在杭州西湖区。 was ACCEPT but 用户现在住在上海浦东。
   (现在 "now" between the query's words) DEFER, "holds 1 of 2 query words ('用户')": 住 counted
   only with the query's bigram 户住 (住在 holds the function character 在), which 现在 breaks.
   A query bigram joining a character to a function character that is no particle (住在, not
   的天) covers it now (search._covered, CJK_PARTICLE_CHARS).
2. 什么时候 (when) had only 什么 removed, 时候 counted as content: 用户的生日是三月十二日。 was DEFER
   for 用户什么时候过生日？ ("holds 2 of 4"). Question phrases are whole question words now
   (text.CHINESE_QUESTION_WORDS).
3. A DEFER reason read "...; ACCEPT: fact with ..." and showed 用户 and 生日 as '用户生日'.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from md_cg import MdCG, Node, search
from md_cg.search import _covered, _query_units
from md_cg.text import query_terms

ITSELF = 'the memory itself: fact with no applicability conditions, verification basis "data"'
ACCEPT = 'ACCEPT: fact with no applicability conditions, verification basis "data"'

FACTS = [
    ("hz", "用户住在杭州西湖区。"),
    ("sh-now", "用户现在住在上海浦东。"),
    ("sh-still", "用户目前住在上海浦东。"),
    ("bj-always", "用户一直住在北京。"),
    ("en-now", "The user now lives in Shanghai."),
    ("birthday", "用户的生日是三月十二日。"),
    ("review", "项目评审会定在周五下午三点。"),
    ("en-birthday", "The user's birthday is on March 12."),
]
#: more memories than search.THIN_MIN_DOCS, 用户 common among them
BACKGROUND = [
    "用户喜欢喝绿茶。",
    "用户养了一只猫。",
    "用户的车是红色的。",
    "会议室在三楼。",
    "周末天气很好。",
    "小时候他住在乡下。",
    "这本书讲的是历史。",
    "用户每天跑步五公里。",
    "公司食堂中午供应面条。",
    "用户的电脑是笔记本。",
    "他们去年去了日本旅游。",
    "The office wifi password is on the fridge.",
    "Tom likes to play chess.",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MdCG]:
    s = MdCG(tmp_path_factory.mktemp("zh") / "m")
    nodes = [Node(id=i, body=b, verification_basis="data") for i, b in FACTS]
    nodes += [Node(id=f"bg{i}", body=b, verification_basis="data") for i, b in enumerate(BACKGROUND)]
    s.add_many(nodes)
    yield s
    s.close()


def _judged(store: MdCG, query: str) -> dict[str, tuple[str | None, str | None]]:
    results, _ = store.search(query, record=False)
    return {r.id: (r.state, r.basis) for r in results if not r.filler}


def test_a_word_between_the_query_words_keeps_the_verb(store: MdCG) -> None:
    judged = _judged(store, "用户住在哪里")
    for hit in ("hz", "sh-now", "sh-still", "bj-always"):
        assert judged[hit] == ("ACCEPT", ACCEPT), hit
    # 住在 alone, without 用户 (小时候他住在乡下): one word of two, still thin
    assert judged["bg5"] == ("DEFER", f"DEFER: holds 1 of 2 query words ('住'); {ITSELF}")
    assert _judged(store, "where does the user live")["en-now"] == ("ACCEPT", ACCEPT)


def test_a_particle_beside_a_character_covers_nothing() -> None:
    # 的天 of 今天的天气 is no word: a hit holding 的天 (昨天的天空) does not cover 天
    units = _query_units([(t, 1.0) for t in query_terms("今天的天气怎么样")])
    assert _covered(units, {"的天", "的", "天"}, {"synonyms": []}, ()).chars == []
    units = _query_units([(t, 1.0) for t in query_terms("用户住在哪里")])
    held = {"用户", "住在", "用", "户", "住", "在"}  # 用户现在住在上海浦东: no 户住
    assert _covered(units, held, {"synonyms": []}, ()).chars == ["用", "户", "住"]


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("用户什么时候过生日？", ["用户", "过生", "生日", "用", "户", "过", "生", "日"]),
        ("项目评审会什么时候开", ["项目", "目评", "评审", "审会", "项", "目", "评", "审", "会", "开"]),
        ("会议啥时候开始", ["会议", "开始", "会", "议", "开", "始"]),
        ("会议定在什么时间", ["会议", "议定", "定在", "会", "议", "定", "在"]),
        ("用户在什么地方工作", ["用户", "户在", "工作", "用", "户", "在", "工", "作"]),
        (
            "沼鹿的生活习性是什么样的",
            [*("沼鹿", "鹿的", "的生", "生活", "活习", "习性", "性是"), *"沼鹿的生活习性是的"],
        ),
        (
            "做完手术要多长时间恢复",
            ["做完", "完手", "手术", "术要", "恢复", "做", "完", "手", "术", "要", "恢", "复"],
        ),
        ("咖啡多少钱", ["咖啡", "咖", "啡", "钱"]),  # 钱 kept: see text.CHINESE_QUESTION_WORDS
        ("用户哪一年毕业", ["用户", "年毕", "毕业", "用", "户", "年", "毕", "业"]),  # 年: the date says it
    ],
)
def test_question_phrases_are_question_words(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


def test_a_when_question_accepts_its_answer(store: MdCG) -> None:
    assert _judged(store, "用户什么时候过生日？")["birthday"] == ("ACCEPT", ACCEPT)
    assert _judged(store, "项目评审会什么时候开？")["review"] == ("ACCEPT", ACCEPT)
    assert _judged(store, "when is the user's birthday?")["en-birthday"] == ("ACCEPT", ACCEPT)


def test_a_defer_reason_says_no_accept_and_shows_the_words_apart(store: MdCG) -> None:
    assert _judged(store, "用户周末去哪里过生日")["birthday"] == (
        "DEFER",
        f"DEFER: holds 2 of 4 query words ('用户', '生日'); {ITSELF}",
    )


def test_pieces_join_only_characters_held_together() -> None:
    assert search._pieces(["用", "户", "生", "日"], {"用户", "生日"}, ()) == ["用户", "生日"]
    assert search._pieces(["凤", "冠", "雉"], {"凤冠", "冠雉"}, ()) == ["凤冠雉"]
    assert search._pieces(["用", "户", "住"], {"用户", "住在"}, ()) == ["用户", "住"]
    assert search._pieces(["用", "户", "生", "日"], set(), [{"用", "户"}, {"生", "日"}]) == ["用户", "生日"]
