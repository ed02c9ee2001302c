"""Library log records as the CLI's own lines: no tracebacks, no logging setup needed.

The library logs through stdlib ``logging`` (``chongming_task.*``). Without a handler,
Python's last-resort handler would print warnings bare on stderr; a worker also wants
its INFO lines (tasks taken, transitions, task log lines) on stdout for its journal.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from chongming_task.cli._errors import scrub
from chongming_task.cli._render import Output

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "TextLogFormatter", "library_logging", "worker_logging"]

#: ``--log-level`` choices (the stdlib names).
LOG_LEVELS = ("debug", "info", "warning", "error")
#: ``--log-format`` choices.
LOG_FORMATS = ("text", "json")


class _LineHandler(logging.Handler):
    """INFO records as plain stdout lines; warnings and errors as one stderr line each."""

    def __init__(self, output: Output, level: int) -> None:
        super().__init__(level)
        self.output = output

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = scrub(record.getMessage())
            if record.levelno >= logging.WARNING:
                self.output.notice(f"{record.levelname.lower()}: {text}")
            else:
                self.output.print(text)
        except Exception:  # a broken pipe must not take the process down
            self.handleError(record)


@contextlib.contextmanager
def library_logging(output: Output, *, info: bool = False) -> Iterator[None]:
    """Route ``chongming_task`` log records to ``output`` within the block.

    Args:
        output: Where the lines go.
        info: Also show INFO records of the worker and of tasks (the worker daemon);
            otherwise only warnings and errors.
    """
    handler = _LineHandler(output, logging.INFO if info else logging.WARNING)
    library = logging.getLogger("chongming_task")
    worker = logging.getLogger("chongming_task.worker")
    old_level = worker.level
    if info:
        worker.setLevel(logging.INFO)
    library.addHandler(handler)
    try:
        yield
    finally:
        library.removeHandler(handler)
        worker.setLevel(old_level)


class TextLogFormatter(logging.Formatter):
    """``2025-01-31T12:00:00.123Z INFO    message``: UTC timestamp, level, the line.

    Secrets are scrubbed (DSN passwords, tokens), as on every line the CLI shows.
    A traceback is reduced to its last line: a journal wants one line per event.
    """

    def format(self, record: logging.LogRecord) -> str:
        from datetime import UTC, datetime

        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        text = scrub(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f" ({type(error).__name__}: {scrub(str(error))})"
        return f"{stamp.replace('+00:00', 'Z')} {record.levelname:<7} {text}"


class _JsonFormatter(logging.Formatter):
    """The library's ``JsonLogFormatter`` with DSN passwords masked in the message too."""

    def __init__(self) -> None:
        super().__init__()
        from chongming_task.observability import JsonLogFormatter

        self._inner = JsonLogFormatter()

    def format(self, record: logging.LogRecord) -> str:
        record.msg = scrub(record.getMessage())
        record.args = None
        return self._inner.format(record)


@contextlib.contextmanager
def worker_logging(output: Output, *, level: str = "info", fmt: str = "text") -> Iterator[None]:
    """The worker daemon's logging: every ``chongming_task`` record, one line on stderr.

    Args:
        output: Its ``stderr`` receives the lines (logging to stderr is the convention
            of daemons: systemd's journal and ``docker logs`` take both streams).
        level: ``debug``, ``info``, ``warning`` or ``error``.
        fmt: ``text`` (timestamp, level, message) or ``json`` (one object per line,
            :class:`~chongming_task.observability._logging.JsonLogFormatter`).
    """
    handler = logging.StreamHandler(output.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else TextLogFormatter())
    library = logging.getLogger("chongming_task")
    old_level, old_propagate = library.level, library.propagate
    library.setLevel(getattr(logging, level.upper()))
    library.propagate = False  # an application's root handler would print each line twice
    library.addHandler(handler)
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.setLevel(old_level)
        library.propagate = old_propagate
        handler.flush()
