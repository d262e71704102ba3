"""The hooks' warning about a tracked ``.mdcg/`` (session 31, reviewer r1 finding 2).

The check was ``git ls-files --error-unmatch -- mem/.mdcg``: any tracked file under
``.mdcg/`` set it off, the settings files the store's own ``.gitignore`` re-includes
too, so after a clone committed ``.mdcg/synonyms.json`` every pull and checkout in the
other clones said ``.mdcg/`` was tracked and advised ``git rm -r --cached mem/.mdcg``,
which untracks the settings and deletes them in every clone at its next pull. The
hooks now name the tracked files that are state (at most five, then how many more)
and advise a ``git rm --cached`` of exactly those.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from test_git_setup import _two_clones, init_git
from test_merge import clone, git, make_origin
from typer.testing import CliRunner

from md_cg import MdCG, configure_clone, merge
from md_cg.engine import GITIGNORE
from md_cg.merge import HOOK_MARK, HOOKS, sync_line

SYNONYMS = '{"version": 1, "groups": [["car", "automobile"]]}\n'
ADVICE = (
    "Copy mem/.mdcg/audit/ aside in every clone, then untrack exactly these (the settings files "
    "synonyms.json, retention.json, retention_markers.json stay tracked), from the top of the work "
    "tree: git rm -r -q --cached -- ':(literal)mem/.mdcg' ':(exclude,literal)mem/.mdcg/synonyms.json' "
    "':(exclude,literal)mem/.mdcg/retention.json' ':(exclude,literal)mem/.mdcg/retention_markers.json' "
    "(docs/git.md)\n"
)
HEAD = (
    "md-cg: git tracks files of mem/.mdcg/ that are each clone's own state (index, tombstones, "
    "access counts): a pull replaces them, and untracking them deletes them in the other clones:\n"
)


def _commit_push(clone: Path, message: str) -> None:
    git(clone, "commit", "-q", "-m", message)
    git(clone, "push", "-q", "origin", "HEAD:main")


def test_the_settings_files_are_the_ones_the_stores_gitignore_re_includes() -> None:
    included = [line.removeprefix("!.mdcg/") for line in GITIGNORE.splitlines() if line.startswith("!.mdcg/")]
    assert sorted(included) == sorted(merge.SETTINGS_FILES)
    assert sorted(included) == ["retention.json", "retention_markers.json", "synonyms.json"]


def test_a_committed_settings_file_sets_off_no_warning(tmp_path: Path) -> None:
    """r1's hookwarn.sh: clone a commits a valid synonyms.json (docs/git.md: it belongs in the
    repository); every pull and checkout in clone b warned and advised to untrack all of .mdcg/."""
    a, b = _two_clones(tmp_path, CliRunner(env={"MDCG_ROOT": None}))
    (a / "mem" / ".mdcg" / "synonyms.json").write_text(SYNONYMS, encoding="utf-8")
    (a / "mem" / ".mdcg" / "retention.json").write_text("{}\n", encoding="utf-8")
    git(a, "add", "-A")
    assert git(a, "ls-files", "mem/.mdcg").stdout == "mem/.mdcg/retention.json\nmem/.mdcg/synonyms.json\n"
    _commit_push(a, "store settings")
    pulled = git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert (pulled.returncode, pulled.stderr) == (0, "")
    assert (b / "mem" / ".mdcg" / "synonyms.json").read_text(encoding="utf-8") == SYNONYMS
    switched = git(b, "checkout", "-q", "-b", "x")
    assert (switched.returncode, switched.stderr) == (0, "")


def test_tracked_state_files_are_named_and_the_advice_untracks_exactly_them(tmp_path: Path) -> None:
    a, b = _two_clones(tmp_path, CliRunner(env={"MDCG_ROOT": None}))
    meta = a / "mem" / ".mdcg"
    (meta / "synonyms.json").write_text(SYNONYMS, encoding="utf-8")
    (meta / "trash").mkdir()
    for k in range(7):
        (meta / "trash" / f"t{k}").write_text(f"{k}\n", encoding="utf-8")
    git(a, "add", "-A")
    git(a, "add", "-f", "mem/.mdcg/index.token", "mem/.mdcg/trash")
    _commit_push(a, "oops")
    pulled = git(b, "pull", "-q", "--no-rebase", "origin", "main")
    names = ["mem/.mdcg/index.token", *(f"mem/.mdcg/trash/t{k}" for k in range(4))]
    assert pulled.returncode == 0
    assert pulled.stderr == HEAD + "".join(f"  {n}\n" for n in names) + "  and 3 more\n" + ADVICE
    done = git(b, "checkout", "-q", "HEAD~1", "--", "mem")  # post-checkout: exit 0 all the same
    assert done.returncode == 0 and done.stderr == pulled.stderr
    # the advice, pasted at the top of a's work tree, untracks the state and nothing else
    command = re.search(r"from the top of the work tree: (git rm .*) \(docs/git\.md\)$", ADVICE.strip())
    assert command is not None
    git(a, *shlex.split(command.group(1))[1:])
    assert git(a, "ls-files", "mem/.mdcg").stdout == "mem/.mdcg/synonyms.json\n"
    assert (meta / "trash" / "t6").exists() and (meta / "index.token").exists()  # --cached: kept here
    _commit_push(a, "untrack the state")
    git(b, "checkout", "-q", "HEAD", "--", "mem")
    pulled = git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert (pulled.returncode, pulled.stderr) == (0, "")
    assert (b / "mem" / ".mdcg" / "synonyms.json").read_text(encoding="utf-8") == SYNONYMS
    assert git(b, "ls-files", "mem/.mdcg").stdout == "mem/.mdcg/synonyms.json\n"


def test_two_tracked_state_files_are_named_without_a_count(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "repo")
    repo = tmp_path / "repo"
    MdCG(repo / "mem").close()
    for name in ("index.token", "retention_markers.json"):
        (repo / "mem" / ".mdcg" / name).write_text("{}\n", encoding="utf-8")
    git(repo, "add", "-f", "mem/.mdcg/index.token", "mem/.mdcg/lock", "mem/.mdcg/retention_markers.json")
    line = sync_line("mem", python="/bin/true")
    done = subprocess.run(["sh", "-c", line], cwd=repo, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == HEAD + "  mem/.mdcg/index.token\n  mem/.mdcg/lock\n" + ADVICE


def test_a_store_folder_named_with_a_glob_is_checked_by_its_name(tmp_path: Path) -> None:
    """The old check took the folder's name as a git pattern, and ``me*/.mdcg`` matches no file
    (a pattern holding ``*`` is not matched as a leading folder): the tracked state of the store
    ``me*`` was never told. Nor is another store's (``mem``) state told as its own."""
    git(tmp_path, "init", "-q", "repo")
    repo = tmp_path / "repo"
    MdCG(repo / "mem").close()
    MdCG(repo / "me*").close()
    (repo / "mem" / ".mdcg" / "index.token").write_text("t\n", encoding="utf-8")
    git(repo, "add", "-f", "mem/.mdcg/index.token")
    line = sync_line("me*", python="/bin/true")
    done = subprocess.run(["sh", "-c", line], cwd=repo, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    git(repo, "add", "-f", "me*/.mdcg/lock")
    line = sync_line("me*", python="/bin/true")
    done = subprocess.run(["sh", "-c", line], cwd=repo, capture_output=True, text=True, check=False)
    assert done.stderr.splitlines()[:2] == [
        "md-cg: git tracks files of me*/.mdcg/ that are each clone's own state (index, tombstones, "
        "access counts): a pull replaces them, and untracking them deletes them in the other clones:",
        "  me*/.mdcg/lock",
    ]


def test_an_earlier_versions_hook_line_is_brought_up_to_date(tmp_path: Path) -> None:
    """A clone set up before this fix keeps its hooks: ``init --git`` said "already syncs" and
    left the line whose warning advised untracking the settings files. It now rewrites it."""
    git(tmp_path, "init", "-q", "repo")
    repo = tmp_path / "repo"
    init_git(CliRunner(env={"MDCG_ROOT": None}), repo)
    hooks = (repo / ".git" / "hooks").resolve()
    old = (
        "/old/python -m md_cg.cli -q sync --root mem >/dev/null || echo 'md-cg: sync failed' >&2; "
        "if git ls-files --error-unmatch -- mem/.mdcg >/dev/null 2>&1; then echo 'untrack all' >&2; fi"
    )
    other = sync_line("two")
    top = f'#!/bin/sh\n{HOOK_MARK}\ncd "$(git rev-parse --show-toplevel)" || exit 0\n'
    for name in HOOKS:
        (hooks / name).write_text(f"{top}{old}\n{other}\n{old}\n", encoding="utf-8")
    done = configure_clone(repo / "mem")
    assert done[1:] == [f"{hooks / name}: its line for mem brought up to date" for name in HOOKS]
    for name in HOOKS:
        assert (hooks / name).read_text(encoding="utf-8") == f"{top}{sync_line('mem')}\n{other}\n"
    assert configure_clone(repo / "mem")[1:] == [f"{hooks / name}: already syncs mem" for name in HOOKS]


@pytest.mark.parametrize("driver", [False, True])
def test_the_two_clone_scenario_of_docs_git_md(tmp_path: Path, driver: bool) -> None:
    """The figures of docs/git.md "Measured: the two-clone scenario" (re-measured in session 31:
    the table still said 8 files changed on both sides, from when ``compact_access()`` wrote
    access counts into the node files; it writes none now)."""
    origin = make_origin(tmp_path, 8)
    clones = {name: clone(origin, name) for name in ("a", "b")}
    queries = {"a": ["asyncio", "event loop", "topic", "note"], "b": ["asyncio", "second line"]}
    for name, path in clones.items():
        if not driver:
            git(path, "config", "--unset", "merge.mdcg.driver")
        with MdCG(path) as store:
            for q in queries[name]:
                store.search(q)
            store.compact_access()
            store.verify("n1", f"checked in clone {name}", "confirmed")
            store.add(
                id=f"new_{name}", layer="knowledge", body=f"added in {name}\n", tags=["domain:computing"]
            )
            edited = "n2" if name == "a" else "n3"
            store.update(edited, body=f"note {edited[1]}: asyncio event loop topic\nedited in {name}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"work in {name}")
    a = clones["a"]
    git(a, "remote", "add", "other", str(clones["b"]))
    git(a, "fetch", "-q", "other")
    base = git(a, "merge-base", "HEAD", "other/main").stdout.strip()
    ours, theirs = (
        set(git(a, "diff", "--name-only", base, side).stdout.split()) for side in ("HEAD", "other/main")
    )
    n1 = git(a, "ls-files", "knowledge/**/n1.md").stdout.split()
    assert sorted(ours & theirs) == n1 and len(n1) == 1  # only n1, confirmed in both clones
    git(a, "merge", "--no-edit", "other/main", check=False)
    conflicted = git(a, "diff", "--name-only", "--diff-filter=U").stdout.split()
    with MdCG(a) as store:
        report = store.sync()
        ids = store.ids()
        confidence = store.get("n1").confidence if "n1" in ids else None
    everyone = sorted([f"n{i}" for i in range(8)] + ["new_a", "new_b"])
    if driver:
        assert (conflicted, report.malformed, ids, confidence) == ([], (), everyone, 0.6)
    else:
        assert conflicted == n1
        assert [path for path, _ in report.malformed] == n1
        assert (ids, confidence) == ([i for i in everyone if i != "n1"], None)
