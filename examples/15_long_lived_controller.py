"""A long-lived controller whose memory stays flat: ``keep_finished``.

A controller holds every run it submitted until ``prune()``; a process that runs for
weeks sets ``keep_finished`` so it keeps only the most recent finished runs in
memory. The store keeps every task: the controller answers for a forgotten one from
it. Every claim the output makes is asserted.

    python examples/15_long_lived_controller.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from chongming_task import Controller, SqliteTaskStore, TaskContext, TaskStatus, task

S = TaskStatus


@task
def sync_account(ctx: TaskContext, account: int) -> str:
    """Pretend to sync one account."""
    ctx.checkpoint()
    return f"account-{account} synced"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteTaskStore(str(Path(tmp) / "tasks.db"))
        with store, Controller(store=store, max_parallel=2, keep_finished=3) as controller:
            controller.register_all(sync_account)
            for account in range(10):
                run = controller.submit("sync_account", account, task_id=f"sync-{account}")
                run.wait(timeout=30)

            held = [run.task_id for run in controller.runs()]
            print("held in memory:", held)
            assert held == ["sync-7", "sync-8", "sync-9"]

            # sync-0 was forgotten by this process, not by the store.
            assert controller.run("sync-0") is None
            outcome = controller.wait("sync-0", timeout=5)
            path = [t.to_status.value for t in controller.history("sync-0")]
            print(f"sync-0 from the store: {outcome.value!r}; {' -> '.join(path)}")
            assert outcome.value == "account-0 synced"
            assert path == ["pending", "queued", "starting", "running", "succeeded"]

            stats = controller.stats()
            print("tasks in the store:", stats.total, "succeeded:", stats.by_status[S.SUCCEEDED])
            assert (stats.total, stats.by_status[S.SUCCEEDED]) == (10, 10)


if __name__ == "__main__":
    main()
