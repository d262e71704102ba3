"""Session 42: a copy's fate survives a compaction.

Two files hold one id (agent a's ``d`` and a hand copy of it made agent b's); every
handle is a process of its own. Session 41 told each scope's process its own copy's fate
from the ``copies`` a sync line logged (``md_cg.copyfate``), but a compaction folds those
lines into the snapshot and kept none of them: a copy changed, removed or added by hand and
not yet told to its scope's process before a compaction was told to no process opened
after it. The snapshot now keeps them (``md_cg.snapshot.COPIES``); a snapshot without them
(an earlier version's) is read as before.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from test_copies_fresh_s40 import A_FILE, B_FILE, NOTHING, SYNC, _edit, _two_copies
from test_shadow_s40 import _as, _copy_as

from md_cg import snapshot

COMPACT = "out['n'] = s.compact_index().nodes"


def _compact(root: Path) -> None:
    """An unscoped process's compaction: every line folded into the snapshot, no shard left."""
    assert _as(root, "", COMPACT) == {"n": 2}
    assert list((root / ".mdcg" / "log").glob("*")) == []


def _snapshot_copies(root: Path) -> list[object]:
    snap = snapshot.load(str(root))
    assert snap is not None
    copies = snap.copies
    snapshot.close(snap.state)
    return copies


@pytest.mark.parametrize(
    ("who", "rel", "change", "told"),
    [
        ("a", A_FILE, _edit, {**NOTHING, "c": ["d"]}),
        ("a", A_FILE, Path.unlink, {**NOTHING, "d": ["d"]}),
        ("b", B_FILE, _edit, {**NOTHING, "c": ["d"]}),
        ("b", B_FILE, Path.unlink, {**NOTHING, "d": ["d"]}),
    ],
    ids=["a-edited", "a-removed", "b-edited", "b-removed"],
)
@pytest.mark.parametrize("other_first", [False, True], ids=["compact", "other-sync-compact"])
def test_own_copy_fate_told_after_a_compaction(
    tmp_path: Path,
    who: str,
    rel: str,
    change: Callable[[Path], None],
    told: dict[str, list[str]],
    other_first: bool,
) -> None:
    """A copy changed by hand, (the other scope's process syncs: tells it nothing), a
    compaction, then the copy's scope's process: told once, exactly. Before: nothing."""
    root = _two_copies(tmp_path)
    change(root / rel)
    other = "b" if who == "a" else "a"
    if other_first:
        assert _as(root, other, SYNC) == NOTHING
    _compact(root)
    assert [_as(root, w, SYNC) for w in (who, who, other)] == [told, NOTHING, NOTHING]
    if not other_first:  # the snapshot keeps the copies of the last line naming d
        assert sorted(c[1] for c in _snapshot_copies(root)) == [A_FILE, B_FILE]


def test_copy_found_before_a_compaction_told_added_after_it(tmp_path: Path) -> None:
    """b's copy made after every scope synced; a's sync finds it (logged ``found``), a
    compaction, then b's process: told ``added`` once. Before: to no process of b's."""
    root = _two_copies(tmp_path, copy=False)
    _copy_as(root, A_FILE, B_FILE, "b", "d of agent b")
    assert _as(root, "a", SYNC) == NOTHING
    _compact(root)
    assert [_as(root, w, SYNC) for w in ("b", "b", "a", "")] == [
        {**NOTHING, "a": ["d"]},
        NOTHING,
        NOTHING,
        NOTHING,
    ]


def test_fate_told_before_a_compaction_not_told_again(tmp_path: Path) -> None:
    """Both copies edited; a told, a compaction, b told, a compaction, then every scope
    again: each fate told once (the snapshot keeps the copies as the telling line left them)."""
    root = _two_copies(tmp_path)
    _edit(root / A_FILE)
    _edit(root / B_FILE)
    assert _as(root, "a", SYNC) == {**NOTHING, "c": ["d"]}
    _compact(root)
    assert _as(root, "b", SYNC) == {**NOTHING, "c": ["d"]}
    _compact(root)
    assert [_as(root, w, SYNC) for w in ("a", "b", "", "a", "b")] == [NOTHING] * 5


def test_long_lived_process_reloading_the_snapshot(tmp_path: Path) -> None:
    """a's handle opened before the change and the compaction, its sync after them: it
    reloads the compacted snapshot (its shards gone) and is told its copy's change once
    (passes before the change too: the handle's own entry of its copy tells it)."""
    root = _two_copies(tmp_path)
    code = (
        "import subprocess\n"
        "open(sys.argv[1] + '/" + A_FILE + "', 'a').write('edited\\n')\n"
        "subprocess.run([sys.executable, '-c', "
        + repr(_COMPACT_PROC)
        + ", sys.argv[1]], check=True)\n"
        + SYNC
        + "\nr2 = s.sync(); out['again'] = list(r2.changed)"
    )
    assert _as(root, "a", code) == {**NOTHING, "c": ["d"], "again": []}
    assert _as(root, "a", SYNC) == NOTHING


_COMPACT_PROC = "import sys\nfrom md_cg import MdCG\nwith MdCG(sys.argv[1]) as h:\n    h.compact_index()\n"


def test_snapshot_of_an_earlier_version_read_as_before(tmp_path: Path) -> None:
    """The compacted snapshot with its ``copies`` key taken out (what session 41 wrote: its
    checksum made good) is read as before: no fate told from it."""
    root = _two_copies(tmp_path)
    _edit(root / A_FILE)
    _compact(root)
    _strip_copies(root / ".mdcg" / "index.snapshot")
    assert _snapshot_copies_or_none(root) == []
    assert [_as(root, w, SYNC) for w in ("a", "b", "")] == [NOTHING, NOTHING, NOTHING]


def _snapshot_copies_or_none(root: Path) -> list[object]:
    snap = snapshot.load(str(root))
    assert snap is not None  # not refused: read as an earlier version's
    snapshot.close(snap.state)
    return snap.copies


def _strip_copies(path: Path) -> None:
    data = path.read_bytes()
    nl = data.index(b"\n", len(snapshot.MAGIC))
    header = json.loads(data[len(snapshot.MAGIC) : nl])
    start, end = nl + 1, nl + 1 + header["entries_len"]
    body = orjson.loads(data[start:end])
    assert snapshot.COPIES in body
    del body[snapshot.COPIES]
    blob = orjson.dumps(body)
    header.update(entries_len=len(blob), crc32=zlib.crc32(blob))
    path.write_bytes(snapshot.MAGIC + orjson.dumps(header) + b"\n" + blob + data[end:])


def test_a_compaction_keeps_at_most_copies_max_items_each_id_whole() -> None:
    """``copyfate.items`` stops before the id that would pass the limit (its copies whole),
    and a snapshot value longer than ``COPIES_MAX`` is not read (a crafted one would make
    every open check each item)."""
    from md_cg import copyfate

    def copy(rel: str) -> copyfate.LoggedCopy:
        return copyfate.LoggedCopy(rel, 1, 2, 3, copyfate.CopyFields("a", None, None), False)

    logged = {
        i: {
            f"contextual/{i}.md": copy(f"contextual/{i}.md"),
            f"knowledge/c/{i}.md": copy(f"knowledge/c/{i}.md"),
        }
        for i in ("p", "q", "r")
    }
    assert [c[:2] for c in copyfate.items(logged, 5)] == [
        ["p", "contextual/p.md"],
        ["p", "knowledge/c/p.md"],
        ["q", "contextual/q.md"],
        ["q", "knowledge/c/q.md"],
    ]
    assert copyfate.copies_in({copyfate.COPIES: copyfate.items(logged, 6)}) == logged
    assert snapshot._copies([["p"]] * (snapshot.COPIES_MAX + 1)) == []
    assert snapshot._copies({"p": []}) == []
