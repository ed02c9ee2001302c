"""The schedule concern of a store: control records and firing claims.

The scheduler keeps one control record per schedule (compare-and-set on a revision, so
an operator's override and a re-registration never silently overwrite each other) and
claims every firing under a unique (schedule, instant) key, so several schedulers
sharing a store run each firing exactly once. A store without this concern refuses
``Scheduler`` and ``ScheduleAdmin`` with a ``ConfigurationError``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import datetime

from chongming_task._model import JSONValue
from chongming_task.stores._records import ScheduleRecord

__all__ = ["ScheduleStore"]


class ScheduleStore(ABC):
    """Schedule control records and exactly-once firing claims.

    Records are opaque JSON to the store; ``updated_at`` comes from the store's clock.
    Every method raises :class:`~chongming_task.errors.StoreError` when the backend fails.
    """

    @abstractmethod
    def put_schedule(
        self, name: str, data: Mapping[str, JSONValue], *, expect_revision: int | None
    ) -> ScheduleRecord:
        """Insert (``expect_revision=None``) or compare-and-set a schedule record.

        Raises:
            ScheduleConflict: the insert found the record, or the revision differs.
        """

    @abstractmethod
    def get_schedule(self, name: str) -> ScheduleRecord | None:
        """The record, or ``None``; a name no store can hold (a NUL byte, a lone
        surrogate) is a ``ConfigurationError``."""

    @abstractmethod
    def list_schedules(self) -> list[ScheduleRecord]:
        """Every record, ordered by name."""

    @abstractmethod
    def delete_schedule(self, name: str) -> bool:
        """Delete the record (its firing claims stay); ``False`` if there was none."""

    @abstractmethod
    def claim_firing(self, schedule: str, scheduled_at: datetime, owner: str, task_id: str) -> bool:
        """Claim one firing; ``True`` for exactly one caller per (schedule, instant).

        ``scheduled_at`` is compared as an instant: the same moment in two timezones
        is the same firing. Exactly once holds across threads and processes.
        """

    def prune_firings(self, before: datetime) -> int:
        """Forget firing claims scheduled before ``before``; returns how many.

        Claims only need to outlive the window in which two schedulers could race for
        the same firing. The default keeps everything (returns 0).
        """
        return 0
