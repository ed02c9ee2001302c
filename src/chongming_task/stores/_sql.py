"""The SQL store: every ``TaskStore`` method once, for SQLite and PostgreSQL alike.

A dialect subclass supplies the SQL (``sql/<dialect>.sql``), a way to run a function
with a cursor (``_run``: connection handling, transactions, error mapping), and how
instants and lists are bound. Everything else, including the exact semantics the
contract suite checks, lives here once.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

from chongming_task.core.clock import Clock
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.model import JSONValue, Progress, TaskSnapshot, Transition, dumps, loads
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores import _sqlrows as rows
from chongming_task.stores._sqlfile import load_sections
from chongming_task.stores.base import (
    ClaimLost,
    Command,
    ScheduleConflict,
    ScheduleRecord,
    TaskNotFound,
    TaskQuery,
    TaskStore,
)
from chongming_task.stores.codec import (
    decode_transition,
    encode_json,
    encode_transition,
    require_aware,
)
from chongming_task.stores.signal import CommandSignal

__all__ = ["SCHEMA_VERSION", "Cursor", "SqlTaskStore"]

#: The schema this code reads and writes. 1: tasks, history, commands. 2: schedules and
#: firing claims. Older databases are migrated on open; newer ones are refused.
SCHEMA_VERSION = 2

T = TypeVar("T")
_TERMINAL_VALUES = sorted(status.value for status in TERMINAL)


class Cursor(Protocol):
    """The DB-API subset both drivers provide."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Mapping[str, Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, params: Sequence[Mapping[str, Any]], /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


def _validate_lease(lease: float) -> None:
    if isinstance(lease, bool) or not isinstance(lease, int | float) or lease <= 0:
        raise ConfigurationError(f"lease must be a positive number of seconds, got {lease!r}")


class SqlTaskStore(TaskStore):
    """Shared implementation; subclasses are the dialects."""

    dialect: ClassVar[str]

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._sql = load_sections(self.dialect)
        self._signal = CommandSignal()
        self._closed = False

    # ------------------------------------------------------------ dialect hooks

    @abstractmethod
    def _run(self, fn: Callable[[Cursor], T], *, write: bool, atomic: bool = False) -> T:
        """Call ``fn`` with a cursor; driver errors become ``StoreError``.

        ``write`` selects the write path; ``atomic`` wraps ``fn`` in one transaction
        (rolled back if it raises). Without it each statement commits on its own.
        """

    @abstractmethod
    def _instant(self, value: datetime) -> Any:
        """Bind an instant column (ordering/expiry)."""

    @abstractmethod
    def _instant_out(self, raw: Any) -> datetime:
        """Read an instant column back as an aware datetime."""

    @abstractmethod
    def _array(self, values: Sequence[Any]) -> Any:
        """Bind a list parameter (``json_each`` text or a native array)."""

    @abstractmethod
    def _is_unique_violation(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the driver's unique-constraint error."""

    def _write_task(
        self, cur: Cursor, statement: str, params: dict[str, Any], history: Sequence[Transition]
    ) -> int:
        """Insert or update a task row and its transitions; returns rows affected.

        The default runs two statements (the caller holds a transaction); PostgreSQL
        overrides it with one data-modifying CTE.
        """
        cur.execute(self._sql[statement], params)
        affected = cur.rowcount
        if affected and history:
            cur.executemany(
                self._sql["insert_transition"],
                [
                    {"task_id": t.task_id, "version": t.version, "doc": encode_transition(t)}
                    for t in history
                ],
            )
        return affected

    def _before_claim(self) -> None:
        """Remember what "nothing new" looks like before claiming (see ``wait_for_commands``)."""
        self._signal.mark_seen()

    def _poll_commands(self) -> Callable[[], bool] | None:
        """A cross-process check for new commands, polled while waiting (None: no polling)."""
        return None

    @abstractmethod
    def _close_resources(self) -> None:
        """Close connections and threads."""

    # ------------------------------------------------------------ snapshots

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        params = rows.task_params(snapshot, self._instant, self._array)
        params["transitions"] = dumps([t.to_dict() for t in transitions])

        def insert(cur: Cursor) -> None:
            try:
                self._write_task(cur, "insert_task", params, transitions)
            except Exception as exc:
                if self._is_unique_violation(exc):
                    raise ConfigurationError(
                        f"task id {snapshot.task_id!r} already exists in the store; "
                        "choose another task_id or load the existing task"
                    ) from exc
                raise

        self._run(insert, write=True, atomic=bool(transitions))

    def save(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        params = rows.task_params(snapshot, self._instant, self._array)
        params["expect_version"] = expect_version
        params["transitions"] = dumps([t.to_dict() for t in transitions])

        def update(cur: Cursor) -> None:
            if self._write_task(cur, "update_task", params, transitions):
                return
            found = cur.execute(self._sql["task_version"], params).fetchone()
            if found is None:
                raise TaskNotFound(snapshot.task_id)
            raise ConcurrencyConflict(snapshot.task_id, expect_version, int(found[0]))

        self._run(update, write=True, atomic=bool(transitions))

    def get(self, task_id: str) -> TaskSnapshot | None:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_task"], {"task_id": task_id}).fetchone(),
            write=False,
        )
        return None if found is None else rows.decode_task(found)

    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        parts = rows.build_filters(query, self._sql, self._array)
        if parts.empty or query.limit == 0:
            return []
        order = rows.ORDER_SQL[query.order]
        statement = f"{self._sql['select_tasks']}{parts.where} ORDER BY {order}"
        if query.limit is not None:
            statement = f"{statement} {self._sql['limit']}"
            parts.params["limit"] = query.limit
        found = self._run(lambda cur: cur.execute(statement, parts.params).fetchall(), write=False)
        return [rows.decode_task(row) for row in found]

    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        parts = rows.build_filters(query, self._sql, self._array)
        if parts.empty:
            return {}
        statement = f"{self._sql['count_tasks']}{parts.where} GROUP BY t.status"
        found = self._run(lambda cur: cur.execute(statement, parts.params).fetchall(), write=False)
        return {rows.decode_status(status): int(count) for status, count in found}

    def count_by_bucket(self) -> dict[int, int]:
        found = self._run(
            lambda cur: cur.execute(self._sql["count_buckets"], {}).fetchall(), write=False
        )
        return {int(bucket): int(count) for bucket, count in found}

    def prune(self, keep_terminal: int) -> int:
        if isinstance(keep_terminal, bool) or keep_terminal < 0:
            raise ConfigurationError(f"keep_terminal must be >= 0, got {keep_terminal!r}")
        params = {"terminal": self._array(_TERMINAL_VALUES), "keep": keep_terminal}

        def delete(cur: Cursor) -> int:
            cur.execute(self._sql["prune_history"], params)
            cur.execute(self._sql["prune_tasks"], params)
            return int(cur.rowcount)

        return self._run(delete, write=True, atomic=True)

    # ------------------------------------------------------------ audit trail

    def append(self, transition: Transition) -> None:
        params = {
            "task_id": transition.task_id,
            "version": transition.version,
            "doc": encode_transition(transition),
        }
        self._run(lambda cur: cur.execute(self._sql["insert_transition"], params), write=True)

    def history(self, task_id: str) -> list[Transition]:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_history"], {"task_id": task_id}).fetchall(),
            write=False,
        )
        return [decode_transition(row[0]) for row in found]

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
        params = {
            "task_id": task_id,
            "progress": None if progress is None else dumps(progress.to_dict()),
            "heartbeat_at": None if heartbeat_at is None else heartbeat_at.isoformat(),
            "lease_owner": lease_owner,
            "lease_until": None if lease_until is None else lease_until.isoformat(),
            "pid": pid,
        }
        if all(value is None for key, value in params.items() if key != "task_id"):
            return self.get(task_id) is not None

        def touch(cur: Cursor) -> bool:
            cur.execute(self._sql["touch_task"], params)
            return int(cur.rowcount) > 0

        return self._run(touch, write=True)

    def renew_leases(self, owner: str, task_ids: Collection[str], lease_until: datetime) -> int:
        require_aware(lease_until, "lease_until")
        ids = sorted(set(task_ids))
        if not ids:
            return 0
        params = {
            "owner": owner,
            "task_ids": self._array(ids),
            "lease_until": lease_until.isoformat(),
        }

        def renew(cur: Cursor) -> int:
            cur.execute(self._sql["renew_leases"], params)
            return int(cur.rowcount)

        return self._run(renew, write=True)

    # ------------------------------------------------------------ commands

    def submit_command(self, command: Command) -> Command:
        doc = encode_json(
            {
                "payload": dict(command.payload),
                "issued_by": command.issued_by,
                "issued_at": command.issued_at.isoformat(),
            },
            "command payload",
        )
        params = {
            "command_id": command.command_id,
            "kind": command.kind,
            "target": command.target,
            "action": command.action,
            "target_owner": command.target_owner,
            "doc": doc,
            "channel": self._channel(),
        }

        def insert(cur: Cursor) -> Any:
            cur.execute(self._sql["insert_command"], params)
            return cur.execute(self._sql["select_command"], params).fetchone()

        stored = rows.decode_command(self._run(insert, write=True), self._instant_out)
        self._signal.notify()
        return stored

    def _channel(self) -> str:
        """The notification channel (PostgreSQL); unused elsewhere."""
        return ""

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
        self._check_open()
        self._before_claim()
        now = self.clock.now()
        params = {
            "owner": owner,
            "now": self._instant(now),
            "lease_until": self._instant(now + timedelta(seconds=lease)),
            "limit": limit,
            "kinds": None if kinds is None else self._array(sorted(kinds)),
        }
        found = self._run(
            lambda cur: cur.execute(self._sql["claim_commands"], params).fetchall(), write=True
        )
        found.sort(key=lambda row: int(row[0]))
        return [rows.decode_command(row[1:], self._instant_out) for row in found]

    def complete_command(self, command_id: str, claim_token: str, result: JSONValue = None) -> None:
        params = {
            "command_id": command_id,
            "claim_token": claim_token,
            "now": self._instant(self.clock.now()),
            "result": encode_json(result, "command result"),
        }
        self._settle_claim_or_missing("complete_command", params)

    def release_command(self, command_id: str, claim_token: str) -> None:
        params = {"command_id": command_id, "claim_token": claim_token, "channel": self._channel()}
        self._settle_claim_or_missing("release_command", params)
        self._signal.notify()

    def extend_command(self, command_id: str, claim_token: str, lease: float) -> None:
        _validate_lease(lease)
        until = self.clock.now() + timedelta(seconds=lease)
        params = {
            "command_id": command_id,
            "claim_token": claim_token,
            "lease_until": self._instant(until),
        }
        self._settle_claim_or_missing("extend_command", params)

    def _settle_claim_or_missing(self, statement: str, params: dict[str, Any]) -> None:
        """Run a fenced update; on no match, say why (missing command or lost claim)."""

        def settle(cur: Cursor) -> tuple[bool, Any]:
            cur.execute(self._sql[statement], params)
            if cur.rowcount > 0:
                return True, None
            return False, cur.execute(self._sql["select_command"], params).fetchone()

        done, found = self._run(settle, write=True)
        if done:
            return
        if found is None:
            raise StoreError(f"command {params['command_id']!r} does not exist")
        current = rows.decode_command(found, self._instant_out)
        if current.status == "completed":
            detail = "it is already completed"
        else:
            detail = f"it is {current.status}, claimed by {current.claimed_by!r}"
        raise ClaimLost(current.command_id, params["claim_token"], detail)

    def get_command(self, command_id: str) -> Command | None:
        found = self._run(
            lambda cur: cur.execute(
                self._sql["select_command"], {"command_id": command_id}
            ).fetchone(),
            write=False,
        )
        return None if found is None else rows.decode_command(found, self._instant_out)

    def wait_for_commands(self, timeout: float) -> None:
        self._check_open()
        self._signal.wait(self.clock, timeout, poll=self._poll_commands())

    # ------------------------------------------------------------ schedules

    def put_schedule(
        self, name: str, data: Mapping[str, JSONValue], *, expect_revision: int | None
    ) -> ScheduleRecord:
        text = encode_json(dict(data), f"data of schedule {name!r}")
        now = self.clock.now()
        params = {
            "name": name,
            "data": text,
            "updated_at": self._instant(now),
            "expect_revision": expect_revision,
        }
        statement = "insert_schedule" if expect_revision is None else "update_schedule"

        def put(cur: Cursor) -> tuple[bool, int | None]:
            cur.execute(self._sql[statement], params)
            if cur.rowcount > 0:
                return True, None
            found = cur.execute(self._sql["select_schedule"], params).fetchone()
            return False, None if found is None else int(found[1])

        done, actual = self._run(put, write=True)
        if not done:
            raise ScheduleConflict(name, expect_revision, actual)
        revision = 1 if expect_revision is None else expect_revision + 1
        return ScheduleRecord(
            name=name, data=loads(text, "schedule data"), revision=revision, updated_at=now
        )

    def get_schedule(self, name: str) -> ScheduleRecord | None:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_schedule"], {"name": name}).fetchone(),
            write=False,
        )
        return None if found is None else rows.decode_schedule(found, self._instant_out)

    def list_schedules(self) -> list[ScheduleRecord]:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_schedules"], {}).fetchall(), write=False
        )
        return [rows.decode_schedule(row, self._instant_out) for row in found]

    def delete_schedule(self, name: str) -> bool:
        def delete(cur: Cursor) -> bool:
            cur.execute(self._sql["delete_schedule"], {"name": name})
            return int(cur.rowcount) > 0

        return self._run(delete, write=True)

    def claim_firing(self, schedule: str, scheduled_at: datetime, owner: str, task_id: str) -> bool:
        require_aware(scheduled_at, "scheduled_at")
        params = {
            "schedule": schedule,
            "scheduled_at": self._instant(scheduled_at),
            "owner": owner,
            "task_id": task_id,
            "now": self._instant(self.clock.now()),
        }

        def claim(cur: Cursor) -> bool:
            cur.execute(self._sql["claim_firing"], params)
            return int(cur.rowcount) == 1

        return self._run(claim, write=True)

    def prune_firings(self, before: datetime) -> int:
        require_aware(before, "before")

        def delete(cur: Cursor) -> int:
            cur.execute(self._sql["prune_firings"], {"before": self._instant(before)})
            return int(cur.rowcount)

        return self._run(delete, write=True)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._signal.close()
        self._close_resources()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed
