"""A snippet's window never starts inside a decomposed Hangul syllable (session 37's second
MCP review: a body of conjoining jamo gave a snippet starting ``…ᅡᆨ각``, a vowel and a
final jamo cut from their syllable; they are letters, category ``Lo``, not marks)."""

from __future__ import annotations

import unicodedata

from md_cg.render import SNIPPET_CHARS, snippet

LEADING = range(0x1100, 0x1160)  # choseong: a syllable starts here


def test_a_window_in_decomposed_hangul_starts_on_a_syllable() -> None:
    syllables = "각낙닥락막박삭악작착"
    line = unicodedata.normalize("NFD", syllables * 12) + "목표어" + unicodedata.normalize("NFD", "끝" * 5)
    for shift in range(3):  # the match at three offsets against the syllables' jamo
        body = "제목\n" + "가" * shift + line
        got = snippet(body, ["목표어"])
        assert got.startswith("…") and "목표어" in got and len(got) <= SNIPPET_CHARS
        assert ord(got[1]) in LEADING, (shift, got[:4])
