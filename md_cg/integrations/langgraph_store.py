"""A LangGraph ``BaseStore`` whose items are md-cg nodes (readable Markdown files).

::

    from langgraph.graph import StateGraph
    from md_cg.integrations.langgraph_store import MdCGStore

    store = MdCGStore("memory")               # or MdCGStore(MdCG(...))
    graph = builder.compile(store=store)      # nodes get it as `store: BaseStore`
    store.put(("memories", "alice"), "coffee", {"text": "Alice drinks her coffee black"})
    store.search(("memories", "alice"), query="what does alice drink?")

**One item, one node.** The node id is a slug of the key plus a hash of
(namespace, key), e.g. ``coffee-38fb5aa7ab28``, so ``get`` needs no lookup; a
handle whose scope has an agent or a workspace adds them to the hash
(:func:`node_id_for`), so each agent keeps its own item of a key. A handle
also finds an item another scope wrote when its scope admits it: it looks
under at most four ids (:func:`ids_seen`: its own, its agent's, its
workspace's, the plain id), and the first stored one is its item; an unscoped
handle reads every scope's items (after the plain id, each agent's and workspace's
with an item in the namespace, by name) and writes the shared one
(:meth:`MdCGStore._ids`). One rule
(:meth:`MdCGStore._held`) tells ``get``, ``search``, ``put`` and ``delete`` which
memory holds an item: the one under such an id, or one md-cg renamed away from it
(the memory tool's ``rename``: its ``renamed_from``, kept in the index), whose
frontmatter carries the key and namespace; a memory carrying the key under another
id (written by hand or by the memory tool) is no item. A file that does not parse
holds no item for ``get`` and ``search`` (``health()`` names it); nor does one whose
``langgraph_value`` or ``langgraph_body`` a person edited to another kind
(:func:`value_problem`: ``search`` leaves it out, ``get`` names it). Each batch first
takes in the files changed outside md-cg (``MdCG.sync_if_changed``), so an item file
moved by hand or brought by ``git pull`` is read, changed and deleted where it is. Items
are long-term (``retention_tier: long``): they never expire, whatever their
words say (items an earlier version let md-cg time by their words are made
long-term when a store handle first opens the store: :meth:`MdCGStore.keep_items`).
The value is kept in the file:

* its text field -- the first of :data:`BODY_FIELDS` whose value is a
  non-blank string -- is the node's Markdown body, word for word
  (``langgraph_body: "text"`` names the field);
* every other field is the frontmatter key ``langgraph_value`` (one JSON
  object); a value without a text field also gets a readable body, one
  ``field: value`` line per field, which is derived (reading the item takes
  the frontmatter);
* ``langgraph_key`` holds the key.

**Namespaces are folders.** The namespace is written as the node's
``condition_space.observation_position``, ``langgraph:<label>/<label>...``
(``%`` and ``/`` inside a label are written ``%25`` and ``%2F``). md-cg's
bucket rule turns it into the node's folder
(``knowledge/cond_langgraph_users_123_<sha8>/``), and a search in one
namespace is routed to that folder first. The namespace never enters the
search index (tags would), so it cannot make an item look relevant. A
namespace is a folder, not a boundary; the boundary is md-cg's scope: a
store handle is opened with its caller's scope (``MdCG(root, scope=...)``)
and passed here; all the store calls of this module go through
:meth:`MdCGStore._handle`, the one place a namespace-to-scope mapping plugs in.

**Search.** With a ``query``, md-cg's search ranks the items of the
namespace prefix (``score`` is md-cg's score); items without evidence of
being about the query come after them with ``score=None`` when ``fill`` is
true (as LangGraph's stores return every item that passes the filter),
newest first. Without a query, items come newest first. ``filter`` compares
values as LangGraph's in-memory store does (equality, nested objects, and
``$eq $ne $gt $gte $lt $lte``). A negative ``limit`` or ``offset`` (search,
``list_namespaces``) is an ``InvalidArgumentError`` (a ``ValueError``) naming it.

**Batches.** Like LangGraph's stores, reads in a batch see the store as it
was before the batch; the batch's puts (the last one per item wins) are then
stored -- every item first checked as it will be written (:func:`_checked`
on the node the put writes: a stored item's node read from its file with the
value put in, a new one as added, write times included: its fields, its body
as ``MdCG.add`` checks it, its file text as the writer makes it), so a refused
batch writes nothing; then each stored item read, changed and written under
its lock (a concurrent change by another process is kept, and checked again;
an archived item is put back after its new value is written), then the new
items as one md-cg commit (all or nothing) -- and its deletions follow.
``index`` arguments are accepted and ignored (md-cg indexes the body); TTLs
are not supported.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import orjson
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from ..editing import require_text
from ..errors import (
    DuplicateIdError,
    InvalidArgumentError,
    InvalidNodeError,
    MalformedNodeFileError,
    NodeNotFoundError,
)
from ..index import Entry
from ..merge import has_conflict_markers
from ..node import Node, quantise_instant, validate
from ..nodefile import dump_bytes
from ..script import short_repr
from ..search import SearchResult
from ..store import MdCG
from ..temporal import asked_reason, was_asked
from ..visibility import Scope

__all__ = [
    "BODY_FIELDS",
    "NS_PREFIX",
    "MdCGStore",
    "ids_seen",
    "matches_filter",
    "namespace_of",
    "node_id_for",
    "owners_seen",
]

#: Value fields that become the node body, in order of preference.
BODY_FIELDS = ("content", "text", "memory", "body", "data")
#: How an observation position marks a LangGraph namespace.
NS_PREFIX = "langgraph:"
KEY_FIELD = "langgraph_key"
VALUE_FIELD = "langgraph_value"
BODY_FIELD = "langgraph_body"
_SLUG_CHARS = 40
_HASH_CHARS = 12
#: Looks at the stored items a batch of puts takes at most when other processes keep
#: creating or deleting the same items meanwhile.
_WRITE_TRIES = 3
#: The store log where :meth:`MdCGStore.keep_items` notes that it ran.
UPGRADE_LOG = "langgraph"
UPGRADE = "items-long-term"


# -- names ------------------------------------------------------------------------------


def _quote(label: str) -> str:
    return label.replace("%", "%25").replace("/", "%2F")


def _unquote(label: str) -> str:
    return label.replace("%2F", "/").replace("%2f", "/").replace("%25", "%")


def position_of(namespace: Sequence[str]) -> str:
    """The observation position that stands for ``namespace``."""
    return NS_PREFIX + "/".join(_quote(label) for label in namespace)


@lru_cache(maxsize=65536)
def _namespace_of_space(space_json: str) -> tuple[str, ...] | None:
    position = orjson.loads(space_json).get("observation_position")
    if not isinstance(position, str) or not position.startswith(NS_PREFIX):
        return None
    return tuple(_unquote(label) for label in position[len(NS_PREFIX) :].split("/"))


def namespace_of(entry: Entry) -> tuple[str, ...] | None:
    """The LangGraph namespace of an index entry, or ``None`` for a node that is not an item."""
    return None if entry.space_json is None else _namespace_of_space(entry.space_json)


Owner = tuple[str | None, str | None] | None


def _owner(scope: Scope | None) -> Owner:
    """The agent and workspace a handle's writes are stamped with (``None``: none, shared)."""
    if scope is None or (scope.agent is None and scope.workspace is None):
        return None
    return scope.agent, scope.workspace


def owners_seen(scope: Scope | None) -> list[Owner]:
    """The owners whose items a handle of ``scope`` finds by id, in order of precedence:
    its own (agent and workspace), its agent's alone, its workspace's alone, then the
    shared items (``None``). Each is one its scope admits; for an unscoped handle, the
    shared ones only (a store's unscoped handle reads every owner's items too, which
    it finds in the index: :meth:`MdCGStore._ids`)."""
    if scope is None:
        return [None]
    out: list[Owner] = []
    for agent, workspace in (
        (scope.agent, scope.workspace),
        (scope.agent, None),
        (None, scope.workspace),
        (None, None),
    ):
        owner = None if agent is None and workspace is None else (agent, workspace)
        if owner not in out:
            out.append(owner)
    return out


def _node_id(namespace: Sequence[str], key: str, owner: Owner) -> str:
    parts: list[Any] = [list(namespace), key] if owner is None else [list(namespace), key, *owner]
    digest = hashlib.sha256(orjson.dumps(parts)).hexdigest()[:_HASH_CHARS]
    folded = unicodedata.normalize("NFKC", key).casefold()
    slug = re.sub(r"[^\w]+|_", "-", folded).strip("-")[:_SLUG_CHARS].strip("-")
    return f"{slug or 'item'}-{digest}"


def node_id_for(namespace: Sequence[str], key: str, scope: Scope | None = None) -> str:
    """The node id of the item ``key`` of ``namespace``: a slug of the key and a hash of both.

    ``scope``: the scope of the handle that writes the item. A scope with an agent or a
    workspace (its items are private to it) adds them to the hash, so two agents can
    each keep an item under the same namespace and key; without one the id is the
    plain (namespace, key) hash, as md-cg has always written it.
    """
    return _node_id(namespace, key, _owner(scope))


def ids_seen(namespace: Sequence[str], key: str, scope: Scope | None = None) -> list[str]:
    """The ids under which a handle of ``scope`` finds the item ``key`` of ``namespace``,
    in order of precedence (:func:`owners_seen`): at most four -- its own id
    (:func:`node_id_for`), its agent's, its workspace's and the plain id. The first that
    is stored is the handle's item (or held by a memory renamed away from it:
    :meth:`MdCGStore._held`): ``get`` returns it, ``put`` changes it in place (and
    creates the handle's own id when none is stored), ``delete`` removes it, and
    ``search`` leaves the others of that key out."""
    return [_node_id(namespace, key, owner) for owner in owners_seen(scope)]


# -- values -------------------------------------------------------------------------------


def _body_field(value: Mapping[str, Any]) -> str | None:
    for name in BODY_FIELDS:
        text = value.get(name)
        if isinstance(text, str) and text.strip():
            return name
    return None


def _render(value: Mapping[str, Any]) -> str:
    """A readable body for a value without a text field (derived: the frontmatter holds the value).

    Strings are shown as they are, unless that would put git conflict markers or a NUL
    character in the body (which a memory's body may not hold: see
    :func:`~md_cg.editing.require_text`): then every string is shown as JSON, escaped,
    and so is every field name JSON would escape (a line break, a NUL...)."""
    text = _render_lines(value, raw_strings=True)
    if "\x00" in text or has_conflict_markers(text):
        text = _render_lines(value, raw_strings=False)
    return text or "(empty value)"


def _render_lines(value: Mapping[str, Any], *, raw_strings: bool) -> str:
    lines = []
    for name, v in value.items():
        try:
            shown = v if raw_strings and isinstance(v, str) else orjson.dumps(v).decode()
        except TypeError:  # a value JSON cannot hold (2**70): the put's check refuses it
            shown = short_repr(v)
        lines.append(f"{name if raw_strings else _escaped_name(name)}: {shown}")
    return "\n".join(lines)


def _escaped_name(name: Any) -> Any:
    """A field name as the escaped body shows it: as JSON when JSON escapes some of it
    (a line break, a NUL, a quote...), else as it is."""
    if not isinstance(name, str):
        return name
    quoted = orjson.dumps(name).decode()
    return name if quoted[1:-1] == name else quoted


def value_to_node(
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    layer: str,
    base: Node | None,
    node_id: str | None = None,
) -> Node:
    """The node that stores an item (``base``: the stored node, whose other fields are kept;
    ``node_id``: the id of a new one, default :func:`node_id_for` of the item).

    The item is long-term (``retention_tier: long``, no expiry): LangGraph items last
    until they are deleted, whatever their words say, and a put has no TTL."""
    value = dict(value)
    field = _body_field(value)
    body = value.pop(field) if field else _render(value)
    if base is not None:
        node = base.copy()
    else:
        node = Node(id=node_id or node_id_for(namespace, key), layer=layer)
    node.body = body
    node.retention_tier, node.expires_at, node.retention_reason = "long", None, asked_reason("long")
    node.condition_space = {**(node.condition_space or {}), "observation_position": position_of(namespace)}
    extra = dict(node.extra)
    extra[KEY_FIELD] = key
    extra[VALUE_FIELD] = value or None
    extra[BODY_FIELD] = field
    node.extra = {k: v for k, v in extra.items() if v is not None}
    return node


def node_value(node: Node) -> dict[str, Any]:
    """The item value a node stores."""
    value = dict(node.extra.get(VALUE_FIELD) or {})
    field = node.extra.get(BODY_FIELD)
    if isinstance(field, str):
        value[field] = node.body
    return value


def value_problem(node: Node) -> str | None:
    """The frontmatter field that keeps a node from holding an item value (``None``: none):
    ``langgraph_value`` when it is not a JSON object, ``langgraph_body`` when it is not
    one of :data:`BODY_FIELDS` (after a hand edit of the line, say). A put writes neither;
    reading one made every ``get`` and ``search`` of its namespace fail with a bare
    ``ValueError`` naming nothing, or invented a value field."""
    value = node.extra.get(VALUE_FIELD)
    if value is not None and not isinstance(value, dict):
        return VALUE_FIELD
    field = node.extra.get(BODY_FIELD)
    if field is not None and field not in BODY_FIELDS:
        return BODY_FIELD
    return None


def _unreadable(
    namespace: tuple[str, ...], key: str, entry: Entry, node: Node, field: str
) -> InvalidNodeError:
    """The error of ``get`` of an item whose file holds no value (:func:`value_problem`); the
    field's value is shown as the file writes it (JSON), cut after 60 characters."""
    what = "a JSON object" if field == VALUE_FIELD else f"one of {', '.join(BODY_FIELDS)}"
    try:
        shown = json.dumps(node.extra[field], ensure_ascii=False)
    except (TypeError, ValueError):
        shown = short_repr(node.extra[field])
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return InvalidNodeError(
        f"the item {short_repr(key)} of namespace {short_repr(namespace)} cannot be read: its file "
        f"{entry.path} has {field}: {shown}, which is not {what}; fix that "
        "line by hand, or put the item again (a put writes its whole value)",
        field=field,
        value=node.extra[field],
        node_id=entry.id,
    )


def _when(ts: float | None) -> datetime:
    return datetime.fromtimestamp(ts or 0.0, tz=UTC)


# -- filters --------------------------------------------------------------------------------

_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _compare(actual: Any, operator: str, expected: Any) -> bool:
    if operator == "$eq":
        return actual == expected
    if operator == "$ne":
        return actual != expected
    try:
        a, b = float(actual), float(expected)
    except (TypeError, ValueError):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]


def _matches(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict) and any(isinstance(k, str) and k.startswith("$") for k in wanted):
        unknown = [k for k in wanted if k not in _OPERATORS]
        if unknown:
            raise InvalidArgumentError(
                f"unsupported filter operator {unknown[0]!r} (use one of {', '.join(_OPERATORS)})",
                name="filter",
                value=wanted,
            )
        return all(_compare(actual, op, v) for op, v in wanted.items())
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(_matches(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(wanted)
            and all(_matches(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return actual == wanted


def matches_filter(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    """Whether an item value passes a LangGraph search filter."""
    return not filter_ or all(_matches(value.get(k), v) for k, v in filter_.items())


def _namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = (
        namespace[: len(path)]
        if condition.match_type == "prefix"
        else namespace[len(namespace) - len(path) :]
    )
    if condition.match_type not in ("prefix", "suffix"):
        raise InvalidArgumentError(
            f"unsupported namespace match type {condition.match_type!r} (use 'prefix' or 'suffix')",
            name="match_type",
            value=condition.match_type,
        )
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


# -- the store ------------------------------------------------------------------------------


class MdCGStore(BaseStore):
    """LangGraph's ``BaseStore`` on an md-cg store; see the module docstring.

    ``store``: an open :class:`~md_cg.MdCG` (the caller closes it) or a
    folder (opened here; :meth:`close` closes it). ``layer``: where items
    are written (``knowledge``: one bucket folder per namespace). ``fill``:
    a search with a query also returns the items without evidence, after
    the ranked ones, with ``score=None``. ``record_access``: searches with a
    query record the ranked items they return as accesses. ``upgrade``: run
    :meth:`keep_items` on open unless the store log says it ran for this scope.
    """

    __slots__ = ("_owned", "_owner_cache", "fill", "layer", "record_access", "store")

    def __init__(
        self,
        store: MdCG | str | os.PathLike[str],
        *,
        layer: str = "knowledge",
        fill: bool = True,
        record_access: bool = True,
        upgrade: bool = True,
    ) -> None:
        self.store, self._owned = (store, False) if isinstance(store, MdCG) else (MdCG(store), True)
        self.layer = layer
        self.fill = fill
        self.record_access = record_access
        self._owner_cache: tuple[tuple[int, int, int], dict[tuple[str, ...], list[Owner]]] | None = None
        if upgrade and not self.store.read_only and not self._upgraded():
            self.keep_items()

    def _upgraded(self) -> bool:
        """Whether :meth:`keep_items` ran on this store for this handle's scope (or an
        unscoped handle's, which sees every item): the log says so."""
        mine = _scope_record(self._handle().scope)
        return any(
            r.get("done") == UPGRADE and r.get("scope") in (None, mine)
            for r in self._handle().log(UPGRADE_LOG).read()
        )

    def keep_items(self) -> list[str]:
        """Make long-term the items this handle sees that md-cg put on a timer by their
        words (the code before items were long-term did: "remind me tomorrow..." would
        expire and be swept), expired ones not yet swept included; a timer a caller asked
        for (``retention_reason``) is kept. Returns the ids changed, and notes in the log
        ``.mdcg/langgraph/`` that it ran, so a later open skips it: a store handle runs it
        on its first open (``upgrade=False`` does not). One pass over the index entries
        (no file is read but the timed items'). On a read-only handle nothing is written,
        as the memory tool's ``keep_files`` writes nothing there: an item to change
        raises :class:`~md_cg.errors.ReadOnlyStoreError` (the store's refusal of a
        write), and the run is not noted (before session 35 the note created
        ``.mdcg/langgraph/`` in a store opened with ``read_only=True``)."""
        handle = self._handle()
        changed = []
        for entry in handle.entries(include_expired=True, include_archived=True):
            if entry.retention_tier != "temp" and entry.expires_at is None:
                continue
            if namespace_of(entry) is None:
                continue
            try:
                node = handle.get(entry.id, include_expired=True, include_archived=True)
                if was_asked(node.retention_reason):
                    continue
                handle.modify(entry.id, _keep_unless_asked, include_archived=True, include_expired=True)
            except NodeNotFoundError:
                continue  # deleted meanwhile
            changed.append(entry.id)
        if handle.read_only:
            return changed  # none (a change raised): nothing to note, nothing written
        record = {"done": UPGRADE, "scope": _scope_record(handle.scope), "changed": len(changed)}
        handle.log(UPGRADE_LOG).append([record])
        return changed

    def close(self) -> None:
        """Close the md-cg store if this object opened it."""
        if self._owned:
            self.store.close()

    def __enter__(self) -> MdCGStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the store calls (all of them) -------------------------------------------------------

    def _handle(self, namespace: tuple[str, ...] = ()) -> MdCG:
        """The md-cg handle that serves ``namespace`` (one store until md-cg has scopes)."""
        return self.store

    def _items(self, prefix: tuple[str, ...]) -> list[tuple[Entry, tuple[str, ...]]]:
        """Index entries of the items under a namespace prefix, with their namespaces (no file read)."""
        n = len(prefix)
        out = []
        for entry in self._handle(prefix).entries():
            ns = namespace_of(entry)
            if ns is not None and ns[:n] == prefix:
                out.append((entry, ns))
        return out

    def _ids(self, namespace: tuple[str, ...], key: str, *, put: bool = False) -> list[str]:
        """The ids the item may have, in order of precedence (:func:`ids_seen`). An unscoped
        handle sees every scope's items: after the plain id come the ids of each agent and
        workspace with an item in the namespace (:meth:`_owners`), so its ``get``, ``search``
        and ``delete`` find an agent's item as its ``list_namespaces`` does (they looked under
        the plain id alone: a namespace it listed searched empty). Its ``put`` (``put``)
        writes the shared item, the plain id, which its reads then find first: an agent's
        private item is not written by a handle outside its scope."""
        scope = self._handle(namespace).scope
        if scope is not None:
            return ids_seen(namespace, key, scope)
        owners = [] if put else self._owners().get(namespace, [])
        return [_node_id(namespace, key, owner) for owner in [None, *owners]]

    def _owners(self) -> dict[tuple[str, ...], list[Owner]]:
        """The agents and workspaces (``(agent, workspace)``) with an item in each namespace,
        by name: the owners an unscoped handle looks under after the shared id (archived and
        expired items counted: a write's look sees them, a read's skips them by id). Taken
        from the index's few entries with a lifecycle field (``IndexState.restricted``: every
        scoped one is there), not from every entry, and kept until the index changes."""
        engine = self._handle()._engine
        engine.fresh()
        state = engine.state
        version = (id(state), state.generation, len(state.restricted))
        cached = self._owner_cache
        if cached is not None and cached[0] == version:
            return cached[1]
        found: dict[tuple[str, ...], set[tuple[str | None, str | None]]] = {}
        for node_id in list(state.restricted):
            entry = state.entries.get(node_id)
            if entry is None or (entry.agent_scope is None and entry.workspace_scope is None):
                continue
            namespace = namespace_of(entry)
            if namespace is not None:
                found.setdefault(namespace, set()).add((entry.agent_scope, entry.workspace_scope))
        owners: dict[tuple[str, ...], list[Owner]] = {}
        for namespace, pairs in found.items():
            owners[namespace] = [*sorted(pairs, key=lambda pair: (pair[0] or "", pair[1] or ""))]
        self._owner_cache = (version, owners)
        return owners

    def _holders(self, namespace: tuple[str, ...], node_id: str, stored: bool) -> Iterable[Entry]:
        """The entries of the memories that may hold the id ``node_id`` of an item: the one of
        that id, then those md-cg renamed away from it (their ``renamed_from`` lists it: the
        memory tool's ``rename`` of an item's file), by id. ``stored``: archived and expired
        ones too (a write's look), else the ones reads show."""
        handle = self._handle(namespace)
        show = {"include_expired": stored, "include_archived": stored}
        try:
            yield handle.entry(node_id, **show)
        except NodeNotFoundError:
            pass
        for holder in handle.renamed_to(node_id):  # from the index: no file is read
            if holder == node_id:
                continue  # renamed back to it
            try:
                yield handle.entry(holder, **show)
            except NodeNotFoundError:
                continue  # out of the handle's scope, or gone meanwhile

    def _held(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        stored: bool = False,
        known: Mapping[str, Node] | None = None,
        put: bool = False,
    ) -> list[tuple[Entry, Node]]:
        """The memories holding the item ``key`` of ``namespace`` for this handle -- the one
        rule ``get``, ``search``, ``put`` and ``delete`` follow: for each id of :func:`ids_seen`
        in order, its holders (:meth:`_holders`) whose file carries the key and the namespace;
        the first id with any gives them (the first is the item; ``delete`` removes them all).
        A memory carrying the key under an id that is none of these (a file written by hand
        or by the memory tool) holds no item. ``stored``: a write's look, archived and
        expired memories too, and an unreadable file raises (names it); else a read's:
        an unreadable file holds nothing, as for a handle opened after it broke.
        ``known``: nodes already read, by id; ``put``: the look of a put (:meth:`_ids`)."""
        for node_id in self._ids(namespace, key, put=put):
            held = []
            for entry in self._holders(namespace, node_id, stored):
                node = (known or {}).get(entry.id)
                if node is None:
                    node = self._read(entry.id, namespace, stored=stored)
                if node is None or node.extra.get(KEY_FIELD) != key:
                    continue
                if (node.condition_space or {}).get("observation_position") != position_of(namespace):
                    continue
                held.append((entry, node))
            if held:
                return held
        return []

    def _stored(self, namespace: tuple[str, ...], key: str) -> Entry | None:
        """The entry of the stored item the handle sees, archived or expired ones too (:meth:`_held`);
        else of a memory under one of its ids (:func:`ids_seen`) that holds another key or
        namespace (a put writes the item over it, as it was written)."""
        held = self._held(namespace, key, stored=True, put=True)
        if held:
            return held[0][0]
        for node_id in self._ids(namespace, key, put=True):
            try:
                return self._handle(namespace).entry(node_id, include_expired=True, include_archived=True)
            except NodeNotFoundError:
                continue
        return None

    def _read(self, node_id: str, namespace: tuple[str, ...], *, stored: bool = False) -> Node | None:
        """The node ``node_id`` (``None``: none the handle sees). A read (``stored`` false) takes
        a file that does not parse as no node: a handle that indexed it before it broke would
        raise ``MalformedNodeFileError`` where a fresh one never indexed it, and one broken file
        would fail every search of its namespace; ``health()`` names it. A node whose file
        was moved or deleted by hand since the batch took in the hand changes (:meth:`batch`)
        is no "no such item": md-cg's error saying so (``hidden == "lost"``, naming the file)
        is raised, so a ``delete`` never reports success while the file stays."""
        handle = self._handle(namespace)
        try:
            return handle.get(node_id, include_expired=stored, include_archived=stored)
        except NodeNotFoundError as exc:
            if exc.hidden == "lost":
                raise  # its file moved or went since the batch's pick-up: not "no such item"
            return None
        except MalformedNodeFileError:
            if stored:
                raise
            return None

    def _ranked(self, query: str, k: int, context: Any, namespace: tuple[str, ...]) -> list[SearchResult]:
        results, _meta = self._handle(namespace).search(
            query, layer=self.layer, k=k, context=context, record=False
        )
        return results

    def _add(self, nodes: list[Node]) -> None:
        if nodes:
            self._handle().add_many(nodes)

    def _replace(self, entry: Entry, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> None:
        """Put ``value`` into the stored item ``entry``: read, change and write under its lock,
        so a change another process makes meanwhile is kept (and checked again, as written:
        :func:`_checked`). An archived item is put back once its new value is written."""
        handle = self._handle(namespace)

        def change(node: Node) -> Node:
            return _checked(namespace, key, value_to_node(namespace, key, value, self.layer, node))

        # the item as the store holds it, archived or expired too: a put replaces its value
        handle.modify(entry.id, change, include_archived=True, include_expired=True)
        if entry.archived:
            handle.unarchive([entry.id])

    def _remove(self, namespace: tuple[str, ...], key: str) -> None:
        """Delete the item: every memory holding it (:meth:`_held`), archived ones too, so
        that neither ``get`` nor ``search`` finds it after (a git merge of a clone that
        renamed the item's file with one that wrote the item anew leaves two)."""
        for entry, _node in self._held(namespace, key, stored=True):
            try:
                self._handle(namespace).delete(entry.id, force=True)  # an archived one too
            except NodeNotFoundError:
                pass  # deleted meanwhile; deleting an absent item is not an error in LangGraph

    def _recorded(self, ids: list[str], namespace: tuple[str, ...]) -> None:
        if self.record_access and ids:
            self._handle(namespace).record_access(ids)

    # -- BaseStore ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph operations: reads first (on the state before the batch), then the writes.

        First the files changed outside md-cg (moved, edited or deleted by hand, brought by
        ``git pull``) are taken in (``MdCG.sync_if_changed``, as the memory tool and the MCP
        server do: cheap when nothing changed): without it a long-lived store's ``get`` of a
        moved item said ``None`` and its ``delete`` returned while the file stayed."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
            _check_page(op)
        self._handle().sync_if_changed()
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(tuple(op.namespace), op.key))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                if op.ttl is not None:
                    raise NotImplementedError("TTL is not supported by MdCGStore (set ttl=None)")
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise InvalidArgumentError(
                    f"unknown LangGraph operation {type(op).__name__}", name="op", value=op
                )
        self._apply(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (md-cg's file and lock calls block)."""
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        held = self._held(namespace, key)
        if not held:
            return None
        entry, node = held[0]
        field = value_problem(node)
        if field is not None:
            raise _unreadable(namespace, key, entry, node, field)
        return Item(
            value=node_value(node),
            key=key,
            namespace=namespace,
            created_at=_when(node.created_at),
            updated_at=_when(node.updated_at),
        )

    def _apply(self, puts: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        values = {item: op.value for item, op in puts.items() if op.value is not None}
        self._put_all(values)
        for (namespace, key), op in puts.items():
            if op.value is None:
                self._remove(namespace, key)

    def _put_all(self, values: dict[tuple[tuple[str, ...], str], Mapping[str, Any]]) -> None:
        """Store the values of a batch. Every item is first checked as it will be written
        (:meth:`_planned`: a stored item's node read from its file with the value put in,
        a new one as added, both with their write times), so a refusal writes nothing;
        then each stored item is read, changed and written under its lock (:meth:`_replace`),
        and the new items follow as one commit. A new item another process stores meanwhile
        is looked up again and replaced; so is a stored one deleted meanwhile, which is added."""
        pending = dict(values)
        for attempt in range(_WRITE_TRIES):
            last = attempt == _WRITE_TRIES - 1
            held = {item: self._stored(*item) for item in pending}
            for item, entry in held.items():
                self._planned(item, pending[item], entry)
            for item, entry in held.items():
                if entry is None:
                    continue
                try:
                    self._replace(entry, item[0], item[1], pending[item])
                except NodeNotFoundError:
                    if last:
                        raise
                    self._handle().refresh()  # deleted since the look: added on the next round
                    continue
                del pending[item]
            new = [item for item, entry in held.items() if entry is None]
            try:
                self._add([self._planned(item, pending[item], None) for item in new])
            except DuplicateIdError:
                if last:
                    raise
                self._handle().refresh()  # stored by another process since the look: look again
                continue
            for item in new:
                del pending[item]
            if not pending:
                return

    def _planned(
        self, item: tuple[tuple[str, ...], str], value: Mapping[str, Any], entry: Entry | None
    ) -> Node:
        """The node a put of ``value`` writes for ``item`` (``entry``: the stored one, else
        a new node), checked as written (:func:`_checked`, write times included)."""
        namespace, key = item
        if entry is None:
            node = self._new_node(namespace, key, value)
            return _checked(namespace, key, node, created=True)
        try:
            stored = self._handle(namespace).get(entry.id, include_expired=True, include_archived=True)
        except NodeNotFoundError:
            return self._planned(item, value, None)  # deleted since the look: it will be added
        return _checked(namespace, key, value_to_node(namespace, key, value, self.layer, stored))

    def _new_node(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> Node:
        own = node_id_for(namespace, key, self._handle(namespace).scope)
        return value_to_node(namespace, key, value, self.layer, None, node_id=own)

    # -- search -------------------------------------------------------------------------------

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        items = self._items(prefix)
        if not items or op.limit <= 0:
            return []
        by_id = {e.id: ns for e, ns in items}
        start = max(op.offset, 0)
        wanted = start + op.limit
        found: list[tuple[str, SearchItem]] = []
        ranked: set[str] = set()
        if op.query and op.query.strip():
            for result in self._evidence(op.query, prefix, items):
                ranked.add(result.id)
                item = self._search_item(result.id, result.score, by_id, op)
                if item is not None:
                    found.append((result.id, item))
                    if len(found) >= wanted:
                        break
            self._recorded([node_id for node_id, _ in found[start:wanted]], prefix)
            if not self.fill:
                return [item for _, item in found[start:wanted]]
        rest = sorted(
            (e for e, _ in items if e.id not in ranked), key=lambda e: (-(e.updated_at or 0.0), e.id)
        )
        for entry in rest:
            if len(found) >= wanted:
                break
            item = self._search_item(entry.id, None, by_id, op)
            if item is not None:
                found.append((entry.id, item))
        return [item for _, item in found[start:wanted]]

    def _search_item(
        self, node_id: str, score: float | None, by_id: dict[str, tuple[str, ...]], op: SearchOp
    ) -> SearchItem | None:
        """The item of the memory ``node_id`` as a search returns it; ``None``: it holds none
        the handle's ``get`` returns, or no readable value (:func:`value_problem`: ``get``
        names the file), or its file went by hand since the batch began (left out, not
        failing the search of every other item)."""
        namespace = by_id[node_id]
        try:
            node = self._read(node_id, namespace)
            if node is None or not isinstance(node.extra.get(KEY_FIELD), str):
                return None
            held = self._held(namespace, node.extra[KEY_FIELD], known={node_id: node})
        except NodeNotFoundError:
            return None  # lost since the batch's pick-up: the next batch takes it in
        if not held or held[0][0].id != node_id or value_problem(node) is not None:
            return None  # not the item of its key (get's): another stands in for it, or none
        value = node_value(node)
        if not matches_filter(value, op.filter):
            return None
        return SearchItem(
            namespace=namespace,
            key=node.extra[KEY_FIELD],
            value=value,
            created_at=_when(node.created_at),
            updated_at=_when(node.updated_at),
            score=score,
        )

    def _evidence(
        self, query: str, prefix: tuple[str, ...], items: list[tuple[Entry, tuple[str, ...]]]
    ) -> Iterable[SearchResult]:
        """md-cg's ranked hits with evidence among ``items``, best first (asks for more as needed)."""
        ids = {e.id for e, _ in items}
        namespaces = {ns for _, ns in items}
        context = {"observation_position": position_of(prefix)} if namespaces == {prefix} else None
        size = len(self._handle(prefix))
        k, seen = 32, set()
        while True:
            results = self._ranked(query, min(k, max(size, 1)), context, prefix)
            for r in results:
                if r.id in seen:
                    continue
                if not _has_evidence(r):
                    return
                seen.add(r.id)
                if r.id in ids:
                    yield r
            if len(results) < k or k >= size:
                return
            k *= 4

    # -- namespaces -----------------------------------------------------------------------------

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = {ns for _, ns in self._items(())}
        for condition in op.match_conditions or ():
            namespaces = {ns for ns in namespaces if _namespace_matches(ns, condition)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _checked(namespace: tuple[str, ...], key: str, node: Node, *, created: bool = False) -> Node:
    """Check the node of a put as ``MdCG.add``, ``MdCG.modify`` and the file writer do,
    before anything is written, and return it: its fields (``validate``), its body (some
    text, no git conflict markers, no NUL: :func:`~md_cg.editing.require_text`) and its
    file text (the writer's own :func:`~md_cg.nodefile.dump_bytes`: bytes, dates, objects,
    non-string keys, sizes) with the write times the write gives it (``updated_at`` now,
    and ``created_at`` too when ``created``), so the check measures the file as written.
    A refusal names the item (namespace and key)."""
    try:
        stamped = require_text(validate(node)).copy()
        now = quantise_instant(max(time.time(), (node.updated_at or 0.0) + 1e-6))
        stamped.updated_at = now
        if created and stamped.created_at is None:
            stamped.created_at = now
        dump_bytes(stamped)
    except InvalidNodeError as exc:
        raise InvalidNodeError(
            f"cannot put the item {short_repr(key)} of namespace {short_repr(namespace)}: {exc}",
            field=exc.field,
            value=exc.value,
            node_id=exc.node_id,
        ) from exc
    return node


def _check_page(op: Op) -> None:
    """Refuse a search or namespace listing whose ``limit`` or ``offset`` is not a whole
    number of at least 0, naming the argument (an ``InvalidArgumentError``, a
    ``ValueError``): a negative one would page nothing, or from where? LangGraph's
    in-memory store takes it as a slice bound (``limit=-1``: all but the last item)."""
    if not isinstance(op, SearchOp | ListNamespacesOp):
        return
    what = "search" if isinstance(op, SearchOp) else "list_namespaces"
    for name in ("limit", "offset"):
        value = getattr(op, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidArgumentError(
                f"{what} {name} must be a whole number of at least 0, got {value!r}",
                name=name,
                value=value,
            )


def _scope_record(scope: Scope | None) -> list[str | None] | None:
    owner = None if scope is None else (scope.agent, scope.workspace, scope.max_sensitivity)
    return None if owner is None else list(owner)


def _keep_unless_asked(node: Node) -> None:
    """Make ``node`` long-term unless a caller asked for its timer (read under its lock)."""
    if not was_asked(node.retention_reason):
        node.retention_tier, node.expires_at, node.retention_reason = "long", None, asked_reason("long")


def _has_evidence(result: SearchResult) -> bool:
    """Whether a hit is about the query: it is not ladder filler (see ``SearchResult.evidence``)."""
    return not result.filler
