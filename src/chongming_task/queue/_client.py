"""``Client``: hand work to a pool of workers through the store (ARCHITECTURE §6).

``client.enqueue("sync", "tenant-A", bucket_key="tenant-A")`` stores the task
``queued`` with no holder, its bucket, priority and recipe (the name plus JSON
arguments), its history starting ``pending -> queued`` written by the client's own
``StateMachine``. It is a task from the first moment: ``ps``, ``status``, ``stats``
and the metrics show it, and it can be stopped, paused or resumed before a worker
takes it. A ``chongming-task worker`` owning its bucket claims it and runs it.

Only registered names and JSON cross the store (guide §8.5). With ``tasks=`` (the
module the workers load) the name and the arguments are checked against the
registered signature before anything is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    TypedDict,
    TypeVar,
    Unpack,
    overload,
)

from chongming_task._decorator import refuse_option_keywords, task_name
from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._validation import (
    check_aware,
    check_items,
    check_lookup,
    check_metadata,
    check_priority,
    check_seconds,
    check_tags,
    check_task_id,
    check_text,
    check_timeout,
    check_unique,
    refuse_unknown_keywords,
)
from chongming_task.controller._control import Controlled, control_task
from chongming_task.controller._options import QueueTaskFilters, default_owner, task_query
from chongming_task.controller._registry import TaskRegistry
from chongming_task.controller._retry import RetryReport, retry_query, retry_task, retry_tasks
from chongming_task.controller._waiting import outcome_of, wait_in_store
from chongming_task.core.state_machine import StateMachine
from chongming_task.errors import ConfigurationError, DuplicateTaskId, UnknownTask
from chongming_task.observability import TRACEPARENT, inject_trace_context
from chongming_task.pipeline import Pipeline, checked_run_id
from chongming_task.policies import BucketPolicy
from chongming_task.queue._pipelines import AsyncPipelineHandle, PipelineHandle, pipeline_entries
from chongming_task.run import R_co, TaskOutcome
from chongming_task.runtime import TaskCall, TaskContext, check_signature
from chongming_task.states import TaskStatus
from chongming_task.stores._base import TaskStore
from chongming_task.stores._capabilities import require_queue
from chongming_task.stores._dag import DAG_KEY
from chongming_task.stores._limits import (
    FleetLimit,
    check_concurrency_key,
    check_limit,
    check_limit_key,
)
from chongming_task.stores._pauses import (
    QueuePause,
    check_pause_reason,
    check_queue,
    queue_scope,
)
from chongming_task.stores._queue_records import PARENT_KEY, RECIPE_KEY, UNIQUE_KEY, Recipe

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = [
    "AsyncClient",
    "AsyncTaskHandle",
    "Client",
    "EnqueueOptions",
    "TaskHandle",
    "json_path_error",
]

P = ParamSpec("P")
R = TypeVar("R")

_MAX_DEPTH = 64


def json_path_error(value: object, path: str) -> str | None:
    """Where ``value`` stops being JSON (``"args[1]['when']: datetime"``), or ``None``."""
    stack: list[tuple[object, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > _MAX_DEPTH:
            return f"{where}: nested deeper than {_MAX_DEPTH} levels"
        if isinstance(item, str):
            if not _is_utf8(item) or "\x00" in item:
                return f"{where}: {item!r:.60} holds a lone surrogate or a NUL (not storable)"
            continue
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{where}: {item!r} is not a JSON number"
            continue
        if isinstance(item, list | tuple):
            stack.extend((sub, f"{where}[{i}]", depth + 1) for i, sub in enumerate(item))
            continue
        if isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    return f"{where}: key {key!r} is a {type(key).__name__}, not a string"
                stack.append((key, f"{where} (a key)", depth))
                stack.append((sub, f"{where}[{key!r}]", depth + 1))
            continue
        return f"{where}: a {type(item).__name__} is not JSON ({item!r:.60})"
    return None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _registry_of(tasks: object) -> TaskRegistry | None:
    """The definitions ``tasks`` names: a module, a Controller, a registry, or functions."""
    if tasks is None:
        return None
    if isinstance(tasks, TaskRegistry):
        return tasks
    registry = getattr(tasks, "registry", None)
    if isinstance(registry, TaskRegistry):  # a Controller
        return registry
    if isinstance(tasks, ModuleType):
        register = getattr(tasks, "register", None)
        if callable(register) and not hasattr(register, "__chongming_task__"):
            from chongming_task.controller import Controller

            with Controller() as probe:  # in memory, no threads: only its registry
                register(probe)
                return probe.registry
        found = TaskRegistry()
        found.register_module(tasks)
        return found
    if isinstance(tasks, Iterable):
        found = TaskRegistry()
        found.register_all(*tasks)
        return found
    raise ConfigurationError(
        f"tasks must be a module, a Controller, a TaskRegistry or @task functions, got {tasks!r}"
    )


class EnqueueOptions(TypedDict, total=False):
    """The options of :meth:`Client.enqueue` (see there), as :meth:`Client.with_options`
    takes them."""

    task_id: str | None
    bucket_key: str | None
    priority: int
    tags: Iterable[str] | None
    label: str | None
    delay: float | timedelta | None
    not_before: datetime | None
    metadata: Mapping[str, JSONValue] | None
    unique_key: str | None
    unique_for: float | timedelta | None
    concurrency_key: str | None
    connection: object | None


@public
class TaskHandle(Generic[R_co]):
    """A task enqueued (or looked up) through a :class:`Client`: read it, control it, wait.

    ``created`` is ``False`` when an enqueue with a ``unique_key`` found a task with that
    key standing and returned it instead of creating one (``True`` otherwise).

    ``TaskHandle[int]`` (from enqueueing a task function returning ``int``) types
    ``wait().value`` as ``int``; a handle from a name is ``TaskHandle[Any]``.
    """

    __slots__ = ("_client", "created", "task_id")

    def __init__(self, client: Client, task_id: str, *, created: bool = True) -> None:
        self._client = client
        self.task_id = check_lookup(task_id)
        self.created = created

    @property
    def snapshot(self) -> TaskSnapshot:
        """The stored snapshot now (any process's writes included).

        Raises:
            ConfigurationError: The task is no longer in the store (pruned).
        """
        found = self._client.store.get(self.task_id)
        if found is None:
            raise ConfigurationError(f"task {self.task_id!r} is not in the store (pruned?)")
        return found

    @property
    def status(self) -> TaskStatus:
        return self.snapshot.status

    @property
    def transitions(self) -> list[Transition]:
        """The stored history, oldest first (starting ``pending -> queued``)."""
        return self._client.store.history(self.task_id)

    def wait(self, timeout: float | None = None) -> TaskOutcome[R_co]:
        """Block until the task is terminal; its outcome (read from the store).

        Raises:
            TimeoutError: ``timeout`` passed first (the task is not affected).
        """
        return self._client.wait(self.task_id, timeout)

    def stop(self, reason: str | None = None) -> bool:
        """Stop it: immediate while no worker holds it, else a command to its holder."""
        return self._client.stop(self.task_id, reason=reason)

    def pause(self) -> bool:
        """Pause it: immediate while queued and unheld (``True``); else a command
        (``False``: unconfirmed, like a cross-process ``Controller.pause``)."""
        return self._client.pause(self.task_id)

    def resume(self) -> bool:
        return self._client.resume(self.task_id)

    def retry(self, reason: str | None = None) -> TaskHandle[R_co]:
        """Run it again: :meth:`Client.retry` of this task; returns this handle."""
        self._client.retry(self.task_id, reason=reason)
        return self

    def __repr__(self) -> str:
        return f"TaskHandle({self.task_id!r})"


def task_metadata(
    metadata: Mapping[str, JSONValue] | None,
    unique_key: str | None = None,
    parent: str | None = None,
) -> dict[str, JSONValue]:
    """The caller's metadata, checked, with the current trace context (and the unique
    key, under the reserved ``"unique_key"``) added.

    ``"parent"`` is reserved as well: ``ctx.enqueue`` stores a child's ``parent`` there.

    The W3C ``traceparent`` of the enqueuing span (when the ``otel`` extra is installed
    and a span is current) makes the worker's run span its child; a ``traceparent``
    the caller gives wins.
    """
    metadata = check_metadata({} if metadata is None else metadata)
    bad = json_path_error(metadata, "metadata")
    if bad is not None:
        raise ConfigurationError(f"only JSON crosses the store; {bad}")
    for reserved in (RECIPE_KEY, UNIQUE_KEY, DAG_KEY, PARENT_KEY):
        if reserved in metadata:
            raise ConfigurationError(f"metadata key {reserved!r} is reserved for the queue")
    result = dict(metadata)
    if unique_key is not None:
        result[UNIQUE_KEY] = unique_key
    if parent is not None:
        result[PARENT_KEY] = parent
    if TRACEPARENT not in result:
        with contextlib.suppress(ConfigurationError):  # no otel extra: nothing to carry
            result = inject_trace_context(result)
    return result


@public
class Client:
    """Enqueue work for workers, and look at or control any task, through ``store``.

    Args:
        store: The store the workers use (SQLite file or PostgreSQL).
        tasks: The task module the workers load (or a Controller / TaskRegistry /
            ``@task`` functions); with it, ``enqueue`` checks the name and the
            arguments against the registered signature. Without it, names are only
            checked by the worker (an unknown name then fails there, visibly).
        bucket_policy: How ``bucket_key`` maps to a bucket; must match the workers'.
        num_buckets: Shorthand for ``BucketPolicy(num_buckets)``.
        actor: Who enqueues (written on transitions); default ``hostname:pid``.
        poll_interval: How often ``wait`` reads the store.
        current_connection: Called by :meth:`enqueue` and :meth:`enqueue_many` when no
            ``connection=`` is given: the connection whose open transaction to write
            in, or ``None`` for the store's own connection (committed at once). A
            framework integration passes one that returns its connection while a
            transaction is open (``chongming_task.contrib.django``: inside
            ``transaction.atomic()``).
    """

    def __init__(
        self,
        store: TaskStore,
        *,
        tasks: ModuleType | Controller | TaskRegistry | Iterable[Callable[..., Any]] | None = None,
        bucket_policy: BucketPolicy | None = None,
        num_buckets: int | None = None,
        actor: str | None = None,
        poll_interval: float = 0.05,
        current_connection: Callable[[], object | None] | None = None,
    ) -> None:
        if not isinstance(store, TaskStore):
            raise ConfigurationError(f"store must be a TaskStore, got {store!r}")
        if bucket_policy is not None and not isinstance(bucket_policy, BucketPolicy):
            raise ConfigurationError(f"bucket_policy must be a BucketPolicy, got {bucket_policy!r}")
        if bucket_policy is not None and num_buckets is not None:
            raise ConfigurationError("give bucket_policy or num_buckets, not both")
        if current_connection is not None and not callable(current_connection):
            raise ConfigurationError(
                f"current_connection must be a callable, got {current_connection!r}"
            )
        self.store = store
        self._current_connection = current_connection
        self.registry = _registry_of(tasks)
        self.bucket_policy = bucket_policy or BucketPolicy(
            num_buckets=64 if num_buckets is None else num_buckets
        )
        self.actor = f"client:{default_owner()}" if actor is None else check_text(actor, "actor")
        self.poll_interval = check_seconds(poll_interval, "poll_interval")
        self.clock = store.clock
        #: The task whose children this client enqueues (``ctx.enqueue``); ``None``.
        self._parent: str | None = None

    # ------------------------------------------------------------ enqueue

    @overload
    def enqueue(
        self,
        task: Callable[Concatenate[TaskContext, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> TaskHandle[R]: ...

    @overload
    def enqueue(
        self, task: Callable[Concatenate[TaskContext, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[R]: ...

    @overload
    def enqueue(
        self,
        task: str,
        /,
        *args: Any,
        task_id: str | None = None,
        bucket_key: str | None = None,
        priority: int = 0,
        tags: Iterable[str] | None = None,
        label: str | None = None,
        delay: float | timedelta | None = None,
        not_before: datetime | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        unique_key: str | None = None,
        unique_for: float | timedelta | None = None,
        concurrency_key: str | None = None,
        connection: object | None = None,
        **kwargs: Any,
    ) -> TaskHandle[Any]: ...

    # The typed signatures take no options (a type checker cannot tell them from the
    # task's own keywords: docs/queue.md "Typed enqueue"); at run time they still may.
    def enqueue(  # type: ignore[misc]
        self,
        task: str | Callable[..., Any],
        /,
        *args: Any,
        task_id: str | None = None,
        bucket_key: str | None = None,
        priority: int = 0,
        tags: Iterable[str] | None = None,
        label: str | None = None,
        delay: float | timedelta | None = None,
        not_before: datetime | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        unique_key: str | None = None,
        unique_for: float | timedelta | None = None,
        concurrency_key: str | None = None,
        connection: object | None = None,
        **kwargs: Any,
    ) -> TaskHandle[Any]:
        """Store task ``task`` ``queued`` for a worker owning its bucket; returns its handle.

        ``task`` is the registered name or the ``@task`` function itself (its name is
        taken from the definition; only the name crosses the store). Given the
        function, a type checker checks the arguments against its parameters and types
        ``handle.wait().value`` as its return type; options then go through
        :meth:`with_options` (docs/queue.md "Typed enqueue").

        With ``unique_key``, nothing is created while a task enqueued with that key is
        not finished (nor, with ``unique_for`` seconds or a ``timedelta``, while one
        finished within that period): that task's handle is returned, with
        ``handle.created`` ``False``. The store decides, atomically, so enqueuers
        racing on one key from any number of processes create one task.

        ``concurrency_key`` (``"tenant:42"``) is the dynamic key fleet limits count the
        task under, beside its tags (:meth:`set_limit`, docs/queue.md "Limits").

        ``connection`` (a psycopg 3 connection to a PostgreSQL store's database, a
        ``sqlite3.Connection`` to a SQLite store's file, or an SQLAlchemy
        ``Connection`` wrapping either) writes the task and the workers' wake-up
        inside that connection's open transaction: they commit with it, and a
        rollback leaves no task and wakes nobody (docs/queue.md "Enqueue in your
        transaction"). Nothing is committed by this call. Without ``connection``, the
        client's ``current_connection`` (if any) names the connection to write in.

        Raises:
            ConfigurationError: Unknown name or arguments that do not bind (with
                ``tasks=``), a non-JSON argument (the message gives its path), a taken
                ``task_id``, a malformed option, a function that is not an ``@task``
                function (or, with ``tasks=``, not the one registered under its name),
                or a ``connection`` that is not one to the store's database or has no
                transaction to join; nothing is stored then.
            StoreError: The store failed; nothing is stored.
        """
        key, window = check_unique(unique_key, unique_for)
        snapshot, records = self._prepare(
            self._name_for(task),
            args,
            kwargs,
            task_id=task_id,
            bucket_key=bucket_key,
            priority=priority,
            tags=tags,
            label=label,
            delay=delay,
            not_before=not_before,
            metadata=metadata,
            unique_key=key,
            concurrency_key=concurrency_key,
        )
        queue = require_queue(self.store, "Client.enqueue (workers claim from a queue)")
        connection = self._transaction_of(connection)
        if connection is not None:
            [(standing, created)] = queue.create_in_transaction(
                connection, [(snapshot, records)], finished_since=self._finished_since(window)
            )
            return TaskHandle(self, standing, created=created)
        if key is None:
            queue.create_queued(snapshot, records)
            return TaskHandle(self, snapshot.task_id)
        [(standing, created)] = queue.create_unique(
            [(snapshot, records)], finished_since=self._finished_since(window)
        )
        if created:
            queue.notify_work()
        return TaskHandle(self, standing, created=created)

    def _transaction_of(self, connection: object | None) -> object | None:
        """The connection an enqueue writes in: the one given, else ``current_connection``'s."""
        if connection is None and self._current_connection is not None:
            return self._current_connection()
        return connection

    def with_options(self, **options: Unpack[EnqueueOptions]) -> EnqueueWithOptions:
        """:meth:`enqueue` with these options, given apart from the task's arguments.

        ``client.with_options(delay=60, priority=5).enqueue(send, "a@example.org")``:
        a type checker checks every argument after ``send`` against its parameters
        (the options could not be told from them in one call).

        Raises:
            TypeError: A keyword that is no option (naming the nearest).
        """
        refuse_unknown_keywords("with_options", options, EnqueueOptions.__optional_keys__)
        return EnqueueWithOptions(self, options)

    def _name_for(self, task: str | Callable[..., Any]) -> str:
        """The name ``task`` stands for (an ``@task`` function's, checked against ``tasks=``)."""
        return task_name(task) if self.registry is None else self.registry.name_for(task)

    def enqueue_many(
        self,
        name: str | Callable[..., Any],
        calls: Iterable[tuple[Any, ...] | Mapping[str, Any]],
        /,
        *,
        task_ids: Sequence[str] | None = None,
        bucket_keys: Sequence[str | None] | None = None,
        priority: int = 0,
        tags: Iterable[str] | None = None,
        label: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
        unique_keys: Sequence[str | None] | None = None,
        unique_for: float | timedelta | None = None,
        concurrency_keys: Sequence[str | None] | None = None,
        connection: object | None = None,
    ) -> list[TaskHandle[Any]]:
        """Enqueue ``name`` once per call (a tuple of args or a mapping of kwargs), all or none.

        ``name`` may be the ``@task`` function itself, as in :meth:`enqueue`.

        ``unique_keys`` gives each call a unique key (or ``None``), as
        :meth:`enqueue`'s ``unique_key``; ``unique_for`` is the window for all of them.
        A call whose key has a standing task -- stored already, or created by an
        earlier call of this batch -- gets that task's handle (``created`` ``False``).
        ``concurrency_keys`` gives each call its ``concurrency_key`` (see :meth:`enqueue`).
        ``connection``: the whole batch in the caller's transaction (see :meth:`enqueue`).

        Raises:
            ConfigurationError: As :meth:`enqueue`, naming the call at fault; nothing
                of the batch is stored.
        """
        name = self._name_for(name)
        items = check_items(calls, "calls")

        def column(values: Iterable[Any] | None, name: str) -> list[Any]:
            return [None] * len(items) if values is None else check_items(values, name)

        ids = column(task_ids, "task_ids")
        keys = column(bucket_keys, "bucket_keys")
        uniques = column(unique_keys, "unique_keys")
        limit_keys = column(concurrency_keys, "concurrency_keys")
        if any(len(given) != len(items) for given in (ids, keys, uniques, limit_keys)):
            raise ConfigurationError(
                "task_ids, bucket_keys, unique_keys and concurrency_keys need one entry per call"
            )
        if unique_for is not None and all(u is None for u in uniques):
            check_unique(None, unique_for)  # refused: a window needs a key
        window: float | None = None
        entries: list[tuple[TaskSnapshot, Sequence[Transition]]] = []
        for index, (item, task_id, key, given_unique, limit_key) in enumerate(
            zip(items, ids, keys, uniques, limit_keys, strict=True)
        ):
            if isinstance(item, tuple):
                args, kwargs = item, {}
            elif isinstance(item, Mapping):
                args, kwargs = (), dict(item)
            else:
                raise ConfigurationError(
                    f"enqueue_many({name!r}): call {index} must be a tuple of arguments or "
                    f"a mapping of keyword arguments, got {type(item).__name__}"
                )
            try:
                unique, seconds = check_unique(
                    given_unique, None if given_unique is None else unique_for
                )
                window = seconds if seconds is not None else window
                entries.append(
                    self._prepare(
                        name,
                        args,
                        kwargs,
                        task_id=task_id,
                        bucket_key=key,
                        priority=priority,
                        tags=tags,
                        label=label,
                        delay=None,
                        not_before=None,
                        metadata=metadata,
                        unique_key=unique,
                        concurrency_key=limit_key,
                    )
                )
            except ConfigurationError as exc:
                raise ConfigurationError(
                    f"enqueue_many({name!r}): call {index}: {exc}; nothing was enqueued"
                ) from None
        if not entries:
            return []
        queue = require_queue(self.store, "Client.enqueue_many (workers claim from a queue)")
        connection = self._transaction_of(connection)
        if connection is not None:
            standing = queue.create_in_transaction(
                connection, entries, finished_since=self._finished_since(window)
            )
            return [TaskHandle(self, task_id, created=created) for task_id, created in standing]
        if all(u is None for u in uniques):
            self.store.create_batch(entries)
            queue.notify_work()
            return [TaskHandle(self, snapshot.task_id) for snapshot, _ in entries]
        standing = queue.create_unique(entries, finished_since=self._finished_since(window))
        if any(created for _, created in standing):
            queue.notify_work()
        return [TaskHandle(self, task_id, created=created) for task_id, created in standing]

    def enqueue_pipeline(self, pipeline: Pipeline, *, run_id: str | None = None) -> PipelineHandle:
        """Store the whole DAG of ``pipeline`` in one transaction for the workers to run.

        Every node becomes a queued-work task (``<run_id>/<node_id>``) holding its JSON
        arguments, its upstream and downstream nodes, its join mode and the pipeline's
        aggregation. Nodes without upstream nodes are ``queued``, the others ``blocked``.
        No process orchestrates the run: when a worker (or a stop, or reconcile) settles
        a node, the store releases or skips its dependants in that same transaction
        (docs/pipelines.md, "Pipelines on the fleet"). A node reads its upstream nodes'
        return values with ``ctx.input(node_id, default)`` / ``ctx.upstream``.

        Returns a :class:`PipelineHandle` (``wait``, ``stop``, per-node state); any
        process makes the same handle with :meth:`pipeline` and the run id.

        Raises:
            ConfigurationError: An invalid graph or run id, a task name the client's
                ``tasks=`` does not register, a node's arguments or options refused as
                :meth:`enqueue` refuses them (the node is named), a run id in use, or
                a store that cannot write a batch atomically; nothing is stored.
            CircularDependency: The graph has a cycle; nothing is stored.
        """
        run_id = checked_run_id(pipeline, run_id) if isinstance(pipeline, Pipeline) else ""
        entries = pipeline_entries(self, pipeline, run_id)
        queue = require_queue(self.store, "Client.enqueue_pipeline (workers claim from a queue)")
        if not self.store.atomic_create_batch:
            raise ConfigurationError(
                f"{type(self.store).__name__} cannot store a batch in one transaction "
                "(atomic_create_batch); a fleet pipeline needs it: use SQLite or PostgreSQL"
            )
        try:
            self.store.create_batch(entries)
        except DuplicateTaskId as exc:
            raise ConfigurationError(
                f"pipeline run id {run_id!r} is already used ({exc}); pass another run_id "
                "or let enqueue_pipeline() make one"
            ) from None
        queue.notify_work()
        return PipelineHandle(self, run_id)

    def pipeline(self, run_id: str) -> PipelineHandle:
        """The handle of a fleet pipeline run stored by :meth:`enqueue_pipeline`.

        Raises:
            ConfigurationError: No such run in the store.
        """
        handle = PipelineHandle(self, run_id)
        handle.statuses()  # refuses an unknown run now, not at the first read
        return handle

    def _finished_since(self, window: float | None) -> datetime | None:
        """When the ``unique_for`` window opened (by the store's clock), or ``None``."""
        return None if window is None else self.clock.now() - timedelta(seconds=window)

    def _not_before(
        self, delay: float | timedelta | None, not_before: datetime | None
    ) -> datetime | None:
        """The earliest start of ``delay`` or ``not_before`` (one of them), in UTC."""
        if delay is not None and not_before is not None:
            raise ConfigurationError("give delay or not_before, not both")
        if delay is not None:
            seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
            not_before = self.clock.now() + timedelta(
                seconds=check_seconds(seconds, "delay", allow_zero=True)
            )
        if not_before is not None:
            # Stored in UTC: the claim query compares it as an instant, in SQL.
            not_before = check_aware(not_before, "not_before").astimezone(UTC)
        return not_before

    def _prepare(
        self,
        name: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        *,
        task_id: str | None,
        bucket_key: str | None,
        priority: int,
        tags: Iterable[str] | None,
        label: str | None,
        delay: float | timedelta | None,
        not_before: datetime | None,
        metadata: Mapping[str, JSONValue] | None,
        unique_key: str | None = None,
        concurrency_key: str | None = None,
        reserved: Mapping[str, JSONValue] | None = None,
        blocked: bool = False,
    ) -> tuple[TaskSnapshot, tuple[Transition, ...]]:
        check_text(name, "task name")
        if task_id is not None:
            check_task_id(task_id)
        priority = check_priority(priority)
        bad = json_path_error(list(args), "args") or json_path_error(dict(kwargs), "kwargs")
        if bad is not None:
            raise ConfigurationError(f"enqueue({name!r}): only JSON crosses the store; {bad}")
        max_attempts = 1
        all_tags: frozenset[str] = frozenset()
        if self.registry is not None:
            definition = self.registry.require(name)
            check_signature(definition.fn, TaskCall(definition.fn, args, dict(kwargs), {}), name)
            if definition.retry is not None:
                max_attempts = definition.retry.max_attempts
            all_tags = definition.tags
        if tags is not None:
            all_tags = all_tags | check_tags(tags)
        if label is not None:
            check_text(label, "label")
        not_before = self._not_before(delay, not_before)
        if bucket_key is not None:
            check_text(bucket_key, "bucket_key")
        bucket = None if bucket_key is None else self.bucket_policy.bucket_for(bucket_key)
        if task_id is None:
            task_id = f"{name}-{secrets.token_hex(6)}"
        stored = task_metadata(metadata, unique_key, self._parent)
        recipe = Recipe(
            args=tuple(args),
            kwargs=dict(kwargs),
            not_before=not_before,
            enqueued_by=self.actor,
            concurrency_key=None
            if concurrency_key is None
            else check_concurrency_key(concurrency_key),
        )
        machine = StateMachine.create(
            task_id,
            name,
            max_attempts=max_attempts,
            label=label,
            tags=all_tags,
            priority=priority,
            bucket=bucket,
            bucket_key=bucket_key,
            owner=None,
            metadata={**stored, RECIPE_KEY: recipe.to_dict(), **(reserved or {})},
            clock=self.clock,
        )
        if blocked:
            machine.mark_blocked(reason="waiting for upstream nodes", trigger="queue:blocked")
        else:
            machine.mark_queued(actor=self.actor, trigger="queue:enqueued")
        return machine.snapshot, machine.transitions

    # ------------------------------------------------------------ reading

    def get(self, task_id: str) -> TaskHandle[Any] | None:
        """A handle on ``task_id`` if the store has it."""
        check_lookup(task_id)
        return None if self.store.get(task_id) is None else TaskHandle(self, task_id)

    def list_tasks(self, **filters: Unpack[QueueTaskFilters]) -> list[TaskSnapshot]:
        """Stored tasks matching every filter (queued ones included), like ``Controller``."""
        return self.store.query(task_query(QueueTaskFilters.__optional_keys__, **filters))

    def wait(self, task_id: str, timeout: float | None = None) -> TaskOutcome:
        snapshot = wait_in_store(self.store, task_id, timeout=timeout, interval=self.poll_interval)
        return outcome_of(snapshot)

    # ------------------------------------------------------------ control

    def stop(self, task_id: str, *, reason: str | None = None) -> bool:
        """Stop ``task_id``: at once if no worker took it, else by a command for its holder.

        ``True`` when found (stopped now, requested, or already finished).
        """
        return self._control(task_id, "stop", reason).accepted

    def pause(self, task_id: str) -> bool:
        """Pause ``task_id``; ``True`` only when paused now (queued and not taken)."""
        return self._control(task_id, "pause", None).confirmed

    def resume(self, task_id: str) -> bool:
        """Resume a paused ``task_id``; ``True`` when found and accepted."""
        return self._control(task_id, "resume", None).accepted

    def retry(self, task_id: str, *, reason: str | None = None) -> TaskHandle[Any]:
        """Run the finished task ``task_id`` again, keeping its id and its history.

        One guarded write moves it from failed, stopped, cancelled or lost back to
        ``queued``, held by nobody, recording this client's ``actor``, ``reason`` and the
        time (trigger ``operator:retry``); any worker that may claim it runs it again
        from its stored recipe. Attempts continue counting; ``max_attempts`` grows only
        so that at least one more attempt can start (docs/queue.md "Run it again").

        Raises:
            UnknownTask: No such task in the store.
            InvalidState: The task is not finished, succeeded or was skipped, or has no
                stored recipe (enqueue it with :meth:`enqueue` to make one); nothing
                is written.
            ConfigurationError: Another unfinished task holds its ``unique_key``.
        """
        retry_task(self.store, task_id, actor=self.actor, clock=self.clock, reason=reason)
        return TaskHandle(self, task_id)

    def retry_many(
        self,
        *,
        reason: str | None = None,
        dry_run: bool = False,
        **filters: Unpack[QueueTaskFilters],
    ) -> RetryReport:
        """:meth:`retry` every task the filters (those of :meth:`list_tasks`) match.

        ``status`` defaults to every state a task is retried from (failed, stopped,
        cancelled, lost) and may name only those; at least one filter is needed. A task
        that cannot be retried is listed in ``report.refused`` with the reason and does
        not stop the others. ``dry_run``: check which would be retried, write nothing.

        Raises:
            ConfigurationError: No filter, a malformed one, or a status no task is
                retried from; nothing is written.
        """
        query = retry_query(**filters)
        return retry_tasks(
            self.store, query, actor=self.actor, clock=self.clock, reason=reason, dry_run=dry_run
        )

    def _control(self, task_id: str, action: str, reason: str | None) -> Controlled:
        return control_task(
            self.store, task_id, action, actor=self.actor, clock=self.clock, reason=reason
        )

    # ------------------------------------------------------------ fleet limits

    def set_limit(
        self, key: str, *, concurrency: int | None = None, rate: str | None = None
    ) -> FleetLimit:
        """Declare (or replace) a fleet limit every worker on this store obeys.

        ``key`` is a tag, a ``concurrency_key``, or a pattern ending in ``*``
        (``"tenant:*"``: one limit per distinct matching key). ``concurrency=N`` caps
        the tasks of a key holding a slot at once; ``rate="100/m"`` (``/s``, ``/m``,
        ``/h``) caps its starts within any such window; both may be given.

        Raises:
            ConfigurationError: A malformed key or bound, neither bound, or a store
                that keeps no fleet limits; nothing is changed.
        """
        limit = check_limit(key, concurrency, rate)
        require_queue(self.store, "Client.set_limit (limits are kept with the queue)").set_limit(
            limit
        )
        return limit

    def delete_limit(self, key: str) -> bool:
        """Forget the fleet limit declared for ``key``; ``False`` if there was none."""
        check_limit_key(key)
        return require_queue(self.store, "Client.delete_limit").delete_limit(key)

    def limits(self) -> list[FleetLimit]:
        """The declared fleet limits, by key."""
        return require_queue(self.store, "Client.limits").list_limits()

    # ------------------------------------------------------------ paused queues

    def pause_queue(
        self, *, bucket: int | None = None, name: str | None = None, reason: str
    ) -> QueuePause:
        """Stop intake of one queue: no worker claims its queued tasks until resumed.

        The queue is the tasks of task ``name`` or of ``bucket`` (give one). Stored with
        this client's actor, ``reason`` and the time, so every worker on the store obeys
        it at its next claim and ``ps``, ``health`` and ``explain`` show it. Running
        tasks are not touched. Pausing a paused queue replaces who, why and when.

        Raises:
            ConfigurationError: Both or neither of ``bucket`` and ``name``, a bucket
                outside the client's bucket policy, a name the client's ``tasks=`` does
                not register, no reason, or a store that keeps no paused queues;
                nothing is changed.
        """
        pause = QueuePause(
            name=self._queue_name(name, bucket)[0],
            bucket=bucket,
            actor=self.actor,
            reason=check_pause_reason(reason),
            paused_at=self.clock.now(),
        )
        return require_queue(self.store, "Client.pause_queue").pause_queue(pause)

    def resume_queue(self, *, bucket: int | None = None, name: str | None = None) -> bool:
        """Let workers claim the queue's tasks again (and wake them); ``False`` if it
        was not paused.

        Raises:
            ConfigurationError: As :meth:`pause_queue` for ``bucket`` and ``name``.
        """
        checked, number = self._queue_name(name, bucket)
        store = require_queue(self.store, "Client.resume_queue")
        return store.resume_queue(queue_scope(checked, number)) is not None

    def queue_pauses(self) -> list[QueuePause]:
        """The paused queues (names first, then buckets)."""
        return require_queue(self.store, "Client.queue_pauses").list_queue_pauses()

    def _queue_name(self, name: object, bucket: object) -> tuple[str | None, int | None]:
        checked = check_queue(name, bucket, num_buckets=self.bucket_policy.num_buckets)
        if checked[0] is not None and self.registry is not None:
            self.registry.require(checked[0])
        return checked

    def __repr__(self) -> str:
        return f"Client({self.store!r})"


class EnqueueWithOptions:
    """:meth:`Client.enqueue` with options given apart: ``client.with_options(...)``.

    Every keyword of :meth:`enqueue` goes to the task; one named like an option is
    refused (pass that parameter positionally, the rule of the plain call).
    """

    __slots__ = ("_client", "_options")

    def __init__(self, client: Client, options: EnqueueOptions) -> None:
        self._client = client
        self._options = options

    @overload
    def enqueue(
        self,
        task: Callable[Concatenate[TaskContext, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> TaskHandle[R]: ...

    @overload
    def enqueue(
        self, task: Callable[Concatenate[TaskContext, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> TaskHandle[R]: ...

    @overload
    def enqueue(self, task: str, /, *args: Any, **kwargs: Any) -> TaskHandle[Any]: ...

    def enqueue(
        self, task: str | Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> TaskHandle[Any]:
        """As :meth:`Client.enqueue` with the options given to ``with_options``."""
        refuse_option_keywords("enqueue", kwargs, EnqueueOptions.__optional_keys__)
        name = self._client._name_for(task)
        return self._client.enqueue(name, *args, **self._options, **kwargs)

    def __repr__(self) -> str:
        return f"EnqueueWithOptions({self._client!r}, {self._options!r})"


@public
class AsyncTaskHandle(Generic[R_co]):
    """The asyncio twin of :class:`TaskHandle` (``await handle.wait()``)."""

    __slots__ = ("_sync",)

    def __init__(self, handle: TaskHandle[R_co]) -> None:
        self._sync = handle

    @property
    def task_id(self) -> str:
        return self._sync.task_id

    @property
    def created(self) -> bool:
        """As :attr:`TaskHandle.created`."""
        return self._sync.created

    async def snapshot(self) -> TaskSnapshot:
        return await asyncio.to_thread(lambda: self._sync.snapshot)

    async def status(self) -> TaskStatus:
        return (await self.snapshot()).status

    async def transitions(self) -> list[Transition]:
        return await asyncio.to_thread(lambda: self._sync.transitions)

    async def wait(self, timeout: float | None = None) -> TaskOutcome[R_co]:
        """Poll the store without blocking the event loop until the task is terminal.

        Raises:
            UnknownTask: The store has no such task (pruned).
            TimeoutError: ``timeout`` passed first (the task is not affected).
        """
        client = self._sync._client
        return outcome_of(
            await await_in_store(
                client.store, self.task_id, timeout=timeout, interval=client.poll_interval
            )
        )

    async def stop(self, reason: str | None = None) -> bool:
        return await asyncio.to_thread(self._sync.stop, reason)

    async def pause(self) -> bool:
        return await asyncio.to_thread(self._sync.pause)

    async def resume(self) -> bool:
        return await asyncio.to_thread(self._sync.resume)

    async def retry(self, reason: str | None = None) -> AsyncTaskHandle[R_co]:
        """As :meth:`TaskHandle.retry`; returns this handle."""
        await asyncio.to_thread(self._sync.retry, reason)
        return self

    def __repr__(self) -> str:
        return f"AsyncTaskHandle({self.task_id!r})"


async def await_in_store(
    store: TaskStore, task_id: str, *, timeout: float | None, interval: float
) -> TaskSnapshot:
    """``wait_in_store`` for a coroutine: each read in a thread, the pauses awaited.

    Raises:
        UnknownTask: The store has no such task (a ``ConfigurationError``).
        TimeoutError: It was still unfinished when ``timeout`` passed.
        ConfigurationError: ``task_id`` is no string, or ``timeout`` no seconds >= 0.
    """
    check_lookup(task_id)
    check_timeout(timeout)
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        snapshot = await asyncio.to_thread(store.get, task_id)
        if snapshot is None:
            raise UnknownTask(task_id)
        if snapshot.is_terminal:
            return snapshot
        remaining = None if deadline is None else deadline - loop.time()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(
                f"task {task_id!r} is still {snapshot.status.value} after {timeout}s "
                "(waiting does not stop it)"
            )
        await asyncio.sleep(interval if remaining is None else min(interval, remaining))


@public
class AsyncClient:
    """The asyncio twin of :class:`Client` for FastAPI-style apps: store calls in threads.

    Every public method of :class:`Client` has its twin here, with the same arguments:
    a coroutine where the client's method reads or writes the store, a plain method
    where it does not (:meth:`with_options`). Handles are the asyncio twins too
    (:class:`AsyncTaskHandle`, :class:`AsyncPipelineHandle`). A test compares the
    two classes, so a method added to ``Client`` alone fails it.
    """

    def __init__(self, store: TaskStore, **options: Any) -> None:
        self.sync = Client(store, **options)

    @overload
    async def enqueue(
        self,
        task: Callable[Concatenate[TaskContext, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> AsyncTaskHandle[R]: ...

    @overload
    async def enqueue(
        self, task: Callable[Concatenate[TaskContext, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncTaskHandle[R]: ...

    @overload
    async def enqueue(self, task: str, /, *args: Any, **options: Any) -> AsyncTaskHandle[Any]: ...

    async def enqueue(
        self, task: str | Callable[..., Any], /, *args: Any, **options: Any
    ) -> AsyncTaskHandle[Any]:
        """As :meth:`Client.enqueue` (the task function or its name)."""
        name = self.sync._name_for(task)
        handle = await asyncio.to_thread(lambda: self.sync.enqueue(name, *args, **options))
        return AsyncTaskHandle(handle)

    def with_options(self, **options: Unpack[EnqueueOptions]) -> AsyncEnqueueWithOptions:
        """As :meth:`Client.with_options`: ``await client.with_options(delay=5).enqueue(...)``."""
        return AsyncEnqueueWithOptions(self.sync.with_options(**options))

    async def enqueue_many(
        self,
        name: str | Callable[..., Any],
        calls: Iterable[tuple[Any, ...] | Mapping[str, Any]],
        /,
        **options: Any,
    ) -> list[AsyncTaskHandle[Any]]:
        items = check_items(calls, "calls")
        handles = await asyncio.to_thread(lambda: self.sync.enqueue_many(name, items, **options))
        return [AsyncTaskHandle(handle) for handle in handles]

    async def enqueue_pipeline(
        self, pipeline: Pipeline, *, run_id: str | None = None
    ) -> AsyncPipelineHandle:
        """As :meth:`Client.enqueue_pipeline`, the store write in a thread."""
        handle = await asyncio.to_thread(
            lambda: self.sync.enqueue_pipeline(pipeline, run_id=run_id)
        )
        return AsyncPipelineHandle(handle)

    async def pipeline(self, run_id: str) -> AsyncPipelineHandle:
        """As :meth:`Client.pipeline`.

        Raises:
            ConfigurationError: No such run in the store.
        """
        return AsyncPipelineHandle(await asyncio.to_thread(self.sync.pipeline, run_id))

    async def get(self, task_id: str) -> AsyncTaskHandle[Any] | None:
        handle = await asyncio.to_thread(self.sync.get, task_id)
        return None if handle is None else AsyncTaskHandle(handle)

    async def wait(self, task_id: str, timeout: float | None = None) -> TaskOutcome:
        """As :meth:`Client.wait`, polling the store without blocking the event loop.

        Raises:
            UnknownTask: The store has no such task.
            TimeoutError: ``timeout`` passed first (the task is not affected).
        """
        sync = self.sync
        return outcome_of(
            await await_in_store(sync.store, task_id, timeout=timeout, interval=sync.poll_interval)
        )

    async def list_tasks(self, **filters: Any) -> list[TaskSnapshot]:
        return await asyncio.to_thread(lambda: self.sync.list_tasks(**filters))

    async def stop(self, task_id: str, *, reason: str | None = None) -> bool:
        return await asyncio.to_thread(lambda: self.sync.stop(task_id, reason=reason))

    async def pause(self, task_id: str) -> bool:
        return await asyncio.to_thread(self.sync.pause, task_id)

    async def resume(self, task_id: str) -> bool:
        return await asyncio.to_thread(self.sync.resume, task_id)

    async def retry(self, task_id: str, *, reason: str | None = None) -> AsyncTaskHandle[Any]:
        """As :meth:`Client.retry`."""
        handle = await asyncio.to_thread(lambda: self.sync.retry(task_id, reason=reason))
        return AsyncTaskHandle(handle)

    async def retry_many(
        self, *, reason: str | None = None, dry_run: bool = False, **filters: Any
    ) -> RetryReport:
        """As :meth:`Client.retry_many`."""
        return await asyncio.to_thread(
            lambda: self.sync.retry_many(reason=reason, dry_run=dry_run, **filters)
        )

    async def set_limit(
        self, key: str, *, concurrency: int | None = None, rate: str | None = None
    ) -> FleetLimit:
        return await asyncio.to_thread(
            lambda: self.sync.set_limit(key, concurrency=concurrency, rate=rate)
        )

    async def delete_limit(self, key: str) -> bool:
        return await asyncio.to_thread(self.sync.delete_limit, key)

    async def limits(self) -> list[FleetLimit]:
        return await asyncio.to_thread(self.sync.limits)

    async def pause_queue(
        self, *, bucket: int | None = None, name: str | None = None, reason: str
    ) -> QueuePause:
        return await asyncio.to_thread(
            lambda: self.sync.pause_queue(bucket=bucket, name=name, reason=reason)
        )

    async def resume_queue(self, *, bucket: int | None = None, name: str | None = None) -> bool:
        return await asyncio.to_thread(lambda: self.sync.resume_queue(bucket=bucket, name=name))

    async def queue_pauses(self) -> list[QueuePause]:
        return await asyncio.to_thread(self.sync.queue_pauses)


class AsyncEnqueueWithOptions:
    """The asyncio twin of :class:`EnqueueWithOptions`."""

    __slots__ = ("_sync",)

    def __init__(self, sync: EnqueueWithOptions) -> None:
        self._sync = sync

    @overload
    async def enqueue(
        self,
        task: Callable[Concatenate[TaskContext, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> AsyncTaskHandle[R]: ...

    @overload
    async def enqueue(
        self, task: Callable[Concatenate[TaskContext, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncTaskHandle[R]: ...

    @overload
    async def enqueue(self, task: str, /, *args: Any, **kwargs: Any) -> AsyncTaskHandle[Any]: ...

    async def enqueue(
        self, task: str | Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> AsyncTaskHandle[Any]:
        """As :meth:`EnqueueWithOptions.enqueue`, the store calls in a thread."""
        refuse_option_keywords("enqueue", kwargs, EnqueueOptions.__optional_keys__)
        name = self._sync._client._name_for(task)
        handle = await asyncio.to_thread(lambda: self._sync.enqueue(name, *args, **kwargs))
        return AsyncTaskHandle(handle)


JSONArgs = tuple[JSONValue, ...]
