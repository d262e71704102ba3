"""A scoped handle is never told of an id reused by another scope (session 31, review
r7): agent a's ``ma`` was updated by another process and deleted by hand, an unscoped
sync told and logged that, then ``ma`` was added again as agent b's memory and deleted
by hand; agent a's handle, open all along, was told ``deleted ('ma',)`` -- the entry it
held of the first ``ma`` was carried into the note of the second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import python_env

from md_cg import MdCG, Scope

ADD = (
    "import sys, json\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s:\n"
    "    for i, kw in json.loads(sys.argv[2]).items():\n"
    "        s.add(id=i, layer='contextual', body=f'memory {i} about okapis', **kw)\n"
)
UPDATE = (
    "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1], auto_compact=None) as s:\n"
    "    for i in sys.argv[2].split(','):\n        s.update(i, body=f'memory {i} about okapis, updated')\n"
)
SYNC = "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s:\n    s.sync()\n"


def _run(code: str, *args: str) -> None:
    subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, env=python_env())


@pytest.mark.parametrize("follow_between", [False, True])
def test_an_id_deleted_told_and_added_again_in_another_scope_is_not_told(
    tmp_path: Path, follow_between: bool
) -> None:
    root = str(tmp_path / "m")
    _run(ADD, root, json.dumps({"ma": {"agent_scope": "a"}, "mb": {"agent_scope": "b"}, "k": {}}))
    with MdCG(root, scope=Scope(agent="a"), refresh_interval=0) as a:
        a.sync()
        _run(UPDATE, root, "ma,mb")
        os.unlink(f"{root}/contextual/ma.md")
        os.unlink(f"{root}/contextual/mb.md")
        if follow_between:
            a.ids()
        _run(SYNC, root)  # an unscoped sync tells and logs both deletions
        _run(ADD, root, json.dumps({"ma": {"agent_scope": "b"}, "mb": {"agent_scope": "b"}}))
        _run(UPDATE, root, "ma,mb")
        os.unlink(f"{root}/contextual/ma.md")
        os.unlink(f"{root}/contextual/mb.md")
        report = a.sync()
        assert (report.added, report.changed, report.deleted, report.moved) == ((), (), (), ())
    with MdCG(root) as s:  # an unscoped sync tells the second deletions
        assert s.sync().deleted == ("ma", "mb")
