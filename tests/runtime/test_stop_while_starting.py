"""A person's stop that lands while the run is ``starting`` is answered by the body.

``Controller.submit()`` returns while the run is ``starting`` (its carrier may not have
begun yet), so guide §4.5's "submit, stop, wait -> succeeded, value = batches" must
not depend on which thread was quicker. A stop is a request (§4.4): the body runs,
sees ``ctx.is_stop_requested`` and returns what it has, or stops at its first
checkpoint. A cancel or an expired start timeout still ends the run before its body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from _status import status_now
from chongming_task import TaskRun
from chongming_task._model import FailureKind
from chongming_task.runtime.executors._process import ProcessExecutor
from chongming_task.runtime.executors.thread import ThreadExecutor
from chongming_task.states import TaskStatus as S
from chongming_task.testing import GatedExecutor

from .proc_tasks import until_stop_requested


def _path(run: TaskRun) -> list[S]:
    return [t.to_status for t in run.transitions]


def _stopped_while_starting(fn: Callable[..., Any], inner: Any) -> TaskRun:
    executor = GatedExecutor(inner)
    run = TaskRun(fn, executor=executor, graceful_stop=10)
    run.start()
    assert run.status is S.STARTING
    assert run.stop("release window") is True
    assert status_now(run) is S.STOPPING
    executor.go.set()
    return run


@pytest.mark.parametrize("inner", [ThreadExecutor, ProcessExecutor], ids=["thread", "process"])
def test_a_body_that_returns_on_request_succeeds_with_its_value(inner: Any) -> None:
    run = _stopped_while_starting(until_stop_requested, inner())
    outcome = run.wait(timeout=30)
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, 0)
    assert _path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.STOPPING, S.SUCCEEDED]
    assert run.transitions[3].reason == "release window"


def test_a_body_that_checkpoints_first_ends_stopped_after_it_began() -> None:
    began: list[str] = []

    def body(ctx: Any) -> None:
        began.append(ctx.task_id)
        while True:
            ctx.checkpoint()

    run = _stopped_while_starting(body, ThreadExecutor())
    outcome = run.wait(timeout=30)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert began == [run.task_id]  # the body ran, up to its first checkpoint
    assert _path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.STOPPING, S.STOPPED]


def test_a_cancel_while_starting_never_runs_the_body() -> None:
    began: list[str] = []
    executor = GatedExecutor(ThreadExecutor())
    run = TaskRun(lambda ctx: began.append("ran"), executor=executor)
    run.start()
    assert run.cancel(reason="upstream failed") is True
    executor.go.set()
    outcome = run.wait(timeout=30)
    assert outcome.status is S.CANCELLED
    assert began == []
    assert _path(run) == [S.PENDING, S.QUEUED, S.STARTING, S.CANCELLED]
