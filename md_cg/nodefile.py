"""Reading and writing node files: ``key: <JSON>`` frontmatter plus the body.

File layout::

    ---
    id: "kp_3f9a2c"
    layer: "knowledge"
    importance: 0.8
    created_at: "2026-11-30T23:59:20.123456Z"
    ---
    <body>

* The first line is ``---`` (spaces or tabs may follow); the frontmatter ends
  at the **first** following line of three or more ``-`` and whitespace, which
  must be ``---`` (spaces or tabs may follow; a trailing ``\\r`` is tolerated
  on both). A line python-frontmatter takes for a fence and md-cg does not
  makes the file malformed (:func:`fence_end`).
  Everything after that line is the body, unchanged, even when it contains
  ``---`` lines of its own, except for the **final newline**: it belongs to
  the file, not to the body. The writer ends a non-empty body with one
  ``\\n``; the reader takes one final ``\\n`` off. So every file written ends
  with a newline, and reading gives back exactly the body that was written.
  A file whose first line ends in ``\\r\\n`` (an editor on Windows, a git
  checkout with ``core.autocrlf``) is read with ``\\n`` line ends in its
  body too (:func:`lf_lines`).
* Each frontmatter line is ``key: <JSON value>``, read so only when YAML reads
  it the same (:func:`_json_lines`; anything else goes to the YAML reader).
  JSON is a subset of YAML's flow style, and the writer only produces JSON
  that YAML 1.1 readers (PyYAML, Obsidian) read to the same values: floats
  always have a dot and a signed exponent (``1.0e-07``), characters YAML does
  not accept raw (DEL,
  C1 controls, U+2028/U+2029, U+FEFF, U+FFFE/U+FFFF) are ``\\u`` escaped, and
  keys YAML would read as something other than a plain string (``on``,
  ``null``, ``yes``, keys with spaces or colons, ...) are double-quoted.
  Times are ISO 8601 UTC strings.
* A frontmatter that is not in this form but is YAML (a person wrote it, e.g.
  in Obsidian) is read with a bounded YAML loader (:data:`YAML_LOADER`,
  built on PyYAML's SafeLoader): no anchors or aliases, at most
  :data:`~md_cg.node.MAX_DEPTH` levels of nesting. Plain scalars of the
  string fields are read as written (``id: 2024`` is the id ``"2024"``), a
  single string is a list of one for list fields (``tags: python``).
* A file is at most :data:`~md_cg.node.MAX_FILE_BYTES` bytes and its
  frontmatter at most :data:`~md_cg.node.MAX_FRONTMATTER_BYTES`; the reader
  never reads more than that, and the writer refuses a node that needs more.

Parsing goes through python-frontmatter with :class:`MdcgHandler`, so
``frontmatter.load(path, handler=MdcgHandler())`` also works.

This module imports only :mod:`md_cg.node` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import json
import math
import operator
import re
from pathlib import Path
from typing import IO, Any, NamedTuple

import frontmatter
import orjson
import yaml
from frontmatter.default_handlers import YAMLHandler
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, CollectionStartEvent
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.nodes import Node as YamlNode
from yaml.reader import ReaderError
from yaml.resolver import Resolver
from yaml.scanner import ScannerError

from .errors import FileProblem, InvalidNodeError, MalformedNodeFileError
from .node import (
    FIELD_ORDER,
    INT_END,
    INT_MIN,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_FRONTMATTER_BYTES,
    TIME_FIELDS,
    Edge,
    Node,
    build_node,
    format_instant,
    show,
)

#: A line git writes around a conflict (``<<<<<<< ours``, ``=======``, ``>>>>>>> theirs``).
_CONFLICT_LINE = re.compile(r"^(?:<{7}|={7}|>{7})(?: |\r?$)", re.MULTILINE)
_SAFE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SEPARATOR_LINE = re.compile(r"^={7}\r?$", re.MULTILINE)
_CLOSE_LINE = re.compile(r"^>{7}(?: |\r?$)", re.MULTILINE)


def _whole_conflict(text: str) -> bool:
    """A text that is a git conflict from its first line: ``<<<<<<<`` there, then a
    ``=======`` line and a ``>>>>>>>`` line after it (a note that merely starts with
    the marker's characters is a note)."""
    if not text.startswith("<<<<<<<") or not _CONFLICT_LINE.match(text):
        return False
    sep = _SEPARATOR_LINE.search(text)
    return sep is not None and _CLOSE_LINE.search(text, sep.end()) is not None


# Plain scalars YAML 1.1 resolves to booleans or null.
_YAML_SPECIAL = frozenset(["y", "n", "yes", "no", "on", "off", "true", "false", "null"])
# Characters YAML will not take raw inside a double-quoted scalar, or reads as
# line breaks (U+0085, U+2028, U+2029). orjson already escapes C0 controls.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


#: the dumped form of short strings (layers, kinds, tags, condition keys repeat from node to node)
_STR_CACHE: dict[str, str] = {}
_STR_CACHE_MAX = 8192
_STR_CACHE_LEN = 48


def _dump_str(s: str) -> str:
    out = _STR_CACHE.get(s)
    if out is None:
        out = _dump_new_str(s)
        if len(s) <= _STR_CACHE_LEN and type(s) is str:
            if len(_STR_CACHE) >= _STR_CACHE_MAX:
                _STR_CACHE.clear()
            _STR_CACHE[s] = out
    return out


def _dump_new_str(s: str) -> str:
    try:
        out = orjson.dumps(s).decode("utf-8")
    except orjson.JSONEncodeError:
        raise InvalidNodeError(
            f"string {s[:40]!r}... contains a lone surrogate and cannot be stored as UTF-8",
            value=s,
        ) from None
    if out.isascii() and "\x7f" not in out:
        return out  # the only YAML-unsafe ASCII character orjson leaves raw is DEL
    return _YAML_UNSAFE.sub(_escape, out)


def dump_float(v: float) -> str:
    """A float in a form both JSON and YAML 1.1 read back as the same float."""
    if not math.isfinite(v):
        raise InvalidNodeError(f"non-finite number {v!r} cannot be stored", value=v)
    r = repr(v)
    if "e" not in r:
        return r
    mantissa, exponent = r.split("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent[0] not in "+-":
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}"


def _dump_int(v: int) -> str:
    if not INT_MIN <= v < INT_END:
        raise InvalidNodeError(f"integer {v} is outside the range -2**63 to 2**64 - 1", value=v)
    return str(int(v))


def _dump_list(v: list[Any] | tuple[Any, ...], depth: int) -> str:
    return "[" + ", ".join([dump_value(x, depth) for x in v]) + "]"


def _dump_dict(v: dict[Any, Any], depth: int) -> str:
    parts = []
    for k, x in v.items():
        if type(k) is not str:
            raise InvalidNodeError(f"object key {show(k)} is not a string", value=v)
        parts.append(f"{_dump_str(k)}: {dump_value(x, depth)}")
    return "{" + ", ".join(parts) + "}"


_SCALAR_DUMPERS: dict[type, Any] = {
    str: _dump_str,
    float: dump_float,
    int: _dump_int,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}
_NESTED_DUMPERS: dict[type, Any] = {list: _dump_list, tuple: _dump_list, dict: _dump_dict}
_BASES = (bool, str, int, float, list, tuple, dict)


def dump_value(v: Any, _depth: int = 0) -> str:
    """Serialise one frontmatter value as YAML-safe JSON on a single line.

    Refuses (:class:`InvalidNodeError`) values that JSON cannot carry and
    values nested deeper than :data:`~md_cg.node.MAX_DEPTH` levels.
    """
    kind: type = type(v)
    dumper = _SCALAR_DUMPERS.get(kind)
    if dumper is not None:
        return dumper(v)
    if kind not in _NESTED_DUMPERS:
        # Subclasses of the JSON types (IntEnum, OrderedDict, str subclasses...).
        base = next((b for b in _BASES if isinstance(v, b)), None)
        if base is None:
            raise InvalidNodeError(
                f"value {show(v)} of type {type(v).__name__} cannot be stored in frontmatter", value=v
            )
        if base in _SCALAR_DUMPERS:
            return _SCALAR_DUMPERS[base](v)
        kind = base
    if _depth >= MAX_DEPTH:
        raise InvalidNodeError(f"value nests deeper than {MAX_DEPTH} levels of lists and objects")
    return _NESTED_DUMPERS[kind](v, _depth + 1)


_KEY_CACHE: dict[str, str] = {}


def dump_key(key: str) -> str:
    """A frontmatter key, double-quoted when YAML would not read it as that string."""
    out = _KEY_CACHE.get(key)
    if out is None:
        if _SAFE_KEY.match(key) and key.lower() not in _YAML_SPECIAL:
            out = key
        else:
            out = _dump_str(key)
        if len(_KEY_CACHE) < 10_000:
            _KEY_CACHE[key] = out
    return out


def dump_frontmatter(meta: dict[str, Any]) -> str:
    """The frontmatter lines (without the ``---`` fences), joined by ``\\n``."""
    lines = []
    for key, value in meta.items():
        try:
            lines.append(f"{dump_key(key)}: {dump_value(value)}")
        except InvalidNodeError as exc:
            raise InvalidNodeError(
                f"field {key!r}: {exc}", field=key, value=value, node_id=meta.get("id")
            ) from None
    return "\n".join(lines)


_KEY_DECODER = json.JSONDecoder()
_loads = orjson.loads
#: A run of 19+ digits: an integer orjson may read as a float (below -2**63 or
#: above 2**64 - 1; it keeps 19 digits of the rest of them exact).
LONG_DIGITS = re.compile(r"[0-9]{19}")


# Fields whose plain scalars are taken as written (`id: 2024` is "2024").
_STRING_FIELDS = frozenset(["id", "layer", "modality", "verification_basis"])
_STRING_LIST_FIELDS = frozenset(["tags", "non_applicable_conditions"])
_RAW_FIELDS = _STRING_FIELDS | _STRING_LIST_FIELDS
#: Raw characters YAML reads otherwise than JSON on a ``key: <JSON>`` line: a tab (JSON
#: whitespace; YAML refuses it in places), DEL and C1 controls (YAML refuses them), U+0085,
#: U+2028 and U+2029 (YAML line breaks: ``"b\x85ob"`` is ``"b ob"`` to YAML), U+FEFF, U+FFFE,
#: U+FFFF. Other C0 controls: JSON refuses them raw, and a blank line is spaces only.
_NOT_AS_IN_JSON = re.compile("[\t\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
#: A C1 control in UTF-8 (``\xc2`` then ``\x80``-``\x9f``).
_C1_UTF8 = re.compile(b"\xc2[\x80-\x9f]")
#: A ``\\u`` escape of a UTF-16 surrogate: JSON joins a pair into one character
#: (``"\\ud83d\\ude00"``), libyaml refuses it, PyYAML keeps two lone surrogates.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB]")
#: An ``e`` or ``E`` after a digit that is not a word's (``kp_0e8a``) and before a digit or
#: a sign: where a JSON number has its exponent. The letter comes first, so that the search
#: runs at the speed of a ``find`` of it (~1 µs a frontmatter; ``[0-9][eE]`` takes ~10).
_DIGIT_E = (
    re.compile("e(?<=[0-9]e)(?<![A-Za-z_][0-9]e)(?=[0-9+-])"),
    re.compile("E(?<=[0-9]E)(?<![A-Za-z_][0-9]E)(?=[0-9+-])"),
)
_NUMBER_CHARS = frozenset("0123456789.")


def yaml_reads_text_otherwise(fm: str) -> bool:
    """Whether ``fm`` holds a character or a number that makes a YAML reader read a
    ``key: <JSON>`` line otherwise than JSON does: a character of :data:`_NOT_AS_IN_JSON`, a
    :data:`_SURROGATE_ESCAPE`, or a number YAML 1.1 reads as a string
    (:func:`_yaml_string_number`). A frontmatter that does is read by the YAML reader alone
    (:func:`parse_frontmatter`), as every YAML tool reads it. About 1.5 µs for a frontmatter
    of the writer's in ASCII, 3.5 with CJK text (on a loaded 2-core VM, where the fast reader
    takes ~32 µs a file; one regular expression over the text took ~10 µs)."""
    if "\t" in fm or "\x7f" in fm:
        return True
    if not fm.isascii():
        if "\u2028" in fm or "\u2029" in fm or "\ufeff" in fm or "\ufffe" in fm or "\uffff" in fm:
            return True
        # C1 controls: in UTF-8 they follow a \xc2, a find (a regular expression over the text
        # takes ~10 µs; the encoding ~1)
        data = fm.encode("utf-8", "surrogatepass")
        if b"\xc2" in data and _C1_UTF8.search(data) is not None:
            return True
    if "\\u" in fm and _SURROGATE_ESCAPE.search(fm) is not None:
        return True
    return _yaml_string_number(fm)


def _yaml_string_number(fm: str) -> bool:
    """Whether ``fm`` may hold a JSON number YAML 1.1 reads as a string (``1e5``, ``1E-5``,
    ``1.5e5``: an exponent after no dot, or without its sign; the writer writes
    ``1.0e+05``). An ``e`` inside a word (``kp_0e8a``) is no number; one inside a string that
    looks like one (``"x 1e5"``) counts: that frontmatter is then read by the YAML reader, to
    the same values."""
    for letter, pattern in zip("eE", _DIGIT_E, strict=True):
        found = pattern.search(fm) if letter in fm else None
        while found is not None:
            at = start = found.start()
            while start and fm[start - 1] in _NUMBER_CHARS:
                start -= 1
            word = start and (fm[start - 1].isalnum() or fm[start - 1] == "_")  # in a string
            if not word and ("." not in fm[start:at] or fm[at + 1].isdigit()):
                return True
            found = pattern.search(fm, at + 1)
    return False


def _raw_field_differs(key: str, value: Any) -> bool:
    """Whether the YAML reader reads the JSON ``value`` of a string field or string list
    (``id``, ``tags``, ...; not a string itself) otherwise: it takes their plain scalars as
    written, so ``id: 2025`` is the id ``"2025"`` and ``tags: [1, 2.50]`` is
    ``["1", "2.50"]``, where JSON reads numbers (before session 39 a frontmatter whose every
    line was JSON was refused for it, ``docs/format.md`` notwithstanding). The fast reader
    needs no such look: the node model refuses any value of those fields but a string, a
    list of strings or null, and the full reader then reads the file."""
    if key in _STRING_FIELDS:
        return value is not None
    strings = type(value) is list and all(type(x) is str or x is None for x in value)
    return not (value is None or strings)


class Frontmatter(NamedTuple):
    """A parsed frontmatter: the mapping, the line of each key, and what is wrong.

    ``problems`` are keys given twice and values that cannot be constructed;
    ``unbounded`` names the keys whose values the parser does not vouch for:
    they may nest deeper than :data:`~md_cg.node.MAX_DEPTH` or hold a number
    a file cannot store (:func:`~md_cg.node.number_problem`; JSON read by
    orjson does only in a value with a run of 19+ digits, re-read by the
    standard parser to keep such an integer whole). The node model walks
    those; every other value is known to be within the limits already.
    """

    meta: dict[str, Any]
    lines: dict[str, int]
    problems: list[FileProblem]
    unbounded: frozenset[str] = frozenset()


def _json_lines(fm: str, first_line: int = 1) -> Frontmatter:
    """Parse ``key: <JSON>`` lines (see :class:`Frontmatter`) that YAML reads the same.

    Raises ``ValueError(line, reason)`` at the first line that is not ``key: <JSON>``
    or that a YAML reader could read otherwise (:func:`yaml_reads_text_otherwise`,
    :func:`_line_key`, :func:`_raw_field_differs`): the caller then reads the
    whole frontmatter as YAML, so that md-cg reads a file as every YAML tool does.
    """
    if yaml_reads_text_otherwise(fm):
        at = _NOT_AS_IN_JSON.search(fm) or _SURROGATE_ESCAPE.search(fm)
        number = first_line + (fm.count("\n", 0, at.start()) if at else 0)
        raise ValueError(number, "a character, escape or number YAML reads otherwise than JSON")
    meta: dict[str, Any] = {}
    lines: dict[str, int] = {}
    problems: list[FileProblem] = []
    unbounded = set()
    crlf = "\r" in fm
    # split("\n"), not splitlines(): a YAML line break other than \n is refused above.
    for number, raw in enumerate(fm.split("\n"), start=first_line):
        line = raw[:-1] if crlf and raw.endswith("\r") else raw
        if crlf and "\r" in line:
            raise ValueError(number, "a '\\r' inside the line (YAML reads a line break)")
        key, _, value_text = line.partition(":")
        if key not in _PLAIN_KEYS or not value_text.startswith(" "):
            read = _line_key(line, number)  # the rest: blank lines, quoted keys, new keys, errors
            if read is None:
                continue
            key, value_text = read
        try:
            value = _loads(value_text)
        except orjson.JSONDecodeError:
            raise ValueError(number, f"value of {key!r} is not JSON") from None
        if type(value) is not str:
            if key in _RAW_FIELDS and _raw_field_differs(key, value):
                raise ValueError(number, f"the YAML reader reads the value of {key!r} as written")
            if LONG_DIGITS.search(value_text):
                # orjson reads an integer beyond 64 bits as a float, silently; the
                # standard parser keeps it whole, and the node model refuses it by
                # its field (what a YAML frontmatter gets too).
                value = json.loads(value_text)
                unbounded.add(key)
        if key in meta:
            problems.append(FileProblem(number, f"key {key!r} appears again (first on line {lines[key]})"))
        if len(value_text) > MAX_DEPTH and value_text.count("[") + value_text.count("{") > MAX_DEPTH:
            unbounded.add(key)  # orjson nests up to 1024 levels; ours is MAX_DEPTH
        meta[key] = value
        lines[key] = number
    return Frontmatter(meta, lines, problems, frozenset(unbounded))


#: Bare keys :func:`_line_key` found plain names (a field's, an extra key's): every line of
#: a cold open asks, and a set lookup (42 ns) is cheaper than a regular expression (212 ns).
_PLAIN_KEYS: set[str] = set()


def _line_key(line: str, number: int) -> tuple[str, str] | None:
    """The key of a ``key: <JSON>`` line and the text of its value, when YAML reads that key as
    the same string; else ``ValueError(number, reason)``. A bare key must be a plain name
    (``[A-Za-z_][A-Za-z0-9_]*``, at the start of the line) and a quoted one a JSON string, each
    followed by ``": "``. Any other key is left to the YAML reader: a merge key (``<<``,
    refused: :class:`_BoundedComposer`), a tag (``!!str agent_scope`` is ``agent_scope``), a
    single-quoted key, an anchor, a complex key, a list item, a comment, an indented line (the
    line before continues), a flow mapping over several lines (``{agent_scope: "bob"`` then
    ``,sensitivity: "secret"`` then ``}``: each line failed to parse as YAML alone, and before
    session 39 md-cg read three odd keys -- the memory shared -- where YAML reads
    ``agent_scope: bob``), a document marker, a directive. None for a blank line (empty or
    spaces: blank to both; a form feed is not blank to YAML)."""
    if not line.strip(" "):
        return None
    if line[0] == '"':
        try:
            key, end = _KEY_DECODER.raw_decode(line)
        except json.JSONDecodeError:
            raise ValueError(number, "unterminated quoted key") from None
        if not line.startswith(": ", end):
            raise ValueError(number, "expected ': ' after the quoted key")
        return key, line[end + 2 :]
    key, _, value_text = line.partition(":")
    if key not in _PLAIN_KEYS:
        if not _SAFE_KEY.match(key):
            raise ValueError(number, f"the key {key!r} is not a plain name: the YAML reader reads the line")
        if len(_PLAIN_KEYS) < 10_000:
            _PLAIN_KEYS.add(key)
    if not value_text.startswith(" "):
        raise ValueError(number, f"expected ': ' after the key {key!r}")
    return key, value_text


def parse_frontmatter_lines(fm: str) -> dict[str, Any]:
    """Parse ``key: <JSON>`` lines; raise ``ValueError(line_no, reason)`` on the first bad line."""
    return _json_lines(fm).meta


# -- the bounded YAML loader ------------------------------------------------------


#: Why a frontmatter holding a YAML merge key is refused (:class:`_BoundedComposer`).
MERGE_KEY_REFUSED = "merge keys (<<) are not allowed"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _refusal(what: str, event: Any) -> ComposerError:
    """A composer error at ``event``'s place (its mark comes from either YAML parser)."""
    return ComposerError(None, None, what, event.start_mark)


class _BoundedComposer(Composer):
    """Composes YAML with no anchors or aliases, no merge keys and at most MAX_DEPTH levels.

    Aliases are what make a 382-byte "billion laughs" document expand to
    gigabytes; refusing them (and anchors) when their event arrives costs
    nothing. Depth is checked before a list or mapping is entered, so a
    100,000-deep ``[[[`` stops at level MAX_DEPTH + 1 of a value (the
    document's own mapping does not count).

    A merge key (a plain ``<<`` or ``!!merge`` key, at any depth) is refused too: YAML
    readers (PyYAML's ``safe_load``, Obsidian) merge its mapping into the one holding it
    -- ``<<: {agent_scope: bob}`` is ``agent_scope: bob`` to them -- while md-cg's
    constructor keeps mapping keys as written; before session 38 md-cg read that memory
    as shared and served it to every agent. A quoted ``"<<"`` is a key like any other,
    to YAML and md-cg alike (md-cg writes such an extra key quoted).
    """

    _depth = 0

    # The parser half of the loader (pure-Python or libyaml) supplies these.
    peek_event: Any

    def compose_node(self, parent: YamlNode | None, index: Any) -> YamlNode | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            raise _refusal(f"aliases (*{event.anchor}) are not allowed", event)
        if event.anchor is not None:
            raise _refusal(f"anchors (&{event.anchor}) are not allowed", event)
        if self._depth > MAX_DEPTH and isinstance(event, CollectionStartEvent):
            raise _refusal(f"nested deeper than {MAX_DEPTH} levels of lists and objects", event)
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if index is None and isinstance(parent, MappingNode) and node is not None and node.tag == _MERGE_TAG:
            raise ComposerError(None, None, MERGE_KEY_REFUSED, node.start_mark)  # a key: see the class
        return node


class BoundedSafeLoader(_BoundedComposer, yaml.SafeLoader):
    """PyYAML's SafeLoader without anchors and aliases, nesting bounded by MAX_DEPTH."""

    def fetch_flow_collection_start(self, TokenClass: type) -> None:
        # Each open bracket is a possible simple key the scanner keeps looking
        # ahead for; stopping at the limit keeps a 100,000-deep '[[[' linear.
        if self.flow_level > MAX_DEPTH:
            raise ScannerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels of lists and objects", self.get_mark()
            )
        super().fetch_flow_collection_start(TokenClass)


try:
    from yaml._yaml import CParser

    class _CBoundedLoader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        """:class:`BoundedSafeLoader` with libyaml's scanner and parser (about 5x faster)."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    #: The loader hand-written frontmatter is read with.
    YAML_LOADER: type = _CBoundedLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    YAML_LOADER = BoundedSafeLoader

_NULL_TAG = "tag:yaml.org,2002:null"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"


def _yaml_problem(exc: yaml.YAMLError, first_line: int, fm: str = "") -> tuple[int, str]:
    """(line, reason) of a YAML error: what is wrong, the column, and the context."""
    if isinstance(exc, ReaderError) and isinstance(exc.character, int) and chr(exc.character) in fm:
        # a character YAML refuses (DEL, C1, a form feed): its first one is the culprit (the
        # error's position counts bytes with libyaml, characters with PyYAML)
        at = fm.index(chr(exc.character))
        column = at - fm.rfind("\n", 0, at)
        return first_line + fm.count("\n", 0, at), (
            f"the YAML frontmatter does not parse: {exc.reason}: U+{exc.character:04X} (column {column})"
        )
    mark = getattr(exc, "problem_mark", None)
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if "nesting depth" in problem:  # libyaml's own limit (1000) met before ours
        problem = f"nested deeper than {MAX_DEPTH} levels of lists and objects"
    mark = mark or context_mark
    if mark is None:
        return first_line, f"the YAML frontmatter does not parse: {problem}"
    reason = f"the YAML frontmatter does not parse: {problem} (column {mark.column + 1})"
    if context:
        reason += f", {context}"
        if context_mark is not None and (context_mark.line, context_mark.column) != (mark.line, mark.column):
            reason += f" from line {context_mark.line + first_line}, column {context_mark.column + 1}"
    return mark.line + first_line, reason


def _plain(value: Any) -> Any:
    """A constructed YAML value made JSON-shaped (dates become ISO strings, keys strings)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _construct(loader: Any, node: YamlNode, raw: bool = False) -> Any:
    """The value of a composed YAML node; ``raw``: plain scalars as written."""
    if isinstance(node, ScalarNode):
        if raw:
            return None if node.tag == _NULL_TAG else node.value
        return _plain(loader.construct_object(node, deep=True))
    if isinstance(node, SequenceNode) and node.tag == _SEQ_TAG:
        return [_construct(loader, item, raw) for item in node.value]
    if isinstance(node, MappingNode) and node.tag == _MAP_TAG:
        out = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, ScalarNode) else str(_construct(loader, key_node))
            out[key] = _construct(loader, value_node)
        return out
    return _plain(loader.construct_object(node, deep=True))


def _yaml(fm: str, first_line: int) -> Frontmatter:
    """Parse a YAML frontmatter; raise ``ValueError(line, reason)`` when it does not parse."""
    loader = YAML_LOADER(fm)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise ValueError(*_yaml_problem(exc, first_line, fm)) from None
    finally:
        loader.dispose()
    if root is None:
        return Frontmatter({}, {}, [])
    if not isinstance(root, MappingNode):
        raise ValueError(first_line, "the frontmatter is not a mapping of keys to values")
    meta: dict[str, Any] = {}
    lines: dict[str, int] = {}
    problems: list[FileProblem] = []
    for key_node, value_node in root.value:
        number = key_node.start_mark.line + first_line
        if not isinstance(key_node, ScalarNode):
            problems.append(FileProblem(number, "a key must be a plain string, not a list or object"))
            continue
        key = key_node.value
        if key in meta:
            problems.append(FileProblem(number, f"key {key!r} appears again (first on line {lines[key]})"))
        try:
            value = _construct(loader, value_node, raw=key in _STRING_FIELDS or key in _STRING_LIST_FIELDS)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            reason = _yaml_problem(exc, first_line)[1] if isinstance(exc, yaml.YAMLError) else str(exc)
            problems.append(FileProblem(number, f"value of {key!r} cannot be read: {reason}"))
            continue
        meta[key] = value
        lines[key] = number
    # No aliases and a bounded composer: every value is within the size limits.
    # YAML numbers are not (.inf, .nan, 0xFFFFFFFFFFFFFFFFFF): every value but
    # a string is walked by the node model.
    return Frontmatter(meta, lines, problems, frozenset(k for k, v in meta.items() if type(v) is not str))


def parse_frontmatter(fm: str, first_line: int = 1) -> Frontmatter:
    """Parse a frontmatter (see :class:`Frontmatter`).

    The canonical ``key: <JSON>`` lines first; anything else is read as YAML
    with :data:`YAML_LOADER`. Raises ``ValueError(line, reason)`` when the
    text is neither: the reason is YAML's (what is wrong, and the column),
    since YAML is the general form. Lines are numbered from ``first_line``
    (2 in a file, whose line 1 is the opening fence).
    """
    try:
        return _json_lines(fm, first_line)
    except ValueError:
        if not fm.strip():
            return Frontmatter({}, {}, [])
        return _yaml(fm, first_line)


#: A line python-frontmatter's default YAML handler (and Jekyll, Hugo) takes for a fence:
#: three or more ``-``, then whitespace (Python's, which holds ``\\r``, ``\\x0c``, U+00A0 ...).
_FENCE_LIKE = re.compile(r"^-{3,}[^\S\n]*$", re.MULTILINE)
#: A fence to md-cg: ``---``, then spaces or tabs (and the ``\\r`` of a CRLF line end).
_FENCE = re.compile(r"---[ \t]*\r?\Z")
#: :data:`_FENCE_LIKE` from the newline before the line (``\\n---``: a prefix the search finds
#: as fast as a ``find``, where ``^`` makes it try every character): the dashes after the
#: third, and the blanks after them.
_CLOSE_LIKE = re.compile(r"\n---(-*)([^\S\n]*)(?=\n|\Z)")
_FENCE_TAIL = re.compile(r"[ \t]*\r?\Z")


class FenceError(ValueError):
    """A line that other tools take for a fence but md-cg does not (``line``: 1-based)."""

    def __init__(self, reason: str, line: int) -> None:
        super().__init__(reason)
        self.line = line


def fence_end(text: str) -> int:
    """Where the frontmatter of ``text`` (no byte-order mark) starts: after its opening fence,
    a first line ``---`` followed by nothing but spaces or tabs (python-frontmatter's, Jekyll's
    reading: before session 39 a ``--- `` line opened no frontmatter to md-cg, and the memory
    -- ``agent_scope: bob`` in its body -- was shared). Raises ``ValueError`` when there is
    none, :class:`FenceError` when the first line only looks like one (``----``, ``---\\x0c``)
    or when one follows blank space (python-frontmatter strips the text): other tools read a
    frontmatter there, md-cg refuses the file rather than read none."""
    if text.startswith("---\n"):
        return 4
    first = text.partition("\n")[0]
    if _FENCE.match(first):
        if len(first) == len(text):
            raise ValueError("the frontmatter has no closing '---' line")
        return len(first) + 1
    if _FENCE_LIKE.match(first):
        seen = first.rstrip("\r")
        raise FenceError(
            f"line 1 is {seen!r}, which other tools (python-frontmatter, Jekyll) take "
            "for a frontmatter fence; md-cg opens a frontmatter only with '---' (spaces or tabs may "
            "follow): write '---', or start the note with another line",
            1,
        )
    rest = text.lstrip()  # python-frontmatter strips the text first (Hugo skips blank lines too)
    fence = _FENCE_LIKE.match(rest) if len(rest) < len(text) else None
    if fence is not None:
        line, seen = text.count("\n", 0, len(text) - len(rest)) + 1, fence.group().rstrip("\r")
        raise FenceError(
            f"line {line} is {seen!r} after blank space, which python-frontmatter takes for a "
            "frontmatter fence; md-cg opens a frontmatter only on line 1: remove the blank space "
            "before it, or start the note with another line",
            line,
        )
    raise ValueError("the file does not start with a '---' line")


#: A top-level ``id:`` line of a frontmatter (:func:`tolerant_id`)
_ID_LINE = re.compile(r"^id:(.*)$", re.MULTILINE)


def tolerant_id(text: str, stem: str) -> str | None:
    """The id a node file's ``text`` (no byte-order mark) names although the file cannot be
    read as a memory, or None when that cannot be told (session 43: an unscoped ``get`` of
    ``x`` refused while any broken file named ``x.md`` stood, whatever memory it held --
    :func:`md_cg.engine.broken_copy`). When its frontmatter parses (another field is what
    is wrong), its ``id`` -- ``stem`` without one --; else the value of its one top-level
    ``id:`` line, that line read alone as YAML. No fence, no closing fence, two ``id:``
    lines, or a value that is no string: None."""
    try:
        start = fence_end(text)
    except ValueError:
        return None
    end = _CLOSE_LIKE.search(text, start - 1)
    if end is None:
        return None
    fm = text[start : end.start()]
    value: Any = None
    try:
        parsed = parse_frontmatter(fm)
        value = None if parsed.problems else parsed.meta.get("id", stem)
    except ValueError:
        pass
    if value is None:
        lines = _ID_LINE.findall(fm)
        if len(lines) != 1:
            return None
        try:
            value = _yaml("id:" + lines[0], 1).meta.get("id")
        except ValueError:
            return None
    return value if isinstance(value, str) and value else None


class MdcgHandler(YAMLHandler):
    """python-frontmatter handler for md-cg files.

    Keeps YAMLHandler's ``---`` fences but splits at the *first* closing
    fence only, keeps the body (minus the file's final newline), and
    reads/writes ``key: <JSON>`` lines (falling back to the bounded YAML
    loader for hand-written frontmatter).
    """

    #: A line python-frontmatter's default handler takes for a fence (``^-{3,}\\s*$``).
    FM_BOUNDARY = _FENCE_LIKE
    START_DELIMITER = END_DELIMITER = "---"

    def detect(self, text: str) -> bool:
        """Whether the first line looks like a fence, as python-frontmatter's YAML handler
        sees it (``----`` and ``---\\x0c`` included: :meth:`split` refuses those)."""
        return _FENCE_LIKE.match(text) is not None

    def split(self, text: str) -> tuple[str, str]:
        """Return ``(frontmatter, body)``; raise ``ValueError`` without a proper fence.

        The body loses one final ``\\n`` (the file's, see the module docstring). Fences
        are :func:`fence_end`'s.
        """
        if text.startswith("\ufeff"):
            text = text[1:]
        start = fence_end(text)
        crlf = text[start - 2 : start] == "\r\n"
        # The text is at most MAX_FILE_BYTES (see loads), so this search is bounded.
        end = _CLOSE_LIKE.search(text, start - 1)
        if end is None:
            raise ValueError("the frontmatter has no closing '---' line")
        dashes, blank = end.groups()
        if dashes or (blank and not _FENCE_TAIL.match(blank)):
            line, seen = text.count("\n", 0, end.start()) + 2, end.group()[1:].rstrip("\r")
            raise FenceError(
                f"line {line} is {seen!r}, which other tools (python-frontmatter, Jekyll) take for the "
                "closing fence of the frontmatter; md-cg closes it only with '---' (spaces or tabs "
                "may follow): write '---' there",
                line,
            )
        fm = text[start : end.start()]
        size = _utf8_size(fm, MAX_FRONTMATTER_BYTES)
        if size > MAX_FRONTMATTER_BYTES:
            raise ValueError(
                f"the frontmatter is {size:,} bytes, over the limit of {_kib(MAX_FRONTMATTER_BYTES)}"
            )
        body = text[end.end() + 1 :]
        return fm, (lf_lines(body) if crlf else body).removesuffix("\n")

    def load(self, fm: str, **kwargs: object) -> dict[str, Any]:
        return parse_frontmatter(fm).meta

    def export(self, metadata: dict[str, object], **kwargs: object) -> str:
        return dump_frontmatter(metadata)

    def format(self, post: frontmatter.Post, **kwargs: object) -> str:
        return _file_text(self.export(post.metadata), post.content)


HANDLER = MdcgHandler()


def lf_lines(text: str) -> str:
    """The text of a file written with ``\\r\\n`` line ends (its first line ends so: an
    editor on Windows, a git checkout with ``core.autocrlf``) with ``\\n`` ones: the memory
    is the same text, and a body must not carry a ``\\r`` at the end of every line into
    search results, replies and the file md-cg writes next."""
    return text.replace("\r\n", "\n")


_CRLF_FENCE = re.compile(rb"---[ \t]*\r\n")


def lf_file(data: bytes) -> bytes:
    """The bytes of a node file with ``\n`` line ends when its first line ends in ``\r\n``
    (:func:`lf_lines`' rule; the fences and frontmatter read the same either way), so that
    they compare with what md-cg writes for the memory the file holds; any other as it is."""
    return data.replace(b"\r\n", b"\n") if _CRLF_FENCE.match(data) else data


def _file_text(fm: str, body: str) -> str:
    """Fences, frontmatter and body; a non-empty body ends with the file's newline."""
    tail = f"{body}\n" if body else ""
    return f"---\n{fm}\n---\n{tail}" if fm else f"---\n---\n{tail}"


def _kib(n: int) -> str:
    return f"{n // 1024 // 1024} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def node_to_post(node: Node) -> frontmatter.Post:
    """The python-frontmatter ``Post`` for a node (metadata set directly, so keys
    such as ``content`` or ``handler`` are safe). Times are ISO 8601 strings."""
    post = frontmatter.Post(node.body)
    post.metadata = node.to_dict(iso_times=True)
    post.handler = HANDLER
    return post


def _utf8_size(text: str, limit: int) -> int:
    """The UTF-8 size of ``text``, or 0 when it is certainly within ``limit``."""
    return len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > limit else 0


# -- the one-pass writer ------------------------------------------------------------
#
# ``dumps`` writes a node's frontmatter straight from its fields, without the
# intermediate mapping of ``Node.to_dict`` and with a dumper per field. It must
# give exactly the text of the reference path, ``dump_frontmatter(node.to_dict(
# iso_times=True))`` (tests/test_write_golden.py holds it to that, byte for byte):
# anything it does not handle itself -- an error, a subclass of a JSON type, an
# edge whose extra keys shadow its own, an extra key that is also a field --
# makes it give up (:class:`_GiveUp`, or any exception), and the reference path
# then writes the text or raises its own error.


class _GiveUp(Exception):
    """The one-pass writer leaves this node to the reference path."""


def _json(v: Any, depth: int) -> str:
    """:func:`dump_value` for the exact JSON types (lists and dicts at ``depth``).

    Strings and integers inside a list or dict are dumped in the loop (no call
    per item): they are most of the items of a node's values."""
    t = type(v)
    if t is str:
        out = _STR_CACHE.get(v)
        return out if out is not None else _dump_str(v)
    if t is list:
        if depth >= MAX_DEPTH:
            raise _GiveUp
        depth += 1
        parts: list[str] = []
        add = parts.append
        for x in v:
            tx = type(x)
            if tx is str:
                out = _STR_CACHE.get(x)
                add(out if out is not None else _dump_str(x))
            elif tx is int and INT_MIN <= x < INT_END:
                add(str(x))
            else:
                add(_json(x, depth))
        return "[" + ", ".join(parts) + "]"
    if t is dict:
        if depth >= MAX_DEPTH:
            raise _GiveUp
        depth += 1
        parts = []
        add = parts.append
        for k, x in v.items():
            if type(k) is not str:
                raise _GiveUp
            key = _STR_CACHE.get(k)
            if key is None:
                key = _dump_str(k)
            if type(x) is str:
                out = _STR_CACHE.get(x)
                add(f"{key}: {out if out is not None else _dump_str(x)}")
            else:
                add(f"{key}: {_json(x, depth)}")
        return "{" + ", ".join(parts) + "}"
    if t is float:
        return dump_float(v)
    if t is int:
        return _dump_int(v)
    if t is bool:
        return "true" if v else "false"
    if v is None:
        return "null"
    raise _GiveUp


_EDGE_OWN = frozenset(["target", "type", "confidence", "verified"])


def _edge(e: Any) -> str:
    """One edge of the ``edges`` line (``Edge.to_dict`` dumped)."""
    if type(e) is not Edge or _EDGE_OWN.intersection(e.extra):
        raise _GiveUp  # a dict (not validated) or extra keys that replace the edge's own
    out = f'{{"target": {_json(e.target, 2)}, "type": {_json(e.type, 2)}'
    if e.confidence is not None:
        out += f', "confidence": {_json(e.confidence, 2)}'
    if e.verified is not None:
        out += f', "verified": {_json(e.verified, 2)}'
    for k, x in e.extra.items():
        if type(k) is not str:
            raise _GiveUp
        out += f", {_dump_str(k)}: {_json(x, 2)}"
    return out + "}"


def _time(v: Any) -> str:
    if type(v) is not float and type(v) is not int:
        raise _GiveUp  # an ISO string or a date (not validated): the reference path decides
    out = format_instant(v)
    # ISO text is digits, '-', ':', '.', 'T' and 'Z': as JSON it only needs its quotes
    # (and it is new for nearly every node: not worth a place in the string cache).
    return f'"{out}"' if type(out) is str else _json(out, 0)


#: Field name -> how its value is dumped: 0 the JSON dumper, 1 an instant, 2 the
#: edges, 3 the id (a string nearly always new: dumped without the string cache).
_FIELD_KIND = {name: 0 for name in FIELD_ORDER} | {name: 1 for name in TIME_FIELDS} | {"edges": 2, "id": 3}
_FIELD_PLAN = tuple((name, f"{dump_key(name)}: ", _FIELD_KIND[name]) for name in FIELD_ORDER)
_FIELD_SET = frozenset(FIELD_ORDER)
#: every field's value at once, by attribute: reading ``node.__dict__`` would make
#: CPython build the instance's dict, a tracked object the caller's node keeps
_FIELD_VALUES = operator.attrgetter(*FIELD_ORDER)


def _frontmatter_one_pass(node: Node) -> str:
    """The frontmatter of ``node`` straight from its fields; raises when it must give up."""
    if type(node) is not Node:
        raise _GiveUp
    lines: list[str] = []
    add = lines.append
    for (_name, prefix, kind), v in zip(_FIELD_PLAN, _FIELD_VALUES(node), strict=True):
        if v is None:
            continue
        t = type(v)
        if t is list or t is dict:
            if not v:
                continue
        elif isinstance(v, (list, dict)):
            raise _GiveUp  # subclasses: the reference path
        if kind == 0:
            add(prefix + _json(v, 0))
        elif kind == 1:
            add(prefix + _time(v))
        elif kind == 3:
            add(prefix + (_dump_new_str(v) if t is str else _json(v, 0)))
        else:
            if t is not list:
                raise _GiveUp
            add(prefix + "[" + ", ".join([_edge(e) for e in v]) + "]")
    extra = node.extra
    if type(extra) is not dict:
        raise _GiveUp
    for key, v in extra.items():
        if key in _FIELD_SET or type(key) is not str:
            raise _GiveUp
        add(f"{dump_key(key)}: {_json(v, 0)}")
    return "\n".join(lines)


def _frontmatter(node: Node) -> str:
    """The frontmatter lines of ``node``: one pass, else the reference path (and its errors)."""
    try:
        return _frontmatter_one_pass(node)
    except Exception:
        return dump_frontmatter(node.to_dict(iso_times=True))


def dumps(node: Node) -> str:
    """The full text of a node file. Validation is the caller's job (see node.validate).

    Raises :class:`InvalidNodeError` when the file would exceed
    :data:`~md_cg.node.MAX_FILE_BYTES` or its frontmatter
    :data:`~md_cg.node.MAX_FRONTMATTER_BYTES` (naming the largest field).
    The text is that of ``dump_frontmatter(node.to_dict(iso_times=True))``
    between the fences, written in one pass over the node's fields.
    """
    fm = _frontmatter(node)
    fm_size = _utf8_size(fm, MAX_FRONTMATTER_BYTES)
    if fm_size > MAX_FRONTMATTER_BYTES:
        largest = max(fm.split("\n"), key=len).partition(":")[0].strip('"')
        raise InvalidNodeError(
            f"node {node.id!r}: the frontmatter would be {fm_size:,} bytes, over the limit of "
            f"{_kib(MAX_FRONTMATTER_BYTES)} (largest field: {largest!r})",
            field=largest,
            node_id=node.id,
        )
    text = _file_text(fm, node.body)
    size = _utf8_size(text, MAX_FILE_BYTES)
    if size > MAX_FILE_BYTES:
        raise InvalidNodeError(
            f"node {node.id!r}: the file would be {size:,} bytes, over the limit of {_kib(MAX_FILE_BYTES)}",
            field="body",
            node_id=node.id,
        )
    return text


def dump_bytes(node: Node) -> bytes:
    """:func:`dumps` as the UTF-8 bytes a file holds. A lone surrogate in the body (the
    frontmatter's strings are checked as they are written) raises
    :class:`InvalidNodeError` naming ``body`` and the node, not a bare UnicodeEncodeError."""
    text = dumps(node)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        at = next((i for i, ch in enumerate(node.body) if "\ud800" <= ch <= "\udfff"), 0)
        raise InvalidNodeError(
            f"node {node.id!r}: field 'body' holds a lone surrogate at character {at} "
            "and cannot be stored as UTF-8",
            field="body",
            node_id=node.id,
        ) from None


# -- reading -------------------------------------------------------------------------


def loads(
    text: str,
    path: str | Path = "<string>",
    *,
    default_id: str | None = None,
    default_layer: str | None = None,
) -> Node:
    """Parse the text of a node file; raise :class:`MalformedNodeFileError` naming ``path``.

    ``default_id`` and ``default_layer`` stand in for a missing (or null)
    ``id``/``layer``; with either given, a file without frontmatter is a node
    whose body is the whole text (an empty or blank file is malformed: no
    text; so is one holding a NUL character: binary). Every problem of the file is reported
    together (the error's ``problems``, each with its line when known).
    """
    size = _utf8_size(text, MAX_FILE_BYTES)
    if size > MAX_FILE_BYTES:
        reason = f"the file is {size:,} bytes, over the limit of {_kib(MAX_FILE_BYTES)}"
        raise MalformedNodeFileError(path, reason)
    if not text.strip("\ufeff \t\r\n"):
        # `touch knowledge/x.md` is not a memory (and its export could not be imported)
        raise MalformedNodeFileError(path, "the file is empty: a memory needs some text")
    if _whole_conflict(text.removeprefix("\ufeff")):
        # Two whole versions (a text merge of two files added apart, or md-cg's driver
        # with versions of different scopes): read as a note without frontmatter, it
        # would be a shared memory holding both texts, whoever each belonged to.
        raise MalformedNodeFileError(
            path,
            "a git merge left two versions of the whole file (conflict markers from its first line): "
            "keep one version and remove the markers (docs/git.md, True conflicts); until then no "
            "one reads it",
            line=1,
        )
    try:
        fm, body = HANDLER.split(text)
    except ValueError as exc:
        fenced = isinstance(exc, FenceError) or HANDLER.detect(text.removeprefix("\ufeff"))
        if fenced or (default_id is None and default_layer is None):
            raise MalformedNodeFileError(path, str(exc), line=getattr(exc, "line", None)) from None
        if "\x00" in text:
            # valid UTF-8 but no note: git, editors and grep take NUL bytes for binary
            at = len(text[: text.index("\x00")].encode("utf-8"))
            raise MalformedNodeFileError(
                path, f"a binary file, not a note: no frontmatter and a NUL byte at byte {at}"
            ) from None
        note = text.removeprefix("\ufeff")
        if note.partition("\n")[0].endswith("\r"):
            note = lf_lines(note)
        fm, body = "", note.removesuffix("\n")
    try:
        meta, lines, problems, unbounded = parse_frontmatter(fm, first_line=2)
    except ValueError as exc:
        line, reason = exc.args
        marker = _CONFLICT_LINE.search(fm)
        if marker is not None:  # what a git merge without md-cg's driver leaves
            line = fm.count("\n", 0, marker.start()) + 2
            reason = (
                f"a git merge left conflict markers in the frontmatter (the first on line {line}): keep "
                "one version of each conflicting line and remove the markers (docs/git.md, True "
                "conflicts); md-cg's merge driver merges such edits itself where it is enabled "
                "(mdcg init --git; docs/git.md, Enabling the driver)"
            )
        raise MalformedNodeFileError(path, reason, line=line) from None
    for name in _STRING_LIST_FIELDS:
        if isinstance(meta.get(name), str):
            meta[name] = [meta[name]]  # `tags: python` is a list of one
    node, invalid = build_node(
        meta,
        body,
        default_id=default_id,
        default_layer=default_layer,
        bounded=meta.keys() - unbounded,
    )
    named = _named_id(node, "id" in meta or not problems, invalid)
    for bad in invalid:
        line = lines.get(bad.field) if bad.field else None
        problems.append(FileProblem(line, str(bad)))
    if problems:
        raise MalformedNodeFileError(path, problems=problems, node_id=named)
    return node


def _named_id(node: Node, read: bool, invalid: list[InvalidNodeError]) -> str | None:
    """The id a malformed file names (``MalformedNodeFileError.node_id``: ``health`` shows it):
    ``node``'s, when ``read`` (the frontmatter gave it, or gives none and every line parsed:
    the default) and valid; else None."""
    if not read or not isinstance(node.id, str) or any(bad.field == "id" for bad in invalid):
        return None
    return node.id


def read_bytes_as_text(data: bytes, path: str | Path) -> str:
    """Decode file bytes as UTF-8, naming the file when they are not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedNodeFileError(path, f"not valid UTF-8 at byte {exc.start}") from None


def read_limited(fh: IO[bytes], path: str | Path) -> bytes:
    """Read an open node file, but never more than MAX_FILE_BYTES (+1 to tell it is over)."""
    data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise MalformedNodeFileError(path, f"the file is over the limit of {_kib(MAX_FILE_BYTES)}")
    return data


def read_node(path: str | Path, *, default_id: str | None = None, default_layer: str | None = None) -> Node:
    """Read and parse one node file (see :func:`loads` for the defaults)."""
    with open(path, "rb") as fh:
        data = read_limited(fh, path)
    return loads(read_bytes_as_text(data, path), path, default_id=default_id, default_layer=default_layer)
