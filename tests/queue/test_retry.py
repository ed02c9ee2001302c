"""Run it again: ``Client.retry``/``retry_many``, the CLI ``retry``, on every store.

A retried task keeps its id and history, moves back to ``queued`` through one guarded
write recorded as ``operator:retry`` (who, why, when), and runs again from its stored
recipe on a worker that may claim it. Refusals, dry runs and losing races write
nothing. The acceptance test runs real ``chongming-task worker`` processes on SQLite
and PostgreSQL: a body that fails the first time succeeds, after a retry by id (the
API) and by filter (the CLI), on a second worker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from _finished import settle
from _workers import cli, spawn_worker, stop_workers
from chongming_task import AsyncClient, Client, TaskStatus, task
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError, InvalidState, UnknownTask
from chongming_task.policies import RetryPolicy
from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock, wait_until

S = TaskStatus
BAD_REASON: Any = 42
HERE = Path(__file__).parent
TASKS = str(HERE / "rtasks.py")


@task(retry=RetryPolicy(max_attempts=3))
def three_tries(ctx: Any) -> None:
    """Registered only for its retry policy (``max_attempts`` 3)."""


@pytest.fixture
def store_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(store: TaskStore) -> Client:
    return Client(store, actor="ops:alice")


def _state(store: TaskStore, task_id: str) -> tuple[object, list[Any]]:
    return store.get(task_id), store.history(task_id)


def _retries(store: TaskStore, task_id: str) -> list[tuple[str | None, str | None]]:
    return [(t.actor, t.reason) for t in store.history(task_id) if t.trigger == "operator:retry"]


# ---------------------------------------------------------------- by id


@pytest.mark.parametrize("final", [S.FAILED, S.STOPPED, S.LOST, S.CANCELLED])
def test_a_finished_task_is_queued_again_with_its_history(
    client: Client, store: TaskStore, store_clock: FakeClock, final: TaskStatus
) -> None:
    task_id = client.enqueue("job", 7, task_id="invoice-1099").task_id
    before = settle(store, task_id, final)
    history = store.history(task_id)
    store_clock.advance(90)

    handle = client.retry(task_id, reason="fixed the config")

    assert handle.task_id == task_id
    after = store.get(task_id)
    assert after is not None
    assert after.status is S.QUEUED
    assert after.status_version == before.status_version + 1
    assert (after.owner, after.lease_owner, after.lease_until) == (None, None, None)
    assert (after.failure, after.finished_at, after.started_at) == (None, None, None)
    assert after.attempt == 1  # attempts continue counting: the next one is attempt 2
    assert after.max_attempts == 2
    assert after.metadata["recipe"] == before.metadata["recipe"]
    now = store.history(task_id)
    assert now[: len(history)] == history  # the history is kept
    [record] = now[len(history) :]
    assert (record.from_status, record.to_status, record.trigger) == (
        final,
        S.QUEUED,
        "operator:retry",
    )
    assert (record.actor, record.reason, record.at) == (
        "ops:alice",
        "fixed the config",
        store_clock.now(),
    )


def test_the_retry_policy_budget_is_what_remains(store: TaskStore) -> None:
    client = Client(store, tasks=[three_tries], actor="ops")
    stopped_early = client.enqueue("three_tries").task_id
    settle(store, stopped_early, S.STOPPED)  # on its first of three attempts
    assert client.retry(stopped_early).snapshot.max_attempts == 3  # two left, unchanged
    used_up = client.enqueue("three_tries").task_id
    stored = store.get(used_up)
    assert stored is not None
    machine = StateMachine(stored, clock=store.clock)
    for _ in range(2):
        machine.mark_starting()
        machine.mark_running()
        machine.mark_retry_wait(_boom(), delay=0)
    machine.mark_starting()
    machine.mark_running()
    machine.mark_failed(_boom())
    store.save(
        machine.snapshot, expect_version=stored.status_version, transitions=machine.transitions
    )
    again = client.retry(used_up).snapshot
    assert (again.attempt, again.max_attempts) == (3, 4)  # exactly one more attempt


def _boom() -> Any:
    from chongming_task._model import Failure, FailureKind

    return Failure(kind=FailureKind.EXCEPTION, message="boom", retryable=True)


def _no_recipe(store: TaskStore) -> str:
    machine = StateMachine.create("local-1", "job", clock=store.clock)
    machine.mark_queued()
    store.create(machine.snapshot, machine.transitions)
    return settle(store, "local-1", S.FAILED).task_id


REFUSED = [
    (S.RUNNING, "is running, not finished: only a finished task can be run again"),
    (S.SUCCEEDED, "succeeded: that is not a failure, so it is not retried"),
    (S.SKIPPED, "skipped: that is not a failure"),
]


@pytest.mark.parametrize(("status", "message"), REFUSED)
def test_refused_for_a_task_that_is_not_a_finished_failure(
    client: Client, store: TaskStore, status: TaskStatus, message: str
) -> None:
    task_id = client.enqueue("job").task_id
    settle(store, task_id, status)
    before = _state(store, task_id)
    with pytest.raises(InvalidState, match=message):
        client.retry(task_id, reason="again")
    assert _state(store, task_id) == before


def test_refused_without_a_recipe_saying_how_to_make_one(client: Client, store: TaskStore) -> None:
    task_id = _no_recipe(store)
    before = _state(store, task_id)
    with pytest.raises(InvalidState, match=r"no stored recipe .* enqueue it with Client.enqueue"):
        client.retry(task_id)
    assert _state(store, task_id) == before


def test_refused_for_an_unknown_id_or_bad_input(client: Client, store: TaskStore) -> None:
    with pytest.raises(UnknownTask, match="no task 'nope' in the store"):
        client.retry("nope")
    task_id = client.enqueue("job").task_id
    settle(store, task_id, S.FAILED)
    before = _state(store, task_id)
    with pytest.raises(ConfigurationError, match="reason must be a string"):
        client.retry(task_id, reason=BAD_REASON)
    with pytest.raises(ConfigurationError, match="task_id"):
        client.retry("")
    assert _state(store, task_id) == before
    assert store.get("nope") is None


def test_a_retry_may_not_give_a_unique_key_a_second_unfinished_task(
    client: Client, store: TaskStore
) -> None:
    first = client.enqueue("job", unique_key="k").task_id
    settle(store, first, S.FAILED)
    second = client.enqueue("job", unique_key="k")
    assert second.created
    before = _state(store, first)
    with pytest.raises(ConfigurationError, match="unique_key 'k' is not finished"):
        client.retry(first)
    assert _state(store, first) == before
    settle(store, second.task_id, S.SUCCEEDED)
    assert client.retry(first).status is S.QUEUED  # the key is free again


def test_two_retries_of_one_task_one_wins(
    client: Client, store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rival writes between this retry's read and its guarded write."""
    task_id = client.enqueue("job").task_id
    settle(store, task_id, S.FAILED)
    rival = Client(store, actor="ops:bob")
    real_get = store.get
    raced: list[bool] = []

    def get(wanted: str) -> Any:
        found = real_get(wanted)
        if not raced:
            raced.append(True)
            rival.retry(wanted, reason="bob was first")
        return found

    monkeypatch.setattr(store, "get", get)
    with pytest.raises(InvalidState, match="is queued, not finished"):
        client.retry(task_id, reason="alice too")
    monkeypatch.undo()
    assert _retries(store, task_id) == [("ops:bob", "bob was first")]
    assert store.get(task_id).status is S.QUEUED  # type: ignore[union-attr]


def test_racing_threads_one_retry_wins(client: Client, store: TaskStore) -> None:
    for round_ in range(5):
        task_id = client.enqueue("job", round_).task_id
        settle(store, task_id, S.FAILED)
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def retry(
            who: str,
            task_id: str = task_id,
            barrier: threading.Barrier = barrier,
            outcomes: list[str] = outcomes,
        ) -> None:
            barrier.wait()
            try:
                Client(store, actor=who).retry(task_id, reason=who)
            except InvalidState:
                outcomes.append("refused")
            else:
                outcomes.append("won")

        threads = [threading.Thread(target=retry, args=(who,)) for who in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(outcomes) == ["refused", "won"]
        assert len(_retries(store, task_id)) == 1


# ---------------------------------------------------------------- by filter


def test_retry_many_by_filter(client: Client, store: TaskStore) -> None:
    failed = [client.enqueue("report.daily", i).task_id for i in range(2)]
    for task_id in failed:
        settle(store, task_id, S.FAILED)
    other = client.enqueue("mail.send").task_id
    settle(store, other, S.FAILED)
    done = client.enqueue("report.daily", 9).task_id
    settle(store, done, S.SUCCEEDED)
    local = _no_recipe(store)

    report = client.retry_many(status="failed", name_prefix="report.", reason="db is back")
    assert sorted(report.matched) == sorted(failed)
    assert sorted(report.retried) == sorted(failed)
    assert report.refused == {}
    for task_id in failed:
        assert store.get(task_id).status is S.QUEUED  # type: ignore[union-attr]
        assert _retries(store, task_id) == [("ops:alice", "db is back")]
    assert store.get(other).status is S.FAILED  # type: ignore[union-attr]
    assert store.get(done).status is S.SUCCEEDED  # type: ignore[union-attr]

    everything = client.retry_many(name_prefix="", reason="all")  # every retryable status
    assert sorted(everything.matched) == sorted([other, local])
    assert everything.retried == (other,)
    assert "no stored recipe" in everything.refused[local]


def test_retry_many_dry_run_changes_nothing(client: Client, store: TaskStore) -> None:
    ids = [client.enqueue("job", i).task_id for i in range(3)]
    for task_id in ids:
        settle(store, task_id, S.STOPPED)
    local = _no_recipe(store)
    before = {task_id: _state(store, task_id) for task_id in [*ids, local]}
    report = client.retry_many(status=["stopped", "failed"], dry_run=True)
    assert report.dry_run
    assert sorted(report.retried) == sorted(ids)
    assert list(report.refused) == [local]
    assert {task_id: _state(store, task_id) for task_id in [*ids, local]} == before


@pytest.mark.parametrize(
    ("filters", "error", "message"),
    [
        ({}, ConfigurationError, "needs at least one filter"),
        ({"status": "running"}, ConfigurationError, "no task is retried from running"),
        ({"status": ["failed", "succeeded"]}, ConfigurationError, "from succeeded"),
        ({"status": "nonsense"}, ConfigurationError, "unknown status"),
        ({"stauts": "failed"}, TypeError, "did you mean 'status'"),
    ],
)
def test_retry_many_refuses_bad_filters(
    client: Client, store: TaskStore, filters: dict[str, Any], error: type[Exception], message: str
) -> None:
    task_id = client.enqueue("job").task_id
    settle(store, task_id, S.FAILED)
    before = _state(store, task_id)
    with pytest.raises(error, match=message):
        client.retry_many(**filters)
    assert _state(store, task_id) == before


def test_async_twins(client: Client, store: TaskStore) -> None:
    ids = [client.enqueue("job", i).task_id for i in range(2)]
    for task_id in ids:
        settle(store, task_id, S.FAILED)
    aclient = AsyncClient(store, actor="ops:async")

    async def main() -> None:
        handle = await aclient.retry(ids[0], reason="one")
        assert await handle.status() is S.QUEUED
        report = await aclient.retry_many(status="failed", reason="rest")
        assert report.retried == (ids[1],)

    asyncio.run(main())
    assert _retries(store, ids[0]) == [("ops:async", "one")]
    assert _retries(store, ids[1]) == [("ops:async", "rest")]


# ---------------------------------------------------------------- real workers


def _worker(db: str, owner: str, logs: Path) -> subprocess.Popen[bytes]:
    return spawn_worker(
        db,
        logs / f"{owner}.log",
        options=["--owner", owner],
        worker=["--tasks", TASKS, "--max-parallel", "2", "--poll-interval", "0.1"],
    )


def _status_is(store: TaskStore, task_id: str, status: TaskStatus) -> bool:
    found = store.get(task_id)
    return found is not None and found.status is status


def test_retried_tasks_succeed_on_another_worker(
    shared_store: tuple[TaskStore, str], tmp_path: Path
) -> None:
    store, db = shared_store
    flags = tmp_path / "flags"
    flags.mkdir()
    (flags / "ok").write_text("present: succeeds at once")
    client = Client(store, actor="ops:alice")
    ids = {
        name: client.enqueue("flaky", str(flags / name), task_id=name).task_id
        for name in ("by-id", "by-filter-1", "by-filter-2", "ok")
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    first = _worker(db, "w-a", logs)
    procs = [first]
    try:
        for name, task_id in ids.items():
            want = S.SUCCEEDED if name == "ok" else S.FAILED
            wait_until(
                lambda t=task_id, w=want: _status_is(store, t, w),  # type: ignore[misc]
                timeout=30,
            )
        first.terminate()
        first.wait(15)
        second = _worker(db, "w-b", logs)
        procs.append(second)

        # By id, through the API.
        client.retry(ids["by-id"], reason="fixed the config")
        outcome = client.wait(ids["by-id"], timeout=30)
        assert outcome.status is S.SUCCEEDED
        assert outcome.value == second.pid  # the body ran on the second worker
        trail = [(t.from_status, t.to_status, t.trigger) for t in store.history(ids["by-id"])]
        assert trail[4:7] == [
            (S.RUNNING, S.FAILED, "runtime:failed"),
            (S.FAILED, S.QUEUED, "operator:retry"),
            (S.QUEUED, S.STARTING, "executor:starting"),
        ]
        assert _retries(store, ids["by-id"]) == [("ops:alice", "fixed the config")]
        assert store.get(ids["by-id"]).attempt == 2  # type: ignore[union-attr]

        # By filter, through the CLI: the count first; a dry run changes nothing.
        batch = [ids["by-filter-1"], ids["by-filter-2"]]
        dry = cli(db, "retry", "--status", "failed", "--name", "flaky", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines()[0] == "2 task(s) match"
        assert "--dry-run: nothing changed" in dry.stdout
        assert all(_status_is(store, task_id, S.FAILED) for task_id in batch)
        done = cli(
            db, "retry", "--status", "failed", "--name", "flaky", "--reason", "api is back",
            "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        assert (document["matched"], sorted(document["retried"])) == (2, sorted(batch))
        for task_id in batch:
            assert client.wait(task_id, timeout=30).value == second.pid
            [(actor, reason)] = _retries(store, task_id)
            assert str(actor).startswith("cli@")
            assert reason == "api is back"
    finally:
        stop_workers(procs, logs)


def test_cli_retry_by_id_and_its_refusals(shared_store: tuple[TaskStore, str]) -> None:
    store, db = shared_store
    client = Client(store, actor="ops")
    failed = client.enqueue("job", task_id="invoice-1099").task_id
    settle(store, failed, S.FAILED)
    running = client.enqueue("job", task_id="busy").task_id
    settle(store, running, S.RUNNING)
    local = _no_recipe(store)
    before = {t: _state(store, t) for t in (running, local)}

    for task_id, code, text in [
        (running, 2, "is running, not finished"),
        (local, 2, "no stored recipe"),
        ("nope", 1, "unknown task id 'nope'"),
    ]:
        refused = cli(db, "retry", task_id)
        assert refused.returncode == code, refused
        [line] = refused.stderr.splitlines()
        assert text in line
    assert {t: _state(store, t) for t in (running, local)} == before
    usage = cli(db, "retry")
    assert usage.returncode == 2
    assert "give the ids of the tasks to retry, or filters" in usage.stderr

    done = cli(db, "retry", failed, "--reason", "fixed")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "retried invoice-1099: failed -> queued (attempt 2 next; history kept)"
    )
    assert _retries(store, failed)[0][1] == "fixed"
    again = cli(db, "retry", failed, running)
    assert again.returncode == 2
    assert "2 of 2 refused" in again.stderr
