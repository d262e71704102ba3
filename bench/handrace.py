"""Lines a person writes into memory files lost to md-cg's concurrent updates.

    python bench/handrace.py --kind save --lines 1002 --work /tmp/hr
    PYTHONPATH=/path/to/other/version python bench/handrace.py --kind save ...

One process (this one) loops ``update(x<j>, importance=...)`` over 3 ids while another
-- the person -- writes ``HAND<j>-<k>`` to each id's file in turn, one line about every
0.7 ms, ``--lines`` in all: ``buffered`` (``open(path, "a")``, ``write``, ``close``),
``append`` (one ``os.write`` on an ``O_APPEND`` descriptor) or ``save`` (an editor's
save: the file read whole, the line added, written to a temp file, renamed over it);
``none``: no person, ``--lines`` updates (their latency alone).
The lines missing from the files at the end are lost. Prints one JSON line: the lines
lost of those written, the updates done and refused (``ChangedOnDiskError``), and the
median wall time of an ``update`` in microseconds. Compare two versions of ``md_cg`` by
running it with ``PYTHONPATH`` pointing at each, alternating (session 41: the editor-save
window the exchange closes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import md_cg
from md_cg import MdCG, Node

PERSON = textwrap.dedent(
    """
    import os, sys, time
    kind, n, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    print("go", flush=True)
    for k in range(n // len(paths)):
        for j, path in enumerate(paths):
            line = "HAND%d-%d\\n" % (j, k)
            if kind == "buffered":
                with open(path, "a") as f:
                    f.write(line)
            elif kind == "append":
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                os.write(fd, line.encode())
                os.close(fd)
            else:
                with open(path) as f:
                    data = f.read()
                with open(path + ".swp", "w") as f:
                    f.write(data + line)
                os.rename(path + ".swp", path)
            time.sleep(0.0007)
    """
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", choices=("buffered", "append", "save", "none"), default="save")
    ap.add_argument("--lines", type=int, default=1002)
    ap.add_argument("--work", type=Path, default=Path("/tmp/handrace"))
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    root = args.work / f"store_{args.kind}"
    shutil.rmtree(root, ignore_errors=True)
    ids = ["x0", "x1", "x2"]
    with MdCG(root) as s:
        for i in ids:
            s.add(Node(id=i, layer="knowledge", body="base", importance=0.5))
        paths = [str(s.path_of(i)) for i in ids]
        person = [sys.executable, "-c", PERSON, args.kind, str(args.lines), *paths]
        if args.kind == "none":
            person = [sys.executable, "-c", f"print('go', flush=True); n = {args.lines}"]
        proc = subprocess.Popen(person, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "go\n"
        took: list[float] = []
        refused = 0
        while (proc.poll() is None) if args.kind != "none" else len(took) < args.lines:
            t = time.perf_counter()
            try:
                s.update(ids[len(took) % 3], importance=(len(took) % 97) / 100)
            except md_cg.ChangedOnDiskError:
                refused += 1
            took.append(time.perf_counter() - t)
        assert proc.wait() == 0
    lost, written = 0, args.lines // 3 * 3 if args.kind != "none" else 0
    for j, path in enumerate(paths):
        present = set(Path(path).read_text().splitlines())
        lost += sum(f"HAND{j}-{k}" not in present for k in range(written // 3))
    out = {
        "label": args.label,
        "md_cg": str(Path(md_cg.__file__).parent),
        "kind": args.kind,
        "lost": lost,
        "written": written,
        "updates": len(took),
        "refused": refused,
        "median_us": round(statistics.median(took) * 1e6),
    }
    print(json.dumps(out))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
