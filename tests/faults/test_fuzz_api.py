"""Property-based fuzzing of the public calls' arguments: whatever a caller passes,
only the documented exception type escapes (``ConfigurationError``), never a
``TypeError``/``OverflowError`` from deep inside or a task the store cannot keep."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chongming_task import Controller
from chongming_task.errors import (
    ConfigurationError,
    StaleScheduleEdit,
    TaskNotFound,
)
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.queue import Client, TaskHandle
from chongming_task.schedule import Schedule, ScheduleAdmin
from chongming_task.schedule._triggers import IntervalTrigger, make_trigger
from chongming_task.stores import TaskStore
from chongming_task.stores._base import TaskQuery
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import wait_until

from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(600)

ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=300),
    st.binary(max_size=10),
    st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), st.integers(), max_size=3),
    st.sets(st.text(max_size=5), max_size=3),
    st.datetimes(timezones=st.none() | st.just(UTC)),
)
INSTANTS = st.one_of(
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(),
    st.sampled_from([datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC)]),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=14)))),
)
SETTINGS = settings(
    max_examples=300 * SCALE,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
COUNT = {"calls": 0}


def _only_documented(call: Callable[[], Any]) -> None:
    COUNT["calls"] += 1
    with contextlib.suppress(ConfigurationError):
        call()


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controller]:
    db = tmp_path_factory.mktemp("api") / "tasks.db"
    controller = Controller(store=SqliteTaskStore(db), max_parallel=4)
    controller.register("job", lambda ctx: 1)
    yield controller
    controller.close(close_store=True)
    record(api_calls=COUNT["calls"], tracebacks=0)


@SETTINGS
@given(
    task_id=ANY,
    tags=ANY,
    priority=ANY,
    metadata=ANY,
    label=ANY,
    bucket_key=ANY,
)
def test_submit(
    controller: Controller,
    task_id: Any,
    tags: Any,
    priority: Any,
    metadata: Any,
    label: Any,
    bucket_key: Any,
) -> None:
    def call() -> None:
        run = controller.submit(
            "job",
            task_id=task_id,
            tags=tags,
            priority=priority,
            metadata=metadata,
            label=label,
            bucket_key=bucket_key,
        )
        run.wait(10)
        stored = controller.store.get(run.task_id)
        assert stored is not None, "accepted but never stored"
        assert stored.status is run.status, "the store disagrees with the run"

    _only_documented(call)


@SETTINGS
@given(status=ANY, limit=ANY, name_prefix=ANY, tag=ANY, bucket=ANY, order=ANY)
def test_list_tasks(
    controller: Controller, status: Any, limit: Any, name_prefix: Any, tag: Any, bucket: Any,
    order: Any,
) -> None:  # fmt: skip
    _only_documented(
        lambda: controller.list_tasks(
            status=status,
            limit=limit,
            name_prefix=name_prefix,
            tag=tag,
            bucket=bucket,
            order=order,
        )
    )


@SETTINGS
@given(lease_ttl=ANY, poll=ANY, max_parallel=ANY, keep_finished=ANY, graceful=ANY, pause=ANY)
def test_controller_settings(
    lease_ttl: Any, poll: Any, max_parallel: Any, keep_finished: Any, graceful: Any, pause: Any
) -> None:
    def call() -> None:
        Controller(
            lease_ttl=lease_ttl,
            command_poll_interval=poll,
            max_parallel=max_parallel,
            keep_finished=keep_finished,
            graceful_stop=graceful,
            pause_timeout=pause,
        ).close()

    _only_documented(call)


@SETTINGS
@given(start=ANY, per_attempt=ANY, idle=ANY, total=ANY, attempts=ANY)
def test_policies(start: Any, per_attempt: Any, idle: Any, total: Any, attempts: Any) -> None:
    _only_documented(lambda: Timeout(start=start, per_attempt=per_attempt, idle=idle, total=total))
    _only_documented(lambda: RetryPolicy(max_attempts=attempts))


@SETTINGS
@given(
    seconds=ANY | st.integers(min_value=1, max_value=10**13),
    after=INSTANTS,
    pattern=st.sampled_from(["0 3 * * *", "*/5 * * * * *", "0 0 29 2 *", "@every 90m"]),
)
def test_triggers(seconds: Any, after: datetime, pattern: str) -> None:
    def interval() -> None:
        trigger = IntervalTrigger(seconds)
        following = trigger.next_after(after)
        assert following > after

    _only_documented(interval)
    _only_documented(lambda: make_trigger(pattern).next_after(after))
    _only_documented(lambda: make_trigger(f"@every {seconds}s"))


# -- every public call, on every store ---------------------------------------------------
# The kinds of values that once leaked (TypeError, OverflowError, UnicodeEncodeError,
# StoreError "Error binding parameter"): wrong types for str parameters, 64-bit
# overflow, numbers written as strings, lone surrogates, NUL and other control
# characters, NaN and infinities, and the ids the world below holds.

SURROGATE_ETC = st.tuples(
    st.text(max_size=4),
    st.sampled_from(["\ud800", "\udcff", "\x00", "\x1b[2J", "\n"]),
    st.text(max_size=4),
).map("".join)
WEIRD = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            0,
            -1,
            2**63 - 1,
            2**63,
            -(2**63) - 1,
            2**64,
            10**30,
            0.5,
            -0.0,
            math.nan,
            math.inf,
            -math.inf,
            1e309 / 10,
            b"",
            b"t1",
            bytearray(b"t1"),
            "",
            "5",
            "-1",
            "1e3",
            "nan",
            "inf",
            "t1",
            "q1",
            "s1",
            "x" * 300,
            [],
            ["t1"],
            [1],
            [[1]],
            [None],
            {},
            {"a": 1},
            {"t1"},
            ("t1",),
            (),
            object(),
        ]
    ),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
    SURROGATE_ETC,
    st.binary(max_size=8),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=3), SURROGATE_ETC), max_size=3),
    st.dictionaries(st.text(max_size=3), st.one_of(st.integers(), st.text(max_size=3)), max_size=2),
    st.dictionaries(st.one_of(st.integers(), SURROGATE_ETC), st.integers(), max_size=2),
)


class World:
    """What the calls run against: a finished task ``t1`` held by a controller, a queued
    task ``q1`` nobody holds (enqueued by a client), and a schedule ``s1``."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.controller = Controller(store=store, max_parallel=2)
        self.controller.register("job", lambda ctx, *args, **kwargs: 1)
        self.controller.submit("job", task_id="t1").wait(10)
        self.client = Client(store)
        self.client.enqueue("job", task_id="q1")
        handle = self.client.get("t1")
        assert handle is not None
        self.handle = handle
        self.admin = ScheduleAdmin(store)
        self.admin.register(Schedule(name="s1", task="job", trigger=IntervalTrigger(3600)))

    def settle(self) -> None:
        """Wait until whatever a successful call started is in the store."""
        self.controller.wait_all(10)
        wait_until(lambda: not self.controller.pending_writes, message="writes stored")

    def state(self) -> tuple[object, ...]:
        tasks = sorted((s.task_id, s.status.value, s.status_version) for s in self.store.query())
        schedules = [(r.name, r.revision) for r in self.store.list_schedules()]
        return tasks, schedules


Call = Callable[[World, Any], object]

#: Every public call with one fuzzed argument (the others well-formed).
CALLS: dict[str, Call] = {
    # Controller
    "Controller.get": lambda w, v: w.controller.get(v),
    "Controller.stop": lambda w, v: w.controller.stop(v),
    "Controller.pause": lambda w, v: w.controller.pause(v, timeout=0),
    "Controller.pause(timeout)": lambda w, v: w.controller.pause("t1", timeout=v),
    "Controller.resume": lambda w, v: w.controller.resume(v),
    "Controller.wait": lambda w, v: w.controller.wait(v, 0),
    "Controller.wait(timeout)": lambda w, v: w.controller.wait("t1", v),
    "Controller.wait_all": lambda w, v: w.controller.wait_all(v),
    "Controller.history": lambda w, v: w.controller.history(v),
    "Controller.explain": lambda w, v: w.controller.explain(v),
    "Controller.run": lambda w, v: w.controller.run(v),
    "Controller.prune": lambda w, v: w.controller.prune(keep_terminal=v),
    "Controller.active_in_bucket": lambda w, v: w.controller.active_in_bucket(v),
    "Controller.owns_bucket": lambda w, v: w.controller.owns_bucket(v),
    "Controller.submit(name)": lambda w, v: w.controller.submit(v),
    "Controller.submit(task_id)": lambda w, v: w.controller.submit("job", task_id=v),
    "Controller.submit(bucket_key)": lambda w, v: w.controller.submit("job", bucket_key=v),
    "Controller.submit(priority)": lambda w, v: w.controller.submit("job", priority=v),
    "Controller.submit(tags)": lambda w, v: w.controller.submit("job", tags=v),
    "Controller.submit_many": lambda w, v: w.controller.submit_many("job", v),
    "Controller.submit_many(task_ids)": lambda w, v: w.controller.submit_many(
        "job", [()], task_ids=v
    ),
    "Controller.submit_many(bucket_keys)": lambda w, v: w.controller.submit_many(
        "job", [()], bucket_keys=v
    ),
    **{
        f"Controller.list_tasks({key})": (
            lambda w, v, key=key: w.controller.list_tasks(**{key: v})  # type: ignore[misc]
        )
        for key in (
            "status",
            "limit",
            "name_prefix",
            "tag",
            "owner",
            "bucket",
            "buckets",
            "metadata_eq",
            "order",
            "created_after",
            "updated_before",
        )
    },
    "Controller.list_tasks(metadata_eq value)": lambda w, v: w.controller.list_tasks(
        metadata_eq={"schedule": v}
    ),
    # Client and TaskHandle
    "Client.get": lambda w, v: w.client.get(v),
    "Client.stop": lambda w, v: w.client.stop(v),
    "Client.pause": lambda w, v: w.client.pause(v),
    "Client.resume": lambda w, v: w.client.resume(v),
    "Client.wait": lambda w, v: w.client.wait(v, 0),
    "Client.wait(timeout)": lambda w, v: w.client.wait("t1", v),
    "Client.enqueue(name)": lambda w, v: w.client.enqueue(v),
    "Client.enqueue(task_id)": lambda w, v: w.client.enqueue("job", task_id=v),
    "Client.enqueue(priority)": lambda w, v: w.client.enqueue("job", priority=v),
    "Client.enqueue(delay)": lambda w, v: w.client.enqueue("job", delay=v),
    "Client.enqueue(not_before)": lambda w, v: w.client.enqueue("job", not_before=v),
    "Client.enqueue(tags)": lambda w, v: w.client.enqueue("job", tags=v),
    "Client.enqueue(label)": lambda w, v: w.client.enqueue("job", label=v),
    "Client.enqueue(bucket_key)": lambda w, v: w.client.enqueue("job", bucket_key=v),
    "Client.enqueue(args)": lambda w, v: w.client.enqueue("job", v, key=[v]),
    "Client.enqueue_many": lambda w, v: w.client.enqueue_many("job", v),
    "Client.enqueue_many(task_ids)": lambda w, v: w.client.enqueue_many("job", [()], task_ids=v),
    "Client.enqueue_many(bucket_keys)": lambda w, v: w.client.enqueue_many(
        "job", [()], bucket_keys=v
    ),
    "Client.list_tasks(limit)": lambda w, v: w.client.list_tasks(limit=v),
    "Client(poll_interval)": lambda w, v: Client(w.store, poll_interval=v),
    "Client(actor)": lambda w, v: Client(w.store, actor=v),
    "Client(num_buckets)": lambda w, v: Client(w.store, num_buckets=v),
    "TaskHandle": lambda w, v: TaskHandle(w.client, v),
    "TaskHandle.wait": lambda w, v: w.handle.wait(v),
    # ScheduleAdmin
    "ScheduleAdmin.find": lambda w, v: w.admin.find(v),
    "ScheduleAdmin.get": lambda w, v: w.admin.get(v),
    "ScheduleAdmin.pause": lambda w, v: w.admin.pause(v),
    "ScheduleAdmin.resume": lambda w, v: w.admin.resume(v),
    "ScheduleAdmin.runs": lambda w, v: w.admin.runs(v),
    "ScheduleAdmin.runs(limit)": lambda w, v: w.admin.runs("s1", limit=v),
    "ScheduleAdmin.history(limit)": lambda w, v: w.admin.history("s1", limit=v),
    "ScheduleAdmin.statistics": lambda w, v: w.admin.statistics(v),
    "ScheduleAdmin.unfinished": lambda w, v: w.admin.unfinished(v),
    "ScheduleAdmin.stale_runs": lambda w, v: w.admin.stale_runs(v),
    "ScheduleAdmin.request_run": lambda w, v: w.admin.request_run(v),
    "ScheduleAdmin.request_run(input)": lambda w, v: w.admin.request_run("s1", input=v),
    "ScheduleAdmin.cancel_run": lambda w, v: w.admin.cancel_run(v),
    "ScheduleAdmin.wait_for_command": lambda w, v: w.admin.wait_for_command(v, timeout=0),
    "ScheduleAdmin.wait_for_command(timeout)": lambda w, v: w.admin.wait_for_command(
        "none", timeout=v
    ),
    "ScheduleAdmin.health(late_after)": lambda w, v: w.admin.health(late_after=v),
    "ScheduleAdmin.set_pattern": lambda w, v: w.admin.set_pattern("s1", v),
    "ScheduleAdmin.set_pattern(timezone)": lambda w, v: w.admin.set_pattern(
        "s1", "@every 3600s", timezone=v
    ),
    "ScheduleAdmin.set_pattern(expect_definition_revision)": lambda w, v: w.admin.set_pattern(
        "s1", "@every 3600s", expect_definition_revision=v
    ),
    # the store's own public reads
    "store.get": lambda w, v: w.store.get(v),
    "store.history": lambda w, v: w.store.history(v),
    "store.get_command": lambda w, v: w.store.get_command(v),
    "store.get_schedule": lambda w, v: w.store.get_schedule(v),
    "store.prune": lambda w, v: w.store.prune(v),
    "store.delete_tasks": lambda w, v: w.store.delete_tasks(v),
    "store.query(task_ids)": lambda w, v: w.store.query(TaskQuery(task_ids=v)),
    "store.query(buckets)": lambda w, v: w.store.query(TaskQuery(buckets=v)),
    "store.query(statuses)": lambda w, v: w.store.query(TaskQuery(statuses=v)),
    "store.count_by_status(tag)": lambda w, v: w.store.count_by_status(TaskQuery(tag=v)),
}

#: What a well-formed question may be answered with, besides a result: a task or
#: schedule that is not there, a wait that ran out, an edit based on an old revision.
DOCUMENTED = (ConfigurationError, TaskNotFound, TimeoutError, StaleScheduleEdit)


@pytest.fixture
def world(store: TaskStore) -> Iterator[World]:
    made = World(store)
    yield made
    made.controller.close(timeout=10)


def test_public_calls(world: World, request: pytest.FixtureRequest) -> None:
    """Any value for any parameter of any public call: a result, ``ConfigurationError``
    or a documented lookup answer -- and a refused call leaves the store as it was."""

    @settings(SETTINGS, max_examples=SETTINGS.max_examples * 3)
    @given(name=st.sampled_from(sorted(CALLS)), value=WEIRD)
    def call(name: str, value: Any) -> None:
        COUNT["calls"] += 1
        before = world.state()
        try:
            CALLS[name](world, value)
        except ConfigurationError:
            assert world.state() == before, f"{name}({value!r:.80}) was refused but wrote"
        except DOCUMENTED:
            pass
        except Exception as exc:
            raise AssertionError(f"{name}({value!r:.80}) -> {type(exc).__name__}: {exc}") from exc
        world.settle()

    call()
