"""Pipelines on the fleet with real worker processes (SQLite and PostgreSQL).

A client enqueues a pipeline; two ``chongming-task worker`` processes run its nodes;
the worker running one node is SIGKILLed mid-DAG. Nobody orchestrates: the node
becomes ``lost`` through the other worker's reconcile, and the store, in that same
transaction, skips or releases its dependants as their join modes say. Every node
ends in the state its join rule gives, and upstream values reach the fan-in nodes.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from _workers import on_path, spawn_worker, stop_workers
from chongming_task import AggregationPolicy, Client, JoinMode, Pipeline, TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until

HERE = Path(__file__).parent
TASKS = str(HERE / "pltasks.py")
DEADLINE = 30.0
S = TaskStatus


def _worker(db: str, owner: str, log: Path) -> subprocess.Popen[bytes]:
    return spawn_worker(
        db,
        log,
        options=["--owner", owner],
        worker=[
            # One slot each: the worker running doomed takes nothing else before it dies.
            *("--tasks", TASKS, "--max-parallel", "1"),
            *("--lease-ttl", "1.5", "--poll-interval", "0.1"),
        ],
    )


@pytest.fixture(autouse=True)
def _tasks_on_path() -> Iterator[None]:
    with on_path(HERE):
        yield


def _client(store: TaskStore) -> Client:
    import pltasks

    return Client(store, tasks=[pltasks.emit, pltasks.hang, pltasks.total])


def test_a_pipeline_survives_a_killed_worker(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    gates = tmp_path / "gates"
    gates.mkdir()
    pipeline = Pipeline("fleet", aggregation=AggregationPolicy.all_settled())
    src1 = pipeline.node("emit", 1, node_id="src1")
    src2 = pipeline.node("emit", 2, node_id="src2")
    # Both roots settle before doomed starts: only doomed runs when its worker dies.
    doomed = pipeline.node("hang", str(gates), node_id="doomed", depends_on=[src1, src2])
    pipeline.node(
        "total", ["src1", "src2", "doomed"], node_id="all", depends_on=[src1, src2, doomed]
    )
    pipeline.node(
        "total",
        ["src2", "doomed"],
        node_id="any",
        depends_on=[src2, doomed],
        join=JoinMode.ANY_SUCCEEDED,
    )
    settled = pipeline.node(
        "total",
        ["src1", "src2", "doomed"],
        node_id="settled",
        depends_on=[src1, src2, doomed],
        join=JoinMode.ALL_SETTLED,
    )
    pipeline.node("emit", 9, node_id="tail", depends_on=[settled])
    handle = _client(store).enqueue_pipeline(pipeline, run_id="fleet-1")
    # One transaction stored the whole DAG: roots queued, the rest blocked.
    assert handle.statuses() == {
        "src1": S.QUEUED,
        "src2": S.QUEUED,
        "doomed": S.BLOCKED,
        "all": S.BLOCKED,
        "any": S.BLOCKED,
        "settled": S.BLOCKED,
        "tail": S.BLOCKED,
    }

    logs = tmp_path / "logs"
    logs.mkdir()
    workers = {name: _worker(db, name, logs / f"{name}.log") for name in ("w1", "w2")}
    try:
        marker = gates / "fleet-1_doomed"
        wait_until(marker.exists, timeout=DEADLINE)
        pid = int(marker.read_text())
        [victim] = [name for name, proc in workers.items() if proc.pid == pid]
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait(10)
        # A handle made elsewhere from the run id sees the same run.
        outcome = _client(store).pipeline("fleet-1").wait(DEADLINE)
    finally:
        stop_workers(workers.values(), logs)

    assert outcome.statuses() == {
        "src1": S.SUCCEEDED,
        "src2": S.SUCCEEDED,
        "doomed": S.LOST,
        "all": S.SKIPPED,  # all_succeeded: a lost upstream never succeeds
        "any": S.SUCCEEDED,  # any_succeeded: released by src2
        "settled": S.SUCCEEDED,  # all_settled: released once doomed was lost
        "tail": S.SUCCEEDED,
    }
    assert outcome.status is S.FAILED
    assert outcome.first_failure is not None
    assert outcome.first_failure.node_id == "doomed"
    values = outcome.values()
    assert values["any"] == {"sum": 2, "seen": ["src2"]}
    assert values["settled"] == {"sum": 3, "seen": ["src1", "src2"]}
    skipped = outcome.nodes["all"].failure
    assert skipped is not None
    assert "'doomed' (lost)" in skipped.message
    # The store's own decisions are in each node's history.
    assert "pipeline:released" in [t.trigger for t in store.history("fleet-1/settled")]
    assert [t.to_status for t in store.history("fleet-1/all")][-1] is S.SKIPPED


def test_stop_of_the_handle_stops_every_unfinished_node(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    gates = tmp_path / "gates"
    gates.mkdir()
    pipeline = Pipeline("stoppable")
    first = pipeline.node("emit", 1, node_id="first")
    slow = pipeline.node("hang", str(gates), node_id="slow", depends_on=[first])
    after = pipeline.node("emit", 2, node_id="after", depends_on=[slow])
    pipeline.node("total", ["after"], node_id="last", depends_on=[after])
    handle = _client(store).enqueue_pipeline(pipeline, run_id="stop-1")
    logs = tmp_path / "logs"
    logs.mkdir()
    worker = _worker(db, "w1", logs / "w1.log")
    try:
        wait_until((gates / "stop-1_slow").exists, timeout=DEADLINE)
        assert handle.stop("enough") is True
        outcome = handle.wait(DEADLINE)
    finally:
        stop_workers([worker], logs)
    assert outcome.statuses() == {
        "first": S.SUCCEEDED,
        "slow": S.STOPPED,
        "after": S.STOPPED,
        "last": S.STOPPED,
    }
    assert outcome.status is S.STOPPED
    assert handle.stop() is False
