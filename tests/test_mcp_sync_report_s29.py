"""The ``sync`` tool tells what the pick-ups of hand edits took in (review of session 29).

The server picks up hand edits before every tool call (``MdCG.sync_if_changed``), so
by the time an agent called ``sync`` to ask what changed, the pick-up had taken
everything in and the reply said ``{"clean": true, "added": [], "changed": [],
"deleted": []}``: told nothing. Now the reply lists the net change of every pick-up
since the last ``sync`` call (``reports.merged_sync``), and ``clean`` (defined in
docs/mcp.md) is never true together with ``problems``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client

from md_cg import MdCG, Scope
from md_cg.mcp_server import create_server
from md_cg.reports import Moved, SyncReport, merged_sync

NOTHING = {
    "clean": True,
    "problems": False,
    "added": [],
    "changed": [],
    "deleted": [],
    "moved": [],
    "totals": {},
}


def _ok(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _lists(reply: dict[str, Any]) -> dict[str, Any]:
    return {k: reply[k] for k in NOTHING}


def _store(root: Path, ids: str) -> None:
    with MdCG(root) as store:
        for i in ids:
            store.add(id=i, layer="contextual", body=f"# {i} memory\nbody {i}\n")


@pytest.mark.parametrize("scope", [None, Scope()], ids=["unscoped", "scoped"])
def test_sync_lists_the_hand_edits_the_pick_up_before_it_took_in(tmp_path: Path, scope: Scope | None) -> None:
    root = tmp_path / "m"
    _store(root, "abcd")
    server = create_server(root, scope=scope)
    ctx = root / "contextual"

    async def run() -> None:
        async with Client(server) as client:
            assert _lists(_ok(await client.call_tool("sync", {}))) == NOTHING
            (ctx / "hand.md").write_text("# Hand\nwritten by hand\n", encoding="utf-8")
            (ctx / "b.md").write_text((ctx / "b.md").read_text().replace("body b", "body B"))
            (ctx / "c.md").unlink()
            (ctx / "old").mkdir()
            (ctx / "d.md").rename(ctx / "old" / "d.md")
            listed = _ok(await client.call_tool("list", {}))  # its pick-up takes them in
            assert sorted(i["id"] for i in listed["items"]) == ["a", "b", "d", "hand"]
            synced = _ok(await client.call_tool("sync", {}))
            # a scoped handle is not told of deletions (a node gone cannot be seen: scoped_sync)
            gone = ["c"] if scope is None else []
            assert _lists(synced) == {
                "clean": False,
                "problems": False,
                "added": ["hand"],
                "changed": ["b"],
                "deleted": gone,
                "moved": [{"node_id": "d", "old_path": "contextual/d.md", "new_path": "contextual/old/d.md"}],
                "totals": {"added": 1, "changed": 1, "moved": 1} | ({"deleted": 1} if gone else {}),
            }
            # told once: the next sync has nothing new; nor do the tools' own writes
            assert _lists(_ok(await client.call_tool("sync", {}))) == NOTHING
            await client.call_tool("remember", {"body": "via the tool", "id": "tool1", "layer": "contextual"})
            await client.call_tool("update", {"id": "a", "body": "new a"})
            assert _lists(_ok(await client.call_tool("sync", {}))) == NOTHING

    anyio.run(run)
    server.store.close()


def test_sync_lists_the_net_change_of_every_pick_up_since_the_last_sync(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, "abcz")
    server = create_server(root)
    ctx = root / "contextual"

    async def run() -> None:
        async with Client(server) as client:
            await client.call_tool("list", {})
            (ctx / "x.md").write_text("# X\nfirst\n", encoding="utf-8")  # added, then edited: added
            (ctx / "y.md").write_text("# Y\nshort-lived\n", encoding="utf-8")  # added, then gone: nothing
            (ctx / "a.md").unlink()  # deleted, then back: changed
            z = (ctx / "z.md").read_text()
            (ctx / "z.md").write_text(z.replace("body z", "body Z"))  # changed, then deleted: deleted
            (ctx / "old").mkdir()
            (ctx / "b.md").rename(ctx / "old" / "b.md")  # moved twice: from its first path to its last
            await client.call_tool("list", {})
            (ctx / "x.md").write_text("# X\nsecond\n", encoding="utf-8")
            (ctx / "y.md").unlink()
            (ctx / "a.md").write_text("# a back\nbody a\n", encoding="utf-8")
            (ctx / "z.md").unlink()
            (ctx / "new").mkdir()
            (ctx / "old" / "b.md").rename(ctx / "new" / "b.md")
            await client.call_tool("search", {"query": "anything"})
            synced = _ok(await client.call_tool("sync", {}))
            assert _lists(synced) == {
                "clean": False,
                "problems": False,
                "added": ["x"],
                "changed": ["a"],
                "deleted": ["z"],
                "moved": [{"node_id": "b", "old_path": "contextual/b.md", "new_path": "contextual/new/b.md"}],
                "totals": {"added": 1, "changed": 1, "deleted": 1, "moved": 1},
            }

    anyio.run(run)
    server.store.close()


def test_sync_lists_what_the_warm_up_took_in_and_stays_bounded(tmp_path: Path) -> None:
    """Files edited while no server ran are taken in by the warm-up at start; the first
    sync names them, each list capped at 20 with its total."""
    root = tmp_path / "m"
    _store(root, "a")
    server = create_server(root)
    server.store.sync_if_changed()  # the index is read and watched, as before a first call
    for n in range(25):
        (root / "contextual" / f"h{n:02d}.md").write_text(f"# Hand {n}\nby hand\n", encoding="utf-8")
    server.warm()

    async def run() -> None:
        async with Client(server) as client:
            synced = _ok(await client.call_tool("sync", {}))
            assert synced["added"] == [f"h{n:02d}" for n in range(20)]
            assert (synced["clean"], synced["totals"]) == (False, {"added": 25})

    anyio.run(run)
    server.store.close()


def test_clean_is_never_true_with_problems(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root, "a")
    (root / ".mdcg" / "synonyms.json").write_text("{bad", encoding="utf-8")
    server = create_server(root)

    async def run() -> None:
        async with Client(server) as client:
            synced = _ok(await client.call_tool("sync", {}))
            assert (synced["clean"], synced["problems"], [s["path"] for s in synced["settings"]]) == (
                False,
                True,
                [".mdcg/synonyms.json"],
            )

    anyio.run(run)
    server.store.close()


def test_merged_sync_keeps_the_net_change_and_the_later_problems() -> None:
    earlier = SyncReport(
        added=("p", "q"),
        changed=("r", "s"),
        deleted=("t",),
        moved=(Moved("m", "contextual/m.md", "contextual/o/m.md"), Moved("n", "contextual/n.md", "x/n.md")),
        malformed=(("contextual/bad.md", "fixed since"),),
        recovered=1,
        temp_removed=("contextual/.a.tmp",),
    )
    later = SyncReport(
        changed=("p", "r"),
        deleted=("q", "s"),
        added=("t", "u"),
        moved=(Moved("m", "contextual/o/m.md", "contextual/m.md"), Moved("v", "a/v.md", "b/v.md")),
        refused=(("contextual/link.md", "a symlink"),),
        recovered=2,
        temp_removed=("contextual/.b.tmp",),
    )
    assert merged_sync(earlier, later) == SyncReport(
        added=("p", "u"),
        changed=("r", "t"),
        deleted=("s",),
        moved=(Moved("n", "contextual/n.md", "x/n.md"), Moved("v", "a/v.md", "b/v.md")),
        refused=(("contextual/link.md", "a symlink"),),
        recovered=3,
        temp_removed=("contextual/.a.tmp", "contextual/.b.tmp"),
    )
    assert earlier.then(later) == merged_sync(earlier, later)
    assert merged_sync(SyncReport(), SyncReport()).clean
