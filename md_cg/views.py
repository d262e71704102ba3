"""The visibility-filtered reads and the lifecycle writes of :class:`md_cg.MdCG`.

Two mixins the facade is built from, so that each stays a room of its own:

* :class:`Reads` -- every public read by id or listing goes through
  :mod:`md_cg.visibility`: expired, archived and out-of-scope nodes are absent
  (the very error of an unknown id), superseded ones marked.
* :class:`Lifecycle` -- archive, unarchive and apply_changes (one journal
  commit each, through :meth:`md_cg.engine.Engine.change_many`), supersession,
  and the preparation every creating write shares (validation, the caller's
  scope, the retention decision).

They use only what :class:`md_cg.MdCG` sets up in ``__init__`` (the engine,
the scope and its filter, the retention settings, the named logs).

Imports the engine, editing, graph, retention, visibility and the modules below them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from copy import copy as shallow_copy
from copy import deepcopy
from dataclasses import fields
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from . import (
    access,
    audit,
    editing,
    fsops,
    graph,
    layout,
    nodefile,
    paths,
    recall,
    retention,
    snapshot,
    temporal,
    visibility,
)
from . import engine as engine_mod
from . import merge as merge_mod
from .engine import Engine
from .errors import (
    DuplicateIdError,
    IdCollisionError,
    InvalidArgumentError,
    InvalidNodeError,
    MalformedNodeFileError,
    MdcgError,
    NodeNotFoundError,
    UnsafePathError,
    is_out_of_room,
    left_out_unreadable,
    lost_file_error,
)
from .index import Entry
from .logs import AppendLog
from .node import (
    NEGATIVE_LAYERS,
    TIME_FIELDS,
    Node,
    check_id,
    check_layer,
    quantise_instant,
    refuse_naive_times,
    slug_id,
    unsafe_edge_target,
    validate,
)
from .recall import InjectList, RecallStats
from .reports import Finding
from .resurface import Resurfaced
from .script import distinct_labels, nfc, short_repr
from .visibility import Scope, Show

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from .organize import OrganizeResult

_T = TypeVar("_T")

_NODE_FIELDS = {f.name for f in fields(Node)}

#: The archive/unarchive audit log, ``.mdcg/archive_log/``.
ARCHIVE_LOG = "archive_log"


def filter_meta(
    only: frozenset[str],
    hidden: frozenset[str],
    tag: editing.TagFilter | None,
    since: float | None,
    until: float | None,
) -> dict[str, Any]:
    """A search's ``meta["filter"]``: the filter, and how many memories the caller sees pass it."""
    matching = len(only) - sum(1 for i in hidden if i in only)
    tags = tag if tag is None or isinstance(tag, str) else list(tag)
    since, until = editing.window_of(since, until)
    return {"tag": tags, "since": since, "until": until, "matching": matching}


def as_stored(engine: Engine, scope: Scope | None, node_id: str) -> str:
    """``node_id``, or the id of the memory the caller sees that it spells in another
    Unicode normalisation form (``cafe\u0301``, NFD as macOS writes it, for a memory
    stored as ``caf\u00e9``, or the other way round): a lookup by id finds the memory
    under any canonically equivalent spelling, as tag filters do (session 42; before,
    ``get`` answered "did you mean"). An id held itself is its own (two stored ids of one
    spelling are two memories); one differing by letter case is not resolved (the
    unknown-id error names it). An ASCII id, or anything not a string, is returned at
    once: the common path pays one ``isascii`` (~40 ns)."""
    if node_id.__class__ is not str or node_id.isascii():
        return node_id
    engine.fresh()
    state = engine.state
    if node_id in state.entries:
        return node_id
    spelled = nfc(node_id)
    other = spelled if spelled in state.entries else state.keys.get(paths.id_key(node_id))
    if other is None or nfc(other) != spelled:
        return node_id
    e = state.entries.get(other)
    return other if e is not None and (scope is None or scope.admits(e)) else node_id


class _Handle:
    """What the mixins use of the facade (set up by ``MdCG.__init__``)."""

    _engine: Engine
    _scope: Scope | None
    _filter: visibility.Filter

    if TYPE_CHECKING:  # defined by MdCG

        @property
        def root(self) -> Path: ...

        @property
        def _ret(self) -> retention.Retention: ...

        def log(self, name: str) -> AppendLog: ...

        def _unknown(self, node_id: str, show: Show) -> NodeNotFoundError: ...  # Reads'

    def _as_stored(self, node_id: str) -> str:
        """``node_id`` as the memory the caller sees spells it (:func:`as_stored`)."""
        return as_stored(self._engine, self._scope, node_id)

    @contextmanager
    def _naming_lost(
        self, show: Show = visibility.DEFAULT, *, added: Iterable[object] = ()
    ) -> Iterator[None]:
        """Around a write: its refusal of an id the index dropped for its file moved, deleted
        or broken by hand (made under the id's lock, the file not named there:
        :func:`md_cg.engine.told_dropped`) names the file to an unscoped caller; so does its
        refusal of a new id differing only by case or normalisation from such an id
        (:func:`md_cg.engine.dropped_twin`), which then names that id too. Its refusal of an
        id no node holds is the error a read gives (:meth:`Reads._unknown`, ``show`` what the
        read would show): ``N00101`` typed for ``n00101`` is told ``did you mean 'n00101'?``
        by ``update`` and ``forget`` as by ``get`` (the engine, forgetting and the journal
        raise a bare "no node"; it is told here, once, for every write). A note of the id
        gone by hand that the store does not bear out (:func:`drop_stale_note`: another
        process forgot it) is dropped, and the id is unknown -- but not for an id of
        ``added`` (a write that adds it: :func:`past_stale_notes` looked, and a refusal it
        let through stands; told "no node" here, a racing add was refused as unknown)."""
        adding = {i for i in added if isinstance(i, str)}
        try:
            yield
        except NodeNotFoundError as exc:
            plain = exc.hidden is None and not exc.hint and isinstance(exc.node_id, str)
            if plain and exc.node_id not in self._engine.state.entries:  # held: out of scope
                raise self._unknown(exc.node_id, show) from None
            stale = exc.hidden == "lost" and not (isinstance(exc.node_id, str) and exc.node_id in adding)
            if stale and drop_stale_note(self._engine, exc.node_id):
                raise self._unknown(cast(str, exc.node_id), show) from None
            if (hid := held_hidden(self._engine, self._scope, exc)) is not exc:
                raise hid from None
            if exc.hidden != "lost" or self._scope is not None:
                raise
            raise engine_mod.dropped_file(self._engine, exc.node_id, named=True) or exc from None
        except IdCollisionError as exc:
            if exc.existing is not None or self._scope is not None:
                raise
            raise engine_mod.dropped_twin(self._engine, exc.node_id, named=True) or exc from None
        except engine_mod.HeldByAnother as exc:
            if engine_mod.admits_held(self._engine, self._scope, exc.held):
                raise
            raise held_out_of_scope(self._engine, self._scope, exc.node_id, exc.path) from None

    def _require_usable(self, node: Node, *, overwrite: bool = False) -> None:
        """:func:`md_cg.editing.require_usable` of a new node, and refuse an edge target of it
        no id could be (:func:`md_cg.node.unsafe_edge_target`) unless a memory the caller
        sees holds it (``add``, ``apply_changes``; ``add_many`` carries what it is given).

        ``overwrite`` (``add``): what the stored node the caller sees already holds -- a tag,
        an edge target, an edge confidence or an edge to itself, a time; an older version,
        ``add_many``, an import or a hand edit wrote it -- is not new input and is kept, as
        ``update`` keeps it: ``add(get(i), overwrite=True)`` is never refused for what the
        memory held (before session 34: UnsafeIdError for its edge to ``CON``, "blank tag"
        for its tag ``\u200b``). The stored file is read only when the node is refused."""
        try:
            self._check_new(node)
        except InvalidNodeError:
            stored = self._stored_for_overwrite(node) if overwrite else None
            if stored is None:
                raise
            self._check_new(node, stored)

    def _check_new(self, node: Node, stored: Node | None = None) -> None:
        """:meth:`_require_usable`'s checks; ``stored``: the node it replaces, whose tags,
        edges and times are kept."""
        kept_edges: Sequence[object] = () if stored is None else stored.edges
        if stored is None:
            editing.require_usable(node)
        else:
            kept_times = _times(stored)
            editing.require_usable(node, kept_tags=stored.tags, kept_edges=kept_edges, kept_times=kept_times)
        held = _holder(self._scope, self._engine.state.entries.get)
        problem = unsafe_edge_target(node, kept_edges, held=held)
        if problem is not None:
            raise problem

    def _stored_for_overwrite(self, node: Node) -> Node | None:
        """The stored node an ``add(overwrite=True)`` of ``node`` replaces, when the caller
        sees it; None when there is none (or its file cannot be read: the node is then
        checked as new input, and the write itself says what is wrong with the id)."""
        e = self._engine.state.entries.get(node.id) if isinstance(node.id, str) else None
        if e is None or (self._scope is not None and not self._scope.admits(e)):
            return None
        try:
            return self._engine.get(node.id)
        except (MdcgError, OSError):
            return None

    def _edited_check(self) -> Callable[[Node, Node, Entry], None]:
        """``check`` of :func:`md_cg.editing.edit_text`: :func:`check_edited` in the caller's
        scope, an edge target held by a memory it sees (in the index now) usable."""
        return functools.partial(
            check_edited, self._scope, stored=lambda i: self._engine.state.entries.get(i)
        )

    def _check_taken(self, entry: Entry) -> None:
        """Refuse to add over a node outside the caller's scope (overwrite or not): ids are
        one namespace, so the id is taken, but nothing of that node is named or replaced."""
        if self._scope is not None and not self._scope.admits(entry):
            raise DuplicateIdError(entry.id, "", f"node {engine_mod.taken_outside_scope(entry.id)}")

    def _check_live(self, entry: Entry) -> None:
        """:meth:`_check_taken`, and refuse to replace an archived node: ``add(overwrite=True)``
        of its id replaced the archived file with the new text, the old one gone."""
        self._check_taken(entry)
        if entry.archived:
            raise DuplicateIdError(
                entry.id,
                entry.path,
                f"node id {entry.id!r} is held by an archived memory ({entry.path}); unarchive it "
                "to change it, or choose another id (overwrite does not replace an archived memory)",
                archived=True,
            )

    def _check_scope(self, entry: Entry) -> None:
        """Refuse a write to a node outside the caller's scope, as if it did not exist."""
        if self._scope is not None and not self._scope.admits(entry):
            raise NodeNotFoundError(entry.id)

    def _check_writable(self, entry: Entry) -> None:
        """:meth:`_check_scope`, and refuse a write to an archived or expired node
        (:func:`md_cg.visibility.refuse_write`). Called under the node's lock with the
        entry read there, so an archive or expiry another process made first is seen."""
        self._writable_check()(entry)

    def _writable_check(
        self, *, archived_ok: bool = False, expired_ok: bool = False
    ) -> Callable[[Entry], None]:
        """:meth:`_check_writable`, letting through what the caller asked for (``archived_ok``,
        ``expired_ok``: a write to such a node anyway, or an update that renews it)."""

        def check(entry: Entry) -> None:
            self._check_scope(entry)
            refused = visibility.refuse_write(
                entry, time.time(), archived_ok=archived_ok, expired_ok=expired_ok
            )
            if refused is not None:
                raise refused

        return check


class Reads(_Handle):
    """The public reads of a store handle, each through :mod:`md_cg.visibility`."""

    def _seer(self) -> Callable[[str], bool] | None:
        """None for a handle without scope; else whether an id is held by a node within
        the caller's scope now (archived or expired ones too): what a report about the
        files may name to it. A node gone since cannot be told, so is never named."""
        scope = self._scope
        if scope is None:
            return None
        engine = self._engine

        def seen(node_id: str) -> bool:
            e = engine.state.entries.get(node_id)
            return e is not None and scope.admits(e)

        return seen

    def _hidden(self, show: Show = visibility.DEFAULT) -> frozenset[str]:
        """Ids the caller does not see now (fresh index)."""
        self._engine.fresh()
        return self._filter.hidden(self._engine.state, show)

    def _visible(self, node_id: str, show: Show = visibility.DEFAULT, *, retry: bool = False) -> Entry:
        """The entry of a node the caller sees; NodeNotFoundError (same text as a missing id) if not.

        ``retry``: an unknown id looks at the log once (another process may have just added it).
        """
        eng = self._engine
        eng.fresh()
        e = eng.state.entries.get(node_id)
        if e is None and retry:
            eng.refresh()
            e = eng.state.entries.get(node_id)
        if e is None and eng.hand_after and isinstance(node_id, str):
            with eng.lock:  # its file noted gone, put back by hand: taken back (lazily)
                engine_mod.taken_back(eng, (paths.id_key(node_id),))
            e = eng.state.entries.get(node_id)
        if e is None:
            raise self._unknown(node_id, show)
        if not visibility.visible(eng.state, e, self._scope, show):
            raise visibility.not_found(eng.state, e, self._scope, show)
        return e

    def twin_of(
        self, node_id: str, *, include_expired: bool = False, include_archived: bool = False
    ) -> str | None:
        """The id of a memory the caller sees that differs from ``node_id`` only by letter
        case or Unicode normalisation (``n00101`` for ``N00101``), or None (none does, or
        ``node_id`` is itself held): what a typed id most likely meant. From the index; a
        memory outside the caller's scope is never named."""
        self._engine.fresh()
        return self._twin(node_id, Show(include_expired, include_archived))

    def _twin(self, node_id: str, show: Show) -> str | None:
        state = self._engine.state
        if not isinstance(node_id, str) or node_id in state.entries:
            return None
        other = state.keys.get(paths.id_key(node_id))
        e = state.entries.get(other) if other is not None else None
        if other is not None and e is not None and visibility.visible(state, e, self._scope, show):
            return other
        return None

    def _unknown(self, node_id: str, show: Show) -> NodeNotFoundError:
        """The error of an unknown id; when it differs from an id the caller sees only by
        letter case or Unicode normalisation (a typed id), the error names that one."""
        state = self._engine.state
        other = self._twin(node_id, show)
        if other is not None:
            # the NFC and NFD spellings of an id print alike: both escaped, as health shows twins
            labels = {i: repr(i) if s == i else s for i, s in distinct_labels((node_id, other)).items()}
            hint = f"did you mean {labels[other]}? ids differ by letter case or Unicode form"
            return NodeNotFoundError(node_id, hint, shown=labels[node_id])
        if self._scope is None and isinstance(node_id, str):
            # Its file moved, deleted or broken by hand since md-cg wrote it; or a file
            # named for it that could not be read or parsed (an unscoped handle only: a
            # scoped one must not learn of files outside its scope).
            lost = engine_mod.dropped_file(self._engine, node_id, named=True)
            if lost is not None:
                return lost
            for rel in self._problem_files(node_id):
                hint = f"its file {rel} is unusable: {state.problems[rel]}; fix it, then sync"
                return NodeNotFoundError(node_id, hint)
        return NodeNotFoundError(node_id)

    #: :meth:`_problem_files`' map: the problems dict it was built from, its paths, and
    #: file stem -> sorted paths
    _problem_stems: tuple[dict[str, str], frozenset[str], dict[str, list[str]]] | None = None

    def _problem_files(self, node_id: str) -> list[str]:
        """The sorted paths of the unreadable files (``state.problems``) named for ``node_id``.
        Every write of an unknown id asks (:meth:`_naming_lost`): sorting and walking every
        problem per call cost 11 ms per ``update('zz')`` beside 20,000 unreadable files
        (0.1 ms before). The stem map is built once and kept while the problems are the
        same paths (checked exactly: the dict is changed in place by a sync)."""
        problems = self._engine.state.problems
        if not problems:
            return []
        kept = self._problem_stems
        if kept is None or kept[0] is not problems or kept[1] != problems.keys():
            stems: dict[str, list[str]] = {}
            for rel in sorted(problems):
                stems.setdefault(paths.stem_of(rel), []).append(rel)
            kept = self._problem_stems = (problems, frozenset(problems), stems)
        return kept[2].get(node_id, [])

    def __len__(self) -> int:
        return len(self._engine) - len(self._hidden())

    def __contains__(self, node_id: object) -> bool:
        # one entry's visibility, not the whole hidden set (recomputed after every write)
        if not isinstance(node_id, str):
            return False
        self._engine.fresh()
        return self._filter.sees(self._engine.state, node_id)

    def ids(
        self, layer: str | None = None, *, include_expired: bool = False, include_archived: bool = False
    ) -> list[str]:
        """Sorted ids of the nodes the caller sees, or of one layer."""
        hidden = self._hidden(Show(include_expired, include_archived))
        return [i for i in self._engine.ids(layer) if i not in hidden]

    def entry(self, node_id: str, *, include_expired: bool = False, include_archived: bool = False) -> Entry:
        """The index entry of a node (path, layer, bucket, judge inputs...)."""
        return self._visible(self._as_stored(node_id), Show(include_expired, include_archived))

    def entries(
        self, layer: str | None = None, *, include_expired: bool = False, include_archived: bool = False
    ) -> list[Entry]:
        """Index entries of the nodes the caller sees (or one layer), sorted by id."""
        hidden = self._hidden(Show(include_expired, include_archived))
        return [e for e in self._engine.entries(layer) if e.id not in hidden]

    def renamed_to(self, node_id: str) -> list[str]:
        """Sorted ids of the memories the caller sees (archived and expired ones too) whose
        ``renamed_from`` lists ``node_id``: where a memory once under that id lives now. From
        the index (no file is read); empty when none does."""
        self._engine.fresh()
        state, scope = self._engine.state, self._scope
        holders = state.earlier.get(check_id(node_id), ())
        return sorted(
            h
            for h in holders
            if (e := state.entries.get(h)) is not None and (scope is None or scope.admits(e))
        )

    def path_of(self, node_id: str, *, include_expired: bool = False, include_archived: bool = False) -> Path:
        """Absolute path of a node's file."""
        show = Show(include_expired, include_archived)
        return self.root / self._visible(self._as_stored(node_id), show).path

    def get(self, node_id: str, *, include_expired: bool = False, include_archived: bool = False) -> Node:
        """Read a node from its file. Raises NodeNotFoundError for an unknown id (and, with
        the same text, for an out-of-scope one; an archived or expired one's error says so).
        An id typed in another Unicode form finds the memory (:func:`as_stored`)."""
        node_id = self._as_stored(node_id)
        self._seen_single(check_id(node_id), Show(include_expired, include_archived), retry=True)
        node = read_hiding(self._engine, self._scope, node_id)
        self._no_broken_copy(node_id)
        return node

    def _seen_single(self, node_id: str, show: Show, *, retry: bool = False) -> None:
        """:meth:`_visible` for a single read (``get``, ``read_text``): a scoped handle's own
        copy of an id it does not see, broken by hand, is named, not "no node"
        (:func:`md_cg.engine.own_broken_copy`)."""
        try:
            self._visible(node_id, show, retry=retry)
        except NodeNotFoundError:
            scope = self._scope
            broken = None if scope is None else engine_mod.own_broken_copy(self._engine, scope, node_id)
            if broken is None:
                raise
            raise broken from None

    def _no_broken_copy(self, node_id: str) -> None:
        """An unscoped handle's single read of an id one of whose other files cannot be read
        as a memory is refused, naming it (:func:`md_cg.engine.broken_copy`)."""
        if self._scope is None:
            broken = engine_mod.broken_copy(self._engine, node_id)
            if broken is not None:
                raise broken

    def superseded_by(self, node_id: str) -> str | None:
        """The id of the node that supersedes ``node_id``, or None."""
        node_id = self._as_stored(node_id)
        self._visible(node_id)
        return visibility.superseded_by(self._engine.state, node_id, self._scope)

    def _dedup_current(self, node_id: str) -> bool:
        """Whether the caller sees ``node_id`` and it is a current memory to deduplicate
        against (:func:`md_cg.visibility.dedup_current`); reads the index only, so a
        pool of text-index hits is cut after the superseded ones are left out."""
        eng = self._engine
        eng.fresh()
        e = eng.state.entries.get(node_id)
        if e is None or not visibility.visible(eng.state, e, self._scope):
            return False
        return visibility.dedup_current(eng.state, e, self._scope, time.time())

    def successors(self, node_id: str) -> list[str]:
        """The ids of the live nodes the caller sees that supersede ``node_id`` (a
        ``supersedes`` edge to it), sorted: what hides it from search besides its own
        ``valid_until``. A reopen (``update(node_id, valid_until=None)``, :meth:`reopen`)
        removes their edges, and those of the archived or expired nodes the caller sees
        that have one. An archived or expired ``node_id`` is looked at too."""
        node_id = self._as_stored(node_id)
        self._visible(node_id, Show(include_expired=True, include_archived=True))
        return visibility.successors(self._engine.state, node_id, self._scope, time.time())

    def unreadable_files(self) -> list[tuple[str, str]]:
        """(path, reason) of each file under the layer folders that holds no usable node,
        as the index last found them (an open without snapshot, :meth:`sync`, a pick-up of
        hand edits): broken frontmatter, over a size limit, not readable. ``health()``
        lists them as ``unreadable_file``. A scoped handle gets none (whose file it is
        cannot be told)."""
        if self._scope is not None:
            return []
        return sorted(self._engine.state.problems.items())

    def write_outcome(self, node: Node) -> str:
        """What ``add_many([node], overwrite=True)`` would do now: ``"created"``, ``"updated"``
        (the file's bytes would change), ``"moved"`` (to another folder) or ``"unchanged"``
        (the file would keep its bytes, mtime included). Reads the node's file; writes
        nothing; ``node`` is left as it is (its retention decision is made on a copy). An
        id held by an archived node or one outside the caller's scope answers
        ``"created"`` without a look at that node's file, as an unknown id does (the
        write would then be refused: the id is taken)."""
        rel = layout.rel_path(node)
        try:
            previous: Entry | None = self.entry(node.id, include_expired=True)
        except NodeNotFoundError:
            if node.id in self._engine:
                return "created"
            previous = None
        if previous is not None and previous.id != node.id:  # its other Unicode form: a twin
            return "created"
        if previous is not None and previous.path != rel:
            return "moved"
        same = holds_as_written(self, node, rel, previous)
        return "created" if same is None else "unchanged" if same else "updated"

    def iter_nodes(self, layer: str | None = None) -> Iterator[Node]:
        """Every node the caller sees (or of a layer), read from its file, in id order. One
        whose file a hand edit broke since the index read it is left out and warned of
        (``RuntimeWarning``; before session 38 it ended the iteration with its error)."""
        for node_id in self.ids(layer):
            try:
                yield self.get(node_id)
            except NodeNotFoundError:
                continue
            except MalformedNodeFileError as exc:
                left_out_unreadable("iter_nodes", node_id, exc, stacklevel=2)

    def list_nodes(
        self,
        layer: str | None = None,
        *,
        tag: editing.TagFilter | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | None = None,
        offset: int = 0,
        include_expired: bool = False,
        include_archived: bool = False,
        include_superseded: bool = True,
    ) -> list[Entry]:
        """Index entries, newest first: of ``layer``, carrying ``tag`` (a list: every one of
        them), whose last
        update (or creation) lies in ``[since, until]`` (seconds since the epoch);
        then ``offset`` and ``limit``. Reads no node file. :meth:`list_page`
        also says how many match."""
        return self.list_page(
            layer,
            tag=tag,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
            include_expired=include_expired,
            include_archived=include_archived,
            include_superseded=include_superseded,
        ).entries

    def list_page(
        self,
        layer: str | None = None,
        *,
        tag: editing.TagFilter | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | None = None,
        offset: int = 0,
        include_expired: bool = False,
        include_archived: bool = False,
        include_superseded: bool = True,
    ) -> editing.Page:
        """:meth:`list_nodes` as a :class:`~md_cg.editing.Page`: ``total``, the number
        of nodes that match, and ``entries``, the page of them.

        Sorts by the index's columns: without ``tag``, numpy filters and ranks the
        snapshot's columns (:meth:`~md_cg.index.Entries.columns`) and only the page's
        entries are built (2-14 ms for 50 of a 100k store opened from its snapshot);
        with ``tag``, the ids come from the state's tag map (the first use reads every
        node's tags, later ones look the tag up: see ``IndexState.tagged``)."""
        since, until = editing.window_of(since, until)
        editing.check_window(tag, since, until)
        hidden = self._hidden(Show(include_expired, include_archived, include_superseded))
        eng = self._engine
        window: dict[str, Any] = {"layer": layer, "since": since, "until": until}
        window.update(limit=limit, offset=offset)
        with eng.lock:
            entries = eng.state.entries
            if tag is not None:  # the tag's ids from the state's tag map (built once, then kept)
                tagged = entries.listed_of(i for i in self._tagged(tag) if i not in hidden)
                return editing.select(tagged, entries.__getitem__, **window)
            columns = entries.columns()
            if columns is not None:  # opened from a snapshot: numpy passes over its rows
                return editing.select_columns(columns, hidden, entries.__getitem__, **window)
            visible = (row for row in entries.listed() if row[0] not in hidden)
            return editing.select(visible, entries.__getitem__, **window)

    def _tagged(self, tag: editing.TagFilter) -> frozenset[str]:
        """The ids carrying ``tag`` (every one of several), visible or not."""
        state = self._engine.state
        if isinstance(tag, str):
            return state.tagged(tag)
        sets = sorted((state.tagged(t) for t in tag), key=len)
        return sets[0].intersection(*sets[1:]) if len(sets) > 1 else sets[0]

    def _filter_ids(
        self, tag: editing.TagFilter | None, since: float | None, until: float | None
    ) -> frozenset[str] | None:
        """The ids a search filter lets through (None: no filter), visible or not."""
        if tag is None and since is None and until is None:
            return None
        since, until = editing.window_of(since, until)
        editing.check_window(tag, since, until)
        state = self._engine.state
        chosen = self._tagged(tag) if tag is not None else None
        if since is not None or until is not None:
            if chosen is not None and len(chosen) * 8 < len(state.entries):
                changed = state.entries.changed_of
                return frozenset(i for i in chosen if editing.within(changed(i), since, until))
            in_window = editing.changed_ids(state.entries, since, until)
            chosen = in_window if chosen is None else chosen & in_window
        return chosen

    def read_text(
        self, node_id: str, *, include_expired: bool = False, include_archived: bool = False
    ) -> str:
        """The node's file exactly as stored: frontmatter and body."""
        node_id = self._as_stored(node_id)
        self._seen_single(check_id(node_id), Show(include_expired, include_archived))
        try:
            text = editing.read_text(self._engine, node_id, checked=self._scope is not None)
        except engine_mod.HeldNow as exc:
            raise held_hidden(self._engine, self._scope, exc) from None
        self._no_broken_copy(node_id)
        return text

    def bucket_sizes(self) -> dict[str, int]:
        """Knowledge bucket folder -> number of nodes the caller sees (``orphan`` included)."""
        hidden = self._hidden()
        sizes = dict(self._engine.state.buckets)
        for node_id in hidden:
            e = self._engine.state.entries.get(node_id)
            if e is not None and e.bucket is not None and sizes.get(e.bucket, 0) > 0:
                sizes[e.bucket] -= 1
        return {b: n for b, n in sorted(sizes.items()) if n > 0}

    def neighbours(
        self, node_id: str, direction: str = "out", types: Iterable[str] | None = None, depth: int = 1
    ) -> list[graph.Neighbour]:
        """Nodes linked to ``node_id`` within ``depth`` edges (see :mod:`md_cg.graph`)."""
        eng, node_id = self._engine, self._as_stored(node_id)
        with eng.lock:
            self._visible(check_id(node_id))  # an archived or expired node says so
            return graph.neighbours(
                eng.state,
                node_id,
                direction,
                list(types) if isinstance(types, Iterable) and not isinstance(types, str) else types,
                depth,
                hidden=self._filter.hidden(eng.state),
            )


class Lifecycle(_Handle):
    """Archive, unarchive, apply_changes and supersede; the shared preparation of new nodes."""

    def _prepare(
        self,
        batch: list[Node],
        now: float,
        *,
        stamp: bool = True,
        replacing: bool = False,
        decide: bool = True,
        validated: bool = False,
    ) -> list[tuple[Node, temporal.RetentionDecision]]:
        """Validate a batch, put it in the caller's scope and (``decide``) decide its retention.

        ``validated``: the caller has just validated every node (``add``), so
        only the creation time set here needs normalising."""
        seen: dict[str, str] = {}
        decided = []
        if replacing:
            self._engine.refresh()  # the memory replaced is known as it is now (a shared one stays shared)
        entries = self._engine.state.entries
        for node in batch:
            if not isinstance(node, Node):
                raise TypeError(f"add_many expects Node objects, got {type(node).__name__}")
            if stamp and node.created_at is None:
                node.created_at = quantise_instant(now) if validated else now
            if not validated:
                refuse_naive_times(node, node.id if isinstance(node.id, str) else None)
                validate(node)
            key = paths.id_key(node.id)
            if key in seen:
                raise _twice_in_batch(node.id, seen[key])
            seen[key] = node.id
            held = entries.get(node.id) if replacing else None
            if held is not None and self._scope is not None and not self._scope.admits(held):
                held = None  # another scope's: the write is refused as taken, nothing told
            if held is not None and node.agent_scope is None and node.workspace_scope is None:
                # replacing keeps the memory where it was: a shared one stays shared
                node.agent_scope, node.workspace_scope = held.agent_scope, held.workspace_scope
                node.sensitivity = node.sensitivity or held.sensitivity
            _refuse_narrowing(self._scope, node, held)
            retention.stamp_scope(node, self._scope, fill=held is None)
            retention.imply_tier(node)  # an expiry the caller gave asks for the temp tier (verbatim too)
            closed = self._closed_by(node, held, now)
            if stamp and node.expires_at is not None and node.expires_at <= now:
                editing.warn_past_expiry(node, stacklevel=5)
            if not decide:
                continue
            explicit = node.retention_tier is not None
            kept = retention.kept_expiry(held, now, _same_text(self._engine, node))
            d = self._ret.decide(node, now=now, kept=kept, explicit=explicit, keep=bool(closed))
            decided.append((node, d))
        return decided

    def _closed_by(self, node: Node, held: Entry | None, now: float) -> tuple[str, ...]:
        """The closed facts whose only successor ``held`` is, which ``node`` replaces: such
        a node may not be made temporary (refused when asked, as ``update`` refuses),
        else a fact would stay hidden for good once it expired."""
        if held is None:
            return ()
        closed = visibility.left_closed(self._engine.state, [held.id], [held.id], now, self._scope)[held.id]
        if closed and node.retention_tier == "temp":  # asked, or given an expiry (imply_tier)
            raise _temporary_successor(node.id, closed)
        return closed

    @contextmanager
    def holding(self, node_ids: str | Iterable[str]) -> Iterator[None]:
        """Hold the write locks of ``node_ids`` for a read-modify-write made of several
        calls (a ``get``, then an ``update`` built from what it read): inside, this handle's
        own reads and writes of those ids go ahead (the locks are re-entrant within one
        handle), and every other process's or handle's write of them waits -- so nothing
        another writer stores between the read and the write is written over. Hold it
        briefly: the other writers wait up to their ``lock_timeout``. The ids need not
        exist (the caller's ``get`` says whether they do); a read-only handle raises
        :class:`~md_cg.errors.ReadOnlyStoreError`."""
        ids = [node_ids] if isinstance(node_ids, str) else list(node_ids)
        with engine_mod.hold_stripes(self._engine, [check_id(i) for i in ids]):
            yield

    def archive(self, ids: str | Sequence[str], *, reason: str = "") -> list[str]:
        """Move nodes to ``archive/`` byte for byte (one commit); return the ids moved.

        Archived nodes leave every default read (``include_archived=True``
        shows them); nothing is deleted. Ids already archived are skipped; an
        unknown or out-of-scope id raises NodeNotFoundError before anything moves.
        """
        wanted = [self._as_stored(i) for i in retention.ids_of(ids)]
        with self._naming_lost():
            moved, _ = self._engine.change_many(archive=wanted, durable=None, check=self._check_scope)
        self._note_archive("archive", moved, reason)
        return moved

    def unarchive(self, ids: str | Sequence[str]) -> list[str]:
        """Move archived nodes back to where they were, byte for byte; return the ids moved."""
        wanted = [self._as_stored(i) for i in retention.ids_of(ids)]
        with self._naming_lost(Show(include_archived=True)):  # a typed id: its archived twin named
            _, moved = self._engine.change_many(unarchive=wanted, durable=None, check=self._check_scope)
        self._note_archive("unarchive", moved, "")
        return moved

    def apply_changes(self, *, add: Sequence[Node] = (), archive: Sequence[str] = ()) -> None:
        """Add new nodes and archive others in ONE journal commit: all or nothing.

        Everything is validated first (nodes, usable tags and edges as for
        :meth:`add`, scope, retention, duplicate and unknown ids); an id may not
        be both added and archived. A crash
        leaves all of it or none of it once recovered (see md_cg.journal).
        """
        batch = retention.nodes_of(add, "add")
        wanted = retention.ids_of(archive, "archive")
        clash = sorted({n.id for n in batch if isinstance(n, Node)} & set(wanted))
        if clash:
            raise InvalidArgumentError(
                f"node {clash[0]!r} is both added and archived in one apply_changes", name="archive"
            )
        for node in batch:  # new input, as for add (add_many carries sources as they are)
            if isinstance(node, Node):
                self._require_usable(node)
        now = time.time()
        decided = self._prepare(batch, now)
        ids = [n.id for n in batch]
        with self._engine.lock, self._naming_lost(added=ids):
            moved, _ = past_stale_notes(
                self._engine,
                ids,
                lambda: self._engine.change_many(
                    batch, archive=wanted, durable=None, check=self._check_scope, check_add=self._check_taken
                ),
            )
        try:
            self._ret.record(decided, now)
        finally:  # both records of a change made: one failing does not keep the other out (r6)
            self._note_archive("archive", moved, "apply_changes")

    def _note_archive(self, event: str, ids: list[str], reason: str) -> None:
        if ids:
            now = time.time()
            records = ({"event": event, "id": i, "reason": reason, "at": now} for i in ids)
            self.log(ARCHIVE_LOG).append(records, landed=True)  # after the move's commit

    def supersede(self, old_id: str, new_id: str, reason: str = "") -> None:
        """Mark ``old_id`` as superseded by ``new_id``: ``valid_until`` = now on the
        old node and a ``supersedes`` edge from the new one, in one commit. Search
        hides the old node by default; nothing is deleted. An archived or expired node
        (either side) raises :class:`NodeNotFoundError` (:func:`md_cg.visibility.refuse_write`),
        a ``new_id`` that is itself superseded (a cycle, or a stale successor)
        :class:`InvalidArgumentError`; nothing is written."""
        old_id, new_id = self._as_stored(old_id), self._as_stored(new_id)
        with self._engine.lock, self._naming_lost():
            self._engine.fresh()
            retention.supersede(
                self._engine, check_id(old_id), check_id(new_id), reason, self._check_scope, scope=self._scope
            )

    def keep_returned(self, node_id: str) -> None:
        """Keep a memory forgotten in this clone that a merge or checkout brought back
        (``health()``'s ``forgotten_returned``, ``SyncReport.returned``): a ``restored``
        record in the audit log, so it is no longer reported. Raises
        :class:`NodeNotFoundError` for an id the caller does not see, and
        :class:`InvalidArgumentError` for one that is not such a memory."""
        eng, node_id = self._engine, self._as_stored(node_id)
        eng.ensure_writable()
        # under the id's lock, the index caught up: a forget since (another process) is seen
        with self._naming_lost(), eng.lock, eng.hold([check_id(node_id)]):
            entry = eng.entry(node_id)
            self._check_scope(entry)
            log = self.log(paths.AUDIT_DIR)
            backs = audit.back_again(
                {node_id: entry}, audit.visible_to(self._scope, log.read()), eng.read_node
            )
            if not backs:
                raise InvalidArgumentError(
                    f"{node_id!r} is not a memory forgotten in this clone whose file came back; "
                    "nothing to keep",
                    name="node_id",
                    value=node_id,
                )
            # under a new id: its forgotten id is kept as this copy, and stays forgotten itself
            now, fields = time.time(), visibility.scope_fields(entry)
            earlier = audit.earlier_ids(engine_mod.scoped_read(eng, node_id, eng.read_node, entry.path))
            records = [
                {
                    "event": audit.RESTORED,
                    "id": b.forgotten if b.how == "new id" else node_id,
                    "kept": node_id,
                    "layer": entry.layer,
                    "reason": "kept after it came back",
                    "time": now,
                    **({"created_at": entry.created_at} if entry.created_at is not None else {}),
                    **({audit.RENAMED_FROM: earlier} if earlier else {}),  # which memory (audit.memory_key)
                    **fields,
                }
                for b in backs
            ]
            log.append(records, durable=True)

    def _coerce(self, node: Node | None, fields_: dict[str, Any]) -> Node:
        """The node of ``add``: the one given, or one built from keyword fields."""
        if node is not None:
            if fields_:
                raise TypeError("pass either a Node or keyword fields, not both")
            if not isinstance(node, Node):
                raise TypeError(f"expected a Node, got {type(node).__name__}")
            refuse_naive_times(node, node.id if isinstance(node.id, str) else None)
            return node
        refuse_naive_times(fields_, fields_["id"] if isinstance(fields_.get("id"), str) else None)
        unknown = set(fields_) - _NODE_FIELDS
        if unknown:
            raise InvalidNodeError(
                f"unknown node field(s): {', '.join(sorted(unknown))} (put custom keys in extra={{...}})",
                field=sorted(unknown)[0],
            )
        if fields_.get("id") is not None:
            return Node(**fields_)
        fields_["id"] = slug_id(fields_.get("body") or "")
        node = Node(**fields_)
        try:  # what add checks first, so that a problem is not told of an id the caller never gave
            editing.require_text(validate(node))
            self._require_usable(node)
            return node
        except InvalidNodeError as exc:
            said = str(exc).removeprefix(f"node {node.id!r}: ")
            raise type(exc)(f"the new memory: {said}", field=exc.field, value=exc.value) from None

    def reopen(self, node_id: str, /, *, durable: bool | None = None, **changes: Any) -> Reopened:
        """``update(node_id, valid_until=None, **changes)``: make a superseded (closed)
        memory current again, and say what that took: ``Reopened(node, unlinked)``,
        ``unlinked`` the ids of the nodes whose ``supersedes`` edge to it went in the
        same commit (every one the caller sees, archived or expired too: see
        :meth:`_reopen_commit`). What ``mdcg update --reopen`` and MCP ``update`` with
        ``reopen`` report."""
        done = self._update_reporting(node_id, {**changes, "valid_until": None}, durable, stacklevel=4)
        return Reopened(done.node, done.unlinked)

    def update_report(
        self,
        node_id: str,
        /,
        *,
        durable: bool | None = None,
        require: Callable[[Node], None] | None = None,
        **changes: Any,
    ) -> Updated:
        """``update`` (a reopen when ``valid_until=None`` is given, as :meth:`reopen`), and
        what it did: ``Updated(node, unlinked, changed)``; ``changed`` False when the
        changes left the file as it was (nothing written, ``updated_at`` kept). What
        ``mdcg update`` and MCP ``update`` report.

        ``require``: called with the node as its file holds it, under the node's lock, before
        the changes are made (again on each retry after a write overtook the read); what it
        raises refuses the update, nothing written. How a read-then-write checks what it
        read with no other write landing between the check and the commit (MCP ``update``
        refuses a body built on a read another agent's write has overtaken)."""
        return self._update_reporting(node_id, changes, durable, stacklevel=4, require=require)

    def modify(
        self,
        node_id: str,
        change: Callable[[Node], Node | None],
        *,
        durable: bool | None = None,
        include_archived: bool = False,
        include_expired: bool = False,
    ) -> Node:
        """Read-modify-write one node under its lock.

        ``change`` receives the current node (freshly read from its file) and
        mutates it or returns a replacement; the result is validated before
        anything is written; ``updated_at`` is set to now. A node outside the
        caller's scope is absent (NodeNotFoundError), and so is an archived or
        expired one (the error says so: :func:`md_cg.visibility.refuse_write`)
        unless ``include_archived`` / ``include_expired`` asks to change it
        anyway, as the reads show one (it stays archived, or expired unless
        ``change`` renews it). The result is held to what :meth:`update` holds
        (:func:`held_to_scope`).
        """
        guarded = held_to_scope(self._scope, change, self._engine.state.entries.get)
        check = self._writable_check(archived_ok=include_archived, expired_ok=include_expired)
        with self._naming_lost(Show(include_expired, include_archived)):
            return self._engine.modify(self._as_stored(node_id), guarded, durable=durable, check=check)

    def _update(self, node_id: str, changes: dict[str, Any], durable: bool | None) -> Node:
        """``update`` (see :meth:`md_cg.store.MdCG.update`)."""
        return self._update_reporting(node_id, changes, durable, stacklevel=5).node

    def _update_reporting(
        self,
        node_id: str,
        changes: dict[str, Any],
        durable: bool | None,
        *,
        stacklevel: int,
        require: Callable[[Node], None] | None = None,
    ) -> Updated:
        """``update``, the successors a reopen (``valid_until=None``) unlinked, and whether
        it changed the file (:func:`_unless_same`: a change that leaves the file's bytes
        as they were writes nothing); warns, as ``add`` does, of an expiry given already
        past (the memory is hidden at once)."""
        node_id = self._as_stored(node_id)
        check_changes(check_id(node_id), changes)
        now = time.time()
        decided: list[tuple[Node, temporal.RetentionDecision]] = []
        change = _required(require, self._changer(node_id, changes, now, decided))
        # an archived node is refused; an expired one only renewed (its tier or a new
        # expiry given: _changer refuses a result still expired), never revived by an edit
        check = self._writable_check(expired_ok=renews(changes))
        unlinked: list[str] = []
        try:
            with self._naming_lost():
                if "valid_until" in changes and changes["valid_until"] is None:  # a reopen
                    out, unlinked = self._reopen_commit(node_id, change, durable, check)
                else:
                    guarded = held_to_scope(self._scope, _unless_same(change), self._engine.state.entries.get)
                    out = self._engine.modify(node_id, guarded, durable=durable, check=check)
        except _Same as same:  # nothing to write: the node as stored, its updated_at kept
            return Updated(same.node, [], False)
        self._ret.record(decided, now)
        given = changes.get("expires_at") is not None
        if given and out.expires_at is not None and out.expires_at <= now and out.retention_tier != "long":
            editing.warn_past_expiry(out, stacklevel=stacklevel)
        return Updated(out, unlinked, True)

    def _reopen_commit(
        self,
        node_id: str,
        change: Callable[[Node], Node],
        durable: bool | None,
        check: Callable[[Entry], None],
    ) -> tuple[Node, list[str]]:
        """One commit: ``change`` of ``node_id`` and the removal of the ``supersedes``
        edge to it from every node the caller sees that has one
        (:func:`md_cg.visibility.linked_successors`: an archived or expired one too,
        which unarchived or kept would hide it again). The set is read, its nodes'
        locks taken with the node's, and read again under them: a supersede of the
        node, or a forget of a successor, that another process committed in between
        makes it plan again (:data:`REOPEN_TRIES` times at most), so the memory never
        ends reopened yet hidden, nor the reopen fails on a successor gone meanwhile.
        ``check(entry)`` refuses the node itself (archived, expired); the successors are
        held only to the caller's scope (an archived one loses its edge too)."""
        eng, scope = self._engine, self._scope
        guarded = held_to_scope(scope, change, eng.state.entries.get)

        def usable(entry: Entry) -> None:
            (check if entry.id == node_id else self._check_scope)(entry)

        for _ in range(REOPEN_TRIES):
            eng.fresh()
            planned = visibility.linked_successors(eng.state, node_id, scope)

            def checked(node: Node, planned: list[str] = planned) -> Node | None:
                if visibility.linked_successors(eng.state, node_id, scope) != planned:
                    raise _SuccessorsMoved  # under the locks: the index is the log's now
                return guarded(node)

            # not superseded by any: a reopen that changes nothing else writes nothing
            plan: dict[str, Callable[[Node], Node | None]] = {
                node_id: checked if planned else _unless_same(checked)
            }
            plan.update({s: _unlinker(node_id) for s in planned})
            try:
                return eng.modify_many(plan, durable=durable, check=usable)[0], planned
            except _SuccessorsMoved:
                continue
            except NodeNotFoundError as exc:
                if exc.node_id == node_id or exc.node_id not in planned:
                    raise
                continue  # a successor forgotten since it was planned
        raise MdcgError(
            f"reopen of {node_id!r}: the memories superseding it kept changing while it ran "
            f"({REOPEN_TRIES} tries: other processes superseding it or removing its successors); "
            "nothing was written; run it again"
        )

    def _changer(
        self, node_id: str, changes: dict[str, Any], now: float, decided: list[tuple[Node, Any]]
    ) -> Callable[[Node], Node]:
        """The change ``update`` applies: the fields, the caller's scope, and a new
        retention decision when ``body``, ``temporal`` or ``retention_tier`` change, or
        the node moves into ``anchor/``. A tier a caller chose earlier stands (an edit
        of the text does not put a memory kept on purpose back on a timer); an
        ``expires_at`` given to a memory that is not temporary asks for the temp tier,
        as in ``add`` (a long memory with an expiry would be neither kept nor swept)."""
        redecide = bool({"body", "temporal", "retention_tier"} & set(changes)) or (
            changes.get("layer") == retention.ANCHOR_LAYER
        )

        def change(node: Node) -> Node:
            before = self._engine.state.entries.get(node_id)
            chosen = (
                "retention_tier" not in changes
                and node.retention_tier is not None
                and temporal.was_asked(node.retention_reason)
            )
            if not chosen:
                _refuse_lone_reason(node_id, changes)
            kept = {k: node.extra[k] for k in (merge_mod.CONFLICT_KEY, audit.RENAMED_FROM) if k in node.extra}
            for key, value in changes.items():
                setattr(node, key, value)
            # a new extra keeps the conflict record and the earlier ids (which memory it is)
            node.extra = {**node.extra, **{k: v for k, v in kept.items() if k not in node.extra}}
            timed = "expires_at" in changes and node.expires_at is not None and node.retention_tier != "temp"
            if timed:
                node.retention_tier = "temp"  # asked by the expiry (check_changes refused long with one)
            if ("retention_tier" in changes or timed) and "retention_reason" not in changes:
                node.retention_reason = None  # the old decision's reason no longer holds
            merge_mod.settle(node, changes)  # an edit of a conflicted field resolves it
            retention.stamp_scope(node, self._scope, fill=False)  # shared stays shared
            _refuse_narrowing(self._scope, node, before)
            if redecide or timed or "expires_at" in changes:
                explicit = (
                    chosen or timed or ("retention_tier" in changes and node.retention_tier is not None)
                )
                self._redecide(node, before, changes, now, explicit, decided if redecide or timed else None)
            at = time.time()  # under the node's lock: it may have expired while waiting for it
            if before is not None and visibility.is_expired(before, at):
                _refuse_still_expired(node, before, at)  # a renewal that does not renew
            return node

        return change

    def _redecide(
        self,
        node: Node,
        before: Entry | None,
        changes: dict[str, Any],
        now: float,
        explicit: bool,
        decided: list[tuple[Node, Any]] | None,
    ) -> None:
        """The retention part of ``update`` (``decided`` None: only the check of an expiry
        given to the only successor of closed facts, which is refused)."""
        state = self._engine.state
        closed = visibility.left_closed(state, [node.id], [node.id], now, self._scope)[node.id]
        if closed and (
            (explicit and node.retention_tier == "temp")
            or ("expires_at" in changes and node.expires_at is not None)
        ):
            raise _temporary_successor(node.id, closed)
        if decided is None:
            return
        if "expires_at" not in changes:
            node.expires_at = None  # the stored one is kept while still ahead, never once past
        kept = retention.kept_expiry(before, now)
        lasting = retention.was_lasting(before, changes)
        decided.append(
            (
                node,
                self._ret.decide(
                    node, now=now, kept=kept, explicit=explicit, keep=bool(closed), lasting=lasting
                ),
            )
        )


def held_hidden(engine: Engine, scope: Scope | None, exc: NodeNotFoundError) -> NodeNotFoundError:
    """``exc``; but when it names the memory the file of its id holds now
    (:class:`md_cg.engine.HeldNow`) and the caller in ``scope`` may not be told of that
    memory (:func:`md_cg.engine.admits_held`), the refusal that names neither it nor the
    file (:func:`~md_cg.errors.lost_file_error` without a path). Session 36: a scoped
    ``get``/``update``/``move``/``rename``/``forget`` of its own ``x``, another scope's
    ``hush`` moved over ``x.md`` by hand, said "it holds memory 'hush' now"."""
    if isinstance(exc, engine_mod.HeldNow) and not engine_mod.admits_held(engine, scope, exc.held):
        return lost_file_error(exc.node_id, None)
    return exc


def read_hiding(engine: Engine, scope: Scope | None, node_id: str) -> Node:
    """:meth:`Engine.get <md_cg.engine.Engine.get>` for a caller in ``scope`` (``get``, a
    search result's node): its refusal of a file that holds another memory now told as
    :func:`held_hidden` tells it (a file a person narrowed in place out of the handle's
    scope the engine refuses as an unknown id: :func:`md_cg.engine.narrowed`)."""
    try:
        return engine.get(node_id)
    except engine_mod.HeldNow as exc:
        raise held_hidden(engine, scope, exc) from None


def held_out_of_scope(engine: Engine, scope: Scope | None, node_id: str, rel: str) -> DuplicateIdError:
    """The refusal, to a scoped caller, of a write of ``node_id`` onto a file that holds a
    memory outside its scope (a file named by hand: any name is allowed, the id is in the
    frontmatter). Session 35: ``add(id="x")`` with another scope's ``hush`` filed as
    ``contextual/x.md`` was told "the file contextual/x.md holds memory 'hush'". Said as an
    id taken by such a memory is (:meth:`_Handle._check_taken`), naming no id but the
    caller's own and no path; a move of the caller's own memory (``update(layer=)``,
    ``move``, ``archive``, an ``overwrite`` to another layer) is told its file cannot go there,
    the error's ``path`` that file (``rel``: where the caller's own memory would go, as it
    can tell itself; the memory tool says "already exists" of it), not named in the text."""
    entry = engine.state.entries.get(node_id)
    if entry is None or scope is None or not scope.admits(entry):
        return DuplicateIdError(node_id, "", f"node {engine_mod.taken_outside_scope(node_id)}")
    text = (
        f"node id {node_id!r}: the file it would move to holds a memory outside this handle's "
        f"scope; it is not written over -- rename {node_id!r} first, then move it"
    )
    return DuplicateIdError(node_id, rel, text)


def renews(changes: dict[str, Any]) -> bool:
    """Whether the changes of an ``update`` may renew an expired memory: they give its
    tier (a tier, not None or ''), or an expiry (whether the result is live is checked once it is made:
    :func:`_refuse_still_expired`)."""
    return bool(changes.get("retention_tier")) or changes.get("expires_at") is not None


def _refuse_still_expired(node: Node, before: Entry, now: float) -> None:
    """Refuse the update of an expired memory whose result is still expired (an expiry
    given already past, or a tier that keeps it temporary on that expiry): a renewal
    must make it live, and any other change of it is refused
    (:func:`md_cg.visibility.refuse_write`)."""
    validate(node)  # the times as floats, as the engine will store them
    if node.expires_at is not None and node.expires_at <= now and node.retention_tier != "long":
        raise visibility.expired_error(node.id, before.expires_at or node.expires_at, visibility.RENEW_HINT)


def check_changes(node_id: str, changes: dict[str, Any]) -> None:
    """The arguments of ``update``: known fields, never ``id``; some body text."""
    unknown = set(changes) - _NODE_FIELDS
    if unknown or "id" in changes:
        bad = sorted(unknown | ({"id"} & set(changes)))
        raise InvalidNodeError(
            f"cannot update field(s) {', '.join(bad)} of node {node_id!r}"
            + (" (the id of a node cannot change)" if "id" in changes else ""),
            field=bad[0],
            node_id=node_id,
        )
    refuse_naive_times(changes, node_id)
    if (
        "expires_at" in changes
        and changes["expires_at"] is not None
        and changes.get("retention_tier") == "long"
    ):
        raise InvalidArgumentError(
            f"node {node_id!r}: an expires_at with retention_tier 'long': a long memory never "
            "expires; give one of them",
            name="expires_at",
            value=changes["expires_at"],
        )
    if "body" in changes:
        editing.require_text(Node(id=node_id, body=changes["body"]))
    # tags and edges are checked under the lock, against what the file holds (held_to_scope)


def held_to_scope(
    scope: Scope | None, change: Callable[[Node], Node | None], stored: Callable[[str], Entry | None]
) -> Callable[[Node], Node | None]:
    """``change`` of a public ``modify``, held to what ``update`` holds.

    The changed node must stay in the caller's scope (no other agent or
    workspace, no sensitivity above the handle's), may not narrow a memory
    the handle shares (:func:`_refuse_narrowing`), and new tags and edges
    must be usable (:func:`md_cg.editing.require_usable`; a tag, a self edge
    or an edge confidence the file already held is not new). ``stored(id)``:
    the node's entry now.
    """

    def run(node: Node) -> Node | None:
        tags, edges, times = list(node.tags), deepcopy(node.edges), _times(node)
        result = change(node)
        out = node if result is None else result
        if isinstance(out, Node):  # anything else is refused by the engine, naming its type
            refuse_naive_times(out, out.id if isinstance(out.id, str) else None)
            check_edit(scope, out, stored(out.id), tags, edges, times, _holder(scope, stored))
        return result

    return run


def check_edited(
    scope: Scope | None,
    node: Node,
    old: Node,
    entry: Entry,
    *,
    stored: Callable[[str], Entry | None] | None = None,
) -> None:
    """:func:`check_edit` of a file edit: ``old`` is the node as stored, ``entry`` its entry;
    ``stored(id)``: the entry of an id now (an edge target a memory holds is not refused)."""
    held = None if stored is None else _holder(scope, stored)
    check_edit(scope, node, entry, old.tags, old.edges, _times(old), held)


def _holder(scope: Scope | None, stored: Callable[[str], Entry | None]) -> Callable[[str], bool]:
    """Whether a memory the caller sees (archived or expired too) holds an id: an edge
    target such a memory holds is usable whatever its name (a file an older version wrote)."""

    def held(node_id: str) -> bool:
        e = stored(node_id)
        return e is not None and (scope is None or scope.admits(e))

    return held


def _times(node: Node) -> dict[str, object]:
    """The time fields of ``node`` (:data:`md_cg.node.TIME_FIELDS`): name -> value."""
    return {name: getattr(node, name) for name in TIME_FIELDS}


def check_edit(
    scope: Scope | None,
    node: Node,
    before: Entry | None,
    tags: list,
    edges: list,
    times: dict,
    held: Callable[[str], bool] | None = None,
) -> None:
    """Refuse an edited ``node`` (see :func:`held_to_scope`); ``tags``/``edges``/``times``:
    the stored ones (a time the file held, in milliseconds by an earlier version, is not new);
    ``held(id)``: a memory the caller sees holds ``id`` (:func:`md_cg.node.unsafe_edge_target`)."""
    retention.stamp_scope(node, scope, fill=False)
    _refuse_narrowing(scope, node, before)
    changed = [name for name, old in (("tags", tags), ("edges", edges)) if getattr(node, name) != old]
    if _times(node) != times:
        changed.append("times")
    editing.require_usable(node, fields=changed, kept_tags=tags, kept_edges=edges, kept_times=times)
    problem = unsafe_edge_target(node, edges, held) if "edges" in changed else None
    if problem is not None:
        raise problem


def _refuse_narrowing(scope: Scope | None, node: Node, stored: Entry | None) -> None:
    """A scoped handle may not narrow a shared memory (no agent: other agents read it),
    by update or overwrite: an agent, workspace or sensitivity that would hide it from
    readers who see it now."""
    if scope is None or stored is None or stored.agent_scope is not None:
        return
    if visibility.narrower(node, stored):
        raise InvalidArgumentError(
            f"node {node.id!r}: its agent, workspace or sensitivity would hide it from "
            "readers who see it now; a scoped handle may not narrow a memory it shares",
            name="agent_scope",
            value=node.id,
        )


def holds_as_written(view: Any, node: Node, rel: str, previous: Entry | None) -> bool | None:
    """Whether the file at ``rel`` holds ``node`` as an ``add`` over ``previous`` writes it
    (None: no file there): the tier a node without one is given and the retention decision,
    the stored expiry kept for the same text. :meth:`write_outcome`, and the import's
    comparison of an archived record with its archived memory (md_cg.transfer), which read
    the record's own bytes and refused every run after the first (attack a3)."""
    copy = shallow_copy(node)  # decide only rebinds scalar fields (tier, expiry, reason)
    retention.imply_tier(copy)  # as the write does (_prepare)
    now = time.time()
    kept = retention.kept_expiry(previous, now, _same_text(view._engine, node))
    view._ret.decide(copy, now=now, kept=kept, explicit=copy.retention_tier is not None)
    return fsops.holds(str(view.root), rel, nodefile.dump_bytes(copy), read_as=nodefile.lf_file)


def _same_text(eng: Engine, node: Node) -> Callable[[Entry], bool]:
    """Whether a stored entry's file holds ``node``'s text (a replacing ``add`` keeps
    the expiry of the same text only: a re-import; :func:`retention.kept_expiry`)."""

    def same(held: Entry) -> bool:
        try:
            return eng.read_node(held.path).body == node.body
        except (MdcgError, OSError):
            return False  # unreadable now: new content, a new expiry

    return same


def _refuse_lone_reason(node_id: str, changes: dict[str, Any]) -> None:
    """Refuse an ``update`` giving ``retention_reason`` alone to a memory whose tier the
    caller did not choose: a stored reason the decision did not write says the caller
    chose the tier (:func:`md_cg.temporal.was_asked`), so the note would keep the
    decision's tier for good (a one-off memory stayed temporary through an edit that
    made it a lasting fact). A reason counts only given with ``retention_tier`` or an
    ``expires_at`` (which asks for the temp tier), as ``add`` takes one."""
    reason = changes.get("retention_reason")
    # An empty or None tier means "decide again", not a choice (review round 3, session 25).
    if (
        not isinstance(reason, str)
        or not reason.strip()
        or temporal.normalize_tier(changes.get("retention_tier"))
    ):
        return
    if changes.get("expires_at") is not None:
        return
    raise InvalidArgumentError(
        f"node {node_id!r}: a retention_reason says why the caller chose the tier; this "
        "memory's tier was decided by its text, and a reason alone would keep that tier "
        "through later edits: give retention_tier with it (the tier you choose)",
        name="retention_reason",
        value=reason,
    )


#: Times a reopen plans its commit again when its successors changed before it held
#: their locks (:meth:`Lifecycle._reopen_commit`).
REOPEN_TRIES = 5


class Reopened(NamedTuple):
    """What :meth:`Lifecycle.reopen` did: the node as stored, and the ids of the nodes
    whose ``supersedes`` edge to it went in the same commit, sorted."""

    node: Node
    unlinked: list[str]


class Updated(NamedTuple):
    """What :meth:`Lifecycle.update_report` did: the node as stored, the ids of the nodes
    whose ``supersedes`` edge to it a reopen removed (sorted), and whether the file
    changed (False: the changes were what it held already; nothing was written)."""

    node: Node
    unlinked: list[str]
    changed: bool


def _required(
    require: Callable[[Node], None] | None, change: Callable[[Node], Node]
) -> Callable[[Node], Node]:
    """``change``, calling ``require`` on the node as read first (``update_report``'s check)."""
    if require is None:
        return change

    def checked(node: Node) -> Node:
        require(node)
        return change(node)

    return checked


class _Same(Exception):
    """A change of ``update`` that leaves the node's file as it was: nothing is written."""

    def __init__(self, node: Node) -> None:
        super().__init__(node.id)
        self.node = node


def _unless_same(change: Callable[[Node], Node | None]) -> Callable[[Node], Node | None]:
    """``change``, raising :class:`_Same` (with the node as read) when its result would
    be written as the very bytes the node as read gives, ``updated_at`` aside: a no-op
    ``update`` leaves the file, its mtime and ``updated_at`` alone, as a replacing ``add``
    of the same node does. A result that cannot be serialised is left to the write to
    refuse."""

    def run(node: Node) -> Node | None:
        stored = deepcopy(node)
        result = change(node)
        out = node if result is None else result
        try:
            same = isinstance(out, Node) and nodefile.dump_bytes(
                validate(deepcopy(out))
            ) == nodefile.dump_bytes(stored)
        except (MdcgError, TypeError, ValueError):
            return result
        if same:
            raise _Same(stored)
        return result

    return run


class _SuccessorsMoved(Exception):
    """A reopen's successors changed between its plan and its locks: it plans again."""


def _unlinker(target: str) -> Callable[[Node], None]:
    """The change that removes a node's ``supersedes`` edges to ``target`` (a reopen of it)."""

    def unlink(node: Node) -> None:
        node.edges = [e for e in node.edges if not (e.target == target and e.type == "supersedes")]

    return unlink


def _temporary_successor(node_id: str, closed: Sequence[str]) -> InvalidArgumentError:
    """The refusal to give the only successor of closed facts an expiry."""
    return InvalidArgumentError(
        f"node {node_id!r} superseded {', '.join(map(repr, closed))}: as a temporary "
        "memory it would expire and leave that fact hidden for good; reopen the old "
        "fact first (valid_until None; mdcg update ID --reopen) or keep this one",
        name="retention_tier",
        value="temp",
    )


class Recall(_Handle):
    """Access events, recall statistics, inject, resurfacing and organise (docs/recall.md,
    docs/organize.md): each a door into its own room (:mod:`md_cg.access`,
    :mod:`md_cg.organize`)."""

    _access: fsops.ShardWriter
    _access_broken: str | None
    _access_dropped: int

    _remember_lock: fsops.FileLock

    if TYPE_CHECKING:  # defined by MdCG and Reads

        @property
        def scope(self) -> Scope | None: ...

        def add(
            self, node: Node | None = None, /, *, durable: bool | None = None, tier: str | None = None
        ) -> Node: ...

        def get(self, node_id: str) -> Node: ...

        def _coerce(self, node: Node | None, fields_: dict[str, Any]) -> Node: ...

        @property
        def read_only(self) -> bool: ...

        def _hidden(self, show: Show = visibility.DEFAULT) -> frozenset[str]: ...

        def _visible(
            self, node_id: str, show: Show = visibility.DEFAULT, *, retry: bool = False
        ) -> Entry: ...

    def record_access(self, node_ids: Iterable[str], *, mode: str = "get") -> None:
        """Append one access event (``mode``, this handle's caller scope, the ids) to this
        process's access-log shard (nothing else). ``mode``: ``search``, ``inject`` or ``get``.
        An id the caller does not see (unknown, out of scope, archived or expired) raises
        NodeNotFoundError and nothing is recorded.

        On a folder that cannot be written (a read-only copy or medium, or a
        symlink planted where the log goes) the accesses are skipped with one
        warning, and :meth:`health` says so: a read never fails for its log.
        """
        if mode not in recall.MODES:
            raise InvalidArgumentError(
                f"mode must be one of {', '.join(recall.MODES)}, got {short_repr(mode)}",
                name="mode",
                value=mode,
            )
        ids = [check_id(self._as_stored(i)) for i in retention.ids_of(node_ids, "node_ids")]
        for node_id in ids:  # an id the caller does not see is absent, as for every write
            self._visible(node_id)
        self._record_event(mode, ids)

    def organize(
        self,
        mode: str = "dryRun",
        *,
        candidates: Any = None,
        run_id: Any = None,
        decisions: Any = None,
        strict: bool = False,
    ) -> OrganizeResult:
        """Compare candidates with the store (``dryRun``) or apply one dry run's
        decisions exactly once (``apply``); see :mod:`md_cg.organize`. ``strict``
        (apply): a decision the dry run does not back refuses the whole call, nothing
        applied and the run still open (default: it is skipped, the run ``degraded``)."""
        from . import organize as organize_mod  # here: dedupe and rapidfuzz's fuzz load with it

        store = cast(organize_mod.OrganizeStore, self)  # the composed MdCG provides it all
        self._engine.ensure_writable()  # a dry run is recorded for its apply: a write too
        return organize_mod.organize(
            store,
            mode,
            candidates=candidates,
            run_id=run_id,
            decisions=decisions,
            scope=self.scope,
            strict=strict,
        )

    def identical(self, body: str, layer: str | None = None) -> list[str]:
        """Ids of the memories the caller sees whose body is ``body`` -- line endings,
        trailing spaces and blank lines at either end aside -- of ``layer`` when given;
        best match first (:meth:`add_unique` stores a body only when this finds
        nothing). Reads at most ten files (the text index's best hits for the body's
        rarest terms, hidden and superseded ones left out first: see
        :func:`md_cg.organize.identical_ids`)."""
        from . import organize as organize_mod  # here, not at import: search and get never need it

        if layer is not None:
            check_layer(layer)
        return organize_mod.identical_ids(cast(organize_mod.OrganizeStore, self), body, layer)

    def add_unique(
        self,
        node: Node | None = None,
        /,
        *,
        durable: bool | None = None,
        tier: str | None = None,
        **fields_: Any,
    ) -> tuple[Node, bool]:
        """Store a node unless a memory with the same body is already in its layer
        (:meth:`identical`); return the stored node and True, or that memory (read from
        its file) and False. What ``mdcg add`` and the MCP ``remember`` tool do for a
        memory without a given id.

        The look and the write hold the store's ``remember`` lock
        (``.mdcg/remember.lock``), so two processes storing the same body at
        once store it once. ``durable``, ``tier`` and the fields as :meth:`add`."""
        eng = self._engine
        eng.ensure_writable()
        new = self._coerce(node, fields_)
        if tier is not None:
            temporal.normalize_tier(tier)  # a bad tier is refused even when nothing is written
        with self._remember_lock.hold(timeout=eng.lock_timeout):
            with eng.lock:
                eng.refresh()  # what another process stored under this lock a moment ago
            same = self.identical(new.body, new.layer) if isinstance(new.body, str) else []
            if same:
                return self.get(same[0]), False
            return self.add(new, durable=durable, tier=tier), True

    def recall_stats(
        self, window_days: int = 30, exempt_days: int = 7, max_inject_slots: int = 5
    ) -> RecallStats:
        """Top recalled, zombie rate, injection and coverage over the access log (docs/recall.md)."""
        return access.stats(
            self.root,
            self._active_entries(),
            self.scope,
            window_days=window_days,
            exempt_days=exempt_days,
            max_inject_slots=max_inject_slots,
            forgotten=audit.departure_times(self.log(paths.AUDIT_DIR)),
        )

    def inject(self, query: str, max_items: int = 5, *, tag: editing.TagFilter | None = None) -> InjectList:
        """Compact memories for a prompt: the adaptive budget, never filler; records ``mode=inject``.

        ``tag``: only memories with this tag (the search filter). A hit whose file a hand
        edit broke is left out, warned of and listed in the result's ``unreadable``."""
        items = access.inject_items(self, query, max_items, tag)
        if max_items > 0:
            self._record_event("inject", [i.id for i in items])
        return items

    def resurface(
        self,
        today: date | None = None,
        seed: int | None = None,
        *,
        record: bool = False,
        skip: Iterable[str] = (),
    ) -> Resurfaced | None:
        """One old memory brought back "on this day" (docs/recall.md); ``record=True`` logs the show.
        ``skip``: ids not to pick (memories whose files the caller found it cannot read:
        :func:`resurface_readable`)."""
        hidden = self._hidden(visibility.SEARCH)
        skipped = access.skip_set(skip)
        state = self._engine.state
        version = (id(state), state.generation, hidden, skipped)  # the candidates change only with these

        def active() -> list[Entry]:  # as recall_stats counts them: no negative memory
            out = state.entries.values()
            return [
                e
                for e in out
                if e.id not in hidden and e.layer not in NEGATIVE_LAYERS and e.id not in skipped
            ]

        keep = self._write_statistics if record and not self.read_only and not self._access_broken else None
        return access.resurface_pick(self, version, active, today, seed, record=keep, passed_over=skipped)

    def _active_entries(self) -> list[Entry]:
        """Entries the caller sees that are active: not archived, expired or superseded, and
        not negative memory (rejected/, unresolved/: search never returns them as results,
        so they could never be recalled and would count as zombies for ever)."""
        hidden = self._hidden(visibility.SEARCH)
        return [e for e in self._engine.entries() if e.id not in hidden and e.layer not in NEGATIVE_LAYERS]

    def _access_findings(self) -> list[Finding]:
        """``access_unrecorded`` findings of this handle (a folder it may not write, a full disk)."""
        out = []
        if self._access_broken:
            out.append(Finding("access_unrecorded", f"accesses are not recorded: {self._access_broken}"))
        if self._access_dropped:
            why = f"{self._access_dropped} access event(s) not recorded: the disk was full"
            out.append(Finding("access_unrecorded", why))
        return out

    def _record_event(self, mode: str, ids: list[str]) -> None:
        """Append one access event (mode, caller, ids) to this process's access-log shard;
        an inject run counts even when it filled no slot, other calls only when they exposed ids."""
        if self.read_only or self._access_broken or (not ids and mode != "inject"):
            return
        scope = self.scope
        line = access.event_line(
            mode, ids, scope.agent if scope else None, scope.workspace if scope else None
        )

        def write() -> None:
            self._access.append([line])

        self._write_statistics(write)

    def _write_statistics(self, write: Callable[[], None]) -> None:
        """Run ``write``, which records a read that succeeded (an access event, a show):
        a store this process may not write (a read-only copy, a folder planted in
        ``.mdcg/``) stops the recording with one warning, a full disk drops it."""
        with self._engine.lock:
            try:
                self._engine.ensure_writable()
                write()
            except (OSError, UnsafePathError) as exc:
                if isinstance(exc, OSError) and is_out_of_room(exc):
                    # The read succeeded; only its statistics are lost. The next one tries again.
                    self._access_dropped += 1
                    note = f"md-cg: {self.root}: {exc.strerror}; accesses are not recorded while it lasts"
                    engine_mod.warn_once(self, "access-full", note)
                    return
                if not isinstance(
                    exc, (UnsafePathError, PermissionError)
                ) and not engine_mod.is_read_only_error(exc):
                    raise
                self._access_broken = f"{getattr(exc, 'strerror', None) or exc}"
                note = (
                    f"md-cg: {self.root} is not writable ({self._access_broken}); accesses are not recorded"
                )
                engine_mod.warn_once(self, "access", note)


def _twice_in_batch(node_id: str, first: str) -> DuplicateIdError:
    """The refusal of an id a batch holds twice (or a case or normalisation twin of one):
    its own words, not the default "already exists at <path>" (``plain`` is false, so the
    CLI and MCP do not reword it as a stored memory to update or overwrite)."""
    if first == node_id:
        message = f"node id {node_id!r} appears twice in this batch; give each memory its own id"
    else:
        message = (
            f"node id {node_id!r} appears twice in this batch (also as {first!r}): ids that differ "
            "only by letter case or Unicode normalisation are one file on macOS and Windows; "
            "give each memory its own id"
        )
    return DuplicateIdError(node_id, "this batch", message)


def past_stale_notes(engine: Engine, ids: Sequence[object], write: Callable[[], _T]) -> _T:
    """Run ``write`` (an add of ``ids``: ``add``, ``add_many``, ``apply_changes``), again
    when it was refused for one of them noted gone by hand
    (:func:`md_cg.engine.dropped_file`) that the store does not bear out: the note was
    stale and is dropped (:func:`drop_stale_note`), and the id is free (or taken by a
    file another process added meanwhile: the add is refused as taken).

    Following the log notes an id gone by hand when another process's write of it (a
    ``put`` line) is the last line the follow reads and its file is gone. A ``forget``
    compacts, and a closing writer may: the compaction removes the log shard of the
    line that deleted the file, so a follow that read the ``put`` but not yet the
    ``del`` never reads it (the snapshot, which holds no such id, is loaded instead),
    and the note stayed. Every add of the id was then refused with "no node with id
    ... moved or deleted outside md-cg; run `mdcg sync`" although only md-cg had
    written it (review rF: 3 creates in 450, three memory-tool processes creating and
    deleting one file). A note the store bears out -- the snapshot or the log after it
    still places the id at a file that is gone -- is a person's change: the refusal
    stands."""
    wanted = {i for i in ids if isinstance(i, str)}
    while True:  # each pass: another process added and forgot the id since the last
        try:
            return write()
        except NodeNotFoundError as exc:
            if exc.hidden != "lost" or exc.node_id not in wanted or not drop_stale_note(engine, exc.node_id):
                raise


def drop_stale_note(engine: Engine, node_id: object) -> bool:
    """Drop this process's note of ``node_id`` gone by hand (:attr:`Engine.hand_after`)
    when a process opening the store now would not refuse the id as lost
    (:func:`free_as_stored`); whether it did. An id the index holds, or one noted
    otherwise, is left as it is."""
    if not isinstance(node_id, str) or node_id in engine.state.entries:
        return False
    noted = engine.hand_after.get(node_id)
    if noted is None or noted[0] != "gone" or not free_as_stored(engine, node_id):
        return False
    if engine.hand_after.get(node_id) is noted:
        del engine.hand_after[node_id]
    return True


def free_as_stored(engine: Engine, node_id: str) -> bool:
    """Whether a process opening the store now would not refuse ``node_id`` as lost: its
    index (the snapshot and the log after it) holds no entry of the id whose file is gone,
    and its follow of the log notes none gone by hand. The id is free, or a file md-cg
    wrote since holds it (another process added it meanwhile: the add is then refused as
    taken). Looked at with a read-only engine of its own (nothing written); again when a
    compaction replaced the snapshot during that open (a shard it had not read may have
    vanished); False when the store cannot be opened so, or has no snapshot (nothing
    compacted, which the stale note needs: the files alone cannot tell a person's removal
    from md-cg's). Costs an open (a read of the snapshot): only a refused add pays it --
    none without a snapshot (an open then rebuilt the store from its files only to answer
    False: 446 ms a refused add at 5k memories, attack a5)."""
    if snapshot.identity(engine.root_str) is None:
        return False
    for _ in range(3):
        try:
            fresh = Engine(
                engine.root,
                create=False,
                read_only=True,
                refresh_interval=None,
                lock_timeout=engine.lock_timeout,
            )
        except (MdcgError, OSError):
            return False
        try:
            if snapshot.identity(engine.root_str) != fresh.snap_ident:
                continue  # compacted during the open: look again
            return fresh.loaded_from == "snapshot" and not _held_gone(fresh, node_id)
        finally:
            fresh.close()
    return False


def _held_gone(fresh: Engine, node_id: str) -> bool:
    """:func:`free_as_stored`'s look: whether ``fresh``'s follow of the log noted
    ``node_id`` gone by hand, or ``fresh`` holds it at a file that is gone and the log
    says no more of it. Another process may have removed the file
    since the open read the log -- a ``forget`` logs its commit, removes the file and
    compacts --: while the log names the id past ``fresh``'s cursor (or a compaction
    replaced the snapshot), ``fresh`` follows it and looks again, for at most
    :data:`md_cg.engine.MOVE_WAIT`. Without it a forget between the open and the look
    made a stale note stand, and the add was refused (2 adds in one CI run of three
    processes adding and forgetting one id)."""
    root, deadline = fresh.root_str, time.monotonic() + engine_mod.MOVE_WAIT
    while node_id not in fresh.hand_after:
        held = fresh.state.entries.get(node_id)
        if held is None or fsops.exists(root, held.path):
            return False
        moved_on = snapshot.identity(root) != fresh.snap_ident or engine_mod.named_in_log(fresh, (node_id,))
        if not moved_on or time.monotonic() >= deadline:
            return True
        time.sleep(0.001)  # let the writer finish
        try:
            fresh.refresh()
        except (MdcgError, OSError):  # cannot be told: the refusal stands, as before
            return True
    return True


#: How many picks in a row :func:`resurface_readable` lets fail to read before it gives up.
RESURFACE_TRIES = 20


class ReadablePick(NamedTuple):
    """:func:`resurface_readable`'s answer: the day's pick and its node (both None when there is
    nothing readable to bring back), and the picks passed over, each with why its file could
    not be read (a :class:`MalformedNodeFileError` naming file and line, or the
    :class:`NodeNotFoundError` of a file that holds another memory now)."""

    picked: Resurfaced | None
    node: Node | None
    unreadable: list[tuple[str, MdcgError]]

    def broken(self) -> int:
        """How many of ``unreadable`` are files that cannot be read (:func:`file_unusable`),
        not memories whose files hold another one now."""
        return sum(file_unusable(exc) for _, exc in self.unreadable)


def resurface_readable(store: Any, today: date | None = None, *, record: bool = True) -> ReadablePick:
    """The memory to bring back on ``today`` whose file reads, its show recorded (``record``).

    ``MdCG.resurface`` picks from the index; a file a person broke (or replaced) since the
    index read it cannot be shown. Before session 41 `mdcg today` then failed with the
    file's error -- all day, since a day shows one memory -- and the MCP ``on_this_day``
    answered null all day. Now such a pick is passed over (not recorded as shown) and the
    next one is taken, at most :data:`RESURFACE_TRIES` of them. The picks passed over are
    kept in the show's record: a later call of the day, which shows the same memory again,
    reads each of their files again and lists those still broken (:func:`_still_broken`;
    before session 42 only the first call of the day told)."""
    unreadable: list[tuple[str, MdcgError]] = []
    for _ in range(RESURFACE_TRIES):
        skip = [node_id for node_id, _ in unreadable]
        picked = store.resurface(today, skip=skip)
        if picked is None:
            break
        try:
            node = store.get(picked.id)
        except (MalformedNodeFileError, NodeNotFoundError) as exc:
            unreadable.append((picked.id, exc))
            continue
        if not record:
            return ReadablePick(picked, node, _still_broken(store, today, picked.id, unreadable))
        shown = store.resurface(today, record=True, skip=skip)
        if shown is not None and shown.id == picked.id:
            return ReadablePick(shown, node, _still_broken(store, today, picked.id, unreadable))
        # the store changed between the two picks: pick again (a show recorded meanwhile
        # is the day's pick now, as every later call sees it)
    return ReadablePick(None, None, unreadable)


def _still_broken(
    store: Any, today: date | None, node_id: str, unreadable: list[tuple[str, MdcgError]]
) -> list[tuple[str, MdcgError]]:
    """``unreadable`` and, after it, the picks the day's show of ``node_id`` records as
    passed over (:func:`md_cg.access.passed_over_on`) whose files still cannot be read
    (:func:`file_unusable`). One read again fine, or forgotten since, is left."""
    known = {i for i, _ in unreadable}
    day = date.today() if today is None else today  # the local day, as resurface
    for passed in access.passed_over_on(store, day, node_id):
        if passed in known:
            continue
        try:
            store.get(passed)
        except (MalformedNodeFileError, NodeNotFoundError) as exc:
            if file_unusable(exc):
                unreadable.append((passed, exc))
    return unreadable


def file_unusable(exc: MdcgError) -> bool:
    """Whether a read's error says the memory's file cannot be read: a
    :class:`MalformedNodeFileError`, or the :class:`NodeNotFoundError` of a file a sync
    dropped as unusable or lost (``hidden`` ``"lost"``, or a hint naming the file as
    unusable: an unscoped handle's) -- not one of a memory forgotten or out of scope."""
    if isinstance(exc, NodeNotFoundError):
        return exc.hidden == "lost" or " is unusable: " in exc.hint
    return isinstance(exc, MalformedNodeFileError)
