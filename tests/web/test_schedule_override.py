"""``POST /schedules/{name}/override``: edit a pattern override with the revision check."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient

from chongming_task.schedule import CronTrigger, Schedule
from chongming_task.schedule._admin import ScheduleAdmin, StaleScheduleEdit
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore

from .conftest import BEARER, USER, login


def nightly(store: TaskStore) -> ScheduleAdmin:
    admin = ScheduleAdmin(store, actor="deploy")
    admin.register(Schedule(name="nightly", task="quick", trigger=CronTrigger("0 3 * * *", "UTC")))
    return admin


def test_override_and_reset_through_the_api(client: TestClient, store: TaskStore) -> None:
    admin = nightly(store)
    before = admin.get("nightly")
    response = client.post(
        "/api/schedules/nightly/override",
        json={
            "pattern": "30 4 * * *",
            "timezone": "Asia/Shanghai",
            "definition_revision": before.definition_revision,
        },
        headers=BEARER,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["changed"], body["pattern"], body["timezone"], body["actor"]) == (
        True,
        "30 4 * * *",
        "Asia/Shanghai",
        USER,
    )
    stored = admin.get("nightly")
    assert (stored.pattern, stored.timezone, stored.overridden) == (
        "30 4 * * *",
        "Asia/Shanghai",
        True,
    )
    assert stored.updated_by == USER
    assert (
        stored.definition_revision == before.definition_revision + 1 == body["definition_revision"]
    )
    # The override survives a re-registration from code.
    nightly(store)
    assert admin.get("nightly").pattern == "30 4 * * *"
    reset = client.post(
        "/api/schedules/nightly/override",
        json={"action": "reset", "definition_revision": admin.get("nightly").definition_revision},
        headers=BEARER,
    )
    assert reset.status_code == 200, reset.text
    back = admin.get("nightly")
    assert (back.pattern, back.timezone, back.overridden, back.updated_by) == (
        "0 3 * * *",
        "UTC",
        False,
        USER,
    )


def test_an_edit_on_a_stale_revision_is_refused_and_changes_nothing(
    client: TestClient, store: TaskStore
) -> None:
    admin = nightly(store)
    seen = admin.get("nightly").definition_revision
    admin.set_pattern("nightly", "15 2 * * *", operator="bob")  # someone else, meanwhile
    record = store.get_schedule("nightly")
    assert record is not None
    response = client.post(
        "/api/schedules/nightly/override",
        json={"pattern": "45 5 * * *", "definition_revision": seen},
        headers=BEARER,
    )
    assert response.status_code == 409
    body = response.json()
    assert body["changed"] is False
    assert (body["expected_revision"], body["definition_revision"]) == (seen, seen + 1)
    assert "was changed by bob" in body["error"]
    assert "nothing was changed" in body["error"]
    after = store.get_schedule("nightly")
    assert after is not None
    assert (after.revision, after.data) == (record.revision, record.data)  # not written
    assert admin.get("nightly").pattern == "15 2 * * *"


def test_counter_updates_do_not_make_an_edit_stale(client: TestClient, store: TaskStore) -> None:
    """A running scheduler's bookkeeping moves the record revision, not the definition's."""
    admin = nightly(store)
    control = admin.get("nightly")
    admin.update("nightly", lambda c: c.with_fired(c.updated_at, c.updated_at + timedelta(days=1)))
    admin.update(
        "nightly",
        lambda c: c.with_result("nightly:x", TaskStatus.SUCCEEDED, finished_at=c.updated_at),
    )
    assert admin.get("nightly").revision > control.revision
    response = client.post(
        "/api/schedules/nightly/override",
        json={"pattern": "0 4 * * *", "definition_revision": control.definition_revision},
        headers=BEARER,
    )
    assert response.status_code == 200, response.text
    assert admin.get("nightly").pattern == "0 4 * * *"


def test_the_form_flow_with_csrf(client: TestClient, store: TaskStore) -> None:
    admin = nightly(store)
    csrf = login(client)
    page = client.get("/schedules/nightly").text
    assert 'id="schedule-override"' in page
    revision = admin.get("nightly").definition_revision
    assert f'name="definition_revision" value="{revision}"' in page
    form = {"pattern": "0 5 * * *", "timezone": "UTC", "definition_revision": str(revision)}
    assert client.post("/schedules/nightly/override", data=form).status_code == 403  # no CSRF
    assert admin.get("nightly").pattern == "0 3 * * *"
    saved = client.post(
        "/schedules/nightly/override", data={**form, "csrf": csrf}, follow_redirects=False
    )
    assert saved.status_code == 303
    assert saved.headers["location"] == "/schedules/nightly?done=override"
    assert "override saved" in client.get(saved.headers["location"]).text
    assert admin.get("nightly").pattern == "0 5 * * *"
    # The same form again: its revision is now stale.
    stale = client.post(
        "/schedules/nightly/override",
        data={**form, "pattern": "0 6 * * *", "csrf": csrf},
        follow_redirects=False,
    )
    assert stale.status_code == 303
    assert stale.headers["location"] == "/schedules/nightly?done=stale"
    assert "edit refused" in client.get(stale.headers["location"]).text
    assert admin.get("nightly").pattern == "0 5 * * *"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"pattern": "0 3 * * *"}, "definition_revision"),
        ({"pattern": "0 3 * * *", "definition_revision": "two"}, "definition_revision"),
        ({"pattern": "0 3 * * *", "definition_revision": True}, "definition_revision"),
        ({"definition_revision": 1}, "pattern is required"),
        ({"pattern": "61 * * * *", "definition_revision": 1}, "61"),
        ({"pattern": "0 3 * * *", "timezone": "Mars/Base", "definition_revision": 1}, "Mars"),
        ({"action": "explode", "definition_revision": 1}, "action must be one of"),
    ],
)
def test_bad_edits_are_400_and_change_nothing(
    client: TestClient, store: TaskStore, body: dict[str, Any], message: str
) -> None:
    admin = nightly(store)
    record = store.get_schedule("nightly")
    response = client.post("/api/schedules/nightly/override", json=body, headers=BEARER)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]
    after = store.get_schedule("nightly")
    assert after is not None
    assert record is not None
    assert after.revision == record.revision
    assert admin.get("nightly").pattern == "0 3 * * *"


def test_unknown_schedule_is_404(client: TestClient) -> None:
    response = client.post(
        "/api/schedules/nope/override",
        json={"pattern": "0 3 * * *", "definition_revision": 1},
        headers=BEARER,
    )
    assert response.status_code == 404


def test_read_only_refuses_and_hides_the_override(make_client: Any, store: TaskStore) -> None:
    admin = nightly(store)
    client = make_client(read_only=True)
    assert 'id="schedule-override"' not in client.get("/schedules/nightly", headers=BEARER).text
    response = client.post(
        "/api/schedules/nightly/override",
        json={"pattern": "0 4 * * *", "definition_revision": 1},
        headers=BEARER,
    )
    assert response.status_code == 403
    assert admin.get("nightly").pattern == "0 3 * * *"


def test_schedule_admin_checks_the_revision_itself(store: TaskStore) -> None:
    admin = nightly(store)
    seen = admin.get("nightly").definition_revision
    admin.pause("nightly", operator="carol", reason="freeze")
    with pytest.raises(StaleScheduleEdit, match="changed by carol") as raised:
        admin.set_pattern("nightly", "0 9 * * *", expect_definition_revision=seen)
    assert (raised.value.expected, raised.value.actual) == (seen, seen + 1)
    with pytest.raises(StaleScheduleEdit):
        admin.reset_pattern("nightly", expect_definition_revision=seen)
    assert admin.get("nightly").pattern == "0 3 * * *"
    applied = admin.set_pattern("nightly", "0 9 * * *", expect_definition_revision=seen + 1)
    assert applied.pattern == "0 9 * * *"
