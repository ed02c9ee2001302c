"""Shared helpers for the runtime tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from chongming_task._model import Failure, FailureKind
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.states import TaskStatus
from chongming_task.testing import FakeClock, wait_until

S = TaskStatus

#: The trajectory of a run that simply succeeds.
HAPPY = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]

#: The transitions before a run's first attempt, and those of each attempt's start.
START = [S.PENDING, S.QUEUED]
ATTEMPT = [S.STARTING, S.RUNNING]

#: Real seconds a test waits for something that should take milliseconds.
PATIENCE = 10.0

#: One iteration of a "busy" body: long enough not to spin, short enough to be prompt.
TICK = 0.001


def path(run: TaskRun) -> list[TaskStatus]:
    """The ``to_status`` of every transition, oldest first."""
    return [record.to_status for record in run.transitions]


def triggers(run: TaskRun) -> list[str]:
    return [record.trigger for record in run.transitions]


def reach(run: TaskRun, *statuses: TaskStatus, attempt: int | None = None) -> None:
    """Wait (real time) until the run is in one of ``statuses`` (and ``attempt``)."""

    def reached() -> bool:
        snapshot = run.snapshot
        return snapshot.status in statuses and (attempt is None or snapshot.attempt == attempt)

    wait_until(reached, timeout=PATIENCE, message=f"{run.task_id} to reach {statuses}")


def settle(clock: FakeClock, run: TaskRun, *statuses: TaskStatus, sleepers: int = 1) -> None:
    """Wait until the run is in ``statuses`` and the runtime waits on the fake clock."""
    reach(run, *statuses)
    clock.wait_for_sleepers(sleepers, timeout=PATIENCE)


def failed_with(run: TaskRun, kind: FailureKind) -> Failure:
    """Wait for the end of ``run``, which failed with ``kind``; its failure."""
    outcome = run.wait(PATIENCE)
    assert outcome.failure is not None
    assert outcome.failure.kind is kind
    return outcome.failure


def busy(stop_when: threading.Event | None = None) -> Callable[[TaskContext], str]:
    """A body that checkpoints in a loop until ``stop_when`` is set (then returns)."""
    gate = stop_when or threading.Event()

    def body(ctx: TaskContext) -> str:
        while not gate.is_set():
            ctx.checkpoint()
            gate.wait(TICK)
        return "finished"

    return body


class Stuck:
    """A body that ignores checkpoints until released; records what it saw."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.ctx: TaskContext | None = None

    def __call__(self, ctx: TaskContext) -> str:
        self.ctx = ctx
        ctx.checkpoint()
        self.entered.set()
        self.release.wait(PATIENCE)
        ctx.checkpoint()
        return "released"

    def wait_entered(self) -> TaskContext:
        assert self.entered.wait(PATIENCE), "the body never started"
        assert self.ctx is not None
        return self.ctx
