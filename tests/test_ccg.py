"""CCG marks: Chinese/English marks, colons, state_attributes.ccg, completeness."""

from __future__ import annotations

from md_cg import ccg

FULL_ZH = """# 功能名：二分查找
# 生效条件：有序数组，随机访问 O(1)
# 子功能：取中点 → 比较 → 缩小区间
# 执行：返回下标或 -1
# 验证方式：单元测试覆盖边界
# 不适用条件：数组未排序；链表
正文"""

FULL_EN = """## Function: binary search
# Applies when: sorted array
# steps: midpoint, compare, shrink
# Executes: returns the index
# Verified by: unit tests
#Not applicable when: unsorted array or linked list
"""


def test_chinese_marks_full_width_colon() -> None:
    elems = ccg.elements(FULL_ZH)
    assert elems == {
        "function": "二分查找",
        "applies_when": "有序数组，随机访问 O(1)",
        "steps": "取中点 → 比较 → 缩小区间",
        "executes": "返回下标或 -1",
        "verified_by": "单元测试覆盖边界",
        "not_applicable": "数组未排序；链表",
    }
    assert ccg.completeness(elems) == 1.0
    assert ccg.missing(elems) == ()


def test_english_marks_ascii_colon_any_case() -> None:
    elems = ccg.elements(FULL_EN)
    assert elems["steps"] == "midpoint, compare, shrink"
    assert elems["not_applicable"] == "unsorted array or linked list"
    assert ccg.completeness(elems) == 1.0


def test_incomplete_and_blank_elements() -> None:
    body = "# 生效条件：有序数组\n# 执行:  \n# Steps: a\n"
    elems = ccg.elements(body)
    assert ccg.missing(elems) == ("executes", "verified_by", "not_applicable")
    assert ccg.completeness(elems) == 0.4


def test_state_attributes_ccg_completes_the_body() -> None:
    attrs = {"ccg": {"verified_by": "test", "不适用条件": ["链表", "未排序"], "Executes": "x"}}
    elems = ccg.elements("# 生效条件：a\n# 子功能：b\n# 执行：body wins\n", attrs)
    assert elems["executes"] == "body wins"
    assert elems["not_applicable"] == "链表；未排序"
    assert ccg.completeness(elems) == 1.0


def test_marks_inside_text_lines_do_not_count() -> None:
    assert ccg.elements("the 执行：x is not a mark\n功能名：y\n") == {}


def test_split_conditions() -> None:
    assert ccg.split_conditions("数组未排序；链表、 稀疏图") == ["数组未排序", "链表", "稀疏图"]
    assert ccg.split_conditions("unsorted array or linked list") == ["unsorted array", "linked list"]
    assert ccg.split_conditions("") == []
