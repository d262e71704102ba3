"""``mdcg demo``: a guided tour of md-cg on the bundled sample database.

:func:`run_demo` builds a store from the shipped sqlite slice
(:func:`md_cg.sample.bundled_sample_path`, 226 nodes) through the real
migration path (:func:`md_cg.migrate.migrate`, full field-by-field
verification), then runs the searches that show what the engine does:

1. migration and its verification (0 mismatches);
2. a routed search: a context with a domain sends the query to one condition
   bucket (tier T0), reading a fraction of the store;
3. the same query without context: the global ladder (tier T2);
4. a query no node contains: the similarity fallback (tier T3);
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

The rich renderers :func:`results_table`, :func:`meta_summary` and
:func:`health_table` are shared with the command line.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table

from .errors import MdcgError
from .judge import STATES
from .migrate import MigrationReport, migrate
from .reports import HealthReport
from .sample import bundled_sample_path
from .search import TIERS, SearchResult
from .store import MdCG

#: The searches of the tour: (key, query, context, k). Chosen for the bundled sample.
ROUTED = ("routed", "二分查找", "计算机科学", 5)
UNROUTED = ("unrouted", "二分查找", None, 5)
FALLBACK = ("fallback", "xyzzy plugh", None, 3)
JUDGED = ("judged", "牛顿第二定律", None, 6)
REJECTED = ("rejected", "牛顿第二定律", {"domain": "物理学", "situation": "接近光速的高速运动"}, 6)
BIG_DOMAIN = ("big_domain", "能量守恒", {"big_domain": "auto"}, 3)
#: Evidence the tour applies with ``verify``.
EVIDENCE = "re-measured on an air track: a = F/m within 1% over 12 runs"

_STATE_STYLE = {"ACCEPT": "green", "REJECT": "red", "DEFER": "yellow", "BLINDSPOT": "magenta"}


class DemoError(MdcgError):
    """The demo cannot run in the folder it was given."""


@dataclass(frozen=True)
class Hit:
    """One search result as the demo shows it."""

    id: str
    tier: str
    state: str | None
    score: float
    layer: str
    title: str


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


# -- shared renderers ---------------------------------------------------------------


def _state_cell(state: str | None) -> str:
    if state is None:
        return "-"
    return f"[{_STATE_STYLE.get(state, 'white')}]{state}[/]"


def results_table(results: Sequence[SearchResult], *, basis: bool = False) -> Table:
    """A table of search results: rank, tier, state, score, id and title (with ``basis`` under it)."""
    rows = [(str(i), r.tier, r.state or "-", f"{r.score:.2f}", r.id, r) for i, r in enumerate(results, 1)]
    table = Table(show_lines=basis)
    for n, (name, justify) in enumerate(
        (("#", "right"), ("tier", "left"), ("state", "left"), ("score", "right"), ("id", "left"))
    ):
        width = max([len(name), *(len(row[n]) for row in rows)])
        table.add_column(name, justify=justify, no_wrap=True, min_width=width)  # type: ignore[arg-type]
    if basis:
        table.add_column("title / why", ratio=1, overflow="fold")
    else:
        table.add_column("title", ratio=1, overflow="ellipsis")
    for number, tier, _state, score, node_id, r in rows:
        title = escape(_clip(r.title, 60))
        if basis:
            title += f"\n[dim]{escape(r.basis or '')}[/]"
        table.add_row(number, tier, _state_cell(r.state), score, node_id, title)
    return table


def meta_summary(meta: dict[str, Any]) -> str:
    """One line summing up a search's ``meta``: how deep, where, how much, how long."""
    buckets = ", ".join(meta.get("buckets") or []) or "none"
    routed = " (routed)" if meta.get("routed") else ""
    scanned, size = meta.get("scanned", 0), meta.get("store_size", 0)
    share = meta.get("scanned_share", 0.0)
    neg = ", ".join(meta.get("covered_neg") or []) or "none"
    total = (meta.get("timing_ms") or {}).get("total", 0.0)
    return escape(
        f"deepest tier {meta.get('tier')} · buckets: {buckets}{routed} · "
        f"scanned {scanned}/{size} ({share:.1%}) · big domain: {meta.get('big_domain') or 'none'} · "
        f"covered_neg: {neg} · {total:.1f} ms"
    )


def health_table(report: HealthReport) -> Group:
    """A one-line verdict of a health check, then a table of its findings (if any)."""
    b = report.buckets
    verdict = "OK" if report.ok else f"{len(report.findings)} finding(s)"
    layers = ", ".join(f"{k} {v}" for k, v in report.layers.items() if v)
    line = (
        f"health: {verdict} · {report.nodes} nodes ({layers}) · {b.buckets} buckets, "
        f"largest {b.largest_share:.1%}, expected scan {b.expected_scan:.1%}"
    )
    if report.ok:
        return Group(escape(line))
    table = Table()
    table.add_column("severity", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("node", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for f in report.findings:
        where = f" ({f.path})" if f.path else ""
        table.add_row(f.severity, f.kind, f.node_id or "", escape(f.detail + where))
    return Group(escape(line), table)


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


def _facts(
    store: MdCG, spec: tuple[str, str, Any, int]
) -> tuple[SearchFacts, list[SearchResult], dict[str, Any]]:
    _key, query, context, k = spec
    results, meta = store.search(query, k=k, context=context, record=False)
    hits = tuple(Hit(r.id, r.tier, r.state, round(r.score, 4), r.entry.layer, r.title) for r in results)
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
    return facts, results, meta


def _migration_table(report: MigrationReport) -> Table:
    table = Table("figure", "value", show_header=False)
    table.add_row("source rows", str(report.rows))
    table.add_row("migrated (good rows)", str(report.migrated))
    table.add_row(
        "created / updated / unchanged", f"{report.created} / {report.updated} / {report.unchanged}"
    )
    table.add_row("bad rows", str(len(report.bad_rows)))
    table.add_row("verified field by field", str(report.verified))
    table.add_row("mismatches", f"[bold]{len(report.mismatches)}[/]")
    table.add_row("layers", escape(", ".join(f"{k} {v}" for k, v in report.layers.items() if v)))
    table.add_row("knowledge buckets", str(len(report.buckets)))
    table.add_row("time", f"{report.seconds:.2f} s")
    return table


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
    source = bundled_sample_path()
    root = Path(dest)
    with _migration_bar(show_progress) as progress:
        report = migrate(source, root, progress=progress)
    out.line(f"[bold]md-cg demo[/] · store folder: {escape(str(root.absolute()))}")
    out.step(
        "1 · Migrate the bundled sample (sqlite -> Markdown files)",
        "md_cg.migrate reads the sample database read-only, writes one .md file per node "
        "through the store's batch API (knowledge nodes go to condition-bucket folders), then "
        "reads every node back and compares every field and edge with its source row.",
    )
    out.print(_migration_table(report))

    searches: dict[str, SearchFacts] = {}
    with MdCG(root) as store:
        facts, results, meta = _facts(store, ROUTED)
        searches["routed"] = facts
        out.step(
            f"2 · Routed search: {ROUTED[1]!r} with context {ROUTED[2]!r}",
            "A context naming a domain routes the query to that domain's condition bucket: "
            f"tier T0 matched terms inside {len(facts.buckets)} bucket, reading {facts.scanned} "
            f"of {facts.store_size} nodes. Routing is an opt-in accelerator, never a filter.",
        )
        out.print(results_table(results))
        out.print(meta_summary(meta))

        facts, results, meta = _facts(store, UNROUTED)
        searches["unrouted"] = facts
        out.step(
            f"3 · No context: {UNROUTED[1]!r}",
            "Without a context the engine guesses nothing: the global ladder goes straight to "
            f"T2, a BM25 term match over the whole store ({facts.scanned} nodes).",
        )
        out.print(results_table(results))
        out.print(meta_summary(meta))

        facts, results, meta = _facts(store, FALLBACK)
        searches["fallback"] = facts
        out.step(
            f"4 · Fallback: {FALLBACK[1]!r} (no node contains these words)",
            "When term matching finds fewer than k results, T3 ranks the whole store by "
            "character-bigram similarity: a non-empty store never answers empty. The scores "
            "say how weak these hits are, and the judge still qualifies each one.",
        )
        out.print(results_table(results))
        out.print(meta_summary(meta))

        judged, judged_results, _ = _facts(store, JUDGED)
        searches["judged"] = judged
        out.step(
            f"5 · Qualification judge: {JUDGED[1]!r}",
            "Tier says how a node was found; state says whether it may be used. ACCEPT: "
            "complete CCG annotation, no not-applicable condition hit, verification basis "
            "declared. DEFER: complete but unverified, keep looking. BLINDSPOT: annotation "
            "incomplete, attribution cannot be established.",
        )
        out.print(results_table(judged_results, basis=True))
        rejected, rejected_results, _ = _facts(store, REJECTED)
        searches["rejected"] = rejected
        out.step(
            f"5b · Same query, context {REJECTED[2]!r}",
            "The context hits a not-applicable condition of the Newton's-second-law notes: "
            "they are now REJECT (do not act on them), whatever their rank or tier.",
        )
        out.print(results_table(rejected_results, basis=True))

        covered = judged.covered_neg
        out.step(
            "6 · Negative memory: covered_neg",
            "The same query also matches entries of rejected/ (falsified hypotheses) and "
            "unresolved/ (open questions). Search never ranks them as answers; it reports "
            "them in meta['covered_neg'] so the agent does not repeat a known mistake.",
        )
        neg_table = Table()
        neg_table.add_column("id", no_wrap=True, min_width=max(map(len, covered), default=2))
        neg_table.add_column("layer", no_wrap=True, min_width=10)
        neg_table.add_column("first line", ratio=1, overflow="ellipsis")
        for node_id in covered:
            node = store.get(node_id)
            neg_table.add_row(node_id, node.layer, escape(_clip(_first_line(node.body), 60)))
        out.print(neg_table)

        facts, results, meta = _facts(store, BIG_DOMAIN)
        searches["big_domain"] = facts
        out.step(
            f"7 · Big-domain routing: {BIG_DOMAIN[1]!r} with context {BIG_DOMAIN[2]!r}",
            f"The query's terms are scored against 14 big domains; the top one ({facts.big_domain}) "
            f"routes the search to all of its buckets ({', '.join(facts.buckets)}).",
        )
        out.print(results_table(results))
        out.print(meta_summary(meta))

        target = next(r for r in judged_results if r.state == "ACCEPT")
        node = store.verify(target.id, EVIDENCE, "confirmed")
        history = node.verification_history[-1]
        out.step(
            f"8 · verify({target.id!r}, verdict='confirmed')",
            "External evidence moves confidence: confirmed +0.05, weakened -0.10 "
            "(counter-evidence weighs more), falsified moves the node to rejected/. "
            "The verdict joins the node's verification_history in its file.",
        )
        out.line(
            f"confidence {history['confidence_before']:g} -> {node.confidence:g} · "
            f"{escape(str(store.path_of(target.id).relative_to(store.root)))}"
        )

        first = store.reflect(JUDGED[1], judged_results)
        second = store.reflect(REJECTED[1], rejected_results)
        out.step(
            "9 · reflect: the information gap",
            "D = 1 - ACCEPT rate of a search's results, recorded with its change dD/dt "
            "over the reflection log. The context of step 5b pushed D up.",
        )
        ref_table = Table("t", "query", "D", "dD/dt", "states")
        for rec in (first, second):
            ref_table.add_row(
                str(rec.t),
                escape(rec.query),
                f"{rec.d:.3f}",
                f"{rec.dd:+.3f}",
                escape(", ".join(f"{k} {v}" for k, v in rec.states.items())),
            )
        out.print(ref_table)

        report_h = store.health()
        out.step(
            "10 · health()",
            "One consistency check: unreadable files, index/file drift, duplicate ids, temp "
            "files, dangling edges, degraded buckets. The sample deliberately carries edges "
            "whose targets were never in the source database; health reports them.",
        )
        out.print(health_table(report_h))
        nodes = len(store)

    seconds = time.perf_counter() - started
    out.print()
    out.line(
        f"[bold]done[/] in {seconds:.2f} s. Try: mdcg --root {escape(str(root))} search 二分查找 "
        "--context 计算机科学"
    )
    return DemoSummary(
        dest=str(root),
        source=str(source),
        migration_ok=report.ok,
        rows=report.rows,
        migrated=report.migrated,
        mismatches=len(report.mismatches),
        bad_rows=len(report.bad_rows),
        layers={k: v for k, v in report.layers.items() if v},
        buckets=len(report.buckets),
        searches=searches,
        covered_neg=covered,
        verified_id=target.id,
        confidence_before=float(history["confidence_before"]),
        confidence_after=float(history["confidence_after"]),
        reflections=(first.to_dict(), second.to_dict()),
        health_ok=report_h.ok,
        health_findings=dict(sorted(Counter(f.kind for f in report_h.findings).items())),
        nodes=nodes,
        seconds=round(seconds, 3),
    )


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
