"""Tests of md_cg.judge: the four states, their order, condition matching."""

from __future__ import annotations

import time

import pytest

from md_cg.ccg import REQUIRED
from md_cg.judge import (
    ACCEPT,
    BLINDSPOT,
    DEFER,
    REJECT,
    STATES,
    Judgement,
    PreparedText,
    condition_hit,
    context_text,
    is_fact,
    judge,
    judge_node,
    node_conditions,
    prepare_conditions,
    prepare_context,
    prepare_text,
)
from md_cg.node import Node

COMPLETE_BODY = (
    "# 功能名：二分查找\n"
    "# 生效条件：有序数组，随机访问 O(1)\n"
    "# 子功能：取中点 → 比较 → 缩小区间\n"
    "# 执行：返回下标或 -1\n"
    "# 验证方式：单元测试覆盖边界\n"
    "# 不适用条件：数组未排序；链表\n"
    "正文……\n"
)


def run(
    *,
    missing: tuple[str, ...] = (),
    conditions: tuple[str, ...] = (),
    basis: str | None = "test",
    query: str = "二分查找的边界",
    context: object = None,
) -> Judgement:
    return judge(
        ccg_missing=missing,
        non_applicable=conditions,
        verification_basis=basis,
        query=query,
        context=context,
    )


# -- the four states ------------------------------------------------------------


def test_states_in_listing_order() -> None:
    assert STATES == ("ACCEPT", "REJECT", "DEFER", "BLINDSPOT")


def test_accept() -> None:
    j = run(conditions=("数组未排序", "链表"))
    assert j == Judgement(
        ACCEPT,
        'ACCEPT: CCG complete, no not-applicable condition hit, verification basis "test"',
    )


def test_low_confidence_defers_what_would_be_accepted() -> None:
    """A memory whose confidence evidence drove down (verify weakened, ten times: 0.0)
    was still ACCEPT, and inject put it first."""
    facts = tuple(REQUIRED)
    for missing, what in (
        ((), "CCG complete, no not-applicable condition hit"),
        (facts, "fact with no applicability conditions"),
    ):
        for confidence, state in ((None, ACCEPT), (0.3, ACCEPT), (0.9, ACCEPT), (0.29, DEFER), (0.0, DEFER)):
            j = judge(
                ccg_missing=missing,
                non_applicable=(),
                verification_basis="test",
                query="q",
                confidence=confidence,
            )
            assert j.state == state, (what, confidence)
            if state == DEFER:
                assert j.basis == (
                    f'DEFER: {what}, verification basis "test", but its confidence {confidence:g} '
                    "is below 0.3 (evidence went against it): confirm it before acting"
                )
    hit = judge(
        ccg_missing=(), non_applicable=("链表",), verification_basis="test", query="链表", confidence=0.0
    )
    assert hit.state == REJECT  # a condition hit still wins
    half = judge(
        ccg_missing=("steps",), non_applicable=(), verification_basis="test", query="q", confidence=0.0
    )
    assert half.state == BLINDSPOT


def test_defer_without_basis() -> None:
    for basis in (None, "", "   "):
        j = run(conditions=("链表",), basis=basis)
        assert j.state == DEFER
        assert j.basis == "DEFER: CCG complete but no verification basis declared"
        assert j.hit_condition is None
        assert j.missing == ()


def test_blindspot_lists_missing_elements() -> None:
    j = run(missing=("verified_by", "not_applicable"), basis="test")
    assert j.state == BLINDSPOT
    assert j.basis == "BLINDSPOT: CCG incomplete, missing verified_by, not_applicable"
    assert j.missing == ("verified_by", "not_applicable")


def test_blindspot_beats_defer() -> None:
    assert run(missing=("steps",), basis=None).state == BLINDSPOT


def test_reject_by_query() -> None:
    j = run(conditions=("链表", "数组未排序"), query="这个数组未排序能用吗")
    assert j.state == REJECT
    assert j.basis == 'REJECT: not-applicable condition "数组未排序" matched by the query'
    assert j.hit_condition == "数组未排序"
    assert j.matched_by == "query"


def test_reject_beats_blindspot_and_keeps_missing() -> None:
    j = run(
        missing=("verified_by",),
        conditions=("数组未排序",),
        basis=None,
        query="数组未排序可以用二分吗",
    )
    assert j.state == REJECT
    assert j.missing == ("verified_by",)
    # the same node without the hit is a blind spot
    assert run(missing=("verified_by",), conditions=("数组未排序",), basis=None).state == BLINDSPOT


def test_reject_via_context_not_query() -> None:
    j = run(conditions=("链表",), query="二分查找怎么写", context={"tags": ["链表", "algorithm"]})
    assert j.state == REJECT
    assert j.matched_by == "context"
    assert j.basis == 'REJECT: not-applicable condition "链表" matched by the context'
    # the same query without that context is accepted
    assert run(conditions=("链表",), query="二分查找怎么写").state == ACCEPT


def test_first_condition_in_node_order_is_reported() -> None:
    j = run(conditions=("链表", "数组未排序"), query="链表和数组未排序")
    assert j.hit_condition == "链表"


def test_query_is_checked_before_context_for_the_same_condition() -> None:
    j = run(conditions=("链表",), query="链表", context="链表")
    assert j.matched_by == "query"


def test_english_condition() -> None:
    j = run(conditions=("linked list",), query="Does this work on a linked list?")
    assert j.state == REJECT
    assert j.basis == 'REJECT: not-applicable condition "linked list" matched by the query'


def test_no_false_hit() -> None:
    assert run(conditions=("链表",), query="数组").state == ACCEPT
    assert run(conditions=("数组未排序",), query="数组已排序").state == ACCEPT
    assert run(conditions=("list",), query="my playlist").state == ACCEPT
    assert run(conditions=("not sorted",), query="the array is sorted").state == ACCEPT


def test_blank_and_empty_conditions_never_reject() -> None:
    assert run(conditions=("", "  ", "。"), query="。 anything").state == ACCEPT
    assert run(conditions=(), query="").state == ACCEPT


def test_missing_deduplicated_order_kept() -> None:
    j = run(missing=("steps", "executes", "steps"))
    assert j.missing == ("steps", "executes")


def test_judgement_is_frozen_and_serialisable() -> None:
    j = run(conditions=("链表",), query="链表")
    with pytest.raises(AttributeError):
        j.state = ACCEPT  # type: ignore[misc]
    assert j.to_dict() == {
        "state": "REJECT",
        "basis": 'REJECT: not-applicable condition "链表" matched by the query',
        "hit_condition": "链表",
        "missing": [],
        "matched_by": "query",
    }


# -- condition matching --------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "text"),
    [
        ("linked list", "does this work on a linked list?"),
        ("Linked List", "LINKED  LIST"),
        ("linked list", "can I use it with linked lists"),  # plural, content rule
        ("linked list", "a list that is linked"),  # all content words in one clause
        ("数组未排序", "这个数组未排序能用吗"),
        ("数组未排序", "未排序的数组可以吗"),  # reordered: every character covered
        ("当数组未排序时", "数组未排序怎么办"),  # framing 当…时 not required
        ("人物被遮挡 >70% 时", "人物被遮挡超过70%的照片"),
        ("Windows 系统", "在windows系统上运行"),
        ("array not sorted", "the array is not sorted"),
        ("c++", "用c++写"),
        ("ｌｉｎｋｅｄ ｌｉｓｔ", "linked list"),  # NFKC full-width
        ("数据库连接失败", "数据库连接失败了怎么办"),
        ("未排序的数组", "数组未排序时能用吗"),  # particle 的 not required
        ("during a data migration", "a data migration is running"),  # "during" frames, like "while"
        ("during a data migration", "we are in the middle of a data migration"),
    ],
)
def test_hits(condition: str, text: str) -> None:
    assert condition_hit(condition, text)


@pytest.mark.parametrize(
    ("condition", "text"),
    [
        ("链表", "数组"),
        ("数组未排序", "数组已排序"),  # 未 not covered
        ("list", "my playlist"),  # word boundary
        ("c", "c++ only"),
        ("not sorted", "the array is sorted"),
        ("array not sorted", "the array is sorted, not reversed"),  # different clauses
        ("高并发写入", "高并发读取，写入少"),  # different clauses
        ("linked list", "linked. List"),
        ("时", "什么时候"),  # only framing: no content
        ("the", "the end"),  # only function words: no content
        ("linked list", ""),
        ("during a data migration", "a data export is running"),
    ],
)
def test_no_hits(condition: str, text: str) -> None:
    assert not condition_hit(condition, text)


def test_phrase_rule_alone_can_hit() -> None:
    # the condition spans a clause boundary, so only the phrase rule can match it
    cond = "empty input, null value"
    assert condition_hit(cond, "what about empty input, null value?")
    assert not condition_hit(cond, "null value, and empty input")


def test_negation_is_not_understood() -> None:
    # documented limitation: text matching, no semantics
    assert condition_hit("linked list", "this is not a linked list")


def test_prepared_and_raw_give_the_same_answer() -> None:
    conds = prepare_conditions(["链表", "linked list", "数组未排序"])
    for text in ("链表", "a linked list", "数组", "未排序的数组"):
        prepared = prepare_text(text)
        for cond in conds:
            assert condition_hit(cond, prepared) == condition_hit(cond.text, text)


def test_prepare_conditions_dedups_by_normalised_form() -> None:
    conds = prepare_conditions(["Linked List", "linked  list", "", "链表", "  链表 "])
    assert [c.text for c in conds] == ["Linked List", "链表"]
    assert prepare_conditions(conds) == conds
    with pytest.raises(TypeError):
        prepare_conditions([3])  # type: ignore[list-item]


def test_judge_accepts_prepared_conditions_and_context() -> None:
    conds = prepare_conditions(["链表"])
    ctx = prepare_context({"tags": ["链表"]})
    assert isinstance(ctx, PreparedText)
    j = judge(ccg_missing=(), non_applicable=conds, verification_basis="test", query="q", context=ctx)
    assert j.state == REJECT
    assert j.matched_by == "context"


# -- context text ------------------------------------------------------------------------


def test_context_text_from_mapping_nested() -> None:
    ctx = {
        "tags": ["domain:计算机科学", "Linked List"],
        "condition_space": {"observation_position": "链表·知识点", "time_window": [1, 2]},
        "big_domain": "auto",
        "flag": True,
        "weight": 0.5,
    }
    assert context_text(ctx) == "domain:计算机科学 | linked list | 链表·知识点"


def test_context_text_from_node_uses_tags_and_condition_space_only() -> None:
    node = Node(
        id="ctx",
        body="数组未排序",
        tags=["链表"],
        condition_space={"observation_tool": "Linked List"},
    )
    assert context_text(node) == "链表 | linked list"
    assert run(conditions=("数组未排序",), query="q", context=node).state == ACCEPT
    assert run(conditions=("linked list",), query="q", context=node).state == REJECT


def test_context_string_and_list() -> None:
    assert run(conditions=("链表",), query="q", context="在链表上").state == REJECT
    assert run(conditions=("链表",), query="q", context=["数组", "链表"]).state == REJECT


def test_phrase_does_not_span_context_pieces() -> None:
    assert not condition_hit("linked list", prepare_context(["a linked", "list b"]))


def test_bad_context_type() -> None:
    with pytest.raises(TypeError):
        run(conditions=("链表",), context=object())


def test_big_domain_value_is_not_context_text() -> None:
    assert run(conditions=("auto",), query="q", context={"big_domain": "auto"}).state == ACCEPT


# -- from a node ----------------------------------------------------------------------------


def test_node_conditions_field_then_ccg_element_dedup() -> None:
    node = Node(
        id="kp_1",
        body=COMPLETE_BODY,
        non_applicable_conditions=["链表", "Linked List"],
        verification_basis="test",
    )
    assert node_conditions(node) == ("链表", "Linked List", "数组未排序")


def test_node_conditions_from_state_attributes_ccg() -> None:
    node = Node(
        id="kp_2",
        state_attributes={"ccg": {"not_applicable": "no network, or read-only disk"}},
    )
    assert node_conditions(node) == ("no network", "read-only disk")


def test_node_conditions_none() -> None:
    assert node_conditions(Node(id="kp_3")) == ()


def test_judge_node_states() -> None:
    node = Node(id="kp_1", body=COMPLETE_BODY, verification_basis="test")
    assert judge_node(node, "二分查找的边界").state == ACCEPT
    assert judge_node(node, "这个数组未排序能用吗").state == REJECT
    assert judge_node(node, "二分", context={"tags": ["链表"]}).state == REJECT
    node.verification_basis = None
    assert judge_node(node, "二分查找的边界").state == DEFER
    bare = Node(id="kp_4", body="# 不适用条件：链表\n")
    j = judge_node(bare, "二分查找")
    assert j.state == BLINDSPOT
    assert j.missing == ("applies_when", "steps", "executes", "verified_by")
    assert judge_node(bare, "链表能用吗").state == REJECT


def test_judge_is_fast_enough() -> None:
    conds = prepare_conditions(["数组未排序", "链表", "linked list", "多进程并发写入"])
    ctx = prepare_context({"tags": ["domain:计算机科学"]})
    query = "二分查找在有序数组上的边界条件 binary search edge cases"
    n = 2000
    start = time.process_time()  # CPU time: a loaded machine's other processes do not count
    for _ in range(n):
        judge(
            ccg_missing=(),
            non_applicable=conds,
            verification_basis="test",
            query=query,
            context=ctx,
        )
    assert (time.process_time() - start) / n < 200e-6


# -- facts and procedures ---------------------------------------------------------------

FACT_EN = "The user's name is Sam; he lives in Lisbon."
FACT_ZH = "用户的名字是小明，住在杭州。"
PROCEDURE_EN = (
    "# Applies when: the array is sorted\n# Steps: take the middle, compare, halve\n"
    "# Executes: returns the index or -1\n# Verified by: unit tests\n"
    "# Not applicable when: linked list\nBinary search.\n"
)


def test_is_fact() -> None:
    assert is_fact(REQUIRED) and is_fact((*REQUIRED, "steps"))
    assert not is_fact(REQUIRED[1:]) and not is_fact(())


@pytest.mark.parametrize(
    ("body", "query"), [(FACT_EN, "what is the user's name"), (FACT_ZH, "用户叫什么名字")]
)
def test_a_fact_with_a_basis_is_accepted(body: str, query: str) -> None:
    j = judge_node(Node(id="f", body=body, verification_basis="user said so"), query)
    assert j == Judgement(
        ACCEPT,
        'ACCEPT: fact with no applicability conditions, verification basis "user said so"',
    )


@pytest.mark.parametrize(("body", "query"), [(FACT_EN, "where does Sam live"), (FACT_ZH, "小明住在哪里")])
def test_a_fact_without_a_basis_is_deferred_not_a_blindspot(body: str, query: str) -> None:
    j = judge_node(Node(id="f", body=body), query)
    assert j == Judgement(
        DEFER,
        "DEFER: fact with no applicability conditions, but no verification basis declared",
    )
    assert j.missing == ()


def test_a_function_name_alone_does_not_make_a_procedure() -> None:
    j = judge_node(Node(id="f", body="# Function: greeting\nSay hello.\n", verification_basis="x"), "hello")
    assert j.state == ACCEPT and j.basis.startswith("ACCEPT: fact with")


@pytest.mark.parametrize(
    ("conditions", "query", "hit"),
    [
        (["in a video call"], "greet the user in a video call", "in a video call"),
        (["视频通话"], "视频通话时怎么称呼", "视频通话"),
    ],
)
def test_a_fact_is_rejected_by_its_conditions(conditions: list[str], query: str, hit: str) -> None:
    node = Node(id="f", body=FACT_EN, non_applicable_conditions=conditions, verification_basis="user")
    j = judge_node(node, query)
    assert (j.state, j.hit_condition, j.matched_by, j.missing) == (REJECT, hit, "query", ())
    other = judge_node(node, "what is the user's name")
    assert other == Judgement(
        ACCEPT,
        'ACCEPT: fact, no not-applicable condition hit, verification basis "user"',
    )
    node.verification_basis = None
    assert judge_node(node, "名字").basis == (
        "DEFER: fact, no not-applicable condition hit, but no verification basis declared"
    )


@pytest.mark.parametrize("body", [PROCEDURE_EN, COMPLETE_BODY])
def test_a_complete_procedure_is_judged_as_before(body: str) -> None:
    node = Node(id="p", body=body, verification_basis="test")
    assert judge_node(node, "binary search 二分查找").basis == (
        'ACCEPT: CCG complete, no not-applicable condition hit, verification basis "test"'
    )
    node.verification_basis = None
    assert (
        judge_node(node, "binary search 二分查找").basis
        == "DEFER: CCG complete but no verification basis declared"
    )


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        (
            "# Steps: take the middle\nBinary search.\n",
            ("applies_when", "executes", "verified_by", "not_applicable"),
        ),
        ("# 生效条件：有序数组\n# 执行：返回下标\n二分查找\n", ("steps", "verified_by", "not_applicable")),
    ],
)
def test_an_incomplete_procedure_is_still_a_blindspot(body: str, missing: tuple[str, ...]) -> None:
    j = judge_node(Node(id="p", body=body, verification_basis="test"), "binary search 二分查找")
    assert j == Judgement(
        BLINDSPOT, f"BLINDSPOT: CCG incomplete, missing {', '.join(missing)}", missing=missing
    )


@pytest.mark.parametrize(
    ("query", "hit"), [("binary search on a linked list", "linked list"), ("链表上的二分查找", "链表")]
)
def test_a_procedure_is_rejected_by_its_conditions(query: str, hit: str) -> None:
    body = PROCEDURE_EN if hit == "linked list" else COMPLETE_BODY
    j = judge_node(Node(id="p", body=body, verification_basis="test"), query)
    assert (j.state, j.hit_condition) == (REJECT, hit)


def test_a_node_in_merge_conflict_is_never_accept() -> None:
    """Review (session 25): an unresolved merge conflict was ACCEPT. It defers, after
    REJECT and BLINDSPOT, before the basis and the confidence."""
    fact = dict(ccg_missing=REQUIRED, non_applicable=(), verification_basis="data", query="deadline")
    conflicted = judge(**fact, conflict=True)  # type: ignore[arg-type]
    assert (conflicted.state, conflicted.basis) == (
        DEFER,
        "DEFER: unresolved merge conflict: settle it with update (its text holds both sides of the merge)",
    )
    assert judge(**fact).state == ACCEPT  # type: ignore[arg-type]
    no_basis = judge(**{**fact, "verification_basis": None}, conflict=True)  # type: ignore[arg-type]
    assert no_basis.basis == conflicted.basis
    hit = judge(**{**fact, "non_applicable": ["deadline"]}, conflict=True)  # type: ignore[arg-type]
    assert hit.state == REJECT
    gap = judge(ccg_missing=["steps"], non_applicable=(), verification_basis="data", query="q", conflict=True)
    assert (gap.state, gap.missing) == (BLINDSPOT, ("steps",))
    node = Node(id="n", body="x", verification_basis="data", extra={"merge_conflict": {"fields": {}}})
    assert judge_node(node, "x").state == DEFER
    assert judge_node(node, "x", conflict=False).state == ACCEPT
