"""TransitionObserver hooks and the controller's delivery guarantees they rely on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.controller import Controller
from chongming_task.core.state_machine import StateMachine
from chongming_task.observability import TransitionObserver, timeout_scope
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.run import TaskRun
from chongming_task.runtime._context import TaskContext
from chongming_task.states import TaskStatus
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock, wait_until

from .conftest import Gate

S = TaskStatus


class Recorder(TransitionObserver):
    """Records every hook call as (hook, to_status, attempt)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str, int]] = []
        self.transitions: list[Transition] = []
        self._lock = threading.Lock()

    def _add(self, hook: str, transition: Transition, extra: str = "") -> None:
        with self._lock:
            self.calls.append((hook + extra, transition.to_status.value, transition.attempt))

    def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        with self._lock:
            self.transitions.append(transition)

    def on_task_created(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self._add("created", transition)

    def on_attempt_started(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self._add("attempt_started", transition)

    def on_attempt_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self._add("attempt_finished", transition)

    def on_retry_scheduled(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self._add("retry_scheduled", transition)

    def on_timeout(self, transition: Transition, snapshot: TaskSnapshot, scope: str) -> None:
        self._add("timeout", transition, f":{scope}")

    def on_run_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        self._add("run_finished", transition)

    def finished(self) -> bool:
        with self._lock:
            return any(hook == "run_finished" for hook, _, _ in self.calls)


def path(transitions: list[Transition]) -> list[str]:
    return [t.to_status.value for t in transitions]


def flaky_body(failures: int) -> Callable[[TaskContext], int]:
    calls = {"n": 0}

    def body(ctx: TaskContext) -> int:
        calls["n"] += 1
        if calls["n"] <= failures:
            raise RuntimeError(f"attempt {calls['n']} failed")
        return calls["n"]

    return body


def test_hooks_of_a_retried_then_succeeded_run(controller: Controller) -> None:
    controller.register(
        "flaky", flaky_body(1), retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0))
    )
    recorder = Recorder()
    recorder.attach(controller)
    run = controller.submit("flaky")
    assert run.wait(5).ok
    wait_until(recorder.finished, message="the observer heard the end")
    assert path(list(run.transitions)) == [
        "pending", "queued", "starting", "running", "retry_wait", "starting", "running",
        "succeeded",
    ]  # fmt: skip
    assert recorder.transitions == list(run.transitions)
    assert recorder.calls == [
        ("created", "pending", 0),
        ("attempt_started", "starting", 1),
        ("attempt_finished", "retry_wait", 1),
        ("retry_scheduled", "retry_wait", 1),
        ("attempt_started", "starting", 2),
        ("attempt_finished", "succeeded", 2),
        ("run_finished", "succeeded", 2),
    ]


def test_hooks_of_a_stopped_run(controller: Controller, gate: Gate) -> None:
    controller.register("held", gate.hold)
    recorder = Recorder()
    recorder.attach(controller)
    run = controller.submit("held")
    wait_until(lambda: run.status is S.RUNNING, message="running")
    assert controller.stop(run.task_id, reason="operator says so")
    assert run.wait(5).status is S.STOPPED
    wait_until(recorder.finished, message="the observer heard the end")
    assert path(recorder.transitions) == [
        "pending", "queued", "starting", "running", "stopping", "stopped",
    ]  # fmt: skip
    assert recorder.calls == [
        ("created", "pending", 0),
        ("attempt_started", "starting", 1),
        ("attempt_finished", "stopped", 1),
        ("run_finished", "stopped", 1),
    ]


def test_timeout_hook_names_the_scope(controller: Controller, gate: Gate) -> None:
    controller.register("slow", gate.hold, timeout=Timeout(per_attempt=0.05))
    recorder = Recorder()
    recorder.attach(controller)
    run = controller.submit("slow")
    outcome = run.wait(5)
    assert outcome.status is S.FAILED
    wait_until(recorder.finished, message="the observer heard the end")
    assert path(recorder.transitions) == ["pending", "queued", "starting", "running", "failed"]
    assert recorder.transitions[-1].trigger == "supervisor:timeout_attempt"
    assert timeout_scope(recorder.transitions[-1]) == "attempt"
    assert ("timeout:attempt", "failed", 1) in recorder.calls


def fails_first_attempt(ctx: TaskContext) -> int:
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return ctx.attempt


def test_order_per_task_matches_the_store(controller: Controller) -> None:
    controller.register(
        "flaky", fails_first_attempt, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0))
    )
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()

    def subscriber(transition: Transition, snapshot: TaskSnapshot) -> None:
        assert snapshot.status_version == transition.version
        assert snapshot.status is transition.to_status
        with lock:
            seen.setdefault(transition.task_id, []).append(transition.version)

    controller.subscribe(subscriber)
    runs = [controller.submit("flaky") for _ in range(30)]
    for run in runs:
        assert run.wait(10).ok
    wait_until(lambda: all(len(seen.get(r.task_id, ())) == 8 for r in runs), message="all heard")
    for run in runs:
        assert seen[run.task_id] == [t.version for t in controller.history(run.task_id)]
        assert seen[run.task_id] == list(range(8))
    assert controller.subscriber_errors == 0


def test_a_slow_subscriber_does_not_block_tasks(controller: Controller) -> None:
    controller.register("quick", lambda ctx: 1)
    release = threading.Event()
    heard: list[Transition] = []

    def slow(transition: Transition, snapshot: TaskSnapshot) -> None:
        release.wait(10)
        heard.append(transition)

    controller.subscribe(slow)
    try:
        runs = [controller.submit("quick") for _ in range(5)]
        for run in runs:  # every run finishes while the subscriber is stuck on the first event
            assert run.wait(5).ok
        assert len(heard) == 0
    finally:
        release.set()
    wait_until(lambda: len(heard) == 5 * 5, message="the backlog is delivered")
    by_task: dict[str, list[str]] = {}
    for transition in heard:
        by_task.setdefault(transition.task_id, []).append(transition.to_status.value)
    assert all(
        statuses == ["pending", "queued", "starting", "running", "succeeded"]
        for statuses in by_task.values()
    )


def test_a_failing_subscriber_is_counted_and_logged(
    controller: Controller, caplog: pytest.LogCaptureFixture
) -> None:
    controller.register("quick", lambda ctx: 7)

    class Broken(TransitionObserver):
        def __init__(self) -> None:
            super().__init__()
            self.finished = 0

        def on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
            raise RuntimeError("exporter down")

        def on_run_finished(self, transition: Transition, snapshot: TaskSnapshot) -> None:
            self.finished += 1  # later hooks of the same transition still run

    queued, inline = Broken(), Broken()
    queued.attach(controller)
    inline.attach(controller, inline=True)
    caplog.set_level(logging.ERROR, logger="chongming_task.controller")
    run = controller.submit("quick")
    outcome = run.wait(5)
    assert outcome.ok
    assert outcome.value == 7
    assert path(list(run.transitions)) == ["pending", "queued", "starting", "running", "succeeded"]
    # Five transitions, each raised once by the queued and once by the inline subscription.
    wait_until(lambda: controller.subscriber_errors == 10, message="errors counted")
    wait_until(lambda: queued.finished == inline.finished == 1, message="later hooks ran")
    assert any("exporter down" in (r.exc_text or "") for r in caplog.records)
    assert controller.get(run.task_id).status is S.SUCCEEDED  # type: ignore[union-attr]


def test_an_observer_is_a_plain_run_listener() -> None:
    recorder = Recorder()
    run = TaskRun(lambda ctx: 3, name="solo")
    run.add_listener(recorder)
    run.start()
    assert run.wait(5).value == 3
    assert [hook for hook, _, _ in recorder.calls] == [
        "attempt_started",
        "attempt_finished",
        "run_finished",
    ]


def test_detach_stops_delivery(controller: Controller) -> None:
    controller.register("quick", lambda ctx: 1)
    recorder = Recorder()
    recorder.attach(controller)
    recorder.detach()
    recorder.detach()  # idempotent
    other = Recorder()
    other.attach(controller)
    controller.submit("quick").wait(5)
    wait_until(other.finished, message="the other observer heard the end")
    assert recorder.calls == []


def test_reconcile_lost_transitions_reach_subscribers() -> None:
    clock = FakeClock()
    store = InMemoryTaskStore(clock=clock)
    machine = StateMachine.create("orphan", "job", owner="dead-node", clock=clock)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    expired = clock.now() - timedelta(seconds=1)
    store.create(
        machine.snapshot.replace(lease_owner="dead-node", lease_until=expired),
        machine.transitions,
    )
    heard: list[Transition] = []
    with Controller(store, clock=clock) as controller:
        controller.subscribe(lambda t, s: heard.append(t), inline=True)
        report = controller.reconcile()
        assert report.lost == ("orphan",)
    store.close()
    assert [t.to_status for t in heard] == [S.LOST]


@pytest.mark.parametrize("listening", [False, True])
def test_reconcile_decodes_lost_snapshots_only_for_subscribers(
    tmp_path: Path, listening: bool
) -> None:
    clock = FakeClock()
    store = SqliteTaskStore(tmp_path / "tasks.db", clock=clock)
    machine = StateMachine.create("orphan", "job", owner="dead-node", clock=clock)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    store.create(
        machine.snapshot.replace(lease_owner="dead-node", lease_until=clock.now()),
        machine.transitions,
    )
    asked: list[bool] = []
    original = store.mark_lost_many

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["snapshots"])
        return original(*args, **kwargs)

    store.mark_lost_many = spy  # type: ignore[method-assign]
    heard: list[tuple[Transition, TaskSnapshot]] = []
    with Controller(store, clock=clock) as controller:
        if listening:
            controller.subscribe(lambda t, s: heard.append((t, s)), inline=True)
        assert controller.reconcile().lost == ("orphan",)
    assert asked == [listening]
    if listening:
        [(transition, snapshot)] = heard
        assert (transition.to_status, snapshot.status) == (S.LOST, S.LOST)
        assert snapshot == store.get("orphan")
        assert store.history("orphan")[-1] == transition
    store.close()


def test_a_pause_in_place_does_not_end_the_attempt(controller: Controller, gate: Gate) -> None:
    controller.register("held", gate.hold)
    recorder = Recorder()
    recorder.attach(controller)
    run = controller.submit("held")
    wait_until(lambda: run.status is S.RUNNING, message="running")
    assert controller.pause(run.task_id, timeout=5)
    assert controller.resume(run.task_id)
    gate.open()
    assert run.wait(5).ok
    wait_until(recorder.finished, message="the observer heard the end")
    assert path(recorder.transitions) == [
        "pending", "queued", "starting", "running", "pausing", "paused", "running", "succeeded",
    ]  # fmt: skip
    assert recorder.calls == [
        ("created", "pending", 0),
        ("attempt_started", "starting", 1),
        ("attempt_finished", "succeeded", 1),
        ("run_finished", "succeeded", 1),
    ]
