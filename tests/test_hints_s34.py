"""Session 34 (review rD, three low findings):

1. the writes refused an id typed in another letter case with a bare "no node with id
   'N1' in this store" where ``get`` said ``(did you mean 'n1'? ...)`` (``update``,
   ``forget``, ``supersede``, ``delete``, ``rename``, ``archive``, ``move``, ``edit_text``,
   MCP ``update``/``forget``/``update_memory``/``delete_memory``, ``mdcg update``/``forget``);
2. a query of invisible characters only (``"\\u200b\\u200b"``) was answered with 10
   filler results (MCP: ``[]``) where ``"   "`` was refused as empty;
3. an edge target no id could be (``n1\\u200b``, ``CON``) was stored, listed only under
   ``unknown_targets``; a case twin of a held id (``N1``) was not told apart.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import mcp_calls as _mcp
from test_cli_hostile_s33 import error_line, invoke, runner  # noqa: F401 - the fixture
from typer.testing import CliRunner

from md_cg import MdCG, Node, Scope
from md_cg.cli import app  # noqa: F401 - the app the helpers invoke
from md_cg.errors import (
    InvalidArgumentError,
    InvalidNodeError,
    NodeNotFoundError,
    UnsafeIdError,
    check_query,
)
from md_cg.node import unusable

HINT = "no node with id 'N1' in this store (did you mean 'n1'? ids differ by letter case or Unicode form)"
PLAIN = "no node with id 'N1' in this store"


def _files(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of the store but the local state under .mdcg/: (mtime, bytes)."""
    out = {}
    for dirpath, _, names in os.walk(root):
        if ".mdcg" in Path(dirpath).relative_to(root).parts:
            continue
        for name in names:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = (p.stat().st_mtime_ns, p.read_bytes())
    return out


def _store(root: Path) -> None:
    with MdCG(root) as s:
        s.add(id="n1", body="# one\n\nthe first memory", layer="knowledge")
        s.add(id="n2", body="# two\n\nthe second memory", layer="knowledge")
        s.add(id="n3", body="# three\n\nthe third memory", layer="knowledge")


WRITES: dict[str, Callable[[MdCG], Any]] = {
    "update": lambda s: s.update("N1", body="# changed"),
    "update_report": lambda s: s.update_report("N1", body="# changed"),
    "reopen": lambda s: s.reopen("N1"),
    "move": lambda s: s.move("N1", "self"),
    "modify": lambda s: s.modify("N1", lambda n: n),
    "edit_text": lambda s: s.edit_text("N1", lambda t: t + "x"),
    "rename": lambda s: s.rename("N1", "fresh"),
    "delete": lambda s: s.delete("N1"),
    "forget": lambda s: s.forget("N1", "typo"),
    "forget_many": lambda s: s.forget_many(["n2", "N1"], "typo"),
    "archive": lambda s: s.archive(["n2", "N1"]),
    "supersede_old": lambda s: s.supersede("N1", "n2"),
    "keep_returned": lambda s: s.keep_returned("N1"),
}


@pytest.mark.parametrize("write", sorted(WRITES))
def test_every_write_hints_a_case_typo_and_writes_nothing(tmp_path: Path, write: str) -> None:
    root = tmp_path / "m"
    _store(root)
    before = _files(root)
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError) as err:
            WRITES[write](s)
        assert str(err.value) == HINT
        assert err.value.node_id == "N1"
        assert s.ids() == ["n1", "n2", "n3"]
        with pytest.raises(NodeNotFoundError) as read:
            s.get("N1")
        assert str(read.value) == str(err.value)  # the very text of the read
    assert _files(root) == before


def test_supersede_hints_the_new_side_too(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s, pytest.raises(NodeNotFoundError) as err:
        s.supersede("n2", "N1")
    assert str(err.value) == HINT
    with MdCG(root) as s:
        assert s.superseded_by("n2") is None


def test_unarchive_names_the_archived_twin(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s:
        assert s.archive(["n1"]) == ["n1"]
        with pytest.raises(NodeNotFoundError) as err:
            s.unarchive(["N1"])
        assert str(err.value) == HINT
        with pytest.raises(NodeNotFoundError) as hidden:  # update: archived is out of reach
            s.update("N1", body="# x")
        assert str(hidden.value) == PLAIN  # as get of it: the archived twin is not offered
        with pytest.raises(NodeNotFoundError) as read:
            s.get("N1")
        assert str(read.value) == PLAIN


def test_a_unicode_form_twin_is_printed_escaped_as_get_prints_it(tmp_path: Path) -> None:
    root = tmp_path / "m"
    nfc = "Caf\u00e9"
    nfd = unicodedata.normalize("NFD", nfc)
    with MdCG(root) as s:
        s.add(id=nfc, body="# cafe")
        # session 42: an id in another Unicode form finds the memory (before: "did you mean
        # 'Caf\\u00e9'?"); tests/test_unicode_s42.py. Letter case is still only named.
        assert s.get(nfd).id == nfc
        with pytest.raises(NodeNotFoundError) as err:
            s.forget(nfd.lower(), "typo")
        assert str(err.value) == (
            "no node with id 'cafe\u0301' in this store "
            "(did you mean 'Caf\u00e9'? ids differ by letter case or Unicode form)"
        )
        assert s.forget(nfd, "typo").node.id == nfc


def test_a_scoped_handle_is_never_hinted_an_id_out_of_its_scope(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="n1", body="# theirs", agent_scope="b")
        s.add(id="m1", body="# mine", agent_scope="a")
    before = _files(root)
    with MdCG(root, scope=Scope(agent="a")) as s:
        for write in ("update", "forget", "delete", "rename", "move", "edit_text", "supersede_old"):
            with pytest.raises(NodeNotFoundError) as err:
                WRITES[write](s)
            assert str(err.value) == PLAIN, write
        with pytest.raises(NodeNotFoundError) as err:
            s.archive(["N1"])
        assert str(err.value) == PLAIN
        with pytest.raises(NodeNotFoundError) as own:  # its own twin is named
            s.update("M1", body="# x")
        assert str(own.value) == HINT.replace("N1", "M1").replace("n1", "m1")
        assert s.twin_of("N1") is None and s.twin_of("M1") == "m1" and s.twin_of("m1") is None
    assert _files(root) == before


def test_an_id_out_of_scope_is_refused_as_before(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="n1", body="# theirs", agent_scope="b")
    with MdCG(root, scope=Scope(agent="a")) as s, pytest.raises(NodeNotFoundError) as err:
        s.update("n1", body="# x")
    assert str(err.value) == "no node with id 'n1' in this store"


def test_cli_update_and_forget_hint_the_twin(runner: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    root = tmp_path / "m"
    _store(root)
    before = _files(root)
    said = f"error: {HINT}"
    assert error_line(runner, "update", "N1", "--body", "x", "--root", root) == said
    assert error_line(runner, "forget", "N1", "--reason", "x", "--root", root) == said
    assert error_line(runner, "delete", "N1", "--root", root) == said
    assert _files(root) == before


def test_mcp_writes_hint_the_twin(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    _store(root)
    before = _files(root)
    calls = [
        ("update", {"id": "N1", "body": "x"}),
        ("forget", {"id": "N1", "reason": "x"}),
        ("supersede", {"old": "N1", "new": "n2"}),
        ("update_memory", {"memory_id": "N1", "text": "x"}),
        ("delete_memory", {"memory_id": "N1"}),
    ]
    replies = _mcp(root, calls, aliases=["mem0"])
    for (tool, _), reply in zip(calls, replies, strict=True):
        assert reply.is_error, tool
        assert reply.content[0].text == f"Error executing tool {tool}: {HINT}"
    assert _files(root) == before


@pytest.mark.parametrize(
    "query",
    [
        "\u200b\u200b",  # zero-width spaces
        "\u2060",  # word joiner
        "\ufeff",  # byte-order mark
        "\u200c",  # a joiner alone
        "\u200d",
        "\u00ad",  # soft hyphen
        "\u0301\u0301",  # combining marks with nothing to sit on
        "\ufe0f",  # a variation selector alone
        "\U000e0041",  # a tag character
        " \u200b\u3000\u00a0\u200b ",
    ],
)
def test_a_query_of_invisible_characters_is_empty(tmp_path: Path, query: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        check_query(query)
    assert str(err.value) == "query is empty: give the words to search for"
    assert err.value.name == "query"
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s:
        with pytest.raises(InvalidArgumentError, match=r"^query is empty: give the words to search for$"):
            s.search(query, record=False)
        with pytest.raises(InvalidArgumentError, match=r"^query is empty: give the words to search for$"):
            s.inject(query)


def test_a_query_with_a_visible_character_is_still_asked(tmp_path: Path) -> None:
    for query in ("\u200bfirst", "cafe\u0301", "\u0301a", "\U0001f469\u200d\U0001f4bb", "二分"):
        assert check_query(query) == query
    root = tmp_path / "m"
    _store(root)
    with MdCG(root) as s:
        results, _ = s.search("\u200bsecond\u200b", record=False)
        assert [r.id for r in results if not r.filler] == ["n2"]


def test_mcp_search_and_inject_refuse_an_invisible_query(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    _store(root)
    replies = _mcp(
        root,
        [("search", {"query": "\u200b\u200b", "fill": True}), ("inject", {"query": "\u2060"})],
    )
    assert [r.content[0].text for r in replies] == [
        "Error executing tool search: query is empty: give the words to search for",
        "Error executing tool inject: query is empty: give the words to search for",
    ]
    assert all(r.is_error for r in replies)


def test_a_tag_of_combining_marks_only_is_blank() -> None:
    """One rule of what is blank (md_cg.errors.shows_text) for queries and tags."""
    problem = unusable(Node(id="x", body="b", tags=["\u0301"]))
    assert isinstance(problem, InvalidNodeError)
    # escaped since hints2-s34: repr printed the lone mark as it is
    assert str(problem) == "node 'x': field 'tags' holds a blank tag ('\\u0301'); a tag needs some text"


BAD_TARGETS = {
    "n1\u200b": (
        "node 'e': unsafe edge target (edges[0].target) 'n1\\u200b': it holds the invisible format "
        "character U+200B (ZERO WIDTH SPACE), so it would look like another id; "
        "ids must read as what they are"
    ),
    "CON": (
        "node 'e': unsafe edge target (edges[0].target) 'CON': Windows reserves the name CON for a device, "
        "so a clone of the store there could not hold its file; ids must be safe file-name stems"
    ),
    "com1.notes": (
        "node 'e': unsafe edge target (edges[0].target) 'com1.notes': Windows reserves the name COM1 for a "
        "device, so a clone of the store there could not hold its file; ids must be safe file-name stems"
    ),
    "n\u3164": (
        "node 'e': unsafe edge target (edges[0].target) 'n\\u3164': it holds the invisible character "
        "U+3164 (HANGUL FILLER), so it would look like another id; ids must read as what they are"
    ),
}


@pytest.mark.parametrize("target", sorted(BAD_TARGETS))
def test_add_refuses_an_edge_target_no_id_could_be(tmp_path: Path, target: str) -> None:
    root = tmp_path / "m"
    _store(root)
    before = _files(root)
    with MdCG(root) as s:
        with pytest.raises(UnsafeIdError) as err:
            s.add(id="e", body="# e", edges=[{"target": target, "type": "part_of"}])
        assert str(err.value) == BAD_TARGETS[target]
        assert (err.value.field, err.value.value, err.value.node_id) == ("edges", target, "e")
        with pytest.raises(UnsafeIdError) as second:  # the index names the edge
            s.add(
                id="e",
                body="# e",
                edges=[{"target": "n2", "type": "similar"}, {"target": target, "type": "part_of"}],
            )
        assert str(second.value) == BAD_TARGETS[target].replace("edges[0]", "edges[1]")
        with pytest.raises(UnsafeIdError):
            s.update("n1", edges=[{"target": target, "type": "part_of"}])
        with pytest.raises(UnsafeIdError):
            s.apply_changes(add=[Node(id="e", body="# e", edges=[{"target": target, "type": "part_of"}])])
    assert _files(root) == before


def test_stores_and_imports_holding_such_targets_still_work(tmp_path: Path) -> None:
    """Only new input is checked: add_many (the import path) carries them, and an update
    that keeps the stored edge goes ahead."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many(
            [Node(id="old", body="# old", edges=[{"target": "CON", "type": "part_of"}])], checked=False
        )
        assert [e.target for e in s.get("old").edges] == ["CON"]
        node = s.update("old", body="# old, edited")
        assert [e.target for e in node.edges] == ["CON"]
        node = s.update(
            "old", edges=[{"target": "CON", "type": "part_of"}, {"target": "n9", "type": "similar"}]
        )
        assert [e.target for e in node.edges] == ["CON", "n9"]
        with pytest.raises(UnsafeIdError, match=r"edges\[2\]\.target\) 'AUX'"):
            s.update("old", edges=[*node.edges, {"target": "AUX", "type": "similar"}])
    with MdCG(root) as s:
        assert [e.target for e in s.get("old").edges] == ["CON", "n9"]


def test_a_joined_non_ascii_target_is_still_allowed(tmp_path: Path) -> None:
    with MdCG(tmp_path / "m") as s:
        target = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # Persian: a ZWNJ between letters
        node = s.add(id="e", body="# e", edges=[{"target": target, "type": "similar"}])
        assert [e.target for e in node.edges] == [target]


def test_mcp_refuses_bad_targets_and_names_the_twin_of_a_case_typo(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    _store(root)
    before = _files(root)
    calls = [
        ("remember", {"body": "# e", "id": "e", "edges": [{"target": "n1\u200b", "type": "part_of"}]}),
        ("create_relations", {"relations": [{"from": "n2", "to": "CON", "relationType": "knows"}]}),
    ]
    replies = _mcp(root, calls, aliases=["mcp-memory"])
    assert replies[0].is_error
    assert replies[0].content[0].text == f"Error executing tool remember: {BAD_TARGETS['n1' + chr(0x200B)]}"
    refused = json.loads(replies[1].content[0].text)["refused"]
    assert len(refused) == 1 and "unsafe edge target (edges[0].target) 'CON'" in refused[0]["reason"]
    assert _files(root) == before
    twin = _mcp(
        root,
        [
            (
                "remember",
                {
                    "body": "# f",
                    "id": "f",
                    "edges": [{"target": "N1", "type": "similar"}, {"target": "later", "type": "similar"}],
                },
            )
        ],
    )[0]
    data = json.loads(twin.content[0].text)
    assert data["unknown_targets"] == ["N1", "later"]
    assert data["unknown_targets_total"] == 2
    # a list of pairs since hints2-s34 (a map keyed by the clipped target lost hints)
    assert data["did_you_mean"] == [{"edge": 0, "target": "N1", "did_you_mean": "n1"}]


def test_mcp_scoped_twin_is_not_named(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="n1", body="# theirs", agent_scope="b")
    reply = _mcp(
        root,
        [("remember", {"body": "# f", "id": "f", "edges": [{"target": "N1", "type": "similar"}]})],
        scope=Scope(agent="a"),
    )[0]
    data = json.loads(reply.content[0].text)
    assert data["unknown_targets"] == ["N1"]
    assert "did_you_mean" not in data


def test_cli_add_names_the_twin_of_an_edge_target(runner: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    root = tmp_path / "m"
    _store(root)
    result = invoke(runner, "add", "--id", "f", "--edge", "N1:similar", "# f", "--root", root, "--json")
    assert json.loads(result.stdout)["did_you_mean"] == {"N1": "n1"}
    assert result.stderr.splitlines()[0] == (
        "f: edge target 'N1' is not in the store (did you mean 'n1'? ids differ by letter case or "
        "Unicode form; stored anyway; `mdcg health` lists dangling edges)"
    )
    line = error_line(runner, "add", "--id", "g", "--edge", "CON:similar", "# g", "--root", root)
    assert line.startswith("error: node 'g': unsafe edge target (edges[0].target) 'CON': Windows reserves")


def test_an_edge_to_a_held_device_named_memory_is_still_allowed(tmp_path: Path) -> None:
    """A file an older version wrote (``prn.md``) is read; linking to it is no typo. A scoped
    handle that does not see it is refused as for any unsafe target (nothing told)."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="keep", layer="self", body="x")
    (root / "self" / "prn.md").write_text('---\nid: "prn"\nlayer: "self"\nagent_scope: "b"\n---\nold\n')
    with MdCG(root) as s:
        assert s.sync().added == ("prn",)
        node = s.add(id="linker", body="# l", edges=[{"target": "prn", "type": "similar"}])
        assert [e.target for e in node.edges] == ["prn"]
        node = s.update("keep", edges=[{"target": "prn", "type": "similar"}])
        assert [e.target for e in node.edges] == ["prn"]
        node = s.edit_text("keep", lambda t: t.replace("target: prn", "target: prn"))
    with MdCG(root, scope=Scope(agent="a")) as s, pytest.raises(UnsafeIdError) as err:
        s.add(id="mine", body="# m", edges=[{"target": "prn", "type": "similar"}])
    assert str(err.value) == (
        "node 'mine': unsafe edge target (edges[0].target) 'prn': Windows reserves the name PRN for a "
        "device, so a clone of the store there could not hold its file; ids must be safe file-name stems"
    )


def test_edit_text_refuses_a_new_unsafe_edge_target(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    before = _files(root)
    with MdCG(root) as s, pytest.raises(UnsafeIdError) as err:
        s.edit_text("n1", lambda t: t.replace("---\n", "---\nedges:\n- target: AUX\n  type: similar\n", 1))
    assert str(err.value) == (
        "node 'n1': unsafe edge target (edges[0].target) 'AUX': Windows reserves the name AUX for a "
        "device, so a clone of the store there could not hold its file; ids must be safe file-name stems"
    )
    assert _files(root) == before
