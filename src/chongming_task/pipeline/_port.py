"""What the pipeline needs from a controller, and the adapter onto the real one.

The orchestrator talks to this small port instead of to ``Controller`` directly: it
keeps the pipeline's demands on the controller explicit (submit a node ``blocked``,
release it with its upstream data, skip, cancel, stop, subscribe), and lets the tests
drive the orchestrator through a scripted port where every interleaving is chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from chongming_task._model import JSONValue, TaskSnapshot, Transition

__all__ = ["ControllerPort", "NodeHandle", "NodeSubmission", "Subscriber"]

Subscriber = Callable[[Transition, TaskSnapshot], None]


@dataclass(frozen=True, slots=True)
class NodeSubmission:
    """One node's task, as the pipeline asks the controller to create it."""

    task_name: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    task_id: str
    metadata: Mapping[str, JSONValue]
    blocked: bool
    """Created ``blocked`` (it has upstream nodes), else ``queued`` at once."""


class NodeHandle(Protocol):
    """The part of a ``TaskRun`` the pipeline reads."""

    @property
    def snapshot(self) -> TaskSnapshot: ...


class ControllerPort(Protocol):
    """The controller operations a pipeline run is built from."""

    def is_registered(self, name: str) -> bool:
        """Whether ``name`` is in the controller's whitelist."""
        ...

    def preflight(self, task_name: str, options: Mapping[str, Any]) -> None:
        """Raise ``ConfigurationError`` now for a submission ``submit`` would refuse.

        ``options`` are the node's keyword arguments. Only what can be checked without
        creating anything; whatever slips through is refused by ``submit`` itself.
        """
        ...

    def exists(self, task_id: str) -> bool:
        """Whether a task with this id is already known (in memory or in the store)."""
        ...

    def submit(self, node: NodeSubmission) -> NodeHandle:
        """Create the node's task: ``pending -> blocked`` or ``pending -> queued``."""
        ...

    def release(self, task_id: str, upstream: Mapping[str, JSONValue]) -> None:
        """``blocked -> queued`` with ``ctx.upstream`` set to ``upstream``."""
        ...

    def skip(self, task_id: str, reason: str) -> None:
        """End a node that must not run as ``skipped`` (failure kind dependency_failed)."""
        ...

    def cancel(self, task_id: str, reason: str) -> None:
        """End a released node as ``cancelled`` (fail_fast), stopping a running body."""
        ...

    def stop(self, task_id: str, reason: str) -> None:
        """A person's stop: ``stopped`` (through ``stopping`` if it holds a slot)."""
        ...

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Deliver every accepted transition, in order per task; returns unsubscribe."""
        ...
