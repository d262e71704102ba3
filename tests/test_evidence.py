"""Evidence of a search hit (review session 26): words no memory holds, the common-words
rule's CJK particle pairs, and a synonym the index holds only as a stem."""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node
from md_cg.mcp_server import search_reply
from md_cg.search import _title_forms, expand
from md_cg.synonyms import SynonymTable

LIKES = ["jazz", "science fiction", "anime", "spicy food", "hiking", "cats", "oolong tea", "chess",
         "photography", "cycling", "the guitar", "baking"]  # fmt: skip
OTHERS = ["wakes at seven", "works as a nurse", "has two sisters", "prefers window seats", "runs 5k",
          "speaks Portuguese", "lives in Hangzhou", "owns a dog named Rex", "drives a Honda",
          "studies Japanese", "is allergic to peanuts", "visited Kyoto", "collects vinyl", "keeps a diary",
          "hates cilantro", "has two goldfish", "uses Linear", "commutes by subway", "swims twice weekly",
          "takes coffee black", "graduated from MIT", "was born in March", "sleeps eight hours",
          "bought a Pixel phone", "moved house in May", "plays the piano", "volunteers on Saturdays",
          "writes in Markdown"]  # fmt: skip
ZH_LIKES = ["爵士乐", "读科幻小说", "看动漫", "吃辣", "爬山", "猫", "喝乌龙茶", "下围棋", "拍照", "骑自行车",
            "弹吉他", "做面包"]  # fmt: skip
ZH_OTHERS = ["每天早上七点起床", "是一名护士", "有两个姐姐", "坐飞机靠窗", "周末跑五公里", "会说葡萄牙语",
             "住在杭州", "养了一条狗", "开一辆本田", "在学日语", "对花生过敏", "去年去了京都", "收藏黑胶唱片",
             "写日记", "不吃香菜", "养了两条金鱼", "用Linear管理任务", "上班坐地铁", "每周游泳两次",
             "喝咖啡不加糖", "毕业于浙江大学", "三月出生", "每晚睡八个钟头", "买了新手机", "五月搬了家",
             "会弹钢琴", "周六做志愿者", "用Markdown写作"]  # fmt: skip


def test_a_word_no_memory_holds_does_not_defer_the_answers(tmp_path: Path) -> None:
    """Review session 26 (rev4): counting a query word no memory holds as one a hit lacks
    made filler words ("please", 请问, 平时) defer every answer sharing only common words:
    with "likes" in 12 of 40 memories, "please, what does the user like" got no ACCEPT and
    inject returned nothing. Such a word changes nothing again -- but for thin evidence
    (session 39): "what does the user usually like nowadays" has two words no memory holds
    besides "user" and "like", held by many; a hit holding only those two covers half of
    the query's words, weighing little (search._thin), as "Taylor Swift tour dates" is
    covered by a note on Taylor & Francis over a store without Swift."""
    en = [f"The user likes {x}." for x in LIKES] + [f"The user {x}." for x in OTHERS]
    zh = [f"用户喜欢{x}。" for x in ZH_LIKES] + [f"用户{x}。" for x in ZH_OTHERS]
    for name, bodies, queries in (
        ("en", en, ["please, what does the user like", "what does the user like, thanks"]),
        ("zh", zh, ["请问用户喜欢什么", "用户平时喜欢什么", "用户最喜欢什么", "用户喜欢什么？谢谢"]),
    ):
        likes = {f"{name}{i:02d}" for i in range(12)}
        with MdCG(tmp_path / name) as s:
            s.add_many(
                [Node(id=f"{name}{i:02d}", body=b, verification_basis="data") for i, b in enumerate(bodies)]
            )
            for query in queries:
                results, _ = s.search(query, k=12, record=False)
                assert {(r.id, r.state, r.filler) for r in results} == {
                    (i, "ACCEPT", False) for i in likes
                }, query
                assert not any(r.evidence.get("common_only") for r in results), query
                injected = {i.id for i in s.inject(query)}
                assert injected and injected <= likes, query
            if name == "en":
                query = "what does the user usually like nowadays, thanks"
                results, _ = s.search(query, k=12, record=False)
                thin = "DEFER: holds 2 of 4 query words ('user', 'like'); the memory itself"
                assert {(r.id, r.state, r.basis.startswith(thin)) for r in results} == {
                    (i, "DEFER", True) for i in likes
                }
                assert s.inject(query) == []


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


def test_a_cjk_particle_pair_is_as_common_as_its_other_character(tmp_path: Path) -> None:
    """户的 (of 用户的) says no more than 户: "用户的车是蓝色斯柯达" shares only 用户 and 户的
    with "用户的姐姐叫什么", so it defers like the other notes on the user, while the
    answer (which holds 姐姐, a word some memory holds) is ACCEPT."""
    with MdCG(tmp_path / "m") as s:
        others = [f"Meeting {i}: the Atlas team reviewed ticket {100 + i}." for i in range(19)]
        bodies = [*FACTS, *ZH, *others, "Shoe shop on Rua Garrett closes at 19:00."]
        s.add_many([Node(id=f"m{i:02d}", body=b, verification_basis="data") for i, b in enumerate(bodies)])
        results, _ = s.search("用户的姐姐叫什么", k=12, record=False)
        states = {r.id: (r.state, bool(r.evidence.get("common_only"))) for r in results if not r.filler}
        assert states.pop("m13") == ("ACCEPT", False)
        assert states["m16"] == ("DEFER", True)
        assert set(states.values()) == {("DEFER", True)}
        assert {i.id for i in s.inject("用户的姐姐叫什么")} == {"m13"}


def _booking_store(root: Path) -> MdCG:
    s = MdCG(root)
    s.add(id="book-rec", body="Zoe recommended the book 'Range' to the user.", verification_basis="data")
    s.add(
        id="keiko-book", body="Keiko recommended the book 'Deep Work' to the user.", verification_basis="data"
    )
    s.add(id="lee", body="Dr. Lee the dentist recommended the book 'Teeth'.", verification_basis="data")
    s.add(id="booked", body="The user booked the dentist for Friday.", verification_basis="data")
    s.add(id="reserved", body="The user reserved a table at Nopa.", verification_basis="data")
    s.add(id="slot", body="Clinic\n\nBookings: the clinic confirmed Friday 10:00.", verification_basis="data")
    s.add(id="club", body="Book club\n\nThe booking for the hall is confirmed.", verification_basis="data")
    for i in range(30):
        s.add(id=f"fill-{i}", body=f"Team note {i}: the weekly sync covered sprint item {i * 7}.")
    return s


def _no_file_read(s: MdCG, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Make the store's file reader refuse while the returned flag is set (search binds it
    as its results' loader: clear the flag before reading a result's node)."""
    real, refusing = s._engine.get, [True]

    def get(node_id: str) -> Node:
        if refusing[0]:
            raise AssertionError(f"search read the file of {node_id!r}")
        return real(node_id)

    monkeypatch.setattr(s._engine, "get", get)
    return refusing


def test_a_stemmed_synonym_is_evidence_where_the_title_shows_a_word_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review session 26: "appointment" expands to "booking" and "reservation", which the
    index holds as the stems "book" and "reserv": "Zoe recommended the book 'Range'" was
    ACCEPT for "when is my dentist appointment". A stem whose title shows it only bare
    ("book") is no evidence; one whose title shows another word of it ("booked",
    "reserved") is, and MCP ``matched`` names that word; one the title does not show
    ("Clinic", then "Bookings: ...") counts as before. Search reads no file for it."""
    queries = ("when is my dentist appointment", "预约牙医的时间")
    with _booking_store(tmp_path / "m") as s:
        refusing = _no_file_read(s, monkeypatch)
        searched = {query: s.search(query, k=8, record=False) for query in queries}
        refusing[0] = False  # an MCP reply reads the files for its snippets
        for query, (results, meta) in searched.items():
            assert all(r._node is None for r in results)  # nothing read ahead
            by_id = {r.id: r for r in results}
            for bare in ("book-rec", "keiko-book", "club"):
                assert (by_id[bare].filler, by_id[bare].state, by_id[bare].evidence["synonyms"]) == (
                    True,
                    "DEFER",
                    [],
                ), (query, bare)
            stems = {"booked": "book", "reserved": "reserv", "slot": "book"}
            evidence = {
                i: (by_id[i].state, stem in by_id[i].evidence["synonyms"]) for i, stem in stems.items()
            }
            # session 39: a hit covering, by a synonym, only "appointment" (预约) of the query's
            # words is thin evidence (DEFER: "reserved a table at Nopa"), the stem evidence all the same
            assert evidence == {
                "booked": ("ACCEPT", True),
                "reserved": ("DEFER", True),
                "slot": ("DEFER", True),
            }
            assert by_id["slot"].evidence["thin"]["holds"] == 1, query
            assert by_id["reserved"].evidence["words"] == {"reserv": "reserved"}
            assert "words" not in by_id["slot"].evidence  # the title does not show it
            matched = {item["id"]: item.get("matched") for item in search_reply(s, results, meta)["results"]}
            assert "booked" in matched["booked"] and "booking" not in matched["booked"], query
            assert (matched["reserved"], matched["slot"]) == (["reserved"], ["booking"]), query
            assert {"book-rec", "keiko-book", "club"}.isdisjoint(matched)
            injected = {i.id for i in s.inject(query, max_items=10)}
            assert (
                "booked" in injected and not {"book-rec", "keiko-book", "club", "reserved", "slot"} & injected
            )
        by_id = {r.id: r for r in searched[queries[0]][0]}
        # a dentist's book tip holds one of the two words, "dentist", weighing under
        # search.THIN_SHARE_ONE of the query's: thin (session 39), DEFER
        thin = {"holds": 1, "of": 2, "words": ["dentist"], "share": 0.457}
        assert (by_id["lee"].state, by_id["lee"].evidence) == (
            "DEFER",
            {"terms": ["dentist"], "synonyms": [], "thin": thin},
        )
        assert by_id["booked"].evidence == {
            "terms": ["dentist"],
            "synonyms": ["book"],
            "words": {"book": "booked"},
        }
    expansion = expand("when is my dentist appointment", SynonymTable.default())
    assert expansion.stemmed == {"book": frozenset({"booking"}), "reserv": frozenset({"reservation"})}


def test_the_title_forms_of_a_stem() -> None:
    """What a title shows of a stemmed synonym: a word other than the stem or its plural,
    None for the bare stem, nothing when no word of it (a title clipped through a word drops it)."""
    stems = ["book", "reserv"]
    assert _title_forms("Zoe recommended the books", stems) == {"book": None}
    assert _title_forms("Book club: bookings open, reservations too", stems) == {
        "book": "bookings",
        "reserv": "reservations",
    }
    assert _title_forms("Clinic", stems) == {}
    # index.title_of cuts a first line longer than 120 characters to 119 and "…"
    cut = ("x " * 57 + "bookings and more")[:119] + "…"  # "…x booki…": a cut word, dropped
    assert len(cut) == 120 and _title_forms(cut, stems) == {}
    assert _title_forms(("x " * 56 + "booked the more")[:119] + "…", stems) == {"book": "booked"}
    # review r7: a whole last word before the cut is kept ("book" alone: not the synonym)
    whole = ("x " * 57 + "book and more")[:119] + "…"
    assert whole.endswith("book …") and _title_forms(whole, stems) == {"book": None}
    assert _title_forms("Ask about the book…", stems) == {"book": None}  # the writer's own "…"
    # a link's target and a URL are not words of the title
    linked = "[Range](https://shop.example/booked-titles) is the book the lead liked"
    assert _title_forms(linked, stems) == {"book": None}
    assert _title_forms("see www.booked.example and http://x.example/booking", stems) == {}


def test_a_stemmed_synonym_of_a_chinese_query_still_finds_english_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """二分查找 expands to "binary search" (stem binari): notes whose title does not show
    it keep the synonym as evidence, also written against Chinese text (用binary), and
    no file is read for it."""
    with MdCG(tmp_path / "m") as s:
        body = "Search algorithms\n\nBinary search halves the interval at every step."
        s.add(id="bs", body=body, verification_basis="test")
        s.add(id="zh", body="Search notes\n\n有序数组用binary search最快", verification_basis="test")
        s.add(id="ls", body="Linear search scans every element.", verification_basis="test")
        s.add(id="tt", body="有序数组用binary search最快", verification_basis="test")
        _no_file_read(s, monkeypatch)
        results, _ = s.search("二分查找", k=4, record=False)
        assert sorted((r.id, r.state, r.evidence["synonyms"]) for r in results) == [
            ("bs", "ACCEPT", ["binari", "search"]),
            ("ls", "DEFER", []),
            ("tt", "ACCEPT", ["binari", "search"]),
            ("zh", "ACCEPT", ["binari", "search"]),
        ]
        assert {r.id: r.evidence.get("words") for r in results}["tt"] == {"binari": "binary"}
