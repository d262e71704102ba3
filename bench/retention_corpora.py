#!/usr/bin/env python
"""False temporary memories on real text, and recall on the s39 Chinese fixture, in one run.

Usage::

    python bench/retention_corpora.py [-v]

Every text is decided as ``remember`` / ``mdcg import`` decide one given no tier and
no temporal kind (:func:`md_cg.temporal.decide_retention`, temporal unset):

* CMRC 2018 dev chunks (``../shared/data/cmrc/cmrc2018_zh_dev.json``, CC BY-SA 4.0):
  Chinese encyclopedia paragraphs, none a one-off note: every temp is false.
* LoCoMo dev turns (``../shared/data/locomo/locomo_dev.json``, CC BY-NC 4.0) as
  ``"<speaker>: <text>"``: a conversation's turns, each one a memory of what was said.
* ``tests/data/retention_zh_s39.jsonl``: 72 Chinese and 10 English agent-memory notes
  labelled temp or long (written for session 39 before the ``term_except`` rules).
* ``tests/data/retention_events_s41.jsonl``: 104 English/Chinese pairs, lasting life events
  and one-off texts opened by the same time words (session 41), decided unset and as
  ``one_off``: right, lasting decided temp, one-off decided long, pairs decided apart.

The data sets are read where they are, never copied (absent: their lines are skipped).
docs/retention.md has the figures; tests/test_retention_zh_s39.py asserts them.
``-v`` prints each temporary text.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = next(
    (p / "shared" / "data" for p in REPO.parents if (p / "shared" / "data").is_dir()),
    REPO.parent / "shared" / "data",
)
CMRC = DATA / "cmrc" / "cmrc2018_zh_dev.json"
LOCOMO = DATA / "locomo" / "locomo_dev.json"
FIXTURE = REPO / "tests" / "data" / "retention_zh_s39.jsonl"
EVENTS = REPO / "tests" / "data" / "retention_events_s41.jsonl"
sys.path.insert(0, str(REPO))

from md_cg.temporal import decide_retention  # noqa: E402


def tier(text: str) -> str:
    """The tier a text given no tier or kind gets."""
    return decide_retention(text=text, temporal="", now=0.0).tier


def cmrc_texts() -> list[tuple[str, str]]:
    """(id, text) of each CMRC chunk."""
    return [(d["id"], d["text"]) for d in json.loads(CMRC.read_text(encoding="utf-8"))["docs"]]


def locomo_texts() -> list[tuple[str, str]]:
    """(conversation:dia_id, "<speaker>: <text>") of each LoCoMo turn."""
    out = []
    for sample in json.loads(LOCOMO.read_text(encoding="utf-8")):
        for key, turns in sample["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                out += [
                    (f"{sample['sample_id']}:{t['dia_id']}", f"{t['speaker']}: {t['text']}") for t in turns
                ]
    return out


def temporary(texts: list[tuple[str, str]]) -> list[str]:
    """The ids of ``texts`` decided temp."""
    return [i for i, text in texts if tier(text) == "temp"]


def fixture_scores(lang: str) -> dict:
    """Recall of temp on the fixture's ``lang`` rows, and the ids it got wrong."""
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r["lang"] == lang]
    got = {r["id"]: tier(r["text"]) for r in rows}
    temp = [r["id"] for r in rows if r["expected_tier"] == "temp"]
    return {
        "recall": (sum(got[i] == "temp" for i in temp), len(temp)),
        "missed": [i for i in temp if got[i] != "temp"],
        "false_temp": [r["id"] for r in rows if r["expected_tier"] == "long" and got[r["id"]] == "temp"],
        "rows": len(rows),
    }


def event_scores(kind: str = "") -> dict:
    """The lasting-event set (session 41) decided with ``kind``: accuracy, lasting texts decided
    temp, one-off texts decided long, and the en/zh pairs decided apart."""
    rows = [json.loads(line) for line in EVENTS.read_text(encoding="utf-8").splitlines() if line.strip()]
    got = {r["id"]: decide_retention(text=r["text"], temporal=kind, now=0.0).tier for r in rows}
    wrong = [r for r in rows if got[r["id"]] != r["expected_tier"]]
    return {
        "right": (len(rows) - len(wrong), len(rows)),
        "false_temp": [r["id"] for r in wrong if r["expected_tier"] == "long"],
        "false_long": [r["id"] for r in wrong if r["expected_tier"] == "temp"],
        "apart": sorted({r["pair"] for r in rows if got[r["pair"] + "e"] != got[r["pair"] + "z"]}),
    }


def main() -> int:
    verbose = "-v" in sys.argv[1:]
    for name, path, load in (("CMRC chunks", CMRC, cmrc_texts), ("LoCoMo turns", LOCOMO, locomo_texts)):
        if not path.is_file():
            print(f"{name}: {path} absent, skipped")
            continue
        texts = load()
        temp = temporary(texts)
        print(f"{name}: {len(temp)} of {len(texts)} temporary")
        if verbose:
            by_id = dict(texts)
            for i in temp:
                print(f"  {i}: {by_id[i][:90]}")
    for lang in ("zh", "en"):
        s = fixture_scores(lang)
        print(
            f"fixture {lang}: temp recall {s['recall'][0]}/{s['recall'][1]}, false temp {s['false_temp']}, "
            f"missed {s['missed']} ({s['rows']} rows)"
        )
    for kind in ("", "one_off"):
        e = event_scores(kind)
        print(
            f"events s41 ({kind or 'unset'}): right {e['right'][0]}/{e['right'][1]}, lasting decided temp "
            f"{len(e['false_temp'])} {e['false_temp']}, one-off decided long {len(e['false_long'])} "
            f"{e['false_long']}, en/zh pairs apart {e['apart']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
