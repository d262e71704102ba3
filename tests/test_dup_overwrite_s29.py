"""Two files holding one id (both clones created it, or a modify/delete conflict left
both): a write that moves the standing copy -- ``update(layer=...)``/``move``,
``verify(..., "falsified")``, ``add(overwrite=True)`` to another layer, ``edit_text``
changing the layer, ``archive``/``unarchive`` -- wrote it onto the other copy's path and
erased that memory (exit 0; the next sync said nothing changed). Now every such move is
refused before anything is written, naming the id and both files. Found by the session
29 reviewer (HIGH)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.cli import app
from md_cg.errors import DuplicateIdError

#: Where clone B's copy (untagged, in knowledge/) stands.
STANDING = "knowledge/orphan/pref.md"


def _message(node_id: str, standing: str, rel: str) -> str:
    return (
        f"cannot move {node_id!r} from {standing} to {rel}: {rel} also holds {node_id!r} (a copy, "
        "or a merge that left two; sync lists it under duplicate ids); it is not written over -- "
        f"keep one file (delete the other, or `delete {node_id}` removes all), sync, then try again"
    )


def _two_copies(root: Path, other_layer: str = "self") -> tuple[Path, Path, dict[Path, bytes]]:
    """``pref`` in ``other_layer`` (clone A's, older) and in ``knowledge/`` (clone B's, which
    stands: the later ``updated_at``), synced: the state a git merge of the two leaves."""
    with MdCG(root) as s:
        s.add(Node(id="pref", layer=other_layer, body="A: the user wants short answers"))
        a = root / other_layer / "pref.md"
        a_bytes = a.read_bytes()
        s.delete("pref")
        s.add(Node(id="pref", layer="knowledge", body="B: the user wants detailed answers"))
        b = Path(s.path_of("pref"))
    a.parent.mkdir(parents=True, exist_ok=True)
    a.write_bytes(a_bytes)
    with MdCG(root) as s:
        assert s.sync().duplicates == (("pref", f"{other_layer}/pref.md"),)
        assert b == root / STANDING and s.path_of("pref") == b
    return a, b, {a: a.read_bytes(), b: b.read_bytes()}


def _unchanged(files: dict[Path, bytes]) -> None:
    assert {p: p.read_bytes() for p in files} == files


@pytest.mark.parametrize("how", ["update", "move", "add_overwrite", "edit_text"])
def test_a_layer_change_onto_the_other_copy_is_refused(tmp_path: Path, how: str) -> None:
    root = tmp_path / "m"
    _, b, files = _two_copies(root)
    with MdCG(root) as s, pytest.raises(DuplicateIdError) as info:
        if how == "update":
            s.update("pref", layer="self")
        elif how == "move":
            s.move("pref", "self")
        elif how == "add_overwrite":
            s.add(Node(id="pref", layer="self", body="C: replaced"), overwrite=True)
        else:
            s.edit_text("pref", lambda t: t.replace('layer: "knowledge"', 'layer: "self"'))
    assert str(info.value) == _message("pref", STANDING, "self/pref.md")
    assert info.value.path == "self/pref.md"
    _unchanged(files)
    with MdCG(root) as s:
        assert s.sync().duplicates == (("pref", "self/pref.md"),)
        assert s.get("pref").body.startswith("B:") and s.path_of("pref") == b


def test_verify_falsified_onto_a_copy_in_rejected_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _, _, files = _two_copies(root, "rejected")
    with MdCG(root) as s, pytest.raises(DuplicateIdError) as info:
        s.verify("pref", "the user said so", "falsified")
    assert str(info.value) == _message("pref", STANDING, "rejected/pref.md")
    _unchanged(files)


def test_a_plain_update_writes_only_the_standing_copy(tmp_path: Path) -> None:
    """Same path: the other copy is not touched, and is still listed."""
    root = tmp_path / "m"
    a, b, files = _two_copies(root)
    with MdCG(root) as s:
        s.update("pref", body="B: the user wants detailed answers, with sources")
        s.update("pref", layer="contextual")  # a move to a free path: the copy stays where it is
        assert s.path_of("pref") == root / "contextual/pref.md" and not b.exists()
        assert a.read_bytes() == files[a]
        assert s.sync().duplicates == (("pref", "self/pref.md"),)
        assert s.get("pref").body == "B: the user wants detailed answers, with sources"


def test_the_advice_works_delete_the_other_sync_then_move(tmp_path: Path) -> None:
    root = tmp_path / "m"
    a, b, _ = _two_copies(root)
    a.unlink()
    with MdCG(root) as s:
        assert s.sync().duplicates == ()
        assert s.update("pref", layer="self").layer == "self"
        assert s.path_of("pref") == root / "self/pref.md" and not b.exists()
        assert s.get("pref").body == "B: the user wants detailed answers"


def test_archive_and_unarchive_name_the_copy(tmp_path: Path) -> None:
    root = tmp_path / "m"
    a, b, files = _two_copies(root)
    standing = STANDING
    target = root / "archive" / standing
    target.parent.mkdir(parents=True)
    target.write_bytes(files[a].replace(b'layer: "self"', b'layer: "knowledge"'))
    files[target] = target.read_bytes()
    with MdCG(root) as s:
        with pytest.raises(DuplicateIdError) as info:
            s.archive("pref")
        assert str(info.value) == _message("pref", standing, f"archive/{standing}")
        _unchanged(files)
        target.unlink()
        del files[target]
        assert s.archive("pref") == ["pref"]
        b.write_bytes(files[b])  # the other clone's copy comes back where it was
        assert s.sync().duplicates == (("pref", standing), ("pref", "self/pref.md"))
        with pytest.raises(DuplicateIdError) as info:
            s.unarchive("pref")
        assert str(info.value) == _message("pref", f"archive/{standing}", standing)
        assert b.read_bytes() == files[b] and (root / "archive" / standing).read_bytes() == files[b]


def test_cli_update_and_verify_refuse_with_exit_2(tmp_path: Path) -> None:
    root = tmp_path / "m"
    a, b, files = _two_copies(root)
    standing = STANDING
    runner = CliRunner()
    got = runner.invoke(app, ["update", "--root", str(root), "pref", "--layer", "self"])
    assert got.exit_code == 2
    assert got.stderr == f"error: {_message('pref', standing, 'self/pref.md')}\n"
    _unchanged(files)
    a.rename(root / "rejected" / "pref.md")
    files = {root / "rejected" / "pref.md": files[a], b: files[b]}
    assert runner.invoke(app, ["sync", "--root", str(root)]).exit_code == 1  # the duplicate
    args = ["verify", "--root", str(root), "pref", "--evidence", "asked", "--verdict", "falsified"]
    got = runner.invoke(app, args)
    assert got.exit_code == 2
    assert got.stderr == f"error: {_message('pref', standing, 'rejected/pref.md')}\n"
    _unchanged(files)
    got = runner.invoke(app, ["sync", "--root", str(root)])
    assert (
        "duplicate ids (keep both: mdcg rename ID NEW_ID --path FILE; or remove a copy) (1): "
        "pref at rejected/pref.md" in got.output
    )


def test_an_overwrite_whose_indexed_file_was_moved_by_hand_still_writes(tmp_path: Path) -> None:
    """Not a copy: the index's file is gone (moved without a sync), so the file at the
    target is the memory itself, and add(overwrite=True) replaces it as before."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="n", layer="knowledge", body="one"))
        old = Path(s.path_of("n"))
    (root / "self").mkdir(exist_ok=True)
    old.rename(root / "self" / "n.md")
    with MdCG(root) as s:
        s.add(Node(id="n", layer="self", body="two"), overwrite=True)
        assert s.get("n").body == "two" and s.path_of("n") == root / "self/n.md"
        assert s.sync().duplicates == ()


def test_edit_text_changing_the_layer_onto_another_memorys_file_is_refused(tmp_path: Path) -> None:
    """edit_text wrote a changed layer's file with no look at what was there: a file named
    like the node but holding another memory (placed by hand) was replaced."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="pref", layer="knowledge", body="mine"))
        s.add(Node(id="other", layer="self", body="theirs"))
    other = root / "self" / "other.md"
    placed = root / "self" / "pref.md"
    other.rename(placed)
    with MdCG(root) as s:
        s.sync()
        assert s.path_of("other") == placed
        with pytest.raises(DuplicateIdError) as info:
            s.edit_text("pref", lambda t: t.replace('layer: "knowledge"', 'layer: "self"'))
        assert str(info.value) == (
            "node id 'pref': the file self/pref.md holds memory 'other' (edited by hand, or placed "
            "there); it is not written over -- move that file to its own name, or rename one of them"
        )
        assert s.get("other").body == "theirs" and s.get("pref").body == "mine"
