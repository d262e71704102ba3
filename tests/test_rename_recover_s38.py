"""A rename whose new id's place was taken before its recovery keeps the renamed memory
(attack atk6 of session 38, F1, high).

A rename ``h1`` -> ``h9`` is one commit: a put of ``h9`` (the memory's new file) and a del
of ``h1``. When the put had not landed and ``h9.md`` was by then another, acknowledged
memory -- another process's ``add("h9")`` after the rename failed with its writer alive,
or a hand save after the writer was killed -- the recovery left that ``h9`` (its stamp is
not the one logged) but still removed ``h1.md``: the renamed memory was in no file. Now
the del of an id the commit puts nowhere is not done while one of its puts is not in
place (:func:`md_cg.journal._renamed_away`): ``h1`` stays, and ``h9`` stays the other
memory.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from stresslib import stress
from test_add_race_s35 import _ENV
from test_recover_stamps_s38 import _body, _files, _store, left_open

from md_cg import MdCG

_ADD_H9 = """
import sys
from md_cg import MdCG
with MdCG(sys.argv[1], auto_compact=None) as m:
    m.add(id="h9", body="h9 of another process", layer="contextual")
"""


def _kept_both(root: Path) -> None:
    assert _files(root) == ["h1.md", "h9.md", "other.md"]
    assert (_body(root, "h1"), _body(root, "h9")) == ("old h1", "h9 of another process")
    with MdCG(root) as fresh:
        assert sorted(fresh.ids()) == ["h1", "h9", "other"]
        assert fresh.get("h1").body.strip() == "old h1"
        assert fresh.sync().deleted == ()


@pytest.mark.parametrize("recovered_by", ["itself", "another"])
def test_a_rename_left_open_keeps_its_memory_when_the_new_id_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recovered_by: str
) -> None:
    root = tmp_path / "m"
    w, _ = left_open(root, monkeypatch, lambda w: w.rename("h1", "h9"))
    assert [c.ids for c in w._engine.journal.failed] == [{"h1", "h9"}]
    done = subprocess.run(
        [sys.executable, "-c", _ADD_H9, str(root)], env=_ENV, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    if recovered_by == "itself":
        w.compact_index()  # before: h1.md removed, its memory in no file
        w.close()
    else:
        w.close()
        with MdCG(root, auto_compact=None) as c:
            c.compact_index()
    _kept_both(root)


def _rename_and_die(root: str) -> None:
    m = MdCG(root, auto_compact=None)
    m._engine.journal.fault = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == "logged" else None
    m.rename("h1", "h9")


def _killed_then_h9_by_hand(root: Path) -> None:
    """A rename h1 -> h9 killed after its line, then ``h9.md`` written by a person."""
    assert stress.wait(stress.fork(_rename_and_die, str(root))) == -signal.SIGKILL
    (root / "contextual" / "h9.md").write_text(
        '---\nid: "h9"\nlayer: "contextual"\n---\nh9 of another process\n', encoding="utf-8"
    )


def test_a_rename_killed_then_its_new_id_saved_by_hand_keeps_its_memory(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    _killed_then_h9_by_hand(root)
    with MdCG(root, auto_compact=None) as m:
        report = m.sync()
        assert (report.recovered, sorted(report.left_as_edited)) == (1, ["h1", "h9"])
    assert not list((root / "contextual").glob(".*.tmp"))
    _kept_both(root)


def test_health_foresees_the_rename_left(tmp_path: Path) -> None:
    """``health()``'s finding of the open commit (its plan: :func:`md_cg.journal.edited_since`)
    says the recovery leaves both ids as their files have them."""
    root = tmp_path / "m"
    _store(root)
    _killed_then_h9_by_hand(root)
    with MdCG(root, read_only=True) as m:
        (finding,) = [f for f in m.health().findings if f.kind == "open_commit"]
    assert re.fullmatch(
        r"a rename of 'h1' to 'h9' interrupted by a crash \(log [0-9a-f_]+\.jsonl, record 1\); "
        r"sync\(\) or the next write of these ids finishes it: leaves h1 \(contextual/h1\.md\), h9 "
        r"as edited after the crash \(a hand edit is never replaced\)",
        finding.detail,
    ), finding.detail
