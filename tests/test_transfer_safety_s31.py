"""Import and export safety (session 31, reviewer r1 findings 3-6): an import does not
bring back ids forgotten or renamed in the store; ``export --out`` writes through a
FIFO, a ``/dev/fd`` path and a symlink, and refuses a path in the store; an export names
memories holding conflict markers; an imported expiry says why; a failed import makes
no store. The CLI runs as a real process (``python -m md_cg.cli``)."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from md_cg import BadRecord, MdCG, NodeNotFoundError, export_nodes, import_nodes

REPO = Path(__file__).resolve().parents[1]


def mdcg(*args: str, stdin: bytes | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MDCG_ROOT", None)
    return subprocess.run(
        [sys.executable, "-m", "md_cg.cli", *args],
        input=None if stdin is None else stdin.decode(),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        **kw,  # type: ignore[arg-type]
    )


def when(at: float | None) -> str:
    assert at is not None
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def md_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*.md"))
        if ".mdcg" not in p.parts
    }


# -- finding 3: forgotten and renamed ids are not brought back ----------------------------------


@pytest.fixture
def forgotten(tmp_path: Path) -> tuple[Path, Path, str]:
    """A store whose 'secret' was forgotten after the backup was made; (root, backup, when)."""
    root, backup = tmp_path / "s", tmp_path / "backup.jsonl"
    with MdCG(root) as store:
        store.add(id="secret", body="my password hint is blue")
        store.add(id="other", body="other")
        export_nodes(store, backup)
        store.forget("secret", "privacy request")
        departed = store.departure("secret")
    assert departed is not None
    return root, backup, when(departed.time)


def test_import_leaves_a_forgotten_id_out_dry_run_and_real(forgotten: tuple[Path, Path, str]) -> None:
    root, backup, at = forgotten
    why = f"id 'secret' was forgotten in this store ({at}); not brought back (--overwrite brings it back)"
    for extra, tail in ((["--dry-run"], "; dry run: nothing was written)"), ([], ")")):
        result = mdcg("import", str(backup), "--root", str(root), *extra)
        assert result.returncode == 0, result.stderr
        head, line = result.stdout.splitlines()
        assert head.startswith(
            f"{backup}: 2 record(s): 0 new, 0 changed, 1 unchanged, "
            "1 forgotten or renamed here (not brought back) ("
        )
        assert head.endswith(tail)
        assert line == f"  not brought back: line 2: {why}"
    with MdCG(root) as store:
        with pytest.raises(NodeNotFoundError):
            store.get("secret")
        assert sorted(e.id for e in store.list_nodes()) == ["other"]
        assert not (root / "knowledge" / "orphan" / "secret.md").exists()
        assert [f.kind for f in store.health().findings if f.node_id == "secret"] == []
        report = import_nodes(store, backup)
    assert report.departed == [BadRecord("line 2", "secret", why)]
    assert (report.created, report.unchanged, report.ids) == (0, 1, ["other"])
    assert report.to_dict()["departed"] == [{"where": "line 2", "node_id": "secret", "reason": why}]


def test_import_leaves_a_renamed_id_out(tmp_path: Path) -> None:
    root, backup = tmp_path / "s", tmp_path / "b.jsonl"
    with MdCG(root) as store:
        store.add(id="cat", body="the cat naps on the sofa")
        export_nodes(store, backup)
        store.rename("cat", "kitty")
        departed = store.departure("cat")
        assert departed is not None
        report = import_nodes(store, backup)
        why = (
            f"id 'cat' was renamed to 'kitty' in this store ({when(departed.time)}); its old id is not "
            "brought back (--overwrite imports it beside 'kitty')"
        )
        assert report.departed == [BadRecord("record 1", "cat", why)]  # one object: a document
        assert report.created == 0
        assert sorted(e.id for e in store.list_nodes()) == ["kitty"]
        assert [f.kind for f in store.health().findings if f.node_id == "cat"] == []


def test_import_overwrite_brings_a_forgotten_id_back_and_logs_it(forgotten: tuple[Path, Path, str]) -> None:
    root, backup, _at = forgotten
    result = mdcg("import", str(backup), "--root", str(root), "--overwrite")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{backup}: 2 record(s): 1 new, 0 changed, 1 unchanged (")
    with MdCG(root) as store:
        assert store.get("secret").body == "my password hint is blue"
        assert store.departure("secret") is None
        kinds = [f.kind for f in store.health().findings if f.node_id == "secret"]
        assert kinds == []  # a restored record: not taken for one git brought back
    sync = mdcg("sync", "--root", str(root))
    assert sync.returncode == 0, sync.stdout + sync.stderr


# -- finding 4: export --out ------------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, bytes]:
    """A store of two memories and its export's exact bytes."""
    root = tmp_path / "store"
    with MdCG(root) as store:
        store.add(id="a", body="alpha")
        store.add(id="b", body="beta")
        out = io.BytesIO()
        export_nodes(store, out)
    return root, out.getvalue()


def test_export_to_a_symlink_replaces_its_target_and_keeps_the_link(
    tmp_path: Path, small: tuple[Path, bytes]
) -> None:
    root, expected = small
    (tmp_path / "real.jsonl").write_text("old\n")
    (tmp_path / "link.jsonl").symlink_to("real.jsonl")
    result = mdcg("export", "--root", str(root), "--out", str(tmp_path / "link.jsonl"))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"exported 2 memories to {tmp_path / 'link.jsonl'}\n"
    assert os.readlink(tmp_path / "link.jsonl") == "real.jsonl"
    assert (tmp_path / "real.jsonl").read_bytes() == expected


def test_export_to_a_fifo_writes_into_it(tmp_path: Path, small: tuple[Path, bytes]) -> None:
    root, expected = small
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = tmp_path / "got"
    reader = subprocess.Popen(["sh", "-c", f"cat '{fifo}' > '{got}'"])
    try:
        result = mdcg("export", "--root", str(root), "--out", str(fifo))
        if result.returncode == 0 and not stat.S_ISFIFO(os.lstat(fifo).st_mode):
            reader.kill()  # the FIFO was replaced: its reader would wait for ever
        reader.wait(timeout=10)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert (result.returncode, result.stderr) == (0, "")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got.read_bytes() == expected


def test_export_to_a_dev_fd_path_writes_into_the_pipe(small: tuple[Path, bytes]) -> None:
    root, expected = small
    read_end, write_end = os.pipe()
    chunks: list[bytes] = []

    def drain() -> None:
        with os.fdopen(read_end, "rb") as r:
            chunks.append(r.read())

    thread = threading.Thread(target=drain)
    thread.start()
    try:
        result = mdcg("export", "--root", str(root), "--out", f"/dev/fd/{write_end}", pass_fds=(write_end,))
    finally:
        os.close(write_end)
        thread.join(timeout=10)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"exported 2 memories to /dev/fd/{write_end}\n"
    assert chunks == [expected]


def test_export_into_the_store_folder_is_refused(tmp_path: Path, small: tuple[Path, bytes]) -> None:
    root, _expected = small
    before = md_files(root)
    target = root / "knowledge" / "orphan" / "a.md"
    assert target.exists()
    result = mdcg("export", "--root", str(root), "--out", str(target))
    assert result.returncode == 2
    assert result.stderr.strip().replace("\n", " ") == (
        f"error: {target}: is inside the store folder {root} (an export there would replace a "
        "memory's file or be taken into the store); write it outside the store"
    )
    (tmp_path / "into").symlink_to(root / "knowledge")
    via = tmp_path / "into" / "x.jsonl"
    result = mdcg("export", "--root", str(root), "--out", str(via))
    assert result.returncode == 2
    assert f"error: {via}: is inside the store folder {root}" in result.stderr.replace("\n", " ")
    assert md_files(root) == before
    assert not (root / "knowledge" / "x.jsonl").exists()


# -- finding 5: a memory holding conflict markers is named by export --------------------------


CONFLICTED = (
    '---\nid: "cat"\nlayer: "knowledge"\ncreated_at: "2026-01-01T00:00:00Z"\n---\n'
    "The cat sleeps on the\n<<<<<<< ours\nBED.\n=======\nFLOOR.\n>>>>>>> theirs\n"
)


def test_export_names_a_memory_with_conflict_markers(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as store:
        store.add(id="dog", body="the dog")
    (root / "knowledge" / "orphan" / "cat.md").write_text(CONFLICTED)
    assert mdcg("sync", "--root", str(root)).returncode == 1  # the conflict is reported there
    result = mdcg("export", "--root", str(root), "--out", str(tmp_path / "x.jsonl"))
    assert result.returncode == 0
    assert result.stderr.replace("\n", " ").strip() == (
        "unresolved merge conflict: cat: exported as stored, but its body holds git conflict "
        "markers and `mdcg import` refuses it until the conflict is resolved (edit the memory, "
        "then export again)"
    )
    records = [orjson.loads(line) for line in (tmp_path / "x.jsonl").read_bytes().splitlines()]
    assert [r["id"] for r in records] == ["cat", "dog"]
    with MdCG(root, read_only=True) as store:
        report = export_nodes(store, io.BytesIO())
    assert report.conflicted == ["cat"]


# -- finding 6: an imported expiry's reason; a failed import makes no store -------------------


def test_an_imported_expiry_without_tier_says_why(tmp_path: Path) -> None:
    later = time.time() + 86400
    source = io.BytesIO(orjson.dumps({"id": "t", "body": "soon", "expires_at": later}))
    with MdCG(tmp_path / "s") as store:
        import_nodes(store, source)
        node = store.get("t")
    assert (node.retention_tier, node.retention_reason) == (
        "temp",
        "imported with an expiry and no tier: temporary until its expires_at",
    )
    assert node.expires_at is not None and abs(node.expires_at - later) < 0.001


def test_a_failed_import_makes_no_store(tmp_path: Path) -> None:
    new = tmp_path / "NEW"
    result = mdcg("import", str(tmp_path / "nonexist"), "--root", str(new))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path / 'nonexist'}: cannot read it: No such file or directory"
    )
    assert not new.exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "ok", "body": "fine"}\n{"id": "x", "importance": "high", "body": "y"}\n')
    result = mdcg("import", str(bad), "--root", str(new))
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == f"error: {bad}: 1 bad record(s); nothing was imported"
    assert not new.exists()
    only_bad = tmp_path / "only_bad.jsonl"
    only_bad.write_text('{"id": "x", "importance": "high", "body": "y"}\n')
    result = mdcg("import", str(only_bad), "--root", str(new), "--skip-bad")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        f"{only_bad}: 1 record(s): 0 new, 0 changed, 0 unchanged, 1 bad left out ("
    )
    assert not new.exists()
    # a good source from stdin (read once) makes the store and imports
    result = mdcg("import", "-", "--root", str(new), stdin=b'{"id": "ok", "body": "fine"}\n')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("<stdin>: 1 record(s): 1 new, 0 changed, 0 unchanged (")
    with MdCG(new, read_only=True) as store:
        assert store.get("ok").body == "fine"
