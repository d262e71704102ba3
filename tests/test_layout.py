"""Layout: ids, layers, routing keys and bucket folder names."""

from __future__ import annotations

import hashlib

import pytest

from md_cg import layout
from md_cg.errors import InvalidNodeError, UnknownLayerError, UnsafeIdError
from md_cg.node import Node, check_id, validate


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("", "it is empty"),
        ("..", "it contains '..'"),
        ("a..b", "it contains '..'"),
        (".hidden", "it starts with '.'"),
        ("a/b", "it contains the character '/'"),
        ("a\\b", "it contains the character '\\\\'"),
        ("a\x00b", "it contains the character '\\x00'"),
        ("a:b", "it contains the character ':'"),
        (" a", "it has leading or trailing whitespace"),
        ("a.", "it ends with '.'"),
        ("x" * 129, "it is 129 characters long (max 128)"),
        ("汉" * 67, "it is longer than 200 bytes in UTF-8"),
    ],
)
def test_unsafe_ids_are_refused_with_the_value_named(bad: str, reason: str) -> None:
    with pytest.raises(UnsafeIdError) as err:
        check_id(bad)
    assert str(err.value) == f"unsafe node id {bad!r}: {reason}; ids must be safe file-name stems"
    assert err.value.value == bad
    assert err.value.field == "id"


def test_non_string_id_is_refused() -> None:
    with pytest.raises(UnsafeIdError, match="node id must be a string, got int 5"):
        check_id(5)


@pytest.mark.parametrize("good", ["kp_3f9a2c", "二分查找-1", "A.b", "x" * 128, "😀"])
def test_safe_ids_pass(good: str) -> None:
    assert check_id(good) == good


def test_unknown_layer_and_bad_basis_name_the_value() -> None:
    with pytest.raises(UnknownLayerError) as err:
        validate(Node(id="a", layer="attic"))
    assert "unknown layer 'attic'" in str(err.value)
    assert err.value.node_id == "a"
    with pytest.raises(InvalidNodeError) as err2:
        validate(Node(id="a", layer="self", verification_basis="vibes"))
    assert err2.value.field == "verification_basis"
    assert err2.value.value == "vibes"
    with pytest.raises(
        InvalidNodeError, match=r"field 'importance' must be a number between 0 and 1 \(got 1\.5\)"
    ):
        validate(Node(id="a", layer="self", importance=1.5))
    with pytest.raises(InvalidNodeError, match="has an edge type outside"):
        validate(Node(id="a", layer="self", edges=[{"target": "b", "type": "likes"}]))


@pytest.mark.parametrize(
    ("position", "domain"),
    [
        ("计算机科学·知识点（二分查找）", "计算机科学"),
        ("计算机科学·知识点(二分查找)", "计算机科学"),
        ("计算机科学·内容（按骨架填充）", "计算机科学"),
        ("计算机科学 / 算法·知识点（快速排序）", "计算机科学 / 算法"),
        ("Physics · topic (Doppler effect)", "physics"),
        ("Physics", "physics"),
        ("知识点（二分查找）", None),
        ("（x）", None),
    ],
)
def test_normalize_position(position: str, domain: str | None) -> None:
    assert layout.normalize_position(position) == domain


def test_route_key_prefers_domain_tag_then_position_then_none() -> None:
    cs = {"observation_position": "物理学·知识点（多普勒效应）"}
    assert layout.route_key(Node(id="a", tags=["x", "domain: 化学 "], condition_space=cs)) == "化学"
    assert layout.route_key(Node(id="a", tags=["domain:"], condition_space=cs)) == "物理学"
    assert layout.route_key(Node(id="a")) is None
    assert layout.route_key(Node(id="a", condition_space={"observation_position": 3})) is None


def test_bucket_dir_naming() -> None:
    digest = hashlib.sha256("计算机科学".encode()).hexdigest()[:8]
    assert layout.bucket_dir("计算机科学") == f"cond_计算机科学_{digest}"
    assert layout.bucket_dir(None) == "orphan"
    odd = layout.bucket_dir("a/b: c?*d")
    assert odd.startswith("cond_a_b_c_d_") and "/" not in odd
    long = layout.bucket_dir("x" * 100)
    assert long == f"cond_{'x' * 40}_{hashlib.sha256(b'x' * 100).hexdigest()[:8]}"


def test_rel_path_by_layer() -> None:
    node = Node(id="a", layer="knowledge", tags=["domain:物理学"])
    assert layout.rel_path(node) == f"knowledge/{layout.bucket_dir('物理学')}/a.md"
    assert layout.rel_path(Node(id="a", layer="knowledge")) == "knowledge/orphan/a.md"
    assert layout.rel_path(Node(id="b", layer="self", tags=["domain:x"])) == "self/b.md"


def test_writing_and_searching_compute_the_same_key() -> None:
    node = Node(id="a", condition_space={"observation_position": "计算机科学·知识点（二分查找）"})
    key = layout.route_key(node)
    assert layout.context_route_key({"condition_space": node.condition_space}) == key
    assert layout.context_route_key({"observation_position": "计算机科学·内容（按骨架填充）"}) == key
    assert layout.context_route_key({"tags": ["domain:计算机科学"]}) == key
    assert layout.context_route_key("计算机科学") == key
    assert layout.context_route_key({"domain": "计算机科学"}) == key
    assert layout.context_route_key(None) is None


def test_the_control_and_surrogate_rule_is_exactly_unicode_categories_cc_and_cs() -> None:
    """The id rule's one-regex check names the same characters as ``unicodedata.category``."""
    import unicodedata

    from md_cg import node as node_module
    from md_cg.script import CONTROL_OR_SURROGATE

    pattern = CONTROL_OR_SURROGATE
    wrong = [
        cp
        for cp in range(0x110000)
        if (unicodedata.category(chr(cp)) in ("Cc", "Cs")) != (pattern.search(chr(cp)) is not None)
    ]
    assert wrong == []
    assert node_module.id_problem("a\u0085b") == "it contains a control or surrogate character"
    assert node_module.id_problem("a\ud800b") == "it contains a control or surrogate character"
    assert node_module.id_problem("红黑树-第2篇") is None


def test_the_plain_path_shortcut_agrees_with_the_full_path_rules(monkeypatch) -> None:
    """``rel_problem``'s one-match shortcut accepts only paths the full rules accept."""
    import random
    import re

    from md_cg import paths

    rng = random.Random(5)
    pieces = ["knowledge", "self", "archive", "foo", "cond_a", "k1", "a.b", "..", ".x", "x.", "é", " ", "",
              "-", "_", "A" * 99, "b" * 100, "c" * 128, "d" * 129, "/", ".md"]  # fmt: skip
    heads = ["knowledge", "self", "archive/contextual", "archive", "foo", ""]
    rels = [rng.choice(heads) + "/" + "/".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
            + rng.choice([".md", ".md", "", ".txt"]) for _ in range(5000)]  # fmt: skip
    rels += ["knowledge/a/b/c/d/e/f/g.md", "knowledge/a/b/c/d/e/f/g/h.md", "archive/self/x.md"]
    rels += ["self/" + "a" * 2000 + ".md"]
    fast = [paths.rel_problem(r) for r in rels]
    monkeypatch.setattr(paths, "_PLAIN_REL", re.compile(r"(?!)"))  # never matches: the full rules only
    slow = [paths.rel_problem(r) for r in rels]
    assert fast == slow
    assert sum(p is None for p in slow) > 100  # the sample holds many good paths, not only bad ones


def test_the_per_folder_path_checker_gives_rel_problem_s_answers() -> None:
    """``rel_checker`` (a scan's check: each folder once, then the name) returns exactly
    what ``rel_problem`` returns, wording included, good paths and hostile ones."""
    import random

    from md_cg import paths

    rng = random.Random(6)
    pieces = ["knowledge", "self", "archive", "foo", "cond_a", "cond_美术史_06c7", "k1", "a.b", "..", ".x",
              "x.", "é", " ", "", "-", "_", "a\\b", "t\tab", "\x00", "A" * 99, "b" * 100, "c" * 128,
              "d" * 129, "/", ".md", "名字"]  # fmt: skip
    heads = ["knowledge", "self", "archive/contextual", "archive", "foo", ""]
    rels = [rng.choice(heads) + "/" + "/".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
            + rng.choice([".md", ".md", ".md", "", ".txt"]) for _ in range(8000)]  # fmt: skip
    folders = ["knowledge/cond_美术史_06c7", "knowledge/cond_a", "self", "archive/self",
               "knowledge/a/b/c/d/e/f"]  # fmt: skip
    names = ["k1.md", "名字.md", ".x.md", "a..b.md", "-x.md", "x .md", "a\\b.md", "x.md.md",
             "e" * 128 + ".md", "f" * 129 + ".md", "g" * 2000 + ".md", ".md", "x"]  # fmt: skip
    rels += [f"{f}/{n}" for f in folders for n in names]  # the same folders again and again, as in a scan
    deep = "knowledge/" + "/".join(c * 128 for c in "hijklm")  # 6 components of 128: 783 characters
    rels += [f"{deep}/{'n' * k}.md" for k in (100, 128, 236, 237, 238)]  # 1,024 is the longest path
    check = paths.rel_checker()
    got = [check(r) for r in rels]
    assert got == [paths.rel_problem(r) for r in rels]
    assert sum(p is None for p in got) > 300 and sum(p is not None for p in got) > 3000


def test_a_closing_bracket_group_with_groups_inside_goes_whole() -> None:
    """Session 38's migration simulation: Wikipedia-style instance names hold a bracket group
    inside the closing one (知识点（李翰 (设计师)）); the one-level pattern left the name
    whole, and each such memory got a bucket of its own (112 of 173 buckets singletons)."""
    from md_cg.layout import normalize_position

    assert [
        normalize_position(p)
        for p in (
            "物理学·知识点（李翰 (设计师)）",
            "物理学·知识点（李翰（设计师））",
            "Physics · topic (Ohm (unit))",
            "Physics · topic (a (b) (c (d)))",
            "Physics (x) · topic ((deep))",
            "Physics · topic (a))",
        )
    ] == ["物理学", "物理学", "physics", "physics", "physics", "physics · topic (a))"]
