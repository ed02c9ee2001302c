"""A caller's mistake in the arguments of a public call is a ``ConfigurationError`` that
names the parameter, on every store -- never a ``TypeError``/``OverflowError``/
``UnicodeEncodeError`` from deep inside, nor a ``StoreError`` ("Error binding
parameter") that reads as a broken database. A refused call changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_task import Controller
from chongming_task.errors import ConfigurationError
from chongming_task.queue import Client, TaskHandle
from chongming_task.schedule import Schedule, ScheduleAdmin
from chongming_task.schedule._triggers import IntervalTrigger
from chongming_task.stores import TaskStore
from chongming_task.stores._base import TaskQuery

BAD_IDS: list[Any] = [5, 2**63, -(2**63) - 1, 1.5, None, b"t1", ["t1"], {"t1": 1}, {"t1"}]


#: The classes and objects as ``Any``: the calls pass wrongly typed values on purpose.
AnyClient: Any = Client
AnyTaskHandle: Any = TaskHandle
AnyQuery: Any = TaskQuery


class Setup:
    store: Any
    controller: Any
    client: Any
    admin: Any

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.controller = Controller(store=store)
        self.controller.register("job", lambda ctx, *args: 1)
        self.controller.submit("job", task_id="t1").wait(10)
        self.client = Client(store)
        self.client.enqueue("job", task_id="q1")
        self.admin = ScheduleAdmin(store)
        self.admin.register(Schedule(name="s1", task="job", trigger=IntervalTrigger(60)))

    def state(self) -> object:
        return (
            [(s.task_id, s.status, s.status_version) for s in self.store.query()],
            [(r.name, r.revision) for r in self.store.list_schedules()],
        )


@pytest.fixture
def setup(store: TaskStore) -> Iterator[Setup]:
    made = Setup(store)
    yield made
    made.controller.close()


ID_CALLS: dict[str, Callable[[Setup, Any], object]] = {
    "Controller.get": lambda s, v: s.controller.get(v),
    "Controller.stop": lambda s, v: s.controller.stop(v),
    "Controller.pause": lambda s, v: s.controller.pause(v, timeout=0),
    "Controller.resume": lambda s, v: s.controller.resume(v),
    "Controller.wait": lambda s, v: s.controller.wait(v, 0),
    "Controller.history": lambda s, v: s.controller.history(v),
    "Controller.explain": lambda s, v: s.controller.explain(v),
    "Controller.run": lambda s, v: s.controller.run(v),
    "Controller.submit(name)": lambda s, v: s.controller.submit(v),
    "Client.get": lambda s, v: s.client.get(v),
    "Client.stop": lambda s, v: s.client.stop(v),
    "Client.pause": lambda s, v: s.client.pause(v),
    "Client.resume": lambda s, v: s.client.resume(v),
    "Client.wait": lambda s, v: s.client.wait(v, 0),
    "TaskHandle": lambda s, v: AnyTaskHandle(s.client, v),
    "ScheduleAdmin.find": lambda s, v: s.admin.find(v),
    "ScheduleAdmin.pause": lambda s, v: s.admin.pause(v),
    "ScheduleAdmin.request_run": lambda s, v: s.admin.request_run(v),
    "ScheduleAdmin.cancel_run": lambda s, v: s.admin.cancel_run(v),
    "ScheduleAdmin.wait_for_command": lambda s, v: s.admin.wait_for_command(v, timeout=0),
    "store.get": lambda s, v: s.store.get(v),
    "store.history": lambda s, v: s.store.history(v),
    "store.get_command": lambda s, v: s.store.get_command(v),
    "store.get_schedule": lambda s, v: s.store.get_schedule(v),
    "store.delete_tasks": lambda s, v: s.store.delete_tasks([v]),
    "TaskQuery(task_ids)": lambda s, v: s.store.query(AnyQuery(task_ids=[v])),
}


@pytest.mark.parametrize("call", sorted(ID_CALLS))
def test_an_id_that_is_no_string_is_refused(setup: Setup, call: str) -> None:
    before = setup.state()
    for value in BAD_IDS:
        with pytest.raises(ConfigurationError, match=r"must be a string") as caught:
            ID_CALLS[call](setup, value)
        assert type(value).__name__ in str(caught.value)
    assert setup.state() == before


@pytest.mark.parametrize("call", ["Controller.get", "Client.stop", "store.history"])
def test_an_undecodable_id_is_refused(setup: Setup, call: str) -> None:
    with pytest.raises(ConfigurationError, match=r"task_id is not valid UTF-8"):
        ID_CALLS[call](setup, "t\ud800")


def test_a_well_formed_unknown_id_is_answered(setup: Setup) -> None:
    assert setup.controller.get("nope") is None
    assert setup.controller.stop("nope") is False
    assert setup.controller.history("x" * 1000) == []
    assert setup.client.get("nope") is None
    assert setup.admin.find("nope") is None
    assert setup.store.get_command("nope") is None


ARGUMENTS: dict[str, tuple[Callable[[Setup], object], str]] = {
    "prune(keep_terminal='5')": (
        lambda s: s.controller.prune(keep_terminal="5"),
        "keep_terminal must be an integer",
    ),
    "prune(keep_terminal=2**63)": (
        lambda s: s.controller.prune(keep_terminal=2**63),
        "keep_terminal must be <= 9223372036854775807",
    ),
    "prune(keep_terminal=1.5)": (
        lambda s: s.controller.prune(keep_terminal=1.5),
        "keep_terminal must be an integer",
    ),
    "store.prune(None)": (
        lambda s: s.store.prune(None),
        "keep_terminal must be an integer",
    ),
    "enqueue_many(None)": (
        lambda s: s.client.enqueue_many("job", None),
        "calls must be a list",
    ),
    "enqueue_many(task_ids=0)": (
        lambda s: s.client.enqueue_many("job", [()], task_ids=0),
        "task_ids must be a list",
    ),
    "submit_many(task_ids=0)": (
        lambda s: s.controller.submit_many("job", [()], task_ids=0),
        "task_ids must be a list",
    ),
    "submit_many(bucket_keys=0)": (
        lambda s: s.controller.submit_many("job", [()], bucket_keys=0),
        "bucket_keys must be a list",
    ),
    "list_tasks(buckets=0)": (
        lambda s: s.controller.list_tasks(buckets=0),
        "buckets must be a list",
    ),
    "list_tasks(buckets=[[1]])": (
        lambda s: s.controller.list_tasks(buckets=[[1]]),
        r"buckets\[\] must be an integer",
    ),
    "list_tasks(metadata_eq surrogate)": (
        lambda s: s.controller.list_tasks(metadata_eq={"k": "\ud800"}),
        "not valid UTF-8",
    ),
    "wait(timeout=b'1')": (
        lambda s: s.controller.wait("t1", b"1"),
        "timeout must be a number of seconds",
    ),
    "wait_all(timeout=nan)": (
        lambda s: s.controller.wait_all(float("nan")),
        "timeout must be a finite number",
    ),
    "Client.wait(timeout=-1)": (lambda s: s.client.wait("t1", -1), "timeout must be >= 0"),
    "active_in_bucket([])": (
        lambda s: s.controller.active_in_bucket([]),
        "bucket must be an integer",
    ),
    "submit(bucket_key surrogate)": (
        lambda s: s.controller.submit("job", bucket_key="\ud800"),
        "bucket_key is not valid UTF-8",
    ),
    "enqueue(args surrogate)": (
        lambda s: s.client.enqueue("job", "a\udcff"),
        r"args\[0\].*lone surrogate or a NUL",
    ),
    "Client(poll_interval=None)": (
        lambda s: AnyClient(s.store, poll_interval=None),
        "poll_interval must be a number of seconds",
    ),
    "Client(actor=b'x')": (
        lambda s: AnyClient(s.store, actor=b"x"),
        "actor must be a non-empty string",
    ),
    "ScheduleAdmin.health(late_after=None)": (
        lambda s: s.admin.health(late_after=None),
        "late_after must be a number of seconds",
    ),
    "ScheduleAdmin.wait_for_command(timeout=None)": (
        lambda s: s.admin.wait_for_command("c", timeout=None),
        "timeout must be a number of seconds",
    ),
    "ScheduleAdmin.set_pattern([])": (
        lambda s: s.admin.set_pattern("s1", []),
        "pattern must be a string",
    ),
}


@pytest.mark.parametrize("case", sorted(ARGUMENTS))
def test_a_malformed_argument_is_refused_and_changes_nothing(setup: Setup, case: str) -> None:
    call, message = ARGUMENTS[case]
    before = setup.state()
    with pytest.raises(ConfigurationError, match=message):
        call(setup)
    assert setup.state() == before


def test_close_refuses_a_bad_timeout_before_stopping_anything(store: TaskStore) -> None:
    controller: Any = Controller(store=store)
    try:
        with pytest.raises(ConfigurationError, match="timeout must be a number of seconds"):
            controller.close(timeout="5")
        assert not controller.closed
    finally:
        controller.close()
