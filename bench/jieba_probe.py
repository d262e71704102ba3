#!/usr/bin/env python
"""Does jieba word segmentation pay over CJK bigrams on CMRC 2018 dev? (issue 17, the untried candidate).

Usage::

    python bench/jieba_probe.py [--cmrc PATH]

Needs ``jieba`` (PyPI, 0.42.1: its dictionary ships inside the package),
which md-cg does not depend on: ``pip install jieba``. The scorer is the
prototype of ``bench/cmrc_probes.py`` (``Pool``: BM25 k1 0.6, b 0.4 x the
matched share of the query's idf mass to the power 1, the kept ranking of
CJK documents), checked first against ``TextIndex.match``. Each variant
changes only the CJK runs of the analysis: the words outside them (stemmed,
stopwords dropped) are the engine's, and jieba sees one CJK run at a time
(of the ``normalize``d text; for a question, after ``query_terms``'s removal
of the Chinese question words, which cuts the run). A "word" is a jieba token
of two characters or more unless a row says otherwise; a two-character word
is the same term as the bigram it spells (its tf adds up). Variants:

* baseline: bigrams + unigrams (must give 81.95 / 0.8781);
* words replace the bigrams (words + unigrams); jieba's tokens alone;
* words added to bigrams + unigrams (all words; only words of >= 3 characters);
* ``cut_for_search`` words added (all; >= 3 characters);
* the words of a question at weight 0.5 or 2 (and 0: the documents' words
  only), cross-validated over the five article folds of ``bench/quality.py``
  (chosen on four, reported on the fifth), the baseline among the choices;
* every variant again with HMM off (jieba's default is on).

Each row also counts the questions it wins and loses at hit@1 against the
baseline (a paired view: a net +3 can hide 20 changes each way).

Then the cost: wall seconds to analyse the 1,858 chunks with and without
jieba (best of 3 in the same process; jieba's dictionary load apart) and the
postings (distinct terms) and term occurrences per chunk. Data is read in
place, never copied.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import cmrc_probes  # noqa: E402
from cmrc_probes import (  # noqa: E402
    QUESTION_RE,
    Figures,
    Pool,
    Probe,
    Weighted,
    check_against_index,
    cross_validated,
    figures,
    is_bigram,
    row,
)
from quality import DATA, cmrc_fold_of, load_cmrc  # noqa: E402

from md_cg.script import CJK_SPLIT_RE, is_cjk  # noqa: E402
from md_cg.text import analyze, analyze_batch, normalize, query_terms  # noqa: E402

try:
    import jieba
except ImportError:  # pragma: no cover - a bench dependency only
    raise SystemExit("jieba is not installed: pip install jieba") from None

#: (mode, HMM) -> the jieba cut of one CJK run.
Segmenter = Callable[[str], list[str]]


def segmenter(mode: str, hmm: bool) -> Segmenter:
    cut = jieba.cut_for_search if mode == "search" else jieba.cut
    return lambda run: [w for w in cut(run, HMM=hmm) if w.strip()]


def doc_runs(text: str) -> list[str]:
    """The CJK runs of ``text`` as ``analyze`` sees them."""
    return CJK_SPLIT_RE.split(normalize(text))[1::2]


def query_runs(question: str) -> list[str]:
    """The CJK runs of ``question`` as ``query_terms`` sees them (question words cut out)."""
    s = normalize(question)
    if not s.isascii():
        s = QUESTION_RE.sub(" ", s)
    return CJK_SPLIT_RE.split(s)[1::2]


# A variant: (the engine's terms, the jieba tokens of the CJK runs) -> (kept terms, word terms).
Variant = Callable[[list[str], list[str]], tuple[list[str], list[str]]]


def words_of(tokens: list[str], min_len: int) -> list[str]:
    return [w for w in tokens if len(w) >= min_len]


VARIANTS: dict[str, tuple[str, Variant]] = {
    "words replace bigrams (words + unigrams)": (
        "default",
        lambda base, tok: ([t for t in base if not is_bigram(t)], words_of(tok, 2)),
    ),
    "jieba tokens alone (every token, 1 character too; no bigrams, no unigrams)": (
        "default",
        lambda base, tok: ([t for t in base if not is_cjk(t[0])], tok),
    ),
    "words added to bigrams + unigrams (2-character words duplicate a bigram)": (
        "default",
        lambda base, tok: (base, words_of(tok, 2)),
    ),
    "words of >= 3 characters added to bigrams + unigrams": (
        "default",
        lambda base, tok: (base, words_of(tok, 3)),
    ),
    "cut_for_search words added to bigrams + unigrams (2-character ones duplicate a bigram)": (
        "search",
        lambda base, tok: (base, words_of(tok, 2)),
    ),
    "cut_for_search words of >= 3 characters added to bigrams + unigrams": (
        "search",
        lambda base, tok: (base, words_of(tok, 3)),
    ),
}
#: Variants that add words: their query words are also tried at these weights.
ADDING = [k for k in VARIANTS if "added" in k]
WORD_WEIGHTS = (0.0, 0.5, 2.0)


class TermPool(Pool):
    """``Pool`` over given term lists of the chunks; no sentences (no re-rank here)."""

    def __init__(self, docs: list[tuple[str, str]], terms: list[list[str]]) -> None:
        table = dict(zip((t for _, t in docs), terms, strict=True))
        if len(table) != len(docs):  # two chunks of one text must have one analysis
            assert all(table[t] == a for (_, t), a in zip(docs, terms, strict=True))
        with _analysis(table.__getitem__):
            super().__init__(docs)

    @staticmethod
    def _parts(parts: Iterable[str]) -> list[Counter[str]]:
        return []


@contextlib.contextmanager
def _analysis(fn: Callable[[str], list[str]]) -> Iterator[None]:
    """``Pool.__init__`` analyses the chunks with ``fn`` instead of ``analyze``."""
    saved = cmrc_probes.analyze
    cmrc_probes.analyze = fn
    try:
        yield
    finally:
        cmrc_probes.analyze = saved


def query_weights(pool: Pool, kept: list[str], words: list[str], w: float) -> Weighted:
    """Repeats as weights; a word weighs ``w`` (added to the bigram it may spell); absent terms out."""
    acc: Counter[str] = Counter()
    for t in kept:
        acc[t] += 1.0
    for t in words:
        acc[t] += w
    return [(t, x) for t, x in acc.items() if x > 0 and t in pool.post]


def ranked_figures(pool: Pool, questions: list, qws: list[Weighted]) -> Figures:
    return figures(pool, questions, [pool.top(pool.bm25(qw)) for qw in qws])


class Run:
    """The rows of this probe, printed as they come."""

    def __init__(self, docs: list, questions: list) -> None:
        self.docs, self.questions = docs, questions
        self.fold = np.array(cmrc_fold_of(questions))
        self.texts = [t for _, t in docs]
        self.base_docs = [analyze(t) for t in self.texts]
        self.base_queries = [query_terms(q) for q, _, _ in questions]
        self.doc_runs = [doc_runs(t) for t in self.texts]
        self.q_runs = [query_runs(q) for q, _, _ in questions]
        self.tokens: dict[tuple[str, bool], tuple[list[list[str]], list[list[str]]]] = {}
        self.stats: dict[str, tuple[float, float, int, int]] = {}
        self.all: dict[str, Figures] = {}
        self.lines = [
            "| variant | hit@1 | MRR@10 | folds hit@1 | folds MRR@10 | hit@1 vs baseline: won / lost |",
            "|---|---|---|---|---|---|",
        ]

    def emit(self, line: str, fig: Figures | None = None) -> None:
        """A row; with ``fig``, the questions it wins and loses at hit@1 against the baseline."""
        if fig is None:
            line += " |"
        else:
            hit, base = fig[0].astype(bool), self.all["baseline"][0].astype(bool)
            line += f" +{int((hit & ~base).sum())} / -{int((~hit & base).sum())} |"
        self.lines.append(line)
        print(line, flush=True)

    def seg(self, mode: str, hmm: bool) -> tuple[list[list[str]], list[list[str]]]:
        """jieba tokens of every chunk's and every question's CJK runs (computed once)."""
        if (mode, hmm) not in self.tokens:
            cut = segmenter(mode, hmm)
            self.tokens[mode, hmm] = (
                [[w for r in runs for w in cut(r)] for runs in self.doc_runs],
                [[w for r in runs for w in cut(r)] for runs in self.q_runs],
            )
        return self.tokens[mode, hmm]

    def pool_of(self, name: str, doc_terms: list[list[str]]) -> Pool:
        pool = TermPool(self.docs, doc_terms)
        n_terms = [len(c) for c in pool.terms]
        self.stats[name] = (
            statistics.fmean(n_terms),
            float(pool.dl.mean()),
            sum(n_terms),
            len(pool.post),
        )
        return pool

    def variant(self, name: str, mode: str, hmm: bool, fn: Variant, weights: bool) -> Figures:
        d_tok, q_tok = self.seg(mode, hmm)
        docs = []
        for base, tok in zip(self.base_docs, d_tok, strict=True):
            kept, words = fn(base, tok)
            docs.append(kept + words)
        label = f"{name}, HMM {'on' if hmm else 'off'}"
        pool = self.pool_of(label, docs)
        queries = [fn(base, tok) for base, tok in zip(self.base_queries, q_tok, strict=True)]
        fig = ranked_figures(pool, self.questions, [query_weights(pool, k, w, 1.0) for k, w in queries])
        self.emit(row(label, fig, self.fold), fig)
        self.all[label] = fig
        if weights:
            grid = {"baseline": self.all["baseline"], "query words x 1": fig}
            for w in WORD_WEIGHTS:
                qws = [query_weights(pool, k, ws, w) for k, ws in queries]
                grid[f"query words x {w:g}"] = g = ranked_figures(pool, self.questions, qws)
                self.emit(row(f"{label}; query words at weight {w:g}", g, self.fold), g)
            self.emit(cross_validated(f"{label}; query word weight", grid, self.fold))
        return fig


def best_of(n: int, fn: Callable[[], object]) -> float:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def cost(run: Run) -> list[str]:
    """Wall seconds to analyse every chunk (and every question) without and with jieba."""
    texts, qs = run.texts, [q for q, _, _ in run.questions]
    lines = [
        "| analysis | 1,858 chunks, s (best of 3) | 1,596 questions, s (best of 3) |",
        "|---|---|---|",
    ]
    lines.append(
        f"| analyze (the engine's, per text) | {best_of(3, lambda: [analyze(t) for t in texts]):.4f} |"
        f" {best_of(3, lambda: [query_terms(q) for q in qs]):.4f} |"
    )
    lines.append(
        f"| analyze_batch (the engine's load path) | {best_of(3, lambda: analyze_batch(texts)):.4f} | |"
    )
    for mode, hmm in (("default", True), ("default", False), ("search", True), ("search", False)):
        cut = segmenter(mode, hmm)

        def docs(cut: Segmenter = cut) -> None:
            for t in texts:
                _ = analyze(t) + [w for r in doc_runs(t) for w in cut(r) if len(w) >= 2]

        def queries(cut: Segmenter = cut) -> None:
            for q in qs:
                _ = query_terms(q) + [w for r in query_runs(q) for w in cut(r) if len(w) >= 2]

        name = "jieba.cut_for_search" if mode == "search" else "jieba.cut"
        lines.append(
            f"| analyze + {name} (HMM {'on' if hmm else 'off'}) words of the CJK runs |"
            f" {best_of(3, docs):.4f} | {best_of(3, queries):.4f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cmrc", type=Path, default=DATA / "cmrc" / "cmrc2018_zh_dev.json")
    args = ap.parse_args(argv)
    jieba.setLogLevel(logging.WARNING)
    t0 = time.perf_counter()
    jieba.initialize()
    init = time.perf_counter() - t0
    docs, questions = load_cmrc(args.cmrc)
    print(f"jieba {jieba.__version__}, dictionary loaded in {init:.3f} s (once per process)")
    print(f"CMRC dev: {len(docs)} chunks, {len(questions)} questions\n", flush=True)

    run = Run(docs, questions)
    probe = Probe(Pool(docs), questions)
    reference = check_against_index(probe, docs)
    kept = figures(probe.pool, questions, probe.cand)
    del probe
    print("\n".join(run.lines), flush=True)
    run.all["baseline"] = kept
    run.emit(reference)
    run.emit(row("baseline: bigrams + unigrams (Pool, the kept ranking)", kept, run.fold), kept)
    base_pool = run.pool_of("baseline", run.base_docs)
    same = ranked_figures(
        base_pool, questions, [query_weights(base_pool, q, [], 1.0) for q in run.base_queries]
    )
    if not all(np.array_equal(a, b) for a, b in zip(same, kept, strict=True)):
        raise SystemExit("the baseline through TermPool is not Pool's: fix the harness")
    run.emit(row("baseline through this harness (TermPool)", same, run.fold), same)

    for hmm in (True, False):
        for name, (mode, fn) in VARIANTS.items():
            run.variant(name, mode, hmm, fn, weights=name in ADDING)
    run.emit(cross_validated("any variant above (analysis chosen per fold)", run.all, run.fold))

    print("\nPostings per chunk (distinct terms) and term occurrences per chunk:\n")
    print("| analysis | postings per chunk | terms per chunk | postings, all chunks | vocabulary |")
    print("|---|---|---|---|---|")
    for name, (post, occ, total, vocab) in run.stats.items():
        print(f"| {name} | {post:.2f} | {occ:.2f} | {total} | {vocab} |")
    print("\nAnalysis time (wall, this process, jieba's dictionary already loaded):\n")
    print("\n".join(cost(run)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
