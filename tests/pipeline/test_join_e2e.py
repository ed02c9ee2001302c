"""Every join mode against every combination of upstream outcomes, on a real controller.

One all_settled pipeline holds two source nodes per outcome and one join node per
(mode, combination) of ``join_table.JOIN_TABLE``: 10 sources, 60 join nodes.
"""

from __future__ import annotations

from chongming_task import Pipeline
from chongming_task._model import FailureKind
from chongming_task.controller import Controller
from chongming_task.policies import AggregationPolicy, JoinMode
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from .conftest import make_controller
from .helpers import NODE_PATH, path
from .join_table import JOIN_TABLE, MODES, SHORT

S = TaskStatus

#: How each source node reaches its outcome.
SOURCE_TASK = {
    S.SUCCEEDED: ("value",),
    S.FAILED: ("boom",),
    S.SKIPPED: ("skip_me",),
    S.CANCELLED: ("hold",),  # cancelled by the test while running
    S.STOPPED: ("hold",),  # stopped by the test while running
}


def _source(outcome: TaskStatus, copy: int) -> str:
    return f"{SHORT[outcome]}_{copy}"


def _build() -> tuple[Pipeline, dict[str, tuple[TaskStatus, ...]]]:
    pipeline = Pipeline("join-table", aggregation=AggregationPolicy.all_settled())
    for outcome, (task_name,) in SOURCE_TASK.items():
        for copy in (1, 2):
            node_id = _source(outcome, copy)
            if task_name == "value":
                pipeline.node(task_name, f"v-{node_id}", node_id=node_id)
            elif task_name == "hold":
                pipeline.node(task_name, "never", node_id=node_id)
            else:
                pipeline.node(task_name, node_id=node_id)
    joins: dict[str, tuple[TaskStatus, ...]] = {}
    for mode in MODES:
        for combo in JOIN_TABLE:
            upstream = [_source(combo[0], 1)] + [_source(o, 2) for o in combo[1:]]
            node_id = f"{mode.value}:{'+'.join(SHORT[o] for o in combo)}"
            pipeline.node("upstream_view", node_id=node_id, depends_on=upstream, join=mode)
            joins[node_id] = combo
    return pipeline, joins


def _running(controller: Controller, task_id: str) -> bool:
    snapshot = controller.get(task_id)
    return snapshot is not None and snapshot.status is S.RUNNING


def test_every_join_mode_against_every_upstream_combination() -> None:
    with make_controller(max_parallel=8) as controller:
        pipeline, joins = _build()
        assert len(joins) == 60
        run = controller.submit_pipeline(pipeline)
        ids = run.task_ids
        holders = [_source(S.CANCELLED, c) for c in (1, 2)] + [
            _source(S.STOPPED, c) for c in (1, 2)
        ]
        wait_until(lambda: all(_running(controller, ids[node]) for node in holders))
        for copy in (1, 2):
            controller._internal.cancel(
                ids[_source(S.CANCELLED, copy)], reason="cancelled by the test"
            )
            assert controller.stop(ids[_source(S.STOPPED, copy)], reason="stopped by the test")
        outcome = run.wait(timeout=60)

        for outcome_status in SOURCE_TASK:
            for copy in (1, 2):
                assert outcome.nodes[_source(outcome_status, copy)].status is outcome_status

        for node_id, combo in joins.items():
            mode = next(m for m in MODES if node_id.startswith(m.value + ":"))
            want = JOIN_TABLE[combo][MODES.index(mode)]
            node = outcome.nodes[node_id]
            upstream = pipeline.nodes[node_id].depends_on
            if want == "release":
                assert node.status is S.SUCCEEDED, node_id
                assert path(controller, node.task_id) == NODE_PATH, node_id
                # Only succeeded upstream nodes are visible, with their values.
                succeeded = {u: f"v-{u}" for u in upstream if u.startswith("ok_")}
                if mode is JoinMode.ANY_SUCCEEDED:
                    # Released at the first success: it sees the successes settled by then.
                    assert node.value["upstream"], node_id
                    assert node.value["upstream"].items() <= succeeded.items(), node_id
                else:
                    assert node.value["upstream"] == succeeded, node_id
                assert node.value["input_a"] == "missing"
            else:
                assert node.status is S.SKIPPED, node_id
                assert path(controller, node.task_id) == ["pending", "blocked", "skipped"]
                assert node.failure is not None
                assert node.failure.kind is FailureKind.DEPENDENCY_FAILED
                named = [u for u in upstream if repr(u) in node.failure.message]
                culprits = [u for u in upstream if not u.startswith("ok_")]
                # ANY_SUCCEEDED waits for all and names all; ALL_SUCCEEDED skips at the
                # first upstream that settled without success and names what it saw.
                if mode is JoinMode.ANY_SUCCEEDED:
                    assert named == culprits, node_id
                else:
                    assert named, node_id
                    assert set(named) <= set(culprits), node_id

        # all_settled: nothing was cancelled by the pipeline; the real failures decide.
        assert outcome.status is S.FAILED
        assert outcome.first_failure is not None
        assert outcome.first_failure.node_id in {"fail_1", "fail_2"}
