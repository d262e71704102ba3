"""Session 33 (review r2): what ``mdcg sync`` tells of moves back and of broken files.

(a) A memory file moved back out of ``archive/`` by hand, and the moves and returns a
``git checkout`` of an older commit made, were taken in untold: the open's follow of the
log read each file where it is now, and noted only a file gone or edited (a move noted
nothing; an id whose last write deleted it was skipped). ``handmove.sh`` told only the
other hand move; a checkout in the clone that made the writes told ``changed m3; deleted
m2x, new`` -- not m1 moving bucket, m4 leaving ``archive/`` nor m2 coming back. The
follow notes them now (``moved``, ``added``), for commit lines and sync lines alike.

(b) After a git merge made without md-cg's merge driver, files holding conflict markers
(still there, unparsable) were told ``deleted (3): m1, m2, m3`` beside the same three
files under ``malformed``. They are malformed, not deleted: listed there only, as a
scoped handle already counted them (``withheld``), and told ``added`` by the sync after
they are fixed (they were out of the index meanwhile).

Every sync here runs in a process of its own, as the CLI does; git is real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
from conftest import git_env

import md_cg
from md_cg import MdCG

_REPO = str(Path(md_cg.__file__).resolve().parent.parent)  # the code under test, in each process
_ENV = git_env(Path(_REPO))


def _git(cwd: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, check=check, capture_output=True, text=True
    ).stdout


def _mdcg(root: Path, *args: str) -> tuple[int, list[str]]:
    """``mdcg --root root ...`` in a process of its own: exit status, stdout lines."""
    r = subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "--root", str(root), *args],
        env=_ENV,
        capture_output=True,
        text=True,
    )
    return r.returncode, r.stdout.splitlines()


def _path(root: Path, node_id: str) -> str:
    (found,) = [p for p in root.rglob(f"{node_id}.md") if ".mdcg" not in p.parts]
    return found.relative_to(root).as_posix()


def _commit(repo: Path, message: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)


# -- (a) moves back -------------------------------------------------------------------


def test_a_memory_moved_back_out_of_archive_by_hand_is_told_moved(tmp_path: Path) -> None:
    root = tmp_path / "s"
    assert _mdcg(root, "add", "--id", "m1", "--tag", "domain:fruit", "--body", "note one")[0] == 0
    assert _mdcg(root, "add", "--id", "m2", "--body", "note two")[0] == 0
    assert _mdcg(root, "archive", "m2")[0] == 0
    m1 = _path(root, "m1")
    assert _path(root, "m2") == "archive/knowledge/orphan/m2.md"
    (root / "knowledge" / "cond_other").mkdir()
    (root / m1).rename(root / "knowledge" / "cond_other" / "m1.md")
    (root / "archive/knowledge/orphan/m2.md").rename(root / "knowledge/orphan/m2.md")  # live again
    assert _mdcg(root, "sync") == (
        0,
        [
            f"moved (2): m1 {m1} -> knowledge/cond_other/m1.md, "
            "m2 archive/knowledge/orphan/m2.md -> knowledge/orphan/m2.md"
        ],
    )
    assert _mdcg(root, "sync") == (0, ["in sync: nothing changed"])
    code, out = _mdcg(root, "list", "--json")
    assert code == 0
    assert sorted((x["id"], x["path"]) for x in orjson.loads("\n".join(out))["items"]) == [
        ("m1", "knowledge/cond_other/m1.md"),
        ("m2", "knowledge/orphan/m2.md"),
    ]


def _four_then_changes(store: Path) -> tuple[str, str, str]:
    """m0..m4 (fruit) and a commit; then m1 to another bucket, m2 renamed m2x, m3 edited,
    m4 archived, ``new`` added and a second commit. Returns (fruit path of m1, its veg
    path, m4's archive path)."""
    with MdCG(store) as s:
        for i in range(5):
            s.add(id=f"m{i}", body=f"note {i} otter{i}", tags=["domain:fruit"])
    _git(store, "init", "-q")
    _commit(store, "c1")
    fruit = _path(store, "m1")
    with MdCG(store) as s:
        s.update("m1", tags=["domain:veg"])
        s.rename("m2", "m2x")
        s.update("m3", body="note 3 edited")
        s.archive(["m4"])
        s.add(id="new", body="new note")
    _commit(store, "c2")
    return fruit, _path(store, "m1"), _path(store, "m4")


def _checkout_lines(fruit: str, veg: str, archived: str) -> list[str]:
    return [
        "added (1): m2",
        "changed (1): m3",
        "deleted (2): m2x, new",
        f"moved (2): m1 {veg} -> {fruit}, m4 {archived} -> {fruit.replace('m1.md', 'm4.md')}",
    ]


def test_a_checkout_of_an_older_commit_in_the_clone_that_wrote_tells_every_change(tmp_path: Path) -> None:
    store = tmp_path / "o"
    fruit, veg, archived = _four_then_changes(store)
    assert archived.startswith("archive/knowledge/cond_fruit_")
    _git(store, "checkout", "-q", "HEAD~1")  # no hook: the next open follows the log
    assert _mdcg(store, "sync") == (0, _checkout_lines(fruit, veg, archived))
    assert _mdcg(store, "sync") == (0, ["in sync: nothing changed"])


def test_the_library_report_of_the_checkout_names_each_move(tmp_path: Path) -> None:
    store = tmp_path / "o"
    fruit, veg, archived = _four_then_changes(store)
    _git(store, "checkout", "-q", "HEAD~1")
    code = (
        "import sys, orjson\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s:\n    r = s.sync()\n"
        "moved = [[m.node_id, m.old_path, m.new_path] for m in r.moved]\n"
        "print(orjson.dumps([r.added, r.changed, r.deleted, moved]).decode())"
    )
    out = subprocess.run([sys.executable, "-c", code, str(store)], env=_ENV, check=True, capture_output=True)
    m4 = fruit.replace("m1.md", "m4.md")
    assert orjson.loads(out.stdout) == [
        ["m2"],
        ["m3"],
        ["m2x", "new"],
        [["m1", veg, fruit], ["m4", archived, m4]],
    ]


def test_a_checkout_in_a_clone_whose_sync_took_the_pull_in_tells_every_change(tmp_path: Path) -> None:
    """The clone that pulled the writes took them in by a sync line: its follow of that
    line notes the moves back too."""
    origin = tmp_path / "o"
    with MdCG(origin) as s:
        for i in range(5):
            s.add(id=f"m{i}", body=f"note {i} otter{i}", tags=["domain:fruit"])
    _git(origin, "init", "-q")
    _commit(origin, "c1")
    fruit = _path(origin, "m1")
    _git(tmp_path, "clone", "-q", "o", "b")
    b = tmp_path / "b"
    assert _mdcg(b, "search", "otter1")[0] == 0  # b uses its store once: an index with a snapshot
    with MdCG(origin) as s:
        s.update("m1", tags=["domain:veg"])
        s.rename("m2", "m2x")
        s.update("m3", body="note 3 edited")
        s.archive(["m4"])
        s.add(id="new", body="new note")
    _commit(origin, "c2")
    veg, archived = _path(origin, "m1"), _path(origin, "m4")
    _git(b, "pull", "-q")
    m4 = fruit.replace("m1.md", "m4.md")
    assert _mdcg(b, "sync") == (
        0,
        [
            "added (2): m2x, new",
            "changed (1): m3",
            "deleted (1): m2",
            f"moved (2): m1 {fruit} -> {veg}, m4 {m4} -> {archived}",
        ],
    )
    _git(b, "checkout", "-q", "HEAD~1")
    assert _mdcg(b, "sync") == (0, _checkout_lines(fruit, veg, archived))
    assert _mdcg(b, "sync") == (0, ["in sync: nothing changed"])


# -- (b) files a merge broke ----------------------------------------------------------


def _conflicted(tmp_path: Path) -> tuple[Path, str]:
    """Two clones change m1's importance; b merges a's commit with git's own merge (no
    driver): conflict markers in m1's frontmatter. Returns b's store and m1's path."""
    origin = tmp_path / "o"
    with MdCG(origin) as s:
        for i in range(3):
            s.add(id=f"m{i}", body=f"note {i}\nline two\n", tags=["domain:animal"], importance=0.5)
    _git(origin, "init", "-q")
    _commit(origin, "base")
    for c in "ab":
        _git(tmp_path, "clone", "-q", "o", c)
    a, b = tmp_path / "a", tmp_path / "b"
    for clone, value in ((a, 0.9), (b, 0.1)):
        with MdCG(clone) as s:
            s.update("m1", importance=value)
        _git(clone, "commit", "-qam", clone.name)
    _git(b, "pull", "-q", "--no-rebase", "../a", "HEAD", check=False)
    m1 = _path(b, "m1")
    assert _git(b, "status", "--short").splitlines() == [f"UU {m1}"]
    return b, m1


def _marker_line(text: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith("<<<<<<<"))


def test_a_file_a_merge_left_conflict_markers_in_is_malformed_not_deleted(tmp_path: Path) -> None:
    b, m1 = _conflicted(tmp_path)
    why = (
        f"a git merge left conflict markers in the frontmatter (the first on line "
        f"{_marker_line((b / m1).read_text())}): keep one version of each conflicting line and remove "
        "the markers (docs/git.md, True conflicts); md-cg's merge driver merges such edits itself where "
        "it is enabled (mdcg init --git; docs/git.md, Enabling the driver)"
    )
    assert _mdcg(b, "sync") == (1, [f"malformed (1): {m1}: {why}"])
    code, out = _mdcg(b, "sync", "--json")
    report = orjson.loads("\n".join(out))
    assert (code, report["deleted"], report["malformed"]) == (1, [], [{"path": m1, "reason": why}])
    code, out = _mdcg(b, "health", "--json")
    findings = [(f["kind"], f["path"], f["node_id"]) for f in orjson.loads("\n".join(out))["findings"]]
    assert (code, findings) == (1, [("unreadable_file", m1, None)])
    _git(b, "checkout", "--theirs", "--", m1)  # resolved: a's version
    assert _mdcg(b, "sync") == (0, ["added (1): m1"])
    assert _mdcg(b, "sync") == (0, ["in sync: nothing changed"])


_BROKEN = "---\nid: [unclosed\n---\nbody\n"


def test_a_file_broken_by_hand_after_another_process_wrote_it_is_malformed_not_deleted(
    tmp_path: Path,
) -> None:
    """The follow of the other process's write drops the id and notes its file gone; the
    file is there, broken: the open handle's sync lists it as malformed only."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="keep", body="kept")
        s.add(id="hb", body="hand broken")
    with MdCG(root) as s:
        code = (
            "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s: s.update('hb', body='new body')"
        )
        subprocess.run([sys.executable, "-c", code, str(root)], env=_ENV, check=True)
        assert s.refresh() == ["hb"]  # follows the update: the index holds the new file
        (root / "knowledge/orphan/hb.md").write_text(_BROKEN)
        report = s.sync()
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())
        assert [p for p, _ in report.malformed] == ["knowledge/orphan/hb.md"]
        (root / "knowledge/orphan/hb.md").write_text("---\nid: hb\n---\nfixed by hand\n")
        report = s.sync()
        assert (report.added, report.changed, report.deleted, report.malformed) == (("hb",), (), (), ())
        assert s.get("hb").body.strip() == "fixed by hand"


def test_a_file_deleted_by_hand_is_still_told_deleted(tmp_path: Path) -> None:
    root = tmp_path / "s"
    assert _mdcg(root, "add", "--id", "gone", "--body", "to be removed")[0] == 0
    assert _mdcg(root, "add", "--id", "broken", "--body", "to be broken")[0] == 0
    (root / "knowledge/orphan/gone.md").unlink()
    (root / "knowledge/orphan/broken.md").write_text(_BROKEN)
    code, out = _mdcg(root, "sync")
    assert code == 1
    assert out[0] == "deleted (1): gone"
    assert out[1].startswith("malformed (1): knowledge/orphan/broken.md: ")
    assert len(out) == 2
