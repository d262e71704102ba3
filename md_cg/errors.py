"""Exceptions raised by md-cg.

Every error the library raises on purpose derives from :class:`MdcgError`.
Subclasses carry the offending input as attributes (``path``, ``node_id``,
``field``, ``value``) and their message names it and, where possible, says
how to fix it. The CLI and the MCP server turn these into one-line errors;
anything else that escapes is a bug or an infrastructure failure (disk,
permissions) and is never swallowed.

This module imports nothing from the rest of the package.
"""

from __future__ import annotations

import errno
import os
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple


class MdcgError(Exception):
    """Base class of every error md-cg raises on purpose.

    Every one survives pickling (a worker process of ``multiprocessing`` or
    ``concurrent.futures`` sends it back so): the same type, message and attributes.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's own rebuilds by calling the class with ``args`` -- the message --,
        # which the subclasses' __init__ take for their first argument (a node id, a path).
        return (_rebuilt, (type(self), self.args), dict(vars(self)))


def _rebuilt(cls: type[MdcgError], args: tuple[Any, ...]) -> MdcgError:
    """An error of ``cls`` with ``args``, its __init__ not run (:meth:`MdcgError.__reduce__`;
    its attributes follow as the pickle's state)."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    return exc


class FileError(MdcgError):
    """An error about one file or folder: ``path`` names it, ``reason`` says what is wrong.

    Subclasses set :attr:`what` to say which kind of file it is in the message.
    """

    what = ""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {self.what}{reason}")
        self.path = str(path)
        self.reason = reason


class InvalidNodeError(MdcgError, ValueError):
    """A node (or a field of it) cannot be stored as given.

    ``field`` names the offending field, ``value`` holds what was given and
    ``node_id`` the node it belongs to, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        value: object = None,
        node_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.field = field
        self.value = value
        self.node_id = node_id


class InvalidArgumentError(MdcgError, ValueError):
    """An argument of a call is out of range or of the wrong kind (``k=0``, a bad
    search context, an unknown benchmark kind...). ``name`` is the argument."""

    def __init__(self, message: str, *, name: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.name = name
        self.value = value


class OtherMemoriesError(InvalidArgumentError):
    """A ``verb`` (``delete``, ``forget``) of ``node_id`` refused: ``others``, files of the
    id in the caller's scope, hold a different memory than ``shown`` (the file ``get``
    serves), and would go with it (``name == "all_copies"``). What it says names the
    library's and the CLI's ways to settle it; the MCP server says it to an agent, who has
    neither (session 42)."""

    def __init__(self, message: str, *, node_id: str, verb: str, shown: str, others: tuple[str, ...]) -> None:
        super().__init__(message, name="all_copies", value=node_id)
        self.node_id, self.verb, self.shown, self.others = node_id, verb, shown, others


class UnsafeIdError(InvalidNodeError):
    """A node id that is not a safe file-name stem."""


class UnknownLayerError(InvalidNodeError):
    """A layer name outside the fixed set of layers."""


#: Why a node file this process may not read (permission bits) is unusable: a
#: :class:`MalformedNodeFileError` reason (``md_cg.index.PERMISSION_DENIED``). It quotes
#: nothing of the file, and the file is not malformed: told as it is to a scoped handle
#: (:func:`withheld_problem` is not), and ``mdcg search`` lists such a hit.
PERMISSION_DENIED = "cannot be read: permission denied"


class MalformedNodeFileError(MdcgError):
    """A ``.md`` file that cannot be read as a node.

    ``path`` is the file, ``line`` the 1-based line of the (first) problem
    when known. ``problems`` lists every problem found in the file, each a
    :class:`FileProblem` (line or None, message); ``reason`` and the message
    name them all. Either give ``reason`` (one problem, at ``line``) or
    ``problems``. ``node_id``: the id the file's frontmatter names when it was read that
    far (a field of it invalid), else None (``health`` fills its ``unreadable_file`` row's
    node with it).
    """

    def __init__(
        self,
        path: str | Path,
        reason: str = "",
        *,
        line: int | None = None,
        problems: list[FileProblem] | None = None,
        node_id: str | None = None,
    ) -> None:
        if not problems:
            problems = [FileProblem(line, reason)]
        if len(problems) == 1:
            line, reason = problems[0]
            where = f"{path}:{line}" if line is not None else str(path)
        else:
            line = problems[0].line
            listed = "; ".join(f"line {p.line}: {p.message}" if p.line else p.message for p in problems)
            reason = f"{len(problems)} problems: {listed}"
            where = str(path)
        super().__init__(f"{where}: {reason}")
        self.path = str(path)
        self.reason = reason
        self.line = line
        self.problems = list(problems)
        self.node_id = node_id


class NodeNotFoundError(MdcgError, KeyError):
    """No node with this id is in the store, or none the caller may read now.

    ``hidden`` says why a stored node is not readable when saying so leaks
    nothing: ``"archived"``, ``"expired"`` or ``"lost"`` (its file moved, deleted or
    broken by hand since the last sync: :func:`lost_file_error`); None for an unknown id and for a
    node outside the caller's scope (whose error is that of an unknown id).
    ``fix``: what the library's caller can do about it (an expired memory's
    write says how to renew it), kept apart from ``hint`` so that the CLI and
    the MCP server can say it in their own terms. ``shown``: how the message writes the
    id (default its ``repr``; escaped when it names a twin spelt alike, NFC and NFD).
    """

    def __init__(
        self, node_id: str, hint: str = "", *, hidden: str | None = None, fix: str = "", shown: str = ""
    ) -> None:
        msg = f"no node with id {shown or repr(node_id)} in this store"
        said = "; ".join(part for part in (hint, fix) if part)
        if said:
            msg += f" ({said})"
        super().__init__(msg)
        self.node_id = node_id
        self.hint = hint
        self.hidden = hidden
        self.fix = fix

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


def lost_file_error(node_id: str, path: str | None, reason: str = "") -> NodeNotFoundError:
    """The error of an id the index holds (or held, until it followed the log) at ``path``
    whose file is not there as a memory any more: moved, deleted or broken by hand (an
    Obsidian drag, a ``rm``, an edit) since the last sync. Every lookup and write of the
    id raises it, ``add`` of the id too, until a sync takes the change in: "no node with
    id" alone made a person believe the memory was gone (and ``forget`` refused) while it
    was still on disk, and an ``add`` under the id made a second file of it.
    ``hidden`` is ``"lost"``; ``reason``: why the file is unusable (empty: gone). ``path``
    None: not named (a scoped handle may not learn of another scope's files, and
    ``forget`` cannot tell whose it was), nor the reason (it may quote the file)."""
    if path is None:
        told = "its file was moved, deleted or changed outside md-cg since the last sync"
    elif reason:
        told = f"its file {path} was changed outside md-cg and is unusable: {reason}"
    else:
        told = f"its file {path} was moved or deleted outside md-cg since the last sync"
    fix = SYNC_FIX
    if reason and path is not None:
        fix = FIX_THEN_SYNC
    return NodeNotFoundError(node_id, told, hidden="lost", fix=fix)


#: The ``fix`` of a :func:`lost_file_error`: the MCP server says it with its own tools
#: (:data:`md_cg.mcp_server.LOST_FIXES`)
SYNC_FIX = "run `mdcg sync` (MdCG.sync()) to take that in, then try again"
#: The ``fix`` of a :func:`lost_file_error` that names the unusable file
FIX_THEN_SYNC = "fix it, then run `mdcg sync` (MdCG.sync())"
#: The ``fix`` of a :func:`lost_file_error` to a scoped caller whose own sync does not take
#: the change in: the memory's scope is not known to be its own
UNSCOPED_SYNC_FIX = (
    "a sync without a scope takes that in (`mdcg sync`, MdCG.sync() on an unscoped handle), then try again"
)


def left_out_unreadable(what: str, node_id: str, exc: MalformedNodeFileError, *, stacklevel: int) -> None:
    """Warn (``RuntimeWarning``) that ``what`` -- a read serving many memories at once
    (``inject``, ``iter_nodes``, ``organize``'s and ``add_unique``'s look for the same
    text) -- left out ``node_id``, whose file ``exc`` says no longer reads as a memory: a
    hand edit broke it since the index read it (no sync since). The warning names the
    id and the file, both of which the caller saw in the index, never ``exc``'s reason:
    that may quote the file's new values (an ``agent_scope`` naming another agent).
    ``stacklevel``: 1 is the caller's line, 2 its caller's, as ``warnings.warn`` counts from
    its own caller. Before session 38 the one broken file failed the whole call."""
    warnings.warn(
        f"md-cg: memory {node_id!r} left out of {what}: its file {exc.path} no longer reads "
        "as a memory (changed by hand since the index read it); fix it (`mdcg health` says "
        "what is wrong), then run `mdcg sync`",
        RuntimeWarning,
        stacklevel=stacklevel + 1,
    )


def withheld_problem(exc: MalformedNodeFileError, node_id: str | None) -> MalformedNodeFileError:
    """What a scoped handle is told, in place of ``exc``, of a memory file that no longer
    reads as a memory (a hand edit broke it since the index read it): the file and its line,
    and ``node_id`` (the id the index holds there), both of which the handle saw in the
    index -- never ``exc``'s reason, which may quote the file's new values (an
    ``agent_scope: [alice, bob]`` naming other agents). Before session 39 a scoped ``get``,
    ``update``, ``archive``, ``rename`` or ``delete`` of such a memory, and a scoped export,
    quoted it. An unscoped handle (the store's owner) is told ``exc`` itself."""
    who = f"memory {node_id!r}" if node_id is not None else "the memory"
    reason = (
        f"{who} no longer reads as a memory: its file was changed by hand since the index read "
        "it; what is wrong is not told to a scoped handle (it may quote the file's values) -- "
        "`mdcg health` without a scope names it; fix the file, then run `mdcg sync`"
    )
    return MalformedNodeFileError(exc.path, reason, line=exc.line, node_id=node_id)


class DuplicateIdError(MdcgError):
    """``add`` was asked to create a node whose id already exists (``archived``: held by
    an archived node, which ``overwrite`` never replaces; ``untracked``: by a file the
    index does not know yet -- copied in, or brought by git without a hook -- which
    ``sync`` takes in). ``plain``: the refusal without a message of its own -- the id is
    a memory at ``path`` that an update changes and an overwrite replaces; any other
    (a file there holding another id, or one that cannot be read) carries its own.
    ``unreadable``: a file of the id (at ``path``; ``""`` to a scoped caller, who is not
    told whose it is) cannot be read as a memory, and may be any scope's."""

    def __init__(
        self,
        node_id: str,
        path: str,
        message: str | None = None,
        *,
        archived: bool = False,
        untracked: bool = False,
        unreadable: bool = False,
    ) -> None:
        if message is None and untracked:
            message = (
                f"node id {node_id!r}: the file {path} holds it, which the index does not know yet "
                "(copied in, or brought by git); sync() takes it in, then update it -- or add "
                "again with overwrite to replace it"
            )
        super().__init__(
            message
            or f"node id {node_id!r} already exists at {path}; update that node, "
            "or add again with overwrite to replace it"
        )
        self.node_id = node_id
        self.path = path
        self.archived = archived
        self.untracked = untracked
        self.unreadable = unreadable
        self.plain = message is None and not untracked and not archived


class IdCollisionError(DuplicateIdError):
    """A new id differs from an existing one only by case or Unicode normalisation.

    Such ids would be one file on macOS and Windows (case-insensitive,
    normalising file systems), so a folder that travels would lose one of them.
    ``existing`` None: the existing id is one the index dropped for its file moved,
    deleted or broken by hand (:func:`md_cg.engine.dropped_twin`), neither named nor its
    file -- a scoped handle may not learn of another scope's files; an unscoped caller
    is told both, as before the drop.
    """

    def __init__(
        self, node_id: str, existing: str | None, path: str, labels: tuple[str, str] | None = None
    ) -> None:
        """``labels``: how to print the two ids (:func:`md_cg.script.twin_labels`: escaped
        when they differ only in Unicode form, as ``'Caf\\u00e9'``, ``'Cafe\\u0301'``); their
        ``repr`` when not given."""
        if existing is None:
            message = (
                f"node id {node_id!r} collides with an existing id whose file was moved, deleted or "
                "changed outside md-cg since the last sync: ids that differ only by letter case or "
                "Unicode normalisation are the same file on macOS and Windows; choose another id"
            )
        else:
            new, old = labels or (repr(node_id), repr(existing))
            message = (
                f"node id {new} collides with the existing id {old} ({path}): ids that "
                "differ only by letter case or Unicode normalisation are the same file on macOS and "
                "Windows; choose another id or change the existing node"
            )
        super().__init__(node_id, path, message)
        self.existing = existing


class NodeHasIncomingEdgesError(MdcgError):
    """``delete`` refused: other nodes have edges to this one."""

    #: At most this many sources are named in the message (``incoming`` holds them all).
    LISTED = 20

    def __init__(self, node_id: str, incoming: Sequence[tuple[str, str]]) -> None:
        listed = self.sources(incoming)
        super().__init__(
            f"node {node_id!r} has incoming edges from {listed}; "
            "delete with force=True to leave them dangling, or remove the edges first"
        )
        self.node_id = node_id
        self.incoming = tuple(incoming)

    @classmethod
    def sources(cls, incoming: Sequence[tuple[str, str]]) -> str:
        """``src (type), ...`` of the first :data:`LISTED` edges, then how many more."""
        listed = ", ".join(f"{src} ({etype})" for src, etype in incoming[: cls.LISTED])
        more = len(incoming) - cls.LISTED
        return listed + (f" and {more:,} more" if more > 0 else "")


class InvalidVerdictError(MdcgError, ValueError):
    """A verdict outside the known verdicts, or a feedback state outside the four states."""


class LockTimeoutError(MdcgError, TimeoutError):
    """A lock could not be acquired in time; nothing was changed."""

    def __init__(self, path: str | Path, timeout: float, what: str) -> None:
        super().__init__(
            f"could not take the {what} lock {path} within {timeout:g}s; "
            "another process is holding it (retry later or raise the timeout)"
        )
        self.path = str(path)
        self.timeout = timeout


class ReadOnlyStoreError(MdcgError):
    """A write was attempted on a store opened with ``read_only=True``."""


class StoreClosedError(MdcgError):
    """The store was used after ``close()``."""


class SnapshotDamageError(MdcgError, ValueError):
    """A part of the index snapshot read after the open failed its checksum or checks.

    Raised by the lazily checked parts of a snapshot (:mod:`md_cg.snapshot`)
    where that part cannot be rebuilt from the files on the spot; the store
    repairs what it can (entries from their files, the text index from the
    files) and reports the damage in ``health()``. ``section``: ``rows`` or
    ``text``; ``chunk``: the number of the damaged chunk.
    """

    def __init__(self, section: str, chunk: int, reason: str) -> None:
        super().__init__(f"the index snapshot's {section} section is damaged (chunk {chunk}: {reason})")
        self.section = section
        self.chunk = chunk
        self.reason = reason


class NotAStoreError(FileError):
    """A path that is not (and may not become) an md-cg store.

    ``link``: ``(what, fix)`` when the path is a symlink that leads to no folder
    (:func:`md_cg.engine.broken_link`), so that the CLI says it with its own ``--root``
    hint in the library's words; else None."""

    link: tuple[str, str] | None = None


class ProtectedNodeError(MdcgError):
    """An operation refused because the node is protected (``anchor/``)."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(reason)
        self.node_id = node_id


class UnsafePathError(FileError):
    """A path under the store that md-cg refuses to use: a symlink at some component,
    something other than a regular file or folder, or a name outside the path rules.

    md-cg never follows a symlink below the store root; ``health()`` lists them.
    """


class SynonymFileError(FileError, ValueError):
    """A synonym file that cannot be used; ``path`` is the file, ``reason`` the problem."""

    what = "invalid synonym file: "


class UnknownBigDomainError(MdcgError, ValueError):
    """A big-domain name outside ``domains`` and not ``auto``; ``domain`` is what was given."""

    def __init__(self, domain: object, domains: Sequence[str], auto: str = "auto") -> None:
        super().__init__(f"unknown big domain {domain!r}; expected {auto!r} or one of: {', '.join(domains)}")
        self.domain = domain


class FileProblem(NamedTuple):
    """One problem of a malformed node file: its 1-based ``line`` (None when
    the problem is not on one line, e.g. a missing key) and a ``message``."""

    line: int | None
    message: str


class MarkerFileError(FileError, ValueError):
    """A retention marker file that cannot be used; ``path`` is the file, ``reason`` the problem."""

    what = "invalid retention marker file: "


class DataFileError(FileError, ValueError):
    """A data file (shipped under ``md_cg/data/`` or kept by a store) that
    cannot be used as it is; ``path`` is the file, ``reason`` the problem."""


class MergeError(FileError):
    """A node file could not be merged at all (the text merge tool is missing or
    refused the content). ``path`` is the file being merged."""


class DemoError(MdcgError):
    """``mdcg demo`` cannot run in the folder it was given."""


class EditConflictError(MdcgError):
    """A node changed while it was being edited (``mdcg edit``): nothing was written.

    ``node_id`` names the node; ``kept`` is the file holding the edited text,
    so that it is not lost.
    """

    def __init__(self, node_id: str, kept: str) -> None:
        super().__init__(
            f"node {node_id!r} was changed by another writer while it was being edited; nothing was "
            f"written; the edited text is kept in {kept} (compare it with the node as stored now)"
        )
        self.node_id = node_id
        self.kept = kept


class ChangedOnDiskError(MdcgError):
    """A node's file changed on disk (an edit by hand, another program) between md-cg's
    read of it and the write of the change, and the change could not be applied again to
    the file as it is now -- it sets a value the edit changed too (a body given whole), or
    the file kept changing: nothing was written, the edit is kept. ``node_id`` names the
    node, ``path`` its file (relative to the store)."""

    def __init__(self, node_id: str, path: str) -> None:
        super().__init__(
            f"node {node_id!r}: its file {path} changed on disk since it was read (an edit by hand or "
            "another program); nothing was written and the edit is kept -- read the node again and "
            "repeat the change"
        )
        self.node_id = node_id
        self.path = path


class ImportSourceError(MdcgError):
    """A source of :func:`md_cg.transfer.import_nodes` cannot be imported: unreadable,
    bad records, or ids taken. ``problems`` lists the records at fault
    (:class:`md_cg.transfer.BadRecord`: where, id, reason); the message names the
    source and the first of them."""

    def __init__(self, message: str, problems: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems)


class OrganizeApplyError(MdcgError):
    """An organise apply that cannot go ahead (unknown run, a receipt, a failed
    or already applied dry run, bad decisions); ``run_id`` names the dry run."""

    def __init__(self, run_id: str | None, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id


#: ``errno`` values of a full disk or quota.
NO_ROOM = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


def is_out_of_room(exc: BaseException) -> bool:
    """True for the ``OSError`` of a full disk or quota: the machine's state, not a bug.

    A write that fails so has changed nothing stored (the journal removes its
    temp files and cuts a torn log line back); reads go on without recording
    their access (docs/reliability.md, row 18).
    """
    return isinstance(exc, OSError) and exc.errno in NO_ROOM


#: The note (``exc.__notes__``) the journal adds to an error raised after a batch's commit
#: line was written and before all of its files were in place (a rename or unlink failed, or
#: was interrupted): part of the batch may be on disk, and the next recovery finishes it --
#: except over a file saved or edited since (another process's write of its ids, a hand edit:
#: :func:`md_cg.journal._later_ids`), which it leaves as it is. Until session 39 the note said
#: "the next recovery completes it", which such a file makes false.
LOGGED_NOTE = (
    "the batch was logged before this error and may be partly done: the next recovery finishes "
    "it, but not over a file saved or edited since (that memory is kept as it is then)"
)


#: The note the journal adds (instead of :data:`LOGGED_NOTE`) to an error raised after every
#: file of a write was in place (only the fsync of their folders failed, or was interrupted):
#: the write is done and closed -- no recovery redoes it -- but not known to be durable
#: (:meth:`md_cg.journal.Journal.commit`).
APPLIED_NOTE = (
    "every file of the write is in place and the write is closed; only the fsync of their "
    "folders failed: it is not known to be durable"
)


#: The note the journal adds (instead of :data:`APPLIED_NOTE`) when, every file of a write
#: in place and the fsync of their folders failed, the ``done`` line closing the write could
#: not be written either (a full disk): the write is done but open, and the next recovery --
#: which finds every file in place -- closes it (:meth:`md_cg.journal.Journal._sync_applied`).
#: Until session 39 such an error was noted :data:`LOGGED_NOTE` ("the next recovery completes
#: it", and to the CLI "may be partly done"), and a ``forget`` so stopped did not scrub.
OPEN_NOTE = (
    "every file of the write is in place, but the fsync of their folders failed (it is not known "
    "to be durable) and so did the line closing the write: the next recovery closes it"
)


def was_applied(exc: BaseException) -> bool:
    """True when ``exc`` came after every file of a write was in place (:data:`APPLIED_NOTE`,
    or :data:`OPEN_NOTE` when the write could not be closed either): the write is done (a
    power cut before the disk caught up may still undo part of it)."""
    notes = getattr(exc, "__notes__", ())
    return APPLIED_NOTE in notes or OPEN_NOTE in notes


def closed_since(exc: BaseException) -> None:
    """Say of ``exc``, noted :data:`OPEN_NOTE`, that its write is closed now (a recovery in
    the same call closed it: a ``forget``'s scrub compacts): the note becomes
    :data:`APPLIED_NOTE`, so that it never says "the next recovery closes it" of a write
    already closed."""
    notes = getattr(exc, "__notes__", None)
    if notes and OPEN_NOTE in notes:
        notes[notes.index(OPEN_NOTE)] = APPLIED_NOTE


def was_logged(exc: BaseException) -> bool:
    """True when ``exc`` interrupted a write after its commit line was logged: the journal's
    :data:`LOGGED_NOTE` (some of its files may have changed, and the next ``sync()`` -- or
    write of those ids -- finishes it once the store is writable, but not over a file saved
    or edited since) or :data:`APPLIED_NOTE` / :data:`OPEN_NOTE` (all of them changed:
    :func:`was_applied`). Either way "nothing was changed" would be false."""
    return LOGGED_NOTE in getattr(exc, "__notes__", ()) or was_applied(exc)


#: The note (``exc.__notes__``) the journal adds to an error raised while it finished an
#: earlier interrupted write (another process's logged commit, rolled forward before this
#: write or by a sync): that write may be partly done; the caller's own change was not made.
RECOVERY_NOTE = "an earlier interrupted write could not be finished: this call changed nothing of its own"


def was_recovering(exc: BaseException) -> bool:
    """True when ``exc`` stopped the finishing of an earlier interrupted write (the journal's
    :data:`RECOVERY_NOTE`): that write may be partly done and the next ``sync()`` finishes it
    once the store is writable; the call that met it made none of its own change (run it
    again after that sync)."""
    return RECOVERY_NOTE in getattr(exc, "__notes__", ())


#: The note (``exc.__notes__``) an :class:`~md_cg.logs.AppendLog` adds to an error raised
#: while appending the record of a change already made (a rename's audit record, an archive's
#: ``.mdcg/archive_log`` line, a retention decision): ``{log}`` is the log's folder.
RECORDED_NOTE = "the change was made before this error: only its record in {log} could not be written"
_RECORDED_HEAD, _RECORDED_TAIL = RECORDED_NOTE.split("{log}")


def recorded_note(log: str) -> str:
    """The :data:`RECORDED_NOTE` naming the log folder ``log`` (``.mdcg/audit``)."""
    return RECORDED_NOTE.format(log=log)


def record_failed(exc: BaseException) -> str | None:
    """The log folder (``.mdcg/audit``, ``.mdcg/archive_log``...) whose record of a change
    already made ``exc`` interrupted (its :data:`RECORDED_NOTE`), else None: the write
    itself landed -- "nothing was changed" would be false, and running it again would
    repeat it or fail -- only its record is missing."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(_RECORDED_HEAD) and note.endswith(_RECORDED_TAIL):
            return note[len(_RECORDED_HEAD) : len(note) - len(_RECORDED_TAIL)]
    return None


#: Variation selectors: they choose how the character before them is drawn (U+2764 U+FE0F).
VARIATION_SELECTORS = frozenset(map(chr, range(0xFE00, 0xFE10))) | frozenset(
    map(chr, range(0xE0100, 0xE01F0))
)

#: Characters that are not format characters (Unicode category Cf) yet show nothing: the
#: rest of Unicode's default-ignorable code points (combining grapheme joiner, Hangul
#: fillers, Khmer inherent vowels, Mongolian free variation selectors...) and the blank
#: Braille pattern U+2800. ``ops\u3164`` printed as ``ops``.
INVISIBLE_BLANKS = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2800\u3164\uffa0"
    "\U0001bca0\U0001bca1\U0001bca2\U0001bca3"
) | frozenset(map(chr, range(0xE0000, 0xE1000)))


def hidden_char(ch: str) -> bool:
    """Whether the character ``ch`` shows nothing where it stands: a format character
    (Unicode category Cf: a zero-width space, word joiner, byte-order mark, soft hyphen),
    a blank of :data:`INVISIBLE_BLANKS` or a variation selector. The one table of the
    invisible characters: :func:`md_cg.node.invisible_char` (new ids and tags) and
    :func:`shows_text` (blank queries and tags) both read it. It lives here, the lowest
    module, because :func:`check_query` needs it and this module imports no other."""
    return ch in INVISIBLE_BLANKS or ch in VARIATION_SELECTORS or unicodedata.category(ch) == "Cf"


#: Unicode categories of the other characters that show nothing on their own: controls,
#: spaces and line separators, and combining marks with no letter to sit on.
_UNSEEN = frozenset({"Cc", "Zs", "Zl", "Zp", "Mn", "Me"})


def shows_text(text: str) -> bool:
    """Whether ``text`` holds a character that shows on its own -- not a space, control or
    lone combining mark (:data:`_UNSEEN`), nor one :func:`hidden_char` calls invisible:
    one rule for what is blank, for a query (:func:`check_query`) and a tag
    (:func:`md_cg.node.unusable`): ``"\u200b\u200b"`` and ``"\u3164"`` print as nothing,
    as ``"   "`` does. (Before session 34 a query of Hangul fillers, blank Braille or
    tag characters was answered with 10 filler results: the id rule called them invisible,
    the query rule did not.)"""
    return any(
        not ch.isspace() and unicodedata.category(ch) not in _UNSEEN and not hidden_char(ch) for ch in text
    )


def check_query(query: object) -> str:
    """``query`` when it is a string with words in it, else :class:`InvalidArgumentError`
    naming it: ``search`` and ``inject`` refuse a blank query alike (nothing was asked;
    the similarity fill would answer it with filler) -- also one of invisible characters
    only (:func:`shows_text`: ``"\u200b\u200b"`` was answered with 10 filler results)."""
    if not isinstance(query, str):
        raise InvalidArgumentError(
            f"query must be a string, got {type(query).__name__}", name="query", value=query
        )
    if not shows_text(query):
        raise InvalidArgumentError("query is empty: give the words to search for", name="query", value=query)
    return query
