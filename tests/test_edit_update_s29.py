"""Edits and updates that change less than they seem (review 1 of session 29).

* ``mdcg edit`` (an editor or ``--from``) of a temporary memory giving it an expiry
  already past stored the edit, then failed reading the path of the memory it had just
  hidden: exit 2, "nothing was written; the edited text is kept in ...". The edit is
  stored, as ``update`` stores such an expiry, with ``update``'s warning; an error after
  the write never says "nothing was written".
* A no-op ``update`` (``--reopen`` of a current memory, the tags it has) rewrote the
  file and said "updated"; it writes nothing and says "no change" (library, CLI, MCP).
* ``mdcg show`` of an expired or archived memory named ``mdcg get --expired``.
* The library's errors did not survive pickling (a worker process sends them so).
"""

from __future__ import annotations

import inspect
import json
import pickle
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import build_small_store
from typer.testing import CliRunner

import md_cg.errors as errors_mod
from md_cg import MdCG
from md_cg.cli import app
from md_cg.errors import FileProblem, NodeNotFoundError
from md_cg.migrate import MigrationError

PAST = "2020-01-01T00:00:00Z"
ERRAND = "明天下午3点去取快递"
PAST_WARNING = (
    "node 'errand': expires_at 2020-01-01T00:00:00.000000Z is already past: the memory is hidden "
    "from every read at once and the next sweep removes it (`mdcg sweep`, sweep())"
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"MDCG_ROOT": None, "MDCG_EDITOR": None, "VISUAL": None, "EDITOR": None})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = build_small_store(tmp_path / "memory")
    with MdCG(root) as store:
        assert store.add(id="errand", body=ERRAND).retention_tier == "temp"
    return root


def invoke(runner: CliRunner, *args: Any, input: str | None = None) -> Any:
    return runner.invoke(app, [str(a) for a in args], input=input)


def editor(tmp_path: Path, code: str) -> str:
    """An editor command running ``code`` with ``path`` (the file to edit) defined."""
    script = tmp_path / "editor.py"
    script.write_text("import pathlib, sys\npath = pathlib.Path(sys.argv[-1])\n" + code, encoding="utf-8")
    return f'"{sys.executable}" "{script}"'


PAST_EDIT = (
    "import re\n"
    f"path.write_text(re.sub(r'(?m)^expires_at: .*$', 'expires_at: \"{PAST}\"', path.read_text()))\n"
)


def _expired_as_edited(root: Path, path: Path) -> None:
    """The file holds the edit; the memory is hidden as expired, read with include_expired."""
    assert 'expires_at: "2020-01-01T00:00:00.000000Z"' in path.read_text(encoding="utf-8")
    with MdCG(root, read_only=True) as store:
        with pytest.raises(NodeNotFoundError) as caught:
            store.get("errand")
        assert caught.value.hidden == "expired"
        node = store.get("errand", include_expired=True)
        assert node.body == ERRAND and node.expires_at == 1577836800.0


def _path(root: Path, node_id: str) -> Path:
    with MdCG(root, read_only=True) as store:
        return store.path_of(node_id)


def test_an_edit_giving_a_past_expiry_is_stored_with_the_warning_of_update(
    runner: CliRunner, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the kept copy would be made here
    path = _path(root, "errand")
    result = invoke(runner, "edit", "errand", "--root", root, "--editor", editor(tmp_path, PAST_EDIT))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"errand: edited ({path})\n"
    assert result.stderr == f"warning: {PAST_WARNING}\n"
    assert [p.name for p in tmp_path.glob("mdcg-errand-*")] == []  # the copy went: it is stored
    _expired_as_edited(root, path)


def test_an_edit_from_a_file_giving_a_past_expiry_is_stored(
    runner: CliRunner, root: Path, tmp_path: Path
) -> None:
    path = _path(root, "errand")
    text = path.read_text(encoding="utf-8")
    edited = tmp_path / "errand.md"
    lines = [f'expires_at: "{PAST}"' if line.startswith("expires_at:") else line for line in text.split("\n")]
    edited.write_text("\n".join(lines), encoding="utf-8")
    result = invoke(runner, "edit", "errand", "--root", root, "--from", edited, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "id": "errand",
        "layer": "knowledge",
        "path": str(path),
        "changed": True,
    }
    assert result.stderr == f"warning: {PAST_WARNING}\n"
    _expired_as_edited(root, path)


def test_an_error_after_the_edit_is_written_does_not_say_nothing_was_written(
    runner: CliRunner, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = _path(root, "kp_sorting")
    calls: list[str] = []
    real = MdCG.path_of

    def path_of(self: MdCG, node_id: str, **kw: Any) -> Path:
        calls.append(node_id)
        if len(calls) == 2:  # the one after the write (the first finds the folder to check)
            raise errors_mod.StoreClosedError("the store went away")
        return real(self, node_id, **kw)

    monkeypatch.setattr(MdCG, "path_of", path_of)
    ed = editor(tmp_path, "path.write_text(path.read_text().replace('in order.', 'in my order.'))\n")
    result = invoke(runner, "edit", "kp_sorting", "--root", root, "--editor", ed)
    assert result.exit_code == 2
    [kept] = result.stderr.splitlines()[0].split("the kept copy ")[1].split(" removed")[:1]
    assert Path(kept).parent == tmp_path and Path(kept).name.startswith("mdcg-kp_sorting-")
    assert result.stderr.splitlines() == [
        f"kp_sorting: the edit was stored (the kept copy {kept} removed); what failed after it:",
        "error: the store went away",
    ]
    assert not Path(kept).exists()
    assert "Sorting puts items in my order." in path.read_text(encoding="utf-8")


def test_edit_text_of_the_stored_text_writes_nothing_and_a_past_expiry_warns(root: Path) -> None:
    with MdCG(root) as store:
        path = store.path_of("kp_sorting")
        data, mtime = path.read_bytes(), path.stat().st_mtime_ns
        before = store.get("kp_sorting")
        node = store.edit_text("kp_sorting", lambda text: text)
        assert node == before and path.read_bytes() == data and path.stat().st_mtime_ns == mtime
        with pytest.warns(RuntimeWarning) as caught:
            store.edit_text(
                "errand",
                lambda text: "\n".join(
                    f'expires_at: "{PAST}"' if ln.startswith("expires_at:") else ln for ln in text.split("\n")
                ),
            )
        assert [str(w.message) for w in caught] == [f"md-cg: {PAST_WARNING}"]
        assert caught[0].filename == __file__


def _file(root: Path, node_id: str) -> tuple[Path, bytes, int, float | None]:
    with MdCG(root, read_only=True) as store:
        path = store.path_of(node_id)
        return path, path.read_bytes(), path.stat().st_mtime_ns, store.get(node_id).updated_at


def test_a_no_op_update_in_the_cli_writes_nothing_and_says_no_change(runner: CliRunner, root: Path) -> None:
    path, data, mtime, updated = _file(root, "kp_sorting")
    for args in (["--reopen"], ["--reopen"], ["--tag", "domain:computing"], ["--layer", "knowledge"]):
        result = invoke(runner, "update", "kp_sorting", *args, "--root", root)
        assert result.exit_code == 0, result.output
        assert (result.stdout, result.stderr) == ("kp_sorting: no change\n", "")
        assert _file(root, "kp_sorting") == (path, data, mtime, updated)
    result = invoke(runner, "update", "kp_sorting", "--tag", "domain:computing", "--root", root, "--json")
    assert json.loads(result.stdout) == {
        "id": "kp_sorting",
        "layer": "knowledge",
        "path": str(path),
        "updated": [],
        "changed": False,
        "tier": "long",
        "expires": None,
    }
    assert _file(root, "kp_sorting") == (path, data, mtime, updated)
    result = invoke(runner, "update", "kp_sorting", "--tag", "a", "--tag", "b", "--root", root, "--json")
    assert json.loads(result.stdout)["updated"] == ["tags"] and json.loads(result.stdout)["changed"] is True
    assert _file(root, "kp_sorting")[1] != data


def test_a_no_op_update_in_the_library_writes_nothing(root: Path) -> None:
    path, data, mtime, updated = _file(root, "kp_sorting")
    with MdCG(root) as store:
        node = store.get("kp_sorting")
        for changes in ({"tags": list(node.tags)}, {"layer": "knowledge"}, {"body": node.body}, {}):
            assert store.update("kp_sorting", **changes).updated_at == updated
            assert _file(root, "kp_sorting") == (path, data, mtime, updated)
        done = store.reopen("kp_sorting")
        assert (done.node.updated_at, done.unlinked) == (updated, [])
        report = store.update_report("kp_sorting", valid_until=None, tags=list(node.tags))
        assert (report.node.updated_at, report.unlinked, report.changed) == (updated, [], False)
        assert _file(root, "kp_sorting") == (path, data, mtime, updated)
        report = store.update_report("kp_sorting", importance=0.25)
        assert report.changed is True and report.node.importance == 0.25
        assert report.node.updated_at is not None and updated is not None and report.node.updated_at > updated
        # a reopen that removes a successor's edge is a change, of that successor at least
        store.add(id="newer", body="Sorting, newer.")
        store.supersede("kp_sorting", "newer")
        report = store.update_report("kp_sorting", valid_until=None)
        assert (report.unlinked, report.changed, report.node.valid_until) == (["newer"], True, None)


def test_a_no_op_update_tool_reply_says_unchanged(root: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from md_cg.mcp_server import create_server

    path, _, mtime, _ = _file(root, "kp_sorting")
    replies: list[dict[str, Any]] = []

    async def run() -> None:
        async with Client(create_server(root)) as client:
            for args in ({"reopen": True}, {"tags": ["domain:computing"]}, {"tags": ["x"]}):
                result = await client.call_tool("update", {"id": "kp_sorting", **args})
                assert not result.is_error, result.content
                replies.append(json.loads(result.content[0].text))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        anyio.run(run)
    same = {"id": "kp_sorting", "layer": "knowledge", "path": str(path), "updated": [], "changed": False}
    assert [{k: r[k] for k in same} for r in replies[:2]] == [same, same]
    assert replies[2]["updated"] == ["tags"] and "changed" not in replies[2]
    assert _file(root, "kp_sorting")[2] != mtime


def test_show_of_a_hidden_memory_names_show(runner: CliRunner, root: Path) -> None:
    with MdCG(root) as store:
        with pytest.warns(RuntimeWarning):
            store.update("errand", expires_at=PAST)
        store.archive("kp_sorting")
    for command in ("show", "get"):
        result = invoke(runner, command, "errand", "--root", root)
        assert result.exit_code == 2
        assert result.stderr == (
            f"error: node 'errand': it is a temporary memory that expired at {PAST}; "
            f"`mdcg {command} --expired errand` reads it, `mdcg sweep` removes it\n"
        )
        assert invoke(runner, command, "--expired", "errand", "--root", root).exit_code == 0
        result = invoke(runner, command, "kp_sorting", "--root", root)
        assert result.stderr == (
            f"error: node 'kp_sorting' is archived: `mdcg {command} --archived kp_sorting` reads it, "
            "`mdcg unarchive kp_sorting` brings it back\n"
        )
        assert invoke(runner, command, "--archived", "kp_sorting", "--root", root).exit_code == 0
    result = invoke(runner, "update", "errand", "--tag", "x", "--root", root)  # a write: get, as before
    assert result.stderr == (
        f"error: node 'errand': it is a temporary memory that expired at {PAST}; `mdcg update errand "
        "--tier long` renews it, `mdcg get --expired errand` reads it, `mdcg sweep` removes it\n"
    )


#: One error of every class md_cg.errors defines (and migrate's), with its attributes set.
ERRORS = [
    errors_mod.MdcgError("plain"),
    errors_mod.FileError("/a/b", "bad"),
    errors_mod.InvalidNodeError("m", field="f", value=[1], node_id="n"),
    errors_mod.InvalidArgumentError("m", name="x", value=3),
    errors_mod.OtherMemoriesError("m", node_id="n", verb="forget", shown="a/n.md", others=("b/n.md",)),
    errors_mod.UnsafeIdError("m", field="id"),
    errors_mod.UnknownLayerError("m", node_id="z"),
    errors_mod.MalformedNodeFileError("p.md", "oops", line=3),
    errors_mod.MalformedNodeFileError("p.md", problems=[FileProblem(1, "a"), FileProblem(None, "b")]),
    errors_mod.NodeNotFoundError("nosuch"),
    errors_mod.NodeNotFoundError("x", "it is archived", hidden="archived", fix="unarchive it"),
    errors_mod.DuplicateIdError("a", "p", archived=True),
    errors_mod.DuplicateIdError("a", "p", untracked=True),
    errors_mod.IdCollisionError("a", "A", "p"),
    errors_mod.NodeHasIncomingEdgesError("a", [("b", "rel")]),
    errors_mod.InvalidVerdictError("v"),
    errors_mod.LockTimeoutError("/l", 1.5, "write"),
    errors_mod.ReadOnlyStoreError("ro"),
    errors_mod.StoreClosedError("closed"),
    errors_mod.SnapshotDamageError("rows", 2, "crc"),
    errors_mod.NotAStoreError("/x", "no"),
    errors_mod.ProtectedNodeError("a", "protected"),
    errors_mod.UnsafePathError("/p", "a symlink"),
    errors_mod.SynonymFileError("/s", "bad"),
    errors_mod.UnknownBigDomainError("q", ["a", "b"]),
    errors_mod.MarkerFileError("/m", "bad"),
    errors_mod.DataFileError("/d", "bad"),
    errors_mod.MergeError("/g", "bad"),
    errors_mod.DemoError("demo"),
    errors_mod.EditConflictError("a", "/kept.md"),
    errors_mod.ChangedOnDiskError("a", "knowledge/orphan/a.md"),
    errors_mod.ImportSourceError("src", [1, 2]),
    errors_mod.OrganizeApplyError("r1", "msg"),
    MigrationError("migration"),
]


def test_every_error_class_is_sampled() -> None:
    defined = {
        cls
        for _, cls in inspect.getmembers(errors_mod, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == errors_mod.__name__
    }
    assert defined - {type(e) for e in ERRORS} == set()


@pytest.mark.parametrize("exc", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_survives_pickling(exc: Exception) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert (str(back), back.args, vars(back)) == (str(exc), exc.args, vars(exc))


def test_a_node_not_found_error_from_a_worker_process() -> None:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1) as pool, pytest.raises(NodeNotFoundError) as caught:
        pool.submit(_raise_not_found).result()
    assert str(caught.value) == "no node with id 'nosuch' in this store"
    assert (caught.value.node_id, caught.value.hidden) == ("nosuch", None)


def _raise_not_found() -> None:
    raise NodeNotFoundError("nosuch")
