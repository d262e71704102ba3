"""Session 43 (usersim M4): the same explicit id added independently in two clones (no base
version, different ``created_at`` and bodies) is merged as two memories in one file
(``different_memories``), never as one memory's conflict; ``health`` names both."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG, Node, nodefile
from md_cg.merge import CONFLICT_KEY, MEMORIES_KEY, merge_node_files

PATH = "mem/knowledge/orphan/todo.md"
RESOLVE = (
    "two different memories met in this file (one id added in two clones): keep each whole under its "
    f"own id (git show :2:{PATH} is ours, git show :3:{PATH} theirs) or keep one; docs/git.md, Two "
    "memories in one file"
)


def _file(body: str, created: float) -> bytes:
    return nodefile.dump_bytes(Node(id="todo", layer="knowledge", body=body, created_at=created))


def test_one_id_added_in_two_clones_is_two_memories() -> None:
    ours, theirs = _file("Call mom.", 1_800_000_100.0), _file("Buy milk.", 1_800_000_000.0)
    result = merge_node_files(b"", ours, theirs, path=PATH)
    assert result.clean is False
    assert result.conflict is not None
    assert result.conflict[MEMORIES_KEY] == {
        "ours": {"id": "todo", "created_at": "2027-01-15T08:01:40.000000Z"},
        "base": None,
        "theirs": {"id": "todo", "created_at": "2027-01-15T08:00:00.000000Z"},
        "resolve": RESOLVE,
    }


def test_the_same_body_added_twice_is_still_one_memory() -> None:
    ours, theirs = _file("Buy milk.", 1_800_000_100.0), _file("Buy milk.", 1_800_000_000.0)
    result = merge_node_files(b"", ours, theirs, path=PATH)
    assert result.clean is True
    assert result.conflict is None


def test_health_names_the_two_memories(tmp_path: Path) -> None:
    ours, theirs = _file("Call mom.", 1_800_000_100.0), _file("Buy milk.", 1_800_000_000.0)
    data = merge_node_files(b"", ours, theirs, path=PATH).data
    root = tmp_path / "mem"
    with MdCG(root) as s:
        s.add(id="seed", body="seed")
    (root / "knowledge" / "orphan" / "todo.md").write_bytes(data)
    with MdCG(root) as s:
        s.sync()
        found = [(f.kind, f.node_id, f.detail) for f in s.health().findings]
        assert CONFLICT_KEY in s.get("todo").extra
    assert found == [
        (
            "merge_conflict",
            "todo",
            "knowledge/orphan/todo.md: two different memories, not two versions of one: ours 'todo' (created "
            "2027-01-15T08:01:40.000000Z), theirs 'todo' (created 2027-01-15T08:00:00.000000Z); both are "
            "kept, see "
            f"'merge_conflict' in its frontmatter: {RESOLVE}",
        )
    ]
