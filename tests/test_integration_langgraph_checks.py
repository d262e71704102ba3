"""A LangGraph put is checked whole before anything is written: the body as md-cg's
``add`` checks it, and the value as the file writer serialises it.

Skipped when the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from conftest import python_env
from langgraph.store.base import PutOp

from md_cg import MdCG
from md_cg.errors import InvalidNodeError
from md_cg.integrations.langgraph_store import MdCGStore, node_id_for

NS = ("docs", "team")
CONFLICT = "Resolve like this:\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n"


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every node file under ``root``: its bytes and its mtime (ns)."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*.md"))
        if ".mdcg" not in p.parts
    }


def _seeded(tmp_path: Path) -> tuple[MdCGStore, Path]:
    root = tmp_path / "mem"
    store = MdCGStore(root)
    store.put(NS, "a", {"text": "a old"})
    store.put(NS, "b", {"text": "b old"})
    return store, root


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            {"text": CONFLICT},
            "the body holds git conflict markers (<<<<<<<, =======, >>>>>>>) outside a code block, "
            "so sync would take it for an unresolved merge; put such text in a fenced code block (```)",
        ),
        (
            {"content": "a\x00b", "kind": "x"},
            "the body holds a NUL character (at 1); git would take the file for binary "
            "and show no diff of it",
        ),
        ({"text": "##"}, "the body holds only heading marks (#); a memory needs some text"),
    ],
)
def test_a_body_md_cg_would_refuse_is_refused_naming_the_item(
    tmp_path: Path, value: dict[str, Any], reason: str
) -> None:
    """The text field becomes the body; a body ``MdCG.add`` refuses (conflict markers:
    health would report ``merge_conflict`` forever and an export would not import) is
    refused at the put, with nothing of the batch written."""
    store, root = _seeded(tmp_path)
    before = _files(root)
    with pytest.raises(InvalidNodeError) as info:
        store.batch(
            [PutOp(NS, "a", {"text": "a NEW"}), PutOp(NS, "new", {"text": "n"}), PutOp(NS, "howto", value)]
        )
    node_id = node_id_for(NS, "howto")
    assert str(info.value) == (
        f"cannot put the item 'howto' of namespace ('docs', 'team'): node '{node_id}': {reason}"
    )
    assert (info.value.field, info.value.node_id) == ("body", node_id)
    assert _files(root) == before
    assert sorted(store.store.ids()) == sorted([node_id_for(NS, "a"), node_id_for(NS, "b")])
    assert store.get(NS, "a").value == {"text": "a old"}
    store.close()


def test_a_conflict_in_a_value_without_a_text_field_is_stored_escaped(tmp_path: Path) -> None:
    """A value without a text field gets a derived body; a string that would put conflict
    markers in it is shown as JSON there, so the item is stored, health is clean and
    the value comes back exactly."""
    root = tmp_path / "mem"
    with MdCGStore(root) as store:
        value = {"note": "plain", "diff": CONFLICT}
        store.put(NS, "raw", value)
        assert store.get(NS, "raw").value == value
        node = store.store.get(node_id_for(NS, "raw"))
        assert (
            node.body
            == 'note: "plain"\ndiff: '
            + '"Resolve like this:\\n<<<<<<< HEAD\\nours\\n=======\\ntheirs\\n>>>>>>> feature\\n"'
        )
        store.put(NS, "plain", {"note": "one\ntwo"})
        assert store.store.get(node_id_for(NS, "plain")).body == "note: one\ntwo"  # unchanged
        assert [f.kind for f in store.store.health().findings] == []


def test_an_exported_store_of_items_imports_whole(tmp_path: Path) -> None:
    """The reviewer's round trip: after a refused conflict put, export | import works."""
    root = tmp_path / "mem"
    with MdCGStore(root) as store:
        with pytest.raises(InvalidNodeError):
            store.put(("docs",), "howto", {"text": CONFLICT})
        store.put(("docs",), "other", {"text": "plain"})
    out = tmp_path / "x.jsonl"
    cli = [sys.executable, "-m", "md_cg.cli"]
    env = python_env()
    subprocess.run([*cli, "--root", str(root), "export", "--out", str(out)], check=True, env=env)
    done = subprocess.run(
        [*cli, "--root", str(tmp_path / "copy"), "import", str(out), "-q"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert MdCG(tmp_path / "copy").ids() == [node_id_for(("docs",), "other")]


class _Thing:
    def __repr__(self) -> str:
        return "<thing>"


WHEN = dt.datetime(2026, 1, 2, 3, 4, 5)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (b"\x00bytes", "value b'\\x00bytes' of type bytes cannot be stored in frontmatter"),
        (
            WHEN,
            "value datetime.datetime(2026, 1, 2, 3, 4, 5) of type datetime cannot be stored in frontmatter",
        ),
        (_Thing(), "value <thing> of type _Thing cannot be stored in frontmatter"),
        ({1: 2}, "object key 1 is not a string"),
    ],
)
def test_a_value_the_file_writer_refuses_stops_the_whole_batch(tmp_path: Path, bad: Any, reason: str) -> None:
    """A value ``validate`` passes but the file writer cannot serialise (bytes, a date, an
    object, a non-string key) is found before anything is written: ``a`` is not changed,
    no new item is added, and the error names the key and namespace."""
    store, root = _seeded(tmp_path)
    before = _files(root)
    with pytest.raises(InvalidNodeError) as info:
        store.batch(
            [
                PutOp(NS, "a", {"text": "a NEW"}),
                PutOp(NS, "fresh", {"text": "fresh"}),
                PutOp(NS, "b", {"text": "b new", "raw": bad}),
            ]
        )
    assert str(info.value) == (
        f"cannot put the item 'b' of namespace ('docs', 'team'): field 'langgraph_value': {reason}"
    )
    assert info.value.field == "langgraph_value"
    assert _files(root) == before
    assert (store.get(NS, "a").value, store.get(NS, "b").value, store.get(NS, "fresh")) == (
        {"text": "a old"},
        {"text": "b old"},
        None,
    )
    store.close()
