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
import threading
from collections.abc import Callable

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
        connect: opens the connection the checkpoints run on (called once, on the
            thread's first wake-up).
        release: closes that connection when the checkpointer stops.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        release: Callable[[sqlite3.Connection], None],
    ) -> None:
        self._connect = connect
        self._release = release
        self._commits = 0
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self.done = 0
        """Checkpoints run so far."""
        self.copied = 0
        """WAL frames they copied back into the database file."""

    def committed(self) -> None:
        """Count one commit; every ``EVERY``-th wakes the checkpoint thread.

        Called by the writer after its COMMIT, under the store's write lock.
        """
        self._commits += 1
        if self._commits < EVERY:
            return
        self._commits = 0
        with self._lock:
            if self._stopped:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="chongming-sqlite-checkpoint", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _loop(self) -> None:
        try:
            conn = self._connect()
        except Exception as exc:  # the safety valve keeps the WAL bounded meanwhile
            log.warning("SQLite checkpoints fall back to SQLite's own: %s", exc)
            return
        try:
            while True:
                self._wake.wait()
                with self._lock:
                    if self._stopped:
                        return
                    self._wake.clear()
                try:
                    busy, _, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error as exc:  # busy or closed: the next wake-up retries
                    log.debug("SQLite checkpoint skipped: %s", exc)
                else:
                    self.done += 1
                    self.copied += max(0, int(copied)) if not busy else 0
        finally:
            self._release(conn)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (idempotent) and wait up to ``timeout`` for it to end."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
