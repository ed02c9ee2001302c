"""Who owns which bucket, and moving a bucket from one worker to another (docs/buckets.md).

Two workers share one SQLite store, each owning half of 16 buckets; they declare
their buckets in the store with a lease renewed with their heartbeat. The script:

1. reads the registry: every bucket has exactly one live owner;
2. hands bucket 3 from node-a to node-b while node-a is running a task of it: node-a
   stops claiming bucket 3 at once, its running task finishes there (tasks do not
   migrate), and the two queued ones run on node-b once node-b has adopted it;
3. shows the verdicts of a misconfiguration: a third node declaring bucket 3 too
   (a duplicate), then node-b gone (holes, and an orphaned queued task).

Run it: ``python examples/19_bucket_ownership.py`` (it works in a temporary directory).
"""

from __future__ import annotations

import io
import tempfile
import threading
from pathlib import Path
from typing import Any

from chongming_task import (
    BucketPolicy,
    Client,
    Controller,
    HandoffResult,
    SqliteTaskStore,
    TaskStatus,
    Worker,
    declare_buckets,
    handoff,
    ownership_report,
)
from chongming_task.cli import main
from chongming_task.testing import wait_until

NUM_BUCKETS = 16
gate = threading.Event()


def sync(ctx: Any, tenant: str, part: int) -> str:
    """A body that runs until the gate opens (checkpointing, so a stop would land)."""
    while not gate.is_set():
        ctx.checkpoint()
        gate.wait(0.01)
    return f"{tenant}/{part}"


def key_in(bucket: int) -> str:
    policy = BucketPolicy(num_buckets=NUM_BUCKETS)
    return next(f"tenant-{i}" for i in range(10_000) if policy.bucket_for(f"tenant-{i}") == bucket)


def start_worker(store: SqliteTaskStore, owner: str, buckets: range, slots: int) -> Worker:
    node = Controller(store=store, owner=owner, num_buckets=NUM_BUCKETS, owned_buckets=buckets)
    node.register("sync", sync)
    worker = Worker(node, max_parallel=slots, poll_interval=0.05, heartbeat_interval=0.2)
    worker.start()
    return worker


def cli(db: str, *args: str) -> str:
    out = io.StringIO()
    main(["--db", db, *args], stdout=out, stderr=out)
    return out.getvalue()


def run(directory: Path) -> None:
    db = str(directory / "tasks.db")
    store = SqliteTaskStore(db)
    definitions = Controller()
    definitions.register("sync", sync)
    client = Client(store, tasks=definitions, num_buckets=NUM_BUCKETS)
    a = start_worker(store, "node-a", range(0, 8), slots=1)
    b = start_worker(store, "node-b", range(8, 16), slots=2)
    try:
        # 1. The registry: one live owner per bucket.
        report = ownership_report(store)
        assert report.healthy, report.problems
        assert report.owners[3] == ("node-a",)
        print("== buckets --owners")
        print(cli(db, "buckets", "--owners"))

        # 2. Bucket 3 moves while node-a runs one of its tasks.
        tenant = key_in(3)
        first = client.enqueue("sync", tenant, 0, bucket_key=tenant, task_id="sync-0")
        wait_until(lambda: first.status is TaskStatus.RUNNING, timeout=20)
        queued = [
            client.enqueue("sync", tenant, n, bucket_key=tenant, task_id=f"sync-{n}")
            for n in (1, 2)
        ]
        done: list[HandoffResult] = []
        caller = threading.Thread(
            target=lambda: done.append(
                handoff(store, [3], from_node="node-a", to_node="node-b", timeout=30)
            )
        )
        caller.start()
        wait_until(lambda: ownership_report(store).draining == {3: "node-a"}, timeout=20)
        print("== while node-a drains bucket 3")
        print(cli(db, "buckets", "--owners"))
        assert all(h.snapshot.owner is None for h in queued)  # nobody claims them meanwhile
        gate.set()  # node-a's task finishes, node-a confirms, node-b adopts
        caller.join(30)
        assert done, "the handoff did not return"
        moved = done[0]
        print(f"handoff done: buckets {list(moved.buckets)} {moved.from_node} -> {moved.to_node}")
        for handle in [first, *queued]:
            assert handle.wait(20).status is TaskStatus.SUCCEEDED
        assert first.snapshot.owner == "node-a"
        assert [h.snapshot.owner for h in queued] == ["node-b", "node-b"]
        after = ownership_report(store)
        assert after.owners[3] == ("node-b",)
        assert after.healthy, after.problems
        print(f"bucket 3 now: {after.owners[3]}; sync-1 and sync-2 ran on node-b")

        # 3a. A third node that also declares bucket 3: a duplicate.
        rogue = Controller(store=store, owner="node-c", num_buckets=NUM_BUCKETS, owned_buckets=[3])
        with declare_buckets(rogue):
            duplicate = ownership_report(store)
            assert duplicate.duplicates == {3: ("node-b", "node-c")}
            print("== a third node declares bucket 3")
            for problem in duplicate.problems:
                print(f"problem: {problem}")
        rogue.close()

        # 3b. node-b leaves: its buckets become holes, a queued task there an orphan.
        b.shutdown(timeout=10)
        b.controller.close()
        client.enqueue("sync", key_in(9), 0, bucket_key=key_in(9), task_id="late-9")
        gone = ownership_report(store)
        assert gone.holes == (3, *range(8, 16))
        assert [(o.bucket, o.count) for o in gone.orphans] == [("9", 1)]
        print("== node-b has stopped")
        print(cli(db, "buckets", "--owners"))
    finally:
        gate.set()
        for worker in (a, b):
            worker.shutdown(timeout=10)
            worker.controller.close()
        store.close()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp))
