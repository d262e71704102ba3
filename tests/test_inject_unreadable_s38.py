"""A search hit whose file a hand edit broke since the index read it (no sync since) is left
out of the reads that serve many memories at once, warned of and counted; the healthy hits
are served (attack 5 of session 38, sc4/sc5/sc2, medium).

A person narrows the shared memory ``edited`` by writing ``agent_scope: [alice, bob]`` (a
list: malformed). Before the fix ``MdCG.inject``, ``mdcg inject`` (exit 2), the MCP server's
search reply built without its pick-up, ``iter_nodes``, ``organize``'s dry run and
``add_unique`` (``mdcg add`` of a text near it) failed as a whole with the file's error,
which quotes its new value -- naming the other agents. Only the file's own malformation is
skipped: an ``OSError`` reading it is still raised."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import REPO

from md_cg import MdCG, Scope
from md_cg.engine import Engine
from md_cg.errors import MalformedNodeFileError

ENV = dict(os.environ, PYTHONPATH=str(REPO))
BROKEN = "contextual/edited.md"
WARNING = (
    "md-cg: memory 'edited' left out of {what}: its file contextual/edited.md no longer reads as "
    "a memory (changed by hand since the index read it); fix it (`mdcg health` says what is "
    "wrong), then run `mdcg sync`"
)


def _store(tmp_path: Path) -> Path:
    """``good`` and ``edited`` match "unicorn"; ``edited.md`` then broken by hand, unsynced."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="good", layer="contextual", body="Unicorn facts\nunicorns like apples")
        s.add(id="edited", layer="contextual", body="Unicorn plan\nthe unicorn plan memory")
        s.compact_index()
    return root


def _break(root: Path) -> None:
    f = root / BROKEN
    f.write_text(f.read_text(encoding="utf-8").replace("\n---\n", "\nagent_scope: [alice, bob]\n---\n", 1))


def _open(root: Path, scope: Scope | None = None) -> MdCG:
    """A handle that read the index before the edit and takes in no hand edit by itself."""
    return MdCG(root, scope=scope, auto_compact=None, refresh_interval=None)


def _messages(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if w.category is RuntimeWarning]


@pytest.mark.parametrize("scope", [None, Scope(agent="carol")], ids=["unscoped", "scoped"])
def test_inject_leaves_out_a_hit_whose_file_a_hand_edit_broke(tmp_path: Path, scope: Scope | None) -> None:
    root = _store(tmp_path)
    with _open(root, scope) as s:
        assert sorted(r.id for r in s.search("unicorn", record=False)[0]) == ["edited", "good"]
        _break(root)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            items = s.inject("unicorn")
        assert [(i.id, i.text) for i in items] == [("good", "unicorns like apples")]
        assert items.unreadable == ("edited",)
        assert _messages(caught) == [WARNING.format(what="inject")]
        assert caught[0].filename == __file__  # the caller's line
        assert "alice" not in str(items) + "".join(_messages(caught))  # the file's new value is not quoted
        with pytest.raises(MalformedNodeFileError):  # asked for by id, the file's error stands
            s.get("edited")
    with MdCG(root) as s:  # after a sync (the open without pick-up took nothing in)
        s.sync()
        assert (s.inject("unicorn").unreadable, [i.id for i in s.inject("unicorn")]) == ((), ["good"])


def test_an_oserror_reading_the_hit_is_raised_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Infrastructure errors are never swallowed: a failing disk fails the inject."""
    root = _store(tmp_path)
    read = Engine.read_node

    def failing(self: Engine, rel: str):  # type: ignore[no-untyped-def]
        if rel == BROKEN:
            raise OSError(errno.EIO, "Input/output error", rel)
        return read(self, rel)

    monkeypatch.setattr(Engine, "read_node", failing)
    with _open(root) as s, pytest.raises(OSError) as err:
        s.inject("unicorn")
    assert err.value.errno == errno.EIO


def test_mdcg_inject_serves_the_healthy_hits_and_warns(tmp_path: Path) -> None:
    """sc5: ``mdcg inject unicorn`` exited 2 with the parse error and injected nothing."""
    root = _store(tmp_path)
    _break(root)
    run = [sys.executable, "-m", "md_cg.cli", "--root", str(root), "inject"]
    out = subprocess.run([*run, "unicorn"], capture_output=True, text=True, env=ENV, check=False)
    assert (out.returncode, out.stdout) == (0, "- [good] unicorns like apples\n")
    assert out.stderr == "warning: " + WARNING.format(what="inject").removeprefix("md-cg: ") + "\n"
    out = subprocess.run([*run, "--json", "unicorn"], capture_output=True, text=True, env=ENV, check=False)
    reply = json.loads(out.stdout)
    assert (out.returncode, [i["id"] for i in reply["items"]], reply["unreadable_omitted"]) == (
        0,
        ["good"],
        1,
    )


def test_the_mcp_search_reply_and_inject_tool_leave_it_out_and_count_it(tmp_path: Path) -> None:
    """sc4/sc2: ``search_reply`` without the server's pick-up raised the parse error."""
    pytest.importorskip("mcp")
    from md_cg.mcp_server import _lifecycle_tools, search_reply

    root = _store(tmp_path)
    with _open(root, Scope(agent="carol")) as s:
        results, meta = s.search("unicorn", record=False)
        healthy = search_reply(s, results, meta)
        assert "unreadable_omitted" not in healthy["meta"]  # left out when none
        results, meta = s.search("unicorn", record=False)
        _break(root)
        reply = search_reply(s, results, meta)
        assert [r["id"] for r in reply["results"]] == ["good"]
        assert (reply["meta"]["unreadable_omitted"], sum(reply["counts"].values())) == (1, 1)
        assert "alice" not in json.dumps(reply)
        inject = {f.__name__: f for f, _ in _lifecycle_tools(s)}["inject"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            told = inject(query="unicorn")
        assert ([i["id"] for i in told["items"]], told["unreadable_omitted"]) == (["good"], 1)


def test_iter_nodes_organize_and_add_unique_go_on_past_it(tmp_path: Path) -> None:
    """``iter_nodes`` ended with the error; ``organize``'s dry run and ``add_unique`` (``mdcg
    add``, the MCP ``remember``) of a text near the broken memory failed. As after a sync,
    the broken file is no memory: the same text is new."""
    root = _store(tmp_path)
    with _open(root) as s:
        _break(root)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert [n.id for n in s.iter_nodes()] == ["good"]
            run = s.organize(
                "dryRun",
                candidates=[
                    {"layer": "contextual", "title": "Unicorn plan", "content": "the unicorn plan memory"}
                ],
            )
            node, added = s.add_unique(layer="contextual", body="Unicorn plan\nthe unicorn plan memory")
        assert [(i.verdict, i.match) for i in run.items] == [("new", None)]
        assert added and node.id != "edited"
        assert _messages(caught) == [
            WARNING.format(what="iter_nodes"),
            WARNING.format(what="organize"),
            WARNING.format(what="the check for an identical memory"),
        ]
        assert caught[0].filename == __file__
