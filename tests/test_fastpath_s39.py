"""The ``key: <JSON>`` fast path reads a frontmatter as YAML does, or leaves it to the YAML
reader; the fences are python-frontmatter's (session 39, attacker 7: f1, f3, f4).

f1 (high, scope): the fast path looked at each line alone. A YAML flow mapping spread over
lines -- ``{agent_scope: "bob"`` / ``,sensitivity: "secret"`` / ``} #x: 0`` -- passed (each
odd key failed to parse as YAML alone, and a failure counted as "no other reading"): md-cg
read three odd keys, YAML reads ``agent_scope: bob, sensitivity: secret``; alice's search and
get returned bob's secret. Now a bare key must be a plain name, and every character and number
YAML reads otherwise sends the frontmatter to the YAML reader. A differential test (a seeded
generator of odd frontmatters) holds the fast path to the YAML reader's reading.

f3 (high, scope): an opening fence ``--- `` (trailing space) or ``----`` opened a frontmatter to
python-frontmatter and Jekyll, none to md-cg: a shared memory holding ``agent_scope: bob`` in
its body. Now ``---`` followed by spaces or tabs is a fence, and a line python-frontmatter takes
for one but md-cg does not (``----``, ``---\\x0c``) makes the file malformed, named.

f4 (medium): ``id: 2025`` read as the id ``"2025"`` when another line sent the frontmatter to
YAML, and as the integer 2025 (a malformed file) when every line was JSON.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import frontmatter
import pytest
import yaml

from md_cg import MdCG, Scope, fastread, nodefile
from md_cg.errors import MalformedNodeFileError, NodeNotFoundError

HEAD = '---\nid: "a"\nlayer: "knowledge"\n'
FLOW = '{agent_scope: "bob"\n,sensitivity: "secret"\n} #x: 0'
YAML_SAYS = "the YAML frontmatter does not parse"


def _read(text: str, **defaults: str) -> Any:
    try:
        return nodefile.loads(text, "a.md", **defaults)
    except MalformedNodeFileError as exc:
        return f"error: {exc}"


def _store_with(root: Path, files: dict[str, str]) -> None:
    with MdCG(root):
        pass
    (root / "knowledge").mkdir(exist_ok=True)
    for name, text in files.items():
        (root / "knowledge" / name).write_text(text, encoding="utf-8", newline="")


# -- f1: a flow mapping over lines -------------------------------------------------


def test_a_flow_mapping_over_lines_is_read_as_yaml_reads_it() -> None:
    assert yaml.safe_load(FLOW) == {"agent_scope": "bob", "sensitivity": "secret"}
    text = f"---\n{FLOW}\n---\nBob's bank PIN is 4711 zebrafish\n"
    for read in (nodefile.loads, fastread.loads):
        node = read(text, "bobsecret.md", default_id="bobsecret", default_layer="knowledge")
        assert (node.id, node.agent_scope, node.sensitivity, node.extra) == ("bobsecret", "bob", "secret", {})
    with pytest.raises(ValueError) as err:
        nodefile.parse_frontmatter_lines(FLOW)
    assert err.value.args == (1, "the key '{agent_scope' is not a plain name: the YAML reader reads the line")


def test_alice_no_longer_sees_bobs_secret_in_a_flow_mapping(tmp_path: Path) -> None:
    _store_with(tmp_path, {"bobsecret.md": f"---\n{FLOW}\n---\nBob's bank PIN is 4711 zebrafish\n"})
    with MdCG(tmp_path) as s:
        s.sync()
        e = s.entry("bobsecret")
        assert (e.agent_scope, e.sensitivity) == ("bob", "secret")
    with MdCG(tmp_path, scope=Scope(agent="alice", max_sensitivity="normal")) as a:
        assert [r.id for r in a.search("zebrafish PIN")[0]] == []
        with pytest.raises(NodeNotFoundError):
            a.get("bobsecret")
    with MdCG(tmp_path, scope=Scope(agent="bob", max_sensitivity="secret")) as b:
        assert [r.id for r in b.search("zebrafish PIN")[0]] == ["bobsecret"]


@pytest.mark.parametrize(
    "lines",
    [
        '[agent_scope: "bob"\n] #x: 0',  # a flow sequence of one pair over lines
        '{agent_scope: "bob",\n"x": 1}',
        '? agent_scope\n: "bob"',  # a complex key
        '!!str agent_scope: "bob"',
        "'agent_scope': \"bob\"",
        '"agent_scope" : "bob"',
        'agent_scope:\t"bob"',
        'x: "a"\n  agent_scope: "b"',  # indentation: a continuation
        '%YAML 1.1\n---\nagent_scope: "bob"',
        '\ufeffagent_scope: "bob"',
    ],
)
def test_odd_keys_take_the_yaml_reader(lines: str) -> None:
    """Each of these lines once was (or could be) read alone; whatever YAML makes of the
    frontmatter, md-cg now reads the same or refuses the file."""
    with pytest.raises(ValueError):
        nodefile.parse_frontmatter_lines(lines)
    assert _read(f"{HEAD}{lines}\n---\nbody\n") == _yaml_only(f"{HEAD}{lines}\n---\nbody\n")


# -- f4 and the values YAML reads otherwise ---------------------------------------------


def test_a_number_in_a_string_field_reads_as_written_on_both_paths(tmp_path: Path) -> None:
    for text in ("---\nid: 2025\n---\nThe 2025 review\n", "---\nid: 2025\ntitle: year review\n---\nx\n"):
        for read in (nodefile.loads, fastread.loads):
            assert read(text, "y.md", default_id="y", default_layer="knowledge").id == "2025"
    node = nodefile.loads('---\nid: "t"\nlayer: "knowledge"\ntags: [1, 2.50, "x"]\n---\nv\n')
    assert node.tags == ["1", "2.50", "x"]
    meta = nodefile.parse_frontmatter('id: "t"\nlayer: true\nmodality: 12\nverification_basis: 1.5').meta
    assert meta == {"id": "t", "layer": "true", "modality": "12", "verification_basis": "1.5"}
    _store_with(
        tmp_path,
        {
            "y2024.md": "---\nid: 2024\ntitle: year review\n---\nThe 2024 review\n",
            "y2025.md": "---\nid: 2025\n---\nThe 2025 review\n",
            "t.md": "---\ntags: [1, 2.50]\n---\nversion tags\n",
        },
    )
    with MdCG(tmp_path) as s:
        s.sync()
        assert sorted(s.ids()) == ["2024", "2025", "t"]
        assert s.get("t").tags == ["1", "2.50"]
        assert [f.kind for f in s.health().findings] == []


@pytest.mark.parametrize(
    ("line", "extra"),
    [
        ("x: 1e5", {"x": "1e5"}),
        ("x: 1E-5", {"x": "1E-5"}),
        ("x: 1.5e5", {"x": "1.5e5"}),
        ("x: [1, 2.5e3]", {"x": [1, "2.5e3"]}),
        ('x: {"a": -3e2}', {"x": {"a": "-3e2"}}),
        ('x: "b\x85ob"', {"x": "b ob"}),  # NEL: a YAML line break, folded
        ('x: "a\u2028 b"', {"x": "a\u2028b"}),
        ('x: "a\u2029b"', {"x": "a\u2029b"}),
        ('x: "a\ufeffb"', {"x": "a\ufeffb"}),
        ("x: [1,\t2]", {"x": [1, 2]}),
        ('x: "y"\t', {"x": "y"}),
    ],
)
def test_values_yaml_reads_otherwise_take_the_yaml_reader(line: str, extra: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        nodefile.parse_frontmatter_lines(f'id: "a"\n{line}')
    text = f"{HEAD}{line}\n---\nbody\n"
    assert fastread.fast_node(text) is None
    assert nodefile.loads(text, "a.md").extra == extra
    assert fastread.loads(text, "a.md").extra == extra


def test_a_float_both_read_alike_stays_on_the_fast_path() -> None:
    assert nodefile.parse_frontmatter_lines("x: 1.5E+5\ny: [1.0e-07]") == {"x": 150000.0, "y": [1e-07]}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('x: "a\x7fb"', f"a.md:4: {YAML_SAYS}: control characters are not allowed: U+007F (column 6)"),
        ('x: "a\x9fb"', f"a.md:4: {YAML_SAYS}: control characters are not allowed: U+009F (column 6)"),
        ("\x0c", f"a.md:4: {YAML_SAYS}: control characters are not allowed: U+000C (column 1)"),
        (
            "\t",
            f"a.md:4: {YAML_SAYS}: found character that cannot start any token (column 1), "
            "while scanning for the next token",
        ),
        (
            'x: "\\ud83d\\ude00"',
            f"a.md:4: {YAML_SAYS}: found invalid Unicode character escape code (column 7), "
            "while parsing a quoted scalar from line 4, column 4",
        ),
    ],
)
def test_characters_yaml_refuses_make_the_file_malformed(line: str, reason: str) -> None:
    """A DEL or C1 control raw in a value, a form feed or a tab alone on a line, an escaped
    surrogate pair: YAML refuses the frontmatter; the fast path read it (a form-feed line was a
    blank line to it, the pair one character)."""
    text = f"{HEAD}{line}\n---\nbody\n"
    assert _read(text) == f"error: {reason}"
    assert fastread.fast_node(text) is None


def test_what_the_writer_writes_still_takes_the_fast_path() -> None:
    text = (
        f'{HEAD}importance: 0.8\nconfidence: 1.0e-07\ntags: ["python", "release 5e"]\n'
        'created_at: "2026-11-30T23:59:20.123456Z"\nx: ["n\\u0085l", "\\u2028", 1.5e+300, -2]\n'
        "---\nbody\n"
    )
    meta = nodefile.parse_frontmatter_lines(text.split("---\n")[1].rstrip("\n"))
    assert meta["x"] == ["n\x85l", "\u2028", 1.5e300, -2] and meta["confidence"] == 1e-07
    assert fastread.fast_node(text) == nodefile.loads(text)
    assert fastread.fast_node(text) is not None
    assert nodefile.parse_frontmatter_lines('"on": 1\n"my key": "x"') == {"on": 1, "my key": "x"}
    # a hex id is no number; a string that looks like one sends the frontmatter to the YAML
    # reader, which reads it the same
    meta = nodefile.parse_frontmatter_lines('id: "kp_0e8a"\nx: "kp-1.5e+5"')
    assert meta == {"id": "kp_0e8a", "x": "kp-1.5e+5"}
    text = f'{HEAD}tags: ["release 1e5"]\n---\nbody\n'
    assert fastread.fast_node(text) is None
    assert nodefile.loads(text).tags == ["release 1e5"]


# -- f3: fences ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "--- \nagent_scope: bob\nsensitivity: secret\n---\nthe safe code is 1234 quokka\n",
        "---\t\nagent_scope: bob\nsensitivity: secret\n---  \nthe safe code is 1234 quokka\n",
        "--- \r\nagent_scope: bob\r\nsensitivity: secret\r\n--- \r\nthe safe code is 1234 quokka\r\n",
        "\ufeff---  \nagent_scope: bob\nsensitivity: secret\n---\nthe safe code is 1234 quokka\n",
    ],
)
def test_a_fence_with_trailing_blanks_opens_and_closes_a_frontmatter(text: str) -> None:
    bobs = {"agent_scope": "bob", "sensitivity": "secret"}
    assert frontmatter.loads(text.removeprefix("\ufeff")).metadata == bobs
    for read in (nodefile.loads, fastread.loads):
        node = read(text, "sp.md", default_id="sp", default_layer="knowledge")
        assert (node.agent_scope, node.sensitivity) == ("bob", "secret")
        assert node.body == "the safe code is 1234 quokka"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "----\nagent_scope: bob\n----\nthe alarm code is 9876 quokka\n",
            "four.md:1: line 1 is '----', which other tools (python-frontmatter, Jekyll) take for a "
            "frontmatter fence; md-cg opens a frontmatter only with '---' (spaces or tabs may follow): "
            "write '---', or start the note with another line",
        ),
        (
            "---\x0c\nagent_scope: bob\n---\nx\n",
            "four.md:1: line 1 is '---\\x0c', which other tools (python-frontmatter, Jekyll) take for a "
            "frontmatter fence; md-cg opens a frontmatter only with '---' (spaces or tabs may follow): "
            "write '---', or start the note with another line",
        ),
        (
            "-----------\nno frontmatter meant\n",
            "four.md:1: line 1 is '-----------', which other tools (python-frontmatter, Jekyll) take for "
            "a frontmatter fence; md-cg opens a frontmatter only with '---' (spaces or tabs may follow): "
            "write '---', or start the note with another line",
        ),
        (
            "\n  \n---\nagent_scope: bob\n---\nthe alarm code\n",
            "four.md:3: line 3 is '---' after blank space, which python-frontmatter takes for a "
            "frontmatter fence; md-cg opens a frontmatter only on line 1: remove the blank space "
            "before it, or start the note with another line",
        ),
        (
            " ---\nagent_scope: bob\n---\nthe alarm code\n",
            "four.md:1: line 1 is '---' after blank space, which python-frontmatter takes for a "
            "frontmatter fence; md-cg opens a frontmatter only on line 1: remove the blank space "
            "before it, or start the note with another line",
        ),
        (
            "---\nagent_scope: bob\n----\nthe alarm code\n---\nmore\n",
            "four.md:3: line 3 is '----', which other tools (python-frontmatter, Jekyll) take for the "
            "closing fence of the frontmatter; md-cg closes it only with '---' (spaces or tabs may "
            "follow): write '---' there",
        ),
        (
            "---\r\nagent_scope: bob\r\n---\xa0\r\nx\r\n",
            "four.md:3: line 3 is '---\\xa0', which other tools (python-frontmatter, Jekyll) take for the "
            "closing fence of the frontmatter; md-cg closes it only with '---' (spaces or tabs may "
            "follow): write '---' there",
        ),
    ],
)
def test_a_line_other_tools_take_for_a_fence_makes_the_file_malformed(text: str, reason: str) -> None:
    for read in (nodefile.loads, fastread.loads):
        with pytest.raises(MalformedNodeFileError) as err:
            read(text, "four.md", default_id="four", default_layer="knowledge")
        assert str(err.value) == reason


def test_a_line_no_tool_takes_for_a_fence_is_a_note() -> None:
    text = "---x\nagent_scope: bob\n---\nbody\n"
    assert frontmatter.loads(text).metadata == {}
    node = nodefile.loads(text, "n.md", default_id="n", default_layer="knowledge")
    assert (node.agent_scope, node.body) == (None, text.removesuffix("\n"))


def test_the_fence_files_are_reported_and_bobs_is_bobs(tmp_path: Path) -> None:
    _store_with(
        tmp_path,
        {
            "sp.md": "--- \nagent_scope: bob\nsensitivity: secret\n---\nthe safe code is 1234 quokka\n",
            "four.md": "----\nagent_scope: bob\n----\nthe alarm code is 9876 quokka\n",
        },
    )
    with MdCG(tmp_path) as s:
        rep = s.sync()
        assert sorted(s.ids()) == ["sp"]
        assert [p for p, _ in rep.malformed] == ["knowledge/four.md"]
        assert [(f.kind, f.path) for f in s.health().findings] == [("unreadable_file", "knowledge/four.md")]
    with MdCG(tmp_path, scope=Scope(agent="alice", max_sensitivity="normal")) as a:
        assert [r.id for r in a.search("quokka code")[0]] == []


def test_fences_agree_with_python_frontmatter() -> None:
    """Where md-cg reads a file, python-frontmatter's default handler finds the same
    frontmatter (or none where md-cg reads none)."""
    firsts = ["---", "--- ", "---\t", "----", "---x", "--", "- --", " ---", "\n---"]
    firsts += ["---\x0c", "---\xa0", "---\r"]
    for first in firsts:
        for close in firsts:
            text = f"{first}\nagent_scope: bob\n{close}\nbody\n"
            ours = _read(text, default_id="a", default_layer="knowledge")
            try:
                theirs = frontmatter.loads(text).metadata
            except yaml.YAMLError:
                theirs = "error"
            if isinstance(ours, str):
                continue  # refused: no reading to differ
            scope = ours.agent_scope if ours.extra.get("agent_scope") is None else ours.extra["agent_scope"]
            assert theirs == ({"agent_scope": "bob"} if scope == "bob" else {}), (first, close, ours)


# -- the differential test -------------------------------------------------------------


def _yaml_only(text: str) -> Any:
    """md-cg's reading of ``text`` with the YAML reader alone (no ``key: <JSON>`` fast path)."""
    saved = nodefile._json_lines

    def refuse(fm: str, first_line: int = 1) -> nodefile.Frontmatter:
        raise ValueError(first_line, "yaml only")

    nodefile._json_lines = refuse  # type: ignore[assignment]
    try:
        return _read(text)
    finally:
        nodefile._json_lines = saved  # type: ignore[assignment]


KEYS = [
    "agent_scope", "sensitivity", "id", "layer", "tags", "title", "x", '"agent_scope"', "'agent_scope'",
    "{agent_scope", ",sensitivity", "} #x", "[agent_scope", "]", "? agent_scope", "", "...", "%YAML 1.1",
    "!!str agent_scope", "<<", "&a agent_scope", "*a", "- agent_scope", " agent_scope", "\tagent_scope",
    "\ufeffagent_scope", "agent_scope ", "@type", "on", "2024", "a #b", "|", ">", "#", "agent\x85scope",
    '"agent\\u005fscope"', '"sensitivity"',
]  # fmt: skip
SEPARATORS = [": ", ": ", ": ", ":", ":\t", ": \t", " : ", ":  ", ":\x0c"]
VALUES = [
    '"bob"', '"secret"', '"alice"', "2024", "2.50", "1e5", "1.5e5", "1.5E+5", "-0", "1.0e+400", '"b\x85ob"',
    '"a\u2028b"', '"a\\tb"', '"\\ud83d\\ude00"', "[1, 2.50]", '["x", "y"]', '{"a": 1}', "null", "true", "yes",
    '"x" # c', "bob", '"x"\t', '"x"  ', "{agent_scope: bob", "[", "]", "}", "|", ">", "'x'", '"a\x7fb"',
    '{"agent_scope": "bob"}', '["a",\t"b"]', '"\\/"', '"a\ufeffb"', "[[[1]]]", "", '"bob"}', '"bob",',
    '"bob"\r', '"x\\u0085"', '"a\\bb\\f\\r\\n"', '"\\u00E9\\u0000"', '{"k\\"": 1e-5}', "-0.0", "[1.0e-07]",
]  # fmt: skip
WHOLE_LINES = ["", "   ", "\t", "\x0c", "\x85", "\u2028", "# comment", "...", "  continued", "- item", "}"]


def _random_frontmatter(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 5)):
        if rng.random() < 0.15:
            lines.append(rng.choice(WHOLE_LINES))
        else:
            lines.append(rng.choice(KEYS) + rng.choice(SEPARATORS) + rng.choice(VALUES))
    fm = "\n".join(lines)
    if rng.random() < 0.2:  # a character dropped in anywhere
        at = rng.randrange(len(fm) + 1)
        fm = fm[:at] + rng.choice("{}[],#&*!|>'\"?:-. \t\x0c\x85\u2028\u2029\ufeff\r%@`\\") + fm[at:]
    return fm


def _mutated_written(rng: random.Random) -> str:
    """A frontmatter the writer writes, with one character inserted or replaced."""
    fm = (
        'id: "kp_3f9a2c"\nlayer: "knowledge"\nimportance: 0.8\ntags: ["python", "zh"]\n'
        'agent_scope: "bob"\nsensitivity: "secret"\nedges: [{"target": "kp_1", "type": "relates_to", '
        '"confidence": 1.0e-07}]\ncreated_at: "2026-11-30T23:59:20.123456Z"'
    )
    at = rng.randrange(len(fm) + 1)
    cut = rng.choice((0, 1))
    return fm[:at] + rng.choice("{}[],#&*!|>'\"?:-. \t\x0c\x85\u2028\ufeff\r%e1\n") + fm[at + cut :]


FIELDS = ("id", "agent_scope", "sensitivity", "layer", "tags")


def test_the_fast_path_reads_every_frontmatter_as_the_yaml_reader_does() -> None:
    """A seeded generator of odd frontmatters (keys, separators, values, whole lines and
    characters YAML reads otherwise) and of writer-written ones with one character changed:
    wherever the ``key: <JSON>`` lines read a frontmatter, md-cg's YAML reader reads the same
    mapping, and yaml.safe_load (where it reads one) the same scope; the file reads the same
    through the full reader, the fast reader and the YAML reader alone, or is refused."""
    rng = random.Random(39)
    accepted = 0
    for n in range(6000):
        fm = _random_frontmatter(rng) if n % 2 else _mutated_written(rng)
        try:
            fast = nodefile._json_lines(fm, 2)
        except ValueError:
            fast = None
        text = f"---\n{fm}\n---\nbody\n"
        node, by_yaml = _read(text), _yaml_only(text)
        # the same node, or both refused (the messages may differ: which reader spoke)
        assert node == by_yaml or (isinstance(node, str) and isinstance(by_yaml, str)), repr(fm)
        by_fast = fastread.fast_node(text)
        assert by_fast is None or by_fast == node, repr(fm)
        if fast is None:
            continue
        accepted += 1
        try:
            slow = nodefile._yaml(fm, 2)
        except ValueError as exc:
            raise AssertionError(f"{fm!r}: the YAML reader refuses it: {exc}") from None
        assert (fast.meta, fast.lines, [p.line for p in fast.problems]) == (
            slow.meta,
            slow.lines,
            [p.line for p in slow.problems],
        ), repr(fm)
        try:
            theirs = yaml.safe_load(fm)
        except yaml.YAMLError:
            continue
        if isinstance(theirs, dict) and not fast.problems:
            for field in ("agent_scope", "sensitivity"):
                assert theirs.get(field) == fast.meta.get(field), repr(fm)
        if not isinstance(node, str):
            assert [getattr(node, f) for f in FIELDS] == [getattr(by_yaml, f) for f in FIELDS]
    assert accepted > 600  # the generator reaches the fast path often enough to test it
