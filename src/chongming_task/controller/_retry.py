"""Run a finished task again: ``Client.retry``, ``retry_many``, the CLI and the dashboard.

A retried task keeps its id and its history. One version-guarded write moves it from
``failed``, ``stopped``, ``cancelled`` or ``lost`` back to ``queued``, held by nobody,
with a transition whose trigger is ``operator:retry`` and which records who asked
(``actor``), why (``reason``) and when (the store's clock). Any worker that may claim
it then runs it from its stored recipe under the ordinary claim rule (buckets, fleet
limits, priority, unique keys).

- **Attempts continue counting**: the next attempt is the one after the last (``attempt``
  3 of a task that failed on its third). The retry policy's budget is not renewed:
  ``max_attempts`` only grows so that at least one more attempt can start (as Oban's
  ``retry_job``), so a task stopped on its first of three attempts keeps the two it did
  not use, and one that used them all gets exactly one more.
- **Refused** (``InvalidState``, a ``ConfigurationError``; nothing is written): a task
  that is not finished, one that ``succeeded`` or was ``skipped`` (not failures: enqueue
  a new task), one without a recipe (submitted in-process with ``Controller.submit``,
  whose arguments are never stored), and one whose ``unique_key`` another unfinished
  task holds (the store's unique index decides). An unknown id is ``UnknownTask``.
- **Races**: two retries of one task (from any processes) read the same version; the
  store's version guard lets exactly one write, and the other reads the task again and
  is refused (it is ``queued`` now).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, Unpack

from chongming_task import _validation
from chongming_task._model import TaskSnapshot
from chongming_task.controller._options import QueueTaskFilters, parse_statuses, task_query
from chongming_task.core import Clock
from chongming_task.core.state_machine import RETRYABLE_TERMINALS, StateMachine, Triggers
from chongming_task.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    InvalidState,
    UnknownTask,
)
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskNotFound, TaskQuery, TaskStore
from chongming_task.stores._capabilities import wake_workers
from chongming_task.stores._queue_records import recipe_of

__all__ = [
    "RETRYABLE",
    "RetryReport",
    "check_retryable",
    "retry_query",
    "retry_task",
    "retry_tasks",
]

#: The states a task can be run again from, in the order the docs list them.
RETRYABLE: Final = tuple(s for s in TaskStatus if s in RETRYABLE_TERMINALS)
_NAMES: Final = ", ".join(s.value for s in RETRYABLE)
#: Reads before giving up on a task that keeps changing under us.
_ATTEMPTS: Final = 20


@dataclass(frozen=True, slots=True)
class RetryReport:
    """What ``retry_many`` did (or, with ``dry_run``, would do).

    ``matched``: every task the filters matched; ``retried``: those queued again (with
    ``dry_run``: those that would be); ``refused``: the others, each with the reason.
    """

    matched: tuple[str, ...]
    retried: tuple[str, ...]
    refused: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "matched": len(self.matched),
            "retried": list(self.retried),
            "refused": dict(self.refused),
        }


def check_retryable(snapshot: TaskSnapshot) -> None:
    """Refuse a task that cannot be run again, saying why and what to do instead.

    Raises:
        InvalidState: Not in failed, stopped, cancelled or lost, or no stored recipe.
    """
    task_id, status = snapshot.task_id, snapshot.status.value
    if not snapshot.is_terminal:
        raise InvalidState(
            f"task {task_id!r} is {status}, not finished: only a finished task can be run "
            f"again ({_NAMES}); wait for it, or stop it first"
        )
    if snapshot.status not in RETRYABLE_TERMINALS:
        raise InvalidState(
            f"task {task_id!r} {status}: that is not a failure, so it is not retried "
            f"(only {_NAMES} tasks are); enqueue a new task to run it again"
        )
    if recipe_of(snapshot) is None:
        raise InvalidState(
            f"task {task_id!r} has no stored recipe (it was not enqueued through the "
            "queue: Controller.submit() never stores arguments), so no worker can run it "
            "again; enqueue it with Client.enqueue() or `chongming-task submit` to make a "
            "task that can be retried"
        )


def retry_task(
    store: TaskStore, task_id: str, *, actor: str, clock: Clock, reason: str | None = None
) -> TaskSnapshot:
    """Queue the finished task ``task_id`` again (one guarded write); the stored snapshot.

    Raises:
        UnknownTask: The store has no such task.
        InvalidState: See :func:`check_retryable`.
        ConfigurationError: Another unfinished task holds its unique key.
        ConcurrencyConflict: The task changed on every one of many reads in a row.
    """
    _validation.check_task_id(task_id)
    _check_reason(reason)
    last: int | None = None
    for _ in range(_ATTEMPTS):
        snapshot = store.get(task_id)
        if snapshot is None:
            raise UnknownTask(task_id, f"no task {task_id!r} in the store")
        check_retryable(snapshot)
        queued = _requeued(snapshot, actor=actor, clock=clock, reason=reason)
        try:
            store.save(
                queued.snapshot,
                expect_version=snapshot.status_version,
                transitions=queued.transitions,
            )
        except (ConcurrencyConflict, TaskNotFound):
            last = snapshot.status_version
            continue  # written meanwhile (another retry?): read it and check again
        wake_workers(store)
        return queued.snapshot
    current = store.get(task_id)
    raise ConcurrencyConflict(task_id, last, current.status_version if current else None)


def _check_reason(reason: object) -> None:
    if reason is not None and not isinstance(reason, str):
        raise ConfigurationError(f"reason must be a string or None, got {reason!r}")


def _requeued(
    snapshot: TaskSnapshot, *, actor: str, clock: Clock, reason: str | None
) -> StateMachine:
    machine = StateMachine(snapshot, clock=clock)
    machine.retry(actor=actor, reason=reason, trigger=Triggers.OPERATOR_RETRY)
    # Held by nobody: any worker owning its bucket may claim it (the claim sets these).
    machine.update(owner=None, lease_owner=None, lease_until=None, pid=None)
    return machine


def retry_query(**filters: Unpack[QueueTaskFilters]) -> TaskQuery:
    """The tasks ``retry_many(**filters)`` looks at: ``list_tasks``'s filters, at least one,
    with ``status`` limited to (and by default) the states a task is retried from.

    Raises:
        ConfigurationError: No filter, or a status no task is retried from.
        TypeError: A filter ``list_tasks`` does not take.
    """
    _validation.refuse_unknown_keywords("retry_many", filters, QueueTaskFilters.__optional_keys__)
    if not any(value is not None for key, value in filters.items() if key != "order"):
        raise ConfigurationError(
            "retry_many() needs at least one filter (status, name_prefix, tag, bucket, "
            "created_after...); to retry every failed task say status='failed'"
        )
    statuses = parse_statuses(filters.get("status"))
    if statuses is not None:
        wrong = sorted(s.value for s in statuses if s not in RETRYABLE_TERMINALS)
        if wrong:
            raise ConfigurationError(
                f"retry_many(status=...): no task is retried from {', '.join(wrong)}; "
                f"choose among {_NAMES}"
            )
    query = task_query(QueueTaskFilters.__optional_keys__, **filters)
    return query if statuses is not None else replace(query, statuses=RETRYABLE_TERMINALS)


def retry_tasks(
    store: TaskStore,
    query: TaskQuery,
    *,
    actor: str,
    clock: Clock,
    reason: str | None = None,
    dry_run: bool = False,
) -> RetryReport:
    """:func:`retry_task` for every task ``query`` matches (``dry_run``: check, write nothing).

    A task that cannot be retried is listed in ``refused`` with the reason; it does not
    stop the others.
    """
    _check_reason(reason)
    found = store.query(query)
    retried: list[str] = []
    refused: dict[str, str] = {}
    for snapshot in found:
        try:
            if dry_run:
                check_retryable(snapshot)
            else:
                retry_task(store, snapshot.task_id, actor=actor, clock=clock, reason=reason)
        except (ConfigurationError, ConcurrencyConflict) as exc:
            refused[snapshot.task_id] = str(exc)
            continue
        retried.append(snapshot.task_id)
    return RetryReport(tuple(s.task_id for s in found), tuple(retried), refused, dry_run)
