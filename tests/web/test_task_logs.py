"""The task page's last log lines: what the task's process stored, redacted and escaped."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.testclient import TestClient

from chongming_task._model import TaskSnapshot
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.testing import wait_until
from chongming_task.worker._logtail import LogTail

from .conftest import BEARER, Holder

AT = datetime(2026, 2, 1, tzinfo=UTC)


def stored(store: TaskStore, task_id: str, **metadata: Any) -> None:
    store.create(
        TaskSnapshot(
            task_id=task_id,
            name="job",
            status=TaskStatus.SUCCEEDED,
            status_version=1,
            created_at=AT,
            updated_at=AT,
            metadata=metadata,
        )
    )


def test_log_lines_are_redacted_and_escaped(client: TestClient, store: TaskStore) -> None:
    lines = [f"12:00:{i:02d} INFO step {i}" for i in range(12)]
    lines.append("12:00:59 WARNING <script>alert(1)</script> password=hunter2")
    stored(store, "chatty", logs=lines)
    api = client.get("/api/tasks/chatty", headers=BEARER).json()
    logs = api["task"]["logs"]
    assert len(logs) == 10  # the last ten, as status shows them
    assert logs[0] == "12:00:03 INFO step 3"
    assert "hunter2" not in logs[-1]
    assert "[REDACTED]" in logs[-1]
    html = client.get("/tasks/chatty", headers=BEARER).text
    assert "12:00:11 INFO step 11" in html
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "hunter2" not in html


def test_a_task_without_stored_lines_says_so(client: TestClient, store: TaskStore) -> None:
    stored(store, "quiet")
    stored(store, "odd", logs="not a list")
    for task_id in ("quiet", "odd"):
        assert client.get(f"/api/tasks/{task_id}", headers=BEARER).json()["task"]["logs"] == []
        assert 'data-testid="logs-none"' in client.get(f"/tasks/{task_id}", headers=BEARER).text


def test_lines_a_worker_kept_reach_the_page(
    client: TestClient, store: TaskStore, holder: Holder
) -> None:
    """A real run: the task logs through ctx.log, its process's LogTail stores the tail."""

    def chatty(ctx: Any) -> str:
        ctx.log("fetching page 1")
        ctx.log("api_key=sk-live-123456 rejected, retrying", level="WARNING")
        return "ok"

    holder.controller.register("chatty", chatty)
    tail = LogTail(holder.controller)
    try:
        run = holder.controller.submit("chatty")
        holder.wait_for(run.task_id, TaskStatus.SUCCEEDED)
        # The final tail is written onto the stored terminal snapshot right after it.
        wait_until(
            lambda: len((store.get(run.task_id) or run.snapshot).metadata.get("logs", [])) == 2,
            message="the final tail in the store",
        )
    finally:
        tail.close()
    logs = client.get(f"/api/tasks/{run.task_id}", headers=BEARER).json()["task"]["logs"]
    assert [line.split(" ", 1)[1] for line in logs] == [
        "INFO fetching page 1",
        "WARNING api_key=[REDACTED] rejected, retrying",
    ]
    html = client.get(f"/tasks/{run.task_id}", headers=BEARER).text
    assert "INFO fetching page 1" in html
    assert "sk-live-123456" not in html
