"""The replies left that quoted, listed or failed on a memory file broken by hand (session 39;
session 38 made ``inject``, ``iter_nodes``, ``organize`` and ``add_unique`` leave such a file
out: tests/test_inject_unreadable_s38.py).

A person narrows the shared memory ``edited`` by writing ``agent_scope: [alice, bob]`` (a
list: malformed); no sync since. Before the fix:

1. a scoped ``get`` of ``edited`` (``update``, ``archive``, ``rename``, ``delete``, ``forget``,
   ``verify``, ``supersede`` too) raised the file's parse error, ``(got ['alice', 'bob'])``:
   another agent's name; ``read_text`` returned the file whole and ``edit_text`` handed it to
   ``change``;
2. ``mdcg search`` listed ``edited`` until a sync;
3. a scoped ``export_nodes`` named it with the parse error;
4. the MCP tool ``on_this_day`` failed as a whole when it picked it;
5. ``mdcg health``'s ``unreadable_file`` row left the node blank though its detail named the id.

An unscoped handle -- the store's owner, who may read every file -- is still told what is
wrong (``get``, ``mdcg export``, ``mdcg health``), as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, mcp_calls
from test_unreadable_s35 import _child

from md_cg import MdCG, Scope, export_nodes
from md_cg.errors import MalformedNodeFileError
from md_cg.reports import Finding

ENV = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
BROKEN = "contextual/edited.md"
CAROL = Scope(agent="carol")
#: What the file's own error says (an unscoped handle is told it)
PARSE_ERROR = (
    "node 'edited': field 'agent_scope' must be a non-blank name of at most 200 characters, no "
    "outer spaces (got ['alice', 'bob'])"
)
#: What a scoped handle is told instead
WITHHELD = (
    "contextual/edited.md:6: memory 'edited' no longer reads as a memory: its file was changed by "
    "hand since the index read it; what is wrong is not told to a scoped handle (it may quote the "
    "file's values) -- `mdcg health` without a scope names it; fix the file, then run `mdcg sync`"
)
LEFT_OUT = (
    "warning: memory 'edited' left out of search: its file contextual/edited.md no longer reads as "
    "a memory (changed by hand since the index read it); fix it (`mdcg health` says what is "
    "wrong), then run `mdcg sync`\n"
)


def _store(tmp_path: Path, *, good: bool = True) -> Path:
    """``edited`` (dated 2020) and ``good`` match "unicorn"; the snapshot holds both."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        if good:
            s.add(id="good", layer="contextual", body="Unicorn facts\nunicorns like apples")
        s.add(
            id="edited",
            layer="contextual",
            body="Unicorn plan\nthe unicorn plan memory",
            created_at="2020-01-01T00:00:00+00:00",
        )
        s.compact_index()
    return root


def _break(root: Path) -> None:
    f = root / BROKEN
    text = f.read_text(encoding="utf-8")
    if "alice" not in text:
        f.write_text(text.replace("\n---\n", "\nagent_scope: [alice, bob]\n---\n", 1), encoding="utf-8")


def _open(root: Path, scope: Scope | None = None) -> MdCG:
    """A handle that takes in no hand edit by itself (as one that read the index before it)."""
    return MdCG(root, scope=scope, auto_compact=None, refresh_interval=None)


def _mdcg(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "md_cg.cli", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
    )


# -- 1. a scoped read or write of the broken id --------------------------------------------------

CALLS: dict[str, Callable[[MdCG], Any]] = {
    "get": lambda s: s.get("edited"),
    "read_text": lambda s: s.read_text("edited"),
    "edit_text": lambda s: s.edit_text("edited", lambda text: text + "\nmore"),
    "update": lambda s: s.update("edited", body="Unicorn plan\nchanged"),
    "archive": lambda s: s.archive(["edited"]),
    "rename": lambda s: s.rename("edited", "edited2"),
    "delete": lambda s: s.delete("edited"),
    "forget": lambda s: s.forget("edited", reason="done"),
    "verify": lambda s: s.verify("edited", "seen", "confirmed"),
    "supersede": lambda s: s.supersede("edited", "good"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_scoped_handle_is_told_the_file_not_its_values(tmp_path: Path, call: str) -> None:
    root = _store(tmp_path)
    _break(root)
    before = (root / BROKEN).read_bytes()
    with _open(root, CAROL) as s, pytest.raises(MalformedNodeFileError) as err:
        CALLS[call](s)
    assert str(err.value) == WITHHELD
    assert (err.value.path, err.value.line, err.value.node_id) == (BROKEN, 6, "edited")
    assert err.value.__context__ is None and err.value.__cause__ is None  # the quoting error is not kept
    assert (root / BROKEN).read_bytes() == before  # nothing written


def test_an_unscoped_get_is_told_what_is_wrong(tmp_path: Path) -> None:
    """The owner may read every file: the parse error, as before (documented in docs/api.md)."""
    root = _store(tmp_path)
    _break(root)
    with _open(root) as s:
        with pytest.raises(MalformedNodeFileError) as err:
            s.get("edited")
        assert str(err.value) == f"{BROKEN}:6: {PARSE_ERROR}"
        assert err.value.node_id == "edited"
        assert "agent_scope: [alice, bob]" in s.read_text("edited")  # `mdcg show` shows it to fix


def test_a_scoped_handle_is_still_told_a_file_it_may_not_read(tmp_path: Path) -> None:
    """``permission denied`` quotes nothing: told as it is, to a scoped handle too (in a child
    where mode 000 binds, root's too)."""
    root = _store(tmp_path)
    (root / BROKEN).chmod(0)
    script = (
        "import sys\n"
        "from md_cg import MdCG, Scope\n"
        "from md_cg.errors import MalformedNodeFileError\n"
        "s = MdCG(sys.argv[1], scope=Scope(agent='carol'), auto_compact=None, refresh_interval=None)\n"
        "try:\n"
        "    s.get('edited')\n"
        "except MalformedNodeFileError as exc:\n"
        "    print(exc)\n"
    )
    try:
        out = _child(["-c", script, str(root)])
    finally:
        (root / BROKEN).chmod(0o644)
    if out.stdout == "" and out.returncode == 0:
        pytest.skip("mode 000 does not bind this user")
    assert (out.returncode, out.stdout) == (0, f"{BROKEN}: cannot be read: permission denied\n")


def test_the_mcp_get_tool_of_a_scoped_server_names_the_file_not_its_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the official client: the hand edit lands just after the server's pick-up."""
    pytest.importorskip("mcp")
    root = _store(tmp_path)
    _edit_after_pickup(root, monkeypatch)
    (reply,) = mcp_calls(root, [("get", {"id": "edited"})], scope=CAROL)
    text = reply.content[0].text
    assert reply.is_error and "alice" not in text
    assert text == f"Error executing tool get: {WITHHELD}"


# -- 2. mdcg search -----------------------------------------------------------------------------


def test_mdcg_search_leaves_out_a_broken_hit_warns_and_counts_it(tmp_path: Path) -> None:
    root = _store(tmp_path)
    out = _mdcg(root, "search", "unicorn", "--no-record", "--json")
    assert [r["id"] for r in json.loads(out.stdout)["results"]] == ["edited", "good"]
    assert "unreadable_omitted" not in json.loads(out.stdout)["meta"]  # only when some
    _break(root)
    out = _mdcg(root, "search", "unicorn", "--no-record", "--json")
    reply = json.loads(out.stdout)
    assert (out.returncode, out.stderr) == (0, LEFT_OUT)
    assert ([r["id"] for r in reply["results"]], reply["meta"]["unreadable_omitted"]) == (["good"], 1)
    out = _mdcg(root, "search", "unicorn", "--no-record")
    assert (out.returncode, out.stderr) == (0, LEFT_OUT)
    assert "edited" not in out.stdout and "│ good " in out.stdout
    assert out.stdout.rstrip().endswith(
        "· 1 result(s) left out: the file no longer reads as a memory (see the warning)"
    )
    assert "alice" not in out.stdout + out.stderr


# -- 3. export ----------------------------------------------------------------------------------


def test_a_scoped_export_names_the_file_not_its_values(tmp_path: Path) -> None:
    root = _store(tmp_path)
    _break(root)
    with _open(root, CAROL) as s:
        report = export_nodes(s, tmp_path / "out.jsonl")
    assert (report.ids, report.unreadable) == (["good"], [("edited", WITHHELD)])


def test_mdcg_export_tells_the_owner_what_is_wrong(tmp_path: Path) -> None:
    """``mdcg export`` is unscoped (the owner's): its line names the file and the problem."""
    root = _store(tmp_path)
    _break(root)
    out = _mdcg(root, "export", "-o", str(tmp_path / "out.jsonl"))
    assert out.returncode == 1
    assert out.stderr == f"not exported: edited: {BROKEN}:6: {PARSE_ERROR}\n"


# -- 4. MCP on_this_day --------------------------------------------------------------------------


def _edit_after_pickup(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand edit breaking ``edited.md`` just after the server's pick-up of hand edits (which
    runs before every tool call): the call reads the file the index no longer describes."""
    real = MdCG.sync_if_changed

    def then_edited(self: MdCG, *args: Any, **kw: Any) -> Any:
        report = real(self, *args, **kw)
        _break(root)
        return report

    monkeypatch.setattr(MdCG, "sync_if_changed", then_edited)


@pytest.mark.parametrize("scope", [None, CAROL], ids=["unscoped", "scoped"])
def test_on_this_day_leaves_out_a_broken_pick_and_counts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scope: Scope | None
) -> None:
    pytest.importorskip("mcp")
    root = _store(tmp_path, good=False)  # edited is the one memory: the pick
    (shown,) = mcp_calls(root, [("on_this_day", {})], scope=scope)
    assert json.loads(shown.content[0].text)["memory"]["id"] == "edited"
    _edit_after_pickup(root, monkeypatch)
    first, later = mcp_calls(root, [("on_this_day", {}), ("on_this_day", {})], scope=scope)
    assert not first.is_error
    assert json.loads(first.content[0].text) == {"memory": None, "meta": {"unreadable_omitted": 1}}
    # the next call's pick-up took the edit in: no memory to bring back, nothing left out
    assert json.loads(later.content[0].text) == {"memory": None}


# -- 5. health ---------------------------------------------------------------------------------


def _unreadable(findings: tuple[Finding, ...]) -> list[tuple[str | None, str | None]]:
    return [(f.path, f.node_id) for f in findings if f.kind == "unreadable_file"]


def test_health_names_the_node_of_an_unreadable_file(tmp_path: Path) -> None:
    root = _store(tmp_path)
    _break(root)
    (root / "contextual" / "noyaml.md").write_text("---\nid: [unclosed\n---\nbody\n", encoding="utf-8")
    with MdCG(root) as s:
        s.sync()
        report = s.health()
    assert _unreadable(report.findings) == [(BROKEN, "edited"), ("contextual/noyaml.md", None)]
    out = _mdcg(root, "health", "--json")
    rows = [(f["path"], f["node_id"], f["detail"]) for f in json.loads(out.stdout)["findings"]]
    assert rows[0] == (BROKEN, "edited", PARSE_ERROR)
    assert rows[1][:2] == ("contextual/noyaml.md", None)


def test_a_scoped_health_never_names_an_unreadable_file(tmp_path: Path) -> None:
    """Even one naming an id the scope sees (``good``): its scope fields cannot be read, and
    its detail quotes them. Counted, not named."""
    root = _store(tmp_path)
    evil = root / "contextual" / "evil.md"
    evil.write_text(
        '---\nid: "good"\nlayer: "contextual"\nagent_scope: [alice, bob]\n---\nsecret plan\n',
        encoding="utf-8",
    )
    _break(root)
    with MdCG(root) as s:
        s.sync()
        assert _unreadable(s.health().findings) == [(BROKEN, "edited"), ("contextual/evil.md", "good")]
    with MdCG(root, scope=CAROL) as s:
        findings = s.health().findings
    assert findings == (
        Finding("withheld", "2 file problem(s) not named to this scope: run `mdcg health` without a scope"),
    )


def test_the_scoped_warnings_of_session_38_still_hold(tmp_path: Path) -> None:
    """A scoped inject still leaves the broken hit out with the warning naming id and file."""
    root = _store(tmp_path)
    _break(root)
    with _open(root, CAROL) as s, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        items = s.inject("unicorn")
    assert ([i.id for i in items], items.unreadable) == (["good"], ("edited",))
    assert "alice" not in "".join(str(w.message) for w in caught)
