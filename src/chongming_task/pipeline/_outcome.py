"""What a settled pipeline run reports: the overall status, each node, the first failure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chongming_task._model import Failure, JSONValue, TaskSnapshot
from chongming_task._public import public
from chongming_task.states import TaskStatus

__all__ = ["NodeFailure", "NodeOutcome", "PipelineOutcome"]


@public
@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """One node at the end of the run: its task's final snapshot and what it means."""

    node_id: str
    snapshot: TaskSnapshot

    @property
    def task_id(self) -> str:
        return self.snapshot.task_id

    @property
    def status(self) -> TaskStatus:
        return self.snapshot.status

    @property
    def ok(self) -> bool:
        """True only for ``succeeded``."""
        return self.snapshot.status is TaskStatus.SUCCEEDED

    @property
    def value(self) -> JSONValue:
        """The JSON return value of a succeeded node, else ``None``."""
        return self.snapshot.outcome

    @property
    def failure(self) -> Failure | None:
        """Why the node did not succeed (its kind and message name the cause)."""
        return self.snapshot.failure

    def __repr__(self) -> str:
        # Short on purpose: ``print(outcome.nodes)`` should read like a status board.
        detail = f": {self.failure.kind.value}" if self.failure is not None else ""
        return f"<{self.node_id} {self.status.value}{detail}>"


@dataclass(frozen=True, slots=True)
class NodeFailure:
    """The failure that decided a ``failed`` pipeline: which node, and why."""

    node_id: str
    task_id: str
    status: TaskStatus
    """``failed`` or ``lost``."""
    failure: Failure | None

    @property
    def message(self) -> str:
        return self.failure.message if self.failure is not None else self.status.value

    def __str__(self) -> str:
        return f"node {self.node_id!r} {self.status.value}: {self.message}"


@public
@dataclass(frozen=True, slots=True)
class PipelineOutcome:
    """The result of :meth:`PipelineRun.wait`.

    ``status`` is ``succeeded``, ``failed`` (a node failed or was lost; see
    ``first_failure``), ``stopped`` (the run or a node was stopped by a person) or
    ``cancelled`` (a node was cancelled from outside the pipeline).
    """

    pipeline: str
    run_id: str
    status: TaskStatus
    nodes: Mapping[str, NodeOutcome]
    """Node id -> outcome, in declaration order."""
    first_failure: NodeFailure | None = None
    stop_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is TaskStatus.SUCCEEDED

    def statuses(self) -> dict[str, TaskStatus]:
        """Node id -> final status: the compact view tests and logs usually want."""
        return {node_id: node.status for node_id, node in self.nodes.items()}

    def values(self) -> dict[str, Any]:
        """Node id -> return value, for the nodes that succeeded."""
        return {node_id: node.value for node_id, node in self.nodes.items() if node.ok}

    def __str__(self) -> str:
        text = f"pipeline {self.pipeline!r} ({self.run_id}) {self.status.value}"
        if self.first_failure is not None:
            text = f"{text}; first failure: {self.first_failure}"
        return text
