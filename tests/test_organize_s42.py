"""Organize near verdicts and apply, session 42.

* "Redirect http to https" / "... https to http" was `near` 1.0: the stemmer cut the
  "s" of "https" (a plural to it), so both texts held "http" twice and the `order` guard
  placed neither. "https" (and "news", "ftps" ...) are no plurals now.
* A passive on one side switched the `order` guard off: "Alice was paid by Bob" /
  "Alice paid Bob" (reversed roles) and "Anna manages Tom" / "Anna is managed by Tom"
  were `near` 1.0. A simple passive is now also read actively ("X was VERBed by Y" is
  "Y VERBed X") and the guard compares that reading too.
* 不过 was always "but" (no negation): "用户对猫过敏" / "用户对猫不过敏" (allergic / not
  allergic) was `near` 1.0, and "对狗不过敏" / "不对狗过敏" (the same fact) was `new`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG
from md_cg.dedupe import Similarity, compare

REVERSED = [
    ("Redirect http to https.", "Redirect https to http."),
    ("Upgrade the site from http to https", "Upgrade the site from https to http"),
    ("Alice was paid by Bob.", "Alice paid Bob."),
    ("Anna manages Tom.", "Anna is managed by Tom."),
    ("Tom has been replaced by Anna as lead.", "Tom replaced Anna as lead."),
    ("The invoice was approved by Maria.", "The invoice approved Maria."),
]

SAME = [
    ("Alice paid Bob.", "Bob was paid by Alice."),
    ("Alice was paid by Bob.", "Bob paid Alice."),
    ("Tom manages Anna.", "Anna is managed by Tom."),
    ("Tom has been replaced by Anna as lead.", "Anna replaced Tom as lead."),
    ("The design review was moved by Sarah.", "Sarah moved the design review."),
    ("Bob was paid by the new lead.", "The new lead paid Bob."),
    ("The report is due by Friday.", "By Friday the report is due."),
    ("The site uses https.", "The site uses HTTPS!"),
    ("不过他喜欢喝茶。", "他喜欢喝茶。"),
    ("不过关于预算，他同意了。", "关于预算，他同意了。"),
    ("用户对猫过敏，不对狗过敏。", "用户对猫过敏，对狗不过敏。"),
]


@pytest.mark.parametrize(("a", "b"), REVERSED)
def test_reversed_roles_are_not_near(a: str, b: str) -> None:
    assert compare(a, b) == Similarity(0.0, 1.0, "order")
    assert compare(b, a) == Similarity(0.0, 1.0, "order")


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_fact_stays_near(a: str, b: str) -> None:
    assert compare(a, b) == Similarity(1.0, 1.0, None)
    assert compare(b, a) == Similarity(1.0, 1.0, None)


@pytest.mark.parametrize(("a", "b"), [("用户对猫过敏。", "用户对猫不过敏。"), ("牛奶不过期。", "牛奶过期。")])
def test_bu_guo_before_a_word_of_guo_negates(a: str, b: str) -> None:
    assert compare(a, b) == Similarity(0.0, 1.0, "negation")


def test_reversed_facts_through_organize_are_new(tmp_path: Path) -> None:
    store = MdCG(tmp_path / "s")
    store.add(id="redirect", body="Redirect http to https.", layer="knowledge")
    store.add(id="paid", body="Alice paid Bob.", layer="knowledge")
    store.add(id="allergy", body="用户对猫过敏。", layer="knowledge")
    candidates = [
        {"layer": "knowledge", "title": "Redirect", "content": "Redirect https to http."},
        {"layer": "knowledge", "title": "Payment", "content": "Alice was paid by Bob."},
        {"layer": "knowledge", "title": "Payment", "content": "Bob was paid by Alice."},
        {"layer": "knowledge", "title": "过敏", "content": "用户对猫不过敏。"},
    ]
    items = store.organize("dryRun", candidates=candidates).to_dict()["items"]
    said = [(i["verdict"], i["match"] and i["match"]["id"]) for i in items]
    assert said == [("new", None), ("new", None), ("near", "paid"), ("new", None)]


# -- a near verdict at apply; one content under two titles in one run ---------------------------

COFFEE = "The user drinks black coffee every morning."


def _candidate(title: str, content: str = COFFEE) -> dict[str, str]:
    return {"layer": "knowledge", "title": title, "content": content}


def test_a_save_beside_a_near_match_is_noted_in_the_receipt(tmp_path: Path) -> None:
    """A candidate judged `near` a memory and saved (the match not archived) was saved
    silently: the receipt said `ok`, nothing of the memory it repeats in other words."""
    store = MdCG(tmp_path / "s")
    store.add(id="coffee", body="Every morning the user drinks black coffee.", layer="knowledge")
    dry = store.organize("dryRun", candidates=[_candidate("Morning coffee"), _candidate("Tea", "Green tea.")])
    assert [(i.verdict, i.match and i.match.id) for i in dry.items] == [("near", "coffee"), ("new", None)]
    saves = [{"action": "save", "index": 0}, {"action": "save", "index": 1}]
    result = store.organize("apply", run_id=dry.run_id, decisions=saves, strict=True)
    assert (result.status, result.applied) == ("ok", 2)
    note = (
        "decision 0: candidate 0 saved beside 'coffee', judged near it (score 1.0): "
        "archive or forget one if it repeats the other"
    )
    assert result.to_dict()["notes"] == [note]
    receipt = store.log("organize").read()[-1]
    assert (receipt["kind"], receipt["notes"]) == ("apply", [note])
    # archived by the same apply (a replacement): nothing to note
    again = _candidate("Coffee", "Every morning, the user drinks black coffee")
    dry = store.organize("dryRun", candidates=[again])
    (item,) = dry.items
    assert item.verdict == "near" and item.match is not None
    decisions = [{"action": "archive", "id": item.match.id}, {"action": "save", "index": 0}]
    result = store.organize("apply", run_id=dry.run_id, decisions=decisions, strict=True)
    assert (result.applied, "notes" in result.to_dict()) == (2, False)


def test_one_content_under_two_titles_in_one_run_is_a_repeat(tmp_path: Path) -> None:
    """Two candidates of one content under titles that only repeat it: both `new` before,
    and apply stored both (the second is `near` the first once that is stored)."""
    store = MdCG(tmp_path / "s")
    candidates = [_candidate("Coffee"), _candidate("Drinks coffee"), _candidate("Alice", "Lives in Berlin.")]
    candidates.append(_candidate("Bob", "Lives in Berlin."))  # titles naming two people: not one fact
    dry = store.organize("dryRun", candidates=candidates)
    assert [i.to_dict() for i in dry.items] == [
        {"index": 0, "layer": "knowledge", "title": "Coffee", "verdict": "new", "match": None},
        {
            "index": 1,
            "layer": "knowledge",
            "title": "Drinks coffee",
            "verdict": "repeat",
            "match": None,
            "repeats": 0,
            "score": 1.0,
        },
        {"index": 2, "layer": "knowledge", "title": "Alice", "verdict": "new", "match": None},
        {"index": 3, "layer": "knowledge", "title": "Bob", "verdict": "new", "match": None},
    ]
    assert (dry.counts["new"], dry.counts["repeat"]) == (3, 1)
    saves = [{"action": "save", "index": i} for i in range(4)]
    result = store.organize("apply", run_id=dry.run_id, decisions=saves, strict=True)
    assert result.applied == 4  # the caller decided: saved, and said
    assert result.to_dict()["notes"] == [
        "decision 1: candidate 1 saved beside candidate 0 (decision 0), "
        "judged a repeat of it in other words (score 1.0)"
    ]
    # what the run's repeat says: the second is `near` the first once that is stored
    other = MdCG(tmp_path / "t")
    first = other.organize("dryRun", candidates=[_candidate("Coffee")])
    other.organize("apply", run_id=first.run_id, decisions=[{"action": "save", "index": 0}])
    second = other.organize("dryRun", candidates=[_candidate("Drinks coffee")])
    assert [(i.verdict, i.match and i.match.score) for i in second.items] == [("near", 1.0)]
