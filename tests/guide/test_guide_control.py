"""Guide §4 samples and tables: stopping, pausing, resuming, resident workers.

§4.1 (the stop table), §4.2, §4.3 (the resume table), §4.4 and §4.5 (the worker, the
three endings, pause rather than stop) run as written against a ``TaskRun``; the
store-backed §4.5 samples run in ``test_guide_controller`` with the other Controller
samples.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from _status import status_now
from chongming_task import Controller, TaskContext, task
from chongming_task._model import FailureKind
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.testing import FakeClock, GatedExecutor, wait_until

from .conftest import PATIENCE, Gate, S, path, reach, triggers

STOPPED_PATH = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]


def cooperative(ctx: Any) -> None:
    while True:
        ctx.checkpoint()
        time.sleep(0.002)


class Uncooperative:
    """Never calls ``checkpoint()``; ``finished`` tells when the abandoned body ends."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def __call__(self, ctx: Any) -> str:
        self.entered.set()
        self.release.wait(PATIENCE)
        self.finished.set()
        return "side effect done"


# ---------------------------------------------------------------- §4.1


def test_s4_1_stop_sample_cooperative_column() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(cooperative)
    run.start()
    reach(run, S.RUNNING)

    run.stop(reason="发布窗口")  # 不阻塞
    outcome = run.wait(timeout=30)

    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False
    assert path(run) == STOPPED_PATH
    assert run.transitions[4].reason == "发布窗口"


def test_s4_1_stop_sample_uncooperative_thread_column() -> None:
    from chongming_task.run import TaskRun

    body = Uncooperative()
    run = TaskRun(body, graceful_stop=0.1)
    run.start()
    assert body.entered.wait(PATIENCE)

    run.stop(reason="发布窗口")  # 不阻塞
    outcome = run.wait(timeout=30)

    assert outcome.status is S.LOST  # never "stopped" when it could not be stopped
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LOST
    assert outcome.failure.retryable is True
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.LOST]
    # "后台副作用 可能仍在产生": the abandoned body is still running.
    assert not body.finished.is_set()
    body.release.set()
    assert body.finished.wait(PATIENCE)
    assert run.status is S.LOST  # its late return changes nothing


def test_s4_1_graceful_window_then_fallback() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    body = Uncooperative()
    run = TaskRun(body, clock=clock, graceful_stop=5.0)
    run.start()
    assert body.entered.wait(PATIENCE)
    run.stop(reason="release")
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(4.9)
    assert run.status is S.STOPPING  # still inside the graceful window
    clock.advance(0.2)
    reach(run, S.LOST)
    body.release.set()
    assert body.finished.wait(PATIENCE)


# ---------------------------------------------------------------- §4.2


def test_s4_2_pause_and_resume_sample() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(cooperative)
    run.start()
    reach(run, S.RUNNING)

    assert run.pause() is True  # → True 表示已确认挂起，状态变为 paused
    assert run.status is S.PAUSED
    assert run.resume() is True  # → running
    assert status_now(run) is S.RUNNING

    run.stop(reason="done")
    run.wait(PATIENCE)
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.PAUSING, S.PAUSED,
        S.RUNNING, S.STOPPING, S.STOPPED,
    ]  # fmt: skip


def test_s4_2_pause_false_rolls_back_to_running() -> None:
    from chongming_task.run import TaskRun

    body = Uncooperative()
    run = TaskRun(body)
    run.start()
    assert body.entered.wait(PATIENCE)
    assert run.pause(timeout=0.1) is False  # not an error: the pause did not take effect
    assert run.status is S.RUNNING
    assert path(run)[-2:] == [S.PAUSING, S.RUNNING]
    assert triggers(run)[-1] == "runtime:pause_aborted"
    body.release.set()
    assert run.wait(PATIENCE).ok


def test_s4_2_no_timeout_while_paused() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    release = threading.Event()

    def body(ctx: Any) -> str:
        while not release.is_set():
            ctx.checkpoint()
            time.sleep(0.002)
        return "done"

    run = TaskRun(body, clock=clock, timeout=Timeout(idle=5, per_attempt=30))
    run.start()
    reach(run, S.RUNNING)
    assert run.pause(timeout=PATIENCE) is True
    clock.advance(100)  # far beyond idle and per_attempt
    assert run.status is S.PAUSED
    assert run.resume() is True
    release.set()
    outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert path(run)[-4:] == [S.PAUSING, S.PAUSED, S.RUNNING, S.SUCCEEDED]


def test_s4_2_paused_time_does_not_count_toward_per_attempt() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    run = TaskRun(cooperative, clock=clock, timeout=Timeout(per_attempt=10), graceful_stop=1)
    run.start()
    reach(run, S.RUNNING)
    clock.advance(6)
    assert run.pause(timeout=PATIENCE) is True
    clock.advance(100)
    assert run.resume() is True
    clock.advance(3)  # 9 s of running time: still within the attempt's 10 s
    assert run.status is S.RUNNING
    clock.advance(1.5)  # 10.5 s of running time
    outcome = run.wait(PATIENCE)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT


# ---------------------------------------------------------------- §4.3


def test_s4_3_resume_after_pause_while_running_goes_to_running(gate: Gate) -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(gate)
    run.start()
    gate.wait_entered()
    assert run.pause(timeout=PATIENCE)
    assert run.resume()
    assert run.status is S.RUNNING
    gate.release.set()
    assert run.wait(PATIENCE).ok
    assert path(run)[3:] == [S.RUNNING, S.PAUSING, S.PAUSED, S.RUNNING, S.SUCCEEDED]


def test_s4_3_resume_after_pause_in_retry_wait_goes_to_queued() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    attempts: list[int] = []

    def flaky(ctx: TaskContext) -> int:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise OSError("transient")
        return ctx.attempt

    run = TaskRun(flaky, clock=clock, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(10)))
    run.start()
    reach(run, S.RETRY_WAIT)
    assert run.pause(timeout=PATIENCE) is True  # no slot held: it takes effect at once
    assert run.status is S.PAUSED
    clock.advance(60)  # the backoff ends while paused: it does not restart by itself
    assert run.status is S.PAUSED
    assert attempts == [1]
    assert run.resume() is True
    outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert outcome.value == 2
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.RETRY_WAIT,
        S.PAUSED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip


def test_s4_3_resume_after_pause_while_queued_goes_to_queued(gate: Gate) -> None:
    from chongming_task import Controller

    controller = Controller(max_parallel=1)
    try:
        controller.register("gate", gate)
        controller.submit("gate", task_id="busy")
        queued = controller.submit("gate", task_id="waiting")
        gate.wait_entered()
        assert queued.status is S.QUEUED
        assert controller.pause("waiting") is True
        assert status_now(queued) is S.PAUSED
        assert controller.resume("waiting") is True
        assert queued.status is S.QUEUED  # never started: back in the queue, not running
        gate.release.set()
        controller.wait_all(timeout=PATIENCE)
        assert path(queued) == [
            S.PENDING, S.QUEUED, S.PAUSED, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED,
        ]  # fmt: skip
    finally:
        controller.close(timeout=PATIENCE)


# ---------------------------------------------------------------- §4.4


def test_s4_4_stop_then_the_task_finishes_anyway() -> None:
    from chongming_task.run import TaskRun

    asked = threading.Event()
    finish = threading.Event()

    def almost_done(ctx: Any) -> str:
        ctx.checkpoint()
        asked.set()
        assert finish.wait(PATIENCE)
        return "finished"  # no checkpoint between the request and the return

    run = TaskRun(almost_done)
    run.start()
    assert asked.wait(PATIENCE)
    assert run.stop(reason="发布窗口") is True
    assert run.status is S.STOPPING
    finish.set()
    outcome = run.wait(PATIENCE)
    assert outcome.ok  # a request, not a verdict
    assert outcome.value == "finished"
    assert outcome.failure is None
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.SUCCEEDED]


# ---------------------------------------------------------------- §4.5


@task
def worker(ctx, source: str) -> int:  # type: ignore[no-untyped-def]
    processed = 0
    while not ctx.is_stop_requested:  # ← 优雅收尾的写法
        ctx.checkpoint()  # ← 不调用它 = 停不掉
        processed += 1
        ctx.progress(processed, unit="batch")
        time.sleep(0.02)
    ctx.log(f"收到停止请求，本次共处理 {processed} 批")
    return processed  # 正常返回 → 终态 succeeded，返回值保留


def test_s4_5_worker_ending_with_return_is_succeeded_with_value() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(worker, ("kafka://orders",), task_id="orders-worker")
    run.start()
    wait_until(lambda: (run.snapshot.progress or None) and run.snapshot.progress.done >= 2)
    run.stop(reason="发布窗口")
    outcome = run.wait(timeout=10)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value >= 2
    assert outcome.snapshot.progress is not None
    assert outcome.snapshot.progress.unit == "batch"
    assert run.logs[-1].message == f"收到停止请求，本次共处理 {outcome.value} 批"
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.SUCCEEDED]


def test_s4_5_three_endings_table() -> None:
    """``while True: checkpoint`` -> stopped; ``return`` -> succeeded; none -> lost."""
    from chongming_task.run import TaskRun

    def aborts(ctx: Any) -> int:
        while True:
            ctx.checkpoint()
            time.sleep(0.002)

    stubborn = Uncooperative()
    runs = {
        "aborts": TaskRun(aborts),
        "returns": TaskRun(worker, ("kafka://orders",)),
        "ignores": TaskRun(stubborn, graceful_stop=0.1),
    }
    for run in runs.values():
        run.start()
    for run in runs.values():
        reach(run, S.RUNNING)
    assert stubborn.entered.wait(PATIENCE)
    for run in runs.values():
        run.stop(reason="stop all three")
    outcomes = {name: run.wait(PATIENCE) for name, run in runs.items()}

    assert (outcomes["aborts"].status, outcomes["aborts"].value) == (S.STOPPED, None)
    assert outcomes["returns"].status is S.SUCCEEDED
    assert isinstance(outcomes["returns"].value, int)
    assert (outcomes["ignores"].status, outcomes["ignores"].value) == (S.LOST, None)
    assert not stubborn.finished.is_set()  # the thread still runs in the background
    stubborn.release.set()
    assert stubborn.finished.wait(PATIENCE)


def test_s4_5_stop_is_terminal_and_cannot_be_undone() -> None:
    from chongming_task.run import TaskRun

    run = TaskRun(cooperative)
    run.start()
    reach(run, S.RUNNING)
    run.stop(reason="发布窗口")
    run.wait(PATIENCE)
    assert run.resume() is False
    assert run.pause(timeout=0.1) is False
    assert run.stop() is False  # already terminal
    assert run.status is S.STOPPED


def test_stop_right_after_submit_lets_a_returning_worker_succeed() -> None:
    """§4.5 with a carrier slower than the caller: the stop lands while `starting`."""
    from chongming_task.runtime.executors.thread import ThreadExecutor

    executor = GatedExecutor(ThreadExecutor())
    controller = Controller(owner="node-a", executor=executor)
    try:
        controller.register_all(worker)
        run = controller.submit("worker", "kafka://orders", task_id="orders-worker")
        assert run.status is S.STARTING  # where submit() leaves it when the carrier is late
        controller.stop("orders-worker", reason="发布窗口")
        executor.go.set()
        outcome = controller.wait("orders-worker", timeout=10)  # → succeeded，value=已处理批数
        assert outcome.status is S.SUCCEEDED
        assert isinstance(outcome.value, int)
        assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.STOPPING, S.SUCCEEDED]
    finally:
        executor.go.set()
        controller.close(timeout=5)
