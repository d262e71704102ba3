"""Idea 3: reciprocal-rank fusion of the kept ranking with rankings from other analyses of the same
chunks (bigram-only BM25, unigram-only BM25, CJK-trigram BM25, best sentence g 1-4; plus the DFR
bases of idea 1), re-ranking the kept top 30."""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
from common import *


def inpool_rank(x):
    o = np.argsort(-x, axis=1, kind="stable")
    r = np.empty_like(o)
    np.put_along_axis(r, o, np.arange(x.shape[1])[None].repeat(Q, 0), 1)
    return r.astype(float)


R0 = np.arange(30)[None].repeat(Q, 0).astype(float)
others = {
    "bigram": X("rank:bi_bm25^g0"),
    "unigram": X("rank:uni_bm25^g0"),
    "trigram": X("rank:tri_bm25^g0"),
    **{f"sent{g}": inpool_rank(X(f"sent_g{g}")) for g in (1, 2, 3, 4)},
    "inl2c7": X("rank:inl2_c7^g0.5"),
    "pl2": X("rank:pl2^g1.5"),
    "dph": X("rank:dph^g1.5"),
    "bm25l": X("rank:bm25l^g0.5"),
    "lgd": X("rank:lgd^g1"),
    "bm25raw": X("rank:bm25^g0"),
}
print(HEAD)
KS = (10, 20, 30, 60)
base = evaluate(-R0)
allg = {"off": base}
for name, R in others.items():
    grid = {"off": base}
    for k in KS:
        for w in (0.25, 0.5, 1.0):
            grid[f"{name} k{k} w{w}"] = evaluate(1 / (k + R0) + w / (k + R))
    allg.update(grid)
    kb, v = best_in(grid)
    print(row(f"RRF kept + {name}: best on dev {kb}", v), cv(grid, name)[0])
print(cv(allg, "RRF kept + any one ranking")[0])
# the brief's four analyses together, equal weights
for combo in (
    ("bigram", "unigram"),
    ("bigram", "unigram", "trigram"),
    ("bigram", "unigram", "trigram", "sent2"),
    ("bigram", "sent2"),
    ("trigram", "sent2"),
    ("sent2", "sent3"),
):
    grid = {"off": base}
    for k in KS:
        for w in (0.25, 0.5, 1.0):
            grid[f"k{k} w{w}"] = evaluate(1 / (k + R0) + sum(w / (k + others[c]) for c in combo))
    kb, v = best_in(grid)
    print(row(f"RRF kept + {'+'.join(combo)}: best on dev {kb}", v), cv(grid, "+".join(combo))[0])


# greedy forward selection of rankings with weights, per fold (nested: choose on 4, test on 5th)
def greedy(mask):
    sel, cur = {}, 1 / (30 + R0)
    best_c = crit(evaluate(cur), mask)
    for k in (30,):
        pass
    for k in KS:
        cur_k = 1 / (k + R0)
        chosen = {}
        bc = crit(evaluate(cur_k), mask)
        for _ in range(4):
            cand = None
            for name, R in others.items():
                if name in chosen:
                    continue
                for w in (0.25, 0.5, 1.0):
                    c = crit(evaluate(cur_k + w / (k + R)), mask)
                    if c > bc + 1e-9:
                        bc, cand = c, (name, w)
            if not cand:
                break
            chosen[cand[0]] = cand[1]
            cur_k = cur_k + cand[1] / (k + others[cand[0]])
        if bc > best_c:
            best_c, sel = bc, (k, dict(chosen))
    return sel


hit, rr, ch = np.zeros(Q), np.zeros(Q), []
for i in range(NF):
    tr = i != FOLD
    sel = greedy(tr)
    if sel:
        k, chosen = sel
        s = 1 / (k + R0) + sum(w / (k + others[n]) for n, w in chosen.items())
    else:
        s = -R0
    f = evaluate(s)
    hit[~tr], rr[~tr] = f[0][~tr], f[1][~tr]
    ch.append(str(sel))
print(
    row("RRF greedy forward selection (≤4 rankings, k and weights), nested CV", (hit, rr)),
    "chosen:",
    " | ".join(ch),
)
