"""The sweep removes an expired memory only when its file is the only one holding its id
(session 27 review: a long-tier copy of an expired id, in another folder, was deleted with
it and the report did not say so). Real files; the long copy's bytes are compared."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from md_cg import MdCG, Node, Scope
from md_cg.cli import app

LONG_COPY = (
    "---\nid: x\nlayer: self\nretention_tier: long\n---\nKEEP THIS: a different, long-tier copy of x\n"
)
WHY = (
    "expired at knowledge/orphan/x.md, but other files hold this id too ({where}); the sweep removes "
    "only a memory's sole file: remove the copy you do not want, then sync"
)


def _expired(root: Path, node_id: str = "x", **fields: str) -> None:
    with MdCG(root) as s:
        node = Node(
            id=node_id,
            layer="knowledge",
            body="pick up parcel",
            retention_tier="temp",
            expires_at=time.time() - 60,
            **fields,  # type: ignore[arg-type]
        )
        s.add_many([node], stamp=False)


def test_an_expired_id_with_a_long_copy_in_another_folder_is_kept_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _expired(root)
    _expired(root, "y")
    (root / "self" / "x.md").write_text(LONG_COPY, encoding="utf-8")
    with MdCG(root) as s:
        assert s.sync().duplicates == (("x", "self/x.md"),)
        kept = (("x", WHY.format(where="self/x.md")),)
        dry = s.sweep(dry_run=True)
        assert (dry.expired, dry.removed, dry.kept) == (("x", "y"), (), kept)
        report = s.sweep(dry_run=False)
        assert (report.expired, report.removed, report.kept) == (("x", "y"), ("y",), kept)
        assert report.to_dict()["kept"] == [{"id": "x", "reason": WHY.format(where="self/x.md")}]
        assert [t["id"] for t in s.tombstones()] == ["y"]  # no tombstone for the kept id
    assert (root / "self" / "x.md").read_text(encoding="utf-8") == LONG_COPY
    assert (root / "knowledge" / "orphan" / "x.md").is_file()
    assert not (root / "knowledge" / "orphan" / "y.md").exists()


def test_a_copy_no_sync_has_seen_is_found_under_the_locks(tmp_path: Path) -> None:
    """The copy lands in archive/ after the store was opened and nothing re-read the folders:
    the check made under the ids' locks walks them (an archived copy keeps the id too)."""
    root = tmp_path / "m"
    _expired(root)
    with MdCG(root) as s:
        assert s.sweep(dry_run=True).kept == ()
        (root / "archive" / "self").mkdir(parents=True, exist_ok=True)
        copy = LONG_COPY.replace("layer: self", "layer: self\narchived: true")
        (root / "archive" / "self" / "x.md").write_text(copy, encoding="utf-8")
        report = s.sweep(dry_run=False)
        assert report.removed == ()
        assert report.kept == (("x", WHY.format(where="archive/self/x.md")),)
    assert (root / "archive" / "self" / "x.md").read_text(encoding="utf-8") == copy
    assert (root / "knowledge" / "orphan" / "x.md").is_file()


def test_a_copy_outside_the_handles_scope_keeps_the_id_unnamed(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _expired(root, agent_scope="a")
    other = LONG_COPY.replace("retention_tier: long", "retention_tier: long\nagent_scope: b")
    (root / "self" / "x.md").write_text(other, encoding="utf-8")
    with MdCG(root, scope=Scope(agent="a")) as s:
        report = s.sweep(dry_run=False)
        assert (report.expired, report.removed) == (("x",), ())
        assert report.kept == (("x", WHY.format(where="1 file(s) outside this handle's scope")),)
    assert (root / "self" / "x.md").read_text(encoding="utf-8") == other


def test_a_sole_expired_file_is_swept_as_before(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _expired(root)
    with MdCG(root) as s:
        report = s.sweep(dry_run=False)
        assert (report.expired, report.removed, report.kept) == (("x",), ("x",), ())
    assert not (root / "knowledge" / "orphan" / "x.md").exists()


def test_the_cli_names_the_kept_id(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _expired(root)
    (root / "self" / "x.md").write_text(LONG_COPY, encoding="utf-8")
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    line = f"kept x: {WHY.format(where='self/x.md')}\n"
    dry = runner.invoke(app, ["sweep", "--dry-run", "--root", str(root)])
    assert (dry.exit_code, dry.stdout) == (0, "expired (1): x; nothing removed\n" + line)
    done = runner.invoke(app, ["sweep", "--root", str(root)])
    assert (done.exit_code, done.stdout) == (0, "removed (0): none\n" + line)
    out = json.loads(runner.invoke(app, ["sweep", "--root", str(root), "--json"]).stdout)
    assert out["kept"] == [{"id": "x", "reason": WHY.format(where="self/x.md")}]
    assert (root / "self" / "x.md").read_text(encoding="utf-8") == LONG_COPY
