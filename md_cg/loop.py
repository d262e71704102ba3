"""The cognitive loop: negative memory, verification, reflection and the flywheel.

These functions implement the :class:`~md_cg.MdCG` methods of the same name
(DESIGN §8). They use only the store's public API; writes go through
:meth:`MdCG.add` and :meth:`MdCG.modify`, so they inherit its crash safety and
locking.

Negative memory
    ``add_rejected`` writes a falsified hypothesis to ``rejected/`` with
    importance 0; its id is a hash of the normalised hypothesis, so the same
    hypothesis twice is one file (a new reason is appended to it).
    ``add_unresolved`` writes an open question to ``unresolved/``, id by hash
    of the question.

Verification (asymmetric: counter-evidence weighs more)
    ``confirmed`` raises confidence by :data:`CONFIRM_STEP` (0.05: 0.6 → 0.65),
    ``weakened`` lowers it by :data:`WEAKEN_STEP` (0.10), both clamped to
    [0, 1]; a node without confidence starts from :data:`DEFAULT_CONFIDENCE`.
    ``falsified`` moves the node to ``rejected/`` (same id, importance 0) with
    the evidence; a node already there stays, and keeps the record of its
    first falsification (``state_attributes.falsified``, with the layer it came
    from). Every verdict appends an entry to the node's
    ``verification_history``.

    Evidence and history are bounded, so that a verdict never fails on the size of the
    frontmatter (256 KiB): evidence holds at most :data:`MAX_EVIDENCE_CHARS`
    characters (longer is refused, naming the limit), and the history keeps
    its first entry and the :data:`HISTORY_KEEP` most recent ones; the entries
    between fold into one ``{"verdict": "folded"}`` entry that counts them and
    their verdicts and spans their confidence, so the history still accounts
    for every change (each entry's ``confidence_before`` is the one before's
    ``confidence_after``). At most 22 entries of at most 1,000 characters
    (6 bytes each at worst, escaped) come to under 140 KB.

Reflection
    D = 1 − (share of results in state ACCEPT), with feedback overriding the
    judge's states. Over the record (one step per reflection, ``t`` = 0, 1, …),
    dD/dt = D(t) − D(t−1) and d²D/dt² = dD/dt(t) − dD/dt(t−1), with the
    derivatives of the first record(s) taken as 0. Records are appended to
    the store's ``reflection`` log (``.mdcg/reflection/``) under its lock, so
    two processes never number two steps alike.

Flywheel
    ``flywheel_step(report)`` turns every condition a failure report says was
    missed into an ``unresolved/`` entry (idempotent: id by hash of node id
    and condition). ``resolve`` settles one: confirmed, the condition is added
    to the node's ``non_applicable_conditions`` (so the judge REJECTs it when
    the condition is present), the question leaves ``unresolved/``;
    refuted, the question becomes a rejected hypothesis.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from . import paths, visibility
from .errors import InvalidArgumentError, InvalidNodeError, InvalidVerdictError, NodeNotFoundError
from .judge import STATES
from .merge import FOLDED, HISTORY_KEEP, VERDICTS, bounded_history
from .node import DEFAULT_SENSITIVITY, Node, finite
from .protocol import StoreEngine
from .script import fold, has_surrogate, short_repr

if TYPE_CHECKING:  # pragma: no cover
    from .search import SearchResult

CONFIRM_STEP = 0.05
WEAKEN_STEP = 0.10
DEFAULT_CONFIDENCE = 0.5
#: the longest evidence (characters, after stripping) ``verify`` takes
MAX_EVIDENCE_CHARS = 1_000
__all__ = ["FOLDED", "HISTORY_KEEP", "STATES", "VERDICTS", "InvalidVerdictError", "bounded_history"]


def _hash(*parts: str) -> str:
    h = hashlib.sha256("\x1f".join(fold(p) for p in parts).encode("utf-8"))
    return h.hexdigest()[:16]


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidNodeError(f"{what} must be a non-empty string, got {value!r}", field=what, value=value)
    return value.strip()


def _evidence(value: Any, node_id: str) -> str:
    """``value`` as evidence: a non-empty string of at most :data:`MAX_EVIDENCE_CHARS`
    characters (every verdict keeps it in the node's frontmatter, which has a size limit)."""
    evidence = _text(value, "evidence")
    if len(evidence) > MAX_EVIDENCE_CHARS:
        raise InvalidNodeError(
            f"evidence for node {node_id!r} is {len(evidence):,} characters, over the limit of "
            f"{MAX_EVIDENCE_CHARS:,}: shorten it (keep the full text in a memory of its own and cite its id)",
            field="evidence",
            node_id=node_id,
        )
    return evidence


def _listing(values: Iterable[str] | str | None) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        return [values] if values.strip() else []
    return [str(v).strip() for v in values if str(v).strip()]


# -- negative memory --------------------------------------------------------------


def _scope_parts(scope: Any) -> tuple[str, ...]:
    """What a scoped handle adds to a text-derived id: two agents (or workspaces) that
    record the same text get two ids, so one neither collides with the other's nor
    learns that it holds that text. Nothing for a handle without agent or workspace
    (the ids of earlier versions)."""
    if scope is None:
        return ()
    parts = (f"agent:{scope.agent or ''}", f"workspace:{scope.workspace or ''}")
    if scope.max_sensitivity != DEFAULT_SENSITIVITY:  # a public-only handle is a reader of its own
        return (*parts, f"sensitivity:{scope.max_sensitivity}")
    return () if scope.agent is None and scope.workspace is None else parts


def rejected_id(hypothesis: str, scope: Any = None) -> str:
    """Id of the rejected/ entry for a hypothesis (hash of its normalised text, and of
    the writer's agent and workspace when it has them)."""
    return f"rej_{_hash(*_scope_parts(scope), hypothesis)}"


def add_rejected(store: StoreEngine, hypothesis: str, reason: str, verification: str = "") -> Node:
    hypothesis = _text(hypothesis, "hypothesis")
    reason = _text(reason, "reason")
    node_id = rejected_id(hypothesis, store.scope)
    if node_id in store:
        existing = store.get(node_id)
        reasons = (
            existing.state_attributes.get("negative", {}).get("reasons", [])
            if existing.state_attributes
            else []
        )
        if reason in reasons:
            return existing

        def add_reason(node: Node) -> None:
            attrs = dict(node.state_attributes or {})
            neg = dict(attrs.get("negative", {}))
            neg["reasons"] = [*neg.get("reasons", []), reason]
            if verification:
                neg["verifications"] = [*neg.get("verifications", []), verification]
            attrs["negative"] = neg
            node.state_attributes = attrs
            node.body += f"# 否决原因：{reason}\n" + (f"# 验证：{verification}\n" if verification else "")

        return store.modify(node_id, add_reason)
    body = f"# 假设：{hypothesis}\n# 否决原因：{reason}\n"
    if verification:
        body += f"# 验证：{verification}\n"
    node = Node(
        id=node_id,
        layer="rejected",
        body=body,
        importance=0.0,
        state_attributes={
            "negative": {
                "kind": "rejected",
                "hypothesis": hypothesis,
                "reasons": [reason],
                "verifications": [verification] if verification else [],
            }
        },
    )
    return store.add(node)


def unresolved_id(question: str, key: str = "", scope: Any = None) -> str:
    """Id of the unresolved/ entry for a question (or its ``key``), as :func:`rejected_id`."""
    return f"unr_{_hash(*_scope_parts(scope), key or question)}"


def add_unresolved(
    store: StoreEngine,
    question: str,
    clues: Iterable[str] | str | None = None,
    goal: str = "",
    *,
    key: str = "",
    extra: Mapping[str, Any] | None = None,
) -> Node:
    question = _text(question, "question")
    node_id = unresolved_id(question, key, store.scope)
    if node_id in store:
        return store.get(node_id)
    clue_list = _listing(clues)
    body = f"# 问题：{question}\n"
    if clue_list:
        body += f"# 已知线索：{'；'.join(clue_list)}\n"
    if goal:
        body += f"# 目标：{goal}\n"
    attrs: dict[str, Any] = {
        "negative": {"kind": "unresolved", "question": question, "clues": clue_list, "goal": goal}
    }
    if extra:
        attrs.update(extra)
    return store.add(Node(id=node_id, layer="unresolved", body=body, importance=0.5, state_attributes=attrs))


# -- verification -------------------------------------------------------------------


def verify(store: StoreEngine, node_id: str, evidence: str, verdict: str) -> Node:
    if verdict not in VERDICTS:
        raise InvalidVerdictError(
            f"unknown verdict {short_repr(verdict)} for node {node_id!r}; "
            f"expected one of {', '.join(VERDICTS)}"
        )
    evidence = _evidence(evidence, node_id)
    if node_id not in store:
        store.refresh()
        if node_id not in store:
            raise NodeNotFoundError(node_id)

    def apply(node: Node) -> None:
        before = node.confidence if node.confidence is not None else DEFAULT_CONFIDENCE
        after = before
        if verdict == "confirmed":
            after = min(1.0, round(before + CONFIRM_STEP, 10))
        elif verdict == "weakened":
            after = max(0.0, round(before - WEAKEN_STEP, 10))
        entry: dict[str, Any] = {
            "ts": time.time(),
            "verdict": verdict,
            "evidence": evidence,
            "confidence_before": before,
            "confidence_after": after,
        }
        if verdict == "falsified":
            entry["from_layer"] = node.layer
            attrs = dict(node.state_attributes or {})
            if node.layer != "rejected" or not isinstance(attrs.get("falsified"), dict):
                # falsified again in rejected/: the first record (and the layer it names) stands
                attrs["falsified"] = {"evidence": evidence, "from_layer": node.layer, "ts": entry["ts"]}
            node.layer = "rejected"
            node.importance = 0.0
            node.state_attributes = attrs
        node.confidence = after
        node.verification_history = bounded_history([*node.verification_history, entry])

    return store.modify(node_id, apply)


# -- reflection ---------------------------------------------------------------------


@dataclass(frozen=True)
class Reflection:
    """One reflection record: the information gap and its derivatives at step ``t``."""

    t: int
    ts: float
    query: str
    total: int
    accepted: int
    d: float
    dd: float
    d2d: float
    states: dict[str, int] = field(default_factory=dict)
    #: the scope of the handle that reflected (absent: a handle without agent or workspace,
    #: or without scope at all), and the most sensitive level it read (its query may tell)
    agent: str | None = None
    workspace: str | None = None
    sensitivity: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("agent", "workspace", "sensitivity"):
            if out[key] is None:
                del out[key]
        return out


def _states_of(results: Sequence[Any], feedback: Any) -> list[str]:
    states: list[str] = []
    for r in results:
        state = r.get("state") if isinstance(r, Mapping) else getattr(r, "state", r)
        states.append(state if isinstance(state, str) else "")
    if feedback is None:
        _check_states(states, "result")
        return states
    if isinstance(feedback, Mapping):
        ids = [r.get("id") if isinstance(r, Mapping) else getattr(r, "id", None) for r in results]
        for i, node_id in enumerate(ids):
            if node_id in feedback:
                states[i] = feedback[node_id]
        unknown = set(feedback) - set(ids)
        if unknown:
            raise InvalidVerdictError(
                f"feedback names ids not in the results: {', '.join(sorted(map(str, unknown)))}"
            )
    else:
        fb = list(feedback)
        if len(fb) != len(states):
            raise InvalidVerdictError(f"feedback has {len(fb)} states for {len(states)} results")
        states = fb
    _check_states(states, "feedback")
    return states


def _check_states(states: Sequence[str], what: str) -> None:
    for s in states:
        if s not in STATES:
            raise InvalidVerdictError(f"{what} state {s!r} is not one of {', '.join(STATES)}")


def read_reflections(store: StoreEngine) -> list[Reflection]:
    """The reflection records the caller may read, oldest first: every one for a handle
    without scope, only its own scope's for a scoped handle (the query text is theirs)."""
    out = []
    scope = store.scope
    for rec in store.log(paths.REFLECTION_DIR).read():
        try:
            r = Reflection(**rec)
        except TypeError:
            continue  # not a reflection record
        if scope is None or (
            (r.agent, r.workspace) == (scope.agent, scope.workspace)
            and visibility.rank(r.sensitivity) <= visibility.rank(scope.max_sensitivity)
        ):
            out.append(r)
    return out


def _key(store: StoreEngine) -> tuple[str | None, str | None, str | None]:
    scope = store.scope
    return (scope.agent, scope.workspace, scope.max_sensitivity) if scope is not None else (None, None, None)


def _last(store: StoreEngine) -> Reflection | None:
    """The last record of the caller's own series (its agent, workspace and
    sensitivity; none for an unscoped handle), over which t, dD/dt and d²D/dt² run:
    another agent's searches are not this one's gap. Read from the end, so a reflect
    does not rebuild the whole record (the log itself is read incrementally)."""
    key = _key(store)
    for rec in store.log(paths.REFLECTION_DIR).newest_first():
        try:
            r = Reflection(**rec)
        except TypeError:
            continue  # not a reflection record
        if (r.agent, r.workspace, r.sensitivity) == key:
            return r
    return None


def reflect(
    store: StoreEngine,
    query: str,
    results: Sequence[SearchResult | Mapping[str, Any] | str],
    feedback: Mapping[str, str] | Sequence[str] | None = None,
    *,
    now: float | None = None,
) -> Reflection:
    if not isinstance(query, str) or has_surrogate(query):
        raise InvalidArgumentError(f"reflect: query must be text, got {short_repr(query)}", name="query")
    if now is not None and (isinstance(now, bool) or not isinstance(now, int | float) or not finite(now)):
        why = f"reflect: now must be seconds since the epoch, got {short_repr(now)}"
        raise InvalidArgumentError(why, name="now")
    states = _states_of(results, feedback)
    total = len(states)
    accepted = sum(1 for s in states if s == "ACCEPT")
    d = 1.0 - (accepted / total if total else 0.0)
    counts = {s: states.count(s) for s in STATES if s in states}
    log = store.log(paths.REFLECTION_DIR)
    with log.locked(store.lock_timeout):
        prev = _last(store)
        if prev is not None:
            t = prev.t + 1
            dd = d - prev.d
            d2d = dd - prev.dd if prev.t >= 1 else 0.0
        else:
            t, dd, d2d = 0, 0.0, 0.0
        rec = Reflection(
            t=t,
            ts=time.time() if now is None else now,
            query=query,
            total=total,
            accepted=accepted,
            d=round(d, 12),
            dd=round(dd, 12),
            d2d=round(d2d, 12),
            states=counts,
            agent=_key(store)[0],
            workspace=_key(store)[1],
            sensitivity=_key(store)[2],
        )
        log.append([rec.to_dict()])
    return rec


def last_d(store: StoreEngine) -> Reflection | None:
    return _last(store)


# -- flywheel -----------------------------------------------------------------------


@dataclass(frozen=True)
class FlywheelStep:
    """What one flywheel step did: the open questions it created or found."""

    node_id: str | None
    conditions: tuple[str, ...]
    unresolved: tuple[str, ...]
    created: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flywheel_step(store: StoreEngine, error_report: Mapping[str, Any]) -> FlywheelStep:
    """Turn the missed conditions of a failure report into ``unresolved/`` entries.

    ``error_report`` keys: ``missed_conditions`` (list of strings, required),
    ``node_id`` (the node that failed, optional), ``query``, ``context``,
    ``description`` (all optional, kept as clues).
    """
    if not isinstance(error_report, Mapping):
        raise InvalidNodeError("error_report must be a mapping", field="error_report", value=error_report)
    conditions = _listing(error_report.get("missed_conditions"))
    if not conditions:
        raise InvalidNodeError(
            "error_report has no 'missed_conditions' (a list of conditions that were missed)",
            field="missed_conditions",
            value=error_report.get("missed_conditions"),
        )
    node_id = error_report.get("node_id")
    if node_id is not None and node_id not in store:
        store.refresh()
        if node_id not in store:
            raise NodeNotFoundError(node_id, "named by the error report")
    clues = []
    for key in ("description", "query"):
        if error_report.get(key):
            clues.append(f"{key}: {error_report[key]}")
    if error_report.get("context") is not None:
        clues.append("context: " + orjson.dumps(error_report["context"], default=str).decode())
    created, ids = [], []
    for cond in conditions:
        subject = f"节点 {node_id}" if node_id else "该情境"
        question = (
            f"条件「{cond}」是否使{subject}不适用？ "
            f'(Does the condition "{cond}" make {node_id or "it"} not applicable?)'
        )
        uid = unresolved_id(question, key=f"flywheel\x1f{node_id or ''}\x1f{cond}", scope=store.scope)
        existed = uid in store
        add_unresolved(
            store,
            question,
            clues,
            goal="verify the condition with external evidence, then resolve()",
            key=f"flywheel\x1f{node_id or ''}\x1f{cond}",
            extra={"flywheel": {"node_id": node_id, "condition": cond}},
        )
        ids.append(uid)
        if not existed:
            created.append(uid)
    return FlywheelStep(node_id, tuple(conditions), tuple(ids), tuple(created))


@dataclass(frozen=True)
class Resolution:
    unresolved_id: str
    confirmed: bool
    node: Node | None
    rejected_id: str | None


def resolve(store: StoreEngine, unresolved_id_: str, evidence: str, confirmed: bool) -> Resolution:
    """Settle a flywheel question with external evidence.

    Confirmed: the condition joins the concerned node's
    ``non_applicable_conditions`` (and its verification history); refuted: the
    question is recorded as a rejected hypothesis. Either way the question
    leaves ``unresolved/``. Evidence holds at most :data:`MAX_EVIDENCE_CHARS`
    characters, as for :func:`verify`: it joins the node's frontmatter.
    """
    evidence = _evidence(evidence, unresolved_id_)
    question = store.get(unresolved_id_)
    if question.layer != "unresolved":
        raise InvalidNodeError(
            f"node {unresolved_id_!r} is in {question.layer}/, not an open question in unresolved/",
            field="layer",
            value=question.layer,
            node_id=unresolved_id_,
        )
    fly = (question.state_attributes or {}).get("flywheel") or {}
    condition = fly.get("condition")
    target = fly.get("node_id")
    node: Node | None = None
    rej: str | None = None
    if confirmed:
        if not condition or not target:
            raise InvalidNodeError(
                f"open question {unresolved_id_!r} names no node and condition to apply",
                field="state_attributes.flywheel",
                node_id=unresolved_id_,
            )

        def add_condition(n: Node) -> None:
            if condition not in n.non_applicable_conditions:
                n.non_applicable_conditions = [*n.non_applicable_conditions, condition]
            n.verification_history = bounded_history(
                [
                    *n.verification_history,
                    {
                        "ts": time.time(),
                        "verdict": "condition_added",
                        "condition": condition,
                        "evidence": evidence,
                        "from": unresolved_id_,
                    },
                ]
            )

        node = store.modify(target, add_condition)
    else:
        text = (question.state_attributes or {}).get("negative", {}).get("question") or question.body
        rej = add_rejected(store, text, evidence, "flywheel resolution").id
    store.delete(unresolved_id_, force=True)
    return Resolution(unresolved_id_, confirmed, node, rej)
