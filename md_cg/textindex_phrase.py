"""Title phrase bonus: a node whose title holds the query verbatim ranks higher.

BM25 over a bag of terms cannot tell ``红黑树·第14篇`` from ``红黑树·推导过程·第10篇``
(which also holds 14, 第 and 篇 somewhere), nor ``type 2 diabetes, part 2``
from ``type 2 diabetes: history, part 4``: every document of such a family
holds every term of the name, and their scores differ by a few percent of
term frequency and length. In a seed-shaped store the family grows with the
store, so the one node that carries the name verbatim slips below rank 10
(exact-name recall against sqlite ``LIKE`` 0.999 at 3k nodes, 0.95 at 100k;
docs/ranking.md, "Title phrase").

The text index keeps no positions, but the index entry of every node keeps
its title (the first body line), so the best ``PHRASE_POOL`` hits of a term
match are re-ranked: a hit whose title contains the query as a phrase
(:func:`phrase_key` of both; a word of the query must not be part of a longer
word of the title: ``part 2`` is not in ``part 22``) has its score multiplied
by ``PHRASE_BONUS``. A query that no title of the pool holds keeps its ranking
bit for bit; questions in natural language are never a title's substring, so
the ranking of questions does not move (the quality benchmarks are unchanged).

Imports only the text rules (:mod:`md_cg.text`, :mod:`md_cg.script`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .script import fold_accents, is_cjk
from .text import normalize

__all__ = ["PHRASE_BONUS", "PHRASE_POOL", "contains_phrase", "phrase_key", "title_rerank"]

#: How many of a term match's best hits are checked for the phrase.
PHRASE_POOL = 20
#: Score multiplier of a hit whose title holds the query verbatim.
PHRASE_BONUS = 2.0


def phrase_key(text: str) -> str:
    """``text`` normalised for phrase comparison: :func:`md_cg.text.normalize`
    (lower case, punctuation to spaces, NFKC), the diacritics of Latin letters
    removed (:func:`md_cg.script.fold_accents`, as the text index's words), and
    runs of spaces made one."""
    return " ".join(fold_accents(normalize(text)).split())


def _joins(a: str, b: str) -> bool:
    """True when characters ``a`` and ``b`` side by side belong to one word
    (two letters or digits outside CJK text, which has no word boundaries)."""
    return a.isalnum() and b.isalnum() and not is_cjk(a) and not is_cjk(b)


def contains_phrase(title_key: str, phrase: str) -> bool:
    """True when ``phrase`` occurs in ``title_key`` (both :func:`phrase_key`) on word boundaries."""
    if not phrase:
        return False
    start = title_key.find(phrase)
    while start >= 0:
        end = start + len(phrase)
        if (start == 0 or not _joins(title_key[start - 1], phrase[0])) and (
            end == len(title_key) or not _joins(phrase[-1], title_key[end])
        ):
            return True
        start = title_key.find(phrase, start + 1)
    return False


def title_rerank(
    query: str,
    hits: Sequence[tuple[str, float]],
    title: Callable[[str], str],
    k: int,
    *,
    bonus: float = PHRASE_BONUS,
) -> list[tuple[str, float]]:
    """The best ``k`` of ``hits`` after the title phrase bonus.

    ``hits``: (id, score) in ranking order (score desc, then the index's tie
    order); ``title(id)``: that node's title. Hits whose title holds
    ``query`` as a phrase get ``score * bonus``; the re-sort is stable, so
    equal scores keep the index's order. Without such a hit (or with
    ``bonus`` 1) the first ``k`` hits are returned unchanged.
    """
    phrase = phrase_key(query)
    if bonus == 1.0 or not phrase:
        return list(hits[:k])
    boosted = [contains_phrase(phrase_key(title(doc_id)), phrase) for doc_id, _ in hits]
    if not any(boosted):
        return list(hits[:k])
    scored = [
        (doc_id, score * bonus if up else score) for (doc_id, score), up in zip(hits, boosted, strict=True)
    ]
    scored.sort(key=lambda hit: -hit[1])
    return scored[:k]
