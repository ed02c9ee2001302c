"""Submitting a pipeline: validate everything first, then create the node tasks.

Order matters twice. Validation (graph, registry, free task ids) runs before the
first task exists, so a refused pipeline leaves no trace in the store. Then the
nodes that wait for upstream are created ``blocked`` before any root is queued, so
that no root can finish before its downstream nodes exist.
"""

from __future__ import annotations

import uuid

from chongming_task._model import JSONValue, ensure_json
from chongming_task.errors import ConfigurationError
from chongming_task.pipeline._graph import Pipeline
from chongming_task.pipeline._orchestrator import Orchestrator
from chongming_task.pipeline._port import ControllerPort, NodeSubmission
from chongming_task.pipeline._run import PipelineRun

__all__ = ["METADATA_KEYS", "submit_to_port"]

#: Metadata keys the pipeline writes on every node task.
METADATA_KEYS = ("pipeline", "pipeline_run", "node")


def new_run_id(pipeline: Pipeline) -> str:
    """``<pipeline name>-<8 hex digits>``: unique per submission, readable in ``ps``."""
    return f"{pipeline.name}-{uuid.uuid4().hex[:8]}"


def node_task_id(run_id: str, node_id: str) -> str:
    return f"{run_id}/{node_id}"


def checked_run_id(pipeline: Pipeline, run_id: str | None) -> str:
    if run_id is None:
        return new_run_id(pipeline)
    if not isinstance(run_id, str) or not run_id.strip():
        raise ConfigurationError(f"run_id must be a non-empty string, got {run_id!r}")
    return run_id


def _node_metadata(
    port: ControllerPort, pipeline: Pipeline, run_id: str
) -> dict[str, dict[str, JSONValue]]:
    """Each node's metadata (the user's plus the pipeline keys), after the preflight."""
    metadata: dict[str, dict[str, JSONValue]] = {}
    for node_id, node in pipeline.nodes.items():
        own = node.kwargs.get("metadata") or {}
        metadata[node_id] = {
            **own,
            "pipeline": pipeline.name,
            "pipeline_run": run_id,
            "node": node_id,
        }
        ensure_json(metadata[node_id], f"metadata of node {node_id!r}")
        port.preflight(node.task_name, node.kwargs)
    return metadata


def submit_to_port(
    port: ControllerPort, pipeline: Pipeline, *, run_id: str | None = None
) -> PipelineRun:
    """Validate ``pipeline``, create its node tasks through ``port`` and start the run.

    Raises:
        ConfigurationError: the graph, a task name, a node option or the run id is
            invalid (nothing was created).
        CircularDependency: the graph has a cycle (nothing was created).
    """
    order = pipeline.validate(port.is_registered)
    run_id = checked_run_id(pipeline, run_id)
    metadata = _node_metadata(port, pipeline, run_id)
    task_ids = {node_id: node_task_id(run_id, node_id) for node_id in order}
    taken = [task_id for task_id in task_ids.values() if port.exists(task_id)]
    if taken:
        raise ConfigurationError(
            f"pipeline run id {run_id!r} is already used (tasks {taken} exist); "
            "pass another run_id or let submit_pipeline() make one"
        )

    nodes = dict(pipeline.nodes)
    orchestrator = Orchestrator(
        port,
        pipeline_name=pipeline.name,
        run_id=run_id,
        fail_fast=pipeline.aggregation.is_fail_fast,
        nodes=nodes,
        task_ids=task_ids,
    )
    unsubscribe = port.subscribe(orchestrator.on_transition)
    roots = [node_id for node_id in order if not nodes[node_id].depends_on]
    waiting = [node_id for node_id in order if nodes[node_id].depends_on]
    created: list[str] = []
    try:
        for node_id in [*waiting, *roots]:
            node = nodes[node_id]
            kwargs = {key: value for key, value in node.kwargs.items() if key != "metadata"}
            handle = port.submit(
                NodeSubmission(
                    node.task_name,
                    node.args,
                    kwargs,
                    task_id=task_ids[node_id],
                    metadata=metadata[node_id],
                    blocked=bool(node.depends_on),
                )
            )
            created.append(node_id)
            orchestrator.attach(node_id, handle)
    except BaseException as exc:
        # The controller refused a node (a bad argument the registry check cannot
        # see). Nothing has run: roots are submitted last, so every created node is
        # still blocked. Cancel them so the store shows a truthful end, not a hang.
        for node_id in created:
            try:
                port.cancel(task_ids[node_id], f"pipeline submission failed: {exc}")
            except Exception:  # noqa: S112 - best effort; the original error matters
                continue
        unsubscribe()
        raise
    orchestrator.start(unsubscribe, roots)
    return PipelineRun(orchestrator)
