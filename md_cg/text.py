"""Text analysis for search: one tokenizer for alphabetic and CJK text.

:func:`analyze` turns a node's text into index terms; :func:`query_terms`
turns a query into the terms :meth:`md_cg.textindex.TextIndex.match` looks up.
Both run the same pipeline, so every term a query word produces is a term of
any document that contains the word verbatim:

1. :func:`normalize`: NFKC (full-width letters and digits become ASCII,
   compatibility ideographs unified ones), lower case, and every character
   that is not a letter or digit (punctuation, full-width punctuation,
   symbols, emoji, ``_``) becomes a space.
2. Words -- space-separated runs outside the CJK scripts: a word in
   :data:`ENGLISH_STOPWORDS` is dropped; any other is case-folded and stemmed
   with Snowball (English; Russian for Cyrillic words). Stems are cached.
3. CJK runs (:data:`md_cg.script.CJK_CHARS`: Han, kana, Hangul, the
   ideographic marks): every character bigram of the run and every
   character (unigram); a run of one character gives just that character.

:func:`query_terms` further drops English question words and Chinese
question words (什么时候, 什么, 哪里, 多少, 为什么, 怎么, 如何, 是否, 吗, 呢, ...): a CJK
run is cut where a question word is removed and the pieces are analysed as
above (``哪一年`` leaves ``年``). Queries use CJK unigrams as well as bigrams:
on the CMRC dev split that raised hit@1 from 78.1 to 80.7 (docs/ranking.md).

:func:`char_bigrams` is a helper for bigram similarity.

Which characters are CJK, NFKC and the stemmers belong to
:mod:`md_cg.script`; this module imports only it, numpy, rapidfuzz and the
standard library.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from rapidfuzz.utils import default_process

from .script import CJK_CHARS, CJK_SPLIT_RE, fold_accents, is_cjk, is_nfc, is_nfkc, nfkc, stem

__all__ = [
    "CHINESE_QUESTION_WORDS",
    "CJK_CHARS",
    "ENGLISH_QUESTION_WORDS",
    "ENGLISH_STOPWORDS",
    "Analyzer",
    "TermBatch",
    "analyze",
    "analyze_batch",
    "analyze_many",
    "char_bigrams",
    "date_words",
    "expand_query",
    "is_cjk",
    "normalize",
    "query_terms",
    "term_words",
]

_NUMPY_BIGRAMS = 128  # CJK characters from which bigrams are built with numpy

_STOPWORDS_TEXT = """
a about above after again against all am an and any are aren as at be because
been before being below between both but by can could couldn d did didn do does
doesn doing don down during each few for from further had hadn has hasn have
haven having he her here hers herself him himself his how i if in into is isn
it its itself just ll m ma me mightn more most mustn my myself needn no nor not
now o of off on once only or other our ours ourselves out over own re s same
shan she should shouldn so some such t than that the their theirs them
themselves then there these they this those through to too under until up ve
very was wasn we were weren what when where which while who whom why will with
won would wouldn y you your yours yourself yourselves
"""

#: English stopwords: the Snowball/NLTK list plus the fragments that
#: splitting contractions at the apostrophe leaves (``don't`` -> ``don`` ``t``).
ENGLISH_STOPWORDS: frozenset[str] = frozenset(_STOPWORDS_TEXT.split())

#: English question words dropped from queries in addition to the stopwords.
ENGLISH_QUESTION_WORDS: frozenset[str] = frozenset(
    {"whose", "whatever", "whenever", "wherever", "whichever", "whoever"}
)

#: Chinese question words dropped from queries, matched longest first after
#: :func:`normalize`; the CJK run is cut where one is removed. Phrases whose rest is no
#: content either are whole words (session 42): 什么时候 (when) left 时候, a word the
#: answer does not say ("用户的生日是三月十二日" for 用户什么时候过生日 held 2 of 4 words);
#: 哪一年 leaves 年, which a date in the answer holds; 多少钱 leaves 钱 (with it dropped,
#: 氢能源汽车现在多少钱 was ACCEPT for a paragraph on 能源汽车: bench/judge_broad.py).
CHINESE_QUESTION_WORDS: tuple[str, ...] = (
    "什么时候",
    "什么时间",
    "什么地方",
    "什么样",
    "啥时候",
    "多长时间",
    "为什么",
    "为何",
    "怎么样",
    "怎么",
    "怎样",
    "如何",
    "何时",
    "何地",
    "何处",
    "多久",
    "什么",
    "甚么",
    "哪一",
    "哪个",
    "哪些",
    "哪里",
    "哪儿",
    "哪",
    "多少",
    "是否",
    "啥",
    "谁",
    "吗",
    "呢",
)


_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)


def date_words(instant: float | None) -> str:
    """The calendar date of a UTC epoch ``instant`` as words to index: ``"8 may 2023"``.

    Appended to a node's indexed text (its ``created_at``), so that a
    question naming a month, a year or a day (``"when did Melanie go camping
    in June?"``) matches the memories of that time: +1.8 hit@1 and hit@10 on
    LoCoMo dev (docs/ranking.md, "Date words"). ``""`` for None or an
    instant outside the calendar (not finite, or beyond year 9999).
    """
    if instant is None or not math.isfinite(instant):
        return ""
    try:
        t = time.gmtime(instant)
    except (OverflowError, OSError, ValueError):
        return ""
    return f"{t.tm_mday} {_MONTHS[t.tm_mon - 1]} {t.tm_year}" if t.tm_year <= 9999 else ""


def normalize(text: str) -> str:
    """Lower-cased ``text`` with every character that is not a letter or digit made a space.

    NFKC is applied first when the text is not in NFC (decomposed accents
    would otherwise split words); then rapidfuzz's ``default_process`` (lower
    case, non-alphanumerics to spaces; C++, ~1 µs per 500 characters); then
    NFKC and ``default_process`` again if the result is still not NFKC
    (full-width letters and digits, ligatures, compatibility ideographs,
    half-width katakana). Full case folding (``ß`` -> ``ss``) is left to the
    word stemmer, which caches it.
    """
    if text.isascii():
        return default_process(text)
    if not is_nfc(text):
        text = nfkc(text)
    s = default_process(text)
    if not s.isascii() and not is_nfkc(s):
        s = default_process(nfkc(s))
    return s


def char_bigrams(text: str) -> set[str]:
    """The set of character bigrams of :func:`normalize` (``text``).

    Spaces are kept, so bigrams span word boundaries. A text of one
    character gives that character; an empty text gives the empty set.
    """
    s = normalize(text).strip()
    if len(s) < 2:
        return {s} if s else set()
    return {s[i : i + 2] for i in range(len(s) - 1)}


class _WordCache(dict[str, str]):
    """word -> term ("" for a dropped word), computed on first sight.

    A dict lookup is ~20x cheaper than stemming, and
    ``map(cache.__getitem__, words)`` runs the lookup loop in C. The cache is
    cleared when it reaches ``limit`` entries so that a stream of unique
    tokens (hashes, numbers) cannot grow it without bound.
    """

    def __init__(self, drop: frozenset[str], limit: int = 500_000) -> None:
        super().__init__()
        self.drop = drop
        self.limit = limit

    def __missing__(self, word: str) -> str:
        if len(self) >= self.limit:
            self.clear()
        folded = word if word.isascii() else fold_accents(word.casefold())
        term = "" if folded in self.drop else stem(folded)
        self[word] = term
        return term


class Analyzer:
    """A configured tokenizer; :func:`analyze` and :func:`query_terms` use the default one.

    ``index_stopwords``: drop English stopwords from documents (True) or
    only from queries. ``cjk_unigrams``: index every CJK character besides
    the bigrams (True) or only one-character runs. ``query_unigrams``: a
    query looks up the unigrams of its CJK runs too (only with
    ``cjk_unigrams``). ``question_words``: drop question words from queries.

    The defaults were chosen by measurement (docs/ranking.md); the other
    settings exist so that the benchmark can show what each choice is worth.
    Analyzers are safe to share between threads.
    """

    def __init__(
        self,
        *,
        index_stopwords: bool = True,
        cjk_unigrams: bool = True,
        query_unigrams: bool = True,
        question_words: bool = True,
    ) -> None:
        self.index_stopwords = index_stopwords
        self.cjk_unigrams = cjk_unigrams
        self.query_unigrams = query_unigrams and cjk_unigrams
        self.question_words = question_words
        query_drop = ENGLISH_STOPWORDS
        if question_words:
            query_drop = query_drop | ENGLISH_QUESTION_WORDS
        self._words = _WordCache(ENGLISH_STOPWORDS if index_stopwords else frozenset())
        self._qwords = _WordCache(query_drop)
        words = sorted(CHINESE_QUESTION_WORDS, key=len, reverse=True)
        self._question_re = re.compile("|".join(map(re.escape, words)))

    def analyze(self, text: str) -> list[str]:
        """Index terms of ``text``, repeats kept (term frequency matters).

        Words first, then CJK bigrams, then CJK unigrams: a bag of terms.
        """
        return _terms(normalize(text), self._words, self.cjk_unigrams)

    def analyze_many(self, texts: Iterable[str]) -> list[list[str]]:
        """``[self.analyze(t) for t in texts]``, computed through :meth:`analyze_batch`."""
        return self.analyze_batch(texts).all_terms()

    def analyze_batch(self, texts: Iterable[str]) -> TermBatch:
        """The terms of every text in ``texts`` as one :class:`TermBatch` of integer keys.

        Document ``i``'s keys decode (:meth:`TermBatch.terms`) to exactly
        ``self.analyze(texts[i])``: words first, then CJK bigrams, then CJK
        unigrams. Words go through the same stem cache as :meth:`analyze`;
        the CJK terms of the whole batch are built by numpy from code points
        and never become strings (a bigram is ``a << 21 | b``, a unigram
        ``a << 21``), so loading many documents (an open without a snapshot,
        a rebuild) does not pay ~90 ns per CJK term for a string and a
        dictionary lookup: the text index looks up each distinct key once
        (:meth:`md_cg.textindex.TextIndex.add_many`).
        """
        words, unigrams = self._words, self.cjk_unigrams
        local = _LocalWords()
        word_keys: list[int] = []
        n_words: list[int] = []
        cjk: list[str] = []  # each document's CJK runs, space-joined ("" without any)
        for text in texts:
            s = normalize(text)
            parts = [s] if s.isascii() else CJK_SPLIT_RE.split(s)
            if len(parts) == 1:
                found = list(map(local.__getitem__, filter(None, map(words.__getitem__, s.split()))))
                cjk.append("")
            else:
                outside = " ".join(parts[0::2]).split()
                found = list(map(local.__getitem__, filter(None, map(words.__getitem__, outside))))
                cjk.append(" ".join(parts[1::2]))
            word_keys += found
            n_words.append(len(found))
        return _cjk_batch(
            np.array(word_keys, dtype=np.int64), np.array(n_words, dtype=np.int64), cjk, local.words, unigrams
        )

    def query_terms(self, text: str) -> list[str]:
        """Terms of a query: :meth:`analyze` minus stopwords and question words.

        Repeats are kept (a term asked for twice weighs twice in BM25).
        """
        s = normalize(text)
        if s.isascii():
            return _terms(s, self._qwords, self.query_unigrams)
        if self.question_words:
            s = self._question_re.sub(" ", s)
        terms = _terms(s, self._qwords, self.query_unigrams)
        if all(all(ch in CJK_FUNCTION_CHARS for ch in t) for t in terms):
            return terms  # only particles and pronouns (他们, 就是我): they are what is asked
        # a bigram of two particles or pronouns (我的, 的是) says nothing of what is asked
        return [t for t in terms if not _function_bigram(t)]

    def term_words(self, text: str) -> dict[str, str]:
        """The words of the query ``text`` whose term is not the word itself, by term:
        ``{"coffe": "coffee", "zurich": "zürich"}`` for ``Coffee in Zürich`` (the word as
        :func:`normalize` leaves it: lower case, no punctuation). What a reply shows in
        place of a stem or a folded term; CJK terms are the query's own text already."""
        out: dict[str, str] = {}
        s = normalize(text)
        words = s.split() if s.isascii() else " ".join(CJK_SPLIT_RE.split(s)[0::2]).split()
        for word in words:
            term = self._qwords[word]
            if term and term != word:
                out.setdefault(term, word)
        return out

    def synonym_terms(self, phrase: str) -> list[str]:
        """Terms a synonym adds to a query: :meth:`query_terms` without single CJK characters.

        A synonym's CJK text gives its bigrams only: its characters alone
        (用户 -> 用, 户; 最后期限 -> 最, 后) match unrelated text everywhere.
        A one-character CJK synonym gives nothing.
        """
        s = normalize(phrase)
        if self.question_words and not s.isascii():
            s = self._question_re.sub(" ", s)
        return [t for t in _terms(s, self._qwords, False) if len(t) > 1 or not is_cjk(t)]

    def expand_query(self, query: str, expansions: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
        """Weighted terms of ``query`` and of its synonym ``expansions`` ((phrase, weight) pairs).

        ``expansions`` come from :meth:`md_cg.synonyms.SynonymTable.expand_text`,
        which weighs them. The query's own terms (:meth:`query_terms`) come
        first at weight 1.0; a phrase of weight >= 1 (a table entry found in
        the query: the query's own text) adds its :meth:`query_terms`; a
        synonym (weight < 1) adds its :meth:`synonym_terms`, so no synonym
        adds a single CJK character. A term keeps the highest weight any
        source gives it; order is first seen. Repeats of a term in the query
        do not add up here.
        """
        weights: dict[str, float] = {}
        for term in self.query_terms(query):
            weights.setdefault(term, 1.0)
        for phrase, weight in expansions:
            terms = self.query_terms(phrase) if weight >= 1.0 else self.synonym_terms(phrase)
            for term in terms:
                if weights.get(term, 0.0) < weight:
                    weights[term] = weight
        return list(weights.items())


#: CJK particles, copulas and pronouns (``md_cg.search.CJK_FUNCTION_CHARS``).
CJK_FUNCTION_CHARS = frozenset("的了是在有和与及或也都就而被把对从这那个么之吗呢吧啊我你他她它们")


def _function_bigram(term: str) -> bool:
    """A CJK bigram of two :data:`CJK_FUNCTION_CHARS` (我的, 的是, 他们)."""
    return len(term) == 2 and term[0] in CJK_FUNCTION_CHARS and term[1] in CJK_FUNCTION_CHARS


def _terms(s: str, words: _WordCache, unigrams: bool) -> list[str]:
    """Terms of normalised text ``s``."""
    if s.isascii():
        return list(filter(None, map(words.__getitem__, s.split())))
    parts = CJK_SPLIT_RE.split(s)
    if len(parts) == 1:
        return list(filter(None, map(words.__getitem__, s.split())))
    # parts alternate: text outside CJK runs, a CJK run, outside, run, ...
    terms = list(filter(None, map(words.__getitem__, " ".join(parts[0::2]).split())))
    runs = parts[1::2]
    if len(runs) > 1 or len(runs[0]) > 1:
        if sum(map(len, runs)) >= _NUMPY_BIGRAMS:
            terms += _bigrams_numpy(" ".join(runs))
        else:
            terms += [r[i : i + 2] for r in runs for i in range(len(r) - 1)]
    if unigrams:
        terms.extend("".join(runs))
    else:
        terms += [r for r in runs if len(r) == 1]
    return terms


#: A CJK term's key: its first code point shifted by this many bits, OR its
#: second (bigrams) or 0 (unigrams); a word's key is its index in the batch's
#: word table, below ``1 << KEY_SHIFT``.
KEY_SHIFT = 21
KEY_BITS = 2 * KEY_SHIFT
_LOW = (1 << KEY_SHIFT) - 1
_SPACE = 32


class _LocalWords(dict[str, int]):
    """Word term -> its index in the batch's word table, assigned on first sight."""

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []

    def __missing__(self, term: str) -> int:
        key = self[term] = len(self.words)
        self.words.append(term)
        return key


@dataclass(slots=True)
class TermBatch:
    """The terms of a batch of documents (:meth:`Analyzer.analyze_batch`).

    ``keys``: int64, every document's term keys in :meth:`Analyzer.analyze`
    order, documents one after the other; ``counts``: the number of keys of
    each document; ``words``: the batch's word terms (a key below
    ``1 << KEY_SHIFT`` indexes it). A CJK key holds code points: ``a << 21 |
    b`` is the bigram ``ab``, ``a << 21`` the character ``a``.
    """

    keys: np.ndarray
    counts: np.ndarray
    words: list[str]

    def term(self, key: int) -> str:
        """The term string of ``key``."""
        if key <= _LOW:
            return self.words[key]
        second = key & _LOW
        return chr(key >> KEY_SHIFT) + chr(second) if second else chr(key >> KEY_SHIFT)

    def terms(self, i: int) -> list[str]:
        """Document ``i``'s terms as strings (what :meth:`Analyzer.analyze` gives)."""
        start = int(self.counts[:i].sum())
        return [self.term(k) for k in self.keys[start : start + int(self.counts[i])].tolist()]

    def all_terms(self) -> list[list[str]]:
        """Every document's terms as strings, in order (in one pass over the keys)."""
        flat = list(map(self.term, self.keys.tolist()))
        out: list[list[str]] = []
        at = 0
        for n in self.counts.tolist():
            out.append(flat[at : at + n])
            at += n
        return out


def _cjk_batch(
    word_keys: np.ndarray, n_words: np.ndarray, cjk: list[str], words: list[str], unigrams: bool
) -> TermBatch:
    """Lay out each document's word keys, then its CJK bigram keys, then its unigram keys."""
    n_docs = len(cjk)
    cp = np.frombuffer(" ".join(cjk).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    # document of each code point (the separating spaces count for the next document)
    lens = np.fromiter(map(len, cjk), dtype=np.int64, count=n_docs) + 1
    doc = np.repeat(np.arange(n_docs, dtype=np.int64), lens)[: len(cp)]
    char = cp != _SPACE
    pair = char[:-1] & char[1:]
    bigram_keys = ((cp[:-1] << KEY_SHIFT) | cp[1:])[pair]
    bigram_doc = doc[:-1][pair]
    if unigrams:
        single = char
    else:  # only runs of one character
        edge = np.concatenate(([False], char, [False]))
        single = char & ~edge[:-2] & ~edge[2:]
    unigram_keys = (cp << KEY_SHIFT)[single]
    unigram_doc = doc[single]
    n_bi = np.bincount(bigram_doc, minlength=n_docs)
    n_uni = np.bincount(unigram_doc, minlength=n_docs)
    counts = n_words + n_bi + n_uni
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    keys = np.empty(total, dtype=np.int64)
    for src, n_src, before in (
        (word_keys, n_words, 0),
        (bigram_keys, n_bi, n_words),
        (unigram_keys, n_uni, n_words + n_bi),
    ):
        if len(src):
            src_starts = np.cumsum(n_src) - n_src
            keys[np.repeat(starts + before - src_starts, n_src) + np.arange(len(src))] = src
    return TermBatch(keys, counts, words)


def _bigrams_numpy(joined: str) -> list[str]:
    """Bigrams of the space-separated runs in ``joined``, made by numpy.

    Above ~100 characters this is ~1.7x faster than slicing in Python: the
    strings are built by ``tolist`` from a ``<U2`` view of code-point pairs.
    """
    cp = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    pairs = np.empty((len(cp) - 1, 2), dtype=np.uint32)
    pairs[:, 0] = cp[:-1]
    pairs[:, 1] = cp[1:]
    keep = (pairs[:, 0] != 32) & (pairs[:, 1] != 32)
    return pairs[keep].view("<U2").ravel().tolist()


_DEFAULT = Analyzer()


def analyze(text: str) -> list[str]:
    """Index terms of ``text`` with the default :class:`Analyzer` (see the module doc)."""
    return _DEFAULT.analyze(text)


def analyze_many(texts: Iterable[str]) -> list[list[str]]:
    """:meth:`Analyzer.analyze_many` with the default :class:`Analyzer`: ``[analyze(t) for t in texts]``."""
    return _DEFAULT.analyze_many(texts)


def analyze_batch(texts: Iterable[str]) -> TermBatch:
    """:meth:`Analyzer.analyze_batch` with the default :class:`Analyzer`."""
    return _DEFAULT.analyze_batch(texts)


def query_terms(text: str) -> list[str]:
    """Query terms of ``text`` with the default :class:`Analyzer` (see the module doc)."""
    return _DEFAULT.query_terms(text)


def term_words(text: str) -> dict[str, str]:
    """:meth:`Analyzer.term_words` of the default analyzer: query word by term, where they differ."""
    return _DEFAULT.term_words(text)


def synonym_terms(phrase: str) -> list[str]:
    """Terms a synonym adds to a query (:meth:`Analyzer.synonym_terms` of the default analyzer)."""
    return _DEFAULT.synonym_terms(phrase)


def expand_query(query: str, expansions: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """:meth:`Analyzer.expand_query` with the default :class:`Analyzer`."""
    return _DEFAULT.expand_query(query, expansions)
