#!/usr/bin/env python
"""Which search results a filler rule would hide, on LoCoMo and CMRC dev (about 1 minute).

    python bench/filler_probe.py

For every question (LoCoMo categories 1-4, per conversation; CMRC, one pool)
it runs ``MdCG.search(q, k=10, judge=False)`` on a fresh store of the data
set's documents and records each result that is not filler now: whether it is
an answer (gold), its rank, its score as a share of the first result's
(``rel``), and the share of the query terms' idf it holds (``cov``). Then it
prints, for each candidate rule, how many answers and non-answers it would
mark as filler (the MCP server leaves filler out of its replies). The kept rule
is ``rel < 0.05`` (``md_cg.search.RELATIVE_FLOOR``); results marked filler by
it now are read as they were before it (``weak`` in their evidence). The
``thin`` lines count the results a thin-evidence rule would defer
(``md_cg.search.THIN_WORDS``, session 28): covering one of two or more query
words, weighing less than a share of the query's idf; the last line, the rule
kept in session 39 (none of the words, or at most half of them weighing little;
bench/judge_irrelevant.py chose its thresholds).
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality

from md_cg import MdCG, Node, search
from md_cg.text import analyze, query_terms

Row = dict[str, object]


def _rows(name: str, docs: list[tuple[str, str]], questions: list, dates: list | None) -> list[Row]:
    folder = tempfile.mkdtemp(prefix="mdcg-filler-")
    ids = [d for d, _ in docs]
    texts = [t for _, t in docs]
    df: dict[str, int] = {}
    for t in texts:
        for term in set(analyze(t)):
            df[term] = df.get(term, 0) + 1
    n = len(texts)

    def idf(t: str) -> float:
        return math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5))

    out: list[Row] = []
    try:
        with MdCG(folder, auto_compact=None) as store:
            store.add_many(
                [
                    Node(id=f"d{i}", body=t, created_at=dates[i] if dates else None)
                    for i, t in enumerate(texts)
                ],
                stamp=False,
            )
            for q, relevant, cat in questions:
                if cat == 5:
                    continue
                own = list(dict.fromkeys(query_terms(q)))
                mass = sum(idf(t) for t in own) or 1.0
                results, _ = store.search(q, k=10, judge=False, record=False)
                top = results[0].score if results else 0.0
                for rank, r in enumerate(results, 1):
                    if r.filler and "weak" not in r.evidence:
                        continue  # filler before the relative rule
                    held = set(r.evidence.get("terms", [])) & set(own)
                    out.append(
                        {
                            "set": name,
                            "gold": ids[int(r.id[1:])] in relevant,
                            "rank": rank,
                            "rel": r.score / top if top else 0.0,
                            "cov": sum(idf(t) for t in held) / mass,
                            "weak": r.filler,
                            "thin": r.evidence.get("thin", {}).get("of", 0),
                            "holds": r.evidence.get("thin", {}).get("holds", 0),
                            "thin_now": _kept(r.evidence.get("thin")),
                            "share": r.evidence.get("thin", {}).get("share", 1.0),
                            "similar": r.tier in ("T1", "T3"),
                        }
                    )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _kept(thin: dict | None) -> bool:
    """Whether ``evidence["thin"]`` (measured with no share limit) is thin by the kept
    thresholds (``md_cg.search._thin``: the stores here hold more than THIN_MIN_DOCS)."""
    if thin is None:
        return False
    if not thin["of"] or not thin["holds"]:
        return True
    return bool(thin["share"] < (KEPT_ONE if thin["holds"] == 1 else KEPT_SHARE))


def _line(rows: list[Row], name: str, rule: Callable[[Row], bool]) -> str:
    cells = []
    for which in ("locomo", "cmrc"):
        mine = [r for r in rows if r["set"] == which]
        gold = [r for r in mine if r["gold"]]
        other = [r for r in mine if not r["gold"]]
        first = [r for r in gold if r["rank"] == 1]
        g, o, f = sum(map(rule, gold)), sum(map(rule, other)), sum(map(rule, first))
        cells.append(
            f"{g}/{len(gold)} ({g / max(1, len(gold)):.1%}), first {f}/{len(first)} | "
            f"{o}/{len(other)} ({o / max(1, len(other)):.1%})"
        )
    return f"| {name} | {' | '.join(cells)} |"


#: The kept thresholds (read before main() lifts them to see every candidate).
KEPT_SHARE, KEPT_ONE = search.THIN_SHARE, search.THIN_SHARE_ONE


def main() -> None:
    search.THIN_SHARE = search.THIN_SHARE_ONE = 1.01  # every candidate, with its share
    rows: list[Row] = []
    for conv in quality.load_locomo(quality.DATA / "locomo" / "locomo_dev.json"):
        rows += _rows("locomo", conv["docs"], conv["questions"], quality.conv_dates(conv))
    docs, questions = quality.load_cmrc(quality.DATA / "cmrc" / "cmrc2018_zh_dev.json")
    rows += _rows("cmrc", docs, [(q, rel, 1) for q, rel, _ in questions], None)
    print("| rule | LoCoMo answers marked | LoCoMo others | CMRC answers marked | CMRC others |")
    print("|---|---|---|---|---|")

    def one(r: Row) -> bool:
        return not r["weak"] and r["thin"] >= 2 and r["holds"] == 1

    rules: list[tuple[str, Callable[[Row], bool]]] = [
        *((f"rel < {a}", lambda r, a=a: r["rel"] < a) for a in (0.02, 0.05, 0.1)),
        *((f"cov < {b}", lambda r, b=b: r["cov"] < b) for b in (0.2, 0.3, 0.5)),
        *((f"rel < {a} and cov < {b}", lambda r, a=a, b=b: r["rel"] < a and r["cov"] < b)
          for a, b in ((0.1, 0.3), (0.2, 0.3), (0.2, 0.5))),
        # session 28's thin rule: a hit (not filler) covering one of >= 2 query words that
        # weigh (idf) less than a share of the query's ("share"; measured with no limit)
        ("thin, any share", one),
        ("thin, share < 0.2", lambda r: one(r) and r["share"] < 0.2),
        *((f"thin, share < {c} / words", lambda r, c=c: one(r) and r["share"] * r["thin"] < c)
          for c in (0.6, 0.8)),
        *((f"thin, share < max(0.2, {c} / words){' (session 28)' if c == 0.8 else ''}",
           lambda r, c=c: one(r) and r["share"] < max(0.2, c / r["thin"]))
          for c in (0.6, 0.8, 1.0)),
        # session 39 (kept, search.THIN_SHARE / THIN_SHARE_ONE): none of the words, or at
        # most half of them weighing less than 0.4 -- 0.7 for one word
        ("thin (session 39, kept)", lambda r: not r["weak"] and r["thin_now"]),
    ]  # fmt: skip
    for name, rule in rules:
        print(_line(rows, name, rule))


if __name__ == "__main__":
    main()
