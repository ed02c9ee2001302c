"""Module-level task bodies for the ProcessExecutor tests (a child process imports them)."""

from __future__ import annotations

import os

from chongming_task.runtime._context import TaskContext


def fails_first_attempt(ctx: TaskContext) -> int:
    """Fails its first attempt, returns the child's pid on the second."""
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return os.getpid()
