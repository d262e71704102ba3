"""Postings of the text index: the vocabulary and immutable CSR segments.

A :class:`Segment` holds, for its sorted term ids, the document slots and
term frequencies of each term. :class:`Postings` owns the list of segments
and a pending buffer: :meth:`Postings.append` buffers one document's term ids;
the buffer becomes a segment when a query needs it (:meth:`Postings.flush`)
or when it reaches 2^18 occurrences, and every 8 segments of one size tier
(``floor(log8(postings))``) are merged into one, so a posting is merged
O(log n) times and adding costs amortised O(terms). Compaction
(:meth:`Postings.compacted`) maps slots and terms through tables without
re-sorting.

Slots are the text index's document numbers; whether a slot is alive is the
document table's business (:mod:`md_cg.textindex_docs`), so the postings of a
removed document stay until compaction.

Imports only numpy, :mod:`md_cg.script` and the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .script import is_cjk

__all__ = ["PENDING_MAX", "SEARCH_RATIO", "Guard", "Postings", "Segment", "Vocab"]

#: Term occurrences buffered before they become a segment.
PENDING_MAX = 1 << 18
_MERGE_WIDTH = 8  # segments of one tier merged at once; tier = floor(log8(postings))
_MERGE_MAX = 1 << 24  # postings above which automatic merging stops
_MERGE_CHUNK = 1 << 20  # merge_all() places this many postings at a time
_FEW_TERMS = 16  # up to this many terms, gather() concatenates slices
#: A term's postings are binary-searched for wanted slots when they
#: outnumber those slots this many times, else scanned.
SEARCH_RATIO = 8
#: Above this many postings a segment does not build its slot-ordered
#: transpose (:meth:`Segment.by_slot`: an argsort of every posting, ~30 bytes
#: per posting at its peak and 4 kept) to answer "which terms does this
#: document hold" for a few documents: one pass over its slots does.
FWD_MAX = 1 << 24
#: Below this estimated cost (ns, :meth:`_Plan.cost_ns`) a segment small enough for
#: a transpose reads a few documents' postings without building it: the first
#: English question of a process at 100k nodes took 1.7 s, all of it the transpose.
PLAN_MAX_NS = 2_000_000
#: What building a transpose costs a posting (ns; 1.7 s for the 16M postings of 100k
#: seed-shaped nodes): a segment builds it once its plan has cost as much.
_FWD_NS_PER_POSTING = 100.0
#: What one span of :meth:`Segment.few_doc_postings`'s pass costs, in postings
#: scanned (a numpy call of ~2 us against ~2 ns a posting).
_SPAN_COST = 1000
#: The pass binary-searches the few slots in the postings of up to this many of
#: the longest terms, each of at least ``_SEARCH_MIN`` postings, instead of
#: scanning them (a search round costs ~7 ns a slot, so ~0.35 us for five slots
#: in 128 postings; a scan ~2.5 ns a posting).
_SEARCHED = 16384
_SEARCH_MIN = 128
_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_U16 = np.zeros(0, dtype=np.uint16)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


class Guard(Protocol):
    """What checks the postings of a segment loaded lazily (a snapshot's chunks, see
    :class:`md_cg.textindex_codec.LazyRegion`): raises when they are damaged."""

    @property
    def complete(self) -> bool:
        """True once every posting was checked."""

    def need(self, start: int, stop: int) -> None:
        """Check the postings ``[start, stop)`` (slots and frequencies)."""

    def need_ranges(self, starts: np.ndarray, stops: np.ndarray) -> None:
        """:meth:`need` of every ``[starts[i], stops[i])`` (int64 arrays)."""

    def need_all(self) -> None:
        """Check every posting."""


class _Plan:
    """How a big segment reads a few documents' postings of some terms (:meth:`Segment._plan_of`)."""

    __slots__ = (
        "check_starts",
        "check_stops",
        "checked",
        "rounds",
        "scanned",
        "searched",
        "spans",
        "spent",
        "terms",
    )

    def __init__(
        self, terms: np.ndarray | None, spans: list[tuple[int, int]], searched: np.ndarray, ptr: np.ndarray
    ) -> None:
        self.terms = terms  # the mask the plan was made for (identity)
        self.spans = spans
        self.searched = searched
        starts = np.array([a for a, _ in spans], dtype=np.int64)
        stops = np.array([z for _, z in spans], dtype=np.int64)
        # the postings the plan reads: checked once, on its first use
        self.check_starts = np.concatenate([starts, ptr[searched]])
        self.check_stops = np.concatenate([stops, ptr[searched + 1]])
        self.checked = False
        self.spent = 0.0  # estimated ns spent reading through this plan
        self.scanned = int((stops - starts).sum())
        longest = int((ptr[searched + 1] - ptr[searched]).max()) if len(searched) else 1
        self.rounds = max(1, (longest - 1).bit_length())

    def cost_ns(self, slots: int) -> float:
        """About what reading ``slots`` documents' postings with this plan costs (ns, on
        the machine of docs/benchmarks.md): ~2.5 ns a scanned posting, ~2 us a span,
        ~7 ns a search round of a (term, slot) pair."""
        return 2.5 * self.scanned + 2000.0 * len(self.spans) + 7.0 * len(self.searched) * slots * self.rounds


class Segment:
    """Immutable postings: term ``terms[i]`` is in slots ``docs[ptr[i]:ptr[i+1]]``.

    A segment of a snapshot may come with a ``guard``: its ``docs`` and
    ``tfs`` are then checked (and read) on first use -- the postings of a
    few terms through :meth:`postings` and :meth:`checked_ranges`, all of them on
    the first use of ``docs`` or ``tfs`` as a whole.
    """

    __slots__ = ("_bounds", "_docs", "_fwd", "_guard", "_n_cjk", "_plan", "_tfs", "ptr", "terms")

    def __init__(
        self,
        terms: np.ndarray,
        ptr: np.ndarray,
        docs: np.ndarray,
        tfs: np.ndarray,
        guard: Guard | None = None,
        bounds: tuple[int, int] | None = None,
    ):
        self.terms = terms  # int32, strictly increasing
        self.ptr = ptr  # int64, len(terms) + 1, strictly increasing
        self._docs = docs  # int32, increasing within a term
        self._tfs = tfs  # uint16, >= 1
        self._guard = guard
        self._n_cjk: np.ndarray | None = None
        self._fwd: tuple[np.ndarray, np.ndarray] | None = None
        self._bounds: tuple[int, int] | None = bounds
        self._plan: _Plan | None = None

    @property
    def docs(self) -> np.ndarray:
        """The slot of every posting (all of them checked first)."""
        if self._guard is not None:
            self._check_all()
        return self._docs

    @property
    def tfs(self) -> np.ndarray:
        """The term frequency of every posting (all of them checked first)."""
        if self._guard is not None:
            self._check_all()
        return self._tfs

    @property
    def lazy(self) -> bool:
        """True while some postings are not checked yet."""
        return self._guard is not None

    def _check_all(self) -> None:
        guard = self._guard
        if guard is not None:
            guard.need_all()
            self._guard = None

    def postings(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, frequencies) of the postings ``[start, stop)``, checking only those."""
        guard = self._guard
        if guard is not None:
            guard.need(start, stop)
            if guard.complete:
                self._guard = None
        return self._docs[start:stop], self._tfs[start:stop]

    def checked_ranges(self, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``docs`` and ``tfs`` whole, after checking the postings ``[starts[i], stops[i])``
        (int64 arrays; use only those)."""
        guard = self._guard
        if guard is not None:
            guard.need_ranges(starts, stops)
            if guard.complete:
                self._guard = None
        return self._docs, self._tfs

    def bounds(self) -> tuple[int, int]:
        """(lowest, highest) slot with a posting here; (0, -1) when empty. Computed once."""
        if self._bounds is None:
            self._bounds = (int(self.docs.min()), int(self.docs.max())) if len(self.docs) else (0, -1)
        return self._bounds

    def by_slot(self) -> tuple[np.ndarray, np.ndarray]:
        """(order, offsets): the postings of slot ``s`` are ``order[offsets[s]:offsets[s+1]]``.

        Built on first use and kept (segments never change): 4 bytes per
        posting and 8 per slot. A stable sort by slot, as one or two 16-bit
        radix passes (~0.5 s for 10 M postings; a 32-bit key sorts 3x slower).
        """
        if self._fwd is None:
            n = int(self.docs.max()) + 2 if len(self.docs) else 1
            key = self.docs.astype(np.int64)
            if n <= 1 << 16:
                order = np.argsort(key.astype(np.uint16), kind="stable")
            else:  # least significant half first, then the high half: a stable LSD radix sort
                order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
                order = order[np.argsort((key[order] >> 16).astype(np.uint16), kind="stable")]
            order = order.astype(np.int32)
            self._fwd = order, np.searchsorted(self.docs[order], np.arange(n, dtype=self.docs.dtype))
        return self._fwd

    def slot_terms(self, slots: np.ndarray) -> np.ndarray:
        """Term ids of every posting of ``slots`` (int64 array of slots; unknown ones have none)."""
        order, offsets = self.by_slot()
        slots = slots[(slots >= 0) & (slots < len(offsets) - 1)]
        lo, hi = offsets[slots], offsets[slots + 1]
        lengths = hi - lo
        at = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
        return self.terms[np.searchsorted(self.ptr, order[at], side="right") - 1]

    def doc_postings(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """(term ids, term frequencies) of ``slot``'s postings in this segment (empty if none)."""
        order, offsets = self.by_slot()
        if not 0 <= slot < len(offsets) - 1:
            return _EMPTY_I32, _EMPTY_U16
        at = order[offsets[slot] : offsets[slot + 1]]
        return self.terms[np.searchsorted(self.ptr, at, side="right") - 1], self.tfs[at]

    def few_doc_postings(
        self, slots: Sequence[int], terms: np.ndarray | None = None
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """(term ids, term frequencies) of each of a few ``slots`` that has postings here.

        ``terms`` (a bool per term id), when given, says which terms the caller
        wants: postings of the others may be left out. Through the transpose
        when it exists; else by reading the wanted terms' postings
        (:meth:`_pass_plan`) when that is cheap (:data:`PLAN_MAX_NS`) or the
        segment too big for a transpose (:data:`FWD_MAX`); else the transpose
        is built (once: ~0.1 us a posting, 1.7 s at 100k seed-shaped nodes),
        as it also is once the reads through the plan have cost about as much.
        """
        plan = None
        if self._fwd is None and (self.nnz > FWD_MAX or terms is not None):
            plan = self._plan_of(terms)
            if self.nnz <= FWD_MAX:
                cost = plan.cost_ns(len(slots))
                plan.spent += cost
                # rent until the rent paid reaches the price of buying (at most 2x the best
                # choice made knowing how many questions come): then build the transpose
                if cost > PLAN_MAX_NS or plan.spent > _FWD_NS_PER_POSTING * self.nnz:
                    plan = None
        if plan is None:
            found = {slot: self.doc_postings(slot) for slot in slots}
            return {slot: p for slot, p in found.items() if len(p[0])}
        lo, hi = self.bounds()
        wanted = [slot for slot in slots if lo <= slot <= hi]
        if not wanted:
            return {}
        table = np.zeros(hi + 1, dtype=bool)
        table[wanted] = True
        if self._guard is not None and not plan.checked:
            self.checked_ranges(plan.check_starts, plan.check_stops)
        plan.checked = True
        docs, tfs_all = self._docs, self._tfs
        found_at = [np.flatnonzero(table[docs[a:z]]) + a for a, z in plan.spans]
        found_at.append(_search_rows(docs, self.ptr, plan.searched, np.array(sorted(wanted), dtype=np.int64)))
        at = np.sort(np.concatenate(found_at))
        docs = docs[at]
        tids = self.terms[np.searchsorted(self.ptr, at, side="right") - 1]
        tfs = tfs_all[at]
        out = {}
        for slot in wanted:
            mine = docs == slot
            if mine.any():
                out[slot] = tids[mine], tfs[mine]
        return out

    def _plan_of(self, terms: np.ndarray | None) -> _Plan:
        """:meth:`_pass_plan` for ``terms``, kept while the same mask object comes back
        (the index passes one per vocabulary, :meth:`Vocab.latin`): a segment's terms and
        their flags never change, so neither does the plan nor the check of its postings."""
        plan = self._plan
        if plan is None or plan.terms is not terms:
            spans, searched = self._pass_plan(terms)
            plan = self._plan = _Plan(terms, spans, searched, self.ptr)
        return plan

    def _pass_plan(self, terms: np.ndarray | None) -> tuple[list[tuple[int, int]], np.ndarray]:
        """How :meth:`few_doc_postings` reads the postings of the terms flagged in
        ``terms`` (None: all) without the transpose: ``[start, stop)`` spans of adjacent
        terms' postings to scan, and the rows of the longest terms (at most
        :data:`_SEARCHED`, each of :data:`_SEARCH_MIN` postings or more) to binary-search
        for the slots. All postings in one span when the spans would cost more than
        the postings they skip (:data:`_SPAN_COST`)."""
        n = len(self.terms)
        if not n:
            return [], _EMPTY_I64
        flags = np.ones(n, dtype=bool)
        if terms is not None:
            known = self.terms < len(terms)
            flags[~known] = False
            flags[known] = terms[self.terms[known]]
        lens = np.diff(self.ptr)
        big = np.flatnonzero(flags & (lens >= _SEARCH_MIN))
        if len(big) > _SEARCHED:
            big = np.sort(big[np.argpartition(lens[big], len(big) - _SEARCHED)[len(big) - _SEARCHED :]])
        flags[big] = False
        rows = np.flatnonzero(flags)
        if not len(rows):
            return [], big
        cut = np.flatnonzero(np.diff(rows) != 1)
        starts = self.ptr[rows[np.r_[0, cut + 1]]]
        stops = self.ptr[rows[np.r_[cut, len(rows) - 1]] + 1]
        if len(starts) * _SPAN_COST + int((stops - starts).sum()) >= self.nnz:
            return [(0, self.nnz)], _EMPTY_I64
        return list(zip(starts.tolist(), stops.tolist(), strict=True)), big

    def cjk_counts(self, doc_cjk: np.ndarray) -> np.ndarray:
        """Per term, how many of its postings are in CJK documents (``doc_cjk``: slot -> 0/1).

        Computed once: a slot's class never changes, and a renumbering of the
        slots makes new segments.
        """
        if self._n_cjk is None:
            if len(self.terms):
                self._n_cjk = np.add.reduceat(doc_cjk[self.docs].astype(np.int64), self.ptr[:-1])
            else:
                self._n_cjk = np.zeros(0, dtype=np.int64)
        return self._n_cjk

    def set_cjk_counts(self, counts: np.ndarray) -> None:
        """Take :meth:`cjk_counts` as saved with the segment (its documents' classes are saved with it)."""
        self._n_cjk = counts

    @property
    def nnz(self) -> int:
        """Number of postings."""
        return len(self._docs)

    @classmethod
    def from_postings(cls, terms: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> Segment:
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

    def renumbered(self, slot_map: np.ndarray) -> Segment:
        """This segment with slots mapped through ``slot_map`` (-1 drops a posting).

        ``slot_map`` is increasing on the slots it keeps, so the (term, doc)
        order survives without a sort; terms left without postings go.
        """
        docs = slot_map[self.docs]  # int32 when the map is (TermDocs.compact): no second copy
        live = docs >= 0
        if live.all():
            return Segment(self.terms, self.ptr, docs.astype(np.int32, copy=False), self.tfs)
        # each term's postings less those of the dead slots, counted from the dead postings
        # alone (a forget kills one slot: a few hundred, not a pass over millions; session 42)
        gone = np.flatnonzero(~live)
        lost = np.bincount(np.searchsorted(self.ptr, gone, side="right") - 1, minlength=len(self.terms))
        counts = np.diff(self.ptr) - lost
        used = counts > 0
        ptr = np.zeros(int(np.count_nonzero(used)) + 1, dtype=np.int64)
        np.cumsum(counts[used], out=ptr[1:])
        return Segment(self.terms[used], ptr, docs[live].astype(np.int32, copy=False), self.tfs[live])

    def with_terms(self, terms: np.ndarray) -> Segment:
        """This segment with other term ids (the postings shared, checked or not as here)."""
        return Segment(terms, self.ptr, self._docs, self._tfs, self._guard, self._bounds)

    def check(self, n_docs: int, n_terms: int) -> None:
        """Structural checks of a loaded segment (ValueError; a checksum catches random damage).

        The slots of a lazily checked segment are checked chunk by chunk
        against its bounds when read (see :class:`Guard`); the bounds are checked here.
        """
        ptr, terms, docs, tfs = self.ptr, self.terms, self._docs, self._tfs
        if (
            ptr.dtype != np.int64
            or terms.dtype != np.int32
            or docs.dtype != np.int32
            or tfs.dtype != np.uint16
            or len(ptr) != len(terms) + 1
            or ptr[0] != 0
            or ptr[-1] != len(docs)
            or len(tfs) != len(docs)
            or np.any(np.diff(ptr) <= 0)
        ):
            raise ValueError("corrupt text index image (posting offsets)")
        if len(terms) and (np.any(np.diff(terms) <= 0) or terms[0] < 0 or terms[-1] >= n_terms):
            raise ValueError("corrupt text index image (term ids)")
        if self._guard is not None:
            lo, hi = self._bounds if self._bounds is not None else (-1, -1)
            if not ((lo, hi) == (0, -1) if not len(docs) else 0 <= lo <= hi < n_docs):
                raise ValueError("corrupt text index image (document slots)")
        elif len(docs) and (docs.min() < 0 or docs.max() >= n_docs):
            raise ValueError("corrupt text index image (document slots)")


def _tier(nnz: int) -> int:
    return max(0, nnz.bit_length() - 1) // 3


def _merge(segments: Sequence[Segment]) -> Segment:
    """One segment with the postings of ``segments`` (older first, disjoint slots)."""
    terms = np.concatenate([np.repeat(s.terms, np.diff(s.ptr)) for s in segments])
    docs = np.concatenate([s.docs for s in segments])
    tfs = np.concatenate([s.tfs for s in segments])
    # Each segment is sorted by (term, doc) and an older one holds lower
    # slots, so a stable sort by term (timsort: a k-way merge of the runs)
    # gives (term, doc) order.
    order = np.argsort(terms, kind="stable")
    return Segment.from_postings(terms[order], docs[order], tfs[order])


class Vocab(dict[str, int]):
    """term -> id; an unseen term gets the next id on lookup.

    ``terms``: id -> term; ``cjk``: id -> 1 when the term is CJK text (its
    first character is in :data:`md_cg.script.CJK_CHARS`), else 0. Terms
    come from :func:`md_cg.text.analyze`, whose terms are either all CJK or
    free of it.
    """

    def __init__(self, terms: list[str] | None = None, cjk: bytes | None = None) -> None:
        super().__init__()
        self.terms: list[str] = terms if terms is not None else []
        if cjk is not None and len(cjk) != len(self.terms):
            raise ValueError("one CJK flag per term is needed")
        self.cjk = bytearray(cjk) if cjk is not None else bytearray(map(is_cjk, self.terms))
        self._latin: np.ndarray | None = None
        if terms:
            self.update(zip(terms, range(len(terms)), strict=True))

    def latin(self) -> np.ndarray:
        """A read-only bool per term id, True for the terms that are not CJK.

        The same array until the vocabulary grows (segments key their reading
        plans on it, :meth:`Segment.few_doc_postings`)."""
        mask = self._latin
        if mask is None or len(mask) != len(self.terms):
            mask = np.frombuffer(self.cjk, dtype=np.uint8) == 0
            mask.flags.writeable = False
            self._latin = mask
        return mask

    def __missing__(self, term: str) -> int:
        if not isinstance(term, str) or "\x00" in term:
            raise ValueError(f"a term must be a str without NUL, not {term!r}")
        tid = len(self.terms)
        self.terms.append(term)
        self.cjk.append(is_cjk(term))
        self[term] = tid
        return tid

    def subset(self, kept: np.ndarray) -> Vocab:
        """A vocabulary of the terms ``kept`` (old ids, increasing): new id = position."""
        flags = np.frombuffer(self.cjk, dtype=np.uint8)[kept].tobytes()
        return Vocab([self.terms[t] for t in kept.tolist()], flags)


#: One term's postings in one segment: (segment, start, stop).
Span = tuple[Segment, int, int]


class Postings:
    """The segments of the index and the pending buffer of added documents."""

    __slots__ = ("_pend_chunks", "_pend_counts", "_pend_n", "_pend_slots", "_pend_terms", "segments")

    def __init__(self, segments: list[Segment] | None = None) -> None:
        self.segments: list[Segment] = segments if segments is not None else []
        self._pend_terms: list[int] = []
        self._pend_slots: list[int] = []
        self._pend_counts: list[int] = []
        #: buffered batches (term ids, slots, counts as arrays), older than the lists above
        self._pend_chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pend_n = 0  # term occurrences in _pend_chunks

    @property
    def pending(self) -> bool:
        """True when added documents are waiting to become a segment."""
        return bool(self._pend_counts) or bool(self._pend_chunks)

    @property
    def n_pending(self) -> int:
        """Term occurrences waiting to become a segment."""
        return self._pend_n + len(self._pend_terms)

    @property
    def full(self) -> bool:
        """True when the pending buffer should become a segment now."""
        return self.n_pending >= PENDING_MAX

    @property
    def room(self) -> int:
        """Term occurrences the pending buffer takes before it is :attr:`full`."""
        return PENDING_MAX - self.n_pending

    def append(self, slot: int, tids: list[int]) -> None:
        """Buffer the term ids of the document in ``slot`` (repeats count); see :attr:`full`."""
        if not tids:
            return
        self._pend_terms += tids
        self._pend_slots.append(slot)
        self._pend_counts.append(len(tids))

    def append_many(self, slots: np.ndarray, counts: np.ndarray, tids: np.ndarray) -> None:
        """:meth:`append` of several documents at once, as arrays.

        ``tids`` holds the term ids of ``slots[0]`` (``counts[0]`` of them),
        then of ``slots[1]``, ...; documents without terms are skipped as
        :meth:`append` skips them, so the buffer (and the segment it becomes)
        is the same as after one :meth:`append` per document.
        """
        keep = counts > 0
        if not keep.all():
            slots, counts = slots[keep], counts[keep]
        if not len(counts):
            return
        self._seal()
        self._pend_chunks.append(
            (tids.astype(np.int64, copy=False), slots.astype(np.int64, copy=False), counts.astype(np.int64))
        )
        self._pend_n += len(tids)

    def _seal(self) -> None:
        """Move the per-document lists into the chunk list (keeping the order of documents)."""
        if self._pend_counts:
            self._pend_chunks.append(
                (
                    np.array(self._pend_terms, dtype=np.int64),
                    np.array(self._pend_slots, dtype=np.int64),
                    np.array(self._pend_counts, dtype=np.int64),
                )
            )
            self._pend_n += len(self._pend_terms)
            self._pend_terms = []
            self._pend_slots = []
            self._pend_counts = []

    def flush(self, term_cjk: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Turn the pending buffer into a segment; merge full tiers.

        With ``term_cjk`` (term id -> 0/1) returns the slots that were
        pending and, for each, how many of its terms are CJK (repeats
        count), so that the caller can classify the documents in one
        vectorised step; else, or with nothing pending, None.
        """
        if not self.pending:
            return None
        self._seal()
        chunks, self._pend_chunks, self._pend_n = self._pend_chunks, [], 0
        if len(chunks) == 1:
            terms, doc_slots, counts = chunks[0]
        else:
            terms, doc_slots, counts = (np.concatenate(parts) for parts in zip(*chunks, strict=True))
        slots = np.repeat(doc_slots, counts)
        classes = None
        if term_cjk is not None:
            starts = np.cumsum(counts) - counts
            classes = (doc_slots, np.add.reduceat(term_cjk[terms].astype(np.int64), starts))
        key = (terms << 32) | slots
        key.sort()  # values only: the same array from any algorithm; the default is 6x timsort here
        first = np.empty(len(key), dtype=bool)
        first[0] = True
        np.not_equal(key[1:], key[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        tfs = np.diff(starts, append=len(key))
        np.minimum(tfs, 0xFFFF, out=tfs)
        key = key[starts]
        segs = self.segments
        segs.append(Segment.from_postings(key >> 32, key & 0xFFFFFFFF, tfs))
        # Merge the last 8 segments while the 8th-last is not of a higher tier
        # than the last: tiers then decrease along the list, at most 7
        # segments per tier remain, and a posting is merged O(log n) times.
        while (
            len(segs) >= _MERGE_WIDTH
            and _tier(segs[-_MERGE_WIDTH].nnz) <= _tier(segs[-1].nnz)
            and sum(s.nnz for s in segs[-_MERGE_WIDTH:]) <= _MERGE_MAX
        ):
            segs[-_MERGE_WIDTH:] = [_merge(segs[-_MERGE_WIDTH:])]
        return classes

    def merge_all(self) -> None:
        """Merge every segment into one (flush first): a query reads each term's postings in one piece.

        O(postings) without sorting: each segment's postings are copied to
        their place in the merged arrays, older segments first within a term
        (an older segment holds lower slots, so slots stay increasing), a
        bounded number of postings at a time, so the extra memory is about
        one copy of the postings. For maintenance (after a rebuild or a
        compaction), not for every write: the tiered merging keeps writes cheap.
        """
        segs = [s for s in self.segments if s.nnz]
        if len(segs) <= 1:
            self.segments = segs
            return
        terms = np.unique(np.concatenate([s.terms for s in segs]))
        counts = np.zeros(len(terms), dtype=np.int64)
        at_term = [np.searchsorted(terms, s.terms) for s in segs]
        for seg, where in zip(segs, at_term, strict=True):
            counts[where] += np.diff(seg.ptr)
        ptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        docs = np.empty(int(ptr[-1]), dtype=np.int32)
        tfs = np.empty(int(ptr[-1]), dtype=np.uint16)
        free = ptr[:-1].copy()  # next free position of each term's run
        for seg, where in zip(segs, at_term, strict=True):
            lengths = np.diff(seg.ptr)
            # chunks of whole terms, about _MERGE_CHUNK postings each
            cuts = np.searchsorted(seg.ptr, np.arange(0, seg.nnz, _MERGE_CHUNK), side="right") - 1
            for lo, hi in zip(cuts.tolist(), [*cuts[1:].tolist(), len(lengths)], strict=True):
                if lo >= hi:
                    continue
                a, z = int(seg.ptr[lo]), int(seg.ptr[hi])
                pos = np.repeat(free[where[lo:hi]] - seg.ptr[lo:hi], lengths[lo:hi]) + np.arange(a, z)
                docs[pos] = seg.docs[a:z]
                tfs[pos] = seg.tfs[a:z]
            free[where] += lengths
        self.segments = [Segment(terms.astype(np.int32), ptr, docs, tfs)]

    def compacted(self, slot_map: np.ndarray | None, n_terms: int) -> np.ndarray | None:
        """Renumber slots through ``slot_map`` (None: keep) and drop unused terms.

        The pending buffer must be empty (flushed by the caller, who
        classifies its documents). Returns the ids of the terms that are
        still used, in order (their new ids are their positions), or None
        when every one of the ``n_terms`` terms is still used and no term id
        changed.
        """
        if self.pending:
            raise RuntimeError("flush the pending documents before compacting")
        segments = self.segments
        if slot_map is not None:
            segments = [s.renumbered(slot_map) for s in segments]
            segments = [s for s in segments if s.nnz]
        used = np.zeros(n_terms, dtype=bool)
        for s in segments:
            used[s.terms] = True
        kept: np.ndarray | None = None
        if not used.all():
            # Every term left in a segment has postings; renumber the used ones.
            term_map = (np.cumsum(used) - 1).astype(np.int32)
            segments = [s.with_terms(term_map[s.terms]) for s in segments]
            kept = np.flatnonzero(used)
        self.segments = segments
        return kept

    def gather(self, tids: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All postings of the term ids ``tids``, dead slots included (flush first).

        Returns parallel arrays: index into ``tids`` (int64), slot (int64) and
        term frequency (uint16); per segment, terms in ``tids`` order.
        """
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        q = np.asarray(tids, dtype=np.int32)
        for seg in self.segments if len(q) else ():
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
            all_docs, all_tfs = seg.checked_ranges(lo, hi)
            if len(hit) <= _FEW_TERMS:
                spans = list(zip(lo.tolist(), hi.tolist(), strict=True))
                docs = np.concatenate([all_docs[a:z] for a, z in spans], dtype=np.int64)
                tfs = np.concatenate([all_tfs[a:z] for a, z in spans])
            else:  # many terms: positions of all their postings, one gather
                at = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
                at += np.arange(len(at))
                docs, tfs = all_docs[at].astype(np.int64), all_tfs[at]
            parts.append((np.repeat(hit, lengths), docs, tfs))
        if not parts:
            return _EMPTY_I64, _EMPTY_I64, _EMPTY_U16
        if len(parts) == 1:
            return parts[0]
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )

    def holders(self, tids: Sequence[int], slots: np.ndarray) -> list[tuple[int, int]]:
        """(index into ``tids``, slot) for each of the sorted ``slots`` holding each term (flush first).

        By binary search of the few ``slots`` in each term's postings, skipping
        segments that hold none of them: O(terms x slots x log postings), not
        O(postings) like :meth:`gather`. Pairs come by segment, then in ``tids`` order.
        """
        out: list[tuple[int, int]] = []
        if not len(slots) or not len(tids):
            return out
        q = np.asarray(tids, dtype=np.int32)
        first, last = int(slots[0]), int(slots[-1])
        for seg in self.segments:
            lo, hi = seg.bounds()
            if hi < first or lo > last or len(seg.terms) == 0:
                continue
            want = slots[np.searchsorted(slots, lo) : np.searchsorted(slots, hi, side="right")]
            if not len(want):
                continue
            pos = np.searchsorted(seg.terms, q)
            pos[pos >= len(seg.terms)] = 0
            for h in np.flatnonzero(seg.terms[pos] == q).tolist():
                p = int(pos[h])
                docs = seg.postings(int(seg.ptr[p]), int(seg.ptr[p + 1]))[0]
                at = np.searchsorted(docs, want.astype(docs.dtype))  # like dtypes: no copy of docs
                at[at >= len(docs)] = 0
                out += [(h, s) for s in want[docs[at] == want].tolist()]
        return out

    def holding(self, tid: int, slots: np.ndarray) -> np.ndarray:
        """The sorted ``slots`` whose document holds the term id ``tid`` (flush first): a
        binary search of them in the term's postings, segment by segment."""
        held = np.zeros(len(slots), dtype=bool)
        if not len(slots):
            return slots
        first, last = int(slots[0]), int(slots[-1])
        for seg in self.segments:
            lo, hi = seg.bounds()
            if hi < first or lo > last or len(seg.terms) == 0:
                continue
            p = int(np.searchsorted(seg.terms, tid))
            if p >= len(seg.terms) or int(seg.terms[p]) != tid:
                continue
            docs = seg.postings(int(seg.ptr[p]), int(seg.ptr[p + 1]))[0]
            if len(docs):
                at = np.searchsorted(docs, slots.astype(docs.dtype))
                at[at >= len(docs)] = 0
                held |= docs[at] == slots
        return slots[held]

    def within(
        self, tids: Sequence[int], slots: np.ndarray, mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The postings of :meth:`gather` whose slot is among the sorted ``slots``, in the same order.

        ``mask``: a per-slot boolean array true exactly at ``slots``. A term's
        postings are binary-searched for the slots when those are few beside
        them, else filtered through ``mask``; segments holding none of the
        slots are skipped. So a small scope costs about its size per term,
        not the term's postings.
        """
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        q = np.asarray(tids, dtype=np.int32)
        for seg in self.segments if len(q) and len(slots) else ():
            lo, hi = seg.bounds()
            want = slots[np.searchsorted(slots, lo) : np.searchsorted(slots, hi, side="right")]
            if not len(want) or not len(seg.terms):
                continue
            pos = np.searchsorted(seg.terms, q)
            pos[pos >= len(seg.terms)] = 0
            for h in np.flatnonzero(seg.terms[pos] == q).tolist():
                p = int(pos[h])
                a, z = int(seg.ptr[p]), int(seg.ptr[p + 1])
                docs, tfs = seg.postings(a, z)
                if len(want) * SEARCH_RATIO < z - a:
                    at = np.searchsorted(docs, want.astype(docs.dtype))
                    at[at >= len(docs)] = 0
                    at = at[docs[at] == want]
                else:
                    at = np.flatnonzero(mask[docs])
                if len(at):
                    parts.append((np.full(len(at), h, dtype=np.int64), docs[at].astype(np.int64), tfs[at]))
        if not parts:
            return _EMPTY_I64, _EMPTY_I64, _EMPTY_U16
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]

    def docs_terms(
        self, slots: Sequence[int], terms: np.ndarray | None = None
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """:meth:`doc_terms` of a few slots at once (flush first); slots without postings are left out.

        ``terms`` (a bool per term id) narrows the answer to those terms where
        that is cheaper (:meth:`Segment.few_doc_postings`); others may be left in.
        """
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for seg in reversed(self.segments):
            # a segment holds none of the slots outside its bounds: it need not build its
            # transpose (~0.5 s for 12 M postings) to say so
            lo, hi = seg.bounds()
            left = [slot for slot in slots if lo <= slot <= hi and slot not in out]
            if left:
                out.update(seg.few_doc_postings(left, terms))
        return out

    def doc_terms(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """(term ids, term frequencies) of one slot (flush first): its postings live in one segment."""
        for seg in reversed(self.segments):
            tids, tfs = seg.doc_postings(slot)
            if len(tids):
                return tids, tfs
        return _EMPTY_I32, _EMPTY_U16

    def dead_counts(self, dead: np.ndarray, tids: np.ndarray) -> np.ndarray:
        """Per term id of ``tids``, its postings in the sorted slots ``dead`` (flush first).

        Reads only those terms' postings, without a transpose: a term's postings
        are scanned, or the dead slots binary-searched in them when that is
        cheaper (:func:`search_ranges`)."""
        out = np.zeros(len(tids), dtype=np.int64)
        if not len(dead) or not len(tids):
            return out
        tids = np.asarray(tids, dtype=np.int32)  # the terms' dtype: searching copies no vocabulary
        flags = np.zeros(int(dead[-1]) + 1, dtype=bool)
        flags[dead] = True
        for seg in self.segments:
            if len(seg.terms) == 0:
                continue
            pos = np.searchsorted(seg.terms, tids)
            pos[pos >= len(seg.terms)] = 0
            hit = np.flatnonzero(seg.terms[pos] == tids)
            if not len(hit):
                continue
            starts, stops = seg.ptr[pos[hit]], seg.ptr[pos[hit] + 1]
            docs, _ = seg.checked_ranges(starts, stops)
            lengths = stops - starts
            # a scan costs ~2.5 ns a posting, a search ~7 ns a round per dead slot
            rounds = np.maximum(1, np.ceil(np.log2(np.maximum(lengths, 2))))
            search = 7.0 * len(dead) * rounds < 2.5 * lengths
            for i in np.flatnonzero(~search).tolist():
                got = docs[starts[i] : stops[i]]
                out[hit[i]] += int(np.count_nonzero(flags[got[got < len(flags)]]))
            rows = np.flatnonzero(search)
            if len(rows):
                pairs, _ = search_ranges(docs, starts[rows], stops[rows], dead)
                out[hit[rows]] += np.bincount(pairs // len(dead), minlength=len(rows))
        return out

    def counts(self, tids: np.ndarray, doc_cjk: np.ndarray | None = None) -> np.ndarray:
        """Postings per term id of ``tids`` over all segments (dead slots included).

        With ``doc_cjk`` (slot -> 0/1), only the postings in non-CJK documents.
        """
        out = np.zeros(len(tids), dtype=np.int64)
        tids = np.asarray(tids, dtype=np.int32)  # the terms' dtype: searching copies no vocabulary
        for seg in self.segments:
            if len(seg.terms) == 0:
                continue
            pos = np.searchsorted(seg.terms, tids)
            pos[pos >= len(seg.terms)] = 0
            hit = seg.terms[pos] == tids
            out[hit] += seg.ptr[pos[hit] + 1] - seg.ptr[pos[hit]]
            if doc_cjk is not None:
                out[hit] -= seg.cjk_counts(doc_cjk)[pos[hit]]
        return out

    def spans(
        self, tids: Sequence[int], doc_cjk: np.ndarray | None = None
    ) -> tuple[list[list[Span]], list[int] | None]:
        """Per term id: the (segment, start, stop) of its postings in each segment.

        With ``doc_cjk`` (slot -> 0/1) also, per term id, how many of its
        postings are in CJK documents (dead slots included); else None.
        """
        q = np.asarray(tids, dtype=np.int32)
        spans: list[list[Span]] = [[] for _ in tids]
        cjk = [0] * len(tids) if doc_cjk is not None else None
        for seg in self.segments:
            if len(seg.terms) == 0:
                continue
            pos = np.searchsorted(seg.terms, q)
            pos[pos >= len(seg.terms)] = 0
            hits = np.flatnonzero(seg.terms[pos] == q).tolist()
            if not hits:
                continue
            counts = seg.cjk_counts(doc_cjk) if cjk is not None and doc_cjk is not None else None
            for h in hits:
                p = int(pos[h])
                spans[h].append((seg, int(seg.ptr[p]), int(seg.ptr[p + 1])))
                if counts is not None and cjk is not None:
                    cjk[h] += int(counts[p])
        return spans, cjk


def _search_rows(docs: np.ndarray, ptr: np.ndarray, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Positions of the postings of the slots ``wanted`` (sorted) among those of the
    term rows ``rows`` (:func:`search_ranges` of the rows' postings)."""
    return search_ranges(docs, ptr[rows], ptr[rows + 1], wanted)[1]


def search_ranges(
    docs: np.ndarray, starts: np.ndarray, stops: np.ndarray, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Where the slots ``wanted`` (sorted) occur in each sorted run ``docs[starts[r]:stops[r]]``
    (no run empty): ``(pairs, positions)`` of the hits, ``pair = r * len(wanted) + i``
    for ``wanted[i]`` in run ``r``, in increasing pair order.

    A binary search per (run, slot), all advanced together and branch-free:
    every search halves its range each round (``ceil(log2)`` of the longest run
    rounds), with no compaction of the finished ones, ~2x fewer array operations
    than a lo/hi search."""
    if not len(starts) or not len(wanted):
        return _EMPTY_I64, _EMPTY_I64
    m = len(wanted)
    base = np.repeat(starts.astype(np.int64), m)
    length = np.repeat((stops - starts).astype(np.int64), m)
    end = base + length
    want = np.tile(wanted, len(starts))
    longest = int(length.max())
    while longest > 1:
        half = length >> 1
        # the first ``length`` postings from ``base`` hold the answer; keep the half that does
        base += half * (docs[base + half] < want)
        length -= half
        longest -= longest >> 1
    at = base + (docs[base] < want)  # the first posting >= the slot, or the run's end
    inside = np.flatnonzero(at < end)
    found = docs[at[inside]] == want[inside]
    return inside[found], at[inside[found]]
