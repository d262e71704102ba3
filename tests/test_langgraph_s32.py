"""Review s32 (rev3) of the LangGraph store (``MdCGStore``).

* The store never took in changes made to the files outside it: an item whose file a
  person moved (or ``git pull`` brought) was ``None`` to ``get``, missing from ``search``,
  and its ``delete`` returned while the file stayed (the item was back in a fresh
  process). Now every batch takes in the hand changes first (``sync_if_changed``, as the
  memory tool does), and a file that went after that is md-cg's "moved or deleted
  outside md-cg" error, not "no such item".
* A hand edit of ``langgraph_value`` to a string, list or number made ``get`` and every
  ``search`` of the namespace fail with a bare ``ValueError``/``TypeError``; a
  ``langgraph_body`` naming no text field invented a value field. Now ``search`` leaves
  such a file out and ``get`` names it.
* An unscoped handle (docs: "sees every agent's items, each under its own id") saw no
  agent's item in ``get``/``search``/``delete`` while ``list_namespaces`` listed their
  namespace, and its put wrote one more file of the key. Now it looks under the shared
  id, then each owner's with an item in the namespace, by name.

Skipped when the ``langgraph`` extra is not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

import md_cg
from md_cg import MdCG
from md_cg.errors import InvalidNodeError, NodeNotFoundError
from md_cg.integrations.langgraph_store import MdCGStore, node_id_for
from md_cg.visibility import Scope

NS = ("mem", "u")
FOLDER = "knowledge/cond_langgraph_mem_u_fa56631b"
ROOT = Path(md_cg.__file__).resolve().parent.parent


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts)


def _fresh_get(root: Path, namespace: tuple[str, ...], key: str) -> object:
    """``get`` in another process, on a store opened there."""
    script = (
        "import json, sys\n"
        "from md_cg.integrations.langgraph_store import MdCGStore\n"
        "with MdCGStore(sys.argv[1]) as s:\n"
        "    it = s.get(tuple(json.loads(sys.argv[2])), sys.argv[3])\n"
        "    print(json.dumps(None if it is None else it.value))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(root), json.dumps(list(namespace)), key],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(done.stdout)


# -- 1. hand changes --------------------------------------------------------------------------


def test_a_hand_moved_item_is_read_and_deleted_where_it_now_is(tmp_path: Path) -> None:
    store = MdCGStore(MdCG(tmp_path))  # long-lived: the move comes after its first batch
    store.put(NS, "ssn", {"text": "passport 12345"})
    store.put(NS, "other", {"text": "other item"})
    node_id = node_id_for(NS, "ssn")
    (tmp_path / "knowledge/private").mkdir()
    shutil.move(tmp_path / FOLDER / f"{node_id}.md", tmp_path / f"knowledge/private/{node_id}.md")

    item = store.get(NS, "ssn")
    assert item is not None and item.value == {"text": "passport 12345"}
    assert sorted((i.key, i.value["text"]) for i in store.search(NS)) == [
        ("other", "other item"),
        ("ssn", "passport 12345"),
    ]
    assert [i.key for i in store.search(NS, query="passport")][:1] == ["ssn"]

    store.delete(NS, "ssn")
    assert store.get(NS, "ssn") is None
    assert _files(tmp_path) == [f"{FOLDER}/{node_id_for(NS, 'other')}.md"]
    store.close()
    assert _fresh_get(tmp_path, NS, "ssn") is None
    assert _fresh_get(tmp_path, NS, "other") == {"text": "other item"}


def test_items_a_pull_brought_are_read_put_in_place_and_deleted(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    store = MdCGStore(MdCG(here))
    store.put(NS, "base", {"text": "base"})
    with MdCGStore(there) as other:
        other.put(NS, "f", {"text": "pulled f"})
        other.put(NS, "g", {"text": "pulled g"})
    for key in "fg":
        name = f"{FOLDER}/{node_id_for(NS, key)}.md"
        shutil.copy(there / name, here / name)  # as a git pull brings them

    item = store.get(NS, "f")
    assert item is not None and item.value == {"text": "pulled f"}
    assert sorted(i.key for i in store.search(NS)) == ["base", "f", "g"]
    store.put(NS, "f", {"text": "local f"})  # was a DuplicateIdError: the index did not know the file
    store.delete(NS, "g")  # returned, and the file stayed
    assert _files(here) == [f"{FOLDER}/{node_id_for(NS, k)}.md" for k in ("base", "f")]
    assert (here / FOLDER / f"{node_id_for(NS, 'f')}.md").read_text().endswith("\nlocal f\n")
    store.close()
    assert _fresh_get(here, NS, "f") == {"text": "local f"}
    assert _fresh_get(here, NS, "g") is None


def test_a_file_gone_since_the_pickup_is_an_error_not_a_missing_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A move between a batch's pick-up and its reads (here: a pick-up that sees nothing)
    is md-cg's lost-file error for get and delete -- never a ``None`` nor a delete that
    returns while the file stays; a search leaves the file out."""
    store = MdCGStore(MdCG(tmp_path))
    store.put(NS, "ssn", {"text": "passport 12345"})
    store.put(NS, "other", {"text": "other item"})
    monkeypatch.setattr(MdCG, "sync_if_changed", lambda self, min_interval=1.0: None)
    node_id = node_id_for(NS, "ssn")
    (tmp_path / "knowledge/private").mkdir()
    shutil.move(tmp_path / FOLDER / f"{node_id}.md", tmp_path / f"knowledge/private/{node_id}.md")
    store.store.refresh()
    told = (
        f"no node with id '{node_id}' in this store (its file {FOLDER}/{node_id}.md was moved or "
        "deleted outside md-cg since the last sync; run `mdcg sync` (MdCG.sync()) to take that in, "
        "then try again)"
    )
    with pytest.raises(NodeNotFoundError) as got:
        store.get(NS, "ssn")
    assert str(got.value) == told
    with pytest.raises(NodeNotFoundError) as got:
        store.delete(NS, "ssn")
    assert str(got.value) == told
    assert [(i.key, i.value) for i in store.search(NS)] == [("other", {"text": "other item"})]
    assert (tmp_path / f"knowledge/private/{node_id}.md").is_file()
    store.close()


# -- 2. item fields edited by hand to another kind ------------------------------------------

PREFS = ("prefs", "u")
PREFS_FOLDER = "knowledge/cond_langgraph_prefs_u_43108fe2"
WHAT = {
    "langgraph_value": "a JSON object",
    "langgraph_body": "one of content, text, memory, body, data",
}


@pytest.mark.parametrize(
    ("key", "field", "new"),
    [
        ("theme", "langgraph_value", '"light"'),
        ("theme", "langgraph_value", "[1, 2]"),
        ("theme", "langgraph_value", "5"),
        ("bodied", "langgraph_body", "7"),
        ("bodied", "langgraph_body", '["text"]'),
        ("bodied", "langgraph_body", '"nonexistent"'),
    ],
)
def test_an_item_field_edited_to_another_kind_is_named_by_get_and_left_out_of_search(
    tmp_path: Path, key: str, field: str, new: str
) -> None:
    store = MdCGStore(MdCG(tmp_path))
    values = {
        "theme": {"theme": "dark", "size": 3},
        "other": {"text": "other item"},
        "bodied": {"text": "body text", "x": 1},
    }
    for k, v in values.items():
        store.put(PREFS, k, v)
    path = tmp_path / PREFS_FOLDER / f"{node_id_for(PREFS, key)}.md"
    text = path.read_text()
    edited = re.sub(rf"^{field}: .*$", f"{field}: {new}", text, flags=re.M)
    assert edited != text
    path.write_text(edited)

    with pytest.raises(InvalidNodeError) as got:
        store.get(PREFS, key)
    assert str(got.value) == (
        f"the item '{key}' of namespace ('prefs', 'u') cannot be read: its file "
        f"{PREFS_FOLDER}/{node_id_for(PREFS, key)}.md has {field}: {new}, which is not "
        f"{WHAT[field]}; fix that line by hand, or put the item again (a put writes its whole value)"
    )
    assert got.value.field == field and got.value.node_id == node_id_for(PREFS, key)
    rest = {k: v for k, v in values.items() if k != key}
    for prefix in (PREFS, ("prefs",)):
        assert {i.key: i.value for i in store.search(prefix)} == rest
    assert {i.key: i.value for i in store.search(("prefs",), query="other item")} == rest
    assert {k: store.get(PREFS, k).value for k in rest} == rest  # type: ignore[union-attr]

    store.put(PREFS, key, {"text": "fixed"})  # a put writes the whole value over
    assert store.get(PREFS, key).value == {"text": "fixed"}  # type: ignore[union-attr]
    assert {i.key: i.value for i in store.search(PREFS)} == {**rest, key: {"text": "fixed"}}
    store.close()


# -- 3. the unscoped handle -----------------------------------------------------------------

K1 = ("m", "u")
K1_FOLDER = "knowledge/cond_langgraph_m_u_3b8a3f8e"


def test_the_unscoped_handle_sees_every_agents_item_as_get_search_put_delete_agree(tmp_path: Path) -> None:
    alice = MdCGStore(MdCG(tmp_path, scope=Scope(agent="alice")))
    bob = MdCGStore(MdCG(tmp_path, scope=Scope(agent="bob")))
    trusted = MdCGStore(tmp_path)
    bob.put(K1, "k1", {"text": "bob tea"})
    alice.put(K1, "k1", {"text": "alice coffee"})
    alice.put(K1, "solo", {"text": "alice only"})
    ids = {
        "alice": node_id_for(K1, "k1", Scope(agent="alice")),
        "bob": node_id_for(K1, "k1", Scope(agent="bob")),
        "solo": node_id_for(K1, "solo", Scope(agent="alice")),
    }
    assert _files(tmp_path) == sorted(f"{K1_FOLDER}/{i}.md" for i in ids.values())

    # every agent's item, the first owner by name standing for a key two agents hold
    assert trusted.get(K1, "k1").value == {"text": "alice coffee"}  # type: ignore[union-attr]
    assert trusted.get(K1, "solo").value == {"text": "alice only"}  # type: ignore[union-attr]
    assert {i.key: i.value for i in trusted.search(("m",))} == {
        "k1": {"text": "alice coffee"},
        "solo": {"text": "alice only"},
    }
    assert [i.key for i in trusted.search(("m",), query="coffee", limit=1)] == ["k1"]
    assert trusted.list_namespaces() == [K1]

    # delete removes what get returns; then the next owner's shows
    trusted.delete(K1, "k1")
    assert _files(tmp_path) == sorted(f"{K1_FOLDER}/{ids[k]}.md" for k in ("bob", "solo"))
    assert (alice.get(K1, "k1"), trusted.get(K1, "k1").value) == (None, {"text": "bob tea"})  # type: ignore[union-attr]
    assert {i.key: i.value for i in trusted.search(("m",))} == {
        "k1": {"text": "bob tea"},
        "solo": {"text": "alice only"},
    }

    # put writes the shared item (not bob's private one), which its reads then find first
    trusted.put(K1, "k1", {"text": "admin value"})
    shared = node_id_for(K1, "k1")
    assert _files(tmp_path) == sorted(f"{K1_FOLDER}/{i}.md" for i in (ids["bob"], ids["solo"], shared))
    assert [s.get(K1, "k1").value for s in (trusted, alice, bob)] == [  # type: ignore[union-attr]
        {"text": "admin value"},
        {"text": "admin value"},
        {"text": "bob tea"},
    ]
    assert {i.key: i.value for i in trusted.search(("m",))} == {
        "k1": {"text": "admin value"},
        "solo": {"text": "alice only"},
    }
    trusted.put(K1, "k1", {"text": "admin value 2"})  # in place
    assert len(_files(tmp_path)) == 3
    trusted.delete(K1, "k1")  # the shared item, then bob's
    assert trusted.get(K1, "k1").value == {"text": "bob tea"}  # type: ignore[union-attr]
    trusted.delete(K1, "k1")
    trusted.delete(K1, "solo")
    assert _files(tmp_path) == []
    assert (trusted.get(K1, "k1"), bob.get(K1, "k1"), trusted.search(("m",))) == (None, None, [])
    assert trusted.list_namespaces() == []
    for s in (alice, bob, trusted):
        s.close()
