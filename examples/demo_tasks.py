"""Task definitions of the README demo (``make demo``): a module a worker loads.

A worker never takes code from the command line, only names (guide §8.5): this module
is what ``chongming-task worker --tasks examples/demo_tasks.py`` registers, through its
``@task`` functions, and ``SCHEDULES`` lists the schedules such a worker fires. Every
body calls ``ctx.checkpoint()`` in its loop, because that is where stop and pause
requests take effect (guide §2.2).
"""

from __future__ import annotations

import time

from chongming_task import CronTrigger, Schedule, task


@task(tags={"demo"})
def count(ctx, n: int = 10, delay: float = 0.05) -> int:
    """Count to n, reporting progress; returns n."""
    for step in range(1, n + 1):
        ctx.checkpoint()
        time.sleep(delay)
        ctx.progress(step, total=n, unit="steps")
    return n


@task(tags={"demo", "io"})
def crawl(ctx, site: str, pages: int = 1000, delay: float = 0.02) -> int:
    """Crawl pages of a (pretend) site until done or stopped; returns pages crawled."""
    for page in range(1, pages + 1):
        ctx.checkpoint()  # a stop ends the task here as `stopped`; a pause blocks here
        time.sleep(delay)
        ctx.progress(page, total=pages, unit="pages", message=f"{site}/page/{page}")
    return pages


@task(tags={"demo"})
def consume(ctx, source: str = "demo://orders") -> int:
    """A long-running consumer: on stop it returns what it processed."""
    processed = 0
    while not ctx.is_stop_requested:
        ctx.checkpoint()
        processed += 1
        ctx.progress(processed, unit="batches")
        time.sleep(0.02)
    ctx.log(f"stop requested; processed {processed} batches from {source}")
    return processed


@task
def fail(ctx, message: str = "boom") -> None:
    """Always fails, to show a failure in status and an exit code of 3."""
    ctx.checkpoint()
    raise RuntimeError(message)


#: Schedules a worker loading this module fires. This one is due once a year, so in the
#: demo and the CLI walkthrough it only runs when asked (``schedule run new-year-report``).
SCHEDULES = [
    Schedule(
        name="new-year-report",
        task="count",
        trigger=CronTrigger("0 3 1 1 *", "Asia/Shanghai"),
        kwargs={"n": 3, "delay": 0.01},
        description="count to three, once a year",
    ),
]
