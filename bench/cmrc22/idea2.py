"""Idea 2: separate coordination for unigrams and bigrams (+ words): bm25 x share_u^a x share_b^c
(idf-weighted shares within each class), and the same with count shares; re-rank of the kept top 30."""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
from common import *

bm = X("bm25raw")
su, sb, cu, cb, sh = X("share_u"), X("share_b"), X("shcnt_u"), X("shcnt_b"), X("share")
E = (0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3)
print(HEAD)
print(row("kept: bm25 x share^1", evaluate(bm * sh)))
for label, U, Bi in (("idf shares", su, sb), ("count shares", cu, cb)):
    grid = {}
    for a in E:
        for c in E:
            grid[(a, c)] = evaluate(bm * U**a * Bi**c)
    top = sorted(grid, key=lambda k: -crit(grid[k], np.ones(Q, bool)))[:6]
    for k in top:
        print(row(f"{label}: a(uni) {k[0]}, c(bi) {k[1]}", grid[k]))
    print(row(f"{label}: a 1 c 1", grid[(1, 1)]))
    print(cv(grid, f"{label}: (a, c)")[0])
# with the global share kept at 1, add an extra bigram share exponent
grid = {}
for g in (0.5, 1, 1.5):
    for c in (0, 0.25, 0.5, 1, 1.5):
        for a in (0, 0.25, 0.5):
            grid[(g, a, c)] = evaluate(bm * sh**g * su**a * sb**c)
top = sorted(grid, key=lambda k: -crit(grid[k], np.ones(Q, bool)))[:5]
for k in top:
    print(row(f"share^{k[0]} x share_u^{k[1]} x share_b^{k[2]}", grid[k]))
print(cv(grid, "share^g x share_u^a x share_b^c")[0])
