"""Pipelines on the fleet: a DAG stored in one transaction, run by any worker.

``client.enqueue_pipeline(pipeline)`` stores every node at once: the roots ``queued``,
the others ``blocked`` with their upstream nodes. Nobody orchestrates: when a worker
stores a node's result, the store releases (or skips) its dependants in that same
transaction, so the enqueuing process may exit and any worker may die without
stranding the run. Here two workers share one SQLite file; a fan-out of three shards
feeds an ``ALL_SUCCEEDED`` fan-in (``load``) and an ``ANY_SUCCEEDED`` one
(``first_shard``); one shard fails, so ``load`` is skipped while ``report``
(``ALL_SETTLED``) still runs. Every claim the output makes is asserted.

    python examples/queue_pipeline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from chongming_task import (
    AggregationPolicy,
    Client,
    Controller,
    JoinMode,
    Pipeline,
    SqliteTaskStore,
    TaskContext,
    TaskStatus,
    Worker,
    task,
)

S = TaskStatus


@task
def fetch(ctx: TaskContext, day: str) -> int:
    return 3  # rows per shard


@task
def transform(ctx: TaskContext, shard: int) -> int:
    if shard == 2:
        raise RuntimeError("shard 2: corrupt input")
    return int(ctx.input("fetch", 0)) * 10 + shard


@task
def load(ctx: TaskContext) -> int:
    return sum(ctx.upstream.values())


@task
def first_shard(ctx: TaskContext) -> list[str]:
    return sorted(ctx.upstream)  # the shards that had succeeded when it was released


@task
def report(ctx: TaskContext) -> str:
    return f"{len(ctx.upstream)} of 2 upstream nodes succeeded"


TASKS = [fetch, transform, load, first_shard, report]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "tasks.db")
        pipeline = Pipeline("nightly", aggregation=AggregationPolicy.all_settled())
        root = pipeline.node("fetch", "2026-10-02", node_id="fetch")
        shards = [
            pipeline.node("transform", i, node_id=f"shard{i}", depends_on=[root]) for i in range(3)
        ]
        loaded = pipeline.node("load", node_id="load", depends_on=shards)
        first = pipeline.node(
            "first_shard", node_id="first_shard", depends_on=shards, join=JoinMode.ANY_SUCCEEDED
        )
        pipeline.node(
            "report", node_id="report", depends_on=[loaded, first], join=JoinMode.ALL_SETTLED
        )

        store = SqliteTaskStore(db)
        client = Client(store, tasks=TASKS)
        handle = client.enqueue_pipeline(pipeline, run_id="nightly-1")
        assert handle.statuses()["fetch"] is S.QUEUED
        assert handle.statuses()["load"] is S.BLOCKED
        print(f"stored {len(handle.nodes)} nodes in one transaction: {handle.statuses()}")

        workers = []
        for owner in ("node-a", "node-b"):
            controller = Controller(store=SqliteTaskStore(db), owner=owner)
            controller.register_all(fetch, transform, load, first_shard, report)
            worker = Worker(controller, max_parallel=2, poll_interval=0.05)
            worker.start()
            workers.append((worker, controller))
        try:
            # Any process can follow the run from its id.
            outcome = Client(SqliteTaskStore(db)).pipeline("nightly-1").wait(60)
        finally:
            for worker, controller in workers:
                worker.shutdown(timeout=10)
                controller.close()

        statuses = outcome.statuses()
        print(f"settled {outcome.status.value}: {statuses}")
        assert statuses["shard2"] is S.FAILED
        assert statuses["load"] is S.SKIPPED  # ALL_SUCCEEDED and shard2 failed
        assert statuses["first_shard"] is S.SUCCEEDED  # ANY_SUCCEEDED
        assert statuses["report"] is S.SUCCEEDED  # ALL_SETTLED
        assert outcome.status is S.FAILED
        assert outcome.first_failure is not None
        assert outcome.first_failure.node_id == "shard2"
        values = outcome.values()
        assert values["shard0"] == 30
        assert values["shard1"] == 31
        assert values["report"] == "1 of 2 upstream nodes succeeded"
        print(f"first failure: {outcome.first_failure}")
        print(f"load was skipped: {outcome.nodes['load'].failure.message}")
        print(f"report ran anyway: {values['report']}")
        owners = {s.owner for s in handle.nodes.values() if s.owner}
        print(f"workers that ran nodes: {sorted(owners)}")
        store.close()


if __name__ == "__main__":
    main()
