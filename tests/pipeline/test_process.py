"""Upstream data crosses the process boundary of a ProcessExecutor unchanged."""

from __future__ import annotations

from chongming_task import Pipeline
from chongming_task.policies import AggregationPolicy, JoinMode
from chongming_task.runtime.executors._process import ProcessExecutor
from chongming_task.states import TaskStatus

from .conftest import make_controller
from .helpers import NODE_PATH, path

S = TaskStatus


def test_upstream_values_reach_a_process_node() -> None:
    with make_controller(max_parallel=2, executor=ProcessExecutor()) as controller:
        p = Pipeline("cross-process", aggregation=AggregationPolicy.all_settled())
        a = p.node("value", {"rows": [1, 2], "name": "数据"}, node_id="a")
        b = p.node("boom", "no value for you", node_id="b")
        p.node("upstream_view", node_id="view", depends_on=[a, b], join=JoinMode.ALL_SETTLED)
        run = controller.submit_pipeline(p)
        outcome = run.wait(timeout=60)

        view = outcome.nodes["view"]
        assert view.status is S.SUCCEEDED
        # Only the succeeded upstream crossed over; the failed one is absent, not None.
        assert view.value == {
            "upstream": {"a": {"rows": [1, 2], "name": "数据"}},
            "input_a": {"rows": [1, 2], "name": "数据"},
        }
        assert path(controller, view.task_id) == NODE_PATH
        assert outcome.status is S.FAILED
        assert outcome.first_failure is not None
        assert outcome.first_failure.node_id == "b"
