"""Session 40: the write path's repeated checks of a tag and normalisations of a condition
are remembered (issue 16: ``add`` at 6,000 nodes/s). Each verdict is one of the text alone,
so the same text gets the same answer, refusals and their messages included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from md_cg import MdCG, Node, judge
from md_cg import engine as engine_mod
from md_cg import node as node_mod
from md_cg.errors import IdCollisionError, InvalidNodeError


def _counted(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[Any]:
    """The last argument of each call of ``module.name`` from now on, in order (the text of
    a function of one text; the keys of ``Notes.keyed``)."""
    calls: list[Any] = []
    real = getattr(module, name)

    def counting(*args: Any) -> object:
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(module, name, counting)
    return calls


@pytest.fixture
def counted_shows_text(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every tag :func:`md_cg.node.unusable` looks at character by character, in order
    (a fresh memo of usable tags)."""
    monkeypatch.setattr(node_mod, "_USABLE_TAGS", set(), raising=False)
    return _counted(monkeypatch, node_mod, "shows_text")


def test_a_tag_written_again_is_not_checked_again(tmp_path: Path, counted_shows_text: list[str]) -> None:
    with MdCG(tmp_path / "s") as store:
        store.add(id="n1", body="first", tags=["运维", "ops"])
        store.add(id="n2", body="second", tags=["运维", "ops", "新"])
        store.add(id="n3", body="third", tags=["ops"])
        assert counted_shows_text == ["运维", "ops", "新"]
        assert sorted(store.ids()) == ["n1", "n2", "n3"]
        assert store.get("n2").tags == ["运维", "ops", "新"]


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        (
            ["运维", "ops\u200b"],
            "node 'a2': field 'tags' holds the tag 'ops\\u200b' with the invisible format character "
            "U+200B (ZERO WIDTH SPACE), so it would look like another tag; tags must read as what they "
            "are, as ids must",
        ),
        (["ops", "\u3164"], "node 'a2': field 'tags' holds a blank tag ('\\u3164'); a tag needs some text"),
        (
            ["运维", "a\x01b"],
            "node 'a2': field 'tags' holds a tag with a control character ('a\\x01b'); "
            "a tag is one line of text",
        ),
        (["ops", "  "], "node 'a2': field 'tags' holds a blank tag ('  '); a tag needs some text"),
    ],
)
def test_a_remembered_tag_never_passes_a_bad_one(
    tmp_path: Path, counted_shows_text: list[str], tags: list[str], message: str
) -> None:
    """The good tags of an earlier add are remembered; a bad tag beside them is refused as
    before, nothing written, and the bad tag is not remembered (refused again)."""
    with MdCG(tmp_path / "s") as store:
        store.add(id="a1", body="x", tags=["运维", "ops"])
        for _ in range(2):
            with pytest.raises(InvalidNodeError) as err:
                store.add(id="a2", body="y", tags=tags)
            assert str(err.value) == message
        assert store.ids() == ["a1"]
        assert [p.name for p in (tmp_path / "s").rglob("*.md")] == ["a1.md"]
    assert tags[1] not in node_mod._USABLE_TAGS


def test_the_tag_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_mod, "_USABLE_TAGS", set(), raising=False)
    monkeypatch.setattr(node_mod, "_USABLE_TAGS_MAX", 3)
    for n, tag in enumerate(["a", "b", "c", "d", "x" * 300]):
        assert node_mod.unusable(Node(id=f"n{n}", body="b", tags=[tag])) is None
    assert {"d"} == node_mod._USABLE_TAGS  # emptied when full; a long tag is not kept


def test_a_condition_is_normalised_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge, "_CONDITION_KEYS", {}, raising=False)
    calls = _counted(monkeypatch, judge, "normalize_text")
    body = "# Not applicable when: 样本量过小；in Zürich\n\nA body."
    first = Node(id="c1", body=body, non_applicable_conditions=["In Zurich ", "样本量过小"])
    second = Node(id="c2", body=body, non_applicable_conditions=["样本量过小"])
    assert judge.node_conditions(first) == ("In Zurich", "样本量过小")
    assert judge.node_conditions(second) == ("样本量过小", "in Zürich")
    assert calls == ["In Zurich", "样本量过小", "in Zürich"]


def test_the_condition_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(judge, "_CONDITION_KEYS", {}, raising=False)
    monkeypatch.setattr(judge, "_CONDITION_KEYS_MAX", 2)
    long = "Y" * 300
    for text in ("A", "B", "C", long):
        assert judge._condition_key(text) == text.lower()
    assert judge._CONDITION_KEYS == {"C": "c"}


def test_a_new_id_looks_up_no_twin_when_nothing_is_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no file noted gone by hand (the usual case), a new id's twin among the notes is
    not looked for (its key not computed); with one noted, it is, and a twin is refused."""
    keyed = _counted(monkeypatch, engine_mod.Notes, "keyed")
    with MdCG(tmp_path / "s") as store:
        engine_mod._notes(store._engine)  # the notes as a write finds them after a sync
        store.add(id="n1", body="one")
        store.add_many([Node(id="n2", body="two"), Node(id="n3", body="three")])
        assert keyed == []
        store._engine.hand_after["gone1"] = ("gone", "contextual/gone1.md", None)
        with pytest.raises(IdCollisionError) as err:
            store.add(id="GONE1", body="four")
        assert err.value.node_id == "GONE1"
        assert str(err.value) == (
            "node id 'GONE1' collides with the existing id 'gone1' (contextual/gone1.md): ids that "
            "differ only by letter case or Unicode normalisation are the same file on macOS and "
            "Windows; choose another id or change the existing node"
        )
        assert ("gone1",) in keyed
        assert store.ids() == ["n1", "n2", "n3"]


def test_notes_get_answers_as_a_mapping() -> None:
    notes = engine_mod.Notes({"a": ("gone", "contextual/a.md", None)})
    assert notes.get("a") == ("gone", "contextual/a.md", None)
    assert notes.get("b") is None
    assert notes.get("b", 7) == 7
    del notes["a"]
    assert notes.get("a") is None
    assert notes.keyed(["a"]) == []
