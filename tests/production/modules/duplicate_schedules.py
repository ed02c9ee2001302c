"""Two schedules with one name: the worker must refuse the module, not keep the last."""

from __future__ import annotations

from typing import Any

from chongming_task import task


@task
def tick(ctx: Any) -> None:
    """Do nothing."""


def register_schedules(scheduler: Any) -> None:
    scheduler.cron("nightly", "tick", "0 3 * * *")
    scheduler.cron("nightly", "tick", "0 4 * * *")
