"""The merge driver merges only versions of one memory (review rG, session 35).

Git pairs the files of two different memories: a file forgotten in one clone and a
similar new one added there (rename detection), or another memory renamed onto the id.
The driver merged the other clone's edits of the old memory into the new one (its
verification, confidence, line and tag), exit 0, nothing reported. It now checks what
md-cg's renames record (``renamed_from``) and merges a side that is another memory as
an add/add: a conflict naming both memories. ``created_at`` does not tell: a first
check on it (attack a1) called one memory's versions two whenever md-cg moved the date
(an edit of it, an add/add merge, an import), so a memory forgotten and added again
under its id stays a documented limit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from test_git_setup import init_git
from test_merge import GIT_ENV
from typer.testing import CliRunner

import md_cg
from md_cg import MdCG, Node, nodefile
from md_cg.merge import CONFLICT_KEY, describe_conflict, merge_node_files
from md_cg.node import format_instant

PATH = "mem/knowledge/n1.md"
#: md_cg.merge.MEMORIES_KEY (spelled out: the tests run against code without it)
MEMORIES_KEY = "different_memories"
BODY_X = (
    "部署说明 deployment notes: the staging cluster runs Python 3.11; 测试环境运行 Python 3.11。\n"
    "Use `make deploy-staging` to roll out; 回滚用 make rollback。\n"
    "Owner: platform team 平台组。"
)
BODY_Y = BODY_X.replace("3.11", "3.13")
B_LINE = "B: the staging DB password is in vault path kv/staging (乙的私有补充)"


def text(**fields: Any) -> bytes:
    fields.setdefault("id", "n1")
    fields.setdefault("layer", "knowledge")
    return nodefile.dumps(Node(**fields)).encode("utf-8")


def parsed(data: bytes) -> Node:
    return nodefile.loads(data.decode("utf-8"), PATH)


def resolve_text(path: str) -> str:
    return (
        "two different memories met in this file (git paired their files): keep each whole "
        f"under its own id (git show :2:{path} is ours, git show :3:{path} theirs) or keep one; "
        "docs/git.md, Two memories in one file"
    )


def memories(path: str, ours: tuple[str, float], base: tuple[str, float], theirs: tuple[str, float]) -> dict:
    def one(who: tuple[str, float]) -> dict[str, Any]:
        return {"id": who[0], "created_at": format_instant(who[1])}

    return {"ours": one(ours), "base": one(base), "theirs": one(theirs), "resolve": resolve_text(path)}


# -- merge_node_files on crafted versions ----------------------------------------------------


def test_a_side_with_another_creation_time_is_the_same_memory() -> None:
    """Attack a1: ``mdcg edit`` of the date in one clone (it stamps ``updated_at`` too), a
    body update in the other: the first check of session 35 called it two memories (exit
    1, the body between markers); it merges as before the check: the date and the body."""
    base = text(body="A long note.\n", created_at=5.0, updated_at=5.0)
    ours = text(body="A long note, edited.\n", created_at=5.0, updated_at=9.0)
    theirs = text(body="A long note.\n", created_at=4.0, updated_at=8.0)
    result = merge_node_files(base, ours, theirs, path=PATH)
    assert (result.clean, result.conflict) == (True, None)
    assert result.data == text(body="A long note, edited.\n", created_at=4.0, updated_at=9.0)
    # both clones added the id apart (the earlier creation time kept), then edited
    added = text(body="deploy with make\n", created_at=7.0, updated_at=7.0)
    mine = text(body="deploy with make\n", created_at=6.0, updated_at=8.0, tags=["ops"])
    other = text(body="deploy with make\n", created_at=7.0, updated_at=9.0, importance=0.9)
    both = merge_node_files(added, mine, other, path=PATH)
    assert (both.clean, parsed(both.data).tags, parsed(both.data).importance) == (True, ["ops"], 0.9)


def test_a_memory_renamed_onto_the_id_is_another_memory() -> None:
    """Attack a1 (on 12e1643 too): ``owner`` renamed to ``owner_old``, then ``owner_new``
    renamed to ``owner`` (a batch-mate: the same creation time). The other clone's tag and
    importance of the old ``owner`` landed on the other memory, exit 0."""
    base = text(id="owner", body="Zhang San\n", created_at=5.0)
    ours = text(id="owner", body="Zhang San\n", created_at=5.0, tags=["verified-by-b"], importance=0.95)
    theirs = text(id="owner", body="Wang Wu\n", created_at=5.0, extra={"renamed_from": ["owner_new"]})
    result = merge_node_files(base, ours, theirs, path=PATH)
    record = {
        "fields": {},
        "body": True,
        MEMORIES_KEY: memories(PATH, ("owner", 5.0), ("owner", 5.0), ("owner", 5.0)),
    }
    assert (result.clean, result.conflict) == (False, record)
    node = parsed(result.data)
    assert node.body == "<<<<<<< ours\nZhang San\n||||||| base\n=======\nWang Wu\n>>>>>>> theirs\n"
    # renamed away and back (owner -> x -> owner) is the same memory
    back = text(id="owner", body="Zhang San\n", created_at=5.0, extra={"renamed_from": ["owner", "x"]})
    assert merge_node_files(base, ours, back, path=PATH).clean


def test_the_same_creation_time_under_another_id_without_renamed_from_is_another_memory() -> None:
    """Batch-mates share a creation time: a similar file git took for a rename of n1."""
    base = text(body="A long note.\n", created_at=5.0)
    ours = text(body="A long note.\n", created_at=5.0, tags=["mine"])
    theirs = text(id="n2", body="A longer note.\n", created_at=5.0)
    result = merge_node_files(base, ours, theirs, path=PATH)
    record = {
        "fields": {"id": {"ours": "n1", "base": None, "theirs": "n2"}},
        "body": True,
        MEMORIES_KEY: memories(PATH, ("n1", 5.0), ("n1", 5.0), ("n2", 5.0)),
    }
    assert (result.clean, result.conflict) == (False, record)
    node = parsed(result.data)
    assert (node.id, node.tags, node.extra) == ("n1", ["mine"], {CONFLICT_KEY: record})
    assert "A long note.\n" in node.body and "A longer note.\n" in node.body


def test_an_md_cg_rename_against_an_edit_still_merges_cleanly() -> None:
    base = text(body="A long note.\n", created_at=5.0, updated_at=5.0)
    ours = text(body="A long note, edited.\n", created_at=5.0, updated_at=9.0)
    theirs = text(
        id="n2", body="A long note.\n", created_at=5.0, updated_at=8.0, extra={"renamed_from": ["n1"]}
    )
    result = merge_node_files(base, ours, theirs, path=PATH)
    assert (result.clean, result.conflict) == (True, None)
    assert result.data == text(
        id="n2", body="A long note, edited.\n", created_at=5.0, updated_at=9.0, extra={"renamed_from": ["n1"]}
    )
    # renamed back (n1 -> n2 -> n1): the renamed_from of either side names the other's id
    back = text(body="A long note.\n", created_at=5.0, updated_at=8.0, extra={"renamed_from": ["n1", "n2"]})
    edited = text(id="n2", body="A long note, edited.\n", created_at=5.0, extra={"renamed_from": ["n1"]})
    again = merge_node_files(theirs, edited, back, path=PATH)
    assert (again.clean, parsed(again.data).id, parsed(again.data).body) == (
        True,
        "n1",
        "A long note, edited.\n",
    )


def test_hand_written_files_without_created_at_merge_by_id_as_before() -> None:
    base = text(body="A\n")
    ours = text(body="A\n", tags=["t"])
    theirs = text(body="B\n")
    result = merge_node_files(base, ours, theirs, path=PATH)
    assert (result.clean, result.data) == (True, text(body="B\n", tags=["t"]))
    # one side gained a creation time (none to tell it by): the same memory too
    dated = merge_node_files(base, ours, text(body="B\n", created_at=5.0), path=PATH)
    assert (dated.clean, dated.data) == (True, text(body="B\n", tags=["t"], created_at=5.0))
    # another id and no renamed_from: not the base's memory, even undated
    other = merge_node_files(base, ours, text(id="n2", body="B\n"), path=PATH)
    assert not other.clean and other.conflict is not None
    assert other.conflict[MEMORIES_KEY]["theirs"] == {"id": "n2", "created_at": None}


# -- real clones -------------------------------------------------------------------


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git with the md_cg this test imported first on PYTHONPATH: the merge driver and
    the hooks git starts run the code under test (run against another tree, that tree)."""
    code = str(Path(md_cg.__file__).resolve().parents[1])
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd), "PYTHONPATH": os.pathsep.join([code, *sys.path])}
    env.pop("MDCG_ROOT", None)
    cmd = ["git", "-c", "user.name=md-cg test", "-c", "user.email=test@example.invalid", *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done


def _two_clones(tmp_path: Path) -> tuple[Path, Path]:
    """Two clones of one hub, each set up by ``mdcg init --git`` (docs/git.md)."""
    runner = CliRunner(env={"MDCG_ROOT": None})
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "hub.git")
    git(tmp_path, "clone", "-q", "hub.git", "a")
    init_git(runner, tmp_path / "a")
    _commit_push(tmp_path / "a", "init")
    git(tmp_path, "clone", "-q", "hub.git", "b")
    init_git(runner, tmp_path / "b")
    return tmp_path / "a", tmp_path / "b"


def _commit_push(clone: Path, message: str) -> None:
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", message)
    git(clone, "push", "-q", "origin", "HEAD:main")


def git_stage(clone: Path, stage: int, path: str) -> bytes:
    """The version git keeps of an unmerged ``path`` (2: ours, 3: theirs)."""
    return git(clone, "show", f":{stage}:{path}").stdout.encode("utf-8")


def _unmerged(clone: Path) -> list[str]:
    out = git(clone, "-c", "core.quotepath=false", "diff", "--name-only", "--diff-filter=U").stdout
    return out.splitlines()


def test_a_new_similar_file_git_takes_for_a_rename_is_not_merged_into(tmp_path: Path) -> None:
    """Clone a forgets py_staging and adds py_staging_2026; clone b verifies, edits and tags
    py_staging. On main b's pull merged all of it into py_staging_2026, exit 0, and
    py_staging was gone from b with nothing reported."""
    a, b = _two_clones(tmp_path)
    with MdCG(a / "mem") as s:
        s.add(id="py_staging", body=BODY_X, tags=["domain:运维", "python"])
    _commit_push(a, "init")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(a / "mem") as s:
        s.forget("py_staging", "outdated: wrong python version")
        s.add(id="py_staging_2026", body=BODY_Y, tags=["domain:运维", "python"])
        new_made = s.get("py_staging_2026").created_at
        new_rel = s.path_of("py_staging_2026").relative_to(s.root).as_posix()
    _commit_push(a, "a: forget old, add corrected")
    with MdCG(b / "mem") as s:
        s.verify("py_staging", "python3 --version says 3.11", "confirmed")
        s.update("py_staging", tags=["domain:运维", "python", "secret-b-tag"], body=BODY_X + "\n" + B_LINE)
        old_made = s.get("py_staging").created_at
        old_rel = s.path_of("py_staging").relative_to(s.root).as_posix()
    git(b, "commit", "-qam", "b: verify + edit py_staging")
    pulled = git(b, "pull", "--no-rebase", "origin", "main", check=False)
    path = f"mem/{new_rel}"
    assert pulled.returncode == 1
    assert f"CONFLICT (content): Merge conflict in {path}" in pulled.stdout
    assert _unmerged(b) == [path]
    record = {
        "fields": {"id": {"ours": "py_staging", "base": None, "theirs": "py_staging_2026"}},
        "body": True,
        MEMORIES_KEY: memories(
            path, ("py_staging", old_made), ("py_staging", old_made), ("py_staging_2026", new_made)
        ),
    }
    assert f"md-cg merge: {describe_conflict(path, record)}" in pulled.stderr
    node = nodefile.read_node(b / path)
    assert node.extra == {CONFLICT_KEY: record}
    assert BODY_X + "\n" + B_LINE in node.body and BODY_Y in node.body
    with MdCG(b / "mem") as s:
        s.sync()
        assert [(f.kind, f.node_id, f.path) for f in s.health().findings] == [
            ("merge_conflict", "py_staging", new_rel)
        ]
    # what docs/git.md says to do: each memory whole under its own id, from git's stages
    (b / "mem" / old_rel).write_bytes(git_stage(b, 2, path))
    (b / path).write_bytes(git_stage(b, 3, path))
    git(b, "add", "-A")
    git(b, "commit", "-qm", "keep both memories")
    with MdCG(b / "mem") as s:
        s.sync()
        assert s.ids() == ["py_staging", "py_staging_2026"]
        old, new = s.get("py_staging"), s.get("py_staging_2026")
        assert (old.body, old.tags, old.confidence) == (
            BODY_X + "\n" + B_LINE,
            ["domain:运维", "python", "secret-b-tag"],
            0.55,
        )
        assert (new.body, new.tags, new.confidence, new.verification_history) == (
            BODY_Y,
            ["domain:运维", "python"],
            None,
            [],
        )
        assert s.health().findings == ()
    git(b, "push", "-q", "origin", "HEAD:main")
    git(a, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(a / "mem") as s:  # the clone that forgot it is told it came back
        assert [(f.kind, f.node_id) for f in s.health().findings] == [("forgotten_returned", "py_staging")]


def test_another_memory_renamed_onto_the_id_is_not_merged_into(tmp_path: Path) -> None:
    """Attack a1's t6: `owner` and `owner_new` imported together (one creation time); clone a
    renames owner -> owner_old and owner_new -> owner; clone b tags and rates the old owner.
    On 12e1643 b's tag and importance landed on the Wang Wu memory, exit 0."""
    a, b = _two_clones(tmp_path)
    old_body, new_body = ("项目负责人 owner: 张三 (Zhang San)", "项目负责人 owner from 2027: 王五 (Wang Wu)")
    with MdCG(a / "mem") as s:
        s.add_many([Node(id="owner", body=old_body), Node(id="owner_new", body=new_body)])
    _commit_push(a, "owners")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(a / "mem") as s:
        s.rename("owner", "owner_old")
        s.rename("owner_new", "owner")
        rel = s.path_of("owner").relative_to(s.root).as_posix()
    _commit_push(a, "a: swap owners")
    with MdCG(b / "mem") as s:
        s.update("owner", tags=["verified-by-b"], importance=0.95)
        made = s.get("owner").created_at
    git(b, "commit", "-qam", "b: verified")
    pulled = git(b, "pull", "--no-rebase", "origin", "main", check=False)
    path = f"mem/{rel}"
    assert pulled.returncode == 1
    assert f"CONFLICT (content): Merge conflict in {path}" in pulled.stdout
    assert path in _unmerged(b)
    node = nodefile.read_node(b / path)
    record = node.extra[CONFLICT_KEY]
    assert record[MEMORIES_KEY] == memories(path, ("owner", made), ("owner", made), ("owner", made))
    assert f"md-cg merge: {describe_conflict(path, record)}" in pulled.stderr
    assert old_body in node.body and new_body in node.body
    assert parsed(git_stage(b, 2, path)).tags == ["verified-by-b"]  # both whole in git's stages
    assert parsed(git_stage(b, 3, path)).body == new_body
    with MdCG(b / "mem") as s:
        s.sync()
        assert ("merge_conflict", "owner", rel) in [(f.kind, f.node_id, f.path) for f in s.health().findings]
