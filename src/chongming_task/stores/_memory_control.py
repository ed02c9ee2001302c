"""Commands and schedule records of the in-memory reference store.

Commands and schedule data are copied through JSON on the way in, so a caller can never
alias the stored state, and so the reference refuses exactly what the SQL stores refuse.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from chongming_task._model import JSONValue, loads
from chongming_task._redact import redact_text_fields
from chongming_task._validation import check_lookup, check_seconds
from chongming_task.core import Clock
from chongming_task.errors import StoreError
from chongming_task.stores._base import (
    ClaimLost,
    Command,
    ScheduleConflict,
    ScheduleRecord,
    TaskStore,
)
from chongming_task.stores._codec import encode_json, require_aware, to_micros
from chongming_task.stores._command_store import validate_claim
from chongming_task.stores._signal import CommandSignal

__all__ = ["MemoryControl"]


def _copy_json(value: Mapping[str, JSONValue], what: str) -> dict[str, JSONValue]:
    copied = loads(encode_json(dict(value), what), what)
    assert isinstance(copied, dict)
    return copied


def _as_submitted(command: Command) -> Command:
    """The command as a store receives it: pending, never claimed (like the SQL stores)."""
    return replace(
        command,
        status="pending",
        claimed_by=None,
        claim_token=None,
        lease_until=None,
        claims=0,
        completed_at=None,
        result=None,
    )


class _OpenLock:
    """``with store._locked():`` -- the lock, and a closed store refused under it.

    A class rather than ``@contextmanager``: every store call takes it (three times per
    task at least), and a generator per call cost more than the dict work inside.
    """

    __slots__ = ("_store",)

    def __init__(self, store: MemoryControl) -> None:
        self._store = store

    def __enter__(self) -> None:
        store = self._store
        store._lock.acquire()
        if store._closed:
            store._lock.release()
            raise StoreError("the store is closed")

    def __exit__(self, *exc: object) -> None:
        self._store._lock.release()


class MemoryControl(TaskStore):
    """State and lock of the in-memory store, with its command and schedule half."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._lock = threading.Lock()
        self._commands: dict[str, Command] = {}
        self._schedules: dict[str, ScheduleRecord] = {}
        self._firings: dict[tuple[str, int], tuple[str, str]] = {}
        self._signal = CommandSignal()
        self._closed = False
        self._open_lock = _OpenLock(self)

    def _locked(self) -> _OpenLock:
        """The store's lock, refusing to be taken once the store is closed."""
        return self._open_lock

    # ------------------------------------------------------------ commands

    def submit_command(self, command: Command) -> Command:
        stored = Command.from_dict(_copy_json(_as_submitted(command).to_dict(), "command"))
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
        actions: Collection[str] | None = None,
    ) -> list[Command]:
        wanted = validate_claim(lease, limit, actions)
        self._signal.mark_seen()
        claimed: list[Command] = []
        with self._locked():
            now = self.clock.now()
            until = now + timedelta(seconds=lease)
            eligible: list[Command] = []
            # The dict keeps submission order (a release reassigns an existing key, so
            # it keeps its place): oldest first, as the SQL stores' seq.
            for command in self._commands.values():
                if len(eligible) == limit:
                    break
                if command.target_owner not in (None, owner):
                    continue
                if kinds is not None and command.kind not in kinds:
                    continue
                if wanted is not None and command.action not in wanted:
                    continue
                expired = (
                    command.status == "claimed"
                    and command.lease_until is not None
                    and command.lease_until <= now
                )
                if command.status != "pending" and not expired:
                    continue
                eligible.append(command)
            for command in eligible:
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
        stored_result = loads(
            encode_json(redact_text_fields(result), "command result"), "command result"
        )
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
        check_seconds(lease, "lease")
        with self._locked():
            command = self._current_claim(command_id, claim_token)
            until = self.clock.now() + timedelta(seconds=lease)
            self._commands[command_id] = replace(command, lease_until=until)

    def get_command(self, command_id: str) -> Command | None:
        check_lookup(command_id, "command_id")
        with self._locked():
            return self._commands.get(command_id)

    def wait_for_commands(self, timeout: float) -> None:
        with self._locked():
            pass
        self._signal.wait(self.clock, timeout, commands_only=True)

    def wait_for_work(self, timeout: float) -> None:
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
        check_lookup(name, "schedule name")
        with self._locked():
            return self._schedules.get(name)

    def list_schedules(self) -> list[ScheduleRecord]:
        with self._locked():
            return [self._schedules[name] for name in sorted(self._schedules)]

    def delete_schedule(self, name: str) -> bool:
        check_lookup(name, "schedule name")
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
