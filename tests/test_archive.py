"""Archive, unarchive and apply_changes: byte-for-byte moves in one journal commit."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from stresslib import stress

from md_cg import MdCG, Node
from md_cg.errors import DuplicateIdError, InvalidArgumentError, NodeNotFoundError, UnsafePathError
from md_cg.paths import rel_problem


def _files(root: Path) -> dict[str, bytes]:
    """Every file under the store root outside .mdcg/, by relative path."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".mdcg"]
        for name in filenames:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def _store(root: Path) -> MdCG:
    s = MdCG(root, auto_compact=None)
    s.add(id="k1", layer="knowledge", body="binary search halves the range", tags=["domain:algo"])
    s.add(id="s1", layer="self", body="I prefer tea to coffee")
    s.add(id="e1", layer="contextual", body="met Ana at the station")
    return s


def test_archive_moves_bytes_and_unarchive_restores_everything(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _store(root) as s:
        # A hand-placed note in a sub-folder with a stem other than its id.
        hand = root / "self" / "notes" / "my-note.md"
        hand.parent.mkdir()
        hand.write_bytes(b"---\nid: hand1\nlayer: self\n---\nwritten by a person\n")
        s.sync()
        before = _files(root)
        k1_path = s.entry("k1").path
        assert s.archive(["k1", "hand1"], reason="duplicate") == ["k1", "hand1"]
        after = _files(root)
        assert after[f"archive/{k1_path}"] == before[k1_path]
        assert after["archive/self/notes/my-note.md"] == before["self/notes/my-note.md"]
        assert set(after) == (set(before) - {k1_path, "self/notes/my-note.md"}) | {
            f"archive/{k1_path}",
            "archive/self/notes/my-note.md",
        }
        assert s.archive("k1") == []  # already archived: skipped
        assert s.unarchive(["k1", "hand1", "s1"]) == ["k1", "hand1"]
        assert _files(root) == before
        assert s.get("k1").body == "binary search halves the range"
        assert {r["event"] for r in s.log("archive_log").read()} == {"archive", "unarchive"}


def test_archived_nodes_leave_default_reads(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _store(root) as s:
        s.archive(["s1"])
        with pytest.raises(NodeNotFoundError) as hidden:
            s.get("s1")
        with pytest.raises(NodeNotFoundError) as missing:
            s.get("s9")
        # the error says why: nothing is hidden from this (unscoped) caller by saying it
        assert (
            str(hidden.value) == "no node with id 's1' in this store (it is archived: unarchive it to use it)"
        )
        assert (hidden.value.hidden, missing.value.hidden) == ("archived", None)
        assert str(missing.value) == "no node with id 's9' in this store"
        assert "s1" not in s and len(s) == 2
        assert s.ids() == ["e1", "k1"]
        assert {e.id for e in s.list_nodes()} == {"e1", "k1"}
        assert s.get("s1", include_archived=True).body == "I prefer tea to coffee"
        assert s.ids(include_archived=True) == ["e1", "k1", "s1"]
        assert {e.id for e in s.list_nodes(include_archived=True)} == {"e1", "k1", "s1"}
        results, _ = s.search("tea coffee", record=False)
        assert "s1" not in [r.id for r in results]
    # A fresh process (snapshot or files) sees the same thing.
    with MdCG(root) as s2:
        assert s2.ids() == ["e1", "k1"]
        assert s2.entry("s1", include_archived=True).archived is True
        s2.compact_index()
    with MdCG(root) as s3:
        assert s3.loaded_from == "snapshot"
        assert s3.ids() == ["e1", "k1"] and s3.ids(include_archived=True) == ["e1", "k1", "s1"]
        s3.rebuild_index()
        assert s3.ids(include_archived=True) == ["e1", "k1", "s1"] and s3.ids() == ["e1", "k1"]
        assert s3.health().ok, s3.health().findings


def test_archive_unknown_id_moves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _store(root) as s:
        before = _files(root)
        with pytest.raises(NodeNotFoundError, match="nope"):
            s.archive(["s1", "nope"])
        assert _files(root) == before


def test_apply_changes_is_one_commit_and_validates_first(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with _store(root) as s:
        before = _files(root)
        with pytest.raises(InvalidArgumentError, match="both added and archived"):
            s.apply_changes(add=[Node(id="s1", layer="self", body="x")], archive=["s1"])
        with pytest.raises(NodeNotFoundError):
            s.apply_changes(add=[Node(id="n1", layer="self", body="new")], archive=["ghost"])
        twice = [Node(id="n1", layer="self", body="a"), Node(id="n1", layer="self", body="b")]
        with pytest.raises(DuplicateIdError, match="n1"):
            s.apply_changes(add=twice)
        assert _files(root) == before
        shards_before = len(list((root / ".mdcg" / "log").iterdir()))
        s.apply_changes(add=[Node(id="n1", layer="self", body="the new merged note")], archive=["s1", "e1"])
        assert s.ids() == ["k1", "n1"]
        assert s.ids(include_archived=True) == ["e1", "k1", "n1", "s1"]
        commits = [
            line
            for p in (root / ".mdcg" / "log").iterdir()
            for line in p.read_text().splitlines()
            if '"op":"commit"' in line and "n1" in line
        ]
        assert len(commits) == 1
        assert "archive/self/s1.md" in commits[0] and "archive/contextual/e1.md" in commits[0]
        assert shards_before >= 1


def test_rel_problem_confines_archive_paths() -> None:
    assert rel_problem("archive/self/a.md") is None
    assert rel_problem("archive/knowledge/cond_x_12345678/a.md") is None
    assert rel_problem("archive/../self/a.md") is not None
    assert rel_problem("archive/a.md") is not None
    assert rel_problem("archive/nolayer/a.md") is not None
    assert rel_problem("archive/archive/self/a.md") is not None
    assert rel_problem("archive/self/.hidden.md") is not None


def test_a_symlinked_archive_folder_is_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "m"
    outside = tmp_path / "outside"
    outside.mkdir()
    with _store(root) as s:
        (root / "archive").symlink_to(outside)
        with pytest.raises((UnsafePathError, OSError)):
            s.archive(["s1"])
        assert list(outside.iterdir()) == []
        assert s.get("s1").body == "I prefer tea to coffee"


def _apply_and_crash(root: str, step: str) -> None:
    s = MdCG(root, auto_compact=None)
    stress.crash_at(s, step)
    s.apply_changes(
        add=[Node(id=f"n{i}", layer="self", body=f"new note {i}") for i in range(5)],
        archive=["s1", "e1", "k1"],
    )


@pytest.mark.parametrize("step", ["temps", "logged", "rename-3", "renamed", "deleted"])
def test_killed_apply_changes_is_all_or_nothing(tmp_path: Path, step: str) -> None:
    root = tmp_path / "m"
    _store(root).close()
    before = _files(root)
    assert stress.wait(stress.fork(_apply_and_crash, str(root), step)) == -signal.SIGKILL
    with MdCG(root, auto_compact=None) as s:
        report = s.sync()
        assert report.recovered == (0 if step == "temps" else 1)
        files = _files(root)
        if step == "temps":
            assert files == before
            assert s.ids() == ["e1", "k1", "s1"]
        else:
            assert s.ids() == ["n0", "n1", "n2", "n3", "n4"]
            assert s.ids(include_archived=True) == ["e1", "k1", "n0", "n1", "n2", "n3", "n4", "s1"]
            for rel, data in before.items():
                if rel not in (".gitignore", ".gitattributes"):
                    assert files[f"archive/{rel}"] == data
                    assert rel not in files
        assert s.health().ok, s.health().findings


def _archive_in_child(root: str, out: str, go: str) -> None:
    import json
    import time as _time

    s = MdCG(root, auto_compact=None)
    while not os.path.exists(go):
        _time.sleep(0.001)
    moved = s.archive(["s1", "k1"])
    Path(out).write_text(json.dumps(moved))
    s.close()


def test_concurrent_archives_move_each_node_exactly_once(tmp_path: Path) -> None:
    import json

    root = tmp_path / "m"
    _store(root).close()
    before = _files(root)
    go = tmp_path / "go"
    pids = [stress.fork(_archive_in_child, str(root), str(tmp_path / f"out{i}"), str(go)) for i in range(4)]
    go.touch()
    assert [stress.wait(pid) for pid in pids] == [0, 0, 0, 0]
    results = [json.loads((tmp_path / f"out{i}").read_text()) for i in range(4)]
    moved = sorted(i for r in results for i in r)
    assert moved == ["k1", "s1"]  # each id moved by exactly one process
    files = _files(root)
    assert {rel for rel in files if rel.startswith("archive/")} == {
        f"archive/{rel}" for rel in before if rel.startswith(("self/", "knowledge/"))
    }
    with MdCG(root) as s:
        assert s.ids() == ["e1"] and s.ids(include_archived=True) == ["e1", "k1", "s1"]
        assert s.health().ok, s.health().findings


def test_rename_refuses_an_archived_node_and_rewrites_sources_where_they_are(tmp_path: Path) -> None:
    # Session 27: renaming an archived node is refused (a write to a memory no read
    # serves; unarchive it first). The nodes whose edges a rename re-points -- a
    # hand-placed note, an archived one -- are still rewritten where they are.
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="old", layer="self", body="the target"))
        s.add(Node(id="live", layer="self", body="links to old", edges=[{"target": "old", "type": "causal"}]))
        s.add(
            Node(
                id="arch",
                layer="self",
                body="archived, links to old",
                edges=[{"target": "old", "type": "causal"}],
            )
        )
        s.archive(["arch"])
    hand = root / "self" / "notes" / "linker.md"  # a hand-placed note that links to it
    hand.parent.mkdir()
    hand.write_text(
        '---\nid: "linker"\nlayer: "self"\nedges: [{"target": "old", "type": "similar"}]\n---\nmine\n'
    )
    with MdCG(root) as s:
        s.sync()
        with pytest.raises(NodeNotFoundError) as refused:
            s.rename("arch", "arch2")
        assert str(refused.value) == (
            "no node with id 'arch' in this store (it is archived: unarchive it to use it)"
        )
        s.rename("old", "new")
        assert s.entry("arch", include_archived=True).path == "archive/self/arch.md"
        assert [e.target for e in s.get("arch", include_archived=True).edges] == ["new"]
        assert s.entry("linker").path == "self/notes/linker.md"  # rewritten in place, not copied
        assert [e.target for e in s.get("linker").edges] == ["new"]
        assert [e.target for e in s.get("live").edges] == ["new"]
        assert s.sync().duplicates == () and s.health().ok
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == [
        "archive/self/arch.md",
        "self/live.md",
        "self/new.md",
        "self/notes/linker.md",
    ]


def test_why_a_node_is_unreadable_is_said_only_to_a_caller_that_may_know(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from md_cg import Scope
    from md_cg.cli import app

    root = tmp_path / "m"
    with _store(root) as s:
        s.add(id="theirs", layer="contextual", body="another agent's note", agent_scope="b")
        s.archive(["s1", "theirs"])
    with MdCG(root, scope=Scope(agent="a")) as mine:
        with pytest.raises(NodeNotFoundError) as other:
            mine.get("theirs")  # archived too, but outside this scope: an unknown id
        assert (str(other.value), other.value.hidden) == ("no node with id 'theirs' in this store", None)
        with pytest.raises(NodeNotFoundError) as archived:
            mine.get("s1")
        assert archived.value.hidden == "archived"
    runner = CliRunner(env={"MDCG_ROOT": None})
    for command in (
        ["get", "s1"],
        ["show", "s1"],
        ["edit", "s1", "--editor", "true"],
        ["update", "s1", "-b", "x"],
    ):
        result = runner.invoke(app, [*command, "--root", str(root)])
        reader = "show" if command[0] == "show" else "get"  # the hint names the command run (s29)
        assert (result.exit_code, result.stderr) == (
            2,
            f"error: node 's1' is archived: `mdcg {reader} --archived s1` reads it, `mdcg unarchive s1` "
            "brings it back\n",
        ), command
    with MdCG(root) as s:
        s.add(Node(id="temp1", layer="contextual", body="short-lived", retention_tier="temp", expires_at=1e9))
    result = runner.invoke(app, ["get", "temp1", "--root", str(root)])
    assert result.stderr == (
        "error: node 'temp1': it is a temporary memory that expired at 2001-09-09T01:46:40Z; "
        "`mdcg get --expired temp1` reads it, `mdcg sweep` removes it\n"
    )
    with MdCG(root, read_only=True) as s:
        s1_path = s.path_of("s1", include_archived=True)
        s1_text = s.read_text("s1", include_archived=True)
    assert s1_path.parts[-3:] == ("archive", "self", "s1.md")
    got = runner.invoke(app, ["get", "s1", "--archived", "--root", str(root), "--json"])
    assert got.exit_code == 0 and json.loads(got.stdout)["path"] == str(s1_path)
    shown = runner.invoke(app, ["show", "s1", "--archived", "--root", str(root)])
    assert shown.stdout == s1_text == s1_path.read_text(encoding="utf-8")
    temp = runner.invoke(app, ["get", "temp1", "--expired", "--root", str(root)])
    assert temp.exit_code == 0 and "short-lived" in temp.stdout
    assert runner.invoke(app, ["get", "temp1", "--archived", "--root", str(root)]).exit_code == 2


def test_an_id_typed_in_another_case_names_the_one_the_caller_sees(tmp_path: Path) -> None:
    from md_cg import Scope

    root = tmp_path / "m"
    with _store(root) as s:
        s.add(id="Café-Notes", layer="contextual", body="notes from the café")
        s.add(id="theirs-Note", layer="contextual", body="another agent's note", agent_scope="b")
        with pytest.raises(NodeNotFoundError) as typed:
            s.get("CAFE\u0301-notes")  # other case, decomposed accent
        assert str(typed.value) == (
            "no node with id 'CAFE\u0301-notes' in this store (did you mean 'Café-Notes'? ids differ by "
            "letter case or Unicode form)"
        )
        with pytest.raises(NodeNotFoundError) as missing:
            s.read_text("cafe-notes")  # no accent: another id
        assert str(missing.value) == "no node with id 'cafe-notes' in this store"
    with MdCG(root, scope=Scope(agent="a")) as mine, pytest.raises(NodeNotFoundError) as hidden:
        mine.get("theirs-note")  # its twin is outside the scope: nothing is named
    assert str(hidden.value) == "no node with id 'theirs-note' in this store"


def test_add_over_an_archived_id_never_replaces_it(tmp_path: Path) -> None:
    """`mdcg add --id x --overwrite` over an archived x replaced the archived file with the
    new text (the archived memory gone, exit 0); the hint without --overwrite named
    `update`, which refuses archived memories."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="x", body="original, precious")
        s.archive("x")
        archived = s.path_of("x", include_archived=True)
        data = archived.read_bytes()
        for overwrite in (False, True):
            with pytest.raises(DuplicateIdError) as err:
                s.add(id="x", body="new", overwrite=overwrite)
            assert str(err.value) == (
                "node id 'x' is held by an archived memory (archive/knowledge/orphan/x.md); unarchive it "
                "to change it, or choose another id (overwrite does not replace an archived memory)"
            )
        assert archived.read_bytes() == data and sorted(p.name for p in (tmp_path / "m").rglob("x.md")) == [
            "x.md"
        ]
        s.unarchive("x")
        assert s.add(id="x", body="new", overwrite=True).body == "new"  # live again: replaced as asked


def test_verify_and_neighbours_of_an_archived_node_say_it_is_archived(tmp_path: Path) -> None:
    """get and update said "archived ... unarchive it"; verify and neighbours said only "no node"."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="a", body="hello")
        s.add(id="b", body="linked", edges=[{"target": "a", "type": "causal"}])
        s.archive("a")
        archived = "no node with id 'a' in this store (it is archived: unarchive it to use it)"
        for call in (lambda: s.verify("a", "seen again", "confirmed"), lambda: s.neighbours("a")):
            with pytest.raises(NodeNotFoundError) as err:
                call()
            assert str(err.value) == archived and err.value.hidden == "archived"
        assert s.get("a", include_archived=True).confidence is None  # nothing was written
        with pytest.raises(NodeNotFoundError, match=r"^no node with id 'zz' in this store$"):
            s.neighbours("zz")
