"""Acceptance: a real worker process serves /metrics that agree with the store."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from _workers import Pump
from chongming_task.queue import Client
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.stores._sqlite import SqliteTaskStore
from chongming_task.testing import wait_until

TASKS = Path(__file__).with_name("worker_tasks.py")
SCRIPT = Path(sys.executable).with_name("chongming-task")
WORKLOAD = {"ok": 3, "flaky": 2, "broken": 1}

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Worker:
    """A ``chongming-task worker --metrics-port 0`` subprocess and what it printed."""

    def __init__(self, db: str, *options: str) -> None:
        argv = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "chongming_task.cli"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")}
        self.process = subprocess.Popen(
            [*argv, "--db", db, *options, "worker", "--tasks", str(TASKS), "--max-parallel", "2",
             "--poll-interval", "0.1", "--metrics-port", "0"],
            env={**env, "NO_COLOR": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.pump = Pump(self.process.stdout)
        self.lines, self.ready = self.pump.lines, self.pump.ready

    @property
    def metrics_url(self) -> str:
        for line in self.lines:
            match = re.search(r"http://127\.0\.0\.1:\d+/metrics", line)
            if match:
                return match.group(0)
        raise AssertionError("the worker printed no metrics URL:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        self.pump.close(timeout=5)
        return code


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.external_service)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The worker's ``--db``: a SQLite file or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "tasks.db")
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


def open_store(db: str) -> TaskStore:
    if db.startswith("postgresql://"):
        from chongming_task.stores._postgres import PostgresTaskStore

        return PostgresTaskStore(db)
    return SqliteTaskStore(db)


@contextlib.contextmanager
def started(worker: Worker) -> Iterator[Worker]:
    """``worker`` once ready; killed if the test left it running."""
    try:
        wait_until(
            lambda: worker.ready.is_set() or worker.process.poll() is not None,
            timeout=30,
            message="the worker to be ready",
        )
        assert worker.ready.is_set(), "worker exited:\n" + "\n".join(worker.lines)
        yield worker
    finally:
        if worker.process.poll() is None:
            worker.process.kill()
        if worker.process.stdout is not None and not worker.process.stdout.closed:
            worker.stop()


@pytest.fixture
def worker(db: str) -> Iterator[Worker]:
    with started(Worker(db)) as ready:
        yield ready


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def labelled(samples: Samples, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """``{(label values in keys order): value}`` of one sample name."""
    return {
        tuple(dict(labels)[key] for key in keys): value
        for (sample, labels), value in samples.items()
        if sample == name and value
    }


@pytest.mark.slow
def test_worker_metrics_agree_with_the_store(worker: Worker, db: str) -> None:
    url = worker.metrics_url
    task_ids: list[str] = []
    with open_store(db) as store:
        client = Client(store, actor="acceptance")
        for name, count in WORKLOAD.items():
            for index in range(count):
                task_id = f"{name}-{index}"
                client.enqueue(name, task_id=task_id)
                task_ids.append(task_id)

        def all_finished() -> bool:
            snapshots = [store.get(task_id) for task_id in task_ids]
            return all(s is not None and s.is_terminal for s in snapshots)

        wait_until(all_finished, timeout=30, message="the workload to finish")
        total = sum(WORKLOAD.values())

        def counted() -> Samples | None:
            samples = scrape(url)
            runs = labelled(samples, "chongming_task_runs_total", "name", "final_status")
            return samples if sum(runs.values()) == total else None

        samples = wait_until(counted, timeout=10, message="every run in /metrics")
        assert samples is not None
        snapshots = [s for s in (store.get(task_id) for task_id in task_ids) if s is not None]
        histories = {task_id: store.history(task_id) for task_id in task_ids}
        counts = store.count_by_status()

    # Fleet gauges: exactly the store's counts, every status.
    for status in TaskStatus:
        key = ("chongming_tasks", frozenset({("status", status.value)}))
        assert samples[key] == counts.get(status, 0), status
    # Runs, attempts, retries and every transition edge, against the stored trajectories.
    expected_runs = Counter((s.name, s.status.value) for s in snapshots)
    assert labelled(samples, "chongming_task_runs_total", "name", "final_status") == dict(
        expected_runs
    )
    assert expected_runs == {("ok", "succeeded"): 3, ("flaky", "succeeded"): 2,
                             ("broken", "failed"): 1}  # fmt: skip
    attempts: Counter[str] = Counter()
    for snapshot in snapshots:
        attempts[snapshot.name] += snapshot.attempt
    assert labelled(samples, "chongming_task_attempts_total", "name") == {
        (name,): count for name, count in attempts.items()
    }
    edges: Counter[tuple[str, str, str]] = Counter()
    names = {s.task_id: s.name for s in snapshots}
    for task_id, history in histories.items():
        # The creation and ``-> queued`` were written by the enqueuing client, not by
        # the worker: its counters count the transitions it made.
        assert [t.trigger for t in history[:2]] == ["machine:created", "queue:enqueued"]
        for t in history[2:]:
            source = t.from_status.value if t.from_status else "none"
            edges[(names[task_id], source, t.to_status.value)] += 1
    assert labelled(samples, "chongming_task_transitions_total", "name", "from", "to") == dict(
        edges
    )
    retries = sum(count for (name, _, to), count in edges.items() if to == "retry_wait")
    assert labelled(samples, "chongming_task_retries_total", "name") == {("flaky",): retries}
    assert retries == 2
    assert samples[("chongming_store_up", frozenset())] == 1
    assert samples[("chongming_persist_failures_total", frozenset())] == 0
    assert samples[("chongming_subscriber_errors_total", frozenset())] == 0
    # No task id in any label.
    for (_, labels), _value in samples.items():
        assert not set(task_ids) & {value for _, value in labels}

    assert worker.stop() == 0
    with pytest.raises(urllib.error.URLError):  # closed with the worker
        urllib.request.urlopen(url, timeout=2)


@pytest.mark.slow
def test_worker_metrics_count_the_work_queue(db: str) -> None:
    """Queued tasks are counted by ``/metrics`` of a real worker: depth, age, orphaned."""
    from chongming_task import Client

    client_store = open_store(db)
    client = Client(client_store)
    policy = client.bucket_policy
    owned, orphan = "tenant-a", "tenant-b"
    assert policy.bucket_for(owned) != policy.bucket_for(orphan)
    a, b = str(policy.bucket_for(owned)), str(policy.bucket_for(orphan))
    # Before the worker: nobody owns anything yet.
    later = [client.enqueue("ok", bucket_key=owned, delay=3600) for _ in range(2)]
    waiting = [client.enqueue("ok", bucket_key=orphan) for _ in range(3)]
    runs = client.enqueue("ok", bucket_key=owned)
    try:
        with started(Worker(db, "--owned-buckets", a)) as worker:
            assert runs.wait(30).ok  # its own bucket's due task ran

            def queue_counted() -> Samples | None:
                samples = scrape(worker.metrics_url)
                workers_up = samples.get(("chongming_workers_up", frozenset()))
                return samples if workers_up == 1 else None

            samples = wait_until(queue_counted, timeout=10, message="the worker registered")
            assert samples is not None
            counts = client_store.count_by_status()
            assert counts[TaskStatus.QUEUED] == 5
            assert samples[("chongming_tasks", frozenset({("status", "queued")}))] == 5
            by_bucket = labelled(samples, "chongming_queue_depth", "bucket")
            assert by_bucket == {(a,): 2, (b,): 3}
            orphaned = labelled(samples, "chongming_queue_bucket_orphaned", "bucket")
            assert orphaned == {(b,): 1}  # only non-zero samples: the worker owns a
            ages = labelled(samples, "chongming_queue_oldest_age_seconds", "bucket")
            first = min(h.snapshot.created_at for h in waiting)
            assert 0 < ages[(b,)] <= (client_store.clock.now() - first).total_seconds()
            assert samples[("chongming_workers_dead", frozenset())] == 0
            # Cancelled before start: out of the depth at the next scrape.
            for handle in waiting:
                assert handle.stop("not needed") is True
            samples = scrape(worker.metrics_url)
            assert labelled(samples, "chongming_queue_depth", "bucket") == {(a,): 2}
            assert samples[("chongming_tasks", frozenset({("status", "queued")}))] == 2
            assert samples[("chongming_tasks", frozenset({("status", "stopped")}))] == 3
            assert all(h.status is TaskStatus.QUEUED for h in later)
            assert worker.stop() == 0
    finally:
        client_store.close()
