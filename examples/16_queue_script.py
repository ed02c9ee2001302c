"""The work queue from a plain script: a worker process, a client, enqueue, wait, cancel.

This script starts a ``chongming-task worker`` on a SQLite file (a separate process, as
in production), then acts as the application: it enqueues reports through a
:class:`chongming_task.Client`, sees them queued, cancels one before any worker takes
it, and waits for the others' outcomes. Everything crosses the store: the client only
writes a registered name and JSON arguments. Every claim the output makes is asserted.

    python examples/16_queue_script.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import queue_tasks

from chongming_task import Client, SqliteTaskStore, TaskStatus
from chongming_task.errors import ConfigurationError
from chongming_task.testing import wait_until

S = TaskStatus
TASKS = Path(__file__).resolve().with_name("queue_tasks.py")


def start_worker(db: str) -> subprocess.Popen[bytes]:
    """``chongming-task --db DB worker --tasks queue_tasks.py``, in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "chongming_task.cli", "--db", db, "--owner", "worker-1",
         "worker", "--tasks", str(TASKS), "--max-parallel", "2", "--poll-interval", "0.05"],
        env={k: v for k, v in os.environ.items() if not k.startswith("CHONGMING_")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "tasks.db")
        store = SqliteTaskStore(db)
        client = Client(store, tasks=queue_tasks)

        # Enqueue: a task from the first moment, queued, with a generated id.
        handles = [client.enqueue("report", tenant, bucket_key=tenant) for tenant in "ABC"]
        failing = client.enqueue("reject", "no such tenant")
        extra = client.enqueue("report", "D", pages=50, task_id="report-D")
        queued = [s.task_id for s in client.list_tasks(status="queued")]
        print("queued before any worker:", queued)
        assert len(queued) == 5
        assert [t.to_status.value for t in extra.transitions] == ["pending", "queued"]

        # Bad input is refused at enqueue and stores nothing.
        for bad in (
            lambda: client.enqueue("reprot", "A"),  # unknown name
            lambda: client.enqueue("report", "A", colour="red"),  # does not bind
            lambda: client.enqueue("report", "A", pages={1, 2}),  # not JSON
        ):
            try:
                bad()
            except ConfigurationError as exc:
                print("refused:", str(exc).splitlines()[0][:90])
            else:
                raise AssertionError("expected a ConfigurationError")
        assert len(client.list_tasks()) == 5

        # Cancel before start: immediate, no worker involved, the body never runs.
        assert extra.stop("not needed after all") is True
        last = extra.transitions[-1]
        print(f"{extra.task_id}: {last.from_status} -> {last.to_status} ({last.reason})")
        assert (last.from_status, last.to_status) == (S.QUEUED, S.STOPPED)
        assert last.actor == client.actor

        worker = start_worker(db)
        try:
            wait_until(store.list_workers, timeout=30, message="the worker to register")
            print("worker:", [(w.worker_id, w.slots) for w in store.list_workers()])
            for handle in handles:
                outcome = handle.wait(timeout=30)
                print(f"{handle.task_id}: {outcome.status.value} -> {outcome.value}")
                assert outcome.ok
                assert outcome.value.endswith("-report-3p.pdf")
                assert outcome.snapshot.owner == "worker-1"
            outcome = failing.wait(timeout=30)
            assert outcome.status is S.FAILED
            assert outcome.failure is not None
            print(f"{failing.task_id}: failed -> {outcome.failure.message}")
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
        assert extra.status is S.STOPPED  # still: the worker never took it
        path = [t.to_status.value for t in handles[0].transitions]
        print(f"{handles[0].task_id}: {' -> '.join(path)}")
        assert path == ["pending", "queued", "starting", "running", "succeeded"]
        store.close()


if __name__ == "__main__":
    main()
