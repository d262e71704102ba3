"""Changes of habit or state that start now are long (session 26 review).

"今天开始主人不吃猪肉了。" and "The user stopped eating pork today." were temporary: the
time word fired a term rule (or anchored the extractor's one_off) and no veto family
named the change, so after the TTL the preference was hidden and swept, and an older
memory that contradicts it became the only one served. The state-change and permanence
families now name such changes as families of phrasing; errands with the same words
(开始前, stop by, stop at ...) stay temporary.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.temporal import decide_retention

NOW = 1.0e9


def decide(text: str, temporal: str = ""):
    return decide_retention(text=text, temporal=temporal, now=NOW)


# (text, temporal, rule, marker as it occurs in the folded text)
CHANGES = [
    ("今天开始主人不吃猪肉了。", "", "term_guard_state_change", "天开始主人不"),
    ("今天开始主人改喝无糖可乐。", "", "term_guard_state_change", "天开始主人改"),
    ("今天开始主人改喝无糖可乐。", "one_off", "veto_state_change", "天开始主人改"),
    ("用户今天开始戒烟。", "", "term_guard_state_change", "天开始戒"),
    ("主人今天戒糖了。", "one_off", "veto_state_change", "戒糖"),
    ("本周开始团队只用飞书沟通。", "", "term_guard_state_change", "周开始团队只"),
    ("今天开始我负责前端代码评审。", "one_off", "veto_state_change", "天开始我负责"),
    ("今晚开始主人只喝温水。", "", "term_guard_state_change", "晚开始主人只"),
    ("现在开始主人不吃晚饭了，在控制体重。", "one_off", "veto_state_change", "在开始主人不"),
    ("今日起所有报销走线上系统。", "", "term_guard_permanence", "今日起"),
    ("自今晚起主人不碰咖啡。", "one_off", "veto_permanence", "自今晚起"),
    ("打今儿起主人早上只喝粥。", "", "term_guard_permanence", "今儿起"),
    ("昨天起主人再也不喝奶茶了。", "one_off", "veto_permanence", "昨天起"),
    ("The user stopped eating pork today.", "", "term_guard_state_change", "stopped eating"),
    ("Today the user stopped drinking coffee.", "one_off", "veto_state_change", "stopped drinking"),
    ("The user started taking insulin today.", "", "term_guard_state_change", "started taking"),
    ("Tomorrow the user starts wearing glasses.", "", "term_guard_state_change", "starts wearing"),
    ("This morning the user began taking melatonin.", "one_off", "veto_state_change", "began taking"),
    ("Today the user quits smoking.", "", "term_guard_state_change", "quits"),
    ("Tonight the user is giving up sugar.", "", "term_guard_state_change", "giving up"),
    ("Yesterday the user cut out caffeine.", "one_off", "veto_state_change", "cut out caffeine"),
    ("The user now drinks oat milk, since this morning.", "one_off", "veto_state_change", "now drinks"),
    ("From today the team uses Linear instead of Jira.", "one_off", "veto_permanence", "from today the"),
    ("Starting tonight the user sleeps by an open window.", "one_off", "veto_permanence", "starting tonight"),
    ("As of this morning the user drinks oat milk.", "", "term_guard_permanence", "as of this morning"),
]


@pytest.mark.parametrize(("text", "temporal", "rule", "marker"), CHANGES)
def test_a_change_that_starts_now_is_long(text: str, temporal: str, rule: str, marker: str) -> None:
    d = decide(text, temporal)
    assert (d.tier, d.expires_at, d.rule, d.marker) == ("long", None, rule, marker)


# Errands with the same words: the time word decides, as before.
ERRANDS = [
    ("今天开始前先把会议纪要发给我", "", "term_n1_relative_day", "今天"),
    ("明天开始之前提醒我带电脑", "", "term_n1_relative_day", "明天"),
    ("明天开始出差三天", "", "term_n1_relative_day", "明天"),
    ("今天开始放假，初三回来", "one_off", "temporal_one_off", "今天"),
    ("今晚开始下雨，出门带伞", "", "term_n1_relative_day", "今晚"),
    ("今天午饭改吃面条", "one_off", "temporal_one_off", "今天"),
    ("今天不吃晚饭了", "", "term_n1_relative_day", "今天"),
    ("今天下午戒指送去清洗", "one_off", "temporal_one_off", "今天"),
    ("today stop by the pharmacy", "", "term_n1_relative_day", "today"),
    ("stop the build at 5pm today", "", "term_n1_relative_day", "today"),
    ("remind me to stop at the bank tomorrow", "", "term_n1_relative_day", "tomorrow"),
    ("Today the user stopped by the pharmacy.", "one_off", "temporal_one_off", "today"),
    ("The meeting started late this morning.", "one_off", "temporal_one_off", "this morning"),
    ("Tomorrow send me the notes from today's standup", "", "term_n1_relative_day", "tomorrow"),
    ("This morning I started cooking at 6.", "one_off", "temporal_one_off", "this morning"),
]


@pytest.mark.parametrize(("text", "temporal", "rule", "marker"), ERRANDS)
def test_an_errand_with_the_same_words_stays_temp(text: str, temporal: str, rule: str, marker: str) -> None:
    d = decide(text, temporal)
    assert (d.tier, d.expires_at, d.rule, d.marker) == ("temp", NOW + 7 * 86400, rule, marker)


def test_the_known_false_longs_of_the_new_families() -> None:
    """What the new markers cost (docs/retention.md, known limits): errands kept long."""
    got = [
        (d.tier, d.rule, d.marker)
        for d in (
            decide("今天开始前不要打扰我"),
            decide("今天开始的比赛主人只看了半场", "one_off"),
            decide("Tonight the user started eating dinner late.", "one_off"),
        )
    ]
    assert got == [
        ("long", "term_guard_state_change", "天开始前不"),
        ("long", "veto_state_change", "天开始的比赛主人只"),
        ("long", "veto_state_change", "started eating"),
    ]


def test_a_change_that_starts_today_outlives_the_ttl_in_a_store(tmp_path: Path) -> None:
    """The end of the story the review told: the preference was hidden, then swept."""
    with MdCG(tmp_path / "m", ttl_seconds=0.2) as s:
        s.add(id="pork", body="今天开始主人不吃猪肉了。")
        s.add(id="stop", body="The user stopped eating pork today.", temporal="one_off")
        s.add(id="errand", body="today stop by the pharmacy")
        assert [s.get(i).retention_tier for i in ("pork", "stop", "errand")] == ["long", "long", "temp"]
        time.sleep(0.3)
        assert s.sweep(dry_run=False).removed == ("errand",)
        assert sorted(s.ids()) == ["pork", "stop"]
        assert s.get("pork").expires_at is None and s.get("stop").expires_at is None
