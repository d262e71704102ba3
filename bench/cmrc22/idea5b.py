"""Idea 5, part 2 (re-ranks of the kept top 30, postings only):
d) coordination exponent by question length (distinct query terms: ≤ 14 / 15-24 / ≥ 25), each γ by CV;
e) a soft share: ((ε + share) / (1 + ε))^γ."""

import itertools
import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
from pathlib import Path

from cmrc_probes import Pool, Probe, load_cmrc
from common import *

docs, qs = load_cmrc(Path(__import__("quality").DATA, "cmrc", "cmrc2018_zh_dev.json"))
pool = Pool(docs)
pr = Probe(pool, qs)
nt = np.array([len(qw) for qw in pr.qws])
print("terms per question: quartiles", np.percentile(nt, [25, 50, 75]))
bucket = np.digitize(nt, [15, 25])
bm, sh = X("bm25raw"), X("share")
G = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
print(HEAD)
grid = {}
for gs in itertools.product(G, repeat=3):
    g = np.array(gs)[bucket][:, None]
    grid[gs] = evaluate(bm * sh**g)
k, v = best_in(grid)
print(row(f"d) γ per length bucket, best on dev {k}", v))
print(cv(grid, "d) γ per length bucket")[0])
grid = {"kept": evaluate(bm * sh)}
for eps in (0.05, 0.1, 0.2, 0.5):
    for g in (1, 1.5, 2, 3):
        grid[(eps, g)] = evaluate(bm * ((eps + sh) / (1 + eps)) ** g)
k, v = best_in(grid)
print(row(f"e) soft share, best on dev {k}", v))
print(cv(grid, "e) soft share (ε, γ)")[0])
