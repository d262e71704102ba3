"""CPU and wall time of ``health()`` and of the first ``organize`` dry run (session 43).

    python bench/health_cost.py [--sizes 10000,45000] [--work DIR] [--repeat 5] [--out FILE]
    python bench/health_cost.py --profile 45000 [--work DIR]   # cProfile of one of each

* The store: real texts -- CMRC 2018 dev paragraphs (Chinese Wikipedia, CC BY-SA 4.0)
  and LoCoMo dev turns (English conversation, CC BY-NC 4.0), read from
  ``../shared/data`` (never copied here) -- cycled to the size asked, each copy
  marked with its round (``第3轮`` / ``round 3``) so no two memories are alike. One in
  five memories carries a ``similar`` edge to another one; memories get ``domain:``
  tags, so buckets form. Built once under ``--work`` and reused.
* ``health``: ``MdCG.health()`` on a handle opened once (as the MCP server holds one),
  and the MCP ``health`` tool (the pick-up before each call, then ``health``).
* ``organize``: the first dry run of a newly opened handle (the case the report saw
  at 0.65 s) and a later one, 20 candidates each.
* Baseline: sqlite ``PRAGMA quick_check`` on a table of the same rows (id, path, body),
  in the same run.

Each figure is measured in a child process, this tree's ``md_cg`` and ``--base REV``'s
(``git archive`` of its ``md_cg`` into ``--work``, put first on ``PYTHONPATH``) taking
turns, ``--repeat`` rounds; the tables give the medians, CPU time and wall.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if not DATA.exists():
    DATA = Path("/work/shared/data")
CMRC = DATA / "cmrc" / "cmrc2018_zh_dev.json"
LOCOMO = DATA / "locomo" / "locomo_dev.json"
DOMAINS = ("history", "science", "travel", "family", "work", "food", "music", "sport")


def texts() -> list[tuple[str, str]]:
    """(language, text) of every CMRC chunk and LoCoMo turn, interleaved."""
    zh = [d["text"] for d in json.loads(CMRC.read_text(encoding="utf-8"))["docs"]]
    en = []
    for sample in json.loads(LOCOMO.read_text(encoding="utf-8")):
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                en += [f"{t['speaker']}: {t['text']}" for t in turns]
    out: list[tuple[str, str]] = []
    for k in range(max(len(zh), len(en))):
        out += [("zh", zh[k])] if k < len(zh) else []
        out += [("en", en[k])] if k < len(en) else []
    return out


def nodes(n: int, seed: int = 43) -> list[Any]:
    from md_cg import Edge, Node

    rng = random.Random(seed)
    base = texts()
    now = time.time()
    out = []
    for i in range(n):
        lang, text = base[i % len(base)]
        rnd = i // len(base)
        body = f"{text} 第{rnd}轮" if lang == "zh" else f"{text} (round {rnd})"
        created = now - rng.random() * 3 * 365 * 86_400
        node = Node(
            id=f"m{i:06d}",
            body=body,
            tags=[f"domain:{DOMAINS[rng.randrange(len(DOMAINS))]}"],
            created_at=created,
            updated_at=created,
        )
        if i and rng.random() < 0.2:
            node.edges = [Edge(target=f"m{rng.randrange(i):06d}", type="similar")]
        out.append(node)
    return out


def build(root: Path, n: int) -> Path:
    """A store of ``n`` memories at ``root`` (reused when there)."""
    from md_cg import MdCG

    if (root / ".mdcg").exists():
        return root
    with MdCG(root) as store:
        all_nodes = nodes(n)
        for start in range(0, n, 5000):
            store.add_many(all_nodes[start : start + 5000], stamp=False)
        store.compact_index()
    return root


def _timed(fn: Any) -> tuple[float, float]:
    c, w = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def candidates(store: Any) -> list[dict[str, Any]]:
    """20 candidates: 5 stored memories under their title (``exact``), 15 new facts."""
    picked = store.entries("knowledge")[:5]
    out = [{"layer": "knowledge", "title": e.title, "content": store.get(e.id).body} for e in picked]
    out += [
        {
            "layer": "knowledge",
            "title": f"Bench fact {k}",
            "content": f"北京的天气 fact {k}: token{k * 7919}.",
        }
        for k in range(15)
    ]
    return out


def child(mode: str, root: str) -> dict[str, Any]:
    """One process's figures (what ``md_cg`` it imports is the caller's choice)."""
    from md_cg import MdCG

    out: dict[str, Any] = {}
    if mode == "health":
        store = MdCG(root)  # as the MCP server opens it
        out["first"] = _timed(store.health)
        out["later"] = [_timed(store.health) for _ in range(3)]
        out["findings"] = len(store.health().findings)
    elif mode == "organize":
        store = MdCG(root)
        cands = candidates(store)
        out["first"] = _timed(lambda: store.organize("dryRun", candidates=cands))
        out["later"] = [_timed(lambda: store.organize("dryRun", candidates=cands)) for _ in range(3)]
    elif mode == "mcp":
        from md_cg.mcp_server import create_server

        server = create_server(root)
        server.warm()  # run_server's start-up pick-up
        call = lambda: asyncio.run(server.call_tool("health", {}))  # noqa: E731
        out["first"] = _timed(call)
        out["later"] = [_timed(call) for _ in range(3)]
    return out


def run_child(mode: str, root: Path, base: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if base is not None:
        env["PYTHONPATH"] = str(base)
    cmd = [sys.executable, __file__, "--child", mode, "--root", str(root)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def quick_check(db: Path, n: int) -> tuple[float, float]:
    """sqlite ``PRAGMA quick_check`` of a table of ``n`` rows like the store's (id, path, body)."""
    if not db.exists():
        conn = sqlite3.connect(db)
        conn.execute("CREATE TABLE nodes (id TEXT PRIMARY KEY, path TEXT, body TEXT)")
        rows = [(nd.id, f"knowledge/{nd.id}.md", nd.body) for nd in nodes(n)]
        conn.executemany("INSERT INTO nodes VALUES (?, ?, ?)", rows)
        conn.commit()
        conn.close()
    conn = sqlite3.connect(db)
    got = _timed(lambda: conn.execute("PRAGMA quick_check").fetchall())
    conn.close()
    return got


def _med(values: list[float]) -> float:
    return statistics.median(values) * 1000


def measure(size: int, work: Path, base: Path, repeat: int) -> dict[str, Any]:
    root = build(work / f"store{size}", size)
    figures: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for _ in range(repeat):
        for mode in ("health", "organize", "mcp"):
            for label, where in (("base", base), ("now", None)):
                got = run_child(mode, root, where)
                slot = figures.setdefault(f"{mode}/{label}", {"first": [], "later": []})
                slot["first"].append(tuple(got["first"]))
                slot["later"].append(tuple(sorted(got["later"])[1]))
        figures.setdefault("quick_check", {"first": [], "later": []})["first"].append(
            quick_check(work / f"quick{size}.sqlite", size)
        )
    return {"size": size, "figures": figures}


ROWS = (
    ("`MdCG.health()`, first call of a process", "health", "first"),
    ("`MdCG.health()`, a later call", "health", "later"),
    ("MCP `health` tool (pick-up + health), first call", "mcp", "first"),
    ("MCP `health` tool, a later call", "mcp", "later"),
    ("`organize` dry run (20 candidates), first of a process", "organize", "first"),
    ("`organize` dry run, a later one", "organize", "later"),
)


def table(results: list[dict[str, Any]], rev: str) -> str:
    lines = [
        f"| memories | figure | {rev} CPU ms | now CPU ms | {rev} wall ms | now wall ms | CPU before/now |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        f = r["figures"]
        for name, mode, which in ROWS:
            b, n = f[f"{mode}/base"][which], f[f"{mode}/now"][which]
            bc, nc = _med([x[0] for x in b]), _med([x[0] for x in n])
            bw, nw = _med([x[1] for x in b]), _med([x[1] for x in n])
            lines.append(
                f"| {r['size']:,} | {name} | {bc:,.0f} | {nc:,.0f} | {bw:,.0f} | {nw:,.0f} | {bc / nc:.1f}x |"
            )
        q = f["quick_check"]["first"]
        qc, qw = _med([x[0] for x in q]), _med([x[1] for x in q])
        hc = _med([x[0] for x in f["health/now"]["later"]])
        lines.append(
            f"| {r['size']:,} | sqlite `PRAGMA quick_check`, {r['size']:,} rows (baseline) | | {qc:,.1f} | | "
            f"{qw:,.1f} | health later / quick_check: {hc / qc:.0f}x CPU |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,45000")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdcg-health-bench"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--base", default="e5d6394", help="the revision to compare with")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child")
    ap.add_argument("--root")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.root)))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    base = args.work / f"md_cg-{args.base}"
    if not base.exists():
        base.mkdir()
        repo = Path(__file__).resolve().parents[1]
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", args.base, "md_cg"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    results = [measure(int(n), args.work, base, args.repeat) for n in args.sizes.split(",")]
    text = table(results, args.base)
    print(text)
    if args.out:
        args.out.write_text(json.dumps(results) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
