"""Testing your own tasks without sleeping (guide §12).

Three tools make task tests fast and deterministic:

- ``FakeClock``: injected with ``clock=``; time moves only on ``advance()``. Every
  deadline (timeouts, backoff, graceful windows, pause confirmation) is watched by
  one timer thread per clock, so ``clock.wait_for_sleepers(1)`` means "the runtime is
  now waiting for its next deadline": advance after that, never before.
- ``InlineExecutor``: the body runs inside ``start()``, in the test's thread.
- ``RetryPolicy(backoff=FixedBackoff(0))``: retries without waiting.

And assert the whole ``run.transitions``, not just the final status.

    python examples/05_testing_with_fake_clock.py
"""

from __future__ import annotations

import threading

from chongming_task import (
    FixedBackoff,
    InlineExecutor,
    RetryPolicy,
    TaskContext,
    TaskRun,
    TaskStatus,
    Timeout,
)
from chongming_task.testing import FakeClock, wait_until

S = TaskStatus


def sync_tenant(ctx: TaskContext, tenant: str) -> str:
    """The task under test: fails once (a transient error), then succeeds."""
    ctx.checkpoint()
    if ctx.attempt == 1:
        raise ConnectionError("database restarting")
    return f"{tenant} synced"


def test_retry_path_inline() -> None:
    run = TaskRun(
        sync_tenant,
        ("tenant-a",),
        executor=InlineExecutor(),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
    )
    run.start()  # inline: returns when the run is over
    assert run.outcome is not None
    assert run.outcome.value == "tenant-a synced"
    assert [t.to_status for t in run.transitions] == [
        S.PENDING,
        S.QUEUED,
        S.STARTING,
        S.RUNNING,
        S.RETRY_WAIT,
        S.STARTING,
        S.RUNNING,
        S.SUCCEEDED,
    ]


def test_backoff_of_five_minutes_in_a_millisecond() -> None:
    clock = FakeClock()
    run = TaskRun(
        sync_tenant,
        ("tenant-b",),
        clock=clock,
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(300)),
    )
    run.start()
    wait_until(lambda: run.status is S.RETRY_WAIT)
    clock.wait_for_sleepers(1)  # the runtime waits for the end of the backoff
    clock.advance(299)
    assert run.status is S.RETRY_WAIT
    clock.advance(1)
    assert run.wait(timeout=5).value == "tenant-b synced"


def test_idle_timeout_fires_without_waiting() -> None:
    clock = FakeClock()
    contexts: list[TaskContext] = []
    hung = threading.Event()

    def hangs(ctx: TaskContext) -> None:
        contexts.append(ctx)
        ctx.heartbeat.beat()
        hung.wait(5)  # stuck in I/O: no checkpoint
        ctx.checkpoint()

    run = TaskRun(hangs, clock=clock, timeout=Timeout(idle=60))
    run.start()
    wait_until(lambda: bool(contexts))
    clock.wait_for_sleepers(1)
    clock.advance(60)
    wait_until(lambda: contexts[0].is_stop_requested)
    hung.set()
    outcome = run.wait(timeout=5)
    assert outcome.failure is not None
    assert outcome.failure.kind.value == "timeout_idle"
    assert [t.to_status for t in run.transitions][-2:] == [S.RUNNING, S.FAILED]


def main() -> None:
    for test in (
        test_retry_path_inline,
        test_backoff_of_five_minutes_in_a_millisecond,
        test_idle_timeout_fires_without_waiting,
    ):
        test()
        print("passed:", test.__name__)
    print("ok")


if __name__ == "__main__":
    main()
