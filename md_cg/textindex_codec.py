"""The binary image of a text index: a JSON header and aligned numpy arrays.

Layout: magic ``MDCGTIX1``, a little-endian u32 header length, a JSON header
(the caller's fields plus the array table), 8-byte aligned arrays, and a
CRC-32 of everything before it. :func:`encode` writes one
(:func:`encode_parts`: as buffers to write in order); :func:`decode`
checks the magic, the checksum and the array table and returns zero-copy
views of the data. What the arrays mean is the caller's business
(:meth:`md_cg.textindex.TextIndex.to_bytes`).

A *split* image (:func:`encode_split`, :func:`decode_split`, magic
``MDCGTIX2``) keeps some arrays apart in a *lazy region* checked by a CRC-32
per 64 KiB chunk: the snapshot reads at open only the eager part and reads
(and checks) a chunk of the region the first time it is used
(:class:`LazyRegion`).

Imports numpy, the standard library and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import json
import struct
import threading
import zlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SnapshotDamageError, StoreClosedError

__all__ = [
    "CHUNK",
    "MAGIC",
    "MAGIC_SPLIT",
    "LazyArray",
    "LazyRegion",
    "decode",
    "decode_split",
    "encode",
    "encode_parts",
    "encode_split",
]

MAGIC = b"MDCGTIX1"


def encode(header: dict[str, Any], arrays: Sequence[np.ndarray]) -> bytes:
    """An image of ``header`` (JSON-ready) and ``arrays``; the table of arrays is added to the header."""
    return b"".join(encode_parts(header, arrays))


def encode_parts(header: dict[str, Any], arrays: Sequence[np.ndarray]) -> list[bytes | memoryview]:
    """The image of :func:`encode` as the buffers to write in order (views of ``arrays``, no copy)."""
    head = json.dumps({**header, "arrays": [[a.dtype.str, len(a)] for a in arrays]}).encode()
    parts: list[bytes | memoryview] = [MAGIC, struct.pack("<I", len(head)), head]
    pos = len(MAGIC) + 4 + len(head)
    for a in arrays:
        pad = -pos % 8
        parts.append(b"\x00" * pad)
        data = np.ascontiguousarray(a).data.cast("B")  # a view of the array's bytes, no copy
        parts.append(data)
        pos += pad + len(data)
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    parts.append(struct.pack("<I", crc))
    return parts


def decode(data: bytes | memoryview) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The header and the arrays of an image; ValueError when ``data`` is not a sound one.

    The arrays are read-only views of ``data``. Malformed headers may also
    raise KeyError, TypeError or IndexError (the caller reports them as a
    corrupt image).
    """
    header, pos = _header(data, MAGIC, "text index image")
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
    return header, arrays


# -- split images: an eager part checked at once, a lazy region checked chunk by chunk ------------------

#: The magic of the eager part of a split image (:func:`encode_split`).
MAGIC_SPLIT = b"MDCGTIX2"
#: Bytes of a lazy region per CRC-32 (a multiple of 8: no array element straddles two chunks).
CHUNK = 1 << 16


def encode_split(
    header: dict[str, Any], arrays: Sequence[np.ndarray], lazy: Collection[int], chunk: int | None = None
) -> tuple[list[bytes | memoryview], list[bytes | memoryview]]:
    """An image of ``arrays`` whose arrays at the indices ``lazy`` are kept apart, checked per chunk.

    Returns (the eager part, the lazy region), as buffers to write in order
    (views of ``arrays``, no copy). The eager part: magic ``MDCGTIX2``, a
    little-endian u32 header length, a JSON header (the caller's fields, the
    array table ``arrays``, ``lazy``: the indices kept apart, ``chunk``,
    ``lazy_len``: the region's length), the other arrays 8-byte aligned, the
    CRC-32 of each ``chunk`` bytes of the lazy region (u32, 8-byte aligned)
    and a CRC-32 of everything before it. The lazy region: the lazy arrays
    in order, each at an 8-byte aligned offset of the region. ``chunk``:
    :data:`CHUNK` when None.
    """
    if chunk is None:
        chunk = CHUNK
    if chunk <= 0 or chunk % 8:
        raise ValueError("the chunk size must be a positive multiple of 8")
    kept = sorted(set(lazy))
    region: list[bytes | memoryview] = []
    pos = 0
    for i in kept:
        pad = -pos % 8
        data = np.ascontiguousarray(arrays[i]).data.cast("B")
        region += [b"\x00" * pad, data]
        pos += pad + len(data)
    crcs = _chunk_crcs(region, pos, chunk)
    eager = [a for i, a in enumerate(arrays) if i not in set(kept)]
    head = json.dumps(
        {
            **header,
            "arrays": [[a.dtype.str, len(a)] for a in arrays],
            "lazy": kept,
            "chunk": chunk,
            "lazy_len": pos,
        }
    ).encode()
    parts: list[bytes | memoryview] = [MAGIC_SPLIT, struct.pack("<I", len(head)), head]
    at = len(MAGIC_SPLIT) + 4 + len(head)
    for a in [*eager, crcs]:
        pad = -at % 8
        data = np.ascontiguousarray(a).data.cast("B")
        parts += [b"\x00" * pad, data]
        at += pad + len(data)
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    parts.append(struct.pack("<I", crc))
    return parts, region


def _chunk_crcs(parts: Sequence[bytes | memoryview], total: int, chunk: int) -> np.ndarray:
    """The CRC-32 of every ``chunk`` bytes of the concatenation of ``parts`` (``total`` bytes)."""
    out = np.zeros(-(-total // chunk), dtype="<u4")
    n = crc = fill = 0
    for part in parts:
        view = memoryview(part).cast("B")
        pos = 0
        while pos < len(view):
            take = min(chunk - fill, len(view) - pos)
            crc = zlib.crc32(view[pos : pos + take], crc)
            fill += take
            pos += take
            if fill == chunk:
                out[n], n, crc, fill = crc, n + 1, 0, 0
    if fill:
        out[n] = crc
    return out


@dataclass(frozen=True)
class LazyArray:
    """Where a lazy array of a split image lies in its region."""

    index: int
    dtype: np.dtype[Any]
    count: int
    offset: int


def decode_split(
    data: bytes | memoryview,
) -> tuple[dict[str, Any], list[np.ndarray | None], list[LazyArray], np.ndarray]:
    """The eager part of a split image: (header, arrays with None at the lazy ones, where the lazy
    ones lie in the region, the region's chunk CRC-32s); ValueError when it is not a sound one.

    The eager arrays are read-only views of ``data``. The region's length is
    ``header["lazy_len"]``; :class:`LazyRegion` checks it chunk by chunk.
    """
    header, pos = _header(data, MAGIC_SPLIT, "split image")
    table = header["arrays"]
    lazy = {int(i) for i in header["lazy"]}
    chunk, lazy_len = int(header["chunk"]), int(header["lazy_len"])
    if chunk <= 0 or chunk % 8 or lazy_len < 0 or not lazy <= set(range(len(table))):
        raise ValueError("corrupt split image (lazy table)")
    arrays: list[np.ndarray | None] = []
    where: list[LazyArray] = []
    at = 0
    for i, (dtype, count) in enumerate([*table, ["<u4", -(-lazy_len // chunk)]]):
        dt = np.dtype(dtype)
        if dt.kind not in "iuf" or int(count) < 0:
            raise ValueError("corrupt split image (array table)")
        size = dt.itemsize * int(count)
        if i in lazy:
            at += -at % 8
            where.append(LazyArray(i, dt, int(count), at))
            at += size
            arrays.append(None)
            continue
        pos += -pos % 8
        if pos + size > len(data) - 4:
            raise ValueError("corrupt split image (truncated)")
        arrays.append(np.frombuffer(data, dtype=dt, count=int(count), offset=pos))
        pos += size
    if at != lazy_len:
        raise ValueError("corrupt split image (lazy region length)")
    crcs = arrays.pop()
    assert crcs is not None
    return header, arrays, where, crcs


class LazyRegion:
    """The lazy region of a split image: its bytes, each chunk read and checked on first use.

    ``buf``: the region's bytes when they are at hand (a snapshot decoded
    from bytes), else None and ``read(offset, view)`` fills ``view`` from
    ``offset`` of the region and returns the bytes it read (a snapshot file
    kept open). A chunk is read, compared with its CRC-32 and passed through
    the checks added by :meth:`add_check` the first time a range covering it
    is asked for (:meth:`need`); a mismatch raises
    :class:`~md_cg.errors.SnapshotDamageError` -- then and at every later
    use of that chunk -- and ``damage`` (a list shared with the owner)
    records it. Until checked, a chunk of a read region is zeros. Thread-safe.
    """

    def __init__(
        self,
        section: str,
        length: int,
        chunk: int,
        crcs: np.ndarray,
        *,
        buf: bytes | memoryview | None = None,
        read: Callable[[int, memoryview], int] | None = None,
        damage: list[str] | None = None,
    ) -> None:
        if len(crcs) != -(-length // chunk):
            raise ValueError("corrupt split image (chunk table)")
        self.section = section
        self.length = length
        self.chunk = chunk
        self._crcs = crcs.tolist()
        if buf is not None:
            if len(buf) != length:
                raise ValueError("truncated lazy region")
            self.buf: np.ndarray = np.frombuffer(buf, dtype=np.uint8)
            self._read: Callable[[int, memoryview], int] | None = None
        else:
            if read is None:
                raise ValueError("a lazy region needs its bytes or a reader")
            self.buf = np.zeros(length, dtype=np.uint8)  # calloc: pages untouched until read
            self._read = read
        self._ok = bytearray(len(self._crcs))
        self._left = len(self._crcs)
        self._bad: dict[int, str] = {}
        self._checks: list[tuple[int, int, Callable[[np.ndarray, int, int], str | None]]] = []
        self._lock = threading.Lock()
        self.damage = damage if damage is not None else []

    @property
    def complete(self) -> bool:
        """True once every chunk was read and found sound."""
        return self._left == 0

    def array(self, where: LazyArray) -> np.ndarray:
        """A read-only view of a lazy array (its bytes are sound only where :meth:`need` said so)."""
        a = np.frombuffer(self.buf, dtype=where.dtype, count=where.count, offset=where.offset)
        a.flags.writeable = False
        return a

    def add_check(self, where: LazyArray, check: Callable[[np.ndarray, int, int], str | None]) -> None:
        """Run ``check(array, start, stop)`` over the elements of each chunk of ``where`` when it is read.

        It returns why those elements are unsound, else None.
        """
        self._checks.append((where.offset, where.offset + where.dtype.itemsize * where.count, check))

    def need_bytes(self, start: int, stop: int) -> None:
        """Make the region's bytes ``[start, stop)`` sound (read and check what is not yet)."""
        if self._left == 0 or stop <= start:
            return
        c, last = start // self.chunk, (stop - 1) // self.chunk
        if c == last and self._ok[c]:
            return
        if all(self._ok[c : last + 1]):
            return
        with self._lock:
            self._load(c, last)

    def need_ranges(self, starts: np.ndarray, stops: np.ndarray) -> None:
        """:meth:`need_bytes` of every ``[starts[i], stops[i])`` (int64 arrays), in a few
        array operations: a reading plan's thousand ranges cost ~50 us once sound."""
        if self._left == 0:
            return
        some = stops > starts
        first, last = starts[some] // self.chunk, (stops[some] - 1) // self.chunk
        if not len(first):
            return
        n = len(self._ok)
        # +1 where a range's chunks begin, -1 after they end: a running sum > 0 covers them
        edges = np.bincount(first, minlength=n + 1) - np.bincount(last + 1, minlength=n + 1)
        unsound = np.flatnonzero((np.cumsum(edges[:n]) > 0) & (np.frombuffer(self._ok, dtype=np.uint8) == 0))
        if not len(unsound):
            return
        cut = np.flatnonzero(np.diff(unsound) != 1)
        firsts, lasts = unsound[np.r_[0, cut + 1]].tolist(), unsound[np.r_[cut, len(unsound) - 1]].tolist()
        with self._lock:
            for a, z in zip(firsts, lasts, strict=True):
                self._load(a, z)

    def need_all(self) -> None:
        """Make the whole region sound."""
        if self._left:
            with self._lock:
                self._load(0, len(self._ok) - 1)

    def _load(self, first: int, last: int) -> None:
        bad = next((c for c in range(first, last + 1) if c in self._bad), None)
        if bad is not None:
            raise SnapshotDamageError(self.section, bad, self._bad[bad])
        c = first
        while c <= last:
            if self._ok[c]:
                c += 1
                continue
            end = c
            while end < last and not self._ok[end + 1]:
                end += 1
            self._load_run(c, end)
            c = end + 1

    def _load_run(self, first: int, last: int) -> None:
        """Read and check the chunks ``first..last`` (none checked yet), as one read."""
        size = self.chunk
        start, stop = first * size, min((last + 1) * size, self.length)
        view = self.buf.data[start:stop]
        got = stop - start if self._read is None else self._read(start, view)
        for c in range(first, last + 1):
            a, z = c * size, min((c + 1) * size, self.length)
            if got < z - start:
                self._fail(c, "truncated")
            if zlib.crc32(view[a - start : z - start]) != self._crcs[c]:
                self._fail(c, "checksum mismatch")
            for lo, hi, check in self._checks:
                if lo < z and a < hi:
                    problem = check(self.buf, max(a, lo), min(z, hi))
                    if problem is not None:
                        self._fail(c, problem)
            self._ok[c] = 1
            self._left -= 1
        if self._left == 0:
            self._read = None  # the file is not needed any more

    def close(self) -> None:
        """Let go of the reader (the file): a chunk not read yet raises StoreClosedError from now on."""
        if self._read is not None:
            self._read = _closed

    def _fail(self, c: int, reason: str) -> None:
        self._bad[c] = reason
        self.damage.append(f"{self.section} section, chunk {c}: {reason}")
        raise SnapshotDamageError(self.section, c, reason)


def _closed(offset: int, view: memoryview) -> int:
    raise StoreClosedError("the index snapshot was closed with its store")


def _header(data: bytes | memoryview, magic: bytes, what: str) -> tuple[Any, int]:
    """The JSON header of an image starting with ``magic`` and ending with the CRC-32 of
    the rest, and the offset just after it; ValueError naming ``what`` when it is not one."""
    if len(data) < len(magic) + 8 or bytes(data[: len(magic)]) != magic:
        raise ValueError(f"not a {what} (bad magic)")
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(memoryview(data)[:-4]) != crc:
        raise ValueError(f"corrupt {what} (checksum mismatch)")
    (head_len,) = struct.unpack_from("<I", data, len(magic))
    pos = len(magic) + 4
    return json.loads(bytes(data[pos : pos + head_len])), pos + head_len
