"""Bounded parsing: alias bombs, deep nesting, huge files and cells never take a reader down.

Every case here used to hang, eat gigabytes or raise RecursionError (issue 9,
item 4). Each must now fail fast with a clear error naming the file and line,
the node and field, or the sqlite row and column.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from md_cg import MdCG, nodefile
from md_cg.errors import FileProblem, InvalidNodeError, MalformedNodeFileError
from md_cg.node import MAX_DEPTH, MAX_FILE_BYTES, MAX_FRONTMATTER_BYTES, Node, validate

HEAD = '---\nid: "a"\nlayer: "self"\n'
LOADERS = pytest.mark.parametrize(
    "loader", [nodefile.YAML_LOADER, nodefile.BoundedSafeLoader], ids=lambda c: c.__name__
)


@pytest.fixture
def use_loader(monkeypatch: pytest.MonkeyPatch):
    def use(loader: type) -> None:
        monkeypatch.setattr(nodefile, "YAML_LOADER", loader)

    return use


def _bomb() -> str:
    """The 'billion laughs': 9 levels of 9 aliases, 9**9 strings once expanded."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return HEAD + "\n".join(lines) + "\n---\nbody\n"


def _nested(levels: int) -> list:
    """[[...[1]...]] with ``levels`` lists, built without recursion."""
    value: list = [1]
    for _ in range(levels - 1):
        value = [value]
    return value


# -- files ------------------------------------------------------------------------------


@LOADERS
def test_alias_bomb_is_refused_fast_with_the_line(loader: type, use_loader, tmp_path: Path) -> None:
    use_loader(loader)
    text = _bomb()
    assert len(text.encode()) < 700
    path = tmp_path / "bomb.md"
    path.write_text(text, encoding="utf-8")
    started = time.process_time()
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.read_node(path)
    assert time.process_time() - started < 2.0
    assert str(err.value) == (
        f"{path}:4: the YAML frontmatter does not parse: anchors (&a) are not allowed (column 4)"
    )
    assert err.value.line == 4


@LOADERS
def test_an_alias_without_anchor_is_refused_too(loader: type, use_loader) -> None:
    use_loader(loader)
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(HEAD + "x: [*nothing]\n---\n", "x.md")
    assert str(err.value) == (
        "x.md:4: the YAML frontmatter does not parse: aliases (*nothing) are not allowed (column 5)"
    )


@LOADERS
@pytest.mark.parametrize(
    ("lines", "line"),
    [
        ("tags: " + "[" * 100_000 + "]" * 100_000, 4),  # flow lists (orjson refuses them: > 1024)
        ("tags:\n  " + "- " * 100_000 + "x", 5),  # block lists, nested on one line
        ("tags: " + "{a: " * 50_000 + "1" + "}" * 50_000, 4),  # flow mappings (50k: within 256 KiB)
    ],
    ids=["flow-lists", "block-lists", "flow-maps"],
)
def test_100k_deep_nesting_in_a_file_is_malformed_not_recursion(
    loader: type, use_loader, lines: str, line: int
) -> None:
    use_loader(loader)
    started = time.process_time()
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(f"{HEAD}{lines}\n---\n", "deep.md")
    assert time.process_time() - started < 2.0
    assert err.value.line == line
    assert str(err.value).startswith(f"deep.md:{line}: the YAML frontmatter does not parse: ")
    assert f"nested deeper than {MAX_DEPTH} levels of lists and objects" in str(err.value)


@LOADERS
def test_depth_limit_is_exact_in_yaml(loader: type, use_loader) -> None:
    use_loader(loader)
    ok = nodefile.loads(f"{HEAD}x: {'[' * MAX_DEPTH}1{']' * MAX_DEPTH}\nhand: written\n---\n", "x.md")
    assert ok.extra["x"] == _nested(MAX_DEPTH)
    with pytest.raises(MalformedNodeFileError, match=r"x\.md:4: .*nested deeper than 64 levels"):
        nodefile.loads(f"{HEAD}x: {'[' * 65}1{']' * 65}\nhand: written\n---\n", "x.md")


def test_depth_limit_is_exact_in_json_lines() -> None:
    ok = nodefile.loads(f"{HEAD}x: {'[' * MAX_DEPTH}1{']' * MAX_DEPTH}\n---\n", "x.md")
    assert ok.extra["x"] == _nested(MAX_DEPTH)
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(f"{HEAD}x: {'[' * 65}1{']' * 65}\n---\n", "x.md")
    assert str(err.value) == (
        "x.md:4: node 'a': field 'x' nests deeper than 64 levels of lists and objects (got [[[[...]]]])"
    )


def test_huge_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "huge.md"
    body = "x" * (MAX_FILE_BYTES + 10)
    path.write_text(HEAD + "---\n" + body, encoding="utf-8")
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.read_node(path)
    assert str(err.value) == f"{path}: the file is over the limit of 4 MiB"
    text = HEAD + "---\n" + body
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(text, "huge.md")
    assert str(err.value) == f"huge.md: the file is {len(text):,} bytes, over the limit of 4 MiB"


def test_huge_frontmatter_is_refused() -> None:
    fm = 'id: "a"\nlayer: "self"\nnote: "' + "y" * MAX_FRONTMATTER_BYTES + '"'
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(f"---\n{fm}\n---\nbody\n", "fm.md")
    assert str(err.value) == f"fm.md: the frontmatter is {len(fm):,} bytes, over the limit of 256 KiB"
    # Without a closing fence the search stops at the end of the (bounded) file.
    with pytest.raises(MalformedNodeFileError, match="the frontmatter has no closing '---' line"):
        nodefile.loads(HEAD + "x: 1\n" * 1000, "open.md")


def test_an_integer_too_long_for_python_is_a_problem_not_a_crash() -> None:
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(f"{HEAD}big: {'7' * 5000}\nhand: written\n---\n", "x.md")
    assert err.value.problems[0].line == 4
    assert err.value.problems[0].message.startswith("value of 'big' cannot be read: Exceeds the limit")


def test_invalid_yaml_says_it_does_not_parse_what_and_where() -> None:
    text = "---\nid: kp_1\nlayer: knowledge\ntitle: a: b\n---\n"
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(text, "notes/x.md")
    assert str(err.value) == (
        "notes/x.md:4: the YAML frontmatter does not parse: "
        "mapping values are not allowed in this context (column 9)"
    )
    assert err.value.problems == [
        FileProblem(
            4,
            "the YAML frontmatter does not parse: mapping values are not allowed in this context (column 9)",
        )
    ]


# -- the API ---------------------------------------------------------------------------


def test_100k_deep_extra_through_the_api_names_the_field() -> None:
    node = Node(id="a", layer="self", extra={"x": _nested(100_000)})
    with pytest.raises(InvalidNodeError) as err:
        validate(node)
    assert err.value.field == "x"
    assert str(err.value) == (
        "node 'a': field 'x' nests deeper than 64 levels of lists and objects (got [[[[...]]]])"
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tags", _nested(100_000), "must be a list of strings"),
        ("condition_space", {"k": _nested(100_000)}, "nests deeper than 64 levels"),
        ("temporal", _nested(65), "nests deeper than 64 levels"),
        ("verification_history", [{"k": _nested(100_000)}], "nests deeper than 64 levels"),
    ],
)
def test_deep_values_in_known_fields_name_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(InvalidNodeError) as err:
        validate(Node(id="a", layer="self", **{field: value}))
    assert err.value.field == field
    assert f"node 'a': field {field!r} {message}" in str(err.value)


def test_cyclic_and_shared_structures_are_refused_fast() -> None:
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(InvalidNodeError, match="field 'loop' nests deeper than 64 levels"):
        validate(Node(id="a", layer="self", extra={"loop": cyclic}))
    # A "billion laughs" built in memory: 10 levels of 10 references to one list.
    laughs: list = ["lol"] * 10
    for _ in range(9):
        laughs = [laughs] * 10
    started = time.process_time()
    with pytest.raises(InvalidNodeError, match="field 'lol' is larger than the frontmatter limit of 256 KiB"):
        validate(Node(id="a", layer="self", extra={"lol": laughs}))
    assert time.process_time() - started < 1.0


def test_api_values_that_would_make_a_file_too_large_are_refused() -> None:
    with pytest.raises(InvalidNodeError, match="field 'body' is larger than the file limit of 4 MiB"):
        validate(Node(id="a", layer="self", body="x" * (MAX_FILE_BYTES + 1)))
    # Each field fits, together they do not: refused when the file is made.
    wide = Node(id="a", layer="self", extra={f"k{i}": "v" * 60_000 for i in range(5)})
    validate(wide)
    with pytest.raises(InvalidNodeError) as err:
        nodefile.dumps(wide)
    assert str(err.value).startswith("node 'a': the frontmatter would be ")
    assert str(err.value).endswith("over the limit of 256 KiB (largest field: 'k0')")
    # A body of 1.5M three-byte characters is within the character bound, not the byte one.
    wide_body = Node(id="a", layer="self", body="中" * 1_500_000)
    validate(wide_body)
    with pytest.raises(
        InvalidNodeError, match=r"the file would be 4,500,0\d\d bytes, over the limit of 4 MiB"
    ):
        nodefile.dumps(wide_body)


def test_dump_value_refuses_unvalidated_deep_values() -> None:
    with pytest.raises(InvalidNodeError, match="value nests deeper than 64 levels"):
        nodefile.dump_value(_nested(10_000))
    assert nodefile.dump_value(_nested(MAX_DEPTH)) == "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH


def test_a_store_with_hostile_files_opens_fast_and_reports_them(tmp_path: Path) -> None:
    from md_cg import MdCG

    root = tmp_path / "memory"
    with MdCG(root) as store:
        store.add(Node(id="good", layer="self", body="fine"))
    (root / "self" / "bomb.md").write_text(_bomb(), encoding="utf-8")
    (root / "self" / "deep.md").write_text(f"{HEAD}tags: {'[' * 100_000}{']' * 100_000}\n---\n")
    started = time.process_time()
    with MdCG(root) as store:
        assert store.get("good").body == "fine"
        unreadable = {f.path: f.detail for f in store.health().findings if f.kind == "unreadable_file"}
    assert time.process_time() - started < 2.0
    assert set(unreadable) == {"self/bomb.md", "self/deep.md"}
    assert "anchors (&a) are not allowed" in unreadable["self/bomb.md"]
    assert "nested deeper than 64 levels" in unreadable["self/deep.md"]


# -- numbers the writer cannot write back --------------------------------------------------------

_NUMBER_FILES = {
    "big_count": (
        "access_count: 999999999999999999999999",
        "field 'access_count' must be a non-negative 64-bit integer (got 999999999999999999999999)",
    ),
    "u64_count": (
        "access_count: 18446744073709551615",
        "field 'access_count' must be a non-negative 64-bit integer (got 18446744073709551615)",
    ),
    "big_extra": (
        "mine: 999999999999999999999999",
        "field 'mine' holds the integer 999999999999999999999999, outside the range a node file stores "
        "(-2**63 to 2**64 - 1) "
        "(got 999999999999999999999999)",
    ),
    "over_u64_yaml": (
        "mine: [1, 18446744073709551616]",
        "field 'mine' holds the integer 18446744073709551616, outside the range a node file stores "
        "(-2**63 to 2**64 - 1) (got [1, 18446744073709551616])",
    ),
    "below_min": (
        "mine: -9223372036854775809",
        "field 'mine' holds the integer -9223372036854775809, outside the range a node file stores "
        "(-2**63 to 2**64 - 1) "
        "(got -9223372036854775809)",
    ),
    "hex": (
        "mine: 0xFFFFFFFFFFFFFFFFFFFF",
        "field 'mine' holds the integer 1208925819614629174706175, outside the range a node file stores "
        "(-2**63 to 2**64 - 1) "
        "(got 1208925819614629174706175)",
    ),
    "inf": (
        "mine: .inf",
        "field 'mine' holds the non-finite number inf, which a node file cannot store (got inf)",
    ),
    "nan": (
        "mine: .nan",
        "field 'mine' holds the non-finite number nan, which a node file cannot store (got nan)",
    ),
    "spatial_inf": (
        "spatial: .inf",
        "field 'spatial' holds the non-finite number inf, which a node file cannot store (got inf)",
    ),
    "nested_inf": (
        'condition_space: {"a": [1, .inf]}',
        "field 'condition_space' holds the non-finite number inf, which a node file cannot store "
        "(got {'a': [1, inf]})",
    ),
}


@pytest.mark.parametrize("header", ["id: {name}\nlayer: self", 'id: "{name}"\nlayer: "self"'])
def test_numbers_a_node_file_cannot_store_make_the_file_unreadable_naming_the_field(
    tmp_path: Path, header: str
) -> None:
    """Before, such a file was read and then refused every later edit (whatever the edit changed).

    Session 25: with a header of JSON values (the engine's own layout), the
    lines that are JSON were read by orjson, which turned an integer beyond 64
    bits into a float without a word; the file was read, and the number lost
    its digits on the next write."""
    from md_cg import MdCG

    root = tmp_path / "memory"
    with MdCG(root) as store:
        store.add(Node(id="good", layer="self", body="fine"))
    for name, (line, _) in _NUMBER_FILES.items():
        head = header.format(name=name)
        (root / "self" / f"{name}.md").write_text(f"---\n{head}\n{line}\n---\nx\n")
    edge = "mine: [18446744073709551615, -9223372036854775808, 1.5e+308]"
    head = header.format(name="edge")
    (root / "self" / "edge.md").write_text(f"---\n{head}\n{edge}\n---\nx\n")
    expected = {
        f"self/{name}.md": f"node {name!r}: {message}" for name, (_, message) in _NUMBER_FILES.items()
    }
    with MdCG(root) as store:
        report = store.sync()
        assert dict(report.malformed) == expected
        assert store.ids() == ["edge", "good"]
        store.update("edge", body="edited")  # the largest storable numbers round-trip
        assert store.get("edge").extra == {"mine": [2**64 - 1, -(2**63), 1.5e308]}
    assert f"\n{edge}\n" in (root / "self" / "edge.md").read_text()
    shutil.rmtree(root / ".mdcg")  # a cold open reads the files through the fast reader
    with MdCG(root) as store:
        unreadable = {f.path: f.detail for f in store.health().findings if f.kind == "unreadable_file"}
        assert unreadable == expected
        assert store.ids() == ["edge", "good"]


def test_the_api_refuses_unstorable_numbers_before_writing() -> None:
    for node, field in (
        (Node(id="a", layer="self", body="x", access_count=2**63), "access_count"),
        (Node(id="a", layer="self", body="x", extra={"n": {"k": [float("nan")]}}), "n"),
        (Node(id="a", layer="self", body="x", condition_space={"w": -(2**63) - 1}), "condition_space"),
        (Node(id="a", layer="self", body="x", extra={"n": 2**64}), "n"),
    ):
        with pytest.raises(InvalidNodeError) as info:
            validate(node)
        assert info.value.field == field


def test_a_lone_surrogate_in_the_body_or_a_reason_is_named(tmp_path: Path) -> None:
    """add, add_many and update raised a bare UnicodeEncodeError, forget a TypeError (and
    left an empty audit shard); now each names the field and the node, nothing written."""
    from md_cg import MdCG

    with MdCG(tmp_path / "m") as s:
        s.add(id="c", body="fine")
        before = {p: p.read_bytes() for p in (tmp_path / "m").rglob("*.md")}
        calls = {
            "add": lambda: s.add(id="a", body="x\ud800y"),
            "add_many": lambda: s.add_many([Node(id="b", body="ab\udc80")]),
            "update": lambda: s.update("c", body="bad \ud800"),
        }
        for name, call in calls.items():
            with pytest.raises(InvalidNodeError) as err:
                call()
            assert err.value.field == "body", name
            at = {"add": 1, "add_many": 2, "update": 4}[name]
            node = {"add": "a", "add_many": "b", "update": "c"}[name]
            assert str(err.value) == (
                f"node {node!r}: field 'body' holds a lone surrogate at character {at} "
                "and cannot be stored as UTF-8"
            )
        with pytest.raises(InvalidNodeError, match=r"^forget\('c'\): the reason holds a lone surrogate"):
            s.forget("c", "why \ud800")
        assert {p: p.read_bytes() for p in (tmp_path / "m").rglob("*.md")} == before
        audit = tmp_path / "m" / ".mdcg" / "audit"
        assert not audit.exists() or [p for p in audit.iterdir() if p.stat().st_size == 0] == []
        assert s.get("c").body == "fine" and sorted(s.ids()) == ["c"]


_HUGE_LINES = {
    "importance": "importance: 1" + "0" * 400,
    "created_at": "created_at: 1" + "0" * 400,
    "expires_at": "expires_at: 1" + "0" * 400,
    "edges": 'edges: [{"target": "a", "type": "similar", "confidence": 1' + "0" * 400 + "}]",
    "foo": "foo: 0x" + "f" * 4000,  # YAML: an integer of 4,817 digits (repr() refuses over 4,300)
    "edges ": "edges: [{target: 0x" + "f" * 4000 + ", type: similar}]",  # an id that is no string
}


@pytest.mark.parametrize("field", sorted(_HUGE_LINES))
def test_a_huge_integer_in_a_file_is_that_file_s_problem_only(tmp_path: Path, field: str) -> None:
    """Without a snapshot (a fresh clone), one hand-written file with an integer too large for a
    float (or for repr) is reported by path; the store opens, searches, syncs and rebuilds."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="good", layer="self", body="a good memory about cats"))
    (root / "self" / "h1.md").write_text(f'---\nid: "h1"\nlayer: "self"\n{_HUGE_LINES[field]}\n---\nbody\n')
    shutil.rmtree(root / ".mdcg")
    with MdCG(root) as s:
        assert [r.id for r in s.search("cats")[0]] == ["good"]
        [finding] = s.health().findings
        assert (finding.kind, finding.path) == ("unreadable_file", "self/h1.md")
        assert field in finding.detail or "integer" in finding.detail, finding.detail
        [(path, why)] = s.sync().malformed
        assert path == "self/h1.md" and f"field {field.strip()!r}" in why
        assert s.rebuild_index().nodes == 1 and s.ids() == ["good"]


@pytest.mark.parametrize(
    ("changes", "field", "shown"),
    [
        ({"importance": 16**4000}, "importance", "<an integer of 4817 digits>"),
        ({"importance": 10**400}, "importance", "1000000"),
        ({"created_at": 10**400}, "created_at", "too large for an instant"),
        ({"extra": {"foo": 16**4000}}, "foo", "<an integer of 4817 digits>"),
        ({"edges": [{"target": "a", "confidence": 10**400}]}, "edges", "not a finite number"),
    ],
)
def test_a_huge_integer_given_to_add_is_an_invalid_node_error(
    tmp_path: Path, changes: dict, field: str, shown: str
) -> None:
    with MdCG(tmp_path / "s") as s:
        with pytest.raises(InvalidNodeError, match=re.escape(shown)) as caught:
            s.add(Node(id="x", layer="self", body="b", **changes))
        assert caught.value.field == field and s.ids() == []


def test_huge_integers_given_to_the_api_are_invalid_arguments(tmp_path: Path) -> None:
    from md_cg.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"ttl_seconds must be .* got <an integer of 5001 digits>"):
        MdCG(tmp_path / "s", ttl_seconds=10**5000)
    with MdCG(tmp_path / "s") as s:
        s.add(Node(id="x", layer="self", body="kiwi"))
        with pytest.raises(InvalidArgumentError, match=r"since must be .* got <an integer"):
            s.search("kiwi", since=10**5000)
        assert [r.id for r in s.search("kiwi", k=10**5000)[0]] == ["x"]
        assert [i.id for i in s.inject("kiwi", max_items=10**400)] == ["x"]
        with pytest.raises(InvalidArgumentError, match="now must be seconds"):
            s.reflect("kiwi", [], None, now=10**400)


def test_bad_values_in_api_calls_are_named_errors_with_bounded_messages(tmp_path: Path) -> None:
    from md_cg.errors import InvalidArgumentError, MdcgError

    with MdCG(tmp_path / "s") as s:
        s.add(Node(id="a1", layer="self", body="x"))
        calls = [
            lambda: s.update([["x"]], body="y"),  # type: ignore[arg-type]
            lambda: s.neighbours("a1", types=5),  # type: ignore[arg-type]
            lambda: s.verify("a1", "ev", 10**5000),  # type: ignore[arg-type]
            lambda: s.search("x", tag=10**5000),  # type: ignore[arg-type]
            lambda: s.search("x", layer=10**5000),  # type: ignore[arg-type]
            lambda: s.record_access(["a1"], mode=10**5000),  # type: ignore[arg-type]
            lambda: s.neighbours("a1", direction=10**5000),  # type: ignore[arg-type]
            lambda: s.move("a1", 10**5000),  # type: ignore[arg-type]
            lambda: s.inject(10**5000),  # type: ignore[arg-type]
            lambda: s.search("x", layer="x" * 2_000_000),
            lambda: s.get("x" * 2_000_000),
        ]
        for call in calls:
            with pytest.raises(MdcgError) as caught:
                call()
            assert len(str(caught.value)) < 400, str(caught.value)[:100]
        with pytest.raises(InvalidArgumentError, match="types must be a list of edge types"):
            s.neighbours("a1", types=5)  # type: ignore[arg-type]
