"""Organize near verdicts, session 43 (attack atk12): numbers in the wrong places.

The guards read digits one run at a time and placed numbers only when three tokens
reversed, so these different facts were ``near`` 1.0 (guard ``None``) and an apply
archived the stored fact:

* the parts of one number-like token swapped: "2024-03-05" / "2024-05-03", "1.5" /
  "5.1", "1:05" / "5:01" (the same digits); "8am" / "8pm" were both 8;
* a number glued to its unit ("5mg" / "50mg" swapped) was a name, placed nowhere;
* two names swapped around numbers ("call Bob at 3, then Alice at 5" / "call Alice at
  3, then Bob at 5"): with only numbers between the names no three tokens reverse;
* "2 tablets at 8am, 1 tablet at 8pm" / the counts swapped: 8am and 8pm were one number.

A date, time, decimal or version is now one value (``_values``), a glued unit is read
as the number and the unit, and two numbers changing the words they go with is a swap
(``_crossed``). The same fact said otherwise stays ``near``; both directions compared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.dedupe import NEAR_THRESHOLD, Similarity, compare

SWAPPED = [
    (
        "The deadline moved from 2024-03-05 to 2024-05-03.",
        "The deadline moved from 2024-05-03 to 2024-03-05.",
        "order",
    ),
    ("The deadline is 2024-03-05.", "The deadline is 2024-05-03.", "numbers"),
    ("Temperature dropped from 1.5 to 5.1 degrees.", "Temperature dropped from 5.1 to 1.5 degrees.", "order"),
    ("The dose is 1.5 mg.", "The dose is 5.1 mg.", "numbers"),
    ("Call the bank at 1:05.", "Call the bank at 5:01.", "numbers"),
    ("The meeting is at 8am.", "The meeting is at 8pm.", "numbers"),
    (
        "The user takes 5mg in the morning and 50mg at night.",
        "The user takes 50mg in the morning and 5mg at night.",
        "order",
    ),
    ("Dose: 2 tablets at 8am, 1 tablet at 8pm.", "Dose: 1 tablet at 8am, 2 tablets at 8pm.", "order"),
    ("First call Bob at 3, then Alice at 5.", "First call Alice at 3, then Bob at 5.", "order"),
    ("At 3pm Bob, at 5pm Alice.", "At 3pm Alice, at 5pm Bob.", "order"),
    ("小王3点到，小李5点到。", "小李3点到，小王5点到。", "order"),
    ("会议从三点改到五点。", "会议从五点改到三点。", "order"),  # fixed by s43-words; kept here
]

SAME = [
    (
        "The deadline moved from 2024-03-05 to 2024-05-03.",
        "The deadline was moved from 5 March 2024 to 3 May 2024.",
    ),
    ("The deadline is 2024-03-05.", "The deadline is March 5th, 2024."),
    ("Temperature dropped from 1.5 to 5.1 degrees.", "The temperature dropped from 1.5 degrees to 5.1."),
    (
        "The user takes 5mg in the morning and 50mg at night.",
        "In the morning the user takes 5 mg, at night 50 mg.",
    ),
    ("The meeting is at 8pm.", "The meeting is at 20:00."),
    ("The meeting is at 8 p.m.", "The meeting is at 8pm."),
    ("The budget is 1,000 euros.", "The budget is 1000 euros."),
    ("First call Bob at 3, then Alice at 5.", "Call Bob first at 3, and then Alice at 5."),
    ("Call Bob at 3 and Alice at 5.", "Call Alice at 5 and Bob at 3."),
    ("The user has 2 cats and 1 dog.", "The user has 1 dog and 2 cats."),
    (
        "The team meets at 9am every Monday and at 2pm every Friday.",
        "Every Monday at 9am and every Friday at 2pm the team meets.",
    ),
    ("小王3点到，小李5点到。", "小李5点到，小王3点到。"),
]

DIFFERENT_VALUES = [
    ("Python 3.10 is required.", "Python 3.1 is required."),
    ("The server is at 192.168.1.1.", "The server is at 192.168.1.10."),
    ("The report is due 03/05/2024.", "The report is due 05/03/2024."),
]


@pytest.mark.parametrize(("a", "b", "guard"), SWAPPED)
def test_numbers_in_other_places_are_not_near(a: str, b: str, guard: str) -> None:
    assert compare(a, b) == Similarity(0.0, 1.0, guard)
    assert compare(b, a) == Similarity(0.0, 1.0, guard)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_numbers_in_the_same_roles_stay_near(a: str, b: str) -> None:
    assert compare(a, b).guard is None and compare(b, a).guard is None
    assert compare(a, b).score >= NEAR_THRESHOLD and compare(b, a).score == compare(a, b).score


@pytest.mark.parametrize(("a", "b"), DIFFERENT_VALUES)
def test_one_value_written_with_points_or_slashes(a: str, b: str) -> None:
    assert compare(a, b) == Similarity(0.0, 1.0, "numbers")
    assert compare(b, a) == Similarity(0.0, 1.0, "numbers")


def test_swaps_through_organize_are_new_and_nothing_is_archived(tmp_path: Path) -> None:
    """The attack's own run: a dry run said ``near`` and the apply it backs archived the fact."""
    pairs = [(a, b) for a, b, _guard in SWAPPED[:1] + SWAPPED[2:3] + SWAPPED[6:9]]
    store = MdCG(tmp_path / "s")
    for number, (held, _said) in enumerate(pairs):
        store.add(id=f"fact{number}", body=held, layer="knowledge")
    candidates = [{"layer": "knowledge", "title": "t", "content": said} for _held, said in pairs]
    dry = store.organize("dryRun", candidates=candidates)
    assert [(i.verdict, i.match and i.match.id) for i in dry.items] == [("new", None)] * 5
    # the same facts reworded are still near the memory that holds them
    same = store.organize(
        "dryRun",
        candidates=[
            {
                "layer": "knowledge",
                "title": "t",
                "content": "The deadline was moved from 5 March 2024 to 3 May 2024.",
            },
            {
                "layer": "knowledge",
                "title": "t",
                "content": "In the morning the user takes 5 mg, at night 50 mg.",
            },
        ],
    )
    assert [(i.verdict, i.match and i.match.id) for i in same.items] == [("near", "fact0"), ("near", "fact2")]
    store.close()


def test_a_number_of_thousands_of_digits_is_compared() -> None:
    """``int`` refuses more than 4300 digits: such a number raised ValueError before."""
    long = "7" * 5000
    assert compare(f"The key is {long}.", f"The key is {long}.") == Similarity(1.0, 1.0, None)
    assert compare(f"The key is {long}.", f"The key is {long}8.") == Similarity(0.0, 1.0, "numbers")
    assert compare(f"Keys {long}pm and 0{long}.", f"Keys 0{long} and {long}pm.").guard is None
