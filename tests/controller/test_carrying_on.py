"""The thread that finished a run carries the next one, unless anything could wait on it.

After a run's end frees its slot, the controller starts the next queued run once the
finished run's delivery is over; when nothing but the controller listens to the
finished run, the carrier thread that ran it keeps the next run for itself instead of
waking another thread and parking. Anything that could wait for the next run from
inside the finished one (a done callback, another listener) makes the controller
start it on another thread, as before, so nothing can wait on itself.
"""

from __future__ import annotations

import threading
from typing import Any

from chongming_task import Controller, InMemoryTaskStore
from chongming_task.runtime.context import TaskContext
from chongming_task.runtime.executors.carriers import SHARED

from ._helpers import Gate, S, path


def _recording(threads: dict[str, int]) -> Any:
    def body(ctx: TaskContext) -> str:
        threads[ctx.task_id] = threading.get_ident()
        return ctx.task_id

    return body


def test_queued_runs_are_carried_by_the_thread_that_freed_the_slot(gate: Gate) -> None:
    threads: dict[str, int] = {}
    with Controller(store=InMemoryTaskStore(), max_parallel=1) as controller:
        controller.register("hold", gate.hold)
        controller.register("record", _recording(threads))
        first = controller.submit("hold", task_id="first")
        queued = [controller.submit("record", task_id=f"next-{i}") for i in range(4)]
        assert all(run.status is S.QUEUED for run in queued)
        started_before = SHARED.started
        gate.open()
        assert first.wait(10).ok
        for run in queued:
            assert run.wait(10).ok
        # One thread carried all four, one after the other; no thread was started.
        assert len(set(threads.values())) == 1
        assert SHARED.started == started_before
        for run in queued:
            assert path(run.transitions) == [
                "pending",
                "queued",
                "starting",
                "running",
                "succeeded",
            ]


def test_a_done_callback_waiting_for_the_next_run_is_not_stuck_behind_it(gate: Gate) -> None:
    threads: dict[str, int] = {}
    seen: list[Any] = []
    with Controller(store=InMemoryTaskStore(), max_parallel=1) as controller:
        controller.register("hold", gate.hold)
        controller.register("record", _recording(threads))
        first = controller.submit("hold", task_id="first")
        second = controller.submit("record", task_id="second")
        # The callback runs on the first run's thread and waits for the second run:
        # the second must start elsewhere (and before the callback returns).
        first.add_done_callback(lambda run: seen.append(second.wait(10)))
        first_thread: list[int] = []
        first.add_done_callback(lambda run: first_thread.append(threading.get_ident()))
        gate.open()
        assert first.wait(10).ok
        assert second.wait(10).value == "second"
    assert len(seen) == 1
    assert seen[0].ok
    assert threads["second"] != first_thread[0]


def test_a_done_callback_may_submit_and_wait(gate: Gate) -> None:
    outcomes: list[Any] = []
    with Controller(store=InMemoryTaskStore(), max_parallel=1) as controller:
        controller.register("hold", gate.hold)
        controller.register("record", _recording({}))

        def follow_up(run: Any) -> None:
            outcomes.append(controller.submit("record", task_id="follow-up").wait(10))

        first = controller.submit("hold", task_id="first")
        first.add_done_callback(follow_up)
        gate.open()
        assert first.wait(10).ok
    assert len(outcomes) == 1
    assert outcomes[0].value == "follow-up"
