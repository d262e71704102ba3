"""Evidence of a search hit (review session 26): a question the store cannot answer, and
a synonym the index holds only as a stem."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG, Node
from md_cg.mcp_server import search_reply
from md_cg.search import expand
from md_cg.synonyms import SynonymTable

FACTS = [
    "The user drinks green tea every afternoon.",
    "The user lives in Lisbon near Alfama.",
    "The user works as a data engineer.",
    "The user's sister is called Ana.",
    "The user runs 5 km on Sundays.",
    "The user prefers dark mode in every app.",
    "The user is learning Japanese.",
    "The user's car is a blue Skoda.",
    "The user supports Benfica.",
    "The user dislikes cilantro.",
]
ZH = [
    "用户喜欢喝绿茶。",
    "用户住在里斯本。",
    "用户是数据工程师。",
    "用户的姐姐叫安娜。",
    "用户周日跑五公里。",
    "用户在学日语。",
    "用户的车是蓝色斯柯达。",
    "用户支持本菲卡。",
    "用户不喜欢香菜。",
    "用户每天六点起床。",
]


def _user_store(root: Path) -> MdCG:
    """'user' in 10 and 用户 in 10 of 40 memories: both common (20% and 10)."""
    s = MdCG(root)
    others = [f"Meeting {i}: the Atlas team reviewed ticket {100 + i}." for i in range(19)]
    bodies = [*FACTS, *ZH, *others, "Shoe shop on Rua Garrett closes at 19:00."]
    s.add_many([Node(id=f"m{i:02d}", body=b, verification_basis="data") for i, b in enumerate(bodies)])
    return s


def _states(s: MdCG, query: str) -> dict[str, tuple[str | None, bool, bool]]:
    results, _ = s.search(query, k=12, record=False)
    return {r.id: (r.state, r.filler, bool(r.evidence.get("common_only"))) for r in results if not r.filler}


def test_an_unanswerable_question_defers_hits_of_only_common_words(tmp_path: Path) -> None:
    """Review session 26: 'blood type' is in no memory, and the rule that defers hits
    sharing only 'user' switched off: "The user is learning Japanese" was ACCEPT for
    "what is the user's blood type" and inject served it. A query word no memory holds
    now counts as one such a hit lacks; ranks do not change."""
    with _user_store(tmp_path / "m") as s:
        for query in ("what is the user's blood type", "what is the user's favourite movie"):
            plain, _ = s.search(query, k=12, record=False, judge=False)
            results, _ = s.search(query, k=12, record=False)
            assert [r.id for r in results] == [r.id for r in plain]
            shown = [r for r in results if not r.filler]
            assert {r.id for r in shown} == {f"m{i:02d}" for i in range(10)}
            for r in shown:
                assert (r.state, r.evidence) == (
                    "DEFER",
                    {"terms": ["user"], "synonyms": [], "common_only": True},
                )
                assert r.basis.startswith("DEFER: only words most memories share match ('user'); ACCEPT:")
            assert s.inject(query) == []
        # Chinese: 血型 is in no memory; 户的 (of 用户的) says no more than 户
        zh = _states(s, "用户的血型是什么")
        assert {i for i, (_, _, common) in zh.items() if not common} == set()
        assert {"m13", "m16", "m12"} <= set(zh) and {st for st, _, _ in zh.values()} == {"DEFER"}
        assert s.inject("用户的血型是什么") == []
        # an answer in the store is still ACCEPT, the others still DEFER
        assert _states(s, "用户的姐姐叫什么")["m13"] == ("ACCEPT", False, False)
        assert _states(s, "where does the user live in Lisbon")["m01"] == ("ACCEPT", False, False)


def test_a_typo_of_a_word_the_hit_holds_is_not_a_word_it_lacks(tmp_path: Path) -> None:
    """'Lisbn' is in no memory, but the Lisbon note holds a word within a typo of it:
    it stays ACCEPT while the notes sharing only 'user' defer."""
    with _user_store(tmp_path / "m") as s:
        states = _states(s, "is the user in Lisbn")
        assert states.pop("m01") == ("ACCEPT", False, False)
        assert set(states) == {f"m{i:02d}" for i in range(10)} - {"m01"}
        assert set(states.values()) == {("DEFER", False, True)}


def _booking_store(root: Path) -> MdCG:
    s = MdCG(root)
    s.add(id="book-rec", body="Zoe recommended the book 'Range' to the user.", verification_basis="data")
    s.add(
        id="keiko-book", body="Keiko recommended the book 'Deep Work' to the user.", verification_basis="data"
    )
    s.add(id="lee", body="Dr. Lee the dentist recommended the book 'Teeth'.", verification_basis="data")
    s.add(id="slot", body="Clinic\n\nBookings: the clinic confirmed Friday 10:00.", verification_basis="data")
    for i in range(30):
        s.add(id=f"fill-{i}", body=f"Team note {i}: the weekly sync covered sprint item {i * 7}.")
    return s


def test_a_stemmed_synonym_is_evidence_only_where_the_memory_holds_its_word(tmp_path: Path) -> None:
    """Review session 26: "appointment" expands to "booking", which the index holds as the
    stem "book": "Zoe recommended the book 'Range'" was ACCEPT for "when is my dentist
    appointment" with MCP ``matched: ["booking"]``, and inject served it. A stem counts as
    a synonym only where the memory's text has the synonym's word (or its plural)."""
    with _booking_store(tmp_path / "m") as s:
        for query in ("when is my dentist appointment", "预约牙医的时间"):
            results, meta = s.search(query, k=5, record=False)
            by_id = {r.id: r for r in results}
            for noun in ("book-rec", "keiko-book"):
                assert (by_id[noun].filler, by_id[noun].state) == (True, "DEFER"), query
                assert by_id[noun].evidence["synonyms"] == [], query
            assert (by_id["slot"].state, by_id["slot"].evidence["synonyms"]) == ("ACCEPT", ["book"])
            reply = search_reply(s, results, meta)
            matched = {item["id"]: item.get("matched") for item in reply["results"]}
            assert matched["slot"] == ["booking"]
            assert "book-rec" not in matched and "keiko-book" not in matched
            assert {i.id for i in s.inject(query)} <= {"slot", "lee"}
        lee = {r.id: r for r in s.search("when is my dentist appointment", k=5, record=False)[0]}["lee"]
        assert (lee.state, lee.evidence) == ("ACCEPT", {"terms": ["dentist"], "synonyms": []})
    expansion = expand("when is my dentist appointment", SynonymTable.default())
    assert expansion.stemmed == {"book": frozenset({"booking"}), "reserv": frozenset({"reservation"})}


def test_a_stemmed_synonym_of_a_chinese_query_still_finds_english_notes(tmp_path: Path) -> None:
    """二分查找 expands to "binary search" (stem binari): a note saying "binary search"
    has the word, so it keeps the synonym as evidence, also written against Chinese text
    (用binary). Its title does not say it: the node read for that is kept in the result."""
    with MdCG(tmp_path / "m") as s:
        body = "Search algorithms\n\nBinary search halves the interval at every step."
        s.add(id="bs", body=body, verification_basis="test")
        s.add(id="zh", body="Search notes\n\n有序数组用binary search最快", verification_basis="test")
        s.add(id="ls", body="Linear search scans every element.", verification_basis="test")
        results, _ = s.search("二分查找", k=3, record=False)
        assert sorted((r.id, r.state, r.evidence["synonyms"]) for r in results) == [
            ("bs", "ACCEPT", ["binari", "search"]),
            ("ls", "DEFER", []),
            ("zh", "ACCEPT", ["binari", "search"]),
        ]
        assert {r.id: r._node.id for r in results if r._node is not None} == {"bs": "bs", "zh": "zh"}


def test_a_file_that_cannot_be_read_proves_no_stemmed_synonym(tmp_path: Path) -> None:
    """The proof reads the hit's file; one that cannot be read (gone, unparsable) proves
    nothing and the search goes on: the hit keeps its rank, with no synonym evidence."""
    from md_cg import search as search_mod
    from md_cg.errors import NodeNotFoundError

    def gone(node_id: str) -> Node:
        raise NodeNotFoundError(node_id)

    with _booking_store(tmp_path / "m") as s:
        state = s._engine.state
        results, _ = search_mod.run(state, s.synonyms, "when is my dentist appointment", k=5, loader=gone)
        by_id = {r.id: r for r in results}
        assert (by_id["slot"].filler, by_id["slot"].evidence["synonyms"]) == (True, [])
        assert (by_id["lee"].state, by_id["lee"].evidence["terms"]) == ("ACCEPT", ["dentist"])
