"""Retention decision: is a memory temporary (it expires) or long-lived?

One pure function, :func:`decide_retention`, turns a node's text, its
``temporal`` kind (what an extractor said), an optional tier the caller asked
for, the time and the store's TTL into a :class:`RetentionDecision`. Every
write path is meant to call it, so the rule that decided is always the same
and always named (``rule``), apart from the human explanation (``reason``).

The asymmetry behind every rule: deleting a memory that should have stayed
cannot be undone, keeping one too long costs a little space. So every doubt
resolves to ``long``:

* ``temporal`` is a closed set (:data:`TEMPORAL_KINDS`, or ``""`` = unset).
  :func:`normalize_temporal` only trims and case-folds; anything else is
  ``unknown``, never a guessed ``one_off``.
* ``one_off`` is the only kind that makes a node temporary, and a *veto*
  keeps it long when the text itself says it is not a one-off event over
  within the TTL: ten marker families (remember, agreement, habit,
  durable fact, permanence, state change, far future, learned, reported:
  "the user said ..." with no moment named after it, lasting event: a death,
  birth, marriage, diagnosis, surgery, job lost or begun, move, breakup...,
  which a time word in front only dates -- session 41: "Yesterday my father
  passed away." was temporary). A one-off verdict on
  an extractor's rewritten sentence such as "两人约好明天一起晒太阳" would
  otherwise delete the agreement itself. A change of habit that starts at a
  named time is a state change, not a one-off ("今天开始主人不吃猪肉了", "The
  user stopped eating pork today"): temporary, it was swept after the TTL and
  an older memory it contradicts was served alone. A marker does not count inside a
  word its family excepts (``veto_except``: 今日起 in 今日起床, 天开始...都 in
  今天开始的会议), a state change's gap stops at a comma, and a permanence
  whose sentence ends the same day ("back at 6am", "for the day") does not count.
* An extractor's ``one_off`` must also be *anchored*: the text names a
  moment (today, 下午, lunch, a clock time or a date...). Without one the
  node stays long (``veto_no_anchor``). Word lists cannot name every durable
  fact; on 30 statements written after the lists were tuned, the six-family
  veto let 18 of 19 durable facts mislabelled ``one_off`` through ("The user
  is left-handed"), the anchor check 1.
* ``unknown`` and unset fall back to term rules (``term_n1`` ... ``term_n5``)
  that only fire on a one-off time marker near the start of the text, under
  the same veto; a number alone never fires one.
* Numbers and frequencies are deliberately not vetoes: "set an alarm for
  7" is the typical one-off.

The marker lists live in ``md_cg/data/retention_markers.json`` and a store
may add to them (``<root>/.mdcg/retention_markers.json``, same format, see
:func:`load_markers`). A store file that cannot be used does not break
writes: the returned :class:`Markers` carry the problem, and while they do no
automatic decision makes anything temporary (rule ``markers_unreadable``).

Imports only the standard library, numpy, orjson and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import orjson

from . import fsops
from .errors import InvalidArgumentError, MarkerFileError, UnsafePathError
from .node import RETENTION_TIERS, finite, normalize_temporal
from .script import CJK_CHARS, is_nfkc, nfkc, short_repr

#: The closed set of temporal kinds; ``""`` (unset) is the fifth legal value.
# The closed sets live with the node model (a node's fields obey them).
#: The unset kind: never asked (history, non-extractor writes), unlike ``unknown``.
UNSET = ""
#: Retention tiers.
TIERS: tuple[str, ...] = RETENTION_TIERS
#: Default life of a temporary node: 7 days.
DEFAULT_TTL_SECONDS = 7 * 86400.0
#: The longest TTL: 100 years (36,500 days). Now + TTL must stay an instant a file can
#: write as an ISO 8601 date (years 1-9999); a longer one is refused, never stored as
#: a bare number. A memory meant to last is long, not temporary.
MAX_TTL_SECONDS = 36_500 * 86400.0
#: How the bound reads in a message.
MAX_TTL_TEXT = "3153600000 (100 years)"
#: A term rule fires only when its marker begins among the first this many
#: units (a CJK character or a Latin word) of the text. The seed measured
#: that widening its 12-character window to 24 made 11 restatements of one
#: standing agreement temporary; the window is what keeps trailing asides
#: ("... and today she mentioned it again") from deciding.
TERM_WINDOW = 12
#: Veto families, in the order they are checked (the first hit names the rule).
VETO_FAMILIES: tuple[str, ...] = (
    "remember",
    "agreement",
    "habit",
    "durable_fact",
    "permanence",
    "state_change",
    "far_future",
    "learned",
    "reported",
    "lasting_event",
)
#: Term rules for unknown/unset kinds, in precedence order.
TERM_RULES: tuple[str, ...] = (
    "n1_relative_day",
    "n2_just_now",
    "n3_this_once",
    "n4_reminder_request",
    "n5_near_date",
)
#: File name of a store's marker file inside ``<root>/.mdcg/``.
STORE_FILE = "retention_markers.json"
#: The largest store marker file read (a larger one is reported, not read).
MAX_STORE_FILE_BYTES = 4 << 20
#: The only marker file format version.
FORMAT_VERSION = 1

#: Every rule code a decision can carry, in decision order.
RULE_CODES: tuple[str, ...] = (
    "explicit_tier",
    "temporal_durable",
    "temporal_recurring",
    "markers_unreadable",
    *(f"veto_{family}" for family in VETO_FAMILIES),
    "veto_no_anchor",
    "temporal_one_off",
    *(f"term_guard_{family}" for family in VETO_FAMILIES),
    *(f"term_{rule}" for rule in TERM_RULES),
    "anchor_layer",
    "edit_kept_long",
    "default_long",
)

_FAMILY_LABELS = {
    "remember": "an explicit remember / don't-forget",
    "agreement": "an agreement or promise",
    "habit": "a habit",
    "durable_fact": "a durable fact",
    "permanence": "a permanence",
    "state_change": "a state change",
    "far_future": "a time after next week, later than the TTL",
    "learned": "something learned, found out or corrected (it holds after the day it was learned)",
    "reported": "what the user said about something, with no moment named after it (it holds after the day"
    " it was said)",
    "lasting_event": "an event after which a lasting state holds (a death, birth, marriage, diagnosis,"
    " surgery, job lost or begun, move, breakup...: a time word only dates it)",
}
_SHIPPED_PATH = Path(__file__).parent / "data" / STORE_FILE

_CJK = CJK_CHARS
_CJK_RE = re.compile(f"[{_CJK}]")
_LATIN_WORDCHAR = f"[^\\W_{_CJK}]"
_UNIT_RE = re.compile(f"[{_CJK}]|{_LATIN_WORDCHAR}+")


def _wordlist(words: str) -> frozenset[str]:
    """The words of ``words`` (separated by whitespace)."""
    return frozenset(words.split())


#: Words that may follow a verb that takes no object ("my grandfather passed last night",
#: "passed peacefully", "passed in his sleep"): a Latin marker part ending in ``.``
#: (``grand*...passed.``) matches only before a clause's end (. , ; : ! ? a closing
#: bracket, the text's end), one of these words or an -ly word, never before an object
#: ("my dad passed the exam"). Session 43: "Last night my grandfather passed." was temp.
_INTRANSITIVE_FOLLOWERS = _wordlist(
    "yesterday today tonight last this early earlier overnight at in after surrounded from of"
)
_CLAUSE_END_AHEAD = (
    f"(?=\\s*(?:[.!?;,:)。！？；]|$)|\\s+(?:{'|'.join(sorted(_INTRANSITIVE_FOLLOWERS))}|{_LATIN_WORDCHAR}+ly)"
    f"(?!{_LATIN_WORDCHAR}))"
)
#: Words after a marker's closing noun that do not make it the first noun of a compound
#: (:func:`_compound_head`): function words, time and place words, days and months.
_NOT_HEADS = _wordlist(
    """a an the this that these those my your his her its our their and or but nor so yet for
    of in on at to from by with without into onto over under near about after before during
    since until while as than like per via i you he she it we they me him us them who whom
    whose which what where when why how is are was were be been being am has have had do does
    did will would can could shall should may might must not no never yesterday today tonight
    tomorrow last next morning afternoon evening night week weekend month year ago now then
    soon already finally again still just too also even only back home there here together
    outright cash online abroad overseas downtown upstate nearby instead anyway though
    although because if new used second secondhand first enough monday tuesday wednesday
    thursday friday saturday sunday january february march april june july august september
    october november december"""
)
_NEXT_WORD_RE = re.compile(f"(?:'s)? ({_LATIN_WORDCHAR}+)")
# A clock time or a day of the month anchors a one_off verdict (it never
# decides temp on its own): 7pm, 6:30, 7 o'clock, 3点, 八点半, the 14th, 14号.
_CLOCK_RE = re.compile(
    r"\d{1,2}(?::\d{2}|\s*(?:am|pm|a\.m\.|p\.m\.|o'clock|点|时|時)|(?:st|nd|rd|th)\b|\s*[号日])"
    r"|[零〇一二两三四五六七八九十]{1,3}点"
)
# A permanence ("as of tonight", "effective today") does not count when the rest of its
# sentence says the state ends the same day: "As of tonight the server is down, back at
# 6am", "As of tomorrow the office is closed for the day". An "until 5pm" does not: "As
# of today the gym is open until 10pm" is the new opening time.
_SAME_DAY_END_RE = re.compile(
    r"(?<![^\W_])(?:back (?:at|by|online at|up at) (?:\d{1,2}(?::\d{2})? ?(?:am|pm|a\.m\.|p\.m\.)"
    r"|\d{1,2}:\d{2}|noon|midnight)|for the day)(?![^\W_])"
)
_SENTENCE_END_RE = re.compile("[.!?;。！？；\n]")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
#: Gap in a marker: ``set...alarm`` matches "set a 7 o'clock alarm" and
#: ``定...闹钟`` matches "定个7点的闹钟" (up to 16 characters, no sentence end).
GAP = "..."
_GAP_PATTERN = "[^.!?;。！？；\n]{0,16}?"
#: In the state-change family a gap in a CJK marker does not cross a clause either (，、
#: and a comma): a change is said in one clause, so "天开始...不" names one in
#: "今天开始主人不吃猪肉了", not in "明天开始考试，不要打扰主人".
_CLAUSE_GAP_PATTERN = "[^.!?;,、。！？；，\n]{0,16}?"
#: The families whose CJK gaps stop at a clause boundary.
_CLAUSE_FAMILIES = frozenset({"state_change"})


def _fold(text: str) -> str:
    """NFKC, case fold, curly apostrophes made straight, whitespace collapsed."""
    if text.isascii():
        # NFKC leaves ASCII alone and case folds it like lower(); no curly quote is ASCII.
        return " ".join(text.lower().split())
    folded = _nfkc(text).casefold()  # what fold(text, collapse=False) gives a non-ASCII text
    if "\u2019" in folded or "\u2018" in folded or "\u02bc" in folded:
        folded = folded.translate(_QUOTES)
    # str.split() and re's \s both use the Unicode whitespace predicate.
    return " ".join(folded.split())


#: Full-width ASCII forms (U+FF01..U+FF5E): NFKC maps each to the ASCII character 0xFEE0 below it.
_WIDE_FIRST, _WIDE_LAST, _WIDE_SHIFT = np.uint32(0xFF01), np.uint32(0xFF5E), np.uint32(0xFEE0)
#: Shorter texts are normalised directly (the array round trip costs more).
_WIDE_MIN = 64


def _nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, faster for CJK text with full-width punctuation.

    Replacing a character by its compatibility decomposition does not change
    a text's NFKC, so with the full-width forms made ASCII, a text that is
    then in NFKC (checked, exactly) is the result. NFKC of Chinese text was
    most of a retention decision: the full-width ，：（） make it take the
    slow path of ``normalize`` throughout.
    """
    if len(text) < _WIDE_MIN or is_nfkc(text):
        return nfkc(text)
    try:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    except UnicodeEncodeError:  # a lone surrogate
        return nfkc(text)
    wide = (codes - _WIDE_FIRST) <= _WIDE_LAST - _WIDE_FIRST
    if wide.any():
        narrowed = (codes - wide.astype(np.uint32) * _WIDE_SHIFT).tobytes().decode("utf-32-le")
        if is_nfkc(narrowed):
            return narrowed
    return nfkc(text)


def normalize_tier(value: object) -> str:
    """An explicitly requested tier: ``"temp"``, ``"long"`` or ``""`` (none given).

    ``None`` and ``""`` mean no tier was given. A tier is an instruction, so
    anything outside :data:`TIERS` (after trimming and case folding) raises
    :class:`InvalidArgumentError` naming it instead of being guessed.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        tier = value.strip().casefold()
        if tier == "" or tier in TIERS:
            return tier
    raise InvalidArgumentError(
        f"retention tier must be one of {', '.join(TIERS)} (or absent), got {short_repr(value)}",
        name="tier",
        value=value,
    )


@dataclass(frozen=True)
class Hit:
    """A marker found in a text: its ``family`` (or term rule), the folded
    ``marker`` as it occurs in the text, and the ``unit`` it starts at."""

    family: str
    marker: str
    unit: int


@dataclass(frozen=True)
class RetentionDecision:
    """The outcome of :func:`decide_retention`.

    ``tier`` is ``"temp"`` or ``"long"``; ``expires_at`` (seconds since the
    epoch) is set exactly when the tier is temp. ``rule`` is one of
    :data:`RULE_CODES` (who decided, for the decision log); ``reason`` is the
    human explanation; ``temporal`` the normalised kind; ``marker`` the text
    that triggered the rule, when one did.
    """

    tier: str
    expires_at: float | None
    rule: str
    reason: str
    temporal: str
    marker: str | None = None


def _part_pattern(part: str, *, left: bool = True, right: bool = True) -> str:
    """One part of a marker: CJK as is; Latin with the word boundaries asked for. A Latin
    part ending in ``.`` (``passed.``) ends its clause (:data:`_CLAUSE_END_AHEAD`)."""
    if _CJK_RE.search(part):
        return re.escape(part)
    if len(part) > 1 and part.endswith("."):
        return _part_pattern(part[:-1], left=left, right=True) + _CLAUSE_END_AHEAD
    body = re.escape(part[:-1]) + f"{_LATIN_WORDCHAR}*" if part.endswith("*") else re.escape(part)
    before = f"(?<!{_LATIN_WORDCHAR})" if left else ""
    after = f"(?!{_LATIN_WORDCHAR})" if right else ""
    return f"{before}{body}{after}"


def _marker_pattern(marker: str, *, clause: bool = False) -> str:
    """A marker's pattern; ``...`` gaps between parts (with ``clause``, a CJK
    marker's gaps stop at a comma too). A Latin marker leaves its outer word
    boundaries to its family's group (:func:`_compile`)."""
    parts = [part.strip() for part in marker.split(GAP)]
    if _CJK_RE.search(marker):
        gap = _CLAUSE_GAP_PATTERN if clause else _GAP_PATTERN
        return gap.join(_part_pattern(part) for part in parts)
    last = len(parts) - 1
    return _GAP_PATTERN.join(
        _part_pattern(part, left=index > 0, right=index < last) for index, part in enumerate(parts)
    )


def _compile_one(markers: tuple[str, ...], *, clause: bool = False) -> _Matcher | None:
    """One family's pattern: its CJK markers anywhere, its Latin markers as
    whole words (None when it has no marker). The word boundary is checked
    once per position for all the Latin markers (checking it per marker made
    a search five times slower). ``clause``: see :data:`_CLAUSE_FAMILIES`."""
    ordered = sorted(markers, key=len, reverse=True)  # longest marker wins at one spot
    cjk = [_marker_pattern(m, clause=clause) for m in ordered if _CJK_RE.search(m)]
    latin = [_marker_pattern(m) for m in ordered if not _CJK_RE.search(m)]
    words = f"(?<!{_LATIN_WORDCHAR})(?:{'|'.join(latin)})(?!{_LATIN_WORDCHAR})" if latin else None
    if not cjk:
        return re.compile(words) if words else None
    either = re.compile("|".join(cjk))
    if not words:
        return either
    # the characters a Latin marker's match can begin with (None: one may begin with any)
    heads = _openings(tuple(m for m in ordered if not _CJK_RE.search(m)))
    opens = re.compile(f"[{''.join(map(re.escape, {h[0] for h in heads}))}]") if all(heads) else None
    return _Either(either, re.compile(words), opens)


class _Either:
    """A family's CJK markers and its Latin ones as two patterns, searched as the one
    pattern ``cjk|latin`` would be: the leftmost match, the CJK one where both begin at
    one place (the alternation tries its CJK branches first). Apart, the CJK branches
    all open with a literal, which lets the regex engine skip to the places one begins;
    joined behind the Latin group's lookbehind, every branch was tried at every
    character: a 4 MiB body took 9 s to decide (0.2-2.8 s a veto family) -- twice in
    an organize of it, and once in each write of it. ``opens``: the characters a Latin
    match can begin with; where none is before the CJK match, no Latin search is made
    (a Chinese text would be read to its end for a Latin marker that cannot win)."""

    __slots__ = ("_last", "cjk", "latin", "opens", "pattern")

    def __init__(self, cjk: re.Pattern[str], latin: re.Pattern[str], opens: re.Pattern[str] | None) -> None:
        self.cjk, self.latin, self.opens = cjk, latin, opens
        self.pattern = f"{cjk.pattern}|{latin.pattern}"
        #: the last search of each pattern: (text, endpos, from, match), one tuple (assigned whole)
        self._last: tuple[Any, ...] = ((None, 0, 0, None), (None, 0, 0, None))

    def _find(self, which: int, text: str, pos: int, endpos: int) -> re.Match[str] | None:
        """``pattern.search(text, pos, endpos)`` of the CJK (0) or Latin (1) pattern,
        answered from the last search of it when that one covers it: the leftmost match
        from an earlier place is the leftmost from ``pos`` too while it begins at or after
        ``pos`` (a match at a place does not depend on where the search began). A veto
        family searches again after each match it rejects (a ``reported`` frame followed by
        a moment); each search of the pattern that found nothing read the body to its end
        again: 256 KiB of such frames took 34 s (attack a2), 1.1 s before the split."""
        last = self._last
        seen, end, start, found = last[which]
        if seen is text and end == endpos and start <= pos and (found is None or found.start() >= pos):
            return found
        found = (self.cjk if which == 0 else self.latin).search(text, pos, endpos)
        mine = (text, endpos, pos, found)
        self._last = (mine, last[1]) if which == 0 else (last[0], mine)
        return found

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        first = self._find(0, text, pos, endpos)
        if first is not None and self.opens is not None and not self.opens.search(text, pos, first.start()):
            return first
        other = self._find(1, text, pos, endpos)
        if other is not None and (first is None or other.start() < first.start()):
            return other
        return first

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        return self.cjk.match(text, pos) or self.latin.match(text, pos)

    def finditer(self, text: str, pos: int = 0) -> Iterator[re.Match[str]]:
        found = self.search(text, pos)
        while found is not None:
            yield found
            found = self.search(text, max(found.end(), found.start() + 1))


#: a family's compiled markers: one pattern, or its CJK and Latin markers apart
_Matcher = re.Pattern[str] | _Either


@dataclass(frozen=True)
class Markers:
    """Veto families, term-rule markers and anchors, folded, with their compiled matchers.

    Build one with :func:`load_markers` (shipped lists plus a store file),
    :func:`shipped_markers` or :meth:`extended`; constructing it directly
    skips validation (names outside :data:`VETO_FAMILIES` and
    :data:`TERM_RULES` are dropped). ``problem`` is set when a store file
    could not be used; see :func:`decide_retention` for what that changes.
    """

    veto: Mapping[str, tuple[str, ...]]
    term: Mapping[str, tuple[str, ...]]
    anchor: tuple[str, ...] = ()
    problem: str | None = None
    #: family -> words inside which that family's markers do not count (:meth:`veto_hit`)
    veto_except: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: term rule -> words inside which that rule's markers do not count (:meth:`term_hit`)
    term_except: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    _term_heads: tuple[re.Pattern[str], int] | None = field(init=False, repr=False, compare=False)
    #: the anchors matched by :meth:`anchor_hit`: the anchor words and every term marker
    _anchors: tuple[str, ...] = field(init=False, repr=False, compare=False)
    #: kind ("veto", "term", "anchor") -> its compiled patterns, filled on first use (:meth:`_patterns`)
    _compiled: dict[str, list[tuple[str, _Matcher]]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    #: (kind, family) -> the openings of its markers (:meth:`_excepted`), and ("tails", family) ->
    #: its closing nouns (:func:`_noun_tails`), filled on first use
    _heads_of: dict[tuple[str, str], frozenset[str]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        def folded(markers: Sequence[str]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(_fold(m) for m in markers))

        veto = {f: folded(self.veto.get(f, ())) for f in VETO_FAMILIES}
        term = {r: folded(self.term.get(r, ())) for r in TERM_RULES}
        object.__setattr__(self, "veto", MappingProxyType(veto))
        object.__setattr__(self, "term", MappingProxyType(term))
        object.__setattr__(self, "anchor", folded(self.anchor))
        excepted = {f: folded(self.veto_except.get(f, ())) for f in VETO_FAMILIES}
        object.__setattr__(self, "veto_except", MappingProxyType({f: w for f, w in excepted.items() if w}))
        term_excepted = {r: folded(self.term_except.get(r, ())) for r in TERM_RULES}
        object.__setattr__(
            self, "term_except", MappingProxyType({r: w for r, w in term_excepted.items() if w})
        )
        object.__setattr__(self, "_term_heads", _heads(term))
        # Every term marker names a moment too, so it anchors as well.
        anchors = tuple(dict.fromkeys((*self.anchor, *(m for ms in term.values() for m in ms))))
        object.__setattr__(self, "_anchors", anchors)

    def _patterns(self, kind: str) -> list[tuple[str, _Matcher]]:
        """(name, pattern) of every veto family or term rule with a marker, in
        :data:`VETO_FAMILIES` / :data:`TERM_RULES` order, or of the anchors
        (``"anchor"``), compiled at the first use of that kind. Compiling them
        all took ~80-140 ms (their word-boundary classes), which every process
        paid at its first stamped write, while most texts open with no term
        marker and need none of them."""
        out = self._compiled.get(kind)
        if out is None:
            groups: Mapping[str, tuple[str, ...]]
            if kind == "anchor":
                groups = {"anchor": self._anchors}
            else:
                groups = {
                    "veto": self.veto,
                    "term": self.term,
                    "veto_except": self.veto_except,
                    "term_except": self.term_except,
                }[kind]
            compiled = [
                (name, _compile_one(markers, clause=kind == "veto" and name in _CLAUSE_FAMILIES))
                for name, markers in groups.items()
            ]
            out = self._compiled[kind] = [(name, p) for name, p in compiled if p is not None]
        return out

    @property
    def _term_re(self) -> dict[str, _Matcher]:
        """Every term rule's pattern, in :data:`TERM_RULES` order."""
        return dict(self._patterns("term"))

    def extended(
        self,
        veto: Mapping[str, Sequence[str]] | None = None,
        term: Mapping[str, Sequence[str]] | None = None,
        anchor: Sequence[str] = (),
        veto_except: Mapping[str, Sequence[str]] | None = None,
        term_except: Mapping[str, Sequence[str]] | None = None,
    ) -> Markers:
        """New markers with these lists appended (duplicates dropped); raises
        :class:`MarkerFileError` (path ``<arguments>``) on an invalid marker."""
        data = {
            "veto": dict(veto or {}),
            "term": dict(term or {}),
            "anchor": list(anchor),
            "veto_except": dict(veto_except or {}),
            "term_except": dict(term_except or {}),
        }
        added = parse_markers(data, "<arguments>", complete=False)
        return _merge(self, added, self.problem)

    def with_problem(self, problem: str) -> Markers:
        """The same markers, flagged as incomplete because of ``problem``."""
        return Markers(self.veto, self.term, self.anchor, problem, self.veto_except, self.term_except)

    def anchor_hit(self, text: str, *, folded: bool = False) -> str | None:
        """The first anchor in ``text`` (an anchor word, a term marker, a
        clock time or a day of the month), or ``None``. ``folded=True``:
        ``text`` is already folded."""
        folded_text = text if folded else _fold(text)
        anchors = self._patterns("anchor")
        match = anchors[0][1].search(folded_text) if anchors else None
        match = match or _CLOCK_RE.search(folded_text)
        return match.group() if match else None

    def _moment_after(self, folded: str, start: int) -> bool:
        """Whether ``folded[start:]`` names a moment (:meth:`anchor_hit` of it is not None).
        Only a match at its first character is tried on the copy (a lookbehind there sees
        nothing before it); one further on is the same match in ``folded`` (its lookbehind
        sees the copy's own characters), so each pattern's search of the body is the one
        it made for the last frame while that match lies ahead: a search of each copy read
        the rest of the body once per frame (256 KiB of "the user said tomorrow." frames:
        8.4 s, attack a2)."""
        rest = folded[start:]
        anchors = self._patterns("anchor")
        for pattern in (anchors[0][1], _CLOCK_RE) if anchors else (_CLOCK_RE,):
            if pattern.match(rest) or pattern.search(folded, start + 1):
                return True
        return False

    def veto_hit(self, text: str, *, folded: bool = False, original: str | None = None) -> Hit | None:
        """The first veto family (in :data:`VETO_FAMILIES` order) found
        anywhere in ``text``. A ``reported`` frame ("the user said", 主人说) counts only
        when the words after it name no moment: "主人说晚上想吃面条" reports a one-off.
        A marker does not count where a word its family lists in :attr:`veto_except`
        overlaps its opening words (起床 in 今日起床晚了 for 今日起, 开始的 in
        今天开始的会议主人都迟到了 for 天开始...都); the search goes on from the next character.
        Nor where the noun it closes with only modifies the next word (:func:`_compound_head`:
        "bought a car charger"); ``original``: the text before folding (with ``folded``),
        which tells a name ("our dog Max") from such a head."""
        folded_text = text if folded else _fold(text)
        if not folded:
            original = text
        for family, pattern in self._patterns("veto"):
            tails = self._heads_of.get(("tails", family))
            if tails is None:
                tails = self._heads_of[("tails", family)] = _noun_tails(self.veto[family])
            match = pattern.search(folded_text)
            while match is not None:
                if (family in self.veto_except and self._excepted("veto", family, match, folded_text)) or (
                    tails
                    and match.group().rpartition(" ")[2] in tails
                    and _compound_head(folded_text, match.end(), original)
                ):
                    match = pattern.search(folded_text, match.start() + 1)
                    continue
                if family == "reported" and self._moment_after(folded_text, match.end()):
                    match = pattern.search(folded_text, match.end())
                    continue
                if family == "permanence" and _ends_the_same_day(folded_text, match.end()):
                    match = pattern.search(folded_text, match.end())
                    continue
                return Hit(family, match.group(), _units_before(folded_text, match.start()))
        return None

    def _excepted(self, kind: str, family: str, match: re.Match[str], folded: str) -> bool:
        """Whether an exception word (``veto_except`` of a veto family, ``term_except`` of
        a term rule: ``kind``) overlaps the opening words of ``match`` (its marker's part
        before the first gap). The exception words are compiled at the first hit."""
        words = self.veto_except if kind == "veto" else self.term_except
        markers = self.veto if kind == "veto" else self.term
        exceptions = dict(self._patterns(f"{kind}_except"))[family]
        found = match.group()
        heads = self._heads_of.get((kind, family))
        if heads is None:
            heads = self._heads_of[(kind, family)] = frozenset(_openings(markers[family]))
        # the longest opening the match begins with: its longest prefix that is one (a look-up
        # per prefix; a startswith per marker was a third of a decision once a family had 250)
        opening = next((n for n in range(len(found), 0, -1) if found[:n] in heads), len(found))
        start = match.start()
        for word in exceptions.finditer(folded, max(0, start - max(map(len, words[family])) + 1)):
            if word.start() >= start + opening:
                return False
            if word.end() > start:
                return True
        return False

    def term_hit(self, text: str, window: int = TERM_WINDOW, *, folded: bool = False) -> Hit | None:
        """The first term rule (in :data:`TERM_RULES` order) whose earliest
        marker begins within the first ``window`` units of ``text``."""
        folded_text = text if folded else _fold(text)
        starts = self._term_starts(folded_text, window)
        if not starts:
            return None
        # A rule's earliest match begins with one of its markers' first literals,
        # so trying the rule at those places within the window finds the match a
        # search would, without scanning the rest of the text once per rule.
        for rule, pattern in self._patterns("term"):
            for start in starts:
                match = pattern.match(folded_text, start)
                if match and not self._term_excepted(rule, match, folded_text):
                    return Hit(rule, match.group(), _units_before(folded_text, start))
        return None

    def _term_excepted(self, rule: str, match: re.Match[str], folded: str) -> bool:
        """Whether a term marker is part of a longer word or a title, not a moment: inside
        a word its rule excepts (``term_except``: 本周 in 日本周刊, 明天 in 小明天生, 今天 in
        位于今天津市), or inside a 《》/〈〉 title (《今日美国》, USA Today)."""
        if rule in self.term_except and self._excepted("term", rule, match, folded):
            return True
        return _in_title(folded, match.start())

    def _term_starts(self, folded: str, window: int) -> list[int]:
        """Where a term marker's first literal begins within the first ``window`` units."""
        if window <= 0 or self._term_heads is None:
            return []
        first, longest = self._term_heads
        last = next(islice(_UNIT_RE.finditer(folded), window - 1, None), None)
        # A marker counts when it starts at or before the window's last unit.
        limit = last.start() + 1 if last is not None else len(folded) + 1
        end = limit - 1 + longest
        starts: list[int] = []
        found = first.search(folded, 0, end)
        # One search a place, each from the place after the last (overlapping ones
        # too): a search of the literals skips to where one begins, where a scan of
        # a lookahead tried them all at every character (0.9 s for a 4 MiB body).
        while found is not None and found.start() < limit:
            starts.append(found.start())
            found = first.search(folded, found.start() + 1, end)
        return starts


def _heads(groups: Mapping[str, tuple[str, ...]]) -> tuple[re.Pattern[str], int] | None:
    """The pattern of the literals the markers' matches begin with, and the longest
    literal's length."""
    literals = set()
    for markers in groups.values():
        for marker in markers:
            part = marker.split(GAP)[0].strip()
            # As _part_pattern: a CJK part is literal as is, a Latin one up to its '*' or '.'.
            cjk = _CJK_RE.search(part) is not None
            literals.add(part[:-1] if part.endswith(("*", ".")) and len(part) > 1 and not cjk else part)
    if not literals:
        return None
    ordered = sorted(literals, key=len, reverse=True)
    alternatives = "|".join(re.escape(lit) for lit in ordered)
    return re.compile(alternatives), len(ordered[0])


#: The brackets of a Chinese title (书名号): a term marker between them names no moment.
_TITLE_OPEN, _TITLE_CLOSE = "《〈", "》〉"


def _in_title(folded: str, start: int) -> bool:
    """Whether ``folded[start]`` lies inside a 《...》 or 〈...〉 title (an opening bracket
    before it that no closing one follows before it). Only the text before ``start`` is
    read: a term marker lies within the first words."""
    opened = max(folded.rfind(ch, 0, start) for ch in _TITLE_OPEN)
    return opened >= 0 and opened > max(folded.rfind(ch, 0, start) for ch in _TITLE_CLOSE)


def _ends_the_same_day(folded: str, start: int) -> bool:
    """Whether the sentence from ``start`` on says its state ends the same day
    (:data:`_SAME_DAY_END_RE`; the sentence ends at . ! ? ; or a line break, not at a
    period inside a.m./p.m. or a clock time)."""
    end = _SENTENCE_END_RE.search(folded, start)
    while end is not None and folded[end.start() - 1 : end.start() + 2] in ("a.m", "p.m", ".m."):
        end = _SENTENCE_END_RE.search(folded, end.end())
    return _SAME_DAY_END_RE.search(folded, start, end.start() if end else len(folded)) is not None


@lru_cache(maxsize=64)
def _openings(markers: tuple[str, ...]) -> tuple[str, ...]:
    """The literal each marker's match begins with (its part before the first gap, a Latin
    part up to its '*' or its clause-ending '.')."""
    heads = (m.split(GAP)[0].strip() for m in markers)
    return tuple(
        h[:-1] if h.endswith(("*", ".")) and len(h) > 1 and not _CJK_RE.search(h) else h for h in heads
    )


def _noun_tails(markers: tuple[str, ...]) -> frozenset[str]:
    """The closing words of the Latin markers whose last part, after a gap, is one plain
    word that is no function word and no participle (``bought...car`` -> car, not
    ``had...removed``): the nouns :func:`_compound_head` reads."""
    tails = set()
    for marker in markers:
        parts = marker.split(GAP)
        last = parts[-1].strip()
        plain = len(parts) > 1 and not _CJK_RE.search(marker) and last.isalpha()
        if plain and last not in _NOT_HEADS and not last.endswith("ed"):
            tails.add(last)
    return frozenset(tails)


def _compound_head(folded: str, end: int, original: str | None) -> bool:
    """Whether the noun a veto marker's match ends with (at ``end``) only modifies the noun
    after it, the head of a compound that decides what the text is about: "bought a car
    wash voucher", "a car charger", "a house plant", "lost the cat's toy" are no car, house
    or cat (session 43: they read lasting through ``bought...car``). The next word is no
    head when it is in :data:`_NOT_HEADS`, ends in -ly, -ing or -ed, is a number, or a
    name: written with a capital in ``original`` ("our dog Max"; with no ``original`` no
    word is taken for a name)."""
    nxt = _NEXT_WORD_RE.match(folded, end)
    if nxt is None:
        return False
    word = nxt.group(1)
    if word in _NOT_HEADS or word.endswith(("ly", "ing", "ed")) or not word.isalpha():
        return False
    if original is None:
        return True
    spelled = re.finditer(f"(?<!{_LATIN_WORDCHAR}){re.escape(word)}(?!{_LATIN_WORDCHAR})", original, re.I)
    return not any(m.group()[0].isupper() for m in spelled)


def _units_before(folded: str, offset: int) -> int:
    return len(_UNIT_RE.findall(folded, 0, offset))


def _merge(base: Markers, added: MarkerLists, problem: str | None) -> Markers:
    def join(old: Mapping[str, tuple[str, ...]], new: Mapping[str, tuple[str, ...]]) -> dict:
        return {k: tuple(dict.fromkeys((*old.get(k, ()), *new.get(k, ())))) for k in {*old, *new}}

    anchor = tuple(dict.fromkeys((*base.anchor, *added.anchor)))
    veto_except = join(base.veto_except, added.veto_except)
    term_except = join(base.term_except, added.term_except)
    veto, term = join(base.veto, added.veto), join(base.term, added.term)
    return Markers(veto, term, anchor, problem, veto_except, term_except)


# -- the decision ---------------------------------------------------------------


def _check_number(name: str, value: object, *, positive: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value)
    if not ok or (positive and value <= 0):  # type: ignore[operator]
        need = "a positive finite number" if positive else "a finite number"
        raise InvalidArgumentError(
            f"{name} must be {need} of seconds, got {short_repr(value)}", name=name, value=value
        )
    return float(value)  # type: ignore[arg-type]


def decide_retention(
    *,
    text: str | None,
    temporal: object,
    tier: object = None,
    now: float,
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
    markers: Markers | None = None,
    require_anchor: bool = True,
    protected: bool = False,
) -> RetentionDecision:
    """Decide a node's retention tier and expiry.

    Order: (1) an explicit ``tier`` (``"temp"``/``"long"``) wins; (2) the
    temporal kind: ``durable``/``recurring`` are long and no term rule runs;
    ``one_off`` is temp (``expires_at = now + ttl_seconds``) unless a veto
    family is in the text or (with ``require_anchor``) nothing in the text
    names a moment; (3) for ``unknown``/unset, the term rules: a one-off
    marker in the first :data:`TERM_WINDOW` units makes it temp unless a
    veto family is in the text; (4) otherwise long. ``protected`` (a node in
    ``anchor/``) turns a temp verdict into long (``anchor_layer``) unless the
    caller asked for temp.

    ``temporal`` is normalised with :func:`normalize_temporal` (raw extractor
    output is fine). ``markers`` defaults to :func:`shipped_markers`; if they
    carry a ``problem`` no automatic decision is temp. Raises
    :class:`InvalidArgumentError` for a bad ``tier``, ``now``,
    ``ttl_seconds`` (positive, at most :data:`MAX_TTL_SECONDS`) or a ``text``
    that is not a string.
    """
    if text is not None and not isinstance(text, str):
        raise InvalidArgumentError(f"text must be a string, got {type(text).__name__}", name="text")
    asked = normalize_tier(tier)
    when = _check_number("now", now)
    ttl = _check_number("ttl_seconds", ttl_seconds, positive=True)
    if ttl > MAX_TTL_SECONDS:
        raise InvalidArgumentError(
            f"ttl_seconds must be at most {MAX_TTL_TEXT} seconds, got {short_repr(ttl_seconds)}",
            name="ttl_seconds",
            value=ttl_seconds,
        )
    kind = normalize_temporal(temporal)
    found = markers if markers is not None else shipped_markers()
    verdict: _Verdict
    if asked:
        verdict = (asked, "explicit_tier", asked_reason(asked), None)
    elif kind in ("durable", "recurring"):
        verdict = ("long", f"temporal_{kind}", f"the extractor marked it {kind}: not a one-off event", None)
    elif kind == "one_off":
        verdict = _one_off_verdict(_fold(text or ""), found, require_anchor, text or "")
    else:
        verdict = _term_verdict(_fold(text or ""), kind, found, text or "")
    if protected and not asked and verdict[0] == "temp":
        why = f"anchor/ holds what must not be forgotten: never made temporary ({verdict[2]})"
        verdict = ("long", "anchor_layer", why, verdict[3])
    decided, rule, reason, marker = verdict
    expires_at = when + ttl if decided == "temp" else None
    return RetentionDecision(decided, expires_at, rule, reason, kind, marker)


_Verdict = tuple[str, str, str, "str | None"]


def asked_reason(tier: str) -> str:
    """The ``retention_reason`` of a tier a caller asked for (``explicit_tier``)."""
    return f"the caller asked for the {tier} tier"


#: How the reason of ``edit_kept_long`` opens (:func:`kept_on_edit`, session 41).
EDIT_KEPT_OPENING = "an edit of a lasting memory "


def kept_on_edit(d: RetentionDecision) -> RetentionDecision:
    """``d`` for an edit of a memory that was lasting (long, or no tier: an ``update`` of
    its body): a temp verdict the caller did not ask for becomes long, rule
    ``edit_kept_long``, the reason quoting the rule it overrode. Session 41: "The user's
    father is called John Smith." edited into "Yesterday the user's father, John Smith,
    died." became temporary and was hidden a week later, the name with it: the edit's text
    is a guess (a time word), the memory it replaces was kept, and every doubt resolves to
    long. ``update(id, retention_tier="temp")`` makes it temporary."""
    if d.tier != "temp" or d.rule == "explicit_tier":
        return d
    why = f"{EDIT_KEPT_OPENING}stays long: an edit's text does not make it temporary ({d.reason})"
    return RetentionDecision("long", None, "edit_kept_long", why, d.temporal, d.marker)


#: How every sentence :func:`decide_retention` writes itself opens (unchanged since the
#: first version that wrote one): a stored reason opening otherwise is not the decider's.
_DECIDED_OPENINGS = (
    "the extractor marked it ",
    "the one-off marker ",
    "no temporal kind ",
    "temporal kind unknown ",
    "anchor/ holds what must not be forgotten",
    EDIT_KEPT_OPENING,
)


def was_asked(reason: object) -> bool:
    """Whether a stored ``retention_reason`` says a caller chose the tier: a later edit
    of the text keeps that choice instead of deciding again from the words.

    A caller's choice is any reason the decider did not write: the sentence of a tier
    asked for without a reason (:func:`asked_reason`), the caller's own words given
    with the tier (``add(..., tier="long", retention_reason="...")``, stored as given
    since the first version), or a reason a person wrote in the file. The decider's
    sentences are known by their openings (:data:`_DECIDED_OPENINGS`), so files of
    earlier versions read the same. A blank reason is no choice."""
    if not isinstance(reason, str) or not reason.strip():
        return False
    return not reason.startswith(_DECIDED_OPENINGS)


def _vetoed(origin: str, found: Markers, text: str, prefix: str, original: str | None) -> _Verdict | None:
    """The long verdict when the markers are incomplete or a veto family is in ``text``."""
    if found.problem:
        return (
            "long",
            "markers_unreadable",
            f"{origin}, but the marker lists are incomplete: {found.problem}",
            None,
        )
    veto = found.veto_hit(text, folded=True, original=original)
    if veto is None:
        return None
    label = _FAMILY_LABELS[veto.family]
    reason = f"{origin}, but the text states {label} ({veto.marker!r})"
    return ("long", f"{prefix}{veto.family}", reason, veto.marker)


def _one_off_verdict(text: str, found: Markers, require_anchor: bool, original: str) -> _Verdict:
    origin = "the extractor marked it one_off"
    vetoed = _vetoed(origin, found, text, "veto_", original)
    if vetoed:
        return vetoed
    anchor = found.anchor_hit(text, folded=True)
    if anchor is None and require_anchor:
        return ("long", "veto_no_anchor", f"{origin}, but nothing in the text names a moment", None)
    return ("temp", "temporal_one_off", f"{origin}, the text names a moment and has no veto marker", anchor)


def _where(unit: int) -> str:
    """Where a term marker is, for a reason: it opens the text, or which unit it begins at
    (before, every marker in the window was said to open the text, a last word too)."""
    if unit == 0:
        return "opens the text"
    return (
        f"begins at word {unit + 1} of the text, within the first {TERM_WINDOW} a term rule reads"
        " (a CJK character counts as one)"
    )


def _term_verdict(text: str, kind: str, found: Markers, original: str) -> _Verdict:
    head = found.term_hit(text, folded=True)
    if head is None:
        said = "no temporal kind" if kind == UNSET else "temporal kind unknown"
        why = f"{said} and no one-off marker is in its first {TERM_WINDOW} words"
        return ("long", "default_long", why, None)
    origin = f"the one-off marker {head.marker!r} ({head.family}) {_where(head.unit)}"
    vetoed = _vetoed(origin, found, text, "term_guard_", original)
    if vetoed:
        return vetoed
    return ("temp", f"term_{head.family}", f"{origin} and no veto marker is in the text", head.marker)


# -- marker files -----------------------------------------------------------------


def _check_marker(value: object) -> tuple[str | None, str]:
    """(problem, folded marker) of one marker; problem is None when valid."""
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__} {value!r}", ""
    marker = _fold(value)
    if any(ch.isdigit() for ch in marker):
        return f"{value!r} contains a digit: a number alone never decides retention", ""
    for part in (p.strip() for p in marker.split(GAP)):
        core = part[:-1] if part.endswith("*") else part
        if not any(ch.isalpha() for ch in core):
            return f"{value!r}: {part!r} has no letter or CJK character", ""
        if "*" in core:
            return f"{value!r}: '*' is allowed only at the end of a word", ""
        if part.endswith("*") and _CJK_RE.search(part):
            return f"{value!r}: '*' is for Latin words (CJK markers already match anywhere)", ""
    return None, marker


def _folded_list(items: object, where: str, path: str) -> tuple[str, ...]:
    if not isinstance(items, list):
        raise MarkerFileError(path, f"{where} must be a list of strings")
    folded = []
    for number, item in enumerate(items, 1):
        problem, marker = _check_marker(item)
        if problem:
            raise MarkerFileError(path, f"{where} entry {number}: {problem}")
        folded.append(marker)
    return tuple(dict.fromkeys(folded))


def _parse_section(
    data: Mapping[str, object], key: str, names: tuple[str, ...], path: str, complete: bool
) -> dict[str, tuple[str, ...]]:
    section = data.get(key, {})
    if not isinstance(section, Mapping):
        raise MarkerFileError(path, f"{key!r} must be an object of lists, got {type(section).__name__}")
    out: dict[str, tuple[str, ...]] = {}
    for name, items in section.items():
        if name not in names:
            raise MarkerFileError(path, f"{key}: unknown name {name!r}; expected one of: {', '.join(names)}")
        out[name] = _folded_list(items, f"{key}.{name}", path)
    missing = [n for n in names if not out.get(n)]
    if complete and missing:
        raise MarkerFileError(path, f"{key}: no markers for {', '.join(missing)}")
    return out


@dataclass(frozen=True)
class MarkerLists:
    """The validated, folded content of one marker file."""

    veto: Mapping[str, tuple[str, ...]]
    term: Mapping[str, tuple[str, ...]]
    anchor: tuple[str, ...]
    veto_except: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    term_except: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


_FILE_KEYS = ("version", "veto", "term", "anchor", "veto_except", "term_except")


def parse_markers(data: object, path: str | os.PathLike[str], *, complete: bool = False) -> MarkerLists:
    """Validate the content of a marker file.

    The format is ``{"version": 1, "veto": {family: [markers]}, "term":
    {rule: [markers]}, "anchor": [markers], "veto_except": {family: [words]}}``; keys
    starting with ``_`` are comments, every other key is optional (``veto_except``: words
    inside which a family's markers do not count, see :meth:`Markers.veto_hit`; they take
    no ``...``). ``complete=True`` (the shipped
    file) requires markers for every family, rule and the anchors. Raises
    :class:`MarkerFileError` naming ``path`` and the offending key or entry.
    """
    where = os.fspath(path)
    if not isinstance(data, Mapping):
        raise MarkerFileError(where, f"expected a JSON object, got {type(data).__name__}")
    version = data.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise MarkerFileError(where, f"unsupported version {version!r} (this md-cg reads {FORMAT_VERSION})")
    for key in data:
        if key not in _FILE_KEYS and not str(key).startswith("_"):
            raise MarkerFileError(where, f"unknown key {key!r} (expected {', '.join(_FILE_KEYS)})")
    veto = _parse_section(data, "veto", VETO_FAMILIES, where, complete)
    term = _parse_section(data, "term", TERM_RULES, where, complete)
    anchor = _folded_list(data.get("anchor", []), "anchor", where)
    if complete and not anchor:
        raise MarkerFileError(where, "anchor: no markers")
    excepts = []
    for key, names in (("veto_except", VETO_FAMILIES), ("term_except", TERM_RULES)):
        section = _parse_section(data, key, names, where, False)
        for family, words in section.items():
            for number, word in enumerate(words, 1):
                if GAP in word:
                    why = f"{key}.{family} entry {number}: {word!r}: a gap ('...') is not allowed here"
                    raise MarkerFileError(where, why)
        excepts.append(section)
    return MarkerLists(veto=veto, term=term, anchor=anchor, veto_except=excepts[0], term_except=excepts[1])


def read_marker_file(path: str | os.PathLike[str], *, complete: bool = False) -> MarkerLists:
    """Read and validate one marker file (see :func:`parse_markers`).

    A file that cannot be read or parsed raises :class:`MarkerFileError`;
    a missing file raises :class:`FileNotFoundError`.
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise MarkerFileError(path, f"cannot read it: {exc.strerror or exc}") from exc
    return _decode_markers(raw, path, complete=complete)


def _decode_markers(raw: bytes, path: str | os.PathLike[str], *, complete: bool = False) -> MarkerLists:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        line = fsops.conflict_line(raw)
        if line is not None:
            why = f"unresolved git merge conflict (conflict marker at line {line}); resolve it and save"
            raise MarkerFileError(path, why) from None
        raise MarkerFileError(path, f"not valid JSON: {exc}") from None
    if (twice := fsops.duplicate_key_problem(raw)) is not None:
        raise MarkerFileError(path, twice)
    return parse_markers(data, path, complete=complete)


@lru_cache(maxsize=1)
def shipped_markers() -> Markers:
    """The markers shipped in ``md_cg/data/retention_markers.json`` (loaded once)."""
    lists = read_marker_file(_SHIPPED_PATH, complete=True)
    return Markers(lists.veto, lists.term, lists.anchor, None, lists.veto_except, lists.term_except)


def load_markers(extra_path: str | os.PathLike[str] | None = None) -> Markers:
    """The shipped markers extended by a store's marker file.

    ``extra_path`` that is ``None`` or does not exist gives the shipped
    markers. A file that exists but cannot be used (unreadable, not JSON,
    invalid entry) never raises: the result is the shipped markers with
    :attr:`Markers.problem` set to the error text, so writes go on and no
    automatic decision is temp until the file is fixed.
    """
    base = shipped_markers()
    if extra_path is None:
        return base
    try:
        added = read_marker_file(extra_path)
    except FileNotFoundError:
        return base
    except MarkerFileError as exc:
        return base.with_problem(str(exc))
    return _merge(base, added, None)


def load_store_markers(root: str) -> Markers:
    """The shipped markers extended by the store's ``.mdcg/retention_markers.json``, as
    :func:`load_markers`; the file is read without following a symlink, only if it
    is a regular file (a FIFO would block every write) and at most 4 MiB."""
    base = shipped_markers()
    path = store_marker_path(root)
    try:
        raw = fsops.read_small(root, f".mdcg/{STORE_FILE}", limit=MAX_STORE_FILE_BYTES)
        if raw is None:
            return base
        added = _decode_markers(raw, path)
    except MarkerFileError as exc:
        return base.with_problem(str(exc))
    except (OSError, UnsafePathError) as exc:
        why = exc.reason if isinstance(exc, UnsafePathError) else f"cannot read it: {exc.strerror or exc}"
        return base.with_problem(str(MarkerFileError(path, why)))
    return _merge(base, added, None)


def store_marker_path(root: str | os.PathLike[str]) -> Path:
    """Where a store keeps its marker file: ``<root>/.mdcg/retention_markers.json``."""
    return Path(root) / ".mdcg" / STORE_FILE
