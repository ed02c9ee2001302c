"""Group commit of a controller's transition writes: one leader flushes many at once.

A no-op task makes five transitions in well under a millisecond, and a durable store
pays for each commit. So writes are queued in transition order and flushed in
batches: whoever finds no flush in progress becomes the *leader*, takes the whole
queue and hands it to the flush function (one ``save_many``: one transaction, a
task's consecutive writes coalesced into one row update); everyone else waits or
moves on. No lock is held while the leader does I/O, and one leader at a time keeps
the writes in order.

Two kinds of write:

- *durable*: the caller returns only once its write was flushed (stored, or failed
  and recorded). A terminal transition is durable, so ``wait()`` never returns
  before the store has the terminal state;
- *deferred*: the caller returns at once. The write goes out with the next flush:
  a durable caller's, or the queue's own flusher thread's (started lazily, one per
  controller) at most ``window`` seconds later, so that a short task's terminal
  write, durable anyway, takes its ``-> running`` along in the same commit instead
  of a commit of its own.

The flusher keeps that bound without being woken by every deferred write. Once
woken (by the first deferred write after a quiet spell) it stays *armed*: it sleeps
until the oldest queued deferred write is ``window`` old, or, with nothing queued,
until ``window`` after the latest one, and deferred writes that arrive meanwhile do
not wake it (its sleep ends within their own ``window``). A write is flushed by the
flusher only once it is ``window`` old, so one put just before the flusher wakes is
still left for its task's terminal write. After a ``window`` without deferred writes
the flusher goes idle until the next one wakes it. Waking it for every deferred write
cost a sequential submit -> result one thread hand-off per task: the flusher woke on
the other CPU while the carrier wrote the terminal state, and the two traded the GIL
at every SQLite call.

Either way the flush function runs after the write is in the store, so it can tell
observers (``subscribe``: "after write-through") in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["WINDOW", "WriteQueue"]

#: Real seconds the flusher lets deferred writes wait for a durable one to join.
WINDOW = 0.002

Op = TypeVar("Op")


class _Entry(Generic[Op]):
    __slots__ = ("done", "durable", "op")

    def __init__(self, op: Op, durable: bool) -> None:
        self.op = op
        self.durable = durable
        self.done = False


class WriteQueue(Generic[Op]):
    """Ordered writes, flushed in batches by one leader at a time.

    Args:
        flush: Writes a batch (oldest first). It must not raise for a failed write
            (record it instead); an exception still releases every waiter.
        name: Name of the flusher thread.
    """

    def __init__(
        self, flush: Callable[[list[Op]], None], *, name: str, window: float = WINDOW
    ) -> None:
        self._flush = flush
        self._name = name
        self._window = window
        self._lock = threading.Lock()
        self._flushed = threading.Condition(self._lock)
        self._wake = threading.Condition(self._lock)
        self._pause = threading.Condition(self._lock)  # notified only by close()
        self._queue: list[_Entry[Op]] = []
        self._flushing = False
        self._closed = False
        self._holds = 0
        self._armed = False  # the flusher is in a timed sleep: deferred puts need not wake it
        # Monotonic put times of the oldest queued deferred write and of the latest one.
        self._first_at: float | None = None
        self._last_at = 0.0
        self._thread: threading.Thread | None = None

    def put(self, op: Op, *, durable: bool) -> None:
        """Queue ``op``; with ``durable`` return only once a flush has written it."""
        entry = _Entry(op, durable)
        with self._lock:
            self._queue.append(entry)
            if not durable and not self._closed:
                self._last_at = now = time.monotonic()
                if self._first_at is None:
                    self._first_at = now
                if self._holds:
                    return  # resume_flusher() wakes it, unless a drain took the write first
                if self._thread is None:
                    self._start_locked()
                if not self._flushing and not self._armed:
                    self._wake.notify()
                return
            while not entry.done:
                if self._flushing:
                    self._flushed.wait()
                else:
                    self._lead_locked()

    def put_along(self, op: Op) -> _Entry[Op]:
        """Queue ``op`` for the next flush, whoever leads it; return its ticket for :meth:`settle`.

        Neither waits nor wakes the flusher: for a write that must be stored before
        its caller moves on, when the caller is about to make a durable write that
        will take it along in the same commit (a run's end and the start of the next
        run it carries). The caller must :meth:`settle` the ticket.
        """
        entry = _Entry(op, True)
        with self._lock:
            self._queue.append(entry)
        return entry

    def settle(self, entry: _Entry[Op]) -> None:
        """Return once the write of ``entry`` was flushed, leading a flush if none is in
        progress (the one in progress may not have taken it)."""
        with self._lock:
            while not entry.done:
                if self._flushing:
                    self._flushed.wait()
                else:
                    self._lead_locked()

    def drain(self) -> None:
        """Flush everything queued so far (and return once it is written)."""
        with self._lock:
            while self._queue or self._flushing:
                if self._flushing:
                    self._flushed.wait()
                else:
                    self._lead_locked()

    def start_flusher(self) -> None:
        """Start the flusher thread now, if it is not running and the queue is open.

        It otherwise starts with the first deferred write, and ``Thread.start()``
        waits until the new thread holds the GIL: for a write at a scheduled instant
        (a released run's ``-> running``) that wait was 3-4 ms.
        """
        with self._lock:
            if self._thread is None and not self._closed:
                self._start_locked()

    def hold_flusher(self) -> None:
        """Queue deferred writes without waking the flusher until :meth:`resume_flusher`.

        For a caller about to :meth:`drain` anyway (the controller's group start at a
        scheduled instant): waking the flusher thread there only makes it compete for
        the GIL with the drain that writes the same batch. Calls nest.
        """
        with self._lock:
            self._holds += 1

    def resume_flusher(self) -> None:
        """End one :meth:`hold_flusher`; wake the flusher for what is still queued."""
        with self._lock:
            self._holds -= 1
            if self._holds or self._closed or self._flushing or not self._queue:
                return
            if self._thread is None:
                self._start_locked()
            self._wake.notify()

    def close(self, timeout: float | None = 5.0) -> None:
        """Flush what is queued and stop the flusher; later writes flush in their caller."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()
            self._pause.notify_all()
            thread = self._thread
        self.drain()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def pending(self) -> int:
        """Writes queued and not yet taken by a flush."""
        with self._lock:
            return len(self._queue)

    # ------------------------------------------------------------ internals

    def _start_locked(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _lead_locked(self) -> None:
        """Flush the whole queue as the leader; called and returns with the lock held."""
        self._flushing = True
        batch, self._queue = self._queue, []
        self._first_at = None
        self._lock.release()
        try:
            self._flush([entry.op for entry in batch])
        finally:
            self._lock.acquire()
            self._flushing = False
            for entry in batch:
                entry.done = True
            self._flushed.notify_all()
            if self._queue and not self._armed:
                self._wake.notify()  # deferred writes that came meanwhile

    def _run(self) -> None:
        with self._lock:
            while not self._closed:
                due = self._due_locked()
                if due is None:
                    self._wake.wait()  # idle: the next deferred write wakes it
                    continue
                delay = due - time.monotonic()
                if delay > 0:
                    self._sleep_armed_locked(delay)
                    continue
                while self._flushing:
                    self._flushed.wait()
                if self._queue and not self._holds:
                    self._lead_locked()

    def _due_locked(self) -> float | None:
        """When the flusher should next look (monotonic), or None to go idle.

        With a deferred write queued: once the oldest one is ``window`` old. With none
        queued: ``window`` after the latest one (a write arriving before then is
        flushed when that sleep ends, within its own ``window``). Held, or a
        ``window`` after the last deferred write: idle.
        """
        if self._holds:
            return None
        if self._queue:
            first = self._first_at
            return (time.monotonic() if first is None else first) + self._window
        if self._window > 0 and time.monotonic() < self._last_at + self._window:
            return self._last_at + self._window
        return None

    def _sleep_armed_locked(self, delay: float) -> None:
        """Sleep ``delay`` seconds; deferred writes queued meanwhile do not wake us."""
        self._armed = True
        try:
            self._pause.wait(delay)  # a durable write may take them along meanwhile
        finally:
            self._armed = False
