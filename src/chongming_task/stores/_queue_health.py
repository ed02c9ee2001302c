"""What the work queue looks like right now: workers, depth, orphaned buckets.

``chongming-task health`` and ``workers``, and the metrics, read this one summary so
they never disagree. A worker is *live* while its heartbeat is recent (three of its
intervals, at least 2 s); one that stopped beating without a clean shutdown is *dead*.
A bucket with queued unheld work and no live owner is reported by number: nothing will
run those tasks until a worker owning it starts. Paused queues are listed, and are not
a problem: an operator stopped their intake on purpose. The depth and the oldest age
of each bucket come from ``store.waiting_work()`` (the built-in stores count a partial
index and read one task per bucket: however long the queue, no queued task is decoded).

It only reads the store, so it lives with the stores: the CLI, the queue and the
metrics collectors (a layer below the queue) all use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores._base import QueueStore, TaskQuery, TaskStore
from chongming_task.stores._pauses import QueuePause
from chongming_task.stores._queue_records import WorkerRecord, recipe_of

__all__ = ["QueueHealth", "queue_health", "split_waiting"]

#: Expired leases listed at most.
SCAN_LIMIT = 10_000
#: Task ids per query of :func:`split_waiting`.
_PAGE = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueHealth:
    checked_at: datetime
    workers: tuple[WorkerRecord, ...] = ()
    live: tuple[str, ...] = ()
    dead: tuple[str, ...] = ()
    depth: dict[str, int] = field(default_factory=dict)
    """Queued unheld tasks per bucket (``"-"`` for tasks without a bucket)."""
    oldest_age: dict[str, float] = field(default_factory=dict)
    """Seconds the oldest queued unheld task of each bucket has waited."""
    orphaned: tuple[str, ...] = ()
    """Buckets with queued work and no live owner."""
    expired: tuple[str, ...] = ()
    """Occupying tasks whose lease expired (reconcile will mark them lost)."""
    paused: tuple[QueuePause, ...] = ()
    """Paused queues: reported, never a problem (an operator stopped their intake)."""

    @property
    def problems(self) -> list[str]:
        found = [f"worker {w} stopped heart-beating" for w in self.dead]
        found += [
            f"bucket {b} has {self.depth.get(b, 0)} queued task(s) and no live worker owning it"
            for b in self.orphaned
        ]
        found += [f"task {t}: lease expired (its worker is gone)" for t in self.expired]
        return found

    @property
    def healthy(self) -> bool:
        return not self.problems

    def state_of(self, worker: WorkerRecord) -> str:
        """``live`` (heart-beating), ``stopped`` (shut down cleanly) or ``dead``."""
        if worker.worker_id in self.live:
            return "live"
        return "stopped" if worker.stopped_at is not None else "dead"


def queue_health(store: TaskStore, now: datetime | None = None) -> QueueHealth:
    now = now or store.clock.now()
    workers = tuple(store.list_workers()) if isinstance(store, QueueStore) else ()
    live = tuple(w.worker_id for w in workers if w.alive(now))
    dead = tuple(w.worker_id for w in workers if w.stopped_at is None and not w.alive(now))
    # Only workers claim queued work: a controller that declared buckets runs its own.
    live_records = [w for w in workers if w.alive(now) and w.kind == "worker"]
    depth: dict[str, int] = {}
    oldest: dict[str, float] = {}
    orphaned: list[str] = []
    # Buckets in numeric order, the tasks without a bucket ("-") last.
    waiting = store.waiting_work()
    for bucket in sorted(waiting, key=lambda b: (b is None, b or 0)):
        work = waiting[bucket]
        key = "-" if bucket is None else str(bucket)
        depth[key] = work.depth
        oldest[key] = max(0.0, (now - work.oldest_since).total_seconds())
        if not any(w.owns(bucket) for w in live_records):
            orphaned.append(key)
    expired = tuple(
        head.task_id
        for head in store.query_heads(
            TaskQuery(statuses=frozenset(OCCUPYING), lease_expired_by=now, limit=SCAN_LIMIT)
        )
    )
    pauses = store.list_queue_pauses() if isinstance(store, QueueStore) else []
    return QueueHealth(
        paused=tuple(pauses),
        checked_at=now,
        workers=workers,
        live=live,
        dead=dead,
        depth=depth,
        oldest_age=oldest,
        orphaned=tuple(orphaned),
        expired=expired,
    )


def split_waiting(
    store: TaskStore, task_ids: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(waiting, others)``: the work queue's unclaimed tasks among ``task_ids``, and the rest.

    ``reconcile()`` reports every unheld task that is not occupying as *adoptable*
    (nobody holds it: resubmit to run). A task enqueued through the work queue and not
    claimed yet is not that: a worker owning its bucket will claim it. The worker's
    start-up line and ``chongming-task reconcile`` say which is which; order is kept.
    """
    ids = list(task_ids)
    waiting: set[str] = set()
    for start in range(0, len(ids), _PAGE):
        page = TaskQuery(
            task_ids=frozenset(ids[start : start + _PAGE]),
            statuses=frozenset({TaskStatus.QUEUED}),
        )
        waiting.update(
            s.task_id for s in store.query(page) if s.owner is None and recipe_of(s) is not None
        )
    return (
        tuple(t for t in ids if t in waiting),
        tuple(t for t in ids if t not in waiting),
    )
