"""Write-through, persist failures, events and the command poller, without real runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.controller._commands import CommandPoller
from chongming_task.controller._control import control_task
from chongming_task.controller._events import EventBus
from chongming_task.controller._writethrough import MAX_PERSIST_FAILURES, RETRY_MAX, WriteThrough
from chongming_task.core._clock import SystemClock
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._base import Command, TaskStore
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import FakeClock, wait_until

S = TaskStatus


@pytest.fixture
def store() -> Iterator[InMemoryTaskStore]:
    with InMemoryTaskStore() as store:
        yield store


class FlakyStore(InMemoryTaskStore):
    """Fails every write while ``broken`` is set."""

    broken = False

    def create(self, snapshot: TaskSnapshot, transitions: Any = ()) -> None:
        if self.broken:
            raise StoreError("disk full")
        super().create(snapshot, transitions)

    def save(self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Any = ()) -> None:
        if self.broken:
            raise StoreError("disk full")
        super().save(snapshot, expect_version=expect_version, transitions=transitions)


def walk(writer: WriteThrough, machine: StateMachine, *steps: str) -> None:
    for step in steps:
        getattr(machine, step)()
        writer.write(machine.transitions[-1], machine.snapshot)


def test_every_transition_is_written_with_the_lease() -> None:
    clock = FakeClock()
    with InMemoryTaskStore(clock=clock) as store:
        writer = WriteThrough(store, clock=clock, owner="node-a", lease_ttl=30)
        machine = StateMachine.create("t1", "job", clock=clock)
        writer.create(machine.snapshot, machine.transitions)
        walk(writer, machine, "mark_queued", "mark_starting", "mark_running")
        stored = store.get("t1")
        assert stored is not None
        assert stored.status is S.RUNNING
        assert stored.lease_owner == "node-a"
        assert stored.lease_until == datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)
        walk(writer, machine, "mark_succeeded")
        stored = store.get("t1")
        assert stored is not None
        assert stored.lease_until is None  # nobody needs to hold a finished task
        assert [t.to_status for t in store.history("t1")] == [
            S.PENDING,
            S.QUEUED,
            S.STARTING,
            S.RUNNING,
            S.SUCCEEDED,
        ]
        assert writer.is_current("t1", 4)
        assert not writer.persist_failures


def test_duplicate_ids_are_refused_by_the_store() -> None:
    with InMemoryTaskStore() as store:
        store.create(StateMachine.create("dup", "job").snapshot)
        writer = WriteThrough(store, clock=SystemClock(), owner="a", lease_ttl=30)
        machine = StateMachine.create("dup", "job")
        with pytest.raises(ConfigurationError, match="already exists"):
            writer.create(machine.snapshot, machine.transitions)
        with pytest.raises(ConfigurationError, match="already exists"):
            writer.create(machine.snapshot, machine.transitions)  # no leftover state


def test_store_failures_are_kept_never_raised_and_writes_heal() -> None:
    clock = FakeClock()  # the retries wait on it: none runs until the test moves time
    with FlakyStore() as store:
        writer = WriteThrough(store, clock=clock, owner="a", lease_ttl=30)
        machine = StateMachine.create("t1", "job")
        store.broken = True
        writer.create(machine.snapshot, machine.transitions)  # does not raise
        walk(writer, machine, "mark_queued", "mark_starting")
        assert [f.operation for f in writer.persist_failures] == ["create", "create", "create"]
        assert writer.persist_failures[0].task_id == "t1"
        assert "disk full" in writer.persist_failures[0].error
        assert store.get("t1") is None
        store.broken = False
        walk(writer, machine, "mark_running")
        # Created late, with the whole trail that was missing.
        assert [t.to_status for t in store.history("t1")] == [
            S.PENDING,
            S.QUEUED,
            S.STARTING,
            S.RUNNING,
        ]
        store.broken = True
        walk(writer, machine, "mark_succeeded")
        assert store.get("t1").status is S.RUNNING  # type: ignore[union-attr]
        assert [p.status for p in writer.pending()] == ["succeeded"]
        store.broken = False

        # The terminal write is not lost: it is retried until the store takes it. Time
        # moves on while we wait (the retrier may not be waiting on the clock yet).
        def retried() -> bool:
            clock.advance(RETRY_MAX)
            return store.get("t1").status is S.SUCCEEDED  # type: ignore[union-attr]

        wait_until(retried, message="the retried terminal write")
        assert writer.pending() == []
        assert writer.failure_count >= 4
        writer.stop()


def test_persist_failures_keep_the_last_twenty() -> None:
    with InMemoryTaskStore() as store:
        writer = WriteThrough(store, clock=SystemClock(), owner="a", lease_ttl=30)
        for index in range(MAX_PERSIST_FAILURES + 5):
            writer.record(f"t{index}", "touch", StoreError("x"))
        assert len(writer.persist_failures) == MAX_PERSIST_FAILURES
        assert writer.persist_failures[0].task_id == "t5"
        assert writer.failure_count == MAX_PERSIST_FAILURES + 5


def test_a_conflict_is_recorded_not_overwritten() -> None:
    with InMemoryTaskStore() as store:
        writer = WriteThrough(store, clock=SystemClock(), owner="a", lease_ttl=30)
        machine = StateMachine.create("t1", "job")
        writer.create(machine.snapshot, machine.transitions)
        walk(writer, machine, "mark_queued")
        # Another process (a reconcile elsewhere) moves the task on.
        other = StateMachine(store.get("t1"))  # type: ignore[arg-type]
        other.mark_stopped(reason="elsewhere")
        store.save(other.snapshot, expect_version=1, transitions=other.transitions[-1:])
        walk(writer, machine, "mark_starting")
        assert "ConcurrencyConflict" in writer.persist_failures[-1].error
        assert store.get("t1").status is S.STOPPED  # type: ignore[union-attr]


# ---------------------------------------------------------------- events


def transition(task_id: str, version: int) -> tuple[Transition, TaskSnapshot]:
    machine = StateMachine.create(task_id, "job")
    return machine.transitions[0].__class__(
        task_id=task_id,
        from_status=S.PENDING,
        to_status=S.QUEUED,
        trigger="t",
        version=version,
        at=machine.snapshot.created_at,
    ), machine.snapshot


def test_events_in_order_and_subscriber_errors_are_contained() -> None:
    bus = EventBus()
    seen: list[tuple[str, int]] = []
    inline_seen: list[int] = []
    thread_names: set[str] = set()

    def record(t: Transition, s: TaskSnapshot) -> None:
        thread_names.add(threading.current_thread().name)
        seen.append((t.task_id, t.version))

    def broken(t: Transition, s: TaskSnapshot) -> None:
        raise RuntimeError("exporter down")

    bus.subscribe(record)
    bus.subscribe(broken)
    unsubscribe = bus.subscribe(lambda t, s: inline_seen.append(t.version), inline=True)
    for version in range(1, 101):
        bus.publish(*transition("a", version))
    unsubscribe()
    unsubscribe()  # idempotent
    bus.publish(*transition("a", 101))
    assert bus.flush(5)
    assert seen == [("a", v) for v in range(1, 102)]
    assert inline_seen == list(range(1, 101))
    assert bus.errors == 101
    assert thread_names == {"chongming-events"}
    bus.close()


def test_a_slow_subscriber_does_not_block_the_publisher() -> None:
    bus = EventBus()
    gate = threading.Event()

    def slow(transition: Transition, snapshot: TaskSnapshot) -> None:
        gate.wait(5)

    bus.subscribe(slow)
    for version in range(10):
        bus.publish(*transition("a", version))  # returns at once
    assert not bus.flush(0.05)
    gate.set()
    assert bus.flush(5)
    bus.close()


# ---------------------------------------------------------------- commands


class FakeRun:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None]] = []

    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        self.calls.append(("stop", reason, actor))
        return True

    def pause(
        self, timeout: float | None = None, *, actor: str | None = None, reason: str | None = None
    ) -> bool:
        self.calls.append(("pause", reason, actor))
        return True

    def resume(self, *, actor: str | None = None, reason: str | None = None) -> bool:
        self.calls.append(("resume", reason, actor))
        return True


def stored_task(store: InMemoryTaskStore, task_id: str, owner: str) -> TaskSnapshot:
    machine = StateMachine.create(task_id, "job", owner=owner)
    store.create(machine.snapshot.replace(lease_owner=owner), machine.transitions)
    snapshot = store.get(task_id)
    assert snapshot is not None
    return snapshot


def issue(
    store: InMemoryTaskStore, task_id: str, action: str, reason: str | None = None
) -> Command:
    """Control ``task_id`` as "ops" through the one control path; the command it wrote."""
    done = control_task(store, task_id, action, actor="ops", clock=SystemClock(), reason=reason)
    assert done.outcome == "requested"
    return list(store._commands.values())[-1]


def make_poller(store: TaskStore, owner: str, runs: dict[str, FakeRun]) -> CommandPoller:
    failures: list[tuple[str | None, str, BaseException]] = []
    return CommandPoller(
        store=store,
        owner=owner,
        lookup=runs.get,
        interval=0.05,
        lease=30,
        pause_timeout=1,
        on_failure=lambda *args: failures.append(args),
    )


def test_the_holder_applies_commands_with_the_issuer_as_actor(store: InMemoryTaskStore) -> None:
    run = FakeRun()
    poller = make_poller(store, "worker-1", {"job-1": run})
    stored_task(store, "job-1", "worker-1")
    stop = issue(store, "job-1", "stop", reason="maintenance")
    assert stop.target_owner == "worker-1"
    pause = issue(store, "job-1", "pause")
    poller.start()
    try:
        wait_until(lambda: len(run.calls) == 2, timeout=5)
        wait_until(
            lambda: all(
                (c := store.get_command(x.command_id)) is not None and c.status == "completed"
                for x in (stop, pause)
            ),
            timeout=5,
        )
    finally:
        poller.stop()
    assert ("stop", "maintenance", "ops") in run.calls
    assert ("pause", None, "ops") in run.calls
    assert store.get_command(stop.command_id).result == {"applied": True}  # type: ignore[union-attr]


def unaddressed(action: str, target: str) -> Command:
    """A task command addressed to no holder, as versions before the one control path
    wrote for a task nobody held."""
    return Command.new(
        kind="task",
        target=target,
        action=action,
        issued_by="ops",
        issued_at=SystemClock().now(),
        payload={"reason": "legacy"},
        target_owner=None,
    )


def test_an_unaddressed_command_for_an_unknown_task_is_completed_once(
    store: InMemoryTaskStore,
) -> None:
    # Released, it was claimed again on every poll (about 10 times a second), forever.
    command = store.submit_command(unaddressed("stop", "job-9"))
    poller = make_poller(store, "bystander", {})
    assert poller.poll_once() == (1, 0)
    stored = store.get_command(command.command_id)
    assert stored is not None
    assert (stored.status, stored.claims) == ("completed", 1)
    assert stored.result == {"applied": False, "outcome": "not_found"}
    assert poller.poll_once() == (0, 0)


def test_an_unaddressed_command_is_settled_by_the_one_control_path(
    store: InMemoryTaskStore,
) -> None:
    """Still unheld: applied by a guarded write; held meanwhile: forwarded to the holder."""
    queued = StateMachine.create("job-q", "job", owner=None)
    queued.mark_queued()
    store.create(queued.snapshot, queued.transitions)
    stored_task(store, "job-h", "worker-1")
    stop = store.submit_command(unaddressed("stop", "job-q"))
    pause = store.submit_command(unaddressed("pause", "job-h"))
    assert make_poller(store, "bystander", {}).poll_once() == (2, 0)
    assert store.get("job-q").status is S.STOPPED  # type: ignore[union-attr]
    last = store.history("job-q")[-1]
    assert (last.actor, last.reason) == ("ops", "legacy")
    assert store.get_command(stop.command_id).result == {  # type: ignore[union-attr]
        "applied": True,
        "outcome": "applied",
    }
    assert store.get_command(pause.command_id).result == {  # type: ignore[union-attr]
        "applied": False,
        "outcome": "requested",
    }
    run = FakeRun()
    assert make_poller(store, "worker-1", {"job-h": run}).poll_once() == (1, 0)
    assert run.calls == [("pause", "legacy", "ops")]


def test_a_command_for_another_owner_is_never_claimed(store: InMemoryTaskStore) -> None:
    stored_task(store, "job-1", "worker-1")
    command = issue(store, "job-1", "stop")
    assert make_poller(store, "worker-2", {}).poll_once() == (0, 0)
    assert store.get_command(command.command_id).claims == 0  # type: ignore[union-attr]


def test_a_command_addressed_to_us_for_a_task_we_lost_is_completed(
    store: InMemoryTaskStore,
) -> None:
    stored_task(store, "job-1", "worker-1")
    command = issue(store, "job-1", "resume")
    assert make_poller(store, "worker-1", {}).poll_once() == (1, 0)
    stored = store.get_command(command.command_id)
    assert stored is not None
    assert stored.status == "completed"
    assert stored.result == {"applied": False, "error": "task is not held"}


def raw_command(action: str, *, target: str = "job-1", target_owner: str | None) -> Command:
    """A command as another (older or foreign) process may have written it."""
    return Command.new(
        kind="task",
        target=target,
        action=action,
        issued_by="cli",
        issued_at=SystemClock().now(),
        target_owner=target_owner,
    )


def test_unknown_actions_are_refused_when_issued(store: InMemoryTaskStore) -> None:
    stored_task(store, "job-1", "w")
    with pytest.raises(ValueError, match="unknown task action 'explode'; valid actions are "):
        control_task(store, "job-1", "explode", actor="ops", clock=SystemClock())
    with pytest.raises(ConfigurationError, match="pause, resume, stop"):
        control_task(store, "missing", "explode", actor="ops", clock=SystemClock())
    assert store.claim_commands("anyone", lease=5) == [], "nothing may have been written"


def test_a_poller_never_claims_an_action_it_does_not_apply(store: InMemoryTaskStore) -> None:
    submit = store.submit_command(raw_command("submit", target="new-task", target_owner=None))
    odd = store.submit_command(raw_command("explode", target_owner="w"))
    assert make_poller(store, "w", {"job-1": FakeRun()}).poll_once() == (0, 0)
    for command in (submit, odd):
        stored = store.get_command(command.command_id)
        assert stored is not None
        assert (stored.status, stored.claims) == ("pending", 0)


def test_an_occupying_task_nobody_holds_is_refused_not_written(store: InMemoryTaskStore) -> None:
    """Running with no holder is lost (reconcile's business): an action would leave it
    waiting for nobody, and a command would be addressed to nobody."""
    machine = StateMachine.create("orphan", "job", owner=None)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    store.create(machine.snapshot, machine.transitions)
    done = control_task(store, "orphan", "stop", actor="ops", clock=SystemClock())
    assert (done.outcome, done.accepted) == ("refused", False)
    assert store.get("orphan").status is S.RUNNING  # type: ignore[union-attr]
    assert store._commands == {}


def test_a_task_that_changes_on_every_read_is_a_conflict_not_a_loop(
    store: InMemoryTaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = StateMachine.create("busy", "job", owner=None)
    machine.mark_queued()
    store.create(machine.snapshot, machine.transitions)
    writes: list[int] = []

    def always_beaten(snapshot: TaskSnapshot, **kwargs: object) -> None:
        writes.append(snapshot.status_version)
        raise ConcurrencyConflict(snapshot.task_id, 1, 2)

    monkeypatch.setattr(store, "save_unheld", always_beaten)
    with pytest.raises(ConcurrencyConflict, match="'busy'"):
        control_task(store, "busy", "pause", actor="ops", clock=SystemClock())
    assert len(writes) == 20
    assert store.get("busy").status is S.QUEUED  # type: ignore[union-attr]
    assert store._commands == {}
