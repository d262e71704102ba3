"""Search filtered by tag and time: every tier looks only at the memories that pass.

The reference is the unfiltered search of the whole store with the failing
memories struck out: BM25's idf and the similarity scores are store-wide, so
a filter must not change a passing memory's score or order.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from md_cg import InvalidArgumentError, MdCG, Node
from md_cg.benchmark import filter_tags
from md_cg.cli import app
from md_cg.render import iso

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY = 86_400.0
WORDS = ["deploy", "release", "rollback", "database", "cache", "metrics", "alert", "review"]
CJK = ["发布", "回滚", "数据库", "缓存", "监控", "告警", "评审", "部署"]
TAGS = ["ops", "Ops", "db", "team", "周报"]


def _nodes(n: int = 300, seed: int = 7) -> list[Node]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rnd.sample(WORDS, 3))
        cjk = "".join(rnd.sample(CJK, 2))
        body = f"note {i}: {words}; {cjk}" if i % 3 else f"{cjk}的笔记 {i}，{words}"
        tags = sorted(set(rnd.sample(TAGS, rnd.randint(0, 2))))
        when = T0 + rnd.randint(0, 60) * DAY
        layer = "knowledge" if i % 4 else "contextual"
        out.append(Node(id=f"n{i:03d}", layer=layer, body=body, tags=tags, created_at=when, updated_at=when))
    return out


@pytest.fixture
def store_path(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("filter") / "m"
    with MdCG(root, create=True) as store:
        store.add_many(_nodes(), stamp=False)  # the times as given
    return root


def _passes(
    changed: float, tags: tuple[str, ...], tag: str | None, since: float | None, until: float | None
) -> bool:
    return (
        (tag is None or any(t.casefold() == tag.casefold() for t in tags))
        and (since is None or changed >= since)
        and (until is None or changed <= until)
    )


def _passing(root, tag: str | None, since: float | None, until: float | None) -> set[str]:
    """The ids of the stored memories that pass, from their entries."""
    with MdCG(root, read_only=True) as store:
        return {e.id for e in store.list_nodes() if _passes(e.changed, e.tags, tag, since, until)}


CASES = [
    # English of two words and synonyms: pseudo-relevance feedback ranks within the scope
    ("deploy rollback", "ops", None, None, False),  # "ops" and "Ops" alike: a large share
    ("alert metrics", None, None, T0 + 55 * DAY, False),  # a large share: the mask
    ("release", None, T0 + 50 * DAY, None, False),  # a small share: the scope's own slots
    # CJK queries run no feedback: the scores are the whole store's
    ("数据库 缓存", "db", None, None, True),
    ("部署评审", "周报", T0 + 10 * DAY, T0 + 40 * DAY, True),
    ("监控", None, T0 + 50 * DAY, None, True),
    ("nothing matches this", "team", None, None, False),  # the similarity tier fills from passing ones
]


@pytest.mark.parametrize(("query", "tag", "since", "until", "exact"), CASES)
def test_a_filtered_search_finds_only_and_all_that_pass(
    store_path, query: str, tag: str | None, since: float | None, until: float | None, exact: bool
) -> None:
    passing = _passing(store_path, tag, since, until)
    assert 0 < len(passing) < 300
    window = {"tag": tag, "since": since, "until": until}
    for fresh in (True, False):  # opened from the snapshot (numpy columns), then a built state
        with MdCG(store_path, read_only=True) as store:
            if not fresh:
                store.list_nodes()  # builds every entry
            whole, _ = store.search(query, k=300, judge=False, record=False)
            got, meta = store.search(query, k=300, judge=False, record=False, **window)
            top, _ = store.search(query, k=5, judge=False, record=False, **window)
        assert {r.id for r in got} == passing  # the fill takes every passing memory, no other
        assert meta["filter"] == {**window, "matching": len(passing)}
        assert meta["scanned"] == len(passing)
        ranked = [(r.tier, -r.score) for r in got]
        assert ranked == sorted(ranked)  # tier by tier, best first
        assert [r.id for r in top] == [r.id for r in got[:5]]
        if exact:  # the store-wide scores and order, the failing ones struck out
            want = [(r.id, r.score, r.tier) for r in whole if r.id in passing]
            assert [(r.id, r.score, r.tier) for r in got] == want
        else:  # the same memories hold a query term (T2)
            matched = {r.id for r in whole if r.tier == "T2"} & passing
            assert {r.id for r in got if r.tier == "T2"} >= matched


def test_routed_tiers_keep_to_the_filter_too(store_path) -> None:
    with MdCG(store_path) as store:
        for i in range(40):
            store.add(
                id=f"r{i}",
                body=f"binary search variant {i}",
                tags=["domain:计算机科学"] + (["ops"] * (i % 2)),
            )
        results, meta = store.search("binary search", context="计算机科学", k=10, tag="ops", record=False)
    assert meta["routed"] and {r.tier for r in results} == {"T0"}
    assert {r.id for r in results} == {f"r{i}" for i in range(1, 40, 2)} & {r.id for r in results}
    assert len(results) == 10 and all(int(r.id[1:]) % 2 for r in results)


def test_hidden_memories_stay_hidden_under_a_filter(store_path) -> None:
    with MdCG(store_path) as store:
        ops = [r.id for r in store.search("deploy", k=300, tag="ops", record=False)[0]]
        store.archive(ops[:3])
        after, meta = store.search("deploy", k=300, tag="ops", record=False)
    assert [r.id for r in after] == ops[3:]
    assert meta["filter"]["matching"] == len(store_nodes_tagged(store_path, "ops"))


def store_nodes_tagged(root, tag: str) -> set[str]:
    with MdCG(root, read_only=True) as store:
        return {e.id for e in store.list_page(tag=tag).entries}


def _add_tagged(root: str, node_id: str) -> None:
    with MdCG(root) as store:
        store.add(id=node_id, body="deploy from another process", tags=["OPS"])


def test_the_tag_map_follows_writes_here_and_in_other_processes(store_path) -> None:
    with MdCG(store_path, refresh_interval=0) as store:  # reads look at other processes every call
        first = {r.id for r in store.search("deploy", k=300, tag="ops", record=False)[0]}
        tagged = store_nodes_tagged(store_path, "ops")
        assert first <= tagged
        some = sorted(first)[:2]
        store.update(some[0], tags=["team"])  # leaves the tag
        store.delete(some[1])
        store.add(id="mine", body="deploy here", tags=["Ops"])
        untagged = sorted({e.id for e in store.list_page().entries} - tagged - {"mine"})[0]
        store.update(untagged, tags=["ops"], body="deploy now tagged")
        ctx = mp.get_context("spawn")
        p = ctx.Process(target=_add_tagged, args=(str(store_path), "theirs"))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        got = {r.id for r in store.search("deploy", k=400, tag="ops", record=False)[0]}
    want = store_nodes_tagged(store_path, "ops")
    assert want == (tagged - set(some)) | {"mine", "theirs", untagged}
    assert got == want  # k above their number: the similarity tier fills in every one


def test_bad_filters_are_refused_with_their_name(store_path) -> None:
    with MdCG(store_path, read_only=True) as store:
        with pytest.raises(InvalidArgumentError) as err:
            store.search("deploy", tag="  ")
        assert str(err.value) == "tag must be a non-empty string or a list of them, got '  '"
        for bad in ([], ["ops", " "], ["ops", 3], 7):
            with pytest.raises(InvalidArgumentError, match="tag must be a non-empty string or a list"):
                store.search("deploy", tag=bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgumentError, match="tag must be a non-empty string or a list"):
                store.list_page(tag=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError) as err:
            store.search("deploy", since="7d")  # type: ignore[arg-type]
        assert str(err.value) == (
            "since must be a time in epoch seconds (a finite number), got '7d' "
            "(md_cg.render.parse_when reads '7d' or an ISO date)"
        )
        assert err.value.name == "since"
        with pytest.raises(InvalidArgumentError, match="until must be a time"):
            store.list_page(until=float("nan"))
        with pytest.raises(InvalidArgumentError, match="since must be a time"):
            store.search("deploy", since=True)  # type: ignore[arg-type]


def test_the_cli_filters_and_says_so(store_path) -> None:
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})
    args = [
        "search",
        "数据库",
        "--root",
        str(store_path),
        "--tag",
        "db",
        "--since",
        "2026-01-20",
        "--no-record",
    ]
    data = json.loads(runner.invoke(app, [*args, "--json", "-k", "50"]).stdout)
    since = T0 + 19 * DAY
    passing = _passing(store_path, "db", since, None)
    assert {r["id"] for r in data["results"]} <= passing
    assert data["meta"]["filter"] == {"tag": "db", "since": since, "until": None, "matching": len(passing)}
    text = runner.invoke(app, args).stdout
    assert f"filter: tag db, since {iso(since)} ({len(passing)} memories pass)" in " ".join(text.split())
    bad = runner.invoke(app, [*args[:4], "--until", "soon"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: --until 'soon': expected an ISO date")


def test_the_benchmark_picks_the_tags_nearest_its_shares() -> None:
    nodes = [
        Node(id=f"x{i}", body="b", tags=(["a"] if i < 5 else []) + (["b", "B"] if i < 30 else []) + ["all"])
        for i in range(100)
    ]
    assert filter_tags(nodes) == [("a", 0.05), ("B", 0.30)]  # a tie: the first in sorted order
    assert filter_tags(nodes, (0.9,)) == [("all", 1.0)]
    assert filter_tags([Node(id="x", body="b")]) == []


def test_several_tags_mean_every_one_of_them(store_path) -> None:
    both = _passing(store_path, "ops", None, None) & _passing(store_path, "db", None, None)
    assert 0 < len(both) < len(_passing(store_path, "db", None, None))
    with MdCG(store_path, read_only=True) as store:
        got, meta = store.search("deploy 数据库", k=300, judge=False, record=False, tag=["DB", "ops"])
        page = store.list_page(tag=("ops", "db"))
        one = store.list_page(tag=["db"])
    assert {r.id for r in got} == both == {e.id for e in page.entries}
    assert meta["filter"] == {"tag": ["DB", "ops"], "since": None, "until": None, "matching": len(both)}
    assert one == store_list(store_path, "db")
    runner = CliRunner(env={"MDCG_ROOT": None, "COLUMNS": "200"})
    root = str(store_path)
    listed = json.loads(
        runner.invoke(app, ["list", "--root", root, "-t", "db", "-t", "OPS", "-n", "300", "--json"]).stdout
    )
    assert {i["id"] for i in listed["items"]} == both and listed["total"] == len(both)
    text = runner.invoke(
        app, ["search", "deploy", "--root", root, "-t", "db", "-t", "OPS", "--no-record"]
    ).stdout
    assert f"filter: tags db + OPS ({len(both)} memories pass)" in " ".join(text.split())


def store_list(root, tag: str):
    with MdCG(root, read_only=True) as store:
        return store.list_page(tag=tag)


def test_an_empty_query_and_a_window_with_no_time_are_refused(tmp_path: Path) -> None:
    """search("") answered with filler from the similarity fill; since after until
    answered nothing. Both are mistakes of the caller, named."""
    with MdCG(tmp_path / "m") as s:
        s.add(id="a", body="hello world")
        for q in ("", "  \n"):
            with pytest.raises(InvalidArgumentError, match=r"^query is empty: give the words to search for$"):
                s.search(q)
        with pytest.raises(InvalidArgumentError) as err:
            s.search("hello", since=1_800_000_000, until=1_700_000_000)
        assert str(err.value) == (
            "since (2027-01-15T08:00:00Z) is after until (2023-11-14T22:13:20Z): no time lies between them"
        )
        assert err.value.name == "until"
        with pytest.raises(InvalidArgumentError, match="is after until"):
            s.list_nodes(since=2.0, until=1.0)
        assert [r.id for r in s.search("hello", since=1.0, until=1.0e10)[0]] == ["a"]
