"""Controlling a run: stop in three phases, pause and resume (guide §4).

- A task that reaches its checkpoint after a stop request ends ``stopped``.
- A task that checks ``ctx.is_stop_requested`` and returns ends ``succeeded`` with
  its value: "please finish up", not "abort".
- A thread that never reaches a checkpoint cannot be killed: after the graceful
  window the run says ``lost`` (result unknown), never "stopped".
- ``pause()`` returns True only once the body is suspended at a checkpoint; it keeps
  its slot; ``resume()`` carries on in place.

    python examples/02_stop_and_pause.py
"""

from __future__ import annotations

import threading
import time

from chongming_task import TaskContext, TaskRun, TaskStatus
from chongming_task.testing import wait_until

S = TaskStatus


def forever(ctx: TaskContext) -> None:
    """Aborts at the checkpoint after a stop request: ends ``stopped``."""
    while True:
        ctx.checkpoint()
        time.sleep(0.01)


def worker(ctx: TaskContext) -> int:
    """Finishes its batch and returns what it did: ends ``succeeded``."""
    processed = 0
    while not ctx.is_stop_requested:
        ctx.checkpoint()
        processed += 1
        ctx.progress(processed, unit="batch")
        time.sleep(0.01)
    return processed


released = threading.Event()


def deaf(ctx: TaskContext) -> None:
    """Never calls checkpoint(): nothing can stop this thread."""
    released.wait(10)


def statuses(run: TaskRun) -> list[str]:
    return [record.to_status.value for record in run.transitions]


def main() -> None:
    run = TaskRun(forever, task_id="forever")
    run.start()
    wait_until(lambda: run.status is S.RUNNING)
    assert run.pause(timeout=5) is True  # confirmed: suspended at a checkpoint
    print("paused:", run.status.value)
    assert run.status is S.PAUSED
    assert run.resume() is True
    assert run.stop(reason="release window") is True  # a request, returns at once
    outcome = run.wait(timeout=10)
    print("forever:", " -> ".join(statuses(run)))
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.retryable is False
    assert statuses(run)[-6:] == [
        "running",
        "pausing",
        "paused",
        "running",
        "stopping",
        "stopped",
    ]

    run = TaskRun(worker, task_id="worker")
    run.start()
    wait_until(lambda: run.snapshot.progress is not None)
    run.stop(reason="release window")
    outcome = run.wait(timeout=10)
    print("worker:", outcome.status.value, "value =", outcome.value)
    assert outcome.status is S.SUCCEEDED  # stopping -> succeeded: a stop is a request
    assert statuses(run)[-2:] == ["stopping", "succeeded"]
    assert outcome.value >= 1

    run = TaskRun(deaf, task_id="deaf", graceful_stop=0.2)
    run.start()
    wait_until(lambda: run.status is S.RUNNING)
    assert run.pause(timeout=0.2) is False  # not confirmed: rolled back, not faked
    assert run.transitions[-1].trigger == "runtime:pause_aborted"
    run.stop(reason="release window")
    outcome = run.wait(timeout=10)
    print("deaf:", outcome.status.value, "-", outcome.failure.message if outcome.failure else "")
    assert outcome.status is S.LOST
    assert outcome.failure is not None
    assert outcome.failure.retryable is True
    released.set()  # the abandoned thread was still there; let it end
    print("ok")


if __name__ == "__main__":
    main()
