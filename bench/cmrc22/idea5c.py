"""Idea 5, part 3: answer-type cue with the question's unit. A question asking 多少/几 + unit (多少公分,
几个, 多少枚) looks for chunks holding a number followed by that unit (12公分, 2枚, 三个); 多少 + ？ or a
bare number question: any digit; 哪一年/哪年/什么时候/什么时间/何时: a year or date (\\d+年, 年代, \\d+月).
Feature = 1 when the chunk holds the pattern (chunk text needed, or an index-time term such as
"#n枚" per number+unit occurrence: then postings only). Re-rank of the kept top 30 (max-normalised
score + λ x cue), alone and inside the LTR of the best combination."""

import re
import sys

sys.path.insert(1, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # bench/
import contextlib
import io
from pathlib import Path

from cmrc_probes import Pool, Probe, best_part, is_bigram, load_cmrc
from common import *

from md_cg.text import normalize

with contextlib.redirect_stdout(io.StringIO()):
    import idea4 as L

docs, qs = load_cmrc(Path(__import__("quality").DATA, "cmrc", "cmrc2018_zh_dev.json"))
pool = Pool(docs)
pr = Probe(pool, qs)
NUM = "[0-9一二三四五六七八九十百千万亿两零〇几数多余]"
UNIT_Q = re.compile(r"(?:多少|几)([^\s？?，,的是]{1,2})?")
TIME_Q = re.compile("哪一年|哪年|什么时候|什么时间|何时|哪一天|哪个年代")
texts = [normalize(t) for t in pool.texts]


def cue_pattern(q):
    qn = normalize(q)
    if TIME_Q.search(q):
        return re.compile(r"[0-9]+\s*(?:年|月|日)|年代|世纪")
    m = UNIT_Q.search(qn)
    if not m:
        return None
    unit = m.group(1)
    if not unit:
        return re.compile(r"[0-9]")
    alts = [re.escape(unit)] + ([re.escape(unit[0])] if len(unit) > 1 else [])
    return re.compile(NUM + r"+\s*(?:" + "|".join(alts) + ")")


pats = [cue_pattern(q) for q, _, _ in qs]
print("questions with a cue:", sum(p is not None for p in pats))
cue = np.array([[float(bool(p.search(texts[d]))) if p else 0.0 for d in c] for p, c in zip(pats, pr.cand)])
L.F["cue"] = cue
print(HEAD)
for basename, base in (("kept", X("kept")),):
    grid = {"off": evaluate(base)}
    for lam in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0):
        grid[lam] = evaluate(L.pmax(base) + lam * cue)
        grid[f"digit {lam}"] = evaluate(L.pmax(base) + lam * L.F["digit"])
    for k in ("off", 0.1, 0.2, 0.3, 0.5, "digit 0.2", "digit 0.4"):
        print(
            row(
                f"{basename}/max + λ x {'unit cue' if not str(k).startswith('digit') else 'digit cue'} {k}",
                grid[k],
            )
        )
    print(cv(grid, f"{basename} + λ cue (unit or digit)")[0])

# inside the best combination
qde = [[(t, w) for t, w in qw if not (is_bigram(t) and "的" in t)] for qw in pr.qws]
L.kept = np.array([pool.bm25(qw)[c] for qw, c in zip(qde, pr.cand)])
L.F["sent2"] = L.pmax(np.array([best_part(pool, qw, c, pool.sentences, 2) for qw, c in zip(qde, pr.cand)]))
for names in (
    ["cue"],
    ["sent2", "cue"],
    ["sent2", "share_u", "share_b", "cue"],
    ["sent2", "share_u", "share_b", "digit", "cue"],
):
    hit, rr, ch = np.zeros(Q), np.zeros(Q), []
    for i in range(NF):
        tr = i != FOLD
        w, s = L.fit(names, "lin", tr)
        f = evaluate(s)
        hit[~tr], rr[~tr] = f[0][~tr], f[1][~tr]
        ch.append(
            f"f{i} {100 * f[0][~tr].mean():.1f}/{f[1][~tr].mean():.3f} "
            + ",".join(f"{n}={x:g}" for n, x in zip(names, w) if x)
        )
    print(row(f"的 dropped + lin LTR [{', '.join(names)}]: held out", (hit, rr)), " | ".join(ch))
    w, s = L.fit(names, "lin", np.ones(Q, bool))
    print(row("   same, in-sample on all dev", evaluate(s)))
