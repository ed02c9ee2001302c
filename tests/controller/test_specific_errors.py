"""Callers can tell the cases apart: the specific ``ConfigurationError`` subclasses.

Each is raised where its case arises, on every store, and is still caught by
``except ConfigurationError`` (code written against the guide keeps working).
"""

from __future__ import annotations

from typing import Any

import pytest

from chongming_task import Client, Controller
from chongming_task.errors import (
    ConfigurationError,
    ControllerClosed,
    DuplicateTaskId,
    InvalidState,
    UnknownTask,
    UnknownTaskName,
)
from chongming_task.stores._base import TaskStore


def quick(ctx: Any) -> int:
    return 1


def test_a_taken_task_id_is_duplicate_task_id(store: TaskStore) -> None:
    with Controller(store=store) as controller:
        controller.register("quick", quick)
        controller.submit("quick", task_id="t1").wait(10)
        with pytest.raises(DuplicateTaskId) as raised:
            controller.submit("quick", task_id="t1")
        assert raised.value.task_id == "t1"
        assert isinstance(raised.value, ConfigurationError)
        client = Client(store, tasks=controller)
        with pytest.raises(DuplicateTaskId, match="t1"):
            client.enqueue("quick", task_id="t1")
    assert [t.to_status.value for t in store.history("t1")][-1] == "succeeded"


def test_an_unregistered_name_is_unknown_task_name(store: TaskStore) -> None:
    with Controller(store=store) as controller:
        controller.register("quick", quick)
        with pytest.raises(UnknownTaskName) as raised:
            controller.submit("nope")
        assert (raised.value.name, raised.value.registered) == ("nope", ("quick",))
        assert isinstance(raised.value, LookupError)
    assert store.query() == []


def test_waiting_on_an_unknown_id_is_unknown_task(store: TaskStore) -> None:
    client = Client(store)
    with pytest.raises(UnknownTask) as raised:
        client.wait("ghost", timeout=1)
    assert raised.value.task_id == "ghost"


def test_a_closed_controller_and_a_run_that_ran_are_invalid_state(store: TaskStore) -> None:
    controller = Controller(store=store)
    controller.register("quick", quick)
    run = controller.submit("quick")
    run.wait(10)
    with pytest.raises(InvalidState, match="cannot start"):
        run.start()
    controller.close()
    with pytest.raises(ControllerClosed):
        controller.submit("quick")
    assert issubclass(ControllerClosed, InvalidState)
