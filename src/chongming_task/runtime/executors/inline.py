"""``InlineExecutor``: the body runs synchronously in the caller's thread (guide §7.2).

It breaks the "``launch`` never blocks" rule on purpose: ``start()`` returns when the
run is over, which makes micro-steps free of scheduling cost and tests deterministic.
So an asynchronous scheduler must not use it. It cannot pause a running body either:
``pause()`` returns ``False`` honestly instead of pretending.
"""

from __future__ import annotations

from collections.abc import Callable

from chongming_task._public import public
from chongming_task.runtime._attempt import Attempt, AttemptEnd, TaskCall
from chongming_task.runtime.executors._base import run_in_this_thread

__all__ = ["InlineExecutor"]


@public
class InlineExecutor:
    """Runs the task to completion inside ``start()``, in the calling thread."""

    name = "inline"
    supports_pause = False
    kill_after = 0.0

    def check(self, call: TaskCall) -> None:
        """Anything callable runs inline."""

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        drive()

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        return run_in_this_thread(attempt)

    def terminate(self, attempt: Attempt) -> bool:
        """The carrier is the caller's own thread: it cannot be ended from outside."""
        return False

    def kill(self, attempt: Attempt) -> None:
        return None

    def __repr__(self) -> str:
        return "InlineExecutor()"
