"""The qualification judge: may a found node be acted on? (DESIGN section 7)

Search tier says *how* a node was found; the judgement says whether it may be
used. :func:`judge` is a pure function of the node's CCG gaps, its
not-applicable conditions, its verification basis, the query and the caller's
context.

Facts and procedures
--------------------
A node is a *procedure* when it carries at least one of the five required CCG
elements (applies when, steps, executes, verified by, not applicable): it
claims to say when and how something is done, and is judged on whether it
says all of it. A node with none of them is a *fact* ("the user's name is
Sam", "多普勒效应：频率随相对运动变化"): it has no applicability conditions to
be incomplete about, so a missing procedure mark says nothing about whether
it may be used (:func:`is_fact`). The optional ``Function`` mark alone names a
thing without stating a condition or a step, so it does not make a procedure.

The rule, checked in this order:

1. **REJECT** -- a not-applicable condition of the node is hit by the query
   or by the context (facts and procedures alike; a fact's conditions come
   from its ``non_applicable_conditions`` field). Checked first because an
   explicit "does not apply here" is definitive: a node that says it must
   not be used on linked lists must not be used on a linked list, whether or
   not its other CCG elements are filled in. Reporting BLINDSPOT there would
   invite the caller to go and complete a node that is already known to be
   wrong for the situation.
2. **BLINDSPOT** -- a procedure with a required CCG element missing:
   attribution cannot be established, stop guessing. Never a fact.
3. **DEFER** -- a complete procedure, or a fact, that holds an unresolved
   git merge conflict (``conflict``: the ``merge_conflict`` record a merge left,
   or conflict markers in its body; its text holds both sides and the stale
   base, so it is never acted on until ``update`` settles it), with no
   verification basis declared, or with a ``confidence`` below
   :data:`LOW_CONFIDENCE` (evidence went against it: ``verify(..., "weakened")``
   lowers it): usable with care, keep looking for confirmation.
4. **ACCEPT** -- a complete procedure, or a fact, with no condition hit, no
   merge conflict, a verification basis declared, and no low confidence.

A fact and a complete procedure are judged alike on verification: a fact
without a basis is as unconfirmed as a procedure without one, and ranking it
above the procedure would reward leaving annotations out. The basis text
says which kind the node is (``ACCEPT: fact with no applicability
conditions, verification basis "data"``), so an agent is told the
truth about why.

Condition matching (:func:`condition_hit`)
-------------------------------------------
Both sides are normalised: NFKC, case folded, whitespace collapsed. A condition
*hits* a text when it has content (below) and either

(a) **phrase** -- the normalised condition occurs in the normalised text; where
    the condition begins (ends) with a letter or digit of a non-CJK script, the
    text character before (after) the occurrence must not be one, so
    ``list`` does not hit ``playlist``; or
(b) **content** -- every content word of the condition occurs among the
    text's words, and every required CJK character of the condition is
    *covered*: it belongs to a character bigram of the condition (inside one
    run of CJK characters) that also occurs in the text; a condition run of
    a single CJK character must occur in the text.

*Words* are runs of letters/digits of non-CJK scripts (``c++``/``c#`` keep
their suffix); a word matches its light plural forms (``lists`` ~ ``list``).
*Content words* are the condition's words minus English function words
(:data:`STOPWORDS`; negations such as ``not``/``no``/``without`` are content).
*Required CJK characters* are all CJK characters of the condition except the
particles 的/了/之 and the framing words at the edges of a run (如果/假如/若是/
若/当/对于 at its start, 的时候/时候/的情况下/情况下/的情况/的话/时 at its end).
A condition without content words or required characters never hits.

Examples: ``linked list`` hits ``does this work on a linked list?`` (a) and
``Linked Lists`` (b); ``数组未排序`` hits ``这个数组未排序能用吗`` (a) and
``未排序的数组可以吗`` (b: 数组, 未排, 排序 cover every character) but not
``数组已排序`` (未 is not covered); ``链表`` does not hit ``数组``.

Negation is **not** understood: ``this is not a linked list`` hits ``linked
list``. Conditions are matched as text, without semantics.

The context
-----------
The context contributes text: a string is itself; a mapping contributes its
string values, recursively through nested mappings and lists (tags,
``condition_space`` values, ``domain``...), except the routing instruction
``big_domain``; a :class:`~md_cg.node.Node` contributes its tags and
``condition_space`` values; numbers and booleans are ignored. Each string is
normalised on its own, so a phrase never spans two of them.

Speed: :func:`prepare_conditions` and :func:`prepare_text` precompute what
matching needs; :func:`judge` accepts prepared conditions and a prepared
context, and caches prepared queries and condition strings.

Imports only the standard library and :mod:`md_cg.node`, :mod:`md_cg.ccg`, :mod:`md_cg.script`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import ccg
from .node import LOW_CONFIDENCE, Node
from .script import CJK_CHARS, CJK_RUN_RE, WORD_CHAR, fold, fold_accents, plural_forms

__all__ = [
    "ACCEPT",
    "BLINDSPOT",
    "DEFER",
    "EMPTY_TEXT",
    "REJECT",
    "STATES",
    "STOPWORDS",
    "UNRESOLVED_CONFLICT",
    "Judgement",
    "PreparedCondition",
    "PreparedText",
    "clauses",
    "condition_hit",
    "context_text",
    "is_fact",
    "judge",
    "judge_node",
    "node_conditions",
    "normalize_text",
    "prepare_conditions",
    "prepare_context",
    "prepare_text",
]

ACCEPT = "ACCEPT"
REJECT = "REJECT"
DEFER = "DEFER"
BLINDSPOT = "BLINDSPOT"
#: The four states, in the order agents and reports list them (the rule checks
#: REJECT, then BLINDSPOT, then DEFER/ACCEPT).
STATES: tuple[str, ...] = (ACCEPT, REJECT, DEFER, BLINDSPOT)

_STOPWORDS_TEXT = """
a an the is are was were be been being am of on in at to for with by from as
when whenever while during if it its this that these those there do does did has
have had and or any some such case cases where which
"""
#: English function words left out of a condition's content words.
STOPWORDS: frozenset[str] = frozenset(_STOPWORDS_TEXT.split())

_WORD = re.compile(f"{WORD_CHAR}+[+#]*")
_WORD_EDGE = re.compile(WORD_CHAR)
_BEFORE = f"(?<!{WORD_CHAR})"
_AFTER = f"(?!{WORD_CHAR}|[+#])"
# Clause boundaries: CJK punctuation, newlines, ASCII punctuation before a space,
# the end or next to a CJK character, and the separator between context pieces.
# (NFKC has already turned full-width ，；：！？ into ASCII.)
_CLAUSE = re.compile(f"[。、\n]|[,.;:!?](?=\\s|$|[{CJK_CHARS}])|(?<=[{CJK_CHARS}])[,.;:!?]| \\| ")

_PARTICLES = frozenset("的了之")
_LEADING = ("如果", "假如", "若是", "对于", "若", "当")
_TRAILING = ("的情况下", "的时候", "情况下", "的情况", "时候", "的话", "时")
_FRAMING = frozenset(_LEADING + _TRAILING)
_SEPARATOR = " | "
#: The basis of a node that holds an unresolved merge conflict (after ``DEFER: ``).
UNRESOLVED_CONFLICT = (
    "unresolved merge conflict: settle it with update (its text holds both sides of the merge)"
)
_REQUIRED = frozenset(ccg.REQUIRED)
_MAX_DEPTH = 16


def normalize_text(text: str) -> str:
    """NFKC + case fold + whitespace collapsed and trimmed (:func:`md_cg.script.fold`),
    the diacritics of Latin letters removed (:func:`md_cg.script.fold_accents`):
    a condition ``in Zürich`` holds for a query about ``zurich``."""
    return fold_accents(fold(text))


# -- prepared forms -----------------------------------------------------------


@dataclass(frozen=True)
class _Clause:
    words: frozenset[str]
    bigrams: frozenset[str]
    chars: frozenset[str]


@dataclass(frozen=True)
class PreparedText:
    """A query or context, normalised and indexed for :func:`condition_hit`.

    ``norm`` is the normalised text; ``clauses`` index its words, CJK bigrams
    and CJK characters clause by clause (the content rule must be met inside
    one clause).
    """

    norm: str
    clauses: tuple[_Clause, ...]
    union: _Clause

    @property
    def empty(self) -> bool:
        """True when there is no text at all."""
        return not self.norm


@dataclass(frozen=True)
class _CjkRun:
    """A run of CJK characters of a condition that has required characters."""

    text: str
    bigrams: tuple[str, ...]
    # per required position: indices of the two bigrams that may cover it (-1: none)
    cover: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class PreparedCondition:
    """One not-applicable condition, precomputed for matching.

    ``text`` is the condition as written (stripped); ``norm`` its normalised
    form; ``has_content`` is False for a condition that can never hit.
    """

    text: str
    norm: str
    words: tuple[tuple[str, ...], ...]  # content words, each with its plural forms
    runs: tuple[_CjkRun, ...]
    pattern: re.Pattern[str] | None
    has_content: bool


_NO_CLAUSE = _Clause(frozenset(), frozenset(), frozenset())
EMPTY_TEXT = PreparedText("", (), _NO_CLAUSE)


def _index_clause(text: str) -> _Clause:
    words: set[str] = set()
    for match in _WORD.finditer(text):
        words.update(plural_forms(match.group()))
    bigrams: set[str] = set()
    chars: set[str] = set()
    for match in CJK_RUN_RE.finditer(text):
        run = match.group()
        chars.update(run)
        bigrams.update(run[i : i + 2] for i in range(len(run) - 1))
    return _Clause(frozenset(words), frozenset(bigrams), frozenset(chars))


@lru_cache(maxsize=1024)
def _index_text(norm: str) -> PreparedText:
    clauses = tuple(_index_clause(part) for part in _CLAUSE.split(norm) if part.strip())
    if len(clauses) == 1:
        union = clauses[0]
    else:
        union = _Clause(
            frozenset().union(*(c.words for c in clauses)),
            frozenset().union(*(c.bigrams for c in clauses)),
            frozenset().union(*(c.chars for c in clauses)),
        )
    return PreparedText(norm, clauses, union)


def clauses(text: str) -> list[str]:
    """The clauses the judge reads ``text`` in (normalised; cut at 。、, line breaks,
    sentence punctuation): a condition's content words must meet in one of them."""
    return [part for part in _CLAUSE.split(normalize_text(text)) if part.strip()]


@lru_cache(maxsize=1024)
def prepare_text(text: str) -> PreparedText:
    """Normalise and index a query text (cached)."""
    if not isinstance(text, str):
        raise TypeError(f"query must be a string, got {type(text).__name__}")
    return _index_text(normalize_text(text))


def _context_strings(context: Any, out: list[str], depth: int = 0) -> None:
    if context is None or isinstance(context, (bool, int, float)) or depth > _MAX_DEPTH:
        return
    if isinstance(context, str):
        out.append(context)
    elif isinstance(context, Node):
        _context_strings(list(context.tags), out, depth + 1)
        _context_strings(context.condition_space, out, depth + 1)
    elif isinstance(context, Mapping):
        for key, value in context.items():
            if key != "big_domain":
                _context_strings(value, out, depth + 1)
    elif isinstance(context, (list, tuple, set, frozenset)):
        items = sorted(context, key=repr) if isinstance(context, (set, frozenset)) else context
        for item in items:
            _context_strings(item, out, depth + 1)
    else:
        raise TypeError(
            "judge context must be None, a string, a mapping, a list, a Node or a "
            f"PreparedText, got {type(context).__name__}"
        )


def context_text(context: object) -> str:
    """The text a context contributes (normalised pieces joined by `` | ``)."""
    pieces: list[str] = []
    _context_strings(context, pieces)
    normed = (normalize_text(p) for p in pieces)
    return _SEPARATOR.join(p for p in normed if p)


def prepare_context(context: object) -> PreparedText:
    """Normalise and index a caller's context once per search (see the module docstring)."""
    if isinstance(context, PreparedText):
        return context
    text = context_text(context)
    return _index_text(text) if text else EMPTY_TEXT


def _required_positions(run: str) -> tuple[int, ...]:
    if run in _FRAMING:
        return ()
    start, end = 0, len(run)
    for prefix in _LEADING:
        if run.startswith(prefix) and len(run) > len(prefix):
            start = len(prefix)
            break
    for suffix in _TRAILING:
        if run.endswith(suffix) and end - len(suffix) > start:
            end -= len(suffix)
            break
    return tuple(i for i in range(start, end) if run[i] not in _PARTICLES)


@lru_cache(maxsize=8192)
def _prepare_one(condition: str) -> PreparedCondition:
    text = condition.strip()
    norm = normalize_text(text)
    words = tuple(
        plural_forms(w) for w in dict.fromkeys(m.group() for m in _WORD.finditer(norm)) if w not in STOPWORDS
    )
    runs: list[_CjkRun] = []
    for run in CJK_RUN_RE.findall(norm):
        required = _required_positions(run)
        if not required:
            continue
        last = len(run) - 2  # index of the last bigram
        runs.append(
            _CjkRun(
                run,
                tuple(run[i : i + 2] for i in range(len(run) - 1)),
                tuple((p - 1 if p >= 1 else -1, p if p <= last else -1) for p in required),
            )
        )
    pattern = None
    if norm:
        before = _BEFORE if _WORD_EDGE.match(norm[0]) else ""
        after = _AFTER if _WORD_EDGE.match(norm[-1]) else ""
        if before or after:
            pattern = re.compile(before + re.escape(norm) + after)
    return PreparedCondition(text, norm, words, tuple(runs), pattern, bool(words or runs))


def prepare_conditions(
    conditions: Iterable[str | PreparedCondition],
) -> tuple[PreparedCondition, ...]:
    """Prepare conditions for matching: deduplicated by normalised form, order kept.

    Blank conditions are dropped. The result is immutable and can be cached
    per node by the index and passed to :func:`judge` as ``non_applicable``.
    """
    out: dict[str, PreparedCondition] = {}
    for condition in conditions:
        if isinstance(condition, PreparedCondition):
            prepared = condition
        elif isinstance(condition, str):
            prepared = _prepare_one(condition)
        else:
            raise TypeError(f"conditions must be strings, got {type(condition).__name__}")
        if prepared.norm and prepared.norm not in out:
            out[prepared.norm] = prepared
    return tuple(out.values())


# -- matching -------------------------------------------------------------------


def _covered(run: _CjkRun, bigrams: frozenset[str], chars: frozenset[str]) -> bool:
    if not run.bigrams:
        return run.text in chars
    present = [b in bigrams for b in run.bigrams]
    for left, right in run.cover:
        if not ((left >= 0 and present[left]) or (right >= 0 and present[right])):
            return False
    return True


def condition_hit(condition: PreparedCondition | str, text: PreparedText | str) -> bool:
    """Whether a not-applicable condition is hit by a text (see the module docstring)."""
    cond = _prepare_one(condition) if isinstance(condition, str) else condition
    target = prepare_text(text) if isinstance(text, str) else text
    if not cond.has_content or target.empty:
        return False
    if cond.norm in target.norm and (cond.pattern is None or cond.pattern.search(target.norm) is not None):
        return True
    # the union of all clauses rejects most conditions at once
    if not _content_hit(cond, target.union):
        return False
    if len(target.clauses) == 1:
        return True
    return any(_content_hit(cond, clause) for clause in target.clauses)


def _content_hit(cond: PreparedCondition, clause: _Clause) -> bool:
    words = clause.words
    for forms in cond.words:
        if not any(form in words for form in forms):
            return False
    return all(_covered(run, clause.bigrams, clause.chars) for run in cond.runs)


# -- the judgement ------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """The qualification of one node for one query.

    ``state`` is one of :data:`STATES`; ``basis`` a one-line human-readable
    reason; ``hit_condition`` the not-applicable condition that caused a
    REJECT (as written in the node), else ``None``; ``missing`` the required
    CCG elements that are absent from a procedure (filled in every state, so
    a REJECT can still tell the node is incomplete; empty for a fact, which
    is not incomplete); ``matched_by`` is ``"query"`` or
    ``"context"`` for a REJECT.
    """

    state: str
    basis: str
    hit_condition: str | None = None
    missing: tuple[str, ...] = ()
    matched_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the judgement."""
        return {
            "state": self.state,
            "basis": self.basis,
            "hit_condition": self.hit_condition,
            "missing": list(self.missing),
            "matched_by": self.matched_by,
        }


def judge(
    *,
    ccg_missing: Sequence[str],
    non_applicable: Sequence[str | PreparedCondition],
    verification_basis: str | None,
    query: str,
    context: object = None,
    confidence: float | None = None,
    conflict: bool = False,
) -> Judgement:
    """Judge one node (see the module docstring for the rule and the matching).

    ``ccg_missing``: required CCG elements absent (:func:`md_cg.ccg.missing`).
    ``non_applicable``: the node's conditions (:func:`node_conditions`),
    as strings or as :func:`prepare_conditions` output.
    ``verification_basis``: the node's declared basis; ``None`` or blank
    means none. ``query``: the raw query text. ``context``: the caller's
    search context (string, mapping, list, Node, or :func:`prepare_context`
    output), or ``None``. ``confidence``: the node's, or ``None`` (not judged).
    ``conflict``: the node holds an unresolved merge conflict
    (:func:`md_cg.merge.conflict_of` is not ``None``; the index's ``Entry.conflict``).
    """
    missing = tuple(dict.fromkeys(str(m) for m in ccg_missing))
    fact = is_fact(missing)
    if fact:
        missing = ()  # a fact is not an incomplete procedure
    conditions = prepare_conditions(non_applicable) if non_applicable else ()
    if conditions:
        query_text = prepare_text(query)
        context_prepared = prepare_context(context) if context is not None else EMPTY_TEXT
        for cond in conditions:
            for source, target in (("query", query_text), ("context", context_prepared)):
                if condition_hit(cond, target):
                    return Judgement(
                        REJECT,
                        f'REJECT: not-applicable condition "{cond.text}" matched by the {source}',
                        hit_condition=cond.text,
                        missing=missing,
                        matched_by=source,
                    )
    basis = verification_basis.strip() if isinstance(verification_basis, str) else None
    if conflict and (fact or not missing):
        return Judgement(DEFER, f"DEFER: {UNRESOLVED_CONFLICT}", missing=missing)
    if fact:
        what = (
            "fact, no not-applicable condition hit" if conditions else "fact with no applicability conditions"
        )
        if not basis:
            return Judgement(DEFER, f"DEFER: {what}, but no verification basis declared")
        return _unless_doubted(f'{what}, verification basis "{basis}"', confidence)
    if missing:
        return Judgement(
            BLINDSPOT, f"BLINDSPOT: CCG incomplete, missing {', '.join(missing)}", missing=missing
        )
    if not basis:
        return Judgement(DEFER, "DEFER: CCG complete but no verification basis declared")
    return _unless_doubted(
        f'CCG complete, no not-applicable condition hit, verification basis "{basis}"', confidence
    )


def _unless_doubted(why: str, confidence: float | None) -> Judgement:
    """ACCEPT for ``why``, or DEFER when the node's confidence is low."""
    if confidence is not None and confidence < LOW_CONFIDENCE:
        return Judgement(
            DEFER,
            f"DEFER: {why}, but its confidence {confidence:g} is below {LOW_CONFIDENCE:g} "
            "(evidence went against it): confirm it before acting",
        )
    return Judgement(ACCEPT, f"ACCEPT: {why}")


def is_fact(ccg_missing: Sequence[str]) -> bool:
    """True when none of the required CCG elements is present: the node is a fact, not a procedure.

    ``ccg_missing`` is :func:`md_cg.ccg.missing` of the node (see the module docstring).
    """
    return _REQUIRED.issubset(ccg_missing)


# -- from a node ---------------------------------------------------------------------


#: Conditions :func:`node_conditions` normalised lately -> their normal form. Agents write
#: the same few conditions again and again ("样本量过小"), and each write's index entry
#: normalises them (NFKC, case, accents: ~1 us each); short texts only, emptied when full.
_CONDITION_KEYS: dict[str, str] = {}
_CONDITION_KEYS_MAX = 4096
_CONDITION_KEY_CHARS = 256


def _condition_key(text: str) -> str:
    """:func:`normalize_text` of a condition, remembered."""
    if type(text) is not str:
        return normalize_text(text)
    key = _CONDITION_KEYS.get(text)
    if key is None:
        key = normalize_text(text)
        if len(text) <= _CONDITION_KEY_CHARS:
            if len(_CONDITION_KEYS) >= _CONDITION_KEYS_MAX:
                _CONDITION_KEYS.clear()
            _CONDITION_KEYS[text] = key
    return key


def node_conditions(node: Node, elems: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The not-applicable conditions of a node, deduplicated, order kept.

    First the ``non_applicable_conditions`` field (each entry as written,
    stripped), then the conditions of the "not applicable" CCG element
    (body mark or ``state_attributes.ccg``) split by
    :func:`md_cg.ccg.split_conditions`. ``elems`` (the node's
    :func:`md_cg.ccg.elements`) may be passed when already computed. Two
    conditions are duplicates when
    their normalised forms are equal; the first spelling is kept.
    """
    if elems is None:
        elems = ccg.elements(node.body, node.state_attributes)
    candidates = [c for c in node.non_applicable_conditions if isinstance(c, str)]
    candidates.extend(ccg.split_conditions(elems.get("not_applicable", "")))
    seen: set[str] = set()
    out: list[str] = []
    for condition in candidates:
        text = condition.strip()
        key = _condition_key(text)
        if key and key not in seen:
            seen.add(key)
            out.append(text)
    return tuple(out)


def judge_node(node: Node, query: str, context: object = None, *, conflict: bool | None = None) -> Judgement:
    """Judge a node directly: CCG gaps, conditions and basis read from the node.

    ``conflict``: whether it holds an unresolved merge conflict
    (:func:`md_cg.merge.conflict_of`); ``None`` reads it from the node's
    ``merge_conflict`` key alone (a body with markers and no key is not seen
    here: the index sees it, ``Entry.conflict``)."""
    if conflict is None:
        conflict = "merge_conflict" in node.extra
    elems = ccg.elements(node.body, node.state_attributes)
    return judge(
        ccg_missing=ccg.missing(elems),
        non_applicable=node_conditions(node),
        verification_basis=node.verification_basis,
        query=query,
        context=context,
        confidence=node.confidence,
        conflict=conflict,
    )
