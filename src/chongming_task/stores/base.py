"""The persistence contract: what every store keeps, and how it behaves under concurrency.

Four kinds of data with different write rates live behind one interface (guide §8.7):

* **snapshots** (``create``/``save``/``get``/``query``): optimistic concurrency on
  ``status_version``, so two writers can never silently overwrite each other;
* **the audit trail** (``append``/``history``): append-only and idempotent;
* **the side channel** (``touch``/``renew_leases``): progress, heartbeats, leases and
  checkpoint gaps, which never move ``status_version`` (they would otherwise race
  every state write);
* **commands** (``submit_command``/``claim_commands``/...): cross-process control,
  claimed under a lease and fenced by a claim token;

plus two records for the scheduler: schedule control records (compare-and-set on a
revision) and firing claims (exactly once per schedule and scheduled time).

Every method raises :class:`~chongming_task.errors.StoreError` (the driver's exception
as ``__cause__``) when the backend fails, and a failed write leaves nothing
half-written. ``docs/store-guide.md`` is the long form of this module; the shipped
``chongming_task.testing.store_contract.StoreContract`` is its executable form.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import ClassVar, NamedTuple, Self

from chongming_task.checkpoint_gaps import CheckpointGaps
from chongming_task.core.clock import Clock, SystemClock
from chongming_task.errors import ConcurrencyConflict, ConfigurationError, StoreError
from chongming_task.model import Failure, JSONValue, Progress, TaskSnapshot, Transition
from chongming_task.states import TaskStatus
from chongming_task.stores._lost import candidate_of, check_lost_query, lost_transition
from chongming_task.stores.global_slots import GlobalSlot
from chongming_task.stores.queue_records import WorkerRecord
from chongming_task.stores.records import (
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
)

__all__ = [
    "OUTCOME_MAX_BYTES",
    "ClaimLost",
    "Command",
    "CorruptRows",
    "LostCandidate",
    "LostMark",
    "ScheduleConflict",
    "ScheduleRecord",
    "SnapshotWrite",
    "TaskHead",
    "TaskNotFound",
    "TaskQuery",
    "TaskStore",
    "refuse_repeated_ids",
    "validate_actions",
]


def validate_actions(actions: Collection[str] | None) -> frozenset[str] | None:
    """The ``actions`` filter of :meth:`TaskStore.claim_commands`, checked and frozen.

    A bare string is refused rather than read as a set of one-letter actions (which
    would silently claim nothing), and so is an empty collection: a claimer that asks
    for no action at all would never get a command, and never say why.

    Raises:
        ConfigurationError: ``actions`` is a string, is empty, or holds anything but
            non-empty strings.
    """
    if actions is None:
        return None
    if isinstance(actions, str | bytes):
        raise ConfigurationError(
            f"actions must be a collection of action names, not the string {actions!r} "
            f"(did you mean ({actions!r},)?)"
        )
    names = frozenset(actions)
    if not names:
        raise ConfigurationError("actions must name at least one action (None claims any)")
    bad = sorted(repr(name) for name in names if not isinstance(name, str) or not name)
    if bad:
        raise ConfigurationError(f"actions must be non-empty strings; got {', '.join(bad)}")
    return names


class SnapshotWrite(NamedTuple):
    """One ``save`` for :meth:`TaskStore.save_many`."""

    snapshot: TaskSnapshot
    expect_version: int
    transitions: Sequence[Transition] = ()


class TaskStore(ABC):
    """Where snapshots, history, commands and schedule records live.

    Implementations must be safe to call from many threads at once. Time (lease
    expiry, ``updated_at`` of schedules, command timestamps) comes from ``self.clock``,
    read at call time, so a test can swap in a ``FakeClock`` after construction.
    """

    clock: Clock
    #: ``touch`` takes ``checkpoint_gaps=`` and reads return them. A store written
    #: before that side-channel field existed leaves this False and is never passed it.
    keeps_checkpoint_gaps: ClassVar[bool] = False

    supports_global_limits: ClassVar[bool] = False
    """Whether :meth:`claim_queued` takes ``global_limits`` (lease-backed slots across
    processes, with :meth:`release_global_slots` and :meth:`list_global_slots`)."""

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
        write them in one transaction should override this (the built-in stores do).

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
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
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
        """The stored snapshot, or ``None``. A row that cannot be decoded is a ``StoreError``."""

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

    @abstractmethod
    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        """Task counts per status (only statuses present), filtered like ``query``.

        ``limit`` and ``order`` of the query are ignored.
        """

    @abstractmethod
    def count_by_bucket(self) -> dict[int, int]:
        """Task counts per bucket, over tasks that have a bucket."""

    @abstractmethod
    def prune(self, keep_terminal: int) -> int:
        """Delete all but the ``keep_terminal`` most recent terminal tasks, with their history.

        "Recent" is by ``updated_at`` (when they finished), ties by insertion order.
        Non-terminal tasks are never pruned. Returns how many tasks were deleted.
        """

    def delete_tasks(self, task_ids: Collection[str]) -> int:
        """Delete these tasks with their history; returns how many tasks were deleted.

        The primitive of age-based retention (``chongming_task.retention``), which
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
        """Every stored transition of the task, ordered by ``version`` (empty if none)."""

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

    # ------------------------------------------------------------ commands

    @abstractmethod
    def submit_command(self, command: Command) -> Command:
        """Store a pending command and wake waiters; returns the stored command.

        Submitting a ``command_id`` that already exists is idempotent: the stored
        command is returned unchanged (a retried submit cannot issue twice).
        """

    @abstractmethod
    def claim_commands(
        self,
        owner: str,
        *,
        lease: float,
        limit: int = 10,
        kinds: Collection[str] | None = None,
        actions: Collection[str] | None = None,
    ) -> list[Command]:
        """Claim up to ``limit`` commands for ``owner`` for ``lease`` seconds.

        Eligible: pending commands whose ``target_owner`` is ``owner`` or ``None``, and
        claimed ones (same owner rule) whose lease has expired; only those of the given
        ``kinds`` and ``actions`` when these are given. Each returned command has a
        fresh ``claim_token``, ``claimed_by=owner`` and ``claims`` incremented. No
        command is ever returned to two callers with overlapping leases.

        Order: highest :attr:`Command.claim_priority` first, then oldest first (in
        submission order; a released or expired command keeps its place), and the
        list is returned in that order. Only worker submissions have a priority other
        than 0, so workers take the most urgent submission first while every other
        command stays oldest first.

        ``actions`` exists so that a claimer never holds a command it would only hand
        back: while a controller's poller held a worker's ``submit`` for an instant, a
        worker claiming then took a later submission first. Check it with
        :func:`validate_actions`. Callers pass it only to stores whose
        ``claim_commands`` accepts it, so a store written before it keeps working.

        Raises:
            ConfigurationError: ``lease <= 0``, ``limit < 1``, or ``actions`` is not
                ``None`` nor a non-empty collection of non-empty names.
        """

    @abstractmethod
    def complete_command(self, command_id: str, claim_token: str, result: JSONValue = None) -> None:
        """Mark a claimed command done with ``result``.

        Raises:
            ClaimLost: the token is not the current claim (expired and re-claimed,
                released, or already completed).
            StoreError: no such command, or the backend failed.
        """

    @abstractmethod
    def release_command(self, command_id: str, claim_token: str) -> None:
        """Give a claimed command back (pending, no claimant) so its rightful owner gets it.

        Raises ``ClaimLost``/``StoreError`` like ``complete_command``.
        """

    @abstractmethod
    def extend_command(self, command_id: str, claim_token: str, lease: float) -> None:
        """Push the claim's lease to ``now + lease`` while the work is still going on.

        Raises ``ClaimLost``/``StoreError`` like ``complete_command``.
        """

    @abstractmethod
    def get_command(self, command_id: str) -> Command | None:
        """The command as stored, or ``None``."""

    @abstractmethod
    def wait_for_commands(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds (of ``self.clock``) until a command may have arrived.

        A hint, not a guarantee: callers claim after it returns either way. Returns at
        once if a command was submitted since this thread's last ``claim_commands``,
        and promptly when the store is closed.
        """

    # ------------------------------------------------------------ work queue

    def notify_work(self) -> None:
        """Wake the workers waiting in :meth:`wait_for_commands`: queued work arrived.

        A hint like every wake-up (workers poll anyway). The default does nothing.
        """
        return

    def claim_queued(
        self,
        owner: str,
        *,
        buckets: Collection[int] | None,
        limit: int,
        lease_until: datetime,
        global_limits: Mapping[str, int] | None = None,
    ) -> list[TaskSnapshot]:
        """Take up to ``limit`` queued unheld tasks for ``owner``, atomically.

        Eligible: status ``queued``, ``owner`` ``None``, a recipe
        (:func:`~chongming_task.stores.queue_records.recipe_of`) that is due (its
        ``not_before`` has passed, by ``self.clock``), and a bucket among ``buckets``
        (``None``: any task, with or without a bucket). Order: highest ``priority``
        first, oldest first within a priority. Each taken task gets ``owner``,
        ``lease_owner=owner`` and ``lease_until`` in the same write; its status and
        ``status_version`` do not change (the claimer's state machine takes the next
        edge). No task is ever returned to two callers: a row another claimer holds
        is skipped, and a stop written first (:meth:`save_unheld`) wins.

        ``global_limits`` (tag -> slots; only on a store whose
        ``supports_global_limits`` is true) limits holders across processes: a task
        carrying such a tag is taken only if every such limit has fewer live holders
        (:class:`~chongming_task.stores.global_slots.GlobalSlot` rows whose
        ``lease_until`` has not passed) than its number, and then gets one slot of each,
        leased until ``lease_until``, in the same atomic write. A task that does not fit
        is skipped (it stays queued and unheld) and the scan goes on past it, so it
        never holds back tasks of other limits. Claims that involve global limits are
        serialised, so two claimers never both take the last slot.

        Returns the snapshots as stored. The default raises ``ConfigurationError``:
        a store without it cannot feed workers.
        """
        raise ConfigurationError(f"{type(self).__name__} does not support the work queue")

    def save_unheld(
        self,
        snapshot: TaskSnapshot,
        *,
        expect_version: int,
        transitions: Sequence[Transition] = (),
    ) -> None:
        """:meth:`save`, only if the stored task is still held by nobody (``owner`` None).

        How a stop, pause or resume of a queued unheld task is written from any
        process: it races :meth:`claim_queued` and exactly one of the two wins.

        Raises:
            ConcurrencyConflict: The version differs or a worker claimed the task.
        """
        stored = self.get(snapshot.task_id)
        if stored is None:
            raise TaskNotFound(snapshot.task_id)
        if stored.owner is not None:
            raise ConcurrencyConflict(snapshot.task_id, expect_version, stored.status_version)
        self.save(snapshot, expect_version=expect_version, transitions=transitions)

    def release_global_slots(self, owner: str, task_id: str) -> int:
        """Give back the global slots ``task_id`` holds for ``owner`` (the task ended).

        Returns how many were released and wakes waiting claimers when any was. A
        holder that never calls it gives them back when their lease passes. The
        default holds none (returns 0).
        """
        return 0

    def list_global_slots(self) -> list[GlobalSlot]:
        """Every slot row of the global limits, expired ones included (see
        :meth:`GlobalSlot.live`), by name then acquisition. Empty by default."""
        return []

    def put_worker(self, record: WorkerRecord) -> None:
        """Insert or replace a worker's registry record (its heartbeat)."""
        raise ConfigurationError(f"{type(self).__name__} has no worker registry")

    def list_workers(self) -> list[WorkerRecord]:
        """Every registered worker, by id (empty for a store without a registry)."""
        return []

    def delete_worker(self, worker_id: str) -> bool:
        """Forget a worker's record; ``False`` if there was none."""
        return False

    # ------------------------------------------------------------ schedules

    @abstractmethod
    def put_schedule(
        self, name: str, data: Mapping[str, JSONValue], *, expect_revision: int | None
    ) -> ScheduleRecord:
        """Insert (``expect_revision=None``) or compare-and-set a schedule record.

        Raises:
            ScheduleConflict: the insert found the record, or the revision differs.
        """

    @abstractmethod
    def get_schedule(self, name: str) -> ScheduleRecord | None:
        """The record, or ``None``."""

    @abstractmethod
    def list_schedules(self) -> list[ScheduleRecord]:
        """Every record, ordered by name."""

    @abstractmethod
    def delete_schedule(self, name: str) -> bool:
        """Delete the record (its firing claims stay); ``False`` if there was none."""

    @abstractmethod
    def claim_firing(self, schedule: str, scheduled_at: datetime, owner: str, task_id: str) -> bool:
        """Claim one firing; ``True`` for exactly one caller per (schedule, instant).

        ``scheduled_at`` is compared as an instant: the same moment in two timezones
        is the same firing. Exactly once holds across threads and processes.
        """

    def prune_firings(self, before: datetime) -> int:
        """Forget firing claims scheduled before ``before``; returns how many.

        Claims only need to outlive the window in which two schedulers could race for
        the same firing. The default keeps everything (returns 0).
        """
        return 0

    # ------------------------------------------------------------ lifecycle

    @abstractmethod
    def close(self) -> None:
        """Release every resource (connections, threads) and wake waiters. Idempotent.

        Any later call raises ``StoreError``.
        """

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


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
