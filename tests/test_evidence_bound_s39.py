"""A hit's evidence lists at most ``search.EVIDENCE_TERMS`` terms (session 39): a query of
2,000 words listed all it held in each hit's evidence, in the library and ``mdcg search
--json``. And a search works out its similarity units once (they were worked out three
times), ranking every query as before (the id lists below are those of the code before)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import mcp_calls

from md_cg import MdCG, Node, search
from md_cg.mcp_server import BUDGETS
from md_cg.text import query_terms
from md_cg.textindex_similar import SimilarityKeys

#: 2,000 distinct words of three consonants: no stopword among them, none a stemmer cuts
WORDS = ["".join(p) for p in itertools.product("bcdfghjklmnpqrstvwxz", repeat=3)][:2000]
QUERY = " ".join(WORDS)  # 7,999 characters: under the MCP's 10,000


def _hostile_store(root: Path) -> None:
    with MdCG(root) as s:
        s.add_many(
            [
                Node(id="many", body="Pasted words\n\n" + " ".join(WORDS[:300]), verification_basis="data"),
                Node(id="some", body="Some words\n\n" + " ".join(WORDS[:100]), verification_basis="data"),
                Node(id="other", body="An unrelated note about the weather.", verification_basis="data"),
            ]
        )


def test_the_query_is_2000_terms() -> None:
    assert query_terms(QUERY) == WORDS
    assert getattr(search, "EVIDENCE_TERMS", None) == 128


def test_a_long_query_lists_at_most_evidence_terms_per_hit(tmp_path: Path) -> None:
    """Before: "many" listed its 300 terms (and each of k hits as many: 2,418 a hit, 16,927
    characters, for a query of 2,500 words)."""
    _hostile_store(tmp_path / "s")
    with MdCG(tmp_path / "s") as s:
        results, _ = s.search(QUERY, k=5, record=False)
    ev = {r.id: r.evidence for r in results if not r.filler}
    assert ev == {
        "many": {"terms": WORDS[:128], "synonyms": [], "terms_more": 172},
        "some": {"terms": WORDS[:100], "synonyms": [], "fuzzy": 0.029},  # found at T3
    }
    assert [(r.id, r.tier) for r in results][:2] == [("many", "T2"), ("some", "T3")]


def test_cli_json_lists_as_many(tmp_path: Path) -> None:
    """``mdcg search --json`` is the library's ``to_dict``: the same bound (before, 87 KB of
    results for k=5 and a query of 2,500 words)."""
    _hostile_store(tmp_path / "s")
    cli = [sys.executable, "-c", "from md_cg.cli import main; main()", "--root", str(tmp_path / "s")]
    out = subprocess.run(
        [*cli, "search", QUERY, "--json", "-k", "5"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    data = json.loads(out.stdout)
    ev = {r["id"]: r["evidence"] for r in data["results"]}
    assert ev["many"] == {"terms": WORDS[:128], "synonyms": [], "terms_more": 172}
    assert ev["some"] == {"terms": WORDS[:100], "synonyms": [], "fuzzy": 0.029}


def test_the_mcp_reply_shows_eight_and_stays_in_its_budget(tmp_path: Path) -> None:
    """The MCP search reply showed at most 8 matched terms a hit before too (TERMS_SHOWN):
    its size is the same, within its budget, whatever the bound of the library."""
    _hostile_store(tmp_path / "s")
    (reply,) = mcp_calls(tmp_path / "s", [("search", {"query": QUERY, "k": 5})])
    text = reply.content[0].text
    data = json.loads(text)
    matched = {r["id"]: r["matched"] for r in data["results"]}
    assert matched == {"many": WORDS[:8], "some": WORDS[:8]}
    assert len(text) <= BUDGETS["search"].chars(5)


def test_synonyms_are_bounded_alike(tmp_path: Path) -> None:
    """200 synonym groups a query names, a note holding the 200 synonyms and none of the
    query's words: its evidence lists the first 128 synonyms and counts the other 72."""
    others = ["".join(p) for p in itertools.product("bcdfghjklmnpqrstvwxz", repeat=3)][2000:2200]
    (tmp_path / "s" / ".mdcg").mkdir(parents=True)
    groups = [[w, o] for w, o in zip(WORDS[:200], others, strict=True)]
    (tmp_path / "s" / ".mdcg" / "synonyms.json").write_text(json.dumps({"groups": groups}))
    with MdCG(tmp_path / "s") as s:
        s.add(id="syn", body="Synonyms\n\n" + " ".join(others), verification_basis="data")
        s.add(id="other", body="An unrelated note about the weather.", verification_basis="data")
        results, _ = s.search(" ".join(WORDS[:200]), k=2, record=False)
    assert {r.id: r.evidence for r in results if not r.filler} == {
        "syn": {"terms": [], "synonyms": others[:128], "synonyms_more": 72}
    }


# -- the similarity units, once a search --------------------------------------------------

NOTES = [
    ("bs", "Binary search\n\nBinary search halves a sorted array each step.", "computing"),
    ("qs", "Quicksort\n\nQuicksort partitions around a pivot; average n log n.", "computing"),
    ("ll", "Linked list\n\nA linked list has no random access.", "computing"),
    ("ht", "Hash table\n\nA hash table maps keys to buckets; collisions chain.", "computing"),
    ("dp", "Dynamic programming\n\nDynamic programming stores the answers of subproblems.", "computing"),
    ("tea", "The user drinks green tea every afternoon.", "life"),
    ("lis", "The user lives in Lisbon near Alfama.", "life"),
    ("dent", "The user booked the dentist for Friday.", "life"),
    ("book", "Zoe recommended the book 'Range' to the user.", "life"),
    ("jp", "The user is learning Japanese on weekday evenings.", "life"),
    ("zbs", "二分查找\n\n二分查找每一步把有序数组分成两半。", "计算机科学"),
    ("zqs", "快速排序\n\n快速排序围绕枢轴划分，平均复杂度 n log n。", "计算机科学"),
    ("zll", "链表\n\n链表不支持随机访问。", "计算机科学"),
    ("zht", "哈希表\n\n哈希表把键映射到桶，冲突时用链表。", "计算机科学"),
    ("ztea", "用户每天下午喝绿茶。", "生活"),
    ("zlis", "用户住在里斯本。", "生活"),
    ("zjp", "用户在学日语，每周三次。", "生活"),
    ("zcat", "用户养了一只猫，叫咪咪。", "生活"),
    ("mix", "Redis 缓存\n\nRedis 缓存的过期时间是 300 秒 (TTL)。", "computing"),
    ("rate", "Rate limit\n\nThe API rate limit is 100 requests per minute.", "computing"),
    *[
        (f"f{i:02d}", f"Team note {i}: the weekly sync covered sprint item {i * 7}.", "work")
        for i in range(20)
    ],
    *[(f"z{i:02d}", f"周会纪要 {i}：讨论了第 {i * 3} 号任务的进度。", "工作") for i in range(20)],
]
SEARCHES = [
    ("binary search", None),
    ("binery serch", None),  # typos: T3
    ("binery serch", "computing"),  # routed: T1 then T3
    ("quicksrot pivot", None),
    ("hash tabel collisions", "computing"),
    ("when is my dentist appointment", None),  # synonyms
    ("what does the user drink in the afternoon", None),
    ("where does the user live", "life"),
    ("二分查找", "计算机科学"),
    ("快速排序的平均复杂度", None),
    ("用户喜欢喝什么茶", None),
    ("用户住在哪里", "生活"),
    ("Redis 缓存过期时间", None),
    ("rate limt per minit", None),
    ("xyzzy plugh", None),
    ("链表 random access", None),
    ("weekly sync sprint", "work"),
    ("周会 任务进度", None),
    ("zorblat", None),
    ("the user", None),
]
#: id:tier of each hit of SEARCHES (k=8), as the code before session 39 ranked them
EXPECTED = [
    "bs:T2 zbs:T2 mix:T2 ll:T2 dp:T2 ht:T2 qs:T2 rate:T2",
    "bs:T3 book:T3 dent:T3 dp:T3 f00:T3 f01:T3 f02:T3 f03:T3",
    "bs:T1 book:T3 dent:T3 dp:T3 f00:T3 f01:T3 f02:T3 f03:T3",
    "qs:T2 book:T3 bs:T3 dent:T3 dp:T3 f00:T3 f01:T3 f02:T3",
    "ht:T0 zht:T2 mix:T0 ll:T0 dp:T0 bs:T0 qs:T0 rate:T0",
    "dent:T2 book:T2 bs:T3 dp:T3 f00:T3 f01:T3 f02:T3 f03:T3",
    "tea:T2 book:T2 dent:T2 jp:T2 lis:T2 ztea:T2 zlis:T2 zcat:T2",
    "lis:T0 book:T0 tea:T0 dent:T0 jp:T0 zlis:T2 ztea:T2 zcat:T2",
    "zbs:T0 bs:T2 zqs:T0 book:T3 dent:T3 dp:T3 f00:T3 f01:T3",
    "zqs:T2 qs:T2 bs:T2 zbs:T2 z00:T2 z01:T2 z02:T2 z03:T2",
    "ztea:T2 zlis:T2 zcat:T2 zjp:T2 dent:T2 book:T2 jp:T2 lis:T2",
    "zlis:T0 zjp:T0 ztea:T0 zcat:T0 dent:T2 book:T2 jp:T2 lis:T2",
    "mix:T2 zht:T2 book:T3 bs:T3 dent:T3 dp:T3 f00:T3 f01:T3",
    "rate:T2 ll:T3 book:T3 bs:T3 dent:T3 dp:T3 f00:T3 f01:T3",
    "book:T3 bs:T3 dent:T3 dp:T3 f00:T3 f01:T3 f02:T3 f03:T3",
    "ll:T2 zll:T2 zht:T2 mix:T2 dp:T2 bs:T2 ht:T2 qs:T2",
    "f00:T0 f04:T0 f03:T0 f02:T0 f01:T0 f14:T0 f07:T0 f05:T0",
    "z00:T2 z01:T2 z02:T2 z03:T2 z04:T2 z05:T2 z06:T2 z07:T2",
    "book:T3 bs:T3 dent:T3 dp:T3 f00:T3 f01:T3 f02:T3 f03:T3",
    "dent:T2 book:T2 jp:T2 lis:T2 tea:T2 zlis:T2 ztea:T2 zcat:T2",
]


#: Every note's ``created_at``: its date words ("7 december 2026") are indexed with its text
#: (``md_cg.text.date_words``), and a note's number equal to the day of the month changes its
#: length norm -- created now, the ranks of EXPECTED held on the 7th and moved on the 8th
#: (``f08`` rose into the top 8). Pinned, the ranks no longer depend on the day the test runs.
CREATED = 1796644800.0  # 2026-12-07T12:00:00Z


def _notes_store(root: Path) -> MdCG:
    s = MdCG(root)
    s.add_many(
        [
            Node(id=i, body=b, tags=[f"domain:{d}"], verification_basis="data", created_at=CREATED)
            for i, b, d in NOTES
        ]
    )
    return s


def test_every_query_ranks_as_before(tmp_path: Path) -> None:
    with _notes_store(tmp_path / "s") as s:
        got = [
            " ".join(f"{r.id}:{r.tier}" for r in s.search(q, k=8, context=ctx, record=False)[0])
            for q, ctx in SEARCHES
        ]
    assert got == EXPECTED


def _count_units(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = SimilarityKeys.units

    def units(self: SimilarityKeys, qterms: Any, *args: Any, **kw: Any) -> Any:
        qterms = list(qterms)
        calls.append(" ".join(qterms))
        return real(self, qterms, *args, **kw)

    monkeypatch.setattr(SimilarityKeys, "units", units)
    return calls


def test_a_search_works_out_its_similarity_units_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: three times for a search that reaches T3 (T3, the ideal of its evidence,
    its typos), four when routed (T1 too)."""
    with _notes_store(tmp_path / "s") as s:
        calls = _count_units(monkeypatch)
        s.search("binery serch", k=8, record=False)
        assert calls == ["bineri serch"]
        s.search("binery serch", k=8, context="computing", record=False)
        assert calls == ["bineri serch"]  # the same query again: the same units
        s.search("quicksrot pivot", k=8, record=False)
        assert calls == ["bineri serch", "quicksrot pivot"]


def test_units_follow_the_vocabulary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query's units are worked out again once the vocabulary grows (a new memory's
    words) or is renumbered (a compaction drops the terms no memory holds)."""
    with _notes_store(tmp_path / "s") as s:
        calls = _count_units(monkeypatch)
        first = [r.id for r in s.search("zorblatt", k=3, record=False)[0]]
        assert first == ["book", "bs", "dent"]  # filler: nothing like it
        s.add(id="zorb", body="The zorblat gauge reads 12.", verification_basis="data")
        hits = s.search("zorblatt", k=3, record=False)[0]
        assert [(r.id, r.tier, r.filler) for r in hits][:1] == [("zorb", "T3", False)]
        assert calls == ["zorblatt", "zorblatt"]
        s.forget("zorb", "a test")
        text = s._engine.state.text
        text.compact()  # the vocabulary renumbered: zorblat is gone
        assert "zorblat" not in text._vocab
        assert [r.id for r in s.search("zorblatt", k=3, record=False)[0]] == first
        assert calls == ["zorblatt"] * 3
