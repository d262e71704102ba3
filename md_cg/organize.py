"""Organise: compare candidate memories with the store, then apply once, with receipts.

Two calls, both shaped as "better to do nothing" (docs/organize.md):

* :func:`dry_run` normalises up to :data:`MAX_CANDIDATES` candidates
  (:func:`md_cg.dedupe.normalize_candidate`; a bad one is skipped with its
  reason and the run is ``degraded``), gives each accepted one a verdict
  against the caller's visible, non-archived nodes that everyone who would see
  the candidate sees already: of the *same scope*, or shared (no agent or
  workspace) and no more sensitive (``exact`` / ``near`` / ``new``,
  :func:`md_cg.dedupe.verdict`), or ``repeat`` when an earlier candidate of the
  run would store its text (:func:`holds_text`), and appends
  one record to the audit log ``.mdcg/organize/``. It writes no memory. An
  infrastructure error is recorded as ``failed`` and re-raised.
* :func:`apply` replays the normalised snapshot of one dry run: ``save`` and
  ``discard`` name indexes the dry run accepted, ``archive`` names ids the
  report matched; a ``save`` of a text a memory holds by the dry run's ``exact``
  rule (one the same apply archives aside), or that an earlier save of the same
  apply stores, is skipped (:func:`_plan`).
  Under the audit log's lock it re-reads the log and checks,
  in the seed's order, that the run exists, is a dry run and not a receipt,
  did not fail and was never applied; then it appends an intent (the ids it
  is about to write), commits everything with one
  ``MdCG.apply_changes`` call (all or nothing), and appends the receipt.
  Every call leaves a receipt, failures included (``applied`` 0). Nothing
  here deletes a file: removal is archiving.

Imports :mod:`md_cg.dedupe`, :mod:`md_cg.index`, :mod:`md_cg.text`,
:mod:`md_cg.node`, :mod:`md_cg.nodefile`, :mod:`md_cg.logs` and :mod:`md_cg.errors`; the store is
passed in (duck-typed), so this module sits beside ``store.py``, not under it.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

import numpy as np
import orjson

from . import dedupe, merge, nodefile
from .errors import (
    InvalidArgumentError,
    InvalidNodeError,
    MalformedNodeFileError,
    NodeNotFoundError,
    OrganizeApplyError,
    left_out_unreadable,
)
from .index import layer_code, no_gc, title_of
from .logs import AppendLog, blanked
from .node import DEFAULT_SENSITIVITY, SENSITIVITY_LEVELS, Node, node_problems, unusable
from .recall import content_of
from .script import nfc, short_repr
from .text import query_terms

#: Candidates judged per dry run; the rest are reported as ``truncated``.
MAX_CANDIDATES = 50
#: Rows per candidate that the BM25 index pre-selects for the near score. A
#: near duplicate shares most of its words with the candidate, so it ranks at
#: the top of a BM25 query made of the candidate's own text.
NEAR_POOL = 20
#: Query terms of that BM25 query (the candidate's longest distinct terms).
POOL_TERMS = 8
#: The audit log: ``.mdcg/organize/`` (its lock ``.mdcg/organize.lock``).
AUDIT_LOG = "organize"
MODES: tuple[str, ...] = ("dryRun", "apply")
ACTIONS: tuple[str, ...] = ("save", "discard", "archive")
#: Statuses of a run record: ``ok``, ``degraded`` (some input was skipped),
#: ``noop`` (nothing to judge or nothing applied) and ``failed``.
STATUSES: tuple[str, ...] = ("ok", "degraded", "noop", "failed")
#: A dry run's verdicts: the store's (:data:`md_cg.dedupe.VERDICTS`), then ``repeat``
#: (an earlier candidate of the same run holds the text: :class:`OrganizeItem`).
VERDICTS: tuple[str, ...] = (*dedupe.VERDICTS, "repeat")


class OrganizeStore(Protocol):
    """What organise needs of a store (:class:`md_cg.store.MdCG` provides it)."""

    @property
    def lock_timeout(self) -> float: ...
    @property
    def scope(self) -> Any: ...
    def entries(self, layer: str | None = None) -> list[Any]: ...
    def __contains__(self, node_id: object) -> bool: ...
    def get(self, node_id: str) -> Node: ...
    def superseded_by(self, node_id: str) -> str | None: ...
    def log(self, name: str) -> AppendLog: ...
    def apply_changes(self, *, add: Sequence[Node] = (), archive: Sequence[str] = ()) -> None: ...
    def sync(self) -> Any: ...
    def refresh(self) -> list[str]: ...
    # the write path's preparation of new nodes (scope, retention decision): :func:`as_written`
    def _prepare(self, batch: list[Node], now: float) -> Any: ...


# -- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """The stored node a candidate matched; ``score`` is 1.0 for ``exact``."""

    id: str
    title: str
    score: float


@dataclass(frozen=True)
class OrganizeItem:
    """The verdict on one accepted candidate (``index`` is its place in the input).

    ``verdict`` is one of :data:`VERDICTS`: a store verdict (:data:`md_cg.dedupe.VERDICTS`,
    with its ``match``) or ``repeat``: an earlier candidate of this run, ``repeats`` (its
    index), would store the very text (:func:`holds_text`) where everyone who would see
    this one sees it; ``match`` is None then, and ``to_dict`` has ``repeats`` only then. A
    ``repeat`` in other words (the earlier candidate's text would make this one ``near``,
    were it stored: :func:`_near_repeat`) has its near ``score`` too."""

    index: int
    layer: str
    title: str
    verdict: str
    match: Match | None
    repeats: int | None = None
    #: a repeat in other words: the near score against the candidate it repeats (else None)
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        m = self.match
        match = None if m is None else {"id": m.id, "title": m.title, "score": round(m.score, 4)}
        out: dict[str, Any] = {
            "index": self.index,
            "layer": self.layer,
            "title": self.title,
            "verdict": self.verdict,
            "match": match,
        }
        if self.repeats is not None:
            out["repeats"] = self.repeats
            if self.score is not None:
                out["score"] = round(self.score, 4)
        return out


@dataclass(frozen=True)
class SkippedInput:
    """A candidate (dry run) or decision (apply) that was not taken, and why.

    ``index`` is its place in the input list; ``field`` the offending key,
    ``id`` the node id an archive decision named."""

    index: int
    reason: str
    field: str | None = None
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "reason": self.reason}
        if self.field is not None:
            out["field"] = self.field
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True)
class OrganizeResult:
    """What one organise call did; also the shape of its audit record.

    A dry run fills ``items`` (one per accepted candidate) and ``counts``
    (``total exact near new skipped truncated``). An apply fills
    ``dry_run_id``, ``saved_ids``, ``archived_ids``, ``discarded`` (indexes)
    and ``applied`` (saved + archived: what landed), with ``counts`` of each.
    ``skipped`` lists input that was not taken; ``degraded`` is True then."""

    run_id: str
    mode: str
    status: str
    created_at: str
    counts: Mapping[str, int]
    items: tuple[OrganizeItem, ...] = ()
    skipped: tuple[SkippedInput, ...] = ()
    dry_run_id: str | None = None
    applied: int = 0
    saved_ids: tuple[str, ...] = ()
    archived_ids: tuple[str, ...] = ()
    discarded: tuple[int, ...] = ()
    error: str | None = None
    #: apply: saves made beside a memory or a candidate the dry run judged them near
    #: (:func:`_near_notes`); in ``to_dict`` only when there is one
    notes: tuple[str, ...] = ()

    @property
    def degraded(self) -> bool:
        return bool(self.skipped)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "mode": self.mode,
            "status": self.status,
            "created_at": self.created_at,
            "counts": dict(self.counts),
            "skipped": [s.to_dict() for s in self.skipped],
            "degraded": self.degraded,
        }
        if self.mode == "dryRun":
            out["items"] = [i.to_dict() for i in self.items]
        else:
            out.update(
                dry_run_id=self.dry_run_id,
                applied=self.applied,
                saved_ids=list(self.saved_ids),
                archived_ids=list(self.archived_ids),
                discarded=list(self.discarded),
            )
        if self.notes:
            out["notes"] = list(self.notes)
        if self.error is not None:
            out["error"] = self.error
        return out


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


# -- the caller's scope ------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """The trusted caller's scope as organise uses it (from ``MdCG(scope=...)``);
    ``scoped`` is False for a handle opened without one (it sees every scope)."""

    agent: str | None = None
    workspace: str | None = None
    max_sensitivity: str = SENSITIVITY_LEVELS[-1]
    scoped: bool = False

    @classmethod
    def of(cls, scope: object) -> Caller:
        """From a :class:`md_cg.visibility.Scope` (or None: an unscoped caller)."""
        if scope is None:
            return cls()
        return cls(
            getattr(scope, "agent", None),
            getattr(scope, "workspace", None),
            getattr(scope, "max_sensitivity", DEFAULT_SENSITIVITY),
            True,
        )

    def to_dict(self) -> dict[str, Any]:
        if not self.scoped:
            return {"scoped": False}
        return {"agent": self.agent, "workspace": self.workspace, "max_sensitivity": self.max_sensitivity}


def _scope_key(sensitivity: object, agent: object, workspace: object) -> tuple[object, object, object]:
    # An absent sensitivity is the default one: a node written without it and
    # a candidate that says "normal" are in the same scope.
    return (sensitivity or DEFAULT_SENSITIVITY, agent or None, workspace or None)


def _node_scope(node: Node) -> tuple[object, object, object]:
    return _scope_key(node.sensitivity, node.agent_scope, node.workspace_scope)


def _covers(node: tuple[object, object, object], candidate: tuple[object, object, object]) -> bool:
    """Whether everyone who would see the candidate sees the node already: the node's
    agent and workspace are the candidate's or none (a shared memory), and it is no
    more sensitive. Only then is a match no leak and a second copy no use."""
    (n_level, n_agent, n_ws), (c_level, c_agent, c_ws) = node, candidate
    if n_agent not in (None, c_agent) or n_ws not in (None, c_ws):
        return False
    rank = {name: i for i, name in enumerate(SENSITIVITY_LEVELS)}
    return rank.get(str(n_level), len(rank)) <= rank.get(str(c_level), -1)


def _candidate_scope(c: dedupe.NormalizedCandidate) -> tuple[object, object, object]:
    return _scope_key(c.sensitivity, c.agent_scope, c.workspace_scope)


def _check_caller_scope(c: dedupe.NormalizedCandidate, caller: Caller) -> dedupe.Skip | None:
    """Writes land in the caller's scope: a candidate naming another scope, or
    more sensitive than the caller may read, is skipped (it could never be
    read back through this handle)."""
    if not caller.scoped:
        return None
    for key, own in (("agent_scope", caller.agent), ("workspace_scope", caller.workspace)):
        value = getattr(c, key)
        if value != own:
            return dedupe.Skip(f"{key} {value!r} is outside the caller's scope ({own!r})", key)
    level = c.sensitivity or DEFAULT_SENSITIVITY
    if SENSITIVITY_LEVELS.index(level) > SENSITIVITY_LEVELS.index(caller.max_sensitivity):
        return dedupe.Skip(
            f"sensitivity {level!r} is above the caller's maximum ({caller.max_sensitivity!r})",
            "sensitivity",
        )
    return None


# -- matching against the store ----------------------------------------------------------------


def node_body(title: str, content: str) -> str:
    """The body organise writes for a saved candidate: a title heading, then the content."""
    return f"# {title}\n\n{content}\n"


_Accepted = tuple[int, dedupe.NormalizedCandidate]


class _Matcher:
    """Verdicts for one dry run: reads each stored node at most once.

    Visibility comes from the store: every candidate row is read with
    ``store.get``, which raises NodeNotFoundError for a node the caller may
    not see (another scope, archived, expired), so such a node is dropped
    when it is read and never reaches a verdict; so is a superseded one
    (:func:`current`): search no longer serves it, so it duplicates nothing. The
    text index's pool leaves both out before it is cut (:func:`_visible_hits`). A node
    whose file a hand edit broke since the index read it is dropped too, and warned of
    (as the next sync drops it; before session 38 it failed the whole dry run)."""

    #: title -> title key, kept across runs (titles repeat; keys cost microseconds).
    _keys: ClassVar[dict[str, str]] = {}

    def __init__(self, store: OrganizeStore, accepted: Sequence[_Accepted]) -> None:
        self.store = store
        self.nodes: dict[str, Node | None] = {}
        #: matched id -> :func:`version` of the node as judged (apply checks it)
        self.versions: dict[str, str] = {}
        self.text_index = _text_index(store)
        self.usable = _current_test(store)
        wanted: dict[str, list[str]] = {dedupe.title_key(c.title): [] for _i, c in accepted}
        keys = self._keys
        if len(keys) > 1_000_000:
            keys.clear()
        layers = frozenset(dedupe.CANDIDATE_LAYERS)
        with no_gc():  # one pass over every entry: the collector would rescan them
            for node_id, layer, title in zip(*_all_titles(store), strict=True):
                key = keys.get(title)
                if key is None:
                    key = keys[title] = dedupe.title_key(title)
                if key in wanted and layer in layers:
                    wanted[key].append(node_id)
        self.same_title = wanted

    def node(self, node_id: str) -> Node | None:
        if node_id not in self.nodes:
            try:
                node: Node | None = self.store.get(node_id)
                if node is not None and not current(self.store, node):
                    node = None
            except NodeNotFoundError:
                node = None  # gone since the listing, or not visible
            except MalformedNodeFileError as exc:  # broken by hand: as after a sync, no memory
                left_out_unreadable("organize", node_id, exc, stacklevel=2)
                node = None
            self.nodes[node_id] = node
        return self.nodes[node_id]

    def rows(self, ids: Iterable[str], scope: tuple[object, object, object]) -> list[tuple[str, ...]]:
        # a memory of the candidate's own scope is the better match
        own: list[tuple[str, ...]] = []
        shared: list[tuple[str, ...]] = []
        for node_id in ids:
            node = self.node(node_id)
            if node is not None and _covers(_node_scope(node), scope):
                row = (node_id, title_of(node.body), content_of(node.body), node.body)
                (own if _node_scope(node) == scope else shared).append(row)
        return own + shared

    def near_pool(self, c: dedupe.NormalizedCandidate, skip: Collection[str]) -> list[str]:
        if self.text_index is None:
            return []
        terms = [(t, 1.0) for t in _rare_terms(self.text_index, query_terms(c.text), POOL_TERMS)]
        scope = self.text_index.scope(layers=[layer_code(layer) for layer in dedupe.CANDIDATE_LAYERS])
        pool: list[str] = []
        # Ask for more than the pool: hits the caller may not see are dropped when read.
        # A lookup of the candidate's own rarest terms, not a question: no feedback.
        hits = _visible_hits(self.usable, self.text_index, terms, scope, NEAR_POOL + len(skip))
        for node_id in hits:
            if node_id not in skip and self.node(node_id) is not None:
                pool.append(node_id)
                if len(pool) == NEAR_POOL:
                    break
        return pool

    def judge(self, index: int, c: dedupe.NormalizedCandidate) -> OrganizeItem:
        scope = _candidate_scope(c)
        same_title = sorted(self.same_title.get(dedupe.title_key(c.title), ()))
        rows = self.rows(same_title, scope) + self.rows(self.near_pool(c, same_title), scope)
        v = dedupe.verdict(c, rows)
        match = None
        if v.match_id is not None:
            title = next(row[1] for row in rows if row[0] == v.match_id)
            match = Match(v.match_id, title, v.score)
            node = self.nodes[v.match_id]
            assert node is not None  # a row is a node read
            self.versions[v.match_id] = version(node)
        return OrganizeItem(index, c.layer, c.title, v.kind, match)


def _judge_all(matcher: _Matcher, accepted: Sequence[_Accepted]) -> list[OrganizeItem]:
    """Each candidate's verdict against the store (:meth:`_Matcher.judge`); one that is
    not ``exact`` but whose text an earlier candidate of the run would store, where
    everyone who would see it sees that one, is a ``repeat`` of the earliest such (apply
    skips a second save of one text: :func:`_planned_copy`)."""
    items: list[OrganizeItem] = []
    earlier: list[tuple[int, str, tuple[object, object, object], tuple[str, str]]] = []
    for index, c in accepted:
        item = matcher.judge(index, c)
        scope = _candidate_scope(c)
        body = node_body(c.title, c.content)
        content, whole = _letters(c.content), _letters(body)
        if item.verdict != "exact":
            first = next(
                (
                    k
                    for k, held, held_scope, keys in earlier
                    if _repeats(c, (content, whole), keys, held) and _covers(held_scope, scope)
                ),
                None,
            )
            if first is not None:
                item = OrganizeItem(index, c.layer, c.title, "repeat", None, first)
            elif item.verdict == "new":
                item = _near_repeat(item, c, earlier) or item
        earlier.append((index, body, scope, (_letters(content_of(body)), whole)))
        items.append(item)
    return items


def _near_repeat(
    item: OrganizeItem,
    c: dedupe.NormalizedCandidate,
    earlier: Sequence[tuple[int, str, tuple[object, object, object], tuple[str, str]]],
) -> OrganizeItem | None:
    """A ``new`` candidate as a ``repeat`` of the earlier candidate of the run whose text,
    were it stored, would make it ``near`` (:func:`md_cg.dedupe.verdict` against that
    candidate's body, where everyone who would see this one sees it), with the score; None
    when there is none. Before session 42 one content under two titles that only repeat
    it ("Coffee" / "Drinks coffee") was ``new`` twice, and the second is ``near`` the first
    once that is stored."""
    scope = _candidate_scope(c)
    rows = [
        (str(k), title_of(body), content_of(body), body)
        for k, body, held_scope, _keys in earlier
        if _covers(held_scope, scope)
    ]
    v = dedupe.verdict(c, rows)
    if v.kind not in ("exact", "near") or v.match_id is None:
        return None
    return OrganizeItem(item.index, item.layer, item.title, "repeat", None, int(v.match_id), v.score)


def _repeats(
    candidate: dedupe.NormalizedCandidate, letters: tuple[str, str], keys: tuple[str, str], body: str
) -> bool:
    """Whether a save planned earlier in the run (``body``, its :func:`_letters` ``keys``)
    holds the text ``candidate`` would store (``letters``: its content's and whole
    body's): the dry run's ``repeat`` (:func:`_judge_all`) and apply's one save of one
    text (:func:`_planned_copy`), with :func:`_covers` of their scopes. The letters are
    compared first: ``holds_text`` costs ~35 µs."""
    content, whole = letters
    return (content in keys or whole == keys[1]) and holds_text(candidate, body)


_NOT_LETTERS = re.compile(r"[\W_]+")  # what _letters drops


def _letters(text: str) -> str:
    """The letters and digits of ``text``: equal for two texts :func:`holds_text` calls
    the same (it drops only marks and whitespace), so unequal ones need no closer look.
    ``[\\W_]`` is every character ``str.isalnum`` refuses (checked over all code points); a
    character at a time in Python took 2 s for a 4 MiB body, read five times an organize.
    In NFC: a combining mark is no letter, so ``cafe\u0301`` (NFD, as macOS writes it) kept
    ``cafe`` and two candidates of one text in two Unicode forms were no ``repeat``
    (session 42)."""
    return _NOT_LETTERS.sub("", nfc(text))


def holds_text(candidate: dedupe.NormalizedCandidate, body: str) -> bool:
    """Whether a memory of ``body`` holds the text ``candidate`` would store, as the dry
    run's ``exact`` says (:func:`md_cg.dedupe.same_text` on the row the dry run makes of
    a node: title, content, whole body), or is that very body (:func:`same_body`)."""
    if same_body(body, node_body(candidate.title, candidate.content)):
        return True
    return dedupe.same_text(candidate, ("", title_of(body), content_of(body), body))


def version(node: Node) -> str:
    """What a match was judged on, as a short hash: the body and the scope keys. A dry
    run records it for each match; apply archives a match only while it is the same."""
    judged = [node.body, node.sensitivity, node.agent_scope, node.workspace_scope]
    return hashlib.sha256(orjson.dumps(judged)).hexdigest()[:32]


def _rare_terms(text_index: Any, terms: Sequence[str], n: int) -> list[str]:
    """The ``n`` distinct ``terms`` in the fewest documents: a near duplicate
    shares nearly every word, so its rarest ones find it, and a short query
    keeps BM25 cheap. Terms the index does not know are left out."""
    vocab = text_index._vocab
    known = [(t, tid) for t in dict.fromkeys(terms) if (tid := dict.get(vocab, t)) is not None]
    if len(known) <= n:
        return [t for t, _ in known]
    df = _doc_freqs(text_index, [tid for _t, tid in known])
    order = sorted(range(len(known)), key=lambda i: (df[i], i))
    return [known[i][0] for i in order[:n]]


def _doc_freqs(text_index: Any, tids: list[int]) -> np.ndarray:
    """Postings per term id, read off the CSR pointers of each segment (no
    posting is copied). Reaches into the index: a ``TextIndex.doc_freqs``
    would be the public way (asked for in the hand-over report)."""
    q = np.asarray(tids, dtype=np.int32)
    df = np.zeros(len(q), dtype=np.int64)
    for seg in text_index._postings.segments:
        if len(seg.terms) == 0:
            continue
        pos = np.searchsorted(seg.terms, q)
        pos[pos >= len(seg.terms)] = 0
        hit = np.flatnonzero(seg.terms[pos] == q)
        df[hit] += seg.ptr[pos[hit] + 1] - seg.ptr[pos[hit]]
    return df


def _all_titles(store: Any) -> tuple[list[str], list[str], list[str]]:
    """The ids, layers and titles of every index entry, unsorted (sorting 100k ids costs more
    than the scan), building no entry when the index's snapshot can say
    (:meth:`md_cg.index.Entries.titled`). It may include nodes the caller cannot see: a
    match is only used after ``store.get`` read it, and ``get`` treats such nodes as absent."""
    engine = getattr(store, "_engine", None)
    if engine is None:
        entries = store.entries()
        return [e.id for e in entries], [e.layer for e in entries], [e.title for e in entries]
    with engine.lock:
        engine.fresh()
        return engine.state.entries.titled()


def _text_index(store: object) -> Any:
    """The store's BM25 index, or None for a store without one (tests' fakes)."""
    engine = getattr(store, "_engine", None)
    if engine is None:
        return None
    with engine.lock:
        engine.fresh()
        engine.state.flush_text()  # nodes added since the last search are buffered
        return engine.state.text


def _visible_hits(
    usable: Callable[[str], bool], text_index: Any, terms: list[tuple[str, float]], scope: Any, want: int
) -> list[str]:
    """The best ``want`` hits that are ``usable`` (:func:`_current_test`: the caller sees
    them and they are current), in rank order. The index ranks every scope's nodes,
    superseded ones too, so its top k is widened (x4, up to 64 x ``want``) until enough
    of it is usable: another scope's near copies, or superseded copies of the same
    text, cannot crowd the caller's current one out."""
    k = want
    while True:
        hits = text_index.match(terms, scope, k=k, feedback=False)
        seen = [node_id for node_id, _score in hits if usable(node_id)]
        if len(seen) >= want or len(hits) < k or k >= 64 * want:
            return seen[:want]
        k *= 4


#: Hits of the text index read to confirm an identical body (:func:`identical_ids`).
IDENTICAL_POOL = 10


def same_body(a: str, b: str) -> bool:
    """True when two bodies are the same text: line endings, trailing spaces on each
    line, blank lines at either end and Unicode form (:func:`md_cg.script.nfc`: ``é``
    composed or decomposed, as macOS writes it; session 41) aside (what an editor or a
    copy changes)."""

    def plain(text: str) -> list[str]:
        return [line.rstrip() for line in nfc(text).strip().splitlines()]

    return plain(a) == plain(b)


#: Files :func:`identical_ids` reads at most for a body without an index term.
TITLE_POOL = 200


def current(store: OrganizeStore, node: Node) -> bool:
    """Whether ``node``, read with ``store.get`` (so in the caller's scope, not archived
    and not expired), is also not superseded: its ``valid_until`` has not passed and no
    live node the caller sees supersedes it for every reader of it
    (:func:`md_cg.visibility.dedup_current`: a narrower successor, an agent's private
    correction of a shared fact, leaves it current for the others)."""
    if node.valid_until is not None and node.valid_until <= time.time():
        return False
    return _current_test(store)(node.id)


def _current_test(store: OrganizeStore) -> Callable[[str], bool]:
    """id -> whether the caller sees the node and it is current (:func:`current`), from
    the index alone (the store's ``_dedup_current``); a store without one (tests'
    fakes): seen and not superseded (``superseded_by``)."""
    test = getattr(store, "_dedup_current", None)
    if callable(test):
        return test

    def seen_current(node_id: str) -> bool:
        return node_id in store and store.superseded_by(node_id) is None

    return seen_current


def identical_ids(store: OrganizeStore, body: str, layer: str | None = None) -> list[str]:
    """Ids of the current nodes the caller sees (of ``layer`` when given) whose body is
    ``body`` (:func:`same_body`), best BM25 match first. A superseded node
    (:func:`current`) is left out: the same text remembered again after it was
    superseded (the user went back to it) is a fact to store anew, not a duplicate.

    The body's rarest terms ask the text index (an identical node holds them
    all); a body of stop words only, which the index does not hold, is looked
    for by its title among the entries. At most :data:`IDENTICAL_POOL` hits are
    read to compare, with ``store.get``, so a node the caller may not see is
    never named; hidden and superseded hits are left out before the pool is cut
    (ten superseded copies of the text do not crowd its current one out). A hit whose
    file a hand edit broke is no memory, and is warned of (before session 38 it failed
    ``add_unique``: ``mdcg add`` of a text near it)."""
    found = []
    for node in _pool(store, body, layer):
        if same_body(node.body, body):
            found.append(node.id)
    return found


def _pool(
    store: OrganizeStore, body: str, layer: str | None = None, *, by_key: bool = False
) -> Iterable[Node]:
    """The current nodes the caller sees (of ``layer`` when given) that may hold ``body``,
    read with ``store.get``, best BM25 match first (:func:`identical_ids`). For a body of
    stop words only, the entries titled as it is (``by_key``: of its :func:`title_key`)."""
    text_index = _text_index(store)
    if text_index is None:
        return
    terms = [(t, 1.0) for t in _rare_terms(text_index, query_terms(body), POOL_TERMS)]
    usable = _current_test(store)
    if terms:
        scope = text_index.scope(layers=None if layer is None else [layer_code(layer)])
        candidates = _visible_hits(usable, text_index, terms, scope, IDENTICAL_POOL)
    else:  # stop words only ("it is what it is"): nothing indexed; the titles tell
        title = title_of(body)  # a title shared by many ("it is" ...) is read further: no rank to trust
        key = dedupe.title_key(title) if by_key else None
        titled = (
            e.id
            for e in store.entries(layer)
            if (e.title == title or (key is not None and dedupe.title_key(e.title) == key)) and usable(e.id)
        )
        candidates = list(itertools.islice(titled, TITLE_POOL))
    for node_id in candidates:
        try:
            node = store.get(node_id)
        except NodeNotFoundError:
            continue  # gone since, or not the caller's to see
        except MalformedNodeFileError as exc:  # broken by hand: as after a sync, no memory
            left_out_unreadable("the check for an identical memory", node_id, exc, stacklevel=4)
            continue
        if current(store, node):
            yield node


# -- dry run -----------------------------------------------------------------------------------


def _snapshot_hash(snapshot: list[dict[str, Any]]) -> str:
    return hashlib.sha256(orjson.dumps(snapshot, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _normalise_all(
    raws: Sequence[object], caller: Caller, store: OrganizeStore
) -> tuple[list[_Accepted], list[SkippedInput]]:
    defaults = {"agent_scope": caller.agent, "workspace_scope": caller.workspace}
    accepted: list[_Accepted] = []
    skipped: list[SkippedInput] = []
    for index, raw in enumerate(raws):
        c = dedupe.normalize_candidate(raw, defaults)
        if not isinstance(c, dedupe.Skip):
            c = _check_caller_scope(c, caller) or _unsaveable(_ToSave(store, c)) or c
        if isinstance(c, dedupe.Skip):
            skipped.append(SkippedInput(index, f"candidate {index}: {c.reason}", c.field))
        else:
            accepted.append((index, c))
    return accepted, skipped


def write_problem(node: Node, store: OrganizeStore, now: float) -> InvalidNodeError | None:
    """What ``add`` would refuse in a memory organise saves, or None, checked as ``add``
    checks, in its order: the node's rules (:func:`md_cg.node.node_problems`: a body over
    the 4 MiB file limit ...), a body :func:`md_cg.merge.text_problem` refuses (a NUL
    character, git conflict markers ...), what :func:`md_cg.node.unusable` refuses (a
    control-character tag ...), then the file as ``store`` would write it at ``now``
    (:func:`as_written`, then :func:`md_cg.nodefile.dump_bytes`: over the file or
    frontmatter limit once the frontmatter -- a temporary memory's tier, expiry and
    reason among it -- is added or UTF-8 encoded, a lone surrogate). Without the first
    and the last, a dry run called a 5 MB candidate ``new`` and its apply failed as a
    whole; without the retention decision, so did one ~270 bytes under the limit that
    the decision made temporary. Raises what the decision raises for the whole store (a
    broken ``.mdcg/retention.json``: every such write fails until it is fixed)."""
    problems = node_problems(node)
    if problems:
        return problems[0]
    problem = merge.text_problem(node) or unusable(node)
    if problem is not None:
        return problem
    try:
        nodefile.dump_bytes(as_written(store, node, now))
    except InvalidNodeError as exc:
        return exc
    return None


def as_written(store: OrganizeStore, node: Node, now: float) -> Node:
    """A copy of the new ``node`` as ``store.apply_changes`` would write it at ``now``: put
    through the write path's own preparation (the caller's scope, the retention decision
    :meth:`md_cg.retention.Retention.decide` makes for ``add``). ``node`` stays undecided:
    the write decides it itself (deciding twice would log ``explicit_tier`` as the rule).
    A decision made at another instant differs only in the expiry, an instant written
    at a fixed width (:func:`md_cg.node.format_instant`): the file has the same size."""
    written = node.copy()
    store._prepare([written], now)
    return written


@dataclass(frozen=True)
class _ToSave:
    """A candidate of a dry run and the store that would write it (:func:`_unsaveable`)."""

    store: OrganizeStore
    candidate: dedupe.NormalizedCandidate


def _unsaveable(to_save: _ToSave) -> dedupe.Skip | None:
    """The skip of a candidate whose memory ``add`` would refuse (:func:`write_problem`):
    the dry run leaves it out, with add's reason, so apply never writes it. The store's
    own settings failing the decision (a broken ``.mdcg/retention.json``) are no fault of
    the candidate: it is judged, and apply fails as a whole naming the file, as any
    write that decides retention does."""
    now = time.time()
    node = _new_node(to_save.candidate.to_dict(), now)
    try:
        problem = write_problem(node, to_save.store, now)
    except InvalidArgumentError:
        return None
    if problem is None:
        return None
    return dedupe.Skip(str(problem).removeprefix(f"node {node.id!r}: "), problem.field)


def dry_run(store: OrganizeStore, candidates: object, *, scope: object = None) -> OrganizeResult:
    """Compare ``candidates`` with the store; write only the audit record.

    ``candidates`` is a list of objects (see :func:`md_cg.dedupe.normalize_candidate`);
    ``scope`` the caller's :class:`md_cg.visibility.Scope`. Raises
    :class:`InvalidArgumentError` when ``candidates`` is not a list (nothing
    is recorded: there is no run), re-raises an infrastructure error after
    recording the run as ``failed``.
    """
    if not isinstance(candidates, (list, tuple)):
        raise InvalidArgumentError(
            f"candidates must be a list of objects, got {type(candidates).__name__}", name="candidates"
        )
    caller = Caller.of(scope)
    run_id = f"org_{uuid.uuid4().hex}"
    created_at = _now_iso()
    bounded = list(candidates[:MAX_CANDIDATES])
    accepted, skipped = _normalise_all(bounded, caller, store)
    snapshot = [{"index": i, **c.to_dict()} for i, c in accepted]
    log = store.log(AUDIT_LOG)

    def record(status: str, items: list[OrganizeItem], counts: dict[str, int], error: str | None) -> None:
        log.append(
            [
                {
                    "kind": "dry_run",
                    "run_id": run_id,
                    "created_at": created_at,
                    "status": status,
                    "error": error,
                    "caller": caller.to_dict(),
                    "snapshot": snapshot,
                    "snapshot_hash": _snapshot_hash(snapshot),
                    "items": [i.to_dict() for i in items],
                    "matched": versions,
                    "skipped": [s.to_dict() for s in skipped],
                    "counts": counts,
                }
            ],
            durable=True,
        )

    items: list[OrganizeItem] = []
    versions: dict[str, str] = {}  # matched id -> version(): an archive applies while it holds
    truncated = len(candidates) - len(bounded)
    try:
        matcher = _Matcher(store, accepted)
        items = _judge_all(matcher, accepted)
        versions = dict(sorted(matcher.versions.items()))
    except Exception as exc:
        # Recorded before re-raising: a failed run without a record could not
        # be told apart from one never made, and "no duplicates" would be a lie.
        record("failed", items, {"skipped": len(skipped), "truncated": truncated}, f"{exc!r}")
        raise
    counts = {
        "total": len(items),
        **{kind: sum(i.verdict == kind for i in items) for kind in VERDICTS},
        "skipped": len(skipped),
        "truncated": truncated,
    }
    status = "degraded" if skipped else ("ok" if items else "noop")
    record(status, items, counts, None)
    return OrganizeResult(run_id, "dryRun", status, created_at, counts, tuple(items), tuple(skipped))


# -- apply -------------------------------------------------------------------------------------


@dataclass
class _Plan:
    nodes: list[Node] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)
    #: the candidate index each saved id was made from (forget blanks that candidate)
    saved_from: list[int] = field(default_factory=list)
    #: the decision each saved id was made by
    saved_by: list[int] = field(default_factory=list)
    #: :func:`_letters` of each saved node's content and body (:func:`_planned_copy`)
    letters: list[tuple[str, str]] = field(default_factory=list)
    archive: list[str] = field(default_factory=list)
    discarded: list[int] = field(default_factory=list)
    skipped: list[SkippedInput] = field(default_factory=list)
    #: saves made beside what the dry run judged them near (:func:`_near_notes`)
    notes: list[str] = field(default_factory=list)


def _find_report(records: list[dict[str, Any]], run_id: str, caller: Caller) -> dict[str, Any]:
    """The seed's checks, in order; raises :class:`OrganizeApplyError` naming the run."""
    report = next((r for r in records if r.get("kind") == "dry_run" and r.get("run_id") == run_id), None)
    # A run made by another caller is absent for this one (no existence leak).
    if report is not None and report.get("caller") != caller.to_dict():
        report = None
    if report is None:
        if any(r.get("kind") == "apply" and r.get("run_id") == run_id for r in records):
            raise OrganizeApplyError(run_id, f"{run_id!r} is an apply receipt, not a dry run")
        raise OrganizeApplyError(run_id, f"unknown organize run {run_id!r}")
    if report.get("status") == "failed":
        raise OrganizeApplyError(run_id, f"dry run {run_id!r} failed; run a new dry run before applying")
    damaged = _record_problem(report)
    if damaged is not None:
        why = f"the dry run's record in .mdcg/organize/ is damaged: {damaged}; run a new dry run"
        raise OrganizeApplyError(run_id, why)
    return report


def _check_not_applied(records: list[dict[str, Any]], run_id: str, store: OrganizeStore) -> None:
    mine = [r for r in records if r.get("dry_run_id") == run_id]
    receipts = {r.get("run_id") for r in mine if r.get("kind") == "apply"}
    if any(r.get("kind") == "apply_intent" and r.get("run_id") not in receipts for r in mine):
        # An apply died after its intent: its commit may be logged and not yet rolled
        # forward (it lands at the next recovery). Finish it first, then look.
        store.sync()
    for r in mine:
        # an apply whose every decision was skipped (or that had none) decided nothing: the run stays open
        done = r.get("kind") == "apply" and r.get("status") != "failed" and _decided_any(r)
        # An intent whose commit landed: a process died before writing its receipt.
        if done or (r.get("kind") == "apply_intent" and _landed(store, r)):
            when, by = r.get("created_at"), r.get("run_id")
            raise OrganizeApplyError(
                run_id,
                f"dry run {run_id!r} was already applied at {when} by {by}; a dry run applies once: "
                "run a new dry run (mode dryRun) with the candidates still to decide and apply that",
            )


def _decided_any(receipt: Mapping[str, Any]) -> bool:
    """Whether an apply receipt took at least one of its decisions (saved, discarded or
    archived): one that was not skipped. A receipt of another shape counts as deciding."""
    decisions, skipped = receipt.get("decisions"), receipt.get("skipped")
    if not isinstance(decisions, list) or not isinstance(skipped, list):
        return True
    passed = {s.get("index") for s in skipped if isinstance(s, dict)}
    return any(i not in passed for i in range(len(decisions)))


def _landed(store: OrganizeStore, intent: Mapping[str, Any]) -> bool:
    """Did the commit an intent announced happen? apply_changes is all or
    nothing, so one saved node present (or, for an archive-only plan, every
    id archived) says it did."""
    saved = intent.get("saved") or []
    if saved:
        return any(node_id in store for node_id in saved)
    archive = intent.get("archive") or []
    if archive:
        visible = {e.id for e in store.entries()}
        return not any(node_id in visible for node_id in archive)
    return False


def _decision_index(
    decision: Mapping[str, Any], i: int, by_index: Mapping[int, dict[str, Any]], taken: set[int]
) -> int | SkippedInput:
    index = decision.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        return SkippedInput(i, f"decision {i}: index must be an integer, got {index!r}", "index")
    if index not in by_index:
        return SkippedInput(i, f"decision {i}: candidate {index} was not accepted by this dry run", "index")
    if index in taken:
        return SkippedInput(i, f"decision {i}: candidate {index} was already decided", "index")
    return index


class _Judged:
    """The matches of a dry run as apply checks them: the ids matched, and what each was
    when judged (``versions``: :func:`version`; None for a record of an earlier version,
    which kept none: not checked)."""

    def __init__(
        self, store: OrganizeStore, matched: set[str], versions: object, items: Iterable[Mapping[str, Any]]
    ) -> None:
        self.store = store
        self.matched = matched
        self.versions = versions if isinstance(versions, dict) else None
        self._changed: dict[str, bool] = {}
        self.visible = {e.id for e in store.entries()}
        #: candidate index -> the node the dry run called its ``exact`` match
        self.exact: dict[int, str] = {}
        for item in items:
            match, index = item.get("match") or {}, item.get("index")
            if item.get("verdict") == "exact" and type(index) is int and isinstance(match.get("id"), str):
                self.exact[index] = match["id"]

    def changed(self, node_id: str) -> bool:
        """Whether the node is no longer what the dry run judged (its body or scope); each
        node read once (the archive decisions are planned twice: ``_archiving``, then the plan)."""
        if self.versions is None:
            return False
        if node_id not in self._changed:
            try:
                self._changed[node_id] = version(self.store.get(node_id)) != self.versions.get(node_id)
            except NodeNotFoundError:
                self._changed[node_id] = True
        return self._changed[node_id]


def _plan_archive(decision: Mapping[str, Any], i: int, judged: _Judged, plan: _Plan) -> None:
    node_id = decision.get("id")
    if not isinstance(node_id, str) or not node_id:
        plan.skipped.append(SkippedInput(i, f"decision {i}: archive needs a node id, got {node_id!r}", "id"))
        return
    if node_id not in judged.matched:
        problem = "was not flagged as a match by this dry run"
    elif node_id in plan.archive:
        problem = "was already decided"
    elif node_id not in judged.visible:
        problem = "is unknown, archived or out of scope"
    elif judged.changed(node_id):
        problem = "changed since the dry run (its text or scope); run a new dry run"
    else:
        plan.archive.append(node_id)
        return
    plan.skipped.append(SkippedInput(i, f"decision {i}: node {node_id!r} {problem}", "id", node_id))


def _new_node(entry: Mapping[str, Any], now: float) -> Node:
    return Node(
        id=f"n_{uuid.uuid4().hex[:12]}",
        layer=entry["layer"],
        body=node_body(entry["title"], entry["content"]),
        importance=entry.get("importance"),
        tags=list(entry.get("tags", [])),
        temporal=entry.get("temporal") or None,
        sensitivity=entry.get("sensitivity"),
        agent_scope=entry.get("agent_scope"),
        workspace_scope=entry.get("workspace_scope"),
        created_at=now,
        updated_at=now,
    )


def _record_problem(report: Mapping[str, Any]) -> str | None:
    """What is wrong with a dry run's record as read back (hand-edited, damaged), or None."""
    snapshot, items = report.get("snapshot", []), report.get("items", [])
    if not isinstance(snapshot, list) or not isinstance(items, list):
        return "its snapshot or items are not lists"
    for e in snapshot:
        if not isinstance(e, dict) or type(e.get("index")) is not int:
            return f"a candidate without a whole-number index ({str(e)[:80]})"
        if not all(isinstance(e.get(k), str) for k in ("layer", "title", "content")):
            return f"candidate {e['index']} lacks its layer, title or content as text"
        tags = e.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            return f"candidate {e['index']} has tags that are not a list of text"
    for item in items:
        match = item.get("match") if isinstance(item, dict) else None
        if not isinstance(item, dict) or (match is not None and not isinstance(match, dict)):
            return f"an item that is not a record ({str(item)[:80]})"
    return None


def _plan(report: Mapping[str, Any], decisions: Sequence[object], store: OrganizeStore) -> _Plan:
    by_index = {int(e["index"]): e for e in report.get("snapshot", [])}
    matched = {i["match"]["id"] for i in report.get("items", []) if i.get("match")}
    judged = _Judged(store, matched, report.get("matched"), report.get("items", []))
    plan = _Plan()
    taken: set[int] = set()
    now = time.time()
    leaving = _archiving(decisions, judged)  # a memory this apply archives holds no text for a save
    for i, decision in enumerate(decisions):
        action = decision.get("action") if isinstance(decision, Mapping) else None
        if not isinstance(decision, Mapping) or action not in ACTIONS:
            reason = f"decision {i}: action must be one of {', '.join(ACTIONS)}, got {action!r}"
            plan.skipped.append(SkippedInput(i, reason, "action"))
            continue
        if action == "archive":
            _plan_archive(decision, i, judged, plan)
            continue
        index = _decision_index(decision, i, by_index, taken)
        if isinstance(index, SkippedInput):
            plan.skipped.append(index)
            continue
        taken.add(index)
        if action == "save" and _forgotten_text(by_index[index]):
            reason = f"decision {i}: candidate {index}'s text was forgotten (blanked in the record)"
            plan.skipped.append(SkippedInput(i, reason, "index"))
            continue
        if action == "discard":
            plan.discarded.append(index)
        else:
            node = _new_node(by_index[index], now)
            # what add refuses (a NUL in the body, a control-character tag ...) is skipped: a
            # dry run recorded before the dry run checked it may hold one, and what the write
            # decides now (the store's retention markers or TTL) may differ from the dry run's
            problem = write_problem(node, store, now)
            if problem is not None:
                said = str(problem).removeprefix(f"node {node.id!r}: ")  # the id was never saved
                plan.skipped.append(SkippedInput(i, f"decision {i}: candidate {index}: {said}", "index"))
                continue
            candidate = _candidate_of(by_index[index])
            stored = _stored_copy(store, candidate, node, judged.exact.get(index), leaving)
            if stored is not None:
                reason = f"decision {i}: candidate {index}'s text is stored already, as {stored!r}"
                plan.skipped.append(SkippedInput(i, reason, "index", stored))
                continue
            earlier = _planned_copy(plan, candidate, node)
            if earlier is not None:
                k, by = plan.saved_by[earlier], plan.saved_from[earlier]
                reason = f"decision {i}: candidate {index}'s text is saved by decision {k} (candidate {by})"
                plan.skipped.append(SkippedInput(i, reason, "index"))
                continue
            plan.saved_by.append(i)
            plan.letters.append((_letters(content_of(node.body)), _letters(node.body)))
            plan.nodes.append(node)
            plan.saved.append(node.id)
            plan.saved_from.append(index)
    plan.notes = _near_notes(plan, report.get("items", []), leaving)
    return plan


def _near_notes(plan: _Plan, items: Iterable[object], leaving: Collection[str]) -> list[str]:
    """What the receipt says of each save made beside what the dry run judged it near: a
    memory (``near``) this apply does not archive, or a candidate this apply saves too (a
    ``repeat`` in other words). The caller decided to save it, so it is saved -- and said:
    before session 42 the receipt was ``ok`` and silent."""
    judged = {i.get("index"): i for i in items if isinstance(i, dict) and type(i.get("index")) is int}
    saved_by = dict(zip(plan.saved_from, plan.saved_by, strict=True))
    notes = []
    for index, decision in saved_by.items():
        item = judged.get(index) or {}
        match, score = item.get("match"), item.get("score")
        if item.get("verdict") == "near" and isinstance(match, dict) and match.get("id") not in leaving:
            notes.append(
                f"decision {decision}: candidate {index} saved beside {match.get('id')!r}, judged near "
                f"it (score {match.get('score')}): archive or forget one if it repeats the other"
            )
        elif item.get("verdict") == "repeat" and score is not None and item.get("repeats") in saved_by:
            k = item["repeats"]
            notes.append(
                f"decision {decision}: candidate {index} saved beside candidate {k} (decision "
                f"{saved_by[k]}), judged a repeat of it in other words (score {score})"
            )
    return notes


def _candidate_of(entry: Mapping[str, Any]) -> dedupe.NormalizedCandidate:
    """The text of a snapshot entry as :func:`holds_text` compares it."""
    return dedupe.NormalizedCandidate(entry["layer"], entry["title"], entry["content"])


def _archiving(decisions: Sequence[object], judged: _Judged) -> frozenset[str]:
    """The ids the archive decisions of ``decisions`` archive (:func:`_plan_archive`),
    whatever their place in the list."""
    scratch = _Plan()
    for i, decision in enumerate(decisions):
        if isinstance(decision, Mapping) and decision.get("action") == "archive":
            _plan_archive(decision, i, judged, scratch)
    return frozenset(scratch.archive)


def _stored_copy(
    store: OrganizeStore,
    candidate: dedupe.NormalizedCandidate,
    node: Node,
    exact: str | None = None,
    leaving: Collection[str] = (),
) -> str | None:
    """The id of a current memory the caller sees, of a memory layer, that holds the text
    ``node`` would store by the dry run's ``exact`` rule (:func:`holds_text`: its body is
    ``node``'s, or the candidate's title and content are its whole body ...) and that
    everyone who would see ``node`` sees: the dry run's ``exact`` match (``exact``, read
    first) while it still holds it, or one stored since. A memory in ``leaving`` (the
    same apply archives it) does not count. None when there is none."""
    for held in itertools.chain(_read_current(store, exact), _pool(store, node.body, by_key=True)):
        if (
            held.id not in leaving
            and held.layer in dedupe.CANDIDATE_LAYERS
            and _covers(_node_scope(held), _node_scope(node))
            and holds_text(candidate, held.body)
        ):
            return held.id
    return None


def _read_current(store: OrganizeStore, node_id: str | None) -> list[Node]:
    """``[node]`` when the caller sees ``node_id`` and it is :func:`current`, else ``[]``."""
    if node_id is None:
        return []
    try:
        node = store.get(node_id)
    except NodeNotFoundError:
        return []
    return [node] if current(store, node) else []


def _planned_copy(plan: _Plan, candidate: dedupe.NormalizedCandidate, node: Node) -> int | None:
    """The place in ``plan.nodes`` of a save of this apply that holds the text ``node``
    would store (:func:`holds_text`) where everyone who would see ``node`` sees it, or None:
    two candidates of one run with one text are saved once (the dry run's ``repeat``)."""
    letters, scope = (_letters(candidate.content), _letters(node.body)), _node_scope(node)
    for k, planned in enumerate(plan.nodes):
        if _repeats(candidate, letters, plan.letters[k], planned.body) and _covers(
            _node_scope(planned), scope
        ):
            return k
    return None


def _receipt_result(
    apply_id: str, run_id: str, status: str, created_at: str, plan: _Plan, applied: int
) -> OrganizeResult:
    """The result an apply returns (its receipt, as the caller sees it)."""
    counts = {
        "saved": len(plan.saved),
        "archived": len(plan.archive),
        "discarded": len(plan.discarded),
        "skipped": len(plan.skipped),
    }
    return OrganizeResult(
        apply_id,
        "apply",
        status,
        created_at,
        counts,
        skipped=tuple(plan.skipped),
        dry_run_id=run_id,
        applied=applied,
        saved_ids=tuple(plan.saved),
        archived_ids=tuple(plan.archive),
        discarded=tuple(plan.discarded),
        notes=tuple(plan.notes) if applied else (),
    )


def apply(
    store: OrganizeStore, run_id: object, decisions: object, *, scope: object = None, strict: bool = False
) -> OrganizeResult:
    """Apply the decisions on dry run ``run_id`` exactly once; return the receipt.

    ``decisions`` is a list of ``{"action": "save"|"discard", "index": n}``
    and ``{"action": "archive", "id": node_id}``. A decision the dry run does
    not back is skipped with its reason (the run is ``degraded``); the rest
    land in one ``apply_changes`` commit. Raises
    :class:`~md_cg.errors.OrganizeApplyError` (naming the run) when the run
    cannot be applied, and re-raises an infrastructure error; both after
    writing a ``failed`` receipt with ``applied`` 0. With ``strict``, a decision
    the dry run does not back raises too (each named), nothing applied: a failed
    receipt leaves the run open, so corrected decisions can be applied. An empty
    ``decisions`` list decides nothing: its receipt is ``noop`` and the run stays
    open (``strict`` refuses it: ``no decisions``).
    """
    caller = Caller.of(scope)
    apply_id = f"org_{uuid.uuid4().hex}"
    created_at = _now_iso()
    log = store.log(AUDIT_LOG)
    dry_id, recorded = (run_id if isinstance(run_id, str) else None), None  # decisions once checked

    def receipt(status: str, plan: _Plan, applied: int, error: str | None) -> dict[str, Any]:
        return {
            "kind": "apply",
            "run_id": apply_id,
            "dry_run_id": dry_id,
            "created_at": created_at,
            "status": status,
            "error": error,
            "caller": caller.to_dict(),
            "decisions": recorded,
            "applied": applied,
            "saved": plan.saved if applied else [],
            "saved_from": plan.saved_from if applied else [],
            "archived": plan.archive if applied else [],
            "discarded": plan.discarded if applied else [],
            "skipped": [s.to_dict() for s in plan.skipped],
            "notes": plan.notes if applied else [],
        }

    plan = _Plan()
    try:
        if not isinstance(run_id, str) or not run_id.strip():
            raise OrganizeApplyError(None, f"run_id must name a dry run, got {short_repr(run_id)}")
        if not isinstance(decisions, (list, tuple)):
            raise OrganizeApplyError(run_id, f"decisions must be a list, got {type(decisions).__name__}")
        recorded = _recordable(run_id, decisions)
        with log.locked(timeout=store.lock_timeout):
            # Re-read under the lock (applied meanwhile?), only the records naming the run
            records = log.read_holding([orjson.dumps(run_id)])
            report = _find_report(records, run_id, caller)
            _check_not_applied(records, run_id, store)
            if strict and not decisions:
                raise OrganizeApplyError(
                    run_id, "no decisions: give at least one save, discard or archive; the dry run stays open"
                )
            # add_unique's lock: a memory stored meanwhile by add or remember is seen, and
            # none lands between the look and the commit
            with _remember_lock(store):
                store.refresh()
                plan = _plan(report, decisions, store)
                if strict and plan.skipped:
                    raise _strict_error(run_id, plan)
                log.append([_intent(apply_id, run_id, created_at, plan)], durable=True)
                if plan.nodes or plan.archive:
                    store.apply_changes(add=plan.nodes, archive=plan.archive)
            applied = len(plan.saved) + len(plan.archive)
            status = "degraded" if plan.skipped else ("ok" if applied else "noop")
            # after the commit: a refused append says the change was made (md_cg.record_failed)
            log.append([receipt(status, plan, applied, None)], durable=True, landed=applied > 0)
    except Exception as exc:
        error = str(exc) if isinstance(exc, OrganizeApplyError) else repr(exc)
        try:
            log.append([receipt("failed", plan, 0, error)], durable=True)
        except Exception as audit_exc:  # the original error is the one to handle
            exc.add_note(f"the failed receipt could not be written either: {audit_exc!r}")
        raise
    return _receipt_result(apply_id, run_id, status, created_at, plan, applied)


def _recordable(run_id: str, decisions: list[Any] | tuple[Any, ...]) -> list[Any]:
    """``decisions`` as a list, each checked to be JSON the receipt can hold: one that is
    not (a set, an object, a non-string key) is refused before anything is applied; it
    was applied and its receipt then failed to write."""
    for i, decision in enumerate(decisions):
        try:
            orjson.dumps(decision)
        except TypeError as exc:
            raise OrganizeApplyError(
                run_id, f"decision {i} is not JSON the receipt can record ({exc}); nothing was applied"
            ) from None
    return list(decisions)


def _strict_error(run_id: str, plan: _Plan) -> OrganizeApplyError:
    listed = "; ".join(sk.reason for sk in plan.skipped[:5])
    more = f" (+{len(plan.skipped) - 5} more)" if len(plan.skipped) > 5 else ""
    return OrganizeApplyError(
        run_id,
        f"{len(plan.skipped)} decision(s) the dry run does not back: {listed}{more}; "
        "nothing was applied, and the run can be applied with corrected decisions",
    )


def _remember_lock(store: OrganizeStore) -> AbstractContextManager[None]:
    """The store's ``remember`` lock (:meth:`MdCG.add_unique` holds it), or none for a
    store without one (tests' fakes)."""
    lock = getattr(store, "_remember_lock", None)
    if lock is None:
        return nullcontext()
    return lock.hold(timeout=store.lock_timeout)


def blank_forgotten(
    log: AppendLog, node_ids: Collection[str], *, timeout: float, caller: dict[str, Any] | None = None
) -> int:
    """Blank the text of forgotten memories out of the audit log, in place
    (:meth:`AppendLog.redact`): the candidate each was saved from (by an apply's
    receipt: its content, title and item title), a candidate that matched one exactly,
    and every match title naming one. Candidates of the very same text are blanked in
    the runs of ``caller`` (the one forgetting, as :meth:`Caller.to_dict` gives it) and
    of the caller each forgotten memory was saved by -- not in another agent's runs.
    Nothing else in a record changes. Returns the number of lines rewritten."""
    gone = set(node_ids)
    if not gone:
        return 0
    runs: dict[str, set[int]] = {}  # dry run id -> indexes of the candidates to blank

    def first(rec: dict[str, Any]) -> bool:
        kind = rec.get("kind")
        if kind in ("apply", "apply_intent") and rec.get("status") != "failed":
            for node_id, index in _saved_from(rec).items():
                if node_id in gone and isinstance(rec.get("dry_run_id"), str):
                    runs.setdefault(rec["dry_run_id"], set()).add(index)
            return False
        if kind != "dry_run":
            return False
        exact = set()
        changed = False
        for item in rec.get("items") or ():
            match = item.get("match") if isinstance(item, dict) else None
            if isinstance(match, dict) and match.get("id") in gone:
                changed = _blank(match, "title") or changed
                if item.get("verdict") == "exact" and type(item.get("index")) is int:
                    exact.add(item["index"])
        return _blank_candidates(rec, exact) or changed

    texts: set[str] = set()  # the forgotten candidates' contents: the same caller's other runs
    callers: list[Any] = [caller]  # ... hold them too (another scope's run is its own business)

    def second(rec: dict[str, Any]) -> bool:
        wanted = runs.get(rec.get("run_id")) if rec.get("kind") == "dry_run" else None  # type: ignore[arg-type]
        if not wanted:
            return False
        callers.append(rec.get("caller"))
        return _blank_candidates(rec, wanted, texts)

    def third(rec: dict[str, Any]) -> bool:
        if rec.get("kind") != "dry_run" or rec.get("caller") not in callers:
            return False
        snapshot = rec.get("snapshot") or ()
        same = {c["index"] for c in snapshot if isinstance(c, dict) and c.get("content") in texts}
        return bool(same) and _blank_candidates(rec, same)

    with log.locked(timeout=timeout):
        done = log.redact([orjson.dumps(i) for i in sorted(gone)], first)
        if runs:
            done += log.redact([orjson.dumps(r) for r in sorted(runs)], second)
        if texts:  # every other run's candidate of the very same text
            done += log.redact([orjson.dumps(t) for t in sorted(texts)], third)
        return done


def _intent(apply_id: str, run_id: str, created_at: str, plan: _Plan) -> dict[str, Any]:
    """The record an apply appends before its commit: the ids it is about to write."""
    return {
        "kind": "apply_intent",
        "run_id": apply_id,
        "dry_run_id": run_id,
        "created_at": created_at,
        "saved": plan.saved,
        "saved_from": plan.saved_from,
        "archive": plan.archive,
    }


def _saved_from(rec: Mapping[str, Any]) -> dict[str, int]:
    """Saved id -> the candidate index it was saved from, by an apply's record: the
    ``saved_from`` it keeps, or (records of earlier versions) its save decisions that
    were not skipped, in order, beside ``saved``."""
    saved = [i for i in rec.get("saved") or () if isinstance(i, str)]
    given = rec.get("saved_from")
    if isinstance(given, list) and len(given) == len(saved):
        return {i: n for i, n in zip(saved, given, strict=True) if type(n) is int}
    skipped = {s.get("index") for s in rec.get("skipped") or () if isinstance(s, dict)}
    given_decisions = rec.get("decisions")
    decisions: list[Any] = given_decisions if isinstance(given_decisions, list) else []
    saves = [
        d.get("index")
        for i, d in enumerate(decisions)
        if isinstance(d, dict) and d.get("action") == "save" and i not in skipped
    ]
    if len(saves) != len(saved):
        return {}
    return {i: n for i, n in zip(saved, saves, strict=True) if type(n) is int}


def _forgotten_text(candidate: Mapping[str, Any]) -> bool:
    """Whether forget blanked this dry-run candidate (its content only ``#``s)."""
    content = candidate.get("content")
    return isinstance(content, str) and bool(content) and not content.strip("#")


def _blank(record: dict[str, Any], key: str) -> bool:
    """Blank the text under ``key`` (:func:`md_cg.logs.blanked`); True when it changed."""
    value = record.get(key)
    if not isinstance(value, str) or not value.strip("#"):
        return False
    record[key] = blanked(value)
    return True


def _blank_candidates(rec: dict[str, Any], indexes: Collection[int], texts: set[str] | None = None) -> bool:
    """Blank the candidates ``indexes`` of a dry run's record: content, title and tags,
    and the title its item repeats (``texts`` collects the contents blanked)."""
    changed = False
    for group in (rec.get("snapshot") or (), rec.get("items") or ()):
        for entry in group:
            if isinstance(entry, dict) and entry.get("index") in indexes:
                if (
                    texts is not None
                    and isinstance(entry.get("content"), str)
                    and entry["content"].strip("#")
                ):
                    texts.add(entry["content"])
                for key in ("content", "title"):
                    changed = _blank(entry, key) or changed
                tags = entry.get("tags")
                if isinstance(tags, list):
                    for i, tag in enumerate(tags):
                        if isinstance(tag, str) and tag.strip("#"):
                            tags[i] = blanked(tag)
                            changed = True
    return changed


def runs(store: OrganizeStore) -> list[dict[str, Any]]:
    """The audit records (dry runs, intents, receipts) the caller may read, oldest first:
    every one for a handle without scope; for a scoped handle, those its own scope made
    (a dry run keeps its candidates' text, which is that caller's)."""
    records = store.log(AUDIT_LOG).read()
    if store.scope is None:
        return records
    mine = Caller.of(store.scope).to_dict()
    return [r for r in records if r.get("caller") == mine]


def organize(
    store: OrganizeStore,
    mode: str = "dryRun",
    *,
    candidates: object = None,
    run_id: object = None,
    decisions: object = None,
    scope: object = None,
    strict: bool = False,
) -> OrganizeResult:
    """One entry with a mode, as the seed has it: ``dryRun`` or ``apply`` (``strict``: see :func:`apply`)."""
    if mode == "dryRun":
        if run_id is not None or decisions is not None:
            raise InvalidArgumentError("a dry run takes candidates, not run_id or decisions", name="mode")
        return dry_run(store, candidates, scope=scope)
    if mode == "apply":
        if candidates is not None:
            raise InvalidArgumentError(
                "apply replays the dry run's snapshot; it takes no candidates", name="candidates"
            )
        return apply(store, run_id, decisions, scope=scope, strict=strict)
    raise InvalidArgumentError(
        f"mode must be one of {', '.join(MODES)}, got {short_repr(mode)}", name="mode", value=mode
    )
