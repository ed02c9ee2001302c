"""``Controller.stats()``: a frozen record of task counts per status (guide §8.2, §8.4).

``unfinished`` counts every non-terminal task, queued and paused ones included; it is
*not* "how many are using execution resources" -- that is ``controller.active_count``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from chongming_task._public import public
from chongming_task.states import TERMINAL, TaskStatus

__all__ = ["ControllerStats"]


@public
@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerStats:
    """Counts per status, from the store (so other processes' tasks are included)."""

    pending: int = 0
    blocked: int = 0
    queued: int = 0
    starting: int = 0
    running: int = 0
    pausing: int = 0
    paused: int = 0
    retry_wait: int = 0
    stopping: int = 0
    succeeded: int = 0
    failed: int = 0
    stopped: int = 0
    cancelled: int = 0
    skipped: int = 0
    lost: int = 0
    by_status: Mapping[TaskStatus, int] = field(default_factory=dict)
    """The same counts keyed by status (zeros included)."""

    @classmethod
    def from_counts(cls, counts: Mapping[TaskStatus, int]) -> ControllerStats:
        full = {status: int(counts.get(status, 0)) for status in TaskStatus}
        return cls(
            **{status.value: count for status, count in full.items()},
            by_status=MappingProxyType(full),
        )

    @property
    def total(self) -> int:
        return sum(self.by_status.values())

    @property
    def unfinished(self) -> int:
        """Non-terminal tasks: pending, blocked, queued, running, paused... (§8.4)."""
        return sum(count for status, count in self.by_status.items() if status not in TERMINAL)

    @property
    def finished(self) -> int:
        return self.total - self.unfinished

    def __getitem__(self, status: TaskStatus | str) -> int:
        return self.by_status[TaskStatus(status)]
