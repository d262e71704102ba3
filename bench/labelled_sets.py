#!/usr/bin/env python
"""The two labelled sets behind retention and organise, measured in one run.

Usage::

    python bench/labelled_sets.py [--speed] [--json OUT]

* ``tests/data/temporal_labelled.jsonl``: statements with the temporal kind
  an extractor gave (``temporal``) and the expected tier. Prints the
  precision and recall of the ``temp`` decision of
  :func:`md_cg.temporal.decide_retention` (all rows, per batch, and without
  the anchor check) and how often each rule decided.
* ``tests/data/near_dup_pairs.jsonl``: text pairs labelled near or not.
  Prints precision and recall of ``near`` (:func:`md_cg.dedupe.near_score`
  at :data:`md_cg.dedupe.NEAR_THRESHOLD`) per category, the guards that
  fired, the ``exact`` title-key check, and a threshold sweep.
* ``--speed`` times :func:`md_cg.dedupe.verdict` for 50 candidates against
  50 distinct rows each, with cold caches and then warm (CPU time of the
  process, best of five).

Rows carry a ``batch``: ``dev`` rows were written while the rules were
built; ``blind*`` rows were written, then run once before any rule changed
(docs/retention.md and docs/organize.md say what each blind batch found).
tests/test_temporal.py and tests/test_dedupe.py assert the figures this prints.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from md_cg import dedupe
from md_cg.temporal import RULE_CODES, decide_retention

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
TEMPORAL_SET = DATA / "temporal_labelled.jsonl"
NEAR_SET = DATA / "near_dup_pairs.jsonl"
SWEEP = (0.5, 0.6, 0.7, 0.75, 0.8, 0.82, 0.83, 0.84, 0.85, 0.9, 0.95, 1.0)


def load(path: Path) -> list[dict]:
    """The rows of a JSONL file."""
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 1.0


def _scores(pairs: Iterable[tuple[bool, bool, str]]) -> dict:
    """Precision/recall of predicted-positive against expected-positive, with the ids it got wrong."""
    tp = fp = fn = 0
    wrong: list[str] = []
    for predicted, expected, row_id in pairs:
        tp += predicted and expected
        fp += predicted and not expected
        fn += expected and not predicted
        if predicted != expected:
            wrong.append(row_id)
    return {
        "decided": tp + fp,
        "expected": tp + fn,
        "true": tp,
        "false": fp,
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "wrong": wrong,
    }


# -- retention --------------------------------------------------------------------------------


def retention_scores(rows: list[dict], *, require_anchor: bool = True) -> dict:
    """Precision and recall of the temp decision over ``rows``, and each rule's hits."""
    decisions = [
        decide_retention(text=r["text"], temporal=r["temporal"], now=0.0, require_anchor=require_anchor)
        for r in rows
    ]
    out = _scores(
        (d.tier == "temp", r["expected_tier"] == "temp", r["id"])
        for d, r in zip(decisions, rows, strict=True)
    )
    out["hits"] = dict(Counter(d.rule for d in decisions))
    return out


def retention_report(rows: list[dict]) -> str:
    """The retention tables as Markdown."""
    lines = ["## Retention: the temp decision", "", "| rows | n | temp decided | precision | recall |"]
    lines.append("|---|---:|---:|---:|---:|")
    groups = [("all", rows), *((b, [r for r in rows if r["batch"] == b]) for b in _batches(rows))]
    groups.append(("all, without the anchor check", rows))
    for name, group in groups:
        s = retention_scores(group, require_anchor=not name.endswith("check"))
        lines.append(
            f"| {name} | {len(group)} | {s['decided']} | {s['precision']:.3f} ({s['true']}/{s['decided']})"
            f" | {s['recall']:.3f} ({s['true']}/{s['expected']}) |"
        )
    hits = retention_scores(rows)["hits"]
    lines += ["", "| rule | hits |", "|---|---:|"]
    lines += [f"| `{rule}` | {hits[rule]} |" for rule in RULE_CODES if hits.get(rule)]
    missed = retention_scores(rows)["wrong"]
    lines += ["", f"Missed one-offs (kept long): {', '.join(missed) or 'none'}"]
    return "\n".join(lines)


def _batches(rows: list[dict]) -> list[str]:
    return sorted({r["batch"] for r in rows}, key=lambda b: (b != "dev", b))


# -- near duplicates ------------------------------------------------------------------------------


def near_scores(rows: list[dict], threshold: float = dedupe.NEAR_THRESHOLD) -> dict:
    """Precision and recall of ``near`` over ``rows`` at ``threshold``, and the guards that fired."""
    compared = [dedupe.compare(r["a"], r["b"]) for r in rows]
    out = _scores((c.score >= threshold, r["near"], r["id"]) for c, r in zip(compared, rows, strict=True))
    out["guards"] = dict(Counter(c.guard for c in compared if c.guard))
    return out


def near_report(rows: list[dict]) -> str:
    """The near-duplicate tables as Markdown."""
    threshold = dedupe.NEAR_THRESHOLD
    lines = [f"## Near duplicates at threshold {threshold}", ""]
    lines += [
        "| pairs | n | labelled near | said near | precision | recall |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups = [("all", rows), *((b, [r for r in rows if r["batch"] == b]) for b in _batches(rows))]
    groups += [(c, [r for r in rows if r["category"] == c]) for c in sorted({r["category"] for r in rows})]
    for name, group in groups:
        s = near_scores(group)
        lines.append(
            f"| {name} | {len(group)} | {s['expected']} | {s['decided']} | {s['precision']:.3f}"
            f" | {s['recall']:.3f} |"
        )
    guards = near_scores(rows)["guards"]
    lines += ["", "Guards that fired: " + ", ".join(f"{g} {n}" for g, n in sorted(guards.items()))]
    exact = [r for r in rows if r["category"] == "exact"]
    same = sum(dedupe.title_key(r["a"]) == dedupe.title_key(r["b"]) for r in exact)
    false_exact = [r["id"] for r in rows if r["category"] != "exact" and _same_key(r)]
    lines.append(
        f"Title key (exact): {same}/{len(exact)} exact pairs equal; other pairs equal: {len(false_exact)}"
    )
    lines += ["", "| threshold | precision | recall | false near |", "|---:|---:|---:|---:|"]
    for th in SWEEP:
        s = near_scores(rows, th)
        lines.append(f"| {th:.2f} | {s['precision']:.3f} | {s['recall']:.3f} | {s['false']} |")
    return "\n".join(lines)


def _same_key(row: dict) -> bool:
    return dedupe.title_key(row["a"]) == dedupe.title_key(row["b"])


def verdict_speed(rows: list[dict], sentences: int = 3, runs: int = 5) -> dict:
    """Time :func:`dedupe.verdict`: 50 candidates x 50 distinct existing rows of
    ``sentences`` labelled sentences each, cold caches then warm; best of ``runs``."""
    rng = random.Random(13)
    texts = [r["a"] for r in rows] + [r["b"] for r in rows]

    def memory(i: int) -> tuple[str, str]:
        first, *rest = rng.sample(texts, sentences)
        return f"{first} [{i}]", " ".join(rest)

    existing = [(f"n{i}", *memory(i)) for i in range(2500)]
    candidates = [dedupe.NormalizedCandidate("knowledge", *memory(10_000 + i)) for i in range(50)]
    chars = statistics.mean(len(t) + len(c) for _, t, c in existing)

    def one_pass(prefilter: float) -> float:
        # CPU time of this process: the machine is shared, wall time is not ours.
        start = time.process_time()
        for j, candidate in enumerate(candidates):
            dedupe.verdict(candidate, existing[j * 50 : (j + 1) * 50], prefilter=prefilter)
        return time.process_time() - start

    out: dict = {"chars_per_row": round(chars)}
    # prefilter 0 scores every row: the worst case, when every row looks alike.
    for name, prefilter in (("prefiltered", dedupe.PREFILTER), ("every_row_scored", 0.0)):
        cold, warm = [], []
        for _ in range(runs):
            for cache in (dedupe._features, dedupe._sketch, dedupe.title_key):
                cache.cache_clear()
            cold.append(one_pass(prefilter))
            warm.append(one_pass(prefilter))
        out[name] = {"cold_ms": min(cold) * 1000, "warm_ms": min(warm) * 1000}
    return out


def main(argv: list[str] | None = None) -> int:
    """Print both tables (and the speed with ``--speed``); ``--json`` also writes them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed", action="store_true", help="time dedupe.verdict")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    temporal_rows, near_rows = load(TEMPORAL_SET), load(NEAR_SET)
    print(retention_report(temporal_rows), end="\n\n")
    print(near_report(near_rows))
    figures: dict = {"retention": retention_scores(temporal_rows), "near": near_scores(near_rows)}
    if args.speed:
        figures["speed"] = [verdict_speed(near_rows, sentences) for sentences in (3, 8)]
        print("\n| verdict, 50 candidates x 50 distinct rows | cold caches | warm |\n|---|---:|---:|")
        for speed in figures["speed"]:
            for name in ("prefiltered", "every_row_scored"):
                cold, warm = speed[name]["cold_ms"], speed[name]["warm_ms"]
                print(
                    f"| rows of ~{speed['chars_per_row']} chars, {name.replace('_', ' ')} "
                    f"| {cold:.1f} ms ({cold / 2.5:.1f} us each) | {warm:.1f} ms ({warm / 2.5:.1f} us each) |"
                )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
