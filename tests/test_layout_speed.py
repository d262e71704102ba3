"""layout.normalize_position skips the bracket regex and the suffix loop only where they cannot match."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from md_cg import layout
from md_cg.benchmark import corpus
from md_cg.script import fold


def _tail_group_stripped(text: str) -> str:
    """The closing bracket group cut off, found by a forward scan with a stack (the code
    scans backwards): nested groups inside it go with it, an unbalanced tail stays."""
    body = text.rstrip()
    if not body.endswith(")"):
        return text
    opened: list[int] = []
    start = None
    for i, ch in enumerate(body):
        if ch == "(":
            opened.append(i)
        elif ch == ")":
            start = opened.pop() if opened else None
    return body[:start].rstrip() if start is not None else text


def reference_position(position: str) -> str | None:
    text = fold(position, collapse=False).strip()
    while True:
        before = text
        text = _tail_group_stripped(text).rstrip(layout._SEPARATORS)
        for suffix in layout.SKELETON_SUFFIXES:
            if text.endswith(suffix) and len(text) > len(suffix):
                text = text[: -len(suffix)].rstrip(layout._SEPARATORS)
                break
        if text == before:
            break
    text = text.strip(layout._SEPARATORS)
    if not text or text in layout.SKELETON_SUFFIXES:
        return None
    return text


_PIECES = [
    "计算机科学",
    "·",
    "知识点",
    "（",
    "）",
    "(",
    ")",
    "a",
    "Topic",
    "item",
    " ",
    "\n",
    "\u3000",
    "\t",
    "-",
    "：",
    "概念",
    "example",
    "(x)",
    "（并查集）",
    "(a (b))",
    "（李翰 (设计师)）",
    "/",
    "_",
    "\x85",
    "\u2028",
]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=16))
def test_normalize_position_equals_the_plain_loop(pieces: list[str]) -> None:
    position = "".join(pieces)
    assert layout.normalize_position(position) == reference_position(position)


def test_normalize_position_on_the_benchmark_corpus() -> None:
    positions = [n.condition_space.get("observation_position", "") for n in corpus(1000) if n.condition_space]
    assert len(positions) > 900
    assert [layout.normalize_position(p) for p in positions] == [reference_position(p) for p in positions]
