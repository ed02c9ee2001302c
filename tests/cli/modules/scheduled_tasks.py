"""A task module that also declares schedules (a worker fires them)."""

from __future__ import annotations

from typing import Any

from chongming_task import task
from chongming_task.schedule import CronTrigger, IntervalTrigger, Schedule


@task
def tick(ctx: Any, text: str = "tick") -> str:
    """Return the label: one firing."""
    return text


@task
def broken(ctx: Any) -> None:
    """Fail every time."""
    raise RuntimeError("scheduled failure")


SCHEDULES = [
    Schedule(name="every-second", task="tick", trigger=IntervalTrigger(1), kwargs={"text": "s"}),
    Schedule(name="nightly", task="tick", trigger=CronTrigger("0 2 * * *", "Asia/Shanghai")),
    Schedule(
        name="by-hand",
        task="broken",
        trigger=CronTrigger("0 0 1 1 *"),
        description="runs only when asked",
    ),
]
