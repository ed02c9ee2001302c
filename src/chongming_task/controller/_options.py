"""The controller's settings: ``ControllerOptions``, and the checks behind it.

``Controller(store, **settings)`` hands its :class:`ControllerSettings` to
:meth:`ControllerOptions.check` once; every part (admission, write-through, leases,
commands, submission) is built from the frozen result, so no part re-reads or
re-checks a raw argument. Each helper turns a user's argument into the exact type the
controller keeps, or raises a ``ConfigurationError`` that says what is wrong and what
to write instead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypedDict, Unpack

from chongming_task import _validation
from chongming_task.controller import _buckets as bucket_rules
from chongming_task.controller._admission import check_per_bucket
from chongming_task.core import Clock, SystemClock
from chongming_task.errors import ConfigurationError
from chongming_task.policies import BucketPolicy, ConcurrencyPolicy
from chongming_task.runtime.executors import Executor
from chongming_task.states import TaskStatus
from chongming_task.stores._records import Order, TaskQuery

__all__ = [
    "DEFAULT_COMMAND_POLL_INTERVAL",
    "DEFAULT_FLUSH_TIMEOUT",
    "DEFAULT_LEASE_TTL",
    "LEASE_TTL_MAX",
    "ControllerOptions",
    "ControllerSettings",
    "QueueTaskFilters",
    "TaskFilters",
    "check_executor",
    "check_tags",
    "concurrency_policy",
    "default_owner",
    "parse_statuses",
    "task_query",
]

DEFAULT_LEASE_TTL = 30.0
DEFAULT_COMMAND_POLL_INTERVAL = 0.2
#: How long ``close()`` keeps retrying pending writes by default.
DEFAULT_FLUSH_TIMEOUT = 10.0
#: The longest lease (and command poll interval) a controller takes: one year.
LEASE_TTL_MAX = 365 * 24 * 3600.0


class ControllerSettings(TypedDict, total=False):
    """The keyword settings of ``Controller(store, **settings)``, all optional.

    Checked once into :class:`ControllerOptions` (``ControllerOptions.check``).
    """

    max_parallel: int | None
    """Shorthand for ``concurrency=ConcurrencyPolicy(max_parallel=...)``."""
    concurrency: ConcurrencyPolicy | None
    """Global cap, named-resource limits per tag, default priority (guide §8.4)."""
    max_parallel_per_bucket: int | None
    """Executing tasks allowed per bucket; ``None`` (the default): no limit."""
    num_buckets: int | None
    """Shorthand for ``bucket_policy=BucketPolicy(num_buckets=...)``."""
    bucket_policy: BucketPolicy | None
    """How ``bucket_key`` maps to a bucket (64 buckets by default)."""
    owned_buckets: Iterable[int] | None
    """The buckets this node runs at construction (§8.14); ``None``: all of them."""
    owner: str | None
    """Identity written on tasks, leases and commands (default ``hostname:pid``)."""
    executor: Executor | None
    """Executor of every run; ``None``: a thread per run (an ``async def`` task: the
    process's shared event loop)."""
    clock: Clock | None
    """Time source (``SystemClock`` by default, ``FakeClock`` in tests)."""
    lease_ttl: float
    """Seconds a lease lasts (30): how soon another process may call us dead."""
    command_poll_interval: float
    """Longest wait between command polls (0.2 s)."""
    graceful_stop: float
    """Grace window of each run's stop (5 s, guide §4.1)."""
    pause_timeout: float
    """How long ``pause()`` waits for confirmation by default (5 s)."""
    artifact_dir: str | Path | None
    """Root of the runs' artifact directories; ``None``: none."""
    keep_finished: int | None
    """Finished runs held in memory; ``None`` (the default): all, until ``prune()`` (§8.6).

    Beyond it the earliest-finished are forgotten by this process, never by the store
    (which still answers ``get``, ``history`` and ``wait`` for them): a long-lived
    controller (a worker, a scheduler) sets it so its memory stays flat."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerOptions:
    """A controller's settings, checked once: what every part is built from.

    Each field holds the :class:`ControllerSettings` entry of the same name, which says
    what it means, in its checked form: ``max_parallel`` folded into ``concurrency``,
    ``num_buckets`` into ``bucket_policy``, ``owner`` and ``clock`` defaulted. Grouped
    by the parts that read them.
    """

    # admission and dispatch
    concurrency: ConcurrencyPolicy
    max_parallel_per_bucket: int | None
    executor: Executor | None
    keep_finished: int | None
    # buckets (§8.14)
    bucket_policy: BucketPolicy
    owned_buckets: frozenset[int] | None
    # identity, time, files
    owner: str
    clock: Clock
    artifact_dir: str | Path | None
    # leases, commands, runs
    lease_ttl: float
    command_poll_interval: float
    graceful_stop: float
    pause_timeout: float

    @classmethod
    def check(cls, **settings: Unpack[ControllerSettings]) -> ControllerOptions:
        """The options of ``Controller(store, **settings)``, each checked and normalised.

        A setting left out takes the default its ``ControllerSettings`` entry
        documents. ``max_parallel`` is
        shorthand for ``concurrency`` and ``num_buckets`` for ``bucket_policy``: given
        both, they must agree.

        Raises:
            ConfigurationError: Contradictory or out-of-range settings.
            TypeError: A keyword that is no setting (the message names the nearest one).
        """
        _validation.refuse_unknown_keywords(
            "Controller", settings, ControllerSettings.__optional_keys__
        )
        executor = settings.get("executor")
        owner = settings.get("owner")
        lease_ttl = settings.get("lease_ttl", DEFAULT_LEASE_TTL)
        command_poll_interval = settings.get("command_poll_interval", DEFAULT_COMMAND_POLL_INTERVAL)
        graceful_stop = settings.get("graceful_stop", 5.0)
        pause_timeout = settings.get("pause_timeout", 5.0)
        max_parallel, concurrency = settings.get("max_parallel"), settings.get("concurrency")
        num_buckets, bucket_policy = settings.get("num_buckets"), settings.get("bucket_policy")
        owned_buckets = settings.get("owned_buckets")
        keep_finished = settings.get("keep_finished")
        max_parallel_per_bucket = settings.get("max_parallel_per_bucket")
        clock, artifact_dir = settings.get("clock"), settings.get("artifact_dir")
        check_executor(executor)  # guide §7.2: no InlineExecutor
        resolved = concurrency_policy(max_parallel, concurrency)
        policy = bucket_rules.policy(num_buckets, bucket_policy)
        owned = bucket_rules.owned(policy, owned_buckets)
        if owner is not None and (not isinstance(owner, str) or not owner.strip()):
            raise ConfigurationError(f"owner must be a non-empty string, got {owner!r}")
        # Finite and bounded: a lease of nan or 1e12 seconds cannot be written (§8.13).
        seconds = _validation.check_seconds
        ttl = seconds(lease_ttl, "lease_ttl", maximum=LEASE_TTL_MAX)
        poll = seconds(command_poll_interval, "command_poll_interval", maximum=LEASE_TTL_MAX)
        grace = seconds(graceful_stop, "graceful_stop", allow_zero=True)
        pause = seconds(pause_timeout, "pause_timeout", allow_zero=True)
        keep = _check_keep_finished(keep_finished)
        per_bucket = check_per_bucket(max_parallel_per_bucket)
        return cls(
            concurrency=resolved,
            max_parallel_per_bucket=per_bucket,
            bucket_policy=policy,
            owned_buckets=owned,
            owner=owner or default_owner(),
            executor=executor,
            clock=clock or SystemClock(),
            lease_ttl=ttl,
            command_poll_interval=poll,
            graceful_stop=grace,
            pause_timeout=pause,
            artifact_dir=artifact_dir,
            keep_finished=keep,
        )


def _check_keep_finished(value: object) -> int | None:
    """``keep_finished``: an ``int >= 0`` (never a ``bool``), or ``None`` to hold every run."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            "keep_finished must be a number of finished runs to hold (an int >= 0) or "
            f"None to hold them all until prune(), got {value!r}"
        )
    return value


def default_owner() -> str:
    """``hostname:pid``: who pressed stop, readable after the fact (§8.9)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def concurrency_policy(
    max_parallel: int | None, policy: ConcurrencyPolicy | None
) -> ConcurrencyPolicy:
    """The policy from ``max_parallel`` or ``concurrency=``; both must agree if both given."""
    if policy is None:
        return (
            ConcurrencyPolicy()
            if max_parallel is None
            else ConcurrencyPolicy(max_parallel=max_parallel)
        )
    if not isinstance(policy, ConcurrencyPolicy):
        raise ConfigurationError(f"concurrency must be a ConcurrencyPolicy, got {policy!r}")
    if max_parallel is not None and max_parallel != policy.max_parallel:
        raise ConfigurationError(
            f"max_parallel={max_parallel} contradicts concurrency.max_parallel="
            f"{policy.max_parallel}; give it in one place"
        )
    return policy


def check_executor(executor: object) -> None:
    """Refuse an executor a controller cannot dispatch on: the ``InlineExecutor`` (§7.2).

    The InlineExecutor breaks the "``launch`` never blocks" rule on purpose: the body
    runs inside ``start()``, so a controller's pump, submission, ``release`` or command
    thread would be the task's carrier and block for the task's whole life (and a
    stop or pause could only ever reach it once it is over). Guide §7.2: an
    asynchronous scheduler must not use it.

    Raises:
        ConfigurationError: ``executor`` is an ``InlineExecutor`` (or a subclass).
    """
    from chongming_task.runtime.executors.inline import InlineExecutor

    if isinstance(executor, InlineExecutor):
        raise ConfigurationError(
            "Controller(executor=InlineExecutor()) is refused: the InlineExecutor runs the "
            "body inside launch() and blocks until it ends, and a Controller dispatches "
            "asynchronously, so it would stall every other task. Leave "
            "executor= out for the ThreadExecutor (the default), or pass ProcessExecutor() "
            "for hard stops; to run one task synchronously (micro-steps, deterministic "
            "tests), use run_task(fn, executor=InlineExecutor()) or TaskRun without a "
            "Controller"
        )


def check_tags(tags: Iterable[str] | None) -> frozenset[str]:
    """Submission tags as ``frozenset[str]`` (a bare string is refused: it iterates chars)."""
    if tags is None:
        return frozenset()
    return _validation.check_tags(tags)


def parse_statuses(
    status: TaskStatus | str | Iterable[TaskStatus | str] | None,
) -> frozenset[TaskStatus] | None:
    """``list_tasks(status=...)``: one status or several, as enum members or their names."""
    if status is None:
        return None
    if not isinstance(status, str | Iterable):
        raise ConfigurationError(
            f"status must be a TaskStatus, its name, or a collection of them, got {status!r}"
        )
    items = [status] if isinstance(status, str) else list(status)
    try:
        return frozenset(TaskStatus(item) for item in items)
    except (ValueError, TypeError) as exc:
        known = ", ".join(s.value for s in TaskStatus)
        raise ConfigurationError(f"unknown status in {status!r}; known: {known}") from exc


class QueueTaskFilters(TypedDict, total=False):
    """The filters of ``Client.list_tasks`` (and of ``Controller.list_tasks``): all optional.

    ``created_after``/``created_before`` (and the ``updated_*`` pair) bound a time
    window: timezone-aware instants, the first inclusive, the second exclusive.
    """

    status: TaskStatus | str | Iterable[TaskStatus | str] | None
    name_prefix: str | None
    tag: str | None
    bucket: int | None
    owner: str | None
    created_after: datetime | None
    created_before: datetime | None
    updated_after: datetime | None
    updated_before: datetime | None
    limit: int | None
    order: Order


class TaskFilters(QueueTaskFilters, total=False):
    """The filters of ``Controller.list_tasks``: the client's, and two more."""

    buckets: Iterable[int] | None
    metadata_eq: Mapping[str, str] | None


def task_query(
    accepted: frozenset[str] = TaskFilters.__optional_keys__, /, **filters: Unpack[TaskFilters]
) -> TaskQuery:
    """The store query of ``list_tasks(**filters)`` (the controller's and the client's).

    Raises:
        TypeError: A filter outside ``accepted`` (the names of the caller's filters).
    """
    _validation.refuse_unknown_keywords("list_tasks", filters, accepted)
    buckets = filters.get("buckets")
    return TaskQuery(
        statuses=parse_statuses(filters.get("status")),
        name_prefix=filters.get("name_prefix"),
        tag=filters.get("tag"),
        bucket=filters.get("bucket"),
        buckets=None if buckets is None else _validation.check_buckets(buckets),
        owner=filters.get("owner"),
        metadata_eq=filters.get("metadata_eq"),
        created_after=filters.get("created_after"),
        created_before=filters.get("created_before"),
        updated_after=filters.get("updated_after"),
        updated_before=filters.get("updated_before"),
        limit=filters.get("limit"),
        order=filters.get("order", "created"),
    )
