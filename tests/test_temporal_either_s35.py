"""A family's CJK and Latin markers are searched as two patterns (session 35): the answer is
the one pattern ``cjk|latin``'s, place by place, and a long body is decided in a few seconds.

Joined behind the Latin group's lookbehind, every CJK branch was tried at every character of
the text: deciding a 4 MiB body took 9-11 s (0.2-2.8 s a veto family, 0.9 s to find the term
markers' first literals), paid by every write of it and twice by an organize of it. The
regex engine skips to the places a CJK literal begins once those branches stand alone.
"""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from md_cg import organize, temporal
from md_cg.temporal import _Either, shipped_markers

MARKERS = shipped_markers()


def _joined(markers: tuple[str, ...], *, clause: bool) -> re.Pattern[str]:
    """The one pattern of a family as it was compiled before session 35."""
    ordered = sorted(markers, key=len, reverse=True)
    cjk = [temporal._marker_pattern(m, clause=clause) for m in ordered if temporal._CJK_RE.search(m)]
    latin = [temporal._marker_pattern(m) for m in ordered if not temporal._CJK_RE.search(m)]
    word = temporal._LATIN_WORDCHAR
    alternatives = [*cjk]
    if latin:
        alternatives.append(f"(?<!{word})(?:{'|'.join(latin)})(?!{word})")
    return re.compile("|".join(alternatives))


def _families() -> list[tuple[str, str, tuple[str, ...], bool]]:
    out = []
    kinds = (("veto", MARKERS.veto), ("term", MARKERS.term), ("veto_except", MARKERS.veto_except))
    for kind, groups in kinds:
        for name, markers in groups.items():
            if markers:
                out.append((kind, name, markers, kind == "veto" and name in temporal._CLAUSE_FAMILIES))
    return out


def _texts(markers: tuple[str, ...], seed: int, n: int) -> list[str]:
    """Texts of marker pieces, Latin and CJK filler, digits, underscores and punctuation, glued
    with and without spaces (a marker inside a word, after a CJK character, at the ends)."""
    rng = random.Random(seed)
    pieces = [p.strip() for m in markers for p in m.split(temporal.GAP)]
    filler = ["a", "the", "x_", "_", "9", "明天", "我们", "，", "。", ". ", "; ", "\n", "s", "ing", "主人"]
    out = []
    for _ in range(n):
        parts = [rng.choice(pieces if rng.random() < 0.5 else filler) for _ in range(rng.randint(1, 12))]
        out.append("".join(p + rng.choice(["", " ", "", ","]) for p in parts))
    return out


@pytest.mark.parametrize(
    ("kind", "name", "markers", "clause"), _families(), ids=[f"{f[0]}-{f[1]}" for f in _families()]
)
def test_each_family_finds_what_its_one_pattern_found_at_every_place(
    kind: str, name: str, markers: tuple[str, ...], clause: bool
) -> None:
    ours = temporal._compile_one(markers, clause=clause)
    joined = _joined(markers, clause=clause)
    assert ours is not None
    texts = _texts(markers, sum(map(ord, name)), 60)
    found = 0
    for text in texts:
        for pos in range(0, len(text) + 1, 4):
            want, got = joined.search(text, pos), ours.search(text, pos)
            assert (want and (want.span(), want.group())) == (got and (got.span(), got.group())), (text, pos)
            found += want is not None
            want, got = joined.match(text, pos), ours.match(text, pos)
            assert (want and want.span()) == (got and got.span()), (text, pos)
        assert [m.span() for m in joined.finditer(text)] == [m.span() for m in ours.finditer(text)], text
    assert found > 20  # the texts do hold the markers


def test_families_with_both_scripts_are_searched_apart_and_the_others_as_one_pattern() -> None:
    for kind, name, markers, clause in _families():
        compiled = temporal._compile_one(markers, clause=clause)
        both = any(temporal._CJK_RE.search(m) for m in markers) and not all(
            temporal._CJK_RE.search(m) for m in markers
        )
        assert isinstance(compiled, _Either) is both, (kind, name)
    assert isinstance(temporal._compile_one(("明天", "tomorrow")), _Either)


def test_term_starts_lists_every_place_a_first_literal_begins_overlapping_ones_too() -> None:
    first, longest = temporal._heads({"r": ("ab", "b ... c", "bab", "今天", "天起")})
    assert longest == 3
    folded = "abab 今天起 bab"
    every = re.compile(f"(?=(?:{first.pattern}))")
    want = [m.start() for m in every.finditer(folded)]
    markers = temporal.Markers(veto={}, term={"n1_relative_day": ("ab", "b ... c", "bab", "今天", "天起")})
    assert markers._term_starts(folded, 100) == want == [0, 1, 2, 3, 5, 6, 9, 10, 11]
    assert markers._term_starts(folded, 1) == [0]  # a marker must begin in the window's first unit
    assert markers._term_starts(folded, 2) == [s for s in want if s <= 5] == [0, 1, 2, 3, 5]


def test_letters_keep_exactly_what_isalnum_keeps() -> None:
    text = "".join(chr(c) for c in range(0, 0x3100) if not 0xD800 <= c <= 0xDFFF) + "_x_9٣²"
    # in NFC (session 42: a combining mark is no letter, so NFD text lost its accents)
    assert organize._letters(text) == "".join(ch for ch in unicodedata.normalize("NFC", text) if ch.isalnum())


def test_searches_in_any_order_answer_as_fresh_searches() -> None:
    """Each pattern's last search is reused only while it answers the new one: another
    text, another end, an earlier place or a match now behind the place search again."""
    fam = temporal._compile_one(("明天", "今天...去", "tomorrow", "remind* ... today"))
    joined = _joined(("明天", "今天...去", "tomorrow", "remind* ... today"), clause=False)
    assert isinstance(fam, _Either)
    texts = ["tomorrow 明天 reminders today 今天要去", "x" * 50 + "明天", "remind me today, tomorrow"]
    rng = random.Random(7)
    for _ in range(2000):
        text = rng.choice(texts)
        text = text if rng.random() < 0.5 else "".join(text)  # sometimes an equal, other object
        pos, end = rng.randint(0, len(text)), rng.choice([len(text), rng.randint(0, len(text))])
        want, got = joined.search(text, pos, end), fam.search(text, pos, end)
        assert (want and (want.span(), want.group())) == (got and (got.span(), got.group())), (text, pos, end)


class _Counting:
    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, 0

    def search(self, *args: int | str) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.search(*args)  # type: ignore[arg-type]

    def match(self, *args: int | str) -> re.Match[str] | None:
        return self.pattern.match(*args)  # type: ignore[arg-type]


def test_a_body_of_rejected_frames_is_read_once_per_pattern() -> None:
    """Attack a2: each ``reported`` frame followed by a moment is rejected and the family
    searched again from its end; the CJK pattern, which matches nothing in an English body,
    read the rest of the body at each search (256 KiB: 34 s, against 1.1 s before the
    split), and so did the anchors' search of the rest of the body for each frame."""
    markers = shipped_markers()
    text = temporal._fold("tomorrow " + "the user said tomorrow. " * 300 + " ok")
    reported = dict(markers._patterns("veto"))["reported"]
    anchors = markers._patterns("anchor")[0][1]
    assert isinstance(reported, _Either) and isinstance(anchors, _Either)
    counts = [_Counting(reported.cjk), _Counting(anchors.cjk)]
    reported.cjk, anchors.cjk = counts  # type: ignore[assignment]
    try:
        hit = markers.veto_hit(text, folded=True)
    finally:
        reported.cjk, anchors.cjk = counts[0].pattern, counts[1].pattern
    assert hit is None or hit.family != "reported"
    assert [c.calls for c in counts] == [1, 1]
