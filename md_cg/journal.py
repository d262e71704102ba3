"""The commit journal: the whole protocol by which node files change.

A *commit* is a set of node files written (``put``) and removed (``del``)
together -- one ``add``, one ``update``, one ``add_many`` batch. It is made
crash-safe and visible to other processes in four steps, by the process that
owns it (holding the store lock shared and the stripe locks of its ids):

1. every new file is written to a unique temp file beside its target;
   nothing visible has changed yet;
2. one ``commit`` record naming every put (id, path, temp name, and the
   size and CRC-32 of its bytes) and every del (id, path), with the
   :func:`stamp` of the file each replaces or removes (``replaces``,
   ``removes``: one ``lstat`` each), is appended to
   the process's own log shard as a single line -- a line torn by a crash
   is ignored, so the commit either exists whole or not at all. Durable:
   the temp files and the line are then fsynced, all at once;
3. the temp files are renamed over their targets -- a file a read-modify-write
   read, by an exchange checked against the stamp read (:func:`_swap_in`) --
   then the dels unlinked (a guarded del's file -- a move's old file -- is renamed
   aside to a temp name logged in the line and checked there once the puts are in
   place, then removed: :func:`_remove_checked`)
   (durable: then their folders are fsynced) -- a del given the stamp of its
   file as read (:func:`stamp`) only when the file still has it, so that a
   file replaced since (another memory saved over a copy) is not removed;
4. a ``done`` record closes the commit.

Killed before step 2, the commit never happened: its temp files are
garbage that maintenance removes. Killed after step 2, the commit is
*rolled forward* by the next process that needs its ids (:func:`recover`):
every temp file still present is renamed into place and the dels are done,
then a ``recovered`` record closes it (a file an exchange displaced to a temp
name is removed when it is the one read, put back when it is a person's save:
:func:`_settle_exchanges`). So a batch is all or nothing once
recovered -- except an id whose file is no longer the one the line logged
(another stamp: saved again by another process while a failed writer lived
on, or by hand) or changed after the line (its ctime, with 2 s of slack:
the only rule for lines without stamps), which is left as its files have it
(:func:`_later_ids`). A temp file is renamed only when it holds the bytes its line
describes: if the power failed before the temp files were written back
(or while a durable commit's fsyncs were in flight) and no put has landed,
the commit is rolled back instead (temp files removed, files as they were;
its ``recovered`` record says ``undone``). A del is done only when the file
at its path holds its id (:attr:`Journal.id_of`, the engine's reader): a
line naming one id and another memory's file (forged, or from a copied
``.mdcg/``) removes nothing, and the recovery lists it
(:attr:`Journal.foreign`; :func:`holds_other` is the check, which ``health()``'s
plan of an open commit shares). A commit whose fsyncs fail is
undone by its own process the same way, closed by a ``done`` marked
``undone``. Recovery runs in any writer whose ids meet the dead commit, in
``sync()`` and in compaction; readers never write, so until then a reader
may see the part of a dead batch that was already renamed.

Readers follow the log (:func:`read_tail`, :func:`replay`) and never trust
it blindly: every id a record names is resolved against the files on disk
(by :mod:`md_cg.index`), and every path in a record must pass
:func:`md_cg.paths.rel_problem` or the record is dropped and counted.
A commit without its ``done`` is *pending*: its ids are resolved again on
every replay while its writer lives, and once more when the writer is found
dead.

Other records: ``sync`` (files reconciled by ``sync()``: resolve now) and
the ``put``/``del``/``done`` records of earlier versions (read, never
written).

Imports only :mod:`md_cg.fsops`, :mod:`md_cg.paths` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat as statmod
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from . import exchanged, fsops, paths
from .errors import APPLIED_NOTE, LOGGED_NOTE, OPEN_NOTE, RECOVERY_NOTE, UnsafePathError

LOG_REL = paths.meta(paths.LOG_DIR)

#: (inode, mtime_ns, size) of a file: another stamp at its path is another file, or the
#: file changed (an editor's atomic save gives a new inode; a write in place a new time)
Stamp = tuple[int, int, int]


def stamp(st: os.stat_result) -> Stamp:
    return st.st_ino, st.st_mtime_ns, st.st_size


class ChangedSinceRead(Exception):
    """A guarded commit (:meth:`Journal.commit`'s ``guard``) found a file it was to replace
    or remove changed since it was read: nothing was written (the commit was undone).
    ``changed``: (id, path) of those files."""

    def __init__(self, changed: list[tuple[str, str]]) -> None:
        super().__init__(", ".join(rel for _, rel in changed))
        self.changed = changed


class PathTaken(ChangedSinceRead):
    """A put to a path that nothing was at when its temp file was written (an ``add``, a
    move's new path) found a file there -- a person's, put there since -- and was not
    renamed over it (:meth:`md_cg.fsops.Dir.rename_new`): nothing of the commit is in place.
    ``changed``: the (id, path) of that put."""


@dataclass(frozen=True)
class Put:
    """A file to write: the node id, its path and its bytes."""

    node_id: str
    rel: str
    data: bytes


#: (old id, the puts of its commit as (id, path)): a del of an id its commit puts nowhere
#: while it puts other files -- a rename's old id (:attr:`Journal.moved`).
Moves = tuple[str, list[tuple[str, str]]]


@dataclass(frozen=True)
class Commit:
    """A commit record read from a shard (``seq`` is its sequence number there)."""

    shard: str
    seq: int
    puts: tuple[tuple[str, str, str], ...]  # (id, rel, temp name)
    dels: tuple[tuple[str, str], ...]  # (id, rel)
    #: (size, CRC-32) of each put's bytes, in order; None in records of earlier versions
    checks: tuple[tuple[int, int], ...] | None = None
    #: when the line was written (seconds since the epoch; None when it does not say)
    ts: float | None = None
    #: the :func:`stamp` of the file each put replaces, in order (None: no file was there);
    #: None in lines of earlier versions (``replaces``)
    replaces: tuple[Stamp | None, ...] | None = None
    #: the :func:`stamp` of the file each del removes, in order (None: no file was there);
    #: None in lines of earlier versions (``removes``)
    removes: tuple[Stamp | None, ...] | None = None
    #: the inode of each put's temp file, in order (``made``; None in lines of earlier
    #: versions): a file at a temp name with another inode is the one a put displaced by
    #: an exchange (:func:`_settle_exchanges`)
    made: tuple[int, ...] | None = None
    #: per del, the temp name its file is renamed to before it is checked and removed (a
    #: guarded del: a move's old file; :func:`_set_aside`), None for the others; None in
    #: lines that log none (``aside``)
    aside: tuple[str | None, ...] | None = None
    #: a durable commit (its line says ``"durable": true``): its recovery fsyncs the folders
    #: it renamed in, as the commit does (:func:`_sync_recovered`)
    durable: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return (self.shard, self.seq)

    @property
    def ids(self) -> frozenset[str]:
        return frozenset([p[0] for p in self.puts] + [d[0] for d in self.dels])

    def touched(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for node_id, rel, _ in self.puts:
            out.setdefault(node_id, []).append(rel)
        for node_id, rel in self.dels:
            out.setdefault(node_id, []).append(rel)
        return out


def _aside_names(dels: Sequence[tuple[str, str]], read: Mapping[str, Stamp]) -> list[str | None]:
    """Per del, the temp name its file is set aside to before it is checked and removed
    (:func:`_set_asides`): a del of a file as read (``read``: a move's old file, a
    forgotten or deleted memory's, a copy's, the sweep's); None for the others."""
    return [fsops.temp_name(_split(rel)[1]) if rel in read else None for _, rel in dels]


def _commit_record(
    puts: Sequence[Put],
    temps: list[str],
    stats: list[os.stat_result],
    replaces: list[Stamp | None],
    dels: Sequence[tuple[str, str]],
    removes: list[Stamp | None],
    asides: Sequence[str | None] = (),
    durable: bool = False,
) -> dict[str, Any]:
    """The ``commit`` line of :meth:`Journal.commit` (see the module docstring)."""
    # the temp name each guarded del's file is set aside to before it is checked: a
    # recovery puts it back (:func:`_settle_asides`)
    aside: dict[str, Any] = {"aside": list(asides)} if any(a is not None for a in asides) else {}
    if durable:
        aside["durable"] = True  # its recovery fsyncs its folders (:func:`_sync_recovered`)
    return {
        "op": "commit",
        "put": [[p.node_id, p.rel, t] for p, t in zip(puts, temps, strict=True)],
        "del": [[i, rel] for i, rel in dels],
        "check": [[len(p.data), zlib.crc32(p.data)] for p in puts],
        # the files the commit means to replace and remove: a recovery leaves an id
        # whose file is another by then (:func:`_later_ids`)
        "replaces": [_stamp_item(st) for st in replaces],
        "removes": [_stamp_item(st) for st in removes],
        # the temp files' inodes: a file at a temp name with another is one an exchange
        # displaced (:func:`_settle_exchanges`)
        "made": [st.st_ino for st in stats],
        **aside,
    }


@dataclass
class Cursor:
    """How far a process has followed the log, and the commits still open."""

    offsets: dict[str, int] = field(default_factory=dict)
    pending: dict[tuple[str, int], Commit] = field(default_factory=dict)
    #: pending commits whose writer is gone: resolved once, waiting for recovery
    dead: set[tuple[str, int]] = field(default_factory=set)
    #: open put/del records of earlier versions, by shard
    legacy: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    bad_lines: int = 0
    bad_records: int = 0
    #: shard name -> its unreadable lines and unusable records (for ``health()``'s paths)
    damaged: dict[str, int] = field(default_factory=dict)
    #: shard names that could not be read safely (symlinks, not regular files)
    unsafe: set[str] = field(default_factory=set)

    def open_commits(self) -> list[Commit]:
        return list(self.pending.values())


# -- writing ----------------------------------------------------------------------


class Journal:
    """This process's side of the protocol: its shard, its commits, its recoveries."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.writer = fsops.ShardWriter(root, LOG_REL)
        #: called between the steps of a commit with the step's name (tests
        #: inject crashes here): ``temps`` (temp files written), ``logged``
        #: (commit line appended), ``exchanged-<k>`` (k guarded files exchanged into
        #: place, the k-th not checked yet: :func:`_swap_in`), ``aside-<k>`` (k guarded
        #: dels' files set aside, the k-th not checked yet: :func:`_set_asides`), ``rename-<k>`` (k files
        #: in place),
        #: ``renamed`` (all of them), ``deleted`` (dels done, ``done`` not yet)
        self.fault: Callable[[str], None] | None = None
        #: this process's commits interrupted after being logged (to roll forward)
        self.failed: list[Commit] = []
        #: how many commits :meth:`recover` has rolled back so far (see :func:`roll_forward`)
        self.undone = 0
        #: whether the store is a copy of another place's (its token file stamps another
        #: snapshot file: :data:`md_cg.snapshot.ANOTHER_PLACE`, set at each load): a copy
        #: keeps no inode or change time, so recovery goes by (mtime, size) and applies a
        #: commit all or nothing (:func:`roll_forward`'s ``copied``)
        self.copied = False
        #: ids whose part of a dead commit :meth:`recover` left undone so far: their files
        #: changed after the commit was logged (a hand edit since the crash wins)
        self.left: list[str] = []
        #: (id, path) of each del :meth:`recover` did not do because the file at the path
        #: does not hold the id (another memory's file, an unreadable one): never removed
        self.foreign: list[tuple[str, str]] = []
        #: (id, path) of each file :meth:`recover` removed for an id the commit put nowhere,
        #: the commit putting nothing: an interrupted delete (forget) that it finished
        self.removed: list[tuple[str, str]] = []
        #: (id, path) of each such file of a commit that puts other files: the old file of
        #: an interrupted rename that it finished (the memory lives on under its new id)
        self.replaced: list[tuple[str, str]] = []
        #: (old id, the commit's puts as (id, path)) of each del of such a commit that
        #: :meth:`recover` did (or found done: a kill after the unlinks): a rename's old id,
        #: whose audit record the dead process may not have written. A sync takes them
        #: (:func:`md_cg.audit.record_recovered_renames`) and empties the list.
        self.moved: list[tuple[str, list[tuple[str, str]]]] = []
        #: (old id, the commit's puts) of each such del that :meth:`recover` did not do because
        #: the old file changed after the line was written (a hand edit since the crash): a
        #: rename interrupted, its old id kept beside the new one. Taken with :attr:`moved`
        #: (:func:`md_cg.audit.record_recovered_renames` records it; ``health()`` names it).
        self.kept: list[tuple[str, list[tuple[str, str]]]] = []
        #: when set (a writable store handle), :meth:`recover` hands it :attr:`moved` and
        #: :attr:`kept` as soon as a recovery finished such a commit -- whichever write or sync
        #: ran it -- and empties them
        self.on_moved: Callable[[list[Moves], list[Moves]], None] | None = None
        #: the id the node file at a path holds (None: unreadable, not a node file); set by
        #: the engine. Without it, a del's file is removed without this check.
        self.id_of: Callable[[str], str | None] | None = None

    @property
    def shard(self) -> str | None:
        return self.writer.name

    def append(self, records: list[dict[str, Any]]) -> tuple[str, int, int]:
        """Append records (not fsynced: see :meth:`commit`); return (shard name,
        bytes appended, seq of the first)."""
        written, first = self.writer.append(records)
        assert self.writer.name is not None
        return self.writer.name, written, first

    def _step(self, name: str) -> None:
        if self.fault is not None:
            self.fault(name)

    def commit(
        self,
        puts: Sequence[Put],
        dels: Sequence[tuple[str, str]],
        *,
        durable: bool,
        applied: Callable[[Put, os.stat_result], None],
        advance: Callable[[str, int], None],
        read: Mapping[str, Stamp] | None = None,
        guard: Mapping[str, Stamp] | None = None,
        renamed: Mapping[str, str] | None = None,
        fresh: Collection[str] = (),
    ) -> list[str]:
        """Run the four steps for ``puts`` and ``dels`` (see the module docstring). Returns the paths of the
        dels not done because their file's :func:`stamp` is no longer the one ``read`` gives (path -> stamp as
        read; a path not in it is removed as it is). ``guard`` (path -> stamp as read): :meth:`_guarded`;
        ``renamed`` (a del's id -> the id of the put its file became): :func:`_carry_late_appends`; ``fresh``:
        the paths of puts the caller found empty (:func:`_rename_in`).

        ``applied(put, stat)`` is called as each file lands; ``advance(shard, nbytes)`` after each append, so
        the caller's cursor skips its own records. Durable: the temp files and the commit line are fsynced
        together (the line's checks let recovery tell a torn temp file), then, after the renames, their
        folders. If an fsync fails (or the call is interrupted) before the renames, the temp files are removed
        and the commit is closed: nothing changed. If a rename or unlink fails (or the call is interrupted),
        no ``done`` is written: the commit stays open, is added to :attr:`failed`, and is rolled forward by
        the next recovery, exactly like the commit of a crashed process (not over a file saved or edited
        since: :func:`_later_ids`; the error is noted :data:`LOGGED_NOTE`). If only the fsync of the folders
        after them fails, the commit is closed before the error goes up (:meth:`_sync_applied`).
        """
        dirs = fsops.FolderCache(self.root)  # the folders written to, a bounded few open
        order = _folder_order([p.rel for p in puts], dirs.size)
        held: dict[str, _Held] = {}  # the guarded files, open (:func:`_carry_late_appends`)
        try:
            made: list[str] = []
            temps, stats, replaces = self._write_temps(puts, order, dirs, made)
            if not durable and guard:
                _start_writebacks(puts, temps, guard, dirs)
            self._step("temps")
            asides = _aside_names(dels, {**(guard or {}), **(read or {})})
            removes = _del_stamps(dels, dirs, read or {})
            record = _commit_record(puts, temps, stats, replaces, dels, removes, asides, durable)
            try:
                shard, nbytes, seq = self.append([record])
            except BaseException:
                _remove_temps(puts, temps, dirs)
                raise
            advance(shard, nbytes)
            if durable:
                try:
                    fsops.fsync_all(self._logged_syncs(puts, temps, dirs, made))
                except BaseException:
                    self._undo(puts, temps, dirs, parse_commit(shard, {**record, "seq": seq}), advance)
                    raise
            self._step("logged")
            checked = self._guarded(guard, read, puts, dels, temps, dirs, (shard, seq, record), advance, held)
            try:
                placed = _swap_in(puts, order, temps, stats, guard or {}, dirs, self._step, (dels, asides))
                placed.fresh = {i for i, was in enumerate(replaces) if was is None or puts[i].rel in fresh}
                spared = self._apply(puts, order, temps, stats, dels, dirs, applied, checked, placed)
            except _SaveLanded as landed:  # a person's save, put back: refused as the guard refuses
                self._undo(puts, temps, dirs, parse_commit(shard, {**record, "seq": seq}), advance)
                raise landed.refusal(puts, dels) from None
            except BaseException as exc:
                # Interrupted (an I/O error, Ctrl-C): the commit stays open with its
                # temp files, and is rolled forward like a crashed one.
                self.failed.append(parse_commit(shard, {**record, "seq": seq}))  # type: ignore[arg-type]
                exc.add_note(LOGGED_NOTE)
                raise
            if durable:
                self._sync_applied(dirs, seq, record, shard, advance)
            shard, nbytes, _ = self.append([{"op": "done", "c": seq}])
            advance(shard, nbytes)
            _carry_late_appends(held, puts, dels, dirs, renamed or {})
            return spared
        finally:
            _close_held(held)
            dirs.close()

    def _guarded(
        self,
        guard: Mapping[str, Stamp] | None,
        read: Mapping[str, Stamp] | None,
        puts: Sequence[Put],
        dels: Sequence[tuple[str, str]],
        temps: list[str],
        dirs: fsops.FolderCache,
        logged: tuple[str, int, dict[str, Any]],
        advance: Callable[[str, int], None],
        held: dict[str, _Held],
    ) -> dict[str, Stamp]:
        """:meth:`commit`'s ``guard`` (path -> stamp as read, of the files a read-modify-write
        read), checked just before the renames: should a file it names have changed since
        it was read, undo the logged commit (``logged``: its shard, number and record; temp
        files removed, closed ``undone``) and raise :class:`ChangedSinceRead` -- a hand edit
        landing after the read is not overwritten (attack 7 of session 39: 47 of 300
        appended lines lost). The caller gives the guarded paths in ``read`` too, so that a
        guarded del is done only while its file has the stamp: returned, ``guard`` and
        ``read`` in one. The files checked are left open in ``held`` (the caller closes
        them: :func:`_carry_late_appends`). Interrupted while checking (Ctrl-C, out of
        descriptors), the commit is undone too -- nothing is renamed yet: left open, its
        temp files stayed and the next recovery rolled it forward, or, over a file edited
        since, left them (attack atk9 of session 40, F4)."""
        shard, seq, record = logged
        try:
            changed = _changed_since(guard or {}, dirs, held)
        except BaseException:
            self._undo(puts, temps, dirs, parse_commit(shard, {**record, "seq": seq}), advance)
            raise
        if changed:
            self._undo(puts, temps, dirs, parse_commit(shard, {**record, "seq": seq}), advance)
            ids = {p.rel: p.node_id for p in puts} | {rel: i for i, rel in dels}
            raise ChangedSinceRead([(ids.get(rel, ""), rel) for rel in changed])
        return {**(guard or {}), **(read or {})}

    def _sync_applied(
        self,
        dirs: fsops.FolderCache,
        seq: int,
        record: dict[str, Any],
        shard: str,
        advance: Callable[[str, int], None],
    ) -> None:
        """A durable commit's last step, every rename and unlink done: fsync their folders.
        Should that fail (or be interrupted), the commit is closed all the same before the
        error goes up, noted :data:`APPLIED_NOTE` (done, not known durable): left open, a
        later recovery -- any compaction -- did its dels again, and removed a file another
        process had added under a deleted id since (attack a2 of session 37: an ``add``
        acknowledged after a ``forget`` whose folder fsync failed, lost at the next
        ``forget`` of any memory). Only when the ``done`` cannot be written either does it
        stay open, for recovery, noted :data:`OPEN_NOTE` (until session 38 a closed one
        was noted :data:`LOGGED_NOTE` too, and its note said a recovery would complete it:
        none does) -- and the recovery then leaves a file saved under its ids since (a new
        stamp: :func:`_later_ids`; session 38: before, it removed one saved within 2 s, or
        at any time when this process recovered it). :data:`OPEN_NOTE`, not
        :data:`LOGGED_NOTE` (until session 39): every file is in place, so that the error is
        applied all the same (:func:`~md_cg.errors.was_applied`) -- a ``forget`` scrubs, a
        ``rename`` writes its audit record -- and says so."""
        try:
            fsops.fsync_all(dirs.fsync_calls())
        except BaseException as exc:
            try:
                done_shard, nbytes, _ = self.append([{"op": "done", "c": seq}])
                advance(done_shard, nbytes)
            except BaseException:
                self.failed.append(parse_commit(shard, {**record, "seq": seq}))  # type: ignore[arg-type]
                exc.add_note(OPEN_NOTE)
            else:
                exc.add_note(APPLIED_NOTE)
            raise

    def _logged_syncs(
        self, puts: Sequence[Put], temps: list[str], dirs: fsops.FolderCache, made: list[str]
    ) -> list[Callable[[], object]]:
        """The fsyncs of a durable commit before its renames, run at once: every
        temp file, the commit line, and the parent of each folder the commit made.

        Concurrent is safe because of the line's checks: should the line
        survive a power cut and a temp file (or its new folder) not, recovery
        finds the file torn or missing and rolls the commit back (:func:`roll_forward`).
        """
        sync = functools.partial
        calls: list[Callable[[], object]] = [
            *dirs.fsync_file_calls((_split(p.rel)[0], tmp) for p, tmp in zip(puts, temps, strict=True))
        ]
        calls.append(self.writer.sync)
        calls += [sync(_fsync_folder, self.root, parent) for parent in sorted({_split(m)[0] for m in made})]
        return calls

    def _undo(
        self,
        puts: Sequence[Put],
        temps: list[str],
        dirs: fsops.FolderCache,
        logged: Commit | None,
        advance: Callable[[str, int], None],
    ) -> None:
        """Undo a logged commit before any rename: remove its temp files and close
        it. Should that fail too, it stays open for recovery."""
        try:
            _remove_temps(puts, temps, dirs)
            if logged is not None:
                shard, nbytes, _ = self.append([{"op": "done", "c": logged.seq, "undone": True}])
                advance(shard, nbytes)
        except BaseException:
            if logged is not None:
                self.failed.append(logged)

    def _write_temps(
        self, puts: Sequence[Put], order: Sequence[int], dirs: fsops.FolderCache, made: list[str]
    ) -> tuple[list[str], list[os.stat_result], list[Stamp | None]]:
        """Write every put, in ``order`` (:func:`_folder_order`), to a temp file beside
        its target (folders made as needed, listed in ``made``); no fsync here. Returns the
        temp names, their stats, and the :func:`stamp` of the file each put replaces (None:
        none is there)."""
        temps: list[str | None] = [None] * len(puts)
        stats: list[os.stat_result | None] = [None] * len(puts)
        replaces: list[Stamp | None] = [None] * len(puts)
        try:
            for i in order:
                put = puts[i]
                parent, name = _split(put.rel)
                temps[i], stats[i], replaces[i] = self._write_temp(parent, name, put.data, dirs, made)
        except BaseException:
            _remove_temps(puts, temps, dirs)
            raise
        return cast(list[str], temps), cast(list[os.stat_result], stats), replaces

    def _write_temp(
        self, parent: str, name: str, data: bytes, dirs: fsops.FolderCache, made: list[str]
    ) -> tuple[str, os.stat_result, Stamp | None]:
        """A temp file beside ``parent/name``, and the stamp of the file ``name`` there.
        Another process removing ``parent`` once it is empty (a forget or a move out of a
        bucket) can do so between the open of the folder and the temp file's creation: the
        folder is made again (a few times). Once the temp file is there the folder is not
        empty, so it stays."""
        for attempt in range(_FOLDER_TRIES):
            d = dirs.get(parent, create=True, made=made)
            try:
                was = _stamp_at(d, name)
                tmp, st = d.write_temp(name, data)
                return tmp, st, was
            except FileNotFoundError:
                if attempt == _FOLDER_TRIES - 1:
                    raise
                dirs.drop(parent)
        raise AssertionError("unreachable")

    def _apply(
        self,
        puts: Sequence[Put],
        order: Sequence[int],
        temps: list[str],
        stats: list[os.stat_result],
        dels: Sequence[tuple[str, str]],
        dirs: fsops.FolderCache,
        applied: Callable[[Put, os.stat_result], None],
        read: Mapping[str, Stamp],
        placed: _Placed | None = None,
    ) -> list[str]:
        """Rename the temp files into place in ``order`` (those ``placed`` are in place
        already: :func:`_swap_in`), then do the dels, except those whose file changed
        since it was ``read`` (returned); a del ``placed`` set aside (checked already) is
        done by removing the file set aside.

        ``applied`` is called as each file lands; when ``order`` is not the puts' own
        (a batch over many folders), once all have landed, in the puts' order (the
        index gets its entries in the same order either way)."""
        inline = isinstance(order, range)
        placed = placed or _Placed()
        done = {*placed.swapped, *placed.landed}
        for n, i in enumerate(order):
            put = puts[i]
            parent, name = _split(put.rel)
            if i not in done:
                _rename_in(puts, temps, stats, (i, dels), placed, dirs)
            if inline:
                applied(put, stats[i])
            if self.fault is not None:
                self.fault(f"rename-{n + 1}")
        if not inline:
            for put, st in zip(puts, stats, strict=True):
                applied(put, st)
        self._step("renamed")
        _remove_checked(puts, temps, stats, dels, placed, dirs, read, self._step)
        spared: list[str] = []
        for k in _folder_order([rel for _, rel in dels], dirs.size):
            rel = dels[k][1]
            parent, name = _split(rel)
            if k in placed.gone or k in placed.asides:
                if k in placed.gone or not dirs.get(parent).unlink(placed.asides[k]):
                    spared.append(rel)  # moved or removed by hand before it was set aside
                continue
            try:
                d = dirs.get(parent)
            except (FileNotFoundError, NotADirectoryError):
                if rel in read:
                    spared.append(rel)  # its folder went: nothing of what was read removed here
                continue
            if rel in read and _stamp_at(d, name) != read[rel]:
                spared.append(rel)  # replaced or edited since it was read: not the file to remove
                continue
            if not d.unlink(name) and rel in read:
                # moved or removed by hand after the stamp check: not removed here (a sweep
                # told it removed and tombstoned it, the moved file whole: 1 id in 2 of 15 runs)
                spared.append(rel)
        self._step("deleted")
        return spared

    def recover(self, commits: Iterable[Commit], *, advance: Callable[[str, int], None]) -> list[Commit]:
        """Roll dead commits forward and close each with a ``recovered`` record.

        The caller holds the stripe locks of every id of these commits (or the
        exclusive store lock), so nobody else is changing those files.
        """
        done: list[Commit] = []
        records: list[dict[str, Any]] = []
        for c in commits:
            record: dict[str, Any] = {"op": "recovered", "shard": c.shard, "c": c.seq}
            later: set[str] = set()
            outcome = Outcome()
            try:
                if not roll_forward(
                    self.root, c, later, id_of=self.id_of, outcome=outcome, copied=self.copied
                ):
                    record["undone"] = True
            except BaseException as exc:
                # An earlier logged commit, now perhaps partly done: not "nothing changed" (r5);
                # nor "logged": the caller's own write never reached its commit line (r6)
                exc.add_note(RECOVERY_NOTE)
                raise
            self.left.extend(sorted(later))
            self.foreign.extend(outcome.foreign)
            self.removed.extend(outcome.removed)
            self.replaced.extend(outcome.replaced)
            if c.puts and not record.get("undone"):
                other = {i for i, _ in outcome.foreign}
                self.moved.extend(_moved(c, later | other))
                self.kept.extend(m for m in _moved(c, other) if m[0] in later)
            if record.get("undone"):
                self.undone += 1
            records.append(record)
            done.append(c)
        if records:
            _sync_recovered(self.root, done)
            shard, nbytes, _ = self.append(records)
            advance(shard, nbytes)
        if (self.moved or self.kept) and self.on_moved is not None:
            moved, self.moved = self.moved, []
            kept, self.kept = self.kept, []
            self.on_moved(moved, kept)
        return done


def _sync_recovered(root: str, commits: Sequence[Commit]) -> None:
    """fsync the folders of the durable ones of ``commits`` just rolled forward or back, before
    their ``recovered`` lines: as a durable commit fsyncs its folders after its renames
    (:meth:`Journal._sync_applied`). Before session 43 recovery's renames and unlinks were
    not: a power cut after the ``recovered`` line could undo them with the commit closed.
    A non-durable commit's recovery fsyncs nothing, as the commit did not. A folder gone
    (a forget's emptied bucket) or unsafe needs none."""
    folders = {
        _split(rel)[0]
        for c in commits
        if c.durable
        for rel in (*(p[1] for p in c.puts), *(d[1] for d in c.dels))
    }
    fsops.fsync_all([functools.partial(_fsync_folder, root, f, missing_ok=True) for f in sorted(folders)])


def _moved(c: Commit, kept: set[str]) -> list[Moves]:
    """(id, puts) of each del of ``c`` for an id it puts nowhere and that the roll-forward
    did not keep (:attr:`Journal.moved`)."""
    puts = [(node_id, rel) for node_id, rel, _ in c.puts]
    put_ids = {node_id for node_id, _ in puts}
    return [(i, puts) for i in dict.fromkeys(i for i, _ in c.dels) if i not in put_ids and i not in kept]


@dataclass
class Outcome:
    """What :func:`roll_forward` did to a commit's dels: (id, path) of each file it removed
    for an id the commit put nowhere -- ``removed`` when the commit puts nothing (an
    interrupted delete finished), ``replaced`` when it puts other files (the old file of a
    rename) -- and of each it left because the file there does not hold the id."""

    removed: list[tuple[str, str]] = field(default_factory=list)
    foreign: list[tuple[str, str]] = field(default_factory=list)
    replaced: list[tuple[str, str]] = field(default_factory=list)


def roll_forward(
    root: str,
    c: Commit,
    skipped: set[str] | None = None,
    *,
    id_of: Callable[[str], str | None] | None = None,
    outcome: Outcome | None = None,
    copied: bool = False,
) -> bool:
    """Finish a commit whose writer died after logging it (idempotent).

    With the line's checks (size and CRC-32 of each put), a temp file is
    renamed only when its bytes are the ones logged. When no put has landed
    yet and a temp file is torn or missing -- the power failed while a
    durable commit's files and line were being fsynced together, or a
    non-durable commit's files were never written back -- the commit is
    rolled back instead: its temp files are removed, its dels not done, and
    the files stay as they were. Returns False when it was rolled back.
    ``skipped`` (when given) receives the ids left as their files have them
    because a file of theirs changed after the line was written.
    With ``id_of`` (the id the node file at a path holds, None when it holds
    none), a del removes its file only when the file holds the del's id: a line
    naming one id and another memory's path (forged, or from a copied
    ``.mdcg/``) removes nothing. ``outcome`` (when given) receives what the dels
    did (:class:`Outcome`).

    ``copied``: the store is a copy of the place the line was written in (``cp -a``,
    ``cp -r``, a restored backup: :attr:`Journal.copied`), whose files have new inodes and
    change times. A file is then the one logged when its (mtime, size) are the stamp's
    (:func:`_later_ids`), and a commit none of whose puts has landed yet is rolled back
    whole when a file of it is not (a ``cp -r`` keeps no mtime: a hand edit since the
    crash cannot be told from the copy), never applied in part: until session 39 (attack
    atk7) such a copy's recovery put a batch's new ids in place and left all its
    overwrites (``left_as_edited``), removing their temp files."""
    if _settle_asides(root, c, copied):  # a person's save set aside: undone whole (:func:`_unswap`)
        return False
    settled = _settle_exchanges(root, c, copied)
    states = _put_states(root, c, copied)
    limit = None if (stamp := _written_by(root, c)) is None else stamp + int(_CLOCK_SLACK * 1e9)
    later = _later_ids(root, c, states, limit, copied) | settled
    back = "bad" in states and "landed" not in states
    if copied and later and "landed" not in states:
        back = True  # all or nothing: nothing (the ids are told, left_as_edited)
        if skipped is not None:
            skipped.update(later)
    landed: set[str] = set()
    # A file changed after the line was written (with a margin for coarse file
    # times), or no longer the one the line logged (its stamp), is a later write --
    # a hand edit since the crash, another process's save of the id after this
    # commit failed with its writer alive, or a line from a copied .mdcg/ -- that
    # the commit must not replace or delete.
    # An id with any such file is left as the files have it: all of its puts and dels
    # skipped together (a move half done would leave two copies of it).
    if skipped is not None and not back:
        skipped.update(later)
    for i, ((node_id, rel, tmp), state) in enumerate(zip(c.puts, states, strict=True)):
        parent, name = _split(rel)
        if state == "landed":
            landed.add(node_id)
        if state not in ("temp", "bad") or not _safe_temp(tmp, name):
            continue
        try:
            with fsops.Dir(root, parent) as d:
                if state != "temp" or back or node_id in later:
                    d.unlink(tmp)
                elif _place(d, c, i, copied):
                    landed.add(node_id)
                elif skipped is not None:
                    skipped.add(node_id)  # a save landed after the look: it stands
        except (FileNotFoundError, NotADirectoryError, UnsafePathError):
            continue
    if back:
        return False
    kept = _renamed_away(c, {p[0] for p in c.puts} - landed) - later
    if kept:
        later = later | kept
        if skipped is not None:
            skipped.update(kept)
    _do_dels(root, c, (later, landed), id_of, Outcome() if outcome is None else outcome, copied)
    return True


def _renamed_away(c: Commit, unplaced: set[str]) -> set[str]:
    """The ids of ``c``'s dels that it puts nowhere (a rename's old id: its memory goes to
    another id's file) when some of its puts were not put in place (``unplaced``: left as a
    file saved since has them, or missing): those dels are not done, so that the memory
    stays in its old file. Before session 38 (attack atk6, F1, high) a rename ``h1`` ->
    ``h9`` whose new file's place another process had taken meanwhile -- an acknowledged
    ``add("h9")`` after the rename failed with its writer alive, or a hand save after it
    was killed -- left that ``h9`` and still removed ``h1.md``: the renamed memory was in
    no file. Keeping it may leave one memory under two ids, which ``health()`` names."""
    if not unplaced:
        return set()
    put_ids = {p[0] for p in c.puts}
    return {i for i, _ in c.dels if i not in put_ids}


def _do_dels(
    root: str,
    c: Commit,
    left: tuple[set[str], set[str]],
    id_of: Callable[[str], str | None] | None,
    outcome: Outcome,
    copied: bool = False,
) -> None:
    """The dels of a commit rolled forward (see :func:`roll_forward`; ``left``: the ids
    left as their files have them, and the ids whose puts landed). A del whose line logs
    the name its file is set aside to (``aside``) and the file's stamp (``removes``) is
    done as its writer does it (:func:`_remove_aside`); the others by an unlink."""
    later, landed = left
    put_ids = {p[0] for p in c.puts}
    for k, (node_id, rel) in enumerate(c.dels):
        # The old copy of a moved node goes only once the new copy is in place.
        if node_id in later or (node_id in put_ids and node_id not in landed):
            continue
        if holds_other(root, node_id, rel, id_of):
            outcome.foreign.append((node_id, rel))
            continue
        tmp, logged = None, None
        if c.aside is not None and c.removes is not None and c.removes[k] is not None:
            tmp, logged = c.aside[k], c.removes[k]
        try:
            gone = fsops.remove(root, rel) if tmp is None else _remove_aside(root, rel, tmp, logged, copied)
        except UnsafePathError:
            continue
        if gone and node_id not in put_ids:
            (outcome.replaced if c.puts else outcome.removed).append((node_id, rel))


def _remove_aside(root: str, rel: str, tmp: str, logged: Stamp | None, copied: bool) -> bool:
    """Recovery's removal of a del's file (:func:`_do_dels`): renamed aside to the temp name
    its line logs (``tmp``) and removed only while it is the file logged (``logged``) -- a
    save landing after recovery's look at it (:func:`_later_ids`) is put back, or kept beside
    a newer file (:func:`_aside_back`; before session 43 the look then an unlink removed
    it). Killed in between, the file is at ``tmp``, where the next recovery looks first
    (:func:`_settle_asides`). True when a file was removed."""
    parent, name = _split(rel)
    if not _safe_temp(tmp, name):
        return fsops.remove(root, rel)
    read = functools.partial(_was_read, logged=logged, copied=copied)
    try:
        with fsops.Dir(root, parent) as d:
            d.set_aside(name, tmp)
            if read(d.lstat(tmp)):
                return d.unlink(tmp)
            _aside_back(d, tmp, name, read)
    except (FileNotFoundError, NotADirectoryError):
        pass
    return False


def edited_since(root: str, c: Commit, copied: bool = False) -> set[str]:
    """The ids of dead commit ``c`` that :func:`roll_forward` would leave as their files have
    them, a file of theirs changed after the line was written (read-only: for ``health()``;
    ``copied`` as there: a copy's commit it would roll back whole leaves every id)."""
    states = _put_states(root, c, copied)
    if "bad" in states and "landed" not in states:
        return set()  # rolled back: nothing is left undone for an edit
    stamp = _written_by(root, c)
    later = _later_ids(root, c, states, None if stamp is None else stamp + int(_CLOCK_SLACK * 1e9), copied)
    if copied and later and "landed" not in states:
        return set(c.ids)
    unplaced = {p[0] for p, state in zip(c.puts, states, strict=True) if state != "landed" and p[0] in later}
    unplaced |= {p[0] for p, state in zip(c.puts, states, strict=True) if state not in ("landed", "temp")}
    return later | _renamed_away(c, unplaced)


def renames(
    root: str, c: Commit, read: Callable[[str], tuple[str, list[str]] | None], limit: int = 5
) -> list[tuple[str, str]]:
    """(old id, new id) of each rename dead commit ``c`` makes, as far as its files tell
    (read-only, for ``health()``): a del of an id the commit puts nowhere, and the first put
    whose file (``read(path)``: the id it holds and its earlier ids, None when it cannot
    tell) holds the put's id, with that old id as its last earlier id -- read from the put's
    temp file until it lands. A rename's node is its commit's first put: only the first
    ``limit`` puts are read (a rename re-points the edges of every node linking to it)."""
    put_ids = {p[0] for p in c.puts}
    olds = [i for i in dict.fromkeys(i for i, _ in c.dels) if i not in put_ids]
    out: list[tuple[str, str]] = []
    for node_id, rel, tmp in c.puts[:limit] if olds else ():
        parent, name = _split(rel)
        temp = f"{parent}/{tmp}"
        told = read(temp if _safe_temp(tmp, name) and _present(root, temp) else rel)
        if told is not None and told[0] == node_id and told[1] and told[1][-1] in olds:
            out.append((told[1][-1], node_id))
            olds.remove(told[1][-1])
            if not olds:
                break
    return out


def holds_other(root: str, node_id: str, rel: str, id_of: Callable[[str], str | None] | None) -> bool:
    """Whether a del of ``node_id`` at ``rel`` is refused because a file is there that does not
    hold that id (another memory's, an unreadable one; ``id_of`` is :attr:`Journal.id_of`):
    :func:`roll_forward` keeps such a file, and ``health()``'s plan says so."""
    return id_of is not None and _present(root, rel) and id_of(rel) != node_id


def _present(root: str, rel: str) -> bool:
    """Whether anything is at ``rel`` (not followed)."""
    try:
        fsops.lstat(root, rel)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return False
    return True


def _written_by(root: str, c: Commit) -> int | None:
    """When ``c``'s line was written at the latest (ns; None: the line says nothing).

    The line's own stamp is another clock's word (a ``.mdcg/`` copied from a
    machine whose clock runs ahead, a forged line): it is bounded by local
    evidence. A line cannot have been written after its shard last changed --
    the inode's change time, set by this machine's clock and by no tool. (Not
    "now": a clock stepped back after a crash would make the crashed commit's
    own files look edited later, and it would not be rolled forward; review
    round 2, session 25.)"""
    if c.ts is None:
        return None
    stamp = int(c.ts * 1e9)
    try:
        return min(stamp, fsops.lstat(root, f"{LOG_REL}/{c.shard}").st_ctime_ns)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return stamp


def _later_ids(
    root: str, c: Commit, states: Sequence[str], limit: int | None, copied: bool = False
) -> set[str]:
    """The ids of ``c`` with a file that is not the one its line meant -- the target of a
    put not landed yet, or a file to delete: one changed after ``limit`` (ns, by
    :func:`_newer`), or (lines that log them: ``replaces``, ``removes``) one that is no
    longer the file logged (:func:`_not_as_logged`): another process saved the id again
    after this commit failed with its writer still alive (its ``done`` could not be
    written), within the clock slack, or whenever this process recovers its own failed
    commit (no time is known for it). (A landed put's file changed when this commit renamed
    it into place: a large batch's renames can take longer than the slack.) ``copied``
    (:func:`roll_forward`): a file logged by a stamp is compared by its (mtime, size) alone,
    and its change time (the copy's) is not looked at."""
    todo: list[tuple[str, str, bool, Stamp | _Unsaid | None]] = []
    for i, (p, state) in enumerate(zip(c.puts, states, strict=True)):
        if state != "landed":
            todo.append((p[0], p[1], True, UNSAID if c.replaces is None else c.replaces[i]))
    for k, (node_id, rel) in enumerate(c.dels):
        todo.append((node_id, rel, False, UNSAID if c.removes is None else c.removes[k]))
    # a del's file set aside and back (by its writer's undoing, by :func:`_settle_asides`) has
    # a new change time from those renames, not from an edit: told by its stamp alone
    aside = {rel for (_, rel), tmp in zip(c.dels, c.aside or (), strict=False) if tmp is not None}
    out = set()
    for node_id, rel, put, logged in todo:
        if limit is None and logged is UNSAID:
            continue
        parent, name = _split(rel)
        try:
            with fsops.Dir(root, parent) as d:
                stamped = (copied or (not put and rel in aside)) and logged is not UNSAID
                if (not stamped and _newer(d, name, limit)) or _not_as_logged(d, name, put, logged, copied):
                    out.add(node_id)
        except (FileNotFoundError, NotADirectoryError):
            if put and logged is not None and logged is not UNSAID:
                out.add(node_id)  # the file the put replaces went, with its folder (a forget)
        except UnsafePathError:
            continue
    return out


class _Unsaid:
    """The type of :data:`UNSAID`."""


#: A commit line of an earlier version logs no stamp of the file a put replaces or a del removes.
UNSAID = _Unsaid()


def _not_as_logged(
    d: fsops.Dir, name: str, put: bool, logged: Stamp | _Unsaid | None, copied: bool = False
) -> bool:
    """Whether file ``name`` of ``d`` is no longer the one a commit line logged there
    (``logged``: its :func:`stamp`, None when no regular file was there; :data:`UNSAID`: the
    line does not say). For a put: any other stamp, the file gone included (another process
    forgot the id since). For a del: a file there with another stamp -- a new file (an
    ``add`` saves by a rename: a new inode) or one changed; a file gone is nothing to keep.
    A ``chmod`` or a hard link moves neither (a hard-linked copy keeps its stamp as the
    other link goes). ``copied``: the inode is not compared (a copy's file has another)."""
    if logged is UNSAID:
        return False
    try:
        st = d.lstat(name)
    except FileNotFoundError:
        return put and logged is not None
    now = stamp(st) if statmod.S_ISREG(st.st_mode) else None
    if copied and now is not None and isinstance(logged, tuple):
        return now[1:] != logged[1:]
    return now != logged


#: Seconds a file's time may run past its commit line's and still be the commit's own
#: (file systems that keep times to the second, or two).
_CLOCK_SLACK = 2.0


def _newer(d: fsops.Dir, name: str, limit: int | None) -> bool:
    """Whether file ``name`` of ``d`` was changed after ``limit`` (ns; None: never said).

    By its inode's change time, which no tool sets: a file copied with its times
    (``cp -p``, ``tar``, ``rsync -t``) from a clock ahead of this one has a modification
    time in the future but was there before the line; one restored with old times after
    the crash was not. A ``chmod`` or a hard link after the crash counts too: such a
    file is kept as it is (a move then leaves both copies, the moved one indexed, and
    ``health`` lists the other) -- never a hand change lost."""
    if limit is None:
        return False
    try:
        return d.lstat(name).st_ctime_ns > limit
    except FileNotFoundError:
        return False


def _put_states(root: str, c: Commit, copied: bool = False) -> list[str]:
    """Per put: ``temp`` (its temp file is there, and whole when checked),
    ``landed`` (no temp file; the target is there, holding the logged bytes
    when checked), ``bad`` (checked, and neither), ``gone`` (unchecked, neither).
    A file an exchange displaced to the temp name is no temp file (:func:`_displaced`)."""
    states = []
    for i, (_, rel, tmp) in enumerate(c.puts):
        check = c.checks[i] if c.checks is not None else None
        parent, name = _split(rel)
        state = "bad" if check is not None else "gone"
        try:
            with fsops.Dir(root, parent) as d:
                if not _safe_temp(tmp, name):
                    pass  # a record this version did not write: never acted on
                elif d.exists(tmp) and not _displaced(d, tmp, c, i, copied):
                    # a regular file only: a symlink is never renamed into place
                    if statmod.S_ISREG(d.lstat(tmp).st_mode) and _holds(d, tmp, check):
                        state = "temp"
                elif d.exists(name) and _holds(d, name, check):
                    state = "landed"
        except (FileNotFoundError, NotADirectoryError, UnsafePathError):
            pass
        states.append(state)
    return states


def _displaced(d: fsops.Dir, tmp: str, c: Commit, i: int, copied: bool = False) -> bool:
    """Whether what is at put ``i``'s temp name is not its temp file but the file an
    exchange displaced (:func:`_settle_exchanges`): another inode than ``made``; in a copied
    store (every inode new) other bytes than the put's -- anything there, a torn temp file
    included, is then kept rather than removed, since a person's save cannot be told from
    it (session 42, atk11 F2: the copy's recovery removed the save as a damaged temp file).
    Only a put that replaced a file of a line that logs ``made`` (this version exchanges)."""
    if c.made is None or c.replaces is None or c.replaces[i] is None:
        return False
    if not copied:
        return d.lstat(tmp).st_ino != c.made[i]
    return not _ours(d, tmp, c, i, copied)


def _ours(d: fsops.Dir, name: str, c: Commit, i: int, copied: bool, whole: bool = True) -> bool:
    """Whether the file ``name`` of ``d`` is put ``i``'s own file, which recovery may remove:
    its temp file's inode (``made``) and, unless ``whole=False``, its logged bytes
    (``check``: a file md-cg wrote and a person then wrote to in place is theirs too); in
    a copied store, or a line without ``made``, its bytes alone. False when no regular file
    is there."""
    try:
        st = d.lstat(name)
    except FileNotFoundError:
        return False
    if not statmod.S_ISREG(st.st_mode):
        return False
    if not copied and c.made is not None and st.st_ino != c.made[i]:
        return False
    if not whole and not copied and c.made is not None:
        return True
    return _holds(d, name, c.checks[i] if c.checks is not None else None)


def _was_read(st: os.stat_result, logged: Stamp | None, copied: bool) -> bool:
    """Whether a file of stat ``st`` is the one a put replaced (``logged``: its
    ``replaces`` stamp; a copy's by its (mtime, size): ``cp -r`` keeps no mtime, so there a
    file is never taken for the one read)."""
    if logged is None or not statmod.S_ISREG(st.st_mode):
        return False
    now = stamp(st)
    return now[1:] == logged[1:] if copied else now == logged


def _place(d: fsops.Dir, c: Commit, i: int, copied: bool) -> bool:
    """Rename put ``i``'s temp file into place, its target checked (:func:`_later_ids`) --
    by an exchange whose displaced file is checked again, so that a save landing after the
    check is put back, not replaced (:func:`md_cg.exchanged.place`; session 42, atk11 F3:
    a plain rename replaced it). True when the put is in place."""
    _, rel, tmp = c.puts[i]
    name = _split(rel)[1]
    if c.replaces is None:  # a line of an earlier version: the rename of before
        d.replace(tmp, name)
        return True
    return exchanged.place(d, tmp, name, _known(d, c, i, copied))


def _known(d: fsops.Dir, c: Commit, i: int, copied: bool) -> exchanged.Known:
    """How recovery tells put ``i``'s files in ``d`` (:class:`md_cg.exchanged.Known`): its
    own file (:func:`_ours`), whole or not, and the file it read (its ``replaces`` stamp,
    :func:`_was_read`; None when it replaced none, or the line logs no stamps)."""
    logged = None if c.replaces is None else c.replaces[i]

    def read(st: os.stat_result) -> bool:
        return _was_read(st, logged, copied)

    def ours(n: str) -> bool:
        return _ours(d, n, c, i, copied)

    def made_here(n: str) -> bool:
        return _ours(d, n, c, i, copied, whole=False)

    return exchanged.Known(ours, None if logged is None else read, made_here)


def _stamp_at(d: fsops.Dir, name: str) -> Stamp | None:
    """The :func:`stamp` of the regular file ``name`` of ``d``; None when none is there."""
    try:
        st = d.lstat(name)
    except FileNotFoundError:
        return None
    return stamp(st) if statmod.S_ISREG(st.st_mode) else None


#: the most guarded files a commit holds open (:class:`_Held`); the others are checked by
#: ``lstat`` alone -- a batch stays within the descriptors docs/reliability.md row 24 counts
HOLD_MAX = 16


@dataclass(frozen=True)
class _Held:
    """A guarded file as the guard found it unchanged: an open descriptor of it, its size
    and its first ``size`` bytes (what the read-modify-write read)."""

    fd: int
    size: int
    head: bytes


def _open_checked(d: fsops.Dir, name: str, was: Stamp) -> tuple[Stamp | None, _Held | None]:
    """The :func:`stamp` of the file ``name`` of ``d`` (None: no regular file there) and,
    when it is ``was``, the file held open (:class:`_Held`; its bytes read before the stamp
    is taken, so a change between the two shows in the stamp). A file that cannot be
    opened is stamped by ``lstat`` alone and not held."""
    try:
        fd, _ = d.open_read(name)
    except (OSError, UnsafePathError):
        return _stamp_at(d, name), None
    try:
        head = os.pread(fd, was[2], 0)
        now = stamp(os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    if now != was:
        os.close(fd)
        return now, None
    return was, _Held(fd, was[2], head)


def _close_held(held: Mapping[str, _Held]) -> None:
    for h in held.values():
        os.close(h.fd)


def _carry_late_appends(
    held: Mapping[str, _Held],
    puts: Sequence[Put],
    dels: Sequence[tuple[str, str]],
    dirs: fsops.FolderCache,
    renamed: Mapping[str, str],
) -> None:
    """Carry into the new file what a person appended to a guarded file after the guard's
    check, through a descriptor opened before the rename (an ``open(..., "a")`` then a
    ``write``): the write landed in the file the commit replaced or removed, which no path
    names any more (session 40: 10-44 of 3,000 appended lines lost so). For each file of
    ``held`` no longer linked anywhere (a file a person moved, or a del spared, still is)
    that grew past what was read, its first bytes still those read: the bytes past them
    are appended to the file the commit put for its id -- for a del's file, for the id
    ``renamed`` gives its id (a rename: the old id's file to the new id's; atk9 of session
    40, F2: the old id has no put, and the line was lost) -- at its path then (none when it
    is gone). Runs after the commit's ``done`` line, under the ids' locks; what a person
    writes through such a descriptor later still lands in the old file (docs/reliability.md,
    Known limits). Best effort: the write is done and acknowledged, so an error here (out
    of descriptors, a full disk, the new file swapped for a symlink) leaves those bytes
    where they landed and is not raised -- raised, it told the caller a write that had
    happened had failed, and a retry applied it twice (attack atk9 of session 40, F1)."""
    where = {p.node_id: p.rel for p in puts}
    ids = {p.rel: p.node_id for p in puts} | {rel: renamed.get(i, i) for i, rel in dels}
    for rel, h in held.items():
        target = where.get(ids.get(rel, ""))
        if target is None:
            continue
        with contextlib.suppress(OSError, UnsafePathError):
            st = os.fstat(h.fd)
            if st.st_nlink or st.st_size <= h.size:
                continue
            data = os.pread(h.fd, st.st_size, 0)
            if data[: h.size] == h.head:
                parent, name = _split(target)
                dirs.get(parent).append(name, data[h.size :])


def _changed_since(guard: Mapping[str, Stamp], dirs: fsops.FolderCache, held: dict[str, _Held]) -> list[str]:
    """The paths of ``guard`` whose file is another than the one read: its :func:`stamp` is
    no longer the one read. A file gone from its path (moved or removed by hand while the
    write was open) is not an edit to keep: the commit goes on as it did before the guard
    -- its put lands, its del finds nothing (``read``) -- and a pick-up after the write
    tells the hand's move (``duplicates``) or removal (session 40: the guard of session 39
    refused it, and a retry found no file, NodeNotFoundError). Each file found unchanged
    is left open in ``held`` (:func:`_open_checked`), the first :data:`HOLD_MAX` of them."""
    out: list[str] = []
    for rel, was in guard.items():
        parent, name = _split(rel)
        try:
            d = dirs.get(parent)
            now, h = _open_checked(d, name, was) if len(held) < HOLD_MAX else (_stamp_at(d, name), None)
        except (FileNotFoundError, NotADirectoryError):
            now, h = None, None
        if h is not None:
            held[rel] = h
        if now is not None and now != was:
            out.append(rel)
    return out


class _SaveLanded(Exception):
    """:func:`_swap_in` found a file saved over ``rel`` after the guard's check, and put it back."""

    def __init__(self, rel: str, taken: bool = False) -> None:
        super().__init__(rel)
        self.rel = rel
        #: a put's path, empty when it was written, holds a file put there since (not a save
        #: over a file read): :class:`PathTaken`
        self.taken = taken

    def node_id(self, puts: Sequence[Put], dels: Sequence[tuple[str, str]]) -> str:
        """The id of the put or del at the path."""
        return ({p.rel: p.node_id for p in puts} | {rel: i for i, rel in dels})[self.rel]

    def refusal(self, puts: Sequence[Put], dels: Sequence[tuple[str, str]]) -> ChangedSinceRead:
        """What :meth:`Journal.commit` raises for it: :class:`PathTaken` when ``taken``."""
        return (PathTaken if self.taken else ChangedSinceRead)([(self.node_id(puts, dels), self.rel)])


@dataclass
class _Placed:
    """What :func:`_swap_in` did before the other renames -- the puts exchanged into place
    (``swapped``), the guarded puts whose file had gone renamed in without replacing
    (``landed``) -- and :func:`_set_asides` after them: the dels whose file it set aside
    and checked (del index -> temp name: ``asides``) and the guarded dels whose file had
    gone (``gone``)."""

    swapped: list[int] = field(default_factory=list)
    landed: list[int] = field(default_factory=list)
    asides: dict[int, str] = field(default_factory=dict)
    gone: set[int] = field(default_factory=set)
    #: the puts :meth:`Journal._apply` renamed in; the temp name of each del to set aside
    plain: list[int] = field(default_factory=list)
    planned: Sequence[str | None] = ()
    #: the guarded paths (a del's file not the one read refuses the commit; another del's is
    #: left, put back: :func:`_set_asides`); the puts to a path nothing was at when their
    #: temp file was written (renamed in only while nothing is there: :func:`_rename_in`)
    strict: Collection[str] = ()
    fresh: set[int] = field(default_factory=set)


def _swap_in(
    puts: Sequence[Put],
    order: Sequence[int],
    temps: list[str],
    stats: list[os.stat_result],
    guard: Mapping[str, Stamp],
    dirs: fsops.FolderCache,
    step: Callable[[str], None],
    dels: tuple[Sequence[tuple[str, str]], Sequence[str | None]] = ((), ()),
) -> _Placed:
    """Put each guarded put's file in place by exchanging it with the file at its path
    (``renameat2(RENAME_EXCHANGE)``: :meth:`md_cg.fsops.Dir.exchange`), before any other
    rename, and check the file so displaced -- now at the temp name -- is the one the guard
    checked (its :func:`stamp`). Another: a person's save (an editor writes a temp file and
    renames it over the path) landed between the check and the rename, which replaced it
    (session 40: 57 of 6,012 lines lost so). Then each guarded put whose file had gone from
    its path is renamed in only while nothing is there (:meth:`md_cg.fsops.Dir.rename_new`:
    a file a person put there meanwhile is not replaced). On either, every step done is
    undone (:func:`_put_back`) and :class:`_SaveLanded` raised: the commit is refused like
    one the guard refuses. Once the other puts are in place, each guarded del's file (a
    move's old file; ``dels``: the dels and their temp names) is set aside and checked the
    same way (:func:`_remove_checked`), and only then are the displaced files removed (a
    late append through a descriptor of one is carried: :func:`_carry_late_appends`).
    Returns what is in place (:class:`_Placed`). Where the system or file system cannot exchange (not
    Linux, EINVAL) the guarded puts are left to :meth:`Journal._apply`'s rename -- the
    behaviour before (that window stays there).
    A kill between an exchange and the removal leaves the displaced file at the temp name,
    for recovery (:func:`_settle_exchanges`); one after a del's file was set aside leaves it
    there (:func:`_settle_asides`). What this does not close: from the exchange
    to its undoing md-cg's file is at the path -- microseconds, a millisecond or more on a
    busy ext4 -- and a program that reads the file then and saves what it read over it
    again builds on md-cg's file, not on the save (docs/reliability.md, Known limits)."""
    placed, gone = _Placed(planned=dels[1], strict=set(guard)), []
    try:
        for i in [i for i in order if guard.get(puts[i].rel) is not None]:
            put = puts[i]
            was = guard[put.rel]
            parent, name = _split(put.rel)
            d = dirs.get(parent)
            if _stamp_at(d, name) not in (was, None):  # saved since the check: refused unseen
                raise _SaveLanded(put.rel)
            try:
                if not d.exchange(temps[i], name):
                    break
            except FileNotFoundError:
                gone.append(i)  # moved or removed by hand: the put lands if nothing is there
                continue
            placed.swapped.append(i)
            step(f"exchanged-{len(placed.swapped)}")
            if _stamp_at(d, temps[i]) != was:
                raise _SaveLanded(put.rel)
        for i in gone:
            if not dirs.get(_split(puts[i].rel)[0]).rename_new(temps[i], _split(puts[i].rel)[1]):
                raise _SaveLanded(puts[i].rel)  # a file put at the path since the check
            placed.landed.append(i)
    except _SaveLanded:
        _put_back(puts, temps, stats, placed, dirs, dels[0])
        raise
    return placed


def _rename_in(
    puts: Sequence[Put],
    temps: list[str],
    stats: list[os.stat_result],
    at: tuple[int, Sequence[tuple[str, str]]],
    placed: _Placed,
    dirs: fsops.FolderCache,
) -> None:
    """Rename put ``at[0]``'s temp file into place (:meth:`Journal._apply`; ``at[1]``: the
    commit's dels). A put to a path nothing was at when its temp file was written
    (``placed.fresh``: an ``add``, a move's or a rename's new path) only while nothing is
    there (:meth:`md_cg.fsops.Dir.rename_new`): a file a person made there since -- an
    editor's save of a memory just deleted, a new note -- was replaced by the plain rename
    before session 43. Such a file found there: every step done is undone
    (:func:`_put_back`), :class:`_SaveLanded` (``taken``: :class:`PathTaken`). Something
    there that is no regular file (a symlink, made before the temp file too: its stamp is
    None) is replaced as before."""
    i, dels = at
    parent, name = _split(puts[i].rel)
    d = dirs.get(parent)
    if i not in placed.fresh:
        d.replace(temps[i], name)
    elif not d.rename_new(temps[i], name):
        if _stamp_at(d, name) is not None:
            _put_back(puts, temps, stats, placed, dirs, dels)
            raise _SaveLanded(puts[i].rel, taken=True)
        d.replace(temps[i], name)
    placed.plain.append(i)


def _remove_checked(
    puts: Sequence[Put],
    temps: list[str],
    stats: list[os.stat_result],
    dels: Sequence[tuple[str, str]],
    placed: _Placed,
    dirs: fsops.FolderCache,
    read: Mapping[str, Stamp],
    step: Callable[[str], None],
) -> None:
    """Every put in place: set the file of each guarded del aside and check it
    (:func:`_set_asides`), then remove the files the exchanges displaced. A save found
    there: every put and exchange undone (:func:`_put_back`), :class:`_SaveLanded`."""
    try:
        _set_asides(dels, read, dirs, step, placed)
    except _SaveLanded:
        _put_back(puts, temps, stats, placed, dirs, dels, read)
        raise
    for i in placed.swapped:
        dirs.get(_split(puts[i].rel)[0]).unlink(temps[i])


def _set_asides(
    rels: Sequence[tuple[str, str]],
    read: Mapping[str, Stamp],
    dirs: fsops.FolderCache,
    step: Callable[[str], None],
    placed: _Placed,
) -> None:
    """Set the file of each guarded del (a move's, a rename's old file) aside to its temp
    name (``placed.planned``, logged in the commit line) and check that the file so moved
    is the one read (``read``, the guard's stamps): another is a person's save landing
    after the check, which a look then an unlink removed (session 41) --
    :class:`_SaveLanded`. A file gone from its path is nothing to remove (``gone``)."""
    for k in _folder_order([rel for _, rel in rels], dirs.size):
        tmp, rel = placed.planned[k] if placed.planned else None, rels[k][1]
        if tmp is None:
            continue
        parent, name = _split(rel)
        try:
            d = dirs.get(parent)
            d.set_aside(name, tmp)
        except (FileNotFoundError, NotADirectoryError):
            placed.gone.add(k)
            continue
        placed.asides[k] = tmp
        step(f"aside-{len(placed.asides)}")
        if _stamp_at(d, tmp) == read[rel]:
            continue
        if rel in placed.strict:
            raise _SaveLanded(rel)
        # a del given its stamp as read alone (a forgotten memory's copy, the sweep's file):
        # left, as the stamp check before the unlink left it, but by a rename that cannot
        # remove a save landing after the look -- put back (or beside a newer file)
        del placed.asides[k]
        placed.gone.add(k)
        _aside_back(d, tmp, name, functools.partial(_was_read, logged=read[rel], copied=False))


def _start_writebacks(
    puts: Sequence[Put], temps: list[str], guard: Mapping[str, Stamp], dirs: fsops.FolderCache
) -> None:
    """Start writing back the temp files :func:`_swap_in` will exchange over a file, as ext4
    does itself for a rename over a file (``auto_da_alloc``) and not for an exchange: after a
    power cut the path then holds the old bytes or the new, never an empty file (a durable
    commit has fsynced them). Done as the temp files are written, well before the exchange:
    it may wait on the disk."""
    for put, tmp in zip(puts, temps, strict=True):
        if guard.get(put.rel) is not None:
            dirs.get(_split(put.rel)[0]).start_writeback(tmp)


def _put_back(
    puts: Sequence[Put],
    temps: list[str],
    stats: list[os.stat_result],
    placed: _Placed,
    dirs: fsops.FolderCache,
    dels: Sequence[tuple[str, str]] = (),
    read: Mapping[str, Stamp] | None = None,
) -> None:
    """Undo what :func:`_swap_in` and :meth:`Journal._apply` did, the last first. Each
    file set aside goes back to its path while nothing is there; a file there by then (a
    newer save) stays, and the one set aside is removed only while it is the file read
    (``read``), kept beside it otherwise (:func:`_aside_back`). A put renamed in goes back
    to its temp name; should the file there be a person's (saved over it since), it goes
    back to the path, or beside a newer file there (:func:`md_cg.exchanged.keep_aside`).
    Each exchange is undone: the displaced file back at its path, this commit's file at its
    temp name; should the file exchanged back not be this commit's (a person saved over the
    path again meanwhile), that newer save goes back to the path and the earlier one is kept
    beside it (:func:`md_cg.exchanged.newer_back`); should the path be empty (the file
    removed meanwhile), the displaced file is renamed back to it."""
    for k, tmp in reversed(placed.asides.items()):
        parent, name = _split(dels[k][1])
        logged = None if read is None else read.get(dels[k][1])
        _aside_back(dirs.get(parent), tmp, name, functools.partial(_was_read, logged=logged, copied=False))
    for i in reversed(placed.landed + placed.plain):
        parent, name = _split(puts[i].rel)
        d = dirs.get(parent)
        try:
            d.set_aside(name, temps[i])
        except FileNotFoundError:
            continue  # removed meanwhile: nothing of this commit there
        if d.lstat(temps[i]).st_ino != stats[i].st_ino:
            if not d.rename_new(temps[i], name):  # a person's file saved over it: back, or beside
                exchanged.keep_aside(d, temps[i], name)
        elif _edited_own(d, temps[i], stats[i], puts[i].data):  # md-cg's, edited in place: kept
            exchanged.keep_aside(d, temps[i], name)
    for i in reversed(placed.swapped):
        parent, name = _split(puts[i].rel)
        d = dirs.get(parent)
        try:
            d.exchange(temps[i], name)
        except FileNotFoundError:
            d.replace(temps[i], name)
            continue
        st = d.lstat(temps[i])
        if st.st_ino != stats[i].st_ino:
            exchanged.newer_back(d, temps[i], name)
        elif _edited_own(d, temps[i], stats[i], puts[i].data):
            exchanged.keep_aside(d, temps[i], name)


def _edited_own(d: fsops.Dir, tmp: str, st: os.stat_result, data: bytes) -> bool:
    """Whether the file at ``tmp`` -- md-cg's own put, taken back by :func:`_put_back`: its
    inode, ``st`` its stat as written -- was written to in place while it was at its path
    (a person's editor saving without a rename keeps the inode): its :func:`stamp` or its
    bytes are no longer those written (``data``). Such a file is a person's save, kept beside
    the path (:func:`md_cg.exchanged.keep_aside`), not removed with this commit's temp files.
    Before session 43 (atk12 F3) the inode alone was compared, and the edit was removed."""
    try:
        now = d.lstat(tmp)
    except FileNotFoundError:
        return False
    if not statmod.S_ISREG(now.st_mode) or now.st_ino != st.st_ino:
        return False
    return stamp(now) != stamp(st) or not _holds(d, tmp, (len(data), zlib.crc32(data)))


def _settle_exchanges(root: str, c: Commit, copied: bool = False) -> set[str]:
    """Before a dead commit is rolled forward: a put's temp name holding what is not its
    temp file (:func:`_displaced`) holds the file an exchange displaced (:func:`_swap_in`),
    the writer killed before it checked or removed it. The file read (the put's
    ``replaces`` stamp) is removed: the put landed. Anything else is a person's (a save
    landing in the window, a symlink put there) and is never removed
    (:func:`md_cg.exchanged.settle`): put back at the path by an exchange with md-cg's file
    there, checked; when a person's later file is at the path (saved after the kill, built
    on md-cg's file), both are kept, the displaced one as ``<stem>.saved-<time>.md`` beside
    it, which ``sync`` and ``health`` name as a duplicate (session 42, atk11 F1: it was
    removed as "older", its change in no file). Returns the ids so left as saved."""
    out: set[str] = set()
    if c.made is None or c.replaces is None or c.checks is None:
        return out

    def settle(i: int, d: fsops.Dir, tmp: str, name: str) -> None:
        if not d.exists(tmp) or not _displaced(d, tmp, c, i, copied):
            return
        if exchanged.settle(d, tmp, name, _known(d, c, i, copied)) != exchanged.LANDED:
            out.add(c.puts[i][0])

    _at_temps(root, [(rel, tmp) for _, rel, tmp in c.puts], settle)
    return out


def _settle_asides(root: str, c: Commit, copied: bool) -> bool:
    """Before a dead commit is rolled forward: each file a guarded del set aside
    (:func:`_set_asides`; ``aside``) is renamed back to its path, the writer killed before
    it checked or removed it -- the roll-forward then removes it as any del, after the puts
    are in place, when it is the one logged (``removes``). Should a file be at the path by
    then (saved after the kill), that one stays and the one set aside, older, is removed.
    Returns whether one set aside is not the file logged: a person's save landed between
    the guard's check and the setting aside, and the commit is then undone whole
    (:func:`_unswap`), as its writer would have undone it -- rolled forward, a move left
    the save beside the moved memory, a rename the old id beside the new."""
    saved: list[int] = []

    def settle(k: int, d: fsops.Dir, tmp: str, name: str) -> None:
        logged = None if c.removes is None else c.removes[k]

        def read(st: os.stat_result) -> bool:
            return _was_read(st, logged, copied)

        if not read(d.lstat(tmp)):
            saved.append(k)
        _aside_back(d, tmp, name, read)

    _at_temps(root, list(zip([rel for _, rel in c.dels], c.aside or (), strict=False)), settle)
    if saved:
        _unswap(root, c, copied)
    return bool(saved)


def saved_asides(root: str, c: Commit, copied: bool = False) -> list[str]:
    """The paths of dead commit ``c``'s dels whose file is set aside (at its logged ``aside``
    name) and is not the file logged -- a person's save landed before the setting aside --
    for which its recovery undoes the commit whole (:func:`_settle_asides`). Read-only: for
    ``health()``'s plan of an open commit."""
    out: list[str] = []

    def look(k: int, d: fsops.Dir, tmp: str, name: str) -> None:
        if not _was_read(d.lstat(tmp), None if c.removes is None else c.removes[k], copied):
            out.append(c.dels[k][1])

    _at_temps(root, list(zip([rel for _, rel in c.dels], c.aside or (), strict=False)), look)
    return out


def _aside_back(d: fsops.Dir, tmp: str, name: str, read: Callable[[os.stat_result], bool]) -> None:
    """Put a del's file set aside at ``tmp`` back at its path ``name`` while nothing is
    there. A file there by then (saved meanwhile) stays; the one set aside is removed when
    it is the file read (``read``: that save replaced it), and a person's (a save landing
    before it was set aside) is kept beside it (:func:`md_cg.exchanged.keep_aside`): until
    the merge of session 42 it was removed as "older"."""
    if d.rename_new(tmp, name):
        return
    if read(d.lstat(tmp)):
        d.unlink(tmp)
    else:
        exchanged.keep_aside(d, tmp, name)


def _unswap(root: str, c: Commit, copied: bool) -> None:
    """Undo a dead commit whose guarded del found a person's save (a file set aside that is
    not the one read: :func:`_settle_asides`): each file an exchange displaced to a put's
    temp name goes back to the path by an exchange with this commit's file there, checked
    (:func:`md_cg.exchanged.settle`: a save landing meanwhile is put back; beside a
    person's later file at the path it is kept as ``<stem>.saved-<time>.md``); a put
    renamed in (a move's new file) is taken back -- removed while it is this put's file
    whole, else put back or kept beside a file there; this commit's temp files are
    removed. Nothing a person saved is removed."""

    def undo(i: int, d: fsops.Dir, tmp: str, name: str) -> None:
        known = _known(d, c, i, copied)
        if not d.exists(tmp):  # landed by a rename: taken back
            d.set_aside(name, tmp)
            if known.ours(tmp):
                d.unlink(tmp)
            elif not d.rename_new(tmp, name):
                exchanged.keep_aside(d, tmp, name)
        elif known.made_here is not None and known.made_here(tmp):
            d.unlink(tmp)  # this put's temp file, never placed
        else:
            exchanged.settle(d, tmp, name, replace(known, was_read=None))

    _at_temps(root, [(rel, tmp) for _, rel, tmp in c.puts], undo)


def _at_temps(
    root: str, items: Sequence[tuple[str, str | None]], act: Callable[[int, fsops.Dir, str, str], None]
) -> None:
    """``act(k, folder, temp name, name)`` for each (path, temp name) of ``items`` whose temp
    name is one of md-cg's beside it; a folder or file gone (or unsafe) ends its ``act``."""
    for k, (rel, tmp) in enumerate(items):
        parent, name = _split(rel)
        if tmp is None or not _safe_temp(tmp, name):
            continue
        with (
            contextlib.suppress(FileNotFoundError, NotADirectoryError, UnsafePathError),
            fsops.Dir(root, parent) as d,
        ):
            act(k, d, tmp, name)


def _stamp_item(st: Stamp | None) -> list[int] | None:
    """A stamp as a commit line logs it (``replaces``, ``removes``): ``[inode, mtime_ns, size]``."""
    return None if st is None else list(st)


def _stamps(value: Any, count: int) -> tuple[Stamp | None, ...] | None:
    """A commit line's ``replaces`` or ``removes`` list: one stamp (or null) per put or del.
    Absent or malformed: None, and recovery goes by the files' times alone, as for the
    lines of earlier versions."""
    if not isinstance(value, list) or len(value) != count:
        return None
    out: list[Stamp | None] = []
    for item in value:
        if item is None:
            out.append(None)
        elif isinstance(item, list) and len(item) == 3 and all(type(x) is int for x in item):
            out.append((item[0], item[1], item[2]))
        else:
            return None
    return tuple(out)


def _del_stamps(
    dels: Sequence[tuple[str, str]], dirs: fsops.FolderCache, read: Mapping[str, Stamp]
) -> list[Stamp | None]:
    """The :func:`stamp` of the file each del removes (None: no regular file there): the
    one ``read`` gives, else the file's now. One ``lstat`` per del, through the folders the
    unlinks use next."""
    out: list[Stamp | None] = [None] * len(dels)
    for k in _folder_order([rel for _, rel in dels], dirs.size):
        rel = dels[k][1]
        if rel in read:
            out[k] = read[rel]
            continue
        parent, name = _split(rel)
        try:
            out[k] = _stamp_at(dirs.get(parent), name)
        except (OSError, UnsafePathError):
            continue  # no folder, no file; an unsafe or unreadable one: the unlink meets it
    return out


def _holds(d: fsops.Dir, name: str, check: tuple[int, int] | None) -> bool:
    """Whether file ``name`` of ``d`` holds the bytes ``check`` describes (any, unchecked)."""
    if check is None:
        return True
    size, crc = check
    try:
        data, st = d.read(name, max_bytes=size)
    except (OSError, UnsafePathError):
        return False
    return st.st_size == size and len(data) == size and zlib.crc32(data) == crc


#: What a commit line logs of one put: the (size, CRC-32) of its bytes (None: the line
#: does not say) and when the line was written (seconds; None: it does not say).
Logged = tuple[tuple[int, int] | None, float | None]


@dataclass(frozen=True)
class UnreadWrites:
    """What the commit lines a cursor has not read yet write (:func:`unread_writes`)."""

    #: path -> what each put there logged (several processes may write one path)
    puts: dict[str, list[Logged]]
    #: every id those lines put or delete
    ids: frozenset[str]


def unread_writes(root: str, offsets: dict[str, int], still_open: Iterable[Commit] = ()) -> UnreadWrites:
    """The puts and ids of the commit lines past ``offsets`` (the log a process has not
    followed yet): what another process wrote through md-cg, which a scan of the files may
    see before the line is read -- so that a sync tells those files from hand edits.
    ``still_open``: commits the process followed while they were open (their files may
    land after the follow), counted as unread: a look finding the file one of them put,
    holding what it logged, found md-cg's write too (session 43)."""
    puts: dict[str, list[Logged]] = {}
    ids: set[str] = set()
    lines = logged_writes(read_tail(root, offsets))
    lines += [w for c in still_open for w in commit_writes(c)]
    for line in lines:
        if line.put:
            puts.setdefault(line.rel, []).append(line.logged)
        ids.add(line.id)
    return UnreadWrites(puts, frozenset(ids))


@dataclass(frozen=True)
class LoggedWrite:
    """One put or delete of a commit line (:func:`logged_writes`)."""

    id: str
    rel: str
    put: bool
    logged: Logged
    key: tuple[str, int]  # the commit's


def logged_writes(tail: Tail) -> list[LoggedWrite]:
    """Each put and delete of the commit lines of ``tail``: what other processes wrote."""
    out: list[LoggedWrite] = []
    for shard, records in tail.by_shard.items():
        for rec in records:
            c = parse_commit(shard, rec) if rec.get("op") == "commit" else None
            if c is not None:
                out += commit_writes(c)
    return out


def commit_writes(c: Commit) -> list[LoggedWrite]:
    """Each put and delete of commit ``c`` (:func:`logged_writes`)."""
    out: list[LoggedWrite] = []
    for i, (node_id, rel, _tmp) in enumerate(c.puts):
        check = c.checks[i] if c.checks is not None else None
        out.append(LoggedWrite(node_id, rel, True, (check, c.ts), c.key))
    out.extend(LoggedWrite(node_id, rel, False, (None, c.ts), c.key) for node_id, rel in c.dels)
    return out


def synced_ids(tail: Tail) -> dict[str, float]:
    """id -> the time of the last ``sync`` line of ``tail`` naming it: a process took in a
    change of its file made outside md-cg, and told it. An id the line lists as
    :data:`UNTOLD` (a scoped sync took the change in and told no one) is not counted."""
    out: dict[str, float] = {}
    for shard, records in tail.by_shard.items():
        for rec in records:
            c = parse_commit(shard, rec) if rec.get("op") == "sync" else None
            if c is not None:
                stamp = c.ts if c.ts is not None else float("inf")
                untold = _untold_of(rec)
                for node_id in {*(p[0] for p in c.puts), *(d[0] for d in c.dels)} - untold.keys():
                    out[node_id] = max(out.get(node_id, stamp), stamp)
    return out


#: The key of a scoped sync line listing the changes it took in and told no one:
#: ``[[id, kind, path], ...]`` (kind ``gone``, ``changed``, ``moved`` or ``added``; path
#: the one held before for ``gone`` and ``moved``, else the file's), written by
#: :func:`md_cg.maintenance._settle_touched` (session 40).
UNTOLD = "untold"
_UNTOLD_KINDS = frozenset({"gone", "changed", "moved", "added"})


def _untold_of(rec: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The usable :data:`UNTOLD` entries of a sync line: id -> (kind, path)."""
    raw = rec.get(UNTOLD)
    out: dict[str, tuple[str, str]] = {}
    if not isinstance(raw, list):
        return out
    for item in raw:
        if (
            isinstance(item, list)
            and len(item) == 3
            and all(isinstance(x, str) for x in item)
            and item[1] in _UNTOLD_KINDS
            and paths.rel_problem(item[2]) is None
        ):
            out[item[0]] = (item[1], item[2])
    return out


def untold_in(tail: Tail) -> list[tuple[str, str, str]]:
    """The changes the scoped sync lines of ``tail`` took in and told no one
    (:data:`UNTOLD`), in log order, as (id, kind, path) -- each not told by a later sync
    line of the tail (:func:`synced_ids`). A process following them notes each for a sync
    of a scope that admits the memory (:attr:`md_cg.engine.Engine.hand_after`): the line
    takes the change into every index (a memory renamed by hand is found under its new
    id), and the telling is left to the memory's scope (session 40; session 39 left such
    changes out of the line, and a process of the memory's scope knew nothing of them
    until its own sync looked)."""
    if not any(rec.get("op") == "sync" and UNTOLD in rec for recs in tail.by_shard.values() for rec in recs):
        return []  # the common case: no scoped sync found another scope's change
    told = synced_ids(tail)
    found: list[tuple[float, str, str, str]] = []
    for shard, records in tail.by_shard.items():
        for rec in records:
            if rec.get("op") != "sync" or UNTOLD not in rec:
                continue
            c = parse_commit(shard, rec)
            if c is None:
                continue
            stamp = c.ts if c.ts is not None else float("inf")
            for node_id, (kind, rel) in _untold_of(rec).items():
                if told.get(node_id, -1.0) < stamp:
                    found.append((stamp, node_id, kind, rel))
    return [(i, kind, rel) for _stamp, i, kind, rel in sorted(found)]


def closed_ids(tail: Tail, cursor: Cursor) -> set[str]:
    """The ids the closed commit lines of ``tail`` write (after :func:`replay`)."""
    return {w.id for w in logged_writes(tail) if w.key not in cursor.pending}


def hand_edits_after(
    root: str, entries: Mapping[str, Any], tail: Tail, cursor: Cursor
) -> dict[str, tuple[str, str]]:
    """The files other processes wrote through md-cg (the closed commit lines of ``tail``, just
    followed: ``entries`` holds the files as they are now) that a person changed after: id ->
    ``("changed", path)`` when the file no longer holds the bytes its line logged (size and
    CRC-32; read only when its mtime is past the line), ``("gone", path)`` when it is no
    longer there, ``("moved", path)`` when a file at another path holds it (the write's path
    named: moved back by hand, or a ``git checkout`` of an older commit put it where it was --
    a memory taken out of ``archive/`` is live again), ``("added", path)`` when the line
    deleted it (a ``forget``, the old id of a ``rename``) and a file holds it again -- at a
    path the line deleted, or newer than the line (session 41: not the older file the line
    left, when it removed one file of several holding the id -- ``rename(path=)`` -- which was
    told ``added``). Following the log reads such a file as it is, so no change shows: a sync
    tells them (:func:`md_cg.maintenance.sync`); before the last two were noted, a checkout in
    the clone that made the writes told neither (review s33 r2, git7c.py). An id a ``sync``
    line of the tail names after the write is left out (a process took the edit in and told
    it), and so is one of a line of an earlier version (no time); a write a recovery closed
    (``recovered``) notes no move or return -- it may have kept a file edited after the crash
    where it was (the recovering sync tells it, ``left_as_edited``) --, and a write rolled
    back (:func:`_undone_keys`) nothing."""
    # an id of a write still open (its writer at work, or dead and not yet finished) is
    # left alone: its file is that write's, not the earlier closed one's
    still_open = {i for c in cursor.pending.values() for i in c.ids}
    writes = [w for w in logged_writes(tail) if w.key not in cursor.pending and w.id not in still_open]
    if not writes:
        return {}
    synced = synced_ids(tail)
    recovered = _recovered_keys(tail)
    undone = _undone_keys(tail)
    by_id: dict[str, list[LoggedWrite]] = {}
    for w in writes:
        if w.key in undone:
            continue  # rolled back by its writer or a recovery: md-cg's, no hand change
        by_id.setdefault(w.id, []).append(w)
    out: dict[str, tuple[str, str]] = {}
    for node_id, mine in by_id.items():
        stamps = [w.logged[1] for w in mine]
        if None in stamps:
            continue
        newest = max(t for t in stamps if t is not None)
        if synced.get(node_id, -1.0) >= newest:
            continue  # told by a sync since
        newer = [w for w in mine if w.logged[1] == newest]
        last = [w for w in newer if w.put]
        e = entries.get(node_id)
        # a recovery's write: a file it kept where it was is that sync's to tell
        kept = any(w.key in recovered for w in newer)
        if not last:  # deleted by its last line
            # a file of the id there before the line (older, at a path it did not delete) is
            # one the line left: another copy (a rename of one of several files holding the id)
            if e is not None and not kept and (e.path in {w.rel for w in newer} or e.mtime_ns > newest * 1e9):
                out[node_id] = ("added", e.path)
            continue
        rels = {w.rel for w in last}
        if e is None:
            out[node_id] = ("gone", min(rels))
        elif e.path not in rels:
            if not kept:
                out[node_id] = ("moved", min(rels))
        elif e.mtime_ns > newest * 1e9 and not holds_logged(
            root, e.path, [w.logged for w in mine if w.put and w.rel == e.path]
        ):
            out[node_id] = ("changed", e.path)
    return out


def undone_only_ids(tail: Tail) -> set[str]:
    """The ids every write of ``tail``'s commit lines to which was rolled back
    (:func:`_undone_keys`): following the tail changed nothing of them through md-cg, so
    one the index held whose file is gone now was removed by hand -- :func:`hand_edits_after`
    skips those writes and notes nothing of it (attack a2 of session 37: an undone
    ``update`` and a person's ``rm`` of the file in one tail; no sync ever told it)."""
    undone = _undone_keys(tail)
    if not undone:
        return set()
    writes = logged_writes(tail)
    mine = {w.id for w in writes if w.key in undone}
    return mine - {w.id for w in writes if w.key not in undone}


def _undone_keys(tail: Tail) -> set[tuple[str, int]]:
    """The keys of the commits of ``tail`` rolled back: closed by a ``done`` or a
    ``recovered`` record marked ``undone`` (a durable write whose fsync failed or was
    interrupted, a recovery after a power cut that found a temp file torn). Their files
    never landed: a follow that took a put of one for a file gone by hand noted it, and
    a compaction then kept the note -- every process refused the add again and a sync
    told it ``deleted`` (attack a1 of session 37)."""
    out: set[tuple[str, int]] = set()
    for shard, records in tail.by_shard.items():
        for rec in records:
            op = rec.get("op")
            if op in ("done", "recovered") and rec.get("undone") and isinstance(seq := rec.get("c"), int):
                key = rec.get("shard", shard) if op == "recovered" else shard
                if isinstance(key, str):
                    out.add((key, seq))
    return out


def _recovered_keys(tail: Tail) -> set[tuple[str, int]]:
    """The keys of the commits a ``recovered`` record of ``tail`` closes."""
    out: set[tuple[str, int]] = set()
    for shard, records in tail.by_shard.items():
        for rec in records:
            if rec.get("op") == "recovered" and isinstance(seq := rec.get("c"), int):
                key = rec.get("shard", shard)
                if isinstance(key, str):
                    out.add((key, seq))
    return out


def sync_record(root: str, records: dict[str, list[Any]], entries: Mapping[str, Any]) -> dict[str, Any]:
    """A ``sync`` line for ``records`` (its ``put`` and ``del`` pairs), with the ``stat`` of
    each put as the index took it in: ``[mtime_ns, size]`` (None when the index holds the id
    elsewhere), and its ``crc``: the CRC-32 of the file's bytes (None when it no longer has
    that stat), which :func:`synced_edits_after` compares with the file when a process
    follows the line. The CRC-32 tells a file only touched or rewritten with the same bytes
    (an editor's save, a cloud client, ``cp``, ``git checkout``) from one edited: its mtime
    moves either way. It costs a read of each file the line names (the index does not keep
    the bytes it parsed). (A list of its own: a version that logs no ``crc`` reads ``stat``.)"""
    stat: list[list[int] | None] = []
    crc: list[int | None] = []
    for node_id, rel in records["put"]:
        e = entries.get(node_id)
        stat.append([e.mtime_ns, e.size] if e is not None and e.path == rel else None)
        crc.append(_crc_of(root, rel, e) if e is not None and e.path == rel else None)
    return {"op": "sync", **records, "stat": stat, "crc": crc}


def _crc_of(root: str, rel: str, e: Any) -> int | None:
    """The CRC-32 of the file at ``rel`` when it still has the entry ``e``'s mtime and size
    (the bytes the index took in), else None."""
    try:
        data, st = fsops.read_file(root, rel, max_bytes=e.size)
    except (OSError, UnsafePathError):
        return None
    if st.st_mtime_ns != e.mtime_ns or st.st_size != e.size or len(data) != e.size:
        return None
    return zlib.crc32(data)


#: A sync line's stat of one put: (mtime_ns, size, crc32; None in lines before the CRC)
_SyncStat = tuple[int, int, int | None]


def _sync_stat(item: Any, crc: Any) -> _SyncStat | None:
    """One ``stat`` item of a sync line (:func:`sync_record`), with its ``crc`` (None when
    the line logs none); None when unusable."""
    if isinstance(item, list) and len(item) == 2 and all(type(x) is int and x >= 0 for x in item):
        return (item[0], item[1], crc if type(crc) is int and crc >= 0 else None)
    return None


#: The kind of a :func:`synced_edits_after` note of a file whose mtime moved and whose size
#: did not: ``"touched <size> <crc32>"``, the bytes the sync line took in -- the sync reads
#: the file and tells it ``changed`` only when it no longer holds them (:func:`touched_check`).
TOUCHED = "touched"


def touched_check(kind: str) -> tuple[int, int] | None:
    """The (size, CRC-32) of a :data:`TOUCHED` note's kind; None for another kind."""
    parts = kind.split(" ")
    if len(parts) != 3 or parts[0] != TOUCHED or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    return (int(parts[1]), int(parts[2]))


#: id -> (time, path, stat) of the last sync line naming it; path and stat None: it deleted the id
_LastSync = dict[str, tuple[float, str | None, _SyncStat | None]]


def _last_syncs(tail: Tail) -> _LastSync:
    """The last ``sync`` line of ``tail`` naming each id, of those that log a time and
    stats (earlier versions' lines do not)."""
    out: _LastSync = {}
    for records in tail.by_shard.values():
        for rec in records:
            if rec.get("op") != "sync" or not isinstance(stats := rec.get("stat"), list):
                continue
            # (no path is opened: the paths are only compared with the index's)
            puts, dels = _pairs(rec.get("put", []), 2), _pairs(rec.get("del", []), 2)
            ts = _seconds(rec.get("ts"))
            if puts is None or dels is None or ts is None or len(stats) != len(puts):
                continue
            for node_id, _rel in dels:
                if out.get(node_id, (-1.0,))[0] <= ts:
                    out[node_id] = (ts, None, None)
            crcs = rec.get("crc")
            crcs = crcs if isinstance(crcs, list) and len(crcs) == len(puts) else [None] * len(puts)
            for (node_id, rel), item, crc in zip(puts, stats, crcs, strict=True):
                if out.get(node_id, (-1.0,))[0] <= ts:
                    out[node_id] = (ts, rel, _sync_stat(item, crc))
    return out


#: A sync line's key listing every copy of each duplicated id it names (:mod:`md_cg.copyfate`)
COPIES = "copies"


def _synced_copies(tail: Tail) -> dict[tuple[str, float], set[str]]:
    """(id, time) -> the paths a ``sync`` line of ``tail`` at that time put the id at, or
    logged a copy of it at (:data:`COPIES`), for each id with more than one (the copies of
    a duplicated id the line names). Session 42: a line putting the id at one path alone
    (a scope's sync telling its own copy) and logging the other copy under :data:`COPIES`
    made every process opening after the standing copy's removal hold a ``moved`` note
    onto the other copy's file, told to every scope -- naming another scope's file."""
    out: dict[tuple[str, float], set[str]] = {}
    for records in tail.by_shard.values():
        for rec in records:
            puts = _pairs(rec.get("put", []), 2) if rec.get("op") == "sync" else None
            ts = _seconds(rec.get("ts"))
            if puts is None or ts is None:
                continue
            rels: dict[str, set[str]] = {}
            for node_id, rel in [*puts, *_copy_pairs(rec.get(COPIES))]:
                rels.setdefault(node_id, set()).add(rel)
            out.update({(i, ts): r for i, r in rels.items() if len(r) > 1})
    return out


def _copy_pairs(raw: object) -> list[tuple[str, str]]:
    """(id, path) of each :data:`COPIES` item of a sync line (of the shape it is logged in)."""
    items = raw if isinstance(raw, list) else ()
    return [
        (item[0], item[1])
        for item in items
        if isinstance(item, list) and len(item) > 1 and type(item[0]) is str and type(item[1]) is str
    ]


def synced_edits_after(entries: Mapping[str, Any], tail: Tail, cursor: Cursor) -> dict[str, tuple[str, str]]:
    """The files a ``sync`` line of ``tail`` (just followed: ``entries`` holds the files as
    they are now) took in that changed after -- a ``git pull`` without hooks, an edit:
    id -> ``("changed", path)`` when the file's size is no longer the line's ``stat`` (or
    its mtime, for a line without a CRC-32), a :data:`TOUCHED` note when only its mtime
    moved (the sync reads the file and tells it only when its bytes differ: a touch, a
    re-save or a ``cp`` of the same bytes is no change), ``("gone", path)`` when the id
    is in no file, ``("moved", path)`` when a file at another path holds it (a checkout
    of an older commit: session 33 told no move), ``("added", path)`` when the line
    deleted it and a file holds it again. Following the log reads such a file as it is,
    so no change shows: a sync tells them, as :func:`hand_edits_after` does for commit
    lines. An id a commit line of the tail writes at or after the sync line (or one still
    open) is left to that line; so is one of a line of an earlier version (no time or
    stats), and one standing now at another path the line put it at too -- another copy
    of a duplicated id (:func:`_synced_copies`): its ``stat`` is the copy standing in its
    writer's; each copy's fate is told to its own scope from the line's ``copies``
    (:mod:`md_cg.copyfate`, session 41). No file is read here: the follow stat'ed them."""
    last = _last_syncs(tail)
    if not last:
        return {}
    still_open = {i for c in cursor.pending.values() for i in c.ids}
    written: dict[str, float] = {}
    for w in logged_writes(tail):
        written[w.id] = max(written.get(w.id, -1.0), float("inf") if w.logged[1] is None else w.logged[1])
    named = _synced_copies(tail)
    out: dict[str, tuple[str, str]] = {}
    for node_id, (ts, rel, stat) in last.items():
        if written.get(node_id, -1.0) >= ts or node_id in still_open:
            continue
        e = entries.get(node_id)
        if rel is None:
            if e is not None:
                out[node_id] = ("added", e.path)
        elif e is None:
            out[node_id] = ("gone", rel)
        elif e.path != rel and e.path in named.get((node_id, ts), ()):
            # another copy of the id the line put too: one copy's file gone is no move onto
            # the other (session 40: a fresh process told one), nor its stat this file's
            continue
        elif stat is not None and e.path != rel:
            out[node_id] = ("moved", rel)
        elif stat is not None and stat[:2] != (e.mtime_ns, e.size):
            _mtime_ns, size, crc = stat
            same_size = crc is not None and size == e.size
            out[node_id] = (f"{TOUCHED} {size} {crc}" if same_size else "changed", rel)
    return out


def holds_logged(root: str, rel: str, logged: list[Logged]) -> bool:
    """Whether the file at ``rel`` holds the bytes one of the commit lines' ``check``
    describes (False when none says, or the file cannot be read)."""
    checks = [check for check, _ts in logged if check is not None]
    if not checks:
        return False
    parent, name = _split(rel)
    try:
        with fsops.Dir(root, parent) as d:
            return any(_holds(d, name, check) for check in checks)
    except (OSError, UnsafePathError):
        return False


def _safe_temp(tmp: object, name: str) -> bool:
    return (
        isinstance(tmp, str)
        and "/" not in tmp
        and fsops.is_temp_name(tmp)
        and tmp.startswith(f".{name}.")
        and len(tmp) < 512
    )


def _split(rel: str) -> tuple[str, str]:
    """(folder, name) of a path under the root; the folder of a top-level one is the root
    (``""``): a durable write making ``archive/`` fsynced a folder named ``archiv``."""
    cut = rel.rfind("/")
    return (rel[:cut], rel[cut + 1 :]) if cut >= 0 else ("", rel)


def _folder_order(rels: Sequence[str], size: int) -> Sequence[int]:
    """The order in which a commit handles the files ``rels``: their own (a ``range``),
    unless they lie in more folders than a :class:`~md_cg.fsops.FolderCache` of ``size``
    keeps open; then grouped by folder (a stable sort), so that each folder is opened
    once per pass over them rather than once per file."""
    if len(rels) <= size:
        return range(len(rels))
    parents = [rel[: rel.rfind("/")] for rel in rels]
    if len(set(parents)) <= size:
        return range(len(rels))
    return sorted(range(len(rels)), key=parents.__getitem__)


def _fsync_folder(root: str, rel: str, missing_ok: bool = False) -> None:
    try:
        d = fsops.Dir(root, rel)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        if not missing_ok:
            raise
        return
    with d:
        d.fsync()


def _remove_temps(puts: Sequence[Put], temps: Sequence[str | None], dirs: fsops.FolderCache) -> None:
    """Remove the temp files written so far (None: not written)."""
    for put, tmp in zip(puts, temps, strict=False):
        if tmp is None:
            continue
        try:
            d = dirs.get(_split(put.rel)[0])  # opened again if the cache closed it
        except (OSError, UnsafePathError):
            # the folder is gone (its temp file with it), or it is a symlink now and
            # is not entered: the others are still removed, the first error stands
            continue
        with contextlib.suppress(OSError):
            d.unlink(tmp)


# -- reading ----------------------------------------------------------------------


@dataclass
class Tail:
    """Records appended since a cursor's offsets, per shard in file order."""

    by_shard: dict[str, list[dict[str, Any]]]
    offsets: dict[str, int]
    missing: list[str]
    bad_lines: int
    unsafe: set[str]
    #: shard name -> its unreadable lines in this tail (those with any)
    damaged: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.by_shard and not self.missing


def read_tail(root: str, offsets: dict[str, int]) -> Tail:
    """Read every shard from its known offset (whole lines only)."""
    try:
        d = fsops.open_shards(root, LOG_REL)
    except UnsafePathError:
        return _tail_in(None, offsets, {LOG_REL})
    return _tail_in(d, offsets, set())


def look(root: str, offsets: dict[str, int], name: str) -> tuple[os.stat_result | None, Tail]:
    """The ``lstat`` of ``.mdcg/<name>`` (None when absent) and :func:`read_tail`, in that
    order, through one walk to ``.mdcg/`` (a freshness check makes both)."""
    return _look(root, offsets, name, None)


def _look(
    root: str, offsets: dict[str, int], name: str, watch: LogWatch | None
) -> tuple[os.stat_result | None, Tail]:
    """:func:`look`; with ``watch``, the folders and the log folder's stat (taken
    before its listing) are offered to it, to answer the next look quickly."""
    try:
        meta = fsops.Dir(root, paths.META_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return None, _tail_in(None, offsets, set())
    except UnsafePathError:
        return None, _tail_in(None, offsets, {LOG_REL})
    with meta:
        try:
            st: os.stat_result | None = meta.lstat(name)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        try:
            log = meta.sub(paths.LOG_DIR)
        except (FileNotFoundError, NotADirectoryError):
            return st, _tail_in(None, offsets, set())
        except UnsafePathError:
            return st, _tail_in(None, offsets, {LOG_REL})
        seen = watch.seen(meta, log) if watch is not None else None
    names: list[str] = []
    tail = _tail_in(log, offsets, set(), names)
    if seen is not None and watch is not None:
        watch.settle(seen, tail, names)
    return st, tail


def _tail_in(
    d: fsops.Dir | None, offsets: dict[str, int], unsafe: set[str], listed: list[str] | None = None
) -> Tail:
    """Read every shard of the open log folder ``d`` (None: there is none) from its offset.

    ``listed``, when given, receives the shard names the folder held."""
    new_offsets = dict(offsets)
    by_shard: dict[str, list[dict[str, Any]]] = {}
    bad = 0
    damaged: dict[str, int] = {}
    names: list[str] = []
    if d is not None:
        with d:
            names = fsops.shard_names(d)
            for name in names:
                start = offsets.get(name, 0)
                try:
                    read = _read_from(d, name, start)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except (UnsafePathError, PermissionError):  # a special file, or one we may not read
                    unsafe.add(name)
                    continue
                if read is None:  # nothing new
                    new_offsets[name] = start
                    continue
                bad += read.bad_lines
                if read.bad_lines:
                    damaged[name] = read.bad_lines
                new_offsets[name] = read.end
                if read.records:
                    by_shard[name] = read.records
    if listed is not None:
        listed.extend(names)
    present = set(names)
    missing = [n for n in offsets if n not in present]
    for name in missing:
        new_offsets.pop(name, None)
    return Tail(by_shard, new_offsets, missing, bad, unsafe, damaged)


#: How long (ns) the log folder must have been left unchanged before :class:`LogWatch`
#: trusts its timestamps: well above the tick of a coarse file-system clock (1-10 ms).
SETTLE_NS = 100_000_000
_QUICK = os.stat in os.supports_dir_fd and os.stat in os.supports_follow_symlinks


@dataclass
class _Seen:
    """The log folder as one full look found it (:class:`LogWatch`'s stamp)."""

    meta_fd: int
    log_fd: int
    meta_id: tuple[int, int]
    log_stat: tuple[int, int, int, int]  # dev, ino, mtime_ns, ctime_ns
    pid: int
    names: frozenset[str] = frozenset()


class LogWatch:
    """Answers "nothing new in the log" with ``lstat`` calls alone, when that is certain.

    A full look (:func:`look`) walks to ``.mdcg/``, lists the log folder and
    ``lstat``\\ s every shard. Records are only ever appended to shards, and a
    shard only appears or goes by a rename or an unlink in the log folder,
    which moves the folder's ctime and mtime. So when a full look read every
    listed shard to its end with nothing unsafe, and the folder's timestamps
    had by then been still for :data:`SETTLE_NS` (a change made after the look
    gets a later timestamp even from a coarse clock) and are sub-second (a
    file system with whole-second times is never trusted), the next look may
    skip the walk and the listing. It checks that ``.mdcg`` is still the
    folder it holds open (device and inode, by ``lstat``: no symlink), that
    ``log`` in it is the same folder with the same timestamps, and that no
    shard grew past the cursor; then it answers an empty tail, which is what
    the full look would read, beside the snapshot's ``lstat``. Anything else
    -- a new, removed or grown shard, a replaced folder, cursor offsets other
    than the shards seen, a fork -- takes the full look.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self._meta_path = f"{root}/{paths.META_DIR}"
        self._seen: _Seen | None = None
        #: full looks and quick answers given (for tests and measurements)
        self.full = 0
        self.quick = 0

    def look(self, offsets: dict[str, int], name: str) -> tuple[os.stat_result | None, Tail]:
        """:func:`look` (``.mdcg/<name>``'s lstat and the log from ``offsets``), quickly when certain."""
        quick = self._quiet(offsets, name)
        if quick is not None:
            self.quick += 1
            return quick
        self.full += 1
        self.forget()
        return _look(self.root, offsets, name, self if _QUICK else None)

    def seen(self, meta: fsops.Dir, log: fsops.Dir) -> _Seen | None:
        """The stamp of the log folder ``log`` in ``meta``, taken before it is listed
        (None when its timestamps cannot be trusted yet)."""
        now = time.time_ns()
        m, lg = os.fstat(meta.fd), os.fstat(log.fd)
        newest = max(lg.st_mtime_ns, lg.st_ctime_ns)
        if now - newest < SETTLE_NS or newest % 1_000_000_000 == 0:
            return None  # changed lately, or whole-second times: no shortcut
        meta_fd = os.dup(meta.fd)
        try:
            log_fd = os.dup(log.fd)
        except BaseException:
            os.close(meta_fd)
            raise
        return _Seen(
            meta_fd,
            log_fd,
            (m.st_dev, m.st_ino),
            (lg.st_dev, lg.st_ino, lg.st_mtime_ns, lg.st_ctime_ns),
            fsops.current_pid(),
        )

    def settle(self, seen: _Seen, tail: Tail, names: list[str]) -> None:
        """Keep ``seen`` when the look read every listed shard, nothing unsafe."""
        if not tail.unsafe and set(names) == tail.offsets.keys():
            seen.names = frozenset(names)
            self._seen = seen
        else:
            _close_seen(seen)

    def _quiet(self, offsets: dict[str, int], name: str) -> tuple[os.stat_result | None, Tail] | None:
        s = self._seen
        if s is None or s.pid != fsops.current_pid() or offsets.keys() != s.names:
            return None
        try:
            m = os.lstat(self._meta_path)
            if (m.st_dev, m.st_ino) != s.meta_id or not statmod.S_ISDIR(m.st_mode):
                return None
            try:
                st: os.stat_result | None = os.lstat(name, dir_fd=s.meta_fd)
            except (FileNotFoundError, NotADirectoryError):
                st = None
            lg = os.lstat(paths.LOG_DIR, dir_fd=s.meta_fd)
            if (lg.st_dev, lg.st_ino, lg.st_mtime_ns, lg.st_ctime_ns) != s.log_stat:
                return None
            log_fd = s.log_fd
            for shard in s.names:
                sh = os.lstat(shard, dir_fd=log_fd)
                if not statmod.S_ISREG(sh.st_mode) or sh.st_size > offsets[shard]:
                    return None
        except OSError:
            return None
        return st, Tail({}, dict(offsets), [], 0, set())

    def forget(self) -> None:
        """Drop the stamp (the next look is a full one) and close the folders it holds."""
        seen, self._seen = self._seen, None
        if seen is not None and seen.pid == fsops.current_pid():
            _close_seen(seen)

    def close(self) -> None:
        self.forget()


def _close_seen(seen: _Seen) -> None:
    for fd in (seen.meta_fd, seen.log_fd):
        with contextlib.suppress(OSError):
            os.close(fd)


def _read_from(d: fsops.Dir, name: str, start: int) -> fsops.ShardRead | None:
    """The whole lines of shard ``name`` after ``start``; None when a plain file holds
    nothing after it (one ``lstat``: the usual answer of a write's catch-up)."""
    st = d.lstat(name)
    if statmod.S_ISREG(st.st_mode) and st.st_size <= start:
        return None
    return fsops.read_shard_in(d, name, start)


#: Tries of a temp file whose folder another process removed each time.
_FOLDER_TRIES = 8


def fresh_cursor(root: str) -> Cursor:
    """A cursor at the end of every shard (for a rebuild): the offset just after each
    one's last whole line, and the special files found on the way (for ``health()``)."""
    tail = read_tail(root, {})
    return Cursor(offsets=tail.offsets, unsafe=set(tail.unsafe))


def _pairs(value: Any, width: int) -> list[tuple[str, ...]] | None:
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, list) or len(item) != width or not all(isinstance(x, str) for x in item):
            return None
        out.append(tuple(item))
    return out


def _checked(items: list[tuple[str, ...]] | None) -> bool:
    return items is not None and all(paths.rel_problem(item[1]) is None for item in items)


def parse_commit(shard: str, rec: dict[str, Any]) -> Commit | None:
    """A ``commit`` or ``sync`` record as a :class:`Commit`, or None when malformed/unsafe."""
    seq = rec.get("seq")
    puts = _pairs(rec.get("put", []), 3 if rec.get("op") == "commit" else 2)
    dels = _pairs(rec.get("del", []), 2)
    if not isinstance(seq, int) or not _checked(puts) or not _checked(dels):
        return None
    assert puts is not None and dels is not None
    full = tuple((p[0], p[1], p[2] if len(p) == 3 else "") for p in puts)
    commit = rec.get("op") == "commit"
    checks = _checks(rec.get("check"), len(full)) if commit else None
    return Commit(
        shard,
        seq,
        full,
        tuple((d[0], d[1]) for d in dels),
        checks,
        _seconds(rec.get("ts")),
        replaces=_stamps(rec.get("replaces"), len(full)) if commit else None,
        removes=_stamps(rec.get("removes"), len(dels)) if commit else None,
        made=_inodes(rec.get("made"), len(full)) if commit else None,
        aside=_asides(rec.get("aside"), dels) if commit else None,
        durable=rec.get("durable") is True,
    )


def _asides(value: Any, dels: list[tuple[str, ...]]) -> tuple[str | None, ...] | None:
    """A commit line's ``aside`` list (a temp name or null per del); None when absent or
    malformed -- a name that is not a temp name beside its del's file included."""
    if not isinstance(value, list) or len(value) != len(dels):
        return None
    if not all(a is None or _safe_temp(a, _split(d[1])[1]) for a, d in zip(value, dels, strict=True)):
        return None
    return tuple(value)


def _inodes(value: Any, count: int) -> tuple[int, ...] | None:
    """A commit line's ``made`` list (an inode per put); None when absent or malformed."""
    if not isinstance(value, list) or len(value) != count:
        return None
    if not all(type(x) is int and x >= 0 for x in value):
        return None
    return tuple(value)


def _seconds(ts: Any) -> float | None:
    """A line's stamp in seconds: the shard writer's integer nanoseconds, or a stamp
    already in seconds; None when it is neither."""
    if type(ts) is int and 1e15 < ts < 1e20:
        return ts / 1e9
    if type(ts) in (int, float) and -1e11 < ts < 1e11:
        return float(ts)
    return None


def _checks(value: Any, count: int) -> tuple[tuple[int, int], ...] | None:
    """A commit line's ``check`` list: ``[size, crc32]`` per put. Absent or
    malformed: None, and recovery trusts the temp files as earlier versions did."""
    if not isinstance(value, list) or len(value) != count:
        return None
    out = []
    for item in value:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and all(type(x) is int and 0 <= x < 1 << 32 for x in item)
        ):
            return None
        out.append((item[0], item[1]))
    return tuple(out)


def replay(cursor: Cursor, tail: Tail) -> dict[str, list[str]]:
    """Advance ``cursor`` over ``tail``; return every touched id with its candidate paths.

    Touched: the ids of new ``sync`` records, of commits that closed, of
    commits still open (they may be mid-write), and of open commits whose
    shard was removed.
    """
    touched: dict[str, list[str]] = {}

    def touch(items: dict[str, list[str]]) -> None:
        for node_id, rels in items.items():
            touched.setdefault(node_id, []).extend(rels)

    cursor.bad_lines += tail.bad_lines
    for shard, n in tail.damaged.items():
        cursor.damaged[shard] = cursor.damaged.get(shard, 0) + n
    cursor.unsafe |= tail.unsafe
    # Commits closed by a record read before the commit itself: another process
    # recovered a dead writer's commit, and its shard sorts before the writer's.
    # (Both lines are in this tail: the commit was written before its closing.)
    closed: set[tuple[str, int]] = set()
    for shard, recs in tail.by_shard.items():
        for rec in recs:
            _replay_one(cursor, shard, rec, touch, closed)
    for shard in tail.missing:
        cursor.damaged.pop(shard, None)  # its damage went with it
        # A shard is removed only by maintenance, after its commits were closed.
        for key in [k for k in cursor.pending if k[0] == shard]:
            touch(cursor.pending.pop(key).touched())
            cursor.dead.discard(key)
        touch(cursor.legacy.pop(shard, {}))
    for key, c in cursor.pending.items():
        if key not in cursor.dead:
            touch(c.touched())
    for pending in cursor.legacy.values():
        touch(pending)
    cursor.offsets = tail.offsets
    return touched


def _replay_one(
    cursor: Cursor,
    shard: str,
    rec: dict[str, Any],
    touch: Callable[[Any], None],
    closed: set[tuple[str, int]],
) -> None:
    op = rec.get("op")
    if op in ("commit", "sync"):
        c = parse_commit(shard, rec)
        if c is None:
            _bad_record(cursor, shard)
        elif op == "sync":
            touch(c.touched())
        elif c.key in closed:
            closed.discard(c.key)  # already closed by a record read earlier in this tail
            touch(c.touched())
        else:
            cursor.pending[c.key] = c
    elif op in ("done", "recovered"):
        key = (rec.get("shard", shard), rec.get("c"))
        c = cursor.pending.pop(key, None)  # type: ignore[arg-type]
        cursor.dead.discard(key)
        if c is not None:
            touch(c.touched())
        elif op == "done" and "c" not in rec:
            touch(cursor.legacy.pop(shard, {}))  # a done of the earlier format
        elif isinstance(key[0], str) and isinstance(key[1], int):
            closed.add(key)  # type: ignore[arg-type]
    elif op in ("put", "del"):
        node_id, rel = rec.get("id"), rec.get("path")
        if isinstance(node_id, str) and paths.rel_problem(rel) is None:
            cursor.legacy.setdefault(shard, {}).setdefault(node_id, []).append(rel)  # type: ignore[arg-type]
        else:
            _bad_record(cursor, shard)
    else:
        _bad_record(cursor, shard)


def _bad_record(cursor: Cursor, shard: str) -> None:
    cursor.bad_records += 1
    cursor.damaged[shard] = cursor.damaged.get(shard, 0) + 1


def find_dead(root: str, cursor: Cursor, own_failed: Iterable[Commit] = ()) -> list[Commit]:
    """Open commits that will not finish: their writer is gone (its shard is no
    longer locked), or it is this process and the commit failed midway."""
    failed = {c.key for c in own_failed}
    alive: dict[str, bool] = {}
    dead = []
    for c in cursor.pending.values():
        if c.key in failed:
            dead.append(c)
            continue
        if c.shard not in alive:
            alive[c.shard] = fsops.owner_alive(root, f"{LOG_REL}/{c.shard}")
        if not alive[c.shard]:
            dead.append(c)
    return dead


def mark_dead(cursor: Cursor, commits: Iterable[Commit]) -> dict[str, list[str]]:
    """Record commits as dead; return the ids of those newly marked (to resolve once more)."""
    touched: dict[str, list[str]] = {}
    for c in commits:
        if c.key not in cursor.dead:
            cursor.dead.add(c.key)
            for node_id, rels in c.touched().items():
                touched.setdefault(node_id, []).extend(rels)
    return touched
