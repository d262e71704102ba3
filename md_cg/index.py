"""The index: what the engine knows about every node without opening its file.

Everything here is **derived** from the ``.md`` files and can be thrown away:

* :class:`Entry` -- per node: path, layer, bucket, tags, judge inputs, edges.
* :class:`IndexState` -- all entries, bucket membership, reverse edges and the
  :class:`~md_cg.textindex.TextIndex` search uses.
* Log shards (``.mdcg/log/<pid>_<uuid>.jsonl``) -- every mutation appends an
  *intent* record (``put``/``del`` of an id at a path) to its own process's
  shard **before** touching the file. Replaying records never trusts them
  blindly: the ids they name are resolved against the files on disk, so a
  writer killed between the record and the file leaves no ghost.
* The snapshot (``.mdcg/index.snapshot``) -- entries, text index and the shard
  offsets it covers, written only by ``compact``/``rebuild`` under the
  exclusive maintenance lock. Open = snapshot + replay of what came after.
  A missing, truncated or garbage snapshot means a rebuild **in memory** from
  the files; nothing is written.

Module layering: imports the bottom modules (node, nodefile, ccg, layout,
fsops, text, textindex, judge) and nothing above.
"""

from __future__ import annotations

import contextlib
import gc
import os
import stat as statmod
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from . import ccg, fsops, layout
from .errors import MalformedNodeFileError
from .judge import node_conditions
from .node import LAYERS, NEGATIVE_LAYERS, Node
from .nodefile import loads, read_bytes_as_text
from .text import analyze, query_terms
from .textindex import TextIndex

META_DIR = ".mdcg"
LOG_DIR = "log"
SNAPSHOT_NAME = "index.snapshot"
SNAPSHOT_MAGIC = b"MDCG-SNAPSHOT 1\n"
TITLE_MAX = 120

_LAYER_CODE = {name: i for i, name in enumerate(LAYERS)}
_NEGATIVE_CODES = frozenset(_LAYER_CODE[name] for name in NEGATIVE_LAYERS)


@dataclass(slots=True)
class Entry:
    """What the index keeps about one node (all derived from its file)."""

    id: str
    path: str
    layer: str
    bucket: str | None
    domain: str | None
    mtime_ns: int
    size: int
    tags: list[str]
    importance: float | None
    confidence: float | None
    created_at: float | None
    updated_at: float | None
    verification_basis: str | None
    ccg_missing: list[str]
    conditions: list[str]
    title: str
    edges: list[list[str]]  # [target, type] pairs
    #: the condition space as compact JSON (parsed on demand: few callers need it,
    #: and one string is far cheaper to load than a dict of lists)
    space_json: str | None = None
    access_count: int = 0
    last_access: float | None = None

    @property
    def condition_space(self) -> dict[str, Any] | None:
        """The node's ``condition_space`` (a fresh dict on every access)."""
        return None if self.space_json is None else orjson.loads(self.space_json)

    def to_row(self) -> list[Any]:
        """The snapshot row: the path and domain are left out when derivable."""
        path = None if self.path == canonical_path(self) else self.path
        return [
            self.id, path, self.layer, self.bucket, self.mtime_ns, self.size, self.tags,
            self.importance, self.confidence, self.created_at, self.updated_at,
            self.verification_basis, self.ccg_missing, self.conditions, self.title,
            self.edges, self.space_json, self.access_count, self.last_access,
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: list[Any], domains: dict[str, str]) -> Entry:
        node_id, path, layer, bucket = row[0], row[1], row[2], row[3]
        if path is None:
            path = f"knowledge/{bucket}/{node_id}.md" if bucket else f"{layer}/{node_id}.md"
        return cls(node_id, path, layer, bucket, domains.get(bucket) if bucket else None, *row[4:])


def title_of(body: str) -> str:
    """First non-empty body line, without Markdown heading marks, shortened."""
    start, end = 0, len(body)
    while start < end:
        nl = body.find("\n", start)
        stop = end if nl < 0 else nl
        text = body[start:stop].strip().lstrip("#").strip()
        if text:
            return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1] + "…"
        start = stop + 1
    return ""


def index_text(node: Node) -> str:
    """The text the search index sees: body and tags (``domain:x`` as ``x``)."""
    tags = " ".join(t.split(":", 1)[1] if t.startswith("domain:") else t for t in node.tags)
    return f"{node.body}\n{tags}" if tags else node.body


_UNSET: Any = object()


def make_entry(node: Node, rel: str, mtime_ns: int, size: int, domain: str | None = _UNSET) -> Entry:
    """The index entry for a parsed node found at ``rel``.

    ``domain`` (the node's route key) may be passed when already computed.
    """
    elems = ccg.elements(node.body, node.state_attributes)
    if domain is _UNSET:
        domain = layout.route_key(node) if node.layer == layout.BUCKETED_LAYER else None
    return Entry(
        id=node.id,
        path=rel,
        layer=node.layer,
        bucket=layout.bucket_dir(domain) if node.layer == layout.BUCKETED_LAYER else None,
        domain=domain,
        mtime_ns=mtime_ns,
        size=size,
        tags=list(node.tags),
        importance=node.importance,
        confidence=node.confidence,
        created_at=node.created_at,
        updated_at=node.updated_at,
        verification_basis=node.verification_basis,
        ccg_missing=list(ccg.missing(elems)),
        conditions=list(node_conditions(node, elems)),
        title=title_of(node.body),
        edges=[[e.target, e.type] for e in node.edges],
        space_json=orjson.dumps(node.condition_space).decode() if node.condition_space else None,
        access_count=node.access_count or 0,
        last_access=node.last_access,
    )


# -- reading files ------------------------------------------------------------


@dataclass(frozen=True)
class FileProblem:
    """A ``.md`` file that could not be read as a node."""

    path: str
    reason: str


@dataclass
class Parsed:
    """A node file read from disk, with what the index needs from it.

    ``node`` is None when an unchanged file's existing entry was reused.
    """

    node: Node | None
    entry: Entry
    #: the text to index; None when the file was unchanged (keep what is indexed)
    text: str | None


def parse_file(root: Path, rel: str) -> Parsed:
    """Read and parse ``root/rel``; raise MalformedNodeFileError or OSError."""
    path = f"{root}/{rel}"
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        data = fh.read()
    node = loads(read_bytes_as_text(data, rel), rel)
    entry = make_entry(node, rel, st.st_mtime_ns, st.st_size)
    return Parsed(node, entry, index_text(node))


def scan_files(root: Path) -> dict[str, os.stat_result]:
    """Every ``*.md`` under the layer folders: relative POSIX path -> stat.

    Hidden files and folders (names starting with ``.``, such as temp files)
    are skipped; so is everything outside the layer folders.
    """
    found: dict[str, os.stat_result] = {}
    for layer in LAYERS:
        top = root / layer
        stack = [(top, layer)]
        while stack:
            directory, rel_dir = stack.pop()
            try:
                it = os.scandir(directory)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with it:
                for de in it:
                    if de.name.startswith("."):
                        continue
                    if de.is_dir(follow_symlinks=False):
                        stack.append((Path(de.path), f"{rel_dir}/{de.name}"))
                    elif de.name.endswith(".md") and de.is_file(follow_symlinks=False):
                        found[f"{rel_dir}/{de.name}"] = de.stat(follow_symlinks=False)
    return found


def scan_temp_files(root: Path) -> list[str]:
    """Relative paths of temp files left under the layer folders and the log folder."""
    out: list[str] = []
    dirs = [root / layer for layer in LAYERS] + [root / META_DIR / LOG_DIR]
    while dirs:
        directory = dirs.pop()
        try:
            it = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with it:
            for de in it:
                if de.is_dir(follow_symlinks=False) and not de.name.startswith("."):
                    dirs.append(Path(de.path))
                elif fsops.is_temp_name(de.name):
                    out.append(Path(de.path).relative_to(root).as_posix())
    return sorted(out)


def canonical_path(entry: Entry) -> str:
    """Where the node of ``entry`` belongs according to its own frontmatter."""
    return f"{layout.rel_dir(entry.layer, entry.bucket)}/{entry.id}.md"


def winner(candidates: list[Parsed]) -> Parsed:
    """The copy that stands when one id has several files (deterministic).

    Latest ``updated_at`` first (a move or falsify stamps the new copy), then
    a copy at its canonical location, then the smallest path.
    """

    def key(p: Parsed) -> tuple[float, int, str]:
        e = p.entry
        updated = e.updated_at if e.updated_at is not None else float("-inf")
        return (-updated, 0 if e.path == canonical_path(e) else 1, e.path)

    return min(candidates, key=key)


# -- the in-memory state ----------------------------------------------------


@dataclass
class IndexState:
    """All entries plus the structures derived from them."""

    entries: dict[str, Entry] = field(default_factory=dict)
    #: knowledge bucket folder -> number of nodes, and -> its domain (route key)
    buckets: dict[str, int] = field(default_factory=dict)
    bucket_domains: dict[str, str] = field(default_factory=dict)
    reverse: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    text: TextIndex = field(default_factory=lambda: TextIndex(analyzer=query_terms))
    bucket_codes: dict[str, int] = field(default_factory=dict)
    #: files that failed to parse at the last rebuild/sync, by path
    problems: dict[str, str] = field(default_factory=dict)
    #: ids with more than one file: id -> losing paths
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    #: intents without their "done" record yet: shard -> id -> paths
    pending: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: text waiting to be indexed: id -> (text, layer code, bucket code, prior)
    pending_text: dict[str, tuple[str, int, int, float]] = field(default_factory=dict)
    #: the terms of negative-memory nodes (rejected/, unresolved/), for covered_neg
    negative_terms: dict[str, frozenset[str]] = field(default_factory=dict)

    def bucket_code(self, bucket: str | None) -> int:
        if bucket is None:
            return -1
        code = self.bucket_codes.get(bucket)
        if code is None:
            code = self.bucket_codes[bucket] = len(self.bucket_codes)
        return code

    def put(self, entry: Entry, text: str | None) -> None:
        """Insert or replace an entry; ``text=None`` keeps the indexed text.

        New text is not analysed here: it waits in ``pending_text`` until
        :meth:`flush_text` (run by the first search, and before a snapshot is
        written), so a process that only writes never pays for tokenising.
        """
        old = self.entries.get(entry.id)
        if old is not None:
            self._unlink(old)
        self.entries[entry.id] = entry
        if entry.bucket is not None:
            self.buckets[entry.bucket] = self.buckets.get(entry.bucket, 0) + 1
            if entry.domain is not None:
                self.bucket_domains[entry.bucket] = entry.domain
        for target, etype in entry.edges:
            self.reverse.setdefault(target, set()).add((entry.id, etype))
        prior = entry.importance if entry.importance is not None else 0.5
        meta = (_LAYER_CODE[entry.layer], self.bucket_code(entry.bucket), prior)
        if text is not None:
            self.pending_text[entry.id] = (text, *meta)
        elif entry.id in self.pending_text:
            self.pending_text[entry.id] = (self.pending_text[entry.id][0], *meta)
        elif entry.id in self.text:
            self.text.set_meta(entry.id, layer=meta[0], bucket=meta[1], prior=meta[2])
        else:
            self.pending_text[entry.id] = ("", *meta)
        self.problems.pop(entry.path, None)

    def drop(self, node_id: str) -> Entry | None:
        old = self.entries.pop(node_id, None)
        if old is not None:
            self._unlink(old)
            self.pending_text.pop(node_id, None)
            self.negative_terms.pop(node_id, None)
            self.text.remove(node_id)
        return old

    def flush_text(self) -> int:
        """Tokenise and index every pending text; return how many were indexed."""
        if len(self.pending_text) > 1000:
            with no_gc():
                return self._flush_text()
        return self._flush_text()

    def _flush_text(self) -> int:
        pending, self.pending_text = self.pending_text, {}
        add = self.text.add
        for node_id, (text, layer, bucket, prior) in pending.items():
            terms = analyze(text)
            add(node_id, terms, layer=layer, bucket=bucket, prior=prior)
            if layer in _NEGATIVE_CODES:
                self.negative_terms[node_id] = frozenset(terms)
            else:
                self.negative_terms.pop(node_id, None)
        return len(pending)

    def _unlink(self, old: Entry) -> None:
        if old.bucket is not None:
            left = self.buckets.get(old.bucket, 0) - 1
            if left > 0:
                self.buckets[old.bucket] = left
            else:
                self.buckets.pop(old.bucket, None)
                self.bucket_domains.pop(old.bucket, None)
        for target, etype in old.edges:
            sources = self.reverse.get(target)
            if sources is not None:
                sources.discard((old.id, etype))
                if not sources:
                    del self.reverse[target]

    def by_path(self) -> dict[str, str]:
        return {e.path: e.id for e in self.entries.values()}


def layer_code(layer: str) -> int:
    return _LAYER_CODE[layer]


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects.

    Loading an index allocates millions of lists, dicts and strings that are
    all kept; the collector would scan them again and again (at 100k nodes it
    took three quarters of the time). Nothing built here forms a cycle that
    would need collecting.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def build_from_files(
    root: Path, files: dict[str, os.stat_result] | None = None, progress: Any = None
) -> IndexState:
    """A fresh state from the ``.md`` files alone (reads files, writes nothing)."""
    with no_gc():
        return _build_from_files(root, files, progress)


def _build_from_files(root: Path, files: dict[str, os.stat_result] | None, progress: Any) -> IndexState:
    if files is None:
        files = scan_files(root)
    state = IndexState()
    by_id: dict[str, list[Parsed]] = {}
    for rel in sorted(files):
        try:
            parsed = parse_file(root, rel)
        except MalformedNodeFileError as exc:
            state.problems[rel] = exc.reason
        except FileNotFoundError:
            pass  # removed while we scanned
        else:
            by_id.setdefault(parsed.entry.id, []).append(parsed)
        if progress is not None:
            progress(1)
    for node_id, copies in by_id.items():
        best = copies[0] if len(copies) == 1 else winner(copies)
        if len(copies) > 1:
            state.duplicates[node_id] = sorted(p.entry.path for p in copies if p is not best)
        state.put(best.entry, best.text)
    return state


# -- snapshot -----------------------------------------------------------------


def snapshot_path(root: Path) -> Path:
    return root / META_DIR / SNAPSHOT_NAME


def write_snapshot(root: Path, state: IndexState, offsets: dict[str, int]) -> None:
    """Write the snapshot atomically (caller holds the exclusive maintenance lock)."""
    state.flush_text()
    entries_blob = orjson.dumps(
        {
            "entries": [e.to_row() for e in state.entries.values()],
            "bucket_domains": state.bucket_domains,
            "bucket_codes": state.bucket_codes,
            "problems": state.problems,
            "duplicates": state.duplicates,
            "negative_terms": {k: sorted(v) for k, v in state.negative_terms.items()},
        }
    )
    text_blob = state.text.to_bytes()
    digest = zlib.crc32(entries_blob)  # the text index carries a checksum of its own
    header = orjson.dumps(
        {
            "version": 3,
            "created": time.time(),
            "offsets": offsets,
            "entries_len": len(entries_blob),
            "text_len": len(text_blob),
            "crc32": digest,
        }
    )
    target = snapshot_path(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    fsops.atomic_write(target, SNAPSHOT_MAGIC + header + b"\n" + entries_blob + text_blob)


@dataclass
class Snapshot:
    state: IndexState
    offsets: dict[str, int]
    identity: tuple[int, int, int]


def snapshot_identity(root: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(snapshot_path(root))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def load_snapshot(root: Path) -> Snapshot | None:
    """The snapshot, or ``None`` when it is missing, truncated or not a snapshot."""
    path = snapshot_path(root)
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    try:
        with no_gc():
            return _decode_snapshot(data, (st.st_ino, st.st_mtime_ns, st.st_size))
    except (ValueError, KeyError, IndexError, TypeError, orjson.JSONDecodeError):
        return None


def _decode_snapshot(data: bytes, identity: tuple[int, int, int]) -> Snapshot | None:
    if not data.startswith(SNAPSHOT_MAGIC):
        return None
    nl = data.index(b"\n", len(SNAPSHOT_MAGIC))
    header = orjson.loads(data[len(SNAPSHOT_MAGIC) : nl])
    if header.get("version") != 3:
        return None
    start = nl + 1
    view = memoryview(data)  # no copy of the (large) entries section
    entries_blob = view[start : start + header["entries_len"]]
    text_blob = data[start + header["entries_len"] :]
    if len(entries_blob) != header["entries_len"] or len(text_blob) != header["text_len"]:
        return None
    if zlib.crc32(entries_blob) != header["crc32"]:
        return None
    body = orjson.loads(entries_blob)
    state = IndexState(
        text=TextIndex.from_bytes(text_blob, analyzer=query_terms),
        bucket_codes=dict(body["bucket_codes"]),
        problems=dict(body["problems"]),
        duplicates={k: list(v) for k, v in body["duplicates"].items()},
        negative_terms={k: frozenset(v) for k, v in body.get("negative_terms", {}).items()},
    )
    entries = state.entries
    buckets = state.buckets
    reverse = state.reverse
    domains = state.bucket_domains = dict(body["bucket_domains"])
    from_row = Entry.from_row
    for row in body["entries"]:
        e = from_row(row, domains)
        entries[e.id] = e
        if e.bucket is not None:
            buckets[e.bucket] = buckets.get(e.bucket, 0) + 1
        for target, etype in e.edges:
            reverse.setdefault(target, set()).add((e.id, etype))
    if len(state.text) != len(entries):
        return None
    return Snapshot(state, {str(k): int(v) for k, v in header["offsets"].items()}, identity)


# -- log replay -----------------------------------------------------------------


@dataclass
class TailRead:
    """New log records since the given offsets.

    ``by_shard`` keeps each shard's records in file order (what "done"
    markers refer to); ``records`` is all of them in replay order
    (timestamp, shard, sequence).
    """

    by_shard: dict[str, list[dict[str, Any]]]
    offsets: dict[str, int]
    bad_lines: int
    missing_shards: list[str]

    @property
    def records(self) -> list[dict[str, Any]]:
        flat = [
            (int(rec.get("ts", 0)), name, int(rec.get("seq", 0)), rec)
            for name, recs in self.by_shard.items()
            for rec in recs
        ]
        flat.sort(key=lambda r: (r[0], r[1], r[2]))
        return [r[3] for r in flat]


def read_tail(root: Path, offsets: dict[str, int]) -> TailRead:
    """Read every shard from its known offset (whole lines only)."""
    log_dir = root / META_DIR / LOG_DIR
    names = fsops.list_shards(log_dir)
    new_offsets = dict(offsets)
    by_shard: dict[str, list[dict[str, Any]]] = {}
    bad = 0
    present = set(names)
    missing = [n for n in offsets if n not in present]
    for name in names:
        start = offsets.get(name, 0)
        path = log_dir / name
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            continue
        if size <= start:
            continue
        try:
            read = fsops.read_shard(path, start)
        except FileNotFoundError:
            continue
        bad += read.bad_lines
        new_offsets[name] = read.end
        if read.records:
            by_shard[name] = read.records
    for name in missing:
        new_offsets.pop(name, None)
    return TailRead(by_shard, new_offsets, bad, missing)


def shard_ends(root: Path) -> dict[str, int]:
    """Current offset just after the last whole line of every shard."""
    log_dir = root / META_DIR / LOG_DIR
    ends: dict[str, int] = {}
    for name in fsops.list_shards(log_dir):
        try:
            with open(log_dir / name, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            continue
        ends[name] = data.rfind(b"\n") + 1
    return ends


def resolve_ids(root: Path, state: IndexState, touched: dict[str, list[str]]) -> list[str]:
    """Settle each touched id against the disk: the files that exist decide.

    ``touched`` maps an id to every path the log named for it. Candidate paths
    are those plus the id's current entry path; the existing ones are parsed
    and the :func:`winner` stands. Returns the ids whose entry changed.
    """
    changed: list[str] = []
    for node_id, paths in touched.items():
        current = state.entries.get(node_id)
        candidates = list(dict.fromkeys([*paths, *([current.path] if current else [])]))
        parsed: list[Parsed] = []
        for rel in candidates:
            p = _stat_and_parse(root, rel, node_id, current, state)
            if p is not None:
                parsed.append(p)
        if not parsed:
            if state.drop(node_id) is not None:
                changed.append(node_id)
            state.duplicates.pop(node_id, None)
            continue
        best = winner(parsed) if len(parsed) > 1 else parsed[0]
        losers = sorted(p.entry.path for p in parsed if p is not best)
        if losers:
            state.duplicates[node_id] = losers
        else:
            state.duplicates.pop(node_id, None)
        if current is None or current != best.entry:
            state.put(best.entry, best.text)
            changed.append(node_id)
    return changed


def _stat_and_parse(
    root: Path, rel: str, node_id: str, current: Entry | None, state: IndexState
) -> Parsed | None:
    try:
        st = os.stat(root / rel)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not statmod.S_ISREG(st.st_mode):
        return None
    if (
        current is not None
        and current.path == rel
        and current.mtime_ns == st.st_mtime_ns
        and current.size == st.st_size
    ):
        # Unchanged since we indexed it: reuse the entry, keep the indexed text.
        return Parsed(None, current, None)
    try:
        parsed = parse_file(root, rel)
    except MalformedNodeFileError as exc:
        state.problems[rel] = exc.reason
        return None
    except FileNotFoundError:
        return None
    if parsed.entry.id != node_id:
        # The file now holds another id (edited by hand); index it under that id.
        other = state.entries.get(parsed.entry.id)
        if other is None or other.path == rel:
            state.put(parsed.entry, parsed.text)
        return None
    return parsed


def replay(root: Path, state: IndexState, tail: TailRead) -> list[str]:
    """Apply new log records: resolve every id they name against the disk.

    A ``put``/``del`` record is an intent written before its file operation;
    a ``done`` record follows once the operations of that commit finished.
    Ids whose intent has no ``done`` yet may be mid-write in another process,
    so they stay *pending* and are resolved again on every later replay until
    their ``done`` arrives (or compaction, which excludes all writers,
    settles them: :func:`settle_pending`).
    """
    touched: dict[str, list[str]] = {}
    for name, recs in tail.by_shard.items():
        pending = state.pending.setdefault(name, {})
        for rec in recs:
            if rec.get("op") == "done":
                for node_id, paths in pending.items():
                    touched.setdefault(node_id, []).extend(paths)
                pending.clear()
                continue
            node_id = rec.get("id")
            path = rec.get("path")
            if isinstance(node_id, str) and isinstance(path, str):
                touched.setdefault(node_id, []).append(path)
                pending.setdefault(node_id, []).append(path)
    for name in tail.missing_shards:
        # A shard that was compacted away belonged to a finished writer.
        for node_id, paths in state.pending.pop(name, {}).items():
            touched.setdefault(node_id, []).extend(paths)
    for name in [n for n, p in state.pending.items() if not p]:
        del state.pending[name]
    for pending in state.pending.values():
        for node_id, paths in pending.items():
            touched.setdefault(node_id, []).extend(paths)
    return resolve_ids(root, state, touched)


def prime_pending(state: IndexState, tail: TailRead) -> None:
    """Record the intents of ``tail`` that have no ``done`` yet, without resolving anything.

    Used when the state was just built from the files: a commit whose ``done``
    was already in the log before the scan began is reflected in the scan;
    only unfinished ones must be resolved again later.
    """
    for name, recs in tail.by_shard.items():
        pending: dict[str, list[str]] = {}
        for rec in recs:
            if rec.get("op") == "done":
                pending.clear()
                continue
            node_id, path = rec.get("id"), rec.get("path")
            if isinstance(node_id, str) and isinstance(path, str):
                pending.setdefault(node_id, []).append(path)
        if pending:
            state.pending[name] = pending


def settle_pending(root: Path, state: IndexState) -> list[str]:
    """Resolve and forget every pending id (call only while no writer can be active)."""
    touched: dict[str, list[str]] = {}
    for pending in state.pending.values():
        for node_id, paths in pending.items():
            touched.setdefault(node_id, []).extend(paths)
    state.pending.clear()
    return resolve_ids(root, state, touched) if touched else []


def iter_entries(state: IndexState, layer: str | None = None) -> Iterator[Entry]:
    for e in state.entries.values():
        if layer is None or e.layer == layer:
            yield e
