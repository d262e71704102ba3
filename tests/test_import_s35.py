"""Session 35 review rE: import of archived records (a symlinked archive/ folder, a kill
mid-import, an archived record onto a live memory), the tags an import adds to every
record, a sqlite source that is a folder or a device, and NFC/NFD twins in the migration
report."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import md_cg
from md_cg import MdCG, import_nodes
from md_cg.errors import InvalidArgumentError, MdcgError
from md_cg.migrate import migrate
from md_cg.sqlite_source import SCHEMA_SQL, open_readonly

REPO = Path(md_cg.__file__).resolve().parents[1]  # the code under test, in the subprocesses too
SYMLINK = "is a symlink (md-cg never follows symlinks below the store root)"
FIX = "nothing is written through it -- fix it, then import again"


def _snap(root: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Every path under ``root`` (the store's own .mdcg folder too): kind, bytes or link
    target, mtime -- what a refused or kept import must leave as it was."""
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p), st.st_mtime_ns)
        elif p.is_file():
            out[rel] = ("file", p.read_bytes(), st.st_mtime_ns)
        else:
            out[rel] = ("dir", "", st.st_mtime_ns)
    return out


def _md_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.md") if ".mdcg" not in p.parts)


def _mdcg(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "md_cg.cli", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def _records(path: Path, *records: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _ids(store: MdCG, **show: bool) -> set[str]:
    return {n.id for n in store.list_nodes(**show)}


# -- 1. archived records: never live; a symlinked archive folder keeps them ----------------


@pytest.mark.parametrize("link", ["archive", "archive/knowledge", "archive/knowledge/orphan"])
def test_archived_record_under_a_symlinked_archive_folder_is_kept_dry_run_and_run(
    tmp_path: Path, link: str
) -> None:
    root, outside = tmp_path / "d", tmp_path / "outside"
    outside.mkdir()
    with MdCG(root) as store:
        store.add(id="seed", body="seed")
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(outside, target_is_directory=True)
    src = _records(
        tmp_path / "r.jsonl",
        {"id": "arc1", "body": "archived secret rec", "archived": True},
        {"id": "live1", "body": "live"},
    )
    why = f"{link} {SYMLINK}: {FIX}"
    for dry in (True, False):
        run = _mdcg(
            "-q",
            "import",
            str(src),
            "--root",
            str(root),
            "--json",
            *(["--dry-run"] if dry else []),
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        assert (report["created"], report["unchanged"]) == (1, 0)
        assert report["kept"] == [{"where": "line 1", "node_id": "arc1", "reason": why}]
    assert list(outside.iterdir()) == []
    with MdCG(root) as store:
        assert _ids(store) == {"seed", "live1"}
        assert _ids(store, include_archived=True) == {"seed", "live1"}
        assert "arc1" not in {r.id for r in store.search("secret", k=50)[0]}
    assert _md_files(root) == ["knowledge/orphan/live1.md", "knowledge/orphan/seed.md"]
    # again: the same, and nothing of the store is written
    before = _snap(root)
    again = _mdcg("-q", "import", str(src), "--root", str(root), cwd=tmp_path)
    assert (again.returncode, again.stderr) == (0, "")
    assert again.stdout.splitlines()[1:] == [f"  kept: line 1: {why}"]
    assert "0 new, 0 changed, 1 unchanged, 1 kept (the store's file or folder cannot be used)" in again.stdout
    assert _snap(root) == before
    # the folder fixed, the record goes straight to archive/
    (root / link).unlink()
    fixed = _mdcg("-q", "import", str(src), "--root", str(root), "--json", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert (json.loads(fixed.stdout)["created"], json.loads(fixed.stdout)["kept"]) == (1, [])
    assert _md_files(root) == [
        "archive/knowledge/orphan/arc1.md",
        "knowledge/orphan/live1.md",
        "knowledge/orphan/seed.md",
    ]


def test_archived_records_are_never_live_when_an_import_is_killed(tmp_path: Path) -> None:
    """A real SIGKILL after the third batch (of 10): the 30 archived records written are
    in archive/ and none is live (main wrote them live and archived them after the last
    batch: 30 live, 0 archived)."""
    root = tmp_path / "d"
    with MdCG(root) as store:
        store.add(id="seed", body="seed")
    src = _records(
        tmp_path / "r.jsonl",
        *({"id": f"a{i:03d}", "body": f"archived {i}", "archived": True} for i in range(100)),
    )
    script = textwrap.dedent(
        f"""
        import os, signal
        from md_cg import MdCG, import_nodes
        def progress(done, total):
            if done >= 30:
                os.kill(os.getpid(), signal.SIGKILL)
        import_nodes(MdCG({str(root)!r}), {str(src)!r}, batch=10, progress=progress)
        """
    )
    run = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == -signal.SIGKILL
    with MdCG(root) as store:
        store.sync()
        assert _ids(store) == {"seed"}
        assert _ids(store, include_archived=True) == {"seed"} | {f"a{i:03d}" for i in range(30)}
    archived = [f"archive/knowledge/orphan/a{i:03d}.md" for i in range(30)]
    assert _md_files(root) == [*archived, "knowledge/orphan/seed.md"]
    # the same import run again finishes it: every record archived, none live
    with MdCG(root) as store:
        report = import_nodes(store, src, batch=10)
        assert (report.created, report.unchanged, report.kept) == (70, 30, [])
        assert _ids(store) == {"seed"}
        assert len(_ids(store, include_archived=True)) == 101


# -- 2. an archived record onto a live memory: kept live ----------------------------------


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("same", [True, False])
def test_archived_record_never_archives_a_live_memory(tmp_path: Path, overwrite: bool, same: bool) -> None:
    root = tmp_path / "B"
    with MdCG(root) as store:
        store.add(id="X", body="shared memory 共享", stamp=False, created_at=1.7e9)
        store.add(id="Y", body="other", stamp=False, created_at=1.7e9)
    body = "shared memory 共享" if same else "the source's other text"
    src = _records(
        tmp_path / "a2.jsonl",
        {"id": "X", "body": body, "created_at": "2023-11-14T22:13:20Z", "archived": True},
        {"id": "Z", "body": "new one", "archived": True},
    )
    why = (
        "id 'X' is a live memory here (knowledge/orphan/X.md); an import never archives a live memory, "
        "not even with --overwrite: archive it (mdcg archive X) if that is meant"
    )
    before = _snap(root / "knowledge")
    flags = ["--overwrite"] if overwrite else []
    for dry in (["--dry-run"], []):
        run = _mdcg("-q", "import", str(src), "--root", str(root), *flags, *dry, cwd=tmp_path)
        assert (run.returncode, run.stderr) == (0, "")
        lines = run.stdout.splitlines()
        assert lines[0].startswith(
            f"{src}: 2 record(s): 1 new, 0 changed, 0 unchanged, "
            "1 archived in the source but live here (kept live) ("
        )
        assert lines[1:] == [f"  kept: line 1: {why}"]
    assert _snap(root / "knowledge") == before
    with MdCG(root) as store:
        assert _ids(store) == {"X", "Y"}
        assert _ids(store, include_archived=True) == {"X", "Y", "Z"}
        report = import_nodes(store, src, overwrite=overwrite)
        assert [(k.where, k.node_id, k.reason) for k in report.kept] == [("line 1", "X", why)]
        assert (report.created, report.updated, report.unchanged) == (0, 0, 1)
    assert _md_files(root) == [
        "archive/knowledge/orphan/Z.md",
        "knowledge/orphan/X.md",
        "knowledge/orphan/Y.md",
    ]


# -- 3. the tags an import adds: checked as add checks them, before anything --------------

BAD_TAGS = [
    ("", "holds a blank tag (''); a tag needs some text"),
    (" ", "holds a blank tag (' '); a tag needs some text"),
    ("\u200b", "holds a blank tag ('\\u200b'); a tag needs some text"),
    ("\u3164", "holds a blank tag ('\\u3164'); a tag needs some text"),
    ("a\x01b", "holds a tag with a control character ('a\\x01b'); a tag is one line of text"),
    ("a\nb", "holds a tag with a control character ('a\\nb'); a tag is one line of text"),
    (
        "ops\u200b",
        "holds the tag 'ops\\u200b' with the invisible format character U+200B (ZERO WIDTH SPACE), so it "
        "would look like another tag; tags must read as what they are, as ids must",
    ),
]


@pytest.mark.parametrize(("tag", "why"), BAD_TAGS)
def test_import_tag_option_is_checked_as_add_checks_it(tmp_path: Path, tag: str, why: str) -> None:
    src = _records(tmp_path / "r.jsonl", {"id": "t1", "body": "hello"})
    new = _mdcg(
        "-q", "import", str(src), "--root", str(tmp_path / "new"), "--tag", "ok", "--tag", tag, cwd=tmp_path
    )
    assert (new.returncode, new.stdout, new.stderr) == (2, "", f"error: --tag {why}\n")
    assert not (tmp_path / "new").exists()
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="seed", body="seed")
    before = _snap(root)
    old = _mdcg("-q", "import", str(src), "--root", str(root), "--tag", tag, cwd=tmp_path)
    assert (old.returncode, old.stderr) == (2, f"error: --tag {why}\n")
    assert _snap(root) == before
    add = _mdcg("--root", str(root), "add", "--id", "x", "--tag", tag, "hi", cwd=tmp_path)
    assert add.stderr == f"error: node 'x': field 'tags' {why}\n"  # the same words
    with MdCG(root) as store:
        with pytest.raises(InvalidArgumentError) as caught:
            import_nodes(store, src, tags=["ok", tag])
        assert (str(caught.value), caught.value.name) == (f"tags {why}", "tags")
    assert _snap(root) == before


@pytest.mark.parametrize(
    ("tags", "shown"), [("ops", "'ops'"), ([5], "[5]"), (["ok", None], "['ok', None]"), (b"ops", "b'ops'")]
)
def test_import_tags_not_a_list_of_strings_is_the_callers_error(
    tmp_path: Path, tags: object, shown: str
) -> None:
    src = _records(tmp_path / "r.jsonl", {"id": "t1", "body": "hello"})
    root = tmp_path / "s"
    with MdCG(root) as store:
        before = _snap(root)
        with pytest.raises(InvalidArgumentError) as caught:
            import_nodes(store, src, tags=tags)  # type: ignore[arg-type]
        assert str(caught.value) == f"tags must be a list of strings (got {shown})"
        assert _ids(store, include_archived=True) == set()
    assert _snap(root) == before


def test_import_good_tags_still_added(tmp_path: Path) -> None:
    src = _records(tmp_path / "r.jsonl", {"id": "t1", "body": "hello", "tags": ["a"]})
    with MdCG(tmp_path / "s") as store:
        import_nodes(store, src, tags=("ops", "domain:x"))
        assert store.get("t1").tags == ["a", "ops", "domain:x"]


# -- 4. a sqlite source that is a folder or a device ---------------------------------------


def test_sqlite_source_that_is_a_folder_or_a_device_is_named_so(tmp_path: Path) -> None:
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    cases = [
        (folder, "is a folder, not a sqlite database file: give the database file in it"),
        (
            Path("/dev/null"),
            "is not a regular file (a device, FIFO or socket): give the sqlite database file",
        ),
        (tmp_path / "missing.sqlite", "no such sqlite database file"),
    ]
    for src, why in cases:
        with pytest.raises(MdcgError) as caught:
            open_readonly(src)
        assert str(caught.value) == f"{src}: {why}"
        run = _mdcg("-q", "migrate", str(src), str(tmp_path / "d"), cwd=tmp_path)
        assert (run.returncode, run.stdout, run.stderr) == (2, "", f"error: {src}: {why}\n")
        assert not (tmp_path / "d").exists()
    assert list(folder.iterdir()) == []


# -- 5. NFC/NFD twins in the migration's text report ---------------------------------------


def test_migration_report_escapes_ids_that_differ_only_in_unicode_form(tmp_path: Path) -> None:
    dest = tmp_path / "store"
    with MdCG(dest) as store:
        store.add(id="caf\u00e9", body="café NFC in store")
        store.add(id="plain", body="plain one")
    src = tmp_path / "s.sqlite"
    conn = sqlite3.connect(src)
    conn.executescript(SCHEMA_SQL)
    with conn:
        conn.execute(
            "INSERT INTO nodes (id, layer, content, created_at) VALUES (?, 'knowledge', ?, 1.7e9)",
            ("cafe\u0301", "NFD twin of store café"),
        )
    conn.close()
    text = migrate(src, dest).render()
    kept = text.split("kept (the store's version stands) (1):\n", 1)[1]
    assert kept.splitlines()[0] == (
        "  'cafe\\u0301': the store holds 'caf\\u00e9', which differs from 'cafe\\u0301' only by letter "
        "case or Unicode normalisation (one file on macOS and Windows); rename one of them"
    )
    assert text.endswith("extra ids in dest (not in the source) (2):\n  'caf\\u00e9'\n  plain\n")
