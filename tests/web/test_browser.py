"""End to end in a real headless browser: Playwright driving Debian's chromium.

A real uvicorn server serves the dashboard over the test store while a holder (a
controller under another owner) runs the tasks. The browser logs in, reads the
overview, filters the tasks, opens a running task, pauses, resumes and stops it with a
reason, and the test checks that the timeline the page shows is the store's history.

Screenshots of every page are taken on the way; with ``CHONGMING_UPDATE_SCREENSHOTS=1``
(``make screenshots``) they are written to ``docs/images/`` for the README.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.web import create_app

from .conftest import TOKEN, USER, Holder, require_chromium

playwright_sync = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
WAIT_MS = 15_000


class LiveServer:
    """uvicorn on a socket bound before the thread starts, so no start-up race.

    On exit every connection still open (a live event stream the page held) is closed
    in the server's own loop before the server is told to stop, so no socket outlives
    the test to be reported unclosed in a later one.
    """

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True)

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.started.set()
        await self.server.serve(sockets=[self.sock])

    def _close_connections(self) -> None:
        for connection in list(self.server.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.close()

    def __enter__(self) -> LiveServer:
        self.thread.start()
        assert self.started.wait(timeout=10), "the dashboard server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.loop is not None
        closed = threading.Event()

        def close_then_stop() -> None:
            self._close_connections()
            self.server.should_exit = True
            self.server.force_exit = True  # open event streams would hold a graceful exit
            closed.set()

        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(close_then_stop)
            closed.wait(timeout=10)
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    executable = require_chromium()
    with playwright_sync.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Where screenshots go: ``docs/images`` when updating them (SQLite run only)."""
    updating = os.environ.get("CHONGMING_UPDATE_SCREENSHOTS") == "1"
    if updating and "sqlite" in request.node.name:
        IMAGES.mkdir(parents=True, exist_ok=True)
        return IMAGES
    return tmp_path


def test_operator_session(store: TaskStore, holder: Holder, browser: Any, shots: Path) -> None:
    expect = playwright_sync.expect
    ScheduleAdmin(store).register(
        Schedule(
            name="nightly-report",
            task="quick",
            trigger=CronTrigger("0 3 * * *", "Asia/Shanghai"),
            description="the nightly report",
        )
    )
    spin = holder.controller.submit("spin", bucket_key="tenant-a", label="crawl example.org")
    holder.wait_for(spin.task_id, TaskStatus.RUNNING)
    failed = holder.controller.submit("fail", message="upstream said 503 (token=abc123)")
    holder.wait_for(failed.task_id, TaskStatus.FAILED)
    for _ in range(3):
        quick = holder.controller.submit("quick", bucket_key="tenant-b")
        holder.wait_for(quick.task_id, TaskStatus.SUCCEEDED)

    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1, tick=0.5)
    with LiveServer(app) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

        # Log in: the overview answers 401 with the login form.
        response = page.goto(server.url + "/")
        assert response is not None
        assert response.status == 401
        page.screenshot(path=str(shots / "dashboard-login.png"))
        page.fill('input[name="token"]', TOKEN)
        page.click('button[type="submit"]')

        # Overview: counts, the running task, the failure (redacted), live.
        expect(page.locator("h1")).to_have_text("Overview")
        expect(page.locator('[data-status="running"]')).to_have_text("1")
        expect(page.locator('[data-status="succeeded"]')).to_have_text("3")
        expect(page.locator("body")).to_have_attribute("data-live", "on", timeout=WAIT_MS)
        assert "abc123" not in page.content()
        page.screenshot(path=str(shots / "dashboard-overview.png"), full_page=True)

        # Tasks: filter to the running ones.
        page.click("nav >> text=Tasks")
        expect(page.locator("tr[data-task]")).to_have_count(5)
        page.select_option('[data-testid="filter-status"]', "running")
        page.click("#filters button[type=submit]")
        expect(page.locator("tr[data-task]")).to_have_count(1)
        expect(page.locator(f'tr[data-task="{spin.task_id}"]')).to_be_visible()
        page.screenshot(path=str(shots / "dashboard-tasks.png"), full_page=True)

        # Task detail: pause, resume, stop, each with a reason.
        page.click(f'tr[data-task="{spin.task_id}"] a')
        status = page.locator(".summary .status")
        expect(status).to_have_text("running")
        page.fill('#control input[name="reason"]', "maintenance window")
        page.click("#control button:text('Pause')")
        expect(page.locator(".flash")).to_contain_text(
            "pause requested — not confirmed across processes"
        )
        expect(status).to_have_text("paused", timeout=WAIT_MS)  # live: the real state

        page.fill('#control input[name="reason"]', "window over")
        page.click("#control button:text('Resume')")
        expect(page.locator(".flash")).to_contain_text("resume requested")
        expect(status).to_have_text("running", timeout=WAIT_MS)

        page.fill('#control input[name="reason"]', "operator stop: <b>enough</b>")
        page.click("#control button:text('Stop')")
        expect(page.locator(".flash")).to_contain_text("stop requested")
        expect(status).to_have_text("stopped", timeout=WAIT_MS)
        expect(page.locator("#control")).to_have_count(0)  # nothing is legal any more
        page.screenshot(path=str(shots / "dashboard-task.png"), full_page=True)

        # The timeline the browser shows is the store's history.
        history = store.history(spin.task_id)
        rows = page.locator("[data-testid=timeline] tr[data-version]")  # not the attempt headers
        expect(rows).to_have_count(len(history))
        shown = [
            (
                int(rows.nth(i).get_attribute("data-version") or -1),
                rows.nth(i).get_attribute("data-to"),
                rows.nth(i).locator(".actor").inner_text(),
                rows.nth(i).locator(".reason").inner_text(),
            )
            for i in range(len(history))
        ]
        stored = [(t.version, t.to_status.value, t.actor or "—", t.reason or "") for t in history]
        assert shown == stored
        stopping = [t for t in history if t.to_status is TaskStatus.STOPPING]
        assert (stopping[0].actor, stopping[0].reason) == (USER, "operator stop: <b>enough</b>")
        pausing = [t for t in history if t.to_status is TaskStatus.PAUSING]
        assert pausing[0].actor == USER
        assert store.get(spin.task_id).status is TaskStatus.STOPPED  # type: ignore[union-attr]

        # The other pages.
        page.click("nav >> text=Schedules")
        expect(page.locator('tr[data-schedule="nightly-report"]')).to_be_visible()
        page.screenshot(path=str(shots / "dashboard-schedules.png"), full_page=True)
        page.click("text=nightly-report")
        expect(page.locator("h1")).to_have_text("nightly-report")
        page.fill('#schedule-control input[name="reason"]', "holiday freeze")
        page.click("#schedule-control button:text('Pause')")
        expect(page.locator(".flash")).to_contain_text("schedule paused")
        assert ScheduleAdmin(store).get("nightly-report").status == "paused"
        page.screenshot(path=str(shots / "dashboard-schedule.png"), full_page=True)
        page.click("nav >> text=Workers")
        expect(page.locator("h1")).to_have_text("Workers")
        page.screenshot(path=str(shots / "dashboard-workers.png"), full_page=True)
        page.click("nav >> text=Buckets")
        expect(page.locator("tr[data-bucket]").first).to_be_visible()
        page.screenshot(path=str(shots / "dashboard-buckets.png"), full_page=True)

        assert not [e for e in errors if "Content Security Policy" in e], errors
        context.close()


def test_read_only_browser_has_no_controls(store: TaskStore, holder: Holder, browser: Any) -> None:
    expect = playwright_sync.expect
    spin = holder.controller.submit("spin")
    holder.wait_for(spin.task_id, TaskStatus.RUNNING)
    app = create_app(store, token=TOKEN, user=USER, read_only=True, live_interval=0.1)
    with LiveServer(app) as server:
        page = browser.new_page()
        page.goto(f"{server.url}/login")
        page.fill('input[name="token"]', TOKEN)
        page.click('button[type="submit"]')
        expect(page.locator(".badge.ro")).to_have_text("read-only")
        page.goto(f"{server.url}/tasks/{spin.task_id}")
        expect(page.locator(".summary .status")).to_have_text("running")
        expect(page.locator("input[name=reason]")).to_have_count(0)
        page.close()


def test_a_typed_reason_survives_live_updates(
    store: TaskStore, holder: Holder, browser: Any
) -> None:
    """The live region is re-rendered while the operator types; the reason stays
    (``hx-preserve``: the form is inside the live region, so its legal buttons update)."""
    expect = playwright_sync.expect
    ScheduleAdmin(store).register(
        Schedule(name="hourly", task="quick", trigger=CronTrigger("0 * * * *", "UTC"))
    )
    spin = holder.controller.submit("spin")
    holder.wait_for(spin.task_id, TaskStatus.RUNNING)
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1, tick=0.2)
    with LiveServer(app) as server:
        page = browser.new_page()
        page.goto(f"{server.url}/login")
        page.fill('input[name="token"]', TOKEN)
        page.click('button[type="submit"]')
        for path, field in ((f"/tasks/{spin.task_id}", "#control-reason"),
                            ("/schedules/hourly", "#schedule-reason")):  # fmt: skip
            page.goto(server.url + path)
            page.fill(field, "a slow typist's reason")
            # A refresh that was already in flight when typing began lands now (the
            # client skips starting one while a reason is typed, not finishing one).
            page.evaluate(
                """async () => {
                    const live = document.getElementById("live");
                    const html = await (await fetch(live.getAttribute("hx-get"))).text();
                    htmx.swap(live, html, {swapStyle: "outerHTML"});
                }"""
            )
            expect(page.locator("#live")).to_be_attached()
            expect(page.locator(field)).to_have_value("a slow typist's reason")
        page.close()
