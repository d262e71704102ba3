"""Session 34 (attack a2 on the hints of 3072471):

1. ``add(node, overwrite=True)`` (MCP ``remember`` with ``overwrite``) refused a node for an
   edge target its stored file already held (``CON``, ``n1\\u200b``): UnsafeIdError for
   ``s.add(s.get("a"), overwrite=True)``; api.md promises stored targets are kept;
2. the same for a stored tag now counted blank (``"\\u0301"``, ``"\\u200b"``), and the
   blank-tag error printed the lone mark unescaped (``('́')``);
3. a query of Hangul fillers, blank Braille or tag characters (3,764 code points the id
   rule calls invisible) was answered with 10 filler results: one table now;
4. a hint naming a Unicode-form twin printed both spellings alike (``mdcg add``'s note and
   ``--json``, MCP ``did_you_mean``);
5. MCP ``did_you_mean`` was keyed by the clipped target: two long targets lost a hint;
6. a write of an unknown id sorted and walked every unreadable file (11 ms beside 20,000).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_cli_hostile_s33 import invoke, runner  # noqa: F401 - the fixture
from test_hints_s34 import _mcp
from typer.testing import CliRunner

from md_cg import MdCG, Node, Scope
from md_cg import paths as paths_mod
from md_cg.errors import InvalidArgumentError, InvalidNodeError, NodeNotFoundError, UnsafeIdError, check_query
from md_cg.node import Edge, invisible_char, unusable

UNSAFE_CON = r"^node '{}': unsafe edge target \(edges\[0\]\.target\) 'CON'"
CON_ERROR = (
    "node 'a': unsafe edge target (edges[2].target) 'PRN': Windows reserves the name PRN for a "
    "device, so a clone of the store there could not hold its file; ids must be safe file-name stems"
)


def _legacy(root: Path) -> None:
    """A memory holding what add now refuses of new input (an older version wrote it)."""
    with MdCG(root) as s:
        s.add_many(
            [
                Node(
                    id="a",
                    body="alpha memory",
                    tags=["\u0301", "\u200b", "ok"],
                    edges=[Edge(target="CON", type="similar"), Edge(target="n1\u200b", type="similar")],
                )
            ],
            checked=False,
        )


def test_add_overwrite_keeps_what_the_stored_node_held(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _legacy(root)
    with MdCG(root) as s:
        n = s.get("a")
        n.body = "alpha memory v2"
        stored = s.add(n, overwrite=True)
        assert stored.body == "alpha memory v2"
        again = s.get("a")
        assert again.body == "alpha memory v2"
        assert [e.target for e in again.edges] == ["CON", "n1\u200b"]
        assert again.tags == ["\u0301", "\u200b", "ok"]


def test_add_overwrite_still_refuses_a_new_unsafe_target_or_blank_tag(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _legacy(root)
    with MdCG(root) as s:
        path = root / s.entry("a").path
        before = path.read_bytes()
        n = s.get("a")
        n.edges = [*n.edges, Edge(target="PRN", type="similar")]
        with pytest.raises(UnsafeIdError) as err:
            s.add(n, overwrite=True)
        assert str(err.value) == CON_ERROR
        n = s.get("a")
        n.tags = [*n.tags, "\u0302"]
        with pytest.raises(InvalidNodeError) as bad:
            s.add(n, overwrite=True)
        assert str(bad.value) == "node 'a': field 'tags' holds a blank tag ('\\u0302'); a tag needs some text"
        assert path.read_bytes() == before


def test_add_without_overwrite_keeps_nothing(tmp_path: Path) -> None:
    """A new node of another id holding the same target is new input: refused as before."""
    root = tmp_path / "m"
    _legacy(root)
    with MdCG(root) as s:
        with pytest.raises(UnsafeIdError, match=UNSAFE_CON.format("b")):
            s.add(id="b", body="beta", edges=[Edge(target="CON", type="similar")])
        assert "b" not in s


def test_a_scoped_overwrite_keeps_nothing_of_a_memory_out_of_scope(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many(
            [Node(id="a", body="theirs", agent_scope="b", edges=[Edge(target="CON", type="similar")])],
            checked=False,
        )
    with (
        MdCG(root, scope=Scope(agent="x")) as mine,
        pytest.raises(UnsafeIdError, match=UNSAFE_CON.format("a")),
    ):
        mine.add(Node(id="a", body="mine", edges=[Edge(target="CON", type="similar")]), overwrite=True)
    with MdCG(root) as s:
        assert s.get("a").body == "theirs"


def test_blank_tag_error_escapes_the_tag() -> None:
    for tag, shown in (("\u0301", "'\\u0301'"), ("\u3164", "'\\u3164'"), ("  ", "'  '")):
        problem = unusable(Node(id="x", body="b", tags=[tag]))
        assert isinstance(problem, InvalidNodeError)
        assert str(problem) == f"node 'x': field 'tags' holds a blank tag ({shown}); a tag needs some text"


def test_mcp_remember_overwrite_keeps_a_held_target(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    _legacy(root)
    args = {"id": "a", "body": "alpha v2", "overwrite": True, "edges": [{"target": "CON", "type": "similar"}]}
    reply = _mcp(root, [("remember", args)])[0]
    assert not reply.is_error, reply.content[0].text
    data = json.loads(reply.content[0].text)
    assert data["id"] == "a" and data["unknown_targets"] == ["CON"]
    with MdCG(root) as s:
        assert s.get("a").body == "alpha v2"
        assert [e.target for e in s.get("a").edges] == ["CON"]


BLANK_QUERIES = [
    "\u3164",
    "\u115f",
    "\u1160",
    "\uffa0",
    "\u2800\u2800",
    " \u3164 ",
    "\u3164\u200b",
    "\U000e0000",
    "\U000e0080",
    "\U0001bca0",
]


@pytest.mark.parametrize("query", BLANK_QUERIES)
def test_a_query_of_blanks_the_id_rule_calls_invisible_is_empty(tmp_path: Path, query: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        check_query(query)
    assert str(err.value) == "query is empty: give the words to search for"
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="n1", body="the first memory")
        with pytest.raises(InvalidArgumentError, match=r"^query is empty: give the words to search for$"):
            s.search(query, record=False)
        with pytest.raises(InvalidArgumentError, match=r"^query is empty: give the words to search for$"):
            s.inject(query)


def test_one_table_every_character_an_id_calls_invisible_shows_nothing_in_a_query() -> None:
    """What p6_blank_sets found: 3,764 code points invisible to ids but visible to queries."""
    from md_cg.errors import shows_text

    odd = []
    for cp in range(0x80, sys.maxunicode + 1):
        if 0xD800 <= cp < 0xE000:
            continue
        ch = chr(cp)
        if invisible_char(f"a{ch}b") == ch and shows_text(ch):
            odd.append(f"U+{cp:04X}")
    assert odd == []


def test_a_query_with_a_visible_character_is_still_asked() -> None:
    flag = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"  # Scotland
    for query in ("\u3164a", "\u2800x", flag):
        assert check_query(query) == query


def test_cli_add_escapes_a_unicode_form_twin(runner: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="Caf\u00e9", body="nfc")
    edge = "Cafe\u0301:similar"
    result = invoke(runner, "add", "--id", "f", "--edge", edge, "# f", "--root", root, "--json")
    assert result.stderr.splitlines()[0] == (
        "f: edge target 'Cafe\\u0301' is not in the store (did you mean 'Caf\\u00e9'? ids differ by "
        "letter case or Unicode form; stored anyway; `mdcg health` lists dangling edges)"
    )
    assert '"Cafe\\u0301": "Caf\\u00e9"' in result.stdout  # JSON's escapes: they print apart
    data = json.loads(result.stdout)
    assert data["did_you_mean"] == {"Cafe\u0301": "Caf\u00e9"}  # the exact ids for a parser
    assert data["unknown_targets"] == ["Cafe\u0301"]


def test_cli_add_case_twin_unchanged(runner: CliRunner, tmp_path: Path) -> None:  # noqa: F811
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="n1", body="one")
    result = invoke(runner, "add", "--id", "f", "--edge", "N1:similar", "# f", "--root", root, "--json")
    assert '"did_you_mean": {\n    "N1": "n1"\n  }' in result.stdout
    assert result.stderr.splitlines()[0] == (
        "f: edge target 'N1' is not in the store (did you mean 'n1'? ids differ by letter case or "
        "Unicode form; stored anyway; `mdcg health` lists dangling edges)"
    )


L1 = "project-alpha-meeting-notes-2024-01-15-decisions-part-one"
L2 = "project-alpha-meeting-notes-2024-01-15-decisions-part-two"


def test_mcp_did_you_mean_keeps_every_hint_and_escapes_form_twins(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    with MdCG(root) as s:
        for i in (L1, L2, "Caf\u00e9"):
            s.add(id=i, body=f"memory {i}")
    edges = [
        {"target": "later", "type": "similar"},
        {"target": L1.upper(), "type": "similar"},
        {"target": L2.upper(), "type": "similar"},
        {"target": L1.upper(), "type": "part_of"},
        {"target": "Cafe\u0301", "type": "similar"},
    ]
    reply = _mcp(root, [("remember", {"id": "f", "body": "links", "edges": edges})])[0]
    data = json.loads(reply.content[0].text)
    clipped = "PROJECT-ALPHA-MEETING-NOTES-2024-01-15-\u2026"
    assert data["unknown_targets"] == ["later", clipped, clipped, "Cafe\u0301"]
    assert data["did_you_mean"] == [
        {"edge": 1, "target": clipped, "did_you_mean": L1},
        {"edge": 2, "target": clipped, "did_you_mean": L2},
        {"edge": 4, "target": "'Cafe\\u0301'", "did_you_mean": "'Caf\\u00e9'"},
    ]


def _with_problems(root: Path, n: int) -> None:
    with MdCG(root) as s:
        s.add(id="n1", body="one")
    folder = root / "knowledge" / "orphan"
    for i in range(n):
        (folder / f"bad-{i:03d}.md").write_text("---\nid: [unclosed\n---\nx\n", encoding="utf-8")


def test_an_unknown_id_write_does_not_walk_every_unreadable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "m"
    _with_problems(root, 200)
    calls = []
    real = paths_mod.stem_of

    def counted(rel: str) -> str:
        calls.append(rel)
        return real(rel)

    with MdCG(root) as s:
        s.sync()
        monkeypatch.setattr(paths_mod, "stem_of", counted)
        for _ in range(10):
            with pytest.raises(NodeNotFoundError) as err:
                s.update("zz", body="x")
            assert str(err.value) == "no node with id 'zz' in this store"
            with pytest.raises(NodeNotFoundError):
                s.get("zz")
        assert len(calls) <= 200  # the stem map built once (was 200 per call: 4,000)


def test_the_unreadable_file_hint_follows_a_sync(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _with_problems(root, 3)
    bad = root / "knowledge" / "orphan" / "zz.md"
    with MdCG(root) as s:
        s.sync()
        with pytest.raises(NodeNotFoundError) as err:
            s.update("zz", body="x")
        assert str(err.value) == "no node with id 'zz' in this store"
        (root / "knowledge" / "orphan" / "bad-000.md").unlink()  # one problem fewer, one more:
        bad.write_text("---\nid: [unclosed\n---\nx\n", encoding="utf-8")  # as many as before
        s.sync()
        reason = dict(s.unreadable_files())["knowledge/orphan/zz.md"]
        for write in (lambda: s.update("zz", body="x"), lambda: s.get("zz")):
            with pytest.raises(NodeNotFoundError) as err:
                write()
            assert str(err.value) == (
                f"no node with id 'zz' in this store (its file knowledge/orphan/zz.md is unusable: "
                f"{reason}; fix it, then sync)"
            )
        bad.unlink()
        s.sync()
        with pytest.raises(NodeNotFoundError) as err:
            s.update("zz", body="x")
        assert str(err.value) == "no node with id 'zz' in this store"
