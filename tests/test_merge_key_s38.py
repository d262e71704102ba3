"""A YAML merge key in a frontmatter is refused as anchors are (attack 5 of session 38, sc6,
low/medium, scope).

A person narrows the shared memory ``plan`` to bob with ``<<: {agent_scope: bob}``. YAML
readers (PyYAML's ``safe_load``, Obsidian) merge it: ``agent_scope: bob``. md-cg kept ``<<``
as an extra key and served the memory as shared: alice's ``get`` and search returned bob's
notes, before and after a sync. A file must read the same to a person and to md-cg, so the
file is malformed now, named with the key, by the YAML reader and by the ``key: <JSON>``
lines alike (the fast reader leaves such a line to them). A quoted ``"<<"`` is a plain key
to YAML too, and stays an extra key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from md_cg import MdCG, Scope, fastread, nodefile
from md_cg.errors import MalformedNodeFileError, NodeNotFoundError

HEAD = '---\nid: "a"\nlayer: "self"\n'
LOADERS = pytest.mark.parametrize(
    "loader", [nodefile.YAML_LOADER, nodefile.BoundedSafeLoader], ids=lambda c: c.__name__
)
REFUSED = "the YAML frontmatter does not parse: merge keys (<<) are not allowed"


@LOADERS
@pytest.mark.parametrize(
    ("lines", "where"),
    [
        ("<<: {agent_scope: bob}", "4: {refused} (column 1)"),  # YAML flow mapping
        ('<<: {"agent_scope": "bob"}', "4: {refused} (column 1)"),  # a `key: <JSON>` line
        ("<< : {agent_scope: bob}", "4: {refused} (column 1)"),
        ("!!merge <<: {agent_scope: bob}", "4: {refused} (column 1)"),
        ('!!merge <<: {"agent_scope": "bob"}', "4: {refused} (column 1)"),  # JSON after a tag
        ("? <<\n: {agent_scope: bob}", "4: {refused} (column 3)"),
        ("<<:\n  agent_scope: bob", "4: {refused} (column 1)"),
        ("<<: [{agent_scope: bob}, {sensitivity: secret}]", "4: {refused} (column 1)"),
        ("condition_space:\n  <<: {room: b}", "5: {refused} (column 3)"),  # nested
        ('condition_space: {"a": 1, <<: {"b": 2}}', "4: {refused} (column 27)"),
        ("tags: [x]\nextra: [{<<: {a: 1}}]", "5: {refused} (column 10)"),
    ],
)
def test_a_merge_key_makes_the_file_malformed(
    loader: type, monkeypatch: pytest.MonkeyPatch, lines: str, where: str
) -> None:
    monkeypatch.setattr(nodefile, "YAML_LOADER", loader)
    text = f"{HEAD}{lines}\n---\nbob's notes\n"
    assert "<<" not in json.dumps(yaml.safe_load(text.split("---\n")[1]))  # PyYAML merges it
    expected = "a.md:" + where.format(refused=REFUSED)
    for read in (nodefile.loads, fastread.loads):  # the fast reader agrees with the full one
        with pytest.raises(MalformedNodeFileError) as err:
            read(text, "a.md")
        assert str(err.value) == expected


@pytest.mark.parametrize("key", ['"<<"', "!!str <<"])
def test_a_quoted_merge_key_is_a_plain_key_to_yaml_and_md_cg(key: str) -> None:
    text = f'{HEAD}{key}: {{"agent_scope": "bob"}}\n---\nbody\n'
    node = nodefile.loads(text, "a.md")
    assert (node.agent_scope, node.extra) == (None, {"<<": {"agent_scope": "bob"}})
    assert yaml.safe_load(text.split("---\n")[1])["<<"] == {"agent_scope": "bob"}
    written = nodefile.dumps(node)  # md-cg writes such a key quoted: it reads back the same
    assert '\n"<<": {"agent_scope": "bob"}\n' in written
    assert nodefile.loads(written, "a.md").extra == node.extra


def test_a_memory_narrowed_with_a_merge_key_is_not_served_as_shared(tmp_path: Path) -> None:
    """sc6: alice's ``get`` returned bob's notes with ``agent_scope`` None, after a sync too."""
    root = tmp_path / "m"
    with MdCG(root) as s:
        s.add(id="plan", layer="contextual", body="Plan\nbob's salary negotiation notes")
        s.add(id="other", layer="contextual", body="Other\nthe salary bands are public")
    f = root / "contextual/plan.md"
    f.write_text(f.read_text(encoding="utf-8").replace("\n---\n", "\n<<: {agent_scope: bob}\n---\n", 1))
    message = f"contextual/plan.md:6: {REFUSED} (column 1)"
    with MdCG(root, scope=Scope(agent="alice"), refresh_interval=None) as a:
        with pytest.raises(MalformedNodeFileError) as err:  # before a sync: the file, not its problem
            a.get("plan")
        assert str(err.value) == (  # session 39: a scoped handle is not told the problem
            "contextual/plan.md:6: memory 'plan' no longer reads as a memory: its file was changed by "
            "hand since the index read it; what is wrong is not told to a scoped handle (it may quote "
            "the file's values) -- `mdcg health` without a scope names it; fix the file, then run "
            "`mdcg sync`"
        )
    with MdCG(root) as u:
        report = u.sync()
        assert report.malformed == (("contextual/plan.md", message.split(":", 2)[2].strip()),)
        assert [(f.kind, f.path) for f in u.health().findings if f.kind == "unreadable_file"] == [
            ("unreadable_file", "contextual/plan.md")
        ]
    with MdCG(root, scope=Scope(agent="alice")) as a:
        with pytest.raises(NodeNotFoundError) as gone:
            a.get("plan")
        assert str(gone.value).strip("\"'") == "no node with id 'plan' in this store"
        assert [r.id for r in a.search("salary", record=False)[0] if not r.filler] == ["other"]


@LOADERS
@pytest.mark.parametrize("key", ["!!str agent_scope", "'agent_scope'", '"agent_scope"'])
def test_a_key_yaml_reads_as_agent_scope_is_agent_scope_to_md_cg(
    loader: type, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """The same class: a tagged or single-quoted key on a ``key: <JSON>`` line was an extra
    key to md-cg (the memory shared) and ``agent_scope`` to YAML."""
    monkeypatch.setattr(nodefile, "YAML_LOADER", loader)
    text = f'{HEAD}{key}: "bob"\n---\nbody\n'
    assert yaml.safe_load(text.split("---\n")[1])["agent_scope"] == "bob"
    for read in (nodefile.loads, fastread.loads):
        node = read(text, "a.md")
        assert (node.agent_scope, node.extra) == ("bob", {})


def test_an_anchored_key_on_a_json_line_is_refused_as_anchors_are() -> None:
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(f'{HEAD}&a agent_scope: "bob"\n---\nbody\n', "a.md")
    assert (
        str(err.value)
        == "a.md:4: the YAML frontmatter does not parse: anchors (&a) are not allowed (column 1)"
    )


@pytest.mark.parametrize("key", ["my-key", "x.y", "on", "日本"])
def test_other_bare_keys_stay_keys_of_their_own(key: str) -> None:
    """Keys YAML reads as written stay keys of their own. Since session 39 a bare key that is
    not a plain name takes the YAML reader (tests/test_fastpath_s39.py): ``1e5`` is YAML's
    string, no longer JSON's float."""
    node = nodefile.loads(f"{HEAD}{key}: 1e5\n---\nbody\n", "a.md")
    assert node.extra == {key: "1e5"}


def test_a_key_yaml_cannot_read_is_refused() -> None:
    """``@type`` was a key of its own (JSON lines) before session 39; YAML reads no such
    key, and md-cg reads a file as YAML does or refuses it."""
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(f"{HEAD}@type: 1\n---\nbody\n", "a.md")
    assert str(err.value) == (
        "a.md:4: the YAML frontmatter does not parse: found character that cannot start any "
        "token (column 1), while scanning for the next token"
    )


def test_a_deep_bracket_key_is_no_recursion_error() -> None:
    """A key of 100,000 ``[`` goes to the bounded YAML loader, which refuses it at level 65,
    not with a RecursionError."""
    with pytest.raises(MalformedNodeFileError) as err:
        nodefile.loads(f"{HEAD}{'[' * 100_000}: 1\n---\nbody\n", "a.md")
    assert str(err.value) == (
        "a.md:4: the YAML frontmatter does not parse: nested deeper than 64 levels of lists and "
        "objects (column 1000), while increasing flow level"
    )
