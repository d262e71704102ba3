"""File operations: atomic writes, temp files, locks and per-process log shards.

* :func:`atomic_write` -- a unique temp file in the target's directory, then
  ``os.replace``; optional fsync of the file and its directory.
* :class:`FileLock` -- portalocker (``flock``) on a lock file that is never
  replaced, shared or exclusive, with a timeout that raises
  :class:`~md_cg.errors.LockTimeoutError`.
* :class:`ShardWriter` / :func:`read_shard` -- append-only JSON-lines shards,
  one per writing process, so no two processes ever append to one file.

Imports only :mod:`md_cg.errors`.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson
import portalocker

from .errors import LockTimeoutError

TMP_SUFFIX = ".tmp"
#: Temp files older than this are treated as abandoned even if their pid lives
#: (pid reuse); younger ones are removed only when their writer is dead.
TMP_STALE_SECONDS = 600.0


# -- atomic writes ------------------------------------------------------------


_TEMP_TAG: list[Any] = [-1, "", None]  # pid, random token, counter (renewed after fork)


def temp_name(target: str | os.PathLike[str]) -> str:
    """A unique temp path next to ``target``: ``.<name>.<pid>.<token><n>.tmp``.

    The pid says whose it is (``sync`` removes temp files of dead writers); a
    random token drawn once per process plus a counter keeps names unique
    without the cost of a UUID per write (and O_EXCL refuses any clash).
    """
    pid = os.getpid()
    if _TEMP_TAG[0] != pid:
        _TEMP_TAG[:] = [pid, os.urandom(4).hex(), itertools.count()]
    head, name = os.path.split(os.fspath(target))
    return os.path.join(head, f".{name}.{pid}.{_TEMP_TAG[1]}{next(_TEMP_TAG[2]):x}{TMP_SUFFIX}")


def fsync_file(path: str | os.PathLike[str]) -> None:
    """fsync a file that is already written and closed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename in it survives a power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_temp(target: str | os.PathLike[str], data: bytes, *, durable: bool) -> tuple[str, os.stat_result]:
    """Write ``data`` to a fresh temp file beside ``target``.

    Returns the temp path and its stat (mtime and size survive the rename).
    """
    tmp = temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if durable:
            os.fsync(fd)
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp, st


def atomic_write(target: str | os.PathLike[str], data: bytes, *, durable: bool = False) -> os.stat_result:
    """Replace ``target`` with ``data`` atomically (readers see old or new, never half).

    Returns the stat of the written file.
    """
    tmp, st = write_temp(target, data, durable=durable)
    try:
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(os.path.dirname(os.fspath(target)))
    return st


def is_temp_name(name: str) -> bool:
    """True for names made by :func:`temp_name` (and shard-creation temp files)."""
    return name.startswith(".") and name.endswith(TMP_SUFFIX)


def temp_owner_pid(name: str) -> int | None:
    """The pid embedded in a temp file name, if any."""
    parts = name[: -len(TMP_SUFFIX)].split(".")
    if len(parts) >= 3 and parts[-2].isdigit():
        return int(parts[-2])
    return None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this host)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temp_is_abandoned(path: Path, name: str, now: float | None = None) -> bool:
    """A temp file whose writer is dead, or that is older than :data:`TMP_STALE_SECONDS`."""
    pid = temp_owner_pid(name)
    if pid is not None and pid != os.getpid() and not pid_alive(pid):
        return True
    try:
        age = (now or time.time()) - path.stat().st_mtime
    except FileNotFoundError:
        return False
    return age > TMP_STALE_SECONDS


# -- locks --------------------------------------------------------------------


class FileLock:
    """A shared or exclusive ``flock`` on a dedicated lock file.

    The lock file is created if missing and never replaced or deleted, so
    every process locks the same inode. The file stays open between
    acquisitions (re-opened after a fork: a child must not share the
    parent's open file, or unlocking would release the parent's lock).
    Re-entrant within one object.
    """

    def __init__(self, path: Path, *, what: str = "maintenance") -> None:
        self.path = path
        self.what = what
        self._fh: IO[Any] | None = None
        self._pid = -1
        self._depth = 0
        self._shared = False

    def _file(self) -> IO[Any]:
        if self._fh is None or self._pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a")  # noqa: SIM115 - kept open for flock
            self._pid = os.getpid()
            self._depth = 0
        return self._fh

    def acquire(self, *, shared: bool = False, timeout: float = 30.0) -> None:
        if self._depth and self._pid == os.getpid():
            if self._shared and not shared:
                raise RuntimeError("cannot upgrade a shared lock to exclusive")
            self._depth += 1
            return
        fh = self._file()
        flags = portalocker.LOCK_SH if shared else portalocker.LOCK_EX
        try:
            portalocker.lock(fh, flags | portalocker.LOCK_NB)
        except (portalocker.AlreadyLocked, portalocker.LockException):
            deadline = time.monotonic() + timeout
            while True:
                time.sleep(0.002)
                try:
                    portalocker.lock(fh, flags | portalocker.LOCK_NB)
                    break
                except (portalocker.AlreadyLocked, portalocker.LockException):
                    if time.monotonic() >= deadline:
                        raise LockTimeoutError(self.path, timeout, self.what) from None
        self._depth = 1
        self._shared = shared

    def release(self) -> None:
        if not self._depth or self._fh is None:
            return
        self._depth -= 1
        if self._depth == 0:
            portalocker.unlock(self._fh)

    @contextlib.contextmanager
    def hold(self, *, shared: bool = False, timeout: float = 30.0) -> Iterator[None]:
        self.acquire(shared=shared, timeout=timeout)
        try:
            yield
        finally:
            self.release()

    @property
    def held(self) -> bool:
        return self._depth > 0

    def close(self) -> None:
        """Release (if held) and close the lock file."""
        if self._fh is not None and self._pid == os.getpid():
            if self._depth:
                with contextlib.suppress(OSError):
                    portalocker.unlock(self._fh)
            self._fh.close()
        self._fh = None
        self._depth = 0


def try_lock_exclusive(path: Path) -> IO[Any] | None:
    """Lock an existing file exclusively without waiting; the open handle, or None if busy."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        return None
    try:
        portalocker.lock(fh, portalocker.LOCK_EX | portalocker.LOCK_NB)
    except (portalocker.AlreadyLocked, portalocker.LockException):
        fh.close()
        return None
    return fh


# -- log shards ---------------------------------------------------------------

SHARD_SUFFIX = ".jsonl"


class ShardWriter:
    """Appends JSON-lines records to this process's own shard.

    The shard is created on the first append (a process that only reads never
    creates one), under a temp name, locked exclusively, then renamed into
    place -- so a compactor that finds a shard it can lock knows no live
    process owns it. The lock is held until :meth:`close`. After ``fork`` the
    child starts a shard of its own.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fh: IO[bytes] | None = None
        self._pid = -1
        self._seq = 0
        self.name: str | None = None

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        stem = f"{pid}_{uuid.uuid4().hex}"
        tmp = self.directory / f".{stem}.creating{TMP_SUFFIX}"
        fh = open(tmp, "xb", buffering=0)  # noqa: SIM115 - kept open for appends
        try:
            portalocker.lock(fh, portalocker.LOCK_EX | portalocker.LOCK_NB)
            os.rename(tmp, self.directory / f"{stem}{SHARD_SUFFIX}")
        except BaseException:
            fh.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._fh, self._pid, self._seq, self.name = fh, pid, 0, f"{stem}{SHARD_SUFFIX}"

    def append(self, records: Iterable[dict[str, Any]], *, durable: bool = False) -> int:
        """Append records as one ``write`` (stamped with ``ts`` and ``seq``).

        Returns the number of bytes appended.
        """
        if self._fh is None or self._pid != os.getpid():
            self._fh = None  # a forked child must not share the parent's shard
            self._open()
        assert self._fh is not None
        ts = time.time_ns()
        lines = []
        for rec in records:
            self._seq += 1
            lines.append(orjson.dumps({"ts": ts, "seq": self._seq, **rec}))
        if not lines:
            return 0
        data = b"\n".join(lines) + b"\n"
        fd = self._fh.fileno()
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if durable:
            os.fsync(fd)
        return len(data)

    def close(self) -> None:
        if self._fh is not None and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                portalocker.unlock(self._fh)
            self._fh.close()
        self._fh = None


@dataclass(frozen=True)
class ShardRead:
    """Records read from one shard, and the byte offset just after the last whole line."""

    name: str
    records: list[dict[str, Any]]
    end: int
    bad_lines: int


def read_shard(path: Path, start: int = 0) -> ShardRead:
    """Read whole lines of a shard from byte ``start``.

    A last line without its newline (a writer killed mid-append, or one still
    writing) is not consumed: ``end`` stops before it. A complete line that is
    not valid JSON is counted in ``bad_lines`` and skipped.
    """
    with open(path, "rb") as fh:
        if start:
            fh.seek(start)
        data = fh.read()
    cut = data.rfind(b"\n")
    if cut < 0:
        return ShardRead(path.name, [], start, 0)
    records: list[dict[str, Any]] = []
    bad = 0
    for line in data[:cut].split(b"\n"):
        if not line:
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            bad += 1
            continue
        if isinstance(rec, dict):
            records.append(rec)
        else:
            bad += 1
    return ShardRead(path.name, records, start + cut + 1, bad)


def list_shards(directory: Path) -> list[str]:
    """Names of the shards in ``directory`` (sorted), ignoring temp files."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(SHARD_SUFFIX) and not n.startswith("."))


def remove_if_exists(path: str | os.PathLike[str]) -> bool:
    """Unlink ``path``; False if it was already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:  # pragma: no cover - surfaced to the caller
        if exc.errno == errno.ENOENT:
            return False
        raise
    return True
