"""DAG pipelines (guide §8.12): registered tasks joined by dependencies.

Build a :class:`Pipeline` with :meth:`Pipeline.node`, submit it with
``controller.submit_pipeline(pipeline)`` (or :func:`submit_pipeline`), and wait on the
returned :class:`PipelineRun` for a :class:`PipelineOutcome`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chongming_task.pipeline._checks import topological_order
from chongming_task.pipeline._graph import Node, Pipeline
from chongming_task.pipeline._outcome import NodeFailure, NodeOutcome, PipelineOutcome
from chongming_task.pipeline._run import PipelineRun
from chongming_task.pipeline._submit import checked_run_id, node_task_id, submit_to_port

if TYPE_CHECKING:
    from chongming_task.controller import Controller

__all__ = [
    "Node",
    "NodeFailure",
    "NodeOutcome",
    "Pipeline",
    "PipelineOutcome",
    "PipelineRun",
    "checked_run_id",
    "node_task_id",
    "submit_pipeline",
    "topological_order",
]


def submit_pipeline(
    controller: Controller, pipeline: Pipeline, *, run_id: str | None = None
) -> PipelineRun:
    """Validate ``pipeline`` and run it on ``controller``; see ``Controller.submit_pipeline``."""
    from chongming_task.pipeline._adapter import ControllerAdapter

    return submit_to_port(ControllerAdapter(controller), pipeline, run_id=run_id)
