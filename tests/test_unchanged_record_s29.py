"""Session 29: an overwrite that changes nothing records no retention decision.

``add_many(overwrite=True)`` of a node identical to the stored one leaves the file as it
is (mtime included), yet its retention decision was appended to ``.mdcg/retention``; with
that folder read-only, the re-import failed saying "the change was made before this
error", though nothing had been written. Only the nodes actually written get a decision.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from md_cg import MdCG, Node, fsops
from md_cg.logs import AppendLog


def _retention_ids(root: Path) -> list[str]:
    return sorted(r["id"] for r in AppendLog(str(root), "retention").read())


def _batch() -> list[Node]:
    at = 1_700_000_000.0
    return [
        Node(id="r1", body="the office moved to Lyon", created_at=at, updated_at=at),
        Node(id="r2", body="meet Ana on Friday", created_at=at, updated_at=at),
    ]


def test_a_reimport_of_the_same_nodes_records_no_decision(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many(_batch(), stamp=False, decide=True)
        assert _retention_ids(root) == ["r1", "r2"]
        mtime = (root / s.entry("r1").path).stat().st_mtime_ns
        changed = _batch()
        changed[1].body = "meet Ana on Saturday"
        s.add_many(changed, overwrite=True, stamp=False, decide=True)
        assert (root / s.entry("r1").path).stat().st_mtime_ns == mtime
    assert _retention_ids(root) == ["r1", "r2", "r2"]


def test_a_noop_reimport_with_the_retention_log_refused_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many(_batch(), stamp=False, decide=True)
    real = fsops.ShardWriter.append

    def append(self: fsops.ShardWriter, records: Iterable[dict[str, Any]], *, durable: bool = False) -> Any:
        if self.rel_dir == ".mdcg/retention":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), ".1_00ff.creating.tmp")
        return real(self, records, durable=durable)

    monkeypatch.setattr(fsops.ShardWriter, "append", append)
    with MdCG(root) as s:
        out = s.add_many(_batch(), overwrite=True, stamp=False, decide=True)
        got = [(n.id, n.body) for n in out]
        assert got == [("r1", "the office moved to Lyon"), ("r2", "meet Ana on Friday")]
    monkeypatch.undo()
    assert _retention_ids(root) == ["r1", "r2"]
