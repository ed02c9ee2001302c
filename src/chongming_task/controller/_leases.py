"""Lease renewal and the progress/heartbeat side channel: one thread per controller.

A controller proves it still supervises its tasks by renewing their lease
(``lease_owner``/``lease_until``) before it runs out; ``reconcile()`` in another
process judges a task by that lease, never by the task's heartbeat (guide §8.11).
Progress, heartbeats and checkpoint gaps reach the store on the same thread through
``touch``, which never moves ``status_version`` (guide §8.13), so a chatty task cannot
race the state writes.

One thread serves every task the controller holds: a thread per task would cost
thousands of threads for a big batch, and a lease is a property of the *supervisor*,
so one renewal call (``renew_leases``) covers all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._model import Progress, TaskSnapshot
from chongming_task._service import BackgroundService
from chongming_task.core import Clock
from chongming_task.stores._base import TaskStore

__all__ = ["LeaseKeeper"]

log = logging.getLogger("chongming_task.controller")

#: Renew when a third of the lease is used: two renewals may fail before it expires.
RENEW_FRACTION = 1 / 3
#: Upper bound on how stale ``PROGRESS`` in the store may be.
PROGRESS_INTERVAL = 1.0


class FailureSink(Protocol):
    """Where a failed store call goes: kept and counted, logged unless ``quiet``."""

    def __call__(
        self, task_id: str | None, operation: str, error: BaseException, *, quiet: bool = ...
    ) -> None: ...


@dataclass(slots=True)
class _Seen:
    progress: Progress | None
    heartbeat: datetime | None
    pid: int | None
    gaps: CheckpointGaps | None = None


class LeaseKeeper:
    """Renews this controller's leases and flushes progress, on one daemon thread.

    Args:
        store: Where leases and progress go (``renew_leases``, ``touch``).
        clock: Time source; waits go through it, so a ``FakeClock`` drives the thread.
        owner: The lease owner written on every task.
        lease_ttl: Seconds a lease lasts after each renewal.
        held: Returns the ids of the non-terminal tasks this controller holds.
        active: Returns the snapshots of those holding a slot (the only ones whose
            progress, heartbeat or pid can change).
        lease_until: Computes a fresh ``lease_until`` (shared with the write-through).
        on_failure: Called with ``(task_id, operation, error, quiet=...)`` for a failed
            store call. A failure that repeats the previous one of the same operation
            is passed ``quiet=True`` (still kept and counted, not logged again): a
            store that went away would otherwise log a warning every tick; the first
            success after a streak is logged once.
    """

    def __init__(
        self,
        *,
        store: TaskStore,
        clock: Clock,
        owner: str,
        lease_ttl: float,
        held: Callable[[], Sequence[str]],
        active: Callable[[], Sequence[TaskSnapshot]],
        lease_until: Callable[[], datetime],
        on_failure: FailureSink,
        progress_interval: float = PROGRESS_INTERVAL,
    ) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner
        self._held = held
        self._active = active
        self._lease_until = lease_until
        self._on_failure = on_failure
        self.renew_interval = lease_ttl * RENEW_FRACTION
        self.tick = min(progress_interval, self.renew_interval)
        self._seen: dict[str, _Seen] = {}
        self._next_renewal = 0.0
        self._streaks: dict[str, tuple[str, int]] = {}  # operation -> (error, count)
        self._service = BackgroundService(
            f"chongming-leases[{owner}]",
            self._pass,
            clock=clock,
            on_error=self._pass_failed,
            final=self._last_flush,
            initial_wait=self.tick,
        )

    def start(self) -> None:
        """Start the thread (idempotent; never after ``stop``)."""
        if self._service.started:  # started: every submission calls this
            return
        self._next_renewal = self._clock.monotonic() + self.renew_interval
        self._service.ensure_started()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the thread; one last progress flush runs first so the store is current."""
        self._service.stop(timeout)

    def run_once(self, *, renew: bool) -> None:
        """One pass: flush changed progress/heartbeat/pid, and renew leases if asked."""
        snapshots = self._active()
        live = {snapshot.task_id for snapshot in snapshots}
        for snapshot in snapshots:
            self._flush(snapshot)
        for task_id in [task_id for task_id in self._seen if task_id not in live]:
            del self._seen[task_id]
        if not renew:
            return
        held = self._held()
        if held:
            try:
                self._store.renew_leases(self._owner, held, self._lease_until())
            except Exception as exc:
                self._failed(None, "renew_leases", exc)
            else:
                self._succeeded("renew_leases")

    # ------------------------------------------------------------ internals

    def _flush(self, snapshot: TaskSnapshot) -> None:
        seen = self._seen.get(snapshot.task_id)
        progress, beat, pid = snapshot.progress, snapshot.last_heartbeat_at, snapshot.pid
        if seen is None:
            # Known at creation: the first write carried them.
            self._seen[snapshot.task_id] = seen = _Seen(None, None, None)
        new_progress = progress if progress is not None and progress != seen.progress else None
        new_beat = beat if beat is not None and beat != seen.heartbeat else None
        new_pid = pid if pid is not None and pid != seen.pid else None
        gaps = snapshot.checkpoint_gaps if self._store.keeps_checkpoint_gaps else None
        new_gaps = gaps if gaps is not None and gaps != seen.gaps else None
        if new_progress is None and new_beat is None and new_pid is None and new_gaps is None:
            return
        try:
            if new_gaps is None:  # a store without the field is never passed it
                self._store.touch(
                    snapshot.task_id, progress=new_progress, heartbeat_at=new_beat, pid=new_pid
                )
            else:
                self._store.touch(
                    snapshot.task_id,
                    progress=new_progress,
                    heartbeat_at=new_beat,
                    pid=new_pid,
                    checkpoint_gaps=new_gaps,
                )
        except Exception as exc:
            self._failed(snapshot.task_id, "touch", exc)
            return
        self._succeeded("touch")
        seen.progress, seen.heartbeat, seen.pid, seen.gaps = progress, beat, pid, gaps

    def _failed(self, task_id: str | None, operation: str, error: BaseException) -> None:
        text = f"{type(error).__name__}: {error}"
        previous = self._streaks.get(operation)
        repeated = previous is not None and previous[0] == text
        self._streaks[operation] = (text, previous[1] + 1 if repeated and previous else 1)
        self._on_failure(task_id, operation, error, quiet=repeated)

    def _succeeded(self, operation: str) -> None:
        streak = self._streaks.pop(operation, None)
        if streak is not None:
            log.info(
                "store %s works again for %s after %d failed attempt(s) (last: %s)",
                operation,
                self._owner,
                streak[1],
                streak[0],
            )

    def _pass(self) -> float:
        now = self._clock.monotonic()
        renew = now >= self._next_renewal
        if renew:
            self._next_renewal = now + self.renew_interval
        self.run_once(renew=renew)
        return self.tick

    def _pass_failed(self, exc: Exception, failures: int) -> float:
        """Never let the keeper die: leases would silently expire."""
        log.error("lease keeper pass failed; retrying on the next tick", exc_info=exc)
        return self.tick

    def _last_flush(self) -> None:
        self.run_once(renew=False)
