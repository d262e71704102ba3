"""A ``created_at`` later than now exempts no memory from the zombie count (session 31,
review r4: ``2999-01-01`` or ``9999-12-31`` in a hand-written file kept it "too new to
judge" until that date; only times past the year 9999 were taken as the file's)."""

from __future__ import annotations

from pathlib import Path

from test_recall_edges_s31 import _hand_file

from md_cg import MdCG


def test_a_future_created_at_counts_as_the_files_age(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    _hand_file(root, "y2999_old", "2999-01-01T00:00:00Z", 30)  # a file of 30 days: its age
    _hand_file(root, "y9999_old", "9999-12-31T23:59:59Z", 30)
    _hand_file(root, "y2999_new", "2999-01-01T00:00:00Z", 1)  # a file of a day: too new
    _hand_file(root, "past", "2020-01-01T00:00:00Z", 1)  # a real past time wins over the file's
    with MdCG(root) as s:
        assert s.sync().malformed == ()
        zombie = s.recall_stats(exempt_days=7).to_dict()["zombie"]
    assert (zombie["active_count"], zombie["exempt_count"], zombie["zombie_count"]) == (4, 1, 3)
    assert sorted(x["id"] for x in zombie["sample"]) == ["past", "y2999_old", "y9999_old"]
