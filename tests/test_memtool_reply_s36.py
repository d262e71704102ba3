"""The memory tool's reply to a write another process undid at once (session 35, review rF,
left then; fixed in session 36).

``create`` (and ``rename``) looked the memory up again to say where it is stored; when
another process forgot it between the write and that look, the command raised a raw
``NodeNotFoundError`` "no node with id 'hot' in this store" although it had written the
file (about 3 creates in 450 of processes creating and deleting one file). Now the reply
says where the command wrote it.

Skipped when the ``anthropic`` extra is not installed; nothing needs the network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from anthropic.types.beta import BetaMemoryTool20250818CreateCommand as Create
from anthropic.types.beta import BetaMemoryTool20250818RenameCommand as Rename

from md_cg import MdCG, Node
from md_cg.integrations.anthropic_memory import MdCGMemoryTool


def _forgotten_right_after(tool: MdCGMemoryTool, root: Path, step: str, node_id: str) -> None:
    """Another handle forgets ``node_id`` right after the tool's ``step`` wrote it."""
    files: Any = tool.files
    real = getattr(files, step)

    def then_forget(*args: Any) -> Any:
        out = real(*args)
        with MdCG(root) as other:
            other.forget(node_id, "forgotten by another process")
        assert node_id in files.store.refresh()  # the tool's handle has followed the forget
        return out

    setattr(files, step, then_forget)


def _tombstoned(root: Path) -> list[str]:
    with MdCG(root, read_only=True) as m:
        return [t["id"] for t in m.tombstones()]


@pytest.mark.parametrize(
    ("path", "reply"),
    [
        (
            "/memories/hot.md",
            "File created successfully at: /memories/hot.md (stored as /memories/contextual/hot.md)",
        ),
        ("/memories/contextual/hot.md", "File created successfully at: /memories/contextual/hot.md"),
    ],
)
def test_a_create_forgotten_at_once_is_told_created(tmp_path: Path, path: str, reply: str) -> None:
    root = tmp_path / "s"
    with MdCG(root, create=True) as store:
        store.add(Node(id="seed", layer="contextual", body="seed"))
    with MdCGMemoryTool(root, scope=None) as tool:
        _forgotten_right_after(tool, root, "_add", "hot")
        assert tool.execute(Create(command="create", path=path, file_text="hot text")) == reply
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == ["contextual/seed.md"]
    assert _tombstoned(root) == ["hot"]


def test_a_rename_forgotten_at_once_is_told_renamed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root, create=True) as store:
        store.add(Node(id="old", layer="contextual", body="old text"))
    with MdCGMemoryTool(root, scope=None) as tool:
        _forgotten_right_after(tool, root, "_rename", "new")
        command = Rename(
            command="rename", old_path="/memories/contextual/old.md", new_path="/memories/new.md"
        )
        assert tool.execute(command) == "Successfully renamed /memories/contextual/old.md to /memories/new.md"
    assert list(root.rglob("*.md")) == []
    assert _tombstoned(root) == ["new"]
