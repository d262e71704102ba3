"""``md_cg.StoreEngine`` (the public protocol of what the loop and the lifecycle modules ask
of a store, docs/api.md) offers ``delete`` as ``MdCG`` does: with ``all_copies`` (session 42;
before, a module holding a ``StoreEngine`` that was refused a delete -- another memory under
the id -- was told to pass ``all_copies=True``, which the protocol did not have)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from md_cg import InvalidArgumentError, MdCG, Node, StoreEngine


def _params(fn: object) -> list[tuple[str, object, object]]:
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"]


def test_delete_signature_is_mdcgs() -> None:
    assert _params(StoreEngine.delete) == _params(MdCG.delete)
    assert ("all_copies", inspect.Parameter.KEYWORD_ONLY, False) in _params(StoreEngine.delete)


def test_every_protocol_parameter_is_mdcgs() -> None:
    """Each parameter the protocol names is one of ``MdCG``'s, of the same kind and default."""
    for name, member in vars(StoreEngine).items():
        if name.startswith("_") or not callable(member):
            continue
        mine = {p[0]: p for p in _params(getattr(MdCG, name))}
        for param in _params(member):
            assert mine.get(param[0]) == param, (name, param)


def _delete_all(store: StoreEngine, node_id: str) -> list[str]:
    """A module built on the protocol settling a duplicated id as it is told to."""
    return list(store.delete(node_id, force=True, all_copies=True).copies)


def test_delete_all_copies_through_the_protocol(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="meet", layer="contextual", body="Meeting with Ana on Monday."))
    other = root / "knowledge" / "orphan" / "meet.md"
    other.parent.mkdir(parents=True)
    other.write_text("---\nid: meet\nlayer: knowledge\n---\nMeeting with Bo on Friday.\n", encoding="utf-8")
    with MdCG(root) as s:
        store: StoreEngine = s
        with pytest.raises(InvalidArgumentError) as err:
            store.delete("meet", force=True)
        assert err.value.name == "all_copies"
        assert _delete_all(store, "meet") == ["knowledge/orphan/meet.md"]
        assert "meet" not in store
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")) == []
