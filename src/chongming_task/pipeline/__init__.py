"""DAG pipelines (guide §8.12): placeholder until the orchestrator lands."""

from chongming_task.pipeline.graph import Node, Pipeline

__all__ = ["Node", "Pipeline"]
