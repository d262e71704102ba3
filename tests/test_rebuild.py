"""rebuild_index(): the old index is released while the new one is built, and restored if the build fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import knowledge

from md_cg import MdCG, Node, index, maintenance


def _store(root: Path) -> None:
    with MdCG(root) as s:
        s.add_many([knowledge(f"k{i}", domain=f"域{i % 2}") for i in range(5)])
        s.add(Node(id="n1", layer="self", body="river delta sediments"))
        s.compact_index()


def test_the_old_index_is_released_while_the_new_one_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    _store(root)
    seen: list[int] = []
    real = index.build_from_files
    with MdCG(root) as s:
        engine = s._engine
        before = s.entries()

        def build(*args: object, **kw: object) -> index.IndexState:
            seen.append(len(engine.state.entries))  # what the engine holds during the build
            return real(*args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(maintenance.index, "build_from_files", build)
        report = s.rebuild_index()
        assert seen == [0] and report.nodes == 6
        assert s.entries() == before
        assert [r.id for r in s.search("river delta", record=False)[0] if not r.filler] == ["n1"]


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_a_failed_rebuild_restores_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s:
        s.add(Node(id="n2", layer="self", body="logged after the snapshot"))
        before = s.entries()

        def build(*args: object, **kw: object) -> index.IndexState:
            raise error

        monkeypatch.setattr(maintenance.index, "build_from_files", build)
        with pytest.raises(type(error)):
            s.rebuild_index()
        assert s.entries() == before
        assert [r.id for r in s.search("logged snapshot", record=False)[0] if not r.filler] == ["n2"]
        monkeypatch.undo()
        assert s.rebuild_index().nodes == 7
        assert s.entries() == before
