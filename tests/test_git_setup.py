"""`mdcg init --git` / configure_clone: the merge driver and the hooks that sync the index after a pull."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from test_merge import git
from typer.testing import CliRunner

from md_cg import MdCG, MdcgError, configure_clone
from md_cg.cli import app
from md_cg.merge import HOOK_MARK, HOOKS, driver_command, sync_line


@pytest.fixture(autouse=True)
def _git_available() -> None:
    if shutil.which("git") is None:
        pytest.fail("git is required by these tests")


def init_git(runner: CliRunner, clone: Path) -> list[str]:
    result = runner.invoke(app, ["init", "--git", "--root", str(clone / "mem")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_a_pull_is_seen_by_the_next_search_without_a_sync(tmp_path: Path) -> None:
    runner = CliRunner(env={"MDCG_ROOT": None})
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "hub.git")
    git(tmp_path, "clone", "-q", "hub.git", "a")
    a = tmp_path / "a"
    lines = init_git(runner, a)
    hooks = (a / ".git" / "hooks").resolve()
    assert lines == [
        f"store ready at {a / 'mem'} (0 nodes)",
        f"{a / 'mem' / '.gitattributes'} sends node files to the md-cg merge driver (commit it)",
        f"git config: merge.mdcg driver set for {a.resolve()}",
        *(f"{hooks / name}: syncs mem after git changes its files" for name in HOOKS),
        # then it syncs the store, as the hooks do (session 38)
        "in sync: the index was built from the files at open (0 memories); nothing changed since",
    ]
    assert git(a, "config", "merge.mdcg.driver").stdout.strip() == driver_command()
    as_json = runner.invoke(
        app, ["init", "--git", "--json", "--root", str(a / "mem")], catch_exceptions=False
    )
    told = json.loads(as_json.stdout)["merge_driver"]  # --git enabled it: no `git config` left to run
    assert told == f"{a / 'mem' / '.gitattributes'} sends node files to the md-cg merge driver (commit it)\n"
    for name in HOOKS:
        hook = hooks / name
        assert hook.read_text() == (
            f'#!/bin/sh\n{HOOK_MARK}\ncd "$(git rev-parse --show-toplevel)" || exit 0\n{sync_line("mem")}\n'
        )
        assert hook.stat().st_mode & 0o111
    with MdCG(a / "mem") as store:
        store.add(id="zoe", body="Zoë prefers tea")
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "a1")
    git(a, "push", "-q", "origin", "HEAD:main")

    git(tmp_path, "clone", "-q", "hub.git", "b")
    b = tmp_path / "b"
    init_git(runner, b)
    with MdCG(b / "mem") as store:
        store.add(id="move", body="Zoë moved to Zürich")
        store.update("zoe", body="Zoë prefers green tea")
    git(b, "add", "-A")
    git(b, "commit", "-q", "-m", "b1")
    git(b, "push", "-q", "origin", "HEAD:main")

    git(a, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(a / "mem", read_only=True) as store:  # a fresh open, as a one-shot mdcg search is
        assert sorted(store.ids()) == ["move", "zoe"]
        assert [h.id for h in store.search("zurich", record=False)[0] if not h.filler] == ["move"]
        assert [h.id for h in store.search("green", record=False)[0] if not h.filler] == ["zoe"]


def test_without_the_hooks_the_index_lags_until_a_sync(tmp_path: Path) -> None:
    """What the hooks are for: the same pull into a clone set up by hand."""
    git(tmp_path, "init", "-q", "-b", "main", "a")
    a = tmp_path / "a"
    with MdCG(a / "mem") as store:
        store.add(id="zoe", body="Zoë prefers tea")
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "a1")
    git(tmp_path, "clone", "-q", "a", "b")
    b = tmp_path / "b"
    with MdCG(b / "mem") as store:
        assert store.ids() == ["zoe"]
    with MdCG(a / "mem") as store:
        store.add(id="move", body="Zoë moved to Zürich")
    git(a, "add", "-A")
    git(a, "commit", "-q", "-m", "a2")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(b / "mem", read_only=True) as store:
        assert store.ids() == ["zoe"]
    configure_clone(b / "mem")
    git(a, "commit", "-q", "--allow-empty", "-m", "a3")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")  # the hook syncs what the last pull brought too
    with MdCG(b / "mem", read_only=True) as store:
        assert store.ids() == ["move", "zoe"]


def test_setup_is_idempotent_extends_its_hooks_and_leaves_others_alone(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "repo")
    repo = tmp_path / "repo"
    hooks = repo / ".git" / "hooks"
    (hooks / "post-rewrite").write_text("#!/bin/sh\necho mine\n")
    MdCG(repo / "one").close()
    MdCG(repo / "two" / "mem").close()
    first = configure_clone(repo / "one")
    before = {name: (hooks / name).read_bytes() for name in HOOKS}
    again = configure_clone(repo / "one")
    assert {name: (hooks / name).read_bytes() for name in HOOKS} == before
    assert again[1:] == [
        f"{hooks.resolve() / 'post-merge'}: already syncs one",
        f"{hooks.resolve() / 'post-checkout'}: already syncs one",
        f"{hooks.resolve() / 'post-rewrite'} exists and is not md-cg's: left as it is; add this line to it:\n"
        f"  {sync_line('one')}",
    ]
    assert first[3] == again[3]
    configure_clone(repo / "two" / "mem")
    assert (hooks / "post-merge").read_text().splitlines()[-2:] == [sync_line("one"), sync_line("two/mem")]
    assert (hooks / "post-rewrite").read_text() == "#!/bin/sh\necho mine\n"


def test_outside_a_git_work_tree_it_says_so(tmp_path: Path) -> None:
    MdCG(tmp_path / "mem").close()
    with pytest.raises(MdcgError, match=r"is not inside a git work tree .*; run git init or clone first"):
        configure_clone(tmp_path / "mem")
    result = CliRunner(env={"MDCG_ROOT": None}).invoke(
        app, ["init", "--git", "--root", str(tmp_path / "mem")]
    )
    assert result.exit_code == 2
    assert "is not inside a git work tree" in result.stderr


def test_the_hook_line_uses_this_python(tmp_path: Path) -> None:
    assert sync_line("my mem").startswith(
        f"{sys.executable} -m md_cg.cli -q sync --root 'my mem' >/dev/null || "
    )


def test_a_store_folder_named_with_quotes_runs_no_shell_code_from_the_hook(tmp_path: Path) -> None:
    """The hook's warning spliced the folder's name into a quoted string: a name holding
    a quote ran shell code when sync failed (`q'$(touch PWNED)'`)."""
    import subprocess

    rel = "q'$(touch PWNED)'"
    line = sync_line(rel, python="/bin/false")  # a sync that fails, so the warning runs
    done = subprocess.run(["sh", "-c", line], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert not (tmp_path / "PWNED").exists()
    assert done.stderr == (
        "md-cg: sync of the store q'$(touch PWNED)' failed or found problems; "
        "see: mdcg health --root 'q'\"'\"'$(touch PWNED)'\"'\"''\n"
    )
    # the command it suggests works when pasted: the name quoted as one word
    line = sync_line("bob's mem", python="/bin/false")
    done = subprocess.run(["sh", "-c", line], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.stderr == (
        "md-cg: sync of the store bob's mem failed or found problems; "
        "see: mdcg health --root 'bob'\"'\"'s mem'\n"
    )


def _two_clones(tmp_path: Path, runner: CliRunner) -> tuple[Path, Path]:
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "hub.git")
    git(tmp_path, "clone", "-q", "hub.git", "a")
    init_git(runner, tmp_path / "a")
    git(tmp_path / "a", "add", "-A")
    git(tmp_path / "a", "commit", "-q", "-m", "init")
    git(tmp_path / "a", "push", "-q", "origin", "HEAD:main")
    git(tmp_path, "clone", "-q", "hub.git", "b")
    init_git(runner, tmp_path / "b")
    return tmp_path / "a", tmp_path / "b"


def _shared(a: Path, b: Path, node_id: str, body: str) -> None:
    """A memory added in clone a, pushed, and pulled by clone b."""
    with MdCG(a / "mem") as s:
        s.add(id=node_id, body=body)
    _commit_push(a, node_id)
    git(b, "pull", "-q", "--no-rebase", "origin", "main")


def _commit_push(clone: Path, message: str) -> None:
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", message)
    git(clone, "push", "-q", "origin", "HEAD:main")


def test_a_forgotten_memory_renamed_in_another_clone_is_named_when_it_comes_back(tmp_path: Path) -> None:
    """A forgets a secret while B renames it: after the merge it was back in A under the new
    id and sync, health and search said nothing (git reviewer's find). The file now says
    what it was called (``renamed_from``) and the tombstone when it was made."""
    runner = CliRunner(env={"MDCG_ROOT": None})
    a, b = _two_clones(tmp_path, runner)
    _shared(a, b, "sec", "The vault root token is hunter2.")
    with MdCG(a / "mem") as s:
        s.forget("sec", "leaked secret")
    _commit_push(a, "forget sec")
    with MdCG(b / "mem") as s:
        s.rename("sec", "lab_token")
        assert s.get("lab_token").extra == {"renamed_from": ["sec"]}
    git(b, "add", "-A")
    git(b, "commit", "-q", "-m", "rename")
    assert git(b, "pull", "-q", "--no-rebase", "origin", "main", check=False).returncode != 0  # rename/delete
    _commit_push(b, "keep mine")
    pulled = git(a, "pull", "-q", "--no-rebase", "origin", "main")
    assert "found problems; see: mdcg health" in pulled.stderr  # the hook's sync said so
    with MdCG(a / "mem") as s:
        assert s.ids() == ["lab_token"]
        (finding,) = s.health().findings
        assert (finding.kind, finding.node_id) == ("forgotten_returned", "lab_token")
        assert finding.detail.startswith("forgotten in this clone as 'sec' on ")
        s.keep_returned("lab_token")
        assert s.health().findings == ()


def test_an_id_renamed_here_whose_old_file_a_merge_kept_is_named(tmp_path: Path) -> None:
    """A edits and renames a note while B edits it: keeping B's side of the modify/delete
    conflict left the memory under both ids, and no finding said so (git reviewer's find)."""
    runner = CliRunner(env={"MDCG_ROOT": None})
    a, b = _two_clones(tmp_path, runner)
    _shared(a, b, "note", "Use pnpm.")
    with MdCG(a / "mem") as s:
        s.update("note", body="Use pnpm 9.")
        s.rename("note", "pkg_manager")
    _commit_push(a, "rename")
    with MdCG(b / "mem") as s:
        s.update("note", body="Use pnpm, never npm.")
    git(b, "add", "-A")
    git(b, "commit", "-q", "-m", "edit")
    git(b, "pull", "-q", "--no-rebase", "origin", "main", check=False)
    _commit_push(b, "keep mine")
    git(a, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(a / "mem") as s:
        assert s.ids() == ["note", "pkg_manager"]
        (finding,) = s.health().findings
        assert (finding.kind, finding.node_id) == ("renamed_returned", "note")
        assert "renamed to 'pkg_manager' in this clone on " in finding.detail
        s.delete("note")
        assert s.health().findings == ()


def test_the_hooks_warn_when_the_stores_state_folder_is_tracked(tmp_path: Path) -> None:
    """One clone's ``git add -f mem/.mdcg`` replaced the other clones' index and tombstones at
    their next pull, and nothing said so (git reviewer's find). The hooks warn, and still exit 0."""
    runner = CliRunner(env={"MDCG_ROOT": None})
    a, b = _two_clones(tmp_path, runner)
    with MdCG(a / "mem") as s:
        s.add(id="lions", body="Lions sleep 20 hours a day.")
    git(a, "add", "-A")
    git(a, "add", "-f", "mem/.mdcg")
    git(a, "commit", "-q", "-m", "oops")
    git(a, "push", "-q", "origin", "HEAD:main")
    pulled = git(b, "pull", "-q", "--no-rebase", "origin", "main")
    # session 31: the exact message, and the settings files kept tracked: tests/test_git_hook_s31.py
    assert pulled.stderr.startswith("md-cg: git tracks files of mem/.mdcg/ that are each clone's own state")
    done = git(b, "checkout", "-q", "HEAD~1", "--", "mem")  # post-checkout: exit 0 all the same
    assert done.returncode == 0 and "md-cg: git tracks files of mem/.mdcg/" in done.stderr
    git(a, "rm", "-r", "-q", "--cached", "mem/.mdcg")
    git(a, "commit", "-q", "-m", "untrack")
    quiet = git(a, "checkout", "-q", "HEAD", "--", "mem")
    assert "git tracks files of" not in quiet.stderr
