"""Two clones each add a DIFFERENT memory under one id (attack atk10 F1, session 41).

A tags it ``domain:work``, B ``domain:family``: the files land in different bucket
folders, and ``git merge`` keeps both without a conflict. Before session 41 ``forget``
(and ``delete``) of the id removed the other memory too -- never shown to the user, with
no tombstone of its own -- and A lost it silently on its next pull; ``rename`` was
refused and no md-cg call could follow health's "remove or rename one copy". Now a
removal of an id whose other files hold a different memory is refused (naming every
file) unless ``all_copies=True`` / ``--all-copies``, and ``rename(id, new, path=FILE)`` /
``mdcg rename ID NEW --path FILE`` gives one file its own id. Copies of the same memory
(a ``cp``, a move whose old file stayed) still go with it, as before.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_dup_copies_s33 import _cli, _env

from md_cg import MdCG
from md_cg.errors import InvalidArgumentError

WORK = "A: Weekly meeting with the design team is on Mondays at 10."
FAMILY = "B: The family meeting about grandma's care is every first Sunday."
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.quotepath=false", *args]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def _files(root: Path) -> dict[str, str]:
    """Each memory file's path -> its body's last line."""
    return {
        p.relative_to(root).as_posix(): p.read_text("utf-8").rstrip("\n").rsplit("\n", 1)[-1]
        for p in sorted(root.glob("*/**/*.md"))
        if not p.relative_to(root).as_posix().startswith(".")
    }


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def _merged(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """Clones a and b of one origin; a adds ``meeting`` (work), b (family), b pulls a:
    (a, b, a's file, b's file)."""
    origin, a, b = tmp_path / "origin.git", tmp_path / "a", tmp_path / "b"
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    _git(tmp_path, "clone", "-q", str(origin), "a")
    _ok(_cli(a, "init"))
    _ok(_cli(a, "add", "--id", "seed", "--body", "seed"))
    _git(a, "add", "-A")
    _git(a, "commit", "-qm", "init")
    _git(a, "push", "-q", "origin", "HEAD:main")
    _git(tmp_path, "clone", "-q", "-b", "main", str(origin), "b")
    _ok(_cli(a, "add", "--id", "meeting", "--tag", "domain:work", "--body", WORK))
    _git(a, "add", "-A")
    _git(a, "commit", "-qm", "a")
    _git(a, "push", "-q", "origin", "HEAD:main")
    _ok(_cli(b, "add", "--id", "meeting", "--tag", "domain:family", "--body", FAMILY))
    _git(b, "add", "-A")
    _git(b, "commit", "-qm", "b")
    _git(b, "pull", "-q", "--no-rebase", "origin", "main")  # no conflict: two files
    mine = {p: t for p, t in _files(b).items() if p.endswith("/meeting.md")}
    assert sorted(mine.values()) == [WORK, FAMILY]
    work = next(p for p, t in mine.items() if t == WORK)
    family = next(p for p, t in mine.items() if t == FAMILY)
    assert "cond_work" in work and "cond_family" in family
    return a, b, work, family


def _refusal(verb: str, other: str, shown: str) -> str:
    return (
        f"error: cannot {verb} 'meeting': other files hold this id with a different memory ({other}; "
        f"{shown} is the one shown), and would go with it. To keep one, give it its own id: "
        f"`mdcg rename 'meeting' NEW_ID --path {other}` (rename(..., path=)); or {verb} every copy: "
        "--all-copies (all_copies=True)\n"
    )


@needs_git
def test_forget_of_a_merged_id_is_refused_then_rename_path_settles_it(tmp_path: Path) -> None:
    a, b, work, family = _merged(tmp_path)
    before = _files(b)
    assert _cli(b, "sync").returncode == 1  # the duplicate reported
    shown = _ok(_cli(b, "get", "meeting"))
    assert shown.rstrip("\n").rsplit("\n", 1)[-1] == FAMILY  # b's is the one shown
    health = _cli(b, "health", "--json")
    assert f"give this file its own id: mdcg rename meeting NEW_ID --path {work}" in health.stdout
    for verb, args in (("forget", ("--reason", "meeting cancelled")), ("delete", ())):
        done = _cli(b, verb, "meeting", *args)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", _refusal(verb, work, family))
        assert _files(b) == before  # nothing removed
    assert not (b / ".mdcg" / "audit").exists() or "meeting" not in "".join(
        p.read_text("utf-8") for p in (b / ".mdcg" / "audit").glob("*")
    )
    # the advice works: a's memory gets its own id, b's keeps the id
    out = _ok(_cli(b, "rename", "meeting", "meeting-work", "--path", work))
    assert (
        out
        == f"meeting -> meeting-work ({b / work} -> {b / work.replace('meeting.md', 'meeting-work.md')})\n"
    )
    after = {
        **{p: t for p, t in before.items() if p != work},
        work.replace("meeting.md", "meeting-work.md"): WORK,
    }
    assert _files(b) == after
    assert _ok(_cli(b, "sync")) == "in sync: nothing changed\n"
    assert _ok(_cli(b, "health")).startswith("health: OK")
    with MdCG(b) as s:
        assert sorted(s.ids()) == ["meeting", "meeting-work", "seed"]
        assert s.get("meeting").body.strip() == FAMILY
        assert s.get("meeting-work").body.strip() == WORK
        assert s.get("meeting-work").tags == ["domain:work"]
    # now forgetting meeting forgets b's memory alone
    out = _ok(_cli(b, "forget", "meeting", "--reason", "meeting cancelled"))
    assert out == "meeting: forgotten (knowledge); tombstone kept\n"
    assert _files(b) == {p: t for p, t in after.items() if p != family}
    # a pulls: its memory is there under its new id, nothing lost
    _git(b, "add", "-A")
    _git(b, "commit", "-qm", "settled")
    _git(b, "push", "-q", "origin", "HEAD:main")
    _git(a, "pull", "-q", "--no-rebase", "origin", "main")
    _cli(a, "sync")
    with MdCG(a) as s:
        assert sorted(s.ids()) == ["meeting-work", "seed"]
        assert s.get("meeting-work").body.strip() == WORK


@needs_git
@pytest.mark.parametrize("verb", ["forget", "delete"])
def test_all_copies_removes_every_file_of_the_id(tmp_path: Path, verb: str) -> None:
    _a, b, work, family = _merged(tmp_path)
    args = ("--reason", "both cancelled") if verb == "forget" else ()
    out = _ok(_cli(b, verb, "meeting", *args, "--all-copies"))
    first = (
        "meeting: forgotten (knowledge); tombstone kept"
        if verb == "forget"
        else f"meeting: deleted ({b / family})"
    )
    assert out == f"{first}\nits copies removed too: {work}\n"
    assert _files(b) == {"knowledge/orphan/seed.md": "seed"}


@needs_git
def test_library_refusal_and_all_copies(tmp_path: Path) -> None:
    _a, b, work, family = _merged(tmp_path)
    before = _files(b)
    with MdCG(b) as s:
        s.sync()
        for call in (
            lambda: s.forget("meeting", "x"),
            lambda: s.forget_many(["meeting", "seed"], "x"),
            lambda: s.delete("meeting"),
        ):
            with pytest.raises(InvalidArgumentError) as err:
                call()
            assert err.value.name == "all_copies"
            assert f"({work}; {family} is the one shown)" in str(err.value)
        assert _files(b) == before
        # (the file shown, family, may be renamed by path since session 42: test_rename_shown_s42)
        with pytest.raises(InvalidArgumentError, match="not a copy of it"):
            s.rename("meeting", "m2", path="knowledge/orphan/seed.md")
        with pytest.raises(InvalidArgumentError, match="that id exists"):
            s.rename("meeting", "seed", path=work)
        assert _files(b) == before
        gone = s.forget("meeting", "both", all_copies=True)
        assert gone.copies == (work,)
    assert _files(b) == {"knowledge/orphan/seed.md": "seed"}


def test_copies_of_the_same_memory_still_go_without_all_copies(tmp_path: Path) -> None:
    """A copy by hand (another folder) and a move's old file (another layer and
    updated_at): the same memory, removed with it as before."""
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="r", body="the body", tags=["domain:proj"])
        rel = s.path_of("r").relative_to(root).as_posix()
    text = (root / rel).read_text("utf-8")
    (root / "knowledge" / "hand").mkdir()
    (root / "knowledge" / "hand" / "r.md").write_text(text, "utf-8")
    moved = text.replace('layer: "knowledge"', 'layer: "contextual"')
    moved = "\n".join(
        'updated_at: "2020-01-01T00:00:00Z"' if x.startswith("updated_at:") else x for x in moved.split("\n")
    )
    assert moved != text
    (root / "contextual").mkdir(exist_ok=True)
    (root / "contextual" / "r.md").write_text(moved, "utf-8")
    with MdCG(root) as s:
        s.sync()
        gone = s.forget("r", "privacy")
        assert sorted(gone.copies) == ["contextual/r.md", "knowledge/hand/r.md"]
    assert _files(root) == {}


def test_files_differing_only_in_their_text_are_different_memories(tmp_path: Path) -> None:
    """Before-stop review: the digest left the body out (``Node.to_dict`` holds none), so a
    file of the id in another layer (or folder) with other text and the same fields was a
    "copy": forget removed it, unshown. Now refused; the text held by neither is lost."""
    root = tmp_path / "m"
    with MdCG(root, create=True) as s:
        s.add(id="meeting", body="work meeting on Monday", tags=["domain:work"])
        rel = s.path_of("meeting").relative_to(root).as_posix()
    text = (root / rel).read_text("utf-8")
    other = text.replace("work meeting on Monday", "family dinner on Sunday")
    other = other.replace('layer: "knowledge"', 'layer: "contextual"')
    (root / "contextual").mkdir(exist_ok=True)
    (root / "contextual" / "meeting.md").write_text(other, "utf-8")
    before = _files(root)
    with MdCG(root) as s:
        s.sync()
        for call in (lambda: s.forget("meeting", "x"), lambda: s.delete("meeting")):
            with pytest.raises(InvalidArgumentError) as err:
                call()
            assert err.value.name == "all_copies"
            assert "other files hold this id with a different memory" in str(err.value)
    assert _files(root) == before


@needs_git
def test_mcp_forget_is_refused_with_the_files_named(tmp_path: Path) -> None:
    """No schema change: the MCP forget answers the refusal as its error text."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from md_cg.mcp_server import create_server

    _a, b, work, family = _merged(tmp_path)
    before = _files(b)

    async def run() -> str:
        with MdCG(b) as store:
            store.sync()
            async with Client(create_server(b, store=store)) as client:
                got = await client.call_tool("forget", {"id": "meeting", "reason": "x"})
                assert got.is_error
                return str(got.content[0].text)

    text = anyio.run(run)
    assert f"other files hold this id with a different memory ({work}; {family} is the one shown)" in text
    assert f"--path {work}" in text
    assert _files(b) == before


def test_a_scoped_handle_is_told_only_its_own_files(tmp_path: Path) -> None:
    """Agent a's ``meeting`` and agent b's different one (one more of a's, different, in
    another folder): a's forget is refused naming a's other file, never b's; a's rename of
    b's file is refused as no copy of its id; with ``all_copies`` a's two files go, b's stays.
    ``a_old``: the file of a's that is not shown."""
    from md_cg import Scope

    root, other = tmp_path / "m", tmp_path / "other"
    with MdCG(root, create=True, scope=Scope(agent="a")) as s:
        s.add(id="meeting", body="a: design review", tags=["domain:work"])
    for agent, body, tag in (
        ("b", "b: family dinner", "domain:family"),
        ("a", "a: old notes", "domain:home"),
    ):
        shutil.rmtree(other, ignore_errors=True)
        with MdCG(other, create=True, scope=Scope(agent=agent)) as s:
            s.add(id="meeting", body=body, tags=[tag])
            rel = s.path_of("meeting").relative_to(other).as_posix()
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(other / rel, root / rel)
    mine = {p: t for p, t in _files(root).items()}
    b_file = next(p for p, t in mine.items() if t == "b: family dinner")
    with MdCG(root, scope=Scope(agent="a")) as s:
        s.sync()
        shown = s.path_of("meeting").relative_to(root).as_posix()
        assert mine[shown] in ("a: design review", "a: old notes")  # the newer of a's two
        a_old = next(p for p, t in mine.items() if p != shown and t.startswith("a: "))
        with pytest.raises(InvalidArgumentError) as err:
            s.forget("meeting", "x")
        assert f"({a_old}; {shown} is the one shown)" in str(err.value)
        assert b_file not in str(err.value) and "family" not in str(err.value)
        with pytest.raises(InvalidArgumentError) as err:
            s.rename("meeting", "m2", path=b_file)
        assert (
            str(err.value)
            == f"cannot rename 'meeting' at {b_file}: not a copy of it (its other files: {a_old})"
        )
        assert _files(root) == mine
        assert s.forget("meeting", "x", all_copies=True).copies == (a_old,)
    assert _files(root) == {b_file: "b: family dinner"}
