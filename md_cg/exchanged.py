"""What recovery does with a file a commit's exchange displaced (session 42, attack atk11).

A guarded put is placed by exchanging md-cg's temp file with the file at the path
(:func:`md_cg.journal._swap_in`); the file so displaced sits at the temp name until its
writer checks it. A writer killed in between leaves it there for recovery, which must
tell md-cg's own file from a person's and move files only in ways that cannot replace a
save landing meanwhile:

* a file is removed only when it is md-cg's own (``ours``: the temp file's inode, or in a
  copied store its logged bytes) or the one the commit read (``was_read``: its logged
  stamp) -- never because of where it is or what is beside it;
* a person's file (a save, a symlink) goes back to its path by an exchange with md-cg's
  file there, and what the exchange brought back is checked before it is removed (a save
  landing between the look and the exchange is put back at the path);
* when the path holds a person's later file, both are kept: the later one at the path,
  the displaced one under a visible name beside it, ``<stem>.saved-<time>.md``
  (:func:`kept_name`), which ``sync`` reports under ``duplicates`` and ``health`` as
  ``duplicate_id`` by path (a symlink: ``refused`` / ``unsafe_path``) -- the person
  settles it; nothing is removed.

The same holds for a live commit undoing its exchange that finds a newer save where its
own file was to come back (:func:`newer_back`). Functions here take the folder
(:class:`md_cg.fsops.Dir`) and the caller's tests of a file (:class:`Known`), so that
this module needs nothing of :mod:`md_cg.journal`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from . import fsops

#: a name's stem and suffix for a kept file: ``x.md`` -> ``x.saved-20261207T205121.md``
_KEPT_TAG = ".saved-"

#: what :func:`settle` did: the file read removed (the put stands), the person's file put
#: back at the path, or kept beside it (its name)
LANDED, AT_PATH = "landed", ""


def kept_name(d: fsops.Dir, name: str, mtime: float) -> str:
    """A visible name beside ``name`` for a person's file kept there: ``<stem>.saved-<its
    mtime, UTC>.md`` (``-2``, ``-3``... when taken)."""
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, "md"
    base = f"{stem}{_KEPT_TAG}{time.strftime('%Y%m%dT%H%M%S', time.gmtime(mtime))}"
    for n in range(1, 100):
        out = f"{base}{'' if n == 1 else f'-{n}'}.{suffix}"
        if not d.exists(out):
            return out
    return f"{base}-{os.getpid()}-{time.monotonic_ns()}.{suffix}"


def keep_aside(d: fsops.Dir, tmp: str, name: str) -> str:
    """Move the person's file at the hidden temp name ``tmp`` to a visible name beside
    ``name`` (:func:`kept_name`), never replacing a file there; returns that name."""
    while True:  # a name taken between the look and the rename: the next one
        out = kept_name(d, name, d.lstat(tmp).st_mtime)
        if d.rename_new(tmp, out):
            return out


def _exchange(d: fsops.Dir, tmp: str, name: str) -> bool:
    """Exchange ``tmp`` and ``name``: True. Where this system or file system cannot (a store
    copied to one without ``RENAME_EXCHANGE``), ``tmp`` is renamed over ``name`` -- the
    rename of before -- and False returned. ``FileNotFoundError`` when either is missing."""
    if d.exchange(tmp, name):
        return True
    d.replace(tmp, name)
    return False


def newer_back(d: fsops.Dir, tmp: str, name: str) -> str | None:
    """A live commit undoing its exchange (:func:`md_cg.journal._put_back`) found at ``tmp``
    -- where its own file was to come back -- a person's save made over the path while
    md-cg's file was there, the displaced save now back at ``name``: the newer save goes to
    the path by an exchange, and what that brings back (the earlier save, or saves made on
    it since) is kept beside it (:func:`keep_aside`). Before (session 41) the newer save was
    renamed over the path: the earlier save was lost, and so was every save made on it
    between the exchange and that rename. Returns the name kept under; None when the path
    had emptied (the newer save put there)."""
    try:
        if not _exchange(d, tmp, name):
            return None
    except FileNotFoundError:
        if d.rename_new(tmp, name):
            return None
    return keep_aside(d, tmp, name)


@dataclass(frozen=True)
class Known:
    """How recovery tells a put's files (:func:`settle`, :func:`place`). ``ours(n)``: the
    file at ``n`` is the commit's own file, whole (may be removed); ``was_read(st)``: a file
    of that stat is the one the commit read and replaced (None: no file was there);
    ``made_here(n)``: the file at ``n`` is the commit's own file, changed or not (its
    inode; ``ours`` when not given)."""

    ours: Callable[[str], bool]
    was_read: Callable[[os.stat_result], bool] | None
    made_here: Callable[[str], bool] | None = None


def settle(d: fsops.Dir, tmp: str, name: str, known: Known) -> str:
    """Settle the file at ``tmp`` -- not md-cg's temp file: the one an exchange displaced
    from ``name`` -- the commit's writer gone, its files told by ``known``. Returns :data:`LANDED`
    (the file read removed: the put stands, or a person's later file at the path does),
    :data:`AT_PATH` (a person's file put back at ``name``, md-cg's file there removed) or
    the name it was kept under beside a file at ``name`` holding a person's change (a
    later save; md-cg's file changed in place) -- or, for the file read, beside md-cg's file
    not whole (torn by a power cut)."""
    ours, made_here = known.ours, known.made_here or known.ours
    if known.was_read is not None and known.was_read(d.lstat(tmp)):
        if not d.exists(name) or ours(name) or not made_here(name):
            d.unlink(tmp)
            return LANDED
        return keep_aside(d, tmp, name)
    for _ in range(3):
        if not d.exists(name):
            if d.rename_new(tmp, name):
                return AT_PATH
            continue  # a file put there meanwhile: look again
        if not ours(name):
            break  # a person's later file at the path: both kept
        try:
            if not _exchange(d, tmp, name):
                return AT_PATH
        except FileNotFoundError:
            continue  # the path emptied meanwhile: look again
        if ours(tmp):
            d.unlink(tmp)
            return AT_PATH
        # A save landed at the path between the look and the exchange (or md-cg's file was
        # written in place): now at ``tmp``, the displaced file at the path. The newer one
        # goes back to the path, the displaced one beside it.
        return newer_back(d, tmp, name) or AT_PATH
    return keep_aside(d, tmp, name)


def place(d: fsops.Dir, tmp: str, name: str, known: Known) -> bool:
    """Put the commit's temp file ``tmp`` in place at ``name`` during recovery, which has
    checked the file there is the one read (``known.was_read``; None: no file was there). By an
    exchange, the file displaced checked after it (a save landing after the check is put
    back: :func:`settle`); a new file only where nothing is. True when it is in place."""
    if known.was_read is None:
        if d.rename_new(tmp, name):
            return True
        d.unlink(tmp)  # a file made there since the check: left; this unacknowledged one goes
        return False
    try:
        if not _exchange(d, tmp, name):
            return True
    except FileNotFoundError:
        return place(d, tmp, name, replace(known, was_read=None)) if d.exists(tmp) else False
    return settle(d, tmp, name, known) == LANDED
