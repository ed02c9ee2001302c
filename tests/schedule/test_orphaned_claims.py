"""A scheduler killed between claiming a firing and creating its run: another launches it.

The claim and the run are two writes. What a node killed between them leaves is
constructed here directly (the claim, no run), on every store; the survivor watches
the firings it lost and, half the misfire tolerance later, creates the missing run
under the firing's deterministic task id, so the firing runs exactly once. Past the
tolerance it is reported missed instead. A winner that was only slow loses the create
cleanly: still one run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._ticks import firing_task_id
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import FakeClock, wait_until

from .conftest import T0, Harness

AT = T0.replace(minute=1)
TASK_ID = firing_task_id("beat", AT)


def beat(ctx: Any) -> str:
    return "beat"


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.external_service)]
)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    def open_store(clock: FakeClock) -> Any:
        if request.param == "memory":
            return InMemoryTaskStore(clock=clock)
        if request.param == "sqlite":
            return SqliteTaskStore(tmp_path / "s.db", clock=clock)
        from chongming_task.stores._postgres import PostgresTaskStore

        return PostgresTaskStore(request.getfixturevalue("postgres_dsn"), clock=clock)

    h = Harness(open_store)
    try:
        yield h
    finally:
        h.close()


def survivor(harness: Harness) -> Any:
    scheduler = harness.node({"beat": beat}, owner="node-b", tick=1, misfire_tolerance=10)
    scheduler.add(Schedule(name="beat", task="beat", trigger=CronTrigger("* * * * *")))
    return scheduler


def test_a_claimed_firing_without_a_run_is_launched_by_a_survivor(harness: Harness) -> None:
    scheduler = survivor(harness)
    harness.step(59)  # 00:00:59: nothing due yet
    # node-a claims the 00:01 firing and is killed before it creates the run.
    assert harness.store.claim_firing("beat", AT, "node-a", TASK_ID)
    [at_instant] = harness.step(1)
    assert (at_instant.lost, at_instant.fired) == (1, [])
    assert harness.store.get(TASK_ID) is None
    [early] = harness.step(4)  # 4 s late: within half the tolerance, still waiting
    assert early.adopted == []
    [adopting] = harness.step(1)  # 5 s = tolerance / 2
    assert adopting.adopted == [TASK_ID]
    run = harness.settled(TASK_ID)
    assert run.status.value == "succeeded"
    assert run.owner == "node-b"
    assert harness.path(TASK_ID) == ["pending", "queued", "starting", "running", "succeeded"]
    assert run.metadata["scheduled_at"] == AT.isoformat()
    assert [r.task_id for r in harness.runs("beat")] == [TASK_ID]  # once
    wait_until(lambda: scheduler.get("beat").runs == 1)  # counted as it finished
    assert scheduler.get("beat").last_fired_at == AT


def test_past_the_tolerance_it_is_reported_missed_not_run(harness: Harness) -> None:
    survivor(harness)
    harness.step(59)
    assert harness.store.claim_firing("beat", AT, "node-a", TASK_ID)
    harness.step(1)
    [stalled] = harness.step(20)  # the survivor's next tick comes after the tolerance
    assert stalled.adopted == []
    assert stalled.missed["beat"] == AT
    assert "never launched it" in stalled.missed_reasons["beat"]
    assert harness.store.get(TASK_ID) is None


def test_a_slow_winner_and_the_watcher_create_one_run(harness: Harness) -> None:
    survivor(harness)
    harness.step(59)
    assert harness.store.claim_firing("beat", AT, "node-a", TASK_ID)
    harness.step(1)
    [adopting] = harness.step(5)
    assert adopting.adopted == [TASK_ID]
    harness.settled(TASK_ID)
    # The slow winner now launches its firing: refused by the unique task id.
    from chongming_task.errors import DuplicateTaskId

    slow = harness.node({"beat": beat}, owner="node-a", tick=1, misfire_tolerance=10)
    with pytest.raises(DuplicateTaskId):
        slow.controller.submit("beat", task_id=TASK_ID)
    assert [r.task_id for r in harness.runs("beat")] == [TASK_ID]
