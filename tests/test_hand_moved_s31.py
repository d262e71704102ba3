"""A memory's file moved, deleted or broken by hand, used before a sync (session 31,
r2 finding 2): ``get``, ``show``, ``update``, ``edit``, ``rename``, ``archive``,
``forget`` and ``delete`` all said "no node with id 'hm' in this store" while the file
was on disk and the next sync reported it moved; ``add --id hm`` then made a second file
of the memory (the sync exited 1 on a duplicate id, the new text indexed). Every one now
says the index's file is gone and to sync (:func:`md_cg.errors.lost_file_error`), and
``add`` is refused. And a forgotten memory that came back, renamed here before it was
kept or forgotten again, is still reported under its new id, and ``keep`` of that id
works (finding 3: the rename silenced ``forgotten_returned``)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.cli import app
from md_cg.errors import NodeNotFoundError


def _moved(node_id: str) -> str:
    return (
        f"no node with id {node_id!r} in this store (its file knowledge/orphan/{node_id}.md was "
        "moved or deleted outside md-cg since the last sync; run `mdcg sync` (MdCG.sync()) to "
        "take that in, then try again)"
    )


def _cli(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["--root", str(root), *args])
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts)


@pytest.fixture()
def cli_store(tmp_path: Path) -> Path:
    """A store whose memories were written by CLI processes after its last snapshot: an
    open follows the log and drops an id whose file a person moved or deleted since."""
    root = tmp_path / "m"
    assert CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["init", "--root", str(root)]).exit_code == 0
    for node_id, body in (("hm", "hand moved memory"), ("hd", "hand deleted memory")):
        assert _cli(root, "add", "--id", node_id, "--body", body)[0] == 0
    shutil.move(root / "knowledge/orphan/hm.md", root / "self/hm.md")  # an Obsidian drag
    (root / "knowledge/orphan/hd.md").unlink()
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["get", "hm"],
        ["show", "hm"],
        ["update", "hm", "--importance", "0.3"],
        ["edit", "hm", "--editor", "true"],
        ["rename", "hm", "hm2"],
        ["archive", "hm"],
        ["delete", "hm"],
    ],
)
def test_every_command_says_the_file_moved_and_to_sync(cli_store: Path, args: list[str]) -> None:
    assert _cli(cli_store, *args) == (2, "", f"error: {_moved('hm')}")
    assert _files(cli_store) == ["self/hm.md"]


def test_forget_says_it_too(cli_store: Path) -> None:
    assert _cli(cli_store, "forget", "hm", "-r", "x") == (2, "", f"error: {_moved('hm')}")
    assert _files(cli_store) == ["self/hm.md"]


def test_a_deleted_file_is_told_alike(cli_store: Path) -> None:
    for args in (["get", "hd"], ["update", "hd", "--importance", "0.2"], ["delete", "hd"]):
        assert _cli(cli_store, *args) == (2, "", f"error: {_moved('hd')}")


def test_add_of_the_id_is_refused_and_the_sync_finds_the_memory(cli_store: Path) -> None:
    """Was: exit 0 and knowledge/orphan/hm.md written beside self/hm.md; the sync then
    exited 1 (duplicate id) and the re-entered text was the one indexed."""
    for extra in ([], ["--overwrite"]):
        got = _cli(cli_store, "add", "--id", "hm", "--body", "re-entered text", *extra)
        assert got == (2, "", f"error: {_moved('hm')}")
    assert _files(cli_store) == ["self/hm.md"]
    code, out, _ = _cli(cli_store, "sync")
    assert (code, out.splitlines()) == (
        0,
        ["deleted (1): hd", "moved (1): hm knowledge/orphan/hm.md -> self/hm.md"],
    )
    with MdCG(cli_store) as s:
        assert (s.get("hm").body, s.ids()) == ("hand moved memory", ["hm"])


def test_a_file_broken_by_hand_is_named_by_every_command(cli_store: Path) -> None:
    """Was: get/show/edit/rename/delete named the file; update, forget, archive said only
    "no node with id 'bad'"."""
    assert _cli(cli_store, "add", "--id", "bad", "--body", "will break")[0] == 0
    path = cli_store / "knowledge/orphan/bad.md"
    path.write_text(path.read_text().replace('layer: "knowledge"', "layer: [knowledge"))
    said = (
        "error: no node with id 'bad' in this store (its file knowledge/orphan/bad.md was changed "
        "outside md-cg and is unusable: the YAML frontmatter does not parse: did not find "
        "expected ',' or ']' (column 11), while parsing a flow sequence from line 3, column 8; "
        "fix it, then run `mdcg sync` (MdCG.sync()))"
    )
    for args in (
        ["get", "bad"],
        ["update", "bad", "--importance", "0.1"],
        ["delete", "bad"],
        ["archive", "bad"],
    ):
        assert _cli(cli_store, *args) == (2, "", said)
    assert _cli(cli_store, "forget", "bad", "-r", "x") == (2, "", said)
    assert path.exists()


def test_library_calls_raise_one_error(tmp_path: Path) -> None:
    """The index's snapshot holds the id (no log to follow): the reads and writes of a
    long-running handle find the file gone (was: NodeNotFoundError, a bare
    FileNotFoundError for read_text, edit_text and archive, and a rename that called the
    moved file a copy to delete)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="hm", body="hand moved memory")
        s.compact_index()
    shutil.move(root / "knowledge/orphan/hm.md", root / "self/hm.md")
    calls = {
        "get": lambda s: s.get("hm"),
        "read_text": lambda s: s.read_text("hm"),
        "update": lambda s: s.update("hm", importance=0.3),
        "edit_text": lambda s: s.edit_text("hm", lambda t: t + "more\n"),
        "rename": lambda s: s.rename("hm", "hm2"),
        "archive": lambda s: s.archive("hm"),
        "forget": lambda s: s.forget("hm", reason="x"),
        "delete": lambda s: s.delete("hm"),
        "add": lambda s: s.add(id="hm", body="re-entered"),
        "add overwrite": lambda s: s.add(id="hm", body="re-entered", overwrite=True),
    }
    got = {}
    for name, call in calls.items():
        with MdCG(root) as s:
            with pytest.raises(NodeNotFoundError) as err:
                call(s)
            got[name] = (str(err.value), err.value.hidden)
    assert got == {name: (_moved("hm"), "lost") for name in calls}
    assert _files(root) == ["self/hm.md"]
    with MdCG(root) as s:  # one handle: the lookup that found the file gone tells the next ones
        with pytest.raises(NodeNotFoundError):
            s.update("hm", importance=0.3)
        with pytest.raises(NodeNotFoundError) as err:
            s.get("hm")
        assert str(err.value) == _moved("hm")
        report = s.sync()  # and its sync tells the move
        assert [(m.node_id, m.old_path, m.new_path) for m in report.moved] == [
            ("hm", "knowledge/orphan/hm.md", "self/hm.md")
        ]
        assert s.get("hm").body == "hand moved memory"


def _forgotten_and_back(root: Path) -> None:
    with MdCG(root) as s:
        s.add(id="kz", body="keep me z")
        s.add(id="other", body="other")
        saved = s.path_of("kz").read_bytes()
        s.forget("kz", reason="first")
    (root / "knowledge/orphan/kz.md").write_bytes(saved)  # as a git checkout brings it back
    with MdCG(root) as s:
        assert [r[0] for r in s.sync().returned] == ["kz"]


def test_a_rename_keeps_a_forgotten_memory_that_came_back_reported(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _forgotten_and_back(root)
    with MdCG(root) as s:
        s.rename("kz", "kz2")
        findings = [(f.kind, f.node_id, f.path, f.detail) for f in s.health().findings]
        assert findings == [
            (
                "forgotten_returned",
                "kz2",
                "knowledge/orphan/kz2.md",
                f"forgotten in this clone as 'kz' on {_tomb_time(s)} (first); back under this id: "
                "forget it again, or keep it (mdcg keep)",
            )
        ]
        assert [r[0] for r in s.sync().returned] == ["kz2"]
        s.keep_returned("kz2")  # was: "'kz2' is not a memory forgotten in this clone ..."
        assert (s.health().findings, s.sync().returned) == ((), ())
        assert s.departure("kz").describe().startswith("it was renamed to 'kz2' on ")


def test_a_renamed_forgotten_memory_forgotten_again_is_settled(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _forgotten_and_back(root)
    with MdCG(root) as s:
        s.rename("kz", "kz2")
        s.forget("kz2", reason="again")
        assert (s.health().findings, s.sync().returned, s.ids()) == ((), (), ["other"])


def _tomb_time(s: MdCG) -> str:
    (tomb,) = [t for t in s.tombstones() if t["id"] == "kz"]
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(tomb["time"]))
