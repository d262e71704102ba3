"""Search latency (no context / routed hit / routed miss), recall@10 against sqlite
LIKE, and index memory, beside three sqlite lookups in one run: LIKE, an FTS5
trigram phrase lookup (a substring index), and the like-for-like baseline of
FTS-based memory stores -- FTS5 (unicode61) with an OR of the query's terms,
ordered by ``bm25()`` (its recall@10 against LIKE is reported too).

    python bench/bench_search.py [--sizes 3000,10000,100000] [--queries 200] [--work DIR] [--out FILE]

Thin over :func:`md_cg.benchmark.search_bench`; retrieval quality on the
public data sets is in ``bench/quality.py``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from md_cg import benchmark


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="3000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = benchmark.search_bench(
        [int(x) for x in args.sizes.split(",")],
        queries=args.queries,
        work=args.work,
        progress=benchmark.to_stderr,
    )
    title = "Search: latency, recall against sqlite LIKE, memory (FTS5 OR + bm25 beside the trigram phrase)"
    return benchmark.emit_rows(rows, title, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
