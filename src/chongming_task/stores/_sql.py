"""The SQL store: every method once, for SQLite and PostgreSQL alike.

:class:`SqlStore` implements every part of the store contract (tasks, commands,
schedules, the work queue) over a :class:`~chongming_task.stores._dialect.Dialect`,
which holds what differs per database: the SQL (``sql/<dialect>.sql``), connections and
transactions, binding, and command wake-ups. ``SqliteTaskStore`` and
``PostgresTaskStore`` are this class with their dialect.

Writes encode each snapshot exactly once (``_sqlrows.task_params``) before taking a
connection, so no lock is held while JSON is built. A ``save`` is one conditional
``UPDATE`` on ``status_version`` plus its transitions, in one transaction; the
``UPDATE`` matching nothing is the optimistic-concurrency signal, and one read then
tells a stale version from an unknown task. Every fenced command write is one
``UPDATE ... WHERE claim_token = ... AND status = 'claimed'``: the database decides who
still holds a claim, atomically, whatever the number of processes; when it matches
nothing, one read says why (unknown command, or a claim that was lost).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._model import (
    Failure,
    JSONValue,
    Progress,
    TaskSnapshot,
    Transition,
    dumps,
    loads,
    parse_datetime,
)
from chongming_task._redact import redact_text_fields
from chongming_task._validation import check_count, check_items, check_lookup, check_seconds
from chongming_task.core import Clock
from chongming_task.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    DuplicateTaskId,
    StoreError,
)
from chongming_task.states import TERMINAL, TaskStatus
from chongming_task.stores import _sqlrows as rows
from chongming_task.stores._activity import (
    CHARTED,
    DURATION_SAMPLE,
    Activity,
    build_activity,
    check_window,
)
from chongming_task.stores._base import (
    ClaimLost,
    Command,
    LostCandidate,
    LostMark,
    ScheduleConflict,
    ScheduleRecord,
    SnapshotWrite,
    TaskHead,
    TaskNotFound,
    TaskQuery,
    TaskStore,
    WaitingWork,
    lost_marks,
    lost_writes,
    refuse_repeated_ids,
)
from chongming_task.stores._codec import (
    decode_transition,
    encode_json,
    encode_transition,
    require_aware,
    to_micros,
)
from chongming_task.stores._command_store import validate_claim
from chongming_task.stores._dag import run_of, settle_dependants, settles_a_node
from chongming_task.stores._dialect import SCHEMA_VERSION, Cursor, Dialect, History
from chongming_task.stores._limits import (
    FleetLimit,
    GlobalSlot,
    LimitBook,
    LimitLedger,
    LimitStart,
    parse_rate,
)
from chongming_task.stores._lost import Marking, check_lost_query
from chongming_task.stores._pauses import QueuePause, pause_order
from chongming_task.stores._queue_records import (
    WorkerRecord,
    concurrency_key_of,
    is_claimable,
    unique_key_of,
    unique_stands,
    unique_taken,
)
from chongming_task.stores._queue_store import QueueStore, claims_nothing
from chongming_task.stores._records import CorruptRows
from chongming_task.stores._scan import touch_changes

__all__ = ["SCHEMA_VERSION", "Cursor", "SqlStore"]

T = TypeVar("T")

log = logging.getLogger("chongming_task.stores")

_TERMINAL_VALUES: Final = sorted(status.value for status in TERMINAL)
#: Rows per transaction in ``create_many``: large enough to amortise the commit, small
#: enough that a batch does not hold the write lock for long.
CREATE_BATCH: Final = 5_000


def history_rows(transitions: Sequence[Transition]) -> History:
    """Transitions as ``insert_transition`` parameters, each encoded once."""
    return [
        {
            "task_id": t.task_id,
            "version": t.version,
            "doc": encode_transition(t),
            "occurred_at": to_micros(t.at),
            "charted": t.to_status.value if t.to_status in CHARTED else None,
        }
        for t in transitions
    ]


def _duplicate(task_id: str, *, batch: bool = False) -> ConfigurationError:
    return DuplicateTaskId(
        task_id,
        f"task id {task_id!r} already exists in the store; "
        + ("nothing of this batch was stored, " if batch else "")
        + "choose another task_id or load the existing task",
    )


def _chains(writes: Sequence[SnapshotWrite]) -> list[list[int]]:
    """Indexes of ``writes`` grouped into per-task version chains, in write order."""
    chains: list[list[int]] = []
    open_chain: dict[str, list[int]] = {}
    for index, write in enumerate(writes):
        task_id = write.snapshot.task_id
        chain = open_chain.get(task_id)
        if chain is not None and writes[chain[-1]].snapshot.status_version == write.expect_version:
            chain.append(index)
            continue
        chain = [index]
        open_chain[task_id] = chain
        chains.append(chain)
    return chains


#: Counter rows summed past which those of gone backends are folded (``SqlStore._totals``).
FOLD_ABOVE: Final = 512
#: Tasks a page walks in the list's order before it leaves the filters to their indexes
#: (``SqlStore._walk``).
WALK: Final = 10_000
#: Every filter of ``TaskQuery`` (not its limit and order).
_FILTERS: Final = tuple(
    f.name for f in dataclasses.fields(TaskQuery) if f.name not in ("limit", "order")
)


def _walkable(query: TaskQuery) -> bool:
    """A page (a limit) in creation order filtered by something no index orders so."""
    return (
        query.limit is not None
        and query.order in ("created", "-created")
        and query.task_ids is None
        and bool(
            query.name_prefix
            or query.id_prefix
            or query.tag is not None
            or query.argument is not None
        )
    )


def _tag_and_name_only(query: TaskQuery) -> bool:
    """Whether ``query`` filters by a tag, and perhaps a name prefix, and nothing else."""
    return query.tag is not None and all(
        getattr(query, name) in (None, "")
        for name in _FILTERS
        if name not in ("tag", "name_prefix")
    )


class SqlStore(TaskStore, QueueStore):
    """Every part of the store contract in SQL; ``dialect`` says how for one database."""

    keeps_checkpoint_gaps = True
    atomic_create_batch = True
    supports_global_limits = True
    supports_queue_pauses = True

    def __init__(self, dialect: Dialect, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._dialect = dialect
        self._sql = dialect.sql
        self._signal = dialect.signal
        # Bound once: the row encoders call them for every column of every write.
        self._instant: Callable[[datetime], Any] = dialect.instant
        self._instant_out: Callable[[Any], datetime] = dialect.instant_out
        self._array: Callable[[Sequence[Any]], Any] = dialect.array

    def _run(self, fn: Callable[[Cursor], T], *, write: bool, atomic: bool = False) -> T:
        """``fn`` with a cursor, on the dialect's connections (see ``Dialect.run``)."""
        return self._dialect.run(fn, write=write, atomic=atomic)

    def _check_open(self) -> None:
        self._dialect.check_open()

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        dialect = self._dialect
        if dialect.closed:
            return
        dialect.closed = True
        self._signal.close()
        dialect.close_resources()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._dialect.closed

    @property
    def open_connections(self) -> int:
        """Connections currently open (the contract's teardown checks it drops to 0)."""
        return self._dialect.open_connections

    # ------------------------------------------------------------ row helpers

    def _conflict(
        self, cur: Cursor, snapshot: TaskSnapshot, expect_version: int
    ) -> ConcurrencyConflict | TaskNotFound:
        found = cur.execute(self._sql["task_version"], {"task_id": snapshot.task_id}).fetchone()
        if found is None:
            return TaskNotFound(snapshot.task_id)
        return ConcurrencyConflict(snapshot.task_id, expect_version, int(found[0]))

    def _update_params(
        self, snapshot: TaskSnapshot, expect_version: int, transitions: Sequence[Transition]
    ) -> tuple[dict[str, Any], History]:
        params = rows.task_params(snapshot, self._instant, self._array)
        params["expect_version"] = expect_version
        history = history_rows(transitions)
        return params, history

    # ------------------------------------------------------------ snapshots

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        self._insert(snapshot, transitions, wake=False)

    def create_queued(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """``QueueStore.create_queued``: the row, its history and the wake-up in one write
        (PostgreSQL: one statement, its NOTIFY sent on commit; SQLite: one transaction)."""
        self._insert(snapshot, transitions, wake=True)
        self._signal.notify(work=True)

    def _insert(
        self, snapshot: TaskSnapshot, transitions: Sequence[Transition], *, wake: bool
    ) -> None:
        params = rows.task_params(snapshot, self._instant, self._array)
        history = history_rows(transitions)

        def insert(cur: Cursor) -> None:
            try:
                self._dialect.write_task(cur, "insert_task", params, history, wake=wake)
            except Exception as exc:
                if self._dialect.is_unique_violation(exc):
                    raise _duplicate(snapshot.task_id) from exc
                raise

        # The row and its history (and the wake-up): one transaction, unless the dialect
        # writes them in one statement, atomic on its own.
        several = bool(history) or wake
        self._run(insert, write=True, atomic=several and not self._dialect.single_statement_writes)

    def create_batch(self, entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]]) -> None:
        """All entries in one transaction: a duplicate id or a failure writes none."""
        refuse_repeated_ids(entries)
        prepared = [
            (
                snapshot.task_id,
                rows.task_params(snapshot, self._instant, self._array),
                history_rows(transitions),
            )
            for snapshot, transitions in entries
        ]

        def insert(cur: Cursor) -> None:
            for task_id, params, history in prepared:
                try:
                    self._dialect.write_task(cur, "insert_task", params, history)
                except Exception as exc:
                    if self._dialect.is_unique_violation(exc):
                        raise _duplicate(task_id, batch=True) from exc
                    raise

        if prepared:
            self._run(insert, write=True, atomic=True)

    def create_unique(
        self,
        entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        finished_since: datetime | None = None,
    ) -> list[tuple[str, bool]]:
        """One transaction: per keyed entry, lock the key (PostgreSQL; SQLite's
        ``BEGIN IMMEDIATE`` serialises writers), read the standing task, insert if none."""
        enqueue = self._unique_writes(entries, finished_since)
        return self._run(enqueue, write=True, atomic=True) if entries else []

    def create_in_transaction(
        self,
        connection: object,
        entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        finished_since: datetime | None = None,
    ) -> list[tuple[str, bool]]:
        """``create_unique`` plus the workers' wake-up, in the caller's transaction on
        ``connection`` (``Dialect.run_in``): both commit or roll back with it."""
        write = self._unique_writes(entries, finished_since)

        def enqueue(cur: Cursor) -> list[tuple[str, bool]]:
            results = write(cur)
            if any(created for _, created in results):
                cur.execute(self._sql["notify_work"], {"channel": self._dialect.channel})
            return results

        return self._dialect.run_in(connection, enqueue)

    def _unique_writes(
        self,
        entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        finished_since: datetime | None,
    ) -> Callable[[Cursor], list[tuple[str, bool]]]:
        """What ``create_unique`` runs in its transaction (see there)."""
        refuse_repeated_ids(entries)
        prepared = [
            (
                snapshot,
                unique_key_of(snapshot),
                rows.task_params(snapshot, self._instant, self._array),
                history_rows(transitions),
            )
            for snapshot, transitions in entries
        ]
        since = None if finished_since is None else self._instant(finished_since)
        terminal = self._array(_TERMINAL_VALUES)

        def enqueue(cur: Cursor) -> list[tuple[str, bool]]:
            results: list[tuple[str, bool]] = []
            for snapshot, key, params, history in prepared:
                if key is not None:
                    self._dialect.lock_unique(cur, key)
                    standing = self._standing(cur, key, since, terminal, finished_since)
                    if standing is not None:
                        results.append((standing, False))
                        continue
                try:
                    self._dialect.write_task(cur, "insert_task", params, history)
                except Exception as exc:
                    if self._dialect.is_unique_violation(exc):
                        raise _duplicate(snapshot.task_id, batch=True) from exc
                    raise
                if key is not None:
                    cur.execute(
                        self._sql["set_unique_key"],
                        {"unique_key": key, "task_id": snapshot.task_id},
                    )
                results.append((snapshot.task_id, True))
            return results

        return enqueue

    def _standing(
        self,
        cur: Cursor,
        key: str,
        since: Any,
        terminal: Any,
        finished_since: datetime | None,
    ) -> str | None:
        """The task that stands for ``key`` (``QueueStore.create_unique``), or ``None``."""
        params = {"unique_key": key, "finished_since": since, "terminal": terminal}
        best: tuple[datetime, str] | None = None
        for task_id, status, finished in cur.execute(self._sql["unique_standing"], params):
            state = rows.STATUS_BY_VALUE[status]
            if not state.is_terminal:
                return str(task_id)
            at = parse_datetime(finished, "finished_at")
            if at is not None and unique_stands(state, at, finished_since):
                best = max(best or (at, str(task_id)), (at, str(task_id)))
        return None if best is None else best[1]

    def create_many(self, snapshots: Iterable[TaskSnapshot]) -> int:
        """Bulk-insert new tasks without history (imports, seeding); returns how many.

        Rows go in batches of ``CREATE_BATCH``, one transaction each (PostgreSQL uses
        ``COPY``). While one batch is written (the driver releases the GIL), the next
        is encoded, so encoding and I/O overlap. A duplicate id fails its whole batch
        with ``ConfigurationError``; earlier batches stay written.
        """
        total = 0
        in_flight: Future[int] | None = None
        batch: list[dict[str, Any]] = []
        with ThreadPoolExecutor(1, thread_name_prefix="chongming-task-bulk") as writer:
            for snapshot in snapshots:
                batch.append(rows.task_params(snapshot, self._instant, self._array))
                if len(batch) >= CREATE_BATCH:
                    if in_flight is not None:
                        total += in_flight.result()
                    in_flight = writer.submit(self._create_batch, batch)
                    batch = []
            if in_flight is not None:
                total += in_flight.result()
        if batch:
            total += self._create_batch(batch)
        return total

    def _create_batch(self, batch: list[dict[str, Any]]) -> int:
        def insert(cur: Cursor) -> int:
            try:
                self._dialect.insert_rows(cur, batch)
            except Exception as exc:
                if self._dialect.is_unique_violation(exc):
                    raise DuplicateTaskId(
                        str(batch[0]["task_id"]),
                        "create_many: a task id in this batch already exists in the store "
                        f"(first id of the batch: {batch[0]['task_id']!r}); nothing of the "
                        "batch was written",
                    ) from exc
                raise
            return len(batch)

        return self._run(insert, write=True, atomic=True)

    def save(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        self._guarded_update("update_task", snapshot, expect_version, transitions)

    def _guarded_update(
        self,
        statement: str,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition],
        *,
        atomic: bool | None = None,
    ) -> None:
        """``statement`` (an update of one task under ``expect_version``) with its history;
        a version that moved on is a ``ConcurrencyConflict``. ``atomic`` defaults to
        whether there is history to write with the row in more than one statement, or a
        pipeline node to settle."""
        params, history = self._update_params(snapshot, expect_version, transitions)
        settles = settles_a_node(snapshot)

        def update(cur: Cursor) -> None:
            if settles:
                self._lock_runs(cur, [snapshot])
            try:
                written = self._dialect.write_task(cur, statement, params, history)
            except Exception as exc:
                key = unique_key_of(snapshot)
                if key is not None and self._dialect.is_unique_violation(exc):
                    raise unique_taken(snapshot.task_id, key) from exc
                raise
            if not written:
                raise self._conflict(cur, snapshot, expect_version)
            if settles:
                self._settle_dag(cur, [snapshot])

        if atomic is None:
            atomic = settles or (bool(history) and not self._dialect.single_statement_writes)
        self._run(update, write=True, atomic=atomic)

    def save_many(
        self, writes: Sequence[SnapshotWrite]
    ) -> list[ConcurrencyConflict | StoreError | None]:
        """Every write in one transaction (one commit); each succeeds or fails alone.

        Consecutive writes to one task whose versions chain (each expects the version
        the previous one wrote) are coalesced into one ``UPDATE`` of the last snapshot
        plus all their transitions: the intermediate snapshots would be overwritten
        inside the same transaction anyway, so no reader could ever see them. If the
        chain's first version is stale, every write of the chain gets the conflict.
        """
        chains = _chains(writes)
        prepared = [
            (
                chain,
                *self._update_params(
                    writes[chain[-1]].snapshot,
                    writes[chain[0]].expect_version,
                    writes[chain[0]].transitions
                    if len(chain) == 1
                    else [t for index in chain for t in writes[index].transitions],
                ),
            )
            for chain in chains
        ]
        if not prepared:
            return []

        settling = [writes[chain[-1]].snapshot for chain in chains]
        settling = [snapshot for snapshot in settling if settles_a_node(snapshot)]

        def apply(cur: Cursor) -> list[ConcurrencyConflict | StoreError | None]:
            results: list[ConcurrencyConflict | StoreError | None] = [None] * len(writes)
            self._lock_runs(cur, settling)
            settled: list[TaskSnapshot] = []
            for chain, params, history in prepared:
                if self._dialect.write_task(cur, "update_task", params, history):
                    if settling and settles_a_node(writes[chain[-1]].snapshot):
                        settled.append(writes[chain[-1]].snapshot)
                    continue
                for index in chain:
                    write = writes[index]
                    results[index] = self._conflict(cur, write.snapshot, write.expect_version)
            self._settle_dag(cur, settled)
            return results

        return self._run(apply, write=True, atomic=True)

    # ------------------------------------------------------------ fleet pipelines

    def _lock_runs(self, cur: Cursor, settling: Sequence[TaskSnapshot]) -> None:
        """Before the first write of a transaction that settles pipeline nodes: lock
        their runs (in one order), so one run's join decisions never interleave."""
        runs = sorted({found[1] for snapshot in settling if (found := run_of(snapshot))})
        for run in runs:
            self._dialect.lock_pipeline(cur, run)

    def _settle_dag(self, cur: Cursor, settled: Sequence[TaskSnapshot]) -> None:
        """Inside the transaction that wrote ``settled``: release or skip their blocked
        dependants (``stores._dag``), and wake the workers if any was released."""
        if not settled:
            return
        if settle_dependants(_CursorRows(self, cur), settled, clock=self.clock):
            cur.execute(self._sql["notify_work"], {"channel": self._dialect.channel})
            self._signal.notify(work=True)

    def _settle_ids(self, cur: Cursor, task_ids: Sequence[str]) -> None:
        """:meth:`_settle_dag` for tasks this transaction settled by id (reconcile)."""
        found = [
            rows.decode_task(row)
            for task_id in task_ids
            if (row := cur.execute(self._sql["select_task"], {"task_id": task_id}).fetchone())
        ]
        self._settle_dag(cur, found)

    def get(self, task_id: str) -> TaskSnapshot | None:
        check_lookup(task_id)
        found = self._run(
            lambda cur: cur.execute(self._sql["select_task"], {"task_id": task_id}).fetchone(),
            write=False,
        )
        return None if found is None else rows.decode_task(found)

    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        decoded: list[TaskSnapshot] = []
        corrupt: dict[str, str] = {}
        for row in self._select("select_tasks", query):
            try:
                decoded.append(rows.decode_task(row))
            except CorruptRows as exc:  # every broken row named, the good ones kept
                corrupt.update(exc.corrupt)
        if corrupt:
            raise CorruptRows(corrupt, decoded)
        return decoded

    def query_heads(self, query: TaskQuery = TaskQuery()) -> list[TaskHead]:  # noqa: B008
        # One dict lookup per row in the common case: reconcile reads 100,000 heads
        # after the crash of a busy node.
        known, decode = rows.STATUS_BY_VALUE, rows.decode_status
        return [
            TaskHead(task_id, known.get(value) or decode(value), int(version))
            for task_id, value, version in self._select("select_heads", query)
        ]

    def _select(self, section: str, query: TaskQuery) -> list[Any]:
        """The rows of ``section`` (a ``SELECT ... FROM ct_tasks t``) matching ``query``."""
        if _walkable(query) and f"walk_{section.removeprefix('select_')}" in self._sql:
            walked = self._walk(section, query)
            if walked is not None:
                return walked
        selected = self._selection(section, query)
        if selected is None:
            return []
        statement, params = selected
        found: list[Any] = self._run(
            lambda cur: cur.execute(statement, params).fetchall(), write=False
        )
        return found

    def _walk(self, section: str, query: TaskQuery) -> list[Any] | None:
        """A page of ``query`` read by walking the creation index, or ``None``: not found
        within ``WALK`` tasks (the dialect's ``walk_*`` sections, SQLite's).

        For filters no index orders by creation (a name prefix, a tag, an argument), a
        planner without statistics reads every matching task and sorts them all: a
        third of the store for a common tag. The walk reads the tasks in the list's
        order and checks the filters per row, up to the ``WALK``-th task in that order
        (``walk_edge``, an index offset): if the page fills there, it is the page, since
        every task past the edge comes after it. If not, the matches are rare, and the
        planner's own plan (from the filters' indexes) is the cheap one.
        """
        parts = rows.build_filters(query, self._sql, self._array, self._instant, probe_tags=True)
        if parts.empty:
            return []
        descending = query.order == "-created"
        order = rows.ORDER_SQL[query.order]
        window = rows.build_filters(
            TaskQuery(created_after=query.created_after, created_before=query.created_before),
            self._sql,
            self._array,
            self._instant,
        )
        edge_sql = f"{self._sql['walk_edge']}{window.where} ORDER BY {order} {self._sql['limit']}"
        edge_sql += " OFFSET :walk"
        walk = f"walk_{section.removeprefix('select_')}"

        def read(cur: Cursor) -> list[Any] | None:
            edge = cur.execute(edge_sql, {**window.params, "limit": 1, "walk": WALK}).fetchone()
            where, params = parts.where, {**parts.params, "limit": query.limit}
            if edge is not None:
                bound = self._sql["filter_walk_from" if descending else "filter_walk_to"]
                where = f"{where} AND {bound}" if where else f" WHERE {bound}"
                params["walk_edge"] = edge[0]
            statement = f"{self._sql[walk]}{where} ORDER BY {order} {self._sql['limit']}"
            found: list[Any] = cur.execute(statement, params).fetchall()
            full = query.limit is not None and len(found) >= query.limit
            return found if edge is None or full else None

        return self._run(read, write=False)

    def _selection(self, section: str, query: TaskQuery) -> tuple[str, dict[str, Any]] | None:
        """``section`` filtered, ordered and limited by ``query``; ``None``: matches nothing."""
        parts = rows.build_filters(query, self._sql, self._array, self._instant)
        if parts.empty or query.limit == 0:
            return None
        order = rows.ORDER_SQL[query.order]
        statement = f"{self._sql[section]}{parts.where} ORDER BY {order}"
        if query.limit is not None:
            statement = f"{statement} {self._sql['limit']}"
            parts.params["limit"] = query.limit
        return statement, parts.params

    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        parts = rows.build_filters(query, self._sql, self._array, self._instant)
        if parts.empty:
            return {}
        if not parts.where and "status_totals" in self._sql:
            return {rows.decode_status(s): n for s, n in self._totals("status").items() if n}
        statement = f"{self._sql['count_tasks']}{parts.where} GROUP BY t.status"
        found = self._run(lambda cur: cur.execute(statement, parts.params).fetchall(), write=False)
        return {rows.decode_status(status): int(count) for status, count in found}

    def count_tasks(self, query: TaskQuery | None = None) -> int:
        """``TaskRecordStore.count_tasks``: one ``count(*)``; on SQLite, a tag alone (or
        with a name prefix) is a range of ``ct_task_tags_name``."""
        parts = rows.build_filters(query, self._sql, self._array, self._instant)
        if parts.empty:
            return 0
        if not parts.where and "status_totals" in self._sql:
            return sum(self._totals("status").values())
        statement = f"{self._sql['count_all']}{parts.where}"
        if query is not None and "count_tag" in self._sql and _tag_and_name_only(query):
            statement = self._sql["count_tag"]
            if query.name_prefix:
                bounded = "name_high" in parts.params
                clause = "count_tag_name_range" if bounded else "count_tag_name_from"
                statement = f"{statement} AND {self._sql[clause]}"
        found = self._run(lambda cur: cur.execute(statement, parts.params).fetchone(), write=False)
        return int(found[0])

    def _totals(self, kind: str) -> dict[Any, int]:
        """The whole store's task counts per ``kind`` (``status`` or ``bucket``): the
        trigger-kept counts of the finished tasks plus the unfinished tasks counted in
        their index ranges (``status_totals``/``bucket_totals``), in one statement.

        On PostgreSQL each writing backend keeps counter rows of its own; once more than
        ``FOLD_ABOVE`` are summed, those of backends that have gone are folded into one
        (a write that a role without write rights skips: the sum stays right).
        """
        statement = self._sql[f"{kind}_totals"]
        found = self._run(lambda cur: cur.execute(statement, {}).fetchall(), write=False)
        many = sum(int(summed) for _, _, summed in found) > FOLD_ABOVE
        if many and "fold_lock" in self._sql:
            self._fold_counts()
        totals: dict[Any, int] = {}
        for key, total, _ in found:
            totals[key] = totals.get(key, 0) + int(total)
        return totals

    def _fold_counts(self) -> None:
        def fold(cur: Cursor) -> None:
            if cur.execute(self._sql["fold_lock"], {}).fetchone()[0]:
                cur.execute(self._sql["fold_counts"], {})

        try:
            self._run(fold, write=True, atomic=True)
        except StoreError as exc:  # e.g. a read-only role: the counts stay exact
            log.warning("could not fold the task counts of gone connections: %s", exc)

    def count_by_bucket(self) -> dict[int, int]:
        if "bucket_totals" in self._sql:
            return {int(b): n for b, n in self._totals("bucket").items() if n}
        found = self._run(
            lambda cur: cur.execute(self._sql["count_buckets"], {}).fetchall(), write=False
        )
        return {int(bucket): int(count) for bucket, count in found}

    def waiting_work(self) -> dict[int | None, WaitingWork]:
        """The work queue's waiting tasks per bucket (``TaskRecordStore.waiting_work``):
        one statement that counts the partial index ``ct_tasks_waiting`` and reads the
        oldest task of each bucket, no queued task decoded."""
        found = self._run(
            lambda cur: cur.execute(self._sql["waiting_work"], {}).fetchall(), write=False
        )
        out: dict[int | None, WaitingWork] = {}
        for bucket, depth, since in found:
            at = parse_datetime(since, "queued_at")
            if at is None:
                raise StoreError(f"corrupt task row: a waiting task of bucket {bucket} has no time")
            out[None if bucket is None else int(bucket)] = WaitingWork(int(depth), at)
        return out

    def checkpoint_gaps_of(self, name: str, *, limit: int) -> list[tuple[str, CheckpointGaps]]:
        """``TaskRecordStore.checkpoint_gaps_of``: ``limit`` rows of the name's index range,
        the gaps column only."""
        check_lookup(name, "name")
        check_count(limit, "limit")
        if limit == 0:
            return []
        params = {"name": name, "limit": limit}
        found = self._run(
            lambda cur: cur.execute(self._sql["name_gaps"], params).fetchall(), write=False
        )
        return [
            (task_id, CheckpointGaps.from_dict(loads(gaps, f"checkpoint gaps of {task_id}")))
            for task_id, gaps in found
            if gaps is not None
        ]

    def activity(self, *, since: datetime, until: datetime, step: timedelta) -> Activity:
        """The charts' activity (``TaskRecordStore.activity``): three indexed reads.

        The slots are counted in SQL, a range of the covering index ``ct_transitions_at``
        per slot and charted status; the durations read at most ``DURATION_SAMPLE``
        finished tasks through ``ct_tasks_updated``; the queue depth counts the queued
        unheld tasks per bucket.
        """
        slots = check_window(since, until, step)
        dialect = self._dialect
        window = {
            "slots": slots,
            "since": dialect.instant(since),
            "until": dialect.instant(until),
            "step": dialect.span(step),
            "statuses": self._array(sorted(status.value for status in CHARTED)),
            "sample": DURATION_SAMPLE,
        }

        def read(cur: Cursor) -> tuple[list[Any], list[Any], list[Any]]:
            cur.execute(self._sql["chart_transitions"], window)
            counted = cur.fetchall()
            cur.execute(self._sql["chart_durations"], window)
            finished = cur.fetchall()
            cur.execute(self._sql["chart_queued"], {})
            return counted, finished, cur.fetchall()

        counted, finished, queued = self._run(read, write=False)
        counts: dict[tuple[int, str], int] = {}
        for slot, status, n in counted:
            key = (int(slot), CHARTED[TaskStatus(status)])
            counts[key] = counts.get(key, 0) + int(n)
        return build_activity(
            since=since,
            until=until,
            step=step,
            counts=counts,
            finished=(
                (name, parse_datetime(started, "started_at"), parse_datetime(ended, "finished_at"))
                for name, started, ended, _ in finished
            ),
            queued={None if b is None else int(b): int(n) for b, n in queued},
        )

    def prune(self, keep_terminal: int) -> int:
        check_count(keep_terminal, "keep_terminal")
        params = {"terminal": self._array(_TERMINAL_VALUES), "keep": keep_terminal}

        def delete(cur: Cursor) -> int:
            cur.execute(self._sql["prune_history"], params)
            cur.execute(self._sql["prune_tasks"], params)
            return int(cur.rowcount)

        return self._run(delete, write=True, atomic=True)

    def delete_tasks(self, task_ids: Collection[str]) -> int:
        ids = sorted({check_lookup(t, "task_ids[]") for t in check_items(task_ids, "task_ids")})
        if not ids:
            return 0
        params = {"task_ids": self._array(ids)}

        def delete(cur: Cursor) -> int:
            cur.execute(self._sql["delete_history_of"], params)
            cur.execute(self._sql["delete_tasks_by_id"], params)
            return int(cur.rowcount)

        return self._run(delete, write=True, atomic=True)

    def delete_transitions(self, task_id: str, versions: Collection[int]) -> int:
        check_lookup(task_id)
        chosen = sorted({check_count(v, "versions[]") for v in check_items(versions, "versions")})
        if not chosen:
            return 0
        params = {"task_id": task_id, "versions": self._array(chosen)}

        def delete(cur: Cursor) -> int:
            cur.execute(self._sql["delete_transitions"], params)
            return int(cur.rowcount)

        return self._run(delete, write=True, atomic=True)

    # ------------------------------------------------------------ audit trail

    def append(self, transition: Transition) -> None:
        params = history_rows([transition])[0]
        self._run(lambda cur: cur.execute(self._sql["insert_transition"], params), write=True)

    def history(self, task_id: str) -> list[Transition]:
        check_lookup(task_id)
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
        checkpoint_gaps: CheckpointGaps | None = None,
    ) -> bool:
        gaps = checkpoint_gaps
        if not touch_changes(
            progress, heartbeat_at, lease_owner, lease_until, pid, checkpoint_gaps=gaps
        ):
            return self.get(task_id) is not None
        params = {
            "task_id": task_id,
            "progress": None if progress is None else dumps(progress.to_dict()),
            "heartbeat_at": None if heartbeat_at is None else heartbeat_at.isoformat(),
            "lease_owner": lease_owner,
            "lease_until": None if lease_until is None else lease_until.isoformat(),
            "pid": pid,
            "checkpoint_gaps": None if gaps is None else dumps(gaps.to_dict()),
        }

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
            "slot_until": self._instant(lease_until),
        }

        def renew(cur: Cursor) -> int:
            cur.execute(self._sql["renew_leases"], params)
            renewed = int(cur.rowcount)
            cur.execute(self._sql["renew_slots"], params)  # the global slots ride along
            return renewed

        return self._run(renew, write=True)

    # ------------------------------------------------------------ work queue

    def notify_work(self) -> None:
        self._run(
            lambda cur: cur.execute(self._sql["notify_work"], {"channel": self._dialect.channel}),
            write=True,
        )
        self._signal.notify(work=True)

    def claim_queued(
        self,
        owner: str,
        *,
        buckets: Collection[int] | None,
        limit: int,
        lease_until: datetime,
        global_limits: Mapping[str, int] | None = None,
    ) -> list[TaskSnapshot]:
        if claims_nothing(buckets, limit, lease_until):
            return []
        now = self.clock.now()
        # The query leaves out rows that are not due (a delay) or carry no recipe, so
        # any number of delayed tasks ahead cannot hide a due one. Read about as many
        # rows as wanted (a few more cover what the exact check below refuses: SQLite
        # compares to the ms); only if some of them could not be taken (a limit filled
        # meanwhile) look further. A wider first read would decode, and on
        # PostgreSQL lock, rows other claimers then have to skip.
        windows = (limit + 4, limit * 4 + 16)
        params: dict[str, Any] = {"now": now.isoformat(), "full": self._array([])}
        section = "claim_queued"
        if buckets is not None:
            section = "claim_queued_buckets"
            params["buckets"] = self._array(sorted(buckets))

        def read(cur: Cursor, ledger: LimitLedger | None) -> list[Any]:
            if ledger is not None:
                params["full"] = self._array(ledger.full())
            return list(cur.execute(self._sql[section], params).fetchall())

        def claim(cur: Cursor) -> list[TaskSnapshot]:
            # A worker's own global limits: their use is counted before the read. Else
            # the read says whether fleet limits are declared (its last column): if
            # none, no limit is read at all; if some, their use is counted and the rows
            # are read again with the full keys left out.
            ledger = self._limit_ledger(cur, global_limits, now) if global_limits else None
            taken: list[TaskSnapshot] = []
            for window in windows:
                params["limit"] = window
                found_rows = read(cur, ledger)
                if ledger is None and found_rows and found_rows[0][-1]:
                    ledger = self._limit_ledger(cur, None, now)
                    if ledger is not None:
                        found_rows = read(cur, ledger)
                self._take_claimable(
                    cur,
                    found_rows,
                    taken,
                    limit=limit,
                    ledger=ledger,
                    owner=owner,
                    now=now,
                    lease_until=lease_until,
                )
                if len(taken) >= limit or len(found_rows) < window:
                    break
            return taken

        return self._run(claim, write=True, atomic=True)

    def _take_claimable(
        self,
        cur: Cursor,
        found_rows: Sequence[Any],
        taken: list[TaskSnapshot],
        *,
        limit: int,
        ledger: LimitLedger | None,
        owner: str,
        now: datetime,
        lease_until: datetime,
    ) -> None:
        """Claim the claimable rows of one read, in order, until ``taken`` has ``limit``."""
        for row in found_rows:
            if len(taken) >= limit:
                break
            found = rows.decode_task(row)
            if not is_claimable(found, now):
                continue
            keys: frozenset[str] = frozenset()
            if ledger is not None:
                keys = ledger.book.keys_of(found.tags, concurrency_key_of(found))
                if keys and not ledger.fits(keys):
                    continue  # full meanwhile (this claim took its last room)
            held = found.replace(owner=owner, lease_owner=owner, lease_until=lease_until)
            update = rows.task_params(held, self._instant, self._array)
            update["expect_version"] = found.status_version
            if not self._dialect.write_task(cur, "update_task_unheld", update, []):
                continue
            if keys:
                assert ledger is not None
                names, starts = ledger.take(keys, now)
                for name in names:
                    slot = {
                        "name": name,
                        "task_id": found.task_id,
                        "owner": owner,
                        "now": self._instant(now),
                        "lease_until": self._instant(lease_until),
                    }
                    cur.execute(self._sql["insert_slot"], slot)
                for start in starts:
                    params = {
                        "key": start.key,
                        "task_id": found.task_id,
                        "now": self._instant(now),
                        "expires_at": self._instant(start.expires_at),
                    }
                    cur.execute(self._sql["insert_start"], params)
            taken.append(held)

    def _limit_ledger(
        self, cur: Cursor, extra: Mapping[str, int] | None, now: datetime
    ) -> LimitLedger | None:
        """Inside a claim's transaction: the limits, and if any, their live use.

        With limits, claims are serialised (a lock on PostgreSQL, ``BEGIN IMMEDIATE``
        on SQLite) before counting, so two claimers never both take the last room.
        """
        book = LimitBook(self._decode_limits(cur.execute(self._sql["select_limits"], {})), extra)
        if not book:
            return None
        self._dialect.lock_slots(cur)
        at = {"now": self._instant(now)}
        cur.execute(self._sql["purge_slots"], at)
        cur.execute(self._sql["purge_starts"], at)
        holders = cur.execute(self._sql["count_slots"], at).fetchall()
        starts = cur.execute(self._sql["count_starts"], at).fetchall()
        return LimitLedger(
            book,
            {str(name): int(n) for name, n in holders},
            {str(key): int(n) for key, n in starts},
        )

    @staticmethod
    def _decode_limits(cur: Cursor) -> list[FleetLimit]:
        return [
            FleetLimit(
                key=str(key),
                concurrency=None if concurrency is None else int(concurrency),
                rate=None if rate is None else parse_rate(rate),
            )
            for key, concurrency, rate in cur.fetchall()
        ]

    def set_limit(self, limit: FleetLimit) -> None:
        params = {
            "key": limit.key,
            "concurrency": limit.concurrency,
            "rate": None if limit.rate is None else str(limit.rate),
            "now": self._instant(self.clock.now()),
        }
        self._run(lambda cur: cur.execute(self._sql["upsert_limit"], params), write=True)
        self.notify_work()

    def delete_limit(self, key: str) -> bool:
        def delete(cur: Cursor) -> bool:
            cur.execute(self._sql["delete_limit"], {"key": key})
            return bool(cur.rowcount)

        found = bool(self._run(delete, write=True))
        if found:
            self.notify_work()
        return found

    def list_limits(self) -> list[FleetLimit]:
        return self._run(
            lambda cur: self._decode_limits(cur.execute(self._sql["select_limits"], {})),
            write=False,
        )

    def list_limit_starts(self) -> list[LimitStart]:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_starts"], {}).fetchall(), write=False
        )
        return [
            LimitStart(
                key=str(key),
                task_id=str(task_id),
                started_at=self._instant_out(started),
                expires_at=self._instant_out(expires),
            )
            for key, task_id, started, expires in found
        ]

    def release_global_slots(self, owner: str, task_id: str) -> int:
        def release(cur: Cursor) -> int:
            cur.execute(self._sql["release_slots"], {"task_id": task_id, "owner": owner})
            return int(cur.rowcount)

        released = int(self._run(release, write=True))
        if released:
            self.notify_work()
        return released

    def list_global_slots(self) -> list[GlobalSlot]:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_slots"], {}).fetchall(), write=False
        )
        return [
            GlobalSlot(
                name=str(name),
                task_id=str(task_id),
                owner=str(owner),
                acquired_at=self._instant_out(acquired),
                lease_until=self._instant_out(until),
            )
            for name, task_id, owner, acquired, until in found
        ]

    def pause_queue(self, pause: QueuePause) -> QueuePause:
        params = {
            "scope": pause.scope,
            "name": pause.name,
            "bucket": pause.bucket,
            "actor": pause.actor,
            "reason": pause.reason,
            "paused_at": self._instant(pause.paused_at),
        }
        self._run(lambda cur: cur.execute(self._sql["upsert_pause"], params), write=True)
        return pause

    def resume_queue(self, scope: str) -> QueuePause | None:
        found = self._run(
            lambda cur: cur.execute(self._sql["delete_pause"], {"scope": scope}).fetchall(),
            write=True,
        )
        if not found:
            return None
        self.notify_work()
        return self._decode_pause(found[0])

    def list_queue_pauses(self) -> list[QueuePause]:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_pauses"], {}).fetchall(), write=False
        )
        return sorted((self._decode_pause(row) for row in found), key=pause_order)

    def _decode_pause(self, row: Any) -> QueuePause:
        name, bucket, actor, reason, paused_at = row
        return QueuePause(
            name=None if name is None else str(name),
            bucket=None if bucket is None else int(bucket),
            actor=str(actor),
            reason=str(reason),
            paused_at=self._instant_out(paused_at),
        )

    def save_unheld(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        self._guarded_update(
            "update_task_unheld", snapshot, expect_version, transitions, atomic=True
        )

    def put_worker(self, record: WorkerRecord) -> None:
        params = {
            "worker_id": record.worker_id,
            "heartbeat_at": self._instant(record.heartbeat_at),
            "doc": dumps(record.to_dict()),
        }
        self._run(lambda cur: cur.execute(self._sql["upsert_worker"], params), write=True)

    def list_workers(self) -> list[WorkerRecord]:
        found = self._run(
            lambda cur: cur.execute(self._sql["select_workers"], {}).fetchall(), write=False
        )
        return [WorkerRecord.from_dict(loads(row[0], "worker record")) for row in found]

    def delete_worker(self, worker_id: str) -> bool:
        def delete(cur: Cursor) -> bool:
            cur.execute(self._sql["delete_worker"], {"worker_id": worker_id})
            return int(cur.rowcount) > 0

        return bool(self._run(delete, write=True))

    # ------------------------------------------------------------ restart recovery

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
        """The contract's path (read, state machine, a guarded write per task), unless
        the dialect marks the tasks its own way (SQLite, by group; never when the
        caller wants the snapshots). PostgreSQL sends the writes in one pipeline."""
        check_lost_query(query)
        if not snapshots:
            marking = Marking(query, clock, actor, trigger, failure)
            marks = self._dialect.mark_lost_grouped(self, marking)
            if marks is not None:
                return marks
        writes = lost_writes(
            self.query(query), clock=clock, actor=actor, trigger=trigger, failure=failure
        )
        return lost_marks(writes, self._dialect.save_distinct(self, writes) if writes else [])

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
            "channel": self._dialect.channel,
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
        wanted = validate_claim(lease, limit, actions)
        self._check_open()
        self._dialect.before_claim()
        now = self.clock.now()
        params = {
            "owner": owner,
            "now": self._instant(now),
            "lease_until": self._instant(now + timedelta(seconds=lease)),
            "limit": limit,
            "kinds": None if kinds is None else self._array(sorted(kinds)),
        }
        # Filtered by action: a statement of its own, so the index on (action, seq)
        # serves it (an "IS NULL OR" on the filter would keep the planner off it).
        if wanted is None:
            section = "claim_commands"
        else:
            section = "claim_commands_actions"
            params["actions"] = self._array(sorted(wanted))
        statement = self._sql[section]
        found = self._run(lambda cur: cur.execute(statement, params).fetchall(), write=True)
        found.sort(key=lambda row: int(row[0]))  # RETURNING has no order: oldest first
        return [rows.decode_command(row[1:], self._instant_out) for row in found]

    def complete_command(self, command_id: str, claim_token: str, result: JSONValue = None) -> None:
        params = {
            "command_id": command_id,
            "claim_token": claim_token,
            "now": self._instant(self.clock.now()),
            "result": encode_json(redact_text_fields(result), "command result"),
        }
        self._settle_claim_or_missing("complete_command", params)

    def release_command(self, command_id: str, claim_token: str) -> None:
        params = {
            "command_id": command_id,
            "claim_token": claim_token,
            "channel": self._dialect.channel,
        }
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
        check_lookup(command_id, "command_id")
        found = self._run(
            lambda cur: cur.execute(
                self._sql["select_command"], {"command_id": command_id}
            ).fetchone(),
            write=False,
        )
        return None if found is None else rows.decode_command(found, self._instant_out)

    def wait_for_commands(self, timeout: float) -> None:
        self._check_open()
        self._dialect.wait(self.clock, timeout, commands_only=True)

    def wait_for_work(self, timeout: float) -> None:
        self._check_open()
        self._dialect.wait(self.clock, timeout)

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
        check_lookup(name, "schedule name")
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
        check_lookup(name, "schedule name")

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


class _CursorRows:
    """The rows of one transaction, for ``stores._dag.settle_dependants``."""

    def __init__(self, store: SqlStore, cur: Cursor) -> None:
        self._store = store
        self._cur = cur

    def get(self, task_id: str) -> TaskSnapshot | None:
        store = self._store
        row = self._cur.execute(store._sql["select_task"], {"task_id": task_id}).fetchone()
        return None if row is None else rows.decode_task(row)

    def put(
        self, snapshot: TaskSnapshot, expect_version: int, transitions: Iterable[Transition]
    ) -> bool:
        params, history = self._store._update_params(snapshot, expect_version, list(transitions))
        return bool(self._store._dialect.write_task(self._cur, "update_task", params, history))

    def members(self, name: str, run: str) -> list[TaskSnapshot]:
        query = TaskQuery(metadata_eq={"pipeline": name, "pipeline_run": run})
        selected = self._store._selection("select_tasks", query)
        if selected is None:
            return []
        statement, params = selected
        return [rows.decode_task(row) for row in self._cur.execute(statement, params).fetchall()]
