"""``mdcg import``'s messages when it refuses (review r2, session 33).

(a) An import refused for more than 10 bad records named 10 and then ``... and 2 more``
with no pointer, and ``--json`` printed nothing on stdout: only ``--skip-bad --dry-run
--json`` listed the rest. Now ``--json`` prints ``{"error", "problems"}`` listing every
record at fault (a bad record's overlong id cut), and the count line says where to look.
(b) A record whose id an archived memory holds was refused with the hint
``(--overwrite replaces other content)``, also when ``--overwrite`` was given; an archived
memory is never replaced: the header now says what to do instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Node
from md_cg.cli import app

#: The records of review r2's nested.py: 12 bad ones (lines 1-10, 13, 14), 2 good.
NESTED = [
    '{"id": "n1", "body": "x", "tags": ["ok", 5]}',
    '{"id": "n2", "body": "x", "edges": [{"target": "a", "type": "bogus"}]}',
    '{"id": "n3", "body": "x", "edges": [{"target": "a", "confidence": "high"}]}',
    '{"id": "n4", "body": "x", "verification_history": [1, 2]}',
    '{"id": "n5", "body": "x", "expires_at": "tomorrow"}',
    '{"id": "n6", "body": "x", "retention_tier": "forever"}',
    '{"id": "n7", "body": "x", "sensitivity": "ultra"}',
    '{"id": "n8", "body": "x", "non_applicable_conditions": [null]}',
    '{"id": "n9", "body": "x", "access_count": -5}',
    '{"id": "n10", "body": "x", "mdcg:custom": "notadict"}',
    '{"id": "n11", "body": "x", "edges": [{"target": "n11"}]}',
    '{"id": "n12", "text": "x", "body": "y"}',
    '{"id": "n13", "body": "x", "updated_at": "2024-13-45"}',
    '{"id": "n14", "body": "x", "k": "\\udc00"}',
]
ISO = (
    "is not an ISO 8601 date or time (e.g. 2026-11-30T23:59:20Z) "
    "(an instant: seconds since the epoch or ISO 8601)"
)
HELD = "id 'kp_old' is held by an archived or expired memory (archive/knowledge/orphan/kp_old.md)"
#: (where, node_id, reason) of each bad record of NESTED, in source order
NESTED_BAD = [
    ("line 1", "n1", "field 'tags' must be a list of strings (got ['ok', 5])"),
    (
        "line 2",
        "n2",
        "field 'edges' has an edge type outside part_of, causal, sequential, spatial, hierarchical, "
        "similar, supersedes (got 'bogus')",
    ),
    ("line 3", "n3", "field 'edges' has an edge confidence that is not a finite number (got 'high')"),
    ("line 4", "n4", "field 'verification_history' must be a list of objects (got [1, 2])"),
    ("line 5", "n5", f"field 'expires_at' {ISO} (got 'tomorrow')"),
    ("line 6", "n6", "field 'retention_tier' must be one of temp, long (or absent) (got 'forever')"),
    (
        "line 7",
        "n7",
        "field 'sensitivity' must be one of public, normal, private, secret (or absent) (got 'ultra')",
    ),
    ("line 8", "n8", "field 'non_applicable_conditions' must be a list of strings (got [None])"),
    ("line 9", "n9", "field 'access_count' must be a non-negative 64-bit integer (got -5)"),
    ("line 10", "n10", "field 'mdcg:custom' must be an object of custom keys (got str)"),
    ("line 13", "n13", f"field 'updated_at' {ISO} (got '2024-13-45')"),
    ("line 14", None, "not JSON: invalid high surrogate in string (column 34)"),
]
ARCHIVED_HINT = (
    "an archived memory is never replaced, not even with --overwrite: unarchive it first, "
    "or give the record another id"
)


def cli(*args: Any) -> Any:
    runner = CliRunner(env={"MDCG_ROOT": None})
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def _nested(tmp_path: Path) -> Path:
    source = tmp_path / "nested.jsonl"
    source.write_text("".join(line + "\n" for line in NESTED), encoding="utf-8")
    return source


def _store(root: Path) -> list[str]:
    """A store holding one memory; returns its file listing."""
    with MdCG(root) as store:
        store.add(id="keep1", layer="knowledge", body="保留的记忆 keep me")
    return _listing(root)


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".mdcg" not in p.parts)


def _stderr_lines(source: Path, bad: list[tuple[str, str | None, str]], count_line: str) -> list[str]:
    return [
        f"error: {source}: {len(bad)} bad record(s); nothing was imported",
        *(f"  {source}: {where}: {reason}" for where, _id, reason in bad[:10]),
        count_line,
    ]


# -- (a) every bad record of a refused import ---------------------------------------------


def test_a_refused_import_lists_every_bad_record_in_its_json(tmp_path: Path) -> None:
    root, source = tmp_path / "m", _nested(tmp_path)
    before = _store(root)
    result = cli("import", source, "--root", root, "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "error": f"{source}: 12 bad record(s); nothing was imported",
        "problems": [{"where": w, "node_id": i, "reason": r} for w, i, r in NESTED_BAD],
    }
    assert result.stderr.splitlines() == _stderr_lines(
        source, NESTED_BAD, "  ... and 2 more (the JSON on stdout lists them all)"
    )
    assert _listing(root) == before


def test_a_refused_import_says_how_to_see_the_records_past_ten(tmp_path: Path) -> None:
    root, source = tmp_path / "m", _nested(tmp_path)
    _store(root)
    result = cli("import", source, "--root", root)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == _stderr_lines(
        source, NESTED_BAD, "  ... and 2 more (--json lists them all)"
    )


def test_ten_bad_records_have_no_count_line(tmp_path: Path) -> None:
    root, source = tmp_path / "m", tmp_path / "ten.jsonl"
    _store(root)
    source.write_text("".join(line + "\n" for line in NESTED[:10]), encoding="utf-8")
    result = cli("import", source, "--root", root)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == _stderr_lines(source, NESTED_BAD[:10], "")[:-1]


def test_a_refused_first_import_lists_every_bad_record_and_makes_no_store(tmp_path: Path) -> None:
    """The first import into a folder not made yet fails in its dry run into an empty
    store (``_checked_first``): the same listing, and no store is left."""
    root, source = tmp_path / "new", _nested(tmp_path)
    result = cli("import", source, "--root", root, "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["problems"] == [
        {"where": w, "node_id": i, "reason": r} for w, i, r in NESTED_BAD
    ]
    assert result.stderr.splitlines()[-1] == "  ... and 2 more (the JSON on stdout lists them all)"
    assert not root.exists()


def test_an_overlong_id_of_a_bad_record_is_cut_in_the_json(tmp_path: Path) -> None:
    """A record may give a megabyte of id: the listing of it stays short, refused or
    skipped (``--skip-bad``'s report listed the whole id)."""
    root, source = tmp_path / "m", tmp_path / "long.jsonl"
    _store(root)
    long_id = "b" * 100_000
    source.write_text(
        json.dumps({"id": long_id, "body": "x"}) + '\n{"id": "fine", "body": "y"}\n', encoding="utf-8"
    )
    reason = (
        f"unsafe node id '{'b' * 77}...{'b' * 78}': it is 100000 characters long (max 128); "
        "ids must be safe file-name stems"
    )
    listed = [{"where": "line 1", "node_id": "b" * 128 + "...", "reason": reason}]
    refused = cli("import", source, "--root", root, "--json")
    assert refused.exit_code == 2
    assert json.loads(refused.stdout) == {
        "error": f"{source}: 1 bad record(s); nothing was imported",
        "problems": listed,
    }
    assert len(refused.stdout) < 1_000
    skipped = cli("import", source, "--root", root, "--json", "--skip-bad")
    assert skipped.exit_code == 0
    data = json.loads(skipped.stdout)
    assert (data["bad"], data["created"]) == (listed, 1)


def test_an_unreadable_source_stays_one_error_line_with_nothing_on_stdout(tmp_path: Path) -> None:
    root = tmp_path / "m"
    _store(root)
    missing = tmp_path / "missing.jsonl"
    result = cli("import", missing, "--root", root, "--json")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [f"error: {missing}: cannot read it: No such file or directory"]


# -- (b) an id held by an archived memory ---------------------------------------------------


def _archived_store(root: Path) -> None:
    with MdCG(root) as store:
        store.add(id="kp_old", layer="knowledge", body="archived one 归档")
        store.add(id="live", layer="knowledge", body="live one")
        store.archive(["kp_old"])


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("marked", [False, True])
def test_an_archived_id_is_refused_with_what_to_do_and_no_overwrite_hint(
    tmp_path: Path, overwrite: bool, marked: bool
) -> None:
    root, source = tmp_path / "m", tmp_path / "old.jsonl"
    _archived_store(root)
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    record: dict[str, Any] = {"id": "kp_old", "body": "changed 改了"}
    if marked:  # an export --archived's record, with other content
        record["archived"] = True
    source.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    result = cli("import", source, "--root", root, *(["--overwrite"] if overwrite else []))
    assert (result.exit_code, result.stdout) == (2, "")
    why = "id 'kp_old' is archived here with other content" if marked else HELD
    assert result.stderr.splitlines() == [
        f"error: {source}: 1 record(s) whose id is taken ({ARCHIVED_HINT}); nothing was imported",
        f"  {source}: record 1: {why}",
    ]
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before


def test_other_content_and_an_archived_id_say_which_overwrite_replaces(tmp_path: Path) -> None:
    root, source = tmp_path / "m", tmp_path / "two.jsonl"
    _archived_store(root)
    source.write_text(
        '{"id": "live", "body": "new live"}\n{"id": "kp_old", "body": "new old"}\n', encoding="utf-8"
    )
    result = cli("import", source, "--root", root, "--json")
    assert result.exit_code == 2
    error = (
        f"{source}: 2 record(s) whose id is taken (--overwrite replaces other content for 1 of them; "
        f"{ARCHIVED_HINT}); nothing was imported"
    )
    assert json.loads(result.stdout) == {
        "error": error,
        "problems": [
            {
                "where": "line 1",
                "node_id": "live",
                "reason": "id 'live' is in the store with other content (knowledge/orphan/live.md)",
            },
            {
                "where": "line 2",
                "node_id": "kp_old",
                "reason": HELD,
            },
        ],
    }
    assert result.stderr.splitlines()[0] == f"error: {error}"
    overwritten = cli("import", source, "--root", root, "--overwrite")
    assert overwritten.exit_code == 2
    assert overwritten.stderr.splitlines() == [
        f"error: {source}: 1 record(s) whose id is taken ({ARCHIVED_HINT}); nothing was imported",
        f"  {source}: line 2: {HELD}",
    ]


def test_other_content_alone_keeps_the_overwrite_hint(tmp_path: Path) -> None:
    root, source = tmp_path / "m", tmp_path / "one.jsonl"
    _archived_store(root)
    source.write_text('{"id": "live", "body": "new live"}\n', encoding="utf-8")
    result = cli("import", source, "--root", root)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        f"error: {source}: 1 record(s) whose id is taken (--overwrite replaces other content); "
        "nothing was imported"
    )


@pytest.mark.parametrize("overwrite", [False, True])
def test_an_expired_id_gets_no_overwrite_hint(tmp_path: Path, overwrite: bool) -> None:
    """Its own line says to renew or sweep it; ``--overwrite`` never replaces it."""
    root, source = tmp_path / "m", tmp_path / "e.jsonl"
    with MdCG(root) as store:
        node = Node(
            id="e1", layer="knowledge", body="old text", retention_tier="temp", expires_at=time.time() - 60
        )
        store.add_many([node], stamp=False)
    source.write_text('{"id": "e1", "body": "new text"}\n', encoding="utf-8")
    result = cli("import", source, "--root", root, *(["--overwrite"] if overwrite else []))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: {source}: 1 record(s) whose id is taken; nothing was imported",
        f"  {source}: record 1: id 'e1' is held by an expired memory (knowledge/orphan/e1.md): renew it "
        "(update with a tier) or sweep it, then import again",
    ]
