"""md-cg: an AI agent's long-term memory as a cognitive graph of Markdown files.

The ``.md`` files are canonical; the index under ``.mdcg/`` is derived and
rebuildable. Start with :class:`MdCG`::

    from md_cg import MdCG, Node

    with MdCG("memory") as store:
        store.add(id="kp_1", body="# 功能名：二分查找 ...", tags=["domain:计算机科学"])
        results, meta = store.search("二分查找")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public names -> the module that defines them. Imported on first use so that
# `import md_cg` stays cheap (the CLI and MCP server start faster).
_EXPORTS = {
    "MdCG": "store",
    "Deleted": "reports",
    "NodeHasIncomingEdgesError": "errors",
    "IdCollisionError": "errors",
    "InvalidVerdictError": "errors",
    "UnsafePathError": "errors",
    "StoreEngine": "protocol",
    "new_id": "store",
    "Node": "node",
    "Edge": "node",
    "LAYERS": "node",
    "VERIFICATION_BASES": "node",
    "EDGE_TYPES": "node",
    "Entry": "index",
    "Finding": "reports",
    "Page": "editing",
    "HealthReport": "reports",
    "SyncReport": "reports",
    "MaintenanceReport": "reports",
    "MdcgError": "errors",
    "InvalidNodeError": "errors",
    "InvalidArgumentError": "errors",
    "OtherMemoriesError": "errors",
    "UnsafeIdError": "errors",
    "UnknownLayerError": "errors",
    "MalformedNodeFileError": "errors",
    "NodeNotFoundError": "errors",
    "DuplicateIdError": "errors",
    "EditConflictError": "errors",
    "ChangedOnDiskError": "errors",
    "LockTimeoutError": "errors",
    "NotAStoreError": "errors",
    "ProtectedNodeError": "errors",
    "StoreClosedError": "errors",
    "SnapshotDamageError": "errors",
    "ReadOnlyStoreError": "errors",
    "is_out_of_room": "errors",
    "was_applied": "errors",
    "was_logged": "errors",
    "was_recovering": "errors",
    "record_failed": "errors",
    "SearchResult": "search",
    "route_key": "layout",
    "bucket_dir": "layout",
    "migrate": "migrate",
    "verify_migration": "migrate",
    "MigrationReport": "migrate",
    "import_nodes": "transfer",
    "export_nodes": "transfer",
    "ImportReport": "transfer",
    "ExportReport": "transfer",
    "ImportSourceError": "errors",
    "content_id": "node",
    "install_merge_driver": "merge",
    "configure_clone": "merge",
    "work_tree_of": "merge",
    "tracked_warning": "merge",
    "enclosing_store": "engine",
    "is_store_folder": "engine",
    "slug_id": "node",
    "id_key": "paths",
    "FileError": "errors",
    "SynonymFileError": "errors",
    "MarkerFileError": "errors",
    "DataFileError": "errors",
    "MergeError": "errors",
    "UnknownBigDomainError": "errors",
    "is_fact": "judge",
    "Scope": "visibility",
    "SweepReport": "retention",
    "Departure": "audit",
    "with_departure": "store",
    "resurface_readable": "views",
    # the types of what MdCG's calls return, for annotations
    "Reopened": "views",
    "Updated": "views",
    "ReadablePick": "views",
    "InjectItem": "recall",
    "RecallStats": "recall",
    "Resurfaced": "resurface",
    "OrganizeResult": "organize",
    "Neighbour": "graph",
    "Reflection": "loop",
    "FlywheelStep": "loop",
    "Resolution": "loop",
    "BadRecord": "transfer",
    "BucketHealth": "routing",
    "AppendLog": "logs",
}

__all__ = [
    "EDGE_TYPES",
    "LAYERS",
    "VERIFICATION_BASES",
    "AppendLog",
    "BadRecord",
    "BucketHealth",
    "ChangedOnDiskError",
    "DataFileError",
    "Deleted",
    "Departure",
    "DuplicateIdError",
    "Edge",
    "EditConflictError",
    "Entry",
    "ExportReport",
    "FileError",
    "Finding",
    "FlywheelStep",
    "HealthReport",
    "IdCollisionError",
    "ImportReport",
    "ImportSourceError",
    "InjectItem",
    "InvalidArgumentError",
    "InvalidNodeError",
    "InvalidVerdictError",
    "LockTimeoutError",
    "MaintenanceReport",
    "MalformedNodeFileError",
    "MarkerFileError",
    "MdCG",
    "MdcgError",
    "MergeError",
    "MigrationReport",
    "Neighbour",
    "Node",
    "NodeHasIncomingEdgesError",
    "NodeNotFoundError",
    "NotAStoreError",
    "OrganizeResult",
    "OtherMemoriesError",
    "Page",
    "ProtectedNodeError",
    "ReadOnlyStoreError",
    "ReadablePick",
    "RecallStats",
    "Reflection",
    "Reopened",
    "Resolution",
    "Resurfaced",
    "Scope",
    "SearchResult",
    "SnapshotDamageError",
    "StoreClosedError",
    "StoreEngine",
    "SweepReport",
    "SyncReport",
    "SynonymFileError",
    "UnknownBigDomainError",
    "UnknownLayerError",
    "UnsafeIdError",
    "UnsafePathError",
    "Updated",
    "bucket_dir",
    "configure_clone",
    "content_id",
    "enclosing_store",
    "export_nodes",
    "id_key",
    "import_nodes",
    "install_merge_driver",
    "is_fact",
    "is_out_of_room",
    "is_store_folder",
    "migrate",
    "new_id",
    "record_failed",
    "resurface_readable",
    "route_key",
    "slug_id",
    "tracked_warning",
    "verify_migration",
    "was_applied",
    "was_logged",
    "was_recovering",
    "with_departure",
    "work_tree_of",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'md_cg' has no attribute {name!r}")
    from importlib import import_module

    imported = import_module(f"md_cg.{module}")
    # md_cg.migrate is a module callable as its function (see md_cg/migrate.py): the
    # package's attribute is the module whatever was imported first.
    value = imported if name == module else getattr(imported, name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .audit import Departure
    from .editing import Page
    from .errors import (
        DuplicateIdError,
        IdCollisionError,
        InvalidArgumentError,
        InvalidNodeError,
        InvalidVerdictError,
        LockTimeoutError,
        MalformedNodeFileError,
        MdcgError,
        NodeHasIncomingEdgesError,
        NodeNotFoundError,
        NotAStoreError,
        OtherMemoriesError,
        ProtectedNodeError,
        ReadOnlyStoreError,
        SnapshotDamageError,
        StoreClosedError,
        UnknownLayerError,
        UnsafeIdError,
        UnsafePathError,
        is_out_of_room,
        record_failed,
        was_applied,
        was_logged,
        was_recovering,
    )
    from .graph import Neighbour
    from .index import Entry
    from .layout import bucket_dir, route_key
    from .logs import AppendLog
    from .loop import FlywheelStep, Reflection, Resolution
    from .migrate import MigrationReport, migrate, verify_migration
    from .node import EDGE_TYPES, LAYERS, VERIFICATION_BASES, Edge, Node
    from .organize import OrganizeResult
    from .protocol import StoreEngine
    from .recall import InjectItem, RecallStats
    from .reports import Deleted, Finding, HealthReport, MaintenanceReport, SyncReport
    from .resurface import Resurfaced
    from .retention import SweepReport
    from .routing import BucketHealth
    from .search import SearchResult
    from .store import MdCG, new_id, with_departure
    from .transfer import BadRecord, ExportReport, ImportReport, export_nodes, import_nodes
    from .views import ReadablePick, Reopened, Updated, resurface_readable
    from .visibility import Scope
