"""Idea 1: DFR / BM25 variants as the base score (full-collection ranking), x share^g; and min-max /
linear fusion with the kept score in the top 30."""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
from common import *

alone = D["alone"]
print("## alone (full collection, top 10)\n" + HEAD)
bases = sorted({k.split("^")[0] for k in alone})
for b in bases:
    grid = {k: v for k, v in alone.items() if k.split("^")[0] == b}
    for k, v in grid.items():
        print(row(k, v))
    if len(grid) > 1:
        print(cv(grid, f"{b}: exponent g")[0])
# CV over every model x g (what a fold would pick among all bases)
dfr = {k: v for k, v in alone.items() if not k.startswith(("uni_", "bi_", "tri_"))}
print(cv(dfr, "any base x any g")[0])


def mm(x):
    lo, hi = x.min(1, keepdims=True), x.max(1, keepdims=True)
    return (x - lo) / (hi - lo + 1e-12)


print("\n## fusion with kept in the top 30: (1-λ)·mm(kept) + λ·mm(model x share^g)\n" + HEAD)
kept = mm(X("kept"))
names = [k for k in D["feats"][0] if "^g" in k and not k.startswith("rank:")]
allgrid = {"off": evaluate(X("kept"))}
for nm in names:
    f = mm(X(nm))
    grid = {"off": allgrid["off"]}
    for lam in (0.1, 0.2, 0.3, 0.5):
        grid[f"{nm} λ{lam}"] = evaluate((1 - lam) * kept + lam * f)
    allgrid.update(grid)
    k, v = best_in(grid)
    print(row(f"best on all dev: {k}", v), "||", cv(grid, nm)[0])
print(cv(allgrid, "fusion: any model, any λ")[0])
