"""Session 34, review rA: a handle that reloads another process's snapshot must not keep
the visibility of the index it replaced.

``visibility.Filter`` caches the hidden ids of a state by ``state.generation``. Each
``IndexState`` counted its generation from 0, so the state a long-lived handle loads
from a snapshot another process wrote (after a ``compact``, a ``forget``, a close that
compacts) could carry the very generation of the one it replaced: the old hidden set
was used. A handle scoped to alice then returned bob's secret memory from ``search``
(body included), a memory another process archived stayed in ``search``, ``ids()``
and ``list_nodes()``, and one it unarchived stayed hidden. Generations are now unique
across every state of the process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import python_env

from md_cg import MdCG, Node, Scope
from md_cg.index import IndexState


def _other_process(code: str) -> None:
    args = [sys.executable, "-c", code]
    subprocess.run(args, check=True, env=python_env(), capture_output=True, timeout=120)


def _compact(root: Path) -> None:
    _other_process(f"from md_cg import MdCG\nwith MdCG({str(root)!r}) as s:\n    s.compact_index()\n")


def _coffee(root: Path, archived: tuple[str, ...] = ()) -> None:
    """20 memories (some archived) in one session: its close compacts, so a handle opened
    next loads the snapshot at its first generation, as the reloaded one is."""
    with MdCG(root) as s:
        s.add_many([Node(id=f"n{i}", body=f"coffee river note {i}") for i in range(20)])
        if archived:
            s.archive(list(archived))


def _hits(store: MdCG, query: str) -> set[str]:
    return {r.id for r in store.search(query, k=50, record=False)[0]}


def test_generations_are_never_shared_between_states() -> None:
    states = [IndexState() for _ in range(3)]
    assert len({s.generation for s in states}) == 3


def test_a_scoped_handle_never_sees_a_secret_another_process_wrote_and_compacted(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    _coffee(root)
    alice = MdCG(root, scope=Scope(agent="alice"))
    assert _hits(alice, "coffee") == {f"n{i}" for i in range(20)}
    _other_process(
        "from md_cg import MdCG, Scope\n"
        f"with MdCG({str(root)!r}, scope=Scope(agent='bob', max_sensitivity='secret')) as s:\n"
        "    s.add(id='bob-secret', body='coffee bob private password hunter2', sensitivity='secret')\n"
    )
    _compact(root)
    alice.sync_if_changed(min_interval=0)
    assert "bob-secret" not in _hits(alice, "coffee password")
    assert "bob-secret" not in alice.ids()
    assert _hits(alice, "coffee") == {f"n{i}" for i in range(20)}
    alice.close()


def test_memories_archived_by_another_process_leave_a_long_lived_handle(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    _coffee(root)
    handle = MdCG(root, refresh_interval=0)
    handle.sync_if_changed(min_interval=0)
    assert "n3" in _hits(handle, "coffee")
    archive = "from md_cg import MdCG\nwith MdCG({!r}, auto_compact=1) as s:\n    s.archive(['n3', 'n4'])\n"
    _other_process(archive.format(str(root)))
    handle.sync_if_changed(min_interval=0)
    want = {f"n{i}" for i in range(20)} - {"n3", "n4"}
    assert _hits(handle, "coffee") == want
    assert set(handle.ids()) == want
    assert {e.id for e in handle.list_nodes()} == want
    assert handle.health().nodes == 18
    with MdCG(root) as fresh:
        assert _hits(fresh, "coffee") == want
    handle.close()


def test_a_memory_unarchived_by_another_process_comes_back_to_a_long_lived_handle(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    _coffee(root, archived=("n3",))
    handle = MdCG(root)
    assert "n3" not in _hits(handle, "coffee")
    for args in (["unarchive", "n3"], ["compact"]):  # as a person runs them
        subprocess.run(
            [sys.executable, "-m", "md_cg.cli", *args, "--root", str(root)],
            check=True,
            env=python_env(),
            capture_output=True,
            timeout=120,
        )
    handle.sync_if_changed(min_interval=0)
    assert handle.entry("n3").archived is False
    assert _hits(handle, "coffee") == {f"n{i}" for i in range(20)}
    handle.close()
