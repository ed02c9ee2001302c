"""A third-party backend with the task part only: its contract, and what refuses it.

``TasksOnlyStore`` (tests/_tasks_only.py: ``DictTaskRecords`` of the example backend)
implements :class:`TaskRecordStore` and nothing else (no commands, no schedules, no
work queue), as a backend over a key-value service might. It passes
``TaskRecordStoreContract``; a controller on it runs, stops and waits for its own
tasks; every feature that needs another part refuses it with a ``ConfigurationError``
naming the part, before anything is written.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import cast

import pytest

from _tasks_only import TasksOnlyStore, held_elsewhere
from chongming_task import Controller, TaskContext
from chongming_task.core._clock import Clock
from chongming_task.errors import ConfigurationError
from chongming_task.schedule import Scheduler
from chongming_task.states import TaskStatus
from chongming_task.stores._base import (
    CommandStore,
    QueueStore,
    ScheduleStore,
    TaskRecordStore,
    TaskStore,
)
from chongming_task.testing import wait_until
from chongming_task.testing.store_contract import TaskRecordStoreContract
from chongming_task.worker import Worker


def test_it_declares_the_task_part_only() -> None:
    store = TasksOnlyStore()
    assert isinstance(store, TaskRecordStore)
    for part in (CommandStore, ScheduleStore, QueueStore, TaskStore):
        assert not isinstance(store, part)


class TestTasksOnlyStoreContract(TaskRecordStoreContract):
    """The task contract passes; the other parts' contracts are simply not run."""

    def make_store(self, clock: Clock) -> TaskRecordStore:
        return TasksOnlyStore(clock=clock)


def _spin(ctx: TaskContext) -> None:
    idle = threading.Event()
    while True:
        ctx.checkpoint()  # where the stop lands
        idle.wait(0.01)


def _add(ctx: TaskContext, a: int, b: int) -> int:
    return a + b


@pytest.fixture
def controller() -> Iterator[Controller]:
    # Typed TaskStore where the controller takes one; at runtime only the task part
    # is there, and the controller asks before it uses anything else.
    store = cast(TaskStore, TasksOnlyStore())
    with Controller(store=store, owner="node-a") as controller:
        controller.register("add", _add)
        controller.register("spin", _spin)
        yield controller
    store.close()


def test_a_controller_runs_stops_and_waits_on_the_task_part(controller: Controller) -> None:
    done = controller.submit("add", 1, 2, task_id="sum")
    assert done.wait(10).value == 3
    spinning = controller.submit("spin", task_id="spin")
    wait_until(lambda: spinning.status is TaskStatus.RUNNING)
    assert controller.stop("spin", reason="enough")
    assert spinning.wait(10).status is TaskStatus.STOPPED
    stored = controller.store.get("spin")
    assert stored is not None
    assert stored.status is TaskStatus.STOPPED
    assert [t.version for t in controller.store.history("sum")] == list(
        range(len(controller.store.history("sum")))
    )


def test_controlling_a_task_another_process_holds_names_the_missing_part(
    controller: Controller,
) -> None:
    foreign = held_elsewhere("theirs", controller.clock.now())
    controller.store.create(foreign)
    with pytest.raises(ConfigurationError, match=r"needs a store that implements CommandStore"):
        controller.stop("theirs", reason="from node-a")
    stored = controller.store.get("theirs")
    assert stored == foreign  # nothing written


def test_a_scheduler_names_the_missing_schedule_part(controller: Controller) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Scheduler(controller)
    message = str(caught.value)
    assert "needs a store that implements ScheduleStore" in message
    assert "DictTaskRecords does not" in message
    assert "ScheduleStoreContract" in message  # what to do


def test_a_worker_names_the_missing_command_part(controller: Controller) -> None:
    with pytest.raises(ConfigurationError, match=r"a Worker .* implements CommandStore"):
        Worker(controller)
