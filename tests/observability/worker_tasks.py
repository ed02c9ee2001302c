"""Tasks of the worker acceptance test (loaded by ``chongming-task worker --tasks``)."""

from __future__ import annotations

from chongming_task._decorator import task
from chongming_task.policies import FixedBackoff, RetryPolicy
from chongming_task.runtime._context import TaskContext


@task
def ok(ctx: TaskContext) -> int:
    """Succeed at once."""
    return 1


@task(retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)))
def flaky(ctx: TaskContext) -> int:
    """Fail the first attempt, succeed on the retry."""
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return ctx.attempt


@task
def broken(ctx: TaskContext) -> None:
    """Always fail."""
    raise ValueError("broken on purpose")
