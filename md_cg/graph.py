"""Edge traversal over the index (DESIGN §9).

Out-edges live in the nodes' frontmatter; the index keeps the reverse map
(target → sources), maintained through add, update, delete, moves and sync.
:func:`neighbours` walks either direction breadth-first, is safe on cycles
(every node is reported once, at its smallest depth) and reports edges to
ids that are not in the store (dangling) without following them.

Imports only :mod:`md_cg.index` and :mod:`md_cg.node`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from .errors import InvalidArgumentError, NodeNotFoundError
from .index import IndexState
from .node import EDGE_TYPES
from .script import short_repr

DIRECTIONS = ("out", "in", "both")


@dataclass(frozen=True)
class Neighbour:
    """A node reached from the start: over which edge, from which node, how far."""

    id: str
    type: str
    direction: str  # "out": via an edge of `via`; "in": `id` has an edge to `via`
    depth: int
    via: str
    exists: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def neighbours(
    state: IndexState,
    node_id: str,
    direction: str = "out",
    types: Collection[str] | None = None,
    depth: int = 1,
    hidden: Collection[str] = frozenset(),
) -> list[Neighbour]:
    """Nodes within ``depth`` edges of ``node_id`` (breadth-first, deterministic order).

    Ids in ``hidden`` (:mod:`md_cg.visibility`) are treated as absent: an
    edge to one is reported like an edge to a missing id, and their own edges
    are neither reported nor followed.
    """
    if node_id not in state.entries or node_id in hidden:
        raise NodeNotFoundError(node_id)
    if direction not in DIRECTIONS:
        raise InvalidArgumentError(
            f"direction must be one of {', '.join(DIRECTIONS)}, got {short_repr(direction)}",
            name="direction",
            value=direction,
        )
    if types is not None:
        listed = isinstance(types, Collection) and not isinstance(types, str)
        if not listed or not all(isinstance(t, str) for t in types):
            raise InvalidArgumentError(
                f"types must be a list of edge types, got {short_repr(types)}", name="types", value=types
            )
        bad = sorted(set(types) - set(EDGE_TYPES))
        if bad:
            raise InvalidArgumentError(
                f"unknown edge type(s) {', '.join(bad)}; expected {', '.join(EDGE_TYPES)}",
                name="types",
                value=bad,
            )
    if not isinstance(depth, int) or depth < 1:
        raise InvalidArgumentError(f"depth must be an integer >= 1, got {depth!r}", name="depth", value=depth)
    wanted = set(types) if types is not None else None
    seen = {node_id}
    out: list[Neighbour] = []
    queue: deque[tuple[str, int]] = deque([(node_id, 0)])
    while queue:
        current, d = queue.popleft()
        if d >= depth:
            continue
        steps: list[tuple[str, str, str]] = []
        if direction in ("out", "both"):
            entry = state.entries.get(current)
            if entry is not None:
                steps += [(t, et, "out") for t, et in entry.edges]
        if direction in ("in", "both"):
            steps += [(src, et, "in") for src, et in state.reverse.get(current, ()) if src not in hidden]
        for other, etype, way in sorted(steps, key=lambda s: (s[2], s[1], s[0])):
            if wanted is not None and etype not in wanted:
                continue
            if other in seen:
                continue
            seen.add(other)
            exists = other in state.entries and other not in hidden
            out.append(Neighbour(other, etype, way, d + 1, current, exists))
            if exists:
                queue.append((other, d + 1))
    return out
