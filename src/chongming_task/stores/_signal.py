"""In-process wake-ups for ``wait_for_commands``, public for third-party stores.

A command poller runs ``claim_commands`` then ``wait_for_commands`` in a loop. A
command submitted between the two must not be slept through, so the signal counts
notifications (a *generation*) and each thread remembers the generation it saw when
it last claimed: ``wait`` returns at once if anything happened since. Cross-process
backends add a ``poll`` callback (SQLite) or call :meth:`CommandSignal.notify` from a
listener (PostgreSQL LISTEN/NOTIFY).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from chongming_task.core import Clock

if TYPE_CHECKING:
    from chongming_task.stores._file_watch import FileWatch

__all__ = ["CommandSignal"]


class CommandSignal:
    """A generation counter with waiters, closable so that no waiter outlives its store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._waiters: set[threading.Event] = set()
        self._closed = False
        self._seen = threading.local()

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def mark_seen(self) -> None:
        """Record, for this thread, the generation its next ``wait`` compares against.

        Call it at the start of ``claim_commands``: anything notified after this point
        makes the following ``wait`` return immediately.
        """
        self._seen.generation = self.generation

    def notify(self) -> None:
        """A command may have arrived: wake every waiter."""
        with self._lock:
            self._generation += 1
            waiters = list(self._waiters)
        for event in waiters:
            event.set()

    def close(self) -> None:
        """Wake every waiter and make later waits return at once."""
        with self._lock:
            self._closed = True
        self.notify()

    def wait(
        self,
        clock: Clock,
        timeout: float,
        *,
        poll: Callable[[], bool] | None = None,
        poll_interval: float = 0.01,
        watch: FileWatch | None = None,
    ) -> None:
        """Block up to ``timeout`` (clock seconds) for a notification or a true ``poll()``.

        With a ``watch``, ``poll()`` runs again whenever the watched files are written
        (a nudge: the event is set without a new generation), and otherwise every
        ``poll_interval``.
        """
        event = threading.Event()
        since: int | None = getattr(self._seen, "generation", None)
        with self._lock:
            if self._closed or (since is not None and since != self._generation):
                self._seen.generation = self._generation
                return
            self._waiters.add(event)
            generation = self._generation
        if watch is not None:
            watch.subscribe(event)
        try:
            if poll is None:
                clock.wait(event, max(0.0, timeout))
                return
            deadline = clock.monotonic() + max(0.0, timeout)
            while not poll():
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    return
                if clock.wait(event, min(poll_interval, remaining)):
                    event.clear()  # before looking: a notify from now on sets it again
                    with self._lock:
                        if self._closed or self._generation != generation:
                            return  # notified, not nudged
        finally:
            if watch is not None:
                watch.unsubscribe(event)
            with self._lock:
                self._waiters.discard(event)
                # Whatever woke us has now been seen; the caller claims next.
                self._seen.generation = self._generation
