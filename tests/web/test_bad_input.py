"""Bad request input is a 400 naming what is wrong -- never a 500, and never a 503,
which says the store is down (monitoring pages someone for it) -- on SQLite and
PostgreSQL; a 503 stays for a store that really fails."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from starlette.testclient import TestClient

from chongming_task.errors import StoreError
from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.stores._base import TaskStore

from .conftest import BEARER, login
from .test_api import seed

SUPERSCRIPT = "\u00b2"  # str.isdigit() says yes, int() says no
HUGE = "7" * 5000


def _nightly(store: TaskStore) -> int:
    admin = ScheduleAdmin(store, actor="deploy")
    admin.register(Schedule(name="nightly", task="quick", trigger=CronTrigger("0 3 * * *", "UTC")))
    return admin.get("nightly").definition_revision


def _post_json(client: TestClient, path: str, body: bytes) -> Any:
    headers = {**BEARER, "content-type": "application/json"}
    return client.post(path, content=body, headers=headers)


@pytest.mark.parametrize("value", [SUPERSCRIPT, HUGE, "-1", "1.5"])
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/events?max_events={}", "max_events"),
        ("/api/events?max_events={}", "max_events"),
        ("/tasks?done=stop&requested={}&refused=0", "requested"),
        ("/tasks?done=stop&requested=1&refused={}", "refused"),
        ("/api/tasks?limit={}", "limit"),
        ("/api/tasks?bucket={}", "bucket"),
    ],
)
def test_a_bad_number_in_a_query_is_400_naming_it(
    client: TestClient, path: str, name: str, value: str
) -> None:
    response = client.get(path.format(value), headers={**BEARER, "accept": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith(f"{name} must be an integer from "), error
    assert len(error) < 200  # a 5,000-digit value is not echoed whole


@pytest.mark.parametrize("value", [SUPERSCRIPT, HUGE, 2**70, -1, "1.5", True, None])
def test_a_bad_definition_revision_is_400_and_changes_nothing(
    client: TestClient, store: TaskStore, value: object
) -> None:
    _nightly(store)
    before = store.get_schedule("nightly")
    body = json.dumps({"pattern": "0 4 * * *", "definition_revision": value}).encode()
    response = _post_json(client, "/api/schedules/nightly/override", body)
    assert response.status_code == 400, response.text
    assert "definition_revision" in response.json()["error"]
    assert store.get_schedule("nightly") == before


def test_a_bad_definition_revision_in_the_form_is_400(client: TestClient, store: TaskStore) -> None:
    _nightly(store)
    csrf = login(client)
    response = client.post(
        "/schedules/nightly/override",
        data={"csrf": csrf, "pattern": "0 4 * * *", "definition_revision": SUPERSCRIPT},
    )
    assert response.status_code == 400
    assert "definition_revision" in response.text


@pytest.mark.parametrize(
    "path", ["/api/tasks/bulk", "/api/tasks/t0000/stop", "/api/schedules/nightly/override"]
)
def test_json_nested_over_1000_deep_is_400(client: TestClient, store: TaskStore, path: str) -> None:
    seed(store, 1)
    _nightly(store)
    for depth in (40, 1_001, 50_000):
        body = b'{"reason": ' + b"[" * depth + b"]" * depth + b"}"
        response = _post_json(client, path, body)
        assert response.status_code == 400, (depth, response.text)
        assert "nests deeper than" in response.json()["error"]


def test_a_lone_surrogate_in_bulk_ids_or_a_reason_is_400_and_writes_nothing(
    client: TestClient, store: TaskStore
) -> None:
    (task_id,) = seed(store, 1)
    before = store.get(task_id)
    for body in (
        {"action": "stop", "reason": "r", "ids": [task_id, "a\udcffb"]},
        {"action": "stop", "reason": "r\udcff", "ids": [task_id]},
    ):
        response = _post_json(client, "/api/tasks/bulk", json.dumps(body).encode())
        assert response.status_code == 400, response.text
        assert "not valid UTF-8" in response.json()["error"]
    response = _post_json(client, f"/api/tasks/{task_id}/stop", b'{"reason": "\\udcff"}')
    assert response.status_code == 400
    assert store.get(task_id) == before
    assert store.history(task_id) == []


NUL = "a\x00b"


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        *[
            ("GET", page, {key: NUL})
            for page in ("/api/tasks", "/tasks")
            for key in ("name", "tag", "owner", "q")
        ],
        ("GET", "/api/tasks/a%00b", {}),
        ("GET", "/tasks/a%00b", {}),
        ("GET", "/api/schedules/a%00b", {}),
        ("GET", "/schedules/a%00b", {}),
        ("POST", "/api/tasks/a%00b/stop", {"reason": "r"}),
        ("POST", "/api/schedules/a%00b/pause", {"reason": "r"}),
        ("POST", "/api/tasks/bulk", {"action": "stop", "reason": "r", "ids": [NUL]}),
        ("POST", "/api/tasks/t0000/stop", {"reason": NUL}),
    ],
)
def test_a_nul_byte_in_a_filter_or_id_is_400_and_logs_nothing(
    client: TestClient,
    store: TaskStore,
    caplog: pytest.LogCaptureFixture,
    method: str,
    path: str,
    params: dict[str, Any],
) -> None:
    (task_id,) = seed(store, 1)
    before = store.get(task_id)
    caplog.set_level(logging.WARNING)
    if method == "GET":
        response = client.get(path, params=params, headers=BEARER)
    else:
        response = _post_json(client, path, json.dumps(params).encode())
    assert response.status_code == 400, response.text
    assert "NUL byte" in response.text
    assert not [r for r in caplog.records if r.name.startswith("chongming_task")]
    assert store.get(task_id) == before


def test_a_store_that_really_fails_is_still_503(
    client: TestClient,
    store: TaskStore,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def down(*args: object, **kwargs: object) -> None:
        raise StoreError("PostgreSQL store failed: connection refused")

    monkeypatch.setattr(store, "query", down)
    response = client.get("/api/tasks", headers=BEARER)
    assert response.status_code == 503
    assert "connection refused" in response.json()["error"]
    assert any(r.name == "chongming_task.web" and r.exc_info for r in caplog.records)
