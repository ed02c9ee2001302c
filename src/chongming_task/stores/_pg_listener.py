"""LISTEN/NOTIFY for ``PostgresTaskStore.wait_for_commands``.

One background thread per store holds a dedicated autocommit connection that LISTENs
on the store's channel and turns every notification into ``CommandSignal.notify()``.
Waiting threads never touch the connection (a psycopg connection serves one thread
at a time), so any number of them can wait. The thread starts on the first wait, so
a store that never claims or waits costs no extra connection; the first claim waits
until LISTEN is in place, so nothing submitted after it can be missed. A dropped
listener connection is re-opened, and each re-connect wakes the waiters once, since
a notification may have been missed while it was down.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Final

from chongming_task._redact import scrub_dsn
from chongming_task._service import BackgroundService
from chongming_task.core._clock import SystemClock
from chongming_task.stores._signal import CommandSignal

if TYPE_CHECKING:
    import psycopg

__all__ = ["CommandListener"]

_log = logging.getLogger("chongming_task.stores.postgres")

#: How long one ``notifies()`` call blocks before re-checking the stop flag: the bound
#: on how long ``close()`` waits for the thread, not on notification latency.
_POLL_SECONDS: Final = 0.05
#: Pause before re-opening a failed listener connection.
_RECONNECT_SECONDS: Final = 0.5


class CommandListener:
    """A daemon thread relaying NOTIFY on ``channel`` to ``signal``."""

    def __init__(
        self, conninfo: str, channel: str, signal: CommandSignal, connect_kwargs: dict[str, Any]
    ) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._signal = signal
        self._kwargs = connect_kwargs
        self._ready = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        # Real seconds: re-connecting is paced for a database, not by the store's clock.
        self._service = BackgroundService(
            f"chongming-task-listen-{channel}",
            self._relay,
            clock=SystemClock(),
            on_error=self._failed,
        )
        self._service.start()

    def _listen(self) -> psycopg.Connection[Any]:
        import psycopg
        from psycopg import sql

        conn = psycopg.connect(self._conninfo, autocommit=True, **self._kwargs)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        return conn

    def _relay(self) -> float:
        """One connection's life: LISTEN, then relay until stopped (or it fails)."""
        try:
            self._conn = self._listen()
            if self._ready.is_set():
                self._signal.notify()  # re-connected: something may have been missed
            self._ready.set()
            while not self._service.stopping:
                for _ in self._conn.notifies(timeout=_POLL_SECONDS, stop_after=1):
                    self._signal.notify()
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
        return 0.0

    def _failed(self, exc: Exception, failures: int) -> float:
        import psycopg

        if not isinstance(exc, psycopg.Error):  # a bug, not the database: say so loudly
            _log.error("command listener on %r failed", self._channel, exc_info=exc)
            return _RECONNECT_SECONDS
        _log.warning(
            "command listener on %r failed, reconnecting: %s",
            self._channel,
            scrub_dsn(str(exc), self._conninfo),
        )
        return _RECONNECT_SECONDS

    def wait_ready(self, timeout: float) -> bool:
        """Block until LISTEN is in place (or ``timeout``); False if it is not (yet)."""
        return self._ready.wait(timeout)

    @property
    def connected(self) -> bool:
        """Whether the listener currently holds a connection."""
        return self._conn is not None

    def close(self) -> None:
        """Stop the thread and close its connection (waits at most a poll period)."""
        self._service.stop(None)
