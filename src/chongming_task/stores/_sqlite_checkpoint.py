"""WAL checkpoints for SQLite on a thread of their own, so that commits rarely wait for one.

In WAL mode every commit appends its pages to the ``-wal`` file, and a *checkpoint*
copies them back into the database file. By default SQLite runs one inside the commit
that takes the log past 1,000 pages: that commit, with the store's write lock held,
syncs the log, writes every page the log holds into the database and syncs the
database, and every writer of the process queues behind it. A busy controller writes
about 25 pages per task, so that was a stall every 40 tasks; on this machine a bare
1 KB insert cost 145 µs a commit with those checkpoints and 69 µs without.

With ``synchronous=NORMAL`` (the default) the writer connection's own checkpoints are
pushed out to :data:`SAFETY_PAGES` and a :class:`Checkpointer` thread runs a
``PASSIVE`` checkpoint on its own connection every :data:`EVERY_COMMITS` commits,
while writers go on appending (a passive checkpoint copies what is committed and waits
for no one). SQLite restarts the log from its beginning only when a checkpoint ends
with nothing left to copy and no reader in the log; with a steady writer the thread's
checkpoints rarely end that way, so the log grows until the writer's own checkpoint at
:data:`SAFETY_PAGES` (by then almost everything is copied: it costs the two syncs) and
restarts there. The writer thus pays the syncs once per 8,000 pages instead of once
per 1,000, and never the copying; the price is a log of up to 32 MB on disk.

With ``synchronous=FULL`` nothing changes: every commit syncs the log there, and a log
that grows instead of being reused makes each of those syncs also write the file's
new size (W2 p50 0.87 → 1.2 ms in back-to-back pairs), which costs more than the
checkpoints it saves.

Durability is SQLite's either way: a checkpoint only moves committed pages from the
log into the database file, with the same syncs at the same ``synchronous`` level,
and a crash in the middle of one is recovered from the log, exactly as for the
checkpoint a commit would have run.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Final

__all__ = ["EVERY_COMMITS", "SAFETY_PAGES", "Checkpointer"]

log = logging.getLogger("chongming_task.stores.sqlite")

#: Commits between two background checkpoints. A task write is 5 to 13 pages, so this
#: is about the 1,000 pages at which SQLite itself would checkpoint.
EVERY_COMMITS: Final = 128
#: ``wal_autocheckpoint`` of the writer connection: it checkpoints by itself only if
#: the log grows this large anyway (the thread cannot keep up, or a bulk write).
SAFETY_PAGES: Final = 8_000


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` on a daemon thread when enough was committed.

    Args:
        connect: Opens the connection the checkpoints run on (called on the thread).
        release: Closes that connection (called on the thread when it stops).
        name: Name of the thread.
        every: Commits between two checkpoints.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        release: Callable[[sqlite3.Connection], None],
        *,
        name: str,
        every: int = EVERY_COMMITS,
    ) -> None:
        self._connect = connect
        self._release = release
        self._name = name
        self._every = every
        self._commits = 0
        self._due = False
        self._closed = False
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._ran = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self.checkpoints = 0
        """Checkpoints run so far, failed ones included (tests and diagnostics)."""
        self.last: tuple[int, int, int] | None = None
        """SQLite's answer to the last successful one: (busy, frames in the log, copied)."""

    def committed(self, commits: int = 1) -> None:
        """Count commits; every ``every`` of them, wake the thread.

        Called by the writer right after each commit. Nothing blocks here beyond a
        lock held for a few instructions: the checkpoint itself never runs in the
        committing thread.
        """
        with self._lock:
            self._commits += commits
            if self._commits < self._every or self._closed:
                return
            self._commits = 0
            self._due = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            else:
                self._wake.notify()

    def wait_for(self, checkpoints: int, timeout: float) -> bool:
        """Whether ``checkpoints`` checkpoints have run within ``timeout`` seconds."""
        with self._lock:
            return self._ran.wait_for(lambda: self.checkpoints >= checkpoints, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (after the checkpoint in progress, if any) and close its connection."""
        with self._lock:
            self._closed = True
            self._wake.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                with self._lock:
                    while not self._due and not self._closed:
                        self._wake.wait()
                    if self._closed:
                        return
                    self._due = False
                try:
                    if conn is None:
                        conn = self._connect()
                    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.last = (int(busy), int(frames), int(copied))
                except Exception as exc:  # the writer's own checkpoints are the safety net
                    log.debug("background WAL checkpoint failed: %s", exc)
                with self._lock:
                    self.checkpoints += 1
                    self._ran.notify_all()
        finally:
            if conn is not None:
                self._release(conn)
