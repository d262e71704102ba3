"""Node file format: lossless round trips, YAML compatibility, malformed files."""

from __future__ import annotations

from datetime import UTC

import frontmatter
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from md_cg import nodefile
from md_cg.errors import InvalidNodeError, MalformedNodeFileError
from md_cg.node import EDGE_TYPES, FIELD_ORDER, VERIFICATION_BASES, Edge, Node, validate

# -- strategies ---------------------------------------------------------------

# Any Unicode scalar value except surrogates (which UTF-8 cannot hold):
# CJK, emoji, U+2028/U+2029, U+0085, C0/C1 controls and DEL included.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
SPICY = st.sampled_from(
    ["\u2028", "\u2029", "\x85", "\x7f", "\x00", "\t", "---", "二分查找", "😀", "\ufeff", "\r\n", "a: b"]
)
STRINGS = st.one_of(TEXT, SPICY, st.lists(st.one_of(TEXT, SPICY), max_size=4).map("".join))
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-7, 1e20, 1.5e300, 5e-324, -0.0, 1e16, 2.0]),
)
INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), INTS, FLOATS, STRINGS),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(STRINGS, children, max_size=4)
    ),
    max_leaves=12,
)
UNIT = st.floats(min_value=0.0, max_value=1.0)
# Instants: any finite float (out-of-range ones are written as numbers), ISO strings.
INSTANTS = st.one_of(
    st.none(),
    FLOATS,
    st.floats(min_value=-62135596800.0, max_value=253402300799.0),
    st.datetimes(timezones=st.just(UTC)).map(lambda t: t.isoformat()),
)
KEYS = st.one_of(
    st.sampled_from(["on", "off", "yes", "no", "null", "true", "content", "handler", "body", "Y"]),
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30).filter(
        lambda k: "\n" not in k
    ),
).filter(lambda k: k not in FIELD_ORDER)
IDS = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_\-]{0,30}", fullmatch=True)
LINES = st.lists(st.one_of(STRINGS, st.just("---"), st.just("# 功能名：x"), st.just("")), max_size=8)
BODIES = st.one_of(STRINGS, LINES.map("\n".join), LINES.map(lambda ls: "\n".join(ls) + "\n"))


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    return Node(
        id=draw(IDS),
        layer=draw(st.sampled_from(["knowledge", "anchor", "self", "rejected"])),
        body=draw(BODIES),
        modality=draw(st.one_of(st.none(), STRINGS)),
        importance=draw(st.one_of(st.none(), UNIT)),
        confidence=draw(st.one_of(st.none(), UNIT)),
        condition_space=draw(st.one_of(st.none(), st.dictionaries(STRINGS, JSON, max_size=4))),
        tags=draw(st.lists(STRINGS, max_size=4)),
        spatial=draw(JSON),
        temporal=draw(JSON),
        created_at=draw(INSTANTS),
        updated_at=draw(INSTANTS),
        last_access=draw(INSTANTS),
        state_attributes=draw(st.one_of(st.none(), st.dictionaries(STRINGS, JSON, max_size=3))),
        entity_id=draw(JSON),
        verification_basis=draw(st.one_of(st.none(), st.sampled_from(VERIFICATION_BASES))),
        non_applicable_conditions=draw(st.lists(STRINGS, max_size=3)),
        edges=draw(
            st.lists(
                st.builds(
                    Edge,
                    target=IDS,
                    type=st.sampled_from(EDGE_TYPES),
                    confidence=st.one_of(st.none(), FLOATS),
                    verified=st.one_of(st.none(), st.integers(0, 1)),
                ),
                max_size=3,
            )
        ),
        access_count=draw(st.one_of(st.none(), st.integers(0, 10**9))),
        extra=draw(st.dictionaries(KEYS, JSON, max_size=4)),
    )


# -- property tests ---------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes())
def test_round_trip_is_lossless(node: Node) -> None:
    validate(node)  # quantises times to microseconds: parse(write(node)) == node from here
    text = nodefile.dumps(node)
    back = nodefile.loads(text)
    assert back == node
    assert back.to_dict() == node.to_dict()
    assert back.body == node.body  # byte for byte, whitespace and '---' lines included
    assert nodefile.dumps(back) == text
    assert text.endswith("\n")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes())
def test_yaml_reader_sees_the_same_values(node: Node) -> None:
    validate(node)
    text = nodefile.dumps(node)
    fm = text[4 : text.index("\n---\n", 3)]
    assert yaml.safe_load(fm) == node.to_dict(iso_times=True)
    assert text[len(fm) + 9 :] == (node.body + "\n" if node.body else "")


@given(FLOATS)
def test_floats_are_written_as_yaml_floats(value: float) -> None:
    text = nodefile.dump_float(value)
    parsed = yaml.safe_load(f"a: {text}")["a"]
    assert isinstance(parsed, float)
    assert parsed == value


# -- examples ---------------------------------------------------------------------


def test_exact_file_text() -> None:
    node = Node(
        id="kp_1",
        layer="knowledge",
        importance=0.8,
        confidence=1e-7,
        tags=["domain:计算机"],
        edges=[Edge("kp_2", "part_of", 0.7, 0)],
        extra={"on": True, "content": "c"},
        body="# 功能名：x\n---\nbody\n",
    )
    assert nodefile.dumps(node) == (
        "---\n"
        'id: "kp_1"\n'
        'layer: "knowledge"\n'
        "importance: 0.8\n"
        "confidence: 1.0e-07\n"
        'tags: ["domain:计算机"]\n'
        'edges: [{"target": "kp_2", "type": "part_of", "confidence": 0.7, "verified": 0}]\n'
        '"on": true\n'
        'content: "c"\n'
        "---\n"
        "# 功能名：x\n---\nbody\n\n"
    )


def test_yaml_unsafe_characters_are_escaped() -> None:
    node = Node(id="a", layer="self", tags=["x\u2028y\x85z\x7f\ufeff"])
    text = nodefile.dumps(node)
    assert 'tags: ["x\\u2028y\\u0085z\\u007f\\ufeff"]' in text
    assert "\u2028" not in text


def test_body_keeps_leading_and_trailing_whitespace_and_fences() -> None:
    body = "\n\n  ---\n---\n----\n\ttrailing  \n\n"
    node = Node(id="a", layer="self", body=body)
    assert nodefile.loads(nodefile.dumps(node)).body == body


def test_empty_body_and_empty_optional_fields() -> None:
    node = Node(id="a", layer="self")
    assert nodefile.dumps(node) == '---\nid: "a"\nlayer: "self"\n---\n'
    assert nodefile.loads(nodefile.dumps(node)) == node


def test_python_frontmatter_reads_our_files_with_the_handler(tmp_path) -> None:
    # (frontmatter.load itself cannot take keys named content/handler: it
    # passes metadata as keyword arguments. nodefile.loads has no such limit.)
    node = Node(id="a", layer="self", body="text\n---\nmore", extra={"note": [1, 2]})
    path = tmp_path / "a.md"
    path.write_text(nodefile.dumps(node), encoding="utf-8")
    post = frontmatter.load(path, handler=nodefile.MdcgHandler())
    assert post.metadata == {"id": "a", "layer": "self", "note": [1, 2]}
    assert post.content == "text\n---\nmore"


def test_times_are_iso_8601_utc_in_files_and_epoch_floats_in_memory() -> None:
    node = validate(Node(id="t", layer="self", created_at=1796083200.5, updated_at=1796083200.1234567))
    assert node.updated_at == 1796083200.123457  # quantised to microseconds
    text = nodefile.dumps(node)
    assert text == (
        '---\nid: "t"\nlayer: "self"\n'
        'created_at: "2026-12-01T00:00:00.500000Z"\n'
        'updated_at: "2026-12-01T00:00:00.123457Z"\n---\n'
    )
    assert nodefile.loads(text) == node
    # Epoch numbers (files written before) are the same instants.
    old = '---\nid: "t"\nlayer: "self"\ncreated_at: 1796083200.5\nupdated_at: 1796083200.123457\n---\n'
    assert nodefile.loads(old) == node
    # Outside the years 0001-9999 an instant stays a number.
    far = validate(Node(id="t", layer="self", created_at=1.5e300))
    assert "created_at: 1.5e+300\n" in nodefile.dumps(far)
    assert nodefile.loads(nodefile.dumps(far)) == far


def test_every_file_ends_with_a_newline_and_the_body_comes_back_exactly() -> None:
    cases = {"": "---\n", "x": "---\nx\n", "x\n": "---\nx\n\n", "\n": "---\n\n\n", "a\r": "---\na\r\n"}
    for body, tail in cases.items():
        text = nodefile.dumps(Node(id="a", layer="self", body=body))
        assert text == '---\nid: "a"\nlayer: "self"\n' + tail
        assert nodefile.loads(text).body == body
    # A file written by hand without a final newline reads the same as with one.
    assert nodefile.loads('---\nid: "a"\nlayer: "self"\n---\nx').body == "x"


def test_hand_written_yaml_frontmatter_is_read() -> None:
    text = (
        "---\n"
        "id: hand_1\n"
        "layer: knowledge\n"
        "# a comment a person wrote\n"
        "tags:\n  - domain:physics\n  - optics\n"
        "importance: 0.5\n"
        "my_note: keep me\n"
        "---\nBody\n"
    )
    node = nodefile.loads(text)
    assert node.id == "hand_1"
    assert node.tags == ["domain:physics", "optics"]
    assert node.extra == {"my_note": "keep me"}
    assert node.body == "Body"
    again = nodefile.loads(nodefile.dumps(node))
    assert again == node


def test_unknown_keys_survive_in_their_order() -> None:
    text = '---\nid: "a"\nlayer: "self"\nzeta: 1\nalpha: {"x": [1, 2]}\n---\n'
    node = nodefile.loads(text)
    assert list(node.extra) == ["zeta", "alpha"]
    assert nodefile.dumps(node) == text


def test_crlf_fences_are_accepted_and_the_body_read_by_its_lines() -> None:
    # Session 29: the body was "line\r" (only the "\n" of the file's last line end came
    # off), and a body of several lines kept a "\r" at the end of each in replies.
    text = '---\r\nid: "a"\r\nlayer: "self"\r\n---\r\nline\r\nsecond\r\n\r\nthird\r\n'
    node = nodefile.loads(text)
    assert node.id == "a"
    assert node.body == "line\nsecond\n\nthird"
    assert nodefile.dumps(node).endswith('"self"\n---\nline\nsecond\n\nthird\n')


def test_a_crlf_note_without_frontmatter_is_read_by_its_lines() -> None:
    node = nodefile.loads("a note\r\nline two\r\n", "n.md", default_id="n", default_layer="knowledge")
    assert node.body == "a note\nline two"


def test_an_lf_file_keeps_a_carriage_return_of_its_body() -> None:
    # a body given with "\r\n" inside is written and read back as it was (LF fences)
    node = nodefile.loads(nodefile.dumps(Node(id="a", layer="self", body="x\r\ny\r")))
    assert node.body == "x\r\ny\r"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no frontmatter here\n", "x.md: the file does not start with a '---' line"),
        ('---\nid: "a"\nlayer: "self"\n', "x.md: the frontmatter has no closing '---' line"),
        (
            '---\nid: "a"\nlayer: "self"\nbad: [1, 2\nnext: 3\n---\n',
            "x.md:5: the YAML frontmatter does not parse: did not find expected ',' or ']' (column 5), "
            "while parsing a flow sequence from line 4, column 6",
        ),
        ('---\nlayer: "self"\n---\n', "x.md: frontmatter has no 'id'"),
        (
            '---\nid: "a"\nlayer: "attic"\n---\n',
            "x.md:3: node 'a': unknown layer 'attic'; expected one of: anchor, structural, "
            "knowledge, contextual, self, rejected, unresolved",
        ),
        (
            '---\nid: "a"\nlayer: "self"\nverification_basis: "vibes"\n---\n',
            "x.md:4: node 'a': field 'verification_basis' must be one of compiler, test, "
            "measurement, formal_proof, data, other (or absent) (got 'vibes')",
        ),
        (
            '---\nid: "../etc"\nlayer: "self"\n---\n',
            "x.md:2: unsafe node id '../etc': it contains '..'; ids must be safe file-name stems",
        ),
    ],
)
def test_malformed_files_are_reported_with_path_and_reason(text: str, message: str) -> None:
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(text, "x.md")
    assert str(err.value) == message
    assert err.value.path == "x.md"


def test_invalid_utf8_names_the_file(tmp_path) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(b'---\nid: "a"\nlayer: "self"\n---\n\xff\xfe')
    with pytest.raises(MalformedNodeFileError, match=r"bad\.md: not valid UTF-8 at byte 30"):
        nodefile.read_node(path)


def test_values_that_cannot_be_stored_are_refused() -> None:
    with pytest.raises(InvalidNodeError, match=r"field 'spatial': non-finite number nan"):
        nodefile.dumps(Node(id="a", layer="self", spatial=float("nan")))
    with pytest.raises(InvalidNodeError, match=r"outside the range -2\*\*63 to 2\*\*64 - 1"):
        nodefile.dumps(Node(id="a", layer="self", spatial=2**64))
    widest = nodefile.dumps(Node(id="a", layer="self", spatial=2**64 - 1))
    assert "\nspatial: 18446744073709551615\n" in widest
    with pytest.raises(InvalidNodeError, match="lone surrogate"):
        nodefile.dumps(Node(id="a", layer="self", tags=["\ud800"]))
    with pytest.raises(InvalidNodeError, match="cannot be stored in frontmatter"):
        nodefile.dumps(Node(id="a", layer="self", spatial={1, 2}))


def test_conflict_markers_in_the_frontmatter_are_named_with_their_line() -> None:
    """What a git merge without md-cg's driver leaves when both clones changed one line."""
    text = (
        '---\nid: "n1"\nlayer: "self"\n<<<<<<< HEAD:self/n1.md\nupdated_at: "2026-12-05T02:08:42.554374Z"\n'
        '=======\nupdated_at: "2026-12-05T02:08:42.943089Z"\n>>>>>>> eac9159:self/n1.md\n---\nbody\n'
    )
    with pytest.raises(MalformedNodeFileError) as info:
        nodefile.loads(text, "self/n1.md", default_id="n1", default_layer="self")
    assert [(p.line, p.message) for p in info.value.problems] == [
        (
            4,
            "a git merge left conflict markers in the frontmatter (the first on line 4): keep one version "
            "of each conflicting line and remove the markers (docs/git.md, True conflicts); md-cg's merge "
            "driver merges such edits itself where it is enabled (mdcg init --git; docs/git.md, Enabling "
            "the driver)",
        )
    ]
    # a frontmatter that does not parse for another reason keeps YAML's own words
    with pytest.raises(MalformedNodeFileError, match="does not parse"):
        nodefile.loads('---\nid: "n1"\nlayer: "self"\nbad line without colon\n---\nbody\n', "x.md")


def test_only_a_whole_conflict_from_the_first_line_is_unreadable() -> None:
    """A note that merely starts with git's marker characters stays a note (the first
    version of the rule made it unreadable: reviewer's find); two whole versions are not."""
    note = "<<<<<<< is what git puts at the start of a conflict\n\nnotes about it\n"
    assert nodefile.loads(note, "k/x.md", default_id="x", default_layer="knowledge").body == note.rstrip("\n")
    half = "<<<<<<< ours\na\n=======\nb\n"  # no closing marker: not a whole conflict
    assert nodefile.loads(half, "k/x.md", default_id="x", default_layer="knowledge").body == half.rstrip("\n")
    whole = "<<<<<<< ours\n---\nid: x\n---\na\n=======\n---\nid: x\n---\nb\n>>>>>>> theirs\n"
    said = r"^k/x.md:1: a git merge left two versions of the whole file"
    with pytest.raises(MalformedNodeFileError, match=said):
        nodefile.loads(whole, "k/x.md", default_id="x", default_layer="knowledge")
