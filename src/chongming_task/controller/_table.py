"""``render_table``: the fixed-width text table shared by the CLI and dashboards (guide §8.4).

Columns are aligned by *display* width, not by ``len``: a CJK character takes two
terminal cells (``unicodedata.east_asian_width`` is ``W`` or ``F``), so labels such
as ``转换-1`` would otherwise push every later column out of line.

``ELAPSED`` of a task that never ran is ``-``: showing a duration for a queued task
would read as "it has been running this long".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime

from chongming_task._model import TaskSnapshot
from chongming_task._public import public
from chongming_task._redact import printable, redact
from chongming_task.core import SystemClock

__all__ = [
    "COLUMNS",
    "display_width",
    "elapsed_seconds",
    "format_elapsed",
    "render_table",
    "row_cells",
]

COLUMNS: tuple[str, ...] = (
    "TASK_ID",
    "NAME",
    "STATUS",
    "ATTEMPT",
    "ELAPSED",
    "PROGRESS",
    "FAILURE",
    "BUCKET",
)

_GAP = "  "
_EMPTY = "-"


def display_width(text: str) -> int:
    """Terminal cells needed for ``text``: wide and full-width characters count two."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _pad(text: str, width: int) -> str:
    return text + " " * (width - display_width(text))


def format_elapsed(seconds: float | None) -> str:
    """``0.4s``, ``12.3s``, ``2m05s``, ``1h02m``; ``-`` for a task that never ran."""
    if seconds is None:
        return _EMPTY
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def elapsed_seconds(snapshot: TaskSnapshot, now: datetime) -> float | None:
    """Seconds since the first start: to the finish, or to ``now`` while unfinished.

    ``None`` for a task that never ran (shown as ``-``: a duration there would read as
    "it has been running this long").
    """
    start = snapshot.first_started_at or snapshot.started_at
    if start is None:
        return None
    if snapshot.finished_at is not None:
        end = snapshot.finished_at
    elif snapshot.is_terminal:
        end = snapshot.updated_at
    else:
        end = max(now, snapshot.updated_at)
    return max(0.0, (end - start).total_seconds())


def row_cells(snapshot: TaskSnapshot, now: datetime) -> tuple[str, ...]:
    """The cells of one row in :data:`COLUMNS` order (``ps`` on a terminal uses them too)."""
    failure = snapshot.failure.kind.value if snapshot.failure is not None else _EMPTY
    progress = (redact(snapshot.progress.render()) or _EMPTY) if snapshot.progress else _EMPTY
    # One line per row, safe for a terminal: the one sanitiser of the CLI's output.
    return (
        printable(snapshot.task_id),
        printable(snapshot.label or snapshot.name),
        snapshot.status.value,
        f"{snapshot.attempt}/{snapshot.max_attempts}",
        format_elapsed(elapsed_seconds(snapshot, now)),
        printable(progress),
        failure,
        _EMPTY if snapshot.bucket is None else str(snapshot.bucket),
    )


@public
def render_table(
    snapshots: Iterable[TaskSnapshot],
    *,
    now: datetime | None = None,
    columns: Sequence[str] = COLUMNS,
) -> str:
    """Render ``snapshots`` as an aligned text table with a dashed rule under the header.

    Args:
        snapshots: The rows, in the order to show them (``list_tasks()`` output).
        now: The time against which running tasks' ``ELAPSED`` is measured; defaults
            to the system clock (tests pass a fixed time).
        columns: A subset of :data:`COLUMNS`, in the order to show them.

    Raises:
        ValueError: A column name is not one of :data:`COLUMNS`.
    """
    unknown = [column for column in columns if column not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; choose from {list(COLUMNS)}")
    indexes = [COLUMNS.index(column) for column in columns]
    moment = now if now is not None else SystemClock().now()
    rows = [[full[i] for i in indexes] for full in (row_cells(s, moment) for s in snapshots)]
    header = list(columns)
    widths = [display_width(title) for title in header]
    for row in rows:
        widths = [max(width, display_width(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = [
        header,
        ["-" * width for width in widths],
        *rows,
    ]
    return "\n".join(
        _GAP.join(_pad(cell, width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
