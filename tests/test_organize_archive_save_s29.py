"""Organise, session 29 review (rev4, medium): apply skipped a save as "stored already"
when the same apply archived the memory that held the text, so the text was left in no
current memory. A memory an archive decision of the apply archives (before or after the
save in the list) no longer counts as holding the text; a decision that is refused
(so archives nothing) still does, and so does another memory holding the text."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG

COFFEE = {"layer": "knowledge", "title": "coffee ORDER", "content": "Oat-milk flat white, no sugar."}
BODY = "# Coffee order\n\nOat-milk flat white, no sugar."
SAVED = "# coffee ORDER\n\nOat-milk flat white, no sugar.\n"
ARCHIVE = {"action": "archive", "id": "m"}
SAVE = {"action": "save", "index": 0}


def store_with_m(root: Path) -> MdCG:
    store = MdCG(root)
    store.add(id="m", layer="knowledge", body=BODY)
    return store


@pytest.mark.parametrize("decisions", [[ARCHIVE, SAVE], [SAVE, ARCHIVE]], ids=["archive-first", "save-first"])
def test_a_save_goes_through_when_the_same_apply_archives_the_memory_holding_its_text(
    tmp_path: Path, decisions: list[dict[str, object]]
) -> None:
    """The reviewer's repro (r1_organize_archive_save.py), in either order."""
    store = store_with_m(tmp_path / "s")
    r = store.organize("dryRun", candidates=[COFFEE])
    assert [(i.verdict, i.match and i.match.id) for i in r.items] == [("exact", "m")]
    rec = store.organize("apply", run_id=r.run_id, decisions=decisions, strict=True)
    assert (rec.status, rec.applied, rec.archived_ids, rec.skipped) == ("ok", 2, ("m",), ())
    assert len(rec.saved_ids) == 1
    assert store.ids() == [rec.saved_ids[0]]
    assert store.get(rec.saved_ids[0]).body == SAVED
    assert store.get("m", include_archived=True).body == BODY  # archived, kept


def test_a_refused_archive_does_not_free_the_text(tmp_path: Path) -> None:
    """An archive decision naming an id the dry run did not match archives nothing, so
    the save is still skipped as stored already in the match."""
    store = store_with_m(tmp_path / "s")
    store.add(id="other", layer="knowledge", body="Something else entirely")
    r = store.organize("dryRun", candidates=[COFFEE])
    decisions = [{"action": "archive", "id": "other"}, SAVE]
    rec = store.organize("apply", run_id=r.run_id, decisions=decisions)
    assert (rec.status, rec.applied, rec.saved_ids, rec.archived_ids) == ("degraded", 0, (), ())
    assert [(s.index, s.id, s.reason) for s in rec.skipped] == [
        (0, "other", "decision 0: node 'other' was not flagged as a match by this dry run"),
        (1, "m", "decision 1: candidate 0's text is stored already, as 'm'"),
    ]
    assert sorted(store.ids()) == ["m", "other"]


def test_another_memory_holding_the_text_still_counts(tmp_path: Path) -> None:
    store = store_with_m(tmp_path / "s")
    r = store.organize("dryRun", candidates=[COFFEE])
    store.add(id="m2", layer="knowledge", body=BODY)  # stored since the dry run
    rec = store.organize("apply", run_id=r.run_id, decisions=[ARCHIVE, SAVE])
    assert (rec.status, rec.applied, rec.saved_ids, rec.archived_ids) == ("degraded", 1, (), ("m",))
    assert [(s.index, s.id, s.reason) for s in rec.skipped] == [
        (1, "m2", "decision 1: candidate 0's text is stored already, as 'm2'")
    ]
    assert store.ids() == ["m2"]
