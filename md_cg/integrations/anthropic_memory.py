"""Claude's client-side memory tool (``memory_20250818``) backed by an md-cg store.

:class:`MdCGMemoryTool` subclasses the ``anthropic`` SDK's
``BetaAbstractMemoryTool`` (and :class:`AsyncMdCGMemoryTool` its async twin),
so it plugs into the SDK's tool runner::

    from anthropic import Anthropic
    from md_cg.integrations.anthropic_memory import MdCGMemoryTool

    with MdCGMemoryTool("memory") as memory:
        runner = Anthropic().beta.messages.tool_runner(
            model="claude-sonnet-4-5", max_tokens=2048, tools=[memory],
            messages=[{"role": "user", "content": "Remember that I like coffee"}],
        )
        for message in runner: ...

A folder is opened in :data:`DEFAULT_SCOPE`, the scope ``mdcg mcp`` serves in
by default (no agent, no workspace, sensitivity up to ``normal``); ``scope=``
picks another, ``scope=None`` sees every memory. The tool's ``/memories``
directory *is* the store folder, seen through the engine: ``/memories/<layer>/<id>.md`` (knowledge nodes in
``/memories/knowledge/<bucket>/<id>.md``). The six commands map onto the store:

* ``view`` of a folder lists its sub-folders and node files, two levels deep,
  with sizes, from the index (at most ``max_listing`` lines; ``view_range``
  pages through a longer listing, every page as bounded, its note naming the
  next page); ``view`` of a file shows the node file
  (frontmatter and body) with line numbers, honouring ``view_range``, in at
  most ``max_view`` characters (:data:`MAX_VIEW_CHARS`; five times that with a
  ``view_range``), whole lines while they fit, then a line naming the
  ``view_range`` of the rest; a line longer than that is read in pieces, a third
  number of ``view_range`` (``[start, end, character]``) naming the character of
  line ``start`` to begin at, as the note under a cut line says.
* ``create`` adds a node: the file name gives the id (``notes.md`` -> ``notes``;
  another extension is part of the id), the folder the layer (a file directly
  in ``/memories`` goes to ``contextual/``). ``file_text`` is plain Markdown
  (the body) or a full node file (frontmatter and body); the memory is
  long-term (``retention_tier: long``) unless the frontmatter gives a tier or
  an expiry: files do not vanish because md-cg read "tomorrow" in them.
* the tool works on a file's ``\\n`` lines: a ``\\r\\n`` in a file, ``file_text``,
  ``old_str``, ``new_str`` or ``insert_text`` is read as ``\\n`` (no stray ``\\r``
  in a view or a stored body; an edited file is written with ``\\n`` ends).
  ``insert_text`` forms its own line(s) after line ``insert_line``: its trailing
  line ends are dropped, as the SDK's reference backend does.
* ``str_replace`` and ``insert`` edit the node file under the node's lock; the
  result must still be a valid node file with the same id and a body
  ``create`` would take (no git conflict markers, no NUL -- except those the
  file already held: a file a git merge left with markers can be resolved one
  block at a time, and only an edit that adds marker lines or a NUL is refused),
  or nothing is written. A changed ``layer:`` line moves the node. The body of a
  LangGraph item whose value has no text field is generated from its
  ``langgraph_value`` and is not edited (its frontmatter is).
* ``str_replace`` and ``insert`` that leave the retention lines alone make a
  memory md-cg put on a timer by its words long-term (a tier a caller asked
  for stays).
* ``delete`` forgets the node (a payload-free tombstone is kept).
* ``rename`` moves the node to another layer (``MdCG.move``) and/or gives it
  another id (``MdCG.rename``: one commit that re-points incoming edges and is
  recorded in the audit log, so a re-run of ``mdcg migrate`` keeps the old id out).

A file path is first the file at that path (a person may name a file freely and
a listing shows that name): the memory listed there is the one every command acts
on, and a file there the handle does not list stands for no memory (a ``create`` or
``rename`` onto it is refused; a scoped handle says "already exists" and no more, never
naming the memory it may hold). The file a path names is a ``.md`` file (``contextual/todo``
is ``contextual/todo.md``: md-cg reads no other). A path with no
file there is found by its id wherever the node lives (ids are unique in a
store), as long as the layer folder named in the path, if any, is the node's
layer; a name that differs from a stored id only by letter case or Unicode
normalisation (one file on macOS and Windows) is refused naming that file.
Paths outside ``/memories``, traversal (``..``, encoded or not), control
characters (shown escaped, ``\\x01``), hidden names
(``.mdcg``) and names that are not safe ids are refused with the error texts
of the tool's documentation; a symlink in the store is never followed, and every
command names it; what the store refuses comes back
as a ``ToolError`` too. An error repeats at most 200 characters of an input (then
its length), so no reply grows with a hostile input. Each command first takes in the files changed outside
the engine (``MdCG.sync_if_changed``). Every change goes through
:class:`~md_cg.MdCG` (index, log, locks), so several agents and processes can
share one folder.
"""

from __future__ import annotations

import functools
import json
import os
import re
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from anyio.to_thread import run_sync

from .. import fsops, layout, merge, nodefile, paths
from ..editing import require_text, require_usable
from ..errors import (
    DuplicateIdError,
    InvalidArgumentError,
    InvalidNodeError,
    MalformedNodeFileError,
    NodeNotFoundError,
    ProtectedNodeError,
    UnsafeIdError,
    UnsafePathError,
)
from ..index import Entry
from ..node import INT_END, INT_MIN, LAYERS, MAX_FILE_BYTES, Node, check_id, format_instant, number_problem
from ..paths import BUCKETED_LAYER as BUCKETED
from ..retention import stamp_scope
from ..script import short_repr
from ..store import MdCG
from ..temporal import asked_reason, was_asked
from ..visibility import Scope, narrower

__all__ = [
    "DEFAULT_LAYER",
    "DEFAULT_SCOPE",
    "MAX_VIEW_CHARS",
    "MEMORIES",
    "AsyncMdCGMemoryTool",
    "MdCGMemoryTool",
    "MemoryFiles",
]

#: The directory the memory tool's paths live in.
MEMORIES = "/memories"
#: Layer of a file created directly in ``/memories``.
DEFAULT_LAYER = "contextual"
#: Why a deleted memory was forgotten (kept in its tombstone).
DELETE_REASON = "deleted with Claude's memory tool"
#: Lines of a folder listing before it is cut (``view_range`` pages further).
MAX_LISTING = 500
#: Characters of a ``view`` of a whole file before it is cut at a line (``view_range``
#: shows the rest): the MCP server's ``get`` window (``md_cg.mcp_server.GET_CHARS``).
MAX_VIEW_CHARS = 20_000
#: A ``view`` with a ``view_range`` shows this many times ``max_view`` characters at most
#: (the MCP server's ``get`` goes up to ``MAX_GET_CHARS``, five windows).
VIEW_RANGE_TIMES = 5
#: The scope a tool opened on a folder works in: ``mdcg mcp``'s default (no agent, no
#: workspace, sensitivity up to ``normal``).
DEFAULT_SCOPE = Scope()
LINE_NUMBER_WIDTH = 6
MD = ".md"
#: Characters of an input (a path, an ``old_str``) an error message repeats before it
#: clips it, saying how long it is: a reply never grows with a hostile input.
MAX_ECHO = 200
#: Longest path a memory can have (its id is at most 128 characters, its folders two); a
#: longer one is refused at once, so no message repeats it whole.
MAX_PATH_CHARS = 1024

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_R = TypeVar("_R")


@dataclass(frozen=True)
class _Path:
    """A checked ``/memories`` path: ``parts`` are its components after ``/memories``."""

    text: str
    parts: tuple[str, ...]

    @property
    def layer(self) -> str | None:
        """The layer folder the path names, if any."""
        return self.parts[0] if self.parts and self.parts[0] in LAYERS else None

    @property
    def rel(self) -> str:
        return "/".join(self.parts)


def human_size(n: int) -> str:
    """A size the way the memory tool's reference backend writes it: ``0B``, ``512B``, ``4.5K``."""
    if n < 1024:
        return f"{n}B"
    value, unit = float(n), "B"
    for name in ("K", "M", "G"):
        value, unit = value / 1024, name
        if value < 1024:
            break
    return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"


def file_lines(text: str) -> list[str]:
    """The lines of a file as the tool numbers them (split on ``\\n``; no empty line after the last)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def lf(text: str) -> str:
    """``text`` with its ``\\r\\n`` line ends written ``\\n``: the tool shows, numbers and edits
    a file by ``\\n`` lines, so a file written on Windows, a ``file_text``, ``old_str``,
    ``new_str`` or ``insert_text`` with ``\\r\\n`` ends leaves no stray ``\\r`` in a line."""
    return text.replace("\r\n", "\n")


def bounded_view(lines: list[str], first: int, last: int, limit: int, start: int = 1) -> str:
    """Lines ``first`` to ``last`` (1-based) of a file, numbered, in at most ``limit``
    characters: whole lines while they fit (a first line longer than ``limit`` is cut),
    then a line saying what is not shown and the ``view_range`` that shows it. ``start``:
    the character of line ``first`` the view begins at (1-based; a long line is read in
    pieces, ``view_range [first, last, start]``). Never cuts silently."""
    shown: list[str] = []
    used = 0
    for n in range(first, last + 1):
        text = lines[n - 1][start - 1 :] if n == first else lines[n - 1]
        row = f"{n:>{LINE_NUMBER_WIDTH}}\t{text}"
        if used + len(row) + 1 > limit and shown:
            break
        shown.append(row)
        used += len(row) + 1
    notes = []
    end = first + len(shown) - 1
    if shown and (len(shown[0]) > limit or start > 1):
        label = len(f"{first:>{LINE_NUMBER_WIDTH}}\t")
        cut = len(shown[0]) > limit
        if cut:  # at least one character, so the view_range it names reads further
            shown[0] = shown[0][: label + max(limit - label, 1)]
        notes.append(
            _piece_note(first, len(lines[first - 1]), start, start - 1 + len(shown[0]) - label, limit, cut)
        )
    if end < last:
        which = (
            f"line {last} of {len(lines)} is"
            if end + 1 == last
            else f"lines {end + 1} to {last} of {len(lines)} are"
        )
        notes.append(
            f"[{which} not shown (a view shows at most {limit:,} characters): "
            f"pass view_range [{end + 1}, {last}] to see {'it' if end + 1 == last else 'them'}]"
        )
    return "\n".join(shown + notes)


def _piece_note(n: int, size: int, start: int, end: int, limit: int, cut: bool) -> str:
    """What a view shows of line ``n`` (``size`` characters) when it shows its characters
    ``start`` to ``end`` only (1-based), and, when it was ``cut``, how to read on."""
    part = (
        f"only its first {end:,} are shown"
        if start == 1
        else f"only its characters {start:,} to {end:,} are shown"
    )
    note = f"[line {n} is {size:,} characters long; {part}"
    if cut:
        note += (
            f" (a view shows at most {limit:,} characters): pass view_range [{n}, {n}, {end + 1}] to see "
            f"the rest of it (a third number is the character of the first line to start at)"
        )
    return note + "]"


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` as an error message repeats it: whole up to ``limit`` characters, else its
    first ``limit`` characters, an ellipsis and its length (a 2 MB ``old_str`` was echoed
    whole)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def id_of_name(name: str) -> str:
    """The node id a file name stands for: ``notes.md`` -> ``notes``, ``notes.txt`` -> ``notes.txt``."""
    return name[: -len(MD)] if name.endswith(MD) and len(name) > len(MD) else name


#: How a refused ``str_replace`` and a refused ``insert`` start.
REPLACE_REFUSED = "No replacement was performed: "
INSERT_REFUSED = "No insertion was performed: "


def _has_fence(text: str) -> bool:
    """Whether the first line opens a frontmatter (``---``, spaces or tabs may follow) or
    looks like a fence to other tools (``----``: the reader refuses that file)."""
    return nodefile.HANDLER.detect(text.removeprefix("\ufeff"))


def _cannot_read(rel: str, why: str, what: str = "folder") -> str:
    """The sentence every command says of an entry md-cg does not read as a memory (a
    symlink, a broken file): ``The file /memories/<rel> is there but ...`` (``what``: the
    file looked for, or the folder on the way to it)."""
    why = _SYMLINK if "symlink" in why else why
    return (
        f"The {what} {MEMORIES}/{rel} is there but md-cg cannot read it as a memory ({why}); "
        "a person must repair or remove it."
    )


def _odd_folders(root: str, p: _Path) -> list[str]:
    """A line for each folder of the listing of ``p`` that is a symlink (or another entry
    that is no folder): ``p`` itself, or the layer folders of ``/memories``. md-cg reads
    nothing through it, so the listing shows it empty (a symlinked ``contextual/`` showed
    ``0B``); this line says why."""
    rels = [p.rel] if p.parts else list(LAYERS)
    odd = (_odd_entry(root, rel) for rel in rels)
    return [f"({_cannot_read(*o)})" for o in odd if o is not None]


def listing_page(items: list[str], first: int, last: int, max_lines: int, limit: int) -> list[str]:
    """Items ``first`` to ``last`` (1-based) of a folder listing, at most ``max_lines`` of
    them in at most ``limit`` characters (with or without a ``view_range``: a listing of
    20,000 files asked for whole was 1.5 million characters), then a line naming the next
    page, itself bounded, for the items left out."""
    shown: list[str] = []
    used = 0
    for item in items[first - 1 : min(last, first - 1 + max_lines)]:
        if shown and used + len(item) + 1 > limit:
            break
        shown.append(item)
        used += len(item) + 1
    end = first - 1 + len(shown)
    if end >= last:
        return shown
    nxt = (end + 1, min(last, end + len(shown)))
    what = "them" if nxt[1] == last else "the next ones"
    return [
        *shown,
        f"({last - end} more items not listed: view a sub-folder, or pass view_range "
        f"[{nxt[0]}, {nxt[1]}] to list {what})",
    ]


def _kind(rel: str) -> str:
    """What an entry the store refused to write through is: a node ``file`` (``.md``) or a
    folder on the way to one."""
    return "file" if rel.endswith(MD) else "folder"


def _names_unsafe_paths(method: Callable[[MemoryFiles, Any], str]) -> Callable[[MemoryFiles, Any], str]:
    """A command that reports what the store refuses to write through (a layer folder that
    is a symlink: ``UnsafePathError``) as the tool's error naming the path, not as a raw
    md-cg error the agent is not shown."""

    @functools.wraps(method)
    def run(self: MemoryFiles, command: Any) -> str:
        try:
            return method(self, command)
        except UnsafePathError as exc:
            path = getattr(command, "path", None)
            named = (
                clip(path)
                if isinstance(path, str)
                else f"{clip(command.old_path)} to {clip(command.new_path)}"
            )
            said = _cannot_read(exc.path, exc.reason, _kind(exc.path))
            raise ToolError(f"Cannot {command.command} {named}: {said[0].lower()}{said[1:]}") from None

    return run


class MemoryFiles:
    """The memory tool's file view of an md-cg store: the six commands, as plain methods.

    Each method takes the SDK's command model and returns the tool result
    text, or raises the SDK's ``ToolError`` with the text the agent reads.
    Errors of the file system or the locks (``OSError``, ``LockTimeoutError``)
    propagate: they are not the agent's fault and the runner reports them.
    """

    def __init__(
        self, store: MdCG, *, max_listing: int = MAX_LISTING, max_view: int = MAX_VIEW_CHARS
    ) -> None:
        if not isinstance(max_view, int) or isinstance(max_view, bool) or max_view < 1:
            raise InvalidArgumentError(
                f"max_view must be a positive number of characters, got {max_view!r}",
                name="max_view",
                value=max_view,
            )
        self.store = store
        self.max_listing = max_listing
        self.max_view = max_view

    # -- the store calls (all of them; a scoped store handle goes here) -------------------

    def _sync(self) -> None:
        """Take in files changed outside the engine (a person, ``git pull``) before a command,
        as the MCP server does: cheap when nothing changed (see ``MdCG.sync_if_changed``)."""
        self.store.sync_if_changed()

    def _entries(self) -> list[Entry]:
        return self.store.entries()

    def _buckets(self) -> dict[str, int]:
        return self.store.bucket_sizes()

    def _entry(self, node_id: str) -> Entry | None:
        try:
            return self.store.entry(node_id)
        except NodeNotFoundError:
            return None

    def _read_text(self, node_id: str) -> str:
        """The node file's text as stored (MdCG has no public call for it yet)."""
        entry = self.store.entry(node_id)
        try:
            data, st = fsops.read_file(str(self.store.root), entry.path, max_bytes=MAX_FILE_BYTES)
        except FileNotFoundError:  # removed by hand since the index saw it
            raise ToolError(
                f"The path {MEMORIES}/{entry.path} does not exist. Please provide a valid path."
            ) from None
        if st.st_size > MAX_FILE_BYTES:
            raise MalformedNodeFileError(entry.path, f"the file is over {MAX_FILE_BYTES:,} bytes")
        return lf(nodefile.read_bytes_as_text(data, entry.path))  # the lines the tool shows

    def _add(self, node: Node) -> Node:
        return self.store.add(node)

    def _modify(self, node_id: str, change: Callable[[Node], Node]) -> Node:
        return self.store.modify(node_id, change)

    def _move(self, node_id: str, layer: str) -> Node:
        return self.store.move(node_id, layer)

    def keep_if_timed_by_words(self, node_id: str) -> bool:
        """Make the memory ``node_id`` long-term if md-cg timed it by its words (read and
        written under its lock); whether it did."""
        kept = []

        def keep(node: Node) -> Node:
            if node.retention_tier == "temp" and not was_asked(node.retention_reason):
                _keep(node)
                kept.append(node.id)
            return node

        try:
            node = self.store.get(node_id, include_expired=True, include_archived=True)
            if node.retention_tier == "temp" and not was_asked(node.retention_reason):
                # not otherwise: a write stamps updated_at; an expired or archived one is
                # kept too (a renewal to the long tier, asked for by keep_files)
                self.store.modify(node_id, keep, include_expired=True, include_archived=True)
        except NodeNotFoundError:
            return False  # deleted meanwhile
        return bool(kept)

    def _forget(self, node_id: str, reason: str) -> None:
        self.store.forget(node_id, reason)

    def _rename(self, old_id: str, new_id: str, layer: str) -> Node:
        """Give a node a new id (and layer): ``MdCG.rename``, one commit that also re-points
        the edges of the nodes linking to it and records the rename in the audit log."""
        return self.store.rename(old_id, new_id, layer=layer)

    def _sees(self, node_id: str) -> bool:
        """Whether this handle sees a memory ``node_id`` (archived and expired ones too)."""
        try:
            self.store.entry(node_id, include_expired=True, include_archived=True)
        except NodeNotFoundError:
            return False
        return True

    def _twin(self, node_id: str) -> Entry | None:
        """The memory this handle sees (archived and expired ones too) whose id differs from
        ``node_id`` only by letter case or Unicode normalisation: one file on macOS and
        Windows, so ``node_id`` cannot be created beside it. Scans the index: called only
        when ``node_id`` was not found."""
        key = paths.id_key(node_id)
        for e in self.store.entries(include_expired=True, include_archived=True):
            if e.id != node_id and paths.id_key(e.id) == key:
                return e
        return None

    # -- paths ---------------------------------------------------------------------------

    def parse(self, path: object) -> _Path:
        """Check a tool path; raise ToolError with the documented text when it is not allowed."""
        if not isinstance(path, str):
            raise ToolError(f"Path must start with {MEMORIES}, got: {short_repr(path)}")
        _refuse_control(path)
        if path != MEMORIES and not path.startswith(MEMORIES + "/"):
            raise ToolError(f"Path must start with {MEMORIES}, got: {clip(path)}")
        if len(path) > MAX_PATH_CHARS:
            raise ToolError(
                f"The path {clip(path)} is too long: no memory's path is over {MAX_PATH_CHARS:,} "
                "characters (an id is at most 128)"
            )
        parts = tuple(p for p in path[len(MEMORIES) :].split("/") if p)
        # an encoded "..", "/" or "\\" is refused too: some layer below may decode it
        decoded = unquote(path)
        decoded_parts = tuple(p for p in decoded[len(MEMORIES) :].split("/") if p)
        if (
            "\\" in decoded
            or len(decoded_parts) != len(parts)
            or any(p in (".", "..") for p in parts + decoded_parts)
        ):
            raise ToolError(f"Path {path} would escape {MEMORIES} directory")
        if any(p.startswith(".") for p in parts):
            raise ToolError(
                f"The path {path} is not allowed: names starting with '.' are hidden "
                f"(md-cg keeps its index in {MEMORIES}/.mdcg, which is not a memory)"
            )
        return _Path(MEMORIES + ("/" + "/".join(parts) if parts else ""), parts)

    def _is_folder(self, p: _Path) -> bool:
        """Whether ``p`` is a folder: ``/memories``, a layer, a bucket or a sub-folder holding nodes.

        Cheap for the usual paths (no scan of the index for a ``.md`` name).
        """
        if len(p.parts) <= 1:
            return not p.parts or p.parts[0] in LAYERS
        if p.layer is None or p.parts[-1].endswith(MD):
            return False
        if len(p.parts) == 2 and p.parts[0] == BUCKETED and p.parts[1] in self._buckets():
            return True
        prefix = p.rel + "/"
        return any(e.path.startswith(prefix) for e in self._entries())

    def _parent(self, p: _Path) -> _Path:
        return _Path(p.text.rsplit("/", 1)[0], p.parts[:-1])

    def _find(self, p: _Path) -> Entry | None:
        """The node a file path stands for: the one whose file is at the path (a person may
        name a file freely, docs/format.md, and a listing shows that name), else its id in
        the layer the path names (a name directly in ``/memories``: wherever it lives). A
        file there this handle does not list (another scope's, a broken one) stands for
        no memory: gamma filed as ``contextual/projects/beta.md`` was shown, edited and
        forgotten as ``beta``."""
        if not p.parts:
            return None
        try:
            entry = self._entry(check_id(id_of_name(p.parts[-1])))
        except UnsafeIdError:
            entry = None
        if entry is not None and entry.path == p.rel:
            return entry  # the usual path: no scan of the index
        rel, at = self._at(p)
        if rel is not None:
            return entry if entry is not None and entry.path == rel else at
        if entry is not None and (len(p.parts) == 1 or entry.layer == p.layer):
            return entry
        return None

    def _at(self, p: _Path) -> tuple[str | None, Entry | None]:
        """The file at ``p`` (:func:`_file_at`) and the memory this handle lists there, if any."""
        rel = _file_at(str(self.store.root), p)
        return rel, None if rel is None else next((e for e in self._entries() if e.path == rel), None)

    def _new_id(self, p: _Path) -> str:
        try:
            return check_id(id_of_name(p.parts[-1]))
        except UnsafeIdError as exc:
            raise ToolError(
                f"The file name {p.parts[-1]!r} in {p.text} cannot be a memory id: {exc}"
            ) from None

    def _new_layer(self, p: _Path) -> str | None:
        """The layer a new file at ``p`` goes to (``None``: directly in /memories)."""
        if len(p.parts) == 1:
            return None
        folder = "/".join(p.parts[:-1])
        if p.layer is None:
            raise ToolError(
                f"Cannot write {p.text}: the folders of {MEMORIES} are md-cg's layers "
                f"({', '.join(LAYERS)}); write {MEMORIES}/<layer>/<name>.md, or {MEMORIES}/<name>.md "
                f"for a {DEFAULT_LAYER} memory"
            )
        if not self._is_folder(self._parent(p)):
            odd = _odd_entry(str(self.store.root), folder)  # a symlink is named, as everywhere
            raise ToolError(
                f"The folder {MEMORIES}/{folder} does not exist (write into {MEMORIES}/{p.layer})"
                + (". " + _cannot_read(*odd) if odd else "")
            )
        return p.layer

    @staticmethod
    def where(entry: Entry) -> str:
        """The tool path of a node's file."""
        return f"{MEMORIES}/{entry.path}"

    def where_id(self, node_id: str) -> str:
        return self.where(self.store.entry(node_id))

    # -- view ------------------------------------------------------------------------------

    @_names_unsafe_paths
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        p = self.parse(command.path)
        self._sync()
        if self._is_folder(p):
            return self._view_folder(p, self._entries(), command.view_range)
        entry = self._find(p)
        if entry is None:
            raise ToolError(
                f"The path {p.text} does not exist. Please provide a valid path." + self._missing(p)
            )
        lines = file_lines(self._read_text(entry.id))
        first, last = _lines_range(command.view_range, len(lines), p.text, chars=True)
        start = _start_char(command.view_range, lines, first, p.text)
        head = f"Here's the content of {p.text} with line numbers:"
        if self.where(entry) != p.text:
            head = f"Here's the content of {p.text} (stored as {self.where(entry)}) with line numbers:"
        limit = self.max_view if not command.view_range else self.max_view * VIEW_RANGE_TIMES
        return head + "\n" + bounded_view(lines, first, last, limit, start)

    def _view_folder(self, p: _Path, entries: list[Entry], view_range: list[int] | None) -> str:
        prefix = p.rel + "/" if p.parts else ""
        sizes: dict[str, int] = {}
        total = 0
        for e in entries:
            if not e.path.startswith(prefix):
                continue
            total += e.size
            parts = e.path[len(prefix) :].split("/")
            for depth in (1, 2):
                if len(parts) > depth:
                    key = "/".join(parts[:depth]) + "/"
                    sizes[key] = sizes.get(key, 0) + e.size
            if len(parts) <= 2:
                sizes["/".join(parts)] = e.size
        if not p.parts:
            for layer in LAYERS:
                sizes.setdefault(layer + "/", 0)
        items = [f"{human_size(size)}\t{p.text}/{name}" for name, size in sorted(sizes.items())]
        head = f"Here're the files and directories up to 2 levels deep in {p.text}, excluding hidden items:"
        lines = [f"{human_size(total)}\t{p.text}", *_odd_folders(str(self.store.root), p)]
        first, last = _lines_range(view_range, len(items), p.text) if view_range else (1, len(items))
        page = listing_page(items, first, last, self.max_listing, self.max_view * VIEW_RANGE_TIMES)
        return "\n".join([head, *lines, *page])

    # -- create ------------------------------------------------------------------------------

    @_names_unsafe_paths
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        p = self.parse(command.path)
        self._sync()
        if self._is_folder(p):
            raise ToolError(
                f"Cannot create {p.text}: it is a folder; give a file name such as {p.text}/notes.md"
            )
        node_id = self._new_id(p)
        layer = self._new_layer(p)
        rel, at = self._at(p)
        existing = at or self._entry(node_id)  # a memory listed at the path too
        if existing is not None:
            raise ToolError(f"File {p.text} already exists" + self._elsewhere(p, existing))
        if _hidden_file(self.store, rel):
            raise ToolError(f"File {p.text} already exists")
        node = self._parse_new(command.file_text, p, node_id, layer)
        try:
            stored = self._add(node)
        except DuplicateIdError:
            twin = self._twin(node_id)
            if twin is not None:
                raise ToolError(f"Cannot create {p.text}: {_collision(p, twin)}") from None
            why = self._unreadable(p, layout.rel_path(node))  # a broken file (a symlink) holds it
            hidden = _hidden_file(self.store, rel, layout.rel_path(node))  # where it would go: a bucket
            if not (why or hidden) and self.store.scope is not None and not self._sees(node_id):
                raise ToolError(  # as rename says it; the other memory is not named
                    f"Cannot create {p.text}: the id {node_id!r} is taken by a memory outside this "
                    "handle's scope; choose another name"
                ) from None
            raise ToolError(f"File {p.text} already exists" + (f".{why}" if why else "")) from None
        except (InvalidNodeError, InvalidArgumentError) as exc:  # a bad field, another scope's
            raise ToolError(f"Cannot create {p.text}: {exc}") from None
        where = _where_written(self, stored.id, f"{MEMORIES}/{layout.rel_path(stored)}")
        return f"File created successfully at: {p.text}" + (
            f" (stored as {where})" if where != p.text else ""
        )

    def _missing(self, p: _Path, stop: str = "") -> str:
        """What to add to "does not exist" (after ``stop``) for a file path the store holds
        no memory at: the memory whose name differs only by case or normalisation, or a
        file there that is no memory (:meth:`_unreadable`)."""
        try:
            twin = self._twin(check_id(id_of_name(p.parts[-1]))) if p.parts else None
        except UnsafeIdError:
            twin = None
        if twin is not None:
            return f"{stop} {_collision(p, twin)}."
        why = self._unreadable(p)
        return stop + why if why else ""

    def _unreadable(self, p: _Path, stored_at: str | None = None) -> str:
        """What to add to "does not exist" or "already exists" when a file at ``p`` is there
        but holds no usable memory: broken frontmatter... (an unscoped handle only), or a
        symlink or other entry that is no regular file, at ``p`` itself, on the way to it,
        or at ``stored_at`` (where a create writes; any handle: a symlink is nobody's
        memory). Never follows a symlink."""
        name = p.parts[-1] if p.parts else ""
        root = str(self.store.root)
        for rel, reason in self.store.unreadable_files():
            folder, _, file = rel.rpartition("/")
            if file in (name, name + MD) and (len(p.parts) == 1 or folder.split("/")[0] == p.parts[0]):
                # a symlink is named as every command names it: the link itself (a folder on
                # the way, say), in the documented words
                at, why = (_odd_entry(root, rel) if "symlink" in reason else None) or (rel, reason)
                return " " + _cannot_read(at, why, "file" if at == rel else "folder")
        for rel in _places(p, stored_at):
            odd = _odd_entry(root, rel)
            if odd is not None:
                return " " + _cannot_read(*odd, "file" if odd[0] == rel else "folder")
        return ""

    def _elsewhere(self, p: _Path, entry: Entry) -> str:
        where = self.where(entry)
        return "" if where == p.text else f" (as {where}: file names are unique in {MEMORIES})"

    def _parse_new(self, text: str, p: _Path, node_id: str, layer: str | None) -> Node:
        if not isinstance(text, str) or not text.strip():
            raise ToolError(f"Cannot create {p.text}: file_text is empty (a memory needs content)")
        text = lf(text)  # lines end in "\n" (a "\r\n" would leave a "\r" in the body)
        _refuse_big_integers(text, f"Cannot create {p.text}: ")  # before the reader's own refusal
        try:
            node = nodefile.loads(text, p.text, default_id=node_id, default_layer=layer or DEFAULT_LAYER)
        except MalformedNodeFileError as exc:
            raise ToolError(f"Cannot create {p.text}: file_text is not a valid memory file: {exc}") from None
        if node.id != node_id:
            raise ToolError(
                f"Cannot create {p.text}: its frontmatter says id {node.id!r} but the file name says "
                f"{node_id!r} (the id is the file name)"
            )
        if layer is not None and node.layer != layer:
            raise ToolError(
                f"Cannot create {p.text}: its frontmatter says layer {node.layer!r} but the folder is "
                f"{layer}/ (put it in {MEMORIES}/{node.layer}/, or drop the layer line)"
            )
        if not node.body.strip():
            raise ToolError(f"Cannot create {p.text}: the memory has no content after its frontmatter")
        _refuse_past_expiry(node, f"Cannot create {p.text}: ")
        if node.retention_tier is None and node.expires_at is None:
            _keep(node)  # a file lasts until it is deleted, unless its frontmatter says otherwise
        return node

    # -- str_replace and insert --------------------------------------------------------------

    def _existing_file(self, p: _Path) -> Entry:
        if self._is_folder(p):
            raise ToolError(f"The path {p.text} is not a file.")
        entry = self._find(p)
        if entry is None:
            raise ToolError(
                f"The path {p.text} does not exist. Please provide a valid path." + self._missing(p)
            )
        return entry

    def _edit(
        self, p: _Path, entry: Entry, edit: Callable[[str], str], refuse: str = REPLACE_REFUSED
    ) -> tuple[Node, str]:
        """Apply ``edit`` to the node file's text under the node's lock; return the node and new
        text. ``refuse``: how a refusal starts (``str_replace``'s or ``insert``'s words)."""

        def change(current: Node) -> Node:
            before = self._read_text(entry.id)
            after = edit(before)
            return self._parse_edit(after, before, p, current, refuse)

        try:
            node = self._modify(entry.id, change)
        except NodeNotFoundError:
            raise ToolError(f"The path {p.text} does not exist. Please provide a valid path.") from None
        except DuplicateIdError as exc:  # a changed layer: onto another file there (it is not named)
            said = f"{MEMORIES}/{exc.path} already exists" if _hidden_file(self.store, exc.path) else str(exc)
            raise ToolError(f"{refuse}the edited file is refused: {said}") from None
        except (InvalidNodeError, InvalidArgumentError) as exc:  # an edge to itself, another scope...
            raise ToolError(f"{refuse}the edited file is refused: {exc}") from None
        # the text as written, not read again: the node may be renamed or edited meanwhile
        return node, nodefile.dumps(node)

    def _parse_edit(self, after: str, before: str, p: _Path, current: Node, refuse: str) -> Node:
        if _has_fence(before) and not _has_fence(after):
            raise ToolError(
                refuse + f"the edit would remove the opening '---' line of the frontmatter of {p.text}; "
                "the frontmatter must stay valid"
            )
        _refuse_big_integers(after, refuse, before)  # before the reader's own refusal
        try:
            node = nodefile.loads(after, p.text, default_id=current.id, default_layer=current.layer)
        except MalformedNodeFileError as exc:
            raise ToolError(refuse + f"the edited file would not be a valid memory: {exc}") from None
        if node.id != current.id:
            raise ToolError(
                refuse + f"the edit would change the id of {p.text} to {node.id!r}; the id is the file "
                "name (use the rename command)"
            )
        if not node.body.strip():
            raise ToolError(refuse + f"the edit would leave {p.text} without content")
        _require_text(node, current, refuse)  # as create: no new conflict markers, no new NUL
        _refuse_derived_body(node, current, p, refuse)
        changed = [f for f in ("tags", "edges") if getattr(node, f) != getattr(current, f)]
        require_usable(node, fields=changed)  # as add and update check new tags and edges
        self._keep_in_scope(node, current, refuse)
        _refuse_past_expiry(node, refuse)
        timer = (node.retention_tier, node.expires_at) == (current.retention_tier, current.expires_at)
        if timer and node.retention_tier == "temp" and not was_asked(current.retention_reason):
            _keep(node)  # md-cg put it on a timer by its words; the agent's file lasts
        return node

    def _keep_in_scope(self, node: Node, current: Node, refuse: str) -> None:
        """Refuse an edit that would take a memory out of the handle's scope (another agent,
        workspace, a sensitivity above it) or narrow a shared one, as ``MdCG.update`` does."""
        scope = self.store.scope
        if scope is None:
            return
        stamp_scope(node, scope, fill=False)  # InvalidArgumentError: told as a ToolError
        if current.agent_scope is None and narrower(node, current):
            raise ToolError(
                refuse + f"the edit would hide {MEMORIES}/{node.id}.md from agents that read it now "
                "(its agent, workspace or sensitivity); a shared memory stays shared"
            )

    @_names_unsafe_paths
    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        p = self.parse(command.path)
        self._sync()
        entry = self._existing_file(p)
        old, new = lf(command.old_str), lf(command.new_str)  # the file's lines end in "\n" too
        if not old:
            raise ToolError(
                f"No replacement was performed, old_str is empty (give text of {p.text} to replace)."
            )
        changed: list[int] = []

        def replace(text: str) -> str:
            count = text.count(old)
            if count == 0:
                raise ToolError(
                    f"No replacement was performed, old_str `{clip(old)}` did not appear verbatim "
                    f"in {p.text}."
                )
            if count > 1:
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{clip(old)}` "
                    f"{_occurrences(text, old)}. Please ensure it is unique"
                )
            changed.append(text[: text.find(old)].count("\n"))
            return text.replace(old, new, 1)

        node, text = self._edit(p, entry, replace)
        lines = file_lines(text)
        at = _nearest_line(text, new, changed[0]) if new else changed[0]
        start, end = max(0, at - 2), min(len(lines), at + 3)
        moved = self._moved_note(p, node)
        return (
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
            + bounded_view(lines, start + 1, end, self.max_view)  # a long line is cut, and says so
            + moved
        )

    @_names_unsafe_paths
    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        p = self.parse(command.path)
        self._sync()
        entry = self._existing_file(p)
        at, new = command.insert_line, lf(command.insert_text)  # the file's lines end in "\n" too

        def insert_text(text: str) -> str:
            lines = file_lines(text)
            if not isinstance(at, int) or not 0 <= at <= len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {short_repr(at)}. It should be within the range "
                    f"[0, {len(lines)}]."
                )
            if at == 0 and _has_fence(text):
                raise ToolError(
                    f"Invalid `insert_line` parameter: 0. Line 0 is above the opening '---' line of the "
                    f"frontmatter of {p.text}, which must stay first; insert at line 1 or later."
                )
            lines.insert(at, new.rstrip("\n"))
            return "\n".join(lines) + "\n"

        node, _text = self._edit(p, entry, insert_text, INSERT_REFUSED)
        return f"The file {p.text} has been edited." + self._moved_note(p, node)

    def _moved_note(self, p: _Path, node: Node) -> str:
        if p.layer is None or node.layer == p.layer:
            return ""
        try:
            where = self.where_id(node.id)
        except NodeNotFoundError:  # renamed or deleted since the edit
            where = f"in {MEMORIES}/{node.layer}/"
        return f"\nThe layer changed: the memory is now {where}"

    # -- delete and rename -------------------------------------------------------------------

    def _one_file(self, p: _Path, verb: str, why_not_folders: str) -> Entry:
        """The node a delete or rename acts on; the root and folders are refused."""
        if not p.parts:
            raise ToolError(f"Cannot {verb} the {MEMORIES} directory itself")
        if self._is_folder(p):
            raise ToolError(f"Cannot {verb} the folder {p.text}: {why_not_folders}")
        entry = self._find(p)
        if entry is None:
            raise ToolError(f"The path {p.text} does not exist" + self._missing(p, "."))
        return entry

    @_names_unsafe_paths
    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        p = self.parse(command.path)
        self._sync()
        why = "md-cg deletes memories one file at a time (each leaves a tombstone); delete the files in it"
        entry = self._one_file(p, "delete", why)
        try:
            self._forget(entry.id, DELETE_REASON)
        except NodeNotFoundError:
            raise ToolError(f"The path {p.text} does not exist") from None
        except ProtectedNodeError as exc:
            raise ToolError(f"Cannot delete {p.text}: {exc}") from None
        return f"Successfully deleted {p.text}"

    def _taken(self, new: _Path, new_id: str) -> str:
        twin = self._twin(new_id)
        if twin is not None:
            return f"The destination {new.text} already exists: {_collision(new, twin)}"
        return f"The destination {new.text} already exists"

    def _free_destination(self, new: _Path, new_id: str, entry: Entry) -> None:
        """Refuse a rename onto an id a memory this handle sees holds, archived or expired
        ones too, or a name its twin holds (not the renamed memory's own: a case-only
        change is the store's to refuse, saying how)."""
        try:
            self.store.entry(new_id, include_expired=True, include_archived=True)
        except NodeNotFoundError:
            twin = self._twin(new_id)
            if twin is None or twin.id == entry.id:
                return
        raise ToolError(self._taken(new, new_id))

    @_names_unsafe_paths
    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old, new = self.parse(command.old_path), self.parse(command.new_path)
        self._sync()
        why = "folders are md-cg's layers and buckets; rename the files in it one by one"
        entry = self._one_file(old, "rename", why)
        rel, at = self._at(new)  # another memory's file, whatever its name
        if self._is_folder(new) or (at is not None and at.id != entry.id) or _hidden_file(self.store, rel):
            raise ToolError(f"The destination {new.text} already exists")
        new_id = self._new_id(new)
        layer = self._new_layer(new) or entry.layer
        if new_id != entry.id:
            self._free_destination(new, new_id, entry)
            try:
                self._rename(entry.id, new_id, layer)
            except NodeNotFoundError:  # renamed or deleted meanwhile
                raise ToolError(f"The path {old.text} does not exist") from None
            except DuplicateIdError:  # taken meanwhile
                raise ToolError(self._taken(new, new_id)) from None
            except (InvalidNodeError, InvalidArgumentError) as exc:  # e.g. an id Windows reserves
                raise _rename_refused(
                    self.store, old, new, exc, _new_rel(self.store, entry, new_id, layer)
                ) from None
        elif layer != entry.layer:
            try:
                self._move(entry.id, layer)
            except DuplicateIdError as exc:  # onto a file of another memory (in a bucket)
                raise _rename_refused(self.store, old, new, exc, exc.path) from None
            except (InvalidNodeError, InvalidArgumentError) as exc:
                raise ToolError(f"Cannot rename {old.text} to {new.text}: {exc}") from None
        where = _where_written(self, new_id, new.text)
        stored = f" (stored as {where})" if where != new.text else ""
        return f"Successfully renamed {old.text} to {new.text}{stored}"


_MARK_LINE = re.compile(r"(<{7}|={7}|>{7})(?: .*)?")
_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,}).*")


def _marks(body: str) -> Counter[str]:
    """The git conflict marker lines of ``body`` outside fenced code blocks, by kind
    (``<<<<<<<``, ``=======``, ``>>>>>>>``), and its NUL characters (``"\x00"``)."""
    out: Counter[str] = Counter({"\x00": body.count("\x00")})
    fence = ""
    for line in body.split("\n"):
        line = line.removesuffix("\r")
        f = _FENCE_LINE.fullmatch(line)
        if f is not None and (not fence or f.group(1).startswith(fence)):
            fence = "" if fence else f.group(1)
            continue
        m = _MARK_LINE.fullmatch(line)
        if m is not None and not fence and (m.group(1)[0] != "=" or line == "======="):
            out[m.group(1)] += 1
    return out


def _require_text(node: Node, current: Node, refuse: str) -> None:
    """``require_text`` of an edited node, except for what its file held before: a file a
    git merge left with conflict markers (or a NUL) can still be edited -- one block
    resolved at a time -- as long as the edit adds no marker line and no NUL. A refusal
    says when the file already holds an unresolved merge."""
    try:
        require_text(node)
    except InvalidNodeError:
        damaged = merge.has_conflict_markers(node.body) or "\x00" in node.body
        held = merge.has_conflict_markers(current.body) or "\x00" in current.body
        if not (damaged and held):
            raise
        before, after = _marks(current.body), _marks(node.body)
        added = [kind for kind in after if after[kind] > before[kind]]
        if added:
            marks, nul = any(k != "\x00" for k in added), "\x00" in added
            adds = " and ".join(
                w for w, on in (("conflict marker lines", marks), ("a NUL character", nul)) if on
            )
            had = "an unresolved git merge" if merge.has_conflict_markers(current.body) else "a NUL character"
            raise ToolError(
                refuse + f"the edited file is refused: node {node.id!r}: the file already holds {had}, and "
                f"the edit adds {adds}; resolve what it holds (keep one side of each conflict block, delete "
                "its <<<<<<<, ======= and >>>>>>> lines) and add none"
            ) from None


def _refuse_control(path: str) -> None:
    """Refuse a path holding a control character (``%01`` encoded too), shown escaped:
    it is invisible in a reply, and no memory's name holds one."""
    for text, how in ((path, "a control character"), (unquote(path), "an encoded control character")):
        found = _CONTROL.search(text)
        if found is not None:
            raise ToolError(
                f"The path {clip(_escaped(path))} holds {how} ({_escaped(found.group())}): "
                "names of memories cannot hold control characters"
            )


def _escaped(text: str) -> str:
    """``text`` with its control characters written ``\\x01``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _places(p: _Path, stored_at: str | None) -> Iterator[str]:
    """Where a file of the path ``p`` may be in the store folder: the path itself (with
    ``.md`` added), the ``contextual/`` file of a name directly in ``/memories``, and
    ``stored_at``."""
    if not p.parts:
        return
    names = [p.parts[-1]] + ([] if p.parts[-1].endswith(MD) else [p.parts[-1] + MD])
    if len(p.parts) > 1:
        yield from ("/".join((*p.parts[:-1], n)) for n in names)
    else:
        yield from (f"{DEFAULT_LAYER}/{n}" for n in names)
    if stored_at is not None:
        yield stored_at


def _odd_entry(root: str, rel: str) -> tuple[str, str] | None:
    """The symlink or other entry that is no regular file or folder at ``rel`` or on the
    way to it, and why md-cg does not read it: (its path, why); ``None`` when there is
    none (or nothing). Never follows a symlink."""
    try:
        st = fsops.lstat(root, rel)
    except UnsafePathError as exc:  # a symlink on the way: the folder the error names
        return exc.path, _SYMLINK if "symlink" in exc.reason else exc.reason
    except OSError:  # absent, a name too long...
        return None
    if stat.S_ISLNK(st.st_mode):
        return rel, _SYMLINK
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return rel, "not a regular file or folder"
    return None


def _file_at(root: str, p: _Path) -> str | None:
    """The memory file ``p`` names, when something is there (a folder is nothing): ``p``
    itself when its name ends in ``.md``, else ``p`` with ``.md`` added; ``None`` when
    nothing is, or for a name directly in ``/memories`` (an id: it has no file). md-cg
    reads ``.md`` files only, so a file without it (a scratch ``contextual/todo``) is no
    memory's and never stands in for ``contextual/todo.md``: it did, and ``view
    /memories/contextual/todo`` said "does not exist" of the memory ``todo``. A symlink on
    the way counts (nothing is read through it); never followed."""
    if len(p.parts) <= 1:
        return None
    rel = "/".join((*p.parts[:-1], id_of_name(p.parts[-1]) + MD))
    try:
        return None if stat.S_ISDIR(fsops.lstat(root, rel).st_mode) else rel
    except UnsafePathError:
        return rel
    except OSError:  # absent, a name too long...
        return None


def _hidden_file(store: MdCG, *rels: str | None) -> bool:
    """Whether a scoped handle meets, at one of ``rels``, a regular file of no memory it
    sees: another scope's memory (under any name), a broken file, one not taken in yet.
    It cannot tell them apart, and must not: a ``create`` or ``rename`` onto it is told
    the path "already exists", never the id that file holds nor that an id is taken (a
    secret ``hush`` filed as ``contextual/notes.md`` was named by a rename onto
    ``notes.md``, and a create of it said the id ``notes`` was taken)."""
    if store.scope is None:
        return False
    there = [r for r in rels if r is not None and _regular_file(str(store.root), r)]
    if not there:
        return False
    seen = {e.path for e in store.entries(include_expired=True, include_archived=True)}
    return any(r not in seen for r in there)


def _regular_file(root: str, rel: str) -> bool:
    """Whether a regular file is at ``rel`` (a symlink, at it or on the way, is none: it is
    named as every command names it)."""
    try:
        return stat.S_ISREG(fsops.lstat(root, rel).st_mode)
    except (UnsafePathError, OSError):
        return False


def _where_written(files: MemoryFiles, node_id: str, written: str) -> str:
    """:meth:`MemoryFiles.where_id` of a memory this command has just written, or
    ``written`` (its tool path as written) when another process renamed or forgot it
    since: the write stands and the reply says so (before session 36 a raw
    NodeNotFoundError, 3 creates in 450 of processes creating and deleting one file)."""
    try:
        return files.where_id(node_id)
    except NodeNotFoundError:
        return written


def _new_rel(store: MdCG, entry: Entry, new_id: str, layer: str) -> str | None:
    """Where ``entry``'s file goes renamed to ``new_id`` in ``layer`` (a knowledge node's
    bucket is not in the path); None when it cannot be told (gone meanwhile)."""
    try:
        node = store.get(entry.id, include_expired=True, include_archived=True)
        node.id, node.layer = new_id, layer
        return layout.rel_path(node)
    except (NodeNotFoundError, InvalidNodeError, MalformedNodeFileError):
        return None


def _rename_refused(store: MdCG, old: _Path, new: _Path, exc: Exception, rel: str | None) -> ToolError:
    """The store's refusal of a rename: for a scoped handle whose destination file
    ``rel`` is a file it sees no memory in (:func:`_hidden_file`), "already exists", not
    the store's words (which name the id that file holds)."""
    if _hidden_file(store, rel):
        return ToolError(f"The destination {new.text} already exists")
    return ToolError(f"Cannot rename {old.text} to {new.text}: {exc}")


#: Why md-cg does not read a symlink (as ``health()`` says it).
_SYMLINK = "a symlink: md-cg never follows symlinks below the store root"


def _collision(p: _Path, twin: Entry) -> str:
    """Why ``p`` names no memory of its own: ``twin``'s id differs from its name only by
    letter case or Unicode normalisation."""
    return (
        f"{p.text} collides with the existing {MemoryFiles.where(twin)} (names that differ only by "
        "letter case or Unicode normalisation are one file on macOS and Windows)"
    )


def _keep(node: Node) -> None:
    """Make ``node`` long-term: no md-cg timer decided from its words."""
    node.retention_tier, node.expires_at, node.retention_reason = "long", None, asked_reason("long")


#: Digits of the shortest integer a node file cannot hold (-2**63 - 1 has 19).
_LONG_NUMBER = re.compile(r"\d{19}")
_KEY = json.JSONDecoder()


def _big_integer(value: Any) -> int | None:
    """An integer of ``value`` (a JSON value, walked) outside what a node file stores."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and not INT_MIN <= v < INT_END:
            return v
    return None


def _big_integers(text: str) -> dict[str, int]:
    """The frontmatter lines ``key: <JSON>`` of a file's text holding an integer a node
    file cannot store (key: the integer). md-cg's reader refuses such a file naming the
    field; this check comes first to tell the agent how to keep the digits (quotes).
    Only a frontmatter with a run of 19 digits is looked at."""
    try:
        fm, _body = nodefile.HANDLER.split(text)
    except ValueError:
        return {}  # no frontmatter
    if not _LONG_NUMBER.search(fm):
        return {}
    found = {}
    for line in fm.splitlines():
        try:
            if line.startswith('"'):
                key, end = _KEY.raw_decode(line)
                value_text = line[end:].removeprefix(":")
            else:
                key, _, value_text = line.partition(":")
            big = _big_integer(json.loads(value_text))
        except (ValueError, RecursionError):
            continue  # not a JSON line
        if big is not None:
            found[str(key)] = big
    return found


def _refuse_big_integers(text: str, refuse: str, before: str | None = None) -> None:
    """Refuse an integer a node file cannot store (:func:`_big_integers`) that ``text``
    brings (one already in ``before``, a file written outside, is no edit's doing)."""
    had = _big_integers(before) if before is not None else {}
    for key, big in _big_integers(text).items():
        if had.get(key) != big:
            raise ToolError(
                refuse + f"field {key!r} {number_problem(big)}; write it as a string in quotes "
                "to keep every digit"
            )


#: The frontmatter keys of a LangGraph item (``md_cg.integrations.langgraph_store``'s
#: ``KEY_FIELD``, ``BODY_FIELD``, ``VALUE_FIELD``; that module imports langgraph, an
#: optional extra, so they are named here).
LANGGRAPH_KEY, LANGGRAPH_BODY, LANGGRAPH_VALUE = "langgraph_key", "langgraph_body", "langgraph_value"


def _derived_body(node: Node) -> bool:
    """Whether ``node`` is a LangGraph item whose body is generated: a value without a
    text field (no ``langgraph_body``) is read from ``langgraph_value`` alone, and its
    body is a readable rendering of it that the next put writes again."""
    return isinstance(node.extra.get(LANGGRAPH_KEY), str) and not isinstance(
        node.extra.get(LANGGRAPH_BODY), str
    )


def _refuse_derived_body(node: Node, current: Node, p: _Path, refuse: str) -> None:
    """Refuse an edit of the body of a LangGraph item whose body is generated: it was
    acknowledged, yet the item's ``get`` kept the old value and its next put wrote the
    body over. An edit of its frontmatter (``langgraph_value``) goes through."""
    if node.body == current.body or not (_derived_body(current) or _derived_body(node)):
        return
    item = current if _derived_body(current) else node
    raise ToolError(
        refuse + f"the body of {p.text} is generated from its {LANGGRAPH_VALUE} (the LangGraph item "
        f"{short_repr(item.extra[LANGGRAPH_KEY])}, whose value has no text field), so an edit of the body "
        "would not change the item and its next put would write the body over; change the item "
        f"through the LangGraph store (put), or edit the {LANGGRAPH_VALUE} line of the frontmatter"
    )


def _refuse_past_expiry(node: Node, refuse: str) -> None:
    """Refuse an ``expires_at`` already past: the memory would vanish as it is written."""
    if node.expires_at is not None and node.expires_at <= time.time():
        raise ToolError(
            refuse + f"expires_at {format_instant(node.expires_at)} is in the past, so the memory would "
            "vanish at once (delete it instead, or give a later time)"
        )


def _occurrence_lines(text: str, needle: str) -> list[int]:
    """The 1-based line of each occurrence of ``needle`` in ``text`` (overlapping ones too).

    Linear: the line ends are counted from the previous occurrence, not from the start
    (counting from the start took 11.5 s for 200,000 occurrences, under the node's lock)."""
    lines, line, at, start = [], 1, 0, text.find(needle)
    while start != -1:
        line += text.count("\n", at, start)
        lines.append(line)
        at, start = start, text.find(needle, start + 1)
    return lines


#: Line numbers a "Multiple occurrences" refusal names before it says how many more.
MAX_OCCURRENCE_LINES = 20


def _occurrences(text: str, needle: str) -> str:
    """Where ``needle`` occurs in ``text`` (more than once), for a refusal: its count and
    its distinct lines, at most :data:`MAX_OCCURRENCE_LINES` of them, then how many more
    (a 3 MB file of one repeated word made a 2.5 million character reply)."""
    found = _occurrence_lines(text, needle)
    lines = list(dict.fromkeys(found))
    shown = "in lines: " + ", ".join(map(str, lines[:MAX_OCCURRENCE_LINES]))
    more = len(lines) - MAX_OCCURRENCE_LINES
    if more > 0:
        return shown + f" and {more:,} more lines ({len(found):,} occurrences)"
    # as the reference backend says it when each occurrence has its own line
    return shown + (f" ({len(found):,} occurrences)" if len(found) > len(lines) else "")


def _nearest_line(text: str, needle: str, line: int) -> int:
    """The 0-based line of the occurrence of ``needle`` closest to ``line`` (``line`` if none)."""
    found = [n - 1 for n in _occurrence_lines(text, needle)]
    return min(found, key=lambda n: abs(n - line)) if found else line


def _lines_range(view_range: list[int] | None, n: int, path: str, chars: bool = False) -> tuple[int, int]:
    """The 1-based first and last line to show; ``[start, -1]`` runs to the end. ``chars``:
    a third number may follow (a file's, :func:`_start_char`)."""
    if not view_range:
        return 1, n
    sizes = (2, 3) if chars else (2,)
    if len(view_range) not in sizes or not all(isinstance(v, int) for v in view_range):
        more = ", or [start, end, character] to begin at a character of line start (a long line)"
        raise ToolError(
            f"Invalid `view_range` {short_repr(view_range)} for {path}: give two line numbers "
            "[start, end]" + (more if chars else "")
        )
    start, end = view_range[:2]
    end = n if end == -1 else end
    if not 1 <= start <= max(n, 1) or end < start or end > n:
        raise ToolError(
            f"Invalid `view_range` {short_repr(view_range)} for {path}: it should be within the range of "
            f"lines of the file, [1, {n}], with end >= start or end = -1"
        )
    return start, end


def _start_char(view_range: list[int] | None, lines: list[str], first: int, path: str) -> int:
    """The character of line ``first`` a file's view begins at: the third number of
    ``view_range`` (1-based), 1 when there is none. A line longer than a view is read in
    pieces this way; a number past the line's end is refused."""
    if not view_range or len(view_range) < 3:
        return 1
    size = len(lines[first - 1]) if lines else 0
    if not 1 <= view_range[2] <= max(size, 1):
        raise ToolError(
            f"Invalid `view_range` {short_repr(view_range)} for {path}: its third number is the "
            f"character of line {first} to start at, within [1, {max(size, 1)}] (the line is "
            f"{size:,} characters long)"
        )
    return view_range[2]


class _OnStore:
    """What both tool classes share: the store they run on, and closing it when they opened it."""

    store: MdCG
    files: MemoryFiles
    _owned: bool

    def _attach(
        self, store: MdCG | str | os.PathLike[str], max_listing: int, scope: Scope | None, max_view: int
    ) -> None:
        if isinstance(store, MdCG):
            if scope is not DEFAULT_SCOPE:
                raise TypeError(
                    "pass scope only when the tool opens the store (an open MdCG has its own scope)"
                )
            self.store, self._owned = store, False
        else:
            self.store, self._owned = MdCG(store, scope=scope), True
        self.files = MemoryFiles(self.store, max_listing=max_listing, max_view=max_view)

    def close(self) -> None:
        """Close the store if this tool opened it."""
        if self._owned:
            self.store.close()

    def keep_files(self) -> list[str]:
        """Make long-term every memory this handle sees that md-cg put on a timer by its
        words (files the tool wrote before files lasted: "Remind me to renew the passport
        tomorrow" would expire and be swept), expired ones not yet swept included; a
        timer a caller or a frontmatter asked for is kept. Returns the ids changed.

        Not run by itself: the tool cannot tell its own files from memories other md-cg
        clients (``remember``) stored on purpose with a timer, so call it on a store the
        tool has to itself (once, after upgrading; docs/integrations.md)."""
        changed = []
        for entry in self.store.entries(include_expired=True, include_archived=True):
            timed = entry.retention_tier == "temp" or entry.expires_at is not None
            if timed and self.files.keep_if_timed_by_words(entry.id):
                changed.append(entry.id)
        return changed

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MdCGMemoryTool(_OnStore, BetaAbstractMemoryTool):
    """Claude's memory tool (``memory_20250818``) on an md-cg store; see the module docstring.

    ``store`` is an open :class:`~md_cg.MdCG` (the caller closes it, and its
    scope is the tool's) or a folder (opened here, closed by :meth:`close` or
    the ``with`` block). A folder is opened in ``scope``: by default
    :data:`DEFAULT_SCOPE`, the scope ``mdcg mcp`` serves in by default (no
    agent, no workspace, sensitivity up to ``normal``: memories of an agent or
    a workspace and ``private``/``secret`` ones are not shown); pass a
    :class:`~md_cg.Scope`, or ``None`` for an unscoped handle that sees every
    memory. ``max_listing`` bounds a folder listing (lines), ``max_view`` a
    ``view`` of a whole file (characters; ``view_range`` shows the rest).
    """

    def __init__(
        self,
        store: MdCG | str | os.PathLike[str],
        *,
        scope: Scope | None = DEFAULT_SCOPE,
        max_listing: int = MAX_LISTING,
        max_view: int = MAX_VIEW_CHARS,
        cache_control: Any = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._attach(store, max_listing, scope, max_view)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self.files.view(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self.files.create(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self.files.str_replace(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self.files.insert(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self.files.delete(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self.files.rename(command)


class AsyncMdCGMemoryTool(_OnStore, BetaAsyncAbstractMemoryTool):
    """The async form of :class:`MdCGMemoryTool` (each command runs in a worker thread);
    ``async with`` closes the store it opened, as ``with`` does for the sync tool."""

    def __init__(
        self,
        store: MdCG | str | os.PathLike[str],
        *,
        scope: Scope | None = DEFAULT_SCOPE,
        max_listing: int = MAX_LISTING,
        max_view: int = MAX_VIEW_CHARS,
        cache_control: Any = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self._attach(store, max_listing, scope, max_view)

    async def _run(self, fn: Callable[[Any], str], command: Any) -> str:
        return await run_sync(fn, command)

    async def __aenter__(self) -> AsyncMdCGMemoryTool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the store if this tool opened it (as ``with`` does), in a worker thread."""
        await run_sync(self.close)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(self.files.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(self.files.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(self.files.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(self.files.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(self.files.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(self.files.rename, command)
