"""CCG annotations (condition-code-graph comments) in a node body.

A body line ``# <mark>：<text>`` (full-width or ASCII colon, one to six ``#``)
carries one element. Chinese and English marks are both accepted:

============  ================  =====================  ========
element       Chinese mark      English mark           required
============  ================  =====================  ========
function      功能名             Function               no
applies_when  生效条件           Applies when           yes
steps         子功能             Steps                  yes
executes      执行               Executes               yes
verified_by   验证方式           Verified by            yes
not_applicable 不适用条件         Not applicable when    yes
============  ================  =====================  ========

The elements may instead be given as a dict under ``state_attributes.ccg``
(keys: the element names above, or either mark). Body marks win over the dict
when both give the same element. Completeness is the share of the five
required elements that are present and non-empty.

Imports nothing else from the package.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: element -> (Chinese mark, English mark, required)
ELEMENTS: dict[str, tuple[str, str, bool]] = {
    "function": ("功能名", "Function", False),
    "applies_when": ("生效条件", "Applies when", True),
    "steps": ("子功能", "Steps", True),
    "executes": ("执行", "Executes", True),
    "verified_by": ("验证方式", "Verified by", True),
    "not_applicable": ("不适用条件", "Not applicable when", True),
}
REQUIRED: tuple[str, ...] = tuple(k for k, (_, _, req) in ELEMENTS.items() if req)

_ALIASES: dict[str, str] = {}
for _key, (_zh, _en, _req) in ELEMENTS.items():
    _ALIASES[_key] = _key
    _ALIASES[_zh] = _key
    _ALIASES[_en.casefold()] = _key
    _ALIASES[_en.casefold().replace(" ", "_")] = _key

_MARK_HEAD = (
    r"^[ \t]{0,3}#{1,6}[ \t]*("
    + "|".join(
        sorted(
            (re.escape(m) for zh, en, _ in ELEMENTS.values() for m in (zh, en)),
            key=len,
            reverse=True,
        )
    )
    + r")[ \t]*[:：][ \t]*"
)
#: A mark line: the mark, then its text up to the end of the line (trailing blanks dropped).
_MARK_RE = re.compile(_MARK_HEAD + r"(.*?)[ \t\r]*$", re.MULTILINE | re.IGNORECASE)
_LINE_RE = re.compile(_MARK_HEAD + r"([^\n]*)", re.MULTILINE | re.IGNORECASE)

# Separators between conditions inside one "not applicable" element.
_COND_SPLIT = re.compile(r"[；;、，,/]|\s+or\s+|或者|或")


def parse_marks(body: str) -> dict[str, str]:
    """Elements marked in the body, first occurrence of each element wins."""
    found: dict[str, str] = {}
    for mark, text in _mark_lines(body):
        key = _ALIASES.get(mark) or _ALIASES.get(mark.casefold())
        if key and key not in found:
            found[key] = text
    return found


def _mark_lines(body: str) -> list[tuple[str, str]]:
    """The (mark, text) pairs ``_MARK_RE.finditer(body)`` finds, in order (``findall``: no match objects).

    A match runs from a line's start to its end whatever the text, so the
    greedy ``[^\\n]*`` ends where the lazy ``(.*?)[ \\t\\r]*$`` does, and
    stripping the blanks gives its group without trying the tail at every
    character (which cost most of an index entry).
    """
    if "#" not in body:
        return []
    return [(mark, text.rstrip(" \t\r")) for mark, text in _LINE_RE.findall(body)]


def elements(body: str, state_attributes: Mapping[str, Any] | None = None) -> dict[str, str]:
    """All CCG elements of a node: body marks, completed by ``state_attributes.ccg``."""
    out = parse_marks(body)
    ccg = (state_attributes or {}).get("ccg") if isinstance(state_attributes, Mapping) else None
    if isinstance(ccg, Mapping):
        for raw_key, value in ccg.items():
            key = _ALIASES.get(str(raw_key)) or _ALIASES.get(str(raw_key).casefold())
            if key is None or key in out:
                continue
            if isinstance(value, (list, tuple)):
                value = "；".join(str(v) for v in value)
            out[key] = "" if value is None else str(value)
    return out


def missing(elems: Mapping[str, str]) -> tuple[str, ...]:
    """Required elements absent or blank, in table order."""
    return tuple(k for k in REQUIRED if not str(elems.get(k, "")).strip())


def completeness(elems: Mapping[str, str]) -> float:
    """Share of required elements present and non-empty (0.0 .. 1.0)."""
    return (len(REQUIRED) - len(missing(elems))) / len(REQUIRED)


def split_conditions(text: str) -> list[str]:
    """Split a "not applicable when" text into individual conditions."""
    parts = (p.strip(" \t。.") for p in _COND_SPLIT.split(text or ""))
    return [p for p in parts if p]
