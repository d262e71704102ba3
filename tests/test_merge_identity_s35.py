"""The merge driver merges only versions of one memory (review rG, session 35).

Git pairs the files of two different memories: a file forgotten in one clone and a
similar new one added there (rename detection), or a memory forgotten and added again
under its id. The driver merged the other clone's edits of the old memory into the new
one (its verification, confidence, line and tag), exit 0, nothing reported. It now
checks identity first (same ``created_at``; same id or an md-cg rename) and merges a
side that is another memory as an add/add: a conflict naming both memories.
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


def test_a_side_with_another_creation_time_is_another_memory() -> None:
    """Forgotten and added again under the id: on main, theirs' body and created_at came
    with ours' tag and verification, clean."""
    base = text(body="owner: Zhang San\n", created_at=5.0, updated_at=5.0, confidence=0.5)
    ours = text(body="owner: Zhang San\n", created_at=5.0, updated_at=8.0, confidence=0.5, tags=["checked"])
    theirs = text(body="owner: Wang Wu\n", created_at=7.0, updated_at=7.0, confidence=0.5)
    result = merge_node_files(base, ours, theirs, path=PATH)
    record = {
        "fields": {},
        "body": True,
        MEMORIES_KEY: memories(PATH, ("n1", 5.0), ("n1", 5.0), ("n1", 7.0)),
    }
    assert (result.clean, result.conflict, result.fallback, result.whole) == (False, record, None, False)
    node = parsed(result.data)
    assert node.extra == {CONFLICT_KEY: record}
    assert node.body == (
        "<<<<<<< ours\nowner: Zhang San\n||||||| base\n=======\nowner: Wang Wu\n>>>>>>> theirs\n"
    )
    assert describe_conflict(PATH, record) == (
        f"{PATH}: two different memories, not two versions of one: ours 'n1' (created "
        "1970-01-01T00:00:05.000000Z), theirs 'n1' (created 1970-01-01T00:00:07.000000Z); both are "
        f"kept, see 'merge_conflict' in its frontmatter: {resolve_text(PATH)}"
    )
    # the other way round (git pull --rebase swaps the sides): the same, mirrored
    flipped = merge_node_files(base, theirs, ours, path=PATH)
    assert flipped.conflict == {
        "fields": {},
        "body": True,
        MEMORIES_KEY: memories(PATH, ("n1", 7.0), ("n1", 5.0), ("n1", 5.0)),
    }


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


def test_a_memory_added_again_under_a_forgotten_id_is_not_merged_into(tmp_path: Path) -> None:
    """Clone a forgets `owner` (张三) and adds a new `owner` (王五); clone b verifies and
    tags the old one. On main the 王五 memory came out with b's 张三 evidence, its
    confidence and its tag, exit 0, and health said nothing."""
    a, b = _two_clones(tmp_path)
    old_body, new_body = (
        "项目负责人 project owner: 张三 (Zhang San)\nbackup: 李四",
        "项目负责人 project owner: 王五 (Wang Wu)\nbackup: 李四",
    )
    with MdCG(a / "mem") as s:
        s.add(id="owner", body=old_body)
    _commit_push(a, "owner")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    with MdCG(a / "mem") as s:
        s.forget("owner", "wrong person")
        s.add(id="owner", body=new_body)
        new_made = s.get("owner").created_at
        rel = s.path_of("owner").relative_to(s.root).as_posix()
    _commit_push(a, "a: owner is someone else")
    with MdCG(b / "mem") as s:
        s.verify("owner", "张三 confirmed in the org chart", "confirmed")
        s.update("owner", tags=["verified-by-b"])
        old_made = s.get("owner").created_at
    assert new_made != old_made
    git(b, "commit", "-qam", "b: verified")
    pulled = git(b, "pull", "--no-rebase", "origin", "main", check=False)
    path = f"mem/{rel}"
    assert pulled.returncode == 1
    assert f"CONFLICT (content): Merge conflict in {path}" in pulled.stdout
    assert _unmerged(b) == [path]
    record = {
        "fields": {},
        "body": True,
        MEMORIES_KEY: memories(path, ("owner", old_made), ("owner", old_made), ("owner", new_made)),
    }
    assert f"md-cg merge: {describe_conflict(path, record)}" in pulled.stderr
    node = nodefile.read_node(b / path)
    assert node.extra == {CONFLICT_KEY: record}
    assert node.body == f"<<<<<<< ours\n{old_body}\n||||||| base\n=======\n{new_body}\n>>>>>>> theirs\n"
    assert parsed(git_stage(b, 2, path)).body == old_body  # both whole in git's stages
    assert parsed(git_stage(b, 3, path)).created_at == new_made
    with MdCG(b / "mem") as s:
        s.sync()
        assert [(f.kind, f.node_id, f.path) for f in s.health().findings] == [
            ("merge_conflict", "owner", rel)
        ]
        assert [r.state for r in s.search("负责人")[0]] == ["DEFER"]
    # keep theirs, the memory the other clone made: git checkout --theirs
    git(b, "checkout", "--theirs", "--", path)
    git(b, "add", "-A")
    git(b, "commit", "-qm", "owner: keep the new memory")
    with MdCG(b / "mem") as s:
        s.sync()
        kept = s.get("owner")
        assert (kept.body, kept.tags, kept.confidence, kept.verification_history, kept.created_at) == (
            new_body,
            [],
            None,
            [],
            new_made,
        )
        assert s.health().findings == ()
