"""Session 40 review of session 39's thin-evidence rule (search._covered, search._thin).

Two bugs, each an answer deferred:

* a synonym phrase sharing a word with the query covered only that word: "hash map" held
  by "a hash table" (the table's synonym) was 'holds 1 of 2 query words (hash)', 二分查找
  by 二分搜索 and 开发者 by 开发人员 the same -- the shared term ("hash", 二分, 开发) is
  an own term of the query, so the phrase was never "all synonym evidence";
* a scoped handle seeing a handful of memories in a store where more than
  search.COMMON_HIDDEN_LIMIT are hidden from it was judged as over the whole store (the
  few-memories rule, search.THIN_MIN_DOCS, counted the hidden ones): "when is the Atlas
  sprint release" deferred "The Atlas project ships on March 3." for an agent seeing 5
  memories once another agent had 300.

The rest pins what the review checked and found right: exact names, ids and numbers stay
ACCEPT; mixed Chinese and English; a store under THIN_MIN_DOCS; request-only queries.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_judge_irrelevant_s39 import ACCEPT, ITSELF, _judged

from md_cg import MdCG, Node, Scope

#: Answers and unrelated memories: at least search.THIN_MIN_DOCS of them.
MEMORIES = {
    "hashtable": "We store sessions in a hash table keyed by user id.",
    "binsearch": "这道题可以用二分搜索解决。",
    "devs": "她是一名开发人员。",
    "citymap": "The map of the city hangs in the hall.",
    "caroline": "Caroline moved to Berlin in 2023 to study painting.",
    "order": "Order PRJ-4471 was shipped on March 3.",
    "key": "The deploy key fingerprint is a1b2c3d4e5.",
    "phone": "Mom's phone number is 555-0142.",
    "car": "我的汽车停在公司楼下。",
    "birthday": "Caroline 的生日是五月十二日。",
    "garden": "Melanie planted tomatoes and basil in the garden.",
    "zoo": "The kids loved the zoo trip last summer.",
    "bank": "The bank password changes every month.",
    "dog": "Buddy the dog is afraid of thunder.",
    "weather": "今天天气很好，适合去公园散步。",
}


def _nodes(memories: dict[str, str], scope: str | None = None) -> list[Node]:
    return [Node(id=i, body=b, verification_basis="data", agent_scope=scope) for i, b in memories.items()]


@pytest.fixture
def store(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "m")
    s.add_many(_nodes(MEMORIES))
    return s


@pytest.mark.parametrize(
    ("query", "hit"),
    [("hash map", "hashtable"), ("二分查找", "binsearch"), ("开发者", "devs")],
)
def test_a_synonym_phrase_sharing_a_word_with_the_query_covers_the_query(
    store: MdCG, query: str, hit: str
) -> None:
    with store:
        assert _judged(store, query)[hit] == ("ACCEPT", ACCEPT)


def test_a_hit_holding_only_the_shared_word_stays_thin(store: MdCG) -> None:
    """The city map holds "map" of "hash map" and no synonym: 1 of 2, deferred."""
    with store:
        judged = _judged(store, "hash map")
        assert judged["citymap"] == ("DEFER", f"DEFER: holds 1 of 2 query words ('map'); {ITSELF}")


@pytest.mark.parametrize(
    ("query", "hits"),
    [
        ("Caroline", {"caroline", "birthday"}),
        ("PRJ-4471", {"order"}),
        ("4471", {"order"}),
        ("a1b2c3d4e5", {"key"}),
        ("555-0142", {"phone"}),
        ("汽车", {"car"}),
        ("车", {"car"}),
        ("天气", {"weather"}),
        ("Caroline 的生日", {"birthday"}),
        ("Caroline生日", {"birthday"}),
        ("thanks Caroline", {"caroline", "birthday"}),
        ("请问汽车在哪", {"car"}),
    ],
)
def test_exact_names_ids_numbers_and_mixed_queries_stay_accept(
    store: MdCG, query: str, hits: set[str]
) -> None:
    with store:
        judged = _judged(store, query)
        assert {i for i, (state, _) in judged.items() if state == "ACCEPT"} == hits


def test_the_name_alone_of_a_mixed_query_is_thin(store: MdCG) -> None:
    """ "Caroline 的生日": the memory with her name but not 生日 covers 1 of 2 words."""
    with store:
        basis = f"DEFER: holds 1 of 2 query words ('carolin'); {ITSELF}"
        assert _judged(store, "Caroline 的生日")["caroline"] == ("DEFER", basis)


SCOPED = {
    "atlas": "The Atlas project ships on March 3.",
    "paris": "The user lives in Paris.",
    "dog": "Buddy the dog is afraid of thunder.",
    "tea": "The user drinks green tea.",
    "car": "The car is blue.",
}
OTHER_WORDS = [
    "apple",
    "river",
    "stone",
    "music",
    "green",
    "table",
    "window",
    "garden",
    "market",
    "city",
    "train",
    "office",
    "school",
]


@pytest.mark.parametrize("others", [150, 300])
def test_a_scoped_handle_seeing_few_memories_keeps_the_few_memories_rule(tmp_path: Path, others: int) -> None:
    """Agent a sees 5 memories; agent b's (150: hidden ones subtracted from the counts,
    300: more than COMMON_HIDDEN_LIMIT, kept) change nothing of a's judgement."""
    root = tmp_path / "m"
    bodies = {
        f"b{i}": " ".join(OTHER_WORDS[(i * 7 + j) % len(OTHER_WORDS)] for j in range(6)) + f" {i}."
        for i in range(others)
    }
    with MdCG(root) as s:
        s.add_many(_nodes(SCOPED, "a") + _nodes(bodies, "b"))
    with MdCG(root, scope=Scope(agent="a")) as a:
        assert _judged(a, "when is the Atlas sprint release") == {"atlas": ("ACCEPT", ACCEPT)}


def test_the_few_memories_rule_over_a_small_store(tmp_path: Path) -> None:
    """Under THIN_MIN_DOCS visible memories a hit holding the rare word of the query is
    ACCEPT ("Atlas" of "when is the Atlas sprint release"); a request-only query's are not."""
    with MdCG(tmp_path / "m") as s:
        s.add_many(_nodes(SCOPED))
        assert _judged(s, "when is the Atlas sprint release") == {"atlas": ("ACCEPT", ACCEPT)}
        assert {state for state, _ in _judged(s, "thanks!").values()} <= {"DEFER"}


#: Tim's turns: "tim", "enjoy" and "play" are common in them, the question's other
#: words (popular, music, composer, tunes) none holds -- they weigh the most.
TIM = {
    "piano": "Tim: I enjoy playing different songs on the piano, my favourite is a film theme.",
    **{
        f"t{i}": f"Tim: I enjoy {what} and playing {game} with friends."
        for i, (what, game) in enumerate(
            [
                ("reading fantasy books", "chess"),
                ("hiking", "basketball"),
                ("cooking curry", "cards"),
                ("travelling to Ireland", "board games"),
                ("writing letters", "football"),
                ("learning French", "tennis"),
                ("visiting castles", "video games"),
                ("baking bread", "darts"),
                ("watching films", "golf"),
                ("drawing maps", "volleyball"),
            ]
        )
    },
}


def test_a_hit_covering_four_words_of_a_long_question_is_not_thin(tmp_path: Path) -> None:
    """4 of 8 words weighing less than THIN_SHARE (0.4): DEFER before session 40
    (``search.THIN_COVERS_ENOUGH``). The other turns hold 3 of them and are filler."""
    with MdCG(tmp_path / "m") as s:
        s.add_many(_nodes(TIM))
        judged = _judged(s, "Which popular music composer's tunes does Tim enjoy playing on the piano?")
        assert judged == {"piano": ("ACCEPT", ACCEPT)}
