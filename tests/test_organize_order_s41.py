"""Organize near verdicts, session 41 (attack atk10, F3 and F4).

F3: facts with swapped roles ("Alice owes Bob" / "Bob owes Alice", "from Paris to Tokyo" /
"from Tokyo to Paris", "Tom is Anna's manager" / "Anna is Tom's manager", 小王欠小李 /
小李欠小王, "allergic to cats but not dogs" / the reverse) were `near`, score 1.0: the
score sorts the words. The `order` guard now scores them 0 (`new`).

F4: a candidate's title was scored with its content, a memory `mdcg add` stored on its
body alone: the same content under a title of its own ("Where the user lives", 饮品偏好)
was `new` and apply stored it again; the same text with a negation, titled with its own
first line, was `same_title` with score 0.0 (the title's "not" counted twice). Both are
`near` 1.0 now."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.dedupe import NEAR_THRESHOLD, NormalizedCandidate, Similarity, Verdict, compare, verdict

PAIRS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "order_pairs_s41.jsonl").read_text("utf-8").splitlines()
]

SWAPS = [
    ("Alice owes Bob 50 euros.", "Bob owes Alice 50 euros."),
    ("Flight from Paris to Tokyo on the 3rd.", "Flight from Tokyo to Paris on the 3rd."),
    ("Tom is Anna's manager.", "Anna is Tom's manager."),
    ("The user is allergic to cats but not to dogs.", "The user is allergic to dogs but not to cats."),
    ("Use tabs for Python and spaces for Go.", "Use spaces for Python and tabs for Go."),
    ("小王欠小李五十块钱。", "小李欠小王五十块钱。"),
    ("从北京飞往上海。", "从上海飞往北京。"),
    ("小王是小李的经理。", "小李是小王的经理。"),
    ("用户喜欢喝绿茶，不喝咖啡。", "用户喜欢喝咖啡，不喝绿茶。"),
]

REORDERED = [
    ("The user likes cats and dogs.", "The user likes dogs and cats."),
    ("Every morning the user drinks green tea.", "The user drinks green tea every morning."),
    ("Tom's manager is Anna.", "Anna is Tom's manager."),
    ("用户每天早上喝绿茶。", "每天早上用户喝绿茶。"),
    ("上午写代码，下午开会。", "下午开会，上午写代码。"),
    ("小王的经理是小李。", "小李是小王的经理。"),
]


@pytest.mark.parametrize(("a", "b"), SWAPS)
def test_swapped_roles_are_not_near(a: str, b: str) -> None:
    assert compare(a, b) == Similarity(0.0, 1.0, "order")
    assert compare(b, a) == Similarity(0.0, 1.0, "order")
    # a title repeating the text (as organize stores a one-line fact) hides no swap
    assert compare(f"{a}\n{a}", f"# {b}\n\n{b}") == Similarity(0.0, 1.0, "order")


@pytest.mark.parametrize(("a", "b"), REORDERED)
def test_words_moved_without_changing_roles_stay_near(a: str, b: str) -> None:
    assert compare(a, b) == Similarity(1.0, 1.0, None)


def test_the_pair_set_before_and_after() -> None:
    """58 pairs (31 en, 27 zh); before: 25 of the 31 not-near pairs were said near."""
    assert len(PAIRS) == 58 and Counter(r["near"] for r in PAIRS) == {False: 31, True: 27}
    said = {r["id"]: compare(r["a"], r["b"]).score >= NEAR_THRESHOLD for r in PAIRS}
    false_near = sorted(i for i, s in said.items() if s and not _label(i))
    missed = sorted(i for i, s in said.items() if not s and _label(i))
    # session 41 left en012, en017 near and zh054 missed: https stemmed as http; a passive
    # on one side left word order unread; 不过敏 read as 不过 "but". Session 42: none left
    # (tests/test_organize_s42.py).
    assert (false_near, missed) == ([], [])


def _label(pair_id: str) -> bool:
    return next(r["near"] for r in PAIRS if r["id"] == pair_id)


def _items(store: MdCG, candidates: list[dict[str, str]]) -> list[tuple[str, str | None, float | None]]:
    report = store.organize("dryRun", candidates=candidates).to_dict()
    return [
        (i["verdict"], i["match"] and i["match"]["id"], i["match"] and i["match"]["score"])
        for i in report["items"]
    ]


def test_swaps_saved_through_organize_are_new(tmp_path: Path) -> None:
    """atk10 org6.sh: saved through organize, then the swapped facts: all `near` 1.0 before."""
    store = MdCG(tmp_path / "s")
    first = [a for a, _b in SWAPS[:6]]
    report = store.organize(
        "dryRun", candidates=[{"layer": "knowledge", "title": t, "content": t} for t in first]
    )
    decisions = [{"action": "save", "index": i} for i in range(len(first))]
    assert store.organize("apply", run_id=report.run_id, decisions=decisions).applied == 6
    second = [{"layer": "knowledge", "title": b, "content": b} for _a, b in SWAPS[:6]]
    assert _items(store, second) == [("new", None, None)] * 6


def _judged(
    root: Path, stored: dict[str, str], candidates: list[tuple[str, str]]
) -> list[tuple[str, str | None, float | None]]:
    """The verdicts of ``candidates`` (title, content) against memories ``mdcg add`` stored (id -> body)."""
    store = MdCG(root)
    for node_id, body in stored.items():
        store.add(id=node_id, body=body, layer="knowledge")
    return _items(store, [{"layer": "knowledge", "title": t, "content": c} for t, c in candidates])


NEG_EN, NEG_ZH = "The user does not drink coffee.", "用户喜欢喝绿茶，不喝咖啡。"


def test_the_same_content_under_a_title_of_its_own_is_near(tmp_path: Path) -> None:
    """atk10 org3.sh: byte-identical content, another title, was `new` (apply stored it again)."""
    lisbon = "The user lives in Lisbon with two cats."
    candidates = [
        ("User does not drink coffee", NEG_EN),
        ("饮品偏好", NEG_ZH),
        ("Where the user lives", lisbon),
    ]
    assert _judged(tmp_path, {"neg_en": NEG_EN, "zh": NEG_ZH, "pos": lisbon}, candidates) == [
        ("near", "neg_en", 1.0),
        ("near", "zh", 1.0),
        ("near", "pos", 1.0),
    ]


def test_a_title_repeating_a_negated_text_is_not_counted_twice(tmp_path: Path) -> None:
    """atk10 org2.sh: `same_title` score 0.0 ("a memory of that title says something else")."""
    candidates = [
        ("The user does not drink coffee", "The user does not drink coffee!"),
        ("用户喜欢喝绿茶，不喝咖啡", "用户喜欢喝绿茶,不喝咖啡."),
        ("Coffee", "The user does not drink coffee!"),
    ]
    assert _judged(tmp_path, {"neg_en": NEG_EN, "neg_zh": NEG_ZH}, candidates) == [
        ("near", "neg_en", 1.0),
        ("near", "neg_zh", 1.0),
        ("near", "neg_en", 1.0),
    ]


def test_a_stored_title_still_counts() -> None:
    """A memory with a heading keeps its title: the same content under another person's
    name is not near ("titles carry facts"); a changed fact under a repeated title is not
    near either (the negation still counts once on each side)."""
    rows = [("alice", "Alice", "Lives in Berlin", "# Alice\n\nLives in Berlin\n")]
    assert verdict(NormalizedCandidate("knowledge", "Bob", "Lives in Berlin"), rows).kind == "new"
    rows = [("c", "The user drinks coffee", "", "The user drinks coffee")]
    c = NormalizedCandidate("knowledge", "The user does not drink coffee", "The user does not drink coffee")
    assert verdict(c, rows).kind == "new" and verdict(c, rows).score == 0.0
    # content alone is compared with a memory stored without a heading only when that
    # memory adds no word: the title "Bob" is not hidden against "Alice lives in ..."
    alice = "Alice lives in Berlin with two cats"
    bob = NormalizedCandidate("knowledge", "Bob", "Lives in Berlin with two cats")
    assert verdict(bob, [("a", alice, "", alice)]) == Verdict("new", None, 0.0)
