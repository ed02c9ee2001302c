"""The firing loop of one scheduler: what a tick reads, decides and fires.

A tick reads every control record in one query (so an operator's change anywhere
is in force within one tick: the Go scheduler's ``ReconcileControls``), asks the
pure :func:`~chongming_task.schedule._firing.plan_firings` which times are due for
each schedule registered here whose bucket this node owns, claims each due time in
the store (exactly one scheduler on the store wins it) and launches the winner's
firing. Then it serves the schedule commands. One failing schedule or store call is
counted and reported; it never stops the others or the loop.

**Working ahead of the instant.** The background loop does not wait for a firing's
scheduled time to do the expensive part. It wakes ``lead`` seconds before the next
due time and runs a tick *ahead* to that instant: it reads the control records,
plans, claims each firing (the durable exactly-once claim) and creates its run
``blocked`` ("armed: waiting for its scheduled time ..."), all before the instant.
Then it waits until the instant (the clock's wait) and only then releases the armed
runs (``blocked -> queued``, trigger ``schedule:due``), so the body starts no earlier
than its scheduled time and the store never shows it started before it did. What is
left at the instant is the controller's own start (``-> starting`` is stored before
the body runs). The bookkeeping writes of the control records follow.

A firing that a skip would apply to when armed (paused, or ``overlap="forbid"``
with an unfinished run) is only claimed ahead; it is launched at the instant, where
the skip is judged again, so a run that ends in the meantime does not cause a skip.
If the loop is stopped (``Scheduler.close``) before an armed firing's instant, the
run is ended ``skipped`` with that reason: it was claimed here, so nobody else fires
it, and the record says why it did not run. A crash in that window leaves the run
``blocked`` with its lease running out: ``reconcile()`` reports it adoptable (it never
started), and the next ``overlap="forbid"`` check of the schedule ends it ``skipped``
(:func:`~chongming_task.schedule._launcher.skip_reason`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final, TypedDict, Unpack

from chongming_task.errors import DuplicateTaskId
from chongming_task.schedule._admin import ScheduleAdmin
from chongming_task.schedule._commands import ScheduleCommands
from chongming_task.schedule._control import ScheduleControl, redact_error
from chongming_task.schedule._firing import DueFiring, FiringPlan, plan_firings
from chongming_task.schedule._launcher import (
    JUDGE,
    LostListener,
    Skip,
    launch,
    settle_lost,
    skip_reason,
)
from chongming_task.schedule._registration import Registered
from chongming_task.schedule._ticks import TickReport, firing_task_id
from chongming_task.stores._base import Command, ScheduleRecord

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.run import TaskRun

__all__ = ["FiringLoop"]

log = logging.getLogger("chongming_task.schedule")

#: Firing claims are kept this long: longer than the largest ``misfire_grace`` (one
#: day), so a catch-up after downtime still meets the claims of firings that ran.
FIRING_RETENTION: Final = timedelta(days=2)
#: How often a scheduler prunes older claims (every scheduler does; it is idempotent).
PRUNE_EVERY: Final = timedelta(hours=1)
#: How often a scheduler settles the stale runs of its schedules (runs whose holder's
#: lease expired mid-run) even when no firing needs it: health counts them until then.
SETTLE_EVERY: Final = timedelta(seconds=5)
#: The trigger of ``blocked -> queued`` when an armed firing's instant has come.
RELEASE_TRIGGER: Final = "schedule:due"
#: Most firings lost to other schedulers that one scheduler watches at once.
MAX_WATCHED: Final = 10_000


def _fired_at(scheduled_at: datetime) -> Callable[[ScheduleControl], ScheduleControl]:
    """The control-record update of a firing launched at ``scheduled_at``."""
    return lambda control: control.with_fired(scheduled_at, control.next_run_at)


@dataclass(slots=True)
class _Watched:
    """A firing another scheduler claimed: its run must exist by ``check_at``.

    A claim and its run are two writes; a scheduler killed between them leaves a
    claimed firing with no run, which would be a firing missed for good. The run's
    task id is deterministic (schedule + instant), so any scheduler may create it:
    the store's unique task id keeps it to one run, whoever gets there first.
    """

    control: ScheduleControl
    due: DueFiring
    task_id: str
    check_at: datetime


class _FiringOptions(TypedDict, total=False):
    """What the loop's firings set of :func:`launch`'s options (the rest is theirs)."""

    catch_up: bool
    skip: Skip
    armed_until: datetime


@dataclass(slots=True)
class _Armed:
    """A firing claimed ahead of its scheduled time, to be started at it."""

    scheduled_at: datetime
    control: ScheduleControl
    due: DueFiring
    task_id: str
    run: TaskRun | None
    """The run created ``blocked``; ``None``: a skip applied when it was armed, so the
    firing is launched (and the skip judged again) at its instant."""


@dataclass(slots=True)
class _Pass:
    """One tick: decided at ``now``, firing everything due up to ``horizon``."""

    now: datetime
    horizon: datetime
    report: TickReport
    errors: int = 0
    armed: list[_Armed] = field(default_factory=list)


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
        self._settled_at: datetime | None = None
        self.on_lost: LostListener | None = None
        """Told of every ``-> lost`` this loop writes for a stale run (the counters)."""
        self.arming_seconds = 0.0
        """Clock seconds the last tick ahead took from waking to its firings armed."""
        self._watched: dict[str, _Watched] = {}
        """Firings other schedulers claimed whose run was not seen yet, by task id."""

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

    def tick(  # noqa: C901 (the scheduler's decision sequence, kept in one readable order)
        self, *, ahead: datetime | None = None, stop: threading.Event | None = None
    ) -> TickReport:
        """One pass: read controls, fire what is due, handle commands. Never raises.

        With ``ahead`` (a future instant, the background loop's use) firings due up
        to ``ahead`` are claimed and armed now and started at their scheduled time;
        the call returns after that. ``stop`` cuts that wait short (see the module
        docstring for what happens to the armed firings then).
        """
        with self._tick_lock:
            began = self.clock.monotonic()
            now = self.clock.now()
            horizon = now if ahead is None or ahead < now else ahead
            work = _Pass(now=now, horizon=horizon, report=TickReport(at=now))
            report = work.report
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
                work.errors += self._failed(report, "reading schedules", exc)
            plans: list[tuple[Registered, ScheduleControl, FiringPlan]] = []
            for entry in entries:
                try:
                    planned = self._plan(entry, records.get(entry.schedule.name), horizon, report)
                except Exception as exc:  # one schedule's failure must not stop the others
                    work.errors += self._failed(report, f"schedule {entry.schedule.name!r}", exc)
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
                        if self._fire(control, due, work):
                            newest = due.scheduled_at
                except Exception as exc:
                    work.errors += self._failed(report, f"schedule {entry.schedule.name!r}", exc)
                    continue
                fired.append((entry, control, plan, newest))
            if work.armed:
                self.arming_seconds = self.clock.monotonic() - began
                self._start_armed(work, stop)
            self._adopt_orphans({control.name: control for _, control, _ in plans}, work)
            for entry, control, plan, newest in fired:
                try:
                    self._settle(entry, control, plan, newest, horizon)
                except Exception as exc:
                    work.errors += self._failed(report, f"schedule {entry.schedule.name!r}", exc)
            try:
                report.commands = self.commands.poll()
            except Exception as exc:
                work.errors += self._failed(report, "schedule commands", exc)
            if self._settled_at is None or now - self._settled_at >= SETTLE_EVERY:
                self._settle_stale(self.registered(), work)
                self._settled_at = now
            if self._pruned_at is None or now - self._pruned_at >= PRUNE_EVERY:
                try:
                    self.store.prune_firings(now - FIRING_RETENTION)
                    self._pruned_at = now
                except Exception as exc:
                    work.errors += self._failed(report, "pruning firing claims", exc)
            if not work.errors:
                self.store_errors = 0
                self.last_store_error = None
            self.last_tick_at = now
            return report

    def _settle_stale(self, entries: list[Registered], work: _Pass) -> None:
        """End ``lost`` the runs of these schedules whose holder died mid-run."""
        for entry in entries:
            name = entry.schedule.name
            try:
                work.report.settled.extend(settle_lost(self.controller, name, on_lost=self.on_lost))
            except Exception as exc:
                work.errors += self._failed(work.report, f"settling runs of {name!r}", exc)

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
        # A change (pattern, pause...) takes effect from the first firing this
        # scheduler has not decided yet: everything up to ``checked_until`` (this
        # scheduler's own clock) was decided under the old definition, the firing due
        # now is decided under the new one. The change's ``updated_at`` is written by
        # whichever process made it, on its clock, and is never compared with ours: a
        # clock ahead of ours once pushed the decision point past a due firing, which
        # then vanished without being recorded as missed.
        entry.revision = control.definition_revision
        if not entry.owned:
            entry.next_at = None
            return None
        # Decided up to: the newest claimed firing (by any node) or where this
        # scheduler last looked; a schedule nobody ever fired counts from registration
        # (never from later than now: the registering process's clock may be ahead).
        seen = [t for t in (control.last_fired_at, entry.checked_until) if t is not None]
        since = max(seen) if seen else min(control.registered_at, now)
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
            report.missed_reasons[name] = missed_reason(
                plan.missed_from,
                since=since,
                now=now,
                tolerance=self.misfire_tolerance,
                misfire=control.misfire,
                caught_up=any(d.catch_up for d in plan.due),
            )
            log.warning("schedule %r: %s", name, report.missed_reasons[name])
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

    def _fire(self, control: ScheduleControl, due: DueFiring, work: _Pass) -> bool:
        """Claim ``due``; if this scheduler wins, submit or arm it. Returns whether it won."""
        report = work.report
        task_id = firing_task_id(control.name, due.scheduled_at)
        if not self.store.claim_firing(control.name, due.scheduled_at, self.owner, task_id):
            self.claims_lost += 1
            report.lost += 1
            self._watch(control, due, task_id, work.now)
            return False
        self.claims_won += 1
        if due.scheduled_at > work.now and not due.catch_up:
            # Ahead of its time: create it blocked now, start it at the instant. A
            # skip is not recorded ahead: the instant judges it (a run may end first).
            run: TaskRun | None = None
            if skip_reason(self.controller, control, on_lost=self.on_lost) is None:
                run = self._launch(
                    control, due.scheduled_at, task_id, skip=None, armed_until=due.scheduled_at
                )
            work.armed.append(_Armed(due.scheduled_at, control, due, task_id, run))
            report.fired.append(task_id)
            return True
        try:
            self._launch(control, due.scheduled_at, task_id, catch_up=due.catch_up)
        except DuplicateTaskId:
            # This scheduler was slower than half the tolerance between its claim and
            # the launch, and a watcher launched the firing: it runs once, there.
            log.warning("schedule %r: %s was launched by another scheduler", control.name, task_id)
            return True
        report.fired.append(task_id)
        return True

    def _watch(self, control: ScheduleControl, due: DueFiring, task_id: str, now: datetime) -> None:
        """Expect the run of a firing another scheduler won within half the tolerance."""
        grace = timedelta(seconds=self.misfire_tolerance / 2)
        start = max(now, due.scheduled_at)
        self._watched[task_id] = _Watched(control, due, task_id, check_at=start + grace)
        while len(self._watched) > MAX_WATCHED:
            del self._watched[next(iter(self._watched))]

    def _adopt_orphans(self, controls: dict[str, ScheduleControl], work: _Pass) -> None:
        """Launch the watched firings whose winner never created their run.

        Only while the firing is still on time (within the misfire tolerance) and its
        schedule is still fired by this scheduler (``controls``: this tick's plans);
        later, it is reported missed instead. A winner that was only slow loses the
        create to this one (or this one to it) on the unique task id: one run either way.
        """
        now = work.now
        due_now = [w for w in self._watched.values() if w.check_at <= now]
        for watched in due_now:
            del self._watched[watched.task_id]
            name = watched.control.name
            control = controls.get(name)
            try:
                if control is None or self.store.get(watched.task_id) is not None:
                    continue
                late = (now - watched.due.scheduled_at).total_seconds()
                if late > self.misfire_tolerance:
                    work.report.missed.setdefault(name, watched.due.scheduled_at)
                    work.report.missed_reasons[name] = (
                        f"the firing at {watched.due.scheduled_at.isoformat()} was claimed by "
                        "a scheduler that never launched it, and it is now past the misfire "
                        f"tolerance of {self.misfire_tolerance:g}s"
                    )
                    log.warning("schedule %r: %s", name, work.report.missed_reasons[name])
                    continue
                due = watched.due
                self._launch(control, due.scheduled_at, watched.task_id, catch_up=due.catch_up)
            except DuplicateTaskId:
                continue  # its winner (or another watcher) created it meanwhile
            except Exception as exc:
                work.errors += self._failed(work.report, f"firing {watched.task_id!r}", exc)
                continue
            log.warning(
                "schedule %r: the firing at %s was claimed by a scheduler that never "
                "launched it; launched here as %s",
                name,
                watched.due.scheduled_at.isoformat(),
                watched.task_id,
            )
            work.report.fired.append(watched.task_id)
            work.report.adopted.append(watched.task_id)
            try:
                self.admin.update(name, _fired_at(watched.due.scheduled_at))
            except Exception as exc:
                work.errors += self._failed(work.report, f"schedule {name!r}", exc)

    def _start_armed(self, work: _Pass, stop: threading.Event | None) -> None:
        """At each armed firing's instant (not before), start it; on ``stop``, skip it."""
        pending = sorted(work.armed, key=lambda armed: armed.scheduled_at)
        while pending:
            instant = pending[0].scheduled_at
            group = [armed for armed in pending if armed.scheduled_at == instant]
            pending = pending[len(group) :]
            if not self._await(instant, stop):
                for left in (*group, *pending):
                    self._retire(left, work)
                return
            failures = self.controller._internal.release_many(
                [armed.task_id for armed in group if armed.run is not None],
                reason=f"scheduled time {instant.isoformat()} reached",
                trigger=RELEASE_TRIGGER,
            )
            for task_id, exc in failures.items():
                work.errors += self._failed(work.report, f"firing {task_id!r}", exc)
            for armed in group:
                if armed.run is not None:
                    continue
                try:
                    self._launch_armed(armed)
                except Exception as exc:
                    work.errors += self._failed(work.report, f"firing {armed.task_id!r}", exc)

    def _launch_armed(self, armed: _Armed, *, skip: str | None = None) -> None:
        """Launch a firing claimed ahead without a run, judging its skip now; or, with
        ``skip``, record it skipped for that reason."""
        self._launch(
            armed.control, armed.scheduled_at, armed.task_id, skip=JUDGE if skip is None else skip
        )

    def _launch(
        self,
        control: ScheduleControl,
        scheduled_at: datetime,
        task_id: str,
        **options: Unpack[_FiringOptions],
    ) -> TaskRun:
        """Launch this scheduler's firing of ``control`` at ``scheduled_at`` (its trigger's)."""
        return launch(
            self.controller,
            control,
            trigger_type=control.kind,
            scheduled_at=scheduled_at,
            task_id=task_id,
            owner=self.owner,
            on_lost=self.on_lost,
            **options,
        )

    def _retire(self, armed: _Armed, work: _Pass) -> None:
        """The loop stopped before ``armed``'s instant: record it as not run."""
        reason = (
            f"scheduler {self.owner} closed before the scheduled time "
            f"{armed.scheduled_at.isoformat()} of this firing, which it had claimed"
        )
        try:
            if armed.run is not None:
                armed.run.skip(reason=reason)
            else:
                self._launch_armed(armed, skip=reason)
        except Exception as exc:
            work.errors += self._failed(work.report, f"firing {armed.task_id!r}", exc)

    def _await(self, instant: datetime, stop: threading.Event | None) -> bool:
        """Block until ``instant`` (True) or until ``stop`` is set before it (False).

        Never returns True before the clock has reached ``instant``.
        """
        clock = self.clock
        event = stop if stop is not None else threading.Event()
        while True:
            remaining = (instant - clock.now()).total_seconds()
            if remaining <= 0:
                return True
            if event.is_set():
                return False
            clock.wait(event, remaining)

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
            input=payload.get("input"),
            on_lost=self.on_lost,
        )
        return task_id


def missed_reason(
    oldest: datetime,
    *,
    since: datetime,
    now: datetime,
    tolerance: float,
    misfire: str,
    caught_up: bool,
) -> str:
    """Why firings from ``oldest`` on were not run on time, and what the policy did."""
    late = (now - oldest).total_seconds()
    action = (
        "the newest of them runs once as a catch-up (misfire=run_once)"
        if caught_up
        else f"they are not run (misfire={misfire})"
    )
    return (
        f"firings from {oldest.isoformat()} on were noticed {late:.0f}s late, more than "
        f"the misfire tolerance of {tolerance:g}s (nothing was decided between "
        f"{since.isoformat()} and {now.isoformat()}: the scheduler was down or stalled); "
        f"{action}"
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
