"""Tests of md_cg.synonyms: default table, per-store files, expansion."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from md_cg.errors import MdcgError
from md_cg.synonyms import (
    CROSS_SCRIPT_WEIGHT,
    ORIGINAL_WEIGHT,
    SYNONYM_WEIGHT,
    SynonymFileError,
    SynonymTable,
    load_groups,
    normalize,
    store_synonym_path,
)

DEFAULT_FILE = Path(__file__).resolve().parent.parent / "md_cg" / "data" / "synonyms.json"


@pytest.fixture(scope="module")
def table() -> SynonymTable:
    return SynonymTable.default()


def words(expansion: list[tuple[str, float]]) -> list[str]:
    return [w for w, _ in expansion]


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


# -- the default table -------------------------------------------------------


def test_weights() -> None:
    assert ORIGINAL_WEIGHT == 1.0
    assert SYNONYM_WEIGHT == 0.6


def test_default_table_has_a_few_hundred_groups(table: SynonymTable) -> None:
    assert len(table) >= 300
    raw = json.loads(DEFAULT_FILE.read_text(encoding="utf-8"))
    assert raw["version"] == 1
    assert len(raw["groups"]) == len(table)


def test_default_is_shared(table: SynonymTable) -> None:
    assert SynonymTable.default() is table


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("二分查找", {"折半查找", "binary search"}),
        ("binary search", {"二分查找", "折半查找"}),
        ("电脑", {"计算机", "computer"}),
        ("computer", {"电脑", "计算机"}),
        ("car", {"automobile", "汽车"}),
        ("automobile", {"car"}),
        ("医生", {"大夫", "doctor"}),
        ("大夫", {"医生", "doctor"}),
        ("doctor", {"医生", "大夫"}),
        ("明天", {"tomorrow"}),
        ("开心", {"高兴", "happy"}),
        ("妈妈", {"母亲", "mother"}),
        ("同事", {"colleague"}),
    ],
)
def test_default_groups_are_symmetric_examples(table: SynonymTable, word: str, expected: set[str]) -> None:
    assert expected <= set(table.synonyms_of(word))


def test_every_default_group_is_symmetric(table: SynonymTable) -> None:
    for group in table.groups:
        for a in group:
            syn = set(table.synonyms_of(a))
            assert a not in syn
            for b in group:
                if a != b:
                    assert b in syn, (a, b)


def test_word_in_two_groups_gets_the_union_not_the_closure(table: SynonymTable) -> None:
    # 爷爷 and 外公 share "grandfather" but are not synonyms of each other.
    assert "外公" in table.synonyms_of("grandfather")
    assert "爷爷" in table.synonyms_of("grandfather")
    assert "外公" not in table.synonyms_of("爷爷")


def test_ambiguous_english_words_are_left_out(table: SynonymTable) -> None:
    # verbs and function words that would drag unrelated results in
    for word in ("work", "store", "train", "mean", "now", "map", "may", "resume"):
        assert word not in table, word


def test_lookup_is_case_and_width_insensitive(table: SynonymTable) -> None:
    assert table.synonyms_of("Binary  SEARCH") == table.synonyms_of("binary search")
    assert table.synonyms_of("ＣＡＲ") == table.synonyms_of("car")  # full-width
    assert "Car" in table


def test_plural_lookup(table: SynonymTable) -> None:
    assert table.synonyms_of("doctors") == table.synonyms_of("doctor")
    assert table.synonyms_of("linked lists") == table.synonyms_of("linked list")
    assert table.synonyms_of("xyzzy") == ()


# -- expand(words) -----------------------------------------------------------


def test_expand_originals_first_then_synonyms(table: SynonymTable) -> None:
    out = table.expand(["Car", "repair"])
    assert out[:2] == [("car", 1.0), ("repair", 1.0)]
    assert ("automobile", SYNONYM_WEIGHT) in out
    assert ("汽车", CROSS_SCRIPT_WEIGHT) in out  # a Chinese synonym of an English query
    weights = [w for _, w in out]
    assert weights[:2] == [1.0, 1.0] and max(weights[2:]) < 1.0  # originals first


def test_expand_exact_result(table: SynonymTable) -> None:
    assert table.expand(["医生"]) == [
        ("医生", 1.0),
        ("大夫", 0.6),
        ("医师", 0.6),
        ("doctor", 0.6),
        ("physician", 0.6),
    ]


def test_expand_multiword_phrase_from_adjacent_words(table: SynonymTable) -> None:
    out = table.expand(["binary", "search", "edge"])
    assert out[:4] == [("binary", 1.0), ("search", 1.0), ("edge", 1.0), ("binary search", 1.0)]
    assert ("二分查找", 0.05) in out
    # the words the phrase covers are not expanded on their own
    assert "搜索" not in words(out)


def test_expand_single_word_without_phrase(table: SynonymTable) -> None:
    assert "搜索" in words(table.expand(["search"]))


def test_expand_phrase_as_expansion(table: SynonymTable) -> None:
    out = table.expand(["二分查找"])
    assert ("binary search", 0.6) in out


def test_expand_deduplicates_and_keeps_original_weight(table: SynonymTable) -> None:
    out = table.expand(["car", "automobile", "CAR"])
    assert words(out).count("car") == 1
    assert dict(out)["automobile"] == 1.0  # an original stays 1.0 even though a synonym
    assert len(words(out)) == len(set(words(out)))


def test_expand_unknown_and_empty_words(table: SynonymTable) -> None:
    assert table.expand(["xyzzy", "", "  "]) == [("xyzzy", 1.0)]
    assert table.expand([]) == []


def test_expand_chinese_word_finds_entries_inside(table: SynonymTable) -> None:
    out = table.expand(["用电脑"])
    assert out[0] == ("用电脑", 1.0)
    assert ("电脑", 1.0) in out
    assert ("computer", 0.6) in out


def test_expand_is_deterministic(table: SynonymTable) -> None:
    query = ["binary", "search", "二分查找", "car", "doctors", "明天"]
    first = table.expand(query)
    for _ in range(3):
        assert table.expand(query) == first
    assert SynonymTable.from_files().expand(query) == first


# -- expand_text(query) ------------------------------------------------------------


def test_expand_text_chinese_substring(table: SynonymTable) -> None:
    assert table.expand_text("二分查找的边界") == [
        ("二分查找", 1.0),
        ("折半查找", 0.6),
        ("二分搜索", 0.6),
        ("二分法查找", 0.6),
        ("binary search", 0.6),
    ]


def test_expand_text_english_phrase_and_plural(table: SynonymTable) -> None:
    out = table.expand_text("How does Binary Search work on linked lists?")
    assert out[:2] == [("binary search", 1.0), ("linked list", 1.0)]
    assert ("二分查找", 0.05) in out
    assert ("链表", 0.05) in out


def test_expand_text_whole_words_only(table: SynonymTable) -> None:
    assert table.expand_text("carpet cleaning") == []
    assert words(table.expand_text("my car, carpet"))[:1] == ["car"]


def test_expand_text_punctuation_breaks_phrases(table: SynonymTable) -> None:
    assert "binary search" not in words(table.expand_text("binary, search"))
    assert "binary search" in words(table.expand_text("binary-search"))


def test_expand_text_longest_match(table: SynonymTable) -> None:
    # 电话号码 is an entry: 电话 inside it is not expanded separately
    out = words(table.expand_text("我的电话号码"))
    assert out[0] == "电话号码"
    assert "telephone" not in out


def test_expand_text_single_cjk_char_only_when_standalone(table: SynonymTable) -> None:
    assert table.expand_text("茶几上的东西") == []
    assert words(table.expand_text("喝 茶 吗")) == ["茶", "茶水", "tea"]


def test_expand_text_mixed_script(table: SynonymTable) -> None:
    out = table.expand_text("用Python写脚本, c++ 和 c#")
    assert words(out)[:4] == ["python", "脚本", "c++", "c#"]
    assert {"script", "cpp", "csharp"} <= set(words(out))


def test_expand_text_with_words_first(table: SynonymTable) -> None:
    out = table.expand_text("二分查找的边界", words=["二分查找", "边界"])
    assert out[:2] == [("二分查找", 1.0), ("边界", 1.0)]
    assert words(out).count("二分查找") == 1


def test_expand_text_empty(table: SynonymTable) -> None:
    assert table.expand_text("") == []
    assert table.expand_text("。，！") == []


def test_expand_speed(table: SynonymTable) -> None:
    query = "二分查找的边界 binary search on a sorted array"
    table.expand_text(query)
    n = 2000
    start = time.process_time()  # CPU time: a loaded machine's other processes do not count
    for _ in range(n):
        table.expand_text(query)
    per_call = (time.process_time() - start) / n
    assert per_call < 200e-6  # 50 µs target on a developer machine; slack for CI


# -- per-store files ---------------------------------------------------------------


def test_store_file_adds_to_default(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".mdcg" / "synonyms.json",
        {
            "version": 1,
            "_comment": "mine",
            "groups": [["小明", "明明", "xiaoming"], ["car", "座驾"]],
        },
    )
    assert store_synonym_path(tmp_path) == path
    t = SynonymTable.from_files(path)
    assert len(t) == len(SynonymTable.default()) + 2
    assert t.synonyms_of("小明") == ("明明", "xiaoming")
    # a word in both: union, default groups first
    syn = t.synonyms_of("car")
    assert "automobile" in syn
    assert syn[-1] == "座驾"
    assert words(t.expand_text("小明的电脑"))[:2] == ["小明", "电脑"]


def test_store_file_without_default(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", [["a1", "b1"]])
    t = SynonymTable.from_files(path, default=False)
    assert t.groups == (("a1", "b1"),)
    assert t.expand(["A1"]) == [("a1", 1.0), ("b1", 0.6)]


def test_absent_store_file_is_skipped(tmp_path: Path) -> None:
    t = SynonymTable.from_files(tmp_path / ".mdcg" / "synonyms.json", None)
    assert len(t) == len(SynonymTable.default())


def test_extended(table: SynonymTable) -> None:
    t = table.extended([["foo", "bar"]])
    assert t.synonyms_of("foo") == ("bar",)
    assert "foo" not in table


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('"groups"', "expected an object with 'groups' or a list of groups, got str"),
        ('{"group": []}', "unknown key 'group'"),
        ('{"version": 1}', "missing key 'groups'"),
        ('{"version": 2, "groups": []}', "unsupported version 2"),
        ('{"groups": {"a": "b"}}', "'groups' must be a list, got dict"),
        ('{"groups": [["a", "b"], "c"]}', "group 2: expected a list of words, got str"),
        ('{"groups": [["a", 5]]}', "group 1: entry 2: expected a string, got int 5"),
        ('{"groups": [["a", " "]]}', "group 1: entry 2 ' ' has no letter, digit or CJK character"),
        ('{"groups": [["car", "Car"]]}', "group 1: needs at least two different entries"),
        ('{"groups": [["solo"]]}', "group 1: needs at least two different entries"),
    ],
)
def test_malformed_file_names_path_and_problem(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / ".mdcg" / "synonyms.json"
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")
    with pytest.raises(MdcgError) as info:
        SynonymTable.from_files(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid synonym file: ")
    assert problem in message
    assert isinstance(info.value, SynonymFileError)
    assert info.value.path == str(path)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "syn.json"
    path.write_bytes('[["电脑", "计算机"]]'.encode("gbk"))
    with pytest.raises(SynonymFileError, match="not UTF-8"):
        SynonymTable.from_files(path)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "syn.json"
    path.write_bytes(b"\xef\xbb\xbf" + '[["甲", "乙"]]'.encode())
    assert SynonymTable.from_files(path, default=False).synonyms_of("甲") == ("乙",)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(SynonymFileError, match="is a directory"):
        SynonymTable.from_files(tmp_path)


def test_load_groups_missing_is_an_error_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(SynonymFileError, match="file not found"):
        load_groups(tmp_path / "nope.json")
    assert load_groups(tmp_path / "nope.json", missing_ok=True) == []


def test_constructor_rejects_bad_groups() -> None:
    with pytest.raises(ValueError, match="synonym group 1"):
        SynonymTable([["only"]])


def test_normalize() -> None:
    assert normalize("  Ｂinary\tSEARCH ") == "binary search"
    assert normalize("ABC") == "abc"


# -- a store's file that cannot be used -------------------------------------------------

CONFLICTED = """{
  "groups": [
<<<<<<< HEAD
    ["笔记本", "laptop"]
=======
    ["笔记本", "notebook computer"]
>>>>>>> theirs
  ]
}
"""


def _store_file(root: Path, content: str) -> Path:
    path = store_synonym_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def test_for_store_without_a_file_is_the_shipped_table(tmp_path: Path) -> None:
    table, problem = SynonymTable.for_store(tmp_path)
    assert problem is None
    assert table is SynonymTable.default()


def test_for_store_reads_a_good_file(tmp_path: Path) -> None:
    _store_file(tmp_path, '{"version": 1, "groups": [["光合作用", "photosynthesis"]]}')
    table, problem = SynonymTable.for_store(tmp_path)
    assert problem is None
    assert table.synonyms_of("光合作用") == ("photosynthesis",)
    assert len(table) == len(SynonymTable.default()) + 1


def test_for_store_falls_back_on_git_conflict_markers(tmp_path: Path) -> None:
    path = _store_file(tmp_path, CONFLICTED)
    table, problem = SynonymTable.for_store(tmp_path)
    assert table is SynonymTable.default()
    assert problem == (
        f"{path}: invalid synonym file: unresolved git merge conflict (conflict marker at line 3); "
        "resolve it and save; searching with the shipped synonym table instead"
    )
    assert table.expand_text("二分查找")  # the fallback table still expands
    with pytest.raises(SynonymFileError, match="conflict marker at line 3"):
        SynonymTable.from_files(path)  # an explicit load still raises


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"groups": [["a", "b"],', "not valid JSON: "),
        ('{"groups": {"a": "b"}}', "'groups' must be a list, got dict"),
        ('[["solo"]]', "group 1: needs at least two different entries"),
    ],
)
def test_for_store_falls_back_on_a_broken_file(tmp_path: Path, content: str, reason: str) -> None:
    path = _store_file(tmp_path, content)
    table, problem = SynonymTable.for_store(tmp_path)
    assert table is SynonymTable.default()
    assert problem is not None
    assert problem.startswith(f"{path}: invalid synonym file: {reason}")
    assert problem.endswith("; searching with the shipped synonym table instead")
    assert "\n" not in problem


def test_for_store_reports_an_unreadable_file(tmp_path: Path) -> None:
    store_synonym_path(tmp_path).mkdir(parents=True)  # a folder where the file should be
    table, problem = SynonymTable.for_store(tmp_path)
    assert table is SynonymTable.default()
    assert problem == (
        f"{store_synonym_path(tmp_path)}: invalid synonym file: is not a regular file; "
        "searching with the shipped synonym table instead"
    )


def test_error_classes_live_in_errors_and_stay_importable() -> None:
    from md_cg import errors, routing, synonyms

    assert synonyms.SynonymFileError is errors.SynonymFileError
    assert routing.UnknownBigDomainError is errors.UnknownBigDomainError
    assert issubclass(errors.SynonymFileError, errors.MdcgError)
    assert issubclass(errors.UnknownBigDomainError, errors.MdcgError)


# -- a bilingual store: expansion must not spoil English queries ------------------------

BILINGUAL = {
    "tz": "Sam lives in Lisbon; his timezone is WET (UTC+0) in winter and WEST in summer.",
    "atlas": "The Atlas project deadline is March 14; the final review is on March 10.",
    "atlas-api": "Atlas launch checklist: freeze the API two weeks before the deadline.",
    "standup": "Daily standup is at 9:30 with the platform team.",
    "coffee": "Sam prefers oat milk in his coffee.",
    "punct": "标点规范：用户界面用全角标点，用户输入用半角。",
    "pork": "红烧肉：五花肉焯水后炖一小时，最后大火收汁，最后放葱。",
    "tea": "龙井茶用八十度的水冲泡，第一泡倒掉。",
    "freeze": "项目截止日期前一周冻结接口，之后只修缺陷。",
}
ENGLISH_NOTES = {"tz", "atlas", "atlas-api", "standup", "coffee"}


def _english_first(ranked: list[str]) -> bool:
    """No Chinese note ranks above an English one."""
    flags = [d in ENGLISH_NOTES for d in ranked]
    return flags == sorted(flags, reverse=True)


def test_cross_script_synonyms_weigh_little_for_an_english_query(table: SynonymTable) -> None:
    assert CROSS_SCRIPT_WEIGHT == 0.05
    out = dict(table.expand_text("what time zone does the user live in"))
    assert out["user"] == 1.0 and out["用户"] == CROSS_SCRIPT_WEIGHT and out["使用者"] == CROSS_SCRIPT_WEIGHT
    out = dict(table.expand_text("when is the Atlas deadline?"))
    assert out["due date"] == SYNONYM_WEIGHT and out["最后期限"] == CROSS_SCRIPT_WEIGHT
    # a query with CJK text keeps every synonym at full synonym weight, English ones included
    out = dict(table.expand_text("Atlas 的 deadline"))
    assert out["最后期限"] == SYNONYM_WEIGHT and out["due date"] == SYNONYM_WEIGHT


@pytest.mark.parametrize("query", ["what time zone does the user live in", "when is the Atlas deadline?"])
def test_expansion_adds_no_single_cjk_character(table: SynonymTable, query: str) -> None:
    from md_cg.script import is_cjk
    from md_cg.text import expand_query

    terms = expand_query(query, table.expand_text(query))
    assert [t for t, _ in terms if len(t) == 1 and is_cjk(t)] == []
    assert {t for t, w in terms if w < 1.0 and any(map(is_cjk, t))} <= {
        "用户",
        "使用",
        "用者",
        "截止",
        "止日",
        "日期",
        "最后",
        "后期",
        "期限",
    }


def test_a_bilingual_store_ranks_english_notes_first_for_english_queries(tmp_path: Path) -> None:
    from md_cg import MdCG, Node
    from md_cg.text import analyze, expand_query, query_terms
    from md_cg.textindex import TextIndex

    with MdCG(tmp_path / "m") as store:
        store.add_many([Node(id=k, layer="knowledge", body=v) for k, v in BILINGUAL.items()])
        results, _ = store.search("what time zone does the user live in", k=5, judge=False, record=False)
        matched = [r.id for r in results if r.tier == "T2"]
        assert matched[0] == "tz" and _english_first(matched)  # was: the punctuation note first
        results, _ = store.search("when is the Atlas deadline?", k=5, judge=False, record=False)
        matched = [r.id for r in results if r.tier == "T2"]
        evidenced = [
            r.id for r in results if r.tier == "T2" and (r.evidence["terms"] or r.evidence["synonyms"])
        ]
        assert set(matched[:2]) == {"atlas", "atlas-api"} and _english_first(evidenced)
        assert matched.index("freeze") < matched.index("pork") > 2  # was: the pork recipe second
    # the same through the term expansion the engine uses (text.expand_query)
    index = TextIndex(analyzer=query_terms)
    for doc_id, body in BILINGUAL.items():
        index.add(doc_id, analyze(body), layer=0, bucket=0)
    table = SynonymTable.default()
    cases = [
        ("what time zone does the user live in", {"tz"}),
        ("when is the Atlas deadline?", {"atlas", "atlas-api"}),
    ]
    for query, top in cases:
        terms = expand_query(query, table.expand_text(query))
        ranked = [d for d, _ in index.match(terms, index.scope(), k=None)]
        assert set(ranked[: len(top)]) == top and _english_first(ranked)


def test_an_english_query_still_finds_a_note_written_only_in_chinese(tmp_path: Path) -> None:
    from md_cg import MdCG, Node

    with MdCG(tmp_path / "m") as store:
        store.add_many(
            [Node(id=k, layer="knowledge", body=v) for k, v in BILINGUAL.items() if k not in ENGLISH_NOTES]
        )
        results, _ = store.search("deadline", k=1, judge=False, record=False)
        assert (results[0].id, results[0].tier) == ("freeze", "T2")
