"""Session 40, MCP user simulation on a 4,618-memory Chinese/English store: a reply that
only acknowledges ("ok thanks", "sure", "got it", 好的, 收到, 没问题), passed on to
``search`` or ``inject`` as agents do, got ACCEPT hits -- "好的" five CMRC paragraphs
holding 好的 (a football player's 很好的预感...), "sure" -> "Jon: Sure, I am always there
for you!" -- and filled the prompt: 17 of 17 such replies. Such a query asks for nothing
(search.is_acknowledgement): every hit is thin, nothing is injected. A question that
starts with one ("ok, when is ...") is judged as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_judge_irrelevant_s39 import ACCEPT, _judged

from md_cg import MdCG, Node
from md_cg.search import is_acknowledgement

MEMORIES = {
    "thanks": "Melanie: Thanks! They were scared but we reassured them.",
    "sure": "Jon: Sure, I am always there for you!",
    "gotit": "Got it: the deploy key rotates every Monday.",
    "okay": "The okay button on the old remote is broken.",
    "hao": "他有很好的预感和想像力，好的球员都这样。",
    "shoudao": "收到包裹后请在三天内确认。",
    "wenti": "没问题的方案往往最简单。",
    "garden": "Melanie planted tomatoes and basil in the garden.",
    "berlin": "Caroline moved to Berlin in 2023 to study painting.",
    "car": "我的汽车停在公司楼下。",
    "order": "Order PRJ-4471 was shipped on March 3.",
    "phone": "Mom's phone number is 555-0142.",
}
ACKS = [
    "ok thanks",
    "OK",
    "sure",
    "Got it, thanks!",
    "sounds good",
    "thank you",
    "好的",
    "收到",
    "没问题！",
    "好的谢谢",
    "ok 好的",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MdCG:
    root: Path = tmp_path_factory.mktemp("ack") / "m"
    s = MdCG(root)
    for i, body in MEMORIES.items():
        s.add(Node(id=i, layer="knowledge", body=body, verification_basis="data"))
    return s


@pytest.mark.parametrize("query", ACKS)
def test_an_acknowledgement_gets_no_accept_hit_and_injects_nothing(store: MdCG, query: str) -> None:
    assert is_acknowledgement(query)
    judged = _judged(store, query)
    assert [i for i, (state, _) in judged.items() if state == "ACCEPT"] == []
    assert list(store.inject(query)) == []


@pytest.mark.parametrize(
    ("query", "hit"),
    [
        ("ok, when did Caroline move to Berlin?", "berlin"),
        ("sure thing -- what did Melanie plant in the garden?", "garden"),
        ("好的，我的汽车停在哪里？", "car"),
        ("okay button remote", "okay"),
    ],
)
def test_a_question_after_an_acknowledgement_is_judged_as_before(store: MdCG, query: str, hit: str) -> None:
    assert not is_acknowledgement(query)
    assert _judged(store, query)[hit] == ("ACCEPT", ACCEPT)


@pytest.mark.parametrize(
    ("query", "ack"),
    [
        ("", False),
        ("...", False),
        ("nook", False),
        ("thank you so much for the recipe", False),
        ("我的爱好", False),
        ("好的开始", False),
        ("ok, got it, thanks", True),
        ("嗯嗯，明白了", True),
        ("Yes!", True),
    ],
)
def test_what_counts_as_an_acknowledgement(query: str, ack: bool) -> None:
    assert is_acknowledgement(query) is ack


def test_inject_keeps_a_title_line_longer_than_the_title(tmp_path: Path) -> None:
    """MCP user simulation F3: a chat turn whose first line is longer than the title
    (index.TITLE_MAX, 120) was cut in the title and its text held only the date line --
    the answer ("clear my mind") in neither. The text now holds that line whole."""
    line = (
        "Melanie: Running has been a great way to destress and clear my mind after long days "
        "at work, and it gives me time to think about what really matters to me."
    )
    assert len(line) > 120
    with MdCG(tmp_path / "m") as s:
        s.add(
            Node(
                id="run",
                layer="knowledge",
                body=f"{line}\n(4:33 pm on 12 July, 2023)",
                verification_basis="data",
            )
        )
        s.add(
            Node(
                id="short",
                layer="knowledge",
                body="Melanie runs.\nShe runs to destress.",
                verification_basis="data",
            )
        )
        items = {i.id: i for i in s.inject("why does Melanie run to destress")}
    assert items["run"].text == f"{line} (4:33 pm on 12 July, 2023)"
    assert items["run"].title.endswith("…") and "really matters" not in items["run"].title
    assert items["short"].text == "She runs to destress."
