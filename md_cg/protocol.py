"""The narrow door into a store for the modules built on top of it.

The cognitive loop (:mod:`md_cg.loop`) and the lifecycle modules (organise,
recall) depend on :class:`StoreEngine`, not on :class:`md_cg.MdCG`: a structural protocol
listing exactly the calls they may make. ``MdCG`` satisfies it; a test
double can too. Keeping the door narrow keeps each capability in a room of
its own and the import graph free of cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from .index import Entry
from .logs import AppendLog
from .node import Node
from .reports import Deleted
from .visibility import Scope


class StoreEngine(Protocol):
    """What the loop and the lifecycle modules may ask of a store."""

    @property
    def root(self) -> Path: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def lock_timeout(self) -> float: ...

    @property
    def scope(self) -> Scope | None: ...

    def __contains__(self, node_id: object) -> bool: ...

    def get(self, node_id: str) -> Node: ...

    def entry(self, node_id: str) -> Entry: ...

    def entries(self, layer: str | None = None) -> list[Entry]: ...

    def refresh(self) -> list[str]: ...

    def add(
        self,
        node: Node | None = None,
        /,
        *,
        overwrite: bool = False,
        durable: bool | None = None,
        stamp: bool = True,
        **fields_: Any,
    ) -> Node: ...

    def add_many(
        self,
        nodes: Iterable[Node],
        *,
        overwrite: bool = False,
        durable: bool | None = None,
        stamp: bool = True,
        progress: Callable[[int], Any] | None = None,
    ) -> list[Node]: ...

    def modify(
        self, node_id: str, change: Callable[[Node], Node | None], *, durable: bool | None = None
    ) -> Node: ...

    def delete(
        self, node_id: str, *, force: bool = False, durable: bool | None = None, all_copies: bool = False
    ) -> Deleted: ...

    def log(self, name: str) -> AppendLog: ...

    def archive(self, ids: str | Sequence[str], *, reason: str = "") -> list[str]: ...

    def unarchive(self, ids: str | Sequence[str]) -> list[str]: ...

    def apply_changes(self, *, add: Sequence[Node] = (), archive: Sequence[str] = ()) -> None: ...
