"""Session 28 review (rev4): a file where a store folder belongs -- a bucket or layer
folder that is a regular file, or a symlink to a file -- refuses only its rows, in a
migration and its dry run as in an import (it stopped the whole migration: "Not a
directory"); a resumed run counts as written again only the rows it wrote."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from test_migrate_refused_s28 import SYMLINK_WHY, _ops_folder, _source

from md_cg import MdCG
from md_cg.migrate import journal_path, migrate

FILE_WHY = "is a file where md-cg keeps a folder; remove it"


def _plant(store: Path, rel: str, kind: str) -> None:
    """Put a file (or a symlink to a file outside the store) at ``rel`` of ``store``."""
    target = store / rel
    if target.is_dir():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        target.write_text("not a folder\n")
    else:
        outside = store.parent / "outside-file"
        outside.write_text("outside\n")
        os.symlink(outside, target)


CASES = [
    # (what is planted, where, why, refused ids, migrated ids)
    ("file", "bucket", FILE_WHY, ["n1", "n3", "n5"], ["n0", "n2", "n4"]),
    ("link", "bucket", SYMLINK_WHY, ["n1", "n3", "n5"], ["n0", "n2", "n4"]),
    ("file", "knowledge", FILE_WHY, ["n0", "n1", "n2", "n3", "n4", "n5"], []),
]


@pytest.mark.parametrize(("kind", "where", "why", "refused_ids", "migrated_ids"), CASES)
def test_a_file_where_a_folder_belongs_refuses_its_rows_and_the_rest_migrates(
    tmp_path: Path, kind: str, where: str, why: str, refused_ids: list[str], migrated_ids: list[str]
) -> None:
    src = _source(tmp_path / "s.sqlite")
    store = tmp_path / "st"
    MdCG(store).close()
    folder = _ops_folder() if where == "bucket" else "knowledge"
    _plant(store, folder, kind)
    refused = [(i, folder, why) for i in refused_ids]

    dry = migrate(src, store, dry_run=True, batch=2)
    assert dry.refused == refused and (dry.created, dry.kept) == (len(migrated_ids), []) and not dry.ok
    assert f"would refuse {len(refused_ids)} good row(s)" in dry.render()
    assert f"would create {len(migrated_ids)}, change 0" in dry.render()

    report = migrate(src, store, batch=2)
    assert report.refused == refused
    assert (report.created, report.mismatches, report.verified) == (len(migrated_ids), [], len(migrated_ids))
    assert not report.ok
    assert f"  {refused_ids[0]}: {folder}: {why}" in report.render()
    with MdCG(store, read_only=True) as s:
        assert s.ids() == migrated_ids
    assert os.path.islink(store / folder) == (kind == "link")  # left as it was
    if kind == "file":
        assert (store / folder).read_text() == "not a folder\n"
    else:
        assert (tmp_path / "outside-file").read_text() == "outside\n"

    os.unlink(store / folder)  # fixed: a run migrates the refused rows
    again = migrate(src, store, batch=2)
    assert again.ok and again.refused == []
    assert (again.created, again.unchanged) == (len(refused_ids), len(migrated_ids))


def test_a_resumed_run_counts_only_the_rows_it_wrote_again(tmp_path: Path) -> None:
    src = _source(tmp_path / "s.sqlite")
    store = tmp_path / "st"
    assert migrate(src, store).ok
    with MdCG(store) as s:
        s.forget("n0", "test")
    path = journal_path(src, store)
    path.write_text(json.dumps({**json.loads(path.read_bytes()), "complete": False}))
    for md in (store / "knowledge").rglob("*.md"):
        md.unlink()
    shutil.rmtree(store / _ops_folder())
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", store / _ops_folder())  # n1, n3, n5 refused; n0 forgotten (kept)

    report = migrate(src, store)
    assert (report.resumed_from, report.skipped, report.created) == (6, 0, 2)
    assert report.rewritten == 2  # n2, n4; not n0 (kept) nor n1, n3, n5 (refused)
    assert [i for i, _ in report.kept] == ["n0"]
    assert [i for i, _, _ in report.refused] == ["n1", "n3", "n5"]
    assert report.to_dict()["rewritten"] == 2
    assert "wrote again 2 row(s) the interrupted run had written whose file is gone" in report.render()
    assert os.listdir(tmp_path / "outside") == []
    with MdCG(store, read_only=True) as s:
        assert s.ids() == ["n2", "n4"]
