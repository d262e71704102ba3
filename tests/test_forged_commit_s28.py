"""Review round 2, session 28: a forged or foreign ``commit`` line in ``.mdcg/log``.

One well-formed line in the shard of a writer that does not exist deleted a memory for
good: the roll-forward removed the file at a del's path whatever id it held, and sync
said only "interrupted writes finished: 1". Now a del removes its file only when the
file holds the del's id; a removal done by recovery is named by sync; ``health`` names
what an open commit would do.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import orjson
from stresslib import stress
from typer.testing import CliRunner

from md_cg import MdCG, journal
from md_cg.cli import app
from md_cg.render import sync_lines

DEAD_SHARD = "999998_deadbeefdeadbeefdeadbeefdeadbee0.jsonl"


def _store(root: Path) -> str:
    with MdCG(root) as s:
        for i in (1, 2, 3):
            s.add(body=f"memory number {i} important", id=f"m{i}")
        return s.entry("m2").path


def _forge(root: Path, dels: list[list[str]]) -> None:
    line = {"ts": time.time_ns(), "seq": 1, "op": "commit", "put": [], "del": dels}
    (root / ".mdcg" / "log" / DEAD_SHARD).write_bytes(orjson.dumps(line) + b"\n")


def _cli(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["--root", str(root), *args])
    return result.exit_code, result.output


def test_a_del_naming_another_id_leaves_the_file_and_sync_reports_it(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _store(root)
    _forge(root, [["unrelated_id", rel]])
    with MdCG(root) as s:
        report = s.sync()
        assert report.recovered == 1
        assert report.foreign_deletes == (("unrelated_id", rel),)
        assert report.finished_deletes == ()
        assert report.deleted == ()
        assert report.problems
        assert s.get("m2").body.strip() == "memory number 2 important"
        assert sorted(s.ids()) == ["m1", "m2", "m3"]
        assert report.to_dict()["foreign_deletes"] == [{"id": "unrelated_id", "path": rel}]
    assert (root / rel).read_text().endswith("memory number 2 important\n")
    assert sync_lines(report) == [
        "interrupted writes finished: 1",
        "interrupted deletes not done: the file holds another memory or cannot be read "
        "(kept; see .mdcg/log) (1): "
        f"unrelated_id at {rel}",
    ]


def test_a_del_naming_the_file_stem_when_the_frontmatter_holds_another_id(tmp_path: Path) -> None:
    """The id is read as the index reads it: a file named ``m2.md`` whose frontmatter says
    ``id: other`` does not hold m2."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(body="the other one", id="other")
        rel = s.entry("other").path
    folder = rel.rsplit("/", 1)[0]
    (root / rel).rename(root / folder / "m2.md")
    with MdCG(root) as s:
        s.sync()
        assert s.entry("other").path == f"{folder}/m2.md"
    _forge(root, [["m2", f"{folder}/m2.md"]])
    with MdCG(root) as s:
        report = s.sync()
        assert report.foreign_deletes == (("m2", f"{folder}/m2.md"),)
        assert s.get("other").body.strip() == "the other one"
    assert (root / folder / "m2.md").is_file()


def test_a_same_id_del_rolls_forward_and_sync_names_the_removed_memory(tmp_path: Path) -> None:
    """A line naming m2 at m2's own unchanged file cannot be told from a forget whose
    process died: it is finished, and the CLI says which memory it removed."""
    root = tmp_path / "m"
    rel = _store(root)
    _forge(root, [["m2", rel]])
    code, out = _cli(root, "sync")
    assert code == 0
    assert out.splitlines() == [
        "interrupted writes finished: 1",
        f"interrupted deletes finished, files removed (1): m2 at {rel}",
    ]
    assert not (root / rel).exists()


def test_health_names_what_an_open_commit_would_do(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _store(root)
    _forge(root, [["m2", rel]])
    with MdCG(root) as s:
        found = s.health().by_kind("open_commit")
        assert [f.detail for f in found] == [
            f"a write of 1 node(s) interrupted by a crash (log {DEAD_SHARD}, record 1); sync() or the "
            f"next write of these ids finishes it: removes m2 ({rel})"
        ]
    assert (root / rel).is_file()


def test_health_bounds_the_ids_it_names(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _store(root)
    folder = rel.rsplit("/", 1)[0]
    _forge(root, [[f"x{i}", f"{folder}/x{i}.md"] for i in range(8)])
    with MdCG(root) as s:
        (finding,) = s.health().by_kind("open_commit")
    plan = ", ".join(f"x{i} ({folder}/x{i}.md)" for i in range(5))
    assert finding.detail.endswith(f"finishes it: removes {plan}, ... (+3 more)")


def _forget_and_die(root: str) -> None:
    s = MdCG(root)
    s._engine.journal.fault = lambda step: os.kill(os.getpid(), signal.SIGKILL) if step == "logged" else None
    s.forget("m2", reason="test")


def test_a_killed_forget_is_finished_and_named(tmp_path: Path) -> None:
    """A real forget killed after its commit line: recovery removes the file (it holds
    m2) and sync names it."""
    root = tmp_path / "m"
    rel = _store(root)
    assert stress.wait(stress.fork(_forget_and_die, str(root))) == -signal.SIGKILL
    assert (root / rel).is_file()
    with MdCG(root) as s:
        report = s.sync()
        assert (report.recovered, report.finished_deletes, report.foreign_deletes) == (1, (("m2", rel),), ())
        assert sorted(s.ids()) == ["m1", "m3"]
    assert not (root / rel).exists()


def test_roll_forward_without_id_of_keeps_its_old_behaviour(tmp_path: Path) -> None:
    """The id check is the engine's (``Journal.id_of``); called bare, a del is done."""
    root = tmp_path / "m"
    rel = _store(root)
    c = journal.Commit(shard=DEAD_SHARD, seq=1, puts=(), dels=(("unrelated_id", rel),))
    out = journal.Outcome()
    assert journal.roll_forward(str(root), c, outcome=out)
    assert (out.removed, out.foreign) == ([("unrelated_id", rel)], [])
    assert not (root / rel).exists()
