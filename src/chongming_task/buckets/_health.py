"""The one health verdict: schedules, the work queue and bucket ownership together.

``chongming-task health`` prints it (and exits 1 unless it is healthy) and the
dashboard's overview opens with it, so the two can never disagree. It combines
:meth:`ScheduleAdmin.health` (the schedule records), :func:`queue_health` (workers,
depth, orphaned buckets, expired leases) and :func:`ownership_report` (duplicate
owners, holes, orphaned tasks, stale declarations), each problem said once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from chongming_task.buckets._registry import OwnershipReport, ownership_report
from chongming_task.schedule import ScheduleAdmin, SchedulerHealth
from chongming_task.stores._base import TaskStore
from chongming_task.stores._queue_health import QueueHealth, queue_health

__all__ = ["FleetHealth", "fleet_health"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetHealth:
    status: str
    """``healthy``, ``degraded`` (the schedules' own verdict) or ``unhealthy``."""
    healthy: bool
    problems: tuple[str, ...]
    schedules: SchedulerHealth | None
    """``None`` when the store keeps no schedules part."""
    queue: QueueHealth
    owners: OwnershipReport


def fleet_health(
    store: TaskStore, admin: ScheduleAdmin | None, *, now: datetime | None = None
) -> FleetHealth:
    """The verdict over ``store`` at ``now`` (default ``store.clock.now()``); ``admin``
    reads its schedules (``None``: a store without the schedule part, judged on the
    queue and buckets alone)."""
    now = now or store.clock.now()
    schedules = admin.health() if admin is not None else None
    queue = queue_health(store, now)
    owners = ownership_report(store, now=now)
    schedules_ok = schedules is None or schedules.healthy
    healthy = schedules_ok and queue.healthy and owners.healthy
    if schedules is None:
        status = "healthy" if healthy else "unhealthy"
    else:
        status = schedules.status if healthy or not schedules_ok else "unhealthy"
    problems = list(schedules.problems) if schedules is not None else []
    problems += queue.problems
    problems += owners.problems_besides(orphaned=queue.orphaned, dead=queue.dead)
    return FleetHealth(
        status=status,
        healthy=healthy,
        problems=tuple(problems),
        schedules=schedules,
        queue=queue,
        owners=owners,
    )
