"""An in-memory BM25 index over analysed text, with a bigram-similarity fallback.

Documents are string ids carrying their terms (from :func:`md_cg.text.analyze`),
two small integer codes (``layer``, ``bucket``) that define search scopes, and
a ``prior`` (the node's importance) that only breaks ties.

Two ways to find documents:

* :meth:`TextIndex.match` -- Okapi BM25 over the documents some query term
  occurs in (search tiers T0/T2). Every matching document in scope is scored
  before the result is cut to ``k``.
* :meth:`TextIndex.similar` -- character-similarity fallback for text that no
  term matches (tiers T1/T3): query words are compared with the vocabulary
  through a padded-bigram -> term map, CJK characters through their unigram
  terms (or the vocabulary terms containing them), and documents are scored
  through those terms' postings. It returns ``min(k, documents in scope)``
  results, so a non-empty scope never answers empty.

Layout: postings live in immutable CSR *segments* (sorted term ids, offsets,
document slots, term frequencies). :meth:`~TextIndex.add` appends term ids to
a pending buffer; the buffer becomes a segment when a query needs it or when
it reaches 2^18 occurrences, and every 8 segments of one size tier
(``floor(log8(postings))``) are merged into one, so a posting is merged
O(log n) times and adding costs amortised O(terms). Removing or replacing a
document leaves a dead slot; once a quarter of the slots are dead (and at
:meth:`~TextIndex.to_bytes`) a compaction renumbers the live slots and drops
unused terms, without re-sorting postings.

Not thread-safe: reads may flush, merge or compact internal state, so callers
serialise every call (one lock around the index).

Imports only numpy, rapidfuzz, PyStemmer and the standard library.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import struct
import threading
import unicodedata
import zlib
from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import Stemmer
from rapidfuzz.utils import default_process

__all__ = [
    "DEFAULT_B",
    "DEFAULT_K1",
    "SIMILAR_CANDIDATES",
    "SIMILAR_THRESHOLD",
    "Scope",
    "TextIndex",
]

#: BM25 term-frequency saturation (chosen on the dev splits, docs/ranking.md).
DEFAULT_K1 = 0.6
#: BM25 length normalisation (chosen on the dev splits, docs/ranking.md).
DEFAULT_B = 0.4
#: Minimum Dice coefficient of padded character bigrams for a vocabulary term
#: to count as similar to a query word in :meth:`TextIndex.similar`.
SIMILAR_THRESHOLD = 0.5
#: At most this many similar vocabulary terms stand in for an unknown query word.
SIMILAR_CANDIDATES = 20

_CJK_CHARS = (
    "\u3005-\u3007\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\u1100-\u11ff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_CJK_RE = re.compile(f"[{_CJK_CHARS}]")
_CJK_SPLIT_RE = re.compile(f"([{_CJK_CHARS}]+)")
_CYRILLIC_RE = re.compile("[\u0400-\u04ff]")

_MAGIC = b"MDCGTIX1"
_PENDING_MAX = 1 << 18  # term occurrences buffered before they become a segment
_MERGE_WIDTH = 8  # segments of one tier merged at once; tier = floor(log8(postings))
_MERGE_MAX = 1 << 24  # postings above which automatic merging stops
_COMPACT_MIN_DEAD = 1024
_SCOPE_CACHE = 16
_TIE_PYTHON = 2048  # larger ties on (score, prior) are ordered through a cached id rank
_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_U16 = np.zeros(0, dtype=np.uint16)


@dataclass(frozen=True)
class Scope:
    """A selection of documents: layer in ``layers`` AND bucket in ``buckets``.

    ``None`` means any. Obtain one from :meth:`TextIndex.scope`; it stays
    valid while the index changes (membership is evaluated when used).
    """

    layers: frozenset[int] | None = None
    buckets: frozenset[int] | None = None


# ------------------------------------------------------------------ segments


#: Top-k queries over fewer postings than this are scored exhaustively.
_PRUNE_MIN_POSTINGS = 20_000


class _Segment:
    """Immutable postings: term ``terms[i]`` is in slots ``docs[ptr[i]:ptr[i+1]]``."""

    __slots__ = ("docs", "ptr", "terms", "tfs")

    def __init__(self, terms: np.ndarray, ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray):
        self.terms = terms  # int32, strictly increasing
        self.ptr = ptr  # int64, len(terms) + 1, strictly increasing
        self.docs = docs  # int32, increasing within a term
        self.tfs = tfs  # uint16, >= 1

    @property
    def nnz(self) -> int:
        return len(self.docs)

    @classmethod
    def from_postings(cls, terms: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> _Segment:
        """Build from one (term, doc, tf) row per posting, sorted by (term, doc)."""
        if len(terms) == 0:
            return cls(_EMPTY_I32, np.zeros(1, np.int64), _EMPTY_I32, _EMPTY_U16)
        first = np.empty(len(terms), dtype=bool)
        first[0] = True
        np.not_equal(terms[1:], terms[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        ptr = np.empty(len(starts) + 1, dtype=np.int64)
        ptr[:-1] = starts
        ptr[-1] = len(terms)
        return cls(
            terms[starts].astype(np.int32),
            ptr,
            docs.astype(np.int32, copy=False),
            tfs.astype(np.uint16, copy=False),
        )

    def renumbered(self, slot_map: np.ndarray) -> _Segment:
        """This segment with slots mapped through ``slot_map`` (-1 drops a posting).

        ``slot_map`` is increasing on the slots it keeps, so the (term, doc)
        order survives without a sort; terms left without postings go.
        """
        docs = slot_map[self.docs]
        live = docs >= 0
        if live.all():
            return _Segment(self.terms, self.ptr, docs.astype(np.int32), self.tfs)
        counts = np.add.reduceat(live.astype(np.int64), self.ptr[:-1])
        used = counts > 0
        ptr = np.zeros(int(np.count_nonzero(used)) + 1, dtype=np.int64)
        np.cumsum(counts[used], out=ptr[1:])
        return _Segment(self.terms[used], ptr, docs[live].astype(np.int32), self.tfs[live])


def _tier(nnz: int) -> int:
    return max(0, nnz.bit_length() - 1) // 3


def _merge(segments: Sequence[_Segment]) -> _Segment:
    """One segment with the postings of ``segments`` (older first, disjoint slots)."""
    terms = np.concatenate([np.repeat(s.terms, np.diff(s.ptr)) for s in segments])
    docs = np.concatenate([s.docs for s in segments])
    tfs = np.concatenate([s.tfs for s in segments])
    # Each segment is sorted by (term, doc) and an older one holds lower
    # slots, so a stable sort by term (timsort: a k-way merge of the runs)
    # gives (term, doc) order.
    order = np.argsort(terms, kind="stable")
    return _Segment.from_postings(terms[order], docs[order], tfs[order])


class _Vocab(dict[str, int]):
    """term -> id; an unseen term gets the next id on lookup."""

    def __init__(self, terms: list[str] | None = None) -> None:
        super().__init__()
        self.terms: list[str] = terms if terms is not None else []
        if terms:
            self.update(zip(terms, range(len(terms)), strict=True))

    def __missing__(self, term: str) -> int:
        if not isinstance(term, str) or "\x00" in term:
            raise ValueError(f"a term must be a str without NUL, not {term!r}")
        tid = len(self.terms)
        self.terms.append(term)
        self[term] = tid
        return tid


# ---------------------------------------------------------------- similarity


def _padded_bigrams(word: str) -> set[str]:
    s = f"\x02{word}\x03"
    return {s[i : i + 2] for i in range(len(s) - 1)}


class _Stemmers(threading.local):
    """One PyStemmer object per thread (a stemmer object is not thread-safe)."""

    def __init__(self) -> None:
        self.english = Stemmer.Stemmer("english")
        self.russian = Stemmer.Stemmer("russian")


_STEMMERS = _Stemmers()


def _plain_query_terms(query: str) -> list[str]:
    """Query terms when no analyzer is given: Snowball stems, CJK bigrams/characters."""
    s = default_process(unicodedata.normalize("NFKC", query))
    out: list[str] = []
    for i, part in enumerate(_CJK_SPLIT_RE.split(s)):
        if i % 2:
            out += [part[j : j + 2] for j in range(len(part) - 1)] or [part]
        else:
            for w in part.split():
                stemmer = _STEMMERS.russian if _CYRILLIC_RE.search(w) else _STEMMERS.english
                out.append(stemmer.stemWord(w.casefold()))
    return out


# --------------------------------------------------------------------- index


class TextIndex:
    """BM25 over string-identified documents with layer/bucket scopes.

    ``k1``/``b``: BM25 parameters (defaults chosen on the dev splits).
    ``analyzer``: turns the query string of :meth:`similar` into terms; the
    engine passes :func:`md_cg.text.query_terms` so that stopwords and
    question words are ignored. Without one, a plain analysis is used (NFKC,
    lower case, Snowball stems, CJK bigrams), which keeps stopwords.
    """

    def __init__(
        self,
        *,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        analyzer: Callable[[str], list[str]] | None = None,
    ) -> None:
        if not (math.isfinite(k1) and k1 >= 0 and 0 <= b <= 1):
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1 = float(k1)
        self.b = float(b)
        self.analyzer = analyzer or _plain_query_terms
        self._vocab = _Vocab()
        self._slot: dict[str, int] = {}  # live id -> slot
        self._ids: list[str | None] = []  # slot -> id (None: dead)
        self._len = np.zeros(64, dtype=np.int32)  # slot -> number of terms
        self._layer = np.zeros(64, dtype=np.int32)
        self._bucket = np.zeros(64, dtype=np.int32)
        self._prior = np.zeros(64, dtype=np.float64)
        self._alive = np.zeros(64, dtype=bool)
        self._live_len = 0  # total terms of live documents
        self._dead = 0
        self._segments: list[_Segment] = []
        self._pend_terms: list[int] = []
        self._pend_slots: list[int] = []
        self._pend_counts: list[int] = []
        self._version = 0  # bumped by every change that can alter a scope mask
        self._masks: dict[Scope, np.ndarray] = {}
        self._masks_version = -1
        self._generation = 0  # bumped when compaction renumbers the slots
        self._rank = np.zeros(0, dtype=np.int64)
        self._rank_key = (-1, -1)
        # similar(): key (padded bigram, or CJK character) -> ids of the terms having it
        self._sim_keys: dict[str, array] = {}
        self._sim_nbg = array("i")  # term id -> number of padded bigrams (0: CJK term)
        self._sim_built = 0  # terms [0, _sim_built) are in _sim_keys

    # -------------------------------------------------------------- writes

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot

    def add(
        self,
        doc_id: str,
        terms: Iterable[str],
        *,
        layer: int,
        bucket: int,
        prior: float = 0.5,
    ) -> None:
        """Index ``doc_id`` with ``terms`` (repeats count), replacing any earlier version.

        ``terms`` come from :func:`md_cg.text.analyze`; a document without
        terms is still in its scope (for :meth:`similar`'s fill).
        """
        if not isinstance(doc_id, str) or "\x00" in doc_id:
            raise ValueError(f"a document id must be a str without NUL, not {doc_id!r}")
        ids = list(map(self._vocab.__getitem__, terms))
        old = self._slot.pop(doc_id, None)
        if old is not None:
            self._kill(old)
        slot = len(self._ids)
        if slot == len(self._len):
            self._grow()
        n = len(ids)
        self._ids.append(doc_id)
        self._slot[doc_id] = slot
        self._len[slot] = n
        self._layer[slot] = layer
        self._bucket[slot] = bucket
        self._prior[slot] = prior
        self._alive[slot] = True
        self._live_len += n
        self._version += 1
        if n:
            self._pend_terms += ids
            self._pend_slots.append(slot)
            self._pend_counts.append(n)
            if len(self._pend_terms) >= _PENDING_MAX:
                self._flush()

    def remove(self, doc_id: str) -> bool:
        """Forget ``doc_id``; False when it was not indexed."""
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return False
        self._kill(slot)
        self._version += 1
        return True

    def set_meta(
        self,
        doc_id: str,
        *,
        layer: int | None = None,
        bucket: int | None = None,
        prior: float | None = None,
    ) -> None:
        """Change a document's codes or prior, keeping its terms (KeyError if absent)."""
        slot = self._slot[doc_id]
        if layer is not None:
            self._layer[slot] = layer
        if bucket is not None:
            self._bucket[slot] = bucket
        if prior is not None:
            self._prior[slot] = prior
        self._version += 1

    def compact(self) -> None:
        """Reclaim dead slots and drop terms no live document has.

        Runs by itself once a quarter of the slots (at least 1,024) are dead,
        and in :meth:`to_bytes`. O(postings), no sorting.
        """
        self._flush()
        n_old = len(self._ids)
        live_slots = np.flatnonzero(self._alive[:n_old])
        if self._dead:
            slot_map = np.full(n_old, -1, dtype=np.int64)
            slot_map[live_slots] = np.arange(len(live_slots))
            segments = [s.renumbered(slot_map) for s in self._segments]
            segments = [s for s in segments if s.nnz]
        else:
            segments = list(self._segments)
        used = np.zeros(len(self._vocab.terms), dtype=bool)
        for s in segments:
            used[s.terms] = True
        if not used.all():
            # Every term left in a segment has postings; renumber the used ones.
            term_map = (np.cumsum(used) - 1).astype(np.int32)
            segments = [_Segment(term_map[s.terms], s.ptr, s.docs, s.tfs) for s in segments]
            kept = np.flatnonzero(used).tolist()
            self._vocab = _Vocab([self._vocab.terms[t] for t in kept])
            self._sim_keys = {}
            self._sim_nbg = array("i")
            self._sim_built = 0
        self._segments = segments
        ids = [self._ids[s] for s in live_slots.tolist()]
        n = len(ids)
        cap = max(64, n + n // 4)
        for name in ("_len", "_layer", "_bucket", "_prior", "_alive"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[:n] = old[live_slots]
            setattr(self, name, new)
        self._ids = list(ids)
        self._slot = dict(zip(ids, range(n), strict=True))  # type: ignore[arg-type]
        self._dead = 0
        self._version += 1
        self._generation += 1

    # -------------------------------------------------------------- scopes

    def scope(
        self,
        layers: Collection[int] | None = None,
        buckets: Collection[int] | None = None,
    ) -> Scope:
        """Documents whose layer is in ``layers`` and bucket in ``buckets`` (None: any)."""
        return Scope(
            None if layers is None else frozenset(int(x) for x in layers),
            None if buckets is None else frozenset(int(x) for x in buckets),
        )

    def size(self, scope: Scope) -> int:
        """Number of documents in ``scope``."""
        return int(np.count_nonzero(self._mask(scope)))

    # ------------------------------------------------------------- queries

    def match(
        self,
        weighted_terms: Sequence[tuple[str, float]],
        scope: Scope,
        *,
        k: int | None,
        exclude: Collection[str] = (),
    ) -> list[tuple[str, float]]:
        """BM25 of every document in ``scope`` that contains a query term.

        ``weighted_terms``: (term, weight) pairs; a term's contribution is
        multiplied by its weight, the weights of a repeated term add up, and
        terms with weight <= 0 or unknown to the index are ignored. The score
        of document d is

            sum over terms t in d:  w_t * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

        with idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N, df and avgdl
        over all live documents (not just the scope), dl = the document's
        number of terms. Returns the best ``k`` (all when None) as
        (id, score) with score > 0, ordered by score desc, prior desc, id asc;
        every candidate is scored before the cut.
        """
        self._prepare()
        if k is not None and k <= 0:
            return []
        weights: dict[int, float] = {}
        for term, w in weighted_terms:
            tid = self._vocab.get(term)
            if tid is not None and w > 0:
                weights[tid] = weights.get(tid, 0.0) + float(w)
        if not weights:
            return []
        tids = list(weights)
        if k is not None and len(tids) > 1:
            top = self._match_top_k(tids, list(weights.values()), scope, k, exclude)
            if top is not None:
                return top
        term_idx, docs, tfs = self._gather(tids)
        idf = self._idf(term_idx, docs, len(tids))
        docs, keep = self._in_scope(docs, scope)
        if keep is not None:
            term_idx, tfs = term_idx[keep], tfs[keep]
        if len(docs) == 0:
            return []
        k1, b = self.k1, self.b
        coef = np.fromiter(weights.values(), dtype=np.float64, count=len(tids)) * idf * (k1 + 1.0)
        # contribution = coef[t] * tf / (tf + k1 * (1 - b) + k1 * b / avgdl * dl), in place
        tf = tfs.astype(np.float64)
        den = self._len[docs].astype(np.float64)
        den *= k1 * b * len(self._slot) / self._live_len
        den += k1 * (1.0 - b)
        den += tf
        contrib = np.divide(tf, den, out=tf)
        contrib *= coef[term_idx]
        # A document's contributions are summed in query-term order (it lives
        # in one segment), so equal documents get bit-equal scores.
        scores = np.bincount(docs, weights=contrib, minlength=len(self._ids))
        self._zero_excluded(scores, exclude)
        cand = np.flatnonzero(scores > 0)
        return self._ranked(cand, scores[cand], k)

    def _spans(self, tids: Sequence[int]) -> list[list[tuple[_Segment, int, int]]]:
        """Per term id: the (segment, start, stop) of its postings in each segment."""
        q = np.asarray(tids, dtype=np.int32)
        spans: list[list[tuple[_Segment, int, int]]] = [[] for _ in tids]
        for seg in self._segments:
            if len(seg.terms) == 0:
                continue
            pos = np.searchsorted(seg.terms, q)
            pos[pos >= len(seg.terms)] = 0
            for h in np.flatnonzero(seg.terms[pos] == q).tolist():
                p = int(pos[h])
                spans[h].append((seg, int(seg.ptr[p]), int(seg.ptr[p + 1])))
        return spans

    def _match_top_k(
        self,
        tids: list[int],
        weights: list[float],
        scope: Scope,
        k: int,
        exclude: Collection[str],
    ) -> list[tuple[str, float]] | None:
        """Exact top-k BM25 without scoring every posting of very common terms (MaxScore).

        A term's contribution to any document is below ``ub = w * idf * (k1 + 1)``.
        Terms are taken in decreasing ``ub``; the first ``m`` (*essential*)
        terms give the candidates and their partial scores. When the sum of
        the other terms' ``ub`` is below the k-th best partial score, no
        document lacking every essential term can reach the top k, so only
        the candidates are completed with the other terms (looked up by binary
        search in their postings, not gathered). Returns None when pruning
        does not pay (few postings, or the essential terms hold most of them):
        the caller then scores every posting. The result equals full scoring
        (up to floating-point summation order).
        """
        spans = self._spans(tids)
        lengths = np.array([sum(z - a for _, a, z in sp) for sp in spans], dtype=np.int64)
        total = int(lengths.sum())
        if total < _PRUNE_MIN_POSTINGS:
            return None
        if self._dead:
            alive = self._alive
            df = np.array(
                [sum(int(np.count_nonzero(alive[seg.docs[a:z]])) for seg, a, z in sp) for sp in spans],
                dtype=np.float64,
            )
        else:
            df = lengths.astype(np.float64)
        n = len(self._slot)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        idf[df == 0] = 0.0
        k1, b = self.k1, self.b
        coef = np.asarray(weights, dtype=np.float64) * idf * (k1 + 1.0)
        order = np.argsort(-coef, kind="stable").tolist()
        mask = self._mask(scope)
        norm = k1 * b * n / self._live_len
        base = k1 * (1.0 - b)
        lens = self._len
        excluded = np.array([s for s in map(self._slot.get, exclude) if s is not None], dtype=np.int64)
        docs_parts: list[np.ndarray] = []
        contrib_parts: list[np.ndarray] = []
        gathered = 0
        for m in range(1, len(order)):
            j = order[m - 1]  # the term that just became essential
            gathered += int(lengths[j])
            if gathered > total // 2:
                return None
            for seg, a, z in spans[j]:
                d = seg.docs[a:z]
                keep = mask[d]
                d = d[keep]
                tf = seg.tfs[a:z][keep].astype(np.float64)
                den = lens[d] * norm + base + tf
                docs_parts.append(d)
                contrib_parts.append(tf / den * coef[j])
            others = order[m:]
            rest = float(coef[others].sum())
            # A partial score never exceeds the essential terms' bounds together.
            if not docs_parts or rest >= float(coef[order[:m]].sum()):
                continue
            cand, inverse = np.unique(np.concatenate(docs_parts), return_inverse=True)
            score = np.bincount(inverse, weights=np.concatenate(contrib_parts), minlength=len(cand))
            if len(excluded):
                keep = ~np.isin(cand, excluded)
                cand, score = cand[keep], score[keep]
            if len(cand) < k:
                continue
            theta = float(np.partition(score, len(score) - k)[len(score) - k])
            if rest >= theta:
                continue
            # Complete the candidates' scores through a slot -> candidate map.
            position = np.full(len(self._ids), -1, dtype=np.int32)
            position[cand] = np.arange(len(cand), dtype=np.int32)
            for j in others:
                for seg, a, z in spans[j]:
                    where = position[seg.docs[a:z]]
                    hit = np.flatnonzero(where >= 0)
                    if len(hit) == 0:
                        continue
                    at = where[hit]
                    tf = seg.tfs[a:z][hit].astype(np.float64)
                    den = lens[cand[at]] * norm + base + tf
                    score[at] += tf / den * coef[j]
            positive = score > 0
            return self._ranked(cand[positive].astype(np.int64), score[positive], k)
        return None

    def similar(
        self,
        query: str,
        scope: Scope,
        *,
        k: int,
        exclude: Collection[str] = (),
    ) -> list[tuple[str, float]]:
        """Character-similarity ranking of the documents in ``scope``.

        The analyzer's terms of ``query`` give the *units*: each distinct
        non-CJK term; each distinct CJK character of the CJK terms; each
        distinct CJK bigram. A unit's candidate vocabulary terms t and their
        similarity sim:

        * non-CJK term q in the vocabulary: q itself, sim 1.0;
        * non-CJK term q not in the vocabulary (a typo, an inflection the
          stemmer missed): the non-CJK terms t whose padded character bigrams
          (of ``"\x02" + t + "\x03"``) have a Dice coefficient
          2|B(q) & B(t)| / (|B(q)| + |B(t)|) >= 0.5 with q's, at most the 20
          most similar (ties by term); sim = that coefficient.
          "binery" -> "binari" is 5/7;
        * CJK character c: the unigram term c when the vocabulary has it
          (sim 1.0); otherwise every CJK term containing c, sim = 1 / len(t);
        * CJK bigram: that term only, sim 1.0.

        score(d) = sum over units of max over d's candidate terms of
        sim * idf(t), with the BM25 idf over live documents; term frequency
        and document length are ignored.

        Returns exactly min(k, documents in scope not excluded) pairs
        (id, score): positive scores first (score desc, prior desc, id asc),
        then zero-score documents (prior desc, id asc).
        """
        self._prepare()
        if k <= 0:
            return []
        mask = self._mask(scope)
        units = self._similar_units(self.analyzer(query))
        slot_of: dict[int, int] = {}
        for unit in units:
            for tid, _ in unit:
                slot_of.setdefault(tid, len(slot_of))
        term_idx, docs, _ = self._gather(list(slot_of))
        idf = self._idf(term_idx, docs, len(slot_of))
        docs, keep = self._in_scope(docs, scope)
        if keep is not None:
            term_idx = term_idx[keep]
        # A unit with one candidate term adds sim * idf to each of its
        # documents; a unit with several adds, per document, the best one.
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
        if docs_parts:
            scores = np.bincount(
                np.concatenate(docs_parts),
                weights=np.concatenate(w_parts),
                minlength=len(self._ids),
            )
        else:
            scores = np.zeros(len(self._ids), dtype=np.float64)
        excluded = self._zero_excluded(scores, exclude)
        positive = np.flatnonzero(scores > 0)
        result = self._ranked(positive, scores[positive], k)
        if len(result) < k:
            rest = mask.copy()
            rest[positive] = False
            if excluded is not None:
                rest[excluded] = False
            zero = np.flatnonzero(rest)
            result += self._ranked(zero, np.zeros(len(zero)), k - len(result))
        return result

    # --------------------------------------------------------- persistence

    def to_bytes(self) -> bytes:
        """A compact binary image of the index (compacts the index first).

        Layout: magic ``MDCGTIX1``, a little-endian u32 header length, a JSON
        header (k1, b, counts, array table), 8-byte aligned numpy arrays
        (per segment: term ids, offsets, slots, frequencies; per document:
        length, layer, bucket, prior; NUL-joined UTF-8 ids and vocabulary),
        and a CRC-32 of everything before it.
        """
        self.compact()
        n = len(self._ids)
        arrays: list[np.ndarray] = []
        for s in self._segments:
            arrays += [s.terms, s.ptr, s.docs, s.tfs]
        arrays += [self._len[:n], self._layer[:n], self._bucket[:n], self._prior[:n]]
        arrays.append(np.frombuffer("\x00".join(self._ids).encode(), dtype=np.uint8))  # type: ignore[arg-type]
        arrays.append(np.frombuffer("\x00".join(self._vocab.terms).encode(), dtype=np.uint8))
        header = {
            "k1": self.k1,
            "b": self.b,
            "n_docs": n,
            "n_terms": len(self._vocab.terms),
            "n_segments": len(self._segments),
            "arrays": [[a.dtype.str, len(a)] for a in arrays],
        }
        head = json.dumps(header).encode()
        parts: list[bytes | memoryview] = [_MAGIC, struct.pack("<I", len(head)), head]
        pos = len(_MAGIC) + 4 + len(head)
        for a in arrays:
            pad = -pos % 8
            parts.append(b"\x00" * pad)
            data = memoryview(np.ascontiguousarray(a)).cast("B")
            parts.append(data)
            pos += pad + len(data)
        crc = 0
        for part in parts:
            crc = zlib.crc32(part, crc)
        parts.append(struct.pack("<I", crc))
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, *, analyzer: Callable[[str], list[str]] | None = None) -> TextIndex:
        """Load an image written by :meth:`to_bytes`; ValueError when ``data`` is not one.

        Postings are zero-copy views of ``data``.
        """
        try:
            return cls._load(bytes(data), analyzer)
        except ValueError:
            raise
        except (KeyError, TypeError, IndexError, struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"corrupt text index: {exc!r}") from None

    @classmethod
    def _load(cls, data: bytes, analyzer: Callable[[str], list[str]] | None) -> TextIndex:
        if len(data) < len(_MAGIC) + 8 or data[: len(_MAGIC)] != _MAGIC:
            raise ValueError("not a text index image (bad magic)")
        (crc,) = struct.unpack_from("<I", data, len(data) - 4)
        if zlib.crc32(memoryview(data)[:-4]) != crc:
            raise ValueError("corrupt text index image (checksum mismatch)")
        (head_len,) = struct.unpack_from("<I", data, len(_MAGIC))
        pos = len(_MAGIC) + 4
        header = json.loads(data[pos : pos + head_len])
        pos += head_len
        arrays: list[np.ndarray] = []
        for dtype, count in header["arrays"]:
            pos += -pos % 8
            dt = np.dtype(dtype)
            if dt.kind not in "iuf" or int(count) < 0:
                raise ValueError("corrupt text index image (array table)")
            end = pos + dt.itemsize * int(count)
            if end > len(data) - 4:
                raise ValueError("corrupt text index image (truncated)")
            arrays.append(np.frombuffer(data, dtype=dt, count=int(count), offset=pos))
            pos = end
        n, n_terms, n_seg = int(header["n_docs"]), int(header["n_terms"]), int(header["n_segments"])
        if len(arrays) != 4 * n_seg + 6:
            raise ValueError("corrupt text index image (array count)")
        segments = [_Segment(*arrays[4 * i : 4 * i + 4]) for i in range(n_seg)]
        doc_len, layer, bucket, prior, id_blob, term_blob = arrays[4 * n_seg :]
        ids = id_blob.tobytes().decode().split("\x00") if n else []
        terms = term_blob.tobytes().decode().split("\x00") if n_terms else []
        if len(ids) != n or len(set(ids)) != n or len(terms) != n_terms:
            raise ValueError("corrupt text index image (id or vocabulary table)")
        if any(len(a) != n for a in (doc_len, layer, bucket, prior)):
            raise ValueError("corrupt text index image (document tables)")
        for s in segments:
            _check_segment(s, n, n_terms)
        index = cls(k1=header["k1"], b=header["b"], analyzer=analyzer)
        index._vocab = _Vocab(terms)
        if len(index._vocab) != n_terms:
            raise ValueError("corrupt text index image (duplicate terms)")
        index._ids = list(ids)
        index._slot = dict(zip(ids, range(n), strict=True))
        cap = max(64, n + n // 4)
        for name, src in (("_len", doc_len), ("_layer", layer), ("_bucket", bucket), ("_prior", prior)):
            arr = np.zeros(cap, dtype=getattr(index, name).dtype)
            arr[:n] = src
            setattr(index, name, arr)
        index._alive = np.zeros(cap, dtype=bool)
        index._alive[:n] = True
        index._live_len = int(doc_len.sum(dtype=np.int64))
        index._segments = segments
        return index

    # ----------------------------------------------------------- internals

    def _grow(self) -> None:
        cap = len(self._len) * 2
        for name in ("_len", "_layer", "_bucket", "_prior", "_alive"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _kill(self, slot: int) -> None:
        self._alive[slot] = False
        self._live_len -= int(self._len[slot])
        self._ids[slot] = None
        self._dead += 1

    def _flush(self) -> None:
        """Turn the pending buffer into a segment; merge full tiers."""
        if not self._pend_counts:
            return
        terms = np.array(self._pend_terms, dtype=np.int64)
        slots = np.repeat(
            np.array(self._pend_slots, dtype=np.int64),
            np.array(self._pend_counts, dtype=np.int64),
        )
        self._pend_terms = []
        self._pend_slots = []
        self._pend_counts = []
        key = (terms << 32) | slots
        key.sort()
        first = np.empty(len(key), dtype=bool)
        first[0] = True
        np.not_equal(key[1:], key[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        tfs = np.diff(starts, append=len(key))
        np.minimum(tfs, 0xFFFF, out=tfs)
        key = key[starts]
        segs = self._segments
        segs.append(_Segment.from_postings(key >> 32, key & 0xFFFFFFFF, tfs))
        # Merge the last 8 segments while the 8th-last is not of a higher tier
        # than the last: tiers then decrease along the list, at most 7
        # segments per tier remain, and a posting is merged O(log n) times.
        while (
            len(segs) >= _MERGE_WIDTH
            and _tier(segs[-_MERGE_WIDTH].nnz) <= _tier(segs[-1].nnz)
            and sum(s.nnz for s in segs[-_MERGE_WIDTH:]) <= _MERGE_MAX
        ):
            segs[-_MERGE_WIDTH:] = [_merge(segs[-_MERGE_WIDTH:])]

    def _prepare(self) -> None:
        """Make postings queryable: flush pending adds; compact when many slots are dead."""
        if self._dead >= max(_COMPACT_MIN_DEAD, len(self._ids) // 4):
            self.compact()
        elif self._pend_counts:
            self._flush()

    def _gather(self, tids: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All postings of the term ids ``tids``, dead slots included.

        Returns parallel arrays: index into ``tids`` (int64), slot (int64) and
        term frequency (uint16); per segment, terms in ``tids`` order.
        """
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        q = np.asarray(tids, dtype=np.int32)
        for seg in self._segments if len(q) else ():
            if len(seg.terms) == 0:
                continue
            pos = np.searchsorted(seg.terms, q)
            pos[pos >= len(seg.terms)] = 0
            hit = np.flatnonzero(seg.terms[pos] == q)
            if len(hit) == 0:
                continue
            lo = seg.ptr[pos[hit]]
            hi = seg.ptr[pos[hit] + 1]
            lengths = hi - lo
            if len(hit) <= 16:  # few terms: concatenate slices
                spans = list(zip(lo.tolist(), hi.tolist(), strict=True))
                docs = np.concatenate([seg.docs[a:z] for a, z in spans], dtype=np.int64)
                tfs = np.concatenate([seg.tfs[a:z] for a, z in spans])
            else:  # many terms: positions of all their postings, one gather
                at = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
                at += np.arange(len(at))
                docs, tfs = seg.docs[at].astype(np.int64), seg.tfs[at]
            parts.append((np.repeat(hit, lengths), docs, tfs))
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, _EMPTY_U16
        if len(parts) == 1:
            return parts[0]
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )

    def _idf(self, term_idx: np.ndarray, docs: np.ndarray, n_terms: int) -> np.ndarray:
        """BM25 idf of each gathered term over the live documents (0 when none has it)."""
        if self._dead:
            df = np.bincount(term_idx, weights=self._alive[docs], minlength=n_terms)
        else:
            df = np.bincount(term_idx, minlength=n_terms).astype(np.float64)
        n = len(self._slot)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        idf[df == 0] = 0.0
        return idf

    def _in_scope(self, docs: np.ndarray, scope: Scope) -> tuple[np.ndarray, np.ndarray | None]:
        """``docs`` restricted to live documents in ``scope``, and the selection used."""
        if self._dead == 0 and scope.layers is None and scope.buckets is None:
            return docs, None
        keep = self._mask(scope)[docs]
        return docs[keep], keep

    def _mask(self, scope: Scope) -> np.ndarray:
        """Boolean mask over slots: alive and in ``scope`` (cached until the index changes)."""
        if self._masks_version != self._version:
            self._masks.clear()
            self._masks_version = self._version
        mask = self._masks.get(scope)
        if mask is None:
            n = len(self._ids)
            mask = self._alive[:n].copy()
            if scope.layers is not None:
                mask &= np.isin(self._layer[:n], list(scope.layers))
            if scope.buckets is not None:
                mask &= np.isin(self._bucket[:n], list(scope.buckets))
            if len(self._masks) >= _SCOPE_CACHE:
                self._masks.clear()
            self._masks[scope] = mask
        return mask

    def _zero_excluded(self, scores: np.ndarray, exclude: Collection[str]) -> np.ndarray | None:
        if not exclude:
            return None
        slots = [s for s in map(self._slot.get, exclude) if s is not None]
        if not slots:
            return None
        idx = np.array(slots, dtype=np.int64)
        scores[idx] = 0.0
        return idx

    def _ranked(self, cand: np.ndarray, score: np.ndarray, k: int | None) -> list[tuple[str, float]]:
        """(id, score) of slots ``cand``: score desc, prior desc, id asc; the first ``k``."""
        if len(cand) == 0:
            return []
        prior = self._prior[cand]
        if k is not None and len(cand) > k:
            # Keep only what can reach the top k: scores above the k-th best,
            # and of those equal to it, the priors down to the last one needed.
            kth = np.partition(score, len(score) - k)[len(score) - k]
            at = score == kth
            need = k - int(np.count_nonzero(score > kth))
            prior_at = prior[at]
            cut = np.partition(prior_at, len(prior_at) - need)[len(prior_at) - need]
            keep = (score > kth) | (at & (prior >= cut))
            cand, score, prior = cand[keep], score[keep], prior[keep]
        order = np.lexsort((-prior, -score))
        cand, score, prior = cand[order], score[order], prior[order]
        n = len(cand)
        limit = n if k is None else min(k, n)
        # Runs of equal (score, prior) are ordered by id.
        bounds = np.flatnonzero((score[1:] != score[:-1]) | (prior[1:] != prior[:-1])) + 1
        ids = self._ids
        out: list[tuple[str, float]] = []
        start = 0
        for end in [*bounds.tolist(), n]:
            need = limit - len(out)
            if need <= 0:
                break
            value = float(score[start])
            if end - start == 1:
                out.append((ids[int(cand[start])], value))  # type: ignore[arg-type]
            elif end - start <= _TIE_PYTHON:
                group: list[str] = [ids[s] for s in cand[start:end].tolist()]  # type: ignore[misc]
                best = sorted(group) if need >= len(group) else heapq.nsmallest(need, group)
                out += [(d, value) for d in best[:need]]
            else:
                slots = cand[start:end]
                rank = self._id_rank()[slots]
                if need < len(slots):
                    pick = np.argpartition(rank, need - 1)[:need]
                    slots, rank = slots[pick], rank[pick]
                out += [(ids[s], value) for s in slots[np.argsort(rank)].tolist()]  # type: ignore[misc]
            start = end
        return out

    def _id_rank(self) -> np.ndarray:
        """Rank of every slot's id in id order (dead slots first); cached per slot layout."""
        key = (self._generation, len(self._ids))
        if self._rank_key != key:
            ids = self._ids
            order = sorted(range(len(ids)), key=lambda s: ids[s] or "")
            rank = np.empty(len(ids), dtype=np.int64)
            rank[order] = np.arange(len(ids))
            self._rank, self._rank_key = rank, key
        return self._rank

    def _sim_update(self) -> None:
        """Extend the similarity key map to the terms added since the last call."""
        terms = self._vocab.terms
        keys = self._sim_keys
        nbg = self._sim_nbg
        for tid in range(self._sim_built, len(terms)):
            term = terms[tid]
            if _CJK_RE.match(term):
                nbg.append(0)
                grams: Iterable[str] = set(term)
            else:
                grams = _padded_bigrams(term)
                nbg.append(len(grams))  # type: ignore[arg-type]
            for g in grams:
                arr = keys.get(g)
                if arr is None:
                    keys[g] = arr = array("i")
                arr.append(tid)
        self._sim_built = len(terms)

    def _similar_units(self, qterms: Iterable[str]) -> list[list[tuple[int, float]]]:
        """Per query unit, its candidate (term id, similarity) pairs (see :meth:`similar`)."""
        vocab = self._vocab
        units: list[list[tuple[int, float]]] = []
        seen: set[str] = set()
        seen_chars: set[str] = set()
        chars: list[str] = []
        words: list[str] = []
        for q in qterms:
            if not q or q in seen:
                continue
            seen.add(q)
            if _CJK_RE.match(q):
                chars += [c for c in q if c not in seen_chars]
                seen_chars.update(q)
                if len(q) > 1 and q in vocab:
                    units.append([(vocab[q], 1.0)])
            elif q in vocab:
                units.append([(vocab[q], 1.0)])
            else:
                words.append(q)
        if (words or any(c not in vocab for c in chars)) and self._sim_built < len(vocab.terms):
            self._sim_update()
        for c in chars:
            tid = vocab.get(c)
            if tid is not None:
                units.append([(tid, 1.0)])
            elif c in self._sim_keys:
                terms = self._sim_keys[c].tolist()
                units.append([(t, 1.0 / len(vocab.terms[t])) for t in terms])
        if not words:
            return units
        nbg = np.frombuffer(self._sim_nbg, dtype=np.int32)
        for q in words:
            grams = _padded_bigrams(q)
            lists = [self._sim_keys[g] for g in grams if g in self._sim_keys]
            if not lists:
                continue
            cand = np.concatenate([np.frombuffer(a, dtype=np.int32) for a in lists])
            tids, shared = np.unique(cand, return_counts=True)
            dice = 2.0 * shared / (len(grams) + nbg[tids])
            hit = np.flatnonzero(dice >= SIMILAR_THRESHOLD)
            best = sorted(
                zip(dice[hit].tolist(), tids[hit].tolist(), strict=True),
                key=lambda p: (-p[0], vocab.terms[p[1]]),
            )[:SIMILAR_CANDIDATES]
            if best:
                units.append([(t, d) for d, t in best])
        return units


def _check_segment(seg: _Segment, n_docs: int, n_terms: int) -> None:
    """Structural checks of a loaded segment (the checksum catches random damage)."""
    ptr, terms, docs = seg.ptr, seg.terms, seg.docs
    if (
        ptr.dtype != np.int64
        or terms.dtype != np.int32
        or docs.dtype != np.int32
        or seg.tfs.dtype != np.uint16
        or len(ptr) != len(terms) + 1
        or ptr[0] != 0
        or ptr[-1] != len(docs)
        or len(seg.tfs) != len(docs)
        or np.any(np.diff(ptr) <= 0)
    ):
        raise ValueError("corrupt text index image (posting offsets)")
    if len(terms) and (np.any(np.diff(terms) <= 0) or terms[0] < 0 or terms[-1] >= n_terms):
        raise ValueError("corrupt text index image (term ids)")
    if len(docs) and (docs.min() < 0 or docs.max() >= n_docs):
        raise ValueError("corrupt text index image (document slots)")
