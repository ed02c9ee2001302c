"""The task part's rules for a store that holds its rows in Python.

A store that reads its snapshots into memory (the in-memory reference, a backend over
a key-value service, ``examples/07_custom_store.py``) answers ``query``,
``count_by_status``, ``count_by_bucket``, ``prune`` and ``touch`` by the same rules:
these functions are those rules, once, over rows of a snapshot and its insertion
number (:class:`StoredRow`), so such a store keeps only its storage. The SQL stores
say the same in SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar

from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._model import Progress, TaskSnapshot
from chongming_task._validation import check_count
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores._codec import require_aware
from chongming_task.stores._records import Order, TaskQuery

__all__ = [
    "StoredRow",
    "TaskRow",
    "count_buckets",
    "count_statuses",
    "order_key",
    "order_rows",
    "prune_choice",
    "select_tasks",
    "touch_changes",
]


class StoredRow(Protocol):
    """A stored snapshot with its insertion number (ties of every order break on it)."""

    @property
    def seq(self) -> int: ...

    @property
    def snapshot(self) -> TaskSnapshot: ...


class TaskRow(NamedTuple):
    """A :class:`StoredRow` for a store that keeps none of its own."""

    seq: int
    snapshot: TaskSnapshot


R = TypeVar("R", bound=StoredRow)

_ORDERS: dict[str, tuple[Callable[[StoredRow], Any], bool]] = {
    "created": (lambda row: (row.snapshot.created_at, row.seq), False),
    "-created": (lambda row: (row.snapshot.created_at, row.seq), True),
    "updated": (lambda row: (row.snapshot.updated_at, row.seq), False),
    "-updated": (lambda row: (row.snapshot.updated_at, row.seq), True),
    "priority": (lambda row: (-row.snapshot.priority, row.snapshot.created_at, row.seq), False),
    "id": (lambda row: row.snapshot.task_id, False),
}


def order_key(order: Order) -> tuple[Callable[[StoredRow], Any], bool]:
    """How ``TaskQuery.order`` sorts rows: the key and whether it is reversed
    (``priority``: highest first, then oldest first)."""
    return _ORDERS[order]


def select_tasks(rows: Iterable[StoredRow], query: TaskQuery) -> list[TaskSnapshot]:
    """The snapshots of ``rows`` that ``query`` matches, in ``query.order``, up to its limit."""
    return order_rows([row for row in rows if query.matches(row.snapshot)], query)


def order_rows(found: list[R], query: TaskQuery) -> list[TaskSnapshot]:
    """The snapshots of ``found`` (the rows ``query`` matches; sorted in place) in
    ``query.order``, up to its limit."""
    key, reverse = order_key(query.order)
    found.sort(key=key, reverse=reverse)
    if query.limit is not None:
        found = found[: query.limit]
    return [row.snapshot for row in found]


def count_statuses(
    snapshots: Iterable[TaskSnapshot], query: TaskQuery | None = None
) -> dict[TaskStatus, int]:
    """``count_by_status``: per status present, how many of ``snapshots`` match ``query``."""
    counts: dict[TaskStatus, int] = {}
    for s in snapshots:
        if query is None or query.matches(s):
            counts[s.status] = counts.get(s.status, 0) + 1
    return counts


def count_buckets(snapshots: Iterable[TaskSnapshot]) -> dict[int, int]:
    """``count_by_bucket``: per bucket, how many of ``snapshots`` have it."""
    counts: dict[int, int] = {}
    for s in snapshots:
        if s.bucket is not None:
            counts[s.bucket] = counts.get(s.bucket, 0) + 1
    return counts


def prune_choice(rows: Iterable[StoredRow], keep_terminal: int) -> list[TaskSnapshot]:
    """What ``prune(keep_terminal)`` deletes: every terminal task of ``rows`` but the
    ``keep_terminal`` most recently updated (ties: the later inserted is kept).

    Raises:
        ConfigurationError: ``keep_terminal`` is not an ``int`` >= 0.
    """
    check_count(keep_terminal, "keep_terminal")
    done = [row for row in rows if row.snapshot.status in TERMINAL]
    done.sort(key=lambda row: (row.snapshot.updated_at, row.seq), reverse=True)
    return [row.snapshot for row in done[keep_terminal:]]


def touch_changes(
    progress: Progress | None,
    heartbeat_at: datetime | None,
    lease_owner: str | None,
    lease_until: datetime | None,
    pid: int | None,
    *,
    checkpoint_gaps: CheckpointGaps | None = None,
) -> dict[str, Any]:
    """The snapshot fields a ``touch`` with these arguments replaces (``None``: left
    alone), for ``snapshot.replace(**changes)``; empty when it changes nothing.

    Raises:
        ConfigurationError: ``heartbeat_at`` or ``lease_until`` is a naive datetime.
    """
    require_aware(heartbeat_at, "heartbeat_at")
    require_aware(lease_until, "lease_until")
    given = {
        "progress": progress,
        "last_heartbeat_at": heartbeat_at,
        "lease_owner": lease_owner,
        "lease_until": lease_until,
        "pid": pid,
        "checkpoint_gaps": checkpoint_gaps,
    }
    return {field: value for field, value in given.items() if value is not None}
