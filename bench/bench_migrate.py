"""Migration throughput on the full sample, beside its floors, measured in the same run.

``python bench/bench_migrate.py [--repeat N] [--batch N] [--knowledge N] [--out FILE]``

Generates the seed-shaped sample (:func:`md_cg.sample.generate`, 3,048
knowledge nodes + the other layers by default) in a temporary folder, then
times, each ``--repeat`` times into a fresh destination (median reported):

* ``migrate`` -- :func:`md_cg.migrate.migrate` end to end (read, convert,
  write through ``add_many``, compact, verify every node field by field),
  non-durable and ``durable=True``; the write pass alone is shown too;
* ``migrate again`` -- the idempotent re-run over the migrated store (nothing
  written, everything verified);
* ``sqlite read + convert`` -- :func:`md_cg.sqlite_source.iter_rows` alone;
* ``raw floor`` -- the same file bytes (prepared before the clock starts)
  written with a temp file + ``os.replace``, non-durable and durable (fsync of
  each file, and of each folder once per batch, as the engine does);
* ``sqlite -> sqlite`` -- a plain copy of the same ``nodes`` and ``edges`` rows
  into a new database file, one transaction, default settings.

Prints a Markdown table (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from md_cg import layout, nodefile
from md_cg.migrate import migrate
from md_cg.sample import generate
from md_cg.sqlite_source import iter_rows, open_readonly


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _time(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _prepared_files(src: Path) -> list[tuple[str, bytes]]:
    conn = open_readonly(src)
    try:
        nodes = [r.node for r in iter_rows(conn) if r.node is not None]
    finally:
        conn.close()
    return [(layout.rel_path(n), nodefile.dumps(n).encode("utf-8")) for n in nodes]


def raw_write(root: Path, files: list[tuple[str, bytes]], *, durable: bool, batch: int) -> None:
    """Write every file with a unique temp file + ``os.replace`` (the floor of any engine)."""
    made: set[Path] = set()
    for start in range(0, len(files), batch):
        dirs: set[Path] = set()
        for rel, data in files[start : start + batch]:
            target = root / rel
            folder = target.parent
            if folder not in made:
                folder.mkdir(parents=True, exist_ok=True)
                made.add(folder)
            tmp = folder / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, data)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
            dirs.add(folder)
        if durable:
            for folder in dirs:
                fd = os.open(folder, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)


def sqlite_copy(src: Path, dest: Path) -> int:
    """Copy the ``nodes`` and ``edges`` rows into a new database; return the node rows."""
    source = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(dest)
    try:
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE name IN ('nodes', 'edges') AND type = 'table'"
        ):
            target.execute(sql)
        with target:
            node_rows = source.execute("SELECT * FROM nodes").fetchall()
            marks = ", ".join("?" for _ in node_rows[0]) if node_rows else ""
            target.executemany(f"INSERT INTO nodes VALUES ({marks})", node_rows)
            edge_rows = source.execute("SELECT * FROM edges").fetchall()
            if edge_rows:
                marks = ", ".join("?" for _ in edge_rows[0])
                target.executemany(f"INSERT INTO edges VALUES ({marks})", edge_rows)
        return len(node_rows)
    finally:
        source.close()
        target.close()


def run(repeat: int, batch: int, knowledge: int | None) -> tuple[str, dict[str, float]]:
    """Run every measurement; return the Markdown report and the medians (seconds)."""
    work = Path(tempfile.mkdtemp(prefix="bench_migrate_"))
    try:
        src = work / "full.sqlite"
        stats = generate(src, knowledge=knowledge)
        nodes = stats.nodes
        files = _prepared_files(src)
        samples: dict[str, list[float]] = {}

        def add(name: str, seconds: float) -> None:
            samples.setdefault(name, []).append(seconds)

        for i in range(repeat):
            for durable in (False, True):
                tag = "durable" if durable else "non-durable"
                dest = work / f"md_{tag}_{i}"
                report = migrate(src, dest, batch=batch, durable=durable)
                if not report.ok or report.migrated != nodes:
                    raise SystemExit(f"migration failed: {report.render()}")
                add(f"migrate, {tag}", report.seconds)
                add(f"  of which writing, {tag}", report.write_seconds)
                add(f"  of which verifying, {tag}", report.verify_seconds)
                if not durable:
                    again = migrate(src, dest, batch=batch)
                    if again.unchanged != nodes:
                        raise SystemExit("the re-run rewrote files")
                    add("migrate again (all unchanged), non-durable", again.seconds)
                shutil.rmtree(dest)

            def read_all() -> None:
                conn = open_readonly(src)
                try:
                    for _ in iter_rows(conn):
                        pass
                finally:
                    conn.close()

            add("sqlite read + convert (iter_rows)", _time(read_all))
            for durable in (False, True):
                tag = "durable" if durable else "non-durable"
                root = work / f"raw_{tag}_{i}"
                add(
                    f"raw floor (temp + os.replace), {tag}",
                    _time(lambda root=root, durable=durable: raw_write(
                        root, files, durable=durable, batch=batch
                    )),
                )
                shutil.rmtree(root)
            copy = work / f"copy_{i}.sqlite"
            add("sqlite -> sqlite copy (one transaction)", _time(lambda copy=copy: sqlite_copy(src, copy)))
            copy.unlink()
        medians = {name: _median(values) for name, values in samples.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    floor = medians["raw floor (temp + os.replace), non-durable"]
    floor_durable = medians["raw floor (temp + os.replace), durable"]
    lines = [
        f"Migration of the sample: {nodes:,} nodes ({stats.knowledge:,} knowledge), "
        f"{stats.edges:,} edges; batch {batch}; median of {repeat} run(s).",
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"Python {platform.python_version()}.",
        "",
        "| what | seconds | nodes/s | time vs raw floor (same durability) |",
        "|---|---:|---:|---:|",
    ]
    for name, seconds in medians.items():
        base = floor_durable if name.endswith(", durable") else floor
        # Only what writes the files compares with the floor.
        writes = not name.startswith("sqlite") and "verifying" not in name
        ratio = f"{seconds / base:.1f}×" if writes else "–"
        lines.append(
            f"| {name} | {seconds:.3f} | {nodes / seconds:,.0f} | {ratio} |"
        )
    return "\n".join(lines) + "\n", medians


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the benchmark, print the table, optionally write it to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--batch", type=int, default=500, help="nodes per group commit")
    parser.add_argument("--knowledge", type=int, default=None, help="knowledge nodes (default 3,048)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.batch < 1:
        parser.error("--repeat and --batch must be at least 1")
    table, _ = run(args.repeat, args.batch, args.knowledge)
    sys.stdout.write(table)
    if args.out is not None:
        args.out.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
