"""``chongming_task.worker`` used from Python: submissions, refusals, buckets, shutdown."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_task.controller import Controller
from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy
from chongming_task.stores.sqlite import SqliteTaskStore
from chongming_task.testing import wait_until
from chongming_task.worker import (
    Submission,
    Worker,
    describe_submission,
    find_submission,
    submission_command_id,
)

from .conftest import Result

Invoke = Callable[..., Result]


def add(ctx: Any, a: int, b: int = 1) -> int:
    return a + b


def spin(ctx: Any, steps: int = 100_000) -> int:
    import time

    for _ in range(steps):
        ctx.checkpoint()
        time.sleep(0.005)
    return steps


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(tmp_path / "w.db") as opened:
        yield opened


def _worker(store: SqliteTaskStore, **options: Any) -> tuple[Controller, Worker]:
    max_parallel = options.pop("max_parallel", 2)
    controller = Controller(store, owner="w1", max_parallel=max_parallel, **options)
    controller.register("add", add)
    controller.register("spin", spin)
    worker = Worker(controller, max_parallel=max_parallel, poll_interval=0.05)
    return controller, worker


def test_submission_round_trip_and_deterministic_id(store: SqliteTaskStore) -> None:
    submission = Submission(name="add", task_id="t1", kwargs={"a": 2}, tags=("x",), priority=3)
    assert Submission.from_payload(submission.to_payload()) == submission
    command = submission.submit(store, issued_by="me")
    assert command.command_id == submission_command_id("t1")
    assert (command.kind, command.action, command.target_owner) == ("task", "submit", None)
    found = find_submission(store, "t1")
    assert found is not None
    assert "no worker has taken it yet" in describe_submission(found)
    with pytest.raises(ConfigurationError, match="already submitted"):
        submission.submit(store, issued_by="me")
    with pytest.raises(ConfigurationError, match="not JSON-serialisable"):
        Submission(name="add", task_id="t2", kwargs={"a": object()})


def test_worker_runs_submissions_and_reports_shutdown(store: SqliteTaskStore) -> None:
    controller, worker = _worker(store)
    report = worker.start()
    assert report.clean
    Submission(name="add", task_id="ok", kwargs={"a": 40, "b": 2}).submit(store, issued_by="me")
    Submission(name="spin", task_id="long").submit(store, issued_by="me")
    wait_until(lambda: (s := store.get("ok")) is not None and s.status.value == "succeeded")
    wait_until(lambda: (s := store.get("long")) is not None and s.status.value == "running")
    snapshot = store.get("ok")
    assert snapshot is not None
    assert (snapshot.outcome, snapshot.owner) == (42, "w1")
    command = find_submission(store, "ok")
    assert command is not None
    assert command.result == {"accepted": True, "task_id": "ok", "worker": "w1"}

    shutdown = worker.shutdown(reason="test over", timeout=10)
    assert shutdown.clean
    assert [(t.task_id, t.before, t.after) for t in shutdown.tasks] == [
        ("long", "running", "stopped")
    ]
    assert [(t.from_status, t.to_status) for t in store.history("long")][-2:] == [
        ("running", "stopping"),
        ("stopping", "stopped"),
    ]
    assert worker.accepted == 2
    assert controller.closed


def test_worker_refuses_what_it_cannot_run(
    store: SqliteTaskStore, invoke: Invoke, tmp_path: Path
) -> None:
    _controller, worker = _worker(store)
    worker.start()
    try:
        Submission(name="nosuch", task_id="r1").submit(store, issued_by="me")
        Submission(name="add", task_id="r2", kwargs={"zzz": 1}).submit(store, issued_by="me")
        for task_id in ("r1", "r2"):
            wait_until(
                lambda task_id=task_id: (
                    (c := find_submission(store, task_id)) is not None and c.status == "completed"
                )
            )
    finally:
        worker.shutdown(timeout=5)
    refused = find_submission(store, "r1")
    assert refused is not None
    assert refused.result["accepted"] is False  # type: ignore[index]
    assert "not registered" in refused.result["error"]  # type: ignore[index]
    assert worker.refused >= 1
    status = invoke("--db", str(tmp_path / "w.db"), "status", "r1")
    assert status.code == 0
    assert "was refused by worker w1" in status.out
    assert "not registered" in status.out


def test_worker_takes_only_its_buckets_and_only_free_slots(store: SqliteTaskStore) -> None:
    policy = BucketPolicy(num_buckets=4)
    mine = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") == 0)
    theirs = next(f"k{i}" for i in range(100) if policy.bucket_for(f"k{i}") == 3)
    controller, worker = _worker(store, max_parallel=1, num_buckets=4, owned_buckets=[0, 1])
    worker.start()
    try:
        Submission(name="spin", task_id="a", bucket_key=mine).submit(store, issued_by="me")
        Submission(name="spin", task_id="b", bucket_key=mine).submit(store, issued_by="me")
        Submission(name="add", task_id="c", bucket_key=theirs, kwargs={"a": 1}).submit(
            store, issued_by="me"
        )

        # One of "a" and "b" takes the only slot. Usually "a", but not always: the
        # controller's own command poller may hold "a" for an instant (it claims every
        # task command and hands back the submissions), and the worker then claims "b".
        def running_one() -> str | None:
            for task_id in ("a", "b"):
                snap = store.get(task_id)
                if snap is not None and snap.status.value == "running":
                    return task_id
            return None

        first = wait_until(running_one)
        second = "b" if first == "a" else "a"
        assert worker.free_slots() == 0
        # Full: the other waits for a slot, "c" belongs to another node's bucket.
        assert store.get(second) is None
        assert store.get("c") is None
        other = find_submission(store, "c")
        assert other is not None
        assert other.status != "completed"
        controller.stop(first, reason="make room")
        wait_until(lambda: (s := store.get(second)) is not None and s.status.value == "running")
        assert store.get("c") is None
    finally:
        shutdown = worker.shutdown(timeout=10)
    assert {t.task_id for t in shutdown.tasks} == {second}


def test_worker_needs_a_sane_configuration() -> None:
    controller = Controller()
    try:
        with pytest.raises(ConfigurationError, match="max_parallel"):
            Worker(controller, max_parallel=0)
    finally:
        controller.close()


def test_rich_output_paths(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal: live progress for run, rich tables for ps (and --watch)."""
    from chongming_task.cli import main

    from .conftest import TASKS

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    db = str(tmp_path / "tty.db")
    out = Tty()
    code = main(
        [
            "--db",
            db,
            "run",
            "loop",
            "--tasks",
            TASKS,
            "--arg",
            "steps=3",
            "--arg",
            "delay=0.05",
            "--task-id",
            "t1",
        ],
        stdout=out,
        stderr=io.StringIO(),
    )
    assert code == 0
    assert "t1: succeeded, outcome 3" in out.getvalue()
    assert "\x1b[" in out.getvalue()
    for argv in (["ps"], ["ps", "--watch", "--count", "2", "--interval", "0.01"], ["stats"]):
        out = Tty()
        assert main(["--db", db, *argv], stdout=out, stderr=io.StringIO()) == 0
        assert "succeeded" in out.getvalue()
