"""``mdcg edit``: a memory's file edited in an editor, checked, and stored only when valid and unraced.

The editors here are small Python scripts run as the user's editor would be
(a separate process, through the shell). One of them writes the node from
its own process while "the user" edits, to prove the conflict check.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import build_small_store
from typer.testing import CliRunner

import md_cg.cli as cli
from md_cg import MdCG, Node
from md_cg.cli import app, editor_command

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the editor is run through sh")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "MDCG_EDITOR": None, "VISUAL": None, "EDITOR": None})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return build_small_store(tmp_path / "memory")


def editor(tmp_path: Path, code: str) -> str:
    """An editor command running ``code`` with ``path`` (the file to edit) and ``log`` (a list
    of the paths it was given, kept in ``editor.log``) defined."""
    script = tmp_path / "editor.py"
    script.write_text(
        "import json, pathlib, sys\n"
        "path = pathlib.Path(sys.argv[-1])\n"
        f"log_file = pathlib.Path({str(tmp_path / 'editor.log')!r})\n"
        "log = json.loads(log_file.read_text()) if log_file.exists() else []\n"
        "log.append(str(path))\n"
        "log_file.write_text(json.dumps(log))\n" + code,
        encoding="utf-8",
    )
    return f'"{sys.executable}" "{script}"'


def editor_log(tmp_path: Path) -> list[str]:
    log = tmp_path / "editor.log"
    return json.loads(log.read_text()) if log.exists() else []


def invoke(runner: CliRunner, *args: Any, input: str | None = None) -> Any:
    return runner.invoke(app, [str(a) for a in args], input=input)


def stored(root: Path, node_id: str) -> tuple[Node, Path, bytes]:
    with MdCG(root, read_only=True) as store:
        path = store.path_of(node_id)
        return store.get(node_id), path, path.read_bytes()


def test_an_edit_is_stored_indexed_and_its_copy_removed(
    runner: CliRunner, root: Path, tmp_path: Path
) -> None:
    before, path, _ = stored(root, "kp_sorting")
    ed = editor(
        tmp_path, "path.write_text(path.read_text().replace('in order.', 'in order, stably: 稳定排序.'))\n"
    )
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"kp_sorting: edited ({path})\n"
    node, after_path, _ = stored(root, "kp_sorting")
    assert after_path == path
    assert node.body == "# Sorting\nSorting puts items in order, stably: 稳定排序.\n"
    assert node.tags == ["domain:computing"] and node.created_at == before.created_at
    assert node.updated_at is not None and node.updated_at > (before.updated_at or before.created_at or 0)
    [copy] = editor_log(tmp_path)
    assert Path(copy).name.startswith("mdcg-kp_sorting-") and copy.endswith(".md")
    assert not Path(copy).exists()
    with MdCG(root, read_only=True) as store:
        assert store.search("稳定排序")[0][0].id == "kp_sorting"


def test_an_editor_that_changes_nothing_writes_nothing(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    _, path, data = stored(root, "kp_sorting")
    mtime = path.stat().st_mtime_ns
    ed = editor(tmp_path, "")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "id": "kp_sorting",
        "layer": "knowledge",
        "path": str(path),
        "changed": False,
    }
    assert path.read_bytes() == data and path.stat().st_mtime_ns == mtime
    [copy] = editor_log(tmp_path)
    assert not Path(copy).exists()
    assert (
        invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed).stdout
        == "kp_sorting: no change\n"
    )


def test_a_failing_editor_writes_nothing(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    _, path, data = stored(root, "kp_sorting")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", "false")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "error: the editor 'false' exited with status 1; nothing was written\n"
    missing = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", "no-such-editor-xyz")
    assert missing.stderr.splitlines()[-1] == (
        "error: the editor 'no-such-editor-xyz' exited with status 127 (not found?); nothing was written"
    )
    # an editor that saved an edit and then failed: the edit is kept, not stored
    ed = editor(tmp_path, "path.write_text(path.read_text() + 'half done\\n'); sys.exit(4)\n")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    [copy] = editor_log(tmp_path)
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: the editor {ed!r} exited with status 4; nothing was written; "
        f"the edited text is kept in {copy}\n"
    )
    assert Path(copy).read_text(encoding="utf-8").endswith("Sorting puts items in order.\n\nhalf done\n")
    assert path.read_bytes() == data


def test_an_invalid_edit_is_refused_and_kept(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    _, path, data = stored(root, "kp_sorting")
    ed = editor(
        tmp_path, "path.write_text(path.read_text().replace('layer: \"knowledge\"', 'layer: [oops'))\n"
    )
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    [copy] = editor_log(tmp_path)
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: node 'kp_sorting': the edited file would not be a valid node: ")
    assert line.endswith(f"; the edited text is kept in {copy}")
    assert "layer: [oops" in Path(copy).read_text(encoding="utf-8")
    assert path.read_bytes() == data


def test_an_empty_body_or_a_new_id_is_refused(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    _, path, data = stored(root, "kp_sorting")
    ed = editor(tmp_path, "path.write_text(path.read_text().replace('\"kp_sorting\"', '\"kp_sorted\"'))\n")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    assert result.exit_code == 2
    assert "the id of node 'kp_sorting' cannot change in an edit (got 'kp_sorted'); rename it instead" in (
        result.stderr
    )
    t = path.read_text(encoding="utf-8")
    head = t[: t.index("---", 3) + 4]
    (tmp_path / "empty.md").write_text(head + "\n  \n", encoding="utf-8")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--from", tmp_path / "empty.md")
    assert result.exit_code == 2 and "body" in result.stderr, result.stderr
    assert path.read_bytes() == data


def test_a_bad_edit_is_offered_again_on_a_terminal(
    runner: CliRunner, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_interactive", lambda: True)
    # the first round breaks the frontmatter; the second mends it and changes the body
    ed = editor(
        tmp_path,
        "t = path.read_text()\n"
        "if len(log) == 1:\n"
        "    path.write_text(t.replace('layer: \"knowledge\"', 'layer: [oops'))\n"
        "else:\n"
        "    t = t.replace('layer: [oops', 'layer: \"knowledge\"')\n"
        "    path.write_text(t.replace('order.', 'order!'))\n",
    )
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed, input="y\n")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("error: node 'kp_sorting': the edited file would not be a valid node: ")
    assert "edit again? [Y/n]" in result.stderr
    first, second = editor_log(tmp_path)
    assert first == second and not Path(first).exists()
    assert stored(root, "kp_sorting")[0].body == "# Sorting\nSorting puts items in order!\n"
    # answering no keeps the text and stores nothing
    _, path, data = stored(root, "kp_sorting")
    (tmp_path / "editor.log").unlink()
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed, input="n\n")
    [copy] = editor_log(tmp_path)
    assert result.exit_code == 2
    assert result.stderr.endswith(
        f"edit again? [Y/n]:error: nothing was written; the edited text is kept in {copy}\n"
    )
    assert "layer: [oops" in Path(copy).read_text(encoding="utf-8") and path.read_bytes() == data


def test_a_new_layer_moves_the_file(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    _, old_path, _ = stored(root, "kp_sorting")
    ed = editor(tmp_path, "path.write_text(path.read_text().replace('\"knowledge\"', '\"contextual\"'))\n")
    data = json.loads(invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed, "--json").stdout)
    assert data == {
        "id": "kp_sorting",
        "layer": "contextual",
        "path": str(root / "contextual" / "kp_sorting.md"),
        "changed": True,
    }
    assert not old_path.exists() and (root / "contextual" / "kp_sorting.md").is_file()
    # the edge from kp_bsearch still resolves
    with MdCG(root, read_only=True) as store:
        assert store.get("kp_sorting").layer == "contextual"
        assert store.health().ok


def test_a_write_by_another_process_during_the_edit_wins(
    runner: CliRunner, root: Path, tmp_path: Path
) -> None:
    """The editor process itself writes the node through the library (another writer) and then
    saves its own edit: the edit is refused, the other write stays, the edit is kept."""
    ed = editor(
        tmp_path,
        "from md_cg import MdCG\n"
        f"with MdCG({str(root)!r}) as store:\n"
        "    store.update('kp_sorting', body='# Sorting\\nChanged elsewhere.\\n')\n"
        "path.write_text(path.read_text().replace('in order.', 'in my order.'))\n",
    )
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    [copy] = editor_log(tmp_path)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        "error: node 'kp_sorting' was changed by another writer while it was being edited; nothing "
        f"was written; the edited text is kept in {copy} (compare it with the node as stored now)\n"
    )
    assert stored(root, "kp_sorting")[0].body == "# Sorting\nChanged elsewhere.\n"
    assert "Sorting puts items in my order." in Path(copy).read_text(encoding="utf-8")


def test_from_a_file_or_stdin(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    _, path, _ = stored(root, "kp_sorting")
    text = path.read_text(encoding="utf-8").replace("in order.", "in order (from a file).")
    (tmp_path / "new.md").write_bytes(text.encode("utf-8"))
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--from", tmp_path / "new.md")
    assert result.exit_code == 0 and result.stdout == f"kp_sorting: edited ({path})\n"
    assert stored(root, "kp_sorting")[0].body == "# Sorting\nSorting puts items in order (from a file).\n"
    # stdin, written by hand: YAML frontmatter with a new tag
    hand = "---\nid: kp_sorting\ntags: [sorting, 排序]\n---\n# Sorting\nBy hand.\n"
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--from", "-", input=hand)
    assert result.exit_code == 0, result.output
    node = stored(root, "kp_sorting")[0]
    assert (node.layer, node.tags, node.body) == ("knowledge", ["sorting", "排序"], "# Sorting\nBy hand.")
    # the stored text given back is no change (the file moved: its bucket came from the tag dropped)
    _, path, data = stored(root, "kp_sorting")
    assert path == root / "knowledge" / "orphan" / "kp_sorting.md"
    same = data.decode("utf-8")
    mtime = path.stat().st_mtime_ns
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--from", "-", input=same)
    assert result.stdout == "kp_sorting: no change\n" and path.stat().st_mtime_ns == mtime
    (tmp_path / "latin1.md").write_bytes(b"---\nid: kp_sorting\n---\ncaf\xe9\n")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--from", tmp_path / "latin1.md")
    assert (
        result.stderr
        == f"error: {tmp_path / 'latin1.md'}: the text is not UTF-8 (byte 26); nothing was written\n"
    )


def test_bad_arguments_run_no_editor(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    ed = editor(tmp_path, "")
    result = invoke(runner, "edit", "nope", "--root", root, "--editor", ed)
    assert result.exit_code == 2
    assert result.stderr == "error: no node with id 'nope' in this store\n"
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed, "--from", "-")
    assert result.stderr == "error: --from and --editor exclude each other\n"
    assert editor_log(tmp_path) == []


def test_the_editor_is_chosen_as_git_chooses_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MDCG_EDITOR", "VISUAL", "EDITOR"):
        monkeypatch.delenv(name, raising=False)
    assert editor_command() == "vi"
    monkeypatch.setenv("EDITOR", "nano")
    assert editor_command() == "nano"
    monkeypatch.setenv("VISUAL", "code --wait")
    assert editor_command() == "code --wait"
    monkeypatch.setenv("MDCG_EDITOR", "  ")
    assert editor_command() == "code --wait"
    monkeypatch.setenv("MDCG_EDITOR", "emacs -nw")
    assert editor_command() == "emacs -nw"
    assert editor_command("ed") == "ed"


def test_a_node_deleted_during_the_edit_keeps_the_text(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    ed = editor(
        tmp_path,
        "from md_cg import MdCG\n"
        f"with MdCG({str(root)!r}) as store:\n"
        "    store.delete('kp_sorting', force=True)\n"
        "path.write_text(path.read_text().replace('in order.', 'in my order.'))\n",
    )
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    [copy] = editor_log(tmp_path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"nothing was written; the edited text is kept in {copy}",
        "error: no node with id 'kp_sorting' in this store",
    ]
    assert "Sorting puts items in my order." in Path(copy).read_text(encoding="utf-8")
    with MdCG(root, read_only=True) as store:
        assert "kp_sorting" not in store


def test_a_hand_edit_of_the_file_during_the_edit_is_not_overwritten(
    runner: CliRunner, root: Path, tmp_path: Path
) -> None:
    """Someone edits the .md file itself (no sync, the index does not know) while the copy is
    open: the whole-file comparison under the lock still sees it."""
    _, path, _ = stored(root, "kp_sorting")
    ed = editor(
        tmp_path,
        f"store_file = pathlib.Path({str(path)!r})\n"
        "store_file.write_text(store_file.read_text().replace('in order.', 'in order, by hand.'))\n"
        "path.write_text(path.read_text().replace('in order.', 'in my order.'))\n",
    )
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    [copy] = editor_log(tmp_path)
    assert (
        result.exit_code == 2 and "was changed by another writer while it was being edited" in result.stderr
    )
    assert path.read_text(encoding="utf-8").endswith("Sorting puts items in order, by hand.\n\n")
    assert Path(copy).read_text(encoding="utf-8").endswith("Sorting puts items in my order.\n\n")


def test_a_store_that_cannot_be_written_is_refused_before_the_editor(
    runner: CliRunner, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, path, data = stored(root, "kp_sorting")
    real = os.access
    monkeypatch.setattr(cli.os, "access", lambda p, mode: False if Path(p) == path.parent else real(p, mode))
    ed = editor(tmp_path, "path.write_text('typed for nothing')\n")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {path.parent}: the memory's folder is not writable (a read-only file system or copy?); "
        "nothing was opened for editing\n",
    )
    assert editor_log(tmp_path) == [] and path.read_bytes() == data
