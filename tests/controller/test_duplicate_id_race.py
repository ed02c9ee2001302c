"""Two submissions racing with one task id: one wins, the other is refused, nothing leaks.

``submit`` checks the id before it builds the run, which takes a while (signature,
executor check, state machine). Another thread may submit the same id in that window.
The loser must be refused without touching the winner: an earlier build overwrote the
winner's place in the dispatcher and, once the store refused the loser, dropped it,
so the winner's slot was never given back and the controller ran one task fewer at a
time for the rest of its life.
"""

from __future__ import annotations

import threading

import pytest

from chongming_task import ConfigurationError, Controller, InMemoryTaskStore
from chongming_task.runtime.attempt import TaskCall
from chongming_task.runtime.context import TaskContext
from chongming_task.runtime.executors.thread import ThreadExecutor

from ._helpers import path


class _PausingCheck(ThreadExecutor):
    """Holds the first submission of ``slow_id`` inside its executor check until told."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.proceed = threading.Event()
        self._first = True
        self._lock = threading.Lock()

    def check(self, call: TaskCall) -> None:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.entered.set()
            assert self.proceed.wait(10)


@pytest.mark.parametrize("queued_behind", [False, True])
def test_the_loser_of_a_race_on_one_id_is_refused_and_the_winner_keeps_its_slot(
    queued_behind: bool,
) -> None:
    executor = _PausingCheck()
    release = threading.Event()
    finish = threading.Event()

    def body(ctx: TaskContext) -> str:
        assert finish.wait(10)  # still running when the loser is refused
        return "done"

    def blocker(ctx: TaskContext) -> str:
        assert release.wait(10)
        return "released"

    with Controller(store=InMemoryTaskStore(), max_parallel=1, executor=executor) as controller:
        controller.register("body", body)
        controller.register("blocker", blocker)
        errors: list[BaseException] = []

        def first() -> None:
            try:
                controller.submit("body", task_id="same")
            except BaseException as exc:  # the assertion below names it
                errors.append(exc)

        loser = threading.Thread(target=first)
        loser.start()
        assert executor.entered.wait(10)  # the loser passed the id check, is building
        if queued_behind:
            blocking = controller.submit("blocker", task_id="blocker")
        winner = controller.submit("body", task_id="same")
        executor.proceed.set()
        loser.join(10)
        assert not loser.is_alive()
        assert len(errors) == 1
        assert isinstance(errors[0], ConfigurationError)
        assert "'same' already exists" in str(errors[0])
        finish.set()
        if queued_behind:
            release.set()
            assert blocking.wait(10).value == "released"
        assert winner.wait(10).value == "done"
        assert path(winner.transitions) == ["pending", "queued", "starting", "running", "succeeded"]
        assert controller.get("same") is not None
        # The winner's slot came back: the next task runs (max_parallel=1).
        after = controller.submit("body", task_id="after")
        assert after.wait(10).value == "done"
        assert [run.task_id for run in controller.runs()].count("same") == 1


def test_a_batch_that_loses_a_race_on_one_id_submits_nothing() -> None:
    executor = _PausingCheck()
    store = InMemoryTaskStore()
    with Controller(store=store, max_parallel=2, executor=executor) as controller:
        controller.register("body", lambda ctx: "done")
        errors: list[BaseException] = []

        def batch() -> None:
            try:
                controller.submit_many("body", [(), ()], task_ids=["mine", "same"])
            except BaseException as exc:  # the assertion below names it
                errors.append(exc)

        loser = threading.Thread(target=batch)
        loser.start()
        assert executor.entered.wait(10)  # ids checked, the first run is being built
        winner = controller.submit("body", task_id="same")
        executor.proceed.set()
        loser.join(10)
        assert not loser.is_alive()
        assert len(errors) == 1
        assert isinstance(errors[0], ConfigurationError)
        assert "call 1" in str(errors[0])
        assert "nothing was submitted" in str(errors[0])
        assert winner.wait(10).value == "done"
        # All or nothing: the batch's other run was neither held nor stored.
        assert controller.get("mine") is None
        assert store.get("mine") is None
        assert [run.task_id for run in controller.runs()] == ["same"]
