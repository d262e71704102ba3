"""Which recall a memory's file records for the zombie count (``access._recalled_at``):
a forged ``last_access`` alone records none (attack atk8 of session 39, finding 5)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from md_cg.access import _recalled_at

NOW = 1_800_000_000.0
MTIME = 1_700_000_000.0


def _entry(last: float | None, count: int | None) -> SimpleNamespace:
    return SimpleNamespace(last_access=last, access_count=count, mtime_ns=int(MTIME * 1e9))


@pytest.mark.parametrize(
    ("last", "count", "expected"),
    [
        (1_750_000_000, None, 1_750_000_000.0),  # a time in range: itself
        (1_750_000_000, 3, 1_750_000_000.0),
        (None, 7, MTIME),  # a count, no time: the file's mtime
        (0, 7, MTIME),
        (32_503_680_000, 7, MTIME),  # 3000-01-01 with a count
        (-5, None, None),  # atk8: counted as recalled before
        (-5, 0, None),
        (32_503_680_000, None, None),  # 3000-01-01 alone
        (0, 0, None),
        (None, None, None),
    ],
)
def test_a_file_records_a_recall_only_by_a_time_in_range_or_a_positive_count(
    last: float | None, count: int | None, expected: float | None
) -> None:
    assert _recalled_at(_entry(last, count), NOW) == expected
