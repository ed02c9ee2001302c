"""WAL checkpoints on a thread of their own, so that no commit waits for one.

In WAL mode a commit appends its pages to the ``-wal`` file; a *checkpoint* copies
them back into the database file. By default the connection that commits runs one
itself, inside its ``COMMIT``, once the WAL holds 1,000 frames: at
``synchronous=NORMAL`` that commit then waits for the sync of every frame written
since the last checkpoint (~4 MB: the WAL is never synced between checkpoints), the
copy, and the sync of the database file. On the W2 machine that was 3.3-4.4 ms in one
commit of ~40, i.e. 3-4 of the 200 tasks of a W2 round, which is W2's p99.

Here that work is done by a thread with a connection of its own, and the writer's
automatic checkpoint stays only as a backstop (at :data:`BACKSTOP_FACTOR` times the
threshold, should this thread fall behind). After each write the store calls
:meth:`Checkpointer.after_write`, which reads the WAL's frame counts from the
wal-index header (the ``-shm`` file; its layout is documented,
https://sqlite.org/walformat.html) and wakes the thread once ``frames`` frames await a
checkpoint. The header is read with ``pread`` on *SQLite's own* descriptor of that
file, found in ``/proc/self/fd``: this module never opens or closes the file, because
closing any descriptor of a file drops every POSIX lock the process holds on it, and
SQLite's locks on the wal-index are what tells other processes that it is in use.
The thread then checkpoints in two phases:

1. ``PASSIVE`` checkpoints without the store's write lock, while commits go on: the
   big WAL sync, the copy and the database sync happen here, off every commit;
2. one more ``PASSIVE`` checkpoint *under* the write lock, on the writer's connection,
   for the few frames committed during phase 1. SQLite starts the WAL over from its
   beginning only when a checkpoint has copied all of it; without this the file would
   keep growing, and a commit that appends to the file costs more than one that
   overwrites it (see docs/performance.md, third pass). Commits wait for this small
   one only. A Python lock is not fair: under a steady stream of commits (W1) the
   thread could wait for it indefinitely, so after :data:`_LOCK_WAIT` it leaves this
   phase to the next writer, which runs it right after its own commit.

While phase 1 runs, commits go on appending, so under a fast writer and a slow disk
the WAL can pass ``frames`` by a few thousand frames before it starts over (the
writer's own checkpoint, the backstop, finds the checkpoint lock taken meanwhile). A
checkpoint that cannot copy everything (another process's reader holds an old
snapshot) is retried only ``frames`` frames later, not at every commit.

Durability is SQLite's: a commit is as durable as before when ``COMMIT`` returns (it
is in the WAL), and a checkpoint syncs the WAL before copying and the database after,
as the writer's own would. If the wal-index cannot be read (no ``/proc``, no ``-shm``
file, an unknown layout, not in WAL mode) no thread is started and SQLite checkpoints
as usual.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Final

__all__ = ["BACKSTOP_FACTOR", "FRAMES", "Checkpointer"]

log = logging.getLogger("chongming_task.stores.sqlite")

#: Uncheckpointed WAL frames that wake the checkpointer: SQLite's own default, so the
#: WAL is as large as it would have been.
FRAMES: Final = 1000
#: The writer's own automatic checkpoint, as a multiple of ``FRAMES``: only if the
#: thread falls behind.
BACKSTOP_FACTOR: Final = 4
#: Phase 1 repeats while more frames than this are left to copy (at most
#: :data:`_UNLOCKED_PASSES` times), so phase 2 under the write lock stays small.
_SMALL: Final = 64
_UNLOCKED_PASSES: Final = 3
#: How long the thread tries to take the write lock for phase 2 before it leaves that
#: phase to the next writer.
_LOCK_WAIT: Final = 0.002

#: wal-index layout (native byte order): the header's version and ``mxFrame`` (frames
#: in the WAL), and ``nBackfill`` (frames already copied) in the checkpoint info.
_WALINDEX_VERSION: Final = 3007000
_VERSION_AT: Final = 0
_MX_FRAME_AT: Final = 16
_BACKFILL_AT: Final = 96
_HEADER_BYTES: Final = 100
_U32: Final = struct.Struct("=I")
_FDS: Final = "/proc/self/fd"


class Checkpointer:
    """Runs the WAL checkpoints of one store's writer on a daemon thread.

    Args:
        shm_fd: SQLite's descriptor of the wal-index file (read, never closed here).
        writer: The store's write connection: phase 2 runs on it, under ``write_lock``.
        connect: Opens the connection for phase 1, at the first checkpoint (a store
            that never fills the WAL never opens it); the store closes it.
        write_lock: The store's write lock.
        name: Thread name.
        frames: Uncheckpointed frames that trigger a checkpoint.
    """

    def __init__(
        self,
        shm_fd: int,
        writer: sqlite3.Connection,
        connect: Callable[[], sqlite3.Connection],
        write_lock: threading.Lock,
        *,
        name: str,
        frames: int = FRAMES,
    ) -> None:
        self._shm_fd = shm_fd
        self._writer = writer
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._write_lock = write_lock
        self._frames = frames
        self._due_at = frames  # pending frames that wake the thread (raised after a failure)
        self._cond = threading.Condition()
        self._wanted = False
        self._catch_up = False  # phase 2 left to the next writer
        self._stopped = False
        self.checkpoints = 0
        """Checkpoints the thread completed (phase 2 maybe left to a writer): for tests."""
        self.failures = 0
        """Checkpoints that failed (SQLite then checkpoints in the writer, the backstop)."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @classmethod
    def attach(
        cls,
        writer: sqlite3.Connection,
        connect: Callable[[], sqlite3.Connection],
        write_lock: threading.Lock,
        *,
        name: str,
        frames: int = FRAMES,
    ) -> Checkpointer | None:
        """A checkpointer for ``writer``'s database, or None to leave SQLite in charge.

        On success the writer's own automatic checkpoint is moved to the backstop.
        """
        shm_fd = _wal_index_fd(writer)
        if shm_fd is None:
            return None
        writer.execute(f"PRAGMA wal_autocheckpoint={int(frames * BACKSTOP_FACTOR)}")
        return cls(shm_fd, writer, connect, write_lock, name=name, frames=frames)

    @property
    def connection(self) -> sqlite3.Connection | None:
        """The checkpoint connection, once opened (for the store to close)."""
        return self._conn

    def pending(self) -> int:
        """Frames in the WAL not yet copied into the database (a racy read: a hint)."""
        header = _read_header(self._shm_fd)
        if header is None:
            return 0
        return int(_U32.unpack_from(header, _MX_FRAME_AT)[0]) - int(
            _U32.unpack_from(header, _BACKFILL_AT)[0]
        )

    def after_write(self) -> None:
        """Called after each write (without the write lock): wake the thread if a
        checkpoint is due, or run phase 2 if the thread left it to this writer.

        One ``pread`` of 100 bytes (about a microsecond), so the writer pays nothing
        measurable until a checkpoint is due.
        """
        if self._catch_up:
            self._catch_up = False
            self._phase_two(blocking=True)
            self._set_next_due()
        if self._wanted or self.pending() < self._due_at:
            return
        with self._cond:
            if not self._wanted and not self._stopped:
                self._wanted = True
                self._cond.notify()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the thread (after a checkpoint in progress) and stop reading the wal-index.

        Call it before closing any connection of the store: once SQLite closes its
        descriptor, the number may be reused for another file.
        """
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._shm_fd = -1

    # ------------------------------------------------------------ internals

    def _run(self) -> None:
        while self._next():
            try:
                self._checkpoint()
            except Exception:  # sqlite3.Error, or StoreError opening the connection
                self.failures += 1
                log.debug("WAL checkpoint failed; the writer's own one stands in", exc_info=True)
            else:
                self.checkpoints += 1
            finally:
                if not self._catch_up:  # else the writer sets it after the last phase
                    self._set_next_due()
                with self._cond:
                    self._wanted = False

    def _set_next_due(self) -> None:
        """Wake again at ``frames`` more frames than this checkpoint could not copy.

        Usually it copied all (the normal threshold again). If it could not (another
        process's reader holds an old snapshot, or it failed: a full disk, a read-only
        directory), retrying at the next commit would wake this thread at every commit
        to achieve nothing; the writer's backstop covers the WAL meanwhile.
        """
        left = self.pending()
        self._due_at = self._frames if left <= _SMALL else left + self._frames

    def _next(self) -> bool:
        """Wait until a checkpoint is wanted; False once stopped."""
        with self._cond:
            while not self._wanted and not self._stopped:
                self._cond.wait()
            return not self._stopped

    def _checkpoint(self) -> None:
        for _ in range(_UNLOCKED_PASSES):
            self._phase_one()
            if self.pending() <= _SMALL:  # the WAL now, commits made meanwhile included
                break
        if not self._phase_two(blocking=False):
            self._catch_up = True  # the next writer runs it after its commit

    def _phase_one(self) -> None:
        """A ``PASSIVE`` checkpoint beside the writers: what the WAL held when it began."""
        if self._conn is None:
            self._conn = self._connect()
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _phase_two(self, *, blocking: bool) -> bool:
        """The last frames, on the writer's connection with no commit beside it.

        Returns False if the lock was not had within :data:`_LOCK_WAIT` (not
        ``blocking``). A failure here is not the writer's: it is only logged, and
        SQLite's backstop copes.
        """
        if not self._write_lock.acquire(timeout=-1 if blocking else _LOCK_WAIT):
            return False
        try:
            if not self._stopped:
                self._writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            if not blocking:
                raise
            self.failures += 1
            log.debug("WAL checkpoint failed; the writer's own checkpoint stands in", exc_info=True)
        finally:
            self._write_lock.release()
        return True


def _wal_index_fd(writer: sqlite3.Connection) -> int | None:
    """SQLite's descriptor of ``writer``'s wal-index, if there is one to read."""
    with suppress(sqlite3.Error):
        mode = writer.execute("PRAGMA journal_mode").fetchone()
        files = writer.execute("PRAGMA database_list").fetchall()
        if mode is None or str(mode[0]).lower() != "wal":
            return None
        path = next((str(row[2]) for row in files if row[1] == "main"), "")
        if path:
            return _find_fd(path + "-shm")
    return None


def _find_fd(path: str) -> int | None:
    """A descriptor this process already has open on ``path`` with a known header."""
    try:
        wanted = os.stat(path)
        names = os.listdir(_FDS)
    except OSError:
        return None
    for name in names:
        with suppress(OSError, ValueError):
            found = os.stat(f"{_FDS}/{name}")
            if (found.st_dev, found.st_ino) == (wanted.st_dev, wanted.st_ino):
                fd = int(name)
                header = _read_header(fd)
                if header is not None and _U32.unpack_from(header, _VERSION_AT)[0] == (
                    _WALINDEX_VERSION
                ):
                    return fd
    return None


def _read_header(fd: int) -> bytes | None:
    """The wal-index header and checkpoint counters, or None (closed, too short)."""
    if fd < 0:
        return None
    try:
        header = os.pread(fd, _HEADER_BYTES, 0)
    except OSError:
        return None
    return header if len(header) == _HEADER_BYTES else None
