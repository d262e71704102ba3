#!/usr/bin/env python
"""Session-22 CMRC probes, step 1: per question, every candidate model's full ranking and the
features of the kept ranking's best POOL chunks. Saved to $CMRC22_WORK/feats.pkl (default /tmp/cmrc22).

Usage: python bench/cmrc22/feats.py (then the other scripts of bench/cmrc22; see run_all.sh)
"""

from __future__ import annotations

import math
import os
import pickle
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # bench/
from cmrc_probes import (
    K1,
    B,
    Pool,
    Probe,
    best_part,
    check_against_index,
    figures,
    load_cmrc,
)

from md_cg.script import is_cjk
from md_cg.text import normalize

DATA = Path(__import__("quality").DATA, "cmrc", "cmrc2018_zh_dev.json")
POOL = 30
LOG2E = 1 / math.log(2)
NUMBER_Q = re.compile(
    "多少|几|哪一年|哪年|何时|什么时候|多久|多长|多大|多高|多重|多远|哪一天|年份|日期|几岁|时间"
)


def is_uni(t: str) -> bool:
    return len(t) == 1 and is_cjk(t)


class Stats:
    """Collection statistics of a pool (postings t -> (docs, tf))."""

    def __init__(self, pool: Pool) -> None:
        self.p = pool
        self.N = pool.n
        self.dl = pool.dl
        self.avgdl = pool.dl.mean()
        self.total = pool.dl.sum()
        self.F = {t: f.sum() for t, (_, f) in pool.post.items()}
        self.adpt: dict[str, tuple[float, float]] = {}

    # ---- base models: per term contribution arrays over the term's postings
    def contrib(self, model: str, t: str, d: np.ndarray, tf: np.ndarray, c: float = 1.0) -> np.ndarray:
        N, dl, avgdl = self.N, self.dl[d], self.avgdl
        df = len(d)
        F = self.F[t]
        if model == "bm25":
            idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
            return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))
        if model == "bm25l":
            idf = math.log((N + 1) / (df + 0.5))
            ctd = tf / (1 - B + B * dl / avgdl) + 0.5
            return idf * (K1 + 1) * ctd / (K1 + ctd)
        if model == "adpt":
            g1, k1 = self.adapt(t)
            ctd = tf / (1 - B + B * dl / avgdl)
            return g1 * (k1 + 1) * ctd / (k1 + ctd)
        tfn = tf * np.log2(1 + c * avgdl / dl)
        if model == "pl2":
            lam = F / N
            s = (tfn * np.log2(tfn / lam) + (lam - tfn) * LOG2E + 0.5 * np.log2(2 * math.pi * tfn)) / (
                tfn + 1
            )
            return np.maximum(s, 0.0)
        if model == "inl2":
            return tfn / (tfn + 1) * math.log2((N + 1) / (df + 0.5))
        if model == "lgd":
            lam = df / N
            return np.log2((lam + tfn) / lam)
        if model == "dph":
            f = tf / dl
            norm = (1 - f) ** 2 / (tf + 1)
            s = norm * (
                tf * np.log2((tf * avgdl / dl) * (N / F))
                + 0.5 * np.log2(2 * math.pi * tf * np.maximum(1 - f, 1e-9))
            )
            return np.maximum(s, 0.0)
        if model == "dfi":
            e = F * dl / self.total
            return np.where(tf > e, np.log2((tf - e) / np.sqrt(e) + 1), 0.0)
        if model == "f2exp":
            s = 0.5
            return ((N + 1) / df) ** 0.35 * tf / (tf + s + s * dl / avgdl)
        raise ValueError(model)

    def adapt(self, t: str) -> tuple[float, float]:
        """BM25-adpt (Lv & Zhai 2011): G_1 as idf and a per-term k1 fitted to G_r / G_1."""
        if t in self.adpt:
            return self.adpt[t]
        d, tf = self.p.post[t]
        N = self.N
        ctd = tf / (1 - B + B * self.dl[d] / self.avgdl)
        dfr = [N] + [int((ctd >= r - 0.5).sum()) for r in range(1, 6)]
        G = []
        for r in range(0, 5):
            if r > 0 and dfr[r] < 2:
                break
            G.append(math.log2((dfr[r + 1] + 0.5) / (dfr[r] + 1)) - math.log2((dfr[r] + 0.5) / (N + 1)))
        g1 = G[1] if len(G) > 1 and G[1] > 0 else math.log(1 + (N - len(d) + 0.5) / (len(d) + 0.5))
        if len(G) <= 2:
            k1 = K1
        else:
            best, k1 = 1e18, K1
            for k in np.exp(np.linspace(math.log(0.05), math.log(5), 60)):
                err = sum((G[r] / g1 - (k + 1) * r / (k + r)) ** 2 for r in range(len(G)))
                if err < best:
                    best, k1 = err, float(k)
        self.adpt[t] = (g1, k1)
        return g1, k1


def trigram_pool(docs: list[tuple[str, str]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Character trigrams of CJK runs (no index change: a re-rank feature from the chunk text)."""

    def grams(text: str) -> Counter[str]:
        s = normalize(text)
        out: Counter[str] = Counter()
        for run in re.findall(r"\S+", "".join(ch if is_cjk(ch) else " " for ch in s)):
            for i in range(len(run) - 2):
                out[run[i : i + 3]] += 1
        return out

    acc: dict[str, list[tuple[int, int]]] = {}
    lens = []
    for i, (_, text) in enumerate(docs):
        g = grams(text)
        lens.append(sum(g.values()))
        for t, f in g.items():
            acc.setdefault(t, []).append((i, f))
    post = {t: (np.array([i for i, _ in v]), np.array([f for _, f in v], float)) for t, v in acc.items()}
    return post, np.array(lens, float), grams


def ranks_of(score: np.ndarray, id_order: np.ndarray) -> np.ndarray:
    """Rank (0 best) of every doc by (score desc, id asc); unmatched docs share a large rank."""
    order = np.lexsort((id_order, -score))
    r = np.empty(len(score), int)
    r[order] = np.arange(len(score))
    r[score <= 0] = 10**6
    return r


def main() -> None:
    t0 = time.time()
    docs, questions = load_cmrc(DATA)
    pool = Pool(docs)
    probe = Probe(pool, questions)
    print(check_against_index(probe, docs), flush=True)
    st = Stats(pool)
    tpost, tlen, tgrams = trigram_pool(docs)
    tN, tavg = len(docs), tlen.mean()
    has_digit = np.array([bool(re.search(r"\d", normalize(t))) for _, t in docs], float)
    models = ["bm25", "bm25l", "adpt", "pl2", "inl2", "lgd", "dph", "dfi", "f2exp"]
    dfr_c = {"pl2": (1.0, 2.0, 4.0, 7.0), "inl2": (1.0, 2.0, 4.0, 7.0), "lgd": (1.0, 2.0, 4.0, 7.0)}
    n = pool.n
    full_top: dict[str, list[np.ndarray]] = {}  # alone rankings (top 10) per model variant
    cand_feats: list[dict[str, np.ndarray]] = []
    cands = probe.cand
    for qi, ((q, _, _), qw) in enumerate(zip(questions, probe.qws, strict=True)):
        cand = cands[qi]
        F: dict[str, np.ndarray] = {}
        # masses per term class
        m_all, m_uni, m_bi = np.zeros(n), np.zeros(n), np.zeros(n)
        tot_all = tot_uni = tot_bi = 0.0
        cnt_uni, cnt_bi = np.zeros(n), np.zeros(n)
        n_uni = n_bi = 0
        for t, w in qw:
            d, _ = pool.post[t]
            wi = w * pool.idf(t)
            m_all[d] += wi
            tot_all += wi
            if is_uni(t):
                m_uni[d] += wi
                tot_uni += wi
                cnt_uni[d] += 1
                n_uni += 1
            else:
                m_bi[d] += wi
                tot_bi += wi
                cnt_bi[d] += 1
                n_bi += 1
        share = m_all / tot_all if tot_all else np.ones(n)
        share_u = m_uni / tot_uni if tot_uni else np.ones(n)
        share_b = m_bi / tot_bi if tot_bi else np.ones(n)
        shcnt_u = cnt_uni / n_uni if n_uni else np.ones(n)
        shcnt_b = cnt_bi / n_bi if n_bi else np.ones(n)
        raw: dict[str, np.ndarray] = {}
        variants = [(m, None) for m in models] + [(m, c) for m, cs in dfr_c.items() for c in cs if c != 1.0]
        for m, c in variants:
            s = np.zeros(n)
            for t, w in qw:
                d, tf = pool.post[t]
                s[d] += w * st.contrib(m, t, d, tf, c if c else 1.0)
            key = m if c is None else f"{m}_c{c:g}"
            raw[key] = s
        # unigram-only / bigram-only BM25 (with their own share)
        su, sb = np.zeros(n), np.zeros(n)
        for t, w in qw:
            d, tf = pool.post[t]
            v = w * st.contrib("bm25", t, d, tf)
            if is_uni(t):
                su[d] += v
            else:
                sb[d] += v
        raw["uni_bm25"] = su * share_u
        raw["bi_bm25"] = sb * share_b
        # trigram BM25 of the question's CJK trigrams x trigram share
        qg = tgrams(q)
        s3, m3, tot3 = np.zeros(n), np.zeros(n), 0.0
        for t, w in qg.items():
            if t not in tpost:
                continue
            d, tf = tpost[t]
            df = len(d)
            idf = math.log(1 + (tN - df + 0.5) / (df + 0.5))
            s3[d] += w * idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * tlen[d] / tavg))
            m3[d] += w * idf
            tot3 += w * idf
        raw["tri_bm25"] = s3 * (m3 / tot3) if tot3 else s3
        F["share_tri"] = (m3 / tot3)[cand] if tot3 else np.zeros(len(cand))
        # full-collection rankings (alone) for every raw score, plain and x share
        for key, s in raw.items():
            for g in (0.0, 0.5, 1.0, 1.5):
                if key in ("uni_bm25", "bi_bm25", "tri_bm25") and g:
                    continue
                sc = s * share**g if g else s
                name = f"{key}^g{g:g}"
                full_top.setdefault(name, []).append(pool.top(sc, 10))
                F[f"{name}"] = sc[cand]
                F[f"rank:{name}"] = ranks_of(sc, pool.id_order)[cand]
        F["kept"] = probe.scores[qi][cand]
        F["bm25raw"] = raw["bm25"][cand]
        F["share"] = share[cand]
        F["share_u"] = share_u[cand]
        F["share_b"] = share_b[cand]
        F["shcnt_u"] = shcnt_u[cand]
        F["shcnt_b"] = shcnt_b[cand]
        F["dl"] = pool.dl[cand]
        F["digit"] = has_digit[cand] * (1.0 if NUMBER_Q.search(q) else 0.0)
        F["has_uni"] = np.full(len(cand), float(tot_uni > 0))
        cand_feats.append(F)
        if qi % 200 == 0:
            print(qi, f"{time.time() - t0:.1f}s", flush=True)
    # best sentence, g 1..4 (cmrc_probes' best_part), over the candidates
    for g in (1, 2, 3, 4):
        feats = probe.each(lambda qw, c, g=g: best_part(pool, qw, c, pool.sentences, g))
        for F, f in zip(cand_feats, feats, strict=True):
            F[f"sent_g{g}"] = f
        print("sentence", g, f"{time.time() - t0:.1f}s", flush=True)
    rel = [np.array([pool.ids[d] in r for d in c]) for (_, r, _), c in zip(questions, cands, strict=True)]
    alone = {k: figures(pool, questions, v) for k, v in full_top.items()}
    out = {
        "fold": probe.fold,
        "rel": rel,
        "feats": cand_feats,
        "alone": alone,
        "kept": figures(pool, questions, cands),
    }
    work = Path(os.environ.get("CMRC22_WORK", "/tmp/cmrc22"))
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "feats.pkl", "wb") as fh:
        pickle.dump(out, fh)
    print(f"done {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
