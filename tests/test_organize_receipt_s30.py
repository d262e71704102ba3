"""A decision the receipt cannot record is refused before anything is applied (session 29's
left-alone list, r7): ``decisions=[{"action": "save", "index": 0, "why": {1, 2}}]`` saved
the memory and then failed to write the receipt, so the caller got a TypeError for a
change that was made, and the run stayed open to be applied again."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_organize import seeded

from md_cg.errors import OrganizeApplyError

FINE = {"layer": "knowledge", "title": "Bike", "content": "The user's bike is a blue Brompton."}


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(
    "bad",
    [{"why": {1, 2}}, {"why": object()}, {"why": {1: "non-string key"}}, {"n": 2**70}],
    ids=["set", "object", "int-key", "big-int"],
)
def test_an_unrecordable_decision_is_refused_before_anything_is_saved(
    tmp_path: Path, bad: dict[str, object], strict: bool
) -> None:
    store = seeded(tmp_path / "s")
    before = set(store.ids())
    dry = store.organize(candidates=[FINE])
    with pytest.raises(OrganizeApplyError) as err:
        store.organize(
            "apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0, **bad}], strict=strict
        )
    assert err.value.run_id == dry.run_id
    assert str(err.value).startswith("decision 0 is not JSON the receipt can record (")
    assert str(err.value).endswith("; nothing was applied")
    assert set(store.ids()) == before
    done = store.organize(
        "apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}], strict=strict
    )
    assert (done.status, done.applied, len(set(store.ids()) - before)) == ("ok", 1, 1)


def test_an_apply_whose_every_decision_was_skipped_leaves_the_run_open(tmp_path: Path) -> None:
    """Non-strict: a degraded apply that took no decision decided nothing (left alone in
    session 29, r7): a corrected apply of the same run was refused as already applied."""
    store = seeded(tmp_path / "s")
    before = set(store.ids())
    dry = store.organize(candidates=[FINE])
    bad = store.organize(
        "apply",
        run_id=dry.run_id,
        decisions=[{"action": "save", "index": 7}, {"action": "delete", "index": 0}],
    )
    assert (bad.status, bad.applied, [s.index for s in bad.skipped]) == ("degraded", 0, [0, 1])
    done = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
    assert (done.status, done.applied, len(set(store.ids()) - before)) == ("ok", 1, 1)
    with pytest.raises(OrganizeApplyError, match="was already applied"):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])


def test_a_discard_only_apply_still_uses_up_the_run(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    dry = store.organize(candidates=[FINE])
    first = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "discard", "index": 0}])
    assert (first.status, first.applied) == ("noop", 0)
    with pytest.raises(OrganizeApplyError, match="was already applied"):
        store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 0}])
