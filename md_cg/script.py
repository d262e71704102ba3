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
    "fold",
    "fold_accents",
    "has_cjk",
    "id_fold",
    "is_cjk",
    "is_nfc",
    "is_nfkc",
    "nfkc",
    "plural_forms",
    "singulars",
    "stem",
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


def nfkc(text: str) -> str:
    """``text`` in Unicode normalisation form NFKC."""
    return unicodedata.normalize("NFKC", text)


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
    folded = unicodedata.normalize("NFKC", text).casefold()
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


def inside_syllable(before: str, char: str) -> bool:
    """Whether ``char`` continues a decomposed Hangul syllable after ``before``: a vowel or
    final conjoining jamo after a jamo (letters, category ``Lo``, not marks: a cut between
    them leaves half a syllable -- :func:`md_cg.render.snippet`)."""
    return _HANGUL_TAIL.fullmatch(char) is not None and _HANGUL_JAMO.fullmatch(before) is not None
