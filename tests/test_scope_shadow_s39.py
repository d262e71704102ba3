"""Session 39 (F1, F4): one scope's write never shadows another scope's memory.

F1: bob's memory ``b7`` had a YAML typo a person made by hand (its file unreadable).
alice's MCP server accepted ``remember {id: "b7"}`` and filed it at another path; once
the person fixed bob's file, bob's ``get b7`` said "no node with id 'b7'" and his sync
told only ``withheld: 1`` -- alice's copy stood for the id, after a rebuild of ``.mdcg/``
too. Now (a) an id whose file cannot be read -- at its path, or named for it elsewhere
(the index's ``problems``) -- is not given to a new memory (add, add_many, remember,
rename onto it), and a scoped caller is told neither the file nor whose it may be; and
(b) where two files already hold one id (made before the fix, a git merge of two clones'
memories, a copy by hand), each scope reads its own copy (get, search), writes and deletes
it alone, and no scope is told of the other's file; an unscoped handle reads the copy
every scope ranks alike and ``health`` names the other (``duplicate_id``) -- after a
rebuild from the files and a scoped handle's compaction too.

F4: (i) the scoped refusal said "(health lists it)" of a file the scope's ``health`` only
counts (``withheld``); (ii) an MCP reply said "run `mdcg sync` (MdCG.sync())".

The memories are written, changed and removed by processes of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import mcp_calls
from typer.testing import CliRunner

import md_cg
from md_cg import DuplicateIdError, InvalidArgumentError, MdCG, Node, Scope
from md_cg.cli import app
from md_cg.errors import lost_file_error

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}
_ENV.pop("MDCG_ROOT", None)

ALICE, BOB = Scope(agent="alice"), Scope(agent="bob")
BOB_TEXT = "Bob's launch checklist: step one, step two."
ALICE_TEXT = "Alice keeps her garden plan here."
#: a person's typo in bob's file: the YAML no longer parses
TYPO = ('agent_scope: "bob"', 'agent_scope: ["bob"')
#: alice's copy of b7, as a git merge of her clone brings it (newer than bob's)
ALICE_COPY = (
    '---\nid: "b7"\nlayer: "contextual"\nagent_scope: "alice"\n'
    'created_at: "2030-01-02T10:00:00Z"\nupdated_at: "2030-01-02T10:00:00Z"\n---\n' + ALICE_TEXT + "\n"
)

SCOPED_WHY = (
    "the id is taken by a file that cannot be read as a memory, whose owner this scope is not "
    "told (an unscoped health names it); choose another id, or have a person fix the file"
)
SCOPED_ADD = "node id 'b7': " + SCOPED_WHY
MCP_SCOPED = (
    "Error executing tool remember: id 'b7' is taken by a file that cannot be read as a memory, "
    "whose owner this server's scope is not told (a person should run `mdcg health` on the store: "
    "it names the file); choose another id"
)


def _run(code: str, *args: Any) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], env=_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout


def _bob(root: Path, *, snapshot_first: bool = True) -> Path:
    """bob's b7 (tagged, in a knowledge bucket) and a shared memory, each written by a
    process of its own; ``snapshot_first``: b7 after the first process's snapshot (in the
    log alone), else in the snapshot too. Returns b7's file."""
    first = "s.add(id='zz', body='a shared memory about okapis')"
    bob = f"s.add(id='b7', body={BOB_TEXT!r}, tags=['domain:ops'], agent_scope='bob')"
    for line in (first, bob) if snapshot_first else (f"{first}; {bob}",):
        _run(f"import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as s:\n    {line}\n", root)
    [path] = (root / "knowledge").glob("*/b7.md")
    return path


def _break(path: Path) -> str:
    """A person's typo in the file at ``path``; returns the text it had."""
    good = path.read_text(encoding="utf-8")
    assert TYPO[0] in good
    path.write_text(good.replace(*TYPO), encoding="utf-8")
    return good


def _sync(root: Path, scope: str = "") -> dict[str, Any]:
    code = (
        "import json, sys\nfrom md_cg import MdCG, Scope\n"
        "scope = Scope(agent=sys.argv[2]) if sys.argv[2] else None\n"
        "with MdCG(sys.argv[1], scope=scope) as s:\n    print(json.dumps(s.sync().to_dict()))\n"
    )
    return json.loads(_run(code, root, scope))


def _as(root: Path, agent: str, line: str) -> None:
    """``line`` (with ``s`` the store) in a process of ``agent``'s."""
    opened = f"with MdCG(sys.argv[1], scope=Scope(agent={agent!r})) as s:"
    _run(f"import sys\nfrom md_cg import MdCG, Scope\n{opened}\n    {line}\n", root)


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".mdcg" not in p.parts}


def _told(report: dict[str, Any]) -> dict[str, Any]:
    """A sync report's lists of what changed (empty when nothing did)."""
    return {k: report[k] for k in ("added", "changed", "deleted", "moved") if report[k]}


# -- (a) an id whose file cannot be read is not given to a new memory -----------------


def test_an_id_whose_file_cannot_be_read_is_not_given_to_a_new_memory(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _bob(root).relative_to(root).as_posix()
    _break(root / rel)
    assert [m["path"] for m in _sync(root)["malformed"]] == [rel]
    files = _files(root)
    with MdCG(root, scope=ALICE) as alice:
        alice.add(id="a2", body="alice's other note", layer="contextual")
        # before session 39: accepted, filed at knowledge/orphan/b7.md
        with pytest.raises(DuplicateIdError) as add:
            alice.add(id="b7", body="alice's own note")
        with pytest.raises(DuplicateIdError) as many:
            alice.add_many([Node(id="a3", body="one"), Node(id="b7", body="two")])
        with pytest.raises(InvalidArgumentError) as renamed:
            alice.rename("a2", "b7")
    assert (str(add.value), add.value.path, add.value.unreadable) == (SCOPED_ADD, "", True)
    assert str(many.value) == SCOPED_ADD
    assert str(renamed.value) == "cannot rename 'a2' to 'b7': " + SCOPED_WHY
    for said in (str(add.value), str(renamed.value)):  # nothing of the file, its owner or text
        assert not any(w in said.lower() for w in ("bob", "ops", "knowledge", "launch", "yaml"))
    with MdCG(root) as full:
        with pytest.raises(DuplicateIdError) as add:
            full.add(id="b7", body="a note")
        with pytest.raises(InvalidArgumentError) as renamed:
            full.rename("a2", "b7")
    named = (
        f"the file {rel} is named for it and cannot be read as a memory (health lists it; it may be "
        "any scope's); no second file of the id is made -- fix or move that file first, then sync"
    )
    assert (str(add.value), add.value.path) == (f"node id 'b7': {named}", rel)
    assert str(renamed.value) == f"cannot rename 'a2' to 'b7': {named}"
    assert _files(root) == files | {"contextual/a2.md"}


def test_the_cli_names_the_file_that_holds_the_id(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _bob(root).relative_to(root).as_posix()
    _break(root / rel)
    _sync(root)
    result = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"}).invoke(
        app, ["add", "--root", str(root), "--id", "b7", "a note"]
    )
    assert (result.exit_code, result.stdout) == (2, "")
    assert " ".join(result.stderr.split()) == (
        f"error: node id 'b7': the file {rel} is named for it and cannot be read as a memory (health "
        "lists it; it may be any scope's); no second file of the id is made -- fix or move that file "
        "first, then sync"
    )
    assert not (root / "knowledge" / "orphan" / "b7.md").exists()


def test_a_scoped_refusal_at_the_ids_own_path_says_what_its_health_tells(tmp_path: Path) -> None:
    """F4 (i): "(health lists it)" was said to a scope whose health only counts the file."""
    root = tmp_path / "m"
    _as(root, "alice", "s.add(id='a1', body='alice note', layer='contextual', agent_scope='alice')")
    own = root / "contextual" / "a1.md"
    own.write_text(own.read_text(encoding="utf-8").replace('agent_scope: "alice"', 'agent_scope: ["alice"'))
    _sync(root)
    with MdCG(root, scope=ALICE) as alice:
        with pytest.raises(DuplicateIdError) as add:
            alice.add(id="a1", body="again", layer="contextual")
        findings = [(f.kind, f.path, f.node_id) for f in alice.health().findings]
    # before: "node id 'a1': the file contextual/a1.md is there and cannot be read as a memory
    # (health lists it); it is not written over -- fix or move it first"
    assert (str(add.value), add.value.path) == (SCOPED_ADD.replace("'b7'", "'a1'"), "")
    assert ("withheld", None, None) in findings
    assert not [f for f in findings if f[0] == "unreadable_file"]
    with MdCG(root) as full, pytest.raises(DuplicateIdError) as add:
        full.add(id="a1", body="again", layer="contextual")
    assert str(add.value) == (
        "node id 'a1': the file contextual/a1.md is there and cannot be read as a memory (health "
        "lists it); it is not written over -- fix or move it first"
    )


# -- through the MCP server --------------------------------------------------------------


def test_f1_through_the_mcp_server(tmp_path: Path) -> None:
    root = tmp_path / "m"
    path = _bob(root, snapshot_first=False)
    good = _break(path)
    files = _files(root)
    got, remembered = mcp_calls(
        root, [("get", {"id": "b7"}), ("remember", {"body": "alice's own note", "id": "b7"})], scope=ALICE
    )
    assert got.is_error
    # before session 39: accepted, {"id":"b7", "path": ".../knowledge/orphan/b7.md", ...}
    assert (remembered.is_error, remembered.content[0].text) == (True, MCP_SCOPED)
    assert _files(root) == files
    path.write_text(good, encoding="utf-8")  # the person fixes bob's file
    replies = mcp_calls(root, [("get", {"id": "b7"}), ("sync", {}), ("get", {"id": "b7"})], scope=BOB)
    assert [r.is_error for r in replies] == [False] * 3
    assert [json.loads(replies[i].content[0].text)["body"] for i in (0, 2)] == [BOB_TEXT, BOB_TEXT]
    [got] = mcp_calls(root, [("get", {"id": "b7"})], scope=ALICE)
    assert (got.is_error, got.content[0].text) == (
        True,
        "Error executing tool get: no node with id 'b7' in this store",
    )


LOST = (
    "no node with id 'b7' in this store (its file was moved, deleted or changed outside md-cg since "
    "the last sync; {fix})"
)


def test_mcp_hints_name_the_servers_tools_alone() -> None:
    """F4 (ii): the ``fix`` of an id whose file was moved, deleted or broken by hand was
    passed through as the library says it: "run `mdcg sync` (MdCG.sync())"."""
    from md_cg.mcp_server import _message

    said = {
        "gone": _message(lost_file_error("b7", None)),
        "broken": _message(lost_file_error("b7", "contextual/b7.md", "bad YAML")),
    }
    assert said == {
        "gone": LOST.format(fix="the `sync` tool takes that in; then try again"),
        "broken": (
            "no node with id 'b7' in this store (its file contextual/b7.md was changed outside md-cg "
            "and is unusable: bad YAML; a person fixes it, then the `sync` tool takes it in)"
        ),
    }


def test_a_scoped_server_says_who_can_take_in_what_its_sync_does_not(tmp_path: Path) -> None:
    """A note of a file gone by hand whose memory this scope is not known to hold (the
    server never held it): its sync leaves it, and "the `sync` tool takes that in" looped."""
    root = tmp_path / "m"
    _bob(root).unlink()  # b7 in the log alone: the follow finds its file gone
    calls = [("remember", {"body": "bob's new note", "id": "b7"}), ("sync", {})] * 2
    replies = mcp_calls(root, calls, scope=BOB)
    assert [r.is_error for r in replies] == [True, False, True, False]
    fix = (
        "this server's `sync` tells its own scope's files alone: a person should run `mdcg sync` on "
        "the store, then try again"
    )
    said = f"Error executing tool remember: {LOST.format(fix=fix)}"
    assert [replies[0].content[0].text, replies[2].content[0].text] == [said, said]
    _sync(root)  # the person's sync
    [added] = mcp_calls(root, [("remember", {"body": "bob's new note", "id": "b7"})], scope=BOB)
    assert not added.is_error


def test_a_scoped_server_is_told_a_broken_file_as_such_before_and_after_its_sync(tmp_path: Path) -> None:
    """The follow of the log noted b7's file gone (broken): "the `sync` tool takes that in;
    then try again" looped -- a scoped sync never takes in another scope's note."""
    root = tmp_path / "m"
    _break(_bob(root))  # b7 in the log alone: the follow finds its file broken
    calls = [("remember", {"body": "alice's own note", "id": "b7"}), ("sync", {})] * 2
    replies = mcp_calls(root, calls, scope=ALICE)
    assert [r.is_error for r in replies] == [True, False, True, False]
    assert [replies[0].content[0].text, replies[2].content[0].text] == [MCP_SCOPED, MCP_SCOPED]


# -- (b) two files of one id: each scope reads its own ----------------------------------


def _with_alice_copy(root: Path) -> str:
    """bob's b7, and alice's copy of the id a git merge brought (newer: it stands for an
    unscoped handle), taken in by an unscoped sync; returns bob's file."""
    rel = _bob(root).relative_to(root).as_posix()
    (root / "contextual").mkdir(exist_ok=True)
    (root / "contextual" / "b7.md").write_text(ALICE_COPY, encoding="utf-8")
    assert _sync(root)["duplicates"] == [{"id": "b7", "path": rel}]
    return rel


def _reads(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, scope in (("all", None), ("alice", ALICE), ("bob", BOB)):
        with MdCG(root, scope=scope) as h:
            hits = {
                w: [r.id for r in h.search(w, record=False)[0] if not r.filler] for w in ("launch", "garden")
            }
            told = [(f.kind, f.path) for f in h.health().findings if f.kind in ("duplicate_id", "withheld")]
            out[name] = (h.get("b7").body, hits["launch"], hits["garden"], h.ids(), told)
    return out


def test_each_scope_reads_its_own_copy_after_a_rebuild_and_a_scoped_compaction(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _with_alice_copy(root)
    withheld = [("withheld", None)]
    expected = {
        "all": (ALICE_TEXT, [], ["b7"], ["b7", "zz"], [("duplicate_id", rel)]),
        "alice": (ALICE_TEXT, [], ["b7"], ["b7", "zz"], withheld),
        # before session 39: "no node with id 'b7'" (alice's copy stood for the id)
        "bob": (BOB_TEXT, ["b7"], [], ["b7", "zz"], withheld),
    }
    assert _reads(root) == expected
    shutil.rmtree(root / ".mdcg")  # "delete it and the index is rebuilt from the files"
    assert _reads(root) == expected
    with MdCG(root, scope=BOB) as bob:
        bob.compact_index()  # the snapshot holds the copy every scope ranks alike
    with MdCG(root) as full:
        assert (full._engine.loaded_from, full.entry("b7").path) == ("snapshot", "contextual/b7.md")
    assert _reads(root) == expected


def test_each_scope_writes_its_own_copy_and_no_one_is_told_of_the_other(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _with_alice_copy(root)
    alice = MdCG(root, scope=ALICE, refresh_interval=0)
    full = MdCG(root, refresh_interval=0)
    try:
        assert (alice.get("b7").body, full.get("b7").body) == (ALICE_TEXT, ALICE_TEXT)
        _as(root, "bob", "s.update('b7', body='Bob v2')")  # before: NodeNotFoundError
        assert "Bob v2" in (root / rel).read_text(encoding="utf-8")
        assert (alice.get("b7").body, full.get("b7").body) == (ALICE_TEXT, ALICE_TEXT)
        alice.update("b7", body="Alice v2")
        said = alice.sync().to_dict()
        assert (_told(said), said["withheld"]) == ({}, 1)  # no "moved" from bob's file
        said = full.sync().to_dict()
        assert (_told(said), said["duplicates"]) == ({}, [{"id": "b7", "path": rel}])
        _as(root, "bob", "s.delete('b7')")  # bob's copy alone
        assert _files(root) == {"contextual/b7.md", "knowledge/orphan/zz.md"}
        assert (alice.get("b7").body, full.get("b7").body) == ("Alice v2", "Alice v2")
        for h in (alice, full):  # no "added" b7: md-cg removed the other copy
            said = h.sync().to_dict()
            assert (_told(said), said["duplicates"]) == ({}, [])
    finally:
        alice.close()
        full.close()


def test_a_scopes_copy_removed_by_hand_is_told_deleted_to_it_alone(tmp_path: Path) -> None:
    root = tmp_path / "m"
    rel = _bob(root).relative_to(root).as_posix()
    (root / "contextual").mkdir(exist_ok=True)
    older = ALICE_COPY.replace("2030-01-02", "2020-01-02")  # bob's copy stands for every scope
    (root / "contextual" / "b7.md").write_text(older, encoding="utf-8")
    _sync(root)
    with MdCG(root, scope=BOB) as bob:
        assert bob.get("b7").body == BOB_TEXT
        (root / rel).unlink()  # a person removes bob's file
        said = bob.sync().to_dict()
    # before session 39: nothing told (a "moved" to alice's file, dropped as not seen)
    assert _told(said) == {"deleted": ("b7",)}
    assert "contextual" not in json.dumps(said)
    with MdCG(root, scope=ALICE) as alice:
        assert alice.get("b7").body == ALICE_TEXT


def test_a_scopes_forget_of_its_copy_leaves_the_others_in_every_index(tmp_path: Path) -> None:
    """bob's forget removed his copy, and his index dropped the id: the compaction every
    forget makes wrote a snapshot without alice's memory, so a process opening after it
    did not know it until a sync (which told it ``added``)."""
    root = tmp_path / "m"
    _bob(root)
    (root / "contextual").mkdir(exist_ok=True)
    older = ALICE_COPY.replace("2030-01-02", "2020-01-02")  # bob's copy stands for every scope
    (root / "contextual" / "b7.md").write_text(older, encoding="utf-8")
    _sync(root)
    _as(root, "bob", "s.forget('b7', 'done with it')")
    assert _files(root) == {"contextual/b7.md", "knowledge/orphan/zz.md"}
    with MdCG(root) as full:
        assert (full._engine.loaded_from, full.get("b7").body) == ("snapshot", ALICE_TEXT)
    with MdCG(root, scope=ALICE) as alice:
        assert alice.get("b7").body == ALICE_TEXT  # before: "no node with id 'b7'"
        said = alice.sync().to_dict()
    assert (_told(said), said["withheld"]) == ({}, 0)
