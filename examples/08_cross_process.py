"""One process runs tasks, another watches and controls them (guide §8.9).

This script starts a copy of itself as the *worker* process (it runs two resident
tasks on a shared SQLite file), then acts as the *console*: it lists the worker's
tasks, stops one, pauses and resumes the other -- all through the store, since the
console holds none of them -- and finally stops the rest so the worker exits.

    python examples/08_cross_process.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chongming_task import Controller, SqliteTaskStore, TaskContext, TaskStatus, render_table
from chongming_task.testing import wait_until

S = TaskStatus


def sync_tenant(ctx: TaskContext, tenant: str) -> int:
    """A resident sync: one batch every 10 ms until asked to stop."""
    batches = 0
    while not ctx.is_stop_requested:
        ctx.checkpoint()
        batches += 1
        ctx.progress(batches, unit="batch")
        time.sleep(0.01)
    return batches


def worker(db: str) -> None:
    """The worker process: holds the tasks until every one of them has ended."""
    controller = Controller(store=SqliteTaskStore(db), max_parallel=2, owner="worker-1")
    controller.register("sync", sync_tenant)
    controller.submit("sync", "租户A", task_id="job-1", bucket_key="tenant-A")
    controller.submit("sync", "租户B", task_id="job-2", bucket_key="tenant-B")
    outcomes = controller.wait_all(timeout=60)
    controller.close(close_store=True)
    print("worker:", ", ".join(f"{o.snapshot.task_id}={o.status.value}" for o in outcomes))


def status(console: Controller, task_id: str) -> TaskStatus | None:
    snapshot = console.get(task_id)
    return None if snapshot is None else snapshot.status


def console(db: str) -> None:
    """The console process: sees and controls tasks it does not hold."""
    process = subprocess.Popen([sys.executable, __file__, "--worker", db])
    try:
        console = Controller(store=SqliteTaskStore(db), owner="ops-console")
        wait_until(
            lambda: status(console, "job-1") is S.RUNNING and status(console, "job-2") is S.RUNNING,
            timeout=30,
        )
        print(render_table(console.list_tasks()))  # 看得到 job-1，尽管它并不持有
        assert console.runs() == []

        # stop: written as a command; the worker applies it. "True" means accepted.
        assert console.stop("job-1", reason="运维停止") is True
        wait_until(lambda: status(console, "job-1") is S.SUCCEEDED, timeout=30)
        stop = next(t for t in console.history("job-1") if t.to_status is S.STOPPING)
        assert (stop.actor, stop.reason) == ("ops-console", "运维停止")
        print(f"job-1: stop by {stop.actor} -> {status(console, 'job-1')}")

        # pause across processes cannot be confirmed: False, then observe with get().
        assert console.pause("job-2") is False
        wait_until(lambda: status(console, "job-2") is S.PAUSED, timeout=30)
        print("job-2: paused (seen through get())")
        assert console.resume("job-2") is True
        wait_until(lambda: status(console, "job-2") is S.RUNNING, timeout=30)
        assert console.stop("job-2", reason="done") is True

        process.wait(timeout=60)
        assert process.returncode == 0
        print(render_table(console.list_tasks()))
        statuses = [t.to_status.value for t in console.history("job-2")]
        assert statuses == [
            "pending",
            "queued",
            "starting",
            "running",
            "pausing",
            "paused",
            "running",
            "stopping",
            "succeeded",
        ], statuses
        console.close(close_store=True)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        with tempfile.TemporaryDirectory() as directory:
            console(str(Path(directory) / "tasks.db"))
        print("ok")
