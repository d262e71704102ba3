"""Review s26 (rev5) of the LangGraph store: a batch is checked as it will be written
(the stored node's fields and the write times included), so a refusal writes nothing;
field names that would put conflict markers or a NUL in the derived body are escaped.

Skipped when the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import PutOp

from md_cg import MdCG
from md_cg.errors import InvalidNodeError
from md_cg.integrations.langgraph_store import MdCGStore, node_id_for, value_to_node
from md_cg.node import MAX_FRONTMATTER_BYTES
from md_cg.nodefile import dump_bytes

NS = ("ns",)


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every node file under ``root`` (archived ones too): its bytes and its mtime (ns)."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*.md"))
        if ".mdcg" not in p.parts
    }


def _fresh_fits(store: MdCGStore, key: str, size: int) -> bool:
    """Whether a value with a blob of ``size`` passed the old check: a fresh node of the
    item, without the stored node's fields or write times."""
    node = value_to_node(NS, key, {"text": "b new", "blob": "y" * size}, store.layer, None)
    try:
        dump_bytes(node)
    except InvalidNodeError:
        return False
    return True


def _largest_fresh_blob(store: MdCGStore, key: str) -> int:
    lo, hi = MAX_FRONTMATTER_BYTES - 4096, MAX_FRONTMATTER_BYTES
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _fresh_fits(store, key, mid) else (lo, mid - 1)
    return lo


def test_a_stored_item_whose_write_times_push_it_over_refuses_the_batch_first(tmp_path: Path) -> None:
    """The reviewer's lg3: a blob sized to just pass the check of a fresh node (no
    created_at/updated_at) was refused at write time, after the new item c was stored,
    with a message naming only the node id. Now the check measures the node as written:
    the batch is refused before anything is written and names the key and namespace."""
    root = tmp_path / "mem"
    store = MdCGStore(root)
    store.put(NS, "b", {"text": "b old"})
    size = _largest_fresh_blob(store, "b")
    before = _files(root)
    with pytest.raises(InvalidNodeError) as info:
        store.batch(
            [PutOp(NS, "c", {"text": "c brand new"}), PutOp(NS, "b", {"text": "b new", "blob": "y" * size})]
        )
    assert str(info.value).startswith(
        f"cannot put the item 'b' of namespace ('ns',): node '{node_id_for(NS, 'b')}': "
        "the frontmatter would be "
    )
    assert "over the limit of 256 KiB" in str(info.value)
    assert _files(root) == before
    assert store.get(NS, "c") is None
    assert store.get(NS, "b").value == {"text": "b old"}
    store.close()


def test_a_stored_items_other_fields_count_in_the_check(tmp_path: Path) -> None:
    """The reviewer's lg1: another client gave b ~100 KiB of tags; a 200 KiB value fits a
    fresh node but not b as stored. Nothing of the batch is written (neither the new item
    nor a's change), and the error names b's key and namespace."""
    root = tmp_path / "mem"
    store = MdCGStore(root)
    store.put(NS, "a", {"text": "a old"})
    store.put(NS, "b", {"text": "b old"})
    with MdCG(root) as other:
        other.update(node_id_for(NS, "b"), tags=[f"t{i:05d}-" + "x" * 90 for i in range(1000)])
    store.store.refresh()
    before = _files(root)
    big = {"text": "b new", "blob": "y" * (200 * 1024)}
    with pytest.raises(InvalidNodeError) as info:
        store.batch(
            [PutOp(NS, "new", {"text": "brand new"}), PutOp(NS, "a", {"text": "a NEW"}), PutOp(NS, "b", big)]
        )
    assert str(info.value).startswith("cannot put the item 'b' of namespace ('ns',): ")
    assert _files(root) == before
    assert (store.get(NS, "new"), store.get(NS, "a").value) == (None, {"text": "a old"})
    store.close()


def test_a_refused_put_of_an_archived_item_leaves_it_archived(tmp_path: Path) -> None:
    """An archived item was put back (unarchived) before its change was refused; now the
    check comes first, and an accepted put writes the value, then puts the item back."""
    root = tmp_path / "mem"
    store = MdCGStore(root)
    store.put(NS, "b", {"text": "b old"})
    node_id = node_id_for(NS, "b")
    with MdCG(root) as other:
        other.update(node_id, tags=[f"t{i:05d}-" + "x" * 90 for i in range(1000)])
        other.archive([node_id], reason="test")
    store.store.refresh()
    before = _files(root)
    assert any(path.startswith("archive") or "/archive/" in path for path in before)
    with pytest.raises(InvalidNodeError):
        store.batch([PutOp(NS, "b", {"text": "b new", "blob": "y" * (200 * 1024)})])
    assert _files(root) == before
    assert store.store.entry(node_id, include_archived=True).archived
    store.put(NS, "b", {"text": "b back"})
    assert not store.store.entry(node_id).archived
    assert store.get(NS, "b").value == {"text": "b back"}
    store.close()


@pytest.mark.parametrize(
    "value",
    [
        {"x\n<<<<<<< HEAD\n=======\n>>>>>>> y": 1},
        {"a\x00b": 1},
        {"plain": "ok", "k\n<<<<<<< HEAD": "v", "=======\n>>>>>>> z": 2},
    ],
)
def test_field_names_with_conflict_markers_or_nul_are_escaped_in_the_body(
    tmp_path: Path, value: dict
) -> None:
    """The reviewer's lg2: object keys forming conflict markers (or holding a NUL) were
    written as they are in the derived body, which md-cg refuses; the JSON fallback now
    escapes the field names as it escapes the strings, so the put is stored and reads back."""
    root = tmp_path / "mem"
    with MdCGStore(root) as store:
        store.put(NS, "k", value)
        assert store.get(NS, "k").value == value
        body = store.store.get(node_id_for(NS, "k")).body
        assert "\x00" not in body and "\n<<<<<<<" not in body
        assert [f.kind for f in store.store.health().findings] == []
    if "a\x00b" in value:
        assert body == '"a\\u0000b": 1'
