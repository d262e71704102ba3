"""Unicode look-alikes left alone in session 41, settled in session 42: a ``get`` (and a
write) of an id typed in its other Unicode form (NFD, as macOS writes it) answered "did
you mean" instead of finding the memory; two candidates of one organise run differing only
by NFC/NFD were no ``repeat``; tags differing only by their space character or width;
``--tag a --tag A`` stored both; an existing id with an odd space got no health finding."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG

CAFE_NFC, CAFE_NFD = "caf\u00e9", "cafe\u0301"
BRULEE = "Cr\u00e8me br\u00fbl\u00e9e recipe uses Grand Marnier"
BRULEE_NFD = "Cre\u0300me bru\u0302le\u0301e recipe uses Grand Marnier"


# -- organise: one text in two Unicode forms within one run ---------------------------------------


def test_organize_calls_the_decomposed_candidate_a_repeat_and_apply_saves_it_once(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        candidates = [
            {"layer": "knowledge", "title": "Dessert", "content": BRULEE},
            {"layer": "knowledge", "title": "Dessert", "content": BRULEE_NFD},
            {"layer": "knowledge", "title": BRULEE_NFD, "content": BRULEE_NFD},
            {"layer": "knowledge", "title": BRULEE, "content": BRULEE},
        ]
        dry = store.organize("dryRun", candidates=candidates)
        assert [(i.index, i.verdict, i.repeats) for i in dry.items] == [
            (0, "new", None),
            (1, "repeat", 0),
            (2, "new", None),
            (3, "repeat", 2),
        ]
        decisions = [{"action": "save", "index": i} for i in range(4)]
        rec = store.organize("apply", run_id=dry.run_id, decisions=decisions)
        assert (len(rec.saved_ids), [s.index for s in rec.skipped]) == (2, [1, 3])
        saved = sorted(n.body for n in store.iter_nodes())
        assert saved == [f"# {BRULEE_NFD}\n\n{BRULEE_NFD}\n", f"# Dessert\n\n{BRULEE}\n"]
