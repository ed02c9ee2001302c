"""Property-based fuzzing of the public calls' arguments: whatever a caller passes,
only the documented exception type escapes (``ConfigurationError``), never a
``TypeError``/``OverflowError`` from deep inside or a task the store cannot keep."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chongming_task import Controller
from chongming_task.errors import ConfigurationError
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.schedule._triggers import IntervalTrigger, make_trigger
from chongming_task.stores._sqlite import SqliteTaskStore

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
