"""Thin evidence (review session 28): a hit whose only link to the query is a typo of
a word its tags hold, or one that holds at most one of a longer query's content words,
is DEFER, not ACCEPT; it keeps its rank. Real answers stay ACCEPT."""

from __future__ import annotations

from pathlib import Path

from md_cg import MdCG, Node

ACCEPT_DATA = 'ACCEPT: fact with no applicability conditions, verification basis "data"'
ITSELF = 'the memory itself: fact with no applicability conditions, verification basis "data"'


def _alice(root: Path) -> MdCG:
    s = MdCG(root)
    s.add_many(
        [
            Node(id="pref", body="# Coffee order\n\nThe user drinks espresso with oat milk.",
                 tags=["user:Alice"], verification_basis="data", retention_tier="long"),
            Node(id="berlin", body="# Docker notes\n\nThe user pinned docker to 24.0 on the build box.",
                 verification_basis="data", retention_tier="long"),
        ]
    )  # fmt: skip
    return s


def _states(s: MdCG, query: str, k: int = 5) -> list[tuple[str, str, str | None, str | None]]:
    results, _ = s.search(query, k=k, record=False)
    return [(r.id, r.tier, r.state, r.basis) for r in results if not r.filler]


def test_a_typo_of_a_tag_word_is_no_accept(tmp_path: Path) -> None:
    """D1: "alive" (no memory holds it) is within a typo of "alice", which only the tag
    user:Alice gives: the hit was T3 ACCEPT (fuzzy 0.58) with nothing matched."""
    with _alice(tmp_path / "s") as s:
        assert _states(s, "is my server alive") == [
            (
                "pref",
                "T3",
                "DEFER",
                f"DEFER: only a typo of a word of its tags matches ('alic', 'user'); {ITSELF}",
            )
        ]
        for query in ("malice", "Alicia"):
            assert _states(s, query) == [
                (
                    "pref",
                    "T3",
                    "DEFER",
                    f"DEFER: only a typo of a word of its tags matches ('alic'); {ITSELF}",
                )
            ], query
        results, _ = s.search("is my server alive", k=5, record=False)
        assert results[0].evidence == {
            "terms": [],
            "synonyms": [],
            "fuzzy": 0.589,
            "tag_typo": ["alic", "user"],
        }


def test_one_word_of_a_longer_query_is_no_accept(tmp_path: Path) -> None:
    """D2: "user password for the bank" got ACCEPT hits matched only on "user"."""
    with _alice(tmp_path / "s") as s:
        thin = f"DEFER: holds 1 of 3 query words ('user'); {ITSELF}"
        for query in ("user password for the bank", "what is the user's favourite colour"):
            assert _states(s, query) == [("pref", "T2", "DEFER", thin), ("berlin", "T2", "DEFER", thin)], (
                query
            )
        assert _states(s, "what time zone does the user live in") == [
            ("pref", "T2", "DEFER", f"DEFER: holds 1 of 4 query words ('user'); {ITSELF}"),
            ("berlin", "T2", "DEFER", f"DEFER: holds 1 of 4 query words ('user'); {ITSELF}"),
        ]
        results, _ = s.search("user password for the bank", k=5, record=False)
        thin_of = {"holds": 1, "of": 3, "words": ["user"], "share": 0.116}
        assert results[0].evidence == {"terms": ["user"], "synonyms": [], "thin": thin_of}


def test_one_word_of_a_longer_english_and_chinese_query(tmp_path: Path) -> None:
    """D2: "memory leak in the kernel driver" on "memory" only (a word most of the store
    holds), 北京的天气怎么样 on 北京 only."""
    with MdCG(tmp_path / "s") as s:
        s.add_many(
            [
                *(Node(id=f"mem{i}", body=f"Project memory note {i} lives in Markdown files.",
                       verification_basis="data") for i in range(3)),
                *(Node(id=f"bj{i}", body=b, verification_basis="data")
                  for i, b in enumerate(["用户去年在北京出差。", "用户在北京工作。", "北京有很多公园。"])),
            ]
        )  # fmt: skip
        thin = f"DEFER: holds 1 of 4 query words ('memori'); {ITSELF}"
        assert _states(s, "memory leak in the kernel driver") == [
            ("mem0", "T2", "DEFER", thin), ("mem1", "T2", "DEFER", thin), ("mem2", "T2", "DEFER", thin)
        ]  # fmt: skip
        assert {x[1:] for x in _states(s, "北京的天气怎么样")} == {
            ("T2", "DEFER", f"DEFER: holds 1 of 2 query words ('北京'); {ITSELF}")
        }
        s.add(Node(id="weather", body="北京的天气今天很冷。", verification_basis="data"))
        assert _states(s, "北京的天气怎么样")[0] == ("weather", "T2", "ACCEPT", ACCEPT_DATA)


def test_real_answers_stay_accept(tmp_path: Path) -> None:
    """A hit holding two of the query's words, a one-word query, a typo of a word of the
    body, and filler words of a request (please, tell, 请问, 谢谢) not counted."""
    with _alice(tmp_path / "s") as s:
        s.add(Node(id="zh", body="用户喜欢喝乌龙茶。", verification_basis="data"))
        for query in ("what does the user drink", "espresso", "please tell me what the user drinks",
                      "oat milk, thanks"):  # fmt: skip
            assert _states(s, query)[0] == ("pref", "T2", "ACCEPT", ACCEPT_DATA), query
        assert _states(s, "espreso")[0] == ("pref", "T3", "ACCEPT", ACCEPT_DATA)
        assert _states(s, "docker pinned")[0] == ("berlin", "T2", "ACCEPT", ACCEPT_DATA)
        for query in ("请问用户喜欢喝什么", "乌龙茶，谢谢"):
            assert _states(s, query)[0] == ("zh", "T2", "ACCEPT", ACCEPT_DATA), query


def test_the_rank_is_kept(tmp_path: Path) -> None:
    """The state is not part of ranking: the same ids, scores and tiers as judge=False."""
    with _alice(tmp_path / "s") as s:
        for query in ("is my server alive", "user password for the bank", "what does the user drink"):
            judged, _ = s.search(query, k=5, record=False)
            plain, _ = s.search(query, k=5, record=False, judge=False)
            assert [(r.id, r.score, r.tier) for r in judged] == [(r.id, r.score, r.tier) for r in plain]


def test_inject_leaves_thin_and_tag_typo_hits_out(tmp_path: Path) -> None:
    """A prompt gets no memory whose only link is one common word of a longer query, or a
    typo of a tag word (they were injected: inject left out filler and common_only only)."""
    with _alice(tmp_path / "s") as s:
        assert [i.id for i in s.inject("what time zone does the user live in")] == []
        assert [i.id for i in s.inject("is my server alive")] == []
        assert [i.id for i in s.inject("what does the user drink")] == ["pref"]
        assert [i.id for i in s.inject("docker build box")] == ["berlin"]
