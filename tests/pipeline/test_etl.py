"""The nightly-etl pipeline of guide §8.12, as written, under both aggregation policies."""

from __future__ import annotations

import pytest

from chongming_task import Pipeline
from chongming_task._model import FailureKind
from chongming_task.controller import Controller
from chongming_task.policies import AggregationPolicy, JoinMode
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from .conftest import make_controller
from .helpers import NODE_PATH, ROOT_PATH, path

S = TaskStatus
POLICIES = [AggregationPolicy.fail_fast(), AggregationPolicy.all_settled()]


@pytest.mark.parametrize("aggregation", POLICIES, ids=lambda policy: policy.mode)
def test_nightly_etl_as_written(
    aggregation: AggregationPolicy, capsys: pytest.CaptureFixture[str]
) -> None:
    with make_controller(max_parallel=2) as controller:
        # ---- guide §8.12, verbatim (aggregation parametrised) ----
        pipeline = Pipeline("nightly-etl", aggregation=aggregation)

        fetch = pipeline.node("fetch", "2026-10-02", node_id="fetch")
        shards = [
            pipeline.node("transform", index, node_id=f"shard{index}", depends_on=[fetch])
            for index in range(3)
        ]
        load = pipeline.node("load", node_id="load", depends_on=shards)
        pipeline.node("audit", node_id="audit", depends_on=[load], join=JoinMode.ALL_SETTLED)

        run = controller.submit_pipeline(pipeline)
        outcome = run.wait(timeout=60)
        print(outcome.status, outcome.nodes)
        # ---- end of the guide's code ----

        assert capsys.readouterr().out.startswith("succeeded {'fetch': <fetch succeeded>")
        assert outcome.status is S.SUCCEEDED
        assert outcome.ok
        assert outcome.first_failure is None
        assert list(outcome.nodes) == ["fetch", "shard0", "shard1", "shard2", "load", "audit"]
        assert outcome.values() == {
            "fetch": {"day": "2026-10-02", "rows": [1, 2, 3, 4, 5, 6]},
            "shard0": 5,
            "shard1": 7,
            "shard2": 9,
            "load": 21,
            "audit": ["load"],
        }
        assert path(controller, run.task_ids["fetch"]) == ROOT_PATH
        for node_id in ("shard0", "shard1", "shard2", "load", "audit"):
            assert path(controller, run.task_ids[node_id]) == NODE_PATH, node_id
        assert run.status is S.SUCCEEDED
        assert run.done
        assert controller.active_count == 0
        assert controller.queued_count == 0


def _flaky_etl(aggregation: AggregationPolicy) -> Pipeline:
    pipeline = Pipeline("nightly-etl", aggregation=aggregation)
    fetch = pipeline.node("fetch", "2026-10-02", node_id="fetch")
    shards = [
        pipeline.node("flaky_transform", index, node_id=f"shard{index}", depends_on=[fetch])
        for index in range(3)
    ]
    load = pipeline.node("load", node_id="load", depends_on=shards)
    pipeline.node("audit", node_id="audit", depends_on=[load], join=JoinMode.ALL_SETTLED)
    return pipeline


def _running(controller: Controller, task_id: str) -> bool:
    snapshot = controller.get(task_id)
    return snapshot is not None and snapshot.status is S.RUNNING


def test_nightly_etl_with_a_failing_shard_all_settled() -> None:
    from . import tasks

    with make_controller(max_parallel=2) as controller:
        run = controller.submit_pipeline(_flaky_etl(AggregationPolicy.all_settled()))
        ids = run.task_ids
        wait_until(
            lambda: _running(controller, ids["shard0"]) and _running(controller, ids["shard1"])
        )
        tasks.gate("fail").set()
        wait_until(lambda: run.nodes["shard1"].status is S.FAILED)
        tasks.gate("shards").set()  # the healthy shards finish: nothing was cancelled
        outcome = run.wait(timeout=30)

        assert outcome.status is S.FAILED
        assert outcome.first_failure is not None
        assert (
            str(outcome.first_failure)
            == "node 'shard1' failed: RuntimeError: shard 1: corrupt input"
        )
        assert outcome.statuses() == {
            "fetch": S.SUCCEEDED,
            "shard0": S.SUCCEEDED,
            "shard1": S.FAILED,
            "shard2": S.SUCCEEDED,
            "load": S.SKIPPED,
            "audit": S.SUCCEEDED,
        }
        assert outcome.nodes["audit"].value == []  # load has no value to pass on
        load_failure = outcome.nodes["load"].failure
        assert load_failure is not None
        assert load_failure.kind is FailureKind.DEPENDENCY_FAILED
        assert load_failure.message == (
            "pipeline 'nightly-etl': upstream 'shard1' (failed) did not succeed "
            "(join all_succeeded)"
        )
        assert path(controller, ids["load"]) == ["pending", "blocked", "skipped"]
        assert path(controller, ids["shard1"]) == [
            "pending",
            "blocked",
            "queued",
            "starting",
            "running",
            "failed",
        ]
        assert path(controller, ids["audit"]) == NODE_PATH


def test_nightly_etl_with_a_failing_shard_fail_fast() -> None:
    from . import tasks

    with make_controller(max_parallel=2) as controller:
        run = controller.submit_pipeline(_flaky_etl(AggregationPolicy.fail_fast()))
        ids = run.task_ids
        wait_until(
            lambda: _running(controller, ids["shard0"]) and _running(controller, ids["shard1"])
        )
        assert run.nodes["shard2"].status is S.QUEUED  # released, waiting for a slot
        tasks.gate("fail").set()
        outcome = run.wait(timeout=30)

        assert outcome.status is S.FAILED
        assert outcome.first_failure is not None
        assert outcome.first_failure.node_id == "shard1"
        assert outcome.statuses() == {
            "fetch": S.SUCCEEDED,
            "shard0": S.CANCELLED,
            "shard1": S.FAILED,
            "shard2": S.CANCELLED,
            "load": S.SKIPPED,
            "audit": S.SKIPPED,
        }
        # shard2 was cancelled before the freed slot could start it.
        assert path(controller, ids["shard2"]) == ["pending", "blocked", "queued", "cancelled"]
        assert path(controller, ids["shard0"]) == [
            "pending",
            "blocked",
            "queued",
            "starting",
            "running",
            "cancelled",
        ]
        assert path(controller, ids["audit"]) == ["pending", "blocked", "skipped"]
        cancelled = outcome.nodes["shard0"].failure
        assert cancelled is not None
        assert cancelled.kind is FailureKind.CANCELLED
        assert cancelled.message == (
            "pipeline 'nightly-etl' failed fast: "
            "node 'shard1' failed: RuntimeError: shard 1: corrupt input"
        )
