"""The binary image of a text index: a JSON header and aligned numpy arrays.

Layout: magic ``MDCGTIX1``, a little-endian u32 header length, a JSON header
(the caller's fields plus the array table), 8-byte aligned arrays, and a
CRC-32 of everything before it. :func:`encode` writes one
(:func:`encode_parts`: as buffers to write in order); :func:`decode`
checks the magic, the checksum and the array table and returns zero-copy
views of the data. What the arrays mean is the caller's business
(:meth:`md_cg.textindex.TextIndex.to_bytes`).

Imports only numpy and the standard library.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MAGIC", "decode", "encode", "encode_parts"]

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
    if len(data) < len(MAGIC) + 8 or bytes(data[: len(MAGIC)]) != MAGIC:
        raise ValueError("not a text index image (bad magic)")
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(memoryview(data)[:-4]) != crc:
        raise ValueError("corrupt text index image (checksum mismatch)")
    (head_len,) = struct.unpack_from("<I", data, len(MAGIC))
    pos = len(MAGIC) + 4
    header = json.loads(bytes(data[pos : pos + head_len]))
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
    return header, arrays
