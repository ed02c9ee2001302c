"""The persistence contract, split by concern, and ``TaskStore``, the full store.

A store keeps data of very different kinds, each its own abstract class (guide §8.7):

* :class:`TaskRecordStore`, **the task part**: snapshots (``create``/``save``/``get``/
  ``query``, optimistic concurrency on ``status_version``, so two writers never
  silently overwrite each other), the audit trail (``append``/``history``, append-only
  and idempotent) and the side channel (``touch``/``renew_leases``: progress,
  heartbeats, leases and checkpoint gaps, which never move ``status_version``: they
  would otherwise race every state write). Every store has it; it is all a controller
  needs to run, control, wait for and reconcile its own tasks.
* :class:`~chongming_task.stores._command_store.CommandStore`: cross-process control,
  claimed under a lease and fenced by a claim token.
* :class:`~chongming_task.stores._schedule_store.ScheduleStore`: schedule control
  records (compare-and-set on a revision) and firing claims (exactly once per
  schedule and scheduled time).
* :class:`~chongming_task.stores._queue_store.QueueStore`: the work queue (claims of
  queued unheld tasks, global slots) and the worker registry.

:class:`TaskStore` is the first three together: the store the user guide names and
``examples/07_custom_store.py`` implements. The built-in stores are a ``TaskStore`` and
a ``QueueStore``. What a store can do is what it declares: the library asks
``isinstance(store, CommandStore)`` (:func:`chongming_task.stores._capabilities.require`)
and refuses a feature the store lacks with a ``ConfigurationError`` that names the
missing part, never by probing methods.

Every method raises :class:`~chongming_task.errors.StoreError` (the driver's exception
as ``__cause__``) when the backend fails, and a failed write leaves nothing
half-written. ``docs/store-guide.md`` is the long form of this module; the shipped
``chongming_task.testing.store_contract`` is its executable form, one contract per part.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import ClassVar, NamedTuple, Self

from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._model import Failure, Progress, TaskSnapshot, Transition
from chongming_task._validation import check_count, check_lookup
from chongming_task.core import Clock, SystemClock
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.states import TaskStatus
from chongming_task.stores._activity import (
    DURATION_SAMPLE,
    FINISHED,
    Activity,
    build_activity,
    check_window,
    tally,
)
from chongming_task.stores._command_store import CommandStore, validate_actions
from chongming_task.stores._lost import candidate_of, check_lost_query, lost_transition
from chongming_task.stores._queue_records import RECIPE_KEY
from chongming_task.stores._queue_store import QueueStore
from chongming_task.stores._records import (
    OUTCOME_MAX_BYTES,
    ClaimLost,
    Command,
    CorruptRows,
    LostCandidate,
    LostMark,
    ScheduleConflict,
    ScheduleRecord,
    TaskHead,
    TaskNotFound,
    TaskQuery,
    WaitingWork,
)
from chongming_task.stores._scan import count_buckets, count_statuses
from chongming_task.stores._schedule_store import ScheduleStore

__all__ = [
    "OUTCOME_MAX_BYTES",
    "ClaimLost",
    "Command",
    "CommandStore",
    "CorruptRows",
    "LostCandidate",
    "LostMark",
    "QueueStore",
    "ScheduleConflict",
    "ScheduleRecord",
    "ScheduleStore",
    "SnapshotWrite",
    "TaskHead",
    "TaskNotFound",
    "TaskQuery",
    "TaskRecordStore",
    "TaskStore",
    "WaitingWork",
    "refuse_repeated_ids",
    "validate_actions",
]


class SnapshotWrite(NamedTuple):
    """One ``save`` for :meth:`TaskRecordStore.save_many`."""

    snapshot: TaskSnapshot
    expect_version: int
    transitions: Sequence[Transition] = ()


class TaskRecordStore(ABC):
    """The task part: snapshots, their history, the side channel, and lifecycle.

    Implementations must be safe to call from many threads at once. Time (lease
    expiry, timestamps) comes from ``self.clock``, read at call time, so a test can
    swap in a ``FakeClock`` after construction.
    """

    clock: Clock
    #: ``touch`` takes ``checkpoint_gaps=`` and reads return them. A store written
    #: before that side-channel field existed leaves this False and is never passed it.
    keeps_checkpoint_gaps: ClassVar[bool] = False
    #: ``create_batch`` writes all or none (the default writes one ``create`` at a
    #: time). Set it where the override is one transaction; the contract then checks it.
    atomic_create_batch: ClassVar[bool] = False

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock = clock if clock is not None else SystemClock()

    # ------------------------------------------------------------ snapshots

    @abstractmethod
    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """Insert a new task and its first transitions, atomically.

        Raises:
            ConfigurationError: a task with this id exists ("task id 'x' already exists").
            ConfigurationError: the outcome is larger than ``OUTCOME_MAX_BYTES``.
            StoreError: the backend failed; nothing was written.
        """

    def create_batch(self, entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]]) -> None:
        """Insert several new tasks, each with its first transitions: all or none.

        ``Controller.submit_many`` stores a whole batch with one call, so a thousand
        submissions cost one commit instead of a thousand. The default calls
        :meth:`create` per entry, which is **not** atomic: if entry *k* fails, the
        entries before it stay stored and the error says how many; a store that can
        write them in one transaction should override this and declare
        ``atomic_create_batch`` (the built-in stores do).

        Raises:
            ConfigurationError: an id exists already, or appears twice in ``entries``
                (the built-in stores then write none of them).
            StoreError: the backend failed (the built-in stores wrote none of them).
        """
        refuse_repeated_ids(entries)
        for done, (snapshot, transitions) in enumerate(entries):
            try:
                self.create(snapshot, transitions)
            except BaseException as exc:
                if done:
                    exc.add_note(
                        f"{done} task(s) of this batch were stored before it failed "
                        f"({type(self).__name__} does not override create_batch)"
                    )
                raise

    def create_many(self, snapshots: Iterable[TaskSnapshot]) -> int:
        """Insert many new tasks without history (imports, seeding); returns how many.

        The SQL stores batch the rows (PostgreSQL with ``COPY``); the default calls
        ``create`` once per snapshot. A duplicate id raises ``ConfigurationError``.
        """
        count = 0
        for snapshot in snapshots:
            self.create(snapshot)
            count += 1
        return count

    @abstractmethod
    def save(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        """Replace the stored snapshot if its ``status_version`` is ``expect_version``.

        The whole snapshot is written, side-channel fields included; ``transitions``
        are appended in the same atomic write (duplicates ignored, as in ``append``).

        Raises:
            ConcurrencyConflict: the stored version differs; nothing was written.
            TaskNotFound: no such task (a ``StoreError`` and a ``KeyError``).
            ConfigurationError: the outcome is larger than ``OUTCOME_MAX_BYTES``.
            StoreError: the backend failed; nothing was written.
        """

    def save_many(
        self, writes: Sequence[SnapshotWrite]
    ) -> list[ConcurrencyConflict | StoreError | None]:
        """Apply several ``save`` calls, batching them where the backend can (group commit).

        The result lists ``None`` or the error (``ConcurrencyConflict``/``TaskNotFound``)
        per write, in order. Writes to different tasks succeed or fail independently.
        A write that *chains* on an earlier write of the batch (same task, expecting the
        version that write produced) fails when that one failed: it was built on a state
        that never got stored. SQL stores commit the batch once and coalesce a task's
        chain into one row update. A backend failure still raises ``StoreError``.
        """
        results: list[ConcurrencyConflict | StoreError | None] = []
        failed: dict[str, tuple[int, ConcurrencyConflict | TaskNotFound]] = {}
        for write in writes:
            task_id = write.snapshot.task_id
            broken = failed.get(task_id)
            if broken is not None and broken[0] == write.expect_version:
                cause = broken[1]
                error: ConcurrencyConflict | TaskNotFound = (
                    TaskNotFound(task_id)
                    if isinstance(cause, TaskNotFound)
                    else ConcurrencyConflict(task_id, write.expect_version, cause.actual)
                )
                failed[task_id] = (write.snapshot.status_version, error)
                results.append(error)
                continue
            try:
                self.save(
                    write.snapshot,
                    expect_version=write.expect_version,
                    transitions=write.transitions,
                )
            except (ConcurrencyConflict, TaskNotFound) as exc:
                failed[task_id] = (write.snapshot.status_version, exc)
                results.append(exc)
            else:
                failed.pop(task_id, None)
                results.append(None)
        return results

    @abstractmethod
    def get(self, task_id: str) -> TaskSnapshot | None:
        """The stored snapshot, or ``None``. A row that cannot be decoded is a ``StoreError``;
        an id no store can hold (not a string, a NUL byte, a lone surrogate) is a
        ``ConfigurationError`` (``_validation.check_lookup``)."""

    @abstractmethod
    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        """Snapshots matching every filter of ``query``, in ``query.order``, up to ``limit``."""

    def query_heads(self, query: TaskQuery = TaskQuery()) -> list[TaskHead]:  # noqa: B008
        """``(task_id, status, status_version)`` of what ``query`` returns, in the same order.

        For callers that sort many tasks before reading a few in full (``reconcile()``
        after a crash of a busy node): the SQL stores read three columns and decode no
        document. The default derives the heads from ``query``.
        """
        return [
            TaskHead(snapshot.task_id, snapshot.status, snapshot.status_version)
            for snapshot in self.query(query)
        ]

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
        """Move every task ``query`` matches to ``lost`` and release its lease.

        Restart recovery (``reconcile()``) marks a page of tasks per call. Each task
        gets what ``StateMachine.mark_lost(failure(candidate), reason=failure.message,
        release_lease=True)`` would give it: status ``lost``, version + 1, ``updated_at``
        and ``finished_at`` from ``clock``, the failure, ``lease_until`` cleared, and the
        transition record (``actor``, ``trigger``) in the same atomic write.

        Each task is checked against ``query`` and written in one step guarded by its
        version, so a holder that writes first is never overwritten: the task is then
        either not found (it no longer matches) or comes back with ``transition=None``.
        The default reads with ``query`` and writes with ``save_many``.

        Args:
            query: Which tasks; ``statuses`` must be limited to statuses with an edge
                to ``lost`` (the occupying ones).
            clock: The transitions' time (read by each task's state machine).
            actor: Written on every transition.
            trigger: The transitions' trigger.
            failure: The failure of one task (kind ``lost``), from what the row says.
                It must not write to the store (it runs once per task).
            snapshots: Also return the snapshot after each transition (for observers);
                a store may leave them out otherwise.

        Returns:
            One ``LostMark`` per task found, in ``query.order``.

        Raises:
            ConfigurationError: ``query.statuses`` allows a status with no edge to
                ``lost``, or ``failure`` returned a failure of another kind.
            StoreError: The backend failed (a task deleted meanwhile is ``TaskNotFound``).
        """
        check_lost_query(query)
        writes = lost_writes(
            self.query(query), clock=clock, actor=actor, trigger=trigger, failure=failure
        )
        return lost_marks(writes, self.save_many(writes) if writes else [])

    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        """Task counts per status (only statuses present), filtered like ``query``.

        ``limit`` and ``order`` of the query are ignored. The default counts what
        ``query`` returns without its limit; the built-in stores count in place.
        """
        found = self.query(TaskQuery() if query is None else replace(query, limit=None))
        return count_statuses(found)

    def count_tasks(self, query: TaskQuery | None = None) -> int:
        """How many tasks match ``query`` (``limit`` and ``order`` ignored).

        The sum of ``count_by_status`` with the same query, which is the default; the
        built-in stores count without reading each task's status (the dashboard's
        totals per filter), from an index of the filters where one serves them.
        """
        return sum(self.count_by_status(query).values())

    def count_by_bucket(self) -> dict[int, int]:
        """Task counts per bucket, over tasks that have a bucket.

        The default counts what ``query()`` returns; the built-in stores count in place.
        """
        return count_buckets(self.query(TaskQuery()))

    def waiting_work(self) -> dict[int | None, WaitingWork]:
        """The work queue's waiting tasks per bucket (``None``: tasks without a bucket).

        A task waits when it is queued, held by nobody and was enqueued through the work
        queue (an object under ``metadata["recipe"]``), due or not: what a worker owning
        its bucket will claim. Buckets without such a task are left out. ``queue_health``
        (``chongming-task health``, the dashboard) reads its depth and oldest age here.

        The default reads every queued task; the built-in stores count a partial index
        of the waiting tasks and read one row per bucket.
        """
        found: dict[int | None, WaitingWork] = {}
        queued = self.query(TaskQuery(statuses=frozenset({TaskStatus.QUEUED}), order="created"))
        for snapshot in queued:
            if snapshot.owner is not None or not isinstance(
                snapshot.metadata.get(RECIPE_KEY), Mapping
            ):
                continue
            seen = found.get(snapshot.bucket)
            if seen is None:
                since = snapshot.queued_at or snapshot.created_at
                found[snapshot.bucket] = WaitingWork(1, since)
            else:
                found[snapshot.bucket] = seen._replace(depth=seen.depth + 1)
        return found

    def checkpoint_gaps_of(self, name: str, *, limit: int) -> list[tuple[str, CheckpointGaps]]:
        """``(task id, checkpoint gaps)`` of the ``limit`` most recently created tasks
        named exactly ``name`` (ties by insertion order), of those that recorded gaps.

        What ``explain`` merges to judge a task name's stop points. The default reads
        the tasks whose name starts with ``name`` in pages; the built-in stores read
        ``limit`` rows of the name's index range, only the gaps column of each.
        """
        check_lookup(name, "name")
        check_count(limit, "limit")
        read = max(limit, 1) * 2
        while True:
            page = self.query(TaskQuery(name_prefix=name, order="-created", limit=read))
            runs = [s for s in page if s.name == name][:limit]
            if len(runs) == limit or len(page) < read:
                return [
                    (s.task_id, s.checkpoint_gaps) for s in runs if s.checkpoint_gaps is not None
                ]
            read *= 4

    def activity(self, *, since: datetime, until: datetime, step: timedelta) -> Activity:
        """What the dashboard's charts draw: activity over ``[since, until)`` by ``step``.

        Per slot of ``step``: transitions into ``running`` (started), ``succeeded`` and
        ``failed``/``lost`` (failed), from the stored history; per task name, p50/p95 of
        how long the most recent finished tasks ran (a bounded sample); queue depth per
        task bucket now. ``chongming_task.stores._activity`` states the rule.

        The default reads the tasks updated since ``since`` and their histories (a read
        per task); the built-in stores count an index range instead.

        Raises:
            ConfigurationError: A window no chart has (see ``check_window``).
        """
        check_window(since, until, step)
        touched = self.query(TaskQuery(updated_after=since))
        counts = tally(
            (
                (t.at, t.to_status)
                for task in touched
                for t in self.history(task.task_id)
                if since <= t.at < until
            ),
            since,
            until,
            step,
        )
        finished = sorted(
            (s for s in touched if s.status in FINISHED),
            key=lambda s: s.updated_at,
            reverse=True,
        )[:DURATION_SAMPLE]
        queued = Counter(
            s.bucket
            for s in self.query(TaskQuery(statuses=frozenset({TaskStatus.QUEUED})))
            if s.owner is None
        )
        return build_activity(
            since=since,
            until=until,
            step=step,
            counts=counts,
            finished=((s.name, s.started_at, s.finished_at) for s in finished),
            queued=queued,
        )

    @abstractmethod
    def prune(self, keep_terminal: int) -> int:
        """Delete all but the ``keep_terminal`` most recent terminal tasks, with their history.

        "Recent" is by ``updated_at`` (when they finished), ties by insertion order.
        Non-terminal tasks are never pruned. Returns how many tasks were deleted.
        """

    def delete_tasks(self, task_ids: Collection[str]) -> int:
        """Delete these tasks with their history; returns how many tasks were deleted.

        The primitive of age-based retention (``chongming_task._retention``), which
        chooses the ids (finished tasks only). The default refuses: a store that
        cannot delete cannot be pruned by age.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement delete_tasks")

    def delete_transitions(self, task_id: str, versions: Collection[int]) -> int:
        """Delete these transitions of one task (history compaction); returns how many.

        The default refuses, like ``delete_tasks``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement delete_transitions")

    # ------------------------------------------------------------ audit trail

    @abstractmethod
    def append(self, transition: Transition) -> None:
        """Add one transition to the audit trail; a second write of the same
        ``(task_id, version)`` is ignored, so a retried write cannot duplicate history."""

    @abstractmethod
    def history(self, task_id: str) -> list[Transition]:
        """Every stored transition of the task, ordered by ``version`` (empty if none);
        an id as ``get`` refuses it is a ``ConfigurationError``."""

    # ------------------------------------------------------------ side channel

    @abstractmethod
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
        """Overwrite the given side-channel fields (``None`` leaves a field alone).

        Never changes ``status_version``, ``status`` or ``updated_at``, so it cannot
        conflict with state writes. Returns ``False`` when the task does not exist.
        """

    @abstractmethod
    def renew_leases(self, owner: str, task_ids: Collection[str], lease_until: datetime) -> int:
        """Set ``lease_until`` on those of ``task_ids`` whose ``lease_owner`` is ``owner``.

        One write for a whole supervisor's worth of tasks; a task whose lease another
        owner has taken is left alone. A store with global limits renews the global
        slots ``owner`` holds for those tasks to the same instant. Returns how many
        tasks were renewed.
        """

    # ------------------------------------------------------------ lifecycle

    @abstractmethod
    def close(self) -> None:
        """Release every resource (connections, threads) and wake waiters. Idempotent.

        Any later call raises ``StoreError``.
        """

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TaskStore(TaskRecordStore, CommandStore, ScheduleStore):
    """The full store of the user guide: tasks, commands and schedules in one backend.

    Subclass it to write a backend with every part but the work queue; add
    :class:`~chongming_task.stores._queue_store.QueueStore` for workers (the built-in
    stores do). Its contract is ``StoreContract``.
    """


def refuse_repeated_ids(entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]]) -> None:
    """Refuse a batch that names one task id twice, before anything is written.

    Raises:
        ConfigurationError: Names the repeated ids.
    """
    counts = Counter(snapshot.task_id for snapshot, _ in entries)
    twice = sorted(task_id for task_id, n in counts.items() if n > 1)
    if twice:
        raise ConfigurationError(
            f"task ids {twice} appear twice in one batch; nothing of it was stored"
        )


def lost_writes(
    found: Sequence[TaskSnapshot],
    *,
    clock: Clock,
    actor: str,
    trigger: str,
    failure: Callable[[LostCandidate], Failure],
) -> list[SnapshotWrite]:
    """The ``save_many`` writes of the default ``mark_lost_many``: one per snapshot read.

    Shared with stores that override only how the writes are stored (PostgreSQL sends
    them in one pipeline).
    """
    writes: list[SnapshotWrite] = []
    for snapshot in found:
        machine = lost_transition(
            snapshot,
            clock=clock,
            actor=actor,
            trigger=trigger,
            failure=failure(candidate_of(snapshot)),
        )
        writes.append(
            SnapshotWrite(machine.snapshot, snapshot.status_version, machine.transitions[-1:])
        )
    return writes


def lost_marks(
    writes: Sequence[SnapshotWrite], results: Sequence[ConcurrencyConflict | StoreError | None]
) -> list[LostMark]:
    """The marks of ``lost_writes`` given ``save_many``'s results (a conflict: not written).

    Raises:
        StoreError: A write failed for another reason than a conflict.
    """
    marks: list[LostMark] = []
    for write, result in zip(writes, results, strict=True):
        task_id = write.snapshot.task_id
        if isinstance(result, ConcurrencyConflict):
            marks.append(LostMark(task_id, None, None))
        elif result is not None:
            raise result
        else:
            marks.append(LostMark(task_id, write.transitions[-1], write.snapshot))
    return marks
