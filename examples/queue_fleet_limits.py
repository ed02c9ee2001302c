"""Fleet limits: one task at a time per tenant, and at most 5 e-mails a second, fleet-wide.

The limits live in the store (``Client.set_limit``, or ``chongming-task limits set``),
so every worker obeys them without any configuration of its own. ``tenant:*`` is a
pattern: one limit per distinct ``concurrency_key`` that starts with ``tenant:``.
Two workers share one SQLite file (here in one process for brevity; in production each
is a ``chongming-task worker`` of its own). The stored history proves that no tenant
ever had two tasks running at once, and the store's start records that no second saw
more than five e-mails start. Every claim the output makes is asserted.

    python examples/queue_fleet_limits.py
"""

from __future__ import annotations

import itertools
import tempfile
import time
from datetime import timedelta
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


@task
def sync(ctx: TaskContext, tenant: str) -> str:
    """Pretend to sync one tenant's data (the tenant's API allows one sync at a time)."""
    for _ in range(5):
        ctx.checkpoint()
        time.sleep(0.02)
    return tenant


@task
def send_mail(ctx: TaskContext, to: str) -> str:
    ctx.checkpoint()
    return to


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "tasks.db")
        store = SqliteTaskStore(db)
        client = Client(store, tasks=[sync, send_mail])
        client.set_limit("tenant:*", concurrency=1)
        client.set_limit("mail", rate="5/s")
        print("limits:", ", ".join(str(limit.to_dict()) for limit in client.limits()))

        syncs = {
            tenant: [
                client.enqueue("sync", tenant, concurrency_key=f"tenant:{tenant}") for _ in range(3)
            ]
            for tenant in ("acme", "globex")
        }
        mails = client.enqueue_many(
            "send_mail", [(f"user{i}@example.com",) for i in range(10)], tags=["mail"]
        )

        workers = []
        for name in ("node-a", "node-b"):
            controller = Controller(store=SqliteTaskStore(db), owner=name)
            controller.register_all(sync, send_mail)
            worker = Worker(controller, max_parallel=4, poll_interval=0.05)
            worker.start()
            workers.append(worker)
        starts = {}
        try:
            for handle in [*itertools.chain(*syncs.values()), *mails]:
                while not handle.snapshot.is_terminal:
                    for start in store.list_limit_starts():  # each lives one window
                        starts[start.task_id] = start.started_at
                    time.sleep(0.05)
                assert handle.wait(60).status is S.SUCCEEDED
        finally:
            for worker in workers:
                worker.shutdown(timeout=10)
                worker.controller.close()

        for tenant, handles in syncs.items():
            spans = sorted(
                (
                    {t.to_status: t.at for t in h.transitions}[S.RUNNING],
                    {t.to_status: t.at for t in h.transitions}[S.SUCCEEDED],
                    h.snapshot.owner,
                )
                for h in handles
            )
            owners = sorted({owner or "?" for *_, owner in spans})
            print(f"tenant {tenant}: {len(spans)} syncs, one at a time, on {', '.join(owners)}")
            for (_, end, _), (start, _, _) in itertools.pairwise(spans):
                assert end <= start, (tenant, spans)

        for start in store.list_limit_starts():
            starts[start.task_id] = start.started_at
        assert all(mail.task_id in starts for mail in mails)  # every start was recorded
        times = sorted(starts[m.task_id] for m in mails)
        for i, first in enumerate(times):
            assert sum(1 for t in times[i:] if t < first + timedelta(seconds=1)) <= 5
        took = (times[-1] - times[0]).total_seconds()
        print(f"10 e-mails started over {took:.1f} s, never more than 5 in a second")
        assert took >= 1.0
        store.close()


if __name__ == "__main__":
    main()
