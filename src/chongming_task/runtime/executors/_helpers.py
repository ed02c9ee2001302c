"""A few daemon threads that do the blocking parts of ``async def`` runs (store writes).

A run on the shared event loop still writes its transitions (``running``, the verdict,
the next attempt, a pause's confirmation) through the store, and a store call blocks:
on the loop's thread it would stall every async task of the process, so the loop hands
each one to a helper and awaits the answer. The helpers are bounded (:data:`SIZE`),
so 1,000 runs ending at once queue their writes instead of starting 1,000 threads
(a store serialises its writes anyway; several helpers let its group commit batch
them). Like the carriers they are daemon threads, never joined at exit, that end after
``LINGER`` idle seconds; a forked child forgets its parent's.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Final

from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task.core import SystemClock

__all__ = ["HELPERS", "LINGER", "SIZE", "HelperPool"]

#: Helper threads at most. Each holds a store call at a time; eight let a store's
#: group commit gather a batch while the loop's thread never waits on a write.
SIZE: Final = 8
#: Seconds an idle helper waits for the next job before its thread exits.
LINGER: Final = 2.0
#: Helpers wait in real time: they serve the store, not task time.
_REAL: Final = SystemClock()


class HelperPool:
    """Jobs run in order of submission on at most ``size`` daemon threads.

    Each helper is a :class:`~chongming_task._service.BackgroundService` whose pass
    takes the next job (``FINISHED`` when there is none: it lingers, then ends).
    """

    def __init__(self, *, size: int = SIZE, linger: float = LINGER, name: str) -> None:
        self._size = size
        self._linger = linger
        self._name = name
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._jobs: deque[Callable[[], None]] = deque()
        self._busy = 0
        self._helpers = [
            BackgroundService(
                f"{self._name}-{index}", self._take_one, clock=_REAL, linger=self._linger
            )
            for index in range(self._size)
        ]

    @property
    def threads(self) -> int:
        """Helper threads alive right now."""
        return sum(helper.alive for helper in self._helpers)

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on a helper; it must not raise (its caller reports its own errors).

        Raises:
            RuntimeError: A helper's thread was needed and could not be started.
        """
        with self._lock:
            self._jobs.append(job)
            # The first ``busy + pending`` helpers hold at least ``pending`` free ones.
            wanted = min(self._size, self._busy + len(self._jobs))
        for helper in self._helpers[:wanted]:
            helper.ensure_started()  # starts it, or wakes it to look for a job

    def _take_one(self) -> StepResult:
        with self._lock:
            if not self._jobs:
                return FINISHED
            job = self._jobs.popleft()
            self._busy += 1
        try:
            job()
        finally:
            with self._lock:
                self._busy -= 1
        return 0.0

    def _forget_after_fork(self) -> None:
        # The helpers' threads do not exist in a forked child; nor do their jobs' callers.
        self._reset()


#: The helpers every ``async def`` run of this process shares.
HELPERS: Final = HelperPool(name="chongming-task:async-helper")
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=HELPERS._forget_after_fork)
