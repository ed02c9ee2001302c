"""``async def`` tasks on one event loop: 300 at once on a handful of threads.

A Controller runs 300 ``async def`` tasks that each await (a stand-in for a network
call) between two ``await ctx.acheckpoint()``: all of them run at the same time on the
process's one event loop, so the process gains a few threads (the loop, its watch, a
few helpers that write to the store), not 300. A long-running async task is paused at
its ``acheckpoint`` while another task runs to its end meanwhile (a pause awaits on
the loop, it does not block it), then resumed and stopped. Last, a task that blocks
the loop with ``time.sleep`` is caught: its checkpoint-gap profile counts the loop
block, and a warning in its own log names it.

Run: python examples/21_async_loop.py (docs/tasks.md, "async def tasks")
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from chongming_task import Controller, TaskContext, TaskStatus, task

CONCURRENT = 300


@task
async def fetch(ctx: TaskContext, n: int) -> int:
    """Stands for a network call: while it awaits, the loop serves the other tasks."""
    await ctx.acheckpoint()
    await asyncio.sleep(1.0)
    await ctx.acheckpoint()
    return n


@task
async def ticker(ctx: TaskContext) -> None:
    """Runs until stopped; stop and pause land at its ``await ctx.acheckpoint()``."""
    while True:
        await ctx.acheckpoint()
        await asyncio.sleep(0.01)


@task
async def hog(ctx: TaskContext) -> str:
    """The mistake: a blocking call in an async body stalls every async task."""
    await ctx.acheckpoint()
    time.sleep(0.3)  # should be: await asyncio.sleep(0.3), or await asyncio.to_thread(...)
    await ctx.acheckpoint()
    return "done"


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        time.sleep(0.01)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with Controller(max_parallel=CONCURRENT + 10) as controller:
        controller.register_all(fetch, ticker, hog)

        # 1. 300 concurrent tasks, one loop.
        before = threading.active_count()
        runs = [controller.submit("fetch", n) for n in range(CONCURRENT)]
        wait_for(
            lambda: all(run.status is TaskStatus.RUNNING or run.done for run in runs),
            "every task to run",
        )
        during = threading.active_count()
        assert [run.wait(30).value for run in runs] == list(range(CONCURRENT))
        print(f"{CONCURRENT} async tasks ran at once; the process gained {during - before} threads")
        assert during - before <= 16, (before, during)  # not one per task

        # 2. A pause awaits on the loop: another task runs to its end meanwhile.
        long = controller.submit("ticker")
        wait_for(lambda: long.status is TaskStatus.RUNNING, "the ticker to run")
        assert controller.pause(long.task_id, timeout=5) is True
        assert controller.submit("fetch", 7).wait(30).value == 7
        assert long.status is TaskStatus.PAUSED
        assert controller.resume(long.task_id) is True
        controller.stop(long.task_id, reason="example over")
        assert long.wait(10).status is TaskStatus.STOPPED
        print("paused at its acheckpoint while another task finished; resumed; stopped")

        # 3. A body that blocks the loop is reported, not hidden.
        blocked = controller.submit("hog")
        assert blocked.wait(10).value == "done"
        stored = controller.get(blocked.task_id)
        assert stored is not None
        assert stored.checkpoint_gaps is not None
        gaps = stored.checkpoint_gaps
        assert gaps.loop_blocks == 1
        assert gaps.loop_block_max >= 0.3
        warnings = [e.message for e in blocked.logs if e.level >= logging.WARNING]
        assert any("blocked the event loop" in message for message in warnings), warnings
        print(
            f"hog blocked the event loop {gaps.loop_blocks} time(s), "
            f"the longest {gaps.loop_block_max:.2f} s: reported in its log and profile"
        )


if __name__ == "__main__":
    main()
