"""``mdcg demo``: a guided tour of md-cg on the bundled sample database.

:func:`run_demo` builds a store from the shipped sqlite slice
(:func:`md_cg.sample.bundled_sample_path`, 226 nodes) through the real
migration path (:func:`md_cg.migrate.migrate`, full field-by-field
verification), then runs the searches that show what the engine does:

1. migration and its verification (0 mismatches);
2. a routed search: a context with a domain sends the query to one condition
   bucket (tier T0), reading a fraction of the store;
3. the same query without context: the global ladder (tier T2);
4. a nonsense query: the similarity fallback (tier T3) fills the answer with
   hits that have no evidence of being about the query (flagged filler,
   never ACCEPT);
5. the qualification judge: one query whose results are ACCEPT, DEFER and
   BLINDSPOT, then the same query with a context that hits a not-applicable
   condition, turning those nodes to REJECT;
6. negative memory: the query of step 5 also hits a falsified hypothesis in
   ``rejected/`` (``meta["covered_neg"]``);
7. big-domain routing: ``{"big_domain": "auto"}`` classifies the query and
   searches every bucket of that big domain;
8. ``verify``: external evidence raises a node's confidence;
9. ``reflect``: the information gap D = 1 - ACCEPT rate of steps 5, with dD/dt;
10. ``health()``.

Every figure printed is measured in the run and returned in a
:class:`DemoSummary`, so tests assert exact facts. The queries are chosen for
the bundled sample; the node ids are not hard-coded.

The tables come from :mod:`md_cg.render`, shared with the command line.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table

from .engine import check_not_nested
from .errors import DemoError
from .judge import STATES
from .migrate import MigrationReport, migrate
from .render import clip, first_line, health_table, meta_summary, results_table
from .reports import HealthReport
from .sample import bundled_sample_path
from .search import TIERS, SearchResult
from .store import MdCG

#: The searches of the tour: (key, query, context, k). Chosen for the bundled sample.
Spec = tuple[str, str, Any, int]
ROUTED = ("routed", "二分查找", "计算机科学", 3)
UNROUTED = ("unrouted", "二分查找", None, 3)
FALLBACK = ("fallback", "xyzzy plugh", None, 3)
JUDGED = ("judged", "牛顿第二定律", None, 6)
REJECTED = ("rejected", "牛顿第二定律", {"domain": "物理学", "situation": "接近光速的高速运动"}, 6)
BIG_DOMAIN = ("big_domain", "能量守恒", {"big_domain": "auto"}, 3)
#: Evidence the tour applies with ``verify``.
EVIDENCE = "re-measured on an air track: a = F/m within 1% over 12 runs"

__all__ = ["DemoError", "DemoSummary", "Hit", "SearchFacts", "prepare_dest", "run_demo"]


@dataclass(frozen=True)
class Hit:
    """One search result as the demo shows it."""

    id: str
    tier: str
    state: str | None
    score: float
    layer: str
    title: str
    #: no evidence of being about the query (the ladder's never-empty rule put it here)
    filler: bool = False


@dataclass(frozen=True)
class SearchFacts:
    """What one search of the tour returned and how (from its ``meta``)."""

    query: str
    context: Any
    tier: str
    routed: bool
    buckets: tuple[str, ...]
    big_domain: str | None
    scanned: int
    store_size: int
    covered_neg: tuple[str, ...]
    hits: tuple[Hit, ...]
    ms: float

    @property
    def states(self) -> tuple[str, ...]:
        """The qualification states among the hits, in ACCEPT, REJECT, DEFER, BLINDSPOT order."""
        seen = {h.state for h in self.hits}
        return tuple(s for s in STATES if s in seen)

    @property
    def tiers(self) -> tuple[str, ...]:
        """The tiers that found the hits, in ladder order."""
        seen = {h.tier for h in self.hits}
        return tuple(t for t in TIERS if t in seen)

    @property
    def filler(self) -> int:
        """How many hits have no evidence of being about the query."""
        return sum(1 for h in self.hits if h.filler)


@dataclass(frozen=True)
class DemoSummary:
    """The measured facts of one :func:`run_demo`."""

    dest: str
    source: str
    migration_ok: bool
    rows: int
    migrated: int
    mismatches: int
    bad_rows: int
    layers: dict[str, int]
    buckets: int
    searches: dict[str, SearchFacts]
    covered_neg: tuple[str, ...]
    verified_id: str
    confidence_before: float
    confidence_after: float
    reflections: tuple[dict[str, Any], ...]
    health_ok: bool
    health_findings: dict[str, int]
    nodes: int
    seconds: float

    @property
    def tiers(self) -> tuple[str, ...]:
        """Every tier that found a result somewhere in the tour, in ladder order."""
        seen = {t for s in self.searches.values() for t in s.tiers}
        return tuple(t for t in TIERS if t in seen)

    @property
    def states(self) -> tuple[str, ...]:
        """Every qualification state seen in the tour."""
        seen = {st for s in self.searches.values() for st in s.states}
        return tuple(s for s in STATES if s in seen)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (with the derived ``tiers`` and ``states``)."""
        d = asdict(self)
        d["tiers"] = list(self.tiers)
        d["states"] = list(self.states)
        return d


# -- running ----------------------------------------------------------------------


def prepare_dest(dest: str | os.PathLike[str] | None, *, force: bool = False) -> Path:
    """The folder the demo will use: ``dest``, or a new temp folder when ``None``.

    An existing non-empty ``dest`` is refused unless ``force`` (a previous demo
    store is then migrated over again, which is idempotent; a folder that is no
    md-cg store is still refused by the migration).
    """
    if dest is None:
        return Path(tempfile.mkdtemp(prefix="mdcg-demo-"))
    path = Path(dest)
    check_not_nested(path)  # before anything is made there
    if path.exists() and not path.is_dir():
        raise DemoError(f"{path}: exists and is not a folder")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise DemoError(f"{path}: the folder is not empty; choose a new folder or pass --force")
    return path


class _Out:
    """Prints to a console, or nowhere."""

    def __init__(self, console: Console | None) -> None:
        self.console = console

    def step(self, title: str, text: str) -> None:
        if self.console is not None:
            self.console.print()
            self.console.print(Rule(f"[bold]{escape(title)}[/]", align="left"))
            self.console.print(escape(text), soft_wrap=True)

    @property
    def width(self) -> int | None:
        """The console's width in cells (None: printing nowhere)."""
        return None if self.console is None else self.console.width

    def print(self, *items: Any) -> None:
        if self.console is not None:
            self.console.print(*items)

    def line(self, text: str) -> None:
        """A line that is never wrapped (it holds a path or a command to copy)."""
        if self.console is not None:
            self.console.print(text, soft_wrap=True)


@contextmanager
def _migration_bar(enabled: bool) -> Iterator[Any]:
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    bar = Progress(
        TextColumn("migrating the sample"),
        BarColumn(),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task("migrate", total=None)
    with bar:
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _migration_table(report: MigrationReport) -> Table:
    table = Table("figure", "value", show_header=False)
    table.add_row("source rows", str(report.rows))
    table.add_row("migrated (good rows)", str(report.migrated))
    table.add_row(
        "created / updated / unchanged", f"{report.created} / {report.updated} / {report.unchanged}"
    )
    table.add_row("bad node / edge rows", f"{report.bad_node_rows} / {report.bad_edge_rows}")
    table.add_row("verified field by field", str(report.verified))
    table.add_row("mismatches", f"[bold]{len(report.mismatches)}[/]")
    table.add_row("layers", escape(", ".join(f"{k} {v}" for k, v in report.layers.items() if v)))
    table.add_row("knowledge buckets", str(len(report.buckets)))
    table.add_row("time", f"{report.seconds:.2f} s")
    return table


@dataclass
class _Tour:
    """One run of the tour on an open store: each step prints and keeps its facts."""

    store: MdCG
    out: _Out
    searches: dict[str, SearchFacts]

    def search(self, spec: Spec) -> tuple[SearchFacts, list[SearchResult], dict[str, Any]]:
        key, query, context, k = spec
        results, meta = self.store.search(query, k=k, context=context, record=False)
        hits = tuple(
            Hit(r.id, r.tier, r.state, round(r.score, 4), r.entry.layer, r.title, r.filler) for r in results
        )
        facts = SearchFacts(
            query=query,
            context=context,
            tier=meta["tier"],
            routed=bool(meta["routed"]),
            buckets=tuple(meta["buckets"]),
            big_domain=meta["big_domain"],
            scanned=meta["scanned"],
            store_size=meta["store_size"],
            covered_neg=tuple(meta["covered_neg"]),
            hits=hits,
            ms=round(meta["timing_ms"]["total"], 3),
        )
        self.searches[key] = facts
        return facts, results, meta

    def shown(self, spec: Spec, title: str, text: Any) -> SearchFacts:
        """Run a search and print it: ``text`` may use the facts (a function of them)."""
        facts, results, meta = self.search(spec)
        self.out.step(title, text(facts) if callable(text) else text)
        self.out.print(results_table(results, width=self.out.width))
        self.out.print(meta_summary(meta))
        return facts

    def ladder(self) -> None:
        """Steps 2-4: a routed search, the global ladder, and a query nothing is about."""
        self.shown(
            ROUTED,
            f"2 · Routed search: {ROUTED[1]!r} with context {ROUTED[2]!r}",
            lambda f: (
                "A context naming a domain routes the query to that domain's condition bucket: "
                f"tier T0 matched terms inside {len(f.buckets)} bucket, reading {f.scanned} "
                f"of {f.store_size} nodes. Routing is an opt-in accelerator, never a filter: "
                "the search ends in the bucket only when k of its notes hold every term of the "
                "query; otherwise the whole store's matches compete with the bucket's by score."
            ),
        )
        self.shown(
            UNROUTED,
            f"3 · No context: {UNROUTED[1]!r}",
            lambda f: (
                "Without a context the engine guesses nothing: the global ladder goes straight "
                f"to T2, a BM25 term match over the whole store ({f.scanned} nodes)."
            ),
        )
        self.shown(
            FALLBACK,
            f"4 · Nonsense: {FALLBACK[1]!r} (no node is about these words)",
            "When term matching finds fewer than k results, T3 ranks the whole store by "
            "character-bigram similarity, so a non-empty store never answers empty. Hits with no "
            "evidence of being about the query (no query term, too little similarity) are flagged "
            "filler: never ACCEPT, never counted as an access, and left out by `mdcg search` and the "
            "MCP server unless asked for (--fill).",
        )

    def judge(self) -> tuple[list[SearchResult], list[SearchResult]]:
        """Step 5: the four states, then a context that turns ACCEPT/DEFER into REJECT."""
        _, judged, _ = self.search(JUDGED)
        self.out.step(
            f"5 · Qualification judge: {JUDGED[1]!r}",
            "Tier says how a node was found; state says whether it may be used. A procedure (a "
            "note with CCG marks) is ACCEPT when its annotation is complete and its verification "
            "basis declared, DEFER when complete but unverified, BLINDSPOT when marks are missing "
            "(you cannot tell when it applies). A plain fact is ACCEPT with a basis, DEFER without.",
        )
        self.out.print(results_table(judged, basis=True, width=self.out.width))
        _, rejected, _ = self.search(REJECTED)
        self.out.step(
            f"5b · Same query, context {REJECTED[2]!r}",
            "The context hits a not-applicable condition of the Newton's-second-law notes: "
            "they are now REJECT (do not act on them), whatever their rank or tier.",
        )
        self.out.print(results_table(rejected, basis=True, width=self.out.width))
        return judged, rejected

    def negatives(self) -> tuple[str, ...]:
        """Step 6: the negative memories the judged query covers."""
        covered = self.searches["judged"].covered_neg
        self.out.step(
            "6 · Negative memory: covered_neg",
            "The same query also matches entries of rejected/ (falsified hypotheses) and "
            "unresolved/ (open questions). Search never ranks them as answers; it reports "
            "them in meta['covered_neg'] (at most 5, with a total) so the agent does not repeat "
            "a known mistake.",
        )
        table = Table()
        table.add_column("id", no_wrap=True, min_width=max(map(len, covered), default=2))
        table.add_column("layer", no_wrap=True, min_width=10)
        table.add_column("first line", ratio=1, overflow="ellipsis")
        for node_id in covered:
            node = self.store.get(node_id)
            table.add_row(node_id, node.layer, escape(clip(first_line(node.body), 60)))
        self.out.print(table)
        return covered

    def big_domain(self) -> None:
        """Step 7: big-domain routing."""
        self.shown(
            BIG_DOMAIN,
            f"7 · Big-domain routing: {BIG_DOMAIN[1]!r} with context {BIG_DOMAIN[2]!r}",
            lambda f: (
                f"The query's terms are scored against 14 big domains; the top one "
                f"({f.big_domain}) routes the search to all of its buckets ({', '.join(f.buckets)})."
            ),
        )

    def verify(self, judged: list[SearchResult]) -> tuple[str, dict[str, Any], float]:
        """Step 8: confirm an ACCEPT node; returns its id, the history entry and the new confidence."""
        target = next(r for r in judged if r.state == "ACCEPT")
        node = self.store.verify(target.id, EVIDENCE, "confirmed")
        history = node.verification_history[-1]
        self.out.step(
            f"8 · verify({target.id!r}, verdict='confirmed')",
            "External evidence moves confidence: confirmed +0.05, weakened -0.10 "
            "(counter-evidence weighs more), falsified moves the node to rejected/. "
            "The verdict joins the node's verification_history in its file.",
        )
        rel = self.store.path_of(target.id).relative_to(self.store.root)
        self.out.line(
            f"confidence {history['confidence_before']:g} -> {node.confidence:g} · {escape(str(rel))}"
        )
        return target.id, history, float(node.confidence or 0.0)

    def reflect(self, judged: list[SearchResult], rejected: list[SearchResult]) -> tuple[dict[str, Any], ...]:
        """Step 9: the information gap of steps 5 and 5b."""
        first = self.store.reflect(JUDGED[1], judged)
        second = self.store.reflect(REJECTED[1], rejected)
        self.out.step(
            "9 · reflect: the information gap",
            "D = 1 - ACCEPT rate of a search's results, recorded with its change dD/dt "
            "over the reflection log. The context of step 5b pushed D up.",
        )
        table = Table("t", "query", "D", "dD/dt", "states")
        for rec in (first, second):
            table.add_row(
                str(rec.t),
                escape(rec.query),
                f"{rec.d:.3f}",
                f"{rec.dd:+.3f}",
                escape(", ".join(f"{k} {v}" for k, v in rec.states.items())),
            )
        self.out.print(table)
        return first.to_dict(), second.to_dict()

    def health(self) -> HealthReport:
        """Step 10: one consistency check."""
        report = self.store.health()
        self.out.step(
            "10 · health()",
            "One consistency check: unreadable files, index/file drift, duplicate ids, temp "
            "files, dangling edges, degraded buckets. The sample deliberately carries edges "
            "whose targets were never in the source database; health reports them.",
        )
        self.out.print(health_table(report, width=self.out.width))
        return report


def _migrate_step(root: Path, out: _Out, show_progress: bool) -> MigrationReport:
    """Step 1: the sample through the real migration, verified field by field."""
    with _migration_bar(show_progress) as progress:
        report = migrate(bundled_sample_path(), root, progress=progress)
    out.line(f"[bold]md-cg demo[/] · store folder: {escape(str(root.absolute()))}")
    out.step(
        "1 · Migrate the bundled sample (sqlite -> Markdown files)",
        "md_cg.migrate reads the sample database read-only, writes one .md file per node "
        "through the store's batch API (knowledge nodes go to condition-bucket folders), then "
        "reads every node back and compares every field and edge with its source row.",
    )
    out.print(_migration_table(report))
    return report


def run_demo(
    dest: str | os.PathLike[str], console: Console | None = None, *, show_progress: bool = False
) -> DemoSummary:
    """Build a store in ``dest`` from the bundled sample and run the tour.

    Prints each step to ``console`` (nothing when ``None``); ``show_progress``
    shows a transient progress bar on stderr during the migration. Returns
    the measured facts. Raises :class:`~md_cg.errors.MdcgError` if the
    migration cannot run (for example ``dest`` is a non-empty folder that is
    no md-cg store).
    """
    started = time.perf_counter()
    out = _Out(console)
    root = Path(dest)
    report = _migrate_step(root, out, show_progress)
    with MdCG(root) as store:
        tour = _Tour(store, out, {})
        tour.ladder()
        judged, rejected = tour.judge()
        covered = tour.negatives()
        tour.big_domain()
        verified_id, history, confidence = tour.verify(judged)
        reflections = tour.reflect(judged, rejected)
        report_h = tour.health()
        nodes = len(store)
    seconds = time.perf_counter() - started
    out.print()
    out.line(
        f"[bold]done[/] in {seconds:.2f} s. Try: mdcg --root {escape(str(root))} search 二分查找 "
        "--context 计算机科学"
    )
    return DemoSummary(
        dest=str(root),
        source=str(bundled_sample_path()),
        migration_ok=report.ok,
        rows=report.rows,
        migrated=report.migrated,
        mismatches=len(report.mismatches),
        bad_rows=len(report.bad_rows),
        layers={k: v for k, v in report.layers.items() if v},
        buckets=len(report.buckets),
        searches=tour.searches,
        covered_neg=covered,
        verified_id=verified_id,
        confidence_before=float(history["confidence_before"]),
        confidence_after=confidence,
        reflections=reflections,
        health_ok=report_h.ok,
        health_findings=dict(sorted(Counter(f.kind for f in report_h.findings).items())),
        nodes=nodes,
        seconds=round(seconds, 3),
    )
