"""Where the CLI's output goes and how it looks: rich on a terminal, plain text otherwise.

Scripts parse what the CLI prints, so anything that is not a terminal gets stable
plain text (the library's ``render_table`` format) or JSON, with no escape codes:
every line goes through the one terminal sanitiser (``chongming_task._redact.printable``),
so text a task wrote (a label, a progress message, a failure) can never clear the
screen or write the clipboard. JSON keeps every character: those a terminal would act
on are written as JSON ``\\u`` escapes.
People at a terminal get rich tables and colour, unless ``NO_COLOR`` is set
(https://no-color.org). ``rich`` is an optional extra (``chongming-task[cli]``): it
is imported only when a terminal asks for it, and its absence falls back to plain
text instead of failing.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

from chongming_task._redact import printable
from chongming_task.cli._errors import one_line, scrub

__all__ = ["STATUS_STYLES", "Output", "display_width", "plain_table"]

#: Colour of each status in rich output; unknown statuses stay unstyled.
STATUS_STYLES: dict[str, str] = {
    "pending": "dim",
    "blocked": "dim",
    "queued": "blue",
    "starting": "cyan",
    "running": "cyan",
    "pausing": "magenta",
    "paused": "magenta",
    "retry_wait": "yellow",
    "stopping": "yellow",
    "succeeded": "green",
    "failed": "bold red",
    "stopped": "yellow",
    "cancelled": "yellow",
    "skipped": "dim",
    "lost": "bold red",
}


def display_width(text: str) -> int:
    """Terminal columns taken by ``text``: CJK wide characters count twice."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width text table in the library's ``render_table`` layout.

    Columns are separated by two spaces, the header is underlined with dashes, and
    trailing spaces are stripped so the output diffs cleanly.
    """
    widths = [display_width(header) for header in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], display_width(cell))

    def line(cells: Sequence[str]) -> str:
        padded = (cell + " " * (widths[i] - display_width(cell)) for i, cell in enumerate(cells))
        return "  ".join(padded).rstrip()

    lines = [line(headers), line(["-" * width for width in widths])]
    lines.extend(line(row) for row in rows)
    return "\n".join(lines)


def _escape_unprintable(text: str) -> str:
    """JSON text with the characters a terminal acts on written as ``\\uXXXX`` escapes.

    ``json.dumps(ensure_ascii=False)`` escapes C0 controls only; C1 controls (the
    8-bit CSI), DEL, format characters and lone surrogates would reach the terminal
    raw. Outside strings JSON text holds only printable ASCII and line feeds, so
    escaping them is lossless: a parser reads the same document.
    """
    if text.isascii() and "\x7f" not in text:
        return text
    return "".join(
        char if char.isprintable() or char == "\n" else f"\\u{ord(char):04x}" for char in text
    )


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class Output:
    """The CLI's two streams plus the decision "rich or plain".

    Args:
        stdout: Where results go (default ``sys.stdout``).
        stderr: Where the one-line errors and notices go (default ``sys.stderr``).
        rich_mode: Force rich output on or off; ``None`` decides from the stream
            (a terminal, ``rich`` installed, ``CHONGMING_PLAIN`` unset).
    """

    def __init__(
        self,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        *,
        rich_mode: bool | None = None,
    ) -> None:
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.color = "NO_COLOR" not in os.environ
        if rich_mode is None:
            rich_mode = _is_terminal(self.stdout) and not os.environ.get("CHONGMING_PLAIN")
        self._console: Any = self._make_console() if rich_mode else None

    def _make_console(self) -> Any:
        try:
            from rich.console import Console
        except ImportError:  # the `cli` extra is not installed: plain text it is
            return None
        return Console(
            file=self.stdout,
            force_terminal=True,
            no_color=not self.color,
            color_system="auto" if self.color else None,
            highlight=False,
            soft_wrap=True,
        )

    @property
    def rich(self) -> bool:
        """Whether rich rendering (tables, colour, live displays) is in use."""
        return self._console is not None

    @property
    def console(self) -> Any:
        """The rich ``Console`` (only meaningful when :attr:`rich` is true)."""
        return self._console

    def print(self, text: str = "") -> None:
        """One block of plain text on stdout, flushed at once for pipes and tests.

        Escape sequences and control characters other than line feeds are removed
        (:func:`~chongming_task._redact.printable`): nothing printed can drive the
        terminal.
        """
        self.stdout.write(printable(text, keep_newlines=True) + "\n")
        self.stdout.flush()

    def notice(self, text: str) -> None:
        """A one-line notice on stderr (progress of a command, not its result)."""
        self.stderr.write(one_line(scrub(text)) + "\n")
        self.stderr.flush()

    def error(self, text: str) -> None:
        """The one line every failed command prints on stderr."""
        self.stderr.write(f"chongming-task: error: {one_line(scrub(text))}\n")
        self.stderr.flush()

    def json(self, document: Any, *, compact: bool = False) -> None:
        """A JSON document on stdout (one line when ``compact``, for ``--watch``)."""
        if compact:
            text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
        else:
            text = json.dumps(document, ensure_ascii=False, indent=2)
        self.print(_escape_unprintable(text))

    def status_text(self, status: str) -> Any:
        """A status as rich ``Text`` in its colour (plain ``str`` without rich)."""
        if not self.rich:
            return status
        from rich.text import Text

        return Text(status, style=STATUS_STYLES.get(status, "") if self.color else "")

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        title: str | None = None,
        status_column: str | None = "STATUS",
    ) -> None:
        """A table: rich on a terminal, :func:`plain_table` otherwise."""
        if not self.rich:
            if title:
                self.print(title)
            self.print(plain_table(headers, rows))
            return
        self.console.print(self.rich_table(headers, rows, title=title, status_column=status_column))

    def rich_table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        *,
        title: str | None = None,
        status_column: str | None = "STATUS",
    ) -> Any:
        """The rich ``Table`` for ``rows`` (also used inside live displays)."""
        from rich import box
        from rich.table import Table

        table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
        for header in headers:
            table.add_column(header, no_wrap=header in ("TASK_ID", "STATUS"))
        status_index = headers.index(status_column) if status_column in headers else -1
        from rich.text import Text

        for row in rows:
            # Text, not str: a cell is never read as rich markup ("[bold]" in a label).
            cells: list[Any] = [Text(printable(cell)) for cell in row]
            if status_index >= 0:
                cells[status_index] = self.status_text(row[status_index])
            table.add_row(*cells)
        return table
