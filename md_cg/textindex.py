"""An in-memory BM25 index over analysed text, with a bigram-similarity fallback.

Documents are string ids carrying their terms (from :func:`md_cg.text.analyze`),
two small integer codes (``layer``, ``bucket``) that define search scopes, and
a ``prior`` (the node's importance) and ``changed`` (the time of its last
change) that only break ties: importance first, then the most recently changed.

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

The index is put together from four rooms: the postings and vocabulary
(:mod:`md_cg.textindex_postings`: immutable CSR segments, a pending buffer,
tiered merging), the document table (:mod:`md_cg.textindex_docs`: slots,
scopes, idf, result order), the similarity keys
(:mod:`md_cg.textindex_similar`) and the binary image
(:mod:`md_cg.textindex_codec`). This module holds the BM25 scoring and ties
them together.

Documents fall into two classes, CJK text and the rest, and in a store
holding both each class keeps its own BM25 statistics, so a Chinese memory
added to an English store does not move English rankings
(:meth:`TextIndex.match`). Removing or replacing a document leaves a dead
slot; once a quarter of the slots are dead (and at
:meth:`~TextIndex.to_bytes`) a compaction renumbers the live slots and drops
unused terms, without re-sorting postings.

Not thread-safe: reads may flush, merge or compact internal state, so callers
serialise every call (one lock around the index).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import struct
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from . import textindex_codec as codec
from .errors import SnapshotDamageError
from .script import is_cjk
from .text import KEY_BITS, TermBatch
from .textindex_docs import DocMeta, DocTable, Scope, full_meta, idf_of, kth_largest
from .textindex_postings import SEARCH_RATIO as _SEARCH_RATIO
from .textindex_postings import Postings, Segment, Span, Vocab, search_ranges
from .textindex_scope import PRUNE_SCOPE_MIN, PRUNE_SCOPE_RATIO, SCOPE_RATIO, ScopeSlots
from .textindex_similar import SimilarityKeys, Unit, near_terms, plain_query_terms, unit_scores

_EMPTY_TIDS = np.zeros(0, dtype=np.int32)
_T = TypeVar("_T")
#: How deep each thread is in the methods of :func:`_healing` (only the outermost heals).
_DEPTH = threading.local()
_EMPTY_TFS = np.zeros(0, dtype=np.uint16)

__all__ = [
    "DEFAULT_B",
    "DEFAULT_COORDINATION",
    "DEFAULT_FEEDBACK",
    "DEFAULT_K1",
    "SIMILAR_CANDIDATES",
    "SIMILAR_THRESHOLD",
    "SIMILAR_WORDS",
    "Feedback",
    "Scope",
    "TextIndex",
]

#: BM25 term-frequency saturation (chosen on the dev splits, docs/ranking.md).
DEFAULT_K1 = 0.6
#: BM25 length normalisation (chosen on the dev splits, docs/ranking.md).
DEFAULT_B = 0.4
#: Coordination exponents (non-CJK, CJK documents): a document's BM25 score
#: is multiplied by (its matched share of the query's idf mass) ** exponent,
#: so a document holding more of the query's rare terms wins over one that
#: repeats a single term. Chosen by cross-validation on the dev splits
#: (docs/ranking.md, "Coordination").
DEFAULT_COORDINATION = (0.5, 1.0)

#: A query of more distinct known terms is ranked on this many, those of the
#: highest weight x idf (ties by term): a pasted Chinese paragraph of 2,000
#: characters took 6 s at 100k nodes, one scoring pass per term (the longest
#: question of the dev sets has 84; docs/ranking.md, "Long queries").
MAX_QUERY_TERMS = 128

#: The class of the query :meth:`TextIndex.match` is ranking (True: CJK), which
#: picks the coordination exponent; a context variable, so threads and tasks
#: each have their own.
_QUERY_CJK: contextvars.ContextVar[bool | None] = contextvars.ContextVar("query_cjk", default=None)


@dataclass(frozen=True)
class Feedback:
    """Pseudo-relevance feedback (RM3-style) for queries that are not CJK.

    The ``docs`` best non-CJK documents of a first pass lend the query their
    ``terms`` most weighty non-CJK terms (term frequency / length, weighted
    by the document's share of the first-pass scores, times idf); those get
    ``weight`` of the query's total weight and the query's own terms the
    rest. A term in more than ``max_df`` of the documents is not added
    (1.0: no limit; 0.2 measured no faster and less stable on mixed pools). Only
    queries of at least ``min_terms`` distinct terms take
    feedback: a name or a keyword or two is looked up as given. ``weight`` 0
    switches feedback off.
    """

    docs: int = 5
    terms: int = 30
    weight: float = 0.4
    min_terms: int = 3
    max_df: float = 1.0

    def __post_init__(self) -> None:
        if (
            not (self.docs >= 1 and self.terms >= 1 and self.min_terms >= 1 and math.isfinite(self.weight))
            or not 0 <= self.weight < 1
        ):
            raise ValueError(
                f"feedback needs docs, terms and min_terms >= 1, 0 <= weight < 1 and 0 < max_df <= 1,"
                f" got {self!r}"
            )


#: Feedback of :meth:`TextIndex.match` (chosen by cross-validation, docs/ranking.md).
DEFAULT_FEEDBACK = Feedback()
#: Minimum Dice coefficient of padded character bigrams for a vocabulary term
#: to count as similar to a query word in :meth:`TextIndex.similar`.
SIMILAR_THRESHOLD = 0.5
#: At most this many similar vocabulary terms stand in for an unknown query word.
SIMILAR_CANDIDATES = 20
#: Only the first this many distinct query words the vocabulary lacks are looked up
#: by similarity (:meth:`TextIndex.similar`) and for typos (:func:`typo_terms`); the
#: others resemble nothing. Matching every unknown word against every candidate term
#: made a search's cost grow with the square of their number (2,000 words: 68 s), and
#: a query people type holds a handful of them; a pasted log or document holds
#: hundreds, which no typo judgement needs (docs/ranking.md).
SIMILAR_WORDS = 32

_COMPACT_MIN_DEAD = 1024
#: Top-k queries over fewer postings than this are scored exhaustively.
_PRUNE_MIN_POSTINGS = 20_000
#: MaxScore completion stops dropping candidates once this few are left (a
#: cut then costs more than the binary searches it saves).
_PRUNE_SMALL = 64
#: From this few candidates on, MaxScore completion adds the other terms together:
#: one batched binary search per segment instead of ~10 array operations a term.
_BATCH_CAND = 256


def _healing(method: Callable[..., _T]) -> Callable[..., _T]:
    """Run ``method``; when a lazily checked part of a loaded snapshot is found damaged
    (:class:`~md_cg.errors.SnapshotDamageError`), rebuild the index through its
    ``repair`` (from the files) and run the method again from the start.

    Only the outermost such call of a thread heals: an inner one's caller may
    hold parts of the damaged index. Without ``repair`` the error propagates.
    """

    @functools.wraps(method)
    def run(self: TextIndex, *args: Any, **kwargs: Any) -> _T:
        depth = getattr(_DEPTH, "n", 0)
        _DEPTH.n = depth + 1
        try:
            return method(self, *args, **kwargs)
        except SnapshotDamageError:
            if depth or self.repair is None:
                raise
            _adopt(self, self.repair(self))
        finally:
            _DEPTH.n = depth
        return run(self, *args, **kwargs)

    return run


class TextIndex:
    """BM25 over string-identified documents with layer/bucket scopes.

    ``k1``/``b``: BM25 parameters (defaults chosen on the dev splits).
    ``coordination``: exponents (non-CJK, CJK documents) of the matched
    share of the query's idf mass that scales a document's BM25 score; (0, 0)
    is plain BM25; None: :data:`DEFAULT_COORDINATION`. ``feedback``: the
    pseudo-relevance feedback of top-k queries that are not CJK
    (:class:`Feedback`; None: :data:`DEFAULT_FEEDBACK`).
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
        coordination: tuple[float, float] | None = None,
        feedback: Feedback | None = None,
    ) -> None:
        # None: the module defaults, looked up per call, so an ablation can switch them off globally
        if coordination is None:
            coordination = DEFAULT_COORDINATION
        self.feedback = DEFAULT_FEEDBACK if feedback is None else feedback
        if not (math.isfinite(k1) and k1 >= 0 and 0 <= b <= 1):
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        if len(coordination) != 2 or not all(math.isfinite(g) and 0 <= g <= 4 for g in coordination):
            raise ValueError(f"coordination needs two exponents in [0, 4], got {coordination!r}")
        self.k1 = float(k1)
        self.b = float(b)
        self.coordination = (float(coordination[0]), float(coordination[1]))
        self.analyzer = analyzer or plain_query_terms
        self._vocab = Vocab()
        self._docs = DocTable()
        self._postings = Postings()
        self._sim = SimilarityKeys()
        self._dead_key = -1  # the table version of _dead_terms (term id -> dead postings per class)
        self._scratch_arrays = (
            np.zeros(0),
            np.zeros(0),
            np.zeros(0, dtype=bool),
            np.zeros(0, dtype=np.int32),
        )
        self._scratch_seen = self._scratch_arrays[2]
        self._dead_terms: dict[int, tuple[int, int]] = {}
        self._dead_slots = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self._scopes = ScopeSlots()
        #: rebuilds an index with the same documents from their files when a lazily
        #: checked part of a snapshot is damaged (set by :mod:`md_cg.snapshot`), else None
        self.repair: Callable[[TextIndex], TextIndex] | None = None

    # -------------------------------------------------------------- writes

    def __len__(self) -> int:
        return self._docs.n_live

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs.slot

    @_healing
    def add(
        self,
        doc_id: str,
        terms: Iterable[str],
        *,
        layer: int,
        bucket: int,
        prior: float = 0.5,
        changed: float = 0.0,
    ) -> None:
        """Index ``doc_id`` with ``terms`` (repeats count), replacing any earlier version.

        ``terms`` come from :func:`md_cg.text.analyze`; a document without
        terms is still in its scope (for :meth:`similar`'s fill). ``prior``
        (importance), then ``changed`` (the time of its last change, newest
        first), then the id order documents of equal score.
        """
        if not isinstance(doc_id, str) or "\x00" in doc_id:
            raise ValueError(f"a document id must be a str without NUL, not {doc_id!r}")
        ids = list(map(self._vocab.__getitem__, terms))
        slot = self._docs.add(doc_id, len(ids), layer, bucket, prior, changed)
        self._postings.append(slot, ids)
        if self._postings.full:
            self._flush()

    def add_many(self, doc_ids: Sequence[str], batch: TermBatch, meta: Sequence[DocMeta]) -> None:
        """:meth:`add` of each ``doc_ids[i]`` with document ``i`` of ``batch`` (from
        :func:`md_cg.text.analyze_batch`) and ``meta[i]``: see :func:`_add_batch`."""
        _add_batch(self, doc_ids, batch, meta)

    def remove(self, doc_id: str) -> bool:
        """Forget ``doc_id``; False when it was not indexed."""
        return self._docs.remove(doc_id)

    def set_meta(
        self,
        doc_id: str,
        *,
        layer: int | None = None,
        bucket: int | None = None,
        prior: float | None = None,
        changed: float | None = None,
    ) -> None:
        """Change a document's codes, prior or time of last change, keeping its terms (KeyError if absent)."""
        self._docs.set_meta(doc_id, layer, bucket, prior, changed)

    @_healing
    def compact(self) -> None:
        """Reclaim dead slots and drop terms no live document has.

        Runs by itself once a quarter of the slots (at least 1,024) are dead,
        and in :meth:`to_bytes`. O(postings), no sorting.
        """
        self._flush()
        slot_map = self._docs.compact()
        kept = self._postings.compacted(slot_map, len(self._vocab.terms))
        if kept is not None:
            self._vocab = self._vocab.subset(kept)
            self._sim.reset()

    @_healing
    def merge_segments(self) -> None:
        """Merge the postings into one segment (pending adds included).

        A query then reads each of its terms' postings in one piece instead
        of one per segment: at 100k nodes, 7 segments -> 1 cut the search CPU
        time by ~40% (docs/benchmarks.md). O(postings), about one extra copy
        of them in memory while it runs; for maintenance (a rebuild or a
        compaction before the snapshot is written), not for every write.
        """
        self._flush()
        self._postings.merge_all()

    # ------------------------------------------------------------ checking

    @_healing
    def doc_term_counts(self) -> dict[str, dict[str, int]]:
        """Every live document's terms with their frequencies, in one pass over the postings.

        For consistency checks (``health(deep=True)``): compare with
        ``Counter(analyze(text))``, frequencies capped at 65,535. A document
        without terms maps to ``{}``.
        """
        self._flush()
        table = self._docs
        out: dict[str, dict[str, int]] = {doc_id: {} for doc_id in table.slot}
        terms = self._vocab.terms
        for seg in self._postings.segments:
            if not seg.nnz:
                continue
            term_of = np.repeat(seg.terms, np.diff(seg.ptr))
            live = table.alive[seg.docs]
            for slot, tid, tf in zip(
                seg.docs[live].tolist(), term_of[live].tolist(), seg.tfs[live].tolist(), strict=True
            ):
                counts = out[table.ids[slot]]
                term = terms[tid]
                counts[term] = counts.get(term, 0) + tf
        return out

    def doc_ids(self) -> list[str]:
        """The ids of the indexed documents (in slot order)."""
        return list(self._docs.slot)

    def doc_meta(self, doc_id: str) -> tuple[int, int, float]:
        """(layer code, bucket code, prior) of a document (KeyError if absent)."""
        slot = self._docs.slot[doc_id]
        table = self._docs
        return int(table.layer[slot]), int(table.bucket[slot]), float(table.prior[slot])

    def doc_changed(self, doc_id: str) -> float:
        """The time of a document's last change, as given to :meth:`add` (KeyError if absent)."""
        return float(self._docs.changed[self._docs.slot[doc_id]])

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
        slots = self._scopes.slots(self._docs, scope)
        return len(slots) if slots is not None else int(np.count_nonzero(self._docs.mask(scope)))

    # ------------------------------------------------------------- queries

    @_healing
    def match(
        self,
        weighted_terms: Sequence[tuple[str, float]],
        scope: Scope,
        *,
        k: int | None,
        exclude: Collection[str] = (),
        feedback: bool = True,
    ) -> list[tuple[str, float]]:
        """BM25 of every document in ``scope`` that contains a query term.

        ``weighted_terms``: (term, weight) pairs; a term's contribution is
        multiplied by its weight, the weights of a repeated term add up, and
        terms with weight <= 0 or unknown to the index are ignored. The score
        of document d is

            sum over terms t in d:  w_t * idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

        with idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N, df and avgdl
        over all live documents (not just the scope), dl = the document's
        number of terms. A store holding both CJK documents (more than half
        of their terms CJK) and other documents keeps the two classes'
        statistics apart: idf(t) uses N and df of the class that holds most
        of t's documents, and avgdl is that of d's own class (see
        :meth:`_coefficients`). The sum is then multiplied by the document's
        share of the query's idf mass to the power of ``coordination`` (of the
        document's class; of the non-CJK class for every document when the
        query is not CJK). With ``k`` given, a query mostly of non-CJK terms
        and of at least ``feedback.min_terms`` terms is ranked twice: the best
        documents of the first pass lend it terms (:class:`Feedback`; ``feedback=False``
        skips it, for lookups that are not questions). Returns the best ``k`` (all
        when None) as (id, score) with score > 0, ordered by score desc, prior
        desc, last change desc, id asc; every candidate is scored before the cut.
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
        return _match_terms(self, list(weights), list(weights.values()), scope, k, exclude, feedback)

    def _ranked(
        self, tids: list[int], ws: list[float], scope: Scope, k: int | None, exclude: Collection[str]
    ) -> list[tuple[str, float]]:
        slots = self._scopes.slots(self._docs, scope)
        if slots is not None:
            hits = _ranked_in_scope(self, tids, ws, scope, slots, k, exclude)
            if hits is not None:
                return hits
        if k is not None and len(tids) > 1:
            top = self._match_top_k(tids, ws, scope, k, exclude)
            if top is not None:
                return top
        return self._match_all(tids, ws, scope, k, exclude)

    def _cjk_query(self, tids: list[int], ws: list[float]) -> bool:
        """True when CJK terms hold more than half of the query's weight."""
        flags = np.frombuffer(self._vocab.cjk, dtype=np.uint8)[tids]
        w = np.asarray(ws)
        return bool(2 * float(w[flags == 1].sum()) > float(w.sum()))

    def _match_all(
        self,
        tids: list[int],
        weights: list[float],
        scope: Scope,
        k: int | None,
        exclude: Collection[str],
    ) -> list[tuple[str, float]]:
        """BM25 over every posting of the query terms (see :meth:`match`)."""
        table = self._docs
        term_idx, docs, tfs = self._postings.gather(tids)
        alive = table.alive[docs] if table.dead else None
        cls = None
        if table.mixed:
            cls = table.cjk[docs]
            df = np.bincount(term_idx * 2 + cls, weights=alive, minlength=2 * len(tids)).reshape(-1, 2)
        else:
            df = np.bincount(term_idx, weights=alive, minlength=len(tids)).astype(np.float64)
        coef, norm = self._coefficients(weights, df)
        docs, keep = _in_scope(self, docs, scope)
        if keep is not None:
            term_idx, tfs = term_idx[keep], tfs[keep]
            if cls is not None:
                cls = cls[keep]
        return _scored(self, term_idx, docs, tfs, cls, coef, norm, k, exclude)

    def _coordination_factor(self, share: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """``share ** exponent`` of each candidate's class, or of the non-CJK class for every
        candidate of a query that is not CJK (``share``: matched idf mass / the query's)."""
        g_other, g_cjk = self.coordination
        if _QUERY_CJK.get() is False:
            return _power(share, g_other)
        if g_other == g_cjk or not self._docs.mixed:
            return _power(share, g_cjk if self._docs.cjk[cand[0]] else g_other)
        return np.where(self._docs.cjk[cand].astype(bool), _power(share, g_cjk), _power(share, g_other))

    def _coefficients(self, weights: list[float], df: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``w * idf * (k1 + 1)`` per query term, and ``k1 * b / avgdl`` per document class.

        ``df``: each term's document frequency over the live documents, or
        in a mixed store, per class (terms x 2: non-CJK, CJK documents). In a
        mixed store, a term's idf is taken in the class that holds most of
        its documents (N and df of that class), and a document's length is
        compared with the average of its own class; so padding a store with
        documents in another language leaves the ranking of a query in the
        first language unchanged. In a store of one class both are the
        usual BM25 figures.
        """
        table = self._docs
        k1, b = self.k1, self.b
        w = np.asarray(weights, dtype=np.float64)
        if df.ndim == 1:
            n = table.n_live
            norm = k1 * b * n / table.live_len if table.live_len else 0.0
            return w * idf_of(df, n) * (k1 + 1.0), np.array([norm, norm])
        (n_other, n_cjk), (len_other, len_cjk) = table.class_stats()
        # a term's home class holds most of its documents (ties: non-CJK)
        other, cjk = df[:, 0], df[:, 1]
        idf = idf_of(np.maximum(other, cjk), np.where(cjk > other, n_cjk, n_other))
        norm_class = np.array(
            [k1 * b * n_other / len_other if len_other else 0.0, k1 * b * n_cjk / len_cjk if len_cjk else 0.0]
        )
        return w * idf * (k1 + 1.0), norm_class

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
        Terms are taken in decreasing ``ub`` per posting (:func:`_maxscore_orders`);
        the first ``m`` (*essential*) terms give the candidates and their partial
        scores. When the sum of the other terms' ``ub`` is below the k-th best
        partial score, no document lacking every essential term can reach the top
        k, so only the candidates are completed with the other terms (looked up by
        binary search in their postings, not gathered). Returns None when pruning
        does not pay (few postings, or the essential terms hold most of them): the
        caller then scores every posting. The result equals full scoring (up to
        floating-point summation order)."""
        table = self._docs
        spans, cjk = self._postings.spans(tids, table.cjk if table.mixed else None)
        lengths = np.array([sum(z - a for _, a, z in sp) for sp in spans], dtype=np.int64)
        total = int(lengths.sum())
        if total < _PRUNE_MIN_POSTINGS:
            return None
        coef, norm = self._coefficients(weights, _span_df(self, tids, cjk, lengths))
        order, by_bound = _maxscore_orders(coef, lengths)
        pruner = _Pruner(self, _scope_mask(self, scope), table.excluded_slots(exclude), spans, coef, norm)
        try:
            gathered = 0
            for m in range(1, len(order)):
                gathered += int(lengths[order[m - 1]])  # the term that just became essential
                if gathered > total // 2:
                    return None
                rest = set(order[m:])
                top = pruner.step(order[:m], [j for j in by_bound if j in rest], k)
                if top is not None:
                    return top
            return None
        finally:
            pruner.release()

    def _scratch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-slot accumulators for :class:`_Pruner`, kept between queries.

        Two zeroed float arrays, a False mask and a slot -> candidate map
        holding -1. A query resets only the slots it touched
        (:meth:`_Pruner.release`), instead of allocating and clearing four
        arrays of every slot per query.
        """
        n = len(self._docs.ids)
        if len(self._scratch_seen) != n:
            self._scratch_arrays = (
                np.zeros(n),
                np.zeros(n),
                np.zeros(n, dtype=bool),
                np.full(n, -1, dtype=np.int32),
            )
            self._scratch_seen = self._scratch_arrays[2]
        return self._scratch_arrays

    def _similar_units(self, query: str) -> list[Unit]:
        """The query's units, each with the vocabulary terms similar to it (rapidfuzz); the
        last query's are kept until the vocabulary changes (:meth:`SimilarityKeys.remembered`)."""
        vocab, work = self._vocab, functools.partial(_units, self, query)
        shape = (len(vocab.terms), SIMILAR_THRESHOLD, SIMILAR_CANDIDATES, SIMILAR_WORDS)
        return self._sim.remembered(query, (self.analyzer, vocab), shape, work)

    @_healing
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
          "binery" -> "binari" is 5/7. Only the first :data:`SIMILAR_WORDS`
          distinct such terms of the query have candidates; a later one is a
          unit nothing resembles;
        * CJK character c: the unigram term c when the vocabulary has it
          (sim 1.0); otherwise every CJK term containing c, sim = 1 / len(t);
        * CJK bigram: that term only, sim 1.0.

        score(d) = sum over units of max over d's candidate terms of
        sim * idf(t), with the BM25 idf over live documents; term frequency
        and document length are ignored.

        Returns exactly min(k, documents in scope not excluded) pairs
        (id, score): positive scores first (score desc, prior desc, last change
        desc, id asc), then zero-score documents (prior desc, last change desc, id asc).
        """
        self._prepare()
        if k <= 0:
            return []
        table = self._docs
        units = self._similar_units(query)
        slot_of: dict[int, int] = {}
        for unit in units:
            for tid, _ in unit:
                slot_of.setdefault(tid, len(slot_of))
        slots = self._scopes.slots(table, scope)
        if slots is None:
            term_idx, docs, _ = self._postings.gather(list(slot_of))
            idf = table.idf(term_idx, docs, len(slot_of))
            docs, keep = table.in_scope(docs, scope)
            if keep is not None:
                term_idx = term_idx[keep]
        else:
            term_idx, docs, idf = _scope_postings(self, list(slot_of), slots)
        scores = unit_scores(units, slot_of, term_idx, docs, idf, len(table.ids))
        excluded = table.zero_excluded(scores, exclude)
        positive = np.flatnonzero(scores > 0)
        result = table.ranked(positive, scores[positive], k)
        if len(result) < k:
            rest = _scope_mask(self, scope, slots).copy()
            rest[positive] = False
            if excluded is not None:
                rest[excluded] = False
            zero = np.flatnonzero(rest)
            result += table.ranked(zero, np.zeros(len(zero)), k - len(result))
        return result

    # ------------------------------------------------------------ evidence

    @_healing
    def terms_of(self, doc_ids: Sequence[str], terms: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``doc_ids``, the ``terms`` it contains (in ``terms`` order)."""
        self._prepare()
        out: dict[str, list[str]] = {d: [] for d in doc_ids}
        known = [(term, tid) for term in terms if (tid := dict.get(self._vocab, term)) is not None]
        slot_of = self._docs.slot
        slots = {slot_of[d]: d for d in doc_ids if d in slot_of}
        if not known or not slots:
            return out
        want = np.array(sorted(slots), dtype=np.int64)
        found: dict[str, set[int]] = {}
        for i, slot in self._postings.holders([tid for _, tid in known], want):
            found.setdefault(slots[slot], set()).add(i)
        for doc_id, idx in found.items():
            out[doc_id] = [known[i][0] for i in sorted(idx)]
        return out

    @_healing
    def similarity_ideal(self, query: str) -> float:
        """The score of :meth:`similar` that would explain every unit of ``query``.

        Per unit, the highest idf among its candidate terms (a document can
        earn at most similarity x idf of one of them); a unit nothing in the
        vocabulary resembles counts as the rarest possible term. A
        document's similarity score divided by this is the share of the query
        it explains (0..1), the fuzzy evidence that it is about the query.
        """
        self._prepare()
        units = self._similar_units(query)
        table = self._docs
        rare = float(idf_of(np.array([1.0]), max(1, table.n_live))[0])
        slot_of: dict[int, int] = {}
        for unit in units:
            for tid, _ in unit:
                slot_of.setdefault(tid, len(slot_of))
        term_idx, docs, _ = self._postings.gather(list(slot_of))
        idf = table.idf(term_idx, docs, len(slot_of))
        total = 0.0
        for unit in units:
            best = max((float(idf[slot_of[tid]]) for tid, _ in unit), default=0.0)
            total += best if best > 0 else rare
        return total

    # --------------------------------------------------------- persistence

    def to_bytes(self) -> bytes:
        """A compact binary image of the index (compacts the index first); see :meth:`to_parts`."""
        return b"".join(self.to_parts())

    @_healing
    def to_parts(self) -> list[bytes | memoryview]:
        """The image of :meth:`to_bytes` as buffers to write in order (views of the index's arrays).

        Layout: magic ``MDCGTIX1``, a little-endian u32 header length, a JSON
        header (k1, b, counts, array table), 8-byte aligned numpy arrays
        (per segment: term ids, offsets, slots, frequencies; per document:
        length, layer, bucket, prior; NUL-joined UTF-8 ids and vocabulary;
        per document and per term: is it CJK), and a CRC-32 of everything
        before it. Images without the last two arrays (written before they
        existed) still load; the flags are then recomputed. The times of the
        last change are not in the image (a snapshot's rows hold them: see
        :func:`take_changed`); a loaded index has 0 for each until then.
        """
        return codec.encode_parts(*_image_of(self))

    @_healing
    def to_split(self, chunk: int | None = None) -> tuple[list[bytes | memoryview], list[bytes | memoryview]]:
        """The image of :meth:`to_parts` as a split image (:func:`md_cg.textindex_codec.encode_split`).

        The postings (each segment's slots and frequencies) are the lazy
        region, read and checked chunk by chunk on first use after
        :meth:`from_bytes` with a ``region``; everything else is the eager part, and the
        header also gives each segment's lowest and highest slot
        (``bounds``), so that no query has to read every posting to know them.
        """
        return _split_image(self, chunk)

    @classmethod
    def from_bytes(
        cls,
        data: bytes | memoryview,
        *,
        analyzer: Callable[[str], list[str]] | None = None,
        region: Callable[[int, int, np.ndarray], codec.LazyRegion] | None = None,
        known: tuple[list[str], dict[str, int]] | None = None,
    ) -> TextIndex:
        """Load an image written by :meth:`to_bytes`; ValueError when ``data`` is not one.

        ``known``: ids the caller has already decoded and checked, and their
        id -> position map (a snapshot's entries, in row order). When the
        image holds exactly these ids in this order, the index takes those
        strings and a copy of the map instead of decoding and hashing its own
        (a third of the work of opening a large store); else it is ignored.

        With ``region``: the eager part of an image written by :meth:`to_split`,
        ``region(length, chunk, crcs)`` giving its lazy region (the postings,
        checked on first use, their slots also against their segment's bounds).
        Postings are zero-copy views of ``data`` (copied first unless it is
        ``bytes`` or a read-only view, so that they cannot change under the index).
        """
        if not isinstance(data, bytes) and not (isinstance(data, memoryview) and data.readonly):
            data = bytes(data)
        try:
            if region is not None:
                header, parts = _split_arrays(data, region)
                return _index_from(
                    cls(k1=header["k1"], b=header["b"], analyzer=analyzer), header, parts, known
                )
            return _load_whole(cls, data, analyzer, known)
        except ValueError:
            raise
        except (KeyError, TypeError, IndexError, struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"corrupt text index: {exc!r}") from None

    # ----------------------------------------------------------- internals

    def _prepare(self) -> None:
        """Make postings queryable: flush pending adds; compact when many slots are dead."""
        table = self._docs
        if table.dead >= max(_COMPACT_MIN_DEAD, len(table.ids) // 4):
            self.compact()
        elif self._postings.pending:
            self._flush()

    def _flush(self) -> None:
        """Turn pending adds into a segment and classify their documents (CJK or not)."""
        classes = self._postings.flush(np.frombuffer(self._vocab.cjk, dtype=np.uint8))
        if classes is not None:
            self._docs.classify(*classes)


def _load_whole(
    cls: type[TextIndex],
    data: bytes | memoryview,
    analyzer: Callable[[str], list[str]] | None,
    known: tuple[list[str], dict[str, int]] | None = None,
) -> TextIndex:
    """The index of a whole image written by :meth:`TextIndex.to_bytes`."""
    header, arrays = codec.decode(data)
    n_seg = int(header["n_segments"])
    segments = [
        Segment(arrays[4 * i], arrays[4 * i + 1], arrays[4 * i + 2], arrays[4 * i + 3]) for i in range(n_seg)
    ]
    index = cls(k1=header["k1"], b=header["b"], analyzer=analyzer)
    return _index_from(index, header, (segments, arrays[4 * n_seg :]), known)


def _match_terms(
    index: TextIndex,
    tids: list[int],
    ws: list[float],
    scope: Scope,
    k: int | None,
    exclude: Collection[str],
    feedback: bool,
) -> list[tuple[str, float]]:
    """:meth:`TextIndex.match` of known term ids and weights.

    The query's class is set for the coordination exponent (an English
    question would otherwise push a Chinese note holding its rare name below
    English notes holding one common word of it: docs/ranking.md), and a
    query that is not CJK takes pseudo-relevance feedback.
    """
    if len(tids) > MAX_QUERY_TERMS:
        keep = np.sort(
            _best(_query_idf(index, tids, ws), MAX_QUERY_TERMS, lambda i: index._vocab.terms[tids[i]])
        )
        tids, ws = [tids[i] for i in keep], [ws[i] for i in keep]
    cjk = index._cjk_query(tids, ws)
    token = _QUERY_CJK.set(cjk)
    try:
        fb = index.feedback
        if feedback and k is not None and fb.weight > 0 and len(tids) >= fb.min_terms and not cjk:
            first = index._ranked(tids, ws, scope, max(k, fb.docs), exclude)
            expanded = _feedback_terms(index, first[: fb.docs], tids, ws)
            if expanded is None:
                return first[:k]
            tids, ws = expanded
        return index._ranked(tids, ws, scope, k, exclude)
    finally:
        _QUERY_CJK.reset(token)


def _add_batch(index: TextIndex, doc_ids: Sequence[str], batch: TermBatch, meta: Sequence[DocMeta]) -> None:
    """:meth:`TextIndex.add_many`: the same index as one :meth:`~TextIndex.add` per document.

    The same to the byte of :meth:`~TextIndex.to_bytes`: new terms get ids
    in the order they first occur, and the pending postings become segments
    after the same documents. What differs is the cost: each distinct key of
    the batch is looked up in the vocabulary once (one sort of the batch's
    keys packed with their positions finds them and their first
    occurrences), and the postings are buffered as arrays
    (:meth:`~md_cg.textindex_postings.Postings.append_many`). A batch of
    more than 2^21 terms (one sort key cannot number them) is added one
    document at a time.
    """
    n = len(doc_ids)
    if not len(batch.counts) == len(meta) == n:
        raise ValueError("add_many needs one term count and one (layer, bucket, prior) per document")
    for doc_id in doc_ids:
        if not isinstance(doc_id, str) or "\x00" in doc_id:
            raise ValueError(f"a document id must be a str without NUL, not {doc_id!r}")
    total = len(batch.keys)
    pos_bits = max(1, total.bit_length())
    if KEY_BITS + pos_bits > 63:  # too many terms for one sort key: one document at a time
        for doc_id, terms, m in zip(doc_ids, batch.all_terms(), meta, strict=True):
            layer, bucket, prior, changed = full_meta(m)
            index.add(doc_id, terms, layer=layer, bucket=bucket, prior=prior, changed=changed)
        return
    tids = _batch_tids(index._vocab, batch.keys, batch.term, pos_bits)
    counts = batch.counts
    n_terms = counts.tolist()
    ends = np.cumsum(counts)
    docs, postings = index._docs, index._postings
    i = 0
    while i < n:
        # add() flushes after the first document that fills the buffer
        room = postings.room
        done = int(ends[i - 1]) if i else 0
        stop = min(int(np.searchsorted(ends, done + room, side="left")) + 1, n)
        slots = docs.add_many(doc_ids[i:stop], n_terms[i:stop], meta[i:stop])
        postings.append_many(
            np.array(slots, dtype=np.int64), counts[i:stop], tids[done : int(ends[stop - 1])]
        )
        if postings.full:
            index._flush()
        i = stop


def _maxscore_orders(coef: np.ndarray, lengths: np.ndarray) -> tuple[list[int], list[int]]:
    """The order in which MaxScore makes terms essential, and the order of bounds.

    Any split of the terms into essential ones and the others is exact; the
    cheapest covers the most bound per posting gathered, so a light but rare
    term (a feedback term) goes before a common word asked for at full
    weight. The others are completed in decreasing bound, which prunes soonest.
    """
    order = np.argsort(-coef / np.maximum(lengths, 1), kind="stable").tolist()
    return order, np.argsort(-coef, kind="stable").tolist()


def _batch_tids(vocab: Vocab, keys: np.ndarray, term: Callable[[int], str], pos_bits: int) -> np.ndarray:
    """The term id of each key in ``keys``; unseen terms get ids in order of first occurrence."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    mask = (1 << pos_bits) - 1
    packed = (keys << pos_bits) | np.arange(n, dtype=np.int64)
    # values only, so every algorithm gives the same array; numpy 2's default
    # (SIMD on x86) sorts 600k keys in 3.5 ms against 22 ms for its timsort
    packed.sort()
    sorted_keys = packed >> pos_bits
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    order = np.argsort(packed[starts] & mask)  # distinct keys by first occurrence
    lut = np.empty(len(starts), dtype=np.int64)
    lut[order] = list(map(vocab.__getitem__, map(term, sorted_keys[starts][order].tolist())))
    tids = np.empty(n, dtype=np.int64)
    tids[packed & mask] = np.repeat(lut, np.diff(starts, append=n))
    return tids


def _feedback_terms(
    index: TextIndex, first: list[tuple[str, float]], tids: list[int], ws: list[float]
) -> tuple[list[int], list[float]] | None:
    """The query (``tids``, ``ws``) expanded with the feedback terms of ``first`` (RM3).

    None when the first pass found nothing to learn from.
    """
    fb, table, postings = index.feedback, index._docs, index._postings
    # only documents of the query's class lend terms: a Chinese paragraph
    # that happens to hold an English name does not steer an English query
    hits = [(slot, s) for slot, s in ((table.slot[d], s) for d, s in first) if s > 0 and not table.cjk[slot]]
    total = sum(s for _, s in hits)
    if not hits or total <= 0:
        return None
    latin = index._vocab.latin()  # no cross-script expansion
    # a big segment reads the postings of these terms only, binary-searching the
    # longest (docs/benchmarks.md: an English query at 1M mixed nodes, 292 -> 7 ms)
    found = postings.docs_terms([slot for slot, _ in hits], latin)
    parts = [found.get(slot, (_EMPTY_TIDS, _EMPTY_TFS)) for slot, _ in hits]
    t = np.concatenate([p[0] for p in parts])
    v = np.concatenate(
        [p[1] * (s / total / max(1, int(table.len[slot]))) for p, (slot, s) in zip(parts, hits, strict=True)]
    )
    keep = latin[t]
    terms, inverse = np.unique(t[keep], return_inverse=True)
    if len(terms) == 0:
        return None
    rel = np.bincount(inverse, weights=v[keep], minlength=len(terms))
    n = table.class_stats()[0][0] if table.mixed else table.n_live
    df = _live_df(index, terms)
    rel *= idf_of(df, n)
    rel[df > fb.max_df * n] = 0.0
    top = _best(rel, fb.terms, lambda i: index._vocab.terms[terms[i]])
    z = float(rel[top].sum()) if len(top) else 0.0
    if z <= 0:
        return None
    qz = sum(ws)
    out = {tid: (1.0 - fb.weight) * w for tid, w in zip(tids, ws, strict=True)}
    for tid, value in zip(terms[top].tolist(), rel[top].tolist(), strict=True):
        if value > 0:
            out[tid] = out.get(tid, 0.0) + fb.weight * qz * value / z
    return list(out), list(out.values())


def _live_df(index: TextIndex, terms: np.ndarray) -> np.ndarray:
    """Live non-CJK documents holding each term id of ``terms`` (float64)."""
    table = index._docs
    df = index._postings.counts(terms, table.cjk if table.mixed else None)
    if table.dead:
        dead = _dead_postings(index, terms)
        df = df - (dead[:, 0] if table.mixed else dead.sum(axis=1))
    return df.astype(np.float64)


def _query_idf(index: TextIndex, tids: list[int], ws: list[float]) -> np.ndarray:
    """``w * idf`` of each query term over the live documents: the same choice, whatever
    deleted documents a compaction or a rebuild has dropped since."""
    df = _live_counts(index, np.asarray(tids, dtype=np.int64))
    return np.asarray(ws, dtype=np.float64) * idf_of(df.astype(np.float64), max(1, index._docs.n_live))


def _live_counts(index: TextIndex, terms: np.ndarray) -> np.ndarray:
    """Live documents (of every class) holding each term id of ``terms``."""
    df = index._postings.counts(terms)
    if index._docs.dead:
        df = df - _dead_postings(index, terms).sum(axis=1)
    return df


def _best(values: np.ndarray, n: int, name: Callable[[int], str]) -> np.ndarray:
    """Indices of the ``n`` largest positive ``values``; ties at the cut go by ``name(i)``.

    So the choice does not depend on term ids, which compaction renumbers.
    """
    order = np.argsort(-values, kind="stable")
    order = order[values[order] > 0]
    if len(order) <= n:
        return order
    last = values[order[n - 1]]
    if values[order[n]] != last:
        return order[:n]
    tied = order[values[order] == last]
    above = order[values[order] > last]
    chosen = sorted(tied.tolist(), key=name)[: n - len(above)]
    return np.concatenate([above, np.array(chosen, dtype=order.dtype)])


def _ranked_in_scope(
    index: TextIndex,
    tids: list[int],
    ws: list[float],
    scope: Scope,
    slots: np.ndarray,
    k: int | None,
    exclude: Collection[str],
) -> list[tuple[str, float]] | None:
    """:meth:`TextIndex._ranked` over a small scope (``slots``), or None to rank it as a large one.

    MaxScore with the scope as a mask when the scope is large and its query terms are very common
    (:data:`PRUNE_SCOPE_MIN`, :data:`PRUNE_SCOPE_RATIO`), else the scope's postings alone
    (:func:`_match_scope`) when they are few beside the query's (:data:`SCOPE_RATIO`).
    """
    table = index._docs
    spans, cjk = index._postings.spans(tids, table.cjk if table.mixed else None)
    lengths = np.array([sum(z - a for _, a, z in sp) for sp in spans], dtype=np.int64)
    total = int(lengths.sum())
    if (
        k is not None
        and len(tids) > 1
        and len(slots) >= PRUNE_SCOPE_MIN
        and total >= PRUNE_SCOPE_RATIO * len(slots)
    ):
        # a large scope of very common terms: the scoped path would binary-search
        # every slot in every term's postings; MaxScore reads few of them
        top = index._match_top_k(tids, ws, scope, k, exclude)
        if top is not None:
            return top
    if len(slots) * SCOPE_RATIO < total:
        return _match_scope(index, tids, ws, slots, (spans, cjk, lengths), k, exclude)
    return None


def _match_scope(
    index: TextIndex,
    tids: list[int],
    weights: list[float],
    slots: np.ndarray,
    extents: tuple[list[list[Span]], list[int] | None, np.ndarray],
    k: int | None,
    exclude: Collection[str],
) -> list[tuple[str, float]]:
    """:meth:`TextIndex._match_all` over a small scope (``slots``: its sorted live slots): the same result.

    ``extents``: :meth:`Postings.spans` of ``tids`` (with the CJK counts) and
    each term's number of postings. The statistics come from them; only the
    postings of the scope's slots are read (:meth:`Postings.within`).
    """
    table = index._docs
    _, cjk, lengths = extents
    coef, norm = index._coefficients(weights, _span_df(index, tids, cjk, lengths))
    with _marked(index, slots) as marks:
        term_idx, docs, tfs = index._postings.within(tids, slots, marks)
    cls = table.cjk[docs] if table.mixed else None
    return _scored(index, term_idx, docs, tfs, cls, coef, norm, k, exclude)


@contextlib.contextmanager
def _marked(index: TextIndex, slots: np.ndarray) -> Iterator[np.ndarray]:
    """The index's slot marks with ``slots`` set, reset on the way out (all False between queries)."""
    marks = index._scratch()[2]
    marks[slots] = True
    try:
        yield marks
    finally:
        marks[slots] = False


def _scope_mask(index: TextIndex, scope: Scope, slots: np.ndarray | None = None) -> np.ndarray:
    """:meth:`DocTable.mask` of ``scope``; a small scope's from its slots (``slots``, or
    :class:`ScopeSlots`), in about its size instead of a pass over every slot's codes."""
    if slots is None:
        slots = index._scopes.slots(index._docs, scope)
    if slots is None:
        return index._docs.mask(scope)
    mask = np.zeros(len(index._docs.ids), dtype=bool)
    mask[slots] = True
    return mask


def _in_scope(index: TextIndex, docs: np.ndarray, scope: Scope) -> tuple[np.ndarray, np.ndarray | None]:
    """:meth:`DocTable.in_scope`; for a small scope through its slots, not a mask of every slot."""
    slots = index._scopes.slots(index._docs, scope)
    if slots is None:
        return index._docs.in_scope(docs, scope)
    with _marked(index, slots) as marks:
        keep = marks[docs]
    return docs[keep], keep


def _scope_postings(
    index: TextIndex, tids: list[int], slots: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The postings of ``tids`` in the sorted live ``slots`` (term index, slot) and each term's
    idf over every live document (as :meth:`DocTable.idf` of all its postings), reading only the
    postings of those slots and the extents of the others."""
    table = index._docs
    spans, _ = index._postings.spans(tids)
    lengths = np.array([sum(z - a for _, a, z in sp) for sp in spans], dtype=np.int64)
    df = lengths.astype(np.float64)
    if table.dead:
        df -= _dead_postings(index, np.asarray(tids, dtype=np.int64)).sum(axis=1)
    with _marked(index, slots) as marks:
        term_idx, docs, _ = index._postings.within(tids, slots, marks)
    return term_idx, docs, idf_of(df, table.n_live)


def _scored(
    index: TextIndex,
    term_idx: np.ndarray,
    docs: np.ndarray,
    tfs: np.ndarray,
    cls: np.ndarray | None,
    coef: np.ndarray,
    norm: np.ndarray,
    k: int | None,
    exclude: Collection[str],
) -> list[tuple[str, float]]:
    """Rank the postings (``term_idx``, ``docs``, ``tfs``; ``cls``: their documents' classes) by BM25.

    ``coef``, ``norm``: :meth:`TextIndex._coefficients` of the query.
    """
    table = index._docs
    if len(docs) == 0:
        return []
    # contribution = coef[t] * tf / (tf + k1 * (1 - b) + norm[class] * dl), in place
    tf = tfs.astype(np.float64)
    if cls is None:
        den = table.len[docs].astype(np.float64)
        den *= norm[0]
    else:
        den = table.length_factors(norm)[docs]
    den += index.k1 * (1.0 - index.b)
    den += tf
    contrib = np.divide(tf, den, out=tf)
    contrib *= coef[term_idx]
    # A document's contributions are summed in query-term order (it lives
    # in one segment), so equal documents get bit-equal scores.
    slots, bins = _bins(docs, len(table.ids))
    scores = np.bincount(bins, weights=contrib, minlength=len(slots) if slots is not None else len(table.ids))
    if slots is None:
        table.zero_excluded(scores, exclude)
        at = cand = np.flatnonzero(scores > 0)
    else:
        if exclude:
            scores[np.isin(slots, table.excluded_slots(exclude))] = 0.0
        at = np.flatnonzero(scores > 0)
        cand = slots[at]
    score = scores[at]
    if index.coordination != (0.0, 0.0) and len(cand):
        mass = coef / (index.k1 + 1.0)  # w * idf per query term
        matched = np.bincount(bins, weights=mass[term_idx], minlength=len(scores))[at]
        score *= index._coordination_factor(matched / float(mass.sum()), cand)
    return table.ranked(cand, score, k)


def _bins(docs: np.ndarray, n_slots: int) -> tuple[np.ndarray | None, np.ndarray]:
    """Accumulator bins for the postings ``docs``: (None, docs) to sum into one bin per slot,
    or, when the postings are few beside the slots, (their distinct slots, each posting's bin)
    so that a query over a small scope does not allocate and scan arrays of every slot.

    Either way ``np.bincount`` adds a bin's weights in posting order: the sums are bit-equal.
    """
    if len(docs) * 8 >= n_slots:
        return None, docs
    slots, bins = np.unique(docs, return_inverse=True)
    return slots, bins


def _power(x: np.ndarray, g: float) -> np.ndarray:
    """``x ** g``, with the exponents 0, 1/2 and 1 done without ``np.power`` (several times faster)."""
    if g == 1.0:
        return x
    if g == 0.5:
        return np.sqrt(x)
    if g == 0.0:
        return np.ones_like(x)
    return np.power(x, g)


def _doc_classes(segments: list[Segment], vocab: Vocab, doc_len: np.ndarray) -> np.ndarray:
    """Per document, 1 when more than half of its terms are CJK (for images without the flags)."""
    flags = np.frombuffer(vocab.cjk, dtype=np.uint8)
    n_cjk = np.zeros(len(doc_len), dtype=np.float64)
    for seg in segments:
        per_posting = np.repeat(flags[seg.terms], np.diff(seg.ptr))
        n_cjk += np.bincount(seg.docs, weights=seg.tfs * per_posting, minlength=len(doc_len))
    return (2 * n_cjk > doc_len).astype(np.uint8)


def _span_df(index: TextIndex, tids: list[int], cjk: list[int] | None, lengths: np.ndarray) -> np.ndarray:
    """Document frequencies of :meth:`TextIndex._coefficients` from the terms' posting extents.

    ``cjk``: per term, its postings in CJK documents (from :meth:`Postings.spans`,
    dead slots included; None unless the store is mixed). Dead slots' postings
    are subtracted (:func:`_dead_postings`), not found by reading every posting.
    """
    table = index._docs
    if cjk is None:
        df = lengths.astype(np.float64)
        if table.dead:
            df -= _dead_postings(index, np.asarray(tids, dtype=np.int64)).sum(axis=1)
        return df
    counts = np.asarray(cjk, dtype=np.int64)
    df = np.column_stack([lengths - counts, counts]).astype(np.float64)
    if table.dead:
        df -= _dead_postings(index, np.asarray(tids, dtype=np.int64))
    return df


def _dead_postings(index: TextIndex, tids: np.ndarray) -> np.ndarray:
    """Per term id of ``tids``, its postings in dead slots of non-CJK and of CJK documents
    ((n, 2) int64). Counted from those terms' postings (:meth:`Postings.dead_counts`) and
    kept until the table changes: a store with one deleted node used to read every
    posting of the query's terms per query (1M nodes: p50 26-42 ms against 7-9 ms)."""
    table = index._docs
    if index._dead_key != table.version:
        n = len(table.ids)
        dead, cjk = ~table.alive[:n], table.cjk[:n] == 1
        index._dead_slots = (np.flatnonzero(dead & ~cjk), np.flatnonzero(dead & cjk))
        index._dead_terms = {}
        index._dead_key = table.version
    known = index._dead_terms
    wanted = tids.tolist()
    missing = [t for t in dict.fromkeys(wanted) if t not in known]
    if missing:
        m = np.array(missing, dtype=np.int64)
        other, in_cjk = (index._postings.dead_counts(d, m).tolist() for d in index._dead_slots)
        known.update(zip(missing, zip(other, in_cjk, strict=True), strict=True))
    return np.array([known[t] for t in wanted], dtype=np.int64).reshape(-1, 2)


def live_doc_freqs(index: TextIndex, terms: Sequence[str]) -> tuple[dict[str, int], int]:
    """How many live documents hold each of ``terms`` (those the vocabulary has), and
    how many live documents there are."""
    index._prepare()
    known = [(term, tid) for term in terms if (tid := dict.get(index._vocab, term)) is not None]
    n = index._docs.n_live
    if not known:
        return {}, n
    df = _live_counts(index, np.asarray([tid for _, tid in known], dtype=np.int64))
    return {term: int(count) for (term, _), count in zip(known, df, strict=True)}, n


def match_idfs(index: TextIndex, terms: Sequence[str]) -> dict[str, float]:
    """The idf :meth:`TextIndex.match` gives each of ``terms`` the vocabulary has: over
    the live documents, in a mixed store over those of the term's home class (the class
    holding most of its documents, :meth:`TextIndex._coefficients`). A term no live
    document holds gets 0."""
    index._prepare()
    known = [(term, tid) for term in terms if (tid := dict.get(index._vocab, term)) is not None]
    if not known:
        return {}
    tids = np.asarray([tid for _, tid in known], dtype=np.int64)
    table = index._docs
    df = _live_counts(index, tids).astype(np.float64)
    if table.mixed:
        other = _live_df(index, tids)
        cjk = df - other
        (n_other, n_cjk), _ = table.class_stats()
        idf = idf_of(np.maximum(other, cjk), np.where(cjk > other, n_cjk, n_other))
    else:
        idf = idf_of(df, table.n_live)
    return {term: float(value) for (term, _), value in zip(known, idf, strict=True)}


#: :func:`holding_all` reads at most this many postings of the query's rarest term.
HOLDING_SCAN = 20_000


@_healing
def holding_all(
    index: TextIndex, terms: Sequence[str], scope: Scope, limit: int, hidden: Collection[str] = ()
) -> list[str] | None:
    """The live documents of ``scope`` holding every one of ``terms``, in slot order, those
    in ``hidden`` left out; None when that would cost more than a search (the rarest term
    has more than :data:`HOLDING_SCAN` postings) or more than ``limit`` documents are left.

    A term the vocabulary lacks: no document (``[]``). No terms: None. The rarest
    term's postings are filtered by the scope, then each other term, the rarer first,
    keeps those of the documents left that hold it (:meth:`~md_cg.textindex_postings.Postings.holding`).
    """
    index._prepare()
    tids: list[int] = []
    for term in dict.fromkeys(terms):
        tid = dict.get(index._vocab, term)
        if tid is None:
            return []
        tids.append(tid)
    if not tids:
        return None
    counts = index._postings.counts(np.asarray(tids, dtype=np.int64))
    order = np.argsort(counts, kind="stable").tolist()
    if counts[order[0]] > HOLDING_SCAN:
        return None
    _, slots, _ = index._postings.gather([tids[order[0]]])
    slots = _live_in_scope(index, np.unique(slots), scope)
    for i in order[1:]:  # the rarer terms first: the candidates shrink fastest
        if not len(slots):
            break
        slots = index._postings.holding(tids[i], slots)
    ids = index._docs.ids
    found = [d for s in slots.tolist() if (d := ids[s]) not in hidden]
    return None if len(found) > limit else found


def _live_in_scope(index: TextIndex, slots: np.ndarray, scope: Scope) -> np.ndarray:
    """The sorted ``slots`` that are live and in ``scope``, from their own codes: about
    their number of steps, where a mask of the scope costs one per slot of the index."""
    table = index._docs
    keep = table.alive[slots]
    if scope.layers is not None:
        keep &= np.isin(table.layer[slots], list(scope.layers))
    if scope.buckets is not None:
        keep &= np.isin(table.bucket[slots], list(scope.buckets))
    slots = slots[keep]
    if scope.only is not None:
        slots = slots[np.isin(slots, table.slots_of(scope.only))]
    return slots


def _units(index: TextIndex, query: str) -> list[Unit]:
    """The units of ``query`` (:meth:`~md_cg.textindex_similar.SimilarityKeys.units`), worked out."""
    vocab = index._vocab
    return index._sim.units(
        index.analyzer(query),
        vocab,
        vocab.terms,
        threshold=SIMILAR_THRESHOLD,
        candidates=SIMILAR_CANDIDATES,
        words=SIMILAR_WORDS,
    )


def typo_terms(index: TextIndex, query: str) -> tuple[bool, list[str]]:
    """Whether ``query`` has a non-CJK word ``index``'s vocabulary lacks, and the
    vocabulary terms within a typo of such a word (:func:`~md_cg.textindex_similar.near_terms`).

    Only the first :data:`SIMILAR_WORDS` distinct such words count, as they alone have
    similar terms (:meth:`TextIndex.similar`): the check costs words x candidate terms,
    which a pasted document made quadratic in its length."""
    index._prepare()
    vocab = index._vocab
    words = [q for q in dict.fromkeys(index.analyzer(query)) if q and q not in vocab and not is_cjk(q)]
    if not words:
        return False, []
    return True, near_terms(words[:SIMILAR_WORDS], index._similar_units(query), vocab.terms)


class _Pruner:
    """The state of one MaxScore pass of :meth:`TextIndex._match_top_k`.

    Holds the partial scores gathered from the essential terms so far;
    :meth:`step` adds the newest essential term and answers when the bound
    allows it. ``coef``/``norm`` are :meth:`TextIndex._coefficients`; a
    term's ``coef`` bounds its contribution to any document.
    """

    def __init__(
        self,
        index: TextIndex,
        mask: np.ndarray,
        excluded: np.ndarray,
        spans: list[list[Span]],
        coef: np.ndarray,
        norm: np.ndarray,
    ) -> None:
        table = index._docs
        self.table = table
        self.factors = table.length_factors(norm) if table.mixed else None
        self.mask = mask
        self.excluded = excluded
        self.spans = spans
        self.coef = coef
        self.norm = norm
        self.base = index.k1 * (1.0 - index.b)
        self.index = index
        self.coordinated = index.coordination != (0.0, 0.0)
        self.mass = coef / (index.k1 + 1.0)  # w * idf per query term
        # Dense per-slot accumulators: a step adds one term's postings in
        # O(postings) instead of re-sorting every candidate so far.
        self.acc, matched, self.seen, self.position = index._scratch()
        self.matched = matched if self.coordinated else None
        # Excluded slots count as seen, so they never become candidates.
        self.seen[excluded] = True
        self.cand_parts: list[np.ndarray] = []
        self.n_cand = 0

    def _contributions(self, j: int | np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> np.ndarray:
        """BM25 contributions of term ``j`` (or of each posting's own term) to ``docs``
        with term frequencies ``tfs``."""
        tf = tfs.astype(np.float64)
        if self.factors is not None:
            den = self.factors[docs] + self.base + tf
        else:
            den = self.table.len[docs] * self.norm[0] + self.base + tf
        return tf / den * self.coef[j]

    def release(self) -> None:
        """Zero the accumulators where this pass wrote, for the next query."""
        if self.cand_parts or len(self.excluded):
            touched = np.concatenate([*self.cand_parts, self.excluded])
            self.acc[touched] = 0.0
            if self.matched is not None:
                self.matched[touched] = 0.0
            self.seen[touched] = False

    def step(self, essential: list[int], others: list[int], k: int) -> list[tuple[str, float]] | None:
        """Add the last of ``essential``; the exact top ``k`` if the bound now holds, else None."""
        j = essential[-1]
        for seg, a, z in self.spans[j]:
            d, tfs = seg.postings(a, z)
            keep = self.mask[d]
            d = d[keep]
            # a slot occurs once per term (its postings live in one segment): no repeated index
            self.acc[d] += self._contributions(j, d, tfs[keep])
            if self.matched is not None:
                self.matched[d] += self.mass[j]
            new = d[~self.seen[d]]
            self.seen[new] = True
            self.cand_parts.append(new)
            self.n_cand += len(new)
        rest = float(self.coef[others].sum())
        # A partial score never exceeds the essential terms' bounds together.
        if self.n_cand < k or rest >= float(self.coef[essential].sum()):
            return None
        cand = np.concatenate(self.cand_parts).astype(np.int64)
        score = self.acc[cand]
        # (-inf when fewer than k partial scores reach ``rest``)
        if rest >= kth_largest(score, k, rest):
            return None
        matched = None if self.matched is None else self.matched[cand]
        cand, score, matched = self._complete(cand, score, matched, others, k)
        if matched is not None:
            # Coordination only lowers scores, and a document without an
            # essential term stays below ``rest``: the top k is exact when
            # the k-th coordinated score is still above it.
            score *= self.index._coordination_factor(matched / float(self.mass.sum()), cand)
            if rest >= kth_largest(score, k, rest):
                return None
        positive = score > 0
        return self.table.ranked(cand[positive], score[positive], k)

    def _complete(
        self, cand: np.ndarray, score: np.ndarray, matched: np.ndarray | None, others: list[int], k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The candidates that can still reach the top ``k``, with the other terms' contributions added.

        ``others`` go in decreasing bound. Before each, a candidate is dropped
        when its partial score plus the bounds of the terms left is below the
        k-th best partial final score (the coordination factor is at most 1
        and does not fall as the matched share grows, so partial scores only
        rise): it cannot beat k candidates. A survivor's score is the same sum,
        in the same order, as without the cut. Few candidates are looked up by
        binary search in a term's postings, many through a slot map.
        """
        mass_total = float(self.mass.sum())
        theta = -np.inf
        for i, j in enumerate(others):
            if len(cand) <= _BATCH_CAND and len(others) - i > 1:
                self._add_terms(others[i:], cand, score, matched)
                break
            if len(cand) > max(k, _PRUNE_SMALL):
                high = score + float(self.coef[others[i:]].sum())
                if matched is None:
                    low = score
                else:
                    factor = self.index._coordination_factor
                    low = score * factor(matched / mass_total, cand)
                    share = np.minimum((matched + float(self.mass[others[i:]].sum())) / mass_total, 1.0)
                    high *= factor(share, cand)
                # Lower scores only rise and a dropped candidate was below theta:
                # at least k are still at the last theta (else start afresh).
                theta = kth_largest(low, k, theta)
                if theta == -np.inf:  # rounding in the factor: never seen, but exact anyway
                    theta = kth_largest(low, k)
                # the slack covers rounding: a sum taken term by term may end an ulp above the bound
                keep = np.flatnonzero(high >= theta * (1.0 - 1e-9))
                if len(keep) < len(cand):
                    cand, score = cand[keep], score[keep]
                    matched = None if matched is None else matched[keep]
            self._add_term(j, cand, score, matched)
        return cand, score, matched

    def _add_terms(
        self, js: list[int], cand: np.ndarray, score: np.ndarray, matched: np.ndarray | None
    ) -> None:
        """:meth:`_add_term` of each of ``js`` in turn, for a few candidates: the postings of
        all of them searched at once per segment, then added term by term in the same
        order (so each score is the same sum as :meth:`_add_term` makes it)."""
        order = np.argsort(cand, kind="stable")
        wanted = cand[order]
        c = len(cand)
        runs: dict[int, tuple[Segment, list[int], list[int], list[int]]] = {}
        for r, j in enumerate(js):
            for seg, a, z in self.spans[j]:
                run = runs.setdefault(id(seg), (seg, [], [], []))
                run[1].append(r)
                run[2].append(a)
                run[3].append(z)
        added = np.zeros((len(js), c))
        held = np.zeros((len(js), c), dtype=bool)
        terms = np.asarray(js)
        for seg, rows, firsts, ends in runs.values():
            starts, stops = np.array(firsts, dtype=np.int64), np.array(ends, dtype=np.int64)
            docs, tfs = seg.checked_ranges(starts, stops)
            pairs, at = search_ranges(docs, starts, stops, wanted)
            row = np.asarray(rows)[pairs // c]
            col = order[pairs % c]
            added[row, col] = self._contributions(terms[row], cand[col], tfs[at])
            held[row, col] = True
        for r, j in enumerate(js):
            score += added[r]  # + 0.0 where the term is absent: the same sum
            if matched is not None:
                matched[held[r]] += self.mass[j]

    def _add_term(self, j: int, cand: np.ndarray, score: np.ndarray, matched: np.ndarray | None) -> None:
        """Add term ``j``'s contributions to the candidates' ``score`` (and ``matched``), in place."""
        mapped = False
        position = self.position  # slot -> candidate, -1 elsewhere (reset below)
        try:
            for seg, a, z in self.spans[j]:
                docs, tfs = seg.postings(a, z)
                if len(cand) * _SEARCH_RATIO < z - a:
                    # keys of the postings' dtype: int64 keys would copy all of ``docs`` first
                    where = np.searchsorted(docs, cand.astype(docs.dtype))
                    where[where >= len(docs)] = 0
                    at = np.flatnonzero(docs[where] == cand)
                    hit = where[at]
                else:
                    if not mapped:
                        position[cand] = np.arange(len(cand), dtype=np.int32)
                        mapped = True
                    where = position[docs]
                    hit = np.flatnonzero(where >= 0)
                    at = where[hit]
                if len(at) == 0:
                    continue
                score[at] += self._contributions(j, cand[at], tfs[hit])
                if matched is not None:
                    matched[at] += self.mass[j]
        finally:
            if mapped:
                position[cand] = -1


def slot_order(index: TextIndex) -> list[str]:
    """The ids of the live documents of ``index`` in slot order: the order of an image's id table."""
    return [i for i in index._docs.ids if i is not None]


def take_changed(index: TextIndex, ids: list[str], where: dict[str, int], changed: np.ndarray) -> None:
    """Set every document's time of last change in ``index`` at once: ``changed[i]`` is that of
    ``ids[i]`` (``where``: id -> i; a snapshot's rows, which hold them); 0 for an id not among
    them. A snapshot's rows are in slot order, so usually no lookup is made."""
    table = index._docs
    if table.ids == ids:  # the same string objects (TextIndex.from_bytes ``known``): one pass
        table.set_changed(changed)
        return
    pos = np.fromiter((where.get(d, -1) for d in table.ids), dtype=np.int64, count=len(table.ids))  # type: ignore[arg-type]
    found = pos >= 0
    out = np.zeros(len(pos), dtype=np.float64)
    out[found] = changed[pos[found]]
    table.set_changed(out)


def read_postings(index: TextIndex) -> None:
    """Read (and check) now every posting of an index loaded lazily (:meth:`TextIndex.from_bytes`)."""
    for seg in index._postings.segments:
        if seg.lazy:
            seg.docs  # noqa: B018  (the first use of the whole array reads and checks it)


def lazy_regions(index: TextIndex) -> list[codec.LazyRegion]:
    """The regions the postings of a lazily loaded index are still read from."""
    guards = [seg._guard for seg in index._postings.segments]
    return list({id(g.region): g.region for g in guards if isinstance(g, _Guard)}.values())


def _adopt(index: TextIndex, other: TextIndex) -> None:
    """``index`` takes ``other``'s contents (its documents, postings and settings), keeping its ``repair``."""
    repair = index.repair
    vars(index).update(vars(other))
    index.repair = repair


def _image_of(self: TextIndex) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The header and the arrays of the image (compacts the index first)."""
    self.compact()
    table = self._docs
    n = len(table.ids)
    segments = self._postings.segments
    arrays: list[np.ndarray] = []
    for s in segments:
        arrays += [s.terms, s.ptr, s.docs, s.tfs]
    arrays += [table.len[:n], table.layer[:n], table.bucket[:n], table.prior[:n]]
    arrays.append(np.frombuffer("\x00".join(table.ids).encode(), dtype=np.uint8))  # type: ignore[arg-type]
    arrays.append(np.frombuffer("\x00".join(self._vocab.terms).encode(), dtype=np.uint8))
    arrays += [table.cjk[:n], np.frombuffer(self._vocab.cjk, dtype=np.uint8)]
    header = {
        "k1": self.k1,
        "b": self.b,
        "n_docs": n,
        "n_terms": len(self._vocab.terms),
        "n_segments": len(segments),
    }
    return header, arrays


def _split_image(
    index: TextIndex, chunk: int | None
) -> tuple[list[bytes | memoryview], list[bytes | memoryview]]:
    """:meth:`TextIndex.to_split`."""
    header, arrays = _image_of(index)
    segments = index._postings.segments
    header["bounds"] = [list(s.bounds()) for s in segments]
    # per segment and term, its postings in CJK documents: what a query in a mixed
    # store asks of every posting (Segment.cjk_counts), so that it need not read them
    arrays += [s.cjk_counts(index._docs.cjk[: len(index._docs.ids)]) for s in segments]
    lazy = [i for k in range(len(segments)) for i in (4 * k + 2, 4 * k + 3)]
    return codec.encode_split(header, arrays, lazy, chunk)


def _split_arrays(
    data: bytes | memoryview, region: Callable[[int, int, np.ndarray], codec.LazyRegion]
) -> tuple[dict[str, Any], tuple[list[Segment], list[np.ndarray]]]:
    """The header, the (lazily checked) segments and the other arrays of a split image."""
    header, arrays, where, crcs = codec.decode_split(data)
    n_seg = int(header["n_segments"])
    if [w.index for w in where] != [i for k in range(n_seg) for i in (4 * k + 2, 4 * k + 3)]:
        raise ValueError("corrupt text index image (lazy arrays)")
    lazy = region(int(header["lazy_len"]), int(header["chunk"]), crcs)
    bounds = [(int(lo), int(hi)) for lo, hi in header["bounds"]]
    if len(bounds) != n_seg:
        raise ValueError("corrupt text index image (segment bounds)")
    segments = []
    n_cjk = arrays[len(arrays) - n_seg :]
    for k in range(n_seg):
        docs, tfs = where[2 * k], where[2 * k + 1]
        lazy.add_check(docs, functools.partial(_slots_within, bounds[k]))
        guard = _Guard(lazy, docs.offset, tfs.offset, docs.count)
        terms, ptr, counts = arrays[4 * k], arrays[4 * k + 1], n_cjk[k]
        assert terms is not None and ptr is not None and counts is not None
        seg = Segment(terms, ptr, lazy.array(docs), lazy.array(tfs), guard, bounds[k])
        if counts.dtype != np.int64 or len(counts) != len(terms):
            raise ValueError("corrupt text index image (CJK counts)")
        if len(counts) and (counts.min() < 0 or bool((counts > np.diff(ptr)).any())):
            raise ValueError("corrupt text index image (CJK counts)")
        seg.set_cjk_counts(counts)
        segments.append(seg)
    return header, (segments, [a for a in arrays[4 * n_seg : len(arrays) - n_seg] if a is not None])


def _index_from(
    index: TextIndex,
    header: dict[str, Any],
    parts: tuple[list[Segment], list[np.ndarray]],
    known: tuple[list[str], dict[str, int]] | None = None,
) -> TextIndex:
    """``index`` (new, empty) filled with an image's segments and other arrays (checked here).

    ``known``: see :meth:`TextIndex.from_bytes`.
    """
    segments, arrays = parts
    n, n_terms, n_seg = int(header["n_docs"]), int(header["n_terms"]), int(header["n_segments"])
    if len(segments) != n_seg or len(arrays) not in (6, 8):
        raise ValueError("corrupt text index image (array count)")
    doc_len, layer, bucket, prior, id_blob, term_blob, *flags = arrays
    slot = None
    if known is not None and _same_ids(id_blob, n, known):
        ids, slot = known[0], known[1].copy()
    else:
        ids = id_blob.tobytes().decode().split("\x00") if n else []
    terms = term_blob.tobytes().decode().split("\x00") if n_terms else []
    if len(ids) != n or len(terms) != n_terms:
        raise ValueError("corrupt text index image (id or vocabulary table)")
    if any(len(a) != n for a in (doc_len, layer, bucket, prior, *flags[:1])):
        raise ValueError("corrupt text index image (document tables)")
    if flags and (len(flags[1]) != n_terms or flags[0].dtype != np.uint8 or flags[1].dtype != np.uint8):
        raise ValueError("corrupt text index image (script flags)")
    for s in segments:
        s.check(n, n_terms)
    index._vocab = Vocab(terms, flags[1].tobytes() if flags else None)
    if len(index._vocab) != n_terms:
        raise ValueError("corrupt text index image (duplicate terms)")
    doc_cjk = flags[0] if flags else _doc_classes(segments, index._vocab, doc_len)
    index._docs.load(ids, doc_len, layer, bucket, prior, doc_cjk, slot)
    if len(index._docs.slot) != n:  # its id -> slot map, built anyway: no separate set
        raise ValueError("corrupt text index image (id or vocabulary table)")
    index._postings = Postings(segments)
    return index


def _same_ids(id_blob: np.ndarray, n: int, known: tuple[list[str], dict[str, int]]) -> bool:
    """True when the image's id table (``n`` ids) is exactly ``known``'s ids, in order."""
    ids, where = known
    if not n or len(ids) != n or len(where) != n:
        return False
    try:
        joined = "\x00".join(ids).encode()
    except UnicodeEncodeError:  # (a lone surrogate: the image's table could not hold it either)
        return False
    # n ids joined by n - 1 NULs, none of them in an id: the image's split would give these ids
    return id_blob.tobytes() == joined and joined.count(0) == n - 1


class _Guard:
    """Checks a lazily loaded segment's postings: their slots at ``docs`` (int32) and
    frequencies at ``tfs`` (uint16), offsets in ``region`` (see :class:`Segment`)."""

    __slots__ = ("docs", "nnz", "region", "tfs")

    def __init__(self, region: codec.LazyRegion, docs: int, tfs: int, nnz: int) -> None:
        self.region, self.docs, self.tfs, self.nnz = region, docs, tfs, nnz

    @property
    def complete(self) -> bool:
        return self.region.complete

    def need(self, start: int, stop: int) -> None:
        self.region.need_bytes(self.docs + 4 * start, self.docs + 4 * stop)
        self.region.need_bytes(self.tfs + 2 * start, self.tfs + 2 * stop)

    def need_ranges(self, starts: np.ndarray, stops: np.ndarray) -> None:
        self.region.need_ranges(
            np.concatenate([self.docs + 4 * starts, self.tfs + 2 * starts]),
            np.concatenate([self.docs + 4 * stops, self.tfs + 2 * stops]),
        )

    def need_all(self) -> None:
        # the two arrays and the padding between them: one range
        self.region.need_bytes(self.docs, self.tfs + 2 * self.nnz)


def _slots_within(bounds: tuple[int, int], buf: np.ndarray, start: int, stop: int) -> str | None:
    """Why the slots at bytes ``[start, stop)`` of ``buf`` are not within ``bounds``, else None."""
    slots = buf[start:stop].view(np.int32)
    if len(slots) and (int(slots.min()) < bounds[0] or int(slots.max()) > bounds[1]):
        return "a posting's slot is out of its segment's bounds"
    return None
