"""Checks behind the pipeline builder: option values, node options, acyclicity.

Pure functions, so each rule is testable on its own and the builder reads as a
sequence of checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from chongming_task.errors import CircularDependency, ConfigurationError
from chongming_task.policies import AggregationPolicy, JoinMode

__all__ = ["check_node_options", "coerce_aggregation", "coerce_join", "topological_order"]


def coerce_aggregation(value: object) -> AggregationPolicy:
    if isinstance(value, AggregationPolicy):
        return value
    if isinstance(value, str):
        if value == "quorum":
            AggregationPolicy.quorum()  # raises ConfigurationError with the reason
        return AggregationPolicy(value)  # type: ignore[arg-type]  # validated by the policy
    raise ConfigurationError(
        "aggregation must be AggregationPolicy.fail_fast() or AggregationPolicy.all_settled(), "
        f"got {value!r}"
    )


#: ``controller.submit`` options that the pipeline sets itself, with the reason.
_PIPELINE_OWNED = {
    "task_id": "node task ids are '<run_id>/<node_id>'; choose the node_id instead",
    "blocked": "the pipeline blocks a node until its join mode releases it",
}


def check_node_options(task_name: str, kwargs: Mapping[str, Any]) -> None:
    for option, why in _PIPELINE_OWNED.items():
        if option in kwargs:
            raise ConfigurationError(f"node({task_name!r}, ...) cannot take {option}=: {why}")
    metadata = kwargs.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise ConfigurationError(f"metadata must be a mapping, got {metadata!r}")
    clash = sorted({"pipeline", "pipeline_run", "node"} & set(metadata))
    if clash:
        raise ConfigurationError(
            f"metadata keys {clash} are written by the pipeline itself (pipeline name, run id, "
            "node id); use other keys"
        )


def coerce_join(value: object) -> JoinMode:
    if isinstance(value, JoinMode):
        return value
    try:
        return JoinMode(str(value))
    except ValueError:
        allowed = ", ".join(f"JoinMode.{mode.name}" for mode in JoinMode)
        raise ConfigurationError(f"join must be one of {allowed}, got {value!r}") from None


def topological_order(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Node ids of ``graph`` (node -> its upstream ids) with every upstream first.

    Deterministic: ties follow the mapping's order. Raises ``CircularDependency``
    naming one cycle in data-flow order (each node feeds the next).
    """
    deps = {node: tuple(upstream) for node, upstream in graph.items()}
    order: list[str] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root, root_deps in deps.items():
        if state.get(root) == 2:
            continue
        # Iterative DFS along "depends on" edges; the path is kept to report a cycle.
        path: list[str] = [root]
        iters = [iter(root_deps)]
        state[root] = 1
        while path:
            dep = next(iters[-1], None)
            if dep is None:
                done = path.pop()
                iters.pop()
                state[done] = 2
                order.append(done)
                continue
            if state.get(dep) == 1:
                # path[i:] follows "depends on"; reversed it is the data flow.
                cycle = path[path.index(dep) :]
                flow = [cycle[0], *reversed(cycle[1:]), cycle[0]]
                raise CircularDependency(flow)
            if state.get(dep) is None:
                state[dep] = 1
                path.append(dep)
                iters.append(iter(deps.get(dep, ())))
    return order
