"""reconcile() on every store: the transitions it writes, its two reads, and its dry run.

reconcile sorts tasks by their heads (``query_heads``, filtered by the store on
``lease_expired_by``), then marks the occupying ones a page at a time with one
``mark_lost_many`` (a ``query``, the state machine, and a version-guarded ``save_many``).
These cases pin what that must not change: every
``-> lost`` record in the history, the lease judged to the microsecond, a task that
moves between the two reads left alone, and a dry run that writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta, timezone
from typing import Any

import pytest

from chongming_task._model import FailureKind, TaskSnapshot, Transition
from chongming_task.controller import _reconcile as reconcile_module
from chongming_task.controller._reconcile import RECONCILE_TRIGGER, reconcile
from chongming_task.core.state_machine import StateMachine
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock

S = TaskStatus
RUNNING_PATH = [S.PENDING, S.QUEUED, S.STARTING, S.RUNNING]
WRITES = (
    "create",
    "create_many",
    "save",
    "save_many",
    "mark_lost_many",
    "append",
    "touch",
    "renew_leases",
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store_clock(clock: FakeClock) -> FakeClock:
    """The clock of the ``store`` fixture (tests/conftest.py): every store in turn."""
    return clock


def put(
    store: TaskStore, clock: FakeClock, task_id: str, *, running: bool, lease: timedelta | None
) -> TaskSnapshot:
    """A task of a dead owner, running or queued, whose lease ends ``lease`` from now."""
    machine = StateMachine.create(task_id, "job", owner="dead", clock=clock)
    machine.mark_queued()
    if running:
        machine.mark_starting()
        machine.mark_running()
    until = None if lease is None else clock.now() + lease
    snapshot = machine.snapshot.replace(lease_owner="dead", lease_until=until)
    store.create(snapshot, machine.transitions)
    return snapshot


def test_every_lost_transition_is_stored_and_announced(
    store: TaskStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile_module, "WRITE_BATCH", 2)  # three pages
    gone = timedelta(seconds=-5)
    before = {f"run-{i}": put(store, clock, f"run-{i}", running=True, lease=gone) for i in range(5)}
    put(store, clock, "idle", running=False, lease=gone)
    clock.advance(60)
    heard: list[tuple[Transition, TaskSnapshot]] = []
    report = reconcile(
        store, clock=clock, actor="node-b", on_lost=lambda t, s: heard.append((t, s))
    )

    assert report.lost == tuple(before)
    assert report.adoptable == ("idle",)
    assert report.skipped == ()
    assert [t.task_id for t, _ in heard] == list(before)
    for (announced, announced_snapshot), (task_id, old) in zip(heard, before.items(), strict=True):
        history = store.history(task_id)
        assert [t.to_status for t in history] == [*RUNNING_PATH, S.LOST]
        last = history[-1]
        assert last == announced
        assert last.from_status is S.RUNNING
        assert last.version == old.status_version + 1
        assert last.at == clock.now()
        assert last.actor == "node-b"
        assert last.trigger == RECONCILE_TRIGGER
        assert last.attempt == old.attempt
        stored = store.get(task_id)
        assert stored == announced_snapshot
        assert stored is not None
        assert stored.status is S.LOST
        assert stored.status_version == last.version
        assert stored.lease_until is None
        assert stored.finished_at == stored.updated_at == clock.now()
        assert stored.failure is not None
        assert stored.failure.kind is FailureKind.LOST
        assert stored.failure.retryable
        assert last.reason == stored.failure.message
        assert "dead" in stored.failure.message
        assert "node-b" in stored.failure.message
    assert len(store.history("idle")) == 2  # adoptable: reported, never written


def test_the_lease_is_judged_to_the_microsecond(store: TaskStore, clock: FakeClock) -> None:
    micro = timedelta(microseconds=1)
    put(store, clock, "ended-a-microsecond-ago", running=True, lease=-micro)
    put(store, clock, "ends-right-now", running=True, lease=timedelta(0))
    put(store, clock, "a-microsecond-left", running=True, lease=micro)
    put(store, clock, "queued-a-microsecond-left", running=False, lease=micro)
    put(store, clock, "queued-never-leased", running=False, lease=None)
    report = reconcile(store, clock=clock, actor="x")
    assert report.lost == ("ended-a-microsecond-ago", "ends-right-now")
    assert report.adoptable == ("queued-never-leased",)
    live = store.get("a-microsecond-left")
    assert live is not None
    assert live.status is S.RUNNING
    assert len(store.history("a-microsecond-left")) == len(RUNNING_PATH)


def test_each_lost_failure_names_its_own_holder_and_lease(
    store: TaskStore, clock: FakeClock
) -> None:
    # reconcile builds one failure per (status, holder, lease) kind: the same instant
    # written in another offset, or another holder, must still be told apart.
    gone = timedelta(seconds=-5)
    put(store, clock, "utc", running=True, lease=gone)
    put(store, clock, "utc-too", running=True, lease=gone)
    put(store, clock, "other-holder", running=True, lease=gone)
    put(store, clock, "plus-8", running=True, lease=gone)
    until = clock.now() + gone
    store.touch("other-holder", lease_owner="alive-elsewhere")
    store.touch("plus-8", lease_until=until.astimezone(timezone(timedelta(hours=8))))
    report = reconcile(store, clock=clock, actor="x")
    assert report.lost == ("utc", "utc-too", "other-holder", "plus-8")
    messages = {}
    for task_id in report.lost:
        stored = store.get(task_id)
        assert stored is not None
        assert stored.failure is not None
        messages[task_id] = stored.failure.message
    assert messages["utc"] == messages["utc-too"]
    assert f"expired {until.isoformat()})" in messages["utc"]
    assert "supervisor dead " in messages["utc"]
    assert "supervisor alive-elsewhere " in messages["other-holder"]
    assert (
        f"expired {until.astimezone(timezone(timedelta(hours=8))).isoformat()})"
        in (messages["plus-8"])
    )


def _after(store: TaskStore, name: str, then: Callable[[], None]) -> None:
    """Run ``then`` right after the store's ``name`` method returns (once)."""
    original = getattr(store, name)
    done = False

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal done
        result = original(*args, **kwargs)
        if not done:
            done = True
            then()
        return result

    setattr(store, name, wrapped)


def test_a_task_that_moves_between_the_two_reads_is_left_alone(
    store: TaskStore, clock: FakeClock
) -> None:
    gone = timedelta(seconds=-1)
    for task_id in ("steady", "stopping", "renewed", "paused", "finished"):
        put(store, clock, task_id, running=True, lease=gone)

    def holders_come_back() -> None:
        # After the heads were read: one holder renews its lease, the others move on.
        store.touch("renewed", lease_until=clock.now() + timedelta(seconds=30))
        steps = {
            "stopping": ["mark_stopping"],  # still occupying: still lost, at its new version
            "paused": ["mark_pausing", "mark_paused"],
            "finished": ["mark_succeeded"],
        }
        for task_id, names in steps.items():
            current = store.get(task_id)
            assert current is not None
            machine = StateMachine(current, clock=clock)
            for name in names:
                getattr(machine, name)()
            store.save(
                machine.snapshot,
                expect_version=current.status_version,
                transitions=machine.transitions[-len(names) :],
            )

    _after(store, "query_heads", holders_come_back)
    report = reconcile(store, clock=clock, actor="x")
    assert report.lost == ("steady", "stopping")
    assert report.skipped == ("renewed", "paused", "finished")
    stopping = store.history("stopping")
    assert [t.to_status for t in stopping] == [*RUNNING_PATH, S.STOPPING, S.LOST]
    assert stopping[-1].from_status is S.STOPPING
    expected = {"renewed": S.RUNNING, "paused": S.PAUSED, "finished": S.SUCCEEDED}
    for task_id, status in expected.items():
        stored = store.get(task_id)
        assert stored is not None
        assert stored.status is status
        assert S.LOST not in [t.to_status for t in store.history(task_id)]


def _holder_ends(store: TaskStore, clock: FakeClock, task_id: str) -> None:
    """The task's live holder writes its end, under ``expect_version`` as a holder does."""
    current = store.get(task_id)
    assert current is not None
    machine = StateMachine(current, clock=clock)
    machine.mark_succeeded(outcome=1)
    store.save(
        machine.snapshot,
        expect_version=current.status_version,
        transitions=machine.transitions[-1:],
    )


def test_a_holder_that_writes_between_the_stores_own_read_and_write_wins(
    store: TaskStore, clock: FakeClock
) -> None:
    # A holder writing between mark_lost_many's read and its version-guarded writes
    # keeps its write, and the other tasks of the page are marked.
    for task_id in ("a", "racy", "z"):
        put(store, clock, task_id, running=True, lease=timedelta(seconds=-1))

    _after(store, "query", lambda: _holder_ends(store, clock, "racy"))
    heard: list[str] = []
    report = reconcile(store, clock=clock, actor="x", on_lost=lambda t, s: heard.append(t.task_id))
    assert report.lost == ("a", "z")
    assert report.skipped == ("racy",)
    assert heard == ["a", "z"]
    racy = store.get("racy")
    assert racy is not None
    assert racy.status is S.SUCCEEDED
    assert [t.to_status for t in store.history("racy")][-1] is S.SUCCEEDED
    for task_id in ("a", "z"):
        assert [t.to_status for t in store.history(task_id)] == [*RUNNING_PATH, S.LOST]


def test_a_dry_run_reads_heads_only_and_writes_nothing(store: TaskStore, clock: FakeClock) -> None:
    put(store, clock, "lost", running=True, lease=timedelta(seconds=-1))
    put(store, clock, "idle", running=False, lease=timedelta(seconds=-1))
    put(store, clock, "live", running=True, lease=timedelta(seconds=10))
    calls: list[str] = []
    for name in (*WRITES, "query"):
        original = getattr(store, name)

        def spy(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(_name)
            return _original(*args, **kwargs)

        setattr(store, name, spy)
    report = reconcile(store, clock=clock, actor="x", dry_run=True)
    assert report.dry_run
    assert (report.lost, report.adoptable, report.skipped) == (("lost",), ("idle",), ())
    assert calls == []
    lost = store.get("lost")
    assert lost is not None
    assert lost.status is S.RUNNING
    assert len(store.history("lost")) == len(RUNNING_PATH)
