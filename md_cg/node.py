"""The node model: what one memory is, and the rules every node obeys.

A :class:`Node` is the in-memory form of one ``.md`` file. Known frontmatter
fields are attributes; keys the engine does not know (added by a person or a
newer version) are kept in :attr:`Node.extra` and written back unchanged.
``None`` (or an empty list/dict) means *absent*: the field is not written.

This module is the bottom of the package: it imports only :mod:`md_cg.errors`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from .errors import InvalidNodeError, UnknownLayerError, UnsafeIdError

#: The layers, in the order they appear on disk and in reports. The first five
#: are the memory layers; ``rejected`` and ``unresolved`` hold negative memory.
LAYERS: tuple[str, ...] = (
    "anchor",
    "structural",
    "knowledge",
    "contextual",
    "self",
    "rejected",
    "unresolved",
)
#: Layers that hold negative memory: never scored positively by search.
NEGATIVE_LAYERS: frozenset[str] = frozenset({"rejected", "unresolved"})

#: The closed set of ``verification_basis`` values (absent is also allowed).
VERIFICATION_BASES: tuple[str, ...] = (
    "compiler",
    "test",
    "measurement",
    "formal_proof",
    "data",
    "other",
)

#: The closed set of edge types.
EDGE_TYPES: tuple[str, ...] = (
    "part_of",
    "causal",
    "sequential",
    "spatial",
    "hierarchical",
    "similar",
)

#: Longest id accepted, in characters and in UTF-8 bytes (file names are
#: limited to 255 bytes on common file systems; the rest is left for temp
#: prefixes and the ``.md`` suffix).
MAX_ID_CHARS = 128
MAX_ID_BYTES = 200
#: Longest frontmatter key accepted (YAML readers refuse keys over 1,024).
MAX_KEY_CHARS = 200

# Characters that are path separators or reserved on common file systems.
_ID_FORBIDDEN = re.compile(r'[/\\:*?"<>|\x00-\x1f\x7f]')

#: Frontmatter keys in the order they are written. Keys not listed here are
#: "extra" keys, written after these in the order they were read.
FIELD_ORDER: tuple[str, ...] = (
    "id",
    "layer",
    "modality",
    "importance",
    "confidence",
    "condition_space",
    "tags",
    "spatial",
    "temporal",
    "created_at",
    "updated_at",
    "semantic_coordinates",
    "state_attributes",
    "entity_id",
    "verification_basis",
    "non_applicable_conditions",
    "edges",
    "verification_history",
    "access_count",
    "last_access",
)


def check_id(node_id: object, *, what: str = "node id") -> str:
    """Return ``node_id`` if it is a safe file-name stem, else raise.

    Refused: non-strings, the empty string, ``.``/``..``, ids containing
    ``..``, ids starting with ``.`` (hidden files), path separators, NUL and
    other control characters, characters reserved on Windows
    (``: * ? " < > |``), leading/trailing whitespace, trailing dots and ids
    longer than :data:`MAX_ID_CHARS` characters or :data:`MAX_ID_BYTES` bytes.
    """
    if not isinstance(node_id, str):
        raise UnsafeIdError(
            f"{what} must be a string, got {type(node_id).__name__} {node_id!r}",
            field="id",
            value=node_id,
        )
    problem = _id_problem(node_id)
    if problem:
        raise UnsafeIdError(
            f"unsafe {what} {node_id!r}: {problem}; ids must be safe file-name stems",
            field="id",
            value=node_id,
            node_id=None,
        )
    return node_id


@lru_cache(maxsize=65536)
def _id_problem(node_id: str) -> str | None:
    if node_id == "":
        return "it is empty"
    if ".." in node_id:
        return "it contains '..'"
    if node_id.startswith("."):
        return "it starts with '.'"
    bad = _ID_FORBIDDEN.search(node_id)
    if bad:
        return f"it contains the character {bad.group()!r}"
    if node_id != node_id.strip():
        return "it has leading or trailing whitespace"
    if node_id.endswith("."):
        return "it ends with '.'"
    if len(node_id) > MAX_ID_CHARS:
        return f"it is {len(node_id)} characters long (max {MAX_ID_CHARS})"
    if len(node_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        return f"it is longer than {MAX_ID_BYTES} bytes in UTF-8"
    if any(unicodedata.category(c) in ("Cs", "Cc") for c in node_id):
        return "it contains a control or surrogate character"
    return None


def check_layer(layer: object) -> str:
    """Return ``layer`` if it is one of :data:`LAYERS`, else raise."""
    if layer not in LAYERS:
        raise UnknownLayerError(
            f"unknown layer {layer!r}; expected one of: {', '.join(LAYERS)}",
            field="layer",
            value=layer,
        )
    return layer  # type: ignore[return-value]


@dataclass(eq=True)
class Edge:
    """An out-edge of a node: ``target`` id, ``type`` (one of :data:`EDGE_TYPES`)."""

    target: str
    type: str = "similar"
    confidence: float | None = None
    verified: int | bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"target": self.target, "type": self.type}
        if self.confidence is not None:
            d["confidence"] = self.confidence
        if self.verified is not None:
            d["verified"] = self.verified
        d.update(self.extra)
        return d

    @classmethod
    def from_value(cls, value: Any, *, node_id: str | None = None) -> Edge:
        """Build an edge from an :class:`Edge` or a dict as found in a file."""
        if isinstance(value, Edge):
            return value
        if not isinstance(value, dict) or "target" not in value:
            raise InvalidNodeError(
                f"edge {value!r} must be an object with at least a 'target'",
                field="edges",
                value=value,
                node_id=node_id,
            )
        rest = {k: v for k, v in value.items() if k not in ("target", "type", "confidence", "verified")}
        return cls(
            target=value["target"],
            type=value.get("type", "similar"),
            confidence=value.get("confidence"),
            verified=value.get("verified"),
            extra=rest,
        )


@dataclass(eq=True)
class Node:
    """One memory. ``id`` and ``layer`` are required; everything else is optional.

    ``body`` is the Markdown after the frontmatter, kept byte for byte.
    ``extra`` holds frontmatter keys the engine does not know; they are written
    back after the known keys, in their original order.
    """

    id: str
    layer: str = "knowledge"
    body: str = ""
    modality: str | None = None
    importance: float | None = None
    confidence: float | None = None
    condition_space: dict[str, Any] | None = None
    tags: list[str] = field(default_factory=list)
    spatial: Any = None
    temporal: Any = None
    created_at: float | None = None
    updated_at: float | None = None
    semantic_coordinates: Any = None
    state_attributes: dict[str, Any] | None = None
    entity_id: Any = None
    verification_basis: str | None = None
    non_applicable_conditions: list[str] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    verification_history: list[dict[str, Any]] = field(default_factory=list)
    access_count: int | None = None
    last_access: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # -- conversion -----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The frontmatter mapping, keys in :data:`FIELD_ORDER`, absent fields left out."""
        out: dict[str, Any] = {}
        for name in FIELD_ORDER:
            value = getattr(self, name)
            if value is None or (isinstance(value, (list, dict)) and not value):
                continue
            if name == "edges":
                value = [Edge.from_value(e, node_id=self.id).to_dict() for e in value]
            out[name] = value
        for key, value in self.extra.items():
            out[key] = value
        return out

    @classmethod
    def from_dict(cls, meta: dict[str, Any], body: str = "") -> Node:
        """Build a node from a frontmatter mapping (unknown keys go to ``extra``).

        Raises :class:`InvalidNodeError` naming the field when a value has the
        wrong type or is outside its allowed set.
        """
        if "id" not in meta:
            raise InvalidNodeError("frontmatter has no 'id'", field="id")
        if "layer" not in meta:
            raise InvalidNodeError("frontmatter has no 'layer'", field="layer", node_id=str(meta.get("id")))
        known = _KNOWN_FIELDS
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in meta.items():
            if key in known:
                kwargs[key] = value
            else:
                extra[key] = value
        for listy in ("tags", "non_applicable_conditions", "edges", "verification_history"):
            if kwargs.get(listy) is None:
                kwargs.pop(listy, None)
        node = cls(body=body, extra=extra, **kwargs)
        if node.edges:
            node.edges = [Edge.from_value(e, node_id=str(node.id)) for e in node.edges]
        validate(node)
        return node

    def copy(self) -> Node:
        """A deep copy (values go through the frontmatter mapping)."""
        import copy as _copy

        return _copy.deepcopy(self)


_KNOWN_FIELDS = frozenset(f.name for f in fields(Node)) - {"extra", "body"}


# -- validation -----------------------------------------------------------

_NUMBER_FIELDS_UNIT = ("importance", "confidence")
_NUMBER_FIELDS = ("created_at", "updated_at", "last_access")


def _fail(node: Node, fieldname: str, message: str, value: Any) -> None:
    raise InvalidNodeError(
        f"node {node.id!r}: field {fieldname!r} {message} (got {value!r})",
        field=fieldname,
        value=value,
        node_id=node.id if isinstance(node.id, str) else None,
    )


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def validate(node: Node) -> Node:
    """Check every rule a stored node must obey; return the node or raise.

    Edges given as dicts are converted to :class:`Edge` in place. Errors are
    :class:`InvalidNodeError` (or a subclass) naming the field.
    """
    check_id(node.id)
    try:
        check_layer(node.layer)
    except UnknownLayerError as exc:
        exc.node_id = node.id
        raise UnknownLayerError(
            f"node {node.id!r}: {exc}", field="layer", value=node.layer, node_id=node.id
        ) from None
    if not isinstance(node.body, str):
        _fail(node, "body", "must be a string", node.body)
    for name in _NUMBER_FIELDS_UNIT:
        v = getattr(node, name)
        if v is None:
            continue
        if not _is_number(v) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
            _fail(node, name, "must be a number between 0 and 1", v)
    for name in _NUMBER_FIELDS:
        v = getattr(node, name)
        if v is not None and (not _is_number(v) or not math.isfinite(v)):
            _fail(node, name, "must be a finite number (seconds since the epoch)", v)
    if node.access_count is not None and (
        not isinstance(node.access_count, int) or isinstance(node.access_count, bool) or node.access_count < 0
    ):
        _fail(node, "access_count", "must be a non-negative integer", node.access_count)
    if node.modality is not None and not isinstance(node.modality, str):
        _fail(node, "modality", "must be a string", node.modality)
    if node.condition_space is not None and not isinstance(node.condition_space, dict):
        _fail(node, "condition_space", "must be an object", node.condition_space)
    if node.state_attributes is not None and not isinstance(node.state_attributes, dict):
        _fail(node, "state_attributes", "must be an object", node.state_attributes)
    for name in ("tags", "non_applicable_conditions"):
        v = getattr(node, name)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            _fail(node, name, "must be a list of strings", v)
    if node.verification_basis is not None and node.verification_basis not in VERIFICATION_BASES:
        _fail(
            node,
            "verification_basis",
            f"must be one of {', '.join(VERIFICATION_BASES)} (or absent)",
            node.verification_basis,
        )
    if not isinstance(node.verification_history, list) or not all(
        isinstance(x, dict) for x in node.verification_history
    ):
        _fail(node, "verification_history", "must be a list of objects", node.verification_history)
    if not isinstance(node.edges, list):
        _fail(node, "edges", "must be a list", node.edges)
    # Edges may be given as dicts; store them as Edge objects from here on.
    node.edges = [Edge.from_value(e, node_id=node.id) for e in node.edges]
    for edge in node.edges:
        try:
            check_id(edge.target, what="edge target")
        except UnsafeIdError as exc:
            _fail(node, "edges", f"has an unsafe target: {exc}", edge.target)
        if edge.type not in EDGE_TYPES:
            _fail(node, "edges", f"has an edge type outside {', '.join(EDGE_TYPES)}", edge.type)
        if edge.confidence is not None and (
            not _is_number(edge.confidence) or not math.isfinite(edge.confidence)
        ):
            _fail(node, "edges", "has a non-numeric edge confidence", edge.confidence)
    if not isinstance(node.extra, dict):
        _fail(node, "extra", "must be a dict of extra frontmatter keys", node.extra)
    for key in node.extra:
        if key in FIELD_ORDER:
            _fail(node, key, "is a known field and cannot also be an extra key", key)
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or "\n" in key:
            _fail(node, "extra", f"has an invalid key (1..{MAX_KEY_CHARS} chars, no newline)", key)
    return node


def id_problem(name: str) -> str | None:
    """Why ``name`` is not a safe file-name stem (``None`` if it is one); see :func:`check_id`."""
    return _id_problem(name)


_SLUG_DROP = re.compile(r"[^\w]+")
SLUG_MAX = 48


def slug_id(text: str) -> str:
    """A readable id: a slug of the first non-empty line of ``text`` plus a short random suffix.

    ``"# Binary search\\n..."`` gives ids like ``binary-search-3f9a2c``; CJK is
    kept as is; an empty text gives ``note-<suffix>``. Always a safe id.
    """
    import secrets

    line = next((ln.strip().lstrip("#").strip() for ln in text.splitlines() if ln.strip()), "")
    slug = _SLUG_DROP.sub("-", unicodedata.normalize("NFKC", line).casefold()).strip("-_")
    slug = slug[:SLUG_MAX].rstrip("-_") or "note"
    return f"{slug}-{secrets.token_hex(3)}"
