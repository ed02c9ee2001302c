"""``Controller``: the management entry of guide §8 -- a façade composed of its parts.

It holds the whitelist of task definitions, the runs it supervises and their slots;
the CLI, the scheduler, pipelines and any dashboard stand on it. Each concern is an
object built once from the checked :class:`ControllerOptions` and held in
:class:`~chongming_task.controller._parts.Parts` (which also owns the paths between
them: the one write path, the lease set, the shutdown); every method here delegates:

==================  ====================================================
``registry``        names -> definitions; ``submit`` only takes names (§8.5)
``dispatch``        held runs, admission (limits, priority + FIFO, §8.4, §8.8), the pump
``writes``          every transition -> the store, failures kept (§8.9)
``events``          transition fan-out to subscribers
``leases``          one thread: lease renewal, progress/heartbeat ``touch``
``poller``          one thread: control of tasks held by other processes
``submission``      ``submit``/``submit_many``/claimed tasks -> held, stored, started
``plumbing``        ``Controller._internal``: what the library's own layers call
``reconcile``       restart recovery by lease (§8.11), a function over the store
==================  ===================================================="""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Unpack, overload

from chongming_task._decorator import refuse_option_keywords
from chongming_task._model import JSONValue, TaskSnapshot, Transition
from chongming_task._public import public
from chongming_task._validation import (
    check_count,
    check_int,
    check_lookup,
    check_timeout,
    refuse_unknown_keywords,
)
from chongming_task.controller import _buckets as bucket_rules
from chongming_task.controller._commands import CommandListener
from chongming_task.controller._events import Subscriber
from chongming_task.controller._internal import ControllerInternals
from chongming_task.controller._options import (
    DEFAULT_FLUSH_TIMEOUT,
    ControllerOptions,
    ControllerSettings,
    TaskFilters,
    task_query,
)
from chongming_task.controller._parts import Parts
from chongming_task.controller._reconcile import ReconcileReport
from chongming_task.controller._registry import SUBMIT_OPTIONS, SubmitOptions, TaskDefinition
from chongming_task.controller._stats import ControllerStats
from chongming_task.controller._submission import BatchOptions
from chongming_task.controller._waiting import wait_for_runs
from chongming_task.controller._writethrough import PendingWrite, PersistFailure
from chongming_task.core import Clock
from chongming_task.policies import BucketPolicy, RetryPolicy, Timeout
from chongming_task.run import TaskOutcome, TaskRun
from chongming_task.runtime import TaskContext
from chongming_task.stores._base import TaskStore

if TYPE_CHECKING:
    from chongming_task._explain import Explanation
    from chongming_task.pipeline import Pipeline, PipelineRun

__all__ = ["Controller", "SubmitWithOptions"]

P = ParamSpec("P")
R = TypeVar("R")


@public
class Controller:
    """Registers task definitions, runs submissions within limits, and controls them.

    ``store`` is where every transition is written and every query is read (``None``:
    a private ``InMemoryTaskStore``). The keyword settings are
    :class:`~chongming_task.controller._options.ControllerSettings`, whose entries say
    what each one means and defaults to; they are checked once into a
    :class:`~chongming_task.controller._options.ControllerOptions`.

    Raises:
        ConfigurationError: Contradictory or out-of-range settings.
        TypeError: A keyword that is no setting (the message names the nearest one).
    """

    def __init__(
        self, store: TaskStore | None = None, **settings: Unpack[ControllerSettings]
    ) -> None:
        options = ControllerOptions.check(**settings)
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
        parts = self._parts = Parts(
            options,
            store,
            bucket_for=lambda key: bucket_rules.bucket_for_submit(
                self.bucket_policy, self.owned_buckets, key
            ),
        )
        self.store: TaskStore = parts.store
        self.registry = parts.registry
        self._dispatch, self._writes = parts.dispatch, parts.writes

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

    @overload
    def submit(
        self,
        task: Callable[Concatenate[TaskContext, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> TaskRun[R]: ...

    @overload
    def submit(
        self, task: Callable[Concatenate[TaskContext, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> TaskRun[R]: ...

    @overload
    def submit(
        self,
        task: str,
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
    ) -> TaskRun[Any]: ...

    # The typed signatures take no options (a type checker cannot tell them from the
    # task's own keywords: docs/queue.md "Typed enqueue"); at run time they still may.
    def submit(  # type: ignore[misc]
        self,
        task: str | Callable[..., Any],
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
    ) -> TaskRun[Any]:
        """Submit registered task ``task`` (other arguments go to the task); its ``TaskRun``.

        ``task`` is the registered name or the registered ``@task`` function itself
        (typed: a type checker checks the arguments and ``run.wait().value``; options
        then go through :meth:`with_options`). Stored, then queued; ``blocked`` waits
        for upstream without a slot (a string is the reason), ``skip_reason`` ends it
        ``skipped`` at once (docs/controller.md).

        Raises:
            ConfigurationError: Unregistered name, a function that is not the ``@task``
                function registered under its name, duplicate ``task_id``, bad tags or
                metadata, a bucket this node does not own, or a closed controller.
        """
        return self._parts.submission.submit(
            self.registry.name_for(task),
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

    def with_options(self, **options: Unpack[SubmitOptions]) -> SubmitWithOptions:
        """:meth:`submit` with these options, given apart from the task's arguments.

        ``controller.with_options(tags=["db"]).submit(sync, "tenant-A")``: a type
        checker checks every argument after ``sync`` against its parameters.

        Raises:
            TypeError: A keyword that is no option (naming the nearest).
        """
        refuse_unknown_keywords("with_options", options, SUBMIT_OPTIONS)
        return SubmitWithOptions(self, options)

    def submit_many(
        self,
        name: str | Callable[..., Any],
        calls: Iterable[tuple[Any, ...] | Mapping[str, Any]],
        /,
        **options: Unpack[BatchOptions],
    ) -> list[TaskRun[Any]]:
        """Submit ``name`` (or its ``@task`` function) once per item of ``calls`` (a tuple
        of args or a mapping of kwargs).

        All or nothing, in one write; :class:`BatchOptions` are :meth:`submit`'s options
        plus ``task_ids``/``bucket_keys`` (one per item). The runs, in order, ``queued``.

        Raises:
            ConfigurationError: As :meth:`submit`, naming the item at fault; nothing
                of the batch is stored or held then.
        """
        return self._parts.submission.submit_many(self.registry.name_for(name), calls, **options)

    def stop(self, task_id: str, *, reason: str | None = None) -> bool:
        """Request a stop; ``True`` if found here or in the store (another's: "accepted")."""
        return self._parts.control(check_lookup(task_id), "stop", reason, None)

    def pause(self, task_id: str, *, timeout: float | None = None) -> bool:
        """Pause and wait for confirmation; ``True`` only when confirmed (never remotely)."""
        return self._parts.control(check_lookup(task_id), "pause", None, check_timeout(timeout))

    def resume(self, task_id: str) -> bool:
        """Undo a pause; for another process's task, ``True`` means "accepted"."""
        return self._parts.control(check_lookup(task_id), "resume", None, None)

    def stop_all(self, *, reason: str | None = None) -> int:
        """Request a stop of every run this controller holds; returns requests issued."""
        return self._parts.stop_all(reason)

    def wait(self, task_id: str, timeout: float | None = None) -> TaskOutcome:
        """Wait for a task to settle and return its outcome.

        Raises:
            TimeoutError: ``timeout`` passed first (the task is not affected).
            ConfigurationError: No such task, here or in the store.
        """
        return self._parts.wait(check_lookup(task_id), timeout)

    def wait_all(self, timeout: float | None = None) -> list[TaskOutcome]:
        """Wait until every held run has settled; outcomes in submission order.

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
        """Stop everything held (queued runs never start), wait, release the threads.

        Idempotent; returns how many stop requests were issued.

        Args:
            reason: Recorded on every stop transition.
            timeout: Longest wait for the runs to settle (``None``: their grace windows).
            close_store: Also close the store (always done for a private store).
            flush_timeout: Longest time to keep retrying :attr:`pending_writes`; what is
                still unwritten is logged (never raised) and left to ``reconcile()``.
        """
        return self._parts.close(
            reason=reason, timeout=timeout, close_store=close_store, flush_timeout=flush_timeout
        )

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The snapshot of ``task_id`` (a pending write's, else the store's), or ``None``."""
        return self._parts.get(check_lookup(task_id))

    def list_tasks(self, **filters: Unpack[TaskFilters]) -> list[TaskSnapshot]:
        """Tasks in the store matching every given filter (all optional: :class:`TaskFilters`)."""
        return self.store.query(task_query(**filters))

    def history(self, task_id: str) -> list[Transition]:
        """The stored transitions of ``task_id``, oldest first."""
        return self.store.history(check_lookup(task_id))

    def explain(self, task_id: str) -> Explanation:
        """Why ``task_id`` is where it is, most decisive reason first (held: ``"controller"``).

        Raises:
            UnknownTask: No task ``task_id`` is in the store or held here.
        """
        return self._parts.explain(check_lookup(task_id))

    def stats(self) -> ControllerStats:
        """Counts per status in the store, with ``unfinished``."""
        return ControllerStats.from_counts(self.store.count_by_status())

    def bucket_counts(self) -> dict[int, int]:
        """Tasks per bucket in the store: the input for assigning buckets to nodes."""
        return self.store.count_by_bucket()

    def prune(self, *, keep_terminal: int) -> int:
        """Drop the oldest terminal tasks beyond ``keep_terminal`` (store and memory)."""
        return self._parts.prune(check_count(keep_terminal, "keep_terminal"))

    def runs(self) -> list[TaskRun]:
        """Every ``TaskRun`` this controller holds (finished ones until pruned or forgotten)."""
        return self._dispatch.runs()

    def run(self, task_id: str) -> TaskRun | None:
        """The held run of ``task_id``, if this controller holds it."""
        return self._dispatch.get(check_lookup(task_id))

    @property
    def active_count(self) -> int:
        """Runs holding an execution slot (paused-in-place ones included)."""
        return self._dispatch.active_count

    @property
    def queued_count(self) -> int:
        """Runs waiting for a slot (not blocked ones: they wait for upstream)."""
        return self._dispatch.queued_count

    def active_in_bucket(self, bucket: int) -> int:
        return self._dispatch.active_in_bucket(check_int(bucket, "bucket"))

    @property
    def owns_all_buckets(self) -> bool:
        """True when this node is no partition: no ``owned_buckets``, or all of them."""
        return bucket_rules.owns_all(self.bucket_policy, self.owned_buckets)

    def owns_bucket(self, bucket: int) -> bool:
        check_int(bucket, "bucket")
        return self.owned_buckets is None or bucket in self.owned_buckets

    @property
    def persist_failures(self) -> deque[PersistFailure]:
        """The last 20 failed store operations, oldest first (they never fail a task)."""
        return self._writes.failures()

    @property
    def pending_writes(self) -> list[PendingWrite]:
        """Writes the store has not taken yet, retried in the background until it does."""
        return self._writes.pending()

    @property
    def persist_failure_count(self) -> int:
        """Every failed store operation since this controller started."""
        return self._writes.failure_count

    @property
    def closed(self) -> bool:
        return self._parts.closed

    def submit_pipeline(self, pipeline: Pipeline, *, run_id: str | None = None) -> PipelineRun:
        """Validate ``pipeline`` (before any node exists) and run its nodes here."""
        from chongming_task.pipeline import submit_pipeline

        return submit_pipeline(self, pipeline, run_id=run_id)

    def subscribe(self, fn: Subscriber, *, inline: bool = False) -> Callable[[], None]:
        """Receive ``fn(transition, snapshot_after)`` for every accepted transition, in order
        per task, on the event thread (``inline``: the transition's). Returns unsubscribe."""
        return self._parts.events.subscribe(fn, inline=inline)

    def subscribe_commands(self, fn: CommandListener) -> Callable[[], None]:
        """Receive ``fn(command, applied_at)`` for every command applied here; unsubscribes."""
        return self._parts.poller.subscribe(fn)

    @property
    def subscriber_errors(self) -> int:
        return self._parts.events.errors

    def reconcile(self, *, dry_run: bool = False) -> ReconcileReport:
        """Mark tasks whose supervisor died ``lost`` (guide §8.11); only this node's buckets."""
        buckets = None if self.owns_all_buckets else self.owned_buckets
        return self._parts.reconcile(buckets, dry_run=dry_run)

    @property
    def _internal(self) -> ControllerInternals:
        """The plumbing the library's own layers use (``controller/_internal.py``)."""
        return self._parts.plumbing

    def __repr__(self) -> str:
        return (
            f"Controller(owner={self.owner!r}, max_parallel={self.concurrency.max_parallel}, "
            f"active={self.active_count}, queued={self.queued_count})"
        )


class SubmitWithOptions:
    """:meth:`Controller.submit` with options given apart: ``controller.with_options(...)``.

    Every keyword of :meth:`submit` goes to the task; one named like an option is
    refused (pass that parameter positionally, the rule of the plain call).
    """

    __slots__ = ("_controller", "_options")

    def __init__(self, controller: Controller, options: SubmitOptions) -> None:
        self._controller = controller
        self._options = options

    @overload
    def submit(
        self,
        task: Callable[Concatenate[TaskContext, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> TaskRun[R]: ...

    @overload
    def submit(
        self, task: Callable[Concatenate[TaskContext, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> TaskRun[R]: ...

    @overload
    def submit(self, task: str, /, *args: Any, **kwargs: Any) -> TaskRun[Any]: ...

    def submit(self, task: str | Callable[..., Any], /, *args: Any, **kwargs: Any) -> TaskRun[Any]:
        """As :meth:`Controller.submit` with the options given to ``with_options``."""
        refuse_option_keywords("submit", kwargs, SUBMIT_OPTIONS)
        name = self._controller.registry.name_for(task)
        return self._controller.submit(name, *args, **self._options, **kwargs)

    def __repr__(self) -> str:
        return f"SubmitWithOptions({self._controller!r}, {self._options!r})"
