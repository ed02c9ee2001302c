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

__all__ = ["HELPERS", "LINGER", "SIZE", "HelperPool"]

#: Helper threads at most. Each holds a store call at a time; eight let a store's
#: group commit gather a batch while the loop's thread never waits on a write.
SIZE: Final = 8
#: Seconds an idle helper waits for the next job before its thread exits.
LINGER: Final = 2.0


class HelperPool:
    """Jobs run in order of submission on at most ``size`` daemon threads."""

    def __init__(self, *, size: int = SIZE, linger: float = LINGER, name: str) -> None:
        self._size = size
        self._linger = linger
        self._name = name
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[Callable[[], None]] = deque()
        self._threads = 0
        self._idle = 0

    @property
    def threads(self) -> int:
        """Helper threads alive right now."""
        with self._cond:
            return self._threads

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on a helper; it must not raise (its caller reports its own errors).

        Raises:
            RuntimeError: No helper was running and a thread could not be started.
        """
        with self._cond:
            self._jobs.append(job)
            if self._idle >= len(self._jobs):  # an idle helper is free for this one
                self._cond.notify()
                return
            if self._threads >= self._size:
                return  # a busy helper takes it next
            self._threads += 1
        try:
            threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        except BaseException:
            with self._cond:
                self._threads -= 1
                if job in self._jobs:  # not run: the caller hears of it, nobody else
                    self._jobs.remove(job)
            raise

    def _serve(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._jobs:
                    self._idle += 1
                    woken = cond.wait(self._linger)
                    self._idle -= 1
                    if not woken and not self._jobs:
                        self._threads -= 1
                        return
                job = self._jobs.popleft()
            job()
            del job  # not kept alive while idle: it refers to a whole run

    def _forget_after_fork(self) -> None:
        # The helpers' threads do not exist in a forked child; nor do their jobs' callers.
        self._reset()


#: The helpers every ``async def`` run of this process shares.
HELPERS: Final = HelperPool(name="chongming-task:async-helper")
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=HELPERS._forget_after_fork)
