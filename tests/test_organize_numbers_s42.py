"""organize's ``order`` guard places numbers (session 42, attack atk11 F6).

Two numbers changing sides around a word were ``near`` 1.0 -- an apply could archive a
true, different fact as a repeat: the order tokens held no numbers, and the numbers
guard compares them as a set. Numbers are order tokens now, and a second test places
only numbers as the two that change sides, so a block of words moved with its time in
it stays near."""

from __future__ import annotations

import pytest

from md_cg.dedupe import compare

SWAPPED = [
    ("The meeting moved from 3pm to 5pm.", "The meeting moved from 5pm to 3pm."),
    ("Use port 8080 for dev and 8443 for prod.", "Use port 8443 for dev and 8080 for prod."),
    ("The flight leaves at 9am and lands at 1pm.", "The flight leaves at 1pm and lands at 9am."),
    ("Room 12 is next to room 14.", "Room 14 is next to room 12."),
    ("The user runs three miles on two days a week.", "The user runs two miles on three days a week."),
]

STILL_NEAR = [
    ("The team meets at 9am every Monday.", "Every Monday at 9am the team meets."),
    ("The team meets at 9am every Monday.", "The team meets every Monday at 9am."),
    ("Call the dentist at 3pm on Friday.", "On Friday at 3pm, call the dentist."),
    ("The user has 2 cats and 1 dog.", "The user has 1 dog and 2 cats."),
    ("Bus 42 leaves at 7am.", "At 7am bus 42 leaves."),
]


@pytest.mark.parametrize(("a", "b"), SWAPPED)
def test_two_numbers_changing_sides_are_a_swap(a: str, b: str) -> None:
    for x, y in ((a, b), (b, a)):
        got = compare(x, y)
        assert (got.score, got.guard) == (0.0, "order")
        assert got.similarity == 1.0


@pytest.mark.parametrize(("a", "b"), STILL_NEAR)
def test_a_block_moved_with_its_numbers_stays_near(a: str, b: str) -> None:
    for x, y in ((a, b), (b, a)):
        got = compare(x, y)
        assert (got.score, got.guard) == (1.0, None)
