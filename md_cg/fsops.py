"""File operations below a store root: no symlink is ever followed.

Every path handed to this module is relative to a trusted root folder. It is
walked one component at a time with ``O_NOFOLLOW`` through directory file
descriptors (``openat``), so a symlink anywhere below the root -- a layer
folder, a bucket, a node file, ``.mdcg/`` or anything in it -- makes the
operation fail with :class:`~md_cg.errors.UnsafePathError` instead of
reaching outside. The root itself may be a symlink: the caller chose it.

* :class:`Dir` -- an open folder: unique temp files, ``rename``, ``unlink``.
* :func:`atomic_write` -- temp file in the target's folder, then rename.
* :func:`read_file` / :func:`lstat` -- read or stat one file, no symlinks.
* :func:`scan` -- walk a folder tree: regular files, symlinks and other
  entries reported apart; entries that vanish mid-scan are simply absent.
* :class:`FolderCache` -- the folders a batch writes into, a bounded number
  open at once.
* :class:`FileLock` -- ``flock`` on a lock file that is never replaced
  (portalocker where there is no ``fcntl``); :class:`MaintenanceLock` adds a
  gate so that maintenance is not starved by a stream of writers.
* :class:`ShardWriter` / :func:`read_shard` -- append-only JSON-lines shards,
  one per writing process.

Open descriptors do not grow with the number of folders (a store may have
thousands of bucket folders; the soft ``RLIMIT_NOFILE`` is often 1,024, 256 on
macOS). A walk (:func:`scan`, :func:`find_named`) holds open only the folders
on its path from the top -- at most one per level -- and opens a subfolder,
relative to its parent's descriptor, only when its turn comes. A batch holds at
most :data:`FOLDER_CACHE_SIZE` folders (:class:`FolderCache`); one it closed is
reached again by the same walk from the root, so a symlink put there meanwhile
is refused like any other; its fsync calls hold at most two per thread of
:func:`fsync_all`.

Imports only :mod:`md_cg.errors`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import re
import stat as statmod
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from .errors import LockTimeoutError, UnsafePathError

#: What :func:`atomic_write` writes: one buffer (or several, in order).
BytesLike = bytes | bytearray | memoryview

TMP_SUFFIX = ".tmp"
#: Temp files older than this are treated as abandoned even if their pid lives
#: (pid reuse); younger ones are removed only when their writer is dead.
TMP_STALE_SECONDS = 600.0
SHARD_SUFFIX = ".jsonl"

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
# O_NONBLOCK: opening a FIFO planted under a node name must not hang the reader.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK


def _split(rel: str) -> tuple[str, str]:
    cut = rel.rfind("/")
    return (rel[:cut], rel[cut + 1 :]) if cut >= 0 else ("", rel)


def _refuse(dirfd: int, name: str, rel: str, exc: OSError) -> OSError | UnsafePathError:
    """Turn ELOOP/ENOTDIR into UnsafePathError when ``name`` is a symlink or odd entry."""
    if exc.errno == errno.ELOOP:
        return UnsafePathError(rel, "is a symlink (md-cg never follows symlinks below the store root)")
    if exc.errno == errno.ENOTDIR:
        try:
            st = os.lstat(name, dir_fd=dirfd)
        except OSError:
            return exc
        if statmod.S_ISLNK(st.st_mode):
            return UnsafePathError(rel, "is a symlink (md-cg never follows symlinks below the store root)")
        return FileNotFoundError(errno.ENOENT, "a component is not a folder", rel)
    return exc


def open_dir(
    root: str, rel_dir: str, *, create: bool = False, durable: bool = False, made: list[str] | None = None
) -> int:
    """An fd of ``root/rel_dir`` reached without following symlinks (caller closes it).

    ``create=True`` makes missing folders on the way; with ``durable=True`` the
    parent of each folder it makes is fsynced, so the new folder's own entry
    survives a power cut (fsyncing a file and its folder does not cover that).
    ``made`` receives the path of each folder it made (for a caller that
    fsyncs their parents itself, later).

    With ``create``, a folder on the way that another process removes meanwhile
    (an emptied bucket folder) is made again: the walk restarts, a few times.
    """
    for attempt in range(_CREATE_TRIES):
        try:
            return _open_dir_once(root, rel_dir, create=create, durable=durable, made=made)
        except FileNotFoundError:
            if not create or attempt == _CREATE_TRIES - 1:
                raise
    raise AssertionError("unreachable")


#: Walks of :func:`open_dir` (``create=True``) before a folder removed each time is an error.
_CREATE_TRIES = 8


def _open_dir_once(root: str, rel_dir: str, *, create: bool, durable: bool, made: list[str] | None) -> int:
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    done: list[str] = []
    try:
        for part in rel_dir.split("/") if rel_dir else ():
            done.append(part)
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                made_here = True
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    made_here = False  # another process made it meanwhile
                except OSError as exc:
                    raise _denied(exc, root, "/".join(done)) from None
                if made_here and durable:
                    os.fsync(fd)
                if made_here and made is not None:
                    made.append("/".join(done))
                try:
                    nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise _refuse_dir(fd, part, "/".join(done), exc, create, root) from None
            except OSError as exc:
                raise _refuse_dir(fd, part, "/".join(done), exc, create, root) from None
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_dir(
    dirfd: int, name: str, rel: str, exc: OSError, create: bool, root: str
) -> OSError | UnsafePathError:
    """:func:`_refuse` of a folder on the way; where the caller makes folders (a write), a
    file standing where a folder belongs is named, not taken for "absent"."""
    err = _refuse(dirfd, name, rel, exc)
    if create and exc.errno == errno.ENOTDIR and isinstance(err, FileNotFoundError):
        return UnsafePathError(rel, _FILE_NOT_FOLDER)
    return _denied(err, root, rel)


_FILE_NOT_FOLDER = "is a file where md-cg keeps a folder; remove it"


def folder_refusal(root: str, rel_dir: str) -> UnsafePathError | None:
    """Why a write would refuse the folder ``rel_dir`` of the store at ``root``: the
    error :func:`open_dir` raises there with ``create=True`` for a symlink or a file on
    the way; None for a folder, or none yet (the write makes it). Makes nothing. A
    ``rel_dir`` that is no plain relative folder path (``..``, ``.``, an empty part, a NUL,
    a leading ``/``) is refused as such: never looked up (``..`` would leave the store)."""
    parts = rel_dir.split("/")
    if rel_dir.startswith("/") or "\0" in rel_dir or any(p in ("", ".", "..") for p in parts):
        return UnsafePathError(rel_dir, "is not a plain folder path below the store")
    try:
        os.close(open_dir(root, rel_dir))
    except UnsafePathError as exc:
        return exc
    except FileNotFoundError:  # a part absent, or a file (a symlink was refused above)
        for end in range(1, len(parts) + 1):
            rel = "/".join(parts[:end])
            try:
                st = os.lstat(os.path.join(root, rel))  # the parts before it are folders
            except OSError:
                return None
            if not statmod.S_ISDIR(st.st_mode):
                return UnsafePathError(rel, _FILE_NOT_FOLDER)
    except OSError:
        pass
    return None


def _denied(exc: OSError | UnsafePathError, root: str, rel: str) -> OSError | UnsafePathError:
    """A ``PermissionError`` naming ``rel`` below the store ``root`` (the one the system
    call raised names a bare entry: opens go through folder fds), an ``EROFS`` error
    naming ``rel`` (:func:`_read_only`); any other as it is."""
    if not isinstance(exc, PermissionError):
        return _read_only(exc, rel)
    return PermissionError(exc.errno, f"{exc.strerror} (in the store at {root})", rel)


def _read_only(exc: OSError | UnsafePathError, rel: str) -> OSError | UnsafePathError:
    """An ``EROFS`` error (a read-only file system) naming ``rel``, the path relative to
    the store, for the message that says what was refused; any other as it is."""
    if isinstance(exc, UnsafePathError) or exc.errno != errno.EROFS:
        return exc
    return OSError(errno.EROFS, exc.strerror or os.strerror(errno.EROFS), rel)


def _uncreated(exc: OSError, folder: str, tmp: str) -> OSError | UnsafePathError:
    """The error of a temp file ``tmp`` that could not be created in ``folder`` (relative to
    the store): a ``PermissionError`` names the folder -- the system call's names the bare
    temp file (``.k1.md.3007.2962988f1.tmp: Permission denied``: which folder? session 38's
    migration simulation) --, an ``EROFS`` error the temp file's path (:func:`_read_only`)."""
    if isinstance(exc, PermissionError):
        return PermissionError(
            exc.errno, f"{exc.strerror}: a file cannot be created in this folder", folder or "."
        )
    return _read_only(exc, f"{folder}/{tmp}" if folder else tmp)


# -- this process ---------------------------------------------------------------

#: This process's pid, kept current across ``fork`` by :func:`os.register_at_fork`,
#: so the write path does not ask the kernel on every call (a system call each:
#: temp names, lock and shard ownership checks). Read it with :func:`current_pid`.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_forked)


def current_pid() -> int:
    """This process's pid (``os.getpid()``, cached; renewed in a forked child)."""
    return _pid


# -- temp names -----------------------------------------------------------------

_TEMP_TAG: list[Any] = [-1, "", None]  # pid, random token, counter (renewed after fork)


def temp_name(name: str) -> str:
    """A unique temp name beside ``name``: ``.<name>.<pid>.<token><n>.tmp``.

    The pid says whose it is (maintenance removes temp files of dead
    writers); a random token drawn once per process plus a counter keeps
    names unique without the cost of a UUID per write (and O_EXCL refuses
    any clash).
    """
    pid = _pid
    if _TEMP_TAG[0] != pid:
        _TEMP_TAG[:] = [pid, os.urandom(4).hex(), itertools.count()]
    return f".{name}.{pid}.{_TEMP_TAG[1]}{next(_TEMP_TAG[2]):x}{TMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """True for names made by :func:`temp_name` (and shard-creation temp files)."""
    return name.startswith(".") and name.endswith(TMP_SUFFIX)


def temp_owner_pid(name: str) -> int | None:
    """The pid embedded in a temp file name, if any.

    Two forms: ``.<name>.<pid>.<token>.tmp`` (:func:`temp_name`) and
    ``.<pid>_<uuid>.creating.tmp`` (a shard being created by :class:`ShardWriter`).
    """
    parts = name[: -len(TMP_SUFFIX)].split(".")
    if len(parts) >= 3 and parts[-2].isdigit():
        return int(parts[-2])
    if len(parts) == 3 and parts[-1] == "creating":
        pid = parts[1].split("_", 1)[0]
        if pid.isdigit():
            return int(pid)
    return None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this host) and has not exited.

    A zombie -- exited, not yet reaped by its parent -- is dead: where PID 1
    does not reap orphans promptly (some containers and sandboxes), a killed
    writer stays a zombie for a while, and its temp files are garbage already.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _exited(pid)


def _exited(pid: int) -> bool:
    """True when ``/proc`` shows ``pid`` as a zombie (Linux; elsewhere False)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read(512)
    except FileNotFoundError:
        return os.path.isdir("/proc/self")  # /proc is there and the pid is gone
    except OSError:
        return False
    # "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ")"
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"Z", b"X")


def temp_is_abandoned(name: str, mtime: float, now: float | None = None) -> bool:
    """A temp file whose writer is dead, or that is older than :data:`TMP_STALE_SECONDS`."""
    pid = temp_owner_pid(name)
    if pid is not None and pid != _pid and not pid_alive(pid):
        return True
    return (now or time.time()) - mtime > TMP_STALE_SECONDS


# -- folders and files ----------------------------------------------------------


#: ``renameat2`` flags (Linux): swap two names; fail rather than replace a file
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
#: errnos by which ``renameat2`` says it cannot (no such call, a file system without the flag)
_NO_RENAME2 = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}
#: errnos by which ``link`` says the file system has no hard links
_NO_LINK = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}


@functools.cache
def _libc(name: str) -> Any:
    """The C library's function ``name`` through ctypes (Linux only); None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """glibc's ``renameat2`` (2.28 and later); None elsewhere."""
    import ctypes

    fn = _libc("renameat2")
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
    return fn


@functools.cache
def _sync_file_range() -> Callable[..., int] | None:
    import ctypes

    fn = _libc("sync_file_range")
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
        fn.restype = ctypes.c_int
    return fn


#: ``sync_file_range`` flag: start writing the dirty pages back, do not wait
_SYNC_FILE_RANGE_WRITE = 2


def rename2(dirfd: int, src: str, dst: str, flags: int) -> bool:
    """``renameat2(dirfd, src, dirfd, dst, flags)``: True when done; False when this system
    or file system cannot do it (nothing changed); any other error raised as ``OSError``."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(dirfd, os.fsencode(src), dirfd, os.fsencode(dst), flags) == 0:
        return True
    import ctypes

    err = ctypes.get_errno()
    if err in _NO_RENAME2:
        return False
    raise OSError(err, os.strerror(err), dst)


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Dir:
    """A folder below the root, opened without following symlinks.

    ``create=True`` makes missing folders on the way (``durable`` and ``made``:
    see :func:`open_dir`). Use as a context manager (or call :meth:`close`).
    """

    def __init__(
        self,
        root: str,
        rel_dir: str,
        *,
        create: bool = False,
        durable: bool = False,
        made: list[str] | None = None,
    ) -> None:
        self.rel = rel_dir
        self.fd = open_dir(root, rel_dir, create=create, durable=durable, made=made)

    def __enter__(self) -> Dir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _rel(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name

    def sub(self, name: str) -> Dir:
        """The folder ``name`` in this one, opened without following a symlink (caller closes it)."""
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise _refuse(self.fd, name, self._rel(name), exc) from None
        d = Dir.__new__(Dir)
        d.rel, d.fd = self._rel(name), fd
        return d

    def write_temp(
        self, name: str, data: BytesLike | Iterable[BytesLike], *, durable: bool = False
    ) -> tuple[str, os.stat_result]:
        """Write ``data`` (one buffer, or several written in order: a generator streams
        them) to a fresh temp file beside ``name``; return its name and stat."""
        tmp = temp_name(name)
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644, dir_fd=self.fd
            )
        except OSError as exc:
            raise _uncreated(exc, self.rel, tmp) from None
        try:
            if type(data) is bytes:
                # One buffer (a node file): one write, unless the kernel takes less.
                n = os.write(fd, data)
                if n < len(data):
                    _write_all(fd, memoryview(data)[n:])
            else:
                for part in [data] if isinstance(data, bytes | bytearray | memoryview) else data:
                    _write_all(fd, memoryview(part).cast("B"))  # os.write counts bytes
            if durable:
                os.fsync(fd)
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise
        os.close(fd)
        return tmp, st

    def fsync_file(self, name: str) -> None:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` over ``dst`` in this folder (atomic)."""
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def exchange(self, a: str, b: str) -> bool:
        """Swap ``a`` and ``b`` in this folder in one step (:func:`rename2`,
        ``RENAME_EXCHANGE``): True when done, False where the system or the file system
        cannot (then nothing changed). ``FileNotFoundError`` when either is missing."""
        return rename2(self.fd, a, b, RENAME_EXCHANGE)

    def set_aside(self, name: str, tmp: str) -> None:
        """Rename the file ``name`` to ``tmp``, a fresh temp name (:func:`temp_name`), to be
        checked before it is removed: whatever is at ``name`` at that instant is what is
        moved, and nothing saved over ``name`` after it can be removed by mistake (a check
        then an unlink removed a save landing between the two). ``FileNotFoundError``
        when nothing is there; any other error names the file relative to the store, as
        :meth:`unlink`'s (a sweep refused by a read-only folder named ``e1.md -> .e1.md.<pid>...tmp``)."""
        try:
            os.rename(name, tmp, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            exc.filename, exc.filename2 = self._rel(name), None
            raise

    def rename_new(self, src: str, dst: str) -> bool:
        """Rename ``src`` (a name of md-cg's own: a temp file) to ``dst`` only while nothing
        is at ``dst``: True when done, False when something is there (nothing changed).
        ``renameat2(RENAME_NOREPLACE)``; where the system or file system cannot, a hard
        link then the unlink of ``src`` (``link`` never replaces); where neither can, a
        look then a plain rename (the window of before). ``FileNotFoundError`` when
        ``src`` is missing."""
        try:
            if rename2(self.fd, src, dst, RENAME_NOREPLACE):
                return True
        except FileExistsError:
            return False
        try:
            os.link(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_LINK:
                raise
            try:
                os.lstat(dst, dir_fd=self.fd)
            except FileNotFoundError:
                os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)
                return True
            return False
        os.unlink(src, dir_fd=self.fd)
        return True

    def start_writeback(self, name: str) -> None:
        """Start writing the file ``name`` back to disk, without waiting (Linux
        ``sync_file_range(SYNC_FILE_RANGE_WRITE)``; best effort, nothing elsewhere). Before an
        exchange over a file: ext4 does so itself for a rename over a file (``auto_da_alloc``),
        so that after a power cut the path holds the old bytes or the new -- an exchange it
        does not (the path could be left empty)."""
        fn = _sync_file_range()
        if fn is None:
            return
        with contextlib.suppress(OSError):
            fd = os.open(name, _READ_FLAGS, dir_fd=self.fd)
            try:
                fn(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)
            finally:
                os.close(fd)

    def unlink(self, name: str) -> bool:
        """Remove ``name`` (a file or symlink, never what it points to); False if absent.

        Any other error names the path relative to the store (the system call, made
        through the folder's fd, names the bare entry: a refused sweep said ``e1.md``)."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        except OSError as exc:
            exc.filename = self._rel(name)
            raise
        return True

    def lstat(self, name: str) -> os.stat_result:
        return os.lstat(name, dir_fd=self.fd)

    def append(self, name: str, data: bytes) -> bool:
        """Append ``data`` to the regular file ``name`` (``O_APPEND``, never through a
        symlink, never creating it); False if no file is there."""
        try:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise _refuse(self.fd, name, self._rel(name), exc) from None
        try:
            if not statmod.S_ISREG(os.fstat(fd).st_mode):
                return False
            _write_all(fd, memoryview(data))
        finally:
            os.close(fd)
        return True

    def exists(self, name: str) -> bool:
        try:
            os.lstat(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True

    def read(
        self, name: str, *, max_bytes: int | None = None, head: int | None = None
    ) -> tuple[bytes, os.stat_result]:
        """Read a regular file of this folder (never through a symlink); ``head``: only its first bytes."""
        fd, st = self.open_read(name)
        try:
            if max_bytes is not None and st.st_size > max_bytes:
                return b"", st
            if head is not None:
                return os.pread(fd, head, 0), st
            chunks = []
            while True:
                chunk = os.read(fd, max(st.st_size, 1 << 16))
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks), st
        finally:
            os.close(fd)

    def open_read(self, name: str) -> tuple[int, os.stat_result]:
        """Open a regular file of this folder for reading (never through a symlink): (fd, stat).

        The caller closes the descriptor.
        """
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise _refuse(self.fd, name, self._rel(name), exc) from None
        try:
            st = os.fstat(fd)
            if not statmod.S_ISREG(st.st_mode):
                raise UnsafePathError(self._rel(name), "is not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def fsync(self) -> None:
        os.fsync(self.fd)

    def listdir(self) -> list[str]:
        return os.listdir(self.fd)


#: Folders a :class:`FolderCache` keeps open at most (see the module docstring).
FOLDER_CACHE_SIZE = 32


class FolderCache:
    """Folders below the root opened by relative path, at most ``size`` open at once.

    A batch that writes into many folders (one bucket folder per domain) looks each
    one up here: the least recently used folder is closed when a new one would pass
    ``size``, and opened again (by path, without following symlinks, like any
    :class:`Dir`) if it is needed later. So a batch holds a bounded number of folder
    descriptors however many folders it spans, and one spanning fewer than ``size``
    opens each folder once, as before. Every folder opened through it is kept in
    :attr:`touched` (in first-use order), for one fsync of each at the end
    (:meth:`fsync_calls`). Not thread-safe: the calls it builds may run on other
    threads only while nothing else uses it (:func:`fsync_all` joins them all).
    """

    def __init__(self, root: str, size: int = FOLDER_CACHE_SIZE) -> None:
        self.root = root
        self.size = max(1, size)
        self._open: OrderedDict[str, Dir] = OrderedDict()
        #: every folder opened through this cache, in first-use order
        self.touched: dict[str, None] = {}

    def get(self, rel_dir: str, *, create: bool = False, made: list[str] | None = None) -> Dir:
        """The open folder ``rel_dir`` (opened now if it is not; ``create`` and ``made``:
        see :func:`open_dir`). It stays open until ``size`` other folders are looked up."""
        d = self._open.get(rel_dir)
        if d is not None:
            self._open.move_to_end(rel_dir)
            return d
        d = Dir(self.root, rel_dir, create=create, made=made)
        self._open[rel_dir] = d
        self.touched[rel_dir] = None
        if len(self._open) > self.size:
            self._open.popitem(last=False)[1].close()
        return d

    def drop(self, rel_dir: str) -> None:
        """Close ``rel_dir`` if it is open (it is opened again on the next :meth:`get`)."""
        d = self._open.pop(rel_dir, None)
        if d is not None:
            d.close()

    @property
    def spilled(self) -> bool:
        """Whether a folder looked up here was closed since (more folders than ``size``)."""
        return len(self.touched) > len(self._open)

    def fsync_file_calls(self, files: Iterable[tuple[str, str]]) -> list[Callable[[], None]]:
        """Calls for :func:`fsync_all` that fsync each file ``(folder, name)``.

        While every folder is open (a batch within ``size`` folders), one call per file
        through its open folder. Otherwise the cache is closed first and each call opens
        one folder (without following symlinks), fsyncs up to :data:`FSYNC_CHUNK` of its
        files and closes it: the descriptors in flight stay at two per thread."""
        if not self.spilled:
            return [functools.partial(self._open[rel_dir].fsync_file, name) for rel_dir, name in files]
        self.close()
        by_dir: dict[str, list[str]] = {}
        for rel_dir, name in files:
            by_dir.setdefault(rel_dir, []).append(name)
        return [
            functools.partial(_fsync_files_at, self.root, rel_dir, names[k : k + FSYNC_CHUNK])
            for rel_dir, names in by_dir.items()
            for k in range(0, len(names), FSYNC_CHUNK)
        ]

    def fsync_calls(self) -> list[Callable[[], None]]:
        """One call per folder in :attr:`touched` that fsyncs it: through the open folder,
        or (when :attr:`spilled`: the cache is closed first) opening it when it runs; a
        folder removed meanwhile needs none (its entries went with it)."""
        if not self.spilled:
            return [d.fsync for d in self._open.values()]
        self.close()
        return [functools.partial(_fsync_dir_at, self.root, rel_dir) for rel_dir in self.touched]

    def close(self) -> None:
        """Close every open folder (:attr:`touched` is kept)."""
        while self._open:
            self._open.popitem()[1].close()

    def __enter__(self) -> FolderCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Files one call of :meth:`FolderCache.fsync_file_calls` fsyncs in a folder it opens.
FSYNC_CHUNK = 64


def _fsync_files_at(root: str, rel_dir: str, names: Sequence[str]) -> None:
    with Dir(root, rel_dir) as d:
        for name in names:
            d.fsync_file(name)


def _fsync_dir_at(root: str, rel_dir: str) -> None:
    try:
        d = Dir(root, rel_dir)
    except (FileNotFoundError, NotADirectoryError):
        return  # removed since (an emptied bucket folder): its entries went with it
    with d:
        d.fsync()


#: At most this many fsyncs are in flight at once in :func:`fsync_all`.
FSYNC_THREADS = 16
#: :func:`fsync_all` runs this many calls one after another first, and goes
#: concurrent only when they took longer than :data:`FSYNC_SLOW_SECONDS` each
#: on average: where an fsync is nearly free (tmpfs, a fast cache) the threads
#: would cost more than they save.
FSYNC_PROBE = 4
FSYNC_SLOW_SECONDS = 100e-6


def fsync_all(calls: Sequence[Callable[[], object]], *, threads: int | None = None) -> None:
    """Run fsync ``calls`` (each fsyncs one file or folder), up to ``threads``
    at once (default :data:`FSYNC_THREADS`).

    A journalling file system (ext4, XFS, btrfs) folds the fsyncs in flight
    at the same moment into one journal commit, so a batch of files written
    back concurrently costs a few device flushes instead of one per file
    (ext4 here: ~4x less time in fsync for a batch of 1,000). Each call is
    still a full fsync of its own file: what survives a power cut is the same.

    The first :data:`FSYNC_PROBE` calls run one after another; the rest run
    concurrently only if those were slow (:data:`FSYNC_SLOW_SECONDS`). The
    calling thread takes a share; the others run on short-lived threads
    that are all joined before this returns or raises (so the folders the
    calls use may be closed right after). The first error met (an ``OSError``,
    an ``UnsafePathError`` of a folder reopened and found to be a symlink, or any
    other exception, ``SystemExit`` included) is raised once every thread has
    stopped; an error or an interrupt stops the others before their next call.
    """
    limit = FSYNC_THREADS if threads is None else threads
    done = 0
    started = time.perf_counter()
    for call in calls:
        if done >= FSYNC_PROBE and limit > 1 and time.perf_counter() - started > done * FSYNC_SLOW_SECONDS:
            break
        call()
        done += 1
    rest = calls[done:]
    count = min(limit, len(rest))
    if count < 2:
        for call in rest:
            call()
        return
    parts = [rest[i::count] for i in range(count)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(part: Sequence[Callable[[], object]], here: bool = False) -> None:
        try:
            for call in part:
                if stop.is_set():
                    return
                call()
        except (
            BaseException
        ) as exc:  # any failure (a folder refused as a symlink, SystemExit) fails the batch
            stop.set()
            if here:
                raise  # the calling thread's own (a Ctrl-C too): raised after the joins
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(p,), name="mdcg-fsync", daemon=True) for p in parts[1:]]
    try:
        for worker in workers:
            worker.start()
        run(parts[0], here=True)
    except BaseException:
        stop.set()
        raise
    finally:
        for worker in workers:
            if worker.ident is not None:
                worker.join()
    if errors:
        raise errors[0]


def read_file(
    root: str, rel: str, *, max_bytes: int | None = None, head: int | None = None
) -> tuple[bytes, os.stat_result]:
    """Read ``root/rel`` without following symlinks; return its bytes and stat.

    With ``max_bytes``, a larger file is not read: the bytes come back empty
    and the caller compares ``st_size`` with its limit. With ``head``, at
    most that many bytes from the start are read.
    """
    parent, name = _split(rel)
    with Dir(root, parent) as d:
        return d.read(name, max_bytes=max_bytes, head=head)


def overwrite_at(root: str, rel: str, edits: Iterable[tuple[int, bytes]]) -> None:
    """Write each ``(offset, data)`` of ``edits`` over the bytes of the regular file
    ``root/rel`` in place (no symlink followed; the file keeps its inode and size, so a
    process appending to it loses nothing)."""
    parent, name = _split(rel)
    with Dir(root, parent) as d:
        fd = os.open(name, os.O_WRONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=d.fd)
        try:
            if not statmod.S_ISREG(os.fstat(fd).st_mode):
                raise UnsafePathError(rel, "is not a regular file")
            for offset, data in edits:
                os.pwrite(fd, data, offset)
        finally:
            os.close(fd)


#: A line git writes around a conflict (``<<<<<<< ours``, ``>>>>>>> theirs``), from column 1.
_CONFLICT_MARKER = re.compile(rb"^(?:<{7}|>{7})(?: |\r?$)", re.MULTILINE)


def conflict_line(data: bytes) -> int | None:
    """The line number of the first git conflict marker in ``data`` (a settings file an
    unresolved merge left), or None when it holds none."""
    found = _CONFLICT_MARKER.search(data)
    return None if found is None else data.count(b"\n", 0, found.start()) + 1


#: A JSON string (a key when ``:`` follows it) or a bracket, for :func:`duplicate_key_problem`.
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"(\s*:)?|[{}\[\]]', re.DOTALL)


def duplicate_key_problem(data: bytes) -> str | None:
    """Why the JSON ``data`` (valid: already parsed) cannot be used when one of its
    objects gives a key twice, naming the key; else None.

    JSON readers (orjson too) keep the last value of such a key silently; in a committed
    settings file (a merge of two edits can leave one) which value was meant is not
    knowable, as in a node file's frontmatter. A token scan, not a second parse: no
    depth orjson reads is too deep for it."""
    objects: list[set[str] | None] = []
    for match in _JSON_TOKEN.finditer(data):
        token = match.group()
        if match.group(1) is not None:  # a key: only inside an object
            key = orjson.loads(token[: match.start(1) - match.start()])
            seen = objects[-1]
            if seen is not None:
                if key in seen:
                    return f"key {key!r} appears twice: which value was meant is not knowable; keep one"
                seen.add(key)
        elif token in (b"{", b"["):
            objects.append(set() if token == b"{" else None)
        elif token in (b"}", b"]"):
            objects.pop()
    return None


def read_small(root: str, rel: str, *, limit: int) -> bytes | None:
    """The bytes of a small file below the root (a settings file in ``.mdcg/``), or None
    when there is none.

    Never follows a symlink and never opens anything but a regular file
    (:class:`UnsafePathError`: a FIFO would block the reader for good); a file
    over ``limit`` bytes raises ``OSError(EFBIG)`` naming it, unread."""
    try:
        data, st = read_file(root, rel, max_bytes=limit)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if st.st_size > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes ({st.st_size:,})", rel)
    return data


def holds(
    root: str, rel: str, data: bytes, *, read_as: Callable[[bytes], bytes] | None = None
) -> bool | None:
    """Whether the file at ``root/rel`` holds exactly ``data``; None when there is no file.
    With ``read_as``, whether ``read_as(its bytes)`` is ``data`` (``md_cg.nodefile.lf_file``:
    a file with ``\r\n`` line ends holds what it means); ``read_as`` may only shorten the
    bytes, to at least half.

    Never follows a symlink (one on the way raises :class:`UnsafePathError`); a
    file of another size (up to twice ``data``'s, with ``read_as``) is not read."""
    most = len(data) if read_as is None else 2 * len(data)
    try:
        got, st = read_file(root, rel, max_bytes=most)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if read_as is None or st.st_size == len(data):
        return st.st_size == len(data) and got == data
    return len(data) < st.st_size <= most and read_as(got) == data


def open_read(root: str, rel: str) -> tuple[int, os.stat_result]:
    """Open ``root/rel`` for reading without following symlinks: (fd, stat); the caller closes it."""
    parent, name = _split(rel)
    with Dir(root, parent) as d:
        return d.open_read(name)


def lstat(root: str, rel: str) -> os.stat_result:
    """``lstat`` of ``root/rel``, reached without following symlinks."""
    parent, name = _split(rel)
    with Dir(root, parent) as d:
        return d.lstat(name)


def exists(root: str, rel: str) -> bool:
    """Whether anything is at ``root/rel`` (a symlink on the way counts as absent)."""
    # One plain lstat settles the common "absent" answer of a write path: if
    # the path does not resolve even through symlinks, it is absent either way
    # (a symlink on the way counts as absent too). Only a hit is checked again
    # component by component.
    try:
        os.lstat(f"{root}/{rel}")
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        pass  # ELOOP, EACCES...: the careful walk below decides
    try:
        lstat(root, rel)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return False
    return True


def atomic_write(
    root: str, rel: str, data: BytesLike | Iterable[BytesLike], *, durable: bool = False
) -> os.stat_result:
    """Replace ``root/rel`` with ``data`` atomically (readers see old or new, never half).

    ``data`` may be several buffers, written in order (a large file need not be joined
    first), or a generator of them (a file larger than memory); if it raises, the temp
    file is removed and ``root/rel`` is left as it was.
    """
    parent, name = _split(rel)
    with Dir(root, parent, create=True, durable=durable) as d:
        tmp, st = d.write_temp(name, data, durable=durable)
        try:
            d.replace(tmp, name)
        except IsADirectoryError:
            d.unlink(tmp)
            raise UnsafePathError(rel, "is a folder where md-cg keeps a file; remove it") from None
        except BaseException:
            d.unlink(tmp)
            raise
        if durable:
            d.fsync()
    return st


def touch(root: str, rel: str) -> None:
    """Create ``root/rel`` empty if it does not exist (never replaces it)."""
    _open_lock_file(root, rel).close()


def remove(root: str, rel: str) -> bool:
    """Unlink ``root/rel`` (never through a symlinked folder); False if it was absent."""
    parent, name = _split(rel)
    try:
        with Dir(root, parent) as d:
            return d.unlink(name)
    except (FileNotFoundError, NotADirectoryError):
        return False


def remove_empty_dirs(root: str, rel_dir: str, *, stop: int = 1) -> None:
    """Remove ``rel_dir`` and its parents while empty, keeping the first ``stop`` components."""
    parts = rel_dir.split("/")
    while len(parts) > stop:
        parent, name = "/".join(parts[:-1]), parts[-1]
        try:
            with Dir(root, parent) as d:
                os.rmdir(name, dir_fd=d.fd)
        except OSError:
            return  # not empty, gone, or not ours to remove
        parts.pop()


@dataclass
class ScanResult:
    """What :func:`scan` found below a folder, by relative path."""

    files: dict[str, os.stat_result] = field(default_factory=dict)
    symlinks: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    too_deep: list[str] = field(default_factory=list)
    #: folders that could not be opened or listed (permission denied): their content is unknown
    unreadable: list[str] = field(default_factory=list)


def _walk(
    first: Dir, visit: Callable[[Dir, int], list[str]], enter: Callable[[Dir, str], Dir | None]
) -> None:
    """Walk the folder tree below ``first`` depth first, holding open only the folders
    on the path from ``first`` to the one being read: at most one per level.

    ``visit(folder, depth)`` reads one folder and returns the names of its subfolders to
    enter; ``enter(parent, name)`` opens one of them relative to its parent's open fd
    (or returns None: gone, refused). A subfolder is opened only when its turn comes,
    never while it waits, so the number of open folders does not grow with the number
    of folders. Siblings are entered last-listed first (the order of a plain stack).
    Every folder is closed by the time this returns or raises (the caller's ``first`` too).
    """
    frames: list[tuple[Dir, list[str], int]] = []  # (open folder, subfolders not entered yet, depth)
    d: Dir | None = first
    depth = 1
    try:
        while True:
            if d is not None:
                subs = visit(d, depth)
                if subs:
                    frames.append((d, subs, depth))
                else:
                    d.close()
                d = None
            if not frames:
                return
            parent, subs, depth = frames[-1]
            if not subs:
                frames.pop()
                parent.close()
                continue
            d = enter(parent, subs.pop())
            depth += 1
    finally:
        if d is not None:
            d.close()
        for parent, _, _ in frames:
            parent.close()


def find_named(
    root: str,
    top: str,
    names: Collection[str],
    *,
    max_depth: int = 8,
    also: Callable[[str], bool] | None = None,
    stats: dict[str, os.stat_result] | None = None,
) -> list[str]:
    """The paths (relative to ``root``) of the regular files below ``root/top`` whose name
    is one of ``names`` -- or, with ``also``, any other ``.md`` file whose path it
    accepts --, never following a symlink; files and folders starting with ``.`` are
    skipped, as :func:`scan` skips them (a sync never reads them).

    Reads folder listings only (their entry types, no ``lstat`` per file): a few times
    faster than :func:`scan` for a name looked for everywhere. ``stats`` (when given)
    gets the ``lstat`` of each file ``also`` accepted (a listing has none to give: one
    call each, through the open folder); one gone by then is not listed. Holds at most
    one open folder per level (:func:`_walk`)."""
    try:
        first = Dir(root, top)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError, PermissionError):
        return []
    found: list[str] = []

    def visit(d: Dir, depth: int) -> list[str]:
        try:
            with os.scandir(d.fd) as entries:
                listed = [
                    (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
                    for e in entries
                ]
        except OSError:
            return []
        subs = []
        for name, is_dir, is_file in listed:
            if name[0] == ".":
                continue
            if is_file and name in names:
                found.append(f"{d.rel}/{name}")
            elif is_file and also is not None and name.endswith(".md") and also(f"{d.rel}/{name}"):
                if stats is not None:
                    try:
                        stats[f"{d.rel}/{name}"] = os.lstat(name, dir_fd=d.fd)
                    except OSError:
                        continue  # removed while we walked (or not ours to look at)
                found.append(f"{d.rel}/{name}")
            elif is_dir and depth < max_depth:
                subs.append(name)
        return subs

    def enter(parent: Dir, name: str) -> Dir | None:
        try:
            return parent.sub(name)
        except (OSError, UnsafePathError):
            return None

    _walk(first, visit, enter)
    return sorted(found)


def scan(root: str, top: str, *, max_depth: int = 8, result: ScanResult | None = None) -> ScanResult:
    """Walk ``root/top`` without following symlinks.

    Regular files go to ``files`` (with their ``lstat``), symlinks and other
    non-regular entries are listed apart, names starting with ``.`` (temp
    files, editor state) go to ``hidden`` and are not descended into. An
    entry or folder that vanishes while the walk runs is absent, not an
    error; a symlinked ``top`` is reported in ``symlinks``. At most one
    folder per level is open at a time (:func:`_walk`), however many
    folders there are.
    """
    out = result if result is not None else ScanResult()
    try:
        first = Dir(root, top)
    except (FileNotFoundError, NotADirectoryError):
        return out
    except UnsafePathError:
        out.symlinks.append(top)
        return out
    except PermissionError:
        out.unreadable.append(top)
        return out
    _walk(
        first,
        lambda d, depth: _scan_folder(d, depth, max_depth, out),
        lambda d, name: _scan_enter(d, name, out),
    )
    return out


def _scan_folder(d: Dir, depth: int, max_depth: int, out: ScanResult) -> list[str]:
    """Record the entries of one folder of :func:`scan`; return its subfolders to enter."""
    try:
        names = d.listdir()
    except (FileNotFoundError, NotADirectoryError):
        return []
    except PermissionError:
        out.unreadable.append(d.rel)
        return []
    subs: list[str] = []
    files, lstat, is_reg = out.files, os.lstat, statmod.S_ISREG
    fd, prefix = d.fd, f"{d.rel}/"
    # Regular files (nearly every entry) inline; the rest in _scan_entry.
    for name in names:
        if name[0] != ".":
            try:
                st = lstat(name, dir_fd=fd)
            except FileNotFoundError:
                continue  # removed while we scanned
            except PermissionError:  # listable, not searchable (mode 0444)
                out.unreadable.append(d.rel)
                break
            if is_reg(st.st_mode):
                files[prefix + name] = st
                continue
        _scan_entry(d, name, depth, max_depth, out, subs)
    return subs


def _scan_entry(d: Dir, name: str, depth: int, max_depth: int, out: ScanResult, subs: list[str]) -> None:
    rel = f"{d.rel}/{name}"
    if name.startswith("."):
        out.hidden.append(rel)
        return
    try:
        st = os.lstat(name, dir_fd=d.fd)
    except FileNotFoundError:
        return  # removed while we scanned
    except PermissionError:
        out.unreadable.append(d.rel)
        return
    mode = st.st_mode
    if statmod.S_ISREG(mode):
        out.files[rel] = st
    elif statmod.S_ISDIR(mode):
        if depth >= max_depth:
            out.too_deep.append(rel)
            return
        subs.append(name)  # opened when its turn comes (_scan_enter), not now
    elif statmod.S_ISLNK(mode):
        out.symlinks.append(rel)
    else:
        out.other.append(rel)


def _scan_enter(parent: Dir, name: str, out: ScanResult) -> Dir | None:
    """Open the subfolder ``name`` of ``parent`` for :func:`scan` (``O_NOFOLLOW``, relative
    to the parent's fd); None when it is gone, unreadable or was swapped for a symlink."""
    rel = f"{parent.rel}/{name}"
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent.fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        out.unreadable.append(rel)
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            out.symlinks.append(rel)
            return None
        raise
    sub = Dir.__new__(Dir)
    sub.rel, sub.fd = rel, fd
    return sub


# -- locks ----------------------------------------------------------------------

try:
    import fcntl as _fcntl
except ImportError:  # Windows: portalocker's LockFileEx
    _fcntl = None  # type: ignore[assignment]
    import portalocker
# On POSIX portalocker is not imported at all: it calls ``fcntl.flock`` there,
# the primitive used directly below (so the two interlock), and importing it
# pulls in importlib.metadata (~20 ms of every ``mdcg`` command's start).


def _try_flock(fh: IO[Any], *, shared: bool) -> bool:
    """Take ``flock`` on ``fh`` without waiting; False when another holder has it.

    On POSIX this calls ``fcntl.flock`` directly -- the primitive portalocker
    uses there, so both interlock -- without portalocker's per-call flag
    conversions, which cost more than the system call on the write path.
    """
    if _fcntl is not None:
        try:
            _fcntl.flock(fh.fileno(), (_fcntl.LOCK_SH if shared else _fcntl.LOCK_EX) | _fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    try:
        portalocker.lock(fh, (portalocker.LOCK_SH if shared else portalocker.LOCK_EX) | portalocker.LOCK_NB)
    except (portalocker.AlreadyLocked, portalocker.LockException):
        return False
    return True


def _unflock(fh: IO[Any]) -> None:
    if _fcntl is not None:
        _fcntl.flock(fh.fileno(), _fcntl.LOCK_UN)
    else:
        portalocker.unlock(fh)


#: Longest pause (seconds) a handle leaves to writers between two exclusive holds.
MAINTENANCE_YIELD_MAX = 1.0


def _open_lock_file(root: str, rel: str, mode: str = "a") -> IO[Any]:
    parent, name = _split(rel)
    with Dir(root, parent, create=True) as d:
        flags = (os.O_RDWR | os.O_CREAT) if mode == "a" else os.O_RDONLY
        try:
            # O_NONBLOCK: a FIFO planted under this name must not block the open
            fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, 0o644, dir_fd=d.fd)
        except IsADirectoryError:
            raise UnsafePathError(rel, "is a folder where md-cg keeps a lock file; remove it") from None
        except OSError as exc:
            raise _denied(_refuse(d.fd, name, rel, exc), root, rel) from None
    try:
        if not statmod.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(rel, "is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb" if mode != "a" else "ab")


class FileLock:
    """A shared or exclusive ``flock`` on a dedicated lock file below the root.

    The lock file is created if missing and never replaced or deleted, so
    every process locks the same inode. It stays open between acquisitions
    (re-opened after a fork: a child must not share the parent's open file,
    or unlocking would release the parent's lock). Re-entrant within one
    object: a shared request while holding exclusive nests; the reverse is
    refused.
    """

    def __init__(self, root: str, rel: str, *, what: str = "maintenance") -> None:
        self.root = root
        self.rel = rel
        self.what = what
        self._fh: IO[Any] | None = None
        self._pid = -1
        self._depth = 0
        self._shared = False

    @property
    def depth(self) -> int:
        return self._depth if self._pid == _pid else 0

    def _file(self) -> IO[Any]:
        if self._fh is None or self._pid != _pid:
            self._fh = _open_lock_file(self.root, self.rel)
            self._pid = _pid
            self._depth = 0
        return self._fh

    def try_acquire(self, *, shared: bool = False) -> bool:
        """Take the lock if it is free now; True on success."""
        if self.depth:
            if self._shared and not shared:
                raise RuntimeError("cannot upgrade a shared lock to exclusive")
            self._depth += 1
            return True
        if not _try_flock(self._file(), shared=shared):
            return False
        self._depth = 1
        self._shared = shared
        return True

    def acquire(self, *, shared: bool = False, timeout: float = 30.0) -> None:
        if self.try_acquire(shared=shared):
            return
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while not self.try_acquire(shared=shared):
            if time.monotonic() >= deadline:
                raise LockTimeoutError(f"{self.root}/{self.rel}", timeout, self.what) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.005)

    def release(self) -> None:
        if not self.depth or self._fh is None:
            return
        self._depth -= 1
        if self._depth == 0:
            _unflock(self._fh)

    @contextlib.contextmanager
    def hold(self, *, shared: bool = False, timeout: float = 30.0) -> Iterator[None]:
        self.acquire(shared=shared, timeout=timeout)
        try:
            yield
        finally:
            self.release()

    def close(self) -> None:
        """Release (if held) and close the lock file."""
        if self._fh is not None and self._pid == _pid:
            if self._depth:
                with contextlib.suppress(OSError):
                    _unflock(self._fh)
            self._fh.close()
        self._fh = None
        self._depth = 0


class MaintenanceLock:
    """The store-wide lock: shared by every write, exclusive for maintenance.

    ``flock`` is not fair: a steady stream of writers holding it shared would
    keep compaction waiting forever. A second lock file, the *gate*, fixes
    that: maintenance closes the gate (exclusive) before it asks for the
    main lock, and writers pass the gate (shared, only for the instant of
    taking the main lock), so no new writer starts while maintenance waits
    for the running ones to finish.

    The gate favours maintenance, so maintenance run back to back (a
    compaction loop, or one ``forget`` after another) would starve the
    writers in turn: after holding the lock exclusively for *t* seconds, the
    next exclusive request of the same handle first leaves the writers
    ``min(t, MAINTENANCE_YIELD_MAX)`` seconds (bounded by its timeout), so
    they get at least half of the time -- when a writer is waiting. A writer
    that finds the gate closed marks itself waiting (a shared lock on a third
    file, ``wait_rel``, for as long as it waits); when nobody holds that
    mark, there is nobody to leave the lock to, and maintenance goes on at
    once. (A writer that finds the gate closed in the instant between the
    check and the next hold waits through that one hold.)
    """

    def __init__(self, root: str, main_rel: str, gate_rel: str, wait_rel: str) -> None:
        self.main = FileLock(root, main_rel, what="maintenance")
        self.gate = FileLock(root, gate_rel, what="maintenance gate")
        self.waiting = FileLock(root, wait_rel, what="maintenance gate")
        #: seconds the last exclusive acquisition waited for the lock (for measurements)
        self.last_wait = 0.0
        self._writers_until = 0.0  # monotonic time before which this handle leaves the lock to writers

    @contextlib.contextmanager
    def shared(self, timeout: float) -> Iterator[None]:
        if self.main.depth:  # nested in a held lock (shared or exclusive)
            with self.main.hold(shared=True, timeout=timeout):
                yield
            return
        deadline = time.monotonic() + timeout
        if not self.gate.try_acquire(shared=True):
            # The gate is closed: wait marked as waiting, so that back-to-back
            # maintenance leaves this writer its turn.
            marked = self._try(self.waiting, shared=True)
            try:
                self.gate.acquire(shared=True, timeout=timeout)
            finally:
                if marked:
                    self.waiting.release()
        try:
            self.main.acquire(shared=True, timeout=max(0.0, deadline - time.monotonic()))
        finally:
            self.gate.release()
        try:
            yield
        finally:
            self.main.release()

    @contextlib.contextmanager
    def exclusive(self, timeout: float) -> Iterator[None]:
        started = time.monotonic()
        pause = min(self._writers_until - started, timeout)
        if pause > 0 and not self.main.depth and self._writer_waiting():
            time.sleep(pause)
            started += pause
            timeout -= pause
        deadline = started + timeout
        self.gate.acquire(shared=False, timeout=timeout)
        try:
            self.main.acquire(shared=False, timeout=max(0.0, deadline - time.monotonic()))
            acquired = time.monotonic()
            self.last_wait = acquired - started
            try:
                yield
            finally:
                self.main.release()
                held = time.monotonic() - acquired
                self._writers_until = time.monotonic() + min(held, MAINTENANCE_YIELD_MAX)
        finally:
            self.gate.release()

    def _writer_waiting(self) -> bool:
        """Whether a writer holds the waiting mark (it found the gate closed); True
        when the mark cannot be looked at (something planted at its path)."""
        if not self._try(self.waiting, shared=False):
            return True
        self.waiting.release()
        return False

    @staticmethod
    def _try(lock: FileLock, *, shared: bool) -> bool:
        """``lock.try_acquire``; False also when its file cannot be opened."""
        try:
            return lock.try_acquire(shared=shared)
        except (OSError, UnsafePathError):
            return False

    def close(self) -> None:
        self.main.close()
        self.gate.close()
        self.waiting.close()


def try_lock_exclusive(root: str, rel: str) -> IO[Any] | None:
    """Lock an existing file exclusively without waiting; the open handle, or None if busy/absent."""
    try:
        fh = _open_lock_file(root, rel, mode="r")
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return None
    if not _try_flock(fh, shared=False):
        fh.close()
        return None
    return fh


def owner_alive(root: str, rel: str) -> bool:
    """Whether a live process holds the shard at ``rel`` (its writer keeps it locked)."""
    fh = try_lock_exclusive(root, rel)
    if fh is None:
        return exists(root, rel)
    fh.close()
    return False


# -- log shards -----------------------------------------------------------------


class ShardWriter:
    """Appends JSON-lines records to this process's own shard in ``root/rel_dir``.

    The shard is created on the first append (a process that only reads never
    creates one), under a temp name, locked exclusively, then renamed into
    place -- so a compactor that can lock a shard knows no live process owns
    it. The lock is held until :meth:`close` (or :meth:`rotate`). After
    ``fork`` the child starts a shard of its own.
    """

    def __init__(self, root: str, rel_dir: str) -> None:
        self.root = root
        self.rel_dir = rel_dir
        self._fh: IO[bytes] | None = None
        self._pid = -1
        self._seq = 0
        #: bytes of whole records in the shard (where the next append starts)
        self._end = 0
        self.name: str | None = None
        #: whether the shard's own name is known to survive a power cut
        self._named_durably = False

    @property
    def rel(self) -> str | None:
        return f"{self.rel_dir}/{self.name}" if self.name else None

    def _open(self) -> None:
        pid = _pid
        stem = f"{pid}_{uuid.uuid4().hex}"
        tmp = f".{stem}.creating{TMP_SUFFIX}"
        with Dir(self.root, self.rel_dir, create=True) as d:
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
                fd = os.open(tmp, flags, 0o644, dir_fd=d.fd)
            except PermissionError as exc:
                raise _denied(exc, self.root, f"{self.rel_dir}/{tmp}") from None
            fh = os.fdopen(fd, "wb", buffering=0)
            try:
                if not _try_flock(fh, shared=False):  # a fresh, uniquely named file
                    raise LockTimeoutError(f"{self.rel_dir}/{tmp}", 0.0, "new log shard")
                d.replace(tmp, f"{stem}{SHARD_SUFFIX}")
            except BaseException:
                fh.close()
                d.unlink(tmp)
                raise
        self._fh, self._pid, self._seq, self.name = fh, pid, 0, f"{stem}{SHARD_SUFFIX}"
        self._end = 0
        self._named_durably = False

    def append(self, records: Iterable[dict[str, Any]], *, durable: bool = False) -> tuple[int, int]:
        """Append records as one ``write`` (each stamped with ``ts`` and ``seq``).

        Returns ``(bytes appended, seq of the first record)``.
        """
        if self._fh is None or self._pid != _pid:
            self._fh = None  # a forked child must not share the parent's shard
            self._open()
        assert self._fh is not None
        ts = time.time_ns()
        first = self._seq + 1
        # One buffer: each bytes object from orjson keeps its 4 KiB working buffer, so a
        # list of a 100k-record batch's lines would hold ~400 MB until it is joined.
        data = bytearray()
        dumps = orjson.dumps
        for rec in records:
            self._seq += 1
            data += dumps({"ts": ts, "seq": self._seq, **rec})
            data += b"\n"
        if not data:
            return 0, first
        fd = self._fh.fileno()
        view = memoryview(data)
        try:
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except BaseException:
            self._seq = first - 1
            self._cut()
            raise
        self._end += len(data)
        if durable:
            self.sync()
        return len(data), first

    def _cut(self) -> None:
        """Take a torn append back (a full disk, an I/O error): the shard ends at its last
        whole record, so the next record does not run into the torn one's bytes. If it
        cannot be cut, the shard is left (its torn tail is an unfinished last line,
        which readers wait on) and the next append starts a new one."""
        assert self._fh is not None
        try:
            os.ftruncate(self._fh.fileno(), self._end)
            os.lseek(self._fh.fileno(), self._end, os.SEEK_SET)
        except OSError:
            self.close()

    def sync(self) -> None:
        """fsync what was appended; the first time for a shard, its folder too
        (which holds the shard's name)."""
        assert self._fh is not None
        os.fsync(self._fh.fileno())
        if not self._named_durably:
            with Dir(self.root, self.rel_dir) as d:
                d.fsync()
            self._named_durably = True

    def close(self) -> None:
        """Release and close the shard; the next append starts a new one."""
        if self._fh is not None and self._pid == _pid:
            with contextlib.suppress(OSError):
                _unflock(self._fh)
            self._fh.close()
        self._fh = None
        self.name = None


@dataclass(frozen=True)
class ShardRead:
    """Records read from one shard, and the byte offset just after the last whole line."""

    name: str
    records: list[dict[str, Any]]
    end: int
    bad_lines: int


def read_shard(root: str, rel: str, start: int = 0) -> ShardRead:
    """Read whole lines of a shard from byte ``start`` (never through a symlink).

    A last line without its newline (a writer killed mid-append, or one still
    writing) is not consumed: ``end`` stops before it. A complete line that is
    not a JSON object is counted in ``bad_lines`` and skipped.
    """
    parent, name = _split(rel)
    with Dir(root, parent) as d:
        return read_shard_in(d, name, start)


def read_shard_in(d: Dir, name: str, start: int = 0) -> ShardRead:
    """:func:`read_shard` of the shard ``name`` in the open folder ``d``."""
    rel = d._rel(name)
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=d.fd)
    except OSError as exc:
        raise _refuse(d.fd, name, rel, exc) from None
    try:
        if not statmod.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(rel, "is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            if start:
                fh.seek(start)
            data = fh.read()
    finally:
        os.close(fd)
    cut = data.rfind(b"\n")
    if cut < 0:
        return ShardRead(name, [], start, 0)
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
    return ShardRead(name, records, start + cut + 1, bad)


def list_shards(root: str, rel_dir: str) -> list[str]:
    """Names of the shards in ``root/rel_dir`` (sorted), ignoring temp and hidden files."""
    d = open_shards(root, rel_dir)
    if d is None:
        return []
    with d:
        return shard_names(d)


def open_shards(root: str, rel_dir: str) -> Dir | None:
    """The open shard folder ``root/rel_dir``, or None when there is none (caller closes it)."""
    try:
        return Dir(root, rel_dir)
    except (FileNotFoundError, NotADirectoryError):
        return None


def shard_names(d: Dir) -> list[str]:
    """Names of the shards in the open folder ``d`` (sorted), ignoring temp and hidden files."""
    return sorted(n for n in d.listdir() if n.endswith(SHARD_SUFFIX) and not n.startswith("."))
