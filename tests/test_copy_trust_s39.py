"""A store's snapshot without a token file, a ``cp -a`` copy written to since its last
compaction, and a batch killed after its commit line then copied (session 39, attack atk7).

* f5 (medium): a committed ``.mdcg/index.snapshot`` without its token file (``git add -f
  .mdcg/index.snapshot``, or a repository from before token files) was trusted as it is in a
  fresh clone -- "a store without a token file vouches for any snapshot" --: a memory
  committed later as its ``.md`` file alone was missing from ``search`` and ``ids()``. No
  token file now makes the snapshot of unknown place: used only once the files bear it out.
* cpa-tail (low): an open of a copy compared the files with the snapshot's rows only, not
  with the rows plus the log after them, so a ``cp -a`` copy of a store with any write since
  its last compaction was built from the files (15 s at 100k instead of 0.75).
* copy-crash (medium): an ``add_many`` of 10 new ids and 10 overwrites SIGKILLed after its
  commit line, the store then copied with ``cp -a`` or ``cp -r``: the copy's sync put the 10
  new ids in place and none of the overwrites (``left_as_edited``), removing their temps --
  half a batch. Now a ``cp -a`` copy finishes it whole, a ``cp -r`` copy (no mtimes kept: a
  hand edit cannot be told from the copy) rolls it back whole and says so.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from conftest import tree_listing
from stresslib import stress
from test_merge import git

from md_cg import MdCG, Node, fsops, render, snapshot

SIX = [f"n{i}" for i in range(6)]


def _ids(store: MdCG, query: str) -> set[str]:
    return {r.id for r in store.search(query, record=False)[0] if not r.filler}


def _token(root: Path) -> Path:
    return root / snapshot.TOKEN_REL


# -- f5: a snapshot without a token file ----------------------------------------------------


def test_a_clone_of_a_snapshot_committed_without_its_token_reads_later_memories(tmp_path: Path) -> None:
    repo = tmp_path / "a"
    with MdCG(repo) as s:
        for i, node_id in enumerate(SIX):
            s.add(Node(id=node_id, layer="knowledge", body=f"note {i} about kafka"))
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "add", "-f", ".mdcg/index.snapshot")
    git(repo, "commit", "-q", "-m", "one")
    with MdCG(repo) as s:
        s.add(Node(id="n6", layer="knowledge", body="the WOMBAT note"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two")  # .md files only: the snapshot stays at commit one
    assert git(repo, "ls-files", ".mdcg").stdout.split() == [".mdcg/index.snapshot"]
    git(tmp_path, "clone", "-q", str(repo), "b")
    clone = tmp_path / "b"
    assert not _token(clone).exists()
    before = tree_listing(clone)
    with MdCG(clone, read_only=True) as s:
        assert s.loaded_from == "files"
        assert _ids(s, "WOMBAT") == {"n6"}
        assert s.ids() == [*SIX, "n6"]
    assert tree_listing(clone) == before  # a read-only handle writes nothing
    with MdCG(clone) as s:  # a writable one compacts on close: this place's pair
        assert s.loaded_from == "files"
        assert s.ids() == [*SIX, "n6"]
    assert _token(clone).exists()
    with MdCG(clone, auto_compact=None) as s:
        assert s.loaded_from == "snapshot"
        assert s._engine.snap_unplaced is None  # stamped: no stat walk
        assert _ids(s, "WOMBAT") == {"n6"}


def _tokenless(root: Path, late: bool) -> None:
    """A store as an earlier version left it: a snapshot, no token file; ``late``: one
    memory written after the last compaction (in the log only)."""
    with MdCG(root) as s:
        for i, node_id in enumerate(SIX):
            s.add(Node(id=node_id, layer="knowledge", body=f"note {i} about kafka"))
        s.compact_index()
    _token(root).unlink()
    if late:
        with MdCG(root, auto_compact=None) as s:
            s.add(Node(id="n6", layer="knowledge", body="the WOMBAT note"))
        _token(root).unlink(missing_ok=True)


def test_an_old_store_without_a_token_file_opens_from_its_snapshot_once_the_files_agree(
    tmp_path: Path,
) -> None:
    root = tmp_path / "m"
    _tokenless(root, late=True)
    before = tree_listing(root)
    with MdCG(root, read_only=True) as s:
        assert (s.loaded_from, s._engine.snap_unplaced is not None) == ("snapshot", True)
        assert s.ids() == [*SIX, "n6"]
        assert _ids(s, "WOMBAT") == {"n6"}
    assert tree_listing(root) == before  # nothing written, no token file made
    (root / "knowledge/orphan/n2.md").write_text(
        (root / "knowledge/orphan/n2.md").read_text().replace("note 2", "note 2 ZEBRA by hand")
    )
    with MdCG(root, read_only=True) as s:  # a file not as indexed: built from the files
        assert s.loaded_from == "files"
        assert _ids(s, "ZEBRA") == {"n2"}
    with MdCG(root) as s:
        assert s.ids() == [*SIX, "n6"]
    assert _token(root).exists()
    with MdCG(root, auto_compact=None) as s:
        assert (s.loaded_from, s._engine.snap_unplaced) == ("snapshot", None)
        assert _ids(s, "ZEBRA") == {"n2"}


def _compact_killed_before_token(root: str) -> None:
    """A first compaction (no token file yet) SIGKILLed between its snapshot and its token file."""
    real = fsops.atomic_write

    def write(base: str, rel: str, data: bytes) -> os.stat_result:
        if rel == snapshot.TOKEN_REL and os.path.exists(os.path.join(base, snapshot.REL)):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(base, rel, data)

    fsops.atomic_write = write  # type: ignore[assignment]
    with MdCG(root, auto_compact=None) as s:
        s.compact_index()


def test_a_kill_between_a_first_snapshot_and_its_token_file(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root, auto_compact=None) as s:
        for i, node_id in enumerate(SIX):
            s.add(Node(id=node_id, layer="knowledge", body=f"note {i} about kafka"))
    assert not (root / snapshot.REL).exists() and not _token(root).exists()
    assert stress.wait(stress.fork(_compact_killed_before_token, str(root))) == -signal.SIGKILL
    assert (root / snapshot.REL).exists() and not _token(root).exists()
    with MdCG(root, read_only=True) as s:
        assert (s.loaded_from, s._engine.snapshot_problem) == ("snapshot", None)  # borne out by the files
        assert s.ids() == SIX
    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="n6", layer="knowledge", body="the WOMBAT note"))
    with MdCG(root, read_only=True) as s:
        assert s.ids() == [*SIX, "n6"]


# -- cpa-tail: a cp -a copy written to since its last compaction ----------------------------


def test_a_cp_a_copy_with_writes_after_the_last_compaction_uses_the_snapshot(tmp_path: Path) -> None:
    src = tmp_path / "a"
    with MdCG(src) as s:
        s.add_many([Node(id=f"n{i}", layer="knowledge", body=f"memory {i} wombat") for i in range(50)])
        s.compact_index()
    with MdCG(src, auto_compact=None) as s:
        s.add(Node(id="late", layer="knowledge", body="one more ZEBRA"))
        s.update("n3", body="memory 3 edited KOALA")
        s.delete("n4")
    want = sorted([*(f"n{i}" for i in range(50) if i != 4), "late"])
    subprocess.run(["cp", "-a", str(src), str(tmp_path / "b")], check=True)
    subprocess.run(["cp", "-r", str(src), str(tmp_path / "c")], check=True)
    with MdCG(tmp_path / "b", read_only=True) as s:
        assert s.loaded_from == "snapshot"
        assert sorted(s.ids()) == want
        assert (_ids(s, "ZEBRA"), _ids(s, "KOALA")) == ({"late"}, {"n3"})
    with MdCG(tmp_path / "c", read_only=True) as s:  # mtimes not kept: from the files
        assert s.loaded_from == "files"
        assert sorted(s.ids()) == want
    shutil.rmtree(tmp_path / "b")
    subprocess.run(["cp", "-a", str(src), str(tmp_path / "b")], check=True)
    edited = tmp_path / "b/knowledge/orphan/n7.md"
    edited.write_text(edited.read_text().replace("memory 7", "memory 7 EMU by hand"))
    with MdCG(tmp_path / "b", read_only=True) as s:  # a file the log does not name, changed
        assert s.loaded_from == "files"
        assert _ids(s, "EMU") == {"n7"}


# -- copy-crash: a batch killed after its commit line, then copied ----------------------------

OLD = [f"old{i}" for i in range(10)]
NEW = [f"new{i}" for i in range(10)]


def _batch_and_die(root: str) -> None:
    s = MdCG(root)
    stress.crash_at(s, "logged")
    s.add_many(
        [Node(id=i, layer="knowledge", body=f"new {i}") for i in NEW]
        + [Node(id=i, layer="knowledge", body=f"version 2 of {i}") for i in OLD],
        overwrite=True,
    )


def _temps(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "knowledge").rglob("*.tmp"))


def _bodies(root: Path) -> dict[str, str]:
    with MdCG(root, read_only=True) as s:
        return {i: s.get(i).body for i in s.ids()}


def test_a_batch_killed_after_its_line_is_all_or_nothing_in_a_copy(tmp_path: Path) -> None:
    src = tmp_path / "a"
    with MdCG(src) as s:
        s.add_many([Node(id=i, layer="knowledge", body=f"version 1 of {i}") for i in OLD])
    assert stress.wait(stress.fork(_batch_and_die, str(src))) == -signal.SIGKILL
    assert len(_temps(src)) == 20
    v1 = {i: (src / f"knowledge/orphan/{i}.md").read_bytes() for i in OLD}
    subprocess.run(["cp", "-a", str(src), str(tmp_path / "b")], check=True)
    subprocess.run(["cp", "-r", str(src), str(tmp_path / "c")], check=True)
    applied = {**{i: f"new {i}" for i in NEW}, **{i: f"version 2 of {i}" for i in OLD}}
    for root in (tmp_path / "b", src):  # a cp -a copy finishes it as the original does
        with MdCG(root) as s:
            report = s.sync()
            assert (report.recovered, report.undone, report.left_as_edited) == (1, 0, ())
        assert _bodies(root) == applied
        assert _temps(root) == []
    with MdCG(tmp_path / "c") as s:  # a cp -r copy: nothing of it, and told
        report = s.sync()
        assert (report.recovered, report.undone, report.left_as_edited) == (1, 1, tuple(OLD))
        lines = render.sync_lines(report)
        assert (
            "interrupted writes undone (a file torn by a power cut, or in a copy of the store a file"
            " not as the write logged it): 1" in lines
        )
        assert [x for x in lines if x.startswith("interrupted writes left as edited")] == [
            "interrupted writes left as edited since (not finished) (10): " + ", ".join(OLD[: len(OLD)])
        ]
    assert _bodies(tmp_path / "c") == {i: f"version 1 of {i}" for i in OLD}
    assert _temps(tmp_path / "c") == []
    assert {i: (tmp_path / f"c/knowledge/orphan/{i}.md").read_bytes() for i in OLD} == v1
    assert not any((tmp_path / f"c/knowledge/orphan/{i}.md").exists() for i in NEW)


def test_a_hand_edit_in_a_cp_a_copy_after_the_kill_is_kept_and_the_batch_not_applied(
    tmp_path: Path,
) -> None:
    src = tmp_path / "a"
    with MdCG(src) as s:
        s.add_many([Node(id=i, layer="knowledge", body=f"version 1 of {i}") for i in OLD])
    assert stress.wait(stress.fork(_batch_and_die, str(src))) == -signal.SIGKILL
    subprocess.run(["cp", "-a", str(src), str(tmp_path / "b")], check=True)
    edited = tmp_path / "b/knowledge/orphan/old3.md"
    text = edited.read_text().replace("version 1 of old3", "old3 edited by hand")
    edited.write_text(text)
    with MdCG(tmp_path / "b") as s:
        report = s.sync()
        assert (report.recovered, report.undone, report.left_as_edited) == (1, 1, ("old3",))
    want = {i: f"version 1 of {i}" for i in OLD}
    want["old3"] = "old3 edited by hand"
    assert _bodies(tmp_path / "b") == want
    assert edited.read_text() == text
    assert _temps(tmp_path / "b") == []
