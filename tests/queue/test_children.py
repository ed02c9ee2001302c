"""Child tasks: ``ctx.enqueue`` and ``ctx.wait_children``, and a stop that reaches them.

A child is enqueued through the queue with its parent's id stored on it (the reserved
metadata key ``parent``, indexed by the SQL stores); an operator's stop of the parent
(``control_task``: the CLI, ``Client``, ``Controller``, the dashboard) stops every
unfinished descendant, a queued one by a guarded write and a held one by a command to
its holder, with the reason ``parent X stopped``. The acceptance test runs real
``chongming-task worker`` processes on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _finished import settle
from _workers import cli, spawn_worker, stop_workers
from chongming_task import Client, Controller, TaskStatus
from chongming_task.errors import ConfigurationError
from chongming_task.queue._children import QueueChildren
from chongming_task.stores._base import TaskStore
from chongming_task.stores._queue_records import children_query, parent_of
from chongming_task.testing import wait_until
from chongming_task.worker import Worker

S = TaskStatus
HERE = Path(__file__).parent
TASKS = str(HERE / "ctasks.py")
sys.path.insert(0, str(HERE))
import ctasks  # noqa: E402


def _children(store: TaskStore, parent: str) -> QueueChildren:
    return QueueChildren(store, registry=None, bucket_policy=Client(store).bucket_policy)


def _stops(store: TaskStore, task_id: str) -> list[tuple[str | None, str | None]]:
    """(actor, reason) of each stop request in the stored history."""
    return [
        (t.actor, t.reason)
        for t in store.history(task_id)
        if t.to_status in (S.STOPPED, S.STOPPING) and t.from_status is not S.STOPPING
    ]


# ---------------------------------------------------------------- the link, the stop


def test_a_child_stores_its_parent_and_is_listed_by_it(store: TaskStore) -> None:
    client = Client(store, actor="ops")
    parent = client.enqueue("spawner", task_id="p").task_id
    children = _children(store, parent)
    first = children.enqueue(parent, "leaf", (1,), {"unique_key": "leaf-1"})
    second = children.enqueue(parent, "leaf", (), {"n": 2, "delay": 60})
    again = children.enqueue(parent, "leaf", (1,), {"unique_key": "leaf-1"})

    assert (again.task_id, again.created) == (first.task_id, False)  # options pass through
    stored = [t.task_id for t in store.query(children_query(parent))]
    assert stored == [first.task_id, second.task_id]
    assert parent_of(first.snapshot) == parent
    assert first.snapshot.metadata["recipe"]["enqueued_by"] == f"task:{parent}"
    assert second.snapshot.metadata["recipe"]["not_before"] is not None
    assert parent_of(store.get(parent)) is None  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="'parent' is reserved"):
        client.enqueue("leaf", 1, metadata={"parent": parent})


def test_stopping_a_parent_stops_its_unfinished_descendants(store: TaskStore) -> None:
    client = Client(store, actor="ops:alice")
    parent = client.enqueue("spawner", task_id="p").task_id
    children = _children(store, parent)
    queued = children.enqueue(parent, "spin", (), {"task_id": "p.queued"}).task_id
    held = children.enqueue(parent, "spin", (), {"task_id": "p.held"}).task_id
    done = children.enqueue(parent, "leaf", (1,), {"task_id": "p.done"}).task_id
    grandchild = children.enqueue(done, "spin", (), {"task_id": "p.done.g"}).task_id
    unrelated = client.enqueue("spin", task_id="other").task_id
    settle(store, held, S.RUNNING, owner="worker-b")
    settle(store, done, S.SUCCEEDED)

    assert client.stop(parent, reason="enough") is True

    assert store.get(parent).status is S.STOPPED  # type: ignore[union-attr]
    for task_id, immediate in [(queued, True), (grandchild, True), (held, False)]:
        found = store.get(task_id)
        assert found is not None
        assert found.status is (S.STOPPED if immediate else S.RUNNING), task_id
    assert _stops(store, queued) == [("ops:alice", "parent p stopped")]
    assert _stops(store, grandchild) == [("ops:alice", "parent p.done stopped")]
    # The held child: a command addressed to its holder, who applies it.
    # Stopping the finished parent again asks again, as a second stop of a held task.
    assert client.stop(parent) is True
    commands = store.claim_commands("worker-b", lease=5, kinds=["task"])
    assert [(c.target, c.action, c.payload) for c in commands] == 2 * [
        (held, "stop", {"reason": "parent p stopped"})
    ]
    assert store.get(done).status is S.SUCCEEDED  # type: ignore[union-attr]
    assert store.get(unrelated).status is S.QUEUED  # type: ignore[union-attr]


def test_pause_does_not_reach_children(store: TaskStore) -> None:
    client = Client(store, actor="ops")
    parent = client.enqueue("spawner", task_id="p").task_id
    child = _children(store, parent).enqueue(parent, "spin", (), {}).task_id
    assert client.pause(parent) is True
    assert store.get(child).status is S.QUEUED  # type: ignore[union-attr]


# ---------------------------------------------------------------- in a task body


def _controller(store: TaskStore, owner: str) -> Controller:
    controller = Controller(store=store, owner=owner, max_parallel=3)
    controller.register_module(ctasks)
    return controller


def test_a_parent_waits_for_its_children_on_an_in_process_worker() -> None:
    from chongming_task import InMemoryTaskStore

    with InMemoryTaskStore() as store:
        client = Client(store, tasks=ctasks, poll_interval=0.02)
        worker = Worker(_controller(store, "w1"), max_parallel=3, poll_interval=0.02)
        worker.start()
        try:
            handle = client.enqueue("fan_out", 4)
            outcome = handle.wait(30)
        finally:
            worker.shutdown(timeout=10)
        assert (outcome.status, outcome.value) == (S.SUCCEEDED, [10, 40])
        kids = store.query(children_query(handle.task_id))
        assert [(k.name, k.status, parent_of(k)) for k in kids] == [
            ("leaf", S.SUCCEEDED, handle.task_id),
            ("leaf", S.SUCCEEDED, handle.task_id),
        ]


def test_enqueue_outside_a_claimed_task_is_refused() -> None:
    seen: list[str] = []

    def body(ctx: Any) -> None:
        for call in (lambda: ctx.enqueue("leaf", 1), ctx.wait_children):
            try:
                call()
            except ConfigurationError as exc:
                seen.append(str(exc))

    with Controller() as controller:
        controller.register("body", body)
        controller.submit("body").wait(10)
    assert len(seen) == 2
    assert "needs a task a worker claimed from the work queue" in seen[0]


# ---------------------------------------------------------------- real workers


def _worker(db: str, owner: str, logs: Path) -> subprocess.Popen[bytes]:
    return spawn_worker(
        db,
        logs / f"{owner}.log",
        options=["--owner", owner],
        worker=["--tasks", TASKS, "--max-parallel", "3", "--poll-interval", "0.1"],
    )


def _status_is(store: TaskStore, task_id: str, status: TaskStatus) -> bool:
    found = store.get(task_id)
    return found is not None and found.status is status


def test_children_run_on_workers_and_stop_with_their_parent(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    client = Client(store, actor="ops:alice")
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = [_worker(db, "w-a", logs), _worker(db, "w-b", logs)]
    try:
        # Two children run on the workers; the parent waits and returns their values.
        waiting = client.enqueue("fan_out", 7, task_id="fan")
        outcome = waiting.wait(60)
        assert (outcome.status, outcome.value) == (S.SUCCEEDED, [10, 70])
        kids = store.query(children_query("fan"))
        assert [(k.status, k.outcome, parent_of(k)) for k in kids] == [
            (S.SUCCEEDED, 10, "fan"),
            (S.SUCCEEDED, 70, "fan"),
        ]
        status = cli(db, "status", "fan", "--json")
        assert status.returncode == 0, status.stderr
        document = json.loads(status.stdout)
        assert document["children"] == [k.task_id for k in kids]
        child_doc = json.loads(cli(db, "status", kids[0].task_id, "--json").stdout)
        assert child_doc["task"]["parent"] == "fan"

        # Stopped through the CLI: the running child and the queued one stop with it.
        parent = client.enqueue("spawner", task_id="boss").task_id
        running, queued = "boss.running", "boss.queued"
        wait_until(lambda: _status_is(store, running, S.RUNNING), timeout=30)
        assert _status_is(store, queued, S.QUEUED)
        stop = cli(db, "stop", parent, "--reason", "deploy")
        assert stop.returncode == 0, stop.stderr
        for task_id in (parent, running, queued):
            wait_until(lambda t=task_id: _status_is(store, t, S.STOPPED), timeout=30)  # type: ignore[misc]
        assert _stops(store, queued)[0][1] == "parent boss stopped"
        trail = [(t.to_status, t.reason) for t in store.history(running)]
        assert (S.STOPPING, "parent boss stopped") in trail
        assert trail[-1][0] is S.STOPPED
        assert parent_of(store.get(running)) == parent  # type: ignore[arg-type]
        assert str(_stops(store, running)[0][0]).startswith("cli@")
    finally:
        stop_workers(procs, logs)
