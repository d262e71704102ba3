"""Tokenizer: words, stems, stopwords, CJK n-grams, normalisation, query analysis."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from md_cg import text
from md_cg.text import Analyzer, analyze, char_bigrams, is_cjk, normalize, query_terms


def test_english_words_are_stemmed_and_stopwords_dropped():
    assert analyze("The runners were running quickly") == ["runner", "run", "quick"]
    assert analyze("the and of was") == []


def test_term_frequency_is_kept():
    assert analyze("cats, cats and more cats") == ["cat", "cat", "cat"]


def test_apostrophes_and_underscores_split_words():
    assert analyze("Caroline's snake_case don't") == ["carolin", "snake", "case"]


def test_chinese_gives_bigrams_then_unigrams():
    assert analyze("二分查找") == ["二分", "分查", "查找", "二", "分", "查", "找"]


def test_single_character_run_gives_the_character():
    assert analyze("猫") == ["猫"]
    assert analyze("x 猫 z") == ["x", "z", "猫"]


def test_full_width_punctuation_splits_cjk_runs():
    assert analyze("你好，世界") == ["你好", "世界", "你", "好", "世", "界"]


def test_mixed_script_token():
    assert analyze("战国无双3由ω-force开发") == [
        "3",
        "ω",
        "forc",
        "战国",
        "国无",
        "无双",
        "开发",
        "战",
        "国",
        "无",
        "双",
        "由",
        "开",
        "发",
    ]


def test_full_width_forms_equal_ascii():
    assert analyze("ＡＢＣ１２３ Ｒｕｎｎｉｎｇ") == ["abc123", "run"]
    assert analyze("ＡＢＣ１２３ Ｒｕｎｎｉｎｇ") == analyze("ABC123 Running")


def test_emoji_and_symbols_are_dropped():
    assert analyze("I love 🐱 cats 😀! ★ ✓") == ["love", "cat"]
    assert analyze("😀🎉") == []


def test_case_folding_and_accents():
    assert analyze("STRASSE Straße") == ["strass", "strass"]
    # decomposed and precomposed accents give the same term
    assert analyze("cafe\u0301") == analyze("café") == analyze("CAFE") == ["cafe"]


def test_cyrillic_uses_the_russian_stemmer():
    assert analyze("Кошки бегали") == ["кошк", "бега"]


def test_kana_and_hangul_are_cjk():
    assert analyze("ねこ 한국") == ["ねこ", "한국", "ね", "こ", "한", "국"]
    assert is_cjk("ね") and is_cjk("한") and is_cjk("中") and not is_cjk("a")


def test_empty_and_whitespace():
    assert analyze("") == []
    assert analyze("  \n\t ") == []
    assert query_terms("") == []


def test_normalize():
    assert normalize("Hello, WORLD!") == "hello  world"
    assert normalize("ＡＢＣ，你好") == "abc 你好"


def test_query_drops_english_question_words():
    assert query_terms("When did Caroline go to the LGBTQ support group?") == [
        "carolin",
        "go",
        "lgbtq",
        "support",
        "group",
    ]
    assert query_terms("Whose dog is it?") == ["dog"]


def test_query_drops_chinese_question_words_and_splits_runs():
    assert query_terms("二分查找是什么？") == [
        "二分",
        "分查",
        "查找",
        "找是",
        "二",
        "分",
        "查",
        "找",
        "是",
    ]
    assert query_terms("成立于哪一年") == ["成立", "立于", "成", "立", "于", "年"]
    assert query_terms("为什么会这样呢") == ["会这", "这样", "会", "这", "样"]
    assert query_terms("谁") == []


def test_query_keeps_repeats():
    assert query_terms("cat cat") == ["cat", "cat"]


def test_index_never_drops_question_words():
    assert analyze("什么") == ["什么", "什", "么"]
    assert analyze("whose") == ["whose"]


def test_analyzer_options():
    assert Analyzer(index_stopwords=False).analyze("the cat") == ["the", "cat"]
    assert Analyzer(cjk_unigrams=False).analyze("二分查找 猫") == ["二分", "分查", "查找", "猫"]
    assert Analyzer(query_unigrams=False).query_terms("二分查找") == ["二分", "分查", "查找"]
    assert Analyzer(question_words=False).query_terms("什么") == ["什么", "什", "么"]
    # without index unigrams, queries cannot use them either (they would match nothing)
    assert Analyzer(cjk_unigrams=False, query_unigrams=True).query_terms("二分") == ["二分"]


def test_long_cjk_text_bigrams_match_the_short_path(monkeypatch):
    body = "中华人民共和国成立于一九四九年。" * 20 + "abc 二分查找"
    fast = analyze(body)
    monkeypatch.setattr(text, "_NUMPY_BIGRAMS", 10**9)
    slow = analyze(body)
    assert fast == slow
    assert fast.count("中华") == 20


def test_char_bigrams():
    assert char_bigrams("abc") == {"ab", "bc"}
    assert char_bigrams("Ab Ab") == {"ab", "b ", " a"}
    assert char_bigrams("二分查找") == {"二分", "分查", "查找"}
    assert char_bigrams("a") == {"a"}
    assert char_bigrams("") == set()


def test_word_cache_is_bounded():
    cache = text._WordCache(frozenset({"the"}), limit=3)
    assert [cache[w] for w in ["running", "the", "cats", "jumps", "dogs"]] == [
        "run",
        "",
        "cat",
        "jump",
        "dog",
    ]
    assert len(cache) <= 3


def test_threads_get_the_same_terms():
    words = [f"running{i} jumping cats 二分查找{i}" for i in range(200)]
    expected = [analyze(w) for w in words]
    results: list[list[list[str]]] = []

    def work() -> None:
        results.append([Analyzer().analyze(w) for w in words])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4


_ALPHABET = st.sampled_from(list("abcxyzAB019éÉ中文二分查找是什么哪里吗ＡＢ１，。！ ねこ한"))


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.text(_ALPHABET, min_size=1, max_size=8), min_size=1, max_size=6),
    pick=st.integers(min_value=0),
    cut=st.integers(min_value=0),
)
def test_a_query_word_found_verbatim_yields_only_terms_of_the_document(words, pick, cut):
    doc = " ".join(words)
    tokens = normalize(doc).split()
    if not tokens:
        return
    token = tokens[pick % len(tokens)]
    # any CJK-only substring of a token is a verbatim query word too
    if all(is_cjk(c) for c in token):
        token = token[cut % len(token) :]
    assert set(query_terms(token)) <= set(analyze(doc))


@pytest.mark.parametrize(
    "word", ["binary", "二分查找", "Straße", "ＡＢＣ", "Кошки", "什么是二分", "hello world"]
)
def test_query_terms_subset_of_analyze_for_the_same_text(word):
    assert set(query_terms(word)) <= set(analyze(word))


# -- synonym terms -------------------------------------------------------------------


def test_synonym_terms_never_give_single_cjk_characters() -> None:
    analyzer = Analyzer()
    assert analyzer.synonym_terms("用户") == ["用户"]
    assert analyzer.synonym_terms("最后期限") == ["最后", "后期", "期限"]
    assert analyzer.synonym_terms("茶") == []  # a one-character synonym adds nothing
    assert analyzer.synonym_terms("due date") == ["due", "date"]
    assert analyzer.synonym_terms("C 语言") == ["c", "语言"]
    assert query_terms("用户") == ["用户", "用", "户"]  # the query's own text keeps its characters


def test_expand_query_keeps_own_unigrams_and_drops_synonym_unigrams() -> None:
    expansions = [("二分查找", 1.0), ("折半查找", 0.6), ("binary search", 0.6), ("茶", 0.6)]
    assert text.expand_query("二分查找的边界", expansions) == [
        ("二分", 1.0),
        ("分查", 1.0),
        ("查找", 1.0),
        ("找的", 1.0),
        ("的边", 1.0),
        ("边界", 1.0),
        ("二", 1.0),
        ("分", 1.0),
        ("查", 1.0),
        ("找", 1.0),
        ("的", 1.0),
        ("边", 1.0),
        ("界", 1.0),
        ("折半", 0.6),
        ("半查", 0.6),
        ("binari", 0.6),
        ("search", 0.6),
    ]


def test_expand_query_weights_come_from_the_expansions() -> None:
    out = text.expand_query("the user", [("user", 1.0), ("用户", 0.05), ("使用者", 0.05), ("client", 0.6)])
    assert out == [("user", 1.0), ("用户", 0.05), ("使用", 0.05), ("用者", 0.05), ("client", 0.6)]
    # a term keeps the highest weight any source gives it
    assert text.expand_query("client", [("client", 0.6)]) == [("client", 1.0)]


# -- batch tokenising (analyze_many / analyze_batch) ------------------------------------

_BATCH_CASES = [
    "",
    "   ",
    "a",
    "猫",
    "x 猫 z",
    "二分查找",
    "你好，世界",
    "The runners were running quickly",
    "Caroline's snake_case don't 中文 mixed 日本語のテキスト 한국어",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３ and ㍿ ﬃ",
    "𠀀𠀁 supplementary 𠀂 and 中 single",
    "Путин бежал быстро 快跑",
    "emoji 🎉 between 中🎉文",
]

_CJK_ALPHABET = "中文二分查找你好世界日本語のテキスト한국어々〆"
_batch_text = st.lists(
    st.sampled_from([*_CJK_ALPHABET, *"ab c.，  'Ｆ𠀀é", "the ", "running ", "\n"]), max_size=40
).map("".join)


@pytest.mark.parametrize("unigrams", [True, False])
def test_analyze_many_equals_analyze_on_crafted_texts(unigrams):
    analyzer = Analyzer(cjk_unigrams=unigrams)
    assert analyzer.analyze_many(_BATCH_CASES) == [analyzer.analyze(t) for t in _BATCH_CASES]
    assert analyzer.analyze_many([]) == []


@given(st.lists(st.one_of(_batch_text, st.text(max_size=30)), max_size=12))
@settings(max_examples=300, deadline=None)
def test_analyze_many_equals_analyze_hypothesis(texts):
    assert text.analyze_many(texts) == [analyze(t) for t in texts]
    no_uni = Analyzer(cjk_unigrams=False)
    assert no_uni.analyze_many(texts) == [no_uni.analyze(t) for t in texts]


def test_analyze_many_equals_analyze_on_the_sample_corpus():
    from md_cg.index import index_text
    from md_cg.sample import build_nodes

    texts = [index_text(node) for node in build_nodes(knowledge=400, seed=7)]
    assert any(is_cjk(t[0]) for ts in text.analyze_many(texts) for t in ts)  # Chinese is in it
    assert any(t.isascii() for ts in text.analyze_many(texts) for t in ts)  # and English
    assert text.analyze_many(texts) == [analyze(t) for t in texts]


def test_analyze_batch_keys_decode_to_the_terms():
    batch = text.analyze_batch(["二分 cats", "", "猫"])
    assert batch.counts.tolist() == [4, 0, 1]
    assert [batch.term(k) for k in batch.keys.tolist()] == ["cat", "二分", "二", "分", "猫"]
    assert batch.keys[1] == (ord("二") << text.KEY_SHIFT) | ord("分")
    assert batch.keys[4] == ord("猫") << text.KEY_SHIFT
    assert (
        [batch.terms(i) for i in range(3)] == batch.all_terms() == [["cat", "二分", "二", "分"], [], ["猫"]]
    )


def test_term_words_map_stems_and_folded_terms_back_to_the_query_words():
    assert text.term_words("Binary searches in Zürich, 二分查找 for cafés!") == {
        "binari": "binary",
        "search": "searches",
        "zurich": "zürich",
        "cafe": "cafés",
    }
    assert text.term_words("the what 中文") == {}


def test_query_bigrams_of_two_particles_or_pronouns_are_not_searched() -> None:
    """Review (session 24): 我的 of "我的 coffee 偏好" put a sports paragraph (挑战自我的) first."""
    assert query_terms("我的咖啡偏好") == ["的咖", "咖啡", "啡偏", "偏好", "我", "的", "咖", "啡", "偏", "好"]
    assert "他们" not in query_terms("他们的项目") and "们的" not in query_terms("他们的项目")
    assert analyze("我的咖啡")[:3] == ["我的", "的咖", "咖啡"]  # documents keep every bigram
    # review round 3: a Latin word beside them is what is asked, so they are still dropped
    assert query_terms("我的 redis") == ["redi", "我", "的"]
    assert query_terms("他们") == ["他们", "他", "们"]  # nothing else asked: kept
