"""Benchmarks of the store and of search, each beside its baselines in the same run.

Used by ``mdcg bench`` and by the scripts in ``bench/`` (which add argument
parsing and write the tables to ``docs/``). Figures depend on the machine;
ratios against the baselines measured in the same process are what carry.

Store (:func:`store_bench`): write throughput -- ``add`` per node
(non-durable), ``add(durable=True)`` per node, ``add_many(durable=True)`` in
batches of 1,000 -- beside the raw floor (the same bytes, temp file +
``os.replace`` in a plain loop) and sqlite inserting the same rows; open time
from the snapshot; open without a snapshot (index entries from the files)
and a full ``rebuild_index`` (entries, text index and snapshot).

Search (:func:`search_bench`): p50/p95 latency of ``search`` without context,
with a routed hit (context = the domain of the wanted node: found at T0) and a
routed miss (context = another domain: falls through to T2), reported apart,
beside sqlite ``LIKE``, an FTS5 trigram phrase lookup (a substring index) and
the like-for-like baseline of FTS-based memory stores -- FTS5 (unicode61) with
an OR of the query's terms ordered by ``bm25()`` -- over the same texts; the
share of the store each kind scans; the memory the opened index takes; and
recall@10 against the sqlite ``LIKE`` results for queries that ``LIKE``
answers with 1-10 rows.
"""

from __future__ import annotations

import gc
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import fsops, layout, nodefile
from .errors import InvalidArgumentError
from .node import Node
from .sample import build_nodes
from .sqlite_source import SCHEMA_SQL, node_to_row
from .store import MdCG

Progress = Callable[[str], Any]


@dataclass(frozen=True)
class Row:
    """One line of a results table."""

    n: int
    measure: str
    ours: str
    baseline: str
    ratio: str


def emit(text: str, out: Path | None) -> int:
    """Print a benchmark's table and, with ``out``, also write it there; the exit status (0)."""
    print(text)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
    return 0


def to_stderr(msg: str) -> None:
    """A ``progress`` callback for the scripts in ``bench/``: each message on stderr, at once."""
    print(msg, file=sys.stderr, flush=True)


def emit_rows(rows: Sequence[Row], title: str, out: Path | None) -> int:
    """:func:`render` the rows under ``title`` and :func:`emit` the table; the exit status (0)."""
    return emit(render(rows, title), out)


def machine() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def render(rows: Sequence[Row], title: str = "") -> str:
    lines = [f"### {title}", ""] if title else []
    lines += [
        f"Machine: {machine()}",
        "",
        "| N | measure | md-cg | baselines (same run) | ratio |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r.n:,} | {r.measure} | {r.ours} | {r.baseline} | {r.ratio} |" for r in rows]
    return "\n".join(lines)


def corpus(n: int, seed: int = 2026, language: str | None = None) -> list[Node]:
    """Seed-shaped nodes with ``n`` knowledge nodes (edges dropped: a cut leaves them dangling);
    ``language`` ``"en"`` or ``"zh"``: from that language's domains only."""
    nodes = build_nodes(knowledge=n, seed=seed, language=language)
    for node in nodes:
        node.edges = []
    return nodes


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def _sqlite_rows(nodes: Sequence[Node]) -> tuple[list[str], list[tuple[Any, ...]]]:
    rows = [node_to_row(n) for n in nodes]
    cols = list(rows[0]) if rows else []
    return cols, [tuple(r[c] for c in cols) for r in rows]


def _sqlite_db(path: Path, nodes: Sequence[Node], *, durable_each: bool) -> float:
    """Insert the nodes as rows of the reference schema; return rows/s."""
    cols, values = _sqlite_rows(nodes)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE" if durable_each else "PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL" if durable_each else "PRAGMA synchronous=NORMAL")
    conn.executescript(SCHEMA_SQL)
    sql = f"INSERT INTO nodes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    t = time.perf_counter()
    if durable_each:
        for v in values:
            conn.execute("BEGIN")
            conn.execute(sql, v)
            conn.execute("COMMIT")
    else:
        conn.execute("BEGIN")
        conn.executemany(sql, values)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t
    conn.close()
    return _rate(len(values), elapsed)


def _raw_floor(
    root: Path, nodes: Sequence[Node], *, durable: bool, batch: int = 1, threads: int = 1
) -> float:
    """The floor of any engine: the same file bytes (serialised before the clock
    starts), each a temp file + ``os.replace``; durable: fsync of each file and
    of each folder once per ``batch`` files. ``threads`` > 1 (durable batches):
    a batch's temp files are all written, then fsynced that many at a time
    (a pool of threads), then renamed. Returns files/s."""
    payload = [(layout.rel_path(n), nodefile.dump_bytes(n)) for n in nodes]
    made: set[Path] = set()
    pool = ThreadPoolExecutor(threads) if durable and threads > 1 else None
    t = time.perf_counter()
    for start in range(0, len(payload), batch):
        dirs: set[Path] = set()
        pending: list[tuple[Path, Path]] = []
        for rel, data in payload[start : start + batch]:
            target = root / rel
            parent = target.parent
            if parent not in made:
                parent.mkdir(parents=True, exist_ok=True)
                made.add(parent)
            tmp = parent / f".{target.name}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, data)
            if durable and pool is None:
                os.fsync(fd)
            os.close(fd)
            if pool is None:
                os.replace(tmp, target)
            else:
                pending.append((tmp, target))
            dirs.add(parent)
        if pool is not None:
            list(pool.map(_fsync_path, [tmp for tmp, _ in pending]))
            for tmp, target in pending:
                os.replace(tmp, target)
        if durable:
            for parent in dirs:
                _fsync_path(parent)
    seconds = time.perf_counter() - t
    if pool is not None:
        pool.shutdown()
    return _rate(len(payload), seconds)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


_RSS_PROBE = """
import sys
from md_cg import MdCG
from md_cg.benchmark import rss_bytes
import gc
gc.collect()
before = rss_bytes()
store = MdCG(sys.argv[1], refresh_interval=None)
store.search("probe", record=False)
gc.collect()
print(rss_bytes() - before)
"""


def index_memory(root: Path) -> int:
    """Bytes of resident memory an opened store (snapshot + text index) adds to a
    fresh process that has already imported md_cg."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, str(root)], check=True, capture_output=True, text=True
    )
    return int(out.stdout.strip())


_OPEN_PROBE = """
import json, sys, time
from md_cg import MdCG
t = time.perf_counter()
store = MdCG(sys.argv[1], refresh_interval=None, auto_compact=None)
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "loaded_from": store.loaded_from, "nodes": len(store)}))
"""

_LIST_PROBE = """
import json, sys, time
from md_cg import MdCG
t = time.perf_counter()
store = MdCG(sys.argv[1], refresh_interval=None, auto_compact=None)
page = store.list_page(limit=50)
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "loaded_from": store.loaded_from, "total": page.total}))
"""

_SQLITE_LIST_PROBE = """
import json, sqlite3, sys, time
t = time.perf_counter()
conn = sqlite3.connect(sys.argv[1])
total = conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
rows = conn.execute(
    "SELECT id, layer, content FROM nodes ORDER BY coalesce(updated_at, created_at, 0) DESC, id LIMIT 50"
).fetchall()
print(json.dumps({"seconds": time.perf_counter() - t, "total": total, "rows": len(rows)}))
"""

_SQLITE_PROBE = """
import json, sqlite3, sys, time
t = time.perf_counter()
conn = sqlite3.connect(sys.argv[1])
rows = conn.execute("SELECT id, layer, content FROM nodes").fetchall()
print(json.dumps({"seconds": time.perf_counter() - t, "rows": len(rows)}))
"""


def _run_probe(code: str, *args: str) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def _probe_open(root: Path) -> dict[str, Any]:
    """Time ``MdCG(root)`` in a fresh process (imports excluded)."""
    return _run_probe(_OPEN_PROBE, str(root))


def _probe_sqlite(db: Path, total: int) -> float:
    """Time sqlite connect + reading every row in a fresh process."""
    got = _run_probe(_SQLITE_PROBE, str(db))
    assert got["rows"] == total
    return float(got["seconds"])


# -- store ----------------------------------------------------------------------------


def store_bench(
    sizes: Sequence[int],
    *,
    durable_sample: int = 2000,
    work: Path | None = None,
    progress: Progress | None = None,
) -> list[Row]:
    """Write throughput and open time at each size, beside raw floor and sqlite."""
    return _per_size(sizes, work, lambda n, base: _store_size(n, base, durable_sample, progress))


def _per_size(sizes: Sequence[int], work: Path | None, one: Callable[[int, Path], list[Row]]) -> list[Row]:
    """Run ``one(n, folder)`` for each size in a scratch folder removed afterwards."""
    rows: list[Row] = []
    base = Path(work or tempfile.mkdtemp(prefix="mdcg-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        for n in sizes:
            rows += one(n, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows


def _store_size(n: int, work: Path, durable_sample: int, progress: Progress | None) -> list[Row]:
    say = progress or (lambda _msg: None)
    nodes = corpus(n)
    say(f"{n:,}: add() one node at a time")
    root = work / f"md_{n}"
    rows, sq = _store_nondurable(n, nodes, root, work)
    sample = nodes[: min(durable_sample, len(nodes))]
    say(f"{n:,}: add(durable=True) per node on {len(sample):,}")
    row, sq_d = _store_durable(n, sample, work)
    rows.append(row)
    say(f"{n:,}: add_many(durable=True) in batches of 1,000")
    rows.append(_store_batches(n, nodes, work, sq, sq_d))
    say(f"{n:,}: open")
    rows += _store_open(n, root, work, len(nodes))
    for p in (root, work / f"raw_{n}"):
        shutil.rmtree(p, ignore_errors=True)
    return rows


def _timed_adds(root: Path, nodes: Sequence[Node], *, durable: bool, compact: bool) -> float:
    """``add`` each node (copies: ``add`` stamps what it is given); return nodes/s."""
    copies = [node.copy() for node in nodes]
    with MdCG(root, auto_compact=10_000 if compact else None) as s:
        t = time.perf_counter()
        for node in copies:
            s.add(node, durable=durable, stamp=False)
        return _rate(len(copies), time.perf_counter() - t)


def _store_nondurable(n: int, nodes: Sequence[Node], root: Path, work: Path) -> tuple[list[Row], float]:
    # No compaction: the cold open below must read the files, not a snapshot.
    ours = _timed_adds(root, nodes, durable=False, compact=False)
    many = _timed_add_many(work / f"mdm_{n}", nodes)
    floor = _raw_floor(work / f"raw_{n}", nodes, durable=False)
    sq = _sqlite_db(work / f"sq_{n}.db", nodes, durable_each=False)
    rows = [
        Row(
            n,
            "write, add() one node at a time, non-durable (nodes/s)",
            f"{ours:,.0f}",
            f"raw floor {floor:,.0f}; sqlite one txn {sq:,.0f}",
            f"{ours / floor:.0%} of floor; {ours / sq:.2f}× sqlite",
        ),
        Row(
            n,
            "write, add_many() batches of 1,000, non-durable (nodes/s)",
            f"{many:,.0f}",
            f"raw floor {floor:,.0f}; sqlite one txn {sq:,.0f}",
            f"{many / floor:.0%} of floor; {many / sq:.2f}× sqlite",
        ),
    ]
    return rows, sq


def _timed_add_many(root: Path, nodes: Sequence[Node]) -> float:
    copies = [node.copy() for node in nodes]
    with MdCG(root, auto_compact=None) as s:
        t = time.perf_counter()
        for start in range(0, len(copies), 1000):
            s.add_many(copies[start : start + 1000], stamp=False)
        rate = _rate(len(copies), time.perf_counter() - t)
    shutil.rmtree(root, ignore_errors=True)
    return rate


def _store_durable(n: int, sample: Sequence[Node], work: Path) -> tuple[Row, float]:
    droot = work / f"mdd_{n}"
    ours_d = _timed_adds(droot, sample, durable=True, compact=True)
    floor_d = _raw_floor(work / f"rawd_{n}", sample, durable=True)
    sq_d = _sqlite_db(work / f"sqd_{n}.db", sample, durable_each=True)
    shutil.rmtree(droot, ignore_errors=True)
    shutil.rmtree(work / f"rawd_{n}", ignore_errors=True)
    row = Row(
        n,
        f"write, durable per node (nodes/s, first {len(sample):,})",
        f"{ours_d:,.0f}",
        f"raw floor+fsync {floor_d:,.0f}; sqlite commit each {sq_d:,.0f}",
        f"{ours_d / floor_d:.0%} of floor; {ours_d / sq_d:.2f}× sqlite",
    )
    return row, sq_d


def _durable_batches(root: Path, nodes: Sequence[Node]) -> float:
    """nodes/s of ``add_many(durable=True)`` in batches of 1,000 into a fresh store at ``root``."""
    copies = [node.copy() for node in nodes]
    with MdCG(root) as s:
        t = time.perf_counter()
        for start in range(0, len(copies), 1000):
            s.add_many(copies[start : start + 1000], durable=True, stamp=False)
        return _rate(len(copies), time.perf_counter() - t)


def durable_rounds(
    n: int, rounds: int, *, work: Path | None = None, progress: Progress | None = None
) -> list[Row]:
    """Durable batches of 1,000 beside both fsync floors, ``rounds`` times, alternating.

    Each round writes ``n`` nodes into a fresh store, the serial fsync floor
    and the floor with :data:`~md_cg.fsops.FSYNC_THREADS` fsyncs at a time,
    in the order ours, serial, concurrent -- reversed every other round, so
    that a disk whose speed drifts (or whose first writes are slow) favours
    neither side. One row per round."""
    nodes = corpus(n)
    say = progress or (lambda _msg: None)

    def one(k: int, base: Path) -> list[Row]:
        threads = fsops.FSYNC_THREADS
        steps: list[tuple[str, Callable[[Path], float]]] = [
            ("ours", lambda root: _durable_batches(root, nodes)),
            ("serial", lambda root: _raw_floor(root, nodes, durable=True, batch=1000)),
            ("concurrent", lambda root: _raw_floor(root, nodes, durable=True, batch=1000, threads=threads)),
        ]
        if k % 2:
            steps.reverse()
        got = {}
        for name, run in steps:
            say(f"round {k + 1}: {name}")
            got[name] = run(base / f"{name}_{k}")
            shutil.rmtree(base / f"{name}_{k}", ignore_errors=True)
        ours, serial, conc = got["ours"], got["serial"], got["concurrent"]
        order = ", ".join(name for name, _ in steps)
        return [
            Row(
                n,
                f"round {k + 1} ({order}): durable batch of 1,000 (nodes/s)",
                f"{ours:,.0f}",
                f"fsync floor {serial:,.0f}; {threads} fsyncs at a time {conc:,.0f}",
                f"{ours / serial:.0%} of the floor ({ours / conc:.0%} of the concurrent one)",
            )
        ]

    return _per_size(list(range(rounds)), work, one)


def _store_batches(n: int, nodes: Sequence[Node], work: Path, sq: float, sq_d: float) -> Row:
    broot = work / f"mdb_{n}"
    ours_b = _durable_batches(broot, nodes)
    floor_b = _raw_floor(work / f"rawb_{n}", nodes, durable=True, batch=1000)
    floor_p = _raw_floor(work / f"rawp_{n}", nodes, durable=True, batch=1000, threads=fsops.FSYNC_THREADS)
    for p in (broot, work / f"rawb_{n}", work / f"rawp_{n}"):
        shutil.rmtree(p, ignore_errors=True)
    return Row(
        n,
        "write, durable batch of 1,000 (nodes/s)",
        f"{ours_b:,.0f}",
        f"raw floor+fsync per file, folders once a batch {floor_b:,.0f}; the same with "
        f"{fsops.FSYNC_THREADS} fsyncs at a time {floor_p:,.0f}; "
        f"sqlite one txn {sq:,.0f}; sqlite commit each {sq_d:,.0f}",
        f"{ours_b / floor_b:.0%} of floor ({ours_b / floor_p:.0%} of the concurrent one); "
        f"{ours_b / sq:.2f}× sqlite one txn",
    )


def _store_open(n: int, root: Path, work: Path, total: int) -> list[Row]:
    # Opening is timed in a fresh process, as an agent process would open the
    # store: this process holds the benchmark's own objects, which would make
    # the loader's garbage-collector pauses longer than they are in practice.
    gc.collect()
    cold_probe = _probe_open(root)  # no snapshot: the index from the files
    assert cold_probe["loaded_from"] == "files" and cold_probe["nodes"] == total
    cold = cold_probe["seconds"]
    with MdCG(root) as s:
        t = time.perf_counter()
        s.rebuild_index()
        rebuild = time.perf_counter() - t
    warm_probe = _probe_open(root)
    assert warm_probe["loaded_from"] == "snapshot" and warm_probe["nodes"] == total
    warm = warm_probe["seconds"]
    sq_open = _probe_sqlite(work / f"sq_{n}.db", total)
    listed = _run_probe(_LIST_PROBE, str(root))
    assert listed["loaded_from"] == "snapshot" and listed["total"] == total
    sq_listed = _run_probe(_SQLITE_LIST_PROBE, str(work / f"sq_{n}.db"))
    assert sq_listed["total"] == total and sq_listed["rows"] == min(50, total)
    return [
        Row(
            n,
            "list the newest 50 (open + list_page), fresh process (s)",
            f"{listed['seconds']:.3f}",
            f"sqlite connect + count + ORDER BY time LIMIT 50 {sq_listed['seconds']:.3f}",
            f"{listed['seconds'] / sq_listed['seconds']:.1f}× sqlite time",
        ),
        Row(
            n,
            "open from snapshot, fresh process (s)",
            f"{warm:.3f}",
            f"sqlite connect + read all rows {sq_open:.3f}",
            f"{warm / sq_open:.1f}× sqlite time",
        ),
        Row(
            n,
            "open without snapshot: index from the files (nodes/s)",
            f"{_rate(total, cold):,.0f}",
            f"{cold:.2f} s for {total:,} files (text index deferred to the first search)",
            "",
        ),
        Row(
            n,
            "rebuild_index(): files → entries + text index + snapshot (nodes/s)",
            f"{_rate(total, rebuild):,.0f}",
            f"{rebuild:.2f} s for {total:,} files",
            "",
        ),
    ]


# -- search ---------------------------------------------------------------------------


@dataclass
class QueryCase:
    query: str
    domain: str | None  # route key of a node the query is about
    miss_domain: str  # a domain whose bucket does not answer the query
    like_ids: list[str]  # sqlite LIKE answer (1..10 rows)


def _instances(nodes: Sequence[Node]) -> dict[str, list[Node]]:
    """Instance names (the bracketed tail of observation_position) -> nodes."""
    out: dict[str, list[Node]] = {}
    for node in nodes:
        pos = (node.condition_space or {}).get("observation_position")
        if not isinstance(pos, str):
            continue
        for open_b, close_b in (("（", "）"), ("(", ")")):
            if open_b in pos and pos.endswith(close_b):
                inner = pos[pos.rindex(open_b) + 1 : -1].split(":")[0].split("：")[0].strip()
                if len(inner) >= 2:
                    out.setdefault(inner, []).append(node)
                break
    return out


def query_cases(
    nodes: Sequence[Node], conn: sqlite3.Connection, count: int, seed: int = 7
) -> list[QueryCase]:
    """Queries (instance names) that sqlite LIKE answers with 1..10 rows."""
    rng = random.Random(seed)
    by_name = _instances(nodes)
    names = sorted(by_name)
    rng.shuffle(names)
    domains = sorted(
        {key for n in nodes if n.layer == "knowledge" and (key := layout.route_key(n)) is not None}
    )
    cases: list[QueryCase] = []
    for name in names:
        like = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM nodes WHERE layer NOT IN ('rejected','unresolved') "
                "AND content LIKE ? LIMIT 11",
                (f"%{name}%",),
            )
        ]
        if not 1 <= len(like) <= 10:
            continue
        domain = layout.route_key(by_name[name][0])
        miss = next(d for d in domains if d != domain)
        cases.append(QueryCase(name, domain, miss, like))
        if len(cases) >= count:
            break
    return cases


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _timed(fn: Callable[[], Any], repeat: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat * 1000


def search_bench(
    sizes: Sequence[int],
    *,
    queries: int = 200,
    work: Path | None = None,
    progress: Progress | None = None,
) -> list[Row]:
    return _per_size(sizes, work, lambda n, base: _search_size(n, base, queries, progress))


def build_sqlite_fts(db: Path, nodes: Sequence[Node]) -> sqlite3.Connection:
    """The sqlite baselines over the nodes: the reference table, an FTS5 trigram
    table (substring lookups) and an FTS5 unicode61 table (ranked word search)."""
    _sqlite_db(db, nodes, durable_each=False)
    conn = sqlite3.connect(db)
    conn.execute("CREATE VIRTUAL TABLE fts USING fts5(content, tokenize='trigram')")
    conn.execute("INSERT INTO fts(rowid, content) SELECT rowid, content FROM nodes")
    conn.execute("CREATE VIRTUAL TABLE fts_words USING fts5(content)")
    conn.execute("INSERT INTO fts_words(rowid, content) SELECT rowid, content FROM nodes")
    conn.commit()
    return conn


_WORD = re.compile(r"\w+")


def fts_or_query(query: str) -> str:
    """The query as FTS-based memory stores run it: an OR of its quoted terms."""
    terms = _WORD.findall(query) or [query]
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


#: The three sqlite lookups timed beside search: name -> (SQL, how the query is passed).
SQLITE_LOOKUPS: dict[str, tuple[str, Callable[[str], str]]] = {
    "LIKE": (
        "SELECT id FROM nodes WHERE layer NOT IN ('rejected','unresolved') AND content LIKE ? LIMIT 10",
        lambda q: f"%{q}%",
    ),
    "FTS5 trigram phrase": (
        "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10",
        lambda q: '"' + q.replace('"', '""') + '"',
    ),
    "FTS5 OR + bm25": (
        "SELECT n.id FROM fts_words f JOIN nodes n ON n.rowid = f.rowid "
        "WHERE fts_words MATCH ? ORDER BY bm25(fts_words) LIMIT 10",
        fts_or_query,
    ),
}


def time_sqlite(
    conn: sqlite3.Connection, queries: Sequence[str]
) -> tuple[dict[str, list[float]], list[list[str]]]:
    """Milliseconds of each lookup of :data:`SQLITE_LOOKUPS` per query, and the
    ids the ranked OR lookup returned (for its recall)."""
    times: dict[str, list[float]] = {name: [] for name in SQLITE_LOOKUPS}
    ranked: list[list[str]] = []
    for q in queries:
        for name, (sql, arg) in SQLITE_LOOKUPS.items():
            t = time.perf_counter()
            got = conn.execute(sql, (arg(q),)).fetchall()
            times[name].append((time.perf_counter() - t) * 1000)
            if name == "FTS5 OR + bm25":
                ranked.append([r[0] for r in got])
    return times, ranked


_KINDS = {"none": "no context", "hit": "routed hit", "miss": "routed miss"}


def _time_search(store: MdCG, cases: Sequence[QueryCase]) -> dict[str, Any]:
    """md-cg's latency (ms), scanned share and top tier per kind, and recall@10 vs LIKE."""
    # One warm-up pass over the query set (stem cache, synonym table, the
    # fuzzy-match map, numpy): the figures are for a process that has been
    # serving queries, as an agent's memory does.
    for c in cases:
        for ctx in (None, c.domain, c.miss_domain):
            store.search(c.query, context=ctx, record=False)
    out: dict[str, Any] = {k: {"ms": [], "scanned": [], "tiers": []} for k in _KINDS}
    recalls: list[float] = []
    for c in cases:
        for kind, ctx in (("none", None), ("hit", c.domain), ("miss", c.miss_domain)):
            t = time.perf_counter()
            results, meta = store.search(c.query, k=10, context=ctx, record=False)
            out[kind]["ms"].append((time.perf_counter() - t) * 1000)
            out[kind]["scanned"].append(meta["scanned_share"])
            out[kind]["tiers"].append(results[0].tier if results else "-")
            if kind == "none":
                recalls.append(len({r.id for r in results} & set(c.like_ids)) / len(c.like_ids))
    out["recall"] = recalls
    return out


def _search_size(n: int, work: Path, queries: int, progress: Progress | None) -> list[Row]:
    say = progress or (lambda _msg: None)
    say(f"{n:,}: building the store and the sqlite baselines")
    nodes = corpus(n)
    root = work / f"s_{n}"
    with MdCG(root) as s:
        for start in range(0, len(nodes), 2000):
            s.add_many(nodes[start : start + 2000], stamp=False)
        s.compact_index()
    conn = build_sqlite_fts(work / f"s_{n}.db", nodes)
    cases = query_cases(nodes, conn, queries)
    filters = filter_tags(nodes)
    del nodes
    index_rss = index_memory(root)
    store = MdCG(root, refresh_interval=None)
    total = len(store)
    try:
        say(f"{n:,}: {len(cases)} queries × 3 kinds")
        ours = _time_search(store, cases)
        sq_times, ranked = time_sqlite(conn, [c.query for c in cases])
        filtered = [
            _filter_row(n, store, conn, [c.query for c in cases], tag, share) for tag, share in filters
        ]
    finally:
        store.close()
        conn.close()
    or_recall = [
        len(set(got) & set(c.like_ids)) / len(c.like_ids) for got, c in zip(ranked, cases, strict=True)
    ]
    rows = _search_rows(n, ours, sq_times) + filtered
    rows.append(
        Row(
            n,
            f"recall@10 vs sqlite LIKE ({len(cases)} queries with 1-10 LIKE rows)",
            f"{statistics.mean(ours['recall']):.3f}" if cases else "n/a",
            "sqlite LIKE = 1.000; "
            + (f"FTS5 OR + bm25 = {statistics.mean(or_recall):.3f}" if cases else "FTS5 OR + bm25 n/a"),
            "",
        )
    )
    rows.append(
        Row(
            n,
            "index memory (RSS after open from snapshot)",
            f"{index_rss / 2**20:,.0f} MiB",
            f"{total:,} nodes",
            f"{index_rss / max(total, 1) / 1024:.1f} KiB/node",
        )
    )
    shutil.rmtree(root, ignore_errors=True)
    return rows


#: The ranked OR lookup of :data:`SQLITE_LOOKUPS` restricted to rows carrying a tag.
FTS_OR_TAGGED = (
    "SELECT n.id FROM fts_words f JOIN nodes n ON n.rowid = f.rowid WHERE fts_words MATCH ? "
    "AND EXISTS (SELECT 1 FROM json_each(n.tags) WHERE value = ?) ORDER BY bm25(fts_words) LIMIT 10"
)


def filter_tags(nodes: Sequence[Node], shares: Sequence[float] = (0.05, 0.25)) -> list[tuple[str, float]]:
    """For each wanted share, the tag carried by the nearest share of ``nodes`` (and that share)."""
    counts: dict[str, int] = {}
    for node in nodes:
        for t in set(node.tags):
            counts[t] = counts.get(t, 0) + 1
    if not counts:
        return []
    total = len(nodes)
    picked = [min(sorted(counts), key=lambda t: abs(counts[t] / total - want)) for want in shares]
    return [(t, counts[t] / total) for t in dict.fromkeys(picked)]


def _filter_row(
    n: int, store: MdCG, conn: sqlite3.Connection, queries: Sequence[str], tag: str, share: float
) -> Row:
    """Search filtered by ``tag`` (every tier within it) beside FTS5 OR + bm25 joined to the tag."""
    for q in queries:  # the warm-up, as in _time_search (the tag map is built here)
        store.search(q, k=10, record=False, tag=tag)
    ours: list[float] = []
    for q in queries:
        t = time.perf_counter()
        store.search(q, k=10, record=False, tag=tag)
        ours.append((time.perf_counter() - t) * 1000)
    base: list[float] = []
    for q in queries:
        t = time.perf_counter()
        conn.execute(FTS_OR_TAGGED, (fts_or_query(q), tag)).fetchall()
        base.append((time.perf_counter() - t) * 1000)
    o50, o95, b50, b95 = _pct(ours, 0.5), _pct(ours, 0.95), _pct(base, 0.5), _pct(base, 0.95)
    return Row(
        n,
        f"search p50/p95 ms, tag filter ({share:.0%} of nodes), no context",
        f"{o50:.3f} / {o95:.3f}",
        f"FTS5 OR + bm25 + the tag (json_each) {b50:.3f} / {b95:.3f}",
        f"md-cg time / baseline time: p50 {o50 / b50:.2f}×, p95 {o95 / b95:.2f}×",
    )


def _search_rows(n: int, ours: dict[str, Any], sq: dict[str, list[float]]) -> list[Row]:
    p50 = {name: _pct(ms, 0.5) for name, ms in sq.items()}
    p95 = {name: _pct(ms, 0.95) for name, ms in sq.items()}
    baseline = "; ".join(f"{name} {p50[name]:.3f} / {p95[name]:.3f}" for name in sq)
    rows: list[Row] = []
    for kind, label in _KINDS.items():
        got = ours[kind]
        ours50, ours95 = _pct(got["ms"], 0.5), _pct(got["ms"], 0.95)
        share = statistics.mean(got["scanned"]) if got["scanned"] else 0.0
        tiers = got["tiers"]
        top_tiers = ", ".join(f"{t}:{tiers.count(t)}" for t in sorted(set(tiers)))
        rows.append(
            Row(
                n,
                f"search p50/p95 ms, {label} (scans {share:.1%}; top tier {top_tiers})",
                f"{ours50:.3f} / {ours95:.3f}",
                baseline,
                f"md-cg time / baseline time: p50 {ours50 / p50['LIKE']:.2f}× LIKE, "
                f"{ours50 / p50['FTS5 OR + bm25']:.2f}× FTS5 OR + bm25, "
                f"{ours50 / p50['FTS5 trigram phrase']:.2f}× trigram phrase; "
                f"p95 {ours95 / p95['FTS5 OR + bm25']:.2f}× FTS5 OR + bm25",
            )
        )
    return rows


def run(kind: str = "all", sizes: Sequence[int] | None = None, progress: Progress | None = None) -> str:
    """Run the store and/or search benchmark; return the Markdown tables."""
    if kind not in ("store", "search", "all"):
        raise InvalidArgumentError(
            f"kind must be store, search or all, got {kind!r}", name="kind", value=kind
        )
    parts = []
    if kind in ("store", "all"):
        rows = store_bench(sizes or [1000], durable_sample=200, progress=progress)
        parts.append(render(rows, "Store: writes and open"))
    if kind in ("search", "all"):
        rows = search_bench(sizes or [3000], queries=100, progress=progress)
        parts.append(render(rows, "Search: latency, recall, memory"))
    return "\n\n".join(parts)


# -- migration ------------------------------------------------------------------


def _sqlite_copy(src: Path, dest: Path) -> int:
    """Copy the ``nodes`` and ``edges`` rows into a new database; return the node rows."""
    source = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(dest)
    try:
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE name IN ('nodes', 'edges') AND type = 'table'"
        ):
            target.execute(sql)
        with target:
            for table in ("nodes", "edges"):
                rows = source.execute(f"SELECT * FROM {table}").fetchall()
                if rows:
                    marks = ", ".join("?" for _ in rows[0])
                    target.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        return int(target.execute("SELECT COUNT(*) FROM nodes").fetchone()[0])
    finally:
        source.close()
        target.close()


def migrate_bench(
    *, repeat: int = 3, batch: int = 500, knowledge: int | None = None, work: Path | None = None
) -> str:
    """Migration throughput of the seed-shaped sample beside its floors, in one run.

    Times, ``repeat`` times each (median reported): :func:`md_cg.migrate.migrate`
    end to end (read, convert, write through ``add_many``, snapshot, verify
    every field), non-durable and durable, with the write and verify passes
    apart; the idempotent re-run; reading and converting the rows alone; the raw
    floor (the same files, temp + ``os.replace``; durable: fsync per file and
    per folder once a batch); a plain sqlite -> sqlite copy of the rows.
    Returns a Markdown table.
    """
    from .sample import generate
    from .sqlite_source import iter_rows, open_readonly

    base = Path(work or tempfile.mkdtemp(prefix="mdcg-migrate-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    samples: dict[str, list[float]] = {}
    try:
        src = base / "full.sqlite"
        stats = generate(src, knowledge=knowledge)
        conn = open_readonly(src)
        try:
            nodes = [r.node for r in iter_rows(conn) if r.node is not None]
        finally:
            conn.close()
        for i in range(repeat):
            _migrate_round(base, src, nodes, stats.nodes, i, batch, samples)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    head = (
        f"Migration of the sample: {stats.nodes:,} nodes ({stats.knowledge:,} knowledge), "
        f"{stats.edges:,} edges; batch {batch}; median of {repeat} run(s)."
    )
    return _migrate_table(head, medians, stats.nodes)


def _migrate_round(
    base: Path,
    src: Path,
    nodes: Sequence[Node],
    total: int,
    i: int,
    batch: int,
    samples: dict[str, list[float]],
) -> None:
    """One round of every measure of :func:`migrate_bench`, appended to ``samples``."""
    from .migrate import migrate
    from .sqlite_source import iter_rows, open_readonly

    def add(name: str, seconds: float) -> None:
        samples.setdefault(name, []).append(seconds)

    for durable in (False, True):
        tag = "durable" if durable else "non-durable"
        dest = base / f"md_{tag}_{i}"
        report = migrate(src, dest, batch=batch, durable=durable)
        if not report.ok or report.migrated != total:
            raise RuntimeError(f"migration failed: {report.render()}")
        add(f"migrate, {tag}", report.seconds)
        add(f"  of which writing, {tag}", report.write_seconds)
        add(f"  of which verifying, {tag}", report.verify_seconds)
        if not durable:
            again = migrate(src, dest, batch=batch)
            if again.unchanged != total:
                raise RuntimeError("the re-run rewrote files")
            add("migrate again (all unchanged), non-durable", again.seconds)
            _transfer_round(base, dest, total, i, batch, add)
        shutil.rmtree(dest)
    t = time.perf_counter()
    conn = open_readonly(src)
    try:
        for _ in iter_rows(conn):
            pass
    finally:
        conn.close()
    add("sqlite read + convert (iter_rows)", time.perf_counter() - t)
    for durable in (False, True):
        tag = "durable" if durable else "non-durable"
        root = base / f"raw_{tag}_{i}"
        rate = _raw_floor(root, nodes, durable=durable, batch=batch)
        add(f"raw floor (temp + os.replace), {tag}", len(nodes) / rate)
        shutil.rmtree(root)
    copy = base / f"copy_{i}.sqlite"
    t = time.perf_counter()
    _sqlite_copy(src, copy)
    add("sqlite -> sqlite copy (one transaction)", time.perf_counter() - t)
    copy.unlink()


def _transfer_round(
    base: Path, source: Path, total: int, i: int, batch: int, add: Callable[[str, float], None]
) -> None:
    """JSON lines of the migrated store: export, import into a fresh store, import again."""
    from .store import MdCG
    from .transfer import export_nodes, import_nodes

    lines = base / f"export_{i}.jsonl"
    t = time.perf_counter()
    with MdCG(source, read_only=True) as store:
        exported = export_nodes(store, lines, include_archived=True, include_expired=True)
    add("export as JSON lines (export_nodes)", time.perf_counter() - t)
    target = base / f"imported_{i}"
    for name in (
        "import JSON lines (import_nodes), non-durable",
        "import again (all unchanged), non-durable",
    ):
        t = time.perf_counter()
        with MdCG(target) as store:
            report = import_nodes(store, lines, batch=batch)
        add(name, time.perf_counter() - t)
        if exported.count != total or report.records != total or report.bad:
            raise RuntimeError(f"the import did not take every node: {report.summary()}")
    if report.unchanged != total:
        raise RuntimeError("the import re-run rewrote files")
    shutil.rmtree(target)
    lines.unlink()


def _migrate_table(head: str, medians: dict[str, float], total: int) -> str:
    floor = medians["raw floor (temp + os.replace), non-durable"]
    floor_durable = medians["raw floor (temp + os.replace), durable"]
    lines = [
        head,
        f"Machine: {machine()}",
        "",
        "| what | seconds | nodes/s | time vs raw floor (same durability) |",
        "|---|---:|---:|---:|",
    ]
    for name, seconds in medians.items():
        base_s = floor_durable if name.endswith(", durable") else floor
        writes = not name.startswith("sqlite") and "verifying" not in name
        ratio = f"{seconds / base_s:.1f}×" if writes else "–"
        lines.append(f"| {name} | {seconds:.3f} | {total / seconds:,.0f} | {ratio} |")
    return "\n".join(lines)
