"""An operator's pattern change shows the new next run at once, not after a tick."""

from __future__ import annotations

from datetime import UTC, datetime

from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.schedule._definition import Schedule
from chongming_task.schedule._triggers import CronTrigger
from chongming_task.stores._memory import InMemoryTaskStore
from chongming_task.testing import FakeClock


def test_set_and_reset_pattern_recompute_next_run() -> None:
    clock = FakeClock(datetime(2026, 3, 2, 10, 0, tzinfo=UTC))
    with InMemoryTaskStore(clock=clock) as store:
        admin = ScheduleAdmin(store, clock=clock)
        schedule = Schedule(name="report", task="count", trigger=CronTrigger("0 3 * * *"))
        admin.register(schedule)
        overridden = admin.set_pattern("report", "30 12 * * *", operator="alice")
        assert overridden.next_run_at == datetime(2026, 3, 2, 12, 30, tzinfo=UTC)
        assert overridden.overridden
        reset = admin.reset_pattern("report", operator="alice")
        assert reset.next_run_at == datetime(2026, 3, 3, 3, 0, tzinfo=UTC)
        assert not reset.overridden
        assert reset.definition_revision == overridden.definition_revision + 1
