"""A scoped add of an id whose memory is another scope's, removed by hand and not yet told
to that scope (attack atk8 of session 39, finding 2).

Since session 39 a scoped sync leaves another scope's hand removal untold, as a note for
a sync of a scope that admits it. alice's ``add`` of that id was then refused as a memory
"moved, deleted or changed outside md-cg since the last sync; run mdcg sync", which her
own syncs never settle, and which told her of bob's memory's fate. Now it is refused as
an id taken outside her scope (as while the file was there), until bob (or an unscoped
sync) is told; then it is free.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from md_cg import DuplicateIdError, MdCG, Scope

TAKEN = "node id 'b1' is taken by a memory outside this handle's scope; choose another id"
BOB_SYNC = (
    "import sys\nfrom md_cg import MdCG, Scope\n"
    "with MdCG(sys.argv[1], scope=Scope(agent='bob')) as h: print(','.join(h.sync().deleted))"
)


def _store(root: Path) -> None:
    with MdCG(root) as s:
        s.add(id="a1", layer="contextual", body="memory a1 about okapis", agent_scope="alice")
        s.add(id="b1", layer="contextual", body="memory b1 about okapis", agent_scope="bob")


def _bob_sync(root: Path) -> str:
    argv = [sys.executable, "-c", BOB_SYNC, str(root)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_alice_is_told_the_id_is_taken_until_bob_is_told_of_the_removal(tmp_path: Path) -> None:
    _store(tmp_path)
    with MdCG(tmp_path, scope=Scope(agent="alice"), refresh_interval=0) as alice:
        alice.sync()
        os.unlink(tmp_path / "contextual" / "b1.md")
        assert [alice.sync().deleted for _ in range(2)] == [(), ()]
        with pytest.raises(DuplicateIdError) as err:
            alice.add(id="b1", layer="contextual", body="alice's own b1", agent_scope="alice")
        assert str(err.value) == TAKEN
        assert sorted(os.listdir(tmp_path / "contextual")) == ["a1.md"]
        assert _bob_sync(tmp_path) == "b1"
        alice.add(id="b1", layer="contextual", body="alice's own b1", agent_scope="alice")
        assert alice.get("b1").body == "alice's own b1"
    assert sorted(os.listdir(tmp_path / "contextual")) == ["a1.md", "b1.md"]
    assert _bob_sync(tmp_path) == ""


def test_a_fresh_alice_process_is_told_the_same(tmp_path: Path) -> None:
    _store(tmp_path)
    os.unlink(tmp_path / "contextual" / "b1.md")
    with MdCG(tmp_path, scope=Scope(agent="alice")) as alice:
        assert alice.sync().deleted == ()
        with pytest.raises(DuplicateIdError) as err:
            alice.add(id="b1", layer="contextual", body="alice's own b1", agent_scope="alice")
        assert str(err.value) == TAKEN
    assert _bob_sync(tmp_path) == "b1"


def test_bob_and_the_owner_may_add_it_again(tmp_path: Path) -> None:
    _store(tmp_path)
    os.unlink(tmp_path / "contextual" / "b1.md")
    with MdCG(tmp_path, scope=Scope(agent="bob")) as bob:
        assert bob.sync().deleted == ("b1",)
        bob.add(id="b1", layer="contextual", body="bob's b1 again", agent_scope="bob")
        assert bob.get("b1").body == "bob's b1 again"
