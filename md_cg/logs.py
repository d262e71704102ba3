"""Named append-only logs under ``.mdcg/``: reflections, tombstones, audit records.

An :class:`AppendLog` is a folder ``.mdcg/<name>/`` of JSON-lines shards,
one per writing process (:class:`~md_cg.fsops.ShardWriter`), read whole and
ordered by (time, shard, sequence). Records are only ever appended; a torn
last line of a killed writer is ignored. A read-compute-append sequence that
must not interleave with another process's (the reflection record numbers
its steps) holds :meth:`AppendLog.locked`.

Imports only :mod:`md_cg.fsops`, :mod:`md_cg.paths` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import orjson

from . import fsops, paths
from .errors import UnsafePathError, recorded_note

#: One record of a read: (time in ns, shard name, sequence, record).
Row = tuple[int, str, int, dict[str, Any]]


class AppendLog:
    """The append-only log ``.mdcg/<name>/`` of a store rooted at ``root``.

    ``legacy`` names a single JSON-lines file under ``.mdcg/`` written by an
    earlier version; it is read first and never written.
    """

    def __init__(self, root: str, name: str, *, legacy: str | None = None, incremental: bool = False) -> None:
        self.root = root
        self.rel = paths.meta(name)
        self.legacy = paths.meta(legacy) if legacy else None
        self._writer = fsops.ShardWriter(root, self.rel)
        self._lock = fsops.FileLock(root, paths.meta(f"{name}.lock"), what=f"{name} log")
        #: ``incremental``: :meth:`read` parses only what was appended since its last
        #: call (a log nobody redacts: the reflection record, read on every reflect)
        self._seen: dict[str, tuple[int, list[Row]]] | None = {} if incremental else None

    def append(
        self, records: Iterable[dict[str, Any]], *, durable: bool = False, landed: bool = False
    ) -> None:
        """Append records; each line is ``{"ts": <ns>, "seq": <n>, "r": <record>}``.

        ``landed``: the records describe a change already made (a rename's audit record
        after its commit): an ``OSError`` carries :data:`md_cg.errors.RECORDED_NOTE` naming
        this log's folder (:func:`md_cg.record_failed`), so no caller says nothing was changed.
        """
        try:
            self._writer.append(({"r": rec} for rec in records), durable=durable)
        except OSError as exc:
            if landed:
                exc.add_note(recorded_note(self.rel))
            raise

    def read(self) -> list[dict[str, Any]]:
        """Every record, oldest first."""
        return [self._given(r[3]) for r in self._sorted()]

    def newest_first(self) -> Iterator[dict[str, Any]]:
        """The records newest first, read as :meth:`read` reads them: a caller looking
        for the last record of a kind decodes no more than it takes."""
        for r in reversed(self._sorted()):
            yield self._given(r[3])

    def _given(self, rec: dict[str, Any]) -> dict[str, Any]:
        """What a caller gets of a record: a copy when this log keeps its records."""
        return orjson.loads(orjson.dumps(rec)) if self._seen is not None else rec

    def _names(self) -> list[str]:
        """The shards' names (none when the folder is refused)."""
        try:
            return fsops.list_shards(self.root, self.rel)
        except UnsafePathError:
            return []

    def _legacy(self) -> list[Row]:
        """The earlier versions' single file's records, first in every read."""
        if self.legacy is None:
            return []
        return [(-1, "", i, old) for i, old in enumerate(_legacy_records(self.root, self.legacy))]

    def _sorted(self) -> list[Row]:
        out = self._legacy()
        names = self._names()
        seen = self._seen
        for name in names:
            start, known = seen.get(name, (0, [])) if seen is not None else (0, [])
            try:
                read = fsops.read_shard(self.root, f"{self.rel}/{name}", start)
            except (FileNotFoundError, UnsafePathError):
                continue
            got = known + _rows(name, read.records) if read.records else known
            if seen is not None:
                seen[name] = (read.end, got)
            out.extend(got)
        if seen is not None:
            for gone in seen.keys() - set(names):
                del seen[gone]
        out.sort(key=_order)
        return out

    def read_holding(self, needles: Sequence[bytes]) -> list[dict[str, Any]]:
        """The records whose line holds one of ``needles`` (bytes, as the line's JSON
        spells them), oldest first, as :meth:`read` orders them: only those lines are
        decoded (an organise apply looks up its run in a log of every run). The earlier
        versions' single file is searched whole."""
        out = [r for r in self._legacy() if any(n in orjson.dumps(r[3]) for n in needles)]
        for name in self._names():
            try:
                data, _ = fsops.read_file(self.root, f"{self.rel}/{name}")
            except (FileNotFoundError, UnsafePathError):
                continue
            lines = []
            for start, stop in _lines_holding(data, needles):
                if stop == len(data):
                    continue  # a torn last line, never read
                try:
                    lines.append(orjson.loads(data[start:stop]))
                except orjson.JSONDecodeError:
                    continue
            out.extend(_rows(name, [line for line in lines if isinstance(line, dict)]))
        out.sort(key=_order)
        return [r[3] for r in out]

    def redact(self, needles: Sequence[bytes], edit: Callable[[dict[str, Any]], bool]) -> int:
        """Rewrite records in place: each line holding one of ``needles`` (bytes, as
        its JSON spells them) is read, ``edit(record)`` may change strings in it --
        each for one of the same JSON length (:func:`blanked`) -- and says whether it
        did; the line is then written back over itself, the same length, so processes
        appending to their shards lose nothing. A line that would not keep its length
        is left as it is. The earlier versions' single file is not touched. Returns the
        number of lines rewritten."""
        done = 0
        for name in self._names():
            rel = f"{self.rel}/{name}"
            try:
                data, _ = fsops.read_file(self.root, rel)
            except (FileNotFoundError, UnsafePathError):
                continue
            edits = [
                e for start, stop in _lines_holding(data, needles) if (e := _edited(data, start, stop, edit))
            ]
            if edits:
                fsops.overwrite_at(self.root, rel, edits)
                done += len(edits)
        return done

    @contextlib.contextmanager
    def locked(self, timeout: float) -> Iterator[None]:
        """Hold this log's lock (for read-compute-append sequences)."""
        with self._lock.hold(timeout=timeout):
            yield

    def close(self) -> None:
        self._writer.close()
        self._lock.close()


def blanked(text: str) -> str:
    """``#`` characters as many as ``text`` takes in a JSON line (its redacted stand-in)."""
    return "#" * (len(orjson.dumps(text)) - 2)


def _lines_holding(data: bytes, needles: Sequence[bytes]) -> list[tuple[int, int]]:
    """The (start, stop) of each line of ``data`` that holds one of ``needles``, in order."""
    found: set[tuple[int, int]] = set()
    for needle in needles:
        at = data.find(needle)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            stop = data.find(b"\n", at)
            stop = len(data) if stop < 0 else stop
            found.add((start, stop))
            at = data.find(needle, stop)
    return sorted(found)


def _edited(
    data: bytes, start: int, stop: int, edit: Callable[[dict[str, Any]], bool]
) -> tuple[int, bytes] | None:
    """The line ``data[start:stop]`` after ``edit`` of its record, or None (unchanged,
    unreadable, or not of its old length)."""
    try:
        line = orjson.loads(data[start:stop])
    except orjson.JSONDecodeError:
        return None
    rec = line.get("r") if isinstance(line, dict) else None
    if not isinstance(rec, dict) or not edit(rec):
        return None
    new = orjson.dumps(line)
    return (start, new) if len(new) == stop - start else None


def _order(row: Row) -> tuple[int, str, int]:
    """A record's place in a read: (time, shard, sequence)."""
    return row[0], row[1], row[2]


def _rows(name: str, lines: list[dict[str, Any]]) -> list[Row]:
    """(time, shard, sequence, record) of a shard's lines that hold a record."""
    out = []
    for line in lines:
        ts, seq = line.get("ts", 0), line.get("seq", 0)
        rec: Any = line.get("r")
        if isinstance(rec, dict):
            out.append((ts if isinstance(ts, int) else 0, name, seq if isinstance(seq, int) else 0, rec))
    return out


def _legacy_records(root: str, rel: str) -> list[dict[str, Any]]:
    try:
        data, _ = fsops.read_file(root, rel)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return []
    out = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a torn line of a killed writer
        if isinstance(rec, dict):
            out.append(rec)
    return out
