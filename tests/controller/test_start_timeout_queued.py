"""``Timeout.start`` counts from submission, also while the run waits for a slot (§6).

The supervisor books the start deadline once a controller queues the run; it fires
only if the run is still ``queued`` then: a run that got its slot in time is never
touched again by it, and a pipeline node released after its deadline ends at once.
"""

from __future__ import annotations

import threading
from typing import Any

from _status import status_now
from chongming_task import Controller
from chongming_task._model import FailureKind
from chongming_task.policies import Timeout
from chongming_task.states import TaskStatus as S
from chongming_task.testing import FakeClock, wait_until


class Hold:
    """A body that runs until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, ctx: Any) -> str:
        self.entered.set()
        while not self.release.wait(0.002):
            ctx.checkpoint()
        return "held"


def _path(run: Any) -> list[S]:
    return [t.to_status for t in run.transitions]


def test_a_run_that_gets_its_slot_in_time_is_never_timed_out_later() -> None:
    clock = FakeClock()
    hold, late = Hold(), Hold()
    controller = Controller(max_parallel=1, clock=clock)
    try:
        controller.register("hold", hold)
        controller.register("late", late)
        controller.submit("hold", task_id="busy")
        assert hold.entered.wait(5)
        waiting = controller.submit("late", task_id="next", timeout=Timeout(start=30))
        clock.advance(20)
        assert waiting.status is S.QUEUED
        hold.release.set()  # the slot frees before the deadline
        assert late.entered.wait(5)
        clock.advance(20)  # past the start deadline: it started, so it no longer applies
        late.release.set()
        outcome = waiting.wait(timeout=5)
        assert outcome.status is S.SUCCEEDED
        assert _path(waiting) == [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    finally:
        hold.release.set()
        late.release.set()
        controller.close(timeout=5)


def test_a_pipeline_node_released_after_its_start_deadline_ends_without_running() -> None:
    clock = FakeClock()
    ran: list[str] = []
    controller = Controller(max_parallel=2, clock=clock)
    try:
        controller.register("node", lambda ctx: ran.append("ran"))
        node = controller.submit("node", task_id="n", blocked=True, timeout=Timeout(start=30))
        clock.advance(31)  # blocked on upstream: not judged yet (holds no slot, not queued)
        assert node.status is S.BLOCKED
        node.release()
        wait_until(lambda: node.done, timeout=5, message="the expired node to end")
        assert status_now(node) is S.CANCELLED
        assert node.snapshot.failure is not None
        assert node.snapshot.failure.kind is FailureKind.TIMEOUT_START
        assert ran == []
        assert _path(node) == [S.PENDING, S.BLOCKED, S.QUEUED, S.CANCELLED]
    finally:
        controller.close(timeout=5)
