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
