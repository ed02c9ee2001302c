"""The dashboard's paused queues: the overview's banner, the pause form, Resume buttons.

Every write is checked in the store (who, why, when), on SQLite and PostgreSQL.
"""

from __future__ import annotations

from starlette.testclient import TestClient

from chongming_task.queue import Client
from chongming_task.stores._base import TaskStore

from .conftest import BEARER, USER, login


def _pauses(store: TaskStore) -> list[tuple[str | None, int | None, str, str]]:
    return [(p.name, p.bucket, p.actor, p.reason) for p in Client(store).queue_pauses()]


def test_pause_and_resume_from_the_overview_with_csrf(client: TestClient, store: TaskStore) -> None:
    csrf = login(client)
    page = client.get("/").text
    assert "Pause intake of a queue" in page
    assert 'id="paused-queues"' not in page  # no banner while every queue takes work
    form = {"csrf": csrf, "name": " noop ", "bucket": "", "reason": "deploy"}
    done = client.post("/queues/pause", data=form, follow_redirects=False)
    assert done.status_code == 303, done.text
    assert done.headers["location"].endswith("/")
    (pause,) = _pauses(store)
    assert pause[:2] == ("noop", None)
    assert pause[2:] == (USER, "deploy")
    client.post("/queues/pause", data={"csrf": csrf, "bucket": "7", "reason": "disk"})
    page = client.get("/").text
    assert 'id="paused-queues"' in page
    assert "queue &#39;noop&#39;" in page or "queue 'noop'" in page
    assert "bucket 7" in page
    assert page.count(">Resume</button>") == 2
    done = client.post("/queues/resume", data={"csrf": csrf, "bucket": "7"}, follow_redirects=False)
    assert done.status_code == 303
    assert [p[:2] for p in _pauses(store)] == [("noop", None)]


def test_queue_actions_refuse_bad_input_and_missing_csrf(
    client: TestClient, store: TaskStore
) -> None:
    csrf = login(client)
    no_csrf = client.post("/queues/pause", data={"name": "noop", "reason": "r"})
    assert no_csrf.status_code == 403
    for fields, message in (
        ({"name": "noop"}, "a reason is required to pause a queue"),
        ({"name": "noop", "reason": "  "}, "a reason is required to pause a queue"),
        ({"reason": "r"}, "not neither"),
        ({"name": "noop", "bucket": "1", "reason": "r"}, "not both"),
        ({"bucket": "x", "reason": "r"}, "bucket must be an integer from 0 to"),
        ({"bucket": "-1", "reason": "r"}, "bucket must be an integer from 0 to"),
    ):
        bad = client.post("/queues/pause", data={"csrf": csrf, **fields})
        assert bad.status_code == 400, (fields, bad.text)
        assert message in bad.text
    assert _pauses(store) == []
    assert client.post("/queues/drop", data={"csrf": csrf, "name": "x"}).status_code == 404
    not_paused = client.post("/queues/resume", data={"csrf": csrf, "name": "noop"})
    assert not_paused.status_code == 409
    assert "queue &#39;noop&#39; is not paused" in not_paused.text


def test_the_json_api_pauses_lists_and_resumes(client: TestClient, store: TaskStore) -> None:
    assert client.get("/api/queues").status_code == 401
    assert client.post("/api/queues/pause", json={"name": "noop", "reason": "r"}).status_code == 401
    done = client.post("/api/queues/pause", json={"bucket": 3, "reason": "r"}, headers=BEARER)
    assert done.status_code == 200, done.text
    assert done.json()["pause"]["bucket"] == 3
    listed = client.get("/api/queues", headers=BEARER).json()["paused"]
    assert [(p["bucket"], p["reason"]) for p in listed] == [(3, "r")]
    bad = client.post("/api/queues/pause", json={"bucket": True, "reason": "r"}, headers=BEARER)
    assert bad.status_code == 400
    assert "bucket must be an integer from 0 to" in bad.json()["error"]
    again = client.post("/api/queues/resume", json={"bucket": 3}, headers=BEARER)
    assert again.json()["message"] == "intake resumed: bucket 3"
    gone = client.post("/api/queues/resume", json={"bucket": 3}, headers=BEARER)
    assert gone.status_code == 409
    assert gone.json() == {"error": "bucket 3 is not paused"}
    assert _pauses(store) == []
