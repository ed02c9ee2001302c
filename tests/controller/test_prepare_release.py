"""``prepare_release`` gets ready for a release due shortly and changes nothing else."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from chongming_task import Controller, InMemoryTaskStore
from chongming_task.runtime.attempt import Attempt, AttemptEnd, TaskCall
from chongming_task.runtime.context import TaskContext
from chongming_task.runtime.executors.thread import ThreadExecutor

from ._helpers import S


class Preparing(ThreadExecutor):
    """A thread executor that records what it was asked to prepare."""

    def __init__(self, *, fail: bool = False) -> None:
        self.prepared: list[int] = []
        self.fail = fail

    def prepare_launches(self, count: int) -> None:
        self.prepared.append(count)
        if self.fail:
            raise RuntimeError("no threads today")


class Plain:
    """An executor without the optional hook (the protocol does not require it)."""

    name = "plain"
    supports_pause = False
    kill_after = 0.0

    def __init__(self) -> None:
        self._inner = ThreadExecutor()

    def check(self, call: TaskCall) -> None:
        return None

    def launch(self, drive: Callable[[], None], *, name: str) -> None:
        self._inner.launch(drive, name=name)

    def run_attempt(self, attempt: Attempt) -> AttemptEnd:
        return self._inner.run_attempt(attempt)

    def terminate(self, attempt: Attempt) -> bool:
        return False

    def kill(self, attempt: Attempt) -> None:
        return None


def _body(ctx: TaskContext) -> str:
    return ctx.task_id


def test_the_executor_prepares_one_launch_per_held_run_and_nothing_moves() -> None:
    executor = Preparing()
    store = InMemoryTaskStore()
    with Controller(store=store, executor=executor, max_parallel=4) as controller:
        controller.register("t", _body)
        runs = [controller.submit("t", task_id=f"armed-{i}", blocked="armed") for i in range(3)]
        before = {run.task_id: len(store.history(run.task_id)) for run in runs}

        controller.prepare_release([*before, "not-held-here"])

        assert executor.prepared == [3]
        for run in runs:
            assert run.status is S.BLOCKED
            assert len(store.history(run.task_id)) == before[run.task_id]
        failures = controller.release_many(before, trigger="schedule:due")
        assert failures == {}
        for run in runs:
            assert run.wait(10).ok


def test_a_failing_hook_is_logged_and_an_executor_without_one_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing = Preparing(fail=True)
    with Controller(store=InMemoryTaskStore(), executor=failing) as controller:
        controller.register("t", _body)
        run = controller.submit("t", task_id="armed", blocked="armed")
        with caplog.at_level(logging.WARNING, logger="chongming_task.controller"):
            controller.prepare_release([run.task_id])
        assert failing.prepared == [1]
        assert "preparing 1 launches" in caplog.text
        controller.release_many([run.task_id], trigger="schedule:due")
        assert run.wait(10).ok
    with Controller(store=InMemoryTaskStore(), executor=Plain()) as controller:
        controller.register("t", _body)
        run = controller.submit("t", task_id="armed", blocked="armed")
        controller.prepare_release([run.task_id])  # no hook: nothing to do, no error
        controller.release_many([run.task_id], trigger="schedule:due")
        assert run.wait(10).ok


def test_prepare_launches_asks_the_controllers_executor_or_the_default_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executor = Preparing()
    with Controller(store=InMemoryTaskStore(), executor=executor) as controller:
        controller.prepare_launches(2)
        controller.prepare_launches(0)  # nothing to prepare: the hook is not called
        assert executor.prepared == [2]
    asked: list[int] = []
    monkeypatch.setattr(ThreadExecutor, "prepare_launches", lambda self, count: asked.append(count))
    with Controller(store=InMemoryTaskStore()) as controller:  # the shared default
        controller.prepare_launches(3)
    assert asked == [3]
