"""Task module of the async worker test: a body that blocks the event loop, and two
that do not (one ``def`` on a thread, one ``async def`` on the loop)."""

from __future__ import annotations

import time
from pathlib import Path

from chongming_task import TaskContext, task

#: Longest a ``hog`` blocks, whatever the test does (a failed test must not hang it).
HOG_LIMIT = 60.0


@task
async def hog(ctx: TaskContext, gates: str) -> str:
    """Block the worker's event loop (the mistake, on purpose) until ``release`` exists."""
    root = Path(gates)
    await ctx.acheckpoint()
    (root / f"started-{ctx.task_id}").write_text("blocking")
    release = root / "release"
    deadline = time.monotonic() + HOG_LIMIT
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # a blocking call: no other async task of the worker runs meanwhile
    await ctx.acheckpoint()
    return "released"


@task
def plain(ctx: TaskContext) -> str:
    """A ``def`` task: it runs on a thread of its own, the loop's state is nothing to it."""
    return "thread"


@task
async def polite(ctx: TaskContext) -> str:
    """An ``async def`` task that awaits: it runs once the loop is free."""
    await ctx.acheckpoint()
    return "loop"
