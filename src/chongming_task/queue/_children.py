"""Child tasks: ``ctx.enqueue`` and ``ctx.wait_children`` of a task a worker claimed.

A child is enqueued exactly as :meth:`Client.enqueue` would (a stored recipe, claimable
by any worker that may claim it), with its parent's id stored on it under the reserved
metadata key ``"parent"`` (:data:`~chongming_task.stores._queue_records.PARENT_KEY`),
which the SQL stores copy into an indexed column: :func:`children_query` finds the
children of a task with one index walk. An operator's stop of the parent reaches them
(:func:`chongming_task.controller._control.control_task`).
"""

from __future__ import annotations

from typing import Any

from chongming_task.controller._registry import TaskRegistry
from chongming_task.controller._waiting import outcome_of
from chongming_task.policies import BucketPolicy
from chongming_task.queue._client import Client, TaskHandle
from chongming_task.run import TaskOutcome
from chongming_task.stores._base import TaskStore
from chongming_task.stores._queue_records import children_query

__all__ = ["QueueChildren"]


class QueueChildren:
    """The :class:`~chongming_task.runtime._context.ChildTasks` of one worker's tasks.

    Args:
        store: The worker's store (the children go to its queue).
        registry: The worker's definitions: a child's name and arguments are checked
            against them before anything is stored.
        bucket_policy: How a child's ``bucket_key`` maps to a bucket (the worker's).
    """

    def __init__(
        self, store: TaskStore, *, registry: TaskRegistry | None, bucket_policy: BucketPolicy
    ) -> None:
        self._store = store
        self._registry = registry
        self._bucket_policy = bucket_policy

    def enqueue(
        self, parent: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> TaskHandle:
        client = Client(
            self._store,
            tasks=self._registry,
            bucket_policy=self._bucket_policy,
            actor=f"task:{parent}",
        )
        client._parent = parent
        return client.enqueue(name, *args, **kwargs)

    def outcomes(self, parent: str) -> list[TaskOutcome] | None:
        children = self._store.query(children_query(parent))
        if any(not child.is_terminal for child in children):
            return None
        return [outcome_of(child) for child in children]
