"""Edits beyond field updates: the raw file text, renaming an id, listing with filters.

* :func:`read_text` -- a node's file exactly as stored.
* :func:`edit_text` -- read-modify-write of the file text under the node's
  lock; the result must still parse as the same node, or nothing is written.
* :func:`rename` -- a new id for a node, as one journal commit that also
  re-points the edges of every node that linked to it.
* :func:`select` -- entries filtered by layer, tag and time, newest first.

Imports the engine and the modules below it.
"""

from __future__ import annotations

import functools
import heapq
import os
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from . import audit as audit_mod
from . import index, merge, paths, visibility
from .engine import (
    Engine,
    First,
    Reads,
    Staged,
    admits_held,
    broken_file_of,
    check_move,
    check_redone,
    copies_known,
    copies_of,
    dropped_file,
    lost_file,
    moved_away,
    narrowed,
    read_entry,
    retried,
    scoped_read,
    settle_left,
    stage,
    unreadable_why,
)
from .errors import (
    DuplicateIdError,
    InvalidArgumentError,
    InvalidNodeError,
    MalformedNodeFileError,
    NodeNotFoundError,
    UnsafePathError,
    was_applied,
)
from .index import Columns, Entry
from .journal import stamp as journal_stamp
from .logs import AppendLog
from .node import (
    LAYERS,
    Node,
    check_id,
    check_layer,
    check_new_id,
    finite,
    format_instant,
    quantise_instant,
    unusable,
    validate,
)
from .nodefile import dumps, loads, read_bytes_as_text
from .script import short_repr, twin_labels


def require_text(node: Node) -> Node:
    """``node``, or InvalidNodeError when its body is not text a memory can hold
    (:func:`md_cg.merge.text_problem`: no text, only heading marks, git conflict
    markers, a NUL character; imports carry their sources as they are and skip this check).
    """
    problem = merge.text_problem(node)
    if problem is not None:
        raise problem
    return node


def require_usable(
    node: Node,
    fields: Collection[str] = ("tags", "edges", "times"),
    *,
    kept_tags: Sequence[object] = (),
    kept_edges: Sequence[object] = (),
    kept_times: Mapping[str, object] | None = None,
) -> None:
    """Raise :func:`md_cg.node.unusable`'s InvalidNodeError, if any: a blank or
    control-character tag, an edge to itself, an edge confidence outside 0..1, a
    time outside the years 1-9999 in what a caller writes by hand (``add``,
    ``update``); ``kept_*``: what the stored node held (an edit of it), which is not
    new input."""
    problem = unusable(node, fields, kept_tags=kept_tags, kept_edges=kept_edges, kept_times=kept_times)
    if problem is not None:
        raise problem


def read_text(engine: Engine, node_id: str, *, checked: bool = False) -> str:
    """The node's file as stored (frontmatter and body), read without following symlinks.
    ``checked`` (a scoped caller): a file that holds another memory now raises
    :func:`~md_cg.engine.moved_away`'s error, as ``get`` does -- session 36, a scoped
    ``read_text("x")`` returned another scope's ``hush``, moved over ``x.md`` by hand --,
    and one narrowed in place by hand out of the caller's scope
    (:func:`~md_cg.engine.narrowed`) an unknown id's."""
    entry = engine.entry(check_id(node_id))
    data = _file_of(engine, entry, {})
    if checked:
        held = _read_or_none(engine, data, entry)
        if held is not None and held.id != entry.id:
            raise moved_away(engine, entry, held)
        if held is not None and narrowed(engine.scope, entry, held):
            raise NodeNotFoundError(entry.id)  # narrowed in place by hand since the index took it in
    return read_bytes_as_text(data, entry.path)


def _read_or_none(engine: Engine, data: bytes, entry: Entry) -> Node | None:
    """The node ``data`` (``entry``'s file) holds; None when it cannot be read as one -- to
    an unscoped handle, which may see and fix such a file (``mdcg show``, ``mdcg edit``). A
    scoped one is refused it (:func:`~md_cg.engine.scoped_read`: the file, not what is
    wrong): whose memory it is cannot be told (a hand edit may have narrowed it to other
    agents, ``agent_scope: [alice, bob]``), and before session 39 a scoped ``read_text``
    returned it whole, and ``edit_text`` handed it to ``change``."""
    try:
        return scoped_read(engine, entry.id, index.decode_node, data, entry.path)
    except MalformedNodeFileError:
        if engine.scope is not None:
            raise
        return None


def _file_of(engine: Engine, entry: Entry, reads: Reads) -> bytes:
    """The bytes of ``entry``'s file (one the caller sees), added to ``reads`` with its
    stamp; gone from its path by hand: :func:`~md_cg.errors.lost_file_error` (was a bare
    FileNotFoundError)."""
    try:
        data, st = index.read_limited(engine.root_str, entry.path)
    except (FileNotFoundError, NotADirectoryError):
        raise lost_file(engine, entry) or NodeNotFoundError(entry.id) from None
    reads[entry.path] = (journal_stamp(st), data)
    return data


def edit_text(
    engine: Engine,
    node_id: str,
    change: Callable[[str], str],
    *,
    durable: bool | None,
    check: Callable[[Node, Node, Entry], None] | None = None,
    refuse: Callable[[Entry], None] | None = None,
) -> Node:
    """Apply ``change`` to the node's file text under its lock; return the node as stored.

    The new text may be canonical or hand-written (YAML) frontmatter, or no
    frontmatter at all (the id and layer stay). It must parse as a valid node
    with the same id and some body text, or nothing is written. A changed
    layer (or bucket) moves the file. ``check(new, old, entry)`` may refuse
    the edited node (the caller's scope), given the node as stored and its entry;
    ``refuse(entry)`` may refuse the node before ``change`` runs (its scope, an
    archived or expired node: :meth:`md_cg.MdCG.edit_text`).
    A text without ``created_at`` keeps the stored one (the memory's age: a new
    frontmatter written without it dropped it, and the memory looked undated).
    A text parsing to the node as stored (every field and the body; its
    ``updated_at`` aside, which a write sets) writes nothing: the node as stored
    is returned, its ``updated_at`` kept (an edit dropping the final newline moved
    the memory to the top of ``list``). A text giving an expiry already past is
    stored, with the ``RuntimeWarning`` of ``update``: the memory is hidden at once.
    """
    check_id(node_id)
    with engine.lock, engine.hold([node_id]):
        node, wrote = retried(
            engine, lambda first: _edit_once(engine, node_id, change, check, refuse, durable, first)
        )
    if wrote:
        warn_if_expired(node, time.time(), stacklevel=4)
    return node


def _edit_once(
    engine: Engine,
    node_id: str,
    change: Callable[[str], str],
    check: Callable[[Node, Node, Entry], None] | None,
    refuse: Callable[[Entry], None] | None,
    durable: bool | None,
    first: First,
) -> tuple[Node, bool]:
    """One run of :func:`edit_text` (:func:`~md_cg.engine.retried`): the node as stored
    or written, and whether it was written. A run after the file changed by hand refuses
    a text given whole that would overwrite the edit (:func:`~md_cg.engine.overrides_edit`)."""
    current = engine.state.entries.get(node_id)
    if current is None:
        raise NodeNotFoundError(node_id)
    if refuse is not None:
        refuse(current)
    reads: Reads = {}
    data = _file_of(engine, current, reads)
    held = _read_or_none(engine, data, current)
    if held is not None and held.id != node_id:  # another memory's file: ``change`` never sees it
        raise moved_away(engine, current, held)  # (attack a3 of session 36: a scoped edit did)
    if held is not None and narrowed(engine.scope, current, held):  # nor one narrowed by hand
        raise NodeNotFoundError(node_id)  # (attack a4 of session 37)
    stored = read_bytes_as_text(data, current.path)
    text = change(stored)
    if not isinstance(text, str):
        raise InvalidArgumentError("the edit must produce text", name="change", value=text)
    if text == stored:
        return read_entry(engine, current), False
    try:
        node = loads(text, current.path, default_id=node_id, default_layer=current.layer)
    except MalformedNodeFileError as exc:
        raise InvalidNodeError(
            f"node {node_id!r}: the edited file would not be a valid node: {exc.reason}", node_id=node_id
        ) from None
    if node.id != node_id:
        was, got = twin_labels(node_id, node.id)  # escaped when they differ in Unicode form only
        raise InvalidNodeError(
            f"the id of node {was} cannot change in an edit (got {got}); rename it instead",
            field="id",
            node_id=node_id,
        )
    require_text(validate(node))
    if node.created_at is None:
        node.created_at = current.created_at
    old = read_entry(engine, current)
    node.updated_at = old.updated_at  # the text's is never stored: a write stamps it now
    merge.settle_edit(node, old)  # markers taken out of the body: that conflict is resolved
    if dumps(node) == stored:  # a final newline dropped, a value requoted: md-cg would
        return old, False  # write the file it holds (node == old took 1 for true; r7: a comment
        # removed from a hand-written file was "no change", and stayed)
    if check is not None:
        check(node, old, current)
    check_redone(first, node_id, current.path, data, node)  # a text given whole: the edit is kept
    node.updated_at = quantise_instant(max(time.time(), (current.updated_at or 0.0) + 1e-6))
    s = stage(node)
    check_move(engine, node_id, current.path, s.rel)  # a changed layer: not onto another file
    engine.commit(
        [s], [(node_id, current.path)] if current.path != s.rel else [], durable=durable, guard=reads
    )
    return node, True


def warn_if_expired(node: Node, now: float, *, stacklevel: int) -> None:
    """:func:`warn_past_expiry` when ``node`` (just written) has an expiry already past
    and is not long-term."""
    if node.expires_at is None or node.expires_at > now or node.retention_tier == "long":
        return
    warn_past_expiry(node, stacklevel=stacklevel + 1)


def warn_past_expiry(node: Node, *, stacklevel: int) -> None:
    """The ``RuntimeWarning`` of a memory just written with an expiry already past: it is
    hidden from every read at once, and the next sweep removes it (``add``, ``update``
    and ``modify`` warn alike; docs/retention.md). ``stacklevel``: as ``warnings.warn``'s
    called from here, so that the warning names the user's line."""
    when = format_instant(node.expires_at) if node.expires_at is not None else None
    warnings.warn(
        f"md-cg: node {node.id!r}: expires_at {when} is already past: the memory is hidden "
        "from every read at once and the next sweep removes it (`mdcg sweep`, sweep())",
        RuntimeWarning,
        stacklevel=stacklevel,
    )


def rename(
    engine: Engine,
    old_id: str,
    new_id: str,
    *,
    layer: str | None = None,
    durable: bool | None = None,
    scope: visibility.Scope | None = None,
    audit: AppendLog | None = None,
    refuse: Callable[[Entry], None] | None = None,
    path: str | None = None,
) -> Node:
    """Give the node ``old_id`` the id ``new_id`` (and optionally a new layer).
    ``path``: only that file of the id, one of several holding it (:func:`_rename_copy`).

    One commit writes the renamed node, re-points the edges of every node
    that linked to ``old_id`` and removes the old file: all or nothing. The
    new id must be free (twins included). ``scope``: the caller's --
    only the nodes it sees have their edges re-pointed (another scope's files
    are not rewritten, nor told the new id), and an id held by a node it does
    not see is refused without naming that node. With ``audit``, a new id is
    recorded there (:data:`md_cg.audit.RENAMED`, no content) while the ids are still held.
    ``refuse(entry)`` may refuse the node ``old_id`` under the locks (its scope, an
    archived or expired node: :meth:`md_cg.MdCG.rename`).
    """
    check_id(old_id)
    check_new_id(new_id)
    if layer is not None:
        check_layer(layer)
    if path is not None:  # no audit record: the id stays, held by the file shown
        return _rename_copy(engine, (old_id, new_id), path, layer, durable, scope, refuse)
    if paths.id_key(old_id) == paths.id_key(new_id) and old_id != new_id:
        old_label, new_label = twin_labels(old_id, new_id)  # 'Caf\u00e9', 'Cafe\u0301': not twice 'Café'
        raise InvalidArgumentError(
            f"{old_label} and {new_label} differ only by case or normalisation: one file on macOS/Windows; "
            "to change only that, rename it to another id first, then to this one",
            name="new_id",
            value=new_id,
        )
    with engine.lock:
        sources = _sources(engine, old_id)
        while True:
            with engine.hold([old_id, new_id, *sources]):
                now_sources = _sources(engine, old_id)
                if not now_sources <= sources:
                    sources |= now_sources
                    continue
                sees = scope.admits if scope is not None else None
                mine = sorted(i for i in now_sources if sees is None or sees(engine.state.entries[i]))
                current = engine.state.entries.get(old_id)
                if current is None:  # its file dropped by hand: named to an unscoped caller
                    raise dropped_file(engine, old_id, named=scope is None) or NodeNotFoundError(old_id)
                if refuse is not None:
                    refuse(current)
                try:
                    # a file edited by hand meanwhile: done again over the edit (all it changes
                    # is made of the files: their ids, edges, layer)
                    once = functools.partial(
                        _rename_locked, engine, old_id, new_id, layer, mine, durable, scope
                    )
                    node = retried(engine, once)
                except BaseException as exc:  # done, only not known durable: recorded all the same
                    if audit is not None and old_id != new_id and was_applied(exc):
                        _record_rename(engine, audit, engine.get(new_id), old_id, durable)
                    raise
                if audit is not None and old_id != new_id:
                    _record_rename(engine, audit, node, old_id, durable)
                return node


def _record_rename(engine: Engine, audit: AppendLog, node: Node, old_id: str, durable: bool | None) -> None:
    """The audit record of a rename (what a sync's recovery writes too), after its commit --
    also when only the fsync of its folders failed (:func:`md_cg.errors.was_applied`): the
    commit is closed then, and no recovery writes it (attack a3 of session 37: a later
    ``get`` of the old id no longer said when it was renamed). Also when its ``done`` line
    failed too (:data:`~md_cg.errors.OPEN_NOTE`, session 39): once this record is in the
    log, the recovery that closes the commit writes none for the pair
    (:func:`md_cg.audit.record_recovered_renames`) -- not a ``rename_interrupted`` either
    when the old id was added again meanwhile (it took the new file for the old one edited
    after a crash)."""
    sure = engine.durable if durable is None else durable
    audit.append([audit_mod.rename_record(node, old_id)], durable=sure, landed=True)


def _sources(engine: Engine, node_id: str) -> set[str]:
    return {src for src, _ in engine.state.reverse.get(node_id, ()) if src != node_id}


def _rename_locked(
    engine: Engine,
    old_id: str,
    new_id: str,
    layer: str | None,
    sources: Sequence[str],
    durable: bool | None,
    scope: visibility.Scope | None = None,
    _first: First | None = None,
) -> Node:
    current = engine.state.entries.get(old_id)
    if current is None:
        raise NodeNotFoundError(old_id)
    if lost_file(engine, current) is not None:  # moved by hand, its file is no copy to delete
        raise moved_away(engine, current, None)
    copies = [rel for _, rel in copies_of(engine, [current], scope)]
    if copies:  # renamed, the copies would bring the old id back at the next sync
        raise InvalidArgumentError(
            f"cannot rename {old_id!r}: it is also held by {', '.join(copies)} (a copy, or a merge that "
            f"left two); keep one file (delete the other, or `delete {old_id}` removes all), sync, "
            f"then rename -- or rename that file alone: `rename {old_id} NEW_ID --path {copies[0]}`",
            name="node_id",
            value=old_id,
        )
    reads: Reads = {}  # the files read: the commit is undone if one changes before its rename
    node = read_entry(engine, current, reads)
    if old_id != new_id:  # the file says what it was called: a clone that never saw the rename can tell
        earlier = [*audit_mod.earlier_ids(node), old_id]  # in order, repeats and all: a -> b -> a is [a, b]
        cap = index.MAX_RENAMED_FROM
        node.extra[audit_mod.RENAMED_FROM] = (
            earlier if len(earlier) <= cap else [earlier[0], *earlier[1 - cap :]]
        )
    _take_id(node, old_id, new_id, layer)
    now = time.time()
    node.updated_at = quantise_instant(now)
    renamed = stage(validate(node), archived=current.archived)  # an archived node stays archived
    if old_id == new_id:  # a move to ``layer``: never onto another file (a hand-placed one)
        check_move(engine, old_id, current.path, renamed.rel)
    else:
        _check_free(engine, old_id, renamed, scope)
    puts = [renamed]
    for src in sources:
        entry = engine.state.entries[src]
        other = read_entry(engine, entry, reads)
        for edge in other.edges:
            if edge.target == old_id:
                edge.target = new_id
        other.updated_at = quantise_instant(max(now, (entry.updated_at or 0.0) + 1e-6))
        s = stage(validate(other))
        # Only its edges change: the file is rewritten where it is (a hand-placed
        # note, an archived one), never copied to its canonical path.
        puts.append(Staged(s.node, entry.path, s.data, s.domain))
    dels = [(old_id, current.path)] if (old_id != new_id or current.path != renamed.rel) else []
    # the old file's late appends go to the new id's (journal._carry_late_appends)
    engine.commit(puts, dels, durable=durable, guard=reads, renamed={old_id: new_id})
    return node


def _check_free(engine: Engine, old_id: str, renamed: Staged, scope: visibility.Scope | None) -> None:
    """Refuse the rename of ``old_id`` to ``renamed`` (staged) when its new id is taken: by a
    memory outside the caller's ``scope`` (not named), or a file at its path."""
    state, new_id = engine.state, renamed.node.id
    holder = state.entries.get(new_id) or state.entries.get(state.twin_of(new_id) or "")
    if holder is not None and scope is not None and not scope.admits(holder):
        raise InvalidArgumentError(
            f"cannot rename {old_id!r} to {new_id!r}: the id is taken by a memory outside this "
            "handle's scope; choose another id",
            name="new_id",
            value=new_id,
        )
    existing = _new_id_path(engine, renamed.node, old_id, renamed.rel)
    if existing is not None:
        why = _occupied(engine, old_id, new_id, existing, scope)
        raise InvalidArgumentError(
            f"cannot rename {old_id!r} to {new_id!r}: {why}", name="new_id", value=new_id
        )


def _rename_copy(
    engine: Engine,
    ids: tuple[str, str],
    path: str,
    layer: str | None,
    durable: bool | None,
    scope: visibility.Scope | None,
    refuse: Callable[[Entry], None] | None,
) -> Node:
    """Give ``path`` -- one of several files holding the old id (a ``duplicate_id``: two
    clones each added a memory under one id, and git kept both files) -- the new id:
    one commit writes its memory under the new id (and ``layer``) and removes the file;
    the other files keep it. ``path`` is relative to the store's root (or absolute), and
    must be a file of the id in the caller's ``scope`` (:func:`~md_cg.engine.copies_read`):
    one not shown, or the one shown while another file holds the id -- that one is shown
    then (session 42: the shown file was refused, "rename it without a path", and a rename
    without one was refused for the other files, so the memory a person was shown could
    not be the one given a new id). A file changed meanwhile is read again
    (:func:`~md_cg.engine.retried`). No edge is re-pointed: the id is still a memory here,
    and which of its files an edge meant cannot be told. Before session 41 no call could
    settle such a pair but by hand (rename refused, and ``delete`` removed both). ``ids``:
    (old id, new id), checked."""
    old_id, new_id = ids
    rel = _store_rel(engine, path)
    with engine.lock, engine.hold([old_id, new_id]):
        current = engine.state.entries.get(old_id)
        if current is None:
            raise NodeNotFoundError(old_id)
        if refuse is not None:
            refuse(current)
        return retried(
            engine, lambda _: _rename_copy_once(engine, current, new_id, rel, layer, durable, scope)
        )


def _take_id(node: Node, old_id: str, new_id: str, layer: str | None) -> None:
    """``node`` (of ``old_id``) renamed ``new_id`` in place, moved to ``layer`` if given."""
    node.id = new_id
    if layer is not None:
        node.layer = layer
    for edge in node.edges:  # a self-loop follows the node
        if edge.target == old_id:
            edge.target = new_id


def _store_rel(engine: Engine, path: str) -> str:
    """``path`` (relative to the store's root, or absolute) as a root-relative POSIX path."""
    full = os.path.normpath(os.path.join(engine.root_str, path))
    return os.path.relpath(full, engine.root_str).replace(os.sep, "/")


def _rename_copy_once(
    engine: Engine,
    current: Entry,
    new_id: str,
    rel: str,
    layer: str | None,
    durable: bool | None,
    scope: visibility.Scope | None,
) -> Node:
    """One run of :func:`rename_copy`, its commit guarded by the copy's bytes as read."""
    old_id = current.id
    copies = [r for _, r in copies_of(engine, [current], scope)]
    if rel not in copies and not (rel == current.path and copies):
        shown = (
            "the file shown as it: rename it without a path" if rel == current.path else "not a copy of it"
        )
        held = f"its other files: {', '.join(copies)}" if copies else "no other file holds it"
        raise InvalidArgumentError(
            f"cannot rename {old_id!r} at {rel}: {shown} ({held})", name="path", value=rel
        )
    reads: Reads = {}
    try:
        data, st = index.read_limited(engine.root_str, rel)
        reads[rel] = (journal_stamp(st), data)
        node = index.decode_node(data, rel)
    except (OSError, UnsafePathError, MalformedNodeFileError) as exc:
        raise InvalidArgumentError(
            f"cannot rename {old_id!r} at {rel}: {exc}", name="path", value=rel
        ) from None
    if node.id != old_id:  # changed by hand since it was found
        raise InvalidArgumentError(
            f"cannot rename {old_id!r} at {rel}: it holds {node.id!r} now", name="path"
        )
    _take_id(node, old_id, new_id, layer)
    node.updated_at = quantise_instant(max(time.time(), (node.updated_at or 0.0) + 1e-6))
    renamed = stage(validate(node), archived=rel.startswith(paths.ARCHIVE_DIR + "/"))
    _check_free(engine, old_id, renamed, scope)
    left = copies_known(engine, [old_id])
    if rel == current.path:  # the file shown: the id stays with its other files, one of them shown now
        left[old_id] = list(dict.fromkeys([*left.get(old_id, ()), *copies]))
    engine.commit([renamed], [(old_id, rel)], durable=durable, guard=reads)
    settle_left(engine, left)
    return node


def _new_id_path(engine: Engine, node: Node, old_id: str, rel: str) -> str | None:
    """:meth:`~md_cg.engine.Engine.check_new` of the renamed ``node`` (its file to be at
    ``rel``), a file named for its new id that cannot be read refused in a rename's words
    (:func:`md_cg.engine.unreadable_why`: whose it is cannot be told)."""
    try:
        return engine.check_new(node, rel)
    except DuplicateIdError as exc:
        if not exc.unreadable:
            raise
        why = unreadable_why(engine, broken_file_of(engine, node.id) or rel, there=False)
        raise InvalidArgumentError(
            f"cannot rename {old_id!r} to {node.id!r}: {why}", name="new_id", value=node.id
        ) from None


def _occupied(
    engine: Engine, old_id: str, new_id: str, rel: str, scope: visibility.Scope | None = None
) -> str:
    """Why ``new_id``'s file ``rel`` is not free: its memory, or a file there that the
    index does not hold as ``new_id`` (another memory's, one not taken in yet, or text
    that cannot be read as a memory). Another memory outside ``scope`` is not named: a
    file named by hand may hold any id (session 35: another scope's ``hush`` was named)."""
    if new_id in engine.state.entries:
        return f"that id exists at {rel}"
    try:
        data, _ = index.read_limited(engine.root_str, rel)
        held = index.decode_node(data, rel)
    except MalformedNodeFileError:
        if scope is not None:  # whose file it is cannot be told; its own health only counts it
            return unreadable_why(engine, rel)
        return (
            f"the file {rel} is there and cannot be read as a memory (health lists it); fix or move it first"
        )
    except (OSError, UnsafePathError):
        return f"the file {rel} is there; move it first"
    if held.id == old_id:
        return f"its file is {rel}, named after the new id; rename it to another id first, then to this one"
    if held.id != new_id and not admits_held(
        engine, scope, (held.id, held.agent_scope, held.workspace_scope, held.sensitivity)
    ):
        return "the id is taken by a memory outside this handle's scope; choose another id"
    if held.id != new_id:
        return (
            f"the file {rel} holds memory {held.id!r} (its name is not its id); move that file "
            "to its own name, or choose another id"
        )
    return f"the file {rel} holds that id and the index does not know it yet; sync takes it in"


class Page(NamedTuple):
    """One page of a listing: how many nodes match, and the entries of the page."""

    total: int
    entries: list[Entry]


def select(
    listed: Iterable[tuple[str, str, float]],
    entry_of: Callable[[str], Entry],
    *,
    layer: str | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> Page:
    """The nodes of ``listed`` (``(id, layer, changed)``, see
    :meth:`md_cg.index.Entries.listed`) of ``layer`` whose
    :attr:`~md_cg.index.Entry.changed` time lies in ``[since, until]``; newest
    first (ties by id), then ``offset``/``limit``. ``entry_of`` gives the entry
    of an id (called only for the page). A tag is chosen by what is listed
    (:meth:`md_cg.index.IndexState.tagged`)."""
    _check_page(layer, limit, offset)
    picked = [
        (-when, node_id)
        for node_id, in_layer, when in listed
        if (layer is None or in_layer == layer) and within(when, since, until)
    ]
    end = None if limit is None else offset + limit
    # A page near the top needs no full sort (a 100k store lists 50 in a few ms).
    top = sorted(picked) if end is None or end * 8 > len(picked) else heapq.nsmallest(end, picked)
    return Page(len(picked), [entry_of(node_id) for _, node_id in top[offset:end]])


def select_columns(
    columns: Columns,
    hidden: Collection[str],
    entry_of: Callable[[str], Entry],
    *,
    layer: str | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> Page:
    """:func:`select` over :class:`~md_cg.index.Columns` less the ``hidden`` ids:
    the same page and total, with numpy doing the pass over the snapshot's rows
    (the entries put since it are few, and go through Python)."""
    _check_page(layer, limit, offset)
    ids, changed = columns.ids, columns.changed
    keep = _window_rows(columns, since, until)
    keep[[r for i in hidden if (r := columns.row_of(i)) is not None]] = False
    if layer is not None:
        keep &= columns.layers == LAYERS.index(layer)
    rows = np.flatnonzero(keep)
    extra = [
        (-e.changed, e.id)
        for e in columns.extra
        if e.id not in hidden and (layer is None or e.layer == layer) and within(e.changed, since, until)
    ]
    end = None if limit is None else offset + limit
    if end is not None and end < len(rows):
        # the rows as new as the end-th newest (ties included: ids break them below)
        floor = np.partition(changed[rows], len(rows) - end)[len(rows) - end]
        rows = rows[changed[rows] >= floor]
    top = sorted([*zip((-changed[rows]).tolist(), [ids[r] for r in rows.tolist()], strict=True), *extra])
    return Page(int(keep.sum()) + len(extra), [entry_of(node_id) for _, node_id in top[offset:end]])


#: A tag filter: one tag, or several that a node must all carry (:func:`md_cg.script.tag_fold`).
TagFilter = str | Sequence[str]


def window_of(since: Any, until: Any) -> tuple[Any, Any]:
    """``since`` and ``until`` with a time-zone-aware :class:`~datetime.datetime` as its epoch
    seconds (as ``add(created_at=...)`` takes one; session 43); a naive one is refused
    (InvalidArgumentError: which zone it means cannot be told); anything else as given."""
    out = []
    for name, value in (("since", since), ("until", until)):
        if isinstance(value, datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                raise InvalidArgumentError(
                    f"{name} is a datetime without a time zone ({value.isoformat()}): give it tzinfo "
                    "(datetime.now(timezone.utc), or .astimezone() for local time), or epoch seconds",
                    name=name,
                    value=value,
                )
            value = value.timestamp()
        out.append(value)
    return out[0], out[1]


def check_window(tag: TagFilter | None, since: float | None, until: float | None) -> None:
    """Refuse a filter that is not non-blank tags and epoch seconds (InvalidArgumentError)."""
    tags = [tag] if isinstance(tag, str) else tag
    if tag is not None and (
        not isinstance(tags, Sequence) or not tags or not all(isinstance(t, str) and t.strip() for t in tags)
    ):
        raise InvalidArgumentError(
            f"tag must be a non-empty string or a list of them, got {short_repr(tag)}", name="tag", value=tag
        )
    for name, value in (("since", since), ("until", until)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not finite(value):
            raise InvalidArgumentError(
                f"{name} must be a time in epoch seconds (a finite number), got {short_repr(value)} "
                "(md_cg.render.parse_when reads '7d' or an ISO date)",
                name=name,
                value=value,
            )
    if since is not None and until is not None and since > until:
        raise InvalidArgumentError(
            f"since ({_utc(since)}) is after until ({_utc(until)}): no time lies between them",
            name="until",
            value=until,
        )


def _utc(seconds: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return repr(seconds)


def within(when: float, since: float | None, until: float | None) -> bool:
    """``when`` lies in ``[since, until]`` (None: open)."""
    return (since is None or when >= since) and (until is None or when <= until)


def changed_ids(entries: index.Entries, since: float | None, until: float | None) -> frozenset[str]:
    """The ids whose :attr:`~md_cg.index.Entry.changed` time lies in ``[since, until]``;
    numpy passes over the snapshot's column when the store was opened from one."""
    columns = entries.columns()
    if columns is None:
        return frozenset(i for i, _, when in entries.listed() if within(when, since, until))
    ids = columns.ids
    found = {ids[r] for r in np.flatnonzero(_window_rows(columns, since, until)).tolist()}
    found.update(e.id for e in columns.extra if within(e.changed, since, until))
    return frozenset(found)


def _window_rows(columns: Columns, since: float | None, until: float | None) -> np.ndarray:
    """The snapshot rows still standing whose changed time lies in ``[since, until]`` (a mask)."""
    keep = np.ones(len(columns.ids), dtype=bool)
    keep[columns.dropped] = False
    if since is not None:
        keep &= columns.changed >= since
    if until is not None:
        keep &= columns.changed <= until
    return keep


def _check_page(layer: str | None, limit: int | None, offset: int) -> None:
    if layer is not None:
        check_layer(layer)
    for name, value in (("limit", limit), ("offset", offset)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise InvalidArgumentError(
                f"{name} must be a non-negative integer, got {short_repr(value)}", name=name, value=value
            )
