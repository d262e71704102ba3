"""Shared fixtures and helpers for the md-cg tests."""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from md_cg import MdCG, Node
from md_cg.errors import StoreClosedError

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Write the bytecode of the md-cg under test (``md_cg/__pycache__``, ignored by git)
    before any test starts a child. The suite starts a few thousand Python children (CLI
    calls, racing writers, processes killed at every step); with ``PYTHONDONTWRITEBYTECODE``
    set -- as on the CI machine -- none wrote it, and each child compiled md-cg's 60 modules
    from source again: 0.87 s CPU to import ``md_cg.cli`` without it, 0.46 s with it
    (session 36). A tree the suite may not write to is left as it is."""
    import compileall

    compileall.compile_dir(REPO / "md_cg", quiet=2)


#: The system's temporary folder, read before any test points TMPDIR elsewhere.
_SYSTEM_TMP = tempfile.gettempdir()


@pytest.fixture(autouse=True)
def _own_tempdir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's temporary files (an edit's kept copy ``mdcg-ID-*.md``, in this
    process and in the CLI processes it starts) go to a folder of its own, removed after
    the test: the suite left ~700 kept copies in /tmp (session 31). The folder sits in
    the system's temporary folder with its mode (1777), so a test that drops privileges
    (tests/test_security.py's read-only copies) can still make its own in it."""
    tmp_path_factory.getbasetemp()  # pytest's own folder (tmp_path) stays where it is
    folder = tempfile.mkdtemp(prefix="mdcg-tests-", dir=_SYSTEM_TMP)
    os.chmod(folder, 0o1777)
    monkeypatch.setenv("TMPDIR", folder)
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    yield
    shutil.rmtree(folder, ignore_errors=True)


def tree_listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under root: relative path -> (size, mtime_ns)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[p.relative_to(root).as_posix()] = (st.st_size if name in filenames else 0, st.st_mtime_ns)
    return out


def node_tree(root: Path) -> dict[str, tuple[int, int]]:
    """Like tree_listing, without the operational .mdcg/ folder (locks, logs)."""
    return {k: v for k, v in tree_listing(root).items() if not k.startswith(".mdcg")}


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@contextlib.contextmanager
def no_writes() -> Iterator[list[str]]:
    """Make every write-mode open, mkdir, rename, unlink and replace fail.

    Tests run as root, where permission bits do not stop writes, so "writes
    nothing" is proven by making the write calls themselves raise.
    """
    attempts: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def guard(what: str) -> None:
        attempts.append(what)
        raise PermissionError(f"write attempted during a read-only call: {what}")

    def fake_open(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        # An end of a pipe already made (a helper process's stdin) writes no file.
        pipe = isinstance(file, int) and stat.S_ISFIFO(os.fstat(file).st_mode)
        if any(c in mode for c in "wax+") and not pipe:
            guard(f"open({file!r}, {mode!r})")
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if flags & _WRITE_FLAGS:
            guard(f"os.open({path!r})")
        return real_os_open(path, flags, *args, **kwargs)

    patches = {
        (builtins, "open"): fake_open,
        (io, "open"): fake_open,
        (os, "open"): fake_os_open,
        (os, "mkdir"): lambda *a, **k: guard(f"mkdir{a}"),
        (os, "makedirs"): lambda *a, **k: guard(f"makedirs{a}"),
        (os, "rename"): lambda *a, **k: guard(f"rename{a}"),
        (os, "replace"): lambda *a, **k: guard(f"replace{a}"),
        (os, "unlink"): lambda *a, **k: guard(f"unlink{a}"),
        (os, "remove"): lambda *a, **k: guard(f"remove{a}"),
        (os, "rmdir"): lambda *a, **k: guard(f"rmdir{a}"),
        (os, "utime"): lambda *a, **k: guard(f"utime{a}"),
        (os, "truncate"): lambda *a, **k: guard(f"truncate{a}"),
    }
    saved = {key: getattr(*key) for key in patches}
    try:
        for (mod, name), fn in patches.items():
            setattr(mod, name, fn)
        yield attempts
    finally:
        for (mod, name), fn in saved.items():
            setattr(mod, name, fn)


def knowledge(node_id: str, domain: str = "计算机科学", body: str | None = None, **kw) -> Node:
    """A complete, verified knowledge node in a domain bucket."""
    if body is None:
        body = (
            f"# 功能名：{node_id}\n# 生效条件：有序数组\n# 子功能：取中点 → 比较\n"
            f"# 执行：返回下标\n# 验证方式：单元测试\n# 不适用条件：数组未排序\n正文 {node_id}\n"
        )
    kw.setdefault("verification_basis", "test")
    return Node(id=node_id, layer="knowledge", tags=[f"domain:{domain}"], body=body, **kw)


#: Findings of ``health(deep=True)`` that mean the index disagrees with the files.
DRIFT = ("content_drift", "text_drift")


def assert_no_drift(store: MdCG) -> None:
    """The index matches the files, entry by entry and term by term (``health(deep=True)``)."""
    try:
        findings = store.health(deep=True).findings
    except StoreClosedError:
        return  # the test closed the store itself
    assert [f for f in findings if f.kind in DRIFT] == []


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MdCG]:
    with MdCG(tmp_path / "mem") as s:
        yield s
        assert_no_drift(s)


@pytest.fixture
def top_k_answers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call of ``TextIndex._match_top_k`` (MaxScore) answered, in call order."""
    from md_cg.textindex import TextIndex

    answered: list[bool] = []
    real = TextIndex._match_top_k

    def spy(self, *args):  # type: ignore[no-untyped-def]
        out = real(self, *args)
        answered.append(out is not None)
        return out

    monkeypatch.setattr(TextIndex, "_match_top_k", spy)
    return answered


@pytest.fixture(params=[False, True], ids=["fast", "durable"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MdCG]:
    """The same tests in both write modes (non-durable and durable)."""
    with MdCG(tmp_path / "mem", durable=request.param) as s:
        yield s
        assert_no_drift(s)


def python_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *sys.path])
    return env


def git_env(code: Path = REPO) -> dict[str, str]:
    """The environment of a test's git and md-cg child processes: a fixed author and
    committer, no global or system git config, ``code`` (the tree under test) first on
    ``PYTHONPATH``, no ``MDCG_ROOT``."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONPATH": os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env.pop("MDCG_ROOT", None)
    return env


def run_and_kill(args: Sequence[str], ready: Callable[[], bool], *, delay: float, what: str) -> None:
    """Run ``python args...`` and SIGKILL it ``delay`` s after ``ready()`` first holds.

    Fails when the process ends before it could be killed, or ``ready()`` never holds
    within 60 s; asserts the process died of the kill."""
    proc = subprocess.Popen(
        [sys.executable, *args], env=python_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if ready():
                break
            assert proc.poll() is None, f"the {what} ended before it could be killed"
            time.sleep(0.002)
        else:
            pytest.fail(f"the {what} never showed progress")
        time.sleep(delay)  # land inside a batch's commit now and then
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


BINARY_SEARCH = """\
# Function: binary search
# Applies when: a sorted array with O(1) random access
# Steps: take the middle, compare, halve the interval
# Executes: returns the index of the target or -1
# Verified by: unit tests on empty, single and duplicate inputs
# Not applicable when: the array is unsorted; linked lists
Binary search halves the search interval at every step.
"""


def build_small_store(path: Path) -> Path:
    """The store the CLI and MCP tests share: a judged knowledge node with an
    edge, its target, an anchor and a rejected note."""
    with MdCG(path) as store:
        store.add(
            Node(
                id="kp_bsearch",
                body=BINARY_SEARCH,
                tags=["domain:computing"],
                confidence=0.6,
                verification_basis="test",
                non_applicable_conditions=["unsorted array", "linked list"],
                edges=[{"target": "kp_sorting", "type": "part_of"}],
            )
        )
        store.add(
            Node(id="kp_sorting", body="# Sorting\nSorting puts items in order.\n", tags=["domain:computing"])
        )
        store.add(Node(id="anc_rule", layer="anchor", body="Always confirm before deleting user data.\n"))
        store.add_rejected("binary search works on linked lists", "no random access on a linked list")
    return path


def mcp_calls(root: Path, calls: list[tuple[str, dict[str, Any]]], **kw: Any) -> list[Any]:
    """The results of ``calls`` ((tool, arguments) in order) to an MCP server of the store at
    ``root`` (``create_server(root, **kw)``) through the official client, in one session."""
    import anyio
    from mcp import Client

    from md_cg.mcp_server import create_server

    server = create_server(root, **kw)
    out: list[Any] = []

    async def run() -> None:
        async with Client(server) as client:
            for tool, args in calls:
                out.append(await client.call_tool(tool, args))

    try:
        anyio.run(run)
    finally:
        server.store.close()
    return out
