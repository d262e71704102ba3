"""md_cg.render: tables that keep every id and rank whole at any width, text shown as typed,
times that an ISO date can show."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from md_cg import InvalidArgumentError, MdCG, Node
from md_cg.render import (
    EARLIEST,
    LATEST,
    entries_table,
    health_table,
    iso,
    meta_summary,
    neighbours_table,
    parse_when,
    results_table,
)

LONG = "The user prefers metric units when discussing distances and weights."
MARKUP = "Smile :smile: [bold]x[/bold] the user prefers"
CJK = "用户偏好：讨论距离和重量时使用公制单位 the user prefers metric"
GONE = "a-missing-target-whose-id-is-longer-than-a-narrow-terminal-is-wide"
LINKER = "a-memory-that-links-to-a-missing-one-under-a-long-id-0001"
BORDERS = "┏┃┡│└"


def show(renderable: Any, width: int) -> list[str]:
    """What a console of ``width`` cells prints, as the CLI prints it (crop=False), with
    markup and emoji codes on: the renderables must not need them off."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    console.print(renderable, crop=False)
    return buffer.getvalue().splitlines()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MdCG]:
    root = tmp_path_factory.mktemp("render") / "m"
    with MdCG(root, create=True) as s:
        ids = [s.add(body=body).id for body in (LONG, CJK)]
        s.add(body=MARKUP, tags=[":smile:", "[red]t[/red]"])
        for n in range(9):  # ten results and more: a two-digit rank
            s.add(Node(id=f"n{n}", body=f"Note {n}: the user prefers option {n}"))
        s.add(Node(id="up1", body="short: the user prefers", edges=[{"target": i} for i in ids]))
        s.add(Node(id=LINKER, body="links", edges=[{"target": "up1"}, {"target": GONE}]))
    store = MdCG(root, read_only=True)
    yield store
    store.close()


def check(lines: list[str], width: int, ids: list[str]) -> None:
    """Every id is whole on one line; a line is wider than ``width`` only when it holds a
    too-wide id outside any table (and it is the id that makes it wide); every table line
    keeps its right border."""
    assert ids
    for node_id in ids:
        assert any(node_id in line for line in lines), (node_id, lines)
    for line in lines:
        if line[:1] in BORDERS:
            assert cell_len(line) <= width and line[-1] in "┓┃┩│┘", line
        elif cell_len(line) > width:
            rest = line
            for node_id in ids:
                rest = rest.replace(node_id, "")
            assert cell_len(rest) < width and rest != line, line


def ranks(lines: list[str]) -> list[int]:
    """The rank numbers shown: `│ 10 │` in a table, `10. ` in the lines form."""
    found = [re.match(r"^│ +(\d+) │|^(\d+)\. ", line) for line in lines]
    return [int(m.group(1) or m.group(2)) for m in found if m]


@pytest.mark.parametrize("width", [40, 80, 120])
@pytest.mark.parametrize("basis", [False, True])
def test_search_results_keep_the_ids_and_ranks_at_any_width(store: MdCG, width: int, basis: bool) -> None:
    results, _ = store.search("user prefers", k=20, record=False)
    assert len(results) >= 10
    lines = show(results_table(results, basis=basis, width=width), width)
    check(lines, width, [r.id for r in results])
    assert ranks(lines) == list(range(1, len(results) + 1))


def test_search_results_in_80_columns_stack_the_title_under_the_id(store: MdCG) -> None:
    found, _ = store.search("user prefers", k=20, record=False)
    results = [r for r in found if cell_len(r.id) < 60]  # the CJK id (70 cells) makes it lines
    assert len(results) == len(found) - 1 >= 10
    lines = show(results_table(results, width=80), 80)
    assert lines[1].startswith("┃  # ┃ score ┃ id ")  # the rank column keeps its width
    first = results[0]
    assert lines[3].startswith(f"│  1 │ {first.score:5.2f} │ {first.id} ")
    assert lines[4].startswith(f"│    │       │ {first.tier} · {first.state} · ")
    assert all(cell_len(line) == cell_len(lines[0]) <= 80 for line in lines)


def test_search_results_in_40_columns_are_lines(store: MdCG) -> None:
    results, _ = store.search("user prefers", k=20, record=False)
    lines = show(results_table(results, width=40), 40)
    assert lines[0] == "#. id / score · tier · state · title"
    for n, r in enumerate(results, 1):
        at = lines.index(f"{n}. {r.id}")
        assert lines[at + 1].startswith(f"  {r.score:.2f} · {r.tier} · {r.state} · ")
        assert cell_len(lines[at + 1]) <= 40


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_listed_memories_keep_their_ids_at_any_width(store: MdCG, width: int) -> None:
    total, page = store.list_page(limit=50)
    assert total == len(page) == 14
    lines = show(entries_table(page, width=width), width)
    check(lines, width, [e.id for e in page])
    if width == 40:
        assert lines[0] == "id / age · layer · tags · title"
        assert lines[1::2][: len(page)] == [e.id for e in page]


@pytest.mark.parametrize("width", [40, 80, 120])
def test_neighbours_keep_their_ids_and_the_node_reached_from(store: MdCG, width: int) -> None:
    found = store.neighbours("up1", direction="both")
    titles = {n.id: store.entry(n.id).title for n in found}
    lines = show(neighbours_table(found, titles, width=width), width)
    check(lines, width, [n.id for n in found] + ["up1"])
    if width == 40:
        assert lines[0] == "id / depth · dir · type · title / via"
        assert lines.count("  via up1") == len(found)


@pytest.mark.parametrize("width", [40, 80, 120])
def test_health_findings_keep_the_node_id(store: MdCG, width: int) -> None:
    report = store.health()
    assert not report.ok
    lines = show(health_table(report, width=width), width)
    check(lines, width, [LINKER])
    assert "".join(lines).replace(" ", "").replace("│", "").count(GONE) == 1  # folded, every character


def test_health_of_an_empty_store_says_so(tmp_path: Path) -> None:
    with MdCG(tmp_path / "e", create=True) as empty:
        assert show(health_table(empty.health(), width=80), 80) == [
            "health: OK · empty store (0 nodes) · no buckets"
        ]


def test_titles_tags_and_ids_are_shown_as_typed(store: MdCG) -> None:
    """Markup and emoji codes in a memory are text on any console (this one reads both)."""
    results, meta = store.search("smile", tag=":smile:", record=False)
    _, page = store.list_page(limit=50)
    shown = [
        *show(results_table(results, width=200), 200),
        *show(results_table(results, basis=True, width=200), 200),
        *show(entries_table(page, width=200), 200),
        *show(meta_summary(meta), 200),
    ]
    text = "\n".join(shown)
    assert "😄" not in text
    assert text.count("Smile :smile: [bold]x[/bold] the user prefers") == 3
    assert ":smile:, [red]t[/red]" in text and "filter: tag :smile: (1 memory passes)" in text


# -- times ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["99999999d", "1" + "0" * 400 + "d", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-05:00"],
)
def test_a_time_no_iso_date_can_show_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        parse_when(text, name="--since")
    assert str(err.value) == (
        f"--since {text!r} is out of range: the time must fall in the years 1 to 9999 (UTC)"
    )
    assert err.value.name == "--since"


@pytest.mark.parametrize("text", ["+10000-01-01", "10000-01-01", "99999-12-31T00:00Z"])
def test_a_year_past_9999_is_not_a_date(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^--until .*: expected an ISO date or time") as err:
        parse_when(text, name="--until")
    assert err.value.name == "--until"


def test_the_first_and_last_instants_are_taken() -> None:
    assert parse_when("0001-01-01", name="--since") == EARLIEST
    assert iso(EARLIEST) == "0001-01-01T00:00:00Z"
    assert parse_when("9999-12-31T23:59:59Z", name="--until") == LATEST
    assert iso(LATEST) == "9999-12-31T23:59:59Z"
    assert parse_when("7d", now=1e9) == 1e9 - 7 * 86400
    assert parse_when("2026-05-01") == datetime(2026, 5, 1, tzinfo=UTC).timestamp()
    with pytest.raises(InvalidArgumentError, match="out of range"):
        parse_when("1s", now=EARLIEST)
