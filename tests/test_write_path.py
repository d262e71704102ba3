"""The write path's shortcuts keep its semantics: validation once per ``add`` with
the same errors, one serialisation per stamped node with the same bytes, and a
log catch-up that skips unchanged shards but reads and refuses as before."""

from __future__ import annotations

import os
import time
import types
from pathlib import Path

import pytest

import md_cg.engine as engine_mod
import md_cg.nodefile as nodefile_mod
import md_cg.store as store_mod
import md_cg.views as views_mod
from md_cg import MdCG, Node, fsops, journal, paths, snapshot
from md_cg.errors import DuplicateIdError, InvalidNodeError

T = 1796083200.25  # 2026-12-01T00:00:00.250000Z


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixed wall clock for the stamps (the store's and the engine's)."""
    fixed = types.SimpleNamespace(
        time=lambda: T, monotonic=time.monotonic, sleep=time.sleep, time_ns=time.time_ns
    )
    monkeypatch.setattr(engine_mod, "time", fixed)
    monkeypatch.setattr(store_mod, "time", fixed)


def _count(monkeypatch: pytest.MonkeyPatch, module: object, name: str, calls: list[str]) -> None:
    real = getattr(module, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


def alpha() -> Node:
    return Node(
        id="alpha",
        body="# Alpha\nA note about tea.",
        tags=["domain:kitchen"],
        condition_space={"observation_position": "kitchen (home)"},
        importance=0.5,
    )


ALPHA_FILE = """---
id: "alpha"
layer: "knowledge"
importance: 0.5
condition_space: {"observation_position": "kitchen (home)"}
tags: ["domain:kitchen"]
created_at: "2026-12-01T00:00:00.250000Z"
updated_at: "2026-12-01T00:00:00.250000Z"
---
# Alpha
A note about tea.
"""

BETA_FILE = """---
id: "beta"
layer: "knowledge"
created_at: "2026-11-30T00:53:20.000000Z"
updated_at: "2026-12-01T00:00:00.250000Z"
edges: [{"target": "alpha", "type": "similar"}]
---
Beta body
"""


def test_add_validates_once_and_add_many_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    _count(monkeypatch, store_mod, "validate", calls)
    _count(monkeypatch, views_mod, "validate", calls)
    with MdCG(tmp_path / "s") as s:
        s.add(Node(id="one", body="first"))
        assert calls == ["validate"]
        calls.clear()
        s.add_many([Node(id="two", body="second"), Node(id="three", body="third")])
        assert calls == ["validate", "validate"]
        assert s.get("one").created_at is not None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"importance": 2.0}, "node 'bad': field 'importance' must be a number between 0 and 1 (got 2.0)"),
        ({"layer": "nowhere"}, "node 'bad': unknown layer 'nowhere'; expected one of:"),
        ({"tags": "kitchen"}, "node 'bad': field 'tags' must be a list of strings (got 'kitchen')"),
    ],
)
def test_add_and_add_many_raise_the_same_validation_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: dict[str, object], message: str
) -> None:
    calls: list[str] = []
    _count(monkeypatch, store_mod, "validate", calls)
    _count(monkeypatch, views_mod, "validate", calls)
    with MdCG(tmp_path / "s") as s:
        with pytest.raises(InvalidNodeError) as one:
            s.add(Node(id="bad", body="text", **fields))  # type: ignore[arg-type]
        assert calls == ["validate"]
        with pytest.raises(InvalidNodeError) as many:
            s.add_many([Node(id="bad", body="text", **fields)])  # type: ignore[arg-type]
        assert calls == ["validate", "validate"]
        assert str(one.value).startswith(message)
        assert str(one.value) == str(many.value)
        assert one.value.field == many.value.field
        assert len(s) == 0
    assert not list((tmp_path / "s").rglob("*.md"))


def test_add_refuses_an_empty_body_after_validation(tmp_path: Path) -> None:
    with MdCG(tmp_path / "s") as s:
        with pytest.raises(InvalidNodeError, match="field 'importance'"):
            s.add(Node(id="bad", body="  ", importance=3.0))
        with pytest.raises(InvalidNodeError, match="the body is empty"):
            s.add(Node(id="bad", body="  "))


def test_add_and_update_refuse_a_nul_in_the_body(tmp_path: Path) -> None:
    """git takes a file holding NUL for binary (no diff): the agent-facing writes refuse it."""
    with MdCG(tmp_path / "s") as s:
        with pytest.raises(InvalidNodeError) as info:
            s.add(Node(id="bin", layer="self", body="hello\x00world"))
        assert str(info.value) == (
            "node 'bin': the body holds a NUL character (at 5); git would take the file for binary "
            "and show no diff of it"
        )
        assert info.value.field == "body"
        s.add(Node(id="txt", layer="self", body="plain text"))
        with pytest.raises(InvalidNodeError, match="holds a NUL character"):
            s.update("txt", body="now\x00binary")
        assert s.get("txt").body == "plain text" and s.ids() == ["txt"]
        s.add_many([Node(id="imported", layer="self", body="kept\x00as given")])  # imports: verbatim
        assert s.get("imported").body == "kept\x00as given"


def test_add_leaves_an_invalid_node_unstamped(tmp_path: Path) -> None:
    node = Node(id="bad", body="text", importance=2.0)
    with MdCG(tmp_path / "s") as s, pytest.raises(InvalidNodeError):
        s.add(node)
    assert node.created_at is None and node.updated_at is None


def test_stamped_files_are_byte_identical_for_a_fixed_clock(tmp_path: Path, clock: None) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        stored = s.add(alpha())
        s.add_many([Node(id="beta", body="Beta body", created_at=1796000000.0, edges=[{"target": "alpha"}])])
        assert stored.created_at == T and stored.updated_at == T
        # The same node again changes nothing but the stamp: the file is left as it is.
        mtime = os.stat(root / "knowledge/cond_kitchen_3171d89a/alpha.md").st_mtime_ns
        again = s.add(alpha(), overwrite=True)
        assert again.updated_at == T
        assert os.stat(root / "knowledge/cond_kitchen_3171d89a/alpha.md").st_mtime_ns == mtime
        changed = alpha()
        changed.body += "\nMore."
        assert s.add(changed, overwrite=True).updated_at == T + 1e-6  # strictly after the last write
        assert s.entry("alpha").updated_at == T + 1e-6
    assert (root / "knowledge/orphan/beta.md").read_text() == BETA_FILE
    assert (root / "knowledge/cond_kitchen_3171d89a/alpha.md").read_text() == ALPHA_FILE.replace(
        'updated_at: "2026-12-01T00:00:00.250000Z"', 'updated_at: "2026-12-01T00:00:00.250001Z"'
    ).replace("A note about tea.\n", "A note about tea.\nMore.\n")


def test_a_stamped_node_is_serialised_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    _count(monkeypatch, nodefile_mod, "dumps", calls)
    with MdCG(tmp_path / "s") as s:
        s.add_many([Node(id=f"n{i}", body=f"body {i}") for i in range(5)])
        assert len(calls) == 5
        calls.clear()
        s.add(Node(id="single", body="one"))
        assert len(calls) == 1
        calls.clear()
        s.add_many([Node(id=f"v{i}", body=f"verbatim {i}", created_at=T) for i in range(3)], stamp=False)
        assert len(calls) == 3


def test_an_oversized_duplicate_raises_the_size_error_first(tmp_path: Path) -> None:
    """Staging (which refuses an oversized file) comes before the existence check, as before."""
    big = "x" * (200 * 1024)
    with MdCG(tmp_path / "s") as s:
        s.add(Node(id="dup", body="here"))
        node = Node(id="dup", body="text", extra={"a": big, "b": big})
        with pytest.raises(InvalidNodeError, match=r"node 'dup': the frontmatter would be [\d,]+ bytes"):
            s.add(node)
        assert node.updated_at is None
        with pytest.raises(DuplicateIdError):
            s.add(Node(id="dup", body="text"))
        assert s.get("dup").body == "here"


def test_read_tail_skips_unchanged_shards_with_the_same_answer(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="one", body="first"))
        s.add(Node(id="two", body="second"))
    log = root / journal.LOG_REL
    (log / f"empty{fsops.SHARD_SUFFIX}").write_bytes(b"")
    whole = journal.read_tail(str(root), {})
    assert sorted(whole.offsets.values())[0] == 0  # the empty shard is listed at 0
    assert len(whole.offsets) == 2 and len(whole.by_shard) == 1
    again = journal.read_tail(str(root), whole.offsets)
    assert again.empty and again.offsets == whole.offsets and again.by_shard == {}
    # An appended record is read from the offset on, and only it.
    shard = next(n for n, end in whole.offsets.items() if end > 0)
    with open(log / shard, "ab") as fh:
        fh.write(b'{"op": "done", "c": 99}\n')
    later = journal.read_tail(str(root), whole.offsets)
    assert later.by_shard == {shard: [{"op": "done", "c": 99}]}
    assert later.offsets[shard] == whole.offsets[shard] + 24


def test_read_tail_still_refuses_a_symlinked_shard_at_its_offset(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root) as s:
        s.add(Node(id="one", body="first"))
    log = root / journal.LOG_REL
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    link = f"planted{fsops.SHARD_SUFFIX}"
    (log / link).symlink_to(outside)
    for offsets in ({}, {link: 0}):  # an empty target at the known offset: still refused
        tail = journal.read_tail(str(root), offsets)
        assert link in tail.unsafe
        assert tail.offsets.get(link) == offsets.get(link)
        assert tail.by_shard == {}


def _look_as_before(root: Path, offsets: dict[str, int]) -> tuple[object, journal.Tail]:
    st, tail = journal.look(str(root), offsets, paths.SNAPSHOT)
    return (None if st is None else (st.st_ino, st.st_mtime_ns, st.st_size)), tail


@pytest.mark.parametrize("case", ["plain", "compacted", "no-meta", "meta-symlink", "log-symlink", "no-log"])
def test_one_walk_look_equals_snapshot_identity_and_read_tail(tmp_path: Path, case: str) -> None:
    root = tmp_path / "s"
    with MdCG(root, auto_compact=None) as s:
        s.add(Node(id="one", body="first"))
        if case == "compacted":
            s.compact_index()
            s.add(Node(id="two", body="second"))
    meta = root / ".mdcg"
    if case == "no-meta":
        meta.rename(tmp_path / "elsewhere")
    elif case == "meta-symlink":
        meta.rename(tmp_path / "elsewhere")
        meta.symlink_to(tmp_path / "elsewhere")
    elif case == "log-symlink":
        (root / journal.LOG_REL).rename(tmp_path / "log_elsewhere")
        (root / journal.LOG_REL).symlink_to(tmp_path / "log_elsewhere")
    elif case == "no-log":
        (root / journal.LOG_REL).rename(tmp_path / "log_elsewhere")
    for offsets in ({}, journal.read_tail(str(root), {}).offsets):
        ident, tail = _look_as_before(root, offsets)
        assert ident == snapshot.identity(str(root))
        assert tail == journal.read_tail(str(root), offsets)
    assert (ident is not None) == (case == "compacted")
    assert bool(tail.unsafe) == (case in ("meta-symlink", "log-symlink"))


def test_a_write_sees_another_handles_write_after_a_compaction(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MdCG(root, auto_compact=None, refresh_interval=0) as a, MdCG(root, auto_compact=None) as b:
        a.add(Node(id="one", body="first"))
        b.compact_index()
        b.add(Node(id="two", body="second"))
        assert a.ids() == ["one", "two"]
        assert a._engine.snap_ident == snapshot.identity(str(root))
        with pytest.raises(DuplicateIdError):
            a.add(Node(id="two", body="again"))


def test_add_quantises_the_creation_time_it_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``add`` skips the second validation, so the creation time it sets is put on the
    microsecond grid by hand: the same value and line ``add_many`` writes."""
    off_grid = 1796083200.1234567
    fixed = types.SimpleNamespace(
        time=lambda: off_grid, monotonic=time.monotonic, sleep=time.sleep, time_ns=time.time_ns
    )
    monkeypatch.setattr(engine_mod, "time", fixed)
    monkeypatch.setattr(store_mod, "time", fixed)
    root = tmp_path / "s"
    with MdCG(root) as s:
        one = s.add(Node(id="one", body="first"))
        (two,) = s.add_many([Node(id="two", body="second")])
        assert one.created_at == two.created_at == 1796083200.123457
        assert s.entry("one").created_at == 1796083200.123457
    for name in ("one", "two"):
        text = (root / f"knowledge/orphan/{name}.md").read_text()
        assert 'created_at: "2026-12-01T00:00:00.123457Z"' in text


def test_cached_pid_follows_fork(tmp_path: Path) -> None:
    """The pid fsops caches (temp names, lock and shard ownership) is the child's after fork."""
    parent = os.getpid()
    assert fsops.current_pid() == parent
    assert f".{parent}." in fsops.temp_name("a.md")
    lock = fsops.FileLock(str(tmp_path), "x.lock")
    lock.acquire()
    writer = fsops.ShardWriter(str(tmp_path), "log")
    writer.append([{"op": "x"}])
    assert writer.name is not None and writer.name.startswith(f"{parent}_")
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            me = os.getpid()
            ok = (
                fsops.current_pid() == me
                and f".{me}." in fsops.temp_name("a.md")
                and lock.depth == 0  # the parent's hold is not the child's
                and not lock.try_acquire()  # and the child does not share its lock
            )
            writer.append([{"op": "y"}])
            ok = ok and writer.name is not None and writer.name.startswith(f"{me}_")
            os.write(write, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 2)
    os.close(read)
    os.waitpid(child, 0)
    assert answer == b"ok"
    assert fsops.current_pid() == parent and lock.depth == 1
    lock.release()
    lock.close()
    writer.close()
    assert len(fsops.list_shards(str(tmp_path), "log")) == 2


def test_id_fold_of_ascii_is_the_nfc_case_fold() -> None:
    """The ASCII shortcut of script.id_fold gives what NFC + casefold gives."""
    import unicodedata

    from md_cg.script import id_fold

    for text in ["".join(map(chr, range(128))), "Foo_BAR-1.x", "kp_3F9A2C", "", "ß", "Café", "ＦＯＯ"]:
        assert id_fold(text) == unicodedata.normalize("NFC", text).casefold()
