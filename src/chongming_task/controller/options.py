"""Validation of the controller's options: concurrency, tags, statuses, the owner name.

Each helper turns a user's argument into the exact type the controller keeps, or
raises a ``ConfigurationError`` that says what is wrong and what to write instead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from typing import Literal

from chongming_task import _validation
from chongming_task.errors import ConfigurationError
from chongming_task.policies import ConcurrencyPolicy
from chongming_task.states import TaskStatus
from chongming_task.stores.records import TaskQuery

__all__ = ["check_executor", "check_tags", "concurrency_policy", "default_owner", "parse_statuses"]


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


def task_query(
    *,
    status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
    name_prefix: str | None = None,
    tag: str | None = None,
    bucket: int | None = None,
    buckets: Iterable[int] | None = None,
    owner: str | None = None,
    metadata_eq: Mapping[str, str] | None = None,
    limit: int | None = None,
    order: Literal["created", "-created", "updated", "-updated", "priority"] = "created",
) -> TaskQuery:
    """The store query of ``list_tasks`` (the controller's and the client's alike)."""
    return TaskQuery(
        statuses=parse_statuses(status),
        name_prefix=name_prefix,
        tag=tag,
        bucket=bucket,
        buckets=None if buckets is None else frozenset(buckets),
        owner=owner,
        metadata_eq=metadata_eq,
        limit=limit,
        order=order,
    )
