"""What hand edits a long-running handle took in since its last full sync, net.

A long-running process (the MCP server) picks up hand edits before every call
(:meth:`md_cg.MdCG.sync_if_changed`), so by the time an agent asks ``sync``
what changed, the files are already in the index and a sync of its own finds
nothing. :class:`PickUps` keeps what those pick-ups took in and tells it, net,
when asked:

* an id is told by what it was before its first pick-up since the last
  :meth:`PickUps.take` (absent, or at a path) and what the handle sees now:
  ``added`` (absent then, there now), ``deleted`` (there then, gone now),
  ``moved`` (at another path), ``changed``; absent then and now is not told
  (a file added by hand and deleted again, or forgotten through the server);
* an id is told only while the handle sees it as the last pick-up left it: a
  write since (the server's own ``update``/``forget``/``remember``, another
  program's) is something the caller knows of or a hand edit did not make, so
  the id is left out;
* what the handle sees is the caller's ``look`` (a scoped handle sees only its
  scope): an id that left the scope since its pick-up is not named, and a scoped
  pick-up reports the deletions of the nodes its scope held
  (:func:`md_cg.reports.scoped_sync`).

Imports only the report and index types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .index import Entry
from .reports import Moved, SyncReport

#: ``look(id)``: the entry the handle sees now, None when it does not see the id.
Look = Callable[[str], Entry | None]


class PickUps:
    """The net of the pick-ups of hand edits since the last :meth:`take` (module docstring)."""

    def __init__(self, look: Look) -> None:
        self._look = look
        #: id -> its path before its first pick-up since the last take ("" when only
        #: known to be there: a deletion names no path), None when it was absent
        self._before: dict[str, str | None] = {}
        #: id -> the entry its last pick-up left (None: deleted)
        self._after: dict[str, Entry | None] = {}

    def __len__(self) -> int:
        return len(self._before)

    def note(self, report: SyncReport | None) -> None:
        """Keep what one pick-up (or sync) ``report`` took in."""
        if report is None:
            return
        after = {i: self._look(i) for i in (*report.added, *report.changed, *report.deleted)}
        after.update((m.node_id, self._look(m.node_id)) for m in report.moved)
        before: dict[str, str | None] = {i: None for i in report.added}
        for node_id in report.changed:  # edited in place: where it is now is where it was
            e = after[node_id]
            before[node_id] = e.path if e is not None else ""
        before.update((i, "") for i in report.deleted)
        before.update((m.node_id, m.old_path) for m in report.moved)
        for node_id, was in before.items():
            self._before.setdefault(node_id, was)
            self._after[node_id] = after[node_id]

    def take(self, report: SyncReport) -> SyncReport:
        """``report`` (a sync's, already :meth:`note`-d) with its added, changed, deleted
        and moved lists replaced by the net of every pick-up since the last take; starts
        over."""
        added: list[str] = []
        changed: list[str] = []
        deleted: list[str] = []
        moved: list[Moved] = []
        for node_id, was in self._before.items():
            now = self._look(node_id)
            if now != self._after[node_id]:
                continue  # written since its pick-up: not (only) a hand edit
            if now is None:
                if was is not None:
                    deleted.append(node_id)
            elif was is None:
                added.append(node_id)
            elif was and was != now.path:
                moved.append(Moved(node_id, was, now.path))
            else:
                changed.append(node_id)
        self._before.clear()
        self._after.clear()
        return replace(
            report,
            added=tuple(sorted(added)),
            changed=tuple(sorted(changed)),
            deleted=tuple(sorted(deleted)),
            moved=tuple(sorted(moved, key=lambda m: m.node_id)),
        )
