"""md-cg at scale beside sqlite (one table + FTS5), in one run.

    python bench/bench_scale.py [--sizes 10000,100000] [--million] [--queries 200]
                                [--edits 1000] [--work DIR] [--out FILE] [--language en]

For each size a seed-shaped store (:func:`md_cg.benchmark.corpus`: N knowledge
nodes plus the sample's other layers) is written **through the engine**
(``add_many`` in batches of 1,000, non-durable), and the same rows go into
sqlite: one ``nodes`` table (the reference schema) plus an FTS5 table over
the content, committed every 1,000 rows. Then, each in a fresh process:

* **open without a snapshot** (the index from the files), then the first
  search (which builds the text index): the time to a usable index, and the
  peak RSS of the process -- once with the helper processes the machine
  gives (:mod:`md_cg.coldbuild`; their CPU counted too), once with this
  process alone (``MDCG_BUILD_WORKERS=0``);
* **rebuild_index** (files -> entries + text index + snapshot): time, CPU
  (with the helpers') and the peak RSS of the process;
* **open from the snapshot**, three times (the worst and the median), then
  search latency p50/p95 for three kinds -- no context, routed hit (context
  = the domain of a node the query is about), routed miss (another domain)
  -- and English titles of three words or more (no context; the queries the
  ranking's feedback runs for), and the process's RSS;
* sqlite: connect + count, the same queries as an OR of their terms ordered
  by ``bm25()`` (what FTS-based memory stores run), and its RSS;
* ``sync()`` after ``--edits`` files were edited by hand (appended a line),
  beside sqlite updating the same rows (and their FTS rows) in one transaction;
  then the four search kinds again, in a fresh process, against the figures
  before the edits: the edited nodes' old postings are dead until a
  compaction, as in any store in use (one deletion once made every search at
  1M 3x slower, docs/benchmarks.md session 11).

Also: bytes on disk (allocated blocks) of both, and a cost-growth table --
per-node cost of writing, rebuilding (CPU of the process and its helpers) and
a cold open (this process alone) at each size against the smallest.

The corpus (N :class:`~md_cg.node.Node` objects, about seven objects the
garbage collector tracks per node) is the benchmark's, not the writers': a
migration streams its rows and never holds them all. While both stores are
written it is frozen out of the collector's sight (``gc.freeze()``), so that
each full collection scans what the writer keeps, not the benchmark's input;
md-cg's write is then measured once more with the corpus in sight (the
"corpus in the GC's sight" column of the growth table: what a caller that
keeps N nodes alive pays).
``--language en`` (or ``zh``) draws the notes from that language's domains only
(an all-English store: its common words hold far more postings than in the
mixed one). ``--million`` adds the 1,000,000 size (about 10 minutes of writing on two
cores, ~4 GiB of free memory). Queries are instance names of the corpus that
name 1-10 nodes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from md_cg import MdCG, benchmark, layout
from md_cg.index import title_of
from md_cg.node import Node
from md_cg.sqlite_source import SCHEMA_SQL, node_to_row

_MEM = """
import resource

def children():
    \"\"\"CPU seconds of the helper processes waited for so far.

    (Not their peak RSS: the children's ru_maxrss counts the moment between
    fork and exec, when a child's RSS is this process's own.)\"\"\"
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime

def mem():
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out
"""

_OPEN_COLD = (
    _MEM
    + """
import json, sys, time
from md_cg import MdCG
base = mem()["VmRSS"]
t, c = time.perf_counter(), time.process_time()
store = MdCG(sys.argv[1], refresh_interval=None, auto_compact=None)
opened, opened_cpu = time.perf_counter() - t, time.process_time() - c
store.search("probe", record=False)
usable, usable_cpu = time.perf_counter() - t, time.process_time() - c
m = mem()
from md_cg import coldbuild
helper_cpu = children()
out = {"open": opened, "usable": usable, "open_cpu": opened_cpu, "usable_cpu": usable_cpu}
out.update({"from": store.loaded_from, "nodes": len(store), "rss": m["VmRSS"] - base, "peak": m["VmHWM"]})
out.update({"helpers": coldbuild.worker_count(len(store)), "helper_cpu": helper_cpu})
print(json.dumps(out))
"""
)

_REBUILD = (
    _MEM
    + """
import json, sys, time
from md_cg import MdCG
store = MdCG(sys.argv[1], refresh_interval=None, auto_compact=None)
t, c, h = time.perf_counter(), time.process_time(), children()
store.rebuild_index()
seconds, cpu, helper_cpu = time.perf_counter() - t, time.process_time() - c, children() - h
store.close()
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak": mem()["VmHWM"], "helper_cpu": helper_cpu}))
"""
)

_SEARCH = (
    _MEM
    + """
import json, sys, time
from md_cg import MdCG
cases = json.load(open(sys.argv[2]))
base = mem()["VmRSS"]
t, c = time.perf_counter(), time.process_time()
store = MdCG(sys.argv[1], refresh_interval=None, auto_compact=None)
out = {"open": time.perf_counter() - t, "open_cpu": time.process_time() - c}
out.update({"from": store.loaded_from, "nodes": len(store)})
english = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else []
if cases:
    for c in cases:  # warm-up: stem cache, synonym table, fuzzy map, text index
        for ctx in (None, c["domain"], c["miss"]):
            store.search(c["query"], context=ctx, record=False)
    for c in english:
        store.search(c["query"], record=False)
    for kind, key in (("none", None), ("hit", "domain"), ("miss", "miss"), ("english", None)):
        ms, cpu = [], []
        for c in english if kind == "english" else cases:
            t, p = time.perf_counter(), time.process_time()
            store.search(c["query"], k=10, context=c[key] if key else None, record=False)
            ms.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - p) * 1000)
        out[kind], out[kind + "_cpu"] = ms, cpu
m = mem()
out["rss"], out["peak"] = m["VmRSS"] - base, m["VmHWM"]
print(json.dumps(out))
"""
)

_SYNC = """
import json, sys, time
from md_cg import MdCG
store = MdCG(sys.argv[1], refresh_interval=None, auto_compact=None)
t = time.perf_counter()
report = store.sync()
print(json.dumps({"seconds": time.perf_counter() - t, "changed": len(report.changed)}))
"""

_SQLITE = (
    _MEM
    + """
import json, sqlite3, sys, time
from md_cg.benchmark import fts_or_query
cases = json.load(open(sys.argv[2]))
english = json.load(open(sys.argv[3]))
base = mem()["VmRSS"]
t = time.perf_counter()
conn = sqlite3.connect(sys.argv[1])
rows = conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
out = {"open": time.perf_counter() - t, "rows": rows}
sql = ("SELECT n.id FROM fts f JOIN nodes n ON n.rowid = f.rowid "
       "WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 10")
for c in cases + english:
    conn.execute(sql, (fts_or_query(c["query"]),)).fetchall()
for kind, queries in (("", cases), ("_en", english)):
    ms, cpu = [], []
    for c in queries:
        t, p = time.perf_counter(), time.process_time()
        conn.execute(sql, (fts_or_query(c["query"]),)).fetchall()
        ms.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - p) * 1000)
    out["ms" + kind], out["cpu" + kind] = ms, cpu
m = mem()
out["rss"], out["peak"] = m["VmRSS"] - base, m["VmHWM"]
print(json.dumps(out))
"""
)


def probe(code: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter (``env``: added to the environment); return the JSON it prints."""
    full = None if env is None else {**os.environ, **env}
    cmd = [sys.executable, "-c", code, *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=full)
    return json.loads(out.stdout)


def disk_bytes(root: Path) -> tuple[int, int]:
    """Allocated bytes of the node files and of everything else (``.mdcg/``) under ``root``."""
    nodes = other = 0
    for folder, _dirs, files in os.walk(root):
        meta = "/.mdcg" in folder or folder.endswith(".mdcg")
        for name in files:
            st = os.lstat(os.path.join(folder, name))
            if meta or not name.endswith(".md"):
                other += st.st_blocks * 512
            else:
                nodes += st.st_blocks * 512
    return nodes, other


def cases_of(nodes: Sequence[Node], count: int, seed: int = 7) -> list[dict[str, Any]]:
    """Queries: instance names naming 1-10 nodes, with a routed-hit and a routed-miss context."""
    by_name = benchmark._instances(nodes)
    names = sorted(n for n, found in by_name.items() if 1 <= len(found) <= 10)
    random.Random(seed).shuffle(names)
    domains = sorted(
        {key for n in nodes if n.layer == "knowledge" and (key := layout.route_key(n)) is not None}
    )
    out = []
    for name in names[:count]:
        domain = layout.route_key(by_name[name][0])
        out.append({"query": name, "domain": domain, "miss": next(d for d in domains if d != domain)})
    return out


def english_cases(nodes: Sequence[Node], count: int, seed: int = 11) -> list[dict[str, Any]]:
    """Queries: English titles of three words or more (the ranking's feedback runs for them)."""
    titles = sorted({t for n in nodes if (t := title_of(n.body)).isascii() and len(t.split()) >= 3})
    return [{"query": t} for t in random.Random(seed).sample(titles, min(count, len(titles)))]


def write_store(root: Path, nodes: Sequence[Node]) -> tuple[float, float]:
    """``add_many`` in batches of 1,000, non-durable; seconds (wall, CPU)."""
    with MdCG(root, auto_compact=None) as s:
        t, c = time.perf_counter(), time.process_time()
        for start in range(0, len(nodes), 1000):
            s.add_many(nodes[start : start + 1000], stamp=False)
        return time.perf_counter() - t, time.process_time() - c


def write_sqlite(db: Path, nodes: Sequence[Node]) -> tuple[float, float]:
    """The rows and their FTS5 (unicode61) rows, committed every 1,000 rows; seconds (wall, CPU)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(SCHEMA_SQL)
    conn.execute("CREATE VIRTUAL TABLE fts USING fts5(content)")
    t, c = time.perf_counter(), time.process_time()
    for start in range(0, len(nodes), 1000):
        rows = [node_to_row(n) for n in nodes[start : start + 1000]]
        cols = list(rows[0])
        conn.execute("BEGIN")
        cur = conn.executemany(
            f"INSERT INTO nodes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [tuple(r[c] for c in cols) for r in rows],
        )
        del cur
        first = conn.execute("SELECT max(rowid) FROM nodes").fetchone()[0] - len(rows) + 1
        conn.executemany(
            "INSERT INTO fts(rowid, content) VALUES (?, ?)",
            [(first + i, r["content"]) for i, r in enumerate(rows)],
        )
        conn.execute("COMMIT")
    seconds = time.perf_counter() - t, time.process_time() - c
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return seconds


def hand_edits(root: Path, count: int) -> list[str]:
    """Append a line to the body of ``count`` knowledge files, as a person would; their ids."""
    edited: list[str] = []
    for bucket in sorted(os.scandir(root / "knowledge"), key=lambda e: e.name):
        if not bucket.is_dir(follow_symlinks=False):
            continue
        for entry in sorted(os.scandir(bucket.path), key=lambda e: e.name):
            if len(edited) >= count:
                return edited
            if entry.name.endswith(".md") and not entry.name.startswith("."):
                with open(entry.path, "a", encoding="utf-8") as fh:
                    fh.write("Edited by hand during the scale benchmark.\n")
                edited.append(entry.name[:-3])
    return edited


def sqlite_edits(db: Path, ids: Sequence[str]) -> float:
    """The same edits in sqlite: content and its FTS row, one transaction; seconds."""
    conn = sqlite3.connect(db, isolation_level=None)
    t = time.perf_counter()
    conn.execute("BEGIN")
    for node_id in ids:
        rowid, content = conn.execute("SELECT rowid, content FROM nodes WHERE id = ?", (node_id,)).fetchone()
        content += "\nEdited by hand during the scale benchmark."
        conn.execute("UPDATE nodes SET content = ? WHERE rowid = ?", (content, rowid))
        conn.execute("UPDATE fts SET content = ? WHERE rowid = ?", (content, rowid))
    conn.execute("COMMIT")
    seconds = time.perf_counter() - t
    conn.close()
    return seconds


def pct(values: Sequence[float], q: float) -> float:
    return benchmark._pct(list(values), q)


def one_size(
    n: int, work: Path, queries: int, edits: int, say: Any, language: str | None = None
) -> dict[str, Any]:
    """Every measure at one size (see the module docstring)."""
    say(f"{n:,}: generating the corpus")
    nodes = benchmark.corpus(n, language=language)
    total = len(nodes)
    cases = cases_of(nodes, queries)
    qfile = work / f"cases_{n}.json"
    qfile.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    english = english_cases(nodes, queries)
    efile = work / f"english_{n}.json"
    efile.write_text(json.dumps(english), encoding="utf-8")
    root, db = work / f"md_{n}", work / f"sq_{n}.db"
    say(f"{n:,}: writing {total:,} nodes through the engine")
    r: dict[str, Any] = {"n": n, "total": total, "queries": len(cases)}
    r["english_queries"] = len(english)
    # The corpus is the benchmark's, not the writers': out of the collector's sight
    # while both stores are written (see the module docstring).
    gc.collect()
    gc.freeze()
    try:
        r["write_s"], r["write_cpu"] = write_store(root, nodes)
        say(f"{n:,}: writing sqlite")
        r["sq_write_s"], r["sq_write_cpu"] = write_sqlite(db, nodes)
    finally:
        gc.unfreeze()
    say(f"{n:,}: writing through the engine again, the corpus in the collector's sight")
    held = work / f"md_{n}_held"
    r["write_held_s"], r["write_held_cpu"] = write_store(held, nodes)
    shutil.rmtree(held)
    del nodes
    gc.collect()
    r["disk_nodes"], r["disk_meta"] = disk_bytes(root)
    r["sq_disk"] = sum(p.stat().st_size for p in work.glob(f"sq_{n}.db*"))
    say(f"{n:,}: cold open, rebuild, open from snapshot, search")
    r["cold"] = probe(_OPEN_COLD, str(root))
    assert r["cold"]["from"] == "files" and r["cold"]["nodes"] == total, r["cold"]
    r["cold_alone"] = probe(_OPEN_COLD, str(root), env={"MDCG_BUILD_WORKERS": "0"})
    assert r["cold_alone"]["from"] == "files" and r["cold_alone"]["nodes"] == total, r["cold_alone"]
    r["rebuild"] = probe(_REBUILD, str(root))
    opens = [probe(_SEARCH, str(root), str(work / "none.json")) for _ in range(2)]
    r["search"] = probe(_SEARCH, str(root), str(qfile), str(efile))
    assert r["search"]["from"] == "snapshot" and r["search"]["nodes"] == total, r["search"]
    opens.append(r["search"])
    r["opens"], r["opens_cpu"] = [o["open"] for o in opens], [o["open_cpu"] for o in opens]
    r["sqlite"] = probe(_SQLITE, str(db), str(qfile), str(efile))
    say(f"{n:,}: {edits:,} hand edits, then sync()")
    ids = hand_edits(root, edits)
    r["sync"] = probe(_SYNC, str(root))
    r["sync"]["edited"] = len(ids)
    say(f"{n:,}: search again (the edited nodes' old postings are dead until a compaction)")
    r["after"] = probe(_SEARCH, str(root), str(qfile), str(efile))
    r["sq_edits_s"] = sqlite_edits(db, ids)
    shutil.rmtree(root, ignore_errors=True)
    for p in work.glob(f"sq_{n}.db*"):
        p.unlink()
    return r


def _mib(b: float) -> str:
    return f"{b / 2**20:,.0f} MiB"


def table(results: Sequence[dict[str, Any]]) -> str:
    """The per-size table: md-cg beside sqlite, with ratios."""
    lines = [
        f"Machine: {benchmark.machine()}",
        "",
        "| N (nodes) | measure | md-cg | sqlite (table + FTS5) | md-cg / sqlite |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines += [f"| {r['total']:,} | {m} | {a} | {b} | {c} |" for m, a, b, c in _rows(r)]
    return "\n".join(lines)


def _both(wall: float, cpu: float, fmt: str = "{:,.0f}") -> str:
    """A wall-clock figure with its CPU-time figure (the machine is shared: see the docs)."""
    return f"{fmt.format(wall)} (CPU {fmt.format(cpu)})"


def _rows(r: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    total, s, q, cold, alone = r["total"], r["search"], r["sqlite"], r["cold"], r["cold_alone"]
    w, sw = total / r["write_s"], total / r["sq_write_s"]
    disk = r["disk_nodes"] + r["disk_meta"]
    out = [
        (
            "write, batches of 1,000, non-durable (nodes/s)",
            _both(w, total / r["write_cpu"]),
            _both(sw, total / r["sq_write_cpu"]),
            f"{w / sw:.2f}×",
        ),
        (
            "size on disk (allocated)",
            f"{_mib(disk)} ({_mib(r['disk_nodes'])} files + {_mib(r['disk_meta'])} .mdcg)",
            _mib(r["sq_disk"]),
            f"{disk / r['sq_disk']:.1f}×",
        ),
        (
            "open from snapshot, fresh process (s; worst / median of 3)",
            f"{max(r['opens']):.3f} / {statistics.median(r['opens']):.3f} "
            f"(CPU {max(r['opens_cpu']):.3f} / {statistics.median(r['opens_cpu']):.3f})",
            f"connect + count {q['open']:.4f}",
            "",
        ),
        (
            f"open without snapshot → usable index incl. text, {cold['helpers']} helper(s) (files/s)",
            _both(total / cold["usable"], total / (cold["usable_cpu"] + cold["helper_cpu"]))
            + f"; {cold['usable']:.1f} s (CPU {cold['usable_cpu']:.1f} + {cold['helper_cpu']:.1f} helpers)",
            "",
            f"{alone['usable'] / cold['usable']:.2f}× this process alone",
        ),
        (
            "the same, this process alone (`MDCG_BUILD_WORKERS=0`; files/s)",
            _both(total / alone["usable"], total / alone["usable_cpu"])
            + f"; {alone['usable']:.1f} s, entries alone {alone['open']:.1f} s",
            "",
            "",
        ),
        (
            "rebuild_index() (nodes/s; peak RSS of the process)",
            _both(total / r["rebuild"]["seconds"], total / (r["rebuild"]["cpu"] + r["rebuild"]["helper_cpu"]))
            + f"; {_mib(r['rebuild']['peak'])}",
            "",
            "",
        ),
    ]
    kinds = (("none", "no context", ""), ("hit", "routed hit", ""), ("miss", "routed miss", ""))
    for kind, label, sq in (*kinds, ("english", "English titles of 3+ words, no context", "_en")):
        p50, p95 = pct(s[kind], 0.5), pct(s[kind], 0.95)
        sq50, sq95 = pct(q["ms" + sq], 0.5), pct(q["ms" + sq], 0.95)
        count = r["english_queries"] if kind == "english" else r["queries"]
        out.append(
            (
                f"search p50 / p95 ms, {label} ({count} queries)",
                f"{p50:.2f} / {p95:.2f} (CPU p50 {pct(s[kind + '_cpu'], 0.5):.2f})",
                f"FTS5 OR + bm25() {sq50:.2f} / {sq95:.2f} (CPU p50 {pct(q['cpu' + sq], 0.5):.2f})",
                f"{p50 / sq50:.2f}× / {p95 / sq95:.2f}×",
            )
        )
    out += [
        (
            "RSS after open + queries (added to a fresh process; peak)",
            f"{_mib(s['rss'])} ({s['rss'] / total / 1024:.1f} KiB/node); peak {_mib(s['peak'])}",
            f"{_mib(q['rss'])}; peak {_mib(q['peak'])}",
            f"{s['rss'] / max(q['rss'], 1):.1f}×",
        ),
        (
            f"{r['sync']['edited']:,} hand edits picked up (s)",
            f"sync() {r['sync']['seconds']:.2f} ({r['sync']['changed']:,} changed)",
            f"UPDATE rows + FTS, one txn {r['sq_edits_s']:.2f}",
            f"{r['sync']['seconds'] / r['sq_edits_s']:.1f}×",
        ),
    ]
    if "after" in r:
        kinds4 = ("none", "hit", "miss", "english")
        before = " · ".join(f"{pct(s[k], 0.5):.2f}" for k in kinds4)
        after = " · ".join(f"{pct(r['after'][k], 0.5):.2f} / {pct(r['after'][k], 0.95):.2f}" for k in kinds4)
        ratio = " · ".join(f"{pct(r['after'][k], 0.5) / pct(s[k], 0.5):.2f}×" for k in kinds4)
        out.append(
            (
                "search p50 / p95 ms after those edits (their old postings dead until a compaction): "
                "no context · routed hit · routed miss · English",
                f"{after} (before the edits, p50: {before})",
                "",
                f"after / before: {ratio}",
            )
        )
    return out


def growth(results: Sequence[dict[str, Any]]) -> str:
    """Per-node cost (CPU µs) of writing, rebuilding and a cold open at each size, against the smallest."""
    lines = [
        "| N (nodes) | write µs/node | × smallest | write, corpus in the GC's sight | × smallest "
        "| rebuild µs/node | × smallest | cold open to usable µs/node | × smallest | sqlite write µs/node |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def costs(r: dict[str, Any]) -> tuple[float, ...]:
        seconds = (
            r["write_cpu"],
            r["write_held_cpu"],
            r["rebuild"]["cpu"] + r["rebuild"]["helper_cpu"],
            r["cold_alone"]["usable_cpu"],
            r["sq_write_cpu"],
        )
        return tuple(x / r["total"] * 1e6 for x in seconds)

    w0, h0, b0, c0, _ = costs(results[0])
    for r in results:
        w, h, b, c, sq = costs(r)
        lines.append(
            f"| {r['total']:,} | {w:.0f} | {w / w0:.2f} | {h:.0f} | {h / h0:.2f} | {b:.0f} | {b / b0:.2f} "
            f"| {c:.0f} | {c / c0:.2f} | {sq:.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--million", action="store_true", help="add the 1,000,000 size")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--edits", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the raw measures here")
    ap.add_argument(
        "--language", choices=("en", "zh"), default=None, help="notes of this language's domains only"
    )
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")] + ([1_000_000] if args.million else [])
    base = Path(args.work or tempfile.mkdtemp(prefix="mdcg-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    (base / "none.json").write_text("[]", encoding="utf-8")
    results = []
    try:
        for n in sizes:
            say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
            results.append(one_size(n, base, args.queries, args.edits, say, args.language))
            if args.json:
                args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    kind = f", {args.language} notes only" if args.language else ""
    text = f"### Scale: md-cg beside sqlite (work dir: {args.work or 'temp'}{kind})\n\n{table(results)}\n\n"
    text += f"Cost growth (CPU time per node, against {results[0]['total']:,} nodes):\n\n{growth(results)}"
    return benchmark.emit(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
