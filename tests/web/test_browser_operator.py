"""An operator's day in the real browser: search, filter-wide bulk actions, the worker
registry and a worker's page, and the numbers and pages that used to mislead (live
elapsed, "look stuck", "oldest queued", logout, the 404 page).

Same real uvicorn server and Debian chromium as ``test_browser``; every outcome that
changes state is checked in the store, not only on the page.
"""

# The ``browser`` fixture is imported from test_browser, so the test parameters of that
# name "redefine" it as far as ruff can tell.
# ruff: noqa: F811

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming_task._model import Failure, FailureKind
from chongming_task.cli import main
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskQuery, TaskStore
from chongming_task.testing import FakeClock
from chongming_task.web import create_app

from .conftest import TOKEN, USER
from .test_browser import WAIT_MS, LiveServer, browser, playwright_sync  # noqa: F401
from .test_browser_gaps import logged_in, shown_ids
from .test_scale import _task as _job
from .test_true_to_store import _queued_work, _task, _worker

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

START = datetime(2030, 1, 1, tzinfo=UTC)


def _search(page: Any, *, q: str = "", arg: str = "") -> None:
    """Search through the tasks page's form, as an operator types it."""
    page.fill('[data-testid="filter-id"]', q)
    page.fill('[data-testid="filter-arg"]', arg)
    page.click("#filters button[type=submit]")


# ---------------------------------------------------------------- search


def test_search_by_id_prefix_and_by_argument_from_the_tasks_form(
    store: TaskStore, browser: Any
) -> None:
    expect = playwright_sync.expect
    store.create_many(
        _job(
            f"order-{i:04d}",
            START + timedelta(seconds=i),
            args=(i,),
            kwargs={"customer": "acme" if i % 3 == 0 else "globex"},
        )
        for i in range(120)
    )
    store.create_many(
        [
            _job(
                f"invoice-{i}", START + timedelta(minutes=5, seconds=i), kwargs={"customer": "acme"}
            )
            for i in range(5)
        ]
        + [_job("plain", START + timedelta(minutes=6)), _job("note", START, args=("naïve",))]
    )
    app = create_app(store, token=TOKEN, user=USER, clock=FakeClock(START + timedelta(hours=1)))
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        page.click("nav >> text=Tasks")
        count = page.locator('[data-testid="count"]')
        expect(count).to_contain_text("1–50 of 127 task(s)")

        # An id prefix: 100 of the 120 orders start with order-00; a page of 50 shows.
        _search(page, q="order-00")
        expect(count).to_contain_text("1–50 of 100 task(s)")
        assert shown_ids(page) == [f"order-{i:04d}" for i in range(99, 49, -1)]
        expect(page.locator('[data-testid="filter-id"]')).to_have_value("order-00")
        page.click('[data-testid="next-page"]')  # the next page keeps the search
        expect(count).to_contain_text("51–100 of 100 task(s)")
        assert shown_ids(page) == [f"order-{i:04d}" for i in range(49, -1, -1)]

        _search(page, q="order-011")
        expect(count).to_contain_text("1–10 of 10 task(s)")
        assert shown_ids(page) == [f"order-{i:04d}" for i in range(119, 109, -1)]

        # An argument value: the enqueued arguments' JSON contains it; the id does not count.
        _search(page, arg='"customer":"acme"')
        expect(count).to_contain_text("1–45 of 45 task(s)")
        acme = [f"invoice-{i}" for i in range(4, -1, -1)]
        acme += [f"order-{i:04d}" for i in range(117, -1, -3)]
        assert shown_ids(page)[:5] == acme[:5]
        assert sorted(shown_ids(page)) == sorted(acme)
        _search(page, q="invoice", arg="acme")  # both at once
        expect(count).to_contain_text("1–5 of 5 task(s)")
        assert shown_ids(page) == acme[:5]
        _search(page, arg="naïve")
        expect(count).to_contain_text("1–1 of 1 task(s)")
        assert shown_ids(page) == ["note"]
        _search(page, q="nothing-like-it")
        expect(count).to_have_text(re.compile(r"^\s*0 task\(s\)"))
        expect(page.locator("tbody")).to_contain_text("No task matches.")
        page.close()


# ---------------------------------------------------------------- bulk actions


@pytest.mark.parametrize(
    ("action", "before", "after"),
    [
        ("stop", TaskStatus.QUEUED, TaskStatus.STOPPED),
        ("retry", TaskStatus.FAILED, TaskStatus.QUEUED),
    ],
)
def test_a_filter_wide_bulk_action_reaches_every_matching_task_over_several_pages(
    store: TaskStore, browser: Any, action: str, before: TaskStatus, after: TaskStatus
) -> None:
    """Tick "all N matching the filter", confirm the count, and the paged execution goes
    on by itself to the end: every one of the 250 matching tasks (two pages of 200)
    is acted on, and no task outside the filter."""
    expect = playwright_sync.expect
    n = 250
    failure = Failure(kind=FailureKind.EXCEPTION, message="boom", exception_type="RuntimeError")
    broken = {"failure": failure} if before is TaskStatus.FAILED else {}
    store.create_many(
        _job(f"job-{i:04d}", START + timedelta(seconds=i), status=before, args=(i,), **broken)
        for i in range(n)
    )
    # Outside the filter: another name in the same state, the same name in another state.
    store.create_many(
        [
            _job(f"other-{i}", START, name="other", status=before, args=(i,), **broken)
            for i in range(5)
        ]
        + [_job(f"done-{i}", START, status=TaskStatus.SUCCEEDED, args=(i,)) for i in range(3)]
    )
    clock = FakeClock(START + timedelta(hours=1))
    app = create_app(store, token=TOKEN, user=USER, clock=clock, live_interval=0.1)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        posts: list[str] = []
        page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
        page.click("nav >> text=Tasks")
        page.fill('#filters input[name="name"]', "job.import")
        page.select_option('[data-testid="filter-status"]', before.value)
        page.click("#filters button[type=submit]")
        expect(page.locator('[data-testid="count"]')).to_contain_text(f"1–50 of {n} task(s)")
        bar = page.locator('[data-testid="bulk-bar"]')
        bar.locator('[data-testid="bulk-all"]').check()
        expect(bar).to_contain_text(f"all {n} matching the filter")
        bar.locator('input[name="reason"]').fill("incident 7")
        bar.locator(f'button[value="{action}"]').click()

        # The confirmation says the count; nothing has happened yet.
        expect(page.locator('[data-testid="bulk-count"]')).to_have_text(str(n))
        assert store.count_by_status(TaskQuery(name_prefix="job.import")) == {
            before: n,
            TaskStatus.SUCCEEDED: 3,
        }
        page.locator('[data-testid="bulk-confirm"] button').click()

        # Page after page by itself (app.js), to the end.
        expect(page.locator('p[data-testid="bulk-done"]')).to_be_visible(timeout=WAIT_MS)
        expect(page.locator('[data-testid="bulk-progress"]')).to_have_text(f"{n} of {n} processed")
        # The bulk bar's submit (answered by the confirmation), then one request per
        # page of 200: the confirming click, and the one app.js sent by itself.
        assert len([u for u in posts if u.endswith("/tasks/bulk")]) == 3, posts
        page.close()

    assert store.count_by_status(TaskQuery(name_prefix="job.import")) == {
        after: n,
        TaskStatus.SUCCEEDED: 3,
    }
    assert store.count_by_status(TaskQuery(name_prefix="other")) == {before: 5}
    last = store.history("job-0249")[-1]
    assert (last.actor, last.reason) == (USER, "incident 7")


# ---------------------------------------------------------------- workers


def test_the_workers_page_lists_the_registry_and_a_worker_page_shows_its_work(
    store: TaskStore, browser: Any
) -> None:
    """The dead worker is there, in words, as the CLI says; the overview's verdict is
    `health`'s; a worker's page shows its tasks, slots, buckets, heartbeat and version."""
    expect = playwright_sync.expect
    now = datetime.now(UTC)
    _worker(store, "w-live", beat=now, buckets=(0, 1), slots=3, version="1.2.3")
    _worker(store, "w-dead", beat=now - timedelta(hours=1), buckets=(2,), version="1.1.0")
    held = {"lease_until": now + timedelta(minutes=5), "last_heartbeat_at": now}
    store.create_many(
        [
            _task(
                "mine",
                now - timedelta(minutes=3),
                status=TaskStatus.RUNNING,
                started_at=now - timedelta(minutes=3),
                owner="w-live",
                lease_owner="w-live",
                bucket=0,
                **held,
            ),
            _task("done", now, status=TaskStatus.SUCCEEDED, owner="w-live"),
            _task("not-mine", now, status=TaskStatus.QUEUED, owner="w-dead", bucket=2),
        ]
    )
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1, tick=3600)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        health = page.locator('[data-testid="health"]')
        expect(health).to_contain_text("unhealthy")
        expect(health).to_contain_text("worker w-dead stopped heart-beating")

        page.click("nav >> text=Workers")
        expect(page.locator("h1")).to_have_text("Workers")
        expect(page.locator("main")).not_to_contain_text("no worker registry")
        rows = page.locator("tr[data-worker]")
        expect(rows).to_have_count(2)
        shown = {
            rows.nth(i).get_attribute("data-worker"): rows.nth(i)
            .locator("td")
            .first.inner_text()
            .strip()
            for i in range(2)
        }
        assert shown == {"w-live": "live", "w-dead": "dead"}
        if hasattr(store, "path"):  # SQLite: `chongming-task workers` over the same file
            out = io.StringIO()
            code = main(
                ["--db", str(store.path), "workers", "--json"], stdout=out, stderr=io.StringIO()
            )
            assert code == 0
            cli = {w["worker_id"]: w["state"] for w in json.loads(out.getvalue())["workers"]}
            assert cli == shown

        page.click('tr[data-worker="w-live"] a[href="/workers/w-live"]')
        expect(page.locator("h1")).to_have_text("w-live")
        expect(page.locator("#live section").first).to_contain_text("live")
        expect(page.locator('[data-testid="version"]')).to_have_text("1.2.3")
        expect(page.locator('[data-testid="slots"]')).to_have_text("3")
        expect(page.locator('[data-testid="buckets"]')).to_have_text("0, 1")
        expect(page.locator('[data-testid="heartbeat"]')).to_have_text(
            re.compile(r"^\d+(\.\d)? (ms|s) ago \(")
        )
        current = page.locator("tr[data-task]")
        expect(current).to_have_count(1)
        expect(current.first).to_have_attribute("data-task", "mine")
        expect(current.first).to_contain_text("running")
        expect(current.first.locator("td").last).to_have_text("3 min")  # live elapsed

        page.click("text=« workers")
        page.click('tr[data-worker="w-dead"] a[href="/workers/w-dead"]')
        expect(page.locator("h1")).to_have_text("w-dead")
        expect(page.locator("#live section").first).to_contain_text("dead")
        expect(page.locator('[data-testid="version"]')).to_have_text("1.1.0")
        expect(page.locator('[data-testid="buckets"]')).to_have_text("2")
        expect(page.locator('[data-testid="heartbeat"]')).to_have_text(re.compile(r"^60 min ago"))
        expect(page.locator("tr[data-task]")).to_have_count(1)  # the task it owns
        expect(page.locator("tr[data-task]").first).to_have_attribute("data-task", "not-mine")
        page.close()


# ---------------------------------------------------------------- numbers that misled


def test_the_elapsed_time_of_a_running_task_is_live(store: TaskStore, browser: Any) -> None:
    """Started five minutes ago, last written 4 ms after it started: the page says
    minutes, and the minutes go on as the clock does (the page refreshes on its tick)."""
    expect = playwright_sync.expect
    started = START
    clock = FakeClock(started + timedelta(minutes=5))
    store.create_many(
        [
            _task(
                "busy",
                started,
                status=TaskStatus.RUNNING,
                started_at=started,
                updated_at=started + timedelta(milliseconds=4),
                owner="w",
                lease_owner="w",
                lease_until=started + timedelta(hours=1),
            )
        ]
    )
    app = create_app(store, token=TOKEN, user=USER, clock=clock, live_interval=0.1, tick=0.2)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        page.goto(f"{server.url}/tasks/busy")
        elapsed = page.locator('[data-testid="elapsed"]')
        expect(elapsed).to_have_text("5 min")
        page.goto(f"{server.url}/tasks")
        expect(page.locator('tr[data-task="busy"] [data-testid="duration"]')).to_have_text("5 min")
        page.goto(f"{server.url}/tasks/busy")
        expect(page.locator("body")).to_have_attribute("data-live", "on")
        clock.advance(120)
        expect(elapsed).to_have_text("7 min", timeout=WAIT_MS)  # on the next tick
        page.close()


def test_a_paused_task_does_not_look_stuck(store: TaskStore, browser: Any) -> None:
    expect = playwright_sync.expect
    clock = FakeClock(START + timedelta(hours=1))
    quiet = {
        "started_at": START,
        "last_heartbeat_at": START,
        "owner": "w",
        "lease_owner": "w",
        "lease_until": START + timedelta(hours=2),
    }
    store.create_many(
        [
            _task("silent", START, status=TaskStatus.RUNNING, **quiet),
            _task("parked", START, status=TaskStatus.PAUSED, **quiet),
        ]
    )
    app = create_app(store, token=TOKEN, user=USER, clock=clock, idle_after=60)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        expect(page.locator('[data-testid="stuck"]')).to_have_text("1")
        stuck = page.locator("section.card", has=page.locator("h2", has_text="Look stuck"))
        expect(stuck.locator("tbody tr")).to_have_count(1)
        expect(stuck.locator("tbody tr").first).to_contain_text("silent")
        expect(stuck.locator("tbody tr").first).to_contain_text("no heartbeat")
        expect(stuck).not_to_contain_text("parked")
        page.close()


def test_oldest_queued_counts_only_due_tasks_and_the_due_time_is_shown(
    store: TaskStore, browser: Any
) -> None:
    expect = playwright_sync.expect
    clock = FakeClock(START + timedelta(minutes=10))
    later = START + timedelta(hours=2)
    store.create_many(
        [
            _queued_work("delayed", START, bucket=0, not_before=later),
            _queued_work("ready", START + timedelta(minutes=4), bucket=0),
        ]
    )
    app = create_app(store, token=TOKEN, user=USER, clock=clock)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        oldest = page.locator(".stat", has_text="oldest queued").locator(".n")
        expect(oldest).to_have_text("6 min")  # "ready", queued 6 minutes ago; not 10 min
        page.click("nav >> text=Tasks")
        due = page.locator('tr[data-task="delayed"] [data-testid="due"] time')
        expect(due).to_have_text("in 110 min")
        expect(due).to_have_attribute("title", later.isoformat(timespec="seconds"))
        expect(page.locator('tr[data-task="ready"] [data-testid="due"]')).to_have_text("—")
        page.click('tr[data-task="delayed"] a')
        expect(page.locator('[data-testid="due"]')).to_have_text(
            later.isoformat(timespec="seconds")
        )
        page.close()


# ---------------------------------------------------------------- sessions and pages


def test_logout_revokes_the_session_for_a_copy_of_its_cookie(
    store: TaskStore, browser: Any
) -> None:
    expect = playwright_sync.expect
    app = create_app(store, token=TOKEN, user=USER)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        kept = page.context.cookies()  # a copy kept (or stolen) before the logout
        assert [c["name"] for c in kept] == ["chongming_dashboard"]
        page.click("button:text('log out')")
        expect(page.locator("h1")).to_have_text("Log in")

        elsewhere = browser.new_context()
        elsewhere.add_cookies(kept)
        other = elsewhere.new_page()
        response = other.goto(f"{server.url}/tasks")
        assert response is not None
        assert response.status == 401
        expect(other.locator("h1")).to_have_text("Log in")
        expect(other.locator('input[name="token"]')).to_be_visible()
        assert other.request.get(f"{server.url}/api/tasks").status == 401
        elsewhere.close()
        page.close()


def test_the_404_page_keeps_the_navigation(store: TaskStore, browser: Any) -> None:
    expect = playwright_sync.expect
    store.create_many([_task("t-1", START)])
    app = create_app(store, token=TOKEN, user=USER)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        for path in ("/no/such/page", "/tasks/no-such-task"):
            response = page.goto(server.url + path)
            assert response is not None
            assert response.status == 404
            expect(page.locator("header nav")).to_be_visible()
            expect(page.locator("header .user")).to_have_text(USER)
        page.click("nav >> text=Tasks")  # and it takes the operator on
        expect(page.locator("h1")).to_have_text("Tasks")
        expect(page.locator('tr[data-task="t-1"]')).to_be_visible()
        page.close()


def test_a_page_opens_one_live_stream(store: TaskStore, browser: Any) -> None:
    """app.js started twice: every page held two event streams and refreshed twice."""
    expect = playwright_sync.expect
    store.create_many([_task("t-1", START)])
    app = create_app(store, token=TOKEN, user=USER, live_interval=0.1, tick=3600)
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        page.add_init_script(
            """(() => {
                const Original = window.EventSource;
                window.openedStreams = 0;
                window.EventSource = function (url, init) {
                    window.openedStreams += 1;
                    return new Original(url, init);
                };
            })()"""
        )
        for path in ("/", "/tasks", "/tasks/t-1", "/workers"):
            page.goto(server.url + path)
            expect(page.locator("body")).to_have_attribute("data-live", "on")
            assert page.evaluate("window.openedStreams") == 1, path
        page.close()
