"""Query expansion with a synonym table (shipped default plus a per-store file).

A synonym *group* is a list of words or phrases meaning the same thing, in any
script: ``["二分查找", "折半查找", "binary search"]``. Groups are symmetric: every
member expands to every other member. A word that is in several groups expands
to the union of those groups (in group order); expansion is not transitive
beyond that.

File format (the shipped ``md_cg/data/synonyms.json`` and a store's
``<root>/.mdcg/synonyms.json``), UTF-8 JSON::

    {
      "version": 1,
      "_comment": "anything; keys starting with _ are ignored",
      "groups": [
        ["二分查找", "折半查找", "binary search"],
        ["car", "automobile", "汽车"]
      ]
    }

A bare list of groups is accepted too. Every group needs at least two
different entries (after normalisation); every entry is a non-empty string
with at least one letter, digit or CJK character. A malformed file (git
conflict markers included) raises :class:`SynonymFileError` (an
:class:`md_cg.errors.MdcgError`) naming the file and the problem; an absent
file is simply skipped. A store opens its file with
:meth:`SynonymTable.for_store`, which falls back to the shipped table and
returns the problem instead of raising, so one broken file cannot stop every
search.

Matching is on normalised text: NFKC, case folded, whitespace collapsed. Text
is cut into *tokens* -- each CJK character is one token, and a run of other
letters/digits (plus a trailing ``+``/``#``, for ``c++`` and ``c#``) is one
token -- so English entries match whole words only (``car`` does not match
inside ``carpet``), while Chinese entries match anywhere in a run of Chinese
text (``二分查找的边界`` contains ``二分查找``). Tokens separated by whitespace or
by one of ``- . ' ’ / · _`` are adjacent (whitespace between two CJK
characters separates them, as a person meant it to); any other punctuation
breaks a phrase. The last word of an English entry may carry a plural ``s``/``es``/``ies``
(``linked lists`` finds ``linked list``).

Weights: the query's own words, and table entries found in the query, get
:data:`ORIGINAL_WEIGHT` (1.0); their synonyms get :data:`SYNONYM_WEIGHT`
(0.6), so a search ranks a literal match above a synonym match. A CJK
synonym of a query without any CJK text gets :data:`CROSS_SCRIPT_WEIGHT`
(0.05): measured on mixed English/Chinese pools, Chinese synonyms of English
queries at 0.6 pushed Chinese notes into English results, while Chinese
queries lose nothing from English synonyms (docs/ranking.md). Results are
deduplicated (first occurrence wins, so an original keeps 1.0 even when it is
also a synonym of another word) and come in a deterministic order: originals
in query order, then found entries in query order, then synonyms in the order
of their groups and of the entries inside them.

Imports only the standard library, orjson, :mod:`md_cg.errors` and :mod:`md_cg.script`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import orjson

from . import fsops
from .errors import SynonymFileError, UnsafePathError
from .script import CJK_CHAR_RE, CJK_CHARS, WORD_CHAR, fold, has_cjk, singulars

#: Weight of the query's own words and of table entries found in the query text.
ORIGINAL_WEIGHT = 1.0
#: Weight of a synonym added by expansion.
SYNONYM_WEIGHT = 0.6
#: Weight of a CJK synonym added to a query without CJK text (docs/ranking.md):
#: enough for an English query to find a note written only in Chinese, too
#: little to rank Chinese notes above English ones that match its own words.
CROSS_SCRIPT_WEIGHT = 0.05
#: File name of a store's synonym file inside ``<root>/.mdcg/``.
STORE_FILE = "synonyms.json"
#: The largest store synonym file read (a larger one is reported, not read).
MAX_STORE_FILE_BYTES = 8 << 20
#: The only file format version.
FORMAT_VERSION = 1

_DEFAULT_PATH = Path(__file__).parent / "data" / "synonyms.json"

_TOKEN_GAP = re.compile(f"(?:([{CJK_CHARS}])|({WORD_CHAR}+[+#]*))((?:[^\\w]|_)*)")
_CONFLICT_MARKER = re.compile(r"^(?:<{7}|>{7})(?: |$)", re.MULTILINE)
_JOINING_GAPS = frozenset({"-", ".", "'", "’", "/", "·", "_"})


def normalize(text: str) -> str:
    """NFKC + case fold + whitespace collapsed and trimmed (:func:`md_cg.script.fold`)."""
    return fold(text)


def _runs(text: str) -> list[tuple[list[str], list[bool]]]:
    """Tokens of normalised text, grouped into runs of adjacent tokens.

    Each run is ``(tokens, cjk_flags)``. A gap between two tokens keeps them
    in one run when it is empty, whitespace (except between two CJK
    characters) or one of the joining characters; anything else ends the run.
    """
    runs: list[tuple[list[str], list[bool]]] = []
    tokens: list[str] = []
    flags: list[bool] = []
    broken = False
    prev_gap = ""
    for cjk_char, word, gap in _TOKEN_GAP.findall(text):
        is_cjk = bool(cjk_char)
        if broken or (tokens and is_cjk and flags[-1] and prev_gap):
            runs.append((tokens, flags))
            tokens, flags = [], []
        tokens.append(cjk_char or word)
        flags.append(is_cjk)
        prev_gap = gap
        broken = bool(gap) and gap not in _JOINING_GAPS and not gap.isspace()
    if tokens:
        runs.append((tokens, flags))
    return runs


def _key(text: str) -> str:
    """The lookup key of normalised text: its tokens joined by single spaces."""
    if text.isascii() and text.isalnum():
        return text
    return " ".join(tok for tokens, _ in _runs(text) for tok in tokens)


def _is_cjk_token(token: str) -> bool:
    return len(token) == 1 and CJK_CHAR_RE.match(token) is not None


class SynonymTable:
    """An immutable set of synonym groups with fast lookup and expansion.

    Build one from groups, from files (:meth:`from_files`) or use the shared
    shipped table (:meth:`default`). Entries are stored normalised
    (:func:`normalize`); expansion returns normalised strings.
    """

    __slots__ = ("_display", "_groups", "_longest", "_prefixes", "_synonyms")

    def __init__(self, groups: Iterable[Sequence[str]] = ()) -> None:
        """Build a table from groups of words; raises :class:`ValueError` on a bad group."""
        checked: list[tuple[str, ...]] = []
        for number, group in enumerate(groups, 1):
            problem, entries = _check_group(group)
            if problem:
                raise ValueError(f"synonym group {number}: {problem}")
            checked.append(entries)
        self._build(checked)

    def _build(self, groups: list[tuple[str, ...]]) -> None:
        display: dict[str, str] = {}
        members: dict[str, list[str]] = {}
        prefixes: set[str] = set()
        longest = 1
        for group in groups:
            keys = []
            for entry in group:
                key = _key(entry)
                display.setdefault(key, entry)
                keys.append(key)
            for key in keys:
                bucket = members.setdefault(key, [])
                for other in keys:
                    if other != key and other not in bucket:
                        bucket.append(other)
                tokens = key.split(" ")
                longest = max(longest, len(tokens))
                for n in range(1, len(tokens)):
                    prefixes.add(" ".join(tokens[:n]))
        self._groups: tuple[tuple[str, ...], ...] = tuple(groups)
        self._display = display
        self._synonyms: dict[str, tuple[str, ...]] = {
            key: tuple(display[o] for o in others) for key, others in members.items()
        }
        self._prefixes = frozenset(prefixes)
        self._longest = longest

    # -- construction ------------------------------------------------------

    @classmethod
    def default(cls) -> SynonymTable:
        """The shipped default table (loaded once and shared; tables are immutable)."""
        return _default_table()

    @classmethod
    def from_files(cls, *paths: str | os.PathLike[str] | None, default: bool = True) -> SynonymTable:
        """The default table (unless ``default=False``) plus the groups of each file.

        Paths that do not exist (and ``None``) are skipped: a store without a
        synonym file uses the default table. A file that exists but is not a
        valid synonym file raises :class:`SynonymFileError` naming it.
        """
        groups: list[tuple[str, ...]] = list(_default_table()._groups) if default else []
        for path in paths:
            if path is None:
                continue
            groups.extend(load_groups(path, missing_ok=True))
        table = cls.__new__(cls)
        table._build(groups)
        return table

    @classmethod
    def for_store(cls, root: str | os.PathLike[str]) -> tuple[SynonymTable, str | None]:
        """The table a store searches with, and the problem with its synonym file, if any.

        Reads ``<root>/.mdcg/synonyms.json`` (:func:`store_synonym_path`):
        absent, it gives the shipped table and ``None``. A file that cannot
        be used (unresolved git conflict markers after a merge, invalid JSON,
        a wrong shape, unreadable) must not take every search down, so the
        shipped table is returned with a one-line problem that names the
        file and what is wrong, for ``health()`` to report. Explicit loads
        (:meth:`from_files`) still raise.
        """
        path = store_synonym_path(root)
        try:
            # never through a symlink, never a FIFO (it would block every search), size-bounded
            raw = fsops.read_small(os.fspath(root), f".mdcg/{STORE_FILE}", limit=MAX_STORE_FILE_BYTES)
            if raw is None:
                return _default_table(), None  # shared: no copy of the shipped groups per store
            table = cls.__new__(cls)
            table._build([*_default_table()._groups, *decode_groups(raw, path)])
            return table, None
        except (SynonymFileError, OSError, UnsafePathError) as exc:
            why = exc if isinstance(exc, SynonymFileError) else SynonymFileError(path, _os_problem(exc))
            return _default_table(), f"{why}; searching with the shipped synonym table instead"

    def extended(self, groups: Iterable[Sequence[str]]) -> SynonymTable:
        """A new table with this table's groups followed by ``groups``."""
        extra = SynonymTable(groups)
        table = SynonymTable.__new__(SynonymTable)
        table._build(list(self._groups) + list(extra._groups))
        return table

    # -- inspection ----------------------------------------------------------

    @property
    def groups(self) -> tuple[tuple[str, ...], ...]:
        """The groups, normalised, in load order."""
        return self._groups

    def __len__(self) -> int:
        return len(self._groups)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self._hit(_key(normalize(word))) is not None

    def __repr__(self) -> str:
        return f"SynonymTable({len(self._groups)} groups, {len(self._synonyms)} entries)"

    def synonyms_of(self, word: str) -> tuple[str, ...]:
        """Synonyms of one word or phrase (normalised, without the word itself)."""
        key = self._hit(_key(normalize(word)))
        return self._synonyms[key] if key else ()

    def _hit(self, key: str) -> str | None:
        """``key`` if it is an entry, else its plural-stripped entry, else ``None``."""
        if key in self._synonyms:
            return key
        head, _, last = key.rpartition(" ")
        if not last or _is_cjk_token(last):
            return None
        for form in singulars(last):
            candidate = f"{head} {form}" if head else form
            if candidate in self._synonyms:
                return candidate
        return None

    # -- expansion ---------------------------------------------------------

    def expand(self, words: Sequence[str]) -> list[tuple[str, float]]:
        """Expand already-split query words (surface forms, not stems).

        Runs of adjacent single-token non-CJK words are scanned together, so
        ``["binary", "search"]`` finds the phrase ``binary search`` (and the
        words it covers are not expanded on their own); any other word
        (Chinese, or several tokens such as ``binary-search``) is scanned on
        its own like text, so ``二分查找`` and ``用电脑`` find their entries.
        Returns the words (normalised) and the entries found at
        :data:`ORIGINAL_WEIGHT`, then the synonyms at :data:`SYNONYM_WEIGHT`
        (:data:`CROSS_SCRIPT_WEIGHT` for a CJK synonym when no word has CJK
        text).
        Words that a tokenizer has cut into CJK bigrams find little: pass the
        raw query to :meth:`expand_text` instead.
        """
        out: dict[str, float] = {}
        found: list[str] = []
        run: list[str] = []
        for raw in words:
            word = normalize(raw)
            if not word:
                continue
            out.setdefault(word, ORIGINAL_WEIGHT)
            key = _key(word)
            if not key:
                continue
            if " " not in key and not CJK_CHAR_RE.search(key):
                run.append(key)
                continue
            if run:
                found.extend(self._scan(run, [False] * len(run)))
                run = []
            for tokens, flags in _runs(word):
                found.extend(self._scan(tokens, flags))
        if run:
            found.extend(self._scan(run, [False] * len(run)))
        return self._finish(out, found, any(map(has_cjk, out)))

    def expand_text(self, query: str, words: Sequence[str] = ()) -> list[tuple[str, float]]:
        """Expand a raw query text by finding table entries inside it.

        ``words`` (optional) are the query's own words from a tokenizer; they
        come first, normalised, at :data:`ORIGINAL_WEIGHT`. Then every table
        entry found in the text by longest-match scanning (see the module
        docstring) is added at :data:`ORIGINAL_WEIGHT`, then the synonyms of
        all of them at :data:`SYNONYM_WEIGHT` (:data:`CROSS_SCRIPT_WEIGHT` for
        a CJK synonym when neither the query nor ``words`` has CJK text). A one-character Chinese entry
        (``茶``) is found only when it stands alone between non-CJK
        characters, never inside a longer run of Chinese (``茶几``).
        """
        out: dict[str, float] = {}
        for raw in words:
            word = normalize(raw)
            if word:
                out.setdefault(word, ORIGINAL_WEIGHT)
        found: list[str] = []
        text = normalize(query)
        if text:
            for tokens, flags in _runs(text):
                found.extend(self._scan(tokens, flags))
        return self._finish(out, found, has_cjk(text) or any(map(has_cjk, out)))

    def _scan(self, run: list[str], cjk: list[bool]) -> list[str]:
        """Keys of the entries found in one run of tokens, longest match first.

        ``cjk[i]`` tells whether ``run[i]`` is a CJK character.
        """
        found: list[str] = []
        synonyms = self._synonyms
        prefixes = self._prefixes
        n = len(run)
        i = 0
        while i < n:
            best_key: str | None = None
            best_end = i
            key = ""
            for j in range(i, min(n, i + self._longest)):
                token = run[j]
                candidate = f"{key} {token}" if key else token
                if candidate in synonyms:
                    best_key, best_end = candidate, j + 1
                elif not cjk[j] and token[-1] == "s":
                    for form in singulars(token):
                        plural_hit = f"{key} {form}" if key else form
                        if plural_hit in synonyms:
                            best_key, best_end = plural_hit, j + 1
                            break
                if candidate not in prefixes:
                    break
                key = candidate
            if (
                best_key is not None
                and best_end == i + 1
                and cjk[i]
                and ((i > 0 and cjk[i - 1]) or (i + 1 < n and cjk[i + 1]))
            ):
                # a one-character CJK entry inside a longer CJK run is not a word match
                best_key = None
            if best_key is None:
                i += 1
                continue
            found.append(best_key)
            i = best_end
        return found

    def _finish(self, out: dict[str, float], found: list[str], cjk_query: bool) -> list[tuple[str, float]]:
        for key in found:
            out.setdefault(self._display[key], ORIGINAL_WEIGHT)
        for key in found:
            for synonym in self._synonyms.get(key, ()):
                cross = not cjk_query and has_cjk(synonym)
                out.setdefault(synonym, CROSS_SCRIPT_WEIGHT if cross else SYNONYM_WEIGHT)
        return list(out.items())


# -- files ---------------------------------------------------------------------


def _check_group(group: object) -> tuple[str | None, tuple[str, ...]]:
    """(problem, normalised entries) of one group; problem is None when valid."""
    if not isinstance(group, (list, tuple)):
        return f"expected a list of words, got {type(group).__name__}", ()
    entries: list[str] = []
    keys: set[str] = set()
    for position, item in enumerate(group, 1):
        if not isinstance(item, str):
            return f"entry {position}: expected a string, got {type(item).__name__} {item!r}", ()
        entry = normalize(item)
        key = _key(entry)
        if not key:
            return f"entry {position} {item!r} has no letter, digit or CJK character", ()
        if key not in keys:
            keys.add(key)
            entries.append(entry)
    if len(entries) < 2:
        return f"needs at least two different entries, got {list(group)!r}", ()
    return None, tuple(entries)


def parse_groups(data: object, path: str | os.PathLike[str]) -> list[tuple[str, ...]]:
    """Validate decoded JSON of a synonym file; ``path`` is used in error messages."""
    if isinstance(data, dict):
        for key in data:
            if key not in ("version", "groups") and not str(key).startswith("_"):
                raise SynonymFileError(
                    path, f"unknown key {key!r} (expected 'version', 'groups' or '_' comments)"
                )
        if "version" in data and data["version"] != FORMAT_VERSION:
            raise SynonymFileError(
                path, f"unsupported version {data['version']!r} (expected {FORMAT_VERSION})"
            )
        if "groups" not in data:
            raise SynonymFileError(path, "missing key 'groups'")
        groups = data["groups"]
    elif isinstance(data, list):
        groups = data
    else:
        raise SynonymFileError(
            path, f"expected an object with 'groups' or a list of groups, got {type(data).__name__}"
        )
    if not isinstance(groups, list):
        raise SynonymFileError(path, f"'groups' must be a list, got {type(groups).__name__}")
    out: list[tuple[str, ...]] = []
    for number, group in enumerate(groups, 1):
        problem, entries = _check_group(group)
        if problem:
            raise SynonymFileError(path, f"group {number}: {problem}")
        out.append(entries)
    return out


def load_groups(path: str | os.PathLike[str], *, missing_ok: bool = False) -> list[tuple[str, ...]]:
    """Read and validate the groups of one synonym file.

    With ``missing_ok`` an absent file gives no groups; otherwise it is an
    error like any other unreadable file.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return []
        raise SynonymFileError(path, "file not found") from None
    except IsADirectoryError:
        raise SynonymFileError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise SynonymFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    return decode_groups(raw, path)


def decode_groups(raw: bytes, path: str | os.PathLike[str]) -> list[tuple[str, ...]]:
    """Validate the groups of a synonym file's bytes (``path`` names it in errors)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SynonymFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    conflict = _CONFLICT_MARKER.search(text)
    if conflict:
        line = text.count("\n", 0, conflict.start()) + 1
        raise SynonymFileError(
            path, f"unresolved git merge conflict (conflict marker at line {line}); resolve it and save"
        )
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SynonymFileError(
            path, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if (twice := fsops.duplicate_key_problem(raw)) is not None:
        raise SynonymFileError(path, twice)
    return parse_groups(data, path)


@lru_cache(maxsize=1)
def _default_table() -> SynonymTable:
    table = SynonymTable.__new__(SynonymTable)
    table._build(load_groups(_DEFAULT_PATH))
    return table


def _os_problem(exc: OSError | UnsafePathError) -> str:
    if isinstance(exc, UnsafePathError):
        return exc.reason
    return f"cannot be read ({exc.strerror or exc})"


def store_synonym_path(root: str | os.PathLike[str]) -> Path:
    """Where a store keeps its synonym file: ``<root>/.mdcg/synonyms.json``."""
    return Path(root) / ".mdcg" / STORE_FILE
