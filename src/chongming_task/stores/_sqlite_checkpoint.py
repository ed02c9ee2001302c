"""Checkpoints of a SQLite store's WAL, off the commit path.

In WAL mode every commit appends to the ``-wal`` file, and a *checkpoint* copies those
pages back into the database file (and, with ``synchronous=NORMAL``, syncs it). SQLite's
automatic checkpoint runs inside the commit that fills the WAL past 1,000 pages, so
one writer in a few hundred pays for everybody's copying and its ``fsync``. Here the
writer counts its commits and, every ``EVERY`` commits, wakes a thread that runs a
``PASSIVE`` checkpoint on a connection of its own: it never blocks a writer or a
reader, and the writers go on while it copies (``sqlite3`` releases the GIL around it).

SQLite's own automatic checkpoint stays on as a safety valve at ``VALVE`` pages: if
the thread falls behind (a long read holding old pages, a slow disk), the WAL still
cannot grow without bound. Durability is unchanged: a transaction is durable by its
commit in the WAL, whoever copies it back later.

The thread holds no reference to the store, so a store dropped without ``close()`` is
still collected (its finalizer stops the thread).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task.core import SystemClock

__all__ = ["EVERY", "VALVE", "Checkpointer"]

log = logging.getLogger("chongming_task.stores")

#: Commits between two checkpoints (a few pages each: about the WAL SQLite would let
#: grow before its own checkpoint).
EVERY = 256
#: ``wal_autocheckpoint`` of the writer: SQLite checkpoints in the commit itself only
#: once the WAL holds this many pages (about 40 MB with 4 KiB pages).
VALVE = 10_000


class Checkpointer:
    """Runs ``PASSIVE`` checkpoints on its own connection, woken by the writer's commits.

    Args:
        connect: opens the connection the checkpoints run on (on the thread's first
            pass).
        release: closes that connection when the checkpointer stops.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        release: Callable[[sqlite3.Connection], None],
    ) -> None:
        self._connect = connect
        self._release = release
        self._conn: sqlite3.Connection | None = None
        self._commits = 0
        # It only ever waits to be woken: no clock times anything here.
        self._service = BackgroundService(
            "chongming-sqlite-checkpoint", self._step, clock=SystemClock(), final=self._close
        )
        self.done = 0
        """Checkpoints run so far."""
        self.copied = 0
        """WAL frames they copied back into the database file."""

    def committed(self) -> None:
        """Count one commit; every ``EVERY``-th starts or wakes the checkpoint thread.

        Called by the writer after its COMMIT, under the store's write lock.
        """
        self._commits += 1
        if self._commits >= EVERY:
            self._commits = 0
            self._service.ensure_started()

    def _step(self) -> StepResult:
        if self._conn is None:
            try:
                self._conn = self._connect()
            except Exception as exc:  # the safety valve keeps the WAL bounded meanwhile
                log.warning("SQLite checkpoints fall back to SQLite's own for now: %s", exc)
                return FINISHED
        try:
            busy, _, copied = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # busy or closed: the next wake-up retries
            log.debug("SQLite checkpoint skipped: %s", exc)
        else:
            self.done += 1
            self.copied += 0 if busy else max(0, int(copied))
        return None  # until the writer wakes it again

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._release(conn)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (idempotent) and wait up to ``timeout`` for it to end."""
        self._service.stop(timeout)
