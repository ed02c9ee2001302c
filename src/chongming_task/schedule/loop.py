"""The firing loop of one scheduler: what a tick reads, decides and fires.

A tick reads every control record in one query (so an operator's change anywhere
is in force within one tick: the Go scheduler's ``ReconcileControls``), asks the
pure :func:`~chongming_task.schedule.firing.plan_firings` which times are due for
each schedule registered here whose bucket this node owns, claims each due time in
the store (exactly one scheduler on the store wins it) and launches the winner's
firing. Then it serves the schedule commands. One failing schedule or store call is
counted and reported; it never stops the others or the loop.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from chongming_task.schedule.admin import ScheduleAdmin
from chongming_task.schedule.commands import ScheduleCommands
from chongming_task.schedule.control import ScheduleControl, redact_error
from chongming_task.schedule.firing import DueFiring, FiringPlan, plan_firings
from chongming_task.schedule.launcher import launch
from chongming_task.schedule.registration import Registered
from chongming_task.schedule.ticks import TickReport, firing_task_id
from chongming_task.stores.base import Command, ScheduleRecord

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = ["FiringLoop"]

log = logging.getLogger("chongming_task.schedule")

#: Firing claims are kept this long: longer than the largest ``misfire_grace`` (one
#: day), so a catch-up after downtime still meets the claims of firings that ran.
FIRING_RETENTION: Final = timedelta(days=2)
#: How often a scheduler prunes older claims (every scheduler does; it is idempotent).
PRUNE_EVERY: Final = timedelta(hours=1)


class FiringLoop:
    """The schedules registered with one scheduler, and the tick that fires them."""

    def __init__(
        self,
        controller: Controller,
        admin: ScheduleAdmin,
        *,
        owner: str,
        tolerance: float,
        command_lease: float,
    ) -> None:
        self.controller = controller
        self.store = controller.store
        self.clock = admin.clock
        self.admin = admin
        self.owner = owner
        self.misfire_tolerance = tolerance
        self._entries: dict[str, Registered] = {}
        self._lock = threading.RLock()
        self._tick_lock = threading.Lock()
        self.commands = ScheduleCommands(
            store=self.store,
            owner=owner,
            lease=command_lease,
            admin=admin,
            accepts=self.accepts,
            start_run=self.start_manual,
        )
        self.last_tick_at: datetime | None = None
        self.store_errors = 0
        """Failures (store or submission) since the last clean tick."""
        self.last_store_error: str | None = None
        self.claims_won = 0
        self.claims_lost = 0
        self._pruned_at: datetime | None = None

    # -- registrations -------------------------------------------------------------

    def register(self, entry: Registered) -> None:
        with self._lock:
            self._entries[entry.schedule.name] = entry

    def unregister(self, name: str) -> bool:
        with self._lock:
            return self._entries.pop(name, None) is not None

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._entries)

    def registered(self) -> list[Registered]:
        with self._lock:
            return list(self._entries.values())

    def close(self) -> None:
        """Hand back claimed manual runs (under the tick lock, so no tick is midway)."""
        with self._tick_lock:
            self.commands.release_all()

    def next_due(self) -> datetime | None:
        """The soonest firing any registered schedule expects."""
        return min((e.next_at for e in self.registered() if e.next_at is not None), default=None)

    # -- the tick ----------------------------------------------------------------------

    def tick(self) -> TickReport:
        """One pass: read controls, fire what is due, handle commands. Never raises."""
        with self._tick_lock:
            now = self.clock.now()
            report = TickReport(at=now)
            errors = 0
            records: dict[str, ScheduleRecord] = {}
            entries = self.registered()
            if self.controller.closed:
                # Claiming a firing that cannot be submitted would lose it for everyone.
                self.last_tick_at = now
                report.error = "the controller is closed; nothing is fired"
                return report
            try:
                records = {r.name: r for r in self.store.list_schedules()}
            except Exception as exc:
                entries = []  # without the records nothing can be decided this tick
                errors += self._failed(report, "reading schedules", exc)
            plans: list[tuple[Registered, ScheduleControl, FiringPlan]] = []
            for entry in entries:
                try:
                    planned = self._plan(entry, records.get(entry.schedule.name), now, report)
                except Exception as exc:  # one schedule's failure must not stop the others
                    errors += self._failed(report, f"schedule {entry.schedule.name!r}", exc)
                    continue
                if planned is not None:
                    plans.append((entry, *planned))
            # Every due firing of every schedule first, the bookkeeping writes after: a
            # firing never waits for another schedule's control record to be updated.
            fired: list[tuple[Registered, ScheduleControl, FiringPlan, datetime | None]] = []
            for entry, control, plan in plans:
                try:
                    newest: datetime | None = None
                    for due in plan.due:
                        if self._fire(control, due, report):
                            newest = due.scheduled_at
                except Exception as exc:
                    errors += self._failed(report, f"schedule {entry.schedule.name!r}", exc)
                    continue
                fired.append((entry, control, plan, newest))
            for entry, control, plan, newest in fired:
                try:
                    self._settle(entry, control, plan, newest, now)
                except Exception as exc:
                    errors += self._failed(report, f"schedule {entry.schedule.name!r}", exc)
            try:
                report.commands = self.commands.poll()
            except Exception as exc:
                errors += self._failed(report, "schedule commands", exc)
            if self._pruned_at is None or now - self._pruned_at >= PRUNE_EVERY:
                try:
                    self.store.prune_firings(now - FIRING_RETENTION)
                    self._pruned_at = now
                except Exception as exc:
                    errors += self._failed(report, "pruning firing claims", exc)
            if not errors:
                self.store_errors = 0
                self.last_store_error = None
            self.last_tick_at = now
            return report

    def _failed(self, report: TickReport, what: str, exc: BaseException) -> int:
        self.store_errors += 1
        self.last_store_error = redact_error(f"{what}: {type(exc).__name__}: {exc}")
        report.error = self.last_store_error
        log.warning("scheduler tick: %s", self.last_store_error)
        return 1

    def _plan(
        self, entry: Registered, record: ScheduleRecord | None, now: datetime, report: TickReport
    ) -> tuple[ScheduleControl, FiringPlan] | None:
        """The firings of one schedule due now; ``None`` if this node does not fire it."""
        name = entry.schedule.name
        if record is None:  # deleted by an operator while registered here: recreate it
            control = self.admin.register(entry.schedule, actor=self.owner)
        else:
            control = ScheduleControl.from_dict(record.name, record.data, record.revision)
        if control.definition_revision != entry.revision:
            if entry.revision:
                # A change (pattern, pause...) counts from when it was made: the new
                # pattern's earlier times are not "missed".
                entry.checked_until = max(
                    entry.checked_until or control.updated_at, control.updated_at
                )
            entry.revision = control.definition_revision
        if not entry.owned:
            entry.next_at = None
            return None
        # Decided up to: the newest claimed firing (by any node) or where this
        # scheduler last looked; a schedule nobody ever fired counts from registration.
        seen = [t for t in (control.last_fired_at, entry.checked_until) if t is not None]
        since = max(seen) if seen else control.registered_at
        plan = plan_firings(
            control.trigger,
            since=since,
            now=now,
            tolerance=self.misfire_tolerance,
            misfire=control.misfire,
            grace=control.misfire_grace,
        )
        if plan.missed_from is not None:
            report.missed[name] = plan.missed_from
            log.warning(
                "schedule %r missed firings since %s (misfire=%s)",
                name,
                plan.missed_from,
                control.misfire,
            )
        return control, plan

    def _settle(
        self,
        entry: Registered,
        control: ScheduleControl,
        plan: FiringPlan,
        newest: datetime | None,
        now: datetime,
    ) -> None:
        """After firing: remember what was decided and update the control record."""
        entry.checked_until = plan.checked_until or now
        entry.next_at = plan.next_at
        if newest is not None or control.next_run_at != plan.next_at:
            self.admin.update(control.name, lambda c: c.with_fired(newest, plan.next_at))

    def _fire(self, control: ScheduleControl, due: DueFiring, report: TickReport) -> bool:
        """Claim ``due``; if this scheduler wins, submit it. Returns whether it won."""
        task_id = firing_task_id(control.name, due.scheduled_at)
        if not self.store.claim_firing(control.name, due.scheduled_at, self.owner, task_id):
            self.claims_lost += 1
            report.lost += 1
            return False
        self.claims_won += 1
        launch(
            self.controller,
            control,
            trigger_type=control.kind,
            scheduled_at=due.scheduled_at,
            task_id=task_id,
            owner=self.owner,
            catch_up=due.catch_up,
        )
        report.fired.append(task_id)
        return True

    def accepts(self, name: str) -> bool:
        with self._lock:
            entry = self._entries.get(name)
        return entry is not None and entry.owned

    def start_manual(self, control: ScheduleControl, command: Command) -> str:
        task_id = firing_task_id(control.name, None, manual=command.command_id[:16])
        if self.store.get(task_id) is not None:
            return task_id  # re-claimed after a crash: the run already exists
        payload = command.payload
        launch(
            self.controller,
            control,
            trigger_type="manual",
            scheduled_at=command.issued_at,
            task_id=task_id,
            owner=self.owner,
            operator=_text(payload.get("operator")) or command.issued_by,
            reason=_text(payload.get("reason")),
            correlation_id=_text(payload.get("correlation_id")),
            command_id=command.command_id,
        )
        return task_id


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
