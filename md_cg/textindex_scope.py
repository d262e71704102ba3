"""The slots of small scopes of the text index, found without a pass over every slot.

A routed search asks for the documents of one or two buckets: a few hundred
slots of a table that may hold a million. :class:`ScopeSlots` keeps the slots
ordered by bucket code (and, when a scope names only layers, by layer code),
rebuilt when the document table changes, so a scope's slots cost about its
size. :meth:`md_cg.textindex.TextIndex.match` then reads only the postings of
those slots.

Imports only numpy and the standard library.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

__all__ = ["PRUNE_SCOPE_MIN", "PRUNE_SCOPE_RATIO", "SCOPE_RATIO", "ScopeSlots"]

#: A scope is small when this many times its documents are fewer than the slots.
SCOPE_RATIO = 16
#: A small scope of at least this many documents whose query terms have this many
#: times more postings than it has documents is ranked by MaxScore with the scope as a
#: mask (the same ids; scores equal up to floating-point summation order), not by a
#: binary search of every scope slot in every term's postings: at 1M documents, a
#: bucket of ~50k and a query of ~4M postings took ~27 ms that way, 12-17 ms by MaxScore.
#: The ratio was 40 until MaxScore gathered the terms of most bound per posting first;
#: at 4, a bucket of ~44k English notes and a query holding a word of nearly every note
#: (~1M postings) takes ~1.3 ms instead of 5.4 (docs/benchmarks.md, session 12).
PRUNE_SCOPE_MIN = 10_000
PRUNE_SCOPE_RATIO = 4
_CACHE = 64  # scopes remembered per table version (a few hundred slots each)


class Table(Protocol):
    """What :class:`ScopeSlots` reads of the document table (:class:`md_cg.textindex_docs.DocTable`)."""

    version: int
    ids: list[str | None]
    alive: np.ndarray
    layer: np.ndarray
    bucket: np.ndarray

    def slots_of(self, ids: frozenset[str]) -> np.ndarray: ...


class Codes(Protocol):
    """A scope (:class:`md_cg.textindex_docs.Scope`): layer and bucket codes, None for any."""

    @property
    def layers(self) -> frozenset[int] | None: ...

    @property
    def buckets(self) -> frozenset[int] | None: ...

    @property
    def only(self) -> frozenset[str] | None: ...


class ScopeSlots:
    """Sorted live slots of small scopes, cached per version of one :class:`DocTable`."""

    __slots__ = ("_by", "_cache", "_key", "_last_only")

    def __init__(self) -> None:
        self._key: tuple[int, int] = (-1, -1)
        self._by: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        self._cache: dict[tuple[frozenset[int] | None, frozenset[int] | None], np.ndarray | None] = {}
        self._last_only: tuple[frozenset[str], Any, np.ndarray | None] | None = None

    def slots(self, table: Table, scope: Codes) -> np.ndarray | None:
        """The sorted live slots of ``scope`` (int64) when it is small (:data:`SCOPE_RATIO`), else None."""
        if scope.layers is None and scope.buckets is None and scope.only is None:
            return None
        key = (table.version, len(table.ids))
        if key != self._key:
            self._key, self._by, self._cache = key, {}, {}
        key_codes = (scope.layers, scope.buckets)
        if scope.only is not None:  # a filter: kept for its set object only (it may be large)
            last = self._last_only
            if last is not None and last[0] is scope.only and last[1] == (key, key_codes):
                return last[2]
            found = self._cache[key_codes] if key_codes in self._cache else self._find(table, scope)
            out = self._only(table, scope, found)
            self._last_only = (scope.only, (key, key_codes), out)
            return out
        if key_codes in self._cache:
            return self._cache[key_codes]
        out = self._find(table, scope)
        if len(self._cache) >= _CACHE:
            self._cache.clear()
        self._cache[key_codes] = out
        return out

    def _find(self, table: Table, scope: Codes) -> np.ndarray | None:
        n = len(table.ids)
        column, codes = ("bucket", scope.buckets) if scope.buckets is not None else ("layer", scope.layers)
        if codes is None:
            return None
        order, bounds, low = self._order(table, column)
        runs = [c - low for c in sorted(codes)]
        parts = [order[bounds[r] : bounds[r + 1]] for r in runs if 0 <= r < len(bounds) - 1]
        if sum(len(p) for p in parts) * SCOPE_RATIO >= n:
            return None
        slots = np.sort(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
        keep = table.alive[slots]
        if scope.buckets is not None and scope.layers is not None:
            keep &= np.isin(table.layer[slots], list(scope.layers))
        return slots[keep]

    def _only(self, table: Table, scope: Codes, found: np.ndarray | None) -> np.ndarray | None:
        """The slots of ``scope`` within its ``only`` ids: ``found`` (the small scope of its
        codes, or None) narrowed to them, or their slots narrowed to its codes; None when large."""
        assert scope.only is not None
        chosen = table.slots_of(scope.only)
        if found is not None:
            return found[np.isin(found, chosen, assume_unique=True)]
        chosen = chosen[table.alive[chosen]]
        if scope.layers is not None:
            chosen = chosen[np.isin(table.layer[chosen], list(scope.layers))]
        if scope.buckets is not None:
            chosen = chosen[np.isin(table.bucket[chosen], list(scope.buckets))]
        return chosen if len(chosen) * SCOPE_RATIO < len(table.ids) else None

    def _order(self, table: Table, column: str) -> tuple[np.ndarray, np.ndarray, int]:
        """Slots ordered by their code in ``column``, where each code's run starts, and the lowest
        code: code c holds ``order[bounds[c - low] : bounds[c - low + 1]]`` (codes may be negative,
        e.g. -1 for no bucket)."""
        got = self._by.get(column)
        if got is None:
            codes = (table.bucket if column == "bucket" else table.layer)[: len(table.ids)].astype(np.int64)
            low = min(0, int(codes.min())) if len(codes) else 0
            codes -= low
            top = int(codes.max()) + 1 if len(codes) else 0
            # codes below 2^16 sort by radix, in O(slots)
            order = np.argsort(codes.astype(np.uint16) if top <= 1 << 16 else codes, kind="stable")
            got = (order.astype(np.int32), np.searchsorted(codes[order], np.arange(top + 1)), low)
            self._by[column] = got
        return got
