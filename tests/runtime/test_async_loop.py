"""``async def`` tasks on the process's one event loop (issue 36, asyncio-native workers).

Every async task of a Controller runs on one shared loop thread, not on a thread and a
loop of its own; stop, pause, resume and timeouts work at ``await ctx.acheckpoint()``
(a pause awaits on the loop, so the other tasks go on); a body that blocks the loop is
counted in its checkpoint-gap profile and reported by a warning naming it; past the
graceful window a body is cancelled at its ``await``. Each test asserts what the store
says, on memory, SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from chongming_task import Controller, TaskContext, TaskStatus
from chongming_task._model import FailureKind
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.runtime.executors._loop import LOOP
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until

S = TaskStatus
PATIENCE = 15.0
#: How long a blocking body holds the loop: well above the 0.1 s threshold.
BLOCK = 0.4


@pytest.fixture
def controller(store: TaskStore) -> Iterator[Controller]:
    made = Controller(store, max_parallel=300, graceful_stop=0.3)
    try:
        yield made
    finally:
        made.close()


def stored_path(store: TaskStore, task_id: str) -> list[TaskStatus]:
    return [record.to_status for record in store.history(task_id)]


async def until_set(ctx: TaskContext, gate: threading.Event, step: float = 0.02) -> None:
    """Checkpoint and await until ``gate`` is set (from the test's thread)."""
    while not gate.is_set():
        await ctx.acheckpoint()
        await asyncio.sleep(step)


def test_async_tasks_share_one_loop_on_one_thread(controller: Controller, store: TaskStore) -> None:
    seen: list[tuple[int, int]] = []
    gate = threading.Event()

    async def waiter(ctx: TaskContext) -> int:
        seen.append((id(asyncio.get_running_loop()), threading.get_ident()))
        await until_set(ctx, gate, step=0.05)
        return len(seen)

    controller.register("waiter", waiter)
    threads_before = threading.active_count()
    runs = [controller.submit("waiter") for _ in range(200)]
    wait_until(lambda: len(seen) == 200, timeout=PATIENCE, message="200 bodies awaiting")
    try:
        assert len(set(seen)) == 1  # one loop, on one thread, for all 200
        loop_thread = LOOP.thread
        assert loop_thread is not None
        assert seen[0][1] == loop_thread.ident
        # The loop, its watch and the bounded store helpers: not a thread per task.
        assert threading.active_count() - threads_before <= 16
    finally:
        gate.set()
    for run in runs:
        assert run.wait(PATIENCE).ok
    for run in runs[:5]:
        snapshot = store.get(run.task_id)
        assert snapshot is not None
        assert snapshot.status is S.SUCCEEDED
        starting = [t for t in store.history(run.task_id) if t.to_status is S.STARTING]
        assert starting[0].reason == "executor=asyncio"


def test_stop_lands_at_acheckpoint(controller: Controller, store: TaskStore) -> None:
    rounds: list[int] = []

    async def forever(ctx: TaskContext) -> None:
        while True:
            await ctx.acheckpoint()
            rounds.append(1)
            await asyncio.sleep(0.01)

    controller.register("forever", forever)
    run = controller.submit("forever")
    wait_until(lambda: len(rounds) > 2, timeout=PATIENCE)
    assert controller.stop(run.task_id, reason="enough") is True
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.message == "stop requested: enough"
    stored = store.get(run.task_id)
    assert stored is not None
    assert stored.status is S.STOPPED
    assert stored_path(store, run.task_id)[-4:] == [S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]


def test_a_pause_awaits_on_the_loop_while_the_others_go_on(
    controller: Controller, store: TaskStore
) -> None:
    ticks = {"a": 0, "b": 0}

    async def counter(ctx: TaskContext, key: str) -> None:
        while True:
            await ctx.acheckpoint()
            ticks[key] += 1
            await asyncio.sleep(0.005)

    controller.register("counter", counter)
    a = controller.submit("counter", "a")
    b = controller.submit("counter", "b")
    wait_until(lambda: ticks["a"] > 3 and ticks["b"] > 3, timeout=PATIENCE)
    assert controller.pause(a.task_id, timeout=PATIENCE) is True
    stored = store.get(a.task_id)
    assert stored is not None
    assert stored.status is S.PAUSED
    frozen, b_then = ticks["a"], ticks["b"]
    wait_until(lambda: ticks["b"] > b_then + 10, timeout=PATIENCE, message="b to go on")
    assert ticks["a"] == frozen  # really suspended at its await ctx.acheckpoint()
    assert controller.resume(a.task_id) is True
    wait_until(lambda: ticks["a"] > frozen + 3, timeout=PATIENCE, message="a to go on")
    stored = store.get(a.task_id)
    assert stored is not None
    assert stored.status is S.RUNNING
    for run in (a, b):
        controller.stop(run.task_id)
        assert run.wait(PATIENCE).status is S.STOPPED
    assert stored_path(store, a.task_id)[-6:] == [
        S.RUNNING,
        S.PAUSING,
        S.PAUSED,
        S.RUNNING,
        S.STOPPING,
        S.STOPPED,
    ]


def test_a_timeout_stops_the_body_at_acheckpoint(controller: Controller, store: TaskStore) -> None:
    reached: list[int] = []

    async def slow(ctx: TaskContext) -> None:
        while True:
            await ctx.acheckpoint()
            reached.append(1)
            await asyncio.sleep(0.01)

    controller.register("slow", slow, timeout=Timeout(per_attempt=0.3))
    run = controller.submit("slow")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    assert len(reached) > 3  # it ran, then stopped at a checkpoint
    history = store.history(run.task_id)
    assert [t.to_status for t in history][-3:] == [S.STARTING, S.RUNNING, S.FAILED]
    assert history[-1].trigger == "supervisor:timeout_attempt"


def test_past_the_graceful_window_the_body_is_cancelled_at_its_await(
    controller: Controller, store: TaskStore
) -> None:
    cancelled, entered = threading.Event(), threading.Event()

    async def sleeper(ctx: TaskContext) -> None:
        await ctx.acheckpoint()
        entered.set()
        try:
            await asyncio.sleep(3600)  # no checkpoint for an hour
        except asyncio.CancelledError:
            cancelled.set()
            raise

    controller.register("sleeper", sleeper)
    run = controller.submit("sleeper")
    assert entered.wait(PATIENCE)  # past its last checkpoint
    controller.stop(run.task_id, reason="now")
    outcome = run.wait(PATIENCE)
    assert cancelled.is_set()
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert "cancelled at an await" in outcome.failure.message
    stored = store.get(run.task_id)
    assert stored is not None
    assert stored.status is S.STOPPED
    assert stored_path(store, run.task_id)[-2:] == [S.STOPPING, S.STOPPED]


def test_a_body_that_ignores_its_cancellation_is_given_up_as_lost(
    controller: Controller, store: TaskStore
) -> None:
    release, entered = threading.Event(), threading.Event()

    async def stubborn(ctx: TaskContext) -> None:
        await ctx.acheckpoint()
        entered.set()
        while not release.is_set():
            try:
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                continue  # swallowed: nothing stops it but ``release``

    controller.register("stubborn", stubborn)
    run = controller.submit("stubborn")
    assert entered.wait(PATIENCE)  # past its last checkpoint
    try:
        controller.stop(run.task_id)
        outcome = run.wait(PATIENCE)
        assert outcome.status is S.LOST
        assert outcome.failure is not None
        assert "nor end when its carrier was cancelled" in outcome.failure.message
        assert "asyncio carrier was abandoned" in outcome.failure.message
        stored = store.get(run.task_id)
        assert stored is not None
        assert stored.status is S.LOST
    finally:
        release.set()  # let it leave the shared loop


def test_a_blocking_body_is_profiled_and_reported_by_name(
    controller: Controller, store: TaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    async def blocker(ctx: TaskContext) -> str:
        await ctx.acheckpoint()
        time.sleep(BLOCK)  # the mistake: a blocking call on the shared loop
        await ctx.acheckpoint()
        return "done"

    controller.register("blocker", blocker)
    with caplog.at_level(logging.WARNING, logger="chongming_task.task"):
        run = controller.submit("blocker")
        assert run.wait(PATIENCE).ok
    gaps = run.snapshot.checkpoint_gaps
    assert gaps is not None
    assert gaps.loop_blocks == 1
    assert gaps.loop_block_max >= BLOCK
    stored = store.get(run.task_id)
    assert stored is not None
    if store.keeps_checkpoint_gaps:
        assert stored.checkpoint_gaps is not None
        assert stored.checkpoint_gaps.loop_blocks == 1
        assert stored.checkpoint_gaps.loop_block_max >= BLOCK
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    task = f"async def task 'blocker' ({run.task_id})"
    # While it blocked (the watch thread) and once it ended (with its length).
    assert any(m.startswith(f"{task} is blocking the event loop") for m in warned), warned
    assert any(m.startswith(f"{task} blocked the event loop for") for m in warned), warned
    assert any("blocked the event loop" in entry.message for entry in run.logs)


def test_a_body_that_awaits_is_not_reported(controller: Controller) -> None:
    async def polite(ctx: TaskContext) -> None:
        for _ in range(5):
            await ctx.acheckpoint()
            await asyncio.sleep(0.05)

    controller.register("polite", polite)
    run = controller.submit("polite")
    assert run.wait(PATIENCE).ok
    gaps = run.snapshot.checkpoint_gaps
    assert gaps is not None
    assert gaps.loop_blocks == 0
    assert not [entry for entry in run.logs if entry.level >= logging.WARNING]


def test_tasks_a_body_spawned_are_cancelled_when_it_ends(controller: Controller) -> None:
    ended: list[str] = []

    async def background() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    async def spawner(ctx: TaskContext) -> str:
        task = asyncio.create_task(background())
        await asyncio.sleep(0.01)
        assert not task.done()
        return "left it running"

    controller.register("spawner", spawner)
    assert controller.submit("spawner").wait(PATIENCE).ok
    assert ended == ["cancelled"]  # as asyncio.run would have done, before the end


def test_each_task_starts_in_a_fresh_context(controller: Controller) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []

    async def reader(ctx: TaskContext, value: str) -> None:
        seen.append(var.get())
        var.set(value)

    controller.register("reader", reader)
    for value in ("first", "second"):
        assert controller.submit("reader", value).wait(PATIENCE).ok
    assert seen == ["unset", "unset"]


def test_the_loop_ends_with_the_controller(store: TaskStore) -> None:
    async def quick(ctx: TaskContext) -> int:
        await ctx.acheckpoint()
        return 1

    with Controller(store) as controller:
        controller.register("quick", quick)
        assert controller.submit("quick").wait(PATIENCE).value == 1
        thread = LOOP.thread
        assert thread is not None
        assert thread.is_alive()
    # close() stopped it: no thread is left behind by the last user.
    assert LOOP.thread is None
    assert not thread.is_alive()


def test_a_plain_def_task_keeps_its_thread(controller: Controller) -> None:
    where: list[Any] = []

    def plain(ctx: TaskContext) -> None:
        where.append(threading.current_thread().name)

    controller.register("plain", plain)
    run = controller.submit("plain")
    assert run.wait(PATIENCE).ok
    assert where
    assert where[0] != "chongming-task:event-loop"
    assert run.executor.name == "thread"


def test_a_retry_waits_its_backoff_on_the_loop(controller: Controller, store: TaskStore) -> None:
    attempts: list[int] = []

    async def flaky(ctx: TaskContext) -> int:
        await ctx.acheckpoint()
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("the first try fails")
        return ctx.attempt

    controller.register(
        "flaky", flaky, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0.2))
    )
    run = controller.submit("flaky")
    assert run.wait(PATIENCE).value == 2
    assert attempts == [1, 2]
    assert stored_path(store, run.task_id)[-5:] == [
        S.RUNNING,
        S.RETRY_WAIT,
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]


def test_a_run_paused_in_its_backoff_runs_again_once_resumed(
    controller: Controller, store: TaskStore
) -> None:
    async def flaky(ctx: TaskContext) -> int:
        await ctx.acheckpoint()
        if ctx.attempt == 1:
            raise ConnectionError("the first try fails")
        return ctx.attempt

    controller.register("flaky", flaky, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(60)))
    run = controller.submit("flaky")
    wait_until(lambda: run.status is S.RETRY_WAIT, timeout=PATIENCE)
    assert controller.pause(run.task_id) is True  # queued for a pause: the backoff is over
    wait_until(lambda: run.status is S.PAUSED, timeout=PATIENCE)
    assert controller.resume(run.task_id) is True
    assert run.wait(PATIENCE).value == 2
    path = stored_path(store, run.task_id)
    assert path[-4:] == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert S.PAUSED in path
