"""A query mixing CJK text with words of another script (session 37's MCP review, finding 1).

``Caroline 参加了 LGBTQ support group 吗`` on a store of 20k Chinese and English memories
put ten Chinese paragraphs saying 参加了 ("attended") above the English memory "Caroline
attended an LGBTQ support group" (rank 11): the three characters 参加了 gave five terms
(参加, 加了, 参, 加, 了) against one term per English word. The CJK terms of a mixed query
now weigh the number of its bigrams over the number of its CJK terms
(:func:`md_cg.search.scripts_balanced`)."""

from __future__ import annotations

import random
from pathlib import Path

from md_cg import MdCG, Node
from md_cg.search import expand, scripts_balanced
from md_cg.synonyms import SynonymTable

QUERY = "Caroline 参加了 LGBTQ support group 吗"
#: Characters the synthetic Chinese memories are drawn from (none of 参加了, 李 or 雷).
CHARS = (
    "山水花鸟风云雨雪春夏秋冬东西南北城市乡村河流湖海"
    "森林草原沙漠高原平原铁路公路机场港口学校医院银行商店工厂农场"
)


def _terms(query: str) -> list[tuple[str, float]]:
    return expand(query, SynonymTable()).terms


def test_the_cjk_terms_of_a_mixed_query_weigh_its_bigrams_over_its_cjk_terms() -> None:
    terms = _terms(QUERY)
    assert terms == [
        ("carolin", 1.0),
        ("lgbtq", 1.0),
        ("support", 1.0),
        ("group", 1.0),
        ("参加", 1.0),
        ("加了", 1.0),
        ("参", 1.0),
        ("加", 1.0),
        ("了", 1.0),
    ]
    assert scripts_balanced(QUERY, terms, terms) == [
        ("carolin", 1.0),
        ("lgbtq", 1.0),
        ("support", 1.0),
        ("group", 1.0),
        ("参加", 0.4),
        ("加了", 0.4),
        ("参", 0.4),
        ("加", 0.4),
        ("了", 0.4),
    ]
    # one CJK character beside a word: no bigram, the character keeps its weight
    one = _terms("Atlas 表")
    assert scripts_balanced("Atlas 表", one, one) == [("atlas", 1.0), ("表", 1.0)]
    # digits are words of another script too (224 of CMRC's 1,596 questions hold some)
    year = _terms("2013年于乐")
    assert scripts_balanced("2013年于乐", year, year) == [
        ("2013", 1.0),
        ("年于", 0.4),
        ("于乐", 0.4),
        ("年", 0.4),
        ("于", 0.4),
        ("乐", 0.4),
    ]


def test_a_two_character_run_weighs_half() -> None:
    """Session 37's second MCP review: scaled by 1/3 (a bigram and its two characters), the
    name 李雷 in an English question weighed half an English word as common, and the memory
    saying it fell from rank 1 to 6. A run of two characters is one word: its terms weigh
    half; a longer run of the same query keeps its own scale."""
    query = "Which language does 李雷 prefer? 参加了"
    terms = _terms(query)
    assert scripts_balanced(query, terms, terms) == [
        ("languag", 1.0),
        ("prefer", 1.0),
        ("李雷", 0.5),
        ("参加", 0.4),
        ("加了", 0.4),
        ("李", 0.5),
        ("雷", 0.5),
        ("参", 0.4),
        ("加", 0.4),
        ("了", 0.4),
    ]


def test_a_query_of_one_script_keeps_its_weights() -> None:
    for query in ("参加了比赛", "Caroline LGBTQ support group"):
        terms = _terms(query)
        assert scripts_balanced(query, terms, terms) is terms
    # an English query's CJK synonyms (weight < 1) are not the query's own text: unchanged
    table = SynonymTable([["deadline", "截止日期"]])
    expansion = expand("Atlas deadline", table)
    assert any(w < 1.0 for _, w in expansion.terms)
    assert scripts_balanced("Atlas deadline", expansion.terms, expansion.terms) is expansion.terms


def _store(root: Path) -> MdCG:
    """300 Chinese memories (10 say 参加了), 400 English turns (Caroline in a quarter of
    them, LGBTQ, support and group in a few each), and the answer holding all four."""
    rng = random.Random(7)
    nodes = []
    for i in range(300):
        body = "".join(rng.choice(CHARS) for _ in range(30)) + "。"
        nodes.append(Node(id=f"zh-{i}", layer="knowledge", body=("他们参加了" if i % 30 == 0 else "") + body))
    words = [
        "lake",
        "paint",
        "dinner",
        "music",
        "hike",
        "garden",
        "movie",
        "book",
        "coffee",
        "train",
        "beach",
        "city",
    ]
    for i in range(400):
        extra = " ".join(w for w, m in (("LGBTQ", 40), ("support", 20), ("group", 21)) if i % m == 1)
        who = "Caroline" if i % 4 == 0 else "Melanie"
        body = f"{who}: the {rng.choice(words)} and the {rng.choice(words)} {extra}."
        nodes.append(Node(id=f"turn-{i}", layer="knowledge", body=body))
    nodes.append(
        Node(id="answer", layer="knowledge", body="Caroline attended an LGBTQ support group on 7 May 2023.")
    )
    store = MdCG(root)
    store.add_many(nodes)
    return store


def test_the_english_answer_to_a_chinese_framed_question_ranks_first(tmp_path: Path) -> None:
    """Before: the ten Chinese memories saying 参加了 first (9.96 each), the answer 11th."""
    with _store(tmp_path / "m") as store:
        results, _ = store.search(QUERY, k=12, record=False)
        assert [r.id for r in results[:2]] == ["answer", "turn-1"]
        assert results[0].evidence["terms"] == ["carolin", "lgbtq", "support", "group"]
        # the Chinese question alone still finds the Chinese memories, all ten first
        results, _ = store.search("他们参加了什么", k=10, record=False)
        assert sorted(r.id for r in results) == sorted(f"zh-{i}" for i in range(0, 300, 30))


def test_a_chinese_name_in_an_english_question_ranks_its_memory_first(tmp_path: Path) -> None:
    """Session 37's second MCP review: "Which language does 李雷 prefer?" put memories
    holding "language" and "prefer" above "李雷 prefers Rust" (scaled by 1/3, the name
    weighed less than "language"; here: the answer out of the top 5)."""
    rng = random.Random(5)
    nodes = []
    for i in range(300):
        body = "".join(rng.choice(CHARS) for _ in range(20)) + ("李" if i % 3 == 0 else "")
        nodes.append(Node(id=f"zh-{i}", layer="knowledge", body=body + ("雷" if i % 4 == 0 else "") + "。"))
    words = ["lake", "paint", "dinner", "music", "hike", "garden", "movie", "book", "coffee", "train"]
    for i in range(300):
        extra = "language" if i % 10 == 0 else ""
        body = f"Melanie: the {rng.choice(words)} and {rng.choice(words)} {extra}."
        nodes.append(Node(id=f"turn-{i}", layer="knowledge", body=body))
    for i in range(40):
        who = rng.choice(["Bob", "Alice", "Tom", "Ann"])
        nodes.append(Node(id=f"pref-{i}", layer="knowledge", body=f"{who} prefers the language number {i}."))
    nodes.append(Node(id="answer", layer="knowledge", body="李雷 prefers Rust for systems work."))
    with MdCG(tmp_path / "m") as store:
        store.add_many(nodes)
        results, _ = store.search("Which language does 李雷 prefer?", k=5, record=False)
        assert [r.id for r in results[:2]] == ["answer", "pref-0"]
        assert results[0].evidence["terms"] == ["prefer", "李雷", "李", "雷"]
