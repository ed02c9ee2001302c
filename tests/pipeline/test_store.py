"""Node tasks are ordinary stored tasks; a refused pipeline leaves nothing behind."""

from __future__ import annotations

import pytest

from chongming_task import BucketPolicy, Pipeline
from chongming_task.errors import CircularDependency, ConfigurationError
from chongming_task.stores._base import TaskQuery

from .conftest import make_controller, open_store


def _bad_pipelines() -> list[tuple[Pipeline, type[Exception], str]]:
    unknown_task = Pipeline("p")
    unknown_task.node("fetch", "day")
    unknown_task.node("no-such-task", depends_on=["fetch"])

    unknown_dep = Pipeline("p")
    unknown_dep.node("value", depends_on=["ghost"])

    cycle = Pipeline("p")
    cycle.node("value", node_id="a", depends_on=["c"])
    cycle.node("value", node_id="b", depends_on=["a"])
    cycle.node("value", node_id="c", depends_on=["b"])

    return [
        (unknown_task, ConfigurationError, r"\['no-such-task'\] that are not registered"),
        (unknown_dep, ConfigurationError, r"unknown node id\(s\) \['ghost'\]"),
        (cycle, CircularDependency, "circular dependency: a -> b -> c -> a"),
        (Pipeline("empty"), ConfigurationError, "has no nodes"),
    ]


def test_a_refused_pipeline_leaves_no_trace(store_spec: str) -> None:
    store = open_store(store_spec)
    with make_controller(store=store, max_parallel=2) as controller:
        for pipeline, error, message in _bad_pipelines():
            with pytest.raises(error, match=message):
                controller.submit_pipeline(pipeline)
        assert store.query(TaskQuery()) == []
        assert controller.list_tasks() == []
        assert controller.runs() == []
    store.close()


def test_refused_node_options_leave_no_trace(store_spec: str) -> None:
    """Bucket ownership and metadata are checked for every node before any is created."""
    policy = BucketPolicy(num_buckets=64)
    mine = next(f"k{i}" for i in range(1000) if policy.bucket_for(f"k{i}") < 8)
    foreign = next(f"k{i}" for i in range(1000) if policy.bucket_for(f"k{i}") >= 8)
    store = open_store(store_spec)
    with make_controller(store=store, bucket_policy=policy, owned_buckets=range(8)) as ctl:
        p = Pipeline("p")
        first = p.node("value", 1, bucket_key=mine)
        p.node("value", 2, depends_on=[first], bucket_key=foreign)
        with pytest.raises(ConfigurationError, match="bucket"):
            ctl.submit_pipeline(p)
        q = Pipeline("q")
        q.node("value", 1, bucket_key=mine, metadata={"when": {1, 2}})
        with pytest.raises(ConfigurationError, match="metadata of node 'value'"):
            ctl.submit_pipeline(q)
        assert store.query(TaskQuery()) == []
    closed = make_controller()
    closed.close()
    with pytest.raises(ConfigurationError, match="closed"):
        closed.submit_pipeline(Pipeline("r").node("value").pipeline)
    store.close()


def test_a_run_id_in_use_is_refused_before_anything_is_created(store_spec: str) -> None:
    store = open_store(store_spec)
    with make_controller(store=store, max_parallel=2) as controller:
        p = Pipeline("p")
        p.node("value", 1)
        controller.submit_pipeline(p, run_id="nightly").wait(timeout=30)
        p.node("value", 2)  # a second node: its task id is free, the first one's is not
        with pytest.raises(ConfigurationError, match="run id 'nightly' is already used"):
            controller.submit_pipeline(p, run_id="nightly")
        assert [snap.task_id for snap in store.query(TaskQuery())] == ["nightly/value"]
    store.close()


def test_node_tasks_carry_the_pipeline_in_their_metadata(store_spec: str) -> None:
    store = open_store(store_spec)
    with make_controller(store=store, max_parallel=2) as controller:
        p = Pipeline("nightly-etl")
        fetch = p.node("fetch", "2026-10-02")
        p.node("transform", 0, node_id="shard0", depends_on=[fetch], label="Shard 0")
        run = controller.submit_pipeline(p)
        outcome = run.wait(timeout=30)
        assert outcome.ok
        assert run.run_id.startswith("nightly-etl-")
        stored = store.query(TaskQuery(metadata_eq={"pipeline_run": run.run_id}))
        assert sorted(snap.task_id for snap in stored) == sorted(run.task_ids.values())
        by_node = {snap.metadata["node"]: snap for snap in stored}
        assert by_node["shard0"].metadata == {
            "pipeline": "nightly-etl",
            "pipeline_run": run.run_id,
            "node": "shard0",
        }
        assert by_node["shard0"].label == "Shard 0"
        assert by_node["shard0"].task_id == f"{run.run_id}/shard0"
        assert by_node["shard0"].outcome == 5
        # The stored trail is the same trajectory the run went through.
        assert [t.to_status.value for t in store.history(f"{run.run_id}/shard0")] == [
            "pending",
            "blocked",
            "queued",
            "starting",
            "running",
            "succeeded",
        ]
    store.close()
