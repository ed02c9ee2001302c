"""The in-process reference store: the contract's semantics with nothing in the way.

Everything sits in dictionaries behind one lock, so every method is trivially atomic
and linearisable; the SQL stores are checked against the same contract suite. Task
snapshots are kept as the frozen objects they are (no encoding on the hot path: the
controller writes once per transition), commands and schedule data are copied through
JSON so a caller can never alias the stored state. Treat returned objects as read-only.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from chongming_task._checkpoint_gaps import CheckpointGaps
from chongming_task._model import Progress, TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._validation import check_count, check_items, check_lookup
from chongming_task.core import Clock
from chongming_task.errors import (
    ConcurrencyConflict,
    DuplicateTaskId,
    StoreError,
)
from chongming_task.states import TaskStatus
from chongming_task.stores._activity import (
    FINISHED,
    Activity,
    build_activity,
    check_window,
    tally,
)
from chongming_task.stores._base import TaskHead, TaskNotFound, TaskQuery, refuse_repeated_ids
from chongming_task.stores._codec import check_outcome, require_aware
from chongming_task.stores._dag import DAG_KEY, settle_dependants
from chongming_task.stores._limits import (
    FleetLimit,
    GlobalSlot,
    LimitBook,
    LimitLedger,
    LimitStart,
)
from chongming_task.stores._memory_control import MemoryControl
from chongming_task.stores._pauses import QueuePause, pause_of, pause_order
from chongming_task.stores._queue_records import (
    WorkerRecord,
    concurrency_key_of,
    is_claimable,
    unique_key_of,
    unique_stands,
    unique_taken,
)
from chongming_task.stores._queue_store import QueueStore, claims_nothing
from chongming_task.stores._scan import (
    count_buckets,
    count_statuses,
    order_key,
    order_rows,
    prune_choice,
    touch_changes,
)

__all__ = ["InMemoryTaskStore"]


@dataclass(slots=True)
class _Row:
    seq: int
    snapshot: TaskSnapshot
    unique: str | None = None
    """The unique key, for a task made by ``create_unique``."""


@public
class InMemoryTaskStore(MemoryControl, QueueStore):
    """Dictionaries behind one lock: for single-process use, unit tests and as the reference."""

    keeps_checkpoint_gaps = True
    atomic_create_batch = True
    supports_global_limits = True
    supports_queue_pauses = True

    def __init__(self, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self._seq = itertools.count(1)
        self._tasks: dict[str, _Row] = {}
        # Per task, oldest first and one per version: a list, because a small dict per
        # task costs three times as much and 100,000 queued tasks are a normal load.
        self._history: dict[str, list[Transition]] = {}
        self._workers: dict[str, WorkerRecord] = {}
        self._slots: dict[tuple[str, str], GlobalSlot] = {}  # (name, task_id) -> holder
        self._unique: dict[str, list[str]] = {}  # unique key -> its tasks' ids, oldest first
        self._limits: dict[str, FleetLimit] = {}
        self._starts: list[LimitStart] = []  # oldest first
        self._pauses: dict[str, QueuePause] = {}  # scope -> pause

    # ------------------------------------------------------------ snapshots

    # ``create`` and ``save`` run three times per task from several threads. Their
    # locked sections hold the lock itself (a C call, not ``_locked()``), and the usual
    # case makes no Python call under it: a Python call is where CPython may hand the
    # GIL to another thread, and one that then wants this lock starts a lock convoy
    # (every later acquisition a context switch) that halved W1 in some rounds.

    def create(self, snapshot: TaskSnapshot, transitions: Sequence[Transition] = ()) -> None:
        check_outcome(snapshot.outcome, snapshot.task_id)
        task_id = snapshot.task_id
        row = _Row(0, snapshot)
        fresh = list(transitions)
        own = bool(fresh)  # every record of this task, versions strictly increasing
        last = -1
        for record in fresh:
            if record.task_id != task_id or record.version <= last:
                own = False
                break
            last = record.version
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            if task_id in self._tasks:
                raise DuplicateTaskId(
                    task_id,
                    f"task id {task_id!r} already exists in the store; "
                    "choose another task_id or load the existing task",
                )
            row.seq = next(self._seq)
            self._tasks[task_id] = row
            if own and task_id not in self._history:
                self._history[task_id] = fresh  # the usual case: a new task's first records
            elif fresh:
                self._append_locked(fresh)

    def create_batch(self, entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]]) -> None:
        refuse_repeated_ids(entries)
        for snapshot, _ in entries:
            check_outcome(snapshot.outcome, snapshot.task_id)
        with self._locked():
            taken = [s.task_id for s, _ in entries if s.task_id in self._tasks]
            if taken:
                raise DuplicateTaskId(
                    taken[0],
                    f"task ids {taken} already exist in the store; nothing of this batch "
                    "was stored, choose other task ids",
                )
            for snapshot, transitions in entries:
                self._tasks[snapshot.task_id] = _Row(next(self._seq), snapshot)
                self._append_locked(transitions)

    def save(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        self._replace(snapshot, expect_version, transitions, unheld=False)

    def _replace(
        self,
        snapshot: TaskSnapshot,
        expect_version: int,
        transitions: Sequence[Transition],
        *,
        unheld: bool,
    ) -> None:
        """``save``; with ``unheld``, only while nobody holds the stored task (``owner``)."""
        check_outcome(snapshot.outcome, snapshot.task_id)
        task_id = snapshot.task_id
        one = transitions[0] if len(transitions) == 1 else None
        if one is not None and one.task_id != task_id:
            one = None
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            row = self._tasks.get(task_id)
            if row is None:
                raise TaskNotFound(task_id)
            stored = row.snapshot
            if stored.status_version != expect_version or (unheld and stored.owner is not None):
                raise ConcurrencyConflict(task_id, expect_version, stored.status_version)
            if row.unique is not None:
                self._refuse_second_unfinished(row, snapshot)
            row.snapshot = snapshot
            trail = self._history.get(task_id)
            if one is not None and trail and one.version > trail[-1].version:
                trail.append(one)  # the usual case: the next record of the task
            elif transitions:
                self._append_locked(transitions)
            if DAG_KEY not in snapshot.metadata:
                return
            # A fleet pipeline node: its dependants are judged under this same lock.
            released = settle_dependants(_LockedRows(self), [snapshot], clock=self.clock)
        if released:
            self._signal.notify(work=True)

    def _refuse_second_unfinished(self, row: _Row, snapshot: TaskSnapshot) -> None:
        """A retry may not give ``row``'s unique key a second unfinished task (the SQL
        stores' partial unique index refuses the same write). Called with the lock held."""
        if snapshot.is_terminal or not row.snapshot.is_terminal:
            return
        key = row.unique
        assert key is not None
        for other in self._unique.get(key, ()):
            found = self._tasks.get(other)
            if found is not None and found is not row and not found.snapshot.is_terminal:
                raise unique_taken(snapshot.task_id, key)

    def create_unique(
        self,
        entries: Sequence[tuple[TaskSnapshot, Sequence[Transition]]],
        *,
        finished_since: datetime | None = None,
    ) -> list[tuple[str, bool]]:
        refuse_repeated_ids(entries)
        for snapshot, _ in entries:
            check_outcome(snapshot.outcome, snapshot.task_id)
        with self._locked():
            results: list[tuple[str, bool]] = []
            made: dict[str, str] = {}  # key -> id created earlier in this call
            fresh: list[tuple[TaskSnapshot, Sequence[Transition], str | None]] = []
            for snapshot, transitions in entries:
                key = unique_key_of(snapshot)
                standing = None
                if key is not None:
                    standing = made.get(key) or self._standing_locked(key, finished_since)
                if standing is not None:
                    results.append((standing, False))
                    continue
                if snapshot.task_id in self._tasks:
                    raise DuplicateTaskId(
                        snapshot.task_id,
                        f"task id {snapshot.task_id!r} already exists in the store; nothing "
                        "of this batch was stored, choose another task_id",
                    )
                if key is not None:
                    made[key] = snapshot.task_id
                fresh.append((snapshot, transitions, key))
                results.append((snapshot.task_id, True))
            for snapshot, transitions, key in fresh:
                self._tasks[snapshot.task_id] = _Row(next(self._seq), snapshot, key)
                self._append_locked(transitions)
                if key is not None:
                    self._unique.setdefault(key, []).append(snapshot.task_id)
            return results

    def _standing_locked(self, key: str, finished_since: datetime | None) -> str | None:
        """The task that stands for ``key`` (see ``create_unique``); forgets deleted ids."""
        rows = [self._tasks.get(task_id) for task_id in self._unique.get(key, ())]
        mine = [row for row in rows if row is not None and row.unique == key]
        if mine:
            self._unique[key] = [row.snapshot.task_id for row in mine]
        else:
            self._unique.pop(key, None)
        best: tuple[datetime, str] | None = None
        for row in mine:
            found = row.snapshot
            if not found.is_terminal:
                return found.task_id
            at = found.finished_at
            if at is not None and unique_stands(found.status, at, finished_since):
                best = max(best or (at, found.task_id), (at, found.task_id))
        return None if best is None else best[1]

    def get(self, task_id: str) -> TaskSnapshot | None:
        check_lookup(task_id)
        with self._locked():
            row = self._tasks.get(task_id)
            return None if row is None else row.snapshot

    def query(self, query: TaskQuery = TaskQuery()) -> list[TaskSnapshot]:  # noqa: B008
        with self._locked():
            found = [row for row in self._candidates(query) if query.matches(row.snapshot)]
        return order_rows(found, query)

    def query_heads(self, query: TaskQuery = TaskQuery()) -> list[TaskHead]:  # noqa: B008
        return [
            TaskHead(snapshot.task_id, snapshot.status, snapshot.status_version)
            for snapshot in InMemoryTaskStore.query(self, query)
        ]

    def _candidates(self, query: TaskQuery | None) -> Iterable[_Row]:
        """The rows a query can match: only the named ones when it names task ids.

        ``reconcile()`` reads a node's lost tasks a page of ids at a time; scanning every
        task for each page would make it quadratic. Called with the lock held.
        """
        if query is None or query.task_ids is None:
            return self._tasks.values()
        found = (self._tasks.get(task_id) for task_id in query.task_ids)
        return [row for row in found if row is not None]

    def count_by_status(self, query: TaskQuery | None = None) -> dict[TaskStatus, int]:
        with self._locked():
            return count_statuses((row.snapshot for row in self._candidates(query)), query)

    def count_by_bucket(self) -> dict[int, int]:
        with self._locked():
            return count_buckets(row.snapshot for row in self._tasks.values())

    def activity(self, *, since: datetime, until: datetime, step: timedelta) -> Activity:
        """The charts' activity (``TaskRecordStore.activity``), read in place under the lock."""
        check_window(since, until, step)
        with self._locked():
            rows = self._tasks.values()
            touched = [row.snapshot for row in rows if row.snapshot.updated_at >= since]
            counts = tally(
                (
                    (t.at, t.to_status)
                    for snapshot in touched
                    for t in self._history.get(snapshot.task_id, ())
                ),
                since,
                until,
                step,
            )
            queued = Counter(
                row.snapshot.bucket
                for row in self._tasks.values()
                if row.snapshot.status is TaskStatus.QUEUED and row.snapshot.owner is None
            )
        finished = sorted(
            (s for s in touched if s.status in FINISHED), key=lambda s: s.updated_at, reverse=True
        )
        return build_activity(
            since=since,
            until=until,
            step=step,
            counts=counts,
            finished=((s.name, s.started_at, s.finished_at) for s in finished),
            queued=queued,
        )

    def prune(self, keep_terminal: int) -> int:
        with self._locked():
            doomed = prune_choice(self._tasks.values(), keep_terminal)
            for snapshot in doomed:
                del self._tasks[snapshot.task_id]
                self._history.pop(snapshot.task_id, None)
            return len(doomed)

    def delete_tasks(self, task_ids: Collection[str]) -> int:
        ids = {check_lookup(t, "task_ids[]") for t in check_items(task_ids, "task_ids")}
        with self._locked():
            deleted = 0
            for task_id in ids:
                if self._tasks.pop(task_id, None) is not None:
                    deleted += 1
                self._history.pop(task_id, None)
            return deleted

    def delete_transitions(self, task_id: str, versions: Collection[int]) -> int:
        check_lookup(task_id)
        doomed = {check_count(v, "versions[]") for v in check_items(versions, "versions")}
        with self._locked():
            kept = [t for t in self._history.get(task_id, []) if t.version not in doomed]
            removed = len(self._history.get(task_id, [])) - len(kept)
            if task_id in self._history:
                self._history[task_id] = kept
            return removed

    # ------------------------------------------------------------ audit trail

    def append(self, transition: Transition) -> None:
        with self._locked():
            self._append_locked((transition,))

    def _append_locked(self, transitions: Sequence[Transition]) -> None:
        for transition in transitions:
            trail = self._history.get(transition.task_id)
            if trail is None:
                self._history[transition.task_id] = [transition]
            elif transition.version > trail[-1].version:
                trail.append(transition)
            elif all(kept.version != transition.version for kept in trail):
                trail.append(transition)  # late and out of order: rare, so sort here
                trail.sort(key=lambda kept: kept.version)

    def history(self, task_id: str) -> list[Transition]:
        check_lookup(task_id)
        with self._locked():
            return list(self._history.get(task_id, ()))

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
        changes = touch_changes(
            progress, heartbeat_at, lease_owner, lease_until, pid, checkpoint_gaps=checkpoint_gaps
        )
        with self._locked():
            row = self._tasks.get(task_id)
            if row is None:
                return False
            if changes:
                row.snapshot = replace(row.snapshot, **changes)
            return True

    def renew_leases(self, owner: str, task_ids: Collection[str], lease_until: datetime) -> int:
        require_aware(lease_until, "lease_until")
        renewed = 0
        with self._locked():
            for task_id in set(task_ids):
                row = self._tasks.get(task_id)
                if row is not None and row.snapshot.lease_owner == owner:
                    row.snapshot = replace(row.snapshot, lease_until=lease_until)
                    renewed += 1
            if self._slots:
                ids = set(task_ids)
                for key, slot in self._slots.items():
                    if slot.owner == owner and slot.task_id in ids:
                        self._slots[key] = replace(slot, lease_until=lease_until)
        return renewed

    # ------------------------------------------------------------ work queue

    def notify_work(self) -> None:
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
        wanted = None if buckets is None else frozenset(buckets)
        now = self.clock.now()
        priority, _ = order_key("priority")
        with self._locked():
            ledger = None
            book = LimitBook(self._limits.values(), global_limits)
            if book:
                for slot_key in [k for k, v in self._slots.items() if not v.live(now)]:
                    del self._slots[slot_key]
                self._starts = [s for s in self._starts if s.live(now)]
                ledger = LimitLedger(
                    book,
                    Counter(name for name, _ in self._slots),
                    Counter(s.key for s in self._starts),
                )
            pauses = list(self._pauses.values())
            candidates = sorted(
                (
                    row
                    for row in self._tasks.values()
                    if row.snapshot.status is TaskStatus.QUEUED
                    and row.snapshot.owner is None
                    and (wanted is None or row.snapshot.bucket in wanted)
                    and not (pauses and pause_of(row.snapshot, pauses))
                ),
                key=priority,
            )
            taken: list[TaskSnapshot] = []
            for row in candidates:
                if len(taken) >= limit:
                    break
                if not is_claimable(row.snapshot, now):
                    continue
                task_id = row.snapshot.task_id
                if ledger is not None:
                    keys = book.keys_of(row.snapshot.tags, concurrency_key_of(row.snapshot))
                    if keys and not ledger.fits(keys):
                        continue
                    names, starts = ledger.take(keys, now)
                    for name in names:
                        self._slots[(name, task_id)] = GlobalSlot(
                            name=name,
                            task_id=task_id,
                            owner=owner,
                            acquired_at=now,
                            lease_until=lease_until,
                        )
                    self._starts.extend(replace(start, task_id=task_id) for start in starts)
                row.snapshot = replace(
                    row.snapshot, owner=owner, lease_owner=owner, lease_until=lease_until
                )
                taken.append(row.snapshot)
            return taken

    def release_global_slots(self, owner: str, task_id: str) -> int:
        with self._locked():
            mine = [k for k, v in self._slots.items() if v.task_id == task_id and v.owner == owner]
            for slot_key in mine:
                del self._slots[slot_key]
        if mine:
            self._signal.notify(work=True)
        return len(mine)

    def list_global_slots(self) -> list[GlobalSlot]:
        with self._locked():
            slots = list(self._slots.values())
        return sorted(slots, key=lambda s: (s.name, s.acquired_at, s.task_id))

    def set_limit(self, limit: FleetLimit) -> None:
        with self._locked():
            self._limits[limit.key] = limit
        self._signal.notify(work=True)

    def delete_limit(self, key: str) -> bool:
        with self._locked():
            found = self._limits.pop(key, None) is not None
        if found:
            self._signal.notify(work=True)
        return found

    def list_limits(self) -> list[FleetLimit]:
        with self._locked():
            return [self._limits[key] for key in sorted(self._limits)]

    def list_limit_starts(self) -> list[LimitStart]:
        with self._locked():
            return list(self._starts)

    def pause_queue(self, pause: QueuePause) -> QueuePause:
        with self._locked():
            self._pauses[pause.scope] = pause
        return pause

    def resume_queue(self, scope: str) -> QueuePause | None:
        with self._locked():
            ended = self._pauses.pop(scope, None)
        if ended is not None:
            self._signal.notify(work=True)
        return ended

    def list_queue_pauses(self) -> list[QueuePause]:
        with self._locked():
            pauses = list(self._pauses.values())
        return sorted(pauses, key=pause_order)

    def save_unheld(
        self, snapshot: TaskSnapshot, *, expect_version: int, transitions: Sequence[Transition] = ()
    ) -> None:
        self._replace(snapshot, expect_version, transitions, unheld=True)

    def put_worker(self, record: WorkerRecord) -> None:
        with self._locked():
            self._workers[record.worker_id] = record

    def list_workers(self) -> list[WorkerRecord]:
        with self._locked():
            return [self._workers[key] for key in sorted(self._workers)]

    def delete_worker(self, worker_id: str) -> bool:
        with self._locked():
            return self._workers.pop(worker_id, None) is not None

    def __repr__(self) -> str:
        return f"InMemoryTaskStore(tasks={len(self._tasks)}, closed={self._closed})"


class _LockedRows:
    """The memory store's rows with its lock held, for ``stores._dag.settle_dependants``."""

    def __init__(self, store: InMemoryTaskStore) -> None:
        self._store = store

    def get(self, task_id: str) -> TaskSnapshot | None:
        row = self._store._tasks.get(task_id)
        return None if row is None else row.snapshot

    def put(
        self, snapshot: TaskSnapshot, expect_version: int, transitions: Iterable[Transition]
    ) -> bool:
        row = self._store._tasks.get(snapshot.task_id)
        if row is None or row.snapshot.status_version != expect_version:
            return False
        row.snapshot = snapshot
        self._store._append_locked(list(transitions))
        return True

    def members(self, name: str, run: str) -> list[TaskSnapshot]:
        return [
            row.snapshot
            for row in self._store._tasks.values()
            if row.snapshot.metadata.get("pipeline") == name
            and row.snapshot.metadata.get("pipeline_run") == run
        ]
