"""Census robustness (s30 review): files and folders it cannot use are named, a layer folder
it cannot read is an error, field counts grow with the data only, skipped rows are counted
by what they are."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

import md_cg.census as census_module
from census import main
from md_cg.census import census, census_of, render_markdown
from md_cg.errors import MdcgError
from md_cg.migrate import migrate
from md_cg.sample import bundled_sample_path

# getattr: each test fails on its own on the code before these names existed
SHOW_SKIPS = getattr(census_module, "SHOW_SKIPS", 20)
Skipped = getattr(census_module, "Skipped", dict)
REPO = Path(__file__).resolve().parents[1]
SYMLINK = "a symlink (md-cg never follows symlinks below the store root); ignored"


def _snapshot(*tops: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``tops`` (.mdcg/ included, symlinks not followed): mode, size,
    mtime and the sha256 of a regular file's bytes, or a symlink's target."""
    out: dict[str, tuple[object, ...]] = {}
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(top):
            for name in [*dirnames, *filenames]:
                p = Path(dirpath) / name
                st = p.lstat()
                if stat.S_ISREG(st.st_mode):
                    extra: object = hashlib.sha256(p.read_bytes()).hexdigest()
                elif stat.S_ISLNK(st.st_mode):
                    extra = os.readlink(p)
                else:
                    extra = None
                out[str(p)] = (st.st_mode, st.st_size, st.st_mtime_ns, extra)
    return out


def _mdcg(*args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MDCG_ROOT", None)
    cmd = [sys.executable, "-m", "md_cg.cli", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("census_s30") / "store"
    assert migrate(bundled_sample_path(), root).ok
    return root


@pytest.fixture
def store(migrated: Path, tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(migrated, root, symlinks=True)
    return root


def _buckets(root: Path) -> list[Path]:
    return sorted(p for p in (root / "knowledge").iterdir() if p.is_dir())


# -- 1. files and folders the census cannot use -------------------------------------------------


def test_symlinked_knowledge_folder_is_an_error_naming_it_and_nothing_changes(store: Path, tmp_path: Path):
    """Was: 0 records (layer knowledge), every scheme healthy, exit 0, nothing on stderr."""
    elsewhere = tmp_path / "knowledge_elsewhere"
    (store / "knowledge").rename(elsewhere)
    (store / "knowledge").symlink_to(elsewhere)
    before = _snapshot(store, elsewhere)
    message = (
        f"{store / 'knowledge'}: the knowledge/ layer folder is a symlink, and md-cg never follows "
        "symlinks below the store root, so none of its notes can be counted; "
        "move the folder it points to into the store in its place"
    )
    with pytest.raises(MdcgError) as caught:
        census_of(store)
    assert str(caught.value) == message
    with pytest.raises(MdcgError) as caught:
        census_of(store, layer=None)
    assert str(caught.value) == message
    done = _mdcg("census", store)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {message}\n")
    done = _mdcg("census", store, "--json", "--all-layers")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"error: {message}\n")
    assert _snapshot(store, elsewhere) == before


def test_a_layer_folder_that_is_a_file_is_an_error(store: Path):
    shutil.rmtree(store / "knowledge")
    (store / "knowledge").write_text("not a folder")
    with pytest.raises(MdcgError) as caught:
        census_of(store)
    assert str(caught.value) == (
        f"{store / 'knowledge'}: the knowledge/ layer folder is not a folder; "
        "move this file aside (the layer then has no notes)"
    )


def test_a_symlinked_layer_outside_the_census_is_named_not_fatal(store: Path, tmp_path: Path):
    (store / "anchor").rename(tmp_path / "anchor_elsewhere")
    (store / "anchor").symlink_to(tmp_path / "anchor_elsewhere")
    seen: list[tuple[str, str]] = []
    report = census_of(store, on_error=lambda where, why: seen.append((where, why)))
    assert report.records == 200
    assert seen == [(str(store / "anchor"), SYMLINK)]
    with pytest.raises(MdcgError, match=r"the anchor/ layer folder is a symlink"):
        census_of(store, layer=None)


def test_symlinks_fifos_and_loops_under_knowledge_are_named_by_path(store: Path, tmp_path: Path):
    """Was: each left out silently (200 - 10 - 1 records, nothing on stderr)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    b = _buckets(store)
    bucket_files = len(list(b[0].glob("*.md")))
    (b[0]).rename(outside / "bucket")
    b[0].symlink_to(outside / "bucket")  # a symlinked bucket folder
    note = sorted(b[1].glob("*.md"))[0]
    shutil.copy(note, outside / "x.md")
    note.unlink()
    note.symlink_to(outside / "x.md")  # a note pointing out of the store
    os.mkfifo(b[2] / "fifo.md")
    (b[2] / "dangling.md").symlink_to(b[2] / "nowhere.md")
    (b[2] / "loop.md").symlink_to(b[2] / "loop.md")
    (b[3] / "dirlink").symlink_to(outside)
    before = _snapshot(store, outside)
    seen: list[tuple[str, str]] = []
    report = census_of(store, on_error=lambda where, why: seen.append((where, why)))
    assert report.records == 200 - bucket_files - 1 == 189
    assert seen == [
        (str(b[0]), SYMLINK),
        (str(note), SYMLINK),
        (str(b[2] / "dangling.md"), SYMLINK),
        (str(b[2] / "fifo.md"), "not a regular file or folder; ignored"),
        (str(b[2] / "loop.md"), SYMLINK),
        (str(b[3] / "dirlink"), SYMLINK),
    ]
    skipped = Skipped()
    assert census_of(store, on_error=lambda where, why: None, skipped=skipped).records == 189
    assert (skipped.files, skipped.node_rows, skipped.edge_rows) == (6, 0, 0)
    done = subprocess.run(
        [sys.executable, "-m", "census", str(store)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0
    assert "189 records (layer `knowledge`)." in done.stdout
    assert done.stderr == "".join(f"skipped {w}: {r}\n" for w, r in seen) + "6 file(s) or folder(s) skipped\n"
    assert _snapshot(store, outside) == before


def test_skips_past_the_first_twenty_are_counted_not_listed(store: Path, capsys):
    bucket = _buckets(store)[0]
    for i in range(SHOW_SKIPS + 5):
        (bucket / f"gone{i:02d}.md").symlink_to(bucket / f"nowhere{i}.md")
    assert main([str(store)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        *(f"skipped {bucket / f'gone{i:02d}.md'}: {SYMLINK}" for i in range(SHOW_SKIPS)),
        "… and 5 more not listed",
        "25 file(s) or folder(s) skipped",
    ]


# -- 2. field counts: linear in the data, the Markdown table bounded ------------------------------


def _own_keys(n: int) -> Iterator[dict[str, object]]:
    for i in range(n):
        yield {"tags": ["domain:x"], "condition_space": {"observation_tool": "text", f"k{i}": i}}


def test_field_counts_grow_with_the_records_not_records_times_keys():
    """Was: one slot per record per key (2,000 records with a key each: 35 MB traced, 4x the 1,000's)."""
    peaks = []
    for n in (1000, 2000):
        tracemalloc.start()
        report = census(_own_keys(n))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert report.records == n and len(report.fields) == 4 + n
    assert peaks[1] < 2.5 * peaks[0] and peaks[1] < 4_000_000, peaks


def test_sparse_keys_keep_their_exact_figures():
    records = [
        {"condition_space": {"observation_tool": "a", "x": [1, 2], "only_null": None}},
        {"condition_space": {"observation_tool": "b", "x": [1, 2], "y": "p"}},
        {"condition_space": {"x": "[1, 2]", "y": "q"}},
        {"condition_space": {"observation_tool": "a"}},
    ]
    fields = {f.field: f.to_dict() for f in census(records).fields}
    assert list(fields) == [
        "observation_position",
        "observation_tool",
        "time_window",
        "existence_constraint",
        "x",
        "only_null",
        "y",
    ]
    assert fields["observation_tool"] == {
        "field": "observation_tool",
        "present": 3,
        "distinct": 2,
        "top_value": "a",
        "top_count": 2,
        "top_share": 0.5,
    }
    # [1, 2] and the string "[1, 2]" are two values (keyed by type since session 33)
    assert fields["x"] == {
        "field": "x",
        "present": 3,
        "distinct": 2,
        "top_value": [1, 2],
        "top_count": 2,
        "top_share": 0.5,
    }
    assert fields["only_null"]["present"] == 0 and fields["only_null"]["top_value"] is None
    assert fields["y"] == {
        "field": "y",
        "present": 2,
        "distinct": 2,
        "top_value": "p",
        "top_count": 1,
        "top_share": 0.25,
    }
    assert fields["observation_position"]["present"] == 0


def test_field_table_lists_twenty_keys_most_frequent_first_json_all():
    records = [{"condition_space": {f"k{i}": 1 for i in range(30) if i < 26 or j == 0}} for j in range(3)]
    records += [{"condition_space": {"rare": 1, "k29": 2}}]
    report = census(records)
    assert len(report.fields) == 4 + 31
    table = render_markdown(report).split("## condition_space fields\n", 1)[1].splitlines()
    rows = [line.split(" | ")[0].lstrip("| ") for line in table[3:] if line.startswith("| ")]
    assert rows == [
        "observation_position",
        "observation_tool",
        "time_window",
        "existence_constraint",
        *(f"k{i}" for i in range(16)),
    ]
    assert table[-1] == "… and 15 more keys (`--json` lists every key)."
    assert [f["field"] for f in report.to_dict()["fields"]][-2:] == ["k29", "rare"]
    fields = {f.field: f for f in report.fields}
    assert (fields["k29"].present, fields["k29"].distinct, fields["k26"].present) == (2, 2, 1)


# -- 3. skipped rows counted by what they are ---------------------------------------------------


@pytest.fixture
def bad_rows(tmp_path: Path) -> Path:
    src = tmp_path / "src.sqlite"
    conn = sqlite3.connect(src)
    with conn:
        conn.execute("CREATE TABLE nodes (id, layer, content, tags)")
        conn.executemany(
            "INSERT INTO nodes VALUES (?, ?, ?, ?)",
            [
                ("a", "knowledge", "fine", None),
                ("b", "knowledge", "bad tags", "[bad"),
                ("c", "knowledge", "fine too", None),
                ("d", "knowledge", "bad too", "{"),
            ],
        )
        conn.execute("CREATE TABLE edges (source, target, type)")
        conn.executemany(
            "INSERT INTO edges VALUES (?, ?, ?)",
            [("a", "c", "bogus"), ("c", "a", "weird"), ("a", "c", "causal"), ("zz", "a", "causal")],
        )
    conn.close()
    return src


def test_bad_edge_rows_are_not_counted_as_skipped_records(bad_rows: Path, capsys):
    """Was: ``6 unreadable file(s) or row(s) skipped`` for 2 node rows skipped (the 4
    others were edge rows; the census reads no edges, its figures lost nothing)."""
    seen: list[str] = []
    report = census_of(bad_rows, on_error=lambda where, why: seen.append(where))
    assert report.records == 2
    assert seen == [f"{bad_rows}: nodes rowid 2 (id 'b')", f"{bad_rows}: nodes rowid 4 (id 'd')"]
    skipped = Skipped()
    census_of(bad_rows, on_error=lambda where, why: None, skipped=skipped)
    assert (skipped.files, skipped.node_rows, skipped.edge_rows) == (0, 2, 3)
    assert main([str(bad_rows), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["records"] == 2
    assert captured.err.splitlines()[2:] == [
        "2 node row(s) skipped; 3 bad edge row(s) ignored (the census reads no edges)"
    ]
    done = _mdcg("census", bad_rows)
    assert done.returncode == 0
    assert done.stderr.splitlines()[-1] == (
        "2 node row(s) skipped; 3 bad edge row(s) ignored (the census reads no edges)"
    )
    assert [line.split(":")[1] for line in done.stderr.splitlines()[:-1]] == [
        " nodes rowid 2 (id 'b')",
        " nodes rowid 4 (id 'd')",
    ]
