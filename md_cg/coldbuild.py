"""Building the index from the files with helper processes (a cold open, a rebuild).

A store opened without a usable snapshot (a fresh ``git clone``, a snapshot
of another version) or rebuilt reads, parses and checks every file: about
75 µs of CPU per file here, then ~40 µs more to tokenise and index its
text. The parsing is independent per file, so on a machine with spare
cores helper processes do part of it.

How the work is shared (``k`` helpers, the files in path order cut into
chunks of :data:`md_cg.index.BUILD_CHUNK`):

* every ``6k + 1``-th chunk (:data:`SHARE_PER_HELPER`) is this process's
  own; the helpers share the others round-robin, each parsing its chunks in
  ascending order and sending each back as one frame (the entries' fields,
  the texts to index and the files' problems, :mod:`marshal`-encoded);
* this process puts the chunks into the state strictly in path order, as
  they come, and tokenises their texts in batches meanwhile;
* whenever the next chunk in order has not arrived, it parses one of its
  own chunks ahead of time; with none left, it takes the helpers' **last**
  chunk and goes down from there; when those meet the next chunk in order,
  the helpers are stopped and the rest is put in, in order.

So this process never waits for a helper: one that is slow to start,
stuck, killed or sending something malformed only leaves more chunks to
this process (a helper found broken is stopped, and the chunks it owes are
parsed here). The result is the state :func:`md_cg.index.build_from_files`
gives -- the same entries in the same order, the same problems, the same
duplicates -- with the texts already indexed.

The helpers are started as ``sys.executable -I -c <boot>`` with this
process's ``sys.path`` (``subprocess``: fork-and-exec, safe in a threaded
process, and the caller's ``__main__`` is not imported again, unlike the
``multiprocessing`` start methods). They read files only; they write
nothing, so a read-only store stays untouched. ``MDCG_BUILD_WORKERS`` sets
the number of helpers (``0``: none); by default a store of at least
:data:`PARALLEL_MIN_FILES` files gets one per spare core, up to
:data:`MAX_WORKERS`, on POSIX systems.

Imports :mod:`md_cg.index` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import contextlib
import marshal
import operator
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import IO, Any

from . import index
from .errors import InvalidArgumentError
from .index import DirCache, Entry, IndexState, Parsed

__all__ = ["ENV", "MAX_WORKERS", "PARALLEL_MIN_FILES", "build_from_files", "worker_count"]

#: The environment variable that sets the number of helper processes.
ENV = "MDCG_BUILD_WORKERS"
#: Smaller stores are built in this process alone (a helper takes ~0.25 s to start).
PARALLEL_MIN_FILES = 10_000
#: With ``k`` helpers, every ``SHARE_PER_HELPER * k + 1``-th chunk is the opening process's own.
SHARE_PER_HELPER = 6
#: Helpers by default at most: this process puts and indexes every file
#: (~50 µs a file), which caps what more helpers can add.
MAX_WORKERS = 3

#: A chunk parsed: its files that parsed, and the others' problems.
_Chunk = tuple[list[Parsed], dict[str, str]]
_FIELDS = tuple(f.name for f in fields(Entry))
_entry_fields = operator.attrgetter(*_FIELDS)
#: A frame's length prefix: 4 bytes, little-endian.
_HEADER = 4
#: The helper's program: take the caller's import path, then serve (see :func:`_serve`).
_BOOT = (
    "import sys, marshal\n"
    "data = sys.stdin.buffer.read(int.from_bytes(sys.stdin.buffer.read(4), 'little'))\n"
    "path, package = marshal.loads(data)\n"
    "sys.path[:0] = path\n"
    "import md_cg.coldbuild as m\n"
    "sys.exit(m._serve(package, sys.stdin.buffer, sys.stdout.buffer))\n"
)


def worker_count(files: int, workers: int | None = None) -> int:
    """How many helper processes a build of ``files`` files gets.

    None off POSIX systems, and when ``sys.executable`` is not a Python
    interpreter (a frozen or embedding application). Else ``workers`` (else ``$MDCG_BUILD_WORKERS``)
    is taken as given; by default one per spare core (at most
    :data:`MAX_WORKERS`) for a store of at least :data:`PARALLEL_MIN_FILES`
    files on a POSIX system, else none.
    """
    if workers is None:
        raw = os.environ.get(ENV, "").strip()
        if raw:
            try:
                workers = int(raw)
            except ValueError:
                workers = -1
            if workers < 0:
                raise InvalidArgumentError(
                    f"{ENV} must be a whole number of helper processes (0: none), got {raw!r}",
                    name=ENV,
                    value=raw,
                )
    if os.name != "posix" or not _interpreter():
        return 0  # (non-blocking pipes, which the sharing needs, are POSIX)
    if workers is not None:
        return workers
    if files < PARALLEL_MIN_FILES:
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every POSIX system
        cores = os.cpu_count() or 1
    return max(0, min(cores - 1, MAX_WORKERS))


#: What a Python interpreter's file is called (``python3``, ``python3.11``, ``pypy3``, ``python.exe``).
_PYTHON_NAME = re.compile(r"(?:python|pypy)[0-9.]*(?:\.exe)?", re.IGNORECASE)


def _interpreter() -> bool:
    """Whether ``sys.executable`` is a Python interpreter a helper can be started with.

    Not in a frozen application or an embedding program (``sys.executable``
    is then the application itself, which ``-I -c`` would start again).
    """
    if getattr(sys, "frozen", False) or not sys.executable:
        return False
    return _PYTHON_NAME.fullmatch(os.path.basename(sys.executable)) is not None


def build_from_files(
    root: str, progress: Callable[[int], object] | None = None, *, workers: int | None = None
) -> IndexState:
    """:func:`md_cg.index.build_from_files`, with helper processes when they pay (see the module)."""
    scan = index.scan_files(root)
    count = worker_count(len(scan.files), workers)
    if count == 0:
        return index.build_from_files(root, scan, progress)
    rels = sorted(scan.files)
    del scan  # its stat results are not needed any more (~1 KiB per file)
    with index.no_gc():
        return _Shared(root, rels, count, progress).run()


class _Helper:
    """One helper process: the chunks it owes, and the frames it has sent."""

    def __init__(self, root: str, chunks: list[tuple[int, list[str]]]) -> None:
        self.owed = [i for i, _ in chunks]
        self.received = 0
        self.frames: dict[int, bytes] = {}
        self.buffer = bytearray()
        self.broken = False
        #: what the helper wrote to its stderr (read when it is stopped; a traceback, if it failed)
        self.errors = b""
        self.proc: subprocess.Popen[bytes] | None = None
        self.feeder: threading.Thread | None = None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _BOOT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,  # kept for :attr:`errors` (not /dev/null: nothing opened for writing)
                close_fds=True,
            )
            assert (
                self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
            )
            os.set_blocking(self.proc.stderr.fileno(), False)
            self.fd = self.proc.stdout.fileno()
            with contextlib.suppress(AttributeError, OSError):  # a bigger pipe: fewer wake-ups
                import fcntl

                fcntl.fcntl(self.fd, fcntl.F_SETPIPE_SZ, 1 << 20)
            os.set_blocking(self.fd, False)
        except OSError:  # no interpreter to start, no pipes left
            self.stop()
            return
        # The paths can be megabytes: a thread feeds them while the helper starts
        # (this process would otherwise wait for it to read them).
        head = ([p for p in sys.path if p], str(Path(__file__).resolve().parent))
        self.feeder = threading.Thread(
            target=_feed, args=(self.proc.stdin, head, (root, chunks)), daemon=True
        )
        self.feeder.start()

    def pump(self) -> None:
        """Take in whatever the helper has sent; a broken stream stops it."""
        if self.broken:
            return
        try:
            while True:
                data = os.read(self.fd, 1 << 20)
                if not data:  # it exited: fine once it has sent every chunk it owes
                    self._complete()
                    if self.received < len(self.owed) or self.buffer:
                        self.stop()
                    return
                self.buffer += data
        except BlockingIOError:
            pass
        except OSError:
            self.stop()
            return
        self._complete()

    def _complete(self) -> None:
        """Move whole frames from the buffer to ``frames``."""
        buf, start = self.buffer, 0
        while len(buf) - start >= _HEADER:
            size = int.from_bytes(buf[start : start + _HEADER], "little")
            if len(buf) - start - _HEADER < size:
                break
            if self.received >= len(self.owed):
                self.stop()  # more than it owes
                return
            self.frames[self.owed[self.received]] = bytes(buf[start + _HEADER : start + _HEADER + size])
            self.received += 1
            start += _HEADER + size
        del buf[:start]

    def take(self, chunk: int, rels: list[str]) -> _Chunk | None:
        """The decoded frame of ``chunk`` (the files ``rels``), or None.

        None: not sent yet, or malformed -- then the helper is stopped.
        """
        frame = self.frames.pop(chunk, None)
        if frame is None:
            return None
        try:
            return _decode(frame, rels)
        except (ValueError, TypeError, EOFError):
            self.stop()
            return None

    def stop(self) -> None:
        """Stop the helper (it only reads, so killing it is safe); what it sent is dropped."""
        self.broken = True
        self.frames.clear()
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait()
        if self.feeder is not None:
            self.feeder.join()
            self.feeder = None
        if proc.stderr is not None:
            with contextlib.suppress(OSError, TypeError):  # TypeError: nothing to read
                self.errors = proc.stderr.read(1 << 16) or b""
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class _Shared:
    """One build shared between this process and its helpers (see the module)."""

    def __init__(self, root: str, rels: list[str], workers: int, progress: Any) -> None:
        self.root = root
        size = index.BUILD_CHUNK
        self.chunks = [rels[start : start + size] for start in range(0, len(rels), size)]
        self.workers = workers
        self.share = SHARE_PER_HELPER * workers + 1
        self.builder = index.Builder(progress, flush=True)

    def run(self) -> IndexState:
        chunks, helpers = self.chunks, []
        owner: dict[int, _Helper] = {}
        try:
            # every SHARE-th chunk is this process's own (put in as it comes: no tail)
            theirs = [i for i in range(len(chunks)) if i % self.share != self.share - 1]
            for w in range(self.workers):
                mine = [(i, chunks[i]) for i in theirs[w :: self.workers]]
                if mine:
                    helper = _Helper(self.root, mine)
                    helpers.append(helper)
                    owner.update((i, helper) for i, _ in mine)
            with DirCache(self.root) as dirs:
                self._share(dirs, helpers, owner)
        finally:
            for helper in helpers:
                helper.stop()
        return self.builder.finish()

    def _share(self, dirs: DirCache, helpers: list[_Helper], owner: dict[int, _Helper]) -> None:
        chunks, builder = self.chunks, self.builder
        low = len(chunks)  # the helpers' chunks from ``low`` on are parsed here (taken from the end)
        own: dict[int, _Chunk] = {}
        nxt = 0  # the next chunk to put in
        ahead = nxt  # this process's own chunks below ``ahead`` are parsed (or put)

        def here(i: int) -> _Chunk:
            """Chunk ``i`` as parsed here: ahead of time, or now."""
            done = own.pop(i, None)
            return done if done is not None else index.parse_chunk(self.root, chunks[i], dirs)

        while nxt < low:
            for helper in helpers:
                helper.pump()
            owed = owner.get(nxt)
            done: _Chunk | None
            if owed is None:  # one of this process's own
                done = here(nxt)
            else:
                done = owed.take(nxt, chunks[nxt])
                if done is None and owed.broken:  # it owes this chunk: parse it here
                    done = here(nxt)
            if done is not None:
                builder.add(len(chunks[nxt]), *done)
                nxt += 1
                continue
            ahead = max(ahead, nxt)
            while ahead < low and (ahead in owner or ahead in own):
                ahead += 1
            if ahead < low:  # parse one of its own chunks ahead of time
                own[ahead] = index.parse_chunk(self.root, chunks[ahead], dirs)
                continue
            low -= 1  # none left: take the helpers' last chunk
            if low not in own:
                own[low] = index.parse_chunk(self.root, chunks[low], dirs)
        for helper in helpers:
            helper.stop()
        for i in range(nxt, len(chunks)):
            builder.add(len(chunks[i]), *here(i))


def _feed(stream: IO[bytes], *values: Any) -> None:
    """Write each value as a frame, then close (the helper may be gone: then nothing)."""
    with contextlib.suppress(OSError), stream:
        for value in values:
            _write_frame(stream, marshal.dumps(value))


def _write_frame(stream: IO[bytes], data: bytes) -> None:
    """``data`` with its length in front (what :meth:`_Helper._complete` and the helper's boot read)."""
    stream.write(len(data).to_bytes(_HEADER, "little"))
    stream.write(data)


def _encode(parsed: list[Parsed], problems: dict[str, str]) -> bytes:
    return marshal.dumps(([_entry_fields(p.entry) for p in parsed], [p.text for p in parsed], problems))


def _decode(frame: bytes, rels: list[str]) -> _Chunk:
    """A chunk frame back into parsed files; ValueError or TypeError unless it is one of ``rels``."""
    rows, texts, problems = marshal.loads(frame)
    if not (isinstance(rows, list) and isinstance(texts, list) and isinstance(problems, dict)):
        raise ValueError("not a chunk frame")
    if len(rows) != len(texts):
        raise ValueError("entries and texts differ in number")
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("a text is not a string")
    parsed = [Parsed(None, Entry(*row), text) for row, text in zip(rows, texts, strict=True)]
    # Every file named must be one of the chunk's, and named once.
    named = [p.entry.path for p in parsed] + list(problems)
    if len(set(named)) != len(named) or not set(named) <= set(rels):
        raise ValueError("a file of another chunk")
    if not all(isinstance(reason, str) for reason in problems.values()):
        raise TypeError("a problem is not a string")
    return parsed, problems


def _serve(package: str, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """The helper's side: parse the chunks it was given, one frame each, in order.

    ``package``: where the caller's ``md_cg`` lives; a helper that imported
    another copy exits at once (the caller then parses everything itself).
    """
    if str(Path(__file__).resolve().parent) != package:
        return 2
    root, chunks = marshal.loads(stdin.read(int.from_bytes(stdin.read(_HEADER), "little")))
    with index.no_gc(), DirCache(root) as dirs:
        for _, rels in chunks:
            _write_frame(stdout, _encode(*index.parse_chunk(root, rels, dirs)))
            stdout.flush()
    return 0
