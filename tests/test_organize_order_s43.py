"""Organize's ``order`` guard, session 43: three kinds of swapped facts it did not place.

* Chinese numerals gave no order token: "会议从三点改到五点" / "会议从五点改到三点" (the
  English "from 3pm to 5pm" / "from 5pm to 3pm" was caught in session 42) were ``near`` 1.0.
  A numeral run that names a number (三点, 周三) is now a number's token, as "3pm" is.
* A capital "A" naming a thing was the stop word "a": "server A replaced server B" /
  "server B replaced server A" were ``near`` 1.0 ("server" twice is placed nowhere, so
  only "b" was left). An "A" after a word that is no stop word (or after a CJK character)
  is now a content word of its own.
* Chinese 被 was never read actively: 猫被狗追 / 狗被猫追 and 猫被狗追 / 猫追狗 (the chaser
  swapped) were ``near`` 1.0. "X被Y V" is now also read as "Y V X".

Each such ``near`` let an apply archive a memory holding the other fact. The same fact
said both ways stays ``near`` (both directions of each pair are compared).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.dedupe import NEAR_THRESHOLD, compare

SWAPPED = [
    ("会议从三点改到五点。", "会议从五点改到三点。"),
    ("周三去北京，周五去上海。", "周五去北京，周三去上海。"),
    ("第二名是小王，第三名是小李。", "第三名是小王，第二名是小李。"),
    ("Server A replaced server B.", "Server B replaced server A."),
    ("server A replicates to server B", "server B replicates to server A"),
    ("Plan A is the backup for plan B.", "Plan B is the backup for plan A."),
    ("服务器A替换了服务器B。", "服务器B替换了服务器A。"),
    ("猫被狗追。", "狗被猫追。"),
    ("猫被狗追。", "猫追狗。"),
    ("小明被老师批评了。", "小明批评了老师。"),
    ("小明被老师批评了。", "老师被小明批评了。"),
    ("Tom被Bob打了。", "Tom打了Bob。"),
]

SAME = [
    ("会议从三点改到五点。", "会议从三点改到五点"),
    ("两只猫和一只狗。", "一只狗和两只猫。"),
    ("会议三点开始，五点结束。", "会议五点结束，三点开始。"),
    ("Server A replaced server B.", "Server A replaced server B"),
    ("Vitamin A and vitamin D.", "Vitamin D and vitamin A."),
    ("Buying A Car", "Buying a car"),
    ("The user went to school a lot.", "The user went to school a lot"),
    ("服务器a替换了服务器b。", "服务器A替换了服务器B。"),
    ("猫被狗追。", "狗追猫。"),
    ("小明被老师批评了。", "老师批评了小明。"),
    ("小明昨天被老师批评了。", "老师昨天批评了小明。"),
    ("我的被子被猫抓破了。", "猫抓破了我的被子。"),
    ("Tom被Bob打了。", "Bob打了Tom。"),
]


@pytest.mark.parametrize(("a", "b"), SWAPPED)
def test_swapped_facts_are_not_near(a: str, b: str) -> None:
    assert (compare(a, b).score, compare(a, b).guard) == (0.0, "order")
    assert (compare(b, a).score, compare(b, a).guard) == (0.0, "order")


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_fact_stays_near(a: str, b: str) -> None:
    assert compare(a, b).guard is None and compare(b, a).guard is None
    assert compare(a, b).score >= NEAR_THRESHOLD and compare(b, a).score == compare(a, b).score


def test_a_is_still_the_article_where_it_is_one() -> None:
    """After a stop word, at the start, or before a capitalised word, "A" stays the article."""
    assert compare("The user is A fan of tea.", "The user is a fan of tea.").score == 1.0
    assert compare("A server replaced the router.", "a server replaced the router").score == 1.0


def test_swaps_through_organize_are_new_and_the_same_fact_near(tmp_path: Path) -> None:
    store = MdCG(tmp_path / "s")
    held = {"meeting": "会议从三点改到五点。", "servers": "Server A replaced server B.", "chase": "猫被狗追"}
    for node_id, body in held.items():
        store.add(id=node_id, body=body, layer="knowledge")
    said_now = {
        "会议": "会议从五点改到三点。",
        "Servers": "Server B replaced server A.",
        "追": "狗被猫追。",
        "追赶": "猫追狗。",
        "追逐": "狗追猫。",
    }
    candidates = [{"layer": "knowledge", "title": t, "content": c} for t, c in said_now.items()]
    items = store.organize("dryRun", candidates=candidates).to_dict()["items"]
    said = [(i["verdict"], i["match"] and i["match"]["id"], i.get("repeats")) for i in items]
    # 猫追狗 is the fact of the candidate before it (狗被猫追, "the dog is chased by the cat")
    assert said == [
        ("new", None, None),
        ("new", None, None),
        ("new", None, None),
        ("repeat", None, 2),
        ("near", "chase", None),
    ]
