"""Hostile CLI input of review r3 (session 33): a ``--context`` routing field of the wrong
type, unbounded lists of ``delete``/``forget``/``neighbours``, ``COLUMNS=0``, a ``--root``
that is a dangling symlink, invisible characters in tags, NFC/NFD ids in collision errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import md_cg
from md_cg import Edge, MdCG, Node
from md_cg.cli import app
from md_cg.errors import IdCollisionError, InvalidArgumentError, InvalidNodeError
from md_cg.script import escaped

REPO = Path(md_cg.__file__).resolve().parent.parent  # the code under test, for the subprocesses


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})


def invoke(runner: CliRunner, *args: Any, code: int = 0) -> Any:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    assert "Traceback" not in result.output
    return result


def error_line(runner: CliRunner, *args: Any) -> str:
    """The one line a refused command writes on stderr (exit 2, nothing on stdout)."""
    result = invoke(runner, *args, code=2)
    assert result.stdout == ""
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def mdcg(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point (``main``) in a process of its own, with ``env`` added."""
    full = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "MDCG_ROOT")}
    full["PYTHONPATH"] = str(REPO)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", "from md_cg.cli import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
    )


# -- 1. --context with a routing field of the wrong type ------------------------------------------


TAGS_INT = (
    'error: context.tags must be a list of tags (strings such as "domain:计算机科学") or one tag, got int 5'
)


def test_context_tags_of_the_wrong_type_is_a_one_line_error(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    invoke(runner, "--root", root, "add", "--id", "a", "alpha note")
    assert error_line(runner, "--root", root, "search", "alpha", "--context", '{"tags": 5}') == TAGS_INT
    assert error_line(runner, "--root", root, "reflect", "alpha", "--context", '{"tags": true}') == (
        'error: context.tags must be a list of tags (strings such as "domain:计算机科学") or one tag, '
        "got bool True"
    )
    assert error_line(runner, "--root", root, "search", "alpha", "-c", '{"tags": ["domain:x", 7]}') == (
        'error: context.tags must be a list of tags (strings such as "domain:计算机科学") or one tag, '
        "got int 7"
    )
    assert error_line(runner, "--root", root, "search", "alpha", "-c", '{"domain": 5}') == (
        "error: context.domain must be a string, got int 5"
    )
    assert error_line(runner, "--root", root, "search", "alpha", "-c", '{"condition_space": [1]}') == (
        "error: context.condition_space must be an object, got list [1]"
    )
    assert error_line(
        runner, "--root", root, "search", "alpha", "-c", '{"condition_space": {"observation_position": 3}}'
    ) == ("error: context.condition_space.observation_position must be a string, got int 3")


def test_library_search_names_the_context_field(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add(Node(id="a", layer="knowledge", body="alpha note"))
        with pytest.raises(InvalidArgumentError) as caught:
            store.search("alpha", context={"tags": 5})
        assert str(caught.value) == TAGS_INT.removeprefix("error: ")
        assert caught.value.name == "context.tags"
        assert caught.value.value == 5
        with pytest.raises(InvalidArgumentError) as caught:
            store.search("alpha", context={"tags": {"domain:x": 1}})
        assert caught.value.name == "context.tags"
        # None is "not given"; free keys are the judge's
        results, meta = store.search("alpha", context={"tags": None, "situation": 3})
        assert [r.id for r in results] == ["a"] and meta["route_key"] is None


def test_context_tags_as_one_string_is_one_tag(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(Node(id="kp", layer="knowledge", body="二分查找 binary search", tags=["domain:计算机科学"]))
        _, listed = store.search("binary", context={"tags": ["domain:计算机科学"]})
        _, single = store.search("binary", context={"tags": "domain:计算机科学"})
    assert single["route_key"] == listed["route_key"] == "计算机科学"
    assert single["buckets"] == listed["buckets"] == ["cond_计算机科学_36855ea8"]
    data = json.loads(
        invoke(
            runner, "--root", root, "search", "binary", "-c", '{"tags": "domain:计算机科学"}', "--json"
        ).stdout
    )
    assert data["meta"]["route_key"] == "计算机科学"
    assert [r["id"] for r in data["results"]] == ["kp"]


# -- 2. unbounded lists: delete --force, forget, neighbours ------------------------------------


def hub_store(root: Path, spokes: int, closed: int = 0) -> None:
    """``hub`` linked to by ``spokes`` memories; ``succ`` the only successor of ``closed``
    facts closed (valid_until passed)."""
    past = time.time() - 3600
    with MdCG(root) as store:
        store.add(Node(id="hub", layer="knowledge", body="the hub memory"))
        store.add_many(
            [
                Node(
                    id=f"s{i:03d}",
                    layer="knowledge",
                    body=f"spoke {i}",
                    edges=[Edge(target="hub", type="part_of")],
                )
                for i in range(spokes)
            ]
        )
        if closed:
            store.add_many(
                [
                    Node(id=f"t{i:03d}", layer="knowledge", body=f"old fact {i}", valid_until=past)
                    for i in range(closed)
                ]
            )
            edges = [Edge(target=f"t{i:03d}", type="supersedes") for i in range(closed)]
            store.add(Node(id="succ", layer="knowledge", body="the successor", edges=edges))


def twenty_edges() -> str:
    return ", ".join(f"s{i:03d} (part_of)" for i in range(20))


def test_delete_force_names_twenty_dangling_edges_and_counts_the_rest(
    runner: CliRunner, tmp_path: Path
) -> None:
    root = tmp_path / "s"
    hub_store(root, 25)
    refused = error_line(runner, "--root", root, "delete", "hub")
    assert refused == (
        f"error: node 'hub' has incoming edges from {twenty_edges()} and 5 more; `mdcg delete --force` "
        "leaves them dangling (or remove the edges first)"
    )
    out = invoke(runner, "--root", root, "delete", "hub", "--force").stdout
    assert out.splitlines() == [
        f"hub: deleted ({root / 'knowledge' / 'orphan' / 'hub.md'})",
        f"edges left dangling: {twenty_edges()} and 5 more (`mdcg health --json` lists every one)",
    ]


def test_delete_force_of_a_few_edges_lists_them_all(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    hub_store(root, 20)
    out = invoke(runner, "--root", root, "delete", "hub", "--force", "--json").stdout
    assert len(json.loads(out)["dangling_edges"]) == 20
    hub_store(tmp_path / "t", 20)
    out = invoke(runner, "--root", tmp_path / "t", "delete", "hub", "--force").stdout
    assert out.splitlines()[1] == f"edges left dangling: {twenty_edges()}"


def test_forget_names_twenty_dangling_edges_and_the_tombstone(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    hub_store(root, 21)
    out = invoke(runner, "--root", root, "forget", "hub", "-r", "gone").stdout
    assert out.splitlines() == [
        "hub: forgotten (knowledge); tombstone kept",
        f"edges left dangling: {twenty_edges()} and 1 more (the tombstone in .mdcg/audit/ lists every one)",
    ]
    with MdCG(root) as store:
        assert len(store.tombstones()[-1]["dangling"]) == 21


def test_memories_left_closed_are_capped_at_twenty_lines(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    hub_store(root, 0, closed=23)
    lines = invoke(runner, "--root", root, "forget", "succ", "-r", "gone").stdout.splitlines()
    assert lines == [
        "succ: forgotten (knowledge); tombstone kept",
        *(
            f"t{i:03d}: still closed (it superseded it); if it is true again: mdcg update t{i:03d} --reopen"
            for i in range(20)
        ),
        "... and 3 more still closed (--json lists every one)",
    ]
    hub_store(tmp_path / "t", 0, closed=23)
    data = json.loads(invoke(runner, "--root", tmp_path / "t", "delete", "succ", "--json").stdout)
    assert data["left_closed"] == [f"t{i:03d}" for i in range(23)]


def test_neighbours_pages_as_list_does(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    hub_store(root, 60)
    out = invoke(runner, "--root", root, "neighbours", "hub", "--direction", "in").stdout.splitlines()
    rows = [line for line in out if line.startswith("│ 1")]
    assert [line.split("│")[4].strip() for line in rows] == [f"s{i:03d}" for i in range(50)]
    assert out[-1] == "1-50 of 60; --offset 50 for more"
    out = invoke(runner, "--root", root, "neighbours", "hub", "--direction", "in", "--offset", "50").stdout
    rows = [line for line in out.splitlines() if line.startswith("│ 1")]
    assert [line.split("│")[4].strip() for line in rows] == [f"s{i:03d}" for i in range(50, 60)]
    assert out.splitlines()[-1] == "51-60 of 60"
    out = invoke(runner, "--root", root, "neighbours", "hub", "--direction", "in", "--offset", "60").stdout
    assert out == "hub: 60 neighbours (in, depth 1), none at --offset 60\n"
    data = json.loads(
        invoke(
            runner,
            "--root",
            root,
            "neighbours",
            "hub",
            "--direction",
            "in",
            "-n",
            "2",
            "--offset",
            "3",
            "--json",
        ).stdout
    )
    assert data == {
        "id": "hub",
        "total": 60,
        "offset": 3,
        "neighbours": [
            {
                "id": f"s{i:03d}",
                "type": "part_of",
                "direction": "in",
                "depth": 1,
                "via": "hub",
                "exists": True,
            }
            for i in (3, 4)
        ],
    }
    # a few neighbours: the table alone, as before
    out = invoke(runner, "--root", root, "neighbours", "s001").stdout.splitlines()
    assert out[-1].startswith("└") and sum(line.startswith("│ 1") for line in out) == 1
    result = invoke(runner, "--root", root, "neighbours", "hub", "--limit", "0", code=2)
    assert "Invalid value for '--limit' / '-n'" in result.stderr


# -- 3. COLUMNS=0 ------------------------------------------------------------------------------


def test_columns_zero_is_taken_as_unset(tmp_path: Path) -> None:
    root = tmp_path / "s"
    assert (
        mdcg("--root", root, "add", "--id", "a", "--edge", "nowhere:similar", "deploy notes").returncode == 0
    )
    for args, code in ((["health"], 1), (["list"], 0), (["search", "deploy", "--no-record"], 0)):
        zero = mdcg("--root", root, *args, env={"COLUMNS": "0"})
        unset = mdcg("--root", root, *args)
        assert (zero.returncode, unset.returncode) == (code, code), (zero.stderr, unset.stderr)
        # the search summary ends with its time in ms
        assert zero.stdout.splitlines()[:-2] == unset.stdout.splitlines()[:-2], zero.stdout
        assert len(zero.stdout.splitlines()) == len(unset.stdout.splitlines()) >= 5
    health = mdcg("--root", root, "health", env={"COLUMNS": "0", "LINES": "0"}).stdout
    assert "│ warning  │ dangling_edge │ a    │ similar edge to 'nowhere', which is not in │" in health


# -- 4. --root a dangling symlink --------------------------------------------------------------


def test_root_a_dangling_symlink_is_named_so(runner: CliRunner, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing")
    said = (
        f"error: {link}: is a symlink to {tmp_path / 'missing'}, which does not exist (a dangling symlink); "
        "create that folder, or point --root / $MDCG_ROOT at an existing store or a new folder"
    )
    assert error_line(runner, "--root", link, "list") == said
    assert error_line(runner, "--root", link, "init") == said
    assert error_line(runner, "--root", link, "add", "x") == said
    assert not (tmp_path / "missing").exists()


# -- 5. invisible characters in tags ----------------------------------------------------------


def test_a_new_tag_with_an_invisible_character_is_refused(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    said = (
        "error: node 'a': field 'tags' holds the tag 'ops\\u200b' with the invisible format character "
        "U+200B (ZERO WIDTH SPACE), so it would look like another tag; tags must read as what they are, "
        "as ids must"
    )
    assert (
        error_line(runner, "--root", root, "add", "--id", "a", "--tag", "ops\u200b", "deploy checklist")
        == said
    )
    invoke(runner, "--root", root, "add", "--id", "a", "--tag", "ops", "deploy checklist")
    assert error_line(runner, "--root", root, "update", "a", "--tag", "ops\u200b") == said
    with MdCG(root) as store:
        with pytest.raises(InvalidNodeError) as caught:
            store.add(Node(id="b", layer="knowledge", body="x", tags=["\u202eevil"]))
        assert caught.value.field == "tags"
        assert "U+202E (RIGHT-TO-LEFT OVERRIDE)" in str(caught.value)
        # the joiners Persian and Indic words need are allowed, as in ids
        store.add(Node(id="c", layer="knowledge", body="y", tags=["می\u200cخواهم"]))
        assert store.get("c").tags == ["می\u200cخواهم"]


def test_a_stored_tag_with_an_invisible_character_still_opens_and_is_kept(
    runner: CliRunner, tmp_path: Path
) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:  # add_many carries what it is given, as a file does
        store.add_many(
            [Node(id="a", layer="knowledge", body="deploy checklist", tags=["ops\u200b"])], checked=False
        )
    listed = json.loads(invoke(runner, "--root", root, "list", "--tag", "ops\u200b", "--json").stdout)
    assert [(i["id"], i["tags"]) for i in listed["items"]] == [("a", ["ops\u200b"])]
    invoke(runner, "--root", root, "update", "a", "--importance", "0.3")
    invoke(runner, "--root", root, "update", "a", "--tag", "ops\u200b", "--tag", "more")
    with MdCG(root) as store:
        assert store.get("a").tags == ["ops\u200b", "more"]


# -- 6. ids that differ only in Unicode form, escaped -----------------------------------------


def test_a_collision_of_nfc_and_nfd_ids_prints_them_escaped(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "s"
    invoke(runner, "--root", root, "add", "--id", "Caf\u00e9", "nfc")
    line = error_line(runner, "--root", root, "add", "--id", "Cafe\u0301", "nfd")
    assert line == (
        "error: node id 'Cafe\\u0301' collides with the existing id 'Caf\\u00e9' "
        "(knowledge/orphan/Caf\u00e9.md): "
        "ids that differ only by letter case or Unicode normalisation are the same file on macOS and "
        "Windows; choose another id or change the existing node"
    )
    with MdCG(root) as store, pytest.raises(IdCollisionError) as caught:
        store.add(Node(id="cafe\u0301", layer="knowledge", body="x"))
    # a case twin looks different already: plain repr
    assert "node id 'cafe\u0301' collides with the existing id 'Caf\u00e9'" in str(caught.value)


def test_twin_labels_escape_as_the_script_does() -> None:
    from md_cg.script import twin_labels  # new in session 33 (beside escaped: one writer of the escapes)

    for text in ("Caf\u00e9", "Cafe\u0301", "it's", "a\\b", "\U0001f600x", "plain", "\u202e"):
        nfd = unicodedata.normalize("NFD", text)
        if nfd != text:
            assert twin_labels(text, nfd) == (escaped(text), escaped(nfd))
    assert twin_labels("Foo", "foo") == ("'Foo'", "'foo'")
    assert twin_labels("Caf\u00e9", "Cafe\u0301") == ("'Caf\\u00e9'", "'Cafe\\u0301'")
