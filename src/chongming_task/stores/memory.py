"""The in-process reference store: the contract's semantics with nothing in the way.

Everything sits in dictionaries behind one lock, so every method is trivially atomic
and linearisable; the SQL stores are checked against the same contract suite. Task
snapshots are kept as the frozen objects they are (no encoding on the hot path: the
controller writes once per transition), commands and schedule data are copied through
JSON so a caller can never alias the stored state. Treat returned objects as read-only.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from chongming_task.core.clock import Clock
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.model import JSONValue, Progress, TaskSnapshot, Transition, loads
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores.base import (
    ClaimLost,
    Command,
    ScheduleConflict,
    ScheduleRecord,
    TaskNotFound,
    TaskQuery,
    TaskStore,
)
from chongming_task.stores.codec import check_outcome, encode_json, require_aware, to_micros
from chongming_task.stores.signal import CommandSignal

__all__ = ["InMemoryTaskStore"]


@dataclass(slots=True)
class _Row:
    seq: int
    snapshot: TaskSnapshot


def _sort_key(order: str) -> tuple[Any, bool]:
    if order in ("created", "-created"):
        return (lambda row: (row.snapshot.created_at, row.seq)), order.startswith("-")
    if order in ("updated", "-updated"):
        return (lambda row: (row.snapshot.updated_at, row.seq)), order.startswith("-")
    return (lambda row: (-row.snapshot.priority, row.snapshot.created_at, row.seq)), False


def _copy_json(value: Mapping[str, JSONValue], what: str) -> dict[str, JSONValue]:
    copied = loads(encode_json(dict(value), what), what)
    assert isinstance(copied, dict)
    return copied


def _validate_lease(lease: float) -> None:
    if isinstance(lease, bool) or not isinstance(lease, int | float) or lease <= 0:
        raise ConfigurationError(f"lease must be a positive number of seconds, got {lease!r}")


class InMemoryTaskStore(TaskStore):
    """Dictionaries behind one lock: for single-process use, unit tests and as the reference."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._tasks: dict[str, _Row] = {}
        self._history: dict[str, dict[int, Transition]] = {}
        self._commands: dict[str, Command] = {}
        self._schedules: dict[str, ScheduleRecord] = {}
        self._firings: dict[tuple[str, int], tuple[str, str]] = {}
        self._signal = CommandSignal()
        self._closed = False

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            yield

    # ------------------------------------------------------------ snapshots

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        check_outcome(snapshot.outcome, snapshot.task_id)
        with self._locked():
            if snapshot.task_id in self._tasks:
                raise ConfigurationError(
                    f"task id {snapshot.task_id!r} already exists in the store; "
                    "choose another task_id or load the existing task"
                )
            self._tasks[snapshot.task_id] = _Row(next(self._seq), snapshot)
            self._append_locked(transitions)

    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        check_outcome(snapshot.outcome, snapshot.task_id)
        with self._locked():
            row = self._tasks.get(snapshot.task_id)
            if row is None:
                raise TaskNotFound(snapshot.task_id)
            if row.snapshot.status_version != expect_version:
                raise ConcurrencyConflict(
                    snapshot.task_id, expect_version, row.snapshot.status_version
                )
            row.snapshot = snapshot
            self._append_locked(transitions)

    def get(self, task_id: str) -> TaskSnapshot | None:
        with self._locked():
            row = self._tasks.get(task_id)
            return None if row is None else row.snapshot

    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        with self._locked():
            rows = [row for row in self._tasks.values() if query.matches(row.snapshot)]
        key, reverse = _sort_key(query.order)
        rows.sort(key=key, reverse=reverse)
        if query.limit is not None:
            rows = rows[: query.limit]
        return [row.snapshot for row in rows]

    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        counts: dict[TaskStatus, int] = {}
        with self._locked():
            for row in self._tasks.values():
                if query is None or query.matches(row.snapshot):
                    status = row.snapshot.status
                    counts[status] = counts.get(status, 0) + 1
        return counts

    def count_by_bucket(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        with self._locked():
            for row in self._tasks.values():
                bucket = row.snapshot.bucket
                if bucket is not None:
                    counts[bucket] = counts.get(bucket, 0) + 1
        return counts

    def prune(self, keep_terminal: int) -> int:
        if keep_terminal < 0:
            raise ConfigurationError(f"keep_terminal must be >= 0, got {keep_terminal!r}")
        with self._locked():
            terminal = [row for row in self._tasks.values() if row.snapshot.status in TERMINAL]
            terminal.sort(key=lambda row: (row.snapshot.updated_at, row.seq), reverse=True)
            doomed = terminal[keep_terminal:]
            for row in doomed:
                del self._tasks[row.snapshot.task_id]
                self._history.pop(row.snapshot.task_id, None)
            return len(doomed)

    # ------------------------------------------------------------ audit trail

    def append(self, transition: Transition) -> None:
        with self._locked():
            self._append_locked((transition,))

    def _append_locked(self, transitions: Sequence[Transition]) -> None:
        for transition in transitions:
            trail = self._history.setdefault(transition.task_id, {})
            trail.setdefault(transition.version, transition)

    def history(self, task_id: str) -> list[Transition]:
        with self._locked():
            trail = self._history.get(task_id, {})
            return [trail[version] for version in sorted(trail)]

    # ------------------------------------------------------------ side channel

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
        pid: int | None = None,
    ) -> bool:
        require_aware(heartbeat_at, "heartbeat_at")
        require_aware(lease_until, "lease_until")
        changes: dict[str, Any] = {}
        if progress is not None:
            changes["progress"] = progress
        if heartbeat_at is not None:
            changes["last_heartbeat_at"] = heartbeat_at
        if lease_owner is not None:
            changes["lease_owner"] = lease_owner
        if lease_until is not None:
            changes["lease_until"] = lease_until
        if pid is not None:
            changes["pid"] = pid
        with self._locked():
            row = self._tasks.get(task_id)
            if row is None:
                return False
            if changes:
                row.snapshot = replace(row.snapshot, **changes)
            return True

    def renew_leases(self, owner: str, task_ids: Collection[str], lease_until: datetime) -> int:
        require_aware(lease_until, "lease_until")
        renewed = 0
        with self._locked():
            for task_id in set(task_ids):
                row = self._tasks.get(task_id)
                if row is not None and row.snapshot.lease_owner == owner:
                    row.snapshot = replace(row.snapshot, lease_until=lease_until)
                    renewed += 1
        return renewed

    # ------------------------------------------------------------ commands

    def submit_command(self, command: Command) -> Command:
        stored = Command.from_dict(
            _copy_json(replace(command, status="pending").to_dict(), "command")
        )
        with self._locked():
            existing = self._commands.get(command.command_id)
            if existing is not None:
                return existing
            self._commands[command.command_id] = stored
        self._signal.notify()
        return stored

    def claim_commands(
        self,
        owner: str,
        *,
        lease: float,
        limit: int = 10,
        kinds: Collection[str] | None = None,
    ) -> list[Command]:
        _validate_lease(lease)
        if isinstance(limit, bool) or limit < 1:
            raise ConfigurationError(f"limit must be >= 1, got {limit!r}")
        self._signal.mark_seen()
        claimed: list[Command] = []
        with self._locked():
            now = self.clock.now()
            until = now + timedelta(seconds=lease)
            for command in self._commands.values():
                if len(claimed) >= limit:
                    break
                if command.target_owner not in (None, owner):
                    continue
                if kinds is not None and command.kind not in kinds:
                    continue
                expired = (
                    command.status == "claimed"
                    and command.lease_until is not None
                    and command.lease_until <= now
                )
                if command.status != "pending" and not expired:
                    continue
                updated = replace(
                    command,
                    status="claimed",
                    claimed_by=owner,
                    claim_token=uuid.uuid4().hex,
                    lease_until=until,
                    claims=command.claims + 1,
                )
                self._commands[command.command_id] = updated
                claimed.append(updated)
        return claimed

    def _current_claim(self, command_id: str, claim_token: str) -> Command:
        command = self._commands.get(command_id)
        if command is None:
            raise StoreError(f"command {command_id!r} does not exist")
        if command.status != "claimed" or command.claim_token != claim_token:
            detail = (
                "it is already completed"
                if command.status == "completed"
                else f"it is {command.status}, claimed by {command.claimed_by!r}"
            )
            raise ClaimLost(command_id, claim_token, detail)
        return command

    def complete_command(self, command_id: str, claim_token: str, result: JSONValue = None) -> None:
        stored_result = loads(encode_json(result, "command result"), "command result")
        with self._locked():
            command = self._current_claim(command_id, claim_token)
            self._commands[command_id] = replace(
                command,
                status="completed",
                completed_at=self.clock.now(),
                lease_until=None,
                result=stored_result,
            )

    def release_command(self, command_id: str, claim_token: str) -> None:
        with self._locked():
            command = self._current_claim(command_id, claim_token)
            self._commands[command_id] = replace(
                command, status="pending", claimed_by=None, claim_token=None, lease_until=None
            )
        self._signal.notify()

    def extend_command(self, command_id: str, claim_token: str, lease: float) -> None:
        _validate_lease(lease)
        with self._locked():
            command = self._current_claim(command_id, claim_token)
            until = self.clock.now() + timedelta(seconds=lease)
            self._commands[command_id] = replace(command, lease_until=until)

    def get_command(self, command_id: str) -> Command | None:
        with self._locked():
            return self._commands.get(command_id)

    def wait_for_commands(self, timeout: float) -> None:
        with self._locked():
            pass
        self._signal.wait(self.clock, timeout)

    # ------------------------------------------------------------ schedules

    def put_schedule(
        self, name: str, data: Mapping[str, JSONValue], *, expect_revision: int | None
    ) -> ScheduleRecord:
        copied = _copy_json(data, f"data of schedule {name!r}")
        with self._locked():
            current = self._schedules.get(name)
            if expect_revision is None:
                if current is not None:
                    raise ScheduleConflict(name, None, current.revision)
                revision = 1
            else:
                if current is None or current.revision != expect_revision:
                    raise ScheduleConflict(
                        name, expect_revision, None if current is None else current.revision
                    )
                revision = current.revision + 1
            record = ScheduleRecord(
                name=name, data=copied, revision=revision, updated_at=self.clock.now()
            )
            self._schedules[name] = record
            return record

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        with self._locked():
            return self._schedules.get(name)

    def list_schedules(self) -> list[ScheduleRecord]:
        with self._locked():
            return [self._schedules[name] for name in sorted(self._schedules)]

    def delete_schedule(self, name: str) -> bool:
        with self._locked():
            return self._schedules.pop(name, None) is not None

    def claim_firing(self, schedule: str, scheduled_at: datetime, owner: str, task_id: str) -> bool:
        require_aware(scheduled_at, "scheduled_at")
        key = (schedule, to_micros(scheduled_at))
        with self._locked():
            if key in self._firings:
                return False
            self._firings[key] = (owner, task_id)
            return True

    def prune_firings(self, before: datetime) -> int:
        require_aware(before, "before")
        cutoff = to_micros(before)
        with self._locked():
            doomed = [key for key in self._firings if key[1] < cutoff]
            for key in doomed:
                del self._firings[key]
            return len(doomed)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._signal.close()

    def __repr__(self) -> str:
        return f"InMemoryTaskStore(tasks={len(self._tasks)}, closed={self._closed})"
