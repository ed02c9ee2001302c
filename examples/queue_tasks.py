"""Task definitions of the work-queue examples (16 and 17): the module workers load.

``chongming-task worker --tasks examples/queue_tasks.py`` registers these ``@task``
functions by name; a :class:`chongming_task.Client` given the same module checks the
name and the arguments of every ``enqueue`` against them before anything is stored.
Bodies call ``ctx.checkpoint()`` in their loops: that is where a stop takes effect.
"""

from __future__ import annotations

import time
from pathlib import Path

from chongming_task import TaskContext, task


@task(tags={"reports"})
def report(ctx: TaskContext, tenant: str, pages: int = 3, delay: float = 0.02) -> str:
    """Render a (pretend) report of ``pages`` pages; returns its file name."""
    for page in range(1, pages + 1):
        ctx.checkpoint()
        time.sleep(delay)
        ctx.progress(page, total=pages, unit="pages")
    return f"{tenant}-report-{pages}p.pdf"


@task
def reject(ctx: TaskContext, reason: str) -> None:
    """Always fails: a failure is an outcome the client reads like any other."""
    ctx.checkpoint()
    raise ValueError(reason)


@task(tags={"reports"})
def render(ctx: TaskContext, tenant: str, n: int, wait_for: str | None = None) -> int:
    """Render part ``n`` of a tenant's report, once its input file ``wait_for`` exists."""
    if wait_for is not None:
        while not Path(wait_for).exists():  # e.g. an upload still arriving
            ctx.checkpoint()
            time.sleep(0.02)
    for step in range(1, 11):
        ctx.checkpoint()
        time.sleep(0.02)
        ctx.progress(step, total=10, unit="steps")
    return n
