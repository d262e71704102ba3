"""The ``mdcg`` command line: every command on a tmp store, --json shapes, one-line errors, docs."""

from __future__ import annotations

import functools
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import BINARY_SEARCH, build_small_store
from rich.cells import cell_len
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.cli import COMMANDS, app
from md_cg.merge import attribute_lines
from md_cg.node import EDGE_TYPES
from md_cg.render import iso
from md_cg.sample import bundled_sample_path
from md_cg.sqlite_source import write_nodes

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "cli.md"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "120"})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A small store: a judged knowledge node with an edge, its target, an anchor, a rejected note."""
    return build_small_store(tmp_path / "memory")


def run(runner: CliRunner, *args: Any, input: str | None = None, code: int = 0) -> Any:
    result = runner.invoke(app, [str(a) for a in args], input=input)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result


def run_json(runner: CliRunner, *args: Any, input: str | None = None, code: int = 0) -> Any:
    return json.loads(run(runner, *args, "--json", input=input, code=code).stdout)


def one_line_error(runner: CliRunner, *args: Any, code: int = 2) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert isinstance(result.exception, SystemExit)
    return lines[0]


# -- the command set, help and documentation ------------------------------------------------


def test_the_commands_exist_have_help_and_are_documented(runner: CliRunner) -> None:
    group = typer.main.get_command(app)
    names = list(group.commands)  # type: ignore[attr-defined]
    assert sorted(names) == sorted(COMMANDS)
    assert set(COMMANDS) == {
        "init", "add", "get", "show", "list", "update", "edit", "rename", "delete", "forget", "keep",
        "archive", "unarchive", "supersede", "sweep", "organize", "stats", "today", "inject", "search",
        "neighbours", "verify", "reflect", "sync", "health", "census", "migrate", "import", "export",
        "rebuild", "compact", "bench", "demo", "mcp",
    }  # fmt: skip
    docs = DOCS.read_text(encoding="utf-8")
    top = run(runner, "--help").stdout
    for name in names:
        result = run(runner, name, "--help")
        assert "Usage:" in result.stdout and name in result.stdout
        assert name in top
        assert re.search(rf"^### `mdcg {name}`$", docs, re.MULTILINE), (
            f"docs/cli.md: no section `mdcg {name}`"
        )
        assert re.search(rf"^\| `mdcg {name}` \|", docs, re.MULTILINE), f"docs/cli.md: no row `mdcg {name}`"
        # flags are plain flags: `--json`, never `--json <bool>`
        assert "<bool>" not in result.stdout
        if "--json" in result.stdout:
            assert re.search(r"^  --json +Print machine-readable JSON\.$", result.stdout, re.MULTILINE)


def test_docs_name_only_commands_that_exist() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    documented = set(re.findall(r"^#+ `mdcg (\w+)", docs, re.MULTILINE))
    assert documented == set(COMMANDS)


# -- init / add / get -------------------------------------------------------------------------


def test_init_creates_the_folder_and_gitattributes_idempotently(runner: CliRunner, tmp_path: Path) -> None:
    target = tmp_path / "fresh"
    out = run(runner, "init", "--root", target).stdout
    lines = out.splitlines()
    assert lines[0] == f"store ready at {target} (0 nodes)"
    assert (
        lines[1]
        == f"{target / '.gitattributes'} sends node files to the md-cg merge driver. Commit it, then enable"
    )
    assert lines[3] == f"  git -C {target} config merge.mdcg.name 'md-cg node files'"
    assert (
        lines[4]
        == f"  git -C {target} config merge.mdcg.driver '{sys.executable} -m md_cg.merge %O %A %B %P'"
    )
    assert {p.name for p in target.iterdir()} >= {
        "knowledge",
        "rejected",
        ".mdcg",
        ".gitignore",
        ".gitattributes",
    }
    attributes = (target / ".gitattributes").read_text(encoding="utf-8")
    assert all(line in attributes.splitlines() for line in attribute_lines())
    again = run_json(runner, "init", "--root", target)
    assert (again["root"], again["nodes"]) == (str(target), 0) and again["merge_driver"] == "\n".join(
        lines[1:]
    ) + "\n"
    assert (target / ".gitattributes").read_text(encoding="utf-8") == attributes  # nothing repeated


def test_add_with_every_option_prints_id_and_path(runner: CliRunner, root: Path) -> None:
    out = run(
        runner,
        "--root",
        root,
        "add",
        "--body",
        "# Function: merge sort\nSplit, sort, merge.\n",
        "--id",
        "kp_merge",
        "--tag",
        "domain:computing",
        "--tag",
        "sorting",
        "--importance",
        "0.7",
        "--confidence",
        "0.55",
        "--basis",
        "test",
        "--not-applicable",
        "memory is scarce",
        "--edge",
        "kp_sorting:part_of",
        "--edge",
        "kp_bsearch:similar",
    ).stdout
    node_id, path = out.rstrip("\n").split("\t")
    assert node_id == "kp_merge"
    assert Path(path).is_file() and Path(path).parent.parent.name == "knowledge"
    with MdCG(root, read_only=True) as store:
        node = store.get("kp_merge")
    assert node.body == "# Function: merge sort\nSplit, sort, merge.\n"
    assert node.tags == ["domain:computing", "sorting"]
    assert (node.importance, node.confidence, node.verification_basis) == (0.7, 0.55, "test")
    assert node.non_applicable_conditions == ["memory is scarce"]
    assert [(e.target, e.type) for e in node.edges] == [("kp_sorting", "part_of"), ("kp_bsearch", "similar")]


def test_add_reads_the_body_from_stdin_and_generates_an_id(runner: CliRunner, root: Path) -> None:
    data = run_json(
        runner, "add", "--root", root, "--body", "-", "--layer", "contextual", input="from stdin\n"
    )
    assert (
        set(data) == {"id", "layer", "path", "existing", "tier", "expires", "unknown_targets"}
        and data["layer"] == "contextual"
    )
    assert data["existing"] is False
    assert Path(data["path"]).read_text(encoding="utf-8").endswith("---\nfrom stdin\n")
    # with no --body at all, a piped stdin is the body too
    data = run_json(runner, "add", "--root", root, input="piped\n")
    with MdCG(root, read_only=True) as store:
        assert store.get(data["id"]).body == "piped"  # a final newline of piped text is dropped


def test_add_takes_the_body_as_an_argument(runner: CliRunner, root: Path) -> None:
    data = run_json(runner, "add", "用户喜欢喝绿茶，不喝咖啡。", "--root", root, "--layer", "self")
    with MdCG(root, read_only=True) as store:
        assert store.get(data["id"]).body == "用户喜欢喝绿茶，不喝咖啡。"
        assert store.get(data["id"]).layer == "self"
    assert one_line_error(runner, "add", "text", "--body", "other", "--root", root) == (
        "error: give the body once: as TEXT or with --body, not both"
    )
    assert (
        one_line_error(runner, "add", "  ", "--root", root)
        == "error: --body is empty: a memory needs some text"
    )


def test_add_refuses_bad_input_in_one_line(runner: CliRunner, root: Path) -> None:
    assert "unknown layer 'attic'" in one_line_error(
        runner, "add", "--root", root, "-b", "x", "--layer", "attic"
    )
    assert "verification_basis" in one_line_error(
        runner, "add", "--root", root, "-b", "x", "--basis", "vibes"
    )
    assert "edge type" in one_line_error(
        runner, "add", "--root", root, "-b", "x", "--edge", "kp_sorting:likes"
    )
    assert "already exists" in one_line_error(runner, "add", "--root", root, "-b", "x", "--id", "kp_sorting")
    assert "between 0 and 1" in one_line_error(runner, "add", "--root", root, "-b", "x", "--importance", "2")


def test_get_prints_fields_then_body_and_show_prints_the_file(runner: CliRunner, root: Path) -> None:
    with MdCG(root, read_only=True) as store:
        path = store.path_of("kp_bsearch")
        stored = store.get("kp_bsearch").to_dict(iso_times=True)
    head, body = run(runner, "get", "kp_bsearch", "--root", root).stdout.split("\n\n", 1)
    assert body == BINARY_SEARCH
    lines = head.splitlines()
    assert lines[0] == f"kp_bsearch · knowledge · {path.relative_to(root).as_posix()}"
    fields = dict(line.split(": ", 1) for line in lines[1:])
    assert list(fields) == [k for k in stored if k not in ("id", "layer")]  # every field, file order
    assert fields["confidence"] == "0.6" and fields["tags"] == "domain:computing"
    assert fields["created_at"] == stored["created_at"] and fields["created_at"].endswith("Z")
    assert fields["verification_basis"] == "test"
    assert fields["non_applicable_conditions"] == "unsorted array, linked list"
    assert fields["edges"] == "kp_sorting (part_of)"
    data = run_json(runner, "get", "kp_bsearch", "--root", root)
    assert set(data) == {"id", "layer", "path", "frontmatter", "body"}
    assert data["body"] == BINARY_SEARCH and data["path"] == str(path)
    assert data["frontmatter"]["non_applicable_conditions"] == ["unsorted array", "linked list"]
    assert data["frontmatter"]["edges"] == [{"target": "kp_sorting", "type": "part_of"}]
    text = run(runner, "show", "kp_bsearch", "--root", root).stdout
    assert text == path.read_text(encoding="utf-8") and text.startswith('---\nid: "kp_bsearch"\n')
    assert run_json(runner, "show", "kp_bsearch", "--root", root) == {
        "id": "kp_bsearch",
        "path": str(path),
        "text": text,
    }
    assert (
        one_line_error(runner, "show", "kp_nope", "--root", root)
        == "error: no node with id 'kp_nope' in this store"
    )


def test_add_refuses_an_empty_body_and_names_update_for_a_duplicate(runner: CliRunner, root: Path) -> None:
    for body in ("", "   "):
        assert one_line_error(runner, "add", "--root", root, "--body", body) == (
            "error: --body is empty: a memory needs some text"
        )
    assert one_line_error(runner, "add", "--root", root, "--body", "x", "--id", "kp_sorting") == (
        "error: node id 'kp_sorting' already exists at knowledge/cond_computing_2ddeaa83/kp_sorting.md; "
        "change it with `mdcg update kp_sorting ...`, or replace it with `mdcg add --overwrite`"
    )
    group = typer.main.get_command(app)
    assert {"update", "add"} <= set(group.commands)  # type: ignore[attr-defined]
    assert "--overwrite" in run(runner, "add", "--help").stdout


def test_add_over_a_file_the_index_does_not_know_names_sync(runner: CliRunner, root: Path) -> None:
    """A file git brought in without a hook (reset, cherry-pick): get said there was no
    such node while add said it existed and to change it with update, which failed too."""
    copy = root / "knowledge" / "orphan" / "kp_cello.md"  # where `add --body x` puts it
    copy.parent.mkdir(exist_ok=True)
    copy.write_text("---\nid: kp_cello\nlayer: knowledge\n---\nThe user learns the cello\n", encoding="utf-8")
    rel = copy.relative_to(root).as_posix()
    assert one_line_error(runner, "get", "--root", root, "kp_cello").startswith(
        "error: no node with id 'kp_cello'"
    )
    assert one_line_error(runner, "add", "--root", root, "--body", "x", "--id", "kp_cello") == (
        f"error: node id 'kp_cello': the file {rel} holds it, which the index does not know yet "
        "(copied in, or brought by git); `mdcg sync` takes it in (then `mdcg update kp_cello ...`), "
        "or replace it with `mdcg add --overwrite`"
    )
    assert run(runner, "sync", "--root", root).stdout.startswith("added (1): kp_cello")
    assert run_json(runner, "get", "--root", root, "kp_cello")["id"] == "kp_cello"


def test_add_over_a_file_holding_another_id_keeps_the_librarys_words(runner: CliRunner, root: Path) -> None:
    """A hand-written file named after an id but holding another one: add said the id
    existed and to update it (no such node) or add --overwrite (the same refusal), and
    rename said the id existed there."""
    wrong = root / "self" / "hand_wrongid.md"
    wrong.write_text("---\nid: something_else\nlayer: self\n---\nMismatched id.\n", encoding="utf-8")
    run(runner, "sync", "--root", root)
    held = (
        "error: node id 'hand_wrongid': the file self/hand_wrongid.md holds memory 'something_else' "
        "(edited by hand, or placed there); it is not written over -- move that file to its own name, "
        "or rename one of them"
    )
    for extra in ((), ("--overwrite",)):
        args = ("add", "--root", root, "--id", "hand_wrongid", "--layer", "self", *extra, "x")
        assert one_line_error(runner, *args) == held
    run(runner, "add", "--root", root, "--id", "other", "--layer", "self", "o")
    assert one_line_error(runner, "rename", "--root", root, "other", "hand_wrongid") == (
        "error: cannot rename 'other' to 'hand_wrongid': the file self/hand_wrongid.md holds memory "
        "'something_else' (its name is not its id); move that file to its own name, or choose another id"
    )
    assert one_line_error(runner, "rename", "--root", root, "something_else", "hand_wrongid") == (
        "error: cannot rename 'something_else' to 'hand_wrongid': its file is self/hand_wrongid.md, "
        "named after the new id; rename it to another id first, then to this one"
    )
    run(runner, "rename", "--root", root, "something_else", "tmp")  # the advice works
    run(runner, "rename", "--root", root, "tmp", "hand_wrongid")
    assert run_json(runner, "get", "--root", root, "hand_wrongid")["path"].endswith("self/hand_wrongid.md")
    (root / "self" / "broken.md").write_text("---\nid: [\n---\nx\n", encoding="utf-8")
    assert one_line_error(runner, "add", "--root", root, "--id", "broken", "--layer", "self", "x") == (
        "error: node id 'broken': the file self/broken.md is there and cannot be read as a memory "
        "(health lists it); it is not written over -- fix or move it first"
    )
    assert one_line_error(runner, "rename", "--root", root, "other", "broken") == (
        "error: cannot rename 'other' to 'broken': the file self/broken.md is there and cannot be read "
        "as a memory (health lists it); fix or move it first"
    )


def test_the_edge_types_the_docs_name_are_the_ones_accepted(runner: CliRunner, root: Path) -> None:
    """docs/cli.md named six types for --edge; `supersedes`, which the error lists, is accepted too."""
    lines = DOCS.read_text(encoding="utf-8").splitlines()
    row = next(line for line in lines if "| `--edge TARGET:TYPE`" in line)
    assert re.findall(r"`(\w+)`", row.split("TYPE is", 1)[1]) == list(EDGE_TYPES)
    assert one_line_error(runner, "add", "--root", root, "--id", "e1", "--edge", "kp_sorting:foo", "x") == (
        "error: node 'e1': field 'edges' has an edge type outside part_of, causal, sequential, spatial, "
        "hierarchical, similar, supersedes (got 'foo')"
    )


def test_list_by_layer_tag_and_time(runner: CliRunner, root: Path) -> None:
    with MdCG(root) as store:
        store.update("kp_sorting", tags=["domain:computing", "basics"])  # now the newest change
        rejected = store.ids("rejected")[0]
    everything = run_json(runner, "list", "--root", root)
    assert everything["total"] == 4 and everything["offset"] == 0
    assert everything["items"][0]["id"] == "kp_sorting"
    assert {i["id"] for i in everything["items"]} == {"kp_bsearch", "kp_sorting", "anc_rule", rejected}
    assert set(everything["items"][0]) == {"id", "layer", "title", "tags", "created", "updated", "path"}
    knowledge = run_json(runner, "list", "--root", root, "--layer", "knowledge")
    assert [i["id"] for i in knowledge["items"]] == ["kp_sorting", "kp_bsearch"]
    assert [i["id"] for i in run_json(runner, "list", "--root", root, "--tag", "basics")["items"]] == [
        "kp_sorting"
    ]
    assert run_json(runner, "list", "--root", root, "--since", "2999-01-01")["total"] == 0
    assert run_json(runner, "list", "--root", root, "--until", "2000-01-01")["total"] == 0
    assert run_json(runner, "list", "--root", root, "--since", "1d")["total"] == 4
    page = run_json(runner, "list", "--root", root, "--limit", "1", "--offset", "1")
    assert page["total"] == 4 and len(page["items"]) == 1 and page["offset"] == 1
    out = run(runner, "list", "--root", root, "--limit", "2").stdout
    assert "kp_sorting" in out and out.endswith("1-2 of 4; --offset 2 for more\n")
    assert run(runner, "list", "--root", root, "--tag", "nope").stdout == "no memories match\n"
    assert "--since 'soon'" in one_line_error(runner, "list", "--root", root, "--since", "soon")


def test_update_changes_only_what_is_given(runner: CliRunner, root: Path) -> None:
    out = run(
        runner, "update", "kp_sorting", "--root", root, "--importance", "0.8", "--tag", "a", "--tag", "b"
    ).stdout
    with MdCG(root, read_only=True) as store:
        node = store.get("kp_sorting")
        assert (node.importance, node.tags, node.body) == (
            0.8,
            ["a", "b"],
            "# Sorting\nSorting puts items in order.\n",
        )
        path = store.path_of("kp_sorting")
    assert out == f"kp_sorting: updated importance, tags ({path})\n"
    data = run_json(
        runner, "update", "kp_sorting", "--root", root, "--body", "-", input="# Sorting\nStable.\n"
    )
    assert data["updated"] == ["body"] and data["layer"] == "knowledge"
    moved = run_json(
        runner, "update", "kp_sorting", "--root", root, "--layer", "contextual", "--confidence", "0.4"
    )
    assert moved["layer"] == "contextual" and moved["path"] == str(root / "contextual" / "kp_sorting.md")
    with MdCG(root, read_only=True) as store:
        node = store.get("kp_sorting")
        assert (node.layer, node.confidence, node.body) == ("contextual", 0.4, "# Sorting\nStable.")
    run(runner, "update", "kp_sorting", "--root", root, "--no-tags")
    with MdCG(root, read_only=True) as store:
        assert store.get("kp_sorting").tags == []
    assert one_line_error(runner, "update", "kp_sorting", "--root", root) == (
        "error: nothing to update: give --body, --tag, --layer, --importance, --confidence, --basis, "
        "--tier or --reopen"
    )
    assert one_line_error(runner, "update", "kp_sorting", "--root", root, "--body", "") == (
        "error: --body is empty: a memory needs some text"
    )
    assert "no node with id 'kp_nope'" in one_line_error(
        runner, "update", "kp_nope", "--root", root, "--importance", "1"
    )


def test_delete_and_forget(runner: CliRunner, root: Path) -> None:
    with MdCG(root, read_only=True) as store:
        sorting, bsearch = store.path_of("kp_sorting"), store.path_of("kp_bsearch")
    assert one_line_error(runner, "delete", "kp_sorting", "--root", root) == (
        "error: node 'kp_sorting' has incoming edges from kp_bsearch (part_of); `mdcg delete --force` "
        "leaves them dangling (or remove the edges first)"
    )
    assert sorting.is_file()
    out = run(runner, "delete", "kp_sorting", "--force", "--root", root).stdout
    assert out == f"kp_sorting: deleted ({sorting})\nedges left dangling: kp_bsearch (part_of)\n"
    assert not sorting.exists()
    for blank in ("", "  "):
        assert one_line_error(runner, "forget", "kp_bsearch", "--reason", blank, "--root", root) == (
            "error: --reason is empty: forgetting needs a reason (kept in the tombstone)"
        )
    assert one_line_error(runner, "forget", "anc_rule", "--reason", "tidy", "--root", root) == (
        "error: node 'anc_rule' is in anchor/ and protected; pass --force to forget it anyway"
    )
    data = run_json(runner, "forget", "kp_bsearch", "--reason", "wrong", "--root", root)
    assert data == {
        "id": "kp_bsearch",
        "forgotten": True,
        "layer": "knowledge",
        "dangling_edges": [],
        "left_closed": [],
        "copies": [],
    }
    assert not bsearch.exists()
    with MdCG(root, read_only=True) as store:
        assert [(t["id"], t["reason"]) for t in store.tombstones()] == [("kp_bsearch", "wrong")]
        assert "kp_sorting" not in store and "kp_bsearch" not in store


def test_archive_unarchive_and_list_archived(runner: CliRunner, root: Path) -> None:
    with MdCG(root, read_only=True) as store:
        path = store.path_of("kp_sorting")
        text = path.read_text(encoding="utf-8")
        rejected = store.ids("rejected")[0]
    out = run(runner, "archive", "kp_sorting", "anc_rule", "--reason", "stale", "--root", root).stdout
    assert out == "archived 2: kp_sorting, anc_rule\n"
    with MdCG(root, read_only=True) as store:
        assert "kp_sorting" not in store and "anc_rule" not in store
        archived = root / store.entry("kp_sorting", include_archived=True).path
    assert archived == root / "archive" / path.relative_to(root)
    assert archived.read_text(encoding="utf-8") == text and not path.exists()  # byte for byte
    assert {i["id"] for i in run_json(runner, "list", "--root", root)["items"]} == {"kp_bsearch", rejected}
    with_archived = run_json(runner, "list", "--root", root, "--archived")
    assert {i["id"] for i in with_archived["items"]} == {"kp_bsearch", rejected, "kp_sorting", "anc_rule"}
    assert run_json(runner, "archive", "kp_sorting", "--root", root) == {"archived": []}
    assert run_json(runner, "unarchive", "kp_sorting", "--root", root) == {"unarchived": ["kp_sorting"]}
    assert path.read_text(encoding="utf-8") == text and not archived.exists()
    assert run(runner, "unarchive", "kp_sorting", "--root", root).stdout == "nothing to unarchive\n"
    assert (
        one_line_error(runner, "archive", "kp_nope", "--root", root)
        == "error: no node with id 'kp_nope' in this store"
    )


def test_supersede_hides_the_old_memory_from_search(runner: CliRunner, root: Path) -> None:
    run(runner, "add", "--root", root, "--id", "kp_bsearch2", "--basis", "test", "--body",
        "# Function: binary search v2\nBinary search, iterative, overflow-safe midpoint.")  # fmt: skip
    out = run(runner, "supersede", "kp_bsearch", "kp_bsearch2", "--reason", "v2", "--root", root).stdout
    assert out == "kp_bsearch: superseded by kp_bsearch2\n"
    found = run_json(runner, "search", "binary search", "--root", root, "--no-record")
    assert [r["id"] for r in found["results"]] == ["kp_bsearch2"]
    with MdCG(root, read_only=True) as store:
        assert store.get("kp_bsearch").valid_until is not None
        assert {"target": "kp_bsearch", "type": "supersedes"}.items() <= store.get("kp_bsearch2").edges[
            0
        ].to_dict().items()
    assert "kp_nope" in one_line_error(runner, "supersede", "kp_nope", "kp_bsearch2", "--root", root)


def test_sweep_lists_then_removes_expired_temporary_memories(runner: CliRunner, root: Path) -> None:
    with MdCG(root) as store:
        store.add(
            Node(
                id="tmp_old",
                layer="contextual",
                body="okapi",
                retention_tier="temp",
                expires_at=time.time() - 10,
            )
        )
        store.add(
            Node(
                id="tmp_new",
                layer="contextual",
                body="okapi",
                retention_tier="temp",
                expires_at=time.time() + 999,
            )
        )
    assert run_json(runner, "sweep", "--dry-run", "--root", root) == {
        "expired": ["tmp_old"],
        "removed": [],
        "dry_run": True,
        "left_closed": [],
        "kept": [],
    }
    assert (root / "contextual" / "tmp_old.md").is_file()
    assert (
        run(runner, "sweep", "--dry-run", "--root", root).stdout == "expired (1): tmp_old; nothing removed\n"
    )
    assert run(runner, "sweep", "--root", root).stdout == "removed (1): tmp_old\n"
    assert (
        not (root / "contextual" / "tmp_old.md").exists() and (root / "contextual" / "tmp_new.md").is_file()
    )
    with MdCG(root, read_only=True) as store:
        assert [(t["id"], t["reason"]) for t in store.tombstones()] == [("tmp_old", "expired")]
    assert run(runner, "sweep", "--root", root).stdout == "removed (0): none\n"


def test_organize_apply_with_a_bad_decision_applies_nothing_and_keeps_the_run(
    runner: CliRunner, root: Path, tmp_path: Path
) -> None:
    cands = tmp_path / "c.json"
    cands.write_text(
        json.dumps([{"layer": "knowledge", "title": "Kiwi", "content": "kiwi fruit facts"}]), "utf-8"
    )
    run_id = run_json(runner, "organize", "--dry-run", cands, "--root", root)["run_id"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"action": "save", "index": 0}, {"action": "save", "index": 7}]), "utf-8")
    before = sorted(p.name for p in root.rglob("*.md"))
    line = one_line_error(runner, "organize", "--apply", run_id, "--decisions", bad, "--root", root)
    assert line.startswith("error: 1 decision(s) the dry run does not back: decision 1: candidate 7")
    assert sorted(p.name for p in root.rglob("*.md")) == before
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"action": "save", "index": 0}]), "utf-8")
    out = run(runner, "organize", "--apply", run_id, "--decisions", good, "--root", root).stdout
    assert "(apply): ok; saved 1" in out


def test_organize_dry_run_then_apply_exactly_once(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    candidates = tmp_path / "c.json"
    candidates.write_text(json.dumps([
        {"layer": "knowledge", "title": "Sorting", "content": "Sorting puts items in order."},
        {"layer": "contextual", "title": "Coffee order", "content": "Oat-milk flat white, no sugar."},
        {"layer": "attic", "title": "x", "content": "y"},
    ]), encoding="utf-8")  # fmt: skip
    report = run_json(runner, "organize", "--dry-run", candidates, "--root", root)
    assert report["mode"] == "dryRun" and report["status"] == "degraded"
    assert [(i["index"], i["verdict"]) for i in report["items"]] == [(0, "exact"), (1, "new")]
    assert report["items"][0]["match"]["id"] == "kp_sorting"
    assert [k["index"] for k in report["skipped"]] == [2]
    before = {p.name for p in root.rglob("*.md")}
    decisions = tmp_path / "d.json"
    decisions.write_text(json.dumps([{"action": "discard", "index": 0}, {"action": "save", "index": 1}]))
    out = run(
        runner, "organize", "--apply", report["run_id"], "--decisions", decisions, "--root", root
    ).stdout
    first = out.splitlines()[0]
    assert first.endswith("(apply): ok; saved 1, archived 0, discarded 1, skipped 0")
    added = {p.name for p in root.rglob("*.md")} - before
    assert len(added) == 1 and out.splitlines()[1] == f"  saved: {added.pop()[:-3]}"
    again = one_line_error(
        runner, "organize", "--apply", report["run_id"], "--decisions", decisions, "--root", root
    )
    assert f"dry run '{report['run_id']}' was already applied" in again
    text = run(runner, "organize", "--dry-run", candidates, "--root", root).stdout
    assert "#1 exact (matches " in text and "apply with: mdcg organize --apply org_" in text
    assert one_line_error(runner, "organize", "--root", root) == (
        "error: give either --dry-run FILE.json or --apply RUN_ID --decisions FILE.json"
    )
    assert one_line_error(runner, "organize", "--apply", "org_x", "--root", root) == (
        "error: --apply needs --decisions FILE.json"
    )
    candidates.write_text("[{", encoding="utf-8")
    assert one_line_error(runner, "organize", "--dry-run", candidates, "--root", root) == (
        f"error: --dry-run {candidates}: not valid JSON (Expecting property name enclosed in double quotes "
        "at line 1, column 3)"
    )


def test_inject_stats_and_today(runner: CliRunner, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    run(runner, "init", "--root", empty)
    assert run(runner, "today", "--root", empty).stdout == "nothing to bring back yet\n"
    assert run_json(runner, "today", "--root", empty) == {"memory": None}
    root = build_small_store(tmp_path / "memory")
    items = run_json(runner, "inject", "binary search", "--root", root)["items"]
    assert [i["id"] for i in items] == ["kp_bsearch"]
    assert set(items[0]) == {"id", "title", "text", "score"}
    assert run(runner, "inject", "xyzzy plugh", "--root", root).stdout == "nothing relevant to inject\n"
    stats = run_json(runner, "stats", "--root", root)
    assert set(stats) == {
        "now",
        "options",
        "exposed_count",
        "top_recalled",
        "zombie",
        "injection",
        "coverage",
    }
    assert [(r["id"], r["count"]) for r in stats["top_recalled"]] == [("kp_bsearch", 1)]
    assert stats["injection"]["runs"] == 2 and stats["injection"]["injected_count"] == 1
    lines = run(runner, "stats", "--root", root).stdout.splitlines()
    since = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    assert re.fullmatch(rf"window 30 d since {since} \(the log does not cover all of it\)", lines[0])
    assert lines[1:] == [
        "zombies: 0/0 eligible (n/a); injection: 1 in 2 run(s), slot fill 10.0%",
        "      1  kp_bsearch  Function: binary search",
    ]
    shown = run_json(runner, "today", "--root", root)["memory"]
    with MdCG(root, read_only=True) as store:
        assert shown["id"] in store.ids() and shown["title"] == store.entry(shown["id"]).title
    line = run(runner, "today", "--root", root).stdout.splitlines()[0]
    today = datetime.now().astimezone().date().isoformat()  # every node was made today: the last resort
    assert re.fullmatch(rf"\S+ · today \({today}\) · shown \d+ time\(s\) before", line)


def test_mcp_scope_options_are_checked(runner: CliRunner, root: Path) -> None:
    assert "max_sensitivity" in one_line_error(runner, "mcp", "--root", root, "--max-sensitivity", "ultra")


def test_mcp_aliases_value_is_checked(runner: CliRunner, root: Path) -> None:
    assert one_line_error(runner, "mcp", "--root", root, "--aliases", "zep") == (
        "error: --aliases 'zep': expected mcp-memory or mem0 (comma-separated)"
    )


# -- search / neighbours / verify / reflect ------------------------------------------------------


def test_search_table_and_meta_line(runner: CliRunner, root: Path) -> None:
    out = run(runner, "search", "binary search", "--root", root, "-k", "1").stdout
    assert re.search(r"│ 1 │ T2\s+│ ACCEPT\s+│\s+[\d.]+ │ kp_bsearch\s+│ Function: binary search", out)
    assert "deepest tier T2" in out and "buckets: none" in out
    assert re.search(r"covered_neg: rej_[0-9a-f]{16}", out)
    routed = run(
        runner, "search", "binary search", "--root", root, "--context", "computing", "-k", "1"
    ).stdout
    assert "│ T0 " in routed and "(routed)" in routed and "scanned 2/4 (50.0%)" in routed


def test_search_json_has_results_and_meta(runner: CliRunner, root: Path) -> None:
    data = run_json(
        runner,
        "search",
        "binary search",
        "--root",
        root,
        "-c",
        '{"domain": "computing", "situation": "a linked list"}',
    )
    assert set(data) == {"query", "results", "meta"}
    top = data["results"][0]
    assert set(top) == {
        "id",
        "score",
        "tier",
        "state",
        "basis",
        "layer",
        "path",
        "title",
        "tags",
        "evidence",
        "filler",
        "superseded_by",
    }
    assert (top["id"], top["tier"], top["state"]) == ("kp_bsearch", "T0", "REJECT")
    assert top["tags"] == ["domain:computing"]  # from the index entry: no file read
    assert "linked list" in top["basis"]
    meta = data["meta"]
    assert meta["routed"] is True and meta["tier"] in ("T1", "T2", "T3")
    assert meta["buckets"] == ["cond_computing_" + meta["buckets"][0].rsplit("_", 1)[1]]
    assert meta["store_size"] == 4 and len(meta["covered_neg"]) == 1
    assert {"scanned", "scanned_share", "big_domain", "timing_ms", "terms"} <= set(meta)
    unjudged = run_json(runner, "search", "binary search", "--root", root, "--no-judge", "-k", "1")
    assert unjudged["results"][0]["state"] is None and unjudged["results"][0]["basis"] is None


def test_search_omits_filler_unless_fill(runner: CliRunner, root: Path) -> None:
    data = run_json(runner, "search", "xyzzy plugh", "--root", root)
    assert data["results"] == [] and data["meta"]["filler_omitted"] == 3
    out = run(runner, "search", "xyzzy plugh", "--root", root).stdout
    assert out.startswith("no results with evidence of being about the query\n")
    assert "3 filler result(s) without evidence omitted (--fill shows them)" in " ".join(out.split())
    filled = run_json(runner, "search", "xyzzy plugh", "--root", root, "--fill")
    assert {r["id"] for r in filled["results"]} == {"kp_bsearch", "kp_sorting", "anc_rule"}
    assert all(r["filler"] and r["state"] != "ACCEPT" for r in filled["results"])
    assert filled["meta"]["filler_omitted"] == 0
    shown = run(runner, "search", "xyzzy plugh", "--root", root, "--fill").stdout
    assert len(re.findall(r"│ \(filler\) ", shown)) == 3
    mixed = run_json(runner, "search", "binary search", "--root", root, "-k", "3")
    assert [r["id"] for r in mixed["results"]] == ["kp_bsearch"] and mixed["meta"]["filler_omitted"] == 2
    with MdCG(root, read_only=True) as store:  # filler is never recorded as an access
        assert store.access_counts(["kp_sorting", "anc_rule", "kp_bsearch"]) == {
            "kp_sorting": 0,
            "anc_rule": 0,
            "kp_bsearch": 1,
        }


def test_search_records_access_unless_no_record(runner: CliRunner, root: Path) -> None:
    run(runner, "search", "binary search", "--root", root, "-k", "1", "--no-record")
    with MdCG(root, read_only=True) as store:
        assert store.access_counts(["kp_bsearch"]) == {"kp_bsearch": 0}
    run(runner, "search", "binary search", "--root", root, "-k", "1")
    with MdCG(root, read_only=True) as store:
        assert store.access_counts(["kp_bsearch"]) == {"kp_bsearch": 1}


def test_search_errors_are_one_line(runner: CliRunner, root: Path) -> None:
    assert "--context is not valid JSON" in one_line_error(
        runner, "search", "x", "--root", root, "--context", "{bad"
    )
    assert "JSON object or a plain domain" in one_line_error(
        runner, "search", "x", "--root", root, "-c", "[1]"
    )
    assert "unknown layer" in one_line_error(runner, "search", "x", "--root", root, "--layer", "attic")
    assert (
        one_line_error(runner, "search", "x", "--root", root, "-k", "0")
        == "error: -k must be at least 1, got 0"
    )
    assert "unknown big domain" in one_line_error(
        runner, "search", "x", "--root", root, "-c", '{"big_domain": "astrology"}'
    )


def test_neighbours_text_and_json(runner: CliRunner, root: Path) -> None:
    out = run(runner, "neighbours", "kp_sorting", "--root", root, "--direction", "in").stdout
    assert re.search(r"│ 1\s+│ in\s+│ part_of │ kp_bsearch\s+│ kp_sorting", out)
    data = run_json(
        runner, "neighbours", "kp_bsearch", "--root", root, "--direction", "both", "--type", "part_of"
    )
    assert data == {
        "id": "kp_bsearch",
        "total": 1,
        "offset": 0,
        "neighbours": [
            {
                "id": "kp_sorting",
                "type": "part_of",
                "direction": "out",
                "depth": 1,
                "via": "kp_bsearch",
                "exists": True,
            }
        ],
    }
    assert (
        run_json(runner, "neighbours", "kp_bsearch", "--root", root, "--type", "causal")["neighbours"] == []
    )
    assert "no neighbours" in run(runner, "neighbours", "anc_rule", "--root", root).stdout
    assert "unknown edge type" in one_line_error(
        runner, "neighbours", "kp_bsearch", "--root", root, "--type", "x"
    )
    assert "no node with id 'nope'" in one_line_error(runner, "neighbours", "nope", "--root", root)


def test_verify_changes_confidence_in_the_file(runner: CliRunner, root: Path) -> None:
    out = run(
        runner,
        "verify",
        "kp_bsearch",
        "--root",
        root,
        "--evidence",
        "40 tests pass",
        "--verdict",
        "confirmed",
    )
    assert out.stdout == "kp_bsearch: confirmed, confidence 0.6 -> 0.65\n"
    data = run_json(
        runner, "verify", "kp_bsearch", "--root", root, "--evidence", "1 failure", "--verdict", "weakened"
    )
    assert data["confidence_before"] == 0.65 and data["confidence_after"] == pytest.approx(0.55)
    assert set(data) == {"id", "verdict", "layer", "confidence_before", "confidence_after", "path"}
    assert "confidence: 0.55\n" in Path(data["path"]).read_text(encoding="utf-8")
    out = run(runner, "verify", "kp_sorting", "--root", root, "--evidence", "wrong", "--verdict", "falsified")
    assert out.stdout.startswith("kp_sorting: falsified, moved to rejected/")
    with MdCG(root, read_only=True) as store:
        assert store.entry("kp_sorting").layer == "rejected"


def test_verify_errors_are_one_line(runner: CliRunner, root: Path) -> None:
    line = one_line_error(
        runner, "verify", "kp_bsearch", "--root", root, "--evidence", "e", "--verdict", "maybe"
    )
    assert line == (
        "error: unknown verdict 'maybe' for node 'kp_bsearch'; expected one of confirmed, weakened, falsified"
    )
    line = one_line_error(
        runner, "verify", "kp_nope", "--root", root, "--evidence", "e", "--verdict", "confirmed"
    )
    assert line == "error: no node with id 'kp_nope' in this store"
    assert "evidence must be a non-empty string" in one_line_error(
        runner, "verify", "kp_bsearch", "--root", root, "--evidence", " ", "--verdict", "confirmed"
    )


def test_reflect_records_the_gap(runner: CliRunner, root: Path) -> None:
    data = run_json(runner, "reflect", "binary search", "--root", root, "-k", "2")
    assert set(data) == {"reflection", "results"}
    states = [r["state"] for r in data["results"]]
    assert data["reflection"]["d"] == pytest.approx(1 - states.count("ACCEPT") / len(states))
    out = run(runner, "reflect", "binary search", "--root", root, "-k", "2", "--states", "REJECT").stdout
    assert out.startswith("t=1  D=1.000  dD/dt=")
    with MdCG(root, read_only=True) as store:
        assert [r.d for r in store.reflections()][-1] == 1.0
    assert "feedback has 2 states for 1 results" in one_line_error(
        runner, "reflect", "binary search", "--root", root, "-k", "2", "--states", "ACCEPT,DEFER"
    )
    # with --fill, D is taken over the filler too
    filled = run_json(runner, "reflect", "binary search", "--root", root, "-k", "2", "--fill")
    assert filled["results"][0]["id"] == "kp_bsearch" and len(filled["results"]) == 2


# -- maintenance ------------------------------------------------------------------------------


def test_sync_reports_a_hand_added_file(runner: CliRunner, root: Path) -> None:
    run(runner, "compact", "--root", root)  # a snapshot: later opens do not rescan the files
    assert run(runner, "sync", "--root", root).stdout == "in sync: nothing changed\n"
    (root / "contextual" / "ctx_hand.md").write_text('---\nid: "ctx_hand"\nlayer: "contextual"\n---\nhi\n')
    data = run_json(runner, "sync", "--root", root)
    assert data["added"] == ["ctx_hand"] and data["clean"] is False
    assert set(data) >= {"added", "changed", "deleted", "moved", "malformed", "clean"}
    (root / "contextual" / "plain.md").write_text("a note without frontmatter is a node too\n")
    assert run_json(runner, "sync", "--root", root)["added"] == ["plain"]
    (root / "contextual" / "broken.md").write_text("---\nid: [unclosed\n---\nbody\n")
    out = run(runner, "sync", "--root", root, code=1).stdout  # a file needs a person: exit 1
    assert out.startswith("malformed (1): contextual/broken.md: ")


def test_health_exit_code_and_json(runner: CliRunner, root: Path) -> None:
    out = run(runner, "health", "--root", root).stdout
    assert out == (
        "health: OK · 4 nodes (anchor 1, knowledge 2, rejected 1) · "
        "1 buckets, largest 100.0%, expected scan 100.0%\n"
    )
    data = run_json(runner, "health", "--root", root)
    assert set(data) == {"ok", "nodes", "layers", "buckets", "findings"} and data["ok"] is True
    with MdCG(root) as store:
        store.update("kp_sorting", edges=[{"target": "kp_gone", "type": "causal"}])
    result = run(runner, "health", "--root", root, code=1)
    assert "dangling_edge" in result.stdout and "kp_gone" in result.stdout
    data = run_json(runner, "health", "--root", root, code=1)
    assert data["ok"] is False and [f["kind"] for f in data["findings"]] == ["dangling_edge"]


def test_rebuild_and_compact(runner: CliRunner, root: Path) -> None:
    data = run_json(runner, "rebuild", "--root", root)
    assert data["nodes"] == 4 and data["snapshot_bytes"] > 0 and data["problems"] == []
    assert set(data) >= {"shards_before", "shards_removed", "shards_kept", "seconds"}
    out = run(runner, "compact", "--root", root).stdout
    assert out.startswith("compacted: 4 nodes, snapshot ")
    node_file = next((root / "knowledge").rglob("kp_bsearch.md"))
    before = node_file.read_bytes()
    run(runner, "search", "binary search", "--root", root, "-k", "1")
    data = run_json(runner, "compact", "--root", root, "--access")
    assert data["access_folded"] == {"kp_bsearch": 1} and data["nodes"] == 4
    # Access counts are per-clone state: folded under .mdcg/, never into the tracked file.
    assert node_file.read_bytes() == before
    with MdCG(root, read_only=True) as store:
        assert store.access_counts(["kp_bsearch"]) == {"kp_bsearch": 1}


# -- census / migrate ------------------------------------------------------------------------


def test_census_of_sqlite_and_folder(runner: CliRunner, root: Path) -> None:
    sample = bundled_sample_path()
    data = run_json(runner, "census", sample)
    assert data["records"] == 200 and [s["scheme"] for s in data["schemes"]][:4] == ["A", "B", "C", "D"]
    assert set(data) == {"records", "layer", "schemes", "degraded", "fields"}
    md = run(runner, "census", sample).stdout
    assert md.startswith("#") and "| D " in md
    folder = run_json(runner, "census", root, "--all-layers")
    assert folder["records"] == 4 and folder["layer"] is None
    assert "no such sqlite database file" in one_line_error(runner, "census", root.parent / "missing.sqlite")


def _db_with_a_bad_row(path: Path) -> Path:
    conn = sqlite3.connect(path)
    write_nodes(conn, [Node(id="kp_a", body="alpha\n", tags=["domain:x"]), Node(id="kp_b", body="beta\n")])
    with conn:
        conn.execute("INSERT INTO nodes (id, layer, content) VALUES ('kp_bad', 'attic', 'x')")
    conn.close()
    return path


def test_migrate_the_sample_verifies_every_node(runner: CliRunner, tmp_path: Path) -> None:
    dest = tmp_path / "migrated"
    data = run_json(runner, "migrate", bundled_sample_path(), dest, "--batch", "100")
    assert data["ok"] is True and data["rows"] == data["migrated"] == data["verified"] == 226
    assert data["mismatches"] == [] and data["created"] == 226 and data["batch"] == 100
    again = run(runner, "migrate", bundled_sample_path(), dest).stdout
    assert ": OK\n" in again and "unchanged 226" in again and "0 mismatch(es)" in again
    dry = run_json(runner, "migrate", bundled_sample_path(), tmp_path / "never", "--dry-run")
    assert dry["mode"] == "dry-run" and dry["created"] == 226 and not (tmp_path / "never").exists()
    verified = run_json(runner, "migrate", bundled_sample_path(), dest, "--verify-only")
    assert verified["mode"] == "verify" and verified["ok"] is True


def test_migrate_exit_codes(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _db_with_a_bad_row(tmp_path / "bad.sqlite")
    data = run_json(runner, "migrate", db, tmp_path / "a")
    assert (
        data["ok"] is True
        and data["migrated"] == 2
        and [r["node_id"] for r in data["bad_rows"]] == ["kp_bad"]
    )
    result = run(runner, "migrate", db, tmp_path / "b", "--strict", code=1)
    assert result.stderr == "--strict: 1 bad node row(s) and 0 bad edge row(s) in the source\n"
    assert "no such sqlite database file" in one_line_error(
        runner, "migrate", tmp_path / "nope.sqlite", tmp_path / "c"
    )
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    assert "not an md-cg store" in one_line_error(runner, "migrate", db, tmp_path / "foreign")
    assert "exclude each other" in one_line_error(
        runner, "migrate", db, tmp_path / "d", "--dry-run", "--verify-only"
    )

    import md_cg.migrate as migrate_mod

    real = migrate_mod.migrate

    def with_mismatch(*args: Any, **kwargs: Any) -> Any:
        report = real(*args, **kwargs)
        report.mismatches.append(migrate_mod.Mismatch("kp_a", ("body",), "'alpha' != 'alpha!'"))
        return report

    monkeypatch.setattr(migrate_mod, "migrate", with_mismatch)
    result = run(runner, "migrate", db, tmp_path / "e", code=1)
    assert ": FAILED\n" in result.stdout and "kp_a: body" in result.stdout

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(migrate_mod, "migrate", interrupted)
    result = run(runner, "migrate", db, tmp_path / "f", code=130)
    assert result.stderr.startswith("interrupted: run the same command again to resume")


# -- bench / demo / root resolution / unexpected errors --------------------------------------------


def test_bench_writes_the_table(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []

    def fake_run(kind: str = "all", sizes: list[int] | None = None, progress: Any = None) -> str:
        calls.append((kind, sizes))
        progress("working")
        return f"| kind | sizes |\n|---|---|\n| {kind} | {sizes} |"

    monkeypatch.setitem(sys.modules, "md_cg.benchmark", types.SimpleNamespace(run=fake_run))
    import md_cg

    monkeypatch.setattr(md_cg, "benchmark", sys.modules["md_cg.benchmark"], raising=False)
    out_file = tmp_path / "bench.md"
    out = run(runner, "bench", "--kind", "search", "--sizes", "1000,3000", "--out", out_file).stdout
    assert out == "| kind | sizes |\n|---|---|\n| search | [1000, 3000] |\n"
    assert out_file.read_text(encoding="utf-8") == out and calls == [("search", [1000, 3000])]
    assert "expected one of store, search, all" in one_line_error(runner, "bench", "--kind", "disk")
    assert "comma-separated integers" in one_line_error(runner, "bench", "--sizes", "1k")
    assert "positive integers" in one_line_error(runner, "bench", "--sizes", "0")


def test_bench_runs_the_real_search_benchmark(runner: CliRunner, tmp_path: Path) -> None:
    out_file = tmp_path / "bench" / "out" / "search.md"  # the folder is made (cli.md's example failed)
    out = run(runner, "bench", "--kind", "search", "--sizes", "60", "--out", out_file).stdout
    assert out_file.read_text(encoding="utf-8") == out
    assert out.startswith("### Search") and "| 60 | recall@10 vs sqlite LIKE" in out
    # the filtered rows: a tag of about 5% and one of about 25% of the nodes, beside FTS5 + the tag
    filtered = [line for line in out.splitlines() if "tag filter" in line]
    assert len(filtered) in (1, 2) and all(
        "FTS5 OR + bm25 + the tag (json_each)" in line for line in filtered
    )
    assert out_file.read_text(encoding="utf-8") == out


def test_demo_command_refuses_a_non_empty_folder(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("x")
    line = one_line_error(runner, "demo", tmp_path / "full")
    assert "not empty" in line and "--force" in line
    assert "not an md-cg store" in one_line_error(runner, "demo", tmp_path / "full", "--force")


def test_root_comes_from_option_env_or_default(
    runner: CliRunner, root: Path, tmp_path: Path, monkeypatch
) -> None:
    assert run_json(runner, "health", "--root", root)["nodes"] == 4
    assert run_json(runner, "--root", root, "health")["nodes"] == 4
    env_runner = CliRunner(env={"MDCG_ROOT": str(root)})
    assert json.loads(env_runner.invoke(app, ["health", "--json"]).stdout)["nodes"] == 4
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    line = one_line_error(runner, "health")
    assert line.startswith("error: memory: no such store folder") and "mdcg init" in line
    (cwd / "memory").symlink_to(root)
    assert run_json(runner, "health")["nodes"] == 4


def test_missing_store_and_unknown_id_are_one_line(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    assert "no such store folder" in one_line_error(runner, "get", "x", "--root", tmp_path / "nowhere")
    assert (
        one_line_error(runner, "get", "kp_nope", "--root", root)
        == "error: no node with id 'kp_nope' in this store"
    )
    assert "unsafe node id" in one_line_error(runner, "get", "../etc", "--root", root)


def test_unexpected_exceptions_keep_their_traceback(runner: CliRunner, root: Path, monkeypatch) -> None:
    def boom(self: MdCG, deep: bool = False) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(MdCG, "health", boom)
    result = runner.invoke(app, ["health", "--root", str(root)])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)


@pytest.mark.parametrize(
    ("span", "shown"),
    [(0, "now"), (59, "now"), (-59, "now"), (60, "1m"), (3 * 86400 + 5, "3d"), (-3 * 86400, "in 3d"),
     (-2 * 604800 - 10, "in 2w"), (-90, "in 1m"), (7200, "2h")],
)  # fmt: skip
def test_ages_in_the_past_and_ahead(span: float, shown: str) -> None:
    """An instant ahead of the clock (written on a machine whose clock was wrong) is not 'now'."""
    from md_cg.render import age

    assert age(1_000_000.0 - span, now=1_000_000.0) == shown
    assert age(None) == "-"


def fits_but_ids(lines: list[str], columns: int, ids: list[str]) -> None:
    """Every id shows whole on a line; a line is wider than ``columns`` only when it is an id
    (or two) too wide for the terminal, outside any table (nothing is cut by a border)."""
    for node_id in ids:
        assert any(node_id in line for line in lines), (node_id, lines)
    for line in lines:
        if cell_len(line) > columns:
            assert "│" not in line and any(i in line for i in ids), line
            assert cell_len(functools.reduce(lambda x, i: x.replace(i, ""), ids, line)) <= columns, line


@pytest.mark.parametrize("columns", [40, 80, 100])
def test_long_ids_are_never_cut_in_a_narrow_terminal(tmp_path: Path, columns: int) -> None:
    """The ids `mdcg add` makes from a body are long (a CJK character takes two cells):
    when a table's columns and a title do not fit, the title goes under the id, whole;
    when the id does not fit in a table either, it stands alone on a line."""
    narrow = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": str(columns)})
    root = tmp_path / "m"
    run(narrow, "init", "--root", root)
    bodies = [
        ("部署前先在预发环境跑一遍回归测试 before every release", "self", "部署"),
        ("The staging database password rotates every 90 days", "contextual", "security"),
    ]
    ids = [
        run(narrow, "add", body, "--root", root, "-l", layer, "-t", tag).stdout.split("\t")[0]
        for body, layer, tag in bodies
    ]
    assert ids[0] == "部署前先在预发环境跑一遍回归测试-before-every-release-" + ids[0][-6:]
    listed = run(narrow, "list", "--root", root).stdout.splitlines()
    fits_but_ids(listed, columns, ids)
    if columns == 40:
        assert listed[:5] == [
            "id / age · layer · tags · title",
            ids[1],
            "  now · contextual · security · The sta…",
            ids[0],
            "  now · self · 部署 · 部署前先在预发环 …",
        ]
    else:
        assert "age" in listed[1] and "id / layer · tags · title" in listed[1]
        assert f"│ now │ {ids[1]}" in listed[3]
        assert "│     │ contextual · security · The staging database password rotates" in listed[4]
        assert f"│ now │ {ids[0]}" in listed[5]
        assert "│     │ self · 部署 · 部署前先在预发环境跑一遍回归测试" in listed[6]
        assert listed[-2].startswith("└") and all(x[-1] in "┓┃┩│┘" for x in listed[:-1])  # the right border
    assert listed[-1] == "1-2 of 2"
    step = "发布流程的第二步：灰度 10% 流量 second step of the rollout"
    ids.append(
        run(narrow, "add", step, "--root", root, "-l", "self", "--edge", f"{ids[0]}:sequential").stdout
    )
    ids[2] = ids[2].split("\t")[0]
    linked = run(narrow, "neighbours", ids[0], "--direction", "in", "--root", root).stdout.splitlines()
    fits_but_ids(linked, columns, [ids[2], ids[0]])
    if columns == 100:
        assert f"│ 1     │ in  │ {ids[2]}" in linked[3]
        assert f"│       │     │ sequential · via {ids[0]} ·" in linked[4]
    else:  # the id and `sequential · via ID` do not fit beside the depth and dir
        assert linked[:2] == ["id / depth · dir · type · title / via", ids[2]]
        assert linked[2].startswith("  1 · in · sequential · 发布流程的第二")
        assert linked[3] == f"  via {ids[0]}"
    hand = "手写的笔记-关于数据库连接池的配置-handwritten-note-on-pool-settings"
    gone = "不存在的节点-一个很长的名字-that-does-not-exist-anywhere"
    text = f"---\nid: {hand}\nlayer: self\nedges:\n  - target: {gone}\n    type: similar\n---\n连接池\n"
    (root / "self" / f"{hand}.md").write_text(text, encoding="utf-8")
    run(narrow, "sync", "--root", root)
    report = narrow.invoke(app, ["health", "--root", str(root)]).stdout.splitlines()
    fits_but_ids(report, columns, [hand])
    want = f"similar edge to '{gone}', which is not in the store (self/{hand}.md)"
    if columns == 100:
        assert report[-1].startswith("└")
        folded = "".join(line.split("│")[3].strip() for line in report if line.startswith("│"))
        assert folded.replace(" ", "") == (hand + want).replace(" ", "")  # wrapped at spaces, folded in ids
    else:
        at = report.index("severity · kind · node / detail")  # after the verdict (wrapped at 40)
        assert report[at + 1] == f"warning · dangling_edge · {hand}"
        assert "".join(line.strip() for line in report[at + 2 :]).replace(" ", "") == want.replace(" ", "")
    found = run(narrow, "search", "预发环境 回归测试", "--root", root).stdout.splitlines()
    fits_but_ids(found, columns, ids[:1])
    if columns == 40:
        assert found[:3] == [
            "#. id / score · tier · state · title",
            f"1. {ids[0]}",
            "  12.09 · T2 · DEFER · 部署前先在预发环…",
        ]
    else:
        assert "│ 1 │" in found[3] and f"│ {ids[0]}" in found[3]
        assert "│ T2 · " in found[4] and "部署前先在预发" in found[4]


def test_a_wide_terminal_keeps_one_line_per_memory(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "m"
    run(runner, "init", "--root", root)
    node_id = run(runner, "add", "短的 note", "--root", root, "-l", "self", "-t", "x").stdout.split("\t")[0]
    lines = run(runner, "list", "--root", root).stdout.splitlines()
    assert "updated" in lines[1] and "layer" in lines[1] and "title" in lines[1]
    assert f" │ self  │ {node_id} │ x    │ 短的 note" in lines[3]
    assert lines[4].startswith("└") and lines[5] == "1-1 of 1"


def test_add_does_not_store_an_identical_memory_twice(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "m"
    run(runner, "init", "--root", root)
    body = "用户偏好：回答用中文，代码注释用英文"
    first = run(runner, "add", body, "--root", root, "-l", "self").stdout
    node_id, path = first.rstrip("\n").split("\t")
    files = sorted(p.name for p in root.rglob("*.md"))
    again = run(runner, "add", body + "  \n", "--root", root, "-l", "self")
    assert again.stdout == first
    assert again.stderr == (
        f"{node_id}: an identical memory is already in self/; nothing was written "
        "(--duplicate stores another)\n"
    )
    assert sorted(p.name for p in root.rglob("*.md")) == files
    assert run_json(runner, "add", body, "--root", root, "-l", "self") == {
        "id": node_id,
        "layer": "self",
        "path": path,
        "existing": True,
        "tier": "long",
        "expires": None,
        "unknown_targets": [],
    }
    other = run_json(runner, "add", body, "--root", root, "-l", "contextual")  # another layer
    assert other["existing"] is False and other["id"] != node_id
    forced = run(runner, "add", body, "--root", root, "-l", "self", "--duplicate")
    assert forced.stderr == "" and forced.stdout.split("\t")[0] not in (node_id, other["id"])
    named = run_json(runner, "add", body, "--root", root, "-l", "self", "--id", "lang_pref")
    assert (named["id"], named["existing"]) == ("lang_pref", False)  # a name given is stored as asked
    assert len(list(root.rglob("*.md"))) == len(files) + 3


def test_add_says_when_a_one_off_expires_and_tier_keeps_it(runner: CliRunner, root: Path) -> None:
    """A one-off ("tomorrow at 9") is stored as temporary: `add` says when it goes and how
    to keep it; --tier long / temp decide instead, and `update --tier` changes it."""
    one_off = "Reminder: the dentist appointment is tomorrow at 9am."
    added = run(runner, "add", one_off, "--root", root)
    node_id = added.stdout.split("\t")[0]
    with MdCG(root, read_only=True) as s:
        node = s.get(node_id, include_expired=True)
    assert node.retention_tier == "temp" and node.expires_at is not None
    assert added.stderr == (
        f"{node_id}: temporary, expires {iso(node.expires_at)} ({node.retention_reason}); "
        f"`mdcg update {node_id} --tier long` keeps it\n"
    )
    data = run_json(runner, "add", "Reminder: call Bo tomorrow.", "--root", root)
    assert (data["tier"], data["expires"][:2]) == ("temp", "20")
    kept = run_json(runner, "add", "Reminder: buy milk tomorrow.", "--tier", "long", "--root", root)
    assert (kept["tier"], kept["expires"]) == ("long", None)
    plain = run(runner, "add", "The user likes green tea.", "--root", root)
    assert plain.stderr == ""  # a memory kept says nothing
    up = run_json(runner, "update", node_id, "--tier", "long", "--root", root)
    assert (up["updated"], up["tier"], up["expires"]) == (["tier"], "long", None)
    again = run(runner, "update", node_id, "--tier", "temp", "--root", root)
    with MdCG(root, read_only=True) as s:
        node = s.get(node_id)
    assert node.retention_reason == "the caller asked for the temp tier"  # not the first decision's
    assert again.stderr.startswith(f"{node_id}: temporary, expires {iso(node.expires_at)} (the caller asked")
    typo = run(runner, "add", "--id", "e", "--edge", "appels:causal", "typo", "--root", root)
    assert typo.stderr == (
        "e: edge target 'appels' is not in the store (stored anyway; `mdcg health` lists dangling edges)\n"
    )
    assert (
        run_json(runner, "add", "--id", "f", "--edge", "e:causal", "x y", "--root", root)["unknown_targets"]
        == []
    )
    assert "retention tier must be one of temp, long" in one_line_error(
        runner, "add", "x y", "--tier", "forever", "--root", root
    )


# -- errors that name the file, options out of range, and output cut short ---------------------


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file-name limits and symlinks")
def test_os_errors_are_one_line_naming_the_file(runner: CliRunner, root: Path, tmp_path: Path) -> None:
    """A file name too long or a symlink loop is one `error:` line naming the path, exit 2."""
    long = tmp_path / ("a" * 300)
    too_long = f"error: {long}: File name too long"
    for args in (("--root", long, "list"), ("--root", long, "init"), ("--root", long, "add", "a note")):
        assert one_line_error(runner, *args) == too_long
    assert one_line_error(runner, "--root", root, "export", "--out", long) == too_long
    assert one_line_error(runner, "--root", root, "edit", "kp_sorting", "--from", long) == too_long
    # a name that fits, whose temp file beside it does not: the error names the file asked for
    longest = tmp_path / ("b" * 250)
    assert one_line_error(runner, "--root", root, "export", "--out", longest) == (
        f"error: {longest}: File name too long"
    )
    loop = tmp_path / "l1"
    loop.symlink_to(tmp_path / "l2")
    (tmp_path / "l2").symlink_to(loop)
    looped = f"error: {loop}: Too many levels of symbolic links"
    assert one_line_error(runner, "--root", root, "edit", "kp_sorting", "--from", loop) == looped
    assert one_line_error(runner, "--root", root, "organize", "--dry-run", loop) == looped
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l1", "l2", "memory"]  # nothing made


def test_an_os_error_no_system_call_raised_keeps_its_traceback(
    runner: CliRunner, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(self: MdCG, deep: bool = False) -> None:
        raise OSError("a bug that raises OSError itself")

    monkeypatch.setattr(MdCG, "health", boom)
    result = runner.invoke(app, ["health", "--root", str(root)])
    assert result.exit_code == 1 and isinstance(result.exception, OSError)


def test_a_file_as_store_and_a_folder_as_export_target_are_named(
    runner: CliRunner, root: Path, tmp_path: Path
) -> None:
    note = tmp_path / "f"
    note.write_text("hi\n")
    for command in (("list",), ("add", "a note"), ("init",)):
        assert one_line_error(runner, "--root", note, *command) == (
            f"error: {note}: is a file, not a store folder (point --root / $MDCG_ROOT at a store "
            "folder, or at a new one to create)"
        )
    before = sorted(p.name for p in tmp_path.iterdir())
    assert one_line_error(runner, "--root", root, "export", "--out", tmp_path) == (
        f"error: --out {tmp_path}: is a folder; give the path of a file"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before and note.read_text() == "hi\n"


def test_init_git_outside_a_work_tree_creates_nothing(tmp_path: Path) -> None:
    outside = CliRunner(env={"MDCG_ROOT": None, "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    for target in (tmp_path / "g", tmp_path / "g" / "sub" / "deeper"):
        line = one_line_error(outside, "init", "--git", "--root", target)
        assert line.startswith(
            f"error: {target} is not inside a git work tree (git rev-parse --show-toplevel in "
        )
        assert "fatal: not a git repository" in line
        assert line.endswith("); run git init or clone first (nothing was created)")
        assert not (tmp_path / "g").exists()


def test_stats_refuses_days_out_of_range(runner: CliRunner, root: Path) -> None:
    for option, value, low in (
        ("--window-days", 0, 1),
        ("--window-days", -5, 1),
        ("--window-days", 366, 1),
        ("--exempt-days", -1, 0),
        ("--exempt-days", 366, 0),
    ):
        assert one_line_error(runner, "stats", option, value, "--root", root) == (
            f"error: {option} must be from {low} to 365 days, got {value}"
        )
    data = run_json(runner, "stats", "--window-days", 365, "--exempt-days", 0, "--root", root)
    assert (data["options"]["window_days"], data["options"]["exempt_days"]) == (365, 0)
    assert run_json(runner, "stats", "--window-days", 1, "--root", root)["options"]["window_days"] == 1


def test_since_and_until_out_of_what_a_date_shows_are_refused(runner: CliRunner, root: Path) -> None:
    assert one_line_error(runner, "search", "sorting", "--since", "99999999d", "--root", root) == (
        "error: --since '99999999d' is out of range: the time must fall in the years 1 to 9999 (UTC)"
    )
    assert one_line_error(runner, "list", "--until", "9999-12-31T23:59:59-05:00", "--root", root) == (
        "error: --until '9999-12-31T23:59:59-05:00' is out of range: the time must fall in the years "
        "1 to 9999 (UTC)"
    )
    assert one_line_error(runner, "export", "--since", "+10000-01-01", "--root", root).startswith(
        "error: --since '+10000-01-01': expected an ISO date or time"
    )
    data = run_json(runner, "search", "sorting", "--since", "0001-01-01", "--root", root)
    assert data["meta"]["filter"]["since"] == datetime(1, 1, 1, tzinfo=UTC).timestamp()


def test_an_id_given_twice_is_archived_and_counted_once(runner: CliRunner, root: Path) -> None:
    out = run(runner, "archive", "kp_sorting", "anc_rule", "kp_sorting", "--root", root).stdout
    assert out == "archived 2: kp_sorting, anc_rule\n"
    assert run_json(runner, "unarchive", "anc_rule", "anc_rule", "--root", root) == {
        "unarchived": ["anc_rule"]
    }
    assert run(runner, "unarchive", "kp_sorting", "kp_sorting", "--root", root).stdout == (
        "unarchived 1: kp_sorting\n"
    )


def test_health_of_an_empty_store(runner: CliRunner, tmp_path: Path) -> None:
    run(runner, "init", "--root", tmp_path / "e")
    assert run(runner, "health", "--root", tmp_path / "e").stdout == (
        "health: OK · empty store (0 nodes) · no buckets\n"
    )


def test_sync_leaves_a_duplicate_in_place_and_exits_1(runner: CliRunner, root: Path) -> None:
    """What docs/cli.md says of sync: a second file with an id is listed, never moved; exit 1."""
    with MdCG(root, read_only=True) as store:
        path = store.path_of("kp_sorting")
    copy = root / "contextual" / "kp_sorting.md"
    copy.write_text('---\nid: "kp_sorting"\nlayer: "contextual"\n---\nan older copy\n', encoding="utf-8")
    out = run(runner, "sync", "--root", root, code=1).stdout
    assert (
        "duplicate ids (keep both: mdcg rename ID NEW_ID --path FILE; or remove a copy) (1): "
        "kp_sorting at contextual/kp_sorting.md\n" in out
    )
    assert copy.exists() and path.exists() and not (root / ".mdcg" / "trash").exists()
    assert run(runner, "sync", "--root", root, code=1).stdout.startswith("duplicate ids")  # still there


def test_titles_tags_and_ids_are_printed_as_typed(root: Path) -> None:
    """`[bold]` and `:smile:` in a memory are text, not styling or an emoji, in every table."""
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})  # no title wraps
    body = "Smile :smile: [bold]x[/bold] sorting"
    node_id = run(runner, "add", body, "-t", ":smile:", "--id", "kp_[bold]x", "--root", root).stdout
    node_id = node_id.split("\t")[0]
    assert node_id == "kp_[bold]x"
    run(runner, "update", "kp_sorting", "--tag", "[red]t[/red]", "--root", root)
    listed = run(runner, "list", "--root", root).stdout
    found = run(runner, "search", "smile sorting", "--tag", ":smile:", "--root", root).stdout
    linked = run(runner, "neighbours", "kp_sorting", "--direction", "in", "--root", root).stdout
    for out in (listed, found):
        assert "😄" not in out and f"│ {node_id} " in out and body in out
    assert "[red]t[/red]" in listed and "filter: tag :smile: (1 memory passes)" in found
    assert "│ kp_bsearch │ kp_sorting │" in linked


def _closed_early(root: Path, *args: str) -> tuple[int, str]:
    """Run mdcg with stdout a pipe; read one line and close it; the exit status and stderr."""
    env = {**os.environ, "COLUMNS": "80", "MDCG_ROOT": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "md_cg.cli", "--root", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode("utf-8", "replace")
    return proc.wait(timeout=60), err


def test_a_reader_closing_the_pipe_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """`mdcg list | head -1` on a store whose listing overflows the pipe's buffer (64 KiB)."""
    root = tmp_path / "m"
    with MdCG(root, create=True) as store:
        store.add_many(
            [
                Node(id=f"note-about-apples-and-preferences-{i:04d}", body=f"Note {i}: the user likes apples")
                for i in range(600)
            ]
        )
    for args in (("list", "-n", "600"), ("search", "apples", "-k", "600", "--no-record"), ("export",)):
        for _ in range(3):
            status, err = _closed_early(root, *args)
            assert (status, err) == (0, ""), args


def test_export_names_what_it_could_not_read_and_add_keeps_an_archived_id(
    runner: CliRunner, root: Path
) -> None:
    """`mdcg export` left a broken memory out of a backup with exit 0; `add --overwrite`
    replaced an archived memory (its text gone), and without it the hint named `update`."""
    run(runner, "add", "--id", "g", "Good two.", "--root", root)
    run(runner, "add", "--id", "h", "Fine.", "--root", root)
    g = root / "knowledge" / "orphan" / "g.md"
    g.write_text(g.read_text(encoding="utf-8").replace('layer: "knowledge"', "layer: [broken"), "utf-8")
    out = run(runner, "export", "--root", root, code=1)
    exported = [json.loads(line)["id"] for line in out.stdout.splitlines()]
    assert "h" in exported and "g" not in exported and exported == sorted(exported)
    assert out.stderr.startswith("not exported: knowledge/orphan/g.md: the YAML frontmatter does not parse")
    assert out.stderr.count("\n") == 1
    run(runner, "archive", "h", "--root", root)
    for extra in ((), ("--overwrite",)):
        assert one_line_error(runner, "add", "--id", "h", "new", *extra, "--root", root) == (
            "error: node id 'h' is held by an archived memory (archive/knowledge/orphan/h.md); "
            "`mdcg unarchive h` brings it back to change it, or choose another id (--overwrite never "
            "replaces an archived memory)"
        )
    assert (
        (root / "archive" / "knowledge" / "orphan" / "h.md").read_text(encoding="utf-8").endswith("Fine.\n")
    )


def test_sync_names_a_forgotten_memory_back_and_keep_settles_it(runner: CliRunner, root: Path) -> None:
    """A forgotten memory whose file came back was taken in with 'in sync' and exit 0
    (a pull's hook said nothing), and nothing could 'keep it' as health advised."""
    with MdCG(root) as s:
        rel = s.entry("kp_bsearch").path
        text = (root / rel).read_bytes()
    run(runner, "forget", "kp_bsearch", "--reason", "wrong", "--force", "--root", root)
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(text)
    out = run(runner, "sync", "--root", root, code=1).stdout.splitlines()
    assert out == [
        "added (1): kp_bsearch",
        f"forgotten here and back (forget again, or mdcg keep) (1): kp_bsearch at {rel}",
    ]
    assert (
        run(runner, "keep", "kp_bsearch", "--root", root).stdout
        == "kp_bsearch: kept (no longer reported as forgotten and back)\n"
    )
    assert "forgotten_returned" not in run(runner, "health", "--root", root, "--json").stdout
    err = run(runner, "keep", "kp_bsearch", "--root", root, code=2).stderr
    why = "is not a memory forgotten in this clone whose file came back; nothing to keep"
    assert err == f"error: 'kp_bsearch' {why}\n"


_CONFLICTED = '{\n<<<<<<< HEAD\n  "ttl_seconds": 60\n=======\n  "ttl_seconds": 90\n>>>>>>> other\n}\n'


def test_sync_names_a_settings_file_a_merge_left_conflicted(runner: CliRunner, root: Path) -> None:
    """Conflict markers in a committed settings file (.mdcg/retention.json, synonyms.json,
    retention_markers.json) were named by health but not by sync: it printed "in sync:
    nothing changed" and exited 0, so the post-merge hook said nothing."""
    run(runner, "compact", "--root", root)
    assert run(runner, "sync", "--root", root).stdout == "in sync: nothing changed\n"
    for name in ("retention.json", "synonyms.json", "retention_markers.json"):
        (root / ".mdcg" / name).write_text(_CONFLICTED, encoding="utf-8")
    out = run(runner, "sync", "--root", root, code=1).stdout
    conflict = "unresolved git merge conflict (conflict marker at line 2); resolve it and save"
    assert out.splitlines() == [
        "settings files md-cg cannot use (fix them) (3): "
        f".mdcg/synonyms.json: {root}/.mdcg/synonyms.json: invalid synonym file: {conflict}; "
        "searching with the shipped synonym table instead, "
        f".mdcg/retention.json: {root}/.mdcg/retention.json: {conflict}; "
        "writes that decide retention fail until it is fixed, "
        f".mdcg/retention_markers.json: {root}/.mdcg/retention_markers.json: "
        f"invalid retention marker file: {conflict}; "
        "no memory is made temporary automatically until it is fixed"
    ]
    data = run_json(runner, "sync", "--root", root, code=1)
    assert (data["clean"], data["problems"]) == (True, True)
    assert [s["path"] for s in data["settings"]] == [
        ".mdcg/synonyms.json", ".mdcg/retention.json", ".mdcg/retention_markers.json"
    ]  # fmt: skip
    (root / ".mdcg" / "retention.json").write_text('{"ttl_seconds": 90}\n', encoding="utf-8")
    (root / ".mdcg" / "synonyms.json").unlink()
    (root / ".mdcg" / "retention_markers.json").unlink()
    assert run(runner, "sync", "--root", root).stdout == "in sync: nothing changed\n"
