"""SQLite's ``mark_lost_many``: rows patched in place, no snapshot decoded or encoded.

The generic path (``TaskStore.mark_lost_many``) reads each task's document, decodes it,
runs the state machine and encodes the result again: about 45 µs of Python per task,
two thirds of reconcile's cost after the crash of a busy node. Marking a task lost
changes a handful of known fields, so here the candidates' few columns are read, the
caller's failure and the transition record are built in Python from them (a few µs),
and one ``UPDATE`` per task rewrites the row with ``json_set`` on the stored document,
all in one write transaction: the read and the write cannot be separated by another
writer, and each ``UPDATE`` is still guarded by ``status_version``.

The patched document is what the generic path would have written, byte for byte (a
test compares the two): ``json_set`` keeps every other member's text as it was, and
the side-channel columns (lease owner, heartbeat, progress, pid), which override the
document's copies on read, are copied into it as the generic encoder would. That
relies on SQLite rendering JSON text as compactly as ``dumps`` and escaping strings
the same way; ``tests/stores/test_sqlite_mark_lost.py`` pins it (generated unicode,
quotes, control characters, floats) on the SQLite the interpreter links. A row whose
document is of another format version than this library writes takes the generic
path inside the same transaction, so no old-format document is patched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chongming_task.core.clock import Clock
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.model import (
    FORMAT_VERSION,
    Failure,
    TaskSnapshot,
    machine_transition,
    parse_datetime,
)
from chongming_task.states import TaskStatus
from chongming_task.stores import _sqlrows as rows
from chongming_task.stores._fastjson import TransitionsJson, failure_json
from chongming_task.stores._lost import (
    candidate_of,
    check_lost_failure,
    check_lost_query,
    lost_transition,
)
from chongming_task.stores._sql import SqlTaskStore
from chongming_task.stores._sqlbase import Cursor
from chongming_task.stores.records import LostCandidate, LostMark, TaskQuery

__all__ = ["SqliteLost"]


@dataclass(frozen=True, slots=True)
class _Marking:
    """How to mark: the arguments of one ``mark_lost_many`` call."""

    clock: Clock
    actor: str
    trigger: str
    describe: Callable[[LostCandidate], Failure]


class SqliteLost(SqlTaskStore):
    """``mark_lost_many`` for SQLite, on top of the shared SQL store."""

    def mark_lost_many(
        self,
        query: TaskQuery,
        *,
        clock: Clock,
        actor: str,
        trigger: str,
        failure: Callable[[LostCandidate], Failure],
        snapshots: bool = False,
    ) -> list[LostMark]:
        check_lost_query(query)
        parts = rows.build_filters(query, self._sql, self._array, self._instant)
        if parts.empty or query.limit == 0:
            return []
        statement = (
            f"{self._sql['select_lost']}{parts.where} ORDER BY {rows.ORDER_SQL[query.order]}"
        )
        if query.limit is not None:
            statement = f"{statement} {self._sql['limit']}"
            parts.params["limit"] = query.limit

        def mark(cur: Cursor) -> list[LostMark]:
            found = cur.execute(statement, parts.params).fetchall()
            marks = self._mark_rows(cur, found, _Marking(clock, actor, trigger, failure))
            if snapshots and marks:
                self._attach_snapshots(cur, marks)
            return marks

        return self._run(mark, write=True, atomic=True)

    def _mark_rows(
        self,
        cur: Cursor,
        found: list[Any],
        how: _Marking,
    ) -> list[LostMark]:
        """Write ``-> lost`` for each ``select_lost`` row, inside the caller's transaction."""
        at = how.clock.now()
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise ConfigurationError(
                f"the clock's now() must return a timezone-aware datetime, got {at!r}"
            )
        at_text, at_instant = at.isoformat(), self._instant(at)
        lost = TaskStatus.LOST
        record_json = TransitionsJson(to_status=lost, trigger=how.trigger, at=at, actor=how.actor)
        leases: dict[str, datetime | None] = {}  # a crashed node's tasks share few leases
        # A caller that describes many tasks alike returns the same Failure for them;
        # kept alive here, so the id cannot be reused within the call.
        failures: dict[int, tuple[Failure, str]] = {}
        marks: list[LostMark] = []
        updates: list[dict[str, Any]] = []
        history: list[dict[str, Any]] = []
        for task_id, status_value, version, owner, lease_owner, lease_text, v, attempt in found:
            if v != FORMAT_VERSION:
                marks.append(self._mark_generic(cur, task_id, how))
                continue
            status = rows.decode_status(status_value)
            lease_until = leases.get(lease_text)
            if lease_until is None and lease_text is not None:
                lease_until = leases[lease_text] = parse_datetime(lease_text, "lease_until")
            cause = how.describe(
                LostCandidate(task_id, status, version, owner, lease_owner, lease_until)
            )
            known = failures.get(id(cause))
            if known is None:
                known = failures[id(cause)] = (check_lost_failure(cause), failure_json(cause))
            record = machine_transition(
                task_id=task_id,
                from_status=status,
                to_status=lost,
                trigger=how.trigger,
                version=version + 1,
                at=at,
                actor=how.actor,
                reason=cause.message,
                attempt=attempt,
            )
            updates.append(
                {
                    "task_id": task_id,
                    "expect_version": version,
                    "status": lost.value,
                    "status_version": version + 1,
                    "updated_at": at_instant,
                    "at": at_text,
                    "failure": known[1],
                }
            )
            history.append(
                {
                    "task_id": task_id,
                    "version": version + 1,
                    "doc": record_json(task_id, status, version + 1, cause.message, attempt),
                }
            )
            marks.append(LostMark(task_id, record, None))
        if updates:
            cur.executemany(self._sql["mark_lost"], updates)
            if cur.rowcount != len(updates):
                # Impossible while this transaction holds the write lock; never half-write.
                raise StoreError(
                    f"mark_lost_many: {cur.rowcount} of {len(updates)} rows matched their "
                    "version inside one transaction; nothing was written"
                )
            cur.executemany(self._sql["insert_transition"], history)
        return marks

    def _mark_generic(
        self,
        cur: Cursor,
        task_id: str,
        how: _Marking,
    ) -> LostMark:
        """One task the way ``TaskStore.mark_lost_many`` does it (a document of another format)."""
        row = cur.execute(self._sql["select_task"], {"task_id": task_id}).fetchone()
        snapshot = rows.decode_task(row)
        machine = lost_transition(
            snapshot,
            clock=how.clock,
            actor=how.actor,
            trigger=how.trigger,
            failure=how.describe(candidate_of(snapshot)),
        )
        params, history = self._update_params(
            machine.snapshot, snapshot.status_version, machine.transitions[-1:]
        )
        if not self._write_task(cur, "update_task", params, history):
            raise StoreError(f"mark_lost_many: {task_id!r} changed inside one transaction")
        return LostMark(task_id, machine.transitions[-1], machine.snapshot)

    def _attach_snapshots(self, cur: Cursor, marks: list[LostMark]) -> None:
        """Fill in the snapshot after each transition, read back in the same transaction."""
        missing = [mark.task_id for mark in marks if mark.snapshot is None]
        if not missing:
            return
        where = rows.build_filters(
            TaskQuery(task_ids=frozenset(missing)), self._sql, self._array, self._instant
        )
        found = cur.execute(f"{self._sql['select_tasks']}{where.where}", where.params).fetchall()
        decoded: dict[str, TaskSnapshot] = {}
        for row in found:
            snapshot = rows.decode_task(row)
            decoded[snapshot.task_id] = snapshot
        for index, mark in enumerate(marks):
            if mark.snapshot is None:
                marks[index] = mark._replace(snapshot=decoded[mark.task_id])
