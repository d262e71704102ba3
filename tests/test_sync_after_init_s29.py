"""Session 29: a file added by hand right after ``mdcg init`` is reported by ``mdcg sync``.

``init`` left no snapshot, so the next open built the index from the files, taking the
hand-added file in, and ``sync`` printed "in sync: nothing changed". ``init`` now saves
the index it built, and a clean sync whose open had to build the index from the files
says so instead of "nothing changed".
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from md_cg.cli import app


def _run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "400"}).invoke(app, ["--root", str(root), *args])
    return result.exit_code, result.stdout


def _hand(root: Path, node_id: str, body: str) -> None:
    (root / "knowledge").mkdir(parents=True, exist_ok=True)
    (root / "knowledge" / f"{node_id}.md").write_text(f"---\nid: {node_id}\n---\n{body}\n", encoding="utf-8")


def test_a_hand_file_after_init_is_reported_as_added(tmp_path: Path) -> None:
    root = tmp_path / "m"
    code, out = _run(root, "init")
    assert code == 0 and out.startswith(f"store ready at {root} (0 nodes)\n")
    assert (root / ".mdcg" / "index.snapshot").is_file()
    _hand(root, "hand1", "written by hand")
    assert _run(root, "sync") == (0, "added (1): hand1\n")
    assert _run(root, "sync") == (0, "in sync: nothing changed\n")


def test_a_clean_sync_after_a_build_from_the_files_says_so(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _run(root, "init")
    _hand(root, "hand1", "written by hand")
    _hand(root, "hand2", "也是手写的记忆")
    assert _run(root, "sync") == (0, "added (2): hand1, hand2\n")
    (root / ".mdcg" / "index.snapshot").unlink()
    want = "in sync: the index was built from the files at open (2 memories); nothing changed since\n"
    assert _run(root, "sync") == (0, want)
    assert _run(root, "sync") == (0, "in sync: nothing changed\n")


def test_init_is_done_when_the_index_cannot_be_saved(tmp_path: Path) -> None:
    # r4: a folder where the snapshot goes made init fail (exit 2) before it wrote the
    # merge-driver lines; the snapshot is only a speed-up, so init warns and finishes.
    root = tmp_path / "m"
    (root / ".mdcg" / "index.snapshot").mkdir(parents=True)
    result = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "400"}).invoke(app, ["--root", str(root), "init"])
    assert result.exit_code == 0
    ready = f"store ready at {root} (0 nodes)\n{root / '.gitattributes'} sends node files"
    assert result.stdout.startswith(ready)
    assert result.stderr == (
        "warning: the index was not saved (.mdcg/index.snapshot: is a folder where md-cg keeps a file; "
        "remove it); `mdcg health` says more\n"
    )
    assert (root / ".gitattributes").is_file() and (root / "knowledge").is_dir()
