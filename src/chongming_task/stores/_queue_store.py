"""The work-queue concern of a store: queued unheld tasks, their claims, the workers.

``Client.enqueue`` stores a task ``queued`` with no holder and a recipe (a registered
name and JSON arguments); any worker that owns its bucket claims it atomically with
:meth:`QueueStore.claim_queued` and runs it as a local submit. Workers announce
themselves in the registry (:meth:`QueueStore.put_worker`), which bucket verdicts and
``explain`` read. Fleet limits (``stores/_limits.py``: concurrency and starts per window
per key, declared in the store, enforced inside the claim) are an optional part,
declared by :attr:`QueueStore.supports_global_limits`, and so are paused queues
(``stores/_pauses.py``: a task name or a bucket whose queued tasks no claim takes),
declared by :attr:`QueueStore.supports_queue_pauses`.

A store without this concern runs every in-process feature; ``Client``, ``Worker``
and the bucket agent refuse it with a ``ConfigurationError``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar, cast

from chongming_task._model import TaskSnapshot, Transition
from chongming_task.errors import ConfigurationError
from chongming_task.stores._codec import require_aware
from chongming_task.stores._limits import FleetLimit, GlobalSlot, LimitStart, LimitUse, limit_uses
from chongming_task.stores._pauses import QueuePause
from chongming_task.stores._queue_records import WorkerRecord

if TYPE_CHECKING:
    from chongming_task.stores._base import TaskRecordStore

__all__ = ["QueueStore", "claims_nothing", "fleet_view"]


def claims_nothing(buckets: Collection[int] | None, limit: int, lease_until: datetime) -> bool:
    """Whether :meth:`QueueStore.claim_queued` with these arguments takes no task
    (``limit`` below 1, or an empty ``buckets``), after refusing a naive ``lease_until``.

    Raises:
        ConfigurationError: ``lease_until`` is a naive datetime.
    """
    require_aware(lease_until, "lease_until")
    return limit < 1 or (buckets is not None and not buckets)


class QueueStore(ABC):
    """Claims of queued unheld tasks, the global slots they take, the worker registry.

    Implemented beside the task part (the claims write task rows), so a class that
    implements it also implements :class:`~chongming_task.stores._base.TaskRecordStore`.
    """

    supports_global_limits: ClassVar[bool] = False
    """Whether the store keeps fleet limits: :meth:`set_limit` and the others, and
    :meth:`claim_queued` obeying them and a worker's ``global_limits``."""

    supports_queue_pauses: ClassVar[bool] = False
    """Whether the store keeps paused queues: :meth:`pause_queue` and the others, and
    :meth:`claim_queued` passing over the queued tasks of a paused queue."""

    def notify_work(self) -> None:
        """Wake the workers waiting in :meth:`wait_for_work`: queued work arrived.

        A hint like every wake-up (workers poll anyway). The default does nothing.
        """
        return

    def wait_for_work(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds (of the store's clock) until queued work or a
        command may have arrived (a worker's intake between two claims).

        A hint like ``wait_for_commands``: callers claim after it returns either way.
        :meth:`notify_work` wakes it, and so does everything that wakes
        ``wait_for_commands``; ``wait_for_commands`` itself need not wake for work.
        The default is ``wait_for_commands``.
        """
        from chongming_task.stores._command_store import CommandStore

        if not isinstance(self, CommandStore):
            raise ConfigurationError(
                f"{type(self).__name__}.wait_for_work: the default waits for commands, and "
                "this store has no command part (CommandStore); implement wait_for_work"
            )
        self.wait_for_commands(timeout)

    def create_queued(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        """Create a task that waits ``queued`` and wake the workers (``Client.enqueue``).

        As ``create`` then :meth:`notify_work` (the default), in one write where the
        backend can: a worker woken by it finds the task, and no task is stored whose
        wake-up still has to be sent.

        Raises:
            DuplicateTaskId: A task with this id exists (nothing written, nobody woken).
        """
        tasks = cast("TaskRecordStore", self)  # the task part lives beside this one
        tasks.create(snapshot, transitions)
        self.notify_work()

    def create_unique(
        self,
        entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        finished_since: datetime | None = None,
    ) -> list[tuple[str, bool]]:
        """Create each entry unless a task with its unique key stands; all in one atomic step.

        An entry's key is ``metadata["unique_key"]``
        (:func:`~chongming_task.stores._queue_records.unique_key_of`); an entry without
        one is created as by ``create_batch``. A task created by this method with the
        same key *stands* while it is not terminal, or when it finished at or after
        ``finished_since`` (the ``unique_for`` window; ``None``: only unfinished ones
        count). Earlier entries of the same call count too. The decision and the
        inserts are one transaction serialised per key (the store's constraint: at most
        one unfinished task per key), so callers racing on one key from any number of
        processes create one task.

        Returns, per entry, the id of the task that stands for it and whether this call
        created it (an unfinished standing task first, else the one that finished last).

        Raises:
            DuplicateTaskId: An entry to be created has a taken id; nothing is stored.
            ConfigurationError: The store does not enforce unique keys (the default).
        """
        raise ConfigurationError(
            f"unique_key needs a store that enforces unique keys; {type(self).__name__} "
            "does not (the built-in stores do)"
        )

    def create_in_transaction(
        self,
        connection: object,
        entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        finished_since: datetime | None = None,
    ) -> list[tuple[str, bool]]:
        """:meth:`create_unique` and :meth:`notify_work` inside the caller's open
        transaction on ``connection`` (a driver connection to the store's database):
        they commit with it, and a rollback leaves neither task nor wake-up. Nothing
        is committed here; a failure undoes only this call's writes.

        Raises:
            ConfigurationError: ``connection`` is not usable for this store (another
                driver or database, no transaction to join), or the store keeps its
                tasks where no caller's transaction reaches (the default).
            DuplicateTaskId: As :meth:`create_unique`.
        """
        raise ConfigurationError(
            f"enqueue(connection=...) writes inside your database transaction; "
            f"{type(self).__name__} is not in a database you hold a connection to. Use "
            "SqliteTaskStore or PostgresTaskStore, or drop connection= to enqueue at once"
        )

    @abstractmethod
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
        (:func:`~chongming_task.stores._queue_records.recipe_of`) that is due (its
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
        (:class:`~chongming_task.stores._limits.GlobalSlot` rows whose
        ``lease_until`` has not passed) than its number, and then gets one slot of each,
        leased until ``lease_until``, in the same atomic write. A task that does not fit
        is skipped (it stays queued and unheld) and the scan goes on past it, so it
        never holds back tasks of other limits. Claims that involve global limits are
        serialised, so two claimers never both take the last slot.

        On a store whose ``supports_queue_pauses`` is true, a task of a paused queue
        (:meth:`pause_queue`: its name or its bucket) is not eligible, decided in the
        same statement (or under the same lock) as the claim.

        Returns the snapshots as stored.
        """

    @abstractmethod
    def save_unheld(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        """``save``, only if the stored task is still held by nobody (``owner`` None).

        How a stop, pause or resume of a queued unheld task is written from any
        process: it races :meth:`claim_queued` and exactly one of the two wins.

        One atomic step (a version- and owner-guarded write), never a read then a write:
        a claim between the two would be overwritten.

        Raises:
            ConcurrencyConflict: The version differs or a worker claimed the task.
            TaskNotFound: No such task.
        """

    def release_global_slots(self, owner: str, task_id: str) -> int:
        """Give back the global slots ``task_id`` holds for ``owner`` (the task ended).

        Returns how many were released and wakes waiting claimers when any was. A
        holder that never calls it gives them back when their lease passes. The
        default holds none (returns 0).
        """
        return 0

    def list_global_slots(self) -> list[GlobalSlot]:
        """Every slot row of the concurrency limits, expired ones included (see
        :meth:`GlobalSlot.live`), by name then acquisition. Empty by default."""
        return []

    def set_limit(self, limit: FleetLimit) -> None:
        """Declare (or replace) the fleet limit of ``limit.key``; wakes the claimers.

        Raises:
            ConfigurationError: The store keeps no fleet limits.
        """
        raise ConfigurationError(
            f"{type(self).__name__} keeps no fleet limits (QueueStore.supports_global_limits)"
        )

    def delete_limit(self, key: str) -> bool:
        """Forget the fleet limit of ``key``; ``False`` if there was none."""
        return False

    def list_limits(self) -> list[FleetLimit]:
        """The declared fleet limits, by key. Empty by default."""
        return []

    def list_limit_starts(self) -> list[LimitStart]:
        """The starts counted by rate limits (expired ones may be included, see
        :meth:`LimitStart.live`), oldest first. Empty by default."""
        return []

    # ------------------------------------------------------------ paused queues

    def pause_queue(self, pause: QueuePause) -> QueuePause:
        """Pause ``pause``'s queue (or replace who, why and when of a paused one).

        From the next claim on, no claimer takes its queued tasks; running ones go on.
        Returns the pause as stored.

        Raises:
            ConfigurationError: The store keeps no paused queues.
        """
        raise ConfigurationError(
            f"{type(self).__name__} keeps no paused queues (QueueStore.supports_queue_pauses)"
        )

    def resume_queue(self, scope: str) -> QueuePause | None:
        """Resume the queue of ``scope`` (:attr:`QueuePause.scope`) and wake the claimers.

        Returns the pause it ended, ``None`` if that queue was not paused.
        """
        return None

    def list_queue_pauses(self) -> list[QueuePause]:
        """The paused queues: names first, then buckets, each sorted. Empty by default."""
        return []

    # ------------------------------------------------------------ worker registry

    @abstractmethod
    def put_worker(self, record: WorkerRecord) -> None:
        """Insert or replace a worker's registry record (its heartbeat)."""

    @abstractmethod
    def list_workers(self) -> list[WorkerRecord]:
        """Every registered worker, by id."""

    @abstractmethod
    def delete_worker(self, worker_id: str) -> bool:
        """Forget a worker's record; ``False`` if there was none."""


def fleet_view(store: object) -> list[tuple[FleetLimit, list[LimitUse]]]:
    """Each declared limit of ``store`` (a ``QueueStore``) with the use of every key it
    bounds that has holders or starts now (the CLI's ``limits`` and the dashboard)."""
    if not isinstance(store, QueueStore) or not store.supports_global_limits:
        return []
    limits = store.list_limits()
    if not limits:
        return []
    now = store.clock.now()  # type: ignore[attr-defined]
    slots = store.list_global_slots()
    starts = store.list_limit_starts()
    keys = {s.name for s in slots if s.live(now)} | {s.key for s in starts if s.live(now)}
    uses = limit_uses(keys, limits, slots, starts, now)
    return [(limit, [u for u in uses if u.rule == limit.key]) for limit in limits]
