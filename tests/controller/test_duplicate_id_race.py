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
from collections.abc import Callable

import pytest

from chongming_task import Controller, InMemoryTaskStore, TaskRun
from chongming_task.errors import ConfigurationError
from chongming_task.runtime._attempt import TaskCall
from chongming_task.runtime._context import TaskContext
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


def _race(
    executor: _PausingCheck,
    loser: Callable[[], object],
    during: Callable[[], TaskRun],
) -> tuple[ConfigurationError, TaskRun]:
    """Run ``loser`` in a thread until it is inside its first run's build, call ``during``
    (the winning submission), let the loser go on; its error and the winner's run."""
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            loser()
        except BaseException as exc:  # the caller's assertions name it
            errors.append(exc)

    thread = threading.Thread(target=attempt)
    thread.start()
    assert executor.entered.wait(10)  # the loser passed the id check and is building
    winner = during()
    executor.proceed.set()
    thread.join(10)
    assert not thread.is_alive()
    assert len(errors) == 1
    error = errors[0]
    assert isinstance(error, ConfigurationError)
    return error, winner


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
        blocking: list[TaskRun] = []

        def winning() -> TaskRun:
            if queued_behind:
                blocking.append(controller.submit("blocker", task_id="blocker"))
            return controller.submit("body", task_id="same")

        error, winner = _race(executor, lambda: controller.submit("body", task_id="same"), winning)
        assert "'same' already exists" in str(error)
        finish.set()
        if queued_behind:
            release.set()
            assert blocking[0].wait(10).value == "released"
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
        error, winner = _race(
            executor,
            lambda: controller.submit_many("body", [(), ()], task_ids=["mine", "same"]),
            lambda: controller.submit("body", task_id="same"),
        )
        assert "call 1" in str(error)
        assert "nothing was submitted" in str(error)
        assert winner.wait(10).value == "done"
        # All or nothing: the batch's other run was neither held nor stored.
        assert controller.get("mine") is None
        assert store.get("mine") is None
        assert [run.task_id for run in controller.runs()] == ["same"]
