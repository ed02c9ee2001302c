"""Guide §5 (retry) and §6 (timeouts): the samples as written, on a fake clock.

The §5 policy waits up to 300 s between attempts and the §6 timeouts are 30 s to
600 s long, so both run on ``FakeClock``: the same policies, no real waiting.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from chongming_task import Controller
from chongming_task._model import FailureKind
from chongming_task.policies import FixedBackoff, Jitter, RetryPolicy, Timeout
from chongming_task.testing import FakeClock, wait_until

from .conftest import PATIENCE, Gate, S, path, reach


def the_policy() -> RetryPolicy:
    from chongming_task.policies import ExponentialBackoff, RetryPolicy

    return RetryPolicy(
        max_attempts=5,  # 总尝试次数（含首次）
        backoff=ExponentialBackoff(base=1, factor=2, max_delay=300),
        retry_on=(Exception,),  # 哪些异常值得重试
        give_up_on=(ValueError, KeyError),  # 哪些立刻放弃
    )


class Failing:
    """Fails with ``error`` for the first ``times`` attempts, then returns the attempt."""

    def __init__(self, error: type[BaseException], times: int) -> None:
        self.error = error
        self.times = times
        self.attempts: list[int] = []

    def __call__(self, ctx: Any) -> int:
        self.attempts.append(ctx.attempt)
        if ctx.attempt <= self.times:
            raise self.error(f"attempt {ctx.attempt}")
        return int(ctx.attempt)


def drive_retries(run: Any, clock: FakeClock) -> None:
    """Advance the fake clock past every backoff until the run is terminal."""
    while True:
        wait_until(lambda: run.done or run.status is S.RETRY_WAIT, timeout=PATIENCE)
        if run.done:
            return
        attempt = run.snapshot.attempt
        clock.wait_for_sleepers(1, timeout=PATIENCE)
        clock.advance(300)
        # mypy infers no type for a lambda with a default argument:
        wait_until(lambda a=attempt: run.done or run.snapshot.attempt > a, timeout=PATIENCE)  # type: ignore[misc]


def test_s5_policy_as_written_fields() -> None:
    from chongming_task.policies import ExponentialBackoff

    policy = the_policy()
    assert policy.max_attempts == 5
    assert policy.backoff == ExponentialBackoff(base=1, factor=2, max_delay=300)
    assert policy.retry_on == (Exception,)
    assert policy.give_up_on == (ValueError, KeyError)
    # Backoff jitters by default (Jitter.FULL, uniform in [0, delay)).
    assert policy.backoff.jitter is Jitter.FULL
    assert RetryPolicy().backoff.jitter is Jitter.FULL
    assert policy.backoff.delay_for(3, rng=lambda: 0.0) == 0.0
    assert policy.backoff.delay_for(3, rng=lambda: 0.999) == pytest.approx(4 * 0.999)
    assert policy.backoff.delay_for(20, rng=lambda: 0.5) == 150.0  # capped at max_delay


def test_s5_retryable_error_uses_every_attempt() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    body = Failing(OSError, times=4)
    run = TaskRun(body, retry=the_policy(), clock=clock)
    run.start()
    drive_retries(run, clock)
    outcome = run.wait(PATIENCE)
    assert outcome.ok
    assert outcome.value == 5
    assert body.attempts == [1, 2, 3, 4, 5]
    assert outcome.snapshot.attempt == 5
    assert outcome.snapshot.max_attempts == 5
    attempt_path = [S.STARTING, S.RUNNING, S.RETRY_WAIT]
    assert path(run) == [S.PENDING, S.QUEUED, *attempt_path * 4, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_s5_exhausted_attempts_fail() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    body = Failing(OSError, times=99)
    run = TaskRun(body, retry=the_policy(), clock=clock)
    run.start()
    drive_retries(run, clock)
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert body.attempts == [1, 2, 3, 4, 5]
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.EXCEPTION


@pytest.mark.parametrize("error", [ValueError, KeyError])
def test_s5_give_up_on_wins_over_retry_on(error: type[Exception]) -> None:
    from chongming_task.run import TaskRun

    body = Failing(error, times=99)
    run = TaskRun(body, retry=the_policy(), clock=FakeClock())
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert body.attempts == [1]  # given up at once, although Exception is in retry_on
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.FAILED]


def test_s5_max_attempts_one_means_no_retry() -> None:
    from chongming_task.run import run_task

    body = Failing(OSError, times=1)
    outcome = run_task(body, retry=RetryPolicy(max_attempts=1))
    assert outcome.status is S.FAILED
    assert body.attempts == [1]


def test_s5_1_a_stop_is_never_retried() -> None:
    from chongming_task.run import TaskRun

    def loop(ctx: Any) -> None:
        while True:
            ctx.checkpoint()
            time.sleep(0.002)

    run = TaskRun(loop, retry=the_policy(), clock=FakeClock())
    run.start()
    reach(run, S.RUNNING)
    run.stop(reason="operator")
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert outcome.snapshot.attempt == 1
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False
    assert S.RETRY_WAIT not in path(run)


def test_s5_2_failure_kinds_of_the_table() -> None:
    listed = [
        "exception", "nonzero_exit", "timeout_start", "timeout_attempt", "timeout_idle",
        "cancelled", "lost", "dependency_failed", "condition_false",
    ]  # fmt: skip
    assert [FailureKind(value).value for value in listed] == listed


# ---------------------------------------------------------------- §6


def the_timeout() -> Any:
    from chongming_task.policies import Timeout

    return Timeout(start=30, per_attempt=600, idle=60)


class Beating:
    """Checkpoints until ``stop_beating``, then goes silent until asked to stop."""

    def __init__(self) -> None:
        self.hanging = threading.Event()
        self.stop_beating = threading.Event()

    def __call__(self, ctx: Any) -> str:
        while not self.stop_beating.is_set():
            ctx.checkpoint()
            time.sleep(0.002)
        self.hanging.set()
        wait_until(lambda: ctx.is_stop_requested, timeout=PATIENCE)  # silent: no checkpoint
        ctx.checkpoint()  # the stop request of the timeout takes effect here
        return "never"


def test_s6_idle_fires_first_as_timeout_idle() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    body = Beating()
    run = TaskRun(body, timeout=the_timeout(), clock=clock, retry=RetryPolicy(max_attempts=1))
    run.start()
    reach(run, S.RUNNING)
    body.stop_beating.set()
    assert body.hanging.wait(PATIENCE)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(61)  # idle (60) is the earliest of the three
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE  # a failure kind, not a state
    assert outcome.failure.retryable is True  # timeouts are retryable by default
    assert path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.FAILED]


def test_s6_per_attempt_fires_for_a_busy_task_and_is_retried() -> None:
    from chongming_task.run import TaskRun

    clock = FakeClock()
    release = threading.Event()
    beats = [0]

    def busy(ctx: Any) -> int:
        if ctx.attempt == 2:
            return 2
        while not release.is_set():
            ctx.checkpoint()  # keeps idle quiet; per_attempt still counts
            beats[0] += 1
            time.sleep(0.002)
        ctx.checkpoint()
        return 1

    run = TaskRun(
        busy,
        timeout=the_timeout(),
        clock=clock,
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
    )
    run.start()
    reach(run, S.RUNNING)
    for _ in range(12):  # 12 x 50 s: checkpoints in between keep idle from firing
        seen = beats[0]
        clock.advance(50)
        # A whole checkpoint after the advance (the beat is at the new time), unless
        # the advance ended the attempt (per_attempt: 600 s).
        wait_until(
            # mypy infers no type for a lambda with a default argument:
            lambda seen=seen: beats[0] > seen + 1 or run.snapshot.attempt > 1 or run.done,  # type: ignore[misc]
            timeout=PATIENCE,
            message="a checkpoint after the advance",
        )
    clock.advance(1)
    outcome = run.wait(PATIENCE)
    release.set()
    assert outcome.ok
    assert outcome.value == 2
    assert path(run) == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.RETRY_WAIT,
        S.STARTING, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip
    assert "timeout" in (run.transitions[4].reason or "")


def test_s6_1_idle_is_not_counted_while_queued(gate: Any) -> None:
    from chongming_task import Controller

    clock = FakeClock()
    controller = Controller(max_parallel=1, clock=clock)
    try:
        controller.register("gate", gate)
        controller.register("quick", lambda ctx: "ok")
        controller.submit("gate", task_id="busy")
        gate.wait_entered()
        from chongming_task.policies import Timeout

        waiting = controller.submit("quick", task_id="later", timeout=Timeout(idle=60))
        clock.advance(500)  # long in the queue: not "idle", the attempt has not started
        assert waiting.status is S.QUEUED
        gate.release.set()
        outcome = controller.wait("later", timeout=PATIENCE)
        assert outcome.ok
        assert path(waiting) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    finally:
        gate.release.set()
        controller.close(timeout=PATIENCE)


def test_s6_start_timeout_while_queued(gate: Any) -> None:
    from chongming_task import Controller

    clock = FakeClock()
    controller = Controller(max_parallel=1, clock=clock)
    try:
        controller.register("gate", gate)
        ran: list[str] = []
        controller.register("quick", lambda ctx: ran.append("ran"))
        controller.submit("gate", task_id="busy")
        gate.wait_entered()
        waiting = controller.submit("quick", task_id="late", timeout=the_timeout())
        clock.advance(31)  # start (30) expires before it ever got a slot
        gate.release.set()
        reach(waiting, S.FAILED, S.CANCELLED)
        snapshot = waiting.snapshot
        assert snapshot.failure is not None
        assert snapshot.failure.kind is FailureKind.TIMEOUT_START
        assert snapshot.failure.retryable is False
        assert ran == []  # the body never ran
    finally:
        gate.release.set()
        controller.close(timeout=PATIENCE)


def test_s6_start_timeout_fires_while_the_run_waits_in_the_queue(gate: Gate) -> None:
    """§6: ``start`` counts from submission, so a run starved in the queue times out."""
    clock = FakeClock()
    controller = Controller(max_parallel=1, clock=clock)
    try:
        controller.register("gate", gate)
        controller.register("quick", lambda ctx: "ok")
        controller.submit("gate", task_id="busy")
        gate.wait_entered()
        waiting = controller.submit("quick", task_id="late", timeout=Timeout(start=30))
        clock.advance(31)  # the slot is still taken
        wait_until(lambda: waiting.done, timeout=1.0, message="late to time out in the queue")
        assert waiting.snapshot.failure is not None
        assert waiting.snapshot.failure.kind is FailureKind.TIMEOUT_START
        assert waiting.snapshot.failure.retryable is False  # start counts from submission
        # Never started, holding no slot: it ends at once, without `stopping` (§9.2).
        assert path(waiting) == [S.PENDING, S.QUEUED, S.CANCELLED]
        assert waiting.transitions[-1].trigger == "supervisor:timeout_start"
        assert controller.queued_count == 0  # it left the queue with its end
    finally:
        gate.release.set()
        controller.close(timeout=5)
