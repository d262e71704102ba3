"""Recall edges of review r3 (session 31).

4. A valid access event with an extra ``id`` key was taken for a line written before
   events had a mode and left out of the statistics: in neither ``scanned`` (14 of 15
   lines) nor ``malformed``, and its memory counted a zombie.
5. ``mdcg today`` in three time zones on one local date showed three memories and
   recorded three shows of that date: node dates move with the time zone, so the pick
   changed and "already shown today" never matched.
6. ``created_at: 1e30`` in a hand-written file kept the memory out of the zombie count
   for ever (a time after the year 9999 counted as "created less than exempt_days ago").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import md_cg
from md_cg import MdCG, Scope
from md_cg.access import SHOW_LOG
from md_cg.node import Node

NS = 10**9
DAY = 86400


def _events(root: Path, lines: list[object]) -> None:
    folder = root / ".mdcg" / "access"
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    (folder / "99999_crafted.jsonl").write_text(text, encoding="utf-8")


def test_an_event_with_an_extra_id_key_is_counted_and_an_old_line_is_not(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add_many([Node(id=x, body=f"memory {x} body", verification_basis="data") for x in "abcdefg"])
    now = int(time.time() * NS) - 20 * NS
    _events(
        root,
        [
            {"ts": now, "mode": "search", "ids": ["a"]},
            {"ts": now, "mode": "search", "ids": ["g"], "id": "legacy-looking-extra-key"},
            {"ts": now, "mode": "get", "ids": ["f"], "id": 7},
            {"ts": now, "id": "b"},  # written before events had a mode: not an event
            {"ts": now, "mode": "search", "id": "c"},  # a mode and no ids: malformed
            {"ts": now, "ids": ["d"], "id": "d"},  # ids and no mode: malformed
            "garbage not json",
        ],
    )
    with MdCG(root) as s:
        st = s.recall_stats(window_days=30, exempt_days=0).to_dict()
        counts = s.access_counts(["a", "b", "f", "g"])
    cov = st["coverage"]
    assert (cov["scanned"], cov["malformed"], cov["events_in_window"]) == (6, 3, 3)
    assert cov["by_mode"] == {"search": 2, "inject": 0, "get": 1}
    assert {r["id"]: r["count"] for r in st["top_recalled"]} == {"a": 1, "f": 1, "g": 1}
    zombie = st["zombie"]
    assert (zombie["active_count"], zombie["zombie_count"]) == (7, 4)
    assert sorted(x["id"] for x in zombie["sample"]) == ["b", "c", "d", "e"]
    # the access counts read every line's ids (the old line's id too)
    assert counts == {"a": 1, "b": 1, "f": 1, "g": 1}


_PICK = (
    "import json, sys\nfrom datetime import date\nfrom md_cg import MdCG, Scope\n"
    "agent = sys.argv[2] or None\n"
    "with MdCG(sys.argv[1], scope=Scope(agent=agent) if agent else None) as s:\n"
    "    p = s.resurface(date(2026, 12, 6), record=True)\n"
    "print(json.dumps(p.to_dict()))\n"
)


def _pick(root: Path, tz: str, agent: str = "") -> dict[str, object]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(md_cg.__file__).parents[1]), *sys.path])
    env["TZ"] = tz
    out = subprocess.run(
        [sys.executable, "-c", _PICK, str(root), agent], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got: dict[str, object] = json.loads(out.stdout)
    return got


def _midnight_store(root: Path) -> None:
    """400 memories written half an hour after or before midnight UTC around 6 December of
    past years: their local day moves with the time zone."""
    base = datetime(2026, 12, 6, tzinfo=UTC)
    nodes = []
    for i in range(400):
        made = base.replace(year=2026 - 1 - i % 9) + timedelta(days=i % 21 - 10, hours=i % 2 * 23 + 0.5)
        node = Node(id=f"m{i:03d}", body=f"note {i}", verification_basis="data", created_at=made.timestamp())
        nodes.append(node)
    with MdCG(root) as s:
        s.add_many(nodes)


def _shows(root: Path) -> list[dict[str, object]]:
    with MdCG(root, read_only=True) as s:
        return list(s.log(SHOW_LOG).read())


def test_a_day_shows_one_memory_whatever_the_time_zone(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _midnight_store(root)
    picks = [_pick(root, tz) for tz in ("UTC", "Etc/GMT+12", "Etc/GMT-14", "UTC")]
    assert [p["id"] for p in picks] == ["m052"] * 4
    # the date is the node's day in the call's time zone (it moves; the memory does not)
    assert [p["date"] for p in picks] == ["2018-12-06", "2018-12-05", "2018-12-06", "2018-12-06"]
    assert [p["show_count"] for p in picks] == [0, 0, 0, 0]
    assert _shows(root) == [{"id": "m052", "shown_on": "2026-12-06", "tier": 1}]
    # a scoped caller's day is its own: its first show stands for it in every time zone
    bob = [_pick(root, tz, "bob") for tz in ("Etc/GMT+12", "UTC", "Etc/GMT-14")]
    assert [p["id"] for p in bob] == ["m116"] * 3
    assert _shows(root) == [
        {"id": "m052", "shown_on": "2026-12-06", "tier": 1},
        {"id": "m116", "shown_on": "2026-12-06", "tier": 1, "agent": "bob"},
    ]


def test_a_day_whose_shown_memory_is_forgotten_shows_and_records_another(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _midnight_store(root)
    assert _pick(root, "UTC")["id"] == "m052"
    with MdCG(root) as s:
        s.forget("m052", "test: the memory shown today is forgotten")
    second, again = _pick(root, "UTC")["id"], _pick(root, "Etc/GMT+12")["id"]
    assert second == again != "m052"
    assert [r["id"] for r in _shows(root)] == ["m052", second]


def _hand_file(root: Path, node_id: str, created_at: str, age_days: float) -> None:
    path = root / "knowledge" / f"{node_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'---\nid: "{node_id}"\nlayer: "knowledge"\nverification_basis: "data"\n'
        f"created_at: {created_at}\n---\nCamping memory {node_id} at the lake.\n",
        encoding="utf-8",
    )
    then = time.time() - age_days * DAY
    os.utime(path, (then, then))


def test_a_created_at_after_the_year_9999_does_not_exempt_a_memory_for_ever(tmp_path: Path) -> None:
    root = tmp_path / "m"
    MdCG(root).close()
    _hand_file(root, "far_old", "1.0e+30", 30)  # a file of 30 days: its age
    _hand_file(root, "far_new", "1.0e+30", 1)  # a file of a day: too new to judge
    _hand_file(root, "ms_old", "1700000000123", 30)  # milliseconds for seconds: year 55,800
    _hand_file(root, "before_1", "-1.0e+30", 1)  # before the year 1: as old as its file
    _hand_file(root, "dated", "2020-01-01T00:00:00Z", 1)  # a real time wins over the file's
    with MdCG(root) as s:
        assert s.sync().malformed == ()
        st = s.recall_stats(exempt_days=7).to_dict()
        found = {r.id for r in s.search("camping lake", record=False)[0]}
        scoped = MdCG(root, scope=Scope(agent="x")).recall_stats(exempt_days=7).to_dict()
    zombie = st["zombie"]
    assert (zombie["active_count"], zombie["exempt_count"], zombie["zombie_count"]) == (5, 2, 3)
    assert sorted(x["id"] for x in zombie["sample"]) == ["dated", "far_old", "ms_old"]
    assert sorted(x["id"] for x in scoped["zombie"]["sample"]) == ["dated", "far_old", "ms_old"]
    assert found == {"far_old", "far_new", "ms_old", "before_1", "dated"}
