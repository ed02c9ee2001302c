"""Submission: how a task gets from ``submit()`` / ``submit_many()`` into the store.

A mixin of :class:`~chongming_task.controller.controller.Controller`, kept apart
because it is the longest path a caller takes: check the name and the options once,
build each run, take its first edge while nobody else can see it, hold it in the
dispatcher before the store shows it (a stop command that races the submission must
find it), store it -- one write per task, or one for a whole batch -- and only then
announce it and let it start. A run that finds a free slot and an empty queue is
created already ``starting`` (``_prepare_admitted``): the same durable states in one
commit fewer.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chongming_task._validation import check_metadata, check_priority, check_task_id
from chongming_task.controller import buckets as bucket_rules
from chongming_task.controller.options import check_tags
from chongming_task.controller.registry import TaskDefinition, TaskRegistry
from chongming_task.core.clock import Clock
from chongming_task.errors import ConfigurationError, ControllerClosed, DuplicateTaskId
from chongming_task.model import JSONValue, TaskSnapshot, Transition, ensure_json
from chongming_task.policies import BucketPolicy, ConcurrencyPolicy, RetryPolicy, Timeout
from chongming_task.run import TaskRun
from chongming_task.runtime.executors.base import Executor
from chongming_task.states import TaskStatus
from chongming_task.stores.queue_records import recipe_of

if TYPE_CHECKING:
    from chongming_task.controller.dispatch import Dispatcher
    from chongming_task.controller.events import EventBus
    from chongming_task.controller.writethrough import WriteThrough

__all__ = ["Submission"]


class Submission:
    """``submit`` and ``submit_many`` of the controller."""

    # Set up by Controller.__init__.
    registry: TaskRegistry
    concurrency: ConcurrencyPolicy
    bucket_policy: BucketPolicy
    owned_buckets: frozenset[int] | None
    owner: str
    clock: Clock
    _closed: bool
    _dispatch: Dispatcher
    _writes: WriteThrough
    _events: EventBus
    _executor: Executor | None
    _graceful_stop: float
    _pause_timeout: float
    _artifact_dir: str | Path | None
    _listener: Callable[[Transition, TaskSnapshot], None]

    if TYPE_CHECKING:  # defined by Controller

        @property
        def closed(self) -> bool: ...

        def _start_background(self) -> None: ...

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
        common = self._common_options(
            name, tags=tags, priority=priority, metadata=metadata, retry=retry, timeout=timeout
        )
        bucket = bucket_rules.bucket_for_submit(self.bucket_policy, self.owned_buckets, bucket_key)
        if task_id is None:
            task_id = f"{name}-{secrets.token_hex(6)}"  # 48 random bits, as before
        check_task_id(task_id)
        if self._dispatch.get(task_id) is not None:
            raise DuplicateTaskId(
                task_id,
                f"task id {task_id!r} already exists in this controller; submit under a new id",
            )
        run = self._new_run(
            common, args, kwargs, task_id=task_id, label=label, bucket=bucket, bucket_key=bucket_key
        )
        priority, all_tags = common.priority, common.tags
        machine = run.machine  # nobody else sees the run yet: read it without its lock
        created = machine.snapshot
        # The first edge is taken while nobody else can see the run, so the store gets
        # the task already queued (blocked, skipped) in one write with both records.
        if skip_reason is not None:
            run.skip(reason=skip_reason)
        elif blocked:
            run.block(reason=blocked if isinstance(blocked, str) else "waiting for upstream")
        else:
            run.enqueue(actor=self.owner)
        creation, edge = machine.transitions
        announced = [(creation, created), (edge, machine.snapshot)]
        # Held before it is visible in the store: a stop command that races the
        # submission must find the run. Holding refuses an id another submission took
        # since the check above (nothing of this one was stored or announced).
        queued = edge.to_status is TaskStatus.QUEUED
        launch = None
        if self._dispatch.hold(
            run, priority=priority, tags=all_tags, bucket=bucket, reserve=queued
        ):
            launch = self._prepare_admitted(run, announced)
        stored = announced[-1][1]
        try:
            self._writes.create(stored, tuple([record for record, _ in announced]))
        except BaseException:
            self._dispatch.drop(task_id)
            if launch is not None:  # never stored, never launched: end it for good
                run.cancel(reason="the task could not be stored", actor=self.owner)
            raise
        run.add_listener(self._listener)
        self._start_background()
        for record, snapshot in announced:
            self._events.publish(record, snapshot)
        if launch is not None:
            launch()  # only now, with the store showing it starting
        elif self._dispatch.on_transition(edge):
            self._dispatch.pump()
        if self.closed:  # close() ran meanwhile and did not see this run
            run.stop("controller closed", actor=self.owner)
        return run

    def submit_many(  # noqa: C901 (one pass that validates every call before anything is stored)
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
        common = self._common_options(
            name, tags=tags, priority=priority, metadata=metadata, retry=retry, timeout=timeout
        )
        given: object = calls  # checked at run time: callers pass anything
        if isinstance(given, str | bytes) or not isinstance(given, Iterable):
            raise ConfigurationError(
                "calls must be an iterable with one tuple (positional arguments) or mapping "
                f"(keyword arguments) per task, got {type(given).__name__}"
            )
        if isinstance(bucket_keys, str):
            raise ConfigurationError(
                f"bucket_keys must be a sequence of keys, not the string {bucket_keys!r}"
            )
        items = list(calls)
        ids = self._batch_ids(name, len(items), task_ids)
        if not items:
            return []
        keys: Sequence[str | None] = [None] * len(items) if bucket_keys is None else bucket_keys
        if len(keys) != len(items):
            raise ConfigurationError(
                f"bucket_keys has {len(keys)} entries for {len(items)} calls; give one per call"
            )
        runs: list[tuple[TaskRun, int | None]] = []
        for index, (item, task_id, key) in enumerate(zip(items, ids, keys, strict=True)):
            try:
                args, kwargs = _call_arguments(item)
                bucket = bucket_rules.bucket_for_submit(self.bucket_policy, self.owned_buckets, key)
                run = self._new_run(
                    common,
                    args,
                    kwargs,
                    task_id=task_id,
                    label=label,
                    bucket=bucket,
                    bucket_key=key,
                )
                runs.append((run, bucket))
            except ConfigurationError as exc:
                raise ConfigurationError(
                    f"submit_many({name!r}): call {index} ({item!r}): {exc}; nothing was submitted"
                ) from None
        # Per run: its creation record and snapshot, then its ``-> queued`` and snapshot.
        firsts: list[tuple[Transition, TaskSnapshot, Transition, TaskSnapshot]] = []
        for held, (run, bucket) in enumerate(runs):
            machine = run.machine  # not held yet: nobody else sees it
            created = machine.snapshot
            run.enqueue(actor=self.owner)
            creation, edge = machine.transitions
            firsts.append((creation, created, edge, machine.snapshot))
            try:
                self._dispatch.hold(run, priority=common.priority, tags=common.tags, bucket=bucket)
            except ConfigurationError as exc:  # another submission took the id meanwhile
                for earlier, _ in runs[:held]:
                    self._dispatch.drop(earlier.task_id)
                raise ConfigurationError(
                    f"submit_many({name!r}): call {held}: {exc}; nothing was submitted"
                ) from None
        try:
            self._writes.create_batch(
                [(queued, (creation, edge)) for creation, _, edge, queued in firsts]
            )
        except BaseException:
            for run, _ in runs:
                self._dispatch.drop(run.task_id)
            raise
        for run, _ in runs:
            run.add_listener(self._listener)
        self._start_background()
        for creation, created, edge, queued in firsts:
            self._events.publish(creation, created)
            self._events.publish(edge, queued)
        # Every run enters the queue (a list, not a generator: no short-circuit).
        freed = [self._dispatch.on_transition(edge) for _, _, edge, _ in firsts]
        if any(freed):
            self._dispatch.pump()  # one round: the runs it admits start with one commit
        if self.closed:  # close() ran meanwhile and did not see these runs
            for run, _ in runs:
                run.stop("controller closed", actor=self.owner)
        return [run for run, _ in runs]

    def run_claimed(self, stored: TaskSnapshot) -> TaskRun:
        """Run a task this controller claimed from the work queue, as a local submit would.

        ``stored`` is the ``queued`` snapshot ``TaskStore.claim_queued`` returned (held
        by this controller); the run continues its history and versions and calls the
        registered function with the recipe's JSON arguments (guide §8.5: only the
        name and JSON came through the store). It waits for a slot like any submission.

        Raises:
            ConfigurationError: No recipe, an unregistered name, arguments that do not
                fit the signature, or a closed controller (nothing is written then).
        """
        recipe = recipe_of(stored)
        if recipe is None:
            raise ConfigurationError(f"task {stored.task_id!r} has no work-queue recipe")
        common = self._common_options(
            stored.name,
            tags=None,
            priority=stored.priority,
            metadata=None,
            retry=None,
            timeout=None,
        )
        run = TaskRun(
            common.definition.fn,
            recipe.args,
            dict(recipe.kwargs or {}),
            task_id=stored.task_id,
            name=stored.name,
            retry=common.retry,
            timeout=common.timeout,
            executor=self._executor,
            graceful_stop=self._graceful_stop,
            artifact_dir=self._artifact_dir,
            clock=self.clock,
            owner=self.owner,
            pause_timeout=self._pause_timeout,
            stored=stored,
        )
        self._dispatch.hold(run, priority=stored.priority, tags=stored.tags, bucket=stored.bucket)
        try:
            self._writes.adopt(stored)
        except BaseException:
            self._dispatch.drop(stored.task_id)
            raise
        run.add_listener(self._listener)
        self._start_background()
        entered = Transition(
            task_id=stored.task_id,
            from_status=None,
            to_status=TaskStatus.QUEUED,
            trigger="queue:claimed",
            version=stored.status_version,
            at=self.clock.now(),
            actor=self.owner,
        )  # for the ledger only: the stored history already has its ``-> queued``
        if self._dispatch.on_transition(entered):
            self._dispatch.pump()
        if self.closed:
            run.stop("controller closed", actor=self.owner)
        return run

    def _common_options(
        self,
        name: str,
        *,
        tags: Iterable[str] | None,
        priority: int | None,
        metadata: Mapping[str, JSONValue] | None,
        retry: RetryPolicy | None,
        timeout: Timeout | None,
    ) -> _Common:
        """What every run of one submission shares, checked once."""
        if self._closed:
            raise ControllerClosed("this controller is closed; create a new Controller")
        definition = self.registry.require(name)
        all_tags = definition.tags if tags is None else definition.tags | check_tags(tags)
        if priority is None:
            priority = self.concurrency.priority
        check_priority(priority)
        meta: dict[str, JSONValue] = {}
        if metadata is not None:
            meta = check_metadata(metadata)
            ensure_json(meta, "metadata")
        return _Common(
            definition=definition,
            name=name,
            tags=all_tags,
            priority=priority,
            metadata=meta,
            retry=definition.retry if retry is None else retry,
            timeout=definition.timeout if timeout is None else timeout,
        )

    def _new_run(
        self,
        common: _Common,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        task_id: str,
        label: str | None,
        bucket: int | None,
        bucket_key: str | None,
    ) -> TaskRun:
        return TaskRun(
            common.definition.fn,
            args,
            kwargs,
            task_id=task_id,
            name=common.name,
            label=label,
            retry=common.retry,
            timeout=common.timeout,
            executor=self._executor,
            graceful_stop=self._graceful_stop,
            artifact_dir=self._artifact_dir,
            clock=self.clock,
            tags=common.tags,
            priority=common.priority,
            bucket=bucket,
            bucket_key=bucket_key,
            owner=self.owner,
            metadata=common.metadata,
            pause_timeout=self._pause_timeout,
        )

    def _batch_ids(self, name: str, count: int, task_ids: Sequence[str] | None) -> list[str]:
        """One fresh id per call, or the caller's: as many as calls, unique, not held."""
        if task_ids is None:
            return [f"{name}-{secrets.token_hex(6)}" for _ in range(count)]
        if isinstance(task_ids, str):
            raise ConfigurationError(
                f"task_ids must be a sequence of ids, not the string {task_ids!r}"
            )
        ids = list(task_ids)
        if len(ids) != count:
            raise ConfigurationError(
                f"task_ids has {len(ids)} entries for {count} calls; give one id per call"
            )
        seen: set[str] = set()
        for task_id in ids:
            if not isinstance(task_id, str) or not task_id:
                raise ConfigurationError(
                    f"every task id must be a non-empty string, got {task_id!r}"
                )
            check_task_id(task_id)
            if task_id in seen:
                raise ConfigurationError(
                    f"task id {task_id!r} appears twice in task_ids; nothing was submitted"
                )
            seen.add(task_id)
            if self._dispatch.get(task_id) is not None:
                raise DuplicateTaskId(
                    task_id,
                    f"task id {task_id!r} already exists in this controller; nothing was submitted",
                )
        return ids

    def _prepare_admitted(
        self, run: TaskRun, announced: list[tuple[Transition, TaskSnapshot]]
    ) -> Callable[[], None] | None:
        """``-> starting`` for a run that got a slot at submission, before it is stored.

        The task is then created already ``starting`` (creation, ``queued`` and
        ``starting`` in one write) instead of created ``queued`` and saved ``starting``
        right after: the same durable states in one commit fewer. ``None`` if the run
        could not start (a stop raced the submission): it takes the ordinary path.
        """
        try:
            launch = run.prepare_start()
        except ConfigurationError:
            self._dispatch.unreserve(run.task_id)
            return None
        snapshot = run.snapshot
        announced.extend((record, snapshot) for record in run.transitions[len(announced) :])
        return launch


@dataclass(frozen=True, slots=True, kw_only=True)
class _Common:
    """The checked options one submission gives every run it creates."""

    definition: TaskDefinition
    name: str
    tags: frozenset[str]
    priority: int
    metadata: dict[str, JSONValue]
    retry: RetryPolicy | None
    timeout: Timeout | None


def _call_arguments(item: object) -> tuple[tuple[Any, ...], Mapping[str, Any]]:
    """One call of ``submit_many``: a tuple of positional or a mapping of keyword arguments."""
    if isinstance(item, tuple):
        return item, {}
    if isinstance(item, Mapping):
        bad = [key for key in item if not isinstance(key, str)]
        if bad:
            raise ConfigurationError(f"keyword argument names must be strings, got {bad!r}")
        return (), item
    raise ConfigurationError(
        "each call must be a tuple of positional arguments or a mapping of keyword "
        f"arguments, got {type(item).__name__}; wrap a single argument as ({item!r},)"
    )
