"""Two-stage routing over big domains, and the bucket-health self-check.

Stage 1 -- :func:`big_domain_classify` scores a query's terms against the 14
big domains of :data:`DOMAINS` using the shipped keyword table
``md_cg/data/big_domains.json`` and converges on the top domain, or on
``None`` when no term hits any keyword (no forced guess).

Stage 2 -- :func:`domain_of_key` maps a bucket's domain key (the
:func:`md_cg.layout.route_key` of its nodes, e.g. ``"计算机科学"`` or
``"physics"``) to a big domain with the same classifier, and
:func:`buckets_for_big_domain` lists the keys that belong to a big domain, so
a search whose caller asked for big-domain routing (``context={"big_domain":
"auto"}`` or ``{"big_domain": "computing"}``) reads those buckets first.
:func:`resolve_big_domain` turns such a request into a domain and a score table.

Scoring (see :func:`big_domain_classify`)
-----------------------------------------
Every distinct term (NFKC, case folded, whitespace collapsed) adds to each
domain the weight of its *best* match against that domain's keywords:

* :data:`EXACT_WEIGHT` (1.0) -- the term equals a keyword. English terms are
  also tried with a light plural strip (``algorithms`` -> ``algorithm``,
  ``libraries`` -> ``library``, ``boxes`` -> ``box``).
* :data:`PARTIAL_WEIGHT` (0.5) -- only for terms containing CJK characters:
  a CJK keyword of two or more characters contains the term, or the term
  contains such a keyword (both sides at least two characters long), so
  ``二分查找算法`` and the bigram ``查找`` both hit ``二分查找``.

Runs of two and three adjacent English terms are also looked up as phrases
(``["binary", "search"]`` hits ``binary search``); a phrase hit is one more
exact hit. The top domain is the highest total; ties go to the domain listed
first in :data:`DOMAINS` (so a specific domain beats ``general``). A total of 0
everywhere gives ``None``.

Bucket health (:func:`bucket_health`)
-------------------------------------
A bucket key that degrades makes routing useless without any error, so the
figures are a permanent self-check: degraded when the largest bucket holds
more than :data:`LARGEST_SHARE_MAX` of the nodes, when more than
:data:`SINGLETON_RATE_MAX` of the buckets hold one node, or when the expected
scan share ``Σ vᵢ² / n²`` exceeds :data:`EXPECTED_SCAN_MAX`. Comparisons are
strict and exact (rational arithmetic): a figure exactly at its threshold is
healthy.

Imports only the standard library, orjson, :mod:`md_cg.errors` and :mod:`md_cg.script`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from .errors import MdcgError, UnknownBigDomainError
from .script import fold, has_cjk, plural_forms

#: The 14 big domains, in their fixed order (also the tie-breaking order).
DOMAINS: tuple[str, ...] = (
    "mathematics",
    "physics",
    "chemistry",
    "biology",
    "computing",
    "language",
    "history",
    "geography",
    "art",
    "economics",
    "psychology",
    "medicine",
    "engineering",
    "general",
)

#: Weight of a term equal to a keyword (plural-stripped for English).
EXACT_WEIGHT = 1.0
#: Weight of a CJK term that contains, or is contained in, a CJK keyword.
PARTIAL_WEIGHT = 0.5
#: Longest run of adjacent English terms looked up as a phrase.
MAX_PHRASE_WORDS = 3
#: The value of ``context["big_domain"]`` that asks for classification of the query.
AUTO = "auto"

#: Bucket health thresholds (DESIGN section 3). A figure *strictly greater*
#: than its threshold marks the partition as degraded.
LARGEST_SHARE_MAX = 0.30
SINGLETON_RATE_MAX = 0.50
EXPECTED_SCAN_MAX = 0.30

_DATA_FILE = "big_domains.json"

_LATIN_WORD = re.compile(r"^[^\W_]+(?:[-'+#.][^\W_]*)*[+#]*$")
_KEY_SPLIT = re.compile(r"[\s·・•/|>:：,，;；、()（）\[\]【】]+")


def _is_latin_word(word: str) -> bool:
    return bool(word) and _LATIN_WORD.match(word) is not None and not has_cjk(word)


# -- the keyword table --------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    exact: dict[str, frozenset[str]]  # keyword -> domains
    inside: dict[str, frozenset[str]]  # substring (>= 2 chars) of a CJK keyword -> domains
    cjk_keywords: dict[str, frozenset[str]]  # CJK keyword (>= 2 chars) -> domains
    longest_cjk: int


def _load_keywords() -> dict[str, list[str]]:
    raw = (Path(__file__).parent / "data" / _DATA_FILE).read_bytes()
    data = orjson.loads(raw)
    domains = data.get("domains") if isinstance(data, dict) else None
    if not isinstance(domains, dict) or tuple(domains) != DOMAINS:
        raise MdcgError(f"md_cg/data/{_DATA_FILE}: 'domains' must list exactly {', '.join(DOMAINS)} in order")
    out: dict[str, list[str]] = {}
    for name, entry in domains.items():
        words: list[str] = []
        for lang in ("zh", "en"):
            values = entry.get(lang, []) if isinstance(entry, dict) else None
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise MdcgError(f"md_cg/data/{_DATA_FILE}: {name}.{lang} must be a list of strings")
            words.extend(values)
        out[name] = words
    return out


@lru_cache(maxsize=1)
def _table() -> _Table:
    exact: dict[str, set[str]] = {}
    inside: dict[str, set[str]] = {}
    cjk: dict[str, set[str]] = {}
    longest = 0
    for domain, words in _load_keywords().items():
        for word in words:
            key = fold(word)
            if not key:
                continue
            exact.setdefault(key, set()).add(domain)
            if has_cjk(key) and len(key) >= 2:
                cjk.setdefault(key, set()).add(domain)
                longest = max(longest, len(key))
                for i in range(len(key)):
                    for j in range(i + 2, len(key) + 1):
                        inside.setdefault(key[i:j], set()).add(domain)
    return _Table(
        exact={k: frozenset(v) for k, v in exact.items()},
        inside={k: frozenset(v) for k, v in inside.items()},
        cjk_keywords={k: frozenset(v) for k, v in cjk.items()},
        longest_cjk=longest,
    )


def domain_keywords(domain: str) -> tuple[str, ...]:
    """The normalised keywords of one big domain, sorted (for audit and tests)."""
    if domain not in DOMAINS:
        raise UnknownBigDomainError(domain, DOMAINS, AUTO)
    return tuple(sorted(k for k, ds in _table().exact.items() if domain in ds))


# -- stage 1: classification --------------------------------------------------


def _term_hits(term: str, table: _Table) -> dict[str, float]:
    """Best match weight of one normalised term per domain it hits."""
    hits: dict[str, float] = {}
    if has_cjk(term):
        for domain in table.exact.get(term, ()):
            hits[domain] = EXACT_WEIGHT
        if len(term) >= 2:
            partial: set[str] = set(table.inside.get(term, ()))
            n = len(term)
            for i in range(n - 1):
                for j in range(i + 2, min(n, i + table.longest_cjk) + 1):
                    found = table.cjk_keywords.get(term[i:j])
                    if found:
                        partial.update(found)
            for domain in partial:
                hits.setdefault(domain, PARTIAL_WEIGHT)
        return hits
    for form in plural_forms(term):
        for domain in table.exact.get(form, ()):
            hits[domain] = EXACT_WEIGHT
    return hits


def _scores(terms: Iterable[str]) -> dict[str, float]:
    table = _table()
    totals = dict.fromkeys(DOMAINS, 0.0)
    seen: set[str] = set()
    normed: list[str] = []
    for raw in terms:
        if not isinstance(raw, str):
            raise TypeError(f"terms must be strings, got {type(raw).__name__} {raw!r}")
        term = fold(raw)
        normed.append(term)
        if term and term not in seen:
            seen.add(term)
            for domain, weight in _term_hits(term, table).items():
                totals[domain] += weight
    # Runs of adjacent English words looked up as phrases ("binary search").
    for i in range(len(normed)):
        for n in range(2, MAX_PHRASE_WORDS + 1):
            run = normed[i : i + n]
            if len(run) < n or not all(_is_latin_word(w) for w in run):
                break
            phrase = " ".join(run)
            if phrase in seen:
                continue
            seen.add(phrase)
            for domain in table.exact.get(phrase, ()):
                totals[domain] += EXACT_WEIGHT
    return totals


def big_domain_classify(terms: Iterable[str]) -> tuple[str | None, dict[str, float]]:
    """Score query terms against the 14 big domains.

    ``terms`` are already-split words or terms (Chinese words, CJK bigrams,
    English words or phrases, synonym expansions -- anything); each distinct
    term counts once (see the module docstring for the weights).

    Returns ``(top, scores)``: ``scores`` has all 14 domains as keys in
    :data:`DOMAINS` order (zeros included); ``top`` is the highest-scoring
    domain, ties going to the one listed first, or ``None`` when every score
    is 0.
    """
    scores = _scores(terms)
    best: str | None = None
    best_score = 0.0
    for domain in DOMAINS:
        if scores[domain] > best_score:
            best, best_score = domain, scores[domain]
    return best, scores


# -- stage 2: bucket keys -> big domains ------------------------------------


def _key_terms(key: str) -> list[str]:
    """The terms of a bucket key: the whole key, its parts and their words."""
    text = fold(key)
    terms = [text] if text else []
    for part in _KEY_SPLIT.split(text):
        if part and part not in terms:
            terms.append(part)
    words = [w for w in re.split(r"[\s\-_]+", text) if w]
    if len(words) > 1:
        terms.extend(w for w in words if w not in terms)
    return terms


@lru_cache(maxsize=4096)
def domain_of_key(route_key: str) -> str | None:
    """The big domain a bucket's domain key belongs to, or ``None``.

    The key (``"计算机科学"``, ``"physics"``, ``"物理·力学"``, ``"machine
    learning"``) is classified like a query made of the whole key, its parts
    between separators and, for keys of several words, its words. A key equal
    to a domain id maps to that domain. Results are cached.
    """
    if not isinstance(route_key, str):
        raise TypeError(f"route_key must be a string, got {type(route_key).__name__}")
    text = fold(route_key)
    if text in DOMAINS:
        return text
    top, _ = big_domain_classify(_key_terms(text))
    return top


def buckets_for_big_domain(domain: str, keys: Iterable[str | None]) -> list[str]:
    """The bucket keys among ``keys`` that belong to ``domain``, sorted, without duplicates.

    ``None`` and empty keys (orphans) never belong to a domain. Raises
    :class:`UnknownBigDomainError` for a domain outside :data:`DOMAINS`.
    """
    if domain not in DOMAINS:
        raise UnknownBigDomainError(domain, DOMAINS, AUTO)
    found = {k for k in keys if isinstance(k, str) and k and domain_of_key(k) == domain}
    return sorted(found)


def resolve_big_domain(spec: str, terms: Iterable[str] = ()) -> tuple[str | None, dict[str, float]]:
    """Resolve a caller's ``context["big_domain"]`` value.

    ``"auto"`` classifies ``terms`` (:func:`big_domain_classify`); a domain id
    (case-insensitive) is taken as given, and the score table of ``terms`` is
    still returned for the search metadata. Anything else raises
    :class:`UnknownBigDomainError`.
    """
    if not isinstance(spec, str):
        raise UnknownBigDomainError(spec, DOMAINS, AUTO)
    name = fold(spec)
    top, scores = big_domain_classify(terms)
    if name == AUTO:
        return top, scores
    if name not in DOMAINS:
        raise UnknownBigDomainError(spec, DOMAINS, AUTO)
    return name, scores


# -- bucket health ------------------------------------------------------------


@dataclass(frozen=True)
class BucketHealth:
    """Figures of a bucket partition and whether it is degraded.

    ``largest_share`` = nodes in the largest bucket / nodes; ``singleton_rate``
    = buckets holding one node / buckets; ``expected_scan`` = ``Σ vᵢ² / n²``,
    the expected share of the store a routed search reads when the query's
    bucket is drawn like a node. ``reasons`` names each failed criterion with
    its figure; empty when healthy.
    """

    buckets: int
    nodes: int
    largest_share: float
    singleton_rate: float
    expected_scan: float
    degraded: bool
    reasons: tuple[str, ...]
    largest_bucket: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of every field."""
        return {
            "buckets": self.buckets,
            "nodes": self.nodes,
            "largest_share": self.largest_share,
            "singleton_rate": self.singleton_rate,
            "expected_scan": self.expected_scan,
            "degraded": self.degraded,
            "reasons": list(self.reasons),
            "largest_bucket": self.largest_bucket,
        }


def _threshold(value: float) -> Fraction:
    # Fraction(str(0.3)) == 3/10 exactly, unlike Fraction(0.3).
    return Fraction(str(value))


def bucket_health(sizes: Mapping[str, int]) -> BucketHealth:
    """Health figures of a partition given as ``{bucket: node count}``.

    Buckets with 0 nodes are ignored (an empty folder is not a bucket).
    Counts must be non-negative integers, else :class:`ValueError`. An empty
    partition is not degraded and has all figures 0. The largest bucket is the
    one with the most nodes, ties going to the smallest name.

    Degraded when any of these holds (strictly greater; exact rational
    comparison, so a figure exactly at its threshold is healthy):

    * largest share > :data:`LARGEST_SHARE_MAX` -- one bucket holds too much;
    * singleton rate > :data:`SINGLETON_RATE_MAX` -- the key is instance-level;
    * expected scan ``Σ vᵢ² / n²`` > :data:`EXPECTED_SCAN_MAX`.

    A store with a handful of nodes trips these naturally (one bucket of 3 has
    a largest share of 1.0); callers reporting health may say so.
    """
    counts: list[tuple[str, int]] = []
    for name, count in sizes.items():
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValueError(f"bucket {name!r}: node count must be an integer, got {count!r}")
        if count < 0:
            raise ValueError(f"bucket {name!r}: node count must be >= 0, got {count}")
        if count:
            counts.append((str(name), count))
    if not counts:
        return BucketHealth(0, 0, 0.0, 0.0, 0.0, False, ())
    buckets = len(counts)
    nodes = sum(c for _, c in counts)
    largest_name, largest = min(counts, key=lambda item: (-item[1], item[0]))
    singletons = sum(1 for _, c in counts if c == 1)
    squares = sum(c * c for _, c in counts)

    largest_share = Fraction(largest, nodes)
    singleton_rate = Fraction(singletons, buckets)
    expected_scan = Fraction(squares, nodes * nodes)

    reasons: list[str] = []
    if largest_share > _threshold(LARGEST_SHARE_MAX):
        reasons.append(
            f"largest bucket {largest_name!r} holds {float(largest_share):.2%} of nodes "
            f"({largest}/{nodes}; limit {LARGEST_SHARE_MAX:.0%})"
        )
    if singleton_rate > _threshold(SINGLETON_RATE_MAX):
        reasons.append(
            f"singleton buckets are {float(singleton_rate):.2%} of buckets "
            f"({singletons}/{buckets}; limit {SINGLETON_RATE_MAX:.0%})"
        )
    if expected_scan > _threshold(EXPECTED_SCAN_MAX):
        reasons.append(
            f"expected scan share is {float(expected_scan):.2%} "
            f"(sum of squared bucket sizes / nodes²; limit {EXPECTED_SCAN_MAX:.0%})"
        )
    return BucketHealth(
        buckets=buckets,
        nodes=nodes,
        largest_share=float(largest_share),
        singleton_rate=float(singleton_rate),
        expected_scan=float(expected_scan),
        degraded=bool(reasons),
        reasons=tuple(reasons),
        largest_bucket=largest_name,
    )
