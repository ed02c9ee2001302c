"""``ThreadExecutor``: each task on a daemon thread of its own (the default, guide §7.1, §7.3).

Why not ``ThreadPoolExecutor``: its workers are joined at interpreter exit, so one
task that ignores cancellation keeps the whole process alive, and a pool cannot
abandon a stuck worker. A daemon thread can be abandoned; the price is that an
abandoned thread leaks, which is exactly why such a run ends ``lost`` ("result
unknown"), never ``stopped``. The concurrency limit belongs to the controller.

A task never shares its thread with another task while it runs. Once a run is over,
its thread may carry a later run (see ``carriers``). A thread whose run was abandoned
is never reused.

An ``async def`` task is not given a thread: :meth:`ThreadExecutor.for_call` sends it
to the process's shared event loop (the ``asyncio`` executor, ``_asyncio``), where
1,000 of them run on one thread.
"""

from __future__ import annotations

from collections.abc import Callable

from chongming_task._public import public
from chongming_task.runtime._attempt import Attempt, AttemptEnd, TaskCall
from chongming_task.runtime.executors._asyncio import ASYNCIO, AsyncioExecutor, is_async_callable
from chongming_task.runtime.executors._base import run_in_this_thread
from chongming_task.runtime.executors._carriers import SHARED, Carrier, current_carrier

__all__ = ["ThreadExecutor"]


@public
class ThreadExecutor:
    """Runs each task on a daemon thread; ``async def`` tasks on the shared event loop."""

    name = "thread"
    supports_pause = True
    kill_after = 0.0

    def for_call(self, call: TaskCall) -> ThreadExecutor | AsyncioExecutor:
        """The executor of ``call``: this one, or the shared loop's for an ``async def``."""
        return ASYNCIO if is_async_callable(call.fn) else self

    def check(self, call: TaskCall) -> None:
        """Anything callable runs in a thread: closures, lambdas and local functions too."""

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        SHARED.launch(drive, name=name)

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        attempt.handle = current_carrier()
        return run_in_this_thread(attempt)

    def terminate(self, attempt: Attempt) -> bool:
        """A Python thread cannot be killed safely: the run must report ``lost``.

        The carrier is marked abandoned, so it is never given another task, even if
        its body returns one day.
        """
        if isinstance(attempt.handle, Carrier):
            attempt.handle.abandoned = True
        return False

    def kill(self, attempt: Attempt) -> None:
        return None

    def __repr__(self) -> str:
        return "ThreadExecutor()"
