"""Wake SQLite waiters when the database's files change, instead of polling every 10 ms.

SQLite has no notifications: a worker waiting for work from other processes used to
read the store's ``commands_rev`` counter every ``command_poll_interval`` (10 ms), in
every waiting thread, for as long as it was idle -- a few per cent of a core doing
nothing. Every commit of another process writes the database's ``-wal`` (or
``-journal``) file, and on Linux the kernel reports such writes through inotify. A
:class:`FileWatch` blocks on one inotify descriptor watching the database's
directory and, when one of the database's files is written while somebody waits,
*nudges* the waiters: they read the counter once and go back to sleep unless it
moved. The counter stays the truth; the watch only says when to look.

The counter is still read every :data:`SAFETY_POLL` seconds: a write the kernel does
not report (a network file system, a full inotify queue) delays a wake-up by at most
that long, never loses it. Where inotify is unavailable (not Linux, the per-user
instance limit reached) :func:`watch` returns ``None`` and waiters poll as before.

The thread reads the descriptor only while somebody waits: between waits, the
process's own commits (hundreds a second in a busy worker) accumulate in the kernel's
queue, coalesced, and cost nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import struct
import sys
import threading
from typing import Final

__all__ = ["SAFETY_POLL", "FileWatch", "watch"]

#: Longest time between two reads of the counter while a watch is active.
SAFETY_POLL: Final = 0.25

_IN_MODIFY: Final = 0x00000002
_IN_MOVED_TO: Final = 0x00000080
_IN_CREATE: Final = 0x00000100
_IN_NONBLOCK: Final = os.O_NONBLOCK
_IN_CLOEXEC: Final = os.O_CLOEXEC
_EVENT: Final = struct.Struct("iIII")  # wd, mask, cookie, len (then the name)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1  # noqa: B018  -- present on every glibc and musl since 2.9
    except (OSError, AttributeError):
        return None
    return libc


def watch(path: str) -> FileWatch | None:
    """A started watch of the database file ``path``, or ``None`` where there is none."""
    libc = _libc()
    if libc is None:
        return None
    fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        return None  # EMFILE: this user's inotify instances are used up
    directory, base = os.path.split(os.path.abspath(path))
    wd = libc.inotify_add_watch(fd, os.fsencode(directory), _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO)
    if wd < 0:
        os.close(fd)
        return None
    names = frozenset(os.fsencode(base + suffix) for suffix in ("", "-wal", "-journal"))
    return FileWatch(fd, names)


class FileWatch:
    """One inotify descriptor and the thread that turns its events into nudges."""

    def __init__(self, fd: int, names: frozenset[bytes]) -> None:
        self._fd = fd
        self._names = names
        self._cond = threading.Condition()
        self._waiters: set[threading.Event] = set()
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(
            target=self._run, name="chongming-task-sqlite-watch", daemon=True
        )
        self._thread.start()

    def subscribe(self, event: threading.Event) -> None:
        """Set ``event`` on the next write to the database's files, until unsubscribed."""
        with self._cond:
            self._waiters.add(event)
            self._cond.notify()

    def unsubscribe(self, event: threading.Event) -> None:
        with self._cond:
            self._waiters.discard(event)

    def close(self) -> None:
        """Stop the thread and release the descriptor (idempotent)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify()
        os.write(self._wake_w, b"x")
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        for fd in (self._fd, self._wake_r, self._wake_w):
            os.close(fd)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiters and not self._closed:
                    self._cond.wait()  # nobody waits: leave the events queued, coalesced
                if self._closed:
                    return
            readable, _, _ = select.select([self._fd, self._wake_r], [], [])
            if self._wake_r in readable:
                return  # closing
            if self._written():
                with self._cond:
                    waiters = list(self._waiters)
                for event in waiters:
                    event.set()

    def _written(self) -> bool:
        """Drain the queued events; whether one of them wrote a file of the database."""
        found = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return found
                raise
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, _, _, length = _EVENT.unpack_from(data, offset)
                start = offset + _EVENT.size
                name = data[start : start + length].rstrip(b"\0")
                found = found or name in self._names
                offset = start + length
