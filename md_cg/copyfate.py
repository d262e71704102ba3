"""Each copy's fate, told to its own scope (session 41).

Two files holding one id (a copy by hand, a git merge of two clones' memories): every
handle ranks its own scope's copy first (:func:`md_cg.engine.take_scope`), so the change
that matters to a scoped handle is its own copy's. A ``sync`` line once logged the stat of
the copy standing in its writer alone, and a process opened after it (every CLI call, a
hook, an agent's tool) had nothing to compare another scope's copy with: its own copy
changed, removed, or new -- a copy another scope's sync found first -- was told to no one
(docs/reliability.md, Known limits of session 40).

Now a sync line naming an id that has several copies logs each of them under
:data:`COPIES` -- ``[id, path, mtime_ns, size, crc32, agent_scope, workspace_scope,
sensitivity, found]`` (``found``: new to the line's writer, and not told by it) --, a
process following the log keeps the last such record of each id
(:attr:`md_cg.engine.Engine.copies_logged`, :func:`follow`), and a scoped sync tells its
own copy's fate from it (:func:`tell`): ``changed`` when the file no longer holds the
bytes logged, ``deleted`` when no copy of its scope is left and another scope's stands
(not when the file is there but broken: it is listed as malformed), ``added`` when the
only copy of its scope is one the line found, ``moved`` when its own copies' files are
gone and another file of its scope holds the id (session 42). The sync's own line logs the copies again
(:func:`log`): those whose fate it told as they are now, the others as they were logged
-- so that each scope's process tells its own copy's fate once, whichever scope's sync
comes first. A line without :data:`COPIES` (an earlier version's) is read as before.

A compaction folds those lines into the snapshot: it keeps what its process holds
(:func:`items`, :data:`md_cg.snapshot.COPIES`), and a process loading the snapshot starts
from it -- decoded at its first use (:class:`Pending`, :func:`md_cg.engine.copies_logged`;
session 43) -- (session 42: before, it started from nothing, and a fate not yet told to a scope's
process before a compaction was told to no process opened after it). A snapshot without
them (an earlier version's) is read as before.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from . import fsops, journal, paths
from .errors import UnsafePathError
from .index import CopyFields, Entry, IndexState, fields_of
from .reports import Moved

#: A sync line's key listing every copy of each duplicated id it names (see the module)
COPIES = journal.COPIES


class LoggedCopy(NamedTuple):
    """One copy of a duplicated id as a sync line logged it (:data:`COPIES`)."""

    rel: str
    mtime_ns: int
    size: int
    crc: int | None
    fields: CopyFields
    found: bool

    def item(self, node_id: str) -> list[Any]:
        return [node_id, self.rel, self.mtime_ns, self.size, self.crc, *self.fields, self.found]


#: id -> path -> the copy logged there
Logged = dict[str, dict[str, LoggedCopy]]


def _usable(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 9
        and isinstance(item[0], str)
        and isinstance(item[1], str)
        and paths.rel_problem(item[1]) is None
        and all(type(x) is int and x >= 0 for x in item[2:4])
        and (item[4] is None or (type(item[4]) is int and item[4] >= 0))
        and all(x is None or isinstance(x, str) for x in item[5:8])
        and isinstance(item[8], bool)
    )


def copies_in(rec: Mapping[str, Any]) -> Logged:
    """The usable :data:`COPIES` items of a sync line, by id and path."""
    raw = rec.get(COPIES)
    out: Logged = {}
    for item in raw if isinstance(raw, list) else ():
        if _usable(item):
            copy = LoggedCopy(item[1], item[2], item[3], item[4], CopyFields(*item[5:8]), item[8])
            out.setdefault(item[0], {})[item[1]] = copy
    return out


def items(logged: Logged, limit: int) -> list[list[Any]]:
    """``logged`` as :data:`COPIES` items (by id and path): what a compaction keeps
    (:data:`md_cg.snapshot.COPIES`), read back by :func:`copies_in` -- at most ``limit``,
    each id's copies whole (the ids sorted last left out: their fates are told to no
    process opened after the compaction, as before session 42)."""
    out: list[list[Any]] = []
    for node_id in sorted(logged):
        copies = logged[node_id]
        if len(out) + len(copies) > limit:
            break
        out.extend(copies[rel].item(node_id) for rel in sorted(copies))
    return out


def follow(logged: Logged, tail: journal.Tail) -> None:
    """Keep in ``logged`` the copies the last sync line of ``tail`` naming each id logged
    (none, for a line that logs none of it: an earlier version's, or one id left with one
    copy); an id a commit line writes after it is md-cg's to tell (its line says where it
    is) and is forgotten."""
    if not logged and not any(COPIES in r for recs in tail.by_shard.values() for r in recs):
        return  # the common case: no copies logged, nothing held
    for _stamp, _n, node_id, copies in sorted(_written(tail), key=lambda e: e[:2]):
        if copies is None:
            logged.pop(node_id, None)
        else:
            logged[node_id] = copies


def _written(tail: journal.Tail) -> list[tuple[float, int, str, dict[str, LoggedCopy] | None]]:
    """Each id a commit or sync line of ``tail`` puts or deletes, in log order: (its stamp, its
    place, the id, the copies a sync line logged of it -- None: none)."""
    events: list[tuple[float, int, str, dict[str, LoggedCopy] | None]] = []
    for shard, records in tail.by_shard.items():
        for rec in records:
            op = rec.get("op")
            c = journal.parse_commit(shard, rec) if op in ("sync", "commit") else None
            if c is None:
                continue
            stamp = c.ts if c.ts is not None else float("inf")
            named = copies_in(rec) if op == "sync" else {}
            for node_id in dict.fromkeys([*(p[0] for p in c.puts), *(d[0] for d in c.dels)]):
                events.append((stamp, len(events), node_id, named.get(node_id)))
    return events


def ids_written(tail: journal.Tail) -> set[str]:
    """The ids whose records :func:`follow` of ``tail`` may change (set or forget)."""
    return {e[2] for e in _written(tail)}


class Pending(NamedTuple):
    """:data:`md_cg.snapshot.COPIES` items not decoded yet (:func:`md_cg.engine.copies_logged`),
    and the ids they may name (every item's first value that is a string: a superset of the
    ids :func:`copies_in` reads from them)."""

    raw: list[Any]
    ids: frozenset[str]


def pending(raw: list[Any]) -> Pending:
    """``raw`` items as :class:`Pending` (about 30 times cheaper than :func:`copies_in`)."""
    ids = frozenset(x[0] for x in raw if type(x) is list and x and isinstance(x[0], str))
    return Pending(raw, ids)


NOTHING_PENDING = Pending([], frozenset())


def forget(logged: Logged, node_ids: Iterable[str]) -> None:
    """Forget the logged copies of ``node_ids``: this process wrote them through md-cg."""
    for node_id in node_ids:
        logged.pop(node_id, None)


def _admitted(scope: Any, fields: CopyFields) -> bool:
    return bool(scope.admits_fields(*fields))


def tell(
    root: str, state: IndexState, logged: Logged, scope: Any, changes: dict[str, list[Any]]
) -> dict[str, list[Any]]:
    """A ``scope``'s sync: its own copy's fate since the line that logged the copies of
    each id (``logged``), as it stands now (``state``), added to ``changes`` (an id they
    hold already is told there); returns the sync line's records of them. Its own copies
    are those the line logged that the scope admits, not found by the line; with none,
    one found that stands here now is ``added``; with all of them gone and another file
    of the scope holding the id now, it ``moved`` (:func:`_moved`)."""
    records: dict[str, list[Any]] = {"put": [], "del": []}
    if scope is None:
        return records  # an unscoped handle's standing copy is told as before
    told = told_ids(changes)
    for node_id, copies in logged.items():
        now = state.entries.get(node_id)
        own = {c.rel: c for c in copies.values() if not c.found and _admitted(scope, c.fields)}
        mine = now is not None and scope.admits(now)
        if own and now is not None and mine and now.path not in own and not _left(state, node_id, own):
            if node_id not in told or node_id in changes["added"]:
                _moved(changes, records, node_id, sorted(own), now.path)
            continue
        if node_id in told:
            continue
        if not own:
            if mine and now is not None and now.path in copies:
                changes["added"].append(node_id)
                records["put"].append([node_id, now.path])
        elif now is not None and now.path in own:
            if _changed(root, own[now.path], now):
                changes["changed"].append(node_id)
                records["put"].append([node_id, now.path])
        elif not mine and not _left(state, node_id, own):
            changes["deleted"].append(node_id)
            if now is not None:
                records["put"].append([node_id, now.path])
            records["del"].extend([node_id, rel] for rel in sorted(own))
    return records


def _moved(
    changes: dict[str, list[Any]], records: dict[str, list[Any]], node_id: str, was: list[str], rel: str
) -> None:
    """Tell ``node_id`` moved from its own copy's file (``was``: the paths logged, all gone)
    to ``rel``, another file of the scope holding it now -- not ``added`` (session 42:
    a's copy moved by hand to another folder was told ``added`` to a's process syncing
    first, since the copy standing for it at its open was b's, and nothing in the other
    orders), and its sync line's records of it."""
    if node_id not in changes["added"]:  # (told added, its look put it at ``rel`` already)
        records["put"].append([node_id, rel])
    changes["added"] = [i for i in changes["added"] if i != node_id]
    changes["moved"].append(Moved(node_id, was[0], rel))
    records["del"].extend([node_id, old] for old in was)


def _left(state: IndexState, node_id: str, own: Collection[str]) -> bool:
    """Whether a copy at one of ``own`` is still there: a losing copy (narrowed out of the
    scope by hand: not told, as before), or a file broken by hand (listed as malformed,
    its memory back at the sync after it is fixed: not gone)."""
    dups = state.duplicates.get(node_id, ())
    return any(rel in dups or rel in state.problems for rel in own)


def told_ids(changes: Mapping[str, list[Any]]) -> set[str]:
    """The ids a sync's ``changes`` tell."""
    return {
        *changes["added"],
        *changes["changed"],
        *changes["deleted"],
        *(m.node_id for m in changes["moved"]),
    }


def _changed(root: str, copy: LoggedCopy, now: Entry) -> bool:
    """Whether the file of ``now`` no longer holds the bytes ``copy`` logged."""
    if (copy.mtime_ns, copy.size) == (now.mtime_ns, now.size):
        return False
    if copy.crc is None or copy.size != now.size:
        return True
    return not journal.holds_logged(root, now.path, [((copy.size, copy.crc), None)])


def log(
    root: str,
    state: IndexState,
    logged: Logged,
    line: dict[str, Any],
    scope: Any,
    seen: tuple[Collection[str], Mapping[str, Collection[str]]],
) -> None:
    """Add to a sync ``line`` the copies of each id it names that has several copies now
    or logged ones (:data:`COPIES`), and keep them in ``logged`` as this process's last
    line. ``seen``: the ids this sync told, and the copies (paths) of each id it knew
    before its look -- one not known is ``found``, unless this ``scope`` told it. A copy
    whose fate it told (one its scope admits, of an id it told) is logged as it is now, or
    left out when gone; the others as they were logged, for their own scope's sync to
    tell (an unscoped sync tells its standing copy, and no scope its own: it logs them
    all as they were)."""
    told, known = seen
    items: list[list[Any]] = []
    for node_id in dict.fromkeys(p[0] for p in [*line["put"], *line["del"]]):
        before = logged.get(node_id, {})
        e = state.entries.get(node_id)
        now = [] if e is None else [e.path, *state.duplicates.get(node_id, ())]
        if len(now) < 2 and not before:
            logged.pop(node_id, None)
            continue

        def theirs(fields: CopyFields, i: str = node_id) -> bool:
            return scope is not None and i in told and _admitted(scope, fields)

        copies: dict[str, LoggedCopy] = {}
        for rel, c in before.items():
            if not theirs(c.fields):
                copies[rel] = c
        for rel in now:
            if rel not in copies:
                fresh = _as_now(root, state, node_id, rel)
                if fresh is not None:
                    found = rel not in before and rel not in known.get(node_id, now)
                    copies[rel] = fresh._replace(found=found and not theirs(fresh.fields))
        logged[node_id] = copies
        items.extend(c.item(node_id) for c in copies.values())
    if items:
        line[COPIES] = items


def _as_now(root: str, state: IndexState, node_id: str, rel: str) -> LoggedCopy | None:
    """The copy of ``node_id`` at ``rel`` as it is now (its stat and CRC-32 read from the
    file; its scope fields as the index holds them), or None when it cannot be read."""
    e = state.entries.get(node_id)
    fields = fields_of(e) if e is not None and e.path == rel else state.copy_fields.get(rel)
    if fields is None:
        return None
    try:
        data, st = fsops.read_file(root, rel, max_bytes=1 << 26)
    except (OSError, UnsafePathError):
        return None
    crc = zlib.crc32(data) if len(data) == st.st_size else None
    return LoggedCopy(rel, st.st_mtime_ns, st.st_size, crc, fields, False)
