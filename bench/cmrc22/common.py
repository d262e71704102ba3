"""Shared evaluation for the session-22 probes: (Q, 30) feature matrices over the kept top 30."""

from __future__ import annotations

import pickle

import numpy as np

D = pickle.load(open(__import__("os").environ.get("CMRC22_WORK", "/tmp/cmrc22") + "/feats.pkl", "rb"))
FOLD = D["fold"]
REL = np.array([r for r in D["rel"]], bool)  # (Q, 30), candidates in kept order
Q = len(FOLD)
NF = 5


def X(name: str) -> np.ndarray:
    return np.array([f[name] for f in D["feats"]], float)


def evaluate(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Re-rank each question's 30 candidates by ``score`` (ties: kept order). Per-question hit@1, RR@10."""
    order = np.argsort(-score, axis=1, kind="stable")
    r = np.take_along_axis(REL, order, axis=1)[:, :10]
    hit = r[:, 0].astype(float)
    anyr = r.any(1)
    first = np.argmax(r, axis=1)
    rr = np.where(anyr, 1.0 / (first + 1), 0.0)
    return hit, rr


def row(name: str, fig: tuple[np.ndarray, np.ndarray], extra: str = "") -> str:
    h, m = fig
    h1 = [100 * h[i == FOLD].mean() for i in range(NF)]
    mr = [m[i == FOLD].mean() for i in range(NF)]
    return (
        f"| {name} | {100 * h.mean():.2f} | {m.mean():.4f} | {min(h1):.1f}–{max(h1):.1f} |"
        f" {min(mr):.3f}–{max(mr):.3f} |{extra}"
    )


def crit(fig, mask) -> float:
    return round(fig[0][mask].mean() + fig[1][mask].mean(), 9)


def cv(grid: dict, name: str) -> tuple[str, tuple[np.ndarray, np.ndarray]]:
    """Each fold's setting chosen on the other four (hit@1 + MRR@10); held-out figures."""
    hit, rr, chosen = np.zeros(Q), np.zeros(Q), []
    keys = list(grid)
    for i in range(NF):
        train = i != FOLD
        best = max(keys, key=lambda p: crit(grid[p], train))
        chosen.append(str(best))
        hit[~train], rr[~train] = grid[best][0][~train], grid[best][1][~train]
    return row(f"{name}, held out by CV", (hit, rr), f" chosen: {'; '.join(chosen)}"), (hit, rr)


def best_in(grid: dict) -> tuple[str, tuple]:
    k = max(grid, key=lambda p: crit(grid[p], np.ones(Q, bool)))
    return k, grid[k]


HEAD = "| probe | hit@1 | MRR@10 | folds hit@1 | folds MRR@10 |\n|---|---|---|---|---|"
