"""Session 41's MCP check on the final tree: "附近哪里可以充电" (where nearby can I charge)
got two ACCEPT hits -- a history paragraph and a metro station, each holding 附近 (nearby)
and 可以 (can): 4 of the request's 6 content characters, "2 of 3 words", so the thin rule's
weight test never ran. A modal verb (search.CJK_MODAL_WORDS: 可以, 能够, 应该, 应当, 必须)
says how a request asks, not what about: its characters are no content of a query holding
other content (a modal alone stays content)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_judge_irrelevant_s39 import ACCEPT, _judged
from test_thin_numbers_s41 import MEMORIES as NUMBER_MEMORIES

from md_cg import MdCG, Node
from md_cg.search import _query_units
from md_cg.text import query_terms

#: Two hits holding 附近 and 可以, an answer, and 附近 made common; the English memories of
#: test_thin_numbers_s41 make the store larger than search.THIN_MIN_DOCS.
MEMORIES = [
    ("history", "蜀汉军队已到，并在骆谷附近依山而守，李胜认为可以继续前进。"),
    ("metro", "大沙地站附近有商场，乘客可以乘搭往滘口的列车。"),
    ("charger", "公司楼下的停车场有电动车充电桩，员工可以免费充电。"),
    ("weather", "今天天气很好，适合去附近的公园散步。"),
    ("car", "我的汽车停在公司附近。"),
    ("school", "孩子的学校就在家附近。"),
    ("shop", "附近新开了一家面包店。"),
    *((i, b) for i, b in NUMBER_MEMORIES if b.isascii()),
]


def _store(tmp_path: Path) -> MdCG:
    s = MdCG(tmp_path / "m")
    s.add_many([Node(id=i, body=b, verification_basis="data") for i, b in MEMORIES])
    return s


def test_a_hit_holding_nearby_and_can_is_thin(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        judged = _judged(store, "附近哪里可以充电")
    assert judged["history"][0] == judged["metro"][0] == "DEFER"
    assert judged["history"][1].startswith("DEFER: holds 1 of 2 query words")
    # 充电 without 附近 (common here): the rarer word weighs enough, the answer stays
    assert judged["charger"] == ("ACCEPT", ACCEPT)


@pytest.mark.parametrize(
    ("query", "chars"),
    [
        ("附近哪里可以充电", ["附", "近", "充", "电"]),
        ("我应该怎么做", ["做"]),
        ("可以吗", ["可", "以"]),  # a modal alone stays content
    ],
)
def test_modal_characters_are_no_content_beside_other_content(query: str, chars: list[str]) -> None:
    assert _query_units([(t, 1.0) for t in query_terms(query)]).chars == chars
