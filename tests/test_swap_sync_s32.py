"""Session 32 (review r4, medium): files whose bytes a person swapped are told moved.

Two memories n2 and n3; a person swaps the bytes of n2.md and n3.md (n2.md now holds
id n3, n3.md id n2). ``sync()`` settled each id alone: n3's file held n2, so n3 was
dropped, and n2 was put at n3.md -- the report said ``deleted ('n3',)`` and
``moved n2: n2.md -> n3.md``, ``get('n3')`` raised ``NodeNotFoundError`` though its file
was on disk (at n2.md), and the next sync said ``added ('n3',)``: an MCP agent was told
n3 was deleted. Now a file found holding another id settles that id too, with the file
as its candidate when none of its own files holds it any more
(:func:`md_cg.index.resolve_ids`): one sync tells every id of the swap ``moved``, all
readable right after, no deletion told.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import md_cg
from md_cg import MdCG, Scope
from md_cg.reports import Moved, SyncReport

_ENV = {**os.environ, "PYTHONPATH": str(Path(md_cg.__file__).resolve().parent.parent)}
_ENV.pop("MDCG_ROOT", None)
EMPTY = ((), (), (), ())


def _told(report: SyncReport) -> tuple[tuple[object, ...], ...]:
    return (report.added, report.changed, report.deleted, report.moved)


def _rotate(root: Path, rels: list[str]) -> None:
    """Each file of ``rels`` gets the bytes of the next one (the last the first's), its
    mtime moved on a second (a stat scan cannot miss it on a coarse clock)."""
    data = [(root / rel).read_bytes() for rel in rels]
    for rel, new in zip(rels, data[1:] + data[:1], strict=True):
        path = root / rel
        path.write_bytes(new)
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _readable(s: MdCG, ids: list[str]) -> dict[str, tuple[str, str]]:
    """id -> (path, body); the ``get`` first: it follows the log (``entry`` alone does not)."""
    out = {}
    for i in ids:
        body = s.get(i).body.strip()
        out[i] = (s.entry(i).path, body)
    return out


def test_two_files_of_the_same_size_swapped_are_both_moved_and_readable(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="n2", body="alpha note number 2 holds word2")
        s.add(id="n3", body="alpha note number 3 holds word3")
    with MdCG(root) as s:
        sizes = {(root / f"knowledge/orphan/{i}.md").stat().st_size for i in ("n2", "n3")}
        assert len(sizes) == 1
        _rotate(root, ["knowledge/orphan/n2.md", "knowledge/orphan/n3.md"])
        assert _told(s.sync()) == (
            (),
            (),
            (),
            (
                Moved("n2", "knowledge/orphan/n2.md", "knowledge/orphan/n3.md"),
                Moved("n3", "knowledge/orphan/n3.md", "knowledge/orphan/n2.md"),
            ),
        )
        assert _readable(s, ["n2", "n3"]) == {
            "n2": ("knowledge/orphan/n3.md", "alpha note number 2 holds word2"),
            "n3": ("knowledge/orphan/n2.md", "alpha note number 3 holds word3"),
        }
        assert _told(s.sync()) == EMPTY
        assert s.ids() == ["n2", "n3"]
    with MdCG(root) as s:
        assert _readable(s, ["n3"]) == {"n3": ("knowledge/orphan/n2.md", "alpha note number 3 holds word3")}
        assert [f.kind for f in s.health().findings if f.node_id in ("n2", "n3")] == []


def test_a_cycle_of_three_files_is_three_moves(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        for i in "abc":
            s.add(id=i, body=f"body of {i}")
        _rotate(root, [f"knowledge/orphan/{i}.md" for i in "abc"])  # a.md holds b, b.md c, c.md a
        assert _told(s.sync()) == (
            (),
            (),
            (),
            (
                Moved("a", "knowledge/orphan/a.md", "knowledge/orphan/c.md"),
                Moved("b", "knowledge/orphan/b.md", "knowledge/orphan/a.md"),
                Moved("c", "knowledge/orphan/c.md", "knowledge/orphan/b.md"),
            ),
        )
        assert _readable(s, ["a", "b", "c"]) == {
            "a": ("knowledge/orphan/c.md", "body of a"),
            "b": ("knowledge/orphan/a.md", "body of b"),
            "c": ("knowledge/orphan/b.md", "body of c"),
        }
        assert _told(s.sync()) == EMPTY


def test_a_swap_of_files_of_other_sizes_in_other_folders(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="k1", layer="knowledge", body="short")
        s.add(id="s1", layer="self", body="a much longer body than the other one")
        _rotate(root, ["knowledge/orphan/k1.md", "self/s1.md"])
        assert _told(s.sync()) == (
            (),
            (),
            (),
            (
                Moved("k1", "knowledge/orphan/k1.md", "self/s1.md"),
                Moved("s1", "self/s1.md", "knowledge/orphan/k1.md"),
            ),
        )
        assert _readable(s, ["k1", "s1"]) == {
            "k1": ("self/s1.md", "short"),
            "s1": ("knowledge/orphan/k1.md", "a much longer body than the other one"),
        }
        assert _told(s.sync()) == EMPTY


def test_a_swap_with_a_hand_edit_keeps_the_edit(tmp_path: Path) -> None:
    """A file both moved and edited is told ``moved`` (as a hand ``mv`` then edit is), its
    new text read at once."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="n2", body="alpha note number 2 holds word2")
        s.add(id="n3", body="alpha note number 3 holds word3")
        _rotate(root, ["knowledge/orphan/n2.md", "knowledge/orphan/n3.md"])
        edited = root / "knowledge/orphan/n2.md"  # holds n3 now
        edited.write_text(edited.read_text().replace("holds word3", "holds word3 and a zebra"))
        assert _told(s.sync()) == (
            (),
            (),
            (),
            (
                Moved("n2", "knowledge/orphan/n2.md", "knowledge/orphan/n3.md"),
                Moved("n3", "knowledge/orphan/n3.md", "knowledge/orphan/n2.md"),
            ),
        )
        edited_text = "alpha note number 3 holds word3 and a zebra"
        assert _readable(s, ["n3"]) == {"n3": ("knowledge/orphan/n2.md", edited_text)}
        assert s.search("zebra", record=False)[0][0].id == "n3"  # its new text indexed
        assert _told(s.sync()) == EMPTY


def test_a_scoped_handle_is_told_its_moves_and_no_deletion(tmp_path: Path) -> None:
    """Agent a's memories swapped with each other, a shared one with agent b's: a's sync
    tells a's and the shared one moved, never b's, and deletes nothing; a reads them. b's
    move is left to b's sync (session 39: a's sync line took it in as told, and b's sync
    told nothing): a's line takes it in untold (session 40), b reads both, and b's sync
    tells b1 moved, once."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="xa", body="x of agent a", agent_scope="a")
        s.add(id="ya", body="y of agent a, a longer one", agent_scope="a")
        s.add(id="s1", body="shared one")
        s.add(id="b1", body="b one", agent_scope="b")
    a = MdCG(root, scope=Scope(agent="a"))
    b = MdCG(root, scope=Scope(agent="b"))
    try:
        _rotate(root, ["knowledge/orphan/xa.md", "knowledge/orphan/ya.md"])
        _rotate(root, ["knowledge/orphan/s1.md", "knowledge/orphan/b1.md"])
        report = a.sync()
        assert (_told(report), report.withheld) == (
            (
                (),
                (),
                (),
                (
                    Moved("s1", "knowledge/orphan/s1.md", "knowledge/orphan/b1.md"),
                    Moved("xa", "knowledge/orphan/xa.md", "knowledge/orphan/ya.md"),
                    Moved("ya", "knowledge/orphan/ya.md", "knowledge/orphan/xa.md"),
                ),
            ),
            0,
        )
        assert _readable(a, ["xa", "ya", "s1"]) == {
            "xa": ("knowledge/orphan/ya.md", "x of agent a"),
            "ya": ("knowledge/orphan/xa.md", "y of agent a, a longer one"),
            "s1": ("knowledge/orphan/b1.md", "shared one"),
        }
        both = {"b1": ("knowledge/orphan/s1.md", "b one"), "s1": ("knowledge/orphan/b1.md", "shared one")}
        assert _readable(b, ["b1", "s1"]) == both
        moved_b1 = Moved("b1", "knowledge/orphan/b1.md", "knowledge/orphan/s1.md")
        assert _told(b.sync()) == ((), (), (), (moved_b1,))
        assert _readable(b, ["b1", "s1"]) == both
        assert _told(b.sync()) == EMPTY
        assert _told(a.sync()) == EMPTY  # b's line told it
    finally:
        a.close()
        b.close()


def test_the_watch_path_tells_a_swap_moved(tmp_path: Path) -> None:
    """``sync_if_changed`` (the MCP server's, before every tool call) after its watch started."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="w1", body="watch one")
        s.add(id="w2", body="watch two")
        assert s.sync_if_changed(min_interval=0) is None
        _rotate(root, ["knowledge/orphan/w1.md", "knowledge/orphan/w2.md"])
        report = s.sync_if_changed(min_interval=0)
        assert report is not None and _told(report) == (
            (),
            (),
            (),
            (
                Moved("w1", "knowledge/orphan/w1.md", "knowledge/orphan/w2.md"),
                Moved("w2", "knowledge/orphan/w2.md", "knowledge/orphan/w1.md"),
            ),
        )
        assert _readable(s, ["w1", "w2"]) == {
            "w1": ("knowledge/orphan/w2.md", "watch one"),
            "w2": ("knowledge/orphan/w1.md", "watch two"),
        }


def test_another_process_syncs_the_swap_and_this_one_reads_both(tmp_path: Path) -> None:
    """The swap synced by a process of its own; a handle open since before reads both
    through the sync line, and its own sync tells nothing more."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="n2", body="alpha note number 2 holds word2")
        s.add(id="n3", body="alpha note number 3 holds word3")
    with MdCG(root) as s:
        assert s.get("n3").body.strip() == "alpha note number 3 holds word3"
        _rotate(root, ["knowledge/orphan/n2.md", "knowledge/orphan/n3.md"])
        code = (
            "import json, sys\n"
            "from md_cg import MdCG\n"
            "with MdCG(sys.argv[1]) as s:\n"
            "    r = s.sync()\n"
            "    moved = [[m.node_id, m.old_path, m.new_path] for m in r.moved]\n"
            "    print(json.dumps([r.added, r.changed, r.deleted, moved]))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(root)], env=_ENV, check=True, capture_output=True, text=True
        ).stdout
        assert json.loads(out) == [
            [],
            [],
            [],
            [
                ["n2", "knowledge/orphan/n2.md", "knowledge/orphan/n3.md"],
                ["n3", "knowledge/orphan/n3.md", "knowledge/orphan/n2.md"],
            ],
        ]
        assert _readable(s, ["n2", "n3"]) == {
            "n2": ("knowledge/orphan/n3.md", "alpha note number 2 holds word2"),
            "n3": ("knowledge/orphan/n2.md", "alpha note number 3 holds word3"),
        }
        assert _told(s.sync()) == EMPTY


def test_an_id_written_into_a_file_by_hand_is_told_added(tmp_path: Path) -> None:
    """p's file edited to hold id q: p deleted and q added (q was taken in, untold)."""
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(id="p", body="the body of p")
        path = root / "knowledge/orphan/p.md"
        text = path.read_text()
        path.write_text(text.replace('id: "p"', 'id: "q"'))
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        assert _told(s.sync()) == (("q",), (), ("p",), ())
        assert _readable(s, ["q"]) == {"q": ("knowledge/orphan/p.md", "the body of p")}
        assert _told(s.sync()) == EMPTY
