"""Tests of md_cg.routing: big-domain classification, key mapping, bucket health."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from md_cg import routing
from md_cg.errors import MdcgError
from md_cg.routing import (
    DOMAINS,
    EXACT_WEIGHT,
    PARTIAL_WEIGHT,
    BucketHealth,
    UnknownBigDomainError,
    big_domain_classify,
    bucket_health,
    buckets_for_big_domain,
    domain_of_key,
    resolve_big_domain,
)

DATA = Path(routing.__file__).parent / "data" / "big_domains.json"


def nonzero(scores: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in scores.items() if v}


# -- the shipped table ---------------------------------------------------------


def test_domains_are_the_fourteen_in_fixed_order() -> None:
    assert DOMAINS == (
        "mathematics",
        "physics",
        "chemistry",
        "biology",
        "computing",
        "language",
        "history",
        "geography",
        "art",
        "economics",
        "psychology",
        "medicine",
        "engineering",
        "general",
    )


def test_keyword_file_lists_every_domain_with_enough_keywords() -> None:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert tuple(data["domains"]) == DOMAINS
    for name, entry in data["domains"].items():
        assert len(entry["zh"]) >= 25, name
        assert len(entry["en"]) >= 25, name


def test_no_keyword_belongs_to_two_domains() -> None:
    owners: dict[str, str] = {}
    for domain in DOMAINS:
        for word in routing.domain_keywords(domain):
            assert word not in owners, (word, owners.get(word), domain)
            owners[word] = domain


def test_computing_keywords_include_the_examples() -> None:
    words = routing.domain_keywords("computing")
    for w in ("算法", "二分查找", "编程", "数据结构", "algorithm", "python", "database"):
        assert w in words


# -- classification -----------------------------------------------------------


def test_score_table_has_all_fourteen_keys_in_order_even_with_no_hit() -> None:
    top, scores = big_domain_classify(["菜谱", "xyzzy"])
    assert top is None
    assert list(scores) == list(DOMAINS)
    assert set(scores.values()) == {0.0}


def test_empty_terms_give_none() -> None:
    top, scores = big_domain_classify([])
    assert top is None
    assert len(scores) == 14


def test_exact_chinese_hit() -> None:
    top, scores = big_domain_classify(["二分查找", "边界"])
    assert top == "computing"
    assert nonzero(scores) == {"computing": EXACT_WEIGHT}


def test_cjk_term_inside_keyword_is_partial() -> None:
    top, scores = big_domain_classify(["查找"])
    assert top == "computing"
    assert nonzero(scores) == {"computing": PARTIAL_WEIGHT}


def test_cjk_keyword_inside_term_is_partial() -> None:
    top, scores = big_domain_classify(["量子力学入门课"])
    assert top == "physics"
    assert scores["physics"] == PARTIAL_WEIGHT


def test_cjk_bigrams_accumulate() -> None:
    top, scores = big_domain_classify(["二分", "分查", "查找"])
    assert top == "computing"
    assert scores["computing"] == 1.5


def test_single_cjk_character_does_not_match_by_containment() -> None:
    # "数" is inside 数学 and 数组, but one character is too little evidence.
    top, scores = big_domain_classify(["数"])
    assert top is None
    assert set(scores.values()) == {0.0}


def test_english_case_folded_and_plural_stripped() -> None:
    assert big_domain_classify(["Algorithms"])[0] == "computing"
    assert big_domain_classify(["DATABASES"])[0] == "computing"
    assert big_domain_classify(["theories"])[1]["general"] == EXACT_WEIGHT
    assert big_domain_classify(["equations"])[0] == "mathematics"


def test_physics_is_not_stripped_into_a_miss() -> None:
    assert big_domain_classify(["physics"])[0] == "physics"


def test_english_phrase_from_adjacent_terms() -> None:
    top, scores = big_domain_classify(["binary", "search"])
    assert top == "computing"
    assert scores["computing"] == EXACT_WEIGHT
    # not adjacent: no phrase
    top2, _ = big_domain_classify(["binary", "the", "search"])
    assert top2 is None


def test_phrase_given_as_one_term() -> None:
    assert big_domain_classify(["Binary  Search"])[0] == "computing"


def test_repeated_term_counts_once() -> None:
    _, once = big_domain_classify(["gravity"])
    _, thrice = big_domain_classify(["gravity", "Gravity", "GRAVITY"])
    assert once == thrice


def test_highest_total_wins() -> None:
    top, scores = big_domain_classify(["python", "cancer", "diagnosis"])
    assert scores["computing"] == 1.0
    assert scores["medicine"] == 2.0
    assert top == "medicine"


def test_tie_goes_to_the_domain_listed_first() -> None:
    # one exact hit each: physics (index 1) beats general (index 13)
    top, scores = big_domain_classify(["general", "relativity"])
    assert scores["physics"] == scores["general"] == 1.0
    assert top == "physics"
    # and the order of the terms does not matter
    assert big_domain_classify(["relativity", "general"])[0] == "physics"
    # computing (index 4) beats language (index 5)
    top, scores = big_domain_classify(["grammar", "compiler"])
    assert scores["language"] == scores["computing"] == 1.0
    assert top == "computing"


def test_general_only_for_generic_words() -> None:
    assert big_domain_classify(["概念", "definition"])[0] == "general"


def test_non_string_term_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        big_domain_classify(["ok", 3])  # type: ignore[list-item]


def test_terms_may_be_any_iterable() -> None:
    assert big_domain_classify(iter(("细胞", "基因")))[0] == "biology"


# -- stage 2 -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "domain"),
    [
        ("计算机科学", "computing"),
        ("physics", "physics"),
        ("物理·力学", "physics"),
        ("machine learning", "computing"),
        ("医学影像", "medicine"),
        ("经济学原理", "economics"),
        ("computing", "computing"),
        ("General", "general"),
        ("菜谱", None),
        ("", None),
    ],
)
def test_domain_of_key(key: str, domain: str | None) -> None:
    assert domain_of_key(key) == domain


def test_domain_of_key_rejects_non_strings() -> None:
    with pytest.raises(TypeError):
        domain_of_key(None)  # type: ignore[arg-type]


def test_buckets_for_big_domain_sorted_deduplicated_orphans_skipped() -> None:
    keys = ["物理·力学", "计算机科学", "physics", "菜谱", None, "", "算法", "计算机科学", "optics"]
    assert buckets_for_big_domain("physics", keys) == ["optics", "physics", "物理·力学"]
    assert buckets_for_big_domain("computing", keys) == ["算法", "计算机科学"]
    assert buckets_for_big_domain("history", keys) == []


def test_buckets_for_unknown_domain_raises_mdcg_error() -> None:
    with pytest.raises(UnknownBigDomainError) as info:
        buckets_for_big_domain("cooking", ["菜谱"])
    assert isinstance(info.value, MdcgError)
    assert "cooking" in str(info.value)


def test_resolve_auto_and_explicit() -> None:
    assert resolve_big_domain("auto", ["二分查找"])[0] == "computing"
    assert resolve_big_domain("AUTO", ["菜谱"])[0] is None
    top, scores = resolve_big_domain("History", ["二分查找"])
    assert top == "history"
    assert scores["computing"] == 1.0
    with pytest.raises(UnknownBigDomainError):
        resolve_big_domain("cooking", [])


# -- bucket health --------------------------------------------------------------


def test_seed_scheme_a_is_degraded_by_singletons() -> None:
    # 3,037 buckets for 3,048 nodes: 3,036 singletons and one bucket of 12.
    sizes = {f"b{i}": 1 for i in range(3036)}
    sizes["big"] = 12
    h = bucket_health(sizes)
    assert (h.buckets, h.nodes) == (3037, 3048)
    assert h.degraded is True
    assert h.singleton_rate == pytest.approx(3036 / 3037)
    assert h.singleton_rate > 0.999
    assert h.largest_share == pytest.approx(12 / 3048)
    assert h.expected_scan == pytest.approx((3036 + 144) / 3048**2)
    assert len(h.reasons) == 1
    assert h.reasons[0].startswith("singleton buckets are 99.97% of buckets (3036/3037")
    assert h.largest_bucket == "big"


def test_ninety_roughly_equal_buckets_are_healthy() -> None:
    sizes = {f"d{i}": 34 for i in range(78)} | {f"e{i}": 33 for i in range(12)}
    h = bucket_health(sizes)
    assert (h.buckets, h.nodes) == (90, 3048)
    assert h.degraded is False
    assert h.reasons == ()
    assert h.singleton_rate == 0.0
    assert h.expected_scan == pytest.approx((78 * 34**2 + 12 * 33**2) / 3048**2)
    assert 0.011 <= h.expected_scan <= 0.02


def test_seed_scheme_d_figures() -> None:
    # 90 buckets, largest 5.4% (165 of 3,048): healthy.
    sizes = {"largest": 165} | {f"d{i}": 33 if i < 35 else 32 for i in range(89)}
    h = bucket_health(sizes)
    assert (h.buckets, h.nodes) == (90, 3048)
    assert h.largest_share == pytest.approx(165 / 3048)
    assert round(h.largest_share, 3) == 0.054
    assert not h.degraded


def test_empty_partition() -> None:
    h = bucket_health({})
    assert h == BucketHealth(0, 0, 0.0, 0.0, 0.0, False, (), None)


def test_zero_sized_buckets_are_ignored() -> None:
    assert bucket_health({"a": 0}) == bucket_health({})
    assert bucket_health({"a": 0, "b": 2, "c": 2, "d": 2, "e": 2}).buckets == 4


def test_one_bucket_is_degraded_by_share_and_scan() -> None:
    h = bucket_health({"only": 5})
    assert (h.largest_share, h.singleton_rate, h.expected_scan) == (1.0, 0.0, 1.0)
    assert h.degraded
    assert len(h.reasons) == 2
    assert h.reasons[0] == "largest bucket 'only' holds 100.00% of nodes (5/5; limit 30%)"
    assert h.reasons[1].startswith("expected scan share is 100.00%")


def test_single_node_store_trips_all_three() -> None:
    h = bucket_health({"x": 1})
    assert (h.largest_share, h.singleton_rate, h.expected_scan) == (1.0, 1.0, 1.0)
    assert len(h.reasons) == 3


def test_largest_share_exactly_thirty_percent_is_healthy() -> None:
    # 3 of 10 in the largest bucket: exactly 0.30 -> not degraded (strict >).
    sizes = {"a": 3, "b": 2, "c": 2, "d": 2, "e": 1}
    h = bucket_health(sizes)
    assert h.largest_share == 0.3
    assert h.singleton_rate == 0.2
    assert not h.degraded
    # one more node in the largest bucket crosses it
    sizes["a"] = 4
    assert bucket_health(sizes).degraded


def test_singleton_rate_exactly_half_is_healthy() -> None:
    # 4 singletons of 8 buckets; sizes keep the other criteria low
    sizes = {f"s{i}": 1 for i in range(4)} | {f"m{i}": 4 for i in range(4)}
    h = bucket_health(sizes)
    assert h.singleton_rate == 0.5
    assert h.largest_share == 0.2
    assert not h.degraded
    sizes["m0"] = 1
    h2 = bucket_health(sizes)
    assert h2.singleton_rate == 5 / 8
    assert h2.degraded
    assert h2.reasons == ("singleton buckets are 62.50% of buckets (5/8; limit 50%)",)


def test_expected_scan_threshold_is_strict_and_exact() -> None:
    # Σv²/n² = (25 + 5) / 100 = 0.30 exactly: the scan criterion does not fire
    # (only the largest share does).
    h = bucket_health({"a": 5, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1})
    assert h.expected_scan == 0.3
    assert len(h.reasons) == 2
    assert h.reasons[0].startswith("largest bucket 'a' holds 50.00%")
    assert h.reasons[1].startswith("singleton buckets are 83.33%")
    # (25 + 4 + 3) / 100 = 0.32: it fires
    h = bucket_health({"a": 5, "b": 2, "c": 1, "d": 1, "e": 1})
    assert h.expected_scan == 0.32
    assert h.reasons[-1] == (
        "expected scan share is 32.00% (sum of squared bucket sizes / nodes²; limit 30%)"
    )


def test_expected_scan_never_exceeds_largest_share() -> None:
    # Σv² <= max(v)·Σv, so the scan figure is bounded by the largest share.
    for sizes in ({"a": 3, "b": 3, "c": 3, "d": 1}, {"a": 9, "b": 1}, {"a": 1, "b": 1}):
        h = bucket_health(sizes)
        assert h.expected_scan <= h.largest_share


def test_expected_scan_is_sum_of_squares_over_n_squared() -> None:
    h = bucket_health({"a": 1, "b": 2, "c": 3, "d": 4})
    assert h.expected_scan == pytest.approx((1 + 4 + 9 + 16) / 100)
    assert h.largest_bucket == "d"


def test_largest_bucket_tie_goes_to_smallest_name() -> None:
    assert bucket_health({"z": 4, "a": 4, "m": 1}).largest_bucket == "a"


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_bad_counts_raise(bad: object) -> None:
    with pytest.raises(ValueError, match="bucket 'x'"):
        bucket_health({"x": bad})  # type: ignore[dict-item]


def test_health_is_frozen_and_serialisable() -> None:
    h = bucket_health({"a": 2, "b": 2})
    with pytest.raises(AttributeError):
        h.degraded = True  # type: ignore[misc]
    d = h.to_dict()
    assert d == {
        "buckets": 2,
        "nodes": 4,
        "largest_share": 0.5,
        "singleton_rate": 0.0,
        "expected_scan": 0.5,
        "degraded": True,
        "reasons": list(h.reasons),
        "largest_bucket": "a",
    }
    json.dumps(d)
