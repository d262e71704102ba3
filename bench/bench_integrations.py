#!/usr/bin/env python
"""Speed and retrieval quality of the integrations (issue 15).

    python bench/bench_integrations.py [--nodes 10000] [--repeat 30] [--locomo PATH] [--json OUT]

* **Claude's memory tool** (:class:`~md_cg.integrations.anthropic_memory.MdCGMemoryTool`)
  on a store of ``--nodes`` nodes (the bundled sample generator: knowledge in
  condition buckets plus the other layers): wall-clock latency of each
  command, ``--repeat`` calls each, p50 and p95 in ms.
* **LangGraph store** (:class:`~md_cg.integrations.langgraph_store.MdCGStore`)
  beside LangGraph's ``InMemoryStore`` on the same items and queries:

  - LoCoMo dev (``../shared/data/locomo/locomo_dev.json``): one item per turn,
    key = ``dia_id``, value ``{"text": "<speaker>: <text>"}``, namespace
    ``("locomo", <conversation>)``; each question searches its conversation's
    namespace with ``limit=10``; hit@1/5/10 over categories 1-4 (the
    project's measure, data/README.md);
  - the same items padded to ``--nodes`` items (sample bodies in namespace
    ``("pad",)``): p50/p95 of those searches.

  ``InMemoryStore`` is measured twice: as configured by default (no index:
  the query is ignored and items come in insertion order) and with an
  ``index`` whose ``embed`` is a local hashing bag-of-words embedding
  (:func:`hashing_embed`), a stand-in for an embedding model, which would
  need the network. Neither is a claim about any real embedding model.

The machine and package versions are printed with the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = next(
    (p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()),
    REPO.parent / "shared" / "data",
)
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from langgraph.store.base import PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402
from quality import load_locomo  # noqa: E402

from md_cg import MdCG  # noqa: E402
from md_cg.integrations.anthropic_memory import MdCGMemoryTool  # noqa: E402
from md_cg.integrations.langgraph_store import MdCGStore  # noqa: E402
from md_cg.sample import build_nodes  # noqa: E402

DIMS = 1024
_WORD = re.compile(r"\w+")


def hashing_embed(texts: list[str]) -> list[list[float]]:
    """Bag of lower-cased words hashed into DIMS buckets, L2-normalised (local, deterministic)."""
    import numpy as np

    out = np.zeros((len(texts), DIMS), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in _WORD.findall(text.lower()):
            out[
                row, int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % DIMS
            ] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (out / norms).tolist()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -------------------------------------------------------------- Claude's memory tool


def claude_commands(tool: MdCGMemoryTool, repeat: int) -> dict[str, list[float]]:
    """Latency of every command (ms), ``repeat`` calls each, on distinct files where they change one."""
    store = tool.store
    bucket = max(store.bucket_sizes().items(), key=lambda kv: kv[1])[0]
    times: dict[str, list[float]] = {}
    for i, e in enumerate(store.entries("knowledge")[:repeat]):
        new, moved, renamed = (f"/memories/{p}/{n}-{i}.md" for p, n in
                               (("contextual", "bench"), ("self", "bench"), ("self", "renamed")))  # fmt: skip
        calls = [
            ("view /memories", {"command": "view", "path": "/memories"}),
            ("view a bucket folder", {"command": "view", "path": f"/memories/knowledge/{bucket}"}),
            ("view a file", {"command": "view", "path": f"/memories/{e.path}"}),
            (
                "view a file (view_range)",
                {"command": "view", "path": f"/memories/{e.path}", "view_range": [1, 5]},
            ),
            ("create", {"command": "create", "path": new, "file_text": f"note {i}"}),
            ("str_replace", {"command": "str_replace", "path": new, "old_str": f"note {i}", "new_str": "x"}),
            ("insert", {"command": "insert", "path": new, "insert_line": -1, "insert_text": "more"}),
            ("rename (layer)", {"command": "rename", "old_path": new, "new_path": moved}),
            ("rename (id)", {"command": "rename", "old_path": moved, "new_path": renamed}),
            ("delete (forget)", {"command": "delete", "path": renamed}),
        ]
        for name, command in calls:
            if command.get("insert_line") == -1:  # after the body's last line, past the frontmatter
                command["insert_line"] = _line_count(tool, command["path"])
            start = time.perf_counter()
            tool.call(command)
            times.setdefault(name, []).append((time.perf_counter() - start) * 1000)
    return times


def _line_count(tool: MdCGMemoryTool, path: str) -> int:
    """How many lines the file at the tool path ``path`` holds (read outside the timing)."""
    return len((tool.store.root / path.removeprefix("/memories/")).read_text("utf-8").splitlines())


def bench_claude(nodes: int, repeat: int, workdir: Path) -> dict[str, Any]:
    root = workdir / "claude"
    sample = build_nodes(knowledge=max(1, nodes - 180))
    with MdCG(root) as store:
        start = time.perf_counter()
        store.add_many(sample)
        build_s = time.perf_counter() - start
        store.compact_index()
    with MdCGMemoryTool(root) as tool:
        size = len(tool.store)
        times = claude_commands(tool, repeat)
    rows = {
        k: {"p50_ms": round(pct(v, 0.5), 2), "p95_ms": round(pct(v, 0.95), 2), "n": len(v)}
        for k, v in times.items()
    }
    return {"nodes": size, "build_s": round(build_s, 2), "commands": rows}


# -------------------------------------------------------------- LangGraph


def locomo_ops(convs: list[dict]) -> tuple[list[PutOp], list[tuple[tuple[str, str], str, set[str], int]]]:
    puts, questions = [], []
    for conv in convs:
        ns = ("locomo", conv["id"])
        puts += [PutOp(ns, doc_id, {"text": text}) for doc_id, text in conv["docs"]]
        questions += [(ns, q, rel, cat) for q, rel, cat in conv["questions"]]
    return puts, questions


def padding_ops(count: int) -> list[PutOp]:
    if count <= 0:
        return []
    nodes = build_nodes(knowledge=max(1, count))[:count]
    return [PutOp(("pad",), f"p{i}", {"text": n.body}) for i, n in enumerate(nodes)]


def run_queries(store: Any, questions: list, limit: int = 10) -> tuple[dict[str, float], list[float]]:
    hits = {1: 0, 5: 0, 10: 0}
    lat: list[float] = []
    n = 0
    for ns, q, relevant, cat in questions:
        start = time.perf_counter()
        found = store.search(ns, query=q, limit=limit)
        lat.append((time.perf_counter() - start) * 1000)
        if cat == 5:
            continue
        n += 1
        keys = [r.key for r in found]
        for k in hits:
            hits[k] += any(key in relevant for key in keys[:k])
    return {f"hit@{k}": round(100 * v / max(n, 1), 1) for k, v in hits.items()} | {"questions": n}, lat


def stores(workdir: Path, name: str) -> dict[str, Callable[[], Any]]:
    return {
        "MdCGStore": lambda: MdCGStore(workdir / name, record_access=False),
        "InMemoryStore (no index: query ignored)": InMemoryStore,
        "InMemoryStore + hashing embedding": lambda: InMemoryStore(
            index={"dims": DIMS, "embed": hashing_embed}
        ),
    }


def bench_langgraph(convs: list[dict], nodes: int, workdir: Path) -> dict[str, Any]:
    puts, questions = locomo_ops(convs)
    out: dict[str, Any] = {"locomo_items": len(puts), "questions": len(questions)}
    for setup, ops in (("locomo", puts), ("padded", puts + padding_ops(nodes - len(puts)))):
        rows = {}
        for name, make in stores(workdir, setup).items():
            store = make()
            start = time.perf_counter()
            for i in range(0, len(ops), 1000):
                store.batch(ops[i : i + 1000])
            load_s = time.perf_counter() - start
            quality, lat = run_queries(store, questions)
            rows[name] = quality | {
                "items": len(ops), "load_s": round(load_s, 2),
                "search_p50_ms": round(pct(lat, 0.5), 2), "search_p95_ms": round(pct(lat, 0.95), 2),
            }  # fmt: skip
            if isinstance(store, MdCGStore):
                store.close()
        out[setup] = rows
    return out


# -------------------------------------------------------------- report


def machine() -> dict[str, str]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return {
        "cpu": cpu or platform.processor(),
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "anthropic": version("anthropic"),
        "langgraph": version("langgraph"),
        "langgraph-checkpoint": version("langgraph-checkpoint"),
    }


def print_report(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; anthropic {m['anthropic']}, "
          f"langgraph {m['langgraph']}, langgraph-checkpoint {m['langgraph-checkpoint']}\n")  # fmt: skip
    c = result["claude"]
    print(f"### Claude memory tool on a {c['nodes']:,}-node store (built in {c['build_s']} s)\n")
    print("| command | p50 ms | p95 ms | calls |\n|---|---|---|---|")
    for name, row in c["commands"].items():
        print(f"| {name} | {row['p50_ms']} | {row['p95_ms']} | {row['n']} |")
    lg = result.get("langgraph")
    if not lg:
        return
    for setup, title in (
        ("locomo", "LoCoMo dev turns only"),
        ("padded", "LoCoMo dev turns padded with sample items"),
    ):
        rows = lg[setup]
        items = next(iter(rows.values()))["items"]
        print(f"\n### LangGraph stores, {title} ({items:,} items, {lg['questions']} searches)\n")
        print("| store | hit@1 | hit@5 | hit@10 | search p50 ms | p95 ms | load s |")
        print("|---|---|---|---|---|---|---|")
        for name, r in rows.items():
            print(f"| {name} | {r['hit@1']} | {r['hit@5']} | {r['hit@10']} | {r['search_p50_ms']} | "
                  f"{r['search_p95_ms']} | {r['load_s']} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--locomo", type=Path, default=DATA / "locomo" / "locomo_dev.json")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mdcg-bench-integrations-"))
    try:
        result: dict[str, Any] = {
            "machine": machine(),
            "claude": bench_claude(args.nodes, args.repeat, workdir),
        }
        if args.locomo.is_file():
            result["langgraph"] = bench_langgraph(load_locomo(args.locomo), args.nodes, workdir)
        else:
            print(f"LoCoMo data not found at {args.locomo}: LangGraph part skipped", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
