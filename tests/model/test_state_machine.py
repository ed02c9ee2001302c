"""StateMachine behaviour: the §1.3 example, trajectories, guards of §9.3, escapes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from chongming_task._model import Failure, FailureKind, Progress
from chongming_task.core.state_machine import StateMachine, Triggers
from chongming_task.errors import AttemptsExhausted, ConfigurationError, InvalidTransition
from chongming_task.states import TaskStatus
from chongming_task.testing import FakeClock

S = TaskStatus
T0 = datetime(2026, 1, 1, tzinfo=UTC)
BOOM = Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True)


def trail(machine: StateMachine) -> list[tuple[str | None, str, str]]:
    return [
        (None if t.from_status is None else t.from_status.value, t.to_status.value, t.trigger)
        for t in machine.transitions
    ]


def machine_at(clock: FakeClock, max_attempts: int = 3) -> StateMachine:
    return StateMachine.create("t1", "extract", max_attempts=max_attempts, clock=clock)


def test_guide_1_3_example_verbatim() -> None:
    from chongming_task.core.state_machine import StateMachine
    from chongming_task.states import TaskStatus

    machine = StateMachine.create("t1", "抽取", max_attempts=3)
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    machine.mark_succeeded(outcome={"rows": 42})

    # 非法转移会抛异常，而不是静默忽略
    with pytest.raises(InvalidTransition) as info:
        machine.mark_running()
    assert str(info.value) == (
        "illegal state transition: succeeded -> running; "
        "action 'executor:launched'; allowed now: none (terminal)"
    )
    assert info.value.current is TaskStatus.SUCCEEDED
    assert info.value.target is TaskStatus.RUNNING
    assert info.value.action == "executor:launched"
    assert info.value.allowed == ()
    assert machine.status is TaskStatus.SUCCEEDED
    assert machine.snapshot.outcome == {"rows": 42}
    assert [t.version for t in machine.transitions] == [0, 1, 2, 3, 4]


def test_message_lists_allowed_targets_sorted() -> None:
    machine = machine_at(FakeClock())
    with pytest.raises(InvalidTransition) as info:
        machine.mark_running()
    assert str(info.value) == (
        "illegal state transition: pending -> running; action 'executor:launched'; "
        "allowed now: blocked, cancelled, queued, skipped, stopped"
    )


def test_create_starts_pending_at_version_zero_with_a_creation_record() -> None:
    clock = FakeClock(T0)
    machine = StateMachine.create(
        "t1",
        "extract",
        label="抽取-1",
        tags=["db"],
        priority=5,
        bucket=3,
        bucket_key="tenant-7",
        owner="host:1",
        metadata={"schedule": "nightly", "nested": {"a": [1, 2.5, None]}},
        clock=clock,
    )
    snap = machine.snapshot
    assert (snap.status, snap.status_version, snap.attempt, snap.max_attempts) == (
        S.PENDING,
        0,
        0,
        1,
    )
    assert snap.created_at == snap.updated_at == T0
    assert snap.tags == frozenset({"db"})
    assert snap.metadata == {"schedule": "nightly", "nested": {"a": [1, 2.5, None]}}
    (record,) = machine.transitions
    assert (record.from_status, record.to_status, record.trigger, record.version) == (
        None,
        S.PENDING,
        Triggers.CREATED,
        0,
    )
    assert record.actor == "host:1"


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"task_id": ""}, "task_id"),
        ({"task_id": "a\x00b"}, "task_id"),
        ({"task_id": 7}, "task_id"),
        ({"name": ""}, "name"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"tags": "db"}, "tags"),
        ({"tags": [1]}, "tags"),
        ({"priority": "high"}, "priority"),
        ({"bucket": -1}, "bucket"),
        ({"label": 3}, "label"),
        ({"metadata": {"when": datetime(2026, 1, 1)}}, "metadata"),
        ({"metadata": {1: "x"}}, "metadata"),
        ({"metadata": ["x"]}, "metadata"),
    ],
)
def test_create_rejects_bad_arguments(kwargs: dict[str, object], names: str) -> None:
    args: dict[str, object] = {"task_id": "t1", "name": "extract", **kwargs}
    task_id = args.pop("task_id")
    name = args.pop("name")
    with pytest.raises(ConfigurationError, match=names):
        StateMachine.create(task_id, name, **args)  # type: ignore[arg-type]


def test_happy_path_timestamps_and_trail() -> None:
    clock = FakeClock(T0)
    machine = machine_at(clock)
    clock.advance(1)
    machine.mark_queued()
    clock.advance(1)
    machine.mark_starting(executor="thread")
    clock.advance(1)
    machine.mark_running()
    clock.advance(10)
    machine.mark_succeeded(outcome=[1, "two"])
    snap = machine.snapshot
    assert trail(machine) == [
        (None, "pending", "machine:created"),
        ("pending", "queued", "controller:queued"),
        ("queued", "starting", "executor:starting"),
        ("starting", "running", "executor:launched"),
        ("running", "succeeded", "runtime:returned"),
    ]
    assert snap.queued_at == T0 + timedelta(seconds=1)
    assert snap.started_at == snap.first_started_at == T0 + timedelta(seconds=2)
    assert snap.finished_at == snap.updated_at == T0 + timedelta(seconds=13)
    assert snap.elapsed == 11.0
    assert snap.attempt == 1
    assert snap.failure is None
    assert machine.transitions[2].reason == "executor=thread"


def test_retry_wait_then_second_attempt_keeps_first_start() -> None:
    clock = FakeClock(T0)
    machine = machine_at(clock)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    clock.advance(5)
    machine.mark_retry_wait(BOOM, delay=2.0)
    snap = machine.snapshot
    assert snap.started_at is None
    assert snap.failure == BOOM
    assert machine.transitions[-1].reason == "retry in 2s: boom"
    clock.advance(2)
    machine.mark_starting()
    snap = machine.snapshot
    assert snap.attempt == 2
    assert snap.failure is None
    assert snap.first_started_at == T0
    assert snap.started_at == T0 + timedelta(seconds=7)
    assert [t.attempt for t in machine.transitions] == [0, 0, 1, 1, 1, 2]


def test_mark_starting_past_max_attempts_raises_attempts_exhausted() -> None:
    machine = machine_at(FakeClock(), max_attempts=2)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.mark_retry_wait(BOOM)
    machine.mark_starting()
    machine.mark_running()
    with pytest.raises(AttemptsExhausted) as info:
        machine.mark_retry_wait(BOOM)
    assert (info.value.attempt, info.value.max_attempts) == (2, 2)
    assert "2 of 2 attempts" in str(info.value)
    machine.force_transition(S.QUEUED, actor="ops", reason="requeue by hand")
    version = machine.snapshot.status_version
    with pytest.raises(AttemptsExhausted):
        machine.mark_starting()
    assert machine.snapshot.status_version == version
    assert machine.status is S.QUEUED


def test_mark_running_needs_a_started_attempt() -> None:
    machine = machine_at(FakeClock())
    machine.force_transition(S.STARTING, actor="ops", reason="test the guard")
    assert machine.snapshot.started_at is None
    with pytest.raises(InvalidTransition, match="no started attempt"):
        machine.mark_running()


def test_mark_running_follows_the_guide_guard_started_at() -> None:
    """Guide §9.3: the guard of mark_running() is ``started_at``, nothing else."""
    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.request_pause()
    machine.mark_paused()
    assert machine.paused_in_place
    machine.mark_running()  # an in-place pause: started_at is set
    assert machine.status is S.RUNNING
    assert machine.snapshot.started_at is not None


def test_abort_pause_only_from_pausing() -> None:
    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.request_pause()
    with pytest.raises(InvalidTransition, match="only legal from pausing"):
        machine.abort_pause()
    machine.resume()
    machine.mark_starting()
    machine.mark_running()
    machine.request_pause()
    machine.abort_pause(reason="no checkpoint within 5s")
    assert machine.status is S.RUNNING
    assert machine.transitions[-1].trigger == "runtime:pause_aborted"
    assert machine.snapshot.started_at is not None


def test_pause_before_start_resumes_to_queued() -> None:
    clock = FakeClock(T0)
    machine = machine_at(clock)
    machine.mark_queued()
    assert machine.request_pause(actor="ops") is S.PAUSED
    assert not machine.paused_in_place
    clock.advance(3)
    assert machine.resume(actor="ops") is S.QUEUED
    assert machine.snapshot.queued_at == T0 + timedelta(seconds=3)
    assert trail(machine)[-2:] == [
        ("queued", "paused", "control:pause_requested"),
        ("paused", "queued", "control:resumed"),
    ]


def test_pause_in_place_resumes_to_running() -> None:
    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    assert machine.request_pause() is S.PAUSING
    machine.mark_paused()
    assert machine.paused_in_place
    assert machine.resume() is S.RUNNING
    assert [t for _f, t, _tr in trail(machine)][-4:] == ["running", "pausing", "paused", "running"]


def test_requeue_from_pause_in_place_forgets_the_attempt() -> None:
    """A requeued task has no current attempt; pausing it again must not resume to running."""
    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.request_pause()
    machine.mark_paused()
    machine.mark_queued(reason="carrier gone, start over")
    assert machine.snapshot.started_at is None
    machine.request_pause()
    assert not machine.paused_in_place
    assert machine.resume() is S.QUEUED


def test_stop_is_immediate_without_a_slot_and_buffered_with_one() -> None:
    machine = machine_at(FakeClock())
    machine.mark_queued()
    assert machine.request_stop(actor="ops", reason="not needed") is S.STOPPED
    failure = machine.snapshot.failure
    assert failure is not None
    assert (failure.kind, failure.retryable, failure.message) == (
        FailureKind.CANCELLED,
        False,
        "not needed",
    )
    assert machine.transitions[-1].actor == "ops"

    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    assert machine.request_stop(reason="maintenance") is S.STOPPING
    assert not machine.can_stop()
    with pytest.raises(InvalidTransition, match="cannot be stopped"):
        machine.request_stop()
    machine.mark_succeeded(outcome=1)  # §4.4: it finished right after the request
    assert machine.status is S.SUCCEEDED


def test_lost_and_skipped_and_cancelled_default_failures() -> None:
    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.mark_lost(reason="lease expired")
    lost = machine.snapshot.failure
    assert lost is not None
    assert (lost.kind, lost.retryable, lost.message) == (FailureKind.LOST, True, "lease expired")

    machine = machine_at(FakeClock())
    machine.mark_skipped(reason="condition false")
    skipped = machine.snapshot.failure
    assert skipped is not None
    assert skipped.kind is FailureKind.CONDITION_FALSE

    machine = machine_at(FakeClock())
    machine.mark_blocked()
    machine.mark_cancelled(reason="sibling failed")
    cancelled = machine.snapshot.failure
    assert cancelled is not None
    assert (cancelled.kind, cancelled.retryable) == (FailureKind.CANCELLED, False)


def test_running_body_may_end_skipped_outside_the_table() -> None:
    """§9.2 has no running -> skipped: mark_skipped() refuses it, body_skipped() is
    the explicit operation a body raising TaskSkipped goes through."""
    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    assert not machine.can(S.SKIPPED)
    with pytest.raises(InvalidTransition):
        machine.mark_skipped(reason="nothing to sync")
    machine.body_skipped(reason="nothing to sync")
    assert machine.status is S.SKIPPED
    assert machine.snapshot.finished_at is not None
    assert machine.snapshot.failure is not None
    assert machine.snapshot.failure.kind is FailureKind.CONDITION_FALSE
    assert machine.transitions[-1].trigger == "runtime:skipped"
    with pytest.raises(InvalidTransition, match="only legal from running"):
        machine.body_skipped(reason="again")


def test_retry_keeps_history_and_grants_attempts() -> None:
    clock = FakeClock(T0)
    machine = machine_at(clock, max_attempts=1)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.mark_failed(BOOM)
    history = machine.transitions
    machine.retry(extra_attempts=2, actor="ops", reason="fixed the config")
    snap = machine.snapshot
    assert snap.status is S.QUEUED
    assert (snap.attempt, snap.max_attempts) == (1, 3)
    assert (snap.failure, snap.outcome, snap.finished_at, snap.started_at) == (
        None,
        None,
        None,
        None,
    )
    assert machine.transitions[: len(history)] == history
    assert trail(machine)[-1] == ("failed", "queued", "machine:retry")
    machine.mark_starting()
    assert machine.snapshot.attempt == 2


def test_retry_validates_extra_attempts() -> None:
    machine = machine_at(FakeClock())
    machine.mark_cancelled(reason="x")
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigurationError, match="extra_attempts"):
            machine.retry(extra_attempts=bad)  # type: ignore[arg-type]
    assert machine.status is S.CANCELLED


def test_reset_discards_attempts_but_keeps_the_audit_trail() -> None:
    machine = machine_at(FakeClock())
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.mark_succeeded(outcome=1)
    history = machine.transitions
    with pytest.raises(ConfigurationError, match=r"reset\(confirm=True\)"):
        machine.reset(confirm="yes")  # type: ignore[arg-type]
    machine.reset(confirm=True, actor="ops", reason="rerun")
    snap = machine.snapshot
    assert (snap.status, snap.attempt, snap.started_at, snap.first_started_at) == (
        S.PENDING,
        0,
        None,
        None,
    )
    assert (snap.outcome, snap.finished_at, snap.queued_at) == (None, None, None)
    assert machine.transitions[: len(history)] == history
    assert machine.transitions[-1].version == snap.status_version == len(history)


def test_force_transition_audit_and_fields() -> None:
    clock = FakeClock(T0)
    machine = machine_at(clock)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    machine.mark_lost(reason="lease expired")
    verdict = Failure(kind=FailureKind.EXCEPTION, message="checked: it failed")
    machine.force_transition(
        S.FAILED, actor="alice", reason="checked side effects", failure=verdict
    )
    forced = machine.snapshot
    assert forced.failure == verdict
    assert forced.finished_at is not None
    machine.force_transition(S.QUEUED, actor="alice", reason="run again")
    requeued = machine.snapshot
    assert requeued.finished_at is None
    assert requeued.started_at is None
    with pytest.raises(ConfigurationError, match="TaskStatus"):
        machine.force_transition("nope", actor="alice", reason="x")  # type: ignore[arg-type]
    machine.force_transition("paused", actor="alice", reason="by value")  # type: ignore[arg-type]
    assert machine.status is S.PAUSED


def test_update_changes_fields_without_a_transition() -> None:
    machine = machine_at(FakeClock())
    before = machine.transitions
    snap = machine.update(progress=Progress(done=3, total=10), pid=1234)
    assert snap.progress == Progress(done=3, total=10)
    assert snap.status_version == 0
    assert machine.transitions == before
    with pytest.raises(ConfigurationError, match="mark_"):
        machine.update(status=S.RUNNING)
    with pytest.raises(ConfigurationError, match="unknown snapshot field"):
        machine.update(colour="red")


def test_rehydrated_machine_continues_the_versions() -> None:
    clock = FakeClock(T0)
    first = machine_at(clock)
    first.mark_queued()
    second = StateMachine(first.snapshot, first.transitions, clock=clock)
    second.mark_starting()
    assert [t.version for t in second.transitions] == [0, 1, 2]
    assert "version=2" in repr(second)


def test_custom_trigger_is_recorded_and_named_in_errors() -> None:
    machine = machine_at(FakeClock())
    machine.mark_queued(trigger="scheduler:fired", actor="scheduler")
    assert machine.transitions[-1].trigger == "scheduler:fired"
    assert machine.transitions[-1].actor == "scheduler"
    with pytest.raises(InvalidTransition, match="action 'pipeline:released'"):
        machine.mark_blocked(trigger="pipeline:released")
