"""Retries and timeouts, on a FakeClock so the minutes pass in milliseconds (guide §5, §6).

- ``RetryPolicy``: attempts are counted exactly, backoff waits on the injected clock,
  ``give_up_on`` wins over ``retry_on``, a stop is never retried.
- ``Timeout``: ``start``/``per_attempt``/``idle``/``total`` are independent and the
  earliest wins; an expired timeout asks the task to stop and records ``timeout_*``;
  ``idle`` never counts while paused.

    python examples/03_retries_and_timeouts.py
"""

from __future__ import annotations

import threading

from chongming_task import (
    ExponentialBackoff,
    FixedBackoff,
    Jitter,
    RetryPolicy,
    TaskContext,
    TaskRun,
    TaskStatus,
    Timeout,
)
from chongming_task.testing import FakeClock, wait_until

S = TaskStatus


def flaky(ctx: TaskContext) -> int:
    """Fails twice with a transient error, then succeeds."""
    if ctx.attempt < 3:
        raise ConnectionError("upstream busy")
    return ctx.attempt


def bad_input(ctx: TaskContext) -> None:
    raise ValueError("column 'amount' is missing")


def wait_for_deadline(clock: FakeClock, run: TaskRun, status: S, attempt: int) -> None:
    """Until the run is in ``status`` and the runtime waits on the clock."""
    wait_until(lambda: run.snapshot.status is status and run.snapshot.attempt == attempt)
    clock.wait_for_sleepers(1)


def main() -> None:
    clock = FakeClock()
    backoff = ExponentialBackoff(base=10, factor=2, max_delay=300, jitter=Jitter.NONE)
    run = TaskRun(flaky, clock=clock, retry=RetryPolicy(max_attempts=5, backoff=backoff))
    run.start()
    for attempt, delay in ((1, 10), (2, 20)):
        wait_for_deadline(clock, run, S.RETRY_WAIT, attempt)
        print(f"attempt {attempt} failed: {run.snapshot.failure.message}; waiting {delay}s")
        clock.advance(delay)  # no real waiting
    outcome = run.wait(timeout=10)
    print("flaky:", outcome.status.value, "after", outcome.snapshot.attempt, "attempts")
    assert outcome.value == 3
    assert [t.to_status for t in run.transitions].count(S.RETRY_WAIT) == 2

    policy = RetryPolicy(
        max_attempts=5, backoff=FixedBackoff(0), retry_on=(Exception,), give_up_on=(ValueError,)
    )
    run = TaskRun(bad_input, clock=clock, retry=policy)
    run.start()
    outcome = run.wait(timeout=10)
    print("bad_input:", outcome.status.value, "after", outcome.snapshot.attempt, "attempt")
    assert outcome.snapshot.attempt == 1  # give_up_on wins over retry_on

    # idle: silence since the last checkpoint. This body goes quiet after one checkpoint.
    quiet = threading.Event()
    release = threading.Event()
    contexts: list[TaskContext] = []

    def goes_quiet(ctx: TaskContext) -> None:
        contexts.append(ctx)
        ctx.checkpoint()
        quiet.set()
        release.wait(10)  # a hung connection: no checkpoint for a long time
        ctx.checkpoint()  # raises: the idle timeout asked for a stop

    run = TaskRun(goes_quiet, clock=clock, timeout=Timeout(per_attempt=600, idle=60))
    run.start()
    assert quiet.wait(10)
    clock.wait_for_sleepers(1)
    clock.advance(60)
    wait_until(lambda: contexts[0].is_stop_requested)  # the timeout asked it to stop
    release.set()
    outcome = run.wait(timeout=10)
    assert outcome.failure is not None
    print("goes_quiet:", outcome.status.value, "-", outcome.failure.message)
    assert outcome.failure.kind.value == "timeout_idle"
    assert outcome.failure.retryable is True  # timeouts are usually transient

    # total spans attempts and backoffs, and is never retried.
    retry = RetryPolicy(max_attempts=5, backoff=FixedBackoff(20))
    run = TaskRun(flaky, clock=clock, timeout=Timeout(total=25), retry=retry)
    run.start()
    wait_for_deadline(clock, run, S.RETRY_WAIT, 1)
    clock.advance(20)
    wait_for_deadline(clock, run, S.RETRY_WAIT, 2)
    clock.advance(5)
    outcome = run.wait(timeout=10)
    assert outcome.failure is not None
    print("total:", outcome.status.value, "-", outcome.failure.kind.value)
    assert outcome.failure.kind.value == "timeout_total"
    assert outcome.failure.retryable is False
    print("ok")


if __name__ == "__main__":
    main()
