"""Cron and interval schedules with a persisted control plane (ARCHITECTURE §5).

The pure model lives in ``triggers`` (when), ``definition`` (what, under which
policy), ``control`` (the shared control record), ``firing`` (which firings are due,
what they record) and ``stats`` (statistics and health). The ``Scheduler`` that
drives them sits beside the controller and submits each firing as an ordinary task.
Nothing here imports croniter until a cron expression is parsed.
"""

from __future__ import annotations

from chongming_task.schedule.control import ScheduleControl
from chongming_task.schedule.definition import Schedule
from chongming_task.schedule.triggers import CronTrigger, IntervalTrigger, Trigger, make_trigger

__all__ = [
    "CronTrigger",
    "IntervalTrigger",
    "Schedule",
    "ScheduleControl",
    "Trigger",
    "make_trigger",
]
