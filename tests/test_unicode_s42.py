"""Unicode look-alikes left alone in session 41, settled in session 42: a ``get`` (and a
write) of an id typed in its other Unicode form (NFD, as macOS writes it) answered "did
you mean" instead of finding the memory; two candidates of one organise run differing only
by NFC/NFD were no ``repeat``; tags differing only by their space character or width;
``--tag a --tag A`` stored both; an existing id with an odd space got no health finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Scope
from md_cg.cli import app
from md_cg.errors import NodeNotFoundError

CAFE_NFC, CAFE_NFD = "caf\u00e9", "cafe\u0301"
BRULEE = "Cr\u00e8me br\u00fbl\u00e9e recipe uses Grand Marnier"
BRULEE_NFD = "Cre\u0300me bru\u0302le\u0301e recipe uses Grand Marnier"


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
            (2, "new", None),
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
