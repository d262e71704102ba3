"""Snippets fold as the index does, cost a bounded time, and never cut a grapheme cluster;
the MCP ``query`` has a length limit; a search normalises its query once (session 38's
attacker, findings 1-4).

1. Six memories of ~700 KB in full-width letters and a query of 3,000 words: the library
   search took 0.24 s, the MCP ``search`` tool 22.3 s -- 3.6 s per snippet: the index
   NFKC-folds (every term matched), the snippet did not (casefold and accents only), so it
   found none of the terms and looked for every term in every line.
2. A match written in NFKC-only forms (``ｃｏｆｆｅｅ``, ``１２３４``, ``H₂O``, ``Ⅻ``,
   decomposed Hangul jamo) was found, but the snippet showed the start of the line.
3. A query's cost grew with its NFKC length, normalised ~10 times along the search, and
   the MCP ``query`` had no length limit (50,000 x U+FDFA: 2.4 s through the server).
4. Snippet, ``clip`` and title cuts split flags, skin tones, tag sequences, a Hangul
   syllable from its final jamo (가+ᆨ), a conjunct at its virama, an Arabic number sign.
"""

from __future__ import annotations

import json
import random
import string
import time
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import pytest

from md_cg import MdCG, Node, render, script
from md_cg.index import title_of
from md_cg.render import clip, snippet

# read from the modules (not imported by name) so that each test fails on its own without them
SNIPPET_SCAN: int = getattr(render, "SNIPPET_SCAN", 100_000)
SNIPPET_TERMS: int = getattr(render, "SNIPPET_TERMS", 128)

PAD = " ".join(["filler"] * 40)
#: Every character canonical composition joins to the one before it that is not a mark
#: (folds_apart relies on it): the Hangul vowels and finals.
HANGUL_TAIL = range(0x1160, 0x1200)


# -- 2. NFKC forms --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "term", "want"),
    [
        (
            "Alice brought ｃｏｆｆｅｅ for the team",
            "coffe",
            "…filler Alice brought ｃｏｆｆｅｅ for the team",
        ),
        ("room １２３４ today", "1234", "…filler filler room １２３４ today"),
        ("we drank H₂O", "h2o", "…filler filler we drank H₂O"),
        ("chapter Ⅻ begins", "xii", "…filler filler chapter Ⅻ begins"),
        (
            "\u1100\u1161\u11a8 end",
            "각",
            "…filler filler filler \u1100\u1161\u11a8 end",
        ),  # jamo: one syllable
        ("ＣＡＦÉ au lait", "cafe", "…filler filler filler ＣＡＦÉ au lait"),
    ],
)
def test_a_match_in_nfkc_forms_is_shown(line: str, term: str, want: str) -> None:
    assert snippet("Title\n" + PAD + " " + line, [term]) == want  # before: "filler filler ... fille…"


def test_every_character_composition_joins_backwards_is_a_mark_or_a_hangul_tail() -> None:
    """What :func:`md_cg.script.folds_apart` assumes, over every code point."""
    seconds = set()
    for cp in range(0x110000):
        parts = unicodedata.decomposition(chr(cp)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            seconds.add(int(parts[1], 16))
    odd = [hex(c) for c in sorted(seconds) if not unicodedata.category(chr(c)).startswith("M")]
    assert all(int(c, 16) in HANGUL_TAIL for c in odd) and len(seconds) > 80


def test_the_match_fold_is_nfkc_case_folding_and_accents() -> None:
    """Full-width ASCII replaced first (at most 64, a shortcut for Chinese punctuation)
    changes nothing of the result, however many there are."""
    rng = random.Random(380)
    alphabet = "aÉ\u0301\u0308ｃＣ０：，　！ｰﾞｶ漢가\u11a8ß\ufdfa"
    for n in (1, 5, 40, 63, 64, 65, 200):
        for _ in range(200):
            text = "".join(rng.choice(alphabet) for _ in range(n))
            want = script.fold_accents(unicodedata.normalize("NFKC", text).casefold())
            assert script.match_fold(text) == want, text


def test_text_folds_apart_where_folds_apart_says() -> None:
    rng = random.Random(38)
    alphabet = (
        "aeiouAEIO ßİﬁŉæ\u0301\u0308\u0323\u0345ｃｏｆ１２₂ⅫＡ"
        "\u1100\u1161\u11a8\uac00\u3131\u314f\uff76\uff9e\u0915\u094d\u0937\u09c7\u09be\u0b47\u0b3e"
        "\U0001f1fa\U0001f1f8\U0001f44d\U0001f3fd\u200d\u0600\u0661\ufdfa\u3395"
    )
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        for at in range(len(text) + 1):
            if script.folds_apart(text, at):
                whole = script.match_fold(text)
                assert script.match_fold(text[:at]) + script.match_fold(text[at:]) == whole, (text, at)


# -- 1. the cost ------------------------------------------------------------------------


def _fullwidth_body_and_terms(lines: int, words: int) -> tuple[str, list[str]]:
    rng = random.Random(3)
    vocab = ["".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(words)]
    wide = str.maketrans({c: chr(ord(c) - 0x61 + 0xFF41) for c in string.ascii_lowercase})
    body = "Title line\n" + "\n".join(
        " ".join(rng.choices(vocab, k=30)).translate(wide) for _ in range(lines)
    )
    return body, vocab


def test_a_snippet_of_many_terms_over_a_long_full_width_body_is_quick() -> None:
    body, terms = _fullwidth_body_and_terms(3000, 3000)  # the attacker's: 4.2 s for one snippet
    start = time.perf_counter()
    got = snippet(body, terms)
    took = time.perf_counter() - start
    assert took < 1.0, took  # 0.01 s here
    assert unicodedata.normalize("NFKC", got.lstrip("…").split()[0]) in terms  # and it shows a matched word


def test_only_the_first_terms_are_looked_for() -> None:
    body = "Title\n" + PAD + " the needle is here"
    decoys = [f"decoy{i}" for i in range(SNIPPET_TERMS)]
    assert snippet(body, [*decoys, "needle"]).startswith("filler filler")  # the 129th: not looked for
    assert snippet(body, [*decoys[1:], "needle"]) == "…filler filler the needle is here"


def test_only_the_start_of_a_long_body_is_read() -> None:
    head = "Title\n" + "word " * ((SNIPPET_SCAN - 6) // 5 - 30)  # the needle 150 characters before the end
    body = head + "needle " + "tail " * 1000
    got = snippet(body, ["needle"])
    assert got.startswith("…word word") and "needle tail" in got and got.endswith("…") and len(got) == 160
    # what is read ends inside the window: the window still ends with …, the body goes on
    near = head + "word " * 28 + "needle tail " + "more " * 1000
    assert snippet(near, ["needle"]).endswith("…")
    far = "Title\n" + "word " * (SNIPPET_SCAN // 5) + "needle"
    assert snippet(far, ["needle"]) == "word " * 31 + "word…"  # past what is read: not shown


# -- 4. cuts and clusters ---------------------------------------------------------------

UNITS = {
    "flag": "\U0001f1fa\U0001f1f8",
    "skin tone": "\U0001f44d\U0001f3fd",
    "tag sequence": "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "syllable and final jamo": "\uac00\u11a8",
    "conjunct": "\u0915\u094d\u0937",
    "number sign": "\u0600\u0661",
}


@pytest.mark.parametrize("unit", UNITS.values(), ids=UNITS.keys())
def test_cuts_end_before_a_cluster_they_would_part(unit: str) -> None:
    for inside in range(1, len(unit)):  # the cut falls after `inside` characters of the unit
        body = "T\n" + "a" * (159 - inside) + unit + "z" * 50
        assert snippet(body) == "a" * (159 - inside) + "…"  # before: "aa🇺…", "a🏴\U000e0067…", "aa가…"
        assert clip("a" * (9 - inside) + unit + "zzzz", 10) == "a" * (9 - inside) + "…"
        assert title_of("a" * (119 - inside) + unit + "zzzz") == "a" * (119 - inside) + "…"


@pytest.mark.parametrize(
    ("unit", "before"),
    [
        ("\U0001f1fa\U0001f1f8", "…🇸🇺🇸🇺🇸"),  # the flags paired wrong
        ("\U0001f44d\U0001f3fd", "…🏽👍🏽👍🏽"),  # a skin tone alone
        ("\uac00\u11a8", "…\u11a8\uac00\u11a8\uac00\u11a8"),  # a final jamo alone
        ("\u0915\u094d\u0937", "…षक्षक"),  # half a conjunct
        ("\u0600\u0661", "…١\u0600١\u0600١"),  # a digit without its number sign
    ],
)
def test_a_window_starts_on_a_cluster(unit: str, before: str) -> None:
    for lead in range(len(unit)):
        got = snippet("T\n" + "x" * lead + unit * 60 + "-keyword" + "z" * 200, ["keyword"])
        assert got[: 1 + 2 * len(unit)] == "…" + unit * 2 and got[:6] != before


def test_flags_pair_from_the_start_of_their_run() -> None:
    us = "\U0001f1fa\U0001f1f8"
    run = "x" + us * 100
    assert [at for at in range(1, len(run)) if script.splits_cluster(run, at)] == list(range(2, len(run), 2))


def test_the_mcp_clip_keeps_clusters_whole() -> None:
    from md_cg.mcp_server import clip as reply_clip

    assert reply_clip('"' * 4 + "\uac00\u11a8" + "zzzz", 10) == '""""…'  # quotes count twice: 8, then 가+ᆨ
    assert reply_clip("ab\U0001f1fa\U0001f1f8cdefghij", 4) == "ab…"  # before: "ab🇺…"


# -- 3. the query: its limit on MCP, one normalisation ------------------------------------


def test_a_long_query_is_normalised_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with MdCG(tmp_path / "m") as store:
        store.add(id="a", layer="knowledge", body="Notes\ncoffee with Alice")
        store.search("\ufdfa" * 299 + " tea", k=3)  # another long query first: nothing of it helps
        query = "\ufdfa" * 300 + " coffee"
        seen: list[tuple[str, int]] = []
        real = unicodedata.normalize

        def counting(form: str, text: str) -> str:
            if len(text) >= 256:
                seen.append((form, len(text)))
            return real(form, text)

        monkeypatch.setattr(unicodedata, "normalize", counting)
        results, _ = store.search(query, k=3)
    assert [r.id for r in results] == ["a"]
    # the query once (before: six times -- its terms, its words, the phrase key, the synonyms,
    # routing), and the run of U+FDFA alone once (the similarity tier's words)
    assert seen == [("NFKC", 307), ("NFKC", 300)]


def _mcp(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], list[Any]]:
    pytest.importorskip("mcp")
    from mcp import Client

    from md_cg.mcp_server import create_server

    async def run() -> tuple[list[Any], list[Any]]:
        server = create_server(root)
        try:
            async with Client(server) as client:
                tools = (await client.list_tools()).tools
                return tools, [await client.call_tool(name, args) for name, args in calls]
        finally:
            server.store.close()

    return anyio.run(run)


def test_the_mcp_query_has_a_limit_of_10000_characters(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add(id="a", layer="knowledge", body="Notes\ncoffee with Alice")
    long, limit = "\ufdfa" * 10_001, "coffee " + "x" * 9_993
    calls = [(name, {"query": long}) for name in ("search", "recall", "reflect", "inject")]
    tools, replies = _mcp(root, [*calls, ("search", {"query": limit})])
    by_name = {t.name: t for t in tools}
    for name in ("search", "recall", "reflect", "inject"):
        assert by_name[name].input_schema["properties"]["query"] == {
            "description": "Words, any language.",
            "maxLength": 10_000,
            "type": "string",
        }
    for (name, _), reply in zip(calls, replies[:4], strict=True):
        assert reply.is_error
        assert (
            reply.content[0].text
            == f"{name}: argument 'query' is 10,001 characters, over the limit of 10,000"
        )
    assert not replies[4].is_error and len(limit) == 10_000
    assert [r["id"] for r in json.loads(replies[4].content[0].text)["results"]] == ["a"]


def test_through_the_mcp_server_a_full_width_match_is_shown(tmp_path: Path) -> None:
    root = tmp_path / "m"
    with MdCG(root) as store:
        store.add_many(
            [
                Node(
                    id="fw", layer="contextual", body="Standup notes\n" + PAD + " Alice brought ｃｏｆｆｅｅ"
                ),
                Node(id="sup", layer="contextual", body="Chemistry\n" + PAD + " we drank H₂O"),
            ]
        )
    _, replies = _mcp(root, [("search", {"query": "coffee"}), ("search", {"query": "h2o"})])
    got = [json.loads(r.content[0].text)["results"][0] for r in replies]
    assert [(r["id"], r["snippet"]) for r in got] == [
        ("fw", "…filler Alice brought ｃｏｆｆｅｅ"),
        ("sup", "…filler filler we drank H₂O"),
    ]
