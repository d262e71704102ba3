"""Organize's size check and the retention decision (session 32, attack review r4): the dry
run checked a candidate's file before the write's retention decision added a temporary
memory's tier, expiry and reason (267 bytes here), so a candidate within those bytes of the
4 MiB limit was judged ``new`` and its apply failed as a whole, naming a node id never shown
(``the file would be 4,194,571 bytes``). The dry run now checks the node as the write makes
it, and apply checks it again as it will write it: a candidate whose decision changed since
the dry run is skipped by its index, the rest saved."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from md_cg import MdCG
from md_cg import organize as organize_mod
from md_cg.errors import InvalidNodeError
from md_cg.node import MAX_FILE_BYTES

#: The frontmatter and body framing of an undecided node of title ``big`` (no retention fields).
PLAIN = 141
#: What the decision adds to it for a temporary memory opened by "tomorrow" (tier, expiry, reason).
TEMP = 267
DENTIST = "Call the dentist tomorrow at 9am. "
SMALL = {"layer": "knowledge", "title": "small", "content": "Quux note small"}


def _big(prefix: str, size: int) -> dict[str, Any]:
    """A candidate whose undecided file is ``size`` bytes."""
    return {"layer": "knowledge", "title": "big", "content": prefix + "y" * (size - PLAIN - len(prefix))}


def _write_refusal(store: MdCG, candidate: dict[str, Any]) -> str:
    """What the write refuses of the node apply makes of ``candidate``, without its id."""
    node = organize_mod._new_node(candidate, time.time())
    with pytest.raises(InvalidNodeError) as err:
        store.apply_changes(add=[node])
    return str(err.value).removeprefix(f"node {node.id!r}: ")


def _file_size(store: MdCG, node_id: str) -> int:
    return (store.root / store.path_of(node_id)).stat().st_size


def test_a_candidate_over_the_limit_only_once_made_temporary_is_skipped_with_adds_reason(
    tmp_path: Path,
) -> None:
    store = MdCG(tmp_path / "s")
    band = _big(DENTIST, MAX_FILE_BYTES)  # the largest the old check passed: 4,194,571 bytes written
    edge = _big(DENTIST, MAX_FILE_BYTES - TEMP)  # written at exactly the limit
    reason = "the file would be 4,194,571 bytes, over the limit of 4 MiB"
    assert _write_refusal(store, band) == reason
    dry = store.organize(candidates=[band, edge, SMALL])  # was: band judged new
    assert [(s.index, s.field, s.reason) for s in dry.skipped] == [(0, "body", f"candidate 0: {reason}")]
    assert [(i.index, i.verdict) for i in dry.items] == [(1, "new"), (2, "new")]
    assert (dry.status, dry.counts["new"], dry.counts["skipped"]) == ("degraded", 2, 1)
    decisions = [{"action": "save", "index": 1}, {"action": "save", "index": 2}]
    r = store.organize("apply", run_id=dry.run_id, decisions=decisions, strict=True)
    assert (r.status, r.applied, r.skipped) == ("ok", 2, ())
    saved = store.get(r.saved_ids[0])
    assert (saved.retention_tier, _file_size(store, saved.id)) == ("temp", MAX_FILE_BYTES)
    assert store.get(r.saved_ids[1]).body == "# small\n\nQuux note small\n"
    store.close()


def test_apply_skips_a_candidate_a_dry_run_passed_before_the_check_made_the_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run recorded before this check judged the band candidate ``new``: apply skips
    it by its decision and candidate, with add's reason, and saves the rest (it failed as
    a whole: ``InvalidNodeError: node 'n_…': the file would be 4,194,571 bytes``)."""
    store = MdCG(tmp_path / "s")
    monkeypatch.setattr(organize_mod, "_unsaveable", lambda c: None)  # the old dry run
    dry = store.organize(candidates=[_big(DENTIST, MAX_FILE_BYTES), SMALL])
    monkeypatch.undo()
    assert [(i.index, i.verdict) for i in dry.items] == [(0, "new"), (1, "new")]
    decisions = [{"action": "save", "index": 0}, {"action": "save", "index": 1}]
    r = store.organize("apply", run_id=dry.run_id, decisions=decisions)
    assert (r.status, r.applied, r.counts["saved"]) == ("degraded", 1, 1)
    assert [(s.index, s.field, s.reason) for s in r.skipped] == [
        (0, "index", "decision 0: candidate 0: the file would be 4,194,571 bytes, over the limit of 4 MiB")
    ]
    assert [store.get(i).body for i in store.ids()] == ["# small\n\nQuux note small\n"]
    store.close()


def test_apply_skips_a_candidate_the_store_now_makes_temporary(tmp_path: Path) -> None:
    """The dry run's decision kept the candidate long (its file fits, to the byte); the
    store's markers, changed before the apply, make it temporary and too large: apply skips
    it by its index with add's reason and saves the other candidate."""
    root = tmp_path / "s"
    store = MdCG(root)
    quux = _big("Quux ", MAX_FILE_BYTES)
    dry = store.organize(candidates=[quux, SMALL])
    assert ([(i.index, i.verdict) for i in dry.items], dry.skipped) == ([(0, "new"), (1, "new")], ())
    store.close()
    markers = {"version": 1, "term": {"n3_this_once": ["quux"]}}
    (root / ".mdcg" / "retention_markers.json").write_text(json.dumps(markers), encoding="utf-8")
    store = MdCG(root)
    reason = _write_refusal(store, quux)
    assert reason == "the file would be 4,194,564 bytes, over the limit of 4 MiB"
    decisions = [{"action": "save", "index": 0}, {"action": "save", "index": 1}]
    r = store.organize(
        "apply", run_id=dry.run_id, decisions=decisions
    )  # was: InvalidNodeError, nothing saved
    assert (r.status, r.applied, r.counts["saved"]) == ("degraded", 1, 1)
    assert [(s.index, s.field, s.reason) for s in r.skipped] == [
        (0, "index", f"decision 0: candidate 0: {reason}")
    ]
    assert [store.get(i).body for i in store.ids()] == ["# small\n\nQuux note small\n"]
    store.close()
