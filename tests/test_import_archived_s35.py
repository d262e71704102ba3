"""Archived records imported again (attack a3 on session 35's import of archived records).

The comparison that tells an archived record ``unchanged`` read the record's own bytes,
not the node the import writes (a tier for a record with an expiry and none, an expiry
for a ``temp`` one): every run after the first was refused, so a killed import could not
be run again. A hand-placed file holding another id at the ``archive/`` path an archived
record goes to failed the whole import after three re-plans, naming the record's id.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import tree_listing

from md_cg import MdCG
from md_cg.transfer import import_nodes

RECORDS = [
    {
        "id": "x1",
        "layer": "knowledge",
        "body": "dentist at 9",
        "expires_at": "2030-01-01T00:00:00Z",
        "archived": True,
    },
    {"id": "x2", "layer": "knowledge", "body": "call back", "retention_tier": "temp", "archived": True},
    {"id": "x3", "layer": "knowledge", "body": "plain archived", "archived": True},
    {"id": "y1", "layer": "knowledge", "body": "live one", "expires_at": "2030-01-01T00:00:00Z"},
]


def _source(tmp_path: Path, records: list[dict]) -> Path:
    src = tmp_path / "src.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return src


def test_archived_records_with_a_decided_tier_or_expiry_are_unchanged_the_second_time(tmp_path: Path) -> None:
    root, src = tmp_path / "m", _source(tmp_path, RECORDS)
    with MdCG(root) as store:
        first = import_nodes(store, src)
        assert (first.created, first.unchanged, sorted(first.archived)) == (4, 0, ["x1", "x2", "x3"])
        before = tree_listing(root)
        for _ in range(2):
            again = import_nodes(store, src)
            assert (again.created, again.updated, again.unchanged, again.kept) == (0, 0, 4, [])
            assert tree_listing(root) == before  # not a byte or an mtime changed
        assert store.ids() == ["y1"]
        assert sorted(e.id for e in store.entries(include_archived=True)) == ["x1", "x2", "x3", "y1"]
        x2 = store.get("x2", include_archived=True)
        assert (x2.retention_tier, x2.expires_at is not None) == ("temp", True)


def test_a_hand_placed_file_at_an_archived_records_path_is_a_bad_record(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="zz", body="someone else's note")
    folder = root / "archive" / "knowledge" / "orphan"
    folder.mkdir(parents=True)
    (root / "knowledge" / "orphan" / "zz.md").rename(folder / "h1.md")
    src = _source(
        tmp_path,
        [
            {"id": "h1", "layer": "knowledge", "body": "mine", "archived": True},
            {"id": "ok", "layer": "knowledge", "body": "fine"},
        ],
    )
    why = (
        "the file archive/knowledge/orphan/h1.md holds memory 'zz' (edited by hand, or placed there); it is "
        "not written over -- move that file to its own name, or rename one of them"
    )
    with MdCG(root) as store:
        before = tree_listing(root)
        dry = import_nodes(store, src, dry_run=True, skip_bad=True)
        assert [(b.where, b.node_id, b.reason) for b in dry.bad] == [("line 1", "h1", why)]
        assert tree_listing(root) == before
        done = import_nodes(store, src, skip_bad=True)
        assert [(b.node_id, b.reason) for b in done.bad] == [("h1", why)]
        assert (done.created, store.ids()) == (1, ["ok"])
        assert (folder / "h1.md").read_text(encoding="utf-8").endswith("someone else's note\n")
