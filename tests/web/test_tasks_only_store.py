"""The dashboard on a store with the task part only (no schedules, commands, queue).

Every page that reads tasks works; the overview says schedules are not supported by
the store instead of failing; the schedule pages and a control of a task another
process holds answer with the ``ConfigurationError`` that names the missing part; the
live poller's fingerprint reads no schedules it cannot have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from starlette.testclient import TestClient

from _tasks_only import TasksOnlyStore, held_elsewhere
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskRecordStore, TaskStore
from chongming_task.testing import FakeClock
from chongming_task.web import create_app
from chongming_task.web._views import Dashboard

from .conftest import BEARER, TOKEN, USER


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> Iterator[TaskRecordStore]:
    opened = TasksOnlyStore(clock=clock)
    opened.create(held_elsewhere("theirs", clock.now()))
    yield opened
    opened.close()


@pytest.fixture
def client(store: TaskRecordStore) -> Iterator[TestClient]:
    with TestClient(
        # Typed TaskStore where the app takes one; at runtime only the task part is there.
        create_app(cast(TaskStore, store), token=TOKEN, user=USER),
        base_url="http://127.0.0.1",
    ) as client:
        yield client


def test_the_overview_says_the_store_keeps_no_schedules(client: TestClient) -> None:
    page = client.get("/", headers=BEARER)
    assert page.status_code == 200
    assert "Schedules are not supported by this store" in page.text
    assert "theirs" in page.text  # the running task is there
    api = client.get("/api/overview", headers=BEARER)
    assert api.status_code == 200
    assert api.json()["schedules"] is None
    assert api.json()["counts"]["running"] == 1


@pytest.mark.parametrize("path", ["/tasks", "/api/tasks", "/tasks/theirs", "/api/tasks/theirs"])
def test_the_task_pages_work(client: TestClient, path: str) -> None:
    response = client.get(path, headers=BEARER)
    assert response.status_code == 200
    assert "theirs" in response.text


@pytest.mark.parametrize("path", ["/workers", "/api/workers", "/buckets", "/api/buckets"])
def test_the_worker_and_bucket_pages_work(client: TestClient, path: str) -> None:
    assert client.get(path, headers=BEARER).status_code == 200


@pytest.mark.parametrize("path", ["/schedules", "/api/schedules", "/api/schedules/nightly"])
def test_the_schedule_pages_name_the_missing_part(client: TestClient, path: str) -> None:
    response = client.get(path, headers=BEARER)
    assert response.status_code == 400
    assert "needs a store that implements ScheduleStore" in response.text
    assert "DictTaskRecords does not" in response.text


def test_controlling_a_task_another_process_holds_names_the_missing_part(
    client: TestClient, store: TaskRecordStore
) -> None:
    before = store.get("theirs")
    response = client.post("/api/tasks/theirs/stop", headers=BEARER, json={"reason": "enough"})
    assert response.status_code == 400
    assert "needs a store that implements CommandStore" in response.json()["error"]
    assert store.get("theirs") == before  # nothing written


def test_the_live_fingerprint_follows_the_tasks(store: TaskRecordStore, clock: FakeClock) -> None:
    data = Dashboard(cast(TaskStore, store), clock=clock)
    assert not data.keeps_schedules
    first = data.fingerprint()
    assert data.fingerprint() == first
    snapshot = store.get("theirs")
    assert snapshot is not None
    clock.advance(1)
    store.save(
        snapshot.replace(status=TaskStatus.STOPPING, status_version=4, updated_at=clock.now()),
        expect_version=3,
    )
    assert data.fingerprint() != first
