"""Reads that survive a corrupted row: skip it with a warning that names it.

The store itself raises :class:`~chongming_task.stores._base.CorruptRows` for a row it
cannot decode (a direct ``get`` must not pretend); listings and counts built for people
(``ps``, ``stats``, ``schedules``, ``health``) go through these helpers so that one
broken row never takes a whole command down.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from chongming_task._model import TaskSnapshot
from chongming_task.errors import StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._records import CorruptRows, TaskQuery

__all__ = ["Warn", "counts_skipping_corrupt", "query_skipping_corrupt"]

log = logging.getLogger("chongming_task.stores")

Warn = Callable[[str, str], None]
"""Told ``(task_id, what is wrong)`` for each skipped row."""


def _log_warning(task_id: str, error: str) -> None:
    log.warning("skipping corrupt task row %r: %s", task_id, error, extra={"task_id": task_id})


def query_skipping_corrupt(
    read: Callable[[], list[TaskSnapshot]], warn: Warn = _log_warning
) -> tuple[list[TaskSnapshot], dict[str, str]]:
    """``read()``'s snapshots, without the corrupt rows (each passed to ``warn``)."""
    try:
        return read(), {}
    except CorruptRows as exc:
        for task_id, error in exc.corrupt.items():
            warn(task_id, error)
        return exc.snapshots, exc.corrupt


def counts_skipping_corrupt(
    count: Callable[[], dict[TaskStatus, int]],
    query: Callable[[TaskQuery], list[TaskSnapshot]],
    scope: TaskQuery = TaskQuery(),  # noqa: B008
    warn: Warn = _log_warning,
) -> tuple[dict[TaskStatus, int], dict[str, str]]:
    """Counts per status; when the store cannot count (a row with an unknown status),
    counted from the decodable rows of ``scope`` instead, the others passed to ``warn``."""
    try:
        return count(), {}
    except CorruptRows:
        raise
    except StoreError as first:
        snapshots, corrupt = query_skipping_corrupt(lambda: query(scope), warn)
        if not corrupt:
            raise first from None
        return dict(Counter(snapshot.status for snapshot in snapshots)), corrupt
