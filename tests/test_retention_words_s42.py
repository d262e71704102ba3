"""Lasting events the session 41 word list missed (session 42, the lead's probe).

A funeral, a pet put down, an organ removed, chemotherapy, a tattoo, a driving
licence, and 摔断了腿 (the English "broke my leg" was already long) were decided
``temp`` when their text opened with a time word: hidden after the TTL and swept.
Each row names the marker that keeps it now; the one-offs beside them stay temp.
"""

from __future__ import annotations

import pytest

from tests.test_retention_events_s41 import decided

KEPT = [
    ("Yesterday we held my grandmother's funeral.", "funeral"),
    ("Today we had to put down our dog Max.", "put down our dog"),
    ("Last night the old horse had to be put down.", "be put down"),
    ("Last week my gallbladder was removed.", "gallbladder"),
    ("Today I started chemotherapy.", "chemotherapy"),
    ("Yesterday I got my first tattoo.", "got my first tattoo"),
    ("Today I got my driver's license.", "driver's license"),
    ("This morning the vet had to euthanize our cat.", "euthanize"),
    ("昨天参加了奶奶的葬礼。", "葬礼"),
    ("今天我们给狗狗安乐死了。", "安乐死"),
    ("昨天我摔断了腿。", "摔断"),
    ("今天我拿到了驾照。", "驾照"),
    ("今天开始化疗。", "化疗"),
]

ONE_OFF = [
    "Yesterday I had a great pizza.",
    "Today I put down the book and went for a walk.",
    "昨天吃了火锅。",
    "今晚去看电影。",
]

#: what the words cost: a one-off holding one reads long (a false long is kept, never lost)
FALSE_LONG = [("Tonight we watched a movie about a funeral home.", "funeral")]


@pytest.mark.parametrize(("text", "marker"), KEPT)
def test_a_lasting_event_opened_by_a_time_word_stays_long(text: str, marker: str) -> None:
    assert decided(text, "one_off") == ("long", "veto_lasting_event", marker)
    unset = decided(text)
    assert unset[0] == "long" and unset[1] in ("term_guard_lasting_event", "default_long")


@pytest.mark.parametrize("text", ONE_OFF)
def test_the_one_offs_beside_them_stay_temporary(text: str) -> None:
    assert decided(text, "one_off")[0] == "temp"
    assert decided(text)[0] == "temp"


@pytest.mark.parametrize(("text", "marker"), FALSE_LONG)
def test_the_known_cost_of_the_words(text: str, marker: str) -> None:
    assert decided(text, "one_off") == ("long", "veto_lasting_event", marker)
