"""Library log records as the CLI's own lines: no tracebacks, no logging setup needed.

The library logs through stdlib ``logging`` (``chongming_task.*``). Without a handler,
Python's last-resort handler would print warnings bare on stderr; a worker also wants
its INFO lines (tasks taken, transitions, task log lines) on stdout for its journal.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from chongming_task.cli.errors import scrub
from chongming_task.cli.render import Output

__all__ = ["library_logging"]


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
