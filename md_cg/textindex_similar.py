"""The character-similarity fallback of the text index (search tiers T1/T3).

:class:`SimilarityKeys` maps keys to the vocabulary terms that have them --
padded character bigrams of non-CJK terms, characters of CJK terms -- and is
extended incrementally as the vocabulary grows. :meth:`SimilarityKeys.units`
turns a query's terms into *units*, each a list of (term id, similarity)
candidates; :func:`unit_scores` scores documents through those candidates'
postings. :meth:`md_cg.textindex.TextIndex.similar` documents the rule.

Imports only numpy, rapidfuzz, :mod:`md_cg.script` and the standard library.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from rapidfuzz.distance import OSA
from rapidfuzz.utils import default_process

from .script import CJK_SPLIT_RE, fold_accents, is_cjk, nfkc, stem

__all__ = ["SimilarityKeys", "near_terms", "plain_query_terms", "unit_scores"]

#: A unit: the candidate (term id, similarity) pairs that stand for one query unit.
Unit = list[tuple[int, float]]


def padded_bigrams(word: str) -> set[str]:
    """Character bigrams of ``"\\x02" + word + "\\x03"``."""
    s = f"\x02{word}\x03"
    return {s[i : i + 2] for i in range(len(s) - 1)}


def plain_query_terms(query: str) -> list[str]:
    """Query terms when no analyzer is given: Snowball stems, CJK bigrams/characters."""
    s = default_process(nfkc(query))
    out: list[str] = []
    for i, part in enumerate(CJK_SPLIT_RE.split(s)):
        if i % 2:
            out += [part[j : j + 2] for j in range(len(part) - 1)] or [part]
        else:
            out += [stem(fold_accents(w.casefold())) for w in part.split()]
    return out


class SimilarityKeys:
    """Key (padded bigram, or CJK character) -> ids of the vocabulary terms having it."""

    __slots__ = ("_built", "_keys", "_last", "_nbg")

    def __init__(self) -> None:
        self._keys: dict[str, array] = {}
        self._nbg = array("i")  # term id -> number of padded bigrams (0: CJK term)
        self._built = 0  # terms [0, _built) are in _keys
        self._last: tuple[str, tuple[object, ...], tuple[object, ...], list[Unit]] | None = None

    def reset(self) -> None:
        """Forget every key (after the vocabulary was renumbered)."""
        self._keys = {}
        self._nbg = array("i")
        self._built = 0
        self._last = None

    def remembered(
        self,
        query: str,
        sources: tuple[object, ...],
        shape: tuple[object, ...],
        work: Callable[[], list[Unit]],
    ) -> list[Unit]:
        """The units ``work`` gives for ``query``: those of the last call when it was for
        the same query, the same ``sources`` (the analyzer and the vocabulary, the very
        objects) and an equal ``shape`` (the vocabulary's size, which only grows until
        :meth:`reset`, and the parameters of :meth:`units`).

        A search asks for its query's units up to four times (each similarity tier, the
        ideal score of its evidence, its typos), which worked them out each time before
        session 39 (on a store of 10,000 memories 0.05 ms at the median for a typed query,
        1.4 ms for 2,000 pasted words, 8 ms for 3,000 CJK characters)."""
        last = self._last
        if (
            last is not None
            and last[0] == query
            and last[2] == shape
            and all(a is b for a, b in zip(last[1], sources, strict=True))
        ):
            return last[3]
        units = work()
        self._last = (query, sources, shape, units)
        return units

    def _update(self, terms: Sequence[str]) -> None:
        """Extend the key map to the terms added since the last call."""
        keys = self._keys
        nbg = self._nbg
        for tid in range(self._built, len(terms)):
            term = terms[tid]
            if is_cjk(term):
                nbg.append(0)
                grams: Iterable[str] = set(term)
            else:
                grams = padded_bigrams(term)
                nbg.append(len(grams))
            for g in grams:
                arr = keys.get(g)
                if arr is None:
                    keys[g] = arr = array("i")
                arr.append(tid)
        self._built = len(terms)

    def units(
        self,
        qterms: Iterable[str],
        vocab: dict[str, int],
        terms: Sequence[str],
        *,
        threshold: float,
        candidates: int,
        words: int,
    ) -> list[Unit]:
        """Per query unit, its candidate (term id, similarity) pairs.

        ``vocab`` maps terms to ids and ``terms`` ids to terms; ``threshold``
        is the least Dice coefficient of a similar term, ``candidates`` the
        most similar terms kept per unknown word, ``words`` the most unknown
        words looked up (the first ones; the rest resemble nothing, which
        bounds the cost of a pasted document). A unit nothing in the
        vocabulary resembles is an empty list (it scores nothing, but counts
        in :meth:`md_cg.textindex.TextIndex.similarity_ideal`).
        """
        units: list[Unit] = []
        seen: set[str] = set()
        seen_chars: set[str] = set()
        chars: list[str] = []
        unknown: list[str] = []
        for q in qterms:
            if not q or q in seen:
                continue
            seen.add(q)
            if is_cjk(q):
                chars += [c for c in q if c not in seen_chars]
                seen_chars.update(q)
                if len(q) > 1 and q in vocab:
                    units.append([(vocab[q], 1.0)])
            elif q in vocab:
                units.append([(vocab[q], 1.0)])
            else:
                unknown.append(q)
        if (unknown or any(c not in vocab for c in chars)) and self._built < len(terms):
            self._update(terms)
        for c in chars:
            tid = vocab.get(c)
            if tid is not None:
                units.append([(tid, 1.0)])
            elif c in self._keys:
                units.append([(t, 1.0 / len(terms[t])) for t in self._keys[c].tolist()])
            else:
                units.append([])
        for q in unknown[:words]:
            units.append(self._similar_words(q, terms, threshold, candidates))
        units += [[] for _ in unknown[words:]]
        return units

    def _similar_words(self, q: str, terms: Sequence[str], threshold: float, candidates: int) -> Unit:
        """The vocabulary terms whose padded bigrams are similar to those of ``q``."""
        grams = padded_bigrams(q)
        lists = [self._keys[g] for g in grams if g in self._keys]
        if not lists:
            return []
        nbg = np.frombuffer(self._nbg, dtype=np.int32)
        cand = np.concatenate([np.frombuffer(a, dtype=np.int32) for a in lists])
        tids, shared = np.unique(cand, return_counts=True)
        dice = 2.0 * shared / (len(grams) + nbg[tids])
        hit = np.flatnonzero(dice >= threshold)
        best = sorted(
            zip(dice[hit].tolist(), tids[hit].tolist(), strict=True),
            key=lambda p: (-p[0], terms[p[1]]),
        )[:candidates]
        return [(t, d) for d, t in best]


def unit_scores(
    units: Sequence[Unit],
    slot_of: dict[int, int],
    term_idx: np.ndarray,
    docs: np.ndarray,
    idf: np.ndarray,
    n_slots: int,
) -> np.ndarray:
    """Per slot, the sum over units of the best ``sim * idf`` among the unit's terms it has.

    ``slot_of`` maps a term id to its position in the gathered postings
    (``term_idx``, ``docs``) and in ``idf``.
    """
    # A unit with one candidate term adds sim * idf to each of its documents;
    # a unit with several adds, per document, the best one.
    single_w = np.zeros(len(slot_of), dtype=np.float64)
    docs_parts: list[np.ndarray] = []
    w_parts: list[np.ndarray] = []
    for unit in units:
        if len(unit) == 1:
            tid, sim = unit[0]
            single_w[slot_of[tid]] += sim * idf[slot_of[tid]]
            continue
        sim_of = np.zeros(len(slot_of), dtype=np.float64)
        for tid, sim in unit:
            sim_of[slot_of[tid]] = sim * idf[slot_of[tid]]
        w = sim_of[term_idx]
        sel = np.flatnonzero(w > 0)
        if len(sel) == 0:
            continue
        d, w = docs[sel], w[sel]
        order = np.lexsort((-w, d))  # by document, best weight first
        d, w = d[order], w[order]
        first = np.empty(len(d), dtype=bool)
        first[0] = True
        np.not_equal(d[1:], d[:-1], out=first[1:])
        docs_parts.append(d[first])
        w_parts.append(w[first])
    if single_w.any():
        w = single_w[term_idx]
        sel = np.flatnonzero(w > 0)
        docs_parts.append(docs[sel])
        w_parts.append(w[sel])
    if not docs_parts:
        return np.zeros(n_slots, dtype=np.float64)
    return np.bincount(np.concatenate(docs_parts), weights=np.concatenate(w_parts), minlength=n_slots)


def typos_allowed(word: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) a typo of ``word`` (a
    stem) may make: none for three letters or fewer (one edit makes another word of
    them: "eat" -> "nat"), one up to six letters, else two."""
    return 0 if len(word) <= 3 else 1 if len(word) <= 6 else 2


def within_a_typo(word: str, term: str) -> bool:
    """Whether ``term`` (a stem in the vocabulary) is ``word`` with a typo: the word, or
    its start as long as the stem give or take two letters (a typo in the suffix keeps the
    stemmer from cutting it: "externalties" is not stemmed to "extern"), within
    :func:`typos_allowed` edits (optimal string alignment)."""
    allowed = typos_allowed(word)
    if allowed == 0:
        return False
    # Only a start within ``allowed`` letters of the term's length can be within that
    # many edits of it; the whole word is one of those starts when it can be.
    lengths = range(max(1, len(term) - allowed), min(len(word), len(term) + allowed) + 1)
    return any(OSA.distance(word[:n], term, score_cutoff=allowed) <= allowed for n in lengths)


def near_terms(words: Sequence[str], units: Sequence[Unit], terms: Sequence[str]) -> list[str]:
    """The similar (not equal) candidate terms of ``units`` within a typo of one of
    ``words`` (:func:`within_a_typo`), sorted: what separates a misspelt word ("binery"
    -> "binari") from one that merely shares letters ("tomato" -> "plato", three edits)."""
    candidates = {terms[tid] for unit in units for tid, sim in unit if sim < 1.0}
    return sorted(t for t in candidates if any(within_a_typo(w, t) for w in words))
