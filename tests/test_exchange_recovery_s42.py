"""Session 42 (attack atk11): the recovery of a commit whose writer was killed between an
exchange and its check (``exchanged-1``: a person's save displaced to the hidden temp
name, md-cg's unacknowledged file at the path), and the recovery's own renames.

F1: the person saves again before any recovery, from md-cg's file at the path; recovery
took that for "a later save" and removed the displaced save: its change was in no file.
F2: the store is copied (``cp -a``/``cp -r``: new inodes) before recovery; the copy's
recovery took the displaced save for a damaged temp file and removed it (and reported the
commit undone while md-cg's file stayed at the path).
F3: recovery renamed files after a look: a save landing after it was replaced.
F7: a symlink put at the path before the exchange was left at the hidden temp name.

Every test runs the writer (killed by SIGKILL at the step) in a process of its own, the
person's saves in others; recovery runs in a process of its own too where a save is to
land inside it. Nothing a person saved may be in no file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_exchange_s41 import SAVE, _child, _files, _store, _x

from md_cg import MdCG

# a write in place (no rename): read, append HAND<argv[3]>, write back
INPLACE = "import sys; p = sys.argv[2]; d = open(p).read(); open(p, 'w').write(d + 'HAND%s\\n' % sys.argv[3])"


def _save(root: Path, path: Path, k: int, prog: str = SAVE) -> None:
    subprocess.run([sys.executable, "-c", prog, str(root), str(path), str(k)], check=True)


def _node(path: Path) -> tuple[str, str]:
    """The body and the importance line of the memory file at ``path``."""
    text = path.read_text()
    body = text.split("\n---\n", 1)[1]
    imp = re.search(r"^importance: (.*)$", text, re.M)
    return body, imp.group(1) if imp else ""


def _killed_with_save(root: Path) -> str:
    """x stored; an update of it killed at ``exchanged-1`` with the person's save HAND0
    displaced to the temp name (md-cg's importance 0.3 at the path). Returns x's path."""
    rel = _store(root)
    assert _child(root, "s.update('x', importance=0.3)", mode="exchange", kill="exchanged-1") == {
        "killed": True
    }
    assert len(_files(root)) == 2
    return rel


def _sync(root: Path) -> dict[str, object]:
    with MdCG(root) as s:
        r = s.sync()
        found = [
            (f.kind, f.path)
            for f in s.health().findings
            if f.kind in ("duplicate_id", "unsafe_path", "temp_file")
        ]
    return {
        "recovered": r.recovered,
        "undone": r.undone,
        "left": list(r.left_as_edited),
        "duplicates": [list(d) for d in r.duplicates],
        "refused": [p for p, _ in r.refused],
        "health": sorted(found),
    }


@pytest.mark.parametrize("prog", [SAVE, INPLACE], ids=["editor-save", "in-place"])
def test_a_save_after_the_kill_keeps_the_displaced_save_beside_it(tmp_path: Path, prog: str) -> None:
    """F1: the person's second save (built on md-cg's file at the path) stays at the path;
    the first, displaced, is kept as x.saved-<time>.md, named by sync and health."""
    rel = _killed_with_save(tmp_path)
    _save(tmp_path, tmp_path / rel, 1, prog)
    report = _sync(tmp_path)
    files = _files(tmp_path)
    assert len(files) == 2 and rel in files, files
    kept = next(f for f in files if f != rel)
    assert re.fullmatch(r"knowledge/orphan/x\.saved-\d{8}T\d{6}\.md", kept), kept
    assert _node(tmp_path / rel) == ("base\nHAND1\n", "0.3")  # the later save, on md-cg's file
    assert _node(tmp_path / kept) == ("base\nHAND0\n", "0.5")  # the displaced save, whole
    assert report == {
        "recovered": 1,
        "undone": 1,
        "left": [],
        "duplicates": [["x", kept]],
        "refused": [],
        "health": [("duplicate_id", kept)],
    }
    with MdCG(tmp_path) as s:
        assert (s.get("x").body, s.get("x").importance) == ("base\nHAND1", 0.3)


def _copy(root: Path, how: list[str]) -> Path:
    dst = root.parent / (root.name + "-copy")
    subprocess.run([*how, str(root), str(dst)], check=True)
    return dst


#: (copy command, the person's save displaced or not, then x's body and importance, and
#: the sync's undone and left_as_edited)
COPIES = {
    "cp-a-save": (["cp", "-a"], True, "base\nHAND0\n", "0.5", 1, ["x"]),
    "cp-r-save": (["cp", "-r"], True, "base\nHAND0\n", "0.5", 1, ["x"]),
    # cp -a keeps the mtime of the file read: told from a save, removed, the update rolled
    # forward (before: reported undone with md-cg's file left in place)
    "cp-a": (["cp", "-a"], False, "base\n", "0.3", 0, []),
    # cp -r keeps no mtime: the file read cannot be told from a save, so it is kept at the
    # path and the unacknowledged update dropped (told as left)
    "cp-r": (["cp", "-r"], False, "base\n", "0.5", 1, ["x"]),
}


@pytest.mark.parametrize("case", sorted(COPIES))
def test_a_copy_made_after_the_kill_keeps_the_displaced_file(tmp_path: Path, case: str) -> None:
    """F2: the copy's files have new inodes; the displaced file (not md-cg's bytes, which
    the path holds) is put back at the path unless it is told to be the file read."""
    how, save, body, importance, undone, left = COPIES[case]
    store = tmp_path / "s"
    if save:
        rel = _killed_with_save(store)
    else:
        rel = _store(store)
        assert _child(store, "s.update('x', importance=0.3)", k=0, kill="exchanged-1") == {"killed": True}
    copy = _copy(store, how)
    report = _sync(copy)
    assert _files(copy) == [rel]
    assert _node(copy / rel) == (body, importance)
    assert report == {
        "recovered": 1,
        "undone": undone,
        "left": left,
        "duplicates": [],
        "refused": [],
        "health": [],
    }


# The recovering process: after recovery's look (``hook``), the person saves x once
# (HAND<argv[4]>) -- ``later``: right after the first journal._later_ids; ``exchange``: just
# before recovery's first exchange. Prints the sync's recovered count.
RECOVER = (
    textwrap.dedent(
        """
    import json, subprocess, sys, warnings
    warnings.simplefilter("ignore")
    import md_cg.fsops as F
    import md_cg.journal as J
    from md_cg import MdCG
    root, path, hook, k = sys.argv[1:5]
    done = [False]
    def save():
        if not done[0]:
            done[0] = True
            subprocess.run([sys.executable, "-c", SAVE, root, path, k], check=True)
    def hooked(fn, first):
        def run(*a, **kw):
            if first:
                save()
            out = fn(*a, **kw)
            save()
            return out
        return run
    if hook == "later":
        J._later_ids = hooked(J._later_ids, False)
    else:
        F.Dir.exchange = hooked(F.Dir.exchange, True)
    with MdCG(root) as s:
        print(json.dumps({"recovered": s.sync().recovered, "saved": done[0]}))
    """
    )
).replace("SAVE, root", f"{SAVE!r}, root")


def _recover(root: Path, rel: str, hook: str, k: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", RECOVER, str(root), str(root / rel), hook, str(k)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_save_after_the_roll_forwards_look_is_not_replaced(tmp_path: Path) -> None:
    """F3a: killed after the line (``logged``); the save lands after recovery checked the
    file (_later_ids), before it put the temp file in place: the save stays, the update
    is not applied (never acknowledged)."""
    rel = _store(tmp_path)
    assert _child(tmp_path, "s.update('x', importance=0.3)", k=0, kill="logged") == {"killed": True}
    assert _recover(tmp_path, rel, "later", 0) == {"recovered": 1, "saved": True}
    assert _files(tmp_path) == [rel]
    assert _node(tmp_path / rel) == ("base\nHAND0\n", "0.5")
    assert _x(tmp_path) == ("base\nHAND0", 0.5, 0)


def test_a_save_landing_before_recoverys_exchange_back_is_kept(tmp_path: Path) -> None:
    """F3b: killed at ``exchanged-1`` with HAND0 displaced; a save (HAND1, on md-cg's file)
    lands just before recovery exchanges the displaced save back: the later save stays at
    the path, HAND0 is kept beside it."""
    rel = _killed_with_save(tmp_path)
    assert _recover(tmp_path, rel, "exchange", 1) == {"recovered": 1, "saved": True}
    files = _files(tmp_path)
    kept = next(f for f in files if f != rel)
    assert len(files) == 2 and re.fullmatch(r"knowledge/orphan/x\.saved-\d{8}T\d{6}\.md", kept), files
    assert _node(tmp_path / rel) == ("base\nHAND1\n", "0.3")
    assert _node(tmp_path / kept) == ("base\nHAND0\n", "0.5")


SYMLINK = textwrap.dedent(
    """
    import os, sys
    p, target = sys.argv[2], sys.argv[3]
    os.rename(p, p + ".bak")
    os.symlink(target, p)
    """
)


def test_a_symlink_displaced_by_the_exchange_is_put_back(tmp_path: Path) -> None:
    """F7: a person replaced x's file by a symlink just before the exchange; after the kill
    recovery puts the symlink back at the path (md-cg never follows it: health names it
    there), the unacknowledged update removed, the outside file untouched."""
    store = tmp_path / "s"
    rel = _store(store)
    outside = tmp_path / "mine.md"
    outside.write_text((store / rel).read_text().replace("base", "base\nLINKED"))
    before = outside.read_bytes()
    child = (
        "import md_cg.fsops as F, subprocess, sys\n"
        f"LINK = {SYMLINK!r}\n"
        "ex = F.Dir.exchange\n"
        "def first(self, a, b):\n"
        f"    args = ['', {str(store / rel)!r}, {str(outside)!r}]\n"
        "    subprocess.run([sys.executable, '-c', LINK, *args], check=True)\n"
        "    F.Dir.exchange = ex\n"
        "    return ex(self, a, b)\n"
        "F.Dir.exchange = first\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", child + _KILL, str(store)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr
    report = _sync(store)
    assert os.readlink(store / rel) == str(outside)
    assert outside.read_bytes() == before
    names = sorted(p.name for p in (store / rel).parent.iterdir())
    assert names == ["x.md", "x.md.bak"]
    assert report["health"] == [("unsafe_path", rel)] and report["refused"] == [rel]


_KILL = textwrap.dedent(
    """
    import os, signal, warnings
    warnings.simplefilter("ignore")
    from md_cg import MdCG
    s = MdCG(sys.argv[1])
    def fault(step):
        if step == "exchanged-1":
            os.kill(os.getpid(), signal.SIGKILL)
    s._engine.journal.fault = fault
    s.update("x", importance=0.3)
    """
)


# A live update (no kill): the person saves HAND0 just before md-cg's exchange (found
# displaced: the exchange is undone), HAND1 just before that undoing exchange (read from
# md-cg's file, then at the path) and HAND2 just after it (read from HAND0's file, back at
# the path).
LIVE = (
    textwrap.dedent(
        """
    import json, subprocess, sys, warnings
    warnings.simplefilter("ignore")
    import md_cg.fsops as F
    from md_cg import MdCG
    root = sys.argv[1]
    s = MdCG(root)
    path = str(s.path_of("x"))
    calls = [0]
    def save(k):
        subprocess.run([sys.executable, "-c", SAVE, root, path, str(k)], check=True)
    exchange = F.Dir.exchange
    def hooked(self, a, b):
        calls[0] += 1
        if calls[0] <= 2:
            save(calls[0] - 1)
        out = exchange(self, a, b)
        if calls[0] == 2:
            save(2)
        return out
    F.Dir.exchange = hooked
    s.update("x", importance=0.3)
    s.close()
    print(json.dumps({"ok": True}))
    """
    )
).replace("SAVE, root", f"{SAVE!r}, root")


def test_saves_around_the_undoing_of_an_exchange_are_all_kept(tmp_path: Path) -> None:
    """md-cg undoes its exchange (a save, HAND0, was displaced) and finds a newer save
    (HAND1, made on its own file) where its file was to come back: HAND1 goes to the path
    (the update retried over it) and HAND0's file -- with HAND2, saved on it meanwhile --
    is kept beside it. Before, HAND1's file was renamed over the path: HAND0 and HAND2 in
    no file."""
    rel = _store(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", LIVE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    files = _files(tmp_path)
    assert len(files) == 2 and rel in files, files
    kept = next(f for f in files if f != rel)
    assert re.fullmatch(r"knowledge/orphan/x\.saved-\d{8}T\d{6}\.md", kept), kept
    assert _node(tmp_path / rel) == ("base\nHAND1\n", "0.3")
    assert _node(tmp_path / kept) == ("base\nHAND0\nHAND2\n", "0.5")
