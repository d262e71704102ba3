"""Session 39: requests the store has no answer to got ACCEPT hits ("fit to act on").

The MCP user simulation (54k mixed Chinese/English store) found 8 of 40 irrelevant queries
with an ACCEPT hit: "你好" for a text holding 你 and 好 apart; "how do I reset my router
password" for "Maria acknowledges nature as a reset for our souls" (one rare word of three);
"Taylor Swift tour dates" for a paragraph on the publisher Taylor & Francis; "asdf qwerty
zxcv" for a tablet with a QWERTY keyboard. Such a hit's evidence is thin now
(search._covered, search._thin): DEFER, its rank kept, left out of inject. The answers
beside them stay ACCEPT. bench/judge_irrelevant.py measures the rules on LoCoMo and CMRC.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node

ACCEPT = 'ACCEPT: fact with no applicability conditions, verification basis "data"'
#: what a DEFER basis of the search says of such a memory after its reason (session 42)
ITSELF = 'the memory itself: fact with no applicability conditions, verification basis "data"'

#: Memories of the four shapes, answers beside them and unrelated ones (at least
#: search.THIN_MIN_DOCS: over fewer, only the session 28 rule defers).
MEMORIES = {
    "nihao-apart": "你说的那本小说很好看，借我看看。",
    "nature": "Maria acknowledges nature as a reset for our souls.",
    "bank": "The bank password changes every month.",
    "router": "To reset the router password, hold the reset button for ten seconds.",
    "francis": "The journal is published by Taylor & Francis in London.",
    "tablet": "The tablet ships with a QWERTY keyboard cover.",
    "kids": "The kids loved the zoo trip last summer.",
    "scattered": "他把奖金兑换成现金，一共三千元，汇款的效率很高。",
    "thanks": "Thanks to the team for the launch party on Friday.",
    "tour": "Our city tour starts at the old harbour.",
    "dates": "Jon keeps the dates of every dance contest in a notebook.",
    "garden": "Melanie planted tomatoes and basil in the garden.",
}


@pytest.fixture
def store(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "m")
    s.add_many([Node(id=i, body=b, verification_basis="data") for i, b in MEMORIES.items()])
    return s


def _judged(store: MdCG, query: str) -> dict[str, tuple[str | None, str | None]]:
    results, _ = store.search(query, record=False)
    return {r.id: (r.state, r.basis) for r in results if not r.filler}


@pytest.mark.parametrize(
    ("query", "hit", "basis"),
    [
        ("你好", "nihao-apart", "holds 0 of 1 query words (none)"),
        ("how do I reset my router password", "nature", "holds 1 of 3 query words ('reset')"),
        ("how do I reset my router password", "bank", "holds 1 of 3 query words ('password')"),
        ("Taylor Swift tour dates", "francis", "holds 1 of 4 query words ('taylor')"),
        ("asdf qwerty zxcv", "tablet", "holds 1 of 3 query words ('qwerti')"),
        ("怎么给孩子办签证", "kids", "holds 1 of 3 query words ('孩子')"),
        ("欧元兑日元的汇率是多少", "scattered", "holds 0 of 3 query words (none)"),
        ("thanks!", "thanks", "the query names nothing to look for (only request words)"),
    ],
)
def test_a_hit_of_an_unrelated_request_is_deferred(store: MdCG, query: str, hit: str, basis: str) -> None:
    with store:
        judged = _judged(store, query)
        assert judged[hit] == ("DEFER", f"DEFER: {basis}; {ITSELF}")


def test_unrelated_requests_get_no_accept_and_inject_nothing(store: MdCG) -> None:
    with store:
        for query in (
            "你好",
            "asdf qwerty zxcv",
            "Taylor Swift tour dates",
            "thanks!",
            "欧元兑日元的汇率是多少",
        ):
            assert {state for state, _ in _judged(store, query).values()} == {"DEFER"}, query
            assert store.inject(query) == [], query


def test_the_answers_beside_them_stay_accept(store: MdCG) -> None:
    with store:
        store.add(id="nihao", body="他每天见到门卫都会说一声你好。", verification_basis="data")
        store.add(id="rate", body="今天欧元兑日元的汇率是160。", verification_basis="data")
        assert _judged(store, "你好")["nihao"] == ("ACCEPT", ACCEPT)
        assert _judged(store, "how do I reset my router password")["router"] == ("ACCEPT", ACCEPT)
        assert _judged(store, "欧元兑日元的汇率是多少")["rate"] == ("ACCEPT", ACCEPT)
        assert _judged(store, "what keyboard does the tablet have")["tablet"] == ("ACCEPT", ACCEPT)
        assert _judged(store, "who publishes the journal")["francis"] == ("ACCEPT", ACCEPT)
        assert [i.id for i in store.inject("how do I reset my router password")] == ["router"]
        assert [i.id for i in store.inject("你好")] == ["nihao"]


def test_the_same_hits_keep_their_ranks(store: MdCG) -> None:
    with store:
        for query in (
            "你好",
            "how do I reset my router password",
            "Taylor Swift tour dates",
            "asdf qwerty zxcv",
        ):
            judged = [(r.id, r.score) for r in store.search(query, record=False)[0]]
            plain = [(r.id, r.score) for r in store.search(query, record=False, judge=False)[0]]
            assert judged == plain, query
