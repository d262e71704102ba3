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

from pathlib import Path


class MdcgError(Exception):
    """Base class of every error md-cg raises on purpose."""


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


class UnsafeIdError(InvalidNodeError):
    """A node id that is not a safe file-name stem."""


class UnknownLayerError(InvalidNodeError):
    """A layer name outside the fixed set of layers."""


class MalformedNodeFileError(MdcgError):
    """A ``.md`` file that cannot be read as a node.

    ``path`` is the file, ``line`` the 1-based line of the problem when known.
    """

    def __init__(self, path: str | Path, reason: str, *, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {reason}")
        self.path = str(path)
        self.reason = reason
        self.line = line


class NodeNotFoundError(MdcgError, KeyError):
    """No node with this id is in the store."""

    def __init__(self, node_id: str, hint: str = "") -> None:
        msg = f"no node with id {node_id!r} in this store"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)
        self.node_id = node_id

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class DuplicateIdError(MdcgError):
    """``add`` was asked to create a node whose id already exists."""

    def __init__(self, node_id: str, path: str) -> None:
        super().__init__(
            f"node id {node_id!r} already exists at {path}; "
            "use update() to change it or add(..., overwrite=True) to replace it"
        )
        self.node_id = node_id
        self.path = path


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


class NotAStoreError(MdcgError):
    """A path that is not (and may not become) an md-cg store."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)


class ProtectedNodeError(MdcgError):
    """An operation refused because the node is protected (``anchor/``)."""

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(reason)
        self.node_id = node_id


class MergeError(MdcgError):
    """A node file could not be merged at all (the text merge tool is missing or
    refused the content). ``path`` is the file being merged."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason
