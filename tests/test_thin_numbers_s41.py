"""Session 41: numbers and CJK characters in the thin rule's "more than half"
(search._Coverage.most, search._Coverage.numbers_only, search._thin).

Session 40's MCP user simulation found unrelated requests with ACCEPT hits that the thin
rule exempted as covering "more than half" of the request (its weight never asked):

* "what is 17 times 23?" -> turns dated "17 October" holding "time" (2 of 3 words), and a
  text holding 17 and 23 and nothing else of the request;
* "灰凤冠雉又名什么" -> another bird of the family holding 凤冠雉: 3 of 6 characters,
  rounded up to 2 of 3 words.

Now a number held counts for no word there (nor when choosing search.THIN_SHARE_ONE), two
CJK characters count as a word exactly (3 of 6 is half: judged by weight), and a hit
holding only numbers of a request naming a word is thin.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_judge_irrelevant_s39 import ACCEPT, ITSELF, _judged

from md_cg import MdCG, Node

#: Dated turns, a text of numbers, two birds of one family and one answer; the others make
#: the store larger than search.THIN_MIN_DOCS.
MEMORIES = [
    ("dated-a", "John: Hey Tim! Long time no talk. (1:50 pm on 17 October, 2023)"),
    ("dated-b", "Tim: I haven't had much time to read. (2:10 pm on 17 October, 2023)"),
    ("routes", "Route 17 and route 23 meet north of the river."),
    ("razor", "剃刀嘴凤冠雉分布于南美洲北部的森林。"),
    ("wattled", "肉垂凤冠雉是凤冠雉科的鸟类。"),
    ("grey", "灰凤冠雉又名白腹凤冠雉，生活在巴西。"),
    ("paint", "Melanie painted a lake at sunrise last year."),
    ("zoo", "The kids loved the zoo trip last summer."),
    ("bank", "The bank password changes every month."),
    ("dog", "Buddy the dog is afraid of thunder."),
    ("weather", "今天天气很好，适合去公园散步。"),
    ("car", "我的汽车停在公司楼下。"),
    ("order", "Order PRJ-4471 was shipped on March 3."),
    ("phone", "Mom's phone number is 555-0142."),
]


@pytest.fixture
def store(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "m")
    s.add_many([Node(id=i, body=b, verification_basis="data") for i, b in MEMORIES])
    return s


def test_a_number_held_beside_one_word_is_not_most_of_the_request(store: MdCG) -> None:
    """17 (a date) and "time" of "17 times 23": 2 of 3 words, but the number counts for none."""
    with store:
        judged = _judged(store, "what is 17 times 23?")
    basis = "DEFER: holds 2 of 3 query words ('17', 'time'); " + ITSELF
    assert [judged["dated-a"], judged["dated-b"]] == [("DEFER", basis), ("DEFER", basis)]


def test_a_hit_holding_only_numbers_of_the_request_is_thin(store: MdCG) -> None:
    with store:
        judged = _judged(store, "what is 17 times 23?")
    assert judged["routes"] == ("DEFER", f"DEFER: holds 2 of 3 query words ('17', '23'); {ITSELF}")


def test_three_of_six_characters_is_half_not_two_of_three_words(store: MdCG) -> None:
    """Other birds of the family hold 凤冠雉 of 灰凤冠雉又名: DEFER; the answer stays ACCEPT."""
    with store:
        judged = _judged(store, "灰凤冠雉又名什么")
    thin = "DEFER: holds 2 of 3 query words ('凤冠雉'); " + ITSELF
    assert {i: judged.get(i) for i in ("grey", "razor", "wattled")} == {
        "grey": ("ACCEPT", ACCEPT),
        "razor": ("DEFER", thin),
        "wattled": ("DEFER", thin),
    }


@pytest.mark.parametrize(
    ("query", "hit"),
    [
        ("what did Melanie paint", "paint"),
        ("when was order PRJ-4471 shipped", "order"),
        ("Mom's phone number 555-0142", "phone"),
        ("灰凤冠雉生活在哪里", "grey"),
    ],
)
def test_answers_holding_numbers_or_every_character_stay_accept(store: MdCG, query: str, hit: str) -> None:
    with store:
        assert _judged(store, query)[hit] == ("ACCEPT", ACCEPT)


def test_two_of_three_characters_stay_one_word_of_two(store: MdCG) -> None:
    """今天天气 has three characters (天 once): 天气 alone is 1 of 2 words, rounded up, as
    before -- counting exactly (2 of 3 characters, more than half) would have exempted it."""
    with store:
        store.add(Node(id="climate", body="那里的天气四季如春。", verification_basis="data"))
        judged = _judged(store, "今天天气怎么样")
    assert judged["climate"] == ("DEFER", f"DEFER: holds 1 of 2 query words ('天气'); {ITSELF}")
