"""Best combined: session 5's best (bigrams holding 的 dropped + λ x best sentence) as the base, then the
LTR of idea 4 on top (log-linear and linear; coordinate ascent on 4 folds, tested on the 5th)."""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
from pathlib import Path

import idea4 as L  # reuses its features and fit (prints idea 4's table first)
from cmrc_probes import Pool, Probe, best_part, is_bigram, load_cmrc
from common import *

docs, qs = load_cmrc(Path(__import__("quality").DATA, "cmrc", "cmrc2018_zh_dev.json"))
pool = Pool(docs)
pr = Probe(pool, qs)
qde = [[(t, w) for t, w in qw if not (is_bigram(t) and "的" in t)] for qw in pr.qws]
kept_de = np.array([pool.bm25(qw)[c] for qw, c in zip(qde, pr.cand)])
sent_de = {
    g: np.array([best_part(pool, qw, c, pool.sentences, g) for qw, c in zip(qde, pr.cand)]) for g in (2, 3, 4)
}
print("\n## combined\n" + HEAD)
print(row("的 bigrams dropped (re-rank of kept top 30)", evaluate(kept_de)))
grid = {"off": evaluate(kept_de)}
for g in (2, 3, 4):
    for lam in (0.25, 0.35, 0.5):
        grid[(g, lam)] = evaluate(kept_de + lam * sent_de[g])
k, v = best_in(grid)
print(row(f"的 dropped + λ best sentence, best on dev {k}", v))
print(cv(grid, "的 dropped + λ best sentence (session 5's best)")[0])
grid2 = {"off": evaluate(X("kept"))}
for g in (2, 3, 4):
    for lam in (0.25, 0.35, 0.5):
        grid2[(g, lam)] = evaluate(X("kept") + lam * X(f"sent_g{g}"))
print(cv(grid2, "kept + λ best sentence (session 5)")[0])

# LTR on top of the 的-dropped base, sentence as a feature
L.kept = kept_de
L.F["sent2"] = L.pmax(sent_de[2])
L.F["sent3"] = L.pmax(sent_de[3])
names = ["sent2", "uni_bm25", "share_u", "share_b", "len", "digit"]
for mode in ("lin", "log"):
    hit, rr, per = np.zeros(Q), np.zeros(Q), []
    for i in range(NF):
        tr = i != FOLD
        w, s = L.fit(names, mode, tr)
        f = evaluate(s)
        hit[~tr], rr[~tr] = f[0][~tr], f[1][~tr]
        per.append(
            f"fold{i}: {100 * f[0][~tr].mean():.1f}/{f[1][~tr].mean():.3f} (kept {100 * D['kept'][0][~tr].mean():.1f}/{D['kept'][1][~tr].mean():.3f}) w={dict((n, float(x)) for n, x in zip(names, w) if x)}"
        )
    print(row(f"的 dropped base + LTR {mode} ({', '.join(names)}): held out", (hit, rr)))
    for p in per:
        print("   ", p)
    w, s = L.fit(names, mode, np.ones(Q, bool))
    print(
        row("  same, fit on all dev (in-sample)", evaluate(s)),
        dict((n, float(x)) for n, x in zip(names, w) if x),
    )
