"""Ids Windows reserves for devices (CON, NUL, COM1, ...): never created, still read, reported.

A store is meant to be cloned anywhere; git for Windows cannot check out
``con.md`` or ``aux.txt.md``. New ids (add, add_many, rename, a migrated row)
are refused with an error naming the id; a file already named so (pulled from
elsewhere, written by an earlier version) is read and edited as before, and
``health()`` reports it as ``reserved_id`` until it is renamed.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import node_tree
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.cli import app
from md_cg.errors import UnsafeIdError
from md_cg.migrate import migrate
from md_cg.node import Edge, check_id, check_new_id, windows_device_name
from md_cg.sqlite_source import write_nodes


@pytest.mark.parametrize(
    ("node_id", "device"),
    [
        ("con", "CON"),
        ("CON", "CON"),
        ("Nul", "NUL"),
        ("prn", "PRN"),
        ("aux.txt", "AUX"),
        ("aux.notes.2024", "AUX"),
        ("con .x", "CON"),
        ("com1", "COM1"),
        ("COM0", "COM0"),
        ("lpt9", "LPT9"),
        ("lpt\u00b9", "LPT\u00b9"),
        ("conin$", "CONIN$"),
        ("CONOUT$.log", "CONOUT$"),
        ("conx", None),
        ("con-1", None),
        ("console", None),
        ("com10", None),
        ("x.con", None),
        ("lpt", None),
        ("nul_notes", None),
    ],
)
def test_windows_device_names(node_id: str, device: str | None) -> None:
    assert windows_device_name(node_id) == device
    check_id(node_id)  # still a safe stem: existing files keep being read
    if device is None:
        assert check_new_id(node_id) == node_id
    else:
        with pytest.raises(UnsafeIdError) as info:
            check_new_id(node_id)
        assert str(info.value) == (
            f"unsafe node id {node_id!r}: Windows reserves the name {device} for a device, so a clone "
            "of the store there could not hold its file; ids must be safe file-name stems"
        )
        assert info.value.field == "id" and info.value.value == node_id


def test_new_device_ids_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="keep", layer="knowledge", body="kept")
        s.add(id="other", layer="self", body="other")
        before = node_tree(root)
        for call in (
            lambda: s.add(id="con", layer="knowledge", body="x"),
            lambda: s.add(Node(id="nul.txt", layer="self", body="x"), overwrite=True),
            lambda: s.add_many(
                [Node(id="fine", layer="self", body="x"), Node(id="com1", layer="self", body="y")]
            ),
            lambda: s.rename("keep", "aux"),
            lambda: s.rename("other", "PRN", layer="knowledge"),
        ):
            with pytest.raises(UnsafeIdError, match="Windows reserves the name"):
                call()
        assert s.ids() == ["keep", "other"]
        assert s.health().ok
    assert node_tree(root) == before


def test_a_device_named_file_on_disk_is_read_edited_reported_and_renamed(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        # an edge an older version stored (add refuses a new device-named target since session 34)
        s.add_many([Node(id="linker", layer="self", body="points at prn", edges=[Edge("prn", "similar")])])
    (root / "self" / "prn.md").write_text('---\nid: "prn"\nlayer: "self"\n---\nfrom an older version\n')
    with MdCG(root) as s:
        assert s.sync().added == ("prn",)
        assert s.get("prn").body == "from an older version"
        s.update("prn", body="edited in place")
        assert (root / "self" / "prn.md").read_text().endswith("edited in place\n")
        found = [(f.kind, f.path, f.node_id, f.detail) for f in s.health().findings]
        assert found == [
            (
                "reserved_id",
                "self/prn.md",
                "prn",
                "Windows reserves the name PRN for a device: a clone there cannot hold this file; "
                "rename the node (mdcg rename)",
            )
        ]
        s.rename("prn", "printer-notes")
        assert s.health().ok
        assert s.get("linker").edges == [Edge("printer-notes", "similar")]
    assert not (root / "self" / "prn.md").exists()
    assert (root / "self" / "printer-notes.md").read_text().endswith("edited in place\n")


def test_a_migrated_row_with_a_device_id_is_a_bad_row(tmp_path: Path) -> None:
    src, dest = tmp_path / "src.sqlite", tmp_path / "store"
    conn = sqlite3.connect(src)
    write_nodes(conn, [Node(id="good", layer="self", body="a"), Node(id="lpt1", layer="self", body="b")])
    conn.close()
    report = migrate(src, dest)
    assert [(b.rowid, b.node_id, b.reason) for b in report.bad_rows] == [
        (
            2,
            "lpt1",
            "unsafe node id 'lpt1': Windows reserves the name LPT1 for a device, so a clone of the "
            "store there could not hold its file; ids must be safe file-name stems",
        )
    ]
    assert (report.migrated, report.mismatches) == (1, [])
    with MdCG(dest, read_only=True, create=False) as s:
        assert s.ids() == ["good"]


def test_cli_rename(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="target", layer="knowledge", body="the target")
        s.add(id="src", layer="self", body="links", edges=[Edge("target", "causal")])
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    out = runner.invoke(app, ["--root", str(root), "rename", "target", "renamed"])
    assert out.exit_code == 0, out.output
    assert out.stdout == (
        f"target -> renamed ({root}/knowledge/orphan/target.md -> {root}/knowledge/orphan/renamed.md)\n"
    )
    out = runner.invoke(app, ["--root", str(root), "rename", "renamed", "moved", "--layer", "self", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == {
        "id": "moved",
        "old_id": "renamed",
        "layer": "self",
        "path": f"{root}/self/moved.md",
    }
    for args, message in (
        (["moved", "con"], "error: unsafe node id 'con': Windows reserves the name CON for a device"),
        (["moved", "src"], "error: cannot rename 'moved' to 'src': that id exists at self/src.md"),
        (["ghost", "x"], "error: no node with id 'ghost' in this store"),
    ):
        out = runner.invoke(app, ["--root", str(root), "rename", *args])
        assert out.exit_code == 2 and out.stdout == ""
        assert out.stderr.startswith(message), out.stderr
    with MdCG(root, read_only=True) as s:
        assert s.ids() == ["moved", "src"]
        assert s.get("src").edges == [Edge("moved", "causal")]


@pytest.mark.parametrize("invisible", ["\u200b", "\u202e", "\ufeff", "\u00ad", "\u2066"])
def test_a_new_id_with_an_invisible_format_character_is_refused(tmp_path: Path, invisible: str) -> None:
    with MdCG(tmp_path / "m") as s:
        with pytest.raises(UnsafeIdError, match=f"U\\+{ord(invisible):04X}"):
            s.add(Node(id=f"a{invisible}b", layer="self", body="x"))
        s.add(Node(id="ab", layer="self", body="x"))
        persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # with a zero-width non-joiner
        s.add(Node(id=persian, layer="self", body="ZWNJ in Persian"))
        assert sorted(s.ids()) == sorted(["ab", persian])


def test_an_emoji_flag_with_tag_characters_is_a_valid_new_id(tmp_path: Path) -> None:
    scotland = "flag-\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
    with MdCG(tmp_path / "m") as s:
        s.add(Node(id=scotland, layer="self", body="x"))
        assert s.ids() == [scotland]
