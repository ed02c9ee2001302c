"""A limit that holds across workers: at most one "db" task at a time, whoever runs it.

Two workers share one SQLite file (here in one process for brevity; in production
each is a ``chongming-task worker --global-limit db=1`` of its own). Each has four
slots, but the ``db`` tag is limited to one holder across both: the tasks queue, are
claimed one at a time, and the store's history proves that no two ever ran at once.
Untagged work is not held back. Every claim the output makes is asserted.

    python examples/queue_global_limits.py
"""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path

from chongming_task import (
    Client,
    Controller,
    SqliteTaskStore,
    TaskContext,
    TaskStatus,
    Worker,
    task,
)

S = TaskStatus


@task(tags=["db"])
def migrate(ctx: TaskContext, table: str) -> str:
    """Pretend to rewrite ``table`` (the database tolerates one such job at a time)."""
    for _ in range(10):
        ctx.checkpoint()
        time.sleep(0.02)
    return table


@task
def thumbnail(ctx: TaskContext, name: str) -> str:
    ctx.checkpoint()
    return f"{name}.png"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "tasks.db")
        client_store = SqliteTaskStore(db)
        client = Client(client_store, tasks=[migrate, thumbnail])
        tables = ["users", "orders", "invoices", "events"]
        handles = [client.enqueue("migrate", t, task_id=f"migrate-{t}") for t in tables]
        pictures = [client.enqueue("thumbnail", f"p{i}") for i in range(3)]
        assert handles[0].snapshot.tags == frozenset({"db"})  # the definition's tag, stored

        workers = []
        for name in ("node-a", "node-b"):
            controller = Controller(store=SqliteTaskStore(db), owner=name)
            controller.register_all(migrate, thumbnail)
            worker = Worker(controller, max_parallel=4, poll_interval=0.05, global_limits={"db": 1})
            worker.start()
            workers.append(worker)
        try:
            for handle in handles + pictures:
                assert handle.wait(60).status is S.SUCCEEDED
        finally:
            for worker in workers:
                worker.shutdown(timeout=10)
                worker.controller.close()

        # Each migration's running interval, from the stored history.
        spans = []
        for handle in handles:
            at = {t.to_status: t.at for t in handle.transitions}
            spans.append((at[S.RUNNING], at[S.SUCCEEDED], handle.task_id, handle.snapshot.owner))
        spans.sort()
        for start, end, task_id, owner in spans:
            print(f"{task_id:18} on {owner}: {start:%H:%M:%S.%f} -> {end:%H:%M:%S.%f}")
        for (_, end, *_), (start, *_) in itertools.pairwise(spans):
            assert start >= end, "two db tasks ran at once"
        assert client_store.list_global_slots() == []  # every slot given back
        print("never more than one db task at once; slots all given back")
        client_store.close()


if __name__ == "__main__":
    main()
