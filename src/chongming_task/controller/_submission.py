"""Submission: how runs get from ``submit()`` / ``submit_many()`` into the store.

One of the controller's parts, kept apart because it is the longest path a caller
takes. ``submit()`` is a batch of one: both calls check the name and the shared
options once, build each run, and then take the same path (:meth:`Submission._enter`):
the first edge while nobody else can see the run, held in the dispatcher before the
store shows it (a stop command that races the submission must find it), stored -- one
write per task, or one for a whole batch -- and only then announced and let start.
A lone run that finds a free slot and an empty queue is created already ``starting``
(``_prepare_admitted``): the same durable states in one commit fewer. A task claimed
from the work queue (:meth:`Submission.run_claimed`) is already stored: it joins the
same path at its last step.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from chongming_task._model import JSONValue, TaskSnapshot, Transition, ensure_json
from chongming_task._validation import (
    LABEL_MAX_LENGTH,
    LINE_MAX_LENGTH,
    check_items,
    check_line,
    check_metadata,
    check_priority,
    check_task_id,
    check_text,
)
from chongming_task.controller._options import ControllerOptions, check_tags
from chongming_task.controller._registry import TaskDefinition, TaskRegistry
from chongming_task.errors import ConfigurationError, ControllerClosed, DuplicateTaskId
from chongming_task.policies import RetryPolicy, Timeout
from chongming_task.run import TaskRun
from chongming_task.states import TaskStatus
from chongming_task.stores._dag import links_of, upstream_values
from chongming_task.stores._queue_records import recipe_of

if TYPE_CHECKING:
    from chongming_task.controller._dispatch import Dispatcher
    from chongming_task.controller._events import EventBus
    from chongming_task.controller._writethrough import WriteThrough
    from chongming_task.runtime import ChildTasks

__all__ = ["BatchOptions", "Submission"]

Listener = Callable[[Transition, TaskSnapshot], None]


class BatchOptions(TypedDict, total=False):
    """The options of ``Controller.submit_many``: all optional."""

    task_ids: Sequence[str] | None
    """One id per call (default: generated)."""
    label: str | None
    tags: Iterable[str] | None
    priority: int | None
    bucket_keys: Sequence[str | None] | None
    """One bucket key per call."""
    metadata: Mapping[str, JSONValue] | None
    retry: RetryPolicy | None
    timeout: Timeout | None


class Submission:
    """``submit``, ``submit_many`` and ``run_claimed`` of one controller.

    Args:
        options: The controller's checked settings (owner, clock, executor, windows).
        registry: The whitelist: only registered names are submitted (§8.5).
        dispatch: Where runs are held, queued and admitted.
        writes: The write path; a new task is stored through it before it is announced.
        events: The subscribers, told of each stored creation.
        listener: The controller's one write path, attached to every run (by identity).
        bucket_for: The bucket of a ``bucket_key`` under the node's current ownership
            (it changes during a bucket handoff), refusing one the node does not own.
        started: Called once a run is stored: the background threads are needed now.
        closed: Whether the controller is closed (nothing new is accepted then).
    """

    def __init__(
        self,
        *,
        options: ControllerOptions,
        registry: TaskRegistry,
        dispatch: Dispatcher,
        writes: WriteThrough,
        events: EventBus,
        listener: Listener,
        bucket_for: Callable[[str | None], int | None],
        started: Callable[[], None],
        closed: Callable[[], bool],
    ) -> None:
        self._options = options
        self._registry = registry
        self._dispatch = dispatch
        self._writes = writes
        self._events = events
        self._listener = listener
        self._bucket_for = bucket_for
        self._started = started
        self._closed = closed

    def submit(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        task_id: str | None,
        label: str | None,
        tags: Iterable[str] | None,
        priority: int | None,
        bucket_key: str | None,
        metadata: Mapping[str, JSONValue] | None,
        blocked: bool | str,
        retry: RetryPolicy | None,
        timeout: Timeout | None,
        skip_reason: str | None,
    ) -> TaskRun:
        """One run of ``name`` (see ``Controller.submit``): a batch of one."""
        common = self._common(
            name, tags=tags, priority=priority, metadata=metadata, retry=retry, timeout=timeout
        )
        _check_label(label)
        if skip_reason is not None:
            check_line(skip_reason, "skip_reason", max_length=LINE_MAX_LENGTH)
        if isinstance(blocked, str):
            check_line(blocked, "blocked (the reason)", max_length=LINE_MAX_LENGTH)
        _check_bucket_key(bucket_key)
        bucket = self._bucket_for(bucket_key)
        if task_id is None:
            task_id = f"{name}-{secrets.token_hex(6)}"  # 48 random bits, as before
        check_task_id(task_id)
        run = self._new_run(
            common, args, kwargs, task_id=task_id, label=label, bucket=bucket, bucket_key=bucket_key
        )
        owner = self._options.owner

        def first_edge(run: TaskRun) -> None:
            if skip_reason is not None:
                run.skip(reason=skip_reason)
            elif blocked:
                run.block(reason=blocked if isinstance(blocked, str) else "waiting for upstream")
            else:
                run.enqueue(actor=owner)

        return self._enter(common, [(run, bucket)], first_edge, batch=None)[0]

    def submit_many(
        self,
        name: str,
        calls: Iterable[tuple[Any, ...] | Mapping[str, Any]],
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
        """One run of ``name`` per call, stored in one write (see ``Controller.submit_many``)."""
        common = self._common(
            name, tags=tags, priority=priority, metadata=metadata, retry=retry, timeout=timeout
        )
        _check_label(label)
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
        keys: Sequence[str | None] = (
            [None] * len(items) if bucket_keys is None else check_items(bucket_keys, "bucket_keys")
        )
        if len(keys) != len(items):
            raise ConfigurationError(
                f"bucket_keys has {len(keys)} entries for {len(items)} calls; give one per call"
            )
        batch = f"submit_many({name!r})"
        built: list[tuple[TaskRun, int | None]] = []
        for index, (item, task_id, key) in enumerate(zip(items, ids, keys, strict=True)):
            try:
                args, kwargs = _call_arguments(item)
                _check_bucket_key(key)
                bucket = self._bucket_for(key)
                run = self._new_run(
                    common,
                    args,
                    kwargs,
                    task_id=task_id,
                    label=label,
                    bucket=bucket,
                    bucket_key=key,
                )
            except ConfigurationError as exc:
                raise ConfigurationError(
                    f"{batch}: call {index} ({item!r}): {exc}; nothing was submitted"
                ) from None
            built.append((run, bucket))
        owner = self._options.owner
        return self._enter(common, built, lambda run: run.enqueue(actor=owner), batch=batch)

    def run_claimed(self, stored: TaskSnapshot, children: ChildTasks | None = None) -> TaskRun:
        """Run a task this controller claimed from the work queue, as a local submit would.

        ``stored`` is the ``queued`` snapshot ``TaskStore.claim_queued`` returned (held
        by this controller); the run continues its history and versions and calls the
        registered function with the recipe's JSON arguments (guide §8.5: only the
        name and JSON came through the store). It waits for a slot like any submission.
        ``children``: how its ``ctx.enqueue`` stores child tasks (the worker's queue).

        Raises:
            ConfigurationError: No recipe, an unregistered name, arguments that do not
                fit the signature, or a closed controller (nothing is written then).
        """
        recipe = recipe_of(stored)
        if recipe is None:
            raise ConfigurationError(f"task {stored.task_id!r} has no work-queue recipe")
        common = self._common(
            stored.name,
            tags=None,
            priority=stored.priority,
            metadata=None,
            retry=None,
            timeout=None,
        )
        run = self._new_run(
            common,
            recipe.args,
            dict(recipe.kwargs or {}),
            task_id=stored.task_id,
            stored=stored,
            upstream=self._upstream(stored),
        )
        run._state.children = children
        self._dispatch.hold(run, priority=stored.priority, tags=stored.tags, bucket=stored.bucket)
        try:
            self._writes.adopt(stored)
        except BaseException:
            self._dispatch.drop(stored.task_id)
            raise
        entered = Transition(
            task_id=stored.task_id,
            from_status=None,
            to_status=TaskStatus.QUEUED,
            trigger="queue:claimed",
            version=stored.status_version,
            at=self._options.clock.now(),
            actor=self._options.owner,
        )  # for the ledger only: the stored history already has its ``-> queued``
        self._go_live([_Entry(run=run, edge=entered, announced=[])])
        return run

    # ------------------------------------------------------------ the one path

    def _enter(
        self,
        common: _Common,
        built: list[tuple[TaskRun, int | None]],
        first_edge: Callable[[TaskRun], None],
        *,
        batch: str | None,
    ) -> list[TaskRun]:
        """Take each run's first edge, hold it, store them all, then let them go live.

        ``batch`` names a ``submit_many`` call in its errors (``None``: a lone
        ``submit``, whose run may take a free slot at once and is stored on its own).
        All or nothing: a failure holds and stores none of the runs.
        """
        entries: list[_Entry] = []
        for index, (run, bucket) in enumerate(built):
            machine = run.machine  # nobody else sees the run yet: read it without its lock
            created = machine.snapshot
            # Taken while nobody else can see the run, so the store gets the task already
            # queued (blocked, skipped) in one write with both records.
            first_edge(run)
            creation, edge = machine.transitions
            entry = _Entry(
                run=run, edge=edge, announced=[(creation, created), (edge, machine.snapshot)]
            )
            reserve = batch is None and edge.to_status is TaskStatus.QUEUED
            try:
                # Held before it is visible in the store: a stop command that races the
                # submission must find the run. Holding refuses an id another submission
                # took meanwhile (nothing of this submission was stored or announced).
                reserved = self._dispatch.hold(
                    run, priority=common.priority, tags=common.tags, bucket=bucket, reserve=reserve
                )
            except ConfigurationError as exc:
                for earlier in entries:
                    self._dispatch.drop(earlier.run.task_id)
                if batch is None:
                    raise
                raise ConfigurationError(
                    f"{batch}: call {index}: {exc}; nothing was submitted"
                ) from None
            if reserved:
                entry.launch = self._prepare_admitted(run, entry.announced)
            entries.append(entry)
        try:
            if batch is None:
                self._writes.create(entries[0].stored, entries[0].records)
            else:
                self._writes.create_batch([(entry.stored, entry.records) for entry in entries])
        except BaseException:
            for entry in entries:
                self._dispatch.drop(entry.run.task_id)
                if entry.launch is not None:  # never stored, never launched: end it for good
                    entry.run.cancel(
                        reason="the task could not be stored", actor=self._options.owner
                    )
            raise
        self._go_live(entries)
        return [entry.run for entry in entries]

    def _go_live(self, entries: list[_Entry]) -> None:
        """Stored runs: listened to, announced, then launched or queued (one pump round)."""
        for entry in entries:
            entry.run.add_listener(self._listener)
        self._started()
        for entry in entries:
            for record, snapshot in entry.announced:
                self._events.publish(record, snapshot)
        # Every waiting run enters the queue (a list, not a generator: no short-circuit).
        freed = [self._dispatch.on_transition(e.edge) for e in entries if e.launch is None]
        for entry in entries:
            if entry.launch is not None:
                entry.launch()  # only now, with the store showing it starting
        if any(freed):
            self._dispatch.pump()  # one round: the runs it admits start with one commit
        if self._closed():  # close() ran meanwhile and did not see these runs
            for entry in entries:
                entry.run.stop("controller closed", actor=self._options.owner)

    # ------------------------------------------------------------ building blocks

    def _common(
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
        if self._closed():
            raise ControllerClosed("this controller is closed; create a new Controller")
        definition = self._registry.require(name)
        all_tags = definition.tags if tags is None else definition.tags | check_tags(tags)
        if priority is None:
            priority = self._options.concurrency.priority
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

    def _upstream(self, stored: TaskSnapshot) -> dict[str, JSONValue] | None:
        """``ctx.upstream`` of a fleet pipeline node, read from the store as it starts:
        the return values of its succeeded upstream nodes (``None`` for other tasks)."""
        links = links_of(stored)
        if links is None:
            return None
        store = self._writes.store
        found = {task_id: store.get(task_id) for task_id in links.upstream.values()}
        return upstream_values(stored, found)

    def _new_run(
        self,
        common: _Common,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        task_id: str,
        label: str | None = None,
        bucket: int | None = None,
        bucket_key: str | None = None,
        stored: TaskSnapshot | None = None,
        upstream: Mapping[str, JSONValue] | None = None,
    ) -> TaskRun:
        """The run, still ``pending`` (or, with ``stored``, continuing that queued task)."""
        options = self._options
        return TaskRun(
            common.definition.fn,
            args,
            kwargs,
            task_id=task_id,
            name=common.name,
            label=label,
            retry=common.retry,
            timeout=common.timeout,
            executor=options.executor,
            graceful_stop=options.graceful_stop,
            artifact_dir=options.artifact_dir,
            clock=options.clock,
            tags=common.tags,
            priority=common.priority,
            bucket=bucket,
            bucket_key=bucket_key,
            owner=options.owner,
            metadata=common.metadata,
            pause_timeout=options.pause_timeout,
            stored=stored,
            upstream=upstream,
        )

    def _batch_ids(self, name: str, count: int, task_ids: Sequence[str] | None) -> list[str]:
        """One fresh id per call, or the caller's: as many as calls, unique, not held."""
        if task_ids is None:
            return [f"{name}-{secrets.token_hex(6)}" for _ in range(count)]
        if isinstance(task_ids, str):
            raise ConfigurationError(
                f"task_ids must be a sequence of ids, not the string {task_ids!r}"
            )
        ids = check_items(task_ids, "task_ids")
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
            launch = run._prepare_start()
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


@dataclass(slots=True, kw_only=True)
class _Entry:
    """One run on its way in: the edge the ledger sees, what is announced, its launch."""

    run: TaskRun
    edge: Transition
    """The run's first edge (``-> queued``, ``blocked`` or ``skipped``)."""
    announced: list[tuple[Transition, TaskSnapshot]]
    """Every record stored with the creation, each with its snapshot after it."""
    launch: Callable[[], None] | None = None
    """Set when the run took a free slot at submission: launches its body."""

    @property
    def stored(self) -> TaskSnapshot:
        """The snapshot the store is given: the one after the last announced record."""
        return self.announced[-1][1]

    @property
    def records(self) -> tuple[Transition, ...]:
        return tuple(record for record, _ in self.announced)


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


def _check_label(label: str | None) -> None:
    """A label is one line of text shown in task lists (``_validation.check_line``)."""
    if label is not None:
        check_line(label, "label", max_length=LABEL_MAX_LENGTH)


def _check_bucket_key(key: str | None) -> None:
    """A bucket key is stored like an id (``_validation.check_text``), as enqueue does."""
    if key is not None:
        check_text(key, "bucket_key")
