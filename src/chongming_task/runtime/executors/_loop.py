"""The process's one event loop for ``async def`` task bodies, and its lag watch.

Every ``async def`` task of a process (a worker, a Controller, ``run_task``) runs on
one event loop, on one thread of its own, started when the first such task runs and
stopped when none has run for ``LINGER`` seconds or when a Controller closes with
none running. 1,000 concurrent async tasks are 1,000 asyncio tasks on that loop, not
1,000 threads.

A body that blocks the loop stalls every other async task: each body's steps are
timed (``_lag``), and a watch thread looks every ``WATCH_EVERY`` seconds at the step
running now, so a block is reported while it lasts, naming its task. A task a body
spawns is made by the loop's task factory, which gives it to that body (``_lag``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Final

from chongming_task._service import FINISHED, BackgroundService, StepResult
from chongming_task.core import SystemClock
from chongming_task.runtime.executors._lag import STRAY_GRACE, BodyScope, now, scope_now, spawned

__all__ = ["LINGER", "LOOP", "SharedLoop"]

log = logging.getLogger("chongming_task.runtime")

#: Seconds the loop stays up with no async task before its thread ends.
LINGER: Final = 2.0
#: Seconds between two looks of the watch at the step running on the loop.
WATCH_EVERY: Final = 0.05
#: The loop's thread and the watch wait in real time, whatever the runs' clocks.
_REAL: Final = SystemClock()


class SharedLoop:
    """The event loop every ``async def`` body of this process runs on (see module doc)."""

    def __init__(self, *, linger: float = LINGER) -> None:
        self._linger = linger
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when no run is on the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._service: BackgroundService | None = None  # the current loop's thread
        self._thread: threading.Thread | None = None
        self._active = 0
        self.current: BodyScope | None = None
        """The body whose step runs on the loop right now (``None``: none)."""
        self.started = 0
        """Loops started so far in this process (a test counts them)."""
        self._watch = BackgroundService(
            "chongming-task:loop-watch", self._watch_pass, clock=_REAL, linger=self._linger
        )

    # ------------------------------------------------------------ state

    @property
    def thread(self) -> threading.Thread | None:
        """The loop's thread while a loop runs."""
        with self._lock:
            return self._thread if self._loop is not None else None

    @property
    def active(self) -> int:
        """Drivers (async runs) on the loop right now."""
        with self._lock:
            return self._active

    # ------------------------------------------------------------ use

    def spawn(self, factory: Callable[[], Coroutine[Any, Any, Any]], *, name: str) -> None:
        """Run ``factory()`` as a task on the loop, in a fresh ``contextvars.Context``.

        The loop (and its thread) start now if none runs. Returns at once.

        Raises:
            RuntimeError: The loop's thread could not be started.
        """
        with self._lock:
            loop = self._loop
            if loop is None:
                loop = self._start_locked()
            self._active += 1
        loop.call_soon_threadsafe(self._create, loop, factory, name)
        self._watch.ensure_started()

    def stop_if_idle(self, *, wait: float = 0.0, timeout: float = 5.0) -> bool:
        """Stop the loop now unless an async run is on it; whether none runs afterwards.

        What a Controller's ``close()`` calls, so the loop ends with its last user:
        ``wait`` (real seconds) lets the drivers of runs that just ended finish first;
        ``timeout`` bounds the wait for the loop's thread to end.
        """
        with self._idle:
            loop, service = self._loop, self._service
            if loop is None:
                return True
            if self._active and wait > 0:
                self._idle.wait_for(lambda: not self._active, wait)
            if self._loop is not loop:
                return True
            if self._active:
                return False
            self._loop = None
        with contextlib.suppress(RuntimeError):  # closed meanwhile: stopped already
            loop.call_soon_threadsafe(loop.stop)
        if service is not None:
            service.join(timeout)  # at once from the loop's own thread
        return True

    def _start_locked(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        # typeshed's factory is generic and takes no ``context=``, which the loop passes.
        loop.set_task_factory(self._task_factory)  # type: ignore[arg-type]
        # A service per loop: a loop being torn down never delays the next one.
        service = BackgroundService(
            "chongming-task:event-loop", functools.partial(self._serve, loop), clock=_REAL
        )
        try:
            service.start()
        except BaseException:
            loop.close()
            raise
        self._loop, self._service, self._thread = loop, service, None
        self.started += 1
        return loop

    def _task_factory(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]:
        """Every task made on the loop; one a body spawns is its own, timed like it."""
        scope = scope_now()
        if scope is None:
            return asyncio.Task(coro, loop=loop, **kwargs)
        task = asyncio.Task(spawned(coro, scope, self), loop=loop, **kwargs)
        if scope.children is None:
            scope.children = weakref.WeakSet()
        scope.children.add(task)
        return task

    def _create(
        self,
        loop: asyncio.AbstractEventLoop,
        factory: Callable[[], Coroutine[Any, Any, Any]],
        name: str,
    ) -> None:
        context = contextvars.Context()
        task = context.run(lambda: loop.create_task(factory(), name=name))
        task.add_done_callback(lambda _: self._finished(loop))

    def _finished(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            self._active -= 1
            idle = self._active == 0
            if idle:
                self._idle.notify_all()
        if idle:
            loop.call_later(self._linger, self._stop_when_idle, loop)

    def _stop_when_idle(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._loop is not loop or self._active:
                return
            self._loop = None
        loop.stop()

    def _serve(self, loop: asyncio.AbstractEventLoop) -> StepResult:
        """The loop's thread: the loop until it is stopped, then its teardown, once."""
        with self._lock:
            if self._loop is loop:
                self._thread = threading.current_thread()
        asyncio.set_event_loop(loop)
        try:
            self._run_until_stopped(loop)
            stray = asyncio.all_tasks(loop)
            for task in stray:
                task.cancel()
            if stray:
                loop.run_until_complete(asyncio.wait(stray, timeout=STRAY_GRACE))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        except Exception:
            log.exception("the shared event loop of async tasks failed")
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        return FINISHED

    @staticmethod
    def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
        """``run_forever`` until ``stop()``: a ``SystemExit`` or ``KeyboardInterrupt``
        that a task spawned by some body lets out (asyncio re-raises those from any
        task) is logged, and the loop goes on for every other task on it."""
        while True:
            try:
                loop.run_forever()
            except (KeyboardInterrupt, SystemExit) as exc:
                log.error(
                    "%s escaped a task on the shared event loop; the loop goes on",
                    type(exc).__name__,
                )
                continue
            return

    # ------------------------------------------------------------ the watch

    def _watch_pass(self) -> StepResult:
        with self._lock:
            if self._loop is None:
                return FINISHED
        scope = self.current
        if scope is not None and not scope.reported:
            held = now() - scope.started
            if held >= scope.threshold and held > scope.logged and self.current is scope:
                scope.watched(held)
        return WATCH_EVERY

    def _forget_after_fork(self) -> None:
        # The loop's thread and the watch's do not exist in a forked child.
        self._reset()


#: The loop of this process.
LOOP: Final = SharedLoop()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=LOOP._forget_after_fork)
