#!/usr/bin/env python
"""Lexical probes for the CMRC misses of issue 17 (session 5): what was tried and did not pay.

Usage::

    python bench/cmrc_probes.py [--cmrc PATH]

A prototype scorer over the same analysis as the engine (``analyze`` for the
chunks, ``query_terms`` for the questions) and the same BM25 (k1 0.6, b 0.4,
coordination share to the power 1 for CJK documents: the kept ranking). It
first checks that its baseline ranks exactly as ``TextIndex.match`` does
(hit@1 and MRR@10 equal), then measures each idea alone: per-term query
weights, document tf transforms, BM25+, and re-ranks of the best 30 chunks
(question-specific terms, the family of near-duplicate neighbours, the best
sentence or window of a chunk, a query-likelihood model). Each row gives
hit@1 / MRR@10 on the 1,596 dev questions and the spread over the five
article folds of ``bench/quality.py`` (``cmrc_fold_of``); parameters of the
re-ranks with a weight are also chosen by cross-validation over those folds
(chosen on four, reported on the fifth). Figures are in docs/ranking.md,
"Tried and not kept". Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from quality import CMRC_FOLDS, DATA, cmrc_fold_of, load_cmrc  # noqa: E402

from md_cg.script import is_cjk  # noqa: E402
from md_cg.text import CHINESE_QUESTION_WORDS, analyze, normalize, query_terms  # noqa: E402
from md_cg.textindex import DEFAULT_B, DEFAULT_K1, TextIndex  # noqa: E402

K1, B = DEFAULT_K1, DEFAULT_B
#: Re-ranks look at this many chunks of the kept ranking.
POOL = 30
Weighted = list[tuple[str, float]]
#: Per question: (hit@1, reciprocal rank within 10) arrays.
Figures = tuple[np.ndarray, np.ndarray]
SENTENCE_END = re.compile(r"(?<=[。！？；!?;])")
QUESTION_RE = re.compile("|".join(map(re.escape, sorted(CHINESE_QUESTION_WORDS, key=len, reverse=True))))


class Pool:
    """The CMRC chunks as postings, with the statistics of ``TextIndex`` (one script class)."""

    def __init__(self, docs: list[tuple[str, str]]) -> None:
        self.ids = [d for d, _ in docs]
        self.texts = [t for _, t in docs]
        self.terms = [Counter(analyze(t)) for t in self.texts]
        self.n = len(docs)
        self.dl = np.array([sum(c.values()) for c in self.terms], float)
        self.norm = K1 * (1 - B + B * self.dl / self.dl.mean())
        acc: dict[str, list[tuple[int, int]]] = {}
        for i, c in enumerate(self.terms):
            for t, f in c.items():
                acc.setdefault(t, []).append((i, f))
        self.post = {
            t: (np.array([i for i, _ in v]), np.array([f for _, f in v], float)) for t, v in acc.items()
        }
        self.id_order = np.argsort(np.argsort(np.array(self.ids)))
        self.sentences = [self._parts(SENTENCE_END.split(t)) for t in self.texts]

    @staticmethod
    def _parts(parts: Iterable[str]) -> list[Counter[str]]:
        return [Counter(analyze(p)) for p in parts if p.strip()]

    def idf(self, t: str) -> float:
        df = len(self.post[t][0])
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def weights(self, question: str) -> Weighted:
        """``query_terms`` with repeats as weights, terms absent from the pool left out."""
        return [(t, float(w)) for t, w in Counter(query_terms(question)).items() if t in self.post]

    def bm25(
        self,
        qw: Weighted,
        gamma: float = 1.0,
        tf: Callable[[np.ndarray], np.ndarray] | None = None,
        delta: float = 0.0,
        power: float = 1.0,
    ) -> np.ndarray:
        """Scores of every chunk: BM25 (``tf`` transform, BM25+ ``delta``, idf ** ``power``)
        x share ** ``gamma`` (the share over plain idf)."""
        score, mass, total = np.zeros(self.n), np.zeros(self.n), 0.0
        for t, w in qw:
            d, f = self.post[t]
            f = tf(f) if tf else f
            idf = self.idf(t)
            score[d] += w * idf**power * (f * (K1 + 1) / (f + self.norm[d]) + delta)
            mass[d] += w * idf
            total += w * idf
        return score * (mass / total) ** gamma if gamma and total else score

    def part_score(self, qw: Weighted, counts: Counter[str], avg: float, gamma: float) -> float:
        """BM25 x share ** ``gamma`` of one part of a chunk (a sentence, a window), length vs ``avg``."""
        total = sum(w * self.idf(t) for t, w in qw)
        length = sum(counts.values())
        score = mass = 0.0
        for t, w in qw:
            f = counts.get(t, 0)
            if f:
                idf = self.idf(t)
                score += w * idf * f * (K1 + 1) / (f + K1 * (1 - B + B * length / avg))
                mass += w * idf
        return score * (mass / total) ** gamma if total else 0.0

    def order(self, cand: np.ndarray, score: np.ndarray) -> np.ndarray:
        """``cand`` by (score desc, id asc), as ``TextIndex`` breaks ties."""
        return cand[np.lexsort((self.id_order[cand], -score))]

    def top(self, score: np.ndarray, k: int = POOL) -> np.ndarray:
        cand = np.argpartition(-score, k)[:k]
        return self.order(cand, score[cand])


def figures(pool: Pool, questions: list, ranked: list[np.ndarray]) -> Figures:
    hit, rr = [], []
    for (_, relevant, _), r in zip(questions, ranked, strict=True):
        first = next((i for i, d in enumerate(r[:10]) if pool.ids[d] in relevant), None)
        hit.append(first == 0)
        rr.append(0.0 if first is None else 1 / (first + 1))
    return np.array(hit, float), np.array(rr)


def row(name: str, fig: Figures, fold: np.ndarray) -> str:
    h1 = [100 * fig[0][fold == i].mean() for i in range(CMRC_FOLDS)]
    mrr = [fig[1][fold == i].mean() for i in range(CMRC_FOLDS)]
    return (
        f"| {name} | {100 * fig[0].mean():.2f} | {fig[1].mean():.4f} |"
        f" {min(h1):.1f}–{max(h1):.1f} | {min(mrr):.3f}–{max(mrr):.3f} |"
    )


def cross_validated(name: str, grid: dict[str, Figures], fold: np.ndarray) -> str:
    """Each fold's setting chosen on the other four (hit@1 + MRR@10); held-out figures."""
    hit, rr, chosen = np.zeros(len(fold)), np.zeros(len(fold)), []
    for i in range(CMRC_FOLDS):
        train = fold != i
        best = max(grid, key=lambda p: round(grid[p][0][train].mean() + grid[p][1][train].mean(), 9))
        chosen.append(best)
        hit[~train], rr[~train] = grid[best][0][~train], grid[best][1][~train]
    return row(f"{name}, by cross-validation (chosen: {'; '.join(chosen)})", (hit, rr), fold)


# ------------------------------------------------------------------ query weights


def pmi(pool: Pool, t: str) -> float:
    """Document-level PMI of a CJK bigram's two characters (low: a bigram across a word boundary)."""
    n = pool.n
    return math.log(n * len(pool.post[t][0]) / (len(pool.post[t[0]][0]) * len(pool.post[t[1]][0])))


def is_bigram(t: str) -> bool:
    return len(t) == 2 and is_cjk(t[0]) and is_cjk(t[1])


def near_question_word(question: str, dist: int) -> set[str]:
    """Bigrams within ``dist`` characters of a Chinese question word of ``question``."""
    s, near = normalize(question), set()
    for m in QUESTION_RE.finditer(s):
        for i in range(max(0, m.start() - dist), m.start() - 1):
            near.add(s[i : i + 2])
        for i in range(m.end(), min(len(s), m.end() + dist) - 1):
            near.add(s[i : i + 2])
    return near


def weight_probes(pool: Pool, questions: list, qws: list[Weighted]) -> dict[str, list[Weighted]]:
    """Per-term query weights: each probe maps a question's terms to new weights."""
    out: dict[str, list[Weighted]] = {}
    for th, beta in ((0.0, 0.5), (0.0, 0.25), (-1.0, 0.5), (2.0, 0.5)):
        out[f"bigrams with PMI < {th} at weight {beta}"] = [
            [(t, w * beta if is_bigram(t) and pmi(pool, t) < th else w) for t, w in qw] for qw in qws
        ]
    for chars in ("的", "是", "的是了在为有于被由"):
        out[f"bigrams holding one of {chars} dropped"] = [
            [(t, w) for t, w in qw if not (is_bigram(t) and set(t) & set(chars))] for qw in qws
        ]
    touching = [near_question_word(q, 2) for q, _, _ in questions]
    out["bigrams touching a removed question word dropped"] = [
        [(t, w) for t, w in qw if not (is_bigram(t) and t in nb)]
        for qw, nb in zip(qws, touching, strict=True)
    ]
    for dist, delta in ((3, 0.25), (6, 0.25), (4, 0.5)):
        near = [near_question_word(q, dist) for q, _, _ in questions]
        out[f"bigrams within {dist} characters of the question word x {1 + delta}"] = [
            [(t, w * (1 + delta) if is_bigram(t) and t in nb else w) for t, w in qw]
            for qw, nb in zip(qws, near, strict=True)
        ]
    for delta in (0.1, 0.2):
        out[f"second half of the question x {1 + delta}, first half x {1 - delta}"] = [
            _by_half(normalize(q), qw, delta) for (q, _, _), qw in zip(questions, qws, strict=True)
        ]
    return out


def _by_half(s: str, qw: Weighted, delta: float) -> Weighted:
    last = max(len(s) - 1, 1)
    return [(t, w * (1 + delta if max(s.find(t), 0) / last >= 0.5 else 1 - delta)) for t, w in qw]


# ------------------------------------------------------------------- re-ranks


def shared_terms(pool: Pool, qw: Weighted, family: np.ndarray, rho: float) -> set[str]:
    """Query terms held by at least ``rho`` of the ``family`` chunks (the article's subject)."""
    return {t for t, _ in qw if sum(t in pool.terms[d] for d in family) >= rho * len(family)}


def family_flat(pool: Pool, qw: Weighted, cand: np.ndarray, m: int, rho: float) -> np.ndarray:
    """Scores of ``cand`` where a term shared by the best ``m`` adds w·idf flat (no tf, no length)."""
    shared = shared_terms(pool, qw, cand[:m], rho)
    total = sum(w * pool.idf(t) for t, w in qw)
    out = np.zeros(len(cand))
    for j, d in enumerate(cand):
        counts, score, mass = pool.terms[d], 0.0, 0.0
        for t, w in qw:
            f = counts.get(t, 0)
            if f:
                idf = pool.idf(t)
                score += w * idf * (1.0 if t in shared else f * (K1 + 1) / (f + pool.norm[d]))
                mass += w * idf
        out[j] = score * mass / total
    return out


def specific(pool: Pool, qw: Weighted, cand: np.ndarray, m: int, rho: float) -> np.ndarray:
    """Coordinated BM25 of ``cand`` over the query terms *not* shared by the best ``m``."""
    shared = shared_terms(pool, qw, cand[:m], rho)
    rest = [(t, w) for t, w in qw if t not in shared]
    return np.array([pool.part_score(rest, pool.terms[d], pool.dl.mean(), 1.0) for d in cand])


def best_part(
    pool: Pool, qw: Weighted, cand: np.ndarray, parts: list[list[Counter[str]]], g: float
) -> np.ndarray:
    """Per candidate: its best part (sentence, window) by BM25 x share ** ``g``."""
    avg = float(np.mean([sum(c.values()) for ps in parts for c in ps]))
    return np.array([max(pool.part_score(qw, c, avg, g) for c in parts[d]) for d in cand])


def query_likelihood(pool: Pool, qw: Weighted, mu: float) -> np.ndarray:
    """Dirichlet-smoothed query likelihood (rank-equivalent form)."""
    total = pool.dl.sum()
    score = np.full(pool.n, sum(w for _, w in qw)) * np.log(mu / (pool.dl + mu))
    for t, w in qw:
        d, f = pool.post[t]
        score[d] += w * np.log1p(f / (mu * pool.post[t][1].sum() / total))
    return score


def segment_coverage(pool: Pool, question: str, qw: Weighted, alpha: float) -> np.ndarray:
    """Kept scores x the product over the question's runs (cut at question words and punctuation)
    of (1 - ``alpha`` + ``alpha`` x the run's share of idf mass in the chunk)."""
    weight = dict(qw)
    score = pool.bm25(qw)
    for run in QUESTION_RE.sub(" ", normalize(question)).split():
        terms = {t for t in query_terms(run) if t in weight}
        if not terms:
            continue
        mass = np.zeros(pool.n)
        for t in terms:
            mass[pool.post[t][0]] += weight[t] * pool.idf(t)
        score *= 1 - alpha + alpha * mass / sum(weight[t] * pool.idf(t) for t in terms)
    return score


def regularized(pool: Pool, cand: np.ndarray, score: np.ndarray, lam: float) -> np.ndarray:
    """Score + ``lam`` x the cosine-weighted mean score of the other candidates (cluster hypothesis;
    vectors: (1 + log tf) x idf over each chunk's bigrams and words)."""
    vecs = []
    for d in cand:
        v = {t: (1 + math.log(f)) * pool.idf(t) for t, f in pool.terms[d].items() if len(t) > 1}
        n = math.sqrt(sum(x * x for x in v.values())) or 1.0
        vecs.append({t: x / n for t, x in v.items()})
    sim = np.array(
        [[0.0 if a is b else sum(x * b.get(t, 0.0) for t, x in a.items()) for b in vecs] for a in vecs]
    )
    return score + lam * (sim @ score) / (sim.sum(1) + 1e-12)


def windows(text: str, width: int, stride: int = 10) -> list[str]:
    return [text[i : i + width] for i in range(0, max(1, len(text) - width + stride), stride)]


# ----------------------------------------------------------------------- main


class Probe:
    """The kept ranking of every question, and the rows measured against it."""

    def __init__(self, pool: Pool, questions: list, qws: list[Weighted] | None = None) -> None:
        """``qws``: the questions' weighted terms (default: ``query_terms`` with repeats as weights)."""
        self.pool, self.questions = pool, questions
        self.fold = np.array(cmrc_fold_of(questions))
        self.qws = qws or [pool.weights(q) for q, _, _ in questions]
        self.scores = [pool.bm25(qw) for qw in self.qws]
        self.cand = [pool.top(s) for s in self.scores]
        self.lines = ["| probe | hit@1 | MRR@10 | folds hit@1 | folds MRR@10 |", "|---|---|---|---|---|"]

    def emit(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)

    def ranked(self, name: str, ranked: list[np.ndarray]) -> Figures:
        fig = figures(self.pool, self.questions, ranked)
        self.emit(row(name, fig, self.fold))
        return fig

    def full(
        self, name: str, score: Callable[[Weighted], np.ndarray], qws: list[Weighted] | None = None
    ) -> Figures:
        return self.ranked(name, [self.pool.top(score(qw)) for qw in qws or self.qws])

    def each(self, feature: Callable[[Weighted, np.ndarray], np.ndarray]) -> list[np.ndarray]:
        """``feature(terms, candidates)`` of every question."""
        return [feature(qw, c) for qw, c in zip(self.qws, self.cand, strict=True)]

    def rerank(self, name: str, features: list[np.ndarray], lam: float | None) -> Figures:
        """The best ``POOL`` by kept score + ``lam`` x feature (``lam`` None: the feature alone)."""
        out = []
        for s, c, f in zip(self.scores, self.cand, features, strict=True):
            out.append(self.pool.order(c, f if lam is None else s[c] + lam * f))
        return self.ranked(name, out)

    def grid(self, name: str, features: dict[str, list[np.ndarray]], lams: tuple[float, ...]) -> None:
        per = {"off": self.rerank(f"{name}: off (kept)", features[next(iter(features))], 0.0)}
        for key, feats in features.items():
            for lam in lams:
                per[f"{key}, λ {lam}"] = self.rerank(f"{name}: {key}, λ {lam}", feats, lam)
        self.emit(cross_validated(name, per, self.fold))


def check_against_index(probe: Probe, docs: list[tuple[str, str]]) -> str:
    """``TextIndex.match``'s figures beside the prototype's kept ranking (they must agree).

    The two agree to float rounding (the index keeps some statistics in
    float32), so the order of near-equal scores can differ: the check allows
    2 questions of difference in hit@1 and 0.001 in MRR@10.
    """
    index = TextIndex()
    for doc_id, text in docs:
        index.add(doc_id, analyze(text), layer=0, bucket=0)
    scope = index.scope()
    pool = probe.pool
    ranked = []
    for q, _, _ in probe.questions:
        got = index.match([(t, 1.0) for t in query_terms(q)], scope, k=10)
        ranked.append(np.array([pool.ids.index(d) for d, _ in got], dtype=np.int64))
    ours = figures(pool, probe.questions, probe.cand)
    theirs = figures(pool, probe.questions, ranked)
    if abs(ours[0].sum() - theirs[0].sum()) > 2 or abs(ours[1].mean() - theirs[1].mean()) > 0.001:
        raise SystemExit("the prototype's kept ranking is not TextIndex.match's: fix the prototype")
    return row("TextIndex.match (the engine's index, for reference)", theirs, probe.fold)


def run(probe: Probe) -> None:
    pool = probe.pool
    probe.full("kept ranking (prototype: BM25 x share)", pool.bm25)
    for name, tf in (
        ("tf capped at 1", lambda f: np.minimum(f, 1)),
        ("tf capped at 2", lambda f: np.minimum(f, 2)),
        ("1 + log tf", lambda f: 1 + np.log(f)),
        ("sqrt tf", np.sqrt),
    ):
        probe.full(f"document {name}", lambda qw, tf=tf: pool.bm25(qw, tf=tf))
    for delta in (0.1, 0.5, 1.0):
        probe.full(f"BM25+ δ {delta}", lambda qw, d=delta: pool.bm25(qw, delta=d))
    for power in (0.8, 1.2, 1.5):
        probe.full(f"idf ** {power} in the BM25 sum", lambda qw, p=power: pool.bm25(qw, power=p))
    for name, qws in weight_probes(pool, probe.questions, probe.qws).items():
        probe.full(name, pool.bm25, qws)
    for mu in (50, 200):
        probe.full(
            f"query likelihood, Dirichlet μ {mu}, alone", lambda qw, m=mu: query_likelihood(pool, qw, m)
        )
    flat = {
        f"top {m}, shared by ≥ {rho}": probe.each(
            lambda qw, c, m=m, rho=rho: family_flat(pool, qw, c, m, rho)
        )
        for m, rho in ((3, 1.0), (5, 1.0), (5, 0.8), (10, 0.8))
    }
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for key, feats in flat.items():
        per[key] = probe.rerank(f"family: shared terms flat (w·idf, no tf), {key}", feats, None)
    probe.emit(cross_validated("family: shared terms flat", per, probe.fold))
    spec = {
        f"top {m}, shared by ≥ {rho}": probe.each(lambda qw, c, m=m, rho=rho: specific(pool, qw, c, m, rho))
        for m, rho in ((3, 1.0), (5, 1.0), (5, 0.6))
    }
    probe.grid("+ λ x BM25 of the terms not shared by the top m", spec, (0.1, 0.25, 0.5, 1.0))
    sentences = {
        f"share ** {g}": probe.each(lambda qw, c, g=g: best_part(pool, qw, c, pool.sentences, g))
        for g in (1, 2, 3, 4)
    }
    probe.grid("+ λ x best sentence (。！？；)", sentences, (0.1, 0.25, 0.35, 0.5))
    for width in (30, 50):
        parts = [pool._parts(windows(t, width)) for t in pool.texts]
        feats = {
            f"share ** {g}": probe.each(lambda qw, c, g=g, p=parts: best_part(pool, qw, c, p, g))
            for g in (1, 3)
        }
        probe.grid(f"+ λ x best {width}-character window", feats, (0.1, 0.25, 0.5))
    pairs = list(zip(probe.questions, probe.qws, strict=True))
    for alpha in (0.1, 0.2, 0.5):
        probe.ranked(
            f"x coverage of every question run (1 - α + α x share), α {alpha}",
            [pool.top(segment_coverage(pool, q, qw, alpha)) for (q, _, _), qw in pairs],
        )
    top10 = probe.each(lambda qw, c: c[:10])
    for lam in (-0.5, -0.2, 0.2, 0.5):
        probe.ranked(
            f"score regularised by the similar candidates of the top 10, λ {lam}",
            [
                pool.order(c, regularized(pool, c, s[c], lam))
                for s, c in zip(probe.scores, top10, strict=True)
            ],
        )
    ql = probe.each(lambda qw, c: _minmax(query_likelihood(pool, qw, 200)[c]))
    kept = probe.each(lambda qw, c: _minmax(pool.bm25(qw)[c]))
    for lam in (0.1, 0.3, 0.5):
        fused = [(1 - lam) * a + lam * b for a, b in zip(kept, ql, strict=True)]
        probe.rerank(f"min-max fusion with query likelihood (μ 200), weight {lam}", fused, None)
    combined(probe)


def combined(probe: Probe) -> None:
    """The two best: bigrams holding 的 dropped, then + λ x best sentence (cross-validated)."""
    pool = probe.pool
    qws = [[(t, w) for t, w in qw if not (is_bigram(t) and "的" in t)] for qw in probe.qws]
    other = Probe(pool, probe.questions, qws)
    other.lines = probe.lines
    feats = {
        f"share ** {g}": other.each(lambda qw, c, g=g: best_part(pool, qw, c, pool.sentences, g))
        for g in (2, 3, 4)
    }
    other.grid("的 bigrams dropped + λ x best sentence", feats, (0.25, 0.35, 0.5))


def _minmax(x: np.ndarray) -> np.ndarray:
    return (x - x.min()) / (x.max() - x.min() + 1e-12)


def probe_from_args(doc: str | None, argv: list[str] | None) -> tuple[Probe, list[tuple[str, str]]]:
    """The kept ranking of the CMRC dev questions (``--cmrc PATH``), and the chunks."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--cmrc", type=Path, default=DATA / "cmrc" / "cmrc2018_zh_dev.json")
    args = ap.parse_args(argv)
    docs, questions = load_cmrc(args.cmrc)
    return Probe(Pool(docs), questions), docs


def main(argv: list[str] | None = None) -> int:
    probe, docs = probe_from_args(__doc__, argv)
    reference = check_against_index(probe, docs)
    print(f"CMRC dev: {len(docs)} chunks, {len(probe.questions)} questions; re-ranks over the best {POOL}\n")
    print("\n".join(probe.lines), flush=True)
    probe.emit(reference)
    run(probe)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
