"""The :class:`~chongming_task.pipeline._port.ControllerPort` on a real ``Controller``.

Everything goes through the controller's public surface -- ``submit(..., blocked=,
metadata=)``, ``subscribe(inline=True)``, ``stop`` -- its plumbing's ``cancel``
(``Controller._internal``), and the ``TaskRun`` handles it returns (``release(upstream=)``
and ``skip(failure=)`` carry the two details the plumbing's shortcuts do not: the
upstream values and the ``dependency_failed`` kind).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chongming_task._joins import skip_failure
from chongming_task._model import JSONValue
from chongming_task.errors import ControllerClosed, InvalidState
from chongming_task.pipeline._port import NodeSubmission, Subscriber

if TYPE_CHECKING:
    from chongming_task.controller import Controller
    from chongming_task.run import TaskRun

__all__ = ["ControllerAdapter"]


class ControllerAdapter:
    """Pipeline operations on one controller (which holds every node task it submits)."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    def is_registered(self, name: str) -> bool:
        return name in self._controller.registry

    def preflight(self, task_name: str, options: Mapping[str, Any]) -> None:
        controller = self._controller
        if controller.closed:
            raise ControllerClosed("this controller is closed; create a new Controller")
        # The controller's own bucket rule: a key this node does not own is refused now,
        # not after half of the pipeline's tasks exist.
        controller.bucket_policy.bucket_for_submit(
            options.get("bucket_key"), controller.owned_buckets
        )

    def exists(self, task_id: str) -> bool:
        controller = self._controller
        return controller.run(task_id) is not None or controller.get(task_id) is not None

    def submit(self, node: NodeSubmission) -> TaskRun:
        return self._controller.submit(
            node.task_name,
            *node.args,
            task_id=node.task_id,
            metadata=node.metadata,
            blocked=node.blocked,
            **node.kwargs,
        )

    def release(self, task_id: str, upstream: Mapping[str, JSONValue]) -> None:
        run = self._run(task_id)
        if self._controller.closed:
            # A closed controller admits nothing: a released node would sit in
            # ``queued`` forever. Stop it instead, as close() does with queued runs.
            run.stop("controller closed before this node was released")
            return
        run.release(upstream=upstream, reason="upstream satisfied")

    def skip(self, task_id: str, reason: str) -> None:
        self._run(task_id).skip(reason=reason, failure=skip_failure(reason))

    def cancel(self, task_id: str, reason: str) -> None:
        self._controller._internal.cancel(task_id, reason=reason)

    def stop(self, task_id: str, reason: str) -> None:
        self._controller.stop(task_id, reason=reason)

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        # Inline: decide in the settling thread, before the freed slot is reassigned.
        return self._controller.subscribe(fn, inline=True)

    def _run(self, task_id: str) -> TaskRun:
        run = self._controller.run(task_id)
        if run is None:
            raise InvalidState(f"node task {task_id!r} is not held by this controller")
        return run
