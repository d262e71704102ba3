"""Idea 4: small learning-to-rank over the kept top 30: score = base + Σ w_i f_i (linear, features
scaled by their per-question max) or log-linear (Σ w_i log f_i), weights fit by coordinate ascent on
4 folds (criterion hit@1 + MRR@10), tested on the 5th."""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
from common import *


def pmax(x):
    return x / (np.abs(x).max(1, keepdims=True) + 1e-12)


EPS = 1e-3
kept = X("kept")
F = {
    "bm25raw": pmax(X("bm25raw")),
    "share": X("share"),
    "share_u": X("share_u"),
    "share_b": X("share_b"),
    "uni_bm25": pmax(X("uni_bm25^g0")),
    "bi_bm25": pmax(X("bi_bm25^g0")),
    "sent2": pmax(X("sent_g2")),
    "sent3": pmax(X("sent_g3")),
    "tri_share": X("share_tri"),
    "tri_bm25": pmax(X("tri_bm25^g0")),
    "len": np.log(X("dl")) / 6,
    "digit": X("digit"),
    "inl2c7": pmax(X("inl2_c7^g0.5")),
    "lgd": pmax(X("lgd^g1")),
}
SETS = {
    "brief 8 (kept, uni, bi, shares, sentence, length, digit)": [
        "uni_bm25",
        "bi_bm25",
        "share_b",
        "share_u",
        "sent2",
        "len",
        "digit",
    ],
    "all 14": list(F),
}
GRID = np.round(np.arange(-1.0, 1.0001, 0.1), 2)


def fit(names, mode, mask, rounds=3):
    base = pmax(kept) if mode == "lin" else np.log(pmax(kept) + EPS)
    feats = [F[n] if mode == "lin" else np.log(np.maximum(F[n], 0) + EPS) for n in names]
    w = np.zeros(len(names))
    cur = base.copy()
    best = crit(evaluate(cur), mask)
    for _ in range(rounds):
        moved = False
        for j in range(len(names)):
            rest = cur - w[j] * feats[j]
            bj, bw = best, w[j]
            for g in GRID:
                c = crit(evaluate(rest + g * feats[j]), mask)
                if c > bj + 1e-4:
                    bj, bw = c, g
            if bw != w[j]:
                w[j] = bw
                cur = rest + bw * feats[j]
                best = bj
                moved = True
        if not moved:
            break
    return w, cur


print(HEAD)
for sname, names in SETS.items():
    for mode in ("lin", "log"):
        w_all, s_all = fit(names, mode, np.ones(Q, bool))
        print(
            row(f"LTR {mode}, {sname}: fit on all dev (in-sample)", evaluate(s_all)),
            " w:",
            dict((n, float(x)) for n, x in zip(names, w_all) if x),
        )
        hit, rr, per = np.zeros(Q), np.zeros(Q), []
        for i in range(NF):
            tr = i != FOLD
            w, s = fit(names, mode, tr)
            f = evaluate(s)
            hit[~tr], rr[~tr] = f[0][~tr], f[1][~tr]
            per.append(
                f"fold{i}: {100 * f[0][~tr].mean():.1f}/{f[1][~tr].mean():.3f} (kept {100 * D['kept'][0][~tr].mean():.1f}/{D['kept'][1][~tr].mean():.3f}) w={dict((n, float(x)) for n, x in zip(names, w) if x)}"
            )
        print(row(f"LTR {mode}, {sname}: held out (fit on 4 folds)", (hit, rr)))
        for p in per:
            print("   ", p)
