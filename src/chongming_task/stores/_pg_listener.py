"""LISTEN/NOTIFY for ``PostgresTaskStore.wait_for_commands``.

One background thread per store holds a dedicated autocommit connection that LISTENs
on the store's channel and turns every notification into ``CommandSignal.notify()``.
Waiting threads never touch the connection (a psycopg connection serves one thread
at a time), so any number of them can wait. The thread starts on the first wait, so
a store that never claims or waits costs no extra connection; the first claim waits
until LISTEN is in place, so nothing submitted after it can be missed. A dropped
listener connection is re-opened with a bounded backoff (see :class:`CommandListener`:
a database outage costs a few log lines, not one every half second), and each
re-connect wakes the waiters once, since a notification may have been missed while
it was down.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from chongming_task._redact import scrub_dsn
from chongming_task._service import BackgroundService
from chongming_task.core import Clock, SystemClock
from chongming_task.stores._signal import CommandSignal

if TYPE_CHECKING:
    import psycopg

__all__ = ["CommandListener"]

_log = logging.getLogger("chongming_task.stores.postgres")

#: How long one ``notifies()`` call blocks before re-checking the stop flag. ``close()``
#: wakes the thread at once with a NOTIFY on the listener's own channel, so this only
#: bounds a close whose NOTIFY could not be sent (the database gone); an idle listener
#: wakes this rarely, not 20 times a second.
_POLL_SECONDS: Final = 2.0
#: The pause before the first re-connect of an outage; each failure doubles it.
RETRY_FIRST: Final = 0.5
#: The longest pause between two re-connects.
RETRY_MAX: Final = 30.0
#: During an outage, at most one log line per this many seconds.
REPORT_EVERY: Final = 30.0


class CommandListener:
    """A daemon thread relaying NOTIFY on ``channel`` to ``signal``.

    While its connection is down it re-connects after ``RETRY_FIRST`` seconds, doubling
    up to ``RETRY_MAX``, and logs one WARNING when it loses the connection, at most one
    line per ``REPORT_EVERY`` seconds while it stays down, and one INFO line when it is
    back. Waiters meanwhile poll (their own timeout bounds the latency), and
    :meth:`retry_now` cuts the backoff short when another connection shows PostgreSQL
    answering again.

    Args:
        clock: Times the backoff (real seconds by default, not the store's clock:
            re-connecting is paced for a database; a ``FakeClock`` in tests).
        connect: Opens a connection that LISTENs on ``channel`` (tests pass their own).
    """

    def __init__(
        self,
        conninfo: str,
        channel: str,
        signal: CommandSignal,
        connect_kwargs: dict[str, Any],
        *,
        clock: Clock | None = None,
        connect: Callable[[], psycopg.Connection[Any]] | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._signal = signal
        self._kwargs = connect_kwargs
        self._clock = clock or SystemClock()
        self._connect = connect or self._listen
        #: Sends a NOTIFY on a channel (the store's pool): how ``close()`` wakes us.
        self._notify = notify
        self._wake_channel = f"ct_wake_{uuid.uuid4().hex[:16]}"
        self._ready = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._failures = 0
        self._down_since: float | None = None
        self._reported_at = 0.0
        self._attempted_at: float | None = None
        self.retry_delay: float | None = None
        """Seconds before the next re-connect (``None`` while connected)."""
        self._service = BackgroundService(
            f"chongming-task-listen-{channel}",
            self._relay,
            clock=self._clock,
            on_error=self._failed,
        )
        self._service.start()

    def _listen(self) -> psycopg.Connection[Any]:
        import psycopg
        from psycopg import sql

        conn = psycopg.connect(self._conninfo, autocommit=True, **self._kwargs)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._wake_channel)))
        return conn

    def _relay(self) -> float:
        """One connection's life: LISTEN, then relay until stopped (or it fails)."""
        try:
            self._attempted_at = self._clock.monotonic()
            self._conn = self._connect()
            self._recovered()
            if self._ready.is_set():
                self._signal.notify()  # re-connected: something may have been missed
            self._ready.set()
            while not self._service.stopping:
                for note in self._conn.notifies(timeout=_POLL_SECONDS, stop_after=1):
                    if note.channel != self._wake_channel:
                        # "queue": work was enqueued or freed (notify_work), not a command.
                        self._signal.notify(work=note.payload == "queue")
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
        return 0.0

    def _recovered(self) -> None:
        if self._down_since is not None:
            _log.info(
                "command listener on %r recovered after %.1f s (%d failed attempts)",
                self._channel,
                self._clock.monotonic() - self._down_since,
                self._failures,
            )
        self._down_since = self.retry_delay = None
        self._failures = 0

    def _failed(self, exc: Exception, _: int) -> float:
        import psycopg

        now = self._clock.monotonic()
        self._failures += 1
        delay = self.retry_delay = min(RETRY_FIRST * (1 << min(self._failures - 1, 16)), RETRY_MAX)
        bug = not isinstance(exc, psycopg.Error)  # a bug, not the database: say so loudly
        report = _log.error if bug else _log.warning
        reason = scrub_dsn(f"{type(exc).__name__}: {exc}", self._conninfo)
        if self._down_since is None:
            self._down_since = self._reported_at = now
            report(
                "command listener on %r has no connection (%s); re-connecting with backoff "
                "up to %g s, waits poll meanwhile",
                self._channel,
                reason,
                RETRY_MAX,
                exc_info=exc if bug else None,
            )
        elif now - self._reported_at >= REPORT_EVERY:
            self._reported_at = now
            report(
                "command listener on %r still re-connecting after %.0f s (%d failed attempts): %s",
                self._channel,
                now - self._down_since,
                self._failures,
                reason,
            )
        return delay

    def retry_now(self) -> None:
        """Re-connect now, not at the end of the backoff: PostgreSQL just answered
        another connection. At most one attempt per ``RETRY_FIRST`` seconds."""
        last = self._attempted_at
        if (
            self._down_since is not None
            and last is not None
            and self._clock.monotonic() - last >= RETRY_FIRST
        ):
            self._service.wake()

    def wait_ready(self, timeout: float) -> bool:
        """Block until LISTEN is in place (or ``timeout``); False if it is not (yet)."""
        return self._ready.wait(timeout)

    @property
    def connected(self) -> bool:
        """Whether the listener currently holds a connection."""
        return self._conn is not None

    def close(self) -> None:
        """Stop the thread and close its connection: a NOTIFY on the listener's own
        channel wakes it at once (without one, it stops within a poll period)."""
        self._service.request_stop()
        if self._notify is not None and self._conn is not None:
            try:
                self._notify(self._wake_channel)
            except Exception as exc:  # the database is gone: the poll period bounds it
                _log.debug("could not wake the command listener: %s", exc)
        self._service.stop(None)
