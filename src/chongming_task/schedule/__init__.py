"""Cron and interval schedules with a persisted control plane (ARCHITECTURE §5).

The pure model lives in ``triggers`` (when), ``definition`` (what, under which
policy), ``control`` (the shared control record), ``firing`` (which firings are due,
what they record) and ``stats`` (statistics and health). The :class:`Scheduler`
drives them beside the controller and submits each firing as an ordinary task;
:class:`ScheduleAdmin` operates schedules from any process through the store.
Nothing here imports croniter until a cron expression is parsed, and the scheduler
side is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task.schedule._control import ScheduleControl
from chongming_task.schedule._definition import Schedule
from chongming_task.schedule._triggers import CronTrigger, IntervalTrigger, Trigger, make_trigger

if TYPE_CHECKING:  # type checkers see the real names; runtime resolves them lazily
    from chongming_task.errors import StaleScheduleEdit
    from chongming_task.schedule._admin import ScheduleAdmin
    from chongming_task.schedule._preview import Preview, parse_count, preview
    from chongming_task.schedule._scheduler import Scheduler
    from chongming_task.schedule._stats import RunSummary, SchedulerHealth, ScheduleStatistics

_LAZY: dict[str, str] = {
    "Preview": "chongming_task.schedule._preview",
    "parse_count": "chongming_task.schedule._preview",
    "preview": "chongming_task.schedule._preview",
    "Scheduler": "chongming_task.schedule._scheduler",
    "ScheduleAdmin": "chongming_task.schedule._admin",
    "StaleScheduleEdit": "chongming_task.errors",
    "ScheduleStatistics": "chongming_task.schedule._stats",
    "SchedulerHealth": "chongming_task.schedule._stats",
    "RunSummary": "chongming_task.schedule._stats",
}


__getattr__, __dir__ = lazy_exports("chongming_task.schedule", globals(), _LAZY)


__all__ = [
    "CronTrigger",
    "IntervalTrigger",
    "Preview",
    "RunSummary",
    "Schedule",
    "ScheduleAdmin",
    "ScheduleControl",
    "ScheduleStatistics",
    "Scheduler",
    "SchedulerHealth",
    "StaleScheduleEdit",
    "Trigger",
    "make_trigger",
    "parse_count",
    "preview",
]
