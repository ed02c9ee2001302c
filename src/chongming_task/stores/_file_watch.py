"""Wake SQLite waiters when the database's files change, instead of polling every 10 ms.

SQLite has no notifications: a worker waiting for work from other processes used to
read the store's ``commands_rev`` counter every ``command_poll_interval`` (10 ms), in
every waiting thread, for as long as it was idle -- a few per cent of a core doing
nothing. Every commit of another process writes the database's ``-wal`` (or
``-journal``) file, and on Linux the kernel reports such writes through inotify. One
inotify descriptor per process (:class:`_Inotify`, one thread) watches the
directories of the databases somebody waits on and, when one of a database's files is
written, *nudges* that database's waiters: they read the counter once and go back to
sleep unless it moved. The counter stays the truth; the watch only says when to look.

The counter is still read every :data:`SAFETY_POLL` seconds: a write the kernel does
not report (a network file system, an overflowing event queue) delays a wake-up by at
most that long, never loses it. Where inotify is unavailable (not Linux, no free
instance or watch) :func:`watch` returns ``None`` and waiters poll as before.

The thread reads the descriptor only while somebody waits: between waits, the
process's own commits (hundreds a second in a busy worker) stay queued in the kernel,
coalesced, and cost nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import sys
import threading
from typing import Final

from chongming_task._service import BackgroundService
from chongming_task.core import SystemClock

__all__ = ["SAFETY_POLL", "FileWatch", "watch"]

_log = logging.getLogger("chongming_task.stores.sqlite")

#: Longest time between two reads of the counter while a watch is active.
SAFETY_POLL: Final = 0.25

_IN_MODIFY: Final = 0x00000002
_IN_MOVED_TO: Final = 0x00000080
_IN_CREATE: Final = 0x00000100
_MASK: Final = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO
_EVENT: Final = struct.Struct("iIII")  # wd, mask, cookie, len (then the name)


def watch(path: str) -> FileWatch | None:
    """A watch of the database file ``path``, or ``None`` where there can be none."""
    inotify = _Inotify.shared()
    if inotify is None:
        return None
    directory, base = os.path.split(os.path.abspath(path))
    names = frozenset(os.fsencode(base + suffix) for suffix in ("", "-wal", "-journal"))
    return inotify.add(directory, names)


class FileWatch:
    """One database's files: ``subscribe`` an event to have it set when they are written."""

    def __init__(self, inotify: _Inotify, wd: int, names: frozenset[bytes]) -> None:
        self._inotify = inotify
        self.wd = wd
        self.names = names
        self.waiters: set[threading.Event] = set()
        self._closed = False

    def subscribe(self, event: threading.Event) -> None:
        """Set ``event`` on the next write to the database's files, until unsubscribed."""
        self._inotify.subscribe(self, event)

    def unsubscribe(self, event: threading.Event) -> None:
        self._inotify.unsubscribe(self, event)

    def close(self) -> None:
        """Stop watching (idempotent); the directory's watch goes with its last user."""
        if not self._closed:
            self._closed = True
            self._inotify.remove(self)


class _Inotify:
    """The process's inotify descriptor and the thread reading it."""

    _shared: _Inotify | None = None
    _unavailable = False
    _lock = threading.Lock()

    @classmethod
    def shared(cls) -> _Inotify | None:
        with cls._lock:
            if cls._shared is None and not cls._unavailable:
                cls._shared = cls._open()
                cls._unavailable = cls._shared is None
            return cls._shared

    @classmethod
    def _open(cls) -> _Inotify | None:
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None  # EMFILE: this user's inotify instances are used up
        return cls(libc, fd)

    @classmethod
    def _forget_after_fork(cls) -> None:
        cls._shared = None  # the parent's thread does not exist in the child
        cls._unavailable = False
        cls._lock = threading.Lock()

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self._fd = fd
        self._cond = threading.Condition()
        self._users: dict[int, list[FileWatch]] = {}  # wd -> the watches on it
        self._waiting = 0  # subscribed events, all watches together
        self._service = BackgroundService(
            "chongming-task-sqlite-watch", self._pass, clock=SystemClock(), on_error=_failed
        )
        self._service.start()

    def add(self, directory: str, names: frozenset[bytes]) -> FileWatch | None:
        with self._cond:
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), _MASK)
            if wd < 0:
                return None  # ENOSPC: this user's watches are used up
            watch = FileWatch(self, int(wd), names)
            self._users.setdefault(watch.wd, []).append(watch)
            return watch

    def subscribe(self, watch: FileWatch, event: threading.Event) -> None:
        with self._cond:
            watch.waiters.add(event)
            self._waiting += 1
            self._cond.notify()

    def unsubscribe(self, watch: FileWatch, event: threading.Event) -> None:
        with self._cond:
            if event in watch.waiters:
                watch.waiters.discard(event)
                self._waiting -= 1

    def remove(self, watch: FileWatch) -> None:
        with self._cond:
            self._waiting -= len(watch.waiters)
            watch.waiters.clear()
            users = self._users.get(watch.wd, [])
            if watch in users:
                users.remove(watch)
            if not users:
                self._users.pop(watch.wd, None)
                # Other stores may watch the same directory (the same wd): only the
                # last one's close removes it.
                self._libc.inotify_rm_watch(self._fd, watch.wd)

    def _pass(self) -> float:
        """One wake-up: wait for a waiter, then for events; nudge who they concern."""
        with self._cond:
            while not self._waiting:
                self._cond.wait()  # nobody waits: leave the events queued, coalesced
        select.select([self._fd], [], [])
        written = self._written()
        if written:
            with self._cond:
                events = [event for watch in self._watches_of(written) for event in watch.waiters]
            for event in events:
                event.set()
        return 0.0

    def _watches_of(self, written: set[tuple[int, bytes]]) -> list[FileWatch]:
        return [
            watch
            for wd, users in self._users.items()
            for watch in users
            if any(w == wd and name in watch.names for w, name in written)
        ]

    def _written(self) -> set[tuple[int, bytes]]:
        """Drain the queued events: the (watch, file name) pairs written."""
        found: set[tuple[int, bytes]] = set()
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return found
                raise
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, _, _, length = _EVENT.unpack_from(data, offset)
                start = offset + _EVENT.size
                found.add((wd, data[start : start + length].rstrip(b"\0")))
                offset = start + length


def _failed(exc: Exception, failures: int) -> float:
    """The descriptor failed: waiters still read the counter every ``SAFETY_POLL``."""
    _log.warning("the SQLite file watch failed (%s); waiters poll meanwhile", exc)
    return min(60.0, SAFETY_POLL * 2.0**failures)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Inotify._forget_after_fork)
