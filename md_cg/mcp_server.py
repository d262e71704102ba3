"""The md-cg MCP server: an agent's long-term memory over stdio (DESIGN §13).

``mdcg mcp --root DIR`` (or :func:`run_server`) serves one store with the
official MCP SDK (``mcp`` 2.x, the ``md-cg[mcp]`` extra). Tools:
``remember``, ``update``, ``get``, ``list``, ``search`` (and its alias
``recall``), ``neighbours``, ``verify``, ``reflect``, ``forget``, ``sync``
and ``health``; each is a thin call into :class:`md_cg.MdCG`. docs/mcp.md
describes every tool, its reply and its size budget.

Replies are one compact JSON object, sent as the text block the model reads
and, unchanged, as structured content. Every reply is bounded: a search
result carries a snippet of its body (``get`` returns the body, a long one in windows),
lists are paged or capped with a total, and what would repeat per result
(the reason for a state) is given once in ``reasons``. Results without
evidence of being about the query (the ladder's filler) are left out unless
the call asks for them with ``fill: true``.

Before each tool call the server picks up files edited by hand
(:meth:`md_cg.MdCG.sync_if_changed`: cheap when nothing changed). Calls are
serialised by one lock: the SDK runs synchronous tools in worker threads and
one store object serves them all.

Errors: a library error (unknown id, bad verdict, bad layer, empty body...),
a bad argument value and an argument the tool does not take come back as a
tool error (``is_error``) with a one-line message whose hints name only this
server's tools; the server keeps serving. So is a write the store's folder
refuses (a full disk, a read-only file system, permission denied: the file is
named, :func:`not_writable_message`). Anything else is logged with its
traceback on stderr and reported as a generic tool error. Nothing but the
protocol is ever written to stdout. A read-only store (``create_server(root,
read_only=True)``, ``mdcg mcp --read-only``) is served with the reading tools
alone.

Optional aliases (``aliases=("mcp-memory", "mem0")``, ``mdcg mcp --aliases``)
add the tool names of the MCP reference memory server and of mem0
(:mod:`md_cg.integrations.aliases`).
"""

from __future__ import annotations

import contextvars
import dataclasses
import errno
import functools
import hashlib
import inspect
import itertools
import os
import re
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import orjson
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from md_cg import (
    EDGE_TYPES,
    LAYERS,
    VERIFICATION_BASES,
    DuplicateIdError,
    Edge,
    Entry,
    InvalidArgumentError,
    MalformedNodeFileError,
    MdCG,
    MdcgError,
    Neighbour,
    Node,
    NodeNotFoundError,
    OtherMemoriesError,
    ProtectedNodeError,
    ReadablePick,
    ReadOnlyStoreError,
    Scope,
    SearchResult,
    __version__,
    is_fact,
    is_out_of_room,
    record_failed,
    resurface_readable,
    was_applied,
    was_logged,
    was_recovering,
    with_departure,
)
from md_cg.pickups import PickUps
from md_cg.render import (
    LOGGED_WRITE,
    LOST_FIXES,
    RECOVERING_WRITE,
    SNIPPET_CHARS,
    applied_write,
    current_version,
    cut_back,
    distinct_labels,
    iso,
    iso_window,
    node_dict,
    parse_when,
    recorded_write,
    retention,
    snippet,
    verdict_dict,
)

SERVER_NAME = "md-cg"
#: Characters of a ``query`` (search, recall, reflect, inject): a question or a user's
#: message, not a document. Longer is refused by the schema (``maxLength``), before any
#: work: a query costs time in its length after NFKC (U+FDFA is 18 characters), and
#: 50,000 characters of U+FDFA took 2.0-2.4 s through the server before session 38.
MAX_QUERY_CHARS = 10_000
#: Most results a search returns (``k``), memories a ``list`` page holds, neighbours listed.
MAX_K = 50
MAX_LIST = 100
MAX_NEIGHBOURS = 200
#: Items of an unbounded report (health findings, sync lists, dangling edges) listed before "+N more".
REPORT_ITEMS = 20
#: Characters kept of a reason, a finding's detail, a term.
REASON_CHARS = 160
TERM_CHARS = 40
#: Matched terms and tags listed per result.
TERMS_SHOWN = 8
TAGS_SHOWN = 8
#: The largest ``offset`` of ``list`` (a page beyond every store; JSON integers stay exact).
MAX_OFFSET = 2**53
#: Characters of an ``inject`` item's text (``MdCG.inject`` gives at most as many).
INJECT_TEXT_CHARS = 480
#: Characters of a reply the shown tags of one memory take at most.
TAG_CHARS = 200
#: Buckets listed in a search's meta (a big-domain route may name many).
BUCKETS_SHOWN = 10
#: The lists of a sync reply (each capped at REPORT_ITEMS).
SYNC_LISTS = (
    "added", "changed", "deleted", "moved", "malformed", "duplicates", "refused", "twins", "conflicts",
    "returned", "left_as_edited", "temp_removed", "hidden", "finished_deletes", "foreign_deletes",
    "old_files_removed",
)  # fmt: skip
#: Characters kept of an error reply.
ERROR_CHARS = 600
#: Characters kept of a title in a result, a list item or a neighbour.
TITLE_CHARS = 120
#: Characters of a memory's body a ``get`` reply holds by default, and at most
#: (``max_chars``); a longer body is read in windows (``offset``).
GET_CHARS = 20_000
MAX_GET_CHARS = 100_000
#: A memory's frontmatter as a reply shows it (``get``, and an alias answering with ``get``'s
#: reply): a string of at most FIELD_CHARS characters (the evidence limit, so ``verify``'s
#: evidence and a supersede reason show whole), a list or object of at most FIELD_ITEMS items
#: (every tag a write here can give), FRONTMATTER_CHARS characters in all (the 22 entries of
#: a full verification history with 1,000-character evidence fit). A file may hold more (a
#: frontmatter of 256 KiB: 20,000 tags, one 100,000-character value): the reply counts what
#: it leaves out, and the file at its ``path`` holds it all.
FIELD_CHARS = 1_000
FIELD_ITEMS = 64
FRONTMATTER_CHARS = 30_000
#: What ``get``'s reply holds besides the body window and the frontmatter: id, layer, path,
#: superseded_by, the window's figures, ``frontmatter_clipped`` (at most REPORT_ITEMS fields)
#: and the notes.
GET_REST_CHARS = 5_000
#: The longest tag and the most tags a write through this server takes (``remember``,
#: ``update``, the aliases built on them): a tag is a label, as long as a scope name or a
#: frontmatter key may be (200), and 64 of them (FIELD_ITEMS: ``get`` shows every one,
#: about 13,000 characters at most, 5% of the frontmatter limit). A tag the memory already
#: holds (a hand-written file) is not new input: an update may keep it.
MAX_TAG_CHARS = 200
MAX_TAGS = FIELD_ITEMS
#: The longest ``supersede`` reason: it is kept in the new memory's frontmatter (its
#: ``supersedes`` edge), as ``verify``'s evidence is, under the same limit
#: (``md_cg.loop.MAX_EVIDENCE_CHARS``, past the public API this surface may import; a test
#: holds the two equal).
MAX_REASON_CHARS = FIELD_CHARS
#: The largest memory file, in bytes of UTF-8 (frontmatter and body; ``md_cg.node.MAX_FILE_BYTES``,
#: past the public API: a test holds the two equal). The body's limit, as the tools say it.
MAX_FILE_BYTES = 4 * 1024 * 1024
FILE_MIB = MAX_FILE_BYTES // 2**20

#: The closed sets of values an argument takes that the public API does not export (a test
#: holds each equal to the library's: ``md_cg.merge.VERDICTS``, ``md_cg.graph.DIRECTIONS``,
#: ``md_cg.organize.MODES``, ``md_cg.judge.STATES``). With LAYERS, VERIFICATION_BASES and
#: EDGE_TYPES they are the ``enum`` of the arguments' input schemas (:func:`one_of`).
VERDICTS = ("confirmed", "weakened", "falsified")
DIRECTIONS = ("out", "in", "both")
ORGANIZE_MODES = ("dryRun", "apply")
STATES = ("ACCEPT", "REJECT", "DEFER", "BLINDSPOT")
#: ``md_cg.dedupe.CANDIDATE_LAYERS`` (the memory layers but the negative ones),
#: ``md_cg.organize.ACTIONS`` and ``md_cg.organize.MAX_CANDIDATES`` (a test holds them equal):
#: the item schemas of ``organize``'s candidates and decisions.
CANDIDATE_LAYERS = ("anchor", "structural", "knowledge", "contextual", "self")
ORGANIZE_ACTIONS = ("save", "discard", "archive")
MAX_CANDIDATES = 50


def _candidate_items() -> dict[str, Any]:
    """The item schema of ``organize``'s candidates: the keys every candidate needs, and its
    tags (the optional keys ``md_cg.dedupe.normalize_candidate`` also reads are named in the
    description: the tool list's budget keeps the schema short; the library ignores unknown
    keys and takes the seed's ``type`` for ``layer``). The schema only shows them; a bad value
    is the library's ``skipped`` entry naming field and value (before: ``{"type": "object"}``
    alone, session 37's second MCP review, F-E)."""
    return {
        "items": {
            "type": "object",
            "properties": {
                "layer": {"type": "string", "enum": list(CANDIDATE_LAYERS)},
                "title": {"type": "string"},
                "content": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["layer", "title", "content"],
        }
    }


def _decision_items() -> dict[str, Any]:
    """The item schema of ``organize``'s decisions: ``save`` / ``discard`` take a candidate's
    ``index`` in the dry run, ``archive`` the ``id`` of a stored memory (``md_cg.organize``)."""
    return {
        "items": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(ORGANIZE_ACTIONS)},
                "index": {"type": "integer", "minimum": 0},
                "id": {"type": "string"},
            },
            "required": ["action"],
        }
    }


def one_of(values: Sequence[str]) -> dict[str, Any]:
    """The JSON-schema ``enum`` of an argument that takes one of ``values`` (a pydantic
    ``json_schema_extra``). The schema shows them; the check stays the library's, so a wrong
    value gets its message (``unknown layer 'Self'; expected one of: anchor, ...``), not
    pydantic's. Before session 37's MCP review these arguments were free strings in the schema."""
    return {"enum": list(values)}


#: Control characters but tab, newline and carriage return: each would take six
#: characters of a reply (\u0001), so replies show U+FFFD for them.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
#: Characters JSON writes as two (a budget counts the reply's characters).
_ESCAPED_TWICE = frozenset('"\\\n\r\t')


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters *of the reply* (JSON writes ``"``, ``\\`` and line
    breaks as two), the last one an ellipsis when cut, never inside a grapheme cluster
    (:func:`md_cg.render.cut_back`); control characters shown as U+FFFD."""
    text = _CONTROL.sub("\ufffd", text)
    if len(text) * 2 <= width or len(text) + sum(map(text.count, _ESCAPED_TWICE)) <= width:
        return text
    used = 0
    for i, ch in enumerate(text):
        used += 2 if ch in _ESCAPED_TWICE else 1
        if used > width - 1:
            return text[: cut_back(text, i)] + "…"  # never parting a grapheme cluster
    return text


def _has_surrogate(value: Any, depth: int = 0) -> bool:
    """Whether a tool argument holds a lone surrogate anywhere (it cannot be stored or replied)."""
    if isinstance(value, str):
        return not value.isascii() and any("\ud800" <= c <= "\udfff" for c in value)
    if depth < 8 and isinstance(value, dict):
        return any(_has_surrogate(k, depth + 1) or _has_surrogate(v, depth + 1) for k, v in value.items())
    if depth < 8 and isinstance(value, list | tuple):
        return any(_has_surrogate(v, depth + 1) for v in value)
    return False


def _plain_strings(value: Any) -> Any:
    """``value`` (a reply) with control characters in its strings shown as U+FFFD."""
    if isinstance(value, str):
        return _CONTROL.sub("\ufffd", value) if _CONTROL.search(value) else value
    if isinstance(value, dict):
        return {k: _plain_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_strings(v) for v in value]
    return value


@dataclass(frozen=True)
class Budget:
    """The most characters a tool's reply text may take: ``base + per_item * n``.

    ``n`` is the value of the argument named ``per`` (``k``, ``limit``, ``get``'s
    ``max_chars``: its body window, a character taking two at most as JSON writes
    it; its frontmatter is clipped to FRONTMATTER_CHARS). docs/mcp.md shows this table.
    """

    base: int
    per_item: int = 0
    per: str = ""

    def chars(self, n: int = 0) -> int:
        return self.base + self.per_item * n


#: Successors named in an ``update`` reply whose ``supersedes`` edge a reopen removed.
UNLINKED_SHOWN = 3

#: The size budget of every tool's reply (tests hold the server to it).
BUDGETS: dict[str, Budget] = {
    "remember": Budget(1_500),
    "update": Budget(2_000),
    "forget": Budget(1_000 + 300 * REPORT_ITEMS),
    "supersede": Budget(1_500),
    "search": Budget(3_000, 1_300, "k"),
    "recall": Budget(3_000, 1_300, "k"),
    "get": Budget(FRONTMATTER_CHARS + GET_REST_CHARS, 2, "max_chars"),
    "list": Budget(300, 700, "limit"),
    "neighbours": Budget(300, 520, "limit"),
    "verify": Budget(1_000),
    "reflect": Budget(1_000, 300, "k"),
    "organize": Budget(2_000, 900, "candidates"),
    "recall_stats": Budget(6_000),
    "on_this_day": Budget(1_000),
    "inject": Budget(300, 800, "max_items"),
    "sync": Budget(2_000 + len(SYNC_LISTS) * REPORT_ITEMS * (REASON_CHARS + 10)),
    "health": Budget(3_000 + REPORT_ITEMS * 5 * (REASON_CHARS + 10)),
}

#: What each tool does to the store, for clients that approve calls (MCP tool
#: annotations): memories it never changes (it may record recall statistics in
#: ``.mdcg/``, local state), memories it may replace or delete, and whether the
#: same call twice does no more than once. Every tool works on this store alone.
READ_ONLY = frozenset(
    {"search", "recall", "get", "list", "neighbours", "recall_stats", "on_this_day", "inject", "health"}
)
DESTRUCTIVE = frozenset({"remember", "update", "forget", "organize"})  # overwrite, replace, delete, merge
#: on_this_day is not: each call records its show, which the next call's pick and show_count depend on.
IDEMPOTENT = (READ_ONLY - {"on_this_day"}) | {"update", "supersede", "sync"}


def tool_annotations(tools: Iterable[str]) -> ToolAnnotations:
    """The annotations of a tool that calls ``tools`` (one tool, or an alias's several)."""
    names = set(tools)
    read_only = names <= READ_ONLY
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=None if read_only else bool(names & DESTRUCTIVE),
        idempotent_hint=names <= IDEMPOTENT,
        open_world_hint=False,
    )


INSTRUCTIONS = """\
Long-term memory: one Markdown file per memory. Call `search` before answering \
from memory or repeating past work; `get` reads one memory (a long body in windows).
Each result has a `state`:
- ACCEPT: fit to act on (verification basis declared, no condition against it).
- REJECT: one of its not-applicable conditions is hit by your query or context: \
do not act on it here.
- DEFER: use with care: an unverified fact or procedure (no verification basis), \
one whose confidence evidence drove low, or a hit with no evidence of being about your query.
- BLINDSPOT: a procedure whose annotation is incomplete (marks such as \
"# Applies when:" missing): you cannot tell when it applies.
A plain fact ("the user's name is Sam") is not a warning: ACCEPT with a \
verification basis, DEFER without. `why` points into `reasons`.
Hits with no evidence of being about the query are left out unless fill=true.
`meta.covered_neg`: falsified hypotheses and open questions your query matches \
(at most 5; covered_neg_total counts all): read them before repeating an idea.
Write with `remember`, change with `update`, record checks with `verify`, rate \
a search with `reflect`, remove with `forget` (with a reason). When a fact changes, \
`remember` the new one and `supersede` the old: search then shows the current one. Before saving \
several memories, `organize` (dryRun, then apply) finds near-duplicates. Files \
edited by hand are picked up before each call.
"""

_F = TypeVar("_F", bound=Callable[..., Any])
Tools = dict[str, Callable[..., dict[str, Any]]]


# -- errors -------------------------------------------------------------------------


def _message(exc: Exception) -> str:
    """The one-line message of a library error, with hints that name this server's tools;
    each word clipped (a megabyte-long id quoted in it), the hint after it kept."""
    return " ".join(clip(word, REASON_CHARS) for word in _hinted(exc).split())


def _hinted(exc: Exception) -> str:
    if isinstance(exc, OtherMemoriesError):  # the library's words name the CLI's flags and calls
        label, verb = repr(exc.node_id), exc.verb
        why = " --reason WHY" if verb == "forget" else ""
        return (
            f"cannot {verb} {label}: other files hold this id with a different memory "
            f"({', '.join(exc.others)}; {exc.shown} is the one shown), and would go with it: nothing "
            "was changed. No tool here removes a memory you were not shown: tell the user, who can "
            f"give that file its own id (`mdcg rename {label} NEW_ID --path {exc.others[0]}`; then "
            f"{verb} {label} again) or {verb} every file of the id (`mdcg {verb} {label} --all-copies{why}`)"
        )
    if isinstance(exc, DuplicateIdError) and exc.untracked:
        return (
            f"the file {exc.path} holds id {exc.node_id!r} and the index does not know it: "
            "the `sync` tool takes it in if it can be read (then `update` it; `health` names a file "
            "that cannot), or call `remember` with overwrite=true to replace it"
        )
    if isinstance(exc, DuplicateIdError) and exc.unreadable and not exc.path:  # a scoped server's
        return (
            f"id {exc.node_id!r} is taken by a file that cannot be read as a memory, whose owner this "
            "server's scope is not told (a person should run `mdcg health` on the store: it names the "
            "file); choose another id"
        )
    if isinstance(exc, DuplicateIdError) and not exc.path and not exc.archived:
        return f"id {exc.node_id!r} is taken by a memory outside this server's scope; choose another id"
    if isinstance(exc, DuplicateIdError) and exc.plain:  # else the library's own words
        return (
            f"a memory with id {exc.node_id!r} already exists ({exc.path}); change it with the "
            "`update` tool, or call `remember` with overwrite=true to replace it"
        )
    if isinstance(exc, ReadOnlyStoreError):
        return f"{exc}; nothing was written: this server serves the store read-only (the reading tools work)"
    if isinstance(exc, ProtectedNodeError):
        return (
            f"memory {exc.node_id!r} is in anchor/ and protected from forgetting; "
            "call `forget` with force=true to forget it anyway"
        )
    if isinstance(exc, NodeNotFoundError) and exc.hidden == "archived":
        # no tool unarchives: say who can
        return (
            f"memory {exc.node_id!r} is archived: out of every read until a person runs "
            f"`mdcg unarchive {exc.node_id}`"
        )
    if isinstance(exc, NodeNotFoundError) and exc.hidden == "lost" and exc.fix in LOST_FIXES:
        # said with this server's tool, not the command line's or the library's (session 39, F4)
        return str(exc).replace(exc.fix, LOST_FIXES[exc.fix])
    if isinstance(exc, NodeNotFoundError) and exc.hidden == "expired" and exc.fix:
        # a write to it: say how to renew it with this server's tools
        return (
            f"memory {exc.node_id!r}: {exc.hint}; renew it to change it: call `update` with "
            "tier='long' (and the change)"
        )
    return str(exc)


def _tool_errors(fn: _F, store: MdCG | None = None) -> _F:
    """Report library errors (and bad argument values, and a full disk) as tool errors with
    their message; with ``store``, an unknown id's says what became of it, if the store knows."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return _applied_told(fn, *args, **kwargs)
        except NodeNotFoundError as exc:
            told = exc if store is None else with_departure(store, exc)
            raise ToolError(_message(told)) from exc
        except (MdcgError, ValueError) as exc:
            raise ToolError(_message(exc)) from exc
        except OSError as exc:
            if exc.errno is not None and exc.errno != errno.EIO and (log := record_failed(exc)):
                # the write landed; only its record after it failed: no retry, no "nothing lost"
                what = exc.strerror or os.strerror(exc.errno)
                if store is not None and "(in the store at " not in what:
                    what += f" (in the store at {store.root})"
                said = f"{what}; {recorded_write(log)}"
                raise ToolError(" ".join(clip(word, REASON_CHARS) for word in said.split())) from exc
            if is_out_of_room(exc):
                full = f"{exc.strerror}: the store's disk is full"
                raise ToolError(f"{full}; nothing stored was lost, retry after making room") from exc
            text = not_writable_message(exc, None if store is None else store.root)
            if text is None:
                raise  # a bug or a failing disk: logged with its traceback (MemoryServer.call_tool)
            raise ToolError(text) from exc

    return wrapper  # type: ignore[return-value]


def _applied_told(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; an error raised once every file of its write was in place
    (only the fsync of their folders failed: :func:`md_cg.was_applied`) is a tool error
    saying the write is in place (:func:`md_cg.render.applied_write`) -- not "nothing stored
    was lost, retry", nor, of a failing disk (``EIO``), an unexpected error."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if not was_applied(exc):
            raise
        what = (exc.strerror or os.strerror(exc.errno or 0)) if isinstance(exc, OSError) else str(exc)
        said = applied_write(what)
        raise ToolError(" ".join(clip(word, REASON_CHARS) for word in said.split())) from exc


def not_writable_message(exc: OSError, root: os.PathLike[str] | str | None = None) -> str | None:
    """The one-line tool error of a write the store's folder refused (read-only file system,
    permission denied), naming the file (and the store ``root``, unless the library's message
    does); None for any other OS error. Each word is clipped (a long path), so the line
    stays bounded. A write interrupted after its commit line (:func:`md_cg.was_logged`)
    says it was logged and is completed later, not that the server cannot write."""
    if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
        return None
    where = f"{exc.filename}" if exc.filename else ""
    if exc.filename and exc.filename2:
        where = f"{exc.filename} -> {exc.filename2}"
    what = exc.strerror or os.strerror(exc.errno)
    if root is not None and "(in the store at " not in what:
        what += f" (in the store at {root})"
    text = f"{what}: {where}" if where else what
    if was_recovering(exc):  # an earlier interrupted write it was finishing: not this call's
        text += f"; {RECOVERING_WRITE}"
    elif was_logged(exc):  # a write interrupted after its commit line: part of it may be on disk
        text += f"; {LOGGED_WRITE}"
    elif exc.errno == errno.EROFS:
        text += (
            "; the store's file system is read-only, so this server cannot write to it: "
            "the reading tools (search, get, list...) work, writing needs it mounted writable"
        )
    else:
        text += (
            "; this server may not write to the store (its files or folders are not writable by "
            "the user it runs as): the reading tools (search, get, list...) work"
        )
    return " ".join(clip(word, REASON_CHARS) for word in text.split())


# -- the server ---------------------------------------------------------------------------


class MemoryServer(MCPServer):
    """An :class:`MCPServer` for one store.

    Every tool it registers (:meth:`add_tool`, aliases included) refuses
    arguments it does not take, runs under the store's lock after picking up
    hand edits, and replies with compact JSON (text block and structured
    content). ``tools`` maps each name to the plain function (a dict reply),
    which is what :mod:`md_cg.integrations.aliases` builds on: a memory's reply
    (``get``'s) comes from it with the whole frontmatter, which an alias reads
    (every tag, every edge) and the served reply clips (:func:`node_reply`).
    """

    def __init__(self, store: MdCG, **settings: Any) -> None:
        super().__init__(SERVER_NAME, **settings)
        self.store = store
        self.tools: Tools = {}
        self._params: dict[str, frozenset[str]] = {}
        self._lock = threading.RLock()  # an alias calls other tools under the same lock
        #: what the pick-ups before each call took in since the last `sync` call, which tells it
        self.picks = PickUps(_looker(store))
        #: Tools (and aliases) not offered because the store is read-only; a call names why.
        self.withheld: frozenset[str] = frozenset()

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Any = None,
        icons: Any = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        """Register ``fn`` (returning a dict) as a tool; see the class docstring.

        ``structured_output`` is ignored: the reply is built here, compact and unchanged.
        """
        tool_name = name or fn.__name__
        if annotations is None and tool_name in BUDGETS:  # one of ours (an alias brings its own)
            annotations = tool_annotations([tool_name])
        self.tools[tool_name] = fn
        self._params[tool_name] = frozenset(inspect.signature(fn).parameters)
        super().add_tool(
            self._served(fn, tool_name),
            name=tool_name,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            meta=meta,
            structured_output=False,
        )

    def _served(self, fn: Callable[..., dict[str, Any]], name: str) -> Callable[..., CallToolResult]:
        @functools.wraps(fn)
        def tool(**kwargs: Any) -> CallToolResult:
            with self._lock:
                self.picks.note(_tool_errors(self.store.sync_if_changed)())
                serving = _SERVING.set(name)  # what the agent called (an alias calls others)
                try:
                    data = _plain_strings(node_reply(_tool_errors(fn)(**kwargs)))
                finally:
                    _SERVING.reset(serving)
            text = orjson.dumps(data).decode()
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

        return tool

    def warm(self) -> None:
        """Pick up files edited while no server ran, before the first tool call asks.

        The first pick-up compares every file with the index (~1 s at 100k
        nodes): :func:`run_server` runs this in a thread at start, so the
        first call finds it done, or waits for it under the lock. A failure is
        logged here and met again, as a tool error, by the first call."""
        with self._lock:
            try:
                self.picks.note(self.store.sync_if_changed())
            except Exception as exc:  # the first call tries again and reports it
                print(f"md-cg: picking up hand edits at start failed: {exc}", file=sys.stderr)

    async def list_tools(self) -> list[Any]:
        """The tools, with lean input schemas (see :func:`lean_schema`)."""
        tools = await super().list_tools()
        return [t.model_copy(update={"input_schema": lean_schema(t.input_schema)}) for t in tools]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> Any:  # the SDK's result types
        if name in self.withheld:
            raise ToolError(
                f"{name}: this server serves the store read-only (`mdcg mcp --read-only`), so it does "
                f"not offer `{name}`; nothing was written. It offers: {', '.join(sorted(self.tools))}"
            )
        accepted = self._params.get(name)
        if accepted is not None:
            unknown = sorted(set(arguments) - accepted)
            if unknown:
                names = clip(", ".join(unknown), REASON_CHARS)
                takes = f"it takes: {', '.join(sorted(accepted))}" if accepted else "it takes no arguments"
                raise ToolError(f"{name} does not take {names} ({takes})")
        for key, value in arguments.items():
            if _has_surrogate(value):
                raise ToolError(
                    f"{name}: argument {clip(key, TERM_CHARS)!r} holds a lone surrogate "
                    "(U+D800-U+DFFF), which is not text"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError):
                # not the caller's doing (a bug, a failing disk): the log gets the whole story
                # (docs/mcp.md); the SDK's own wrappers are skipped down to what was raised
                root: BaseException | None = cause
                while isinstance(root, ToolError) and root.__cause__ is not None:
                    root = root.__cause__
                traceback.print_exception(root if root is not None else exc, file=sys.stderr)
            text = f"{name}: {_schema_problems(cause)}" if isinstance(cause, ValidationError) else str(exc)
            # bounded as every reply is: a library error may quote a megabyte-long argument
            raise ToolError(clip(text, ERROR_CHARS)) from cause


def _schema_problems(exc: ValidationError) -> str:
    """Arguments outside a tool's schema, in one line: ``argument 'k': input should be
    greater than or equal to 1 (got 0)`` (not pydantic's four lines and a web address)."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(x) for x in err.get("loc", ()))
        message = str(err.get("msg", "invalid")).replace("Input should", "input should")
        if err.get("type") == "missing":
            parts.append(f"argument {where!r} is required")
        elif err.get("type") == "string_too_long" and isinstance(err.get("input"), str):
            limit = int((err.get("ctx") or {}).get("max_length", 0))
            said = f"{len(err['input']):,} characters, over the limit of {limit:,}"
            parts.append(f"argument {where!r} is {said}")
        else:
            parts.append(f"argument {where!r}: {message} (got {clip(repr(err.get('input')), 80)})")
    return "; ".join(parts)


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema without what only repeats: titles derived from the
    parameter names, and the ``null`` of ``anyOf [X, ..., null]`` with ``default:
    null`` for an optional parameter (it is optional by not being ``required``;
    null is still accepted)."""
    out = {k: v for k, v in schema.items() if k != "title"}
    props = {}
    for name, prop in (schema.get("properties") or {}).items():
        p = {k: v for k, v in prop.items() if k != "title"}
        options = p.get("anyOf")
        if isinstance(options, list) and len(options) >= 2 and {"type": "null"} in options:
            rest = [o for o in options if o != {"type": "null"}]
            p.pop("anyOf")
            p = {**rest[0], **p} if len(rest) == 1 else {"anyOf": rest, **p}
            if p.get("default", 0) is None:
                p.pop("default")
        props[name] = p
    if props:
        out["properties"] = props
    return out


# -- replies --------------------------------------------------------------------------


def _capped(items: Sequence[Any], limit: int = REPORT_ITEMS) -> list[Any]:
    return list(items[:limit])


def _reason(r: SearchResult) -> str:
    basis = r.basis or ""
    prefix = f"{r.state}: "
    return clip(basis[len(prefix) :] if basis.startswith(prefix) else basis, REASON_CHARS)


def _result(r: SearchResult, reasons: dict[str, int], words: dict[str, str]) -> dict[str, Any]:
    ev = r.evidence
    d: dict[str, Any] = {"id": r.id, "title": clip(r.title, TITLE_CHARS), "layer": r.entry.layer}
    d["tier"] = r.tier
    if r.state is not None:
        d["state"] = r.state
        d["why"] = reasons.setdefault(_reason(r), len(reasons))
    d["score"] = round(r.score, 3)
    if r.entry.confidence is not None:
        d["confidence"] = r.entry.confidence
    matched = [*ev.get("terms", []), *ev.get("synonyms", [])]
    # the query's words as the agent wrote them, not their stems ("coffee", not "coffe"),
    # but a stemmed synonym as the memory's title says it ("booked" for "booking")
    said = {**words, **ev.get("words", {})}
    if matched:
        d["matched"] = [clip(said.get(t, t), TERM_CHARS) for t in matched[:TERMS_SHOWN]]
    if "fuzzy" in ev:
        d["fuzzy"] = ev["fuzzy"]
    if r.filler:
        d["filler"] = True
    if r.superseded_by:
        d["superseded_by"] = r.superseded_by
    d.update(_dated(r.entry))  # which fact is current, what a stored "tomorrow" meant
    # the window shows a matched word: a stem ("happi") or the word as said ("happy"), and a
    # match in the title line when the title above, cut, does not show it (session 37)
    # each term next to its word: the snippet looks for the first SNIPPET_TERMS of them (s38)
    looked_for = [w for t in matched for w in (t, said.get(t)) if w is not None]
    d["snippet"] = clip(snippet(r.node.body, looked_for, title=d["title"]), SNIPPET_CHARS)
    return d


def _negatives(store: MdCG, ids: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for node_id in ids:
        try:
            entry = store.entry(node_id)
        except MdcgError:
            continue  # forgotten since the search: nothing to show
        out.append({"id": node_id, "layer": entry.layer, "title": clip(entry.title, 80)})
    return out


def search_reply(
    store: MdCG, results: Sequence[SearchResult], meta: dict[str, Any], *, fill: bool = False
) -> dict[str, Any]:
    """The ``search`` reply: results (filler left out unless ``fill``), reasons once, counts, meta.
    A hit whose file a hand edit broke since the index read it is left out and counted
    (``meta.unreadable_omitted``, when any): before session 38 it failed the whole reply,
    quoting the file's new value."""
    shown = [r for r in results if fill or not r.filler]
    reasons: dict[str, int] = {}
    words = meta.get("words", {})
    items, kept, unreadable = [], [], 0
    for r in shown:
        try:
            items.append(_result(r, reasons, words))
        except NodeNotFoundError:
            continue  # its file changed by hand since the search (narrowed, moved): left out, as inject does
        except MalformedNodeFileError:
            unreadable += 1  # broken by hand since the index read it: left out, counted
            continue
        kept.append(r)
    counts: dict[str, int] = {}
    for r in kept:
        if r.state is not None:
            counts[r.state] = counts.get(r.state, 0) + 1
    buckets = list(meta["buckets"])
    return {
        "results": items,
        "reasons": list(reasons),
        "counts": counts,
        "meta": {
            "tier": meta["tier"],
            "routed": meta["routed"],
            "buckets": buckets[:BUCKETS_SHOWN],
            "buckets_total": len(buckets),
            **({"big_domain": meta["big_domain"]} if meta["big_domain"] is not None else {}),
            "scanned": meta["scanned"],
            "store_size": meta["store_size"],
            "covered_neg": _negatives(store, meta["covered_neg"]),
            "covered_neg_total": meta["covered_neg_total"],
            "filler_omitted": len(results) - len(shown),
            **({"unreadable_omitted": unreadable} if unreadable else {}),
            "ms": round(meta["timing_ms"]["total"], 1),
            **({"filter": _filter_reply(meta["filter"])} if "filter" in meta else {}),
        },
    }


def _dated(e: Entry) -> dict[str, Any]:
    """A memory's last change (ISO; left out when its file carries no time) and its first
    tags, clipped."""
    tags, room = [], TAG_CHARS
    for tag in e.tags[:TAGS_SHOWN]:
        shown = clip(tag, min(TERM_CHARS, room))
        room -= len(orjson.dumps(shown)) + 1
        if room < 0 or not shown:
            break
        tags.append(shown)
    updated = iso(e.updated_at if e.updated_at is not None else e.created_at)
    return {**({"updated": updated} if updated is not None else {}), "tags": tags}  # no time: left out


def _list_item(e: Entry) -> dict[str, Any]:
    """One memory of a ``list`` reply: id, layer, clipped title, last change, the first tags."""
    return {"id": e.id, "layer": e.layer, "title": clip(e.title, TITLE_CHARS), **_dated(e)}


def _filter_reply(window: dict[str, Any]) -> dict[str, Any]:
    """A search filter as the reply says it: the tag clipped, the times in ISO form; a part
    not given (``tag``, ``since``, ``until``) left out (it was null before session 37)."""
    tag = window["tag"]
    out: dict[str, Any] = {}
    if isinstance(tag, str):
        out["tag"] = clip(tag, TERM_CHARS)
    elif tag is not None:
        out["tag"] = [clip(t, TERM_CHARS) for t in tag[:TAGS_SHOWN]]
    out.update({key: iso_window(window[key]) for key in ("since", "until") if window[key] is not None})
    out["matching"] = window["matching"]
    return out


def _report_lists(report: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``report`` with each list in ``keys`` capped; the full lengths under ``totals``."""
    out: dict[str, Any] = {}
    totals: dict[str, int] = {}
    for key, value in report.items():
        if key in keys and isinstance(value, list | tuple):  # asdict keeps a report's tuples
            out[key] = [_clip_item(v) for v in _capped(value)]
            if value:
                totals[key] = len(value)
        else:
            out[key] = value
    out["totals"] = totals
    return out


#: The order findings are listed in (an error first: 5,000 expired memories must not hide
#: a merge conflict behind the cap, review r6).
SEVERITY_ORDER = ("error", "warning", "info")


def _health_reply(report: dict[str, Any]) -> dict[str, Any]:
    """``health``'s reply: one finding of every kind first (errors first), then the rest
    errors first, one of each kind in turn in each severity -- so the :data:`REPORT_ITEMS`
    listed show every kind they can (a scoped server's ``withheld`` behind 20 errors was
    cut); ``kinds`` counts each kind; a ``note`` says when some are not listed."""
    findings = [_given(f) for f in report["findings"]]  # a finding's path or node_id may be none
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        by_kind.setdefault(f["kind"], []).append(f)
    rank = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    kinds = sorted(by_kind, key=lambda k: rank.get(by_kind[k][0]["severity"], len(rank)))
    ordered: list[dict[str, Any]] = [by_kind[k][0] for k in kinds]
    for severity in dict.fromkeys(by_kind[k][0]["severity"] for k in kinds):
        rests = (by_kind[k][1:] for k in kinds if by_kind[k][0]["severity"] == severity)
        turns = itertools.zip_longest(*rests)
        ordered += [f for turn in turns for f in turn if f is not None]
    out = _report_lists({**report, "buckets": _given(report["buckets"]), "findings": ordered}, ("findings",))
    out["kinds"] = {k: len(by_kind[k]) for k in kinds}
    if len(ordered) > REPORT_ITEMS:
        out["note"] = (
            f"{REPORT_ITEMS} of {len(ordered):,} findings listed, errors first and every kind in turn "
            "(kinds counts them all); `mdcg health` lists every one"
        )
    return out


def _given(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` without those that are None: a reply leaves an empty field out (docs/mcp.md)."""
    return {k: v for k, v in fields.items() if v is not None}


def _clip_item(item: Any) -> Any:
    if isinstance(item, str):
        return clip(item, REASON_CHARS)
    if isinstance(item, dict):
        return {k: clip(v, REASON_CHARS) if isinstance(v, str) else v for k, v in item.items()}
    return item


# -- the tools ----------------------------------------------------------------------------

#: (The tool list's budget, tests/test_mcp_schema_s37.py, took the schema's maxLength from
#: this description: it said "Words or a short question, any language." before session 38.)
Query = Annotated[str, Field(description="Words, any language.", max_length=MAX_QUERY_CHARS)]
K = Annotated[int, Field(description="Most results.", ge=1, le=MAX_K)]
Layer = Annotated[str | None, Field(description="Only this layer.", json_schema_extra=one_of(LAYERS))]
#: The layer ``update`` moves a memory to (``remember``'s has a default: in its signature).
NewLayer = Annotated[
    str | None, Field(description="Move it to this layer.", json_schema_extra=one_of(LAYERS))
]
Context = Annotated[
    dict[str, Any] | str | None,
    Field(
        description='Your situation: a domain ("physics") or {"domain": ..., "situation": ...}; '
        "routes the search, and its text can hit not-applicable conditions (REJECT)."
    ),
]
Fill = Annotated[bool, Field(description="Also return hits with no evidence of being about the query.")]
Tag = Annotated[
    str | list[str] | None, Field(description="Only memories with this tag (a list: all of them).")
]
Since = Annotated[str | None, Field(description="Changed since: ISO date/time or 7d, 12h...")]
Until = Annotated[
    str | None, Field(description="Changed until: ISO date/time (a date: to its end) or 7d, 12h...")
]
NodeId = Annotated[str, Field(description="A memory id.")]
State = Annotated[str, Field(json_schema_extra=one_of(STATES))]
Direction = Annotated[
    str,
    Field(description="Its own edges, those pointing at it, or both.", json_schema_extra=one_of(DIRECTIONS)),
]
EdgeTypes = Annotated[
    list[Annotated[str, Field(json_schema_extra=one_of(EDGE_TYPES))]] | None,
    Field(description="Only these edge types."),
]
Tags = Annotated[
    list[str] | None,
    Field(
        description=f"At most {MAX_TAGS} tags of at most {MAX_TAG_CHARS} characters; "
        "'domain:<name>' files the memory by domain."
    ),
]
Unit = Annotated[float | None, Field(description="0..1", ge=0, le=1, allow_inf_nan=False)]
Basis = Annotated[
    str | None, Field(description="How it was verified.", json_schema_extra=one_of(VERIFICATION_BASES))
]
Tier = Annotated[
    Literal["temp", "long"] | None,
    Field(
        description="temp: forgotten after the store's TTL (7 days by default); long: kept. "
        "Default: decided from the text (a one-off such as 'tomorrow at 9' is temp)."
    ),
]
Reopen = Annotated[
    bool,
    Field(
        description="Make a superseded (closed) memory current again: its valid_until is "
        "cleared and the supersedes edges to it removed (when its successor was forgotten, "
        "or superseding was a mistake)."
    ),
]
NotApplicable = Annotated[
    list[str] | None,
    Field(
        description=f"Conditions under which it must not be used (at most {FIELD_ITEMS}, "
        f"of at most {FIELD_CHARS:,} characters)."
    ),
]
Edges = Annotated[
    list[dict[str, Any]] | None,
    Field(
        description='Links: [{"target": id, "type": "part_of|causal|sequential|spatial|hierarchical|'
        'similar|supersedes"}].'
    ),
]


def _fields(**given: Any) -> dict[str, Any]:
    body = given.get("body")
    if body is not None and not body.strip():
        # Checked here so the message names the argument, not a generated id.
        raise ValueError("body is empty: a memory needs some text")
    names = {"not_applicable": "non_applicable_conditions", "tier": "retention_tier"}
    return {names.get(k, k): v for k, v in given.items() if v is not None}


def _check_tags(tags: Sequence[str] | None, held: Sequence[str] = ()) -> None:
    """Refuse more than MAX_TAGS tags, or a tag over MAX_TAG_CHARS characters: each stays
    in the memory's frontmatter, which every ``get`` shows. Tags the memory already
    ``held`` are not new input (a hand-written file may hold more, or longer ones): an
    update may keep them, or drop some, not add to them."""
    if tags is None:
        return
    known = set(held)
    new = [t for t in tags if t not in known]
    if len(tags) > MAX_TAGS and (new or len(tags) > len(held)):
        raise InvalidArgumentError(
            f"tags: {len(tags):,} tags, over the limit of {MAX_TAGS}: keep the labels a search "
            "filters on, and put the rest in the body",
            name="tags",
            value=len(tags),
        )
    for tag in new:
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidArgumentError(
                f"tags: a tag of {len(tag):,} characters ({clip(tag, TERM_CHARS)!r}), over the limit of "
                f"{MAX_TAG_CHARS}: a tag is a label; shorten it, and put the text in the body",
                name="tags",
                value=len(tag),
            )


def _held_tags(store: MdCG, node_id: str) -> list[str]:
    """The tags ``node_id`` holds now (none when the server does not see it: the update
    then names that)."""
    try:
        return list(store.entry(node_id, include_expired=True).tags)
    except NodeNotFoundError:
        return []


#: Characters of a memory's frontmatter the write checks keep for the fields the store sets
#: itself (created_at, updated_at, retention tier, reason and expiry: about 350).
STORE_FIELDS_CHARS = 1_000
#: The lists a write through this server gives, by frontmatter field, and the argument of each.
WRITTEN_LISTS = {"tags": "tags", "non_applicable_conditions": "not_applicable", "edges": "edges"}
#: The lists a write through this server replaces whole only when ``get`` shows them whole
#: (:func:`_check_shown_whole`), by frontmatter field: what one item and several are called.
GUARDED_LISTS = {"non_applicable_conditions": ("condition", "conditions"), "edges": ("edge", "edges")}
#: Levels of lists and objects an edge's values may nest (a ``get`` shows any depth; the
#: check walks them, within Python's recursion).
MAX_DEPTH = 32
#: What to do, per argument, about a list over FIELD_ITEMS items.
_FEWER = {
    "not_applicable": "merge conditions, or put the rest in the body",
    "edges": "keep the links that matter (a linked memory may link back), or put the rest in the body",
}


def _unshown(value: Any, depth: int = 0) -> tuple[str, str] | None:
    """Where in ``value`` (a condition, an edge) a ``get`` reply could not show it whole
    (:func:`_fit`'s limits: FIELD_CHARS characters a string, FIELD_ITEMS items a list or an
    object, at any depth), and why: ``(".note", "a string of 50,000 characters, ...")``."""
    if isinstance(value, str):
        if len(value) <= FIELD_CHARS:
            return None
        return "", f"a string of {len(value):,} characters, over the limit of {FIELD_CHARS:,}"
    if not isinstance(value, dict | list | tuple):
        return None
    kind = "an object" if isinstance(value, dict) else "a list"
    if len(value) > FIELD_ITEMS:
        return "", f"{kind} of {len(value):,} items, over the limit of {FIELD_ITEMS}"
    if depth >= MAX_DEPTH:
        return "", f"{kind} nested deeper than {MAX_DEPTH} levels"
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in pairs:
        found = _unshown(item, depth + 1)
        if found is not None:
            step = f".{clip(str(key), TERM_CHARS)}" if isinstance(value, dict) else f"[{key}]"
            return step + found[0], found[1]
    return None


def _is_edge(item: Any) -> bool:
    """Whether ``item`` is an edge the store takes (others it refuses, with its own message)."""
    return isinstance(item, dict) and "target" in item


def _check_lists(store: MdCG, node_id: str | None, changes: dict[str, Any]) -> None:
    """Refuse a write (``changes``: frontmatter fields; ``node_id``: the memory an update
    changes, None for a new one) of edges or conditions the memory holds and ``get`` does
    not show whole (:func:`_check_shown_whole`: written, the list would lose what ``get``
    left out), or that ``get`` could not read back whole: a list over FIELD_ITEMS items or
    an item :func:`_unshown` finds (:func:`_check_items`), lists that together do not fit
    the frontmatter ``get`` shows (:func:`_check_fits`). Tags: :func:`_check_tags`."""
    given = {f: changes[f] for f in WRITTEN_LISTS if f in changes}
    if not given:
        return
    held = _held_node(store, node_id) if node_id is not None else None
    before = {} if held is None else node_dict(held, "")["frontmatter"]  # as ``get`` has it
    shown, clipped, _ = _fit_frontmatter(before)
    for field, items in given.items():
        if field in GUARDED_LISTS:
            _check_shown_whole(field, before, shown, clipped, node_id or "")
            _check_items(WRITTEN_LISTS[field], items)
    _check_fits(held, changes, given, clipped)


def _check_shown_whole(
    field: str, held: dict[str, Any], shown: dict[str, Any], clipped: dict[str, dict[str, int]], node_id: str
) -> None:
    """Refuse replacing ``field`` (edges, conditions) of the memory ``node_id`` when a ``get``
    does not show what it holds whole (``clipped``, by :func:`_fit_frontmatter`, as
    :func:`node_reply` clips): an update replaces the whole list, so the items, nested
    values and text ``get`` left out would be lost -- whatever the list given (the one
    ``get`` showed, with a change; a list without the items left out). The file holds it
    whole: a person edits it there."""
    if field not in clipped:
        return
    counts = clipped[field]
    items = held.get(field) or ()
    n, k = len(items), len(shown.get(field) or ())
    nested = counts.get("left_out", 0) - (n - k)
    also = [f"{nested:,} nested items left out"] if nested > 0 else []
    also += [f"{counts['cut']:,} of its strings cut"] if counts.get("cut") else []
    name = WRITTEN_LISTS[field]
    raise InvalidArgumentError(
        f"{name}: the memory holds {n:,} {GUARDED_LISTS[field][n != 1]}; a `get` shows "
        f"{f'{k:,}' if k else 'none of them'}{', with ' + ' and '.join(also) if also else ''}: an update's "
        f"{name} replace the whole list, so what a `get` does not show would be lost, and no MCP write "
        f"changes these {GUARDED_LISTS[field][1]}; change them in the file at `path` instead (`mdcg edit "
        f"{clip(node_id, TERM_CHARS)}`)",
        name=name,
        value=n,
    )


def _check_items(name: str, items: Sequence[Any]) -> None:
    """Refuse a list (the argument ``name``) a ``get`` could not show whole: more than
    FIELD_ITEMS items, or an item :func:`_unshown` finds (an edge as the file holds it)."""
    if len(items) > FIELD_ITEMS:
        raise InvalidArgumentError(
            f"{name}: {len(items):,} items, over the limit of {FIELD_ITEMS} (a `get` shows "
            f"{FIELD_ITEMS} of a list): {_FEWER[name]}",
            name=name,
            value=len(items),
        )
    for i, item in enumerate(items):
        found = _unshown(Edge.from_value(item).to_dict() if _is_edge(item) else item)
        if found is not None:
            fix = (
                "shorten it (keep the full text in a memory of its own and cite its id)"
                if found[1].startswith("a string")
                else "give it fewer items (put the rest in the body)"
            )
            raise InvalidArgumentError(
                f"{name}[{i}]{found[0]}: {found[1]} (a `get` could not show it whole): {fix}",
                name=name,
                value=i,
            )


#: The fields of a memory a write sets, as :func:`_check_fits` builds the memory it leaves.
_FRONTMATTER_FIELDS = frozenset(f.name for f in dataclasses.fields(Node)) - {"id", "layer", "body", "extra"}


def _check_fits(
    held: Node | None, changes: dict[str, Any], given: dict[str, Any], clipped: dict[str, Any]
) -> None:
    """:func:`_check_lists`' last step: refuse a write that leaves a list a ``get`` showed
    whole (not in ``clipped``, the memory as it is) clipped in the memory as the write
    leaves it, shown in FRONTMATTER_CHARS less STORE_FIELDS_CHARS. Each item given passed
    :func:`_check_items`, so what clips it is their total size, which the message names."""
    names = {"tier": "retention_tier"}  # remember's own name for it
    fields = {names.get(k, k): v for k, v in changes.items() if names.get(k, k) in _FRONTMATTER_FIELDS}
    if not all(_is_edge(e) for e in given.get("edges") or ()):
        return  # an edge the store refuses, with its own message
    if held is None:
        node = Node(id="-", layer="knowledge", **fields)
    else:
        node = dataclasses.replace(held, **fields)
    after = {k: v for k, v in node.to_dict(iso_times=True).items() if k not in ("id", "layer")}
    limit = FRONTMATTER_CHARS - STORE_FIELDS_CHARS
    clipped_after = _fit_frontmatter(after, limit)[1]
    for field, name in WRITTEN_LISTS.items():
        if field in clipped_after and field not in clipped:
            arg = name if field in given else ", ".join(WRITTEN_LISTS[f] for f in given)
            raise InvalidArgumentError(
                f"{arg}: the memory's frontmatter would take {_json_chars(after):,} characters, over the "
                f"{limit:,} a `get` shows whole ({FRONTMATTER_CHARS:,}, less {STORE_FIELDS_CHARS:,} kept for "
                f"the fields the store sets): `get` could not show its {name} whole; give fewer or shorter "
                "items (long text belongs in the body)",
                name=arg,
                value=_json_chars(after),
            )


def _check_supersedes_edge(store: MdCG, old: str, new: str, reason: str) -> None:
    """Refuse a ``supersede`` whose ``supersedes`` edge (added to ``new`` unless it has one
    to ``old``) changes edges a ``get`` does not show whole, or leaves them past what it
    shows (:func:`_check_lists`)."""
    held = _held_node(store, new)
    if held is None:
        return  # the store names the unknown id
    edges = [Edge.from_value(e).to_dict() for e in held.edges]
    if any(e["target"] == old and e["type"] == "supersedes" for e in edges):
        return  # nothing added
    edge = {"target": old, "type": "supersedes", **({"reason": reason} if reason else {})}
    try:
        _check_lists(store, new, {"edges": [*edges, edge]})
    except InvalidArgumentError as exc:
        if "edges" in _fit_frontmatter(node_dict(held, "")["frontmatter"])[1]:  # no MCP write changes them
            fix = (
                f"or supersede in a shell (`mdcg supersede {clip(old, TERM_CHARS)} {clip(new, TERM_CHARS)}`)"
            )
        else:
            fix = "drop some of its edges first (`update` with edges)"
        raise InvalidArgumentError(
            f"new: superseding adds an edge to {clip(new, TERM_CHARS)!r}, and {exc}; {fix}",
            name="new",
            value=new,
        ) from exc


def _held_node(store: MdCG, node_id: str) -> Node | None:
    """The memory ``node_id`` as its file holds it now (None when the server does not see
    it: the update then names that)."""
    try:
        return store.get(node_id, include_expired=True)
    except NodeNotFoundError:
        return None


def _not_archived(store: MdCG, node_id: str) -> None:
    """Raise the archived error for an archived ``node_id`` (no tool can see or restore it)."""
    try:
        store.entry(node_id)
    except NodeNotFoundError as exc:
        if exc.hidden == "archived":
            raise


def _written(store: MdCG, node_id: str, **extra: Any) -> dict[str, Any]:
    """What a write reply says: where the memory is, and whether it is a fact or a
    procedure (with the annotation marks a procedure still lacks: BLINDSPOT until
    they are there). A fact lacks nothing."""
    entry = store.entry(node_id)
    missing = list(entry.ccg_missing)
    out = {"id": entry.id, "layer": entry.layer, "path": str(store.path_of(node_id)), **extra}
    out["kind"] = "fact" if is_fact(missing) else "procedure"
    if missing and out["kind"] == "procedure":
        out["ccg_missing"] = missing
    out.update(retention(entry))  # a temporary memory says when it goes
    return out


def _unknown_targets(store: MdCG, reply: dict[str, Any], edges: Sequence[Any] | None) -> dict[str, Any]:
    """``reply`` with ``unknown_targets``: the edge targets given that no memory here has
    (stored anyway: a target may come later, by a git pull; ``health`` lists them),
    ``did_you_mean`` (:func:`_twin_hints`) for those of them that differ from the id of a
    memory the caller sees only by letter case or Unicode form, and ``departed`` for the
    others the audit log knows the fate of (renamed, and to what, or forgotten:
    :meth:`MdCG.departure`, as a "no node" error says it)."""
    edges = [e for e in edges or () if isinstance(e, dict)]
    targets = [e.get("target") for e in edges]
    unknown = [t for t in dict.fromkeys(targets) if isinstance(t, str) and t not in store]
    if unknown:
        shown = _capped(unknown)
        reply["unknown_targets"] = [clip(t, TERM_CHARS) for t in shown]
        reply["unknown_targets_total"] = len(unknown)
        hints = _twin_hints(store, shown, targets)
        if hints:
            reply["did_you_mean"] = hints
        twins = {h["edge"] for h in hints}
        departed = [
            {"edge": i, "target": clip(t, TERM_CHARS), "departed": clip(d.describe(), REASON_CHARS)}
            for t in shown
            if (i := targets.index(t)) not in twins and (d := store.departure(t)) is not None
        ]
        if departed:  # renamed (to what) or forgotten: the audit log knows (session 38)
            reply["departed"] = departed
    return reply


def _twin_hints(store: MdCG, shown: Sequence[str], targets: Sequence[Any]) -> list[dict[str, Any]]:
    """For each of ``shown`` (unknown edge targets, in ``unknown_targets``' order) that
    differs from the id of a memory the caller sees only by letter case or Unicode form
    (``N00037`` given, ``n00037`` held), ``{"edge": i, "target": t, "did_you_mean": id}``:
    ``i`` the index of its first edge in ``targets`` (the ``edges`` given), ``t`` it as
    ``unknown_targets`` shows it -- as ``get`` of it would say (an edge matches its target
    exactly: ``neighbours`` of the twin never shows it). A list, not a map keyed by the
    clipped target: two long targets clipping alike each keep their hint. Two spellings
    that differ only in Unicode form print alike (``Café``, ``Cafe\u0301``): both are
    written escaped, as the unknown-id error writes them (``'Cafe\\u0301'``,
    ``'Caf\\u00e9'``)."""
    hints = []
    for t in shown:
        twin = store.twin_of(t)
        if twin is not None:
            labels = distinct_labels((t, twin))
            said = clip(labels[t], TERM_CHARS)
            hints.append({"edge": targets.index(t), "target": said, "did_you_mean": labels[twin]})
    return hints


def _remember(store: MdCG, given: dict[str, Any], *, unique: bool, overwrite: bool) -> dict[str, Any]:
    """Store a memory (``unique``: unless an identical one is in the layer); the reply."""
    try:
        if not unique:
            return _written(store, store.add(overwrite=overwrite, **given).id)
        node, created = store.add_unique(**given)
    except DuplicateIdError as exc:
        _not_archived(store, exc.node_id)  # not "change it with update": no tool can
        raise
    return _written(store, node.id) if created else _written(store, node.id, existing=True)


def _superseded(store: MdCG, reply: dict[str, Any]) -> dict[str, Any]:
    """A write reply (``update``, ``verify``) for a superseded memory: ``superseded_by`` (its
    current version, as ``get`` names it) and a note that the change stays out of search."""
    newer = current_version(store, reply["id"])
    if newer is not None:
        reply["superseded_by"] = newer
        reply["note"] = "superseded: search leaves it out; update(id, reopen=true) makes it current"
    return reply


def _get_reply(store: MdCG, node_id: str) -> dict[str, Any]:
    """``get``'s reply before windowing: the node, and for a superseded one ``superseded_by``
    (its current version)."""
    reply = node_dict(store.get(node_id), str(store.path_of(node_id)))
    newer = current_version(store, node_id)
    if newer is not None:
        reply["superseded_by"] = newer
    return reply


def _body_window(reply: dict[str, Any], offset: int, max_chars: int) -> dict[str, Any]:
    """``get``'s reply with ``max_chars`` characters of the body from ``offset``; when the
    body is not all there, its length (``body_chars``), the window's start and, while more
    follows, ``next_offset`` and a note saying how to read it."""
    body = reply["body"]
    total = len(body)
    if offset == 0 and total <= max_chars:
        return reply  # the whole body, as before
    if offset > total:
        raise InvalidArgumentError(
            f"offset {offset} is past the end of the body ({total:,} characters)", name="offset", value=offset
        )
    end = min(total, offset + max_chars)
    reply.update(body=body[offset:end], body_chars=total, body_offset=offset)
    if end < total:
        reply.update(
            truncated=True,
            next_offset=end,
            note=f"body truncated: characters {offset:,}-{end:,} of {total:,}; "
            f"call get with offset={end} for the rest",
        )
    return reply


#: What :func:`_fit` gives for a value no part of which fits the room left.
_LEFT_OUT = object()


def _json_chars(value: Any) -> int:
    """The characters ``value`` takes as orjson writes it (a reply's text): not its bytes."""
    data = orjson.dumps(value)
    return len(data) if data.isascii() else len(data.decode())


@dataclass
class _Room:
    """Characters a frontmatter may still take in a reply, and what one field left out:
    ``left_out`` list items and object keys (at any depth), ``cut`` strings cut short."""

    chars: int
    left_out: int = 0
    cut: int = 0


def _fit(value: Any, room: _Room) -> Any:
    """``value`` as a reply shows it in ``room.chars`` characters (taken from it; JSON as
    orjson writes it): a string to its first FIELD_CHARS characters (the last one an
    ellipsis; a ``"`` takes two of the room), lists and objects to their first FIELD_ITEMS
    items that fit; :data:`_LEFT_OUT` when not even an empty one fits."""
    if isinstance(value, str):
        plain = _CONTROL.sub("\ufffd", value)
        shown = plain if len(plain) <= FIELD_CHARS else plain[: FIELD_CHARS - 1] + "…"
        if _json_chars(shown) > room.chars:  # cut to the room (clip counts a JSON escape as two)
            if room.chars < 4:  # not even "x…" in its quotes
                return _LEFT_OUT
            shown = clip(shown, room.chars - 2)
        room.cut += shown != plain
        room.chars -= _json_chars(shown)
        return shown
    if not isinstance(value, dict | list | tuple):
        size = _json_chars(value)
        if size > room.chars:
            return _LEFT_OUT
        room.chars -= size
        return value
    if room.chars < 2:
        return _LEFT_OUT
    room.chars -= 2  # the brackets
    pairs = value.items() if isinstance(value, dict) else enumerate(value)
    out: dict[str, Any] | list[Any] = {} if isinstance(value, dict) else []
    for key, item in itertools.islice(pairs, FIELD_ITEMS):
        need = (1 if out else 0) + (_json_chars(key) + 1 if isinstance(out, dict) else 0)
        if room.chars < need + 1:
            break
        room.chars -= need
        shown = _fit(item, room)
        if shown is _LEFT_OUT:
            room.chars += need
            break
        if isinstance(out, dict):
            out[key] = shown
        else:
            out.append(shown)
    room.left_out += len(value) - len(out)
    return out


def _fit_frontmatter(
    frontmatter: dict[str, Any], chars: int = FRONTMATTER_CHARS
) -> tuple[dict[str, Any], dict[str, dict[str, int]], int]:
    """``frontmatter`` as a reply shows it in ``chars`` characters (:func:`_fit` per field,
    in file order; a field that does not fit is left out): the fields shown, what each
    clipped field left out (``left_out``, ``cut``) and how many fields were left out. The
    one rule both :func:`node_reply` and the write checks (:func:`_check_lists`) follow."""
    room = _Room(chars - 2)
    shown: dict[str, Any] = {}
    clipped: dict[str, dict[str, int]] = {}
    fields_out = 0
    for key, value in frontmatter.items():
        need = (1 if shown else 0) + _json_chars(key) + 1
        field = _Room(room.chars - need)
        value_shown = _fit(value, field) if field.chars > 0 else _LEFT_OUT
        if value_shown is _LEFT_OUT:
            fields_out += 1
            clipped[key] = {"left_out_field": 1}
            continue
        shown[key] = value_shown
        room.chars = field.chars
        if field.left_out or field.cut:
            counts = {"left_out": field.left_out, "cut": field.cut}
            clipped[key] = {k: v for k, v in counts.items() if v}
    return shown, clipped, fields_out


#: What a clipped ``get`` reply's note says (docs/mcp.md): how it was clipped, where the
#: whole is, and that a clipped field written back loses what was not shown.
CLIPPED_NOTE = (
    f"frontmatter clipped (strings to {FIELD_CHARS:,} characters, lists and objects to {FIELD_ITEMS} "
    f"items, {FRONTMATTER_CHARS:,} characters in all; frontmatter_clipped counts what each field "
    "left out): the file at `path` holds every field whole; a clipped field written back would lose "
    "what was left out (`update` refuses that for edges and not_applicable; tags it takes: give tags "
    "only to replace every tag the file holds)"
)


def node_reply(reply: Any) -> Any:
    """A memory's reply (``get``'s: ``frontmatter`` and ``body``) with its frontmatter in
    FRONTMATTER_CHARS characters (:func:`_fit_frontmatter`), whatever its file holds.
    ``frontmatter_clipped`` counts, per field (at most REPORT_ITEMS named,
    ``frontmatter_clipped_total`` when more), the items left out and strings cut, and
    ``frontmatter_fields_left_out`` the fields not shown; a ``note`` says so, where the
    whole is, and that writing a clipped field back would lose the rest
    (:data:`CLIPPED_NOTE`). Any other reply is returned as it is."""
    if not (isinstance(reply, dict) and isinstance(reply.get("frontmatter"), dict) and "body" in reply):
        return reply
    shown, clipped, fields_out = _fit_frontmatter(reply["frontmatter"])
    clipped = {k: v for k, v in clipped.items() if "left_out_field" not in v}
    if not clipped and not fields_out:
        return reply
    out = {**reply, "frontmatter": shown}
    if clipped:
        out["frontmatter_clipped"] = {
            clip(k, TERM_CHARS): v for k, v in itertools.islice(clipped.items(), REPORT_ITEMS)
        }
        if len(out["frontmatter_clipped"]) < len(clipped):
            out["frontmatter_clipped_total"] = len(clipped)
    if fields_out:
        out["frontmatter_fields_left_out"] = fields_out
    out["note"] = f"{out['note']}; {CLIPPED_NOTE}" if "note" in out else CLIPPED_NOTE
    return out


#: Most ids a server remembers the body it gave of (:class:`ReadBodies`), the least recently
#: read or written forgotten first: an id forgotten is updated as one never read.
READ_BODIES = 4096


def body_digest(body: str) -> bytes:
    """A body's fingerprint as :class:`ReadBodies` keeps it (16 bytes)."""
    return hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=16).digest()


#: The tool the agent called, while the server runs it (:meth:`MemoryServer._served`). An alias
#: (:mod:`md_cg.integrations.aliases`) calls other tools' functions: a body one of them reads
#: or writes inside is not one the agent had (:meth:`ReadBodies.note`).
_SERVING: contextvars.ContextVar[str | None] = contextvars.ContextVar("mdcg_serving", default=None)
#: The tools whose reads and writes of a body are the agent's own (:class:`ReadBodies`):
#: ours, and mem0's ``get_memory`` / ``update_memory``, which are ``get`` (its reply
#: whole) and the checked ``update`` under another name.
_NOTED_BY = frozenset({"get", "remember", "update", "get_memory", "update_memory"})


class ReadBodies:
    """Per server: for each id whose body this server last gave the agent (a ``get``) or
    wrote from the agent's own words (``remember``, an ``update`` of the body), that body's
    :func:`body_digest` and how much of it, from its start, the agent has had: ``get``
    windows read in turn (``offset`` at most what was read) add up. An ``update`` that
    sets the body whole is refused when the memory's body is another now, or when the
    agent had only part of it (:func:`read_check`): it built the body on a read another
    write has overtaken, or on a cut-off text whose rest the update would erase. At most
    ``limit`` ids, each as the memory spells it (a ``get`` of ``cafe\u0301`` finds
    ``caf\u00e9``: noted as that)."""

    def __init__(self, limit: int = READ_BODIES) -> None:
        self.limit = limit
        self._held: OrderedDict[str, tuple[bytes, int]] = OrderedDict()
        self._lock = threading.Lock()

    def note(self, node_id: str, body: str, start: int = 0, end: int | None = None) -> None:
        """The agent had ``body[start:end]`` (all of it by default) -- unless the tool the
        agent called is an alias calling ``get``, ``remember`` or ``update`` inside: its
        reply may not show the body (``open_nodes`` leaving it out to stay in budget,
        ``create_entities`` skipping an entity that exists, ``add_observations`` writing
        lines into it), and an ``update`` built on the agent's older read then passed the
        check and erased another agent's acknowledged update (attack atk12 of session 43,
        F2). Nothing noted: an ``update`` after it is checked against the agent's own last
        read, as before the alias's call."""
        if _SERVING.get() not in (None, *_NOTED_BY):
            return
        digest = body_digest(body)
        end = len(body) if end is None else end
        with self._lock:
            held = self._held.pop(node_id, None)
            if start > 0:  # a later window: it adds to what was read of this same body
                start_read = held[1] if held is not None and held[0] == digest else 0
                end = max(start_read, end) if start <= start_read else start_read
            self._held[node_id] = (digest, end)
            while len(self._held) > self.limit:
                self._held.popitem(last=False)

    def held(self, node_id: str) -> tuple[bytes, int] | None:
        """The digest of the body last had and the characters of it read from its start."""
        with self._lock:
            return self._held.get(node_id)


def read_check(reads: ReadBodies, node_id: str) -> Callable[[Node], None] | None:
    """The check an ``update`` setting ``node_id``'s body whole runs on the node as its file
    holds it, under the node's lock (``MdCG.update_report(require=...)``): :class:`ToolError`
    naming the id, nothing written, when the body the agent last had of it
    (:class:`ReadBodies`) is not the memory's body now, or was had only in part. None for
    an id never read: updated as before. An id typed in another Unicode form than the
    memory's is looked up as the memory's (``node.id``)."""
    typed = reads.held(node_id)
    if typed is None and node_id.isascii():
        return None

    def check(node: Node) -> None:
        held = typed if typed is not None else reads.held(node.id)
        if held is None:
            return
        digest, read = held
        if body_digest(node.body) != digest:
            raise ToolError(
                f"memory {node_id!r} changed since you read it (an edit by hand or another agent); "
                "nothing was written: get it again and repeat the change"
            )
        if read < len(node.body):
            raise ToolError(
                f"memory {node_id!r}: you read only the first {read:,} of its {len(node.body):,} "
                "characters, and a body given to update replaces the whole text (the rest would "
                f"be lost); nothing was written: get it with offset={read} (and on, while a reply "
                "has next_offset), then send the whole body"
            )

    return check


def _superseded_reply(store: MdCG, old: str, new: str, reason: str) -> dict[str, Any]:
    """``supersede``'s reply: the reason its edge holds -- a repeat keeps the first one
    (before session 42 a repeat without a reason replied ``"reason": ""``)."""
    edges = [e for e in store.get(new).edges if e.type == "supersedes" and e.target == old]
    kept = edges[0].extra.get("reason", "") if edges else reason
    reply = {"old": old, "new": new, "reason": clip(str(kept), REASON_CHARS), "superseded": True}
    if reason and kept != reason:
        reply["note"] = f"{new!r} already superseded {old!r}: the reason given first is kept"
    return reply


def _write_tools(store: MdCG, reads: ReadBodies) -> list[tuple[Callable[..., dict[str, Any]], str]]:
    def remember(
        body: Annotated[
            str,
            Field(description=f"The memory as Markdown (not empty; its file at most {FILE_MIB} MiB)."),
        ],
        layer: Annotated[
            str,
            Field(
                description="rejected: a falsified idea, unresolved: an open question.",
                json_schema_extra=one_of(LAYERS),
            ),
        ] = "knowledge",
        tags: Tags = None,
        id: Annotated[str | None, Field(description="Id to use (default: a slug of the first line).")] = None,
        importance: Unit = None,
        confidence: Unit = None,
        verification_basis: Basis = None,
        not_applicable: NotApplicable = None,
        edges: Edges = None,
        overwrite: Annotated[bool, Field(description="Replace an existing memory with this id.")] = False,
        duplicate: Annotated[
            bool, Field(description="Store it even if an identical memory is in the layer.")
        ] = False,
        tier: Tier = None,
    ) -> dict[str, Any]:
        _check_tags(tags)  # an overwrite replaces the memory: its tags are all new input
        if overwrite and id is not None:
            _not_archived(store, id)  # replacing would take an archived memory out of archive/
        given = _fields(
            body=body,
            layer=layer,
            tags=tags,
            id=id,
            importance=importance,
            confidence=confidence,
            verification_basis=verification_basis,
            not_applicable=not_applicable,
            edges=edges,
        )
        if tier is not None:
            given["tier"] = tier
        _check_lists(store, None, given)  # an overwrite replaces the memory: all new input
        unique = not (duplicate or overwrite or id is not None)
        reply = _remember(store, given, unique=unique, overwrite=overwrite)
        if not reply.get("existing"):  # the agent wrote this body: it knows it whole
            reads.note(reply["id"], body)
        return _unknown_targets(store, reply, edges)

    return [
        (remember, "Store a memory (one Markdown file). A procedure should carry the marks "
         "'# Applies when:', '# Steps:', '# Executes:', '# Verified by:', '# Not applicable when:'; "
         "a plain fact needs none. Replies with its id, path, kind (fact or procedure) and the marks a "
         "procedure lacks. Without an id, an identical memory already in the layer is not stored "
         "twice: the reply names it, with existing: true."),
        _update_tool(store, reads),
    ]  # fmt: skip


def _update_tool(
    store: MdCG, reads: ReadBodies, *, checked: bool = True
) -> tuple[Callable[..., dict[str, Any]], str]:
    """The ``update`` tool; ``checked=False``: the aliases', whose body is built on a read
    of their own under the node's lock (:class:`ReadBodies` neither checked nor told)."""

    def update(
        id: NodeId,
        body: Annotated[
            str | None,
            Field(description=f"New body (not empty; its file at most {FILE_MIB} MiB)."),
        ] = None,
        tags: Tags = None,
        layer: NewLayer = None,
        importance: Unit = None,
        confidence: Unit = None,
        verification_basis: Basis = None,
        not_applicable: NotApplicable = None,
        edges: Edges = None,
        tier: Tier = None,
        reopen: Reopen = False,
    ) -> dict[str, Any]:
        given = {
            "body": body,
            "tags": tags,
            "layer": layer,
            "importance": importance,
            "confidence": confidence,
            "verification_basis": verification_basis,
            "not_applicable": not_applicable,
            "edges": edges,
            "tier": tier,
        }
        changes = _fields(**given)
        if tags is not None and (len(tags) > MAX_TAGS or any(len(t) > MAX_TAG_CHARS for t in tags)):
            _check_tags(tags, _held_tags(store, id))
        _check_lists(store, id, changes)
        if reopen:
            changes["valid_until"] = None
            given["reopen"] = True
        if not changes:
            raise ValueError(
                f"update of {id!r}: nothing to change (give body, tags, layer, tier, reopen, ...)"
            )
        told = checked and body is not None  # a body given whole: built on the agent's last read
        require = read_check(reads, id) if told else None
        # unlinked: the successors whose supersedes edge went, as the commit found them
        done, unlinked, changed = store.update_report(id, require=require, **changes)
        if told and body is not None:  # other fields leave the body the agent has (or has not) read
            reads.note(done.id, body)  # as stored: the id typed may be its other Unicode form
        named = sorted(k for k, v in given.items() if v is not None) if changed else []
        reply = _superseded(
            store, _written(store, id, updated=named, **({} if changed else {"changed": False}))
        )
        if unlinked:  # rarely more than one; the reply stays in its budget
            reply["successors_unlinked"] = unlinked[:UNLINKED_SHOWN]  # whole ids: usable
            reply["successors_unlinked_total"] = len(unlinked)
        return _unknown_targets(store, reply, edges)

    return (
        update,
        "Change a memory's body, tags, layer, importance, confidence, verification basis, "
        "conditions, edges or tier (only what you pass); reopen=true makes a superseded memory current. "
        "An archived memory is refused; an expired temporary one too, unless tier is given: "
        "tier='long' (or 'temp', a new TTL from now) renews it.",
    )


def _forget_tools(store: MdCG) -> list[tuple[Callable[..., dict[str, Any]], str]]:
    def forget(
        id: NodeId,
        reason: Annotated[str, Field(description="Why (required; kept in a tombstone).")],
        force: Annotated[bool, Field(description="Also forget a protected anchor/ memory.")] = False,
    ) -> dict[str, Any]:
        _not_archived(store, id)  # out of every tool's reach, as a read says (a person may forget it)
        deleted = store.forget(id, reason, force=force)
        dangling = [{"source": src, "type": etype} for src, etype in deleted.incoming]
        reply: dict[str, Any] = {
            "id": deleted.node.id,  # as stored: the id typed may be its other Unicode form
            "forgotten": True,
            "layer": deleted.node.layer,
            "dangling_edges": _capped(dangling),
            "dangling_total": len(dangling),
        }
        if deleted.copies:  # other files of the id (a copy, a merge's second copy), removed too
            reply["copies_removed"] = len(deleted.copies)
        if deleted.left_closed:
            reply["left_closed"] = _capped(list(deleted.left_closed))
            reply["note"] = (
                "it had superseded these; they stay hidden as superseded: "
                "update(id, reopen=true) makes one current again"
            )
        return reply

    def supersede(
        old: Annotated[str, Field(description="Id of the memory no longer true.")],
        new: Annotated[str, Field(description="Id of the memory replacing it.")],
        reason: Annotated[
            str, Field(description=f"Why, in a few words (at most {MAX_REASON_CHARS:,} characters).")
        ] = "",
    ) -> dict[str, Any]:
        if len(reason) > MAX_REASON_CHARS:  # kept in the new memory's frontmatter, as evidence is
            raise InvalidArgumentError(
                f"reason is {len(reason):,} characters, over the limit of {MAX_REASON_CHARS:,}: shorten it "
                "(keep the full text in a memory of its own and cite its id)",
                name="reason",
                value=len(reason),
            )
        _check_supersedes_edge(store, old, new, reason)
        store.supersede(old, new, reason)
        return _superseded_reply(store, old, new, reason)

    return [
        (forget, "Delete a memory for good, with a reason (a content-free tombstone stays). "
         "Prefer verify(verdict='falsified') for a memory that proved wrong."),
        (supersede, "A fact changed: after remembering the new memory, mark the old one "
         "superseded by it (search then shows only the new one; nothing is deleted)."),
    ]  # fmt: skip


def _read_tools(store: MdCG, reads: ReadBodies) -> list[tuple[Callable[..., dict[str, Any]], str]]:
    def search(
        query: Query,
        k: K = 5,
        layer: Layer = None,
        context: Context = None,
        fill: Fill = False,
        tag: Tag = None,
        since: Since = None,
        until: Until = None,
    ) -> dict[str, Any]:
        start = None if since is None else parse_when(since, name="since")
        end = None if until is None else parse_when(until, name="until", end_of_day=True)
        results, meta = store.search(
            query, layer=layer, k=k, context=context, tag=tag, since=start, until=end
        )
        return search_reply(store, results, meta, fill=fill)

    @functools.wraps(search)  # the same arguments, under its own name
    def recall(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return search(*args, **kwargs)

    recall.__name__ = "recall"

    def get(
        id: NodeId,
        offset: Annotated[
            int, Field(description="Characters of the body to skip: a reply's next_offset.", ge=0)
        ] = 0,
        max_chars: Annotated[
            int, Field(description="Most characters of the body returned.", ge=1, le=MAX_GET_CHARS)
        ] = GET_CHARS,
    ) -> dict[str, Any]:
        whole = _get_reply(store, id)
        body = whole["body"]  # what an update of the body builds on: windows read in turn add up
        reply = _body_window(whole, offset, max_chars)
        reads.note(whole["id"], body, offset, min(len(body), offset + max_chars))  # as stored
        if offset == 0:  # an agent read it: a recall (docs/recall.md), once for its windows
            store.record_access([whole["id"]], mode="get")  # the id as stored (any Unicode form typed)
        return reply

    def list_(
        layer: Layer = None,
        tag: Tag = None,
        since: Since = None,
        until: Until = None,
        limit: Annotated[int, Field(description="Page size.", ge=1, le=MAX_LIST)] = 20,
        offset: Annotated[int, Field(description="Memories to skip.", ge=0, le=MAX_OFFSET)] = 0,
    ) -> dict[str, Any]:
        start = None if since is None else parse_when(since, name="since")
        end = None if until is None else parse_when(until, name="until", end_of_day=True)
        total, page = store.list_page(layer, tag=tag, since=start, until=end, limit=limit, offset=offset)
        items = [_list_item(e) for e in page]
        for item in items:  # listed, and marked: search leaves a superseded memory out
            newer = store.superseded_by(item["id"])
            if newer is not None:
                item["superseded_by"] = newer
        return {"total": total, "offset": offset, "items": items}

    def neighbours(
        id: NodeId,
        direction: Direction = "out",
        types: EdgeTypes = None,
        depth: Annotated[int, Field(description="Edges to follow.", ge=1, le=10)] = 1,
        limit: Annotated[int, Field(description="Most neighbours listed.", ge=1, le=MAX_NEIGHBOURS)] = 50,
    ) -> dict[str, Any]:
        found = store.neighbours(id, direction=direction, types=types, depth=depth)
        return {"id": id, "neighbours": [_neighbour(store, n) for n in found[:limit]], "total": len(found)}

    return [
        (search, "Search memory before answering from it. Results best first, each with a state "
         "(see the server instructions), a snippet and `why` (an index into `reasons`); "
         "`meta.covered_neg` lists matching falsified/open notes. `get` reads one memory."),
        (recall, "Same as `search`."),
        (get, f"Read one memory: its fields and up to max_chars (default {GET_CHARS:,}) characters of its "
         "body from offset; when more follows, the reply has truncated: true and next_offset: call "
         "again with offset=next_offset."),
        (list_, "List memories, newest first, by layer, tag or time; paged (total, offset)."),
        (neighbours, "Memories linked to one by edges: direction out, in or both; depth > 1 walks further."),
    ]  # fmt: skip


def _neighbour(store: MdCG, n: Neighbour) -> dict[str, Any]:
    """One neighbour of a ``neighbours`` reply, with its title; a dangling edge's (``exists:
    false``) has none, and is left out (it was null before session 37's MCP review)."""
    d = n.to_dict()
    if n.exists:
        d["title"] = clip(store.entry(n.id).title, TITLE_CHARS)
    return d


def _loop_tools(store: MdCG) -> list[tuple[Callable[..., dict[str, Any]], str]]:
    def verify(
        id: NodeId,
        evidence: Annotated[
            str,
            Field(description="What you observed (required, at most 1,000 characters)."),
        ],
        verdict: Annotated[str, Field(json_schema_extra=one_of(VERDICTS))],
    ) -> dict[str, Any]:
        node = store.verify(id, evidence, verdict)
        reply = _superseded(store, verdict_dict(node, verdict, store.path_of(node.id)))
        # falsified again: the node stayed where it was (the entry just written names the
        # layer it was in); the CLI says so too
        if verdict == "falsified" and node.verification_history[-1].get("from_layer") == "rejected":
            reply["note"] = "; ".join(["already in rejected/", *([reply["note"]] if "note" in reply else [])])
        return reply

    def reflect(
        query: Query,
        feedback: Annotated[
            list[State] | dict[str, State] | None,
            Field(description="True states of the results: a list in result order, or {id: state}."),
        ] = None,
        k: K = 5,
        layer: Layer = None,
        context: Context = None,
    ) -> dict[str, Any]:
        results, _meta = store.search(query, layer=layer, k=k, context=context, record=False)
        shown = [r for r in results if not r.filler]
        rec = store.reflect(query, shown, feedback)
        return {
            "reflection": {**rec.to_dict(), "query": clip(rec.query, REASON_CHARS)},
            "results": [{"id": r.id, "state": r.state, "title": clip(r.title, 80)} for r in shown],
        }

    return [
        (verify, "Record evidence about a memory: confirmed (+0.05 confidence), weakened (-0.10), "
         "falsified (moves it to rejected/). Evidence: at most 1,000 characters."),
        (reflect, "Search and record the information gap D = 1 - share of ACCEPT results, with dD/dt; "
         "`feedback` overrides the judge's states."),
    ]  # fmt: skip


def _looker(store: MdCG) -> Callable[[str], Entry | None]:
    """What :class:`~md_cg.pickups.PickUps` asks: the entry of a memory the server sees
    (archived and expired ones too), None for one it does not."""

    def look(node_id: str) -> Entry | None:
        try:
            return store.entry(node_id, include_expired=True, include_archived=True)
        except NodeNotFoundError:
            return None

    return look


def _maintenance_tools(store: MdCG, picks: PickUps) -> list[tuple[Callable[..., dict[str, Any]], str]]:
    def sync() -> dict[str, Any]:
        report = store.sync()
        picks.note(report)
        report = picks.take(report)  # with what the pick-ups before each call took in
        keys = SYNC_LISTS
        out = {
            "clean": report.clean,
            "problems": report.problems,
            **_report_lists(report.to_dict(), keys),
        }
        notes = []
        if report.returned:
            notes.append(
                f"{len(report.returned)} memory(ies) forgotten in this clone are back (a git merge kept "
                "another clone's copy): `forget` them again, or a person keeps them (`mdcg keep ID`)"
            )
        if report.withheld:
            notes.append(
                f"{report.withheld} file problem(s) (unreadable, duplicate or twin ids, unsafe paths) "
                "are not named to this server's scope: a person should run `mdcg health` on the store"
            )
        if notes:
            out["note"] = " ".join(notes)
        return out

    def health() -> dict[str, Any]:
        return _health_reply(store.health().to_dict())

    return [
        (sync, "Reconcile the index with files changed by hand now, and list what changed by hand "
         "since the last sync call (each call takes hand edits in first); `problems` is true when a "
         "file needs a person."),
        (health, "Check the store; `ok` is true when nothing was found; findings say how to fix."),
    ]  # fmt: skip


def _lifecycle_tools(store: MdCG) -> list[tuple[Callable[..., dict[str, Any]], str]]:
    def organize(
        mode: Annotated[
            str,
            Field(
                description="dryRun (compare candidates) or apply (a dry run's decisions).",
                json_schema_extra=one_of(ORGANIZE_MODES),
            ),
        ],
        candidates: Annotated[
            list[dict[str, Any]] | None,
            Field(
                description=f"dryRun: at most {MAX_CANDIDATES} memories to compare; optional: "
                "importance 0-1, temporal, sensitivity, agent_scope, workspace_scope.",
                json_schema_extra=_candidate_items(),
            ),
        ] = None,
        run_id: Annotated[str | None, Field(description="apply: the dry run's run_id.")] = None,
        decisions: Annotated[
            list[dict[str, Any]] | None,
            Field(
                description="apply: save or discard a candidate (index), archive a memory (id).",
                json_schema_extra=_decision_items(),
            ),
        ] = None,
    ) -> dict[str, Any]:
        # all or nothing for an agent: one bad decision refuses the call and leaves the run open
        result = store.organize(mode, candidates=candidates, run_id=run_id, decisions=decisions, strict=True)
        return _clipped(result.to_dict())

    def recall_stats(
        # the library falls back to the default for a value out of range; an agent is told
        window_days: Annotated[
            int, Field(description="Days of the access log looked at.", ge=1, le=365)
        ] = 30,
        exempt_days: Annotated[int, Field(description="Younger memories are not zombies.", ge=0, le=365)] = 7,
    ) -> dict[str, Any]:
        return _clipped(store.recall_stats(window_days=window_days, exempt_days=exempt_days).to_dict())

    def on_this_day() -> dict[str, Any]:
        today = date.today()  # the local day, as resurface's default; the note counts from it
        return on_this_day_reply(store, resurface_readable(store, today), today)

    def inject(
        query: Query,
        max_items: Annotated[int, Field(description="Most memories.", ge=0, le=MAX_K)] = 5,
        tag: Tag = None,
    ) -> dict[str, Any]:
        items = store.inject(query, max_items=max_items, tag=tag)
        return {
            "items": [
                {**i.to_dict(), "title": clip(i.title, TITLE_CHARS), "text": clip(i.text, INJECT_TEXT_CHARS)}
                for i in items
            ],
            # hits whose files a hand edit broke since the index read them (docs/mcp.md)
            **({"unreadable_omitted": len(items.unreadable)} if items.unreadable else {}),
        }

    return [
        (organize, "Before saving several memories: mode=dryRun compares candidates with the store "
         "(exact / near / same_title / new, with the match; repeat: of an earlier candidate); "
         "then mode=apply with the run_id and your decisions (save, discard, archive) writes them, "
         "exactly once."),
        (recall_stats, "How memory is used: top recalled, zombie rate (never recalled), slot fill."),
        (on_this_day, ON_THIS_DAY),
        (inject, "Compact memories for a prompt about `query` (never filler)."),
    ]  # fmt: skip


#: ``on_this_day``'s description: what the stages of a pick mean (docs/recall.md).
ON_THIS_DAY = (
    "One memory brought back on this day (a reminder), or null when none is dated today or earlier. "
    "stage: tier or fallback = from this time of year in past years, this day of a past month, "
    "or 2-6 months ago; relaxed = the same, shown 30-90 days ago; any = the last resort: "
    "any date, today's too (a note says so)."
)

#: The note of a last-resort pick (stage ``any``): what ``md_cg.resurface`` found missing
#: before it drew among every memory (its tiers, under the relaxed 30-day cooldown), and the
#: pick's age. A test holds the figures equal to the module's constants.
LAST_RESORT_NOTE = (
    "last resort: among the memories not shown in the last 30 days, none is from this time of year "
    "(the same half of the year, or within 3 days of this date) in the 10 years before this one, "
    "from this day of a month in the last 24 months, or from 2 to 6 months ago; so this one was "
    "drawn at random from all memories dated today or earlier: it is dated {age}"
)


def on_this_day_reply(store: MdCG, pick: ReadablePick, today: date) -> dict[str, Any]:
    """``on_this_day``'s reply: the memory picked on ``today`` with its title and a snippet,
    or ``{"memory": null}``. Its fields are :class:`~md_cg.Resurfaced`'s but ``tier``, left
    out when None (the last resort) as every empty field of a reply is; a last-resort pick
    (stage ``any``, possibly a memory written today) has a ``note`` saying so
    (:data:`LAST_RESORT_NOTE`). Before session 37's MCP review the reply sent ``"tier":
    null`` and said nothing of a last resort: a memory made seconds before came back as
    "one old memory", with ``years_ago`` 0. A pick whose file a hand edit broke since the
    index read it (no pick-up since) is passed over for the next one
    (:func:`md_cg.views.resurface_readable`) and counted, ``"meta": {"unreadable_omitted":
    1}``, as ``search`` and ``inject`` leave such a memory out -- one whose file holds
    another memory now, or was narrowed out of the scope, unsaid: before session 39 the
    call failed with the file's error, before session 41 it answered null all day."""
    broken = pick.broken()
    meta = {"meta": {"unreadable_omitted": broken}} if broken else {}
    picked, node = pick.picked, pick.node
    if picked is None or node is None:
        return {"memory": None, **meta}
    body = node.body
    out = {k: v for k, v in picked.to_dict().items() if v is not None}
    out["title"] = clip(store.entry(picked.id).title, TITLE_CHARS)
    out["snippet"] = clip(snippet(body), SNIPPET_CHARS)
    if picked.stage == "any":
        days = (today - picked.date).days
        age = {0: "today", 1: "yesterday"}.get(days, f"{days:,} days ago")
        out["note"] = LAST_RESORT_NOTE.format(age=age)
    return {"memory": out, **meta}


def _clipped(data: Any) -> Any:
    """``data`` with every string clipped and every list capped (bounded replies of reports)."""
    if isinstance(data, str):
        return clip(data, REASON_CHARS)
    if isinstance(data, dict):
        return {k: _clipped(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_clipped(v) for v in data[:MAX_K]]
    return data


#: What the instructions add on a read-only server.
READ_ONLY_NOTE = """
This server is read-only: it offers only the reading tools (search, recall, get, \
list, neighbours, recall_stats, on_this_day, inject, health); nothing you do here is stored.
"""


def create_server(
    root: str | os.PathLike[str],
    *,
    store: MdCG | None = None,
    aliases: Sequence[str] = (),
    scope: Scope | None = None,
    read_only: bool = False,
) -> MemoryServer:
    """Build the MCP server for the store at ``root`` (created if missing, unless ``read_only``).

    Pass ``store`` to serve an already open store (tests); the caller closes
    it. ``aliases``: families of foreign tool names to add (``mcp-memory``,
    ``mem0``; see :mod:`md_cg.integrations.aliases`). ``scope``: the agent,
    workspace and sensitivity the server works in (when it opens the store);
    it comes from whoever starts the server, never from a tool argument.
    ``read_only``: open the store with ``MdCG(read_only=True)``; a read-only
    store (so opened, or passed in) is served with the reading tools only
    (:data:`READ_ONLY`, and the aliases built on them alone): a call of another
    tool is refused with a message saying so (:attr:`MemoryServer.withheld`).
    """
    if store is not None and scope is not None:
        raise TypeError("pass scope only when create_server opens the store (an open store has its own)")
    if store is not None and read_only:
        raise TypeError("pass read_only only when create_server opens the store (or open it read-only)")
    if store is None:
        store = MdCG(Path(root), create=not read_only, read_only=read_only, scope=scope)
    server = MemoryServer(
        store,
        title="md-cg long-term memory",
        instructions=INSTRUCTIONS + (READ_ONLY_NOTE if store.read_only else ""),
        version=__version__,
        log_level="WARNING",
    )
    maintenance = functools.partial(_maintenance_tools, picks=server.picks)
    reads = ReadBodies()  # the bodies this server gave the agent (an update of a body checks it)
    writes = functools.partial(_write_tools, reads=reads)
    readers = functools.partial(_read_tools, reads=reads)
    groups = (writes, _forget_tools, readers, _loop_tools, _lifecycle_tools, maintenance)
    withheld = set()
    for group in groups:
        for fn, description in group(store):
            # `list_` is the `list` tool (the trailing _ keeps the builtin usable in annotations)
            name = fn.__name__.rstrip("_")
            if store.read_only and name not in READ_ONLY:
                withheld.add(name)
                continue
            server.add_tool(_tool_errors(fn, store), name=name, description=description)
    if aliases:
        from md_cg.integrations.aliases import ALIASES, CHECKED_UPDATE, register_aliases

        given = dict(server.tools)
        if "update" in given:  # an alias reads the body again under the node's lock, then writes
            # mem0's update_memory sets the body the agent wrote whole: checked, as ``update``
            given[CHECKED_UPDATE] = given["update"]
            given["update"] = _tool_errors(_update_tool(store, reads, checked=False)[0], store)
        register_aliases(server, given, tuple(aliases), annotate=tool_annotations)
        # an alias left out because a tool it calls is withheld is withheld too
        withheld.update(
            a.name
            for a in ALIASES
            if a.family in aliases and a.name not in server.tools and withheld.intersection(a.needs)
        )
    server.withheld = frozenset(withheld)
    return server


def run_server(
    root: str | os.PathLike[str],
    *,
    aliases: Sequence[str] = (),
    scope: Scope | None = None,
    read_only: bool = False,
) -> None:
    """Serve the store at ``root`` over stdio, in ``scope``, until the client disconnects;
    ``read_only``: the store opened read-only, the reading tools only (:func:`create_server`)."""
    store = MdCG(Path(root), create=not read_only, read_only=read_only, scope=scope)
    lock = threading.RLock()
    try:
        server = create_server(root, store=store, aliases=aliases)
        lock = server._lock
        threading.Thread(target=server.warm, name="mdcg-warm", daemon=True).start()
        server.run()
    finally:
        with lock:  # after the warm-up, if the client left before it ended
            store.close()
