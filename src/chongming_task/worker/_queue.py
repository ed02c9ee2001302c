"""A worker's work-queue duties: claim, heart-beat, and recover without a human.

* **claim** (``claim(free)``): queued unheld tasks of the buckets it owns, highest
  priority first, only as many as it has free slots (``TaskStore.claim_queued``), each
  then run by the controller exactly as a local submit
  (``Controller._internal.run_claimed``); the store's fleet limits (plus the
  worker's ``global_limits``) are obeyed inside the claim, which takes the tasks'
  slots, given back when they end (``release_slots``; a dead worker's slots free when
  their lease passes).
* **heartbeat**: its :class:`WorkerRecord` in the store's registry every
  ``heartbeat_interval`` (``chongming-task workers``, ``health``): its bucket
  declaration, with a lease of three intervals; handoffs addressed to it are applied
  between two claims (:mod:`chongming_task.buckets`).
* **recovery**, every ``reconcile_interval``: ``reconcile()`` (expired leases of
  occupying tasks -> ``lost``), queued tasks claimed by a worker that died before
  starting them go back to the queue (claimable again, never both), and a ``lost``
  task of an idempotent definition (``@task(idempotent=True)``) is revived with
  ``retry()`` and queued again with its stored recipe. Nothing else is re-run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from datetime import timedelta
from typing import TYPE_CHECKING

from chongming_task.buckets import BucketAgent, declaration_lease
from chongming_task.controller._reconcile import reconcile
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, InvalidTransition
from chongming_task.queue import QueueChildren
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery
from chongming_task.stores._queue_records import WorkerRecord, concurrency_key_of, recipe_of
from chongming_task.stores._queue_store import QueueStore

if TYPE_CHECKING:
    from chongming_task.worker._daemon import Worker

__all__ = ["WorkQueueDuty", "is_idempotent"]

log = logging.getLogger("chongming_task.worker")

#: Longest wait between two looks at the handoff commands addressed to the worker (a
#: claim round trip each; the intake loop itself may spin much faster when busy).
HANDOFF_POLL = 0.25

#: Queued tasks one claim takes at most. A worker with 1,000 free slots claims them
#: in several rounds (the intake polls again at once after a claim that took some):
#: the first tasks start while the next are claimed, instead of after one claim of
#: 1,000 rows, and the heartbeat between two rounds is never a long claim away.
CLAIM_BATCH = 100


def is_idempotent(fn: object) -> bool:
    """Whether a task function opted in to re-execution after ``lost``."""
    spec = getattr(fn, "__chongming_task__", None)
    return bool(getattr(spec, "idempotent", False) or getattr(fn, "idempotent", False))


class WorkQueueDuty:
    """The queue half of a :class:`~chongming_task.worker._daemon.Worker`."""

    def __init__(self, worker: Worker, queue: QueueStore) -> None:
        self.worker = worker
        self.controller = worker.controller
        self.store = worker.store
        #: The store's work queue (the store itself, as a ``QueueStore``).
        self.queue = queue
        self.clock = self.controller.clock
        self._started = self.clock.now()
        self._next_beat = 0.0
        self._next_reconcile = self.clock.monotonic() + worker.reconcile_interval
        #: How the claimed tasks' ``ctx.enqueue`` stores children (the same queue).
        self.children = QueueChildren(
            self.store,
            registry=self.controller.registry,
            bucket_policy=self.controller.bucket_policy,
        )
        self.revived = 0
        self._slotted: set[str] = set()  # claimed holding global slots, not yet released
        self._slotted_lock = threading.Lock()
        #: Declares the buckets in the registry and applies handoffs (docs/buckets.md).
        self.buckets = BucketAgent(self.controller, kind="worker", heartbeat=self.heartbeat)
        self._next_handoff_poll = 0.0

    def release_slots(self, task_id: str) -> None:
        """Give back the global slots of a claimed task that ended (once)."""
        with self._slotted_lock:
            if task_id not in self._slotted:
                return
            self._slotted.discard(task_id)
        try:
            self.queue.release_global_slots(self.worker.owner, task_id)
        except Exception as exc:  # its lease runs out instead: the slot frees itself
            log.warning(
                "could not release the global slots of %s (they free when its lease "
                "passes): %s: %s",
                task_id,
                type(exc).__name__,
                exc,
            )

    def _buckets(self) -> frozenset[int] | None:
        controller = self.controller
        return None if controller.owns_all_buckets else controller.owned_buckets

    def claim(self, free: int) -> int:
        """Claim up to ``free`` queued tasks (:data:`CLAIM_BATCH` at most) and hand them
        to the controller."""
        if free <= 0:
            return 0
        until = self.clock.now() + timedelta(seconds=self.controller.lease_ttl)
        claimed = self.queue.claim_queued(
            self.worker.owner,
            buckets=self._buckets(),
            limit=min(free, CLAIM_BATCH),
            lease_until=until,
            global_limits=self.worker.global_limits or None,
        )
        for snapshot in claimed:
            if snapshot.tags or concurrency_key_of(snapshot) is not None:
                with self._slotted_lock:  # it may hold slots of a fleet limit
                    self._slotted.add(snapshot.task_id)
            try:
                self.controller._internal.run_claimed(snapshot, self.children)
            except ConfigurationError as exc:
                self._refuse(snapshot.task_id, str(exc))
                continue
            self.worker.claimed += 1
            log.info("claimed %s (%s) from the queue", snapshot.task_id, snapshot.name)
        return len(claimed)

    def _refuse(self, task_id: str, error: str) -> None:
        """A claimed task this worker cannot run (unknown name, bad arguments): failed."""
        from chongming_task._model import Failure, FailureKind

        log.warning("worker %s: cannot run queued task %s: %s", self.worker.owner, task_id, error)
        snapshot = self.store.get(task_id)
        if snapshot is None or snapshot.status is not TaskStatus.QUEUED:
            return
        machine = StateMachine(snapshot, clock=self.clock)
        machine.mark_starting(trigger="queue:claimed")
        machine.mark_failed(
            Failure(kind=FailureKind.EXCEPTION, message=error, retryable=False),
            trigger="queue:refused",
        )
        with contextlib.suppress(ConcurrencyConflict):  # stopped meanwhile: nothing to do
            self.store.save(
                machine.snapshot.replace(lease_until=None),
                expect_version=snapshot.status_version,
                transitions=machine.transitions,
            )
        self.release_slots(task_id)

    # ------------------------------------------------------------ periodic

    def periodic(self) -> None:
        now = self.clock.monotonic()
        if now >= self._next_handoff_poll:
            # Here, between two claims: a released bucket is claimed no more.
            self._next_handoff_poll = now + min(HANDOFF_POLL, self.worker.heartbeat_interval)
            self.buckets.poll()
        if now >= self._next_beat:
            self._next_beat = now + self.worker.heartbeat_interval
            self.heartbeat()
        if now >= self._next_reconcile:
            self._next_reconcile = now + self.worker.reconcile_interval
            self.recover()

    def heartbeat(self, *, stopped: bool = False) -> None:
        controller = self.controller
        from chongming_task import __version__

        buckets = self._buckets()
        now = self.clock.now()
        record = WorkerRecord(
            worker_id=self.worker.owner,
            host=socket.gethostname(),
            pid=os.getpid(),
            version=__version__,
            buckets=None if buckets is None else tuple(sorted(buckets)),
            slots=self.worker.max_parallel,
            started_at=self._started,
            heartbeat_at=now,
            heartbeat_interval=self.worker.heartbeat_interval,
            stopped_at=now if stopped else None,
            kind="worker",
            lease_until=now + timedelta(seconds=declaration_lease(self.worker.heartbeat_interval)),
            num_buckets=controller.bucket_policy.num_buckets,
            draining=self.buckets.draining,
        )
        try:
            self.queue.put_worker(record)
        except Exception as exc:  # a store hiccup must not end the worker
            log.warning("worker heartbeat failed: %s: %s", type(exc).__name__, exc)
        del controller

    def recover(self) -> None:
        """Reconcile expired leases, release dead claims, revive idempotent lost tasks."""
        controller = self.controller
        try:
            # Every bucket, not only ours: marking an expired lease lost is honest
            # whoever does it, and the dead worker's buckets may have no live owner.
            report = reconcile(
                self.store,
                clock=self.clock,
                actor=controller.owner,
                buckets=None,
                held=[run.task_id for run in controller.runs() if not run.done],
                occupying_only=True,
            )
        except Exception as exc:
            log.warning("periodic reconcile failed: %s: %s", type(exc).__name__, exc)
            return
        for task_id in report.lost:
            log.warning("task %s is lost: its worker stopped renewing its lease", task_id)
        try:
            self._release_dead_claims()
            for task_id in report.lost:
                self._revive(task_id)
        except Exception as exc:
            log.warning("queue recovery failed: %s: %s", type(exc).__name__, exc)

    def _release_dead_claims(self) -> None:
        """Queued tasks claimed by a worker whose lease expired: back to the queue."""
        now = self.clock.now()
        buckets = self._buckets()
        held = {run.task_id for run in self.controller.runs()}
        for snapshot in self.store.query(
            TaskQuery(
                statuses=frozenset({TaskStatus.QUEUED}),
                buckets=buckets,
                owned=True,  # claimed: never a read of the whole waiting queue
                lease_expired_by=now,
            )
        ):
            if snapshot.owner is None or snapshot.task_id in held or recipe_of(snapshot) is None:
                continue
            released = snapshot.replace(owner=None, lease_owner=None, lease_until=None)
            try:
                self.store.save(released, expect_version=snapshot.status_version)
            except ConcurrencyConflict:
                continue
            log.warning("released %s: claimed by %s, which died", snapshot.task_id, snapshot.owner)
            self.wake_workers()

    def wake_workers(self) -> None:
        self.queue.notify_work()

    def _revive(self, task_id: str) -> None:
        snapshot = self.store.get(task_id)
        if snapshot is None or snapshot.status is not TaskStatus.LOST:
            return
        if recipe_of(snapshot) is None:
            return
        try:
            definition = self.controller.registry.require(snapshot.name)
        except ConfigurationError:
            return
        if not is_idempotent(definition.fn):
            return
        machine = StateMachine(snapshot, clock=self.clock)
        try:
            machine.retry(actor=self.worker.owner, reason="idempotent task revived after lost")
        except InvalidTransition:
            return
        revived = machine.snapshot.replace(owner=None, lease_owner=None, lease_until=None)
        try:
            self.store.save(
                revived,
                expect_version=snapshot.status_version,
                transitions=machine.transitions,
            )
        except ConcurrencyConflict:
            return
        self.revived += 1
        log.warning("revived lost task %s (idempotent): queued again", task_id)
        self.wake_workers()
