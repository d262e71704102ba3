"""What the docs say of the node format, the sync report, access counts, retention and
migration holds for the code (review session 26: each of these texts had drifted)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import REPO
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.cli import app
from md_cg.node import FIELD_ORDER
from md_cg.nodefile import dumps
from md_cg.reports import SyncReport

ACCESS_COUNTS = Path(".mdcg") / "access" / "counts.json"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})


def doc(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


def flat(text: str) -> str:
    """The text with every run of white space one space (docs wrap their lines anywhere)."""
    return " ".join(text.split())


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a Markdown heading line), up to the next heading of any level."""
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    end = re.compile(r"^#{1,6} ", re.M).search(text, start)
    return text[start : end.start() if end else len(text)]


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


# -- mcp --root refuses a file as every command does -------------------------------------


def test_mcp_refuses_a_file_as_store_in_the_common_words(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cli.md: every command refuses a file as its store folder with one message;
    `mcp` said `error: /abs/notes.txt: not a folder` (the engine's words) instead."""
    pytest.importorskip("mcp")
    import md_cg.mcp_server

    started: list[Path] = []
    monkeypatch.setattr(md_cg.mcp_server, "run_server", lambda root, **_kw: started.append(root))
    note = tmp_path / "notes.txt"
    note.write_text("not a store\n")
    expected = (
        f"error: {note}: is a file, not a store folder (point --root / $MDCG_ROOT at a store "
        "folder, or at a new one to create)"
    )
    for args in (["mcp", "--root", str(note)], ["--root", str(note), "mcp"]):
        result = runner.invoke(app, args)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", expected + "\n")
    assert started == [] and note.read_text() == "not a store\n"
    # a missing folder is still served (created), as docs/cli.md says
    result = runner.invoke(app, ["mcp", "--root", str(tmp_path / "new")])
    assert (result.exit_code, started) == (0, [tmp_path / "new"])


# -- compact --access never writes a node file --------------------------------------------


def test_compact_access_folds_into_counts_json_not_the_node_files(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="n1", body="Binary search halves the interval")
        path = store.path_of("n1")
        assert [r.id for r in store.search("binary search")[0]] == ["n1"]
    before = path.read_bytes()
    result = runner.invoke(app, ["--root", str(root), "compact", "--access"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "access log folded: 1 access(es) into 1 node(s)"
    assert path.read_bytes() == before
    assert json.loads((root / ACCESS_COUNTS).read_text())["counts"] == {"n1": 1}
    with MdCG(root) as store:
        assert store.access_counts() == {"n1": 1} and store.get("n1").access_count is None

    help_text = flat(runner.invoke(app, ["compact", "--help"]).stdout)
    assert (
        "--access Also fold the access log into .mdcg/access/counts.json (the .md files never change)."
        in (help_text)
    )
    assert "frontmatter" not in help_text
    cli_doc = flat(section(doc("docs/cli.md"), "### `mdcg compact`"))
    assert "local access counts, `.mdcg/access/counts.json` (`MdCG.compact_access`)" in cli_doc
    assert "The `.md` files never change" in cli_doc
    assert "folds the access log into the nodes'" not in cli_doc
    row = next(r for r in doc("docs/format.md").splitlines() if r.startswith("| `access_count`"))
    assert "never set or changed by md-cg" in row and "folded in by" not in row


# -- docs/format.md: the fields, their order, the names it cites -------------------------


def _full_node() -> Node:
    fields: dict[str, Any] = {
        "id": "a", "layer": "knowledge", "body": "b", "modality": "text", "importance": 0.5,
        "confidence": 0.5, "condition_space": {"x": 1}, "tags": ["t"], "sensitivity": "private",
        "agent_scope": "ag", "workspace_scope": "ws", "spatial": 1, "temporal": "one_off",
        "retention_tier": "temp", "retention_reason": "r", "expires_at": 2e9, "valid_until": 2e9,
        "created_at": 1.5e9, "updated_at": 1.6e9, "semantic_coordinates": [1],
        "state_attributes": {"a": 1}, "entity_id": "e", "verification_basis": "test",
        "non_applicable_conditions": ["c"], "edges": [{"target": "z", "type": "similar"}],
        "verification_history": [{"a": 1}], "access_count": 3, "last_access": 1.7e9,
        "extra": {"zzz": 1, "renamed_from": ["q"]},
    }  # fmt: skip
    return Node(**fields)


def _written_keys(text: str) -> list[str]:
    front = text.split("---\n")[1]
    return [line.partition(":")[0] for line in front.splitlines()]


def test_format_key_order_is_the_writers(tmp_path: Path) -> None:
    text = flat(doc("docs/format.md"))
    stated = re.search(
        r"Key order when written \(`md_cg\.node\.FIELD_ORDER`\): `([^`]+)`, then the extra keys", text
    )
    assert stated is not None
    order = [k.strip() for k in stated.group(1).split(",")]
    assert order == list(FIELD_ORDER)
    assert _written_keys(dumps(_full_node())) == [*order, "zzz", "renamed_from"]
    # `renamed_from` is an extra key: a first rename puts it after the extra keys already there
    with MdCG(tmp_path / "m") as store:
        store.add(Node(id="a", body="x", extra={"zzz": 1}))
        node = store.rename("a", "b")
        assert _written_keys(store.read_text("b")) == [
            "id",
            "layer",
            "created_at",
            "updated_at",
            "zzz",
            "renamed_from",
        ]
        assert node.extra == {"zzz": 1, "renamed_from": ["a"]}


def test_format_fields_table_names_every_field() -> None:
    table = section(doc("docs/format.md"), "### Fields")
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    named = {k for r in rows for k in backticked(r.split(" | ")[0])}
    assert set(FIELD_ORDER) | {"renamed_from"} <= named
    assert {f.name for f in dataclasses.fields(Node)} - {"body", "extra"} <= named


def test_format_dotted_names_exist() -> None:
    """Every `md_cg.module.name` docs/format.md cites is there (it named md_cg.node.id_key,
    which lives in md_cg.paths)."""
    names = set(re.findall(r"`(md_cg(?:\.\w+)+)(?:\([^`]*\))?`", doc("docs/format.md")))
    assert "md_cg.paths.id_key" in names and "md_cg.node.id_key" not in names
    missing = []
    for name in sorted(names):
        module, _, attr = name.rpartition(".")
        try:
            found = hasattr(importlib.import_module(module), attr)
        except ImportError:
            found = importlib.util.find_spec(name) is not None
        if not found:
            missing.append(name)
    assert missing == []


# -- docs/api.md: the Node signature, the retention paragraph -----------------------------


def test_api_node_signature_is_the_dataclass() -> None:
    text = flat(doc("docs/api.md"))
    sig = re.search(r"`Node\((id, [^`]*)\)` — a dataclass", text)
    assert sig is not None
    call = ast.parse(f"f({sig.group(1)})", mode="eval").body
    assert isinstance(call, ast.Call)
    first = call.args[0]
    assert isinstance(first, ast.Name) and len(call.args) == 1
    stated: list[tuple[str | None, Any]] = [(first.id, dataclasses.MISSING)]
    stated += [(k.arg, ast.literal_eval(k.value)) for k in call.keywords]

    def default(f: dataclasses.Field[Any]) -> Any:
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        return f.default

    assert stated == [(f.name, default(f)) for f in dataclasses.fields(Node)]


def test_api_retention_paragraph_tells_the_default_apart(tmp_path: Path) -> None:
    """docs/api.md said every created node gets retention fields unless the caller gave a
    tier; a plain note gets none (`default_long`), and a given tier gets them too."""
    with MdCG(tmp_path / "m") as store:
        store.add(body="Alice lives in Paris", id="a")
        store.add(body="Buy milk", id="b", tier="temp")
        plain = store.read_text("a")
        b = store.get("b")
        rules = {r["id"]: r["rule"] for r in store.log("retention").read()}
    assert not re.search(r"^(retention_tier|retention_reason|expires_at):", plain, re.M)
    assert (b.retention_tier, b.retention_reason, b.expires_at is not None) == (
        "temp",
        "the caller asked for the temp tier",
        True,
    )
    assert rules == {"a": "default_long", "b": "explicit_tier"}
    text = flat(doc("docs/api.md"))
    assert 'plain `add(body="Alice lives in Paris")`): it writes no retention field at all' in text
    assert "`retention_reason` are set unless the caller gave a tier" not in text


# -- the settings part of a sync report ---------------------------------------------------


def test_sync_settings_are_documented_where_the_report_is(runner: CliRunner, tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="n1", body="a note")
    (root / ".mdcg" / "retention.json").write_text("{bad")
    result = runner.invoke(app, ["--root", str(root), "sync", "--json"])
    report = json.loads(result.stdout)
    assert (result.exit_code, report["problems"], [s["path"] for s in report["settings"]]) == (
        1,
        True,
        [".mdcg/retention.json"],
    )
    exit_text = flat(section(doc("docs/cli.md"), "### `mdcg sync`"))
    assert "or a committed settings file md-cg cannot use (`.mdcg/synonyms.json`, `.mdcg/retention.json`" in (
        exit_text
    )
    api = flat(doc("docs/api.md"))
    row = re.search(r"\| `sync\(\) -> SyncReport` \| .*?: `([a-z_, ]+)` \(", api)
    assert row is not None
    assert {f.strip() for f in row.group(1).split(",")} == {f.name for f in dataclasses.fields(SyncReport)}
    mcp_doc = flat(section(doc("docs/mcp.md"), "### `sync`"))
    keys = re.search(r"Reply: `\{([^}]*)\}`", mcp_doc)
    assert keys is not None
    stated = [k.strip().strip('"') for k in keys.group(1).split(",")]
    assert set(stated) == {"clean", "problems", "totals", *SyncReport().to_dict()}
    assert '`settings`: `{"path", "problem"}`' in mcp_doc


def test_mcp_sync_reply_has_the_documented_keys(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from mcp.types import TextContent

    from md_cg.mcp_server import create_server

    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="n1", body="a note")
    (root / ".mdcg" / "retention.json").write_text("{bad")
    server = create_server(root)

    async def run() -> dict[str, Any]:
        async with Client(server) as client:
            reply = await client.call_tool("sync", {})
            content = reply.content[0]
            assert isinstance(content, TextContent)
            data: dict[str, Any] = json.loads(content.text)
            return data

    reply = anyio.run(run)
    keys = re.search(r"Reply: `\{([^}]*)\}`", flat(section(doc("docs/mcp.md"), "### `sync`")))
    assert keys is not None
    assert set(reply) == {k.strip().strip('"') for k in keys.group(1).split(",")}
    assert (reply["problems"], [s["path"] for s in reply["settings"]]) == (True, [".mdcg/retention.json"])


# -- docs/migration.md: the installed command and its options -----------------------------


def _migration_options() -> list[tuple[list[str], str]]:
    table = section(doc("docs/migration.md"), "## How to migrate")
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    return [(re.findall(r"`(-[-\w]+)", r.split(" | ")[0]), r.split(" | ", 1)[1]) for r in rows]


def test_migration_options_table_is_both_commands_help() -> None:
    group = typer.main.get_command(app)
    command = group.commands["migrate"]  # type: ignore[attr-defined]
    mdcg_flags = {o for p in command.params for o in p.opts if p.param_type_name == "option"} - {
        "-h",
        "--help",
    }
    spec = importlib.util.spec_from_file_location("migrate_wrapper", REPO / "migrate" / "__init__.py")
    assert spec is not None and spec.loader is not None
    wrapper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrapper)
    parser = wrapper.build_parser()
    argparse_flags = {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"}

    rows = _migration_options()
    documented_mdcg = {f for flags, text in rows if "`python -m migrate` only" not in text for f in flags}
    documented_module = {f for flags, text in rows if "`mdcg migrate` only" not in text for f in flags}
    assert documented_mdcg == mdcg_flags
    assert documented_module == argparse_flags
    assert mdcg_flags ^ argparse_flags == {"-q", "--quiet", "--no-progress"}


def test_migration_doc_leads_with_the_installed_command() -> None:
    block = section(doc("docs/migration.md"), "## How to migrate").split("```sh\n")[1].split("```")[0]
    assert [line.split()[:2] for line in block.splitlines()] == [["mdcg", "migrate"]] * 3
