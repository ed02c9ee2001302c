"""A body never begins before its ``-> starting`` reached the run's listeners.

The controller stores ``-> starting`` in its listener, and that write is what lets
``reconcile`` say "lost" (result unknown) instead of "adoptable" (never ran) after a
crash. A queue owner may start a run from inside a delivery of that same run (its
``-> queued`` frees it, the listener pumps, the pump starts it); the delivery in
progress then holds the new records back, so the launch must wait for them too.
"""

from __future__ import annotations

import threading

from chongming_task import InlineExecutor, TaskRun, ThreadExecutor
from chongming_task._model import TaskSnapshot, Transition
from chongming_task.runtime._context import TaskContext
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

S = TaskStatus


def _run_started_from_its_own_delivery(executor: object) -> tuple[TaskRun, list[list[str]]]:
    heard: list[str] = []
    heard_when_body_began: list[list[str]] = []

    def body(ctx: TaskContext) -> str:
        heard_when_body_began.append(list(heard))
        return "ok"

    run = TaskRun(body, executor=executor)  # type: ignore[arg-type]

    def record(transition: Transition, snapshot: TaskSnapshot) -> None:
        heard.append(transition.to_status.value)

    def pump(transition: Transition, snapshot: TaskSnapshot) -> None:
        if transition.to_status is S.QUEUED:
            run.start()  # inside the delivery of this run's own -> queued

    run.add_listener(pump)
    run.add_listener(record)
    run.enqueue()
    return run, heard_when_body_began


def test_inline_body_waits_for_starting_to_be_delivered() -> None:
    run, seen = _run_started_from_its_own_delivery(InlineExecutor())
    assert run.wait(10).value == "ok"
    assert seen == [["queued", "starting"]]
    assert [t.to_status.value for t in run.transitions] == [
        "pending",
        "queued",
        "starting",
        "running",
        "succeeded",
    ]


def test_thread_body_waits_for_starting_to_be_delivered() -> None:
    run, seen = _run_started_from_its_own_delivery(ThreadExecutor())
    assert run.wait(10).value == "ok"
    assert len(seen) == 1
    assert seen[0][:2] == ["queued", "starting"]


def test_a_start_while_another_thread_delivers_launches_after_that_delivery() -> None:
    in_listener = threading.Event()
    let_go = threading.Event()
    heard: list[str] = []
    began_after: list[list[str]] = []

    def body(ctx: TaskContext) -> None:
        began_after.append(list(heard))

    run = TaskRun(body, executor=ThreadExecutor())

    def slow(transition: Transition, snapshot: TaskSnapshot) -> None:
        heard.append(transition.to_status.value)
        if transition.to_status is S.QUEUED:
            in_listener.set()
            assert let_go.wait(10)

    run.add_listener(slow)
    enqueuer = threading.Thread(target=run.enqueue)
    enqueuer.start()
    assert in_listener.wait(10)
    # Another thread starts the run while the enqueuer still delivers -> queued: the
    # -> starting record waits behind it, and so do the body and start() itself
    # (it returns only once its -> starting reached the listeners).
    starter = threading.Thread(target=run.start)
    starter.start()
    wait_until(lambda: run.status is S.STARTING, timeout=10, message="-> starting taken")
    assert began_after == []
    assert starter.is_alive()
    assert heard == ["queued"]
    let_go.set()
    enqueuer.join(10)
    starter.join(10)
    assert not starter.is_alive()
    assert run.wait(10).ok
    assert began_after[0][:2] == ["queued", "starting"]
