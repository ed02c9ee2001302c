"""The loop plays the controller's release rehearsal while it waits for an instant.

The rehearsal only warms code (``controller/rehearsal.py``); these tests pin down what
it must never do: start anything before the instant, change an armed run, make the
loop late for the instant or run on a test clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from chongming_task import Controller, InMemoryTaskStore
from chongming_task.controller.rehearsal import ReleaseRehearsal
from chongming_task.core.clock import SystemClock
from chongming_task.runtime import TaskContext
from chongming_task.schedule import loop
from chongming_task.schedule.loop import RELEASE_TRIGGER, FiringLoop
from chongming_task.schedule.scheduler import Scheduler
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from .conftest import Harness
from .test_armed_firing import FIRST, FIRST_ID, Bodies, stored, to_just_before


class Plays:
    """A stand-in ``warm``: counts plays, each taking ``cost`` seconds, ``left`` of them."""

    def __init__(self, left: int, cost: float = 0.0) -> None:
        self.left = left
        self.cost = cost
        self.calls: list[float] = []

    def __call__(self) -> bool:
        self.calls.append(time.time())
        end = time.perf_counter() + self.cost
        while time.perf_counter() < end:
            pass
        self.left -= 1
        return self.left > 0


def test_the_spin_plays_while_it_fits_and_never_ends_early() -> None:
    plays = Plays(left=100, cost=0.0001)
    end = time.time() + 0.02
    loop._spin_until(end, plays)
    assert time.time() >= end
    assert plays.calls, "20 ms leave room for plays of 0.1 ms"
    # A play starts only while more than its expected cost is left.
    assert all(end - began > 0.0001 for began in plays.calls)


def test_the_spin_stops_playing_once_nothing_is_left() -> None:
    plays = Plays(left=2)
    end = time.time() + 0.02
    loop._spin_until(end, plays)
    assert len(plays.calls) == 2
    assert time.time() >= end


def test_a_play_that_would_not_fit_is_not_started() -> None:
    plays = Plays(left=100)
    loop._spin_until(time.time() + loop.WARM_FIRST / 2, plays)
    assert plays.calls == []


def test_the_wait_with_a_rehearsal_never_returns_before_the_instant() -> None:
    clock = SystemClock()
    waiter = SimpleNamespace(clock=clock)
    plays = Plays(left=100)
    instant = clock.now() + timedelta(milliseconds=15)
    assert FiringLoop._await(waiter, instant, None, warm=plays)  # type: ignore[arg-type]
    assert clock.now() >= instant


def test_a_stopped_wait_plays_nothing() -> None:
    clock = SystemClock()
    waiter = SimpleNamespace(clock=clock)
    plays = Plays(left=100)
    stop = threading.Event()
    stop.set()
    instant = clock.now() + timedelta(milliseconds=50)
    assert not FiringLoop._await(waiter, instant, stop, warm=plays)  # type: ignore[arg-type]
    assert plays.calls == []


def _first_firing_on_the_test_clock(harness: Harness, scheduler: Scheduler) -> None:
    """Arm the first firing of a 10 s schedule, see it blocked just before its instant,
    reach the instant and see it succeed."""
    scheduler.every("beat", "beat", 10)
    scheduler.start()
    harness.clock.wait_for_sleepers(1)
    to_just_before(harness, FIRST)
    stored(harness, FIRST_ID, TaskStatus.BLOCKED)
    harness.clock.advance(1)
    assert harness.settled(FIRST_ID).status is TaskStatus.SUCCEEDED


def test_no_rehearsal_on_a_test_clock(harness: Harness) -> None:
    """The fake clock's waits are not timed: there is nothing to warm up for."""
    bodies = Bodies(harness)
    scheduler = harness.node({"beat": bodies}, tick=60)
    controller = scheduler.controller
    asked: list[list[str]] = []
    controller.rehearse_release = lambda ids: asked.append(list(ids))  # type: ignore[method-assign,assignment,func-returns-value]
    _first_firing_on_the_test_clock(harness, scheduler)
    assert asked == []


def test_on_the_system_clock_the_armed_run_is_rehearsed_blocked_and_released_on_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real per-second schedule: the rehearsal is made for the armed run while it is
    ``blocked``, and the run's recorded trajectory is the usual one, released at or
    after its scheduled time."""
    started: dict[str, float] = {}

    def body(ctx: TaskContext) -> None:
        started[ctx.task_id] = time.time()

    store = InMemoryTaskStore()
    seen: list[tuple[list[str], list[str]]] = []
    with Controller(store=store, max_parallel=2, owner="node-a") as controller:
        controller.register("tick", body)
        rehearse = controller.rehearse_release

        def recording(task_ids: Iterable[str]) -> ReleaseRehearsal:
            ids = list(task_ids)
            runs = [controller.run(task_id) for task_id in ids]
            seen.append((ids, [run.status.value for run in runs if run is not None]))
            return rehearse(ids)

        monkeypatch.setattr(controller, "rehearse_release", recording)
        scheduler = Scheduler(controller)
        scheduler.cron("tick", "tick", "* * * * * *")
        scheduler.start()
        try:
            wait_until(lambda: started, timeout=5, message="a per-second schedule firing")
        finally:
            scheduler.close()
        controller.wait_all(timeout=10)
    assert started, "a per-second schedule fired within 5 s"
    task_id = next(iter(started))
    assert seen
    assert seen[0] == ([task_id], ["blocked"])
    snapshot = store.get(task_id)
    assert snapshot is not None
    scheduled = snapshot.metadata["scheduled_at"]
    assert isinstance(scheduled, str)
    assert started[task_id] >= datetime.fromisoformat(scheduled).timestamp()
    history = store.history(task_id)
    assert [t.to_status.value for t in history] == [
        "pending",
        "blocked",
        "queued",
        "starting",
        "running",
        "succeeded",
    ]
    assert history[2].trigger == RELEASE_TRIGGER


def test_no_rehearsal_is_made_for_an_instant_too_close() -> None:
    """Making one takes a fraction of a millisecond: it must not make the firing late."""
    clock = SystemClock()
    asked: list[list[str]] = []

    class Made:
        def play(self) -> bool:
            return False

    def rehearse_release(ids: Iterable[str]) -> Made:
        asked.append(list(ids))
        return Made()

    owner = SimpleNamespace(
        clock=clock,
        controller=SimpleNamespace(rehearse_release=rehearse_release),
        arming_seconds=0.0,
    )
    group = [SimpleNamespace(task_id="armed", run=object())]
    near = clock.now() + timedelta(seconds=loop.REHEARSE_AHEAD / 2)
    assert FiringLoop._rehearsal(owner, group, near) is None  # type: ignore[arg-type]
    assert asked == []
    far = clock.now() + timedelta(seconds=1)
    assert FiringLoop._rehearsal(owner, group, far) is not None  # type: ignore[arg-type]
    assert asked == [["armed"]]
    assert owner.arming_seconds > 0  # counted in the arming time the lead adapts to
    nothing_armed = [SimpleNamespace(task_id="skipped", run=None)]
    assert FiringLoop._rehearsal(owner, nothing_armed, far) is None  # type: ignore[arg-type]


def test_the_loop_marks_the_next_firing_quiet_on_the_system_clock_only() -> None:
    """Marked a tick ahead, so a command poller already waiting sees the window."""
    marked: list[datetime] = []
    soon = datetime(2030, 1, 1)
    owner = SimpleNamespace(
        clock=SystemClock(),
        next_due=lambda: soon,
        controller=SimpleNamespace(quiet_around=marked.append),
    )
    FiringLoop._quiet_ahead(owner)  # type: ignore[arg-type]
    assert marked == [soon]
    owner.next_due = lambda: None
    FiringLoop._quiet_ahead(owner)  # type: ignore[arg-type]
    assert marked == [soon]


def test_no_quiet_window_on_a_test_clock(harness: Harness) -> None:
    scheduler = harness.node({"beat": Bodies(harness)}, tick=60)
    controller = scheduler.controller
    marked: list[datetime] = []
    controller.quiet_around = marked.append  # type: ignore[method-assign]
    _first_firing_on_the_test_clock(harness, scheduler)
    assert marked == []
