"""Session 39 (finding F2): a Chinese one-off marker matched inside a longer word.

Through MCP ``remember`` with no tier, durable facts came back temporary (expiring in
7 days, then swept): 本周 inside 日本周刊 ("Japan weekly"), 今日 in 今日的北美洲 and in
《今日美国》 (USA Today), 明天 in 小明天生. A term marker now does not count inside a word
its rule lists in ``term_except`` nor inside a 《》/〈〉 title; a bulk import's summary
says how many memories it made temporary and why.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from md_cg import MdCG, import_nodes
from md_cg.errors import MarkerFileError
from md_cg.temporal import decide_retention, load_markers, shipped_markers

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
import retention_corpora  # noqa: E402

NOW = 1_700_000_000.0


def rule(text: str) -> tuple[str, str, str | None]:
    d = decide_retention(text=text, temporal="", now=NOW)
    return d.tier, d.rule, d.marker


#: the finding's bodies: durable facts, each with a one-off marker inside another word
FINDING = [
    "满田拓也的棒球漫画在日本周刊少年Sunday连载。",
    "相对于今日的北美洲，劳伦大陆呈现顺时针。",
    "《今日美国》是美国发行量最大的报纸之一。",
    "小明天生就很聪明。",
]


def test_the_findings_facts_stay_long_through_remember_with_no_tier(tmp_path: Path) -> None:
    with MdCG(str(tmp_path / "s")) as store:
        ids = [store.add(body=body).id for body in FINDING]
        got = [(store.get(i).retention_tier, store.get(i).expires_at) for i in ids]
    assert got == [(None, None)] * 4  # unassigned = long: default_long, nothing expires


@pytest.mark.parametrize(
    "text",
    [
        "主人在读日本周刊的连载。",  # 日本 + 周刊, not 本周
        "主人家这周围没有地铁站。",  # 这 + 周围
        "主人基本周末都在家。",  # 基本 + 周末
        "遗址位于今天津市和平区。",  # present-day Tianjin
        "弗朗西斯将它发展为今天的日落广场。",
        "主人说之前天气一直很好。",  # 之前 + 天气, not 前天
        "这个地方才是主人的老家。",  # 地方 + 才, not 方才
        "主人的听力损失是后天造成的。",
        "主人的座右铭是今日事今日毕。",
        "主人订阅了《今日头条》。",
        "主人在听〈今日简史〉的有声书。",
        "The old photos remind me of my grandmother.",
    ],
)
def test_a_marker_inside_a_longer_word_or_a_title_decides_nothing(text: str) -> None:
    assert rule(text) == ("long", "default_long", None)


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("本周五之前要把报告交给王经理。", "本周"),
        ("明天下午三点开会。", "明天"),
        ("今天的会议改到下午四点了。", "今天"),
        ("今天下午看《今日说法》的重播。", "今天"),  # the marker outside the title still opens it
        ("前天寄出的包裹还在路上。", "前天"),
        ("主人明天要去日本出差。", "明天"),  # 日本 after the marker excepts nothing
        ("主人今天生病了，请假在家。", "今天"),  # 天生 only as "innate" (天生就, 天生对 ...)
        ("明天生产线停工检修。", "明天"),
        ("刚才主人把钥匙落在车里了。", "刚才"),
        ("Remind me to call the plumber at 5pm.", "remind me"),
    ],
)
def test_a_one_off_note_is_still_temporary(text: str, marker: str) -> None:
    tier, _rule, found = rule(text)
    assert (tier, found) == ("temp", marker)


def test_a_store_adds_term_exceptions_and_a_gap_in_one_is_refused(tmp_path: Path) -> None:
    base = shipped_markers()
    text = "明天晴是主人女儿的小名。"  # a name opening with 明天
    assert decide_retention(text=text, temporal="", now=NOW, markers=base).tier == "temp"
    more = base.extended(term_except={"n1_relative_day": ["明天晴"]})
    assert decide_retention(text=text, temporal="", now=NOW, markers=more).rule == "default_long"
    path = tmp_path / "m.json"
    path.write_text('{"term_except": {"n1_relative_day": ["明天...晴"]}}', encoding="utf-8")
    loaded = load_markers(path)
    assert loaded.problem == (
        f"{path}: invalid retention marker file: term_except.n1_relative_day entry 1: "
        "'明天...晴': a gap ('...') is not allowed here"
    )
    path.write_text('{"term_except": {"n1_relative_day": ["明天晴"]}}', encoding="utf-8")
    loaded = load_markers(path)
    assert loaded.problem is None
    assert loaded.term_except["n1_relative_day"] == (*base.term_except["n1_relative_day"], "明天晴")
    with pytest.raises(MarkerFileError, match="term_except: unknown name 'n9'"):
        base.extended(term_except={"n9": ["x"]})


def test_the_fixture_recall_and_false_temps_are_the_documented_figures() -> None:
    zh, en = retention_corpora.fixture_scores("zh"), retention_corpora.fixture_scores("en")
    assert (zh["rows"], zh["recall"], zh["false_temp"]) == (72, (32, 36), ["zl07"])
    assert zh["missed"] == ["zt03", "zt05", "zt21", "zt32"]  # vetoed: 记得, 住在, 邮箱, 项目
    assert (en["rows"], en["recall"], en["false_temp"], en["missed"]) == (10, (5, 6), [], ["et05"])


@pytest.mark.skipif(not retention_corpora.CMRC.is_file(), reason="CMRC dev data absent")
def test_no_cmrc_encyclopedia_chunk_is_temporary() -> None:
    texts = retention_corpora.cmrc_texts()
    assert (len(texts), retention_corpora.temporary(texts)) == (1858, [])


@pytest.mark.skipif(not retention_corpora.LOCOMO.is_file(), reason="LoCoMo dev data absent")
def test_locomo_turns_temporary_are_those_naming_a_near_day() -> None:
    texts = retention_corpora.locomo_texts()
    temp = retention_corpora.temporary(texts)
    assert (len(texts), len(temp)) == (2760, 27)  # 31 before: 4 "... remind me of/why/how"
    by_id = dict(texts)
    assert not [i for i in temp if "remind me" in by_id[i].lower() and "remind me to" not in by_id[i].lower()]


def _records(path: Path) -> None:
    rows = [
        {"id": "c1", "body": "满田拓也的棒球漫画在日本周刊少年Sunday连载。"},
        {
            "id": "t1",
            "body": "Caroline: I went to a support group yesterday.",
            "created_at": "2023-05-08T13:56:00Z",
        },
        {"id": "t2", "body": "Jon: See you tomorrow!"},
        {"id": "t3", "body": "明天下午三点开会"},
        {"id": "l1", "body": "The user is left-handed."},
        {"id": "x1", "body": "Buy milk", "retention_tier": "temp"},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def test_an_import_says_how_many_memories_it_made_temporary_and_why(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    _records(source)
    with MdCG(str(tmp_path / "s")) as store:
        dry = import_nodes(store, str(source), dry_run=True)
        done = import_nodes(store, str(source))
        again = import_nodes(store, str(source))
        tiers = {i: store.get(i).retention_tier for i in ("c1", "t1", "t2", "t3", "l1", "x1")}
    assert tiers == {"c1": None, "t1": "temp", "t2": "temp", "t3": "temp", "l1": None, "x1": "temp"}
    why = {
        "one-off marker 'tomorrow'": 1,
        "one-off marker 'yesterday'": 1,
        "one-off marker '明天'": 1,
        "the record's tier or expiry": 1,
    }
    for report in (dry, done):
        assert (report.temporary, report.temporary_why) == (["t1", "t2", "t3", "x1"], why)
        assert report.to_dict()["temporary"] == ["t1", "t2", "t3", "x1"]
    assert done.summary().split(": ", 1)[1].rsplit(" (", 1)[0] == (
        "6 record(s): 6 new, 0 changed, 0 unchanged, 4 temporary, expiring after the TTL (one-off marker "
        "'tomorrow' 1, one-off marker 'yesterday' 1, one-off marker '明天' 1, 1 other cause(s); "
        "`mdcg update ID --tier long` keeps one)"
    )
    assert (again.unchanged, again.temporary, again.temporary_why) == (6, [], {})  # nothing written again
