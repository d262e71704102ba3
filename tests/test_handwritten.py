"""Hand-written notes (e.g. from Obsidian) and readable files: defaults, YAML as people
write it, every problem at once, slug ids, id uniqueness keys, ISO 8601 instants."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from md_cg import MdCG, nodefile
from md_cg.errors import DuplicateIdError, FileProblem, MalformedNodeFileError, NodeNotFoundError
from md_cg.node import (
    SLUG_CHARS,
    Node,
    check_id,
    format_instant,
    parse_instant,
    quantise_instant,
    slug_id,
    validate,
)
from md_cg.paths import id_key

OBSIDIAN = """---
title: Binary search
tags:
  - algorithms
  - search
aliases: [bsearch, 二分查找]
created: 2026-11-30
created_at: 2026-11-30 10:15
importance: 0.7
status: draft
---
# Binary search

Halve the interval each step.
"""


def test_a_note_without_frontmatter_takes_the_defaults() -> None:
    node = nodefile.loads(
        "Just a thought.\nSecond line.\n",
        "knowledge/thought.md",
        default_id="thought",
        default_layer="knowledge",
    )
    assert node == Node(id="thought", layer="knowledge", body="Just a thought.\nSecond line.")
    # Without defaults the file is still malformed, as before.
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads("Just a thought.\n", "knowledge/thought.md")
    assert str(err.value) == "knowledge/thought.md: the file does not start with a '---' line"
    # The positional form keeps working.
    assert nodefile.loads('---\nid: "a"\nlayer: "self"\n---\n', "self/a.md").id == "a"


def test_obsidian_frontmatter_is_read_with_the_defaults() -> None:
    node = nodefile.loads(
        OBSIDIAN, "knowledge/binary-search.md", default_id="binary-search", default_layer="knowledge"
    )
    assert node.id == "binary-search"
    assert node.layer == "knowledge"
    assert node.tags == ["algorithms", "search"]
    assert node.importance == 0.7
    assert node.created_at == datetime(2026, 11, 30, 10, 15, tzinfo=UTC).timestamp()
    assert node.extra == {
        "title": "Binary search",
        "aliases": ["bsearch", "二分查找"],
        "created": "2026-11-30",
        "status": "draft",
    }
    assert node.body == "# Binary search\n\nHalve the interval each step."
    # If the engine is asked to write it, the result reads back as the same node.
    assert nodefile.loads(nodefile.dumps(node)) == node


def test_frontmatter_id_and_layer_win_over_the_defaults() -> None:
    text = "---\nid: other\nlayer: self\n---\nx\n"
    node = nodefile.loads(text, "knowledge/x.md", default_id="x", default_layer="knowledge")
    assert (node.id, node.layer) == ("other", "self")
    # null is absent, so the default applies.
    node = nodefile.loads(
        "---\nid:\nlayer: ~\n---\nx\n", "knowledge/x.md", default_id="x", default_layer="knowledge"
    )
    assert (node.id, node.layer) == ("x", "knowledge")


@pytest.mark.parametrize(
    ("yaml_text", "tags"),
    [
        ("tags: [a, b]", ["a", "b"]),
        ("tags:\n  - a\n  - b", ["a", "b"]),
        ("tags: python", ["python"]),
        ('tags: "python"', ["python"]),
        ("tags: [yes, 2024, 1.50, null-ish]", ["yes", "2024", "1.50", "null-ish"]),
        ("tags:", []),
    ],
)
def test_tags_as_people_write_them(yaml_text: str, tags: list[str]) -> None:
    node = nodefile.loads(f"---\n{yaml_text}\n---\n", "n.md", default_id="n", default_layer="self")
    assert node.tags == tags


def test_string_fields_keep_their_text_and_dates_become_instants() -> None:
    text = (
        "---\nid: 2024\nlayer: self\nmodality: 12\nupdated_at: 2026-11-30\n"
        "last_access: 2026-11-30T10:00:00+02:00\n---\n"
    )
    node = nodefile.loads(text, "n.md")
    assert (node.id, node.modality) == ("2024", "12")
    assert node.updated_at == datetime(2026, 11, 30, tzinfo=UTC).timestamp()
    assert node.last_access == datetime(2026, 11, 30, 8, tzinfo=UTC).timestamp()
    # A JSON string is a single tag; a number in a string field reads as written, whether
    # or not every line is JSON (before session 39 an all-JSON frontmatter refused `id: 5`).
    assert nodefile.loads('---\nid: "a"\nlayer: "self"\ntags: "x"\n---\n').tags == ["x"]
    assert nodefile.loads('---\nid: 5\nlayer: "self"\n---\n').id == "5"


def test_every_problem_of_a_file_is_reported_together() -> None:
    text = (
        "---\n"
        "id: kp_1\n"  # 2
        "importance: 5\n"  # 3
        "tags: [a, [b]]\n"  # 4
        "verification_basis: vibes\n"  # 5
        "created_at: yesterday\n"  # 6
        "importance: 0.5\n"  # 7
        "---\nbody\n"
    )
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(text, "knowledge/kp_1.md")
    exc = err.value
    assert exc.problems == [
        FileProblem(7, "key 'importance' appears again (first on line 3)"),
        FileProblem(None, "frontmatter has no 'layer'"),
        FileProblem(
            6,
            "node 'kp_1': field 'created_at' is not an ISO 8601 date or time (e.g. 2026-11-30T23:59:20Z) "
            "(an instant: seconds since the epoch or ISO 8601) (got 'yesterday')",
        ),
        FileProblem(4, "node 'kp_1': field 'tags' must be a list of strings (got ['a', ['b']])"),
        FileProblem(
            5,
            "node 'kp_1': field 'verification_basis' must be one of compiler, test, measurement, "
            "formal_proof, data, other (or absent) (got 'vibes')",
        ),
    ]
    assert exc.line == 7
    assert str(exc) == "knowledge/kp_1.md: 5 problems: " + "; ".join(
        f"line {p.line}: {p.message}" if p.line else p.message for p in exc.problems
    )
    # With the layer given by the folder, that problem goes away and the others stay.
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(text, "knowledge/kp_1.md", default_layer="knowledge")
    assert len(err.value.problems) == 4


def test_reading_never_changes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "note.md"
    path.write_bytes(OBSIDIAN.encode("utf-8"))
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    nodefile.read_node(path, default_id="note", default_layer="knowledge")
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


# -- slug ids and uniqueness keys -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("Binary search", "binary-search"),
        ("  # Binary Search: O(log n)!\nsecond line", "binary-search-o-log-n"),
        ("\n\n二分查找 算法\n", "二分查找-算法"),
        ("Ｆｕｌｌ　ｗｉｄｔｈ", "full-width"),
        ("Straße café", "strasse-café"),
        ("", "note"),
        ("!!! ... ///", "note"),
        ("../../etc/passwd", "etc-passwd"),
        ("a" * 30 + " " + "b" * 30, "a" * 30),
        ("x" * 100, "x" * SLUG_CHARS),
    ],
)
def test_slug_id(text: str, slug: str) -> None:
    made = slug_id(text)
    assert re.fullmatch(re.escape(slug) + "-[0-9a-f]{6}", made), made
    assert check_id(made) == made


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=150))
def test_the_ascii_slug_path_keeps_the_rule_of_every_script(text: str) -> None:
    """ASCII text takes a regex; its slug is the per-character rule's (letters, marks, digits kept)."""
    import unicodedata

    first = next((line for line in text.splitlines() if line.strip()), "")
    chars = [c if unicodedata.category(c)[0] in "LMN" else "-" for c in first.lower()]
    slug = re.sub("-{2,}", "-", "".join(chars)).strip("-")
    if len(slug) > SLUG_CHARS:
        cut = slug[:SLUG_CHARS]
        dash = cut.rfind("-")
        slug = (cut[:dash] if dash >= SLUG_CHARS // 2 else cut).strip("-")
    assert slug_id(text)[:-7] == (slug or "note")


def test_slug_ids_differ_by_their_suffix() -> None:
    assert len({slug_id("same title") for _ in range(50)}) == 50


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_a_safe_id(text: str) -> None:
    made = slug_id(text)
    assert check_id(made) == made
    assert len(made) <= SLUG_CHARS + 7
    assert re.fullmatch(r"[^\s]+-[0-9a-f]{6}", made)
    assert made == made.casefold()


def test_id_key_folds_case_and_normalisation() -> None:
    assert id_key("Foo") == id_key("foo") == id_key("FOO")
    assert id_key("caf\u00e9") == id_key("cafe\u0301")
    assert id_key("Straße") == id_key("STRASSE")
    assert id_key("a") != id_key("b")


# -- instants ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (1796083200.5, 1796083200.5),
        (1796083200, 1796083200.0),
        ("2026-12-01T00:00:00.500000Z", 1796083200.5),
        ("2026-12-01T01:00:00.5+01:00", 1796083200.5),
        ("2026-12-01", 1796083200.0),
        ("2026-12-01 00:00", 1796083200.0),
        (date(2026, 12, 1), 1796083200.0),
        (datetime(2026, 12, 1), 1796083200.0),
        ("1969-12-31T23:59:59Z", -1.0),
        (0.1234564, 0.123456),
        (0.1234565, 0.123456),  # below the half: the float is 0.12345649999...
    ],
)
def test_parse_instant(value: object, seconds: float) -> None:
    assert parse_instant(value) == seconds


@pytest.mark.parametrize("value", ["yesterday", "", True, None, float("nan"), [1], "2026-13-01"])
def test_parse_instant_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        parse_instant(value)


def test_format_instant() -> None:
    assert format_instant(1796083200.5) == "2026-12-01T00:00:00.500000Z"
    assert format_instant(0.0) == "1970-01-01T00:00:00.000000Z"
    assert format_instant(-62135596800.0) == "0001-01-01T00:00:00.000000Z"
    assert format_instant(253402300799.0) == "9999-12-31T23:59:59.000000Z"
    assert format_instant(253402300800.0) == 253402300800.0  # year 10000
    assert format_instant(1e12 * 1000) == 1e15  # milliseconds by mistake: kept as the number


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_quantised_instants_survive_iso_and_back(value: float) -> None:
    q = quantise_instant(value)
    assert quantise_instant(q) == q
    written = format_instant(q)
    assert parse_instant(written) == q
    if isinstance(written, str):
        # half a microsecond, plus the rounding of the grid value itself (8.8515625 -> 8.851562,
        # which a float holds only to within an ulp)
        assert abs(q - value) <= 5e-7 + 2 * math.ulp(max(abs(q), abs(value)))


def test_validate_quantises_every_time_field() -> None:
    node = validate(Node(id="a", layer="self", created_at=1.00000049, updated_at="2026-12-01", last_access=2))
    assert (node.created_at, node.updated_at, node.last_access) == (1.0, 1796083200.0, 2.0)
    assert type(node.last_access) is float


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n", "\ufeff\n"])
def test_an_empty_file_is_no_memory(tmp_path: Path, text: str) -> None:
    """`touch self/empty.md` became a memory with an empty body: health said nothing, and
    its export could not be imported (a memory needs some text)."""
    from md_cg import MdCG

    root = tmp_path / "m"
    MdCG(root).close()
    (root / "self" / "empty.md").write_text(text, encoding="utf-8")
    with MdCG(root) as s:
        assert s.sync().malformed == (("self/empty.md", "the file is empty: a memory needs some text"),)
        assert "empty" not in s
        assert [(f.kind, f.path) for f in s.health().findings] == [("unreadable_file", "self/empty.md")]


def _on_a1(s: MdCG, op: str) -> object:
    """One operation on the memory a1 (the tests below: its file changed or gone by hand)."""
    return {
        "delete": lambda: s.delete("a1"),
        "forget": lambda: s.forget("a1", "a reason"),
        "rename": lambda: s.rename("a1", "c3"),
        "update": lambda: s.update("a1", body="new"),
        "archive": lambda: s.archive(["a1"]),
    }[op]()


@pytest.mark.parametrize("op", ["delete", "forget", "rename", "update", "archive"])
def test_a_file_whose_id_was_changed_by_hand_is_not_removed_or_rewritten_under_the_old_id(
    tmp_path: Path, op: str
) -> None:
    """Before any sync, a person changes a1's id to b2 in its file: an operation on a1 must not
    delete, forget or rewrite memory b2 (the index still maps a1 to that file)."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="a1", layer="self", body="alpha note"))
        s.compact_index()
    path = root / "self" / "a1.md"
    edited = path.read_text().replace('id: "a1"', 'id: "b2"')
    path.write_text(edited)
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError, match="no node with id 'a1'"):
            _on_a1(s, op)
        assert s.ids() == ["b2"] and s.tombstones() == []
        assert s.get("b2").body.strip() == "alpha note"
    assert path.read_text() == edited


def test_an_overwrite_does_not_replace_a_file_that_holds_another_id_now(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="a1", layer="self", body="a one"))
        s.compact_index()
    path = root / "self" / "a1.md"
    edited = path.read_text().replace('id: "a1"', 'id: "b2"').replace("a one", "B2 OWN TEXT")
    path.write_text(edited)
    with MdCG(root) as s:
        with pytest.raises(DuplicateIdError, match=r"holds memory 'b2' \(edited by hand"):
            s.add(Node(id="a1", layer="self", body="over"), overwrite=True)
        with pytest.raises(DuplicateIdError, match=r"holds memory 'b2' \(edited by hand"):
            s.add(Node(id="a1", layer="self", body="over"))
        s.sync()  # what the message said before: it changes nothing, the file is b2's
        with pytest.raises(DuplicateIdError, match=r"holds memory 'b2' \(edited by hand"):
            s.add(Node(id="a1", layer="self", body="over"), overwrite=True)
        assert s.ids() == ["b2"] and s.get("b2").body.strip() == "B2 OWN TEXT"
    assert path.read_text() == edited


@pytest.mark.parametrize("op", ["delete", "forget", "rename", "update"])
def test_an_id_whose_file_was_removed_by_hand_is_not_found(tmp_path: Path, op: str) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="a1", layer="self", body="alpha"))
        s.add(Node(id="k", layer="self", body="kept"))
    (root / "self" / "a1.md").unlink()
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError, match="no node with id 'a1'"):
            _on_a1(s, op)
        assert s.ids() == ["k"] and s.tombstones() == []


def test_a_file_edited_to_claim_another_id_does_not_take_that_id_over(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="b", layer="self", body="bravo", tags=["b-tag"]))
        s.add(Node(id="c", layer="self", body="charlie", tags=["c-tag"]))
    path_c = root / "self" / "c.md"
    path_c.write_text(path_c.read_text().replace('id: "c"', 'id: "b"'))
    with MdCG(root) as s:
        with pytest.raises(NodeNotFoundError):
            s.update("c", body="x")
        assert (s.get("b").body.strip(), s.entry("b").path) == ("bravo", "self/b.md")
        s.update("b", body="bravo v2")
    assert "bravo v2" in (root / "self" / "b.md").read_text() and "charlie" in path_c.read_text()


def test_a_move_does_not_land_on_a_file_that_holds_another_memory(tmp_path: Path) -> None:
    """n2's file moved by hand to self/m1.md (and synced): moving m1 into self/ must not
    write over it, nor may an archive land on another memory's archived file."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="m1", layer="contextual", body="m1 text"))
        s.add(Node(id="n2", layer="self", body="n2 text"))
    (root / "self" / "n2.md").rename(root / "self" / "m1.md")
    with MdCG(root) as s:
        s.sync()
        with pytest.raises(DuplicateIdError, match=r"self/m1\.md holds memory 'n2'"):
            s.add(Node(id="m1", layer="self", body="m1 moved"), overwrite=True)
        assert s.get("n2").body.strip() == "n2 text" and s.get("m1").body.strip() == "m1 text"
        archived = root / "archive" / "contextual" / "m1.md"
        archived.parent.mkdir(parents=True)
        archived.write_text('---\nid: "n3"\nlayer: "contextual"\n---\nn3\n')
        with pytest.raises(DuplicateIdError, match=r"holds memory 'n3'"):
            s.archive(["m1"])


def test_a_move_does_not_land_on_an_unreadable_file(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="m1", layer="contextual", body="m1 text"))
    precious = root / "self" / "m1.md"
    precious.parent.mkdir(exist_ok=True)
    precious.write_text("---\nid: [broken\n---\nuser's precious notes\n")
    with MdCG(root) as s:
        with pytest.raises(DuplicateIdError, match=r"self/m1\.md is there and cannot be read"):
            s.update("m1", layer="self")
        assert s.entry("m1").path == "contextual/m1.md"
    assert precious.read_text().endswith("user's precious notes\n")
