"""In the real browser: the time-range filter, a schedule override with the revision
check, and a task's last log lines (same server and browser as ``test_browser``)."""

# The ``browser`` and ``shots`` fixtures are imported from test_browser, so the test
# parameters of those names "redefine" them as far as ruff can tell.
# ruff: noqa: F811

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task._model import TaskSnapshot
from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.testing import FakeClock
from chongming_task.web import create_app

from .conftest import TOKEN, USER
from .test_api import seed
from .test_browser import LiveServer, browser, playwright_sync, shots  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)  # seed(): task i is created at DAY0 + i seconds


def logged_in(browser: Any, server: LiveServer) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.goto(f"{server.url}/login")
    page.fill('input[name="token"]', TOKEN)
    page.click('button[type="submit"]')
    playwright_sync.expect(page.locator("h1")).to_have_text("Overview")
    return page


def shown_ids(page: Any) -> list[str]:
    rows = page.locator("tr[data-task]")
    return [rows.nth(i).get_attribute("data-task") for i in range(rows.count())]


def test_filter_tasks_by_time_range(store: TaskStore, browser: Any, shots: Path) -> None:
    expect = playwright_sync.expect
    seed(store, 80)
    seed(store, 3, prefix="late", day=1)
    clock = FakeClock(DAY0 + timedelta(days=1, minutes=5))
    app = create_app(store, token=TOKEN, user=USER, clock=clock, live_interval=0.1)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        page.click("nav >> text=Tasks")
        expect(page.locator("tr[data-task]")).to_have_count(50)
        # A window of ISO times: [00:00:10, 00:01:10) holds t0010..t0069, 60 tasks.
        page.fill('[data-testid="filter-created-after"]', "2026-01-01T00:00:10Z")
        page.fill('[data-testid="filter-created-before"]', "2026-01-01T08:01:10+08:00")
        page.click("#filters button[type=submit]")
        expect(page.locator("tr[data-task]")).to_have_count(50)
        first = shown_ids(page)
        assert first == [f"t{i:04d}" for i in range(69, 19, -1)]
        # The form shows the instants it filtered on; the next page keeps the window.
        expect(page.locator('[data-testid="filter-created-after"]')).to_have_value(
            "2026-01-01T00:00:10+00:00"
        )
        page.screenshot(path=str(shots / "dashboard-tasks-range.png"), full_page=True)
        page.click('[data-testid="next-page"]')
        expect(page.locator("tr[data-task]")).to_have_count(10)
        assert shown_ids(page) == [f"t{i:04d}" for i in range(19, 9, -1)]
        expect(page.locator('[data-testid="next-page"]')).to_have_count(0)
        # The store agrees.
        stored = store.query_heads(
            TaskQuery(
                created_after=DAY0 + timedelta(seconds=10),
                created_before=DAY0 + timedelta(seconds=70),
                order="-created",
            )
        )
        assert [h.task_id for h in stored] == first + shown_ids(page)
        # An age counts back from the dashboard's clock: the last 10 minutes.
        page.fill('[data-testid="filter-created-after"]', "10m")
        page.fill('[data-testid="filter-created-before"]', "")
        page.click("#filters button[type=submit]")
        expect(page.locator("tr[data-task]")).to_have_count(3)
        assert shown_ids(page) == ["late0002", "late0001", "late0000"]
        # A bad time is a clear message, not a traceback.
        page.fill('[data-testid="filter-created-after"]', "last tuesday")
        page.click("#filters button[type=submit]")
        expect(page.locator("body")).to_contain_text("is not a time")
        page.close()


def test_edit_a_schedule_override_with_the_revision_check(
    store: TaskStore, browser: Any, shots: Path
) -> None:
    expect = playwright_sync.expect
    admin = ScheduleAdmin(store, actor="deploy")
    admin.register(
        Schedule(
            name="nightly-report",
            task="quick",
            trigger=CronTrigger("0 3 * * *", "Asia/Shanghai"),
            description="the nightly report",
        )
    )
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        page.goto(f"{server.url}/schedules/nightly-report")
        form = page.locator("#schedule-override")
        expect(form.locator('input[name="pattern"]')).to_have_value("0 3 * * *")
        form.locator('input[name="pattern"]').fill("30 4 * * 1-5")
        form.locator("button:text('Save override')").click()
        expect(page.locator(".flash")).to_contain_text("override saved")
        control = admin.get("nightly-report")
        assert (control.pattern, control.overridden, control.updated_by) == (
            "30 4 * * 1-5",
            True,
            USER,
        )
        expect(page.locator("#live")).to_contain_text("override of 0 3 * * *")
        page.screenshot(path=str(shots / "dashboard-schedule-override.png"), full_page=True)

        # Someone else changes the schedule while this page is open: the edit typed on
        # top of the old revision is refused, and nothing changes.
        admin.set_pattern("nightly-report", "0 5 * * *", operator="bob")
        record = store.get_schedule("nightly-report")
        form.locator('input[name="pattern"]').fill("0 6 * * *")
        form.locator("button:text('Save override')").click()
        expect(page.locator(".flash")).to_contain_text("edit refused")
        after = store.get_schedule("nightly-report")
        assert record is not None
        assert after is not None
        assert (after.revision, after.data) == (record.revision, record.data)
        assert admin.get("nightly-report").pattern == "0 5 * * *"
        # The reloaded form is based on the current revision: now the edit lands.
        expect(form.locator('input[name="pattern"]')).to_have_value("0 5 * * *")
        form.locator("button:text('Back to 0 3 * * *')").click()
        expect(page.locator(".flash")).to_contain_text("override dropped")
        assert admin.get("nightly-report").overridden is False
        page.close()


def test_task_page_shows_the_last_log_lines(store: TaskStore, browser: Any) -> None:
    expect = playwright_sync.expect
    lines = ["09:00:00 INFO started", "09:00:01 WARNING <img src=x onerror=alert(1)> token=t0p"]
    store.create(
        TaskSnapshot(
            task_id="chatty",
            name="job",
            status=TaskStatus.SUCCEEDED,
            status_version=1,
            created_at=DAY0,
            updated_at=DAY0,
            metadata={"logs": lines},
        )
    )
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        dialogs: list[str] = []

        def dismiss(dialog: Any) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", dismiss)
        page.goto(f"{server.url}/tasks/chatty")
        logs = page.locator('[data-testid="logs"]')
        expect(logs).to_contain_text("09:00:00 INFO started")
        text = logs.inner_text()
        assert "<img src=x onerror=alert(1)>" in text  # shown as text, not markup
        assert "t0p" not in text
        assert page.locator('[data-testid="logs"] img').count() == 0
        assert dialogs == []
        page.close()


def test_a_refresh_in_flight_never_wipes_a_reason_being_typed(
    store: TaskStore, browser: Any
) -> None:
    """A live refresh requested before the operator typed, answered after, is dropped."""
    expect = playwright_sync.expect
    seed(store, 3)
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        page.goto(f"{server.url}/tasks")
        expect(page.locator("body")).to_have_attribute("data-live", "on")
        held: list[Any] = []

        def hold(route: Any) -> None:  # answered later, after the typing below
            held.append(route)

        page.route("**/tasks?*partial=1*", hold)
        with page.expect_request(lambda r: "partial=1" in r.url):
            seed(store, 1, prefix="new", day=2)  # a change: the page asks for its rows
        reason = page.locator('#bulk input[name="reason"]')
        reason.fill("half-typed reason")  # typed while that refresh is still on its way
        assert held
        with page.expect_response(lambda r: "partial=1" in r.url):
            held[0].continue_()
        page.unroute("**/tasks?*partial=1*")
        expect(reason).to_have_value("half-typed reason")
        expect(page.locator('tr[data-task="new0000"]')).to_have_count(0)
        page.close()
