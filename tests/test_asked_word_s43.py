"""The word a question asks for (session 43 user simulation): "The user's favourite
programming language is Rust" holds 'user' and 'favourite' of "What is the user's favourite
colour?" -- 2 of 3 words, more than half, so no weight test ran -- and was ACCEPT, an agent
told to act on it answering "Rust". No memory holds 'colour': none can say which colour, and
a hit lacking the word the question asks for is DEFER (``evidence["thin"]["lacks"]``). Real
answers holding it stay ACCEPT, in English and in Chinese."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG, Node

ACCEPT_OTHER = 'ACCEPT: fact with no applicability conditions, verification basis "other"'
ITSELF = 'the memory itself: fact with no applicability conditions, verification basis "other"'
LANG = "The user's favourite programming language is Rust. 用户最喜欢的编程语言是Rust。"


def _store(root: Path, background: int = 30, extra: tuple[Node, ...] = ()) -> MdCG:
    s = MdCG(root)
    nodes = [
        Node(id="fav_lang", body=LANG, verification_basis="other"),
        Node(id="name", body="The user's name is Chen Chen. 用户叫陈晨。", verification_basis="other"),
        *extra,
    ]
    nodes += [
        Node(id=f"bg{i}", body=f"Background note {i} about project Atlas. 背景笔记{i}。")
        for i in range(background)
    ]
    s.add_many(nodes)
    return s


def _judged(s: MdCG, query: str) -> list[tuple[str, str | None, str | None]]:
    results, _ = s.search(query, k=3, record=False)
    return [(r.id, r.state, r.basis) for r in results if not r.filler]


def _lang_thin(s: MdCG, query: str) -> dict:
    results, _ = s.search(query, k=3, record=False)
    return next(r.evidence.get("thin") for r in results if r.id == "fav_lang")


def test_an_unrelated_question_sharing_its_frame_is_deferred(tmp_path: Path) -> None:
    """English, both questions of the simulation: the asked word (colour, food) in no memory."""
    with _store(tmp_path / "s") as s:
        for word in ("colour", "food"):
            assert _judged(s, f"What is the user's favourite {word}?") == [
                (
                    "fav_lang",
                    "DEFER",
                    f"DEFER: no memory holds '{word}', what the query asks for; this one holds 2 of 3 "
                    f"query words ('user', 'favourit'); {ITSELF}",
                ),
                ("name", "DEFER", f"DEFER: holds 1 of 3 query words ('user'); {ITSELF}"),
            ]
        assert _lang_thin(s, "What is the user's favourite colour?") == {
            "holds": 2,
            "of": 3,
            "words": ["user", "favourit"],
            "share": 0.647,
            "lacks": ["colour"],
        }


def test_an_unrelated_chinese_question_is_deferred(tmp_path: Path) -> None:
    """最喜欢什么颜色: 颜色 (after 什么) in no memory; 用户最喜欢 held, 3 of 4 words."""
    with _store(tmp_path / "s") as s:
        assert _judged(s, "用户最喜欢什么颜色？") == [
            (
                "fav_lang",
                "DEFER",
                "DEFER: no memory holds '颜色', what the query asks for; this one holds 3 of 4 query "
                f"words ('用户最喜欢'); {ITSELF}",
            )
        ]
        assert _judged(s, "用户最喜欢的颜色是什么") == [
            (
                "fav_lang",
                "DEFER",
                "DEFER: no memory holds '颜色', what the query asks for; this one holds 3 of 4 query "
                f"words ('用户最喜欢'); {ITSELF}",
            )
        ]


def test_the_answer_holding_the_asked_word_stays_accept(tmp_path: Path) -> None:
    with _store(tmp_path / "s") as s:
        for query in (
            "What is the user's favourite programming language?",
            "Which programming language does the user like best?",
            "用户最喜欢的编程语言是什么？",
            "用户最喜欢什么编程语言",
        ):
            assert _judged(s, query)[0] == ("fav_lang", "ACCEPT", ACCEPT_OTHER), query
            assert "thin" not in _lang_thin_or_empty(s, query)


def _lang_thin_or_empty(s: MdCG, query: str) -> dict:
    results, _ = s.search(query, k=3, record=False)
    return next(r.evidence for r in results if r.id == "fav_lang")


def test_a_store_of_three_memories_too(tmp_path: Path) -> None:
    """The simulation's MCP store held 3 memories (no idf to speak of): the rule counts
    holders, not weights, so it applies there too; the answer stays ACCEPT."""
    with _store(tmp_path / "s", background=1) as s:
        assert _judged(s, "What is the user's favourite colour?")[0][:2] == ("fav_lang", "DEFER")
        assert _judged(s, "用户最喜欢什么颜色？")[0][:2] == ("fav_lang", "DEFER")
        assert _judged(s, "What is the user's favourite programming language?")[0] == (
            "fav_lang",
            "ACCEPT",
            ACCEPT_OTHER,
        )


def test_four_covered_words_are_never_thin(tmp_path: Path) -> None:
    """THIN_COVERS_ENOUGH holds here too: 4 of 5 words covered, 'colour' lacking."""
    with _store(tmp_path / "s") as s:
        query = "What colour is the user's favourite programming language logo?"
        assert ("fav_lang", "ACCEPT", ACCEPT_OTHER) in _judged(s, query)


def _asked(query: str) -> dict[str, str]:
    from md_cg.search import _query_units, asked_words  # new in session 43
    from md_cg.text import query_terms

    return asked_words(query, _query_units([(t, 1.0) for t in query_terms(query)]))


def test_asked_words() -> None:
    assert _asked("What is the user's favourite colour?") == {"colour": "colour"}
    assert _asked("which city does the user live in") == {"citi": "city"}
    assert _asked("what kind of fruit does the user like") == {"fruit": "fruit"}
    assert _asked("what's the exchange rate from CAD to MXN") == {"mxn": "mxn"}
    assert _asked("用户最喜欢什么颜色？") == {"颜色": "颜色"}
    assert _asked("用户住在哪个城市") == {"城市": "城市"}
    assert _asked("一个苹果的热量是多少") == {"热量": "热量"}
    # 为什么 asks why, not for the word after it; 又叫 is no word the query asks for
    assert _asked("葵扇为什么又叫芭蕉扇？") == {}
    assert _asked("thanks") == {}
    # only a question asks for a word; a participle in -ed is no attribute asked for
    assert _asked("binary search on an array") == {}
    assert _asked("how do I deploy the service? where is the timeout documented") == {"timeout": "timeout"}
