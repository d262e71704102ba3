"""Noticing files changed by hand, cheaply: inotify on Linux, a throttled rescan elsewhere.

A long-running process (the MCP server) must see a note edited in an
editor or pulled by git within a second, without rescanning the whole
store on every call. :class:`ChangeWatch` watches every folder under the
layer folders (or the top folders it is given) with Linux ``inotify``
(through ``ctypes``; no dependency) and hands out the relative paths of the
files that changed since the last :meth:`ChangeWatch.poll`. Where inotify
is not available, or its queue overflowed, ``poll`` answers ``None``:
"something may have changed, rescan" -- callers then run a stat-based sync,
at most once per interval.

The store root is watched too, for its top folders only: git tracks no
empty folder, so a fresh clone lacks the layers that hold no memory yet,
and a pull that empties a layer removes its folder; a folder created (or
moved in) there later is watched as it arrives and the files already in
it are reported. If the root's own watch is lost (the root removed or
moved), inotify is given up: every poll answers ``None``.

Symlinked folders are not watched (md-cg never follows them). Imports only
:mod:`md_cg.node`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
from typing import Any

from .node import LAYERS

_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ISDIR = 0x40000000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
) | _IN_DELETE_SELF
#: What the store root's watch asks for: its top folders arriving and leaving.
_ROOT_MASK = _IN_CREATE | _IN_MOVED_TO | _IN_MOVED_FROM | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF
_EVENT = struct.Struct("iIII")


def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1  # noqa: B018 - probe the symbols
        libc.inotify_add_watch  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


class ChangeWatch:
    """Paths of node files changed under the top folders ``tops`` of ``root`` (the layer
    folders unless given; see module docstring)."""

    def __init__(self, root: str, tops: tuple[str, ...] = LAYERS) -> None:
        self.root = root
        self.tops = frozenset(tops)  # the folders at the root whose trees are watched
        self._libc = _libc()
        self._fd = -1
        self._root_wd = -1
        self._dirs: dict[int, str] = {}  # watch descriptor -> folder, relative to the root
        self._lost = False
        if self._libc is not None:
            fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                # The root first: a top folder created while the others are added is
                # then reported by the root's watch (or found by its own scan, or both).
                # The root is followed if it is a symlink (the store is opened through it,
                # as the folders under it are: only their own last component is not).
                mask = _ROOT_MASK | _IN_ONLYDIR
                wd = self._libc.inotify_add_watch(fd, os.fsencode(root), mask)
                if wd < 0:
                    self.close()  # no watch of the root: a new top folder would go unseen
                    return
                self._root_wd = wd
                for top in tops:
                    self._watch_tree(top)

    @property
    def native(self) -> bool:
        """True when inotify is in use (else every poll says: rescan)."""
        return self._fd >= 0

    def _watch(self, rel_dir: str) -> bool:
        assert self._libc is not None
        path = os.path.join(self.root, rel_dir).encode()
        wd = self._libc.inotify_add_watch(self._fd, path, _MASK | _IN_ONLYDIR | _IN_DONT_FOLLOW)
        if wd < 0:
            err = ctypes.get_errno()
            if err == errno.ENOSPC:  # out of watches: degrade to rescans
                self._lost = True
            return False
        self._dirs[wd] = rel_dir
        return True

    def _watch_tree(self, rel_dir: str) -> list[str]:
        """Watch ``rel_dir`` and every folder below it (no symlinks); return the files there."""
        files: list[str] = []
        stack = [rel_dir]
        while stack:
            rel = stack.pop()
            if not self._watch(rel):
                continue
            try:
                with os.scandir(os.path.join(self.root, rel)) as it:
                    for de in it:
                        if de.name.startswith("."):
                            continue
                        if de.is_dir(follow_symlinks=False):
                            stack.append(f"{rel}/{de.name}")
                        elif de.is_file(follow_symlinks=False):
                            files.append(f"{rel}/{de.name}")
            except OSError:
                continue
        return files

    def poll(self) -> set[str] | None:
        """Relative paths of files changed since the last poll; ``None``: unknown, rescan."""
        if self._fd < 0 or self._lost:
            self._lost = False
            return None
        changed: set[str] = set()
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            if not self._events(data, changed):
                return None
        return changed

    def _events(self, data: bytes, changed: set[str]) -> bool:
        pos = 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
            name = (
                data[pos + _EVENT.size : pos + _EVENT.size + length]
                .split(b"\0", 1)[0]
                .decode("utf-8", "surrogateescape")
            )
            pos += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                return False
            if wd == self._root_wd:
                if mask & (_IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF):
                    self.close()  # the root is gone or moved: no more watching, rescan
                    return False
                self._top_event(mask, name, changed)
                continue
            folder = self._dirs.get(wd)
            if mask & _IN_IGNORED:
                self._dirs.pop(wd, None)
                continue
            if folder is None or not name:
                continue
            rel = f"{folder}/{name}"
            if mask & _IN_ISDIR:
                if mask & (_IN_CREATE | _IN_MOVED_TO):
                    changed.update(self._watch_tree(rel))
                elif mask & _IN_MOVED_FROM:
                    changed.add(rel + "/")  # a folder left: the caller resolves what was in it
                    self._forget_tree(rel)
                continue
            changed.add(rel)
        return True

    def _top_event(self, mask: int, name: str, changed: set[str]) -> None:
        """A folder arrived at or left the store root: watch (and report) or forget a top folder."""
        if not mask & _IN_ISDIR or name not in self.tops:
            return
        # Whatever was indexed under the folder is resolved again (the old folder's
        # files were reported as they went; a folder moved away took its own along).
        changed.add(name + "/")
        self._forget_tree(name)
        if mask & (_IN_CREATE | _IN_MOVED_TO):
            # Watched before it is listed: a file landing in between is reported by
            # the new watch, by the listing, or by both.
            changed.update(self._watch_tree(name))

    def _forget_tree(self, rel_dir: str) -> None:
        """Stop watching a folder that moved away (a move back in is watched anew)."""
        assert self._libc is not None
        for wd, rel in list(self._dirs.items()):
            if rel == rel_dir or rel.startswith(rel_dir + "/"):
                self._libc.inotify_rm_watch(self._fd, wd)
                del self._dirs[wd]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
