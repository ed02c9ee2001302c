"""``AsyncioExecutor``: ``async def`` bodies as tasks of the process's shared event loop.

The :class:`~chongming_task.runtime.executors.thread.ThreadExecutor` (the default)
sends every ``async def`` task here (``ThreadExecutor.for_call``), so a worker with
``--max-parallel 1000`` runs 1,000 concurrent async tasks on one loop thread plus a
few helpers, not on 1,000 threads. What changes for the task, and what does not:

- stop, pause, resume and every timeout work at ``await ctx.acheckpoint()`` as on a
  thread; a pause awaits on the loop (other tasks go on), and the store write that
  confirms it runs on a helper thread;
- the run's attempt loop is a task of the loop as well (``Driver.adrive``); every
  state write it makes (``running``, the verdict, the next attempt) is handed to the
  bounded helper pool (``_helpers``), so the loop never waits on the store, and the
  worker's claim and heartbeat (threads of their own) never wait on the loop;
- past the graceful window of a stop, the body is cancelled at its current ``await``
  (``asyncio.CancelledError``), asyncio's own way to end a coroutine, which a thread
  does not have: the run ends ``stopped`` (or with its timeout) instead of ``lost``.
  A body that ignores the cancellation, or blocks the loop, is given up as ``lost``
  :data:`CANCEL_GRACE` seconds later;
- a step that holds the loop for :data:`BLOCKING_THRESHOLD` seconds or more without
  awaiting is a loop block: counted in the run's checkpoint-gap profile and reported
  as a warning naming the task (``_lag``, and the loop's watch in ``_loop``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
import os
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from chongming_task._validation import check_seconds
from chongming_task.errors import ConfigurationError
from chongming_task.runtime._attempt import Attempt, AttemptEnd, Raised, Returned, TaskCall
from chongming_task.runtime._failures import end_traceback
from chongming_task.runtime.executors._base import AsyncCarrier
from chongming_task.runtime.executors._carriers import SHARED
from chongming_task.runtime.executors._helpers import HELPERS, HelperPool
from chongming_task.runtime.executors._lag import BodyScope, timed
from chongming_task.runtime.executors._loop import LOOP, SharedLoop

__all__ = [
    "ASYNCIO",
    "BLOCKING_THRESHOLD",
    "CANCEL_GRACE",
    "AsyncioExecutor",
    "is_async_callable",
]

T = TypeVar("T")

#: Seconds a step may hold the loop before it counts as a loop block: asyncio's own
#: "slow callback" threshold (``loop.slow_callback_duration``) in debug mode.
BLOCKING_THRESHOLD: Final = 0.1
#: Seconds a cancelled body gets to end before the run is given up as ``lost``.
CANCEL_GRACE: Final = 1.0


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` makes a coroutine (an ``async def``, or an object whose
    ``__call__`` is one)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - the method itself, not callability
    )


class AsyncioExecutor:
    """Runs ``async def`` bodies on the shared event loop; see the module docstring.

    Args:
        blocking_threshold: Seconds a step may hold the loop before it is a loop block.

    Raises:
        ConfigurationError: ``blocking_threshold`` is not a number of seconds > 0.
    """

    name = "asyncio"
    supports_pause = True
    kill_after = CANCEL_GRACE

    def __init__(
        self,
        *,
        blocking_threshold: float = BLOCKING_THRESHOLD,
        loop: SharedLoop = LOOP,
        helpers: HelperPool = HELPERS,
    ) -> None:
        self.blocking_threshold = check_seconds(blocking_threshold, "blocking_threshold")
        self.loop = loop
        self._helpers = helpers

    def check(self, call: TaskCall) -> None:
        """Only an ``async def`` task has a body to await.

        Raises:
            ConfigurationError: ``call.fn`` is a plain function.
        """
        if not is_async_callable(call.fn):
            raise ConfigurationError(
                f"the asyncio executor runs async def tasks; {call.fn!r} is a plain "
                "function: run it on the ThreadExecutor"
            )

    def start_soon(self, start: Callable[[], None]) -> None:
        """Run ``start`` (a queued run's start: its ``starting`` write, then its launch)
        on a helper thread, so the thread that admits async runs (a worker's intake,
        a run that freed a slot) does not wait for each one's commit in turn; several
        helpers' commits reach the store together. ``start`` reports its own failure.
        """
        self._helpers.submit(start)

    # ------------------------------------------------------------ on the loop

    def launch_async(
        self, drive: Callable[[AsyncCarrier], Coroutine[Any, Any, None]], *, name: str
    ) -> None:
        self.loop.spawn(lambda: drive(self), name=name)

    def offload(self, fn: Callable[..., T], /, *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` on a helper thread (in a fresh context); await the result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def job() -> None:
            try:
                result = contextvars.Context().run(fn, *args)
            except BaseException as exc:
                settle = functools.partial(_fail, future, exc)
            else:
                settle = functools.partial(_succeed, future, result)
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(settle)

        self._helpers.submit(job)
        return future

    async def arun_attempt(self, attempt: Attempt) -> AttemptEnd:
        attempt.control.offload = self.offload
        try:
            await self.offload(functools.partial(attempt.mark_running, pid=os.getpid()))
        except Exception as exc:
            return Raised(exc, end_traceback(exc))
        scope = BodyScope(attempt, self.blocking_threshold)
        body = asyncio.get_running_loop().create_task(
            self._body(attempt, scope), name=f"chongming-task:{attempt.task_id}:body"
        )
        attempt.handle = body
        try:
            return await body
        except asyncio.CancelledError:
            if not body.cancelled():
                raise  # the driver itself is cancelled: the loop is closing
            return Raised(asyncio.CancelledError(), None)  # cancelled before its first step

    async def _body(self, attempt: Attempt, scope: BodyScope) -> AttemptEnd:
        ctx = attempt.make_context()
        call = attempt.call
        control = attempt.control
        try:
            # As ``checkpoint_before_body``: a person's stop is the body's to answer.
            if not (control.stop_requested and control.stop_source == "stop"):
                await ctx.acheckpoint()
            value = call.fn(ctx, *call.args, **call.kwargs)
            if inspect.isawaitable(value):
                value = await timed(value, scope, self.loop)
        except BaseException as exc:
            return Raised(exc, end_traceback(exc))
        return Returned(value)

    # ------------------------------------------------------------ the Executor protocol

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        """A synchronous attempt loop on a carrier thread (the runtime uses
        :meth:`launch_async`); its attempts still run on the loop (:meth:`run_attempt`)."""
        SHARED.launch(drive, name=name)

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        """One attempt on the loop, waited for by the calling thread (not the loop's)."""
        done: concurrent.futures.Future[AttemptEnd] = concurrent.futures.Future()

        async def attempt_once() -> None:
            try:
                done.set_result(await self.arun_attempt(attempt))
            except BaseException as exc:
                done.set_exception(exc)

        self.loop.spawn(attempt_once, name=f"chongming-task:{attempt.task_id}")
        return done.result()

    def terminate(self, attempt: Attempt) -> bool:
        """Cancel the body at its current ``await``; False if it has no task to cancel."""
        body = attempt.handle
        if not isinstance(body, asyncio.Task):
            return False
        try:
            body.get_loop().call_soon_threadsafe(body.cancel)
        except RuntimeError:  # the loop is closed: the body is gone with it
            return False
        return True

    def kill(self, attempt: Attempt) -> bool:
        """Nothing is stronger than a cancellation on a loop: False (the run is given up
        as ``lost``) while the body still runs (it ignored it, or it blocks the loop)."""
        body = attempt.handle
        return isinstance(body, asyncio.Task) and body.done()

    def __repr__(self) -> str:
        return f"AsyncioExecutor(blocking_threshold={self.blocking_threshold:g})"


def _succeed(future: asyncio.Future[T], result: T) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


#: The executor every ``async def`` task of the ThreadExecutor runs on.
ASYNCIO: Final = AsyncioExecutor()
