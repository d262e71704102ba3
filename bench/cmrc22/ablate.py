"""Ablation of the best combination: which features carry the linear LTR, held out; and the 的 rule
chosen per fold (base = kept or 的-dropped, whichever fits the 4 training folds better)."""

import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
import contextlib
import io
from pathlib import Path

from cmrc_probes import Pool, Probe, best_part, is_bigram, load_cmrc
from common import *

with contextlib.redirect_stdout(io.StringIO()):
    import idea4 as L
docs, qs = load_cmrc(Path(__import__("quality").DATA, "cmrc", "cmrc2018_zh_dev.json"))
pool = Pool(docs)
pr = Probe(pool, qs)
qde = [[(t, w) for t, w in qw if not (is_bigram(t) and "的" in t)] for qw in pr.qws]
kept_de = np.array([pool.bm25(qw)[c] for qw, c in zip(qde, pr.cand)])
sent_de2 = L.pmax(np.array([best_part(pool, qw, c, pool.sentences, 2) for qw, c in zip(qde, pr.cand)]))
BASES = {"kept": (X("kept"), L.F["sent2"]), "de": (kept_de, sent_de2)}


def heldout(names, bases=("de",), mode="lin"):
    hit, rr, ch = np.zeros(Q), np.zeros(Q), []
    for i in range(NF):
        tr = i != FOLD
        best = None
        for b in bases:
            L.kept = BASES[b][0]
            L.F["sent2"] = BASES[b][1]
            w, s = L.fit(names, mode, tr) if names else (np.zeros(0), L.pmax(L.kept))
            c = crit(evaluate(s), tr)
            if best is None or c > best[0]:
                best = (c, b, w, s)
        f = evaluate(best[3])
        hit[~tr], rr[~tr] = f[0][~tr], f[1][~tr]
        ch.append(best[1] + ":" + ",".join(f"{n}={x:g}" for n, x in zip(names, best[2]) if x))
    return (hit, rr), ch


full = ["sent2", "uni_bm25", "share_u", "share_b", "len", "digit"]
print(HEAD)
for names in (
    [],
    ["digit"],
    ["sent2"],
    ["sent2", "digit"],
    ["share_u", "share_b"],
    ["share_u", "share_b", "digit"],
    ["sent2", "share_u", "share_b"],
    ["sent2", "share_u", "share_b", "digit"],
    full,
):
    for bases in (("kept",), ("de",), ("kept", "de")):
        fig, ch = heldout(names, bases)
        print(
            row(f"lin LTR [{', '.join(names) or 'none'}], base {'/'.join(bases)}: held out", fig),
            " | ".join(ch),
        )
