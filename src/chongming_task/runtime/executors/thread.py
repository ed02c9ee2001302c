"""``ThreadExecutor``: each task on a daemon thread of its own (the default, guide §7.1, §7.3).

Why not ``ThreadPoolExecutor``: its workers are joined at interpreter exit, so one
task that ignores cancellation keeps the whole process alive, and a pool cannot
abandon a stuck worker. A daemon thread can be abandoned; the price is that an
abandoned thread leaks, which is exactly why such a run ends ``lost`` ("result
unknown"), never ``stopped``. The concurrency limit belongs to the controller.

A task never shares its thread with another task while it runs. Once a run is over,
its thread may carry a later run (see ``carriers``): starting threads is the main
cost of short tasks. A thread whose run was abandoned is never reused.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from chongming_task.runtime.attempt import Attempt, AttemptEnd, TaskCall
from chongming_task.runtime.executors.base import run_in_this_thread
from chongming_task.runtime.executors.carriers import (
    SHARED,
    Carrier,
    current_carrier,
    hand_on_successor,
)

__all__ = ["ThreadExecutor"]


class ThreadExecutor:
    """Runs each task on a daemon thread; ``async def`` tasks on a loop in it."""

    name = "thread"
    supports_pause = True
    kill_after = 0.0

    def check(self, call: TaskCall) -> None:
        """Anything callable runs in a thread: closures, lambdas and local functions too."""

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        SHARED.launch(drive, name=name)

    def prepare_launches(self, count: int) -> None:
        """Have ``count`` parked carriers ready for launches due shortly (optional hook).

        The controller calls it before releasing runs at a known instant (the
        scheduler's armed firings), so the launch there hands the run to a waiting
        thread instead of starting one.
        """
        SHARED.keep_ready(count)

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        hand_on_successor()  # another attempt of the same run (a retry) runs here first
        carrier = attempt.handle = current_carrier()
        end = run_in_this_thread(attempt)
        if carrier is not None:
            carrier.finishing = True
        if SHARED.together_waiting:
            # A run launched with others waits for the GIL, which this thread would
            # keep through its whole conclusion: let it begin its body first.
            time.sleep(0)
        return end

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
