"""Gaps the second attack (a2) of session 33 found in that session's fixes: invisible
characters the id rule let through after ASCII letters (``ops\\u200d``, ``ops\\U000e0041``,
``ops\\u3164`` printed as ``ops``), NFC/NFD twin ids printed alike in the messages of
rename, import and migrate, a ``--root`` symlink loop called a dangling symlink and a
dangling symlink the library and ``migrate`` DEST met with a bare "File exists", and a
null in ``context.tags`` taken silently."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_cli_hostile_s33 import error_line  # one-line errors of a refused command
from test_cli_hostile_s33 import invoke as run
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.errors import InvalidArgumentError, InvalidNodeError, NotAStoreError, UnsafeIdError
from md_cg.migrate import migrate
from md_cg.node import invisible_char
from md_cg.sqlite_source import SCHEMA_SQL

NFC, NFD = "Caf\u00e9", "Cafe\u0301"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})


# -- 1. invisible characters that join or style nothing ---------------------------------------

HIDDEN = {
    "ops\u200d": "the invisible format character U+200D (ZERO WIDTH JOINER)",
    "ops\u200c": "the invisible format character U+200C (ZERO WIDTH NON-JOINER)",
    "ops\U000e0041": "the invisible format character U+E0041 (TAG LATIN CAPITAL LETTER A)",
    "ops\U000e007f": "the invisible format character U+E007F (CANCEL TAG)",
    "ops\u034f": "the invisible character U+034F (COMBINING GRAPHEME JOINER)",
    "ops\ufe0f": "the invisible character U+FE0F (VARIATION SELECTOR-16)",
    "ops\u3164": "the invisible character U+3164 (HANGUL FILLER)",
    "ops\u115f": "the invisible character U+115F (HANGUL CHOSEONG FILLER)",
    "ops\u2800": "the invisible character U+2800 (BRAILLE PATTERN BLANK)",
    "ops\u17b5": "the invisible character U+17B5 (KHMER VOWEL INHERENT AA)",
    "ops\uffa0": "the invisible character U+FFA0 (HALFWIDTH HANGUL FILLER)",
    "ops\u180b": "the invisible character U+180B (MONGOLIAN FREE VARIATION SELECTOR ONE)",
}
SHOWN = {  # how the refusal prints the tag or id: never as 'ops'
    "ops\u200d": "'ops\\u200d'",
    "ops\u200c": "'ops\\u200c'",
    "ops\U000e0041": "'ops\\U000e0041'",
    "ops\U000e007f": "'ops\\U000e007f'",
    "ops\u034f": "'ops\\u034f'",
    "ops\ufe0f": "'ops\\ufe0f'",
    "ops\u3164": "'ops\\u3164'",
    "ops\u115f": "'ops\\u115f'",
    "ops\u2800": "'ops\\u2800'",
    "ops\u17b5": "'ops\\u17b5'",
    "ops\uffa0": "'ops\\uffa0'",
    "ops\u180b": "'ops\\u180b'",
}

VISIBLE = [
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian, with a ZWNJ
    "\u0915\u094d\u200d\u0937",  # Hindi, a ZWJ after the virama
    "\U0001f469\u200d\U0001f4bb",  # woman technologist
    "\U0001f469\U0001f3fd\u200d\U0001f4bb",  # with a skin tone
    "\u2764\ufe0f",  # red heart
    "\u2764\ufe0f\u200d\U0001f525",  # heart on fire: a ZWJ after a variation selector
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland
    "1\ufe0f\u20e3",  # keycap one
    "\u845b\U000e0100",  # an ideographic variation sequence
]


@pytest.mark.parametrize("tag", list(HIDDEN))
def test_a_new_tag_with_a_character_that_shows_nothing_is_refused(tmp_path: Path, tag: str) -> None:
    with MdCG(tmp_path / "s") as store:
        with pytest.raises(InvalidNodeError) as caught:
            store.add(Node(id="n", layer="knowledge", body="x", tags=[tag]))
        assert str(caught.value) == (
            f"node 'n': field 'tags' holds the tag {SHOWN[tag]} with {HIDDEN[tag]}, so it would look "
            "like another tag; tags must read as what they are, as ids must"
        )
        assert caught.value.field == "tags"
        assert store.ids() == []


@pytest.mark.parametrize("node_id", list(HIDDEN))
def test_a_new_id_with_a_character_that_shows_nothing_is_refused(tmp_path: Path, node_id: str) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add(Node(id="ops", layer="knowledge", body="x"))
        with pytest.raises(UnsafeIdError) as caught:
            store.add(Node(id=node_id, layer="knowledge", body="y"))
        assert str(caught.value) == (
            f"unsafe node id {SHOWN[node_id]}: it holds {HIDDEN[node_id]}, so it would look like "
            "another id; ids must read as what they are"
        )
        assert store.ids() == ["ops"]


def test_the_cli_refuses_a_zwj_tag_after_ascii(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    assert error_line(runner, "--root", root, "add", "--id", "z", "--tag", "ops\u200d", "x") == (
        "error: node 'z': field 'tags' holds the tag 'ops\\u200d' with the invisible format character "
        "U+200D (ZERO WIDTH JOINER), so it would look like another tag; tags must read as what they "
        "are, as ids must"
    )
    assert not (root / "knowledge").exists() or MdCG(root).ids() == []


def test_text_that_joins_visible_characters_stays_a_valid_id_and_tag(tmp_path: Path) -> None:
    assert [invisible_char(t) for t in VISIBLE] == [None] * len(VISIBLE)
    with MdCG(tmp_path / "s") as store:
        for i, text in enumerate(VISIBLE):
            store.add(Node(id=text, layer="knowledge", body=f"body {i}", tags=[text]))
        assert sorted(store.ids()) == sorted(VISIBLE)
        for text in VISIBLE:
            assert [n.id for n in store.list_nodes(tag=text)] == [text]


def test_joiners_in_the_wrong_place_are_found() -> None:
    assert [
        invisible_char(t)
        for t in [
            "\U0001f469\u200d",  # a joiner at the end
            "\u200d\U0001f469",  # at the start
            "a\u200d\U0001f4bb",  # after an ASCII letter
            "\U0001f469\u200d\u200d\U0001f4bb",  # two
            "\U0001f3f4\U000e0067",  # a flag's tags without the cancel tag
            "\U000e0067\U000e007f",  # tags without the black flag
            "x\ufe0f",  # a variation selector after ASCII
            "\U0001f469\ufe0f\ufe0f",  # two
        ]
    ] == ["\u200d", "\u200d", "\u200d", "\u200d", "\U000e0067", "\U000e0067", "\ufe0f", "\ufe0f"]


def test_a_stored_id_and_tag_with_a_hidden_character_still_open_and_list(tmp_path: Path) -> None:
    root = tmp_path / "s"
    MdCG(root).close()
    (root / "knowledge" / "ops\u200d.md").write_text(
        '---\nid: "ops\\u200D"\nlayer: knowledge\ntags: ["ops\\u3164"]\n---\nold note\n', encoding="utf-8"
    )
    with MdCG(root) as store:
        store.sync()
        assert store.ids() == ["ops\u200d"]
        assert [n.id for n in store.list_nodes(tag="ops\u3164")] == ["ops\u200d"]
        store.update("ops\u200d", body="edited")  # a tag the node held is kept
        assert store.get("ops\u200d").tags == ["ops\u3164"]


# -- 2. NFC/NFD twins escaped wherever two are named -------------------------------------------


def test_rename_to_the_nfd_twin_names_both_escaped(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    run(runner, "--root", root, "add", "--id", NFC, "x")
    assert error_line(runner, "--root", root, "rename", NFC, NFD) == (
        "error: 'Caf\\u00e9' and 'Cafe\\u0301' differ only by case or normalisation: one file on "
        "macOS/Windows; to change only that, rename it to another id first, then to this one"
    )
    # a case twin is told apart by its letters: plain repr, as before
    run(runner, "--root", root, "add", "--id", "Note", "y")
    assert error_line(runner, "--root", root, "rename", "Note", "note") == (
        "error: 'Note' and 'note' differ only by case or normalisation: one file on macOS/Windows; "
        "to change only that, rename it to another id first, then to this one"
    )


def test_import_names_nfd_twins_escaped(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    run(runner, "--root", root, "add", "--id", NFC, "x")
    one = tmp_path / "t.jsonl"
    one.write_text(json.dumps({"id": NFD, "body": "z"}) + "\n", encoding="utf-8")
    result = run(runner, "--root", root, "import", one, code=2)
    assert result.stderr.splitlines() == [
        f"error: {one}: 1 bad record(s); nothing was imported",
        f"  {one}: record 1: id 'Cafe\\u0301' differs from the stored 'Caf\\u00e9' only by letter case "
        "or Unicode normalisation",
    ]
    two = tmp_path / "t2.jsonl"
    two.write_text(json.dumps({"id": NFC, "body": "a"}) + "\n" + json.dumps({"id": NFD, "body": "b"}) + "\n")
    result = run(runner, "--root", tmp_path / "s2", "import", two, code=2)
    assert result.stderr.splitlines() == [
        f"error: {two}: 1 bad record(s); nothing was imported",
        f"  {two}: line 2: id 'Cafe\\u0301' differs only by letter case or Unicode normalisation from "
        "'Caf\\u00e9' (line 1): one file on macOS and Windows; rename one of them",
    ]


def _source(path: Path, ids: list[str]) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_SQL)
    for i, node_id in enumerate(ids):
        conn.execute(
            "INSERT INTO nodes (id, layer, content) VALUES (?, ?, ?)", (node_id, "knowledge", f"b{i}")
        )
    conn.commit()
    conn.close()
    return path


def test_migrate_names_nfd_twins_escaped(tmp_path: Path) -> None:
    report = migrate(_source(tmp_path / "src.sqlite", [NFC, NFD]), tmp_path / "m")
    assert [(r.rowid, r.node_id, r.reason) for r in report.bad_rows] == [
        (
            2,
            NFD,
            "the id 'Cafe\\u0301' differs from 'Caf\\u00e9' (nodes rowid 1) only by letter case or Unicode "
            "normalisation: one file on macOS and Windows",
        )
    ]
    dest = tmp_path / "s"
    with MdCG(dest) as store:
        store.add(Node(id=NFC, layer="knowledge", body="mine"))
    report = migrate(_source(tmp_path / "src2.sqlite", [NFD]), dest)
    assert report.kept == [
        (
            NFD,
            "the store holds 'Caf\\u00e9', which differs from 'Cafe\\u0301' only by letter case or Unicode "
            "normalisation (one file on macOS and Windows); rename one of them",
        )
    ]
    with MdCG(dest) as store:
        assert store.ids() == [NFC] and store.get(NFC).body == "mine"


# -- 3. a --root / store path that is a symlink to nothing --------------------------------------


def test_a_symlink_loop_is_called_a_loop(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    link = tmp_path / "loop1"
    assert error_line(runner, "--root", link, "list") == (
        f"error: {link}: is a symlink to {tmp_path / 'loop2'}, which leads back to it (a symlink loop); "
        "re-point a link of the loop, or point --root / $MDCG_ROOT at an existing store or a new folder"
    )
    with pytest.raises(NotAStoreError) as caught:
        MdCG(link)
    assert str(caught.value) == (
        f"{link}: is a symlink to {tmp_path / 'loop2'}, which leads back to it (a symlink loop); "
        "re-point a link of the loop, or choose an existing store or a new folder"
    )


def test_the_library_and_migrate_name_a_dangling_symlink(runner: CliRunner, tmp_path: Path) -> None:
    link = tmp_path / "dl"
    target = tmp_path / "nothere" / "deeper"
    link.symlink_to(target)
    said = (
        f"{link}: is a symlink to {target}, which does not exist (a dangling symlink); create that "
        "folder, or choose an existing store or a new folder"
    )
    with pytest.raises(NotAStoreError) as caught:
        MdCG(link)
    assert str(caught.value) == said
    with pytest.raises(NotAStoreError) as caught:
        MdCG(link, read_only=True)
    assert str(caught.value) == said
    src = _source(tmp_path / "src.sqlite", ["a"])
    with pytest.raises(NotAStoreError) as caught:
        migrate(src, link)
    assert str(caught.value) == said
    assert error_line(runner, "migrate", src, link, "-q") == f"error: {said}"
    chain = tmp_path / "ch"
    chain.symlink_to(link)
    assert error_line(runner, "--root", chain, "list") == (
        f"error: {chain}: is a symlink to {link}, which leads to {target}, which does not exist (a "
        "dangling symlink); create that folder, or point --root / $MDCG_ROOT at an existing store or "
        "a new folder"
    )
    assert not (tmp_path / "nothere").exists()


# -- 4. context.tags holding null ---------------------------------------------------------------


@pytest.mark.parametrize("tags", [[None], ["domain:x", None]])
def test_a_null_in_context_tags_is_refused(tmp_path: Path, tags: list[Any]) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add(Node(id="a", layer="knowledge", body="python tips", tags=["domain:x"]))
        with pytest.raises(InvalidArgumentError) as caught:
            store.search("python", context={"tags": tags})
        assert str(caught.value) == (
            'context.tags must be a list of tags (strings such as "domain:计算机科学") or one tag, got null'
        )
        assert caught.value.name == "context.tags"


def test_the_cli_refuses_a_null_in_context_tags(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    run(runner, "--root", root, "add", "--id", "a", "alpha note")
    assert error_line(runner, "--root", root, "search", "alpha", "-c", '{"tags": [null]}') == (
        'error: context.tags must be a list of tags (strings such as "domain:计算机科学") or one tag, '
        "got null"
    )
