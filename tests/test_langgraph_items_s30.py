"""Review s30 (rev3) of the LangGraph store: ``get``, ``search``, ``put`` and ``delete``
agree on which items exist.

* An item whose file the memory tool renamed (``theme-<hash>.md`` to ``mytheme.md``:
  the id changes, the frontmatter keeps ``langgraph_key`` and the namespace) was a ghost:
  ``get`` None, ``search`` listed it, ``delete`` left it, a put made a second node. Now
  the item is found under the id it was renamed from (``renamed_from``, in the index).
* A file carrying an item's ``langgraph_key`` under another id (written with the memory
  tool) was hidden while the item existed and listed once it was deleted. Now it is
  never an item.
* One hand-broken item file made every search of its namespace raise on a handle that
  had indexed it before it broke (a fresh handle skipped it). Now every handle skips it.

Skipped when the ``langgraph`` or ``anthropic`` extra is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")
pytest.importorskip("anthropic")

import md_cg
from md_cg import MdCG
from md_cg.errors import DuplicateIdError
from md_cg.integrations.anthropic_memory import MdCGMemoryTool
from md_cg.integrations.langgraph_store import MdCGStore, node_id_for, value_to_node

NS = ("memories", "alice")
FOLDER = "knowledge/cond_langgraph_memories_alice_e65f4b5d"
#: the md_cg under test, for the tool run in another process
ROOT = Path(md_cg.__file__).resolve().parent.parent


def _store(root: Path) -> MdCGStore:
    """A long-running handle that looks at other processes' changes on every read."""
    return MdCGStore(MdCG(root, refresh_interval=0))


def _tool(root: Path, *commands: dict[str, str]) -> list[str]:
    """Run memory tool commands in another process (as the tool's own server would)."""
    script = (
        "import json, sys\n"
        "from md_cg.integrations.anthropic_memory import MdCGMemoryTool\n"
        "tool = MdCGMemoryTool(sys.argv[1])\n"
        "print(json.dumps([tool.call(c) for c in json.loads(sys.argv[2])]))\n"
        "tool.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(root), json.dumps(list(commands))],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    return list(json.loads(done.stdout))


def _here(root: Path, *commands: dict[str, str]) -> list[str]:
    """Run memory tool commands in this process."""
    with MdCGMemoryTool(root) as tool:
        return [tool.call(c) for c in commands]


def _files(root: Path) -> set[str]:
    folder = root / FOLDER
    return {p.name for p in folder.glob("*.md")} if folder.is_dir() else set()


def _listed(store: MdCGStore, **kw: object) -> list[tuple[str, dict[str, object]]]:
    return [(i.key, i.value) for i in store.search(NS, **kw)]  # type: ignore[arg-type]


def test_an_item_renamed_with_the_memory_tool_is_still_the_item(tmp_path: Path) -> None:
    """The reviewer's r_ghost.py: after the rename, get returned None, search listed
    ('theme', {'theme': 'dark'}), delete left it listed, and a put made a second file."""
    root = tmp_path / "s"
    store = _store(root)
    store.put(NS, "theme", {"theme": "dark"})
    theme = node_id_for(NS, "theme")
    assert _files(root) == {f"{theme}.md"}
    said = _tool(
        root,
        {
            "command": "rename",
            "old_path": f"/memories/{theme}.md",
            "new_path": "/memories/knowledge/mytheme.md",
        },
    )
    assert said == [
        f"Successfully renamed /memories/{theme}.md to /memories/knowledge/mytheme.md "
        f"(stored as /memories/{FOLDER}/mytheme.md)"
    ]
    assert _files(root) == {"mytheme.md"}
    item = store.get(NS, "theme")
    assert item is not None and (item.key, item.value) == ("theme", {"theme": "dark"})
    assert _listed(store) == [("theme", {"theme": "dark"})]
    assert _listed(store, query="dark") == [("theme", {"theme": "dark"})]

    store.put(NS, "theme", {"theme": "light"})  # changes the renamed file, makes no second
    assert _files(root) == {"mytheme.md"}
    assert store.get(NS, "theme").value == {"theme": "light"}  # type: ignore[union-attr]
    assert _listed(store) == [("theme", {"theme": "light"})]

    store.delete(NS, "theme")
    assert _files(root) == set()
    assert store.get(NS, "theme") is None
    assert _listed(store) == []

    store.put(NS, "theme", {"theme": "blue"})  # a new item, under the item's own id
    assert _files(root) == {f"{theme}.md"}
    assert _listed(store) == [("theme", {"theme": "blue"})]
    store.store.close()


def test_a_delete_removes_every_memory_holding_the_item(tmp_path: Path) -> None:
    """A renamed item and one under the item's id (as a git merge of a clone that renamed
    the file with one that wrote the item anew leaves): get and search show the one under
    the item's id, and a delete removes both, so neither comes back."""
    root = tmp_path / "s"
    store = _store(root)
    store.put(NS, "theme", {"theme": "dark"})
    theme = node_id_for(NS, "theme")
    _here(
        root,
        {
            "command": "rename",
            "old_path": f"/memories/{theme}.md",
            "new_path": "/memories/knowledge/mytheme.md",
        },
    )
    store.store.add(value_to_node(NS, "theme", {"theme": "light"}, "knowledge", None))
    assert _files(root) == {"mytheme.md", f"{theme}.md"}
    assert store.get(NS, "theme").value == {"theme": "light"}  # type: ignore[union-attr]
    assert _listed(store) == [("theme", {"theme": "light"})]

    store.delete(NS, "theme")
    assert _files(root) == set()
    assert store.get(NS, "theme") is None
    assert _listed(store) == []
    store.store.close()


def test_a_file_carrying_an_items_key_under_another_id_is_no_item(tmp_path: Path) -> None:
    """The reviewer's i3.py: a file the memory tool created with ``langgraph_key: coffee``
    in the namespace was hidden while the item existed and listed (as ('coffee', {}))
    once it was deleted. It is a memory, never the item: get, search and delete agree."""
    root = tmp_path / "s"
    store = _store(root)
    store.put(NS, "coffee", {"text": "black coffee"})
    coffee = node_id_for(NS, "coffee")
    forged = (
        '---\ncondition_space: {"observation_position": "langgraph:memories/alice"}\n'
        'langgraph_key: "coffee"\n---\nforged coffee value'
    )
    _here(root, {"command": "create", "path": "/memories/knowledge/forged.md", "file_text": forged})
    assert _files(root) == {f"{coffee}.md", "forged.md"}
    assert _listed(store) == [("coffee", {"text": "black coffee"})]
    assert _listed(store, query="coffee") == [("coffee", {"text": "black coffee"})]
    assert store.get(NS, "coffee").value == {"text": "black coffee"}  # type: ignore[union-attr]

    store.delete(NS, "coffee")
    assert _files(root) == {"forged.md"}  # a memory of its own: the delete leaves it
    assert store.get(NS, "coffee") is None
    assert _listed(store) == []
    assert _listed(store, query="coffee") == []

    store.put(NS, "coffee", {"text": "tea now"})
    assert _files(root) == {f"{coffee}.md", "forged.md"}
    assert _listed(store) == [("coffee", {"text": "tea now"})]
    store.store.close()


def _break(root: Path, node_id: str) -> Path:
    path = root / "knowledge/cond_langgraph_f_f0ae197e" / f"{node_id}.md"
    text = path.read_text()
    assert 'langgraph_value: {"n": 1}' in text
    path.write_text(text.replace('langgraph_value: {"n": 1}', 'langgraph_value: {"n": 1'))
    return path


def test_one_broken_item_file_does_not_take_down_its_namespaces_search(tmp_path: Path) -> None:
    """The reviewer's t7.py/t8.py: on a handle that indexed the item before its YAML was
    broken by hand, every search of the namespace raised MalformedNodeFileError (after
    waiting too); a fresh handle skipped it. Now both skip it (get: None) and find the
    healthy items; health names the file (the handle that indexed it: as changed, until
    a sync); a put of that item does not write over it and names the file."""
    root = tmp_path / "s"
    ns = ("f",)
    old = MdCGStore(root)
    old.put(ns, "k", {"text": "victim", "n": 1})
    old.put(ns, "k2", {"text": "fine"})
    victim = node_id_for(ns, "k")
    path = _break(root, victim)
    rel = f"knowledge/cond_langgraph_f_f0ae197e/{victim}.md"
    reason = (
        "the YAML frontmatter does not parse: did not find expected ',' or '}' (column 15), "
        "while parsing a flow mapping from line 10, column 18"
    )
    fresh = MdCGStore(root)
    for store in (old, fresh):
        assert [(i.key, i.value) for i in store.search(ns)] == [("k2", {"text": "fine"})]
        assert [(i.key, i.value) for i in store.search(ns, query="victim")] == [("k2", {"text": "fine"})]
        assert store.get(ns, "k") is None
        assert store.get(ns, "k2").value == {"text": "fine"}  # type: ignore[union-attr]
    # a put does not write over it: it names the file and what is wrong
    # (both handles took the broken file in at their batch's pick-up: sync_if_changed)
    for store in (old, fresh):
        with pytest.raises(DuplicateIdError) as dup:
            store.put(ns, "k", {"text": "new"})
        assert str(dup.value) == (
            f"node id {victim!r}: the file {rel} is there and cannot be read as a memory "
            "(health lists it); it is not written over -- fix or move it first"
        )
    assert fresh.store.unreadable_files() == [(rel, reason)]
    assert [(f.kind, f.path, f.detail) for f in fresh.store.health().findings] == [
        ("unreadable_file", rel, reason)
    ]
    old.store.sync()
    assert [(f.kind, f.path, f.detail) for f in old.store.health().findings] == [
        ("unreadable_file", rel, reason)
    ]
    assert [(i.key, i.value) for i in old.search(ns)] == [("k2", {"text": "fine"})]
    assert path.read_text().endswith("---\nvictim\n")
    old.close()
    fresh.close()


def test_the_memory_tool_and_the_store_see_one_renamed_item(tmp_path: Path) -> None:
    """In one process too (the reviewer's setup): the tool's rename, then the store."""
    root = tmp_path / "s"
    store = MdCGStore(root)
    tool = MdCGMemoryTool(root)
    store.put(NS, "theme", {"theme": "dark"})
    tool.call(
        {
            "command": "rename",
            "old_path": f"/memories/{node_id_for(NS, 'theme')}.md",
            "new_path": "/memories/knowledge/mytheme.md",
        }
    )
    assert store.get(NS, "theme").value == {"theme": "dark"}  # type: ignore[union-attr]
    store.delete(NS, "theme")
    assert _listed(store) == []
    assert _files(root) == set()
    tool.close()
    store.close()


def test_renamed_to_names_where_an_id_went_within_the_scope(tmp_path: Path) -> None:
    from md_cg import MdCG, Scope

    root = tmp_path / "rt"
    with MdCG(root) as s:
        s.add(id="a", layer="contextual", body="alice's", agent_scope="alice")
        s.add(id="b", layer="contextual", body="bob's", agent_scope="bob")
        s.rename("a", "a2")
        s.rename("b", "b2")
        s.rename("a2", "a3")
        assert (s.renamed_to("a"), s.renamed_to("a2"), s.renamed_to("b"), s.renamed_to("zz")) == (
            ["a3"],
            ["a3"],
            ["b2"],
            [],
        )
        s.archive("a3")
        assert s.renamed_to("a") == ["a3"]  # archived ones too
    with MdCG(root, scope=Scope(agent="bob")) as bob:
        assert (bob.renamed_to("a"), bob.renamed_to("b")) == ([], ["b2"])
