"""A worker process that a test kills with SIGKILL (guide §8.11's "process died").

Usage: ``python crash_worker.py DB OWNER``. It submits ``job-crash`` (running, never
ending on its own) and ``job-queued`` (waiting behind it, ``max_parallel=1``) with a
short lease, prints ``ready`` once the first one runs, and waits to be killed.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from chongming_task import Controller
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until


def open_store(db: str) -> TaskStore:
    if db.startswith("postgresql"):
        from chongming_task import PostgresTaskStore

        return PostgresTaskStore(db)
    from chongming_task import SqliteTaskStore

    return SqliteTaskStore(db)


def forever(ctx: Any) -> None:
    while True:
        ctx.checkpoint()
        threading.Event().wait(0.01)


def main(db: str, owner: str) -> None:
    controller = Controller(store=open_store(db), owner=owner, max_parallel=1, lease_ttl=0.5)
    controller.register("sync", forever)
    running = controller.submit("sync", task_id="job-crash", bucket_key="tenant-A")
    controller.submit("sync", task_id="job-queued", bucket_key="tenant-A")
    # Wait for the store, not the run: the write of "running" is deferred to the next
    # group commit, and a crash may lose it (the task is then left "starting").
    wait_until(lambda: running.status.value == "running", timeout=30)
    wait_until(lambda: controller.get(running.task_id).status.value == "running", timeout=30)  # type: ignore[union-attr]
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
