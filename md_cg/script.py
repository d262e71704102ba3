"""Script and normalisation rules: the one owner of every text-folding rule.

Every module that folds, classifies or stems text calls this module instead
of writing the rule again. No other module of the package calls
``unicodedata.normalize`` or spells a CJK code-point range (a test checks it).

Folding
-------
* :func:`fold` -- NFKC, full case folding and (by default) whitespace runs
  made one space and trimmed: the identity of a condition, a keyword, a
  synonym entry or a domain string.
* :func:`nfkc` -- NFKC alone, for the tokenizer (:mod:`md_cg.text`), which
  does its own lower-casing.
* :func:`id_fold` -- NFC + case folding: the identity of a node id on the
  case-insensitive, normalising file systems of macOS and Windows.
  :func:`nfc` -- NFC alone (the same text, however composed).
* :func:`tag_fold` -- NFKC + case folding, whitespace kept: the identity of a tag
  in a tag filter and in a write's one-tag-once check (width and space variants too).

The CJK class
-------------
:data:`CJK_CHARS` is the one set of characters treated as CJK: analysed by
character n-grams in search, cut into characters by the judge and the synonym
matcher, matched by substring in routing. It holds

* Han: CJK unified ideographs (U+4E00-9FFF), extension A (U+3400-4DBF),
  extensions B-H and the compatibility supplement (U+20000-323AF), and the
  compatibility ideographs (U+F900-FAFF);
* the ideographic marks 々 〆 〇 (U+3005-3007), which are written inside Han
  words (人々, 〇〇年);
* kana: hiragana and katakana (U+3040-30FF) and the katakana phonetic
  extensions (U+31F0-31FF);
* Hangul: syllables (U+AC00-D7AF), jamo (U+1100-11FF) and compatibility
  jamo (U+3130-318F).

All of these are written without spaces between words, so a word boundary
cannot be found from the text; that is what puts a script in the class.
Latin, Cyrillic, Greek and the other scripts that separate words with spaces
are not in it, nor is CJK punctuation (it separates runs). Bopomofo and the
Kangxi radicals are left out: NFKC maps the radicals to unified ideographs,
and Bopomofo is an annotation, not running text.

Plural forms and stemming
-------------------------
:func:`singulars` strips a light English plural (``lists`` -> ``list``,
``libraries`` -> ``library``, ``boxes`` -> ``box``); :func:`plural_forms`
is the word and those forms. :func:`stem` is the one access point to the
Snowball stemmers (English; Russian for Cyrillic words), one stemmer object
per thread because a PyStemmer object is not thread-safe.

Imports nothing from the package.
"""

from __future__ import annotations

import functools
import re
import reprlib
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable

import Stemmer

#: Exactly the characters of the Unicode categories Cc (controls) and Cs
#: (surrogates), checked over every code point by a test: one regex instead
#: of a ``unicodedata.category`` call per character.
CONTROL_OR_SURROGATE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (no UTF-8 can store it)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


__all__ = [
    "CJK_CHARS",
    "CJK_CHAR_RE",
    "CJK_RUN_RE",
    "CJK_SPLIT_RE",
    "CYRILLIC_RE",
    "WORD_CHAR",
    "cut_back",
    "fold",
    "fold_accents",
    "folds_apart",
    "has_cjk",
    "id_fold",
    "is_cjk",
    "is_nfc",
    "is_nfkc",
    "match_fold",
    "nfkc",
    "plural_forms",
    "singulars",
    "splits_cluster",
    "stem",
    "tag_fold",
    "terminal_safe",
]

#: Body of a regular-expression character class matching one CJK character
#: (see the module docstring for what it holds and why).
CJK_CHARS = (
    "\u3005-\u3007"  # 々 〆 〇
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3130-\u318f"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\u1100-\u11ff"  # Hangul jamo
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U000323af"  # CJK extensions B-H, compatibility supplement
)

#: One CJK character.
CJK_CHAR_RE = re.compile(f"[{CJK_CHARS}]")
#: A maximal run of CJK characters.
CJK_RUN_RE = re.compile(f"[{CJK_CHARS}]+")
#: Splits text into alternating non-CJK text and CJK runs (the runs are kept).
CJK_SPLIT_RE = re.compile(f"([{CJK_CHARS}]+)")
#: A Cyrillic letter (the word is stemmed as Russian).
CYRILLIC_RE = re.compile("[\u0400-\u04ff]")
#: Character class of a letter or digit outside the CJK class (``_`` excluded).
WORD_CHAR = f"[^\\W_{CJK_CHARS}]"


def is_cjk(ch: str) -> bool:
    """True when the first character of ``ch`` is in the CJK class."""
    return CJK_CHAR_RE.match(ch) is not None


def has_cjk(text: str) -> bool:
    """True when ``text`` contains a character of the CJK class."""
    return CJK_CHAR_RE.search(text) is not None


#: Lengths of text whose NFKC form and :func:`fold` are remembered, the last
#: :data:`_MEMO_TEXTS` of each: a search normalises its query in several steps (its
#: terms, its words, the synonyms, the phrase key, routing: six NFKC passes over the
#: same text before session 38, one now), and a long query's passes cost (100,000 x
#: U+FDFA, 18 characters each in NFKC: 5.5 s, 2.9 s now). Shorter text is normalised
#: again (cheaper than a lookup), longer is not kept (memory).
_MEMO_LENGTHS = range(256, 200_001)
_MEMO_TEXTS = 2


def nfkc(text: str) -> str:
    """``text`` in Unicode normalisation form NFKC."""
    if len(text) in _MEMO_LENGTHS:
        return _nfkc_memo(text)
    return unicodedata.normalize("NFKC", text)


@functools.lru_cache(maxsize=_MEMO_TEXTS)
def _nfkc_memo(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def nfc(text: str) -> str:
    """``text`` in Unicode normalisation form NFC (composed: ``e`` + U+0301 -> ``é``)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def is_nfc(text: str) -> bool:
    """True when ``text`` is already in NFC (cheap: no copy is made)."""
    return unicodedata.is_normalized("NFC", text)


def is_nfkc(text: str) -> bool:
    """True when ``text`` is already in NFKC (cheap: no copy is made)."""
    return unicodedata.is_normalized("NFKC", text)


def fold(text: str, *, collapse: bool = True) -> str:
    """NFKC + full case folding; with ``collapse``, whitespace runs become one space, trimmed.

    Full-width letters and digits become ASCII, ``ß`` becomes ``ss``,
    compatibility ideographs become unified ones. ``collapse=False`` keeps
    whitespace as it is (bucket keys are derived from such text and must not
    change).
    """
    if text.isascii() and text.isalnum():
        return text.lower()
    if len(text) in _MEMO_LENGTHS:
        return _fold_memo(text, collapse)
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()) if collapse else folded


@functools.lru_cache(maxsize=_MEMO_TEXTS)
def _fold_memo(text: str, collapse: bool) -> str:
    folded = nfkc(text).casefold()
    return " ".join(folded.split()) if collapse else folded


def _accent_table() -> dict[int, str | None]:
    """Latin letters with diacritics -> their base letters; combining marks -> deleted."""
    table: dict[int, str | None] = dict.fromkeys(range(0x300, 0x370))
    for block in (range(0xC0, 0x250), range(0x1E00, 0x1F00)):
        for cp in block:
            base = "".join(c for c in unicodedata.normalize("NFD", chr(cp)) if not unicodedata.combining(c))
            if base != chr(cp) and base.isascii() and base.isalpha():
                table[cp] = base
    # letters that carry their stroke or ligature in the code point itself (no NFD decomposition)
    for letters, base in (("øØ", "o"), ("łŁ", "l"), ("đĐ", "d"), ("ħĦ", "h"), ("ŧŦ", "t"), ("ı", "i"),
                          ("æÆ", "ae"), ("œŒ", "oe")):  # fmt: skip
        for letter in letters:
            table[ord(letter)] = base
    return table


_ACCENTS = _accent_table()
#: Every character :data:`_ACCENTS` changes lies in these ranges: text without one
#: is returned as it is, without ``str.translate`` (~5 us for a 100-character title).
_ACCENT_RANGES = re.compile("[\u00c0-\u024f\u0300-\u036f\u1e00-\u1eff]")


def fold_accents(text: str) -> str:
    """``text`` with the diacritics of Latin letters removed: ``café`` -> ``cafe``, ``Zürich`` -> ``Zurich``.

    Precomposed Latin letters (Latin-1 Supplement, Latin Extended-A/B and
    Additional) become their base letters, ``ø ł đ ħ ŧ ı`` their unstroked
    ones, ``æ œ`` two letters, and combining diacritical marks (U+0300-036F)
    are deleted; case is kept, so fold case first. Other scripts are left as
    they are: Cyrillic ``й``, Greek, Hangul (which NFD would split into jamo)
    and CJK are unchanged. This is what SQLite FTS5's ``unicode61`` tokenizer
    does by default, so a memory about ``José`` is found by ``jose``.
    """
    if text.isascii() or _ACCENT_RANGES.search(text) is None:
        return text
    return text.translate(_ACCENTS)


def id_fold(text: str) -> str:
    """The identity of a node id on case-insensitive, normalising file systems.

    NFC (what macOS writes) and case folding (what Windows and macOS compare
    by): ``Foo``/``foo`` and the NFC/NFD spellings of ``café`` fold alike, so
    two such ids would collide on those file systems.
    """
    if text.isascii():
        return text.lower()  # NFC leaves ASCII as it is; its case folding is lower()
    return unicodedata.normalize("NFC", text).casefold()


def tag_fold(tag: str) -> str:
    """The identity of a tag: NFKC and case folding (:func:`fold` without collapsing
    whitespace). Letter case, Unicode form (``re\u0301union``, NFD as macOS writes it),
    width (``\uff50\uff52\uff4f\uff4a\uff45\uff43\uff54``, full-width from a Chinese
    or Japanese input method) and space characters (U+00A0, U+3000 and the other spaces
    NFKC makes U+0020) aside: what a tag filter matches by, for stored tags and filter
    strings alike (session 42; session 41 folded case and Unicode form only)."""
    if tag.isascii():
        return tag.lower()  # NFKC leaves ASCII as it is; its case folding is lower()
    return fold(tag, collapse=False)


def escaped(text: str) -> str:
    """``text`` in single quotes, every character outside printable ASCII (and ``'``,
    ``\\``) written as an escape -- ``\\uXXXX``, ``\\UXXXXXXXX``, ``\\'``, ``\\\\`` --
    so that two ids that look alike print apart: ``'Caf\\u00e9'`` and ``'Cafe\\u0301'``.
    The same text is a Python string literal and, after a ``$``, a bash word."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "'\\":
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "'" + "".join(out) + "'"


#: What a terminal takes as a command rather than as text: the C0 controls, DEL, the C1
#: controls (ESC starts a sequence that retitles the window, recolours or moves the
#: cursor; CSI U+009B does alone) and the bidirectional formatting marks (U+202E shows
#: what follows it backwards); and a lone surrogate, which no UTF-8 stream can carry
#: (a tampered log's ``"\\ud800"``: written raw, it would fail the whole output).
_TERMINAL_UNSAFE = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
#: For one line (a cell, an error message), also every line end -- the U+2028 and
#: U+2029 separators too: a one-line text stays one line in a log or an editor.
_TERMINAL_CONTROL = re.compile(f"[\x00-\x1f{_TERMINAL_UNSAFE}\u2028\u2029]")
#: For a text shown whole, less the line ends and tabs its lines keep: ``\n``, ``\t`` and
#: the ``\r`` of a ``\r\n`` (a lone ``\r`` sends the cursor back over what was written).
_TERMINAL_CONTROL_IN_LINES = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_TERMINAL_UNSAFE}]|\r(?!\n)")


def twin_labels(first: str, second: str) -> tuple[str, str]:
    """How to print two ids in one message so that they do not look the same: their
    ``repr``, or both :func:`escaped` (``'Caf\\u00e9'``, ``'Cafe\\u0301'``) when they differ
    only in Unicode form, as the unknown-id error and ``health`` print such twins."""
    if first == second or unicodedata.normalize("NFC", first) != unicodedata.normalize("NFC", second):
        return repr(first), repr(second)
    return escaped(first), escaped(second)


def _escape_control(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def terminal_safe(text: str, *, lines: bool = False) -> str:
    """``text`` with every character a terminal would obey instead of showing (controls,
    DEL, bidi overrides) written as its escape -- ``\\x1b``, ``\\u202e`` -- so that text
    stored in a memory (typed by an agent, imported) cannot retitle the terminal,
    recolour a table or overwrite its state column; a lone surrogate too (``\\ud800``:
    it cannot be written as UTF-8) and, in one line, the U+2028/U+2029 line separators.
    ``lines``: keep the line ends and tabs of a text shown whole (a body), escaping the
    rest.

    The one escaper for display (the CLI's tables and lines, the reason in an error's
    :meth:`~md_cg.audit.Departure.describe`): every other character is shown as it is,
    spaces of any width (U+00A0, U+3000), joiners and unassigned code points included:
    they are text, and no terminal obeys them."""
    pattern = _TERMINAL_CONTROL_IN_LINES if lines else _TERMINAL_CONTROL
    return pattern.sub(_escape_control, text) if pattern.search(text) else text


def distinct_labels(ids: Iterable[str]) -> dict[str, str]:
    """How to print each of ``ids`` so that no two look the same: the id itself, or
    :func:`escaped` for an id that another one of ``ids`` equals after NFC
    normalisation (the same letters, composed differently: NFC and NFD twins)."""
    unique = list(dict.fromkeys(ids))
    counts = Counter(unicodedata.normalize("NFC", i) for i in unique)
    return {i: escaped(i) if counts[unicodedata.normalize("NFC", i)] > 1 else i for i in unique}


def singulars(word: str) -> tuple[str, ...]:
    """Light plural strips of a folded English word, most specific first.

    Words of three letters or fewer, words not ending in ``s`` and words
    ending in ``ss`` give nothing; ``-ies`` also gives ``-y``; ``-ses``,
    ``-xes``, ``-zes``, ``-ches`` and ``-shes`` also give the word without
    ``es``; every other candidate gives the word without its ``s``.
    """
    if len(word) <= 3 or not word.endswith("s") or word.endswith("ss"):
        return ()
    forms: list[str] = []
    if word.endswith("ies") and len(word) > 4:
        forms.append(word[:-3] + "y")
    if word.endswith(("ses", "xes", "zes", "ches", "shes")):
        forms.append(word[:-2])
    forms.append(word[:-1])
    return tuple(forms)


def plural_forms(word: str) -> tuple[str, ...]:
    """``word`` followed by its :func:`singulars`."""
    return (word, *singulars(word))


class _Stemmers(threading.local):
    """One PyStemmer object per thread (a stemmer object is not thread-safe)."""

    def __init__(self) -> None:
        self.english = Stemmer.Stemmer("english")
        self.russian = Stemmer.Stemmer("russian")


_STEMMERS = _Stemmers()


def stem(word: str) -> str:
    """Snowball stem of a case-folded word: Russian when it has a Cyrillic letter, else English."""
    if not word.isascii() and CYRILLIC_RE.search(word):
        return _STEMMERS.russian.stemWord(word)
    return _STEMMERS.english.stemWord(word)


class _ShortRepr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 4000:  # repr() refuses integers of more than 4,300 digits
            return f"<an integer of {x.bit_length() * 30103 // 100000 + 1} digits>"
        return super().repr_int(x, level)


_REPR = _ShortRepr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxstring = _REPR.maxother = 160
_REPR.maxlong = 60


def short_repr(value: object) -> str:
    """A short ``repr`` of a value for messages: bounded in length and depth, and an
    integer too long for ``repr`` (over 4,300 digits) says how long it is."""
    return _REPR.repr(value)


#: Conjoining Hangul jamo, and those of them that continue a syllable (vowels and finals).
_HANGUL_JAMO = re.compile("[\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff]")
_HANGUL_TAIL = re.compile("[\u1160-\u11ff\ud7b0-\ud7ff]")
#: Leading conjoining jamo (a syllable starts with one) and the precomposed syllables.
_HANGUL_LEAD = re.compile("[\u1100-\u115f\ua960-\ua97f]")
_HANGUL_SYLLABLE = re.compile("[\uac00-\ud7a3]")


def inside_syllable(before: str, char: str) -> bool:
    """Whether ``char`` continues a Hangul syllable after ``before``: a vowel or final
    conjoining jamo after a jamo or after a precomposed syllable (가 + ᆨ is 각), or a
    leading jamo or a syllable after a leading jamo (letters, category ``Lo``, not marks:
    a cut between them leaves half a syllable -- :func:`md_cg.render.snippet`)."""
    if _HANGUL_TAIL.fullmatch(char) is not None:
        return _HANGUL_JAMO.fullmatch(before) is not None or _HANGUL_SYLLABLE.fullmatch(before) is not None
    return _HANGUL_LEAD.fullmatch(before) is not None and (
        _HANGUL_LEAD.fullmatch(char) is not None or _HANGUL_SYLLABLE.fullmatch(char) is not None
    )


# -- matching folds and grapheme clusters ------------------------------------------------

#: Unicode categories of the marks that belong to the character before them.
MARKS = frozenset(("Mn", "Mc", "Me"))
#: Characters outside :data:`MARKS` that extend the cluster before them (UAX #29
#: Extend, ZWJ): the zero-width non-joiner and joiner, the half-width katakana sound
#: marks, the emoji skin-tone modifiers and the tag characters of flag sequences.
_EXTEND = re.compile("[\u200c\u200d\uff9e\uff9f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]")
#: Characters that start a cluster with what follows them (UAX #29 Prepend): the Arabic
#: number signs and the like.
_PREPEND = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd")
#: Regional indicator symbols: two of them are one flag, paired from the start of a run.
_REGIONAL = re.compile("[\U0001f1e6-\U0001f1ff]")
_REGIONAL_CHARS = "".join(map(chr, range(0x1F1E6, 0x1F200)))


def match_fold(text: str) -> str:
    """``text`` as the index compares words: NFKC (full-width ``ｃｏｆｆｅｅ`` and ``１２３４``,
    ``H₂O``, ``Ⅻ``, decomposed Hangul jamo composed), full case folding and the accents of
    Latin letters removed (:func:`fold_accents`). Lengths change (``ß`` -> ``ss``, a
    combining accent -> nothing); :func:`folds_apart` tells where text may be cut and
    folded in pieces."""
    if text.isascii():
        return text.lower()
    text = _FULL_WIDTH.sub(_narrow, text, count=_NARROWED)
    return fold_accents(unicodedata.normalize("NFKC", text).casefold())


#: The full-width forms of ASCII (``：``, ``，``, ``ａ``) and the ideographic space. NFKC
#: makes each the one character of its NFKD form, so putting that in first leaves the
#: NFKC form of any text as it is -- and Chinese text, whose punctuation is full-width,
#: NFKC already, which ``unicodedata.normalize`` sees at once instead of normalising
#: it (200 characters: 0.5 us instead of 40).
#: At most :data:`_NARROWED` of them: in text written in full-width letters, NFKC
#: does the rest at its own pace, faster than a replacement at a time.
_FULL_WIDTH = re.compile("[\u3000\uff01-\uff5e]")
_NARROWED = 64
_NARROW = {chr(cp): unicodedata.normalize("NFKD", chr(cp)) for cp in (0x3000, *range(0xFF01, 0xFF5F))}


def _narrow(found: re.Match[str]) -> str:
    return _NARROW[found.group()]


@functools.lru_cache(maxsize=4096)
def _starts_fold(char: str) -> bool:
    """Whether no character before ``char`` joins it under NFKC: ``char`` and the first
    character of its NFKC form are neither marks (every character canonical composition
    joins to the one before it is a mark or a Hangul vowel or final jamo; a test checks
    it over all code points) nor of a combining class other than 0 (reordered)."""
    for ch in (char, unicodedata.normalize("NFKC", char)[:1]):
        if unicodedata.category(ch) in MARKS or unicodedata.combining(ch) or _HANGUL_TAIL.fullmatch(ch):
            return False
    return True


def folds_apart(text: str, at: int) -> bool:
    """Whether ``match_fold(text[:at]) + match_fold(text[at:]) == match_fold(text)``
    for certain: ``at`` is 0, the end, or before a character nothing before it joins
    under NFKC (:func:`_starts_fold`; every ASCII character)."""
    return not 0 < at < len(text) or text[at].isascii() or _starts_fold(text[at])


def splits_cluster(text: str, at: int) -> bool:
    """Whether cutting ``text`` at ``at`` parts a grapheme cluster (UAX #29, without its
    tables: what the standard library can tell). It does before a mark, a joiner or an
    extender of :data:`_EXTEND` (a skin-tone modifier, a tag character), after a joiner
    or a prepended mark (:data:`_PREPEND`), inside a Hangul syllable
    (:func:`inside_syllable`), after a virama before a letter (a conjunct: क्ष), between
    the two regional indicators of a flag, and between CR and LF."""
    if not 0 < at < len(text):
        return False
    before, char = text[at - 1], text[at]
    if before < "\u0300" and char < "\u0300":
        return before == "\r" and char == "\n"
    if unicodedata.category(char) in MARKS or _EXTEND.fullmatch(char) or before == "\u200d":
        return True
    if before in _PREPEND or inside_syllable(before, char):
        return True
    if unicodedata.combining(before) == 9 and unicodedata.category(char) == "Lo":
        return True  # a virama links the consonants of a conjunct (UAX #29 GB9c)
    if _REGIONAL.fullmatch(char) is None:
        return False
    if _REGIONAL.fullmatch(before) is None:
        return False
    run = at - len(text[:at].rstrip(_REGIONAL_CHARS))  # an odd run before leaves a flag's first half
    return run % 2 == 1


def cut_back(text: str, end: int, start: int = 0) -> int:
    """The last place at or before ``end``, and not before ``start``, where ``text`` can be
    cut without parting a grapheme cluster (:func:`splits_cluster`: a letter from its
    marks, a flag's two regional indicators, an emoji from its skin tone or tags, a Hangul
    syllable from its final jamo, a conjunct at its virama); ``start`` when the cluster
    reaches back that far."""
    while end > start and splits_cluster(text, end):
        end -= 1
    return end
