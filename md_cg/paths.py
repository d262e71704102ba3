"""Where things live: node file paths and every name under ``.mdcg/``.

The one owner of path rules. A node file lives at
``<layer>/[<folders>/]<id>.md`` under the store root (an archived node at
``archive/<layer>/[<folders>/]<id>.md``); the engine writes
``<layer>/<id>.md`` or ``knowledge/<bucket>/<id>.md`` (:func:`node_rel`),
and a person may put notes in sub-folders of a layer folder.

Paths that come from anywhere but the engine's own computation -- a log
record, a snapshot row, a file found by a scan -- are checked with
:func:`rel_problem` before they are used: relative, ``/``-separated, a layer
folder first, every component a safe name (no ``..``, nothing hidden, no
separators or control characters), ``.md`` last, bounded depth. The file
operations (:mod:`md_cg.fsops`) then refuse to follow a symlink at any
component, so a checked path can never reach outside the root.

Imports only :mod:`md_cg.node`, :mod:`md_cg.script` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .node import LAYERS, id_problem
from .script import id_fold

#: Everything derived or operational lives in this folder of the store root.
META_DIR = ".mdcg"
#: Index journal shards (one per writing process), ``.mdcg/log/<pid>_<uuid>.jsonl``.
LOG_DIR = "log"
#: The index snapshot, ``.mdcg/index.snapshot``.
SNAPSHOT = "index.snapshot"
#: The token of the snapshot this store wrote last, ``.mdcg/index.token``: a
#: snapshot holding another token (restored from a backup, copied from another
#: store) is not this store's, and the index is built from the files instead; and
#: the identity of its file, which a copy of ``.mdcg/`` cannot keep (session 38).
SNAPSHOT_TOKEN = "index.token"
#: Access-event shards and their fold checkpoint.
ACCESS_DIR = "access"
#: Tombstones of forgotten nodes (payload-free).
AUDIT_DIR = "audit"
#: Shards of the reflection record (``reflect``).
REFLECTION_DIR = "reflection"
#: The single-file reflection record of earlier versions (read, never written).
LEGACY_REFLECTION_FILE = "reflection.jsonl"
#: Copies that earlier versions moved aside; purged by ``forget`` and maintenance.
TRASH_DIR = "trash"
#: The maintenance lock (shared by writers, exclusive for compaction), its gate, and
#: the mark a writer holds while it waits at the closed gate.
LOCK = "lock"
GATE = "gate"
WAITING = "waiting"
MAINTENANCE_LOCKS = (LOCK, GATE, WAITING)
#: Per-id stripe locks, ``.mdcg/locks/NN.lock``.
STRIPE_DIR = "locks"
#: Per-store synonym groups (tracked by git).
SYNONYMS = "synonyms.json"

#: Deepest node path accepted (layer folder, sub-folders, file).
MAX_DEPTH = 8
MAX_REL_CHARS = 1024
NODE_SUFFIX = ".md"

BUCKETED_LAYER = "knowledge"
ORPHAN = "orphan"
#: Archived nodes live at ``archive/<their usual path>`` (see docs/format.md):
#: moved there byte for byte, moved back by ``unarchive``.
ARCHIVE_DIR = "archive"
_ARCHIVE_PREFIX = ARCHIVE_DIR + "/"

_LAYER_SET = frozenset(LAYERS)
#: A path made only of plain names (ASCII letters, digits, ``_`` and ``-``,
#: no dot, at most 100 characters: they certainly pass :func:`id_problem`)
#: within :data:`MAX_DEPTH` levels: it passes :func:`rel_problem`, checked by
#: one match (a sync or a cold open checks every file's path).
_PLAIN_NAME = r"[A-Za-z0-9_][A-Za-z0-9_-]{0,99}"
_PLAIN_REL = re.compile(
    rf"(?:{re.escape(ARCHIVE_DIR)}/)?(?:{'|'.join(map(re.escape, LAYERS))})"
    rf"(?:/{_PLAIN_NAME}){{1,{MAX_DEPTH - 1}}}{re.escape(NODE_SUFFIX)}"
)


def meta(*parts: str) -> str:
    """A path under ``.mdcg/`` relative to the root (POSIX form)."""
    return "/".join((META_DIR, *parts))


def node_rel(layer: str, bucket: str | None, node_id: str) -> str:
    """Where the engine writes a node: ``<layer>/<id>.md`` or ``knowledge/<bucket>/<id>.md``."""
    if layer == BUCKETED_LAYER:
        return f"{layer}/{bucket or ORPHAN}/{node_id}{NODE_SUFFIX}"
    return f"{layer}/{node_id}{NODE_SUFFIX}"


def rel_problem(rel: object) -> str | None:
    """Why ``rel`` is not an acceptable node path, or ``None`` if it is one."""
    if not isinstance(rel, str):
        return f"not a string ({type(rel).__name__})"
    if len(rel) <= MAX_REL_CHARS and _PLAIN_REL.fullmatch(rel) is not None:
        return None
    if not rel or len(rel) > MAX_REL_CHARS:
        return "empty or too long"
    if rel.startswith("/") or "\\" in rel:
        return "not a relative POSIX path"
    parts = rel.split("/")
    if parts[0] == ARCHIVE_DIR:
        parts = parts[1:]  # an archived node: the rules of its usual path apply below archive/
    if len(parts) < 2 or len(parts) > MAX_DEPTH:
        return f"not <layer>/.../<id>.md within {MAX_DEPTH} levels"
    if parts[0] not in _LAYER_SET:
        return f"{parts[0]!r} is not a layer folder"
    name = parts[-1]
    if not name.endswith(NODE_SUFFIX):
        return "not a .md file"
    for part in (*parts[1:-1], name[: -len(NODE_SUFFIX)]):
        problem = id_problem(part)
        if problem:
            return f"component {part!r}: {problem}"
    return None


_PLAIN_NODE_NAME = re.compile(rf"{_PLAIN_NAME}{re.escape(NODE_SUFFIX)}")  # a file name of _PLAIN_REL


def rel_checker() -> Callable[[str], str | None]:
    """:func:`rel_problem` for many paths in few folders (a scan): each folder is checked
    once, then only each file's name and the path's length.

    A folder that passes with a stand-in name passes with any name that is a
    safe stem (the rules apply per component, and the depth is the same); any
    other path goes to :func:`rel_problem`, so the answer and its wording are
    exactly its own. A bucket folder named in Chinese costs ~1.4 us a path
    through :func:`rel_problem`, ~0.4 here.
    """
    folders: dict[str, bool] = {}

    def check(rel: str) -> str | None:
        folder, _, name = rel.rpartition("/")
        ok = folders.get(folder)
        if ok is None:
            ok = folders[folder] = bool(folder) and rel_problem(f"{folder}/x{NODE_SUFFIX}") is None
        if (
            ok
            and len(rel) <= MAX_REL_CHARS
            and (
                _PLAIN_NODE_NAME.fullmatch(name) is not None
                or (name.endswith(NODE_SUFFIX) and id_problem(name[: -len(NODE_SUFFIX)]) is None)
            )
        ):
            return None
        return rel_problem(rel)

    return check


def is_node_rel(rel: object) -> bool:
    """True when ``rel`` passes :func:`rel_problem`."""
    return rel_problem(rel) is None


def layer_of(rel: str) -> str:
    """The layer folder of a (checked) node path (below ``archive/`` for an archived one)."""
    return unarchived_rel(rel).split("/", 1)[0]


def is_archived_rel(rel: str) -> bool:
    """True when the (checked) node path lies under ``archive/``."""
    return rel.startswith(_ARCHIVE_PREFIX)


def archived_rel(rel: str) -> str:
    """Where the node file at ``rel`` goes when archived."""
    return rel if is_archived_rel(rel) else _ARCHIVE_PREFIX + rel


def unarchived_rel(rel: str) -> str:
    """Where an archived node file at ``rel`` goes back to (``rel`` itself when not archived)."""
    return rel[len(_ARCHIVE_PREFIX) :] if is_archived_rel(rel) else rel


def stem_of(rel: str) -> str:
    """The file stem of a (checked) node path: the id of a note without frontmatter."""
    return rel.rsplit("/", 1)[-1][: -len(NODE_SUFFIX)]


def id_key(node_id: str) -> str:
    """The uniqueness key of an id: ids with equal keys collide on macOS/Windows."""
    return id_fold(node_id)
