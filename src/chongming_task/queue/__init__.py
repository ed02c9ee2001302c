"""The work queue: enqueue from any process, claimed by any worker owning the bucket.

See ``docs/queue.md`` and ARCHITECTURE §6. :class:`Client` (and its asyncio twin
:class:`AsyncClient`) store a task ``queued`` with its recipe (registered name + JSON
arguments); a worker (``chongming-task worker``) claims it and runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task._lazy import lazy_exports
from chongming_task.controller._control import control_task
from chongming_task.controller._retry import RetryReport
from chongming_task.queue._client import (
    AsyncClient,
    AsyncTaskHandle,
    Client,
    EnqueueOptions,
    EnqueueWithOptions,
    TaskHandle,
)
from chongming_task.queue._pipelines import AsyncPipelineHandle, PipelineHandle
from chongming_task.stores._limits import GlobalSlot
from chongming_task.stores._queue_records import RECIPE_KEY, Recipe, WorkerRecord, recipe_of

if TYPE_CHECKING:  # resolved on first access: only a worker stores a body's children
    from chongming_task.queue._children import QueueChildren

_LAZY: dict[str, str] = {"QueueChildren": "chongming_task.queue._children"}

__getattr__, __dir__ = lazy_exports("chongming_task.queue", globals(), _LAZY)

__all__ = [
    "RECIPE_KEY",
    "AsyncClient",
    "AsyncPipelineHandle",
    "AsyncTaskHandle",
    "Client",
    "EnqueueOptions",
    "EnqueueWithOptions",
    "GlobalSlot",
    "PipelineHandle",
    "QueueChildren",
    "Recipe",
    "RetryReport",
    "TaskHandle",
    "WorkerRecord",
    "control_task",
    "recipe_of",
]
