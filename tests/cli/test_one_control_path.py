"""One control path: the CLI, ``Client`` and the dashboard control a queued unheld task.

Each surface stops, pauses and resumes a task no worker took yet, on SQLite and
PostgreSQL. When the call returns the store already says ``stopped`` / ``paused`` /
``queued``; then a real ``chongming-task worker`` process starts and runs a sentinel
enqueued after them (so it claimed past them), and the stopped and paused tasks
never started: no ``starting`` in their history, no attempt used. No command row is
ever written. Before the one control path the dashboard wrote a command addressed to
no holder: it answered "requested", the task stayed ``queued`` and the worker ran it.

Also: a command an older version addressed to no holder is settled by a worker once,
not claimed again on every poll.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_task import Client, TaskStatus
from chongming_task.stores._base import Command, TaskStore
from chongming_task.testing import wait_until

from .conftest import Result, WorkerProcess, store_dump

S = TaskStatus
DEADLINE = 30.0
TOKEN = "test-token-0123456789abcdefGHIJKL"
SURFACES = ["cli", "client", "dashboard"]
#: Task ids the dashboard is expected to answer 202 "requested" for.
REQUESTED: set[str] = {"raced"}


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


Control = Callable[[str, str], str]


@pytest.fixture(params=SURFACES)
def surface(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def control(
    surface: str, db: str, store: TaskStore, invoke: Callable[..., Result]
) -> Iterator[Control]:
    """``control(task_id, action)`` through one surface; returns the actor it records.

    The dashboard's answer must be 200 ``applied``; :data:`REQUESTED` lets one call
    expect 202 ``requested`` instead (a holder appeared meanwhile).
    """
    if surface == "cli":

        def by_cli(task_id: str, action: str) -> str:
            result = invoke("--db", db, action, task_id, "--json")
            assert result.code == 0, result.err
            document = result.json()
            assert (document["accepted"], document["task"]["owner"]) == (True, None)
            return ""

        yield by_cli
    elif surface == "client":
        client = Client(store, actor="ops-script")

        def by_client(task_id: str, action: str) -> str:
            method = {"stop": client.stop, "pause": client.pause, "resume": client.resume}
            assert method[action](task_id) is True
            return "ops-script"

        yield by_client
    else:
        pytest.importorskip("starlette")
        from starlette.testclient import TestClient

        from chongming_task.web import create_app

        browser = TestClient(create_app(store, token=TOKEN, user="alice"))

        def by_dashboard(task_id: str, action: str) -> str:
            response = browser.post(
                f"/api/tasks/{task_id}/{action}",
                json={"reason": "operator"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            body = response.json()
            if task_id in REQUESTED:
                assert (response.status_code, body["result"]) == (202, "requested"), body
            else:
                assert response.status_code == 200, response.text
                expected = ("applied", True, True)
                assert (body["result"], body["accepted"], body["confirmed"]) == expected
            return "alice"

        yield by_dashboard
        browser.close()


def commands(db: str) -> list[Any]:
    """Every command row in the database, whoever it is addressed to."""
    rows: list[Any] = store_dump(db)["ct_commands"]
    return rows


def edges(store: TaskStore, task_id: str) -> list[tuple[S | None, S]]:
    return [(t.from_status, t.to_status) for t in store.history(task_id)]


def status(store: TaskStore, task_id: str) -> S:
    snapshot = store.get(task_id)
    assert snapshot is not None
    return snapshot.status


def test_stop_pause_resume_of_a_queued_unheld_task_take_effect_before_any_worker(
    db: str,
    store: TaskStore,
    control: Control,
    start_worker: Callable[..., WorkerProcess],
) -> None:
    client = Client(store)
    stopped = client.enqueue("add", 1, task_id="to-stop")
    paused = client.enqueue("add", 2, task_id="to-pause")

    actor = control(stopped.task_id, "stop")
    assert status(store, stopped.task_id) is S.STOPPED  # when the call returned
    control(paused.task_id, "pause")
    assert status(store, paused.task_id) is S.PAUSED
    assert commands(db) == []
    last = store.history(stopped.task_id)[-1]
    assert last.actor, "the transition names who stopped it"
    if actor:
        assert last.actor == actor

    worker = start_worker(db)
    sentinel = client.enqueue("add", 3, task_id="sentinel")  # claimed past the two above
    outcome = sentinel.wait(DEADLINE)
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, 4)

    for handle in (stopped, paused):
        snapshot = handle.snapshot
        assert snapshot.attempt == 0, "its body never ran"
        assert S.STARTING not in [to for _, to in edges(store, handle.task_id)]
    assert edges(store, stopped.task_id) == [
        (None, S.PENDING),
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.STOPPED),
    ]
    assert status(store, paused.task_id) is S.PAUSED

    control(paused.task_id, "resume")
    assert status(store, paused.task_id) in (S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED)
    outcome = paused.wait(DEADLINE)
    assert (outcome.status, outcome.value) == (S.SUCCEEDED, 3)
    assert edges(store, paused.task_id)[2:4] == [(S.QUEUED, S.PAUSED), (S.PAUSED, S.QUEUED)]
    assert commands(db) == []
    assert worker.terminate() == 0


def test_a_command_an_older_version_addressed_to_nobody_is_settled_once(
    db: str, store: TaskStore, start_worker: Callable[..., WorkerProcess]
) -> None:
    """It used to be claimed and handed back on every poll, about 10 times a second."""
    client = Client(store)
    # Due in an hour: no worker claims it, so the stop must come from the command.
    legacy = client.enqueue("add", 1, task_id="legacy", delay=3600)
    command = store.submit_command(
        Command.new(
            kind="task",
            target=legacy.task_id,
            action="stop",
            issued_by="old-dashboard",
            issued_at=store.clock.now(),
            payload={"reason": "pressed stop before the upgrade"},
            target_owner=None,
        )
    )

    worker = start_worker(db)
    sentinel = client.enqueue("add", 3, task_id="sentinel")
    assert sentinel.wait(DEADLINE).status is S.SUCCEEDED

    def settled() -> Command | None:
        found = store.get_command(command.command_id)
        return found if found is not None and found.status == "completed" else None

    wait_until(lambda: settled() is not None, timeout=DEADLINE)
    assert edges(store, legacy.task_id)[-1] == (S.QUEUED, S.STOPPED)
    last = store.history(legacy.task_id)[-1]
    assert (last.actor, last.reason) == ("old-dashboard", "pressed stop before the upgrade")
    # The worker keeps polling; the settled command is never claimed again.
    again = client.enqueue("add", 4, task_id="sentinel-2")
    assert again.wait(DEADLINE).status is S.SUCCEEDED
    final = settled()
    assert final is not None
    assert (final.claims, final.result) == (1, {"applied": True, "outcome": "applied"})
    assert worker.terminate() == 0


def test_the_dashboard_pages_say_what_was_applied(db: str, store: TaskStore) -> None:
    """The HTML forms: one task, and a bulk action over unheld and finished tasks."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from chongming_task.web import create_app

    client = Client(store)
    one, two, three = (client.enqueue("add", n, task_id=f"t{n}") for n in (1, 2, 3))
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(store, token=TOKEN, user="alice")) as browser:
        response = browser.post(
            f"/tasks/{one.task_id}/stop",
            data={"reason": "not needed"},
            headers=bearer,
            follow_redirects=False,
        )
        assert response.status_code == 303
        page = browser.get(response.headers["location"], headers=bearer).text
        assert "stopped: no worker had taken the task, so it will never run" in page
        assert status(store, one.task_id) is S.STOPPED

        response = browser.post(
            "/tasks/bulk",
            data={"action": "pause", "reason": "freeze", "ids": [one.task_id, two.task_id]},
            headers=bearer,
            follow_redirects=False,
        )
        assert response.status_code == 303
        page = browser.get(response.headers["location"], headers=bearer).text
        assert "pause applied to 1 task(s) no worker had taken; 1 refused" in page
        assert (status(store, two.task_id), status(store, three.task_id)) == (S.PAUSED, S.QUEUED)
    assert commands(db) == []


# The CLI opens a store of its own: there is no hook between its read and its write.
@pytest.mark.parametrize("surface", ["client", "dashboard"])
def test_a_worker_claiming_between_the_read_and_the_write_gets_the_action(
    db: str, store: TaskStore, surface: str, control: Control, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guarded write loses to the claim; the task is read again and the action
    becomes a command for its new holder, never one addressed to nobody."""
    from datetime import timedelta

    from chongming_task.stores import QueueStore

    assert isinstance(store, QueueStore)
    handle = Client(store).enqueue("add", 1, task_id="raced")
    until = store.clock.now() + timedelta(seconds=30)
    real = store.save_unheld
    claimed: list[str] = []

    def claim_first(snapshot: Any, **kwargs: Any) -> None:
        if not claimed:
            taken = store.claim_queued("w1", buckets=None, limit=1, lease_until=until)
            claimed.extend(s.task_id for s in taken)
        real(snapshot, **kwargs)

    monkeypatch.setattr(store, "save_unheld", claim_first)
    control(handle.task_id, "stop")  # accepted: requested from the new holder
    assert claimed == [handle.task_id]
    assert (status(store, handle.task_id), handle.snapshot.owner) == (S.QUEUED, "w1")
    pending = store.claim_commands("w1", lease=5, kinds=("task",))
    assert [(c.target, c.action, c.target_owner) for c in pending] == [
        (handle.task_id, "stop", "w1")
    ]
    assert len(commands(db)) == 1
