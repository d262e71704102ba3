"""The audit log ``.mdcg/audit/``: what left the store, and what came back.

Payload-free records (ids, layer, reason, times; never content) of six kinds:

* a **tombstone** per forgotten (``event: "forget"``) or swept (``"sweep"``)
  node, with the node's ``created_at`` -- :mod:`md_cg.forgetting`;
* a :data:`RENAMED` record per rename (``id`` the old id, ``to`` the new
  one) -- :func:`md_cg.editing.rename`;
* a :data:`RESTORED` record per forgotten or renamed id brought back on
  purpose: a migration with ``overwrite`` (:mod:`md_cg.migrate`), or
  ``keep_returned``;
* a :data:`BACK_AS` record when a sync takes in a forgotten memory under
  another id (another clone renamed it before the forget reached it:
  :func:`under_new_ids`), so that later syncs and ``health()`` go on naming
  it without reading files;
* a :data:`TWIN` record when a sync takes in a file another clone renamed
  from an id this clone still holds (:func:`md_cg.maintenance.health`'s
  ``renamed_twin``);
* a :data:`INTERRUPTED` record when a recovery finishes a rename killed after
  its commit line but keeps the old file, changed since the crash
  (``health()``'s ``rename_interrupted``).

The functions here read those records: which ids are forgotten or renamed
away (:func:`departures`), which of those memories are back
(:func:`returns`), which records a scoped caller may
list (:func:`visible_to`). A record without a usable ``id`` or ``time`` (a
hand edit) is skipped. The log is per clone (under ``.mdcg/``, git-ignored).

Imports :mod:`md_cg.index`, :mod:`md_cg.logs`, :mod:`md_cg.node` and
:mod:`md_cg.visibility`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from .errors import MalformedNodeFileError, UnsafePathError
from .index import RENAMED_FROM, Entry, decode_node, read_limited
from .logs import AppendLog
from .node import Node
from .script import terminal_safe
from .visibility import Scope, scope_fields

#: The record a rename leaves: a migration re-run does not bring the old id back.
RENAMED = "renamed"
#: The record of a forgotten (or renamed) id brought back on purpose (a migration with
#: overwrite, ``keep_returned``).
RESTORED = "restored"
#: The record of a forgotten memory a sync took in under another id (``as``).
BACK_AS = "back_as"
#: The record of a file a sync took in that another clone renamed from an id still here
#: (``id`` the old id, ``to`` the file's): a merge kept the memory under both ids.
TWIN = "renamed_twin"
#: The record of a rename a crash interrupted whose old file was changed after its commit
#: line (a hand edit since the crash): the recovery finished the new file and kept the old
#: one (``id`` the old id, ``to`` the new): the memory under both ids (``health()``).
INTERRUPTED = "rename_interrupted"
#: Records that say nothing of a memory leaving this clone (what departures skip).
SEEN = (BACK_AS, TWIN, INTERRUPTED)
#: :data:`RENAMED_FROM` (from :mod:`md_cg.index`) is the frontmatter key a rename adds to the
#: node: its earlier ids, oldest first. It travels with the file (git, a copy), so a clone
#: that never saw the rename can tell the memory. It keeps at most 64 earlier ids
#: (:data:`md_cg.index.MAX_RENAMED_FROM`; the first always: it tells the memory).
#: Times a record may hold (seconds since the epoch, before the year 5138).
_LATEST = 1e11


@dataclass(frozen=True)
class Back:
    """A forgotten memory whose file is back: ``entry`` holds it now; it was forgotten
    as ``forgotten`` (``tombstone``). ``how``: ``"same id"``, ``"new id"`` (another
    clone renamed it before the forget reached it) or ``"old id"`` (renamed here, then
    forgotten under the new id, and a merge kept another clone's copy of the old one)."""

    entry: Entry
    forgotten: str
    tombstone: dict[str, Any]
    how: str


def usable(record: object) -> bool:
    """A record with a non-empty string ``id`` and a finite ``time`` of this era."""
    if not isinstance(record, dict):
        return False
    node_id, at = record.get("id"), record.get("time")
    if not isinstance(node_id, str) or not node_id or not isinstance(at, int | float) or isinstance(at, bool):
        return False
    return 0 <= at < _LATEST  # NaN compares false; a 400-digit integer is compared, not converted


def earlier_ids(node: Node) -> list[str]:
    """The ids ``node`` had before its renames (:data:`RENAMED_FROM`), as far as the file
    tells: a value that is not a list of strings (a hand edit) tells nothing."""
    return _ids(node.extra.get(RENAMED_FROM))


def _ids(value: object) -> list[str]:
    return [i for i in value if isinstance(i, str)] if isinstance(value, list) else []


def departures(records: Iterable[object]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(forgotten, renamed): id -> the record of its last departure, a forget (or sweep)
    or a rename away, for each id that has not come back on purpose since (a
    :data:`RESTORED` record of the id itself) nor been taken by a rename onto it (that
    id is a memory again). Records in log order; unusable ones are skipped."""
    forgotten: dict[str, dict[str, Any]] = {}
    renamed: dict[str, dict[str, Any]] = {}
    for record in records:
        if not usable(record):
            continue
        assert isinstance(record, dict)
        node_id, event = record["id"], record.get("event")
        if event in SEEN or (event == RESTORED and record.get("kept", node_id) != node_id):
            continue  # a copy under another id seen or kept: the id itself stays forgotten
        forgotten.pop(node_id, None)
        renamed.pop(node_id, None)
        if event == RENAMED:
            to = record.get("to")
            if isinstance(to, str):
                renamed[node_id] = record
                forgotten.pop(to, None)
                renamed.pop(to, None)
        elif event != RESTORED:
            forgotten[node_id] = record
    return forgotten, renamed


@dataclass(frozen=True)
class Departure:
    """What became of an id no memory holds now, as this clone's audit log tells, or the
    ``renamed_from`` of a memory (:meth:`md_cg.MdCG.departure`): ``event`` is ``"forget"``,
    ``"sweep"`` (an expired temporary memory removed) or :data:`RENAMED`; ``time`` when
    (seconds since the epoch; None for a rename only a memory's ``renamed_from`` tells,
    one made in another clone); ``reason`` the forget's; ``to`` the id a rename gave it
    and ``current`` the id the memory has now (after later renames), when the caller sees it.
    ``then``: when the caller sees no memory at the end of a rename's chain, what became of
    the id there: its own departure (``"forget"`` or ``"sweep"``), or ``"archived"`` /
    ``"expired"`` (a memory the caller sees only with ``include_archived`` /
    ``include_expired``; ``time`` None)."""

    id: str
    event: str
    time: float | None
    reason: str = ""
    to: str | None = None
    current: str | None = None
    then: Departure | None = None

    def describe(self) -> str:
        """One line for an error message: ``it was renamed to 'b' on 2026-12-06 07:18 UTC``
        (``…; 'b' was forgotten on …`` when the memory left again). The reason's control
        characters (a terminal's escape sequences, line ends, bidi marks) are shown escaped
        (:func:`~md_cg.script.terminal_safe`, the CLI's rule), and each id
        is cut at :data:`DEPARTURE_ID_CHARS` (the log is per clone and may be tampered with)."""
        return f"it {self._predicate()}"

    def _predicate(self) -> str:
        when = (
            "" if self.time is None else datetime.fromtimestamp(self.time, UTC).strftime("%Y-%m-%d %H:%M UTC")
        )
        if self.event == RENAMED:
            text = f"was renamed to {_shown_id(self.to)}" + (f" on {when}" if when else "")
            if self.current is not None and self.current != self.to:
                text += f"; that memory is {_shown_id(self.current)} now"
            elif self.current is None and self.then is not None:
                if self.then.id == self.to:
                    text += f"; {_shown_id(self.then.id)} {self.then._predicate()}"
                else:  # a longer chain: say where the memory went before it left
                    text += f"; that memory became {_shown_id(self.then.id)} and {self.then._predicate()}"
            return text
        if self.event in ("archived", "expired"):
            return f"is {self.event}" if self.event == "archived" else "has expired"
        if self.event == "sweep":
            return f"expired and was swept on {when}"
        return f"was forgotten on {when}" + (f", reason: {terminal_safe(self.reason)}" if self.reason else "")


#: Characters of a forget's reason a :class:`Departure` keeps (an error message's line).
DEPARTURE_REASON_CHARS = 200
#: Characters of an id a :meth:`Departure.describe` shows (real ids are shorter).
DEPARTURE_ID_CHARS = 160


def _shown_id(node_id: str | None) -> str:
    """``repr`` of an id (escapes what is not printable), cut at :data:`DEPARTURE_ID_CHARS`."""
    shown = repr(node_id)
    return shown if len(shown) <= DEPARTURE_ID_CHARS else shown[: DEPARTURE_ID_CHARS - 1] + "…"


def departure(
    records: Iterable[object],
    node_id: str,
    sees: Callable[[str], bool],
    arrived: Callable[[str], tuple[str, str] | None] | None = None,
    fate: Callable[[str], Departure | None] | None = None,
) -> Departure | None:
    """The :class:`Departure` of ``node_id`` from audit ``records`` (log order; those the
    caller may read: :func:`visible_to`), or None when they hold none. ``sees(id)``:
    whether the caller reads a memory under that id now (a rename is followed through
    later renames to the id it has now; a cycle in a hand-edited log ends).

    ``arrived(id)``: (the id it was renamed to, the id its memory has now) of a memory the
    caller sees whose ``renamed_from`` lists ``id``, else None -- a rename made in another
    clone, which this clone's log does not hold (:func:`md_cg.store.departure_of`). It names
    the memory when the log's chain of renames ends at an id nobody holds, and tells of an
    id the log knows nothing of (a :data:`RENAMED` departure without a time).

    ``fate(id)``: what became of the id a chain of renames ends at when no memory the caller
    sees holds it (:attr:`Departure.then`), else None."""
    forgotten, renamed = departures(records)
    rec = renamed.get(node_id)
    if rec is not None:
        to = rec["to"]
        cur, passed = to, {node_id: None}
        while not sees(cur) and cur in renamed and cur not in passed:
            passed[cur] = None
            cur = renamed[cur]["to"]
        current = cur if sees(cur) else None
        if current is None and arrived is not None:
            passed[cur] = None
            current = next((hit[1] for old in passed if (hit := arrived(old)) is not None), None)
        then = fate(cur) if current is None and fate is not None and cur not in renamed else None
        return Departure(node_id, RENAMED, float(rec["time"]), to=to, current=current, then=then)
    rec = forgotten.get(node_id)
    if rec is None:
        hit = arrived(node_id) if arrived is not None else None
        return None if hit is None else Departure(node_id, RENAMED, None, to=hit[0], current=hit[1])
    reason = rec.get("reason")
    reason = " ".join(reason.split())[:DEPARTURE_REASON_CHARS] if isinstance(reason, str) else ""
    event = rec.get("event")
    return Departure(node_id, event if event == "sweep" else "forget", float(rec["time"]), reason=reason)


Key = tuple[float, str]


def memory_key(created_at: object, earlier: list[str], node_id: str) -> Key | None:
    """What tells one memory from every other, whatever its id now: the instant it was
    made and the id it was made under (the first of its earlier ids, else its id).
    Memories of one batch share the instant and never the first id; a memory added
    later under a forgotten id has another instant. None without a creation time."""
    if type(created_at) is not float:
        return None
    return created_at, earlier[0] if earlier else node_id


def _history(record: dict[str, Any]) -> list[str]:
    """The earlier ids a tombstone, rename or keep record kept of its memory."""
    return _ids(record.get(RENAMED_FROM))


def record_key(record: dict[str, Any]) -> Key | None:
    """The :func:`memory_key` of the memory a record is about (None for a record written
    before records kept creation times)."""
    return memory_key(record.get("created_at"), _history(record), record["id"])


@dataclass
class Fates:
    """What became of each memory that left this clone, by :func:`memory_key`: the last
    tombstone of each one forgotten (and not kept since), the last rename record of
    each one renamed away, and the memories kept (``keep_returned``) since their last
    forget. ``legacy``: tombstones without a creation time, by id (the old rule).
    ``renamed_back``: the ids a forgotten memory was renamed to here after its file came
    back, in order -- it is still forgotten and back (a rename does not settle it: only
    a keep or a forget does), named under its id now."""

    forgotten: dict[Key, dict[str, Any]]
    renamed: dict[Key, dict[str, Any]]
    kept: set[Key]
    legacy: dict[str, dict[str, Any]]
    renamed_back: dict[Key, list[str]] = field(default_factory=dict)


def fates(records: Iterable[object]) -> Fates:
    """:class:`Fates` of the audit ``records`` (in log order; unusable ones skipped)."""
    out = Fates({}, {}, set(), {})
    keys_of: dict[str, set[Key]] = {}  # id -> the keys of the memories that left under it
    for record in records:
        if not usable(record):
            continue
        assert isinstance(record, dict)
        event, key = record.get("event"), record_key(record)
        if event in SEEN or (event == RENAMED and not isinstance(record.get("to"), str)):
            continue
        if event == RESTORED:
            if key is not None:  # kept: this memory is no longer forgotten, under any id
                out.kept.add(key)
                out.forgotten.pop(key, None)
                out.renamed_back.pop(key, None)
            else:  # a migration wrote the id again: the memories that left under it are back
                for k in keys_of.pop(record["id"], set()):
                    out.forgotten.pop(k, None)
                    out.renamed.pop(k, None)
                    out.renamed_back.pop(k, None)
                out.legacy.pop(record["id"], None)
        elif key is None:
            if event != RENAMED:
                out.legacy[record["id"]] = record
        else:
            keys_of.setdefault(record["id"], set()).add(key)
            if event == RENAMED and key in out.forgotten:
                # a forgotten memory back, renamed here before it was kept or forgotten again:
                # still back (a rename made the warning go, and `keep` of the new id refused)
                out.renamed_back.setdefault(key, []).append(record["to"])
            elif event == RENAMED:
                out.renamed[key] = record
                out.forgotten.pop(key, None)
            else:
                out.forgotten[key] = record
                out.renamed.pop(key, None)
                out.renamed_back.pop(key, None)
                out.kept.discard(key)
    return out


def _file_key(e: Entry, read: Callable[[str], Node | None]) -> Key | None:
    try:
        node = read(e.path)
    except (OSError, MalformedNodeFileError, UnsafePathError):
        return None
    return memory_key(e.created_at, earlier_ids(node) if node is not None else [], e.id)


def returns(
    entries: Mapping[str, Entry], records: list[dict[str, Any]], read: Callable[[str], Node]
) -> tuple[list[Back], list[tuple[Entry, str, dict[str, Any]]]]:
    """What came back, as :class:`Back` records, and the ids renamed here whose old file is back
    beside the memory they now are (entry, the id it lives on as, the rename record).

    A file counts as a departed memory only when its :func:`memory_key` is that
    memory's: under an id the memory had (its id when forgotten, or one before:
    ``"same id"``, ``"old id"``), read to check; or under a new id a take-in recorded
    (:data:`BACK_AS`, ``"new id"``). Only the files under such ids, with the very
    creation time, are read: a lazy index builds the entries named."""
    f = fates(records)
    by_id: dict[str, list[tuple[Key, dict[str, Any], bool]]] = {}
    for key, record in f.forgotten.items():
        for node_id in dict.fromkeys([*_history(record), record["id"], *f.renamed_back.get(key, ())]):
            by_id.setdefault(node_id, []).append((key, record, True))
    for key, record in f.renamed.items():
        for node_id in dict.fromkeys([*_history(record), record["id"]]):
            by_id.setdefault(node_id, []).append((key, record, False))
    backs: dict[tuple[str, str], Back] = {}
    moved: list[tuple[Entry, str, dict[str, Any]]] = []
    for node_id, cands in sorted(by_id.items()):
        e = entries.get(node_id)
        if e is None or not any(k[0] == e.created_at for k, _, _ in cands):
            continue
        file_key = _file_key(e, read)
        for k, record, gone in cands:
            if k != file_key or k in f.kept:
                continue
            if gone:
                renamed_here = e.id in f.renamed_back.get(k, ())  # since it came back
                how = "same id" if record["id"] == e.id else "new id" if renamed_here else "old id"
                backs[(e.id, record["id"])] = Back(e, record["id"], record, how)
            elif record["to"] != e.id and _is(entries.get(record["to"]), k, read):
                moved.append((e, record["to"], record))
    legacy_gone = departures(records)[0]
    for node_id, record in f.legacy.items():
        e = entries.get(node_id)
        if (
            node_id in legacy_gone
            and e is not None
            and e.created_at is not None
            and e.created_at < record["time"]
        ):
            backs.setdefault((e.id, node_id), Back(e, node_id, record, "same id"))
    for (node_id, as_id), record in _seen_as(records).items():
        e = entries.get(as_id)
        origin = record.get("origin")
        seen_key = memory_key(
            record.get("created_at"), [origin if isinstance(origin, str) else node_id], as_id
        )
        # read again: the file under that id may be another memory by now (a batch-mate renamed onto it)
        if e is not None and seen_key is not None and seen_key in f.forgotten and _is(e, seen_key, read):
            tomb = f.forgotten[seen_key]
            backs[(e.id, tomb["id"])] = Back(e, tomb["id"], tomb, "new id")
    return [backs[k] for k in sorted(backs)], moved


def _is(e: Entry | None, key: Key, read: Callable[[str], Node]) -> bool:
    return e is not None and e.created_at == key[0] and _file_key(e, read) == key


def back_again(
    entries: Mapping[str, Entry], records: list[dict[str, Any]], read: Callable[[str], Node]
) -> list[Back]:
    """The forgotten memories whose file is back (:func:`returns`)."""
    return returns(entries, records, read)[0]


def _seen_as(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(forgotten id, new id) -> the :data:`BACK_AS` record of each copy a take-in saw."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        if usable(record) and record.get("event") == BACK_AS and isinstance(record.get("as"), str):
            out[(record["id"], record["as"])] = record
    return out


def under_new_ids(
    entries: Iterable[Entry], f: Fates, read: Callable[[str], Node | None]
) -> list[tuple[Entry, str, dict[str, Any], str]]:
    """(entry, forgotten id, its tombstone, the memory's first id) of each of ``entries``
    (files a take-in just read) that is a forgotten memory under an id it never had here:
    its :func:`memory_key` is a forgotten memory's (another clone renamed it before the
    forget reached it). Only files with the creation time of a forgotten memory are
    read, each once; ``read`` may answer None for a file without :data:`RENAMED_FROM`
    (:func:`renamed_reader` does, without parsing it): such a file is under its first id."""
    by_time: dict[float, dict[str, tuple[dict[str, Any], set[str]]]] = {}
    for key, record in f.forgotten.items():
        had = {*_history(record), record["id"], *f.renamed_back.get(key, ())}
        by_time.setdefault(key[0], {})[key[1]] = (record, had)
    out = []
    for e in entries:
        bucket = by_time.get(e.created_at) if e.created_at is not None else None
        if not bucket:
            continue
        file_key = _file_key(e, read)
        hit = bucket.get(file_key[1]) if file_key is not None else None
        if hit is not None and file_key is not None and e.id not in hit[1]:
            out.append((e, hit[0]["id"], hit[0], file_key[1]))
    return out


def detect(
    log: AppendLog,
    taken: list[Entry],
    read: Callable[[str], Node | None],
    records: list[dict[str, Any]] | None = None,
) -> bool:
    """Record (:data:`BACK_AS`) the forgotten memories among ``taken`` -- files a sync, a
    pick-up of hand edits or a rebuild just took in -- under a new id
    (:func:`under_new_ids`), once each; True when it recorded any. A few files are read
    first, and the log only when one of them was renamed (a pick-up before each MCP call
    costs one small read, not the whole log)."""
    if not taken:
        return False
    if len(taken) <= 64 and not any(_renamed_file(e, read) for e in taken):
        return False
    records = log.read() if records is None else records
    known = set(_seen_as(records))
    found = [hit for hit in under_new_ids(taken, fates(records), read) if (hit[1], hit[0].id) not in known]
    record_back_as(log, found, time.time())
    return bool(found)


def last_departures(records: Iterable[object]) -> dict[str, dict[str, Any]]:
    """Id -> the record of its last departure, forgotten or renamed (:func:`departures`)."""
    forgotten, renamed = departures(records)
    return {**renamed, **forgotten}


class Gone(NamedTuple):
    """An id's last departure (:func:`departed`): when (seconds since the epoch), the id a
    rename gave it (None: forgotten or swept), the event (``"forget"``, ``"sweep"`` or
    :data:`RENAMED`) and a forget's reason (spaces folded, cut at
    :data:`DEPARTURE_REASON_CHARS`; "" when it gave none)."""

    time: float
    to: str | None
    event: str = "forget"
    reason: str = ""


def log_restored(log: AppendLog, nodes: Sequence[Node], reason: str) -> None:
    """A ``restored`` record for each of ``nodes`` (ids forgotten or renamed here that a
    migration or import with overwrite brings back), appended before they are written:
    health then does not take them for ids git brought back. Scoped as each memory is,
    so another scope's handle does not list it."""
    now = time.time()
    log.append(
        [
            {
                "event": RESTORED,
                "id": n.id,
                "layer": n.layer,
                "reason": reason,
                **scope_fields(n),
                "time": now,
            }
            for n in nodes
        ],
        durable=True,
    )


def departed(records: Iterable[object]) -> dict[str, Gone]:
    """Id -> :class:`Gone` of the last departure of each id no memory holds now:
    forgotten or swept (``to`` None), or renamed (the new id). What a migration and an
    import leave out unless told to overwrite (:func:`not_brought_back`)."""
    out: dict[str, Gone] = {}
    for i, r in last_departures(records).items():
        to = r["to"] if isinstance(r.get("to"), str) else None
        event = RENAMED if to is not None else "sweep" if r.get("event") == "sweep" else "forget"
        reason = r.get("reason")
        reason = " ".join(reason.split())[:DEPARTURE_REASON_CHARS] if isinstance(reason, str) else ""
        out[i] = Gone(float(r["time"]), to, event, reason)
    return out


def chain_end(
    node_id: str, gone: Mapping[str, Gone], holds: Callable[[str], bool]
) -> tuple[str, Gone | None]:
    """Where the renames of ``node_id`` (a renamed id of ``gone``) lead: the id its memory
    has now (``holds`` it, or the log tells of no departure of it) and None, or the id it
    left under and that departure (forgotten or swept since; a cycle of a hand-edited log
    ends at the id met again)."""
    cur, passed = node_id, set()
    while cur in gone and not (cur != node_id and holds(cur)) and cur not in passed:
        passed.add(cur)
        step = gone[cur]
        if step.to is None:
            return cur, step
        cur = step.to
    return cur, None


def not_brought_back(node_id: str, gone: Mapping[str, Gone], holds: Callable[[str], bool]) -> str:
    """Why a migration or import leaves out a record of ``node_id``, an id of ``gone``
    (:func:`departed`; ``holds(id)``: whether the store holds a memory of that id now): a
    forgotten one was forgotten on purpose; a renamed id's memory lives on under the id
    its renames end at (written again under the old one it would be a second copy) --
    or, forgotten since under a later id, was forgotten on purpose too (said, with the
    forget's reason: the record's new id is no memory any more)."""
    first = gone[node_id]
    if first.to is None:
        return f"forgotten in this store ({_utc(first.time)}); not brought back"
    text = f"renamed to {first.to!r} in this store ({_utc(first.time)})"
    end, left = chain_end(node_id, gone, holds)
    if left is None:
        now = f", {end!r} now" if end != first.to else ""
        return f"{text}{now}; its old id is not brought back"
    what = (
        f"expired and was swept since ({_utc(left.time)})"
        if left.event == "sweep"
        else f"was forgotten since ({_utc(left.time)}"
        + (f", reason: {terminal_safe(left.reason)})" if left.reason else ")")
    )
    where = f"{end!r} {what}" if end == first.to else f"that memory became {end!r} and {what}"
    return f"{text}; {where}; not brought back"


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def renamed_reader(root: str) -> Callable[[str], Node | None]:
    """A ``read`` for :func:`detect`: None for a file whose bytes never mention
    :data:`RENAMED_FROM` (most files; no parse), else the node."""

    def read(rel: str) -> Node | None:
        data, _ = read_limited(root, rel)
        return decode_node(data, rel) if RENAMED_FROM.encode() in data else None

    return read


def _renamed_file(e: Entry, read: Callable[[str], Node | None]) -> bool:
    try:
        node = read(e.path)
    except (OSError, MalformedNodeFileError, UnsafePathError):
        return False
    return node is not None and bool(earlier_ids(node))


def record_back_as(audit: AppendLog, found: list[tuple[Entry, str, dict[str, Any], str]], now: float) -> None:
    """Append a :data:`BACK_AS` record for each of ``found`` (:func:`under_new_ids`): the
    forgotten id, the id the memory is back as, its creation time and first id (``origin``),
    with the scope fields of the memory as it is now (a scoped caller lists its own)."""
    if found:
        records = [
            {
                "event": BACK_AS,
                "id": node_id,
                "as": e.id,
                "created_at": e.created_at,
                "origin": origin,
                "time": now,
                **scope_fields(e),
            }
            for e, node_id, _, origin in found
        ]
        audit.append(records, durable=True)


def rename_record(node: Node, old_id: str) -> dict[str, Any]:
    """The :data:`RENAMED` record of ``node`` just renamed from ``old_id``: both ids, the
    node's layer, scope fields and creation time (which memory it was: :func:`back_again`),
    its ids before ``old_id`` (:data:`RENAMED_FROM`), ``time`` its ``updated_at``."""
    record: dict[str, Any] = {"event": RENAMED, "id": old_id, "to": node.id}
    record.update(layer=node.layer, time=node.updated_at, **scope_fields(node))
    if node.created_at is not None:
        record["created_at"] = node.created_at
    earlier = earlier_ids(node)
    if len(earlier) > 1:
        record[RENAMED_FROM] = earlier[:-1]
    return record


def record_recovered_renames(
    audit: AppendLog,
    moved: Sequence[tuple[str, list[tuple[str, str]]]],
    read: Callable[[str], Node | None],
    kept: Sequence[tuple[str, list[tuple[str, str]]]] = (),
) -> list[tuple[str, str]]:
    """Append the :data:`RENAMED` record a rename killed after its commit line never wrote
    (the recovery finished its commit): for each (old id, the commit's puts) of ``moved``
    (:attr:`md_cg.journal.Journal.moved`), the put whose node (``read``: None for a file
    without :data:`RENAMED_FROM`, :func:`renamed_reader`) has ``old_id`` as its last earlier
    id and was not renamed from it before (the log holds no such record: a node renamed
    from ``old_id`` long ago may be a put of the commit only for an edge it re-points) --
    when exactly one put is such. For each of ``kept`` (:attr:`md_cg.journal.Journal.kept`:
    the old file was changed after the crash and kept), the same put gets an
    :data:`INTERRUPTED` record instead (the old id did not leave). Returns the (old, new)
    pairs recorded."""
    new = [*_recovered(audit, moved, read, RENAMED), *_recovered(audit, kept, read, INTERRUPTED)]
    if new:
        audit.append(new, durable=True)
    return [(r["id"], r["to"]) for r in new]


def _recovered(
    audit: AppendLog,
    moved: Sequence[tuple[str, list[tuple[str, str]]]],
    read: Callable[[str], Node | None],
    event: str,
) -> list[dict[str, Any]]:
    """The records of ``event`` :func:`record_recovered_renames` appends for ``moved``."""
    candidates: dict[str, list[Node]] = {}
    for old_id, puts in moved:
        for new_id, rel in puts:
            try:
                node = read(rel) if new_id != old_id else None
            except (OSError, MalformedNodeFileError, UnsafePathError):
                continue
            earlier = earlier_ids(node) if node is not None and node.id == new_id else []
            if earlier and earlier[-1] == old_id and node is not None and node.updated_at is not None:
                candidates.setdefault(old_id, []).append(node)
    if not candidates:
        return []
    done = {
        (r["id"], r.get("to")) for r in audit.read() if usable(r) and r.get("event") in (RENAMED, INTERRUPTED)
    }
    new = []
    for old_id, nodes in candidates.items():
        fresh = [n for n in nodes if (old_id, n.id) not in done]
        if len(fresh) == 1:  # more: which one the rename made cannot be told
            record = rename_record(fresh[0], old_id)
            new.append(record if event == RENAMED else {**record, "event": INTERRUPTED})
    return new


def visible_to(
    scope: Scope | None, records: list[dict[str, Any]], seen: Callable[[str], bool] | None = None
) -> list[dict[str, Any]]:
    """The records a caller may read: every one for an unscoped handle; for a scoped
    one, those of nodes within its scope (a record from before scopes were recorded
    counts as a node without scope), their ``dangling`` edges cut to the sources
    ``seen(id)`` (the forgetter saw nodes of scopes this caller may not)."""
    if scope is None:
        return records
    out = []
    for r in records:
        if isinstance(r, dict) and scope.admits_fields(
            r.get("agent_scope"), r.get("workspace_scope"), r.get("sensitivity")
        ):
            if isinstance(r.get("dangling"), list):
                r = {**r, "dangling": [d for d in r["dangling"] if seen is not None and _seen_edge(d, seen)]}
            out.append(r)
    return out


def _seen_edge(edge: object, seen: Callable[[str], bool]) -> bool:
    return isinstance(edge, list) and bool(edge) and isinstance(edge[0], str) and seen(edge[0])


def tombstones_only(audit: AppendLog) -> list[dict[str, Any]]:
    """The tombstones (and ``restored`` records) of the audit log: its rename and
    ``back_as`` records left out."""
    return [r for r in audit.read() if r.get("event") not in (RENAMED, *SEEN)]


def departure_times(audit: AppendLog) -> dict[str, float]:
    """Id -> the last time the memory under each id changed: it was forgotten, swept or
    renamed away, or another memory was renamed onto the id. The accesses of the id
    before then were of another memory, or of the one that left (:mod:`md_cg.access`)."""
    times: dict[str, float] = {}
    for record in audit.read():
        if not usable(record) or record.get("event") in (RESTORED, *SEEN):
            continue
        ids = [record["id"]]
        if record.get("event") == RENAMED and isinstance(record.get("to"), str):
            ids.append(record["to"])
        for node_id in ids:
            times[node_id] = max(times.get(node_id, 0.0), float(record["time"]))
    return times
