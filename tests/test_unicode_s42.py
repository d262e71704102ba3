"""Unicode look-alikes left alone in session 41, settled in session 42: a ``get`` (and a
write) of an id typed in its other Unicode form (NFD, as macOS writes it) answered "did
you mean" instead of finding the memory; two candidates of one organise run differing only
by NFC/NFD were no ``repeat``; tags differing only by their space character or width;
``--tag a --tag A`` stored both; an existing id with an odd space got no health finding."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Scope
from md_cg.cli import app
from md_cg.errors import InvalidNodeError, NodeNotFoundError
from md_cg.transfer import export_nodes

CAFE_NFC, CAFE_NFD = "caf\u00e9", "cafe\u0301"
BRULEE = "Cr\u00e8me br\u00fbl\u00e9e recipe uses Grand Marnier"
BRULEE_NFD = "Cre\u0300me bru\u0302le\u0301e recipe uses Grand Marnier"
WIDE_PROJECT = "\uff50\uff52\uff4f\uff4a\uff45\uff43\uff54"  # ｐｒｏｊｅｃｔ, from a Chinese IME


# -- organise: one text in two Unicode forms within one run ---------------------------------------


def test_organize_calls_the_decomposed_candidate_a_repeat_and_apply_saves_it_once(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        candidates = [
            {"layer": "knowledge", "title": "Dessert", "content": BRULEE},
            {"layer": "knowledge", "title": "Dessert", "content": BRULEE_NFD},
            {"layer": "knowledge", "title": BRULEE_NFD, "content": BRULEE_NFD},
            {"layer": "knowledge", "title": BRULEE, "content": BRULEE},
        ]
        dry = store.organize("dryRun", candidates=candidates)
        assert [(i.index, i.verdict, i.repeats) for i in dry.items] == [
            (0, "new", None),
            (1, "repeat", 0),
            (2, "repeat", 0),  # in other words: its title only repeats the content (s42-small)
            (3, "repeat", 2),
        ]
        decisions = [{"action": "save", "index": i} for i in range(4)]
        rec = store.organize("apply", run_id=dry.run_id, decisions=decisions)
        assert (len(rec.saved_ids), [s.index for s in rec.skipped]) == (2, [1, 3])
        saved = sorted(n.body for n in store.iter_nodes())
        assert saved == [f"# {BRULEE_NFD}\n\n{BRULEE_NFD}\n", f"# Dessert\n\n{BRULEE}\n"]


# -- a lookup by id in another Unicode form -------------------------------------------------------


@pytest.mark.parametrize(("stored", "typed"), [(CAFE_NFC, CAFE_NFD), (CAFE_NFD, CAFE_NFC)])
def test_reads_and_writes_find_the_memory_under_either_unicode_form(
    tmp_path: Path, stored: str, typed: str
) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add(id=stored, body="coffee", tags=["drinks"])
        store.add(id="tea", body="tea")
        assert (store.get(typed).id, store.entry(typed).id, store.path_of(typed)) == (
            stored,
            stored,
            store.path_of(stored),
        )
        assert store.read_text(typed) == store.read_text(stored)
        assert store.update(typed, body="coffee 2").id == stored
        assert store.edit_text(typed, lambda t: t.replace("coffee 2", "coffee 3")).body == "coffee 3"
        assert store.modify(typed, lambda n: None).id == stored
        assert store.verify(typed, "seen", "confirmed").confidence == 0.55
        store.supersede("tea", typed)
        assert (store.superseded_by("tea"), store.successors("tea")) == (stored, [stored])
        assert (store.archive(typed), store.unarchive(typed)) == ([stored], [stored])
        store.record_access([typed])
        assert store.access_counts([stored]) == {stored: 1}
        assert store.ids() == sorted(["tea", stored])
        assert store.rename(typed, "mocha").id == "mocha"
        store.add(id=stored, body="again")
        assert store.forget(typed, "test").node.id == stored
        store.add(id=stored, body="and again")
        assert store.delete(typed).node.id == stored
        assert store.ids() == ["mocha", "tea"]


def test_a_letter_case_twin_is_still_only_named_and_both_forms_held_are_two_memories(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id=CAFE_NFC, body="composed")
        with pytest.raises(NodeNotFoundError) as caught:
            store.get("CAFE\u0301")
        assert str(caught.value) == (
            "no node with id 'CAFE\u0301' in this store "
            "(did you mean 'caf\u00e9'? ids differ by letter case or Unicode form)"
        )
    # both spellings held (files written by hand, health's twin_id): each finds its own
    folder = root / "knowledge" / "orphan"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "other.md").write_text(f'---\nid: "{CAFE_NFD}"\nlayer: knowledge\n---\ndecomposed\n')
    with MdCG(root) as store:
        store.sync()
        assert (store.get(CAFE_NFC).body, store.get(CAFE_NFD).body) == ("composed", "decomposed")


def test_a_scoped_handle_does_not_find_another_scopes_memory_by_its_other_form(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id=CAFE_NFC, body="b's memory", agent_scope="b")
    with MdCG(root, scope=Scope(agent="a")) as store:
        for typed in (CAFE_NFC, CAFE_NFD):
            with pytest.raises(NodeNotFoundError) as caught:
                store.get(typed)
            assert caught.value.hint == ""
    with MdCG(root, scope=Scope(agent="b")) as store:
        assert store.get(CAFE_NFD).body == "b's memory"


def test_cli_get_and_mcp_get_update_forget_take_the_other_form(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from md_cg.mcp_server import create_server

    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id=CAFE_NFC, body="coffee")
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    done = runner.invoke(app, ["--root", str(root), "get", CAFE_NFD, "--json"])
    assert done.exit_code == 0, done.output
    assert (json.loads(done.stdout)["id"], json.loads(done.stdout)["body"]) == (CAFE_NFC, "coffee")
    server = create_server(root)
    out: dict[str, Any] = {}

    async def run() -> None:
        async with Client(server) as client:
            for name, args in (
                ("get", {"id": CAFE_NFD}),
                ("update", {"id": CAFE_NFD, "body": "coffee 2"}),
                ("edit", {"id": CAFE_NFD, "body": "coffee 3"}),  # after a hand edit: refused
                ("forget", {"id": CAFE_NFD, "reason": "test"}),
            ):
                if name == "edit":
                    path = server.store.path_of(CAFE_NFC)
                    path.write_text(path.read_text().replace("coffee 2", "coffee by hand"))
                    server.store.sync()
                    name, got = "refused", await client.call_tool("update", args)
                else:
                    got = await client.call_tool(name, args)
                text = got.content[0].text
                out[name] = (got.is_error, text if got.is_error else json.loads(text))

    anyio.run(run)
    server.store.close()
    assert [(k, err, reply["id"]) for k, (err, reply) in out.items() if not err] == [
        ("get", False, CAFE_NFC),
        ("update", False, CAFE_NFC),
        ("forget", False, CAFE_NFC),
    ]
    assert out["get"][1]["body"] == "coffee"
    assert out["refused"] == (
        True,
        f"Error executing tool update: memory {CAFE_NFD!r} changed since you read it "
        "(an edit by hand or another agent); nothing was written: get it again and repeat the change",
    )
    with MdCG(root) as store:
        assert store.ids() == []
        assert store.access_counts() == {}


# -- tags: width and space variants are one tag; a tag given twice in another case -----------------


def _hand_written(root: Path, node_id: str, tags: list[str], body: str) -> None:
    folder = root / "knowledge" / "orphan"
    folder.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(json.dumps(t) for t in tags)
    (folder / f"{node_id}.md").write_text(
        f"---\nid: {node_id}\nlayer: knowledge\ntags: [{listed}]\n---\n{body}\n"
    )


def test_tag_filters_fold_width_and_space_variants_everywhere(tmp_path: Path) -> None:
    root = tmp_path / "s"
    MdCG(root).close()
    _hand_written(root, "old", ["kp\u00a01", "project"], "espresso notes old")  # before s42: no refusal
    _hand_written(root, "ideo", ["kp\u30001"], "espresso notes ideographic")
    with MdCG(root) as store:
        store.add(id="wide", tags=[WIDE_PROJECT, "kp 1"], body="espresso notes wide")
        store.add(id="other", tags=["kp 2", "projects"], body="espresso notes other")
        for tag, want in (
            ("kp 1", {"old", "ideo", "wide"}),
            ("kp\u00a01", {"old", "ideo", "wide"}),
            ("\uff4b\uff50\u30001", {"old", "ideo", "wide"}),  # ｋｐ　1
            ("project", {"old", "wide"}),
            (WIDE_PROJECT, {"old", "wide"}),
            ("PROJECT", {"old", "wide"}),
            (["kp 1", WIDE_PROJECT], {"old", "wide"}),
        ):
            assert {e.id for e in store.list_nodes(tag=tag)} == want, tag
            assert {r.id for r in store.search("espresso", tag=tag)[0]} == want, tag
            assert {i.id for i in store.inject("espresso", max_items=10, tag=tag)} == want, tag
            out = io.BytesIO()
            export_nodes(store, out, tag=tag)
            assert {json.loads(line)["id"] for line in out.getvalue().splitlines()} == want, tag
        assert store.list_nodes(tag="kp1") == []  # a space is still a character


def test_mcp_list_takes_a_full_width_tag(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from md_cg.mcp_server import create_server

    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="p1", tags=["project"], body="one")
        store.add(id="p2", tags=["other"], body="two")
    server = create_server(root)
    out: list[Any] = []

    async def run() -> None:
        async with Client(server) as client:
            got = await client.call_tool("list", {"tag": WIDE_PROJECT})
            out.append(json.loads(got.content[0].text))

    anyio.run(run)
    server.store.close()
    assert [i["id"] for i in out[0]["items"]] == ["p1"]


@pytest.mark.parametrize(
    ("space", "named"),
    [("\u00a0", "'kp\\xa01' with the space character U+00A0 (NO-BREAK SPACE)"),
     ("\u3000", "'kp\\u30001' with the space character U+3000 (IDEOGRAPHIC SPACE)")],
)  # fmt: skip
def test_a_new_tag_may_hold_no_space_but_u0020(tmp_path: Path, space: str, named: str) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="m", tags=["ops"], body="x")
        for node, write in (
            ("n", lambda: store.add(id="n", tags=[f"kp{space}1"], body="y")),
            ("m", lambda: store.update("m", tags=["ops", f"kp{space}1"])),
        ):
            with pytest.raises(InvalidNodeError) as caught:
                write()
            assert str(caught.value) == (
                f"node {node!r}: field 'tags' holds the tag {named}, which prints as a space, so it would "
                "look like another tag; write a plain space (U+0020)"
            )
        assert (store.ids(), store.get("m").tags) == (["m"], ["ops"])
    _hand_written(root, "old", [f"kp{space}1"], "written before")
    with MdCG(root) as store:  # a tag the file holds is not new input: kept through an update
        store.sync()
        assert store.update("old", body="updated").tags == [f"kp{space}1"]


def test_update_tag_a_tag_capital_a_is_refused_naming_both(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="m", tags=["ops"], body="x")
    before = next(root.rglob("m.md")).read_bytes()
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})
    for tags in (["a", "A"], [WIDE_PROJECT, "Project"]):
        args = ["--root", str(root), "update", "m", *(x for t in tags for x in ("--tag", t))]
        done = runner.invoke(app, args)
        assert (done.exit_code, done.stdout) == (2, "")
        assert done.stderr.splitlines() == [
            f"error: node 'm': field 'tags' holds the tag {tags[0]!r} twice, also as {tags[1]!r}: a tag "
            "filter takes them for one tag (letter case, width and Unicode form aside); give the tag once"
        ]
    assert next(root.rglob("m.md")).read_bytes() == before
    _hand_written(root, "both", ["a", "A"], "written before")
    with MdCG(root) as store:  # a store that holds both keeps them
        store.sync()
        assert store.update("both", body="updated").tags == ["a", "A"]
        assert store.update("both", tags=["a", "b", "A"]).tags == ["a", "b", "A"]
        with pytest.raises(InvalidNodeError, match="holds the tag 'B' twice, also as 'b'"):
            store.update("both", tags=["a", "B", "A", "b"])


# -- health: an existing id with an odd space -----------------------------------------------------


def test_health_names_an_existing_id_with_an_odd_space_and_the_rename_settles_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    MdCG(root).close()
    folder = root / "knowledge" / "orphan"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kp\u00a01.md").write_text("written before ids were restricted\n")
    (folder / "kp\u30002.md").write_text("another\n")
    (folder / "kp 3.md").write_text("a plain space\n")
    with MdCG(root) as store:
        found = [(f.kind, f.severity, f.node_id, f.path, f.detail) for f in store.health().findings]
        assert found == [
            (
                "odd_space_id",
                "warning",
                "kp\u00a01",
                "knowledge/orphan/kp\u00a01.md",
                "the id 'kp\\u00a01' holds the space character U+00A0 (NO-BREAK SPACE), which prints as a "
                "space, so it looks like another id ('kp 1'); rename it with a plain space (U+0020): "
                "mdcg rename $'kp\\u00a01' 'kp 1'",
            ),
            (
                "odd_space_id",
                "warning",
                "kp\u30002",
                "knowledge/orphan/kp\u30002.md",
                "the id 'kp\\u30002' holds the space character U+3000 (IDEOGRAPHIC SPACE), which prints as a "
                "space, so it looks like another id ('kp 2'); rename it with a plain space (U+0020): "
                "mdcg rename $'kp\\u30002' 'kp 2'",
            ),
        ]
        store.rename("kp\u00a01", "kp 1")
        store.rename("kp\u30002", "kp 2")
        assert store.health().findings == ()
