"""Session 29: what two clones of a memory folder in git tell each other.

A. ``get OLD`` said where an id went from this clone's audit log alone: after clone A
renamed ``cat`` to ``drink_cat`` and clone B renamed that to ``pet_cat``, A said "it was
renamed to 'drink_cat'" (and ``get drink_cat`` said nothing at all), and an id renamed
only in the other clone got no hint. The memory's ``renamed_from`` (kept in the index)
now names the memory: scoped, without reading files.

B. A sync right after an open whose log catch-up re-read files changed or removed by
hand (``git reset --hard``, ``sed``) said "in sync: nothing changed": the first sync of
the handle now reports them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import orjson
from typer.testing import CliRunner

from md_cg import MdCG, Scope
from md_cg.cli import app
from md_cg.errors import NodeNotFoundError
from md_cg.store import with_departure

_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=_ENV, check=True, capture_output=True)


def _push(clone: Path, message: str) -> None:
    _git(clone, "add", "-A")
    _git(clone, "commit", "-qm", message)
    _git(clone, "push", "-q", "origin", "HEAD:main")


def _pull(clone: Path) -> None:
    _git(clone, "pull", "-q", "--no-rebase", "origin", "main")


def _clones(tmp: Path, **nodes: str) -> tuple[Path, Path]:
    """Origin and two clones sharing a memory folder ``mem`` that holds ``nodes`` (id -> body)."""
    _git(tmp, "init", "-q", "--bare", "origin.git")
    _git(tmp, "clone", "-q", "origin.git", "a")
    a, b = tmp / "a", tmp / "b"
    with MdCG(a / "mem", create=True) as s:
        for node_id, body in nodes.items():
            s.add(id=node_id, body=body)
    (a / ".gitignore").write_text("mem/.mdcg/\n")
    _push(a, "init")
    _git(tmp, "clone", "-q", "-b", "main", "origin.git", "b")
    return a, b


def _cli_error(root: Path, node_id: str) -> str:
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["get", node_id, "--root", str(root)])
    assert result.exit_code == 2
    return result.stderr.strip()


def test_a_rename_chain_across_clones_names_the_memory_now(tmp_path: Path) -> None:
    a, b = _clones(tmp_path, cat="The user has a cat", dog="The user walks a dog")
    with MdCG(a / "mem") as s:
        s.rename("cat", "drink_cat")
    _push(a, "a renames")
    _pull(b)
    with MdCG(b / "mem") as s:
        s.rename("drink_cat", "pet_cat")
        s.rename("dog", "puppy")
    _push(b, "b renames")
    _pull(a)
    with MdCG(a / "mem") as s:
        s.sync()
        assert s.ids() == ["pet_cat", "puppy"]
        cat, drink, dog = s.departure("cat"), s.departure("drink_cat"), s.departure("dog")
        assert cat is not None and (cat.event, cat.to, cat.current) == ("renamed", "drink_cat", "pet_cat")
        assert cat.time is not None
        assert drink is not None
        assert (drink.event, drink.time, drink.to, drink.current) == ("renamed", None, "pet_cat", "pet_cat")
        assert dog is not None and (dog.time, dog.to, dog.current) == (None, "puppy", "puppy")
        assert s.departure("never") is None
    err = _cli_error(a / "mem", "cat")
    assert err.startswith("error: no node with id 'cat' in this store (it was renamed to 'drink_cat' on ")
    assert err.endswith("; that memory is 'pet_cat' now)")
    assert _cli_error(a / "mem", "drink_cat") == (
        "error: no node with id 'drink_cat' in this store (it was renamed to 'pet_cat')"
    )
    assert (
        _cli_error(a / "mem", "dog")
        == "error: no node with id 'dog' in this store (it was renamed to 'puppy')"
    )
    assert _cli_error(a / "mem", "never") == "error: no node with id 'never' in this store"
    # the same from a snapshot (the index keeps renamed_from), and from a fresh index
    with MdCG(a / "mem") as s:
        s.compact_index()
    with MdCG(a / "mem") as s:
        assert s.departure("dog") is not None and s.departure("dog").current == "puppy"  # type: ignore[union-attr]
        assert s.departure("cat").current == "pet_cat"  # type: ignore[union-attr]
        s.rebuild_index()
        assert s.departure("drink_cat").current == "pet_cat"  # type: ignore[union-attr]
        # the memory renamed on (here): the index follows it
        s.rename("pet_cat", "kitten")
        assert s.departure("drink_cat").current == "kitten"  # type: ignore[union-attr]
        s.forget("kitten", "gone")
        assert s.departure("drink_cat") is None


def test_a_scoped_handle_is_not_told_of_another_agents_memory(tmp_path: Path) -> None:
    mine, other = Scope(agent="a", workspace="w"), Scope(agent="b", workspace="w")
    a, b = _clones(tmp_path)
    with MdCG(a / "mem", scope=other) as s:
        s.add(id="secret", body="the other agent's note")
    _push(a, "add")
    _pull(b)
    with MdCG(b / "mem", scope=other) as s:
        s.rename("secret", "hidden_note")
    _push(b, "rename")
    _pull(a)
    with MdCG(a / "mem", scope=mine) as s:
        s.sync()  # the hook of an install with --git syncs after a pull
        assert s.departure("secret") is None
        try:
            s.get("secret")
        except NodeNotFoundError as exc:
            assert str(with_departure(s, exc)) == "no node with id 'secret' in this store"
    with MdCG(a / "mem", scope=other) as s:
        gone = s.departure("secret")
        assert gone is not None and (gone.to, gone.current) == ("hidden_note", "hidden_note")


def _catch_up_store(root: Path) -> None:
    """k1 and k3 in a snapshot; then k1 updated and k2 added after it (the log; a forget
    writes a snapshot)."""
    with MdCG(root, create=True) as s:
        s.add(id="k1", body="note one about kiwis")
        s.add(id="k3", body="note three about figs")
        s.compact_index()
    with MdCG(root, auto_compact=None) as s:  # (no snapshot at close: the log holds these)
        s.update("k1", body="note one about mangoes")
        s.add(id="k2", body="scratch note")


def test_b_first_sync_reports_files_a_git_reset_reverted(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    with MdCG(repo / "mem", create=True) as s:
        s.add(id="k1", body="note one about kiwis")
        s.add(id="k3", body="note three about figs")
    (repo / ".gitignore").write_text("mem/.mdcg/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "k1 k3")
    with MdCG(repo / "mem") as s:
        s.compact_index()
    with MdCG(repo / "mem", auto_compact=None) as s:  # (no snapshot at close: the log holds these)
        s.update("k1", body="note one about mangoes")
        s.add(id="k2", body="scratch note")
    _git(repo, "reset", "-q", "--hard")
    _git(repo, "clean", "-fdq", "mem")
    with MdCG(repo / "mem") as s:
        assert sorted(s.ids()) == ["k1", "k3"]  # the catch-up re-read the files
        r = s.sync()
        assert (r.added, r.changed, r.deleted, r.clean) == ((), ("k1",), ("k2",), False)
        r = s.sync()  # told once
        assert (r.added, r.changed, r.deleted, r.clean) == ((), (), (), True)
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["sync", "--root", str(repo / "mem")])
    assert (result.exit_code, result.stdout) == (0, "in sync: nothing changed\n")


def test_b_first_sync_reports_a_hand_edit_made_while_closed(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _catch_up_store(root)
    path = next(p for p in root.rglob("k1.md"))
    path.write_text(path.read_text().replace("mangoes", "papayas"))  # same size: sed -i
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(app, ["sync", "--root", str(root), "--json"])
    assert result.exit_code == 0
    got = orjson.loads(result.stdout)
    assert (got["clean"], got["added"], got["changed"], got["deleted"]) == (False, [], ["k1"], [])
    with MdCG(root) as s:
        r = s.sync()
        assert (r.added, r.changed, r.deleted) == ((), (), ())  # told by the sync before


def test_b_a_handle_that_wrote_first_and_a_clean_open_report_nothing(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _catch_up_store(root)
    with MdCG(root) as s:  # the files are as the log left them
        r = s.sync()
        assert (r.added, r.changed, r.deleted, r.clean) == ((), (), (), True)
    path = next(p for p in root.rglob("k1.md"))
    path.write_text(path.read_text().replace("mangoes", "papaya"))
    with MdCG(root) as s:
        s.update("k1", body="note one about limes")  # this handle's write: the files are its own
        r = s.sync()
        assert (r.added, r.changed, r.deleted, r.clean) == ((), (), (), True)
