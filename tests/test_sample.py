"""The deterministic sample database: determinism, the seed's shape, the bundled slice."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from md_cg import ccg
from md_cg.layout import normalize_domain, normalize_position, route_key
from md_cg.node import EDGE_TYPES, LAYERS, Node
from md_cg.sample import (
    DOMAINS,
    FULL_KNOWLEDGE,
    SLICE_DOMAINS,
    bundled_sample_path,
    generate,
    main,
)
from md_cg.sqlite_source import dangling_edges, iter_rows, open_readonly


def _read(path: Path) -> list[Node]:
    conn = open_readonly(path)
    try:
        results = list(iter_rows(conn))
    finally:
        conn.close()
    assert [r.error for r in results if not r.ok] == []
    return [r.node for r in results]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("full") / "full.sqlite"
    stats = generate(path)
    return path, stats, _read(path)


@pytest.fixture(scope="module")
def slice_nodes() -> list[Node]:
    return _read(bundled_sample_path())


def _knowledge(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if n.layer == "knowledge"]


def test_same_arguments_give_the_same_bytes(tmp_path: Path, full):
    path, stats, _ = full
    again = tmp_path / "again.sqlite"
    assert generate(again).sha256 == stats.sha256 == _sha(path) == _sha(again)
    other = tmp_path / "other.sqlite"
    assert generate(other, seed=7).sha256 != stats.sha256
    assert _sha(other) != _sha(path)


def test_full_sample_has_the_seed_census_shape(full):
    _, stats, nodes = full
    knowledge = _knowledge(nodes)
    assert len(knowledge) == FULL_KNOWLEDGE == stats.knowledge == 3048
    spaces = [n.condition_space or {} for n in knowledge]
    positions = {s["observation_position"] for s in spaces if "observation_position" in s}
    assert len(positions) == stats.distinct_positions == 3039
    keys = Counter(route_key(n) for n in knowledge)
    assert keys.pop(None) == stats.orphans == 6
    assert len(keys) == stats.domains == 90
    assert min(keys.values()) >= 2  # no singleton domains
    assert max(keys.values()) == 163  # 5.3% of the knowledge nodes
    assert round(sum(v * v for v in keys.values()) / 3048**2, 3) == 0.020
    tools = Counter(s["observation_tool"] for s in spaces)
    assert tools.most_common(1) == [("文本", 2835)]  # 93.0%
    constraints = Counter(s["existence_constraint"] for s in spaces)
    assert constraints.most_common(1) == [("无", 2896)]  # 95.0%
    assert len({json.dumps(s["time_window"]) for s in spaces}) == stats.time_windows == 3
    tagged = sum(any(t.startswith("domain:") for t in n.tags) for n in knowledge)
    assert tagged == stats.domain_tagged == 159


def test_full_sample_has_every_layer_every_edge_type_and_dangling_edges(full):
    path, stats, nodes = full
    layers = Counter(n.layer for n in nodes)
    assert set(layers) == set(LAYERS)
    assert {k: v for k, v in layers.items() if k != "knowledge"} == {
        "anchor": 24,
        "structural": 30,
        "contextual": 42,
        "self": 28,
        "rejected": 26,
        "unresolved": 30,
    }
    edges = [e for n in nodes for e in n.edges]
    assert set(Counter(e.type for e in edges)) == set(EDGE_TYPES) - {
        "supersedes"
    }  # lifecycle edges are not seeded
    assert len(edges) == stats.edges
    conn = open_readonly(path)
    dangling = dangling_edges(conn)
    conn.close()
    assert len(dangling) == stats.dangling_edges == 9
    assert all(target.startswith("kp_gone_") for _, target in dangling)
    assert all(n.importance == 0.0 for n in nodes if n.layer == "rejected")


def test_full_sample_bodies_carry_the_variety_a_migration_must_survive(full):
    _, _, nodes = full
    knowledge = _knowledge(nodes)
    complete = Counter(ccg.completeness(ccg.elements(n.body, n.state_attributes)) for n in knowledge)
    assert complete == {1.0: 2673, 0.8: 246, 0.6: 129}
    assert sum("ccg" in (n.state_attributes or {}) for n in knowledge) == 262
    assert sum("# 生效条件" in n.body for n in knowledge) > 1500
    assert sum("# Applies when" in n.body for n in knowledge) > 500
    assert sum(n.verification_basis is None for n in knowledge) == 392
    assert sum(bool(n.non_applicable_conditions) for n in knowledge) == 2316
    assert sum("\n---\n" in n.body for n in knowledge) == 161
    assert sum(n.body != n.body.strip() + "\n" for n in knowledge) == 96


def test_every_domain_and_position_style_normalises_to_its_domain():
    names = [d for d, _, _ in DOMAINS]
    assert len(names) == len({normalize_domain(d) for d in names}) == 90
    for name, _, concepts in DOMAINS:
        concept = concepts.split("|")[0]
        for position in (
            f"{name}·知识点（{concept}）",
            f"{name} · topic ({concept}: history)",
            f"{name}·内容（按骨架填充）",
            f"{name} - entry ({concept})",
        ):
            assert normalize_position(position) == normalize_domain(name)


def test_bundled_slice_equals_a_fresh_generation(tmp_path: Path):
    bundled = bundled_sample_path()
    fresh = tmp_path / "slice.sqlite"
    stats = generate(fresh, slice_=True)
    with sqlite3.connect(bundled) as a, sqlite3.connect(fresh) as b:
        assert list(a.iterdump()) == list(b.iterdump())
    a.close()
    b.close()
    # Bytes match too when the bundled file was written by this sqlite version
    # (the header records the writer's version at offset 96).
    header_version = int.from_bytes(bundled.read_bytes()[96:100], "big")
    major, minor, patch = sqlite3.sqlite_version_info
    if header_version == major * 1_000_000 + minor * 1_000 + patch:
        assert _sha(bundled) == stats.sha256


def test_slice_is_a_small_demo_store(slice_nodes: list[Node]):
    layers = Counter(n.layer for n in slice_nodes)
    assert layers["knowledge"] == 200
    assert all(layers[layer] >= 3 for layer in LAYERS)
    knowledge = _knowledge(slice_nodes)
    keys = Counter(route_key(n) for n in knowledge)
    keys.pop(None)
    assert set(keys) == {normalize_domain(d) for d in SLICE_DOMAINS}
    assert any(n.non_applicable_conditions for n in knowledge)
    assert any(ccg.completeness(ccg.elements(n.body, n.state_attributes)) < 1 for n in knowledge)
    assert {e.type for n in slice_nodes for e in n.edges} == set(EDGE_TYPES) - {
        "supersedes"
    }  # lifecycle edges are not seeded
    for query in ("二分查找", "binary search", "牛顿第二定律", "photosynthesis", "光合作用"):
        assert sum(query in n.body.casefold() for n in knowledge) >= 2, query


def test_knowledge_count_and_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "small.sqlite"
    assert main([str(out), "--knowledge", "500", "--seed", "3"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["knowledge"] == 500
    assert printed["sha256"] == _sha(out)
    assert len(_knowledge(_read(out))) == 500
    with pytest.raises(ValueError, match="knowledge must be at least"):
        generate(tmp_path / "tiny.sqlite", knowledge=1)
    assert not (tmp_path / "tiny.sqlite").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.sqlite"]


def test_build_nodes_of_one_language_draws_from_that_languages_domains_only() -> None:
    from md_cg.sample import build_nodes

    english = build_nodes(knowledge=600, seed=9, language="en")
    chinese = build_nodes(knowledge=600, seed=9, language="zh")
    en_domains = {d for d, lang, _ in DOMAINS if lang == "en"}
    zh_domains = {d for d, lang, _ in DOMAINS if lang == "zh"}
    for nodes, own in ((english, en_domains), (chinese, zh_domains)):
        knowledge = [n for n in nodes if n.layer == "knowledge"]
        assert len(knowledge) == 600
        domains = {route_key(n) for n in knowledge} - {None}
        assert len(domains) >= 10 and domains <= {normalize_domain(d) for d in own}, domains
    assert all(n.body.isascii() for n in english)  # every layer follows its notes' language
    assert sum(not n.body.isascii() for n in chinese) > 0.9 * len(chinese)
    mixed = build_nodes(knowledge=600, seed=9)
    assert [n.id for n in mixed] == [n.id for n in build_nodes(knowledge=600, seed=9, language=None)]
    assert {n.body for n in mixed} != {n.body for n in english}
    with pytest.raises(ValueError, match="language must be 'en', 'zh' or None, got 'fr'"):
        build_nodes(knowledge=600, language="fr")
