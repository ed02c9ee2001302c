"""fail_fast with branches in flight, stopping a run, and a person stopping one node."""

from __future__ import annotations

from chongming_task import ConcurrencyPolicy, Pipeline
from chongming_task._model import FailureKind
from chongming_task.controller import Controller
from chongming_task.pipeline import PipelineRun
from chongming_task.policies import AggregationPolicy, JoinMode
from chongming_task.states import TaskStatus
from chongming_task.testing import wait_until

from . import tasks
from .conftest import make_controller
from .helpers import NODE_PATH, ROOT_PATH, path

S = TaskStatus
RUN_THEN = ["pending", "blocked", "queued", "starting", "running"]


def _status(controller: Controller, task_id: str) -> TaskStatus | None:
    snapshot = controller.get(task_id)
    return None if snapshot is None else snapshot.status


def _run_status(run: PipelineRun) -> TaskStatus:
    """``run.status`` through a call, so the type checker does not pin it across calls."""
    return run.status


def test_fail_fast_with_several_branches_in_flight() -> None:
    """a fails while b and d run and c waits for the one gpu unit that b holds."""
    policy = ConcurrencyPolicy(max_parallel=4, limits={"gpu": 1})
    with make_controller(concurrency=policy) as controller:
        p = Pipeline("branches")
        root = p.node("value", "seed", node_id="root")
        a = p.node("fail_when", "fail", "disk full", node_id="a", depends_on=[root])
        b = p.node("hold", "x", node_id="b", depends_on=[root], tags=["gpu"])
        c = p.node("hold", "x", node_id="c", depends_on=[root], tags=["gpu"])
        d = p.node("hold", "x", node_id="d", depends_on=[root])
        seconds = [p.node("value", node_id=f"{n.node_id}2", depends_on=[n]) for n in (a, b, c, d)]
        p.node("value", node_id="end", depends_on=seconds, join=JoinMode.ALL_SETTLED)
        run = controller.submit_pipeline(p)
        ids = run.task_ids
        wait_until(lambda: all(_status(controller, ids[n]) is S.RUNNING for n in "abd"))
        assert _status(controller, ids["c"]) is S.QUEUED  # released; no gpu unit free
        assert controller.active_count == 3
        assert controller.queued_count == 1  # c; the blocked nodes are not queued
        tasks.gate("fail").set()
        outcome = run.wait(timeout=30)

        assert outcome.status is S.FAILED
        assert outcome.first_failure is not None
        assert outcome.first_failure.node_id == "a"
        assert outcome.first_failure.task_id == ids["a"]
        assert str(outcome.first_failure) == "node 'a' failed: RuntimeError: disk full"
        assert outcome.statuses() == {
            "root": S.SUCCEEDED,
            "a": S.FAILED,
            "b": S.CANCELLED,
            "c": S.CANCELLED,
            "d": S.CANCELLED,
            "a2": S.SKIPPED,
            "b2": S.SKIPPED,
            "c2": S.SKIPPED,
            "d2": S.SKIPPED,
            "end": S.SKIPPED,
        }
        assert path(controller, ids["root"]) == ROOT_PATH
        assert path(controller, ids["a"]) == [*RUN_THEN, "failed"]
        assert path(controller, ids["b"]) == [*RUN_THEN, "cancelled"]
        assert path(controller, ids["d"]) == [*RUN_THEN, "cancelled"]
        # c never started, although b's cancellation freed the gpu unit.
        assert path(controller, ids["c"]) == ["pending", "blocked", "queued", "cancelled"]
        for node_id in ("a2", "b2", "c2", "d2", "end"):
            assert path(controller, ids[node_id]) == ["pending", "blocked", "skipped"]
            failure = outcome.nodes[node_id].failure
            assert failure is not None
            assert failure.kind is FailureKind.DEPENDENCY_FAILED
            assert failure.message == (
                "pipeline 'branches' failed fast before this node was released: "
                "node 'a' failed: RuntimeError: disk full"
            )
        for node_id in "bcd":
            failure = outcome.nodes[node_id].failure
            assert failure is not None
            assert failure.kind is FailureKind.CANCELLED
            assert (
                failure.message
                == "pipeline 'branches' failed fast: node 'a' failed: RuntimeError: disk full"
            )
        assert controller.active_count == 0
        assert controller.queued_count == 0


def test_stop_a_pipeline_run() -> None:
    with make_controller(max_parallel=2) as controller:
        p = Pipeline("stoppable", aggregation=AggregationPolicy.all_settled())
        root = p.node("hold", "root", node_id="root")
        side = p.node("value", 1, node_id="side")
        child = p.node("value", node_id="child", depends_on=[root, side])
        p.node("audit", node_id="report", depends_on=[child], join=JoinMode.ALL_SETTLED)
        run = controller.submit_pipeline(p)
        ids = run.task_ids
        wait_until(lambda: _status(controller, ids["root"]) is S.RUNNING)
        wait_until(lambda: _status(controller, ids["side"]) is S.SUCCEEDED)
        assert _run_status(run) is S.RUNNING
        assert run.stop("maintenance window") is True
        outcome = run.wait(timeout=30)

        assert outcome.status is S.STOPPED
        assert run.status is outcome.status
        assert outcome.stop_reason == "maintenance window"
        assert outcome.first_failure is None
        assert outcome.statuses() == {
            "root": S.STOPPED,
            "side": S.SUCCEEDED,
            "child": S.STOPPED,
            "report": S.STOPPED,  # stopped, not released: ALL_SETTLED does not outlive a stop
        }
        assert path(controller, ids["root"]) == [
            "pending",
            "queued",
            "starting",
            "running",
            "stopping",
            "stopped",
        ]
        assert path(controller, ids["child"]) == ["pending", "blocked", "stopped"]
        for node_id in ("root", "child"):
            failure = outcome.nodes[node_id].failure
            assert failure is not None
            assert failure.kind is FailureKind.CANCELLED
        history = controller.history(ids["child"])
        assert history[-1].reason == "pipeline 'stoppable' stopped: maintenance window"
        assert run.stop("again") is False


def test_a_person_stopping_one_node_is_not_a_failure() -> None:
    with make_controller(max_parallel=4) as controller:
        p = Pipeline("manual")  # fail_fast: a stop must not trigger it
        a = p.node("hold", "a", node_id="a")
        b = p.node("hold", "b", node_id="b")
        p.node("value", node_id="a2", depends_on=[a])
        p.node("value", node_id="b2", depends_on=[b])
        run = controller.submit_pipeline(p)
        ids = run.task_ids
        wait_until(lambda: _status(controller, ids["a"]) is S.RUNNING)
        assert controller.stop(ids["a"], reason="on-call: bad input file")
        wait_until(lambda: _status(controller, ids["a2"]) is S.SKIPPED)
        assert _status(controller, ids["b"]) is S.RUNNING  # not cancelled
        tasks.gate("b").set()
        outcome = run.wait(timeout=30)

        assert outcome.status is S.STOPPED
        assert outcome.first_failure is None
        assert outcome.statuses() == {
            "a": S.STOPPED,
            "b": S.SUCCEEDED,
            "a2": S.SKIPPED,
            "b2": S.SUCCEEDED,
        }
        assert path(controller, ids["b2"]) == NODE_PATH
        failure = outcome.nodes["a2"].failure
        assert failure is not None
        assert failure.kind is FailureKind.DEPENDENCY_FAILED
        assert failure.message == (
            "pipeline 'manual': upstream 'a' (stopped) did not succeed (join all_succeeded)"
        )


def test_skipped_cancelled_stopped_are_told_apart() -> None:
    """One run shows all three "did not succeed" states, each with its own cause."""
    policy = ConcurrencyPolicy(max_parallel=4)
    with make_controller(concurrency=policy) as controller:
        p = Pipeline("three-kinds")
        stopped = p.node("hold", "s", node_id="stopped-by-person")
        p.node("value", node_id="after-stop", depends_on=[stopped])
        p.node("hold", "c", node_id="cancelled-by-fail-fast")
        boom = p.node("fail_when", "fail", node_id="fails")
        p.node("value", node_id="skipped-by-fail-fast", depends_on=[boom])
        run = controller.submit_pipeline(p)
        ids = run.task_ids
        wait_until(lambda: _status(controller, ids["stopped-by-person"]) is S.RUNNING)
        wait_until(lambda: _status(controller, ids["cancelled-by-fail-fast"]) is S.RUNNING)
        controller.stop(ids["stopped-by-person"], reason="person")
        wait_until(lambda: _status(controller, ids["after-stop"]) is S.SKIPPED)
        tasks.gate("fail").set()
        outcome = run.wait(timeout=30)

        kinds = {
            node_id: (node.status, node.failure.kind if node.failure else None)
            for node_id, node in outcome.nodes.items()
        }
        assert kinds == {
            "stopped-by-person": (S.STOPPED, FailureKind.CANCELLED),
            "after-stop": (S.SKIPPED, FailureKind.DEPENDENCY_FAILED),
            "cancelled-by-fail-fast": (S.CANCELLED, FailureKind.CANCELLED),
            "fails": (S.FAILED, FailureKind.EXCEPTION),
            "skipped-by-fail-fast": (S.SKIPPED, FailureKind.DEPENDENCY_FAILED),
        }
        assert outcome.status is S.FAILED


def test_closing_the_controller_mid_pipeline_settles_the_run() -> None:
    controller = make_controller(max_parallel=2)
    p = Pipeline("closing", aggregation=AggregationPolicy.all_settled())
    root = p.node("hold", "root", node_id="root")
    middle = p.node("value", node_id="middle", depends_on=[root], join=JoinMode.ALL_SETTLED)
    p.node("audit", node_id="last", depends_on=[middle], join=JoinMode.ALL_SETTLED)
    run = controller.submit_pipeline(p)
    wait_until(lambda: run.nodes["root"].status is S.RUNNING)
    controller.close(reason="shutting down", timeout=10)
    outcome = run.wait(timeout=10)
    assert outcome.status is S.STOPPED
    assert outcome.statuses() == {"root": S.STOPPED, "middle": S.STOPPED, "last": S.STOPPED}
    # The controller closed its private store: read the trajectories off the runs.
    runs = run.task_runs
    trail = {node: [t.to_status.value for t in runs[node].transitions] for node in runs}
    assert trail == {
        "root": [*ROOT_PATH[:-1], "stopping", "stopped"],
        "middle": ["pending", "blocked", "stopped"],
        "last": ["pending", "blocked", "stopped"],
    }
