"""In the real browser: the page of task ``job%41`` refreshes from its own URL, and
Stop there stops ``job%41``, not task ``jobA``."""

# The ``browser`` fixture is imported from test_browser, so the test parameter of that
# name "redefines" it as far as ruff can tell.
# ruff: noqa: F811

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from chongming_task._model import TaskSnapshot
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.web import create_app

from .conftest import TOKEN, USER
from .test_browser import LiveServer, browser, playwright_sync  # noqa: F401
from .test_browser_gaps import logged_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def _queued(task_id: str, name: str) -> TaskSnapshot:
    at = datetime.now(UTC)
    return TaskSnapshot(
        task_id=task_id,
        name=name,
        status=TaskStatus.QUEUED,
        status_version=1,
        created_at=at,
        updated_at=at,
        queued_at=at,
    )


def test_the_live_refresh_and_stop_of_a_percent_id_stay_on_that_task(
    store: TaskStore, browser: Any
) -> None:
    expect = playwright_sync.expect
    store.create_many([_queued("job%41", "job.percent"), _queued("jobA", "job.decoy")])
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1, tick=0.3)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        page.goto(f"{server.url}/tasks/job%2541")
        expect(page.locator("h1 .muted")).to_have_text("job.percent")
        expect(page.locator("body")).to_have_attribute("data-live", "on")
        # A change in the store makes the page re-fetch its live fragment.
        with page.expect_request(lambda r: "partial=1" in r.url) as refreshed:
            store.create_many([_queued("other", "job.other")])
        assert refreshed.value.url == f"{server.url}/tasks/job%2541?partial=1"
        expect(page.locator("#why code")).to_have_text("chongming-task explain job%41")
        form = page.locator("#control")
        page.fill("#control-reason", "percent id")
        form.locator("button.danger").click()
        expect(page.locator(".flash")).to_contain_text("stopped")
    stopped = store.get("job%41")
    assert stopped is not None
    assert stopped.status is TaskStatus.STOPPED
    decoy = store.get("jobA")
    assert decoy is not None
    assert decoy.status is TaskStatus.QUEUED
