"""A real race of an editor's saves against md-cg's delete or forget of the memory, then its
re-add (session 43): how many acknowledged saves are lost, counted by content.

    python bench/deleterace.py --work /tmp/dr --op delete --n 1500
    PYTHONPATH=/path/to/other/version python bench/deleterace.py --work /dev/shm/dr --op forget

An editor process saves ``x`` about every half millisecond as an editor does: it reads the
file, adds a line ``HAND<k>`` of its own, writes a temp file and renames it over the path; a
save is acknowledged when that rename returned (a file gone meanwhile: no save). This
process meanwhile deletes (or forgets) ``x`` and adds it back, in a loop. A delete removes
the memory as md-cg read it, returned in its ``Deleted.node``: the lines of that body are
removed by the user's word. Every other acknowledged line must be in some ``.md`` file of
the store at the end -- at the path, or kept beside it as ``x.saved-<time>.md``. Printed:
one JSON line with the saves, the lines lost, the deletes done and refused
(``ChangedOnDiskError``: a save landed after md-cg read the file), the adds refused (a
file at the path: the editor's save made on a file read before the delete).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import md_cg
from md_cg import MdCG, Node

EDITOR = textwrap.dedent(
    """
    import os, sys, time
    path, n = sys.argv[1], int(sys.argv[2])
    print("go", flush=True)
    saved = []
    tmp = path + ".swp"
    def save(k):  # an editor's save: acknowledged once the rename returned
        text = open(path).read() + "HAND%d\\n" % k
        with open(tmp, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    for k in range(n):
        try:
            save(k)
        except OSError:
            pass  # the file (or its folder) gone meanwhile: no save
        else:
            saved.append(k)
        time.sleep(0.0005)
    print(" ".join(map(str, saved)), flush=True)
    """
)


def _lines(text: str) -> set[int]:
    return {int(line[4:]) for line in text.splitlines() if line.startswith("HAND") and line[4:].isdigit()}


def _remove(s: MdCG, op: str) -> str:
    if op == "forget":
        return s.forget("x", "race", force=True).node.body
    return s.delete("x", force=True).node.body


def race(root: Path, n: int, op: str) -> dict[str, object]:
    """The race in the store folder ``root`` (made anew); see the module docstring."""
    shutil.rmtree(root, ignore_errors=True)
    counts = {"deletes": 0, "refused": 0, "adds_refused": 0, "missing": 0}
    removed: set[int] = set()
    with MdCG(root) as s:
        s.add(Node(id="x", layer="knowledge", body="base"))
        path = s.path_of("x")
        proc = subprocess.Popen(
            [sys.executable, "-c", EDITOR, str(path), str(n)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "go\n"
        while proc.poll() is None:
            try:
                removed |= _lines(_remove(s, op))
                counts["deletes"] += 1
            except md_cg.ChangedOnDiskError:
                counts["refused"] += 1
                continue
            except md_cg.NodeNotFoundError:
                counts["missing"] += 1
                s.sync()
            try:
                s.add(Node(id="x", layer="knowledge", body="base"))
            except md_cg.MdcgError:
                counts["adds_refused"] += 1
                with contextlib.suppress(md_cg.MdcgError):
                    s.sync()
        saved = {int(k) for k in proc.stdout.read().split()}
        assert proc.wait(timeout=60) == 0
        s.sync()
    present: set[int] = set()
    for p in root.rglob("*.md"):
        present |= _lines(p.read_text())
    lost = sorted(saved - present - removed)
    return {"op": op, "saves": len(saved), "lost": len(lost), "lost_lines": lost[:20], **counts}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--work", type=Path, default=Path("/tmp/deleterace"))
    ap.add_argument("--op", choices=("delete", "forget"), default="delete")
    args = ap.parse_args()
    out = race(args.work / "store", args.n, args.op)
    print(json.dumps({"md_cg": str(Path(md_cg.__file__).parent), **out}))
    shutil.rmtree(args.work / "store", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
