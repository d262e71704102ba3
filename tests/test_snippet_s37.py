"""A search result's snippet shows the matched word (session 37's MCP review, finding 4).

Before, the snippet was the start of the first line after the title that held a
matched term, cut to 160 characters: a CJK paragraph with the match at character
300 and a one-line dialogue turn whose match lay past its cut title showed no
matched word at all. Now the snippet is a window that starts shortly before the
first occurrence (at a clause end or a space), and a match in the title line is
shown when the title, as the reply shows it, does not show one.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from md_cg import MdCG, Node
from md_cg.index import title_of
from md_cg.render import SNIPPET_CHARS, clip, snippet
from md_cg.script import fold_accents

ZH = (
    "# 公司历史\n\n"
    + "该公司成立于上海，早期主要从事纺织品贸易，后来逐步扩展到电子产品与物流服务领域。" * 6
    + "二零一九年公司被青金石集团收购。\n"
)
TURN = (
    "Tim: The book mentioned that the trek was tough but worth it, with challenging terrain, long days, "
    "cold nights and then on the last day we finally met the famous sherpa Tenzing at base camp.\n\n"
    "(said on 3:35 pm on 26 December, 2023)\n"
)
TURN_TITLE = (
    "Tim: The book mentioned that the trek was tough but worth it, with challenging terrain, long days, "
    "cold nights and then…"
)
ZH_TERMS = ["青金", "金石", "石集", "集团", "青", "金", "石", "集"]  # what the search matched


def _fold(text: str) -> str:
    return fold_accents(text.casefold())


# -- the two cases the review observed ---------------------------------------------------


def test_a_cjk_paragraph_shows_the_match_at_character_300() -> None:
    paragraph = ZH.splitlines()[2]
    assert (len(paragraph), paragraph.index("青金石")) == (256, 248)  # past the 160 characters shown before
    assert snippet(ZH, ZH_TERMS) == "…后来逐步扩展到电子产品与物流服务领域。二零一九年公司被青金石集团收购。"


def test_a_dialogue_turn_shows_the_match_its_cut_title_does_not() -> None:
    assert clip(title_of(TURN), 120) == TURN_TITLE  # the title a reply shows: no "sherpa", no "Tenzing"
    want = "…finally met the famous sherpa Tenzing at base camp. (said on 3:35 pm on 26 December, 2023)"
    assert snippet(TURN, ["tenzing", "sherpa"], title=TURN_TITLE) == want
    assert snippet(TURN, ["tenzing", "sherpa"]) == want  # title=None: the body's title as the index cuts it


def test_a_title_that_shows_the_match_keeps_the_old_snippet() -> None:
    body = "Tim: we met the sherpa Tenzing at base camp.\n\n(said on 3:35 pm on 26 December, 2023)\n"
    assert snippet(body, ["tenzing"]) == "(said on 3:35 pm on 26 December, 2023)"
    # the title as a reply shows it decides: one cut before the word does not show it
    assert snippet(body, ["tenzing"], title="Tim: we met the…") == (
        "Tim: we met the sherpa Tenzing at base camp. (said on 3:35 pm on 26 December, 2023)"
    )
    long_title = "Tim: " + "we walked on and on, " * 8 + "and met Tenzing at base camp.\n(said on 1 May)\n"
    assert snippet(long_title, ["tenzing"], title="Tim: we walked…") == (
        "…on and on, and met Tenzing at base camp. (said on 1 May)"
    )


def test_through_the_mcp_server_both_replies_show_the_word(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    happy = "Notes\nAn unrelated first line about the weather.\nWe were happy there.\n"
    with MdCG(root) as store:
        store.add_many(
            [
                Node(id="zh-long", layer="knowledge", body=ZH),
                Node(id="turn", layer="contextual", body=TURN),
                Node(id="happy", layer="knowledge", body=happy),
            ]
        )
    server = create_server(root)

    async def first(client: Any, query: str) -> dict[str, Any]:
        result = await client.call_tool("search", {"query": query})
        assert not result.is_error, result.content
        data: dict[str, Any] = json.loads(result.content[0].text)
        return data["results"][0]

    async def run() -> None:
        async with Client(server) as client:
            zh = await first(client, "青金石集团")
            assert (zh["id"], zh["title"]) == ("zh-long", "公司历史")
            assert zh["snippet"] == "…后来逐步扩展到电子产品与物流服务领域。二零一九年公司被青金石集团收购。"
            turn = await first(client, "Tenzing sherpa")
            assert (turn["id"], turn["title"]) == ("turn", TURN_TITLE)
            assert turn["snippet"] == (
                "…finally met the famous sherpa Tenzing at base camp. (said on 3:35 pm on 26 December, 2023)"
            )
            # the stem "happi" is not in "happy": the word as the query said it is looked for too
            said = await first(client, "happy")
            assert (said["id"], said["matched"]) == ("happy", ["happy"])
            assert said["snippet"] == "We were happy there."

    try:
        anyio.run(run)
    finally:
        server.store.close()


# -- what does not change ------------------------------------------------------------------


def test_a_short_body_shows_as_before() -> None:
    body = "Travel notes\nThe train was late\nWe had lunch at the Café Müller\nThen home"
    assert snippet(body, ["cafe"], width=80) == "We had lunch at the Café Müller Then home"
    assert snippet(body, ["zzz"]) == "The train was late We had lunch at the Café Müller Then home"
    assert snippet("Just a title", ["title"]) == "Just a title"
    assert snippet("", ["x"]) == "" and snippet("\n  \n", ["x"]) == ""


def test_a_match_within_the_first_third_shows_the_line_from_its_start() -> None:
    line = "word " * 10 + "Tenzing" + " more" * 40
    assert line.index("Tenzing") == 50 <= SNIPPET_CHARS // 3
    assert snippet("Notes\n" + line, ["tenzing"]) == line[:159] + "…"


def test_no_match_shows_the_start_of_the_second_line_cut() -> None:
    body = "Title\n" + "alpha beta " * 30
    assert snippet(body, ["zzz"]) == ("alpha beta " * 30)[:159] + "…"


# -- folding ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "term", "want"),
    [
        ("ß" * 200 + " Tenzing climbs high", "tenzing", "…Tenzing climbs high"),  # ß folds to ss: longer
        ("e\u0301" * 150 + " the café olé", "cafe", "…the café olé"),  # the accent folds to nothing: shorter
        # İ casefolds to i and a combining dot, which the accent folding drops
        ("İ" * 200 + " istanbul trip", "ISTANBUL", "…istanbul trip"),
        ("ŉ" * 200 + " Tenzing", "tenzing", "…Tenzing"),  # ŉ folds to two characters
        ("ßæﬁ" * 60 + " Straße nach Süden", "strasse", "…Straße nach Süden"),  # a term that folds across ß
        ("ŒUVRE " * 40 + "Tenzing", "tenzing", "…ŒUVRE ŒUVRE ŒUVRE Tenzing"),
    ],
)
def test_positions_survive_folding_that_changes_lengths(line: str, term: str, want: str) -> None:
    assert snippet("Notes\n" + line, [term]) == want


def test_a_match_at_a_word_start_goes_before_one_inside_a_word() -> None:
    line = "restart " * 20 + "the art class begins"
    assert snippet("Notes\n" + line, ["art"]) == "…restart restart the art class begins"


def test_single_characters_are_looked_for_only_when_no_longer_term_occurs() -> None:
    body = "公司\n本月金额很大。\n二零一九年公司被青金石集团收购。"
    assert snippet(body, ["青金", "金石", "金"]) == "二零一九年公司被青金石集团收购。"
    assert snippet(body, ["金"]) == "本月金额很大。 二零一九年公司被青金石集团收购。"


# -- CJK back-off ----------------------------------------------------------------------------


def test_cjk_window_starts_after_a_clause_end_within_the_back_off() -> None:
    body = "前言\n" + "甲" * 100 + "，" + "乙" * 25 + "关键词" + "丁" * 100
    assert snippet(body, ["关键词"]) == "…" + "乙" * 25 + "关键词" + "丁" * 100


def test_cjk_window_without_a_clause_end_near_starts_20_characters_before() -> None:
    far = "前言\n" + "甲" * 100 + "，" + "乙" * 45 + "关键词" + "丁" * 100  # the comma 45 back: too far
    assert snippet(far, ["关键词"]) == "…" + "乙" * 20 + "关键词" + "丁" * 100
    none = "前言\n" + "甲" * 200 + "关键词" + "丁" * 200
    assert snippet(none, ["关键词"]) == "…" + "甲" * 20 + "关键词" + "丁" * 135 + "…"


def test_of_several_clause_ends_the_one_nearest_20_characters_before_is_taken() -> None:
    line = "甲" * 100 + "。" + "乙" * 10 + "、" + "丙" * 17 + "；" + "丁" * 2 + "关键词" + "戊" * 100
    # after 。 32 back, after 、 20 back, after ； 2 back: the one after 、
    assert snippet("前言\n" + line, ["关键词"]) == "…" + "丙" * 17 + "；" + "丁" * 2 + "关键词" + "戊" * 100


# -- the bound and the cuts -----------------------------------------------------------------


def test_cuts_never_part_a_character_from_its_mark() -> None:
    end = snippet("T\n" + "a" * 158 + "e\u0301" + "z" * 50)
    assert end == "a" * 158 + "…"  # not "a"*158 + "e" + "…", which leaves the accent behind
    joined = snippet("T\n" + "a" * 158 + "\U0001f468\u200d\U0001f469" + "z" * 50)
    assert joined == "a" * 158 + "…"
    # 20 characters before the match falls on an accent: the window starts at the next letter
    start = snippet("T\n" + "e\u0301" * 100 + "-keyword" + "z" * 200, ["keyword"])
    assert start == "…" + "e\u0301" * 9 + "-keyword" + "z" * 132 + "…" and len(start) == 160


def test_a_long_window_is_exactly_the_width() -> None:
    line = "w" * 300 + " needle " + "v" * 300  # the word start nearest 20 before: the needle's own
    got = snippet("T\n" + line, ["needle"])
    assert got == "…needle " + "v" * 151 + "…" and len(got) == SNIPPET_CHARS
    assert snippet("T\n" + line, ["needle"], width=40) == "…needle " + "v" * 31 + "…"
    spaced = "a" * 300 + " " + "bc " * 20 + "needle " + "v" * 300
    got = snippet("T\n" + spaced, ["needle"])
    assert got == "…" + "bc " * 7 + "needle " + "v" * 130 + "…" and len(got) == SNIPPET_CHARS


def test_every_snippet_is_within_its_width_and_shows_a_match() -> None:
    rng = random.Random(37)
    words = ["Straße", "café", "e\u0301", "İstanbul", "青金石", "，", "。", "甲乙丙丁", "ﬁsh", '"q"']
    words.append("x" * 30)
    terms = ["strasse", "cafe", "istanbul", "青金", "fish", "needle"]
    for _ in range(400):
        lines = [
            "".join(rng.choice(words) + rng.choice(["", " "]) for _ in range(rng.randint(0, 90)))
            for _ in range(rng.randint(1, 4))
        ]
        body = "\n".join(lines)
        picked = rng.sample(terms, rng.randint(0, 3))
        width = rng.randint(1, 200)
        got = snippet(body, picked, width=width)
        assert len(got) <= width, (body, picked, width)
        kept = [" ".join(line.split()) for line in lines if line.strip()]
        if width < 60 or not any(t in _fold(" ".join(kept)) for t in picked):
            continue
        # a match shows in the snippet, or (a match in the title line alone) in the title shown
        later = len(kept) > 1 and any(t in _fold(" ".join(kept[1:])) for t in picked)
        shown = _fold(got if later else got + title_of(body))
        assert any(t in shown for t in picked), (body, picked, width, got)
