"""``ThreadExecutor``: one daemon thread per task (the default, guide §7.1 and §7.3).

Why not ``ThreadPoolExecutor``: its workers are joined at interpreter exit, so one
task that ignores cancellation keeps the whole process alive, and a pool cannot
abandon a stuck worker. A daemon thread per task can be abandoned; the price is that
an abandoned thread leaks, which is exactly why such a run ends ``lost`` ("result
unknown"), never ``stopped``. The concurrency limit belongs to the controller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from chongming_task.runtime.attempt import Attempt, AttemptEnd, TaskCall
from chongming_task.runtime.executors.base import run_in_this_thread

__all__ = ["ThreadExecutor"]


class ThreadExecutor:
    """Runs each task on its own daemon thread; ``async def`` tasks on a loop in it."""

    name = "thread"
    supports_pause = True
    kill_after = 0.0

    def check(self, call: TaskCall) -> None:
        """Anything callable runs in a thread: closures, lambdas and local functions too."""

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        threading.Thread(target=drive, name=name, daemon=True).start()

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        return run_in_this_thread(attempt)

    def terminate(self, attempt: Attempt) -> bool:
        """A Python thread cannot be killed safely: the run must report ``lost``."""
        return False

    def kill(self, attempt: Attempt) -> None:
        return None

    def __repr__(self) -> str:
        return "ThreadExecutor()"
