"""reconcile() against the table of guide §8.11, on stored snapshots (no runs involved)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta

import pytest

from chongming_task._model import FailureKind, TaskSnapshot, Transition
from chongming_task.controller._reconcile import RECONCILE_TRIGGER, reconcile
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict
from chongming_task.states import TaskStatus
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import FakeClock

S = TaskStatus
#: How to walk a fresh machine into each status.
PATHS: dict[TaskStatus, list[str]] = {
    S.PENDING: [],
    S.BLOCKED: ["mark_blocked"],
    S.QUEUED: ["mark_queued"],
    S.STARTING: ["mark_queued", "mark_starting"],
    S.RUNNING: ["mark_queued", "mark_starting", "mark_running"],
    S.PAUSING: ["mark_queued", "mark_starting", "mark_running", "mark_pausing"],
    S.STOPPING: ["mark_queued", "mark_starting", "mark_running", "mark_stopping"],
    S.PAUSED: ["mark_queued", "request_pause"],
    S.SUCCEEDED: ["mark_queued", "mark_starting", "mark_running", "mark_succeeded"],
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> Iterator[InMemoryTaskStore]:
    with InMemoryTaskStore(clock=clock) as store:
        yield store


def put(
    store: InMemoryTaskStore,
    clock: FakeClock,
    task_id: str,
    status: TaskStatus,
    *,
    lease: float | None,
    bucket: int | None = None,
    owner: str = "dead-node",
) -> TaskSnapshot:
    machine = StateMachine.create(task_id, "job", owner=owner, bucket=bucket, clock=clock)
    for step in PATHS[status]:
        getattr(machine, step)()
    until = None if lease is None else clock.now() + timedelta(seconds=lease)
    snapshot = machine.snapshot.replace(lease_owner=owner, lease_until=until)
    store.create(snapshot, machine.transitions)
    return snapshot


def test_the_table_of_8_11(store: InMemoryTaskStore, clock: FakeClock) -> None:
    for status in (S.STARTING, S.RUNNING, S.PAUSING, S.STOPPING):
        put(store, clock, f"occupying-{status}", status, lease=-1)
    for status in (S.PENDING, S.BLOCKED, S.QUEUED, S.PAUSED):
        put(store, clock, f"idle-{status}", status, lease=-1)
    put(store, clock, "live-running", S.RUNNING, lease=30)
    put(store, clock, "live-queued", S.QUEUED, lease=30)
    put(store, clock, "done", S.SUCCEEDED, lease=-1)
    put(store, clock, "no-lease", S.RUNNING, lease=None)

    dry = reconcile(store, clock=clock, actor="node-b", dry_run=True)
    assert dry.dry_run
    assert sorted(dry.lost) == sorted(
        [
            "occupying-starting",
            "occupying-running",
            "occupying-pausing",
            "occupying-stopping",
            "no-lease",
        ]
    )
    assert sorted(dry.adoptable) == sorted(
        ["idle-pending", "idle-blocked", "idle-queued", "idle-paused"]
    )
    assert dry.skipped == ()
    # A dry run writes nothing.
    assert store.get("occupying-running").status is S.RUNNING  # type: ignore[union-attr]

    report = reconcile(store, clock=clock, actor="node-b")
    assert sorted(report.lost) == sorted(dry.lost)
    assert sorted(report.adoptable) == sorted(dry.adoptable)
    for task_id in report.lost:
        snapshot = store.get(task_id)
        assert snapshot is not None
        assert snapshot.status is S.LOST
        assert snapshot.failure is not None
        assert snapshot.failure.kind is FailureKind.LOST
        assert snapshot.failure.retryable
        assert "dead-node" in snapshot.failure.message
        last = store.history(task_id)[-1]
        assert last.to_status is S.LOST
        assert last.trigger == RECONCILE_TRIGGER
        assert last.actor == "node-b"
    for task_id in ("live-running", "live-queued", *report.adoptable):
        snapshot = store.get(task_id)
        assert snapshot is not None
        assert snapshot.status_version == len(store.history(task_id)) - 1  # untouched
    # Nothing left to do the second time.
    assert reconcile(store, clock=clock, actor="node-b").lost == ()


def test_the_lease_decides_not_the_heartbeat(store: InMemoryTaskStore, clock: FakeClock) -> None:
    snapshot = put(store, clock, "busy", S.RUNNING, lease=30)
    # A task deep in computation: no heartbeat for an hour, but the lease is renewed.
    store.touch("busy", heartbeat_at=clock.now() - timedelta(hours=1))
    assert reconcile(store, clock=clock, actor="x").clean
    clock.advance(31)
    assert reconcile(store, clock=clock, actor="x", dry_run=True).lost == ("busy",)
    assert snapshot.status is S.RUNNING


def test_only_the_given_buckets_and_never_held_tasks(
    store: InMemoryTaskStore, clock: FakeClock
) -> None:
    put(store, clock, "mine", S.RUNNING, lease=-1, bucket=3)
    put(store, clock, "theirs", S.RUNNING, lease=-1, bucket=40)
    put(store, clock, "no-bucket", S.RUNNING, lease=-1)
    put(store, clock, "held", S.RUNNING, lease=-1, bucket=4)
    report = reconcile(store, clock=clock, actor="x", buckets=range(16), held=["held"])
    assert report.lost == ("mine",)
    assert store.get("theirs").status is S.RUNNING  # type: ignore[union-attr]
    assert store.get("held").status is S.RUNNING  # type: ignore[union-attr]


def test_a_holder_that_writes_first_wins(store: InMemoryTaskStore, clock: FakeClock) -> None:
    put(store, clock, "racy", S.RUNNING, lease=-1)
    original_save = store.save

    def holder_comes_back(
        snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        raise ConcurrencyConflict(snapshot.task_id, expect_version, expect_version + 1)

    store.save = holder_comes_back  # type: ignore[method-assign]
    try:
        report = reconcile(store, clock=clock, actor="x")
    finally:
        store.save = original_save  # type: ignore[method-assign]
    assert report.skipped == ("racy",)
    assert report.lost == ()
