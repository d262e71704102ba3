"""Session 43 (usersim M1): ``add_many`` refuses what ``add`` refuses of new input -- an
empty, blank or heading-only body, a blank, control, zero-width or no-break-space tag, case
twins of a tag -- naming the node's place in the batch and its id, and writes nothing of the
batch; ``checked=False`` (import, migrate) carries sources as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.errors import InvalidNodeError

CASES = {
    "empty body": dict(body=""),
    "blank body": dict(body="  \n\t"),
    "heading-only body": dict(body="# \n## "),
    "blank tag": dict(body="x", tags=[""]),
    "ctrl tag": dict(body="x", tags=["a\nb"]),
    "zero-width tag": dict(body="x", tags=["ops\u200b"]),
    "nbsp tag": dict(body="x", tags=["a\u00a0b"]),
    "case-twin tags": dict(body="x", tags=["Ops", "ops"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_add_many_refuses_what_add_refuses_and_writes_nothing(tmp_path: Path, case: str) -> None:
    with MdCG(tmp_path / "mem") as s:
        with pytest.raises(InvalidNodeError) as by_add:
            s.add(id="bad", **CASES[case])  # type: ignore[arg-type]
        good = Node(id="good", layer="knowledge", body="a fine memory")
        bad = Node(id="bad", layer="knowledge", **CASES[case])  # type: ignore[arg-type]
        with pytest.raises(InvalidNodeError) as by_many:
            s.add_many([good, bad], checked=True)
        assert (
            str(by_many.value)
            == f"add_many: nodes[1] (id 'bad'), nothing of the batch written: {by_add.value}"
        )
        assert s.ids() == []
        assert sorted(p.name for p in (tmp_path / "mem").rglob("*.md")) == []


def test_add_many_checked_false_carries_sources_as_they_are(tmp_path: Path) -> None:
    with MdCG(tmp_path / "mem") as s:
        s.add_many([Node(id="z", layer="knowledge", body="x", tags=["ops\u200b"])], checked=False)
        assert s.get("z").tags == ["ops\u200b"]
