"""The task page lists a task's children (links) and names a child's parent; the API too.

A stop from the dashboard goes through ``control_task``, so it reaches the children.
"""

from __future__ import annotations

from starlette.testclient import TestClient

from chongming_task import Client, TaskStatus
from chongming_task.queue._children import QueueChildren
from chongming_task.stores._base import TaskStore

from .conftest import BEARER, login

S = TaskStatus


def test_the_parent_page_lists_its_children_and_a_stop_reaches_them(
    client: TestClient, store: TaskStore
) -> None:
    queue = Client(store)
    parent = queue.enqueue("job", task_id="boss").task_id
    children = QueueChildren(store, registry=None, bucket_policy=queue.bucket_policy)
    kids = [children.enqueue(parent, "job", (n,), {"task_id": f"boss.{n}"}).task_id for n in (1, 2)]
    login(client)

    page = client.get(f"/tasks/{parent}").text
    assert '<section class="card" id="children">' in page
    for kid in kids:
        assert f'href="/tasks/{kid}" class="mono">{kid}</a>' in page
    child_page = client.get(f"/tasks/{kids[0]}").text
    assert f'<a class="mono" href="/tasks/{parent}" data-testid="parent">{parent}</a>' in child_page
    assert 'id="children"' not in child_page

    document = client.get(f"/api/tasks/{parent}", headers=BEARER).json()
    assert (document["task"]["parent"], document["children"]) == (None, kids)
    assert client.get(f"/api/tasks/{kids[1]}", headers=BEARER).json()["task"]["parent"] == parent

    response = client.post(f"/api/tasks/{parent}/stop", json={"reason": "x"}, headers=BEARER)
    assert response.status_code == 200, response.text
    for task_id in (parent, *kids):
        assert store.get(task_id).status is S.STOPPED  # type: ignore[union-attr]
    assert store.history(kids[0])[-1].reason == "parent boss stopped"
