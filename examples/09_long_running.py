"""Resident (endless) tasks: how to start them, pause them, and stop them (guide §4.5).

Part 1 runs the guide's ``worker`` through a Controller: pause/resume for "hold on a
moment", stop for "we are done" -- and the stop ends in ``succeeded`` with the number
of batches, because the body checks ``ctx.is_stop_requested`` and returns.

Part 2 shows the three ways a body can meet a stop request, and the three different
final states they produce: ``stopped`` (it let ``checkpoint()`` raise), ``succeeded``
(it returned on ``is_stop_requested``) and ``lost`` (it never calls ``checkpoint()``:
the thread cannot be stopped and keeps running in the background).

    python examples/09_long_running.py
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from chongming_task import Controller, SqliteTaskStore, TaskContext, TaskStatus, render_table, task
from chongming_task.testing import wait_until

S = TaskStatus


@task
def worker(ctx: TaskContext, source: str) -> int:
    processed = 0
    while not ctx.is_stop_requested:  # the graceful way to finish
        ctx.checkpoint()  # without it the task cannot be stopped
        processed += 1
        ctx.progress(processed, unit="batch")
        time.sleep(0.02)
    ctx.log(f"stop requested; processed {processed} batches this time")
    return processed  # a normal return: succeeded, value kept


@task
def abort_at_checkpoint(ctx: TaskContext) -> None:
    """``while True: ctx.checkpoint()``: the stop raises TaskCancelled -> stopped."""
    while True:
        ctx.checkpoint()
        time.sleep(0.01)


#: Lets the deaf task end at the very end of the demo (it ignores every stop).
deaf_may_exit = threading.Event()


@task
def deaf(ctx: TaskContext) -> None:
    """Never calls checkpoint(): not slow to stop -- impossible to stop."""
    while not deaf_may_exit.is_set():
        time.sleep(0.01)


def part_one(db: Path) -> None:
    print("== the guide's worker: pause, resume, stop ==")
    store = SqliteTaskStore(db)
    controller = Controller(store=store, owner="node-a")
    controller.register_all(worker)
    run = controller.submit("worker", "kafka://orders", task_id="orders-worker")
    wait_until(lambda: run.snapshot.progress is not None)

    assert controller.pause("orders-worker") is True  # confirmed: it holds at a checkpoint
    held = run.snapshot.progress
    assert held is not None
    assert controller.active_count == 1  # a paused task keeps its slot
    assert controller.resume("orders-worker") is True
    wait_until(lambda: run.snapshot.progress.done > held.done + 2)  # type: ignore[union-attr]

    controller.stop("orders-worker", reason="release window")  # the end
    outcome = controller.wait("orders-worker", timeout=10)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value > held.done
    print(f"orders-worker: {outcome.status.value}, value={outcome.value} batches")
    print(" -> ".join(t.to_status.value for t in run.transitions))
    assert [t.to_status.value for t in run.transitions] == [
        "pending",
        "queued",
        "starting",
        "running",
        "pausing",
        "paused",
        "running",
        "stopping",
        "succeeded",
    ]
    # A stopped task cannot be restarted: resubmit under a new task id.
    assert controller.resume("orders-worker") is False
    controller.close(close_store=True)


def part_two() -> None:
    print("\n== three bodies, three endings ==")
    controller = Controller(graceful_stop=0.3)  # a short grace window for the demo
    controller.register_all(worker, abort_at_checkpoint, deaf)
    runs = {
        "abort": controller.submit("abort_at_checkpoint", task_id="abort"),
        "graceful": controller.submit("worker", "kafka://x", task_id="graceful"),
        "deaf": controller.submit("deaf", task_id="deaf"),
    }
    wait_until(lambda: all(run.status is S.RUNNING for run in runs.values()))
    assert controller.stop_all(reason="demo") == 3  # requests issued, not "stopped"
    outcomes = {name: run.wait(10) for name, run in runs.items()}
    print(render_table(controller.list_tasks()))

    assert outcomes["abort"].status is S.STOPPED  # stopped at once, no value
    assert outcomes["abort"].value is None
    assert outcomes["graceful"].status is S.SUCCEEDED  # finished its batch, value kept
    assert isinstance(outcomes["graceful"].value, int)
    deaf_outcome = outcomes["deaf"]
    assert deaf_outcome.status is S.LOST  # result unknown: the thread still runs
    assert deaf_outcome.failure is not None
    assert deaf_outcome.failure.retryable
    assert any(t.name.startswith("chongming-task:deaf") for t in threading.enumerate())
    deaf_may_exit.set()  # only the body itself can end it (or ending the process)
    controller.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as directory:
        part_one(Path(directory) / "tasks.db")
    part_two()
    print("\nok")
