"""Idea 4b: a linear listwise model (ListNet-style softmax over the kept top 30, L2-regularised,
numpy gradient descent) on ~24 cheap features; L2 strength chosen by inner CV on the 4 training folds,
tested on the 5th (nested)."""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
import contextlib
import io

from cmrc_probes import best_part, is_bigram
from common import *

with contextlib.redirect_stdout(io.StringIO()):
    import idea4 as L
    import idea5c as C

pool, pr = C.pool, C.pr
qde = [[(t, w) for t, w in qw if not (is_bigram(t) and "的" in t)] for qw in pr.qws]
kept_de = np.array([pool.bm25(qw)[c] for qw, c in zip(qde, pr.cand)])
sent_de = {
    g: L.pmax(np.array([best_part(pool, qw, c, pool.sentences, g) for qw, c in zip(qde, pr.cand)]))
    for g in (2, 3)
}
pm = L.pmax
feat = {
    "kept": pm(X("kept")),
    "logkept": np.log(pm(X("kept")) + 1e-3),
    "kept_de": pm(kept_de),
    "logkept_de": np.log(pm(kept_de) + 1e-3),
    "rr_kept": 1 / (1 + np.arange(30))[None].repeat(Q, 0),
    "share": X("share"),
    "share_u": X("share_u"),
    "share_b": X("share_b"),
    "shcnt_u": X("shcnt_u"),
    "shcnt_b": X("shcnt_b"),
    "sent2": L.F["sent2"],
    "sent3": L.F["sent3"],
    "sent2_de": sent_de[2],
    "sent3_de": sent_de[3],
    "uni": L.F["uni_bm25"],
    "bi": L.F["bi_bm25"],
    "tri_share": X("share_tri"),
    "tri": L.F["tri_bm25"],
    "len": L.F["len"],
    "digit": L.F["digit"],
    "cue": C.cue,
    "inl2": L.F["inl2c7"],
    "lgd": L.F["lgd"],
    "pl2": pm(X("pl2^g1.5")),
    "dph": pm(X("dph^g1.5")),
    "bm25l": pm(X("bm25l^g0.5")),
}
names = list(feat)
Xf = np.stack([feat[n] for n in names], -1)  # (Q, 30, F)
mu = Xf.reshape(-1, len(names)).mean(0)
sd = Xf.reshape(-1, len(names)).std(0) + 1e-9
Xf = (Xf - mu) / sd
HAS = REL.any(1)


def train(mask, l2, iters=400, lr=0.1):
    idx = mask & HAS
    Xt, Rt = Xf[idx], REL[idx]
    w = np.zeros(len(names))
    w[names.index("kept")] = 1.0
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, iters + 1):
        s = Xt @ w
        s -= s.max(1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(1, keepdims=True)
        pr_ = np.where(Rt, p, 0)
        pr_ /= pr_.sum(1, keepdims=True)
        g = ((p - pr_)[..., None] * Xt).sum(1).mean(0) + l2 * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w


L2S = (0.3, 0.1, 0.03, 0.01, 0.003, 0.001)
print(HEAD)
for l2 in L2S:
    print(row(f"ListNet, l2 {l2}, in-sample (all dev)", evaluate(Xf @ train(np.ones(Q, bool), l2))))
hit, rr, ch = np.zeros(Q), np.zeros(Q), []
for i in range(NF):
    tr = i != FOLD
    inner = {}
    for l2 in L2S:
        h, r = np.zeros(Q), np.zeros(Q)
        for j in set(range(NF)) - {i}:
            tj = tr & (j != FOLD)
            f = evaluate(Xf @ train(tj, l2))
            h[j == FOLD], r[j == FOLD] = f[0][j == FOLD], f[1][j == FOLD]
        inner[l2] = crit((h, r), tr)
    best = max(inner, key=inner.get)
    w = train(tr, best)
    f = evaluate(Xf @ w)
    hit[~tr], rr[~tr] = f[0][~tr], f[1][~tr]
    top = sorted(zip(names, w), key=lambda x: -abs(x[1]))[:6]
    ch.append(
        f"f{i}: l2 {best}, {100 * f[0][~tr].mean():.1f}/{f[1][~tr].mean():.3f}; "
        + ", ".join(f"{n} {x:+.2f}" for n, x in top)
    )
print(row("ListNet (26 features), nested CV held out", (hit, rr)))
for c in ch:
    print("   ", c)
