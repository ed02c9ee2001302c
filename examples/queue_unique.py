"""Unique work: one nightly report per tenant, however many times it is asked for.

A web app enqueues "rebuild the report of tenant X" on every change the tenant makes;
the report takes a while, and one rebuild at a time is enough. With
``unique_key=f"report:{tenant}"`` the store creates nothing while such a task is
unfinished and hands back that task instead (``handle.created`` is ``False``). With
``unique_for`` a task that finished recently counts too, which throttles the rebuilds.
Four threads racing on one key create one task: the store decides, in the same
transaction as the insert. Every claim the output makes is asserted.

    python examples/queue_unique.py
"""

from __future__ import annotations

import tempfile
import threading
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
release = threading.Event()


@task
def rebuild_report(ctx: TaskContext, tenant: str) -> str:
    """Rebuild a tenant's report (held open until the example lets it finish)."""
    while not release.is_set():
        ctx.checkpoint()
        time.sleep(0.01)
    return f"{tenant}.pdf"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "tasks.db")
        client_store = SqliteTaskStore(db)
        client = Client(client_store, tasks=[rebuild_report])
        key = "report:acme"

        # 1. While the first request is queued, the next ones get the same task.
        first = client.enqueue("rebuild_report", "acme", unique_key=key)
        again = client.enqueue("rebuild_report", "acme", unique_key=key)
        assert first.created
        assert not again.created
        assert again.task_id == first.task_id
        print(f"queued {first.task_id}; the second request got it too (created=False)")

        # 2. Racing callers (threads here; processes or machines alike) create one task.
        other_key = "report:globex"
        barrier = threading.Barrier(4)
        answers: list[tuple[str, bool]] = []

        def race() -> None:
            racer = Client(SqliteTaskStore(db), tasks=[rebuild_report])
            barrier.wait()
            handle = racer.enqueue("rebuild_report", "globex", unique_key=other_key)
            answers.append((handle.task_id, handle.created))
            racer.store.close()

        threads = [threading.Thread(target=race) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({task_id for task_id, _ in answers}) == 1
        assert sorted(created for _, created in answers) == [False, False, False, True]
        print(f"4 racing requests for {other_key}: one task created, 3 got it back")

        # 3. A worker runs it; while it runs, requests still get the same task.
        controller = Controller(store=SqliteTaskStore(db), owner="node-a")
        controller.register_all(rebuild_report)
        worker = Worker(controller, max_parallel=2, poll_interval=0.05)
        worker.start()
        try:
            deadline = time.monotonic() + 30
            while first.status is not S.RUNNING:
                assert time.monotonic() < deadline, first.status
                time.sleep(0.02)
            running = client.enqueue("rebuild_report", "acme", unique_key=key)
            assert running.task_id == first.task_id
            assert not running.created
            print(f"{first.task_id} is running; a request still gets it (created=False)")
            release.set()
            assert first.wait(30).status is S.SUCCEEDED
            answers_task = client.get(answers[0][0])
            assert answers_task is not None
            assert answers_task.wait(30).status is S.SUCCEEDED

            # 4. Finished: within unique_for it still counts; without a window it does not.
            recent = client.enqueue("rebuild_report", "acme", unique_key=key, unique_for=600)
            assert recent.task_id == first.task_id
            assert not recent.created
            print(f"{first.task_id} finished; within unique_for=600 a request gets it back")
            fresh = client.enqueue("rebuild_report", "acme", unique_key=key)
            assert fresh.created
            assert fresh.task_id != first.task_id
            assert fresh.wait(30).status is S.SUCCEEDED
            print(f"without a window a finished task frees the key: {fresh.task_id} ran")
        finally:
            worker.shutdown(timeout=10)
            controller.close()

        keyed = [t for t in client.list_tasks() if t.metadata.get("unique_key") == key]
        assert sorted(t.task_id for t in keyed) == sorted([first.task_id, fresh.task_id])
        print(f"the store holds {len(keyed)} tasks with {key}, each marked with it")
        client_store.close()


if __name__ == "__main__":
    main()
