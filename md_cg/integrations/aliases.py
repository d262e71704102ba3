"""MCP tool names that clients already know, mapped onto md-cg's MCP tools.

Two families of names are in wide use:

* ``mcp-memory``: the MCP reference memory server (a knowledge graph of
  entities, observations and relations): ``create_entities``,
  ``create_relations``, ``add_observations``, ``delete_entities``,
  ``delete_observations``, ``delete_relations``, ``read_graph``,
  ``search_nodes``, ``open_nodes``;
* ``mem0``: mem0's MCP server: ``add_memory``, ``search_memories``,
  ``get_memories``, ``get_memory``, ``update_memory``, ``delete_memory``
  (and ``delete_all_memories``, ``delete_entities``, ``list_entities``,
  which md-cg does not offer).

:data:`ALIASES` is the table (docs/integrations.md shows it); each supported
alias is a small function built from md-cg's own tool functions (the ones the
server registers), so an alias answers with md-cg's replies: one call, the
tool's reply as it is; several calls (a list of entities), the replies in a
list. :func:`alias_tools` builds them and checks that every md-cg tool and
parameter an alias needs exists -- an alias whose target is missing is
reported unavailable with the reason, never registered half-working.
:func:`register_aliases` adds them to an ``MCPServer``; the server's
``--aliases`` flag decides whether it is called.

How the knowledge graph maps: an entity is a ``knowledge`` node whose id is
the entity name, tagged ``entity`` and ``type:<entityType>``, whose body is
``# <name> (<entityType>)`` followed by one ``- <observation>`` line per
observation. A relation is an edge of the ``from`` node to the ``to`` node,
``{"target": to, "type": ..., "relation": relationType}``: md-cg's edge types
are a closed set, so a relation type outside it is kept in ``relation`` on an
edge of type ``similar``. mem0's ``user_id``/``agent_id``/``app_id``/``run_id``
are kept as the tags ``user:<id>`` (...) and filter searches (md-cg's
``tag``, every label, before ranking) and lists, exactly: md-cg's tag filter ignores
case, so each memory it passes is checked for the label as given (:func:`_labelled`),
and ``user_id="alice"`` never returns ``Alice``'s -- nor lists her, or anyone else's,
negative memories in ``meta.covered_neg`` (md-cg's search lists those whatever the tag
filter). With the store at hand (:func:`register_aliases` has the server's), a label
without a twin of another case (:func:`twinned`) is listed with md-cg's own pages.
``add_memory`` stores a text once per labels (the same text for another user is that
user's own memory; a text without labels never matches a labelled memory), under
:func:`labelled_id`. They are
labels, not access scopes (md-cg's scopes are set by whoever starts the
server, never by a tool argument).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any

import orjson
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from .. import ccg
from ..errors import NodeNotFoundError
from ..index import title_of
from ..judge import is_fact
from ..node import EDGE_TYPES, MAX_FILE_BYTES, check_id, content_id
from ..render import node_dict
from ..script import short_repr
from ..text import query_terms
from ..transfer import LABEL_TAGS

__all__ = [
    "ALIASES",
    "FAMILIES",
    "Alias",
    "AliasSet",
    "AliasTool",
    "alias_table_markdown",
    "alias_tools",
    "register_aliases",
]

Tools = Mapping[str, Callable[..., Any]]
#: The name under which the server hands the aliases its ``update`` tool that checks a
#: body given whole against the agent's last read (``md_cg.mcp_server.read_check``): mem0's
#: ``update_memory`` writes the text the agent built on its ``get_memory`` (session 40).
#: The plain ``update`` the aliases get is not checked: ``add_observations`` and the like
#: read the body again under the node's lock and build on that read.
CHECKED_UPDATE = "update (checked)"
FAMILIES = ("mcp-memory", "mem0")
#: Edge type of a relation whose type is not one of md-cg's.
RELATION_EDGE_TYPE = "similar"
ENTITY_TAG = "entity"
LABELS = ("user_id", "agent_id", "app_id", "run_id")


@dataclass(frozen=True)
class Alias:
    """One row of the alias table: what a foreign tool name does on md-cg."""

    name: str
    family: str
    #: md-cg tools and the parameters of theirs the alias uses (empty: not supported)
    needs: Mapping[str, tuple[str, ...]]
    maps: str
    unsupported: str = ""

    @property
    def supported(self) -> bool:
        return bool(self.needs)


def _a(name: str, family: str, needs: dict[str, tuple[str, ...]], maps: str, unsupported: str = "") -> Alias:
    return Alias(name, family, needs, maps, unsupported)


ALIASES: tuple[Alias, ...] = (
    _a(
        "create_entities",
        "mcp-memory",
        {"get": ("id",), "remember": ("body", "tags", "id")},
        "`remember` per entity (id = name; existing names are skipped, refused ones listed with why)",
    ),
    _a(
        "create_relations",
        "mcp-memory",
        {"get": ("id",), "update": ("id", "edges")},
        "`get` + `update` of the `from` node's edges (each relation on its own: refused ones, such as "
        "an unknown `from` entity or an edge to itself, listed with why)",
        "relation types outside md-cg's edge types are kept in the edge's `relation` key on a `similar` edge",
    ),
    _a(
        "add_observations",
        "mcp-memory",
        {"get": ("id",), "update": ("id", "body")},
        "`get` + `update` of the body (one `- ` line per observation)",
    ),
    _a(
        "delete_entities",
        "mcp-memory",
        {"get": ("id",), "forget": ("id", "reason")},
        "`forget` per entity (tombstone kept)",
        "relations pointing at a deleted entity are left dangling (listed in `forget`'s reply), not deleted",
    ),
    _a(
        "delete_observations",
        "mcp-memory",
        {"get": ("id",), "update": ("id", "body")},
        "`get` + `update` of the body without those lines",
    ),
    _a(
        "delete_relations",
        "mcp-memory",
        {"get": ("id",), "update": ("id", "edges")},
        "`get` + `update` of the `from` node's edges (each relation on its own: refused ones listed "
        "with why)",
    ),
    _a(
        "read_graph",
        "mcp-memory",
        {"list": ()},
        "`list`",
        "returns md-cg's bounded list, not the whole graph at once; read nodes with `open_nodes`",
    ),
    _a("search_nodes", "mcp-memory", {"search": ("query",)}, "`search`"),
    _a(
        "open_nodes",
        "mcp-memory",
        {"get": ("id", "max_chars")},
        "`get` per name, at most 20 names (a repeated name is read once, unknown names are skipped); "
        "the reply is bounded: the names share a 20,000-character body window (at least 1,000 each), "
        "and nodes past 50,000 characters are listed in `left_out`, for `get`",
    ),
    _a(
        "add_memory",
        "mem0",
        {
            "remember": ("body", "tags", "id", "duplicate"),
            "search": ("query", "k", "tag"),
            "get": ("id",),
            "list": ("tag", "limit", "offset"),
        },
        "`remember` (body = `text`; `user_id`... become tags; the same text -- as md-cg compares bodies, "
        "space at either end aside -- is stored once per labels, under an id made of the text and the "
        "labels; without labels, once among the memories without a label; an empty text is refused)",
        "`messages` (no extraction from a conversation: pass the fact as `text`) and `metadata` are "
        "refused; `enable_graph` is ignored",
    ),
    _a(
        "search_memories",
        "mem0",
        {"search": ("query", "k", "tag"), "get": ("id", "offset", "max_chars")},
        "`search` (k = `limit`, at most 50; the label filter is the search's `tag`, every label, then "
        'checked exactly: `user_id` "alice" never returns "Alice"\'s memories, in the results or '
        "`meta.covered_neg`)",
        "`filters` only as equality on `user_id`, `agent_id`, `app_id`, `run_id` (possibly in an "
        "`AND` list, not empty); `enable_graph` is ignored",
    ),
    _a(
        "get_memories",
        "mem0",
        {"list": ("tag", "limit", "offset"), "get": ("id", "offset", "max_chars")},
        "`list` (`page`/`page_size` become offset/limit; a label filter is matched exactly, case included)",
        "`filters` as in `search_memories`",
    ),
    _a("get_memory", "mem0", {"get": ("id",)}, "`get`"),
    _a("update_memory", "mem0", {"update": ("id", "body")}, "`update` of the body"),
    _a("delete_memory", "mem0", {"forget": ("id", "reason")}, "`forget` (tombstone kept)"),
    _a("delete_all_memories", "mem0", {}, "-", "not supported: md-cg never deletes in bulk"),
    _a(
        "delete_entities",
        "mem0",
        {},
        "-",
        "not supported (a name of the other family is the one "
        "registered); md-cg has no user/agent entities to delete",
    ),
    _a("list_entities", "mem0", {}, "-", "not supported: scopes are set when the server starts"),
)


@dataclass(frozen=True)
class AliasTool:
    """A supported alias, ready to register: ``fn`` has the alias's own parameters."""

    name: str
    description: str
    fn: Callable[..., dict[str, Any]]
    #: the md-cg tools it calls
    tools: tuple[str, ...] = ()


@dataclass
class AliasSet:
    """What :func:`alias_tools` built: the aliases to register and why the others are not."""

    available: dict[str, AliasTool] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)


# -- entity bodies ----------------------------------------------------------------------------


def entity_body(name: str, entity_type: str, observations: list[str]) -> str:
    """The body of an entity node: a title line and one ``- `` line per observation."""
    lines = [f"# {name} ({entity_type})" if entity_type else f"# {name}"]
    lines += [f"- {' '.join(o.split())}" for o in observations if o.strip()]
    return "\n".join(lines)


def observations_of(body: str) -> list[str]:
    """The observations of an entity body (its ``- `` lines)."""
    return [line[2:] for line in body.split("\n")[1:] if line.startswith("- ")]


#: Items one call of a batch alias takes (entities, relations, observations, names):
#: every reply stays bounded.
MAX_ITEMS = 20
#: Characters of a caller's string a reply echoes.
ECHO_CHARS = 120


def _echo(text: str) -> str:
    """A caller's string as a reply repeats it: at most :data:`ECHO_CHARS` characters."""
    return text if len(text) <= ECHO_CHARS else text[: ECHO_CHARS - 1] + "…"


def _node(tools: Tools, node_id: str, store: Any = None) -> dict[str, Any] | None:
    """md-cg's ``get`` reply for ``node_id`` with the whole body, however long (an alias
    that rewrites the body, or compares it), or ``None`` when it does not answer with one.

    ``get`` records a recall (docs/recall.md), and an alias that looks an entity up
    before it takes the entity's lock (:func:`_holding`) must read it again inside: with
    ``store`` that second read goes to the store itself and records nothing, so one call
    is one recall of each entity it names (each was counted twice). An unknown id (or one
    the caller does not see) is ``None`` as from ``get``; any other error propagates."""
    if store is None:
        try:
            return tools["get"](id=node_id, max_chars=MAX_FILE_BYTES)
        except ToolError:
            return None
    try:
        node = store.get(node_id)
    except NodeNotFoundError:
        return None
    return node_dict(node, str(store.path_of(node_id)))


def _edges(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(e) for e in node.get("frontmatter", {}).get("edges") or []]


def _relation_edge(to: str, relation: str) -> dict[str, Any]:
    kind = relation if relation in EDGE_TYPES else RELATION_EDGE_TYPE
    return {"target": to, "type": kind, "relation": relation}


def _same_relation(edge: dict[str, Any], to: str, relation: str) -> bool:
    return edge.get("target") == to and edge.get("relation", edge.get("type")) == relation


class _Gone(ToolError):
    """The node :func:`_holding` was to hold is no longer there (forgotten, archived, or
    expired since the alias looked it up)."""


def _holding(store: Any, node_id: str, work: Callable[[], Any]) -> Any:
    """``work()`` (a ``get`` and an ``update`` of ``node_id``) under the node's write lock
    (:meth:`md_cg.MdCG.holding`), so that another process's ``update`` cannot come between
    them: two servers adding observations to one entity at once lost a third of the
    acknowledged ones (69 of 180), each writing back the body it had read. Without the
    store (``alias_tools(tools)`` alone) ``work`` runs unlocked, as before."""
    if store is None:
        return work()
    with store.holding(node_id):
        return work()


# -- the knowledge-graph family ----------------------------------------------------------------


class Entity(TypedDict):
    name: str
    entityType: str
    observations: list[str]


Relation = TypedDict("Relation", {"from": str, "to": str, "relationType": str})


class Observations(TypedDict):
    entityName: str
    contents: list[str]


class Deletion(TypedDict):
    entityName: str
    observations: list[str]


def _create_entities(tools: Tools) -> Callable[..., dict[str, Any]]:
    def create_entities(entities: Annotated[list[Entity], Field(max_length=MAX_ITEMS)]) -> dict[str, Any]:
        """Each entity on its own: one md-cg refuses (a name that is no safe id...) is listed in
        ``refused`` with md-cg's reason, and the others are still created."""
        created, skipped, refused = [], [], []
        for e in entities:
            if _node(tools, e["name"]) is not None:
                skipped.append(_echo(e["name"]))
                continue
            tags = [ENTITY_TAG] + ([f"type:{e['entityType']}"] if e.get("entityType") else [])
            body = entity_body(e["name"], e.get("entityType", ""), list(e.get("observations") or []))
            try:
                created.append(tools["remember"](body=body, tags=tags, id=e["name"]))
            except ToolError as exc:
                refused.append({"name": _echo(e["name"]), "reason": str(exc)})
        return {"created": created, "skipped": skipped, "refused": refused}

    return create_entities


def _relation_echo(r: Relation) -> dict[str, str]:
    return {"from": _echo(r["from"]), "to": _echo(r["to"]), "relationType": _echo(r["relationType"])}


def _with_relations(edges: list[dict[str, Any]], rels: list[Relation], add: bool) -> list[dict[str, Any]]:
    """``edges`` with the relations ``rels`` added (those not there yet) or removed."""
    edges = [dict(e) for e in edges]
    for r in rels:
        present = any(_same_relation(e, r["to"], r["relationType"]) for e in edges)
        if add and not present:
            edges.append(_relation_edge(r["to"], r["relationType"]))
        elif not add:
            edges = [e for e in edges if not _same_relation(e, r["to"], r["relationType"])]
    return edges


def _edit_edges(tools: Tools, relations: list[Relation], add: bool, store: Any = None) -> dict[str, Any]:
    """Add or remove relations, each on its own: one md-cg refuses (an edge of a node to
    itself, an unknown ``from`` entity when adding...) is listed in ``refused`` with the
    reason, and the others are still applied. The relations of one ``from`` entity are
    one ``update``; when md-cg refuses it, they are tried one at a time. Each entity's
    edges are read and written under its lock (:func:`_holding`)."""
    by_source: dict[str, list[Relation]] = {}
    for r in relations:
        by_source.setdefault(r["from"], []).append(r)
    out: dict[str, list[Any]] = {"updated": [], "skipped": [], "refused": []}
    for source, rels in by_source.items():
        if _node(tools, source) is None:
            if add:
                reason = f"Entity with name {_echo(source)} not found (no md-cg memory has that id)"
                out["refused"] += [{**_relation_echo(r), "reason": reason} for r in rels]
            else:
                out["skipped"].append(_echo(source))
            continue
        try:
            _holding(store, source, partial(_edit_source, tools, source, rels, add, out, store))
        except _Gone as exc:  # the entity went meanwhile: as if it had been unknown
            if add:
                out["refused"] += [{**_relation_echo(r), "reason": str(exc)} for r in rels]
            else:
                out["skipped"].append(_echo(source))
    return out


def _edit_source(
    tools: Tools, source: str, rels: list[Relation], add: bool, out: dict[str, list[Any]], store: Any = None
) -> None:
    """:func:`_edit_edges` of one ``from`` entity's relations (its lock held), into ``out``."""
    node = _node(tools, source, store)
    if node is None:
        raise _Gone(f"Entity with name {_echo(source)} not found (no md-cg memory has that id)")
    edges = _edges(node)
    wanted = _with_relations(edges, rels, add)
    if wanted == edges:
        return
    try:
        out["updated"].append(tools["update"](id=source, edges=wanted))
        return
    except ToolError as exc:
        if len(rels) == 1:
            out["refused"].append({**_relation_echo(rels[0]), "reason": str(exc)})
            return
    for r in rels:  # the whole set was refused: each on its own, on the edges as they now are
        now = _node(tools, source, store)
        current = _edges(now) if now is not None else edges
        one = _with_relations(current, [r], add)
        if one == current:
            continue
        try:
            out["updated"].append(tools["update"](id=source, edges=one))
        except ToolError as exc:
            out["refused"].append({**_relation_echo(r), "reason": str(exc)})


def _create_relations(tools: Tools, store: Any = None) -> Callable[..., dict[str, Any]]:
    def create_relations(relations: Annotated[list[Relation], Field(max_length=MAX_ITEMS)]) -> dict[str, Any]:
        return _edit_edges(tools, relations, add=True, store=store)

    return create_relations


def _delete_relations(tools: Tools, store: Any = None) -> Callable[..., dict[str, Any]]:
    def delete_relations(relations: Annotated[list[Relation], Field(max_length=MAX_ITEMS)]) -> dict[str, Any]:
        return _edit_edges(tools, relations, add=False, store=store)

    return delete_relations


def _unknown_entity(name: str) -> ToolError:
    return ToolError(f"Entity with name {name} not found (no md-cg memory has that id)")


def _add_observations(tools: Tools, store: Any = None) -> Callable[..., dict[str, Any]]:
    def add_observations(
        observations: Annotated[list[Observations], Field(max_length=MAX_ITEMS)],
    ) -> dict[str, Any]:
        """Every entity is looked up first: one unknown refuses the call and nothing is
        added (as the reference server, which checks them all before it saves); each
        entity's body is then read and written under its lock (:func:`_holding`)."""
        for o in observations:
            if _node(tools, o["entityName"]) is None:
                raise _unknown_entity(o["entityName"])
        return {
            "results": [
                _holding(store, o["entityName"], partial(_add_to, tools, o, store)) for o in observations
            ]
        }

    return add_observations


def _add_to(tools: Tools, o: Observations, store: Any = None) -> dict[str, Any]:
    """:func:`_add_observations` of one entity (its lock held): the contents not there yet."""
    node = _node(tools, o["entityName"], store)
    if node is None:
        raise _unknown_entity(o["entityName"])
    have = observations_of(node["body"])
    new = [c for c in (" ".join(c.split()) for c in o["contents"]) if c and c not in have]
    reply = tools["update"](id=o["entityName"], body="\n".join([node["body"], *(f"- {c}" for c in new)]))
    shown = [_echo(c) for c in new[:MAX_ITEMS]]
    return {"entityName": o["entityName"], "addedObservations": shown, "added": len(new), "update": reply}


def _delete_observations(tools: Tools, store: Any = None) -> Callable[..., dict[str, Any]]:
    def delete_observations(
        deletions: Annotated[list[Deletion], Field(max_length=MAX_ITEMS)],
    ) -> dict[str, Any]:
        updated: list[dict[str, Any]] = []
        for d in deletions:
            if _node(tools, d["entityName"]) is None:
                continue  # the reference server is silent about unknown entities
            try:
                _holding(store, d["entityName"], partial(_delete_from, tools, d, updated, store))
            except _Gone:
                continue  # the entity went meanwhile: silent, as for one unknown
        return {"updated": updated}

    return delete_observations


def _delete_from(tools: Tools, d: Deletion, updated: list[dict[str, Any]], store: Any = None) -> None:
    """:func:`_delete_observations` of one entity (its lock held), its reply into ``updated``."""
    node = _node(tools, d["entityName"], store)
    if node is None:
        return
    gone = {" ".join(o.split()) for o in d["observations"]}
    lines = node["body"].split("\n")
    kept = lines[:1] + [ln for ln in lines[1:] if not (ln.startswith("- ") and ln[2:] in gone)]
    if kept != lines:
        updated.append(tools["update"](id=d["entityName"], body="\n".join(kept)))


def _delete_entities(tools: Tools) -> Callable[..., dict[str, Any]]:
    def delete_entities(entityNames: Annotated[list[str], Field(max_length=MAX_ITEMS)]) -> dict[str, Any]:
        forgotten, missing = [], []
        for name in entityNames:
            if _node(tools, name) is None:
                missing.append(_echo(name))  # the reference server is silent about unknown entities
                continue
            forgotten.append(tools["forget"](id=name, reason="delete_entities (MCP memory alias)"))
        return {"forgotten": forgotten, "missing": missing}

    return delete_entities


def _read_graph(tools: Tools) -> Callable[..., dict[str, Any]]:
    def read_graph() -> dict[str, Any]:
        return tools["list"]()

    return read_graph


def _search_nodes(tools: Tools) -> Callable[..., dict[str, Any]]:
    def search_nodes(
        query: Annotated[str, Field(description="Words to look for in names, types and observations.")],
    ) -> dict[str, Any]:
        return tools["search"](query=query)

    return search_nodes


#: The most characters of an ``open_nodes`` reply (docs/mcp.md's budget table), the part
#: its nodes may take (the rest: the names left out and the note), and the characters of
#: body all its nodes share (each gets an equal window, at least OPEN_NODES_MIN_BODY).
OPEN_NODES_CHARS = 50_000
OPEN_NODES_NODE_CHARS = OPEN_NODES_CHARS - 8_000
OPEN_NODES_BODY = 20_000
OPEN_NODES_MIN_BODY = 1_000


def _open_nodes(tools: Tools) -> Callable[..., dict[str, Any]]:
    def open_nodes(
        names: Annotated[list[str], Field(description="Names of the entities (at most 20).", max_length=20)],
    ) -> dict[str, Any]:
        unique = list(dict.fromkeys(names))  # a name given twice is read once
        window = max(OPEN_NODES_MIN_BODY, OPEN_NODES_BODY // max(1, len(unique)))
        nodes: list[dict[str, Any]] = []
        left_out: list[str] = []
        used = 0
        for name in unique:
            try:
                node = tools["get"](id=name, max_chars=window)
            except ToolError:
                continue  # unknown names are skipped, as the reference server does
            size = len(orjson.dumps(node)) + 1  # an upper bound of what the reply shows of it
            if used + size > OPEN_NODES_NODE_CHARS:
                left_out.append(_echo(name))
                continue
            nodes.append(node)
            used += size
        reply: dict[str, Any] = {"nodes": nodes}
        if left_out:
            reply["left_out"] = left_out
            reply["note"] = (
                f"the reply holds at most {OPEN_NODES_CHARS:,} characters: read the nodes left out "
                "with `get` (or `open_nodes` with fewer names)"
            )
        return reply

    return open_nodes


# -- the mem0 family -------------------------------------------------------------------------

_LABEL_TAGS = LABEL_TAGS  # one table: `mdcg import` of a mem0 export tags its records alike
Label = Annotated[
    str | None, Field(description="Kept as a tag on the memory (a label, not an access scope).")
]


def label_tags(**labels: str | None) -> list[str]:
    """Tags for mem0's ``user_id``/``agent_id``/``app_id``/``run_id`` (``user:<id>``...)."""
    return [f"{_LABEL_TAGS[k]}:{v}" for k, v in labels.items() if v]


def filter_tags(filters: Mapping[str, Any] | None) -> list[str]:
    """The label tags a mem0 ``filters`` object asks for (each once); anything else, and an
    empty ``AND``/``OR`` (which names no label), is refused."""
    if not filters:
        return []
    if set(filters) & {"AND", "OR"} and not filters.get("AND", filters.get("OR")):
        which = "AND" if "AND" in filters else "OR"
        raise ToolError(
            f"filters: an empty {which} ({short_repr(filters)}) names no label, and would match every "
            "memory; give at least one of " + ", ".join(LABELS)
        )
    clauses = filters["AND"] if set(filters) == {"AND"} else [filters]
    tags: list[str] = []
    for clause in clauses if isinstance(clauses, list) else [None]:
        if not isinstance(clause, Mapping):
            raise ToolError(f"filters: expected an object or {{'AND': [objects]}}, got {short_repr(filters)}")
        for key, value in clause.items():
            if key not in _LABEL_TAGS or not isinstance(value, str):
                raise ToolError(
                    f"filters: md-cg supports only equality on {', '.join(LABELS)} "
                    f"(got {short_repr(key)}: {short_repr(value)})"
                )
            tags.append(f"{_LABEL_TAGS[key]}:{value}")
    return list(dict.fromkeys(tags))  # the same label twice is one label


def _add_memory(tools: Tools, store: Any = None) -> Callable[..., dict[str, Any]]:
    def add_memory(
        text: Annotated[str, Field(description="The fact to remember, as a plain sentence.")],
        messages: Annotated[list[dict[str, str]] | None, Field(description="Refused (pass `text`).")] = None,
        user_id: Label = None,
        agent_id: Label = None,
        app_id: Label = None,
        run_id: Label = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Refused.")] = None,
        enable_graph: Annotated[bool | None, Field(description="Ignored.")] = None,
    ) -> dict[str, Any]:
        if messages:
            raise ToolError(
                "messages: md-cg does not extract memories from a conversation; pass the fact as text"
            )
        if metadata:
            raise ToolError("metadata: not supported by md-cg; put what matters in text")
        if not text.strip():
            raise ToolError("text: the memory text is empty; give the fact to remember as text")
        tags = label_tags(user_id=user_id, agent_id=agent_id, app_id=app_id, run_id=run_id)
        return _add_labelled(tools, store, text, tags)

    return add_memory


#: Hits of the labels' own memories read to find the same text (``add_memory``).
SAME_TEXT_HITS = 10


def _plain(text: str) -> str:
    """Text as md-cg compares bodies (``organize.same_body``): line endings, trailing
    spaces, and blank space at either end (leading spaces and tabs too) aside."""
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def labelled_id(text: str, tags: list[str]) -> str:
    """The id ``add_memory`` stores ``text`` under for its label ``tags``: the slug of
    the text (as md-cg's ids) and 12 hex digits of a hash of the text (as md-cg compares
    bodies) and the labels, so the same text for the same labels is one file, found by
    its id, whatever the text's words (search cannot find a text of stop words)."""
    digest = hashlib.sha256(orjson.dumps([_plain(text), sorted(set(tags))])).hexdigest()
    return check_id(f"{content_id(_plain(text)).rsplit('-', 1)[0]}-{digest[:12]}")


_LABEL_KINDS = frozenset(_LABEL_TAGS.values())


def _unlabelled(tags: Iterable[str]) -> bool:
    """Whether none of ``tags`` is a mem0 label (``user:``, ``agent:``, ``app:``, ``run:``)."""
    return not any(t.split(":", 1)[0].casefold() in _LABEL_KINDS for t in tags if ":" in t)


def _mine(node: dict[str, Any], text: str, tags: list[str]) -> bool:
    """Whether ``node`` is the memory of ``text`` for the label ``tags``: the same body,
    and every label tag (no label tag at all, for an add without labels)."""
    held = node.get("frontmatter", {}).get("tags") or []
    labelled = set(tags) <= set(held) if tags else _unlabelled(held)
    return labelled and _plain(node["body"]) == _plain(text)


def _existing(node: dict[str, Any]) -> dict[str, Any]:
    """``remember``'s reply naming a memory already stored (``existing: true``)."""
    out = {"id": node["id"], "layer": node["layer"], "path": node["path"], "existing": True}
    missing = ccg.missing(ccg.elements(node["body"], None))
    out["kind"] = "fact" if is_fact(missing) else "procedure"
    if out["kind"] == "procedure" and missing:
        out["ccg_missing"] = list(missing)
    return out


def _add_labelled(tools: Tools, store: Any, text: str, tags: list[str]) -> dict[str, Any]:
    """``add_memory`` of ``text`` with label ``tags``: the labels' memory of that text
    (its :func:`labelled_id`, or one stored before those ids that search finds), else
    a new one under that id. Without labels, the memory of that text that carries no
    label (one ``remember`` stored, say), never another user's. Two calls at once store
    it once: the second finds the id taken and answers with the first's memory."""
    node_id = labelled_id(text, tags)
    node = _node(tools, node_id)
    if node is not None and _mine(node, text, tags):
        return _existing(node)
    found = _same_text(tools, store, text, tags)
    if found is not None:
        return _existing(found)
    if node is None:
        try:
            return tools["remember"](body=text, tags=tags, id=node_id)
        except ToolError:
            node = _node(tools, node_id)  # stored meanwhile, or archived (no read shows it)
            if node is not None and _mine(node, text, tags):
                return _existing(node)
    # the id holds another text (the memory was edited since) or is archived: a new one
    return tools["remember"](body=text, tags=tags, duplicate=True)


def _same_text(tools: Tools, store: Any, text: str, tags: list[str]) -> dict[str, Any] | None:
    """md-cg's ``get`` reply of a memory with body ``text`` carrying every label tag
    (one stored before :func:`labelled_id`, or imported; no label tag when ``tags`` is
    empty), if any. A text with words the index holds is looked for by a search for it
    among the labels' memories; one of stop words only ("it is what it is"), which no
    search finds, by ``MdCG.identical`` (a bounded look by its title) when the aliases
    have the store, else by its title among the labels' memories, page by page."""
    candidates: Iterable[str]
    if query_terms(text):
        hits = tools["search"](query=text, k=SAME_TEXT_HITS, tag=_tag_arg(tags))["results"]
        candidates = (hit["id"] for hit in hits)
    elif store is not None:
        candidates = store.identical(text)
    else:
        candidates = _titled(tools, tags, title_of(text)) if tags else ()
    for node_id in candidates:
        node = _node(tools, node_id)
        if node is not None and _mine(node, text, tags):
            return node
    return None


#: Memories one ``list`` call of an alias asks for (md-cg's ``list`` gives at most 100).
LIST_PAGE = 100


def _tag_arg(tags: list[str]) -> str | list[str] | None:
    """md-cg's ``tag`` argument for label ``tags``: a list means all of them."""
    return None if not tags else tags[0] if len(tags) == 1 else list(tags)


def _listed(tools: Tools, tags: list[str]) -> Iterator[dict[str, Any]]:
    """Every item ``list`` gives for ``tags`` (md-cg's tag filter: case ignored), page by page."""
    offset = 0
    while True:
        page = tools["list"](tag=_tag_arg(tags), limit=LIST_PAGE, offset=offset)
        yield from page["items"]
        offset += len(page["items"])
        if not page["items"] or offset >= page["total"]:
            return


def _titled(tools: Tools, tags: list[str], title: str) -> Iterator[str]:
    """Ids of the memories tagged ``tags`` whose listed title is ``title`` (or its start,
    when the reply clipped it)."""
    for item in _listed(tools, tags):
        shown = item["title"]
        if shown == title or (shown.endswith("…") and title.startswith(shown[:-1])):
            yield item["id"]


def _all_tags(tools: Tools, node_id: str) -> list[str]:
    """A memory's tags, every one and whole, read without recording a recall: ``get``
    from offset 1 (a read from the start is the agent's recall of it). ``[]`` when it
    does not answer (gone, or an imported memory with an empty body)."""
    try:
        reply = tools["get"](id=node_id, offset=1, max_chars=1)
    except ToolError:
        return []
    return list(reply.get("frontmatter", {}).get("tags") or [])


def _labelled(tools: Tools, item: Mapping[str, Any], wanted: list[str]) -> bool:
    """Whether a memory ``search`` or ``list`` returned carries every label tag of
    ``wanted`` exactly. md-cg's tag filter ignores case (``user:Alice`` passes a filter on
    ``user:alice``), and mem0's ids are exact: another user's memory must never come
    back. The reply's tags settle it when they show every one; else (a twin of another
    case, a long tag the reply clipped, a tag past those shown) the memory's own are read."""
    shown = item.get("tags") or []
    if all(w in shown and not w.endswith("…") for w in wanted):
        return True
    return set(wanted) <= set(_all_tags(tools, item["id"]))


def twinned(store: Any, tags: list[str]) -> bool:
    """Whether md-cg's tag filter on ``tags`` (letter case aside) may pass a memory that
    does not carry every one of them exactly (``user:Alice`` for ``user:alice``): some
    memory it lists for them lacks one. Without the store, it may. One in-process
    listing of the labels' entries (no reply built, no file read)."""
    if store is None:
        return True
    page = store.list_page(tag=_tag_arg(tags))
    wanted = set(tags)
    return any(not wanted <= set(e.tags) for e in page.entries)


def _exact_reply(
    tools: Tools, reply: dict[str, Any], kept: list[dict[str, Any]], wanted: list[str], exact_count: bool
) -> dict[str, Any]:
    """A ``search`` reply holding only the label's memories: the results ``kept`` (their
    ``why`` indexes into the reasons they use, the counts recounted), the negative
    memories of ``meta.covered_neg`` that carry every label tag exactly (md-cg's search
    lists negatives whatever the tag filter; ``covered_neg_total`` counts those shown), and
    ``meta.filter.matching`` only when md-cg's count is the label's (``exact_count``)."""
    reasons = reply.get("reasons") or []
    used: list[str] = []
    results = []
    for r in kept:
        r = dict(r)
        if "why" in r:
            text = reasons[r["why"]]
            if text not in used:
                used.append(text)
            r["why"] = used.index(text)
        results.append(r)
    counts: dict[str, int] = {}
    for r in results:
        if r.get("state") is not None:
            counts[r["state"]] = counts.get(r["state"], 0) + 1
    out = {**reply, "results": results, "reasons": used, "counts": counts}
    if "meta" in reply:
        meta = dict(reply["meta"])
        negatives = [n for n in meta.get("covered_neg") or [] if _labelled(tools, n, wanted)]
        meta["covered_neg"], meta["covered_neg_total"] = negatives, len(negatives)
        if "filter" in meta and not exact_count:
            meta["filter"] = {k: v for k, v in meta["filter"].items() if k != "matching"}
        out["meta"] = meta
    return out


#: Most results ``search_memories`` asks md-cg's search for while it widens a search
#: whose label filter another label of another letter case crowds (``Alice``, ``alice``).
WIDEST_SEARCH = 400


def _search_memories(tools: Tools, store: Any = None) -> Callable[..., dict[str, Any]]:
    def search_memories(
        query: Annotated[str, Field(description="What to look for.")],
        filters: Annotated[
            dict[str, Any] | None, Field(description="Equality on user_id, agent_id, app_id, run_id.")
        ] = None,
        limit: Annotated[
            int | None, Field(description="Maximum number of results (1-50).", ge=1, le=50)
        ] = None,
        enable_graph: Annotated[bool | None, Field(description="Ignored.")] = None,
    ) -> dict[str, Any]:
        k = limit or 10
        wanted = filter_tags(filters)
        if not wanted:
            return tools["search"](query=query, k=k)
        # md-cg filters on every label before it ranks (case ignored); each result is then
        # checked exactly, asking for more (x4, at most WIDEST_SEARCH) while some were left out
        asked = k
        while True:
            reply = tools["search"](query=query, k=asked, tag=_tag_arg(wanted))
            kept = [r for r in reply["results"] if _labelled(tools, r, wanted)]
            if len(kept) >= k or len(reply["results"]) < asked or asked >= WIDEST_SEARCH:
                return _exact_reply(tools, reply, kept[:k], wanted, not twinned(store, wanted))
            asked = min(WIDEST_SEARCH, asked * 4)

    return search_memories


def _get_memories(tools: Tools, store: Any = None) -> Callable[..., dict[str, Any]]:
    def get_memories(
        filters: Annotated[
            dict[str, Any] | None, Field(description="Equality on user_id, agent_id, app_id, run_id.")
        ] = None,
        page: Annotated[int | None, Field(description="1-based page.", ge=1, le=2**40)] = None,
        page_size: Annotated[
            int | None, Field(description="Memories per page (default 10).", ge=1, le=100)
        ] = None,
        enable_graph: Annotated[bool | None, Field(description="Ignored.")] = None,
    ) -> dict[str, Any]:
        tags = filter_tags(filters)
        size = page_size or 10
        start = ((page or 1) - 1) * size
        if not tags:
            return tools["list"](limit=size, offset=start)
        if store is None:
            return _exact_page(tools, tags, start, size)
        if not twinned(store, tags):  # md-cg's filter is exact for these labels: its own pages
            reply = tools["list"](tag=_tag_arg(tags), limit=size, offset=start)
            if all(_labelled(tools, item, tags) for item in reply["items"]):
                return reply
        return _exact_page_of(tools, store, tags, start, size)

    return get_memories


def _exact_page(tools: Tools, tags: list[str], start: int, size: int) -> dict[str, Any]:
    """``list``'s reply for the memories carrying ``tags`` exactly, case included (md-cg's
    tag filter ignores case): the filter's pages are read whole, so ``total`` and the
    page count only the memories of those labels. Used when another label of another
    letter case is stored (:func:`twinned`)."""
    items: list[dict[str, Any]] = []
    total = 0
    for item in _listed(tools, tags):
        if _labelled(tools, item, tags):
            if start <= total < start + size:
                items.append(item)
            total += 1
    return {"total": total, "offset": start, "items": items}


def _exact_page_of(tools: Tools, store: Any, tags: list[str], start: int, size: int) -> dict[str, Any]:
    """:func:`_exact_page` from the store's entries: the positions of the label's own
    memories in md-cg's listing for ``tags`` are found in-process, and only the ``list``
    pages holding the wanted ones are asked for (at most one call per memory shown)."""
    listed = store.list_page(tag=_tag_arg(tags)).entries
    wanted = set(tags)
    exact = [i for i, e in enumerate(listed) if wanted <= set(e.tags)]
    chosen = exact[start : start + size]
    items: list[dict[str, Any]] = []
    i = 0
    while i < len(chosen):
        j = i
        while j + 1 < len(chosen) and chosen[j + 1] - chosen[i] < LIST_PAGE:
            j += 1
        ids = {listed[p].id for p in chosen[i : j + 1]}
        reply = tools["list"](tag=_tag_arg(tags), limit=chosen[j] - chosen[i] + 1, offset=chosen[i])
        items += [item for item in reply["items"] if item["id"] in ids]
        i = j + 1
    return {"total": len(exact), "offset": start, "items": items}


MemoryId = Annotated[str, Field(description="The memory's id (md-cg node id).")]


def _get_memory(tools: Tools) -> Callable[..., dict[str, Any]]:
    def get_memory(memory_id: MemoryId) -> dict[str, Any]:
        return tools["get"](id=memory_id)

    return get_memory


def _update_memory(tools: Tools) -> Callable[..., dict[str, Any]]:
    def update_memory(
        memory_id: MemoryId, text: Annotated[str, Field(description="The new text.")]
    ) -> dict[str, Any]:
        # the text given whole, built on the agent's read: refused once a person's edit (or
        # another agent's) has overtaken that read (``update``'s check, session 40)
        return tools.get(CHECKED_UPDATE, tools["update"])(id=memory_id, body=text)

    return update_memory


def _delete_memory(tools: Tools) -> Callable[..., dict[str, Any]]:
    def delete_memory(memory_id: MemoryId) -> dict[str, Any]:
        return tools["forget"](id=memory_id, reason="delete_memory (mem0 alias)")

    return delete_memory


_FACTORIES: dict[tuple[str, str], Callable[..., Callable[..., dict[str, Any]]]] = {
    ("mcp-memory", "create_entities"): _create_entities,
    ("mcp-memory", "create_relations"): _create_relations,
    ("mcp-memory", "add_observations"): _add_observations,
    ("mcp-memory", "delete_entities"): _delete_entities,
    ("mcp-memory", "delete_observations"): _delete_observations,
    ("mcp-memory", "delete_relations"): _delete_relations,
    ("mcp-memory", "read_graph"): _read_graph,
    ("mcp-memory", "search_nodes"): _search_nodes,
    ("mcp-memory", "open_nodes"): _open_nodes,
    ("mem0", "add_memory"): _add_memory,
    ("mem0", "search_memories"): _search_memories,
    ("mem0", "get_memories"): _get_memories,
    ("mem0", "get_memory"): _get_memory,
    ("mem0", "update_memory"): _update_memory,
    ("mem0", "delete_memory"): _delete_memory,
}

#: The factories that take the store too (see :func:`alias_tools`).
_WITH_STORE = (
    _add_memory,
    _search_memories,
    _get_memories,
    _create_relations,
    _delete_relations,
    _add_observations,
    _delete_observations,
)

_FAMILY_NAMES = {"mcp-memory": "the MCP reference memory server", "mem0": "mem0's MCP server"}


# -- building and registering ------------------------------------------------------------------


def _missing(alias: Alias, tools: Tools) -> str | None:
    """Why md-cg's tools cannot serve ``alias`` (``None``: they can)."""
    for tool, params in alias.needs.items():
        fn = tools.get(tool)
        if fn is None:
            return f"md-cg has no `{tool}` tool"
        accepted = inspect.signature(fn).parameters
        absent = [p for p in params if p not in accepted]
        if absent:
            return f"md-cg's `{tool}` tool has no parameter `{absent[0]}`"
    return None


def _description(alias: Alias) -> str:
    text = f"{alias.name} as in {_FAMILY_NAMES[alias.family]}, served by md-cg: {alias.maps}."
    return text + (f" Not supported: {alias.unsupported}." if alias.unsupported else "")


def alias_tools(tools: Tools, families: tuple[str, ...] = FAMILIES, store: Any = None) -> AliasSet:
    """The aliases of ``families`` that md-cg's ``tools`` (name -> tool function) can serve.

    A name offered by both families goes to the first family that supports it.
    ``store``: the ``MdCG`` the tools serve, when the caller has it: the mem0 aliases
    then learn in-process whether a label has a twin of another letter case
    (:func:`twinned`; without it they check every memory of a label exactly, page by
    page) and look a text of stop words up with ``MdCG.identical``; the mcp-memory aliases
    that rewrite an entity (observations, relations) hold its lock through it while they
    read and write (:func:`_holding`), so it must be the very object the tools serve.
    """
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown alias family {unknown[0]!r} (known: {', '.join(FAMILIES)})")
    out = AliasSet()
    for alias in sorted(
        ALIASES, key=lambda a: (not a.supported, families.index(a.family) if a.family in families else 0)
    ):
        if alias.family not in families or alias.name in out.available:
            continue
        reason = _missing(alias, tools) if alias.supported else alias.unsupported
        if reason:
            out.unavailable.setdefault(alias.name, reason)
            continue
        factory = _FACTORIES[(alias.family, alias.name)]
        fn = factory(tools, store) if factory in _WITH_STORE else factory(tools)
        out.available[alias.name] = AliasTool(alias.name, _description(alias), fn, tuple(alias.needs))
        out.unavailable.pop(alias.name, None)
    return out


def register_aliases(
    server: Any,
    tools: Tools,
    families: tuple[str, ...] = FAMILIES,
    annotate: Callable[[tuple[str, ...]], Any] | None = None,
) -> AliasSet:
    """Add the available aliases to an ``MCPServer`` (``server.add_tool``); return what was built.

    A name the server already has is left alone (reported unavailable). The server's
    ``store`` (an ``MdCG``), when it has one, is passed to :func:`alias_tools`.
    ``annotate(tools)``: the MCP annotations of an alias that calls those md-cg tools.
    """
    built = alias_tools(tools, families, getattr(server, "store", None))
    for name in list(built.available):
        if name in tools:
            built.unavailable[name] = f"md-cg already has a `{name}` tool"
            del built.available[name]
    for alias in built.available.values():
        annotations = annotate(alias.tools) if annotate is not None else None
        server.add_tool(alias.fn, name=alias.name, description=alias.description, annotations=annotations)
    return built


def alias_table_markdown() -> str:
    """The alias table as Markdown (docs/integrations.md carries it)."""
    rows = ["| alias | family | md-cg tools | mapping | not supported |", "|---|---|---|---|---|"]
    for a in ALIASES:
        needs = ", ".join(f"`{t}`" for t in a.needs) or "-"
        rows.append(f"| `{a.name}` | {a.family} | {needs} | {a.maps} | {a.unsupported or '-'} |")
    return "\n".join(rows)
