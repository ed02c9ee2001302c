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
from functools import partial
from typing import Any, Final

from chongming_task.core.clock import Clock
from chongming_task.errors import ConfigurationError, StoreError
from chongming_task.model import (
    FORMAT_VERSION,
    Failure,
    deferred_snapshot,
    machine_transitions,
    parse_datetime,
)
from chongming_task.redact import redact_reason
from chongming_task.states import TaskStatus
from chongming_task.stores import _sqlrows as rows
from chongming_task.stores._fastjson import TransitionsJson, failure_json
from chongming_task.stores._lost import (
    LOSABLE,
    candidate_of,
    check_lost_failure,
    check_lost_query,
    lost_transition,
)
from chongming_task.stores._sql import SqlTaskStore
from chongming_task.stores._sqlbase import Cursor
from chongming_task.stores.records import LostCandidate, LostMark, TaskQuery

__all__ = ["SqliteLost"]

#: Status column values of the statuses ``select_lost`` can return (the others, and
#: anything corrupt, go through ``decode_status``).
_STATUSES: Final = {status.value: status for status in LOSABLE}


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
                self._attach_snapshots(cur, found, marks)
            return marks

        return self._run(mark, write=True, atomic=True)

    def _mark_rows(
        self,
        cur: Cursor,
        found: list[Any],
        how: _Marking,
    ) -> list[LostMark]:
        """Write ``-> lost`` for each ``select_lost`` row, inside the caller's transaction.

        The loop runs once per task of a page (tens of thousands after the crash of a
        busy node), so what the tasks share is prepared once: the instant's text, the
        record's shared JSON and checks (``machine_transitions``), each distinct lease
        parsed once and each distinct failure checked and encoded once.
        """
        at = how.clock.now()
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise ConfigurationError(
                f"the clock's now() must return a timezone-aware datetime, got {at!r}"
            )
        at_text, at_instant = at.isoformat(), self._instant(at)
        lost = TaskStatus.LOST
        lost_value = lost.value
        record_json = TransitionsJson(to_status=lost, trigger=how.trigger, at=at, actor=how.actor)
        make_record = machine_transitions(
            to_status=lost, trigger=how.trigger, at=at, actor=how.actor
        )
        describe, statuses = how.describe, _STATUSES
        leases: dict[str | None, datetime | None] = {None: None}  # a crashed node's tasks
        # share few leases. A caller that describes many tasks alike returns the same
        # Failure for them; kept alive here, so the id cannot be reused within the call.
        failures: dict[int, tuple[Failure, str, str | None]] = {}
        marks: list[LostMark] = []
        updates: list[dict[str, Any]] = []
        history: list[dict[str, Any]] = []
        for seq, task_id, value, version, owner, lease_owner, lease_text, v, attempt in found:
            if v != FORMAT_VERSION:
                marks.append(self._mark_generic(cur, task_id, how))
                continue
            status = statuses.get(value) or rows.decode_status(value)
            if lease_text in leases:
                lease_until = leases[lease_text]
            else:
                lease_until = leases[lease_text] = parse_datetime(lease_text, "lease_until")
            cause = describe(
                LostCandidate(task_id, status, version, owner, lease_owner, lease_until)
            )
            known = failures.get(id(cause))
            if known is None:
                checked = check_lost_failure(cause)
                # The record's reason, redacted as machine_transitions redacts it.
                known = failures[id(cause)] = (
                    checked,
                    failure_json(cause),
                    redact_reason(checked.message),
                )
            reason, after = known[2], version + 1
            updates.append(
                {
                    "seq": seq,
                    "expect_version": version,
                    "status": lost_value,
                    "status_version": after,
                    "updated_at": at_instant,
                    "at": at_text,
                    "failure": known[1],
                }
            )
            history.append(
                {
                    "task_id": task_id,
                    "version": after,
                    "doc": record_json(task_id, status, after, reason, attempt),
                }
            )
            marks.append(
                LostMark(task_id, make_record(task_id, status, after, cause.message, attempt), None)
            )
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

    def _attach_snapshots(self, cur: Cursor, found: list[Any], marks: list[LostMark]) -> None:
        """Give each patched task its snapshot after the transition, decoded on first use.

        The rows are read back in the same transaction (so they are what was written),
        but not decoded: ``deferred_snapshot`` decodes one only when an observer reads a
        field other than the four known here (id, name, status, version). Restart
        recovery publishes every lost task to the controller's subscribers, and the
        usual ones (the worker's log line, the log tail) never look further: decoding
        50,000 snapshots would cost more than marking the tasks.
        """
        patched = {row[0]: i for i, row in enumerate(found) if marks[i].snapshot is None}
        if not patched:
            return
        after = cur.execute(
            self._sql["select_lost_after"], {"seqs": self._array(list(patched))}
        ).fetchall()
        decode, lost = rows.decode_task, TaskStatus.LOST
        for row in after:
            index = patched[row[0]]
            mark = marks[index]
            assert mark.transition is not None  # patched rows always have their record
            snapshot = deferred_snapshot(
                partial(decode, row[2:]),
                task_id=mark.task_id,
                name=row[1],
                status=lost,
                status_version=mark.transition.version,
            )
            marks[index] = LostMark(mark.task_id, mark.transition, snapshot)
