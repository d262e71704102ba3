"""A departure hint follows a renamed memory one hop further (session 29's left-alone list,
r6): ``get 'a'`` after ``rename a b`` and then ``forget b`` said only "it was renamed to
'b'", and ``get 'b'`` was the caller's next call. Now the hint says what became of 'b':
forgotten (with the reason), swept, archived or expired. A memory at the end of the chain
that the caller's scope does not see gets no story."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from md_cg import MdCG, NodeNotFoundError, Scope
from md_cg.audit import RENAMED, Departure
from md_cg.store import with_departure

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"


def _hint(store: MdCG, node_id: str) -> str:
    return str(with_departure(store, NodeNotFoundError(node_id)).hint)


def _renamed(root: Path, **kw: object) -> MdCG:
    store = MdCG(root, create=True)
    store.add(id="a", layer="contextual", body="Alice keeps okapis", **kw)
    store.rename("a", "b")
    return store


def test_renamed_then_forgotten(tmp_path: Path) -> None:
    with _renamed(tmp_path / "s") as store:
        store.forget("b", reason="no longer true")
        gone = store.departure("a")
        assert gone is not None and (gone.event, gone.to, gone.current) == (RENAMED, "b", None)
        assert gone.then is not None and (gone.then.id, gone.then.event, gone.then.reason) == (
            "b",
            "forget",
            "no longer true",
        )
        assert re.fullmatch(
            f"it was renamed to 'b' on {STAMP}; 'b' was forgotten on {STAMP}, reason: no longer true",
            _hint(store, "a"),
        )


def test_renamed_twice_then_forgotten_names_the_last_id(tmp_path: Path) -> None:
    with _renamed(tmp_path / "s") as store:
        store.rename("b", "c")
        store.forget("c", reason="done")
        assert re.fullmatch(
            f"it was renamed to 'b' on {STAMP}; that memory became 'c' and was forgotten on {STAMP}, "
            "reason: done",
            _hint(store, "a"),
        )


def test_renamed_then_archived(tmp_path: Path) -> None:
    with _renamed(tmp_path / "s") as store:
        store.archive("b")
        gone = store.departure("a")
        assert gone is not None and gone.then == Departure("b", "archived", None)
        assert re.fullmatch(f"it was renamed to 'b' on {STAMP}; 'b' is archived", _hint(store, "a"))
        store.unarchive("b")
        assert re.fullmatch(f"it was renamed to 'b' on {STAMP}", _hint(store, "a"))


def test_renamed_then_expired_and_swept(tmp_path: Path) -> None:
    # 2 s ahead: the store's creation, the add and the rename come first (a loaded machine
    # could take the 1 s it had); then a sleep to the expiry
    with _renamed(
        tmp_path / "s", retention_tier="temp", expires_at=datetime.now(UTC) + timedelta(seconds=2)
    ) as store:
        time.sleep(max(0.0, store.get("b").expires_at - time.time()) + 0.2)
        assert re.fullmatch(f"it was renamed to 'b' on {STAMP}; 'b' has expired", _hint(store, "a"))
        assert store.sweep(dry_run=False).removed == ("b",)
        assert re.fullmatch(
            f"it was renamed to 'b' on {STAMP}; 'b' expired and was swept on {STAMP}", _hint(store, "a")
        )


def test_a_scope_is_not_told_of_a_memory_that_left_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with _renamed(root, agent_scope="x"):
        pass
    path = root / "contextual" / "b.md"
    path.write_text(path.read_text(encoding="utf-8").replace('agent_scope: "x"', 'agent_scope: "y"'))
    with MdCG(root) as store:
        store.sync()
    with MdCG(root, scope=Scope(agent="x")) as scoped:
        gone = scoped.departure("a")
        assert gone is not None and (gone.to, gone.current, gone.then) == ("b", None, None)
        assert re.fullmatch(f"it was renamed to 'b' on {STAMP}", _hint(scoped, "a"))


@pytest.mark.parametrize("event", ["archived", "expired"])
def test_describe_of_a_state(event: str) -> None:
    then = Departure("b", event, None)
    text = Departure("a", RENAMED, None, to="b", then=then).describe()
    assert text == f"it was renamed to 'b'; 'b' {'is archived' if event == 'archived' else 'has expired'}"
