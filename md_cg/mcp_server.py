"""The md-cg MCP server: an agent's long-term memory over stdio (DESIGN §13).

``mdcg mcp --root DIR`` (or :func:`run_server`) serves one store with the
official MCP SDK (``mcp`` 2.x, :class:`~mcp.server.mcpserver.MCPServer`).
Tools: ``remember``, ``search`` and its alias ``recall``, ``get``,
``neighbours``, ``verify``, ``reflect``, ``health`` and ``forget``; each is a
thin call into :class:`~md_cg.MdCG` and returns a JSON object (structured
content, also sent as text).

Errors: a library error (unknown id, bad verdict, bad layer, invalid field...)
comes back as a tool error (``is_error``) carrying the library's one-line
message; the server keeps serving. Anything else is logged with its traceback
on stderr and reported as a generic tool error. Nothing but the protocol is
ever written to stdout.

Tool calls are serialised by a lock: the SDK runs synchronous tools in worker
threads, and one store object serves them all.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from . import __version__
from .errors import MdcgError
from .search import SearchResult
from .store import MdCG

logger = logging.getLogger("md_cg.mcp")

SERVER_NAME = "md-cg"

INSTRUCTIONS = """\
Long-term memory stored as Markdown files (one memory per file), searched with
a lexical ladder and qualified by a judge.

Before answering from memory, call `search` (or `recall`). Every result has a
qualification `state`:
- ACCEPT: fit to act on (complete annotation, verified, no condition against it).
- REJECT: a not-applicable condition of the memory is hit by your query or
  context - do NOT act on it (it is wrong for this situation).
- DEFER: complete but unverified - use with care, keep looking for confirmation.
- BLINDSPOT: the memory's annotation is incomplete - you cannot tell when it
  applies; do not rely on it alone.
`meta.covered_neg` lists negative memories your query hits: falsified
hypotheses (rejected/) and open questions (unresolved/). Read them before
repeating an idea.

Store what you learn with `remember`; after checking a memory against the
world, record the outcome with `verify`; record how useful a search was with
`reflect`; remove a memory only with `forget` and a reason.
"""

_F = TypeVar("_F", bound=Callable[..., Any])


def _tool_errors(fn: _F) -> _F:
    """Report library errors (and bad argument values) as tool errors with their message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (MdcgError, ValueError) as exc:
            raise ToolError(" ".join(str(exc).split())) from exc

    return wrapper  # type: ignore[return-value]


def _result_dict(r: SearchResult) -> dict[str, Any]:
    node = r.node
    return {
        "id": r.id,
        "tier": r.tier,
        "state": r.state,
        "basis": r.basis,
        "score": round(r.score, 4),
        "title": r.title,
        "layer": r.entry.layer,
        "tags": list(node.tags),
        "confidence": node.confidence,
        "body": node.body,
    }


def _meta_summary(store: MdCG, meta: dict[str, Any]) -> dict[str, Any]:
    negatives = []
    for node_id in meta["covered_neg"]:
        try:
            entry = store.entry(node_id)
        except MdcgError:
            continue
        negatives.append({"id": node_id, "layer": entry.layer, "title": entry.title})
    return {
        "tier": meta["tier"],
        "routed": meta["routed"],
        "buckets": meta["buckets"],
        "big_domain": meta["big_domain"],
        "scanned": meta["scanned"],
        "store_size": meta["store_size"],
        "covered_neg": negatives,
        "time_ms": round(meta["timing_ms"]["total"], 3),
    }


def _counts(results: list[SearchResult]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        if r.state is not None:
            out[r.state] = out.get(r.state, 0) + 1
    return out


# -- argument types (the descriptions are what the agent reads) -----------------------

Query = Annotated[str, Field(description="What to look for: words or a short question (any language).")]
K = Annotated[int, Field(description="Maximum number of results.", ge=1, le=100)]
Layer = Annotated[
    str | None,
    Field(
        description="Search one layer only: anchor, structural, knowledge, contextual, self, "
        "rejected or unresolved. Default: all but rejected and unresolved."
    ),
]
Context = Annotated[
    dict[str, Any] | str | None,
    Field(
        description="Your current situation, used to route the search and to judge results. "
        'A domain string ("physics"), or an object such as {"domain": "physics", '
        '"situation": "objects near the speed of light"} or {"tags": ["domain:physics"]}; '
        '{"big_domain": "auto"} routes by the query\'s big domain. Text in the context is '
        "matched against each memory's not-applicable conditions (a hit makes it REJECT)."
    ),
]
Judge = Annotated[bool, Field(description="Qualify each result (state and basis). Keep true.")]
NodeId = Annotated[str, Field(description="The id of a memory, as returned by remember or search.")]

_SEARCH_DESCRIPTION = """\
Search long-term memory. Use it before answering from memory or repeating past work.

Returns `results` (best first), each with id, title, body, tier, score, state and
basis (why that state), plus `meta` and `counts` (results per state).
- tier: how it was found. T0/T1 inside the routed bucket(s) of your context,
  T2 term match over the whole store, T3 similarity fallback (weak: low scores
  mean nothing really matched).
- state: whether you may use it. ACCEPT = act on it. REJECT = one of its
  not-applicable conditions is hit by your query/context: do NOT act on it.
  DEFER = unverified: use with care, look for confirmation. BLINDSPOT =
  annotation incomplete: cannot tell when it applies, do not rely on it alone.
- meta.covered_neg: negative memories your query hits (rejected/ = falsified
  hypotheses, unresolved/ = open questions); read them before repeating an idea.
Pass `context` when you know your situation: it speeds up the search and lets
the judge reject memories that do not apply."""


def create_server(root: str | os.PathLike[str], *, store: MdCG | None = None) -> MCPServer:
    """Build the MCP server for the store at ``root`` (created if missing).

    Pass ``store`` to serve an already open store (tests); the caller closes it.
    """
    store = store if store is not None else MdCG(Path(root), create=True)
    lock = threading.Lock()
    server: MCPServer = MCPServer(
        SERVER_NAME,
        title="md-cg long-term memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    def locked(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    @server.tool(
        description="Store a new memory (one Markdown file) and return its id and path.\n\n"
        "Write the body so the judge can qualify it later: include the lines\n"
        "'# Applies when: ...', '# Steps: ...', '# Executes: ...', '# Verified by: ...' and\n"
        "'# Not applicable when: ...' (Chinese marks 生效条件/子功能/执行/验证方式/不适用条件 work too).\n"
        "A memory missing any of them is judged BLINDSPOT; one without verification_basis is DEFER.\n"
        "A tag 'domain:<name>' files it in that domain's bucket so routed searches find it fast. "
        "The result lists `ccg_missing`: annotation elements still absent."
    )
    @locked
    @_tool_errors
    def remember(
        body: Annotated[str, Field(description="The memory as Markdown text.")],
        layer: Annotated[
            str,
            Field(
                description="knowledge (facts, methods), contextual (short-lived), self (about "
                "yourself), structural (protocols), anchor (never forgotten), rejected, unresolved."
            ),
        ] = "knowledge",
        tags: Annotated[
            list[str] | None, Field(description="Tags; 'domain:<name>' routes the memory.")
        ] = None,
        id: Annotated[str | None, Field(description="Id to use (default: generated).")] = None,
        importance: Annotated[float | None, Field(description="0..1", ge=0, le=1)] = None,
        confidence: Annotated[float | None, Field(description="0..1", ge=0, le=1)] = None,
        verification_basis: Annotated[
            str | None,
            Field(
                description="How it was verified: compiler, test, measurement, formal_proof, "
                "data or other. Without it the memory is judged DEFER."
            ),
        ] = None,
        not_applicable: Annotated[
            list[str] | None,
            Field(
                description="Conditions under which this memory must not be used; a search whose "
                "query or context hits one judges it REJECT."
            ),
        ] = None,
        edges: Annotated[
            list[dict[str, Any]] | None,
            Field(
                description='Links to other memories: [{"target": "<id>", "type": "part_of|causal|'
                'sequential|spatial|hierarchical|similar", "confidence": 0.7}].'
            ),
        ] = None,
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "body": body,
            "layer": layer,
            "tags": list(tags or []),
            "importance": importance,
            "confidence": confidence,
            "verification_basis": verification_basis,
            "non_applicable_conditions": list(not_applicable or []),
            "edges": list(edges or []),
        }
        if id is not None:
            fields["id"] = id
        node = store.add(**fields)
        entry = store.entry(node.id)
        return {
            "id": node.id,
            "layer": node.layer,
            "bucket": entry.bucket,
            "path": str(store.path_of(node.id)),
            "ccg_missing": list(entry.ccg_missing),
        }

    def run_search(query: str, k: int, layer: str | None, context: Any, judge: bool) -> dict[str, Any]:
        results, meta = store.search(query, layer=layer, k=k, context=context, judge=judge)
        return {
            "query": query,
            "results": [_result_dict(r) for r in results],
            "counts": _counts(results),
            "meta": _meta_summary(store, meta),
        }

    @server.tool(description=_SEARCH_DESCRIPTION)
    @locked
    @_tool_errors
    def search(
        query: Query, k: K = 10, layer: Layer = None, context: Context = None, judge: Judge = True
    ) -> dict[str, Any]:
        return run_search(query, k, layer, context, judge)

    @server.tool(description="Alias of `search` (same arguments, same result).\n\n" + _SEARCH_DESCRIPTION)
    @locked
    @_tool_errors
    def recall(
        query: Query, k: K = 10, layer: Layer = None, context: Context = None, judge: Judge = True
    ) -> dict[str, Any]:
        return run_search(query, k, layer, context, judge)

    @server.tool(
        description="Read one memory in full: its frontmatter fields (layer, tags, confidence, "
        "verification history, edges...) and its Markdown body."
    )
    @locked
    @_tool_errors
    def get(id: NodeId) -> dict[str, Any]:
        node = store.get(id)
        return {
            "id": node.id,
            "layer": node.layer,
            "path": str(store.path_of(node.id)),
            "frontmatter": node.to_dict(),
            "body": node.body,
        }

    @server.tool(
        description="List memories linked to a memory by edges. direction 'out' follows its own "
        "edges, 'in' finds memories pointing at it, 'both' does both; depth > 1 walks further. "
        "exists=false marks a dangling edge (its target is not in memory)."
    )
    @locked
    @_tool_errors
    def neighbours(
        id: NodeId,
        direction: Annotated[str, Field(description="out, in or both")] = "out",
        types: Annotated[
            list[str] | None,
            Field(
                description="Only these edge types (part_of, causal, sequential, spatial, "
                "hierarchical, similar)."
            ),
        ] = None,
        depth: Annotated[int, Field(description="How many edges to follow.", ge=1, le=10)] = 1,
    ) -> dict[str, Any]:
        found = store.neighbours(id, direction=direction, types=types, depth=depth)
        out = []
        for n in found:
            d = n.to_dict()
            d["title"] = store.entry(n.id).title if n.exists else None
            out.append(d)
        return {"id": id, "neighbours": out}

    @server.tool(
        description="Record external evidence about a memory after checking it against the "
        "world. verdict 'confirmed' raises its confidence by 0.05, 'weakened' lowers it by 0.10, "
        "'falsified' moves it to rejected/ (it will then show up as negative memory). The "
        "evidence is kept in the memory's verification history."
    )
    @locked
    @_tool_errors
    def verify(
        id: NodeId,
        evidence: Annotated[str, Field(description="What you observed (required).")],
        verdict: Annotated[str, Field(description="confirmed, weakened or falsified")],
    ) -> dict[str, Any]:
        node = store.verify(id, evidence, verdict)
        last = node.verification_history[-1]
        return {
            "id": node.id,
            "verdict": verdict,
            "layer": node.layer,
            "confidence_before": last.get("confidence_before"),
            "confidence_after": node.confidence,
            "path": str(store.path_of(node.id)),
        }

    @server.tool(
        description="Run a search and record how useful it was: the information gap D = 1 - "
        "share of ACCEPT results, with its change dD/dt over earlier reflections (rising D: "
        "memory covers this area less and less). Pass `feedback` with the true state of each "
        "result when you know better than the judge: a list of states in result order, or an "
        'object {"<id>": "<state>"}; states are ACCEPT, REJECT, DEFER, BLINDSPOT.'
    )
    @locked
    @_tool_errors
    def reflect(
        query: Query,
        feedback: Annotated[
            list[str] | dict[str, str] | None,
            Field(description="The true states of the results (see the tool description)."),
        ] = None,
        k: K = 10,
        layer: Layer = None,
        context: Context = None,
    ) -> dict[str, Any]:
        results, _meta = store.search(query, layer=layer, k=k, context=context, record=False)
        rec = store.reflect(query, results, feedback)
        return {
            "reflection": rec.to_dict(),
            "results": [{"id": r.id, "state": r.state, "title": r.title} for r in results],
        }

    @server.tool(
        description="Check the memory store: unreadable files, index/file drift, duplicate ids, "
        "dangling edges, degraded buckets. `ok` is true when nothing was found; each finding "
        "says what is wrong and how to fix it."
    )
    @locked
    @_tool_errors
    def health() -> dict[str, Any]:
        return store.health().to_dict()

    @server.tool(
        description="Delete a memory for good, with a reason. A tombstone (id, layer, reason, "
        "time; no content) is kept in the audit log. Memories in anchor/ are protected: they "
        "are refused unless force=true. Prefer verify(verdict='falsified') for memories that "
        "turned out wrong: that keeps them as negative memory."
    )
    @locked
    @_tool_errors
    def forget(
        id: NodeId,
        reason: Annotated[str, Field(description="Why it is forgotten (required).")],
        force: Annotated[bool, Field(description="Also forget a protected anchor/ memory.")] = False,
    ) -> dict[str, Any]:
        deleted = store.forget(id, reason, force=force)
        return {
            "id": id,
            "forgotten": True,
            "layer": deleted.node.layer,
            "dangling_edges": [{"source": src, "type": etype} for src, etype in deleted.incoming],
        }

    return server


def run_server(root: str | os.PathLike[str]) -> None:
    """Serve the store at ``root`` over stdio until the client disconnects."""
    store = MdCG(Path(root), create=True)
    try:
        create_server(root, store=store).run()
    finally:
        store.close()
