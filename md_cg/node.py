"""The node model: what one memory is, and the rules every node obeys.

A :class:`Node` is the in-memory form of one ``.md`` file. Known frontmatter
fields are attributes; keys the engine does not know (added by a person or a
newer version) are kept in :attr:`Node.extra` and written back unchanged.
``None`` (or an empty list/dict) means *absent*: the field is not written.

Times (:data:`TIME_FIELDS`) are floats, seconds since the epoch, quantised
to whole microseconds by :func:`validate`; files carry them as ISO 8601 UTC
(:func:`format_instant`, :func:`parse_instant`). The size and nesting limits
every stored node obeys (:data:`MAX_FILE_BYTES`, :data:`MAX_FRONTMATTER_BYTES`,
:data:`MAX_DEPTH`) are defined here, so that nothing the API accepts is a
file the reader would refuse.

This module is the bottom of the package: it imports only :mod:`md_cg.errors`
and :mod:`md_cg.script`.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
import sys
import unicodedata
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any

from .errors import (
    INVISIBLE_BLANKS,
    VARIATION_SELECTORS,
    InvalidNodeError,
    UnknownLayerError,
    UnsafeIdError,
    hidden_char,
    shows_text,
)
from .script import CONTROL_OR_SURROGATE, fold, is_nfc, nfc, short_repr, tag_fold, twin_labels

#: The layers, in the order they appear on disk and in reports. The first five
#: are the memory layers; ``rejected`` and ``unresolved`` hold negative memory.
LAYERS: tuple[str, ...] = (
    "anchor",
    "structural",
    "knowledge",
    "contextual",
    "self",
    "rejected",
    "unresolved",
)
#: Layers that hold negative memory: never scored positively by search.
NEGATIVE_LAYERS: frozenset[str] = frozenset({"rejected", "unresolved"})

#: The closed set of ``verification_basis`` values (absent is also allowed).
VERIFICATION_BASES: tuple[str, ...] = (
    "compiler",
    "test",
    "measurement",
    "formal_proof",
    "data",
    "other",
)

#: The closed set of edge types.
EDGE_TYPES: tuple[str, ...] = (
    "part_of",
    "causal",
    "sequential",
    "spatial",
    "hierarchical",
    "similar",
    "supersedes",
)

#: The closed set of ``temporal`` kinds (absent = unset, never asked). Anything
#: else a caller or a file gives becomes ``unknown`` ("asked, not sure"), never
#: ``one_off`` -- guessing one-off would expire a memory that should stay.
TEMPORAL_KINDS: tuple[str, ...] = ("one_off", "recurring", "durable", "unknown")
#: The retention tiers (absent = not assigned yet).
RETENTION_TIERS: tuple[str, ...] = ("temp", "long")
#: Sensitivity levels, lowest first; a node without one counts as ``normal``.
SENSITIVITY_LEVELS: tuple[str, ...] = ("public", "normal", "private", "secret")
DEFAULT_SENSITIVITY = "normal"
#: Longest agent or workspace scope name.
MAX_SCOPE_CHARS = 200
#: Fields added after the seed's sqlite schema: a sqlite database carries
#: them in its ``extra`` JSON column (see :mod:`md_cg.sqlite_source`).
LIFECYCLE_FIELDS: tuple[str, ...] = (
    "sensitivity",
    "agent_scope",
    "workspace_scope",
    "retention_tier",
    "retention_reason",
    "expires_at",
    "valid_until",
)

#: Longest id accepted, in characters and in UTF-8 bytes (file names are
#: limited to 255 bytes on common file systems; the rest is left for temp
#: prefixes and the ``.md`` suffix).
MAX_ID_CHARS = 128
MAX_ID_BYTES = 200
#: Longest frontmatter key accepted (YAML readers refuse keys over 1,024).
MAX_KEY_CHARS = 200

#: A memory's title (its body's first line) is cut at this many characters (index, inject).
TITLE_MAX = 120
#: Largest node file, in bytes (frontmatter, fences and body). A larger file
#: is malformed; a node that would need one is refused.
MAX_FILE_BYTES = 4 * 1024 * 1024
#: Below this ``confidence`` evidence went against a memory: the judge says DEFER where
#: it would say ACCEPT, and inject leaves it out. From the seed's 0.6, three ``weakened``
#: verdicts (0.10 each) and no confirmation bring a memory here.
LOW_CONFIDENCE = 0.3
#: Largest frontmatter (the text between the fences), in UTF-8 bytes.
MAX_FRONTMATTER_BYTES = 256 * 1024
#: Deepest nesting of lists and objects inside one field value: ``[1]`` nests
#: 1 level, ``{"a": [1]}`` 2. Deeper values are refused (in files, sqlite
#: cells and through the API), so no reader or writer recurses without bound.
MAX_DEPTH = 64

#: Node fields that hold instants (seconds since the epoch in memory, ISO 8601
#: UTC in files).
TIME_FIELDS: tuple[str, ...] = ("created_at", "updated_at", "last_access", "expires_at", "valid_until")

# Characters that are path separators or reserved on common file systems.
_ID_FORBIDDEN = re.compile(r'[/\\:*?"<>|\x00-\x1f\x7f]')

#: Frontmatter keys in the order they are written. Keys not listed here are
#: "extra" keys, written after these in the order they were read.
FIELD_ORDER: tuple[str, ...] = (
    "id",
    "layer",
    "modality",
    "importance",
    "confidence",
    "condition_space",
    "tags",
    "sensitivity",
    "agent_scope",
    "workspace_scope",
    "spatial",
    "temporal",
    "retention_tier",
    "retention_reason",
    "expires_at",
    "valid_until",
    "created_at",
    "updated_at",
    "semantic_coordinates",
    "state_attributes",
    "entity_id",
    "verification_basis",
    "non_applicable_conditions",
    "edges",
    "verification_history",
    "access_count",
    "last_access",
)


def check_id(node_id: object, *, what: str = "node id") -> str:
    """Return ``node_id`` if it is a safe file-name stem, else raise.

    Refused: non-strings, the empty string, ``.``/``..``, ids containing
    ``..``, ids starting with ``.`` (hidden files), path separators, NUL and
    other control characters, characters reserved on Windows
    (``: * ? " < > |``), leading/trailing whitespace, trailing dots and ids
    longer than :data:`MAX_ID_CHARS` characters or :data:`MAX_ID_BYTES` bytes.
    """
    if not isinstance(node_id, str):
        raise UnsafeIdError(
            f"{what} must be a string, got {type(node_id).__name__} {show(node_id)}",
            field="id",
            value=node_id,
        )
    problem = _id_problem(node_id)
    if problem:
        raise UnsafeIdError(
            f"unsafe {what} {short_repr(node_id)}: {problem}; ids must be safe file-name stems",
            field="id",
            value=node_id,
            node_id=None,
        )
    return node_id


#: File-name stems Windows reserves for devices, in any case and with any
#: extension (``con.md``, ``Aux.txt.md``): a clone of the store there cannot
#: hold such a file (git for Windows refuses to check it out).
WINDOWS_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{port}{n}" for port in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"}
)


def windows_device_name(node_id: str) -> str | None:
    """The device name Windows would see in the file of ``node_id`` (``"CON"``), or None.

    Windows reads a file name up to its first dot, trailing spaces dropped,
    in any case: ``con``, ``CON.notes`` and ``com1`` are devices there.
    """
    stem = node_id.split(".", 1)[0].rstrip(" ").upper()
    return stem if stem in WINDOWS_DEVICE_NAMES else None


#: The zero-width non-joiner and joiner: format characters Persian and Indic words (and
#: emoji sequences such as U+1F469 U+200D U+1F4BB) need -- between two visible characters.
_JOINERS = frozenset("\u200c\u200d")

#: The invisible characters (:func:`md_cg.errors.hidden_char`): one table for ids, tags and queries.
_SELECTORS = VARIATION_SELECTORS
_BLANKS = INVISIBLE_BLANKS
_hidden = hidden_char

#: A flag of a country's subdivision: a black flag, tag characters (U+E0020-U+E007E)
#: spelling its code, and U+E007F CANCEL TAG (U+1F3F4 U+E0067 U+E0062 ... U+E007F).
_FLAG_TAGS = re.compile("\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f")

#: The keycap emoji: a digit, ``#`` or ``*``, U+FE0F and U+20E3 (``1\ufe0f\u20e3``).
_KEYCAP = re.compile("[0-9#*]\ufe0f\u20e3")


def invisible_char(text: str) -> str | None:
    """The first character of ``text`` that shows nothing where it stands, or None: what
    makes a new id or tag look like another (``ops\u200b``, ``ops\u3164`` and
    ``ops\U000e0041`` all print as ``ops``).

    Hidden are the format characters (Unicode category Cf) and the blank fillers of
    :data:`_BLANKS`. A character that joins or styles something visible is allowed where
    it does: a joiner (:data:`_JOINERS`) between two visible non-ASCII characters (a
    Persian word's ZWNJ, an emoji ZWJ sequence; after a variation selector too, as in
    U+1F3F3 U+FE0F U+200D U+1F308), a variation selector after a visible non-ASCII
    character or in a keycap (:data:`_KEYCAP`), tag characters in a subdivision flag
    (:data:`_FLAG_TAGS`). After an ASCII letter they join or style nothing: ``ops\u200d``
    is ``ops`` to the eye."""
    if text.isascii():
        return None
    allowed = {i for m in _FLAG_TAGS.finditer(text) for i in range(m.start() + 1, m.end())}
    allowed.update(m.start() + 1 for m in _KEYCAP.finditer(text))
    for i, ch in enumerate(text):
        if i in allowed or not _hidden(ch):
            continue
        before = text[i - 1] if i else "a"
        after = text[i + 1] if i + 1 < len(text) else "a"
        shows_before = not before.isascii() and not _hidden(before)
        if ch in _SELECTORS and shows_before:
            continue
        styled = before in _SELECTORS and i > 1 and not text[i - 2].isascii() and not _hidden(text[i - 2])
        if ch in _JOINERS and (shows_before or styled) and not after.isascii() and not _hidden(after):
            continue
        return ch
    return None


def odd_space(text: str) -> str | None:
    """The first space character of ``text`` other than the plain space U+0020, or None:
    a no-break space (U+00A0), a figure, thin or narrow no-break space (U+2007, U+2009,
    U+202F), an ideographic space (U+3000) -- any of Unicode category Zs. ``kp 1`` and
    ``kp\u00a01`` print alike, so a new id may not hold one (session 41: five ids reading
    ``kp 1`` were stored side by side)."""
    for ch in text:
        if ch != " " and unicodedata.category(ch) == "Zs":
            return ch
    return None


def invisible_name(ch: str) -> str:
    """How a refusal names what :func:`invisible_char` found: ``the invisible format
    character U+200B (ZERO WIDTH SPACE)``, or ``the invisible character U+3164 (HANGUL
    FILLER)`` for a blank that is not a format character."""
    kind = "format character" if unicodedata.category(ch) == "Cf" else "character"
    return f"the invisible {kind} U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')})"


def hidden_repr(text: str) -> str:
    """``repr(text)`` with the blanks it would print as they are escaped: ``repr`` escapes
    a format character but prints U+3164 HANGUL FILLER as nothing, so ``'ops\\u3164'``
    would read ``'ops'`` in the very message that refuses it."""
    return "".join(
        _escape(c) if (c in _BLANKS or c in _SELECTORS) and c.isprintable() else c for c in repr(text)
    )


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def check_new_id(node_id: object, *, what: str = "node id") -> str:
    """:func:`check_id`, and for an id a store is about to *create*: not a Windows device
    name, and no invisible character (:func:`invisible_char`: a zero-width space,
    right-to-left override, byte-order mark, soft hyphen, Hangul filler...; a joiner
    between two visible non-ASCII characters, as Persian and Indic words and emoji
    sequences need, aside), which would make it look like another id; nor a space
    character other than U+0020 (:func:`odd_space`: ``kp\u00a01`` prints as ``kp 1``).

    Existing files named so are still read (``health()`` reports a device name as
    ``reserved_id``); a new node, a rename or an import may not add one.
    """
    checked = check_id(node_id, what=what)
    if not checked.isascii():
        invisible = invisible_char(checked)
        if invisible is not None:
            raise UnsafeIdError(
                f"unsafe {what} {hidden_repr(checked)}: it holds {invisible_name(invisible)}, so it would "
                "look like another id; ids must read as what they are",
                field="id",
                value=checked,
                node_id=None,
            )
        space = odd_space(checked)
        if space is not None:
            raise UnsafeIdError(
                f"unsafe {what} {hidden_repr(checked)}: it holds the space character U+{ord(space):04X} "
                f"({unicodedata.name(space)}), which prints as a space, so it would look like another id; "
                "write a plain space (U+0020)",
                field="id",
                value=checked,
                node_id=None,
            )
    device = windows_device_name(checked)
    if device is not None:
        raise UnsafeIdError(
            f"unsafe {what} {checked!r}: Windows reserves the name {device} for a device, so a clone "
            "of the store there could not hold its file; ids must be safe file-name stems",
            field="id",
            value=checked,
            node_id=None,
        )
    return checked


@lru_cache(maxsize=65536)
def _id_problem(node_id: str) -> str | None:
    if node_id == "":
        return "it is empty"
    if ".." in node_id:
        return "it contains '..'"
    if node_id.startswith("."):
        return "it starts with '.'"
    bad = _ID_FORBIDDEN.search(node_id)
    if bad:
        return f"it contains the character {bad.group()!r}"
    if node_id != node_id.strip():
        return "it has leading or trailing whitespace"
    if node_id.endswith("."):
        return "it ends with '.'"
    if len(node_id) > MAX_ID_CHARS:
        return f"it is {len(node_id)} characters long (max {MAX_ID_CHARS})"
    if len(node_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        return f"it is longer than {MAX_ID_BYTES} bytes in UTF-8"
    if CONTROL_OR_SURROGATE.search(node_id):
        return "it contains a control or surrogate character"
    return None


#: Longest slug part of an id made by :func:`slug_id`, in characters.
SLUG_CHARS = 48
_SLUG_KEEP = ("L", "M", "N")  # letters, marks and digits of every script
_ASCII_DROPPED = re.compile("[^a-z0-9]+")  # case-folded ASCII outside L/M/N: every other character


def slug_id(text: str) -> str:
    """A readable, safe id for ``text``: a slug of its first line plus a 6-hex suffix.

    The first non-blank line is NFKC-normalised and case-folded; every run of
    characters that are not letters, marks or digits (any script: CJK is kept
    as is) becomes one ``-``; leading and trailing ``-`` are trimmed and the
    slug is cut to :data:`SLUG_CHARS` characters (at a ``-`` when one is in
    the second half). A random suffix of 6 hex digits keeps ids apart:
    ``"Binary search, revisited"`` gives e.g. ``binary-search-revisited-3f9a2c``.
    Text with nothing to slug gives ``note-<hex>``. The result always passes
    :func:`check_id`.
    """
    return check_id(f"{_slug(text)}-{secrets.token_hex(3)}")


def content_id(text: str) -> str:
    """:func:`slug_id` with the suffix taken from ``text`` itself (its SHA-256), not at random.

    The same text always gives the same id, so an import of records without
    ids can be run twice and store each memory once.
    """
    digest = hashlib.sha256(str(text).encode("utf-8", "surrogatepass")).hexdigest()
    return check_id(f"{_slug(text)}-{digest[:6]}")


def _slug(text: str) -> str:
    """The slug part of :func:`slug_id` (``note`` when nothing can be slugged)."""
    first = next((line for line in str(text).splitlines() if line.strip()), "")
    folded = fold(first, collapse=False)
    if folded.isascii():  # the same rule, 10x faster: ASCII letters and digits are all it keeps
        slug = _ASCII_DROPPED.sub("-", folded).strip("-")
    else:
        chars = [c if unicodedata.category(c)[0] in _SLUG_KEEP else "-" for c in folded]
        slug = re.sub("-{2,}", "-", "".join(chars)).strip("-")
    if len(slug) > SLUG_CHARS:
        cut = slug[:SLUG_CHARS]
        dash = cut.rfind("-")
        slug = (cut[:dash] if dash >= SLUG_CHARS // 2 else cut).strip("-")
    return slug or "note"


def check_layer(layer: object) -> str:
    """Return ``layer`` if it is one of :data:`LAYERS`, else raise."""
    if layer not in LAYERS:
        raise UnknownLayerError(
            f"unknown layer {short_repr(layer)}; expected one of: {', '.join(LAYERS)}",
            field="layer",
            value=layer,
        )
    return layer


# -- instants ----------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MICRO = 1_000_000
# Below 2**33 s (year 2242) a float holds every microsecond, and float
# arithmetic finds the nearest one exactly.
_FAST_MICROS = 2.0**33


def _micros(seconds: float) -> int:
    """Whole microseconds nearest to ``seconds``, computed exactly (half to even)."""
    if -_FAST_MICROS < seconds < _FAST_MICROS:
        fast = round(seconds * _MICRO)
        if fast / _MICRO == seconds:
            return fast  # seconds is that many microseconds (the usual case)
    num, den = float(seconds).as_integer_ratio()
    micros, rest = divmod(num * _MICRO, den)
    if 2 * rest > den or (2 * rest == den and micros % 2):
        micros += 1
    return micros


def quantise_instant(seconds: float) -> float:
    """``seconds`` rounded to the nearest whole microsecond (exact, half to even).

    Idempotent, and a quantised value survives :func:`format_instant` /
    :func:`parse_instant` unchanged. Values too large for a float to hold
    microseconds come back unchanged.
    """
    return _micros(seconds) / _MICRO


def parse_instant(value: Any) -> float:
    """An instant as seconds since the epoch, quantised to microseconds.

    Accepts a number (seconds since the epoch: old files and sqlite sources),
    an ISO 8601 string (``2026-11-30T23:59:20.123456Z``, ``2026-11-30``; a
    time without an offset is UTC) or a :class:`datetime.datetime` /
    :class:`datetime.date`. Raises ``ValueError`` saying what is wrong.

    A datetime without a time zone is read as UTC here (PyYAML reads an unquoted
    time in a file so); the API refuses one before it gets here
    (:func:`refuse_naive_times`), since in a caller's hands it means local time.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError("must be a number of seconds since the epoch or an ISO 8601 date")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        try:
            return quantise_instant(value)
        except OverflowError:
            raise ValueError("is too large for an instant") from None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError("is not an ISO 8601 date or time (e.g. 2026-11-30T23:59:20Z)") from None
    if not isinstance(value, datetime):
        if isinstance(value, date):
            value = datetime(value.year, value.month, value.day)
        else:
            raise ValueError("must be a number of seconds since the epoch or an ISO 8601 date")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return ((value - _EPOCH) // timedelta(microseconds=1)) / _MICRO


def refuse_naive_times(values: Any, node_id: str | None = None) -> None:
    """Refuse a :class:`datetime.datetime` without a time zone in a time field given
    through the API (``values``: a :class:`Node`, or a mapping of field names).

    Such a value names no instant: :func:`parse_instant` would read it as UTC, so
    ``datetime.now() + timedelta(hours=1)`` west of Greenwich was already past (a
    memory written expired). Raises :class:`InvalidNodeError` naming the field.
    Files are not checked here: a time written in a file without an offset is UTC
    (the file format), and PyYAML reads an unquoted one as such a datetime.
    """
    for name in TIME_FIELDS:
        value = values.get(name) if isinstance(values, dict) else getattr(values, name, None)
        if isinstance(value, datetime) and value.utcoffset() is None:
            where = f"node {node_id!r}: " if node_id is not None else ""
            raise InvalidNodeError(
                f"{where}field {name!r} is a datetime without a time zone ({value.isoformat()}): "
                "give it tzinfo (datetime.now(timezone.utc), or .astimezone() for local time), "
                "or seconds since the epoch",
                field=name,
                value=value,
                node_id=node_id,
            )


def format_instant(seconds: float) -> str | float:
    """An instant as written in files: ISO 8601 UTC with microseconds.

    ``1796083200.5`` gives ``"2026-12-01T00:00:00.500000Z"``. An instant
    outside the years 0001-9999 (which ISO 8601 cannot name) is returned as
    the number itself. ``seconds`` should be quantised (see :func:`validate`).
    """
    out = _INSTANTS.get(seconds)
    if out is not None:
        return out
    if not math.isfinite(seconds):
        return seconds
    try:
        moment = _NAIVE_EPOCH + timedelta(microseconds=_micros(seconds))
    except OverflowError:  # before 0001 or after 9999
        return seconds
    out = moment.isoformat(timespec="microseconds") + "Z"
    if len(_INSTANTS) >= 1024:
        _INSTANTS.clear()
    _INSTANTS[seconds] = out
    return out


#: instants written lately: a batch stamps its nodes with the same one or two
_INSTANTS: dict[float, str] = {}


@dataclass(eq=True)
class Edge:
    """An out-edge of a node: ``target`` id, ``type`` (one of :data:`EDGE_TYPES`)."""

    target: str
    type: str = "similar"
    confidence: float | None = None
    verified: int | bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"target": self.target, "type": self.type}
        if self.confidence is not None:
            d["confidence"] = self.confidence
        if self.verified is not None:
            d["verified"] = self.verified
        d.update(self.extra)
        return d

    @classmethod
    def from_value(cls, value: Any, *, node_id: str | None = None) -> Edge:
        """Build an edge from an :class:`Edge` or a dict as found in a file."""
        if isinstance(value, Edge):
            return value
        if not isinstance(value, dict) or "target" not in value:
            raise InvalidNodeError(
                f"edge {show(value)} must be an object with at least a 'target'",
                field="edges",
                value=value,
                node_id=node_id,
            )
        rest = {k: v for k, v in value.items() if k not in ("target", "type", "confidence", "verified")}
        return cls(
            target=value["target"],
            type=value.get("type", "similar"),
            confidence=value.get("confidence"),
            verified=value.get("verified"),
            extra=rest,
        )


@dataclass(eq=True)
class Node:
    """One memory. ``id`` and ``layer`` are required; everything else is optional.

    ``body`` is the Markdown after the frontmatter, kept byte for byte.
    ``extra`` holds frontmatter keys the engine does not know; they are written
    back after the known keys, in their original order.
    """

    id: str
    layer: str = "knowledge"
    body: str = ""
    modality: str | None = None
    importance: float | None = None
    confidence: float | None = None
    condition_space: dict[str, Any] | None = None
    tags: list[str] = field(default_factory=list)
    sensitivity: str | None = None
    agent_scope: str | None = None
    workspace_scope: str | None = None
    spatial: Any = None
    temporal: str | None = None
    retention_tier: str | None = None
    retention_reason: str | None = None
    expires_at: float | None = None
    valid_until: float | None = None
    created_at: float | None = None
    updated_at: float | None = None
    semantic_coordinates: Any = None
    state_attributes: dict[str, Any] | None = None
    entity_id: Any = None
    verification_basis: str | None = None
    non_applicable_conditions: list[str] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    verification_history: list[dict[str, Any]] = field(default_factory=list)
    access_count: int | None = None
    last_access: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # -- conversion -----------------------------------------------------
    def to_dict(self, *, iso_times: bool = False) -> dict[str, Any]:
        """The field mapping, keys in :data:`FIELD_ORDER`, absent fields left out.

        Times are numbers (seconds since the epoch); with ``iso_times=True``
        they are written as in files (:func:`format_instant`), which makes
        this the frontmatter mapping of the node's file.
        """
        out: dict[str, Any] = {}
        for name in FIELD_ORDER:
            value = getattr(self, name)
            if value is None or (isinstance(value, (list, dict)) and not value):
                continue
            if name == "edges":
                value = [Edge.from_value(e, node_id=self.id).to_dict() for e in value]
            elif iso_times and name in TIME_FIELDS and _is_number(value):
                value = format_instant(value)
            out[name] = value
        for key, value in self.extra.items():
            out[key] = value
        return out

    @classmethod
    def from_dict(cls, meta: dict[str, Any], body: str = "") -> Node:
        """Build a node from a frontmatter mapping (unknown keys go to ``extra``).

        Raises :class:`InvalidNodeError` naming the field when a value has the
        wrong type or is outside its allowed set (the first problem; see
        :func:`build_node` for all of them).
        """
        node, problems = build_node(meta, body)
        if problems:
            raise problems[0]
        return node

    def copy(self) -> Node:
        """A deep copy (values go through the frontmatter mapping)."""
        import copy as _copy

        return _copy.deepcopy(self)


_KNOWN_FIELDS = frozenset(f.name for f in fields(Node)) - {"extra", "body"}
_LIST_FIELDS = ("tags", "non_applicable_conditions", "edges", "verification_history")


def build_node(
    meta: dict[str, Any],
    body: str = "",
    *,
    default_id: str | None = None,
    default_layer: str | None = None,
    bounded: Collection[str] = (),
) -> tuple[Node, list[InvalidNodeError]]:
    """A node from a frontmatter mapping, and every problem it has (none: valid).

    Keys the model does not know go to :attr:`Node.extra`. A missing or null
    ``id``/``layer`` takes ``default_id``/``default_layer``; without a default
    it is a problem (``frontmatter has no 'id'``). The node is normalised as
    :func:`validate` does, wherever its values allow it. ``bounded``: keys
    whose values the parser already kept within the size and depth limits.
    """
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in meta.items():
        if key in _KNOWN_FIELDS:
            kwargs[key] = value
        else:
            extra[key] = value
    for listy in _LIST_FIELDS:
        if kwargs.get(listy) is None:
            kwargs.pop(listy, None)
    problems: list[InvalidNodeError] = []
    skip = set()
    if kwargs.get("id") is None:
        kwargs["id"] = default_id
        if default_id is None:
            problems.append(InvalidNodeError("frontmatter has no 'id'", field="id"))
            skip.add("id")
    if kwargs.get("layer") is None:
        kwargs["layer"] = default_layer
        if default_layer is None:
            node_id = kwargs["id"] if isinstance(kwargs["id"], str) else None
            problems.append(InvalidNodeError("frontmatter has no 'layer'", field="layer", node_id=node_id))
            skip.add("layer")
    node = Node(body=body, extra=extra, **kwargs)
    problems.extend(node_problems(node, skip=skip, bounded=bounded))
    return node, problems


# -- validation -----------------------------------------------------------

_NUMBER_FIELDS_UNIT = ("importance", "confidence")
# Fields where None is "absent" (an empty list or object is normalised to None).
_MAYBE_EMPTY_FIELDS = (
    "condition_space",
    "spatial",
    "temporal",
    "semantic_coordinates",
    "state_attributes",
    "entity_id",
)
# Fields whose values may nest: checked against MAX_DEPTH and the size limit
# (tags and non_applicable_conditions are flat lists of strings once valid).
_NESTING_FIELDS = (*_MAYBE_EMPTY_FIELDS, "verification_history")


def show(value: Any) -> str:
    """A short ``repr`` of a value for messages: bounded in length and depth
    (:func:`md_cg.script.short_repr`)."""
    return short_repr(value)


def finite(value: int | float) -> bool:
    """Whether the number ``value`` is finite as a float too: not ``nan`` or ``inf``, and
    not an integer too large for a float (``math.isfinite`` raises OverflowError on one)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return -sys.float_info.max <= value <= sys.float_info.max


#: The integers a node file holds: those its JSON reader (orjson) reads back as the
#: same integer, from -2**63 up to 2**64 - 1 (beyond, it reads a float).
INT_MIN = -(2**63)
INT_END = 2**64
#: Counters (``access_count``) are signed 64-bit.
COUNT_END = 2**63


def number_problem(value: Any) -> str | None:
    """Why the number ``value`` cannot be written to a node file, or None (also for non-numbers).

    The writer refuses integers its JSON reader would not read back as the
    same integer (:data:`INT_MIN` to :data:`INT_END`) and non-finite floats
    (JSON has no ``inf``/``nan``), so validation refuses
    them too (:func:`bulk_problem` asks this of every value it walks): a
    file holding one (``mine: .inf``) is reported when read, instead of
    being read and then failing every later edit on a field the edit did
    not touch.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"holds the non-finite number {value!r}, which a node file cannot store"
    elif isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value < INT_END:
        return f"holds the integer {show(value)}, outside the range a node file stores (-2**63 to 2**64 - 1)"
    return None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def bulk_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a frontmatter value (too deep, too large, or a number
    a file cannot store: :func:`number_problem`), or None.

    Walks without recursion, counting each list item, object key and string
    character against :data:`MAX_FRONTMATTER_BYTES` (every item costs at
    least a byte in a file), so it stops early on huge, cyclic or shared
    ("billion laughs") structures.
    """
    budget = MAX_FRONTMATTER_BYTES
    if isinstance(value, str):
        budget -= len(value)
    elif not isinstance(value, (list, tuple, dict)):
        return number_problem(value)
    stack = [(value, 1)] if isinstance(value, (list, tuple, dict)) else []
    while stack and budget >= 0:
        container, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nests deeper than {MAX_DEPTH} levels of lists and objects"
        budget -= len(container)
        if budget < 0:
            break
        if isinstance(container, dict):
            budget -= sum(len(k) for k in container if isinstance(k, str))
            children: Any = container.values()
        else:
            children = container
        for child in children:
            if isinstance(child, str):
                budget -= len(child)
            elif isinstance(child, (list, tuple, dict)):
                stack.append((child, depth + 1))
            elif child is not None:
                why = number_problem(child)
                if why:
                    return why
    if budget < 0:
        return f"is larger than the frontmatter limit of {MAX_FRONTMATTER_BYTES // 1024} KiB"
    return None


def node_problems(
    node: Node, *, skip: Collection[str] = (), bounded: Collection[str] = ()
) -> list[InvalidNodeError]:
    """Every rule ``node`` breaks (empty: it is valid), each naming its field.

    Normalises in place where the value allows it: times become quantised
    floats (:func:`parse_instant`), edges given as dicts become :class:`Edge`,
    an empty list or object in a field where ``None`` means absent becomes
    ``None``. Fields in ``skip`` are not checked (already reported by the
    caller); fields and extra keys in ``bounded`` are not walked for size and
    depth (a parser that bounded them while reading says so: :func:`bulk_problem`
    is the costly check).
    """
    problems: list[InvalidNodeError] = []
    node_id = node.id if isinstance(node.id, str) else None
    prefix = f"node {node_id!r}: " if node_id is not None else ""
    failed: set[str] = set()

    def fail(name: str, message: str, value: Any) -> None:
        failed.add(name)
        problems.append(
            InvalidNodeError(
                f"{prefix}field {name!r} {message} (got {show(value)})",
                field=name,
                value=value,
                node_id=node_id,
            )
        )

    if "id" not in skip:
        try:
            check_id(node.id)
        except UnsafeIdError as exc:
            problems.append(exc)
    if "layer" not in skip and node.layer not in LAYERS:
        problems.append(
            UnknownLayerError(
                f"{prefix}unknown layer {show(node.layer)}; expected one of: {', '.join(LAYERS)}",
                field="layer",
                value=node.layer,
                node_id=node_id,
            )
        )
    for name in _MAYBE_EMPTY_FIELDS:
        value = getattr(node, name)
        if isinstance(value, (list, dict)) and not value:
            setattr(node, name, None)  # empty means absent: the file will not have it
    _check_scalars(node, fail)
    _check_collections(node, fail)
    _check_edges(node, fail, "edges" not in bounded)
    _check_extra(node, fail, bounded)
    for name in _NESTING_FIELDS:
        value = getattr(node, name)
        if value and name not in failed and name not in bounded:
            why = bulk_problem(value)
            if why:
                fail(name, why, value)
    return problems


_Fail = Callable[[str, str, Any], None]


def _check_scalars(node: Node, fail: _Fail) -> None:
    if not isinstance(node.body, str):
        fail("body", "must be a string", node.body)
    elif len(node.body) > MAX_FILE_BYTES:
        fail("body", f"is larger than the file limit of {MAX_FILE_BYTES // 1024 // 1024} MiB", node.body)
    for name in _NUMBER_FIELDS_UNIT:
        v = getattr(node, name)
        if v is not None and (not _is_number(v) or not 0.0 <= v <= 1.0):  # (nan and inf fail the range)
            fail(name, "must be a number between 0 and 1", v)
    for name in TIME_FIELDS:
        v = getattr(node, name)
        if v is None or (
            type(v) is float and -_FAST_MICROS < v < _FAST_MICROS and round(v * _MICRO) / _MICRO == v
        ):
            continue  # None, or already a whole number of microseconds (the usual case)
        try:
            setattr(node, name, parse_instant(v))
        except ValueError as exc:
            fail(name, f"{exc} (an instant: seconds since the epoch or ISO 8601)", v)
    count = node.access_count
    if count is not None and (
        not isinstance(count, int) or isinstance(count, bool) or not 0 <= count < COUNT_END
    ):
        fail("access_count", "must be a non-negative 64-bit integer", count)
    if node.modality is not None and not isinstance(node.modality, str):
        fail("modality", "must be a string", node.modality)
    _check_lifecycle(node, fail)


def normalize_temporal(value: object) -> str:
    """The temporal kind of ``value``: one of :data:`TEMPORAL_KINDS`, or ``""`` (unset).

    ``None`` and blank strings are unset. Strings are trimmed and case-folded
    and must then be one of the four kinds; anything else (synonyms such as
    ``"once"``, typos, numbers, objects) is ``"unknown"``. Never raises,
    never guesses ``one_off``.
    """
    if value is None:
        return ""
    if not isinstance(value, str):
        return "unknown"
    kind = value.strip().casefold()
    if not kind:
        return ""
    return kind if kind in TEMPORAL_KINDS else "unknown"


def _check_lifecycle(node: Node, fail: _Fail) -> None:
    """Retention and scope fields: closed sets, normalised in place."""
    if isinstance(node.temporal, str):  # an explicit blank stays blank (unset), None stays absent
        node.temporal = normalize_temporal(node.temporal)
    if node.retention_tier is not None and node.retention_tier not in RETENTION_TIERS:
        fail(
            "retention_tier", f"must be one of {', '.join(RETENTION_TIERS)} (or absent)", node.retention_tier
        )
    if node.retention_reason is not None and not isinstance(node.retention_reason, str):
        fail("retention_reason", "must be a string", node.retention_reason)
    if node.sensitivity is not None and node.sensitivity not in SENSITIVITY_LEVELS:
        fail("sensitivity", f"must be one of {', '.join(SENSITIVITY_LEVELS)} (or absent)", node.sensitivity)
    for name in ("agent_scope", "workspace_scope"):
        v = getattr(node, name)
        if v is not None and (
            not isinstance(v, str) or not v.strip() or len(v) > MAX_SCOPE_CHARS or v != v.strip()
        ):
            fail(
                name, f"must be a non-blank name of at most {MAX_SCOPE_CHARS} characters, no outer spaces", v
            )


def _check_collections(node: Node, fail: _Fail) -> None:
    for name in ("condition_space", "state_attributes"):
        v = getattr(node, name)
        if v is not None and not isinstance(v, dict):
            fail(name, "must be an object", v)
    for name in ("tags", "non_applicable_conditions"):
        v = getattr(node, name)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            fail(name, "must be a list of strings", v)
        elif sum(map(len, v)) + len(v) > MAX_FRONTMATTER_BYTES:
            fail(name, f"is larger than the frontmatter limit of {MAX_FRONTMATTER_BYTES // 1024} KiB", v)
    if node.verification_basis is not None and node.verification_basis not in VERIFICATION_BASES:
        fail(
            "verification_basis",
            f"must be one of {', '.join(VERIFICATION_BASES)} (or absent)",
            node.verification_basis,
        )
    history = node.verification_history
    if not isinstance(history, list) or not all(isinstance(x, dict) for x in history):
        fail("verification_history", "must be a list of objects", history)


def _check_edges(node: Node, fail: _Fail, walk: bool) -> None:
    if not isinstance(node.edges, list):
        fail("edges", "must be a list", node.edges)
        return
    # Edges may be given as dicts; store them as Edge objects from here on.
    edges = []
    for value in node.edges:
        try:
            edges.append(Edge.from_value(value, node_id=node.id if isinstance(node.id, str) else None))
        except InvalidNodeError as exc:
            fail("edges", str(exc), value)
            return
    node.edges = edges
    for edge in edges:
        try:
            check_id(edge.target, what="edge target")
        except UnsafeIdError as exc:
            fail("edges", f"has an unsafe target: {exc}", edge.target)
        if edge.type not in EDGE_TYPES:
            fail("edges", f"has an edge type outside {', '.join(EDGE_TYPES)}", edge.type)
        if edge.confidence is not None and (not _is_number(edge.confidence) or not finite(edge.confidence)):
            fail("edges", "has an edge confidence that is not a finite number", edge.confidence)
        why = bulk_problem(edge.extra) if walk and edge.extra else None
        if why:
            fail("edges", f"has an edge whose extra keys {why}", edge.extra)


def _check_extra(node: Node, fail: _Fail, bounded: Collection[str]) -> None:
    if not isinstance(node.extra, dict):
        fail("extra", "must be a dict of extra frontmatter keys", node.extra)
        return
    for key, value in node.extra.items():
        if key in FIELD_ORDER:
            fail(key, "is a known field and cannot also be an extra key", key)
        elif not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or "\n" in key:
            fail("extra", f"has an invalid key (1..{MAX_KEY_CHARS} chars, no newline)", key)
        elif key not in bounded:
            why = bulk_problem(value)
            if why:
                fail(key, why, value)


def validate(node: Node) -> Node:
    """Check every rule a stored node must obey; return the node or raise.

    Raises the first problem :func:`node_problems` finds, an
    :class:`InvalidNodeError` (or a subclass) naming the field. Normalises
    in place: edges given as dicts become :class:`Edge`, times become floats
    quantised to whole microseconds and empty values of optional fields
    become ``None``, so that writing and reading a valid node gives back an
    equal node (``loads(dumps(validate(n))) == n``).
    """
    problems = node_problems(node)
    if problems:
        raise problems[0]
    return node


#: The first instant a node's time may hold: 0001-01-01T00:00:00Z.
FIRST_INSTANT = -62135596800.0
#: The instant after the last one: 10000-01-01T00:00:00Z (9999-12-31T23:59:59.999999Z is the last).
#: It is also the float that last microsecond rounds to (floats near 2.5e11 lie 30 µs apart), so
#: :func:`instant_problem` lets it pass.
AFTER_LAST_INSTANT = 253402300800.0


def instant_problem(node: Node, kept: Mapping[str, object] | None = None) -> InvalidNodeError | None:
    """The InvalidNodeError (returned, not raised) of the first time field of ``node``
    given as a number outside the years 1-9999, which no ISO date can name: most
    often milliseconds since the epoch given for seconds (``1700000000123`` is a
    date in the year 55,800; an expiry so far never comes). New input refuses it
    (:func:`unusable`: ``add``, ``update``, ``apply_changes``); the node model,
    files and ``add_many`` carry such a time (a file an earlier version wrote is
    read), and an import warns of it (an export of such a store imports again).
    ``kept``: field -> the time the stored node held (an edit of it): not new input."""
    for name in TIME_FIELDS:
        value = getattr(node, name)
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)  # nan and inf are validate's to refuse
            and not FIRST_INSTANT <= value <= AFTER_LAST_INSTANT  # <=: 23:59:59.999999 rounds up
            and (kept is None or value != kept.get(name))
        ):
            hint = "; milliseconds since the epoch? md-cg reads seconds" if value > 0 else ""
            return InvalidNodeError(
                f"node {node.id!r}: field {name!r} is {float(value)!r} seconds since the epoch, "
                f"outside the years 1-9999{hint}",
                field=name,
                value=value,
                node_id=node.id,
            )
    return None


def id_problem(name: str) -> str | None:
    """Why ``name`` is not a safe file-name stem (``None`` if it is one); see :func:`check_id`."""
    return _id_problem(name)


def unusable(
    node: Node,
    fields: Collection[str] = ("tags", "edges", "times"),
    *,
    kept_tags: Sequence[object] = (),
    kept_edges: Sequence[object] = (),
    kept_times: Mapping[str, object] | None = None,
) -> InvalidNodeError | None:
    """The InvalidNodeError (returned, not raised) when a memory a caller writes by
    hand (``add``, ``update``) holds what no read could use: a blank tag (the tag filter refuses one),
    a tag with an invisible format character (:func:`invisible_char`, as new ids refuse: ``ops\u200b``
    printed as ``ops`` and ``--tag ops`` missed it), one tag in two Unicode forms
    (:func:`twin_tags`: letter case, width or Unicode form apart),
    a tag with a space character other than U+0020 (:func:`odd_space`), an edge
    to itself (``neighbours`` never shows it), an edge confidence outside 0..1, or
    a time outside the years 1-9999 (:func:`instant_problem`: milliseconds for seconds).
    Files and ``add_many`` carry what they hold; this is for new input.

    ``kept_tags``/``kept_edges``/``kept_times``: what the stored node held (an edit of
    it): a tag it held, an edge to itself it had, an edge confidence one of its edges
    had and a time it held are not new input (a rename re-points an edge of
    confidence 1.5 a migration stored)."""
    if "times" in fields:
        late = instant_problem(node, kept_times)
        if late is not None:
            return late
    if "tags" in fields and isinstance(node.tags, list):
        for tag in node.tags:
            if not isinstance(tag, str) or (type(tag) is str and tag in _USABLE_TAGS) or tag in kept_tags:
                continue
            if not shows_text(tag):  # every character escaped: repr printed '\u0301' as a bare mark
                return InvalidNodeError(
                    f"node {node.id!r}: field 'tags' holds a blank tag ({tag!a}); a tag needs some text",
                    field="tags",
                    value=node.tags,
                    node_id=node.id,
                )
            if any(unicodedata.category(ch) == "Cc" for ch in tag):
                return InvalidNodeError(
                    f"node {node.id!r}: field 'tags' holds a tag with a control character ({tag!r}); "
                    "a tag is one line of text",
                    field="tags",
                    value=node.tags,
                    node_id=node.id,
                )
            invisible = invisible_char(tag)
            if invisible is not None:  # 'ops\u200b' printed as 'ops' and `--tag ops` missed it
                return InvalidNodeError(
                    f"node {node.id!r}: field 'tags' holds the tag {hidden_repr(tag)} with "
                    f"{invisible_name(invisible)}, so it would look like another tag; tags must read as "
                    "what they are, as ids must",
                    field="tags",
                    value=node.tags,
                    node_id=node.id,
                )
            space = odd_space(tag)
            if space is not None:  # 'kp\u00a01' printed as 'kp 1', another tag to a filter before s42
                return InvalidNodeError(
                    f"node {node.id!r}: field 'tags' holds the tag {hidden_repr(tag)} with the space "
                    f"character U+{ord(space):04X} ({unicodedata.name(space)}), which prints as a space, "
                    "so it would look like another tag; write a plain space (U+0020)",
                    field="tags",
                    value=node.tags,
                    node_id=node.id,
                )
            _usable_tag(tag)
        twins = twin_tags(node.tags, kept_tags) if len(node.tags) > 1 else None
        if twins is not None:  # ['réunion', 'réunion'] both stored, after `update --tag` of each form
            return _twin_tags_error(node, twins)
    if "edges" not in fields or not isinstance(node.edges, list):
        return None
    return _unusable_edge(node, kept_edges)


def twin_tags(tags: Sequence[object], kept: Sequence[object] = ()) -> tuple[str, str] | None:
    """Two tags of ``tags`` that a tag filter takes for one (:func:`md_cg.script.tag_fold`:
    the same text in another Unicode form, ``r\u00e9union`` and ``re\u0301union``, letter
    case, ``a`` and ``A``, or width, ``ｐｒｏｊｅｃｔ`` and ``project``), not both of them
    ``kept`` (held by the stored node: a store that holds both keeps them), or None."""
    seen: dict[str, str] = {}
    for tag in tags:
        if type(tag) is str:
            other = seen.setdefault(tag_fold(tag), tag)
            if other != tag and not (tag in kept and other in kept):
                return other, tag
    return None


def _twin_tags_error(node: Node, twins: tuple[str, str]) -> InvalidNodeError:
    """:func:`unusable`'s refusal of two tags :func:`twin_tags` found, naming both: those
    differing in Unicode form only print alike (escaped, session 41); others (letter case,
    width: ``--tag a --tag A`` stored both before session 42) are one tag to every filter."""
    first, second = twin_labels(*twins)
    if nfc(twins[0]) == nfc(twins[1]):
        why = "they differ in Unicode form only (composed, decomposed) and print alike"
    else:
        why = "a tag filter takes them for one tag (letter case, width and Unicode form aside)"
    return InvalidNodeError(
        f"node {node.id!r}: field 'tags' holds the tag {first} twice, also as {second}: {why}; "
        "give the tag once",
        field="tags",
        value=node.tags,
        node_id=node.id,
    )


#: Tags :func:`unusable` passed lately. Its verdict on a tag is one of the tag's text
#: alone, and an agent writes the same few tags again and again: a tag seen passing is
#: not checked again (the three checks of a CJK tag cost ~2 us each; a set lookup 40 ns).
#: Short plain strings only, at most :data:`_USABLE_TAGS_MAX` (emptied when full).
_USABLE_TAGS: set[str] = set()
_USABLE_TAGS_MAX = 4096
_USABLE_TAG_CHARS = 256


def _usable_tag(tag: str) -> None:
    """Remember ``tag`` as one :func:`unusable` passed, unless it is not in NFC (a tag not in
    NFC is looked at each time, as before session 42)."""
    if type(tag) is str and len(tag) <= _USABLE_TAG_CHARS and (tag.isascii() or is_nfc(tag)):
        if len(_USABLE_TAGS) >= _USABLE_TAGS_MAX:
            _USABLE_TAGS.clear()
        _USABLE_TAGS.add(tag)


def unsafe_edge_target(
    node: Node, kept_edges: Sequence[object] = (), held: Callable[[str], bool] | None = None
) -> UnsafeIdError | None:
    """The UnsafeIdError (returned, not raised) of the first edge target of ``node`` that no
    new id could be (:func:`check_new_id`: an invisible character, a Windows device name):
    ``n00037\u200b`` printed as ``n00037`` and linked to nothing, where ``update`` of it was
    refused. For new input, as :func:`unusable`: a target one of ``kept_edges`` (the stored
    node's) had, or ``held(target)`` (a memory the caller sees has that id: a file an
    older version wrote, ``prn.md``) is not refused; files, ``add_many`` and imports carry
    what they hold."""
    if not isinstance(node.edges, list):
        return None
    kept = {e.target for e in kept_edges if isinstance(e, Edge)}
    for i, value in enumerate(node.edges):
        target = value.target if isinstance(value, Edge) else Edge.from_value(value, node_id=node.id).target
        if target in kept or (held is not None and isinstance(target, str) and held(target)):
            continue
        try:
            check_new_id(target, what=f"edge target (edges[{i}].target)")
        except UnsafeIdError as exc:
            return UnsafeIdError(f"node {node.id!r}: {exc}", field="edges", value=target, node_id=node.id)
    return None


def _unusable_edge(node: Node, kept_edges: Sequence[object]) -> InvalidNodeError | None:
    """:func:`unusable` of ``node.edges`` (a list): what is new in them beside ``kept_edges``."""
    had = [e if isinstance(e, Edge) else None for e in kept_edges]
    self_linked = any(e is not None and e.target == node.id for e in had)
    kept_conf = {e.confidence for e in had if e is not None}
    for value in node.edges:
        edge = value if isinstance(value, Edge) else Edge.from_value(value, node_id=node.id)
        if edge.target == node.id and not self_linked:
            return InvalidNodeError(
                f"node {node.id!r}: an edge to itself ({edge.type}); edges link two memories",
                field="edges",
                value=edge.target,
                node_id=node.id,
            )
        conf = edge.confidence
        if conf in kept_conf:
            continue
        if isinstance(conf, int | float) and not isinstance(conf, bool) and not 0 <= conf <= 1:
            return InvalidNodeError(
                f"node {node.id!r}: the edge to {edge.target!r} has confidence {conf!r}; it must be 0..1",
                field="edges",
                value=conf,
                node_id=node.id,
            )
    return None
