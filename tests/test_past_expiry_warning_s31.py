"""``add``, ``update`` and ``edit_text`` warn of an expiry already past with one text,
at the caller's line (session 31: ``edit_text`` said "the next sweep() removes it",
the others "the next sweep removes it (`mdcg sweep`, sweep())", from two copies of
the warning)."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

from md_cg import MdCG

PAST = "2020-01-01T00:00:00Z"


def _said(node_id: str) -> str:
    return (
        f"md-cg: node {node_id!r}: expires_at 2020-01-01T00:00:00.000000Z is already past: the memory "
        "is hidden from every read at once and the next sweep removes it (`mdcg sweep`, sweep())"
    )


def test_every_write_warns_alike_at_the_callers_line(tmp_path: Path) -> None:
    here = inspect.currentframe()
    assert here is not None
    with MdCG(tmp_path / "s") as s, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.add(id="a", layer="knowledge", body="# a\n\nx\n", expires_at=PAST)
        line_a = here.f_lineno - 1
        s.add(id="b", layer="knowledge", body="# b\n\nx\n")
        s.update("b", expires_at=PAST)
        line_b = here.f_lineno - 1
        s.add(id="c", layer="knowledge", body="# c\n\nx\n")
        s.edit_text("c", lambda t: t.replace("---\n", f"---\nexpires_at: {PAST}\n", 1))
        line_c = here.f_lineno - 1
    # only md-cg's warnings: a ResourceWarning of an earlier test's unclosed file may
    # be collected in this block when the whole suite runs
    got = [
        (Path(w.filename).name, w.lineno, w.category, str(w.message))
        for w in caught
        if str(w.message).startswith("md-cg: ")
    ]
    me = Path(__file__).name
    assert got == [
        (me, line_a, RuntimeWarning, _said("a")),
        (me, line_b, RuntimeWarning, _said("b")),
        (me, line_c, RuntimeWarning, _said("c")),
    ]
