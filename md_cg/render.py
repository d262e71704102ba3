"""How the command line and the MCP server show things: tables, lines, times, snippets.

The surfaces (:mod:`md_cg.cli`, :mod:`md_cg.mcp_server`, :mod:`md_cg.demo`)
share these helpers so that a search result, a listed memory or an instant
looks the same wherever it is shown:

* rich renderables for people: :func:`results_table`, :func:`meta_summary`,
  :func:`health_table`, :func:`entries_table`, :func:`sync_lines`,
  :func:`id_list`, :func:`node_text`;
* bounded text for agents: :func:`snippet` (a few hundred characters of a
  body around what the query matched), :func:`clip`, and the JSON form of a
  node, :func:`node_dict`;
* times: :func:`iso` (an instant as ISO 8601 UTC) and :func:`parse_when`
  (what ``--since``/``--until`` and the MCP ``list`` tool accept: an ISO
  date or time, or a duration back from now such as ``7d``).

``rich`` is imported only by the functions that build renderables, so the
MCP server does not load it.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from .errors import FIX_THEN_SYNC, SYNC_FIX, UNSCOPED_SYNC_FIX, InvalidArgumentError, recorded_note
from .script import (
    WORD_CHAR,
    cut_back,
    distinct_labels,
    folds_apart,
    is_cjk,
    match_fold,
    splits_cluster,
    terminal_safe,
)

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    from .graph import Neighbour
    from .index import Entry
    from .node import Node
    from .reports import HealthReport, SyncReport
    from .search import SearchResult

#: Colour of each qualification state in tables.
STATE_STYLE = {"ACCEPT": "green", "REJECT": "red", "DEFER": "yellow", "BLINDSPOT": "magenta"}
#: Characters of body text a search result carries (:func:`snippet`).
SNIPPET_CHARS = 160
#: Cells a table keeps for titles before it puts them under the ids (:func:`entries_table`).
TITLE_MIN = 16
#: Seconds per unit of a duration (``7d``, ``12h``, ``30m``, ``45s``, ``2w``).
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: The first and the last instant an ISO 8601 date can show (years 1 and 9999, UTC), in epoch seconds.
EARLIEST = datetime(1, 1, 1, tzinfo=UTC).timestamp()
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


# -- text ------------------------------------------------------------------------------


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the last one an ellipsis when cut; the cut
    never parts a grapheme cluster (:func:`cut_back`)."""
    return text if len(text) <= width else text[: cut_back(text, max(0, width - 1))] + "…"


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


#: Characters of a body a snippet reads, from its start (:func:`snippet`): a match
#: further in is not shown. With :data:`SNIPPET_TERMS` this bounds a snippet's cost
#: whatever the body and the query (session 38: six bodies of 700 KB in full-width
#: letters and a query of 3,000 words took 22 s to show, every term looked for in
#: every line).
SNIPPET_SCAN = 100_000
#: Distinct terms a snippet looks for at most, of each length group: the first ones
#: given (the index ranks a query on at most as many, ``textindex.MAX_QUERY_TERMS``; a
#: test holds the two equal: this module does not import the index, numpy with it, so
#: that ``mdcg --help`` starts without them).
SNIPPET_TERMS = 128


def snippet(
    body: str, terms: Iterable[str] = (), width: int = SNIPPET_CHARS, *, title: str | None = None
) -> str:
    """At most ``width`` characters of ``body`` that show why it was found.

    The body's first line is its title (shown apart), so the snippet is taken
    from the first later line that holds one of ``terms`` (the query terms the
    result matched: stems, and the words as the query said them), from that
    line on; whitespace runs become one space. Terms and lines are compared
    as the index compares words (:func:`md_cg.script.match_fold`: NFKC, case
    and accents folded, so ``cafe`` finds ``Café``, ``coffee`` finds
    ``ｃｏｆｆｅｅ``, ``h2o`` finds ``H₂O``). Longer terms are looked for first;
    a term of one character (a CJK character alone) only when no longer one
    occurs. In a line, the first occurrence at the start of a word (``art`` in
    ``the art``, not in ``start``) is taken before one inside a word. Only the
    first :data:`SNIPPET_TERMS` distinct terms of each group are looked for,
    and only in the first :data:`SNIPPET_SCAN` characters of the body.

    When the match starts beyond a third of ``width`` into its line, the
    snippet is a window that starts shortly before it -- at a clause end
    (``。！？；，、``) or a space when one lies up to ``width // 4``
    characters before it -- with ``…`` first. A snippet cut short ends with
    ``…``, and a cut never parts a grapheme cluster (:func:`cut_back`). (Before
    session 37's MCP review the snippet was always the start of the line: a
    match past ``width`` characters into a long line, a CJK paragraph, was
    never shown.)

    A match in the title line alone is shown the same way when ``title`` (the
    title as the reply shows it, cut; None: :func:`md_cg.index.title_of` of
    the body) holds none of the terms looked for: a one-line dialogue turn
    whose match lies past the cut title. Otherwise, and when nothing matches,
    the snippet is the start of the second non-blank line on, else of the first.
    """
    read = body if len(body) <= SNIPPET_SCAN else body[: cut_back(body, SNIPPET_SCAN)]
    more = len(read) < len(body)  # the body goes on past what is read: a cut there ends with …
    lines = [line for line in (" ".join(line.split()) for line in read.splitlines()) if line]
    if not lines:
        return ""
    folded = _folded_lines(lines)
    for group in _term_groups(terms):
        found = _first_match(folded, group, 1)
        if found is not None:
            i, at = found
            return _window(" ".join(lines[i:]), _unfolded(lines[i], at), width, more)
        found = _first_match(folded, group, 0, 1)
        if found is not None:
            if title is None:
                from .index import title_of  # here: the index (numpy) only when a snippet needs it

                title = title_of(body)
            shown = _fold(" ".join(title.split()))
            if any(t in shown for t in group):
                break  # the title shows why it was found
            return _window(" ".join(lines), _unfolded(lines[0], found[1]), width, more)
    return _window(" ".join(lines[1:] if len(lines) > 1 else lines), None, width, more)


#: Characters a snippet window may start after, besides a space: the clause and
#: sentence ends of CJK text, which has no spaces (:func:`snippet`).
CLAUSE_ENDS = frozenset("。！？；，、")
#: Characters folded at a time to find where a match in the folded text is (:func:`_unfolded`).
_FOLD_BLOCK = 512
_fold = match_fold


def _folded_lines(lines: Sequence[str]) -> list[str]:
    """Each of ``lines`` folded (:func:`md_cg.script.match_fold`), in one call: a line
    break folds alone, and nothing folds to one."""
    folded = _fold("\n".join(lines)).split("\n")
    return folded if len(folded) == len(lines) else [_fold(line) for line in lines]


def _term_groups(terms: Iterable[str]) -> list[list[str]]:
    """The folded ``terms``, once each, their whitespace runs one space: those of two
    characters or more, then those of one; at most :data:`SNIPPET_TERMS` of each."""
    wanted = dict.fromkeys(f for f in (" ".join(_fold_term(t).split()) for t in terms if t) if f)
    groups = [
        list(itertools.islice((t for t in wanted if len(t) > 1), SNIPPET_TERMS)),
        list(itertools.islice((t for t in wanted if len(t) == 1), SNIPPET_TERMS)),
    ]
    return [g for g in groups if g]


def _first_match(
    folded: Sequence[str], terms: Sequence[str], first: int, stop: int | None = None
) -> tuple[int, int] | None:
    """The first of the ``folded`` lines from ``first`` (up to ``stop``) that holds one of
    ``terms``, and where in it the first of them occurs, an occurrence at the start of a
    word before any other (:func:`_word_start`); None when none does. Each term is looked
    for once, only as far as the best line so far: the cost is bounded by the terms
    times the text, whatever the number of lines."""
    text = "\n".join(folded[first:stop])
    limit = len(text)  # the end of the first line found so far
    hit: dict[str, int] = {}
    for term in terms:
        at = text.find(term, 0, limit)
        if at >= 0:
            hit[term] = at
            end = text.find("\n", at)
            limit = len(text) if end < 0 else end
    if not hit:
        return None
    start = text.rfind("\n", 0, limit) + 1
    word = _word_start(text[start:limit], [t for t, at in hit.items() if at >= start])
    at = min(hit.values()) - start if word is None else word
    return first + text.count("\n", 0, start), at


def _word_start(folded: str, terms: Sequence[str]) -> int | None:
    """Where the first of ``terms`` starts a word in ``folded``: after no letter or digit,
    or anywhere for a term that starts with a CJK character (CJK text has no spaces). A
    few terms are looked for one by one, more in one pass of one alternation (the
    patterns compiled once: compiling the letter class takes 0.3 ms)."""
    if len(terms) > _ONE_BY_ONE:
        found = _alternation(tuple(sorted(terms))).search(folded)
        return None if found is None else found.start()
    starts = [m.start() for m in (_word_pattern(t).search(folded) for t in terms) if m is not None]
    return min(starts) if starts else None


#: Terms found in a line looked for at word starts one by one; more in one alternation.
_ONE_BY_ONE = 8


@functools.lru_cache(maxsize=1024)
def _word_pattern(term: str) -> re.Pattern[str]:
    """``term`` at the start of a word (anywhere for a CJK term)."""
    return re.compile(re.escape(term) if is_cjk(term) else f"(?<!{WORD_CHAR}){re.escape(term)}")


@functools.lru_cache(maxsize=64)
def _alternation(terms: tuple[str, ...]) -> re.Pattern[str]:
    """Any of ``terms`` at the start of a word (anywhere for a CJK term), in one pattern."""
    words = "|".join(re.escape(t) for t in terms if not is_cjk(t))
    cjk = "|".join(re.escape(t) for t in terms if is_cjk(t))
    parts = ([f"(?<!{WORD_CHAR})(?:{words})"] if words else []) + ([f"(?:{cjk})"] if cjk else [])
    return re.compile("|".join(parts))


#: The folding of a term (terms repeat from one result to the next).
_fold_term = functools.lru_cache(maxsize=4096)(match_fold)


def _unfolded(text: str, at: int) -> int:
    """The index in ``text`` of the character whose folding holds position ``at`` of the
    folded text -- the first character of a piece folded whole. Folding may change
    lengths (``ß`` -> ``ss``, ``ｃ`` -> ``c``, a combining accent -> nothing) and joins
    some characters (decomposed Hangul jamo into a syllable), but folds apart at
    :func:`md_cg.script.folds_apart`: the folded lengths are summed, a block of about
    :data:`_FOLD_BLOCK` characters at a time, then a piece at a time in the block that
    holds ``at``."""
    if text.isascii():
        return at
    if at < len(text) and folds_apart(text, at) and len(_fold(text[:at])) == at:
        return at  # as often: the text before folds to as many characters
    done = start = 0  # ``done``: the folded length of text[:start]
    while True:
        end = _fold_cut(text, start + _FOLD_BLOCK)
        size = len(_fold(text[start:end]))
        if done + size > at or end >= len(text):
            break
        done, start = done + size, end
    while start < end:
        piece = _fold_cut(text, start + 1)
        done += len(_fold(text[start:piece]))
        if done > at:
            return start
        start = piece
    return max(0, len(text) - 1)  # not reached for a position of the folded text


def _fold_cut(text: str, at: int) -> int:
    """The first place at or after ``at`` where ``text`` folds apart (or its end)."""
    while at < len(text) and not folds_apart(text, at):
        at += 1
    return min(at, len(text))


def _clip_from(text: str, start: int, width: int, more: bool = False) -> str:
    """``text`` from ``start`` in at most ``width`` characters: ``…`` first when ``start``
    is not 0, ``…`` last when cut (or when ``more`` text follows it)."""
    lead = "…" if start else ""
    room = width - len(lead)
    if len(text) - start <= room and not more:
        return lead + text[start:]
    end = cut_back(text, min(start + room - 1, len(text)), start)
    return lead + text[start:end] + "…"


def _window(text: str, at: int | None, width: int, more: bool = False) -> str:
    """``text`` in at most ``width`` characters: from its start, or from shortly before
    ``at`` (a match) when it lies beyond a third of ``width``; ``more``: the body goes on."""
    if width <= 0:
        return ""
    if len(text) <= width and not more:
        return text
    if at is None or at <= width // 3 or width < 3:
        return _clip_from(text, 0, width, more)
    return _clip_from(text, _window_start(text, at, width), width, more)


def _window_start(text: str, at: int, width: int) -> int:
    """Where a window that shows the match at ``at`` starts: the start of a word or a
    clause nearest to ``width // 8`` characters before it, within ``width // 4``;
    when there is none, ``width // 8`` characters before it."""
    target, back = at - width // 8, width // 4
    spots = [b for b in range(max(1, at - back), at + 1) if _boundary(text, b)]
    if spots:
        return min(spots, key=lambda b: (abs(b - target), b))
    start = max(target, 1)
    while start < at and splits_cluster(text, start):
        start += 1
    return start


def _boundary(text: str, at: int) -> bool:
    """Whether a word or a clause starts at ``at``: after a space or a CJK clause end."""
    if not 0 < at < len(text) or text[at] == " " or splits_cluster(text, at):
        return False
    return text[at - 1] == " " or text[at - 1] in CLAUSE_ENDS


# -- times -----------------------------------------------------------------------------


def iso(seconds: float | None) -> str | None:
    """An instant as ISO 8601 UTC to the second (``2026-12-01T09:30:00Z``); ``None`` stays ``None``."""
    if seconds is None or not math.isfinite(seconds):
        return None
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.replace(microsecond=0, tzinfo=None).isoformat() + "Z"  # year 1 as 0001, not 1


def retention(memory: Any) -> dict[str, Any]:
    """A stored memory's retention as replies show it (a :class:`Node` or an index
    entry): ``{"tier": "temp", "expires": ISO}`` for a temporary memory, else
    ``{"tier": "long"}`` (no tier written reads as long)."""
    if getattr(memory, "retention_tier", None) == "temp":
        return {"tier": "temp", "expires": iso(memory.expires_at)}
    return {"tier": "long"}


#: Links of a chain of supersedes edges :func:`current_version` follows at most.
CHAIN_LIMIT = 50


def iso_window(seconds: float) -> str | None:
    """A window bound as ISO 8601 UTC: to the second, or to the microsecond when it has
    any (``until 2026-06-30`` is ``2026-06-30T23:59:59.999999Z``: the second alone
    would say the last 999,999 µs are left out)."""
    shown = iso(seconds)
    if shown is None:
        return None
    micros = datetime.fromtimestamp(seconds, UTC).microsecond  # as iso() rounds it
    return f"{shown[:-1]}.{micros:06d}Z" if micros else shown


def current_version(store: Any, node_id: str) -> str | None:
    """The current version of a superseded memory, as the caller sees it: its successor
    (``store.successors``: live, in the caller's scope; the first by id if several),
    followed while that one is superseded itself (a superseded by b superseded by c:
    c), at most :data:`CHAIN_LIMIT` links; a cycle of edges stops at the last memory
    before it repeats. None when ``node_id`` is not superseded by any memory. ``get``
    names it as ``superseded_by``."""
    seen = {node_id}
    newer = None
    at = node_id
    for _ in range(CHAIN_LIMIT):
        found = store.successors(at)
        if not found or found[0] in seen:
            break
        newer = at = found[0]
        seen.add(at)
    return newer


def parse_when(text: str, *, name: str = "time", now: float | None = None, end_of_day: bool = False) -> float:
    """Seconds since the epoch for an ISO 8601 date/time or a duration back from ``now``.

    ``2026-05-01`` (midnight UTC; with ``end_of_day``, the last microsecond of that
    day, ``23:59:59.999999`` UTC: the upper bound of a window, so that ``until
    2026-05-01`` takes in the whole day, as a person means it), a date with an offset
    (``2026-05-01+08:00``, ``2026-05-01Z``: that calendar day in that offset, its
    first or, with ``end_of_day``, its last microsecond), ``2026-05-01T12:00``,
    ``2026-05-01T12:00:00+02:00`` (a time without an offset is UTC); ``7d``, ``12h``,
    ``30m``, ``45s``, ``2w`` (that long before now). Anything else, or an instant
    outside the years 1 to 9999 (``99999999d`` back), raises
    :class:`~md_cg.errors.InvalidArgumentError` naming ``name``.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError(f"{name} is empty; give an ISO date or a duration such as 7d", name=name)
    match = _DURATION.match(text)
    if match:
        span = float(match.group(1)) * DURATION_UNITS[match.group(2).lower()]
        return _in_range((time.time() if now is None else now) - span, name, text)
    alone = _date_alone(text.strip(), name)
    if alone is not None:
        day, zone = alone
        if end_of_day:
            last = datetime(day.year, day.month, day.day, 23, 59, 59, 999999, tzinfo=zone)
            return _in_range(min(last.timestamp(), LATEST), name, text)  # 9999-12-31: the last a reply shows
        return _in_range(datetime(day.year, day.month, day.day, tzinfo=zone).timestamp(), name, text)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(
            f"{name} {text!r}: expected an ISO date or time (2026-05-01, 2026-05-01T12:00Z) "
            "or a duration back from now (7d, 12h, 30m, 45s, 2w)",
            name=name,
            value=text,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _in_range(moment.timestamp(), name, text)


#: The offset at the end of a date alone: Z, +08:00, +0800, +08 (``2026-05-01+08:00``).
_DATE_OFFSET = re.compile(r"(?:[Zz]|([+-])(\d{2})(?::?(\d{2}))?)$")


def _date_alone(text: str, name: str) -> tuple[date, timezone] | None:
    """A date without a time of day (``2026-05-01``, ``20260501``), with an offset or
    ``Z`` or none (UTC): the day and its zone; None for anything else. An offset of
    24 hours or more, or of 60 minutes or more, raises naming ``name``."""
    try:
        return date.fromisoformat(text), UTC
    except ValueError:
        pass
    found = _DATE_OFFSET.search(text)
    if found is None or found.start() == 0:
        return None
    try:
        day = date.fromisoformat(text[: found.start()])
    except ValueError:
        return None  # a date-time, or nothing: datetime.fromisoformat says
    sign, hours, minutes = found.groups()
    if sign is None:
        return day, UTC
    h, m = int(hours), int(minutes or 0)
    if h >= 24 or m >= 60:
        raise InvalidArgumentError(
            f"{name} {text!r}: the offset {found.group(0)!r} is not one (hours 00-23, minutes 00-59)",
            name=name,
            value=text,
        )
    span = timedelta(hours=h, minutes=m)
    return day, timezone(-span if sign == "-" else span)


def _in_range(seconds: float, name: str, text: str) -> float:
    """``seconds`` if it is an instant an ISO date can show (years 1 to 9999 UTC), else
    :class:`~md_cg.errors.InvalidArgumentError` naming ``name``."""
    if not (math.isfinite(seconds) and EARLIEST <= seconds <= LATEST):
        raise InvalidArgumentError(
            f"{name} {text!r} is out of range: the time must fall in the years 1 to 9999 (UTC)",
            name=name,
            value=text,
        )
    return seconds


def age(seconds: float | None, now: float | None = None) -> str:
    """How long ago an instant was, in the largest whole unit (``3d``, ``5h``, ``now``).

    An instant more than a minute ahead (a clock set wrong on the machine that
    wrote it) says so: ``in 3d``.
    """
    if seconds is None:
        return "-"
    span = (time.time() if now is None else now) - seconds
    if abs(span) < 60:
        return "now"
    ahead = span < 0
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if abs(span) >= size:
            amount = f"{int(abs(span) // size)}{unit}"
            return f"in {amount}" if ahead else amount
    return "now"  # pragma: no cover - the loop always returns for |span| >= 60


# -- rich renderables --------------------------------------------------------------------
#
# Every cell is a rich Text, so titles, ids, tags and snippets show as they are: no
# console markup ("[bold]") and no emoji codes (":smile:") are read in them; and every
# text from a memory or a file name is :func:`~md_cg.script.terminal_safe` first, so
# that no control in it (an escape sequence, a bidi override) reaches the terminal. A table
# takes one of three forms, by the width it is given (a terminal's; None: any):
# *wide*, a column each; *stacked*, the short columns and the id, the rest on a line
# under the id; and, when even the id does not fit in a table, *lines*: each item's id
# whole on a line of its own (wider than the terminal if it must be: the CLI prints
# with ``crop=False``), the rest indented under it and cut to the width.


def _text(value: str, style: str = "") -> Text:
    from rich.text import Text

    return Text(value, style=style)


def _state_cell(state: str | None) -> Text:
    if state is None:
        return _text("-")
    return _text(state, STATE_STYLE.get(state, "white"))


def _joined(parts: Iterable[Text | str]) -> Text:
    """The non-empty ``parts`` joined by `` · ``; a str is taken literally."""
    from rich.text import Text

    pieces = [p if isinstance(p, Text) else Text(p) for p in parts]
    return Text(" · ").join(p for p in pieces if p.plain)


def _box(widths: Sequence[int]) -> int:
    """Cells a table takes whose columns hold this many cells each (padding and borders included)."""
    return sum(widths) + 3 * len(widths) + 1


def _fits(widths: Sequence[int], width: int | None, rest: int = TITLE_MIN) -> bool:
    """True when columns of these cell widths and one more of ``rest`` cells (for the
    title) fit in ``width`` (None: any width)."""
    return width is None or _box([*widths, rest]) <= width


def _room(widths: Sequence[int], width: int | None) -> int | None:
    """Cells left for the content of a last column after columns of these widths (None: any)."""
    return None if width is None else width - _box([*widths, 0])


def _cells(texts: Iterable[str], floor: int) -> int:
    """The widest of ``texts`` in terminal cells (a CJK character takes two), at least ``floor``."""
    from rich.cells import cell_len

    return max([floor, *(cell_len(t) for t in texts)])


def _whole(text: Text | str, indent: int = 0) -> Text:
    """A line never cut: wider than the terminal if it must be (printed with ``crop=False``)."""
    from rich.text import Text

    line = Text(" " * indent) + (text if isinstance(text, Text) else Text(text))
    line.no_wrap, line.overflow = True, "ignore"
    return line


def _cut(text: Text, indent: int = 2) -> Text:
    """A line cut to the width (an ellipsis last), indented."""
    from rich.text import Text

    line = Text(" " * indent) + text
    line.no_wrap, line.overflow = True, "ellipsis"
    return line


def _folded(text: Text, indent: int = 2) -> Padding:
    """Text wrapped at the width (a word wider than it folded), indented."""
    from rich.padding import Padding

    text.overflow = "fold"
    return Padding(text, (0, 0, 0, indent), expand=False)


def _lines(header: str, items: Iterable[Iterable[Any]]) -> Group:
    """The *lines* form: a header cut to the width, then each item's lines (:func:`_whole`,
    :func:`_cut`, :func:`_folded`; None: left out)."""
    from rich.console import Group
    from rich.text import Text

    out: list[Any] = [Text(header, style="bold", no_wrap=True, overflow="ellipsis")]
    for lines in items:
        out += [line for line in lines if line is not None]
    return Group(*out)


def _result_title(result: SearchResult) -> Text:
    from rich.text import Text

    # the mark goes first so that a long title, cut by the column, never hides it
    title = Text("(filler) ", style="dim") if result.filler else Text()
    return title.append(clip(terminal_safe(result.title), 60))


def results_table(
    results: Sequence[SearchResult], *, basis: bool = False, width: int | None = None
) -> Table | Group:
    """Search results: rank, tier, state, score, id and title (with ``basis`` under it).

    A result without evidence of being about the query (``filler``) is marked
    ``(filler)`` before its title. Ids are never cut: when the columns and a
    title do not fit in ``width`` cells (a terminal's width; None: any), tier,
    state and title go on a second line under the id; when the id does not fit
    in a table either, each result is a line ``RANK. ID`` with the rest under it.
    """
    from rich.table import Table

    rows = [
        (
            str(i),
            r.tier,
            _state_cell(r.state),
            f"{r.score:.2f}",
            terminal_safe(r.id),
            _result_title(r),
            terminal_safe(r.basis or ""),
        )
        for i, r in enumerate(results, 1)
    ]
    heads = (("#", "right"), ("tier", "left"), ("state", "left"), ("score", "right"), ("id", "left"))
    widths = [_cells((str(row[n]) for row in rows), len(name)) for n, (name, _) in enumerate(heads)]
    room = _room([widths[0], widths[3]], width)
    if not _fits(widths, width) and room is not None and room < widths[4]:
        header = "#. id / score · tier · state · title" + (" / why" if basis else "")
        return _lines(
            header,
            (
                (_whole(f"{n}. {i}"), _cut(_joined((score, tier, state, title))), _folded(_text(b, "dim")))
                if basis
                else (_whole(f"{n}. {i}"), _cut(_joined((score, tier, state, title))))
                for n, tier, state, score, i, title, b in rows
            ),
        )
    table = Table(show_lines=basis)
    if _fits(widths, width):
        for (name, justify), cells in zip(heads, widths, strict=True):
            table.add_column(name, justify=justify, no_wrap=True, min_width=cells)  # type: ignore[arg-type]
        table.add_column("title / why" if basis else "title", overflow="fold" if basis else "ellipsis")
        for n, tier, state, score, node_id, title, b in rows:
            if basis:
                title = title + _text("\n" + b, "dim")
            table.add_row(_text(n), _text(tier), state, _text(score), _text(node_id), title)
        return table
    table.add_column("#", justify="right", no_wrap=True, min_width=widths[0])
    table.add_column("score", justify="right", no_wrap=True, min_width=widths[3])
    # the id fits in ``room``: only the line under it is cut (folded, with the basis)
    table.add_column(
        "id", no_wrap=not basis, overflow="fold" if basis else "ellipsis", min_width=widths[4], max_width=room
    )
    for n, tier, state, score, node_id, title, b in rows:
        cell = _text(node_id + "\n") + _joined((tier, state, title))
        if basis:
            cell += _text("\n" + b, "dim")
        table.add_row(_text(n), _text(score), cell)
    return table


def shown_results(results: Sequence[Any], *, fill: bool) -> tuple[list[Any], int, list[str]]:
    """The search ``results`` a surface shows (``mdcg search``), how many filler results
    were left out (unless ``fill``), and the ids of the hits left out because a hand edit
    broke their files since the index read them (:func:`md_cg.access.readable_hits`: each
    shown hit's file is read, and each such hit warned of)."""
    from .access import readable_hits  # the store's modules: not loaded by `mdcg --help`

    shown = [r for r in results if fill or not r.filler]
    kept, unreadable = readable_hits(shown)
    return kept, len(results) - len(shown), unreadable


def meta_summary(meta: dict[str, Any], *, omitted: int = 0, unreadable: int = 0) -> Text:
    """One line summing up a search's ``meta``: how deep, where, how much, how long.

    ``omitted``: filler results left out of the display (said at the end); ``unreadable``:
    hits left out because their files no longer read as memories (each warned of).
    """
    buckets = ", ".join(meta.get("buckets") or []) or "none"
    routed = " (routed)" if meta.get("routed") else ""
    scanned, size = meta.get("scanned", 0), meta.get("store_size", 0)
    share = meta.get("scanned_share", 0.0)
    negatives = list(meta.get("covered_neg") or [])
    neg = ", ".join(negatives) or "none"
    total_neg = meta.get("covered_neg_total", len(negatives))
    if total_neg > len(negatives):
        neg += f" (+{total_neg - len(negatives)} more)"
    total = (meta.get("timing_ms") or {}).get("total", 0.0)
    line = (
        f"deepest tier {meta.get('tier')} · buckets: {buckets}{routed} · "
        f"scanned {scanned}/{size} ({share:.1%}) · big domain: {meta.get('big_domain') or 'none'} · "
        f"covered_neg: {neg} · {total:.1f} ms"
    )
    window = meta.get("filter")
    if window:
        tag = window.get("tag")
        parts = [] if tag is None else [f"tag {tag}" if isinstance(tag, str) else f"tags {' + '.join(tag)}"]
        parts += [
            f"{key} {iso_window(window[key])}" for key in ("since", "until") if window.get(key) is not None
        ]
        n = window.get("matching", 0)
        line += f" · filter: {', '.join(parts)} ({n} {'memory passes' if n == 1 else 'memories pass'})"
    if omitted:
        line += f" · {omitted} filler result(s) without evidence omitted (--fill shows them)"
    if unreadable:
        line += f" · {unreadable} result(s) left out: the file no longer reads as a memory (see the warning)"
    return _text(terminal_safe(line))


def _health_line(report: HealthReport) -> Text:
    b = report.buckets
    n = len(report.findings)
    verdict = f"{n} finding(s)" if not report.ok else f"OK, {n} advisory finding(s)" if n else "OK"
    layers = ", ".join(f"{k} {v}" for k, v in report.layers.items() if v)
    nodes = f"{report.nodes} nodes ({layers})" if layers else f"{report.nodes} nodes"
    if not report.nodes:
        nodes = "empty store (0 nodes)"
    spread = (
        f"{b.buckets} buckets, largest {b.largest_share:.1%}, expected scan {b.expected_scan:.1%}"
        if b.buckets
        else "no buckets"
    )
    return _text(f"health: {verdict} · {nodes} · {spread}")


#: Findings of one kind a health table shows; the rest are one row that counts them.
HEALTH_ROWS = 10
#: What the row counting the findings of a kind left out adds (how to act on them all).
_HEALTH_MORE = {"expired": "; `mdcg sweep` removes them"}


def health_rows(report: HealthReport, limit: int = HEALTH_ROWS) -> list[tuple[str, str, str, str]]:
    """``(severity, kind, node, detail)`` of each finding a health table shows: the first
    ``limit`` of each kind, then one row saying how many more of that kind there are (in
    place of the first left out) -- 5,000 expired memories are not 15,000 lines;
    ``--json`` lists them all."""
    twins = distinct_labels(f.node_id for f in report.findings if f.kind == "twin_id" and f.node_id)
    total: dict[str, int] = {}
    for f in report.findings:
        total[f.kind] = total.get(f.kind, 0) + 1
    shown: dict[str, int] = {}
    rows = []
    for f in report.findings:
        n = shown[f.kind] = shown.get(f.kind, 0) + 1
        if n <= limit:
            node = twins.get(f.node_id or "", terminal_safe(f.node_id or ""))
            detail = f.detail + (f" ({f.path})" if f.path else "")
            rows.append((f.severity, f.kind, node, terminal_safe(detail)))
        elif n == limit + 1:
            more = total[f.kind] - limit
            why = f"... and {more:,} more {f.kind} finding(s) (`mdcg health --json` lists every one)"
            rows.append((f.severity, f.kind, "", why + _HEALTH_MORE.get(f.kind, "")))
    return rows


def health_table(report: HealthReport, *, width: int | None = None) -> Group:
    """A one-line verdict of a health check, then a table of its findings (if any): at
    most :data:`HEALTH_ROWS` of one kind, then a row counting the rest (:func:`health_rows`).

    When severity, kind, node id and some detail do not fit in ``width`` cells
    (None: any), the detail goes under the node id, in one column folded at
    spaces; when the id does not fit in a table either, each finding is a line
    ``SEVERITY · KIND · NODE`` with the detail folded under it. An id is never cut."""
    from rich.console import Group
    from rich.table import Table

    line = _health_line(report)
    if not report.findings:
        return Group(line)
    rows = health_rows(report)
    heads = ("severity", "kind", "node")
    widths = [_cells((r[i] for r in rows), len(name)) for i, name in enumerate(heads)]
    room = _room(widths[:2], width)
    if not _fits(widths, width, 24) and room is not None and room < widths[2]:
        found = ((_whole(_joined(r[:3])), _folded(_text(r[3], "dim"))) for r in rows)
        return Group(line, _lines("severity · kind · node / detail", found))
    table = Table()
    table.add_column("severity", no_wrap=True, min_width=widths[0])
    table.add_column("kind", no_wrap=True, min_width=widths[1])
    if _fits(widths, width, 24):
        table.add_column("node", no_wrap=True, min_width=widths[2])
        table.add_column("detail", overflow="fold")
        for severity, kind, node_id, detail in rows:
            table.add_row(_text(severity), _text(kind), _text(node_id), _text(detail))
    else:
        table.add_column("node / detail", overflow="fold", min_width=widths[2], max_width=room)
        for severity, kind, node_id, detail in rows:
            cell = _text(node_id + "\n") + _text(detail, "dim") if node_id else _text(detail)
            table.add_row(_text(severity), _text(kind), cell)
    return Group(line, table)


def entries_table(
    entries: Sequence[Entry], *, now: float | None = None, width: int | None = None
) -> Table | Group:
    """Listed memories: when last changed, layer, id, tags and title.

    Ids are never cut: when the columns and a title do not fit in ``width``
    cells (a terminal's width; None: any), the time is its age alone and the
    layer, tags and title go on a second line under the id; when the id does
    not fit in a table either, each memory is its id on a line, the rest under it.
    """
    from rich.table import Table

    rows = []
    for e in entries:
        when = e.changed or None
        tags, title = terminal_safe(", ".join(e.tags)), clip(terminal_safe(e.title), 80)
        rows.append((iso(when) or "-", age(when, now), e.layer, terminal_safe(e.id), tags, title))
    widths = [_cells((f"{r[0]} ({r[1]})" for r in rows), 7), _cells((r[2] for r in rows), 5)]
    widths.append(_cells((r[3] for r in rows), 2))
    ages = _cells((r[1] for r in rows), 3)
    room = _room([ages], width)
    table = Table()
    if _fits(widths, width, 8 + 3 + TITLE_MIN):  # a few cells of tags, their column, a title
        table.add_column("updated", no_wrap=True, min_width=widths[0])
        table.add_column("layer", no_wrap=True, min_width=widths[1])
        table.add_column("id", no_wrap=True, min_width=widths[2])
        table.add_column("tags", overflow="ellipsis", max_width=30)
        table.add_column("title", overflow="ellipsis")
        for stamp, ago, layer, node_id, tags, title in rows:
            table.add_row(_text(f"{stamp} ({ago})"), _text(layer), _text(node_id), _text(tags), _text(title))
        return table
    if room is not None and room < widths[2]:
        found = ((_whole(r[3]), _cut(_joined(r[1:3] + r[4:]))) for r in rows)
        return _lines("id / age · layer · tags · title", found)
    table.add_column("age", no_wrap=True, min_width=ages)
    title_head = "id / layer · tags · title"
    table.add_column(title_head, no_wrap=True, overflow="ellipsis", min_width=widths[2], max_width=room)
    for _, ago, layer, node_id, tags, title in rows:
        second = _joined((layer, tags, title))
        second.stylize("dim")
        table.add_row(_text(ago), _text(node_id + "\n") + second)
    return table


def neighbours_table(
    found: Sequence[Neighbour], titles: Mapping[str, str], *, width: int | None = None
) -> Table | Group:
    """Linked nodes: depth, direction, edge type, id, the node reached from, title
    (``titles``: id -> title; a missing id is a dangling edge).

    Ids are never cut: when the columns and a title do not fit in ``width``
    cells (None: any), the type, the node reached from and the title go on a
    second line under the id; when the ids do not fit in a table either, each
    node is a line ``ID (via VIA)`` with the rest under it.
    """
    from rich.cells import cell_len
    from rich.table import Table

    rows = []
    for n in found:
        title = (
            clip(terminal_safe(first_line(titles[n.id])), 50)
            if n.id in titles
            else "(missing: dangling edge)"
        )
        rows.append((str(n.depth), n.direction, *map(terminal_safe, (n.type, n.id, n.via)), title))
    heads = ("depth", "dir", "type", "id", "via")
    widths = [_cells((r[i] for r in rows), len(name)) for i, name in enumerate(heads)]
    table = Table()
    if _fits(widths, width):
        for name, cells in zip(heads, widths, strict=True):
            table.add_column(name, no_wrap=True, min_width=cells)
        table.add_column("title", overflow="ellipsis")
        for row in rows:
            table.add_row(*map(_text, row))
        return table
    room = _room([widths[0], widths[1]], width)
    under = max(cell_len(f"{r[2]} · via {r[4]}") for r in rows) if rows else 0
    if room is not None and room < max(widths[3], under):  # the via id is never cut either
        lines = (
            (_whole(r[3]), _cut(_joined((r[0], r[1], r[2], r[5]))), _whole(f"via {r[4]}", 2)) for r in rows
        )
        return _lines("id / depth · dir · type · title / via", lines)
    for i in (0, 1):
        table.add_column(heads[i], no_wrap=True, min_width=widths[i])
    table.add_column("id", no_wrap=True, overflow="ellipsis", min_width=max(widths[3], under), max_width=room)
    for depth, direction, etype, node_id, via, title in rows:
        under_id = _text(f"{etype} · via {via} · {title}", "dim")
        table.add_row(_text(depth), _text(direction), _text(node_id + "\n") + under_id)
    return table


def node_dict(node: Node, path: str) -> dict[str, Any]:
    """A node as JSON: id, layer, path, its other fields as in its file (ISO times), and the body."""
    fields = node.to_dict(iso_times=True)
    for key in ("id", "layer"):
        fields.pop(key, None)
    return {"id": node.id, "layer": node.layer, "path": path, "frontmatter": fields, "body": node.body}


def node_text(node: Node, path: str, *, terminal: bool = False) -> str:
    """A node for people: a header of its fields (one per line), a blank line, the body.

    The header's controls are escaped (:func:`~md_cg.script.terminal_safe`: a field's
    text is one line and never drives a terminal); the body is exact unless ``terminal``
    (it is printed on one), when its controls other than line ends and tabs are escaped."""
    fields = node.to_dict(iso_times=True)
    head = [terminal_safe(f"{node.id} · {node.layer} · {path}")]
    for key, value in fields.items():
        if key in ("id", "layer"):
            continue
        if key == "edges":
            value = ", ".join(f"{e['target']} ({e['type']})" for e in value)
        elif key == "verification_history":
            value = f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}, last: " + ", ".join(
                f"{k} {v}" for k, v in value[-1].items() if k in ("verdict", "evidence", "ts")
            )
        elif isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        head.append(terminal_safe(f"{key}: {value}"))
    body = terminal_safe(node.body, lines=True) if terminal else node.body
    return "\n".join(head) + "\n\n" + body + ("" if body.endswith("\n") else "\n")


def _twins(ids: Sequence[str]) -> str:
    """Twin ids joined by `` / ``, escaped where they would print the same (NFC/NFD)."""
    labels = distinct_labels(ids)
    return " / ".join(labels[i] for i in ids)


#: What the CLI and the MCP server say of a write an OS error interrupted after its commit
#: line was logged (:func:`md_cg.was_logged`): not "nothing was changed". Nor that it will
#: surely be completed: the recovery leaves a file saved or edited since (session 39).
LOGGED_WRITE = (
    "the write was logged before this error and may be partly done: the next sync (or write "
    "of these ids) finishes it once the store is writable, but not over a file saved or edited "
    "since (that memory is kept as it is then)"
)


#: What they say of an OS error that stopped the finishing of an earlier interrupted write
#: (:func:`md_cg.was_recovering`): that write may be partly done; this command made nothing.
RECOVERING_WRITE = (
    "an earlier interrupted write could not be finished and may be partly done; this command "
    "changed nothing: run the sync once the store is writable (it finishes that write), then this "
    "command again"
)


#: What the MCP server says for the ``fix`` of a :func:`~md_cg.errors.lost_file_error`
#: (an id whose file was moved, deleted or broken by hand since the last sync): its own
#: ``sync`` tool, not the command line's or the library's call (docs/mcp.md: a tool
#: error's hints name only the server's tools). Session 39 (F4): a ``remember`` of such an
#: id replied "run `mdcg sync` (MdCG.sync())".
LOST_FIXES = {
    SYNC_FIX: "the `sync` tool takes that in; then try again",
    FIX_THEN_SYNC: "a person fixes it, then the `sync` tool takes it in",
    UNSCOPED_SYNC_FIX: (
        "this server's `sync` tells its own scope's files alone: a person should run `mdcg sync` "
        "on the store, then try again"
    ),
}


def applied_write(error: str, command: str | None = None) -> str:
    """What the CLI and the MCP server say of a write whose files were all in place when
    ``error`` (an OS error's text, ``interrupted``) stopped the fsync of their folders
    (:func:`md_cg.was_applied`): done -- a ``forget`` is forgotten, scrubbed too -- and
    closed, only not known to be on disk. Not "nothing stored was lost ... run the
    command again" (a ``forget`` run again finds no such id); an import or migration run
    again writes the batches after it (those in place are counted unchanged)."""
    if command in ("import", "migrate"):
        again = (
            "run the same command again to resume from the last committed batch"
            if command == "migrate"
            else "run the same command again to import the rest (what is in place is counted unchanged)"
        )
        return (
            f"the batches written so far are in place but the last one's folders could not be "
            f"synced to disk: {error}; check the disk, then {again}"
        )
    return (
        f"the write is in place but its folders could not be synced to disk: {error}; check the "
        "disk; running it again is not needed"
    )


def recorded_write(log: str) -> str:
    """What the CLI and the MCP server say of a change made whose record in the log folder
    ``log`` (``.mdcg/audit``) could not be written (:func:`md_cg.record_failed`): not
    "nothing was changed", and no "run it again" (a rename run again finds no old id)."""
    return recorded_note(log)


def sync_lines(report: SyncReport, *, limit: int = 20) -> list[str]:
    """What a sync did and found, one line per kind (at most ``limit`` items each)."""
    kinds = [
        ("added", list(report.added)),
        ("changed", list(report.changed)),
        ("deleted", list(report.deleted)),
        (
            "interrupted deletes finished, files removed",
            [f"{i} at {p}" for i, p in report.finished_deletes],
        ),
        (
            "interrupted writes finished, old files of renamed memories removed",
            [f"{i} at {p}" for i, p in report.old_files_removed],
        ),
        (
            "interrupted deletes not done: the file holds another memory or cannot be read "
            "(kept; see .mdcg/log)",
            [f"{i} at {p}" for i, p in report.foreign_deletes],
        ),
        ("moved", [f"{m.node_id} {m.old_path} -> {m.new_path}" for m in report.moved]),
        ("temp files removed", list(report.temp_removed)),
        ("malformed", [f"{p}: {r}" for p, r in report.malformed]),
        (
            "duplicate ids (keep both: mdcg rename ID NEW_ID --path FILE; or remove a copy)",
            [f"{i} at {p}" for i, p in report.duplicates],
        ),
        ("twin ids (differ only by case or Unicode form; rename one)", [_twins(t) for t in report.twins]),
        ("refused (never followed)", [f"{p}: {r}" for p, r in report.refused]),
        ("merge conflicts (resolve, docs/git.md)", [f"{i} at {p}" for i, p in report.conflicts]),
        ("forgotten here and back (forget again, or mdcg keep)", [f"{i} at {p}" for i, p in report.returned]),
        ("settings files md-cg cannot use (fix them)", [f"{p}: {r}" for p, r in report.settings]),
        (
            "hidden from search, no current version (see mdcg health)",
            [f"{i} at {p}" for i, p in report.hidden],
        ),
    ]
    out = []
    finished = report.recovered - report.undone
    if finished:
        out.append(f"interrupted writes finished: {finished}")
    if report.undone:
        out.append(
            "interrupted writes undone (a file torn by a power cut, or in a copy of the store a file"
            f" not as the write logged it): {report.undone}"
        )
    if report.left_as_edited:
        ids = ", ".join(report.left_as_edited[:limit])
        more = (
            f", ... (+{len(report.left_as_edited) - limit} more)"
            if len(report.left_as_edited) > limit
            else ""
        )
        n = len(report.left_as_edited)
        out.append(f"interrupted writes left as edited since (not finished) ({n}): {ids}{more}")
    for label, items in kinds:
        if items:
            more = f", ... (+{len(items) - limit} more)" if len(items) > limit else ""
            out.append(f"{label} ({len(items)}): " + ", ".join(items[:limit]) + more)
    return [terminal_safe(line) for line in out]


#: Ids a line of the command line names before it counts the rest (:func:`id_list`).
LINE_IDS = 20


def id_list(ids: Sequence[str], limit: int = LINE_IDS) -> str:
    """``ids`` joined by commas, at most ``limit`` of them and then how many more there
    are and where they all are (``--json``); ``none`` when there are none."""
    if not ids:
        return "none"
    shown = terminal_safe(", ".join(ids[:limit]))
    more = len(ids) - limit
    return shown if more <= 0 else f"{shown}, ... (+{more:,} more; --json lists every one)"


def verdict_dict(node: Node, verdict: str, path: object) -> dict[str, Any]:
    """What a verification did to ``node`` (its last history entry), as the CLI and MCP report it."""
    last = node.verification_history[-1]
    return {
        "id": node.id,
        "verdict": verdict,
        "layer": node.layer,
        "confidence_before": last.get("confidence_before"),
        "confidence_after": node.confidence,
        "path": str(path),
    }
