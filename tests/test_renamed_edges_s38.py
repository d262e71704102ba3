"""An edge to a renamed id says where the memory went (session 38's git user simulation,
finding 3): clone a renamed ``x`` to ``y`` while clone b added ``z`` with an edge to ``x``;
after the merge ``health`` said only "similar edge to 'x', which is not in the store", and
``mdcg add --edge x`` right after this clone renamed ``x`` said the same, though ``get x``
knew "it was renamed to 'y'". Now the ``dangling_edge`` finding names the id the memory
has now -- from the ``renamed_from`` of a memory (a rename pulled from another clone) or
this clone's audit log -- and ``mdcg add`` and the MCP ``remember`` reply tell what became
of an unknown target the audit log knows (renamed or forgotten).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import mcp_calls
from typer.testing import CliRunner

from md_cg import Edge, MdCG, Node, Scope
from md_cg.cli import app

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"


def _dangling(root: Path, scope: Scope | None = None) -> list[tuple[str | None, str]]:
    with MdCG(root, read_only=True, scope=scope) as s:
        return [(f.node_id, f.detail) for f in s.health().findings if f.kind == "dangling_edge"]


def _synced_dangling(root: Path) -> list[tuple[str | None, str]]:
    """The ``dangling_edge`` findings after a sync takes in the hand edits made."""
    with MdCG(root) as s:
        s.sync()
    return _dangling(root)


def _renamed(etype: str, old: str, new: str) -> str:
    return (
        f"{etype} edge to {old!r}, which is not in the store: that memory was renamed to {new!r}; "
        f"point the edge at {new!r} (or remove it) in this file"
    )


def test_a_rename_pulled_from_another_clone_is_named_by_renamed_from(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="z", layer="knowledge", body="# Z\nlinks to x\n", edges=[Edge("x", "similar")]))
        s.add(Node(id="y", layer="knowledge", body="# Y\nonce x\n"))
        path = root / s.path_of("y")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('id: "y"\n', 'id: "y"\nrenamed_from: ["x"]\n', 1), encoding="utf-8")
    assert 'renamed_from: ["x"]' in path.read_text(encoding="utf-8")
    assert _synced_dangling(root) == [("z", _renamed("similar", "x", "y"))]
    # a scope that does not see y is not told where x went
    with MdCG(root) as s:
        s.update("y", agent_scope="b")
    assert _dangling(root, Scope(agent="a")) == [("z", "similar edge to 'x', which is not in the store")]


def test_this_clones_chain_of_renames_and_the_add_note(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="# X\nabout x\n"))
        s.rename("x", "y")
        s.rename("y", "w")
    runner = CliRunner()
    added = runner.invoke(app, ["add", "--id", "z", "--edge", "x:causal", "links x", "--root", str(root)])
    assert added.exit_code == 0, added.output
    assert re.fullmatch(
        rf"z: edge target 'x' is not in the store \(it was renamed to 'y' on {WHEN}; that memory is 'w' now; "
        r"stored anyway; `mdcg health` lists dangling edges\)\n",
        added.stderr,
    ), added.stderr
    # the file's renamed_from is the first witness; with it edited away the audit log's chain is
    with MdCG(root) as s:
        path = root / s.path_of("w")
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"renamed_from:.*\n(  - .*\n)*", "", text, count=1), encoding="utf-8")
    assert "renamed_from" not in path.read_text(encoding="utf-8")
    assert _synced_dangling(root) == [("z", _renamed("causal", "x", "w"))]
    data = json.loads(
        runner.invoke(
            app, ["add", "--id", "v", "--edge", "x", "--edge", "nothing", "v", "--root", str(root), "--json"]
        ).stdout
    )
    assert data["unknown_targets"] == ["x", "nothing"]
    assert list(data["departed"]) == ["x"]
    assert re.fullmatch(rf"it was renamed to 'y' on {WHEN}; that memory is 'w' now", data["departed"]["x"])


def test_the_remember_reply_says_what_became_of_a_target(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="# X\nabout x\n"))
        s.add(Node(id="n1", layer="knowledge", body="# N1\nabout n1\n"))
        s.add(Node(id="old", layer="knowledge", body="# Old\nabout old\n"))
        s.rename("x", "y")
        s.forget("old", reason="stale")
    edges = [{"target": t, "type": "similar"} for t in ("N1", "later", "x", "old")]
    (result,) = mcp_calls(root, [("remember", {"body": "# f", "id": "f", "edges": edges})])
    assert not result.is_error, result.content
    reply = json.loads(result.content[0].text)
    assert reply["unknown_targets"] == ["N1", "later", "x", "old"]
    assert reply["did_you_mean"] == [{"edge": 0, "target": "N1", "did_you_mean": "n1"}]
    assert [(d["edge"], d["target"]) for d in reply["departed"]] == [(2, "x"), (3, "old")]
    assert re.fullmatch(rf"it was renamed to 'y' on {WHEN}", reply["departed"][0]["departed"])
    assert re.fullmatch(rf"it was forgotten on {WHEN}, reason: stale", reply["departed"][1]["departed"])


def test_cli_health_deep_reads_every_file(tmp_path: Path) -> None:
    """``mdcg health --deep`` is ``health(deep=True)`` (the git user simulation found the
    CLI had no way to ask for it): a file edited with its size and mtime kept is found only
    by reading it."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(Node(id="a", layer="knowledge", body="# A\nalpha words here\n"))
        path = root / s.path_of("a")
    st = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("alpha", "gamma"), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    runner = CliRunner()
    plain = runner.invoke(app, ["health", "--root", str(root), "--json"])
    assert (plain.exit_code, json.loads(plain.stdout)["findings"]) == (0, [])
    deep = runner.invoke(app, ["health", "--deep", "--root", str(root), "--json"])
    assert deep.exit_code == 1
    assert [(f["kind"], f["node_id"], f["detail"]) for f in json.loads(deep.stdout)["findings"]] == [
        (
            "text_drift",
            "a",
            "the text index differs from the file: terms "
            "(missing ['gamma'], extra ['alpha'], or other counts)",
        )
    ]
