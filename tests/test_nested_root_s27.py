"""No store inside a store (session 27): a root inside another store's folders or its
``.mdcg/`` is refused by the library and the CLI before anything is made; run from inside
a store folder, the CLI uses it; twin ids that print alike are escaped; the ``add`` doc
line matches the output."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import MdCG, Node, NotAStoreError, enclosing_store, is_store_folder
from md_cg.cli import app
from md_cg.engine import GITIGNORE
from md_cg.script import distinct_labels, escaped

REPO = Path(__file__).resolve().parent.parent
NFC, NFD = "Caf\u00e9", "Cafe\u0301"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})


@pytest.fixture
def mem(tmp_path: Path) -> Path:
    """A store with one memory, at a path free of symlinks (messages name real paths)."""
    root = Path(os.path.realpath(tmp_path)) / "mem"
    with MdCG(root) as s:
        s.add(Node(id="kp_a", layer="knowledge", body="a memory"))
    return root


def listing(top: Path) -> list[str]:
    """Every file and folder under ``top`` (relative), sorted."""
    return sorted(str(p.relative_to(top)) for p in top.rglob("*"))


def lib_nested(root: Path, outer: Path) -> str:
    return f"{root}: inside the store {outer}; no store is made or opened there (pass root={str(outer)!r})"


def lib_meta(root: Path, outer: Path) -> str:
    return (
        f"{root}: in the .mdcg/ folder of the store {outer} (its local state, never in git); "
        f"no store is made or opened there (pass root={str(outer)!r})"
    )


# -- the library ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [{}, {"create": False}, {"read_only": True, "create": False}])
@pytest.mark.parametrize("sub", ["knowledge", "knowledge/orphan", "knowledge/new/deeper", "notes"])
def test_a_root_inside_a_store_is_refused_and_nothing_is_made(mem: Path, sub: str, mode: dict) -> None:
    before = listing(mem)
    root = mem / sub
    with pytest.raises(NotAStoreError) as caught:
        MdCG(root, **mode)
    assert str(caught.value) == lib_nested(root, mem)
    assert caught.value.path == str(root)
    assert listing(mem) == before


@pytest.mark.parametrize("sub", [".mdcg", ".mdcg/log", ".mdcg/new"])
def test_a_root_in_a_stores_mdcg_folder_is_refused_and_nothing_is_made(mem: Path, sub: str) -> None:
    before = listing(mem)
    for mode in ({}, {"read_only": True, "create": False}):
        with pytest.raises(NotAStoreError) as caught:
            MdCG(mem / sub, **mode)
        assert str(caught.value) == lib_meta(mem / sub, mem)
    assert listing(mem) == before


def test_a_store_made_in_mdcg_before_the_check_is_still_refused(mem: Path, tmp_path: Path) -> None:
    # the nested store of the defect report (mem/.mdcg/knowledge/orphan/lost1.md): moved in by hand here
    elsewhere = tmp_path / "elsewhere"
    with MdCG(elsewhere) as s:
        s.add(Node(id="lost1", layer="knowledge", body="Important"))
    os.rename(elsewhere, mem / ".mdcg" / "inner")
    with pytest.raises(NotAStoreError) as caught:
        MdCG(mem / ".mdcg" / "inner")
    assert str(caught.value) == lib_meta(mem / ".mdcg" / "inner", mem)


def test_siblings_and_an_existing_nested_store_open(tmp_path: Path) -> None:
    top = Path(os.path.realpath(tmp_path))
    with MdCG(top / "a") as s:
        s.add(Node(id="in_a", layer="self", body="a"))
    with MdCG(top / "b") as s:  # beside a: not inside it
        s.add(Node(id="in_b", layer="self", body="b"))
    with MdCG(top / "outer" / "inner") as s:  # a store first...
        s.add(Node(id="in_inner", layer="self", body="inner"))
    with MdCG(top / "outer") as s:  # ...then one around it: its parents are not stores
        s.add(Node(id="in_outer", layer="self", body="outer"))
    with MdCG(top / "outer" / "inner", read_only=True, create=False) as s:  # an existing store opens
        assert s.ids() == ["in_inner"]
    with MdCG(top / "a", read_only=True) as a, MdCG(top / "b", read_only=True) as b:
        assert (a.ids(), b.ids()) == (["in_a"], ["in_b"])
    assert enclosing_store(top / "outer" / "inner") is None
    assert enclosing_store(top / "outer" / "inner" / "knowledge") == (top / "outer" / "inner", False)


def test_a_fresh_clone_without_mdcg_is_known_by_its_gitignore(tmp_path: Path) -> None:
    clone = Path(os.path.realpath(tmp_path)) / "clone"
    (clone / "knowledge" / "orphan").mkdir(parents=True)
    (clone / ".gitignore").write_text(GITIGNORE)
    assert is_store_folder(clone)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / ".gitignore").write_text("*.pyc\n")
    assert not is_store_folder(tmp_path / "plain")
    with pytest.raises(NotAStoreError) as caught:
        MdCG(clone / "knowledge")
    assert str(caught.value) == lib_nested(clone / "knowledge", clone)
    assert listing(clone) == [".gitignore", "knowledge", "knowledge/orphan"]


def test_a_symlink_into_a_store_is_resolved(mem: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(mem / "knowledge")
    before = listing(mem)
    with pytest.raises(NotAStoreError) as caught:
        MdCG(link / "new")
    assert str(caught.value) == lib_nested(link / "new", mem)
    assert listing(mem) == before and not (mem / "knowledge" / "new").exists()
    (tmp_path / "to_store").symlink_to(mem)  # a symlink to the store itself: the store
    with MdCG(tmp_path / "to_store", read_only=True) as s:
        assert s.ids() == ["kp_a"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_gitignore_is_not_a_store(tmp_path: Path) -> None:
    top = tmp_path / "top"
    top.mkdir()
    (top / ".gitignore").write_text(GITIGNORE)
    (top / ".gitignore").chmod(0)
    try:
        assert not is_store_folder(top)
        with MdCG(top / "store") as s:
            s.add(Node(id="x", layer="self", body="x"))
    finally:
        (top / ".gitignore").chmod(0o644)


# -- the command line ---------------------------------------------------------------------


def cli_error(runner: CliRunner, *args: object) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert result.stdout == ""
    return result.stderr


def test_the_cli_refuses_a_root_inside_a_store(runner: CliRunner, mem: Path) -> None:
    before = listing(mem)
    meta = f"is in the .mdcg/ folder of the store {mem} (its local state, never in git); use --root {mem}"
    inside = f"is inside the store {mem}, not a store itself; use --root {mem}"
    made = " (nothing was created)"
    cases = [
        (["--root", mem / ".mdcg", "add", "--id", "lost1", "Important: x"], f"{mem / '.mdcg'}: {meta}{made}"),
        (["--root", mem / ".mdcg", "list"], f"{mem / '.mdcg'}: {meta}"),
        (["--root", mem / "knowledge", "add", "--id", "inner", "x"], f"{mem / 'knowledge'}: {inside}{made}"),
        (["init", "--root", mem / "knowledge"], f"{mem / 'knowledge'}: {inside}{made}"),
        (["list", "--root", mem / "knowledge" / "nope"], f"{mem / 'knowledge' / 'nope'}: {inside}"),
        (["get", "kp_a", "--root", mem / "self"], f"{mem / 'self'}: {inside}"),
    ]
    for args, message in cases:
        assert cli_error(runner, *args) == f"error: {message}\n", args
    assert listing(mem) == before


def test_run_from_inside_a_store_the_cli_uses_it(
    runner: CliRunner, mem: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(mem)
    result = runner.invoke(app, ["add", "--id", "here", "a memory added from inside"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"here\t{mem / 'knowledge' / 'orphan' / 'here.md'}\n"
    assert not (mem / "memory").exists()
    with MdCG(mem, read_only=True) as s:
        assert s.ids() == ["here", "kp_a"]
    before = listing(mem)
    monkeypatch.chdir(mem / "knowledge")  # deeper: ./memory would nest; refused with the hint
    assert cli_error(runner, "add", "--id", "deep", "x") == (
        f"error: memory: is inside the store {mem}, not a store itself; "
        f"use --root {mem} (nothing was created)\n"
    )
    assert listing(mem) == before


def test_the_default_root_elsewhere_is_still_memory(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = Path(os.path.realpath(tmp_path)) / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = runner.invoke(app, ["add", "--id", "one", "the first memory"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"one\t{work / 'memory' / 'knowledge' / 'orphan' / 'one.md'}\n"
    monkeypatch.setenv("MDCG_ROOT", str(work / "other"))  # the variable still wins over the folder
    runner.env.pop("MDCG_ROOT")
    result = runner.invoke(app, ["add", "--id", "two", "the second memory"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"two\t{work / 'other' / 'knowledge' / 'orphan' / 'two.md'}\n"


# -- twins that print alike -----------------------------------------------------------------


def test_escaped_and_distinct_labels() -> None:
    assert escaped(NFC) == "'Caf\\u00e9'"
    assert escaped(NFD) == "'Cafe\\u0301'"
    assert escaped("a'b\\c\U0001f600") == "'a\\'b\\\\c\\U0001f600'"
    assert distinct_labels([NFC, NFD, "Foo", "foo", "ok"]) == {
        NFC: "'Caf\\u00e9'",
        NFD: "'Cafe\\u0301'",
        "Foo": "Foo",
        "foo": "foo",
        "ok": "ok",
    }


def test_nfc_and_nfd_twins_print_apart_in_sync_and_health(runner: CliRunner, tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path)) / "m"
    with MdCG(root) as s:
        s.add(Node(id=NFC, layer="self", body="nfc"))
        s.add(Node(id="Foo", layer="self", body="upper"))
    (root / "contextual" / f"{NFD}.md").write_text(f"---\nid: {NFD}\nlayer: contextual\n---\nnfd\n")
    (root / "contextual" / "foo.md").write_text("---\nid: foo\nlayer: contextual\n---\nlower\n")
    result = runner.invoke(app, ["sync", "--root", root])
    assert result.exit_code == 1, result.stderr
    twins_line = [line for line in result.stdout.splitlines() if line.startswith("twin ids")]
    assert twins_line == [
        "twin ids (differ only by case or Unicode form; rename one) (2): "
        "'Cafe\\u0301' / 'Caf\\u00e9', Foo / foo"
    ]
    with MdCG(root, read_only=True) as s:
        details = {f.node_id: f.detail for f in s.health().by_kind("twin_id")}
    tail = " only by case or Unicode normalisation: one file on macOS/Windows; rename one"
    assert details == {
        NFC: "differs from 'Cafe\\u0301'" + tail,
        NFD: "differs from 'Caf\\u00e9'" + tail,
        "Foo": "differs from 'foo'" + tail,
        "foo": "differs from 'Foo'" + tail,
    }
    result = runner.invoke(app, ["health", "--root", root])
    assert result.exit_code == 1, result.stderr
    rows = [line for line in result.stdout.splitlines() if "twin_id" in line]
    nodes = sorted(line.split("│")[3].strip() for line in rows)
    assert nodes == ["'Caf\\u00e9'", "'Cafe\\u0301'", "Foo", "foo"]


# -- docs --------------------------------------------------------------------------------


def test_the_add_doc_line_is_the_output(runner: CliRunner, mem: Path) -> None:
    result = runner.invoke(app, ["add", "--id", "e", "--edge", "appels:similar", "x", "--root", mem])
    assert result.exit_code == 0, result.stderr
    said = result.stderr.strip()
    assert said == (
        "e: edge target 'appels' is not in the store (stored anyway; `mdcg health` lists dangling edges)"
    )
    doc = " ".join((REPO / "docs" / "cli.md").read_text(encoding="utf-8").split())
    assert f"``{said}``" in doc
