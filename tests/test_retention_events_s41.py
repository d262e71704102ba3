"""Session 41 (attack atk10 F2): lasting life events opened by a one-off time word.

"Yesterday my father passed away.", "This morning the doctor said I have type 2
diabetes.", 昨天我父亲去世了 were decided temporary: the time word fired a term rule (or
anchored an extractor's ``one_off``) and no veto family named the event, so after 7
days reads hid them and ``sweep`` removed them. English and Chinese disagreed
("Yesterday the user's dog died" temp, 昨天用户的狗死了 long: 的狗). The ``lasting_event``
veto family names events after which a lasting state holds (a death, a birth, a
marriage, a diagnosis, surgery, a job lost or begun, a move, a breakup...). And an
``update`` of a lasting memory whose new text reads as a one-off kept the memory's life
short: "The user's father is called John Smith." edited into "Yesterday ..., came to
visit." became temporary; the edit now keeps it long (``edit_kept_long``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from md_cg import MdCG, temporal
from md_cg.temporal import RULE_CODES, decide_retention, was_asked

REPO = Path(__file__).resolve().parent.parent
EVENTS = REPO / "tests" / "data" / "retention_events_s41.jsonl"
NOW = 1_700_000_000.0


def decided(text: str, kind: str = "") -> tuple[str, str, str | None]:
    d = decide_retention(text=text, temporal=kind, now=NOW)
    return d.tier, d.rule, d.marker


#: the finding's texts (ret_cli.sh, ret2.py, ret3.py): (text, the marker that keeps it)
FINDING = [
    ("Yesterday my father passed away.", "passed away"),
    ("This morning the doctor said I have type 2 diabetes.", "diabetes"),
    ("昨天我父亲去世了。", "去世"),
    ("Yesterday I broke up with Sam.", "broke up"),
    ("Last night our dog Rex died.", "died"),
    ("This morning I had my left kidney removed.", "had my left kidney removed"),
    ("昨天我和小李分手了。", "分手"),
    ("今天医生说用户有高血压。", "高血压"),
    ("昨天用户和女朋友分手了。", "分手"),
    ("今天用户做了阑尾切除手术。", "切除"),
    ("昨天用户被裁员了。", "被裁"),
    ("Yesterday the user's mother died.", "died"),
    ("This morning the user was told he has high blood pressure.", "high blood pressure"),
    ("Yesterday the user's dog died.", "died"),
    ("Today the user had his appendix removed.", "had his appendix removed"),
    ("Yesterday the user got fired.", "got fired"),
    ("Today the user's divorce was finalised.", "divorce"),
]


@pytest.mark.parametrize(("text", "marker"), FINDING)
def test_a_lasting_event_opened_by_a_time_word_is_long(text: str, marker: str) -> None:
    assert decided(text) == ("long", "term_guard_lasting_event", marker)  # as remember / add give it
    assert decided(text, "one_off") == ("long", "veto_lasting_event", marker)  # an extractor's one_off


#: one-off texts with the same time words, and the family's words inside one-off phrases
ONE_OFFS = [
    ("Yesterday I had pasta for lunch.", "yesterday"),
    ("今天下午三点开会。", "今天"),
    ("Remind me to call the plumber tonight.", "tonight"),  # n1 comes before n4
    ("Today it is raining hard in the city.", "today"),
    ("This morning my phone died on the bus.", "this morning"),  # phone died: a battery
    ("今天开完长会累死了。", "今天"),  # 累死了: "exhausted"
    ("昨天热死了，一直待在屋里。", "昨天"),
    ("今天买了两张去上海的火车票。", "今天"),  # 买车票 is no car bought; 两张火车票 no 买车
    ("Tonight the user is going to a friend's wedding.", "tonight"),
    ("This afternoon the user was bored to death in the lecture.", "this afternoon"),
]


@pytest.mark.parametrize(("text", "marker"), ONE_OFFS)
def test_one_off_texts_with_the_same_time_words_stay_temporary(text: str, marker: str) -> None:
    assert decided(text) == ("temp", "term_n1_relative_day", marker)


def test_english_and_chinese_agree_on_the_findings_pair() -> None:
    assert decided("Yesterday the user's dog died.")[0] == decided("昨天用户的狗死了。")[0] == "long"
    assert decided("Yesterday my father passed away.")[0] == decided("昨天我父亲去世了。")[0] == "long"


def _rows() -> list[dict]:
    return [json.loads(line) for line in EVENTS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_held_out_event_set_figures() -> None:
    """tests/data/retention_events_s41.jsonl: 104 en/zh pairs, lasting events and one-offs
    opened by the same time words (docs/retention.md, "Measured: lasting events"). Before
    the family (d9933a8): 64 of 104 lasting texts temp, 5 of 104 one-offs long, 13 pairs
    decided apart. Every text is decided the same unset and as one_off."""
    rows = _rows()
    assert len(rows) == 208 and {r["pair"] for r in rows} == {r["pair"] for r in rows if r["lang"] == "zh"}
    for kind in ("", "one_off"):
        tiers = {r["id"]: decided(r["text"], kind)[0] for r in rows}
        wrong = [r for r in rows if r["expected_tier"] != tiers[r["id"]]]
        false_temp = sorted(r["id"] for r in wrong if r["expected_tier"] == "long")
        false_long = sorted(r["id"] for r in wrong if r["expected_tier"] == "temp")
        apart = sorted({r["pair"] for r in rows if tiers[r["pair"] + "e"] != tiers[r["pair"] + "z"]})
        # session 42 added "be put down" (b02e, a horse) and "gallbladder" (p16e): before, both temp
        assert false_temp == []
        # b31z 住在 (durable fact); q02 project; q32 birthday (as before); q21 died in a game
        assert false_long == ["b31z", "q02e", "q02z", "q21e", "q21z", "q32e", "q32z"]
        assert apart == ["b31"]


def test_the_new_rule_codes_are_listed() -> None:
    assert {"veto_lasting_event", "term_guard_lasting_event", "edit_kept_long"} <= set(RULE_CODES)


def _records(store: MdCG, node_id: str) -> list[tuple[str, str]]:
    return [(r["rule"], r["tier"]) for r in store.log("retention").read() if r["id"] == node_id]


def test_an_edit_does_not_make_a_lasting_memory_temporary(tmp_path: Path) -> None:
    with MdCG(str(tmp_path / "s")) as s:
        s.add(id="father", body="The user's father is called John Smith.")
        s.update("father", body="Yesterday the user's father, John Smith, came to visit.")
        node = s.get("father")
        assert (node.retention_tier, node.expires_at) == ("long", None)
        assert node.retention_reason.startswith(temporal.EDIT_KEPT_OPENING)
        assert node.retention_reason == (
            "an edit of a lasting memory stays long: an edit's text does not make it temporary (the one-off "
            "marker 'yesterday' (n1_relative_day) opens the text and no veto marker is in the text)"
        )
        assert not was_asked(node.retention_reason)  # the decision's sentence, not a caller's choice
        assert _records(s, "father")[-1] == ("edit_kept_long", "long")
        s.update("father", body="Tomorrow the user's father, John Smith, comes for lunch.")  # again
        assert (s.get("father").retention_tier, s.get("father").expires_at) == ("long", None)
        # the caller's word still decides: a tier, or a temporal kind given with the edit
        s.update("father", retention_tier="temp")
        assert s.get("father").retention_tier == "temp" and s.get("father").expires_at is not None
        s.add(id="mum", body="The user's mother is called Ann.")
        s.update("mum", body="Ann visits tomorrow at 9.", temporal="one_off")
        assert (s.get("mum").retention_tier, _records(s, "mum")[-1]) == ("temp", ("temporal_one_off", "temp"))
        # a temporary memory edited stays temporary, its expiry kept (an edit does not extend it)
        s.add(id="plumber", body="Tomorrow call the plumber.")
        expiry = s.get("plumber").expires_at
        s.update("plumber", body="Tomorrow call the plumber at 9.")
        assert (s.get("plumber").retention_tier, s.get("plumber").expires_at) == ("temp", expiry)


def test_the_findings_update_through_the_cli_keeps_the_memory(tmp_path: Path) -> None:
    """ret_update.sh, in real processes: the edit adds a life event opened by "Yesterday"."""
    root = str(tmp_path / "s")
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def mdcg(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "md_cg.cli", *args, "--root", root]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)

    mdcg("add", "--id", "father", "The user's father is called John Smith.")
    done = mdcg("update", "father", "--body", "Yesterday the user's father, John Smith, died.")
    assert "temporary" not in done.stderr
    other = mdcg("update", "father", "--body", "Yesterday the user's father, John Smith, visited.", "--json")
    assert (json.loads(other.stdout)["tier"], json.loads(other.stdout)["expires"]) == ("long", None)
    with MdCG(root, read_only=True) as s:
        assert [r["rule"] for r in s.log("retention").read() if r["id"] == "father"][-2:] == [
            "term_guard_lasting_event",
            "edit_kept_long",
        ]
