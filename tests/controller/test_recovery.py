"""Guide §8.11 with a real crash: SIGKILL a worker, reconcile from a new controller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _store_spec import open_store
from chongming_task import Controller, ReconcileReport
from chongming_task._model import FailureKind
from chongming_task.controller._reconcile import RECONCILE_TRIGGER
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until

from ._helpers import Gate
from .test_cross_process import WORKER, status_of

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
]

S = TaskStatus
LEASE_TTL = 1.0


@pytest.fixture
def crashed_worker(store_spec: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            store_spec,
            "worker-1",
            "--running",
            "2",
            "--queued",
            "2",
            "--lease-ttl",
            str(LEASE_TTL),
            "--crash",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    yield process
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=30)


def statuses(store: TaskStore) -> dict[str, TaskStatus]:
    return {s.task_id: s.status for s in store.query()}


def test_sigkill_then_reconcile(
    store_spec: str, crashed_worker: subprocess.Popen[str], gate: Gate
) -> None:
    with open_store(store_spec) as store:
        wait_until(
            lambda: (
                statuses(store)
                == {"job-1": S.RUNNING, "job-2": S.RUNNING, "job-3": S.QUEUED, "job-4": S.QUEUED}
            ),
            timeout=30,
            message="two running and two queued tasks in the worker",
        )
        # A live owner in the same store, renewing its short lease the whole time.
        live = Controller(store=store, owner="live-node", lease_ttl=LEASE_TTL)
        live.register("hold", gate.hold)
        live_run = live.submit("hold", task_id="live-1")
        live_queued = live.submit("hold", task_id="live-2", blocked=True)
        wait_until(lambda: status_of(store, "live-1") is S.RUNNING)

        os.kill(crashed_worker.pid, signal.SIGKILL)
        crashed_worker.wait(timeout=30)
        assert crashed_worker.returncode == -signal.SIGKILL

        recovering = Controller(store=store, owner="worker-2")
        # Leases run out LEASE_TTL after the crash; until then nothing is touched.
        dry = wait_until(
            lambda: (
                len((report := recovering.reconcile(dry_run=True)).lost + report.adoptable) == 4
                and report
            ),
            timeout=30,
            message="the dead worker's leases to expire",
        )
        # The dead worker's tasks: the live node keeps renewing its own leases meanwhile.
        before = {s.task_id: s for s in store.query() if s.task_id.startswith("job-")}
        assert isinstance(dry, ReconcileReport)
        assert dry.dry_run
        assert sorted(dry.lost) == ["job-1", "job-2"]
        assert sorted(dry.adoptable) == ["job-3", "job-4"]
        assert dry.skipped == ()
        after = {s.task_id: s for s in store.query() if s.task_id.startswith("job-")}
        assert after == before  # a dry run changes nothing

        # Let the live node's lease turn over at least once: it must stay untouched.
        first_lease = store.get("live-1").lease_until  # type: ignore[union-attr]
        wait_until(lambda: store.get("live-1").lease_until != first_lease, timeout=10)  # type: ignore[union-attr]

        report = recovering.reconcile()
        assert not report.dry_run
        assert sorted(report.lost) == ["job-1", "job-2"]
        assert sorted(report.adoptable) == ["job-3", "job-4"]
        for task_id in ("job-1", "job-2"):
            snapshot = store.get(task_id)
            assert snapshot is not None
            assert snapshot.status is S.LOST
            assert snapshot.failure is not None
            assert snapshot.failure.kind is FailureKind.LOST
            assert "worker-1" in snapshot.failure.message
            trail = store.history(task_id)
            assert [t.to_status.value for t in trail] == [
                "pending",
                "queued",
                "starting",
                "running",
                "lost",
            ]
            assert (trail[-1].trigger, trail[-1].actor) == (RECONCILE_TRIGGER, "worker-2")
        assert status_of(store, "job-3") is S.QUEUED  # not re-executed, only reported
        assert status_of(store, "live-1") is S.RUNNING
        assert status_of(store, "live-2") is S.BLOCKED
        assert live_run.status is S.RUNNING
        assert not live.persist_failures  # its writes never conflicted

        again = recovering.reconcile()
        assert again.lost == ()
        assert sorted(again.adoptable) == ["job-3", "job-4"]

        gate.open()
        live._internal.release("live-2")
        live.wait_all(timeout=30)
        assert live_queued.status is S.SUCCEEDED
        live.close()
        recovering.close()


def test_reconcile_touches_only_own_buckets(tmp_path: Path, gate: Gate) -> None:
    from chongming_task.stores._sqlite import SqliteTaskStore

    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        policy_owner = Controller(store=store, owner="dead", lease_ttl=LEASE_TTL)
        policy_owner.register("hold", gate.hold)
        keys: dict[str, int] = {}
        for key in ("tenant-A", "tenant-B", "tenant-C", "tenant-D", "tenant-E"):
            keys[key] = policy_owner.bucket_policy.bucket_for(key)
            policy_owner.submit("hold", task_id=key, bucket_key=key)
        wait_until(lambda: policy_owner.active_count == 4)
        # Simulate the death of "dead": its lease keeper stops renewing (threads end).
        policy_owner._parts.leases.stop()
        mine = sorted({keys["tenant-A"], keys["tenant-B"]})
        node = Controller(store=store, owner="node-b", owned_buckets=mine)
        expected = sorted(k for k, b in keys.items() if b in mine)
        wait_until(
            lambda: sorted((r := node.reconcile(dry_run=True)).lost + r.adoptable) == expected,
            timeout=10,
        )
        report = node.reconcile()
        assert sorted(report.lost + report.adoptable) == expected
        others = [k for k in keys if k not in expected]
        assert all(status_of(store, k) is not S.LOST for k in others)
        gate.open()
        policy_owner.close(timeout=10)
        node.close()
