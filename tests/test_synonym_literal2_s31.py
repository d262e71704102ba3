"""The synonym cap of review r3 (``search.ranked_terms``), as review r5 (session 31) found it.

1. A one-character query word (猫, 书, 药) had as its own term that character, whose
   idf is low when memories hold it inside other words (熊猫 panda, 秘书 secretary,
   农药 pesticide): its synonyms were capped to almost nothing. 猫 over 30 memories of
   熊猫 and "My cat Tom likes fish.": the answer fell out of the top 10 and the pandas
   were ACCEPT and injected (before r3: the answer first, ACCEPT, inject ["ans"]).
2. The cap counted memories the caller cannot see: 30 memories saying 笔记 in another
   agent's scope (or archived) capped 记录, so "毛笔" (holding only 笔) ranked first and
   ACCEPT over "量子纠缠实验记录" and inject gave ["c2", "rec"] (before r3: ["rec"]).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from md_cg import MdCG, Node, Scope

PANDAS = [f"p{i}" for i in range(30)]


def _node(node_id: str, body: str, **kw: object) -> Node:
    return Node(id=node_id, body=body, verification_basis="data", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "filler", "answer"),
    [
        ("猫", "成都动物园的熊猫{i}号今天吃了很多竹子。", "My cat Tom likes fish."),
        ("猫", "成都动物园的熊猫{i}号今天吃了很多竹子。", "我养的小猫咪叫汤姆，最喜欢吃鱼。"),
        ("书", "秘书{i}号负责安排会议。", "借的图书下周二要还给图书馆。"),
        ("药", "农药{i}号喷洒在果园里。", "每天早上吃一片降压药物。"),
    ],
)
def test_a_one_character_word_held_inside_other_words_caps_no_synonym(
    tmp_path: Path, query: str, filler: str, answer: str
) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add_many([_node(f"p{i}", filler.format(i=i)) for i in range(30)] + [_node("ans", answer)])
        results, meta = store.search(query, record=False)
        # r3: "My cat Tom likes fish." not in the top 10; the others first but the pandas ACCEPT
        assert results[0].id == "ans"
        assert (results[0].state, results[0].filler) == ("ACCEPT", False)
        assert len(results) == 10
        assert {r.id for r in results[1:]} <= set(PANDAS)
        assert {(r.state, r.filler) for r in results[1:]} == {("DEFER", True)}
        assert all("weak" in r.evidence for r in results[1:])  # measured against the answer
        assert meta["filler"] == 9
        assert [i.id for i in store.inject(query, 3)] == ["ans"]  # r3: ["ans", "p0", "p1"] or pandas only


def test_a_one_character_word_sets_no_cap() -> None:
    from md_cg.search import expand
    from md_cg.synonyms import SynonymTable

    assert expand("猫", SynonymTable.default()).stands_for == []
    # a longer word still caps its synonyms
    word = expand("笔记", SynonymTable.default())
    assert word.stands_for == [(("笔记",), ("记录",)), (("笔记",), ("note",))]


MINE = [
    _node("rec", "量子纠缠实验记录：今天测量了贝尔不等式的违背程度，结果和理论预测一致，下周继续"),
    _node("c2", "毛笔"),
    _node("m1", "今天午饭吃了面条。"),
]


def _check_only_the_record(store: MdCG) -> None:
    results, _ = store.search("笔记", record=False)
    assert [r.id for r in results] == ["rec", "c2", "m1"]  # r3: c2 first
    assert [(r.state, r.filler) for r in results] == [("ACCEPT", False), ("DEFER", True), ("DEFER", True)]
    assert results[0].evidence == {"terms": ["记"], "synonyms": ["记录"]}
    # 笔 alone is no evidence of 笔记 (session 32: a loose character, search.loose_chars)
    assert results[1].evidence == {"terms": ["笔"], "synonyms": []}
    assert [i.id for i in store.inject("笔记", 3)] == ["rec"]  # r3: ["c2", "rec"]


def test_memories_of_another_scope_saying_the_word_cap_nothing(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        notes = [_node(f"z{i}", f"小红的笔记{i}：周末去爬山。", agent_scope="other") for i in range(30)]
        store.add_many(notes)
    with MdCG(tmp_path / "s", scope=Scope(agent="me")) as store:
        store.add_many(MINE)
        _check_only_the_record(store)


def test_archived_memories_saying_the_word_cap_nothing(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add_many([_node(f"z{i}", f"小红的笔记{i}：周末去爬山。") for i in range(30)] + MINE)
        store.archive([f"z{i}" for i in range(30)])
        _check_only_the_record(store)


def test_ranked_terms_counts_only_what_the_caller_sees(tmp_path: Path) -> None:
    """Hidden holders, and holders outside a filter (``only``), leave the synonyms whole;
    one visible holder among hidden ones caps them (read from the holders when there
    are no more of them than hidden memories, from the count when there are)."""
    from md_cg.search import expand, ranked_terms
    from md_cg.synonyms import SynonymTable

    with MdCG(tmp_path / "s") as store:
        store.add_many([_node(f"z{i}", f"小红的笔记{i}：周末去爬山。") for i in range(30)] + MINE)
        store._engine.state.flush_text()
        text = store._engine.state.text
        expansion = expand("笔记", SynonymTable.default())
        zs = frozenset(f"z{i}" for i in range(30))
        whole = dict(ranked_terms(text, expansion, zs))
        assert whole["记录"] == whole["note"] == 0.6
        assert dict(ranked_terms(text, expansion, only=frozenset({"rec", "c2", "m1"})))["记录"] == 0.6
        capped = dict(ranked_terms(text, expansion))["记录"]
        assert capped < 0.1
        assert dict(ranked_terms(text, expansion, zs - {"z7"}))["记录"] == capped  # 29 hidden of 30
        assert dict(ranked_terms(text, expansion, frozenset({"z1"})))["记录"] == capped  # 1 hidden of 30
        assert dict(ranked_terms(text, expansion, only=frozenset({"rec", "z3"})))["记录"] == capped


def test_memories_outside_a_tag_filter_saying_the_word_cap_nothing(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as store:
        mine = [_node(n.id, n.body, tags=["lab"]) for n in MINE]
        store.add_many([_node(f"z{i}", f"小红的笔记{i}：周末去爬山。") for i in range(30)] + mine)
        results, _ = store.search("笔记", record=False, tag="lab")
        # r3: c2 first, both ACCEPT
        assert [(r.id, r.state, r.filler) for r in results] == [
            ("rec", "ACCEPT", False),
            ("c2", "DEFER", True),
            ("m1", "DEFER", True),
        ]
        assert results[1].evidence == {"terms": ["笔"], "synonyms": []}  # loose (session 32)
