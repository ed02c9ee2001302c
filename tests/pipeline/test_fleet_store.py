"""Fleet pipelines in the store: the join rules applied in the transaction that settles
a node, on memory, SQLite and PostgreSQL (workers are simulated by state-machine
writes; tests/queue/test_fleet_pipeline.py runs real worker processes)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from chongming_task import AggregationPolicy, Client, JoinMode, Pipeline, TaskStatus, task
from chongming_task._model import Failure, FailureKind
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError
from chongming_task.stores._base import TaskQuery, TaskStore

S = TaskStatus


@task
def step(ctx, value: int = 0) -> int:  # type: ignore[no-untyped-def]
    return value


def _settle(store: TaskStore, task_id: str, status: TaskStatus) -> None:
    """What a worker writes: start the node, then end it in ``status``."""
    stored = store.get(task_id)
    assert stored is not None
    assert stored.status is S.QUEUED, stored
    machine = StateMachine(stored, clock=store.clock)
    machine.mark_starting()
    machine.mark_running()
    if status is S.SUCCEEDED:
        machine.mark_succeeded(outcome=7)
    else:
        machine.mark_failed(Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=False))
    store.save(
        machine.snapshot, expect_version=stored.status_version, transitions=machine.transitions
    )


def _fan_in(aggregation: AggregationPolicy) -> Pipeline:
    pipeline = Pipeline("fan", aggregation=aggregation)
    a = pipeline.node("step", 1, node_id="a")
    b = pipeline.node("step", 2, node_id="b")
    pipeline.node("step", node_id="all", depends_on=[a, b])
    pipeline.node("step", node_id="any", depends_on=[a, b], join=JoinMode.ANY_SUCCEEDED)
    settled = pipeline.node("step", node_id="settled", depends_on=[a, b], join=JoinMode.ALL_SETTLED)
    pipeline.node("step", node_id="after_all", depends_on=["all"])
    pipeline.node("step", node_id="after_settled", depends_on=[settled])
    return pipeline


def test_join_rules_are_applied_by_the_store(store: TaskStore) -> None:
    client = Client(store, tasks=[step])
    handle = client.enqueue_pipeline(_fan_in(AggregationPolicy.all_settled()), run_id="r")
    assert set(handle.statuses().values()) == {S.QUEUED, S.BLOCKED}
    _settle(store, "r/a", S.SUCCEEDED)
    statuses = handle.statuses()
    assert statuses["any"] is S.QUEUED  # the first success releases it
    assert statuses["all"] is S.BLOCKED
    assert statuses["settled"] is S.BLOCKED
    _settle(store, "r/b", S.FAILED)
    statuses = handle.statuses()
    assert statuses["all"] is S.SKIPPED
    assert statuses["after_all"] is S.SKIPPED
    assert statuses["settled"] is S.QUEUED
    assert statuses["after_settled"] is S.BLOCKED
    skipped = store.get("r/all")
    assert skipped is not None
    assert skipped.failure is not None
    assert skipped.failure.kind is FailureKind.DEPENDENCY_FAILED
    assert "'b' (failed)" in skipped.failure.message
    history = store.history("r/settled")
    assert [(t.from_status, t.to_status, t.trigger) for t in history[-1:]] == [
        (S.BLOCKED, S.QUEUED, "pipeline:released")
    ]


def test_fail_fast_skips_blocked_nodes_and_cancels_queued_ones(store: TaskStore) -> None:
    client = Client(store, tasks=[step])
    pipeline = _fan_in(AggregationPolicy.fail_fast())
    pipeline.node("step", node_id="lone")  # a root nobody took yet
    handle = client.enqueue_pipeline(pipeline, run_id="ff")
    _settle(store, "ff/a", S.FAILED)
    statuses = handle.statuses()
    assert statuses["lone"] is S.CANCELLED
    assert statuses["b"] is S.CANCELLED
    assert {statuses[n] for n in ("all", "any", "settled", "after_all", "after_settled")} == {
        S.SKIPPED
    }
    outcome = handle.wait(5)
    assert outcome.status is S.FAILED
    assert outcome.first_failure is not None
    assert outcome.first_failure.node_id == "a"


def test_a_lost_upstream_settles_its_dependants_in_the_same_write(store: TaskStore) -> None:
    client = Client(store, tasks=[step])
    pipeline = Pipeline("lost", aggregation=AggregationPolicy.all_settled())
    a = pipeline.node("step", node_id="a")
    pipeline.node("step", node_id="strict", depends_on=[a])
    pipeline.node("step", node_id="lenient", depends_on=[a], join=JoinMode.ALL_SETTLED)
    handle = client.enqueue_pipeline(pipeline, run_id="l")
    stored = store.get("l/a")
    assert stored is not None
    machine = StateMachine(stored, clock=store.clock)
    machine.mark_starting()
    machine.mark_running()
    running = machine.snapshot.replace(
        owner="dead", lease_owner="dead", lease_until=store.clock.now() - timedelta(seconds=5)
    )
    store.save(running, expect_version=stored.status_version, transitions=machine.transitions)
    marks = store.mark_lost_many(
        TaskQuery(statuses=frozenset({S.RUNNING}), lease_expired_by=store.clock.now()),
        clock=store.clock,
        actor="test",
        trigger="reconcile:lost",
        failure=lambda c: Failure(kind=FailureKind.LOST, message="lease expired", retryable=False),
    )
    assert [m.task_id for m in marks] == ["l/a"]
    assert handle.statuses() == {"a": S.LOST, "strict": S.SKIPPED, "lenient": S.QUEUED}


def test_the_whole_dag_is_stored_at_once_or_not_at_all(store: TaskStore) -> None:
    client = Client(store, tasks=[step])
    bad = Pipeline("bad")
    root = bad.node("step", 1, node_id="root")
    bad.node("step", "not", "binding", node_id="oops", depends_on=[root])
    with pytest.raises(ConfigurationError, match=r"node 'oops'.*nothing was enqueued"):
        client.enqueue_pipeline(bad, run_id="b")
    assert store.query(TaskQuery(metadata_eq={"pipeline_run": "b"})) == []
    good = Pipeline("good")
    good.node("step", node_id="x")
    client.enqueue_pipeline(good, run_id="g")
    with pytest.raises(ConfigurationError, match="run id 'g' is already used"):
        client.enqueue_pipeline(good, run_id="g")
    with pytest.raises(ConfigurationError, match="no fleet pipeline run 'nope'"):
        client.pipeline("nope")
    with pytest.raises(ConfigurationError, match="reserved"):
        client.enqueue("step", metadata={"pipeline_dag": {}})


def test_stop_of_the_handle_stops_every_unfinished_node(store: TaskStore) -> None:
    client = Client(store, tasks=[step])
    handle = client.enqueue_pipeline(_fan_in(AggregationPolicy.all_settled()), run_id="s")
    _settle(store, "s/a", S.SUCCEEDED)
    assert client.pipeline("s").stop("enough") is True
    statuses = handle.statuses()
    assert statuses.pop("a") is S.SUCCEEDED
    assert set(statuses.values()) == {S.STOPPED}
    assert handle.wait(5).status is S.STOPPED
