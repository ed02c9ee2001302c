"""Issue 22 acceptance: enqueue from a client, two workers, cancel, SIGKILL, recovery.

A client enqueues 20 tasks into two buckets; two ``chongming-task worker`` processes,
one bucket each, run them (bodies gated by a file); the queued ones are visible before
they start; one queued task is stopped and never runs its body; one worker is killed
with SIGKILL mid-task and, with no command typed, its running tasks become ``lost``
within lease TTL + one reconcile period (read by the other worker), while the queued
tasks of its bucket wait and ``health``/``workers`` name the bucket without a live
owner; a new worker owning it then runs them. SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _workers import cli, on_path, spawn_worker, stop_workers
from chongming_task import Client, TaskStatus
from chongming_task.policies import BucketPolicy
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until

HERE = Path(__file__).parent
TASKS = str(HERE / "qtasks.py")
LEASE_TTL = 1.5
DEADLINE = 20.0
RECONCILE_PERIOD = LEASE_TTL / 2  # the worker's default: half the lease TTL
SLACK = 2.5  # process start-up and polling of the test itself


def _keys() -> tuple[str, str, int, int]:
    policy = BucketPolicy(num_buckets=64)
    a, b = "tenant-a", "tenant-b"
    i = 0
    while policy.bucket_for(b) == policy.bucket_for(a):
        i += 1
        b = f"tenant-b{i}"
    return a, b, policy.bucket_for(a), policy.bucket_for(b)


def _worker(db: str, owner: str, bucket: int, log: Path) -> subprocess.Popen[bytes]:
    return spawn_worker(
        db,
        log,
        options=["--owner", owner, "--owned-buckets", str(bucket)],
        worker=[
            *("--tasks", TASKS, "--max-parallel", "2"),
            *("--lease-ttl", str(LEASE_TTL), "--poll-interval", "0.1"),
        ],
    )


def scenario(store: TaskStore, db: str, tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    key_a, key_b, bucket_a, bucket_b = _keys()
    client = Client(store, tasks=[__import__("qtasks").job])
    handles = {
        key: [
            client.enqueue("job", i, str(gates), bucket_key=key, task_id=f"{key}-{i:02d}")
            for i in range(10)
        ]
        for key in (key_a, key_b)
    }
    assert len(client.list_tasks(status="queued")) == 20
    ps = cli(db, "ps", "--json")
    assert ps.returncode == 0, ps.stderr
    assert sum(1 for t in json.loads(ps.stdout)["tasks"] if t["status"] == "queued") == 20

    cancelled = handles[key_a][9]
    assert cancelled.stop("not needed") is True
    assert cancelled.status is TaskStatus.STOPPED
    assert [t.to_status for t in cancelled.transitions][-2:] == [
        TaskStatus.QUEUED,
        TaskStatus.STOPPED,
    ]

    logs = tmp_path / "logs"
    logs.mkdir()
    workers = {
        "w-a": _worker(db, "w-a", bucket_a, logs / "w-a.log"),
        "w-b": _worker(db, "w-b", bucket_b, logs / "w-b.log"),
    }
    try:
        # Each worker takes two of its bucket's tasks (2 slots); the rest stay queued.
        def started(key: str) -> list[str]:
            return sorted(
                h.task_id for h in handles[key] if (gates / f"started-{h.task_id}").exists()
            )

        wait_until(lambda: len(started(key_a)) == 2 and len(started(key_b)) == 2, timeout=DEADLINE)
        running_a = started(key_a)
        for task_id in running_a:
            assert store.get(task_id).owner == "w-a"  # type: ignore[union-attr]
        assert sum(1 for h in handles[key_a] if h.status is TaskStatus.QUEUED) == 7

        workers["w-a"].send_signal(signal.SIGKILL)
        workers["w-a"].wait(10)
        killed_at = time.monotonic()
        # No command typed: w-b's periodic reconcile marks w-a's running tasks lost.
        for task_id in running_a:
            wait_until(
                # mypy infers no type for a lambda with a default argument:
                lambda task_id=task_id: (  # type: ignore[misc]
                    store.get(task_id).status  # type: ignore[union-attr]
                    is TaskStatus.LOST
                ),
                timeout=DEADLINE,
            )
        elapsed = time.monotonic() - killed_at
        assert elapsed < LEASE_TTL + RECONCILE_PERIOD + SLACK, elapsed
        wait_until(lambda: "w-a" in _dead_workers(db), timeout=DEADLINE)
        health = cli(db, "health", "--json")
        assert health.returncode == 1, health.stdout
        queue = json.loads(health.stdout)["queue"]
        assert str(bucket_a) in queue["orphaned_buckets"]
        assert "w-a" in queue["workers_dead"]
        workers_out = cli(db, "workers")
        assert f"bucket {bucket_a}:" in workers_out.stdout, workers_out.stdout
        assert "no live owner" in workers_out.stdout
        # The queued tasks of the orphaned bucket wait.
        assert sum(1 for h in handles[key_a] if h.status is TaskStatus.QUEUED) == 7

        # A worker owning the bucket starts again and runs them.
        workers["w-a2"] = _worker(db, "w-a2", bucket_a, logs / "w-a2.log")
        (gates / "release").write_text("go")
        for key in (key_a, key_b):
            for h in handles[key]:
                if h.task_id in running_a or h is cancelled:
                    continue
                assert h.wait(DEADLINE).status is TaskStatus.SUCCEEDED, h.task_id
        assert not (gates / f"started-{cancelled.task_id}").exists()
        assert cancelled.status is TaskStatus.STOPPED
        for task_id in running_a:
            assert store.get(task_id).status is TaskStatus.LOST  # type: ignore[union-attr]
    finally:
        stop_workers(workers.values(), logs)


def _dead_workers(db: str) -> list[str]:
    out = cli(db, "workers", "--json")
    return [w["worker_id"] for w in json.loads(out.stdout)["workers"] if w["state"] == "dead"]


@pytest.fixture(autouse=True)
def _tasks_on_path() -> Iterator[None]:
    with on_path(HERE):
        yield


def test_acceptance(shared_store: tuple[TaskStore, str], tmp_path: Path) -> None:
    scenario(*shared_store, tmp_path)
