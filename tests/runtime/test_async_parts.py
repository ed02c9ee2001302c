"""The parts under the shared event loop: the bounded helper pool and the loop's life.

The helpers do the blocking parts of ``async def`` runs (store writes): however many
jobs arrive at once, at most ``size`` threads run them, and idle helpers exit. A loop
starts with its first run and stops once none has run for its linger time.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from chongming_task.run import TaskRun, run_task
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime.executors._asyncio import AsyncioExecutor
from chongming_task.runtime.executors._helpers import HelperPool
from chongming_task.runtime.executors._loop import SharedLoop
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

PATIENCE = 10.0


def test_a_burst_of_jobs_runs_on_at_most_size_helpers_that_then_exit() -> None:
    pool = HelperPool(size=3, linger=0.05, name="test-helper")
    gate = threading.Event()
    done: list[int] = []
    lock = threading.Lock()
    running = [0, 0]  # now, most at once

    def job(n: int) -> None:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        gate.wait(PATIENCE)
        with lock:
            running[0] -= 1
            done.append(n)

    for n in range(50):
        pool.submit(lambda n=n: job(n))  # type: ignore[misc]
    wait_until(lambda: running[0] == 3, timeout=PATIENCE)
    assert pool.threads == 3
    gate.set()
    wait_until(lambda: len(done) == 50, timeout=PATIENCE)
    assert sorted(done) == list(range(50))
    assert running[1] == 3  # never more than its size
    wait_until(lambda: pool.threads == 0, timeout=PATIENCE, message="idle helpers to exit")


def test_a_loop_starts_with_its_first_run_and_stops_when_idle() -> None:
    loop = SharedLoop(linger=0.05)
    executor = AsyncioExecutor(loop=loop, helpers=HelperPool(size=2, linger=0.05, name="t"))
    assert loop.started == 0  # nothing runs before the first async task

    async def where(ctx: TaskContext) -> str:
        await ctx.acheckpoint()
        await asyncio.sleep(0)
        return threading.current_thread().name

    outcome = run_task(where, executor=executor)
    assert outcome.value == "chongming-task:event-loop"
    thread = loop.thread
    assert thread is not None
    wait_until(lambda: loop.thread is None, timeout=PATIENCE, message="the idle loop to stop")
    thread.join(PATIENCE)
    assert not thread.is_alive()
    # The next run starts a new loop.
    assert run_task(where, executor=executor).ok
    assert loop.started == 2


def test_the_asyncio_executor_refuses_a_plain_function() -> None:
    from chongming_task.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="runs async def tasks"):
        TaskRun(lambda ctx: None, executor=AsyncioExecutor())


def test_run_task_of_an_async_def_runs_on_the_shared_loop() -> None:
    async def body(ctx: TaskContext) -> str:
        await ctx.acheckpoint()
        return threading.current_thread().name

    run = TaskRun(body)
    assert run.executor.name == "asyncio"
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is TaskStatus.SUCCEEDED
    assert outcome.value == "chongming-task:event-loop"


def test_a_system_exit_from_a_spawned_task_does_not_end_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = SharedLoop(linger=0.05)
    executor = AsyncioExecutor(loop=loop, helpers=HelperPool(size=2, linger=0.05, name="t"))

    async def exits() -> None:
        raise SystemExit(3)

    async def spawner(ctx: TaskContext) -> str:
        await ctx.acheckpoint()
        task = asyncio.create_task(exits())
        await asyncio.sleep(0.05)
        # Retrieved, so no "exception never retrieved" traceback is formatted later on
        # the loop's thread (Python 3.11 formats carets with ast.parse, whose state is
        # shared between threads: a parse elsewhere at that moment fails).
        assert isinstance(task.exception(), SystemExit)
        return "still here"

    with caplog.at_level(logging.ERROR, logger="chongming_task.runtime"):
        assert run_task(spawner, executor=executor).value == "still here"
        assert run_task(spawner, executor=executor).value == "still here"
    assert loop.started == 1  # the same loop served both
    assert any("SystemExit escaped a task" in r.getMessage() for r in caplog.records)
