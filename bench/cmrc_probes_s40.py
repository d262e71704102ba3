#!/usr/bin/env python
"""More lexical probes for the CMRC targets of issue 17 (session 40): what was tried and did not pay.

Usage::

    python bench/cmrc_probes_s40.py [--cmrc PATH]

The prototype scorer of ``bench/cmrc_probes.py`` (the kept ranking, BM25 x
share, checked against ``TextIndex.match`` first), then each idea alone on
CMRC dev with the spread over the five article folds of ``bench/quality.py``
and its setting chosen by cross-validation over those folds (chosen on four,
reported on the fifth; "off" is always a candidate):

* document length as the number of *distinct* terms (pivoted unique
  normalisation), b 0.2-0.75;
* CJK skip-bigrams (the two characters around any one: ``a_c``) added to
  chunks and questions at a weight, a proximity proxy that tolerates one
  changed character (trigrams demand all three);
* the unigrams of rare characters (in at most a share of the chunks) given
  a higher query weight;
* character trigrams in the chunks, asked only when they hold a rare
  character (all trigrams at every weight lost, session 3);
* the unigrams of characters that form many bigram types (a function-like
  character) weighted down;
* the chunk's first sentence as a field (a re-rank of the best 30);
* numbers with their unit (``1998年``, ``3种``) as extra exact terms;
* the question's slot: the answer chunk restates the question with the
  answer where the question word stood, so the two characters before the
  question word followed, within g characters, by the two after it; a
  re-rank of the best 30 by score x (1 + λ) for the chunks that hold it.

It also counts, where the answer is in the best 30 but not first, how often
the chunk ranked first holds more of the question's idf mass than the answer.

Figures are in docs/ranking.md, "Tried and not kept". Data is read in place,
never copied.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import cmrc_probes as cp  # noqa: E402
from cmrc_probes import Pool, Probe, Weighted, figures  # noqa: E402

from md_cg.script import CJK_CHARS, CJK_RUN_RE  # noqa: E402
from md_cg.text import normalize  # noqa: E402
from md_cg.textindex import DEFAULT_B, DEFAULT_K1  # noqa: E402

NUMBER_UNIT = re.compile(f"(\\d+)\\s*([{CJK_CHARS}])")


def _runs(text: str, question: bool) -> list[str]:
    """The CJK runs of ``text`` (questions: question words cut out)."""
    s = normalize(text)
    return CJK_RUN_RE.findall(cp.QUESTION_RE.sub(" ", s) if question else s)


def skip_bigrams(text: str, question: bool = False) -> Counter[str]:
    """``a_c`` for every three CJK characters ``abc`` of a run."""
    return Counter("\x01" + r[i] + r[i + 2] for r in _runs(text, question) for i in range(len(r) - 2))


def trigrams(text: str, question: bool = False) -> Counter[str]:
    """Every three adjacent CJK characters of a run."""
    return Counter("\x03" + r[i : i + 3] for r in _runs(text, question) for i in range(len(r) - 2))


def rare_trigrams(probe: Probe) -> None:
    """Trigrams in chunks, asked only when one of their characters is rare (df <= share of the chunks)."""
    pool = probe.pool
    saved = dict(pool.post)
    add_terms(pool, [trigrams(t) for t in pool.texts])
    asked = [trigrams(q, question=True) for q, _, _ in probe.questions]
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for share in (0.005, 0.02):
        rare = {t for t, (d, _) in saved.items() if len(t) == 1 and len(d) <= share * pool.n}
        only = [Counter({t: f for t, f in a.items() if set(t[1:]) & rare}) for a in asked]
        for beta in (0.3, 0.6, 1.0):
            per[f"df ≤ {share}, β {beta}"] = probe.full(
                f"trigrams holding a character in ≤ {share:.1%} of the chunks at weight {beta}",
                pool.bm25,
                with_extra(pool, probe.qws, only, beta),
            )
    probe.emit(cp.cross_validated("trigrams of rare characters", per, probe.fold))
    pool.post = saved


def number_units(text: str) -> Counter[str]:
    return Counter("\x02" + n + u for n, u in NUMBER_UNIT.findall(normalize(text)))


def add_terms(pool: Pool, extra: list[Counter[str]]) -> None:
    """Extra terms of every chunk into the pool's postings (the chunk lengths are left as they were)."""
    acc: dict[str, list[tuple[int, int]]] = {}
    for i, c in enumerate(extra):
        for t, f in c.items():
            acc.setdefault(t, []).append((i, f))
    for t, v in acc.items():
        pool.post[t] = (np.array([i for i, _ in v]), np.array([f for _, f in v], float))


def with_extra(pool: Pool, qws: list[Weighted], extra: list[Counter[str]], beta: float) -> list[Weighted]:
    return [
        qw + [(t, beta * f) for t, f in e.items() if t in pool.post] for qw, e in zip(qws, extra, strict=True)
    ]


def unique_norm(probe: Probe) -> dict:
    pool = probe.pool
    kept = pool.norm
    distinct = np.array([len(c) for c in pool.terms], float)
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for b in (0.2, 0.4, 0.6, 0.75):
        pool.norm = DEFAULT_K1 * (1 - b + b * distinct / distinct.mean())
        per[f"distinct terms, b {b}"] = probe.full(f"length = distinct terms, b {b}", pool.bm25)
    pool.norm = kept
    assert DEFAULT_B == 0.4
    probe.emit(cp.cross_validated("length = distinct terms", per, probe.fold))
    return per


def extra_terms(probe: Probe, name: str, doc: list[Counter[str]], query: list[Counter[str]]) -> None:
    pool = probe.pool
    saved = dict(pool.post)
    add_terms(pool, doc)
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for beta in (0.25, 0.5, 1.0, 2.0):
        per[f"β {beta}"] = probe.full(
            f"{name} at weight {beta}", pool.bm25, with_extra(pool, probe.qws, query, beta)
        )
    probe.emit(cp.cross_validated(name, per, probe.fold))
    pool.post = saved


def rare_unigrams(probe: Probe) -> None:
    pool = probe.pool
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for share in (0.005, 0.02):
        rare = {t for t, (d, _) in pool.post.items() if len(t) == 1 and len(d) <= share * pool.n}
        for alpha in (1.25, 1.5, 2.0):
            qws = [[(t, w * alpha if t in rare else w) for t, w in qw] for qw in probe.qws]
            per[f"df ≤ {share}, x {alpha}"] = probe.full(
                f"unigrams in ≤ {share:.1%} of the chunks x {alpha}", pool.bm25, qws
            )
    probe.emit(cp.cross_validated("rare-character unigrams weighted up", per, probe.fold))


def productivity(probe: Probe) -> None:
    """Unigrams of characters that form many bigram types (的 2,135, 国 512; median 9.5) weighted down."""
    pool = probe.pool
    types: Counter[str] = Counter()
    for t in pool.post:
        if cp.is_bigram(t):
            types.update(t)
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for ref in (50, 75):
        r = float(np.percentile(list(types.values()), ref))
        for pw in (0.25, 0.5, 1.0):
            qws = [
                [(t, w * min(1.0, (r / types[t]) ** pw) if len(t) == 1 and types[t] else w) for t, w in qw]
                for qw in probe.qws
            ]
            per[f"p{ref}, ^{pw}"] = probe.full(
                f"unigram weight x min(1, (p{ref} productivity / the character's) ^ {pw})", pool.bm25, qws
            )
    probe.emit(cp.cross_validated("unigrams weighted by character productivity", per, probe.fold))


def lead(probe: Probe) -> None:
    """The chunk's first sentence as a field: + λ x its BM25 x share, in the best 30."""
    pool = probe.pool
    first = [pool._parts(cp.SENTENCE_END.split(t))[:1] for t in pool.texts]
    avg = float(np.mean([sum(c.values()) for ps in first for c in ps]))
    feats = [
        np.array([pool.part_score(qw, first[d][0], avg, 1.0) if first[d] else 0.0 for d in c])
        for qw, c in zip(probe.qws, probe.cand, strict=True)
    ]
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for lam in (0.1, 0.25, 0.5):
        per[f"λ {lam}"] = probe.rerank(f"+ λ x the first sentence's BM25 x share, λ {lam}", feats, lam)
    probe.emit(cp.cross_validated("first sentence as a field", per, probe.fold))


def slot(question: str) -> tuple[str, str] | None:
    """The two characters before and after the first question word with both."""
    s = normalize(question)
    for m in cp.QUESTION_RE.finditer(s):
        left, right = s[max(0, m.start() - 2) : m.start()], s[m.end() : m.end() + 2]
        if len(left) == 2 and len(right) == 2 and CJK_RUN_RE.fullmatch(left + right):
            return left, right
    return None


def slot_features(probe: Probe, gap: int) -> list[np.ndarray]:
    """Per question, per candidate: 1 when the chunk fills the question's slot within ``gap``."""
    texts = [normalize(t) for t in probe.pool.texts]
    out = []
    for (q, _, _), c in zip(probe.questions, probe.cand, strict=True):
        sl = slot(q)
        if sl is None:
            out.append(np.zeros(len(c)))
            continue
        pat = re.compile(re.escape(sl[0]) + f".{{1,{gap}}}?" + re.escape(sl[1]))
        out.append(np.array([1.0 if pat.search(texts[d]) else 0.0 for d in c]))
    return out


def slot_fill(probe: Probe) -> None:
    pool = probe.pool
    slots = sum(slot(q) is not None for q, _, _ in probe.questions)
    print(f"questions with a slot: {slots} of {len(probe.questions)}", flush=True)
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for gap in (4, 8, 16):
        feats = slot_features(probe, gap)
        for lam in (0.05, 0.1, 0.2, 0.5):
            ranked = [
                pool.order(c, s[c] * (1 + lam * f))
                for s, c, f in zip(probe.scores, probe.cand, feats, strict=True)
            ]
            per[f"gap {gap}, λ {lam}"] = probe.ranked(
                f"slot filled within {gap} characters, x (1 + {lam})", ranked
            )
    probe.emit(cp.cross_validated("question slot filled", per, probe.fold))


def combined(probe: Probe) -> None:
    """The small gains together: bigrams holding 的 dropped (session 5), number + unit terms,
    the slot re-rank; every subset a setting, chosen by cross-validation."""
    pool = probe.pool
    saved = dict(pool.post)
    add_terms(pool, [number_units(t) for t in pool.texts])
    units = [number_units(q) for q, _, _ in probe.questions]
    per = {"off": figures(pool, probe.questions, probe.cand)}
    for de in (False, True):
        for beta in (0.0, 2.0):
            qws = [[(t, w) for t, w in qw if not (de and cp.is_bigram(t) and "的" in t)] for qw in probe.qws]
            other = Probe(pool, probe.questions, with_extra(pool, qws, units, beta) if beta else qws)
            feats = slot_features(other, 8)
            for lam in (0.0, 0.5):
                ranked = [
                    pool.order(c, s[c] * (1 + lam * f))
                    for s, c, f in zip(other.scores, other.cand, feats, strict=True)
                ]
                name = f"的 {'dropped' if de else 'kept'}, number + unit {beta}, slot λ {lam}"
                per[name] = probe.ranked(f"together: {name}", ranked)
    probe.emit(cp.cross_validated("the three together", per, probe.fold))
    pool.post = saved


def ceiling(probe: Probe) -> None:
    """Where the answer is in the best 30 but a wrong chunk ranks first: which holds more of the
    question's idf mass (the share coordination uses)?"""
    pool = probe.pool
    more = same = less = 0
    for (_, rel, _), qw, cand in zip(probe.questions, probe.qws, probe.cand, strict=True):
        answers = [d for d in cand if pool.ids[d] in rel]
        if not answers or answers[0] == cand[0]:
            continue
        total = sum(w * pool.idf(t) for t, w in qw)
        a, n = (
            sum(w * pool.idf(t) for t, w in qw if t in pool.terms[d]) / total for d in (answers[0], cand[0])
        )
        more, same, less = more + (n > a), same + (n == a), less + (n < a)
    print(
        f"answer in the best {len(probe.cand[0])} but not first: {more + same + less} questions; the chunk"
        f" ranked first holds more of the question's idf mass in {more}, as much in {same}, less in {less}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    probe, docs = cp.probe_from_args(__doc__, argv)
    probe.emit(cp.check_against_index(probe, docs))
    probe.ranked("kept ranking (prototype: BM25 x share)", probe.cand)
    ceiling(probe)
    unique_norm(probe)
    rare_unigrams(probe)
    rare_trigrams(probe)
    productivity(probe)
    lead(probe)
    slot_fill(probe)
    extra_terms(
        probe,
        "CJK skip-bigrams",
        [skip_bigrams(t) for t in probe.pool.texts],
        [skip_bigrams(q, question=True) for q, _, _ in probe.questions],
    )
    extra_terms(
        probe,
        "number + unit terms",
        [number_units(t) for t in probe.pool.texts],
        [number_units(q) for q, _, _ in probe.questions],
    )
    combined(probe)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
