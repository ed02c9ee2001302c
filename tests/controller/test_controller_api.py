"""Controller APIs the other layers build on: events, blocked submissions, metadata, leases."""

from __future__ import annotations

import threading
from collections import defaultdict
from datetime import timedelta

import pytest

from chongming_task import Controller, TaskContext
from chongming_task._model import TaskSnapshot, Transition
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import FakeClock, wait_until

from ._helpers import Gate, S, path

pytestmark = pytest.mark.timeout(60)


def test_subscribers_see_every_transition_in_order_after_write_through() -> None:
    store = InMemoryTaskStore()
    controller = Controller(store=store, max_parallel=3)
    controller.register("noop", lambda ctx, n: n)
    seen: dict[str, list[int]] = defaultdict(list)
    stored_versions: list[bool] = []
    lock = threading.Lock()

    def subscriber(transition: Transition, snapshot: TaskSnapshot) -> None:
        with lock:
            seen[transition.task_id].append(transition.version)
        stored = store.get(transition.task_id)
        stored_versions.append(stored is not None and stored.status_version >= transition.version)

    def broken(transition: Transition, snapshot: TaskSnapshot) -> None:
        raise RuntimeError("exporter down")

    controller.subscribe(subscriber)
    controller.subscribe(broken)
    inline_threads: set[str] = set()
    unsubscribe = controller.subscribe(
        lambda t, s: inline_threads.add(threading.current_thread().name), inline=True
    )
    runs = [controller.submit("noop", n) for n in range(20)]
    controller.wait_all(timeout=30)
    unsubscribe()
    wait_until(lambda: sum(len(v) for v in seen.values()) == 20 * 5)
    assert all(versions == [0, 1, 2, 3, 4] for versions in seen.values())
    assert set(seen) == {run.task_id for run in runs}
    assert all(stored_versions)  # delivered after the write-through
    assert controller.subscriber_errors == 100  # counted, never raised into a run
    assert all(run.status is S.SUCCEEDED for run in runs)
    assert "chongming-events" not in " ".join(inline_threads)
    controller.close()


def test_blocked_submission_release_skip_cancel(gate: Gate) -> None:
    received: list[object] = []

    def node(ctx: TaskContext) -> None:
        received.append(dict(ctx.upstream))
        gate.hold(ctx)

    controller = Controller(max_parallel=1)
    controller.register("node", node)
    root = controller.submit("node", task_id="root")
    waiting = [
        controller.submit("node", task_id=f"n{i}", blocked=True, metadata={"pipeline": "p"})
        for i in range(3)
    ]
    wait_until(lambda: root.status is S.RUNNING)
    assert controller.active_count == 1
    assert controller.queued_count == 0  # blocked nodes are not queued
    assert controller.stats().blocked == 3
    internal = controller._internal
    internal.release("n0", upstream={"root": 1})
    assert controller.queued_count == 1
    internal.skip("n1", reason="upstream failed")
    internal.cancel("n2", reason="fail_fast")
    with pytest.raises(ConfigurationError, match="not held"):
        internal.release("ghost")
    gate.open()
    controller.wait_all(timeout=30)
    assert received == [{}, {"root": 1}]
    assert path(waiting[0].transitions) == [
        "pending",
        "blocked",
        "queued",
        "starting",
        "running",
        "succeeded",
    ]
    assert path(waiting[1].transitions) == ["pending", "blocked", "skipped"]
    assert path(waiting[2].transitions) == ["pending", "blocked", "cancelled"]
    assert controller.get("n0").metadata == {"pipeline": "p"}  # type: ignore[union-attr]
    assert controller.active_count == 0
    controller.close()


def test_a_pause_before_start_gives_the_slot_back_and_resume_requeues(gate: Gate) -> None:
    controller = Controller(max_parallel=1)
    controller.register("hold", gate.hold)
    first = controller.submit("hold", task_id="first")
    second = controller.submit("hold", task_id="second")
    third = controller.submit("hold", task_id="third")
    wait_until(lambda: first.status is S.RUNNING)
    assert controller.pause("second")
    assert controller.queued_count == 1
    assert controller.resume("second")  # back of the queue
    controller.stop("first")
    wait_until(lambda: third.status is S.RUNNING)
    assert second.status is S.QUEUED
    gate.open()
    controller.wait_all(timeout=30)
    assert path(second.transitions) == [
        "pending",
        "queued",
        "paused",
        "queued",
        "starting",
        "running",
        "succeeded",
    ]
    controller.close()


def test_a_run_started_by_hand_is_still_accounted(gate: Gate) -> None:
    controller = Controller(max_parallel=1)
    controller.register("hold", gate.hold)
    first = controller.submit("hold", task_id="first")
    second = controller.submit("hold", task_id="second")
    wait_until(lambda: first.status is S.RUNNING)
    second.start()  # bypasses admission: the ledger must still reflect it
    wait_until(lambda: second.status is S.RUNNING)
    assert controller.active_count == 2
    assert controller.queued_count == 0
    gate.open()
    controller.wait_all(timeout=30)
    assert controller.active_count == 0
    controller.close()


def test_store_failure_at_creation_heals_on_the_next_write() -> None:
    store = InMemoryTaskStore()
    controller = Controller(store=store)
    controller.register("noop", lambda ctx: 1)
    original = store.create
    calls = 0

    def flaky(snapshot: TaskSnapshot, transitions: object = ()) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise StoreError("connection reset")
        original(snapshot, transitions)  # type: ignore[arg-type]

    store.create = flaky  # type: ignore[method-assign]
    run = controller.submit("noop", task_id="t")
    assert run.wait(10).ok
    assert controller.persist_failures[0].operation == "create"
    assert path(store.history("t")) == ["pending", "queued", "starting", "running", "succeeded"]
    assert store.get("t").status is S.SUCCEEDED  # type: ignore[union-attr]
    controller.close()


def test_leases_are_written_and_renewed_by_one_thread() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore(clock=clock)
    release = threading.Event()
    controller = Controller(store=store, clock=clock, owner="node-a", lease_ttl=30)
    controller.register("wait", lambda ctx: release.wait(10))
    controller.register("progress", lambda ctx: (ctx.progress(3, total=10), release.wait(10)))
    controller.submit("wait", task_id="a")
    controller.submit("progress", task_id="b")
    for task_id in ("a", "b"):
        stored = store.get(task_id)
        assert stored is not None
        assert stored.lease_owner == "node-a"
        assert stored.lease_until == clock.now() + timedelta(seconds=30)
    keepers = [t for t in threading.enumerate() if t.name == "chongming-leases[node-a]"]
    assert len(keepers) == 1  # one thread, not one per task
    wait_until(lambda: controller.active_count == 2)
    # Both bodies are running (admission only means "starting") and b reported progress.
    wait_until(lambda: controller.run("b").snapshot.progress is not None)  # type: ignore[union-attr]
    start = clock.now()
    for _ in range(12):  # a tick is 1 s; renewal every 10 s
        clock.wait_for_sleepers(1)
        clock.advance(1)
    wait_until(
        lambda: store.get("a").lease_until >= start + timedelta(seconds=40)  # type: ignore[union-attr,operator]
    )
    wait_until(lambda: store.get("b").progress is not None)  # type: ignore[union-attr]
    assert store.get("b").progress.done == 3  # type: ignore[union-attr]
    assert store.get("b").status_version == 3  # type: ignore[union-attr]  # touch: same version
    release.set()
    controller.wait_all(timeout=10)
    assert store.get("a").lease_until is None  # type: ignore[union-attr]
    controller.close(close_store=True)  # closing the store also wakes the poller


def test_reconcile_publishes_the_lost_transitions() -> None:
    from chongming_task.core.state_machine import StateMachine

    clock = FakeClock()
    with InMemoryTaskStore(clock=clock) as store:
        machine = StateMachine.create("orphan", "job", owner="dead-node", clock=clock)
        machine.mark_queued()
        machine.mark_starting()
        machine.mark_running()
        store.create(
            machine.snapshot.replace(
                lease_owner="dead-node", lease_until=clock.now() - timedelta(seconds=1)
            ),
            machine.transitions,
        )
        heard: list[tuple[Transition, TaskSnapshot]] = []
        controller = Controller(store, clock=clock)
        controller.subscribe(lambda t, s: heard.append((t, s)), inline=True)
        assert controller.reconcile(dry_run=True).lost == ("orphan",)
        assert heard == []  # a dry run says nothing
        assert controller.reconcile().lost == ("orphan",)
        assert [(t.to_status, t.version, s.status) for t, s in heard] == [(S.LOST, 4, S.LOST)]
        controller.close()


def test_subscribe_commands_reports_each_applied_command(gate: Gate) -> None:
    from datetime import datetime

    from chongming_task.stores._base import Command

    with InMemoryTaskStore() as store:
        holder = Controller(store=store, owner="holder")
        console = Controller(store=store, owner="console")
        holder.register("hold", gate.hold)
        applied: list[tuple[Command, datetime]] = []
        unsubscribe = holder.subscribe_commands(lambda c, at: applied.append((c, at)))

        def broken(command: Command, at: datetime) -> None:
            raise ZeroDivisionError("a broken listener")

        holder.subscribe_commands(broken)  # a broken listener changes nothing
        run = holder.submit("hold", task_id="t")
        wait_until(lambda: run.status is S.RUNNING)
        assert console.stop("t", reason="ops") is True
        outcome = run.wait(10)
        assert outcome.status is S.STOPPED
        wait_until(lambda: len(applied) == 1)
        command, applied_at = applied[0]
        assert (command.action, command.target, command.issued_by) == ("stop", "t", "console")
        assert applied_at >= command.issued_at
        unsubscribe()
        holder.close()
        console.close()
