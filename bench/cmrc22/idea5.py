"""Idea 5 (own): postings-only variants not in the table, scored over the whole pool (exact top 10):
a) unigram discount when covered: a query unigram's contribution (BM25 and share) x α in a chunk
   that also matches a query bigram holding that character (scattered characters keep weight 1);
b) burstiness-discounted share: the share's weights w·idf·(F/df)^-β (topic terms repeated within
   chunks count less for coordination);
c) both terms' BM25 and share with a burstiness discount.
"""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
from pathlib import Path

import numpy as np
from cmrc_probes import K1, Pool, Probe, figures, load_cmrc
from common import HEAD, cv, row
from feats import is_uni

docs, qs = load_cmrc(Path(__import__("quality").DATA, "cmrc", "cmrc2018_zh_dev.json"))
pool = Pool(docs)
pr = Probe(pool, qs)
n = pool.n
burst = {t: f.sum() / len(d) for t, (d, f) in pool.post.items()}


def mats(qw):
    terms = [t for t, _ in qw]
    w = np.array([x for _, x in qw])
    idf = np.array([pool.idf(t) for t in terms])
    tf = np.zeros((n, len(terms)))
    for j, t in enumerate(terms):
        d, f = pool.post[t]
        tf[d, j] = f
    return terms, w, idf, tf


PRE = [mats(qw) for qw in pr.qws]


def score_all(alpha=1.0, beta_share=0.0, beta_sum=0.0, gamma=1.0):
    out = []
    for terms, w, idf, tf in PRE:
        sat = np.where(tf > 0, tf * (K1 + 1) / (tf + pool.norm[:, None]), 0.0)
        wd = np.ones_like(tf)
        if alpha != 1.0:
            bis = [j for j, t in enumerate(terms) if not is_uni(t)]
            for j, t in enumerate(terms):
                if is_uni(t):
                    cov = [k for k in bis if t in terms[k]]
                    if cov:
                        covered = (tf[:, cov] > 0).any(1)
                        wd[covered, j] = alpha
        bu = np.array([burst[t] for t in terms])
        wsum = w * idf * bu ** (-beta_sum)
        wsh = w * idf * bu ** (-beta_share)
        s = (sat * wd) @ wsum
        share = ((tf > 0) * wd) @ wsh / wsh.sum()
        out.append(pool.top(s * share**gamma, 10))
    return figures(pool, qs, out)


print(HEAD)
base = score_all()
print(row("kept (re-implemented, dense)", base))
grid = {"kept": base}
for a in (0.0, 0.25, 0.5, 0.75):
    grid[f"α {a}"] = f = score_all(alpha=a)
    print(row(f"a) covered unigram x α {a}", f))
print(cv(grid, "a) α")[0])
g2 = {"kept": base}
for b in (0.25, 0.5, 1.0, -0.5):
    g2[f"βshare {b}"] = f = score_all(beta_share=b)
    print(row(f"b) share weights x burst^-{b}", f))
print(cv(g2, "b) β share")[0])
g3 = {"kept": base}
for b in (0.25, 0.5, 1.0, -0.5):
    g3[f"β {b}"] = f = score_all(beta_share=b, beta_sum=b)
    print(row(f"c) sum and share x burst^-{b}", f))
print(cv(g3, "c) β both")[0])
