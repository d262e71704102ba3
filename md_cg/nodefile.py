"""Reading and writing node files: ``key: <JSON>`` frontmatter plus a byte-exact body.

File layout::

    ---
    id: "kp_3f9a2c"
    layer: "knowledge"
    importance: 0.8
    ---
    <body, byte for byte>

* The first line is exactly ``---``; the frontmatter ends at the **first**
  following line that is exactly ``---`` (a trailing ``\\r`` is tolerated).
  Everything after that line is the body, unchanged, even when it contains
  ``---`` lines of its own.
* Each frontmatter line is ``key: <JSON value>``. JSON is a subset of YAML's
  flow style, and the writer only produces JSON that YAML 1.1 readers
  (PyYAML, Obsidian) read to the same values: floats always have a dot and a
  signed exponent (``1.0e-07``), characters YAML does not accept raw (DEL,
  C1 controls, U+2028/U+2029, U+FEFF, U+FFFE/U+FFFF) are ``\\u`` escaped, and
  keys YAML would read as something other than a plain string (``on``,
  ``null``, ``yes``, keys with spaces or colons, ...) are double-quoted.
* A file whose frontmatter is not in this form but is valid YAML (a person
  wrote it by hand) is read through PyYAML and rewritten in the canonical
  form the next time the engine writes it.

Parsing goes through python-frontmatter with :class:`MdcgHandler`, so
``frontmatter.load(path, handler=MdcgHandler())`` also works.

This module imports only :mod:`md_cg.node` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import frontmatter
import orjson
import yaml
from frontmatter.default_handlers import YAMLHandler

from .errors import InvalidNodeError, MalformedNodeFileError
from .node import Node

_SAFE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Plain scalars YAML 1.1 resolves to booleans or null.
_YAML_SPECIAL = frozenset(["y", "n", "yes", "no", "on", "off", "true", "false", "null"])
# Characters YAML will not take raw inside a double-quoted scalar, or reads as
# line breaks (U+0085, U+2028, U+2029). orjson already escapes C0 controls.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
_INT_LIMIT = 2**63


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _dump_str(s: str) -> str:
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
    if not -_INT_LIMIT <= v < _INT_LIMIT:
        raise InvalidNodeError(f"integer {v} is outside the 64-bit range", value=v)
    return str(int(v))


def _dump_list(v: list[Any] | tuple[Any, ...]) -> str:
    return "[" + ", ".join([dump_value(x) for x in v]) + "]"


def _dump_dict(v: dict[Any, Any]) -> str:
    parts = []
    for k, x in v.items():
        if type(k) is not str:
            raise InvalidNodeError(f"object key {k!r} is not a string", value=v)
        parts.append(f"{_dump_str(k)}: {dump_value(x)}")
    return "{" + ", ".join(parts) + "}"


_DUMPERS: dict[type, Any] = {
    str: _dump_str,
    float: dump_float,
    int: _dump_int,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
    list: _dump_list,
    tuple: _dump_list,
    dict: _dump_dict,
}


def dump_value(v: Any) -> str:
    """Serialise one frontmatter value as YAML-safe JSON on a single line."""
    dumper = _DUMPERS.get(type(v))
    if dumper is not None:
        return dumper(v)
    # Subclasses of the JSON types (IntEnum, OrderedDict, str subclasses...).
    for base in (bool, str, int, float, list, tuple, dict):
        if isinstance(v, base):
            return _DUMPERS[base](v)
    raise InvalidNodeError(f"value {v!r} of type {type(v).__name__} cannot be stored in frontmatter", value=v)


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


def parse_frontmatter_lines(fm: str) -> dict[str, Any]:
    """Parse ``key: <JSON>`` lines; raise ``ValueError(line_no, reason)`` on the first bad line."""
    meta: dict[str, Any] = {}
    # split("\n"), not splitlines(): U+2028 & co may appear raw in values.
    for number, raw in enumerate(fm.split("\n"), start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if not line.strip():
            continue
        if line[0] == '"':
            try:
                key, end = _KEY_DECODER.raw_decode(line)
            except json.JSONDecodeError:
                raise ValueError(number, "unterminated quoted key") from None
            rest = line[end:]
            if not rest.startswith(":"):
                raise ValueError(number, "expected ':' after the quoted key")
            value_text = rest[1:]
        else:
            key, sep, value_text = line.partition(":")
            if not sep or not key or key != key.strip():
                raise ValueError(number, "expected 'key: value'")
        try:
            meta[key] = orjson.loads(value_text)
        except orjson.JSONDecodeError:
            raise ValueError(number, f"value of {key!r} is not JSON") from None
    return meta


def _yaml_plain(value: Any) -> Any:
    """Make a PyYAML value JSON-shaped (dates become ISO strings, keys strings)."""
    if isinstance(value, dict):
        return {str(k): _yaml_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_yaml_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


class MdcgHandler(YAMLHandler):
    """python-frontmatter handler for md-cg files.

    Keeps YAMLHandler's ``---`` fences but splits at the *first* closing
    fence only, keeps the body byte for byte, and reads/writes ``key: <JSON>``
    lines (falling back to PyYAML for hand-written YAML frontmatter).
    """

    FM_BOUNDARY = re.compile(r"^---\r?$", re.MULTILINE)
    START_DELIMITER = END_DELIMITER = "---"

    def detect(self, text: str) -> bool:
        return text.startswith(("---\n", "---\r\n")) or text in ("---", "---\r")

    def split(self, text: str) -> tuple[str, str]:
        """Return ``(frontmatter, body)``; raise ``ValueError`` without a proper fence."""
        if text.startswith("\ufeff"):
            text = text[1:]
        if text.startswith("---\n"):
            start = 4
        elif text.startswith("---\r\n"):
            start = 5
        else:
            raise ValueError("the file does not start with a '---' line")
        # The frontmatter may be empty: the closing fence directly follows.
        pos = start
        while True:
            nl = text.find("\n", pos)
            line_end = len(text) if nl < 0 else nl
            line = text[pos:line_end]
            if line in ("---", "---\r"):
                fm = text[start:pos]
                body = "" if nl < 0 else text[nl + 1 :]
                return fm[:-1] if fm.endswith("\n") else fm, body
            if nl < 0:
                raise ValueError("the frontmatter has no closing '---' line")
            pos = nl + 1

    def load(self, fm: str, **kwargs: object) -> dict[str, Any]:  # type: ignore[override]
        try:
            return parse_frontmatter_lines(fm)
        except ValueError as first:
            try:
                data = yaml.safe_load(fm) if fm.strip() else {}
            except yaml.YAMLError:
                line, reason = first.args
                raise ValueError(line, reason) from None
            if not isinstance(data, dict):
                raise ValueError(1, "frontmatter is not a mapping of keys to values") from None
            return _yaml_plain(data)

    def export(self, metadata: dict[str, object], **kwargs: object) -> str:
        return dump_frontmatter(metadata)

    def format(self, post: frontmatter.Post, **kwargs: object) -> str:
        fm = self.export(post.metadata)
        return f"---\n{fm}\n---\n{post.content}" if fm else f"---\n---\n{post.content}"


HANDLER = MdcgHandler()


def node_to_post(node: Node) -> frontmatter.Post:
    """The python-frontmatter ``Post`` for a node (metadata set directly, so keys
    such as ``content`` or ``handler`` are safe)."""
    post = frontmatter.Post(node.body)
    post.metadata = node.to_dict()
    post.handler = HANDLER
    return post


def dumps(node: Node) -> str:
    """The full text of a node file. Validation is the caller's job (see node.validate)."""
    return HANDLER.format(node_to_post(node))


def loads(text: str, path: str | Path = "<string>") -> Node:
    """Parse the text of a node file; raise :class:`MalformedNodeFileError` naming ``path``."""
    try:
        fm, body = HANDLER.split(text)
    except ValueError as exc:
        raise MalformedNodeFileError(path, str(exc)) from None
    try:
        meta = HANDLER.load(fm)
    except ValueError as exc:
        line, reason = exc.args
        raise MalformedNodeFileError(path, reason, line=line + 1) from None
    try:
        return Node.from_dict(meta, body)
    except InvalidNodeError as exc:
        raise MalformedNodeFileError(path, str(exc)) from None


def read_bytes_as_text(data: bytes, path: str | Path) -> str:
    """Decode file bytes as UTF-8, naming the file when they are not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedNodeFileError(path, f"not valid UTF-8 at byte {exc.start}") from None


def read_node(path: str | Path) -> Node:
    """Read and parse one node file."""
    with open(path, "rb") as fh:
        data = fh.read()
    return loads(read_bytes_as_text(data, path), path)
