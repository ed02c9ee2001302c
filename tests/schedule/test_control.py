"""The control record: the RegisterCronWithOptions merge, operator actions, counters, codec."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.schedule import CronTrigger, IntervalTrigger, Schedule, ScheduleControl
from chongming_task.schedule._control import COUNTED_MEMORY
from chongming_task.states import TaskStatus
from chongming_task.stores._memory import InMemoryTaskStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)


def schedule(pattern: str = "0 2 * * *", timezone: str = "UTC", **changes: Any) -> Schedule:
    return Schedule(name="nightly", task="sync", trigger=CronTrigger(pattern, timezone), **changes)


def test_first_registration_takes_everything_from_code() -> None:
    control = ScheduleControl.register(
        schedule(timezone="Asia/Shanghai", overlap="allow"), now=NOW, actor="deploy"
    )
    assert (control.pattern, control.default_pattern) == ("0 2 * * *", "0 2 * * *")
    assert (control.timezone, control.default_timezone) == ("Asia/Shanghai", "Asia/Shanghai")
    assert control.status == "active"
    assert control.definition_revision == 1
    assert control.overlap == "allow"
    assert control.registered_at == control.updated_at == NOW
    assert control.updated_by == "deploy"
    assert control.trigger == CronTrigger("0 2 * * *", "Asia/Shanghai")
    assert control.kind == "cron"


def test_operator_overrides_survive_reregistration() -> None:
    first = ScheduleControl.register(schedule(), now=NOW)
    operated = first.with_pattern(
        "30 3 * * *", timezone="Europe/Berlin", actor="ops", now=LATER
    ).with_paused(actor="ops", now=LATER, reason="maintenance")
    assert operated.definition_revision == 3  # two operator changes, two bumps
    assert operated.overridden
    # The code changes its pattern and a policy, then redeploys.
    again = ScheduleControl.register(
        schedule("0 4 * * *", max_runtime=60), now=LATER + timedelta(hours=1), existing=operated
    )
    assert again.pattern == "30 3 * * *"
    assert again.timezone == "Europe/Berlin"
    assert again.default_pattern == "0 4 * * *"
    assert again.status == "paused"
    assert again.status_reason == "maintenance"
    assert again.max_runtime == 60
    assert again.definition_revision == 4
    assert again.registered_at == NOW
    # Reset brings back the code's (new) default.
    reset = again.with_default_pattern(actor="ops", now=LATER)
    assert (reset.pattern, reset.timezone, reset.overridden) == ("0 4 * * *", "UTC", False)
    assert reset.definition_revision == 5


def test_reregistering_unchanged_code_does_not_move_the_revision() -> None:
    first = ScheduleControl.register(schedule(), now=NOW)
    counted = first.with_result("t1", TaskStatus.SUCCEEDED, finished_at=LATER)
    again = ScheduleControl.register(schedule(), now=LATER, existing=counted)
    assert again.definition_revision == 1
    assert again.updated_at == NOW
    assert again.runs == 1  # counters are kept


def test_code_pattern_change_without_override_moves_the_effective_pattern() -> None:
    first = ScheduleControl.register(schedule(), now=NOW)
    again = ScheduleControl.register(schedule("0 5 * * *"), now=LATER, existing=first)
    assert (again.pattern, again.default_pattern) == ("0 5 * * *", "0 5 * * *")
    assert again.definition_revision == 2
    assert again.updated_at == LATER


def test_resume_and_invalid_override() -> None:
    paused = ScheduleControl.register(schedule(), now=NOW).with_paused(actor="a", now=NOW)
    resumed = paused.with_resumed(actor="b", now=LATER, reason="done")
    assert (resumed.status, resumed.updated_by, resumed.status_reason) == ("active", "b", "done")
    with pytest.raises(ConfigurationError, match="'61 \\* \\* \\* \\*' is not valid"):
        resumed.with_pattern("61 * * * *", actor="ops", now=LATER)
    with pytest.raises(ConfigurationError, match="IANA"):
        resumed.with_pattern("0 1 * * *", timezone="Nowhere/Else", actor="ops", now=LATER)


def test_interval_schedules_keep_their_anchor() -> None:
    anchor = datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
    sched = Schedule(name="tick", task="t", trigger=IntervalTrigger(30, anchor))
    control = ScheduleControl.register(sched, now=NOW)
    assert control.pattern == "@every 30s"
    assert control.trigger == IntervalTrigger(30, anchor)
    faster = control.with_pattern("@every 10s", actor="ops", now=NOW)
    assert faster.trigger == IntervalTrigger(10, anchor)
    assert faster.kind == "interval"


def test_register_refuses_a_foreign_record() -> None:
    other = ScheduleControl.register(
        Schedule(name="other", task="t", trigger=CronTrigger("@daily")), now=NOW
    )
    with pytest.raises(ConfigurationError, match="over the record of 'other'"):
        ScheduleControl.register(schedule(), now=NOW, existing=other)


def test_counters_follow_results_and_are_idempotent() -> None:
    control = ScheduleControl.register(schedule(), now=NOW)
    control = control.with_result(
        "a", TaskStatus.FAILED, finished_at=NOW, error="Authorization: Bearer abc.def"
    )
    control = control.with_result("a", TaskStatus.FAILED, finished_at=NOW, error="again")
    control = control.with_result("b", TaskStatus.LOST, finished_at=LATER)
    assert (control.runs, control.errors, control.consecutive_failures) == (2, 2, 2)
    assert control.last_error == "lost"
    control = control.with_result("c", TaskStatus.SKIPPED, finished_at=LATER)
    assert (control.runs, control.skips, control.consecutive_failures) == (3, 1, 2)
    control = control.with_result("d", TaskStatus.SUCCEEDED, finished_at=LATER)
    assert (control.runs, control.errors, control.consecutive_failures) == (4, 2, 0)
    assert control.last_status == "succeeded"
    assert control.last_run_at == LATER
    assert control.with_result("e", TaskStatus.RUNNING, finished_at=LATER) is control
    for index in range(COUNTED_MEMORY + 5):
        control = control.with_result(f"x{index}", TaskStatus.STOPPED, finished_at=LATER)
    assert len(control.counted) == COUNTED_MEMORY
    assert control.errors == 2  # stopped is an operator's decision, not an error


def test_failure_text_is_redacted() -> None:
    control = ScheduleControl.register(schedule(), now=NOW).with_result(
        "a", TaskStatus.FAILED, finished_at=NOW, error="login failed: password=hunter2"
    )
    assert control.last_error is not None
    assert "hunter2" not in control.last_error
    assert "[REDACTED]" in control.last_error


def test_fired_never_moves_backwards() -> None:
    control = ScheduleControl.register(schedule(), now=NOW).with_fired(LATER, LATER)
    older = control.with_fired(NOW, LATER + timedelta(days=1))
    assert older.last_fired_at == LATER
    assert older.next_run_at == LATER + timedelta(days=1)
    assert older.definition_revision == control.definition_revision


def test_codec_round_trips_through_a_store() -> None:
    control = (
        ScheduleControl.register(
            schedule(kwargs={"region": "eu"}, args=(1, [2]), tags={"etl"}, bucket_key="eu"),
            now=NOW,
            actor="deploy",
        )
        .with_pattern("0 3 * * *", actor="ops", now=LATER)
        .with_result("a", TaskStatus.FAILED, finished_at=LATER, error="boom")
        .with_fired(LATER, LATER + timedelta(days=1))
    )
    with InMemoryTaskStore() as store:
        record = store.put_schedule("nightly", control.to_dict(), expect_revision=None)
        loaded = ScheduleControl.from_dict(record.name, record.data, record.revision)
    assert loaded.revision == record.revision
    assert replace(loaded, revision=0) == control
    assert loaded.trigger == CronTrigger("0 3 * * *")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(v=99), "newer than this library understands"),
        (lambda d: d.pop("pattern"), "missing pattern"),
        (lambda d: d.update(status="sleeping"), "status 'sleeping'"),
        (lambda d: d.update(last_run_at="yesterday"), "not ISO-8601"),
    ],
)
def test_corrupt_records_are_store_errors(mutate: Any, message: str) -> None:
    data = ScheduleControl.register(schedule(), now=NOW).to_dict()
    mutate(data)
    with pytest.raises(StoreError, match=message):
        ScheduleControl.from_dict("nightly", data)


def test_pause_reasons_and_errors_are_recorded_redacted() -> None:
    """However a reason reaches the record (with_paused, replace, an old stored record)."""
    from chongming_task.schedule._admin import ScheduleAdmin
    from chongming_task.schedule._firing import firing_metadata

    secret = "maintenance: postgresql://app:S3cretPw@db/x, token=abc123"
    clean = "maintenance: postgresql://app:[REDACTED]@db/x, token=[REDACTED]"
    control = ScheduleControl.register(schedule(), now=NOW)
    assert control.with_paused(actor="ops", now=NOW, reason=secret).status_reason == clean
    assert control.with_resumed(actor="ops", now=NOW, reason=secret).status_reason == clean
    assert replace(control, status_reason=secret).status_reason == clean
    assert replace(control, status_reason=" \x00").status_reason is None
    assert replace(control, last_error="password=x").last_error == "password=[REDACTED]"
    old = {**control.to_dict(), "status_reason": secret, "last_error": secret}
    read = ScheduleControl.from_dict("nightly", old)
    assert (read.status_reason, read.last_error) == (clean, clean)

    store = InMemoryTaskStore()
    admin = ScheduleAdmin(store, clock=None, actor="ops")
    store.put_schedule("nightly", control.to_dict(), expect_revision=None)
    paused = admin.pause("nightly", reason=secret)
    assert paused.status_reason == clean
    record = store.get_schedule("nightly")
    assert record is not None
    assert "S3cretPw" not in repr(record.data)
    command = admin.request_run("nightly", operator="ops", reason=secret)
    assert command.payload["reason"] == clean

    metadata = firing_metadata(
        paused,
        trigger_type="manual",
        scheduled_at=NOW,
        fired_at=NOW,
        owner="w1",
        reason=secret,
        skip_reason=f"skipped, {secret}",
    )
    assert metadata["trigger"]["reason"] == clean
    assert metadata["skip"] == {"reason": f"skipped, {clean}"}
    assert "S3cretPw" not in repr(metadata)
