"""SIGKILL of a worker at random points, beside a live worker, then reconcile from a
fresh process: the store tells the truth about every task (guide §8.11)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from _store_spec import open_store
from chongming_task.states import OCCUPYING, TaskStatus
from chongming_task.stores._base import TaskQuery
from chongming_task.testing import wait_until

from ._checks import check_store, integrity_ok
from ._procs import Worker, reconcile_from_a_fresh_process
from .conftest import SCALE, record

pytestmark = pytest.mark.timeout(300)

S = TaskStatus


def test_sigkill_at_random_points_then_reconcile_from_a_fresh_process(store_spec: str) -> None:
    kills = (15 if store_spec.startswith("sqlite") else 10) * SCALE
    rng = random.Random(24)
    live = Worker(store_spec, "live", "--tasks", "8", "--lease-ttl", "3", "--seed", "1")
    victims: list[Worker] = []
    store = open_store(store_spec)
    try:
        for round_ in range(kills):
            victim = Worker(
                store_spec,
                f"victim{round_}",
                "--tasks",
                str(rng.randint(4, 12)),
                "--lease-ttl",
                "0.5",
                "--seed",
                str(round_),
            )
            # A random point: right away, mid-write, or after some tasks finished.
            deadline = datetime.now(UTC).timestamp() + rng.uniform(0, 0.4)
            wait_until(lambda: datetime.now(UTC).timestamp() >= deadline, interval=0.01)  # noqa: B023
            victim.sigkill()
            victims.append(victim)
        assert live.alive
        victim_tasks = [s for s in store.query(TaskQuery()) if (s.owner or "").startswith("victim")]
        latest = max((s.lease_until for s in victim_tasks if s.lease_until), default=None)
        if latest is not None:
            wait_until(lambda: datetime.now(UTC) > latest, timeout=30, message="leases expire")
        before_live = {s.task_id: s for s in store.query(TaskQuery()) if s.owner == "live"}
        report = reconcile_from_a_fresh_process(store_spec)
        statuses = check_store(store)  # every trajectory legal, versions consecutive
        transitions = sum(len(store.history(task_id)) for task_id in statuses)
        for snapshot in store.query(TaskQuery()):
            assert snapshot.attempt <= 1, f"{snapshot.task_id} ran twice"
            if snapshot.owner == "live":
                # Nothing of the live worker touched.
                assert snapshot.status is not S.LOST, snapshot.task_id
                assert snapshot.task_id not in report["lost"]
                assert snapshot.task_id not in report["adoptable"]
                earlier = before_live[snapshot.task_id]
                assert snapshot.status_version >= earlier.status_version
            else:
                # Every in-flight task lost, never-started ones adoptable, none left
                # claiming to run.
                assert snapshot.status not in OCCUPYING, (snapshot.task_id, snapshot.status)
                if snapshot.status is S.LOST:
                    assert snapshot.task_id in report["lost"]
        assert not [t for t in report["lost"] if t.startswith("live")]
        assert live.alive
        if store_spec.startswith("sqlite:"):
            integrity_ok(store_spec.partition(":")[2])
        record(
            kills=kills,
            transitions_checked=transitions,
            tasks_checked=len(statuses),
            lost_marked=len(report["lost"]),
            adoptable=len(report["adoptable"]),
            data_lost=0,
        )
    finally:
        live.sigkill()
        for victim in victims:
            if victim.alive:
                victim.sigkill()
        store.close()
