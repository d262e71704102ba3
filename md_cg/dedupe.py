"""Near-duplicate verdicts for organise: is a candidate memory already stored?

Pure functions over plain values; the caller (organise) fetches the existing
nodes of the candidate's scope (non-archived, pre-selected by the BM25 index)
and records what this module decides.

* :func:`normalize_candidate` checks one raw candidate and returns a
  :class:`NormalizedCandidate` or a :class:`Skip` with the reason (a bad
  candidate is reported, never fatal).
* :func:`title_key` is the identity of a title for ``exact`` and
  ``same_title``: case, whitespace and punctuation do not count.
* :func:`near_score` says how close two texts are, 0..1, and is 0 when they
  state different facts. :func:`verdict` turns that into ``exact`` /
  ``near`` / ``same_title`` / ``new`` against a list of ``(id, title, content)``.

A false ``near`` invites an archive, so ``near`` is built for precision.
Lexical similarity alone cannot tell "Alice lives in Berlin" from "Alice
lives in Paris" (one word apart, like many true paraphrases), so guards
first look for a different fact and score such a pair 0:

* ``numbers``: the numbers differ (digits, Chinese and English number
  words, ordinals, weekdays, months: "3pm"/"5pm", "三点"/"五点", "周三"/"周五";
  a date, time, decimal or version is one value: :func:`_values`);
* ``negation``: a different count of negations ("likes"/"does not like");
* ``substitution``: each text has a content word the other lacks (Berlin /
  Paris, 腾讯/阿里); a text may only *add* words to the other;
* ``direction``: both compare ("over", "than", "而不是", "比"...) but
  not the same thing ("email over phone" / "phone over email").
* ``order``: the same words with two roles swapped ("Alice owes Bob" /
  "Bob owes Alice", "from Paris to Tokyo" / "from Tokyo to Paris", "Anna's
  manager" / "Tom's manager", 小王欠小李 / 小李欠小王): :func:`_swapped`; or two
  numbers with the words they go with exchanged ("Bob at 3, Alice at 5" / "Alice at
  3, Bob at 5"): :func:`_crossed`.

What passes is scored by rapidfuzz's ``token_sort_ratio`` over the content
words (English stop words dropped, light suffix stripping; each CJK
character one word), which then measures how much one text adds. The
threshold :data:`NEAR_THRESHOLD` was chosen on
``tests/data/near_dup_pairs.jsonl`` (docs/organize.md has the table).

Imports only the standard library, rapidfuzz and :mod:`md_cg.node` /
:mod:`md_cg.temporal`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz

from .node import LAYERS, NEGATIVE_LAYERS, SENSITIVITY_LEVELS, finite
from .script import CJK_CHARS, fold, nfc, short_repr
from .temporal import normalize_temporal

#: ``near`` when :func:`near_score` reaches this (measured, docs/organize.md).
NEAR_THRESHOLD = 0.83
#: :func:`verdict` skips a row whose sorted-word similarity to the candidate
#: (all words, stop words too) is below this: no labelled near pair is below
#: 0.79, and the check costs a few microseconds where scoring costs tens.
PREFILTER = 0.6
#: The scope keys a candidate carries; organise compares only within one scope.
SCOPE_KEYS: tuple[str, ...] = ("sensitivity", "agent_scope", "workspace_scope")
#: Layers organise may write: the memory layers (negative memory has its own calls).
CANDIDATE_LAYERS: tuple[str, ...] = tuple(layer for layer in LAYERS if layer not in NEGATIVE_LAYERS)


# -- candidates -----------------------------------------------------------------


@dataclass(frozen=True)
class NormalizedCandidate:
    """A checked organise candidate: trimmed text, tags deduplicated in order,
    ``temporal`` normalised, scope keys from the candidate or the run's defaults."""

    layer: str
    title: str
    content: str
    importance: float | None = None
    tags: tuple[str, ...] = ()
    temporal: str = ""
    sensitivity: str | None = None
    agent_scope: str | None = None
    workspace_scope: str | None = None

    @property
    def scope(self) -> tuple[object, object, object]:
        """``(sensitivity, agent_scope, workspace_scope)``: candidates match only within one scope."""
        return (self.sensitivity, self.agent_scope, self.workspace_scope)

    @property
    def text(self) -> str:
        """Title and content as one text, as :func:`verdict` compares it."""
        return f"{self.title}\n{self.content}"

    def to_dict(self) -> dict[str, Any]:
        """The snapshot form (JSON-ready); unset optional fields are left out."""
        out: dict[str, Any] = {"layer": self.layer, "title": self.title, "content": self.content}
        if self.importance is not None:
            out["importance"] = self.importance
        if self.tags:
            out["tags"] = list(self.tags)
        if self.temporal:
            out["temporal"] = self.temporal
        for key in SCOPE_KEYS:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class Skip:
    """Why a candidate was not accepted; ``field`` names the offending key when one did."""

    reason: str
    field: str | None = None


def _text_field(raw: Mapping[str, Any], key: str) -> str | Skip:
    value = raw.get(key)
    if value is None:
        return Skip(f"{key} is required", key)
    if not isinstance(value, str):
        return Skip(f"{key} must be a string, got {type(value).__name__}", key)
    text = value.strip()
    if not any(ch.isalnum() for ch in text):
        return Skip(f"{key} has no letter, digit or CJK character", key)
    return text


def _layer_field(raw: Mapping[str, Any]) -> str | Skip:
    key = "layer" if raw.get("layer") is not None else "type"
    value = raw.get(key)
    if value is None:
        return Skip("layer (or type) is required", "layer")
    if not isinstance(value, str):
        return Skip(f"{key} must be a string, got {type(value).__name__}", key)
    layer = value.strip().casefold()
    if layer in NEGATIVE_LAYERS:
        return Skip(f"{layer} nodes are written by add_{layer}, not by organise", key)
    if layer not in CANDIDATE_LAYERS:
        return Skip(f"unknown layer {short_repr(value)}; expected one of: {', '.join(CANDIDATE_LAYERS)}", key)
    return layer


def _importance_field(raw: Mapping[str, Any]) -> float | Skip | None:
    value = raw.get("importance")
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value)
    if not ok or not 0.0 <= value <= 1.0:
        return Skip(f"importance must be a number between 0 and 1, got {short_repr(value)}", "importance")
    return float(value)


def _tags_field(raw: Mapping[str, Any]) -> tuple[str, ...] | Skip:
    value = raw.get("tags")
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        return Skip(f"tags must be a list of strings, got {type(value).__name__}", "tags")
    tags: list[str] = []
    for number, tag in enumerate(value, 1):
        if not isinstance(tag, str):
            return Skip(f"tag {number} must be a string, got {type(tag).__name__}", "tags")
        if tag.strip():
            tags.append(tag.strip())
    return tuple(dict.fromkeys(tags))


def _scope_field(raw: Mapping[str, Any], defaults: Mapping[str, Any], key: str) -> object:
    value = raw.get(key)
    if value is None:
        value = defaults.get(key)
    if value is None:
        return None
    if key == "sensitivity":
        if isinstance(value, str) and value.strip().casefold() in SENSITIVITY_LEVELS:
            return value.strip().casefold()
        return Skip(
            f"sensitivity must be one of {', '.join(SENSITIVITY_LEVELS)}, got {short_repr(value)}", key
        )
    if isinstance(value, str) and value.strip():
        return value.strip()
    return Skip(f"{key} must be a non-empty string, got {short_repr(value)}", key)


def normalize_candidate(raw: object, defaults: Mapping[str, Any] | None = None) -> NormalizedCandidate | Skip:
    """Check one raw organise candidate.

    ``raw`` needs ``layer`` (or the seed's ``type``; one of
    :data:`CANDIDATE_LAYERS`), a ``title`` and a ``content`` with at least
    one letter, digit or CJK character; ``importance`` (0..1), ``tags`` (a
    list of strings), ``temporal`` (normalised, see
    :func:`md_cg.temporal.normalize_temporal`) and the :data:`SCOPE_KEYS` are
    optional. A scope key missing from ``raw`` comes from ``defaults`` (the
    run's scope), so the report and the write use the same scope. Unknown
    keys are ignored. Returns a :class:`Skip` with the reason instead of
    raising.
    """
    if not isinstance(raw, Mapping):
        return Skip(f"a candidate must be an object, got {type(raw).__name__}")
    fields: dict[str, Any] = {
        "layer": _layer_field(raw),
        "title": _text_field(raw, "title"),
        "content": _text_field(raw, "content"),
        "importance": _importance_field(raw),
        "tags": _tags_field(raw),
    }
    for key in SCOPE_KEYS:
        fields[key] = _scope_field(raw, defaults or {}, key)
    for value in fields.values():
        if isinstance(value, Skip):
            return value
    return NormalizedCandidate(temporal=normalize_temporal(raw.get("temporal")), **fields)


# -- exact: the title key -----------------------------------------------------------


@lru_cache(maxsize=8192)
def title_key(title: str) -> str:
    """A title's identity for ``exact`` and ``same_title``: NFKC, case folded, without whitespace
    or punctuation (``"Q3 Budget Review!"`` and ``"q3 budget review"`` match).
    Symbols stay (``C++`` is not ``C``)."""
    # A decimal point or separator between digits is part of a number: "Version 1.2" is
    # not "Version 12" (review round 3, session 25).
    if "." in title or "," in title:
        title = _DECIMAL_RE.sub("\\1\x00", title)
    if title.isascii():
        return title.casefold().translate(_ASCII_DROP)
    return fold(title, collapse=False).translate(_DROPPED)


_DECIMAL_RE = re.compile(r"([0-9])[.,](?=[0-9])")


_ASCII_DROP = str.maketrans(
    dict.fromkeys(chr(c) for c in range(128) if chr(c).isspace() or unicodedata.category(chr(c))[0] == "P")
)


class _Dropped(dict[int, int | None]):
    """The ``str.translate`` table of :func:`title_key`: whitespace and punctuation to
    nothing, any other character to itself -- each character looked up once, on first
    sight (``str.isspace``, Unicode category P*), then from the table (a character at a
    time in Python was a third of a cold first dry run at 45k memories, session 43)."""

    def __missing__(self, code: int) -> int | None:
        if len(self) >= _DROPPED_MAX:
            self.clear()  # titles in every script of Unicode: kept bounded
        ch = chr(code)
        value = None if ch.isspace() or unicodedata.category(ch)[0] == "P" else code
        self[code] = value
        return value


#: Characters :data:`_DROPPED` keeps before it starts again.
_DROPPED_MAX = 65_536


_DROPPED = _Dropped()


# -- near: text features ----------------------------------------------------------------

_CJK = CJK_CHARS
_CJK_RUN_RE = re.compile(f"[{_CJK}]+")
_LATIN_RE = re.compile(f"[^\\W_{_CJK}]+")
_SKETCH_RE = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")
_CONTRACTIONS = (("can't", "can not"), ("won't", "will not"), ("shan't", "shall not"), ("n't", " not"))
_QUOTES = ("\u2019", "\u2018", "\u02bc")
#: What a possessive holds: an apostrophe (any of them, the full-width one too) or 的.
_POSSESSIVE_MARKS = ("'", *_QUOTES, "\uff07", "的")


def _words(text: str) -> list[str]:
    return text.split()


_EN_STOP = frozenset(
    _words(
        """a an the is are was were be been being am of in on at to for by with from as and or but that
        this these those it its their there they them he she his her we our you your i my me do does did
        has have had will would shall should can could may might must so than then also just very about
        into over per via each every all any some"""
    )
)
_EN_NEGATIONS = frozenset(
    _words("not no never cannot without nor none dont doesnt didnt isnt arent wasnt werent")
)
# 不 没 无 别 未 非 勿 莫 甭 禁 are negations; these words only contain one.
_ZH_NEGATIONS = "不没无别未非勿莫甭禁"
_ZH_NEGATION_RE = re.compile(f"[{_ZH_NEGATIONS}]")
# ...except inside 非常 特别 别人 区别 差别 无论 不过 差不多, which negate nothing.
_NEGATION_SPOILERS = frozenset("特区差")
_NOT_NEGATIONS = ("非常", "别人", "无论", "不过")
# ...but 不过 is 不 + a word of 过 (不过敏 "not allergic", 不过期 "not expired") before these,
# unless they start another word ("不过期间" is "but during", "不过关于" "but about").
_GUO_WORDS = frozenset("敏期关夜度量载滤")
_NOT_GUO_WORDS = ("期间", "关于", "关系", "关注", "关心", "度假", "夜里", "夜晚", "量子")
_CN_DIGITS = dict(zip("零〇一二两三四五六七八九", (0, 0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9), strict=True))
_CN_NUMERALS = "零〇一二两三四五六七八九十百千万"
# CJK characters that are not content: particles, negations (counted apart), numerals (numbers apart).
_ZH_DROP = str.maketrans(
    dict.fromkeys("的了是在和与把被都也着过之呢吗啊吧地得" + _ZH_NEGATIONS + _CN_NUMERALS)
)
_CN_UNITS = frozenset("点时分秒天日号月年岁个位人次遍杯块元楼层版周公米斤份本张条件台只名家门倍成折期")
_CN_RUN_RE = re.compile(f"[{_CN_NUMERALS}]+")
_CN_NUMERAL_RE = re.compile(f"[{_CN_NUMERALS}]|[周期拜][日天]")
_CN_SUNDAY_RE = re.compile("(?:周|星期|礼拜)[日天]")
_EN_NUMBERS = {
    **{
        w: i
        for i, w in enumerate(_words("zero one two three four five six seven eight nine ten eleven twelve"))
    },
    **{
        w: 13 + i
        for i, w in enumerate(_words("thirteen fourteen fifteen sixteen seventeen eighteen nineteen"))
    },
    **{w: 20 + 10 * i for i, w in enumerate(_words("twenty thirty forty fifty sixty seventy eighty ninety"))},
    "hundred": 100,
    "thousand": 1000,
    "dozen": 12,
    "once": 1,
    "twice": 2,
}
_EN_ORDINALS = {
    w: i + 1
    for i, w in enumerate(
        _words("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth")
    )
}
_WEEKDAYS = {
    w: f"wd{i + 1}" for i, w in enumerate(_words("monday tuesday wednesday thursday friday saturday sunday"))
}
_MONTHS = {
    w: f"m{i + 1}"
    for i, w in enumerate(
        _words("january february march april may june july august september october november december")
    )
}
_WORD_NUMBERS: dict[str, str] = {
    **{w: str(n) for w, n in (*_EN_NUMBERS.items(), *_EN_ORDINALS.items())},
    **_WEEKDAYS,
    **{w: m for w, m in _MONTHS.items() if w != "may"},
    "maymonth": _MONTHS["may"],
}
# "may" is the month only before a number ("May 3"); otherwise a stop word.
_MAY_DATE_RE = re.compile(r"\bmay\s+(?=\d)")
_EN_SKIP = _EN_STOP | _EN_NEGATIONS
_STEMS: dict[str, str] = {}
_NUMBER_SUFFIX_RE = re.compile(r"(\d+)(st|nd|rd|th|am|pm|h|s)?")
_NOT_COMPARISON_RE = re.compile("比如|比较|比赛|比例|比率|比重|比分")
_COMPARISON_RE = re.compile(
    r"而不是|而非|胜过|多于|少于|不如|比|instead of|rather than|versus|\b(?:over|than|vs)\b"
)
_COMPARISON_HINTS = (
    "比",
    "而",
    "胜过",
    "多于",
    "少于",
    "不如",
    "instead",
    "rather",
    "versus",
    "over",
    "than",
    "vs",
    "prefer",
)
# "prefer tea to coffee": after a preference, "to" compares too.
_PREFERENCE_RE = re.compile(_COMPARISON_RE.pattern + r"|\bto\b")


@dataclass(frozen=True)
class _Features:
    numbers: tuple[str, ...]
    negations: int
    content: frozenset[str]
    words: tuple[str, ...]
    joined: str
    after_comparison: str | None
    #: content words, negations and relation words in text order (:func:`_order_tokens`)
    order: tuple[str, ...] = ()
    #: (owner, owned) of its possessives ("Anna's manager", 小李的经理): :func:`_possessions`
    possessions: frozenset[tuple[str, str]] = frozenset()
    #: (holds a passive marker "by" / 被, holds an English possessive "'s"): either reads
    #: its roles the other way round ("Anna is managed by Tom", "the app's manager is Sarah")
    turns: tuple[bool, bool] = (False, False)
    #: ``order`` and ``turns`` with simple English passives read actively
    #: (:func:`_active_voice`: "Bob was paid by Alice" -> "Alice paid Bob")
    active_order: tuple[str, ...] = ()
    active_turns: tuple[bool, bool] = (False, False)


# -- near: number-like values ----------------------------------------------------------------

#: A clock time with am/pm ("8am", "8:30 p.m.") and a 24-hour time ("20:30"): read as one
#: value each, the hour in 24-hour form (:func:`_clock`).
_AMPM_RE = re.compile(r"(?<![0-9a-z.:])([0-9]{1,2})(?::([0-9]{2}))?\s*([ap])\.?m(?![0-9a-z])\.?")
_TIME_RE = re.compile(r"(?<![0-9a-z.:])([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?(?![0-9a-z:]|[.,][0-9])")
_MONTH_NAMES = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
#: A date: year first ("2024-03-05", "2024/3/5"), spelled ("5 March 2024", "March 5th,
#: 2024") or day and month in the order written ("03/05/2024", "5.3.2024").
_ISO_DATE_RE = re.compile(
    r"(?<![0-9a-z.,/-])([0-9]{4})([-/.])([0-9]{1,2})\2([0-9]{1,2})(?![0-9a-z]|[-/.:,][0-9])"
)
_DAY_MONTH_RE = re.compile(
    rf"(?<![0-9a-z.,])([0-9]{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_NAMES},?\s+([0-9]{{4}})(?![0-9a-z])"
)
_MONTH_DAY_RE = re.compile(
    rf"(?<![0-9a-z])\b{_MONTH_NAMES}\s+([0-9]{{1,2}})(?:st|nd|rd|th)?,?\s+([0-9]{{4}})(?![0-9a-z])"
)
_OTHER_DATE_RE = re.compile(
    r"(?<![0-9a-z.,/-])([0-9]{1,2})([-/.])([0-9]{1,2})\2([0-9]{4}|[0-9]{2})(?![0-9a-z]|[-/.:,][0-9])"
)
#: Digits with decimal points or separators ("1.5", "1,5", "1,000", "1.2.3").
_GROUPED_RE = re.compile(r"(?<![0-9a-z.,])([0-9]+)((?:[.,][0-9]+)+)(?![0-9]|[.,][0-9])")
_THOUSANDS_RE = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")
#: A number glued to a unit of up to four letters ("5mg", "50ml", "2kg"); not the
#: suffixes :data:`_NUMBER_SUFFIX_RE` reads (3rd, 30s, 24h) nor a name ("1password").
_GLUED_UNIT_RE = re.compile(r"(?<![0-9a-z.])([0-9]+(?:p[0-9]+)?)([a-z]{1,4})(?![0-9a-z])")
_READ_SUFFIXES = frozenset(("st", "nd", "rd", "th", "s", "h", "am", "pm"))
#: What :func:`_values` makes of a value: digits joined by d (date), h (time) or p
#: (a decimal point, a version's dots), one word that spells no other.
_VALUE_RE = re.compile(r"[0-9]+(?:[dhpq][0-9]+)+")
_DIGIT_RE = re.compile("[0-9]")
_MONTH_NUMBER = {
    name[:3]: i for i, name in enumerate(_words("jan feb mar apr may jun jul aug sep oct nov dec"), 1)
}


def _digits(run: str) -> str:
    """A run of digits as a number, without its leading zeros ("03" is "3"); not through
    ``int``, which refuses more than 4300 digits (before session 43 such a number in a
    memory made every organize run that compared it raise ``ValueError``)."""
    return run.lstrip("0") or "0"


def _clock(hour: int, minute: str | None, second: str | None = None) -> str:
    """A time's value: the hour, then ``h`` and the minutes unless they are 00."""
    tail = f"h{minute}" if second else ("" if minute in (None, "00") else f"h{minute}")
    return f"{hour}{tail}{f'h{second}' if second else ''}"


def _ampm(m: re.Match[str]) -> str:
    hour = int(m.group(1))
    if not 1 <= hour <= 12:
        return m.group()
    return _clock(hour % 12 + (12 if m.group(3) == "p" else 0), m.group(2)) + " "


def _date(year: str, month: int, day: str) -> str:
    return f"{int(year)}d{month}d{int(day)}"


def _grouped(m: re.Match[str]) -> str:
    whole = m.group()
    if _THOUSANDS_RE.fullmatch(whole):
        whole = whole.replace(",", "")
        if "." not in whole:
            return whole
    elif whole.count(",") > 1 or ("," in whole and "." in whole):
        return whole  # "1,2,3": a list, each number its own
    return whole.replace(".", "p").replace(",", "p")


def _glued(m: re.Match[str]) -> str:
    return m.group() if m.group(2) in _READ_SUFFIXES else f"{m.group(1)} {m.group(2)}"


def _values(folded: str) -> str:
    """``folded`` with each number-like run one value word (:data:`_VALUE_RE`), read as one
    number by the ``numbers`` guard and placed as one token by ``order`` (session 43,
    attack atk12: "2024-03-05" / "2024-05-03", "1.5" / "5.1", "1:05" / "5:01" held the
    same digits and were ``near`` 1.0; "8am" / "8pm" were both 8): a date (year, month,
    day: "2024-03-05", "5 March 2024" and "March 5th, 2024" are one value; day and month
    written otherwise keep their order), a time (24-hour: "8pm", "8:00 p.m." and "20:00"
    are one value), a decimal or version ("1.5", "1,5"; "1,000" is 1000), and a number
    glued to a short unit apart from it ("5mg" is "5 mg")."""
    if "m" in folded:
        folded = _AMPM_RE.sub(_ampm, folded)
    if ":" in folded:
        folded = _TIME_RE.sub(lambda m: _clock(int(m.group(1)), m.group(2), m.group(3)), folded)
    folded = _ISO_DATE_RE.sub(lambda m: _date(m.group(1), int(m.group(3)), m.group(4)), folded)
    folded = _DAY_MONTH_RE.sub(lambda m: _date(m.group(3), _MONTH_NUMBER[m.group(2)[:3]], m.group(1)), folded)
    folded = _MONTH_DAY_RE.sub(lambda m: _date(m.group(3), _MONTH_NUMBER[m.group(1)[:3]], m.group(2)), folded)
    folded = _OTHER_DATE_RE.sub(lambda m: f"{int(m.group(1))}q{int(m.group(3))}q{int(m.group(4))}", folded)
    folded = _GROUPED_RE.sub(_grouped, folded)
    return _GLUED_UNIT_RE.sub(_glued, folded)


@lru_cache(maxsize=8192)
def _fold(text: str) -> str:
    if text.isascii():
        folded = text.casefold()
    else:
        folded = fold(text, collapse=False)
        for quote in _QUOTES:
            folded = folded.replace(quote, "'")
    if "'" in folded:
        for short, long in _CONTRACTIONS:
            folded = folded.replace(short, long)
        folded = folded.replace("'", "")
    return _values(folded) if _DIGIT_RE.search(folded) else folded


def _stem(word: str) -> str:
    """Light English suffix stripping: enough to match "runs"/"running"/"run"."""
    stem = _stem_uncached(word)
    if len(_STEMS) < 65536:
        _STEMS[word] = stem
    return stem


#: Words whose last letters are no suffix: "https" is not the plural of "http", nor "news"
#: of "new" (stemmed alike, "from http to https" and "from https to http" placed neither
#: word, and the two were ``near`` 1.0; session 42).
_UNSTEMMED = frozenset(_words("https ftps sftps imaps pops smtps news"))


def _stem_uncached(word: str) -> str:
    if word in _UNSTEMMED:
        return word
    for suffix, shortest in (("ing", 6), ("ed", 5), ("es", 5), ("s", 4)):
        if word.endswith(suffix) and len(word) >= shortest and not word.endswith("ss"):
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _cn_value(run: str) -> int:
    if len(run) > 1 and all(ch in _CN_DIGITS for ch in run):
        return int("".join(str(_CN_DIGITS[ch]) for ch in run))
    total = current = 0
    for ch in run:
        if ch in _CN_DIGITS:
            current = _CN_DIGITS[ch]
        elif ch == "万":
            total, current = (total + current) * 10000, 0
        else:
            total += (current or 1) * {"十": 10, "百": 100, "千": 1000}[ch]
            current = 0
    return total + current


def _cn_numbers(folded: str) -> list[str]:
    """Chinese numerals that name a quantity: after 第/周/星期/礼拜/点, before a
    unit (三点, 两个, 五月), or several characters long (三十, 二零二四).
    A lone 一 in 一起 or 统一 is not a number."""
    out: list[str] = []
    for match in _CN_RUN_RE.finditer(folded):
        number = _cn_number(folded, match.start(), match.end())
        if number is not None:
            out.append(number)
    out.extend("wd7" for _ in _CN_SUNDAY_RE.finditer(folded))
    return out


def _cn_number(folded: str, start: int, end: int) -> str | None:
    """The number the numeral run ``folded[start:end]`` names (``"3"``, ``"wd3"`` for
    周三), or None when it names none (:func:`_cn_numbers`)."""
    run = folded[start:end]
    if folded.endswith(("周", "星期", "礼拜"), 0, start):
        return f"wd{_cn_value(run)}"
    if len(run) > 1 or folded.endswith(("第", "点"), 0, start) or folded[end : end + 1] in _CN_UNITS:
        return str(_cn_value(run))
    return None


def _content_words(folded: str) -> tuple[list[str], list[str], int]:
    """(content words, numbers, English negations) of folded text: Latin words
    in text order (names starting with a digit last), then CJK characters."""
    if "may" in folded:
        folded = _MAY_DATE_RE.sub("maymonth ", folded)
    latin = _LATIN_RE.findall(folded)
    negations = sum(map(_EN_NEGATIONS.__contains__, latin))
    kept = [w for w in latin if w not in _EN_SKIP]
    numbers = [_WORD_NUMBERS[w] for w in kept if w in _WORD_NUMBERS]
    stems = _STEMS
    content = [stems.get(w) or _stem(w) for w in kept if w not in _WORD_NUMBERS and not w[0].isdigit()]
    for word in kept:
        if word[0].isdigit():
            match = _NUMBER_SUFFIX_RE.fullmatch(word)
            if match:
                numbers.append(_digits(match.group(1)))
            elif _VALUE_RE.fullmatch(word):
                numbers.append(word)  # a date, time, decimal or version (:func:`_values`)
            else:
                content.append(word)  # "1password", "4s": a name, not a number
    if not folded.isascii():
        content.extend("".join(_CJK_RUN_RE.findall(folded)).translate(_ZH_DROP))
    return content, numbers, negations


def _after_comparison(folded: str) -> str | None:
    """The first content word after the first comparison word; ``None`` when
    there is no comparison, ``""`` when nothing follows it."""
    if not any(hint in folded for hint in _COMPARISON_HINTS):
        return None
    blanked = _NOT_COMPARISON_RE.sub(lambda m: " " * len(m.group()), folded)
    pattern = _PREFERENCE_RE if "prefer" in blanked else _COMPARISON_RE
    match = pattern.search(blanked)
    if match is None:
        return None
    after = _content_words(folded[match.end() :])[0]
    return after[0] if after else ""


def _spoiled(text: str, at: int) -> bool:
    """Whether the negation character at ``text[at]`` is part of a word that negates
    nothing (:data:`_NEGATION_SPOILERS`, :data:`_NOT_NEGATIONS`). 不过 ("but") before
    :data:`_GUO_WORDS` is a negation (不过敏: before session 42 "对狗不过敏", "not
    allergic to dogs", counted no negation, and a paraphrase was ``new``)."""
    if text[at - 1 : at] in _NEGATION_SPOILERS:
        return True
    if not text.startswith(_NOT_NEGATIONS, at):
        return False
    guo = text.startswith("不过", at) and text[at + 2 : at + 3] in _GUO_WORDS
    return not (guo and not text.startswith(_NOT_GUO_WORDS, at + 2))


def _zh_negations(folded: str) -> int:
    return sum(not _spoiled(folded, match.start()) for match in _ZH_NEGATION_RE.finditer(folded))


@lru_cache(maxsize=8192)
def _features(text: str) -> _Features:
    if " A" in text or (not text.isascii() and ("A" in text or "a" in text)):
        text = _LABEL_A_RE.sub(_label_a, text)
    folded = _fold(text)
    content, numbers, negations = _content_words(folded)
    if not folded.isascii():
        if _CN_NUMERAL_RE.search(folded):
            numbers.extend(_cn_numbers(folded))
        negations += _zh_negations(folded)
    kept = frozenset(content)
    order = _order_of(folded, kept)
    quoted = _fold_quotes(text) if any(mark in text for mark in _POSSESSIVE_MARKS) else ""
    turns = (_PASSIVE in order or "被" in folded, "'s" in quoted)
    active = _active_voice(folded)
    active_order = order if active == folded else _order_of(active, kept)
    # a 被 read actively (:func:`_zh_active_voice`) no longer turns the roles round
    active_passive = _PASSIVE in active_order or ("被" in folded and "被" in active)
    return _Features(
        numbers=tuple(sorted(numbers)),
        negations=negations,
        content=kept,
        words=tuple(content),
        joined=" ".join(content),
        after_comparison=_after_comparison(folded),
        order=order,
        possessions=_possessions(quoted, kept),
        turns=turns,
        active_order=active_order,
        active_turns=(active_passive, turns[1]),
    )


# -- near: who does what to whom ---------------------------------------------------------------

#: Stop words that hold a relation's direction ("from Paris to Tokyo"); kept as order tokens.
_EN_RELATIONS = frozenset(_words("from to into onto toward towards than over by"))
_PASSIVE = "by"
_NEGATED = "\x00not"  # a negation's place in :func:`_order_tokens` (no word spells it)
_ORDER_RE = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+")
_POSSESSIVE_RE = re.compile(f"([^\\W_{_CJK}]+)'s\\s+([^\\W_{_CJK}]+)|([{_CJK}])的([{_CJK}])")


#: "X [has|will ...] [not] is|was|been|got ... PARTICIPLE by [the] Y": a simple English passive.
_PASSIVE_RE = re.compile(
    r"\b([^\W_]+)\s+(?:(?:has|have|had|will|would|shall|should|can|could|may|might|must)\s+)?"
    r"((?:(?:not|never)\s+)?)(?:is|are|was|were|am|be|been|being|get|gets|got|gotten)\s+"
    r"((?:(?:not|never)\s+)?)([^\W_]+)\s+by\s+(?:(?:the|a|an|my|our|his|her|their|your|its)\s+)?"
    r"([^\W_]+)"
)
#: Participles that do not end in -ed, -en, -wn or -ne ("paid by", "sent by", "built by").
_IRREGULAR_PARTICIPLES = frozenset(
    _words(
        """paid made sent built bought sold taught told held led met kept left lost won hit hurt set
        put read run cut found brought caught thought said heard felt fed bred shot spent lent
        struck hung dug won sought fought bound wound ground meant understood stood"""
    )
)


#: An upper-case "A" that names a thing, not the article: after a word that is no stop
#: word ("server A", "Plan A.", "option A or") and not before a capitalised word ("Buying
#: A Car" is a title's article), or an "A" or "a" right after a CJK character (服务器A).
_LABEL_A_RE = re.compile(
    f"(?:(?<=[{_CJK}])[Aa]|(?<![^\\W_])([^\\W\\d_]+)(\\s+)A(?!\\s+[A-Z]))(?![^\\W_{_CJK}]|['\u2019])"
)
#: What such an "A" is read as: a letter no text is folded into (NFKC and case folding
#: keep U+0251), so it is a content word of its own where the article "a" is a stop word.
_LABEL_A = "\u0251"


def _label_a(m: re.Match[str]) -> str:
    """:data:`_LABEL_A_RE`'s "A" as :data:`_LABEL_A` when it names a thing (before session
    43 "server A replaced server B" / "server B replaced server A" was ``near`` 1.0: the
    "A" was the stop word "a", and "server" twice is placed nowhere)."""
    word = m.group(1)
    if word is not None and word.casefold() in _EN_SKIP:
        return m.group()
    return (word or "") + (m.group(2) or "") + _LABEL_A


_ZH_CLAUSE_ENDS = "，。；！？、：,.;!?:\n"
#: "X被Y V": a Chinese passive, X the clause before 被 (from the clause's start: a search
#: from every place of a long clause would read it again each time) and "Y V" the rest of
#: the clause. Not 被 in 被子 被褥 被告 被窝 被单 被面 棉被 (quilt, defendant ...).
_ZH_PASSIVE_RE = re.compile(
    f"(?<![^{_ZH_CLAUSE_ENDS}])([^{_ZH_CLAUSE_ENDS}被]*)(?<!棉)被(?![子褥告窝单面])([^{_ZH_CLAUSE_ENDS}]+)"
)


def _zh_active_voice(folded: str) -> str:
    """``folded`` with each Chinese passive clause "X被Y V…" read as "Y V… X" (猫被狗追 ->
    狗追猫, 小明被老师批评了 -> 老师批评了小明; only the first 被 of a clause). Before
    session 43 a 被 on either side left word order unread: 猫被狗追 / 狗被猫追 (who chased
    whom swapped) and 猫被狗追 / 猫追狗 were ``near`` 1.0."""

    def turned(m: re.Match[str]) -> str:
        before, rest = m.groups()
        return rest + before if before.strip() else rest

    return _ZH_PASSIVE_RE.sub(turned, folded)


def _participle(word: str) -> bool:
    return word.endswith(("ed", "en", "wn", "ne")) or word in _IRREGULAR_PARTICIPLES


def _active_voice(folded: str) -> str:
    """``folded`` with each simple passive "X was VERBed by Y" read as "Y VERBed X" (a
    negation kept: "X was not paid by Y" -> "Y not paid X"); the same text when it holds
    none (``by`` after a word that is no participle -- "due by Friday" -- is left). The
    subject and agent are one word each (the last before the verb, the first after ``by``
    and an article): a longer phrase keeps its other words where they were, which moves a
    block and reverses no three (:func:`_swapped`)."""
    if "被" in folded:
        folded = _zh_active_voice(folded)
    if " by " not in folded:
        return folded

    def turned(m: re.Match[str]) -> str:
        subject, neg1, neg2, verb, agent = m.groups()
        if not _participle(verb) or subject in _EN_SKIP:
            return m.group()
        return f"{agent} {neg1}{neg2}{verb} {subject}"

    return _PASSIVE_RE.sub(turned, folded)


def _order_tokens(folded: str, content: frozenset[str]) -> tuple[str, ...]:
    """The text's content words (stemmed, as :func:`_content_words` keeps them), its
    negations (one mark each) and the relation words of :data:`_EN_RELATIONS`, in text
    order. A CJK run gives each content character and each pair of adjacent ones (a
    character alone repeats too often: 上午 / 下午)."""
    out: list[str] = []
    for run in _ORDER_RE.findall(folded):
        if not _CJK_RUN_RE.match(run):
            if run in _EN_NEGATIONS:
                out.append(_NEGATED)
            elif run in _EN_RELATIONS:
                out.append(run)
            elif run in _WORD_NUMBERS or run[0].isdigit():
                number = _order_number(run)
                if number:
                    out.append(number)
            else:
                stem = _STEMS.get(run) or _stem(run)
                if stem in content:
                    out.append(stem)
            continue
        _cjk_order_tokens(run, content, out)
    return tuple(out)


def _cjk_order_tokens(run: str, content: frozenset[str], out: list[str]) -> None:
    """:func:`_order_tokens` of a CJK run, appended to ``out``: each content character and
    each pair of adjacent ones, a negation mark, and a numeral run that names a number
    (:func:`_cn_number`: 三点, 第二, 周三) as the number's token, as "3pm" gives one
    (before session 43 Chinese numerals gave none: "从三点改到五点" / "从五点改到三点"
    was ``near`` 1.0)."""
    at = 0
    for numeral in _CN_RUN_RE.finditer(run) if _CN_NUMERAL_RE.search(run) else ():
        _cjk_chars(run, at, numeral.start(), content, out)
        number = _cn_number(run, numeral.start(), numeral.end())
        if number is not None:
            out.append("#" + number)
        at = numeral.end()
    _cjk_chars(run, at, len(run), content, out)


def _cjk_chars(run: str, start: int, end: int, content: frozenset[str], out: list[str]) -> None:
    """The order tokens of ``run[start:end]``, no numeral in it (:func:`_cjk_order_tokens`)."""
    previous = ""
    for at, ch in enumerate(run[start:end], start):
        if ch in _ZH_NEGATIONS and not _spoiled(run, at):
            out.append(_NEGATED)
            previous = ""
        elif ch in content:
            if previous:
                out.append(previous + ch)
            out.append(ch)
            previous = ch
        else:
            previous = ""


def _order_number(word: str) -> str:
    """A number's order token ("3pm", "three" -> "#3"; "#" spells no word), so that two
    numbers changing sides count as names do ("moved from 3pm to 5pm" / "from 5pm to
    3pm", atk11 F6); "" for a name starting with a digit that is not one ("1password")."""
    if word in _WORD_NUMBERS:
        return "#" + _WORD_NUMBERS[word]
    match = _NUMBER_SUFFIX_RE.fullmatch(word)
    if match:
        return "#" + _digits(match.group(1))
    return "#" + word if _VALUE_RE.fullmatch(word) else ""


def _fold_quotes(text: str) -> str:
    """``text`` folded (NFKC, case) with its apostrophes one character, kept."""
    folded = fold(text, collapse=False)
    for quote in _QUOTES:
        folded = folded.replace(quote, "'")
    return folded


def _order_of(folded: str, content: frozenset[str]) -> tuple[str, ...]:
    """:func:`_order_tokens` of the text; a first line (a title) whose tokens the rest
    holds in a row is left out: it repeats the content, and a token met twice is placed
    nowhere by :func:`_swapped`."""
    head, _nl, rest = folded.partition("\n")
    if not rest.strip():
        return _order_tokens(head, content)
    first, then = _order_tokens(head, content), _order_tokens(rest, content)
    if "\x01".join(("", *first, "")) in "\x01".join(("", *then, "")):
        return then
    return first + then


def _possessions(folded: str, content: frozenset[str]) -> frozenset[tuple[str, str]]:
    """(owner, owned) content words of the possessives of ``folded`` (:func:`_fold_quotes`):
    "Anna's manager" -> (anna, manager), 小李的经理 -> (李, 经)."""
    if "'s" not in folded and "的" not in folded:
        return frozenset()
    pairs = set()
    for word, owned_word, ch, owned_ch in _POSSESSIVE_RE.findall(folded):
        if word:
            owner, owned = _STEMS.get(word) or _stem(word), _STEMS.get(owned_word) or _stem(owned_word)
        else:
            owner, owned = ch, owned_ch
        if owner in content and owned in content:
            pairs.add((owner, owned))
    return frozenset(pairs)


def _other_owner(a: _Features, b: _Features) -> bool:
    """Whether one thing has another owner in each text, both owners named in both
    ("Tom is Anna's manager" / "Anna is Tom's manager")."""
    shared = a.content & b.content
    return any(
        x != y and x in shared and y in shared and (x, z) not in b.possessions and (y, z) not in a.possessions
        for x, z in a.possessions
        for y, owned in b.possessions
        if owned == z
    )


def _swapped(a: tuple[str, ...], b: tuple[str, ...], *, numbers: bool = False) -> bool:
    """Whether two words change sides around a third: some X, M, Y (X and Y content, M
    any token) in this order in ``a`` and in the reverse order in ``b`` ("Alice owes
    Bob" / "Bob owes Alice", "from Paris to Tokyo" / "from Tokyo to Paris"). Only tokens
    each text holds once are placed. Moving a block of words ("every morning the user
    …" / "the user … every morning") reverses no three, so it never counts.

    Numbers (:func:`_order_number`) are left out, unless ``numbers``: then X and Y are
    two numbers ("from 3pm to 5pm" / "from 5pm to 3pm", "port 8080 for dev and 8443 for
    prod" / the ports swapped). A number never stands in for a word: "The team meets at
    9am every Monday" / "Every Monday at 9am the team meets" moves a block whose words
    swap inside it, which would reverse team, 9am, Monday."""
    if not numbers:
        a, b = tuple(t for t in a if t[0] != "#"), tuple(t for t in b if t[0] != "#")
    once_a, once_b = _once(a), _once(b)
    if numbers:
        ranks = [(once_b[t], t[0] == "#") for t in once_a if t in once_b]
    else:
        ranks = [(once_b[t], t[0] != _NEGATED[0] and t not in _EN_RELATIONS) for t in once_a if t in once_b]
    if len(ranks) < 3:
        return False
    # the highest content rank before each place, the lowest after it
    before: list[int] = []
    high = -1
    for rank, is_content in ranks:
        before.append(high)
        if is_content:
            high = max(high, rank)
    low = len(b)
    for i in range(len(ranks) - 1, -1, -1):
        rank, is_content = ranks[i]
        if before[i] > rank > low:
            return True
        if is_content:
            low = min(low, rank)
    return False


def _reversed(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Two words, or two numbers, change sides around a third (:func:`_swapped`), or two
    numbers change the words they go with (:func:`_crossed`)."""
    return _swapped(a, b) or _swapped(a, b, numbers=True) or _crossed(a, b)


def _value_pairs(tokens: Iterable[str]) -> set[tuple[str, str]]:
    """(word, number) for each number of ``tokens`` and the nearest content word before it."""
    pairs, word = set(), ""
    for token in tokens:
        if token[0] == "#":
            if word:
                pairs.add((word, token))
        elif token != _NEGATED and token not in _EN_RELATIONS:
            word = token
    return pairs


def _crossed(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two numbers change the words they go with: X before v and Y before w in one
    text, X before w and Y before v in the other, neither pairing in both ("call Bob at 3,
    Alice at 5" / "call Alice at 3, Bob at 5"; session 43, attack atk12: with only the
    numbers between the two names, no three tokens reverse and :func:`_swapped` saw
    nothing). The nearest word after a number is read the same way ("at 3 Bob, at 5
    Alice"). A block moved keeps its pairs ("Bob at 3 and Alice at 5" / "Alice at 5 and
    Bob at 3"; "2 cats and 1 dog" / "1 dog and 2 cats" pair no word both ways)."""
    if not any(t[0] == "#" for t in a):
        return False
    for pa, pb in (
        (_value_pairs(a), _value_pairs(b)),
        (_value_pairs(reversed(a)), _value_pairs(reversed(b))),
    ):
        only_a, only_b = pa - pb, pb - pa
        if any(
            x != y and v != w and (x, w) in only_b and (y, v) in only_b for x, v in only_a for y, w in only_a
        ):
            return True
    return False


def _once(tokens: tuple[str, ...]) -> dict[str, int]:
    """token -> its place, for the tokens that occur once, in text order."""
    seen: dict[str, int] = {}
    twice = set()
    for at, token in enumerate(tokens):
        if token in seen:
            twice.add(token)
        else:
            seen[token] = at
    return {t: at for t, at in seen.items() if t not in twice}


@lru_cache(maxsize=8192)
def _sketch(text: str) -> str:
    """The text's words (each CJK character one word), sorted: cheap to compare."""
    return " ".join(sorted(_SKETCH_RE.findall(_fold(text))))


# -- near: the score --------------------------------------------------------------------


@dataclass(frozen=True)
class Similarity:
    """How close two texts are: ``score`` (what :func:`near_score` returns),
    ``similarity`` (the rapidfuzz score before the guards, 0..1) and
    ``guard`` (``"numbers"``, ``"negation"``, ``"substitution"``,
    ``"direction"``, ``"order"``, or ``None`` when no guard fired)."""

    score: float
    similarity: float
    guard: str | None


def _spelled(words: tuple[str, ...], extra: frozenset[str]) -> str:
    """The extra words run together in text order: "wi fi" and "wifi" spell alike."""
    return "".join(dict.fromkeys(word for word in words if word in extra))


def _guard(a: _Features, b: _Features) -> str | None:
    if a.numbers != b.numbers:
        return "numbers"
    if a.negations != b.negations:
        return "negation"
    # Sets, not counts: a title repeated in the content adds no fact.
    extra_a, extra_b = a.content - b.content, b.content - a.content
    if extra_a and extra_b and _spelled(a.words, extra_a) != _spelled(b.words, extra_b):
        return "substitution"
    compared = a.after_comparison is not None and b.after_comparison is not None
    if compared and a.after_comparison != b.after_comparison:
        return "direction"
    if a.possessions and b.possessions and _other_owner(a, b):
        return "order"
    # A passive or a possessive on one side only ("Tom manages Anna" / "Anna is managed
    # by Tom", "manager for the app" / "the app's manager") reads its roles the other way
    # round: word order tells nothing then.
    if a.turns == b.turns and _reversed(a.order, b.order):
        return "order"
    # ...unless the passive is a simple one, read actively: "Alice was paid by Bob" is
    # "Bob paid Alice", the reverse of "Alice paid Bob" (session 42; before, a passive on
    # one side let every such reversal through as near 1.0)
    if a.active_turns == b.active_turns and _reversed(a.active_order, b.active_order):
        return "order"
    return None


def compare(a: str, b: str) -> Similarity:
    """:func:`near_score` with its parts, for reports and measurement."""
    fa, fb = _features(a), _features(b)
    if not fa.joined and not fb.joined:
        # Nothing but numbers (or nothing at all): alike only if the same numbers.
        similarity = 1.0 if fa.numbers and fa.numbers == fb.numbers else 0.0
    else:
        similarity = fuzz.token_sort_ratio(fa.joined, fb.joined, processor=None) / 100.0
    guard = _guard(fa, fb)
    return Similarity(0.0 if guard else similarity, similarity, guard)


def near_score(a: str, b: str) -> float:
    """How close two texts are, 0..1; 0 when a guard finds a different fact
    (numbers, negation, a substituted content word, a reversed comparison, swapped roles).
    Symmetric; texts are folded (NFKC, case) and cached."""
    return compare(a, b).score


#: The verdicts of :func:`verdict`, strongest first.
VERDICTS: tuple[str, ...] = ("exact", "near", "same_title", "new")


@dataclass(frozen=True)
class Verdict:
    """The verdict on one candidate: ``kind`` is ``"exact"`` (the same text),
    ``"near"`` (:func:`near_score` at or above the threshold), ``"same_title"``
    (a row of the same title key, other content, not near) or ``"new"``;
    ``match_id`` the matched node (``None`` for new); ``score`` 1.0 for exact,
    else the near score of the match (for new the best seen, to show how close
    it came)."""

    kind: str
    match_id: str | None
    score: float


#: Markdown that does not change what a text says, for ``exact``: a setext heading's
#: underline or a rule (a line of ``=``, or of two or more ``-``/``*``/``_``), and at
#: a line's start heading marks followed by a space and a bullet (``-``, ``*``, ``+``).
#: Not a quote mark (``> 30 failed logins`` may mean "more than 30") nor ``#`` before a
#: word (``#42``): review round 3, session 25.
_MARKUP_LINE_RE = re.compile(r"^[ \t]*(?:=+|(?:[-*_][ \t]*){2,})[ \t]*$", re.MULTILINE)
_MARKUP_START_RE = re.compile(r"^[ \t]*(?:#+(?=[ \t]|$)|[-*+](?=[ \t]))[ \t]*", re.MULTILINE)
#: Bold and code spans around a run of text: ``**10am**``, `` `x` ``. Not ``__x__``
#: (``__init__``) nor single ``*`` (``*p*``), and not inside a word (``2**3**4``).
_EMPHASIS_RE = re.compile(r"(?<![\w*`])(\*\*|`)(?=\S)(.+?)(?<=\S)\1(?![\w*`])")


def _plain(text: str) -> str:
    """``text`` as :func:`verdict` compares it for ``exact``: Markdown that does not
    change what it says dropped (:data:`_MARKUP_LINE_RE`, :data:`_MARKUP_START_RE`,
    :data:`_EMPHASIS_RE`: a setext or ATX heading, bullets, bold, code marks), every
    run of whitespace one space, trimmed. Numbered list marks, quote marks, ``#``
    before a word, ``__x__`` and ``*x*`` stay (each may be the fact). In NFC: the same
    text in another Unicode form (NFD, as macOS writes it) is the same text (session 41)."""
    text = _MARKUP_LINE_RE.sub("", nfc(text))
    text = _MARKUP_START_RE.sub("", text)
    text = _EMPHASIS_RE.sub(r"\2", text)
    return " ".join(text.split())


def same_text(candidate: NormalizedCandidate, row: tuple[str, ...]) -> bool:
    """Whether a row ``(id, title, content[, body])`` holds the text the candidate would
    store (``# title``, then the content): the same title key and content; or the
    candidate's title and content are the row's whole text (``body`` when the row has
    it, else title and content: a memory without a heading, as ``add`` stores one);
    or its content is the row's whole text and its title is the row's title (a one-line
    memory). A content equal to a body under another title is not ``exact``: the
    title would be stored too, and a title carries facts ("Budget Q3 sign-off" over
    "Approved")."""
    title, content = row[1], row[2]
    same_title = title_key(title) == title_key(candidate.title)
    mine = _plain(candidate.content)
    if same_title and mine == _plain(content):
        return True
    whole = _plain(row[3] if len(row) > 3 else f"{title}\n{content}")
    return _plain(candidate.text) == whole or (same_title and mine == whole)


def compared_text(title: str, content: str) -> str:
    """A memory's text as :func:`verdict` scores it: title and content, or the content
    alone when the title only repeats it (no content word, number or negation the content
    lacks: "The user does not drink coffee" over "The user does not drink coffee!"), so a
    repeated "not" or "3pm" is not counted twice."""
    if not content:
        return title
    folded = _fold(content)
    if not all(word in folded for word in _SKETCH_RE.findall(_fold(title))):
        return f"{title}\n{content}"  # a word of the title is not in the content: cheap, and most titles
    head, rest = _features(title), _features(content)
    repeats = head.content <= rest.content and set(head.numbers) <= set(rest.numbers)
    return content if repeats and head.negations <= rest.negations else f"{title}\n{content}"


#: A body that opens with a Markdown heading (ATX ``# T`` or a setext underline).
_HEADED_RE = re.compile(r"[ \t]*(?:#{1,6}(?:[ \t]|$)|[^\n]*\n[ \t]*(?:=+|-{2,})[ \t]*(?:\n|$))")


def _row_score(candidate: NormalizedCandidate, row: tuple[str, ...], prefilter: float) -> float | None:
    """The near score of one row ``(id, title, content[, body])``: the best of the
    candidate's title and content against the row's whole text, the two texts as
    :func:`compared_text` gives them (a title that repeats its content left out), and,
    when the row has no heading (a memory ``mdcg add`` stored: its first line is no title
    of its own), the candidate's content alone against that text -- a title the stored
    memory never had does not hide the same content (when that memory holds no content
    word the candidate's content lacks). ``None`` when the prefilter skips every pair."""
    title, content = row[1], row[2]
    whole = row[3] if len(row) > 3 else f"{title}\n{content}"  # the whole text: a title is cut short
    pairs = {(candidate.text, whole)}
    if not title.endswith("…"):
        pairs.add((compared_text(candidate.title, candidate.content), compared_text(title, content)))
    # ...only when the memory says nothing the content lacks: "Bob" over "Lives in Berlin"
    # is not near a memory "Alice lives in Berlin" (its title names another person)
    if (
        not _HEADED_RE.match(whole.lstrip())
        and _features(whole).content <= _features(candidate.content).content
    ):
        pairs.add((candidate.content, whole))
    scores = [
        near_score(mine, theirs)
        for mine, theirs in pairs
        if prefilter <= 0 or fuzz.ratio(_sketch(mine), _sketch(theirs), score_cutoff=prefilter * 100) > 0.0
    ]
    return max(scores) if scores else None


def verdict(
    candidate: NormalizedCandidate,
    existing: Iterable[tuple[str, ...]],
    *,
    threshold: float = NEAR_THRESHOLD,
    prefilter: float = PREFILTER,
) -> Verdict:
    """Judge ``candidate`` against ``existing`` ``(id, title, content)`` rows (a fourth
    item, the node's whole body, when the title was cut short or stripped of its
    heading marks), which the caller has already limited to the candidate's scope
    and to non-archived nodes.

    The first row that holds the candidate's text (:func:`same_text`) is
    ``exact``; otherwise the row with the highest score (:func:`_row_score`: the best
    :func:`near_score` of ``title + "\n" + content``, of the :func:`compared_text`
    of both, and of the content alone against a row stored without a heading) is
    ``near`` if it reaches ``threshold`` (ties go to the earlier row); otherwise the
    first row whose :func:`title_key` equals the candidate's is ``same_title``
    (the same subject, other content:
    a changed or another fact), else the verdict is ``new``. Rows whose sorted
    words are less similar than ``prefilter`` are not scored (0 scores every row).
    """
    rows = list(existing)
    for row in rows:
        if same_text(candidate, row):
            return Verdict("exact", row[0], 1.0)
    best_id, best = None, 0.0
    scores: dict[str, float] = {}
    for row in rows:
        score = _row_score(candidate, row, prefilter)
        if score is None:
            continue
        scores[row[0]] = score
        if score > best:
            best_id, best = row[0], score
    if best_id is not None and best >= threshold:
        return Verdict("near", best_id, best)
    key = title_key(candidate.title)
    for node_id, title, *_rest in rows:
        if title_key(title) == key:
            return Verdict("same_title", node_id, scores.get(node_id, 0.0))
    return Verdict("new", None, best)
