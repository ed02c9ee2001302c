"""Restart recovery: mark tasks whose supervisor is gone, honestly (guide §8.11).

The question is "is anyone still supervising it?", answered by the task's *lease*
(renewed by its controller's lease keeper), never by its heartbeat: a healthy task
deep in a long computation stops beating, and judging liveness by the beat would
mark it ``lost`` and abandon a process that is fine.

==========================================  ===================================
Situation                                   Action
==========================================  ===================================
lease not expired                           untouched: a live process holds it
expired, occupying (starting/running/       ``lost`` -- the carrier is gone
pausing/stopping)
expired, not occupying (pending/blocked/    unchanged, reported ``adoptable``
queued/paused/retry_wait)
the holder wrote first (version conflict),  let go, reported ``skipped``
or changed it between the two reads
==========================================  ===================================

It never re-executes anything: the store keeps states, not recipes (function and
arguments were never stored), so re-running is the caller's decision.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from chongming_task._model import Failure, FailureKind, TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task.core import Clock
from chongming_task.states import OCCUPYING, TERMINAL, TaskStatus
from chongming_task.stores._base import LostCandidate, TaskQuery, TaskStore

__all__ = ["RECONCILE_TRIGGER", "ReconcileReport", "reconcile"]

#: The trigger of the ``-> lost`` transitions written by reconcile.
RECONCILE_TRIGGER = "reconcile:lease_expired"

_UNFINISHED = frozenset(set(TaskStatus) - TERMINAL)

#: Occupying tasks marked per ``mark_lost_many`` call: each page is read, moved to
#: ``lost`` by the state machine and stored with one version-guarded ``save_many``.
WRITE_BATCH = 1000


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileReport:
    """What one ``reconcile()`` found, by task id."""

    lost: tuple[str, ...] = ()
    """Occupying tasks whose lease expired: marked ``lost`` (or would be, on a dry run)."""
    adoptable: tuple[str, ...] = ()
    """Non-occupying tasks whose lease expired: nobody holds them; resubmit to run them."""
    skipped: tuple[str, ...] = ()
    """Tasks that changed under us (their holder came back: it wrote first, renewed the
    lease or moved the task on between reconcile's two reads): left alone."""
    dry_run: bool = False
    """True when nothing was written."""

    @property
    def clean(self) -> bool:
        """True when nothing needed attention."""
        return not (self.lost or self.adoptable or self.skipped)


def _lost_failure(task: LostCandidate, actor: str) -> Failure:
    holder = task.lease_owner or task.owner or "an unknown owner"
    until = task.lease_until.isoformat() if task.lease_until else "never set"
    return Failure(
        kind=FailureKind.LOST,
        message=(
            f"supervisor {holder} stopped renewing its lease (expired {until}) while the "
            f"task was {task.status.value}; the result is unknown (found by {actor})"
        ),
        retryable=True,
    )


def reconcile(
    store: TaskStore,
    *,
    clock: Clock,
    actor: str,
    buckets: Collection[int] | None = None,
    held: Collection[str] = (),
    dry_run: bool = False,
    on_lost: Callable[[Transition, TaskSnapshot], None] | None = None,
    metadata_eq: Mapping[str, str] | None = None,
    occupying_only: bool = False,
) -> ReconcileReport:
    """Apply the table above to every unfinished task in ``buckets`` (all when ``None``).

    Two steps: one ``query_heads`` sorts every task whose lease expired into adoptable
    or occupying (tasks with a live lease are filtered out by the store), then the
    occupying ones are marked a page at a time by the store's ``mark_lost_many``, which
    reads each page again with the same judgement (status and lease), moves each task
    to ``lost`` through the state machine and saves it guarded by its version: a task
    that changed between the two steps, or whose holder writes first, is reported
    ``skipped``.

    Args:
        store: Where the tasks are.
        clock: Decides which leases have expired.
        actor: Who is reconciling (written on the ``lost`` transitions).
        buckets: Only these buckets (a node's own, guide §8.14); ``None`` for every task.
        held: Task ids the caller supervises right now: never touched.
        dry_run: Report only, write nothing (and read no snapshot).
        on_lost: Told of every ``-> lost`` transition once it is stored, with the
            snapshot after it (the controller publishes it to its subscribers, so
            observers hear it too). ``None`` lets the store skip reading snapshots.
        metadata_eq: Only tasks whose metadata has these values (the scheduler
            settles the runs of one schedule: ``{"schedule": name}``).
        occupying_only: Look only for tasks to mark ``lost`` (nothing is reported
            ``adoptable``): a worker's periodic recovery, which runs every few seconds
            and must not read the whole work queue each time.

    Raises:
        StoreError: The store failed while reading or writing.
    """
    scope = None if buckets is None else frozenset(buckets)
    now = clock.now()
    held_ids = frozenset(held)
    adoptable: list[str] = []
    occupying: list[str] = []
    heads = store.query_heads(
        TaskQuery(
            statuses=OCCUPYING if occupying_only else _UNFINISHED,
            buckets=scope,
            lease_expired_by=now,
            metadata_eq=dict(metadata_eq) if metadata_eq else None,
        )
    )
    for task_id, status, _ in heads:
        if task_id in held_ids:
            continue
        (occupying if status in OCCUPYING else adoptable).append(task_id)
    if dry_run:
        return ReconcileReport(lost=tuple(occupying), adoptable=tuple(adoptable), dry_run=True)
    lost: list[str] = []
    skipped: list[str] = []

    # A crashed node's tasks share a few (holder, lease, status) combinations: one
    # Failure each, so the store's state machine runs once per group (``mark_lost_many``).
    failures: dict[tuple[object, ...], Failure] = {}

    def failure(task: LostCandidate) -> Failure:
        until = task.lease_until
        # The instant's text, not the instant: equal instants in two offsets read apart.
        key = (
            task.lease_owner,
            task.owner,
            None if until is None else until.isoformat(),
            task.status,
        )
        found = failures.get(key)
        if found is None:
            found = failures[key] = _lost_failure(task, actor)
        return found

    for start in range(0, len(occupying), WRITE_BATCH):
        page = occupying[start : start + WRITE_BATCH]
        still = TaskQuery(
            task_ids=frozenset(page),
            statuses=OCCUPYING,
            buckets=scope,
            lease_expired_by=now,
            metadata_eq=dict(metadata_eq) if metadata_eq else None,
        )
        marks = store.mark_lost_many(
            still,
            clock=clock,
            actor=actor,
            trigger=RECONCILE_TRIGGER,
            failure=failure,
            snapshots=on_lost is not None,
        )
        if len(marks) < len(page):
            found = {mark.task_id for mark in marks}
            skipped.extend(task_id for task_id in page if task_id not in found)
        for mark in marks:
            if mark.transition is None:
                skipped.append(mark.task_id)  # the holder wrote first
                continue
            lost.append(mark.task_id)
            if on_lost is not None:
                assert mark.snapshot is not None  # asked for with snapshots=True
                on_lost(mark.transition, mark.snapshot)
    return ReconcileReport(lost=tuple(lost), adoptable=tuple(adoptable), skipped=tuple(skipped))
