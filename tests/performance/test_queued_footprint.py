"""A queued run stays small: no thread, no Event, no deque until it needs one."""

from __future__ import annotations

import gc
import threading
import tracemalloc

import pytest

from chongming_task import Controller, TaskContext
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

pytestmark = pytest.mark.timeout(60)

S = TaskStatus
QUEUED = 400
#: Generous: about 2.9 KB are measured on CPython 3.11; 100,000 queued runs must fit
#: in 300 MB (W5 of bench/), so a regression past this bound is worth a look.
BYTES_PER_QUEUED_RUN = 4_500


def test_queued_runs_hold_no_thread_event_or_deque() -> None:
    gate = threading.Event()

    def hold(ctx: TaskContext) -> None:
        while not gate.wait(0.01):
            ctx.checkpoint()

    controller = Controller(max_parallel=1)
    controller.register("hold", hold)
    controller.register("noop", lambda ctx: None)
    controller.submit("hold", task_id="holder")
    wait_until(lambda: controller.active_count == 1, timeout=10)
    threads = threading.active_count()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        runs = [controller.submit("noop", task_id=f"q{n}") for n in range(QUEUED)]
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown / QUEUED < BYTES_PER_QUEUED_RUN
    assert threading.active_count() <= threads + 1  # at most the write/event helpers
    for run in runs:
        state = run._state
        assert run.status is S.QUEUED
        assert state._wake is None
        assert state._logs is None
        assert state.outbox._done_waiters is None
        assert state.outbox._state_lock is state.lock
    gate.set()
    outcomes = controller.wait_all(timeout=30)
    assert all(outcome.ok for outcome in outcomes)
    assert [t.to_status for t in runs[0].transitions] == [
        S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED,
    ]  # fmt: skip
    controller.close()
