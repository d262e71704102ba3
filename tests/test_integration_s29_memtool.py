"""Review s28 leftovers of Claude's memory tool (session 29): ``\\r\\n`` line ends (a file
written on Windows, a ``file_text``, ``old_str``, ``new_str`` or ``insert_text`` with
them) are the tool's ``\\n`` lines -- no stray ``\\r`` in a view or a stored body, a
``str_replace`` of lines as ``view`` showed them matches; ``insert_text`` forms its own
lines at ``insert_line``; a line longer than a view is read in pieces
(``view_range [line, line, character]``).

Skipped when the ``anthropic`` extra is not installed; nothing needs the network.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("anthropic")

from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand as Create,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818InsertCommand as Insert,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818StrReplaceCommand as StrReplace,
)
from anthropic.types.beta import (
    BetaMemoryTool20250818ViewCommand as View,
)
from test_integration_s28_memtool import error, view

from md_cg import MdCG
from md_cg.integrations.anthropic_memory import MdCGMemoryTool


def body_rows(reply: str) -> list[str]:
    """The numbered rows of a view after the frontmatter's closing ``---`` (no timestamps)."""
    rows = reply.split("\n")[1:]
    fence = [i for i, r in enumerate(rows) if r.endswith("\t---")]
    return rows[fence[-1] + 1 :]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


# -- 1. "\r\n" line ends ----------------------------------------------------------------------


def test_a_crlf_file_text_is_stored_and_shown_by_its_lines(tmp_path: Path) -> None:
    """The reviewer: ``create`` with ``"alpha\\r\\nbeta\\r\\ngamma\\r\\n"`` stored the body
    ``"alpha\\r\\nbeta\\r\\ngamma\\r"`` and ``view`` showed ``alpha\\r``...; a
    ``str_replace`` of ``"alpha\\nbeta"``, the lines ``view`` showed, found nothing."""
    with MdCGMemoryTool(tmp_path / "s", scope=None) as tool:
        tool.execute(
            Create(command="create", path="/memories/crlf.md", file_text="alpha\r\nbeta\r\ngamma\r\n")
        )
        assert tool.store.get("crlf").body == "alpha\nbeta\ngamma"
        assert body_rows(view(tool, "/memories/crlf.md")) == [
            "     9\talpha",
            "    10\tbeta",
            "    11\tgamma",
        ]
        reply = str(
            tool.execute(
                StrReplace(
                    command="str_replace",
                    path="/memories/crlf.md",
                    old_str="alpha\nbeta",
                    new_str="ALPHA\nBETA",
                )
            )
        )
        assert reply.split("\n")[-3:] == ["     9\tALPHA", "    10\tBETA", "    11\tgamma"]
        assert tool.store.get("crlf").body == "ALPHA\nBETA\ngamma"
        # an old_str / new_str copied with "\r\n" ends matches the same lines, and adds no "\r"
        tool.execute(
            StrReplace(
                command="str_replace",
                path="/memories/crlf.md",
                old_str="BETA\r\ngamma",
                new_str="beta\r\nGAMMA",
            )
        )
        assert tool.store.get("crlf").body == "ALPHA\nbeta\nGAMMA"
        assert b"\r" not in (tmp_path / "s" / "contextual" / "crlf.md").read_bytes()


def test_a_file_written_on_windows_is_viewed_and_edited_by_its_lines(tmp_path: Path) -> None:
    """A node file with ``\\r\\n`` ends written outside the engine (a person on Windows):
    ``view`` showed every line with a trailing ``\\r``, a ``str_replace`` of two lines as
    shown was refused, an ``insert`` added a ``\\n`` line among ``\\r\\n`` ones."""
    root = tmp_path / "s"
    MdCG(root, create=True).close()
    (root / "contextual").mkdir(exist_ok=True)
    node = root / "contextual" / "win.md"
    node.write_bytes(b'---\r\nid: "win"\r\nlayer: "contextual"\r\n---\r\nfirst\r\nsecond\r\nthird\r\n')
    with MdCGMemoryTool(root, scope=None) as tool:
        assert view(tool, "/memories/win.md").split("\n")[1:] == [
            "     1\t---",
            '     2\tid: "win"',
            '     3\tlayer: "contextual"',
            "     4\t---",
            "     5\tfirst",
            "     6\tsecond",
            "     7\tthird",
        ]
        assert node.read_bytes().count(b"\r\n") == 7  # a view writes nothing
        tool.execute(
            StrReplace(
                command="str_replace", path="/memories/win.md", old_str="first\nsecond", new_str="1st\n2nd"
            )
        )
        assert tool.store.get("win").body == "1st\n2nd\nthird"
        rows = body_rows(view(tool, "/memories/win.md"))  # md-cg's canonical form now
        at = int(rows[1].split("\t")[0])
        assert rows == [f"{at - 1:>6}\t1st", f"{at:>6}\t2nd", f"{at + 1:>6}\tthird"]
        tool.execute(
            Insert(command="insert", path="/memories/win.md", insert_line=at, insert_text="middle\r\n")
        )
        assert tool.store.get("win").body == "1st\n2nd\nmiddle\nthird"
        assert body_rows(view(tool, "/memories/win.md")) == [
            f"{at - 1:>6}\t1st",
            f"{at:>6}\t2nd",
            f"{at + 1:>6}\tmiddle",
            f"{at + 2:>6}\tthird",
        ]
        assert b"\r" not in node.read_bytes()


# -- 2. insert_text with and without a trailing newline ----------------------------------------


def test_insert_text_forms_its_own_lines_at_insert_line(tmp_path: Path) -> None:
    """``insert_text`` goes after line ``insert_line`` as its own line(s): one trailing line
    end (``\\n`` or ``\\r\\n``) or none makes no difference, it never joins the next line
    and adds no blank line; a ``\\r\\n`` inside it leaves no ``\\r`` (the ``\\r\\n`` cases
    failed before: ``"B\\r\\n"`` was stored as the line ``"B\\r"``)."""
    with MdCGMemoryTool(tmp_path / "s", scope=None) as tool:
        tool.execute(Create(command="create", path="/memories/ins.md", file_text="one\ntwo\n"))
        for at, text in (
            (9, "A"),  # after "one"
            (10, "B\n"),  # after "A"
            (11, "C\r\n"),  # after "B"
            (12, "D1\r\nD2"),  # after "C"
            (15, "E1\nE2\n"),  # after "two", the last line
        ):
            reply = tool.execute(
                Insert(command="insert", path="/memories/ins.md", insert_line=at, insert_text=text)
            )
            assert reply == "The file /memories/ins.md has been edited."
        body = "one\nA\nB\nC\nD1\nD2\ntwo\nE1\nE2"
        assert tool.store.get("ins").body == body
        assert body_rows(view(tool, "/memories/ins.md")) == [
            f"{n:>6}\t{line}" for n, line in enumerate(body.split("\n"), start=9)
        ]
        assert error(
            tool, Insert(command="insert", path="/memories/ins.md", insert_line=18, insert_text="F")
        ) == ("Invalid `insert_line` parameter: 18. It should be within the range [0, 17].")


# -- 3. a line longer than a view ---------------------------------------------------------------


def test_a_line_longer_than_a_view_is_read_in_pieces(tmp_path: Path) -> None:
    """The reviewer: a 250,000-character line showed its first 99,993 characters and no
    way to read the rest. Now the cut says which ``view_range`` shows more: a third number,
    the character of the first line to start at."""
    line = "".join(chr(ord("a") + i % 26) for i in range(250_000))
    with MdCGMemoryTool(tmp_path / "s") as tool:
        tool.execute(
            Create(command="create", path="/memories/long.md", file_text="short\n" + line + "\nafter\n")
        )
        assert view(tool, "/memories/long.md").split("\n")[-1] == (
            "[lines 10 to 11 of 11 are not shown (a view shows at most 20,000 characters): "
            "pass view_range [10, 11] to see them]"
        )
        *_, row, cut, rest = view(tool, "/memories/long.md", [10, 11]).split("\n")
        assert row == "    10\t" + line[:99_993]
        assert cut == (
            "[line 10 is 250,000 characters long; only its first 99,993 are shown (a view shows at most "
            "100,000 characters): pass view_range [10, 10, 99994] to see the rest of it (a third number is "
            "the character of the first line to start at)]"
        )
        assert rest == (
            "[line 11 of 11 is not shown (a view shows at most 100,000 characters): "
            "pass view_range [11, 11] to see it]"
        )
        head, row, cut = view(tool, "/memories/long.md", [10, 10, 99_994]).split("\n")
        assert head == (
            "Here's the content of /memories/long.md (stored as /memories/contextual/long.md) "
            "with line numbers:"
        )
        assert row == "    10\t" + line[99_993:199_986]
        assert cut == (
            "[line 10 is 250,000 characters long; only its characters 99,994 to 199,986 are shown (a view "
            "shows at most 100,000 characters): pass view_range [10, 10, 199987] to see the rest of it (a "
            "third number is the character of the first line to start at)]"
        )
        assert view(tool, "/memories/long.md", [10, -1, 199_987]).split("\n")[1:] == [
            "    10\t" + line[199_986:],
            "    11\tafter",
            "[line 10 is 250,000 characters long; only its characters 199,987 to 250,000 are shown]",
        ]
        # follow the notes from the first view: the pieces make the whole line, once
        pieces, start = [], 1
        while True:
            rows = view(tool, "/memories/long.md", [10, 10, start]).split("\n")
            pieces.append(rows[1].removeprefix("    10\t"))
            found = re.search(r"pass view_range \[10, 10, (\d+)\]", rows[2])
            if found is None:
                break
            start = int(found.group(1))
        assert "".join(pieces) == line and len(pieces) == 3
        for bad in ([10, 10, 0], [10, 10, 250_001]):
            assert error(tool, View(command="view", path="/memories/long.md", view_range=bad)) == (
                f"Invalid `view_range` {bad} for /memories/long.md: its third number is the character of "
                "line 10 to start at, within [1, 250000] (the line is 250,000 characters long)"
            )
        assert error(tool, View(command="view", path="/memories/long.md", view_range=[10, 10, 1, 5])) == (
            "Invalid `view_range` [10, 10, 1, 5] for /memories/long.md: give two line numbers [start, end], "
            "or [start, end, character] to begin at a character of line start (a long line)"
        )
        assert error(tool, View(command="view", path="/memories", view_range=[1, 2, 3])) == (
            "Invalid `view_range` [1, 2, 3] for /memories: give two line numbers [start, end]"
        )
        # a short line read from a character on says so, without a cut
        assert view(tool, "/memories/long.md", [9, 9, 3]).split("\n")[1:] == [
            "     9\tort",
            "[line 9 is 5 characters long; only its characters 3 to 5 are shown]",
        ]
