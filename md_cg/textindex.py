"""An in-memory BM25 index over analysed text, with a bigram-similarity fallback.

Documents are string ids carrying their terms (from :func:`md_cg.text.analyze`),
two small integer codes (``layer``, ``bucket``) that define search scopes, and
a ``prior`` (the node's importance) that only breaks ties.

Two ways to find documents:

* :meth:`TextIndex.match` -- Okapi BM25 over the documents some query term
  occurs in (search tiers T0/T2). Every matching document in scope is scored
  before the result is cut to ``k``.
* :meth:`TextIndex.similar` -- character-similarity fallback for text no
  term matches (tiers T1/T3): query words are compared with the vocabulary
  through a padded-bigram -> term map, CJK characters through their unigram
  terms (or the vocabulary bigrams that contain them), and documents are
  scored through those terms' postings. It always returns
  ``min(k, documents in scope)`` results.

Layout: postings live in a few immutable CSR *segments* (term ids, offsets,
document slots, term frequencies). :meth:`~TextIndex.add` only appends term
ids to a pending buffer; the buffer becomes a segment when a query needs it
(or when it grows large), and small segments are merged into larger ones
geometrically, so adding costs amortised O(terms). Removing or replacing a
document leaves a dead slot that the next compaction (automatic once a
quarter of the slots are dead, and always in :meth:`~TextIndex.to_bytes`)
reclaims.

Not thread-safe: read methods may flush, merge or compact internal state,
so callers serialise every call (one lock around the index).

This module imports only numpy, rapidfuzz, PyStemmer and the standard library.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import struct
import unicodedata
import zlib
from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import Stemmer
from rapidfuzz.utils import default_process

__all__ = ["DEFAULT_B", "DEFAULT_K1", "SIMILAR_THRESHOLD", "Scope", "TextIndex"]

#: BM25 term-frequency saturation (chosen on the dev splits, docs/ranking.md).
DEFAULT_K1 = 0.6
#: BM25 length normalisation (chosen on the dev splits, docs/ranking.md).
DEFAULT_B = 0.4
#: Minimum Dice coefficient of padded character bigrams for a vocabulary term
#: to count as similar to a query word in :meth:`TextIndex.similar`.
SIMILAR_THRESHOLD = 0.5

_CJK_CHARS = (
    "\u3005-\u3007\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\u1100-\u11ff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_CJK_RE = re.compile(f"[{_CJK_CHARS}]")
_CJK_SPLIT_RE = re.compile(f"([{_CJK_CHARS}]+)")
_CYRILLIC_RE = re.compile("[\u0400-\u04ff]")

_MAGIC = b"MDCGTIX1"
_PENDING_MAX = 1 << 20  # term occurrences buffered before they become a segment
_MERGE_FACTOR = 4  # merge trailing segments while the older is < 4x the newer
_MAX_SEGMENTS = 8
_COMPACT_MIN_DEAD = 1024
_SCOPE_CACHE = 16
_EMPTY_I32 = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True)
class Scope:
    """A selection of documents: layer in ``layers`` AND bucket in ``buckets``.

    ``None`` means any. Obtain one from :meth:`TextIndex.scope`; it stays
    valid across changes to the index (membership is evaluated at use).
    """

    layers: frozenset[int] | None = None
    buckets: frozenset[int] | None = None


class _Segment:
    """Immutable postings: for term ``terms[i]``, slots ``docs[ptr[i]:ptr[i+1]]``."""

    __slots__ = ("docs", "ptr", "terms", "tfs")

    def __init__(self, terms: np.ndarray, ptr: np.ndarray, docs: np.ndarray, tfs: np.ndarray):
        self.terms = terms  # int32, sorted, unique
        self.ptr = ptr  # int64, len(terms) + 1
        self.docs = docs  # int32, sorted within a term
        self.tfs = tfs  # uint16

    @property
    def nnz(self) -> int:
        return len(self.docs)

    @classmethod
    def from_pairs(cls, terms: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> _Segment:
        """Build from postings sorted by (term, doc)."""
        if len(terms) == 0:
            return cls(_EMPTY_I32, np.zeros(1, np.int64), _EMPTY_I32, np.zeros(0, np.uint16))
        first = np.empty(len(terms), dtype=bool)
        first[0] = True
        np.not_equal(terms[1:], terms[:-1], out=first[1:])
        starts = np.flatnonzero(first)
        ptr = np.empty(len(starts) + 1, dtype=np.int64)
        ptr[:-1] = starts
        ptr[-1] = len(terms)
        return cls(terms[starts].astype(np.int32), ptr, docs.astype(np.int32), tfs)

    def term_column(self) -> np.ndarray:
        """The term id of every posting (int64)."""
        return np.repeat(self.terms.astype(np.int64), np.diff(self.ptr))


def _merge_segments(segments: Sequence[_Segment], keep: np.ndarray | None) -> _Segment:
    """One segment holding the postings of ``segments`` (slots renumbered).

    ``keep``: when given, a map old slot -> new slot (-1 drops the posting).
    """
    terms = np.concatenate([s.term_column() for s in segments])
    docs = np.concatenate([s.docs for s in segments]).astype(np.int64)
    tfs = np.concatenate([s.tfs for s in segments])
    if keep is not None:
        docs = keep[docs]
        live = docs >= 0
        terms, docs, tfs = terms[live], docs[live], tfs[live]
    if len(terms) and (terms.max() < (1 << 23)) and (docs.max() < (1 << 24)):
        # One SIMD sort of packed (term, doc, tf) keys beats argsort + gathers.
        key = (terms << 40) | (docs << 16) | tfs.astype(np.int64)
        key.sort()
        return _Segment.from_pairs(
            key >> 40, (key >> 16) & 0xFFFFFF, (key & 0xFFFF).astype(np.uint16)
        )
    order = np.lexsort((docs, terms))
    return _Segment.from_pairs(terms[order], docs[order], tfs[order])


class _Vocab(dict[str, int]):
    """term -> id; an unseen term gets the next id on lookup."""

    def __init__(self) -> None:
        super().__init__()
        self.terms: list[str] = []

    def __missing__(self, term: str) -> int:
        if "\x00" in term:
            raise ValueError("a term may not contain NUL")
        tid = len(self.terms)
        self.terms.append(term)
        self[term] = tid
        return tid


def _padded_bigrams(word: str) -> set[str]:
    s = f"\x02{word}\x03"
    return {s[i : i + 2] for i in range(len(s) - 1)}


def _dice(a: set[str], b: set[str]) -> float:
    return 2.0 * len(a & b) / (len(a) + len(b))


_STEMMERS: dict[str, Stemmer.Stemmer] = {}


def _default_query_terms(query: str) -> list[str]:
    """Query terms when no analyzer is given: stemmed words and CJK bigrams/characters."""
    s = default_process(unicodedata.normalize("NFKC", query))
    if not _STEMMERS:
        _STEMMERS["en"] = Stemmer.Stemmer("english")
        _STEMMERS["ru"] = Stemmer.Stemmer("russian")
    out: list[str] = []
    for i, part in enumerate(_CJK_SPLIT_RE.split(s)):
        if i % 2:
            out += [part[j : j + 2] for j in range(len(part) - 1)] or [part]
        else:
            for w in part.split():
                lang = "ru" if _CYRILLIC_RE.search(w) else "en"
                out.append(_STEMMERS[lang].stemWord(w.casefold()))
    return out


class TextIndex:
    """BM25 over string-identified documents with layer/bucket scopes.

    ``k1``/``b``: BM25 parameters. ``analyzer``: turns a query string into
    terms for :meth:`similar` (the engine passes :func:`md_cg.text.query_terms`
    so that stopwords and question words are ignored); without one, a plain
    built-in analysis is used (NFKC, lower case, Snowball stems, CJK bigrams).
    """

    def __init__(
        self,
        *,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        analyzer: Callable[[str], list[str]] | None = None,
    ) -> None:
        if not (k1 >= 0 and 0 <= b <= 1):
            raise ValueError("BM25 needs k1 >= 0 and 0 <= b <= 1")
        self.k1 = float(k1)
        self.b = float(b)
        self.analyzer = analyzer or _default_query_terms
        self._vocab = _Vocab()
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []
        cap = 64
        self._len = np.zeros(cap, dtype=np.int32)
        self._layer = np.zeros(cap, dtype=np.int32)
        self._bucket = np.zeros(cap, dtype=np.int32)
        self._prior = np.zeros(cap, dtype=np.float64)
        self._alive = np.zeros(cap, dtype=bool)
        self._live_len = 0  # sum of live document lengths
        self._dead = 0
        self._segments: list[_Segment] = []
        self._pend_terms = array("i")
        self._pend_slots: list[int] = []
        self._pend_counts: list[int] = []
        self._version = 0
        self._masks: dict[Scope, np.ndarray] = {}
        self._masks_version = -1
        # similar(): key (padded bigram / CJK character) -> term ids
        self._sim_keys: dict[str, array] = {}
        self._sim_nbg = array("i")  # padded-bigram count per term id (0 for CJK terms)
        self._sim_built = 0

    # ------------------------------------------------------------------ writes

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
        """Index ``doc_id`` with ``terms`` (repeats count), replacing any earlier version."""
        if not isinstance(doc_id, str) or "\x00" in doc_id:
            raise ValueError(f"document id must be a str without NUL, not {doc_id!r}")
        if doc_id in self._slot:
            self._kill(self._slot.pop(doc_id))
        slot = len(self._ids)
        if slot == len(self._len):
            self._grow()
        before = len(self._pend_terms)
        self._pend_terms.extend(map(self._vocab.__getitem__, terms))
        n = len(self._pend_terms) - before
        self._ids.append(doc_id)
        self._slot[doc_id] = slot
        self._len[slot] = n
        self._layer[slot] = layer
        self._bucket[slot] = bucket
        self._prior[slot] = prior
        self._alive[slot] = True
        self._live_len += n
        if n:
            self._pend_slots.append(slot)
            self._pend_counts.append(n)
            if len(self._pend_terms) >= _PENDING_MAX:
                self._flush()
        self._version += 1

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
        """Change a document's codes or prior without touching its terms (KeyError if absent)."""
        slot = self._slot[doc_id]
        if layer is not None:
            self._layer[slot] = layer
        if bucket is not None:
            self._bucket[slot] = bucket
        if prior is not None:
            self._prior[slot] = prior
        self._version += 1

    def compact(self) -> None:
        """Reclaim dead slots, merge all postings into one segment and drop unused terms."""
        self._flush()
        alive = self._alive[: len(self._ids)]
        keep = np.full(len(self._ids), -1, dtype=np.int64)
        live_slots = np.flatnonzero(alive)
        keep[live_slots] = np.arange(len(live_slots))
        seg = _merge_segments(self._segments, keep) if self._segments else None
        ids = [self._ids[s] for s in live_slots.tolist()]
        n = len(ids)
        cap = max(64, n + n // 4)
        for name in ("_len", "_layer", "_bucket", "_prior", "_alive"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[:n] = old[live_slots]
            setattr(self, name, new)
        self._ids = list(ids)
        self._slot = {d: i for i, d in enumerate(ids)}
        self._dead = 0
        self._segments = [seg] if seg is not None and seg.nnz else []
        if seg is None or seg.nnz == 0:
            seg = _Segment.from_pairs(_EMPTY_I32, _EMPTY_I32, np.zeros(0, np.uint16))
        if len(seg.terms) < len(self._vocab.terms):
            self._drop_unused_terms(seg)
        self._version += 1

    # ------------------------------------------------------------------ scopes

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

    # ----------------------------------------------------------------- queries

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
        multiplied by its weight, weights of a repeated term add up, and
        terms with weight <= 0 or unknown to the index are ignored. Returns
        the best ``k`` (all when None) as (id, score), score > 0, ordered by
        score desc, prior desc, id asc. Every candidate is scored first.
        """
        self._prepare()
        weights: dict[int, float] = {}
        for term, w in weighted_terms:
            tid = self._vocab.get(term)
            if tid is not None and w > 0:
                weights[tid] = weights.get(tid, 0.0) + float(w)
        if not weights or (k is not None and k <= 0):
            return []
        mask = self._mask(scope)
        n_live = len(self._slot)
        avgdl = self._live_len / n_live if n_live else 1.0
        alive = self._alive
        docs_parts: list[np.ndarray] = []
        score_parts: list[np.ndarray] = []
        k1, b = self.k1, self.b
        for tid, w in weights.items():
            docs, tfs = self._postings(tid)
            if len(docs) == 0:
                continue
            df = int(np.count_nonzero(alive[docs]))
            if df == 0:
                continue
            idf = math.log(1.0 + (n_live - df + 0.5) / (df + 0.5))
            sel = mask[docs]
            docs = docs[sel]
            if len(docs) == 0:
                continue
            tf = tfs[sel].astype(np.float64)
            norm = self._len[docs] * (k1 * b / avgdl) + k1 * (1.0 - b)
            docs_parts.append(docs)
            score_parts.append((w * idf * (k1 + 1.0)) * tf / (tf + norm))
        if not docs_parts:
            return []
        n_slots = len(self._ids)
        scores = np.bincount(
            np.concatenate(docs_parts), weights=np.concatenate(score_parts), minlength=n_slots
        )
        self._zero_excluded(scores, exclude)
        cand = np.flatnonzero(scores > 0)
        return self._ranked(cand, scores[cand], k)

    def similar(
        self,
        query: str,
        scope: Scope,
        *,
        k: int,
        exclude: Collection[str] = (),
    ) -> list[tuple[str, float]]:
        """Character-similarity ranking of the documents in ``scope``.

        Units of the query (from the analyzer's terms): each alphabetic term
        ``q``; each distinct CJK character of its CJK terms; each CJK bigram.
        A unit's candidate vocabulary terms and their similarity ``sim``:

        * alphabetic ``q``: terms ``t`` (non-CJK) whose padded character
          bigrams (``\\x02q\\x03``) have a Dice coefficient >= 0.5 with
          ``q``'s; ``sim`` = that coefficient (1.0 for ``t == q``);
        * CJK character ``c``: the unigram term ``c`` when the vocabulary has
          it (``sim`` 1.0); otherwise every CJK term containing ``c``,
          ``sim`` = 1 / len(t);
        * CJK bigram: the same term only, ``sim`` 1.0.

        score(d) = sum over units of max over the document's candidate terms
        of ``sim * idf(t)``, with the BM25 idf over live documents
        (ln(1 + (N - df + 0.5) / (df + 0.5))). Term frequency and document
        length are ignored.

        Returns exactly min(k, documents in scope not excluded) pairs
        (id, score): positive scores first (score desc, prior desc, id asc),
        then zero-score documents (prior desc, id asc).
        """
        self._prepare()
        if k <= 0:
            return []
        mask = self._mask(scope)
        n_slots = len(self._ids)
        scores = np.zeros(n_slots, dtype=np.float64)
        n_live = len(self._slot)
        alive = self._alive
        for cands in self._similar_units(self.analyzer(query)):
            docs_parts: list[np.ndarray] = []
            w_parts: list[np.ndarray] = []
            for tid, sim in cands:
                docs, _ = self._postings(tid)
                if len(docs) == 0:
                    continue
                df = int(np.count_nonzero(alive[docs]))
                if df == 0:
                    continue
                docs = docs[mask[docs]]
                if len(docs) == 0:
                    continue
                idf = math.log(1.0 + (n_live - df + 0.5) / (df + 0.5))
                docs_parts.append(docs)
                w_parts.append(np.full(len(docs), sim * idf))
            if not docs_parts:
                continue
            if len(docs_parts) == 1:
                scores[docs_parts[0]] += w_parts[0]
                continue
            docs = np.concatenate(docs_parts)
            w = np.concatenate(w_parts)
            order = np.lexsort((-w, docs))  # by doc, best weight first
            docs, w = docs[order], w[order]
            first = np.empty(len(docs), dtype=bool)
            first[0] = True
            np.not_equal(docs[1:], docs[:-1], out=first[1:])
            scores[docs[first]] += w[first]
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

    # ------------------------------------------------------------- persistence

    def to_bytes(self) -> bytes:
        """A compact binary image of the index (compacts it first)."""
        self.compact()
        n = len(self._ids)
        seg = self._segments[0] if self._segments else None
        arrays: list[tuple[str, np.ndarray]] = [
            ("seg_terms", seg.terms if seg else _EMPTY_I32),
            ("seg_ptr", seg.ptr if seg else np.zeros(1, np.int64)),
            ("docs", seg.docs if seg else _EMPTY_I32),
            ("tfs", seg.tfs if seg else np.zeros(0, np.uint16)),
            ("len", self._len[:n]),
            ("layer", self._layer[:n]),
            ("bucket", self._bucket[:n]),
            ("prior", self._prior[:n]),
            ("ids", np.frombuffer("\x00".join(self._ids).encode(), dtype=np.uint8)),  # type: ignore[arg-type]
            ("vocab", np.frombuffer("\x00".join(self._vocab.terms).encode(), dtype=np.uint8)),
        ]
        header = {
            "k1": self.k1,
            "b": self.b,
            "n_docs": n,
            "n_terms": len(self._vocab.terms),
            "arrays": [[name, a.dtype.str, len(a)] for name, a in arrays],
        }
        head = json.dumps(header).encode()
        out = bytearray(_MAGIC)
        out += struct.pack("<I", len(head))
        out += head
        for _, a in arrays:
            out += b"\x00" * (-len(out) % 8)
            out += np.ascontiguousarray(a).tobytes()
        out += struct.pack("<I", zlib.crc32(out))
        return bytes(out)

    @classmethod
    def from_bytes(
        cls, data: bytes, *, analyzer: Callable[[str], list[str]] | None = None
    ) -> TextIndex:
        """Load an index written by :meth:`to_bytes`; ValueError when ``data`` is not one."""
        try:
            return cls._load(memoryview(data), analyzer)
        except ValueError:
            raise
        except (KeyError, TypeError, IndexError, struct.error, UnicodeDecodeError) as exc:
            raise ValueError(f"corrupt text index: {exc}") from None

    @classmethod
    def _load(cls, data: memoryview, analyzer: Callable[[str], list[str]] | None) -> TextIndex:
        if len(data) < len(_MAGIC) + 8 or bytes(data[: len(_MAGIC)]) != _MAGIC:
            raise ValueError("not a text index (bad magic)")
        (crc,) = struct.unpack("<I", data[-4:])
        if zlib.crc32(data[:-4]) != crc:
            raise ValueError("corrupt text index (checksum mismatch)")
        (head_len,) = struct.unpack("<I", data[8:12])
        header = json.loads(bytes(data[12 : 12 + head_len]))
        pos = 12 + head_len
        arrays: dict[str, np.ndarray] = {}
        for name, dtype, count in header["arrays"]:
            pos += -pos % 8
            dt = np.dtype(dtype)
            end = pos + dt.itemsize * int(count)
            if end > len(data) - 4:
                raise ValueError("corrupt text index (truncated)")
            arrays[name] = np.frombuffer(data[pos:end], dtype=dt)
            pos = end
        n, n_terms = int(header["n_docs"]), int(header["n_terms"])
        ids = bytes(arrays["ids"]).decode().split("\x00") if n else []
        terms = bytes(arrays["vocab"]).decode().split("\x00") if n_terms else []
        seg = _Segment(arrays["seg_terms"], arrays["seg_ptr"], arrays["docs"], arrays["tfs"])
        _check_loaded(seg, arrays, ids, terms, n, n_terms)
        index = cls(k1=header["k1"], b=header["b"], analyzer=analyzer)
        index._vocab.terms = terms
        index._vocab.update(zip(terms, range(n_terms), strict=True))
        index._ids = ids
        index._slot = dict(zip(ids, range(n), strict=True))
        cap = max(64, n + n // 4)
        for name, key in (
            ("_len", "len"),
            ("_layer", "layer"),
            ("_bucket", "bucket"),
            ("_prior", "prior"),
        ):
            arr = np.zeros(cap, dtype=arrays[key].dtype)
            arr[:n] = arrays[key]
            setattr(index, name, arr)
        index._alive = np.zeros(cap, dtype=bool)
        index._alive[:n] = True
        index._live_len = int(arrays["len"].sum())
        index._segments = [seg] if seg.nnz else []
        return index

    # ---------------------------------------------------------------- internals

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
        """Turn the pending buffer into a segment and merge small segments."""
        if self._pend_counts:
            terms = np.frombuffer(self._pend_terms, dtype=np.int32).astype(np.int64)
            slots = np.repeat(
                np.array(self._pend_slots, dtype=np.int64),
                np.array(self._pend_counts, dtype=np.int64),
            )
            self._pend_terms = array("i")
            self._pend_slots = []
            self._pend_counts = []
            key = (terms << 32) | slots
            key.sort()
            first = np.empty(len(key), dtype=bool)
            first[0] = True
            np.not_equal(key[1:], key[:-1], out=first[1:])
            starts = np.flatnonzero(first)
            tfs = np.diff(np.append(starts, len(key)))
            np.minimum(tfs, 0xFFFF, out=tfs)
            key = key[starts]
            self._segments.append(
                _Segment.from_pairs(key >> 32, key & 0xFFFFFFFF, tfs.astype(np.uint16))
            )
        segs = self._segments
        # Merge the trailing segments that are small next to their predecessor
        # (or too many), in one pass: the count stays logarithmic in the size
        # and every posting is re-sorted O(log) times over its life.
        start = len(segs) - 1
        total = segs[start].nnz if segs else 0
        while start > 0 and (segs[start - 1].nnz < _MERGE_FACTOR * total or start >= _MAX_SEGMENTS):
            start -= 1
            total += segs[start].nnz
        if start < len(segs) - 1:
            self._segments = [*segs[:start], _merge_segments(segs[start:], None)]

    def _prepare(self) -> None:
        """Make postings queryable: flush pending adds, compact when many slots are dead."""
        if self._dead >= max(_COMPACT_MIN_DEAD, len(self._ids) // 4):
            self.compact()
        elif self._pend_counts:
            self._flush()

    def _postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """All (slots, term frequencies) of term ``tid``, dead slots included."""
        docs: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        for seg in self._segments:
            i = int(np.searchsorted(seg.terms, tid))
            if i < len(seg.terms) and seg.terms[i] == tid:
                lo, hi = seg.ptr[i], seg.ptr[i + 1]
                docs.append(seg.docs[lo:hi])
                tfs.append(seg.tfs[lo:hi])
        if not docs:
            return _EMPTY_I32, np.zeros(0, np.uint16)
        if len(docs) == 1:
            return docs[0], tfs[0]
        return np.concatenate(docs), np.concatenate(tfs)

    def _mask(self, scope: Scope) -> np.ndarray:
        """Boolean mask over slots: alive and in ``scope``."""
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

    def _ranked(
        self, cand: np.ndarray, score: np.ndarray, k: int | None
    ) -> list[tuple[str, float]]:
        """(id, score) of ``cand`` ordered by score desc, prior desc, id asc, cut to ``k``."""
        if len(cand) == 0:
            return []
        prior = self._prior[cand]
        if k is not None and len(cand) > k:
            # Keep only what can reach the top k: scores above the k-th best,
            # and among those equal to it, priors down to the one still needed.
            kth = np.partition(score, len(score) - k)[len(score) - k]
            at = score == kth
            need = k - int(np.count_nonzero(score > kth))
            prior_at = prior[at]
            cut = np.partition(prior_at, len(prior_at) - need)[len(prior_at) - need]
            keep = (score > kth) | (at & (prior >= cut))
            cand, score, prior = cand[keep], score[keep], prior[keep]
        order = np.lexsort((-prior, -score))
        cand, score, prior = cand[order], score[order], prior[order]
        limit = len(cand) if k is None else min(k, len(cand))
        ids = self._ids
        out: list[tuple[str, float]] = []
        i = 0
        n = len(cand)
        score_l = score.tolist()
        prior_l = prior.tolist()
        cand_l = cand.tolist()
        while i < n and len(out) < limit:
            j = i + 1
            while j < n and score_l[j] == score_l[i] and prior_l[j] == prior_l[i]:
                j += 1
            if j - i == 1:
                out.append((ids[cand_l[i]], score_l[i]))  # type: ignore[arg-type]
            else:
                need = limit - len(out)
                group = [ids[s] for s in cand_l[i:j]]
                best = sorted(group) if need >= len(group) else heapq.nsmallest(need, group)
                out += [(d, score_l[i]) for d in best[:need]]  # type: ignore[misc]
            i = j
        return out

    def _drop_unused_terms(self, seg: _Segment) -> None:
        """Renumber the vocabulary to the terms that still have postings."""
        old_terms = self._vocab.terms
        used = seg.terms.tolist()
        vocab = _Vocab()
        vocab.terms = [old_terms[t] for t in used]
        vocab.update(zip(vocab.terms, range(len(used)), strict=True))
        self._vocab = vocab
        seg.terms = np.arange(len(used), dtype=np.int32)
        self._sim_keys = {}
        self._sim_nbg = array("i")
        self._sim_built = 0

    def _sim_update(self) -> None:
        """Extend the similarity key map to vocabulary terms added since the last call."""
        terms = self._vocab.terms
        keys = self._sim_keys
        nbg = self._sim_nbg
        for tid in range(self._sim_built, len(terms)):
            term = terms[tid]
            if _CJK_RE.match(term):
                nbg.append(0)
                for ch in set(term):
                    arr = keys.get(ch)
                    if arr is None:
                        keys[ch] = arr = array("i")
                    arr.append(tid)
            else:
                bgs = _padded_bigrams(term)
                nbg.append(len(bgs))
                for bg in bgs:
                    arr = keys.get(bg)
                    if arr is None:
                        keys[bg] = arr = array("i")
                    arr.append(tid)
        self._sim_built = len(terms)

    def _similar_units(self, qterms: list[str]) -> list[list[tuple[int, float]]]:
        """Per query unit, its candidate (term id, similarity) pairs (see :meth:`similar`)."""
        vocab = self._vocab
        units: list[list[tuple[int, float]]] = []
        seen: set[str] = set()
        chars: list[str] = []
        words: list[str] = []
        for q in qterms:
            if q in seen or not q:
                continue
            seen.add(q)
            if _CJK_RE.match(q):
                chars += [c for c in q if c not in chars]
                if len(q) > 1 and q in vocab:
                    units.append([(vocab[q], 1.0)])
            else:
                words.append(q)
        need_map = bool(words) or any(c not in vocab for c in chars)
        if need_map and self._sim_built < len(vocab.terms):
            self._sim_update()
        for c in chars:
            tid = vocab.get(c)
            if tid is not None:
                units.append([(tid, 1.0)])
            else:
                ids = self._sim_keys.get(c)
                if ids is not None:
                    units.append([(t, 1.0 / len(vocab.terms[t])) for t in ids.tolist()])
        nbg = np.frombuffer(self._sim_nbg, dtype=np.int32) if words else None
        for q in words:
            qb = _padded_bigrams(q)
            lists = [self._sim_keys[g] for g in qb if g in self._sim_keys]
            if not lists or nbg is None:
                continue
            ids = np.concatenate([np.frombuffer(a, dtype=np.int32) for a in lists])
            uniq, shared = np.unique(ids, return_counts=True)
            dice = 2.0 * shared / (len(qb) + nbg[uniq])
            hit = dice >= SIMILAR_THRESHOLD - 1e-12
            if hit.any():
                units.append(list(zip(uniq[hit].tolist(), dice[hit].tolist(), strict=True)))
        return units


def _check_loaded(
    seg: _Segment,
    arrays: dict[str, np.ndarray],
    ids: list[str],
    terms: list[str],
    n: int,
    n_terms: int,
) -> None:
    """Structural checks on a loaded image (the checksum catches random damage)."""
    if len(ids) != n or len(set(ids)) != n or len(terms) != n_terms:
        raise ValueError("corrupt text index (id or vocabulary table)")
    for key in ("len", "layer", "bucket", "prior"):
        if len(arrays[key]) != n:
            raise ValueError(f"corrupt text index ({key} table)")
    ptr = seg.ptr
    if (
        len(ptr) != len(seg.terms) + 1
        or ptr[0] != 0
        or ptr[-1] != len(seg.docs)
        or len(seg.tfs) != len(seg.docs)
        or (len(ptr) > 1 and np.any(np.diff(ptr) <= 0))
    ):
        raise ValueError("corrupt text index (posting offsets)")
    if len(seg.terms) and (
        np.any(np.diff(seg.terms) <= 0) or seg.terms[0] < 0 or seg.terms[-1] >= n_terms
    ):
        raise ValueError("corrupt text index (term ids)")
    if len(seg.docs) and (seg.docs.min() < 0 or seg.docs.max() >= n):
        raise ValueError("corrupt text index (document slots)")
