"""ccg.parse_marks tries its pattern on candidate lines only; it finds what a full scan finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from md_cg import ccg
from md_cg.benchmark import corpus


def reference_marks(body: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in ccg._MARK_RE.finditer(body):
        key = ccg._ALIASES.get(match.group(1)) or ccg._ALIASES.get(match.group(1).casefold())
        if key and key not in found:
            found[key] = match.group(2)
    return found


_PIECES = [
    "#",
    "##",
    "#######",
    " ",
    "  ",
    "   ",
    "    ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "x",
    "功能名",
    "生效条件",
    "执行",
    "Function",
    "APPLIES WHEN",
    "Not applicable when",
    "verified by",
    "steps",
    ":",
    "：",
    " a；b ",
    "\u2028",
    "\x85",
]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_parse_marks_equals_a_full_scan(pieces: list[str]) -> None:
    body = "".join(pieces)
    expected = [(m.group(1), m.group(2)) for m in ccg._MARK_RE.finditer(body)]
    assert ccg._mark_lines(body) == expected
    assert ccg.parse_marks(body) == reference_marks(body)


def test_parse_marks_on_the_benchmark_corpus() -> None:
    bodies = [n.body for n in corpus(1000)]
    assert sum(1 for b in bodies if ccg.parse_marks(b)) > 0
    for body in bodies:
        assert ccg.parse_marks(body) == reference_marks(body)


def test_parse_marks_candidate_lines() -> None:
    body = (
        "x # Function: no\n   ## Steps：a；b  \r\n    # Executes: too deep\n"
        "\t#Verified by:  ok\n# Steps: second"
    )
    assert ccg.parse_marks(body) == {"steps": "a；b", "verified_by": "ok"}
