"""``Controller.explain``: why a task waits, from the holding controller and from the store.

Every situation is built for real (a controller with limits, a worker registry, a
pipeline) on the in-memory, SQLite and PostgreSQL stores; the "store" view is read
through a second store object, as another process would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from chongming_task import Controller, Pipeline
from chongming_task._explain import (
    BlockedUpstream,
    Ended,
    HeldBy,
    LimitFull,
    NoBucketOwner,
    Paused,
    QueuePosition,
    Reason,
    RetryWait,
    Running,
    StartTimeout,
    Stopping,
    explain,
)
from chongming_task.controller._explaining import store_facts
from chongming_task.errors import ConfigurationError
from chongming_task.policies import ConcurrencyPolicy, FixedBackoff, RetryPolicy, Timeout
from chongming_task.runtime._context import TaskContext
from chongming_task.states import TaskStatus
from chongming_task.stores import QueueStore
from chongming_task.stores._base import TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._queue_records import WorkerRecord
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock, wait_until

from ._helpers import Gate

S = TaskStatus
PATIENCE = 10.0

Opener = Callable[[], TaskStore]


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens stores on one database: each call is "another process" (memory: the same)."""
    opened: list[TaskStore] = []
    memory = InMemoryTaskStore()

    def open_store() -> TaskStore:
        store: TaskStore
        if request.param == "memory":
            return memory
        if request.param == "sqlite":
            store = SqliteTaskStore(tmp_path / "tasks.db")
        else:
            from chongming_task.stores._postgres import PostgresTaskStore

            store = PostgresTaskStore(request.getfixturevalue("postgres_dsn"))
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


def kinds(reasons: tuple[Reason, ...]) -> list[str]:
    return [reason.kind for reason in reasons]


def running(controller: Controller, task_id: str) -> None:
    wait_until(
        lambda: (snap := controller.get(task_id)) is not None and snap.status is S.RUNNING,
        timeout=PATIENCE,
        message=f"{task_id} running",
    )


def from_store(store: TaskStore, task_id: str, **kwargs: object) -> tuple[Reason, ...]:
    snapshot = store.get(task_id)
    assert snapshot is not None
    facts = store_facts(store, snapshot, now=store.clock.now(), **kwargs)  # type: ignore[arg-type]
    explanation = explain(facts)
    assert explanation.source == "store"
    return explanation.reasons


def test_a_task_behind_a_full_named_limit_says_which_limit_and_who_holds_it(
    stores: Opener, gate: Gate
) -> None:
    policy = ConcurrencyPolicy(max_parallel=4, limits={"gpu": 1})
    with Controller(stores(), concurrency=policy) as controller:
        controller.register("train", lambda ctx, n: gate.hold(ctx), tags={"gpu"})
        controller.submit("train", 1, task_id="a")
        controller.submit("train", 2, task_id="b")
        controller.submit("train", 3, task_id="c")
        running(controller, "a")

        b = controller.explain("b")
        assert (b.status, b.source) == (S.QUEUED, "controller")
        assert b.reasons[0] == LimitFull(limit="named", name="gpu", capacity=1, holders=("a",))
        assert b.reasons[0].message == "named limit 'gpu' is full (1 of 1 slots held by a)"
        assert b.reasons[1] == QueuePosition(priority=0, position=1, ahead=(), higher=0)
        c = controller.explain("c")
        assert c.reasons[1] == QueuePosition(priority=0, position=2, ahead=("b",), higher=0)
        assert c.to_dict()["reasons"][0] == {
            "kind": "limit_full",
            "message": "named limit 'gpu' is full (1 of 1 slots held by a)",
            "limit": "named",
            "name": "gpu",
            "bucket": None,
            "capacity": 1,
            "holders": ["a"],
        }

        # Another process sees the holder and its gpu task, and says it cannot see limits.
        other = stores()
        reasons = from_store(other, "b")
        held = reasons[0]
        assert isinstance(held, HeldBy)
        assert held.owner == controller.owner
        assert held.running == ("a",)
        assert held.sharing_tags == {"gpu": ("a",)}
        assert "its limits are not in the store" in held.message
        assert reasons[1] == QueuePosition(priority=0, position=1, ahead=(), higher=0)
        gate.open()
        controller.wait_all(PATIENCE)
        ended = controller.explain("c")
        assert kinds(ended.reasons)[0] == "ended"
        assert ended.reasons[0] == Ended(
            status=S.SUCCEEDED,
            at=ended.reasons[0].at,  # type: ignore[attr-defined]
            failure_kind=None,
            detail=None,
        )


def test_the_global_and_the_bucket_limits(stores: Opener, gate: Gate) -> None:
    with Controller(stores(), max_parallel=2, max_parallel_per_bucket=1) as controller:
        controller.register("work", gate.hold)
        controller.submit("work", task_id="x1", bucket_key="tenant-x")
        controller.submit("work", task_id="y1", bucket_key="tenant-y")
        controller.submit("work", task_id="x2", bucket_key="tenant-x", priority=5)
        running(controller, "x1")
        running(controller, "y1")
        x2 = controller.explain("x2").reasons
        bucket = controller.get("x2").bucket  # type: ignore[union-attr]
        assert x2[0] == LimitFull(limit="max_parallel", capacity=2, holders=("x1", "y1"))
        assert x2[1] == LimitFull(limit="bucket", bucket=bucket, capacity=1, holders=("x1",))
        assert x2[2] == QueuePosition(priority=5, position=1, ahead=(), higher=0)
        gate.open()


def test_paused_says_by_whom_and_running_is_not_waiting(stores: Opener, gate: Gate) -> None:
    with Controller(stores(), max_parallel=1, owner="node-a") as controller:
        controller.register("work", gate.hold)
        controller.submit("work", task_id="first")
        controller.submit("work", task_id="second")
        running(controller, "first")
        controller.pause("second")
        paused = controller.explain("second").reasons[0]
        assert isinstance(paused, Paused)
        assert (paused.by, paused.in_place) == ("node-a", False)
        assert controller.pause("first", timeout=PATIENCE)
        in_place = controller.explain("first").reasons[0]
        assert isinstance(in_place, Paused)
        assert (in_place.by, in_place.in_place) == ("node-a", True)
        assert from_store(stores(), "first")[0] == in_place  # history says the same
        assert controller.resume("first")
        running(controller, "first")
        now = controller.explain("first").reasons[0]
        assert isinstance(now, Running)
        assert now.attempt == 1
        assert now.last_checkpoint_at is not None
        gate.open()


def test_retry_wait_until_and_start_timeout_at() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore(clock=clock)
    attempts: list[int] = []

    def flaky(ctx: TaskContext) -> None:
        attempts.append(ctx.attempt)
        raise OSError("disk busy")

    with Controller(store, clock=clock, max_parallel=1) as controller:
        controller.register(
            "flaky", flaky, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(30))
        )
        controller.submit("flaky", task_id="f")
        wait_until(lambda: controller.get("f").status is S.RETRY_WAIT, timeout=PATIENCE)  # type: ignore[union-attr]
        failed_at = clock.now()
        reason = controller.explain("f").reasons[0]
        assert isinstance(reason, RetryWait)
        assert reason.exact
        assert reason.until == failed_at + timedelta(seconds=30)
        assert reason.failure == "OSError: disk busy"
        stored = from_store(store, "f")[0]
        assert isinstance(stored, RetryWait)
        assert not stored.exact  # read back from the transition's reason
        assert stored.until is not None
        assert abs((stored.until - reason.until).total_seconds()) < 1
        controller.stop("f")

    blocker = Gate()
    with Controller(InMemoryTaskStore(clock=clock), clock=clock, max_parallel=1) as controller:
        controller.register("hold", blocker.hold, timeout=Timeout(start=30))
        controller.submit("hold", task_id="h1")
        controller.submit("hold", task_id="h2")
        created = controller.get("h2").created_at  # type: ignore[union-attr]
        reasons = controller.explain("h2").reasons
        assert reasons[-1] == StartTimeout(at=created + timedelta(seconds=30), seconds=30)
        blocker.open()


def test_stopping_says_how_much_of_the_window_is_left() -> None:
    clock = FakeClock()
    release = threading.Event()
    entered = threading.Event()

    def stubborn(ctx: TaskContext) -> None:
        ctx.checkpoint()
        entered.set()
        release.wait(PATIENCE)  # ignores the stop for a while
        ctx.checkpoint()

    with Controller(InMemoryTaskStore(clock=clock), clock=clock, graceful_stop=10) as controller:
        controller.register("stubborn", stubborn)
        controller.submit("stubborn", task_id="s")
        assert entered.wait(PATIENCE)
        checkpoint_at = clock.now()
        controller.stop("s", reason="deploy")
        clock.advance(4)
        reason = controller.explain("s").reasons[0]
        assert isinstance(reason, Stopping)
        assert reason.window == 10
        assert reason.remaining == pytest.approx(6)
        assert reason.last_checkpoint_at == checkpoint_at
        assert "6.0s of its 10s graceful window left" in reason.message
        release.set()
        controller.wait("s", PATIENCE)
        ended = controller.explain("s").reasons[0]
        assert isinstance(ended, Ended)
        assert (ended.status, ended.failure_kind) == (S.STOPPED, "cancelled")


def test_a_queued_unheld_task_with_no_live_owner_of_its_bucket(stores: Opener) -> None:
    from chongming_task import Client

    store = stores()
    client = Client(store)
    client.enqueue("anything", task_id="q", bucket_key="tenant-7")
    assert isinstance(store, QueueStore)  # the built-in stores keep the worker registry
    bucket = store.get("q").bucket  # type: ignore[union-attr]
    reasons = from_store(stores(), "q")
    assert reasons[0] == NoBucketOwner(bucket=bucket, live_workers=())
    now = store.clock.now()
    other = (bucket + 1) % 64  # type: ignore[operator]
    store.put_worker(
        WorkerRecord(
            worker_id="w1",
            host="h",
            pid=1,
            version="t",
            buckets=(other,),
            slots=1,
            started_at=now,
            heartbeat_at=now,
        )
    )
    reasons = from_store(stores(), "q")
    assert reasons[0] == NoBucketOwner(bucket=bucket, live_workers=("w1",))
    assert f"no live worker owns bucket {bucket}" in reasons[0].message
    store.put_worker(
        WorkerRecord(
            worker_id="w2",
            host="h",
            pid=2,
            version="t",
            buckets=(bucket,),  # type: ignore[arg-type]
            slots=1,
            started_at=now,
            heartbeat_at=now,
        )
    )
    assert kinds(from_store(stores(), "q")) == ["queue_position"]


def test_a_blocked_pipeline_node_names_its_unsettled_upstream(stores: Opener, gate: Gate) -> None:
    with Controller(stores(), max_parallel=2) as controller:
        controller.register("step", gate.hold)
        pipeline = Pipeline("etl")
        fetch = pipeline.node("step", node_id="fetch")
        pipeline.node("step", node_id="load", depends_on=[fetch])
        run = controller.submit_pipeline(pipeline, run_id="r1")
        running(controller, "r1/fetch")
        reason = controller.explain("r1/load").reasons[0]
        assert reason == BlockedUpstream(pipeline="etl", run="r1", unsettled={"fetch": "running"})
        assert from_store(stores(), "r1/load")[0] == reason
        gate.open()
        run.wait(PATIENCE)


def test_an_unknown_task_is_refused() -> None:
    with Controller() as controller, pytest.raises(ConfigurationError, match="unknown task id"):
        controller.explain("nope")
