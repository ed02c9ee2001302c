"""SQLite's ``mark_lost_many``: the state machine once per group, applied to each row.

The generic path (``SqlStore.mark_lost_many``) decodes every candidate's document,
runs the state machine on it and encodes the result again, which made reconcile of
100,000 expired tasks miss W5's target (≤ 2 s; 4.6 s measured, against 1.6 s here).
Yet ``-> lost`` does the same to every task that shares its status and failure: so
the candidates' few columns are read (no document decoded), grouped by (status,
failure), and the state machine marks one decoded representative per group
(``lost_change``). Its change (the fields, the failure, the record's trigger, actor,
reason and instant) is then applied to each row of the group by one version-guarded
``UPDATE`` (the columns, and ``json_set`` on the stored document), with the task's own
``Transition`` in its history, all in one write transaction: no other writer can come
between the read and the writes.

Nothing here decides what ``lost`` means: if the state machine changed anything but the
known fields on a representative, or a row's document is of another format version, or
the caller wants the snapshots after the transition, the call takes the generic path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chongming_task._model import FORMAT_VERSION, Failure, dumps, parse_datetime
from chongming_task.errors import StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores import _sqlrows as rows
from chongming_task.stores._codec import to_micros
from chongming_task.stores._dialect import Cursor
from chongming_task.stores._lost import LostChange, Marking, check_lost_failure, lost_change
from chongming_task.stores._records import LostCandidate, LostMark

if TYPE_CHECKING:
    from datetime import datetime

    from chongming_task.stores._sql import SqlStore

__all__ = ["mark_lost_grouped"]

#: One candidate row of ``select_lost``, with its group's key.
_Row = tuple[Any, ...]


def mark_lost_grouped(store: SqlStore, how: Marking) -> list[LostMark] | None:
    """``mark_lost_many`` by group, in one write transaction (``None``: the generic path)."""
    selected = store._selection("select_lost", how.query)
    if selected is None:
        return None
    statement, params = selected

    def mark(cur: Cursor) -> list[LostMark] | None:
        found = cur.execute(statement, params).fetchall()
        marks = _mark_groups(store, cur, found, how)
        if marks is not None:
            # Pipeline nodes among them: their dependants are judged in this transaction.
            store._settle_ids(cur, [row[1] for row in found if row[9] is not None])
        return marks

    return store._run(mark, write=True, atomic=True)


def _mark_groups(
    store: SqlStore, cur: Cursor, found: list[_Row], how: Marking
) -> list[LostMark] | None:
    """Mark the ``select_lost`` rows inside the caller's transaction (``None``: generic)."""
    if any(row[7] != FORMAT_VERSION for row in found):
        return None
    leases: dict[str | None, datetime | None] = {None: None}  # few distinct per page
    groups: dict[tuple[TaskStatus, Failure], list[_Row]] = {}
    for row in found:
        _, task_id, value, version, owner, lease_owner, lease_text, _, _, _ = row
        status = rows.decode_status(value)
        if lease_text not in leases:
            leases[lease_text] = parse_datetime(lease_text, "lease_until")
        cause = check_lost_failure(
            how.describe(
                LostCandidate(task_id, status, version, owner, lease_owner, leases[lease_text])
            )
        )
        groups.setdefault((status, cause), []).append(row)
    marks: dict[str, LostMark] = {}
    updates: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    for (_, cause), members in groups.items():
        change = _group_change(store, cur, members[0][1], how, cause)
        if change is None:
            return None
        shared = _shared_params(store, change)
        # The group's record as encode_transition writes it; each task's differs
        # only in its id, version and attempt (same members, same order).
        record = change.record.to_dict()
        for seq, task_id, _, version, _, _, _, _, attempt, _ in members:
            transition = change.transition(task_id, version + 1, attempt)
            updates.append(
                {**shared, "seq": seq, "expect_version": version, "status_version": version + 1}
            )
            doc = dumps({**record, "task_id": task_id, "version": version + 1, "attempt": attempt})
            history.append(
                {
                    "task_id": task_id,
                    "version": version + 1,
                    "doc": doc,
                    "occurred_at": to_micros(transition.at),
                    "charted": transition.to_status.value,  # lost: a chart counts it
                }
            )
            marks[task_id] = LostMark(task_id, transition, None)
    if updates:
        cur.executemany(store._sql["mark_lost"], updates)
        if cur.rowcount != len(updates):
            # Impossible while this transaction holds the write lock; never half-write.
            raise StoreError(
                f"mark_lost_many: {cur.rowcount} of {len(updates)} rows matched their "
                "version inside one transaction; nothing was written"
            )
        cur.executemany(store._sql["insert_transition"], history)
    return [marks[row[1]] for row in found]


def _group_change(
    store: SqlStore, cur: Cursor, task_id: str, how: Marking, cause: Failure
) -> LostChange | None:
    """The state machine's change for a group, from its first task decoded."""
    row = cur.execute(store._sql["select_task"], {"task_id": task_id}).fetchone()
    representative = rows.decode_task(row)
    return lost_change(
        representative, clock=how.clock, actor=how.actor, trigger=how.trigger, failure=cause
    )


def _shared_params(store: SqlStore, change: LostChange) -> dict[str, Any]:
    """The ``mark_lost`` parameters every task of a group has in common."""
    fields = change.fields
    return {
        "status": fields["status"],
        "updated_at": store._instant(change.updated_at),
        "updated_at_text": fields["updated_at"],
        "finished_at": fields["finished_at"],
        "lease_until": fields["lease_until"],
        "failure": None if fields["failure"] is None else dumps(fields["failure"]),
    }
