"""The background loop works ahead of each instant: claim and create early, start on time.

Driven by the scheduler's own loop (``start()``) on a FakeClock: the loop wakes
``lead`` seconds before a firing, claims it and creates its run ``blocked``; only when
the clock reaches the scheduled time is the run released. Every step is observed in
the store, never timed.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from chongming_task._model import TaskSnapshot
from chongming_task.core.state_machine import StateMachine
from chongming_task.runtime import TaskContext
from chongming_task.schedule._launcher import ORPHAN_TRIGGER
from chongming_task.schedule._loop import RELEASE_TRIGGER
from chongming_task.schedule._scheduler import DEFAULT_LEAD
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from .conftest import T0, Harness

ARMED_THEN_DONE = ["pending", "blocked", "queued", "starting", "running", "succeeded"]
FIRST = T0 + timedelta(seconds=10)  # the first firing of a 10 s interval after T0
FIRST_ID = "beat@20260105T000010Z"


class Bodies:
    """Records when (on the fake clock) each body started; may hold bodies back."""

    def __init__(self, harness: Harness, *, hold: bool = False) -> None:
        self.clock = harness.clock
        self.started: dict[str, datetime] = {}
        self.gate = threading.Event()
        if not hold:
            self.gate.set()

    def __call__(self, ctx: TaskContext) -> str:
        self.started[ctx.task_id] = self.clock.now()
        self.gate.wait(10)
        return "beat"


def stored(harness: Harness, task_id: str, status: TaskStatus) -> TaskSnapshot:
    return harness.status(task_id, status)


def to_just_before(harness: Harness, instant: datetime) -> None:
    """Move the fake clock to ``lead`` before ``instant``: the loop wakes to arm it."""
    harness.clock.advance((instant - harness.clock.now()).total_seconds() - DEFAULT_LEAD)


def test_a_firing_is_armed_ahead_and_starts_at_its_scheduled_time(harness: Harness) -> None:
    bodies = Bodies(harness)
    scheduler = harness.node({"beat": bodies}, tick=60)
    scheduler.every("beat", "beat", 10)
    scheduler.start()
    harness.clock.wait_for_sleepers(1)  # the loop's first tick is done; it sleeps
    to_just_before(harness, FIRST)

    armed = stored(harness, FIRST_ID, TaskStatus.BLOCKED)
    assert harness.path(FIRST_ID) == ["pending", "blocked"]
    blocked = harness.store.history(FIRST_ID)[-1]
    assert blocked.reason == f"armed: waiting for its scheduled time {FIRST.isoformat()}"
    assert armed.metadata["runtime"]["armed"] is True
    assert armed.metadata["scheduled_at"] == FIRST.isoformat()
    assert armed.started_at is None
    assert scheduler.claims_won == 1  # claimed before the instant
    assert FIRST_ID not in bodies.started  # and not started before it

    harness.clock.advance(DEFAULT_LEAD)
    done = harness.settled(FIRST_ID)
    assert done.status is TaskStatus.SUCCEEDED
    assert harness.path(FIRST_ID) == ARMED_THEN_DONE
    history = harness.store.history(FIRST_ID)
    released = history[2]
    assert released.trigger == RELEASE_TRIGGER
    assert released.at >= FIRST
    assert history[3].at >= FIRST  # -> starting: never before the scheduled time
    assert bodies.started[FIRST_ID] >= FIRST
    wait_until(lambda: scheduler.get("beat").runs == 1)
    assert scheduler.get("beat").last_fired_at == FIRST


def test_closing_before_the_instant_records_the_armed_firing_as_skipped(
    harness: Harness,
) -> None:
    bodies = Bodies(harness)
    scheduler = harness.node({"beat": bodies}, tick=60)
    scheduler.every("beat", "beat", 10)
    scheduler.start()
    harness.clock.wait_for_sleepers(1)
    to_just_before(harness, FIRST)
    stored(harness, FIRST_ID, TaskStatus.BLOCKED)

    scheduler.close()

    skipped = harness.settled(FIRST_ID)
    assert skipped.status is TaskStatus.SKIPPED
    assert harness.path(FIRST_ID) == ["pending", "blocked", "skipped"]
    reason = harness.store.history(FIRST_ID)[-1].reason
    assert reason is not None
    assert "closed before the scheduled time" in reason
    assert FIRST_ID not in bodies.started  # the body never ran
    # The claim stays: no other scheduler fires this instant a second time.
    assert not harness.store.claim_firing("beat", FIRST, "node-b", FIRST_ID)


def test_a_skip_is_judged_at_the_instant_not_when_armed(harness: Harness) -> None:
    """overlap=forbid: the run in progress when the next firing is armed ends before
    its instant, so the next firing runs instead of being skipped."""
    bodies = Bodies(harness, hold=True)
    scheduler = harness.node({"beat": bodies}, tick=60)
    scheduler.every("beat", "beat", 10, max_runtime=3600)
    scheduler.start()
    harness.clock.wait_for_sleepers(1)
    to_just_before(harness, FIRST)
    stored(harness, FIRST_ID, TaskStatus.BLOCKED)
    harness.clock.advance(DEFAULT_LEAD)
    stored(harness, FIRST_ID, TaskStatus.RUNNING)  # held in its body

    second_at = FIRST + timedelta(seconds=10)
    second_id = "beat@20260105T000020Z"
    wait_until(lambda: scheduler.get("beat").next_run_at == second_at)
    to_just_before(harness, second_at)
    # Claimed ahead, but not created: a skip would apply right now.
    wait_until(lambda: scheduler.claims_won == 2, message="the second firing to be claimed")
    assert harness.store.get(second_id) is None

    bodies.gate.set()
    harness.settled(FIRST_ID)
    harness.clock.advance(DEFAULT_LEAD)
    second = harness.settled(second_id)
    assert second.status is TaskStatus.SUCCEEDED
    assert harness.path(second_id) == ["pending", "queued", "starting", "running", "succeeded"]
    assert bodies.started[second_id] >= second_at


def test_a_firing_orphaned_by_a_dead_process_is_ended_skipped_not_left_blocking(
    harness: Harness,
) -> None:
    """A process died after arming a firing: the run stays blocked with a lease that
    runs out. The next overlap=forbid check ends it skipped and fires normally."""
    bodies = Bodies(harness)
    scheduler = harness.node({"beat": bodies}, tick=60)
    scheduler.every("beat", "beat", 60)
    orphan_id = "beat@20260105T000000Z"
    machine = StateMachine.create(
        orphan_id,
        "beat",
        owner="dead-node",
        metadata={"schedule": "beat", "scheduled_at": T0.isoformat()},
        clock=harness.clock,
    )
    machine.mark_blocked(reason=f"armed: waiting for its scheduled time {T0.isoformat()}")
    harness.store.create(
        machine.snapshot.replace(lease_owner="dead-node", lease_until=T0 + timedelta(seconds=30)),
        machine.transitions,
    )

    (report,) = harness.step(60)  # 00:01:00: the lease expired at 00:00:30
    assert report.fired == ["beat@20260105T000100Z"]
    orphan = harness.store.get(orphan_id)
    assert orphan is not None
    assert orphan.status is TaskStatus.SKIPPED
    assert orphan.lease_until is None
    last = harness.store.history(orphan_id)[-1]
    assert last.trigger == ORPHAN_TRIGGER
    assert last.reason is not None
    assert "never started" in last.reason
    assert "dead-node" in last.reason
    fired = harness.settled("beat@20260105T000100Z")
    assert fired.status is TaskStatus.SUCCEEDED  # not skipped behind the orphan


def test_an_unfinished_run_with_a_live_lease_still_forbids_overlap(harness: Harness) -> None:
    scheduler = harness.node({"beat": Bodies(harness)}, tick=60)
    scheduler.every("beat", "beat", 60)
    other_id = "beat@20260105T000000Z"
    machine = StateMachine.create(
        other_id, "beat", owner="node-b", metadata={"schedule": "beat"}, clock=harness.clock
    )
    machine.mark_queued()
    harness.store.create(
        machine.snapshot.replace(lease_owner="node-b", lease_until=T0 + timedelta(hours=1)),
        machine.transitions,
    )
    (report,) = harness.step(60)
    skipped = harness.settled(report.fired[0])
    assert skipped.status is TaskStatus.SKIPPED
    assert skipped.metadata["skip"]["reason"].startswith(f"previous run {other_id!r}")
    assert harness.store.get(other_id).status is TaskStatus.QUEUED  # type: ignore[union-attr]


def test_a_released_run_is_stored_as_starting_before_its_body_runs(tmp_path: Path) -> None:
    """The armed path starts runs through ``release``: the store must know a body may
    run before it does (reconcile would otherwise call a crashed run adoptable)."""
    from chongming_task import Controller
    from chongming_task.stores._sqlite import SqliteTaskStore

    store = SqliteTaskStore(str(tmp_path / "tasks.db"))
    seen: dict[str, str] = {}

    def body(ctx: TaskContext) -> None:
        snapshot = store.get(ctx.task_id)
        assert snapshot is not None
        seen[ctx.task_id] = snapshot.status.value

    with Controller(store, owner="node-a") as controller:
        controller.register("body", body)
        for index in range(3):
            controller.submit("body", task_id=f"t{index}", blocked="armed: test")
        failures = controller._internal.release_many(
            ["t0", "t1", "t2"], reason="due", trigger="test:due"
        )
        assert failures == {}
        controller.wait_all(timeout=10)
    # ``-> running`` is deferred, so it may or may not have been flushed yet.
    assert set(seen) == {"t0", "t1", "t2"}
    assert set(seen.values()) <= {"starting", "running"}, seen
    store.close()


def test_the_lead_is_bounded(harness: Harness) -> None:

    from chongming_task.errors import ConfigurationError
    from chongming_task.schedule._scheduler import MAX_LEAD, Scheduler

    controller = harness.node({"beat": Bodies(harness)}).controller
    with pytest.raises(ConfigurationError, match="lead must be at most"):
        Scheduler(controller, lead=MAX_LEAD + 1)
    with pytest.raises(ConfigurationError, match="lead must be > 0 seconds"):
        Scheduler(controller, lead=0)
