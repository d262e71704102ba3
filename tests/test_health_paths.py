"""health() names the file a finding is about (session 27 review: a damaged index log
shard's ``log_damage`` finding had no path)."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG, Node
from md_cg.reports import Finding


def test_garbage_in_an_index_log_shard_is_named_by_its_path(tmp_path: Path) -> None:
    root = tmp_path / "m"
    writer = MdCG(root)
    try:
        writer.add(Node(id="a1", layer="knowledge", body="okapi grazing"))
        (shard,) = sorted((root / ".mdcg" / "log").iterdir())
        with shard.open("a", encoding="utf-8") as fh:
            fh.write("garbage line\nmore garbage\n")
        with MdCG(root) as s:
            assert s.health().by_kind("log_damage") == [
                Finding(
                    "log_damage",
                    "2 unreadable line(s) or unusable record(s) in this index log shard (ignored); "
                    "rebuild_index() recovers from the files",
                    f".mdcg/log/{shard.name}",
                )
            ]
            assert s.ids() == ["a1"]
    finally:
        writer.close()
