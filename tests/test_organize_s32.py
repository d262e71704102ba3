"""Organize input review (session 32, outside review r2): a candidates or decisions file
nested past the JSON reader's depth is a one-line ``error:`` naming the file (exit 2),
not a RecursionError traceback (exit 1); a candidate ``add`` would refuse for its size
(over the 4 MiB file limit, by characters or once written with its frontmatter) or for a
lone surrogate is skipped by the dry run with add's reason and its index, its text is not
kept in the run file, and apply never fails on a candidate the dry run accepted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_organize import seeded

import md_cg
from md_cg import MdCG
from md_cg import organize as organize_mod
from md_cg.errors import InvalidNodeError, OrganizeApplyError

ROOT = str(Path(md_cg.__file__).resolve().parent.parent)
BIG = {"layer": "knowledge", "title": "big", "content": "y" * 5_000_000}
SMALL = {"layer": "knowledge", "title": "small", "content": "Quux note small"}
DEEP = "[" * 100_000
DEEP_REASON = "cannot be read: lists or objects nested too deeply (organize takes a JSON list of objects)"


def _mdcg(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: the real exit code and stderr."""
    env = {**os.environ, "PYTHONPATH": ROOT, "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "--root", "s", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run_files(root: Path) -> dict[str, int]:
    folder = root / ".mdcg" / "organize"
    return {p.name: p.stat().st_size for p in folder.iterdir()} if folder.exists() else {}


def _add_refusal(store: MdCG, candidate: dict[str, Any]) -> InvalidNodeError:
    with pytest.raises(InvalidNodeError) as err:
        store.add(
            id="kp_x",
            layer="knowledge",
            body=organize_mod.node_body(candidate["title"], candidate["content"]),
        )
    return err.value


# -- 1. deeply nested JSON -------------------------------------------------------------------------


def test_a_deeply_nested_candidates_file_is_a_one_line_error_naming_it(tmp_path: Path) -> None:
    seeded(tmp_path / "s")
    (tmp_path / "deep.json").write_text(DEEP)
    out = _mdcg(tmp_path, "organize", "--dry-run", "deep.json")
    assert (out.returncode, out.stdout, out.stderr) == (2, "", f"error: --dry-run deep.json: {DEEP_REASON}\n")
    assert _run_files(tmp_path / "s") == {}  # no run was made


def test_a_deeply_nested_decisions_file_is_a_one_line_error_and_the_run_stays_open(tmp_path: Path) -> None:
    seeded(tmp_path / "s")
    (tmp_path / "c.json").write_text(json.dumps([SMALL]))
    (tmp_path / "deep.json").write_text(DEEP)
    dry = _mdcg(tmp_path, "organize", "--dry-run", "c.json", "--json")
    assert dry.returncode == 0, dry.stderr
    run_id = json.loads(dry.stdout)["run_id"]
    out = _mdcg(tmp_path, "organize", "--apply", run_id, "--decisions", "deep.json")
    assert (out.returncode, out.stdout, out.stderr) == (
        2,
        "",
        f"error: --decisions deep.json: {DEEP_REASON}\n",
    )
    (tmp_path / "d.json").write_text(json.dumps([{"action": "save", "index": 0}]))
    out = _mdcg(tmp_path, "organize", "--apply", run_id, "--decisions", "d.json", "--json")
    assert out.returncode == 0, out.stderr
    receipt = json.loads(out.stdout)
    assert (receipt["status"], receipt["applied"], receipt["skipped"]) == ("ok", 1, [])
    assert MdCG(tmp_path / "s").get(receipt["saved_ids"][0]).body == "# small\n\nQuux note small\n"


def test_a_deeply_nested_run_id_is_refused_by_name_not_with_a_recursion_error(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(OrganizeApplyError) as err:
        store.organize("apply", run_id=deep, decisions=[])
    assert str(err.value) == "run_id must name a dry run, got [[[[...]]]]"
    receipts = [r for r in organize_mod.runs(store) if r["kind"] == "apply"]
    assert [(r["status"], r["error"], r["applied"]) for r in receipts] == [
        ("failed", "run_id must name a dry run, got [[[[...]]]]", 0)
    ]


# -- 2. candidates add refuses for their size or encoding ----------------------------------------


def test_the_dry_run_skips_an_oversized_candidate_and_keeps_no_copy_of_it(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    refusal = _add_refusal(store, BIG)
    reason = str(refusal).removeprefix("node 'kp_x': ")
    assert reason.startswith("field 'body' is larger than the file limit of 4 MiB (got '# big\\n\\nyyy")
    (tmp_path / "c.json").write_text(json.dumps([BIG, SMALL]))
    out = _mdcg(tmp_path, "organize", "--dry-run", "c.json", "--json")
    assert (out.returncode, out.stderr) == (0, "")
    report = json.loads(out.stdout)
    assert report["status"] == "degraded"
    counts = {"total": 1, "exact": 0, "near": 0, "same_title": 0, "new": 1, "repeat": 0}
    assert report["counts"] == counts | {"skipped": 1, "truncated": 0}
    assert [(i["index"], i["verdict"]) for i in report["items"]] == [(1, "new")]
    assert report["skipped"] == [{"index": 0, "reason": f"candidate 0: {reason}", "field": "body"}]
    sizes = _run_files(tmp_path / "s")
    assert len(sizes) == 1 and max(sizes.values()) < 2_000  # was 5,000,726 bytes per dry run
    (record,) = organize_mod.runs(MdCG(tmp_path / "s"))
    assert [c["index"] for c in record["snapshot"]] == [1]
    # apply of the candidate the dry run accepted lands; of the one it skipped is refused by name
    (tmp_path / "d.json").write_text(
        json.dumps([{"action": "save", "index": 0}, {"action": "save", "index": 1}])
    )
    out = _mdcg(tmp_path, "organize", "--apply", report["run_id"], "--decisions", "d.json")
    assert out.returncode == 2
    assert out.stderr.startswith(
        "error: 1 decision(s) the dry run does not back: "
        "decision 0: candidate 0 was not accepted by this dry run; nothing was applied"
    )
    (tmp_path / "d.json").write_text(json.dumps([{"action": "save", "index": 1}]))
    out = _mdcg(tmp_path, "organize", "--apply", report["run_id"], "--decisions", "d.json", "--json")
    assert out.returncode == 0, out.stderr
    receipt = json.loads(out.stdout)
    assert (receipt["status"], receipt["applied"], receipt["skipped"]) == ("ok", 1, [])
    saved = MdCG(tmp_path / "s").get(receipt["saved_ids"][0])
    assert saved.body == "# small\n\nQuux note small\n"
    assert max(p.stat().st_size for p in (tmp_path / "s").rglob("*.md")) < 4 * 1024 * 1024


FILE_OVER = re.compile(r"the file would be (\d{1,3}(?:,\d{3})+) bytes, over the limit of 4 MiB")


@pytest.mark.parametrize(
    "content",
    ["é" * 3_000_000, "y" * (4 * 1024 * 1024 - 20)],
    ids=["two-byte-characters", "frontmatter-tips-it-over"],
)
def test_a_candidate_whose_file_would_pass_the_limit_is_skipped_as_add_skips_it(
    tmp_path: Path, content: str
) -> None:
    """Under the limit by characters, over it as a file: add refuses it when it writes."""
    store = seeded(tmp_path / "s")
    candidate = {"layer": "knowledge", "title": "t", "content": content}
    assert FILE_OVER.fullmatch(str(_add_refusal(store, candidate)).removeprefix("node 'kp_x': "))
    dry = store.organize(candidates=[candidate, SMALL])
    assert (dry.status, [(i.index, i.verdict) for i in dry.items]) == ("degraded", [(1, "new")])
    ((index, field, reason),) = [(s.index, s.field, s.reason) for s in dry.skipped]
    assert (index, field) == (0, "body")
    got = FILE_OVER.fullmatch(reason.removeprefix("candidate 0: "))
    assert got is not None and int(got.group(1).replace(",", "")) > 4 * 1024 * 1024
    r = store.organize("apply", run_id=dry.run_id, decisions=[{"action": "save", "index": 1}], strict=True)
    assert (r.status, r.applied) == ("ok", 1)


def test_a_lone_surrogate_candidate_is_skipped_not_a_crash(tmp_path: Path) -> None:
    store = seeded(tmp_path / "s")
    body_reason = "field 'body' holds a lone surrogate at character 9 and cannot be stored as UTF-8"
    candidates = [{"layer": "knowledge", "title": "t", "content": "bad \ud800 x"}, SMALL]
    assert str(_add_refusal(store, candidates[0])).removeprefix("node 'kp_x': ") == body_reason
    dry = store.organize(candidates=candidates)  # was: TypeError (orjson) recording the run
    assert [(s.index, s.field, s.reason) for s in dry.skipped] == [(0, "body", f"candidate 0: {body_reason}")]
    assert [(i.index, i.verdict) for i in dry.items] == [(1, "new")]


def test_apply_skips_an_oversized_entry_a_dry_run_recorded_before_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run recorded before the size check may hold one: apply skips it by its
    candidate (add's reason, no invented node id) and saves the rest."""
    store = seeded(tmp_path / "s")
    monkeypatch.setattr(organize_mod, "_unsaveable", lambda c: None)  # the old dry run
    dry = store.organize(candidates=[BIG, SMALL])
    monkeypatch.undo()
    assert [(i.index, i.verdict) for i in dry.items] == [(0, "new"), (1, "new")]
    reason = str(_add_refusal(store, BIG)).removeprefix("node 'kp_x': ")
    decisions = [{"action": "save", "index": 0}, {"action": "save", "index": 1}]
    r = store.organize("apply", run_id=dry.run_id, decisions=decisions)
    assert (r.status, r.applied, r.counts["saved"]) == ("degraded", 1, 1)
    assert [(s.index, s.field, s.reason) for s in r.skipped] == [
        (0, "index", f"decision 0: candidate 0: {reason}")
    ]
    assert store.get(r.saved_ids[0]).body == "# small\n\nQuux note small\n"
