"""The control record of one schedule: the shared, persisted truth every scheduler reads.

One record per schedule lives in the store (``put_schedule`` with a revision
compare-and-set), so a pause, a pattern override or a manual run issued from any
process is seen by every scheduler. It holds three kinds of field:

- **definition** from code (task, arguments, policy, default pattern), refreshed on
  every registration;
- **operator state** (status, pattern/timezone override), which a re-registration
  keeps, as the Go scheduler's ``RegisterCronWithOptions`` does;
- **counters** (runs, errors, last run...), updated as runs finish.

``definition_revision`` moves on every definition or operator change and never on a
counter update, so a scheduler picks up what matters with one integer comparison.
All methods are pure: they return a new record and never touch the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal

from chongming_task.errors import ConfigurationError
from chongming_task.schedule._control_codec import control_from_dict, control_to_dict
from chongming_task.schedule._definition import Misfire, Overlap, RunPolicy, Schedule
from chongming_task.schedule._triggers import DstPolicy, Trigger, make_trigger
from chongming_task.states import TaskStatus

__all__ = ["COUNTED_MEMORY", "ControlStatus", "ScheduleControl", "redact_error"]

ControlStatus = Literal["active", "paused"]

#: Task ids remembered as already counted, so one run is never counted twice even if
#: its final transition is observed again (a re-subscribed listener, a CAS retry).
COUNTED_MEMORY: Final = 32

#: Terminal statuses counted as errors. ``stopped``/``cancelled`` are an operator's
#: decision and ``skipped`` is "nothing to do": none of them is the task failing.
_ERROR_STATUSES: Final = frozenset({TaskStatus.FAILED, TaskStatus.LOST})


def redact_error(text: str | None) -> str | None:
    """Failure text as it may be stored or logged (secrets removed, length capped)."""
    from chongming_task._redact import redact_reason

    return None if text is None else redact_reason(text) or ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleControl(RunPolicy):
    """A schedule's control record. Build it with :meth:`register`, change it with ``with_*``."""

    name: str
    task: str
    default_pattern: str
    """The pattern from code; ``pattern`` returns to it on reset."""
    pattern: str
    """The effective pattern (an operator override, or ``default_pattern``)."""
    registered_at: datetime
    updated_at: datetime
    default_timezone: str = "UTC"
    timezone: str = "UTC"
    overridden: bool = False
    """An operator set ``pattern``/``timezone``; registration keeps them."""
    anchor: datetime | None = None
    """Grid anchor of ``@every`` patterns (``None``: the epoch)."""
    status: ControlStatus = "active"
    status_reason: str | None = None
    definition_revision: int = 1
    updated_by: str | None = None
    # -- policy, from code
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    overlap: Overlap = "forbid"
    max_runtime: float = 3600
    retry_attempts: int = 0
    retry_backoff: float = 60
    manual_run_enabled: bool = True
    misfire: Misfire = "skip"
    misfire_grace: float = 3600
    bucket_key: str | None = None
    tags: tuple[str, ...] = ()
    display_name: str = ""
    """What people read; empty (a record from before display names): the name."""
    dst: DstPolicy = "default"
    """DST policy of the cron pattern (an operator's override keeps it)."""
    # -- counters
    runs: int = 0
    """Finished runs of every kind, skipped ones included (as the Go scheduler counts)."""
    errors: int = 0
    skips: int = 0
    consecutive_failures: int = 0
    last_run_at: datetime | None = None
    """When the last counted run finished."""
    last_status: str | None = None
    last_error: str | None = None
    """Redacted failure text of the last failed run."""
    last_fired_at: datetime | None = None
    """Scheduled time of the newest claimed firing (the misfire reference)."""
    next_run_at: datetime | None = None
    counted: tuple[str, ...] = ()
    """The most recently counted task ids (see ``COUNTED_MEMORY``)."""
    revision: int = 0
    """The store's record revision this was read at (for compare-and-set; not stored)."""

    def __post_init__(self) -> None:
        # The one place a pause/resume reason or an error is recorded, however it got
        # here (with_paused, replace, a record written by an older version): redacted.
        if self.status_reason is not None:
            object.__setattr__(self, "status_reason", redact_error(self.status_reason) or None)
        if self.last_error is not None:
            object.__setattr__(self, "last_error", redact_error(self.last_error))

    # -- derived ------------------------------------------------------------------

    @property
    def trigger(self) -> Trigger:
        """The effective trigger (``pattern`` in ``timezone``)."""
        return make_trigger(self.pattern, self.timezone, self.anchor, self.dst)

    @property
    def shown_name(self) -> str:
        """The display name, or the name when none was recorded."""
        return self.display_name or self.name

    @property
    def kind(self) -> Literal["cron", "interval"]:
        return self.trigger.kind

    @property
    def paused(self) -> bool:
        return self.status == "paused"

    # -- registration (the RegisterCronWithOptions merge) -------------------------

    @classmethod
    def register(
        cls,
        schedule: Schedule,
        *,
        now: datetime,
        actor: str | None = None,
        existing: ScheduleControl | None = None,
    ) -> ScheduleControl:
        """The record after registering ``schedule`` over ``existing`` (if any).

        The code's pattern becomes ``default_pattern``; an operator override of
        pattern/timezone and a pause survive. Policy and arguments follow the code.
        ``definition_revision`` moves only when something that shapes a firing changed.
        """
        trigger = schedule.trigger
        definition: dict[str, Any] = {
            "task": schedule.task,
            "default_pattern": trigger.pattern,
            "default_timezone": trigger.timezone,
            "anchor": schedule.anchor,
            "args": tuple(schedule.args),
            "kwargs": dict(schedule.kwargs),
            "description": schedule.description,
            "overlap": schedule.overlap,
            "max_runtime": schedule.max_runtime,
            "retry_attempts": schedule.retry_attempts,
            "retry_backoff": schedule.retry_backoff,
            "manual_run_enabled": schedule.manual_run_enabled,
            "misfire": schedule.misfire,
            "misfire_grace": schedule.misfire_grace,
            "bucket_key": schedule.bucket_key,
            "tags": tuple(sorted(schedule.tags)),
            "display_name": schedule.display_name or schedule.name,
            "dst": schedule.dst or "default",
        }
        if existing is None:
            return cls(
                name=schedule.name,
                pattern=trigger.pattern,
                timezone=trigger.timezone,
                registered_at=now,
                updated_at=now,
                updated_by=actor,
                **definition,
            )
        if existing.name != schedule.name:
            raise ConfigurationError(
                f"cannot register schedule {schedule.name!r} over the record of {existing.name!r}"
            )
        merged = replace(existing, **definition)
        if not existing.overridden:
            merged = replace(merged, pattern=trigger.pattern, timezone=trigger.timezone)
        if merged.definition_key() == existing.definition_key():
            return merged
        return replace(
            merged,
            definition_revision=existing.definition_revision + 1,
            updated_at=now,
            updated_by=actor,
        )

    def definition_key(self) -> dict[str, Any]:
        """Everything that shapes a firing; a change here moves ``definition_revision``."""
        data = self.to_dict()
        for volatile in _VOLATILE:
            data.pop(volatile, None)
        return data

    # -- operator actions -----------------------------------------------------------

    def _changed(self, actor: str | None, now: datetime, **changes: Any) -> ScheduleControl:
        return replace(
            self,
            definition_revision=self.definition_revision + 1,
            updated_at=now,
            updated_by=actor,
            **changes,
        )

    def with_paused(
        self, *, actor: str | None, now: datetime, reason: str | None = None
    ) -> ScheduleControl:
        return self._changed(actor, now, status="paused", status_reason=reason)

    def with_resumed(
        self, *, actor: str | None, now: datetime, reason: str | None = None
    ) -> ScheduleControl:
        return self._changed(actor, now, status="active", status_reason=reason)

    def with_pattern(
        self, pattern: str, *, actor: str | None, now: datetime, timezone: str | None = None
    ) -> ScheduleControl:
        """An operator override of the pattern (and optionally the timezone).

        Raises:
            ConfigurationError: the pattern or timezone is invalid (nothing changes).
        """
        zone = self.timezone if timezone is None else timezone
        trigger = make_trigger(pattern, zone, self.anchor, self.dst)
        return self._repatterned(
            trigger, trigger.pattern, trigger.timezone, overridden=True, actor=actor, now=now
        )

    def with_default_pattern(self, *, actor: str | None, now: datetime) -> ScheduleControl:
        """Drop the override: back to the code's pattern and timezone."""
        pattern, zone = self.default_pattern, self.default_timezone
        trigger = make_trigger(pattern, zone, self.anchor, self.dst)
        return self._repatterned(trigger, pattern, zone, overridden=False, actor=actor, now=now)

    def _repatterned(
        self,
        trigger: Trigger,
        pattern: str,
        timezone: str,
        *,
        overridden: bool,
        actor: str | None,
        now: datetime,
    ) -> ScheduleControl:
        # next_run_at is shown to operators at once; schedulers recompute it on their tick.
        return self._changed(
            actor,
            now,
            pattern=pattern,
            timezone=timezone,
            overridden=overridden,
            next_run_at=trigger.next_after(now),
        )

    # -- scheduler bookkeeping (no revision change) -----------------------------------

    def with_fired(
        self, scheduled_at: datetime | None, next_run_at: datetime | None
    ) -> ScheduleControl:
        """Record a claimed firing (if any) and the next one; ``last_fired_at`` never moves back."""
        last = self.last_fired_at
        newest = last if scheduled_at is None or (last and last >= scheduled_at) else scheduled_at
        return replace(self, last_fired_at=newest, next_run_at=next_run_at)

    def with_result(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        finished_at: datetime,
        error: str | None = None,
    ) -> ScheduleControl:
        """Count one finished run (idempotent per ``task_id``)."""
        if task_id in self.counted or not status.is_terminal:
            return self
        changes: dict[str, Any] = {
            "runs": self.runs + 1,
            "last_run_at": finished_at,
            "last_status": status.value,
            "counted": (*self.counted, task_id)[-COUNTED_MEMORY:],
        }
        if status in _ERROR_STATUSES:
            changes["errors"] = self.errors + 1
            changes["consecutive_failures"] = self.consecutive_failures + 1
            changes["last_error"] = redact_error(error or status.value)
        elif status is TaskStatus.SUCCEEDED:
            changes["consecutive_failures"] = 0
        elif status is TaskStatus.SKIPPED:
            changes["skips"] = self.skips + 1
        return replace(self, **changes)

    # -- codec --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON stored as the schedule record's ``data`` (with a format version)."""
        return control_to_dict(self)

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any], revision: int = 0) -> ScheduleControl:
        """Read a stored record; ``StoreError`` if it is corrupt or from a newer format."""
        return cls(**control_from_dict(name, data, revision))


#: Fields that change without changing the definition (counters and bookkeeping).
_VOLATILE: Final = (
    "updated_at",
    "updated_by",
    "definition_revision",
    "registered_at",
    "runs",
    "errors",
    "skips",
    "consecutive_failures",
    "last_run_at",
    "last_status",
    "last_error",
    "last_fired_at",
    "next_run_at",
    "counted",
)
