"""Accessibility in the real browser: axe-core on every page at a desktop and a phone
width, keyboard focus across a live refresh, and the skip link.

axe-core is vendored in ``tests/web/vendor`` (see its README) and injected into the
page by the test only; the dashboard never serves it. The context bypasses the CSP so
the injected script may run (the dashboard's own pages run no inline script).
"""

# The ``browser`` fixture is imported from test_browser, so the test parameters of that
# name "redefine" it as far as ruff can tell.
# ruff: noqa: F811

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_task._model import Failure, FailureKind, Progress, TaskSnapshot
from chongming_task.pipeline import Pipeline
from chongming_task.queue import Client
from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.web import create_app

from .conftest import TOKEN, USER
from .test_browser import LiveServer, browser, playwright_sync, shots  # noqa: F401
from .test_true_to_store import _worker

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
WIDTHS = (1400, 390)

#: A traceback long and wide enough to scroll in its box (the box must take the keyboard).
TRACEBACK = "Traceback (most recent call last):\n" + "".join(
    f'  File "/srv/app/jobs/import_{i}.py", line {i}, in step_{i}\n    '
    f"result = transform(record, options={{'mode': 'strict', 'retries': {i}}})\n"
    for i in range(60)
)


def seed_everything(store: TaskStore) -> None:
    """A store in which every page has something to show: tasks in many states (one
    with a long traceback), a schedule, live and dead workers, a limit, a paused queue,
    a fleet pipeline run."""
    now = datetime.now(UTC)
    _worker(store, "w-live", beat=now, buckets=(0, 1), slots=3, version="1.2.3")
    _worker(store, "w-dead", beat=now - timedelta(hours=1), buckets=(2,))

    def task(task_id: str, status: TaskStatus, **fields: Any) -> TaskSnapshot:
        at = now - timedelta(minutes=5)
        return TaskSnapshot(
            task_id=task_id,
            name=fields.pop("name", "job.import"),
            status=status,
            status_version=1,
            created_at=at,
            updated_at=at,
            queued_at=at,
            **fields,
        )

    running = {"started_at": now - timedelta(minutes=4), "last_heartbeat_at": now}
    store.create_many(
        [
            *(task(f"q-{i}", TaskStatus.QUEUED, bucket=i % 3) for i in range(3)),
            task(
                "run-1",
                TaskStatus.RUNNING,
                bucket=0,
                lease_owner="w-live",
                lease_until=now + timedelta(minutes=5),
                owner="w-live",
                progress=Progress(done=3, total=10, unit="rows", message="halfway"),
                tags=frozenset({"demo"}),
                label="crawl example.org",
                **running,
            ),
            task(  # held by a process that is not in the worker registry
                "run-2",
                TaskStatus.RUNNING,
                lease_owner="w-leaser",
                lease_until=now + timedelta(minutes=5),
                owner="w-leaser",
                **running,
            ),
            task("paused-1", TaskStatus.PAUSED, bucket=1, owner="w-live", **running),
            task(
                "fail-1",
                TaskStatus.FAILED,
                finished_at=now,
                failure=Failure(
                    kind=FailureKind.EXCEPTION,
                    message="upstream said 503",
                    exception_type="RuntimeError",
                    traceback=TRACEBACK,
                ),
                metadata={"logs": ["09:00:00 INFO started", "09:00:01 ERROR upstream said 503"]},
                **running,
            ),
            task("ok-1", TaskStatus.SUCCEEDED, finished_at=now, outcome={"rows": 10}, **running),
            task("stopped-1", TaskStatus.STOPPED, finished_at=now, **running),
            task("lost-1", TaskStatus.LOST, finished_at=now, **running),
            task("retry-1", TaskStatus.RETRY_WAIT, attempt=1, max_attempts=3, **running),
        ]
    )
    ScheduleAdmin(store).register(
        Schedule(
            name="nightly-report",
            task="job.import",
            trigger=CronTrigger("0 3 * * *", "Asia/Shanghai"),
            description="the nightly report",
        )
    )
    client = Client(store)
    client.set_limit("tenant:*", concurrency=2, rate="10/m")
    client.pause_queue(name="job.report", reason="deploy")
    pipeline = Pipeline("nightly")
    extract = pipeline.node("job.import", node_id="extract")
    other = pipeline.node("job.import", node_id="extract#2")
    load = pipeline.node("job.load", node_id="load", depends_on=[extract, other])
    pipeline.node("job.report", node_id="report", depends_on=[load, extract])
    client.enqueue_pipeline(pipeline, run_id="nightly/etl")


#: Every page, logged in (the login page is checked logged out).
PAGES = (
    "/",
    "/tasks",
    "/tasks?status=running",
    "/tasks/run-1",
    "/tasks/fail-1",
    "/tasks/ok-1",
    "/schedules",
    "/schedules/nightly-report",
    "/workers",
    "/workers/w-live",
    "/workers/w-dead",
    "/buckets",
    "/failures",
    "/charts",
    "/charts?range=day",
    "/tasks?sort=oldest",
    "/pipelines/nightly%2Fetl",
    "/tasks/nightly%2Fetl%2Fload",
    "/no-such-page",
    "/tasks/no-such-task",
)


def axe_violations(page: Any) -> list[str]:
    """axe-core's violations on the page, one readable line per rule and node."""
    page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => n.target.join(" ") + ": " + n.failureSummary),
            }));
        }"""
    )
    return [
        f"{v['id']} ({v['impact']}, {v['help']}) at {node}" for v in found for node in v["nodes"]
    ]


def new_page(browser: Any, width: int) -> Any:
    context = browser.new_context(viewport={"width": width, "height": 860}, bypass_csp=True)
    return context.new_page()


def log_in(page: Any, url: str) -> None:
    page.goto(f"{url}/login")
    page.fill('input[name="token"]', TOKEN)
    page.click('button[type="submit"]')
    playwright_sync.expect(page.locator("h1")).to_have_text("Overview")


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
@pytest.mark.parametrize("width", WIDTHS)
def test_axe_finds_no_violation_on_any_page(
    store: TaskStore, browser: Any, width: int, shots: Path
) -> None:
    seed_everything(store)
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.2, tick=3600)
    with LiveServer(app) as server:
        page = new_page(browser, width)
        problems: dict[str, list[str]] = {}
        response = page.goto(f"{server.url}/login")
        assert response is not None
        assert response.status == 200
        problems["/login"] = axe_violations(page)
        log_in(page, server.url)
        for path in PAGES:
            response = page.goto(server.url + path)
            assert response is not None
            assert response.status in (200, 404), (path, response.status)
            playwright_sync.expect(page.locator("h1")).to_be_visible()
            if path == "/" and width < 600:  # the phone view, for docs/dashboard.md
                page.screenshot(path=str(shots / "dashboard-overview-phone.png"), full_page=True)
            problems[path] = axe_violations(page)
            wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if wide > 0:  # reflow: one scroll direction, a wide table scrolls by itself
                problems[path].append(f"the page is {wide}px wider than the window")
        page.context.close()
    shown = "\n".join(f"{path}: {line}" for path, lines in problems.items() for line in lines)
    assert not shown, f"axe-core at {width}px wide:\n{shown}"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_skip_link_is_the_first_tab_stop_and_moves_to_the_content(
    store: TaskStore, browser: Any
) -> None:
    expect = playwright_sync.expect
    seed_everything(store)
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.2, tick=3600)
    with LiveServer(app) as server:
        page = new_page(browser, 1400)
        log_in(page, server.url)  # (the login page focuses its token field at once)
        for path in ("/", "/tasks", "/tasks/run-1", "/workers", "/no-such-page"):
            page.goto(server.url + path)
            page.keyboard.press("Tab")
            skip = page.locator(":focus")
            expect(skip).to_have_text("Skip to content")
            expect(skip).to_be_visible()  # shown when focused
            page.keyboard.press("Enter")
            expect(page.locator(":focus")).to_have_id("content")
            page.keyboard.press("Tab")  # the next stop is inside the page, not the header
            assert page.evaluate(
                "document.getElementById('content').contains(document.activeElement)"
            ), path
        page.context.close()


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_states_are_told_by_text_as_well_as_colour(store: TaskStore, browser: Any) -> None:
    expect = playwright_sync.expect
    seed_everything(store)
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.2, tick=3600)
    with LiveServer(app) as server:
        page = new_page(browser, 1400)
        log_in(page, server.url)
        expect(page.locator("#live-state")).to_have_text("live: on")
        for worker, text in (("w-live", "live"), ("w-dead", "dead"), ("w-leaser", "leases live")):
            for where in ("/", "/workers"):
                page.goto(server.url + where)
                row = page.locator(f'[data-worker="{worker}"]')
                expect(row).to_contain_text(text)
                expect(row.locator(".dot")).to_have_attribute("aria-hidden", "true")
        # No live stream: the indicator says so in words.
        page.route("**/events", lambda route: route.abort())
        page.reload()
        expect(page.locator("#live-state")).to_have_text("live: off, reconnecting")
        page.context.close()


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_keyboard_focus_survives_a_live_refresh(store: TaskStore, browser: Any) -> None:
    """Focus on Stop, a live refresh replaces the region: focus is on the new Stop, so
    the next Enter presses Stop rather than whatever follows the page's body."""
    expect = playwright_sync.expect
    seed_everything(store)
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.2, tick=3600)
    with LiveServer(app) as server:
        page = new_page(browser, 1400)
        log_in(page, server.url)
        page.goto(f"{server.url}/tasks/run-1")
        expect(page.locator("body")).to_have_attribute("data-live", "on")
        stop = page.locator("#control button:text('Stop')")
        stop.focus()
        expect(stop).to_be_focused()
        old = stop.element_handle()
        for _ in range(2):  # twice: the restored focus is itself restored
            with page.expect_response(lambda r: "partial=1" in r.url):
                page.evaluate("document.body.dispatchEvent(new CustomEvent('dashboard-change'))")
            page.wait_for_function("e => !e.isConnected", arg=old)  # really swapped
            expect(page.locator(":focus")).to_have_text("Stop")
            old = page.locator(":focus").element_handle()
        # A link in the region keeps focus too (no id: found by where it points).
        page.goto(f"{server.url}/")
        link = page.locator('#live a[href$="/tasks/run-1"]').first
        link.focus()
        old = link.element_handle()
        with page.expect_response(lambda r: "partial=1" in r.url):
            page.evaluate("document.body.dispatchEvent(new CustomEvent('dashboard-change'))")
        page.wait_for_function("e => !e.isConnected", arg=old)
        expect(page.locator(":focus")).to_have_attribute("href", "/tasks/run-1")
        page.context.close()
