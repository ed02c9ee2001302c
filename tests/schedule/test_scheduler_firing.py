"""The Scheduler fires on time, once, on the right node: FakeClock, in-memory store."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy
from chongming_task.runtime import TaskContext
from chongming_task.schedule import CronTrigger, IntervalTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.testing import wait_until

from .conftest import T0, Harness

DONE = ["pending", "queued", "starting", "running", "succeeded"]


def report(ctx: TaskContext, region: str = "all") -> str:
    return region


def test_cron_and_interval_fire_over_three_days(harness: Harness) -> None:
    scheduler = harness.node({"report": report}, tick=60, misfire_tolerance=900)
    scheduler.add(
        Schedule(
            name="weekday-report",
            task="report",
            trigger=CronTrigger("0 9 * * 1-5", "Asia/Shanghai"),  # 01:00 UTC
            kwargs={"region": "cn"},
        )
    )
    scheduler.every("six-hourly", "report", 6 * 3600)
    fired: list[str] = []
    for _ in range(3 * 24 * 6):
        for tick in harness.step(600):
            fired.extend(tick.fired)
    assert [f for f in fired if f.startswith("weekday")] == [
        "weekday-report@20260105T010000Z",
        "weekday-report@20260106T010000Z",
        "weekday-report@20260107T010000Z",
    ]
    interval = [f for f in fired if f.startswith("six-hourly")]
    assert len(interval) == 12
    assert interval[0] == "six-hourly@20260105T060000Z"
    for task_id in fired:
        assert harness.settled(task_id).status.value == "succeeded"
        assert harness.path(task_id) == DONE
    first = harness.store.get("weekday-report@20260105T010000Z")
    assert first is not None
    assert first.outcome == "cn"
    assert first.metadata["trigger_type"] == "cron"
    assert first.metadata["scheduled_at"] == "2026-01-05T01:00:00+00:00"
    assert harness.store.get(interval[0]).metadata["trigger_type"] == "interval"  # type: ignore[union-attr]
    wait_until(lambda: scheduler.get("six-hourly").runs == 12)
    control = scheduler.get("weekday-report")
    assert control.last_fired_at == datetime(2026, 1, 7, 1, tzinfo=UTC)
    assert control.next_run_at == datetime(2026, 1, 8, 1, tzinfo=UTC)


def restart(harness: Harness, schedule: Schedule) -> None:
    """The node goes down; a new process registers the same schedule later."""
    for scheduler in list(harness.schedulers):
        scheduler.close()
    harness.clock.advance(5.5 * 3600)  # down from 02:00 to 07:30
    node = harness.node({"report": report}, owner="node-a-restarted")
    node.add(schedule)


@pytest.mark.parametrize("misfire", ["skip", "run_once"])
def test_misfire_after_downtime(harness: Harness, misfire: str) -> None:
    schedule = Schedule(
        name="hourly",
        task="report",
        trigger=CronTrigger("0 * * * *"),
        misfire=misfire,  # type: ignore[arg-type]
        misfire_grace=3600,
    )
    first = harness.node({"report": report})
    first.add(schedule)
    before = [f for _ in range(4) for tick in harness.step(1800, first) for f in tick.fired]
    assert before == ["hourly@20260105T010000Z", "hourly@20260105T020000Z"]
    restart(harness, schedule)
    node = harness.schedulers[-1]
    tick = node.tick()
    assert tick.missed == {"hourly": datetime(2026, 1, 5, 3, tzinfo=UTC)}
    if misfire == "skip":
        assert tick.fired == []
    else:
        assert tick.fired == ["hourly@20260105T070000Z"]  # one catch-up, the newest
        run = harness.settled("hourly@20260105T070000Z")
        assert run.metadata["trigger"]["catch_up"] is True
    later = [f for tick in harness.step(1800, node) for f in tick.fired]
    assert later == ["hourly@20260105T080000Z"]
    assert len(harness.runs("hourly")) == (3 if misfire == "skip" else 4)


def test_operator_change_is_picked_up_within_one_tick(harness: Harness) -> None:
    scheduler = harness.node({"report": report}, tick=60, misfire_tolerance=900)
    scheduler.cron("q", "report", "0 * * * *")
    admin = ScheduleAdmin(harness.store, clock=harness.clock, actor="ops")  # another process
    fired = [f for _ in range(13) for tick in harness.step(600) for f in tick.fired]
    assert fired == ["q@20260105T010000Z", "q@20260105T020000Z"]  # now 02:10
    changed = admin.set_pattern("q", "*/15 * * * *", operator="alice")
    assert changed.definition_revision == 2
    harness.step(60)  # 02:11: one tick later the scheduler knows
    assert scheduler.get("q").next_run_at == datetime(2026, 1, 5, 2, 15, tzinfo=UTC)
    fired = [f for _ in range(5) for tick in harness.step(600) for f in tick.fired]  # to 03:01
    assert fired == [
        "q@20260105T021500Z",
        "q@20260105T023000Z",
        "q@20260105T024500Z",
        "q@20260105T030000Z",
    ]
    admin.reset_pattern("q", operator="alice")
    fired = [f for _ in range(6) for tick in harness.step(600) for f in tick.fired]  # to 04:01
    assert fired == ["q@20260105T040000Z"]
    assert scheduler.get("q").updated_by == "alice"


def test_two_schedulers_on_one_store_fire_each_time_exactly_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = harness.node({"report": report}, owner="node-a")
    b = harness.node({"report": report}, owner="node-b")
    for node in (a, b):
        node.every("beat", "report", 10)
    # Make every claim a real race: neither scheduler may claim before the other has
    # decided the firing is due, as when two nodes tick at the same moment.
    barrier = threading.Barrier(2, timeout=5)
    claim = harness.store.claim_firing

    def racing_claim(*args: Any) -> bool:
        barrier.wait()
        return claim(*args)

    monkeypatch.setattr(harness.store, "claim_firing", racing_claim)
    fired: list[str] = []
    for _ in range(20):
        harness.clock.advance(10)
        with ThreadPoolExecutor(2) as pool:
            reports = list(pool.map(lambda s: s.tick(), (a, b)))
        assert [r.error for r in reports] == [None, None]
        this_round = [f for r in reports for f in r.fired]
        fired.extend(this_round)
        # Each run ends before the next firing, so overlap=forbid never skips one
        # here: under load a run can outlast the (instant) next tick otherwise.
        for task_id in this_round:
            harness.settled(task_id)
    expected = [f"beat@20260105T0000{s:02d}Z" for s in range(10, 60, 10)]
    assert sorted(fired)[:5] == expected
    assert len(fired) == len(set(fired)) == 20
    assert a.claims_won + b.claims_won == 20
    assert a.claims_lost + b.claims_lost == 20  # both tried every firing
    for task_id in fired:
        assert harness.settled(task_id).status.value == "succeeded"
    assert len(harness.runs("beat")) == 20


def keys_for(policy: BucketPolicy, buckets: set[int]) -> str:
    return next(f"tenant-{i}" for i in range(1000) if policy.bucket_for(f"tenant-{i}") in buckets)


def test_owned_buckets_decide_which_node_fires(harness: Harness) -> None:
    policy = BucketPolicy(num_buckets=4)
    a = harness.node({"report": report}, owner="node-a", num_buckets=4, owned_buckets=[0, 1])
    b = harness.node({"report": report}, owner="node-b", num_buckets=4, owned_buckets=[2, 3])
    key_a, key_b = keys_for(policy, {0, 1}), keys_for(policy, {2, 3})
    for node in (a, b):
        node.every("for-a", "report", 60, bucket_key=key_a)
        node.every("for-b", "report", 60, bucket_key=key_b)
    fired = [f for _ in range(3) for tick in harness.step(60) for f in tick.fired]
    assert len(fired) == 6
    for task_id in fired:
        snapshot = harness.settled(task_id)
        expected_owner = "node-a" if task_id.startswith("for-a") else "node-b"
        assert snapshot.owner == expected_owner
    assert (a.claims_won, a.claims_lost, b.claims_won, b.claims_lost) == (3, 0, 3, 0)
    with pytest.raises(ConfigurationError, match="has no bucket_key, but this node owns only"):
        a.every("keyless", "report", 60)


def test_add_refuses_unknown_tasks_and_unfitting_arguments(harness: Harness) -> None:
    scheduler = harness.node({"report": report})
    with pytest.raises(ConfigurationError, match="runs task 'nope', which is not registered"):
        scheduler.cron("x", "nope", "@daily")
    with pytest.raises(ConfigurationError, match="do not fit task 'report'"):
        scheduler.cron("x", "report", "@daily", kwargs={"colour": "red"})
    assert harness.store.get_schedule("x") is None


def test_a_deleted_record_is_recreated_and_remove_stops_firing(harness: Harness) -> None:
    scheduler = harness.node({"report": report})
    scheduler.every("beat", "report", 60, anchor=T0)
    assert harness.step(30)[0].fired == []
    harness.store.delete_schedule("beat")
    assert harness.step(30)[0].fired == ["beat@20260105T000100Z"]
    assert harness.store.get_schedule("beat") is not None
    assert scheduler.remove("beat", delete_record=True)
    assert harness.step(60)[0].fired == []
    assert harness.store.get_schedule("beat") is None
    assert scheduler.names == []


def test_interval_anchor_is_shared_by_all_nodes(harness: Harness) -> None:
    anchor = T0 + timedelta(seconds=7)
    scheduler = harness.node({"report": report})
    scheduler.add(Schedule(name="odd", task="report", trigger=IntervalTrigger(30, anchor)))
    assert harness.step(10)[0].fired == ["odd@20260105T000007Z"]
    assert scheduler.get("odd").anchor == anchor


def test_old_firing_claims_are_pruned(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler = harness.node({"report": report}, tick=60, misfire_tolerance=900)
    scheduler.every("beat", "report", 3600)
    pruned: list[datetime] = []
    prune = harness.store.prune_firings

    def recording(before: datetime) -> int:
        pruned.append(before)
        return prune(before)

    monkeypatch.setattr(harness.store, "prune_firings", recording)
    for _ in range(3 * 24 * 2):  # three days in half hours
        harness.step(1800)
    # About once an hour, always keeping two days of claims.
    assert 70 <= len(pruned) <= 73
    assert all(harness.clock.now() - before >= timedelta(days=2) for before in pruned[-1:])
    assert not harness.store.claim_firing("beat", T0 + timedelta(days=2, hours=23), "x", "y")
    assert harness.store.claim_firing("beat", T0 + timedelta(hours=1), "x", "y")  # forgotten
