"""Commands and schedule records on SQL: claims, fencing, wake-ups, compare-and-set.

Every fenced write is one ``UPDATE ... WHERE claim_token = ... AND status = 'claimed'``:
the database decides who still holds a claim, atomically, whatever the number of
processes. When it matches nothing, one read says why (unknown command, or a claim
that was lost) so the caller gets ``StoreError`` or ``ClaimLost`` accordingly.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

from chongming_task._validation import check_seconds
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.model import JSONValue, loads
from chongming_task.redact import redact_text_fields
from chongming_task.stores import _sqlrows as rows
from chongming_task.stores._sqlbase import Cursor, SqlBase
from chongming_task.stores.base import (
    ClaimLost,
    Command,
    ScheduleConflict,
    ScheduleRecord,
    validate_actions,
)
from chongming_task.stores.codec import encode_json, require_aware

__all__ = ["SqlControl"]


class SqlControl(SqlBase):
    """The command and schedule half of the SQL store."""

    def _before_claim(self) -> None:
        """Remember what "nothing new" looks like before claiming (see ``wait_for_commands``)."""
        self._signal.mark_seen()

    def _poll_commands(self) -> Callable[[], bool] | None:
        """A cross-process check for new commands, polled while waiting (None: no polling)."""
        return None

    #: How often ``_poll_commands`` runs while waiting (SQLite: ``command_poll_interval``).
    _command_poll_interval: float = 0.01

    def _channel(self) -> str:
        """The notification channel (PostgreSQL); unused elsewhere."""
        return ""

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
            "priority": command.claim_priority,
            "doc": doc,
            "channel": self._channel(),
        }

        def insert(cur: Cursor) -> Any:
            cur.execute(self._sql["insert_command"], params)
            return cur.execute(self._sql["select_command"], params).fetchone()

        stored = rows.decode_command(self._run(insert, write=True), self._instant_out)
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
        check_seconds(lease, "lease")
        if isinstance(limit, bool) or limit < 1:
            raise ConfigurationError(f"limit must be >= 1, got {limit!r}")
        wanted = validate_actions(actions)
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
        # Filtered by action: a statement of its own, so the index on (action, priority
        # DESC, seq) serves it (an "IS NULL OR" on the filter would keep the planner off
        # it); one action (a worker's) has its own again, which reads the index in claim
        # order and stops at the limit.
        if wanted is None:
            section = "claim_commands"
        elif len(wanted) == 1:
            section = "claim_commands_one_action"
            (params["action"],) = wanted
        else:
            section = "claim_commands_actions"
            params["actions"] = self._array(sorted(wanted))
        statement = self._sql[section]
        found = self._run(lambda cur: cur.execute(statement, params).fetchall(), write=True)
        # RETURNING has no order: back to the claim order, priority first, then seq.
        found.sort(key=lambda row: (-int(row[1]), int(row[0])))
        return [rows.decode_command(row[2:], self._instant_out) for row in found]

    def complete_command(self, command_id: str, claim_token: str, result: JSONValue = None) -> None:
        params = {
            "command_id": command_id,
            "claim_token": claim_token,
            "now": self._instant(self.clock.now()),
            "result": encode_json(redact_text_fields(result), "command result"),
        }
        self._settle_claim_or_missing("complete_command", params)

    def release_command(self, command_id: str, claim_token: str) -> None:
        params = {"command_id": command_id, "claim_token": claim_token, "channel": self._channel()}
        self._settle_claim_or_missing("release_command", params)
        self._signal.notify()

    def extend_command(self, command_id: str, claim_token: str, lease: float) -> None:
        check_seconds(lease, "lease")
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
        self._signal.wait(
            self.clock,
            timeout,
            poll=self._poll_commands(),
            poll_interval=self._command_poll_interval,
        )

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
