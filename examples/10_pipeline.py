"""A DAG pipeline (guide §8.12): fetch -> three shards -> load -> audit.

The same pipeline runs three times: once where everything succeeds, then with one
broken shard under each aggregation policy. Each node's trajectory and the reason it
did not succeed are printed, and asserted.

    python examples/10_pipeline.py
"""

from __future__ import annotations

import time

from chongming_task import AggregationPolicy, Controller, JoinMode, Pipeline, TaskContext, task


class Demo:
    """What the demo changes between its three runs (plain settings, not task arguments)."""

    #: The shard that fails (None: nothing fails).
    broken_shard: int | None = None
    #: Whether healthy shards keep working until fail_fast cancels them, so the demo
    #: deterministically has branches in flight when the broken shard fails.
    work_until_cancelled = False


@task
def fetch(ctx: TaskContext, day: str) -> dict[str, object]:
    """Pretend to download one day of rows."""
    ctx.checkpoint()
    return {"day": day, "rows": [1, 2, 3, 4, 5, 6]}


@task
def transform(ctx: TaskContext, index: int) -> int:
    """Sum this shard's slice of the fetched rows."""
    fetched = ctx.input("fetch", {})  # the fetch node's return value
    if index == Demo.broken_shard:
        time.sleep(0.05)  # some work first: by then every shard has been released
        raise RuntimeError(f"shard {index}: corrupt input")
    while Demo.work_until_cancelled:
        ctx.checkpoint()  # raises TaskCancelled once fail_fast cancels this shard
        time.sleep(0.01)
    return sum(fetched["rows"][index::3])


@task
def load(ctx: TaskContext) -> int:
    """Add up the shards (only succeeded upstream nodes appear in ctx.upstream)."""
    return sum(value for value in ctx.upstream.values())


@task
def audit(ctx: TaskContext) -> str:
    """Runs whatever happened upstream (JoinMode.ALL_SETTLED): report it."""
    return "load ok" if "load" in ctx.upstream else "load missing"


def build(aggregation: AggregationPolicy) -> Pipeline:
    pipeline = Pipeline("nightly-etl", aggregation=aggregation)
    fetch_node = pipeline.node("fetch", "2026-10-02", node_id="fetch")
    shards = [
        pipeline.node("transform", index, node_id=f"shard{index}", depends_on=[fetch_node])
        for index in range(3)
    ]
    load_node = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[load_node], join=JoinMode.ALL_SETTLED)
    return pipeline


def show(title: str, controller: Controller, aggregation: AggregationPolicy) -> dict[str, str]:
    run = controller.submit_pipeline(build(aggregation))
    outcome = run.wait(timeout=30)
    print(f"\n== {title}: {outcome}")
    for node_id, node in outcome.nodes.items():
        path = " -> ".join(t.to_status.value for t in controller.history(node.task_id))
        why = f"  [{node.failure.kind}: {node.failure.message}]" if node.failure else ""
        print(f"  {node_id:7} {path}{why}")
    return {node_id: status.value for node_id, status in outcome.statuses().items()}


def main() -> None:
    with Controller(max_parallel=2) as controller:
        controller.register_all(fetch, transform, load, audit)

        statuses = show("all succeed", controller, AggregationPolicy.fail_fast())
        assert set(statuses.values()) == {"succeeded"}

        Demo.broken_shard = 1
        statuses = show("shard1 fails, all_settled", controller, AggregationPolicy.all_settled())
        assert statuses["shard1"] == "failed"
        assert statuses["shard0"] == statuses["shard2"] == "succeeded"
        assert statuses["load"] == "skipped"  # its upstream did not all succeed
        assert statuses["audit"] == "succeeded"  # ALL_SETTLED runs anyway

        Demo.work_until_cancelled = True
        statuses = show("shard1 fails, fail_fast", controller, AggregationPolicy.fail_fast())
        assert statuses["shard1"] == "failed"
        assert statuses["shard0"] == "cancelled"  # was running: pulled down by fail_fast
        assert statuses["shard2"] == "cancelled"  # released but queued (max_parallel=2)
        assert statuses["load"] == statuses["audit"] == "skipped"  # never released


if __name__ == "__main__":
    main()
