"""In the real browser: the charts page draws its SVG under the CSP, with no violation."""

# The ``browser`` fixture is imported from test_browser, so the test parameter of that
# name "redefines" it as far as ruff can tell.
# ruff: noqa: F811

from __future__ import annotations

from typing import Any

import pytest

from chongming_task.stores._base import TaskStore
from chongming_task.testing import FakeClock
from chongming_task.web import create_app

from .conftest import TOKEN, USER
from .test_browser import LiveServer, browser, playwright_sync  # noqa: F401
from .test_browser_gaps import logged_in
from .test_charts import NOW, build

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def test_the_charts_render_with_text_and_break_no_csp_rule(store: TaskStore, browser: Any) -> None:
    expect = playwright_sync.expect
    build(store)
    app = create_app(store, token=TOKEN, user=USER, clock=FakeClock(NOW))
    with LiveServer(app) as server:
        page = logged_in(browser, server)
        # Chromium reports every CSP violation as a console error ("Refused to ...").
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(f"{server.url}/charts")
        expect(page.locator("svg.chart")).to_have_count(5)
        started = page.get_by_role("img", name="Started: 28 in the window, at most 4 per slot")
        expect(started).to_be_visible()
        expect(page.locator("#chart-durations text", has_text="p95 19.0 s")).to_have_count(1)
        box = page.locator("#chart-started").bounding_box()
        assert box is not None
        assert box["width"] > 300
        assert box["height"] > 30
        page.locator("summary", has_text="Started as a table").click()
        expect(page.locator("td", has_text="2026-03-02 09:10").first).to_be_visible()
        assert errors == []
