"""A fast reader for node files in the exact layout the engine writes.

:func:`loads` takes the same arguments and gives the same result (the same
node, or the same :class:`~md_cg.errors.MalformedNodeFileError`) as
:func:`md_cg.nodefile.loads`, which it calls for any file it does not
recognise. It recognises the layout :func:`md_cg.nodefile.dumps` produces:

* the text starts with ``---\\n`` (no byte-order mark) and has a later line
  that is exactly ``---`` (the frontmatter ends at the first one), with no
  ``\\r`` before it;
* every frontmatter line is ``key: <JSON>`` with a plain key
  (``[A-Za-z_][A-Za-z0-9_]*``) and a single space after the colon; no blank
  lines, no quoted keys, no key twice;
* each value parses as JSON on its own (orjson, as the full reader does it)
  and the frontmatter holds at most :data:`~md_cg.node.MAX_DEPTH` brackets
  in all (so no value needs the depth walk) and at most a quarter of
  :data:`~md_cg.node.MAX_FRONTMATTER_BYTES` characters (so it is within the
  size limit whatever its encoding);
* the node built from it has no problem.

Anything else -- YAML written by a person, hand edits that break the layout,
odd quoting, CRLF line ends, duplicate keys, values that are not JSON,
invalid field values -- goes to the full reader, so errors are reported
exactly as before. What the fast path saves is the frontmatter splitter's
regular expression and the per-line Python loop of the full reader: the
lines are split by one regular expression over the whole frontmatter and
the values parsed by one ``map`` of ``orjson.loads``.

Imports :mod:`md_cg.nodefile`, :mod:`md_cg.node` and :mod:`md_cg.errors`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .node import MAX_DEPTH, MAX_FILE_BYTES, MAX_FRONTMATTER_BYTES, Node, build_node
from .nodefile import LONG_DIGITS, yaml_reads_text_otherwise
from .nodefile import loads as full_loads

__all__ = ["fast_node", "fast_nodes", "loads"]

#: One engine-written frontmatter line: a plain key, ``: ``, the JSON value.
_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*): ([^\n]*)$", re.MULTILINE)
_STRING_LIST_FIELDS = ("tags", "non_applicable_conditions")
_orjson_loads = orjson.loads


def loads(
    text: str,
    path: str | Path = "<string>",
    *,
    default_id: str | None = None,
    default_layer: str | None = None,
) -> Node:
    """:func:`md_cg.nodefile.loads`, through :func:`fast_node` when the file is in the engine's layout."""
    node = fast_node(text, default_id=default_id, default_layer=default_layer)
    if node is None:
        return full_loads(text, path, default_id=default_id, default_layer=default_layer)
    return node


def fast_node(text: str, *, default_id: str | None = None, default_layer: str | None = None) -> Node | None:
    """The node of ``text`` when it is in the engine's exact layout and valid, else None.

    None means "ask the full reader" (:func:`md_cg.nodefile.loads`), never
    "the file is bad".
    """
    return fast_nodes([text], [(default_id, default_layer)])[0]


def fast_nodes(texts: Sequence[str], defaults: Sequence[tuple[str | None, str | None]]) -> list[Node | None]:
    """:func:`fast_node` of each of ``texts`` with its ``(default_id, default_layer)``.

    Each stage (split, line match, JSON, node) runs over all the texts before
    the next: for a few dozen files that keeps each stage's code and data in
    the CPU caches, ~12 µs a file less than one file through every stage.
    """
    out: list[Node | None] = [None] * len(texts)
    split = [(i, *parts) for i, text in enumerate(texts) if (parts := _split(text)) is not None]
    parsed = []
    for i, fm, body in split:
        found = _LINE.findall(fm)
        # every line `key: value`, no value that may nest deeper than the limit, and
        # no run of 19+ digits (orjson reads an integer beyond 64 bits as a float;
        # the full reader keeps it whole and refuses it: md_cg.node.number_problem)
        # (and no character or number a YAML reader reads otherwise: the full reader leaves
        # such a frontmatter to its YAML reader; a number in a string field -- `id: 2025`,
        # YAML's "2025" -- is refused by the node model, and the full reader reads it)
        if (
            len(found) == fm.count("\n") + 1
            and fm.count("[") + fm.count("{") <= MAX_DEPTH
            and not LONG_DIGITS.search(fm)
            and not yaml_reads_text_otherwise(fm)
        ):
            parsed.append((i, found, body))
    for i, found, body in parsed:
        keys, value_texts = zip(*found, strict=True)
        try:
            values = list(map(_orjson_loads, value_texts))
        except orjson.JSONDecodeError:
            continue
        meta: dict[str, Any] = dict(zip(keys, values, strict=True))
        if len(meta) != len(keys):
            continue  # a key given twice: the full reader reports it
        for name in _STRING_LIST_FIELDS:
            if isinstance(meta.get(name), str):
                meta[name] = [meta[name]]  # `tags: "python"` is a list of one, as in the full reader
        default_id, default_layer = defaults[i]
        node, problems = build_node(
            meta, body, default_id=default_id, default_layer=default_layer, bounded=keys
        )
        if not problems:
            out[i] = node
    return out


def _split(text: str) -> tuple[str, str] | None:
    """(frontmatter, body) of a text in the engine's layout, else None."""
    if not text.startswith("---\n") or len(text) * 4 > MAX_FILE_BYTES:
        return None
    close = text.find("\n---", 3)
    if close < 4:  # no closing line, or an empty frontmatter (the full reader handles both)
        return None
    after = close + 4
    if after < len(text) and text[after] != "\n":
        return None  # the first line starting with --- is not a fence
    fm = text[4:close]
    if len(fm) * 4 > MAX_FRONTMATTER_BYTES or "\r" in fm:
        return None
    return fm, text[after + 1 :].removesuffix("\n")
