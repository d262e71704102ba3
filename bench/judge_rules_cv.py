#!/usr/bin/env python
"""Which thin-evidence rules to keep, by cross-validation (session 41; about 4 minutes).

    python bench/judge_rules_cv.py [--record FILE]

Runs every query of bench/judge_irrelevant.py (relevant questions, the template requests,
the broad held-out requests of bench/judge_broad.py) over its stores once, with the
``md_cg`` of this checkout, recording for each evident hit what it covers of the query
(``md_cg.search._covered``) and the idf of the query's words; then replays candidate rules
over the recording (no search is run again; the rule of the checkout replays exactly):

* ``half``: a hit covering more than half of the query's words is never thin, CJK
  characters counting as words by ``ceil`` (two characters a word, rounded up: session
  39), ``exact`` (rounded up and exactly), ``floor`` (rounded down) or ``pairs`` (one per
  bigram); ``none``: no such
  exemption (under four words, every hit is judged by weight);
* ``numbers``: ``count`` (a number held counts for no word: in "more than half" and for
  the 0.7 share of one word), ``only`` (a hit holding only numbers of a request naming a
  word is thin), ``both``;
* ``name``: a capitalised word of the query (not its first) that the hit lacks makes it thin;
* ``light``: a held word weighing less than 0.7 of the mean counts for no word;
* ``most``: a hit covering more than half but less than all, weighing < 0.6, is thin.

Five folds (LoCoMo: the conversations; CMRC: article groups; requests: their template):
on four, the rule set with the fewest template requests with an ACCEPT hit among those
deferring at most 0.5 points of first answers on each of LoCoMo, CMRC and mixed (ties: the
fewest options); its figures on the fifth. The broad requests choose nothing: printed per
rule set and store. The recording is kept in ``--record`` (pickle) and reused when present.
"""

from __future__ import annotations

import argparse
import itertools
import math
import pickle
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judge_irrelevant as ji

FOLDS = 5
#: First answers a rule set may defer, per relevant set (a share).
LOST = 0.005
OPTIONS: dict[str, tuple[Any, ...]] = {
    "half": ("ceil", "exact", "floor", "pairs", "none"),
    "numbers": (None, "count", "only", "both"),
    "name": (None, "strict"),
    "light": (None, 0.7),
    "most": (None, 0.6),
}


def record() -> dict[str, list[dict[str, Any]]]:
    """Per store, per query: its text, kind, fold and hits (answer?, evidently ACCEPT but
    for thin evidence?, coverage)."""
    from md_cg import MdCG, Node, search

    seen: dict[str, dict[str, Any]] = {}
    mark = search._Thinness.mark

    def recording(self: Any, doc_id: str, why: dict, held: set, typos: Any, typo_only: bool) -> None:
        cover = self.coverage(why, held, typos)
        u = cover.units
        seen[doc_id] = {
            "uw": u.words, "uc": u.chars, "ucjk": u.cjk, "ask": u.asks_nothing, "w": cover.words,
            "near": [self.idf(t) for t in cover.near], "c": cover.chars, "cjk": cover.cjk,
            "idf": {t: self.idf(t) for t in (*u.words, *u.cjk)}, "few": self.few(),
        }  # fmt: skip
        mark(self, doc_id, why, held, typos, typo_only)

    search._Thinness.mark = recording  # type: ignore[method-assign]
    out: dict[str, list[dict[str, Any]]] = {}
    for name, memories, relevant in ji._stores():
        rows = []
        with MdCG(tempfile.mkdtemp(prefix="mdcg-rules-"), auto_compact=None) as store:
            store.add_many([Node(verification_basis="data", **m) for m in memories], stamp=False)
            asked = [(q, gold, fold, "relevant") for q, gold, fold in relevant]
            asked += [(q, set(), fold, "irrelevant") for q, fold in ji.irrelevant_queries()]
            asked += [(q, set(), -1, "broad") for q, _ in ji.broad()]
            for q, gold, fold, kind in asked:
                seen.clear()
                results, _ = store.search(q, k=10, record=False)
                hits = []
                for r in results:
                    other = r.filler or any(k in r.evidence for k in ("common_only", "tag_typo"))
                    evident = (
                        r.state == "ACCEPT" or (r.state == "DEFER" and "thin" in r.evidence)
                    ) and not other
                    hits.append((r.id in gold, evident, r.state == "ACCEPT", seen.get(r.id)))
                rows.append({"q": q, "kind": kind, "fold": fold, "hits": hits})
        out[name] = rows
    return out


def _names(query: str) -> set[str]:
    """The terms of the query's capitalised words but its first ("I" aside)."""
    from md_cg.text import analyze

    words = re.findall(r"[A-Za-z][A-Za-z']*", query)
    return {t for w in words[1:] if w[0].isupper() and w != "I" for t in analyze(w.split("'")[0])}


def thin(cov: dict[str, Any] | None, query: str, rule: dict[str, Any]) -> bool:
    """Whether a hit of coverage ``cov`` is thin under ``rule`` (:data:`KEPT`: search._thin)."""
    if cov is None:
        return False
    uw, uc, ucjk, w, c, cjk, idf = (cov[k] for k in ("uw", "uc", "ucjk", "w", "c", "cjk", "idf"))
    halves = {"ceil": math.ceil(len(c) / 2), "floor": len(c) // 2 if len(c) >= 2 else len(c)}
    pairs = rule["half"] == "pairs"
    total = len(uw) + (len(ucjk) if pairs else math.ceil(len(uc) / 2))
    held = len(w) + len(cov["near"]) + (len(cjk) if pairs else halves.get(rule["half"], halves["ceil"]))
    if not total:
        return bool(cov["ask"])
    if not held:
        return True
    mass = sum(idf[t] for t in (*uw, *ucjk)) or 1.0
    share = (sum(idf[t] for t in (*w, *cjk)) + sum(cov["near"])) / mass
    numbers = sum(1 for t in w if t.isdigit()) if rule["numbers"] in ("count", "both") else 0
    light = rule["light"] * mass / len([*uw, *ucjk]) if rule["light"] else 0.0
    counted = held - numbers - sum(1 for t in w if idf[t] < light)
    only = rule["numbers"] in ("only", "both") and held < 4 and bool(w) and all(t.isdigit() for t in w)
    only = only and not c and not cov["near"] and not all(t.isdigit() for t in uw)
    if rule["half"] == "exact":  # in half characters, and rounded up
        most = 4 * (counted - halves["ceil"]) + 2 * len(c) > 2 * len(uw) + len(uc) and 2 * counted > total
    else:
        most = rule["half"] != "none" and 2 * counted > total
    if rule["name"] and (named := _names(query) & set(uw)) and named.isdisjoint(w) and held < 4:
        return True
    if not only and (total < 2 or most or held >= 4):
        return bool(rule["most"]) and held < total and held < 4 and not cov["few"] and share < rule["most"]
    if cov["few"]:
        return held == 1 and share < max(0.2, 0.8 / total)
    return only or share < (0.7 if min(held, counted) == 1 else 0.4)


def tally(
    rec: dict[str, list[dict[str, Any]]], rule: dict[str, Any], broad: bool = False
) -> dict[tuple, Counter]:
    """Per (store group, fold): questions, first answers ACCEPT before and after, requests
    with an ACCEPT hit by kind; the broad requests (fold -1) and the stores without
    questions only with ``broad``."""
    out: dict[tuple, Counter] = defaultdict(Counter)
    for name, rows in rec.items():
        group = name.split()[0] if name.startswith("locomo ") else name
        if not broad and group not in ("locomo", "cmrc", "mixed"):
            continue
        for r in rows:
            if r["kind"] not in ("relevant", "irrelevant") and not broad:
                continue
            c = out[(group, r["fold"])]
            c[r["kind"]] += 1
            ok = [evident and not thin(cov, r["q"], rule) for _, evident, _, cov in r["hits"]]
            if r["kind"] == "relevant":
                first = r["hits"][0] if r["hits"] else None
                if first is not None and first[0]:
                    c["first before"] += first[1] and not thin(first[3], r["q"], BASE)
                    c["first after"] += ok[0]
            else:
                c[r["kind"] + " accept"] += any(ok)
    return out


def _sum(t: dict[tuple, Counter], group: str, folds: set[int]) -> Counter:
    total: Counter = Counter()
    for (g, fold), c in t.items():
        if g == group and (fold in folds or fold == -1):
            total.update(c)
    return total


def _cost(t: dict[tuple, Counter], folds: set[int]) -> tuple[float, float]:
    """(template requests with an ACCEPT hit, the most first answers lost): shares, over
    LoCoMo, CMRC and mixed, of a :func:`tally` over ``folds``."""
    groups = [_sum(t, g, folds) for g in ("locomo", "cmrc", "mixed")]
    irr = sum(c["irrelevant accept"] / max(1, c["irrelevant"]) for c in groups) / 3
    lost = max((c["first before"] - c["first after"]) / max(1, c["relevant"]) for c in groups)
    return irr, lost


def rules() -> list[dict[str, Any]]:
    return [dict(zip(OPTIONS, v, strict=True)) for v in itertools.product(*OPTIONS.values())]


#: The rule of session 40 (no option) and the kept one (this checkout's ``search._thin``).
BASE = rules()[0]
KEPT = {**BASE, "half": "exact", "numbers": "both"}


def _options(rule: dict[str, Any]) -> int:
    return sum(v not in (None, "ceil") for v in rule.values())


def _label(rule: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in rule.items() if v not in (None, "ceil")) or "session 40"


def replays(rec: dict[str, list[dict[str, Any]]]) -> int:
    """Hits whose replayed verdict under :data:`KEPT` differs from the search's (0: the
    replay is the checkout's rule)."""
    return sum(
        (evident and not thin(cov, r["q"], KEPT)) != accept
        for rows in rec.values()
        for r in rows
        for _, evident, accept, cov in r["hits"]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--record", type=Path, default=Path(tempfile.gettempdir()) / "mdcg-rules-cv.pkl")
    args = ap.parse_args(argv)
    if args.record.exists():
        rec = pickle.loads(args.record.read_bytes())
    else:
        rec = record()
        args.record.write_bytes(pickle.dumps(rec))
    every, grid = set(range(FOLDS)), rules()
    print(f"replay of the checkout's rule: {replays(rec)} hits differ from the search\n")
    print("| fold | chosen on the others | held out: requests with ACCEPT, before -> after | answers lost |")
    print("|---|---|---|---|")
    tallies = [tally(rec, r) for r in grid]
    for fold in [*range(FOLDS), None]:
        train = every - {fold} if fold is not None else every
        costs = {i: _cost(t, train) for i, t in enumerate(tallies)}
        ok = [i for i, (_, lost) in costs.items() if lost <= LOST]
        best = min(ok, key=lambda i: (round(costs[i][0], 9), _options(grid[i])))
        test = {fold} if fold is not None else every
        (b, _), (a, lost) = _cost(tallies[0], test), _cost(tallies[best], test)
        name = "all" if fold is None else fold
        print(f"| {name} | {_label(grid[best])} | {100 * b:.1f} -> {100 * a:.1f} | {100 * lost:.2f} |")
    print("\nEach option alone and the kept set, all folds:\n")
    print("| rule set | store | first answer ACCEPT | templates: an ACCEPT hit | broad: an ACCEPT hit |")
    print("|---|---|---|---|---|")
    for rule in grid:
        if _options(rule) > 1 and rule != KEPT:
            continue
        t = tally(rec, rule, broad=True)
        for g in dict.fromkeys(g for g, _ in t):
            c = _sum(t, g, every)
            first = f"{100 * c['first after'] / c['relevant']:.1f}" if c["relevant"] else ""
            irr = 100 * c["irrelevant accept"] / c["irrelevant"]
            print(
                f"| {_label(rule)} | {g} | {first} | {irr:.1f} | {100 * c['broad accept'] / c['broad']:.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
