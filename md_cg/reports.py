"""Typed results of the maintenance calls: sync, health, rebuild and compaction.

Plain frozen dataclasses with ``to_dict()`` for JSON output. Imports nothing
from the package but :mod:`md_cg.routing` (for the bucket-health figures).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .node import Node
from .routing import BucketHealth

#: Finding kinds, with the severity each has.
FINDING_KINDS: dict[str, str] = {
    "unreadable_file": "error",  # a .md file that does not parse as a node
    "missing_file": "error",  # the index has a node whose file is gone
    "untracked_file": "warning",  # a node file the index does not know (run sync)
    "changed_file": "warning",  # a file edited since it was indexed (run sync)
    "duplicate_id": "error",  # one id, several files (sync keeps one)
    "temp_file": "warning",  # a leftover temp file (sync removes it)
    "misplaced_file": "warning",  # a file outside the folder its frontmatter implies
    "stray_file": "warning",  # a node file outside the layer folders (md-cg does not read it)
    "dangling_edge": "warning",  # an edge whose target is not in the store
    "self_edge": "warning",  # an edge from a node to itself (imported or hand-edited; neighbours skips it)
    "bucket_degraded": "warning",  # condition buckets no longer route well
    "log_damage": "warning",  # unreadable lines or unusable records in the index log
    "unsafe_path": "error",  # a symlink, special file or bad name below the root (never followed)
    "twin_id": "error",  # ids that differ only by case/normalisation (collide on macOS/Windows)
    "reserved_id": "warning",  # an id Windows reserves for a device (con, nul, com1...): no clone there
    "odd_space_id": "warning",  # an id holding a space other than U+0020 (kp\u00a01 reads kp 1): rename it
    "open_commit": "warning",  # a write interrupted by a crash; sync() finishes it
    "synonyms_file": "warning",  # the store's synonyms.json is unusable; the shipped table is used
    "retention_file": "error",  # retention.json (writes that decide fail) or retention_markers.json unusable
    "content_drift": "error",  # health(deep=True): an entry differs from its file's content
    "text_drift": "error",  # health(deep=True): the text index differs from the file's text
    "access_unrecorded": "warning",  # accesses could not be recorded (read-only folder)
    # a temporary node past its expiry, hidden from reads; a sweep removes it unless other
    # files hold its id
    "expired": "warning",
    "forgotten_returned": "warning",  # a node forgotten in this clone whose file git brought back
    "renamed_returned": "warning",  # an id renamed in this clone whose old file git brought back
    "tracked_state": "warning",  # git tracks files of .mdcg/ that are each clone's own state (session 43)
    "merge_conflict": "error",  # a git merge left both versions in the file (docs/git.md)
    "supersede_cycle": "error",  # memories superseding each other (two clones' supersedes): search hides all
    "closed_orphan": "warning",  # closed by a supersede whose successors are archived/expired
    "renamed_twin": "warning",  # a memory under an id and under the id another clone renamed it to
    "rename_interrupted": "warning",  # a crash cut a rename short and its old file was edited: both ids kept
    # a scoped handle's: problems about files it is not told of (their owner cannot be told)
    "withheld": "warning",
}


@dataclass(frozen=True)
class Finding:
    """One problem found by :meth:`MdCG.health`.

    ``kind`` is a key of :data:`FINDING_KINDS`; ``path`` (relative to the
    store root) and ``node_id`` name what it concerns; ``detail`` says what is
    wrong and how to fix it.
    """

    kind: str
    detail: str
    path: str | None = None
    node_id: str | None = None

    @property
    def severity(self) -> str:
        return FINDING_KINDS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "severity": self.severity}


#: Finding kinds that advise, never fail ``HealthReport.ok``: nothing is wrong with a memory
#: or a file (``bucket_degraded``: searches scan more than they could; session 43).
ADVISORY_KINDS = frozenset({"bucket_degraded"})


@dataclass(frozen=True)
class HealthReport:
    """What :meth:`MdCG.health` found. ``ok`` is True when there is no finding but advice
    (:data:`ADVISORY_KINDS`)."""

    layers: dict[str, int]
    nodes: int
    buckets: BucketHealth
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return all(f.kind in ADVISORY_KINDS for f in self.findings)

    def by_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "nodes": self.nodes,
            "layers": dict(self.layers),
            "buckets": asdict(self.buckets),
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class Moved:
    node_id: str
    old_path: str
    new_path: str


@dataclass(frozen=True)
class SyncReport:
    """What :meth:`MdCG.sync` found and did. Lists are sorted for stable output."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    moved: tuple[Moved, ...] = ()
    malformed: tuple[tuple[str, str], ...] = ()  # (path, reason)
    duplicates: tuple[tuple[str, str], ...] = ()  # (id, path of a losing copy): reported, never moved
    refused: tuple[tuple[str, str], ...] = ()  # (path, reason): symlinks and the like, never followed
    twins: tuple[tuple[str, ...], ...] = ()  # ids colliding on case-insensitive file systems
    conflicts: tuple[tuple[str, str], ...] = ()  # (id, path): git merge conflicts left to resolve
    #: (id, path) of each memory forgotten in this clone whose file this sync took in
    #: again (a merge kept another clone's edit of it): forget it again, or keep it
    returned: tuple[tuple[str, str], ...] = ()
    recovered: int = 0  # interrupted commits closed: rolled forward, or back (``undone``)
    temp_removed: tuple[str, ...] = ()
    #: of ``recovered``, the commits rolled back: a temp file torn or missing
    #: (a power cut before it was written back) and none of its files landed -- or, in a
    #: copy of the store, none landed and a file of it is not the one logged (its ids in
    #: ``left_as_edited``: :func:`md_cg.journal.roll_forward`)
    undone: int = 0
    #: ids whose part of an interrupted write was left undone: a file of theirs changed
    #: after the write was logged (a hand edit since the crash), and it stands
    left_as_edited: tuple[str, ...] = ()
    #: (id, path) of each file removed finishing an interrupted delete (a ``forget`` whose
    #: process died after logging it): the memory is gone
    finished_deletes: tuple[tuple[str, str], ...] = ()
    #: (id, path) of each delete of an interrupted write not done because the file at the
    #: path does not hold that id (another memory's file, or unreadable): a line naming
    #: another memory's path (forged, or from a copied ``.mdcg/``); the file is kept
    foreign_deletes: tuple[tuple[str, str], ...] = ()
    #: (id, path) of each old file removed finishing an interrupted write that put other
    #: files (a ``rename`` whose process died after logging it): the memory lives on under
    #: its new id
    old_files_removed: tuple[tuple[str, str], ...] = ()
    #: a scoped handle's: how many malformed files, refused paths, duplicate copies and
    #: twin ids (each id of a pair, as ``health`` counts them) it is not told of (any of
    #: them may be another scope's)
    withheld: int = 0
    #: (path, problem) of each committed settings file (``.mdcg/synonyms.json``,
    #: ``retention.json``, ``retention_markers.json``) md-cg cannot use: git conflict
    #: markers a merge left, invalid JSON, a bad value
    settings: tuple[tuple[str, str], ...] = ()
    #: (id, path) of each memory search hides with no current version, as two clones' writes
    #: merged leave it: a supersedes cycle (``health()``'s ``supersede_cycle`` says what to do)
    hidden: tuple[tuple[str, str], ...] = ()

    @property
    def clean(self) -> bool:
        """True when the index already matched the files."""
        return not any(
            (
                self.added,
                self.changed,
                self.deleted,
                self.moved,
                self.malformed,
                self.duplicates,
                self.refused,
                self.twins,
                self.recovered,
                self.temp_removed,
                self.withheld,
            )
        )

    @property
    def problems(self) -> bool:
        """True when something needs a person: malformed files, duplicates, twins, refused
        paths, unresolved merge conflicts (also those withheld from a scoped handle), forgotten
        memories back, settings files it cannot use, memories hidden with no current version,
        deletes of an interrupted write not done as the file holds another memory (or cannot be read)."""
        return bool(
            self.malformed
            or self.duplicates
            or self.refused
            or self.twins
            or self.conflicts
            or self.withheld
            or self.returned
            or self.settings
            or self.hidden
            or self.foreign_deletes
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["malformed"] = [{"path": p, "reason": r} for p, r in self.malformed]
        d["duplicates"] = [{"id": i, "path": p} for i, p in self.duplicates]
        d["refused"] = [{"path": p, "reason": r} for p, r in self.refused]
        d["twins"] = [list(t) for t in self.twins]
        d["conflicts"] = [{"id": i, "path": p} for i, p in self.conflicts]
        d["returned"] = [{"id": i, "path": p} for i, p in self.returned]
        d["settings"] = [{"path": p, "problem": r} for p, r in self.settings]
        d["hidden"] = [{"id": i, "path": p} for i, p in self.hidden]
        d["finished_deletes"] = [{"id": i, "path": p} for i, p in self.finished_deletes]
        d["foreign_deletes"] = [{"id": i, "path": p} for i, p in self.foreign_deletes]
        d["old_files_removed"] = [{"id": i, "path": p} for i, p in self.old_files_removed]
        return d


@dataclass(frozen=True)
class Deleted:
    """Result of ``delete``/``forget``: the removed node and the edges left dangling.

    ``left_closed``: the memories the removed node superseded that stay closed
    (hidden from search as superseded) until reopened -- ``update(id, valid_until=None)``
    if the removed node was their only successor and they are still true.
    ``copies``: the other files of its id removed with it (a ``cp``, a merge that
    left two copies), which the next sync would otherwise have brought back."""

    node: Node
    incoming: tuple[tuple[str, str], ...]
    left_closed: tuple[str, ...] = ()
    copies: tuple[str, ...] = ()


@dataclass(frozen=True)
class MaintenanceReport:
    """Result of :meth:`MdCG.rebuild_index` / :meth:`MdCG.compact_index`."""

    nodes: int
    shards_before: int
    shards_removed: tuple[str, ...]
    shards_kept: tuple[str, ...]
    snapshot_bytes: int
    seconds: float
    problems: tuple[tuple[str, str], ...] = field(default=())
    #: a scoped handle's count of the ``problems`` it is not named (:func:`scoped_maintenance`)
    withheld: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def scoped_maintenance(report: MaintenanceReport, scope: object) -> MaintenanceReport:
    """What a handle of ``scope`` (None: unscoped, told all) is told of a compaction or
    rebuild: the files the index could not take in (``problems``: malformed, refused) are
    counted in ``withheld``, not named -- their owner cannot be told, as :func:`scoped_sync`
    withholds them (attack atk12 of session 43, F5: agent a's ``compact_index()`` named
    agent b's broken copy and quoted its YAML error)."""
    if scope is None:
        return report
    return replace(report, problems=(), withheld=report.withheld + len(report.problems))


def scoped_sync(report: SyncReport, seen: Callable[[str], bool]) -> SyncReport:
    """What a scoped handle is told of a sync: only the ids it sees after it, and
    nothing about files whose owner cannot be told (malformed, refused, temp files, the
    losing copy of a duplicate id, twins): another scope's ids and file names are never
    named. ``deleted`` is kept as the sync gave it, but for an id seen again (put back
    meanwhile): a scoped sync (:func:`md_cg.maintenance.sync` with the scope) lists only
    the deletions of nodes its scope held before -- a node gone is seen by no one after,
    so filtering them by ``seen`` named no deletion to a scope at all."""

    def ids(items: Iterable[str]) -> tuple[str, ...]:
        return tuple(i for i in items if seen(i))

    return replace(
        report,
        added=ids(report.added),
        changed=ids(report.changed),
        deleted=tuple(i for i in report.deleted if not seen(i)),
        moved=tuple(m for m in report.moved if seen(m.node_id)),
        malformed=(),
        duplicates=(),
        refused=(),
        twins=(),
        conflicts=tuple(c for c in report.conflicts if seen(c[0])),
        returned=tuple(r for r in report.returned if seen(r[0])),
        hidden=tuple(r for r in report.hidden if seen(r[0])),
        left_as_edited=ids(report.left_as_edited),
        finished_deletes=tuple(r for r in report.finished_deletes if seen(r[0])),
        old_files_removed=tuple(r for r in report.old_files_removed if seen(r[0])),
        foreign_deletes=(),
        temp_removed=(),
        withheld=report.withheld
        + len(report.malformed)
        + len(report.duplicates)
        + len(report.refused)
        + sum(len(t) for t in report.twins)  # each twin id, as health counts its twin_id findings
        + len(report.foreign_deletes)
        + sum(1 for c in report.conflicts if not seen(c[0])),
    )


def scoped_pickup(report: SyncReport, seen: Callable[[str], bool]) -> SyncReport | None:
    """:func:`scoped_sync` of a pick-up of hand edits, None when nothing is left to tell
    (only other scopes' files changed: that they did is not told either)."""
    told = scoped_sync(report, seen)
    return None if told.clean and not told.conflicts else told


def scoped_health(report: HealthReport, seen: Callable[[str], bool]) -> HealthReport:
    """The findings a scoped handle is told: those about nodes it sees, and those about
    the store as a whole (no node, no path); a file whose owner cannot be told is not named
    -- an ``unreadable_file`` never, whatever id it names: its scope fields cannot be read
    (a hand edit may have narrowed it to other agents), and a broken file may name any id,
    one the handle sees too (session 39 filled the finding's node)."""
    # name another file or id, whose owner cannot be told; or quote such a file
    told = ("duplicate_id", "twin_id", "unreadable_file")
    findings = [
        f
        for f in report.findings
        if f.kind not in told
        and ((f.node_id is not None and seen(f.node_id)) or (f.node_id is None and f.path is None))
    ]
    # Not told what or where, but that there is something a person should look at.
    withheld = sum(1 for f in report.findings if f.kind in WITHHELD_KINDS) - sum(
        1 for f in findings if f.kind in WITHHELD_KINDS
    )
    if withheld:
        findings.append(Finding("withheld", WITHHELD_NOTE.format(n=withheld), None, None))
    return replace(report, findings=tuple(findings))


#: Findings about files that a scoped handle is counted, not told (:func:`scoped_health`).
WITHHELD_KINDS = frozenset(
    [
        "unreadable_file",
        "duplicate_id",
        "twin_id",
        "unsafe_path",
        "stray_file",
        "merge_conflict",
        # a file the index does not know, whose id no memory in the scope holds: it may be
        # the scope's own memory (a copy under an id another scope's memory held), r2
        "untracked_file",
    ]
)
WITHHELD_NOTE = "{n} file problem(s) not named to this scope: run `mdcg health` without a scope"
