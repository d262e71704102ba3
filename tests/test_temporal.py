"""Retention decision (md_cg.temporal): kinds, decision order, vetoes, term rules, marker files."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest
from conftest import REPO

from md_cg.errors import InvalidArgumentError, MarkerFileError
from md_cg.temporal import (
    DEFAULT_TTL_SECONDS,
    RULE_CODES,
    TERM_RULES,
    VETO_FAMILIES,
    Markers,
    decide_retention,
    load_markers,
    normalize_temporal,
    normalize_tier,
    parse_markers,
    read_marker_file,
    shipped_markers,
    store_marker_path,
)

sys.path.insert(0, str(REPO / "bench"))
import labelled_sets

NOW = 1_700_000_000.0


def decide(text: str, temporal: object = "", **kwargs: object):
    return decide_retention(text=text, temporal=temporal, now=NOW, **kwargs)


# -- the closed set ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("one_off", "one_off"),
        (" ONE_OFF\n", "one_off"),
        ("Recurring", "recurring"),
        ("durable", "durable"),
        ("unknown", "unknown"),
        (None, ""),
        ("", ""),
        ("   ", ""),
        ("once", "unknown"),
        ("one-off", "unknown"),
        ("oneoff", "unknown"),
        ("一次性", "unknown"),
        ("temp", "unknown"),
        (42, "unknown"),
        (True, "unknown"),
        ({"kind": "one_off"}, "unknown"),
        (["one_off"], "unknown"),
    ],
)
def test_normalize_temporal_only_trims_and_folds(value: object, kind: str) -> None:
    assert normalize_temporal(value) == kind


def test_unknown_and_unset_take_the_same_path_but_stay_apart() -> None:
    unknown, unset = decide("Dinner with Sam tonight", "unknown"), decide("Dinner with Sam tonight", None)
    assert (unknown.tier, unknown.rule) == (unset.tier, unset.rule) == ("temp", "term_n1_relative_day")
    assert (unknown.temporal, unset.temporal) == ("unknown", "")


@pytest.mark.parametrize(("value", "tier"), [(None, ""), ("", ""), ("temp", "temp"), (" LONG ", "long")])
def test_normalize_tier(value: object, tier: str) -> None:
    assert normalize_tier(value) == tier


@pytest.mark.parametrize("value", ["temporary", "short", 1, True])
def test_a_bad_tier_is_an_error_naming_it(value: object) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        normalize_tier(value)
    assert info.value.name == "tier"
    assert str(info.value) == f"retention tier must be one of temp, long (or absent), got {value!r}"


# -- decision order ------------------------------------------------------------------------


def test_an_explicit_tier_wins_over_everything() -> None:
    forced = decide("The user lives in Porto", "durable", tier="temp", ttl_seconds=60.0)
    assert (forced.tier, forced.expires_at, forced.rule) == ("temp", NOW + 60.0, "explicit_tier")
    kept = decide("Dentist at 3pm today", "one_off", tier="long")
    assert (kept.tier, kept.expires_at, kept.rule, kept.temporal) == (
        "long",
        None,
        "explicit_tier",
        "one_off",
    )


def test_one_off_with_an_anchor_is_temp_for_the_ttl() -> None:
    d = decide("Dentist appointment at 3pm today", "one_off")
    assert d == dataclasses.replace(
        d, tier="temp", expires_at=NOW + DEFAULT_TTL_SECONDS, rule="temporal_one_off"
    )
    assert d.marker == "today"
    assert decide("Dentist today", "one_off", ttl_seconds=3600).expires_at == NOW + 3600


def test_numbers_and_frequencies_are_no_veto_a_clock_time_anchors() -> None:
    d = decide("Set a 7 o'clock alarm", "one_off")
    assert (d.tier, d.rule, d.marker) == ("temp", "temporal_one_off", "set a 7 o'clock alarm")
    for text, clock in (
        ("Pick up the suit at 7pm", "7pm"),
        ("取西装，7点", "7点"),
        ("Flight on the 14th", "14th"),
    ):
        d = decide(text, "one_off")
        assert (d.tier, d.rule, d.marker) == ("temp", "temporal_one_off", clock)
    assert decide("帮我定个7点的闹钟", "one_off").tier == "temp"


@pytest.mark.parametrize(
    ("text", "rule", "marker"),
    [
        ("Remember that the train leaves at 9 tomorrow", "veto_remember", "remember"),
        ("别忘了今晚给花浇水", "veto_remember", "别忘"),
        ("We agreed to meet at the station at 8 tomorrow", "veto_agreement", "agreed"),
        ("我们约好明天一起晒太阳", "veto_agreement", "约好"),
        ("The user goes running every morning at 6", "veto_habit", "every"),
        ("主人每天早上七点起床跑步", "veto_habit", "每"),
        ("The user is allergic to shellfish since this morning", "veto_durable_fact", "allergic"),
        ("昨天住宿舍，宿舍在三楼", "veto_durable_fact", "宿舍"),
        ("From now on answer in British English, starting today", "veto_permanence", "from now on"),
        ("以后都用中文回答，今天开始", "veto_permanence", "以后都"),
        ("The user switched to a standing desk today", "veto_state_change", "switched"),
        ("主人上个月搬到了深圳", "veto_state_change", "搬到"),
        ("Tomorrow is the deadline to book the trip for next month", "veto_far_future", "next month"),
        ("明年春天去日本，今天订了机票", "veto_far_future", "明年"),
    ],
)
def test_each_veto_family_keeps_a_one_off_long(text: str, rule: str, marker: str) -> None:
    d = decide(text, "one_off")
    assert (d.tier, d.expires_at, d.rule, d.marker) == ("long", None, rule, marker)
    assert rule.removeprefix("veto_") in VETO_FAMILIES


@pytest.mark.parametrize(
    ("text", "tier", "rule", "marker", "one_off_rule"),
    [
        ("今天主人告诉我他的女儿叫小美", "long", "term_guard_durable_fact", "女儿叫", "veto_durable_fact"),
        ("刚才主人说他是素食者", "long", "term_guard_durable_fact", "素食", "veto_durable_fact"),
        ("昨天确定了：以后所有新服务都用 PostgreSQL", "long", "term_guard_permanence", "以后所有",
         "veto_permanence"),
        ("Today the user told me their daughter's name is Mia", "long", "term_guard_durable_fact", "name",
         "veto_durable_fact"),
        ("今天学到：Python 的 GIL 让同一时刻只有一个线程执行字节码", "long", "term_guard_learned", "学到",
         "veto_learned"),
        ("Tonight I found out the API key for prod is stored in Vault", "long", "term_guard_durable_fact",
         "api key", "veto_durable_fact"),
        ("Tonight I found out the build cache lives on the NAS", "long", "term_guard_durable_fact", "lives",
         "veto_durable_fact"),
        ("Tonight I found out why the build is slow", "long", "term_guard_learned", "found out why",
         "veto_learned"),
        ("This time the deploy failed because the disk filled up; root cause: log rotation was off", "long",
         "term_guard_learned", "root cause", "veto_learned"),
        ("Remind me: the server root password is hunter2", "long", "term_guard_durable_fact", "password is",
         "veto_durable_fact"),
        ("Just now the user corrected me: their surname is spelled Smyth", "long", "term_guard_durable_fact",
         "surname", "veto_durable_fact"),
        ("Just now the user corrected me about the deadline", "long", "term_guard_learned", "corrected",
         "veto_learned"),
        ("刚刚主人纠正我：他姓欧阳，不姓欧", "long", "term_guard_durable_fact", "他姓", "veto_durable_fact"),
        ("刚刚主人纠正我的说法", "long", "term_guard_learned", "纠正", "veto_learned"),
        ("Deploy procedure updated today: use make deploy", "long", "term_guard_durable_fact",
         "procedure updated",
         "veto_durable_fact"),
        ("The meeting notes for today: we chose Postgres as the database for all services", "long",
         "term_guard_state_change", "chose postgres as", "veto_state_change"),
        ("用户今天开始吃素", "long", "term_guard_durable_fact", "开始吃素", "veto_durable_fact"),
        ("The user is vegetarian since today", "long", "term_guard_durable_fact", "vegetarian",
         "veto_durable_fact"),
        # one-offs that stay temp
        ("Remind me to call the plumber tomorrow", "temp", "term_n1_relative_day", "tomorrow",
         "temporal_one_off"),
        ("明天下午三点提醒我开会", "temp", "term_n1_relative_day", "明天", "temporal_one_off"),
        ("今天下午去驿站取快递", "temp", "term_n1_relative_day", "今天", "temporal_one_off"),
        ("Tonight the user is going to the cinema with Anna", "temp", "term_n1_relative_day", "tonight",
         "temporal_one_off"),
        ("刚刚点了一杯咖啡，十分钟后送到", "temp", "term_n2_just_now", "刚刚", "temporal_one_off"),
        # known limits, as decided: a rescheduling reads as a move (errs long); a trailing
        # 'today' within the window still decides (see the reason test below)
        ("today's standup is moved to 3pm", "long", "term_guard_state_change", "moved to",
         "veto_state_change"),
        ("first memory today", "temp", "term_n1_relative_day", "today", "temporal_one_off"),
    ],
)  # fmt: skip
def test_durable_facts_behind_a_time_word_stay_long(
    text: str, tier: str, rule: str, marker: str, one_off_rule: str
) -> None:
    """Session 25: Chinese durable facts (叫/姓/素食/确定/以后/密码) and things learned,
    found out or corrected were made temporary when a time word opened them."""
    d = decide(text, None)
    assert (d.tier, d.rule, d.marker) == (tier, rule, marker)
    one_off = decide(text, "one_off")
    assert (one_off.tier, one_off.rule) == (tier, one_off_rule)


#: Review 25b (D1, high): one-off errands the session-25 veto words keep long (unset: the
#: term guard of the family; one_off: the veto itself, same marker). Review 25c restored the bare
#: words, since binding them to their context made durable facts temporary (data loss), so
#: these 21 are KNOWN FALSE LONGS, accepted by the principle that every doubt resolves to long:
#: a false long keeps clutter, a false temp deletes a memory. The labelled rows s01-s21 stay
#: labelled temp and count as recall misses.
ERRANDS_WITH_A_VETO_WORD = [
    ("Remind me to tell John the password tomorrow", "durable_fact", "password"),
    ("明天告诉我结果", "learned", "告诉我"),
    ("今天发现钥匙落在车里了", "learned", "发现"),
    ("Tonight we chose the Thai place", "state_change", "chose"),
    ("今天下午确定一下会议室", "state_change", "确定"),
    ("明天下午去姓王的医生那里看病", "durable_fact", "姓"),
    ("今天百姓超市打折", "durable_fact", "姓"),
    ("今天晚上吃素", "durable_fact", "吃素"),
    ("tomorrow ask Bob for the api key", "durable_fact", "api key"),
    ("today lunch was kept in the fridge", "durable_fact", "kept in"),
    ("tonight's dinner: went with sushi", "state_change", "went with"),
    ("just now found out the train is late", "learned", "found out"),
    ("提醒我明天以后再打电话", "permanence", "以后"),
    ("以后再说, 明天提醒我", "permanence", "以后"),
    ("明天开会，告知小李", "learned", "告知"),
    ("tomorrow pick up the kids from their lessons", "learned", "lessons"),
    ("yesterday I realized I left the stove on", "learned", "realized"),
    ("明天的步骤：先去银行", "durable_fact", "步骤"),
    ("明天去看看新的账号余额", "durable_fact", "账号"),
    ("remind me tomorrow to look at the procedure doc", "durable_fact", "procedure"),
    ("今天中午确定吃什么", "state_change", "确定"),
]

#: Review 25c (high): durable facts 2b98961's context-bound words and its reminder-opening
#: exemption made temporary (swept after the TTL); each was long at 4ddefa2 and is long again,
#: unset (rule, marker) and one_off (rule, marker).
DURABLE_FACTS_WITH_A_BARE_VETO_WORD = [
    ("This morning I set the wifi password to hunter2.", "term_guard_durable_fact", "password",
     "veto_durable_fact", "password"),
    ("Changed the router password to hunter2 this morning.", "term_guard_durable_fact", "password",
     "veto_durable_fact", "password"),
    ("Router password: hunter2 (changed this morning).", "term_guard_durable_fact", "password",
     "veto_durable_fact", "password"),
    ("The API key for Stripe is sk_live_abc, rotated this morning.", "term_guard_durable_fact", "api key",
     "veto_durable_fact", "api key"),
    ("This morning we chose Postgres for the billing service.", "term_guard_state_change", "chose",
     "veto_state_change", "chose"),
    # no term marker opens it: long by default unset
    ("At lunch we settled on Postgres for billing.", "default_long", None, "veto_state_change", "settled on"),
    ("We discovered this morning that the outage came from a full disk.", "term_guard_learned", "discovered",
     "veto_learned", "discovered"),
    ("I realized this morning that the outage came from a full disk.", "term_guard_learned", "realized",
     "veto_learned", "realized"),
    ("This morning I found out that Sam is left-handed.", "term_guard_learned", "found out",
     "veto_learned", "found out"),
    ("今天上午确定用Postgres做计费数据库。", "term_guard_state_change", "确定", "veto_state_change", "确定"),
    ("今天敲定计费服务用Postgres。", "term_guard_state_change", "敲定", "veto_state_change", "敲定"),
    ("今天选定Postgres作为计费数据库。", "term_guard_state_change", "选定", "veto_state_change", "选定"),
    ("今天才知道他是左撇子。", "term_guard_learned", "才知道", "veto_learned", "才知道"),
    ("今天的经验：部署前先备份。", "term_guard_learned", "经验", "veto_learned", "经验"),
    ("今天下午更新了部署步骤：先备份再发布。", "term_guard_durable_fact", "步骤", "veto_durable_fact",
     "步骤"),
    ("今天新账号：sam99。", "term_guard_durable_fact", "账号", "veto_durable_fact", "账号"),
    # a reminder request opening the text no longer exempts it from a veto
    ("别提醒我吃药了，医生今天说我不再需要吃了。", "term_guard_state_change", "不再", "veto_state_change",
     "不再"),
    ("Remind me tomorrow that I no longer use Slack.", "term_guard_state_change", "no longer",
     "veto_state_change", "no longer"),
]  # fmt: skip

#: Review 25b (D2, medium): durable facts behind a time word, in a reported-speech frame
#: about the user. Each is long, unset (term_guard_reported, the frame) and one_off (veto_reported).
REPORTED_FACTS = [
    ("Today the user said he's diabetic", "the user said"),
    ("今天主人说他有糖尿病", "主人说"),
    ("Today the user mentioned they are left-handed", "the user mentioned"),
    ("tonight the user said she doesn't drink alcohol", "the user said"),
    ("今天主人说他不喝酒", "主人说"),
    ("今天主人说：钥匙放在门垫下面", "主人说"),
    ("Today the user said the spare key is under the mat", "the user said"),
    ("today the user revealed the garage code is 4412", "the user revealed"),
    ("今天主人告诉他：钥匙在门垫下面", "主人告诉"),
    ("刚才主人说他开特斯拉", "主人说"),
    ("today the user told the assistant she's pregnant", "the user told"),
]


@pytest.mark.parametrize(("text", "family", "marker"), ERRANDS_WITH_A_VETO_WORD)
def test_errands_with_a_bare_veto_word_are_kept_long(text: str, family: str, marker: str) -> None:
    """Known false longs (clutter, not loss): a bare 姓 matches 百姓, 确定/发现/告诉我/chose/
    found out/lessons veto anywhere, also in a reminder request. Review 25b made them temp
    with context-bound words, which made durable facts temp too (review 25c)."""
    d = decide(text, None)
    assert (d.tier, d.rule, d.marker) == ("long", f"term_guard_{family}", marker)
    one_off = decide(text, "one_off")
    assert (one_off.tier, one_off.rule, one_off.marker) == ("long", f"veto_{family}", marker)


@pytest.mark.parametrize(
    ("text", "rule", "marker", "one_off_rule", "one_off_marker"), DURABLE_FACTS_WITH_A_BARE_VETO_WORD
)
def test_durable_facts_with_a_bare_veto_word_stay_long(
    text: str, rule: str, marker: str | None, one_off_rule: str, one_off_marker: str
) -> None:
    """Review 25c: 'password' only as 'password is', 'chose' only as 'chose ... as', 确定 only
    as 确定了, no 发现/才知道/经验/步骤/账号, and the reminder-opening exemption made these temp."""
    d = decide(text, None)
    assert (d.tier, d.expires_at, d.rule, d.marker) == ("long", None, rule, marker)
    one_off = decide(text, "one_off")
    assert (one_off.tier, one_off.expires_at, one_off.rule, one_off.marker) == (
        "long",
        None,
        one_off_rule,
        one_off_marker,
    )


@pytest.mark.parametrize(("text", "marker"), REPORTED_FACTS)
def test_a_reported_fact_behind_a_time_word_stays_long(text: str, marker: str) -> None:
    d = decide(text, None)
    assert (d.tier, d.rule, d.marker) == ("long", "term_guard_reported", marker)
    one_off = decide(text, "one_off")
    assert (one_off.tier, one_off.rule, one_off.marker) == ("long", "veto_reported", marker)
    assert one_off.reason.endswith(
        "but the text states what the user said about something, with no moment named after it"
        f" (it holds after the day it was said) ({marker!r})"
    )


@pytest.mark.parametrize(
    ("text", "tier", "rule"),
    [
        # a moment named after the frame: the user reported a one-off
        ("主人说晚上想吃面条", "temp", "temporal_one_off"),
        ("Today the user said she will be late tonight", "temp", "temporal_one_off"),
        # a reminder request opening the text is vetoed like any other text (review 25c removed
        # the exemption of 2b98961: it made "Remind me tomorrow that I no longer use Slack" temp);
        # these two are errands kept long, known false longs
        ("Remind me tomorrow to ask what we decided on", "long", "veto_state_change"),
        ("提醒我明天问问主人说的那家店", "long", "veto_reported"),
        ("Remind me: the server root password is hunter2", "long", "veto_durable_fact"),
        ("Remind me tomorrow: we always deploy on Fridays", "long", "veto_habit"),
        ("提醒我：以后都用中文回答", "long", "veto_permanence"),
        # context-bound words still veto
        ("今天学到：主人姓氏是欧阳", "long", "veto_durable_fact"),
        ("Yesterday we chose Postgres as the database", "long", "veto_state_change"),
        ("Today it turns out the NAS is the build cache", "long", "veto_learned"),
        ("Tonight Bob told me that the wifi password is on the fridge", "long", "veto_durable_fact"),
    ],
)
def test_reported_frames_and_reminder_openings(text: str, tier: str, rule: str) -> None:
    d = decide(text, "one_off")
    assert (d.tier, d.rule) == (tier, rule)


def test_a_term_reason_says_where_the_marker_is() -> None:
    """'first memory today' was said to be opened by its last word."""
    d = decide("first memory today", None)
    assert d.reason == (
        "the one-off marker 'today' (n1_relative_day) begins at word 3 of the text, within the first 12 "
        "a term rule reads (a CJK character counts as one) and no veto marker is in the text"
    )
    opened = decide("Tomorrow call the plumber", None)
    assert opened.reason == (
        "the one-off marker 'tomorrow' (n1_relative_day) opens the text and no veto marker is in the text"
    )
    plain = decide("The user likes tea", None)
    assert plain.reason == "no temporal kind and no one-off marker is in its first 12 words"


def test_veto_reason_differs_from_the_rule_code() -> None:
    d = decide("我们约好明天一起晒太阳", "one_off")
    assert d.reason == "the extractor marked it one_off, but the text states an agreement or promise ('约好')"


def test_one_off_without_an_anchor_stays_long_unless_the_check_is_off() -> None:
    d = decide("The user is left-handed", "one_off")
    assert (d.tier, d.rule) == ("long", "veto_no_anchor")
    off = decide("The user is left-handed", "one_off", require_anchor=False)
    assert (off.tier, off.rule) == ("temp", "temporal_one_off")


@pytest.mark.parametrize("kind", ["durable", "recurring", " Durable "])
def test_durable_and_recurring_are_long_and_no_term_rule_runs(kind: str) -> None:
    d = decide("Today set an alarm for 7", kind)
    assert (d.tier, d.rule) == ("long", f"temporal_{kind.strip().lower()}")


@pytest.mark.parametrize(
    ("text", "rule", "marker"),
    [
        ("Call the plumber tomorrow about the leak", "term_n1_relative_day", "tomorrow"),
        ("昨晚楼上装修太吵没睡好", "term_n1_relative_day", "昨晚"),
        ("刚刚点了一份外卖", "term_n2_just_now", "刚刚"),
        ("This time we took the train to Lyon", "term_n3_this_once", "this time"),
        ("帮我定个7点的闹钟", "term_n4_reminder_request", "定个7点的闹钟"),
        ("Set a 7 o'clock alarm", "term_n4_reminder_request", "set a 7 o'clock alarm"),
        ("这周末去郊外露营", "term_n5_near_date", "这周末"),
    ],
)
def test_term_rules_fire_for_unknown_or_unset(text: str, rule: str, marker: str) -> None:
    for kind in ("", "unknown", "one-off"):
        d = decide(text, kind)
        assert (d.tier, d.expires_at, d.rule, d.marker) == ("temp", NOW + DEFAULT_TTL_SECONDS, rule, marker)


def test_term_rules_need_the_marker_near_the_start() -> None:
    late = "The user has been writing a long novel about a lighthouse keeper and mentioned it again today"
    assert decide(late).rule == "default_long"
    early = "The user mentioned it again today"
    assert decide(early).rule == "term_n1_relative_day"


def test_a_number_alone_never_makes_a_term_temp() -> None:
    for text in ("Meeting with the landlord at 10", "7点的会议室订好了", "2024-05-03 review"):
        d = decide(text)
        assert (d.tier, d.rule) == ("long", "default_long")


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("Tomorrow we said we'd review the draft together", "term_guard_agreement"),
        ("从今天起主人不再喝咖啡", "term_guard_permanence"),
        ("用户说：今天以后所有报告都用中文写。", "term_guard_permanence"),  # review, session 24
        ("今天起报告一律用中文", "term_guard_permanence"),
        ("Set an alarm for 7 every weekday", "term_guard_habit"),
        ("Today I learned the user works at a bakery", "term_guard_durable_fact"),
    ],
)
def test_the_veto_guards_the_term_rules(text: str, rule: str) -> None:
    d = decide(text)
    assert (d.tier, d.rule) == ("long", rule)


def test_latin_markers_match_whole_words_only() -> None:
    # "unlikely" is not "likes"; "renamed" is not "name"; "dealer" is not "deal".
    for text in ("Unlikely to rain this evening", "The dealer renamed the car today"):
        assert decide(text, "one_off").rule == "temporal_one_off"
    # Each part of a gap marker is a whole word: "settle ... alarms" is not "set...alarm".
    assert decide("Settle the alarms dispute with Bob").rule == "default_long"
    assert decide("Set the kitchen alarm").rule == "term_n4_reminder_request"
    assert decide("Please reset my alarm").rule == "default_long"


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"ttl_seconds": -5.0}, "ttl_seconds"),
        ({"ttl_seconds": math.nan}, "ttl_seconds"),
        ({"ttl_seconds": True}, "ttl_seconds"),
        ({"ttl_seconds": "7d"}, "ttl_seconds"),
    ],
)
def test_bad_ttl_is_an_error_naming_it(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        decide("today", "one_off", **kwargs)
    assert info.value.name == name
    assert str(info.value).startswith("ttl_seconds must be a positive finite number of seconds, got ")


def test_bad_now_and_text_are_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="now must be a finite number of seconds, got inf"):
        decide_retention(text="today", temporal="one_off", now=math.inf)
    with pytest.raises(InvalidArgumentError, match="text must be a string, got bytes"):
        decide_retention(text=b"today", temporal="one_off", now=NOW)  # type: ignore[arg-type]
    assert decide_retention(text=None, temporal="one_off", now=NOW).rule == "veto_no_anchor"


def test_decisions_are_frozen() -> None:
    d = decide("today", "one_off")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.tier = "long"  # type: ignore[misc]


# -- marker files --------------------------------------------------------------------------------


def test_the_shipped_file_is_complete_and_has_no_digits() -> None:
    markers = shipped_markers()
    assert set(markers.veto) == set(VETO_FAMILIES) and all(markers.veto.values())
    assert set(markers.term) == set(TERM_RULES) and all(markers.term.values())
    assert markers.anchor and markers.problem is None
    every = [m for ms in (*markers.veto.values(), *markers.term.values(), markers.anchor) for m in ms]
    assert not [m for m in every if any(ch.isdigit() for ch in m)]
    assert load_markers(None) is markers


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_store_file_extends_the_shipped_lists(tmp_path: Path) -> None:
    path = store_marker_path(tmp_path)
    assert path == tmp_path / ".mdcg" / "retention_markers.json"
    assert load_markers(path) is shipped_markers()  # absent file: the shipped lists
    write(path, {"version": 1, "veto": {"durable_fact": ["Kirby"]}, "term": {"n2_just_now": ["Moments ago"]}})
    markers = load_markers(path)
    assert markers.problem is None
    assert markers.veto["durable_fact"][-1] == "kirby"
    assert len(markers.veto["durable_fact"]) == len(shipped_markers().veto["durable_fact"]) + 1
    assert decide("Kirby visited today", "one_off", markers=markers).rule == "veto_durable_fact"
    assert decide("Kirby visited today", "one_off").rule == "temporal_one_off"
    assert decide("Moments ago the kettle broke", markers=markers).rule == "term_n2_just_now"


def test_anchors_can_be_added() -> None:
    markers = shipped_markers().extended(anchor=["at the gym"])
    assert decide("The user pulled a muscle at the gym", "one_off").rule == "veto_no_anchor"
    assert (
        decide("The user pulled a muscle at the gym", "one_off", markers=markers).rule == "temporal_one_off"
    )


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "expected a JSON object, got list"),
        (b'{"version": 2}', "unsupported version 2 (this md-cg reads 1)"),
        (
            b'{"vetos": {}}',
            "unknown key 'vetos' (expected version, veto, term, anchor, veto_except, term_except)",
        ),
        (b'{"veto": {"weather": ["rain"]}}', "veto: unknown name 'weather'; expected one of: remember,"),
        (b'{"veto": {"habit": "daily"}}', "veto.habit must be a list of strings"),
        (b'{"veto": {"habit": ["every 2 days"]}}', "veto.habit entry 1: 'every 2 days' contains a digit"),
        (b'{"term": {"n1_relative_day": [7]}}', "term.n1_relative_day entry 1: expected a string, got int 7"),
        (b'{"anchor": ["*"]}', "anchor entry 1: '*': '*' has no letter or CJK character"),
        (b'{"anchor": ["a*b"]}', "anchor entry 1: 'a*b': '*' is allowed only at the end of a word"),
        (b'{"anchor": ["\xe5\x8d\x88*"]}', "'*' is for Latin words"),
    ],
)
def test_a_broken_store_file_never_breaks_a_write(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / ".mdcg" / "retention_markers.json"
    path.parent.mkdir()
    path.write_bytes(content)
    with pytest.raises(MarkerFileError) as info:
        read_marker_file(path)
    assert info.value.path == str(path) and reason in info.value.reason
    markers = load_markers(path)
    assert markers.problem == str(info.value)
    assert markers.problem.startswith(f"{path}: invalid retention marker file: ")
    # Writes go on, but nothing automatic is temp while the store's lists are unknown.
    blocked = decide("Dentist today", "one_off", markers=markers)
    assert (blocked.tier, blocked.rule) == ("long", "markers_unreadable")
    assert markers.problem in blocked.reason
    assert decide("Call the plumber tomorrow", markers=markers).rule == "markers_unreadable"
    assert decide("Dentist today", "one_off", tier="temp", markers=markers).tier == "temp"
    assert decide("No marker at all", markers=markers).rule == "default_long"


def test_an_unreadable_store_file_is_a_problem_too(tmp_path: Path) -> None:
    path = tmp_path / "retention_markers.json"
    path.mkdir()  # a directory where the file should be
    assert (
        load_markers(path).problem == f"{path}: invalid retention marker file: cannot read it: Is a directory"
    )


def test_parse_markers_complete_requires_every_list() -> None:
    with pytest.raises(MarkerFileError, match="veto: no markers for remember, agreement"):
        parse_markers({"veto": {"habit": ["daily"]}}, "x.json", complete=True)
    lists = parse_markers({"_comment": "ignored", "veto": {"habit": ["Daily", "daily"]}}, "x.json")
    assert lists.veto == {"habit": ("daily",)} and lists.term == {} and lists.anchor == ()


def test_markers_compare_by_content() -> None:
    a = Markers({"habit": ("Daily",)}, {}, ())
    assert a == Markers({"habit": ("daily",)}, {}, ()) and a.veto["habit"] == ("daily",)
    assert a.veto_hit("He runs daily") is not None and a.veto_hit("He ran today") is None


# -- the labelled set ---------------------------------------------------------------------------------

ROWS = labelled_sets.load(labelled_sets.TEMPORAL_SET)


def test_the_labelled_set_is_what_the_issue_asks_for() -> None:
    assert len(ROWS) == 554 and len({r["id"] for r in ROWS}) == len(ROWS)
    assert {r["lang"] for r in ROWS} == {"zh", "en"}
    assert {"one_off", "agreement", "habit", "durable", "state_change", "alarm"} <= {
        r["category"] for r in ROWS
    }
    assert {r["expected_tier"] for r in ROWS} == {"temp", "long"}
    assert {"one_off", "unknown", ""} <= {r["temporal"] for r in ROWS}
    vetoed = [r for r in ROWS if r["temporal"] == "one_off" and r["expected_tier"] == "long"]
    assert len(vetoed) == 185


#: review26c's errands kept long (docs/retention.md, known limits): 现在开始 (no term marker),
#: quitting, cut back on, now goes, as of this morning, starting now, gives up, started drinking,
#: now takes, quit, from today the, effective immediately, stopped going to, cutting down on, 记得,
#: started taking, is now, quit, effective today (until 5pm), starting tonight, stopped taking.
REVIEW26C_FALSE_LONGS = [
    "k047", "k067", "k068", "k069", "k070", "k072", "k073", "k074", "k075", "k077", "k078",
    "k079", "k081", "k082", "k111", "k118", "k119", "k122", "k123", "k124", "k125",
]  # fmt: skip


def test_temp_precision_is_one_and_recall_is_as_measured() -> None:
    first = labelled_sets.retention_scores([r for r in ROWS if not r["batch"].startswith("review")])
    assert first["precision"] == 1.0 and (first["true"], first["decided"], first["expected"]) == (89, 89, 106)
    # Review 25b: the 11 reported facts are long. Its 21 errands (s01-s21, labelled temp) are
    # long: KNOWN FALSE LONGS since review 25c restored the bare veto words (binding them to
    # their context made 18 durable facts temp, review25c); every doubt resolves to long.
    second = labelled_sets.retention_scores([r for r in ROWS if r["batch"] == "review25b"])
    errands = [f"s{i:02d}" for i in range(1, 22)]
    assert (second["true"], second["decided"], second["expected"], second["wrong"]) == (0, 0, 21, errands)
    # Review 25c: the 18 durable facts are long (with 2b98961's words all 18 were temp).
    third = labelled_sets.retention_scores([r for r in ROWS if r["batch"] == "review25c"])
    assert (third["true"], third["decided"], third["expected"], third["wrong"]) == (0, 0, 0, [])
    # Session 26 (review26, fix-retention): 32 changes of habit or state that start at a named
    # time (今天开始主人不吃猪肉了, The user stopped eating pork today) are long; before, 26 of them
    # were temp. review26b was written after the markers and run once: 0 false temps, 4 false
    # longs (x15 记得, x17 下周 inside 一下周报, x20 天开始...只, x28 started eating). Since
    # fix-retention2 开始前/开始的 are exceptions, so w14 今天开始前不要打扰我 and x20
    # 今天开始的比赛主人只看了半场 are temp again.
    fourth = labelled_sets.retention_scores([r for r in ROWS if r["batch"] == "review26"])
    assert (fourth["true"], fourth["decided"], fourth["expected"], fourth["wrong"]) == (28, 28, 28, [])
    fifth = labelled_sets.retention_scores([r for r in ROWS if r["batch"] == "review26b"])
    assert (fifth["true"], fifth["decided"], fifth["expected"]) == (11, 11, 14)
    assert fifth["wrong"] == ["x15", "x17", "x28"]
    # review26c (fix-retention2): the second review's 60 durable changes (16 were temp: 今早开始,
    # 开始戴, 确诊, began using, from tonight the, effective tomorrow, off dairy...) are all long;
    # of its 66 errands 21 are known false longs (docs/retention.md, known limits). Before:
    # 23 true of 38 decided, 60 expected.
    sixth = labelled_sets.retention_scores([r for r in ROWS if r["batch"] == "review26c"])
    assert (sixth["true"], sixth["decided"], sixth["expected"]) == (39, 39, 60)
    assert sixth["wrong"] == REVIEW26C_FALSE_LONGS
    # review26d: written after the markers of fix-retention2 and run once: 13 true of 14
    # decided, one false temp (y09 "Since this morning the user takes her coffee black.");
    # "since this morning" is a permanence marker since. Before fix-retention2: 8 of 15.
    seventh = labelled_sets.retention_scores([r for r in ROWS if r["batch"] == "review26d"])
    assert (seventh["true"], seventh["decided"], seventh["expected"], seventh["wrong"]) == (13, 13, 13, [])
    old = labelled_sets.retention_scores(ROWS[:314])
    assert (old["true"], old["decided"], old["expected"]) == (94, 95, 133)
    existing = labelled_sets.retention_scores(ROWS[:402])  # the rows before fix-retention2: 131/132
    assert (existing["true"], existing["decided"], existing["expected"]) == (133, 134, 175)
    scores = labelled_sets.retention_scores(ROWS)
    # Session 25's review rows: one false temp left, r15 "first memory today" (a trailing
    # 'today' within the window; docs/retention.md, known limits). Before the session-25
    # markers the review rows gave 13 false temps (5 true of 18 decided).
    assert (scores["true"], scores["decided"], scores["expected"]) == (185, 186, 248)
    assert scores["wrong"] == [
        "z18", "z19", "z21", "z61", "e14", "e16", "e19", "e62",
        "a8", "b4", "b7", "b13", "b15", "d1", "g7", "g9", "g11", "r15", "r18", *errands,
        "x15", "x17", "x28", *REVIEW26C_FALSE_LONGS,
    ]  # fmt: skip
    # No durable, recurring or agreement statement ends up temp (but the known r15).
    for row in ROWS:
        if row["category"] in ("durable", "habit", "agreement", "state_change", "remember"):
            want = "temp" if row["id"] == "r15" else "long"
            assert decide(row["text"], row["temporal"]).tier == want, row["id"]


def test_rule_hits_on_the_labelled_set() -> None:
    # The 314 rows before session 26; the markers of session 26 changed none of their decisions.
    hits = labelled_sets.retention_scores(ROWS[:314])["hits"]
    assert set(hits) <= set(RULE_CODES)
    assert hits == {
        "default_long": 21,
        "temporal_durable": 7,
        "temporal_one_off": 58,
        "temporal_recurring": 4,
        "term_guard_agreement": 3,
        "term_guard_durable_fact": 13,  # review 25c: errands s01 s07 s09 s19 (password, 姓, api key, 账号)
        "term_guard_habit": 4,
        "term_guard_learned": 5,  # review 25c: errands s03 s15 s17 (发现, 告知, realized)
        "term_guard_reported": 6,
        "term_guard_permanence": 4,  # z55 今天起...改用 (a state change too); review 25c: errand s13 以后
        "term_guard_remember": 2,
        "term_guard_state_change": 6,  # review 25c: errands s05 s11 s21 (确定, went with)
        "term_n1_relative_day": 22,
        "term_n2_just_now": 3,
        "term_n3_this_once": 2,
        "term_n4_reminder_request": 6,
        "term_n5_near_date": 4,
        "veto_agreement": 13,
        "veto_durable_fact": 39,  # f5 素食; review 25c: g15 "password manager" (was veto_no_anchor, long
        # either way), errands s06 s08 s10 s18 s20, facts u01-u04 u15 u16
        "veto_reported": 5,
        "veto_far_future": 1,
        "veto_habit": 17,
        "veto_learned": 8,  # review 25c: errands s02 s12 s16, facts u07 u08 u09 u13 u14
        "veto_no_anchor": 35,
        # session 41: g12 "The user is diabetic ..." (was veto_no_anchor, long either way)
        "veto_lasting_event": 1,
        "veto_permanence": 7,  # review 25c: errand s14 以后
        "veto_remember": 3,
        "veto_state_change": 15,  # review 25c: errand s04, facts u05 u06 u10 u11 u12 u17 u18
    }
    # Session 26's 88 rows (review26, review26b): the changes that start now are long by
    # the state-change and permanence families; the errands by n1 or the extractor's one_off.
    assert labelled_sets.retention_scores(ROWS[314:402])["hits"] == {
        "temporal_one_off": 17,  # errand x20 (开始的 an exception since fix-retention2)
        "term_guard_durable_fact": 1,
        "term_guard_far_future": 1,  # errand x17: 下周 inside 一下周报
        "term_guard_habit": 1,
        "term_guard_permanence": 8,
        "term_guard_remember": 1,  # errand x15: 记得
        "term_guard_state_change": 14,
        "term_n1_relative_day": 22,  # errand w14 (开始前 an exception since fix-retention2)
        "veto_durable_fact": 1,
        "veto_habit": 2,
        # v26 "now drinks oat milk, since this morning", v32 "Since yesterday ... anymore":
        # since this morning / since yesterday (permanence, checked first) since fix-retention2
        "veto_permanence": 7,
        "veto_state_change": 13,  # errand x28 (started eating)
    }
    # fix-retention2's 152 rows (review26c, review26d).
    assert labelled_sets.retention_scores(ROWS[402:])["hits"] == {
        "default_long": 4,
        "temporal_one_off": 29,
        "term_guard_agreement": 1,
        "term_guard_durable_fact": 11,
        "term_guard_habit": 3,
        "term_guard_permanence": 10,
        "term_guard_remember": 1,
        "term_guard_state_change": 22,
        "term_n1_relative_day": 23,
        "veto_agreement": 1,
        "veto_durable_fact": 14,
        "veto_habit": 4,
        "veto_no_anchor": 1,
        "veto_permanence": 9,
        "veto_state_change": 19,
    }


def test_without_the_anchor_check_precision_drops() -> None:
    scores = labelled_sets.retention_scores(ROWS, require_anchor=False)
    # session 41: g12 "The user is diabetic ..." (one_off, no moment named) is vetoed by the
    # lasting-event family: a false temp fewer without the anchor check (223 -> 222, 131 -> 130)
    assert (scores["true"], scores["decided"]) == (194, 222)
    old = labelled_sets.retention_scores(ROWS[:314], require_anchor=False)
    assert (old["true"], old["decided"]) == (103, 130)


def test_marker_patterns_are_compiled_on_first_use_only() -> None:
    """Compiling every family took ~80-140 ms at a process's first stamped write;
    a text that opens with no term marker needs none of the patterns."""
    markers = Markers(shipped_markers().veto, shipped_markers().term, shipped_markers().anchor)
    assert markers._compiled == {}
    plain = decide("Alice prefers green tea in the afternoon.", None, markers=markers)
    assert (plain.tier, plain.rule) == ("long", "default_long")
    assert markers._compiled == {}
    timed = decide("Tomorrow at 3pm: dentist with Dr. Lee", None, markers=markers)
    assert (timed.tier, timed.rule) == ("temp", "term_n1_relative_day")
    assert sorted(markers._compiled) == ["term", "veto"]  # a term marker opened it: the veto check ran
    assert [name for name, _ in markers._compiled["term"]] == [r for r in TERM_RULES if markers.term[r]]
    assert [name for name, _ in markers._compiled["veto"]] == [f for f in VETO_FAMILIES if markers.veto[f]]
    assert markers.anchor_hit("see you at 7pm") == "7pm"
    assert sorted(markers._compiled) == ["anchor", "term", "veto"]
