"""The ``mdcg`` command line: a thin shell over :class:`md_cg.MdCG` (DESIGN §13).

Every command is one call into the library plus presentation (tables and
lines from :mod:`md_cg.render`) on stdout, or ``--json`` (stable keys, the
library's ``to_dict`` forms) for scripts. Progress bars and spinners go to
stderr and are shown only on a terminal (``--quiet`` turns them off). Search
results without evidence of being about the query (the ladder's filler) are
left out unless ``--fill`` is given. This module imports only md_cg's public
API: the names ``md_cg`` exports and its documented public modules.

Errors: a library error (:class:`md_cg.MdcgError`), a bad option value or an
OS error on a file (missing, a name too long, a symlink loop, a full disk...)
is one line ``error: ...`` on stderr, naming the file, and exit status 2; its
hints name ``mdcg`` commands. A failing disk (``EIO``) and an exception of any
other kind are bugs and keep their traceback -- unless every file of the write was
in place (:func:`md_cg.was_applied`): that is said in one line. A stdout closed early by its
reader (``mdcg list | head -1``) ends the command quietly, exit status 0.

Exit status: 0 success; 1 a check failed (``health`` found problems,
``migrate`` found mismatches or, with ``--strict``, bad rows, ``sync`` found
files that need a person); 2 an error (usage, unknown id, unreadable
source...); 130 interrupted.

The store folder is ``--root DIR`` (before or after the command name), else
the environment variable ``MDCG_ROOT``, else ``./memory`` (``.`` itself when it is a
store and ``./memory`` is not); a folder inside another store is refused.
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

# Only md_cg's errors and md_cg.render here: the store (the engine, the index, numpy, YAML)
# is imported by the commands that open one, so `mdcg --help` starts without them.
from md_cg import (
    DuplicateIdError,
    EditConflictError,
    ImportSourceError,
    InvalidArgumentError,
    InvalidNodeError,
    MdcgError,
    NodeHasIncomingEdgesError,
    NodeNotFoundError,
    NotAStoreError,
    ProtectedNodeError,
    is_out_of_room,
    record_failed,
    was_applied,
    was_logged,
    was_recovering,
)
from md_cg.render import (
    LINE_IDS,
    LOGGED_WRITE,
    RECOVERING_WRITE,
    applied_write,
    clip,
    current_version,
    distinct_labels,
    entries_table,
    health_table,
    id_list,
    iso,
    meta_summary,
    neighbours_table,
    node_dict,
    node_text,
    parse_when,
    recorded_write,
    results_table,
    retention,
    shown_results,
    sync_lines,
    terminal_safe,
    verdict_dict,
)

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from md_cg import Deleted, MdCG, Node

#: Environment variable naming the default store folder.
ROOT_ENV = "MDCG_ROOT"
#: Store folder used when neither ``--root`` nor ``MDCG_ROOT`` is given.
DEFAULT_ROOT = "memory"

#: Values of ``mdcg bench --kind``.
BENCH_KINDS = ("store", "search", "all")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

#: Every command of ``mdcg``, in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "init",
    "add",
    "get",
    "show",
    "list",
    "update",
    "edit",
    "rename",
    "delete",
    "forget",
    "keep",
    "archive",
    "unarchive",
    "supersede",
    "sweep",
    "organize",
    "stats",
    "today",
    "inject",
    "search",
    "neighbours",
    "verify",
    "reflect",
    "sync",
    "health",
    "census",
    "migrate",
    "import",
    "export",
    "rebuild",
    "compact",
    "bench",
    "demo",
    "mcp",
)


#: The commands that read a hidden memory with ``--archived``/``--expired``: their hints
#: name the one run (``mdcg show ID`` of an expired memory: ``mdcg show --expired ID``).
HIDDEN_READERS = ("get", "show")


def message(exc: MdcgError, command: str | None = None) -> str:
    """The one-line message of a library error, with hints that name ``mdcg`` commands
    (``command``: the one run, so that a hint to read a hidden memory names it)."""
    reader = command if command in HIDDEN_READERS else "get"
    if isinstance(exc, DuplicateIdError) and exc.archived:
        return (
            f"node id {exc.node_id!r} is held by an archived memory ({exc.path}); `mdcg unarchive "
            f"{exc.node_id}` brings it back to change it, or choose another id (--overwrite never "
            "replaces an archived memory)"
        )
    if isinstance(exc, DuplicateIdError) and exc.untracked:
        return (
            f"node id {exc.node_id!r}: the file {exc.path} holds it, which the index does not know "
            f"yet (copied in, or brought by git); `mdcg sync` takes it in (then `mdcg update "
            f"{exc.node_id} ...`), or replace it with `mdcg add --overwrite`"
        )
    if isinstance(exc, DuplicateIdError) and exc.plain:  # else the library's own words
        return (
            f"node id {exc.node_id!r} already exists at {exc.path}; change it with "
            f"`mdcg update {exc.node_id} ...`, or replace it with `mdcg add --overwrite`"
        )
    if isinstance(exc, NodeHasIncomingEdgesError):
        sources = exc.sources(exc.incoming)
        return (
            f"node {exc.node_id!r} has incoming edges from {sources}; `mdcg delete --force` "
            "leaves them dangling (or remove the edges first)"
        )
    if isinstance(exc, ProtectedNodeError):
        return f"node {exc.node_id!r} is in anchor/ and protected; pass --force to forget it anyway"
    if isinstance(exc, NodeNotFoundError) and exc.hidden == "archived":
        return (
            f"node {exc.node_id!r} is archived: `mdcg {reader} --archived {exc.node_id}` reads it, "
            f"`mdcg unarchive {exc.node_id}` brings it back"
        )
    if isinstance(exc, NodeNotFoundError) and exc.hidden == "expired":
        renew = f"`mdcg update {exc.node_id} --tier long` renews it, " if exc.fix else ""  # a write
        return (
            f"node {exc.node_id!r}: {exc.hint}; {renew}`mdcg {reader} --expired {exc.node_id}` reads it, "
            "`mdcg sweep` removes it"
        )
    return " ".join(str(exc).split())


class _Group(TyperGroup):
    """Turns user errors into one line on stderr and exit status 2."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [name for name in COMMANDS if name in self.commands]

    def invoke(self, ctx: Any) -> Any:
        try:
            try:
                return super().invoke(ctx)
            finally:
                _flush_stdout()
        except BrokenPipeError:  # stdout closed early (`mdcg list | head -1`): stop quietly
            _drop_stdout()
            raise typer.Exit(EXIT_OK) from None
        except ImportSourceError as exc:  # a line per bad record
            first, *rest = str(exc).splitlines()
            _error_line(first, rest)
        except MdcgError as exc:
            command = ctx.invoked_subcommand
            _error_line(applied_write(str(exc), command) if was_applied(exc) else message(exc, command))
        except OSError as exc:
            text = os_error_message(exc, ctx.invoked_subcommand)
            if text is None:
                raise  # a bug, or a failing disk: the traceback
            _error_line(text)
        except KeyboardInterrupt as exc:
            if not was_applied(exc):
                raise
            # Ctrl-C in the fsync of a write's folders, its files all in place: say so
            typer.echo(f"error: {applied_write('interrupted', ctx.invoked_subcommand)}", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None


def os_error_message(exc: OSError, command: str | None = None) -> str | None:
    """The one-line message of an OS error naming its file, or None to keep the traceback.

    A full disk or quota and a read-only file system say what to do next; a
    failing disk (``EIO``) and an OSError that no system call raised (no
    errno: a bug) keep their traceback. An error appending the record of a change
    already made (:func:`md_cg.record_failed`) names the log folder and says so. An error,
    ``EIO`` included, raised once every file of the write was in place (only the fsync of
    their folders failed: :func:`md_cg.was_applied`) says the write is in place, not
    "nothing stored was lost ... run the command again" (:func:`md_cg.render.applied_write`).
    """
    if was_applied(exc):
        where = f"{exc.filename}: " if exc.filename else ""
        return applied_write(f"{where}{exc.strerror or exc}", command)
    if exc.errno is not None and exc.errno != errno.EIO and (log := record_failed(exc)):
        # the write landed; only its record in a log after it failed: name the log, not its temp file
        what = "the store's file system is read-only" if exc.errno == errno.EROFS else exc.strerror or exc
        return f"{what}; {recorded_write(log)}"
    where = f"{exc.filename}: " if exc.filename else ""
    if exc.filename and exc.filename2:
        where = f"{exc.filename} -> {exc.filename2}: "
    # A write interrupted after its commit line: part of it may be on disk (was_logged).
    logged = f"; {LOGGED_WRITE}" if was_logged(exc) else ""
    if was_recovering(exc):  # not this command's write: an earlier one it was finishing (r6)
        logged = f"; {RECOVERING_WRITE}"
    if exc.errno == errno.EROFS:
        # md-cg's own errors name the path relative to the store (fsops._read_only)
        if logged:
            return f"{where}the store's file system is read-only{logged}"
        return (
            f"{where}the store's file system is read-only; nothing was changed: reading commands "
            "work, writing ones need it mounted writable"
        )
    if is_out_of_room(exc):
        again = (
            "run the same command again to resume from the last committed batch"
            if command == "migrate"
            else "run the command again"
        )
        return f"{where}{exc.strerror or exc}; nothing stored was lost: make room, then {again}"
    if exc.errno is None or exc.errno == errno.EIO:
        return None
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{where}no such file or folder{logged}"
    return f"{where}{exc.strerror or exc}{logged}"


def _flush_stdout() -> None:
    """Write out what stdout holds, so that a closed pipe shows here, not at interpreter exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    except (OSError, ValueError):  # stdout closed or gone: nothing to write out
        pass


def _drop_stdout() -> None:
    """Point stdout at the null device: what is still buffered goes nowhere, quietly."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test runner's buffer)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _error_line(message: str, details: list[str] | None = None) -> None:
    first = " ".join(message.split())
    typer.echo(f"error: {first}", err=True)
    for line in details or ():
        typer.echo(line, err=True)
    raise typer.Exit(EXIT_ERROR)


app = typer.Typer(
    cls=_Group,
    name="mdcg",
    help="md-cg: an AI agent's long-term memory as a cognitive graph of Markdown files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    # Plain help: flags show as flags (rich help renders `--json <bool>`).
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class _Globals:
    root: Path | None = None
    quiet: bool = False


RootOpt = Annotated[
    Path | None,
    typer.Option(
        "--root",
        help=f"Store folder (default: ${ROOT_ENV}, else ./{DEFAULT_ROOT}, or . when . is a store).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display on stderr.")]


@app.callback()
def _main(
    ctx: typer.Context,
    root: Annotated[
        Path | None,
        typer.Option(
            "--root",
            envvar=ROOT_ENV,
            help=f"Store folder (default: ${ROOT_ENV}, else ./{DEFAULT_ROOT}, or . when . is a store).",
            show_default=False,
        ),
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """md-cg: an AI agent's long-term memory as a cognitive graph of Markdown files."""
    ctx.obj = _Globals(root=root, quiet=quiet)
    warnings.showwarning = _warning_line


def _warning_line(message: Warning | str, category: type[Warning], *_args: Any, **_kw: Any) -> None:
    """A library warning as one line on stderr (``warning: ...``), not Python's file:line form."""
    text = " ".join(str(message).split()).removeprefix("md-cg: ")
    typer.echo(f"warning: {text}", err=True)


# -- helpers ------------------------------------------------------------------------


def _globals(ctx: typer.Context) -> _Globals:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, _Globals) else _Globals()


def resolve_root(ctx: typer.Context, root: Path | None) -> Path:
    """The store folder: the command's ``--root``, the global one, ``$MDCG_ROOT``, else
    ``./memory`` -- or ``.`` when the current folder is a store and ``./memory`` is not
    one (a command run from inside the store folder works on it, not on a new store
    inside it)."""
    if root is not None:
        return root
    g = _globals(ctx)
    if g.root is not None:
        return g.root
    named = os.environ.get(ROOT_ENV)
    if named:
        return Path(named)
    from md_cg import is_store_folder

    if not is_store_folder(DEFAULT_ROOT) and is_store_folder("."):
        return Path(".")
    return Path(DEFAULT_ROOT)


def _store_folder(ctx: typer.Context, root: Path | None, *, create: bool = False) -> Path:
    """The store folder (:func:`resolve_root`), refused when it is a file, or missing and not
    to be created: every command that works on a store says so in the same words."""
    path = resolve_root(ctx, root)
    if path.is_file():
        raise InvalidArgumentError(
            f"{path}: is a file, not a store folder (point --root / ${ROOT_ENV} at a store folder, "
            "or at a new one to create)"
        )
    _refuse_nested(path, create)
    if not create and not path.is_dir():
        raise InvalidArgumentError(
            f"{path}: no such store folder (create one with `mdcg init --root {path}`, "
            f"or point --root / ${ROOT_ENV} at an existing store)"
        )
    return path


def _refuse_nested(path: Path, create: bool) -> None:
    """Refuse a store folder inside another store's folders or ``.mdcg/``, before anything
    is made (:func:`md_cg.enclosing_store`; the library refuses it too); and a symlink to
    nothing, in the library's words with the --root hint (else "create one with `mdcg
    init`", and init itself failed with "File exists")."""
    from md_cg import enclosing_store

    try:
        found = enclosing_store(path)
    except NotAStoreError as exc:
        if exc.link is None:
            raise
        what, fix = exc.link
        raise InvalidArgumentError(
            f"{path}: {what}; {fix}, or point --root / ${ROOT_ENV} at an existing store or a new folder"
        ) from None
    if found is None:
        return
    outer, in_meta = found
    where = (
        f"is in the .mdcg/ folder of the store {outer} (its local state, never in git)"
        if in_meta
        else f"is inside the store {outer}, not a store itself"
    )
    done = " (nothing was created)" if create else ""
    raise InvalidArgumentError(f"{path}: {where}; use --root {outer}{done}")


@contextmanager
def _open(
    ctx: typer.Context, root: Path | None, *, create: bool = False, read_only: bool = False
) -> Iterator[MdCG]:
    from md_cg import MdCG, with_departure

    path = _store_folder(ctx, root, create=create)
    with MdCG(path, create=create, read_only=read_only) as store:
        try:
            yield store
        except NodeNotFoundError as exc:  # an id asked for: say what became of it, if known
            told = with_departure(store, exc)
            if told is exc:
                raise
            raise told from exc


def _quiet(ctx: typer.Context, quiet: bool) -> bool:
    return quiet or _globals(ctx).quiet


class _Console(Console):
    """A console that leaves a closed stdout to :class:`_Group` (rich's own exits 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def _stdout(*, markup: bool = False) -> Console:
    """The console of tables: text shown as it is (no emoji codes; markup only if asked)."""
    return _Console(highlight=False, soft_wrap=False, emoji=False, markup=markup)


def _stderr() -> Console:
    return _Console(stderr=True, highlight=False, emoji=False)


def _jsonable(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=_jsonable))


def parse_context(text: str | None) -> Any:
    """A ``--context`` value: a JSON object, or else a plain domain string."""
    if text is None:
        return None
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"'):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(
                f"--context is not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        if isinstance(value, (dict, str)):
            return value
        raise InvalidArgumentError("--context must be a JSON object or a plain domain string")
    if not stripped:
        raise InvalidArgumentError("--context is empty (give a domain or a JSON object)")
    return stripped


@contextmanager
def _bar(ctx: typer.Context, quiet: bool, label: str) -> Iterator[Callable[[int, int | None], None]]:
    """A progress bar on stderr; ``update(done, total)``. Silent unless on a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _stderr()
    enabled = not _quiet(ctx, quiet) and console.is_terminal
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not enabled,
    )
    task = progress.add_task(label, total=None)

    def update(done: int, total: int | None = None) -> None:
        progress.update(task, completed=done, total=total)

    with progress:
        yield update


@contextmanager
def _status(ctx: typer.Context, quiet: bool, label: str) -> Iterator[Callable[[str], None]]:
    """A spinner with a message on stderr; ``say(message)`` changes the message."""
    console = _stderr()
    if _quiet(ctx, quiet) or not console.is_terminal:
        yield lambda _message: None
        return
    with console.status(label) as status:
        yield lambda message: status.update(f"{label}: {message}")


# -- commands -------------------------------------------------------------------------


@app.command()
def init(
    ctx: typer.Context,
    git: Annotated[
        bool,
        typer.Option(
            "--git",
            help="Also set up this git clone: the merge driver, and hooks that sync the index after a pull.",
        ),
    ] = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Create a store folder (layer folders, .mdcg/, .gitignore, .gitattributes). Idempotent.

    .gitattributes sends node files to md-cg's git merge driver; the lines
    printed say how to enable it in a clone, or --git does it (docs/git.md).
    """
    from md_cg import configure_clone
    from md_cg import install_merge_driver as install

    if git:
        _check_work_tree(resolve_root(ctx, root))
    with _open(ctx, root, create=True) as store:
        ignore = store.root / ".gitignore"
        had = ignore.read_bytes() if ignore.is_file() else None
        store.init_folder()  # a .gitignore the folder had gets md-cg's lines first: told here
        if had is not None and ignore.is_file() and ignore.read_bytes() != had:
            typer.echo(f"{store.root / '.gitignore'}: md-cg's lines put first (.mdcg/* ignored), yours kept")
        if store.loaded_from == "files":
            _save_index(store)
        how = install(store.root)
        done = configure_clone(store.root) if git else []
        if git:  # the driver is enabled: only the commit is left to do
            how = f"{store.root / '.gitattributes'} sends node files to the md-cg merge driver (commit it)\n"
        tracked, synced = _clone_checks(store) if git else (None, None)
        if json_out:
            out = {"root": str(store.root), "nodes": len(store), "merge_driver": how, "git": done}
            _print_json(out if not git else {**out, "tracked_state": tracked, "sync": synced})
        else:
            typer.echo(f"store ready at {store.root} ({len(store)} nodes)")
            typer.echo(how, nl=False)
            if git:
                typer.echo("\n".join(done))
                typer.echo("\n".join((synced or {}).get("lines", ())))
            if tracked:
                typer.echo(tracked, err=True)


def _clone_checks(store: MdCG) -> tuple[str | None, dict[str, Any] | None]:
    """``init --git``'s checks of the clone: the hooks' warning when git tracks files of the
    store's ``.mdcg/`` that are each clone's own state (:func:`md_cg.merge.tracked_warning`),
    and a sync of the store (as the hooks run after a pull): its report, with its lines
    (None when it could not run: a warning says why)."""
    from md_cg import tracked_warning

    tracked = tracked_warning(store.root)
    try:
        report = store.sync()
    except (MdcgError, OSError) as exc:
        reason = message(exc) if isinstance(exc, MdcgError) else os_error_message(exc) or str(exc)
        typer.echo(f"warning: the store was not synced ({reason}); run `mdcg sync`", err=True)
        return tracked, None
    clean = report.clean and not report.problems
    lines = [_in_sync(store)] if clean else [f"sync: {line}" for line in sync_lines(report)]
    return tracked, {"clean": report.clean, "problems": report.problems, **report.to_dict(), "lines": lines}


def _save_index(store: MdCG) -> None:
    """A snapshot of the index ``init`` built, so the next open starts from it: a file
    added by hand after init is then reported by ``mdcg sync``, not taken in silently.
    Not saved (a folder where the snapshot goes, another process compacting): a warning,
    the store is ready all the same -- the next compaction saves it."""
    try:
        store.compact_index()
    except (MdcgError, OSError) as exc:
        reason = message(exc) if isinstance(exc, MdcgError) else os_error_message(exc) or str(exc)
        typer.echo(f"warning: the index was not saved ({reason}); `mdcg health` says more", err=True)


def _check_work_tree(root: Path) -> None:
    """Refuse ``init --git`` before anything is created when ``root`` is not inside a git
    work tree (as :func:`md_cg.configure_clone` would, after the store was made)."""
    from md_cg import work_tree_of

    try:
        work_tree_of(root.absolute())
    except MdcgError as exc:
        raise InvalidArgumentError(f"{exc} (nothing was created)", name="--git") from None


def _parse_edge(spec: str) -> dict[str, Any]:
    target, sep, etype = spec.rpartition(":")
    if not sep:
        return {"target": spec}
    if not target:
        raise InvalidArgumentError(f"--edge {spec!r}: expected TARGET:TYPE")
    return {"target": target, "type": etype}


def _read_body(body: str | None) -> str:
    text = _body_text(body)
    if not text.strip():
        raise InvalidArgumentError("--body is empty: a memory needs some text", name="--body")
    return text


#: A memory file's limit (``md_cg.node.MAX_FILE_BYTES``, which is not public API; a test
#: holds the two equal): ``--body -`` and ``edit --from`` read at most one byte past it.
INPUT_LIMIT = 4 * 1024 * 1024


def _read_input(path: str | None, where: str, option: str) -> bytes:
    """The bytes of the file at ``path`` (None: stdin), read no further than one byte
    past :data:`INPUT_LIMIT`: read whole, ``--body - < /dev/zero`` ended in a
    MemoryError (or a machine out of memory) instead of this error."""
    if path is not None:
        with open(path, "rb") as f:
            data = f.read(INPUT_LIMIT + 1)
    elif hasattr(sys.stdin, "buffer"):
        data = sys.stdin.buffer.read(INPUT_LIMIT + 1)
    else:
        data = sys.stdin.read(INPUT_LIMIT + 1).encode("utf-8")
    if len(data) > INPUT_LIMIT:
        raise InvalidArgumentError(
            f"{where} is over the limit of {INPUT_LIMIT // 1024 // 1024} MiB "
            f"(more than {INPUT_LIMIT:,} bytes); nothing was written",
            name=option,
        )
    return data


def _body_text(body: str | None) -> str:
    if body is not None and body != "-":
        return body
    if body is None and sys.stdin.isatty():
        raise InvalidArgumentError("no body: give --body TEXT, or pipe it on stdin with --body -")
    raw = _read_input(None, "the body on stdin", "--body")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"the body on stdin is not valid UTF-8 (byte {exc.start}); pass UTF-8 text"
        ) from None
    # Like shell command substitution: the final newline of piped text is not part of it.
    return text[:-1] if text.endswith("\n") else text


TierOpt = Annotated[
    str | None,
    typer.Option(
        "--tier",
        help="temp (forgotten after the store's TTL, 7 days by default) or long (kept); "
        "default: decided from the text.",
    ),
]


@app.command()
def add(
    ctx: typer.Context,
    text: Annotated[
        str | None,
        typer.Argument(
            metavar="TEXT", help="The Markdown body (or give it with --body).", show_default=False
        ),
    ] = None,
    body: Annotated[
        str | None, typer.Option("--body", "-b", help="The Markdown body; '-' (or none) reads stdin.")
    ] = None,
    node_id: Annotated[str | None, typer.Option("--id", help="Node id (default: generated).")] = None,
    layer: Annotated[str, typer.Option("--layer", "-l", help="Layer folder.")] = "knowledge",
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="A tag (repeatable); domain:X routes.")
    ] = None,
    importance: Annotated[float | None, typer.Option(help="0..1")] = None,
    confidence: Annotated[float | None, typer.Option(help="0..1")] = None,
    basis: Annotated[
        str | None,
        typer.Option(
            "--basis",
            help="verification_basis: compiler, test, measurement, formal_proof, data, other.",
        ),
    ] = None,
    not_applicable: Annotated[
        list[str] | None,
        typer.Option("--not-applicable", help="A not-applicable condition (repeatable)."),
    ] = None,
    edge: Annotated[
        list[str] | None, typer.Option("--edge", help="An out-edge TARGET:TYPE (repeatable).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing node with this id.")
    ] = False,
    duplicate: Annotated[
        bool, typer.Option("--duplicate", help="Store it even if an identical memory is in the layer.")
    ] = False,
    tier: TierOpt = None,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Add a memory; print its id and file path (an identical one in the layer: its id, nothing
    written); a temporary one (a one-off, "tomorrow at 9") says when it expires."""
    if text is not None and body is not None:
        raise InvalidArgumentError("give the body once: as TEXT or with --body, not both", name="--body")
    fields: dict[str, Any] = {
        "body": _read_body(text if text is not None else body),
        "layer": layer,
        "tags": list(tag or []),
        "importance": importance,
        "confidence": confidence,
        "verification_basis": basis,
        "non_applicable_conditions": list(not_applicable or []),
        "edges": [_parse_edge(e) for e in edge or []],
    }
    if node_id is not None:
        fields["id"] = node_id
    with _open(ctx, root, create=True) as store:
        # an id given is a name the caller will ask for: store it as asked
        if duplicate or overwrite or node_id is not None:
            node, created = store.add(overwrite=overwrite, tier=tier, **fields), True
        else:
            node, created = store.add_unique(tier=tier, **fields)
        path = store.path_of(node.id)
        unknown = [e.target for e in node.edges if e.target not in store] if created else []
        twins = {t: twin for t in unknown if (twin := store.twin_of(t)) is not None}
        gone = {t: d.describe() for t in unknown if t not in twins and (d := store.departure(t)) is not None}
    _report_added(node, path, created, unknown, json_out, (twins, gone))


def _report_added(
    node: Node,
    path: Path,
    created: bool,
    unknown: list[str],
    json_out: bool,
    hints: tuple[dict[str, str], dict[str, str]],
) -> None:
    """What ``mdcg add`` prints: ID<TAB>PATH (or the JSON), and on stderr the edge
    targets no memory has (``hints``: the twins -- those differing from a memory's id only
    by letter case or Unicode form, and that id -- and what became of the others the audit
    log knows, renamed or forgotten: :meth:`MdCG.departure`), an identical memory found, a
    temporary memory's expiry. The notes are :func:`terminal_safe`: an id refuses controls
    but may hold a bidi mark."""
    twins, gone = hints
    say = _stderr()
    for target in unknown:  # stored: a target may come later (a git pull); health lists them
        said, hint = _twin_note(target, twins.get(target))
        hint = f"{gone[target]}; " if target in gone else hint
        say.print(
            terminal_safe(
                f"{node.id}: edge target {said} is not in the store ({hint}stored anyway; "
                "`mdcg health` lists dangling edges)"
            ),
            soft_wrap=True,
            markup=False,
        )
    if not created:
        say.print(
            terminal_safe(
                f"{node.id}: an identical memory is already in {node.layer}/; nothing was written "
                "(--duplicate stores another)"
            ),
            soft_wrap=True,
            markup=False,
        )
    if json_out:
        out = {"id": node.id, "layer": node.layer, "path": str(path), "existing": not created}
        told = ({"did_you_mean": twins} if twins else {}) | ({"departed": gone} if gone else {})
        data = {**out, **_retention_json(node), "unknown_targets": unknown, **told}
        if any(distinct_labels(pair)[t] != t for pair in twins.items() for t in pair):
            # a Unicode-form twin prints as the target does ({"Café": "Café"}): written with
            # JSON's \u escapes, the values stay exact for a parser and print apart for the eye
            typer.echo(json.dumps(data, ensure_ascii=True, indent=2, default=_jsonable))
        else:
            _print_json(data)
        return
    typer.echo(f"{node.id}\t{path}")
    _say_expiry(node)


def _twin_note(target: str, twin: str | None) -> tuple[str, str]:
    """How ``mdcg add``'s note names an unknown edge target, and its ``did you mean`` (empty
    without a ``twin``): NFC and NFD twins print alike (``Café``), so both are then
    escaped, as the unknown-id error writes them (``'Cafe\\u0301'``, ``'Caf\\u00e9'``)."""
    if twin is None:
        return repr(target), ""
    labels = {i: repr(i) if s == i else s for i, s in distinct_labels((target, twin)).items()}
    return labels[target], f"did you mean {labels[twin]}? ids differ by letter case or Unicode form; "


def _retention_json(node: Node) -> dict[str, Any]:
    """``tier`` and ``expires`` (None for a memory kept)."""
    return {"tier": "long", "expires": None} | retention(node)


def _say_expiry(node: Node) -> None:
    """On stderr: when a temporary memory goes, why, and how to keep it."""
    kept = retention(node)
    if kept["tier"] == "temp":
        why = f" ({node.retention_reason})" if node.retention_reason else ""
        _stderr().print(
            terminal_safe(
                f"{node.id}: temporary, expires {kept['expires']}{why}; "
                f"`mdcg update {node.id} --tier long` keeps it"
            ),
            soft_wrap=True,
            markup=False,
        )


IdArg = Annotated[str, typer.Argument(metavar="ID", help="Node id.")]


ArchivedOpt = Annotated[bool, typer.Option("--archived", help="Also read an archived memory.")]
ExpiredOpt = Annotated[bool, typer.Option("--expired", help="Also read an expired temporary memory.")]


def _to_terminal() -> bool:
    """Whether stdout is a terminal: ``get`` and ``show`` then escape the controls of a
    body (an escape sequence in it would drive the terminal); a pipe or a file gets the
    exact text."""
    return sys.stdout.isatty()


@app.command()
def get(
    ctx: typer.Context,
    node_id: IdArg,
    archived: ArchivedOpt = False,
    expired: ExpiredOpt = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print a memory: its fields, one per line, then its body (--json: the fields as JSON).
    A superseded memory names the memory that supersedes it (``superseded_by``)."""
    seen = {"include_archived": archived, "include_expired": expired}
    with _open(ctx, root, read_only=True) as store:
        node = store.get(node_id, **seen)
        path = store.path_of(node_id, **seen)
        newer = current_version(store, node_id)  # as superseded_by (of an archived one too)
        if json_out:
            out = node_dict(node, str(path))
            _print_json(out if newer is None else {**out, "superseded_by": newer})
        else:
            text = node_text(node, str(path.relative_to(store.root)), terminal=_to_terminal())
            head, _, rest = text.partition("\n")
            said = "" if newer is None else f"superseded_by: {terminal_safe(newer)}\n"
            sys.stdout.write(f"{head}\n{said}{rest}")


@app.command()
def show(
    ctx: typer.Context,
    node_id: IdArg,
    archived: ArchivedOpt = False,
    expired: ExpiredOpt = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Print a memory's file exactly as stored (frontmatter and body); on a terminal, its
    controls other than line ends and tabs are shown escaped."""
    seen = {"include_archived": archived, "include_expired": expired}
    with _open(ctx, root, read_only=True) as store:
        text = store.read_text(node_id, **seen)
        if json_out:
            _print_json({"id": node_id, "path": str(store.path_of(node_id, **seen)), "text": text})
        else:
            sys.stdout.write(terminal_safe(text, lines=True) if _to_terminal() else text)
            sys.stdout.flush()


def _when(value: str | None, option: str) -> float | None:
    """A ``--since``/``--until`` time; a date alone as ``--until`` takes in that whole day."""
    return None if value is None else parse_when(value, name=option, end_of_day=option == "--until")


TagOpt = Annotated[
    list[str] | None,
    typer.Option("--tag", "-t", help="Only memories with this tag (repeated: with every one of them)."),
]


def _tags(tags: list[str] | None) -> str | list[str] | None:
    """The library's tag filter of repeated --tag options."""
    return None if not tags else tags[0] if len(tags) == 1 else list(tags)


SinceOpt = Annotated[
    str | None, typer.Option(help="Changed since: an ISO date/time, or a duration back (7d, 12h, 30m).")
]
UntilOpt = Annotated[
    str | None,
    typer.Option(
        help="Changed until: an ISO date/time (a date alone: to the end of that day, UTC or its offset), "
        "or a duration back (7d, 12h, 30m)."
    ),
]


@app.command(name="list")
def list_(
    ctx: typer.Context,
    layer: Annotated[str | None, typer.Option("--layer", "-l", help="Only this layer.")] = None,
    tag: TagOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Memories shown.", min=1)] = 50,
    offset: Annotated[int, typer.Option(help="Memories skipped first.", min=0)] = 0,
    archived: Annotated[bool, typer.Option("--archived", help="Also list archived memories.")] = False,
    expired: Annotated[bool, typer.Option("--expired", help="Also list expired temporary memories.")] = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List memories, newest first (last change), by layer, tag and time."""
    start, end = _when(since, "--since"), _when(until, "--until")
    with _open(ctx, root, read_only=True) as store:
        total, page = store.list_page(
            layer,
            tag=_tags(tag),
            since=start,
            until=end,
            limit=limit,
            offset=offset,
            include_archived=archived,
            include_expired=expired,
        )
    if json_out:
        items = [
            {
                "id": e.id,
                "layer": e.layer,
                "title": e.title,
                "tags": list(e.tags),
                "created": iso(e.created_at),
                "updated": iso(e.updated_at),
                "path": e.path,
            }
            for e in page
        ]
        _print_json({"total": total, "offset": offset, "items": items})
        return
    if not page:
        typer.echo(f"no memories ({total} match)" if total else "no memories match")
        return
    out = _stdout()
    out.print(entries_table(page, width=out.width), crop=False)
    more = f"; --offset {offset + len(page)} for more" if offset + len(page) < total else ""
    typer.echo(f"{offset + 1}-{offset + len(page)} of {total}{more}")


@app.command()
def update(
    ctx: typer.Context,
    node_id: IdArg,
    body: Annotated[
        str | None, typer.Option("--body", "-b", help="New Markdown body; '-' reads stdin.")
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="The tags (repeatable; replaces all tags).")
    ] = None,
    no_tags: Annotated[bool, typer.Option("--no-tags", help="Remove every tag.")] = False,
    layer: Annotated[str | None, typer.Option("--layer", "-l", help="Move to this layer.")] = None,
    importance: Annotated[float | None, typer.Option(help="0..1")] = None,
    confidence: Annotated[float | None, typer.Option(help="0..1")] = None,
    basis: Annotated[str | None, typer.Option("--basis", help="verification_basis.")] = None,
    tier: TierOpt = None,
    reopen: Annotated[
        bool,
        typer.Option(
            "--reopen",
            help="Make a superseded (closed) memory current: clear valid_until and remove the "
            "supersedes edge to it from each memory that has one (archived ones too).",
        ),
    ] = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Change a memory's body, tags, layer, importance, confidence, basis or tier (only what is given).

    An archived memory is refused (unarchive it first); an expired temporary one too,
    unless --tier is given: `--tier long` (or `--tier temp`, a new TTL from now) renews it.
    """
    if tag and no_tags:
        raise InvalidArgumentError("--tag and --no-tags exclude each other")
    changes: dict[str, Any] = {
        "layer": layer,
        "importance": importance,
        "confidence": confidence,
        "verification_basis": basis,
        "tags": [] if no_tags else (list(tag) if tag else None),
        "retention_tier": tier,
    }
    if body is not None:
        changes["body"] = _read_body(body)
    changes = {k: v for k, v in changes.items() if v is not None}
    if reopen:
        changes["valid_until"] = None
    if not changes:
        raise InvalidArgumentError(
            "nothing to update: give --body, --tag, --layer, --importance, --confidence, --basis, --tier "
            "or --reopen"
        )
    with _open(ctx, root) as store:
        # unlinked: the successors whose supersedes edge went, as the commit found them
        node, unlinked, changed = store.update_report(node_id, **changes)
        path = store.path_of(node.id)
    names = {"retention_tier": "tier", "valid_until": "reopen"}
    updated = sorted(names.get(k, k) for k in changes) if changed else []
    if json_out:
        out = {"id": node.id, "layer": node.layer, "path": str(path), "updated": updated, "changed": changed}
        if unlinked:
            out["successors_unlinked"] = unlinked
        _print_json({**out, **_retention_json(node)})
    else:
        typer.echo(
            f"{node.id}: updated {', '.join(updated)} ({path})" if changed else f"{node.id}: no change"
        )
        if unlinked:
            typer.echo(
                f"{node.id}: no longer superseded by {', '.join(unlinked)} (their supersedes edge removed)"
            )
        _say_expiry(node)


#: Environment variable naming the editor of ``mdcg edit`` (before $VISUAL and $EDITOR).
EDITOR_ENV = "MDCG_EDITOR"


def editor_command(option: str | None = None) -> str:
    """The editor ``mdcg edit`` runs.

    ``--editor``, else $MDCG_EDITOR, $VISUAL, $EDITOR, else vi (notepad on Windows).
    """
    for value in (option, os.environ.get(EDITOR_ENV), os.environ.get("VISUAL"), os.environ.get("EDITOR")):
        if value and value.strip():
            return value.strip()
    return "notepad" if os.name == "nt" else "vi"


def _run_editor(editor: str, path: str, base: str) -> str:
    """Run ``editor`` on ``path`` as git does: through the shell, so the command may hold
    options; the text it saved.

    An editor that fails, removes its copy or is interrupted (^C) writes nothing; the
    file is removed unless it holds an edit (``base`` is the text it was given first),
    and a kept one is named (^C: on stderr, as the interrupt ends the command).
    """
    try:
        if os.name == "nt":
            status = subprocess.run(f'{editor} "{path}"', shell=True, check=False).returncode
        else:
            status = subprocess.run(["sh", "-c", editor + ' "$@"', editor, path], check=False).returncode
        failed = f" exited with status {status}{' (not found?)' if status == 127 else ''}" if status else ""
        if not os.path.lexists(path):  # read anyway, it said "no such file or folder", no editor
            raise InvalidArgumentError(
                f"the editor {editor!r}{failed}{' and' if status else ''} removed its copy {path}; "
                "nothing was written",
                name="--editor",
                value=editor,
            )
        if status:
            raise InvalidArgumentError(
                f"the editor {editor!r}{failed}; nothing was written{_keep_copy(path, base)}",
                name="--editor",
                value=editor,
            )
        return _edited_text(path, copy=True)
    except KeyboardInterrupt:
        typer.echo(f"nothing was written{_keep_copy(path, base)}", err=True)
        raise


def _keep_copy(path: str, base: str) -> str:
    """Remove the editor's copy at ``path`` unless it holds an edit (not ``base``); the
    words naming a kept copy."""
    try:
        if Path(path).read_bytes() != base.encode("utf-8"):
            return f"; the edited text is kept in {path}"
        os.unlink(path)
    except FileNotFoundError:
        pass
    return ""


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _edited_text(path: str | None, *, copy: bool = False) -> str:
    """The UTF-8 text of the file at ``path`` (None: stdin), bytes as they are; ``--from``
    is read no further than the file limit, the editor's ``copy`` whole (a text over it
    is told, and edited again, as any invalid edit is)."""
    where = "the text on stdin" if path is None else f"{path}: the text"
    data = Path(path).read_bytes() if copy and path else _read_input(path, where, "--from")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"{where} is not UTF-8 (byte {exc.start}); nothing was written", name="--from"
        ) from None


def _apply_edit(store: MdCG, node_id: str, base: str, text: str, kept: str) -> Any:
    """Write ``text`` as the node's file if the file still holds ``base``, else EditConflictError."""

    def change(current: str) -> str:
        if current != base:
            raise EditConflictError(node_id, kept)
        return text

    return store.edit_text(node_id, change)


def _write_edit(
    ctx: typer.Context, root: Path | None, node_id: str, edit: tuple[str, str, str], stored: list[Any]
) -> tuple[Any, Path]:
    """Store ``edit`` (base, text, kept file) as the node's file: the node and its path.
    ``stored`` gets the node once written, so that what fails after the write (reading
    its path, closing the store) is not told as "nothing was written". The path of a
    node the edit made expired is read too (its file holds the edit until a sweep)."""
    base, text, kept = edit
    with _open(ctx, root) as store:
        # A warning the write gives (an expiry already past) is given after ``stored`` has
        # the node: warnings made errors (-W error) then fail "after the write", as they do.
        with warnings.catch_warnings(record=True) as given:
            warnings.simplefilter("always")
            node = _apply_edit(store, node_id, base, text, kept)
        stored.append(node)
        for w in given:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return node, store.path_of(node.id, include_expired=True)


def _after_write(node_id: str, kept: str) -> None:
    """Say that the edit is stored when what failed came after its write (nothing is
    lost: the kept copy of the text goes); the caller raises the error after it."""
    os.unlink(kept)
    typer.echo(
        f"{node_id}: the edit was stored (the kept copy {kept} removed); what failed after it:", err=True
    )


def _edit_loop(ctx: typer.Context, root: Path | None, node_id: str, editor: str) -> tuple[Any, bool]:
    """Edit a copy of the node's file in ``editor`` until it is stored, unchanged or given up on
    (a text parsing to the node as stored is unchanged: nothing is written)."""
    with _open(ctx, root, read_only=True) as store:
        base = store.read_text(node_id)
        before = store.get(node_id)
        folder = store.path_of(node_id).parent
    if not os.access(folder, os.W_OK):  # before the editor, not after the typing
        raise InvalidArgumentError(
            f"{folder}: the memory's folder is not writable (a read-only file system or copy?); "
            "nothing was opened for editing"
        )
    fd, tmp = tempfile.mkstemp(prefix=f"mdcg-{node_id[:40]}-", suffix=".md")
    with os.fdopen(fd, "wb") as f:
        f.write(base.encode("utf-8"))
    while True:
        text = _run_editor(editor, tmp, base)
        if text == base:
            os.unlink(tmp)
            return None, False
        stored: list[Any] = []  # the node, once its file holds the edit
        try:
            node, path = _write_edit(ctx, root, node_id, (base, text, tmp), stored)
        except InvalidNodeError as exc:
            if stored:
                _after_write(node_id, tmp)
                raise
            if not _interactive():
                raise InvalidNodeError(f"{exc}; the edited text is kept in {tmp}", node_id=node_id) from None
            typer.echo(f"error: {message(exc)}", err=True)
            if not typer.confirm("edit again?", default=True, err=True):
                raise InvalidNodeError(
                    f"nothing was written; the edited text is kept in {tmp}", node_id=node_id
                ) from None
            continue
        except EditConflictError:
            raise  # its message names the kept file
        except BaseException:  # the node gone, a lock timeout, a full disk, ^C: the text stays
            if stored:
                _after_write(node_id, tmp)
                raise
            typer.echo(f"nothing was written; the edited text is kept in {tmp}", err=True)
            raise
        os.unlink(tmp)
        return (node, path), node != before


@app.command()
def edit(
    ctx: typer.Context,
    node_id: IdArg,
    editor: Annotated[
        str | None,
        typer.Option(
            "--editor",
            help="Editor command (default: $MDCG_EDITOR, $VISUAL, $EDITOR, vi).",
            show_default=False,
        ),
    ] = None,
    from_file: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="FILE",
            help="Take the new file text from FILE ('-': stdin) instead of an editor.",
        ),
    ] = None,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Edit a memory's file in your editor; it is checked and stored when the editor exits."""
    if from_file is not None and editor is not None:
        raise InvalidArgumentError("--from and --editor exclude each other", name="--from")
    if from_file is not None:
        text = _edited_text(None if from_file == "-" else from_file)
        with _open(ctx, root) as store:
            before = store.get(node_id)
            node = store.edit_text(node_id, lambda _stored: text)
            changed = node != before  # the node as stored when the text holds the same
            done: Any = (node, store.path_of(node.id, include_expired=True))  # an edit may expire it
    else:
        done, changed = _edit_loop(ctx, root, node_id, editor_command(editor))
        if done is None:
            with _open(ctx, root, read_only=True) as store:
                done = (store.get(node_id), store.path_of(node_id))
    node, path = done
    if json_out:
        _print_json({"id": node.id, "layer": node.layer, "path": str(path), "changed": changed})
    elif changed:
        typer.echo(f"{node.id}: edited ({path})")
    else:
        typer.echo(f"{node.id}: no change")


@app.command()
def rename(
    ctx: typer.Context,
    node_id: IdArg,
    new_id: Annotated[str, typer.Argument(metavar="NEW_ID", help="The new id (must be free).")],
    layer: Annotated[str | None, typer.Option("--layer", "-l", help="Also move to this layer.")] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--path",
            help="Rename only this file of the id (relative to the store), one of several holding it "
            "(health's duplicate_id); the file shown keeps the id.",
        ),
    ] = None,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Give a memory a new id: one commit that also re-points every edge linking to it."""
    with _open(ctx, root) as store:
        old_path = store.path_of(node_id) if file is None else store.root / file
        node = store.rename(node_id, new_id, layer=layer, path=file)
        path = store.path_of(node.id)
    if json_out:
        _print_json({"id": node.id, "old_id": node_id, "layer": node.layer, "path": str(path)})
    else:
        typer.echo(f"{node_id} -> {node.id} ({old_path} -> {path})")


def _dangling(incoming: Any) -> list[dict[str, str]]:
    return [{"source": src, "type": etype} for src, etype in incoming]


def _echo_left(deleted: Deleted, lists: str) -> None:
    """What a delete or forget left behind (dangling edges, memories it had superseded)
    and the other files of the id it removed with it; :func:`terminal_safe`, as the
    first line (an id refuses controls but may hold a bidi mark: U+202E). The edges
    are named as the refusal without ``--force`` names them, the first 20 and how many
    more (``lists``: where every one is): a memory 5,000 others link to printed one
    90 KB line."""
    lines = []
    if deleted.copies:
        lines.append("its copies removed too: " + ", ".join(deleted.copies))
    if deleted.incoming:
        edges = NodeHasIncomingEdgesError.sources(deleted.incoming)
        more = len(deleted.incoming) > NodeHasIncomingEdgesError.LISTED
        lines.append(f"edges left dangling: {edges}" + (f" ({lists} lists every one)" if more else ""))
    closed = [
        f"{old}: still closed (it superseded it); if it is true again: mdcg update {old} --reopen"
        for old in deleted.left_closed
    ]
    lines += _capped(closed, "still closed", "--json")
    for line in lines:
        typer.echo(terminal_safe(line))


@app.command()
def delete(
    ctx: typer.Context,
    node_id: IdArg,
    force: Annotated[
        bool, typer.Option("--force", help="Delete even if other memories link to it (edges left dangling).")
    ] = False,
    all_copies: Annotated[
        bool,
        typer.Option("--all-copies", help="Also remove other files of the id holding a different memory."),
    ] = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Delete a memory's file (no tombstone; `mdcg forget` keeps one and scrubs the index)."""
    with _open(ctx, root) as store:
        path = store.path_of(node_id)
        deleted = store.delete(node_id, force=force, all_copies=all_copies)
    if json_out:
        _print_json(
            {
                "id": node_id,
                "layer": deleted.node.layer,
                "dangling_edges": _dangling(deleted.incoming),
                "left_closed": list(deleted.left_closed),
                "copies": list(deleted.copies),
            }
        )
        return
    typer.echo(terminal_safe(f"{node_id}: deleted ({path})"))
    _echo_left(deleted, "`mdcg health --json`")


@app.command()
def forget(
    ctx: typer.Context,
    node_id: IdArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (required; kept in the tombstone).")],
    force: Annotated[bool, typer.Option("--force", help="Also forget a protected anchor/ memory.")] = False,
    all_copies: Annotated[
        bool,
        typer.Option("--all-copies", help="Also remove other files of the id holding a different memory."),
    ] = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Forget a memory for good: a content-free tombstone, the file removed, the index scrubbed."""
    if not reason.strip():  # named as the option it is (the library says forget(id) needs a reason)
        raise InvalidArgumentError("--reason is empty: forgetting needs a reason (kept in the tombstone)")
    with _open(ctx, root) as store:
        deleted = store.forget(node_id, reason, force=force, all_copies=all_copies)
    if json_out:
        _print_json(
            {
                "id": node_id,
                "forgotten": True,
                "layer": deleted.node.layer,
                "dangling_edges": _dangling(deleted.incoming),
                "left_closed": list(deleted.left_closed),
                "copies": list(deleted.copies),
            }
        )
        return
    typer.echo(terminal_safe(f"{node_id}: forgotten ({deleted.node.layer}); tombstone kept"))
    _echo_left(deleted, "the tombstone in .mdcg/audit/")


@app.command()
def keep(ctx: typer.Context, node_id: IdArg, root: RootOpt = None, json_out: JsonOpt = False) -> None:
    """Keep a memory forgotten here that a git merge or checkout brought back (health stops naming it)."""
    with _open(ctx, root) as store:
        store.keep_returned(node_id)
    if json_out:
        _print_json({"id": node_id, "kept": True})
    else:
        typer.echo(f"{node_id}: kept (no longer reported as forgotten and back)")


IdsArg = Annotated[list[str], typer.Argument(metavar="ID...", help="Node ids.")]


@app.command()
def archive(
    ctx: typer.Context,
    node_ids: IdsArg,
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why (kept in the archive log).")] = "",
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Move memories to archive/ byte for byte: out of every default read, nothing deleted."""
    with _open(ctx, root) as store:
        moved = store.archive(list(dict.fromkeys(node_ids)), reason=reason)  # an id given twice once
    if json_out:
        _print_json({"archived": moved})
    else:
        typer.echo(f"archived {len(moved)}: {', '.join(moved)}" if moved else "nothing to archive")


@app.command()
def unarchive(ctx: typer.Context, node_ids: IdsArg, root: RootOpt = None, json_out: JsonOpt = False) -> None:
    """Move archived memories back to where they were."""
    with _open(ctx, root) as store:
        moved = store.unarchive(list(dict.fromkeys(node_ids)))
    if json_out:
        _print_json({"unarchived": moved})
    else:
        typer.echo(f"unarchived {len(moved)}: {', '.join(moved)}" if moved else "nothing to unarchive")


@app.command()
def supersede(
    ctx: typer.Context,
    old_id: Annotated[str, typer.Argument(metavar="OLD", help="The memory that no longer holds.")],
    new_id: Annotated[str, typer.Argument(metavar="NEW", help="The memory that replaces it.")],
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why.")] = "",
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Mark OLD as superseded by NEW: search hides OLD by default; nothing is deleted."""
    with _open(ctx, root) as store:
        store.supersede(old_id, new_id, reason)
    if json_out:
        _print_json({"old": old_id, "new": new_id, "reason": reason})
    else:
        typer.echo(terminal_safe(f"{old_id}: superseded by {new_id}"))


@app.command()
def sweep(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list the expired temporary memories.")
    ] = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Remove the temporary memories past their expiry (a tombstone each)."""
    with _open(ctx, root) as store:
        report = store.sweep(dry_run=dry_run)
    if json_out:
        _print_json(report.to_dict())
    else:
        if dry_run:
            typer.echo(f"expired ({len(report.expired):,}): {id_list(report.expired)}; nothing removed")
        else:
            typer.echo(f"removed ({len(report.removed):,}): {id_list(report.removed)}")
        for node_id, why in report.kept[:LINE_IDS]:
            typer.echo(f"kept {node_id}: {why}")
        if len(report.kept) > LINE_IDS:
            typer.echo(f"... and {len(report.kept) - LINE_IDS:,} more kept (--json lists every one)")


def _read_json_file(path: Path, option: str) -> Any:
    """The JSON of an organize input file; what cannot be read is a one-line error naming
    the file (exit 2). Lists or objects nested past the parser's depth (100,000 ``[``)
    raised a bare RecursionError, a traceback with exit 1."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(
            f"{option} {path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            name=option,
        ) from None
    except RecursionError:
        raise InvalidArgumentError(
            f"{option} {path}: cannot be read: lists or objects nested too deeply "
            "(organize takes a JSON list of objects)",
            name=option,
        ) from None
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{option} {path}: not UTF-8 text", name=option) from None


@app.command()
def organize(
    ctx: typer.Context,
    dry_run: Annotated[
        Path | None,
        typer.Option(
            "--dry-run", metavar="FILE.json", help="Compare these candidates (a JSON list) with the store."
        ),
    ] = None,
    apply: Annotated[
        str | None,
        typer.Option(
            "--apply", metavar="RUN_ID", help="Apply a dry run's decisions, exactly once, all or nothing."
        ),
    ] = None,
    decisions: Annotated[
        Path | None,
        typer.Option("--decisions", metavar="FILE.json", help="With --apply: the decisions (a JSON list)."),
    ] = None,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Find near-duplicates among candidate memories (dry run), then save/discard/archive (apply)."""
    if (dry_run is None) == (apply is None):
        raise InvalidArgumentError("give either --dry-run FILE.json or --apply RUN_ID --decisions FILE.json")
    if apply is not None and decisions is None:
        raise InvalidArgumentError("--apply needs --decisions FILE.json")
    if dry_run is not None and decisions is not None:
        raise InvalidArgumentError("--decisions goes with --apply, not --dry-run")
    with _open(ctx, root) as store:
        if dry_run is not None:
            result = store.organize("dryRun", candidates=_read_json_file(dry_run, "--dry-run"))
        else:
            assert decisions is not None
            # all or nothing: one decision the dry run does not back refuses them all, run left open
            given = _read_json_file(decisions, "--decisions")
            result = store.organize("apply", run_id=apply, decisions=given, strict=True)
    data = result.to_dict()
    if json_out:
        _print_json(data)
        return
    counts = ", ".join(f"{k} {v}" for k, v in data["counts"].items())
    typer.echo(f"{data['run_id']} ({data['mode']}): {data['status']}; {counts}")
    for item in data.get("items", []):
        match = item.get("match") or {}
        where = f" (matches {match['id']}, score {match['score']})" if match else ""
        if item.get("repeats") is not None:  # an earlier candidate of the run holds the text
            said = f", score {item['score']}" if item.get("score") is not None else ""  # in other words
            where = f" (of #{item['repeats']}{said})"
        typer.echo(f"  #{item['index']} {item['verdict']}{where}: {clip(item['title'], 60)}")
    for key in ("saved_ids", "archived_ids"):
        if data.get(key):
            typer.echo(f"  {key.split('_')[0]}: {', '.join(data[key])}")
    for skip in data.get("skipped", []):
        typer.echo(f"  skipped: {skip['reason']}")
    for note in data.get("notes", []):  # saved beside what the dry run judged it near
        typer.echo(terminal_safe(f"  note: {note}"))
    if data["mode"] == "dryRun" and data.get("items"):
        typer.echo(f"apply with: mdcg organize --apply {data['run_id']} --decisions FILE.json")


#: The most days ``stats --window-days`` / ``--exempt-days`` take (the library's cap).
MAX_DAYS = 365


def _check_days(value: int, option: str, low: int) -> None:
    # The library falls back to its defaults on values out of range (docs/recall.md): refuse them here.
    if not low <= value <= MAX_DAYS:
        raise InvalidArgumentError(
            f"{option} must be from {low} to {MAX_DAYS} days, got {value}", name=option
        )


@app.command()
def stats(
    ctx: typer.Context,
    window_days: Annotated[
        int, typer.Option("--window-days", help="Days of the access log looked at (1..365).")
    ] = 30,
    exempt_days: Annotated[
        int, typer.Option("--exempt-days", help="Memories younger than this are not zombies (0..365 days).")
    ] = 7,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Recall statistics: top recalled memories, zombie rate, injection slot fill, log coverage."""
    _check_days(window_days, "--window-days", 1)
    _check_days(exempt_days, "--exempt-days", 0)
    with _open(ctx, root, read_only=True) as store:
        data = store.recall_stats(window_days=window_days, exempt_days=exempt_days).to_dict()
    if json_out:
        _print_json(data)
        return
    z, inj, cov = data["zombie"], data["injection"], data["coverage"]
    rate = "n/a" if z["zombie_rate"] is None else f"{z['zombie_rate']:.1%}"
    fill = "n/a" if inj["slot_fill_rate"] is None else f"{inj['slot_fill_rate']:.1%}"
    typer.echo(
        f"window {data['options'].get('window_days')} d since "
        f"{iso(datetime.fromisoformat(cov['window_start']).timestamp())}"
        f"{'' if cov['full_window'] else ' (the log does not cover all of it)'}"
    )
    typer.echo(
        f"zombies: {z['zombie_count']}/{z['eligible_count']} eligible ({rate}); "
        f"injection: {inj['injected_count']} in {inj['runs']} run(s), slot fill {fill}"
    )
    if z["file_recalled_count"]:
        typer.echo(
            f"not zombies: {z['file_recalled_count']} eligible memory(ies) whose files record a recall "
            "in the window (access_count / last_access from before the access log: a migration's)"
        )
    for r in data["top_recalled"]:
        typer.echo(
            terminal_safe(f"  {r['count']:>5}  {r['id']}  {clip(terminal_safe(r['title'] or ''), 60)}")
        )


@app.command()
def today(ctx: typer.Context, root: RootOpt = None, json_out: JsonOpt = False) -> None:
    """One old memory brought back "on this day" (the show is recorded)."""
    from md_cg import resurface_readable  # here: importing the CLI loads no heavy module

    with _open(ctx, root) as store:
        picked, node, unreadable = resurface_readable(store)
        title = store.entry(picked.id).title if picked is not None else None
    for node_id, exc in unreadable:  # passed over, never shown: a person should repair the file
        why = f"warning: passed over {node_id!r}, whose file cannot be read: {exc}"
        typer.echo(terminal_safe(" ".join(why.split())), err=True)
    if json_out:
        skipped = {"unreadable_skipped": len(unreadable)} if unreadable else {}
        _print_json({"memory": None if picked is None else {**picked.to_dict(), "title": title}, **skipped})
        return
    if picked is None or node is None:
        typer.echo("nothing readable to bring back" if unreadable else "nothing to bring back yet")
        return
    if picked.years_ago or picked.months_ago:
        ago = f"{picked.years_ago} year(s) ago" if picked.years_ago else f"{picked.months_ago} month(s) ago"
    else:  # the last resort picks among every node, today's included
        days = (datetime.now().astimezone().date() - picked.date).days  # the local day, as resurface
        ago = "today" if days == 0 else f"{days} day(s) ago"
    head = f"{picked.id} · {ago} ({picked.date.isoformat()}) · shown {picked.show_count} time(s) before"
    body = node.body if node.body.endswith("\n") else node.body + "\n"
    typer.echo(terminal_safe(head))  # as ``get``: the body exact through a pipe, escaped on a terminal
    sys.stdout.write(terminal_safe(body, lines=True) if _to_terminal() else body)


@app.command()
def inject(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What the prompt is about.")],
    max_items: Annotated[int, typer.Option("--max", "-n", help="Most memories.", min=0)] = 5,
    tag: TagOpt = None,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Compact memories to put in a prompt (never filler); recorded as an injection."""
    with _open(ctx, root) as store:
        items = store.inject(query, max_items=max_items, tag=_tags(tag))
    if json_out:  # hits whose files a hand edit broke are left out, counted and warned of
        omitted = {"unreadable_omitted": len(items.unreadable)} if items.unreadable else {}
        _print_json({"query": query, "items": [i.to_dict() for i in items], **omitted})
        return
    if not items:
        typer.echo("nothing relevant to inject")
    # Piped into a prompt: the memory's text as stored (written, not echoed: click would
    # strip its `ESC [` sequences and leave the rest); on a terminal: escaped, as ``get``.
    terminal = _to_terminal()
    for i in items:
        line = f"- [{i.id}] {i.text}"
        sys.stdout.write((terminal_safe(line) if terminal else line) + "\n")


KOpt = Annotated[int, typer.Option("-k", "--limit", help="Number of results.")]
ContextOpt = Annotated[
    str | None,
    typer.Option(
        "--context",
        "-c",
        help='Routing and judging context: a domain ("计算机科学") or a JSON object '
        '({"domain": ..., "tags": [...], "condition_space": {...}, "big_domain": "auto"}).',
    ),
]
LayerOpt = Annotated[
    str | None, typer.Option("--layer", "-l", help="Search one layer only (default: all positive).")
]


def _check_k(k: int) -> None:
    # Checked here so the message names the command-line option.
    if k < 1:
        raise InvalidArgumentError(f"-k must be at least 1, got {k}")


FillOpt = Annotated[
    bool, typer.Option("--fill", help="Also show hits with no evidence of being about the query (filler).")
]


def results_json(results: list[Any]) -> list[dict[str, Any]]:
    """The ``--json`` form of search results (``SearchResult.to_dict``)."""
    return [r.to_dict() for r in results]


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    context: ContextOpt = None,
    layer: LayerOpt = None,
    k: KOpt = 10,
    fill: FillOpt = False,
    no_judge: Annotated[bool, typer.Option("--no-judge", help="Skip the qualification judge.")] = False,
    no_record: Annotated[
        bool, typer.Option("--no-record", help="Do not count this search in the access log.")
    ] = False,
    tag: TagOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Search with the T0-T3 ladder; show tier, qualification state and score per hit.

    Hits with no evidence of being about the query (filler) are left out
    unless --fill is given; the summary line counts them. --tag, --since and
    --until search only the memories that pass, as `list` filters.
    """
    ctx_value = parse_context(context)
    _check_k(k)
    window: dict[str, Any] = {
        "tag": _tags(tag),
        "since": _when(since, "--since"),
        "until": _when(until, "--until"),
    }
    with _open(ctx, root) as store:
        results, meta = store.search(
            query, layer=layer, k=k, context=ctx_value, judge=not no_judge, record=not no_record, **window
        )
        # filler, and a hit whose file a hand edit broke since the index read it (warned of): left out
        shown, omitted, unreadable = shown_results(results, fill=fill)
    if json_out:
        counts = {"filler_omitted": omitted}
        if unreadable:
            counts["unreadable_omitted"] = len(unreadable)
        _print_json({"query": query, "results": results_json(shown), "meta": {**meta, **counts}})
        return
    out = _stdout()
    out.print(
        results_table(shown, width=out.width)
        if shown
        else "no results with evidence of being about the query",
        crop=False,
    )
    out.print(meta_summary(meta, omitted=omitted, unreadable=len(unreadable)))


@app.command()
def neighbours(
    ctx: typer.Context,
    node_id: Annotated[str, typer.Argument(metavar="ID", help="Start node id.")],
    direction: Annotated[str, typer.Option(help="out, in or both.")] = "out",
    edge_type: Annotated[
        list[str] | None, typer.Option("--type", help="Only this edge type (repeatable).")
    ] = None,
    depth: Annotated[int, typer.Option(help="Edges to follow.")] = 1,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Neighbours shown.", min=1)] = 50,
    offset: Annotated[int, typer.Option(help="Neighbours skipped first.", min=0)] = 0,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the nodes linked to ID by edges (either direction, any depth), --limit at a time."""
    with _open(ctx, root, read_only=True) as store:
        found = store.neighbours(node_id, direction=direction, types=edge_type or None, depth=depth)
        page = found[offset : offset + limit]  # paged as `list` is: a hub printed 5,000 rows
        if json_out:
            _print_json(
                {
                    "id": node_id,
                    "total": len(found),
                    "offset": offset,
                    "neighbours": [n.to_dict() for n in page],
                }
            )
            return
        if not page:
            none = f"{len(found)} neighbours ({direction}, depth {depth}), none at --offset {offset}"
            typer.echo(
                f"{terminal_safe(node_id)}: "
                + (none if found else f"no neighbours ({direction}, depth {depth})")
            )
            return
        titles = {n.id: store.entry(n.id).title for n in page if n.exists}
    out = _stdout()
    out.print(neighbours_table(page, titles, width=out.width), crop=False)
    if offset or len(page) < len(found):
        more = f"; --offset {offset + len(page)} for more" if offset + len(page) < len(found) else ""
        typer.echo(f"{offset + 1}-{offset + len(page)} of {len(found)}{more}")


@app.command()
def verify(
    ctx: typer.Context,
    node_id: Annotated[str, typer.Argument(metavar="ID", help="Node id.")],
    evidence: Annotated[
        str,
        typer.Option(help="The external evidence (required, at most 1,000 characters)."),
    ],
    verdict: Annotated[str, typer.Option(help="confirmed, weakened or falsified.")],
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Apply external evidence to a node: confidence up/down, or move it to rejected/."""
    with _open(ctx, root) as store:
        node = store.verify(node_id, evidence, verdict)
        info = verdict_dict(node, verdict, store.path_of(node.id))
        if json_out:
            _print_json(info)
        elif verdict == "falsified":
            # the entry just written names the layer the node was in
            was = node.verification_history[-1].get("from_layer")
            done = "already in rejected/" if was == "rejected" else "moved to rejected/"
            typer.echo(f"{node.id}: falsified, {done} ({info['path']})")
        else:
            typer.echo(
                f"{node.id}: {verdict}, confidence {info['confidence_before']:g} -> "
                f"{info['confidence_after']:g}"
            )


@app.command()
def reflect(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The query to search and reflect on.")],
    states: Annotated[
        str | None,
        typer.Option(
            "--states",
            help="Feedback: the true state of each result, comma-separated "
            "(ACCEPT,REJECT,DEFER,BLINDSPOT), overriding the judge.",
        ),
    ] = None,
    context: ContextOpt = None,
    layer: LayerOpt = None,
    k: KOpt = 10,
    fill: FillOpt = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Run the search and record the information gap D = 1 - ACCEPT rate (with dD/dt).

    D is taken over the results shown: filler is left out unless --fill.
    """
    ctx_value = parse_context(context)
    _check_k(k)
    feedback = [s.strip() for s in states.split(",")] if states is not None else None
    with _open(ctx, root) as store:
        found, _meta = store.search(query, layer=layer, k=k, context=ctx_value, record=False)
        results = [r for r in found if fill or not r.filler]
        rec = store.reflect(query, results, feedback)
        if json_out:
            _print_json(
                {
                    "reflection": rec.to_dict(),
                    "results": [{"id": r.id, "state": r.state} for r in results],
                }
            )
            return
        counts = ", ".join(f"{s} {n}" for s, n in rec.states.items()) or "no results"
        typer.echo(
            f"t={rec.t}  D={rec.d:.3f}  dD/dt={rec.dd:+.3f}  d2D/dt2={rec.d2d:+.3f}  "
            f"({rec.accepted}/{rec.total} ACCEPT; {counts})"
        )


@app.command()
def sync(
    ctx: typer.Context, root: RootOpt = None, quiet: QuietOpt = False, json_out: JsonOpt = False
) -> None:
    """Reconcile the index with .md files added, edited, moved or deleted by hand.

    Exits 1 when something needs a person (malformed files, duplicate or twin
    ids, symlinks, unresolved git merge conflicts, a memory forgotten here that
    a merge brought back): those are reported, never moved or deleted.
    """
    with _open(ctx, root) as store, _status(ctx, quiet, "syncing"):
        report = store.sync()
        clean_line = _in_sync(store)
    if json_out:
        _print_json({"clean": report.clean, "problems": report.problems, **report.to_dict()})
    elif report.clean and not report.problems:
        typer.echo(clean_line)
    else:
        for line in sync_lines(report):
            typer.echo(line)
    if report.problems:
        raise typer.Exit(1)


def _in_sync(store: MdCG) -> str:
    """The clean sync's line: when this open built the index from the files (no usable
    snapshot), the files it took in are not "changes", and saying only "nothing changed"
    would hide that a hand-added file was just indexed."""
    if store.loaded_from == "files":
        n = len(store)
        held = f"{n:,} {'memory' if n == 1 else 'memories'}"
        return f"in sync: the index was built from the files at open ({held}); nothing changed since"
    return "in sync: nothing changed"


@app.command()
def health(
    ctx: typer.Context,
    root: RootOpt = None,
    deep: Annotated[
        bool,
        typer.Option("--deep", help="Also read every file and compare it with the index (slower)."),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Check the store (files, index, edges, buckets); exit 1 when anything is found."""
    with _open(ctx, root, read_only=True) as store:
        report = store.health(deep=deep)
    if json_out:
        _print_json(report.to_dict())
    else:
        out = _stdout()
        out.print(health_table(report, width=out.width), crop=False)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def census(
    ctx: typer.Context,
    src: Annotated[Path, typer.Argument(help="A .sqlite database or an md-cg store folder.")],
    all_layers: Annotated[
        bool, typer.Option("--all-layers", help="Census every layer, not only knowledge/.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Compare bucket-key schemes (A-E) on a sqlite database or store folder."""
    from md_cg.census import LimitedSink, Skipped, census_of, render_markdown

    sink, skipped = LimitedSink(lambda line: typer.echo(line, err=True)), Skipped()
    report = census_of(src, layer=None if all_layers else "knowledge", on_error=sink, skipped=skipped)
    if json_out:
        _print_json(report.to_dict())
    else:
        sys.stdout.write(render_markdown(report))
    for line in (sink.rest(), skipped.summary()):
        if line:
            typer.echo(line, err=True)


DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Report what would change; write nothing.")]
DurableOpt = Annotated[bool, typer.Option("--durable", help="fsync every file (slow, power-cut safe).")]


@app.command()
def migrate(
    ctx: typer.Context,
    src: Annotated[Path, typer.Argument(metavar="SRC", help="The sqlite database (read-only).")],
    dest: Annotated[Path, typer.Argument(metavar="DEST", help="The store folder (created).")],
    dry_run: DryRunOpt = False,
    verify_only: Annotated[
        bool, typer.Option("--verify-only", help="Only compare DEST with SRC (no writes).")
    ] = False,
    batch: Annotated[int, typer.Option(help="Nodes per group commit.", min=1)] = 500,
    durable: DurableOpt = False,
    no_resume: Annotated[
        bool, typer.Option("--no-resume", help="Ignore an interrupted run's journal; start over.")
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when the source has bad rows.")] = False,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Also replace memories the store changed since and bring back forgotten ones "
            "(never archived ones).",
        ),
    ] = False,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Migrate a sqlite cognitive graph into a store folder and verify every field."""
    from md_cg.migrate import migrate as run_migration
    from md_cg.migrate import verify_migration

    if dry_run and verify_only:
        raise InvalidArgumentError("--dry-run and --verify-only exclude each other")
    label = "verifying" if verify_only else "dry run" if dry_run else "migrating"
    try:
        with _bar(ctx, quiet, label) as update:
            if verify_only:
                report = verify_migration(src, dest, progress=update)
            else:
                report = run_migration(
                    src,
                    dest,
                    dry_run=dry_run,
                    batch=batch,
                    durable=durable,
                    progress=update,
                    resume=not no_resume,
                    overwrite=overwrite,
                )
    except KeyboardInterrupt:
        typer.echo(
            "interrupted: run the same command again to resume from the last committed batch", err=True
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if json_out:
        _print_json(report.to_dict())
    else:
        sys.stdout.write(report.render())
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)
    if strict and report.bad_rows:
        typer.echo(f"--strict: {report.bad_rows_summary()}", err=True)
        raise typer.Exit(EXIT_FAILED)


@app.command(name="import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(metavar="SOURCE", help="JSON lines, or a JSON array of memories ('-': stdin)."),
    ],
    layer: Annotated[
        str, typer.Option("--layer", "-l", help="Layer of the records that name none.")
    ] = "knowledge",
    tag: Annotated[
        list[str] | None, typer.Option("--tag", "-t", help="A tag added to every record (repeatable).")
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace stored memories whose id a record gives with other content, and bring "
            "back ids forgotten or renamed in this store.",
        ),
    ] = False,
    skip_bad: Annotated[
        bool,
        typer.Option(
            "--skip-bad", help="Import the good records and list the bad ones (default: refuse all)."
        ),
    ] = False,
    dry_run: DryRunOpt = False,
    batch: Annotated[int, typer.Option(help="Records per commit.", min=1)] = 500,
    durable: DurableOpt = False,
    quiet: QuietOpt = False,
    root: RootOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Import memories from JSON lines (mdcg export, or other tools' text/content/memory records)."""
    from md_cg import import_nodes, is_store_folder

    options: dict[str, Any] = {
        "layer": layer,
        "tags": tuple(tag or ()),
        "overwrite": overwrite,
        "skip_bad": skip_bad,
    }
    given: str | IO[bytes] = source
    report = None
    try:
        if not dry_run and not is_store_folder(_store_folder(ctx, root, create=True)):
            given, report = _checked_first(source, options)  # raises as the import would
        if report is None:
            with (
                _open(ctx, root, read_only=dry_run, create=not dry_run) as store,
                _bar(ctx, quiet, "importing") as update,
            ):
                report = import_nodes(
                    store,
                    given,
                    dry_run=dry_run,
                    batch=batch,
                    durable=durable or None,
                    progress=update,
                    **options,
                )
    except ImportSourceError as exc:
        raise _import_refused(exc, json_out) from None
    except InvalidArgumentError as exc:  # refused before the source is read: named as typed
        if exc.name != "tags":
            raise
        raise InvalidArgumentError(str(exc).replace("tags", "--tag", 1), name="--tag") from None
    if json_out:
        _print_json(report.to_dict())
        return
    typer.echo(report.summary())
    for what, records in (
        ("left out", report.bad),
        ("kept", report.kept),
        ("not brought back", report.departed),
    ):
        for record in records[:10]:
            typer.echo(f"  {what}: {record}")
        if len(records) > 10:
            typer.echo(f"  ... and {len(records) - 10} more (--json lists them all)")


def _import_refused(exc: ImportSourceError, json_out: bool) -> ImportSourceError:
    """The error of an import refused for its records (bad ones, ids taken), which names
    the first 10 of them: with ``--json``, ``{"error", "problems"}`` on stdout lists every
    one (each as the report lists a bad record: bounded); the count line of the rest says
    where to see them. A failed import printed "... and 2 more" and, with ``--json``,
    nothing on stdout: only a ``--skip-bad --dry-run --json`` listed the rest (review r2)."""
    if not exc.problems:  # the source cannot be read: one line, as any error
        return exc
    first, *rest = str(exc).splitlines()
    if json_out:
        _print_json({"error": first, "problems": [problem.to_dict() for problem in exc.problems]})
    if rest and rest[-1].startswith("  ... and "):
        rest[-1] += " (the JSON on stdout lists them all)" if json_out else " (--json lists them all)"
    return ImportSourceError("\n".join([first, *rest]), exc.problems)


def _checked_first(source: str, options: dict[str, Any]) -> tuple[str | IO[bytes], Any]:
    """An import into a store not made yet: its dry run into an empty store first, so a
    source that cannot be read or holds a bad record fails with no store made. Returns
    the source for the real run (one that can be read only once -- stdin, a pipe, a
    FIFO, ``/dev/fd/N`` -- read once and kept: :func:`_read_once`) and, when nothing
    would be written, the dry run's report (no store is made then either), else None."""
    from md_cg import MdCG, import_nodes

    given = _read_once(source)
    with (
        tempfile.TemporaryDirectory(prefix="mdcg-import-check-") as tmp,
        MdCG(os.path.join(tmp, "store"), create=True) as empty,
        warnings.catch_warnings(),  # the real run warns of a record (once)
    ):
        warnings.simplefilter("ignore")
        report = import_nodes(empty, given, dry_run=True, **options)
    if not isinstance(given, str):
        given.seek(0)
    if report.created:
        return given, None
    report.dry_run = False  # nothing to write: no store made
    return given, report


def _read_once(source: str) -> str | IO[bytes]:
    """``source`` as two imports of it can read it -- a dry run, then the import: a regular
    file or a folder (or a path that cannot be looked at or read: the import says why) as
    it is, read again; anything else (stdin, a pipe, a FIFO, a process substitution's
    ``/dev/fd/N``) read into memory once, named as the import names it. Read twice, such
    a source gives the second reader nothing (or a FIFO waits for a writer for ever).
    The import holds its source whole in memory anyway."""
    if source == "-":
        stream: IO[bytes] = io.BytesIO(sys.stdin.buffer.read())
        stream.name = "<stdin>"  # type: ignore[misc]
        return stream
    try:
        if stat.S_ISREG(mode := os.stat(source).st_mode) or stat.S_ISDIR(mode):
            return source
        with open(source, "rb") as file:
            stream = io.BytesIO(file.read())
    except OSError:
        return source
    stream.name = source
    return stream


@contextmanager
def _named(out: Path | None) -> Iterator[None]:
    """An OS error on the temp file written beside ``out`` is reported as about ``out`` (one
    refusing to create it, as about its folder: :func:`md_cg.fsops.write_temp` names the
    folder it was written in, ``.`` there)."""
    try:
        yield
    except OSError as exc:
        name = os.path.basename(str(exc.filename or ""))  # the temp's name is .<name>.<pid>.<token>.tmp
        if out is not None and name.startswith(f".{out.name}.") and name.endswith(".tmp"):
            exc.filename = str(out)
        elif out is not None and isinstance(exc, PermissionError) and exc.filename == ".":
            exc.filename = str(out.parent)
        raise


def _is_stdout(out: Path) -> bool:
    """Whether ``--out`` is what stdout is open on (``/dev/stdout``, ``/dev/fd/1``, the file
    or pipe stdout goes to): the summary line then goes to stderr, out of the data."""
    try:
        there, mine = os.stat(out), os.fstat(1)
    except (OSError, ValueError):
        return False
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


@app.command()
def export(
    ctx: typer.Context,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write to this file (replaced whole); default: stdout.")
    ] = None,
    layer: Annotated[str | None, typer.Option("--layer", "-l", help="Only this layer.")] = None,
    tag: TagOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    archived: Annotated[bool, typer.Option("--archived", help="Also export archived memories.")] = False,
    expired: Annotated[
        bool, typer.Option("--expired", help="Also export expired temporary memories.")
    ] = False,
    root: RootOpt = None,
) -> None:
    """Export memories as JSON lines (every field and the body), in id order; exit 1 when a
    memory's file could not be read (each named on stderr; with --tag, --since or --until
    a broken file may not be one the filter selects: named as "may be left out", exit 0)."""
    from md_cg import export_nodes

    start, end = _when(since, "--since"), _when(until, "--until")
    if out is not None and out.is_dir():  # checked first: the error would name a temp file beside it
        raise InvalidArgumentError(f"--out {out}: is a folder; give the path of a file", name="--out")
    to_stdout = out is not None and _is_stdout(out)  # looked at before the file is replaced
    with _open(ctx, root, read_only=True) as store, _named(out):
        report = export_nodes(
            store,
            "-" if out is None else out,
            layer=layer,
            tag=_tags(tag),
            since=start,
            until=end,
            include_archived=archived,
            include_expired=expired,
        )
    if out is not None:  # not into the data when --out is where stdout goes (/dev/stdout)
        typer.echo(f"exported {report.count} memories to {terminal_safe(report.target)}", err=to_stdout)
    # a file whose memory a --tag/--since/--until filter may or may not select: named, exit 0
    for where, why in report.maybe_left_out:
        _stderr().print(
            f"may be left out: {terminal_safe(where)}: {terminal_safe(why)}", soft_wrap=True, markup=False
        )
    for node_id in report.conflicted:  # in the export, but an import refuses it: named, exit 0
        _stderr().print(
            f"unresolved merge conflict: {terminal_safe(node_id)}: exported as stored, but its body "
            "holds git conflict markers and `mdcg import` refuses it until the conflict is resolved "
            "(edit the memory, then export again)",
            soft_wrap=True,
            markup=False,
        )
    if report.unreadable:  # not a silent gap in a backup: named, and exit 1
        lines = [f"not exported: {where}: {why}" for where, why in report.unreadable]
        for line in _capped(lines, "not exported", "`mdcg health --json`"):
            _stderr().print(terminal_safe(line), soft_wrap=True, markup=False)
        raise typer.Exit(EXIT_FAILED)


def _capped(lines: list[str], what: str, lists: str, *, indent: str = "", limit: int = LINE_IDS) -> list[str]:
    """The first ``limit`` of ``lines``, then one line counting the rest and saying what
    ``lists`` every one (as health's table and sweep's ``kept`` lines do): 300 unreadable
    files are not 300 lines of a maintenance command's output."""
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"{indent}... and {len(lines) - limit:,} more {what} ({lists} lists every one)"]


def _maintenance_out(report: Any, json_out: bool, what: str, extra: dict[str, Any] | None = None) -> None:
    data = report.to_dict()
    if extra:
        data.update(extra)
    if json_out:
        _print_json(data)
        return
    typer.echo(
        f"{what}: {report.nodes} nodes, snapshot {report.snapshot_bytes:,} bytes, "
        f"log shards {report.shards_before} -> {report.shards_before - len(report.shards_removed)} "
        f"({len(report.shards_kept)} kept: held by live processes or not yet covered), "
        f"{report.seconds:.2f} s"
    )
    lines = [f"  unreadable: {path}: {reason}" for path, reason in report.problems]
    for line in _capped(lines, "unreadable", "--json", indent="  "):
        typer.echo(terminal_safe(line))
    if extra and "access_folded" in extra:
        folded = extra["access_folded"]
        typer.echo(f"access log folded: {sum(folded.values())} access(es) into {len(folded)} node(s)")


@app.command()
def rebuild(
    ctx: typer.Context, root: RootOpt = None, quiet: QuietOpt = False, json_out: JsonOpt = False
) -> None:
    """Rebuild the index from the .md files alone and write a new snapshot."""
    with _open(ctx, root) as store, _bar(ctx, quiet, "reading files") as update:
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            update(done[0], None)

        report = store.rebuild_index(progress=tick)
    _maintenance_out(report, json_out, "rebuilt")


@app.command()
def compact(
    ctx: typer.Context,
    access: Annotated[
        bool,
        typer.Option(
            "--access",
            help="Also fold the access log into .mdcg/access/counts.json (the .md files never change).",
        ),
    ] = False,
    root: RootOpt = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Fold the index log into a new snapshot (and, with --access, the access log)."""
    with _open(ctx, root) as store, _status(ctx, quiet, "compacting"):
        extra = {"access_folded": store.compact_access()} if access else None
        report = store.compact_index()
    _maintenance_out(report, json_out, "compacted", extra)


@app.command()
def bench(
    ctx: typer.Context,
    kind: Annotated[str, typer.Option(help="store, search or all.")] = "all",
    sizes: Annotated[str | None, typer.Option(help="Comma-separated store sizes, e.g. 1000,3000.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the tables to FILE.")] = None,
    quiet: QuietOpt = False,
) -> None:
    """Run the store/search benchmarks beside their baselines; print Markdown tables."""
    from md_cg import benchmark

    if kind not in BENCH_KINDS:
        raise InvalidArgumentError(f"--kind {kind!r}: expected one of {', '.join(BENCH_KINDS)}")
    size_list: list[int] | None = None
    if sizes is not None:
        try:
            size_list = [int(s) for s in sizes.split(",") if s.strip()]
        except ValueError:
            raise InvalidArgumentError(f"--sizes {sizes!r}: expected comma-separated integers") from None
        if not size_list or min(size_list) < 1:
            raise InvalidArgumentError(f"--sizes {sizes!r}: expected positive integers")
    with _status(ctx, quiet, f"bench {kind}") as say:
        tables = benchmark.run(kind=kind, sizes=size_list, progress=say)
    text = tables if tables.endswith("\n") else tables + "\n"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)


@app.command()
def demo(
    ctx: typer.Context,
    dest: Annotated[
        Path | None, typer.Argument(metavar="DIR", help="Folder for the demo store (default: new temp).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Use DIR even if it is not empty.")] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Build a store from the bundled sample and tour search, judge and the loop."""
    from md_cg.demo import prepare_dest, run_demo

    folder = prepare_dest(dest, force=force)
    show_progress = not _quiet(ctx, quiet) and _stderr().is_terminal
    if json_out:
        _print_json(run_demo(folder, None, show_progress=show_progress).to_dict())
    else:
        run_demo(folder, _stdout(markup=True), show_progress=show_progress)


@app.command()
def mcp(
    ctx: typer.Context,
    aliases: Annotated[
        str | None,
        typer.Option(
            "--aliases",
            help="Also serve foreign tool names: mcp-memory (the MCP reference memory server), "
            "mem0, or both comma-separated.",
        ),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="The agent the server reads and writes as.")
    ] = None,
    workspace: Annotated[str | None, typer.Option("--workspace", help="The workspace it works in.")] = None,
    max_sensitivity: Annotated[
        str, typer.Option("--max-sensitivity", help="The most sensitive memories it may see.")
    ] = "normal",
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="Open the store read-only and offer only the reading tools (search, get, list...); "
            "the store must exist.",
        ),
    ] = False,
    root: RootOpt = None,
) -> None:
    """Serve the store to an MCP client over stdio (needs the md-cg[mcp] extra).

    --agent, --workspace and --max-sensitivity set the scope the server works
    in; no tool argument can change it. --read-only serves the reading tools
    alone, with the store opened read-only (nothing is written to it).
    """
    from md_cg import Scope

    try:
        from md_cg.integrations.aliases import FAMILIES
        from md_cg.mcp_server import run_server
    except ImportError as exc:
        raise InvalidArgumentError(
            f"the MCP server needs the mcp package ({exc}); install it with: pip install 'md-cg[mcp]'"
        ) from None
    families = tuple(a.strip() for a in (aliases or "").split(",") if a.strip())
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise InvalidArgumentError(
            f"--aliases {unknown[0]!r}: expected {' or '.join(FAMILIES)} (comma-separated)"
        )
    scope = Scope(agent=agent, workspace=workspace, max_sensitivity=max_sensitivity)
    folder = _store_folder(ctx, root, create=not read_only)
    run_server(folder, aliases=families, scope=scope, read_only=read_only)


def _drop_zero_size() -> None:
    """Treat ``COLUMNS``/``LINES`` of zero as unset: rich takes ``COLUMNS=0`` for a
    console zero cells wide and printed no table at all (``search`` and ``health``
    showed nothing, ``health`` still exiting 1). Without it, the terminal's size, else 80
    columns. Other values rich already ignores (``abc``, ``-5``)."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and value.isdigit() and int(value) == 0:
            del os.environ[name]


def main() -> None:
    """Entry point of the ``mdcg`` script."""
    _drop_zero_size()
    app()


if __name__ == "__main__":
    main()
