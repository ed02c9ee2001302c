"""Retries and timeouts, all driven by a FakeClock: no test here waits for real time."""

from __future__ import annotations

import threading

import pytest

from _status import status_now
from chongming_task._model import FailureKind
from chongming_task.errors import TaskCancelled
from chongming_task.policies import ExponentialBackoff, FixedBackoff, Jitter, RetryPolicy, Timeout
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime._timers import TimerService
from chongming_task.testing import FakeClock, wait_until

from .helpers import (
    ATTEMPT,
    PATIENCE,
    START,
    TICK,
    S,
    Stuck,
    busy,
    failed_with,
    path,
    reach,
    settle,
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class Flaky:
    """Fails with ``error`` until attempt ``succeed_on`` (never, if None)."""

    def __init__(self, error: BaseException, succeed_on: int | None = None) -> None:
        self.error = error
        self.succeed_on = succeed_on
        self.attempts: list[int] = []

    def __call__(self, ctx: TaskContext) -> int:
        self.attempts.append(ctx.attempt)
        if self.succeed_on is not None and ctx.attempt >= self.succeed_on:
            return ctx.attempt
        raise self.error


# ---------------------------------------------------------------- retries


def test_backoff_waits_on_the_clock_and_attempts_are_exact(clock: FakeClock) -> None:
    body = Flaky(RuntimeError("transient"), succeed_on=3)
    policy = RetryPolicy(max_attempts=3, backoff=FixedBackoff(30))
    run = TaskRun(body, clock=clock, retry=policy)
    run.start()
    settle(clock, run, S.RETRY_WAIT)
    clock.advance(29.5)
    assert run.status is S.RETRY_WAIT
    assert body.attempts == [1]
    clock.advance(0.5)
    reach(run, S.RETRY_WAIT, attempt=2)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(30)
    outcome = run.wait(PATIENCE)
    assert outcome.value == 3
    assert outcome.snapshot.attempt == 3
    assert outcome.snapshot.max_attempts == 3
    assert body.attempts == [1, 2, 3]
    assert path(run) == [
        *START,
        *ATTEMPT,
        S.RETRY_WAIT,
        *ATTEMPT,
        S.RETRY_WAIT,
        *ATTEMPT,
        S.SUCCEEDED,
    ]
    waits = [t for t in run.transitions if t.to_status is S.RETRY_WAIT]
    assert [w.reason for w in waits] == ["retry in 30s: RuntimeError: transient"] * 2
    assert [w.attempt for w in waits] == [1, 2]


def test_retries_exhausted_fail_after_exactly_max_attempts(clock: FakeClock) -> None:
    body = Flaky(RuntimeError("always"))
    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)))
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert body.attempts == [1, 2, 3]
    assert outcome.snapshot.attempt == 3
    assert outcome.failure is not None
    assert outcome.failure.retryable is True  # the kind of error is retryable; the budget is out
    assert path(run) == [*START, *ATTEMPT, S.RETRY_WAIT, *ATTEMPT, S.RETRY_WAIT, *ATTEMPT, S.FAILED]


def test_exponential_backoff_delays_follow_the_policy(clock: FakeClock) -> None:
    body = Flaky(RuntimeError("transient"), succeed_on=4)
    backoff = ExponentialBackoff(base=1, factor=2, max_delay=300, jitter=Jitter.NONE)
    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=4, backoff=backoff))
    run.start()
    for attempt, delay in ((1, 1.0), (2, 2.0), (3, 4.0)):
        reach(run, S.RETRY_WAIT, attempt=attempt)
        clock.wait_for_sleepers(1, timeout=PATIENCE)
        clock.advance(delay - 0.01)
        assert run.snapshot.attempt == attempt
        clock.advance(0.01)
    assert run.wait(PATIENCE).value == 4


def test_give_up_on_wins_over_retry_on(clock: FakeClock) -> None:
    body = Flaky(ValueError("bad input"))
    policy = RetryPolicy(
        max_attempts=5, backoff=FixedBackoff(0), retry_on=(Exception,), give_up_on=(ValueError,)
    )
    run = TaskRun(body, clock=clock, retry=policy)
    run.start()
    outcome = run.wait(PATIENCE)
    assert body.attempts == [1]
    assert outcome.failure is not None
    assert outcome.failure.retryable is False
    assert path(run) == [*START, *ATTEMPT, S.FAILED]


def test_an_error_outside_retry_on_is_not_retried(clock: FakeClock) -> None:
    body = Flaky(KeyError("k"))
    policy = RetryPolicy(max_attempts=5, backoff=FixedBackoff(0), retry_on=(OSError,))
    run = TaskRun(body, clock=clock, retry=policy)
    run.start()
    assert run.wait(PATIENCE).status is S.FAILED
    assert body.attempts == [1]


def test_cancellation_is_never_retried(clock: FakeClock) -> None:
    policy = RetryPolicy(max_attempts=5, backoff=FixedBackoff(0), retry_on=(BaseException,))
    stopped = TaskRun(busy(), clock=clock, retry=policy)
    stopped.start()
    reach(stopped, S.RUNNING)
    stopped.stop(reason="enough")
    outcome = stopped.wait(PATIENCE)
    assert outcome.status is S.STOPPED
    assert outcome.snapshot.attempt == 1
    # A body that raises TaskCancelled on its own is cancelled, not retried either.
    body = Flaky(TaskCancelled("nested run was stopped"))
    raised = TaskRun(body, clock=clock, retry=policy)
    raised.start()
    assert raised.wait(PATIENCE).status is S.CANCELLED
    assert body.attempts == [1]
    assert path(raised) == [*START, *ATTEMPT, S.CANCELLED]


# ---------------------------------------------------------------- timeouts


def test_start_timeout_counts_from_submission(clock: FakeClock) -> None:
    ran = threading.Event()
    run = TaskRun(lambda ctx: ran.set(), clock=clock, timeout=Timeout(start=5))
    clock.advance(6)  # waited in some queue for too long
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_START
    assert outcome.failure.retryable is False
    assert not ran.is_set()
    assert path(run) == [*START, S.STARTING, S.FAILED]
    assert run.transitions[-1].trigger == "supervisor:timeout_start"


def test_start_timeout_is_void_once_the_body_runs(clock: FakeClock) -> None:
    gate = threading.Event()
    run = TaskRun(busy(gate), clock=clock, timeout=Timeout(start=5))
    run.start()
    reach(run, S.RUNNING)
    assert TimerService.for_clock(clock).pending == 0  # nothing left to watch
    clock.advance(100)
    assert run.status is S.RUNNING
    gate.set()
    assert run.wait(PATIENCE).ok


def test_attempt_timeout_asks_a_cooperative_body_to_stop(clock: FakeClock) -> None:
    run = TaskRun(busy(), clock=clock, timeout=Timeout(per_attempt=10))
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(9.99)
    assert run.status is S.RUNNING
    clock.advance(0.01)
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    assert outcome.failure.message == "attempt timeout of 10s expired"
    assert outcome.failure.retryable is True
    assert path(run) == [*START, *ATTEMPT, S.FAILED]
    assert run.transitions[-1].trigger == "supervisor:timeout_attempt"


def test_a_timed_out_attempt_is_retried(clock: FakeClock) -> None:
    def body(ctx: TaskContext) -> int:
        while ctx.attempt == 1:
            ctx.checkpoint()
            threading.Event().wait(TICK)
        return ctx.attempt

    policy = RetryPolicy(max_attempts=2, backoff=FixedBackoff(5))
    run = TaskRun(body, clock=clock, timeout=Timeout(per_attempt=10), retry=policy)
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(10)
    settle(clock, run, S.RETRY_WAIT)
    clock.advance(5)
    outcome = run.wait(PATIENCE)
    assert outcome.value == 2
    assert path(run) == [*START, *ATTEMPT, S.RETRY_WAIT, *ATTEMPT, S.SUCCEEDED]
    retry = run.transitions[4]
    assert (retry.to_status, retry.trigger) == (S.RETRY_WAIT, "supervisor:timeout_attempt")


def test_idle_timeout_measures_silence_since_the_last_beat(clock: FakeClock) -> None:
    steps = threading.Semaphore(0)
    beaten = threading.Event()
    body_ctx: list[TaskContext] = []

    def body(ctx: TaskContext) -> None:
        body_ctx.append(ctx)
        ctx.checkpoint()
        steps.acquire()
        ctx.heartbeat.beat()  # "still alive" before a long stretch
        beaten.set()
        steps.acquire()
        ctx.checkpoint()

    run = TaskRun(body, clock=clock, timeout=Timeout(idle=60))
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(50)
    steps.release()
    assert beaten.wait(PATIENCE)
    clock.advance(50)  # 100 since the start, 50 since the beat
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    assert not body_ctx[0].is_stop_requested
    clock.advance(10)
    reach_stop(body_ctx[0])
    steps.release()
    failed_with(run, FailureKind.TIMEOUT_IDLE)
    assert path(run) == [*START, *ATTEMPT, S.FAILED]


def reach_stop(ctx: TaskContext) -> None:
    wait_until(lambda: ctx.is_stop_requested, timeout=PATIENCE, message="the stop request")


def test_idle_and_attempt_timeouts_do_not_run_while_paused(clock: FakeClock) -> None:
    resumed = threading.Event()
    silent = threading.Event()
    hold = threading.Event()

    def body(ctx: TaskContext) -> None:
        while not resumed.is_set():  # checkpoints until paused and resumed once
            ctx.checkpoint()
            resumed.wait(TICK)
        silent.set()
        hold.wait(PATIENCE)  # then silence: no checkpoint any more
        ctx.checkpoint()

    run = TaskRun(body, clock=clock, timeout=Timeout(per_attempt=10, idle=5))
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(4)
    assert run.pause(timeout=PATIENCE)
    clock.advance(1000)
    assert run.status is S.PAUSED
    assert TimerService.for_clock(clock).pending == 0  # nothing is watched while paused
    resumed.set()
    assert run.resume()
    assert silent.wait(PATIENCE)  # the body left its checkpoint (its last beat) at 1004
    # Resuming refreshed the beat (idle restarts) and the pause did not count toward the
    # attempt: 4 s used, so the attempt budget ends 6 s from now, after idle (5 s).
    settle(clock, run, S.RUNNING)
    clock.advance(4.9)
    assert status_now(run) is S.RUNNING
    clock.advance(0.1)
    reach_stop_of(run)
    hold.set()
    failed_with(run, FailureKind.TIMEOUT_IDLE)
    assert path(run) == [*START, *ATTEMPT, S.PAUSING, S.PAUSED, S.RUNNING, S.FAILED]


def reach_stop_of(run: TaskRun) -> None:
    attempt = run._state.attempt
    assert attempt is not None
    wait_until(lambda: attempt.control.stop_requested, timeout=PATIENCE, message="a stop")


def test_paused_time_does_not_count_toward_the_attempt(clock: FakeClock) -> None:
    run = TaskRun(busy(), clock=clock, timeout=Timeout(per_attempt=10))
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(4)
    assert run.pause(timeout=PATIENCE)
    clock.advance(100)
    assert run.resume()
    settle(clock, run, S.RUNNING)
    clock.advance(5.9)
    assert run.status is S.RUNNING
    clock.advance(0.1)
    failed_with(run, FailureKind.TIMEOUT_ATTEMPT)


def test_the_earliest_scope_wins(clock: FakeClock) -> None:
    body = Stuck()
    run = TaskRun(body, clock=clock, timeout=Timeout(per_attempt=10, idle=3, total=20))
    run.start()
    ctx = body.wait_entered()
    settle(clock, run, S.RUNNING)
    clock.advance(3)
    reach_stop(ctx)
    body.release.set()
    failed_with(run, FailureKind.TIMEOUT_IDLE)


def test_total_timeout_spans_attempts_and_is_never_retried(clock: FakeClock) -> None:
    body = Flaky(RuntimeError("transient"))
    policy = RetryPolicy(max_attempts=10, backoff=FixedBackoff(30))
    run = TaskRun(body, clock=clock, timeout=Timeout(total=45), retry=policy)
    run.start()
    settle(clock, run, S.RETRY_WAIT)
    clock.advance(30)
    reach(run, S.RETRY_WAIT, attempt=2)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(15)  # total expires during the second backoff
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_TOTAL
    assert outcome.failure.retryable is False
    assert body.attempts == [1, 2]
    assert path(run) == [*START, *ATTEMPT, S.RETRY_WAIT, *ATTEMPT, S.RETRY_WAIT, S.FAILED]
    assert run.transitions[-1].trigger == "supervisor:timeout_total"


def test_total_timeout_inside_an_attempt_is_not_retried(clock: FakeClock) -> None:
    policy = RetryPolicy(max_attempts=3, backoff=FixedBackoff(0))
    run = TaskRun(busy(), clock=clock, timeout=Timeout(total=8), retry=policy)
    run.start()
    settle(clock, run, S.RUNNING)
    clock.advance(8)
    outcome = run.wait(PATIENCE)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_TOTAL
    assert outcome.snapshot.attempt == 1


def test_total_timeout_while_paused_cancels_the_run(clock: FakeClock) -> None:
    run = TaskRun(busy(), clock=clock, timeout=Timeout(total=50))
    run.start()
    settle(clock, run, S.RUNNING)
    assert run.pause(timeout=PATIENCE)
    settle(clock, run, S.PAUSED)  # only total is watched while paused
    clock.advance(50)
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.CANCELLED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_TOTAL
    assert path(run) == [*START, *ATTEMPT, S.PAUSING, S.PAUSED, S.CANCELLED]


def test_a_timeout_on_a_body_that_ignores_it_ends_lost(clock: FakeClock) -> None:
    body = Stuck()
    run = TaskRun(body, clock=clock, timeout=Timeout(per_attempt=10), graceful_stop=2)
    run.start()
    ctx = body.wait_entered()
    settle(clock, run, S.RUNNING)
    clock.advance(10)
    reach_stop(ctx)
    clock.wait_for_sleepers(1, timeout=PATIENCE)  # now the graceful window
    clock.advance(2)
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.LOST
    assert outcome.failure is not None
    assert "attempt timeout of 10s expired" in outcome.failure.message
    assert path(run) == [*START, *ATTEMPT, S.LOST]
    body.release.set()


def test_the_timer_thread_exists_only_while_something_is_due(clock: FakeClock) -> None:
    service = TimerService.for_clock(clock)
    gate = threading.Event()
    run = TaskRun(busy(gate), clock=clock, timeout=Timeout(per_attempt=100))
    run.start()
    settle(clock, run, S.RUNNING)
    assert service.pending == 1
    gate.set()
    run.wait(PATIENCE)
    assert service.pending == 0
    wait_until(lambda: clock.sleepers == 0, timeout=PATIENCE, message="the timer thread to leave")
