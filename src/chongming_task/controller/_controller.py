"""``Controller``: the management entry of guide §8 -- a façade composed of its parts.

It holds the whitelist of task definitions, the runs it supervises and their slots;
the CLI, the scheduler, pipelines and any dashboard stand on it. Each concern is an
object the controller holds, built once from the checked :class:`ControllerOptions`;
this class only wires them together and answers for them:

==================  ====================================================
``registry``        names -> definitions; ``submit`` only takes names (§8.5)
``_dispatch``       held runs, admission (limits, priority + FIFO, §8.4, §8.8), the pump
``_writes``         every transition -> the store, failures kept (§8.9)
``_events``         transition fan-out to subscribers
``_leases``         one thread: lease renewal, progress/heartbeat ``touch``
``_poller``         one thread: control of tasks held by other processes
``_submission``     ``submit``/``submit_many``/claimed tasks -> held, stored, started
``reconcile``       restart recovery by lease (§8.11), a function over the store
==================  ====================================================
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, Literal

from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task._validation import check_seconds
from chongming_task.controller import _buckets as bucket_rules
from chongming_task.controller._commands import CommandListener, CommandPoller
from chongming_task.controller._dispatch import Dispatcher
from chongming_task.controller._events import EventBus, Subscriber
from chongming_task.controller._internal import ControllerInternals
from chongming_task.controller._leases import LeaseKeeper
from chongming_task.controller._options import (
    DEFAULT_COMMAND_POLL_INTERVAL,
    DEFAULT_FLUSH_TIMEOUT,
    DEFAULT_LEASE_TTL,
    ControllerOptions,
    task_query,
)
from chongming_task.controller._reconcile import ReconcileReport, reconcile
from chongming_task.controller._registry import TaskDefinition, TaskRegistry
from chongming_task.controller._stats import ControllerStats
from chongming_task.controller._submission import Submission
from chongming_task.controller._unheld import control_task
from chongming_task.controller._waiting import outcome_of, wait_for_runs, wait_in_store
from chongming_task.controller._writethrough import PendingWrite, PersistFailure, WriteThrough
from chongming_task.core._clock import Clock
from chongming_task.errors import InvalidState
from chongming_task.policies import BucketPolicy, ConcurrencyPolicy, RetryPolicy, Timeout
from chongming_task.run import TaskOutcome, TaskRun
from chongming_task.runtime.executors._base import Executor
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore

if TYPE_CHECKING:
    from chongming_task._explain import Explanation
    from chongming_task.pipeline import Pipeline, PipelineRun

__all__ = ["Controller"]

log = logging.getLogger("chongming_task.controller")


class Controller:
    """Registers task definitions, runs submissions within limits, and controls them.

    Args:
        store: Where every transition is written and every query is read;
            ``None`` makes a private ``InMemoryTaskStore``.
        max_parallel: Tasks executing at once (shorthand for ``concurrency``).
        concurrency: Global cap, named-resource limits per tag, default priority.
        max_parallel_per_bucket: Executing tasks allowed per bucket.
        num_buckets: Buckets of the default ``BucketPolicy`` (64).
        bucket_policy: How ``bucket_key`` maps to a bucket (alternative to ``num_buckets``).
        owned_buckets: The buckets this node runs (§8.14); ``None`` for all of them.
        owner: Identity written on tasks, leases and commands (default ``hostname:pid``).
        executor: Executor of every run (default: a thread per run).
        clock: Time source (``FakeClock`` in tests).
        lease_ttl: Seconds a lease lasts; how soon another process may call us dead.
        command_poll_interval: Longest wait between command polls.
        graceful_stop: Grace window of each run's stop (guide §4.1).
        pause_timeout: How long ``pause()`` waits for confirmation by default.
        artifact_dir: Root of the runs' artifact directories.
        keep_finished: How many finished runs to keep holding in memory; beyond it
            the earliest-finished are forgotten by this process (never by the store,
            which still answers ``get``, ``history`` and ``wait`` for them). ``None``
            (the default) holds every run until :meth:`prune`, as guide §8.6 says; a
            long-lived controller (a worker, a scheduler) sets a limit so its memory
            stays flat however many tasks it runs.

    They are checked once, into a frozen
    :class:`~chongming_task.controller._options.ControllerOptions` every part is built from.

    Raises:
        ConfigurationError: Contradictory or out-of-range settings.
    """

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        max_parallel: int | None = None,
        concurrency: ConcurrencyPolicy | None = None,
        max_parallel_per_bucket: int | None = None,
        num_buckets: int | None = None,
        bucket_policy: BucketPolicy | None = None,
        owned_buckets: Iterable[int] | None = None,
        owner: str | None = None,
        executor: Executor | None = None,
        clock: Clock | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        command_poll_interval: float = DEFAULT_COMMAND_POLL_INTERVAL,
        graceful_stop: float = 5.0,
        pause_timeout: float = 5.0,
        artifact_dir: str | Path | None = None,
        keep_finished: int | None = None,
    ) -> None:
        options = self._options = ControllerOptions.check(
            max_parallel=max_parallel,
            concurrency=concurrency,
            max_parallel_per_bucket=max_parallel_per_bucket,
            num_buckets=num_buckets,
            bucket_policy=bucket_policy,
            owned_buckets=owned_buckets,
            owner=owner,
            executor=executor,
            clock=clock,
            lease_ttl=lease_ttl,
            command_poll_interval=command_poll_interval,
            graceful_stop=graceful_stop,
            pause_timeout=pause_timeout,
            artifact_dir=artifact_dir,
            keep_finished=keep_finished,
        )
        # The public view of the options; ``owned_buckets`` alone changes later (a
        # bucket handoff moves buckets between live nodes).
        self.clock: Clock = options.clock
        self.concurrency = options.concurrency
        self.max_parallel_per_bucket = options.max_parallel_per_bucket
        self.bucket_policy: BucketPolicy = options.bucket_policy
        self.owned_buckets: frozenset[int] | None = options.owned_buckets
        self.owner: str = options.owner
        self.lease_ttl = options.lease_ttl
        self.keep_finished = options.keep_finished
        self._owns_store = store is None
        if store is None:
            from chongming_task.stores._memory import InMemoryTaskStore

            store = InMemoryTaskStore(clock=self.clock)
        self.store: TaskStore = store
        self.registry = TaskRegistry()
        self._dispatch = Dispatcher(
            max_parallel=self.concurrency.max_parallel,
            limits=self.concurrency.limits,
            max_parallel_per_bucket=options.max_parallel_per_bucket,
            keep_finished=options.keep_finished,
        )
        self._events = EventBus(name=f"chongming-events[{self.owner}]")
        self._writes = WriteThrough(
            store, clock=self.clock, owner=self.owner, lease_ttl=self.lease_ttl
        )
        self._leases = LeaseKeeper(
            store=store,
            clock=self.clock,
            owner=self.owner,
            lease_ttl=self.lease_ttl,
            held=self._held_ids,
            active=self._dispatch.active_snapshots,
            lease_until=self._writes.lease_until,
            on_failure=self._writes.record,
        )
        self._poller = CommandPoller(
            store=store,
            owner=self.owner,
            lookup=self._dispatch.get,
            interval=options.command_poll_interval,
            lease=max(self.lease_ttl, options.pause_timeout * 2),
            pause_timeout=options.pause_timeout,
            on_failure=self._writes.record,
            clock=self.clock,
        )
        self._submission = Submission(
            options=options,
            registry=self.registry,
            dispatch=self._dispatch,
            writes=self._writes,
            events=self._events,
            listener=self._on_transition,  # one bound method: runs compare it by identity
            bucket_for=self._bucket_for,
            started=self._start_background,
            closed=lambda: self._closed,
        )
        self._lock = threading.Lock()
        self._closed = False
        if self.owned_buckets is not None:
            # A node with declared buckets serves commands from the start (§8.14): a
            # stop for one of its queued tasks must not wait for its first submission.
            self._poller.start()

    # ------------------------------------------------------------ registry, submission

    def register(
        self,
        name: str | Callable[..., Any],
        fn: Callable[..., Any] | None = None,
        *,
        tags: Iterable[str] | None = None,
        description: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
    ) -> TaskDefinition:
        """Whitelist ``fn`` under ``name`` (see :meth:`TaskRegistry.register`)."""
        return self.registry.register(
            name, fn, tags=tags, description=description, retry=retry, timeout=timeout
        )

    def register_all(self, *fns: Callable[..., Any]) -> list[TaskDefinition]:
        """Register ``@task`` functions under their own names."""
        return self.registry.register_all(*fns)

    def register_module(self, module: ModuleType) -> list[TaskDefinition]:
        """Register every ``@task`` function of ``module``."""
        return self.registry.register_module(module)

    def task_names(self) -> list[str]:
        return self.registry.names()

    def definitions(self) -> list[TaskDefinition]:
        return self.registry.definitions()

    def submit(
        self,
        name: str,
        /,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        tags: Iterable[str] | None = None,
        priority: int | None = None,
        bucket_key: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        blocked: bool | str = False,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
        skip_reason: str | None = None,
        **kwargs: Any,
    ) -> TaskRun:
        """Submit registered task ``name`` with its arguments; returns its ``TaskRun``.

        The run is written to the store, then queued (or ``blocked`` with
        ``blocked=True``, for pipeline nodes waiting on upstream: they take no slot
        until :meth:`release`; a string is the reason recorded on ``-> blocked``, as
        the scheduler does for a firing armed ahead of its scheduled time). Arguments
        other than the keyword options go to the task.
        ``retry``/``timeout`` override the definition's for this run (the scheduler's
        per-schedule policy); with ``skip_reason`` the run is recorded and ended
        ``skipped`` at once, never taking a slot (a paused schedule's firing).

        Raises:
            ConfigurationError: Unregistered name, duplicate ``task_id``, non-string
                tags, non-JSON metadata, a bucket this node does not own, or a closed
                controller.
        """
        return self._submission.submit(
            name,
            args,
            kwargs,
            task_id=task_id,
            label=label,
            tags=tags,
            priority=priority,
            bucket_key=bucket_key,
            metadata=metadata,
            blocked=blocked,
            retry=retry,
            timeout=timeout,
            skip_reason=skip_reason,
        )

    def submit_many(
        self,
        name: str,
        calls: Iterable[tuple[Any, ...] | Mapping[str, Any]],
        /,
        *,
        task_ids: Sequence[str] | None = None,
        label: str | None = None,
        tags: Iterable[str] | None = None,
        priority: int | None = None,
        bucket_keys: Sequence[str | None] | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout | None = None,
    ) -> list[TaskRun]:
        """Submit ``name`` once per item of ``calls``, all stored in one write.

        Each item is a tuple of positional arguments or a mapping of keyword arguments
        (wrap a lone argument in a 1-tuple). ``task_ids`` and ``bucket_keys``, when
        given, have one entry per item; the other options apply to every run. All or
        nothing: every item is checked (arguments against the task's signature, ids,
        buckets) before anything is stored, and the built-in stores write the batch
        in one transaction, so a thousand submissions cost one commit instead of a
        thousand. Returns the runs in the order of ``calls``, each already ``queued``.

        Raises:
            ConfigurationError: As :meth:`submit`, naming the item at fault; nothing
                of the batch is stored or held then.
        """
        return self._submission.submit_many(
            name,
            calls,
            task_ids=task_ids,
            label=label,
            tags=tags,
            priority=priority,
            bucket_keys=bucket_keys,
            metadata=metadata,
            retry=retry,
            timeout=timeout,
        )

    # ------------------------------------------------------------ control

    def release(
        self,
        task_id: str,
        *,
        upstream: Mapping[str, JSONValue] | None = None,
        reason: str | None = None,
        trigger: str = "pipeline:released",
    ) -> None:
        """Move a ``blocked`` run to the ready queue; ``upstream`` becomes ``ctx.upstream``.

        Started at once if a slot is free: the run launches its body only once its
        ``-> starting`` is stored.
        """
        self._held(task_id).release(upstream=upstream, reason=reason, trigger=trigger)

    def release_many(
        self, task_ids: Iterable[str], *, reason: str | None = None, trigger: str
    ) -> dict[str, Exception]:
        """:meth:`release` each run (each starts at once if a slot is free); returns the failures.

        The scheduler releases every firing armed for one instant with one call.
        """
        failures: dict[str, Exception] = {}
        for task_id in task_ids:
            try:
                self._held(task_id).release(reason=reason, trigger=trigger)
            except Exception as exc:
                failures[task_id] = exc
        return failures

    def skip(self, task_id: str, *, reason: str) -> None:
        """End a run that has not started as ``skipped`` (it should not run at all)."""
        self._held(task_id).skip(reason=reason)

    def cancel(self, task_id: str, *, reason: str) -> None:
        """Cancel a run on behalf of orchestration (fail_fast), not of a person."""
        self._held(task_id).cancel(reason=reason, actor=self.owner)

    def stop(self, task_id: str, *, reason: str | None = None) -> bool:
        """Request a stop; ``True`` if the task was found (locally or in the store).

        For a task held by another process this writes a command and returns at once
        ("accepted"); the holder applies it within its poll interval.
        """
        run = self._dispatch.get(task_id)
        if run is not None:
            run.stop(reason, actor=self.owner)
            return True
        return self._remote(task_id, "stop", reason=reason)

    def pause(self, task_id: str, *, timeout: float | None = None) -> bool:
        """Pause and wait for confirmation; ``True`` only when confirmed paused.

        Across processes there is no way to confirm, so a remote pause is written as
        a command and returns ``False`` ("unconfirmed"): poll :meth:`get` to see it.
        """
        run = self._dispatch.get(task_id)
        if run is not None:
            wait = self._options.pause_timeout if timeout is None else timeout
            return run.pause(wait, actor=self.owner)
        self._remote(task_id, "pause")
        return False

    def resume(self, task_id: str) -> bool:
        """Undo a pause; for another process's task, ``True`` means "accepted"."""
        run = self._dispatch.get(task_id)
        if run is not None:
            return run.resume(actor=self.owner)
        return self._remote(task_id, "resume")

    def stop_all(self, *, reason: str | None = None) -> int:
        """Request a stop of every run this controller holds; returns requests issued.

        Runs that hold no slot (queued, blocked, waiting to retry) are stopped first:
        stopping a running one frees its slot, and a queued task admitted into it just
        before its own stop would start only to be stopped.
        """
        runs = sorted(self._dispatch.live_runs(), key=lambda run: run.status.occupies_slot)
        return sum(1 for run in runs if run.stop(reason, actor=self.owner))

    def wait(self, task_id: str, timeout: float | None = None) -> TaskOutcome:
        """Wait for a task to settle and return its outcome.

        Raises:
            TimeoutError: ``timeout`` passed first (the task is not affected).
            ConfigurationError: No such task, here or in the store.
        """
        run = self._dispatch.get(task_id)
        if run is not None:
            return run.wait(timeout)
        interval = self._options.command_poll_interval
        return outcome_of(wait_in_store(self.store, task_id, timeout=timeout, interval=interval))

    def wait_all(self, timeout: float | None = None) -> list[TaskOutcome]:
        """Wait until every held run has settled; outcomes in submission order.

        Runs already forgotten under ``keep_finished`` are not among them.

        Raises:
            TimeoutError: Some run was still unfinished when ``timeout`` passed.
        """
        return wait_for_runs(self._dispatch.runs(), timeout)

    def close(
        self,
        *,
        reason: str | None = "controller closed",
        timeout: float | None = None,
        close_store: bool = False,
        flush_timeout: float = DEFAULT_FLUSH_TIMEOUT,
    ) -> int:
        """Stop everything this controller holds, wait, and release its threads.

        Queued (and blocked) runs never execute their body: they go straight to
        ``stopped``. Running ones, and ``starting`` ones whose body is about to begin
        (it sees ``is_stop_requested`` from its first line), get the usual graceful
        window. Returns how many stop requests were issued. Idempotent.

        Args:
            reason: Recorded on every stop transition.
            timeout: Longest wait for the runs to settle (``None``: as long as their
                grace windows take).
            close_store: Also close the store (always done for a private store).
            flush_timeout: Longest time (of the controller's clock) to keep retrying
                writes the store has not taken yet (see :attr:`pending_writes`). What
                is still not written then is logged as an error (one line per task)
                and stays listed in :attr:`pending_writes`; ``close()`` does not raise
                for it. Those tasks are left to ``reconcile()`` (they become ``lost``).
        """
        check_seconds(flush_timeout, "flush_timeout", allow_zero=True)
        with self._lock:
            already = self._closed
            self._closed = True
        issued = 0
        if not already:
            self._dispatch.close()
            issued = self.stop_all(reason=reason)
            try:
                wait_for_runs(self._dispatch.runs(), timeout)
            except TimeoutError as exc:
                log.warning("close(): %s", exc)
            self._flush(flush_timeout)
            self._poller.request_stop()
            self._leases.stop()
            self._events.close()
        if close_store or self._owns_store:
            self.store.close()  # also wakes the poller out of wait_for_commands
        if not already:
            self._poller.stop(timeout=self._options.command_poll_interval + 1.0)
        return issued

    def __enter__(self) -> Controller:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ queries (the store)

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The stored snapshot of ``task_id`` (any process's); ``None`` if unknown.

        For a task of this controller whose latest write is still pending (the store
        failed, see :attr:`pending_writes`), the snapshot waiting to be written: the
        truth, not the store's stale record.
        """
        pending = self._writes.pending_snapshot(task_id)
        return pending if pending is not None else self.store.get(task_id)

    def list_tasks(
        self,
        *,
        status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
        name_prefix: str | None = None,
        tag: str | None = None,
        bucket: int | None = None,
        buckets: Iterable[int] | None = None,
        owner: str | None = None,
        metadata_eq: Mapping[str, str] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int | None = None,
        order: Literal["created", "-created", "updated", "-updated", "priority"] = "created",
    ) -> list[TaskSnapshot]:
        """Tasks in the store matching every given filter.

        ``created_after``/``created_before`` (and the ``updated_*`` pair) bound a time
        window: timezone-aware instants, the first inclusive, the second exclusive.
        """
        return self.store.query(
            task_query(
                status=status,
                name_prefix=name_prefix,
                tag=tag,
                bucket=bucket,
                buckets=buckets,
                owner=owner,
                metadata_eq=metadata_eq,
                created_after=created_after,
                created_before=created_before,
                updated_after=updated_after,
                updated_before=updated_before,
                limit=limit,
                order=order,
            )
        )

    def history(self, task_id: str) -> list[Transition]:
        """The stored transitions of ``task_id``, oldest first."""
        return self.store.history(task_id)

    def explain(self, task_id: str) -> Explanation:
        """Why ``task_id`` is where it is: the reasons it waits, most decisive first.

        For a task this controller holds the answer uses its admission state (which
        limit is full and who holds it, the exact queue order, the run's deadlines):
        ``source == "controller"``. For any other task it uses what the store knows
        (holder, lease, history, the worker registry): ``source == "store"``.

        Raises:
            UnknownTask: No task ``task_id`` is in the store or held here (a
                ``ConfigurationError``).
        """
        from chongming_task.controller import _explaining as explaining

        snapshot = self.get(task_id)
        run = self._dispatch.get(task_id)
        return explaining.explain_task(
            self.store,
            snapshot,
            run,
            self._dispatch.admission_facts(task_id) if run is not None else None,
            task_id=task_id,
            registry=self.registry,
            now=self.clock.now(),
        )

    def stats(self) -> ControllerStats:
        """Counts per status in the store, with ``unfinished``."""
        return ControllerStats.from_counts(self.store.count_by_status())

    def bucket_counts(self) -> dict[int, int]:
        """Tasks per bucket in the store: the input for assigning buckets to nodes."""
        return self.store.count_by_bucket()

    def prune(self, *, keep_terminal: int) -> int:
        """Drop the oldest terminal tasks beyond ``keep_terminal`` (store and memory)."""
        removed = self.store.prune(keep_terminal)
        terminal = self._dispatch.terminal_ids()
        for task_id in terminal[: max(0, len(terminal) - keep_terminal)]:
            self._dispatch.drop(task_id)
            self._writes.forget(task_id)
        return removed

    # ------------------------------------------------------------ local state

    def runs(self) -> list[TaskRun]:
        """Every ``TaskRun`` this controller holds (finished ones until pruned or forgotten)."""
        return self._dispatch.runs()

    def run(self, task_id: str) -> TaskRun | None:
        """The held run of ``task_id``, if this controller holds it."""
        return self._dispatch.get(task_id)

    @property
    def active_count(self) -> int:
        """Runs holding an execution slot (paused-in-place ones included)."""
        return self._dispatch.active_count

    @property
    def queued_count(self) -> int:
        """Runs waiting for a slot (not blocked ones: they wait for upstream)."""
        return self._dispatch.queued_count

    def active_in_bucket(self, bucket: int) -> int:
        return self._dispatch.active_in_bucket(bucket)

    @property
    def owns_all_buckets(self) -> bool:
        """True when this node is no partition: no ``owned_buckets``, or all of them."""
        return bucket_rules.owns_all(self.bucket_policy, self.owned_buckets)

    def owns_bucket(self, bucket: int) -> bool:
        return self.owned_buckets is None or bucket in self.owned_buckets

    @property
    def persist_failures(self) -> deque[PersistFailure]:
        """The last 20 failed store operations (a store failure never fails a task).

        A failed write is not dropped: it is retried until stored; what is still
        pending is :attr:`pending_writes`.

        A snapshot copy, oldest first; ``persist_failure_count`` counts them all.
        """
        return self._writes.failures()

    @property
    def pending_writes(self) -> list[PendingWrite]:
        """Writes the store has not taken yet, retried in the background until it does.

        Empty when the store holds everything this controller accepted. A task listed
        here keeps its lease renewed (so no other process calls it lost) and is never
        marked lost by this controller's own ``reconcile()``.
        """
        return self._writes.pending()

    @property
    def persist_failure_count(self) -> int:
        """Every failed store operation since this controller started."""
        return self._writes.failure_count

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------ pipelines, events, recovery

    def submit_pipeline(self, pipeline: Pipeline, *, run_id: str | None = None) -> PipelineRun:
        """Validate ``pipeline`` and run its nodes here; returns a :class:`PipelineRun`.

        Validation happens before any node exists, so a rejected pipeline leaves no
        trace in the store. The orchestration lives in :mod:`chongming_task.pipeline`.
        """
        from chongming_task.pipeline import submit_pipeline

        return submit_pipeline(self, pipeline, run_id=run_id)

    def subscribe(self, fn: Subscriber, *, inline: bool = False) -> Callable[[], None]:
        """Receive every accepted transition (after write-through), in order per task.

        ``fn(transition, snapshot_after)`` runs on the controller's event thread, or
        in the transition's own thread with ``inline=True`` (keep those quick). Its
        exceptions are counted and logged, never raised into a run. Returns a
        callable that unsubscribes.
        """
        return self._events.subscribe(fn, inline=inline)

    def subscribe_commands(self, fn: CommandListener) -> Callable[[], None]:
        """Receive ``fn(command, applied_at)`` for every command applied here.

        Called on the command thread after the command took effect on its run (and was
        completed in the store); ``applied_at - command.issued_at`` is the command's
        latency. Exceptions are logged, never raised. Returns a callable that
        unsubscribes.
        """
        return self._poller.subscribe(fn)

    @property
    def subscriber_errors(self) -> int:
        return self._events.errors

    def reconcile(self, *, dry_run: bool = False) -> ReconcileReport:
        """Mark tasks whose supervisor died (guide §8.11); only this node's buckets.

        Each ``-> lost`` it writes is published to subscribers like any transition.
        Without subscribers (when the call starts) nobody is told, so the store need not
        read the snapshots after the transitions; with them, SQLite hands over snapshots
        that decode only when a subscriber reads more than the task's id and name.
        """
        return reconcile(
            self.store,
            clock=self.clock,
            actor=self.owner,
            buckets=None if self.owns_all_buckets else self.owned_buckets,
            held=self._held_ids(),
            dry_run=dry_run,
            on_lost=self._events.publish if self._events.has_subscribers else None,
        )

    @property
    def _internal(self) -> ControllerInternals:
        """The plumbing the library's own layers use (``controller/_internal.py``)."""
        return self._submission

    # ------------------------------------------------------------ internals

    def _on_transition(self, transition: Transition, snapshot: TaskSnapshot) -> None:
        """The one write path: store the transition, then announce it, then account.

        Stored before anyone hears of it (subscribers, ``wait()``, another process),
        announced before the ledger frees a slot (an inline subscriber hears a run's
        end before any thread can start another run in its place).

        When the write fails, the task is not failed (guide §8.9) and the call that
        caused the transition still returns: the failure is in ``persist_failures``,
        the write is pending (``pending_writes``) and retried until the store takes
        it. The announcement follows the write *attempt* either way, so subscribers
        hear the truth even while the store is behind.
        """
        self._writes.write(transition, snapshot)
        self._events.publish(transition, snapshot)
        if self._dispatch.on_transition(transition):
            self._dispatch.pump()
        if transition.to_status.is_terminal:
            for task_id in self._dispatch.forget_finished():
                self._writes.forget(task_id)

    def _held_ids(self) -> list[str]:
        """The tasks whose lease this controller keeps: the live runs, and those whose
        write is pending (the store still shows them unfinished)."""
        pending = self._writes.pending_ids()
        live = self._dispatch.live_ids()
        return list(dict.fromkeys([*live, *pending])) if pending else live

    def _bucket_for(self, bucket_key: str | None) -> int | None:
        """A new task's bucket under the node's current ownership (refusing a foreign one)."""
        return bucket_rules.bucket_for_submit(self.bucket_policy, self.owned_buckets, bucket_key)

    def _flush(self, timeout: float) -> None:
        """Retry pending writes for at most ``timeout``; log what stays unwritten."""
        try:
            unwritten = self._writes.flush(timeout) if self._writes.pending_ids() else []
        finally:
            self._writes.stop()
        for item in unwritten:
            log.error(
                "close(): task %s is %s (version %d) but the store still holds version %s "
                "after %d failed attempt(s) (%s); it is left to reconcile (lost)",
                item.task_id,
                item.status,
                item.version,
                item.stored_version,
                item.attempts,
                item.last_error,
                extra={"task_id": item.task_id},
            )

    def _start_background(self) -> None:
        self._leases.start()
        self._poller.start()

    def _held(self, task_id: str) -> TaskRun:
        run = self._dispatch.get(task_id)
        if run is None:
            raise InvalidState(f"task {task_id!r} is not held by this controller")
        return run

    def _remote(self, task_id: str, action: str, *, reason: str | None = None) -> bool:
        """A task this controller does not hold: at once if unheld (§9.2), else a command."""
        return control_task(
            self.store, task_id, action, actor=self.owner, clock=self.clock, reason=reason
        )

    def __repr__(self) -> str:
        return (
            f"Controller(owner={self.owner!r}, max_parallel={self.concurrency.max_parallel}, "
            f"active={self.active_count}, queued={self.queued_count})"
        )
