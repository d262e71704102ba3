"""Session 29, r4: ``mdcg edit`` with warnings made errors never says "nothing was written".

An edit giving an expiry already past is stored with ``update``'s RuntimeWarning. With
``PYTHONWARNINGS=error`` the warning was raised inside the write call, before the CLI knew
the edit was stored, and it printed "nothing was written; the edited text is kept in ..."
while the file held the edit. The warning is now given after the write is known.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from md_cg import MdCG

EDITOR = """import pathlib, sys
p = pathlib.Path(sys.argv[1])
past = 'layer: "knowledge"\\nretention_tier: "temp"\\nexpires_at: "2001-01-01T00:00:00Z"\\n'
p.write_text(p.read_text(encoding="utf-8").replace('layer: "knowledge"\\n', past, 1), encoding="utf-8")
"""


def test_an_edit_whose_warning_is_an_error_says_it_was_stored(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="e3", body="edit three", layer="knowledge")
        path = root / s.entry("e3").path
    editor = tmp_path / "ed.py"
    editor.write_text(EDITOR, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "MDCG_ROOT"} | {
        "PYTHONWARNINGS": "error",
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "md_cg.cli",
            "--root",
            str(root),
            "edit",
            "e3",
            "--editor",
            f"{sys.executable} {editor}",
        ],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 1
    assert "nothing was written" not in done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("e3: the edit was stored (the kept copy ") and first.endswith(
        ".md removed); what failed after it:"
    )
    kept = first.removeprefix("e3: the edit was stored (the kept copy ").split(" removed)")[0]
    assert not os.path.exists(kept)
    assert 'expires_at: "2001-01-01T00:00:00.000000Z"' in path.read_text(encoding="utf-8")
