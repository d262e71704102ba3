#!/bin/sh
# Session-22 CMRC probes (docs/ranking.md, "Tried and not kept", session 22 rows).
# From the checkout's root: sh bench/cmrc22/run_all.sh  (~12 min, one process at a time).
# feats.py writes $CMRC22_WORK/feats.pkl (default /tmp/cmrc22, ~75 MB); the others read it.
set -e
cd "$(dirname "$0")"
PY=${PYTHON:-python}
$PY feats.py          # ~40 s: checks the prototype = TextIndex.match (81.95 / 0.8781), writes feats.pkl
$PY idea1.py          # DFR / BM25 variants, alone and fused
$PY idea2.py          # separate unigram / bigram coordination
$PY idea3.py          # RRF
$PY idea4.py          # coordinate-ascent LTR (the issue's features)
$PY idea5.py          # covered-unigram discount, burstiness share (full-pool scoring)
$PY idea5b.py         # coordination exponent by question length, soft share
$PY idea5c.py         # answer-type cue with the question's unit
$PY ablate.py         # best combination and its ablation (the headline held-out row)
$PY listnet.py        # listwise linear model, nested CV (~4 min)
$PY bigca.py          # coordinate ascent with 12 features (overfitting check, ~5 min)
