"""The fast reader gives exactly the full reader's result, and falls back on anything unusual."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_nodefile import nodes

from md_cg import fastread, nodefile
from md_cg.errors import MalformedNodeFileError
from md_cg.node import MAX_DEPTH, MAX_FRONTMATTER_BYTES, Node, validate
from md_cg.sample import build_nodes


def _full(text: str, **defaults: str | None) -> Node | str:
    try:
        return nodefile.loads(text, "x.md", **defaults)
    except MalformedNodeFileError as exc:
        return f"error: {exc}"


def _fast(text: str, **defaults: str | None) -> Node | str:
    try:
        return fastread.loads(text, "x.md", **defaults)
    except MalformedNodeFileError as exc:
        return f"error: {exc}"


def test_the_sample_corpus_takes_the_fast_path_and_equals_the_full_reader():
    written = build_nodes(knowledge=300, seed=3)
    assert len({n.layer for n in written}) >= 5
    for node in written:
        validate(node)
        text = nodefile.dumps(node)
        fast = fastread.fast_node(text)
        assert fast is not None, node.id
        assert fast == nodefile.loads(text)
        assert fast.to_dict() == node.to_dict()
        assert nodefile.dumps(fast) == text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes())
def test_any_written_node_reads_the_same_through_both_readers(node: Node) -> None:
    validate(node)
    text = nodefile.dumps(node)
    assert _fast(text) == _full(text)
    fast = fastread.fast_node(text)
    if fast is not None:
        assert fast == node


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_reads_the_same_through_both_readers(text: str) -> None:
    for defaults in ({}, {"default_id": "n1", "default_layer": "knowledge"}):
        assert _fast(text, **defaults) == _full(text, **defaults)


BASE = '---\nid: "n1"\nlayer: "knowledge"\ntags: ["a", "b"]\n---\nbody line\n'

#: files the fast path must refuse (each differs from the engine's layout in one way)
FALLBACKS = {
    "bom": "\ufeff" + BASE,
    "crlf": BASE.replace("\n", "\r\n"),
    "cr in the frontmatter only": '---\nid: "n1"\r\nlayer: "knowledge"\n---\nbody\n',
    "no closing fence": '---\nid: "n1"\nlayer: "knowledge"\n',
    "empty frontmatter": "---\n---\nbody\n",
    "fence with more dashes first": '---\nid: "n1"\n----\nlayer: "knowledge"\n---\nbody\n',
    "fence with trailing space": '---\nid: "n1"\nlayer: "knowledge"\n--- \n---\nbody\n',
    "blank line": '---\nid: "n1"\n\nlayer: "knowledge"\n---\nbody\n',
    "quoted key": '---\nid: "n1"\nlayer: "knowledge"\n"on": 1\n---\nbody\n',
    "key with a space": '---\nid: "n1"\nlayer: "knowledge"\nmy key: 1\n---\nbody\n',
    "no space after the colon": '---\nid: "n1"\nlayer:"knowledge"\n---\nbody\n',
    "yaml plain scalar": "---\nid: n1\nlayer: knowledge\ntags: python\n---\nbody\n",
    "yaml block list": '---\nid: "n1"\nlayer: "knowledge"\ntags:\n  - a\n  - b\n---\nbody\n',
    "yaml anchor": '---\nid: "n1"\nlayer: "knowledge"\nx: &a [1]\ny: *a\n---\nbody\n',
    "two values on a line": '---\nid: "n1"\nlayer: "knowledge"\nx: 1, "x": 2\n---\nbody\n',
    "value split over lines": '---\nid: "n1"\nlayer: "knowledge"\nx: [1\ny: 2]\n---\nbody\n',
    "duplicate key": '---\nid: "n1"\nlayer: "knowledge"\nid: "n2"\n---\nbody\n',
    "single-quoted yaml": "---\nid: 'n1'\nlayer: 'knowledge'\n---\nbody\n",
    "bad layer": '---\nid: "n1"\nlayer: "nowhere"\n---\nbody\n',
    "bad importance": '---\nid: "n1"\nlayer: "knowledge"\nimportance: 5.0\n---\nbody\n',
    "unsafe id": '---\nid: "../x"\nlayer: "knowledge"\n---\nbody\n',
    "bad time": '---\nid: "n1"\nlayer: "knowledge"\ncreated_at: "yesterday"\n---\nbody\n',
    "deep value": '---\nid: "n1"\nlayer: "knowledge"\nx: '
    + "[" * (MAX_DEPTH + 1)
    + "]" * (MAX_DEPTH + 1)
    + "\n---\nb\n",
    "many brackets": '---\nid: "n1"\nlayer: "knowledge"\nx: ' + "[]," * MAX_DEPTH + "[]\n---\nb\n",
    "large frontmatter": '---\nid: "n1"\nlayer: "knowledge"\nx: "'
    + "a" * (MAX_FRONTMATTER_BYTES // 4)
    + '"\n---\nb\n',
    "no id": '---\nlayer: "knowledge"\n---\nbody\n',
    "no frontmatter": "just a note\n",
    "nan": '---\nid: "n1"\nlayer: "knowledge"\nx: NaN\n---\nbody\n',
    # session 25: orjson reads it as a float; the full reader keeps it whole and refuses it
    "integer beyond 64 bits": '---\nid: "n1"\nlayer: "knowledge"\nx: 99999999999999999999999\n---\nbody\n',
    "a run of 19 digits": '---\nid: "n1"\nlayer: "knowledge"\nx: 1234567890123456789\n---\nbody\n',
    "the range's ends": '---\nid: "n1"\nlayer: "knowledge"\n'
    + "x: [18446744073709551615, -9223372036854775808]\n---\nb\n",
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_unusual_files_fall_back_to_the_full_reader(name):
    text = FALLBACKS[name]
    assert fastread.fast_node(text) is None
    assert fastread.fast_node(text, default_id="n9", default_layer="knowledge") is None or name in ("no id",)
    for defaults in ({}, {"default_id": "n9", "default_layer": "knowledge"}):
        assert _fast(text, **defaults) == _full(text, **defaults)


def test_the_fast_path_reads_what_it_recognises():
    node = fastread.fast_node(BASE)
    assert node is not None and node == nodefile.loads(BASE)
    assert node.tags == ["a", "b"] and node.body == "body line"
    # a fence at the very end of the file, a body with its own '---' lines, a string tag
    for text in (
        '---\nid: "n1"\nlayer: "knowledge"\n---',
        '---\nid: "n1"\nlayer: "knowledge"\n---\n---\nmore\n---\n',
        '---\nid: "n1"\nlayer: "knowledge"\ntags: "solo"\nx_1: {"a": [1, 2.5e-07, null]}\n---\nb\n',
        '---\nid: "n1"\nlayer: "knowledge"\nnote: "line\\u2028sep"\n---\nb\n',
    ):
        fast = fastread.fast_node(text)
        assert fast is not None and fast == nodefile.loads(text), text
    # a raw U+2028 is a line break to YAML (folded, the spaces around it dropped): since
    # session 39 such a frontmatter is the YAML reader's (it was kept raw, JSON's reading)
    text = '---\nid: "n1"\nlayer: "knowledge"\nnote: "line\\u2028sep \u2028 raw"\n---\nb\n'
    assert fastread.fast_node(text) is None
    assert nodefile.loads(text).extra == {"note": "line\u2028sep\u2028raw"}
    assert fastread.fast_node('---\nid: "n1"\nlayer: "knowledge"\ntags: "solo"\n---\n').tags == ["solo"]
    # no id in the file: the defaults stand in, as in the full reader
    text = '---\nlayer: "knowledge"\n---\nbody\n'
    fast = fastread.fast_node(text, default_id="n9", default_layer="knowledge")
    assert fast is not None and fast == nodefile.loads(text, default_id="n9", default_layer="knowledge")


def test_fast_nodes_of_a_mixed_batch_equals_fast_node_of_each():
    texts = [
        BASE,
        *(FALLBACKS[name] for name in sorted(FALLBACKS)),
        nodefile.dumps(validate(build_nodes(knowledge=4)[0])),
    ]
    defaults = [("n9", "knowledge") if i % 2 else (None, None) for i in range(len(texts))]
    got = fastread.fast_nodes(texts, defaults)
    want = [
        fastread.fast_node(t, default_id=d, default_layer=la)
        for t, (d, la) in zip(texts, defaults, strict=True)
    ]
    assert got == want
    assert got[0] is not None and got[-1] is not None and sum(n is None for n in got) >= len(FALLBACKS) - 1
