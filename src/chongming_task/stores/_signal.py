"""In-process wake-ups for ``wait_for_commands``, public for third-party stores.

A command poller runs ``claim_commands`` then ``wait_for_commands`` in a loop. A
command submitted between the two must not be slept through, so the signal counts
notifications (a *generation*) and each thread remembers the generation it saw when
it last claimed: ``wait`` returns at once if anything happened since. Cross-process
backends add a ``poll`` callback (SQLite) or call :meth:`CommandSignal.notify` from a
listener (PostgreSQL LISTEN/NOTIFY).

Two topics share the signal: commands, and queued work (``notify(work=True)``). A
worker's intake waits for either (``wait_for_work``); a command poller waits for
commands only (``commands_only=True``), so a busy queue's enqueues do not send it to
claim commands that are not there.
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
        self._generation = 0  # every notification
        self._commands = 0  # the notifications that are not work only
        #: Waiting events -> whether the waiter wants commands only.
        self._waiters: dict[threading.Event, bool] = {}
        self._closed = False
        self._seen = threading.local()

    @property
    def generation(self) -> int:
        with self._lock:
            return self._generation

    def _counter(self, commands_only: bool) -> int:
        return self._commands if commands_only else self._generation

    def mark_seen(self) -> None:
        """Record, for this thread, the generation its next ``wait`` compares against.

        Call it at the start of ``claim_commands``: anything notified after this point
        makes the following ``wait`` return immediately.
        """
        with self._lock:
            self._seen.generation = self._generation
            self._seen.commands = self._commands

    def notify(self, *, work: bool = False) -> None:
        """A command may have arrived (``work``: queued work only): wake the waiters
        for it."""
        with self._lock:
            self._generation += 1
            if not work:
                self._commands += 1
            waiters = [
                e for e, commands_only in self._waiters.items() if not (work and commands_only)
            ]
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
        commands_only: bool = False,
    ) -> None:
        """Block up to ``timeout`` (clock seconds) for a notification or a true ``poll()``.

        With a ``watch``, ``poll()`` runs again whenever the watched files are written
        (a nudge: the event is set without a new generation), and otherwise every
        ``poll_interval``. ``commands_only``: a notification of work only does not
        wake this wait.
        """
        event = threading.Event()
        topic = "commands" if commands_only else "generation"
        since: int | None = getattr(self._seen, topic, None)
        with self._lock:
            if self._closed or (since is not None and since != self._counter(commands_only)):
                self._seen.generation = self._generation
                self._seen.commands = self._commands
                return
            self._waiters[event] = commands_only
            generation = self._counter(commands_only)
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
                        if self._closed or self._counter(commands_only) != generation:
                            return  # notified, not nudged
        finally:
            if watch is not None:
                watch.unsubscribe(event)
            with self._lock:
                self._waiters.pop(event, None)
                # Whatever woke us has now been seen; the caller claims next.
                self._seen.generation = self._generation
                self._seen.commands = self._commands
