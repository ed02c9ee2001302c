"""What one scheduler tick did, and the task ids of firings.

A firing's task id is derived from what identifies the firing (schedule and
scheduled time, or the manual-run command), so a second attempt to start the same
firing collides in the store instead of running twice: a guard behind the firing
claim, and the way a re-claimed manual run finds the run already started.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["TickReport", "firing_task_id"]


def firing_task_id(
    schedule: str, scheduled_at: datetime | None, *, manual: str | None = None
) -> str:
    """``nightly@20260105T020000Z`` for a timed firing, ``nightly@manual-<id>`` otherwise."""
    if manual is not None:
        return f"{schedule}@manual-{manual}"
    if scheduled_at is None:
        raise ValueError("a timed firing needs its scheduled time")
    instant = scheduled_at.astimezone(UTC)
    text = instant.strftime("%Y%m%dT%H%M%S")
    if instant.microsecond:
        text += f".{instant.microsecond:06d}"
    return f"{schedule}@{text}Z"


@dataclass(slots=True)
class TickReport:
    """The outcome of one :meth:`Scheduler.tick`."""

    at: datetime
    fired: list[str] = field(default_factory=list)
    """Task ids submitted by this scheduler (skipped ones included)."""
    lost: int = 0
    """Due firings another scheduler had already claimed."""
    missed: dict[str, datetime] = field(default_factory=dict)
    """Schedule -> oldest firing that was missed (misfire policy applied)."""
    missed_reasons: dict[str, str] = field(default_factory=dict)
    """Schedule -> why its firings were missed and what the misfire policy did."""
    settled: list[str] = field(default_factory=list)
    """Runs ended ``lost`` because their holder's lease expired mid-run."""
    adopted: list[str] = field(default_factory=list)
    """Firings another scheduler claimed and never launched (it died in between),
    launched by this one (also in ``fired``)."""
    commands: int = 0
    """Schedule commands claimed."""
    error: str | None = None
    """The (redacted) store error that cut this tick short."""
