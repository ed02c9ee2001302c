"""The ``Scheduler``: fires schedules as ordinary controller tasks, beside the controller.

It owns no execution: each firing is ``controller.submit(task, ...)`` with the
firing's metadata, retry policy and total timeout, so ``ps``, history, reconcile,
leases and metrics treat scheduled work like any other. The scheduler only decides
*when*, and makes sure each firing happens once:

1. every tick reads all control records (one query), so an override, pause or
   resume written by any process is in force within one tick (``ReconcileControls``);
2. for each schedule registered here whose bucket this node owns, the pure
   :func:`~chongming_task.schedule._firing.plan_firings` names the due times;
3. each due time is claimed with ``store.claim_firing(schedule, scheduled_at, ...)``,
   which succeeds for exactly one scheduler on the store, and only the winner submits;
4. a paused schedule, or ``overlap="forbid"`` with an unfinished run (judged per run
   in the store, not by a flag), still creates the run and ends it ``skipped`` with
   the reason: a record, not silence;
5. schedule commands from other processes are applied (``ScheduleCommands``), and
   finished runs update the counters through ``controller.subscribe``.

The background loop works ahead of each instant: it wakes ``lead`` seconds before
the next due time, claims the firings and creates their runs ``blocked``, then
releases them exactly at the scheduled time (see :mod:`chongming_task.schedule._loop`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._service import BackgroundService
from chongming_task._validation import check_seconds
from chongming_task.core import Clock
from chongming_task.errors import ConfigurationError, ControllerClosed
from chongming_task.schedule._admin import ScheduleAdmin, check_input, manual_runs_disabled
from chongming_task.schedule._control import ScheduleControl
from chongming_task.schedule._definition import Schedule
from chongming_task.schedule._launcher import launch
from chongming_task.schedule._loop import FiringLoop
from chongming_task.schedule._registration import check_schedule
from chongming_task.schedule._stats import RunSummary, SchedulerHealth, ScheduleStatistics
from chongming_task.schedule._ticks import TickReport, firing_task_id
from chongming_task.stores._base import Command

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.run import TaskRun

__all__ = ["Scheduler"]

log = logging.getLogger("chongming_task.schedule")

#: A firing noticed this late still counts as on time (Quartz's misfire threshold).
DEFAULT_MISFIRE_TOLERANCE: Final = 60.0
#: Lease of a claimed schedule command; renewed on every tick while its run lasts.
DEFAULT_COMMAND_LEASE: Final = 30.0
#: How long before a firing's scheduled time the loop claims it and creates its run.
DEFAULT_LEAD: Final = 0.02
#: The lead grows to twice the time the last arming took (many schedules due at one
#: instant, a slow store), but never beyond this: it is also the window in which a
#: crash leaves a claimed firing armed but not run.
MAX_LEAD: Final = 1.0


@public
class Scheduler:
    """Fires registered schedules through ``controller`` (see the module docstring).

    Args:
        controller: Runs the firings; its store holds the control records and claims.
        clock: Time source (default: the controller's clock).
        tick: Longest wait between two ticks, in seconds.
        owner: Identity in claims and ``updated_by`` (default: the controller's owner).
        misfire_tolerance: Seconds a firing may be noticed late and still run on time.
        command_lease: Lease of claimed schedule commands, renewed every tick
            (default: 30 s, at least three ticks).
        lead: Seconds before a firing's scheduled time at which the background loop
            claims it and creates its run (blocked until the instant); it grows to
            twice the last arming's duration when that is longer, up to 1 s.

    Raises:
        ConfigurationError: Invalid settings.
    """

    def __init__(
        self,
        controller: Controller,
        *,
        clock: Clock | None = None,
        tick: float = 1.0,
        owner: str | None = None,
        misfire_tolerance: float = DEFAULT_MISFIRE_TOLERANCE,
        command_lease: float | None = None,
        lead: float = DEFAULT_LEAD,
    ) -> None:
        tick = check_seconds(tick, "tick")
        misfire_tolerance = check_seconds(misfire_tolerance, "misfire_tolerance")
        lead = check_seconds(lead, "lead")
        if command_lease is None:
            command_lease = max(DEFAULT_COMMAND_LEASE, 3 * tick)
        command_lease = check_seconds(command_lease, "command_lease")
        if command_lease <= 2 * tick:
            raise ConfigurationError(
                f"command_lease ({command_lease}s) must exceed two ticks ({tick}s each), "
                "or a claimed manual run could expire between two renewals"
            )
        self.controller = controller
        self.store = controller.store
        self.clock: Clock = clock or controller.clock
        self.tick_interval = float(tick)
        self.owner = owner or controller.owner
        self.misfire_tolerance = float(misfire_tolerance)
        if lead > MAX_LEAD:
            raise ConfigurationError(f"lead must be at most {MAX_LEAD} s, got {lead!r}")
        self.lead = float(lead)
        self.admin = ScheduleAdmin(self.store, clock=self.clock, actor=self.owner)
        self._firing = FiringLoop(
            controller,
            self.admin,
            owner=self.owner,
            tolerance=self.misfire_tolerance,
            command_lease=float(command_lease),
        )
        self._lock = threading.Lock()
        self._closed = False
        self._service = BackgroundService(
            f"chongming-scheduler[{self.owner}]", self._pass, clock=self.clock
        )
        self._unsubscribe = controller.subscribe(self._on_transition)
        self._firing.on_lost = self._on_transition

    # -- registration ---------------------------------------------------------------

    def add(self, schedule: Schedule, *, actor: str | None = None) -> ScheduleControl:
        """Register ``schedule`` here and in the store (operator overrides survive).

        Raises:
            ConfigurationError: the task is not registered with the controller, or a
                node with ``owned_buckets`` got a schedule without ``bucket_key``.
        """
        entry = check_schedule(self.controller, schedule)
        control = self.admin.register(schedule, actor=actor)
        self._firing.register(entry)
        self._service.wake()
        return control

    def cron(
        self, name: str, task: str, expression: str, *, timezone: str = "UTC", **options: Any
    ) -> ScheduleControl:
        """Shorthand: ``add(Schedule(name=..., task=..., trigger=CronTrigger(...), ...))``."""
        from chongming_task.schedule._triggers import CronTrigger

        return self.add(
            Schedule(name=name, task=task, trigger=CronTrigger(expression, timezone), **options)
        )

    def every(
        self,
        name: str,
        task: str,
        seconds: float,
        *,
        anchor: datetime | None = None,
        **options: Any,
    ) -> ScheduleControl:
        """Shorthand for an :class:`~chongming_task.schedule.IntervalTrigger` schedule."""
        from chongming_task.schedule._triggers import IntervalTrigger

        return self.add(
            Schedule(name=name, task=task, trigger=IntervalTrigger(seconds, anchor), **options)
        )

    def add_all(self, *schedules: Schedule) -> list[ScheduleControl]:
        """:meth:`add` each schedule, in order."""
        return [self.add(schedule) for schedule in schedules]

    def add_module(self, module: ModuleType) -> list[ScheduleControl]:
        """:meth:`add` every :class:`Schedule` defined at the top level of ``module``.

        A worker that loads a module of tasks registers its schedules the same way
        (``controller.register_module(m)`` then ``scheduler.add_module(m)``).
        """
        found = [value for value in vars(module).values() if isinstance(value, Schedule)]
        return self.add_all(*sorted(found, key=lambda schedule: schedule.name))

    def remove(self, name: str, *, delete_record: bool = False) -> bool:
        """Stop firing ``name`` here; with ``delete_record`` also drop its control record."""
        found = self._firing.unregister(name)
        if delete_record:
            found = self.admin.delete(name) or found
        return found

    @property
    def names(self) -> list[str]:
        return self._firing.names()

    # -- operator actions (this process; other processes use ScheduleAdmin) -----------

    def get(self, name: str) -> ScheduleControl:
        return self.admin.get(name)

    def pause(
        self, name: str, *, operator: str | None = None, reason: str | None = None
    ) -> ScheduleControl:
        return self._woken(self.admin.pause(name, operator=operator, reason=reason))

    def resume(
        self, name: str, *, operator: str | None = None, reason: str | None = None
    ) -> ScheduleControl:
        return self._woken(self.admin.resume(name, operator=operator, reason=reason))

    def set_pattern(
        self, name: str, pattern: str, *, timezone: str | None = None, operator: str | None = None
    ) -> ScheduleControl:
        return self._woken(
            self.admin.set_pattern(name, pattern, timezone=timezone, operator=operator)
        )

    def reset_pattern(self, name: str, *, operator: str | None = None) -> ScheduleControl:
        return self._woken(self.admin.reset_pattern(name, operator=operator))

    def run_now(
        self,
        name: str,
        *,
        operator: str | None = None,
        reason: str | None = None,
        correlation_id: str | None = None,
        input: Mapping[str, JSONValue] | None = None,
    ) -> TaskRun:
        """Run ``name`` now in this process, as a ``manual`` firing.

        ``input`` follows the rule of :meth:`ScheduleAdmin.request_run`.

        Raises:
            ConfigurationError: not registered here, its manual runs are disabled, or
                ``input`` is not a JSON object.
        """
        payload = None if input is None else check_input(input)
        if name not in self.names:
            raise ConfigurationError(f"schedule {name!r} is not registered with this scheduler")
        control = self.admin.get(name)
        if not control.manual_run_enabled:
            raise ConfigurationError(manual_runs_disabled(name))
        return launch(
            self.controller,
            control,
            trigger_type="manual",
            scheduled_at=self.clock.now(),
            task_id=firing_task_id(name, None, manual=uuid.uuid4().hex[:16]),
            owner=self.owner,
            operator=operator or self.owner,
            reason=reason,
            correlation_id=correlation_id,
            input=payload,
            on_lost=self._on_transition,
        )

    def cancel_run(
        self, command_id: str, *, operator: str | None = None, reason: str | None = None
    ) -> Command:
        """:meth:`ScheduleAdmin.cancel_run`: cancel an unclaimed manual-run request."""
        return self.admin.cancel_run(command_id, operator=operator, reason=reason)

    def _woken(self, control: ScheduleControl) -> ScheduleControl:
        self._service.wake()
        return control

    # -- views --------------------------------------------------------------------------

    def history(self, name: str, *, limit: int = 50) -> list[RunSummary]:
        return self.admin.history(name, limit=limit)

    def statistics(self, name: str) -> ScheduleStatistics:
        return self.admin.statistics(name)

    def health(self) -> SchedulerHealth:
        """Health from the store's facts and this loop (see ``SchedulerHealth``).

        Never raises: a store outage is ``unhealthy`` with the error.
        """
        return self.admin.health(
            late_after=max(self.misfire_tolerance, 5 * self.tick_interval),
            last_tick_at=self._firing.last_tick_at,
            store_errors=self._firing.store_errors,
            last_store_error=self._firing.last_store_error,
            held=lambda task_id: self.controller.run(task_id) is not None,
        )

    # -- the loop -------------------------------------------------------------------------

    def start(self) -> Scheduler:
        """Tick in a background thread until :meth:`close` (idempotent)."""
        with self._lock:
            if self._closed:
                raise ControllerClosed("this scheduler is closed; create a new Scheduler")
            self._service.ensure_started()
        return self

    def close(self, timeout: float | None = 10.0) -> None:
        """Stop ticking, hand back claimed manual runs, unsubscribe (idempotent).

        Runs already submitted keep going: they belong to the controller.
        """
        with self._lock:
            self._closed = True
        self._service.stop(timeout)
        try:
            self._firing.close()
        except Exception as exc:  # a closed store: the leases run out instead
            log.warning("scheduler close: %s", exc)
        self._unsubscribe()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pass(self) -> float:
        soonest = self._firing.next_due()
        if soonest is not None and self._seconds_to(soonest) <= self._lead():
            # Arm ahead: claim and create now, start at the instant (loop.py).
            self._firing.tick(ahead=soonest, stop=self._service.stop_event)
        else:
            self.tick()
        return self._next_wait()

    def _lead(self) -> float:
        return min(MAX_LEAD, max(self.lead, 2 * self._firing.arming_seconds))

    def _seconds_to(self, instant: datetime) -> float:
        return (instant - self.clock.now()).total_seconds()

    def _next_wait(self) -> float:
        """Until ``lead`` before the next due firing, at most one tick."""
        soonest = self._firing.next_due()
        if soonest is None:
            return self.tick_interval
        seconds = self._seconds_to(soonest) - self._lead()
        return min(self.tick_interval, max(0.0, seconds))

    def tick(self) -> TickReport:
        """One pass: read controls, fire what is due, handle commands. Never raises.

        The background thread calls it; tests call it directly after moving a
        ``FakeClock``, for fully deterministic firing.
        """
        return self._firing.tick()

    # -- loop statistics ------------------------------------------------------------------

    @property
    def last_tick_at(self) -> datetime | None:
        return self._firing.last_tick_at

    @property
    def store_errors(self) -> int:
        """Store or submission failures since the last clean tick."""
        return self._firing.store_errors

    @property
    def last_store_error(self) -> str | None:
        return self._firing.last_store_error

    @property
    def claims_won(self) -> int:
        """Firings this scheduler claimed (and so launched)."""
        return self._firing.claims_won

    @property
    def claims_lost(self) -> int:
        """Due firings another scheduler had claimed first."""
        return self._firing.claims_lost

    @property
    def pending_commands(self) -> dict[str, str]:
        """Claimed manual-run commands not completed yet: command id -> task id."""
        return self._firing.commands.inflight

    # -- counters ---------------------------------------------------------------------------

    def _on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """Count finished runs of schedules into their control records."""
        if not transition.to_status.is_terminal:
            return
        name = snapshot.metadata.get("schedule")
        if not isinstance(name, str) or self.store.get_schedule(name) is None:
            return
        error = snapshot.failure.message if snapshot.failure is not None else None
        finished = snapshot.finished_at or transition.at
        self.admin.update(
            name,
            lambda c: c.with_result(
                snapshot.task_id, transition.to_status, finished_at=finished, error=error
            ),
        )
        if snapshot.metadata.get("trigger_type") == "manual":
            self._service.wake()  # a manual-run command may be waiting for this run
