"""Every node file the write paths produce is byte-identical to a stored golden copy.

The golden copy (``tests/data/write_bytes_golden.json``) was generated from
``main`` at 9db47f6, before the write path was reworked for speed
(docs/benchmarks.md, "Session 6: write path"): :func:`write_store` writes a
few hundred varied nodes -- Chinese and English bodies with CCG marks, every
field type, odd strings YAML must see quoted, extreme floats and instants,
extra keys YAML would misread -- through ``add_many`` (verbatim and
stamped), ``add``, ``add(overwrite=True)`` and ``update``, with the clock
fixed, and the test compares every file of the store, byte for byte.

A second, property test holds the one-pass dumper to the reference path it
replaces (``dump_frontmatter(node.to_dict(iso_times=True))``) on random
nodes, errors included.

One entry changed since (session 27, second review round): ``节点_68-kettle``, an
expired memory the final ``update`` used to bring back as permanent (no tier, no
expiry); an update of an expired memory is refused now unless it renews it, and the
test renews it explicitly (temp, the store's TTL from the fixed clock).

Regenerate (only when the file format is meant to change)::

    PYTHONPATH=. python tests/test_write_golden.py --regenerate
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

import md_cg.editing as editing_mod
import md_cg.engine as engine_mod
import md_cg.store as store_mod
import md_cg.views as views_mod
from md_cg import MdCG, Node, nodefile
from md_cg.errors import InvalidNodeError
from md_cg.node import EDGE_TYPES, SENSITIVITY_LEVELS, VERIFICATION_BASES, Edge, validate
from md_cg.visibility import is_expired

GOLDEN = Path(__file__).resolve().parent / "data" / "write_bytes_golden.json"
NOW = 1796083200.25  # 2026-12-01T00:00:00.250000Z

ODD = [
    "yes",
    "no",
    "null",
    "on",
    "~",
    "1e5",
    "0x1F",
    "- item",
    "a: b",
    "#comment",
    "---",
    '"quoted"',
    "back\\slash",
    "tab\there",
    "line\nbreak",
    "\u2028sep\u2029",
    "del\x7f",
    "nel\x85",
    "\ufeffbom",
    "\ufffe\uffff",
    "bell\x07",
    "😀 emoji",
    "二分查找",
    "数据：'引号' “双引号”",
    "",
    " ",
    "  padded  ",
    "&anchor",
    "*alias",
    "!tag",
    "%percent",
    "@at",
    "`tick`",
    "{brace}",
    "[bracket]",
    "|pipe",
    ">fold",
    "?question",
]
FLOATS = [0.0, -0.0, 0.1, 0.5, 1.0, 1e-7, 1.5e-5, 1e16, 1e20, 1.5e300, 5e-324, 2.0, 123456.789, -3.25]
INTS = [0, 1, -1, 7, 2**31, 2**63 - 1, -(2**63), 10**15]
KEYS = ["on", "off", "yes", "No", "null", "Y", "a b", "colon:key", "键", "content", "handler", "x_1", "TRUE"]
WORDS_EN = ["binary", "search", "cache", "tea", "kettle", "graph", "memory", "lock", "shard", "index"]
WORDS_ZH = ["二分查找", "有序数组", "缓存", "茶壶", "图谱", "记忆", "锁", "分片", "索引", "链表"]
DOMAINS = ["计算机科学", "kitchen", "physics", "数学", "history of art", "医学", "Music", "law"]
INSTANT_STRINGS = ["2026-11-30T23:59:20.123456Z", "2024-02-29", "1999-12-31T23:59:59+08:00", "0001-01-01"]


def _json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice(ODD)
    if kind == 1:
        return rng.choice(FLOATS)
    if kind == 2:
        return rng.choice(INTS)
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return rng.choice(WORDS_ZH + WORDS_EN)
    if kind in (5, 6):
        return [_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(ODD + KEYS + WORDS_EN): _json(rng, depth + 1) for _ in range(rng.randrange(4))}


def _body(rng: random.Random, i: int) -> str:
    zh = i % 2 == 0
    words = WORDS_ZH if zh else WORDS_EN
    lines = []
    if rng.random() < 0.7:
        lines.append(f"# {'功能名' if zh else 'Function'}：{rng.choice(words)}")
    if rng.random() < 0.6:
        lines.append(f"# 生效条件：{rng.choice(words)}")
    if rng.random() < 0.4:
        lines.append(f"# 子功能：{rng.choice(words)} → {rng.choice(words)}")
    if rng.random() < 0.4:
        lines.append(f"# 执行：{rng.choice(words)}")
    if rng.random() < 0.4:
        lines.append(f"# 验证方式：{rng.choice(['单元测试', 'unit test', '测量'])}")
    if rng.random() < 0.5:
        lines.append(f"# 不适用条件：{rng.choice(words)}；{rng.choice(words)}")
    sep = "" if zh else " "
    lines.append(sep.join(rng.choice(words) for _ in range(rng.randrange(3, 30))) + ("。" if zh else "."))
    if rng.random() < 0.2:
        lines.append("---")
        lines.append(rng.choice(ODD))
    if rng.random() < 0.1:
        lines.append("")
    body = "\n".join(lines)
    return body + "\n" if rng.random() < 0.3 else body


def _instant(rng: random.Random) -> Any:
    kind = rng.randrange(5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice(INSTANT_STRINGS)
    if kind == 2:
        return datetime(2025, rng.randrange(1, 13), rng.randrange(1, 29), 12, 30, tzinfo=UTC).isoformat()
    if kind == 3:
        return rng.choice([NOW - 86400.5, 1.0, 0.0, -1e11, 1e12, NOW + 3600.000001])
    return round(NOW - rng.randrange(10**8) - rng.random(), 6)


def golden_nodes(count: int = 320, seed: int = 16) -> list[Node]:
    """Deterministic, varied nodes (the same on every run and Python >= 3.11)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        opt = rng.random
        layer = rng.choice(
            ["knowledge"] * 6 + ["anchor", "structural", "contextual", "self", "rejected", "unresolved"]
        )
        tags = []
        if opt() < 0.8:
            tags.append(f"domain:{rng.choice(DOMAINS)}")
        tags += [rng.choice(ODD + WORDS_EN + WORDS_ZH) for _ in range(rng.randrange(3))]
        space = None
        if opt() < 0.6:
            space = {
                rng.choice(["observation_position", "preconditions", "scope", "键", "on"]): rng.choice(
                    [rng.choice(WORDS_ZH), [rng.choice(WORDS_EN), rng.choice(ODD)], _json(rng)]
                )
                for _ in range(rng.randrange(1, 4))
            }
        edges = []
        for _ in range(rng.randrange(3) if opt() < 0.4 else 0):
            edges.append(
                Edge(
                    target=f"n{rng.randrange(count):04d}",
                    type=rng.choice(EDGE_TYPES),
                    confidence=rng.choice([None, 0.5, 1e-7, 0.9]),
                    verified=rng.choice([None, 0, 1, True]),
                    extra={"note": rng.choice(ODD)} if opt() < 0.2 else {},
                )
            )
        if opt() < 0.1:
            edges.append({"target": f"n{rng.randrange(count):04d}", "type": "causal", "why": _json(rng)})  # type: ignore[arg-type]
        node = Node(
            id=f"n{i:04d}" if opt() < 0.9 else f"节点_{i}-{rng.choice(WORDS_EN)}",
            layer=layer,
            body=_body(rng, i),
            modality=rng.choice([None, "text", "代码", "yes"]),
            importance=rng.choice([None, 0.0, 0.5, 1.0, 0.123456789, 1e-7]),
            confidence=rng.choice([None, 0.6, 1.0, 0.3333333333333333]),
            condition_space=space,
            tags=tags,
            sensitivity=rng.choice([None, None, *SENSITIVITY_LEVELS]),
            agent_scope=rng.choice([None, None, "agent-1", "代理"]),
            workspace_scope=rng.choice([None, None, "ws", "工作区 A"]),
            spatial=_json(rng) if opt() < 0.3 else None,
            temporal=rng.choice(
                [None, None, "one_off", "recurring", "durable", "unknown", " Durable ", "once", ""]
            ),
            retention_tier=rng.choice([None, None, None, "temp", "long"]),
            retention_reason=rng.choice([None, None, "user asked", rng.choice(ODD)]),
            expires_at=_instant(rng) if opt() < 0.2 else None,
            valid_until=_instant(rng) if opt() < 0.2 else None,
            created_at=_instant(rng),
            updated_at=_instant(rng),
            semantic_coordinates=rng.choice([None, [0.1, -0.2, 1e-7], [1, 2, 3], {"x": 1.5}, []]),
            state_attributes={rng.choice(KEYS): _json(rng)} if opt() < 0.3 else None,
            entity_id=rng.choice([None, None, "e-1", 42, rng.choice(ODD)]),
            verification_basis=rng.choice([None, None, *VERIFICATION_BASES]),
            non_applicable_conditions=[rng.choice(WORDS_ZH + ODD) for _ in range(rng.randrange(3))],
            edges=edges,
            verification_history=[
                {
                    "at": rng.choice(INSTANT_STRINGS),
                    "result": rng.choice(["confirmed", "falsified"]),
                    "n": _json(rng),
                }
                for _ in range(rng.randrange(3) if opt() < 0.3 else 0)
            ],
            access_count=rng.choice([None, 0, 3, 10**9]),
            last_access=_instant(rng) if opt() < 0.3 else None,
            extra={rng.choice(KEYS): _json(rng) for _ in range(rng.randrange(3) if opt() < 0.3 else 0)},
        )
        out.append(node)
    return out


@contextlib.contextmanager
def fixed_clock() -> Iterator[None]:
    """The wall clock of every write path, fixed at :data:`NOW` (monotonic time runs)."""
    import time

    fixed = types.SimpleNamespace(
        time=lambda: NOW, monotonic=time.monotonic, sleep=time.sleep, time_ns=time.time_ns
    )
    modules = (engine_mod, store_mod, views_mod, editing_mod)
    saved = [m.time for m in modules]  # type: ignore[attr-defined]
    for m in modules:
        m.time = fixed  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for m, t in zip(modules, saved, strict=True):
            m.time = t  # type: ignore[attr-defined]


def _add(store: MdCG, node: Node, **kw: Any) -> None:
    """``store.add``; a node with a tag ``add`` refuses since session 20 (blank, or with a
    control character), or a time outside the years 1-9999 (since session 26), through
    ``add_many`` of one, which carries it and writes the same bytes."""
    try:
        editing_mod.require_usable(node, fields=("tags", "times"))
    except InvalidNodeError:
        store.add_many([node], **kw)
    else:
        store.add(node, **kw)


def _expired_at_now(store: MdCG, node_id: str) -> bool:
    return is_expired(store.entry(node_id, include_expired=True, include_archived=True), NOW)


def write_store(root: Path) -> dict[str, str]:
    """Write the golden nodes through every write path; return every node file's text by path."""
    nodes = golden_nodes()
    with fixed_clock(), MdCG(root, auto_compact=None) as store:
        verbatim, stamped, single, rest = nodes[:160], nodes[160:220], nodes[220:280], nodes[280:]
        for start in range(0, len(verbatim), 50):
            store.add_many(verbatim[start : start + 50], stamp=False)
        store.add_many(stamped)
        for node in single:
            if not node.body.strip():
                node.body = "text"
            _add(store, node)
        for node in rest[:20]:
            _add(store, node, stamp=False)
        store.add_many(rest[20:], stamp=False, decide=True)
        # Replacing: overwrite with a changed node, an unchanged one, and updates.
        for i, node in enumerate(nodes[:30]):
            again = node.copy()
            if i % 3:
                again.body = again.body + "\n补充 addendum"
                again.tags = [*again.tags, "edited"]
            _add(store, again, overwrite=True)
        store.add_many([n.copy() for n in nodes[30:60]], overwrite=True, stamp=False)
        for node in nodes[60:80]:
            # an expired one is renewed explicitly: an update alone is refused since session 27
            renew: dict[str, Any] = {}
            if _expired_at_now(store, node.id):
                kept = store.get(node.id, include_expired=True).retention_reason
                renew = {"retention_tier": "temp", "retention_reason": kept}
            store.update(
                node.id,
                importance=0.75,
                tags=["domain:数学", "yes", "更新"],
                body="更新后的正文\nupdated",
                **renew,
            )
    out = {}
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        if not rel.startswith(".mdcg"):
            out[rel] = path.read_bytes().decode("utf-8")
    return out


def test_every_written_file_is_byte_identical_to_the_golden_copy(tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    files = write_store(tmp_path / "store")
    assert len(golden["files"]) >= 300
    assert sorted(files) == sorted(golden["files"])
    for rel, text in golden["files"].items():
        assert files[rel] == text, rel


def _reference(node: Node) -> str:
    """The file text through the reference path: the field mapping, then its lines."""
    fm = nodefile.dump_frontmatter(node.to_dict(iso_times=True))
    return nodefile._file_text(fm, node.body)


def _outcome(fn: Any, node: Node) -> tuple[str, str]:
    try:
        return "ok", fn(node)
    except InvalidNodeError as exc:
        return type(exc).__name__, str(exc)


sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_nodefile import nodes as random_nodes  # noqa: E402


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_nodes())
def test_one_pass_dumper_equals_the_reference_path(node: Node) -> None:
    try:
        validate(node)
    except InvalidNodeError:
        pass  # unvalidated nodes too: the dumper must give the same text or the same error
    assert _outcome(nodefile.dumps, node) == _outcome(_reference, node)


def test_golden_nodes_equal_the_reference_path() -> None:
    for node in golden_nodes():
        validate(node)
        assert nodefile.dumps(node) == _reference(node)


if __name__ == "__main__":
    if "--regenerate" not in sys.argv:
        raise SystemExit("usage: PYTHONPATH=. python tests/test_write_golden.py --regenerate")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        files = write_store(Path(tmp) / "store")
    GOLDEN.write_text(
        json.dumps(
            {"source": "main at 9db47f6", "files": files}, ensure_ascii=False, indent=0, sort_keys=True
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"{len(files)} files -> {GOLDEN}")


def _reference_entry(node: Node, rel: str) -> Any:
    """The index entry as built before the write path was reworked (keywords, ``conflict_of``)."""
    import orjson

    from md_cg import ccg, layout, paths
    from md_cg.index import Entry, title_of
    from md_cg.judge import node_conditions
    from md_cg.merge import conflict_of

    elems = ccg.elements(node.body, node.state_attributes)
    domain = layout.route_key(node) if node.layer == layout.BUCKETED_LAYER else None
    return Entry(
        id=node.id,
        path=rel,
        layer=node.layer,
        bucket=layout.bucket_dir(domain) if node.layer == layout.BUCKETED_LAYER else None,
        mtime_ns=7,
        size=9,
        tags=tuple(node.tags),
        importance=node.importance,
        confidence=node.confidence,
        created_at=node.created_at,
        updated_at=node.updated_at,
        verification_basis=node.verification_basis,
        ccg_missing=tuple(ccg.missing(elems)),
        conditions=tuple(node_conditions(node, elems)),
        title=title_of(node.body),
        edges=tuple((e.target, e.type) for e in node.edges),
        space_json=orjson.dumps(node.condition_space).decode() if node.condition_space else None,
        access_count=node.access_count or 0,
        last_access=node.last_access,
        sensitivity=node.sensitivity,
        agent_scope=node.agent_scope,
        workspace_scope=node.workspace_scope,
        retention_tier=node.retention_tier,
        expires_at=node.expires_at,
        valid_until=node.valid_until,
        archived=paths.is_archived_rel(rel),
        conflict=conflict_of(node) is not None,
        domain=domain,
    )


def test_index_entries_equal_the_keyword_reference() -> None:
    from md_cg import index, paths

    conflicted = Node(id="c1", body="a\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\n")
    keyed = Node(id="c2", body="text", extra={"merge_conflict": "odd"})
    for node in [*golden_nodes(), conflicted, keyed]:
        validate(node)
        rel = paths.node_rel(node.layer, "b", node.id)
        for where in (rel, paths.archived_rel(rel)):
            assert index.make_entry(node, where, 7, 9) == _reference_entry(node, where)
    assert index.make_entry(conflicted, "knowledge/orphan/c1.md", 7, 9).conflict
    assert index.make_entry(keyed, "knowledge/orphan/c2.md", 7, 9).conflict
