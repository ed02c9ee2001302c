"""The dashboard's Retry: on the page of a finished task with a recipe, and for a selection.

It takes the same path as ``Client.retry`` (one guarded write, ``operator:retry``, the
signed-in user as the actor), needs the session's CSRF token like every other form,
and a refusal changes nothing in the store (409 with the reason).
"""

from __future__ import annotations

from starlette.testclient import TestClient

from _finished import settle
from chongming_task import Client, TaskStatus
from chongming_task.stores._base import TaskStore

from .conftest import BEARER, USER, login

S = TaskStatus


def _retries(store: TaskStore, task_id: str) -> list[tuple[str | None, str | None]]:
    return [(t.actor, t.reason) for t in store.history(task_id) if t.trigger == "operator:retry"]


def test_retry_from_the_task_page(client: TestClient, store: TaskStore) -> None:
    queue = Client(store)
    failed = queue.enqueue("job", 1, task_id="invoice-1099").task_id
    settle(store, failed, S.FAILED)
    done = queue.enqueue("job", 2).task_id
    settle(store, done, S.SUCCEEDED)
    csrf = login(client)

    page = client.get(f"/tasks/{failed}").text
    assert f'formaction="/tasks/{failed}/retry">Retry</button>' in page
    assert "/retry" not in client.get(f"/tasks/{done}").text  # succeeded: not offered

    before = store.get(failed), store.history(failed)
    assert client.post(f"/tasks/{failed}/retry", data={"reason": "fixed"}).status_code == 403
    assert (store.get(failed), store.history(failed)) == before  # no CSRF token, no change

    response = client.post(
        f"/tasks/{failed}/retry", data={"reason": "fixed", "csrf": csrf}, follow_redirects=False
    )
    assert response.status_code == 303
    flash = client.get(response.headers["location"]).text
    assert "retried: queued again, with its history" in flash
    assert store.get(failed).status is S.QUEUED  # type: ignore[union-attr]
    assert _retries(store, failed) == [(USER, "fixed")]


def test_api_retry_refusal_changes_nothing(client: TestClient, store: TaskStore) -> None:
    queue = Client(store)
    running = queue.enqueue("job").task_id
    settle(store, running, S.RUNNING)
    before = store.get(running), store.history(running)
    response = client.post(f"/api/tasks/{running}/retry", json={"reason": "x"}, headers=BEARER)
    assert response.status_code == 409
    assert response.json()["result"] == "refused"
    assert "is running, not finished" in response.json()["message"]
    assert (store.get(running), store.history(running)) == before
    missing = client.post("/api/tasks/nope/retry", json={"reason": "x"}, headers=BEARER)
    assert missing.status_code == 404


def test_bulk_retry_of_a_selection(client: TestClient, store: TaskStore) -> None:
    queue = Client(store)
    failed = [queue.enqueue("job", i).task_id for i in range(2)]
    for task_id in failed:
        settle(store, task_id, S.FAILED)
    running = queue.enqueue("job", 9).task_id
    settle(store, running, S.RUNNING)
    csrf = login(client)
    response = client.post(
        "/tasks/bulk",
        data={"csrf": csrf, "action": "retry", "reason": "db back", "ids": [*failed, running]},
        follow_redirects=False,
    )
    assert response.status_code == 303
    location = response.headers["location"]
    assert "applied=2" in location
    assert "refused=1" in location
    page = client.get(location).text
    assert "retried 2 task(s): queued again for any worker; 1 refused" in page
    for task_id in failed:
        assert store.get(task_id).status is S.QUEUED  # type: ignore[union-attr]
        assert _retries(store, task_id) == [(USER, "db back")]
    assert store.get(running).status is S.RUNNING  # type: ignore[union-attr]
    assert 'value="retry">Retry</button>' in page
