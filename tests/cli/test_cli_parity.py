"""The CLI in step with the Client and the dashboard, on SQLite and PostgreSQL.

- ``--reason`` on ``stop``, ``pause`` and ``resume``, recorded in the stored
  transition: by the CLI itself for a task nobody holds, by the holder for a held one
  (before, ``pause``/``resume`` refused the option, and a holder dropped the reason).
- Each control command says what the one control path did: applied at once, requested
  from the holder and confirmed by ``--wait``, requested and not confirmed yet, or not
  confirmed in time (exit 1). Before, ``pause --wait`` printed "unconfirmed across
  processes ... now paused".
- ``submit --delay/--not-before`` store the due time; ``submit`` without ``--tasks``
  only enqueues; ``submit --wait`` prints the value or the redacted failure, exit 3
  when the task did not succeed.
- ``ps --owner`` filters by holder (before, it set the process identity and filtered
  nothing); ``--owner`` before the command is still the identity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming_task.controller._document import due_at
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until

from .conftest import TASKS, Result, WorkerProcess, peek_status, store_dump

Invoke = Callable[..., Result]
StartWorker = Callable[..., WorkerProcess]
NOT_YET = "; not confirmed yet (see `chongming-task status {}`, or pass --wait)"


@pytest.fixture
def store(db: str) -> Iterator[TaskStore]:
    opened: TaskStore
    if db.startswith("postgresql://"):
        from chongming_task.stores._postgres import PostgresTaskStore

        opened = PostgresTaskStore(db)
    else:
        from chongming_task.stores._sqlite import SqliteTaskStore

        opened = SqliteTaskStore(db)
    yield opened
    opened.close()


def last(store: TaskStore, task_id: str, to: str) -> Any:
    """The newest stored transition of ``task_id`` into ``to``."""
    return [item for item in store.history(task_id) if item.to_status.value == to][-1]


def wait_status(db: str, task_id: str, *statuses: str) -> str:
    return str(
        wait_until(
            lambda: (status := peek_status(db, task_id)) in statuses and status,
            timeout=30,
            interval=0.02,
            message=f"{task_id} in {statuses}",
        )
    )


def submit(invoke: Invoke, db: str, name: str, task_id: str, *more: str) -> None:
    result = invoke("--db", db, "submit", name, "--tasks", TASKS, "--task-id", task_id, *more)
    assert (result.code, result.out, result.err) == (0, f"{task_id}\n", "")


# ---------------------------------------------------------------- --reason, unheld


def test_reason_on_every_control_command_of_an_unheld_task(
    db: str, invoke: Invoke, store: TaskStore
) -> None:
    submit(invoke, db, "add", "q1", "--arg", "a=1")
    paused = invoke("--db", db, "pause", "q1", "--reason", "deploy window")
    assert (paused.code, paused.err) == (0, "")
    assert paused.out == "paused q1 at once (it was queued, held by no worker); now paused\n"
    pause = last(store, "q1", "paused")
    assert (pause.from_status.value, pause.reason) == ("queued", "deploy window")
    assert pause.actor.startswith("cli@")

    resumed = invoke("--owner", "ops", "--db", db, "resume", "q1", "--reason", "window over")
    assert resumed.out == "resumed q1 at once (it was paused, held by no worker); now queued\n"
    resume = last(store, "q1", "queued")
    assert (resume.from_status.value, resume.reason, resume.actor) == (
        "paused",
        "window over",
        "ops",  # the identity option before the command: the recorded actor
    )

    stopped = invoke("--db", db, "stop", "q1", "--reason", "not needed", "--json")
    assert stopped.code == 0, stopped.err
    document = stopped.json()
    assert {key: document[key] for key in ("outcome", "accepted", "confirmed", "reason")} == {
        "outcome": "applied",
        "accepted": True,
        "confirmed": True,
        "reason": "not needed",
    }
    assert document["task"]["status"] == "stopped"
    assert last(store, "q1", "stopped").reason == "not needed"


def test_refused_control_commands_say_why_and_write_nothing(db: str, invoke: Invoke) -> None:
    submit(invoke, db, "add", "q2", "--arg", "a=1")
    assert invoke("--db", db, "pause", "q2").code == 0
    before = store_dump(db)
    again = invoke("--db", db, "pause", "q2", "--reason", "twice")
    assert (again.code, again.out) == (1, "")
    assert again.err == "chongming-task: error: cannot pause task 'q2': it is paused\n"
    assert invoke("--db", db, "stop", "q2").code == 0
    stopped = store_dump(db)
    for action in ("stop", "pause", "resume"):
        finished = invoke("--db", db, action, "q2", "--reason", "late")
        assert finished.code == 1
        assert "already finished (stopped)" in finished.err or "not paused" in finished.err
    assert store_dump(db) == stopped
    assert before != stopped
    unknown = invoke("--db", db, "pause", "nope", "--reason", "x")
    assert (unknown.code, unknown.err_lines) == (
        1,
        ["chongming-task: error: unknown task id 'nope' (see `chongming-task ps`)"],
    )


# ---------------------------------------------------------------- held by a worker


def test_held_task_requested_confirmed_and_reasons_recorded_by_the_holder(
    db: str, invoke: Invoke, store: TaskStore, start_worker: StartWorker
) -> None:
    worker = start_worker(db, "--owner", "w1", "--max-parallel", "3", "--drain-timeout", "0")
    submit(invoke, db, "loop", "h1")
    submit(invoke, db, "add", "unheld", "--arg", "a=1", "--delay", "1h")
    wait_status(db, "h1", "running")

    listed = invoke("--db", db, "ps", "--owner", "w1", "--json").json()
    assert [task["task_id"] for task in listed["tasks"]] == ["h1"]
    assert invoke("--db", db, "ps", "--owner", "w2", "--json").json()["count"] == 0
    everyone = invoke("--db", db, "ps", "--json").json()
    assert {task["task_id"] for task in everyone["tasks"]} == {"h1", "unheld"}

    paused = invoke("--db", db, "pause", "h1", "--reason", "disk full", "--wait", "20")
    assert (paused.code, paused.err) == (0, "")
    assert paused.out == "pause of h1 requested from its holder w1; confirmed: now paused\n"
    request = last(store, "h1", "pausing")
    assert (request.reason, request.actor.startswith("cli@")) == ("disk full", True)

    resumed = invoke("--db", db, "resume", "h1", "--reason", "disk freed")
    assert (resumed.code, resumed.err) == (0, "")
    assert resumed.out == "resume of h1 requested from its holder w1" + NOT_YET.format("h1") + "\n"
    wait_status(db, "h1", "running")
    back = last(store, "h1", "running")
    assert (back.from_status.value, back.reason) == ("paused", "disk freed")

    stopped = invoke("--db", db, "stop", "h1", "--reason", "enough", "--wait", "20", "--json")
    assert stopped.code == 0, stopped.err
    document = stopped.json()
    assert (document["outcome"], document["confirmed"], document["task"]["status"]) == (
        "requested",
        True,
        "stopped",
    )
    assert last(store, "h1", "stopping").reason == "enough"
    assert worker.process.poll() is None


def test_a_pause_not_confirmed_in_time_exits_1_and_says_so(
    db: str, invoke: Invoke, start_worker: StartWorker
) -> None:
    start_worker(db, "--owner", "w1", "--drain-timeout", "0")
    submit(invoke, db, "stubborn", "s1", "--arg", "seconds=30")  # never reaches a checkpoint
    wait_status(db, "s1", "running")
    result = invoke("--db", db, "pause", "s1", "--reason", "try", "--wait", "0.5")
    assert (result.code, result.out) == (1, "")
    prefix = "chongming-task: error: pause of s1 requested from its holder w1; not confirmed: "
    assert result.err.startswith(prefix + "after 0.5s it is ")
    assert result.err.rstrip().rsplit(" ", 1)[1] in ("running", "pausing")


# ---------------------------------------------------------------- submit


def test_submit_delay_and_not_before_store_the_due_time(
    db: str, invoke: Invoke, store: TaskStore
) -> None:
    def due(task_id: str) -> datetime:
        snapshot = store.get(task_id)
        assert snapshot is not None
        found = due_at(snapshot)
        assert found is not None
        return found

    before = datetime.now(UTC)
    submit(invoke, db, "add", "later", "--arg", "a=1", "--delay", "30m")
    after = datetime.now(UTC)
    assert before + timedelta(minutes=30) <= due("later") <= after + timedelta(minutes=30)
    submit(invoke, db, "add", "seconds", "--arg", "a=1", "--delay", "90")
    assert due("seconds") >= before + timedelta(seconds=90)
    submit(invoke, db, "add", "at", "--arg", "a=1", "--not-before", "2030-01-01T08:00:00+08:00")
    assert due("at") == datetime(2030, 1, 1, tzinfo=UTC)
    listed = invoke("--db", db, "status", "at", "--json").json()["task"]
    assert listed["due_at"] == "2030-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            ["--delay", "3x"],
            "--delay '3x' is not a duration; give seconds (90) or a number and a unit "
            "(30m, 2h, 1d), at most 100 years",
        ),
        (
            ["--not-before", "30m"],
            "--not-before '30m' is not a time; give an ISO time with its offset "
            "(2026-03-01T08:00:00+08:00), or use --delay for a duration",
        ),
        (
            ["--not-before", "2030-01-01T08:00:00"],
            "--not-before '2030-01-01T08:00:00' has no UTC offset; add one (Z, +00:00, "
            "+08:00) so it names one instant",
        ),
        (
            ["--delay", "1", "--not-before", "2030-01-01T00:00:00Z"],
            "argument --not-before: not allowed with argument --delay "
            "(see chongming-task submit --help)",
        ),
    ],
)
def test_submit_refuses_a_bad_due_time_with_exit_2(
    invoke: Invoke, tmp_path: Any, options: list[str], error: str
) -> None:
    db = str(tmp_path / "none.db")
    result = invoke("--db", db, "submit", "add", "--arg", "a=1", *options)
    assert (result.code, result.out, result.err_lines) == (
        2,
        "",
        [f"chongming-task: error: {error}"],
    )
    assert store_dump(db) is None  # nothing written, not even the file


def test_submit_without_tasks_only_enqueues(db: str, invoke: Invoke, store: TaskStore) -> None:
    result = invoke("--db", db, "submit", "add", "--task-id", "plain", "--arg", "a=2")
    assert (result.code, result.out, result.err) == (0, "plain\n", "")
    stored = store.get("plain")
    assert stored is not None
    assert (stored.status.value, stored.name, stored.owner) == ("queued", "add", None)
    assert stored.metadata["recipe"]["kwargs"] == {"a": 2}
    # Unchecked: a name the workers' module lacks is enqueued (it fails on the worker)...
    unchecked = invoke("--db", db, "submit", "no_such_task", "--task-id", "typo")
    assert (unchecked.code, unchecked.out) == (0, "typo\n")
    # ...with --tasks it is refused as before, nothing written.
    before = store_dump(db)
    checked = invoke("--db", db, "submit", "no_such_task", "--tasks", TASKS, "--task-id", "t2")
    assert checked.code == 1
    assert "unknown task 'no_such_task'" in checked.err
    assert store_dump(db) == before


def test_submit_help_says_tasks_is_optional(invoke: Invoke) -> None:
    shown = " ".join(invoke("submit", "--help").out.split())
    assert "without it they are enqueued unchecked" in shown
    assert "--delay SECONDS|DURATION" in shown
    assert "--not-before ISO_TIME" in shown
    ps = " ".join(invoke("ps", "--help").out.split())
    assert "--owner OWNER only tasks held by the worker with this owner id" in ps
    top = " ".join(invoke("--help").out.split())
    assert "--owner ID this process's identity, not a filter" in top


def test_submit_wait_prints_the_value_or_the_failure(
    db: str, invoke: Invoke, start_worker: StartWorker
) -> None:
    start_worker(db, "--drain-timeout", "0")
    ok = invoke("--db", db, "submit", "echo", "--task-id", "e1", "--arg", "n=5", "--wait")
    assert (ok.code, ok.err) == (0, "")
    assert ok.out.splitlines() == ["e1", 'e1: succeeded, outcome {"n": [5, "int"]}']

    failed = invoke(
        "--db",
        db,
        "submit",
        "fail",
        "--task-id",
        "f1",
        "--arg",
        "message=cannot log in with password=hunter2",
        "--wait",
        "--timeout",
        "30",
    )
    assert (failed.code, failed.err) == (3, "")
    lines = failed.out.splitlines()
    assert lines[0] == "f1"
    assert lines[1].startswith("f1: failed, exception: ")
    assert "cannot log in with password=" in lines[1]
    assert "hunter2" not in failed.out  # redacted

    waited = invoke("--db", db, "submit", "add", "--arg", "a=1", "--wait", "--json")
    assert waited.code == 0, waited.err
    assert waited.json()["task"]["outcome"] == 2


def test_owner_before_the_command_is_the_identity_not_a_filter(db: str, invoke: Invoke) -> None:
    submit(invoke, db, "add", "mine", "--arg", "a=1")
    # `--owner` before `ps` is the identity: every task listed, none filtered out.
    assert invoke("--owner", "w9", "--db", db, "ps", "--json").json()["count"] == 1
    assert invoke("--db", db, "ps", "--owner", "w9", "--json").json()["count"] == 0
    none = invoke("--db", db, "ps", "--owner", "w9")
    assert (none.code, none.out) == (0, "no tasks\n")
