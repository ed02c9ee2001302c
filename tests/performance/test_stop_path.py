"""The short stop path (W4 of bench/) keeps every guarantee of a stop.

A stop honoured at a checkpoint no longer formats the ``TaskCancelled`` traceback
(no failure of a stop carries one); everything a stop records is checked here: the
order of the transitions, the failure, and that ``wait()`` returns only once the
body has really ended. (The ProcessExecutor's stop is covered by
``tests/runtime/test_process.py``.)
"""

from __future__ import annotations

import threading

from chongming_task._model import FailureKind
from chongming_task.errors import TaskCancelled
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.runtime._failures import end_traceback
from chongming_task.runtime.executors.inline import InlineExecutor
from chongming_task.runtime.executors.thread import ThreadExecutor
from chongming_task.states import TaskStatus

S = TaskStatus
PATIENCE = 10.0
STOPPED = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED]


def _path(run: TaskRun) -> list[TaskStatus]:
    return [record.to_status for record in run.transitions]


def test_end_traceback_skips_only_a_checkpoints_cancellation() -> None:
    assert end_traceback(TaskCancelled("asked", "stop")) is None
    try:
        raise ValueError("boom")
    except ValueError as exc:
        text = end_traceback(exc)
    assert text is not None
    assert "ValueError: boom" in text


def test_thread_stop_records_stopping_then_stopped_after_the_body_ended() -> None:
    looping = threading.Event()
    ended = threading.Event()

    def body(ctx: TaskContext) -> None:
        try:
            while True:
                ctx.checkpoint()
                looping.set()
                threading.Event().wait(0.001)
        finally:
            ended.set()

    run = TaskRun(body, task_id="stop-path-thread", executor=ThreadExecutor())
    run.start()
    assert looping.wait(PATIENCE)
    assert run.stop("enough", actor="tester")
    outcome = run.wait(PATIENCE)
    assert ended.is_set()  # the body's own finally ran before wait() returned
    assert outcome.status is S.STOPPED
    assert _path(run) == STOPPED
    stopping, stopped = run.transitions[-2:]
    assert stopping.actor == "tester"
    assert stopped.reason == "stopped at a checkpoint"
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.message == "stop requested: enough"
    assert outcome.failure.traceback is None


def test_a_failing_body_still_records_its_traceback() -> None:
    def body(ctx: TaskContext) -> None:
        raise RuntimeError("really broken")

    run = TaskRun(body, task_id="stop-path-fails", executor=InlineExecutor())
    run.start()
    outcome = run.wait(PATIENCE)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.traceback is not None
    assert "RuntimeError: really broken" in outcome.failure.traceback
