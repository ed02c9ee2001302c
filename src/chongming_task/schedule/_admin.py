"""Operating schedules through the store alone, from any process.

:class:`ScheduleAdmin` needs nothing but a store: the CLI, a dashboard or a script in
another process pauses a schedule, overrides its pattern or asks for a manual run,
and every running scheduler sees the change within one tick. Record changes are
compare-and-set writes (retried on a lost race), so two operators acting at once
both land. A manual run needs a process that can execute the task, so it is written
as a ``kind="schedule"`` command that a scheduler claims, runs and completes with the
run's result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final

from chongming_task import _validation
from chongming_task._model import JSONValue, TaskSnapshot, ensure_json
from chongming_task._public import public
from chongming_task.core import Clock, SystemClock
from chongming_task.errors import ConfigurationError, StaleScheduleEdit, StoreError
from chongming_task.schedule._control import ScheduleControl, redact_error
from chongming_task.schedule._definition import Schedule
from chongming_task.schedule._stats import (
    RunSummary,
    SchedulerHealth,
    ScheduleStatistics,
    outage_health,
    run_summary,
    schedule_statistics,
    scheduler_health,
)
from chongming_task.schedule._ticks import firing_task_id
from chongming_task.states import OCCUPYING, TERMINAL, TaskStatus
from chongming_task.stores._base import Command, ScheduleConflict, TaskQuery, TaskStore
from chongming_task.stores._capabilities import require_commands, require_schedules
from chongming_task.stores._salvage import counts_skipping_corrupt, query_skipping_corrupt

__all__ = ["UNFINISHED", "ScheduleAdmin", "StaleScheduleEdit", "check_input"]

log = logging.getLogger("chongming_task.schedule")

#: Statuses of a run that has not finished (it blocks ``overlap="forbid"``).
UNFINISHED: Final = frozenset(set(TaskStatus) - TERMINAL)

#: Compare-and-set attempts before giving up: only a write storm on one record
#: (many schedulers counting runs of one schedule at once) needs more than a few.
_CAS_ATTEMPTS: Final = 50

#: Seconds a cancelling process holds the run requests it claims on the way.
_CANCEL_LEASE: Final = 10.0

#: Runs read for statistics: enough for stable rates, bounded for huge histories.
_STATISTICS_WINDOW: Final = 1000


@public
class ScheduleAdmin:
    """Read and change schedule control records; request manual runs.

    Args:
        store: The shared store.
        clock: Time of ``updated_at`` and command timestamps (default: the system clock).
        actor: Who acts when an operator is not named (recorded as ``updated_by``).
    """

    def __init__(
        self, store: TaskStore, *, clock: Clock | None = None, actor: str | None = None
    ) -> None:
        require_schedules(store, "schedules (Scheduler, ScheduleAdmin)")
        require_commands(store, "schedules (Scheduler, ScheduleAdmin: their run commands)")
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.actor = actor

    # -- reading ------------------------------------------------------------------

    def find(self, name: str) -> ScheduleControl | None:
        record = self.store.get_schedule(name)
        if record is None:
            return None
        return ScheduleControl.from_dict(record.name, record.data, record.revision)

    def get(self, name: str) -> ScheduleControl:
        """The record of ``name``.

        Raises:
            ConfigurationError: no schedule of that name exists (the message lists them).
        """
        control = self.find(name)
        if control is None:
            known = ", ".join(c.name for c in self.schedules()) or "none"
            raise ConfigurationError(f"no schedule named {name!r}; known schedules: {known}")
        return control

    def schedules(self) -> list[ScheduleControl]:
        """Every schedule record, ordered by name."""
        return [
            ScheduleControl.from_dict(r.name, r.data, r.revision)
            for r in self.store.list_schedules()
        ]

    # -- writing (compare-and-set) ----------------------------------------------------

    def update(
        self, name: str, change: Callable[[ScheduleControl], ScheduleControl]
    ) -> ScheduleControl:
        """Apply ``change`` to the current record and store it, retrying lost races.

        Raises:
            ConfigurationError: no such schedule, or ``change`` refused the operation.
            StoreError: the race was lost too often, or the store failed.
        """
        for _ in range(_CAS_ATTEMPTS):
            current = self.get(name)
            changed = change(current)
            if changed == current:
                return current
            try:
                record = self.store.put_schedule(
                    name, changed.to_dict(), expect_revision=current.revision
                )
            except ScheduleConflict:
                continue
            return ScheduleControl.from_dict(record.name, record.data, record.revision)
        raise StoreError(f"schedule {name!r} changed {_CAS_ATTEMPTS} times while updating it")

    def register(self, schedule: Schedule, *, actor: str | None = None) -> ScheduleControl:
        """Insert the record of ``schedule``, or merge it into the existing one.

        The merge keeps operator overrides (pattern, timezone, pause), as
        :meth:`ScheduleControl.register` describes.
        """
        who = actor or self.actor
        for _ in range(_CAS_ATTEMPTS):
            existing = self.find(schedule.name)
            now = self.clock.now()
            merged = ScheduleControl.register(schedule, now=now, actor=who, existing=existing)
            if existing is not None and merged == existing:
                return existing
            try:
                record = self.store.put_schedule(
                    schedule.name,
                    merged.to_dict(),
                    expect_revision=None if existing is None else existing.revision,
                )
            except ScheduleConflict:
                continue
            return ScheduleControl.from_dict(record.name, record.data, record.revision)
        raise StoreError(f"schedule {schedule.name!r} kept changing while registering it")

    def delete(self, name: str) -> bool:
        """Remove the record (its runs and firing claims stay)."""
        return self.store.delete_schedule(name)

    def pause(
        self, name: str, *, operator: str | None = None, reason: str | None = None
    ) -> ScheduleControl:
        """Pause: every firing is recorded as a skipped run until :meth:`resume`."""
        now = self.clock.now()
        who = operator or self.actor
        return self.update(name, lambda c: c.with_paused(actor=who, now=now, reason=reason))

    def resume(
        self, name: str, *, operator: str | None = None, reason: str | None = None
    ) -> ScheduleControl:
        now = self.clock.now()
        who = operator or self.actor
        return self.update(name, lambda c: c.with_resumed(actor=who, now=now, reason=reason))

    def set_pattern(
        self,
        name: str,
        pattern: str,
        *,
        timezone: str | None = None,
        operator: str | None = None,
        expect_definition_revision: int | None = None,
    ) -> ScheduleControl:
        """Override the pattern (and timezone); it survives re-registration.

        ``expect_definition_revision`` is the ``definition_revision`` the edit was
        based on (what the operator saw): if the record's definition or operator state
        changed since, the edit is refused and nothing is written. Counter updates of
        running schedulers do not move that revision, so they never refuse an edit.

        Raises:
            ConfigurationError: the pattern or timezone is invalid (nothing changes).
            StaleScheduleEdit: ``expect_definition_revision`` is no longer current.
        """
        now = self.clock.now()
        who = operator or self.actor
        return self.update(
            name,
            lambda c: _expecting(c, expect_definition_revision).with_pattern(
                pattern, timezone=timezone, actor=who, now=now
            ),
        )

    def reset_pattern(
        self,
        name: str,
        *,
        operator: str | None = None,
        expect_definition_revision: int | None = None,
    ) -> ScheduleControl:
        """Drop the override: back to the pattern and timezone from code.

        Raises:
            StaleScheduleEdit: ``expect_definition_revision`` is no longer current
                (see :meth:`set_pattern`).
        """
        now = self.clock.now()
        who = operator or self.actor
        return self.update(
            name,
            lambda c: _expecting(c, expect_definition_revision).with_default_pattern(
                actor=who, now=now
            ),
        )

    # -- manual runs --------------------------------------------------------------------

    def request_run(
        self,
        name: str,
        *,
        operator: str | None = None,
        reason: str | None = None,
        correlation_id: str | None = None,
        input: Mapping[str, JSONValue] | None = None,
    ) -> Command:
        """Ask a scheduler to run ``name`` now; returns the command to follow.

        A scheduler that has the schedule claims the command, runs it as an ordinary
        task and completes the command with ``{"task_id", "status", "error", ...}``.
        ``input`` (a JSON object) reaches the run as ``metadata["input"]`` and, if the
        task declares a parameter ``input``, as that argument
        (:func:`~chongming_task.schedule._registration.takes_input`).

        Raises:
            ConfigurationError: no such schedule, its manual runs are disabled, or
                ``input`` is not a JSON object.
        """
        control = self.get(name)
        if not control.manual_run_enabled:
            raise ConfigurationError(manual_runs_disabled(name))
        payload: dict[str, JSONValue] = {}
        if input is not None:
            payload["input"] = check_input(input)
        for key, value in (
            ("operator", operator),
            ("reason", reason),
            ("correlation_id", correlation_id),
        ):
            if value is not None:
                payload[key] = value
        command = Command.new(
            kind="schedule",
            target=name,
            action="run",
            issued_by=operator or self.actor or "operator",
            issued_at=self.clock.now(),
            payload=payload,
        )
        return self.store.submit_command(command)

    def cancel_run(
        self, command_id: str, *, operator: str | None = None, reason: str | None = None
    ) -> Command:
        """Cancel a manual-run request that no scheduler has claimed yet.

        The request is claimed here (the store's claim is the one atomic step a
        scheduler uses too, so exactly one of them gets it) and completed with
        ``{"applied": False, "cancelled": True, ...}``: no scheduler will run it. Other
        run requests claimed on the way are handed back at once, keeping their place.

        Raises:
            ConfigurationError: no such command, not a manual-run request, already
                completed, or a scheduler has claimed it (its run may have started:
                stop that task instead).
        """
        command = self.store.get_command(command_id)
        if command is None or command.kind != "schedule" or command.action != "run":
            raise ConfigurationError(f"no manual-run request {command_id!r} in the store")
        if command.status == "completed":
            raise ConfigurationError(
                f"manual-run request {command_id!r} is already completed: {command.result!r}"
            )
        claimer = f"cancel:{operator or self.actor or 'operator'}"
        held: list[Command] = []
        found: Command | None = None
        try:
            while found is None:
                batch = self.store.claim_commands(
                    claimer, lease=_CANCEL_LEASE, limit=50, kinds=("schedule",), actions=("run",)
                )
                if not batch:
                    break
                for claimed in batch:
                    if claimed.command_id == command_id:
                        found = claimed
                    else:
                        held.append(claimed)
        finally:
            for other in held:
                try:
                    self.store.release_command(other.command_id, other.claim_token or "")
                except Exception as exc:  # its short lease runs out instead
                    log.warning("run request %s: not handed back: %s", other.command_id, exc)
        if found is None:
            current = self.store.get_command(command_id)
            holder = current.claimed_by if current is not None else None
            raise ConfigurationError(
                f"manual-run request {command_id!r} was claimed by {holder or 'a scheduler'} "
                "and cannot be cancelled; stop its run instead (`chongming-task stop "
                "TASK_ID`)"
            )
        task_id = firing_task_id(command.target, None, manual=command_id[:16])
        if self.store.get(task_id) is not None:  # a claimant died after starting it
            self.store.release_command(command_id, found.claim_token or "")
            raise ConfigurationError(
                f"manual-run request {command_id!r} already started run {task_id!r}; stop "
                "that run instead"
            )
        who = operator or self.actor or "operator"
        result: dict[str, JSONValue] = {
            "applied": False,
            "cancelled": True,
            "cancelled_by": who,
            "cancelled_at": self.clock.now().isoformat(),
            "error": f"cancelled by {who} before any scheduler claimed it"
            + (f": {reason}" if reason else ""),
        }
        self.store.complete_command(command_id, found.claim_token or "", result)
        done = self.store.get_command(command_id)
        assert done is not None
        return done

    def wait_for_command(
        self, command_id: str, *, timeout: float, interval: float = 0.1
    ) -> Command:
        """Wait until the command is completed; returns it with its ``result``.

        Raises:
            TimeoutError: it was not completed within ``timeout`` seconds.
            ConfigurationError: no such command.
        """
        _validation.check_lookup(command_id, "command_id")
        _validation.check_seconds(timeout, "timeout", allow_zero=True)
        _validation.check_seconds(interval, "interval")
        deadline = self.clock.monotonic() + timeout
        while True:
            command = self.store.get_command(command_id)
            if command is None:
                raise ConfigurationError(f"no command {command_id!r} in the store")
            if command.status == "completed":
                return command
            if self.clock.monotonic() >= deadline:
                raise TimeoutError(
                    f"command {command_id!r} ({command.action} {command.target}) is still "
                    f"{command.status} after {timeout}s; is a scheduler running for it?"
                )
            self.clock.sleep(interval)

    # -- views ----------------------------------------------------------------------

    def runs(self, name: str, *, limit: int | None = None) -> list[TaskSnapshot]:
        """Snapshots of the runs of ``name``, newest first."""
        query = TaskQuery(metadata_eq={"schedule": name}, order="-created", limit=limit)
        # A corrupt row is skipped with a warning naming it: it never hides the others.
        return query_skipping_corrupt(lambda: self.store.query(query))[0]

    def history(self, name: str, *, limit: int = 50) -> list[RunSummary]:
        """The last ``limit`` runs of ``name``, newest first."""
        return [run_summary(s) for s in self.runs(name, limit=limit)]

    def statistics(self, name: str) -> ScheduleStatistics:
        """Run count, errors, success rate, mean duration, last 10 runs, next run."""
        control = self.get(name)
        snapshots = self.runs(name, limit=_STATISTICS_WINDOW)
        return schedule_statistics(name, snapshots, next_run_at=control.next_run_at)

    def unfinished(self, name: str) -> int:
        scope = TaskQuery(metadata_eq={"schedule": name})
        counts, _ = counts_skipping_corrupt(
            lambda: self.store.count_by_status(scope), self.store.query, scope
        )
        return sum(n for status, n in counts.items() if status in UNFINISHED)

    def stale_runs(self, name: str) -> list[str]:
        """Runs of ``name`` that occupy a slot although their holder's lease expired."""
        query = TaskQuery(
            metadata_eq={"schedule": name},
            statuses=OCCUPYING,
            lease_expired_by=self.clock.now(),
        )
        return [task_id for task_id, _, _ in self.store.query_heads(query)]

    def health(
        self,
        *,
        late_after: float = 60.0,
        last_tick_at: datetime | None = None,
        store_errors: int = 0,
        last_store_error: str | None = None,
        held: Callable[[str], bool] | None = None,
    ) -> SchedulerHealth:
        """Health from the records and the runs in the store (no scheduler needed).

        Never raises for a store failure: the verdict is then ``unhealthy`` with the
        error (``SchedulerHealth.error``). ``held`` tells runs that the calling process
        supervises itself (never stale) from the others.
        """
        _validation.check_seconds(late_after, "late_after", allow_zero=True)
        try:
            controls = self.schedules()
            running = {c.name: self.unfinished(c.name) for c in controls}
            stale = {
                c.name: [t for t in self.stale_runs(c.name) if held is None or not held(t)]
                for c in controls
            }
        except Exception as exc:
            return outage_health(
                redact_error(f"{type(exc).__name__}: {exc}") or type(exc).__name__,
                now=self.clock.now(),
                last_tick_at=last_tick_at,
                store_errors=store_errors,
            )
        return scheduler_health(
            controls,
            now=self.clock.now(),
            running=running,
            late_after=late_after,
            last_tick_at=last_tick_at,
            store_errors=store_errors,
            last_store_error=last_store_error,
            stale=stale,
        )


def _expecting(control: ScheduleControl, expected: int | None) -> ScheduleControl:
    """``control`` itself, if an edit based on revision ``expected`` may apply to it."""
    if expected is not None:
        _validation.check_int(expected, "expect_definition_revision", minimum=0)
        if control.definition_revision != expected:
            raise StaleScheduleEdit(
                control.name,
                expected,
                control.definition_revision,
                updated_by=control.updated_by,
                updated_at=control.updated_at,
            )
    return control


def check_input(value: object) -> dict[str, JSONValue]:
    """A manual dispatch's input payload: a JSON object.

    Raises:
        ConfigurationError: anything else.
    """
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f'a manual run\'s input must be a JSON object such as {{"month": "2026-01"}}, '
            f"got {value!r}"
        )
    data = dict(value)
    ensure_json(data, "manual run input")
    _validation.check_utf8(json.dumps(data, ensure_ascii=False), "manual run input")
    return data


def manual_runs_disabled(name: str) -> str:
    return (
        f"manual runs are disabled for schedule {name!r} (manual_run_enabled=False in its "
        "definition); enable them in code to run it by hand"
    )
