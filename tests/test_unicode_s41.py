"""Unicode look-alikes the attack atk10 of session 41 found: a tag filter that missed a tag
written in another Unicode form (NFD, as macOS writes it) and a write that stored one tag
in both forms (F5); ``add`` storing the same sentence twice, once composed and once
decomposed (F6); ids differing only by their space character (U+00A0, U+2007, U+202F,
U+2009: five ids reading ``kp 1``, F7); ``domain：X`` with the full-width colon of a
Chinese input method sent to ``orphan/`` (F8); an edit's error printing an NFD id as the
NFC one it stands beside (F11)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from test_cli_hostile_s33 import error_line
from typer.testing import CliRunner

from md_cg import MdCG
from md_cg.errors import InvalidNodeError, UnsafeIdError
from md_cg.transfer import export_nodes

NFC_TAG, NFD_TAG = "r\u00e9union", "re\u0301union"
NFC_DOMAIN, NFD_DOMAIN = "domain:Caf\u00e9", "domain:Cafe\u0301"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})


# -- F5: tag filters and tags in two Unicode forms ----------------------------------------------


def _two_forms(root: Path) -> MdCG:
    store = MdCG(root)
    store.add(id="m_nfd", tags=[NFD_DOMAIN, NFD_TAG], body="espresso notes")
    store.add(id="m_nfc", tags=[NFC_DOMAIN, NFC_TAG], body="espresso more notes")
    return store


def test_tag_filters_find_a_tag_in_either_unicode_form(tmp_path: Path) -> None:
    with _two_forms(tmp_path / "s") as store:
        assert store.path_of("m_nfd").parent == store.path_of("m_nfc").parent  # one bucket, as before
        for tag in (NFC_TAG, NFD_TAG, NFC_DOMAIN, NFD_DOMAIN, "R\u00c9UNION", [NFC_TAG, NFD_DOMAIN]):
            assert {n.id for n in store.list_nodes(tag=tag)} == {"m_nfd", "m_nfc"}, tag
            assert {r.id for r in store.search("espresso", tag=tag)[0]} == {"m_nfd", "m_nfc"}, tag
        out = io.BytesIO()
        export_nodes(store, out, tag=NFC_TAG)
        assert [json.loads(line)["id"] for line in out.getvalue().splitlines()] == ["m_nfc", "m_nfd"]
        assert store.list_nodes(tag="reunion") == []  # an accent is a letter: not folded away


def test_a_write_refuses_one_tag_in_two_unicode_forms(tmp_path: Path, runner: CliRunner) -> None:
    root = tmp_path / "s"
    _two_forms(root).close()
    before = (root / "knowledge").rglob("m_nfc.md").__next__().read_bytes()
    said = error_line(runner, "--root", root, "update", "m_nfc", "--tag", NFC_TAG, "--tag", NFD_TAG)
    assert said == (
        "error: node 'm_nfc': field 'tags' holds the tag 'r\\u00e9union' twice, also as 're\\u0301union': "
        "they differ in Unicode form only (composed, decomposed) and print alike; give the tag once"
    )
    assert next((root / "knowledge").rglob("m_nfc.md")).read_bytes() == before
    with MdCG(root) as store:
        with pytest.raises(InvalidNodeError, match="holds the tag 're\\\\u0301union' twice"):
            store.add(id="x", tags=[NFD_TAG, "ops", NFC_TAG], body="x")
        assert "x" not in store
        # letter case apart too since session 42 (tests/test_unicode_s42.py): one tag to a filter
        with pytest.raises(InvalidNodeError, match="a tag filter takes them for one tag"):
            store.add(id="y", tags=[NFD_TAG, "R\u00c9UNION"], body="y")


def test_a_store_holding_both_forms_keeps_them_through_an_update(tmp_path: Path) -> None:
    root = tmp_path / "s"
    MdCG(root).close()
    path = root / "knowledge" / "orphan" / "both.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'---\nid: both\nlayer: knowledge\ntags: ["{NFC_TAG}", "{NFD_TAG}"]\n---\nold text\n')
    with MdCG(root) as store:
        assert [n.id for n in store.list_nodes(tag=NFD_TAG)] == ["both"]
        store.update("both", body="new text")  # what the file held is not new input
        assert store.get("both").tags == [NFC_TAG, NFD_TAG]


# -- F6: the same sentence composed and decomposed ----------------------------------------------


def test_add_unique_takes_the_decomposed_sentence_for_the_same_text(tmp_path: Path) -> None:
    nfc = "Caf\u00e9 cr\u00e8me is the user's favourite drink"
    nfd = "Cafe\u0301 cre\u0300me is the user's favourite drink"
    with MdCG(tmp_path / "s") as store:
        first, created = store.add_unique(body=nfc)
        again, created_again = store.add_unique(body=nfd)
        assert (created, created_again, again.id) == (True, False, first.id)
        assert [n.id for n in store.list_nodes()] == [first.id]
        assert store.identical(nfd) == [first.id]


# -- F7: ids differing only by their space character --------------------------------------------

SPACES = {
    "\u00a0": ("'kp\\xa01'", "U+00A0 (NO-BREAK SPACE)"),
    "\u2007": ("'kp\\u20071'", "U+2007 (FIGURE SPACE)"),
    "\u202f": ("'kp\\u202f1'", "U+202F (NARROW NO-BREAK SPACE)"),
    "\u2009": ("'kp\\u20091'", "U+2009 (THIN SPACE)"),
    "\u3000": ("'kp\\u30001'", "U+3000 (IDEOGRAPHIC SPACE)"),
}


@pytest.mark.parametrize("space", sorted(SPACES))
def test_a_new_id_may_hold_no_space_but_u0020(tmp_path: Path, space: str) -> None:
    shown, named = SPACES[space]
    with MdCG(tmp_path / "s") as store:
        store.add(id="kp 1", body="regular space")
        with pytest.raises(UnsafeIdError) as caught:
            store.add(id=f"kp{space}1", body="look-alike")
        assert str(caught.value) == (
            f"unsafe node id {shown}: it holds the space character {named}, which prints as a space, "
            "so it would look like another id; write a plain space (U+0020)"
        )
        with pytest.raises(UnsafeIdError, match="it holds the space character"):
            store.rename("kp 1", f"kp{space}1")
        assert [n.id for n in store.list_nodes()] == ["kp 1"]


def test_an_existing_file_named_with_a_no_break_space_is_still_read(tmp_path: Path) -> None:
    root = tmp_path / "s"
    MdCG(root).close()
    (root / "knowledge" / "orphan").mkdir(parents=True, exist_ok=True)
    (root / "knowledge" / "orphan" / "kp\u00a01.md").write_text("written before\n")
    with MdCG(root) as store:
        assert store.get("kp\u00a01").body == "written before"
        store.update("kp\u00a01", body="updated")
        assert [n.id for n in store.list_nodes()] == ["kp\u00a01"]


# -- F8: domain：X, the full-width colon --------------------------------------------------------


def test_a_full_width_colon_domain_tag_routes_as_domain(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        for node_id, tag in (
            ("k1", "domain\uff1a\u8ba1\u7b97\u673a"),
            ("k2", "domain:\u8ba1\u7b97\u673a"),
            ("k3", "\uff44\uff4f\uff4d\uff41\uff49\uff4e:\u8ba1\u7b97\u673a"),
        ):
            store.add(id=node_id, tags=[tag], body=f"body {node_id}")
        folders = {store.path_of(i).parent.name for i in ("k1", "k2", "k3")}
        assert folders == {"cond_\u8ba1\u7b97\u673a_2c75efff"}
        store.add(id="k4", tags=["domain\uff1b\u8ba1\u7b97\u673a"], body="a semicolon is no colon")
        assert store.path_of("k4").parent.name == "orphan"


def test_a_full_width_colon_file_in_orphan_is_read_and_called_misplaced(tmp_path: Path) -> None:
    root = tmp_path / "s"
    MdCG(root).close()
    path = root / "knowledge" / "orphan" / "old.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '---\nid: old\nlayer: knowledge\ntags: ["domain\uff1a\u8ba1\u7b97\u673a"]\n---\nwritten before\n'
    )
    with MdCG(root) as store:
        assert store.get("old").body == "written before"
        found = [f for f in store.health().findings if f.kind == "misplaced_file"]
        assert [(f.node_id, f.path) for f in found] == [("old", "knowledge/orphan/old.md")]
        assert "knowledge/cond_\u8ba1\u7b97\u673a_2c75efff/old.md" in found[0].detail


# -- F11: an edit's error names an NFD id escaped -----------------------------------------------


def test_an_edit_to_the_nfd_id_names_both_escaped(tmp_path: Path) -> None:
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    with MdCG(tmp_path / "s") as store:
        store.add(id=nfc, body="coffee note")
        with pytest.raises(InvalidNodeError) as caught:
            store.edit_text(nfc, lambda text: text.replace(f'id: "{nfc}"', f'id: "{nfd}"'))
        assert str(caught.value) == (
            "the id of node 'caf\\u00e9' cannot change in an edit (got 'cafe\\u0301'); rename it instead"
        )
        with pytest.raises(InvalidNodeError) as caught:
            store.edit_text(nfc, lambda text: text.replace(f'id: "{nfc}"', 'id: "tea"'))
        said = str(caught.value)
        assert said == "the id of node 'café' cannot change in an edit (got 'tea'); rename it instead"


def test_an_edge_to_an_id_with_a_no_break_space_is_refused(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        with pytest.raises(UnsafeIdError, match="it holds the space character U\\+00A0 \\(NO-BREAK SPACE\\)"):
            store.add(id="g", body="links", edges=[{"target": "kp\u00a01", "type": "similar"}])
        assert "g" not in store


def test_organize_calls_the_decomposed_sentence_exact(tmp_path: Path) -> None:
    """atk10 F6's second half: organize called the NFC/NFD pair of one sentence `near`, not
    `exact` (its `exact` compares ``dedupe._plain``, which kept the Unicode form)."""
    nfd = "Le cafe\u0301 ferme a\u0300 18h."
    with MdCG(tmp_path / "s") as store:
        store.add(id="cafe", layer="knowledge", body="Le caf\u00e9 ferme \u00e0 18h.")
        candidates = [{"layer": "knowledge", "title": nfd, "content": nfd}]
        report = store.organize("dryRun", candidates=candidates).to_dict()
    (item,) = report["items"]
    assert (item["verdict"], item["match"]["id"], item["match"]["score"]) == ("exact", "cafe", 1.0)
